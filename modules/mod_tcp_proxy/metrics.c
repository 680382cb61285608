/*
 * metrics: the spec's metric table, named prismlb_* and labelled with the
 * proxy instance (`proxy`), through the host's registry. Gauges derived from
 * the pool are refreshed after every pool event; connection counters move
 * with the data path.
 *
 * The spec's discovery_updates_total and discovery_errors_total count what
 * the endpoint sources see (providers, watch errors); in prismlb that is
 * mod_endpoint_watch, which publishes them, so they are not here.
 */
#include <errno.h>

#include <prismlb/module_util.h>

#include "tp.h"

static const char *const l_proxy[] = {"proxy", NULL};
static const char *const l_up[] = {"proxy", "upstream", NULL};
static const char *const l_result[] = {"proxy", "result", NULL};
static const char *const l_up_result[] = {"proxy", "upstream", "result", NULL};

/* Dials: from a loopback connect (tens of microseconds) to health_timeout
 * (15 s by default, 60 s at most). */
static const double dial_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                      0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5,
                                      5,      10,      15,     30,    60};
/* Proxied connections: a request's second to a kubelet watch's days. */
static const double conn_buckets[] = {0.01, 0.1,  1,     10,    60,    300,
                                      900,  3600, 14400, 43200, 86400, 604800};
#define NBUCKETS(a) (sizeof(a) / sizeof((a)[0]))

/* Log a failed registry update (once per process: the registry only fails
 * when out of memory, and one line says it). */
static void
check_rc(struct tp *tp, int rc, const char *what)
{
    static int logged;
    if (rc < 0 && !logged) {
        logged = 1;
        PLB_WARN(tp->host, tp->ctx, PLB_KV("metric", what),
                 "metric not updated: error %d (logged once)", rc);
    }
}

int
tp_metrics_init(struct tp *tp)
{
    const struct plb_host *h = tp->host;
    struct tp_metrics *m = &tp->m;
    plb_ctx *x = tp->ctx;

    m->upstreams_active = h->metrics->new_metric(
        x, PLB_METRIC_GAUGE, "prismlb_upstreams_active",
        "Upstreams eligible for new connections (healthy, not draining)", l_proxy, NULL, 0);
    m->upstreams_known = h->metrics->new_metric(
        x, PLB_METRIC_GAUGE, "prismlb_upstreams",
        "Total known upstreams, including unhealthy and draining", l_proxy, NULL, 0);
    m->connections_active = h->metrics->new_metric(
        x, PLB_METRIC_GAUGE, "prismlb_connections_active",
        "TCP connections currently passing through the proxy", l_proxy, NULL, 0);
    m->connections_total = h->metrics->new_metric(
        x, PLB_METRIC_COUNTER, "prismlb_connections_total",
        "Connections established to upstreams since start", l_proxy, NULL, 0);
    m->connection_errors = h->metrics->new_metric(
        x, PLB_METRIC_COUNTER, "prismlb_connection_errors_total",
        "Failed connection attempts to an upstream that was pickable (none when no upstream was "
        "available: last-resort dials are counted in prismlb_last_resort_dials_total; not "
        "those caused by proxy shutdown); deleted once the upstream is drained and removed",
        l_up, NULL, 0);
    m->last_resort = h->metrics->new_metric(
        x, PLB_METRIC_COUNTER, "prismlb_last_resort_dials_total",
        "Dials to an unhealthy upstream because none was pickable (the last resort), by result: "
        "success (the connect completed) or failure (refused, unreachable, timed out, or reset "
        "before the upstream's first byte)",
        l_result, NULL, 0);
    m->dial_retries = h->metrics->new_metric(
        x, PLB_METRIC_COUNTER, "prismlb_dial_retries_total",
        "Client connections moved to another upstream before any upstream byte reached the "
        "client: a dial refused, reset, unreachable or timed out, a reset right after it, or "
        "an upstream starting to drain during the dial",
        l_proxy, NULL, 0);
    m->rtt =
        h->metrics->new_metric(x, PLB_METRIC_GAUGE, "prismlb_upstream_rtt_seconds",
                               "Smoothed health check connect time, name resolution included; only "
                               "with upstream_selection=latency, after the first successful check",
                               l_up, NULL, 0);
    m->tier =
        h->metrics->new_metric(x, PLB_METRIC_GAUGE, "prismlb_upstream_latency_tier",
                               "Latency tier of the upstream, 0 being the closest group; only with "
                               "upstream_selection=latency, after the first successful check",
                               l_up, NULL, 0);
    m->ready =
        h->metrics->new_metric(x, PLB_METRIC_GAUGE, "prismlb_upstream_ready",
                               "/readyz probe state after the consecutive-failure threshold (1 "
                               "ready, 0 not ready); only with health_check=readyz, after the "
                               "first probe",
                               l_up, NULL, 0);
    m->health =
        h->metrics->new_metric(x, PLB_METRIC_GAUGE, "prismlb_health_check_status",
                               "Upstream health state after the consecutive-failure threshold, fed "
                               "by health checks and client dials (1 healthy, 0 unhealthy)",
                               l_up, NULL, 0);
    m->dial_duration = h->metrics->new_metric(
        x, PLB_METRIC_HISTOGRAM, "prismlb_dial_duration_seconds",
        "Time from the start of a client connection's dial to an upstream (name resolution "
        "included) until the connect completed (result success) or failed (result failure: "
        "refused, unreachable, timed out); deleted once the upstream is drained and removed",
        l_up_result, dial_buckets, NBUCKETS(dial_buckets));
    m->conn_duration = h->metrics->new_metric(
        x, PLB_METRIC_HISTOGRAM, "prismlb_connection_duration_seconds",
        "Lifetime of proxied connections that reached an upstream, from the accept until both "
        "sides closed (or a drain, readiness close or shutdown closed them)",
        l_proxy, conn_buckets, NBUCKETS(conn_buckets));
    if (!m->upstreams_active || !m->upstreams_known || !m->connections_active ||
        !m->connections_total || !m->connection_errors || !m->dial_retries || !m->rtt || !m->tier ||
        !m->ready || !m->health || !m->last_resort || !m->dial_duration || !m->conn_duration)
        return -ENOMEM;
    const char *lv[] = {tp->name};
    int rc = h->metrics->set(m->connections_active, lv, 0);
    if (rc == 0)
        rc = h->metrics->add(m->connections_total, lv, 0);
    if (rc == 0)
        rc = h->metrics->add(m->dial_retries, lv, 0);
    if (rc == 0)
        rc = h->metrics->set(m->upstreams_active, lv, 0);
    if (rc == 0)
        rc = h->metrics->set(m->upstreams_known, lv, 0);
    const char *ls[] = {tp->name, "success"}, *lf[] = {tp->name, "failure"};
    if (rc == 0)
        rc = h->metrics->add(m->last_resort, ls, 0);
    if (rc == 0)
        rc = h->metrics->add(m->last_resort, lf, 0);
    return rc;
}

void
tp_metrics_refresh(struct tp *tp)
{
    const struct plb_host *h = tp->host;
    struct tp_metrics *m = &tp->m;
    const char *lp[] = {tp->name};
    size_t n = tp_pool_count(tp->pool);
    int latency = tp->cfg->upstream_selection == TP_SEL_LATENCY;
    int readyz = tp->cfg->health_check == TP_CHECK_READYZ;

    check_rc(tp, h->metrics->set(m->upstreams_active, lp, (double)tp_pool_active_count(tp->pool)),
             "prismlb_upstreams_active");
    check_rc(tp, h->metrics->set(m->upstreams_known, lp, (double)n), "prismlb_upstreams");
    for (size_t i = 0; i < n; i++) {
        struct tp_up *u = tp_pool_at(tp->pool, i);
        const char *lv[] = {tp->name, u->addr};
        check_rc(tp, h->metrics->set(m->health, lv, u->healthy ? 1 : 0),
                 "prismlb_health_check_status");
        if (latency && u->has_sample) {
            check_rc(tp, h->metrics->set(m->rtt, lv, u->avg_ms / 1000.0),
                     "prismlb_upstream_rtt_seconds");
            check_rc(tp, h->metrics->set(m->tier, lv, (double)u->tier),
                     "prismlb_upstream_latency_tier");
        }
        if (readyz && u->ready_known)
            check_rc(tp, h->metrics->set(m->ready, lv, u->ready ? 1 : 0), "prismlb_upstream_ready");
        struct tp_upd *d = u->data;
        if (d && !d->errors_series) {
            d->errors_series = 1;
            check_rc(tp, h->metrics->add(m->connection_errors, lv, 0),
                     "prismlb_connection_errors_total");
        }
    }
}

void
tp_metrics_conn(struct tp *tp, int established_delta, int total_inc)
{
    const struct plb_host *h = tp->host;
    const char *lp[] = {tp->name};
    if (established_delta)
        check_rc(tp, h->metrics->add(tp->m.connections_active, lp, established_delta),
                 "prismlb_connections_active");
    if (total_inc)
        check_rc(tp, h->metrics->add(tp->m.connections_total, lp, total_inc),
                 "prismlb_connections_total");
}

void
tp_metrics_dial(struct tp *tp, struct tp_upd *d, int ok, int last, double secs)
{
    if (tp->stopping)
        return; /* failures caused by proxy shutdown are not counted */
    if (secs >= 0) {
        const char *lr[] = {tp->name, d->up->addr, ok ? "success" : "failure"};
        check_rc(tp, tp->host->metrics->observe(tp->m.dial_duration, lr, secs),
                 "prismlb_dial_duration_seconds");
    }
    if (last) {
        const char *lr[] = {tp->name, ok ? "success" : "failure"};
        check_rc(tp, tp->host->metrics->add(tp->m.last_resort, lr, 1),
                 "prismlb_last_resort_dials_total");
        return;
    }
    if (ok)
        return;
    const char *lv[] = {tp->name, d->up->addr};
    d->errors_series = 1;
    check_rc(tp, tp->host->metrics->add(tp->m.connection_errors, lv, 1),
             "prismlb_connection_errors_total");
}

void
tp_metrics_conn_ended(struct tp *tp, double secs)
{
    const char *lp[] = {tp->name};
    check_rc(tp, tp->host->metrics->observe(tp->m.conn_duration, lp, secs),
             "prismlb_connection_duration_seconds");
}

void
tp_metrics_dial_retry(struct tp *tp)
{
    const char *lp[] = {tp->name};
    check_rc(tp, tp->host->metrics->add(tp->m.dial_retries, lp, 1), "prismlb_dial_retries_total");
}

void
tp_metrics_forget(struct tp *tp, struct tp_upd *d)
{
    const struct plb_host *h = tp->host;
    const char *lv[] = {tp->name, d->up->addr};
    if (!tp->m.health)
        return;
    h->metrics->remove(tp->m.connection_errors, lv);
    h->metrics->remove(tp->m.rtt, lv);
    h->metrics->remove(tp->m.tier, lv);
    h->metrics->remove(tp->m.ready, lv);
    h->metrics->remove(tp->m.health, lv);
    const char *ls[] = {tp->name, d->up->addr, "success"},
               *lf[] = {tp->name, d->up->addr, "failure"};
    h->metrics->remove(tp->m.dial_duration, ls);
    h->metrics->remove(tp->m.dial_duration, lf);
    d->errors_series = 0;
}

void
tp_metrics_fini(struct tp *tp)
{
    const struct plb_host *h = tp->host;
    const char *lp[] = {tp->name};
    if (!tp->m.health)
        return;
    for (size_t i = 0; tp->pool && i < tp_pool_count(tp->pool); i++) {
        struct tp_up *u = tp_pool_at(tp->pool, i);
        if (u->data)
            tp_metrics_forget(tp, u->data);
    }
    h->metrics->remove(tp->m.upstreams_active, lp);
    h->metrics->remove(tp->m.upstreams_known, lp);
    h->metrics->remove(tp->m.connections_active, lp);
    h->metrics->remove(tp->m.connections_total, lp);
    h->metrics->remove(tp->m.dial_retries, lp);
    const char *ls[] = {tp->name, "success"}, *lf[] = {tp->name, "failure"};
    h->metrics->remove(tp->m.last_resort, ls);
    h->metrics->remove(tp->m.last_resort, lf);
    h->metrics->remove(tp->m.conn_duration, lp);
}
