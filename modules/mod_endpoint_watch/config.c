/*
 * config: the settings table of endpoint_watch, its validators and the
 * check of settings against each other. Only reads values; runs for
 * --check-config.
 *
 * The spec's discovery flags: --endpoints (required, must not be empty, each
 * entry host:port with host an IP address or RFC 1123 hostname and port in
 * 1-65535) and --enable-discovery (default true). The Kubernetes client
 * settings are prismlb's: where the API server is (kubeconfig, in-cluster,
 * or a server override through the local proxy) and which Service's
 * EndpointSlices are watched.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ew.h"

int
ew_rfc1123_hostname(const char *s)
{
    size_t n = strlen(s), label = 0;
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i <= n; i++) {
        char ch = s[i];
        if (ch == '.' || ch == '\0') {
            if (label == 0 || s[i - 1] == '-')
                return 0;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)ch) && ch != '-')
            return 0;
        if (label == 0 && ch == '-')
            return 0;
        if (++label > 63)
            return 0;
    }
    return 1;
}

int
ew_ip_literal(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

const char *
ew_endpoint_problem(const char *s)
{
    char host[256];
    const char *colon, *port;
    size_t hl;

    if (!s || !*s)
        return "is empty";
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return "must be [IPv6]:port";
        hl = (size_t)(close - s - 1);
        if (hl == 0 || hl >= sizeof(host))
            return "has no valid IPv6 address in brackets";
        memcpy(host, s + 1, hl);
        host[hl] = '\0';
        unsigned char buf[sizeof(struct in6_addr)];
        if (inet_pton(AF_INET6, host, buf) != 1)
            return "has no valid IPv6 address in brackets";
        port = close + 2;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return "must be host:port (the port is missing)";
        if (memchr(s, ':', (size_t)(colon - s)))
            return "must be host:port; write an IPv6 address in brackets: [addr]:port";
        hl = (size_t)(colon - s);
        if (hl == 0)
            return "must be host:port (the host is missing)";
        if (hl >= sizeof(host))
            return "has a host longer than 253 characters";
        memcpy(host, s, hl);
        host[hl] = '\0';
        if (!ew_ip_literal(host) && !ew_rfc1123_hostname(host))
            return "has a host that is neither an IP address nor an RFC 1123 hostname";
        port = colon + 1;
    }
    if (!*port)
        return "must be host:port (the port is missing)";
    long v = 0;
    for (const char *p = port; *p; p++) {
        if (!isdigit((unsigned char)*p) || v > 65535)
            return "has a port that is not a number in the range 1-65535";
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535)
        return "has a port that is not a number in the range 1-65535";
    return NULL;
}

/* A message naming the offending entry; thread-local, as the ABI allows. */
static _Thread_local char msgbuf[512];

static const char *
valid_endpoints(const void *value)
{
    const struct plb_strv *v = value;
    for (size_t i = 0; i < v->n; i++) {
        const char *why = ew_endpoint_problem(v->v[i]);
        if (why) {
            snprintf(msgbuf, sizeof(msgbuf), "entry %zu \"%.200s\" %s", i + 1, v->v[i], why);
            return msgbuf;
        }
    }
    return NULL;
}

static const char *
valid_server(const void *value)
{
    const char *const *s = value;
    if (!*s)
        return NULL;
    if (strncmp(*s, "https://", 8) != 0 && strncmp(*s, "http://", 7) != 0)
        return "must be an http:// or https:// URL (\"https://127.0.0.1:7445\")";
    const char *host = strstr(*s, "://") + 3;
    if (!*host || *host == '/')
        return "must name a host (\"https://127.0.0.1:7445\")";
    return NULL;
}

static const char *
valid_server_name(const void *value)
{
    const char *const *s = value;
    if (!*s)
        return NULL;
    if (!ew_rfc1123_hostname(*s) && !ew_ip_literal(*s))
        return "must be a host name (no port, scheme, path or brackets)";
    return NULL;
}

/* A namespace or Service name: an RFC 1123 label (DNS-1123 label). */
static const char *
valid_label(const void *value)
{
    const char *const *s = value;
    const char *p = *s;
    size_t n = p ? strlen(p) : 0;
    if (n == 0)
        return "must not be empty";
    if (n > 63)
        return "must be at most 63 characters (an RFC 1123 label)";
    for (size_t i = 0; i < n; i++) {
        if (!(islower((unsigned char)p[i]) || isdigit((unsigned char)p[i]) || p[i] == '-'))
            return "must consist of lower case letters, digits and '-' (an RFC 1123 label)";
    }
    if (p[0] == '-' || p[n - 1] == '-')
        return "must start and end with a letter or digit (an RFC 1123 label)";
    return NULL;
}

/* An EndpointSlice port name: empty is allowed (an unnamed port), else an
 * IANA service name style label of at most 15 characters as Kubernetes
 * allows for named ports, relaxed to any RFC 1123 label. */
static const char *
valid_port_name(const void *value)
{
    const char *const *s = value;
    if (!*s || !**s)
        return NULL;
    return valid_label(value);
}

#define OFF(f) PLB_OFFSET(struct ew_config, f)

const struct plb_setting ew_settings[] = {
    {.name = "endpoints",
     .type = PLB_SET_STRING_LIST,
     .offset = OFF(endpoints),
     .flags = PLB_SET_REQUIRED | PLB_SET_NONEMPTY,
     .validate = valid_endpoints,
     .doc = "Static (bootstrap) API server endpoints, available at once without cluster "
            "access: each host:port, host an IP address ([addr] for IPv6) or RFC 1123 "
            "hostname, port 1-65535; must not be empty"},
    {.name = "enable_discovery",
     .type = PLB_SET_BOOL,
     .offset = OFF(enable_discovery),
     .def = "true",
     .doc = "Watch the EndpointSlices of service_name in namespace for the API servers "
            "(the Kubernetes provider)"},
    {.name = "kubeconfig",
     .type = PLB_SET_PATH,
     .offset = OFF(kubeconfig),
     .doc = "kubeconfig file of the discovery client; unset: the service account when "
            "KUBERNETES_SERVICE_HOST is set, else the first file of $KUBECONFIG, else none "
            "(static endpoints only)"},
    {.name = "server",
     .type = PLB_SET_STRING,
     .offset = OFF(server),
     .validate = valid_server,
     .doc = "API server URL overriding the kubeconfig's or the in-cluster one, normally the "
            "local proxy (\"https://127.0.0.1:7445\") so that discovery needs no CNI and "
            "fails over with the proxy"},
    {.name = "tls_server_name",
     .type = PLB_SET_STRING,
     .offset = OFF(tls_server_name),
     .validate = valid_server_name,
     .doc = "Name the API server certificate is verified against; unset: "
            "kubernetes.default.svc when server is an https:// URL, else the kubeconfig's"},
    {.name = "service_account_dir",
     .type = PLB_SET_PATH,
     .offset = OFF(service_account_dir),
     .def = "/var/run/secrets/kubernetes.io/serviceaccount",
     .doc = "Service account directory (token, ca.crt, namespace) of the in-cluster client"},
    {.name = "namespace",
     .type = PLB_SET_STRING,
     .offset = OFF(ns),
     .def = "default",
     .flags = PLB_SET_NONEMPTY,
     .validate = valid_label,
     .doc = "Namespace of the Service whose EndpointSlices are watched"},
    {.name = "service_name",
     .type = PLB_SET_STRING,
     .offset = OFF(service_name),
     .def = "kubernetes",
     .flags = PLB_SET_NONEMPTY,
     .validate = valid_label,
     .doc = "Service whose EndpointSlices are watched (label selector "
            "kubernetes.io/service-name=<service_name>)"},
    {.name = "port_name",
     .type = PLB_SET_STRING,
     .offset = OFF(port_name),
     .def = "https",
     .validate = valid_port_name,
     .doc = "Name of the EndpointSlice port the endpoints are reached on (\"\" for an "
            "unnamed port); slices without it contribute nothing"},
    PLB_SETTINGS_END,
};

int
ew_config_check(const struct plb_host *host, plb_check *chk, const void *config,
                void (*report)(plb_check *, const char *, const char *, ...))
{
    const struct ew_config *c = config;
    (void)host;
    /* Each setting is checked on its own by its validator; the only rule
     * between settings: a TLS server name needs TLS somewhere to apply. */
    if (c->tls_server_name && c->server && strncmp(c->server, "http://", 7) == 0) {
        report(chk, "tls_server_name", "has no effect with a plain http:// server");
        return 1;
    }
    return 0;
}
