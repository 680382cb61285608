/*
 * config: the settings table of endpoint_watch and the
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "ew.h"

/* Formats (host:port, URLs, TLS names, RFC 1123 labels) are checked by the
 * daemon (PLB_FMT_*). A port name may be "" (an unnamed port), else an RFC
 * 1123 label, relaxed from the IANA service names Kubernetes allows. */
#define OFF(f) PLB_OFFSET(struct ew_config, f)

/* clang-format off */
const struct plb_setting ew_settings[] = {
    {.name = "endpoints", .type = PLB_SET_STRING_LIST, .offset = OFF(endpoints),
     .env = "EP_ENDPOINTS",
     .flags = PLB_SET_REQUIRED | PLB_SET_NONEMPTY, .format = PLB_FMT_HOST_PORT,
     .doc = "Static (bootstrap) API server endpoints, available at once without cluster "
            "access: each host:port, host an IP address ([addr] for IPv6) or RFC 1123 "
            "hostname, port 1-65535; must not be empty"},
    {.name = "enable_discovery", .type = PLB_SET_BOOL, .offset = OFF(enable_discovery),
     .def = "true", .env = "EP_ENABLE_DISCOVERY",
     .doc = "Watch the EndpointSlices of service_name in namespace for the API servers "
            "(the Kubernetes provider)"},
    PLB_SETTING_KUBECONFIG(OFF(kube.kubeconfig),
        .doc = "kubeconfig file of the discovery client; unset: the service account when "
               "KUBERNETES_SERVICE_HOST is set, else the first file of $KUBECONFIG, else none "
               "(static endpoints only)"),
    PLB_SETTING_KUBE_SERVER(OFF(kube.server),
        .doc = "API server URL overriding the kubeconfig's or the in-cluster one, normally the "
               "local proxy (\"https://127.0.0.1:7445\") so that discovery needs no CNI and "
               "fails over with the proxy"),
    PLB_SETTING_TLS_SERVER_NAME(OFF(kube.tls_server_name),
        .doc = "Name the API server certificate is verified against; unset: "
               "kubernetes.default.svc when server is an https:// URL, else the kubeconfig's"),
    PLB_SETTING_SERVICE_ACCOUNT_DIR(OFF(kube.sa_dir),
        .doc = "Service account directory (token, ca.crt, namespace) of the in-cluster client"),
    {.name = "namespace", .type = PLB_SET_STRING, .offset = OFF(ns), .def = "default",
     .flags = PLB_SET_NONEMPTY, .format = PLB_FMT_DNS_LABEL,
     .doc = "Namespace of the Service whose EndpointSlices are watched"},
    {.name = "service_name", .type = PLB_SET_STRING, .offset = OFF(service_name),
     .def = "kubernetes", .flags = PLB_SET_NONEMPTY, .format = PLB_FMT_DNS_LABEL,
     .doc = "Service whose EndpointSlices are watched (label selector "
            "kubernetes.io/service-name=<service_name>)"},
    {.name = "port_name", .type = PLB_SET_STRING, .offset = OFF(port_name), .def = "https",
     .format = PLB_FMT_DNS_LABEL,
     .doc = "Name of the EndpointSlice port the endpoints are reached on (\"\" for an "
            "unnamed port); slices without it contribute nothing"},
    {.name = "state_file", .type = PLB_SET_PATH, .offset = OFF(state_file),
     .doc = "File (in a directory kept across restarts) holding the endpoints discovery last "
            "found, written when they change (at most once a second); read at start and used "
            "beside the static endpoints until discovery answers; a missing, unreadable, "
            "malformed or oversized file is a warning and ignored. Unset: none"},
    {.name = "state_file_max_age", .type = PLB_SET_DURATION,
     .offset = OFF(state_file_max_age_ms), .def = "168h", .min = 1000,
     .doc = "A state file written longer ago than this is ignored at start"},
    PLB_SETTINGS_END,
};
/* clang-format on */

int
ew_config_check(const struct plb_host *host, plb_check *chk, const void *config,
                plb_check_report *report)
{
    const struct ew_config *c = config;
    (void)host;
    /* Each setting is checked on its own by its validator; the rules
     * between settings: a TLS server name needs TLS somewhere to apply. */
    if (plb_kube_settings_tls_name_unused(&c->kube)) {
        report(chk, "tls_server_name", "has no effect with a plain http:// server");
        return 1;
    }
    /* The file holds what discovery found: without it, nothing. */
    if (c->state_file && *c->state_file && !c->enable_discovery) {
        report(chk, "state_file", "has no effect with enable_discovery = false");
        return 1;
    }
    return 0;
}
