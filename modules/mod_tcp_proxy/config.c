/*
 * config: the settings table of tcp_proxy, its validators and the check of
 * settings against each other. Only reads values; runs for --check-config.
 *
 * The spec's rule "--bind-port and --health-port must differ" concerns the
 * port of the probe and metrics server, which in prismlb is mod_metrics'
 * `port` setting in another instance; a module's check hook sees only its
 * own settings, so that rule is left to the operating system: the second
 * bind of one address and port fails, and the daemon refuses to start,
 * naming the instance whose listener could not bind.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "tp.h"

static const char *const selections[] = {"random", "latency", NULL};
static const char *const checks[] = {"tcp", "readyz", NULL};

static const char *
not_negative(const void *value)
{
    const int64_t *v = value;
    return *v < 0 ? "must not be negative" : NULL;
}

#define OFF(f) PLB_OFFSET(struct tp_config, f)

/* clang-format off */
const struct plb_setting tp_settings[] = {
    {.name = "bind_address", .type = PLB_SET_STRING, .offset = OFF(bind_address), .env = "EP_BIND_ADDRESS",
     .def = "127.0.0.1", .flags = PLB_SET_NONEMPTY, .format = PLB_FMT_HOST,
     .doc = "Address of the TCP load balancer listener: an IP address or RFC 1123 hostname"},
    PLB_SETTING_LISTEN_PORT("bind_port", OFF(bind_port), "bind_address", .def = "7445",
        .env = "EP_BIND_PORT",
        .doc = "Port of the TCP load balancer listener"),
    {.name = "upstreams", .type = PLB_SET_INSTANCES, .offset = OFF(upstreams),
     .flags = PLB_SET_REQUIRED | PLB_SET_NONEMPTY, .role = PLB_ROLE_ENDPOINTS,
     .doc = "Endpoint source instances (static list, endpoint_watch) whose merged, "
            "de-duplicated host:port set is load balanced"},
    {.name = "health_interval", .type = PLB_SET_DURATION, .offset = OFF(health_interval_ms), .env = "EP_HEALTH_INTERVAL",
     .def = "20s", .min = 1000, .doc = "Interval between upstream health checks"},
    {.name = "health_timeout", .type = PLB_SET_DURATION, .offset = OFF(health_timeout_ms), .env = "EP_HEALTH_TIMEOUT",
     .def = "15s", .min = 1000,
     .doc = "Timeout of each health check (connect and readyz probe together) and of each "
            "client dial; must be less than health_interval"},
    {.name = "drain_timeout", .type = PLB_SET_DURATION, .offset = OFF(drain_timeout_ms), .env = "EP_DRAIN_TIMEOUT",
     .def = "30s", .validate = not_negative,
     .doc = "Grace period for connections to removed endpoints, and with readyz to unready "
            "ones while another upstream is ready, before force close (0 closes "
            "immediately); must not be negative"},
    {.name = "upstream_selection", .type = PLB_SET_ENUM, .offset = OFF(upstream_selection), .env = "EP_UPSTREAM_SELECTION",
     .def = "random", .enum_values = selections,
     .doc = "How new connections pick an upstream: random (uniform among pickable "
            "upstreams) or latency (prefer the lowest-latency tier)"},
    {.name = "health_check", .type = PLB_SET_ENUM, .offset = OFF(health_check), .def = "tcp", .env = "EP_HEALTH_CHECK",
     .enum_values = checks,
     .doc = "Upstream health check: tcp (connect only) or readyz (connect, then prefer "
            "upstreams answering 200 on GET /readyz); readyz requires health_check_ca_file"},
    {.name = "health_check_ca_file", .type = PLB_SET_PATH, .offset = OFF(health_check_ca_file), .env = "EP_HEALTH_CHECK_CA_FILE",
     .doc = "CA bundle that verifies the upstream serving certificates; required with readyz"},
    {.name = "health_check_cert_file", .type = PLB_SET_PATH, .env = "EP_HEALTH_CHECK_CERT_FILE",
     .offset = OFF(health_check_cert_file),
     .doc = "Client certificate for the readyz probe, re-read on every probe; set together "
            "with health_check_key_file"},
    {.name = "health_check_key_file", .type = PLB_SET_PATH, .offset = OFF(health_check_key_file), .env = "EP_HEALTH_CHECK_KEY_FILE",
     .doc = "Client key for the readyz probe; may be the same file as the certificate"},
    {.name = "health_check_token_file", .type = PLB_SET_PATH, .env = "EP_HEALTH_CHECK_TOKEN_FILE",
     .offset = OFF(health_check_token_file),
     .doc = "Bearer token file for the readyz probe, re-read on every probe"},
    {.name = "health_check_server_name", .type = PLB_SET_STRING, .env = "EP_HEALTH_CHECK_SERVER_NAME",
     .offset = OFF(health_check_server_name), .def = "kubernetes.default.svc",
     .flags = PLB_SET_NONEMPTY, .format = PLB_FMT_TLS_NAME,
     .doc = "Name the upstream serving certificates are verified against (and sent as SNI); "
            "must not be empty"},
    PLB_SETTINGS_END,
};
/* clang-format on */

static int
set_path(const char *s)
{
    return s && *s;
}

int
tp_config_check(const struct plb_host *host, plb_check *chk, const void *config,
                void (*report)(plb_check *, const char *, const char *, ...))
{
    const struct tp_config *c = config;
    int n = 0;
    (void)host;

    if (c->health_timeout_ms >= c->health_interval_ms) {
        report(chk, "health_timeout", "must be less than health_interval");
        n++;
    }
    if (c->health_check == TP_CHECK_READYZ && !set_path(c->health_check_ca_file)) {
        report(chk, "health_check",
               "readyz requires health_check_ca_file (the CA that verifies the upstreams)");
        n++;
    }
    if (set_path(c->health_check_cert_file) != set_path(c->health_check_key_file)) {
        const char *missing = set_path(c->health_check_cert_file) ? "health_check_key_file"
                                                                  : "health_check_cert_file";
        const char *given = set_path(c->health_check_cert_file) ? "health_check_cert_file"
                                                                : "health_check_key_file";
        report(chk, given,
               "health_check_cert_file and health_check_key_file must be set "
               "together (%s is missing)",
               missing);
        n++;
    }
    return n;
}
