/* Discovery (/api, /apis, resource lists) and the OpenAPI v3 documents,
 * generated from the kind table. */
#include "fk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>
#include <openssl/sha.h>

/* Comma-separated list to a JSON array of strings. New or NULL. */
static json_t *
csv_array(const char *csv)
{
    json_t *a = json_array();
    char buf[256], *save = NULL;
    if (!a || !csv)
        return a;
    snprintf(buf, sizeof(buf), "%s", csv);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (json_array_append_new(a, json_string(t)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *
resource_list(const char *group, const char *version)
{
    char gv[128];
    json_t *list, *res = json_array();

    if (!res)
        return NULL;
    for (size_t i = 0; i < fk_nkinds; i++) {
        const struct fk_kind *k = &fk_kinds[i];
        json_t *r;
        int ns_kind = !strcmp(k->resource, "namespaces");
        if (strcmp(k->group, group) || strcmp(k->version, version))
            continue;
        r = json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", k->resource, "singularName", k->singular,
                      "namespaced", (k->flags & FK_NAMESPACED) != 0, "kind", k->kind, "verbs",
                      ns_kind
                          ? json_pack("[s,s,s,s,s,s,s]", "create", "delete", "get", "list", "patch",
                                      "update", "watch")
                          : json_pack("[s,s,s,s,s,s,s,s]", "create", "delete", "deletecollection",
                                      "get", "list", "patch", "update", "watch"));
        if (!r || json_array_append_new(res, r) < 0)
            goto fail;
        if (k->short_names && json_object_set_new(r, "shortNames", csv_array(k->short_names)) < 0)
            goto fail;
        if (k->categories && json_object_set_new(r, "categories", csv_array(k->categories)) < 0)
            goto fail;
        if (k->flags & FK_HAS_STATUS) {
            char sub[128];
            snprintf(sub, sizeof(sub), "%s/status", k->resource);
            r = json_pack("{s:s, s:s, s:b, s:s, s:[s,s,s]}", "name", sub, "singularName", "",
                          "namespaced", (k->flags & FK_NAMESPACED) != 0, "kind", k->kind, "verbs",
                          "get", "patch", "update");
            if (!r || json_array_append_new(res, r) < 0)
                goto fail;
        }
    }
    if (group[0])
        snprintf(gv, sizeof(gv), "%s/%s", group, version);
    else
        snprintf(gv, sizeof(gv), "%s", version);
    list = json_pack("{s:s, s:s, s:s, s:o}", "kind", "APIResourceList", "apiVersion", "v1",
                     "groupVersion", gv, "resources", res);
    return list;
fail:
    json_decref(res);
    return NULL;
}

static json_t *
api_group(const char *group)
{
    char gv[128];
    const char *version = NULL;
    for (size_t i = 0; i < fk_nkinds; i++)
        if (!strcmp(fk_kinds[i].group, group))
            version = fk_kinds[i].version;
    if (!version)
        return NULL;
    snprintf(gv, sizeof(gv), "%s/%s", group, version);
    return json_pack("{s:s, s:s, s:s, s:[{s:s, s:s}], s:{s:s, s:s}}", "kind", "APIGroup",
                     "apiVersion", "v1", "name", group, "versions", "groupVersion", gv, "version",
                     version, "preferredVersion", "groupVersion", gv, "version", version);
}

static json_t *
group_list(void)
{
    json_t *groups = json_array(), *g;
    if (!groups)
        return NULL;
    for (size_t i = 0; i < fk_nkinds; i++) {
        const char *name = fk_kinds[i].group;
        int seen = 0;
        if (!name[0])
            continue;
        for (size_t j = 0; j < i; j++)
            seen |= !strcmp(fk_kinds[j].group, name);
        if (seen)
            continue;
        g = api_group(name);
        if (!g)
            goto fail;
        json_object_del(g, "kind");
        json_object_del(g, "apiVersion");
        if (json_array_append_new(groups, g) < 0)
            goto fail;
    }
    return json_pack("{s:s, s:s, s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups",
                     groups);
fail:
    json_decref(groups);
    return NULL;
}

/* ---- OpenAPI v3 ------------------------------------------------------------------ */

static json_t *
query_params(int with_patch_params)
{
    json_t *p = json_pack("[{s:s, s:s, s:s, s:{s:s, s:b}}, {s:s, s:s, s:s, s:{s:s, s:b}}]", "name",
                          "dryRun", "in", "query", "description",
                          "When present, indicates that modifications should not be persisted.",
                          "schema", "type", "string", "uniqueItems", 1, "name", "fieldManager",
                          "in", "query", "description",
                          "a name associated with the actor or entity that is making these "
                          "changes.",
                          "schema", "type", "string", "uniqueItems", 1);
    if (p && json_array_append_new(
                 p, json_pack("{s:s, s:s, s:s, s:{s:s, s:b}}", "name", "fieldValidation", "in",
                              "query", "description",
                              "instructs the server on how to handle objects in the request "
                              "containing unknown or duplicate fields: Ignore, Warn or Strict.",
                              "schema", "type", "string", "uniqueItems", 1)) < 0) {
        json_decref(p);
        return NULL;
    }
    if (p && with_patch_params &&
        json_array_append_new(p,
                              json_pack("{s:s, s:s, s:{s:s, s:b}}", "name", "force", "in", "query",
                                        "schema", "type", "boolean", "uniqueItems", 1)) < 0) {
        json_decref(p);
        return NULL;
    }
    return p;
}

static json_t *
obj_response(const struct fk_kind *k)
{
    char ref[256];
    snprintf(ref, sizeof(ref), "#/components/schemas/%s", k->schema_name);
    return json_pack("{s:{s:s, s:{s:{s:{s:s}}}}, s:{s:s}}", "200", "description", "OK", "content",
                     "application/json", "schema", "$ref", ref, "401", "description",
                     "Unauthorized");
}

static json_t *
gvk(const struct fk_kind *k)
{
    return json_pack("{s:s, s:s, s:s}", "group", k->group, "kind", k->kind, "version", k->version);
}

/* Camel-case operation id such as patchCoreV1NamespacedService. */
static void
op_id(char *buf, size_t len, const char *verb, const struct fk_kind *k, const char *suffix)
{
    char grp[64] = "Core";
    if (k->group[0]) {
        size_t j = 0;
        int up = 1;
        for (const char *p = k->group; *p && j + 1 < sizeof(grp); p++) {
            if (*p == '.') {
                if (strcmp(p, ".k8s.io") == 0)
                    break;
                up = 1;
                continue;
            }
            grp[j++] = up ? (char)(*p - 32 * (*p >= 'a' && *p <= 'z')) : *p;
            up = 0;
        }
        grp[j] = '\0';
    }
    snprintf(buf, len, "%s%s%c%s%s%s%s", verb, grp, 'V', k->version + 1,
             (k->flags & FK_NAMESPACED) ? "Namespaced" : "", k->kind, suffix);
}

static json_t *
item_path(const struct fk_kind *k, const char *suffix)
{
    char id[128];
    json_t *patch_ct, *path;
    json_t *body_ref = json_pack("{s:{s:s}}", "schema", "$ref",
                                 "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch");
    if (!body_ref)
        return NULL;
    patch_ct = json_pack("{s:O, s:O, s:O, s:O}", "application/apply-patch+yaml", body_ref,
                         "application/json-patch+json", body_ref, "application/merge-patch+json",
                         body_ref, "application/strategic-merge-patch+json", body_ref);
    json_decref(body_ref);
    if (!patch_ct)
        return NULL;
    op_id(id, sizeof(id), "patch", k, suffix);
    path = json_pack("{s:{s:s, s:o, s:{s:o, s:b}, s:o, s:s, s:o}}", "patch", "operationId", id,
                     "parameters", query_params(1), "requestBody", "content", patch_ct, "required",
                     1, "responses", obj_response(k), "x-kubernetes-action", "patch",
                     "x-kubernetes-group-version-kind", gvk(k));
    if (!path)
        return NULL;
    op_id(id, sizeof(id), "read", k, suffix);
    if (json_object_set_new(path, "get",
                            json_pack("{s:s, s:o, s:s, s:o}", "operationId", id, "responses",
                                      obj_response(k), "x-kubernetes-action", "get",
                                      "x-kubernetes-group-version-kind", gvk(k))) < 0)
        goto fail;
    op_id(id, sizeof(id), "replace", k, suffix);
    if (json_object_set_new(path, "put",
                            json_pack("{s:s, s:o, s:o, s:s, s:o}", "operationId", id, "parameters",
                                      query_params(0), "responses", obj_response(k),
                                      "x-kubernetes-action", "put",
                                      "x-kubernetes-group-version-kind", gvk(k))) < 0)
        goto fail;
    return path;
fail:
    json_decref(path);
    return NULL;
}

static json_t *
openapi_doc(const char *group, const char *version)
{
    json_t *paths = json_object(), *doc;
    char base[128], p[256];

    if (!paths)
        return NULL;
    if (group[0])
        snprintf(base, sizeof(base), "/apis/%s/%s", group, version);
    else
        snprintf(base, sizeof(base), "/api/%s", version);
    for (size_t i = 0; i < fk_nkinds; i++) {
        const struct fk_kind *k = &fk_kinds[i];
        const char *nsp = (k->flags & FK_NAMESPACED) ? "/namespaces/{namespace}" : "";
        char id[128];
        if (strcmp(k->group, group) || strcmp(k->version, version))
            continue;
        snprintf(p, sizeof(p), "%s%s/%s/{name}", base, nsp, k->resource);
        if (json_object_set_new(paths, p, item_path(k, "")) < 0)
            goto fail;
        if (k->flags & FK_HAS_STATUS) {
            snprintf(p, sizeof(p), "%s%s/%s/{name}/status", base, nsp, k->resource);
            if (json_object_set_new(paths, p, item_path(k, "Status")) < 0)
                goto fail;
        }
        snprintf(p, sizeof(p), "%s%s/%s", base, nsp, k->resource);
        op_id(id, sizeof(id), "create", k, "");
        if (json_object_set_new(paths, p,
                                json_pack("{s:{s:s, s:o, s:o, s:s, s:o}}", "post", "operationId",
                                          id, "parameters", query_params(0), "responses",
                                          obj_response(k), "x-kubernetes-action", "post",
                                          "x-kubernetes-group-version-kind", gvk(k))) < 0)
            goto fail;
    }
    /* No component schema carries x-kubernetes-group-version-kind, so
     * kubectl computes strategic merge patches from its built-in types. */
    doc = json_pack("{s:s, s:{s:s, s:s}, s:o, s:{s:{s:{s:s, s:s}}}}", "openapi", "3.0.0", "info",
                    "title", "Kubernetes", "version", "v1.35.0", "paths", paths, "components",
                    "schemas", "io.k8s.apimachinery.pkg.apis.meta.v1.Patch", "description",
                    "Patch is provided to give a concrete name and type to the Kubernetes PATCH "
                    "request body.",
                    "type", "object");
    return doc;
fail:
    json_decref(paths);
    return NULL;
}

/* Upper-case hex SHA-256 of the document's compact form into out (65). */
static int
doc_hash(json_t *doc, char *out)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    char *s = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s)
        return -1;
    SHA256((const unsigned char *)s, strlen(s), md);
    free(s);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
        snprintf(out + 2 * i, 3, "%02X", md[i]);
    return 0;
}

static json_t *
openapi_index(void)
{
    json_t *paths = json_object();
    if (!paths)
        return NULL;
    for (size_t i = 0; i < fk_nkinds; i++) {
        const struct fk_kind *k = &fk_kinds[i];
        char key[128], url[256], hash[65];
        json_t *doc;
        if (k->group[0])
            snprintf(key, sizeof(key), "apis/%s/%s", k->group, k->version);
        else
            snprintf(key, sizeof(key), "api/%s", k->version);
        if (json_object_get(paths, key))
            continue;
        doc = openapi_doc(k->group, k->version);
        if (!doc || doc_hash(doc, hash) < 0) {
            json_decref(doc);
            json_decref(paths);
            return NULL;
        }
        json_decref(doc);
        snprintf(url, sizeof(url), "/openapi/v3/%s?hash=%s", key, hash);
        if (json_object_set_new(paths, key, json_pack("{s:s}", "serverRelativeURL", url)) < 0) {
            json_decref(paths);
            return NULL;
        }
    }
    return json_pack("{s:o}", "paths", paths);
}

/* See fk.h. */
int
fk_discovery_serve(struct fk_rq *rq)
{
    const char *p = rq->path;
    json_t *body = NULL;
    char group[128], version[64];

    if (rq->method != EVHTTP_REQ_GET)
        return 0;
    if (!strcmp(p, "/api") || !strcmp(p, "/api/")) {
        char addr[64];
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", rq->srv->port);
        body = json_pack("{s:s, s:[s], s:[{s:s, s:s}]}", "kind", "APIVersions", "versions", "v1",
                         "serverAddressByClientCIDRs", "clientCIDR", "0.0.0.0/0", "serverAddress",
                         addr);
    } else if (!strcmp(p, "/apis") || !strcmp(p, "/apis/")) {
        body = group_list();
    } else if (!strcmp(p, "/api/v1") || !strcmp(p, "/api/v1/")) {
        body = resource_list("", "v1");
    } else if (!strcmp(p, "/openapi/v3") || !strcmp(p, "/openapi/v3/")) {
        body = openapi_index();
    } else if (!strcmp(p, "/openapi/v3/api/v1")) {
        body = openapi_doc("", "v1");
    } else if (sscanf(p, "/openapi/v3/apis/%127[^/]/%63[^/]", group, version) == 2) {
        if (!fk_group_version_served(group, version))
            return 0;
        body = openapi_doc(group, version);
    } else if (sscanf(p, "/apis/%127[^/]/%63[^/]", group, version) == 2 &&
               strlen(p) == strlen("/apis/") + strlen(group) + 1 + strlen(version)) {
        if (!fk_group_version_served(group, version))
            return 0;
        body = resource_list(group, version);
    } else if (sscanf(p, "/apis/%127[^/]", group) == 1 &&
               strlen(p) == strlen("/apis/") + strlen(group)) {
        body = api_group(group);
        if (!body)
            return 0;
    } else {
        return 0;
    }
    if (!body)
        fk_reply_status(rq, NULL);
    else
        fk_reply_json(rq, 200, body);
    return 1;
}
