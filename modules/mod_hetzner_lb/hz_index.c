/*
 * hz_index.c: which Services an event can change (see hz_index.h).
 *
 * Maps, all jansson objects (hash tables):
 *   svcs      Service key -> 1 (ours, not Local) or 2 (ours, Local)
 *   slices    slice key -> {"svc": key, "nodes": [names]}
 *   node_svcs node name -> {Service key -> number of its slices naming it}
 *   node_fp   node name -> fingerprint (as a 16-digit hex string)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hz_index.h"

#define OURS 1
#define OURS_LOCAL 2

struct hz_index {
    json_t *svcs, *slices, *node_svcs, *node_fp;
};

struct hz_index *
hz_index_new(void)
{
    struct hz_index *ix = hz_calloc(sizeof(*ix));
    if (ix && (ix->svcs = json_object()) && (ix->slices = json_object()) &&
        (ix->node_svcs = json_object()) && (ix->node_fp = json_object()))
        return ix;
    hz_index_free(ix);
    return NULL;
}

void
hz_index_free(struct hz_index *ix)
{
    if (!ix)
        return;
    json_decref(ix->svcs);
    json_decref(ix->slices);
    json_decref(ix->node_svcs);
    json_decref(ix->node_fp);
    hz_free(ix);
}

int
hz_index_service(struct hz_index *ix, const char *key, int ours, int local, hz_index_emit emit,
                 void *arg)
{
    if (!ours)
        json_object_del(ix->svcs, key);
    else if (json_object_set_new(ix->svcs, key, json_integer(local ? OURS_LOCAL : OURS)) < 0)
        return -ENOMEM;
    emit(key, arg);
    return 0;
}

int
hz_index_node(struct hz_index *ix, const char *name, uint64_t fp, int deleted, hz_index_emit emit,
              void *arg)
{
    char hex[17];
    const char *prev = json_string_value(json_object_get(ix->node_fp, name));
    snprintf(hex, sizeof(hex), "%016" PRIx64, fp);
    if (deleted) {
        if (!prev)
            return 0; /* never seen: nothing to take back */
        json_object_del(ix->node_fp, name);
    } else {
        if (prev && strcmp(prev, hex) == 0)
            return 0; /* a heartbeat, or nothing a target depends on */
        if (json_object_set_new(ix->node_fp, name, json_string(hex)) < 0)
            return -ENOMEM;
    }
    json_t *serving = json_object_get(ix->node_svcs, name);
    const char *key;
    json_t *v;
    json_object_foreach(ix->svcs, key, v)
    {
        if (json_integer_value(v) != OURS_LOCAL || json_object_get(serving, key))
            emit(key, arg);
    }
    return 0;
}

/* Add d (+1 or -1) to the count of svc under each node of the array. */
static int
count_nodes(struct hz_index *ix, const char *svc, json_t *nodes, int d)
{
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const char *name = json_string_value(n);
        json_t *m = json_object_get(ix->node_svcs, name);
        if (!m) {
            if (d < 0)
                continue;
            if (!(m = json_object()) || json_object_set_new(ix->node_svcs, name, m) < 0)
                return -ENOMEM;
        }
        json_int_t c = json_integer_value(json_object_get(m, svc)) + d;
        if (c <= 0) {
            json_object_del(m, svc);
            if (json_object_size(m) == 0)
                json_object_del(ix->node_svcs, name);
        } else if (json_object_set_new(m, svc, json_integer(c)) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

static void
emit_if_local(const struct hz_index *ix, const char *svc, hz_index_emit emit, void *arg)
{
    if (svc && json_integer_value(json_object_get(ix->svcs, svc)) == OURS_LOCAL)
        emit(svc, arg);
}

int
hz_index_slice(struct hz_index *ix, const char *slice_key, const char *svc_key,
               const char *const *nodes, size_t n, int deleted, hz_index_emit emit, void *arg)
{
    json_t *old = json_incref(json_object_get(ix->slices, slice_key));
    const char *old_svc = json_string_value(json_object_get(old, "svc"));
    json_t *ent = NULL, *arr = NULL;
    int rc = -ENOMEM;

    if (!deleted && svc_key) {
        if (!(arr = json_array()))
            goto out;
        for (size_t i = 0; i < n; i++) {
            size_t j;
            json_t *e;
            int dup = 0;
            if (!nodes[i])
                continue;
            json_array_foreach(arr, j, e) dup |= strcmp(json_string_value(e), nodes[i]) == 0;
            if (!dup && json_array_append_new(arr, json_string(nodes[i])) < 0)
                goto out;
        }
        if (!(ent = json_pack("{s:s, s:O}", "svc", svc_key, "nodes", arr)))
            goto out;
    }
    /* the new counts first: a failure leaves the old ones */
    if (ent && count_nodes(ix, svc_key, arr, 1) < 0)
        goto out;
    if (old)
        (void)count_nodes(ix, old_svc, json_object_get(old, "nodes"), -1);
    if (ent) {
        if (json_object_set(ix->slices, slice_key, ent) < 0) {
            (void)count_nodes(ix, svc_key, arr, -1);
            if (old)
                (void)count_nodes(ix, old_svc, json_object_get(old, "nodes"), 1);
            goto out;
        }
    } else {
        json_object_del(ix->slices, slice_key);
    }
    emit_if_local(ix, svc_key, emit, arg);
    if (old_svc && (!svc_key || strcmp(old_svc, svc_key) != 0))
        emit_if_local(ix, old_svc, emit, arg);
    rc = 0;
out:
    json_decref(old);
    json_decref(ent);
    json_decref(arr);
    return rc;
}

void
hz_index_each_service(const struct hz_index *ix, hz_index_emit emit, void *arg)
{
    const char *key;
    json_t *v;
    json_object_foreach(ix->svcs, key, v) emit(key, arg);
}

size_t
hz_index_services(const struct hz_index *ix)
{
    return json_object_size(ix->svcs);
}
