/*
 * hz_model.c: the balancer a Service asks for (desired), the balancer
 * Hetzner has (actual, parsed from the JSON of GET /load_balancers), and the
 * body that creates one.
 *
 * Every port of the Service needs an allocated nodePort: a Hetzner balancer
 * forwards to a node's IP, so a port is reachable only through its
 * nodePort. Ports without one are skipped; UDP (and SCTP) is ignored.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "hz.h"

void
hz_desired_clear(struct hz_desired *d)
{
    hz_free_each(&d->uid, &d->type, &d->location, &d->network, &d->private_ip, &d->private_subnet,
                 &d->rdns4, &d->rdns6, NULL);
    hz_free(d->services);
    hz_strv_free(d->targets, d->ntargets);
    for (size_t i = 0; i < d->nhttps; i++)
        hz_http_clear(&d->https[i]);
    hz_free(d->https);
    memset(d, 0, sizeof(*d));
}

static int
is_tcp(const char *proto)
{
    return !proto || strcasecmp(proto, "TCP") == 0;
}

/* prismlb's own: whether the service on port sends the PROXY header: as
 * prismlb.io/proxy-protocol-ports lists, else all (the per-Service
 * annotations or the default). */
static int
proxy_of(const struct hz_annot *a, int port, int all)
{
    if (!a->proxy_ports)
        return all;
    for (size_t i = 0; i < a->nproxy_ports; i++)
        if (a->proxy_ports[i] == port)
            return 1;
    return 0;
}

int
hz_desired_build(const struct hz_config *cfg, const struct hz_annot *a, const struct hz_svc *svc,
                 const char *const *target_ips, size_t ntargets, struct hz_desired *out, char *err,
                 size_t errlen)
{
    struct hz_desired d;
    const char *net;
    size_t skipped_udp = 0, skipped_nonodeport = 0;

    memset(&d, 0, sizeof(d));
    memset(out, 0, sizeof(*out));
    if (errlen)
        err[0] = '\0';

    hz_name_for_service(a->balancer, cfg->cluster_name, svc->name, svc->ns, d.name);
    if (!(d.uid = hz_strdup(svc->uid ? svc->uid : "")))
        goto nomem;
    if (!(d.type = hz_strdup(a->type ? a->type : cfg->default_balancer_type)))
        goto nomem;
    /* an annotation's zone or location, else the zone setting, else the
     * location setting */
    d.by_zone = a->network_zone || (!a->location && cfg->default_network_zone);
    if (!(d.location = hz_strdup(a->network_zone ? a->network_zone
                                 : a->location   ? a->location
                                 : d.by_zone     ? cfg->default_network_zone
                                                 : cfg->default_lb_location)))
        goto nomem;
    d.algorithm = a->algorithm >= 0 ? a->algorithm : hz_config_algorithm(cfg);
    net = a->network ? a->network : cfg->default_network;
    if (net && !(d.network = hz_strdup(net)))
        goto nomem;
    /* The private IP does nothing without a network. */
    if (net && a->private_ip && !(d.private_ip = hz_strdup(a->private_ip)))
        goto nomem;
    /* So does the subnet it comes from; the setting's is checked at start. */
    if (net && (a->private_subnet || cfg->private_subnet_ip_range)) {
        char cidr[HZ_CIDR4_MAX];
        if (a->private_subnet ? snprintf(cidr, sizeof(cidr), "%s", a->private_subnet) < 0
                              : hz_go_cidr4(cfg->private_subnet_ip_range, cidr) < 0)
            goto inval_subnet;
        if (!(d.private_subnet = hz_strdup(cidr)))
            goto nomem;
        /* Hetzner refuses an IP outside the subnet: say so first */
        if (d.private_ip && !hz_cidr4_holds(cidr, d.private_ip))
            goto inval_subnet;
    }
    if ((a->rdns4 && !(d.rdns4 = hz_strdup(a->rdns4))) ||
        (a->rdns6 && !(d.rdns6 = hz_strdup(a->rdns6))))
        goto nomem;
    d.interval = a->check_interval >= 0 ? a->check_interval : (int)cfg->default_lb_interval;
    d.timeout = a->timeout >= 0 ? a->timeout : (int)cfg->default_lb_timeout;
    d.retries = a->retries >= 0 ? a->retries : (int)cfg->default_lb_retries;
    d.proxy = a->proxy_mode >= 0 ? a->proxy_mode : cfg->default_lb_proxy_mode_enabled;
    d.ip_mode = a->ip_mode >= 0 ? a->ip_mode : cfg->default_ip_mode;
    if (a->ip_mode < 0 && a->proxy_ports) /* prismlb's own, as hz_ingress.c */
        d.ip_mode = HZ_IPMODE_PROXY;
    /* prismlb's own: delete protection only when the Service says */
    d.protect_given = a->delete_protection >= 0;
    d.protect = a->delete_protection > 0;
    d.public_iface = a->public_iface >= 0 ? a->public_iface : !cfg->disable_public_network;
    /* what asked for a private-only balancer, for the messages */
    const char *pkey = a->public_key          ? a->public_key
                       : a->public_iface >= 0 ? HZ_ANN_PUBLIC
                                              : "disable_public_network "
                                                "(HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK)";
    if ((a->use_private_ip >= 0 ? a->use_private_ip : cfg->use_private_ip) && !net) {
        if (errlen)
            snprintf(err, errlen,
                     "%s: private IP targets need a network (robotlb/lb-network or "
                     "default_network)",
                     a->use_private_ip >= 0 ? HZ_HCCM_USE_PRIVATE_IP
                                            : "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP");
        hz_desired_clear(&d);
        return -EINVAL;
    }
    if (!d.public_iface && a->private_ingress == 0) {
        if (errlen)
            snprintf(err, errlen,
                     "%s and %s: a balancer without its public interface is reached at its "
                     "private IP alone, which the status would then leave out: give one",
                     pkey, HZ_HCCM_DISABLE_PRIVATE_INGRESS);
        hz_desired_clear(&d);
        return -EINVAL;
    }
    /* one Service: one source of http settings, which every port takes */
    if (!(d.https = hz_calloc(sizeof(*d.https))) || hz_http_copy(&a->http, &d.https[0]) < 0)
        goto nomem;
    d.nhttps = 1;
    if (!(d.https[0].uid = hz_strdup(d.uid)) || hz_http_name_managed(&d.https[0], d.uid) < 0)
        goto nomem;
    if (!d.public_iface && !net) {
        if (errlen)
            snprintf(err, errlen,
                     "%s: a private-only balancer needs a network "
                     "(robotlb/lb-network or default_network)",
                     pkey);
        hz_desired_clear(&d);
        return -EINVAL;
    }

    if (svc->nports && !(d.services = hz_calloc(svc->nports * sizeof(*d.services))))
        goto nomem;
    for (size_t i = 0; i < svc->nports; i++) {
        const struct hz_port *p = &svc->ports[i];
        int dup = 0;
        if (!is_tcp(p->protocol)) {
            skipped_udp++;
            continue;
        }
        if (p->node_port <= 0 || p->node_port > 65535 || p->port <= 0 || p->port > 65535) {
            skipped_nonodeport++;
            continue;
        }
        for (size_t j = 0; j < d.nservices; j++)
            dup |= d.services[j].listen == p->port;
        if (dup)
            continue;
        d.services[d.nservices++] = (struct hz_svc_port){.listen = p->port,
                                                         .dest = p->node_port,
                                                         .proxy = proxy_of(a, p->port, d.proxy),
                                                         .protocol = d.https[0].protocol,
                                                         .http = 0};
    }
    /* prismlb's own: every port of the list must be one of the balancer's */
    for (size_t i = 0; i < a->nproxy_ports; i++) {
        int hit = 0;
        for (size_t j = 0; j < d.nservices; j++)
            hit |= d.services[j].listen == a->proxy_ports[i];
        if (!hit && d.nservices) {
            if (errlen)
                snprintf(err, errlen,
                         "%s: port %d is not a TCP port of the Service with a nodePort, so no "
                         "service of the balancer listens on it",
                         HZ_OWN_PROXY_PORTS, a->proxy_ports[i]);
            hz_desired_clear(&d);
            return -EINVAL;
        }
    }
    if (d.nservices == 0) {
        if (errlen)
            snprintf(err, errlen,
                     "no port of the service can be exposed: a Hetzner load balancer reaches "
                     "a port only through its nodePort (%zu TCP port(s) without a nodePort; "
                     "allocateLoadBalancerNodePorts: false is not supported; %zu non-TCP "
                     "port(s) ignored)",
                     skipped_nonodeport, skipped_udp);
        hz_desired_clear(&d);
        return -ENOENT;
    }

    if (ntargets && !(d.targets = hz_calloc(ntargets * sizeof(*d.targets))))
        goto nomem;
    for (size_t i = 0; i < ntargets; i++) {
        if (!(d.targets[i] = hz_strdup(target_ips[i])))
            goto nomem;
        d.ntargets++;
    }
    *out = d;
    return 0;
nomem:
    hz_desired_clear(&d);
    if (errlen)
        snprintf(err, errlen, "out of memory");
    return -ENOMEM;
inval_subnet:
    if (errlen)
        snprintf(err, errlen, "%s \"%.64s\": the private IP \"%.64s\" is not in that subnet",
                 a->private_subnet ? HZ_HCCM_PRIVATE_SUBNET
                                   : "private_subnet_ip_range "
                                     "(HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE)",
                 a->private_subnet ? a->private_subnet : cfg->private_subnet_ip_range,
                 d.private_ip ? d.private_ip : "");
    hz_desired_clear(&d);
    return -EINVAL;
}

/* ------------------------------------------------------------------ */

void
hz_actual_clear(struct hz_actual *a)
{
    hz_free_each(&a->name, &a->uid, &a->type, &a->location, &a->network_zone, &a->ipv4, &a->ipv6,
                 &a->dns_ptr4, &a->dns_ptr6, NULL);
    json_decref(a->labels);
    for (size_t i = 0; i < a->nnets; i++)
        hz_free(a->nets[i].ip);
    hz_free(a->nets);
    hz_strv_free(a->ip_targets, a->nip_targets);
    for (size_t i = 0; i < a->nservices; i++)
        hz_http_clear(&a->services[i].http);
    hz_free(a->services);
    memset(a, 0, sizeof(*a));
}

/* Copy an optional string member; 0 or -ENOMEM. */
static int
dup_str(const json_t *v, char **out)
{
    const char *s = json_string_value(v);
    *out = NULL;
    if (!s)
        return 0;
    return (*out = hz_strdup(s)) ? 0 : -ENOMEM;
}

static int
int_of(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : 0;
}

/* One item of private_net into slot (a struct hz_act_net): 1, 0 when it
 * names no network (skipped), -ENOMEM. */
static int
fill_net(const json_t *it, void *slot)
{
    struct hz_act_net *n = slot;
    json_t *nid = json_object_get(it, "network");
    if (!json_is_integer(nid))
        return 0;
    n->network = json_integer_value(nid);
    return dup_str(json_object_get(it, "ip"), &n->ip) < 0 ? -ENOMEM : 1;
}

/* One item of services into slot (a struct hz_act_service): 1 or -ENOMEM
 * (the slot's strings left unset). */
static int
fill_service(const json_t *it, void *slot)
{
    struct hz_act_service *s = slot;
    json_t *hc = json_object_get(it, "health_check");
    s->listen = int_of(it, "listen_port");
    s->dest = int_of(it, "destination_port");
    s->proxy = json_is_true(json_object_get(it, "proxyprotocol"));
    s->hc_interval = int_of(hc, "interval");
    s->hc_timeout = int_of(hc, "timeout");
    s->hc_retries = int_of(hc, "retries");
    return hz_http_parse(it, &s->http) < 0 ? -ENOMEM : 1;
}

/* The items of the JSON array v as a new C array of slots of size bytes,
 * each filled by fill (1 taken, 0 skipped, < 0 an error); *n gets how many
 * were taken, *rc 0 or the error (the slots taken so far are returned for
 * the caller to free). NULL for an empty array. */
static void *
parse_items(const json_t *v, size_t size, int (*fill)(const json_t *it, void *slot), size_t *n,
            int *rc)
{
    char *base = json_array_size(v) ? hz_calloc(json_array_size(v) * size) : NULL;
    size_t i;
    json_t *it;
    *n = 0;
    *rc = json_array_size(v) && !base ? -ENOMEM : 0;
    json_array_foreach(v, i, it)
    {
        int r = *rc ? 0 : fill(it, base + *n * size);
        if (r < 0)
            *rc = r;
        else
            *n += (size_t)r;
    }
    return base;
}

int
hz_actual_parse(const json_t *lb, struct hz_actual *out)
{
    int rc;
    struct hz_actual a;
    json_t *v, *it;
    size_t i;

    memset(&a, 0, sizeof(a));
    memset(out, 0, sizeof(*out));
    a.algorithm = -1;
    v = json_object_get(lb, "id");
    if (!json_is_integer(v) || !json_is_string(json_object_get(lb, "name")))
        return -EINVAL;
    a.id = json_integer_value(v);
    if (dup_str(json_object_get(lb, "name"), &a.name) < 0)
        goto nomem;

    v = json_object_get(lb, "labels");
    a.labels = json_is_object(v) ? json_deep_copy(v) : json_object();
    if (!a.labels)
        goto nomem;
    if (dup_str(json_object_get(a.labels, HZ_LABEL_UID), &a.uid) < 0)
        goto nomem;
    if (dup_str(json_object_get(json_object_get(lb, "load_balancer_type"), "name"), &a.type) < 0)
        goto nomem;
    if (dup_str(json_object_get(json_object_get(lb, "location"), "name"), &a.location) < 0 ||
        dup_str(json_object_get(json_object_get(lb, "location"), "network_zone"), &a.network_zone) <
            0)
        goto nomem;
    a.algorithm = hz_algorithm_from_api(
        json_string_value(json_object_get(json_object_get(lb, "algorithm"), "type")));
    a.protect_delete = json_is_true(json_object_get(json_object_get(lb, "protection"), "delete"));
    v = json_object_get(lb, "public_net");
    a.public_enabled = !json_is_false(json_object_get(v, "enabled"));
    if (dup_str(json_object_get(json_object_get(v, "ipv4"), "ip"), &a.ipv4) < 0 ||
        dup_str(json_object_get(json_object_get(v, "ipv6"), "ip"), &a.ipv6) < 0 ||
        dup_str(json_object_get(json_object_get(v, "ipv4"), "dns_ptr"), &a.dns_ptr4) < 0 ||
        dup_str(json_object_get(json_object_get(v, "ipv6"), "dns_ptr"), &a.dns_ptr6) < 0)
        goto nomem;

    a.nets =
        parse_items(json_object_get(lb, "private_net"), sizeof(*a.nets), fill_net, &a.nnets, &rc);
    if (rc < 0)
        goto nomem;

    v = json_object_get(lb, "targets");
    if (json_array_size(v) &&
        !(a.ip_targets = hz_calloc(json_array_size(v) * sizeof(*a.ip_targets))))
        goto nomem;
    json_array_foreach(v, i, it)
    {
        const char *type = json_string_value(json_object_get(it, "type"));
        const char *ip = json_string_value(json_object_get(json_object_get(it, "ip"), "ip"));
        if (type && strcmp(type, "ip") == 0 && ip) {
            if (!(a.ip_targets[a.nip_targets] = hz_strdup(ip)))
                goto nomem;
            a.nip_targets++;
        } else {
            a.nother_targets++;
        }
    }

    a.services = parse_items(json_object_get(lb, "services"), sizeof(*a.services), fill_service,
                             &a.nservices, &rc);
    if (rc < 0)
        goto nomem;
    *out = a;
    return 0;
nomem:
    hz_actual_clear(&a);
    return -ENOMEM;
}

int
hz_actual_on_network(const struct hz_actual *a, int64_t network)
{
    for (size_t i = 0; i < a->nnets; i++)
        if (a->nets[i].network == network)
            return 1;
    return 0;
}

const char *
hz_actual_hccm_uid(const struct hz_actual *a)
{
    return json_string_value(json_object_get(a->labels, HZ_LABEL_HCCM_UID));
}

/* ------------------------------------------------------------------ */

const struct hz_http *
hz_port_http(const struct hz_desired *d, const struct hz_svc_port *s)
{
    static const struct hz_http tcp; /* Hetzner's defaults: a TCP service */
    return s->http < d->nhttps ? &d->https[s->http] : &tcp;
}

json_t *
hz_service_json(const struct hz_desired *d, const struct hz_svc_port *s)
{
    json_t *o = json_pack("{s:i, s:i, s:b, s:{s:i, s:i, s:i}}", "listen_port", s->listen,
                          "destination_port", s->dest, "proxyprotocol", s->proxy, "health_check",
                          "interval", d->interval, "timeout", d->timeout, "retries", d->retries);
    if (o && hz_http_json(hz_port_http(d, s), s->protocol, s->dest, o) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *
hz_create_body(const struct hz_desired *d, int64_t network_id, int with_targets)
{
    json_t *body = json_pack(
        "{s:s, s:s, s:s, s:{s:s}, s:{s:s}, s:b}", "name", d->name, "load_balancer_type", d->type,
        d->by_zone ? "network_zone" : "location", d->location, "algorithm", "type",
        hz_algorithm_api_name(d->algorithm), "labels", HZ_LABEL_UID, d->uid, "public_interface",
        d->public_iface || network_id <= 0 || d->private_ip || d->private_subnet);
    json_t *services = json_array();
    if (!body || !services)
        goto fail;
    for (size_t i = 0; i < d->nservices; i++) {
        json_t *s = hz_service_json(d, &d->services[i]);
        if (!s || json_array_append_new(services, s) < 0)
            goto fail;
    }
    if (json_object_set_new(body, "services", services) < 0) {
        services = NULL;
        goto fail;
    }
    services = NULL;
    if (network_id > 0 && !d->private_ip && !d->private_subnet) {
        if (json_object_set_new(body, "network", json_integer(network_id)) < 0)
            goto fail;
        if (with_targets && d->ntargets) {
            json_t *targets = json_array();
            if (!targets)
                goto fail;
            if (json_object_set_new(body, "targets", targets) < 0)
                goto fail;
            for (size_t i = 0; i < d->ntargets; i++) {
                json_t *t = json_pack("{s:s, s:{s:s}}", "type", "ip", "ip", "ip", d->targets[i]);
                if (!t || json_array_append_new(targets, t) < 0)
                    goto fail;
            }
        }
    }
    return body;
fail:
    json_decref(services);
    json_decref(body);
    return NULL;
}

size_t
hz_type_max_targets(const char *type)
{
    static const struct {
        const char *name;
        size_t max;
    } types[] = {{"lb11", 25}, {"lb21", 75}, {"lb31", 150}};
    for (size_t i = 0; type && i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(type, types[i].name) == 0)
            return types[i].max;
    return 0;
}

json_t *
hz_attach_body(const struct hz_desired *d, int64_t network_id)
{
    json_t *b = json_pack("{s:I}", "network", (json_int_t)network_id);
    if (b && d->private_ip && json_object_set_new(b, "ip", json_string(d->private_ip)) < 0)
        goto fail;
    if (b && d->private_subnet &&
        json_object_set_new(b, "ip_range", json_string(d->private_subnet)) < 0)
        goto fail;
    return b;
fail:
    json_decref(b);
    return NULL;
}
