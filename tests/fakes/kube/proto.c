/*
 * proto: request bodies in Kubernetes' protobuf encoding
 * (application/vnd.kubernetes.protobuf), decoded with protobuf-c from
 * k8s.proto and turned into the JSON object the rest of the fake handles.
 * kubectl 1.35 sends built-in kinds this way from its typed clients
 * (`kubectl create namespace`); the fake decodes Namespace and refuses
 * other kinds with 415, naming JSON.
 */
#include <string.h>

#include "fk.h"
#include "k8s.pb-c.h"

#define MAGIC "k8s\0"
#define MAGIC_LEN 4

/* {key: value, ...} of n map entries (new) or NULL. */
static json_t *
string_map(Fkpb__StringEntry **v, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++) {
        if (!v[i]->key ||
            json_object_set_new(o, v[i]->key, json_string(v[i]->value ? v[i]->value : "")) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *
string_list(char **v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* Set key to v (stolen) in o when v is non-NULL; -1 on failure. */
static int
set_opt(json_t *o, const char *key, json_t *v)
{
    return v ? json_object_set_new(o, key, v) : 0;
}

static json_t *
meta_json(const Fkpb__ObjectMeta *m)
{
    json_t *o = json_object();
    if (!o || !m)
        return o;
    if (set_opt(o, "name", m->name ? json_string(m->name) : NULL) < 0 ||
        set_opt(o, "generateName", m->generatename ? json_string(m->generatename) : NULL) < 0 ||
        set_opt(o, "namespace", m->namespace_ ? json_string(m->namespace_) : NULL) < 0 ||
        (m->n_labels && set_opt(o, "labels", string_map(m->labels, m->n_labels)) < 0) ||
        (m->n_annotations &&
         set_opt(o, "annotations", string_map(m->annotations, m->n_annotations)) < 0) ||
        (m->n_finalizers &&
         set_opt(o, "finalizers", string_list(m->finalizers, m->n_finalizers)) < 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* See fk.h. */
json_t *
fk_proto_to_json(const unsigned char *body, size_t len, json_t **err)
{
    Fkpb__Unknown *u = NULL;
    Fkpb__Namespace *ns = NULL;
    json_t *obj = NULL;
    char msg[512];

    *err = NULL;
    if (len < MAGIC_LEN || memcmp(body, MAGIC, MAGIC_LEN) != 0) {
        *err = fk_err_bad_request("the protobuf body does not start with the magic k8s\\0");
        return NULL;
    }
    u = fkpb__unknown__unpack(NULL, len - MAGIC_LEN, body + MAGIC_LEN);
    if (!u || !u->typemeta || !u->typemeta->kind || !u->has_raw) {
        *err = fk_err_bad_request("couldn't decode the protobuf body");
        goto out;
    }
    if (strcmp(u->typemeta->kind, "Namespace") != 0) {
        snprintf(msg, sizeof(msg),
                 "the body of the request was in an unknown format - accepted media types "
                 "include: application/json (protobuf only for Namespace, not %.64s)",
                 u->typemeta->kind);
        *err = fk_status_new(415, "UnsupportedMediaType", msg, NULL, NULL, NULL);
        goto out;
    }
    ns = fkpb__namespace__unpack(NULL, u->raw.len, u->raw.data);
    if (!ns) {
        *err = fk_err_bad_request("couldn't decode the protobuf Namespace");
        goto out;
    }
    obj = json_pack("{s:s, s:s, s:o}", "apiVersion",
                    u->typemeta->apiversion ? u->typemeta->apiversion : "v1", "kind", "Namespace",
                    "metadata", meta_json(ns->metadata));
    if (obj && ns->spec && ns->spec->n_finalizers &&
        json_object_set_new(obj, "spec",
                            json_pack("{s:o}", "finalizers",
                                      string_list(ns->spec->finalizers, ns->spec->n_finalizers))) <
            0) {
        json_decref(obj);
        obj = NULL;
    }
    if (!obj)
        *err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
out:
    if (ns)
        fkpb__namespace__free_unpacked(ns, NULL);
    if (u)
        fkpb__unknown__free_unpacked(u, NULL);
    return obj;
}
