/*
 * health: the metrics and the provider health of mod_endpoint_watch (see
 * ew.h). Calls no other file of the module.
 *
 * Health: liveness check "discovery", beaten every second while at least
 * one running provider works. Provider failures are isolated: the
 * Kubernetes provider failing leaves the static one publishing; only when
 * every provider failed does the heartbeat stop, so /healthz of mod_metrics
 * fails after its liveness threshold ("the merged provider only returns an
 * error if all sub-providers fail").
 *
 * Metrics: prismlb_discovery_updates_total{source,provider} and
 * prismlb_discovery_errors_total{source,provider}; `source` is the instance
 * name (as mod_tcp_proxy labels its series with `proxy`).
 */
#include <errno.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "ew.h"

static const char LIVE_CHECK[] = "discovery";
static const char *const labels[] = {"source", "provider", NULL};

static void
count(struct ew *ew, plb_metric *m, const char *provider, double v)
{
    static int logged;
    const char *lv[] = {ew->name, provider};
    int rc = m ? ew->host->metrics->add(m, lv, v) : -EINVAL;
    if (rc < 0 && !logged) {
        logged = 1;
        PLB_WARN(ew->host, ew->ctx, NULL, "discovery metric not updated: error %d (logged once)",
                 rc);
    }
}

void
ew_count_update(struct ew *ew, const char *provider)
{
    count(ew, ew->updates, provider, 1);
}

void
ew_count_error(struct ew *ew, const char *provider)
{
    count(ew, ew->errors, provider, 1);
}

static int
all_failed(const struct ew *ew)
{
    return ew->static_failed && (!ew->kube_enabled || ew->kube_failed);
}

void
ew_provider_failed(struct ew *ew, const char *provider, int failed)
{
    int before = all_failed(ew);
    int *flag = strcmp(provider, EW_PROVIDER_STATIC) == 0 ? &ew->static_failed : &ew->kube_failed;
    if (*flag == failed)
        return;
    *flag = failed;
    ew->host->links->endpoints_failed(ew->ctx, provider, failed);
    int after = all_failed(ew);
    if (after && !before)
        PLB_ERR(ew->host, ew->ctx, PLB_KV("check", LIVE_CHECK),
                "every endpoint provider failed: the liveness check stops");
    else if (before && !after) {
        PLB_INFO(ew->host, ew->ctx, PLB_KV("provider", provider), "provider recovered");
        ew->host->links->health_beat(ew->ctx, LIVE_CHECK);
    }
}

/* Register the families and make each series of this instance exist at 0,
 * so a scrape shows them before the first update or error. */
static int
metrics_init(struct ew *ew)
{
    const struct plb_host *h = ew->host;
    ew->updates = h->metrics->new_metric(
        ew->ctx, PLB_METRIC_COUNTER, "prismlb_discovery_updates_total",
        "Endpoint list updates received (static, kubernetes)", labels, NULL, 0);
    ew->errors = h->metrics->new_metric(
        ew->ctx, PLB_METRIC_COUNTER, "prismlb_discovery_errors_total",
        "Discovery errors: provider failures, failed Watch calls, watch error events and failed "
        "re-lists. A watch stream ending is not counted, including on a dropped connection, and "
        "neither is 410 Gone expiry",
        labels, NULL, 0);
    if (!ew->updates || !ew->errors)
        return -ENOMEM;
    const char *ls[] = {ew->name, EW_PROVIDER_STATIC};
    const char *lk[] = {ew->name, EW_PROVIDER_KUBE};
    int rc = h->metrics->add(ew->updates, ls, 0);
    if (rc == 0)
        rc = h->metrics->add(ew->errors, ls, 0);
    if (rc == 0 && ew->cfg->enable_discovery)
        rc = h->metrics->add(ew->updates, lk, 0);
    if (rc == 0 && ew->cfg->enable_discovery)
        rc = h->metrics->add(ew->errors, lk, 0);
    return rc;
}

int
ew_health_start(struct ew *ew)
{
    const struct plb_host *h = ew->host;
    int rc;

    if ((rc = metrics_init(ew)) < 0) {
        PLB_ERR(ew->host, ew->ctx, NULL, "cannot register metrics: error %d", rc);
        return rc;
    }
    if ((rc = h->links->health_register(ew->ctx, LIVE_CHECK, PLB_HEALTH_LIVE)) < 0)
        return rc;
    h->links->health_beat(ew->ctx, LIVE_CHECK);
    return 0;
}

void
ew_health_beat(struct ew *ew)
{
    if (!all_failed(ew))
        ew->host->links->health_beat(ew->ctx, LIVE_CHECK);
}
