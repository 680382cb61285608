/*
 * hcloud-cloud-controller-manager's network and status rules, as a user
 * drives them: kubectl applies and annotates the Service and reads its
 * status, the hcloud CLI (against the fake Hetzner API) reads the balancer.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "hccm_util.h"
#include "testutil.h"

/* `kubectl get service NAME -o jsonpath=PATH` of namespace default (new),
 * or NULL when kubectl fails. */
static char *
jsonpath(struct env *e, const char *name, const char *path)
{
    char *out = NULL, arg[256];
    snprintf(arg, sizeof(arg), "jsonpath=%s", path);
    if (env_kubectl(e, &out, "get", "service", name, "-n", "default", "-o", arg, NULL) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* 1 when the jsonpath of Service name reads want. */
static int
jsonpath_is(struct env *e, const char *name, const char *path, const char *want)
{
    char *v = jsonpath(e, name, path);
    int ok = v && strcmp(v, want) == 0;
    free(v);
    return ok;
}

/* "hostname: Specifies the hostname of the Load Balancer. This will be used
 * as ingress address instead of the Load Balancer IP addresses": the status
 * is the hostname alone (no IP, no ipMode); removing the annotation brings
 * the IP back; a hostname the API server would refuse is an
 * InvalidAnnotation naming it, and the status stays. */
START_TEST(hostname_replaces_the_ips_in_the_status)
{
    struct env e;
    char ip[64];
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web",
                                   "    load-balancer.hetzner.cloud/hostname: lb.example.com\n"
                                   "    load-balancer.hetzner.cloud/ipv6-disabled: \"false\"\n");
    WAIT_FOR(&e,
             jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[0].hostname}", "lb.example.com"),
             30000, "the hostname in the status");
    ck_assert(jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[*].ip}", ""));
    ck_assert(jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[*].ipMode}", ""));
    size_t n = 0;
    ck_assert(!env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, &n));
    ck_assert_uint_eq(n, 1); /* the hostname alone, no IPv4 or IPv6 beside it */
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb); /* the balancer is made all the same */

    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/hostname=10.1.2.3");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation",
                               "load-balancer.hetzner.cloud/hostname", "\"10.1.2.3\"", "IP address",
                               NULL) > 0,
             30000, "the InvalidAnnotation warning");
    ck_assert(
        jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[0].hostname}", "lb.example.com"));

    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/hostname-");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL) && ip[0], 30000,
             "the IPs back in the status");
    ck_assert_str_eq(ip, hccm_ip_of(lb, "ipv4"));
    ck_assert(jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[*].hostname}", ""));
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb hccm_network");
    TCase *tc = tcase_create("hccm_network");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, hostname_replaces_the_ips_in_the_status);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
