/*
 * evkey: the pure half of the Event recorder. client-go's
 * tools/record/events_cache.go aggregates Events by a key made of the
 * source, the involved object and the event's type, reason and message;
 * the same key seen again bumps count and lastTimestamp of the Event
 * created first instead of creating another. After a restart the key is
 * found again on the server: a field selector narrows the namespace's
 * Events to the object, reason, type and source, and the key of each
 * Event listed (core_kube_event_item_key) is compared with the one
 * recorded.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "kube-internal.h"

static const char *
s_or(const char *s)
{
    return s ? s : "";
}

static const char *
md(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

/* kind and apiVersion of involved: the object's own, else the given ones. */
static void
kind_of(json_t *involved, const char **kind, const char **apiv)
{
    const char *k = json_string_value(json_object_get(involved, "kind"));
    const char *a = json_string_value(json_object_get(involved, "apiVersion"));
    if (k && *k)
        *kind = k;
    if (a && *a)
        *apiv = a;
}

char *
core_kube_event_key(const struct core_kube_evsrc *src, json_t *involved, const char *kind,
                    const char *api_version, const char *type, const char *reason,
                    const char *message)
{
    kind_of(involved, &kind, &api_version);
    return core_asprintf(
        "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", s_or(src->component),
        s_or(src->host), s_or(kind), s_or(md(involved, "namespace")), s_or(md(involved, "name")),
        s_or(md(involved, "uid")), s_or(api_version), s_or(type), s_or(reason), s_or(message));
}

const char *
core_kube_rfc3339(int64_t wall_ns, char *buf, size_t len)
{
    time_t t = (time_t)(wall_ns / 1000000000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "1970-01-01T00:00:00Z");
    return buf;
}

json_t *
core_kube_event_body(const struct core_kube_evsrc *src, json_t *involved, const char *kind,
                     const char *api_version, const char *type, const char *reason,
                     const char *message, int64_t wall_ns)
{
    char ts[32], name[300];
    const char *oname = md(involved, "name");
    const char *ons = md(involved, "namespace");
    if (!oname || !*oname)
        return NULL;
    kind_of(involved, &kind, &api_version);
    int n = snprintf(name, sizeof(name), "%s.%llx", oname, (unsigned long long)wall_ns);
    if (n < 0 || (size_t)n >= sizeof(name))
        return NULL;
    core_kube_rfc3339(wall_ns, ts, sizeof(ts));

    json_t *ref = json_pack("{s:s, s:s, s:s}", "kind", s_or(kind), "apiVersion", s_or(api_version),
                            "name", oname);
    json_t *ev = NULL;
    if (!ref)
        return NULL;
    if ((ons && *ons && json_object_set_new(ref, "namespace", json_string(ons)) < 0) ||
        (md(involved, "uid") &&
         json_object_set_new(ref, "uid", json_string(md(involved, "uid"))) < 0) ||
        (md(involved, "resourceVersion") &&
         json_object_set_new(ref, "resourceVersion", json_string(md(involved, "resourceVersion"))) <
             0))
        goto fail;
    json_t *source = json_pack("{s:s}", "component", s_or(src->component));
    if (!source)
        goto fail;
    if (src->host && *src->host && json_object_set_new(source, "host", json_string(src->host))) {
        json_decref(source);
        goto fail;
    }
    ev =
        json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s, s:o, s:i, s:s, s:s, s:s, s:s}",
                  "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace",
                  ons && *ons ? ons : "default", "involvedObject", ref, "reason", s_or(reason),
                  "message", s_or(message), "type", type && *type ? type : "Normal", "source",
                  source, "count", 1, "firstTimestamp", ts, "lastTimestamp", ts,
                  "reportingComponent", s_or(src->component), "reportingInstance", s_or(src->host));
    return ev; /* json_pack stole ref and source, even on failure */
fail:
    json_decref(ref);
    return NULL;
}

/* Append s to the selector text at *out (of n bytes, *len used), its '\',
 * ',' and '=' escaped as the apiserver's field selector grammar reads
 * them. 0, or -1 when it does not fit. */
static int
sel_put(char *out, size_t n, size_t *len, const char *s)
{
    for (; *s; s++) {
        if ((*s == '\\' || *s == ',' || *s == '=') && *len + 1 < n)
            out[(*len)++] = '\\';
        if (*len + 1 >= n)
            return -1;
        out[(*len)++] = *s;
    }
    out[*len] = '\0';
    return 0;
}

char *
core_kube_event_selector(const struct core_kube_evsrc *src, json_t *involved, const char *kind,
                         const char *api_version, const char *type, const char *reason)
{
    static const size_t cap = 2048;
    char *out = core_malloc(cap);
    size_t len = 0;
    const char *name = md(involved, "name");
    if (!out)
        return NULL;
    out[0] = '\0';
    if (!name || !*name)
        goto fail;
    kind_of(involved, &kind, &api_version);
    const char *fields[][2] = {
        {"involvedObject.name", name},
        {"involvedObject.uid", md(involved, "uid")},
        {"involvedObject.kind", kind},
        {"reason", reason},
        {"type", type && *type ? type : "Normal"},
        {"source", src->component},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const char *v = fields[i][1];
        if (!v || !*v)
            continue;
        size_t need = strlen(fields[i][0]) + 2;
        if (len + need >= cap)
            goto fail;
        len += (size_t)snprintf(out + len, cap - len, "%s%s=", len ? "," : "", fields[i][0]);
        if (sel_put(out, cap, &len, v) < 0)
            goto fail;
    }
    return out;
fail:
    core_free(out);
    return NULL;
}

char *
core_kube_event_item_key(json_t *ev)
{
    json_t *io = json_object_get(ev, "involvedObject");
    json_t *source = json_object_get(ev, "source");
    struct core_kube_evsrc src = {json_string_value(json_object_get(source, "component")),
                                  json_string_value(json_object_get(source, "host"))};
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!json_is_object(io))
        return NULL;
    json_t *inv = json_pack("{s:{s:s?, s:s?, s:s?}}", "metadata", "name",
                            json_string_value(json_object_get(io, "name")), "namespace",
                            json_string_value(json_object_get(io, "namespace")), "uid",
                            json_string_value(json_object_get(io, "uid")));
    if (!inv)
        return NULL;
    char *key = core_kube_event_key(&src, inv, json_string_value(json_object_get(io, "kind")),
                                    json_string_value(json_object_get(io, "apiVersion")),
                                    type && *type ? type : "Normal",
                                    json_string_value(json_object_get(ev, "reason")),
                                    json_string_value(json_object_get(ev, "message")));
    json_decref(inv);
    return key;
}
