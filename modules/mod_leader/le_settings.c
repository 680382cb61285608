/*
 * le_settings: mod_leader's settings table, the validators of single
 * values, and the check between settings (client-go's NewLeaderElector
 * rules: lease_duration > renew_deadline > 1.2 × retry_period > 0).
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "ld.h"

/* A message naming the problem; thread-local, as the ABI allows. */
static _Thread_local char msgbuf[256];

/* DNS-1123 subdomain: object names. */
static const char *
valid_subdomain(const void *value)
{
    const char *const *s = value;
    const char *p = *s;
    size_t n = p ? strlen(p) : 0;
    if (!p)
        return NULL;
    if (n == 0 || n > 253)
        return "must be 1 to 253 characters (an RFC 1123 subdomain)";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!(islower(c) || isdigit(c) || c == '-' || c == '.'))
            return "must consist of lower case letters, digits, '-' and '.' (an RFC 1123 "
                   "subdomain)";
        if (c == '.' && (i == 0 || p[i - 1] == '.' || p[i - 1] == '-' || p[i + 1] == '-'))
            return "must have labels that start and end with a letter or digit (an RFC 1123 "
                   "subdomain)";
    }
    if (!isalnum((unsigned char)p[0]) || !isalnum((unsigned char)p[n - 1]))
        return "must start and end with a letter or digit (an RFC 1123 subdomain)";
    return NULL;
}

static const char *
valid_identity(const void *value)
{
    const char *const *s = value;
    const char *p = *s;
    if (!p)
        return NULL;
    size_t n = strlen(p);
    if (n == 0)
        return "must not be empty (unset it for hostname_pid)";
    if (n >= LD_IDENTITY_MAX) {
        snprintf(msgbuf, sizeof(msgbuf), "must be at most %d bytes", LD_IDENTITY_MAX - 1);
        return msgbuf;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
            return "must not contain control characters";
    }
    return NULL;
}

#define OFF(f) PLB_OFFSET(struct ld_config, f)

/* clang-format off */
const struct plb_setting ld_settings[] = {
    {.name = "lease_name", .type = PLB_SET_STRING, .offset = OFF(lease_name),
     .flags = PLB_SET_REQUIRED | PLB_SET_NONEMPTY, .validate = valid_subdomain,
     .doc = "Name of the coordination.k8s.io/v1 Lease that is the lock"},
    {.name = "lease_namespace", .type = PLB_SET_STRING, .offset = OFF(lease_namespace),
     .flags = PLB_SET_NONEMPTY, .format = PLB_FMT_DNS_LABEL,
     .doc = "Namespace of the Lease; unset: the kubeconfig context's or the service "
            "account's namespace, else \"default\""},
    {.name = "identity", .type = PLB_SET_STRING, .offset = OFF(identity),
     .env = "PRISMLB_LEADER_IDENTITY", .validate = valid_identity,
     .doc = "holderIdentity this replica writes; unset: the host name, \"_\" and the process "
            "ID (unique even when two replicas share a host)"},
    {.name = "lease_duration", .type = PLB_SET_DURATION, .offset = OFF(lease_duration_ms),
     .def = "15s", .min = 1000,
     .doc = "How long candidates wait after they last saw the record change before they take "
            "it over (written as leaseDurationSeconds: whole seconds)"},
    {.name = "renew_deadline", .type = PLB_SET_DURATION, .offset = OFF(renew_deadline_ms),
     .def = "10s", .min = 1,
     .doc = "The leader closes its gate when no renew succeeded for this long after its last "
            "successful one was sent; must be less than lease_duration"},
    {.name = "retry_period", .type = PLB_SET_DURATION, .offset = OFF(retry_period_ms),
     .def = "2s", .min = 1,
     .doc = "Interval of renew attempts, and of acquire attempts lengthened by up to 1.2 times "
            "itself at random; 1.2 times it must be less than renew_deadline"},
    {.name = "release_on_cancel", .type = PLB_SET_BOOL, .offset = OFF(release_on_cancel),
     .def = "true",
     .doc = "On shutdown, after the gated instances stopped, write holder \"\" and "
            "leaseDurationSeconds 1 so another replica takes over at its next attempt"},
    PLB_SETTING_KUBECONFIG(OFF(kube.kubeconfig),
        .doc = "kubeconfig file; unset: the service account when KUBERNETES_SERVICE_HOST is "
               "set, else the first file of $KUBECONFIG, else ~/.kube/config"),
    PLB_SETTING_IN_CLUSTER(OFF(kube.in_cluster),
        .doc = "Use the service account in service_account_dir (and "
               "KUBERNETES_SERVICE_HOST/_PORT) even when $KUBECONFIG is set; excludes "
               "kubeconfig"),
    PLB_SETTING_KUBE_CONTEXT(OFF(kube.context), .validate = valid_identity,
        .doc = "kubeconfig context; unset: its current-context"),
    PLB_SETTING_KUBE_SERVER(OFF(kube.server),
        .doc = "API server URL overriding the kubeconfig's or the in-cluster one; a path such "
               "as /clusters/root:org:ws selects a kcp workspace"),
    PLB_SETTING_TLS_SERVER_NAME(OFF(kube.tls_server_name), .flags = PLB_SET_NONEMPTY,
        .doc = "Name the API server certificate is verified against; unset: the server URL's "
               "host (or the kubeconfig's tls-server-name)"),
    PLB_SETTING_SERVICE_ACCOUNT_DIR(OFF(kube.sa_dir),
        .doc = "Service account directory (token, ca.crt, namespace) of the in-cluster client"),
    PLB_SETTINGS_END,
};
/* clang-format on */

/* "10s", "2.4s", "500ms": a duration as the config file would have it. */
static const char *
fmt_ms(int64_t ms, char *buf, size_t len)
{
    if (ms % 1000 == 0)
        snprintf(buf, len, "%llds", (long long)(ms / 1000));
    else if (ms >= 1000)
        snprintf(buf, len,
                 "%g"
                 "s",
                 (double)ms / 1000.0);
    else
        snprintf(buf, len, "%lldms", (long long)ms);
    return buf;
}

int
ld_check(const struct plb_host *host, plb_check *chk, const void *config, plb_check_report *report)
{
    const struct ld_config *c = config;
    char a[32], b[32];
    int problems = 0;
    (void)host;

    if (c->lease_duration_ms % 1000 != 0) {
        report(chk, "lease_duration",
               "must be a whole number of seconds (it is written as leaseDurationSeconds), "
               "got %s",
               fmt_ms(c->lease_duration_ms, a, sizeof(a)));
        problems++;
    }
    if (c->retry_period_ms <= 0) {
        report(chk, "retry_period", "must be greater than zero");
        problems++;
    }
    if (c->renew_deadline_ms <= 0) {
        report(chk, "renew_deadline", "must be greater than zero");
        problems++;
    }
    if (c->lease_duration_ms <= c->renew_deadline_ms) {
        report(chk, "lease_duration", "must be greater than renew_deadline (%s), got %s",
               fmt_ms(c->renew_deadline_ms, a, sizeof(a)),
               fmt_ms(c->lease_duration_ms, b, sizeof(b)));
        problems++;
    }
    /* client-go: renewDeadline <= time.Duration(JitterFactor * retryPeriod)
     * is an error; compare in integers: 5 × deadline against 6 × retry. */
    if (c->renew_deadline_ms > 0 && c->retry_period_ms > 0 &&
        c->renew_deadline_ms * 5 <= c->retry_period_ms * 6) {
        report(chk, "renew_deadline", "must be greater than 1.2 × retry_period (%s), got %s",
               fmt_ms(c->retry_period_ms * 6 / 5, a, sizeof(a)),
               fmt_ms(c->renew_deadline_ms, b, sizeof(b)));
        problems++;
    }
    if (c->kube.in_cluster && c->kube.kubeconfig) {
        report(chk, "in_cluster", "excludes kubeconfig: set one of them");
        problems++;
    }
    if (plb_kube_settings_tls_name_unused(&c->kube)) {
        report(chk, "tls_server_name", "has no effect with a plain http:// server");
        problems++;
    }
    return problems;
}
