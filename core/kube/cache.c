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

/* ------------------------------------------------------------------------ */
/* Kept fields.                                                              */

/* The identity every trimmed object keeps (see plb_informer_opts.keep). */
static const char *const keep_always[] = {
    "/metadata/name", "/metadata/namespace", "/metadata/uid", "/metadata/resourceVersion", NULL,
};

/* Add path to tree (an object: name -> subtree, true where a member is
 * kept whole). 0, -EINVAL (a bad path), -ENOMEM. */
static int
keep_add(json_t *tree, const char *path)
{
    char name[256];
    json_t *node = tree;
    const char *p = path;
    if (!p || *p != '/')
        return -EINVAL;
    while (*p == '/') {
        size_t n = 0;
        for (p++; *p && *p != '/'; p++) {
            char c = *p;
            if (c == '~') {
                if (p[1] != '0' && p[1] != '1')
                    return -EINVAL;
                c = *++p == '0' ? '~' : '/';
            }
            if (n + 1 >= sizeof(name))
                return -EINVAL;
            name[n++] = c;
        }
        name[n] = '\0';
        json_t *child = json_object_get(node, name);
        if (!*p) /* the path ends here: this member whole */
            return json_object_set_new(node, name, json_true()) < 0 ? -ENOMEM : 0;
        if (json_is_true(child))
            return 0; /* kept whole already */
        if (!child) {
            if (json_object_set_new(node, name, json_object()) < 0)
                return -ENOMEM;
            child = json_object_get(node, name);
        }
        node = child;
    }
    return 0;
}

int
core_kube_keep_new(const char *const *keep, json_t **out)
{
    *out = NULL;
    if (!keep)
        return 0;
    json_t *tree = json_object();
    int rc = tree ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && keep[i]; i++)
        rc = keep_add(tree, keep[i]);
    for (size_t i = 0; !rc && keep_always[i]; i++)
        rc = keep_add(tree, keep_always[i]);
    if (rc) {
        json_decref(tree);
        return rc;
    }
    *out = tree;
    return 0;
}

/* Where a kept value stands: the root, the metadata object, a member of
 * it, anything else. */
enum keep_level { KL_ROOT, KL_METADATA, KL_IN_METADATA, KL_OTHER };

/* The longest compact text of a value the pool shares. */
#define KEEP_SHARE_MAX 1024

/* v (steals; NULL is passed on) or the equal value pool already holds
 * (new reference), which v then becomes for the next objects. A value too
 * long to share, or one the pool has no memory for, stays v. */
static json_t *
share(json_t *pool, json_t *v)
{
    if (!pool || !v || json_is_boolean(v) || json_is_null(v)) /* those are singletons */
        return v;
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!text)
        return v;
    if (strlen(text) <= KEEP_SHARE_MAX) {
        json_t *have = json_object_get(pool, text);
        if (have && have != v) {
            json_incref(have);
            json_decref(v);
            v = have;
        } else if (!have) {
            (void)json_object_set(pool, text, v); /* no memory: v unshared */
        }
    }
    core_free(text);
    return v;
}

static json_t *
pick(json_t *tree, json_t *v, json_t *pool, enum keep_level level)
{
    size_t i;
    const char *key;
    json_t *it, *sub, *out;
    if (!json_is_object(tree) || !(json_is_object(v) || json_is_array(v))) {
        out = json_incref(v);
    } else if (json_is_array(v)) {
        out = json_array();
        json_array_foreach(v, i, it)
        {
            if (out && json_array_append_new(out, pick(tree, it, pool, KL_OTHER)) < 0) {
                json_decref(out);
                return NULL;
            }
        }
    } else {
        out = json_object();
        json_object_foreach(tree, key, sub)
        {
            enum keep_level in = level == KL_ROOT && strcmp(key, "metadata") == 0 ? KL_METADATA
                                 : level == KL_METADATA                           ? KL_IN_METADATA
                                                                                  : KL_OTHER;
            json_t *m = json_object_get(v, key);
            if (out && m && json_object_set_new(out, key, pick(sub, m, pool, in)) < 0) {
                json_decref(out);
                return NULL;
            }
        }
    }
    /* An object's identity (its root, metadata, name, uid, resourceVersion)
     * is its own; what it keeps besides is shared. */
    if (level == KL_OTHER || (level == KL_IN_METADATA && !json_is_string(out)))
        return share(pool, out);
    return out;
}

json_t *
core_kube_keep_apply(json_t *tree, json_t *v, json_t *pool)
{
    return pick(tree, v, pool, KL_ROOT);
}

void
core_kube_pool_sweep(json_t *pool, size_t *mark)
{
    const char *key;
    json_t *v;
    void *tmp;
    size_t before;
    if (!pool || json_object_size(pool) < 2 * *mark + 1024)
        return;
    do { /* a value dropped may leave the last holder of one inside it */
        before = json_object_size(pool);
        json_object_foreach_safe(pool, tmp, key, v)
        {
            if (v->refcount == 1) /* the pool's own reference only */
                json_object_del(pool, key);
        }
    } while (json_object_size(pool) < before);
    *mark = json_object_size(pool);
}

/* Members of an object that the comparison of two states skips: a watch
 * event's object has kind and apiVersion, a list's item has not. */
static int
skipped(const char *key, const char *const *skip)
{
    for (size_t i = 0; skip[i]; i++)
        if (strcmp(key, skip[i]) == 0)
            return 1;
    return 0;
}

/* Objects a and b have the same members but for those named in skip; at
 * the top (top 1) metadata is compared but for its resourceVersion. */
static int
equal_but(json_t *a, json_t *b, const char *const *skip, int top)
{
    static const char *const rv[] = {"resourceVersion", NULL};
    const char *key;
    json_t *va, *vb;
    size_t na = 0, nb = 0;
    json_object_foreach(a, key, va)
    {
        if (skipped(key, skip))
            continue;
        na++;
        vb = json_object_get(b, key);
        if (!vb)
            return 0;
        if (top && strcmp(key, "metadata") == 0 && json_is_object(va) && json_is_object(vb)
                ? !equal_but(va, vb, rv, 0)
                : !json_equal(va, vb))
            return 0;
    }
    json_object_foreach(b, key, vb)
    {
        nb += !skipped(key, skip);
    }
    return na == nb;
}

int
core_kube_same_but_rv(json_t *a, json_t *b)
{
    static const char *const type[] = {"kind", "apiVersion", NULL};
    if (!json_is_object(a) || !json_is_object(b))
        return json_equal(a, b);
    return equal_but(a, b, type, 1);
}
