/*
 * hz_env.c: hcloud-cloud-controller-manager's environment variables
 * (HCLOUD_LOAD_BALANCERS_*, HCLOUD_NETWORK) over the module's settings, so
 * that an hccm Deployment's environment means the same to prismlb. Each
 * overrides the setting of the same meaning as its ROBOTLB_* variable
 * does, and yields to that variable when both are set (robotlb's names
 * stay the module's own). Values are read with hccm's syntax: Go's
 * booleans and durations. Pure: the environment comes through a getter.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hz.h"

/* What one variable sets. */
enum env_kind { K_STRING, K_BOOL, K_NOT_BOOL, K_SECONDS, K_INT, K_ALGORITHM, K_CIDR };

struct env_row {
    const char *name;    /* hccm's variable */
    const char *robotlb; /* the ROBOTLB_* that wins over it, or NULL */
    enum env_kind kind;
    size_t offset;  /* in struct hz_config */
    int64_t lo, hi; /* K_SECONDS, K_INT */
};

#define OFF(f) offsetof(struct hz_config, f)

/* clang-format off */
static const struct env_row rows[] = {
    {"HCLOUD_LOAD_BALANCERS_TYPE", "ROBOTLB_DEFAULT_LB_TYPE", K_STRING,
     OFF(default_balancer_type), 0, 0},
    {"HCLOUD_LOAD_BALANCERS_LOCATION", "ROBOTLB_DEFAULT_LB_LOCATION", K_STRING,
     OFF(default_lb_location), 0, 0},
    {"HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", NULL, K_STRING, OFF(default_network_zone), 0, 0},
    {"HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "ROBOTLB_DEFAULT_LB_ALGORITHM", K_ALGORITHM,
     OFF(default_lb_algorithm), 0, 0},
    {"HCLOUD_LOAD_BALANCERS_DISABLE_IPV6", "ROBOTLB_IPV6_INGRESS", K_NOT_BOOL,
     OFF(ipv6_ingress), 0, 0},
    {"HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL", "ROBOTLB_DEFAULT_LB_PROXY_MODE_ENABLED", K_BOOL,
     OFF(default_lb_proxy_mode_enabled), 0, 0},
    {"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "ROBOTLB_DEFAULT_LB_INTERVAL", K_SECONDS,
     OFF(default_lb_interval), HZ_HC_INTERVAL_MIN, HZ_HC_INTERVAL_MAX},
    {"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", "ROBOTLB_DEFAULT_LB_TIMEOUT", K_SECONDS,
     OFF(default_lb_timeout), HZ_HC_TIMEOUT_MIN, HZ_HC_TIMEOUT_MAX},
    {"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "ROBOTLB_DEFAULT_LB_RETRIES", K_INT,
     OFF(default_lb_retries), HZ_HC_RETRIES_MIN, HZ_HC_RETRIES_MAX},
    {"HCLOUD_NETWORK", "ROBOTLB_DEFAULT_NETWORK", K_STRING, OFF(default_network), 0, 0},
    {"HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS", NULL, K_NOT_BOOL, OFF(private_ingress), 0, 0},
    {"HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK", NULL, K_BOOL, OFF(disable_public_network), 0,
     0},
    {"HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", NULL, K_BOOL, OFF(use_private_ip), 0, 0},
    {"HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", NULL, K_CIDR, OFF(private_subnet_ip_range),
     0, 0},
};
/* clang-format on */

/* One variable's value v onto c. 0, or -EINVAL with err naming it. */
static int
apply_row(struct hz_config *c, const struct env_row *r, const char *v, char *err, size_t errlen)
{
    char *base = (char *)c + r->offset;
    int64_t n;
    int b;
    switch (r->kind) {
    case K_STRING:
        if (!*v || strpbrk(v, " \t\r\n")) {
            snprintf(err, errlen, "%s=\"%.64s\": must be a word without blanks", r->name, v);
            return -EINVAL;
        }
        *(const char **)(void *)base = v;
        return 0;
    case K_CIDR: {
        char cidr[HZ_CIDR4_MAX];
        if (hz_go_cidr4(v, cidr) < 0) {
            snprintf(err, errlen, "%s=\"%.64s\": must be an IPv4 CIDR (\"10.0.1.0/24\")", r->name,
                     v);
            return -EINVAL;
        }
        *(const char **)(void *)base = v;
        return 0;
    }
    case K_BOOL:
    case K_NOT_BOOL:
        if ((b = hz_go_bool(v)) < 0) {
            snprintf(err, errlen, "%s=\"%.64s\": must be true or false", r->name, v);
            return -EINVAL;
        }
        *(int *)(void *)base = r->kind == K_BOOL ? b : !b;
        return 0;
    case K_ALGORITHM:
        if ((b = hz_algorithm_from_api(v)) < 0) {
            snprintf(err, errlen, "%s=\"%.64s\": must be round_robin or least_connections", r->name,
                     v);
            return -EINVAL;
        }
        *(int *)(void *)base = b == HZ_ALG_ROUND_ROBIN ? 1 : 0;
        return 0;
    case K_SECONDS:
    case K_INT: {
        char *end;
        errno = 0;
        if (r->kind == K_SECONDS ? hz_go_seconds(v, &n) < 0
                                 : ((n = strtoll(v, &end, 10)), errno || end == v || *end)) {
            snprintf(err, errlen, "%s=\"%.64s\": must be %s", r->name, v,
                     r->kind == K_SECONDS ? "a duration of whole seconds (\"15s\")"
                                          : "a whole number");
            return -EINVAL;
        }
        if (n < r->lo || n > r->hi) {
            snprintf(err, errlen, "%s=\"%.64s\": out of range (%lld to %lld%s)", r->name, v,
                     (long long)r->lo, (long long)r->hi, r->kind == K_SECONDS ? " s" : "");
            return -EINVAL;
        }
        *(int64_t *)(void *)base = n;
        return 0;
    }
    }
    return -EINVAL;
}

int
hz_env_apply(struct hz_config *c, hz_env_get_fn get, void *arg, char *err, size_t errlen)
{
    const char *loc = NULL;
    if (errlen)
        err[0] = '\0';
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct env_row *r = &rows[i];
        const char *v = get(arg, r->name);
        if (!v || (r->robotlb && get(arg, r->robotlb)))
            continue; /* unset, or robotlb's own variable decides */
        if (apply_row(c, r, v, err, errlen) < 0)
            return -EINVAL;
        if (r->offset == OFF(default_lb_location))
            loc = v;
    }
    if (loc && c->default_network_zone) {
        snprintf(err, errlen,
                 "HCLOUD_LOAD_BALANCERS_LOCATION and HCLOUD_LOAD_BALANCERS_NETWORK_ZONE are "
                 "mutually exclusive: give one");
        return -EINVAL;
    }
    return 0;
}
