/*
 * The daemon's lifecycle with the lifecycle test module: hooks run in
 * order for several instances, stops are ordered and bounded, links carry
 * endpoint sets and gates, signals behave as documented.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "env.h"

START_TEST(hooks_run_in_order_for_two_instances)
{
    struct tu_proc *p = ce_start(

        "instances = (\n"
        "  { module = \"lifecycle\"; name = \"first\"; trace_file = \"trace.log\"; },\n"
        "  { module = \"lifecycle\"; name = \"second\"; trace_file = \"trace.log\"; }\n"
        ");\n",
        NULL);
    ce_wait_trace("start second", 10000);
    tu_stop(p, SIGTERM, 10000);
    ck_assert_int_eq(ce_exit_code(p), 0);
    char *t = tu_read_file(ce.trace, NULL);
    ck_assert_str_eq(t, "create first\ncreate second\nstart first\nstart second\n"
                        "stop second\nstop first\ndestroy second\ndestroy first\n");
    free(t);
}
END_TEST

START_TEST(asynchronous_stop_is_awaited_in_reverse_order)
{
    struct tu_proc *p =
        ce_start("instances = (\n"
                 "  { module = \"lifecycle\"; name = \"a\"; trace_file = \"trace.log\"; },\n"
                 "  { module = \"lifecycle\"; name = \"b\"; trace_file = \"trace.log\";\n"
                 "    stop_delay = \"300ms\"; }\n"
                 ");\n",
                 NULL);
    ce_wait_trace("start b", 10000);
    long long t0 = tu_now_ms();
    tu_stop(p, SIGTERM, 10000);
    ck_assert_int_ge(tu_now_ms() - t0, 300);
    ck_assert_int_eq(ce_exit_code(p), 0);
    char *t = tu_read_file(ce.trace, NULL);
    ck_assert_ptr_nonnull(strstr(t, "stop b\nstopped b\nstop a\n"));
    free(t);
}
END_TEST

START_TEST(stop_grace_is_bounded)
{
    struct tu_proc *p =
        ce_start("shutdown_grace = \"200ms\";\n"
                 "instances = (\n"
                 "  { module = \"lifecycle\"; name = \"slow\"; trace_file = \"trace.log\";\n"
                 "    stop_delay = \"1h\"; }\n"
                 ");\n",
                 NULL);
    ce_wait_trace("start slow", 10000);
    long long t0 = tu_now_ms();
    kill(p->pid, SIGTERM);
    ck_assert(tu_wait_exit(p, 5000));
    ck_assert_int_lt(tu_now_ms() - t0, 3000);
    ck_assert_int_eq(ce_exit_code(p), 0);
    char *l = tu_read_file(ce.d.log, NULL);
    ck_assert_ptr_nonnull(strstr(l, "did not stop within the shutdown grace"));
    free(l);
}
END_TEST

START_TEST(second_signal_exits_at_once)
{
    struct tu_proc *p =
        ce_start("instances = (\n"
                 "  { module = \"lifecycle\"; name = \"slow\"; trace_file = \"trace.log\";\n"
                 "    stop_delay = \"1h\"; }\n"
                 ");\n",
                 NULL);
    ce_wait_trace("start slow", 10000);
    kill(p->pid, SIGTERM);
    ce_wait_trace("stop slow", 5000);
    kill(p->pid, SIGINT);
    ck_assert(tu_wait_exit(p, 3000));
    ck_assert_int_eq(ce_exit_code(p), 1);
}
END_TEST

START_TEST(failed_start_stops_what_started_and_exits_1)
{
    struct tu_proc *p =
        ce_start("instances = (\n"
                 "  { module = \"lifecycle\"; name = \"ok\"; trace_file = \"trace.log\"; },\n"
                 "  { module = \"lifecycle\"; name = \"bad\"; trace_file = \"trace.log\";\n"
                 "    fail_start = true; }\n"
                 ");\n",
                 NULL);
    ck_assert(tu_wait_exit(p, 10000));
    ck_assert_int_eq(ce_exit_code(p), 1);
    char *t = tu_read_file(ce.trace, NULL);
    ck_assert_str_eq(t, "create ok\ncreate bad\nstart ok\nstart bad\nstop ok\n"
                        "destroy bad\ndestroy ok\n");
    free(t);
    /* The module's reason, logged with the instance. */
    char *l = tu_read_file(ce.d.log, NULL);
    ck_assert_msg(strstr(l, "instance=bad module=lifecycle msg=\"start failed\" "
                            "reason=\"fail_start is set\" error=\"Invalid argument\""),
                  "%s", l);
    free(l);
}
END_TEST

START_TEST(config_errors_refuse_to_start)
{
    struct tu_proc *p = ce_start(

        "instances = ( { module = \"lifecycle\"; trace_file = \"t\"; port = -1; } );\n", NULL);
    ck_assert(tu_wait_exit(p, 10000));
    ck_assert_int_eq(ce_exit_code(p), 1);
    char *l = tu_read_file(ce.d.log, NULL);
    ck_assert_ptr_nonnull(strstr(l, "test.conf:1: instances.lifecycle.port: -1 is out of range"));
    ck_assert_ptr_nonnull(strstr(l, "not starting"));
    free(l);
}
END_TEST

START_TEST(endpoint_sets_are_merged_for_sinks)
{
    struct tu_proc *p =
        ce_start("instances = (\n"
                 "  { module = \"lifecycle\"; name = \"s1\"; trace_file = \"trace.log\";\n"
                 "    publish = [\"10.0.0.2:6443\", \"10.0.0.1:6443\"]; },\n"
                 "  { module = \"lifecycle\"; name = \"s2\"; trace_file = \"trace.log\";\n"
                 "    publish = [\"10.0.0.1:6443\", \"10.0.0.3:6443\"]; },\n"
                 "  { module = \"lifecycle\"; name = \"sink\"; trace_file = \"trace.log\";\n"
                 "    sources = [\"s1\", \"s2\"]; }\n"
                 ");\n",
                 NULL);
    ce_wait_trace("endpoints=10.0.0.1:6443,10.0.0.2:6443,10.0.0.3:6443 sink", 10000);
    tu_stop(p, SIGTERM, 10000);
    ck_assert_int_eq(ce_exit_code(p), 0);
}
END_TEST

START_TEST(gate_opens_and_closes_gated_instances)
{
    struct tu_proc *p =
        ce_start("instances = (\n"
                 "  { module = \"lifecycle\"; name = \"leader\"; trace_file = \"trace.log\";\n"
                 "    gate_open_after = \"100ms\"; gate_close_after = \"200ms\"; },\n"
                 "  { module = \"lifecycle\"; name = \"writer\"; trace_file = \"trace.log\";\n"
                 "    gate = \"leader\"; }\n"
                 ");\n",
                 NULL);
    ce_wait_trace("gate_closed_all leader", 10000);
    tu_stop(p, SIGTERM, 10000);
    ck_assert_int_eq(ce_exit_code(p), 0);
    char *t = tu_read_file(ce.trace, NULL);
    ck_assert_ptr_nonnull(strstr(t, "start writer\ngate_open writer\ngate_close writer\n"
                                    "gate_closed_all leader\n"));
    free(t);
}
END_TEST

START_TEST(version_and_help)
{
    char *out = NULL;
    char *argv[] = {(char *)tu_build_path("core/prismlb"), "--version", NULL};
    ck_assert_int_eq(tu_run(argv, NULL, &out, 10000), 0);
    ck_assert_ptr_nonnull(strstr(out, "prismlb "));
    ck_assert_ptr_nonnull(strstr(out, "module ABI 3."));
    free(out);
    char *argv2[] = {(char *)tu_build_path("core/prismlb"), "--help", NULL};
    ck_assert_int_eq(tu_run(argv2, NULL, &out, 10000), 0);
    ck_assert_ptr_nonnull(strstr(out, "--check-config"));
    free(out);
    char *argv3[] = {(char *)tu_build_path("core/prismlb"), "--bogus", NULL};
    ck_assert_int_eq(tu_run(argv3, NULL, &out, 10000), 2);
    free(out);
}
END_TEST

START_TEST(json_logs_carry_the_instance)
{
    struct tu_proc *p;
    ck_assert_int_eq(tu_write_file(ce.d.conf,
                                   "instances = ( { module = \"lifecycle\"; name = \"j\";"
                                   " trace_file = \"trace.log\"; } );\n"),
                     0);
    char *args[] = {"--log-format", "json", NULL};
    p = ce_start(NULL, args);
    ce_wait_trace("start j", 10000);
    tu_stop(p, SIGTERM, 10000);
    char *l = tu_read_file(ce.d.log, NULL);
    ck_assert_ptr_nonnull(
        strstr(l, "\"level\":\"info\",\"instance\":\"j\",\"module\":\"lifecycle\""));
    free(l);
}
END_TEST

/* extractedprism's log levels dpanic, panic and fatal are accepted, in
 * the file and on the command line, and mean error: info lines are not
 * written, an error line (a start that fails) is. */
START_TEST(log_levels_dpanic_panic_fatal_mean_error)
{
    static const char *const levels[] = {"dpanic", "panic", "fatal"};
    for (size_t i = 0; i < 3; i++) {
        struct tu_proc *p;
        char text[512];
        snprintf(text, sizeof(text),
                 "log_level = \"%s\";\ninstances = ( { module = \"lifecycle\"; name = \"l\";"
                 " trace_file = \"trace.log\"; fail_start = true; } );\n",
                 levels[i]);
        p = ce_start(text, NULL);
        ck_assert(tu_wait_exit(p, 10000));
        ck_assert_int_eq(ce_exit_code(p), 1);
        char *l = tu_read_file(ce.d.log, NULL);
        ck_assert_ptr_nonnull(l);
        ck_assert_msg(!strstr(l, "level=info"), "%s: an info line was written:\n%s", levels[i], l);
        ck_assert_msg(strstr(l, "level=error"), "%s: no error line:\n%s", levels[i], l);
        free(l);
    }
    struct tu_proc *p;
    ck_assert_int_eq(tu_write_file(ce.d.conf,
                                   "instances = ( { module = \"lifecycle\"; name = \"c\";"
                                   " trace_file = \"trace.log\"; } );\n"),
                     0);
    char *args[] = {"--log-level", "fatal", NULL};
    p = ce_start(NULL, args);
    ce_wait_trace("start c", 10000);
    tu_stop(p, SIGTERM, 10000);
    char *l = tu_read_file(ce.d.log, NULL);
    ck_assert_ptr_nonnull(l);
    ck_assert_msg(!strstr(l, "level=info"), "--log-level fatal wrote an info line:\n%s", l);
    free(l);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("daemon");
    TCase *tc = tcase_create("daemon");
    tcase_add_checked_fixture(tc, ce_setup, ce_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, hooks_run_in_order_for_two_instances);
    tcase_add_test(tc, asynchronous_stop_is_awaited_in_reverse_order);
    tcase_add_test(tc, stop_grace_is_bounded);
    tcase_add_test(tc, second_signal_exits_at_once);
    tcase_add_test(tc, failed_start_stops_what_started_and_exits_1);
    tcase_add_test(tc, config_errors_refuse_to_start);
    tcase_add_test(tc, endpoint_sets_are_merged_for_sinks);
    tcase_add_test(tc, gate_opens_and_closes_gated_instances);
    tcase_add_test(tc, version_and_help);
    tcase_add_test(tc, json_logs_carry_the_instance);
    tcase_add_test(tc, log_levels_dpanic_panic_fatal_mean_error);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
