/*
 * tcp_proxy bad input: every validation rule of the spec's list that
 * concerns the proxy is rejected by `prismlb --check-config` with
 * FILE:LINE, the setting's path and a message; a good file prints OK.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Where the daemon's --check-config finds the modules: the proxy's and
 * the test modules; with mod_metrics beside them for run_pair. */
static const char *const mods[] = {"modules/mod_tcp_proxy", "tests/modules", NULL};
static const char *const mods_metrics[] = {"modules/mod_tcp_proxy", "tests/modules", "modules",
                                           NULL};

/* A config whose line 4 holds `line4` inside the proxy's group. */
static int
run_check(const char *line4, char **out)
{
    return tu_check_config_fmt(
        tu_dir, "proxy.conf", tu_module_path_env(mods), out,
        "instances = (\n"
        "  { module = \"lifecycle\"; name = \"eps\"; trace_file = \"t.log\";\n"
        "    publish = [\"127.0.0.1:6443\"]; },\n"
        "  { module = \"tcp_proxy\"; name = \"kubeprism\"; %s\n"
        "  }\n"
        ");\n",
        line4);
}

/* The setting on line 4 is rejected: "DIR/proxy.conf:4: instances.kubeprism.SETTING: MSG". */
static void
rejected(const char *line4, const char *setting, const char *msg)
{
    char *out = NULL;
    int rc = run_check(line4, &out);
    tu_assert_config_refused(rc, out, tu_dir, "proxy.conf", 4, "instances.kubeprism.%s: %s",
                             setting, msg);
}

#define UP "upstreams = [\"eps\"]; "

/* The proxy beside mod_metrics, both on 127.0.0.1 unless `extra` (in the
 * proxy's group, line 5) and `mextra` (in metrics', line 7) say otherwise:
 * bind_port on line 5, port on line 7. */
static int
run_pair(const char *bind_port, const char *extra, const char *port, const char *mextra, char **out)
{
    return tu_check_config_fmt(
        tu_dir, "pair.conf", tu_module_path_env(mods_metrics), out,
        "instances = (\n"
        "  { module = \"lifecycle\"; name = \"eps\"; trace_file = \"t.log\";\n"
        "    publish = [\"127.0.0.1:6443\"]; },\n"
        "  { module = \"tcp_proxy\"; name = \"kubeprism\"; upstreams = [\"eps\"];\n"
        "    bind_port = %s; %s },\n"
        "  { module = \"metrics\"; name = \"health\";\n"
        "    port = %s; %s }\n"
        ");\n",
        bind_port, extra, port, mextra);
}

/* The spec: "--bind-port and --health-port must differ". What bind(2)
 * would refuse at start is refused by --check-config, at the later
 * setting's FILE:LINE, naming the other one with its FILE:LINE. */
START_TEST(bind_port_and_health_port_must_differ)
{
    char *out = NULL, want[8192];
    int rc = run_pair("7445", "", "7445", "bind_address = \"127.0.0.1\";", &out);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
    snprintf(want, sizeof(want),
             "%s/pair.conf:7: instances.health.port: port 7445 on 127.0.0.1 is also "
             "instances.kubeprism.bind_port (%s/pair.conf:5): two listeners cannot share it",
             tu_dir, tu_dir);
    ck_assert_msg(strstr(out, want) != NULL, "want \"%s\" in:\n%s", want, out);
    free(out);
    /* Without its own bind_address the probe server listens where the
     * proxy does (extractedprism's --health-bind-address default): the
     * same port clashes whatever the proxy's address. */
    rc = run_pair("7445", "bind_address = \"127.0.0.2\";", "7445", "", &out);
    ck_assert_msg(rc == 1 && strstr(out, "instances.health.port: port 7445"), "%s", out);
    free(out);
    /* "localhost" is 127.0.0.1, and 0.0.0.0 takes every IPv4 address. */
    rc = run_pair("7445", "", "7445", "bind_address = \"localhost\";", &out);
    ck_assert_msg(rc == 1 && strstr(out, "instances.health.port: port 7445"), "%s", out);
    free(out);
    rc = run_pair("7445", "bind_address = \"0.0.0.0\";", "7445", "", &out);
    ck_assert_msg(rc == 1 && strstr(out, "instances.health.port: port 7445"), "%s", out);
    free(out);
}
END_TEST

START_TEST(bind_port_and_health_port_may_match_on_other_addresses)
{
    char *out = NULL;
    int rc = run_pair("7445", "bind_address = \"127.0.0.2\";", "7445",
                      "bind_address = \"127.0.0.1\";", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_str_eq(out, "OK\n");
    free(out);
    rc = run_pair("7445", "", "7446", "", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
}
END_TEST

START_TEST(good_config_is_ok)
{
    char *out = NULL;
    int rc = run_check(UP "bind_address = \"127.0.0.1\"; bind_port = 7445; "
                          "health_interval = \"20s\"; health_timeout = \"15s\"; "
                          "drain_timeout = 0; upstream_selection = \"latency\"; "
                          "health_check = \"readyz\"; health_check_ca_file = \"ca.crt\"; "
                          "health_check_cert_file = \"c.crt\"; health_check_key_file = \"c.key\"; "
                          "health_check_token_file = \"token\"; "
                          "health_check_server_name = \"kubernetes.default.svc\";",
                       &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_str_eq(out, "OK\n");
    free(out);
    rc = run_check(UP "bind_address = \"localhost\";", &out);
    ck_assert_msg(rc == 0, "a hostname bind_address: exit %d: %s", rc, out);
    free(out);
}
END_TEST

START_TEST(bind_address_must_be_an_ip_or_rfc1123_hostname)
{
    rejected(UP "bind_address = \"not a host!\";", "bind_address",
             "must be a valid IP address or RFC 1123 hostname");
    rejected(UP "bind_address = \"-bad-.example\";", "bind_address",
             "must be a valid IP address or RFC 1123 hostname");
}
END_TEST

START_TEST(bind_port_must_be_in_1_to_65535)
{
    rejected(UP "bind_port = 0;", "bind_port", "0 is out of range [1, 65535]");
    rejected(UP "bind_port = 65536;", "bind_port", "65536 is out of range [1, 65535]");
}
END_TEST

START_TEST(upstreams_must_not_be_empty)
{
    rejected("upstreams = [];", "upstreams", "must not be empty");
}
END_TEST

START_TEST(upstreams_are_required)
{
    char *out = NULL, want[4096];
    int rc = run_check("bind_port = 7445;", &out);
    snprintf(want, sizeof(want), "%s/proxy.conf:4: instances.kubeprism.upstreams: required",
             tu_dir);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(out, want) != NULL, "expected \"%s\" in:\n%s", want, out);
    free(out);
}
END_TEST

START_TEST(upstreams_must_name_endpoint_sources)
{
    char *out = NULL;
    int rc = run_check("upstreams = [\"nosuch\"];", &out);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(out, "proxy.conf:4: instances.kubeprism.upstreams:") != NULL, "%s", out);
    free(out);
}
END_TEST

START_TEST(health_interval_must_be_at_least_1s)
{
    rejected(UP "health_interval = \"900ms\";", "health_interval", "900ms is below the minimum 1s");
}
END_TEST

START_TEST(health_timeout_must_be_at_least_1s)
{
    rejected(UP "health_timeout = \"500ms\";", "health_timeout", "500ms is below the minimum 1s");
}
END_TEST

START_TEST(health_timeout_must_be_less_than_health_interval)
{
    rejected(UP "health_interval = \"5s\"; health_timeout = \"5s\";", "health_timeout",
             "must be less than health_interval");
    rejected(UP "health_interval = \"5s\"; health_timeout = \"6s\";", "health_timeout",
             "must be less than health_interval");
}
END_TEST

START_TEST(drain_timeout_must_not_be_negative)
{
    rejected(UP "drain_timeout = \"-1s\";", "drain_timeout", "must not be negative");
}
END_TEST

START_TEST(upstream_selection_must_be_random_or_latency)
{
    rejected(UP "upstream_selection = \"fastest\";", "upstream_selection",
             "must be one of random, latency, not \"fastest\"");
}
END_TEST

START_TEST(health_check_must_be_tcp_or_readyz)
{
    rejected(UP "health_check = \"http\";", "health_check",
             "must be one of tcp, readyz, not \"http\"");
}
END_TEST

START_TEST(readyz_requires_health_check_ca_file)
{
    rejected(UP "health_check = \"readyz\";", "health_check",
             "readyz requires health_check_ca_file");
}
END_TEST

START_TEST(cert_file_and_key_file_must_be_set_together)
{
    rejected(UP "health_check_cert_file = \"c.crt\";", "health_check_cert_file",
             "health_check_cert_file and health_check_key_file must be set together");
    rejected(UP "health_check_key_file = \"c.key\";", "health_check_key_file",
             "health_check_cert_file and health_check_key_file must be set together");
}
END_TEST

START_TEST(health_check_server_name_must_not_be_empty)
{
    rejected(UP "health_check_server_name = \"\";", "health_check_server_name",
             "must not be empty");
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy_check_config");
    TCase *tc = tcase_create("validation");
    tcase_add_checked_fixture(tc, tu_dir_setup, tu_dir_teardown);
    tcase_add_test(tc, good_config_is_ok);
    tcase_add_test(tc, bind_port_and_health_port_must_differ);
    tcase_add_test(tc, bind_port_and_health_port_may_match_on_other_addresses);
    tcase_add_test(tc, bind_address_must_be_an_ip_or_rfc1123_hostname);
    tcase_add_test(tc, bind_port_must_be_in_1_to_65535);
    tcase_add_test(tc, upstreams_must_not_be_empty);
    tcase_add_test(tc, upstreams_are_required);
    tcase_add_test(tc, upstreams_must_name_endpoint_sources);
    tcase_add_test(tc, health_interval_must_be_at_least_1s);
    tcase_add_test(tc, health_timeout_must_be_at_least_1s);
    tcase_add_test(tc, health_timeout_must_be_less_than_health_interval);
    tcase_add_test(tc, drain_timeout_must_not_be_negative);
    tcase_add_test(tc, upstream_selection_must_be_random_or_latency);
    tcase_add_test(tc, health_check_must_be_tcp_or_readyz);
    tcase_add_test(tc, readyz_requires_health_check_ca_file);
    tcase_add_test(tc, cert_file_and_key_file_must_be_set_together);
    tcase_add_test(tc, health_check_server_name_must_not_be_empty);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
