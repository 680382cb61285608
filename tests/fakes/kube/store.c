/* The object store: one map per cluster and kind, one global
 * resourceVersion counter, and a bounded ring of past events that serves
 * watches from an older resourceVersion and consistent list snapshots. */
#include "fk.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const default_namespaces[] = {"default", "kube-system", "kube-public",
                                                 "kube-node-lease"};

/* See fk.h. */
const char *
fk_store_key(const char *ns, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", ns ? ns : "", name ? name : "");
    return buf;
}

/* See fk.h. */
int
fk_store_init(struct fk_store *s, size_t history)
{
    memset(s, 0, sizeof(*s));
    s->rv = 1;
    s->hist_cap = history ? history : 1;
    s->hist = calloc(s->hist_cap, sizeof(*s->hist));
    if (!s->hist)
        return -ENOMEM;
    if (!fk_store_cluster(s, "")) {
        fk_store_fini(s);
        return -ENOMEM;
    }
    return 0;
}

static void
event_clear(struct fk_event *ev)
{
    json_decref(ev->obj);
    json_decref(ev->old);
    memset(ev, 0, sizeof(*ev));
}

/* See fk.h. */
void
fk_store_compact(struct fk_store *s)
{
    for (size_t i = 0; i < s->hist_len; i++)
        event_clear(&s->hist[(s->hist_head + i) % s->hist_cap]);
    s->hist_len = 0;
    s->hist_head = 0;
    s->compacted_rv = s->rv;
}

/* See fk.h. */
void
fk_store_fini(struct fk_store *s)
{
    struct fk_cluster *cl, *next;

    if (s->hist)
        fk_store_compact(s);
    free(s->hist);
    s->hist = NULL;
    for (cl = s->clusters; cl; cl = next) {
        next = cl->next;
        for (size_t i = 0; i < fk_nkinds; i++)
            json_decref(cl->objs[i]);
        fk_alloc_free(cl);
        free(cl->name);
        free(cl);
    }
    s->clusters = NULL;
}

static int
add_default_namespace(struct fk_store *s, struct fk_cluster *cl, const char *name)
{
    char ts[32], uid[40];
    json_t *ns = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:{s:[s]}, s:{s:s}}", "kind",
                           "Namespace", "apiVersion", "v1", "metadata", "name", name, "uid",
                           fk_uuid(uid, sizeof(uid)), "creationTimestamp",
                           fk_now_rfc3339(ts, sizeof(ts)), "labels", "kubernetes.io/metadata.name",
                           name, "spec", "finalizers", "kubernetes", "status", "phase", "Active");
    if (!ns)
        return -ENOMEM;
    return fk_store_commit(s, cl, &fk_kinds[0], FK_ADDED, ns);
}

/* See fk.h. */
struct fk_cluster *
fk_store_cluster(struct fk_store *s, const char *name)
{
    struct fk_cluster *cl;

    for (cl = s->clusters; cl; cl = cl->next)
        if (!strcmp(cl->name, name))
            return cl;
    cl = calloc(1, sizeof(*cl));
    if (!cl)
        return NULL;
    cl->name = strdup(name);
    if (!cl->name)
        goto fail;
    for (size_t i = 0; i < fk_nkinds; i++) {
        cl->objs[i] = json_object();
        if (!cl->objs[i])
            goto fail;
    }
    cl->next = s->clusters;
    s->clusters = cl;
    for (size_t i = 0; i < sizeof(default_namespaces) / sizeof(default_namespaces[0]); i++)
        if (add_default_namespace(s, cl, default_namespaces[i]) < 0)
            return NULL; /* the cluster stays, partially populated */
    return cl;
fail:
    for (size_t i = 0; i < fk_nkinds; i++)
        json_decref(cl->objs[i]);
    free(cl->name);
    free(cl);
    return NULL;
}

/* See fk.h. */
json_t *
fk_store_get(struct fk_cluster *cl, const struct fk_kind *k, const char *ns, const char *name)
{
    char key[512];
    return json_object_get(cl->objs[fk_kind_index(fk_kind_storage(k))],
                           fk_store_key(ns, name, key, sizeof(key)));
}

/* See fk.h. */
int
fk_store_commit(struct fk_store *s, struct fk_cluster *cl, const struct fk_kind *k, int type,
                json_t *obj)
{
    char key[512], rvs[32];
    json_t *map;
    json_t *meta = json_object_get(obj, "metadata");
    json_t *old;
    struct fk_event *ev;

    k = fk_kind_storage(k); /* history and watches see the stored kind */
    map = cl->objs[fk_kind_index(k)];
    if (!json_is_object(meta)) {
        json_decref(obj);
        return -EINVAL;
    }
    fk_store_key(fk_json_path_str(obj, "metadata.namespace"),
                 fk_json_path_str(obj, "metadata.name"), key, sizeof(key));
    snprintf(rvs, sizeof(rvs), "%" PRIu64, s->rv + 1);
    if (json_object_set_new(meta, "resourceVersion", json_string(rvs)) < 0) {
        json_decref(obj);
        return -ENOMEM;
    }
    if (fk_alloc_prepare(cl, k) < 0) {
        json_decref(obj);
        return -ENOMEM;
    }
    old = json_incref(json_object_get(map, key));
    if (type == FK_DELETED) {
        json_object_del(map, key);
    } else if (json_object_set(map, key, obj) < 0) {
        json_decref(old);
        json_decref(obj);
        return -ENOMEM;
    }
    fk_alloc_track(cl, k, old, type == FK_DELETED ? NULL : obj);
    s->rv++;

    if (s->hist_len == s->hist_cap) {
        struct fk_event *oldest = &s->hist[s->hist_head];
        s->compacted_rv = oldest->rv;
        event_clear(oldest);
        s->hist_head = (s->hist_head + 1) % s->hist_cap;
        s->hist_len--;
    }
    ev = &s->hist[(s->hist_head + s->hist_len) % s->hist_cap];
    ev->rv = s->rv;
    ev->cl = cl;
    ev->kind = k;
    ev->type = type;
    ev->obj = obj; /* the history keeps the caller's reference */
    ev->old = old;
    s->hist_len++;
    if (s->on_event)
        s->on_event(ev, s->on_event_arg);
    return 0;
}

/* See fk.h. */
uint64_t
fk_store_oldest_rv(const struct fk_store *s)
{
    return s->compacted_rv;
}

/* See fk.h. */
json_t *
fk_store_snapshot(struct fk_store *s, struct fk_cluster *cl, const struct fk_kind *k, uint64_t rv,
                  int *expired)
{
    json_t *snap;
    size_t idx;

    k = fk_kind_storage(k);
    idx = fk_kind_index(k);
    *expired = 0;
    if (rv == 0 || rv >= s->rv)
        return json_incref(cl->objs[idx]); /* the live map, read-only */
    snap = json_object();
    if (!snap)
        return NULL;
    if (json_object_update(snap, cl->objs[idx]) < 0)
        goto fail;
    if (rv < s->compacted_rv) {
        *expired = 1;
        goto fail;
    }
    /* Undo the events newer than rv, newest first. */
    for (size_t i = s->hist_len; i > 0; i--) {
        struct fk_event *ev = &s->hist[(s->hist_head + i - 1) % s->hist_cap];
        char key[512];
        if (ev->rv <= rv)
            break;
        if (ev->cl != cl || ev->kind != k)
            continue;
        fk_store_key(fk_json_path_str(ev->obj, "metadata.namespace"),
                     fk_json_path_str(ev->obj, "metadata.name"), key, sizeof(key));
        if (ev->type == FK_ADDED)
            json_object_del(snap, key);
        else if (json_object_set(snap, key, ev->old) < 0)
            goto fail;
    }
    return snap;
fail:
    json_decref(snap);
    return NULL;
}

/* See fk.h. */
int
fk_store_replay(struct fk_store *s, uint64_t after, int (*cb)(const struct fk_event *ev, void *arg),
                void *arg)
{
    for (size_t i = 0; i < s->hist_len; i++) {
        struct fk_event *ev = &s->hist[(s->hist_head + i) % s->hist_cap];
        int r;
        if (ev->rv <= after)
            continue;
        r = cb(ev, arg);
        if (r)
            return r;
    }
    return 0;
}
