/*
 * mod_leader configuration: `prismlb --check-config` reports each rule as
 * FILE:LINE: instances.NAME.setting: message with exit status 1 (client-go's
 * lease_duration > renew_deadline > 1.2 × retry_period > 0, whole seconds,
 * names); conf/reconciler.conf passes; a missing namespace is reported by
 * name at run time. (README.md's settings reference is checked by the lint
 * test readme-settings-leader.)
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

static int
check_file(const char *path, char **out)
{
    return tu_check_config(path, le_module_path_env(), out);
}

/* A config whose line 3 is `line3` inside the leader instance "le". */
static int
check_line3(const char *line3, char **out)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "instances = (\n"
             "  { module = \"leader\"; name = \"le\"; lease_name = \"x\";\n"
             "    %s }\n"
             ");\n",
             line3);
    return tu_check_config_text(tu_dir, "le.conf", text, le_module_path_env(), out);
}

static void
rejected(const char *line3, const char *setting, const char *msg)
{
    char *out = NULL, want[4096];
    int rc = check_line3(line3, &out);
    snprintf(want, sizeof(want), "%s/le.conf:3: instances.le.%s: %s", tu_dir, setting, msg);
    ck_assert_msg(rc == 1 && strstr(out, want), "%s: expected \"%s\" (exit 1), got %d:\n%s", line3,
                  want, rc, out);
    free(out);
}

static void
accepted(const char *line3)
{
    char *out = NULL;
    int rc = check_line3(line3, &out);
    ck_assert_msg(rc == 0 && strcmp(out, "OK\n") == 0, "%s: exit %d:\n%s", line3, rc, out);
    free(out);
}

START_TEST(client_go_timing_rules)
{
    accepted("");
    accepted("lease_duration = \"3s\"; renew_deadline = \"2s\"; retry_period = \"500ms\";");
    rejected("lease_duration = \"10s\"; renew_deadline = \"10s\";", "lease_duration",
             "must be greater than renew_deadline (10s), got 10s");
    rejected("renew_deadline = \"2400ms\"; retry_period = \"2s\";", "renew_deadline",
             "must be greater than 1.2 × retry_period (2.4s), got 2.4s");
    accepted("renew_deadline = \"2401ms\"; retry_period = \"2s\";");
    rejected("lease_duration = \"15500ms\";", "lease_duration",
             "must be a whole number of seconds (it is written as leaseDurationSeconds), got "
             "15.5s");
    rejected("retry_period = \"0\";", "retry_period", "0s is below the minimum 1ms");
}
END_TEST

START_TEST(names_and_client_settings)
{
    rejected("lease_namespace = \"Kube_System\";", "lease_namespace",
             "must consist of lower case letters, digits and '-' (an RFC 1123 label)");
    rejected("identity = \"\";", "identity", "must not be empty (unset it for hostname_pid)");
    rejected("server = \"kcp.example:6443\";", "server",
             "must be an http:// or https:// URL (\"https://127.0.0.1:6443\")");
    rejected("server = \"http://127.0.0.1:8080\"; tls_server_name = \"kcp\";", "tls_server_name",
             "has no effect with a plain http:// server");
    rejected("in_cluster = true; kubeconfig = \"/k\";", "in_cluster",
             "excludes kubeconfig: set one of them");
    accepted("server = \"https://127.0.0.1:6443/clusters/root:test\"; tls_server_name = "
             "\"kcp.example\"; identity = \"pod-a_1\";");

    char *out = NULL, path[4096];
    snprintf(path, sizeof(path), "%s/noname.conf", tu_dir);
    ck_assert_int_eq(tu_write_file(path, "instances = ( { module = \"leader\"; } );\n"), 0);
    ck_assert_int_eq(check_file(path, &out), 1);
    ck_assert_msg(strstr(out, "lease_name"), "%s", out);
    free(out);
}
END_TEST

START_TEST(reconciler_conf_passes)
{
    char *out = NULL, path[4096];
    snprintf(path, sizeof(path), "%s", tu_source_path("conf/reconciler.conf"));
    int rc = check_file(path, &out);
    ck_assert_msg(rc == 0 && strcmp(out, "OK\n") == 0, "conf/reconciler.conf: exit %d:\n%s", rc,
                  out);
    free(out);
    char *text = tu_read_file(path, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "module = \"leader\""));
    ck_assert_ptr_nonnull(strstr(text, "gate = \"leader\""));
    ck_assert_ptr_nonnull(strstr(text, "module = \"metrics\""));
    free(text);
}
END_TEST

/* A Lease in a namespace that does not exist: the log names it. */
START_TEST(missing_namespace_is_reported)
{
    struct le_env e;
    struct le_daemon d;
    le_env_start(&e, 0);
    memset(&d, 0, sizeof(d));
    le_daemon_config(&e, &d, "solo", &le_short, "");
    /* Same config, another namespace. */
    char *conf = tu_read_file(d.td.conf, NULL);
    ck_assert_ptr_nonnull(conf);
    char *p = strstr(conf, "lease_namespace = \"default\"");
    ck_assert_ptr_nonnull(p);
    char fixed[40000];
    snprintf(fixed, sizeof(fixed), "%.*slease_namespace = \"nope\"%s", (int)(p - conf), conf,
             p + strlen("lease_namespace = \"default\""));
    free(conf);
    ck_assert_int_eq(tu_write_file(d.td.conf, fixed), 0);
    le_daemon_spawn(&d);
    long long end = tu_now_ms() + 10000;
    char *log = NULL;
    for (;;) {
        free(log);
        log = le_daemon_log(&d);
        if (strstr(log, "namespace \\\"nope\\\" does not exist") ||
            strstr(log, "namespace \"nope\" does not exist") || tu_now_ms() > end)
            break;
        tu_sleep_ms(50);
    }
    ck_assert_msg(strstr(log, "does not exist") && strstr(log, "nope"),
                  "no report of the missing namespace in:\n%s", log);
    free(log);
    ck_assert_int_eq(le_daemon_stop(&d, SIGTERM, 7000), 0);
    le_env_stop(&e);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("leader-config");
    TCase *tc = tcase_create("config");
    tcase_add_checked_fixture(tc, tu_dir_setup, tu_dir_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, client_go_timing_rules);
    tcase_add_test(tc, names_and_client_settings);
    tcase_add_test(tc, reconciler_conf_passes);
    tcase_add_test(tc, missing_namespace_is_reported);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
