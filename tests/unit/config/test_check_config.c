/*
 * prismlb --check-config: every kind of bad input is reported as
 * FILE:LINE: setting: message with exit status 1; good files print OK.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prismlb/module.h"
#include "daemon.h"
#include "testutil.h"

/* "PRISMLB_MODULE_PATH=<build>/tests/modules" (static). */
static const char *
module_path(void)
{
    static const char *const dirs[] = {"tests/modules", NULL};
    return tu_module_path_env(dirs);
}

/* Write conf text to DIR/name and run --check-config on it. Returns the
 * exit status; *out gets the output (caller frees). */
static int
check_config(const char *name, const char *text, char **out)
{
    return tu_check_config_text(tu_dir, name, text, module_path(), out);
}

/* Assert the output holds "DIR/name:LINE: rest". */
static void
assert_error(const char *out, const char *name, int line, const char *rest)
{
    tu_assert_config_error(out, tu_dir, name, line, rest);
}

#define TRACE "trace_file = \"trace.log\";"

START_TEST(good_file_prints_ok)
{
    char *out = NULL;
    int rc =
        check_config("ok.conf",
                     "log_level = \"debug\";\n"
                     "instances = (\n"
                     "  { module = \"lifecycle\"; name = \"one\"; " TRACE " },\n"
                     "  { module = \"lifecycle\"; name = \"two\"; " TRACE
                     " port = 9000; interval = \"2s\"; tags = \"a,b\"; sources = [\"one\"]; }\n"
                     ");\n",
                     &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_str_eq(out, "OK\n");
    free(out);
}
END_TEST

START_TEST(misspelled_setting)
{
    char *out = NULL;
    int rc = check_config("typo.conf",
                          "instances = (\n"
                          "  { module = \"lifecycle\"; name = \"a\";\n"
                          "    " TRACE "\n"
                          "    prot = 80; }\n"
                          ");\n",
                          &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "typo.conf", 4, "instances.a.prot: unknown setting (did you mean \"port\"?)");
    free(out);
}
END_TEST

START_TEST(wrong_type)
{
    char *out = NULL;
    int rc = check_config("type.conf",
                          "instances = (\n"
                          "  { module = \"lifecycle\"; " TRACE "\n"
                          "    port = \"eighty\"; }\n"
                          ");\n",
                          &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "type.conf", 3,
                 "instances.lifecycle.port: expected an integer, got a string");
    free(out);
}
END_TEST

START_TEST(out_of_range)
{
    char *out = NULL;
    int rc = check_config("range.conf",
                          "instances = (\n"
                          "  { module = \"lifecycle\"; name = \"r\"; " TRACE "\n"
                          "    port = 70000;\n"
                          "    interval = \"100ms\"; }\n"
                          ");\n",
                          &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "range.conf", 3, "instances.r.port: 70000 is out of range [1, 65535]");
    assert_error(out, "range.conf", 4, "instances.r.interval: 100ms is below the minimum 1s");
    free(out);
}
END_TEST

START_TEST(missing_module_file)
{
    char *out = NULL;
    int rc = check_config("missing.conf",
                          "instances = (\n"
                          "  { module = \"lifecycle\"; " TRACE " },\n"
                          "  { module = \"nosuch\"; }\n"
                          ");\n",
                          &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "missing.conf", 3, "instances.[1]: module \"nosuch\" not found");
    free(out);
    rc = check_config("missing2.conf", "instances = ( { module = \"./mod_gone.so\"; } );\n", &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "missing2.conf", 1, "instances.[0]: cannot load module");
    ck_assert_ptr_nonnull(strstr(out, "mod_gone.so"));
    free(out);
}
END_TEST

START_TEST(not_a_module)
{
    char *out = NULL, text[8192];
    snprintf(text, sizeof(text), "instances = (\n  { module = \"%s\"; }\n);\n",
             tu_build_path("tests/modules/libnotmodule.so"));
    int rc = check_config("notmod.conf", text, &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "notmod.conf", 2, "instances.[0]: ");
    ck_assert_ptr_nonnull(strstr(out, "libnotmodule.so is not a prismlb module"));
    free(out);
}
END_TEST

START_TEST(other_abi_major)
{
    char *out = NULL, text[8192];
    snprintf(text, sizeof(text), "instances = (\n  { module = \"%s\"; " TRACE " }\n);\n",
             tu_build_path("tests/modules/mod_lifecycle_abi99.so"));
    int rc = check_config("abi.conf", text, &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "abi.conf", 2, "instances.[0]: ");
    char want[128];
    snprintf(want, sizeof(want), "was built for module ABI 99.%d, this prismlb has ABI %d.%d",
             PLB_ABI_MINOR, PLB_ABI_MAJOR, PLB_ABI_MINOR);
    ck_assert_msg(strstr(out, want) != NULL, "want %s in %s", want, out);
    free(out);
}
END_TEST

START_TEST(newer_abi_minor)
{
    char *out = NULL, text[8192];
    snprintf(text, sizeof(text), "instances = (\n  { module = \"%s\"; " TRACE " }\n);\n",
             tu_build_path("tests/modules/mod_lifecycle_newminor.so"));
    int rc = check_config("minor.conf", text, &out);
    ck_assert_int_eq(rc, 1);
    char want[128];
    snprintf(want, sizeof(want), "needs module ABI %d.999, newer than this prismlb's %d.%d",
             PLB_ABI_MAJOR, PLB_ABI_MAJOR, PLB_ABI_MINOR);
    ck_assert_msg(strstr(out, want) != NULL, "want %s in %s", want, out);
    free(out);
}
END_TEST

/* 2.0 and 3.0 are major versions: a module whose descriptor says 1.1, or
 * 2.6 (the last 2.x), is refused, and the message names both versions. */
static const char *const old_abis[][2] = {{"mod_lifecycle_abi1.so", "1.1"},
                                          {"mod_lifecycle_abi26.so", "2.6"}};

START_TEST(an_older_major_module_is_refused)
{
    char *out = NULL, text[8192], mod[600];
    snprintf(mod, sizeof(mod), "tests/modules/%s", old_abis[_i][0]);
    snprintf(text, sizeof(text), "instances = (\n  { module = \"%s\"; " TRACE " }\n);\n",
             tu_build_path(mod));
    int rc = check_config("old.conf", text, &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "old.conf", 2, "instances.[0]: ");
    char want[160];
    snprintf(want, sizeof(want),
             "was built for module ABI %s, this prismlb has ABI %d.%d (the major version must "
             "match)",
             old_abis[_i][1], PLB_ABI_MAJOR, PLB_ABI_MINOR);
    ck_assert_msg(strstr(out, want) != NULL, "want %s in %s", want, out);
    ck_assert_int_eq(PLB_ABI_MAJOR, 3);
    free(out);
}
END_TEST

/* The settings table is walked by the descriptor's setting_size: a table
 * built with a larger struct plb_setting (a newer header) or a smaller one
 * (1.0's, without `format`) reads as the header's own: every entry's name,
 * type, default, bounds and doc. */
static const char *const stride_modules[] = {"stride", "stride_newer", "stride_older"};

START_TEST(settings_tables_of_any_stride_load)
{
    const char *mod = stride_modules[_i];
    char *out = NULL, text[8192];

    snprintf(text, sizeof(text), "instances = (\n  { module = \"%s\"; name = \"s\"; }\n);\n", mod);
    int rc = check_config("defaults.conf", text, &out);
    ck_assert_msg(rc == 0, "%s: exit %d: %s", mod, rc, out);
    ck_assert_str_eq(out, "OK\n");
    free(out);

    snprintf(text, sizeof(text),
             "instances = (\n  { module = \"%s\"; name = \"s\";\n"
             "    alpha = 10;\n    beta = \"x\";\n    gamma = \"1m\"; }\n);\n",
             mod);
    rc = check_config("ok.conf", text, &out);
    ck_assert_msg(rc == 0, "%s: exit %d: %s", mod, rc, out);
    free(out);

    /* Each entry's own bounds and flags, on its own line. */
    snprintf(text, sizeof(text),
             "instances = (\n  { module = \"%s\"; name = \"s\";\n"
             "    alpha = 11;\n    beta = \"\";\n    gamma = \"2m\"; }\n);\n",
             mod);
    rc = check_config("bad.conf", text, &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "bad.conf", 3, "instances.s.alpha: ");
    assert_error(out, "bad.conf", 4, "instances.s.beta: ");
    assert_error(out, "bad.conf", 5, "instances.s.gamma: ");
    free(out);

    /* The reference rendered from the table has every entry. */
    char exe[4096];
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    char *argv[] = {exe, "--settings-doc", (char *)mod, NULL};
    char *env[] = {(char *)module_path(), NULL};
    ck_assert_int_eq(tu_run(argv, env, &out, 30000), 0);
    ck_assert_msg(strstr(out, "`alpha`") && strstr(out, "An integer from 1 to 10.") &&
                      strstr(out, "`beta`") && strstr(out, "A string that must not be empty.") &&
                      strstr(out, "`gamma`") && strstr(out, "A duration from 1s to 1m."),
                  "%s: %s", mod, out);
    free(out);
}
END_TEST

START_TEST(cross_setting_check_names_the_setting)
{
    char *out = NULL;
    int rc = check_config("cross.conf",
                          "instances = (\n"
                          "  { module = \"lifecycle\"; name = \"x\"; " TRACE "\n"
                          "    interval = \"2s\";\n"
                          "    timeout = \"3s\"; }\n"
                          ");\n",
                          &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "cross.conf", 4, "instances.x.timeout: must be less than interval");
    free(out);
}
END_TEST

START_TEST(links_and_gates_are_checked)
{
    char *out = NULL;
    int rc = check_config("links.conf",
                          "instances = (\n"
                          "  { module = \"lifecycle\"; name = \"a\"; " TRACE "\n"
                          "    sources = [\"nobody\"]; },\n"
                          "  { module = \"lifecycle\"; name = \"b\"; " TRACE "\n"
                          "    gate = \"ghost\"; }\n"
                          ");\n",
                          &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "links.conf", 3, "instances.a.sources: no instance named \"nobody\"");
    assert_error(out, "links.conf", 5, "instances.b.gate: no instance named \"ghost\"");
    free(out);
}
END_TEST

START_TEST(duplicate_names_and_syntax_errors)
{
    char *out = NULL;
    int rc = check_config("dup.conf",
                          "instances = (\n"
                          "  { module = \"lifecycle\"; " TRACE " },\n"
                          "  { module = \"lifecycle\"; " TRACE " }\n"
                          ");\n",
                          &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "dup.conf", 3, "instances.lifecycle: duplicate instance name");
    free(out);
    rc = check_config("syntax.conf", "instances = (\n  { module = \"lifecycle\" \n);\n", &out);
    ck_assert_int_eq(rc, 1);
    ck_assert_ptr_nonnull(strstr(out, "syntax.conf:3: syntax error"));
    free(out);
    rc = check_config("top.conf", "instances = ();\nlog_levle = \"info\";\n", &out);
    ck_assert_int_eq(rc, 1);
    assert_error(out, "top.conf", 2, "log_levle: unknown setting (did you mean \"log_level\"?)");
    free(out);
}
END_TEST

START_TEST(include_and_relative_paths)
{
    char *out = NULL, inc[4096];
    snprintf(inc, sizeof(inc), "%s/part.conf", tu_dir);
    ck_assert_int_eq(tu_write_file(inc, "{ module = \"lifecycle\"; name = \"inc\";\n"
                                        "  " TRACE "\n"
                                        "  port = 0; }\n"),
                     0);
    int rc = check_config("main.conf",
                          "instances = (\n"
                          "  @include \"part.conf\"\n"
                          ");\n",
                          &out);
    ck_assert_int_eq(rc, 1);
    /* The error names the included file and its line. */
    char want[4200];
    snprintf(want, sizeof(want), "%s:3: instances.inc.port: 0 is out of range", inc);
    ck_assert_msg(strstr(out, want) != NULL, "want %s in %s", want, out);
    free(out);
}
END_TEST

START_TEST(secret_values_are_never_printed)
{
    char *out = NULL;
    char *argv[] = {(char *)tu_build_path("core/prismlb"), "--check-config", "--config", NULL,
                    NULL};
    char path[4096];
    snprintf(path, sizeof(path), "%s/env.conf", tu_dir);
    ck_assert_int_eq(
        tu_write_file(path, "instances = ( { module = \"lifecycle\"; " TRACE " } );\n"), 0);
    argv[3] = path;
    char *env[] = {(char *)module_path(), "LIFECYCLE_ENABLED=maybe", NULL};
    int rc = tu_run(argv, env, &out, 30000);
    ck_assert_int_eq(rc, 1);
    ck_assert_ptr_nonnull(
        strstr(out, "environment LIFECYCLE_ENABLED: instances.lifecycle.enabled: expected a "
                    "boolean"));
    free(out);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("check-config");
    TCase *tc = tcase_create("check-config");
    tcase_add_checked_fixture(tc, tu_dir_setup, tu_dir_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, good_file_prints_ok);
    tcase_add_test(tc, misspelled_setting);
    tcase_add_test(tc, wrong_type);
    tcase_add_test(tc, out_of_range);
    tcase_add_test(tc, missing_module_file);
    tcase_add_test(tc, not_a_module);
    tcase_add_test(tc, other_abi_major);
    tcase_add_test(tc, newer_abi_minor);
    tcase_add_loop_test(tc, an_older_major_module_is_refused, 0,
                        (int)(sizeof(old_abis) / sizeof(old_abis[0])));
    tcase_add_loop_test(tc, settings_tables_of_any_stride_load, 0,
                        (int)(sizeof(stride_modules) / sizeof(stride_modules[0])));
    tcase_add_test(tc, cross_setting_check_names_the_setting);
    tcase_add_test(tc, links_and_gates_are_checked);
    tcase_add_test(tc, duplicate_names_and_syntax_errors);
    tcase_add_test(tc, include_and_relative_paths);
    tcase_add_test(tc, secret_values_are_never_printed);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
