/*
 * mod_metrics configuration: each validation rule is reported by
 * `prismlb --check-config` as FILE:LINE: instances.NAME.setting: message
 * with exit status 1; every file in conf/ passes; the settings reference in
 * modules/mod_metrics/README.md is what `prismlb --settings-doc metrics`
 * renders.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

static int
check_file(const char *path, char **out)
{
    return tu_check_config(path, me_module_path_env(), out);
}

/* Write text to DIR/name, run --check-config; exit status, *out (new). */
static int
check_text(const char *name, const char *text, char **out)
{
    return tu_check_config_text(tu_dir, name, text, me_module_path_env(), out);
}

static void
assert_error(const char *out, const char *name, int line, const char *rest)
{
    tu_assert_config_error(out, tu_dir, name, line, rest);
}

START_TEST(defaults_and_good_values_pass)
{
    char *out = NULL;
    int rc = check_text("ok.conf",
                        "instances = (\n"
                        "  { module = \"metrics\"; },\n"
                        "  { module = \"metrics\"; name = \"v6\"; bind_address = \"::1\";\n"
                        "    port = 1; liveness_interval = \"1s\"; liveness_threshold = 2; },\n"
                        "  { module = \"metrics\"; name = \"v6b\"; bind_address = \"[::]\";\n"
                        "    port = 65535; metrics = false; },\n"
                        "  { module = \"metrics\"; name = \"lh\"; bind_address = \"localhost\";\n"
                        "    port = 7447; probes = false; }\n"
                        ");\n",
                        &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_str_eq(out, "OK\n");
    free(out);
}
END_TEST

START_TEST(threshold_must_exceed_interval)
{
    char *out = NULL;
    int rc = check_text("live.conf",
                        "instances = (\n"
                        "  { module = \"metrics\";\n"
                        "    liveness_interval = \"5s\";\n"
                        "    liveness_threshold = \"5s\"; }\n"
                        ");\n",
                        &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "live.conf", 4,
                 "instances.metrics.liveness_threshold: must be greater than liveness_interval "
                 "(5s)");
    free(out);

    /* The default threshold (15s) against a longer interval: reported at
     * the instance's group, still naming the setting. */
    rc = check_text("live2.conf",
                    "instances = (\n"
                    "  { module = \"metrics\"; name = \"m\"; liveness_interval = \"20s\"; }\n"
                    ");\n",
                    &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "live2.conf", 2,
                 "instances.m.liveness_threshold: must be greater than liveness_interval (20s)");
    free(out);
}
END_TEST

START_TEST(bounds)
{
    char *out = NULL;
    int rc = check_text("bounds.conf",
                        "instances = (\n"
                        "  { module = \"metrics\"; name = \"a\";\n"
                        "    port = 0;\n"
                        "    liveness_interval = \"500ms\";\n"
                        "    liveness_threshold = \"999ms\"; },\n"
                        "  { module = \"metrics\"; name = \"b\";\n"
                        "    port = 65536;\n"
                        "    metrics = \"yes\"; }\n"
                        ");\n",
                        &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "bounds.conf", 3, "instances.a.port: 0 is out of range [1, 65535]");
    assert_error(out, "bounds.conf", 4,
                 "instances.a.liveness_interval: 500ms is below the minimum 1s");
    assert_error(out, "bounds.conf", 5,
                 "instances.a.liveness_threshold: 999ms is below the minimum 1s");
    assert_error(out, "bounds.conf", 7, "instances.b.port: 65536 is out of range [1, 65535]");
    assert_error(out, "bounds.conf", 8,
                 "instances.b.metrics: expected a boolean (true or false), got a string");
    free(out);
}
END_TEST

/* "--bind-address and --health-bind-address must each be a valid IP
 * address or RFC 1123-compliant hostname". */
START_TEST(bind_address_rules)
{
    char *out = NULL;
    int rc = check_text("bind.conf",
                        "instances = (\n"
                        "  { module = \"metrics\"; name = \"host\"; port = 7450;\n"
                        "    bind_address = \"metrics.example.com\"; },\n"
                        "  { module = \"metrics\"; name = \"junk\";\n"
                        "    bind_address = \"not an address!\"; },\n"
                        "  { module = \"metrics\"; name = \"empty\";\n"
                        "    bind_address = \"\"; },\n"
                        "  { module = \"metrics\"; name = \"badip\";\n"
                        "    bind_address = \"300.1.2.3\"; }\n"
                        ");\n",
                        &out);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(!strstr(out, "instances.host"), "a hostname was refused: %s", out);
    assert_error(out, "bind.conf", 5,
                 "instances.junk.bind_address: must be an IP address or an RFC 1123 hostname");
    assert_error(out, "bind.conf", 7, "instances.empty.bind_address: must not be empty");
    /* All-digit labels make no hostname (RFC 1123 2.1): a bad address. */
    assert_error(out, "bind.conf", 9,
                 "instances.badip.bind_address: must be an IP address or an RFC 1123 hostname");
    free(out);
}
END_TEST

START_TEST(serving_nothing_is_an_error)
{
    char *out = NULL;
    int rc = check_text("nothing.conf",
                        "instances = (\n"
                        "  { module = \"metrics\";\n"
                        "    metrics = false;\n"
                        "    probes = false; }\n"
                        ");\n",
                        &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "nothing.conf", 4,
                 "instances.metrics.probes: metrics and probes are both false");
    free(out);
}
END_TEST

START_TEST(unknown_setting_suggests)
{
    char *out = NULL;
    int rc = check_text("typo.conf",
                        "instances = (\n"
                        "  { module = \"metrics\";\n"
                        "    health_port = 7446; }\n"
                        ");\n",
                        &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "typo.conf", 3, "instances.metrics.health_port: unknown setting");
    free(out);
}
END_TEST

/* Every file in conf/ passes --check-config with the build's modules. */
START_TEST(conf_files_pass)
{
    char confdir[4096];
    snprintf(confdir, sizeof(confdir), "%s", tu_source_path("conf"));
    DIR *d = opendir(confdir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".conf") != 0)
            continue;
        char path[8192], *out = NULL;
        snprintf(path, sizeof(path), "%s/%s", confdir, de->d_name);
        int rc = check_file(path, &out);
        ck_assert_msg(rc == 0, "%s: exit %d:\n%s", de->d_name, rc, out);
        ck_assert_msg(strcmp(out, "OK\n") == 0, "%s: %s", de->d_name, out);
        free(out);
        n++;
    }
    closedir(d);
    ck_assert_msg(n >= 2, "found only %d conf files (demo.conf, metrics-only.conf expected)", n);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("metrics-config");
    TCase *tc = tcase_create("check-config");
    tcase_add_checked_fixture(tc, tu_dir_setup, tu_dir_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, defaults_and_good_values_pass);
    tcase_add_test(tc, threshold_must_exceed_interval);
    tcase_add_test(tc, bounds);
    tcase_add_test(tc, bind_address_rules);
    tcase_add_test(tc, serving_nothing_is_an_error);
    tcase_add_test(tc, unknown_setting_suggests);
    tcase_add_test(tc, conf_files_pass);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
