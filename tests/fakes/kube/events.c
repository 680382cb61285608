/* One set of Events behind two APIs, as in the real server: objects are
 * stored in core/v1 shape and events.k8s.io/v1 reads and writes convert. */
#include "fk.h"

#include <string.h>

/* core/v1 field <-> events.k8s.io/v1 field; the rest keep their names. */
static const char *const renames[][2] = {
    {"involvedObject", "regarding"},
    {"message", "note"},
    {"reportingComponent", "reportingController"},
    {"source", "deprecatedSource"},
    {"firstTimestamp", "deprecatedFirstTimestamp"},
    {"lastTimestamp", "deprecatedLastTimestamp"},
    {"count", "deprecatedCount"},
};

static json_t *
convert(json_t *o, int to_core)
{
    json_t *out = json_object();
    const char *key;
    json_t *v;

    if (!out)
        return NULL;
    json_object_foreach(o, key, v)
    {
        const char *name = key;
        for (size_t i = 0; i < sizeof(renames) / sizeof(renames[0]); i++)
            if (!strcmp(key, renames[i][to_core ? 1 : 0]))
                name = renames[i][to_core ? 0 : 1];
        if (json_object_set(out, name, v) < 0)
            goto fail;
    }
    if (json_object_set_new(out, "kind", json_string("Event")) < 0 ||
        json_object_set_new(out, "apiVersion", json_string(to_core ? "v1" : "events.k8s.io/v1")) <
            0)
        goto fail;
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* See fk.h. */
int
fk_kind_is_view(const struct fk_kind *k)
{
    return fk_kind_storage(k) != k;
}

/* See fk.h. */
json_t *
fk_view_to_storage(const struct fk_kind *k, json_t *obj)
{
    if (!fk_kind_is_view(k))
        return json_incref(obj);
    return convert(obj, 1);
}

/* See fk.h. */
json_t *
fk_view_from_storage(const struct fk_kind *k, json_t *obj)
{
    if (!obj)
        return NULL;
    if (!fk_kind_is_view(k))
        return json_incref(obj);
    return convert(obj, 0);
}
