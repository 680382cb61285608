/* DELETE of one object (finalizers, preconditions, namespaces) and of a
 * collection. */
#include "fk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

/* Remove obj's key now: commit the final state (steals obj). */
static int
remove_now(struct fk_rq *rq, struct fk_target *t, json_t *obj)
{
    return fk_store_commit(&rq->app->store, t->cl, t->k, FK_DELETED, obj);
}

/* Begin deleting obj (borrowed): set deletionTimestamp when it has
 * finalizers, else remove it. *result gets the new state (new) or NULL
 * when the object is gone. 0 or -1. */
static int
delete_one(struct fk_rq *rq, struct fk_target *t, json_t *obj, json_t **result)
{
    json_t *nobj = json_deep_copy(obj), *meta;
    char ts[32];

    *result = NULL;
    if (!nobj)
        return -1;
    meta = json_object_get(nobj, "metadata");
    if (json_object_get(meta, "deletionTimestamp")) {
        *result = nobj; /* already being deleted: nothing changes */
        return 0;
    }
    if (!strcmp(t->k->resource, "namespaces") && !t->k->group[0]) {
        /* Terminating, then the namespace controller's work: delete the
         * content, then the namespace unless other finalizers hold it. */
        struct fk_target sub = *t;
        const char *ns = fk_json_path_str(nobj, "metadata.name");
        json_t *st = fk_json_path_obj(nobj, "status");
        if (!st || json_object_set_new(st, "phase", json_string("Terminating")) < 0 ||
            json_object_set_new(meta, "deletionTimestamp",
                                json_string(fk_now_rfc3339(ts, sizeof(ts)))) < 0 ||
            json_object_set_new(meta, "deletionGracePeriodSeconds", json_integer(0)) < 0)
            goto fail;
        if (fk_store_commit(&rq->app->store, t->cl, t->k, FK_MODIFIED, json_incref(nobj)) < 0)
            goto fail;
        for (size_t i = 0; i < fk_nkinds; i++) {
            const char *key;
            json_t *o;
            void *tmp;
            char prefix[300];
            if (!(fk_kinds[i].flags & FK_NAMESPACED))
                continue;
            snprintf(prefix, sizeof(prefix), "%s/", ns);
            sub.k = &fk_kinds[i];
            json_object_foreach_safe(t->cl->objs[i], tmp, key, o)
            {
                json_t *c;
                if (strncmp(key, prefix, strlen(prefix)) ||
                    json_array_size(json_object_get(json_object_get(o, "metadata"), "finalizers")))
                    continue;
                c = json_deep_copy(o);
                if (!c || remove_now(rq, &sub, c) < 0)
                    goto fail;
            }
        }
        if (json_array_size(json_object_get(meta, "finalizers"))) {
            *result = nobj;
            return 0;
        }
        json_object_del(json_object_get(nobj, "spec"), "finalizers");
        json_incref(nobj);
        if (remove_now(rq, t, nobj) < 0)
            goto fail;
        *result = nobj;
        return 0;
    }
    if (json_array_size(json_object_get(meta, "finalizers"))) {
        if (json_object_set_new(meta, "deletionTimestamp",
                                json_string(fk_now_rfc3339(ts, sizeof(ts)))) < 0 ||
            json_object_set_new(meta, "deletionGracePeriodSeconds", json_integer(0)) < 0)
            goto fail;
        json_incref(nobj);
        if (fk_store_commit(&rq->app->store, t->cl, t->k, FK_MODIFIED, nobj) < 0)
            goto fail;
        *result = nobj;
        return 0;
    }
    if (remove_now(rq, t, nobj) < 0)
        return -1;
    return 0;
fail:
    json_decref(nobj);
    return -1;
}

/* See fk.h. */
void
fk_do_delete(struct fk_rq *rq, struct fk_target *t)
{
    json_t *obj = fk_store_get(t->cl, t->k, t->ns, t->name), *result = NULL, *opts = NULL;
    char *body = fk_rq_body(rq, NULL);
    const char *puid, *prv;
    char msg[600];

    if (body) {
        json_error_t jerr;
        opts = json_loads(body, 0, &jerr);
        free(body);
        if (!json_is_object(opts)) {
            json_decref(opts);
            fk_reply_status(rq, fk_err_bad_request("the body of a DELETE must be DeleteOptions"));
            return;
        }
    }
    if (!obj) {
        json_decref(opts);
        fk_reply_status(rq, fk_err_not_found(t->k, t->name));
        return;
    }
    puid = fk_json_path_str(opts, "preconditions.uid");
    prv = fk_json_path_str(opts, "preconditions.resourceVersion");
    if (puid && strcmp(puid, fk_json_path_str(obj, "metadata.uid"))) {
        snprintf(msg, sizeof(msg),
                 "Precondition failed: UID in precondition: %s, UID in object "
                 "meta: %s",
                 puid, fk_json_path_str(obj, "metadata.uid"));
        json_decref(opts);
        fk_reply_status(rq, fk_err_conflict(t->k, t->name, msg));
        return;
    }
    if (prv && strcmp(prv, fk_json_path_str(obj, "metadata.resourceVersion"))) {
        snprintf(msg, sizeof(msg),
                 "Precondition failed: ResourceVersion in precondition: %s, "
                 "ResourceVersion in object meta: %s",
                 prv, fk_json_path_str(obj, "metadata.resourceVersion"));
        json_decref(opts);
        fk_reply_status(rq, fk_err_conflict(t->k, t->name, msg));
        return;
    }
    json_decref(opts);
    if (fk_dry_run(rq)) {
        json_t *view = fk_view_from_storage(t->k, obj);
        if (!view)
            fk_reply_status(rq, NULL);
        else
            fk_reply_json(rq, 200, view);
        return;
    }
    {
        json_t *uid = json_incref(json_object_get(json_object_get(obj, "metadata"), "uid"));
        if (delete_one(rq, t, obj, &result) < 0) {
            json_decref(uid);
            fk_reply_status(
                rq, fk_status_new(500, "InternalError", "store write failed", NULL, NULL, NULL));
            return;
        }
        if (result && fk_store_get(t->cl, t->k, t->ns, t->name)) {
            json_t *view = fk_view_from_storage(t->k, result);
            json_decref(uid);
            json_decref(result);
            if (!view)
                fk_reply_status(rq, NULL);
            else
                fk_reply_json(rq, 200, view); /* pending finalizers */
            return;
        }
        json_decref(result);
        result = json_pack("{s:s, s:s, s:{}, s:s, s:{s:s, s:s, s:O}}", "kind", "Status",
                           "apiVersion", "v1", "metadata", "status", "Success", "details", "name",
                           t->name, "kind", t->k->resource, "uid", uid);
        if (result && t->k->group[0])
            json_object_set_new(json_object_get(result, "details"), "group",
                                json_string(t->k->group));
        json_decref(uid);
        if (!result) {
            fk_reply_status(rq, NULL);
            return;
        }
        fk_reply_json(rq, 200, result);
    }
}

/* See fk.h. */
void
fk_do_delete_collection(struct fk_rq *rq, struct fk_target *t)
{
    char err[256], av[128], lk[64];
    struct fk_selector *ls =
        fk_label_selector_parse(fk_rq_param(rq, "labelSelector"), err, sizeof(err));
    struct fk_selector *fs =
        ls ? fk_field_selector_parse(fk_rq_param(rq, "fieldSelector"), t->k, err, sizeof(err))
           : NULL;
    json_t *snap = NULL, *items = NULL, *o, *list;
    const char *key;
    char prefix[300];

    if (!ls || !fs) {
        fk_selector_free(ls);
        fk_reply_status(rq, fk_err_bad_request(err));
        return;
    }
    snap = json_object();
    items = json_array();
    if (!snap || !items ||
        json_object_update(snap, t->cl->objs[fk_kind_index(fk_kind_storage(t->k))]) < 0)
        goto oom;
    snprintf(prefix, sizeof(prefix), "%s/", t->ns);
    json_object_foreach(snap, key, o)
    {
        json_t *res = NULL;
        struct fk_target one = *t;
        if (t->ns[0] && strncmp(key, prefix, strlen(prefix)))
            continue;
        json_t *view = fk_view_from_storage(t->k, o);
        int match;
        if (!view)
            goto oom;
        match = fk_selector_match(ls, view) && fk_selector_match(fs, view);
        if (match && json_array_append(items, view) < 0) {
            json_decref(view);
            goto oom;
        }
        json_decref(view);
        if (!match)
            continue;
        one.name = fk_json_path_str(o, "metadata.name");
        if (!fk_dry_run(rq) && delete_one(rq, &one, o, &res) < 0)
            goto oom;
        json_decref(res);
    }
    snprintf(lk, sizeof(lk), "%sList", t->k->kind);
    list = json_pack("{s:s, s:s, s:{s:s+}, s:O}", "kind", lk, "apiVersion",
                     fk_kind_api_version(t->k, av, sizeof(av)), "metadata", "resourceVersion", "",
                     "", "items", items);
    if (list) {
        char rv[32];
        snprintf(rv, sizeof(rv), "%llu", (unsigned long long)rq->app->store.rv);
        json_object_set_new(json_object_get(list, "metadata"), "resourceVersion", json_string(rv));
    }
    json_decref(snap);
    json_decref(items);
    fk_selector_free(ls);
    fk_selector_free(fs);
    if (!list) {
        fk_reply_status(rq, NULL);
        return;
    }
    fk_reply_json(rq, 200, list);
    return;
oom:
    json_decref(snap);
    json_decref(items);
    fk_selector_free(ls);
    fk_selector_free(fs);
    fk_reply_status(rq, fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL));
}
