/* Helpers shared by the mod_hetzner_lb unit suites. */
#ifndef HZ_TEST_COMMON_H
#define HZ_TEST_COMMON_H

#include <check.h>
#include <string.h>

#include "hz.h"

/* Annotations as a NULL-terminated list of key, value pairs. */
static inline const char *
kv_get(void *arg, const char *key)
{
    const char *const *kv = arg;
    for (size_t i = 0; kv && kv[i]; i += 2)
        if (strcmp(kv[i], key) == 0)
            return kv[i + 1];
    return NULL;
}

/* The settings with robotlb's defaults, as the daemon stores them. */
static inline struct hz_config
default_config(void)
{
    struct hz_config c;
    memset(&c, 0, sizeof(c));
    c.hcloud_endpoint = (char *)"https://api.hetzner.cloud/v1";
    c.default_lb_retries = 3;
    c.default_lb_timeout = 10;
    c.default_lb_interval = 15;
    c.default_lb_location = (char *)"hel1";
    c.default_balancer_type = (char *)"lb11";
    c.default_lb_algorithm = 0;
    c.default_ip_mode = HZ_IPMODE_VIP;
    c.resync_interval_ms = 300000;
    return c;
}

/* Service shop/web (uid-1): port 80 -> nodePort 30080. */
static inline struct hz_svc
web_svc(void)
{
    static const struct hz_port p[] = {{"TCP", 80, 30080}};
    return (struct hz_svc){.uid = "uid-1", .name = "web", .ns = "shop", .ports = p, .nports = 1};
}

/* What Service shop/web (uid-1) asks for: port 80 -> nodePort 30080, the
 * targets ips, on the network "k8s" (id 7 in the balancers of the tests). */
static inline void
desired(struct hz_desired *d, const char *const *ips, size_t n)
{
    struct hz_svc s = web_svc();
    struct hz_config c = default_config();
    struct hz_annot a;
    char err[256];
    memset(&a, 0, sizeof(a));
    hz_annot_clear(&a);
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, ips, n, d, err, sizeof(err)), 0);
}

static inline json_t *
parse_json(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    ck_assert_msg(j != NULL, "bad test JSON: %s", e.text);
    return j;
}

#endif
