#include "fakeproc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <curl/curl.h>

/* See fakeproc.h. */
char *
fake_private_dir(void)
{
    return tu_mkdtemp_prefix("fakekube");
}

/* See fakeproc.h. */
int
fake_start(struct fake *f, const char *const *extra)
{
    return fake_start_wrapped(f, NULL, extra);
}

/* See fakeproc.h. */
int
fake_start_wrapped(struct fake *f, const char *const *wrapper, const char *const *extra)
{
    char *argv[64];
    char state[4200], tls[4200];
    const char *exe = tu_build_path("tests/fakes/kube/prismlb-fake-kube");
    char exe_copy[4096];
    int n = 0;

    memset(f, 0, sizeof(*f));
    f->dir = fake_private_dir();
    if (!f->dir)
        return -1;
    snprintf(exe_copy, sizeof(exe_copy), "%s", exe);
    snprintf(state, sizeof(state), "%s/state", f->dir);
    snprintf(tls, sizeof(tls), "%s", f->dir);
    snprintf(f->log, sizeof(f->log), "%s/fake.log", f->dir);
    for (size_t i = 0; wrapper && wrapper[i] && n < 20; i++)
        argv[n++] = (char *)wrapper[i];
    argv[n++] = exe_copy;
    argv[n++] = "--tls-dir";
    argv[n++] = tls;
    argv[n++] = "--state-file";
    argv[n++] = state;
    for (size_t i = 0; extra && extra[i] && n < 62; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    if (tu_spawn(&f->proc, argv, NULL, f->log) < 0)
        return -1;
    return fake_wait_ready(f, state, wrapper ? 60000 : 10000);
}

/* See fakeproc.h. */
int
fake_wait_ready(struct fake *f, const char *state, int timeout_ms)
{
    char line[256];
    FILE *sf;

    if (tu_wait_line(state, "ready", line, sizeof(line), timeout_ms) < 0)
        return -1;
    sf = fopen(state, "r");
    if (!sf)
        return -1;
    while (fgets(line, sizeof(line), sf)) {
        int idx;
        char url[128];
        if (sscanf(line, "server %d %127s", &idx, url) == 2 && idx >= 0 && idx < 8) {
            snprintf(f->server[idx], sizeof(f->server[idx]), "%s", url);
            if (idx + 1 > f->nservers)
                f->nservers = idx + 1;
        } else if (sscanf(line, "admin %127s", url) == 1) {
            snprintf(f->admin, sizeof(f->admin), "%s", url);
        }
    }
    fclose(sf);
    return f->nservers > 0 && f->admin[0] ? 0 : -1;
}

/* See fakeproc.h. */
int
fake_stop(struct fake *f)
{
    int st = -1;
    if (f->proc.pid > 0)
        st = tu_stop(&f->proc, SIGTERM, 10000);
    if (st != 0 && f->dir) {
        char *log = tu_read_file(f->log, NULL);
        fprintf(stderr, "fake log:\n%s\n", log ? log : "(none)");
        free(log);
    }
    tu_rmdtemp(&f->dir);
    return st;
}

static size_t
collect(char *data, size_t size, size_t nmemb, void *arg)
{
    struct http_res *res = arg;
    size_t n = size * nmemb;
    char *b = res->body;
    if (res->len + n + 1 > res->cap) {
        size_t cap = res->cap ? res->cap : 4096;
        while (cap < res->len + n + 1)
            cap *= 2; /* geometric: large watch bodies stay linear */
        b = realloc(res->body, cap);
        if (!b)
            return 0;
        res->cap = cap;
    }
    memcpy(b + res->len, data, n);
    res->body = b;
    for (size_t i = 0; i < n; i++) {
        if (data[i] != '\n')
            continue;
        if (res->nlines == res->lines_cap) {
            size_t cap = res->lines_cap ? res->lines_cap * 2 : 64;
            size_t *le = realloc(res->line_end, cap * sizeof(*le));
            if (!le)
                return 0;
            res->line_end = le;
            res->lines_cap = cap;
        }
        res->line_end[res->nlines++] = res->len + i;
    }
    res->len += n;
    b[res->len] = '\0';
    return n;
}

static int
perform(const char *method, const char *url, const char *ctype, const char *body, const char *dir,
        const char *token, int timeout_ms, struct http_res *res)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char buf[4300];
    int rc;

    memset(res, 0, sizeof(*res));
    res->body = calloc(1, 1);
    if (!c || !res->body) {
        if (c)
            curl_easy_cleanup(c);
        return -1;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, res);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "fake-kube-test/1");
    if (dir) {
        snprintf(buf, sizeof(buf), "%s/ca.crt", dir);
        curl_easy_setopt(c, CURLOPT_CAINFO, buf);
    }
    if (dir && !token) {
        snprintf(buf, sizeof(buf), "%s/client.crt", dir);
        curl_easy_setopt(c, CURLOPT_SSLCERT, buf);
        snprintf(buf, sizeof(buf), "%s/client.key", dir);
        curl_easy_setopt(c, CURLOPT_SSLKEY, buf);
    }
    if (token && token[0]) {
        snprintf(buf, sizeof(buf), "Authorization: Bearer %s", token);
        h = curl_slist_append(h, buf);
    }
    if (ctype) {
        snprintf(buf, sizeof(buf), "Content-Type: %s", ctype);
        h = curl_slist_append(h, buf);
    }
    if (h)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    rc = curl_easy_perform(c);
    res->curl_code = rc;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &res->status);
    curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &res->seconds);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return res->status > 0 ? 0 : -1;
}

/* See fakeproc.h. */
int
fake_api(struct fake *f, int srv, const char *method, const char *path, const char *ctype,
         const char *body, int use_cert, const char *token, int timeout_ms, struct http_res *res)
{
    char url[4300];
    snprintf(url, sizeof(url), "%s%s", f->server[srv], path);
    if (!use_cert && !token) {
        /* Trust the CA but present no credentials. */
        return perform(method, url, ctype, body, f->dir, "", timeout_ms, res);
    }
    return perform(method, url, ctype, body, f->dir, token, timeout_ms, res);
}

/* See fakeproc.h. */
int
fake_admin(struct fake *f, const char *method, const char *path, const char *body,
           struct http_res *res)
{
    char url[4300];
    snprintf(url, sizeof(url), "%s%s", f->admin, path);
    return perform(method, url, body ? "application/json" : NULL, body, NULL, NULL, 10000, res);
}

/* See fakeproc.h. */
void
http_res_free(struct http_res *res)
{
    free(res->body);
    free(res->line_end);
    res->body = NULL;
    res->line_end = NULL;
    res->nlines = res->lines_cap = 0;
    res->len = res->cap = 0;
}

/* See fakeproc.h. */
int
ws_open(struct fake *f, int srv, const char *path, struct watch_stream *w)
{
    char url[4300], buf[4300];
    CURL *c;

    memset(w, 0, sizeof(*w));
    w->res.body = calloc(1, 1);
    w->multi = curl_multi_init();
    w->easy = c = curl_easy_init();
    if (!w->res.body || !w->multi || !c)
        return -1;
    snprintf(url, sizeof(url), "%s%s", f->server[srv], path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &w->res);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "fake-kube-test/1");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
    snprintf(buf, sizeof(buf), "%s/ca.crt", f->dir);
    curl_easy_setopt(c, CURLOPT_CAINFO, buf);
    snprintf(buf, sizeof(buf), "%s/client.crt", f->dir);
    curl_easy_setopt(c, CURLOPT_SSLCERT, buf);
    snprintf(buf, sizeof(buf), "%s/client.key", f->dir);
    curl_easy_setopt(c, CURLOPT_SSLKEY, buf);
    curl_multi_add_handle(w->multi, c);
    return 0;
}

static void
ws_pump(struct watch_stream *w, int ms)
{
    int running = 0, left;
    CURLMsg *msg;
    size_t before;
    if (w->done)
        return;
    /* Read what is there (curl takes one buffer per call, and data already
     * inside TLS does not wake poll), then wait for more. */
    do {
        before = w->res.len;
        curl_multi_perform(w->multi, &running);
    } while (w->res.len != before && running);
    if (running)
        curl_multi_poll(w->multi, NULL, 0, ms, NULL);
    curl_multi_perform(w->multi, &running);
    while ((msg = curl_multi_info_read(w->multi, &left))) {
        if (msg->msg == CURLMSG_DONE) {
            w->done = 1;
            w->curl_code = msg->data.result;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &w->res.status);
        }
    }
}

static int
count_lines(const struct watch_stream *w)
{
    return (int)w->res.nlines;
}

/* See fakeproc.h. */
int
ws_wait_lines(struct watch_stream *w, int n, int timeout_ms)
{
    long long deadline = tu_now_ms() + timeout_ms;
    while (count_lines(w) < n && !w->done && tu_now_ms() < deadline)
        ws_pump(w, 20);
    return count_lines(w);
}

/* See fakeproc.h. */
int
ws_wait_end(struct watch_stream *w, int timeout_ms)
{
    long long deadline = tu_now_ms() + timeout_ms;
    while (!w->done && tu_now_ms() < deadline)
        ws_pump(w, 20);
    return w->done;
}

/* See fakeproc.h. */
json_t *
ws_event(struct watch_stream *w, int i)
{
    size_t start, end;
    if (i < 0 || (size_t)i >= w->res.nlines)
        return NULL;
    start = i == 0 ? 0 : w->res.line_end[i - 1] + 1;
    end = w->res.line_end[i];
    return json_loadb(w->res.body + start, end - start, 0, NULL);
}

/* See fakeproc.h. */
void
ws_close(struct watch_stream *w)
{
    if (w->easy) {
        curl_multi_remove_handle(w->multi, w->easy);
        curl_easy_cleanup(w->easy);
    }
    if (w->multi)
        curl_multi_cleanup(w->multi);
    http_res_free(&w->res);
    memset(w, 0, sizeof(*w));
}

/* See fakeproc.h. */
json_t *
res_json(const struct http_res *r)
{
    return r->body ? json_loads(r->body, 0, NULL) : NULL;
}
