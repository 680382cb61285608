/* Per-kind defaulting and validation, following what the real apiserver
 * fills in and rejects for the kinds the fake serves. */
#include "fk.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODEPORT_MIN FK_NODEPORT_MIN
#define NODEPORT_MAX FK_NODEPORT_MAX

/* The Status for an allocation failure while defaulting (new). */
static json_t *
oom(void)
{
    return fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
}

static int
dns_label(const char *s, size_t len, int alpha_first)
{
    if (len == 0 || len > 63)
        return 0;
    if (alpha_first ? !islower((unsigned char)s[0]) : !isalnum((unsigned char)s[0]))
        return 0;
    if (!(islower((unsigned char)s[len - 1]) || isdigit((unsigned char)s[len - 1])))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
            return 0;
    return 1;
}

/* See fk.h. */
const char *
fk_validate_name(const struct fk_kind *k, const char *name)
{
    size_t len = strlen(name);
    if (k->flags & FK_DNS_LABEL_NAME) {
        int svc = !strcmp(k->resource, "services");
        if (dns_label(name, len, svc))
            return NULL;
        return svc ? "a DNS-1035 label must consist of lower case alphanumeric characters or "
                     "'-', start with an alphabetic character, and end with an alphanumeric "
                     "character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
                     "'[a-z]([-a-z0-9]*[a-z0-9])?')"
                   : "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                     "characters or '-', and must start and end with an alphanumeric character "
                     "(e.g. 'my-name',  or '123-abc', regex used for validation is "
                     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    }
    if (len > 0 && len <= 253) {
        const char *p = name;
        int ok = 1;
        while (ok) {
            const char *dot = strchr(p, '.');
            size_t l = dot ? (size_t)(dot - p) : strlen(p);
            ok = dns_label(p, l, 0);
            if (!dot)
                break;
            p = dot + 1;
        }
        if (ok)
            return NULL;
    }
    return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
           "'-' or '.', and must start and end with an alphanumeric character (e.g. "
           "'example.com', regex used for validation is "
           "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
}

static const char *
name_of(json_t *obj)
{
    return fk_json_path_str(obj, "metadata.name");
}

static int
str_in(const char *s, const char *const *set)
{
    for (size_t i = 0; set[i]; i++)
        if (!strcmp(s, set[i]))
            return 1;
    return 0;
}

static int
set_str_default(json_t *o, const char *key, const char *val)
{
    if (json_is_string(json_object_get(o, key)))
        return 0;
    return json_object_set_new(o, key, json_string(val));
}

static int
alloc_node_port(unsigned char *used)
{
    /* Start at a random offset as the real allocator does; stay deterministic
     * enough to be debuggable by scanning linearly from there. */
    int span = NODEPORT_MAX - NODEPORT_MIN + 1;
    int start = rand() % span;
    for (int i = 0; i < span; i++) {
        int p = (start + i) % span;
        if (!used[p]) {
            used[p] = 1;
            return NODEPORT_MIN + p;
        }
    }
    return -1;
}

static int
is_external(const char *type)
{
    return !strcmp(type, "NodePort") || !strcmp(type, "LoadBalancer");
}

/* Fields the old type allocated and the user left untouched go away when
 * the type changes (the apiserver's dropTypeDependentFields). */
static void
drop_type_dependent(json_t *spec, json_t *ospec, const char *type)
{
    const char *otype = json_string_value(json_object_get(ospec, "type")) ?: "ClusterIP";
    size_t i;
    json_t *p;
    if (!strcmp(otype, type))
        return;
    if (!is_external(type)) {
        json_array_foreach(json_object_get(spec, "ports"), i, p)
        {
            json_t *np = json_object_get(p, "nodePort");
            json_t *op = json_array_get(json_object_get(ospec, "ports"), i);
            if (np && json_equal(np, json_object_get(op, "nodePort")))
                json_object_del(p, "nodePort");
        }
        if (json_equal(json_object_get(spec, "externalTrafficPolicy"),
                       json_object_get(ospec, "externalTrafficPolicy")))
            json_object_del(spec, "externalTrafficPolicy");
    }
    if (strcmp(type, "LoadBalancer")) {
        static const char *const lb_only[] = {"allocateLoadBalancerNodePorts", "loadBalancerClass",
                                              "healthCheckNodePort", NULL};
        for (i = 0; lb_only[i]; i++)
            if (json_equal(json_object_get(spec, lb_only[i]), json_object_get(ospec, lb_only[i])))
                json_object_del(spec, lb_only[i]);
    }
}

static json_t *
service_defaults(struct fk_cluster *cl, const struct fk_kind *k, json_t *obj, json_t *old)
{
    static const char *const types[] = {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName",
                                        NULL};
    static const char *const protos[] = {"TCP", "UDP", "SCTP", NULL};
    static const char *const policies[] = {"Cluster", "Local", NULL};
    const char *name = name_of(obj);
    const char *ns = fk_json_path_str(obj, "metadata.namespace") ?: "";
    json_t *spec = fk_json_path_obj(obj, "spec");
    json_t *ospec = old ? json_object_get(old, "spec") : NULL;
    json_t *status, *ports, *p, *lb, *ing;
    const char *type, *etp;
    unsigned char used[NODEPORT_MAX - NODEPORT_MIN + 1];
    char field[128], msg[512];
    size_t i;
    int headless, want_np, lb_alloc = 1;

    if (!spec)
        return oom();
    if (set_str_default(spec, "type", "ClusterIP") < 0)
        return oom();
    type = json_string_value(json_object_get(spec, "type"));
    if (!str_in(type, types)) {
        snprintf(msg, sizeof(msg),
                 "Unsupported value: \"%s\": supported values: \"ClusterIP\", \"ExternalName\", "
                 "\"LoadBalancer\", \"NodePort\"",
                 type);
        return fk_status_invalid(k, name, "spec.type", "FieldValueNotSupported", msg);
    }
    if (ospec)
        drop_type_dependent(spec, ospec, type);
    if (set_str_default(spec, "sessionAffinity", "None") < 0)
        return oom();
    if (!strcmp(type, "ExternalName")) {
        if (!json_is_string(json_object_get(spec, "externalName")))
            return fk_status_invalid(k, name, "spec.externalName", "FieldValueRequired",
                                     "Required value");
    } else {
        json_t *cip = json_object_get(spec, "clusterIP");
        json_t *ocip = ospec ? json_object_get(ospec, "clusterIP") : NULL;
        if (json_is_string(ocip) && json_string_length(ocip) > 0) {
            if (json_is_string(cip) && json_string_length(cip) > 0 && !json_equal(cip, ocip))
                return fk_status_invalid(k, name, "spec.clusterIPs[0]", "FieldValueInvalid",
                                         "Invalid value: field is immutable");
            if (json_object_set(spec, "clusterIP", ocip) < 0)
                return oom();
        } else if (!json_is_string(cip) || json_string_length(cip) == 0) {
            json_t *ip = fk_alloc_cluster_ip(cl);
            if (!ip || json_object_set_new(spec, "clusterIP", ip) < 0)
                return oom();
        }
        cip = json_object_get(spec, "clusterIP");
        if (!json_is_array(json_object_get(spec, "clusterIPs")) &&
            json_object_set_new(spec, "clusterIPs", json_pack("[O]", cip)) < 0)
            return oom();
        if (!json_is_array(json_object_get(spec, "ipFamilies")) &&
            json_object_set_new(spec, "ipFamilies", json_pack("[s]", "IPv4")) < 0)
            return oom();
        if (set_str_default(spec, "ipFamilyPolicy", "SingleStack") < 0 ||
            set_str_default(spec, "internalTrafficPolicy", "Cluster") < 0)
            return oom();
    }
    headless = !strcmp(json_string_value(json_object_get(spec, "clusterIP")) ?: "", "None");

    ports = json_object_get(spec, "ports");
    if (strcmp(type, "ExternalName") && !headless && json_array_size(ports) == 0)
        return fk_status_invalid(k, name, "spec.ports", "FieldValueRequired", "Required value");
    if (ports && !json_is_array(ports))
        return fk_status_invalid(k, name, "spec.ports", "FieldValueInvalid",
                                 "Invalid value: must be a list");

    etp = json_string_value(json_object_get(spec, "externalTrafficPolicy"));
    if (is_external(type)) {
        if (!etp) {
            if (json_object_set_new(spec, "externalTrafficPolicy", json_string("Cluster")) < 0)
                return oom();
            etp = "Cluster";
        } else if (!str_in(etp, policies)) {
            snprintf(msg, sizeof(msg),
                     "Unsupported value: \"%s\": supported values: \"Cluster\", \"Local\"", etp);
            return fk_status_invalid(k, name, "spec.externalTrafficPolicy",
                                     "FieldValueNotSupported", msg);
        }
    } else if (etp) {
        snprintf(msg, sizeof(msg),
                 "Invalid value: \"%s\": may only be set for externally-accessible services", etp);
        return fk_status_invalid(k, name, "spec.externalTrafficPolicy", "FieldValueInvalid", msg);
    }
    if (!strcmp(type, "LoadBalancer")) {
        json_t *a = json_object_get(spec, "allocateLoadBalancerNodePorts");
        if (!a && json_object_set_new(spec, "allocateLoadBalancerNodePorts", json_true()) < 0)
            return oom();
        lb_alloc = !json_is_false(a);
    } else if (json_object_get(spec, "allocateLoadBalancerNodePorts")) {
        return fk_status_invalid(k, name, "spec.allocateLoadBalancerNodePorts",
                                 "FieldValueForbidden",
                                 "Forbidden: may only be used when `type` is 'LoadBalancer'");
    }
    want_np = !strcmp(type, "NodePort") || (!strcmp(type, "LoadBalancer") && lb_alloc);

    fk_alloc_node_ports(cl, name ? fk_store_get(cl, k, ns, name) : NULL, used);
    /* Ports: protocol, targetPort, names, duplicates, node ports. */
    json_array_foreach(ports, i, p)
    {
        json_t *port = json_object_get(p, "port"), *np;
        const char *proto;
        if (!json_is_object(p)) {
            snprintf(field, sizeof(field), "spec.ports[%zu]", i);
            return fk_status_invalid(k, name, field, "FieldValueInvalid",
                                     "Invalid value: must be an object");
        }
        snprintf(field, sizeof(field), "spec.ports[%zu].port", i);
        if (!json_is_integer(port))
            return fk_status_invalid(k, name, field, "FieldValueRequired", "Required value");
        if (json_integer_value(port) < 1 || json_integer_value(port) > 65535) {
            snprintf(msg, sizeof(msg),
                     "Invalid value: %lld: must be between 1 and 65535, inclusive",
                     (long long)json_integer_value(port));
            return fk_status_invalid(k, name, field, "FieldValueInvalid", msg);
        }
        if (set_str_default(p, "protocol", "TCP") < 0)
            return oom();
        proto = json_string_value(json_object_get(p, "protocol"));
        if (!str_in(proto, protos)) {
            snprintf(field, sizeof(field), "spec.ports[%zu].protocol", i);
            snprintf(msg, sizeof(msg),
                     "Unsupported value: \"%s\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                     proto);
            return fk_status_invalid(k, name, field, "FieldValueNotSupported", msg);
        }
        if (!json_object_get(p, "targetPort") && json_object_set(p, "targetPort", port) < 0)
            return oom();
        if (json_array_size(ports) > 1 && !json_string_length(json_object_get(p, "name"))) {
            snprintf(field, sizeof(field), "spec.ports[%zu].name", i);
            return fk_status_invalid(k, name, field, "FieldValueRequired", "Required value");
        }
        for (size_t j = 0; j < i; j++) {
            json_t *q = json_array_get(ports, j);
            if (json_equal(json_object_get(q, "port"), port) &&
                !strcmp(json_string_value(json_object_get(q, "protocol")) ?: "", proto)) {
                snprintf(field, sizeof(field), "spec.ports[%zu]", i);
                snprintf(msg, sizeof(msg), "Duplicate value: {\"protocol\":\"%s\",\"port\":%lld}",
                         proto, (long long)json_integer_value(port));
                return fk_status_invalid(k, name, field, "FieldValueDuplicate", msg);
            }
            if (json_string_length(json_object_get(p, "name")) &&
                json_equal(json_object_get(q, "name"), json_object_get(p, "name"))) {
                snprintf(field, sizeof(field), "spec.ports[%zu].name", i);
                snprintf(msg, sizeof(msg), "Duplicate value: \"%s\"",
                         json_string_value(json_object_get(p, "name")));
                return fk_status_invalid(k, name, field, "FieldValueDuplicate", msg);
            }
        }
        np = json_object_get(p, "nodePort");
        snprintf(field, sizeof(field), "spec.ports[%zu].nodePort", i);
        /* The apiserver allows a nodePort on NodePort and LoadBalancer
         * Services; with allocateLoadBalancerNodePorts: false it allocates
         * none, but one the user sets is kept (and must be free). */
        if (np && !is_external(type)) {
            snprintf(msg, sizeof(msg), "Forbidden: may not be used when `type` is '%s'", type);
            return fk_status_invalid(k, name, field, "FieldValueForbidden", msg);
        }
        if (!want_np && !np)
            continue;
        if (!np && ospec) {
            /* Keep the port this service already holds for the same port. */
            size_t j;
            json_t *op;
            json_array_foreach(json_object_get(ospec, "ports"), j, op)
            {
                if (json_equal(json_object_get(op, "port"), port) &&
                    !strcmp(json_string_value(json_object_get(op, "protocol")) ?: "TCP", proto) &&
                    json_is_integer(json_object_get(op, "nodePort"))) {
                    np = json_object_get(op, "nodePort");
                    if (json_object_set(p, "nodePort", np) < 0)
                        return oom();
                    break;
                }
            }
        }
        if (np) {
            json_int_t v = json_integer_value(np);
            if (!json_is_integer(np) || v < NODEPORT_MIN || v > NODEPORT_MAX) {
                snprintf(msg, sizeof(msg),
                         "Invalid value: %lld: provided port is not in the valid range. The range "
                         "of valid ports is %d-%d",
                         (long long)v, NODEPORT_MIN, NODEPORT_MAX);
                return fk_status_invalid(k, name, field, "FieldValueInvalid", msg);
            }
            if (used[v - NODEPORT_MIN]) {
                snprintf(msg, sizeof(msg),
                         "Invalid value: %lld: provided port is already allocated", (long long)v);
                return fk_status_invalid(k, name, field, "FieldValueInvalid", msg);
            }
            used[v - NODEPORT_MIN] = 1;
        } else {
            int v = alloc_node_port(used);
            if (v < 0)
                return fk_status_new(500, "InternalError", "range is full: no free node port", name,
                                     k, NULL);
            if (json_object_set_new(p, "nodePort", json_integer(v)) < 0)
                return oom();
        }
    }
    /* Health check node port for LoadBalancer + Local. */
    {
        json_t *hc = json_object_get(spec, "healthCheckNodePort");
        int need = !strcmp(type, "LoadBalancer") && etp && !strcmp(etp, "Local");
        if (hc && !need)
            return fk_status_invalid(k, name, "spec.healthCheckNodePort", "FieldValueInvalid",
                                     "Invalid value: may only be set when `type` is "
                                     "'LoadBalancer' and `externalTrafficPolicy` is 'Local'");
        if (need && !hc) {
            json_t *ohc = ospec ? json_object_get(ospec, "healthCheckNodePort") : NULL;
            if (json_is_integer(ohc)) {
                if (json_object_set(spec, "healthCheckNodePort", ohc) < 0)
                    return oom();
            } else {
                int v = alloc_node_port(used);
                if (v < 0 || json_object_set_new(spec, "healthCheckNodePort", json_integer(v)) < 0)
                    return oom();
            }
        }
    }
    /* Status: always present; ingress ipMode defaults to VIP when an IP is set. */
    status = fk_json_path_obj(obj, "status");
    lb = status ? fk_json_path_obj(status, "loadBalancer") : NULL;
    if (!lb)
        return oom();
    json_array_foreach(json_object_get(lb, "ingress"), i, ing)
    {
        if (!strcmp(type, "LoadBalancer") && json_is_string(json_object_get(ing, "ip")) &&
            !json_object_get(ing, "ipMode") &&
            json_object_set_new(ing, "ipMode", json_string("VIP")) < 0)
            return oom();
        if (json_object_get(ing, "ipMode") && !json_is_string(json_object_get(ing, "ip"))) {
            snprintf(field, sizeof(field), "status.loadBalancer.ingress[%zu].ipMode", i);
            return fk_status_invalid(k, name, field, "FieldValueForbidden",
                                     "Forbidden: may not be specified when `ip` is not set");
        }
    }
    return NULL;
}

static json_t *
endpointslice_defaults(const struct fk_kind *k, json_t *obj, json_t *old)
{
    static const char *const types[] = {"IPv4", "IPv6", "FQDN", NULL};
    const char *name = name_of(obj);
    const char *at = json_string_value(json_object_get(obj, "addressType"));
    json_t *eps = json_object_get(obj, "endpoints"), *e, *p;
    char field[128], msg[512];
    size_t i, j;

    if (!at)
        return fk_status_invalid(k, name, "addressType", "FieldValueRequired", "Required value");
    if (!str_in(at, types)) {
        snprintf(msg, sizeof(msg),
                 "Unsupported value: \"%s\": supported values: \"FQDN\", \"IPv4\", \"IPv6\"", at);
        return fk_status_invalid(k, name, "addressType", "FieldValueNotSupported", msg);
    }
    if (old &&
        !json_equal(json_object_get(old, "addressType"), json_object_get(obj, "addressType")))
        return fk_status_invalid(k, name, "addressType", "FieldValueInvalid",
                                 "Invalid value: field is immutable");
    if (!eps && json_object_set_new(obj, "endpoints", json_null()) < 0)
        return oom();
    json_array_foreach(eps, i, e)
    {
        json_t *addrs = json_object_get(e, "addresses"), *a;
        snprintf(field, sizeof(field), "endpoints[%zu].addresses", i);
        if (json_array_size(addrs) == 0)
            return fk_status_invalid(k, name, field, "FieldValueRequired",
                                     "Required value: must contain at least 1 address");
        if (json_array_size(addrs) > 100)
            return fk_status_invalid(k, name, field, "FieldValueTooMany",
                                     "Too many: must have at most 100 items");
        json_array_foreach(addrs, j, a)
        {
            const char *s = json_string_value(a);
            unsigned char buf[16];
            int ok = s != NULL;
            if (ok && !strcmp(at, "IPv4"))
                ok = inet_pton(AF_INET, s, buf) == 1;
            else if (ok && !strcmp(at, "IPv6"))
                ok = inet_pton(AF_INET6, s, buf) == 1;
            if (!ok) {
                snprintf(field, sizeof(field), "endpoints[%zu].addresses[%zu]", i, j);
                snprintf(msg, sizeof(msg), "Invalid value: \"%s\": must be a valid %s address",
                         s ?: "", at);
                return fk_status_invalid(k, name, field, "FieldValueInvalid", msg);
            }
        }
        if (!json_object_get(e, "conditions") &&
            json_object_set_new(e, "conditions", json_object()) < 0)
            return oom();
    }
    json_array_foreach(json_object_get(obj, "ports"), i, p)
    {
        json_int_t port;
        if (set_str_default(p, "protocol", "TCP") < 0 || set_str_default(p, "name", "") < 0)
            return oom();
        port = json_integer_value(json_object_get(p, "port"));
        if (json_object_get(p, "port") && (port < 0 || port > 65535)) {
            snprintf(field, sizeof(field), "ports[%zu].port", i);
            return fk_status_invalid(k, name, field, "FieldValueInvalid",
                                     "Invalid value: must be between 0 and 65535, inclusive");
        }
    }
    return NULL;
}

/* metadata.labels, annotations (keys and total size) and finalizers, as
 * ValidateObjectMeta checks them. NULL or a new 422 Status. */
static json_t *
validate_meta(const struct fk_kind *k, json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata"), *v;
    const char *name = name_of(obj), *key;
    char msg[600];
    size_t total = 0, i;

    json_object_foreach(json_object_get(meta, "labels"), key, v)
    {
        const char *val = json_string_value(v);
        if (!fk_label_key_valid(key, strlen(key))) {
            snprintf(msg, sizeof(msg),
                     "Invalid value: \"%.200s\": name part must consist of "
                     "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                     "alphanumeric character",
                     key);
            return fk_status_invalid(k, name, "metadata.labels", "FieldValueInvalid", msg);
        }
        if (!val || !fk_label_value_valid(val, strlen(val))) {
            snprintf(msg, sizeof(msg),
                     "Invalid value: \"%.200s\": a valid label must be an "
                     "empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                     "must start and end with an alphanumeric character",
                     val ? val : "");
            return fk_status_invalid(k, name, "metadata.labels", "FieldValueInvalid", msg);
        }
    }
    if (json_object_get(meta, "labels") && !json_is_object(json_object_get(meta, "labels")))
        return fk_status_invalid(k, name, "metadata.labels", "FieldValueInvalid",
                                 "Invalid value: must be a map of strings");
    json_object_foreach(json_object_get(meta, "annotations"), key, v)
    {
        if (!json_is_string(v))
            return fk_status_invalid(k, name, "metadata.annotations", "FieldValueInvalid",
                                     "Invalid value: values must be strings");
        if (!fk_label_key_valid(key, strlen(key)) || strlen(key) > 317) {
            snprintf(msg, sizeof(msg),
                     "Invalid value: \"%.200s\": name part must consist of "
                     "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                     "alphanumeric character",
                     key);
            return fk_status_invalid(k, name, "metadata.annotations", "FieldValueInvalid", msg);
        }
        total += strlen(key) + json_string_length(v);
    }
    if (total > 256 * 1024)
        return fk_status_invalid(k, name, "metadata.annotations", "FieldValueTooLong",
                                 "Too long: must have at most 262144 bytes");
    json_array_foreach(json_object_get(meta, "finalizers"), i, v)
    {
        const char *f = json_string_value(v);
        if (!f || !fk_label_key_valid(f, strlen(f))) {
            snprintf(msg, sizeof(msg),
                     "Invalid value: \"%.200s\": name part must consist of "
                     "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                     "alphanumeric character",
                     f ? f : "");
            return fk_status_invalid(k, name, "metadata.finalizers", "FieldValueInvalid", msg);
        }
    }
    return NULL;
}

/* See fk.h. */
json_t *
fk_default_and_validate(struct fk_cluster *cl, const struct fk_kind *k, json_t *obj, json_t *old)
{
    json_t *err = validate_meta(k, obj);
    if (err)
        return err;
    if (!strcmp(k->resource, "services") && !k->group[0])
        return service_defaults(cl, k, obj, old);
    if (!strcmp(k->resource, "endpointslices"))
        return endpointslice_defaults(k, obj, old);
    if (!strcmp(k->resource, "namespaces")) {
        json_t *labels = fk_json_path_obj(obj, "metadata.labels");
        json_t *spec = fk_json_path_obj(obj, "spec");
        json_t *status = fk_json_path_obj(obj, "status");
        if (!labels || !spec || !status)
            return oom();
        if (json_object_set_new(labels, "kubernetes.io/metadata.name", json_string(name_of(obj))) <
            0)
            return oom();
        if (!json_object_get(spec, "finalizers") &&
            json_object_set_new(spec, "finalizers", json_pack("[s]", "kubernetes")) < 0)
            return oom();
        if (set_str_default(status, "phase", "Active") < 0)
            return oom();
        return NULL;
    }
    if (!strcmp(k->resource, "nodes")) {
        if (!fk_json_path_obj(obj, "spec") || !fk_json_path_obj(obj, "status"))
            return oom();
        return NULL;
    }
    return NULL;
}
