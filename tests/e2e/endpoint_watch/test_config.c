/*
 * endpoint_watch settings: the spec's validation rule for --endpoints ("must
 * not be empty; each entry must be a valid host:port pair where the host is
 * a valid IP address or RFC 1123 hostname and port is a number in the range
 * 1-65535") and the other settings' rules, each rejected by `prismlb
 * --check-config` with FILE:LINE, the setting's path and a message naming
 * the bad entry; good files print OK, conf/proxy.conf among them; the
 * README's settings reference is the one the daemon renders.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Where the daemon's --check-config finds the modules. */
static const char *const mods[] = {"modules", "tests/modules", NULL};

/* A config whose line 3 holds `line3` inside the instance "ew". */
static int
run_check(const char *line3, char **out)
{
    return tu_check_config_fmt(tu_dir, "ew.conf", tu_module_path_env(mods), out,
                               "instances = (\n"
                               "  { module = \"endpoint_watch\"; name = \"ew\";\n"
                               "    %s\n"
                               "  }\n"
                               ");\n",
                               line3);
}

static void
accepted(const char *line3)
{
    char *out = NULL;
    int rc = run_check(line3, &out);
    ck_assert_msg(rc == 0 && strcmp(out, "OK\n") == 0, "exit %d for [%s]: %s", rc, line3, out);
    free(out);
}

/* Rejected: "DIR/ew.conf:3: instances.ew.SETTING: MSG". */
static void
rejected(const char *line3, const char *setting, const char *msg)
{
    char *out = NULL;
    int rc = run_check(line3, &out);
    tu_assert_config_refused(rc, out, tu_dir, "ew.conf", 3, "instances.ew.%s: %s", setting, msg);
}

START_TEST(good_settings_are_ok)
{
    accepted("endpoints = [\"10.0.0.1:6443\"];");
    accepted("endpoints = [\"10.0.0.1:6443\", \"[fd00::1]:6443\", \"cp-1.example.com:1\", "
             "\"localhost:65535\"];");
    accepted("endpoints = \"10.0.0.1:6443,10.0.0.2:6443\";"); /* one comma-separated string */
    accepted("endpoints = [\"10.0.0.1:6443\"]; enable_discovery = false;");
    /* --check-config loads the kubeconfig: it must be a usable one. */
    char kc[4200];
    snprintf(kc, sizeof(kc), "%s/kc.yaml", tu_dir);
    ck_assert_int_eq(tu_write_file(kc, "apiVersion: v1\nkind: Config\n"
                                       "clusters:\n- name: c\n  cluster:\n"
                                       "    server: https://127.0.0.1:6443\n"
                                       "contexts:\n- name: x\n  context:\n"
                                       "    cluster: c\n    user: u\n"
                                       "current-context: x\n"
                                       "users:\n- name: u\n  user:\n    token: t\n"),
                     0);
    accepted("endpoints = [\"10.0.0.1:6443\"]; kubeconfig = \"kc.yaml\"; "
             "server = \"https://127.0.0.1:7445\"; tls_server_name = \"kubernetes.default.svc\"; "
             "namespace = \"kube-system\"; service_name = \"apiserver\"; port_name = \"api\"; "
             "service_account_dir = \"/run/sa\";");
    accepted("endpoints = [\"10.0.0.1:6443\"]; port_name = \"\";");
}
END_TEST

/* "--endpoints must not be empty" (and it is required). */
START_TEST(endpoints_required_and_not_empty)
{
    char *out = NULL;
    ck_assert_int_eq(run_check("enable_discovery = true;", &out), 1);
    ck_assert_ptr_nonnull(strstr(out, "instances.ew.endpoints: required setting is missing"));
    free(out);
    rejected("endpoints = [];", "endpoints", "must not be empty");
}
END_TEST

/* "each entry must be a valid host:port pair where the host is a valid IP
 * address or RFC 1123 hostname and port is a number in the range 1-65535" —
 * the message names the entry. */
START_TEST(each_endpoint_is_host_port_with_valid_host_and_port)
{
    rejected("endpoints = [\"10.0.0.1:6443\", \"10.0.0.2\"];", "endpoints",
             "entry 2 \"10.0.0.2\" must be host:port (the port is missing)");
    rejected("endpoints = [\":6443\"];", "endpoints",
             "entry 1 \":6443\" must be host:port (the host is missing)");
    rejected("endpoints = [\"10.0.0.1:0\"];", "endpoints",
             "entry 1 \"10.0.0.1:0\" has a port that is not a number in the range 1-65535");
    rejected("endpoints = [\"10.0.0.1:65536\"];", "endpoints",
             "entry 1 \"10.0.0.1:65536\" has a port that is not a number in the range 1-65535");
    rejected("endpoints = [\"10.0.0.1:https\"];", "endpoints",
             "entry 1 \"10.0.0.1:https\" has a port that is not a number in the range 1-65535");
    rejected("endpoints = [\"10.0.0.1:\"];", "endpoints",
             "entry 1 \"10.0.0.1:\" must be host:port (the port is missing)");
    rejected("endpoints = [\"bad_host:6443\"];", "endpoints",
             "entry 1 \"bad_host:6443\" has a host that is neither an IP address nor an RFC 1123 "
             "hostname");
    rejected("endpoints = [\"-cp.example.com:6443\"];", "endpoints",
             "entry 1 \"-cp.example.com:6443\" has a host that is neither");
    rejected("endpoints = [\"fd00::1:6443\"];", "endpoints",
             "entry 1 \"fd00::1:6443\" must be host:port; write an IPv6 address in brackets");
    rejected("endpoints = [\"[10.0.0.1]:6443\"];", "endpoints",
             "entry 1 \"[10.0.0.1]:6443\" has no valid IPv6 address in brackets");
    rejected("endpoints = [\"[fd00::1]\"];", "endpoints",
             "entry 1 \"[fd00::1]\" must be [IPv6]:port");
}
END_TEST

START_TEST(kubernetes_client_settings_are_checked)
{
#define EP "endpoints = [\"10.0.0.1:6443\"]; "
    rejected(EP "server = \"127.0.0.1:7445\";", "server", "must be an http:// or https:// URL");
    rejected(EP "server = \"https://\";", "server", "must name a host");
    rejected(EP "tls_server_name = \"https://kubernetes\";", "tls_server_name",
             "must be a host name");
    rejected(EP "server = \"http://127.0.0.1:8080\"; tls_server_name = \"kubernetes\";",
             "tls_server_name", "has no effect with a plain http:// server");
    rejected(EP "namespace = \"Default\";", "namespace", "must consist of lower case letters");
    rejected(EP "namespace = \"\";", "namespace", "must not be empty");
    rejected(EP "service_name = \"kube_rnetes\";", "service_name",
             "must consist of lower case letters");
    rejected(EP "port_name = \"-https\";", "port_name", "must start and end with a letter");
    rejected(EP "enable_discovery = \"maybe\";", "enable_discovery", "");
    rejected(EP "enable_discovery = false; state_file = \"/var/lib/prismlb/state/endpoints\";",
             "state_file", "has no effect with enable_discovery = false");
    rejected(EP "state_file_max_age = \"10ms\";", "state_file_max_age", "");
#undef EP
}
END_TEST

/* The proxy role's configuration passes with the build's modules. */
START_TEST(conf_proxy_conf_passes)
{
    char *out = NULL;
    int rc = tu_check_config(tu_source_path("conf/proxy.conf"), tu_module_path_env(mods), &out);
    ck_assert_msg(rc == 0 && strcmp(out, "OK\n") == 0, "conf/proxy.conf: exit %d: %s", rc, out);
    free(out);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("endpoint_watch_config");
    TCase *tc = tcase_create("config");
    tcase_add_checked_fixture(tc, tu_dir_setup, tu_dir_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, good_settings_are_ok);
    tcase_add_test(tc, endpoints_required_and_not_empty);
    tcase_add_test(tc, each_endpoint_is_host_port_with_valid_host_and_port);
    tcase_add_test(tc, kubernetes_client_settings_are_checked);
    tcase_add_test(tc, conf_proxy_conf_passes);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
