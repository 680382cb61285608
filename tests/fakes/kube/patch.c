/* PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and
 * strategic merge patch with the merge keys of the built-in types. */
#include "fk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- merge patch --------------------------------------------------------- */

/* See fk.h. */
json_t *
fk_merge_patch(json_t *target, json_t *patch)
{
    json_t *out;
    const char *key;
    json_t *val;

    if (!json_is_object(patch))
        return json_deep_copy(patch);
    out = json_is_object(target) ? json_deep_copy(target) : json_object();
    if (!out)
        return NULL;
    json_object_foreach(patch, key, val)
    {
        if (json_is_null(val)) {
            json_object_del(out, key);
        } else {
            json_t *merged = fk_merge_patch(json_object_get(out, key), val);
            if (!merged || json_object_set_new(out, key, merged) < 0) {
                json_decref(out);
                return NULL;
            }
        }
    }
    return out;
}

/* ---- JSON patch ------------------------------------------------------------ */

/* Unescape one JSON pointer token (~1 -> /, ~0 -> ~) in place. */
static void
ptr_unescape(char *t)
{
    char *o = t;
    for (char *p = t; *p; p++) {
        if (p[0] == '~' && p[1] == '1') {
            *o++ = '/';
            p++;
        } else if (p[0] == '~' && p[1] == '0') {
            *o++ = '~';
            p++;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

/* Resolve the parent of pointer path in doc: *parent (borrowed) and the last
 * token into last (len). 0 or -1. */
static int
ptr_parent(json_t *doc, const char *path, json_t **parent, char *last, size_t len)
{
    char buf[512];
    char *p, *slash;
    json_t *cur = doc;

    if (path[0] != '/' || strlen(path) >= sizeof(buf))
        return -1;
    snprintf(buf, sizeof(buf), "%s", path + 1);
    p = buf;
    while ((slash = strchr(p, '/'))) {
        *slash = '\0';
        ptr_unescape(p);
        if (json_is_object(cur)) {
            cur = json_object_get(cur, p);
        } else if (json_is_array(cur)) {
            char *end;
            long i = strtol(p, &end, 10);
            if (!*p || *end || i < 0)
                return -1;
            cur = json_array_get(cur, (size_t)i);
        } else {
            return -1;
        }
        if (!cur)
            return -1;
        p = slash + 1;
    }
    ptr_unescape(p);
    snprintf(last, len, "%s", p);
    *parent = cur;
    return 0;
}

static int
array_index(json_t *arr, const char *tok, int allow_end, size_t *out)
{
    char *end;
    long i;
    if (allow_end && !strcmp(tok, "-")) {
        *out = json_array_size(arr);
        return 0;
    }
    i = strtol(tok, &end, 10);
    if (!*tok || *end || i < 0 || (size_t)i > json_array_size(arr) ||
        (!allow_end && (size_t)i == json_array_size(arr)))
        return -1;
    *out = (size_t)i;
    return 0;
}

/* Get the value at path (borrowed) or NULL. */
static json_t *
ptr_get(json_t *doc, const char *path)
{
    json_t *parent;
    char last[512];
    size_t i;
    if (!path[0])
        return doc;
    if (ptr_parent(doc, path, &parent, last, sizeof(last)) < 0)
        return NULL;
    if (json_is_object(parent))
        return json_object_get(parent, last);
    if (json_is_array(parent) && array_index(parent, last, 0, &i) == 0)
        return json_array_get(parent, i);
    return NULL;
}

/* Remove at path; returns the removed value (new) or NULL. */
static json_t *
ptr_remove(json_t *doc, const char *path)
{
    json_t *parent, *v;
    char last[512];
    size_t i;
    if (ptr_parent(doc, path, &parent, last, sizeof(last)) < 0)
        return NULL;
    if (json_is_object(parent)) {
        v = json_incref(json_object_get(parent, last));
        if (v)
            json_object_del(parent, last);
        return v;
    }
    if (json_is_array(parent) && array_index(parent, last, 0, &i) == 0) {
        v = json_incref(json_array_get(parent, i));
        json_array_remove(parent, i);
        return v;
    }
    return NULL;
}

/* Add val (steals) at path. 0 or -1. */
static int
ptr_add(json_t *doc, const char *path, json_t *val)
{
    json_t *parent;
    char last[512];
    size_t i;
    if (ptr_parent(doc, path, &parent, last, sizeof(last)) < 0)
        goto fail;
    if (json_is_object(parent))
        return json_object_set_new(parent, last, val);
    if (json_is_array(parent) && array_index(parent, last, 1, &i) == 0)
        return json_array_insert_new(parent, i, val);
fail:
    json_decref(val);
    return -1;
}

/* See fk.h. */
json_t *
fk_json_patch(json_t *target, json_t *ops, int *code, char *err, size_t errlen)
{
    json_t *doc = NULL, *op;
    size_t idx;

    *code = 400;
    if (!json_is_array(ops)) {
        snprintf(err, errlen,
                 "json: cannot unmarshal object into Go value of type jsonpatch.Patch");
        return NULL;
    }
    /* Validate the shape of every operation before touching the document. */
    json_array_foreach(ops, idx, op)
    {
        const char *name = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        if (!name || !path) {
            snprintf(err, errlen, "operation %zu: missing op or path", idx);
            return NULL;
        }
        if (strcmp(name, "add") && strcmp(name, "remove") && strcmp(name, "replace") &&
            strcmp(name, "move") && strcmp(name, "copy") && strcmp(name, "test")) {
            snprintf(err, errlen, "Unexpected kind: %s", name);
            return NULL;
        }
        if ((!strcmp(name, "move") || !strcmp(name, "copy")) &&
            !json_is_string(json_object_get(op, "from"))) {
            snprintf(err, errlen, "operation %zu: missing from", idx);
            return NULL;
        }
        if ((!strcmp(name, "add") || !strcmp(name, "replace") || !strcmp(name, "test")) &&
            !json_object_get(op, "value")) {
            snprintf(err, errlen, "operation %zu: missing value", idx);
            return NULL;
        }
    }
    *code = 422;
    doc = json_deep_copy(target);
    if (!doc) {
        *code = 500;
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    json_array_foreach(ops, idx, op)
    {
        const char *name = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        const char *from = json_string_value(json_object_get(op, "from"));
        json_t *value = json_object_get(op, "value");
        json_t *v;

        if (!strcmp(name, "test")) {
            v = ptr_get(doc, path);
            if (!v || !json_equal(v, value)) {
                snprintf(err, errlen, "testing value %s failed: test failed", path);
                goto fail;
            }
        } else if (!strcmp(name, "remove")) {
            v = ptr_remove(doc, path);
            if (!v) {
                snprintf(err, errlen,
                         "remove operation does not apply: doc is missing path: \"%s\"", path);
                goto fail;
            }
            json_decref(v);
        } else if (!strcmp(name, "add")) {
            if (!path[0]) {
                json_decref(doc);
                doc = json_deep_copy(value);
                if (!doc)
                    goto fail;
                continue;
            }
            if (ptr_add(doc, path, json_deep_copy(value)) < 0) {
                snprintf(err, errlen, "add operation does not apply: doc is missing path: \"%s\"",
                         path);
                goto fail;
            }
        } else if (!strcmp(name, "replace")) {
            v = ptr_remove(doc, path);
            if (!v) {
                snprintf(err, errlen, "replace operation does not apply: doc is missing key: %s",
                         path);
                goto fail;
            }
            json_decref(v);
            if (ptr_add(doc, path, json_deep_copy(value)) < 0) {
                snprintf(err, errlen, "replace operation failed at %s", path);
                goto fail;
            }
        } else { /* move, copy */
            v = !strcmp(name, "move") ? ptr_remove(doc, from) : json_deep_copy(ptr_get(doc, from));
            if (!v) {
                snprintf(err, errlen, "%s operation does not apply: doc is missing from path: %s",
                         name, from);
                goto fail;
            }
            if (ptr_add(doc, path, v) < 0) {
                snprintf(err, errlen, "%s operation does not apply: doc is missing path: %s", name,
                         path);
                goto fail;
            }
        }
    }
    return doc;
fail:
    json_decref(doc);
    return NULL;
}

/* ---- strategic merge patch -------------------------------------------------- */

enum strat { ST_REPLACE, ST_MERGE_KEY, ST_SET };

/* How the list at path (dotted, from the object root) is merged for kind k. */
static enum strat
list_strategy(const struct fk_kind *k, const char *path, const char **mkey)
{
    *mkey = NULL;
    if (!strcmp(path, "metadata.finalizers"))
        return ST_SET;
    if (!strcmp(path, "metadata.ownerReferences")) {
        *mkey = "uid";
        return ST_MERGE_KEY;
    }
    if (!k->group[0] && !strcmp(k->resource, "services") && !strcmp(path, "spec.ports")) {
        *mkey = "port";
        return ST_MERGE_KEY;
    }
    if (!k->group[0] &&
        (!strcmp(k->resource, "services") || !strcmp(k->resource, "nodes") ||
         !strcmp(k->resource, "namespaces")) &&
        !strcmp(path, "status.conditions")) {
        *mkey = "type";
        return ST_MERGE_KEY;
    }
    if (!k->group[0] && !strcmp(k->resource, "nodes")) {
        if (!strcmp(path, "status.addresses")) {
            *mkey = "type";
            return ST_MERGE_KEY;
        }
        if (!strcmp(path, "spec.podCIDRs"))
            return ST_SET;
    }
    return ST_REPLACE;
}

struct smp {
    const struct fk_kind *k;
    char *err;
    size_t errlen;
};

static int smp_map(struct smp *c, json_t *orig, json_t *patch, const char *path, int *deleted);

/* A fresh value built from a patch value alone (directives applied). */
static json_t *
smp_new_value(struct smp *c, json_t *val, const char *path)
{
    json_t *out;
    int deleted = 0;
    if (json_is_object(val)) {
        out = json_object();
        if (!out)
            return NULL;
        if (smp_map(c, out, val, path, &deleted) < 0) {
            json_decref(out);
            return NULL;
        }
        return out;
    }
    if (json_is_array(val)) {
        size_t i;
        json_t *e;
        out = json_array();
        if (!out)
            return NULL;
        json_array_foreach(val, i, e)
        {
            json_t *ne;
            if (json_is_object(e) && json_object_get(e, "$patch"))
                continue;
            ne = smp_new_value(c, e, path);
            if (!ne || json_array_append_new(out, ne) < 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    return json_deep_copy(val);
}

static int
smp_list_by_key(struct smp *c, json_t *orig, json_t *patch, const char *mkey, const char *path,
                json_t **out)
{
    json_t *res, *e;
    size_t i;

    /* {"$patch": "replace"} anywhere in the list replaces the whole list. */
    json_array_foreach(patch, i, e)
    {
        if (json_is_object(e) &&
            !strcmp(json_string_value(json_object_get(e, "$patch")) ?: "", "replace")) {
            *out = smp_new_value(c, patch, path);
            return *out ? 0 : -1;
        }
    }
    res = json_is_array(orig) ? json_deep_copy(orig) : json_array();
    if (!res)
        return -1;
    json_array_foreach(patch, i, e)
    {
        json_t *kv, *o;
        size_t j;
        int found = -1;
        if (!json_is_object(e)) {
            snprintf(c->err, c->errlen, "%s: list element is not a map", path);
            goto fail;
        }
        kv = json_object_get(e, mkey);
        if (!kv) {
            snprintf(c->err, c->errlen, "map: %s does not contain declared merge key: %s", path,
                     mkey);
            goto fail;
        }
        json_array_foreach(res, j, o)
        {
            if (json_equal(json_object_get(o, mkey), kv)) {
                found = (int)j;
                break;
            }
        }
        if (!strcmp(json_string_value(json_object_get(e, "$patch")) ?: "", "delete")) {
            if (found >= 0)
                json_array_remove(res, (size_t)found);
            continue;
        }
        if (found >= 0) {
            int deleted = 0;
            if (smp_map(c, json_array_get(res, (size_t)found), e, path, &deleted) < 0)
                goto fail;
        } else {
            json_t *ne = smp_new_value(c, e, path);
            if (!ne || json_array_append_new(res, ne) < 0)
                goto fail;
        }
    }
    *out = res;
    return 0;
fail:
    json_decref(res);
    return -1;
}

static int
contains(json_t *arr, json_t *v)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) if (json_equal(e, v)) return 1;
    return 0;
}

/* Reorder list so the elements named by order come first, in that order. */
static int
apply_order(json_t *list, json_t *order, const char *mkey)
{
    json_t *sorted = json_array(), *o, *e;
    size_t i, j;
    if (!sorted)
        return -1;
    json_array_foreach(order, i, o)
    {
        json_array_foreach(list, j, e)
        {
            json_t *ke = mkey ? json_object_get(e, mkey) : e;
            json_t *ko = mkey ? json_object_get(o, mkey) : o;
            if (ke && ko && json_equal(ke, ko) && !contains(sorted, e)) {
                if (json_array_append(sorted, e) < 0)
                    goto fail;
                break;
            }
        }
    }
    json_array_foreach(list, j, e)
    {
        if (!contains(sorted, e) && json_array_append(sorted, e) < 0)
            goto fail;
    }
    json_array_clear(list);
    json_array_extend(list, sorted);
    json_decref(sorted);
    return 0;
fail:
    json_decref(sorted);
    return -1;
}

static void
join_path(char *buf, size_t len, const char *path, const char *key)
{
    if (path[0])
        snprintf(buf, len, "%s.%s", path, key);
    else
        snprintf(buf, len, "%s", key);
}

/* Merge patch (borrowed) into orig (modified in place). *deleted set when the
 * patch says the whole map goes. 0 or -1 with c->err. */
static int
smp_map(struct smp *c, json_t *orig, json_t *patch, const char *path, int *deleted)
{
    const char *key;
    json_t *val;
    const char *directive = json_string_value(json_object_get(patch, "$patch"));
    json_t *retain = json_object_get(patch, "$retainKeys");

    *deleted = 0;
    if (directive) {
        if (!strcmp(directive, "delete")) {
            *deleted = 1;
            return 0;
        }
        if (!strcmp(directive, "replace")) {
            json_t *fresh;
            json_object_clear(orig);
            fresh = json_deep_copy(patch);
            if (!fresh)
                return -1;
            json_object_del(fresh, "$patch");
            json_object_update(orig, fresh);
            json_decref(fresh);
            return 0;
        }
        if (strcmp(directive, "merge")) {
            snprintf(c->err, c->errlen, "Unknown patch type: %s", directive);
            return -1;
        }
    }
    if (retain && !json_is_array(retain)) {
        snprintf(c->err, c->errlen, "$retainKeys must be a list");
        return -1;
    }
    json_object_foreach(patch, key, val)
    {
        char sub[512];
        if (key[0] == '$')
            continue;
        join_path(sub, sizeof(sub), path, key);
        if (json_is_null(val)) {
            json_object_del(orig, key);
        } else if (json_is_object(val)) {
            json_t *o = json_object_get(orig, key);
            int del = 0;
            if (json_is_object(o)) {
                if (smp_map(c, o, val, sub, &del) < 0)
                    return -1;
                if (del)
                    json_object_del(orig, key);
            } else {
                json_t *nv;
                if (!strcmp(json_string_value(json_object_get(val, "$patch")) ?: "", "delete")) {
                    json_object_del(orig, key);
                    continue;
                }
                nv = smp_new_value(c, val, sub);
                if (!nv || json_object_set_new(orig, key, nv) < 0)
                    return -1;
            }
        } else if (json_is_array(val)) {
            const char *mkey;
            enum strat st = list_strategy(c->k, sub, &mkey);
            json_t *res = NULL;
            if (st == ST_MERGE_KEY) {
                if (smp_list_by_key(c, json_object_get(orig, key), val, mkey, sub, &res) < 0)
                    return -1;
            } else if (st == ST_SET) {
                json_t *o = json_object_get(orig, key);
                size_t i;
                json_t *e;
                res = json_is_array(o) ? json_deep_copy(o) : json_array();
                if (!res)
                    return -1;
                json_array_foreach(val, i, e)
                {
                    if (!contains(res, e) && json_array_append(res, e) < 0) {
                        json_decref(res);
                        return -1;
                    }
                }
            } else {
                res = smp_new_value(c, val, sub);
                if (!res)
                    return -1;
            }
            if (json_object_set_new(orig, key, res) < 0)
                return -1;
        } else {
            if (json_object_set(orig, key, val) < 0)
                return -1;
        }
    }
    /* Directives that refer to sibling lists. */
    json_object_foreach(patch, key, val)
    {
        char sub[512];
        const char *field;
        json_t *list;
        if (!strncmp(key, "$deleteFromPrimitiveList/", 25)) {
            size_t i;
            json_t *e;
            field = key + 25;
            list = json_object_get(orig, field);
            if (!json_is_array(list) || !json_is_array(val))
                continue;
            json_array_foreach(val, i, e)
            {
                for (size_t j = json_array_size(list); j > 0; j--)
                    if (json_equal(json_array_get(list, j - 1), e))
                        json_array_remove(list, j - 1);
            }
        } else if (!strncmp(key, "$setElementOrder/", 17)) {
            const char *mkey;
            field = key + 17;
            list = json_object_get(orig, field);
            if (!json_is_array(list) || !json_is_array(val))
                continue;
            join_path(sub, sizeof(sub), path, field);
            list_strategy(c->k, sub, &mkey);
            if (apply_order(list, val, mkey) < 0)
                return -1;
        }
    }
    if (retain) {
        void *tmp;
        json_object_foreach_safe(orig, tmp, key, val)
        {
            json_t *ks = json_string(key);
            int keep;
            if (!ks)
                return -1;
            keep = contains(retain, ks);
            json_decref(ks);
            if (!keep)
                json_object_del(orig, key);
        }
    }
    return 0;
}

/* See fk.h. */
json_t *
fk_strategic_patch(json_t *target, json_t *patch, const struct fk_kind *k, char *err, size_t errlen)
{
    struct smp c = {k, err, errlen};
    json_t *out;
    int deleted = 0;

    if (!json_is_object(patch)) {
        snprintf(err, errlen, "strategic merge patch must be a JSON object");
        return NULL;
    }
    out = json_is_object(target) ? json_deep_copy(target) : json_object();
    if (!out) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (smp_map(&c, out, patch, "", &deleted) < 0) {
        json_decref(out);
        return NULL;
    }
    if (deleted) {
        json_decref(out);
        snprintf(err, errlen, "the patch deletes the whole object");
        return NULL;
    }
    return out;
}
