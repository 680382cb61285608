/*
 * SIGHUP reloads the config file: a valid file restarts only the instances
 * whose settings changed, starts new ones and stops removed ones (the
 * lifecycle test module's trace shows each hook); a file with errors
 * changes nothing and the log names FILE:LINE and the setting.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "env.h"

#define INST(name, extra)                                                                          \
    "  { module = \"lifecycle\"; name = \"" name "\"; trace_file = \"trace.log\"; " extra " }"

/* A changed setting restarts that instance only; a new one starts, a
 * removed one stops; the unchanged one sees no hook at all. */
START_TEST(a_valid_reload_restarts_only_the_changed_instances)
{
    struct tu_proc *p;
    ck_assert_int_eq(
        tu_write_file(ce.d.conf, "instances = (\n" INST("a", "port = 1;") ",\n" INST(
                                     "b", "port = 2;") ",\n" INST("gone", "") "\n);\n"),
        0);
    p = ce_start(NULL, NULL);
    /* Instances start in config order: the last one's line means all. */
    ce_wait_log("instance=gone module=lifecycle msg=started", 10000);
    ck_assert(tu_file_has(ce.trace, "start gone"));
    ck_assert_int_eq(tu_write_file(ce.trace, ""), 0);
    ck_assert_int_eq(
        tu_write_file(ce.d.conf,
                      "log_level = \"debug\";\ninstances = (\n" INST("a", "port = 1;") ",\n" INST(
                          "b", "port = 3;") ",\n" INST("new", "") "\n);\n"),
        0);
    ck_assert_int_eq(kill(p->pid, SIGHUP), 0);
    ce_wait_log("1 restarted, 1 added, 1 removed, 1 unchanged", 10000);
    char *t = tu_read_file(ce.trace, NULL);
    ck_assert_ptr_nonnull(t);
    /* stops in reverse config order, then creates and starts in order */
    ck_assert_str_eq(t, "stop gone\nstop b\ndestroy gone\ndestroy b\ncreate b\nstart b\n"
                        "create new\nstart new\n");
    free(t);
    /* the new log_level applies: a debug line from now on is written */
    ck_assert(tu_file_has(ce.d.log, "SIGHUP: reloading"));
    /* the daemon runs on and stops cleanly with the new set */
    ck_assert_int_eq(tu_write_file(ce.trace, ""), 0);
    int st = tu_stop(p, SIGTERM, 10000);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    t = tu_read_file(ce.trace, NULL);
    ck_assert_str_eq(t, "stop new\nstop b\nstop a\ndestroy new\ndestroy b\ndestroy a\n");
    free(t);
}
END_TEST

/* A file with an error: the log names FILE:LINE and the setting, the
 * running configuration stays (no hook runs), and a later valid reload
 * applies. */
START_TEST(an_invalid_reload_keeps_the_old_configuration_and_logs_file_line)
{
    struct tu_proc *p;
    char want[8400];
    ck_assert_int_eq(tu_write_file(ce.d.conf, "instances = (\n" INST("a", "port = 1;") "\n);\n"),
                     0);
    p = ce_start(NULL, NULL);
    ce_wait_log("msg=started", 10000);
    ck_assert_int_eq(tu_write_file(ce.trace, ""), 0);
    ck_assert_int_eq(tu_write_file(ce.d.conf, "instances = (\n"
                                              "  { module = \"lifecycle\"; name = \"a\";\n"
                                              "    trace_file = \"trace.log\";\n"
                                              "    prot = 2; }\n);\n"),
                     0);
    ck_assert_int_eq(kill(p->pid, SIGHUP), 0);
    ce_wait_log("the running configuration stays", 10000);
    snprintf(want, sizeof(want), "%s:4: instances.a.prot: unknown setting", ce.d.conf);
    ck_assert_msg(tu_file_has(ce.d.log, want), "no \"%s\" in the log", want);
    char *t = tu_read_file(ce.trace, NULL);
    ck_assert_str_eq(t, "");
    free(t);
    ck_assert(!tu_exited(p));
    /* syntax errors too */
    ck_assert_int_eq(tu_write_file(ce.d.conf, "instances = (\n  { module = \"lifecycle\" \n);\n"),
                     0);
    ck_assert_int_eq(kill(p->pid, SIGHUP), 0);
    snprintf(want, sizeof(want), "%s:3: syntax error", ce.d.conf);
    ce_wait_log(want, 10000);
    /* then a valid one applies */
    ck_assert_int_eq(tu_write_file(ce.d.conf, "instances = (\n" INST("a", "port = 5;") "\n);\n"),
                     0);
    ck_assert_int_eq(kill(p->pid, SIGHUP), 0);
    ce_wait_log("1 restarted, 0 added, 0 removed, 0 unchanged", 10000);
    t = tu_read_file(ce.trace, NULL);
    ck_assert_str_eq(t, "stop a\ndestroy a\ncreate a\nstart a\n");
    free(t);
    int st = tu_stop(p, SIGTERM, 10000);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("reload");
    TCase *tc = tcase_create("reload");
    tcase_add_checked_fixture(tc, ce_setup, ce_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_valid_reload_restarts_only_the_changed_instances);
    tcase_add_test(tc, an_invalid_reload_keeps_the_old_configuration_and_logs_file_line);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
