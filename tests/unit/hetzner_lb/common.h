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

static inline json_t *
parse_json(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    ck_assert_msg(j != NULL, "bad test JSON: %s", e.text);
    return j;
}

#endif
