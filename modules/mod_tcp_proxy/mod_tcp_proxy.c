/*
 * mod_tcp_proxy: the per-node TCP load balancer for API servers.
 *
 * Listens on bind_address:bind_port and forwards each connection to an
 * upstream picked from the merged endpoint set of the linked sources
 * (`upstreams`), health-checked per upstream (tcp or readyz), with latency
 * tiers, draining of removed endpoints and readiness-driven closing. This
 * file holds the descriptor, the lifecycle hooks and the glue between the
 * pure policy (select.c) and the I/O (health.c, conn.c).
 *
 * Health contributions: readiness check "upstreams" (ready iff an upstream
 * is healthy and not draining) and liveness check "loop" (a heartbeat every
 * second from the event loop).
 */
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <prismlb/module_util.h>

#include "tp.h"

#define BEAT_MS 1000
#define BACKLOG 4096
#define RELISTEN_MS 5000

static const char READY_CHECK[] = "upstreams";
static const char LIVE_CHECK[] = "loop";

/* ------------------------------------------------------------------------ */
/* Pool environment and callbacks                                           */

static void
ops_added(void *arg, struct tp_up *u)
{
    struct tp *tp = arg;
    struct tp_upd *d = tp->host->mem->alloc(sizeof(*d));
    if (!d) {
        PLB_ERR(tp->host, tp->ctx, PLB_KV("upstream", u->addr),
                "out of memory adding the upstream: it gets no traffic");
        return;
    }
    d->tp = tp;
    d->up = u;
    d->check_fd = -1;
    if (tp_split_hostport(u->addr, d->host, sizeof(d->host), &d->port) < 0) {
        /* Filtered before the pool update; kept as a safety net. */
        tp->host->mem->free(d);
        return;
    }
    if (tp_parse_ip(d->host, d->port, &d->sa, &d->salen) == 0)
        d->literal = d->have_sa = 1;
    u->data = d;
    PLB_INFO(tp->host, tp->ctx, PLB_KV("upstream", u->addr), "upstream added");
    int rc = tp_health_start(d);
    if (rc < 0)
        PLB_ERR(tp->host, tp->ctx, PLB_KV("upstream", u->addr),
                "cannot schedule health checks: error %d", rc);
}

static void
ops_draining(void *arg, struct tp_up *u)
{
    struct tp *tp = arg;
    struct tp_upd *d = u->data;
    /* On worker loops u stays until every worker has acknowledged the
     * drain, after its reports of u's connections so far (their count is
     * logged then, by workers.c), or until the drain deadline. */
    if (tp->nloops && d && tp->cfg->drain_timeout_ms > 0)
        tp_pool_drain_hold(u, (uint32_t)tp->nloops);
    else
        tp_drain_log(tp, u);
    if (!d)
        return;
    tp_health_cancel(d); /* checks stop while it drains */
    if (tp->nloops)
        tp_workers_draining(tp, u);
    else
        tp_conns_upstream_draining(d);
}

static void
ops_undrained(void *arg, struct tp_up *u)
{
    struct tp *tp = arg;
    PLB_INFO(tp->host, tp->ctx, PLB_KV("upstream", u->addr), "upstream re-added: drain called off");
}

static void
ops_close_conns(void *arg, struct tp_up *u)
{
    struct tp *tp = arg;
    PLB_INFO(tp->host, tp->ctx,
             PLB_KV("upstream", u->addr, "why",
                    u->draining ? "drain deadline" : "not ready while another upstream is"),
             "closing %u connection(s) of the upstream", u->nconns);
    if (tp->nloops)
        tp_workers_close_upstream(tp, u);
    else if (u->data)
        tp_conns_close_upstream(u->data);
}

/* Free the module state of an upstream (no connections left). */
static void
upd_free(struct tp *tp, struct tp_upd *d)
{
    tp_health_cancel(d);
    tp->host->loop->timer_free(d->timer);
    tp->host->mem->free(d);
}

static void
ops_removed(void *arg, struct tp_up *u)
{
    struct tp *tp = arg;
    struct tp_upd *d = u->data;
    if (u->drain_holds)
        tp_drain_log(tp, u); /* its deadline came before the workers' word */
    PLB_INFO(tp->host, tp->ctx, PLB_KV("upstream", u->addr), "upstream drained and removed");
    if (!d)
        return;
    tp_metrics_forget(tp, d);
    upd_free(tp, d);
    u->data = NULL;
}

static const struct tp_pool_ops pool_ops = {
    .added = ops_added,
    .draining = ops_draining,
    .undrained = ops_undrained,
    .close_conns = ops_close_conns,
    .removed = ops_removed,
};

/* ------------------------------------------------------------------------ */
/* Events                                                                   */

static void
set_ready(struct tp *tp)
{
    int ok = tp_pool_any_active(tp->pool);
    if (ok == tp->ready_state)
        return;
    tp->ready_state = ok;
    tp->host->links->health_set(tp->ctx, READY_CHECK, ok,
                                ok ? NULL : "no upstream is healthy and not draining");
}

/* tp.after_event (see tp.h). */
static void
after_event(struct tp *tp)
{
    int64_t next;

    /* Stopping: everything closes; nothing is removed under the loops of
     * stop and destroy. */
    if (tp->stopping)
        return;
    if (tp->in_event) {
        tp->again = 1;
        return;
    }
    tp->in_event = 1;
    do {
        tp->again = 0;
        next = tp_pool_tick(tp->pool);
    } while (tp->again);
    tp->in_event = 0;
    if (tp->stopping)
        return;
    if (next >= 0) {
        int64_t delay = next - tp->host->loop->now_ms(tp->ctx);
        int rc = tp->host->loop->timer_arm(tp->tick, delay > 0 ? delay : 0, 0, 0);
        if (rc < 0)
            PLB_ERR(tp->host, tp->ctx, NULL, "cannot arm the drain timer: error %d", rc);
    } else {
        tp->host->loop->timer_cancel(tp->tick);
    }
    set_ready(tp);
    tp_metrics_refresh(tp);
    if (tp->nloops)
        tp_workers_publish(tp);
}

static void
on_tick(plb_timer *t, void *arg)
{
    (void)t;
    after_event(arg);
}

static void
on_beat(plb_timer *t, void *arg)
{
    struct tp *tp = arg;
    (void)t;
    tp->host->links->health_beat(tp->ctx, LIVE_CHECK);
}

static void
on_endpoints(const struct plb_endpoint_set *set, void *arg)
{
    struct tp *tp = arg;
    const char **v;
    size_t n = 0;
    char host[256];
    int port;

    if (tp->stopping)
        return;
    v = tp->host->mem->alloc((set->n ? set->n : 1) * sizeof(*v));
    if (!v) {
        PLB_ERR(tp->host, tp->ctx, NULL, "out of memory: endpoint update of %zu ignored", set->n);
        return;
    }
    for (size_t i = 0; i < set->n; i++) {
        if (tp_split_hostport(set->v[i], host, sizeof(host), &port) < 0) {
            PLB_WARN(tp->host, tp->ctx, PLB_KV("endpoint", set->v[i]),
                     "ignoring an endpoint: not host:port");
            continue;
        }
        v[n++] = set->v[i];
    }
    if (n == 0) {
        /* Never route to zero backends: keep the current set. */
        PLB_WARN(tp->host, tp->ctx, NULL, "endpoint update without a valid endpoint: ignored");
        tp->host->mem->free(v);
        return;
    }
    tp->in_event++;
    int rc = tp_pool_update(tp->pool, v, n);
    tp->in_event--;
    if (tp->paused && tp_pool_count(tp->pool) > 0) {
        /* The first set is here: publish it before the workers accept. */
        tp->paused = 0;
        if (tp->nloops) {
            after_event(tp);
            tp_workers_resume(tp);
        } else if (tp->listener) {
            tp->host->loop->listener_pause(tp->listener, 0);
        }
    }
    if (rc < 0)
        PLB_ERR(tp->host, tp->ctx, NULL, "endpoint update partly applied: error %d", rc);
    tp->host->mem->free(v);
    after_event(tp);
}

/* ------------------------------------------------------------------------ */
/* Listener                                                                 */

static int
listen_on(struct tp *tp, const char *ip)
{
    int err = 0;
    if (tp->nloops) {
        /* Until the first endpoint set arrives, connections wait in the
         * backlog instead of being closed for want of an upstream. */
        tp->paused = tp_pool_count(tp->pool) == 0;
        return tp_workers_start(tp, ip, tp->paused);
    }
    tp->listener = tp->host->loop->listen_tcp(tp->ctx, ip, (int)tp->cfg->bind_port, BACKLOG,
                                              tp_on_accept, &tp->main_loop, &err);
    if (!tp->listener) {
        PLB_ERR(tp->host, tp->ctx, PLB_KV("address", ip, "error", strerror(-err)),
                "cannot listen on port %lld", (long long)tp->cfg->bind_port);
        return err ? err : -EINVAL;
    }
    char listen[80];
    snprintf(listen, sizeof(listen), strchr(ip, ':') ? "[%s]:%d" : "%s:%d", ip,
             tp->host->loop->listener_port(tp->listener));
    PLB_INFO(tp->host, tp->ctx, PLB_KV("listen", listen), "listening");
    /* Set once here, the client side's options reach every accepted socket
     * without system calls of its own (checked on the first one). */
    tp_sockopts(tp->host->loop->listener_fd(tp->listener));
    tp->main_loop.client_opts = TP_OPTS_UNVERIFIED;
    /* Until the first endpoint set arrives, connections wait in the
     * backlog instead of being closed for want of an upstream. */
    if (tp_pool_count(tp->pool) == 0) {
        tp->host->loop->listener_pause(tp->listener, 1);
        tp->paused = 1;
    }
    return 0;
}

static void bind_resolve(struct tp *tp);

static void
on_bind_resolved(void *arg, int ok, const struct sockaddr *sa, socklen_t salen)
{
    struct tp *tp = arg;
    char ip[64];
    (void)salen;
    tp->bind_res = NULL;
    if (ok && getnameinfo(sa, salen, ip, sizeof(ip), NULL, 0, NI_NUMERICHOST) == 0 &&
        listen_on(tp, ip) == 0)
        return;
    PLB_ERR(tp->host, tp->ctx, PLB_KV("bind_address", tp->cfg->bind_address),
            "cannot listen on bind_address: retrying in %d ms", RELISTEN_MS);
    if (tp->host->loop->timer_arm(tp->relisten, RELISTEN_MS, 0, 0) < 0)
        PLB_ERR(tp->host, tp->ctx, NULL, "cannot arm the re-listen timer");
}

static void
on_relisten(plb_timer *t, void *arg)
{
    (void)t;
    bind_resolve(arg);
}

static void
bind_resolve(struct tp *tp)
{
    if (tp->stopping)
        return;
    tp->bind_res =
        tp_resolve_start(tp, tp->cfg->bind_address, (int)tp->cfg->bind_port, on_bind_resolved, tp);
    if (!tp->bind_res)
        on_bind_resolved(tp, 0, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                */

static int
tp_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    struct tp *tp;
    if (PLB_STATE_NEW(&tp, host, ctx, config) < 0)
        return -ENOMEM;
    tp->name = host->links->instance_name(ctx);
    tp->ready_state = -1;
    tp->after_event = after_event;
    tp->main_loop.tp = tp;
    /* With the daemon's worker loops, the data path runs on them. */
    tp->nloops = PLB_HAS(host->loop, worker_count) ? host->loop->worker_count(ctx) : 0;
    uint64_t salt;
    if (getrandom(&salt, sizeof(salt), GRND_NONBLOCK) != (ssize_t)sizeof(salt))
        salt = (uint64_t)getpid() << 32;
    plb_clock_init(&tp->clock, host, ctx, salt);
    struct tp_pool_env env = {.now_ms = plb_clock_now_ms,
                              .random = plb_clock_random,
                              .alloc = host->mem->alloc,
                              .free = host->mem->free,
                              .arg = &tp->clock};
    tp->pool = tp_pool_new(&env, &pool_ops, tp, (enum tp_selection)tp->cfg->upstream_selection,
                           (enum tp_check_kind)tp->cfg->health_check, tp->cfg->drain_timeout_ms);
    tp->tick = host->loop->timer_new(ctx, on_tick, tp);
    tp->beat = host->loop->timer_new(ctx, on_beat, tp);
    tp->relisten = host->loop->timer_new(ctx, on_relisten, tp);
    tp->main_loop.late_timer = host->loop->timer_new(ctx, tp_sockopts_sweep, &tp->main_loop);
    if (!tp->pool || !tp->tick || !tp->beat || !tp->relisten || !tp->main_loop.late_timer) {
        tp_pool_free(tp->pool);
        host->loop->timer_free(tp->tick);
        host->loop->timer_free(tp->beat);
        host->loop->timer_free(tp->relisten);
        host->loop->timer_free(tp->main_loop.late_timer);
        host->mem->free(tp);
        return -ENOMEM;
    }
    *state = tp;
    return 0;
}

static int
tp_start(void *state, char *err, size_t errlen)
{
    struct tp *tp = state;
    const struct plb_host *h = tp->host;
    struct sockaddr_storage ss;
    socklen_t sl;
    int rc;

    tp_sockopts_init();
    if ((rc = tp_metrics_init(tp)) < 0) {
        PLB_ERR(tp->host, tp->ctx, NULL, "cannot register metrics: error %d", rc);
        return rc;
    }
    if ((rc = h->links->health_register(tp->ctx, READY_CHECK, PLB_HEALTH_READY)) < 0 ||
        (rc = h->links->health_register(tp->ctx, LIVE_CHECK, PLB_HEALTH_LIVE)) < 0)
        return rc;
    set_ready(tp);
    h->links->health_beat(tp->ctx, LIVE_CHECK);
    if ((rc = h->loop->timer_arm(tp->beat, BEAT_MS, BEAT_MS, 0)) < 0)
        return rc;
    if (tp_parse_ip(tp->cfg->bind_address, 1, &ss, &sl) == 0) {
        if ((rc = listen_on(tp, tp->cfg->bind_address)) < 0)
            return rc;
    } else {
        bind_resolve(tp); /* a hostname: listen once it resolves */
    }
    rc = h->links->endpoints_subscribe(tp->ctx, &tp->cfg->upstreams, on_endpoints, tp);
    if (rc < 0)
        PLB_ERR(tp->host, tp->ctx, NULL, "cannot subscribe to the upstream sources: error %d", rc);
    return rc;
}

/* Graceful shutdown per the spec: close the listener, force-close in-flight
 * connections; all synchronous, so it completes before returning. */
static void
tp_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct tp *tp = state;
    (void)grace_ms;

    tp->stopping = 1;
    tp->main_loop.stopping = 1;
    tp->host->loop->listener_free(tp->listener);
    tp->listener = NULL;
    tp->host->loop->timer_cancel(tp->tick);
    tp->host->loop->timer_cancel(tp->beat);
    tp->host->loop->timer_cancel(tp->relisten);
    tp->host->loop->timer_cancel(tp->main_loop.late_timer);
    tp_resolve_cancel(tp->bind_res);
    tp->bind_res = NULL;
    for (size_t i = 0; i < tp_pool_count(tp->pool); i++) {
        struct tp_up *u = tp_pool_at(tp->pool, i);
        if (u->data) {
            tp_health_cancel(u->data);
            tp->host->loop->timer_cancel(((struct tp_upd *)u->data)->timer);
        }
    }
    if (tp->nloops) {
        tp_workers_stop(tp, d); /* done once every worker closed its own */
        return;
    }
    uint64_t n = tp->nconns;
    tp_conns_close_all(tp);
    tp_pipes_free(&tp->main_loop);
    PLB_INFO(tp->host, tp->ctx, NULL, "stopped: closed %llu connection(s)", (unsigned long long)n);
    tp->host->links->done(d);
}

static void
tp_destroy(void *state)
{
    struct tp *tp = state;
    const struct plb_host *h = tp->host;

    tp->stopping = 1;
    tp->main_loop.stopping = 1;
    tp->host->loop->listener_free(tp->listener);
    tp_conns_close_all(tp);
    tp_workers_fini(tp);
    tp_metrics_fini(tp);
    for (size_t i = 0; i < tp_pool_count(tp->pool); i++) {
        struct tp_up *u = tp_pool_at(tp->pool, i);
        if (u->data)
            upd_free(tp, u->data);
        u->data = NULL;
    }
    tp_pool_free(tp->pool);
    tp_resolve_cancel(tp->bind_res);
    tp_resolve_shutdown(tp);
    tp_pipes_free(&tp->main_loop);
    h->loop->timer_free(tp->tick);
    h->loop->timer_free(tp->beat);
    h->loop->timer_free(tp->relisten);
    h->loop->timer_free(tp->main_loop.late_timer);
    h->mem->free(tp);
}

PLB_MODULE_EXPORT = {
    PLB_MODULE("tcp_proxy", "1.0",
               "Per-node TCP load balancer for API servers: health-checked, "
               "latency- and readiness-aware, with graceful draining"),
    PLB_MODULE_CONFIG(tp_settings, struct tp_config, tp_config_check),
    PLB_MODULE_LIFECYCLE(tp_create, tp_start, tp_stop, tp_destroy),
    .status = tp_status,
};
