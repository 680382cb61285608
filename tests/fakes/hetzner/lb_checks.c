/* Validation of targets, services and network attachment, shared by
 * POST /load_balancers, the seed and the balancer actions. */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* http.timeout_idle in seconds: the range Hetzner takes (hccm documents its
 * annotation as "between 30s and 300s") and the value shown when none was
 * given. */
#define HZ_IDLE_MIN 30
#define HZ_IDLE_MAX 300
#define HZ_IDLE_DEFAULT 60

/* 1 if lb has a private_net entry on network id. */
static int
attached_to(const struct hz_lb *lb, long net_id)
{
    size_t i;
    json_t *pn;
    json_array_foreach(lb->private_net, i, pn) if (json_integer_value(json_object_get(
                                                       pn, "network")) == net_id) return 1;
    return 0;
}

/* 1 if the IPv4 ip lies in a subnet of the given type of an attached network. */
static int
in_attached_subnet(struct hz_fake *f, const struct hz_lb *lb, uint32_t ip, const char *type)
{
    size_t i, j;
    json_t *pn, *sn;
    json_array_foreach(lb->private_net, i, pn)
    {
        struct hz_network *n =
            hz_net_find(f, (long)json_integer_value(json_object_get(pn, "network")));
        if (!n)
            continue;
        json_array_foreach(n->subnets, j, sn)
        {
            if (strcmp(json_string_value(json_object_get(sn, "type")), type) == 0 &&
                hz_cidr4_contains(json_string_value(json_object_get(sn, "ip_range")), ip))
                return 1;
        }
    }
    return 0;
}

static int
check_ip_target(struct hz_req *r, struct hz_lb *lb, json_t *t, json_t **out)
{
    struct hz_faults *fl = &r->f->faults;
    json_t *ipo = json_object_get(t, "ip");
    const char *ip = json_string_value(json_object_get(ipo, "ip"));
    uint32_t ip4;
    size_t i;
    json_t *ex;
    if (!ip || !hz_ip_valid(ip)) {
        hz_reply_invalid(r, "ip.ip", "must be a valid IP address");
        return -1;
    }
    if (fl->refuse_ip && strcmp(fl->refuse_ip, ip) == 0) {
        hz_reply_error(r, fl->refuse_status, fl->refuse_code, "target IP refused (injected)", NULL);
        return -1;
    }
    if (json_array_size(lb->private_net) == 0) {
        hz_reply_error(r, 422, "load_balancer_not_attached_to_network",
                       "IP targets need the load balancer attached to a network", NULL);
        return -1;
    }
    if (hz_ip4_parse(ip, &ip4) < 0 || !in_attached_subnet(r->f, lb, ip4, "vswitch")) {
        hz_reply_error(r, 422, "cloud_resource_ip_not_allowed",
                       "IP is not in a vSwitch subnet of an attached network", NULL);
        return -1;
    }
    json_array_foreach(lb->targets, i, ex)
    {
        const char *eip = json_string_value(json_object_get(json_object_get(ex, "ip"), "ip"));
        if (eip && strcmp(eip, ip) == 0) {
            hz_reply_error(r, 422, "target_already_defined", "target is already defined", NULL);
            return -1;
        }
    }
    *out = json_pack("{s:s, s:{s:s}, s:b}", "type", "ip", "ip", "ip", ip, "use_private_ip", 0);
    return 0;
}

static int
check_selector_target(struct hz_req *r, struct hz_lb *lb, json_t *t, int use_private, json_t **out)
{
    const char *sel =
        json_string_value(json_object_get(json_object_get(t, "label_selector"), "selector"));
    struct hz_selector *parsed = NULL;
    char err[160];
    size_t i;
    json_t *ex;
    if (!sel) {
        hz_reply_invalid(r, "label_selector.selector", "is required");
        return -1;
    }
    int rc = hz_selector_parse(sel, &parsed, err, sizeof(err));
    hz_selector_free(parsed);
    if (rc < 0 || !*sel) {
        hz_reply_invalid(r, "label_selector.selector", rc < 0 ? err : "must not be empty");
        return -1;
    }
    if (use_private && json_array_size(lb->private_net) == 0) {
        hz_reply_error(r, 422, "load_balancer_not_attached_to_network",
                       "use_private_ip needs the load balancer attached to a network", NULL);
        return -1;
    }
    json_array_foreach(lb->targets, i, ex)
    {
        const char *es =
            json_string_value(json_object_get(json_object_get(ex, "label_selector"), "selector"));
        if (es && strcmp(es, sel) == 0) {
            hz_reply_error(r, 422, "target_already_defined", "target is already defined", NULL);
            return -1;
        }
    }
    *out = json_pack("{s:s, s:{s:s}, s:b, s:[]}", "type", "label_selector", "label_selector",
                     "selector", sel, "use_private_ip", use_private, "targets");
    return 0;
}

int
hz_check_target(struct hz_req *r, struct hz_lb *lb, json_t *t, json_t **out)
{
    const char *type;
    int present, use_private = 0, upp;
    *out = NULL;
    if (!json_is_object(t)) {
        hz_reply_invalid(r, "target", "must be an object");
        return -1;
    }
    if (hz_json_str(r, t, "type", "type", &type, &present) < 0)
        return -1;
    if (!present) {
        hz_reply_invalid(r, "type", "is required");
        return -1;
    }
    if (hz_json_bool(r, t, "use_private_ip", "use_private_ip", &use_private, &upp) < 0)
        return -1;
    int rc;
    if (strcmp(type, "ip") == 0) {
        rc = check_ip_target(r, lb, t, out);
    } else if (strcmp(type, "label_selector") == 0) {
        rc = check_selector_target(r, lb, t, use_private, out);
    } else if (strcmp(type, "server") == 0) {
        if (!json_is_integer(json_object_get(json_object_get(t, "server"), "id"))) {
            hz_reply_invalid(r, "server.id", "is required");
            return -1;
        }
        hz_reply_error(r, 404, "not_found", "server not found", NULL);
        return -1;
    } else {
        hz_reply_invalid(r, "type", "must be one of ip, server, label_selector");
        return -1;
    }
    if (rc < 0)
        return -1;
    if (!*out) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return -1;
    }
    if (json_array_size(lb->targets) >= (size_t)lb->type->max_targets) {
        json_decref(*out);
        *out = NULL;
        hz_reply_error(r, 403, "resource_limit_exceeded",
                       "the load balancer type does not allow more targets", NULL);
        return -1;
    }
    return 0;
}

/* Copy the members of src (an object, or absent) that dst already has into
 * dst, refusing a member whose JSON type differs from the one in dst.
 * 0, or -1 after replying invalid_input on field. */
static int
typed_merge(struct hz_req *r, json_t *dst, json_t *src, const char *field)
{
    const char *k;
    json_t *v;
    if (!src || json_is_null(src))
        return 0;
    if (!json_is_object(src)) {
        hz_reply_invalid(r, field, "must be an object");
        return -1;
    }
    json_object_foreach(src, k, v)
    {
        json_t *cur = json_object_get(dst, k);
        if (!cur)
            continue;
        int same =
            json_typeof(cur) == json_typeof(v) || (json_is_boolean(cur) && json_is_boolean(v));
        if (!same) {
            hz_reply_invalid(r, field, "member has the wrong type");
            return -1;
        }
        if (json_object_set(dst, k, v) < 0) {
            hz_reply_error(r, 500, "server_error", "out of memory", NULL);
            return -1;
        }
    }
    return 0;
}

static int
port_ok(long long p)
{
    return p >= 1 && p <= 65535;
}

/* 1 if s is an HTTP status code pattern: a digit 1-5, then two digits or
 * '?' ("200", "2??"). */
static int
status_pattern(const char *s)
{
    if (!s || strlen(s) != 3 || s[0] < '1' || s[0] > '5')
        return 0;
    for (int i = 1; i < 3; i++)
        if (s[i] != '?' && (s[i] < '0' || s[i] > '9'))
            return 0;
    return 1;
}

/* Values of a merged health_check.http: 0, or -1 after replying. */
static int
check_health_http(struct hz_req *r, json_t *http)
{
    const char *path = json_string_value(json_object_get(http, "path"));
    json_t *codes = json_object_get(http, "status_codes"), *c;
    size_t i;
    if (!path || path[0] != '/') {
        hz_reply_invalid(r, "health_check.http.path", "must start with '/'");
        return -1;
    }
    json_array_foreach(codes, i, c)
    {
        if (!status_pattern(json_string_value(c))) {
            hz_reply_invalid(r, "health_check.http.status_codes",
                             "must be status codes such as 200 or 2??");
            return -1;
        }
    }
    return 0;
}

/* Build the health check from a request object over base (may be NULL). */
static json_t *
health_check(struct hz_req *r, json_t *req, json_t *base, long long dest_port)
{
    const char *proto = base ? json_string_value(json_object_get(base, "protocol")) : "tcp";
    long long port = base ? json_integer_value(json_object_get(base, "port")) : dest_port;
    long long interval = base ? json_integer_value(json_object_get(base, "interval")) : 15;
    long long timeout = base ? json_integer_value(json_object_get(base, "timeout")) : 10;
    long long retries = base ? json_integer_value(json_object_get(base, "retries")) : 3;
    int present;
    if (req && !json_is_object(req)) {
        hz_reply_invalid(r, "health_check", "must be an object");
        return NULL;
    }
    if (req) {
        if (hz_json_str(r, req, "protocol", "health_check.protocol", &proto, &present) < 0 ||
            hz_json_int(r, req, "port", "health_check.port", &port, &present) < 0 ||
            hz_json_int(r, req, "interval", "health_check.interval", &interval, &present) < 0 ||
            hz_json_int(r, req, "timeout", "health_check.timeout", &timeout, &present) < 0 ||
            hz_json_int(r, req, "retries", "health_check.retries", &retries, &present) < 0)
            return NULL;
    }
    if (strcmp(proto, "tcp") != 0 && strcmp(proto, "http") != 0) {
        hz_reply_invalid(r, "health_check.protocol", "must be tcp or http");
        return NULL;
    }
    if (!port_ok(port) || interval < 3 || interval > 60 || timeout < 1 || timeout > 60 ||
        retries < 0 || retries > 5) {
        hz_reply_invalid(r, "health_check", "port, interval, timeout or retries out of range");
        return NULL;
    }
    json_t *http = json_null();
    if (strcmp(proto, "http") == 0) {
        json_t *bh = base ? json_object_get(base, "http") : NULL;
        json_t *rh = req ? json_object_get(req, "http") : NULL;
        http = json_is_object(bh)
                   ? json_deep_copy(bh)
                   : json_pack("{s:s, s:s, s:s, s:[s,s], s:b}", "domain", "", "path", "/",
                               "response", "", "status_codes", "2??", "3??", "tls", 0);
        if (http &&
            (typed_merge(r, http, rh, "health_check.http") < 0 || check_health_http(r, http) < 0)) {
            json_decref(http);
            return NULL;
        }
    }
    if (!http) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return NULL;
    }
    json_t *hc = json_pack("{s:s, s:I, s:I, s:I, s:I, s:o}", "protocol", proto, "port",
                           (json_int_t)port, "interval", (json_int_t)interval, "timeout",
                           (json_int_t)timeout, "retries", (json_int_t)retries, "http", http);
    if (!hc)
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
    return hc;
}

/* 1 if a service of lb other than self listens on port. */
static int
port_used(const struct hz_lb *lb, const json_t *self, long long port)
{
    size_t i;
    json_t *s;
    json_array_foreach(lb->services, i, s)
    {
        if (s != self && json_integer_value(json_object_get(s, "listen_port")) == port)
            return 1;
    }
    return 0;
}

/* 1 if a service of lb other than self redirects port 80 to https. */
static int
redirect_used(const struct hz_lb *lb, const json_t *self)
{
    size_t i;
    json_t *s;
    json_array_foreach(lb->services, i, s)
    {
        if (s != self && json_is_true(json_object_get(json_object_get(s, "http"), "redirect_http")))
            return 1;
    }
    return 0;
}

/* Number of distinct certificate IDs in certs and in the services of lb
 * other than self; -1 on ENOMEM. */
static long
certs_count(const struct hz_lb *lb, const json_t *self, json_t *certs)
{
    json_t *seen = json_array(), *s, *c, *list;
    size_t i, j, k;
    long n = -1;
    if (!seen)
        return -1;
    for (i = 0; i <= json_array_size(lb->services); i++) {
        s = i < json_array_size(lb->services) ? json_array_get(lb->services, i) : NULL;
        if (s && s == self)
            continue;
        list = s ? json_object_get(json_object_get(s, "http"), "certificates") : certs;
        json_array_foreach(list, j, c)
        {
            json_t *o;
            int dup = 0;
            json_array_foreach(seen, k, o) dup = dup || json_equal(o, c);
            if (!dup && json_array_append(seen, c) < 0)
                goto out;
        }
    }
    n = (long)json_array_size(seen);
out:
    json_decref(seen);
    return n;
}

/* The http object of a service on lb (self: the service it replaces, or
 * NULL) as Hetzner takes it: certificates only on https, where at least one
 * is needed and each must exist; redirect_http only on https port 443 with
 * port 80 free; cookie settings and timeout_idle in range. 0, or -1 after
 * replying. */
static int
check_http(struct hz_req *r, struct hz_lb *lb, const json_t *self, const char *proto,
           long long listen, json_t *http)
{
    json_t *certs = json_object_get(http, "certificates"), *c;
    const char *cookie = json_string_value(json_object_get(http, "cookie_name"));
    int https = strcmp(proto, "https") == 0;
    size_t i;
    if (!cookie || !*cookie || strlen(cookie) > 64 ||
        json_integer_value(json_object_get(http, "cookie_lifetime")) < 1) {
        hz_reply_invalid(r, "http", "cookie_name must be 1 to 64 characters, cookie_lifetime >= 1");
        return -1;
    }
    json_int_t idle = json_integer_value(json_object_get(http, "timeout_idle"));
    if (idle < HZ_IDLE_MIN || idle > HZ_IDLE_MAX) {
        hz_reply_invalid(r, "http.timeout_idle", "must be between 30 and 300");
        return -1;
    }
    if (https && json_array_size(certs) == 0) {
        hz_reply_invalid(r, "http", "an https service needs at least one certificate");
        return -1;
    }
    if (!https && json_array_size(certs) > 0) {
        hz_reply_invalid(r, "http", "only https services take certificates");
        return -1;
    }
    json_array_foreach(certs, i, c)
    {
        if (!hz_cert_find(r->f, (long)json_integer_value(c))) {
            char msg[96];
            snprintf(msg, sizeof(msg), "certificate %lld not found",
                     (long long)json_integer_value(c));
            hz_reply_error(r, 404, "not_found", msg, NULL);
            return -1;
        }
    }
    long nc = certs_count(lb, self, certs);
    if (nc < 0) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return -1;
    }
    if (nc > lb->type->max_certificates) {
        hz_reply_error(r, 403, "resource_limit_exceeded",
                       "the load balancer type does not allow more certificates", NULL);
        return -1;
    }
    if (json_is_true(json_object_get(http, "redirect_http"))) {
        if (!https || listen != 443) {
            hz_reply_invalid(r, "http", "redirect_http needs an https service on port 443");
            return -1;
        }
        if (port_used(lb, self, 80)) {
            hz_reply_error(r, 422, "source_port_already_used",
                           "redirect_http needs port 80, which another service uses", NULL);
            return -1;
        }
    }
    return 0;
}

int
hz_merge_service(struct hz_req *r, struct hz_lb *lb, json_t *base, json_t *req, json_t **out)
{
    const char *proto = base ? json_string_value(json_object_get(base, "protocol")) : NULL;
    long long listen = base ? json_integer_value(json_object_get(base, "listen_port")) : 0;
    long long dest = base ? json_integer_value(json_object_get(base, "destination_port")) : 0;
    int proxy = base ? json_is_true(json_object_get(base, "proxyprotocol")) : 0;
    int p_proto, p_listen, p_dest, p_proxy;
    *out = NULL;
    if (!json_is_object(req)) {
        hz_reply_invalid(r, "service", "must be an object");
        return -1;
    }
    if (hz_json_str(r, req, "protocol", "protocol", &proto, &p_proto) < 0 ||
        hz_json_int(r, req, "listen_port", "listen_port", &listen, &p_listen) < 0 ||
        hz_json_int(r, req, "destination_port", "destination_port", &dest, &p_dest) < 0 ||
        hz_json_bool(r, req, "proxyprotocol", "proxyprotocol", &proxy, &p_proxy) < 0)
        return -1;
    if (!proto || (strcmp(proto, "tcp") && strcmp(proto, "http") && strcmp(proto, "https"))) {
        hz_reply_invalid(r, "protocol", "must be tcp, http or https");
        return -1;
    }
    int web = strcmp(proto, "tcp") != 0;
    if (!base && !p_listen && web)
        listen = strcmp(proto, "https") == 0 ? 443 : 80;
    if (!base && !p_dest && web)
        dest = 80;
    if (!port_ok(listen)) {
        hz_reply_invalid(r, "listen_port", "must be between 1 and 65535");
        return -1;
    }
    if (!port_ok(dest)) {
        hz_reply_invalid(r, "destination_port", "must be between 1 and 65535");
        return -1;
    }
    if ((!base && port_used(lb, NULL, listen)) || (listen == 80 && redirect_used(lb, base))) {
        hz_reply_error(r, 422, "source_port_already_used",
                       "listen port is already used by another service", NULL);
        return -1;
    }
    json_t *rh = json_object_get(req, "http");
    if (!web && json_object_size(rh) > 0) {
        hz_reply_invalid(r, "http", "only http and https services take http settings");
        return -1;
    }
    if (!base) {
        if (json_array_size(lb->services) >= (size_t)lb->type->max_services) {
            hz_reply_error(r, 403, "resource_limit_exceeded",
                           "the load balancer type does not allow more services", NULL);
            return -1;
        }
    }
    json_t *base_hc = base ? json_object_get(base, "health_check") : NULL;
    json_t *hc = health_check(r, json_object_get(req, "health_check"), base_hc, dest);
    if (!hc)
        return -1;
    json_t *http = json_null();
    if (web) {
        json_t *bh = base ? json_object_get(base, "http") : NULL;
        http = json_is_object(bh)
                   ? json_deep_copy(bh)
                   : json_pack("{s:s, s:i, s:[], s:b, s:b, s:i}", "cookie_name", "HCLBSTICKY",
                               "cookie_lifetime", 300, "certificates", "redirect_http", 0,
                               "sticky_sessions", 0, "timeout_idle", HZ_IDLE_DEFAULT);
        if (!http) {
            json_decref(hc);
            hz_reply_error(r, 500, "server_error", "out of memory", NULL);
            return -1;
        }
        if (typed_merge(r, http, rh, "http") < 0 ||
            check_http(r, lb, base, proto, listen, http) < 0) {
            json_decref(http);
            json_decref(hc);
            return -1;
        }
    }
    *out = json_pack("{s:s, s:I, s:I, s:b, s:o, s:o}", "protocol", proto, "listen_port",
                     (json_int_t)listen, "destination_port", (json_int_t)dest, "proxyprotocol",
                     proxy, "http", http, "health_check", hc);
    if (!*out) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return -1;
    }
    return 0;
}

int
hz_check_service(struct hz_req *r, struct hz_lb *lb, json_t *req, json_t **out)
{
    return hz_merge_service(r, lb, NULL, req, out);
}

/* 1 if ip is used on network n: gateway, reserved, or a balancer's IP. */
static int
ip_taken(struct hz_fake *f, const struct hz_network *n, uint32_t ip)
{
    uint32_t net;
    int prefix;
    char buf[16];
    size_t i, j;
    json_t *v;
    if (hz_cidr4_parse(n->ip_range, &net, &prefix) == 0 && ip == net + 1)
        return 1;
    hz_ip4_format(ip, buf, sizeof(buf));
    json_array_foreach(n->reserved, i, v) if (strcmp(json_string_value(v), buf) == 0) return 1;
    for (i = 0; i < f->n_lbs; i++) {
        json_array_foreach(f->lbs[i]->private_net, j, v)
        {
            if (json_integer_value(json_object_get(v, "network")) == n->id &&
                strcmp(json_string_value(json_object_get(v, "ip")), buf) == 0)
                return 1;
        }
    }
    return 0;
}

/* 1 if subnet sn may hold a balancer's IP: a cloud subnet of zone and,
 * when prefix >= 0, the subnet net/prefix names (*snet, *sprefix: its range). */
static int
subnet_fits(json_t *sn, const char *zone, uint32_t net, int prefix, uint32_t *snet, int *sprefix)
{
    if (strcmp(json_string_value(json_object_get(sn, "type")), "cloud") != 0 ||
        strcmp(json_string_value(json_object_get(sn, "network_zone")), zone) != 0 ||
        hz_cidr4_parse(json_string_value(json_object_get(sn, "ip_range")), snet, sprefix) < 0)
        return 0;
    if (prefix < 0)
        return 1;
    uint32_t mask = prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
    return *sprefix == prefix && (*snet & mask) == (net & mask);
}

int
hz_attach_network(struct hz_req *r, struct hz_lb *lb, long net_id, const char *ip,
                  const char *ip_range, char *out_ip, size_t len)
{
    struct hz_network *n = hz_net_find(r->f, net_id);
    const char *zone = lb->location->network_zone;
    size_t i;
    json_t *sn;
    uint32_t rnet = 0, snet;
    int rprefix = -1, sprefix;
    if (!n) {
        hz_reply_error(r, 404, "not_found", "network not found", NULL);
        return -1;
    }
    if (attached_to(lb, net_id)) {
        hz_reply_error(r, 422, "load_balancer_already_attached",
                       "load balancer is already attached to this network", NULL);
        return -1;
    }
    if (ip_range) {
        if (hz_cidr4_parse(ip_range, &rnet, &rprefix) < 0) {
            hz_reply_invalid(r, "ip_range", "must be an IPv4 CIDR");
            return -1;
        }
        int found = 0;
        json_array_foreach(n->subnets, i, sn) found |=
            subnet_fits(sn, zone, rnet, rprefix, &snet, &sprefix);
        if (!found) {
            hz_reply_error(r, 422, "no_subnet_available",
                           "ip_range is not a cloud subnet of the network in the network zone of "
                           "the load balancer",
                           NULL);
            return -1;
        }
    }
    if (ip) {
        uint32_t a;
        if (hz_ip4_parse(ip, &a) < 0 || !hz_cidr4_contains(n->ip_range, a)) {
            hz_reply_invalid(r, "ip", "must be an IPv4 address inside the network");
            return -1;
        }
        if (ip_range && !hz_cidr4_contains(ip_range, a)) {
            hz_reply_invalid(r, "ip", "must be an IPv4 address inside ip_range");
            return -1;
        }
        json_array_foreach(n->subnets, i, sn)
        {
            if (subnet_fits(sn, zone, rnet, rprefix, &snet, &sprefix) &&
                hz_cidr4_contains(json_string_value(json_object_get(sn, "ip_range")), a) &&
                !ip_taken(r->f, n, a)) {
                snprintf(out_ip, len, "%s", ip);
                return 0;
            }
        }
        hz_reply_error(r, 422, "ip_not_available", "the requested IP is not available", NULL);
        return -1;
    }
    json_array_foreach(n->subnets, i, sn)
    {
        if (!subnet_fits(sn, zone, rnet, rprefix, &snet, &sprefix) || sprefix > 30)
            continue;
        uint64_t size = 1ull << (32 - sprefix);
        for (uint64_t k = 2; k + 1 < size; k++) {
            if (!ip_taken(r->f, n, snet + (uint32_t)k)) {
                hz_ip4_format(snet + (uint32_t)k, out_ip, len);
                return 0;
            }
        }
    }
    hz_reply_error(r, 422, "no_subnet_available",
                   "no cloud subnet with a free IP in the network zone of the load balancer", NULL);
    return -1;
}
