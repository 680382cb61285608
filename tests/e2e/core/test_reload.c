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

#include "testutil.h"

static char *dir;
static char trace[4096], conf[4096], logfile[4096], module_path[4096];

static void
setup(void)
{
    dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    snprintf(trace, sizeof(trace), "%s/trace.log", dir);
    snprintf(conf, sizeof(conf), "%s/test.conf", dir);
    snprintf(logfile, sizeof(logfile), "%s/daemon.log", dir);
    snprintf(module_path, sizeof(module_path), "PRISMLB_MODULE_PATH=%s",
             tu_build_path("tests/modules"));
}

static void
teardown(void)
{
    tu_rmrf(dir);
    free(dir);
}

static void
wait_log(const char *needle, int timeout_ms)
{
    long long dl = tu_now_ms() + timeout_ms;
    while (!tu_file_has(logfile, needle) && tu_now_ms() < dl)
        tu_sleep_ms(20);
    if (!tu_file_has(logfile, needle)) {
        char *l = tu_read_file(logfile, NULL);
        ck_abort_msg("no \"%s\" in the log:\n%s", needle, l ? l : "");
    }
}

#define INST(name, extra)                                                                          \
    "  { module = \"lifecycle\"; name = \"" name "\"; trace_file = \"trace.log\"; " extra " }"

/* A changed setting restarts that instance only; a new one starts, a
 * removed one stops; the unchanged one sees no hook at all. */
START_TEST(a_valid_reload_restarts_only_the_changed_instances)
{
    struct tu_proc p;
    ck_assert_int_eq(tu_write_file(conf, "instances = (\n" INST("a", "port = 1;") ",\n" INST(
                                             "b", "port = 2;") ",\n" INST("gone", "") "\n);\n"),
                     0);
    char *argv[] = {(char *)tu_build_path("core/prismlb"), "--config", conf, NULL};
    char *env[] = {module_path, NULL};
    ck_assert_int_eq(tu_spawn(&p, argv, env, logfile), 0);
    /* Instances start in config order: the last one's line means all. */
    wait_log("instance=gone module=lifecycle msg=started", 10000);
    ck_assert(tu_file_has(trace, "start gone"));
    ck_assert_int_eq(tu_write_file(trace, ""), 0);
    ck_assert_int_eq(
        tu_write_file(conf,
                      "log_level = \"debug\";\ninstances = (\n" INST("a", "port = 1;") ",\n" INST(
                          "b", "port = 3;") ",\n" INST("new", "") "\n);\n"),
        0);
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    wait_log("1 restarted, 1 added, 1 removed, 1 unchanged", 10000);
    char *t = tu_read_file(trace, NULL);
    ck_assert_ptr_nonnull(t);
    /* stops in reverse config order, then creates and starts in order */
    ck_assert_str_eq(t, "stop gone\nstop b\ndestroy gone\ndestroy b\ncreate b\nstart b\n"
                        "create new\nstart new\n");
    free(t);
    /* the new log_level applies: a debug line from now on is written */
    ck_assert(tu_file_has(logfile, "SIGHUP: reloading"));
    /* the daemon runs on and stops cleanly with the new set */
    ck_assert_int_eq(tu_write_file(trace, ""), 0);
    int st = tu_stop(&p, SIGTERM, 10000);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    t = tu_read_file(trace, NULL);
    ck_assert_str_eq(t, "stop new\nstop b\nstop a\ndestroy new\ndestroy b\ndestroy a\n");
    free(t);
}
END_TEST

/* A file with an error: the log names FILE:LINE and the setting, the
 * running configuration stays (no hook runs), and a later valid reload
 * applies. */
START_TEST(an_invalid_reload_keeps_the_old_configuration_and_logs_file_line)
{
    struct tu_proc p;
    char want[8400];
    ck_assert_int_eq(tu_write_file(conf, "instances = (\n" INST("a", "port = 1;") "\n);\n"), 0);
    char *argv[] = {(char *)tu_build_path("core/prismlb"), "--config", conf, NULL};
    char *env[] = {module_path, NULL};
    ck_assert_int_eq(tu_spawn(&p, argv, env, logfile), 0);
    wait_log("msg=started", 10000);
    ck_assert_int_eq(tu_write_file(trace, ""), 0);
    ck_assert_int_eq(tu_write_file(conf, "instances = (\n"
                                         "  { module = \"lifecycle\"; name = \"a\";\n"
                                         "    trace_file = \"trace.log\";\n"
                                         "    prot = 2; }\n);\n"),
                     0);
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    wait_log("the running configuration stays", 10000);
    snprintf(want, sizeof(want), "%s:4: instances.a.prot: unknown setting", conf);
    ck_assert_msg(tu_file_has(logfile, want), "no \"%s\" in the log", want);
    char *t = tu_read_file(trace, NULL);
    ck_assert_str_eq(t, "");
    free(t);
    ck_assert(!tu_exited(&p));
    /* syntax errors too */
    ck_assert_int_eq(tu_write_file(conf, "instances = (\n  { module = \"lifecycle\" \n);\n"), 0);
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    snprintf(want, sizeof(want), "%s:3: syntax error", conf);
    wait_log(want, 10000);
    /* then a valid one applies */
    ck_assert_int_eq(tu_write_file(conf, "instances = (\n" INST("a", "port = 5;") "\n);\n"), 0);
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    wait_log("1 restarted, 0 added, 0 removed, 0 unchanged", 10000);
    t = tu_read_file(trace, NULL);
    ck_assert_str_eq(t, "stop a\ndestroy a\ncreate a\nstart a\n");
    free(t);
    int st = tu_stop(&p, SIGTERM, 10000);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("reload");
    TCase *tc = tcase_create("reload");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_valid_reload_restarts_only_the_changed_instances);
    tcase_add_test(tc, an_invalid_reload_keeps_the_old_configuration_and_logs_file_line);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
