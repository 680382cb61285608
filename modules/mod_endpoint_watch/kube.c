/*
 * kube: the Kubernetes provider of endpoint_watch.
 *
 * It lists the EndpointSlices of one Service (label selector
 * kubernetes.io/service-name=<service_name> in <namespace>) and watches
 * them through the core's informer, which keeps every slice cached (the
 * fields the list is computed from: keep_slices) and implements the
 * spec's reconnect rules (exponential backoff from 1 s to
 * 30 s with up to 25 % jitter, immediate re-watch after a clean watch of
 * >= 30 s, re-list on 410 Gone). Every add, update or delete schedules one
 * recomputation of the full list from all cached slices (callbacks of one
 * loop turn, such as the differences a re-list reports, are coalesced), and
 * the result is published as provider "kubernetes", even when empty: the
 * core keeps a sink's endpoints rather than emptying them, and the static
 * provider's set stays in the union anyway.
 *
 * Client configuration, in order: the `kubeconfig` setting; the service
 * account when KUBERNETES_SERVICE_HOST is set; the first file of
 * $KUBECONFIG; else none, and the instance runs with its static endpoints
 * only after one log line. `server` overrides the URL (the local proxy),
 * with `tls_server_name` (default kubernetes.default.svc).
 *
 * Metrics (spec meanings): an update is a published list; an error is a
 * provider failure (no client), a failed list or re-list, a failed watch
 * call or a watch ERROR event (the informer's is_error). A watch stream
 * ending, cleanly or dropped, and 410 Gone are not errors.
 *
 * Provider health: failed on an error; recovered when the API server shows
 * it works again (a list or change delivered, a watch that had been open
 * ended, a 410 answer).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <prismlb/module_util.h>

#include "ew.h"

#define DEFAULT_TLS_NAME "kubernetes.default.svc"

static void
schedule(struct ew *ew)
{
    if (ew->stopping || ew->host->loop->timer_pending(ew->recompute))
        return;
    int rc = ew->host->loop->timer_arm(ew->recompute, 0, 0, 0);
    if (rc < 0)
        PLB_ERR(ew->host, ew->ctx, NULL, "cannot schedule the endpoint recomputation: error %d",
                rc);
}

/* Joined list for logs and change detection (new or NULL). */
static char *
join(const struct plb_host *h, const struct ew_list *l)
{
    size_t len = 1;
    for (size_t i = 0; i < l->n; i++)
        len += strlen(l->v[i]) + 1;
    char *s = h->mem->alloc(len);
    if (!s)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < l->n; i++) {
        size_t k = strlen(l->v[i]);
        if (i)
            s[o++] = ',';
        memcpy(s + o, l->v[i], k);
        o += k;
    }
    s[o] = '\0';
    return s;
}

static void
on_recompute(plb_timer *t, void *arg)
{
    struct ew *ew = arg;
    const struct plb_host *h = ew->host;
    struct ew_list l;
    (void)t;

    if (ew->stopping || !ew->inf)
        return;
    int rc = ew_slices_list(h, ew->inf, ew->cfg->port_name, &l);
    if (rc < 0) {
        PLB_ERR(ew->host, ew->ctx, NULL, "out of memory computing the endpoints: retrying");
        ew_list_clear(h, &l);
        if (h->loop->timer_arm(ew->recompute, 100, 0, 0) < 0)
            PLB_ERR(ew->host, ew->ctx, NULL, "cannot re-arm the recomputation");
        return;
    }
    rc = h->links->endpoints_publish(ew->ctx, EW_PROVIDER_KUBE, (const char *const *)l.v, l.n);
    if (rc < 0) {
        PLB_ERR(ew->host, ew->ctx, NULL, "cannot publish %zu endpoint(s): error %d; retrying", l.n,
                rc);
        ew_list_clear(h, &l);
        if (h->loop->timer_arm(ew->recompute, 100, 0, 0) < 0)
            PLB_ERR(ew->host, ew->ctx, NULL, "cannot re-arm the recomputation");
        return;
    }
    ew_count_update(ew, EW_PROVIDER_KUBE);
    ew_provider_failed(ew, EW_PROVIDER_KUBE, 0);
    char *joined = join(h, &l);
    int changed = !joined || !ew->last || strcmp(joined, ew->last) != 0;
    if (l.no_port && changed)
        PLB_WARN(ew->host, ew->ctx, PLB_KV("service", ew->service, "port_name", ew->cfg->port_name),
                 "%zu EndpointSlice(s) have no TCP port of that name", l.no_port);
    if (l.invalid && changed)
        PLB_WARN(ew->host, ew->ctx, PLB_KV("service", ew->service),
                 "ignored %zu address(es) that are no IP address or hostname", l.invalid);
    if (l.n == 0 && changed)
        PLB_WARN(ew->host, ew->ctx, PLB_KV("service", ew->service),
                 "no ready endpoint in %zu EndpointSlice(s) (%zu not ready): published an empty "
                 "kubernetes list; the static endpoints remain",
                 l.slices, l.not_ready);
    else if (changed)
        PLB_INFO(
            ew->host, ew->ctx, PLB_KV("service", ew->service, "endpoints", joined ? joined : "?"),
            "kubernetes endpoints changed (%zu slice(s), %zu not ready)", l.slices, l.not_ready);
    else
        PLB_DEBUG(ew->host, ew->ctx, PLB_KV("service", ew->service),
                  "kubernetes endpoints unchanged: %zu", l.n);
    h->mem->free(ew->last);
    ew->last = joined;
    if (joined)
        ew_state_discovered(ew, joined, l.n);
    ew_list_clear(h, &l);
}

/* ------------------------------------------------------------------------ */
/* Informer callbacks                                                        */

static void
on_add(plb_informer *inf, const plb_obj *obj, void *arg)
{
    (void)inf;
    (void)obj;
    schedule(arg);
}

static void
on_update(plb_informer *inf, const plb_obj *old, const plb_obj *obj, void *arg)
{
    (void)inf;
    (void)old;
    (void)obj;
    schedule(arg);
}

static void
on_delete(plb_informer *inf, const plb_obj *old, void *arg)
{
    (void)inf;
    (void)old;
    schedule(arg);
}

static void
on_synced(plb_informer *inf, void *arg)
{
    struct ew *ew = arg;
    PLB_INFO(ew->host, ew->ctx, PLB_KV("service", ew->service), "listed %zu EndpointSlice(s)",
             ew->host->kube->informer_count(inf));
    schedule(ew); /* also publishes an empty first list */
}

static void
on_status(plb_informer *inf, const struct plb_informer_status *st, void *arg)
{
    struct ew *ew = arg;
    (void)inf;
    if (st->is_error) {
        ew_count_error(ew, EW_PROVIDER_KUBE);
        ew_provider_failed(ew, EW_PROVIDER_KUBE, 1);
        PLB_WARN(ew->host, ew->ctx, PLB_KV("service", ew->service, "error", st->message),
                 "EndpointSlice discovery failed: retrying in %lld ms", (long long)st->retry_in_ms);
        return;
    }
    /* The API server answered: a watch had been open, or a 410. */
    ew_provider_failed(ew, EW_PROVIDER_KUBE, 0);
    if (st->event == PLB_INFORMER_EXPIRED)
        PLB_INFO(ew->host, ew->ctx, PLB_KV("service", ew->service, "why", st->message),
                 "EndpointSlice watch expired: re-listing");
    else
        PLB_DEBUG(ew->host, ew->ctx, PLB_KV("service", ew->service, "why", st->message),
                  "EndpointSlice watch ended: next watch in %lld ms", (long long)st->retry_in_ms);
}

/* What the informer keeps of a slice (plb_informer_opts.keep): what
 * ew_slices_list reads. A change of anything else reaches no callback. */
static const char *const keep_slices[] = {"/ports", "/endpoints/addresses",
                                          "/endpoints/conditions/ready", NULL};

static const struct plb_informer_handlers handlers = {on_add, on_update, on_delete, on_synced,
                                                      on_status};

/* ------------------------------------------------------------------------ */
/* Start and stop                                                           */

/* A provider failure at start: counted, logged once, not retried (the
 * configuration will not change while the daemon runs). */
static void
start_failed(struct ew *ew, const char *what, const char *why)
{
    ew_count_error(ew, EW_PROVIDER_KUBE);
    ew_provider_failed(ew, EW_PROVIDER_KUBE, 1);
    PLB_ERR(ew->host, ew->ctx, PLB_KV("what", what, "error", why),
            "EndpointSlice discovery disabled: using the static endpoints only");
}

int
ew_kube_start(struct ew *ew)
{
    const struct plb_host *h = ew->host;
    const struct ew_config *c = ew->cfg;
    struct plb_kube_opts o = {.size = sizeof(o)};
    char path[4096], err[512] = "";
    const char *source;

    plb_kube_settings_apply(&c->kube, &o);
    if (c->kube.kubeconfig && *c->kube.kubeconfig) {
        source = "kubeconfig";
    } else if (getenv("KUBERNETES_SERVICE_HOST") && *getenv("KUBERNETES_SERVICE_HOST")) {
        snprintf(path, sizeof(path), "%s/token", c->kube.sa_dir);
        if (access(path, R_OK) != 0) {
            PLB_WARN(ew->host, ew->ctx, PLB_KV("path", path),
                     "no service account token: EndpointSlice discovery off, static endpoints "
                     "only");
            return 0;
        }
        o.kubeconfig = NULL;
        o.in_cluster = 1;
        source = "service account";
    } else if (getenv("KUBECONFIG") && *getenv("KUBECONFIG")) {
        const char *env = getenv("KUBECONFIG");
        size_t n = strcspn(env, ":");
        snprintf(path, sizeof(path), "%.*s", (int)n, env);
        o.kubeconfig = path;
        source = "$KUBECONFIG";
    } else {
        PLB_INFO(ew->host, ew->ctx, NULL,
                 "not in a cluster (no service account, no kubeconfig): EndpointSlice discovery "
                 "off, static endpoints only");
        return 0;
    }
    if (!o.tls_server_name && o.server && strncmp(o.server, "https://", 8) == 0)
        o.tls_server_name = DEFAULT_TLS_NAME;

    ew->kube_enabled = 1;
    ew->recompute = h->loop->timer_new(ew->ctx, on_recompute, ew);
    if (!ew->recompute)
        return -ENOMEM;
    ew->kube = h->kube->client_new(ew->ctx, &o, err, sizeof(err));
    if (!ew->kube) {
        start_failed(ew, source, err[0] ? err : "cannot create the client");
        return 0;
    }
    size_t sl = strlen("kubernetes.io/service-name=") + strlen(c->service_name) + 1;
    ew->selector = h->mem->alloc(sl);
    if (!ew->selector)
        return -ENOMEM;
    snprintf(ew->selector, sl, "kubernetes.io/service-name=%s", c->service_name);
    int rc = 0;
    ew->inf = plb_informer_watch(h, ew->kube, "discovery.k8s.io/v1", "endpointslices", c->ns,
                                 ew->selector, keep_slices, &handlers, ew, &rc);
    if (!ew->inf) {
        if (rc == -ENOMEM)
            return rc;
        start_failed(ew, "informer", "bad informer options");
        return 0;
    }
    PLB_INFO(ew->host, ew->ctx,
             PLB_KV("service", ew->service, "server", h->kube->server(ew->kube), "source", source,
                    "tls_server_name", o.tls_server_name),
             "watching EndpointSlices");
    return 0;
}

void
ew_kube_stop(struct ew *ew)
{
    const struct plb_host *h = ew->host;
    if (ew->recompute)
        h->loop->timer_cancel(ew->recompute);
    h->kube->informer_free(ew->inf);
    ew->inf = NULL;
    h->kube->client_free(ew->kube);
    ew->kube = NULL;
}
