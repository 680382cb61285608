/*
 * mod_hetzner_lb taking over from hcloud-cloud-controller-manager (hccm),
 * as a user migrating drives it: kubectl applies the Service, the hcloud
 * CLI (against the fake Hetzner API) makes the balancer hccm would have
 * made for it — named "a" and the UID without dashes, labelled
 * hcloud-ccm/service-uid=<UID>, on the network, targeting the node and
 * serving the port — and reads it before and after the daemon starts.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "hccm_util.h"
#include "testutil.h"

/* `hcloud load-balancer describe NAME -o json` (new). */
static json_t *
describe(struct env *e, const char *name)
{
    return env_hcloud_json(e, "load-balancer", "describe", name, NULL);
}

/* How many balancers `hcloud load-balancer list --selector SEL` lists. */
static size_t
listed(struct env *e, const char *sel)
{
    json_t *a = env_hcloud_json(e, "load-balancer", "list", "--selector", sel, NULL);
    size_t n = json_array_size(a);
    json_decref(a);
    return n;
}

/* "A Service that hccm served has a balancer labelled
 * hcloud-ccm/service-uid=<UID>. When prismlb finds no balancer of its own
 * for the Service, it adopts that one (adds its own label, keeps name and
 * IPs) ... so a migrating user keeps every external IP." */
START_TEST(hccms_balancer_is_taken_over_with_its_name_and_both_ips)
{
    struct env e;
    struct env_opts o = {.resync_s = 300};
    char name[128], sel[256], ip[64];
    env_fakes_start(&e, 0, NULL, NULL);
    env_node(&e, "n1", "10.0.1.41");
    env_node(&e, "n2", "10.0.1.42");
    char *uid = hccm_apply_service(&e, "web", NULL);
    hccm_balancer(&e, uid, name, sizeof(name));
    json_t *before = describe(&e, name);
    ck_assert_ptr_nonnull(hccm_ip_of(before, "ipv4"));
    ck_assert_ptr_nonnull(hccm_ip_of(before, "ipv6"));
    long creates = env_count_route(&e, "POST /v1/load_balancers");

    env_daemon_start(&e, &o, "prismlb");
    snprintf(sel, sizeof(sel), "robotlb/service-uid=%s", uid);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41,10.0.1.42"), 30000,
             "hccm's balancer labelled as prismlb's and targeting both nodes");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL), 30000, "the status");

    json_t *after = describe(&e, name);
    ck_assert_int_eq(json_integer_value(json_object_get(after, "id")),
                     json_integer_value(json_object_get(before, "id")));
    ck_assert_str_eq(json_string_value(json_object_get(after, "name")), name);
    ck_assert_str_eq(hccm_ip_of(after, "ipv4"), hccm_ip_of(before, "ipv4"));
    ck_assert_str_eq(hccm_ip_of(after, "ipv6"), hccm_ip_of(before, "ipv6"));
    ck_assert_str_eq(hccm_label_of(after, "robotlb/service-uid"), uid);
    ck_assert_str_eq(hccm_label_of(after, "hcloud-ccm/service-uid"), uid);
    ck_assert_str_eq(ip, hccm_ip_of(before, "ipv4"));
    /* no second balancer was made: the CLI lists one, ours */
    ck_assert_uint_eq(listed(&e, sel), 1);
    ck_assert_uint_eq(listed(&e, "hcloud-ccm/service-uid"), 1);
    ck_assert_int_eq(env_count_route(&e, "POST /v1/load_balancers"), creates);
    json_decref(before);
    json_decref(after);
    free(uid);
    env_stop(&e);
}
END_TEST

/* hccm's label names one Service: a balancer hccm made for another UID is
 * not taken (the Service gets a balancer of its own), and is left as it
 * was. */
START_TEST(a_balancer_hccm_made_for_another_service_is_left_alone)
{
    struct env e;
    struct env_opts o = {.resync_s = 300};
    char name[128];
    env_fakes_start(&e, 0, NULL, NULL);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web", NULL);
    hccm_balancer(&e, "0b7f3c52-0000-4000-8000-000000000001", name, sizeof(name));
    json_t *before = describe(&e, name);
    long creates = env_count_route(&e, "POST /v1/load_balancers");

    env_daemon_start(&e, &o, "prismlb");
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "a balancer of its own");
    json_t *mine = env_lbs_of(&e, uid);
    ck_assert_uint_eq(json_array_size(mine), 1);
    ck_assert_str_ne(json_string_value(json_object_get(json_array_get(mine, 0), "name")), name);
    json_t *after = describe(&e, name);
    ck_assert_ptr_null(hccm_label_of(after, "robotlb/service-uid"));
    ck_assert_str_eq(hccm_ip_of(after, "ipv4"), hccm_ip_of(before, "ipv4"));
    ck_assert_int_eq(env_count_route(&e, "POST /v1/load_balancers"), creates + 1);
    json_decref(mine);
    json_decref(before);
    json_decref(after);
    free(uid);
    env_stop(&e);
}
END_TEST

/* hccm's load-balancer.hetzner.cloud/name, type, location and
 * algorithm-type make the balancer as hccm would have: the hcloud CLI shows
 * its name, type lb21, location fsn1 and round_robin (the instance's
 * defaults are hel1, lb11 and least_connections). A location changed after
 * the create moves nothing (Hetzner cannot): a LocationUnchangeable warning
 * naming hccm's annotation. */
START_TEST(hccms_name_type_location_and_algorithm_type_shape_the_balancer)
{
    struct env e;
    json_t *lb = NULL;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web",
                                   "    load-balancer.hetzner.cloud/name: web-hccm\n"
                                   "    load-balancer.hetzner.cloud/type: lb21\n"
                                   "    load-balancer.hetzner.cloud/location: fsn1\n"
                                   "    load-balancer.hetzner.cloud/algorithm-type: round_robin\n");
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "the balancer");
    lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_str_eq(json_string_value(json_object_get(lb, "name")), "web-hccm");
    ck_assert_str_eq(hccm_str2(lb, "load_balancer_type", "name"), "lb21");
    ck_assert_str_eq(hccm_str2(lb, "location", "name"), "fsn1");
    ck_assert_str_eq(hccm_str2(lb, "algorithm", "type"), "round_robin");
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/location=nbg1");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "LocationUnchangeable", "\"nbg1\"",
                               "load-balancer.hetzner.cloud/location", NULL) > 0,
             30000, "the LocationUnchangeable warning");
    json_t *after = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(after);
    ck_assert_int_eq(json_integer_value(json_object_get(after, "id")),
                     json_integer_value(json_object_get(lb, "id")));
    ck_assert_str_eq(hccm_str2(after, "location", "name"), "fsn1");
    json_decref(after);
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

/* Both families naming one thing with two values: an InvalidAnnotation
 * warning naming both, and the balancer stays as the last good set made
 * it (nothing moved, nothing deleted). */
START_TEST(both_families_in_conflict_give_one_warning_naming_both_and_keep_the_balancer)
{
    struct env e;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web",
                                   "    load-balancer.hetzner.cloud/location: fsn1\n"
                                   "    load-balancer.hetzner.cloud/algorithm-type: round_robin\n");
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "the balancer");
    char ip[64];
    /* the status comes once the reconcile that made it has ended */
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL), 30000, "the status");
    json_t *before = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(before);
    long writes = env_last_request(&e);
    hccm_annotate(&e, "web", "robotlb/lb-algorithm=least-connections");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation", "robotlb/lb-algorithm",
                               "load-balancer.hetzner.cloud/algorithm-type", NULL) > 0,
             30000, "the InvalidAnnotation warning naming both");
    json_t *after = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(after);
    ck_assert_int_eq(json_integer_value(json_object_get(after, "id")),
                     json_integer_value(json_object_get(before, "id")));
    ck_assert_str_eq(hccm_str2(after, "location", "name"), "fsn1");
    ck_assert_str_eq(hccm_str2(after, "algorithm", "type"), "round_robin");
    hccm_only_reads_since(&e, writes, "the conflict");
    json_decref(before);
    json_decref(after);
    free(uid);
    env_stop(&e);
}
END_TEST

/* The status has both of the balancer's addresses under
 * load-balancer.hetzner.cloud/ipv6-disabled "false" (hccm's default; the
 * instance's ipv6_ingress is false here), only the IPv4 once it is
 * "true". */
START_TEST(ipv6_disabled_takes_the_ipv6_out_of_the_status)
{
    struct env e;
    char ip[64], *out = NULL;
    size_t n = 0;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid =
        hccm_apply_service(&e, "web", "    load-balancer.hetzner.cloud/ipv6-disabled: \"false\"\n");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, &n) && n == 2, 30000,
             "the status with the IPv4 and the IPv6");
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_str_eq(ip, hccm_ip_of(lb, "ipv4"));
    ck_assert_int_eq(env_kubectl(&e, &out, "get", "service", "web", "-n", "default", "-o",
                                 "jsonpath={.status.loadBalancer.ingress[1].ip}", NULL),
                     0);
    ck_assert_str_eq(out, hccm_ip_of(lb, "ipv6"));
    free(out);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/ipv6-disabled=true");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, &n) && n == 1, 30000,
             "the status with the IPv4 only");
    ck_assert_str_eq(ip, hccm_ip_of(lb, "ipv4"));
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

/* hccm's uses-proxyprotocol and health-check-interval, -timeout and
 * -retries shape the balancer's service as hccm would have (the hcloud CLI
 * shows them), and the status says ipMode Proxy as hccm's does; a value out of Hetzner's bounds is
 * an InvalidAnnotation naming it, and the last good set stays (nothing written). */
START_TEST(hccms_proxyprotocol_and_health_check_timing_shape_the_service)
{
    struct env e;
    char ip[64];
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web",
                                   "    load-balancer.hetzner.cloud/uses-proxyprotocol: \"true\"\n"
                                   "    load-balancer.hetzner.cloud/health-check-interval: 20s\n"
                                   "    load-balancer.hetzner.cloud/health-check-timeout: 5s\n"
                                   "    load-balancer.hetzner.cloud/health-check-retries: \"2\"\n");
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "the balancer");
    char mode[16];
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), mode, sizeof(mode), NULL), 30000,
             "the status");
    ck_assert_str_eq(mode, "Proxy"); /* hccm's ipMode under its proxy protocol */
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    json_t *svc = json_array_get(json_object_get(lb, "services"), 0);
    json_t *hc = json_object_get(svc, "health_check");
    ck_assert(json_is_true(json_object_get(svc, "proxyprotocol")));
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "interval")), 20);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "timeout")), 5);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "retries")), 2);
    long writes = env_last_request(&e);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/health-check-interval=2s");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation",
                               "load-balancer.hetzner.cloud/health-check-interval", "\"2s\"",
                               NULL) > 0,
             30000, "the InvalidAnnotation warning");
    hccm_only_reads_since(&e, writes, "the bad interval");
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb hccm");
    TCase *tc = tcase_create("hccm");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, hccms_balancer_is_taken_over_with_its_name_and_both_ips);
    tcase_add_test(tc, a_balancer_hccm_made_for_another_service_is_left_alone);
    tcase_add_test(tc, hccms_name_type_location_and_algorithm_type_shape_the_balancer);
    tcase_add_test(tc,
                   both_families_in_conflict_give_one_warning_naming_both_and_keep_the_balancer);
    tcase_add_test(tc, ipv6_disabled_takes_the_ipv6_out_of_the_status);
    tcase_add_test(tc, hccms_proxyprotocol_and_health_check_timing_shape_the_service);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
