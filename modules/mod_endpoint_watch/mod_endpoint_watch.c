/*
 * mod_endpoint_watch: two-level discovery of the API servers.
 *
 * The static provider publishes the configured `endpoints` at start, with
 * no cluster access (the spec's bootstrap level); the Kubernetes provider
 * (kube.c) adds the ready endpoints of the `kubernetes` Service's
 * EndpointSlices at run time. Both publish under this instance; the core
 * merges them (and any other source a sink follows) into a sorted,
 * de-duplicated union and never hands a sink an empty set once it had
 * endpoints. This file holds the descriptor, the lifecycle hooks and the
 * static provider; health.c the metrics and the provider health.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "ew.h"

#define BEAT_MS 1000

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
    ew_health_beat(ew);
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

static int
ew_start(void *state, char *err, size_t errlen)
{
    struct ew *ew = state;
    const struct plb_host *h = ew->host;
    int rc;

    if ((rc = ew_health_start(ew)) < 0)
        return rc;
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
