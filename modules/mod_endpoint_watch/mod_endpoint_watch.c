/*
 * mod_endpoint_watch: two-level discovery of the API servers.
 *
 * The static provider publishes the configured `endpoints` at start, with
 * no cluster access (the spec's bootstrap level); the Kubernetes provider
 * (kube.c) adds the ready endpoints of the `kubernetes` Service's
 * EndpointSlices at run time. Both publish under this instance; the core
 * merges them (and any other source a sink follows) into a sorted,
 * de-duplicated union and never hands a sink an empty set once it had
 * endpoints. This file holds the descriptor, the lifecycle hooks, the
 * static provider, the metrics and the provider health.
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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "ew.h"

#define BEAT_MS 1000

static const char LIVE_CHECK[] = "discovery";
static const char *const labels[] = {"source", "provider", NULL};

/* ------------------------------------------------------------------------ */
/* Metrics and provider health                                              */

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

/* ------------------------------------------------------------------------ */
/* The static provider                                                      */

static void
publish_static(struct ew *ew)
{
    const struct plb_strv *e = &ew->cfg->endpoints;
    int rc = ew->host->links->endpoints_publish(ew->ctx, EW_PROVIDER_STATIC,
                                                (const char *const *)e->v, e->n);
    if (rc < 0) {
        ew_count_error(ew, EW_PROVIDER_STATIC);
        ew_provider_failed(ew, EW_PROVIDER_STATIC, 1);
        PLB_ERR(ew->host, ew->ctx, NULL, "cannot publish the static endpoints: error %d; retrying",
                rc);
        return;
    }
    ew_count_update(ew, EW_PROVIDER_STATIC);
    ew_provider_failed(ew, EW_PROVIDER_STATIC, 0);
    PLB_INFO(ew->host, ew->ctx, NULL, "static endpoints: %zu published", e->n);
}

static void
on_beat(plb_timer *t, void *arg)
{
    struct ew *ew = arg;
    (void)t;
    if (ew->static_failed)
        publish_static(ew); /* only after a failed publish (out of memory) */
    if (!all_failed(ew))
        ew->host->links->health_beat(ew->ctx, LIVE_CHECK);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                */

static int
ew_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    struct ew *ew;
    if (PLB_STATE_NEW(&ew, host, ctx, config) < 0)
        return -ENOMEM;
    ew->name = host->links->instance_name(ctx);
    snprintf(ew->service, sizeof(ew->service), "%s/%s", ew->cfg->ns ? ew->cfg->ns : "",
             ew->cfg->service_name ? ew->cfg->service_name : "");
    ew->beat = host->loop->timer_new(ctx, on_beat, ew);
    if (!ew->beat) {
        host->mem->free(ew);
        return -ENOMEM;
    }
    *state = ew;
    return 0;
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

static int
ew_start(void *state, char *err, size_t errlen)
{
    struct ew *ew = state;
    const struct plb_host *h = ew->host;
    int rc;

    if ((rc = metrics_init(ew)) < 0) {
        PLB_ERR(ew->host, ew->ctx, NULL, "cannot register metrics: error %d", rc);
        return rc;
    }
    if ((rc = h->links->health_register(ew->ctx, LIVE_CHECK, PLB_HEALTH_LIVE)) < 0)
        return rc;
    h->links->health_beat(ew->ctx, LIVE_CHECK);
    if ((rc = h->loop->timer_arm(ew->beat, BEAT_MS, BEAT_MS, 0)) < 0)
        return rc;
    publish_static(ew);
    if (ew->cfg->enable_discovery)
        ew_state_load(ew); /* the check refuses state_file without discovery */
    if (!ew->cfg->enable_discovery) {
        PLB_INFO(ew->host, ew->ctx, NULL,
                 "EndpointSlice discovery disabled (enable_discovery = false)");
        return 0;
    }
    return ew_kube_start(ew);
}

static void
ew_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct ew *ew = state;
    (void)grace_ms;
    ew->stopping = 1;
    ew->host->loop->timer_cancel(ew->beat);
    ew_kube_stop(ew); /* cancels the watch and every call: nothing to wait for */
    ew_state_stop(ew);
    ew->host->links->done(d);
}

static void
ew_destroy(void *state)
{
    struct ew *ew = state;
    const struct plb_host *h = ew->host;
    ew->stopping = 1;
    ew_kube_stop(ew);
    h->loop->timer_free(ew->beat);
    h->loop->timer_free(ew->recompute);
    ew_state_free(ew);
    h->mem->free(ew->selector);
    h->mem->free(ew->last);
    h->mem->free(ew);
}

PLB_MODULE_EXPORT = {
    PLB_MODULE("endpoint_watch", "1.0",
               "API server endpoints: a static bootstrap list plus the EndpointSlices of "
               "the kubernetes Service, watched"),
    PLB_MODULE_CONFIG(ew_settings, struct ew_config, ew_config_check),
    .provides = PLB_ROLE_ENDPOINTS,
    PLB_MODULE_LIFECYCLE(ew_create, ew_start, ew_stop, ew_destroy),
};
