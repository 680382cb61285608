/* What each endpoint accepts, as the Hetzner Cloud API refuses the rest:
 * the query parameters of each route, and the fields of each request body
 * with their JSON types (hcloud-go's hcloud/schema/load_balancer.go request
 * structs; a struct{} request takes no field). An unknown parameter, an
 * unknown field, a value of the wrong type or a field on an action that takes
 * none is a 400 invalid_input whose details.fields name every one. Values are
 * checked further (ranges, names, references) by the handlers. */
#include "fake.h"

#include <stdio.h>
#include <string.h>

enum ftype { F_STR, F_INT, F_BOOL, F_OBJ, F_LIST, F_ID_OR_NAME, F_LABELS, F_STR_OR_NULL };

struct field {
    const char *name;
    enum ftype type;
    enum ftype elem;         /* list elements */
    const struct field *sub; /* an object's fields, or a list's object elements' */
};

#define END                                                                                        \
    {                                                                                              \
        NULL, F_STR, F_STR, NULL                                                                   \
    }

static const struct field health_http[] = {
    {"domain", F_STR, F_STR, NULL},   {"path", F_STR, F_STR, NULL},
    {"response", F_STR, F_STR, NULL}, {"status_codes", F_LIST, F_STR, NULL},
    {"tls", F_BOOL, F_STR, NULL},     END,
};
static const struct field health[] = {
    {"protocol", F_STR, F_STR, NULL},
    {"port", F_INT, F_STR, NULL},
    {"interval", F_INT, F_STR, NULL},
    {"timeout", F_INT, F_STR, NULL},
    {"retries", F_INT, F_STR, NULL},
    {"http", F_OBJ, F_STR, health_http},
    END,
};
static const struct field service_http[] = {
    {"cookie_name", F_STR, F_STR, NULL},
    {"cookie_lifetime", F_INT, F_STR, NULL},
    {"certificates", F_LIST, F_INT, NULL},
    {"redirect_http", F_BOOL, F_STR, NULL},
    {"sticky_sessions", F_BOOL, F_STR, NULL},
    {"timeout_idle", F_INT, F_STR, NULL},
    END,
};
static const struct field service[] = {
    {"protocol", F_STR, F_STR, NULL},
    {"listen_port", F_INT, F_STR, NULL},
    {"destination_port", F_INT, F_STR, NULL},
    {"proxyprotocol", F_BOOL, F_STR, NULL},
    {"http", F_OBJ, F_STR, service_http},
    {"health_check", F_OBJ, F_STR, health},
    END,
};
static const struct field server_ref[] = {{"id", F_INT, F_STR, NULL}, END};
static const struct field selector_ref[] = {{"selector", F_STR, F_STR, NULL}, END};
static const struct field ip_ref[] = {{"ip", F_STR, F_STR, NULL}, END};
static const struct field target[] = {
    {"type", F_STR, F_STR, NULL},
    {"server", F_OBJ, F_STR, server_ref},
    {"label_selector", F_OBJ, F_STR, selector_ref},
    {"ip", F_OBJ, F_STR, ip_ref},
    {"use_private_ip", F_BOOL, F_STR, NULL},
    END,
};
static const struct field remove_target[] = {
    {"type", F_STR, F_STR, NULL},
    {"server", F_OBJ, F_STR, server_ref},
    {"label_selector", F_OBJ, F_STR, selector_ref},
    {"ip", F_OBJ, F_STR, ip_ref},
    END,
};
static const struct field algorithm[] = {{"type", F_STR, F_STR, NULL}, END};
static const struct field create[] = {
    {"name", F_STR, F_STR, NULL},
    {"load_balancer_type", F_ID_OR_NAME, F_STR, NULL},
    {"algorithm", F_OBJ, F_STR, algorithm},
    {"location", F_STR, F_STR, NULL},
    {"network_zone", F_STR, F_STR, NULL},
    {"labels", F_LABELS, F_STR, NULL},
    {"targets", F_LIST, F_OBJ, target},
    {"services", F_LIST, F_OBJ, service},
    {"public_interface", F_BOOL, F_STR, NULL},
    {"network", F_INT, F_STR, NULL},
    END,
};
static const struct field update[] = {
    {"name", F_STR, F_STR, NULL}, {"labels", F_LABELS, F_STR, NULL}, END};
static const struct field update_service[] = {
    {"listen_port", F_INT, F_STR, NULL},
    {"protocol", F_STR, F_STR, NULL},
    {"destination_port", F_INT, F_STR, NULL},
    {"proxyprotocol", F_BOOL, F_STR, NULL},
    {"http", F_OBJ, F_STR, service_http},
    {"health_check", F_OBJ, F_STR, health},
    END,
};
static const struct field listen_port[] = {{"listen_port", F_INT, F_STR, NULL}, END};
static const struct field attach[] = {
    {"network", F_INT, F_STR, NULL},
    {"ip", F_STR, F_STR, NULL},
    {"ip_range", F_STR, F_STR, NULL},
    END,
};
static const struct field network_ref[] = {{"network", F_INT, F_STR, NULL}, END};
static const struct field change_type[] = {{"load_balancer_type", F_ID_OR_NAME, F_STR, NULL}, END};
static const struct field protection[] = {{"delete", F_BOOL, F_STR, NULL}, END};
static const struct field dns_ptr[] = {
    {"ip", F_STR, F_STR, NULL}, {"dns_ptr", F_STR_OR_NULL, F_STR, NULL}, END};
static const struct field none[] = {END};
/* hcloud-go hcloud/schema/certificate.go */
static const struct field cert_create[] = {
    {"name", F_STR, F_STR, NULL},
    {"type", F_STR, F_STR, NULL},
    {"certificate", F_STR, F_STR, NULL},
    {"private_key", F_STR, F_STR, NULL},
    {"domain_names", F_LIST, F_STR, NULL},
    {"labels", F_LABELS, F_STR, NULL},
    END,
};

/* Per route ("METHOD /v1/pattern"): its query parameters (space separated,
 * with a space at each end) and its body's fields (NULL: no body read). */
static const struct route {
    const char *route;
    const char *params;
    const struct field *body;
} routes[] = {
    {"GET /v1/load_balancers", " name label_selector sort page per_page ", NULL},
    {"POST /v1/load_balancers", " ", create},
    {"GET /v1/load_balancers/{id}", " ", NULL},
    {"PUT /v1/load_balancers/{id}", " ", update},
    {"DELETE /v1/load_balancers/{id}", " ", NULL},
    {"GET /v1/load_balancers/actions", " id status sort page per_page ", NULL},
    {"GET /v1/load_balancers/actions/{id}", " ", NULL},
    {"GET /v1/load_balancers/{id}/actions", " status sort page per_page ", NULL},
    {"GET /v1/load_balancers/{id}/actions/{action_id}", " ", NULL},
    {"POST /v1/load_balancers/{id}/actions/add_target", " ", target},
    {"POST /v1/load_balancers/{id}/actions/remove_target", " ", remove_target},
    {"POST /v1/load_balancers/{id}/actions/add_service", " ", service},
    {"POST /v1/load_balancers/{id}/actions/update_service", " ", update_service},
    {"POST /v1/load_balancers/{id}/actions/delete_service", " ", listen_port},
    {"POST /v1/load_balancers/{id}/actions/attach_to_network", " ", attach},
    {"POST /v1/load_balancers/{id}/actions/detach_from_network", " ", network_ref},
    {"POST /v1/load_balancers/{id}/actions/change_algorithm", " ", algorithm},
    {"POST /v1/load_balancers/{id}/actions/change_type", " ", change_type},
    {"POST /v1/load_balancers/{id}/actions/enable_public_interface", " ", none},
    {"POST /v1/load_balancers/{id}/actions/disable_public_interface", " ", none},
    {"POST /v1/load_balancers/{id}/actions/change_protection", " ", protection},
    {"POST /v1/load_balancers/{id}/actions/change_dns_ptr", " ", dns_ptr},
    {"GET /v1/actions", " id status sort page per_page ", NULL},
    {"GET /v1/actions/{id}", " ", NULL},
    {"GET /v1/load_balancer_types", " name page per_page ", NULL},
    {"GET /v1/load_balancer_types/{id}", " ", NULL},
    {"GET /v1/locations", " name sort page per_page ", NULL},
    {"GET /v1/locations/{id}", " ", NULL},
    {"GET /v1/networks", " name label_selector sort page per_page ", NULL},
    {"GET /v1/networks/{id}", " ", NULL},
    {"GET /v1/certificates", " name label_selector type sort page per_page ", NULL},
    {"POST /v1/certificates", " ", cert_create},
    {"GET /v1/certificates/{id}", " ", NULL},
    {"PUT /v1/certificates/{id}", " ", update},
    {"DELETE /v1/certificates/{id}", " ", NULL},
    {"GET /v1/certificates/actions", " id status sort page per_page ", NULL},
    {"GET /v1/certificates/actions/{id}", " ", NULL},
    {"GET /v1/certificates/{id}/actions", " status sort page per_page ", NULL},
    {"GET /v1/certificates/{id}/actions/{action_id}", " ", NULL},
    {"POST /v1/certificates/{id}/actions/retry", " ", none},
};

/* Add {name, messages: [message]} to fields (borrowed array). 0 or -1. */
static int
bad(json_t *fields, const char *name, const char *message)
{
    return json_array_append_new(fields,
                                 json_pack("{s:s, s:[s]}", "name", name, "messages", message));
}

static const char *
type_message(enum ftype t)
{
    switch (t) {
    case F_STR:
        return "must be a string";
    case F_STR_OR_NULL:
        return "must be a string or null";
    case F_INT:
        return "must be an integer";
    case F_BOOL:
        return "must be a boolean";
    case F_OBJ:
        return "must be an object";
    case F_LIST:
        return "must be a list";
    case F_ID_OR_NAME:
        return "must be an ID (integer) or a name (string)";
    case F_LABELS:
        return "must be an object of string values";
    }
    return "has the wrong type";
}

static int check_object(json_t *obj, const struct field *spec, const char *prefix, json_t *fields);

/* Check v against type t (elem and sub for lists and objects). */
static int
check_value(json_t *v, enum ftype t, enum ftype elem, const struct field *sub, const char *name,
            json_t *fields)
{
    char path[256];
    const char *k;
    json_t *x;
    size_t i;
    int ok;

    switch (t) {
    case F_STR:
        ok = json_is_string(v);
        break;
    case F_STR_OR_NULL:
        ok = json_is_string(v) || json_is_null(v);
        break;
    case F_INT:
        ok = json_is_integer(v);
        break;
    case F_BOOL:
        ok = json_is_boolean(v);
        break;
    case F_ID_OR_NAME:
        ok = json_is_string(v) || json_is_integer(v);
        break;
    case F_LABELS:
        ok = json_is_object(v);
        json_object_foreach(v, k, x) ok = ok && json_is_string(x);
        break;
    case F_OBJ:
        if (!json_is_object(v))
            return bad(fields, name, type_message(t));
        return check_object(v, sub, name, fields);
    case F_LIST:
        if (!json_is_array(v))
            return bad(fields, name, type_message(t));
        json_array_foreach(v, i, x)
        {
            snprintf(path, sizeof(path), "%s[%zu]", name, i);
            if (check_value(x, elem, F_STR, sub, path, fields) < 0)
                return -1;
        }
        return 0;
    default:
        ok = 0;
    }
    return ok ? 0 : bad(fields, name, type_message(t));
}

static int
check_object(json_t *obj, const struct field *spec, const char *prefix, json_t *fields)
{
    const char *key;
    json_t *v;
    char path[256];

    json_object_foreach(obj, key, v)
    {
        const struct field *f = spec;
        while (f->name && strcmp(f->name, key))
            f++;
        snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", key);
        if (!f->name) {
            if (bad(fields, path, "unknown field") < 0)
                return -1;
            continue;
        }
        if (check_value(v, f->type, f->elem, f->sub, path, fields) < 0)
            return -1;
    }
    return 0;
}

/* See fake.h. */
int
hz_input_check(struct hz_req *r)
{
    const struct route *rt = NULL;
    json_t *fields = json_array(), *f;
    struct evkeyval *kv;
    char word[140], msg[512];
    size_t i, n;

    if (!fields) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return -1;
    }
    for (i = 0; i < sizeof(routes) / sizeof(routes[0]) && !rt; i++)
        if (!strcmp(routes[i].route, r->route))
            rt = &routes[i];
    if (!rt) {
        json_decref(fields);
        return 0;
    }
    TAILQ_FOREACH(kv, &r->query, next)
    {
        snprintf(word, sizeof(word), " %s ", kv->key);
        if (!strstr(rt->params, word) && bad(fields, kv->key, "unknown query parameter") < 0)
            goto oom;
    }
    if (r->body && rt->body && check_object(r->body, rt->body, "", fields) < 0)
        goto oom;
    if (!json_array_size(fields)) {
        json_decref(fields);
        return 0;
    }
    n = (size_t)snprintf(msg, sizeof(msg), "invalid input in field%s ",
                         json_array_size(fields) > 1 ? "s" : "");
    json_array_foreach(fields, i, f) if (n < sizeof(msg)) n +=
        (size_t)snprintf(msg + n, sizeof(msg) - n, "%s'%s'", i ? ", " : "",
                         json_string_value(json_object_get(f, "name")));
    hz_reply_error(r, 400, "invalid_input", msg, json_pack("{s:o}", "fields", fields));
    return -1;
oom:
    json_decref(fields);
    hz_reply_error(r, 500, "server_error", "out of memory", NULL);
    return -1;
}
