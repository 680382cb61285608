/*
 * cache: the informer's store (a JSON object "namespace/name" -> object,
 * each object held once) and the diff a re-list applies to it. Pure.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"

int
core_kube_obj_key(json_t *obj, char *buf, size_t len)
{
    json_t *md = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    int n;
    if (!name || !*name)
        return -EINVAL;
    if (ns && *ns)
        n = snprintf(buf, len, "%s/%s", ns, name);
    else
        n = snprintf(buf, len, "%s", name);
    return n < 0 || (size_t)n >= len ? -EINVAL : 0;
}

const char *
core_kube_obj_rv(json_t *obj)
{
    const char *rv =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    return rv ? rv : "";
}

void
core_kube_obj_trim(json_t *obj)
{
    json_object_del(json_object_get(obj, "metadata"), "managedFields");
}

int
core_kube_diff(json_t *cache, json_t *fresh, core_kube_diff_cb cb, void *arg)
{
    const char *key;
    json_t *old, *obj;
    void *tmp;
    int changes = 0;

    /* What vanished: DELETED with the last state we knew. */
    json_object_foreach_safe(cache, tmp, key, old)
    {
        if (json_object_get(fresh, key))
            continue;
        json_incref(old);
        char *k = core_strdup(key); /* key dies with the entry */
        if (!k) {
            json_decref(old);
            return -ENOMEM;
        }
        json_object_del(cache, k);
        cb(k, old, NULL, arg);
        core_free(k);
        json_decref(old);
        changes++;
    }
    /* What is new or changed. */
    json_object_foreach(fresh, key, obj)
    {
        old = json_object_get(cache, key);
        if (old && strcmp(core_kube_obj_rv(old), core_kube_obj_rv(obj)) == 0)
            continue; /* unchanged: keep the cached reference, say nothing */
        json_incref(old);
        if (json_object_set(cache, key, obj) < 0) {
            json_decref(old);
            return -ENOMEM;
        }
        cb(key, old, obj, arg);
        json_decref(old);
        changes++;
    }
    return changes;
}
