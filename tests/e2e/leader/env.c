#include "env.h"

#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

const struct le_timings le_short = {"3s", "2s", "500ms", 3.0, 2.0, 0.5};

double
le_wall(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

const char *
le_module_path_env(void)
{
    static const char *const dirs[] = {"modules", "tests/modules/writer", NULL};
    return tu_module_path_env(dirs);
}

/* An API request on the environment's server (prefix added). */
long
le_api(struct le_env *e, const char *method, const char *path, const char *body, const char *ctype,
       struct http_res *res)
{
    char full[1024];
    snprintf(full, sizeof(full), "%s%s", e->prefix, path);
    memset(res, 0, sizeof(*res));
    ck_assert_int_eq(fake_api(&e->f, 0, method, full,
                              body ? (ctype ? ctype : "application/json") : NULL, body, 1, NULL,
                              10000, res),
                     0);
    return res->status;
}

void
le_write_kubeconfig(struct le_env *e, const char *path)
{
    const struct tu_kubeconfig kc = {.server = e->base, .certdir = e->f.dir};
    ck_assert_int_eq(tu_write_kubeconfig(path, &kc), 0);
}

/* Start the fake, write the kubeconfig, create the shared object. */
void
le_env_start(struct le_env *e, int kcp)
{
    static const char *const extra[] = {"--history", "200000", NULL};
    memset(e, 0, sizeof(*e));
    ck_assert_int_eq(fake_start(&e->f, extra), 0);
    e->kcp = kcp;
    snprintf(e->prefix, sizeof(e->prefix), "%s", kcp ? LE_KCP_PREFIX : "");
    snprintf(e->base, sizeof(e->base), "%s%s", e->f.server[0], e->prefix);
    snprintf(e->kubeconfig, sizeof(e->kubeconfig), "%s/kubeconfig", e->f.dir);
    le_write_kubeconfig(e, e->kubeconfig);
    struct http_res r;
    long st = le_api(e, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                     "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                     "\"metadata\":{\"name\":\"shared-writes\"},\"spec\":{}}",
                     NULL, &r);
    ck_assert_msg(st == 201, "creating the shared object: %ld %s", st, r.body);
    http_res_free(&r);
}

void
le_env_stop(struct le_env *e)
{
    int st = fake_stop(&e->f);
    ck_assert_msg(st == 0, "the fake exited with status %d", st);
}

/* The election's Lease is where the environment says: in the workspace
 * with kcp (and then not at the root), else at the root. */
void
le_assert_lease_location(struct le_env *e)
{
    struct http_res r;
    const char *path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/prismlb-test";
    long st = le_api(e, "GET", path, NULL, NULL, &r);
    ck_assert_msg(st == 200, "GET %s%s: %ld %s", e->prefix, path, st, r.body);
    http_res_free(&r);
    if (e->kcp) {
        memset(&r, 0, sizeof(r));
        ck_assert_int_eq(fake_api(&e->f, 0, "GET", path, NULL, NULL, 1, NULL, 10000, &r), 0);
        ck_assert_msg(r.status == 404, "the Lease is also at the root: %ld", r.status);
        http_res_free(&r);
    }
}

/* Write the config of daemon d (extra: more leader settings, may be "";
 * more: more instances, each ending in ",", or NULL). */
void
le_daemon_config_more(struct le_env *e, struct le_daemon *d, const char *identity,
                      const struct le_timings *tm, const char *extra, const char *more)
{
    char buf[32768];
    tu_daemon_init(&d->td, e->f.dir, identity);
    snprintf(d->identity, sizeof(d->identity), "%s", identity);
    snprintf(d->trace, sizeof(d->trace), "%s/%s.trace", e->f.dir, identity);
    snprintf(
        buf, sizeof(buf),
        "log_level = \"info\";\n"
        "shutdown_grace = \"5s\";\n"
        "instances = (\n"
        "%s"
        "  { module = \"leader\"; name = \"leader\";\n"
        "    lease_namespace = \"default\"; lease_name = \"prismlb-test\";\n"
        "    identity = \"%s\"; kubeconfig = \"%s\";\n"
        "    lease_duration = \"%s\"; renew_deadline = \"%s\"; retry_period = \"%s\"; %s },\n"
        "  { module = \"writer\"; name = \"writer\"; gate = \"leader\";\n"
        "    identity = \"%s\"; interval = \"100ms\"; trace_file = \"%s\";\n"
        "    url = \"%s/apis/coordination.k8s.io/v1/namespaces/default/leases/shared-writes\";\n"
        "    ca_file = \"%s/ca.crt\"; cert_file = \"%s/client.crt\";\n"
        "    key_file = \"%s/client.key\"; }\n"
        ");\n",
        more ? more : "", identity, e->kubeconfig, tm->lease, tm->renew, tm->retry,
        extra ? extra : "", identity, d->trace, e->base, e->f.dir, e->f.dir, e->f.dir);
    ck_assert_int_eq(tu_write_file(d->td.conf, buf), 0);
}

void
le_daemon_config(struct le_env *e, struct le_daemon *d, const char *identity,
                 const struct le_timings *tm, const char *extra)
{
    le_daemon_config_more(e, d, identity, tm, extra, NULL);
}

void
le_daemon_spawn(struct le_daemon *d)
{
    char *env[] = {(char *)le_module_path_env(), NULL};
    tu_daemon_spawn(&d->td, NULL, NULL, env);
}

void
le_daemon_start(struct le_env *e, struct le_daemon *d, const char *identity,
                const struct le_timings *tm)
{
    le_daemon_config(e, d, identity, tm, "");
    le_daemon_spawn(d);
}

int
le_daemon_stop(struct le_daemon *d, int sig, int timeout_ms)
{
    return d->td.running ? tu_daemon_stop(&d->td, sig, timeout_ms) : 0;
}

int
le_daemon_signal_wait(struct le_daemon *d, int sig, int timeout_ms)
{
    if (!d->td.running)
        return 0;
    ck_assert_int_eq(kill(d->td.proc.pid, sig), 0);
    int exited = tu_wait_exit(&d->td.proc, timeout_ms);
    if (!exited) {
        le_daemon_stop(d, SIGKILL, 3000);
        return -1;
    }
    d->td.running = 0;
    return d->td.proc.status;
}

char *
le_daemon_log(const struct le_daemon *d)
{
    return tu_daemon_log(&d->td);
}

void
le_daemon_wait_log(struct le_daemon *d, const char *needle, int timeout_ms)
{
    int rc = tu_daemon_wait_log(&d->td, needle, timeout_ms);
    if (rc < 0)
        tu_daemon_fail(&d->td, "no \"%s\" in the log (the daemon %s)", needle,
                       rc == -2 ? "exited" : "ran on");
}

json_t *
le_request_log(struct le_env *e)
{
    struct http_res r;
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(fake_admin(&e->f, "GET", "/requests", NULL, &r), 0);
    json_t *j = res_json(&r);
    http_res_free(&r);
    ck_assert_msg(j != NULL, "the fake's request log is not JSON");
    return j;
}

size_t
le_request_count(json_t *j)
{
    return json_array_size(json_object_get(j, "items"));
}

int
le_request_at(json_t *j, size_t i, struct le_request *out)
{
    json_t *it = json_array_get(json_object_get(j, "items"), i);
    out->ua = json_string_value(json_object_get(it, "userAgent"));
    out->method = json_string_value(json_object_get(it, "method"));
    out->path = json_string_value(json_object_get(it, "path"));
    out->time = json_real_value(json_object_get(it, "time"));
    out->status = (int)json_integer_value(json_object_get(it, "status"));
    return out->ua && out->method && out->path ? 0 : -1;
}

/* The writes of the request log, in log order (new array, *n entries). */
struct le_write *
le_writes(struct le_env *e, size_t *n)
{
    json_t *j = le_request_log(e);
    size_t cap = le_request_count(j) + 1, k = 0;
    struct le_write *w = calloc(cap, sizeof(*w));
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i + 1 < cap; i++) {
        struct le_request q;
        if (le_request_at(j, i, &q) < 0 || strcmp(q.method, "PATCH") != 0 ||
            strncmp(q.ua, "prismlb-writer/", 15) != 0 || !strstr(q.path, "/shared-writes"))
            continue;
        const char *id = q.ua + 15, *slash = strrchr(id, '/');
        if (!slash || (size_t)(slash - id) >= sizeof(w[k].id))
            continue;
        memcpy(w[k].id, id, (size_t)(slash - id));
        w[k].id[slash - id] = '\0';
        w[k].term = atoi(slash + 1);
        w[k].t = q.time;
        w[k].status = q.status;
        k++;
    }
    json_decref(j);
    *n = k;
    return w;
}

/* Arrival time (wall seconds) of the last successful write of the
 * election's Lease by identity's leader instance (its User-Agent names
 * it), or 0. */
double
le_last_lease_write(struct le_env *e, const char *identity)
{
    char tag[128];
    double last = 0;
    snprintf(tag, sizeof(tag), "(leader; %s)", identity);
    json_t *j = le_request_log(e);
    for (size_t i = 0; i < le_request_count(j); i++) {
        struct le_request q;
        if (le_request_at(j, i, &q) == 0 && strstr(q.ua, tag) && strstr(q.path, "/leases") &&
            (strcmp(q.method, "PUT") == 0 || strcmp(q.method, "POST") == 0) && q.status / 100 == 2)
            last = q.time > last ? q.time : last;
    }
    json_decref(j);
    return last;
}

/* Wait (bounded) for the first write after `after` (wall seconds) by an
 * identity other than `not_id` (NULL: anyone). 0 and *out, or -1. */
int
le_wait_write(struct le_env *e, const char *not_id, double after, int timeout_ms,
              struct le_write *out)
{
    long long end = tu_now_ms() + timeout_ms;
    do {
        size_t n;
        struct le_write *w = le_writes(e, &n);
        for (size_t i = 0; i < n; i++) {
            if (w[i].t > after && (!not_id || strcmp(w[i].id, not_id) != 0)) {
                *out = w[i];
                free(w);
                return 0;
            }
        }
        free(w);
        tu_sleep_ms(50);
    } while (tu_now_ms() < end);
    return -1;
}

/* The identity that wrote last (the leader once writes flow). */
int
le_last_writer(struct le_env *e, struct le_write *out)
{
    size_t n;
    struct le_write *w = le_writes(e, &n);
    int rc = n ? 0 : -1;
    if (n)
        *out = w[n - 1];
    free(w);
    return rc;
}

/* No two identities' terms overlap: each (identity, term) of the log is an
 * interval [first write, last write]; sorted by start, each must begin
 * after the previous ones ended. Returns the number of terms, and fails the
 * test on an overlap, naming both. */
int
le_check_no_overlap(struct le_env *e)
{
    size_t n;
    struct le_write *w = le_writes(e, &n);
    struct term {
        char id[64];
        int term;
        double first, last;
        int writes;
    } *t = calloc(n + 1, sizeof(*t));
    ck_assert_ptr_nonnull(t);
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j;
        for (j = 0; j < nt; j++) {
            if (t[j].term == w[i].term && strcmp(t[j].id, w[i].id) == 0)
                break;
        }
        if (j == nt) {
            snprintf(t[nt].id, sizeof(t[nt].id), "%s", w[i].id);
            t[nt].term = w[i].term;
            t[nt].first = w[i].t;
            nt++;
        }
        t[j].last = w[i].t;
        t[j].writes++;
    }
    /* The log is in arrival order: terms are already sorted by start. */
    for (size_t j = 1; j < nt; j++) {
        for (size_t k = 0; k < j; k++) {
            ck_assert_msg(t[k].last < t[j].first,
                          "terms overlap: %s term %d wrote %.3f..%.3f (%d writes), %s term %d "
                          "started at %.3f",
                          t[k].id, t[k].term, t[k].first, t[k].last, t[k].writes, t[j].id,
                          t[j].term, t[j].first);
        }
    }
    free(t);
    free(w);
    return (int)nt;
}

int
le_mode_arg(int argc, char **argv, int min_argc, const char *usage)
{
    if (argc < min_argc || argc < 2 ||
        (strcmp(argv[1], "root") != 0 && strcmp(argv[1], "kcp") != 0)) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        exit(2);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    return strcmp(argv[1], "kcp") == 0;
}
