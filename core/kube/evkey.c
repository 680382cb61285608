/*
 * evkey: the pure half of the Event recorder. client-go's
 * tools/record/events_cache.go aggregates Events by a key made of the
 * source, the involved object and the event's type, reason and message;
 * the same key seen again bumps count and lastTimestamp of the Event
 * created first instead of creating another.
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
