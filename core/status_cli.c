/*
 * status_cli: `prismlb status [--url URL] [-o json|table]`, what a running
 * daemon knows, read from its probe server's /status and printed in
 * kubectl-like columns: per proxy instance each upstream's health,
 * readiness, tier, smoothed RTT, active connections and draining state;
 * per reconciler instance each Service's balancer, targets, last error and
 * next check; per leader instance the Lease and its holder.
 *
 * A command-line tool, not the daemon: it may block (one bounded HTTP GET).
 */
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status_cli.h"

#define MAX_BODY (8u << 20)
#define MAX_COLS 8
#define MAX_ROWS 4096

struct body {
    char *p;
    size_t n;
    int too_big;
};

static size_t
on_data(char *data, size_t size, size_t nmemb, void *arg)
{
    struct body *b = arg;
    size_t len = size * nmemb;
    if (b->n + len > MAX_BODY) {
        b->too_big = 1;
        return 0;
    }
    char *np = realloc(b->p, b->n + len + 1);
    if (!np)
        return 0;
    b->p = np;
    memcpy(b->p + b->n, data, len);
    b->n += len;
    b->p[b->n] = '\0';
    return len;
}

/* GET url; the parsed JSON (new) or NULL with a message on stderr. */
static json_t *
fetch(const char *url)
{
    struct body b = {0};
    long code = 0;
    json_t *doc = NULL;
    json_error_t je;
    CURL *h = curl_easy_init();
    if (!h) {
        fprintf(stderr, "prismlb status: cannot initialise libcurl\n");
        return NULL;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(h); /* lint: allow-blocking (the status CLI, no loop) */
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        fprintf(stderr, "prismlb status: %s: %s\n", url,
                b.too_big ? "the answer is larger than 8 MiB" : curl_easy_strerror(rc));
    } else if (code != 200) {
        fprintf(stderr, "prismlb status: %s: HTTP %ld%s%s", url, code, b.p ? ": " : "\n",
                b.p ? b.p : "");
    } else if (!(doc = json_loadb(b.p ? b.p : "", b.n, 0, &je)) || !json_is_object(doc)) {
        fprintf(stderr, "prismlb status: %s: not a status document (%s)\n", url,
                doc ? "not a JSON object" : je.text);
        json_decref(doc);
        doc = NULL;
    }
    free(b.p);
    return doc;
}

/* A table of strings printed with kubectl's layout: upper-case headers,
 * columns padded to the widest cell plus three spaces. */
struct table {
    const char *head[MAX_COLS];
    size_t ncols;
    char *cell[MAX_ROWS][MAX_COLS];
    size_t nrows;
};

static void
row_add(struct table *t, const char *const *cells)
{
    if (t->nrows >= MAX_ROWS)
        return;
    for (size_t i = 0; i < t->ncols; i++)
        t->cell[t->nrows][i] = strdup(cells[i] ? cells[i] : "");
    t->nrows++;
}

static void
table_print(struct table *t, FILE *out)
{
    size_t w[MAX_COLS];
    if (t->nrows == 0)
        return;
    for (size_t c = 0; c < t->ncols; c++) {
        w[c] = strlen(t->head[c]);
        for (size_t r = 0; r < t->nrows; r++)
            if (t->cell[r][c] && strlen(t->cell[r][c]) > w[c])
                w[c] = strlen(t->cell[r][c]);
    }
    for (size_t c = 0; c < t->ncols; c++) {
        if (c + 1 < t->ncols)
            fprintf(out, "%-*s   ", (int)w[c], t->head[c]);
        else
            fprintf(out, "%s\n", t->head[c]);
    }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *v = t->cell[r][c] ? t->cell[r][c] : "";
            if (c + 1 < t->ncols)
                fprintf(out, "%-*s   ", (int)w[c], v);
            else
                fprintf(out, "%s\n", v);
        }
    }
}

static void
table_free(struct table *t)
{
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++)
            free(t->cell[r][c]);
    t->nrows = 0;
}

static const char *
str_or(const json_t *v, const char *dflt)
{
    const char *s = json_string_value(v);
    return s && *s ? s : dflt;
}

/* "yes"/"no"/"-" of a JSON boolean or null. */
static const char *
yes_no(const json_t *v, const char *yes, const char *no)
{
    return json_is_true(v) ? yes : json_is_false(v) ? no : "-";
}

/* A duration in seconds as kubectl prints ages: 45s, 4m50s, 2h3m. */
static void
fmt_seconds(const json_t *v, char *buf, size_t len)
{
    if (!json_is_number(v)) {
        snprintf(buf, len, "-");
        return;
    }
    long long s = (long long)json_number_value(v);
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(buf, len, "%llds", s);
    else if (s < 3600)
        snprintf(buf, len, "%lldm%llds", s / 60, s % 60);
    else
        snprintf(buf, len, "%lldh%lldm", s / 3600, (s % 3600) / 60);
}

static void
proxy_rows(struct table *t, const char *inst, const json_t *st)
{
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(st, "upstreams"), i, u)
    {
        char tier[16] = "-", rtt[32] = "-", conns[24];
        const json_t *tv = json_object_get(u, "tier"), *rv = json_object_get(u, "rtt_ms");
        if (json_is_integer(tv))
            snprintf(tier, sizeof(tier), "%lld", (long long)json_integer_value(tv));
        if (json_is_number(rv))
            snprintf(rtt, sizeof(rtt), "%.3gms", json_number_value(rv));
        snprintf(conns, sizeof(conns), "%lld",
                 (long long)json_integer_value(json_object_get(u, "connections")));
        const char *cells[] = {inst,
                               str_or(json_object_get(u, "address"), "?"),
                               yes_no(json_object_get(u, "healthy"), "healthy", "unhealthy"),
                               yes_no(json_object_get(u, "ready"), "ready", "not-ready"),
                               tier,
                               rtt,
                               conns,
                               yes_no(json_object_get(u, "draining"), "yes", "no")};
        row_add(t, cells);
    }
}

static void
reconciler_rows(struct table *t, const char *inst, const json_t *st)
{
    size_t i, k;
    json_t *s, *ip;
    json_array_foreach(json_object_get(st, "services"), i, s)
    {
        char id[24] = "<none>", next[32], targets[1024] = "";
        const json_t *idv = json_object_get(s, "balancer_id");
        if (json_is_integer(idv))
            snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(idv));
        json_array_foreach(json_object_get(s, "targets"), k, ip)
        {
            size_t n = strlen(targets);
            snprintf(targets + n, sizeof(targets) - n, "%s%s", n ? "," : "", str_or(ip, "?"));
        }
        fmt_seconds(json_object_get(s, "next_check_s"), next, sizeof(next));
        const char *cells[] = {inst,
                               str_or(json_object_get(s, "service"), "?"),
                               id,
                               str_or(json_object_get(s, "balancer"), "<none>"),
                               targets[0] ? targets : "<none>",
                               str_or(json_object_get(s, "last_error"), "<none>"),
                               next};
        row_add(t, cells);
    }
}

static void
leader_rows(struct table *t, const char *inst, const json_t *st)
{
    const char *cells[] = {inst, str_or(json_object_get(st, "lease"), "?"),
                           str_or(json_object_get(st, "holder"), "<none>"),
                           yes_no(json_object_get(st, "leading"), "yes", "no")};
    row_add(t, cells);
}

/* Print doc's instances as three tables; 0. */
static int
print_tables(const json_t *doc, FILE *out)
{
    static const struct {
        const char *head[MAX_COLS];
        size_t ncols;
    } heads[] = {
        {{"PROXY", "UPSTREAM", "HEALTH", "READY", "TIER", "RTT", "CONNECTIONS", "DRAINING"}, 8},
        {{"RECONCILER", "SERVICE", "BALANCER-ID", "BALANCER", "TARGETS", "LAST-ERROR",
          "NEXT-CHECK"},
         7},
        {{"LEADER", "LEASE", "HOLDER", "LEADING"}, 4},
    };
    /* Zero-initialized, so in .bss: an initializer put their 3 x 256 KiB of
       cells into the binary's .data, 0.75 MiB of each image. */
    static struct table px, rc, ld;
    struct table *all[] = {&px, &rc, &ld};
    size_t i;
    json_t *x;
    int printed = 0;
    for (size_t k = 0; k < 3; k++) {
        memcpy(all[k]->head, heads[k].head, sizeof heads[k].head);
        all[k]->ncols = heads[k].ncols;
    }
    json_array_foreach(json_object_get(doc, "instances"), i, x)
    {
        const char *name = str_or(json_object_get(x, "name"), "?");
        const char *kind = str_or(json_object_get(json_object_get(x, "status"), "kind"), "");
        const json_t *st = json_object_get(x, "status");
        if (strcmp(kind, "proxy") == 0)
            proxy_rows(&px, name, st);
        else if (strcmp(kind, "reconciler") == 0)
            reconciler_rows(&rc, name, st);
        else if (strcmp(kind, "leader") == 0)
            leader_rows(&ld, name, st);
    }
    for (size_t k = 0; k < 3; k++) {
        if (!all[k]->nrows)
            continue;
        if (printed++)
            fputc('\n', out);
        table_print(all[k], out);
        table_free(all[k]);
    }
    if (!printed)
        fprintf(out, "No proxy, reconciler or leader instance reports a status.\n");
    return 0;
}

/* The usage line on f; returns rc, the exit status that goes with it. */
static int
usage(FILE *f, int rc)
{
    fprintf(f, "usage: %s\n", CORE_STATUS_SYNOPSIS);
    return rc;
}

/* The options of `prismlb status` (CORE_STATUS_SYNOPSIS). */
static const struct option status_opts[] = {
    {"url", required_argument, NULL, 'u'},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
core_status_cli(int argc, char **argv)
{
    const char *url = "http://127.0.0.1:7446", *output = "table";
    char full[2048];
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "u:o:h", status_opts, NULL)) != -1) {
        switch (o) {
        case 'h':
            return usage(stdout, 0);
        case 'u':
            url = optarg;
            break;
        case 'o':
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "table") != 0)
                return usage(stderr, 2);
            output = optarg;
            break;
        default:
            return usage(stderr, 2);
        }
    }
    if (optind < argc)
        return usage(stderr, 2);
    size_t ul = strlen(url);
    snprintf(full, sizeof(full), "%.*s/status", (int)(ul && url[ul - 1] == '/' ? ul - 1 : ul), url);
    json_t *doc = fetch(full);
    if (!doc)
        return 1;
    if (strcmp(output, "json") == 0) {
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    } else {
        print_tables(doc, stdout);
    }
    json_decref(doc);
    return 0;
}
