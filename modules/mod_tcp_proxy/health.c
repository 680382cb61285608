/*
 * health: periodic checks of one upstream, each on its own timer and its
 * own sockets, so a blackholed upstream delays no other.
 *
 * A check connects (non-blocking; hostname endpoints are resolved first and
 * the resolution counts in the connect time) and closes again. With
 * health_check = readyz, a successful connect is followed by HTTPS
 * GET /readyz through the host's HTTP client; one health_timeout covers the
 * connect and the request. Results go to the pool (select.c), which owns
 * the streaks; checks stop while the upstream drains.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <prismlb/module_util.h>

#include "tp.h"

/* Close the check's socket and watch. */
static void
check_close(struct tp_upd *d)
{
    struct tp *tp = d->tp;
    tp->host->loop->io_free(d->check_io);
    d->check_io = NULL;
    if (d->check_fd >= 0)
        close(d->check_fd);
    d->check_fd = -1;
}

void
tp_health_cancel(struct tp_upd *d)
{
    check_close(d);
    tp_resolve_cancel(d->check_res);
    d->check_res = NULL;
    if (d->probe)
        d->tp->host->http->cancel(d->probe);
    d->probe = NULL;
}

static void
probe_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    struct tp_upd *d = arg;
    struct tp *tp = d->tp;
    const struct plb_host *h = tp->host;
    (void)req;

    d->probe = NULL;
    enum plb_http_error e = h->http->resp_error(resp);
    int status = h->http->resp_status(resp);
    int ok = tp_probe_ok(e == PLB_HTTP_OK, status);
    if (!ok)
        PLB_DEBUG(tp->host, tp->ctx,
                  PLB_KV("upstream", d->up->addr, "error",
                         e == PLB_HTTP_OK ? "not 200" : h->http->resp_error_text(resp)),
                  "readyz probe failed: status %d", status);
    if (d->up->draining || tp->stopping)
        return;
    int was = d->up->ready;
    tp_pool_probe_result(tp->pool, d->up, ok);
    if (was != (int)d->up->ready)
        PLB_INFO(tp->host, tp->ctx, PLB_KV("upstream", d->up->addr), "upstream is %s",
                 d->up->ready ? "ready" : "not ready");
    tp->after_event(tp);
}

static void
probe_start(struct tp_upd *d)
{
    struct tp *tp = d->tp;
    const struct tp_config *c = tp->cfg;
    char url[320];
    int err = 0;

    int64_t budget = tp_probe_budget_ms(c->health_timeout_ms, d->check_started_ms,
                                        tp->host->loop->now_ms(tp->ctx));
    if (budget <= 0) {
        PLB_DEBUG(tp->host, tp->ctx, PLB_KV("upstream", d->up->addr, "error", "health_timeout"),
                  "readyz probe failed: the TCP check took the whole health_timeout");
        tp_pool_probe_result(tp->pool, d->up, 0);
        return;
    }
    snprintf(url, sizeof(url), "https://%s/readyz", d->up->addr);
    struct plb_http_opts o = {
        .size = sizeof(o),
        .url = url,
        .ca_file = c->health_check_ca_file,
        .cert_file = c->health_check_cert_file,
        .key_file = c->health_check_key_file,
        .bearer_token_file = c->health_check_token_file,
        .tls_server_name = c->health_check_server_name,
        .connect_timeout_ms = (uint32_t)budget,
        .timeout_ms = (uint32_t)budget,
        .body_mode = PLB_HTTP_BUFFER,
        .max_body = 64 * 1024,
        .done = probe_done,
        .arg = d,
        /* A new connection, and so a new TLS handshake, for every probe:
         * the serving certificate is verified each time, as new clients
         * see it. A kept connection (HTTP/1.1 keep-alive, or HTTP/2, where
         * "Connection: close" means nothing) would go on passing probes
         * after a rotation to one the CA does not sign. */
        .fresh_connection = 1,
    };
    d->probe = tp->host->http->request(tp->ctx, &o, &err);
    if (!d->probe) {
        /* A credential that does not exist yet fails the probe, not
         * the proxy. */
        PLB_WARN(tp->host, tp->ctx, PLB_KV("upstream", d->up->addr, "error", strerror(-err)),
                 "readyz probe not sent");
        tp_pool_probe_result(tp->pool, d->up, 0);
    }
}

/* The TCP part of a check ended. */
static void
check_done(struct tp_upd *d, int ok)
{
    struct tp *tp = d->tp;
    double ms = (tp_mono_us() - d->check_started_us) / 1000.0;

    check_close(d);
    if (d->up->draining || tp->stopping)
        return;
    int was = d->up->healthy;
    if (tp_pool_check_result(tp->pool, d->up, ok, ms))
        probe_start(d);
    if (was != (int)d->up->healthy)
        PLB_LOG(tp->host, tp->ctx, d->up->healthy ? PLB_LOG_INFO : PLB_LOG_WARN,
                PLB_KV("upstream", d->up->addr), "upstream is %s",
                d->up->healthy ? "healthy" : "unhealthy");
    tp->after_event(tp);
}

static void
on_check_io(plb_io *io, int fd, int what, void *arg)
{
    struct tp_upd *d = arg;
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    (void)io;

    if (what & PLB_IO_TIMEOUT) {
        check_done(d, 0);
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        soerr = errno;
    check_done(d, soerr == 0);
}

/* Connect to sa within what is left of the check's deadline. */
static void
check_connect(struct tp_upd *d, const struct sockaddr *sa, socklen_t salen)
{
    struct tp *tp = d->tp;
    int64_t left = tp_probe_budget_ms(tp->cfg->health_timeout_ms, d->check_started_ms,
                                      tp->host->loop->now_ms(tp->ctx));
    if (left <= 0) {
        check_done(d, 0);
        return;
    }
    d->check_fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (d->check_fd < 0) {
        PLB_WARN(tp->host, tp->ctx, PLB_KV("upstream", d->up->addr, "error", strerror(errno)),
                 "health check: no socket");
        check_done(d, 0);
        return;
    }
    if (connect(d->check_fd, sa, salen) == 0) {
        check_done(d, 1);
        return;
    }
    if (errno != EINPROGRESS) {
        check_done(d, 0);
        return;
    }
    d->check_io = tp->host->loop->io_new(tp->ctx, d->check_fd, PLB_IO_WRITE, on_check_io, d);
    if (!d->check_io || tp->host->loop->io_add(d->check_io, left) < 0) {
        PLB_ERR(tp->host, tp->ctx, PLB_KV("upstream", d->up->addr),
                "health check: cannot watch its socket");
        check_done(d, 0);
    }
}

static void
on_resolved(void *arg, int ok, const struct sockaddr *sa, socklen_t salen)
{
    struct tp_upd *d = arg;
    d->check_res = NULL;
    if (!ok) {
        PLB_WARN(d->tp->host, d->tp->ctx, PLB_KV("upstream", d->up->addr, "host", d->host),
                 "health check: cannot resolve the host");
        check_done(d, 0);
        return;
    }
    if (salen <= sizeof(d->sa)) {
        memcpy(&d->sa, sa, salen);
        d->salen = salen;
        d->have_sa = 1;
    }
    check_connect(d, sa, salen);
}

static void
on_check_timer(plb_timer *t, void *arg)
{
    struct tp_upd *d = arg;
    struct tp *tp = d->tp;
    (void)t;

    /* Checks stop while the upstream drains; one check at a time. */
    if (d->up->draining || tp->stopping || d->check_fd >= 0 || d->check_res || d->probe)
        return;
    d->check_started_ms = tp->host->loop->now_ms(tp->ctx);
    d->check_started_us = tp_mono_us();
    if (d->literal) {
        check_connect(d, (const struct sockaddr *)&d->sa, d->salen);
        return;
    }
    d->check_res = tp_resolve_start(tp, d->host, d->port, on_resolved, d);
    if (!d->check_res) {
        PLB_ERR(tp->host, tp->ctx, PLB_KV("upstream", d->up->addr),
                "health check: cannot start resolving");
        check_done(d, 0);
    }
}

int
tp_health_start(struct tp_upd *d)
{
    struct tp *tp = d->tp;
    if (!d->timer)
        d->timer = tp->host->loop->timer_new(tp->ctx, on_check_timer, d);
    if (!d->timer)
        return -ENOMEM;
    /* The first check right away, then every interval. */
    return tp->host->loop->timer_arm(d->timer, 0, tp->cfg->health_interval_ms, 0);
}
