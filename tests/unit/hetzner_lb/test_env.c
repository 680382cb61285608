/*
 * hcloud-cloud-controller-manager's environment variables over the
 * module's settings (hz_env.c), one test per rule of the module README's
 * hccm table.
 */
#include <errno.h>

#include "common.h"
#include "testutil.h"

/* "HCLOUD_LOAD_BALANCERS_* ... are honoured as overrides of the module's
 * settings, as ROBOTLB_* are": each sets the setting of its meaning, in
 * hccm's syntax (Go booleans and durations). */
START_TEST(hccms_variables_set_the_settings_of_the_same_meaning)
{
    const char *env[] = {"HCLOUD_LOAD_BALANCERS_TYPE",
                         "lb21",
                         "HCLOUD_LOAD_BALANCERS_LOCATION",
                         "fsn1",
                         "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE",
                         "round_robin",
                         "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6",
                         "False",
                         "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL",
                         "1",
                         "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL",
                         "1m",
                         "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT",
                         "15000ms",
                         "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES",
                         "5",
                         "HCLOUD_NETWORK",
                         "k8s",
                         NULL};
    struct hz_config c = default_config();
    char err[256];
    ck_assert_int_eq(hz_env_apply(&c, kv_get, (void *)env, err, sizeof(err)), 0);
    ck_assert_str_eq(c.default_balancer_type, "lb21");
    ck_assert_str_eq(c.default_lb_location, "fsn1");
    ck_assert_int_eq(hz_config_algorithm(&c), HZ_ALG_ROUND_ROBIN);
    ck_assert_int_eq(c.ipv6_ingress, 1);
    ck_assert_int_eq(c.default_lb_proxy_mode_enabled, 1);
    ck_assert_int_eq(c.default_lb_interval, 60);
    ck_assert_int_eq(c.default_lb_timeout, 15);
    ck_assert_int_eq(c.default_lb_retries, 5);
    ck_assert_str_eq(c.default_network, "k8s");
    ck_assert_ptr_null(c.default_network_zone);
}
END_TEST

/* robotlb's own variable for the same setting wins; unset ones change
 * nothing. */
START_TEST(robotlbs_variable_wins_over_hccms)
{
    const char *env[] = {"HCLOUD_LOAD_BALANCERS_TYPE",
                         "lb21",
                         "ROBOTLB_DEFAULT_LB_TYPE",
                         "lb31",
                         "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES",
                         "5",
                         "ROBOTLB_DEFAULT_LB_RETRIES",
                         "2",
                         NULL};
    struct hz_config c = default_config();
    c.default_balancer_type = (char *)"lb31";
    c.default_lb_retries = 2;
    char err[256];
    ck_assert_int_eq(hz_env_apply(&c, kv_get, (void *)env, err, sizeof(err)), 0);
    ck_assert_str_eq(c.default_balancer_type, "lb31");
    ck_assert_int_eq(c.default_lb_retries, 2);
    ck_assert_str_eq(c.default_lb_location, "hel1");
    ck_assert_int_eq(c.default_lb_interval, 15);
}
END_TEST

/* A value hccm would not take, or one out of Hetzner's bounds, is an
 * error naming the variable; location and network zone exclude each
 * other. */
START_TEST(bad_values_are_refused_naming_the_variable)
{
    const char *bad[][2] = {
        {"HCLOUD_LOAD_BALANCERS_DISABLE_IPV6", "yes"},
        {"HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "round-robin"},
        {"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "10"},
        {"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "1500ms"},
        {"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "2m"},
        {"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", "0s"},
        {"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "6"},
        {"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "3x"},
        {"HCLOUD_LOAD_BALANCERS_TYPE", "lb 11"},
        {"HCLOUD_NETWORK", ""},
    };
    char err[256];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *env[] = {bad[i][0], bad[i][1], NULL};
        struct hz_config c = default_config();
        ck_assert_msg(hz_env_apply(&c, kv_get, (void *)env, err, sizeof(err)) == -EINVAL,
                      "%s=%s accepted", bad[i][0], bad[i][1]);
        ck_assert_ptr_nonnull(strstr(err, bad[i][0]));
    }
    const char *both[] = {"HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1",
                          "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "eu-central", NULL};
    struct hz_config c = default_config();
    ck_assert_int_eq(hz_env_apply(&c, kv_get, (void *)both, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "mutually exclusive"));
}
END_TEST

/* HCLOUD_LOAD_BALANCERS_NETWORK_ZONE: new balancers go to the zone instead
 * of default_lb_location; a location annotation still wins. */
START_TEST(the_network_zone_variable_places_new_balancers_by_zone)
{
    const char *env[] = {"HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "us-east", NULL};
    struct hz_svc s = web_svc();
    struct hz_config c = default_config();
    struct hz_annot a;
    struct hz_desired d;
    char err[256];
    memset(&a, 0, sizeof(a));
    hz_annot_clear(&a);
    ck_assert_int_eq(hz_env_apply(&c, kv_get, (void *)env, err, sizeof(err)), 0);
    ck_assert_str_eq(c.default_network_zone, "us-east");
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_int_eq(d.by_zone, 1);
    ck_assert_str_eq(d.location, "us-east");
    hz_desired_clear(&d);
    a.location = (char *)"ash";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_int_eq(d.by_zone, 0);
    ck_assert_str_eq(d.location, "ash");
    hz_desired_clear(&d);
}
END_TEST

/* HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS, _DISABLE_PUBLIC_NETWORK
 * and _USE_PRIVATE_IP (Go booleans) set private_ingress (upside down),
 * disable_public_network and use_private_ip; a private-only default needs
 * a network, and so does use_private_ip, each named. */
START_TEST(hccms_private_network_variables_set_their_settings)
{
    const char *env[] = {"HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS",
                         "F",
                         "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK",
                         "true",
                         "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP",
                         "1",
                         NULL};
    struct hz_svc s = web_svc();
    struct hz_config c = default_config();
    struct hz_annot a;
    struct hz_desired d;
    char err[256];
    memset(&a, 0, sizeof(a));
    hz_annot_clear(&a);
    ck_assert_int_eq(hz_env_apply(&c, kv_get, (void *)env, err, sizeof(err)), 0);
    ck_assert_int_eq(c.private_ingress, 1);
    ck_assert_int_eq(c.disable_public_network, 1);
    ck_assert_int_eq(c.use_private_ip, 1);
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP"));
    c.use_private_ip = 0;
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK"));
    c.default_network = (char *)"k8s";
    c.use_private_ip = 1;
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_int_eq(d.public_iface, 0);
    hz_desired_clear(&d);
    const char *bad[][2] = {{"HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS", "no"},
                            {"HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK", "off"},
                            {"HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", ""}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *kv[] = {bad[i][0], bad[i][1], NULL};
        struct hz_config b = default_config();
        ck_assert_msg(hz_env_apply(&b, kv_get, (void *)kv, err, sizeof(err)) == -EINVAL,
                      "%s=%s accepted", bad[i][0], bad[i][1]);
        ck_assert_ptr_nonnull(strstr(err, bad[i][0]));
    }
}
END_TEST

/* "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE": the default of the
 * private-subnet-ip-range annotation, read as Go's net.ParseCIDR reads it;
 * it goes into attach_to_network's ip_range for a Service with a network
 * and no annotation of its own, and anything but an IPv4 CIDR is refused
 * naming the variable. */
START_TEST(the_subnet_variable_sets_the_default_ip_range)
{
    const char *env[] = {"HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", "10.0.1.0/24",
                         "HCLOUD_NETWORK", "k8s", NULL};
    struct hz_config c = default_config();
    char err[256];
    ck_assert_int_eq(hz_env_apply(&c, kv_get, (void *)env, err, sizeof(err)), 0);
    ck_assert_str_eq(c.private_subnet_ip_range, "10.0.1.0/24");
    struct hz_svc s = web_svc();
    struct hz_annot a;
    struct hz_desired d;
    memset(&a, 0, sizeof(a));
    hz_annot_clear(&a);
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_str_eq(d.private_subnet, "10.0.1.0/24");
    json_t *b = hz_attach_body(&d, 7);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(json_string_value(json_object_get(b, "ip_range")), "10.0.1.0/24");
    ck_assert_int_eq(json_integer_value(json_object_get(b, "network")), 7);
    ck_assert_ptr_null(json_object_get(b, "ip"));
    json_decref(b);
    hz_desired_clear(&d);
    /* the annotation wins over it */
    const char *kv[] = {"load-balancer.hetzner.cloud/private-subnet-ip-range", "10.0.2.0/24", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_str_eq(d.private_subnet, "10.0.2.0/24");
    hz_desired_clear(&d);
    hz_annot_clear(&a);
    /* Go's net.ParseCIDR takes a host address (and a prefix with leading
     * zeros); the range is its network */
    const char *host[] = {"HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", "10.0.1.7/024",
                          "HCLOUD_NETWORK", "k8s", NULL};
    c = default_config();
    ck_assert_int_eq(hz_env_apply(&c, kv_get, (void *)host, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_str_eq(d.private_subnet, "10.0.1.0/24");
    hz_desired_clear(&d);
    const char *bad[] = {"10.0.1.0", "10.0.1.0/33", "010.0.1.0/24", "fd00::/64",
                         "",         "10.0.1.0/24 "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *e[] = {"HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", bad[i], NULL};
        c = default_config();
        ck_assert_msg(hz_env_apply(&c, kv_get, (void *)e, err, sizeof(err)) == -EINVAL,
                      "\"%s\" accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE"));
        ck_assert_ptr_nonnull(strstr(err, "IPv4 CIDR"));
    }
}
END_TEST

/* HCLOUD_LOAD_BALANCERS_ENABLED switches hccm's own load-balancer
 * controller: prismlb does not read it, so it changes no setting (and
 * "false", set on hccm while prismlb takes over, stops nothing here). */
START_TEST(hccms_enabled_switch_changes_nothing)
{
    const char *env[] = {"HCLOUD_LOAD_BALANCERS_ENABLED", "false", NULL};
    struct hz_config c = default_config(), ref = default_config();
    char err[256];
    ck_assert_int_eq(hz_env_apply(&c, kv_get, (void *)env, err, sizeof(err)), 0);
    ck_assert_str_eq(c.default_balancer_type, ref.default_balancer_type);
    ck_assert_str_eq(c.default_lb_location, ref.default_lb_location);
    ck_assert_int_eq(hz_config_algorithm(&c), hz_config_algorithm(&ref));
    ck_assert_int_eq(c.ipv6_ingress, ref.ipv6_ingress);
    ck_assert_int_eq(c.default_lb_proxy_mode_enabled, ref.default_lb_proxy_mode_enabled);
    ck_assert_int_eq(c.default_lb_interval, ref.default_lb_interval);
    ck_assert_int_eq(c.default_lb_timeout, ref.default_lb_timeout);
    ck_assert_int_eq(c.default_lb_retries, ref.default_lb_retries);
    ck_assert_int_eq(c.private_ingress, ref.private_ingress);
    ck_assert_int_eq(c.disable_public_network, ref.disable_public_network);
    ck_assert_int_eq(c.use_private_ip, ref.use_private_ip);
    ck_assert_ptr_eq(c.default_network, ref.default_network);
    ck_assert_ptr_eq(c.default_network_zone, ref.default_network_zone);
    ck_assert_ptr_eq(c.private_subnet_ip_range, ref.private_subnet_ip_range);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb env");
    TCase *tc = tcase_create("env");
    tcase_add_test(tc, hccms_variables_set_the_settings_of_the_same_meaning);
    tcase_add_test(tc, robotlbs_variable_wins_over_hccms);
    tcase_add_test(tc, bad_values_are_refused_naming_the_variable);
    tcase_add_test(tc, the_network_zone_variable_places_new_balancers_by_zone);
    tcase_add_test(tc, hccms_private_network_variables_set_their_settings);
    tcase_add_test(tc, the_subnet_variable_sets_the_default_ip_range);
    tcase_add_test(tc, hccms_enabled_switch_changes_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
