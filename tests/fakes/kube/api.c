/* Routing of API paths and the write verbs: create, get, update, patch,
 * delete (with finalizers and preconditions) and deletecollection. */
#include "fk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#define NOT_FOUND_MSG "the server could not find the requested resource"

struct target {
    struct fk_cluster *cl;
    const struct fk_kind *k;
    const char *ns;   /* "" when none */
    const char *name; /* NULL for the collection */
    int status;       /* /status subresource */
};

static json_t *
not_found(const struct fk_kind *k, const char *name)
{
    char msg[600];
    if (k->group[0])
        snprintf(msg, sizeof(msg), "%s.%s \"%s\" not found", k->resource, k->group, name);
    else
        snprintf(msg, sizeof(msg), "%s \"%s\" not found", k->resource, name);
    return fk_status_new(404, "NotFound", msg, name, k, NULL);
}

static json_t *
conflict(const struct fk_kind *k, const char *name, const char *why)
{
    char msg[1024];
    if (k->group[0])
        snprintf(msg, sizeof(msg), "Operation cannot be fulfilled on %s.%s \"%s\": %s",
                 k->resource, k->group, name, why);
    else
        snprintf(msg, sizeof(msg), "Operation cannot be fulfilled on %s \"%s\": %s", k->resource,
                 name, why);
    return fk_status_new(409, "Conflict", msg, name, k, NULL);
}

static json_t *
bad_request(const char *msg)
{
    return fk_status_new(400, "BadRequest", msg, NULL, NULL, NULL);
}

static int
dry_run(struct fk_rq *rq)
{
    const char *d = fk_rq_param(rq, "dryRun");
    return d && !strcmp(d, "All");
}

/* Parse the request body as a JSON object, checking the media type.
 * New object or NULL with *err (new Status). */
static json_t *
read_body(struct fk_rq *rq, const char *const *types, json_t **err)
{
    const char *ct = evhttp_find_header(evhttp_request_get_input_headers(rq->req), "Content-Type");
    char *body = NULL;
    json_t *v = NULL;
    json_error_t jerr;
    int ok = 0;

    *err = NULL;
    if (ct) {
        for (size_t i = 0; types[i]; i++)
            if (!strncasecmp(ct, types[i], strlen(types[i])) &&
                (ct[strlen(types[i])] == '\0' || ct[strlen(types[i])] == ';'))
                ok = 1;
    } else {
        ok = !strcmp(types[0], "application/json");
    }
    if (!ok) {
        char msg[512];
        snprintf(msg, sizeof(msg), "the body of the request was in an unknown format - accepted "
                 "media types include: %s%s%s%s%s", types[0], types[1] ? ", " : "",
                 types[1] ? types[1] : "", types[1] && types[2] ? ", " : "",
                 types[1] && types[2] ? types[2] : "");
        *err = fk_status_new(415, "UnsupportedMediaType", msg, NULL, NULL, NULL);
        return NULL;
    }
    body = fk_rq_body(rq, NULL);
    if (!body) {
        *err = bad_request("the request body is empty");
        return NULL;
    }
    v = json_loads(body, JSON_REJECT_DUPLICATES, &jerr);
    free(body);
    if (!v) {
        char msg[512];
        snprintf(msg, sizeof(msg), "couldn't decode the request body: %s (line %d, column %d)",
                 jerr.text, jerr.line, jerr.column);
        *err = bad_request(msg);
    }
    return v;
}

/* Check kind/apiVersion of a body against k, filling them when absent. */
static json_t *
check_type(json_t *obj, const struct fk_kind *k)
{
    char av[128], msg[512];
    const char *kind, *api;

    if (!json_is_object(obj))
        return bad_request("the request body must be a JSON object");
    fk_kind_api_version(k, av, sizeof(av));
    kind = json_string_value(json_object_get(obj, "kind"));
    api = json_string_value(json_object_get(obj, "apiVersion"));
    if (api && api[0] && strcmp(api, av)) {
        snprintf(msg, sizeof(msg),
                 "the API version in the data (%s) does not match the expected API version (%s)",
                 api, av);
        return bad_request(msg);
    }
    if (kind && kind[0] && strcmp(kind, k->kind)) {
        snprintf(msg, sizeof(msg), "the kind in the data (%s) does not match the expected kind "
                 "(%s)", kind, k->kind);
        return bad_request(msg);
    }
    if (json_object_set_new(obj, "kind", json_string(k->kind)) < 0 ||
        json_object_set_new(obj, "apiVersion", json_string(av)) < 0 ||
        !fk_json_path_obj(obj, "metadata"))
        return fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
    if (!json_is_object(json_object_get(obj, "metadata")))
        return bad_request("metadata must be an object");
    return NULL;
}

/* Namespace in body vs URL; cluster-scoped kinds carry none. */
static json_t *
check_namespace(json_t *obj, struct target *t)
{
    json_t *meta = json_object_get(obj, "metadata");
    const char *ons = json_string_value(json_object_get(meta, "namespace"));
    if (!(t->k->flags & FK_NAMESPACED)) {
        json_object_del(meta, "namespace");
        return NULL;
    }
    if (ons && ons[0] && strcmp(ons, t->ns))
        return bad_request("the namespace of the provided object does not match the namespace "
                           "sent on the request");
    if (json_object_set_new(meta, "namespace", json_string(t->ns)) < 0)
        return fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
    return NULL;
}

/* Reply with obj (steals) unless dry run; commit first. */
static void
commit_and_reply(struct fk_rq *rq, struct target *t, int type, json_t *obj, int code)
{
    if (!dry_run(rq)) {
        json_incref(obj);
        if (fk_store_commit(&rq->app->store, t->cl, t->k, type, obj) < 0) {
            json_decref(obj);
            fk_reply_status(rq, fk_status_new(500, "InternalError", "store write failed", NULL,
                                              NULL, NULL));
            return;
        }
    }
    fk_reply_json(rq, code, obj);
}

static void
do_create(struct fk_rq *rq, struct target *t)
{
    static const char *const types[] = {"application/json", NULL};
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    json_t *obj, *err, *meta;
    const char *name, *gen, *why;
    char ts[32], uid[40], buf[300], msg[700];

    obj = read_body(rq, types, &err);
    if (!obj)
        goto fail;
    if ((err = check_type(obj, t->k)) || (err = check_namespace(obj, t)))
        goto fail;
    meta = json_object_get(obj, "metadata");
    name = json_string_value(json_object_get(meta, "name"));
    gen = json_string_value(json_object_get(meta, "generateName"));
    if ((!name || !name[0]) && gen && gen[0]) {
        size_t n = strlen(gen) > 58 ? 58 : strlen(gen);
        snprintf(buf, sizeof(buf), "%.*s", (int)n, gen);
        for (int i = 0; i < 5; i++)
            buf[n + i] = alphabet[rand() % (int)(sizeof(alphabet) - 1)];
        buf[n + 5] = '\0';
        if (json_object_set_new(meta, "name", json_string(buf)) < 0)
            goto oom;
        name = json_string_value(json_object_get(meta, "name"));
    }
    if (!name || !name[0]) {
        err = fk_status_invalid(t->k, "", "metadata.name", "FieldValueRequired",
                                "Required value: name or generateName is required");
        goto fail;
    }
    if ((why = fk_validate_name(t->k, name))) {
        snprintf(msg, sizeof(msg), "Invalid value: \"%s\": %s", name, why);
        err = fk_status_invalid(t->k, name, "metadata.name", "FieldValueInvalid", msg);
        goto fail;
    }
    if (t->k->flags & FK_NAMESPACED) {
        json_t *ns = fk_store_get(t->cl, &fk_kinds[0], "", t->ns);
        if (!ns) {
            snprintf(msg, sizeof(msg), "namespaces \"%s\" not found", t->ns);
            err = fk_status_new(404, "NotFound", msg, t->ns, &fk_kinds[0], NULL);
            goto fail;
        }
        if (fk_json_path_str(ns, "metadata.deletionTimestamp")) {
            snprintf(msg, sizeof(msg), "%s \"%s\" is forbidden: unable to create new content in "
                     "namespace %s because it is being terminated", t->k->resource, name, t->ns);
            err = fk_status_new(403, "Forbidden", msg, name, t->k, NULL);
            goto fail;
        }
    }
    if (fk_store_get(t->cl, t->k, t->ns, name)) {
        if (t->k->group[0])
            snprintf(msg, sizeof(msg), "%s.%s \"%s\" already exists", t->k->resource,
                     t->k->group, name);
        else
            snprintf(msg, sizeof(msg), "%s \"%s\" already exists", t->k->resource, name);
        err = fk_status_new(409, "AlreadyExists", msg, name, t->k, NULL);
        goto fail;
    }
    if (json_string_length(json_object_get(meta, "resourceVersion"))) {
        err = fk_status_new(500, "InternalError",
                            "resourceVersion should not be set on objects to be created", NULL,
                            NULL, NULL);
        goto fail;
    }
    json_object_del(meta, "deletionTimestamp");
    json_object_del(meta, "deletionGracePeriodSeconds");
    json_object_del(meta, "managedFields");
    json_object_del(meta, "selfLink");
    if (json_object_set_new(meta, "uid", json_string(fk_uuid(uid, sizeof(uid)))) < 0 ||
        json_object_set_new(meta, "creationTimestamp",
                            json_string(fk_now_rfc3339(ts, sizeof(ts)))) < 0)
        goto oom;
    if (!strcmp(t->k->resource, "endpointslices") &&
        json_object_set_new(meta, "generation", json_integer(1)) < 0)
        goto oom;
    if (t->k->flags & FK_CLEAR_STATUS)
        json_object_del(obj, "status");
    if ((err = fk_default_and_validate(t->cl, t->k, obj, NULL)))
        goto fail;
    commit_and_reply(rq, t, FK_ADDED, obj, 201);
    return;
oom:
    err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
fail:
    json_decref(obj);
    fk_reply_status(rq, err);
}

static void
do_get(struct fk_rq *rq, struct target *t)
{
    json_t *obj = fk_store_get(t->cl, t->k, t->ns, t->name);
    if (!obj) {
        fk_reply_status(rq, not_found(t->k, t->name));
        return;
    }
    fk_reply_json(rq, 200, json_incref(obj));
}

/* Shared tail of PUT and PATCH: body (steals) is the client's full object. */
static void
do_update_obj(struct fk_rq *rq, struct target *t, json_t *body, json_t *old)
{
    json_t *err = NULL, *nobj = NULL, *meta, *ometa = json_object_get(old, "metadata");
    const char *name, *rv, *orv = fk_json_path_str(old, "metadata.resourceVersion");
    static const char *const keep[] = {"uid", "creationTimestamp", "deletionTimestamp",
                                       "deletionGracePeriodSeconds", "namespace", "name", NULL};
    json_t *a, *b;
    size_t i;
    int deleting;

    if ((err = check_type(body, t->k)) || (err = check_namespace(body, t)))
        goto fail;
    name = fk_json_path_str(body, "metadata.name");
    if (!name || strcmp(name, t->name)) {
        char msg[700];
        snprintf(msg, sizeof(msg), "the name of the object (%s) does not match the name on the "
                 "URL (%s)", name ? name : "", t->name);
        err = bad_request(msg);
        goto fail;
    }
    rv = fk_json_path_str(body, "metadata.resourceVersion");
    if (rv && rv[0] && strcmp(rv, orv)) {
        err = conflict(t->k, t->name, "the object has been modified; please apply your changes "
                       "to the latest version and try again");
        goto fail;
    }
    if (t->status) {
        /* A status write changes status only. */
        nobj = json_deep_copy(old);
        if (!nobj)
            goto oom;
        if (json_object_get(body, "status")) {
            if (json_object_set(nobj, "status", json_object_get(body, "status")) < 0)
                goto oom;
        } else {
            json_object_del(nobj, "status");
        }
    } else {
        nobj = json_incref(body);
        if (t->k->flags & FK_HAS_STATUS) {
            if (json_object_get(old, "status")) {
                if (json_object_set_new(nobj, "status",
                                        json_deep_copy(json_object_get(old, "status"))) < 0)
                    goto oom;
            } else {
                json_object_del(nobj, "status");
            }
        }
    }
    meta = json_object_get(nobj, "metadata");
    for (i = 0; keep[i]; i++) {
        json_t *v = json_object_get(ometa, keep[i]);
        if (v)
            json_object_set(meta, keep[i], v);
        else
            json_object_del(meta, keep[i]);
    }
    json_object_del(meta, "managedFields");
    json_object_set(meta, "resourceVersion", json_object_get(ometa, "resourceVersion"));
    deleting = json_object_get(ometa, "deletionTimestamp") != NULL;
    if (deleting) {
        json_array_foreach(json_object_get(meta, "finalizers"), i, a) {
            size_t j;
            int found = 0;
            json_array_foreach(json_object_get(ometa, "finalizers"), j, b) found |= json_equal(a, b);
            if (!found) {
                err = fk_status_invalid(t->k, t->name, "metadata.finalizers", "FieldValueForbidden",
                                        "Forbidden: no new finalizers can be added if the object "
                                        "is being deleted");
                goto fail;
            }
        }
    }
    if ((err = fk_default_and_validate(t->cl, t->k, nobj, old)))
        goto fail;
    if (json_equal(nobj, old)) {
        /* Nothing changed: no new resourceVersion, no event. */
        json_decref(nobj);
        json_decref(body);
        fk_reply_json(rq, 200, json_incref(old));
        return;
    }
    if (json_object_get(meta, "generation")) {
        json_t *x = json_deep_copy(nobj), *y = json_deep_copy(old);
        int changed;
        if (!x || !y) {
            json_decref(x);
            json_decref(y);
            goto oom;
        }
        json_object_del(x, "metadata");
        json_object_del(y, "metadata");
        json_object_del(x, "status");
        json_object_del(y, "status");
        changed = !json_equal(x, y);
        json_decref(x);
        json_decref(y);
        if (changed)
            json_object_set_new(meta, "generation",
                                json_integer(json_integer_value(json_object_get(ometa,
                                                                                "generation")) +
                                             1));
    }
    json_decref(body);
    if (deleting && json_array_size(json_object_get(meta, "finalizers")) == 0) {
        commit_and_reply(rq, t, FK_DELETED, nobj, 200);
        return;
    }
    commit_and_reply(rq, t, FK_MODIFIED, nobj, 200);
    return;
oom:
    err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
fail:
    json_decref(nobj);
    json_decref(body);
    fk_reply_status(rq, err);
}

static void
do_update(struct fk_rq *rq, struct target *t)
{
    static const char *const types[] = {"application/json", NULL};
    json_t *err, *body, *old = fk_store_get(t->cl, t->k, t->ns, t->name);

    body = read_body(rq, types, &err);
    if (!body) {
        fk_reply_status(rq, err);
        return;
    }
    if (!old) {
        json_decref(body);
        fk_reply_status(rq, not_found(t->k, t->name));
        return;
    }
    do_update_obj(rq, t, body, old);
}

static void
do_patch(struct fk_rq *rq, struct target *t)
{
    static const char *const types[] = {"application/json-patch+json",
                                        "application/merge-patch+json",
                                        "application/strategic-merge-patch+json", NULL};
    const char *ct = evhttp_find_header(evhttp_request_get_input_headers(rq->req), "Content-Type");
    json_t *err, *patch, *res = NULL, *old = fk_store_get(t->cl, t->k, t->ns, t->name);
    char msg[512];
    int code;

    if (!ct) {
        fk_reply_status(rq, fk_status_new(415, "UnsupportedMediaType",
                                          "the body of the request was in an unknown format - "
                                          "accepted media types include: "
                                          "application/json-patch+json, "
                                          "application/merge-patch+json, "
                                          "application/strategic-merge-patch+json",
                                          NULL, NULL, NULL));
        return;
    }
    patch = read_body(rq, types, &err);
    if (!patch) {
        fk_reply_status(rq, err);
        return;
    }
    if (!old) {
        json_decref(patch);
        fk_reply_status(rq, not_found(t->k, t->name));
        return;
    }
    msg[0] = '\0';
    if (!strncasecmp(ct, "application/json-patch+json", 27)) {
        res = fk_json_patch(old, patch, &code, msg, sizeof(msg));
        if (!res)
            err = fk_status_new(code, code == 400 ? "BadRequest" : "Invalid", msg, NULL, NULL,
                                NULL);
    } else if (!strncasecmp(ct, "application/merge-patch+json", 28)) {
        if (!json_is_object(patch))
            err = bad_request("merge patch must be a JSON object");
        else if (!(res = fk_merge_patch(old, patch)))
            err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
    } else {
        res = fk_strategic_patch(old, patch, t->k, msg, sizeof(msg));
        if (!res)
            err = bad_request(msg);
    }
    json_decref(patch);
    if (!res) {
        fk_reply_status(rq, err);
        return;
    }
    if (!json_is_object(res) || !json_is_object(json_object_get(res, "metadata"))) {
        json_decref(res);
        fk_reply_status(rq, bad_request("the patch result is not an object with metadata"));
        return;
    }
    if (!fk_json_path_str(res, "metadata.resourceVersion") &&
        json_object_set(json_object_get(res, "metadata"), "resourceVersion",
                        json_object_get(json_object_get(old, "metadata"), "resourceVersion")) < 0) {
        json_decref(res);
        fk_reply_status(rq, fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL));
        return;
    }
    do_update_obj(rq, t, res, old);
}

/* Remove obj's key now: commit the final state (steals obj). */
static int
remove_now(struct fk_rq *rq, struct target *t, json_t *obj)
{
    return fk_store_commit(&rq->app->store, t->cl, t->k, FK_DELETED, obj);
}

/* Begin deleting obj (borrowed): set deletionTimestamp when it has
 * finalizers, else remove it. *result gets the new state (new) or NULL
 * when the object is gone. 0 or -1. */
static int
delete_one(struct fk_rq *rq, struct target *t, json_t *obj, json_t **result)
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
        struct target sub = *t;
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
            json_object_foreach_safe(t->cl->objs[i], tmp, key, o) {
                json_t *c;
                if (strncmp(key, prefix, strlen(prefix)) || json_array_size(json_object_get(
                                                                 json_object_get(o, "metadata"),
                                                                 "finalizers")))
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

static void
do_delete(struct fk_rq *rq, struct target *t)
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
            fk_reply_status(rq, bad_request("the body of a DELETE must be DeleteOptions"));
            return;
        }
    }
    if (!obj) {
        json_decref(opts);
        fk_reply_status(rq, not_found(t->k, t->name));
        return;
    }
    puid = fk_json_path_str(opts, "preconditions.uid");
    prv = fk_json_path_str(opts, "preconditions.resourceVersion");
    if (puid && strcmp(puid, fk_json_path_str(obj, "metadata.uid"))) {
        snprintf(msg, sizeof(msg), "Precondition failed: UID in precondition: %s, UID in object "
                 "meta: %s", puid, fk_json_path_str(obj, "metadata.uid"));
        json_decref(opts);
        fk_reply_status(rq, conflict(t->k, t->name, msg));
        return;
    }
    if (prv && strcmp(prv, fk_json_path_str(obj, "metadata.resourceVersion"))) {
        snprintf(msg, sizeof(msg), "Precondition failed: ResourceVersion in precondition: %s, "
                 "ResourceVersion in object meta: %s", prv,
                 fk_json_path_str(obj, "metadata.resourceVersion"));
        json_decref(opts);
        fk_reply_status(rq, conflict(t->k, t->name, msg));
        return;
    }
    json_decref(opts);
    if (dry_run(rq)) {
        fk_reply_json(rq, 200, json_incref(obj));
        return;
    }
    {
        json_t *uid = json_incref(json_object_get(json_object_get(obj, "metadata"), "uid"));
        if (delete_one(rq, t, obj, &result) < 0) {
            json_decref(uid);
            fk_reply_status(rq, fk_status_new(500, "InternalError", "store write failed", NULL,
                                              NULL, NULL));
            return;
        }
        if (result && fk_store_get(t->cl, t->k, t->ns, t->name)) {
            json_decref(uid);
            fk_reply_json(rq, 200, result); /* pending finalizers */
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

static void
do_delete_collection(struct fk_rq *rq, struct target *t)
{
    char err[256], av[128], lk[64];
    struct fk_selector *ls = fk_label_selector_parse(fk_rq_param(rq, "labelSelector"), err,
                                                     sizeof(err));
    struct fk_selector *fs = ls ? fk_field_selector_parse(fk_rq_param(rq, "fieldSelector"),
                                                          t->k, err, sizeof(err))
                                : NULL;
    json_t *snap = NULL, *items = NULL, *o, *list;
    const char *key;
    char prefix[300];

    if (!ls || !fs) {
        fk_selector_free(ls);
        fk_reply_status(rq, bad_request(err));
        return;
    }
    snap = json_object();
    items = json_array();
    if (!snap || !items || json_object_update(snap, t->cl->objs[fk_kind_index(t->k)]) < 0)
        goto oom;
    snprintf(prefix, sizeof(prefix), "%s/", t->ns);
    json_object_foreach(snap, key, o) {
        json_t *res = NULL;
        struct target one = *t;
        if (t->ns[0] && strncmp(key, prefix, strlen(prefix)))
            continue;
        if (!fk_selector_match(ls, o) || !fk_selector_match(fs, o))
            continue;
        one.name = fk_json_path_str(o, "metadata.name");
        if (json_array_append(items, o) < 0)
            goto oom;
        if (!dry_run(rq) && delete_one(rq, &one, o, &res) < 0)
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

static void
reply_text(struct fk_rq *rq, int code, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    evhttp_add_header(evhttp_request_get_output_headers(rq->req), "Content-Type",
                      "text/plain; charset=utf-8");
    if (b)
        evbuffer_add(b, text, strlen(text));
    if (rq->log)
        json_object_set_new(rq->log, "status", json_integer(code));
    evhttp_send_reply(rq->req, code, NULL, b);
    if (b)
        evbuffer_free(b);
    fk_rq_free(rq);
}

static int
split_path(char *path, char **segs, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(path, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (n == max)
            return -1;
        segs[n++] = s;
    }
    return n;
}

/* See fk.h. */
void
fk_api_dispatch(struct fk_rq *rq)
{
    char *copy = NULL, *segs[12];
    const char *group, *version;
    char **rest;
    int n, nrest;
    struct target t = {0};

    if (!strncmp(rq->path, "/healthz", 8) || !strncmp(rq->path, "/livez", 6) ||
        !strncmp(rq->path, "/readyz", 7)) {
        reply_text(rq, 200, "ok");
        return;
    }
    if (!strcmp(rq->path, "/version")) {
        fk_reply_json(rq, 200,
                      json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "major", "1",
                                "minor", "35", "gitVersion", "v1.35.0", "gitCommit",
                                "0000000000000000000000000000000000000000", "gitTreeState",
                                "clean", "buildDate", "2025-12-17T00:00:00Z", "goVersion",
                                "go1.25.5", "compiler", "gc", "platform", "linux/amd64"));
        return;
    }
    if (fk_discovery_serve(rq))
        return;
    copy = strdup(rq->path);
    if (!copy) {
        fk_reply_status(rq, NULL);
        return;
    }
    n = split_path(copy, segs, 12);
    if (n >= 3 && !strcmp(segs[0], "api") && !strcmp(segs[1], "v1")) {
        group = "";
        version = "v1";
        rest = segs + 2;
        nrest = n - 2;
    } else if (n >= 4 && !strcmp(segs[0], "apis")) {
        group = segs[1];
        version = segs[2];
        rest = segs + 3;
        nrest = n - 3;
    } else {
        goto notfound;
    }
    if (nrest >= 3 && !strcmp(rest[0], "namespaces") &&
        (t.k = fk_kind_find(group, version, rest[2])) && (t.k->flags & FK_NAMESPACED)) {
        t.ns = rest[1];
        rest += 2;
        nrest -= 2;
    } else {
        t.ns = "";
        t.k = fk_kind_find(group, version, rest[0]);
        if (!t.k || (t.k->flags & FK_NAMESPACED && nrest > 1))
            goto notfound;
    }
    if (nrest > 3)
        goto notfound;
    t.name = nrest >= 2 ? rest[1] : NULL;
    if (nrest == 3) {
        if (strcmp(rest[2], "status") || !(t.k->flags & FK_HAS_STATUS))
            goto notfound;
        t.status = 1;
    }
    if (rq->srv->quorum_lost) {
        free(copy);
        fk_reply_status(rq, fk_status_new(500, "InternalError", "etcdserver: request timed out",
                                          NULL, NULL, NULL));
        return;
    }
    t.cl = fk_store_cluster(&rq->app->store, rq->cluster);
    if (!t.cl) {
        free(copy);
        fk_reply_status(rq, NULL);
        return;
    }
    switch (rq->method) {
    case EVHTTP_REQ_GET:
        if (fk_rq_param_bool(rq, "watch"))
            fk_watch_start(rq, t.cl, t.k, t.ns, t.name);
        else if (t.name)
            do_get(rq, &t);
        else
            fk_list(rq, t.cl, t.k, t.ns);
        break;
    case EVHTTP_REQ_POST:
        if (t.name)
            goto notallowed;
        do_create(rq, &t);
        break;
    case EVHTTP_REQ_PUT:
        if (!t.name)
            goto notallowed;
        do_update(rq, &t);
        break;
    case EVHTTP_REQ_PATCH:
        if (!t.name)
            goto notallowed;
        do_patch(rq, &t);
        break;
    case EVHTTP_REQ_DELETE:
        if (t.status)
            goto notallowed;
        if (t.name)
            do_delete(rq, &t);
        else
            do_delete_collection(rq, &t);
        break;
    default:
        goto notallowed;
    }
    free(copy);
    return;
notallowed:
    free(copy);
    fk_reply_status(rq, fk_status_new(405, "MethodNotAllowed",
                                      "the server does not allow this method on the requested "
                                      "resource",
                                      NULL, NULL, NULL));
    return;
notfound:
    free(copy);
    fk_reply_status(rq, fk_status_new(404, "NotFound", NOT_FOUND_MSG, NULL, NULL, NULL));
}
