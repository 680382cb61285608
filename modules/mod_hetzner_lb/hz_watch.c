/*
 * hz_watch.c: the informers of mod_hetzner_lb and what their events queue
 * (see hz_index.h for which Services an event can change) in the work
 * queue (hz_work.c), which hands them to the sync.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_index.h"
#include "hz_kube_int.h"

#define SLICE_SERVICE_LABEL "kubernetes.io/service-name"

/* hz_index_emit: queue key. */
static void
enqueue(const char *key, void *arg)
{
    hz_work_add(arg, key);
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

/* Fingerprint of what makes a node a target: its Ready condition,
 * spec.unschedulable, its labels (the exclusion label, node selectors) and
 * InternalIPs; heartbeats' timestamps are not in it. */
static uint64_t
node_fp(const struct hz_kside *ks, const plb_obj *node)
{
    const struct plb_host *h = ks->host;
    uint64_t fp = HZ_FNV1A64_BASIS;
    const plb_obj *v, *conds = h->obj->get(node, "status", "conditions", NULL);
    const plb_obj *addrs = h->obj->get(node, "status", "addresses", NULL);
    const plb_obj *labels = h->obj->get(node, "metadata", "labels", NULL);
    void *it = NULL;
    const char *k;
    for (size_t i = 0; i < h->obj->len(conds); i++) {
        const char *type = h->obj->str(h->obj->get(h->obj->at(conds, i), "type", NULL));
        if (type && strcmp(type, "Ready") == 0)
            hz_fnv1a64_field(&fp, h->obj->str(h->obj->get(h->obj->at(conds, i), "status", NULL)));
    }
    hz_fnv1a64_field(
        &fp, h->obj->boolean(h->obj->get(node, "spec", "unschedulable", NULL), 0) ? "u" : "s");
    while ((k = h->obj->iter(labels, &it, &v))) {
        hz_fnv1a64_field(&fp, k);
        hz_fnv1a64_field(&fp, h->obj->str(v));
    }
    for (size_t i = 0; i < h->obj->len(addrs); i++) {
        const plb_obj *a = h->obj->at(addrs, i);
        const char *type = h->obj->str(h->obj->get(a, "type", NULL));
        if (type && strcmp(type, "InternalIP") == 0)
            hz_fnv1a64_field(&fp, h->obj->str(h->obj->get(a, "address", NULL)));
    }
    return fp;
}

static void
index_failed(struct hz_kside *ks, const char *what, const char *key)
{
    /* the index lost this change: sync everything rather than miss it */
    PLB_ERR(ks->host, ks->ctx, PLB_KV("kind", what, "key", key),
            "out of memory in the event index");
    hz_work_all(ks);
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
    /* hccm's node selector selects by node labels under any policy */
    int local = ks->cfg->dynamic_node_selector && etp && strcmp(etp, "Local") == 0 &&
                !h->obj->get(svc, "metadata", "annotations", HZ_HCCM_NODE_SELECTOR, NULL);
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
    plb_obj **nd;
    char key[512];
    if (key_of(ks, old, key, sizeof(key)) < 0)
        return;
    hz_state_drop(&ks->states, key);
    if (uid && hz_kube_is_ours(ks, old) &&
        (nd = hz_realloc(ks->deleted, (ks->ndeleted + 1) * sizeof(*nd)))) {
        ks->deleted = nd;
        if ((nd[ks->ndeleted] = ks->host->obj->ref(old)))
            ks->ndeleted++;
    }
    on_event(inf, old, 1, ks);
    hz_work_arm(ks);
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
    hz_work_all(arg);
}

/* What the Service informer keeps of each object (plb_informer_opts.keep)
 * for this module, beside what the daemon's target selection reads
 * (host->lb->keep_services, keep_nodes, keep_slices: the Node and
 * EndpointSlice fields this module reads are among those). The identity is
 * always kept. A heartbeat changes none of them, so it reaches no
 * callback. */
static const char *const own_service_paths[] = {
    "/metadata/annotations",
    "/metadata/finalizers",
    "/metadata/deletionTimestamp",
    "/metadata/creationTimestamp", /* a shared group's oldest member */
    "/spec/type",
    "/spec/loadBalancerClass",
    "/spec/ports",
    "/status/loadBalancer",
    NULL,
};

static const struct plb_informer_handlers svc_handlers = {on_add, on_update, on_svc_delete,
                                                          on_synced, NULL};
static const struct plb_informer_handlers handlers = {on_add, on_update, on_delete, on_synced,
                                                      NULL};

/* An informer of resource keeping own's paths and lb's (either may be NULL),
 * or NULL (logged). */
static plb_informer *
informer(struct hz_kside *ks, const char *api_version, const char *resource, const char *const *own,
         const char *const *lb, const struct plb_informer_handlers *cb)
{
    int err = -ENOMEM;
    const char **keep = plb_keep_join(ks->host, own, lb);
    plb_informer *inf = NULL;
    if (keep)
        inf = plb_informer_watch(ks->host, ks->kube, api_version, resource, NULL, NULL, keep, cb,
                                 ks, &err);
    ks->host->mem->free(keep); /* the informer copied the paths */
    if (!inf)
        PLB_ERR(ks->host, ks->ctx, PLB_KV("resource", resource, "error", strerror(-err)),
                "cannot start the informer");
    return inf;
}

/* See hz_kube_int.h. */
int
hz_watch_start(struct hz_kside *ks)
{
    const struct plb_host_lb *lb = ks->host->lb;
    if (!(ks->svc_inf = informer(ks, "v1", "services", own_service_paths, lb->keep_services,
                                 &svc_handlers)) ||
        !(ks->node_inf = informer(ks, "v1", "nodes", NULL, lb->keep_nodes, &handlers)) ||
        !(ks->slice_inf = informer(ks, "discovery.k8s.io/v1", "endpointslices", NULL,
                                   lb->keep_slices, &handlers)))
        return -EIO;
    return 0;
}
