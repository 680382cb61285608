/*
 * hz_settings.c: the settings of mod_hetzner_lb — every option of robotlb's
 * command line with its default, each overridden by the same ROBOTLB_*
 * environment variable, plus hcloud_endpoint and dry_run.
 *
 * The token comes from a file (hcloud_token_file, read on every request so
 * that a rotated Secret needs no restart) or from ROBOTLB_HCLOUD_TOKEN; the
 * check hook refuses a token written inline in the config file.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <prismlb/module_util.h>

#include "hz.h"

/* "least-connection" is the spelling of robotlb's annotation example; it is
 * accepted here too and means least-connections. */
static const char *const algorithm_values[] = {"least-connections", "round-robin",
                                               "least-connection", NULL};
static const char *const ip_mode_values[] = {"VIP", "Proxy", NULL};

const char *
hz_validate_dns_label(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0)
        return NULL; /* unset: no prefix */
    if (n > 63)
        return "must be a DNS label of at most 63 characters";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(islower(c) || isdigit(c) || c == '-') || c > 0x7f)
            return "must be a DNS label: lowercase letters, digits and '-'";
    }
    if (s[0] == '-' || s[n - 1] == '-')
        return "must be a DNS label: it starts and ends with a letter or digit";
    return NULL;
}

int
hz_log_level_parse(const char *s)
{
    static const struct {
        const char *name;
        int level;
    } map[] = {
        {"off", -1},
        {"error", PLB_LOG_ERROR},
        {"warn", PLB_LOG_WARN},
        {"warning", PLB_LOG_WARN},
        {"info", PLB_LOG_INFO},
        {"debug", PLB_LOG_DEBUG},
        {"trace", PLB_LOG_DEBUG},
    };
    if (!s)
        return -2;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcasecmp(s, map[i].name) == 0)
            return map[i].level;
    return -2;
}

const char *
hz_validate_log_level(const char *s)
{
    if (!s || !*s)
        return NULL;
    return hz_log_level_parse(s) == -2 ? "must be one of off, error, warn, info, debug, trace"
                                       : NULL;
}

int
hz_config_algorithm(const struct hz_config *c)
{
    return c->default_lb_algorithm == 1 ? HZ_ALG_ROUND_ROBIN : HZ_ALG_LEAST_CONNECTIONS;
}

static const char *
v_cluster_name(const void *value)
{
    return hz_validate_dns_label(*(char *const *)value);
}

static const char *
v_log_level(const void *value)
{
    return hz_validate_log_level(*(char *const *)value);
}

static const char *
v_nonblank(const void *value)
{
    const char *s = *(char *const *)value;
    if (!s)
        return NULL;
    if (!*s)
        return "must not be empty";
    for (const char *p = s; *p; p++)
        if (isspace((unsigned char)*p))
            return "must not contain blanks";
    return NULL;
}

static const char *
v_cidr4(const void *value)
{
    const char *s = *(char *const *)value;
    char cidr[HZ_CIDR4_MAX];
    return s && hz_go_cidr4(s, cidr) < 0 ? "must be an IPv4 CIDR (\"10.0.1.0/24\")" : NULL;
}

static const char *
v_endpoint(const void *value)
{
    const char *s = *(char *const *)value;
    if (!s)
        return NULL;
    if (strncmp(s, "https://", 8) != 0 && strncmp(s, "http://", 7) != 0)
        return "must be an http:// or https:// URL";
    return NULL;
}

int
hz_class_served(const char *served, const char *svc_class)
{
    if (!served)
        return !svc_class || strcmp(svc_class, "robotlb") == 0;
    return svc_class && strcmp(svc_class, served) == 0;
}

/* A label-style key as Kubernetes validates spec.loadBalancerClass: an
 * optional DNS subdomain prefix and '/', then a name of at most 63
 * characters, alphanumeric at both ends, '-', '_' and '.' inside. */
static const char *
v_class(const void *value)
{
    const char *s = *(char *const *)value, *name, *slash;
    size_t n;
    if (!s)
        return NULL;
    slash = strchr(s, '/');
    name = slash ? slash + 1 : s;
    if (slash) {
        size_t pl = (size_t)(slash - s);
        if (pl == 0 || pl > 253 || strchr(name, '/'))
            return "must be a name or prefix/name (the prefix a DNS subdomain)";
        for (const char *p = s; p < slash; p++)
            if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' ||
                  *p == '.'))
                return "the prefix must be a DNS subdomain (lowercase letters, digits, '-', '.')";
    }
    n = strlen(name);
    if (n == 0 || n > 63)
        return "the name must be 1 to 63 characters";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!(isalnum(c) || ((c == '-' || c == '_' || c == '.') && i > 0 && i + 1 < n)) || c > 0x7f)
            return "the name must be letters, digits, '-', '_' and '.', alphanumeric at both "
                   "ends";
    }
    return NULL;
}

#define OFF(f) PLB_OFFSET(struct hz_config, f)

/* clang-format off */
const struct plb_setting hz_settings_table[] = {
    {.name = "hcloud_token_file", .type = PLB_SET_PATH, .offset = OFF(hcloud_token_file),
     .doc = "File holding the Hetzner Cloud API token, re-read on every request (a rotated "
            "Secret needs no restart); give this or ROBOTLB_HCLOUD_TOKEN"},
    {.name = "hcloud_token", .type = PLB_SET_STRING, .offset = OFF(hcloud_token),
     .flags = PLB_SET_SECRET, .env = "ROBOTLB_HCLOUD_TOKEN",
     .doc = "The API token, from the environment only: the config file may not hold it"},
    {.name = "hcloud_endpoint", .type = PLB_SET_STRING, .offset = OFF(hcloud_endpoint),
     .def = "https://api.hetzner.cloud/v1", .validate = v_endpoint,
     .doc = "Base URL of the Hetzner Cloud API"},
    {.name = "cluster_name", .type = PLB_SET_STRING, .offset = OFF(cluster_name),
     .env = "ROBOTLB_CLUSTER_NAME", .validate = v_cluster_name,
     .doc = "Put in front of default balancer names (CLUSTER.SERVICE.NAMESPACE) so "
            "that clusters sharing a Hetzner project do not pick the same ones; a DNS label "
            "of at most 63 characters"},
    {.name = "default_network", .type = PLB_SET_STRING, .offset = OFF(default_network),
     .env = "ROBOTLB_DEFAULT_NETWORK", .validate = v_nonblank,
     .doc = "Network (name) balancers are attached to when a Service has no "
            "robotlb/lb-network annotation; unset: only the annotation's network is used"},
    {.name = "private_subnet_ip_range", .type = PLB_SET_STRING,
     .offset = OFF(private_subnet_ip_range), .validate = v_cidr4,
     .doc = "Subnet (IPv4 CIDR) of the network the balancers' private IPs come from when a "
            "Service has no load-balancer.hetzner.cloud/private-subnet-ip-range annotation, as "
            "hccm's HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE; unset: Hetzner picks one"},
    {.name = "dynamic_node_selector", .type = PLB_SET_BOOL,
     .offset = OFF(dynamic_node_selector), .def = "true", .env = "ROBOTLB_DYNAMIC_NODE_SELECTOR",
     .doc = "Select target nodes by the Service's externalTrafficPolicy (Cluster: every node; "
            "Local: the nodes serving its endpoints), the behaviour robotlb's document "
            "describes; false: by the robotlb/node-selector annotation instead"},
    {.name = "default_lb_retries", .type = PLB_SET_INT, .offset = OFF(default_lb_retries),
     .def = "3", .min = HZ_HC_RETRIES_MIN, .max = HZ_HC_RETRIES_MAX,
     .env = "ROBOTLB_DEFAULT_LB_RETRIES",
     .doc = "Health check retries: failed probes before a target counts as unhealthy"},
    {.name = "default_lb_timeout", .type = PLB_SET_INT, .offset = OFF(default_lb_timeout),
     .def = "10", .min = HZ_HC_TIMEOUT_MIN, .max = HZ_HC_TIMEOUT_MAX,
     .env = "ROBOTLB_DEFAULT_LB_TIMEOUT", .doc = "Health check timeout of one probe, seconds"},
    {.name = "default_lb_interval", .type = PLB_SET_INT, .offset = OFF(default_lb_interval),
     .def = "15", .min = HZ_HC_INTERVAL_MIN, .max = HZ_HC_INTERVAL_MAX,
     .env = "ROBOTLB_DEFAULT_LB_INTERVAL", .doc = "Health check interval, seconds"},
    {.name = "default_lb_location", .type = PLB_SET_STRING, .offset = OFF(default_lb_location),
     .def = "hel1", .env = "ROBOTLB_DEFAULT_LB_LOCATION", .validate = v_nonblank,
     .doc = "Location code of new balancers (fsn1, nbg1, hel1, ash, hil, sin)"},
    {.name = "default_network_zone", .type = PLB_SET_STRING,
     .offset = OFF(default_network_zone), .validate = v_nonblank,
     .doc = "Network zone of new balancers (eu-central, us-east, us-west, ap-southeast) "
            "instead of default_lb_location, as hccm's HCLOUD_LOAD_BALANCERS_NETWORK_ZONE; a "
            "location annotation still wins; unset: default_lb_location"},
    {.name = "default_balancer_type", .type = PLB_SET_STRING,
     .offset = OFF(default_balancer_type), .def = "lb11", .env = "ROBOTLB_DEFAULT_LB_TYPE",
     .validate = v_nonblank,
     .doc = "Balancer type (lb11 holds 25 targets, lb21 75, lb31 150)"},
    {.name = "default_lb_algorithm", .type = PLB_SET_ENUM, .offset = OFF(default_lb_algorithm),
     .def = "least-connections", .enum_values = algorithm_values,
     .env = "ROBOTLB_DEFAULT_LB_ALGORITHM",
     .doc = "Balancing algorithm (least-connection is taken as least-connections)"},
    {.name = "default_lb_proxy_mode_enabled", .type = PLB_SET_BOOL,
     .offset = OFF(default_lb_proxy_mode_enabled), .def = "false",
     .env = "ROBOTLB_DEFAULT_LB_PROXY_MODE_ENABLED",
     .doc = "Send the PROXY protocol header to targets (per Service: robotlb/lb-proxy-mode)"},
    {.name = "default_ip_mode", .type = PLB_SET_ENUM, .offset = OFF(default_ip_mode),
     .def = "VIP", .enum_values = ip_mode_values, .env = "ROBOTLB_DEFAULT_IP_MODE",
     .doc = "ipMode of the Service's status.loadBalancer.ingress entries"},
    {.name = "ipv6_ingress", .type = PLB_SET_BOOL, .offset = OFF(ipv6_ingress), .def = "false",
     .env = "ROBOTLB_IPV6_INGRESS",
     .doc = "Put the balancer's IPv6 address in the Service's status beside the IPv4"},
    {.name = "private_ingress", .type = PLB_SET_BOOL, .offset = OFF(private_ingress),
     .def = "false",
     .doc = "Put the balancer's private IPs (one per network) in the Service's status after the "
            "public ones, as hccm does by default (its HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS "
            "sets the opposite); per Service: load-balancer.hetzner.cloud/disable-private-ingress"},
    {.name = "disable_public_network", .type = PLB_SET_BOOL,
     .offset = OFF(disable_public_network), .def = "false",
     .doc = "Make balancers without a public interface (reached at their private IP; needs a "
            "network) when their Service does not say (robotlb/lb-public-interface, "
            "load-balancer.hetzner.cloud/disable-public-network), as hccm's "
            "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK"},
    {.name = "use_private_ip", .type = PLB_SET_BOOL, .offset = OFF(use_private_ip),
     .def = "false",
     .doc = "hccm's HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP: true needs a network; the targets are "
            "the nodes' InternalIPs either way (prismlb makes IP targets only)"},
    {.name = "resync_interval", .type = PLB_SET_DURATION, .offset = OFF(resync_interval_ms),
     .def = "300s", .min = 1000, .env = "ROBOTLB_RESYNC_INTERVAL",
     .doc = "Time between checks of balancers nothing changed (an integer is seconds); one "
            "paginated list request serves every Service"},
    {.name = "resync_budget_percent", .type = PLB_SET_INT, .offset = OFF(resync_budget_percent),
     .def = "10", .min = 1, .max = 100,
     .doc = "The share of the hourly API budget (the RateLimit-Limit Hetzner reports) the "
            "resync's list requests may take: when the balancers need more pages of 50 than "
            "that at resync_interval, the interval stretches (logged, and the gauge "
            "prismlb_hetzner_resync_interval_seconds shows it)"},
    {.name = "refused_recheck_interval", .type = PLB_SET_DURATION,
     .offset = OFF(refused_recheck_ms), .def = "30s", .min = 100,
     .doc = "When Hetzner refuses a target (or another write) for a reason other than the "
            "rate limit, the Service is checked again after this long instead of waiting for "
            "the next resync (robotlb: 30 s)"},
    {.name = "dry_run", .type = PLB_SET_BOOL, .offset = OFF(dry_run), .def = "false",
     .doc = "Log each Hetzner write the module would make and make none (reads still happen)"},
    {.name = "log_level", .type = PLB_SET_STRING, .offset = OFF(log_level),
     .env = "ROBOTLB_LOG_LEVEL", .validate = v_log_level,
     .doc = "robotlb's log level (off, error, warn, info, debug, trace): lowers this module's "
            "verbosity only; the daemon's global log_level still caps it; unset: the "
            "daemon's level alone"},
    {.name = "load_balancer_class", .type = PLB_SET_STRING, .offset = OFF(load_balancer_class),
     .validate = v_class,
     .doc = "The spec.loadBalancerClass of the Services served; unset: Services without a "
            "class and those of class robotlb, as robotlb; set: only that class, so that "
            "another controller (hcloud-cloud-controller-manager) keeps the others"},
    PLB_SETTING_KUBECONFIG(OFF(kubeconfig),
        .doc = "kubeconfig file; unset: the in-cluster service account when "
               "KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG or ~/.kube/config"),
    PLB_SETTING_KUBE_CONTEXT(OFF(kube_context), .validate = v_nonblank,
        .doc = "kubeconfig context; unset: its current-context"),
    PLB_SETTINGS_END,
};
/* clang-format on */

const char *
hz_getenv(void *arg, const char *name)
{
    (void)arg;
    return getenv(name);
}

int
hz_check(const struct plb_host *host, plb_check *chk, const void *config,
         void (*report)(plb_check *chk, const char *setting, const char *fmt, ...))
{
    const struct hz_config *c = config;
    int problems = 0;
    (void)host;
    if (c->hcloud_token) {
        const char *env = getenv("ROBOTLB_HCLOUD_TOKEN");
        if (!env || strcmp(env, c->hcloud_token) != 0) {
            report(chk, "hcloud_token",
                   "the token may not be written in the config file: use hcloud_token_file "
                   "or the environment variable ROBOTLB_HCLOUD_TOKEN");
            problems++;
        }
    }
    if (!c->hcloud_token_file && !c->hcloud_token) {
        report(chk, "hcloud_token_file",
               "no Hetzner API token: set hcloud_token_file or ROBOTLB_HCLOUD_TOKEN");
        problems++;
    }
    struct hz_config eff = *c;
    char err[256];
    if (hz_env_apply(&eff, hz_getenv, NULL, err, sizeof(err)) < 0) {
        report(chk, "environment", "%s", err);
        problems++;
    }
    if (c->hcloud_token_file && c->hcloud_token) {
        report(chk, "hcloud_token_file",
               "both hcloud_token_file and ROBOTLB_HCLOUD_TOKEN are set: give one");
        problems++;
    }
    return problems;
}
