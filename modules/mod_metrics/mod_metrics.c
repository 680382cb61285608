/*
 * mod_metrics: the probe and metrics HTTP server of prismlb.
 *
 *   GET /healthz   liveness: 200 "ok" while the event loop's own heartbeat
 *                  (this instance's timer, check "event-loop") and every
 *                  instance's liveness checks beat within
 *                  liveness_threshold; 503 naming the stale ones otherwise.
 *   GET /livez     the same as /healthz.
 *   GET /readyz    readiness: 200 iff every readiness check is ok; 503
 *                  naming those that are not.
 *                  They take ?verbose and ?exclude=<instance>/<check>, and
 *                  /readyz/<instance>/<check> (also under /healthz and
 *                  /livez) answers for that one check (kube-apiserver's
 *                  paths and format).
 *   GET /metrics   the daemon's registry in Prometheus text format 0.0.4,
 *                  with process metrics and prismlb_build_info.
 *   GET /status    every instance's status as JSON (`prismlb status`), with
 *                  the probes.
 *
 * /metrics is rendered once per loop iteration at most: a scrape waits for
 * a render made on the next iteration (a zero timer), which answers every
 * scrape waiting then; so a flood of scrapers costs one render per
 * iteration, and every answer was rendered after its request arrived. The
 * process metrics (which read procfs) are refreshed at most every
 * MM_PROC_MIN_MS.
 *
 * HEAD is served like GET; OPTIONS answers 204 with Allow; every other
 * method gets 405 with Allow; unknown paths 404. Several instances may run
 * in one daemon (a public /metrics, a loopback probe port).
 *
 * Built against <prismlb/module.h> only.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "mm.h"

#define ALLOW_HEADER "Allow: GET, HEAD, OPTIONS"
#define TEXT_PLAIN "text/plain; charset=utf-8"
#define EXPOSITION_0_0_4 "text/plain; version=0.0.4; charset=utf-8"

/* Shortest time between two refreshes of the process metrics, and how
 * many scrapes may wait for one render (the core's HTTP server keeps at
 * most 256 connections, each with one request in a handler at a time). */
#define MM_PROC_MIN_MS 100
#define MM_MAX_WAITING 256

struct mm {
    const struct plb_host *host; /* borrowed for the instance's life */
    plb_ctx *ctx;
    const struct mm_config *cfg; /* borrowed, the daemon's */
    const char *bind_host;       /* bind_address, the proxy's, or 127.0.0.1 */
    char *bind_copy;             /* the proxy's, copied (owned), or NULL */
    struct mm_resolve *res;      /* resolving bind_host, or NULL */
    plb_timer *retry;            /* the next resolution after a failure */
    plb_timer *beat;             /* loop heartbeat */
    plb_http_server *srv;
    plb_timer *render; /* zero timer: answers the waiting scrapes */
    int64_t proc_ms;   /* last refresh of the process metrics */
    int proc_done;     /* proc_ms is set */
    size_t nwaiting;
    plb_http_exchange *waiting[MM_MAX_WAITING];
    struct mm_proc proc;
    int running;     /* between a successful start and stop */
    struct mm *next; /* in `running_list` while running */
};

/* Instances of this module that are running in this daemon, so that each
 * can tell its siblings' loop heartbeats from other checks. The daemon has
 * one loop thread, and only this file touches the list. */
static struct mm *running_list;

/* ------------------------------------------------------------------ */
/* Settings                                                             */

/* Is s a hostname as RFC 1123 allows (labels of letters, digits and '-',
 * not starting or ending with '-', at most 63 bytes; 253 in all; the last
 * label not all digits, so that "300.1.2.3" is a bad address, not a name,
 * as RFC 1123 section 2.1 has it)? Pure. */
static int
is_rfc1123_hostname(const char *s)
{
    size_t total = strlen(s), label = 0;
    int digits_only = 1;
    if (total == 0 || total > 253)
        return 0;
    for (size_t i = 0; i < total; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '.') {
            if (label == 0 || s[i - 1] == '-')
                return 0;
            label = 0;
            digits_only = 1;
            continue;
        }
        if (!isalnum(ch) && ch != '-')
            return 0;
        if (ch == '-' && label == 0)
            return 0;
        if (!isdigit(ch))
            digits_only = 0;
        if (++label > 63)
            return 0;
    }
    return s[total - 1] != '-' && s[total - 1] != '.' && !digits_only;
}

/* Is s an IPv4 or IPv6 literal (IPv6 with or without brackets)? Pure. */
static int
is_ip_literal(const char *s)
{
    unsigned char addr[16];
    char v6[64];
    size_t n = strlen(s);
    if (inet_pton(AF_INET, s, addr) == 1)
        return 1;
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']' && n - 2 < sizeof(v6)) {
        memcpy(v6, s + 1, n - 2);
        v6[n - 2] = '\0';
        s = v6;
    }
    return inet_pton(AF_INET6, s, addr) == 1;
}

/* bind_address: an IP literal or an RFC 1123 hostname (resolved off the
 * loop at start); unset means the proxy's bind_address. */
static const char *
validate_bind_address(const void *value)
{
    const char *s = *(const char *const *)value;
    if (!s)
        return NULL;
    if (!*s)
        return "must not be empty";
    if (is_ip_literal(s) || is_rfc1123_hostname(s))
        return NULL;
    return "must be an IP address or an RFC 1123 hostname";
}

/* clang-format off */
static const struct plb_setting mm_settings[] = {
    {.name = "bind_address", .type = PLB_SET_STRING,
     .offset = offsetof(struct mm_config, bind_address), .validate = validate_bind_address,
     .env = "EP_HEALTH_BIND_ADDRESS",
     .doc = "Address the HTTP server listens on: an IP address or an RFC 1123 hostname "
            "(resolved without blocking, to its first IPv4 address when it has one); unset: "
            "the bind_address of the config's tcp_proxy instance (extractedprism's "
            "--health-bind-address default), else 127.0.0.1."},
    PLB_SETTING_LISTEN_PORT("port", offsetof(struct mm_config, port), "bind_address",
        .def = "7446", .env = "EP_HEALTH_PORT", .doc = "TCP port of the HTTP server (the spec's health port)."),
    {.name = "liveness_interval", .type = PLB_SET_DURATION,
     .offset = offsetof(struct mm_config, liveness_interval_ms), .def = "5s", .min = 1000,
     .env = "EP_LIVENESS_INTERVAL",
     .doc = "How often the event loop's heartbeat (check \"event-loop\") beats."},
    {.name = "liveness_threshold", .type = PLB_SET_DURATION,
     .offset = offsetof(struct mm_config, liveness_threshold_ms), .def = "15s", .min = 1000,
     .env = "EP_LIVENESS_THRESHOLD",
     .doc = "Longest time since a liveness check's last heartbeat before /healthz fails; must "
            "be greater than liveness_interval."},
    {.name = "metrics", .type = PLB_SET_BOOL, .offset = offsetof(struct mm_config, metrics),
     .def = "true", .doc = "Serve /metrics."},
    {.name = "probes", .type = PLB_SET_BOOL, .offset = offsetof(struct mm_config, probes),
     .def = "true", .doc = "Serve /healthz and /readyz."},
    PLB_SETTINGS_END,
};
/* clang-format on */

/* Rules between settings. Runs for --check-config too: no side effects.
 * (The proxy role's rule "bind_port and health_port must differ" belongs to
 * the proxy module, which knows both ports.) */
static int
mm_check(const struct plb_host *host, plb_check *chk, const void *config, plb_check_report *report)
{
    const struct mm_config *cfg = config;
    int n = 0;
    (void)host;
    if (cfg->liveness_threshold_ms <= cfg->liveness_interval_ms) {
        report(chk, "liveness_threshold", "must be greater than liveness_interval (%.3gs)",
               (double)cfg->liveness_interval_ms / 1000.0);
        n++;
    }
    if (!cfg->metrics && !cfg->probes) {
        report(chk, "probes",
               "metrics and probes are both false: the instance would serve "
               "nothing; enable one of them");
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* Siblings                                                             */

/* Is info (another instance's check) the loop heartbeat of a running
 * mod_metrics instance other than self (a struct mm)? The filter serve_probe
 * hands health.c: another instance's interval may be longer than our
 * threshold, so each judges only its own heartbeat. */
static int
is_sibling_loop_check(const void *self, const struct plb_health_info *info)
{
    if (strcmp(info->check, MM_LOOP_CHECK) != 0)
        return 0;
    for (const struct mm *m = running_list; m; m = m->next) {
        if (m != self && strcmp(m->host->links->instance_name(m->ctx), info->instance) == 0)
            return 1;
    }
    return 0;
}

static void
list_remove(struct mm *m)
{
    for (struct mm **p = &running_list; *p; p = &(*p)->next) {
        if (*p == m) {
            *p = m->next;
            m->next = NULL;
            return;
        }
    }
}

/* ------------------------------------------------------------------ */
/* HTTP                                                                 */

static void
reply_text(struct mm *m, plb_http_exchange *x, int status, const char *text,
           const char *const *headers)
{
    m->host->http->reply(x, status, TEXT_PLAIN, text, strlen(text), headers);
}

/* Answer /healthz, /livez or /readyz, or one check of it (check: the
 * "instance/check" after the probe's path, or NULL). */
static void
serve_probe(struct mm *m, plb_http_exchange *x, enum plb_health_kind kind, const char *check)
{
    static const char *const headers[] = {"Cache-Control: no-store",
                                          "X-Content-Type-Options: nosniff", NULL};
    const struct mm_health_filter filter = {.ignore = is_sibling_loop_check, .arg = m};
    struct mm_buf b = {.host = m->host};
    int ok;
    if (check) {
        ok = mm_health_eval_one(m->host, m->ctx, &filter, kind, m->cfg->liveness_threshold_ms,
                                check, &b);
        if (ok < 0) {
            mm_buf_free(&b);
            reply_text(m, x, 404, "404 page not found\n", NULL);
            return;
        }
        if (!b.oom) {
            m->host->http->reply(x, ok ? 200 : 500, TEXT_PLAIN, b.p, b.n, headers);
            mm_buf_free(&b);
            return;
        }
    } else {
        ok = mm_health_eval(m->host, m->ctx, &filter, kind, m->cfg->liveness_threshold_ms,
                            m->host->http->query(x), &b);
    }
    if (b.oom) {
        mm_buf_free(&b);
        reply_text(m, x, 500, "out of memory\n", NULL);
        return;
    }
    m->host->http->reply(x, ok ? 200 : 503, TEXT_PLAIN, b.p, b.n, headers);
    mm_buf_free(&b);
}

/* Render once and answer every waiting scrape with it. */
static void
render_now(struct mm *m)
{
    /* The host offers only the 0.0.4 renderer, so there is no OpenMetrics
     * answer to `Accept: application/openmetrics-text`: Prometheus then
     * falls back to this format, as the Content-Type tells it to. */
    int64_t now = m->host->loop->now_ms(m->ctx);
    size_t len = 0, n = m->nwaiting;
    char *text;

    m->nwaiting = 0;
    if (!m->proc_done || now - m->proc_ms >= MM_PROC_MIN_MS || now < m->proc_ms) {
        mm_proc_update(m->host, m->ctx, &m->proc);
        m->proc_ms = now;
        m->proc_done = 1;
    }
    text = m->host->metrics->render(m->ctx, &len);
    if (!text)
        PLB_LOG(m->host, m->ctx, PLB_LOG_ERROR, NULL, "cannot render the metrics: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (text)
            m->host->http->reply(m->waiting[i], 200, EXPOSITION_0_0_4, text, len, NULL);
        else
            reply_text(m, m->waiting[i], 500, "out of memory\n", NULL);
    }
    m->host->mem->free(text);
}

static void
on_render(plb_timer *t, void *arg)
{
    (void)t;
    render_now(arg);
}

static void
serve_metrics(struct mm *m, plb_http_exchange *x)
{
    m->waiting[m->nwaiting++] = x;
    if (m->nwaiting == MM_MAX_WAITING) {
        m->host->loop->timer_cancel(m->render);
        render_now(m);
        return;
    }
    if (m->host->loop->timer_pending(m->render))
        return;
    if (m->host->loop->timer_arm(m->render, 0, 0, 0) < 0) {
        PLB_LOG(m->host, m->ctx, PLB_LOG_ERROR, NULL, "cannot arm the render timer");
        render_now(m);
    }
}

/* /status: what every instance reports, as `prismlb status` reads it. */
static void
serve_status(struct mm *m, plb_http_exchange *x)
{
    static const char *const headers[] = {"Cache-Control: no-store", NULL};
    size_t len = 0;
    char *text;
    if (!PLB_HAS(m->host->links, status_render) || !m->host->links->status_render) {
        reply_text(m, x, 404, "404 page not found\n", NULL);
        return;
    }
    if (!(text = m->host->links->status_render(m->ctx, &len))) {
        reply_text(m, x, 500, "out of memory\n", NULL);
        return;
    }
    m->host->http->reply(x, 200, "application/json", text, len, headers);
    m->host->mem->free(text);
}

enum endpoint {
    EP_NONE = 0,
    EP_HEALTHZ,
    EP_READYZ,
    EP_METRICS,
    EP_STATUS,
};

/* The endpoint of path; *check gets the "instance/check" of a probe path
 * naming one check (/readyz/<instance>/<check>), else NULL. /livez is
 * /healthz, as kube-apiserver serves both. */
static enum endpoint
route(const struct mm *m, const char *path, const char **check)
{
    static const struct {
        const char *prefix;
        enum endpoint ep;
    } probes[] = {{"/healthz", EP_HEALTHZ}, {"/livez", EP_HEALTHZ}, {"/readyz", EP_READYZ}};
    *check = NULL;
    for (size_t i = 0; m->cfg->probes && i < sizeof(probes) / sizeof(probes[0]); i++) {
        size_t n = strlen(probes[i].prefix);
        if (strncmp(path, probes[i].prefix, n) != 0)
            continue;
        if (path[n] == '\0')
            return probes[i].ep;
        if (path[n] == '/' && path[n + 1]) {
            *check = path + n + 1;
            return probes[i].ep;
        }
    }
    if (m->cfg->metrics && strcmp(path, "/metrics") == 0)
        return EP_METRICS;
    if (m->cfg->probes && strcmp(path, "/status") == 0)
        return EP_STATUS;
    return EP_NONE;
}

/* Every request of the server: the routing and method rules, then the
 * endpoint. Replies before returning. */
static void
on_request(plb_http_exchange *x, void *arg)
{
    static const char *const allow[] = {ALLOW_HEADER, NULL};
    struct mm *m = arg;
    const char *path = m->host->http->path(x);
    const char *method = m->host->http->method(x);
    const char *check;
    enum endpoint ep = route(m, path ? path : "", &check);

    if (ep == EP_NONE) {
        reply_text(m, x, 404, "404 page not found\n", NULL);
        return;
    }
    if (!method || (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)) {
        if (method && strcmp(method, "OPTIONS") == 0)
            m->host->http->reply(x, 204, NULL, NULL, 0, allow);
        else
            reply_text(m, x, 405, "405 method not allowed\n", allow);
        return;
    }
    switch (ep) {
    case EP_HEALTHZ:
        serve_probe(m, x, PLB_HEALTH_LIVE, check);
        break;
    case EP_READYZ:
        serve_probe(m, x, PLB_HEALTH_READY, check);
        break;
    case EP_METRICS:
        serve_metrics(m, x);
        break;
    case EP_STATUS:
        serve_status(m, x);
        break;
    case EP_NONE:
        break;
    }
}

/* ------------------------------------------------------------------ */
/* Lifecycle                                                            */

static void
on_beat(plb_timer *t, void *arg)
{
    struct mm *m = arg;
    (void)t;
    m->host->links->health_beat(m->ctx, MM_LOOP_CHECK);
}

static void on_retry(plb_timer *t, void *arg);
static void on_resolved(void *arg, const char *ip, const char *why);
static void mm_destroy(void *state);

static int
mm_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    const struct mm_config *cfg = config;
    struct mm *m;
    /* zeroed: mm_destroy frees what was made so far */
    if (PLB_STATE_NEW(&m, host, ctx, cfg) < 0)
        return -ENOMEM;
    m->bind_host = cfg->bind_address;
    if (!m->bind_host && PLB_HAS(host->links, instance_setting_str) &&
        host->links->instance_setting_str) {
        /* copied: that instance may restart on a reload while this one
         * runs on */
        const char *p = host->links->instance_setting_str(ctx, "tcp_proxy", "bind_address");
        size_t n = p ? strlen(p) + 1 : 0;
        if (p && !(m->bind_copy = host->mem->alloc(n)))
            goto fail;
        if (p)
            memcpy(m->bind_copy, p, n);
        m->bind_host = m->bind_copy;
    }
    if (!m->bind_host)
        m->bind_host = "127.0.0.1";
    m->retry = host->loop->timer_new(ctx, on_retry, m);
    m->render = host->loop->timer_new(ctx, on_render, m);
    m->beat = host->loop->timer_new(ctx, on_beat, m);
    if (!m->beat || !m->render || !m->retry)
        goto fail;
    *state = m;
    return 0;
fail:
    mm_destroy(m);
    return -ENOMEM;
}

/* Serve on ip (a literal) and the configured port. 0 or -errno (logged). */
static int
listen_at(struct mm *m, const char *ip)
{
    const struct plb_host *h = m->host;
    char port[16];
    int rc = 0;
    m->srv = h->http->server_new(m->ctx, ip, (int)m->cfg->port, &rc);
    if (!m->srv) {
        if (rc >= 0)
            rc = -EIO;
        snprintf(port, sizeof(port), "%d", (int)m->cfg->port);
        PLB_LOG(h, m->ctx, PLB_LOG_ERROR,
                PLB_KV("address", ip, "port", port, "error", strerror(-rc)),
                "cannot start the HTTP server");
        return rc;
    }
    /* A prefix route of "/" sends every path here, so that unknown paths
     * and methods get this module's answers. */
    if ((rc = h->http->route(m->srv, "/", on_request, m)) < 0) {
        h->http->server_free(m->srv);
        m->srv = NULL;
        return rc;
    }
    snprintf(port, sizeof(port), "%d", h->http->server_port(m->srv));
    PLB_LOG(h, m->ctx, PLB_LOG_INFO,
            PLB_KV("address", ip, "port", port, "host", m->bind_host, "metrics",
                   m->cfg->metrics ? "true" : "false", "probes", m->cfg->probes ? "true" : "false"),
            "listening");
    return 0;
}

static void
on_resolved(void *arg, const char *ip, const char *why)
{
    struct mm *m = arg;
    m->res = NULL;
    if (ip && listen_at(m, ip) == 0)
        return;
    if (!ip)
        PLB_LOG(m->host, m->ctx, PLB_LOG_ERROR, PLB_KV("host", m->bind_host, "error", why),
                "cannot resolve bind_address; retrying in 1s");
    if (m->host->loop->timer_arm(m->retry, 1000, 0, 0) < 0)
        PLB_LOG(m->host, m->ctx, PLB_LOG_ERROR, NULL, "cannot arm the retry timer");
}

static void
on_retry(plb_timer *t, void *arg)
{
    struct mm *m = arg;
    (void)t;
    if (!m->running || m->srv || m->res)
        return;
    if (!(m->res = mm_resolve_start(m->host, m->ctx, m->bind_host, on_resolved, m)) &&
        m->host->loop->timer_arm(m->retry, 1000, 0, 0) < 0)
        PLB_LOG(m->host, m->ctx, PLB_LOG_ERROR, NULL, "cannot arm the retry timer");
}

static int
mm_start(void *state, char *err, size_t errlen)
{
    struct mm *m = state;
    const struct plb_host *h = m->host;
    int rc = 0;

    if (m->cfg->metrics) {
        rc = mm_proc_register(h, m->ctx, &m->proc);
        if (rc < 0)
            goto fail;
    }
    if (m->cfg->probes) {
        rc = h->links->health_register(m->ctx, MM_LOOP_CHECK, PLB_HEALTH_LIVE);
        if (rc < 0) {
            PLB_LOG(h, m->ctx, PLB_LOG_ERROR, PLB_KV("error", strerror(-rc)),
                    "cannot register the event-loop check");
            goto fail;
        }
        rc = h->loop->timer_arm(m->beat, m->cfg->liveness_interval_ms, m->cfg->liveness_interval_ms,
                                0);
        if (rc < 0)
            goto fail;
    }
    m->running = 1;
    m->next = running_list;
    running_list = m;
    /* An IP literal is bound at once. */
    if (is_ip_literal(m->bind_host)) {
        if ((rc = listen_at(m, m->bind_host)) < 0) {
            list_remove(m);
            m->running = 0;
            goto fail;
        }
        return 0;
    }
    /* A hostname: resolved off the loop, then bound. */
    if (!(m->res = mm_resolve_start(h, m->ctx, m->bind_host, on_resolved, m))) {
        list_remove(m);
        m->running = 0;
        rc = -ENOMEM;
        goto fail;
    }
    return 0;

fail:
    h->loop->timer_cancel(m->beat);
    h->loop->timer_cancel(m->render);
    m->nwaiting = 0;
    h->http->server_free(m->srv);
    m->srv = NULL;
    return rc < 0 ? rc : -EIO;
}

/* Stop serving at once: probes and scrapes are answered within the request
 * that asked, so nothing is left to drain. */
static void
mm_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct mm *m = state;
    (void)grace_ms;
    m->host->loop->timer_cancel(m->beat);
    /* The server frees the waiting scrapes' exchanges. */
    m->host->loop->timer_cancel(m->render);
    m->nwaiting = 0;
    m->host->loop->timer_cancel(m->retry);
    mm_resolve_cancel(m->res);
    m->res = NULL;
    m->host->http->server_free(m->srv);
    m->srv = NULL;
    if (m->running) {
        list_remove(m);
        m->running = 0;
    }
    m->host->links->done(d);
}

static void
mm_destroy(void *state)
{
    struct mm *m = state;
    if (m->running)
        list_remove(m);
    mm_resolve_cancel(m->res);
    m->host->http->server_free(m->srv);
    m->host->loop->timer_free(m->render);
    m->host->loop->timer_free(m->beat);
    m->host->loop->timer_free(m->retry);
    m->host->mem->free(m->bind_copy);
    m->host->mem->free(m);
}

PLB_MODULE_EXPORT = {
    PLB_MODULE("metrics", "1.0",
               "Serves /healthz, /readyz and /metrics (Prometheus text format 0.0.4)"),
    PLB_MODULE_CONFIG(mm_settings, struct mm_config, mm_check),
    PLB_MODULE_LIFECYCLE(mm_create, mm_start, mm_stop, mm_destroy),
};
