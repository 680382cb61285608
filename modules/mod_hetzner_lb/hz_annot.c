/*
 * hz_annot.c: the robotlb/ annotations of a Service (the spec's example
 * Service lists them all), and those of hcloud-cloud-controller-manager's
 * load-balancer.hetzner.cloud/ family read so far (the README's hccm table
 * says which), parsed and
 * validated as a whole: one bad value rejects the set, so the caller keeps
 * the balancer as it was and reports the message in a warning Event.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hz.h"

const char *
hz_algorithm_api_name(int alg)
{
    return alg == HZ_ALG_ROUND_ROBIN ? "round_robin" : "least_connections";
}

int
hz_algorithm_from_api(const char *s)
{
    if (!s)
        return -1;
    if (strcmp(s, "round_robin") == 0)
        return HZ_ALG_ROUND_ROBIN;
    if (strcmp(s, "least_connections") == 0)
        return HZ_ALG_LEAST_CONNECTIONS;
    return -1;
}

void
hz_annot_clear(struct hz_annot *a)
{
    hz_free_each(&a->balancer, &a->network, &a->private_ip, &a->private_subnet, &a->node_selector,
                 &a->location, &a->network_zone, &a->type, &a->hostname, &a->rdns4, &a->rdns6,
                 NULL);
    hz_http_clear(&a->http);
    hz_free(a->proxy_ports); /* prismlb's own */
    hz_free(a->port_protos);
    memset(a, 0, sizeof(*a));
    a->check_interval = a->timeout = a->retries = -1;
    a->proxy_mode = a->algorithm = a->ip_mode = a->public_iface = a->ipv6_disabled = -1;
    a->private_ingress = a->use_private_ip = -1;
    a->delete_protection = -1; /* prismlb's own */
}

/* Error text accumulated as "key: why (value "v"); key2: ...". */
struct errbuf {
    char *p;
    size_t len, n;
    int count;
};

static void PLB_PRINTF(3, 4) bad(struct errbuf *e, const char *key, const char *fmt, ...)
{
    va_list ap;
    if (e->n < e->len) {
        int w = snprintf(e->p + e->n, e->len - e->n, "%s%s: ", e->count ? "; " : "", key);
        if (w > 0)
            e->n += (size_t)w;
    }
    if (e->n < e->len) {
        va_start(ap, fmt);
        int w = vsnprintf(e->p + e->n, e->len - e->n, fmt, ap);
        va_end(ap);
        if (w > 0)
            e->n += (size_t)w;
    }
    if (e->n > e->len)
        e->n = e->len;
    e->count++;
}

/* hz_http_annot's report of one bad value (e: the struct errbuf). */
static void
bad_http(void *e, const char *key, const char *msg)
{
    bad(e, key, "%s", msg);
}

/* An integer annotation within [lo, hi]. */
static void
get_int(hz_annot_get_fn get, void *arg, const char *key, int lo, int hi, int *out, struct errbuf *e)
{
    const char *v = get(arg, key);
    char *end;
    if (!v)
        return;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno || !isdigit((unsigned char)v[0])) {
        bad(e, key, "\"%.64s\" is not a whole number", v);
        return;
    }
    if (n < lo || n > hi) {
        bad(e, key, "%ld is out of range (%d to %d)", n, lo, hi);
        return;
    }
    *out = (int)n;
}

/* A boolean annotation: exactly "true" or "false". */
static void
get_bool(hz_annot_get_fn get, void *arg, const char *key, int *out, struct errbuf *e)
{
    const char *v = get(arg, key);
    if (!v)
        return;
    if (strcmp(v, "true") == 0)
        *out = 1;
    else if (strcmp(v, "false") == 0)
        *out = 0;
    else
        bad(e, key, "\"%.64s\" is neither true nor false", v);
}

/* A string annotation: non-empty, without blanks. */
static int
get_word(hz_annot_get_fn get, void *arg, const char *key, char **out, struct errbuf *e)
{
    const char *v = get(arg, key);
    if (!v)
        return 0;
    if (!*v) {
        bad(e, key, "must not be empty");
        return 0;
    }
    for (const char *p = v; *p; p++) {
        if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p)) {
            bad(e, key, "\"%.64s\" must not contain blanks", v);
            return 0;
        }
    }
    if (!(*out = hz_strdup(v)))
        return -ENOMEM;
    return 0;
}

/* One thing named by both families: *val (robotlb's, already read, owned)
 * takes hccm's word hv (read here) when robotlb's is absent; the same value
 * twice is fine; two different ones are bad, named together. 0 or
 * -ENOMEM. */
static int
merge_word(hz_annot_get_fn get, void *arg, const char *rkey, const char *hkey, char **val,
           struct errbuf *e)
{
    char *hv = NULL;
    int rc = get_word(get, arg, hkey, &hv, e);
    if (rc < 0 || !hv)
        return rc;
    if (*val && strcmp(*val, hv) != 0)
        bad(e, rkey, "\"%.64s\" and %s \"%.64s\" disagree (give one, or both alike)", *val, hkey,
            hv);
    if (!*val) {
        *val = hv;
        hv = NULL;
    }
    hz_free(hv);
    return 0;
}

/* NULL when v is a DNS name as the API server takes a status hostname
 * (lowercase letters, digits, '-' and '.', labels beginning and ending
 * with a letter or digit, at most 253 characters; not an IP address), the
 * rule for hccm's reverse DNS names too; else why not (static). */
static const char *
status_hostname_bad(const char *v)
{
    size_t n = strlen(v), label = 0;
    unsigned char b[sizeof(struct in6_addr)];
    if (n == 0 || n > 253)
        return "must be 1 to 253 characters";
    if (inet_pton(AF_INET, v, b) == 1 || inet_pton(AF_INET6, v, b) == 1)
        return "is an IP address, not a hostname";
    for (size_t i = 0; i <= n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '.' || c == '\0') {
            if (label == 0 || v[i - 1] == '-')
                return "is not a DNS name (lowercase letters, digits, '-' and '.')";
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || isdigit(c) || (c == '-' && label > 0)) {
            label++;
        } else {
            return "is not a DNS name (lowercase letters, digits, '-' and '.')";
        }
    }
    return NULL;
}

/* A DNS name annotation key into *out (new). 0 or -ENOMEM. */
static int
dns_name(hz_annot_get_fn get, void *arg, const char *key, char **out, struct errbuf *e)
{
    const char *v = get(arg, key), *why;
    if (!v)
        return 0;
    if ((why = status_hostname_bad(v))) {
        bad(e, key, "\"%.64s\" %s", v, why);
        return 0;
    }
    return (*out = hz_strdup(v)) ? 0 : -ENOMEM;
}

/* hccm's Go boolean key into *out (upside down with flip); a bad value is
 * named. */
static void
go_bool(hz_annot_get_fn get, void *arg, const char *key, int flip, int *out, struct errbuf *e)
{
    const char *v = get(arg, key);
    int b;
    if (!v)
        return;
    if ((b = hz_go_bool(v)) < 0)
        bad(e, key, "\"%.64s\" is neither true nor false", v);
    else
        *out = flip ? !b : b;
}

/* hccm's network/status annotations: hostname; disable-public-network and
 * private-ipv4 beside robotlb's lb-public-interface and lb-private-ip
 * (both alike, or both named); private-subnet-ip-range; disable-private-
 * ingress, use-private-ip; ipv4-rdns, ipv6-rdns. 0 or -ENOMEM. */
static int
net_status(hz_annot_get_fn get, void *arg, struct hz_annot *a, struct errbuf *e)
{
    const char *v;
    struct in_addr ia, ib;
    int b;
    if (a->public_iface >= 0)
        a->public_key = HZ_ANN_PUBLIC;
    if ((v = get(arg, HZ_HCCM_DISABLE_PUBLIC))) {
        if ((b = hz_go_bool(v)) < 0) {
            bad(e, HZ_HCCM_DISABLE_PUBLIC, "\"%.64s\" is neither true nor false", v);
        } else if (a->public_iface >= 0 && a->public_iface == b) {
            bad(e, HZ_ANN_PUBLIC, "\"%s\" and %s \"%.64s\" disagree (give one, or both alike)",
                a->public_iface ? "true" : "false", HZ_HCCM_DISABLE_PUBLIC, v);
        } else {
            a->public_iface = !b;
            a->public_key = HZ_HCCM_DISABLE_PUBLIC;
        }
    }
    if ((v = get(arg, HZ_HCCM_PRIVATE_IPV4))) {
        if (inet_pton(AF_INET, v, &ib) != 1)
            bad(e, HZ_HCCM_PRIVATE_IPV4, "\"%.64s\" is not an IPv4 address", v);
        else if (a->private_ip &&
                 (inet_pton(AF_INET, a->private_ip, &ia) != 1 || ia.s_addr != ib.s_addr))
            bad(e, HZ_ANN_PRIVATE_IP,
                "\"%.64s\" and %s \"%.64s\" disagree (give one, or both alike)", a->private_ip,
                HZ_HCCM_PRIVATE_IPV4, v);
        else if (!a->private_ip && !(a->private_ip = hz_strdup(v)))
            return -ENOMEM;
    }
    if ((v = get(arg, HZ_HCCM_PRIVATE_SUBNET))) {
        char cidr[HZ_CIDR4_MAX];
        if (hz_go_cidr4(v, cidr) < 0)
            bad(e, HZ_HCCM_PRIVATE_SUBNET, "\"%.64s\" is not an IPv4 CIDR (\"10.0.1.0/24\")", v);
        else if (!(a->private_subnet = hz_strdup(cidr)))
            return -ENOMEM;
    }
    go_bool(get, arg, HZ_HCCM_DISABLE_PRIVATE_INGRESS, 1, &a->private_ingress, e);
    go_bool(get, arg, HZ_HCCM_USE_PRIVATE_IP, 0, &a->use_private_ip, e);
    if (dns_name(get, arg, HZ_HCCM_HOSTNAME, &a->hostname, e) < 0 ||
        dns_name(get, arg, HZ_HCCM_IPV4_RDNS, &a->rdns4, e) < 0 ||
        dns_name(get, arg, HZ_HCCM_IPV6_RDNS, &a->rdns6, e) < 0)
        return -ENOMEM;
    return 0;
}

/* hccm's algorithm-type (round_robin, least_connections, Hetzner's own
 * words) beside robotlb's already read into *alg: as merge_word. */
static void
merge_algorithm(hz_annot_get_fn get, void *arg, int *alg, struct errbuf *e)
{
    const char *v = get(arg, HZ_HCCM_ALGORITHM);
    int h;
    if (!v)
        return;
    if ((h = hz_algorithm_from_api(v)) < 0) {
        bad(e, HZ_HCCM_ALGORITHM, "\"%.64s\" is not an algorithm (round_robin, least_connections)",
            v);
        return;
    }
    if (*alg >= 0 && *alg != h)
        bad(e, HZ_ANN_ALGORITHM, "%s and %s \"%.64s\" disagree (give one, or both alike)",
            *alg == HZ_ALG_ROUND_ROBIN ? "round-robin" : "least-connections", HZ_HCCM_ALGORITHM, v);
    else
        *alg = h;
}

/* hccm's hkey, read as hv from its text v, beside robotlb's rkey already
 * in *val (-1: absent): as merge_word. */
static void
merge_int(hz_annot_get_fn get, void *arg, const char *rkey, const char *hkey, const char *v, int hv,
          int *val, struct errbuf *e)
{
    if (*val >= 0 && *val != hv)
        bad(e, rkey, "\"%.64s\" and %s \"%.64s\" disagree (give one, or both alike)",
            get(arg, rkey), hkey, v);
    else
        *val = hv;
}

/* hccm's duration hkey (Go's syntax, whole seconds within [lo, hi]) beside
 * robotlb's rkey in *val. */
static void
merge_seconds(hz_annot_get_fn get, void *arg, const char *rkey, const char *hkey, int lo, int hi,
              int *val, struct errbuf *e)
{
    const char *v = get(arg, hkey);
    int64_t n;
    if (!v)
        return;
    if (hz_go_seconds(v, &n) < 0)
        bad(e, hkey, "\"%.64s\" is not a duration of whole seconds (\"15s\")", v);
    else if (n < lo || n > hi)
        bad(e, hkey, "\"%.64s\" is out of range (%ds to %ds)", v, lo, hi);
    else
        merge_int(get, arg, rkey, hkey, v, (int)n, val, e);
}

/* hccm's uses-proxyprotocol (and the ipMode it implies) and
 * health-check-interval, -timeout and -retries beside robotlb's
 * lb-proxy-mode, lb-check-interval, lb-timeout and lb-retries. Runs after
 * robotlb/ip-mode is read. */
static void
merge_service(hz_annot_get_fn get, void *arg, struct hz_annot *a, struct errbuf *e)
{
    const char *v;
    int b = -1;
    if ((v = get(arg, HZ_HCCM_PROXYPROTOCOL))) {
        if ((b = hz_go_bool(v)) < 0)
            bad(e, HZ_HCCM_PROXYPROTOCOL, "\"%.64s\" is neither true nor false", v);
        else
            merge_int(get, arg, HZ_ANN_PROXY_MODE, HZ_HCCM_PROXYPROTOCOL, v, b, &a->proxy_mode, e);
        /* hccm's status says ipMode Proxy exactly when its proxy protocol is
         * on (VIP when off); robotlb/ip-mode, when given, still decides */
        if (b >= 0 && a->ip_mode < 0)
            a->ip_mode = b ? HZ_IPMODE_PROXY : HZ_IPMODE_VIP;
    }
    merge_seconds(get, arg, HZ_ANN_CHECK_INTERVAL, HZ_HCCM_HC_INTERVAL, HZ_HC_INTERVAL_MIN,
                  HZ_HC_INTERVAL_MAX, &a->check_interval, e);
    merge_seconds(get, arg, HZ_ANN_TIMEOUT, HZ_HCCM_HC_TIMEOUT, HZ_HC_TIMEOUT_MIN,
                  HZ_HC_TIMEOUT_MAX, &a->timeout, e);
    if ((v = get(arg, HZ_HCCM_HC_RETRIES))) {
        int n = -1, before = e->count;
        get_int(get, arg, HZ_HCCM_HC_RETRIES, HZ_HC_RETRIES_MIN, HZ_HC_RETRIES_MAX, &n, e);
        if (e->count == before)
            merge_int(get, arg, HZ_ANN_RETRIES, HZ_HCCM_HC_RETRIES, v, n, &a->retries, e);
    }
}

/* prismlb's own lists of ports: p past its blanks. */
static const char *
list_next(const char *p)
{
    while (*p == ' ')
        p++;
    return p;
}

/* The port 1-65535 at p (after blanks) of one of prismlb's own lists, *end
 * just past its digits and the blanks after them; -1 when there is none. */
static long
list_port(const char *p, const char **end)
{
    char *after;
    long port;
    p = list_next(p);
    if (*p < '0' || *p > '9')
        return -1;
    errno = 0;
    port = strtol(p, &after, 10);
    if (port < 1 || port > 65535 || errno)
        return -1;
    *end = list_next(after);
    return port;
}

/* Whether port may join the n ports of prismlb's own list key (value v),
 * at most max: 1, or 0 with the list named (a port twice, too many). */
static int
list_take(struct errbuf *e, const char *key, const char *v, const int *ports, size_t n, size_t max,
          long port)
{
    for (size_t i = 0; i < n; i++)
        if (ports[i] == port) {
            bad(e, key, "\"%.64s\" names port %ld twice", v, port);
            return 0;
        }
    if (n == max) {
        bad(e, key, "\"%.64s\" names more than %zu ports", v, max);
        return 0;
    }
    return 1;
}

/* prismlb's own: prismlb.io/proxy-protocol-ports, a comma-separated list
 * of ports 1-65535 (blanks around each allowed, no two alike, at most
 * HZ_OWN_PROXY_PORTS_MAX), into a->proxy_ports (new); never beside hccm's
 * uses-proxyprotocol or robotlb's lb-proxy-mode (both named). 0 or
 * -ENOMEM. */
static int
proxy_ports(hz_annot_get_fn get, void *arg, struct hz_annot *a, struct errbuf *e)
{
    const char *v = get(arg, HZ_OWN_PROXY_PORTS), *p, *other;
    int list[HZ_OWN_PROXY_PORTS_MAX];
    size_t n = 0;

    if (!v)
        return 0;
    other = get(arg, HZ_HCCM_PROXYPROTOCOL) ? HZ_HCCM_PROXYPROTOCOL
            : get(arg, HZ_ANN_PROXY_MODE)   ? HZ_ANN_PROXY_MODE
                                            : NULL;
    if (other) {
        bad(e, HZ_OWN_PROXY_PORTS,
            "\"%.64s\" and %s are both given (the list says which ports send the PROXY "
            "header; give one)",
            v, other);
        return 0;
    }
    for (p = v;;) {
        const char *end;
        long port = list_port(p, &end);
        if (port < 0) {
            bad(e, HZ_OWN_PROXY_PORTS, "\"%.64s\" is not a comma-separated list of ports", v);
            return 0;
        }
        if (!list_take(e, HZ_OWN_PROXY_PORTS, v, list, n, HZ_OWN_PROXY_PORTS_MAX, port))
            return 0;
        list[n++] = (int)port;
        if (!*(p = list_next(end)))
            break;
        if (*p++ != ',') {
            bad(e, HZ_OWN_PROXY_PORTS, "\"%.64s\" is not a comma-separated list of ports", v);
            return 0;
        }
    }
    if (!(a->proxy_ports = hz_calloc(n * sizeof(*a->proxy_ports))))
        return -ENOMEM;
    memcpy(a->proxy_ports, list, n * sizeof(*list));
    a->nproxy_ports = n;
    return 0;
}

/* prismlb's own: prismlb.io/port-protocols, a comma-separated list of
 * port:protocol ("80:http,443:https"; ports 1-65535, the protocols tcp,
 * http and https in any case, blanks around each item and the colon
 * allowed, no port twice, at most HZ_OWN_PORT_PROTOCOLS_MAX), into
 * a->port_protos (new) and the set of its protocols into *protos
 * (HZ_PROTO_BIT). 0 or -ENOMEM. */
static int
port_protocols(hz_annot_get_fn get, void *arg, struct hz_annot *a, unsigned *protos,
               struct errbuf *e)
{
    const char *v = get(arg, HZ_OWN_PORT_PROTOCOLS), *p;
    struct hz_port_proto list[HZ_OWN_PORT_PROTOCOLS_MAX];
    int ports[HZ_OWN_PORT_PROTOCOLS_MAX];
    size_t n = 0;

    *protos = 0;
    if (!v)
        return 0;
    for (p = v;;) {
        const char *end;
        long port = list_port(p, &end);
        size_t len;
        int proto;
        if (port < 0 || *end != ':')
            goto malformed;
        p = list_next(end + 1);
        len = strcspn(p, ", ");
        if ((proto = hz_proto_of(p, len)) < 0) {
            bad(e, HZ_OWN_PORT_PROTOCOLS,
                "\"%.64s\": \"%.*s\" is not a protocol (tcp, http, https)", v,
                (int)(len > 16 ? 16 : len), p);
            return 0;
        }
        if (!list_take(e, HZ_OWN_PORT_PROTOCOLS, v, ports, n, HZ_OWN_PORT_PROTOCOLS_MAX, port))
            return 0;
        ports[n] = (int)port;
        list[n++] = (struct hz_port_proto){(int)port, proto};
        *protos |= HZ_PROTO_BIT(proto);
        if (!*(p = list_next(p + len)))
            break;
        if (*p++ != ',')
            goto malformed;
    }
    if (!(a->port_protos = hz_calloc(n * sizeof(*a->port_protos))))
        return -ENOMEM;
    memcpy(a->port_protos, list, n * sizeof(*list));
    a->nport_protos = n;
    return 0;
malformed:
    bad(e, HZ_OWN_PORT_PROTOCOLS,
        "\"%.64s\" is not a comma-separated list of port:protocol (\"80:http,443:https\")", v);
    *protos = 0;
    return 0;
}

int
hz_annot_parse(hz_annot_get_fn get, void *arg, struct hz_annot *out, char *err, size_t errlen)
{
    struct errbuf e = {.p = err, .len = errlen ? errlen - 1 : 0};
    struct hz_annot a;
    const char *v;
    unsigned protos;
    int rc = 0;

    if (errlen)
        err[0] = '\0';
    memset(&a, 0, sizeof(a));
    hz_annot_clear(&a);

    /* Hetzner names are 1 to 128 characters without blanks; a longer name
     * is cut (hz_name_fit), a blank cannot be sent. */
    if ((rc = get_word(get, arg, HZ_ANN_BALANCER, &a.balancer, &e)) < 0)
        goto fail;
    if ((rc = get_word(get, arg, HZ_ANN_NETWORK, &a.network, &e)) < 0)
        goto fail;
    if ((v = get(arg, HZ_ANN_PRIVATE_IP))) {
        struct in_addr ia;
        if (inet_pton(AF_INET, v, &ia) != 1)
            bad(&e, HZ_ANN_PRIVATE_IP, "\"%.64s\" is not an IPv4 address", v);
        else if (!(a.private_ip = hz_strdup(v)))
            goto nomem;
    }
    if ((v = get(arg, HZ_ANN_NODE_SELECTOR)) && !(a.node_selector = hz_strdup(v)))
        goto nomem;
    if ((v = get(arg, HZ_HCCM_NODE_SELECTOR))) {
        /* hccm's selects by itself; robotlb's beside it must say the same */
        if (a.node_selector && strcmp(a.node_selector, v) != 0)
            bad(&e, HZ_ANN_NODE_SELECTOR,
                "\"%.64s\" and %s \"%.64s\" disagree (give one, or both alike)", a.node_selector,
                HZ_HCCM_NODE_SELECTOR, v);
        else if (!a.node_selector && !(a.node_selector = hz_strdup(v)))
            goto nomem;
        a.selector_hccm = 1;
    }
    if (a.node_selector)
        a.selector_key = a.selector_hccm ? HZ_HCCM_NODE_SELECTOR : HZ_ANN_NODE_SELECTOR;
    get_int(get, arg, HZ_ANN_CHECK_INTERVAL, HZ_HC_INTERVAL_MIN, HZ_HC_INTERVAL_MAX,
            &a.check_interval, &e);
    get_int(get, arg, HZ_ANN_TIMEOUT, HZ_HC_TIMEOUT_MIN, HZ_HC_TIMEOUT_MAX, &a.timeout, &e);
    get_int(get, arg, HZ_ANN_RETRIES, HZ_HC_RETRIES_MIN, HZ_HC_RETRIES_MAX, &a.retries, &e);
    /* robotlb reads booleans as a Rust bool: exactly "true" or "false". */
    get_bool(get, arg, HZ_ANN_PROXY_MODE, &a.proxy_mode, &e);
    get_bool(get, arg, HZ_ANN_PUBLIC, &a.public_iface, &e);
    get_bool(get, arg, HZ_HCCM_IPV6_DISABLED, &a.ipv6_disabled, &e);
    if ((rc = net_status(get, arg, &a, &e)) < 0)
        goto fail;
    if ((rc = get_word(get, arg, HZ_ANN_LOCATION, &a.location, &e)) < 0)
        goto fail;
    if ((v = get(arg, HZ_ANN_ALGORITHM))) {
        if (strcmp(v, "round-robin") == 0)
            a.algorithm = HZ_ALG_ROUND_ROBIN;
        else if (strcmp(v, "least-connections") == 0 || strcmp(v, "least-connection") == 0)
            a.algorithm = HZ_ALG_LEAST_CONNECTIONS;
        else
            bad(&e, HZ_ANN_ALGORITHM,
                "\"%.64s\" is not an algorithm (least-connections, round-robin)", v);
    }
    if ((rc = get_word(get, arg, HZ_ANN_TYPE, &a.type, &e)) < 0)
        goto fail;
    if ((v = get(arg, HZ_ANN_IP_MODE))) {
        if (strcmp(v, "VIP") == 0)
            a.ip_mode = HZ_IPMODE_VIP;
        else if (strcmp(v, "Proxy") == 0)
            a.ip_mode = HZ_IPMODE_PROXY;
        else
            bad(&e, HZ_ANN_IP_MODE, "\"%.64s\" is neither VIP nor Proxy", v);
    }
    if ((rc = merge_word(get, arg, HZ_ANN_BALANCER, HZ_HCCM_NAME, &a.balancer, &e)) < 0 ||
        (rc = merge_word(get, arg, HZ_ANN_TYPE, HZ_HCCM_TYPE, &a.type, &e)) < 0 ||
        (rc = merge_word(get, arg, HZ_ANN_LOCATION, HZ_HCCM_LOCATION, &a.location, &e)) < 0)
        goto fail;
    merge_algorithm(get, arg, &a.algorithm, &e);
    merge_service(get, arg, &a, &e);
    /* prismlb's own: the ports' protocols, which the http settings need */
    if ((rc = port_protocols(get, arg, &a, &protos, &e)) < 0 ||
        (rc = hz_http_annot(get, arg, protos, &a.http, bad_http, &e)) < 0)
        goto fail;
    /* prismlb's own: a Go boolean, as hccm's */
    go_bool(get, arg, HZ_OWN_DELETE_PROTECTION, 0, &a.delete_protection, &e);
    if ((rc = proxy_ports(get, arg, &a, &e)) < 0)
        goto fail;
    /* prismlb's own: with proxy-protocol-ports, Proxy unless robotlb/ip-mode
     * says otherwise (ipMode is one per address, not per port: Proxy keeps
     * in-cluster clients of the listed ports going through the balancer,
     * which adds their header; the other ports only take that detour) */
    if (a.proxy_ports && a.ip_mode < 0)
        a.ip_mode = HZ_IPMODE_PROXY;
    if (a.type)
        a.type_key = get(arg, HZ_ANN_TYPE) ? HZ_ANN_TYPE : HZ_HCCM_TYPE;
    if (a.location)
        a.location_key = get(arg, HZ_ANN_LOCATION) ? HZ_ANN_LOCATION : HZ_HCCM_LOCATION;
    /* a balancer is placed by a location or by a network zone, not both */
    if ((rc = get_word(get, arg, HZ_HCCM_NETWORK_ZONE, &a.network_zone, &e)) < 0)
        goto fail;
    if (a.network_zone && a.location)
        bad(&e, HZ_HCCM_NETWORK_ZONE,
            "\"%.64s\" and %s \"%.64s\" are mutually exclusive (a balancer is created in a "
            "location or in a network zone: give one)",
            a.network_zone, a.location_key, a.location);
    if (e.count) {
        if (errlen)
            err[e.n] = '\0';
        hz_annot_clear(&a);
        *out = a;
        return -EINVAL;
    }
    *out = a;
    return 0;
nomem:
    rc = -ENOMEM;
fail:
    hz_annot_clear(&a);
    *out = a;
    if (errlen)
        snprintf(err, errlen, "out of memory");
    return rc;
}
