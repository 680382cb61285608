/*
 * The robotlb/ annotations of the spec's example Service
 * (modules/mod_hetzner_lb/hz_annot.c): each parsed, each validated; a bad
 * value is one message for a warning Event and leaves nothing parsed, so
 * the caller keeps the last good state.
 */
#include <errno.h>
#include <stdio.h>

#include "common.h"
#include "testutil.h"

/* The example Service of the spec, with a name Hetzner accepts. */
static const char *const example[] = {
    "robotlb/balancer",
    "custom-name",
    "robotlb/lb-network",
    "my-net",
    "robotlb/lb-private-ip",
    "10.10.10.10",
    "robotlb/node-selector",
    "node-role.kubernetes.io/control-plane!=true,beta.kubernetes.io/arch=amd64",
    "robotlb/lb-check-interval",
    "5",
    "robotlb/lb-timeout",
    "3",
    "robotlb/lb-retries",
    "3",
    "robotlb/lb-proxy-mode",
    "false",
    "robotlb/lb-location",
    "hel1",
    "robotlb/lb-algorithm",
    "least-connection",
    "robotlb/balancer-type",
    "lb11",
    "robotlb/ip-mode",
    "VIP",
    NULL,
};

START_TEST(every_annotation_of_the_example_service_is_read)
{
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)example, &a, err, sizeof(err)), 0);
    ck_assert_str_eq(err, "");
    ck_assert_str_eq(a.balancer, "custom-name");
    ck_assert_str_eq(a.network, "my-net");
    ck_assert_str_eq(a.private_ip, "10.10.10.10");
    ck_assert_str_eq(a.node_selector, example[7]);
    ck_assert_int_eq(a.check_interval, 5);
    ck_assert_int_eq(a.timeout, 3);
    ck_assert_int_eq(a.retries, 3);
    ck_assert_int_eq(a.proxy_mode, 0);
    ck_assert_str_eq(a.location, "hel1");
    ck_assert_int_eq(a.algorithm, HZ_ALG_LEAST_CONNECTIONS);
    ck_assert_str_eq(a.type, "lb11");
    ck_assert_int_eq(a.ip_mode, HZ_IPMODE_VIP);
    hz_annot_clear(&a);
}
END_TEST

START_TEST(absent_annotations_leave_the_defaults_to_the_settings)
{
    struct hz_annot a;
    char err[128];
    const char *const none[] = {"other/annotation", "x", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)none, &a, err, sizeof(err)), 0);
    ck_assert_ptr_null(a.balancer);
    ck_assert_ptr_null(a.network);
    ck_assert_ptr_null(a.private_ip);
    ck_assert_ptr_null(a.node_selector);
    ck_assert_ptr_null(a.location);
    ck_assert_ptr_null(a.type);
    ck_assert_int_eq(a.check_interval, -1);
    ck_assert_int_eq(a.timeout, -1);
    ck_assert_int_eq(a.retries, -1);
    ck_assert_int_eq(a.proxy_mode, -1);
    ck_assert_int_eq(a.algorithm, -1);
    ck_assert_int_eq(a.ip_mode, -1);
    ck_assert_int_eq(a.ipv6_disabled, -1);
    hz_annot_clear(&a);
}
END_TEST

/* Parse one bad annotation; expect -EINVAL, an empty result, and a message
 * naming the annotation and its value. */
static void
expect_bad(const char *key, const char *value, const char *needle)
{
    int loc = strcmp(key, "robotlb/lb-location") == 0;
    const char *kv[] = {loc ? "robotlb/balancer-type" : "robotlb/lb-location",
                        loc ? "lb21" : "fsn1", key, value, NULL};
    struct hz_annot a;
    char err[512];
    int rc = hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err));
    ck_assert_msg(rc == -EINVAL, "%s=%s accepted", key, value);
    ck_assert_msg(strstr(err, key) != NULL, "message does not name %s: %s", key, err);
    ck_assert_msg(strstr(err, needle) != NULL, "message lacks \"%s\": %s", needle, err);
    /* nothing of the bad set is kept, not even the good location */
    ck_assert_ptr_null(a.location);
    ck_assert_ptr_null(a.type);
    ck_assert_int_eq(a.algorithm, -1);
    hz_annot_clear(&a);
}

/* "Balancing algorithm. Can be either least-connection, round-robin" */
START_TEST(lb_algorithm_is_least_connection_or_round_robin)
{
    const char *kv[] = {"robotlb/lb-algorithm", "round-robin", NULL};
    const char *kv2[] = {"robotlb/lb-algorithm", "least-connections", NULL};
    struct hz_annot a;
    char err[256];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.algorithm, HZ_ALG_ROUND_ROBIN);
    hz_annot_clear(&a);
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv2, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.algorithm, HZ_ALG_LEAST_CONNECTIONS);
    hz_annot_clear(&a);
    expect_bad("robotlb/lb-algorithm", "random", "\"random\"");
}
END_TEST

/* "Type of an IP when added to the status. Can be either VIP or Proxy." */
START_TEST(ip_mode_is_vip_or_proxy)
{
    const char *kv[] = {"robotlb/ip-mode", "Proxy", NULL};
    struct hz_annot a;
    char err[256];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.ip_mode, HZ_IPMODE_PROXY);
    hz_annot_clear(&a);
    expect_bad("robotlb/ip-mode", "vip", "\"vip\"");
}
END_TEST

/* "Whether to use proxy mode for this target." */
START_TEST(lb_proxy_mode_is_true_or_false)
{
    const char *kv[] = {"robotlb/lb-proxy-mode", "true", NULL};
    struct hz_annot a;
    char err[256];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.proxy_mode, 1);
    hz_annot_clear(&a);
    expect_bad("robotlb/lb-proxy-mode", "yes", "\"yes\"");
}
END_TEST

/* robotlb/lb-public-interface: "false" makes a private-only balancer. */
START_TEST(lb_public_interface_is_true_or_false)
{
    const char *kv[] = {"robotlb/lb-public-interface", "false", NULL};
    const char *none[] = {NULL};
    struct hz_annot a;
    char err[256];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.public_iface, 0);
    hz_annot_clear(&a);
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)none, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.public_iface, -1);
    hz_annot_clear(&a);
    expect_bad("robotlb/lb-public-interface", "no", "\"no\"");
}
END_TEST

/* "How often to run health probes." "Timeout for a single probe." "How many
 * failed probes before marking the node as unhealthy." — whole numbers
 * within Hetzner's bounds. */
START_TEST(health_check_annotations_are_whole_numbers_within_hetzner_bounds)
{
    expect_bad("robotlb/lb-check-interval", "5s", "\"5s\"");
    expect_bad("robotlb/lb-check-interval", "2", "out of range");
    expect_bad("robotlb/lb-check-interval", "61", "out of range");
    expect_bad("robotlb/lb-timeout", "0", "out of range");
    expect_bad("robotlb/lb-timeout", "-1", "\"-1\"");
    expect_bad("robotlb/lb-retries", "6", "out of range");
    expect_bad("robotlb/lb-retries", "three", "\"three\"");
}
END_TEST

/* "Requests specific IP address for the load balancer in the private
 * network." */
START_TEST(lb_private_ip_is_an_ipv4_address)
{
    expect_bad("robotlb/lb-private-ip", "10.10.10", "\"10.10.10\"");
    expect_bad("robotlb/lb-private-ip", "fd00::1", "\"fd00::1\"");
}
END_TEST

/* The example's "custom name" cannot be a Hetzner name (no blanks): the
 * service gets a warning instead of a failed create. */
START_TEST(a_balancer_name_with_blanks_is_refused)
{
    expect_bad("robotlb/balancer", "custom name", "blanks");
    expect_bad("robotlb/balancer", "", "empty");
    expect_bad("robotlb/lb-network", "my net", "blanks");
    expect_bad("robotlb/lb-location", "", "empty");
    expect_bad("robotlb/balancer-type", "lb 11", "blanks");
}
END_TEST

/* Every bad annotation is named in the one warning. */
START_TEST(every_bad_annotation_is_named_in_one_message)
{
    const char *kv[] = {
        "robotlb/lb-retries", "9", "robotlb/ip-mode", "X", "robotlb/lb-algorithm", "fastest", NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "robotlb/lb-retries"));
    ck_assert_ptr_nonnull(strstr(err, "robotlb/ip-mode"));
    ck_assert_ptr_nonnull(strstr(err, "robotlb/lb-algorithm"));
    hz_annot_clear(&a);
    /* a short buffer is cut, never overrun */
    char small[16];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, small, sizeof(small)), -EINVAL);
    ck_assert_uint_le(strlen(small), 15);
    hz_annot_clear(&a);
}
END_TEST

/* hccm's load-balancer.hetzner.cloud/name, type, location and
 * algorithm-type (round_robin, least_connections) say what robotlb's
 * balancer, balancer-type, lb-location and lb-algorithm say. */
START_TEST(hccms_name_type_location_and_algorithm_type_are_read)
{
    const char *kv[] = {"load-balancer.hetzner.cloud/name",
                        "web-lb",
                        "load-balancer.hetzner.cloud/type",
                        "lb21",
                        "load-balancer.hetzner.cloud/location",
                        "fsn1",
                        "load-balancer.hetzner.cloud/algorithm-type",
                        "round_robin",
                        "load-balancer.hetzner.cloud/ipv6-disabled",
                        "true",
                        NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_str_eq(a.balancer, "web-lb");
    ck_assert_str_eq(a.type, "lb21");
    ck_assert_str_eq(a.location, "fsn1");
    ck_assert_int_eq(a.algorithm, HZ_ALG_ROUND_ROBIN);
    ck_assert_int_eq(a.ipv6_disabled, 1);
    /* the messages about type and location name the annotation given */
    ck_assert_str_eq(a.type_key, "load-balancer.hetzner.cloud/type");
    ck_assert_str_eq(a.location_key, "load-balancer.hetzner.cloud/location");
    hz_annot_clear(&a);
    expect_bad("load-balancer.hetzner.cloud/algorithm-type", "round-robin", "\"round-robin\"");
    expect_bad("load-balancer.hetzner.cloud/ipv6-disabled", "yes", "\"yes\"");
    expect_bad("load-balancer.hetzner.cloud/name", "web lb", "blanks");
}
END_TEST

/* "Where a Service carries both families for the same thing, one
 * documented rule decides (and a conflicting pair is an InvalidAnnotation
 * warning naming both)": the same value twice is taken, two different
 * ones reject the set with both named. */
START_TEST(both_families_alike_are_taken_and_a_conflict_names_both)
{
    const char *alike[] = {"robotlb/lb-location",
                           "fsn1",
                           "load-balancer.hetzner.cloud/location",
                           "fsn1",
                           "robotlb/lb-algorithm",
                           "round-robin",
                           "load-balancer.hetzner.cloud/algorithm-type",
                           "round_robin",
                           NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)alike, &a, err, sizeof(err)), 0);
    ck_assert_str_eq(a.location, "fsn1");
    ck_assert_str_eq(a.location_key, "robotlb/lb-location");
    ck_assert_int_eq(a.algorithm, HZ_ALG_ROUND_ROBIN);
    hz_annot_clear(&a);
    const char *pairs[][4] = {
        {"robotlb/balancer", "one", "load-balancer.hetzner.cloud/name", "two"},
        {"robotlb/balancer-type", "lb11", "load-balancer.hetzner.cloud/type", "lb21"},
        {"robotlb/lb-location", "hel1", "load-balancer.hetzner.cloud/location", "fsn1"},
        {"robotlb/lb-algorithm", "least-connections", "load-balancer.hetzner.cloud/algorithm-type",
         "round_robin"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        const char *kv[] = {pairs[i][0], pairs[i][1], pairs[i][2], pairs[i][3], NULL};
        ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), -EINVAL);
        for (int k = 0; k < 4; k++)
            ck_assert_msg(strstr(err, pairs[i][k]) != NULL, "\"%s\" not named: %s", pairs[i][k],
                          err);
        ck_assert_ptr_null(a.balancer);
        ck_assert_ptr_null(a.location);
        hz_annot_clear(&a);
    }
}
END_TEST

/* hccm's network-zone places the balancer instead of a location; the two
 * are mutually exclusive (hccm's documentation), whichever family gives
 * the location: one InvalidAnnotation naming both. */
START_TEST(network_zone_is_read_and_excludes_a_location)
{
    const char *zone[] = {"load-balancer.hetzner.cloud/network-zone", "eu-central", NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)zone, &a, err, sizeof(err)), 0);
    ck_assert_str_eq(a.network_zone, "eu-central");
    ck_assert_ptr_null(a.location);
    hz_annot_clear(&a);
    const char *loc[] = {"robotlb/lb-location", "load-balancer.hetzner.cloud/location"};
    for (size_t i = 0; i < 2; i++) {
        const char *kv[] = {"load-balancer.hetzner.cloud/network-zone", "eu-central", loc[i],
                            "fsn1", NULL};
        ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "load-balancer.hetzner.cloud/network-zone"));
        ck_assert_ptr_nonnull(strstr(err, loc[i]));
        ck_assert_ptr_nonnull(strstr(err, "mutually exclusive"));
        ck_assert_ptr_null(a.network_zone);
        hz_annot_clear(&a);
    }
    const char *empty[] = {"load-balancer.hetzner.cloud/network-zone", "", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)empty, &a, err, sizeof(err)), -EINVAL);
    hz_annot_clear(&a);
}
END_TEST

/* hccm's node-selector is read raw (the core's selection parses it) and
 * marked as hccm's, which selects under any traffic policy; robotlb's
 * beside it must say the same, else both are named. */
START_TEST(hccms_node_selector_is_read_and_checked_against_robotlbs)
{
    const char *h[] = {"load-balancer.hetzner.cloud/node-selector", "arch in (amd64, arm64)", NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)h, &a, err, sizeof(err)), 0);
    ck_assert_str_eq(a.node_selector, "arch in (amd64, arm64)");
    ck_assert_int_eq(a.selector_hccm, 1);
    ck_assert_str_eq(a.selector_key, "load-balancer.hetzner.cloud/node-selector");
    hz_annot_clear(&a);
    const char *r[] = {"robotlb/node-selector", "arch=amd64", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)r, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.selector_hccm, 0);
    ck_assert_str_eq(a.selector_key, "robotlb/node-selector");
    hz_annot_clear(&a);
    const char *alike[] = {"robotlb/node-selector", "arch=amd64",
                           "load-balancer.hetzner.cloud/node-selector", "arch=amd64", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)alike, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.selector_hccm, 1);
    hz_annot_clear(&a);
    const char *conflict[] = {"robotlb/node-selector", "arch=amd64",
                              "load-balancer.hetzner.cloud/node-selector", "arch=arm64", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)conflict, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "robotlb/node-selector"));
    ck_assert_ptr_nonnull(strstr(err, "load-balancer.hetzner.cloud/node-selector"));
    ck_assert_ptr_null(a.node_selector);
    hz_annot_clear(&a);
}
END_TEST

/* hccm writes ipMode Proxy when its uses-proxyprotocol is on and VIP when
 * it is off; robotlb/ip-mode, when given, decides instead. */
START_TEST(hccms_proxyprotocol_sets_the_ip_mode_unless_robotlb_names_one)
{
    const char *cases[][4] = {
        {"load-balancer.hetzner.cloud/uses-proxyprotocol", "true", NULL, NULL},
        {"load-balancer.hetzner.cloud/uses-proxyprotocol", "0", NULL, NULL},
        {"load-balancer.hetzner.cloud/uses-proxyprotocol", "true", "robotlb/ip-mode", "VIP"},
        {"load-balancer.hetzner.cloud/uses-proxyprotocol", "false", "robotlb/ip-mode", "Proxy"},
    };
    const int want[] = {HZ_IPMODE_PROXY, HZ_IPMODE_VIP, HZ_IPMODE_VIP, HZ_IPMODE_PROXY};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *kv[] = {cases[i][0], cases[i][1], cases[i][2], cases[i][3], NULL};
        struct hz_annot a;
        char err[256];
        ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
        ck_assert_msg(a.ip_mode == want[i], "case %zu: ipMode %d", i, a.ip_mode);
        hz_annot_clear(&a);
    }
}
END_TEST

/* hccm's uses-proxyprotocol (a Go boolean) and health-check-interval,
 * -timeout (Go durations, whole seconds) and -retries fill what robotlb's
 * lb-proxy-mode, lb-check-interval, lb-timeout and lb-retries fill, within
 * Hetzner's bounds; beside robotlb's they must agree. */
START_TEST(hccms_proxyprotocol_and_health_check_timing_are_read)
{
    const char *h[] = {"load-balancer.hetzner.cloud/uses-proxyprotocol",
                       "True",
                       "load-balancer.hetzner.cloud/health-check-interval",
                       "20s",
                       "load-balancer.hetzner.cloud/health-check-timeout",
                       "5000ms",
                       "load-balancer.hetzner.cloud/health-check-retries",
                       "2",
                       "robotlb/lb-retries",
                       "2",
                       NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)h, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.proxy_mode, 1);
    ck_assert_int_eq(a.ip_mode, HZ_IPMODE_PROXY); /* hccm's status follows it */
    ck_assert_int_eq(a.check_interval, 20);
    ck_assert_int_eq(a.timeout, 5);
    ck_assert_int_eq(a.retries, 2);
    hz_annot_clear(&a);
    const char *bad[][2] = {
        {"load-balancer.hetzner.cloud/uses-proxyprotocol", "yes"},
        {"load-balancer.hetzner.cloud/health-check-interval", "20"},
        {"load-balancer.hetzner.cloud/health-check-interval", "2s"},
        {"load-balancer.hetzner.cloud/health-check-timeout", "61s"},
        {"load-balancer.hetzner.cloud/health-check-timeout", "1500ms"},
        {"load-balancer.hetzner.cloud/health-check-retries", "6"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *kv[] = {bad[i][0], bad[i][1], NULL};
        ck_assert_msg(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)) == -EINVAL,
                      "%s: %s accepted", bad[i][0], bad[i][1]);
        ck_assert_ptr_nonnull(strstr(err, bad[i][0]));
        hz_annot_clear(&a);
    }
    const char *conflict[] = {"robotlb/lb-check-interval", "15",
                              "load-balancer.hetzner.cloud/health-check-interval", "20s", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)conflict, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "robotlb/lb-check-interval"));
    ck_assert_ptr_nonnull(strstr(err, "load-balancer.hetzner.cloud/health-check-interval"));
    hz_annot_clear(&a);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb annotations");
    TCase *tc = tcase_create("annotations");
    tcase_add_test(tc, every_annotation_of_the_example_service_is_read);
    tcase_add_test(tc, absent_annotations_leave_the_defaults_to_the_settings);
    tcase_add_test(tc, lb_algorithm_is_least_connection_or_round_robin);
    tcase_add_test(tc, ip_mode_is_vip_or_proxy);
    tcase_add_test(tc, lb_proxy_mode_is_true_or_false);
    tcase_add_test(tc, lb_public_interface_is_true_or_false);
    tcase_add_test(tc, health_check_annotations_are_whole_numbers_within_hetzner_bounds);
    tcase_add_test(tc, lb_private_ip_is_an_ipv4_address);
    tcase_add_test(tc, a_balancer_name_with_blanks_is_refused);
    tcase_add_test(tc, every_bad_annotation_is_named_in_one_message);
    tcase_add_test(tc, hccms_name_type_location_and_algorithm_type_are_read);
    tcase_add_test(tc, both_families_alike_are_taken_and_a_conflict_names_both);
    tcase_add_test(tc, network_zone_is_read_and_excludes_a_location);
    tcase_add_test(tc, hccms_node_selector_is_read_and_checked_against_robotlbs);
    tcase_add_test(tc, hccms_proxyprotocol_and_health_check_timing_are_read);
    tcase_add_test(tc, hccms_proxyprotocol_sets_the_ip_mode_unless_robotlb_names_one);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
