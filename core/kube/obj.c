/*
 * obj: plb_obj, the ABI's view of a JSON value. A plb_obj pointer is a
 * jansson json_t pointer, so handing a cached object to a module costs
 * nothing and the object stays held once; jansson's layout never crosses
 * the ABI because modules only see the opaque type and these accessors.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"
#include "kube.h"

const plb_obj *
core_obj_get(const plb_obj *o, ...)
{
    json_t *j = KJSON(o);
    va_list ap;
    va_start(ap, o);
    for (const char *key = va_arg(ap, const char *); key && j; key = va_arg(ap, const char *))
        j = json_object_get(j, key);
    va_end(ap);
    return KOBJ(j);
}

enum plb_obj_type
core_obj_type(const plb_obj *o)
{
    if (!o)
        return PLB_OBJ_NULL; /* the ABI's accessors accept NULL */
    switch (json_typeof(KJSON(o))) {
    case JSON_OBJECT:
        return PLB_OBJ_OBJECT;
    case JSON_ARRAY:
        return PLB_OBJ_ARRAY;
    case JSON_STRING:
        return PLB_OBJ_STRING;
    case JSON_INTEGER:
        return PLB_OBJ_INT;
    case JSON_REAL:
        return PLB_OBJ_REAL;
    case JSON_TRUE:
    case JSON_FALSE:
        return PLB_OBJ_BOOL;
    case JSON_NULL:
        break;
    }
    return PLB_OBJ_NULL;
}

const char *
core_obj_str(const plb_obj *o)
{
    return o ? json_string_value(KJSON(o)) : NULL;
}

int64_t
core_obj_int(const plb_obj *o, int64_t def)
{
    json_t *j = KJSON(o);
    if (json_is_integer(j))
        return (int64_t)json_integer_value(j);
    if (json_is_real(j)) {
        /* Truncated toward zero; one outside int64_t's range is no integer
         * (its cast would be undefined). 2^63 is exact as a double. */
        double v = json_real_value(j);
        if (v >= -9223372036854775808.0 && v < 9223372036854775808.0)
            return (int64_t)v;
    }
    return def;
}

int
core_obj_bool(const plb_obj *o, int def)
{
    json_t *j = KJSON(o);
    return json_is_boolean(j) ? json_is_true(j) : def;
}

size_t
core_obj_len(const plb_obj *o)
{
    json_t *j = KJSON(o);
    if (json_is_array(j))
        return json_array_size(j);
    if (json_is_object(j))
        return json_object_size(j);
    return 0;
}

const plb_obj *
core_obj_at(const plb_obj *o, size_t i)
{
    return KOBJ(json_array_get(KJSON(o), i));
}

const char *
core_obj_iter(const plb_obj *o, void **it, const plb_obj **value)
{
    json_t *j = KJSON(o);
    if (!json_is_object(j) || !it)
        return NULL;
    void *next = *it ? json_object_iter_next(j, *it) : json_object_iter(j);
    *it = next;
    if (!next)
        return NULL;
    if (value)
        *value = KOBJ(json_object_iter_value(next));
    return json_object_iter_key(next);
}

char *
core_obj_dump(const plb_obj *o)
{
    json_t *j = KJSON(o);
    size_t flags = JSON_COMPACT | JSON_ENCODE_ANY;
    if (!j)
        return NULL;
    size_t n = json_dumpb(j, NULL, 0, flags);
    char *buf = n ? core_malloc(n + 1) : NULL;
    if (!buf)
        return NULL;
    if (json_dumpb(j, buf, n, flags) != n) {
        core_free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

plb_obj *
core_obj_parse(const char *text, size_t len)
{
    if (!text)
        return NULL;
    return KOBJ(core_kube_json_parse(text, len));
}

plb_obj *
core_obj_ref(const plb_obj *o)
{
    return KOBJ(json_incref(KJSON(o)));
}

void
core_obj_unref(plb_obj *o)
{
    json_decref(KJSON(o));
}

plb_obj *
core_obj_copy(const plb_obj *o)
{
    return o ? KOBJ(json_deep_copy(KJSON(o))) : NULL;
}

int
core_obj_set(plb_obj *o, plb_obj *value, ...)
{
    json_t *j = KJSON(o), *v = KJSON(value);
    va_list ap;
    int rc = -EINVAL;
    va_start(ap, value);
    const char *key = va_arg(ap, const char *);
    if (!json_is_object(j) || !v || !key)
        goto out;
    for (const char *next = va_arg(ap, const char *); next; next = va_arg(ap, const char *)) {
        json_t *child = json_object_get(j, key);
        if (!child) {
            child = json_object();
            if (!child || json_object_set_new(j, key, child) < 0) {
                rc = -ENOMEM;
                goto out;
            }
        } else if (!json_is_object(child)) {
            goto out;
        }
        j = child;
        key = next;
    }
    rc = json_object_set_new(j, key, v) < 0 ? -ENOMEM : 0;
    v = NULL; /* stolen even on failure */
out:
    va_end(ap);
    json_decref(v);
    return rc;
}

int
core_obj_del(plb_obj *o, ...)
{
    json_t *j = KJSON(o);
    va_list ap;
    int rc = -ENOENT;
    va_start(ap, o);
    const char *key = va_arg(ap, const char *);
    for (const char *next = key ? va_arg(ap, const char *) : NULL; next && j;
         next = va_arg(ap, const char *)) {
        j = json_object_get(j, key);
        key = next;
    }
    if (key && json_is_object(j) && json_object_del(j, key) == 0)
        rc = 0;
    va_end(ap);
    return rc;
}

plb_obj *
core_obj_new_str(const char *s)
{
    return s ? KOBJ(json_string(s)) : NULL;
}

plb_obj *
core_obj_new_int(int64_t v)
{
    return KOBJ(json_integer((json_int_t)v));
}

plb_obj *
core_obj_new_object(void)
{
    return KOBJ(json_object());
}

plb_obj *
core_obj_new_array(void)
{
    return KOBJ(json_array());
}

plb_obj *
core_obj_new_bool(int v)
{
    return KOBJ(json_boolean(v != 0));
}

plb_obj *
core_obj_new_null(void)
{
    return KOBJ(json_null());
}

plb_obj *
core_obj_new_real(double v)
{
    return isfinite(v) ? KOBJ(json_real(v)) : NULL; /* JSON has no NaN or infinity */
}

int
core_obj_append(plb_obj *a, plb_obj *value)
{
    json_t *j = KJSON(a), *v = KJSON(value);
    if (!json_is_array(j) || !v) {
        json_decref(v);
        return -EINVAL;
    }
    return json_array_append_new(j, v) < 0 ? -ENOMEM : 0; /* stolen either way */
}

int
core_obj_remove(plb_obj *a, size_t i)
{
    json_t *j = KJSON(a);
    if (!json_is_array(j) || i >= json_array_size(j))
        return -ENOENT;
    return json_array_remove(j, i) < 0 ? -ENOENT : 0;
}
