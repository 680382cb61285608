/*
 * hz_cache.c: the Services as the informer's cache has them, read the one
 * way every part of the event side and the reconcile reads them: which are
 * ours, and a tracked Service as it is now.
 */
#include <stdio.h>
#include <string.h>

#include "hz_kube_int.h"

int
hz_kube_is_ours(const struct hz_kside *ks, const plb_obj *svc)
{
    const struct plb_host *h = ks->host;
    const char *type = h->obj->str(h->obj->get(svc, "spec", "type", NULL));
    const char *cls = h->obj->str(h->obj->get(svc, "spec", "loadBalancerClass", NULL));
    return type && strcmp(type, "LoadBalancer") == 0 &&
           hz_class_served(ks->cfg->load_balancer_class, cls);
}

const plb_obj *
hz_svc_current(const struct hz_kside *ks, const char *key, const char *uid)
{
    const char *slash = strchr(key, '/');
    const char *have;
    const plb_obj *svc;
    char ns[256];
    if (!slash || (size_t)(slash - key) >= sizeof(ns) || !ks->svc_inf)
        return NULL;
    snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
    svc = ks->host->kube->informer_get(ks->svc_inf, ns, slash + 1);
    if (!svc || !(have = hz_ks_str(ks, svc, "metadata", "uid", NULL)) || strcmp(have, uid) != 0 ||
        !hz_kube_is_ours(ks, svc) || ks->host->obj->get(svc, "metadata", "deletionTimestamp", NULL))
        return NULL;
    return svc;
}
