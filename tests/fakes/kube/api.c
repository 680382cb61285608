/* The object verbs: create, get, update (PUT) and patch, with the
 * apiserver's checks and Status errors. */
#include "fk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

/* See fk.h. */
json_t *
fk_err_not_found(const struct fk_kind *k, const char *name)
{
    char msg[600];
    if (k->group[0])
        snprintf(msg, sizeof(msg), "%s.%s \"%s\" not found", k->resource, k->group, name);
    else
        snprintf(msg, sizeof(msg), "%s \"%s\" not found", k->resource, name);
    return fk_status_new(404, "NotFound", msg, name, k, NULL);
}

/* See fk.h. */
json_t *
fk_err_conflict(const struct fk_kind *k, const char *name, const char *why)
{
    char msg[1024];
    if (k->group[0])
        snprintf(msg, sizeof(msg), "Operation cannot be fulfilled on %s.%s \"%s\": %s", k->resource,
                 k->group, name, why);
    else
        snprintf(msg, sizeof(msg), "Operation cannot be fulfilled on %s \"%s\": %s", k->resource,
                 name, why);
    return fk_status_new(409, "Conflict", msg, name, k, NULL);
}

/* See fk.h. */
json_t *
fk_err_bad_request(const char *msg)
{
    return fk_status_new(400, "BadRequest", msg, NULL, NULL, NULL);
}

/* See fk.h. */
int
fk_dry_run(struct fk_rq *rq)
{
    const char *d = fk_rq_param(rq, "dryRun");
    return d && !strcmp(d, "All");
}

#define PROTOBUF_TYPE "application/vnd.kubernetes.protobuf"
#define APPLY_TYPE "application/apply-patch+yaml"

/* 1 when media type ct (parameters after ';' ignored) is one of types. */
static int
media_type_in(const char *ct, const char *const *types)
{
    for (size_t i = 0; types[i]; i++) {
        size_t n = strlen(types[i]);
        if (!strncasecmp(ct, types[i], n) && (ct[n] == '\0' || ct[n] == ';'))
            return 1;
    }
    return 0;
}

/* Parse the request body as a JSON object, checking the media type (where
 * JSON is accepted, a protobuf Namespace is too: fk_proto_to_json).
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
    if (ct && !strcmp(types[0], "application/json") &&
        !strncasecmp(ct, PROTOBUF_TYPE, strlen(PROTOBUF_TYPE)) &&
        (ct[strlen(PROTOBUF_TYPE)] == '\0' || ct[strlen(PROTOBUF_TYPE)] == ';')) {
        size_t len = 0;
        if (!(body = fk_rq_body(rq, &len))) {
            *err = fk_err_bad_request("the request body is empty");
            return NULL;
        }
        v = fk_proto_to_json((const unsigned char *)body, len, err);
        free(body);
        return v;
    }
    if (ct) {
        ok = media_type_in(ct, types);
    } else {
        ok = !strcmp(types[0], "application/json");
    }
    if (!ok) {
        char msg[512];
        snprintf(msg, sizeof(msg),
                 "the body of the request was in an unknown format - accepted "
                 "media types include: %s%s%s%s%s",
                 types[0], types[1] ? ", " : "", types[1] ? types[1] : "",
                 types[1] && types[2] ? ", " : "", types[1] && types[2] ? types[2] : "");
        *err = fk_status_new(415, "UnsupportedMediaType", msg, NULL, NULL, NULL);
        return NULL;
    }
    body = fk_rq_body(rq, NULL);
    if (!body) {
        *err = fk_err_bad_request("the request body is empty");
        return NULL;
    }
    v = json_loads(body, JSON_REJECT_DUPLICATES, &jerr);
    free(body);
    if (!v) {
        char msg[512];
        snprintf(msg, sizeof(msg), "couldn't decode the request body: %s (line %d, column %d)",
                 jerr.text, jerr.line, jerr.column);
        *err = fk_err_bad_request(msg);
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
        return fk_err_bad_request("the request body must be a JSON object");
    fk_kind_api_version(k, av, sizeof(av));
    kind = json_string_value(json_object_get(obj, "kind"));
    api = json_string_value(json_object_get(obj, "apiVersion"));
    if (api && api[0] && strcmp(api, av)) {
        snprintf(msg, sizeof(msg),
                 "the API version in the data (%s) does not match the expected API version (%s)",
                 api, av);
        return fk_err_bad_request(msg);
    }
    if (kind && kind[0] && strcmp(kind, k->kind)) {
        snprintf(msg, sizeof(msg),
                 "the kind in the data (%s) does not match the expected kind "
                 "(%s)",
                 kind, k->kind);
        return fk_err_bad_request(msg);
    }
    if (json_object_get(obj, "metadata") && !json_is_object(json_object_get(obj, "metadata")))
        return fk_err_bad_request("metadata must be an object");
    if (json_object_set_new(obj, "kind", json_string(k->kind)) < 0 ||
        json_object_set_new(obj, "apiVersion", json_string(av)) < 0 ||
        !fk_json_path_obj(obj, "metadata"))
        return fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
    return NULL;
}

/* Namespace in body vs URL; cluster-scoped kinds carry none. */
static json_t *
check_namespace(json_t *obj, struct fk_target *t)
{
    json_t *meta = json_object_get(obj, "metadata");
    const char *ons = json_string_value(json_object_get(meta, "namespace"));
    if (!(t->k->flags & FK_NAMESPACED)) {
        json_object_del(meta, "namespace");
        return NULL;
    }
    if (ons && ons[0] && strcmp(ons, t->ns))
        return fk_err_bad_request(
            "the namespace of the provided object does not match the namespace "
            "sent on the request");
    if (json_object_set_new(meta, "namespace", json_string(t->ns)) < 0)
        return fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
    return NULL;
}

/* Keep the object a write carries (body, borrowed: for a PATCH the
 * patched object, as the client meant it) for the write log, which gets it
 * with the answer's status (server.c). */
static void
log_write(struct fk_rq *rq, const struct fk_kind *k, json_t *body)
{
    const char *ct = evhttp_find_header(evhttp_request_get_input_headers(rq->req), "Content-Type");
    json_t *copy;

    if (rq->app->writelog_fd < 0 || rq->wlog)
        return;
    copy = json_deep_copy(body);
    rq->wlog =
        copy ? json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:o}", "method", rq->method_name, "path",
                         evhttp_request_get_uri(rq->req), "cluster", rq->cluster, "contentType",
                         ct ? ct : "", "kind", k->kind, "dryRun", fk_dry_run(rq), "object", copy)
             : NULL;
    if (!rq->wlog)
        fprintf(stderr, "fake-kube: write log: out of memory\n");
}

/* A patched object that does not decode: kube-apiserver's patcher answers
 * 422 Invalid with no kind and no name, the one cause on the field "patch"
 * carrying the patched object as its value. New Status or NULL. */
static json_t *
patch_decode_error(json_t *patched, const char *why)
{
    char *text = json_dumps(patched, JSON_COMPACT), *detail = NULL, *msg = NULL;
    json_t *st = NULL, *causes;

    if (!text || asprintf(&detail, "Invalid value: \"%.1000s\": %s", text, why) < 0)
        detail = NULL;
    if (detail && asprintf(&msg, " \"\" is invalid: patch: %s", detail) < 0)
        msg = NULL;
    if (msg) {
        causes = json_pack("[{s:s, s:s, s:s}]", "reason", "FieldValueInvalid", "message", detail,
                           "field", "patch");
        if (causes)
            st = fk_status_new(422, "Invalid", msg, NULL, NULL, causes);
    }
    free(text);
    free(detail);
    free(msg);
    return st;
}

/* On an update, the schema causes (borrowed array, edited) the stored
 * object old (borrowed) has as well are not the write's doing: an Event
 * written through core/v1 has no eventTime, which events.k8s.io/v1 lists
 * as required. Drop them. 0 or -1 on ENOMEM. */
static int
drop_old_causes(const struct fk_kind *k, json_t *old, json_t *causes)
{
    struct fk_schema_result was;
    json_t *copy = json_deep_copy(old), *c, *o;
    size_t i, j;

    if (!copy || fk_schema_check(k, copy, 0, &was) < 0) {
        json_decref(copy);
        return -1;
    }
    for (i = json_array_size(causes); i-- > 0;) {
        c = json_array_get(causes, i);
        json_array_foreach(was.causes, j, o) if (json_equal(c, o))
        {
            json_array_remove(causes, i);
            break;
        }
    }
    fk_schema_result_fini(&was);
    json_decref(copy);
    return 0;
}

/* Read body (borrowed; unknown fields are dropped from it unless the
 * request asks for fieldValidation=Strict) as kube-apiserver decodes it
 * into kind k: NULL, or a new Status: 400 for a value the Go types cannot
 * hold or (Strict) an unknown field, 422 for a missing required field or a
 * value outside its enum. With Warn (the default) every dropped field is a
 * Warning header of the answer. */
static json_t *
check_body(struct fk_rq *rq, const struct fk_kind *k, json_t *body, const char *name, json_t *old)
{
    const char *fv = fk_rq_param(rq, "fieldValidation");
    int strict = fv && !strcmp(fv, "Strict"), warn = !fv || !strcmp(fv, "Warn");
    struct fk_schema_result res;
    json_t *err = NULL, *v;
    char msg[2048];
    size_t i, n;

    log_write(rq, k, body);
    if (fk_schema_check(k, body, strict, &res) < 0)
        return fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
    if (res.decode[0] && rq->method == EVHTTP_REQ_PATCH) {
        err = patch_decode_error(body, res.decode);
    } else if (res.decode[0]) {
        snprintf(msg, sizeof(msg), "%s in version \"%s\" cannot be handled as a %s: %s", k->kind,
                 k->version, k->kind, res.decode);
        err = fk_err_bad_request(msg);
    } else if (strict && json_array_size(res.unknown)) {
        /* A create or update names the kind; a patch's decoder does not. */
        if (rq->method == EVHTTP_REQ_PATCH)
            n = (size_t)snprintf(msg, sizeof(msg), "strict decoding error: ");
        else
            n = (size_t)snprintf(msg, sizeof(msg),
                                 "%s in version \"%s\" cannot be handled as a %s: strict decoding "
                                 "error: ",
                                 k->kind, k->version, k->kind);
        json_array_foreach(res.unknown, i, v) if (n < sizeof(msg)) n +=
            (size_t)snprintf(msg + n, sizeof(msg) - n, "%s%s", i ? ", " : "", json_string_value(v));
        err = fk_err_bad_request(msg);
    } else if (old && json_array_size(res.causes) && drop_old_causes(k, old, res.causes) < 0) {
        err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
    } else if (json_array_size(res.causes)) {
        err = fk_status_invalid_causes(k, name, json_incref(res.causes));
    } else if (warn) {
        json_array_foreach(res.unknown, i, v)
        {
            /* RFC 7234 warn-text: a quoted string, '"' and '\\' escaped. */
            const char *p = json_string_value(v);
            n = (size_t)snprintf(msg, sizeof(msg), "299 - \"");
            for (; *p && n + 4 < sizeof(msg); p++) {
                if (*p == '"' || *p == '\\')
                    msg[n++] = '\\';
                msg[n++] = *p;
            }
            msg[n++] = '"';
            msg[n] = '\0';
            if (evhttp_add_header(evhttp_request_get_output_headers(rq->req), "Warning", msg) < 0) {
                err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
                break;
            }
        }
    }
    fk_schema_result_fini(&res);
    return err;
}

/* The rules of rules.c on obj (borrowed; old NULL on create): NULL or a
 * new 422 Status with every broken rule as a cause. */
static json_t *
check_rules(const struct fk_kind *k, json_t *obj, json_t *old, const char *name)
{
    json_t *causes = json_array();
    if (!causes || fk_rules_check(k, obj, old, causes) < 0) {
        json_decref(causes);
        return fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
    }
    if (!json_array_size(causes)) {
        json_decref(causes);
        return NULL;
    }
    return fk_status_invalid_causes(k, name, causes);
}

/* Commit obj (steals; in the shape of t->k) unless dry run, then reply
 * with the stored result in the same shape. */
static void
commit_and_reply(struct fk_rq *rq, struct fk_target *t, int type, json_t *obj, int code)
{
    json_t *stored = fk_view_to_storage(t->k, obj), *out;

    json_decref(obj);
    if (!stored) {
        fk_reply_status(rq, fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL));
        return;
    }
    if (!fk_dry_run(rq) &&
        fk_store_commit(&rq->app->store, t->cl, t->k, type, json_incref(stored)) < 0) {
        json_decref(stored);
        fk_reply_status(
            rq, fk_status_new(500, "InternalError", "store write failed", NULL, NULL, NULL));
        return;
    }
    out = fk_view_from_storage(t->k, stored);
    json_decref(stored);
    if (!out)
        fk_reply_status(rq, NULL);
    else
        fk_reply_json(rq, code, out);
}

/* See fk.h. */
void
fk_do_create(struct fk_rq *rq, struct fk_target *t)
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
    if ((err = check_body(rq, t->k, obj, fk_json_path_str(obj, "metadata.name"), NULL)))
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
    if (t->name && (!name || strcmp(name, t->name))) {
        snprintf(msg, sizeof(msg),
                 "the name of the object (%s) does not match the name on the "
                 "URL (%s)",
                 name ? name : "", t->name);
        err = fk_err_bad_request(msg);
        goto fail;
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
            snprintf(msg, sizeof(msg),
                     "%s \"%s\" is forbidden: unable to create new content in "
                     "namespace %s because it is being terminated",
                     t->k->resource, name, t->ns);
            err = fk_status_new(403, "Forbidden", msg, name, t->k, NULL);
            goto fail;
        }
    }
    if (fk_store_get(t->cl, t->k, t->ns, name)) {
        if (t->k->group[0])
            snprintf(msg, sizeof(msg), "%s.%s \"%s\" already exists", t->k->resource, t->k->group,
                     name);
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
    if ((err = fk_default_and_validate(t->cl, t->k, obj, NULL)) ||
        (err = check_rules(t->k, obj, NULL, name)))
        goto fail;
    commit_and_reply(rq, t, FK_ADDED, obj, 201);
    return;
oom:
    err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
fail:
    json_decref(obj);
    fk_reply_status(rq, err);
}

/* See fk.h. */
void
fk_do_get(struct fk_rq *rq, struct fk_target *t)
{
    json_t *obj = fk_store_get(t->cl, t->k, t->ns, t->name);
    if (!obj) {
        fk_reply_status(rq, fk_err_not_found(t->k, t->name));
        return;
    }
    obj = fk_view_from_storage(t->k, obj);
    if (!obj)
        fk_reply_status(rq, NULL);
    else
        fk_reply_json(rq, 200, obj);
}

/* The resourceVersion rules of an update (rv from the body, orv the stored
 * one): empty or "0" is an unconditional update, which a Lease does not
 * allow (422); a value that is not a decimal number is the storage's parse
 * error (500); any other than the stored one is a 409 Conflict. NULL or a
 * new Status. */
static json_t *
check_resource_version(struct fk_target *t, const char *rv, const char *orv)
{
    char msg[700], *end = NULL;
    unsigned long long v;

    if (rv && rv[0]) {
        errno = 0;
        v = strtoull(rv, &end, 10);
        if (errno || !end || *end || !(rv[0] >= '0' && rv[0] <= '9')) {
            snprintf(msg, sizeof(msg), "strconv.ParseUint: parsing \"%.200s\": %s", rv,
                     errno == ERANGE ? "value out of range" : "invalid syntax");
            return fk_status_new(500, "", msg, NULL, NULL, NULL);
        }
    } else {
        v = 0;
    }
    if (v == 0) {
        json_t *causes;
        if (strcmp(t->k->resource, "leases"))
            return NULL;
        causes = json_pack("[{s:s, s:s, s:s}]", "reason", "FieldValueInvalid", "message",
                           "Invalid value: 0: must be specified for an update", "field",
                           "metadata.resourceVersion");
        snprintf(msg, sizeof(msg),
                 "%s.%s \"%s\" is invalid: metadata.resourceVersion: Invalid value: 0: must be "
                 "specified for an update",
                 t->k->resource, t->k->group, t->name);
        return fk_status_new(422, "Invalid", msg, t->name, t->k, causes);
    }
    if (strcmp(rv, orv))
        return fk_err_conflict(t->k, t->name,
                               "the object has been modified; please apply your changes "
                               "to the latest version and try again");
    return NULL;
}

/* Shared tail of PUT and PATCH: body (steals) is the client's full object. */
static void
do_update_obj(struct fk_rq *rq, struct fk_target *t, json_t *body, json_t *old)
{
    json_t *err = NULL, *nobj = NULL, *meta, *ometa = json_object_get(old, "metadata");
    const char *name, *rv, *orv = fk_json_path_str(old, "metadata.resourceVersion");
    static const char *const keep[] = {"uid",
                                       "creationTimestamp",
                                       "deletionTimestamp",
                                       "deletionGracePeriodSeconds",
                                       "namespace",
                                       "name",
                                       NULL};
    json_t *a, *b;
    size_t i;
    int deleting;

    if ((err = check_type(body, t->k)) || (err = check_namespace(body, t)) ||
        (err = check_body(rq, t->k, body, t->name, old)))
        goto fail;
    name = fk_json_path_str(body, "metadata.name");
    if (!name || strcmp(name, t->name)) {
        char msg[700];
        snprintf(msg, sizeof(msg),
                 "the name of the object (%s) does not match the name on the "
                 "URL (%s)",
                 name ? name : "", t->name);
        err = fk_err_bad_request(msg);
        goto fail;
    }
    rv = fk_json_path_str(body, "metadata.resourceVersion");
    if ((err = check_resource_version(t, rv, orv)))
        goto fail;
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
        if (v && json_object_set(meta, keep[i], v) < 0)
            goto oom;
        if (!v)
            json_object_del(meta, keep[i]);
    }
    json_object_del(meta, "managedFields");
    if (json_object_set(meta, "resourceVersion", json_object_get(ometa, "resourceVersion")) < 0)
        goto oom;
    deleting = json_object_get(ometa, "deletionTimestamp") != NULL;
    if (deleting) {
        json_array_foreach(json_object_get(meta, "finalizers"), i, a)
        {
            size_t j;
            int found = 0;
            json_array_foreach(json_object_get(ometa, "finalizers"), j, b) found |=
                json_equal(a, b);
            if (!found) {
                err = fk_status_invalid(t->k, t->name, "metadata.finalizers", "FieldValueForbidden",
                                        "Forbidden: no new finalizers can be added if the object "
                                        "is being deleted");
                goto fail;
            }
        }
    }
    if (fk_rules_prepare(t->k, nobj, t->status) < 0)
        goto oom;
    if ((err = fk_default_and_validate(t->cl, t->k, nobj, old)) ||
        (err = check_rules(t->k, nobj, old, t->name)))
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
        if (changed &&
            json_object_set_new(
                meta, "generation",
                json_integer(json_integer_value(json_object_get(ometa, "generation")) + 1)) < 0)
            goto oom;
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

/* See fk.h. */
void
fk_do_update(struct fk_rq *rq, struct fk_target *t)
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
        if (!strcmp(t->k->kind, "Event") && !t->status) {
            fk_do_create(rq, t); /* Events allow create on update */
            return;
        }
        fk_reply_status(rq, fk_err_not_found(t->k, t->name));
        return;
    }
    old = fk_view_from_storage(t->k, old);
    if (!old) {
        json_decref(body);
        fk_reply_status(rq, NULL);
        return;
    }
    do_update_obj(rq, t, body, old);
    json_decref(old);
}

/* See fk.h. */
void
fk_do_patch(struct fk_rq *rq, struct fk_target *t)
{
    static const char *const types[] = {"application/json-patch+json",
                                        "application/merge-patch+json",
                                        "application/strategic-merge-patch+json", NULL};
    const char *ct = evhttp_find_header(evhttp_request_get_input_headers(rq->req), "Content-Type");
    json_t *err, *patch, *res = NULL, *old = fk_store_get(t->cl, t->k, t->ns, t->name);
    char msg[512];
    int code;

    if (ct && !strncasecmp(ct, APPLY_TYPE, strlen(APPLY_TYPE))) {
        fk_reply_status(rq, fk_status_new(415, "UnsupportedMediaType",
                                          "server-side apply (" APPLY_TYPE
                                          ") is not modelled by prismlb-fake-kube",
                                          NULL, NULL, NULL));
        return;
    }
    if (!ct || !media_type_in(ct, types)) {
        /* The four kube-apiserver takes for a built-in kind, in its order. */
        fk_reply_status(rq, fk_status_new(415, "UnsupportedMediaType",
                                          "the body of the request was in an unknown format - "
                                          "accepted media types include: "
                                          "application/json-patch+json, "
                                          "application/merge-patch+json, "
                                          "application/strategic-merge-patch+json, " APPLY_TYPE,
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
        fk_reply_status(rq, fk_err_not_found(t->k, t->name));
        return;
    }
    old = fk_view_from_storage(t->k, old); /* patches apply to what the client sees */
    if (!old) {
        json_decref(patch);
        fk_reply_status(rq, NULL);
        return;
    }
    msg[0] = '\0';
    if (!strncasecmp(ct, "application/json-patch+json", 27)) {
        res = fk_json_patch(old, patch, &code, msg, sizeof(msg));
        if (!res)
            err =
                fk_status_new(code, code == 400 ? "BadRequest" : "Invalid", msg, NULL, NULL, NULL);
    } else if (!strncasecmp(ct, "application/merge-patch+json", 28)) {
        if (!json_is_object(patch))
            err = fk_err_bad_request("merge patch must be a JSON object");
        else if (!(res = fk_merge_patch(old, patch)))
            err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
    } else {
        res = fk_strategic_patch(old, patch, t->k, msg, sizeof(msg));
        if (!res)
            err = fk_err_bad_request(msg);
    }
    json_decref(patch);
    if (!res) {
        json_decref(old);
        fk_reply_status(rq, err);
        return;
    }
    if (!json_is_object(res) || !json_is_object(json_object_get(res, "metadata"))) {
        json_decref(res);
        json_decref(old);
        fk_reply_status(rq, fk_err_bad_request("the patch result is not an object with metadata"));
        return;
    }
    if (!fk_json_path_str(res, "metadata.resourceVersion") &&
        json_object_set(json_object_get(res, "metadata"), "resourceVersion",
                        json_object_get(json_object_get(old, "metadata"), "resourceVersion")) < 0) {
        json_decref(res);
        json_decref(old);
        fk_reply_status(rq, fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL));
        return;
    }
    do_update_obj(rq, t, res, old);
    json_decref(old);
}
