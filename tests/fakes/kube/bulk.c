/* Admin bulk writes: create, update or delete many objects in-process, for
 * large lists and watch-throughput tests that would otherwise spend their
 * time in HTTP round trips. Objects go through the same defaulting,
 * validation, resourceVersion and watch delivery as API writes. */
#include "fk.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct fk_kind *
kind_by_name(const char *name)
{
    for (size_t i = 0; i < fk_nkinds; i++) {
        const struct fk_kind *k = &fk_kinds[i];
        char full[160];
        snprintf(full, sizeof(full), "%s%s%s", k->resource, k->group[0] ? "." : "", k->group);
        if (!strcmp(name, full))
            return k;
    }
    for (size_t i = 0; i < fk_nkinds; i++) /* plain plural: the first (core) match */
        if (!strcmp(name, fk_kinds[i].resource))
            return &fk_kinds[i];
    return NULL;
}

static json_t *
default_template(const struct fk_kind *k)
{
    if (!strcmp(k->resource, "services") && !k->group[0])
        return json_pack("{s:{s:[{s:i}]}}", "spec", "ports", "port", 80);
    if (!strcmp(k->resource, "endpointslices"))
        return json_pack("{s:s, s:[{s:[s], s:{s:b}}]}", "addressType", "IPv4", "endpoints",
                         "addresses", "10.0.0.1", "conditions", "ready", 1);
    return json_object();
}

/* A padding annotation of n bytes (new string). */
static char *
payload(size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        return NULL;
    for (size_t i = 0; i < n; i++)
        p[i] = (char)('a' + i % 26);
    p[n] = '\0';
    return p;
}

static int
set_annotation(json_t *obj, const char *key, const char *val)
{
    json_t *ann = fk_json_path_obj(obj, "metadata.annotations");
    return ann ? json_object_set_new(ann, key, json_string(val)) : -1;
}

/* See fk.h. */
json_t *
fk_admin_bulk(struct fk_app *app, json_t *body, char *err, size_t errlen)
{
    const char *op = json_string_value(json_object_get(body, "op"));
    const char *res = json_string_value(json_object_get(body, "resource"));
    const char *cluster = json_string_value(json_object_get(body, "cluster"));
    const char *ns = json_string_value(json_object_get(body, "namespace"));
    const char *prefix = json_string_value(json_object_get(body, "namePrefix"));
    json_int_t count = json_integer_value(json_object_get(body, "count"));
    json_int_t start = json_integer_value(json_object_get(body, "start"));
    json_int_t pbytes = json_integer_value(json_object_get(body, "payloadBytes"));
    json_t *tmpl = json_object_get(body, "template");
    const struct fk_kind *k;
    struct fk_cluster *cl;
    char *pad = NULL, rvs[32];
    json_int_t done = 0;

    if (!op || !res || count < 0 || start < 0 || pbytes < 0 || pbytes > 1 << 20) {
        snprintf(err, errlen, "need op, resource, count >= 0 (start, payloadBytes optional)");
        return NULL;
    }
    k = kind_by_name(res);
    if (!k) {
        snprintf(err, errlen, "unknown resource %s", res);
        return NULL;
    }
    k = fk_kind_storage(k); /* bulk writes use the stored shape */
    if (!(k->flags & FK_NAMESPACED))
        ns = "";
    else if (!ns)
        ns = "default";
    if (!prefix)
        prefix = "bulk-";
    if (tmpl && !json_is_object(tmpl)) {
        snprintf(err, errlen, "template must be an object");
        return NULL;
    }
    cl = fk_store_cluster(&app->store, cluster ? cluster : "");
    if (!cl || (pbytes && !(pad = payload((size_t)pbytes)))) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if ((k->flags & FK_NAMESPACED) && !fk_store_get(cl, &fk_kinds[0], "", ns)) {
        snprintf(err, errlen, "namespace %s not found", ns);
        free(pad);
        return NULL;
    }
    for (json_int_t i = start; i < start + count; i++) {
        char name[300], av[128], ts[32], uid[40];
        json_t *cur, *obj = NULL, *st;
        int type;

        snprintf(name, sizeof(name), "%s%06lld", prefix, (long long)i);
        cur = fk_store_get(cl, k, ns, name);
        if (!strcmp(op, "create")) {
            if (cur)
                continue;
            obj = tmpl ? json_deep_copy(tmpl) : default_template(k);
            if (!obj || json_object_set_new(obj, "kind", json_string(k->kind)) < 0 ||
                json_object_set_new(obj, "apiVersion",
                                    json_string(fk_kind_api_version(k, av, sizeof(av)))) < 0 ||
                !fk_json_path_obj(obj, "metadata"))
                goto oom;
            st = json_object_get(obj, "metadata");
            json_object_del(st, "resourceVersion");
            if (json_object_set_new(st, "name", json_string(name)) < 0 ||
                json_object_set_new(st, "uid", json_string(fk_uuid(uid, sizeof(uid)))) < 0 ||
                json_object_set_new(st, "creationTimestamp",
                                    json_string(fk_now_rfc3339(ts, sizeof(ts)))) < 0)
                goto oom;
            if (ns[0] && json_object_set_new(st, "namespace", json_string(ns)) < 0)
                goto oom;
            if (!strcmp(k->resource, "endpointslices") &&
                json_object_set_new(st, "generation", json_integer(1)) < 0)
                goto oom;
            if (k->flags & FK_CLEAR_STATUS)
                json_object_del(obj, "status");
            type = FK_ADDED;
        } else if (!strcmp(op, "update")) {
            if (!cur)
                continue;
            obj = json_deep_copy(cur);
            snprintf(ts, sizeof(ts), "%" PRIu64, app->store.rv + 1);
            if (!obj || set_annotation(obj, "prismlb.io/bulk-seq", ts) < 0)
                goto oom;
            type = FK_MODIFIED;
        } else if (!strcmp(op, "delete")) {
            if (!cur)
                continue;
            obj = json_deep_copy(cur);
            if (!obj)
                goto oom;
            type = FK_DELETED;
        } else {
            snprintf(err, errlen, "op must be create, update or delete");
            free(pad);
            return NULL;
        }
        if (pad && type != FK_DELETED && set_annotation(obj, "prismlb.io/payload", pad) < 0) {
            json_decref(obj);
            goto oom;
        }
        if (type != FK_DELETED &&
            (st = fk_default_and_validate(cl, k, obj, type == FK_MODIFIED ? cur : NULL))) {
            snprintf(err, errlen, "%s: %s", name,
                     json_string_value(json_object_get(st, "message")));
            json_decref(st);
            json_decref(obj);
            free(pad);
            return NULL;
        }
        if (fk_store_commit(&app->store, cl, k, type, obj) < 0)
            goto oom;
        done++;
    }
    free(pad);
    snprintf(rvs, sizeof(rvs), "%" PRIu64, app->store.rv);
    return json_pack("{s:I, s:s}", "done", done, "resourceVersion", rvs);
oom:
    free(pad);
    snprintf(err, errlen, "out of memory after %lld objects", (long long)done);
    return NULL;
}
