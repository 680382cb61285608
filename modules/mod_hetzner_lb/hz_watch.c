/*
 * hz_watch.c: the informers of mod_hetzner_lb and what their events queue
 * (see hz_index.h for which Services an event can change), the work
 * queue's timer, and the full passes (every Service: resync, the caches'
 * first sync, the gate's opening). hz_kube.c syncs what is queued.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_index.h"
#include "hz_kube_int.h"
#include "hz_queue.h"

#define SYNC_DELAY_MS 200
#define SLICE_SERVICE_LABEL "kubernetes.io/service-name"

void
hz_kube_sync_arm(struct hz_kside *ks)
{
    if (ks->sync_timer && !ks->host->loop->timer_pending(ks->sync_timer))
        ks->host->loop->timer_arm(ks->sync_timer, SYNC_DELAY_MS, 0, 0);
}

/* hz_index_emit: queue key. */
static void
enqueue(const char *key, void *arg)
{
    struct hz_kside *ks = arg;
    int rc = hz_queue_add(ks->queue, key);
    if (rc == -ESHUTDOWN)
        return; /* stopped */
    if (rc == -ENOMEM) {
        /* the event is not lost: every Service is synced again shortly */
        PLB_ERR(ks->host, ks->ctx, PLB_KV("service", key),
                "out of memory: not queued; every Service synced again in %d ms", HZ_LOST_RETRY_MS);
        ks->lost = 1;
        hz_recheck_arm(ks);
        return;
    }
    hz_kube_sync_arm(ks);
}

void
hz_kube_retry(struct hz_kside *ks, const char *key)
{
    int64_t delay = 0;
    int rc = hz_queue_add_rate_limited(ks->queue, key, ks->host->loop->now_ms(ks->ctx), &delay);
    if (rc == -ESHUTDOWN)
        return; /* stopped */
    if (rc < 0) {
        PLB_ERR(ks->host, ks->ctx, PLB_KV("service", key),
                "out of memory: every Service synced again in %d ms", HZ_LOST_RETRY_MS);
        ks->lost = 1;
    } else {
        PLB_WARN(ks->host, ks->ctx, PLB_KV("service", key),
                 "the sync ran out of memory: synced again in %lld ms", (long long)delay);
    }
    hz_recheck_arm(ks);
}

static void
enqueue_svc(const plb_obj *svc, void *arg)
{
    struct hz_kside *ks = arg;
    const char *ns = hz_ks_str(ks, svc, "metadata", "namespace", NULL);
    const char *name = hz_ks_str(ks, svc, "metadata", "name", NULL);
    char key[512];
    if (!ns || !name)
        return;
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    enqueue(key, ks);
}

void
hz_kube_sync_soon(struct hz_kside *ks)
{
    /* A status written but overwritten before the cache showed it would
     * otherwise wait for the Service's next change. */
    hz_states_forget_status(&ks->states);
    if (ks->svc_inf && ks->queue)
        ks->host->kube->informer_foreach(ks->svc_inf, enqueue_svc, ks);
}

void
hz_kube_sync_key(struct hz_kside *ks, const char *key)
{
    if (ks->queue)
        enqueue(key, ks);
}

/* ------------------------------------------------------------------ */
/* Informers                                                           */

/* "ns/name" of o into key; 0, or -1 when o has no name. */
static int
key_of(const struct hz_kside *ks, const plb_obj *o, char *key, size_t len)
{
    const char *ns = hz_ks_str(ks, o, "metadata", "namespace", NULL);
    const char *name = hz_ks_str(ks, o, "metadata", "name", NULL);
    if (!name)
        return -1;
    snprintf(key, len, "%s/%s", ns ? ns : "", name);
    return 0;
}

static void
fp_str(uint64_t *h, const char *s)
{
    for (; s && *s; s++) {
        *h ^= (unsigned char)*s;
        *h *= 0x100000001b3ULL;
    }
    *h ^= 0xff;
    *h *= 0x100000001b3ULL;
}

/* Fingerprint of what makes a node a target: its Ready condition,
 * spec.unschedulable, its labels (the exclusion label, node selectors) and
 * InternalIPs; heartbeats' timestamps are not in it. */
static uint64_t
node_fp(const struct hz_kside *ks, const plb_obj *node)
{
    const struct plb_host *h = ks->host;
    uint64_t fp = 0xcbf29ce484222325ULL;
    const plb_obj *v, *conds = h->obj->get(node, "status", "conditions", NULL);
    const plb_obj *addrs = h->obj->get(node, "status", "addresses", NULL);
    const plb_obj *labels = h->obj->get(node, "metadata", "labels", NULL);
    void *it = NULL;
    const char *k;
    for (size_t i = 0; i < h->obj->len(conds); i++) {
        const char *type = h->obj->str(h->obj->get(h->obj->at(conds, i), "type", NULL));
        if (type && strcmp(type, "Ready") == 0)
            fp_str(&fp, h->obj->str(h->obj->get(h->obj->at(conds, i), "status", NULL)));
    }
    fp_str(&fp, h->obj->boolean(h->obj->get(node, "spec", "unschedulable", NULL), 0) ? "u" : "s");
    while ((k = h->obj->iter(labels, &it, &v))) {
        fp_str(&fp, k);
        fp_str(&fp, h->obj->str(v));
    }
    for (size_t i = 0; i < h->obj->len(addrs); i++) {
        const plb_obj *a = h->obj->at(addrs, i);
        const char *type = h->obj->str(h->obj->get(a, "type", NULL));
        if (type && strcmp(type, "InternalIP") == 0)
            fp_str(&fp, h->obj->str(h->obj->get(a, "address", NULL)));
    }
    return fp;
}

static void
index_failed(struct hz_kside *ks, const char *what, const char *key)
{
    /* the index lost this change: sync everything rather than miss it */
    PLB_ERR(ks->host, ks->ctx, PLB_KV("kind", what, "key", key),
            "out of memory in the event index");
    hz_kube_sync_soon(ks);
}

static void
svc_event(struct hz_kside *ks, const plb_obj *svc, int deleted)
{
    const struct plb_host *h = ks->host;
    char key[512];
    if (key_of(ks, svc, key, sizeof(key)) < 0)
        return;
    int ours = !deleted && hz_kube_is_ours(ks, svc) &&
               !h->obj->get(svc, "metadata", "deletionTimestamp", NULL);
    const char *etp = h->obj->str(h->obj->get(svc, "spec", "externalTrafficPolicy", NULL));
    int local = ks->cfg->dynamic_node_selector && etp && strcmp(etp, "Local") == 0;
    if (hz_index_service(ks->index, key, ours, local, enqueue, ks) < 0)
        index_failed(ks, "service", key);
}

static void
node_event(struct hz_kside *ks, const plb_obj *node, int deleted)
{
    const char *name = hz_ks_str(ks, node, "metadata", "name", NULL);
    if (name && hz_index_node(ks->index, name, node_fp(ks, node), deleted, enqueue, ks) < 0)
        index_failed(ks, "node", name);
}

static void
slice_event(struct hz_kside *ks, const plb_obj *slice, int deleted)
{
    const struct plb_host *h = ks->host;
    const char *ns = hz_ks_str(ks, slice, "metadata", "namespace", NULL);
    const char *svc =
        h->obj->str(h->obj->get(slice, "metadata", "labels", SLICE_SERVICE_LABEL, NULL));
    const plb_obj *eps = h->obj->get(slice, "endpoints", NULL);
    size_t n = h->obj->len(eps), nn = 0;
    char key[512], skey[512];
    const char **nodes = NULL;
    if (key_of(ks, slice, key, sizeof(key)) < 0)
        return;
    snprintf(skey, sizeof(skey), "%s/%s", ns ? ns : "", svc ? svc : "");
    if (n && !(nodes = hz_calloc(n * sizeof(*nodes)))) {
        index_failed(ks, "endpointslice", key);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *nm = h->obj->str(h->obj->get(h->obj->at(eps, i), "nodeName", NULL));
        if (nm)
            nodes[nn++] = nm;
    }
    if (hz_index_slice(ks->index, key, svc ? skey : NULL, nodes, nn, deleted, enqueue, ks) < 0)
        index_failed(ks, "endpointslice", key);
    hz_free(nodes);
}

/* The informers' callbacks: arg is the kside; which informer it is tells
 * what the object is. */
static void
on_event(plb_informer *inf, const plb_obj *obj, int deleted, void *arg)
{
    struct hz_kside *ks = arg;
    if (!ks->index)
        return;
    if (inf == ks->svc_inf)
        svc_event(ks, obj, deleted);
    else if (inf == ks->node_inf)
        node_event(ks, obj, deleted);
    else if (inf == ks->slice_inf)
        slice_event(ks, obj, deleted);
}

static void
on_add(plb_informer *inf, const plb_obj *obj, void *arg)
{
    on_event(inf, obj, 0, arg);
}

static void
on_update(plb_informer *inf, const plb_obj *old, const plb_obj *obj, void *arg)
{
    (void)old;
    on_event(inf, obj, 0, arg);
}

static void
on_svc_delete(plb_informer *inf, const plb_obj *old, void *arg)
{
    struct hz_kside *ks = arg;
    const char *uid = hz_ks_str(ks, old, "metadata", "uid", NULL);
    char **nd;
    char key[512];
    if (key_of(ks, old, key, sizeof(key)) < 0)
        return;
    hz_state_drop(&ks->states, key);
    if (uid && hz_kube_is_ours(ks, old) &&
        (nd = hz_realloc(ks->deleted, (ks->ndeleted + 1) * sizeof(*nd)))) {
        ks->deleted = nd;
        if ((nd[ks->ndeleted] = hz_strdup(uid)))
            ks->ndeleted++;
    }
    on_event(inf, old, 1, ks);
    hz_kube_sync_arm(ks);
}

static void
on_delete(plb_informer *inf, const plb_obj *old, void *arg)
{
    on_event(inf, old, 1, arg);
}

static void
on_synced(plb_informer *inf, void *arg)
{
    (void)inf;
    hz_kube_sync_soon(arg);
}

/* What the informers keep of each object (plb_informer_opts.keep): the
 * fields this module and the daemon's target selection read (the identity
 * is always kept). A heartbeat changes none of them, so it reaches no
 * callback. */
static const char *const keep_services[] = {
    "/metadata/annotations",
    "/metadata/finalizers",
    "/metadata/deletionTimestamp",
    "/spec/type",
    "/spec/loadBalancerClass",
    "/spec/ports",
    "/spec/externalTrafficPolicy",
    "/status/loadBalancer",
    NULL,
};
static const char *const keep_nodes[] = {
    "/metadata/labels",          "/spec/unschedulable", "/status/conditions/type",
    "/status/conditions/status", "/status/addresses",   NULL,
};
static const char *const keep_slices[] = {
    "/metadata/labels/kubernetes.io~1service-name",
    "/endpoints/nodeName",
    "/endpoints/conditions",
    NULL,
};

static const struct plb_informer_handlers svc_handlers = {on_add, on_update, on_svc_delete,
                                                          on_synced, NULL};
static const struct plb_informer_handlers handlers = {on_add, on_update, on_delete, on_synced,
                                                      NULL};

static plb_informer *
informer(struct hz_kside *ks, const char *api_version, const char *resource,
         const char *const *keep, const struct plb_informer_handlers *cb)
{
    int err = 0;
    plb_informer *inf = plb_informer_watch(ks->host, ks->kube, api_version, resource, NULL, NULL,
                                           keep, cb, ks, &err);
    if (!inf)
        PLB_ERR(ks->host, ks->ctx, PLB_KV("resource", resource, "error", strerror(-err)),
                "cannot start the informer");
    return inf;
}

/* See hz_kube_int.h. */
int
hz_watch_start(struct hz_kside *ks)
{
    if (!(ks->svc_inf = informer(ks, "v1", "services", keep_services, &svc_handlers)) ||
        !(ks->node_inf = informer(ks, "v1", "nodes", keep_nodes, &handlers)) ||
        !(ks->slice_inf =
              informer(ks, "discovery.k8s.io/v1", "endpointslices", keep_slices, &handlers)))
        return -EIO;
    return 0;
}
