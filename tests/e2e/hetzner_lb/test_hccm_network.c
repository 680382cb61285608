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

/* The balancer's public_net.enabled and its first private_net IP, as
 * `hcloud load-balancer describe NAME -o json` shows them (its list leaves
 * private_net out). */
static void
cli_public_private(struct env *e, const char *name, int *enabled, char *ip, size_t len)
{
    json_t *lb = env_hcloud_json(e, "load-balancer", "describe", name, NULL);
    ck_assert_ptr_nonnull(lb);
    *enabled = !json_is_false(json_object_get(json_object_get(lb, "public_net"), "enabled"));
    const char *p = json_string_value(
        json_object_get(json_array_get(json_object_get(lb, "private_net"), 0), "ip"));
    snprintf(ip, len, "%s", p ? p : "");
    json_decref(lb);
}

/* "disable-public-network: Disables the public network of the Hetzner Cloud
 * Load Balancer ... all traffic is routed over the private network", with
 * "private-ipv4" its address in the network (default_network k8s here):
 * the hcloud CLI shows the public interface off and that private IP, and
 * the status holds the private IP, as hccm's does without a public
 * network. Beside robotlb's lb-public-interface saying otherwise: an
 * InvalidAnnotation naming both, nothing written. "false" turns the public
 * interface back on and the status to the public IPv4. */
START_TEST(disable_public_network_and_private_ipv4_make_a_private_balancer)
{
    struct env e;
    char ip[64], pip[64];
    int enabled;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid =
        hccm_apply_service(&e, "web",
                           "    load-balancer.hetzner.cloud/disable-public-network: \"true\"\n"
                           "    load-balancer.hetzner.cloud/private-ipv4: 10.0.0.30\n");
    WAIT_FOR(&e,
             env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL) && strcmp(ip, "10.0.0.30") == 0,
             30000, "the private IP in the status");
    cli_public_private(&e, "web.default", &enabled, pip, sizeof(pip));
    ck_assert_int_eq(enabled, 0);
    ck_assert_str_eq(pip, "10.0.0.30");

    long writes = env_last_request(&e);
    hccm_annotate(&e, "web", "robotlb/lb-public-interface=true");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation", "robotlb/lb-public-interface",
                               "load-balancer.hetzner.cloud/disable-public-network", NULL) > 0,
             30000, "the InvalidAnnotation naming both");
    hccm_only_reads_since(&e, writes, "the conflict");

    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/disable-public-network=false");
    WAIT_FOR(&e,
             env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL) && strncmp(ip, "10.0.", 5) != 0,
             30000, "the public IPv4 in the status");
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_str_eq(ip, hccm_ip_of(lb, "ipv4"));
    ck_assert(json_is_true(json_object_get(json_object_get(lb, "public_net"), "enabled")));
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
    tcase_add_test(tc, disable_public_network_and_private_ipv4_make_a_private_balancer);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
