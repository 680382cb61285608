/* The validation rules of kube-apiserver 1.35 that the OpenAPI schemas do
 * not express and a controller can trip on (the validation packages under pkg/apis):
 *
 *   Service   status.loadBalancer.ingress only when spec.type is
 *             LoadBalancer (the AllowServiceLBStatusOnNonLB gate is locked
 *             off); per ingress a valid ip, ipMode VIP or Proxy and only with
 *             an ip, a hostname that is a DNS subdomain and not an IP. A main
 *             write that leaves type LoadBalancer clears the status, as the
 *             Service strategy does.
 *   Event     legacyValidateEvent for both APIs: involvedObject.namespace
 *             and the Event's namespace agree; with an eventTime a reporting
 *             controller (a qualified name), instance, action and reason,
 *             each at most 128 characters, a message at most 1024.
 *             events.k8s.io/v1 creates also: eventTime set, type Normal or
 *             Warning, the deprecated count/firstTimestamp/lastTimestamp/
 *             source unset, a series with count >= 2 and lastObservedTime;
 *             its updates keep the identifying fields.
 *   Lease     leaseDurationSeconds > 0, leaseTransitions >= 0, strategy
 *             OldestEmulationVersion or a prefixed name, preferredHolder
 *             only with a strategy.
 *
 * Each broken rule is one cause of a 422 Invalid answer, with the field
 * paths and messages field.ErrorList gives. */
#include "fk.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_FIELD_MAX 128
#define EVENT_NOTE_MAX 1024

static int cause(json_t *causes, const char *reason, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Append one cause {reason, message, field}. 0 or -1 on ENOMEM. */
static int
cause(json_t *causes, const char *reason, const char *field, const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return json_array_append_new(
        causes, json_pack("{s:s, s:s, s:s}", "reason", reason, "message", msg, "field", field));
}

static int
ip_valid(const char *s)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* DNS-1123 subdomain: <= 253 of lowercase alphanumerics, '-' and '.', each
 * label starting and ending alphanumeric. */
static int
dns_subdomain(const char *s)
{
    size_t n = strlen(s), i;
    if (!n || n > 253)
        return 0;
    for (i = 0; i < n; i++) {
        char c = s[i];
        int an = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!an && c != '-' && c != '.')
            return 0;
        if (c != '.' || !i || i == n - 1)
            continue;
        if (s[i - 1] == '-' || s[i + 1] == '-' || s[i + 1] == '.')
            return 0;
    }
    return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

static int
service_rules(json_t *obj, json_t *causes)
{
    const char *type = fk_json_path_str(obj, "spec.type");
    json_t *ingress = json_object_get(
               json_object_get(json_object_get(obj, "status"), "loadBalancer"), "ingress"),
           *in;
    char field[128];
    size_t i;

    if (!json_array_size(ingress))
        return 0;
    if (!type || strcmp(type, "LoadBalancer"))
        return cause(causes, "FieldValueForbidden", "status.loadBalancer.ingress",
                     "Forbidden: may only be used when `spec.type` is 'LoadBalancer'");
    json_array_foreach(ingress, i, in)
    {
        const char *ip = json_string_value(json_object_get(in, "ip"));
        const char *mode = json_string_value(json_object_get(in, "ipMode"));
        const char *host = json_string_value(json_object_get(in, "hostname"));
        int rc = 0;
        if (ip && ip[0] && !ip_valid(ip)) {
            snprintf(field, sizeof(field), "status.loadBalancer.ingress[%zu].ip", i);
            rc |= cause(causes, "FieldValueInvalid", field,
                        "Invalid value: \"%.200s\": must be a valid IP address", ip);
        }
        snprintf(field, sizeof(field), "status.loadBalancer.ingress[%zu].ipMode", i);
        if (!mode && ip && ip[0])
            rc |= cause(causes, "FieldValueRequired", field,
                        "Required value: must be specified when `ip` is set");
        else if (mode && (!ip || !ip[0]))
            rc |= cause(causes, "FieldValueForbidden", field,
                        "Forbidden: may not be specified when `ip` is not set");
        else if (mode && strcmp(mode, "VIP") && strcmp(mode, "Proxy"))
            rc |=
                cause(causes, "FieldValueNotSupported", field,
                      "Unsupported value: \"%.200s\": supported values: \"Proxy\", \"VIP\"", mode);
        if (host && host[0]) {
            snprintf(field, sizeof(field), "status.loadBalancer.ingress[%zu].hostname", i);
            if (!dns_subdomain(host))
                rc |= cause(causes, "FieldValueInvalid", field,
                            "Invalid value: \"%.200s\": a lowercase RFC 1123 subdomain must "
                            "consist of lower case alphanumeric characters, '-' or '.', and must "
                            "start and end with an alphanumeric character",
                            host);
            if (ip_valid(host))
                rc |=
                    cause(causes, "FieldValueInvalid", field,
                          "Invalid value: \"%.200s\": must be a DNS name, not an IP address", host);
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int
str_set(json_t *o, const char *key)
{
    return json_string_length(json_object_get(o, key)) > 0;
}

static int
too_long(json_t *causes, json_t *e, const char *key, size_t max)
{
    if (json_string_length(json_object_get(e, key)) <= max)
        return 0;
    return cause(causes, "FieldValueInvalid", key,
                 "Invalid value: \"\": can have at most %zu characters", max);
}

/* legacyValidateEvent on e, the Event in core/v1 shape; v1 = the request
 * came through core/v1 (its field is reportingComponent). */
static int
event_legacy(json_t *e, int v1, json_t *causes)
{
    const char *ns = fk_json_path_str(e, "metadata.namespace") ?: "";
    const char *ions = fk_json_path_str(e, "involvedObject.namespace") ?: "";
    const char *rc_field = v1 ? "reportingComponent" : "reportingController";
    const char *ctl = json_string_value(json_object_get(e, "reportingComponent")) ?: "";
    int rc = 0;

    if (!str_set(e, "eventTime")) {
        if ((!ions[0] && ns[0] && strcmp(ns, "default")) || (ions[0] && strcmp(ns, ions)))
            rc |= cause(causes, "FieldValueInvalid", "involvedObject.namespace",
                        "Invalid value: \"%.200s\": does not match event.namespace", ions);
        return rc;
    }
    if (!ions[0] && strcmp(ns, "default") && strcmp(ns, "kube-system"))
        rc |= cause(causes, "FieldValueInvalid", "involvedObject.namespace",
                    "Invalid value: \"%.200s\": does not match event.namespace", ions);
    if (!ctl[0])
        rc |= cause(causes, "FieldValueRequired", rc_field, "Required value");
    else if (!fk_label_key_valid(ctl, strlen(ctl)))
        rc |= cause(causes, "FieldValueInvalid", rc_field,
                    "Invalid value: \"%.200s\": name part must consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character",
                    ctl);
    if (!str_set(e, "reportingInstance"))
        rc |= cause(causes, "FieldValueRequired", "reportingInstance", "Required value");
    rc |= too_long(causes, e, "reportingInstance", EVENT_FIELD_MAX);
    if (!str_set(e, "action"))
        rc |= cause(causes, "FieldValueRequired", "action", "Required value");
    rc |= too_long(causes, e, "action", EVENT_FIELD_MAX);
    if (!str_set(e, "reason"))
        rc |= cause(causes, "FieldValueRequired", "reason", "Required value");
    rc |= too_long(causes, e, "reason", EVENT_FIELD_MAX);
    rc |= too_long(causes, e, "message", EVENT_NOTE_MAX);
    return rc;
}

static int
event_series(json_t *e, json_t *causes)
{
    json_t *series = json_object_get(e, "series");
    int rc = 0;
    if (!json_is_object(series))
        return 0;
    if (json_integer_value(json_object_get(series, "count")) < 2)
        rc |= cause(causes, "FieldValueInvalid", "series.count",
                    "Invalid value: \"\": should be at least 2");
    if (!str_set(series, "lastObservedTime"))
        rc |= cause(causes, "FieldValueRequired", "series.lastObservedTime", "Required value");
    return rc;
}

/* The rules of events.k8s.io/v1 beyond the legacy ones (e and old in core
 * shape; old NULL on create). */
static int
event_modern(json_t *e, json_t *old, json_t *causes)
{
    static const char *const immutable[] = {"involvedObject",
                                            "reason",
                                            "message",
                                            "source",
                                            "firstTimestamp",
                                            "lastTimestamp",
                                            "count",
                                            "type",
                                            "eventTime",
                                            "action",
                                            "related",
                                            "reportingComponent",
                                            "reportingInstance",
                                            NULL};
    const char *type = json_string_value(json_object_get(e, "type")) ?: "";
    int rc = 0;

    if (old) {
        for (size_t i = 0; immutable[i]; i++) {
            json_t *a = json_object_get(e, immutable[i]), *b = json_object_get(old, immutable[i]);
            const char *field =
                !strcmp(immutable[i], "reportingComponent") ? "reportingController" : immutable[i];
            char *shown;
            if (json_is_null(a))
                a = NULL;
            if (json_is_null(b))
                b = NULL;
            if ((!a && !b) || (a && b && json_equal(a, b)))
                continue;
            shown = a ? json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
            rc |= cause(causes, "FieldValueInvalid", field,
                        "Invalid value: %.300s: field is immutable", shown ? shown : "null");
            free(shown);
        }
        if (!json_equal(json_object_get(e, "series") ?: json_null(),
                        json_object_get(old, "series") ?: json_null()))
            rc |= event_series(e, causes);
        return rc;
    }
    rc |= event_series(e, causes);
    if (!str_set(e, "eventTime"))
        rc |= cause(causes, "FieldValueRequired", "eventTime", "Required value");
    if (strcmp(type, "Normal") && strcmp(type, "Warning"))
        rc |= cause(causes, "FieldValueInvalid", "type",
                    "Invalid value: \"\": has invalid value: %.200s", type);
    if (str_set(e, "firstTimestamp"))
        rc |= cause(causes, "FieldValueInvalid", "firstTimestamp",
                    "Invalid value: \"\": needs to be unset");
    if (str_set(e, "lastTimestamp"))
        rc |= cause(causes, "FieldValueInvalid", "lastTimestamp",
                    "Invalid value: \"\": needs to be unset");
    if (json_integer_value(json_object_get(e, "count")) != 0)
        rc |= cause(causes, "FieldValueInvalid", "count", "Invalid value: \"\": needs to be unset");
    if (str_set(json_object_get(e, "source"), "component") ||
        str_set(json_object_get(e, "source"), "host"))
        rc |=
            cause(causes, "FieldValueInvalid", "source", "Invalid value: \"\": needs to be unset");
    return rc;
}

static int
event_rules(const struct fk_kind *k, json_t *obj, json_t *old, json_t *causes)
{
    json_t *e = fk_view_to_storage(k, obj), *o = old ? fk_view_to_storage(k, old) : NULL;
    int rc;

    if (!e || (old && !o)) {
        json_decref(e);
        json_decref(o);
        return -1;
    }
    rc = event_legacy(e, !k->group[0], causes);
    if (k->group[0])
        rc |= event_modern(e, o, causes);
    json_decref(e);
    json_decref(o);
    return rc;
}

static int
lease_rules(json_t *obj, json_t *causes)
{
    json_t *spec = json_object_get(obj, "spec");
    json_t *d = json_object_get(spec, "leaseDurationSeconds");
    json_t *t = json_object_get(spec, "leaseTransitions");
    const char *strategy = json_string_value(json_object_get(spec, "strategy"));
    const char *preferred = json_string_value(json_object_get(spec, "preferredHolder"));
    char num[32];
    int rc = 0;

    if (json_is_integer(d) && json_integer_value(d) <= 0) {
        snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(d));
        rc |= cause(causes, "FieldValueInvalid", "spec.leaseDurationSeconds",
                    "Invalid value: %s: must be greater than 0", num);
    }
    if (json_is_integer(t) && json_integer_value(t) < 0) {
        snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(t));
        rc |= cause(causes, "FieldValueInvalid", "spec.leaseTransitions",
                    "Invalid value: %s: must be greater than or equal to 0", num);
    }
    if (strategy && strategy[0]) {
        if (!strchr(strategy, '/') && strcmp(strategy, "OldestEmulationVersion"))
            rc |= cause(causes, "FieldValueNotSupported", "spec.strategy",
                        "Unsupported value: \"%.200s\": supported values: "
                        "\"OldestEmulationVersion\"",
                        strategy);
        else if (strchr(strategy, '/') && !fk_label_key_valid(strategy, strlen(strategy)))
            rc |= cause(causes, "FieldValueInvalid", "spec.strategy",
                        "Invalid value: \"%.200s\": must be a qualified name", strategy);
    } else if (preferred && preferred[0]) {
        rc |= cause(causes, "FieldValueForbidden", "spec.preferredHolder",
                    "Forbidden: may only be specified if `strategy` is defined");
    }
    return rc;
}

/* See fk.h. */
int
fk_rules_prepare(const struct fk_kind *k, json_t *obj, int status_write)
{
    const char *type;
    json_t *status;

    if (status_write || k->group[0] || strcmp(k->resource, "services"))
        return 0;
    type = fk_json_path_str(obj, "spec.type");
    status = json_object_get(obj, "status");
    if ((type && !strcmp(type, "LoadBalancer")) || !json_is_object(status) ||
        !json_object_get(status, "loadBalancer"))
        return 0;
    return json_object_set_new(status, "loadBalancer", json_object());
}

/* See fk.h. */
int
fk_rules_check(const struct fk_kind *k, json_t *obj, json_t *old, json_t *causes)
{
    if (!k->group[0] && !strcmp(k->resource, "services"))
        return service_rules(obj, causes) < 0 ? -1 : 0;
    if (!strcmp(k->resource, "events"))
        return event_rules(k, obj, old, causes) < 0 ? -1 : 0;
    if (!strcmp(k->resource, "leases"))
        return lease_rules(obj, causes) < 0 ? -1 : 0;
    return 0;
}
