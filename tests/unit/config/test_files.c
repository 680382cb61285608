/*
 * Hostile files named by the configuration: an @include of a FIFO, a
 * directory or /proc/self/mem, a config file that is a FIFO, and
 * kubeconfigs that are FIFOs or unusable. Each is exit status 1 with the
 * including FILE:LINE (or the setting's) and a clear reason, never a hang
 * and never libconfig's scanner exiting with status 2. A daemon whose
 * kubeconfig is a FIFO says so and still stops on SIGTERM.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"
#include "testutil.h"

/* "PRISMLB_MODULE_PATH=<build>/tests/modules:<build>/modules" (static). */
static const char *
module_path(void)
{
    static const char *const dirs[] = {"tests/modules", "modules", NULL};
    return tu_module_path_env(dirs);
}

static const char *
at(const char *name)
{
    static char path[4][4096];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof(path[k]), "%s/%s", tu_dir, name);
    return path[k];
}

/* --check-config on DIR/name (at most 10 s); the exit status, or -1 when
 * it had to be killed. */
static int
check(const char *name, char **out)
{
    char exe[4096];
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    char *argv[] = {exe, "--check-config", "--config", (char *)at(name), NULL};
    char *env[] = {(char *)module_path(), NULL};
    return tu_run(argv, env, out, 10000);
}

static void
assert_has(const char *out, const char *want)
{
    if (!strstr(out, want))
        ck_abort_msg("expected \"%s\" in output:\n%s", want, out);
}

#define GOOD_INSTANCES "instances = ( { module = \"lifecycle\"; name = \"a\"; } );\n"

START_TEST(include_of_a_fifo_is_an_error_not_a_hang)
{
    char *out = NULL, want[4300];
    ck_assert_int_eq(mkfifo(at("pipe.conf"), 0600), 0);
    ck_assert_int_eq(tu_write_file(at("main.conf"), "log_level = \"info\";\n"
                                                    "@include \"pipe.conf\"\n" GOOD_INSTANCES),
                     0);
    int rc = check("main.conf", &out);
    ck_assert_msg(rc == 1, "exit %d (-1: hung); output:\n%s", rc, out);
    snprintf(want, sizeof(want),
             "%s:2: cannot include \"%s/pipe.conf\": not a regular file (a FIFO)", at("main.conf"),
             tu_dir);
    assert_has(out, want);
    free(out);
}
END_TEST

START_TEST(include_of_a_directory_or_proc_self_mem_names_file_and_line)
{
    char *out = NULL, want[4300];
    ck_assert_int_eq(mkdir(at("sub"), 0700), 0);
    ck_assert_int_eq(tu_write_file(at("dir.conf"), GOOD_INSTANCES "\n\n@include \"sub\"\n"), 0);
    int rc = check("dir.conf", &out);
    ck_assert_msg(rc == 1, "exit %d; output:\n%s", rc, out);
    snprintf(want, sizeof(want),
             "%s:4: cannot include \"%s/sub\": not a regular file (a directory)", at("dir.conf"),
             tu_dir);
    assert_has(out, want);
    ck_assert_ptr_null(strstr(out, "flex scanner"));
    free(out);

    /* libconfig puts the include directory in front of every path, so a
     * relative path reaches /proc from a directory under /tmp. */
    char rel[4096] = "";
    for (const char *p = tu_dir; *p; p++)
        if (*p == '/')
            strcat(rel, "../");
    strcat(rel, "proc/self/mem");
    char text[8192];
    snprintf(text, sizeof(text), GOOD_INSTANCES "@include \"%s\"\n", rel);
    ck_assert_int_eq(tu_write_file(at("mem.conf"), text), 0);
    out = NULL;
    rc = check("mem.conf", &out);
    ck_assert_msg(rc == 1, "exit %d; output:\n%s", rc, out);
    snprintf(want, sizeof(want), "%s:2: cannot include \"", at("mem.conf"));
    assert_has(out, want);
    assert_has(out, strerror(EIO));
    ck_assert_ptr_null(strstr(out, "flex scanner"));
    free(out);

    /* Nested: the error names the file and line that include it. */
    ck_assert_int_eq(tu_write_file(at("outer.conf"), "@include \"inner.conf\"\n" GOOD_INSTANCES),
                     0);
    ck_assert_int_eq(tu_write_file(at("inner.conf"), "# inner\n@include \"sub\"\n"), 0);
    out = NULL;
    rc = check("outer.conf", &out);
    ck_assert_msg(rc == 1, "exit %d; output:\n%s", rc, out);
    snprintf(want, sizeof(want), "%s:2: cannot include \"%s/sub\"", at("inner.conf"), tu_dir);
    assert_has(out, want);
    free(out);
}
END_TEST

START_TEST(config_file_that_is_a_fifo)
{
    char *out = NULL;
    ck_assert_int_eq(mkfifo(at("fifo.conf"), 0600), 0);
    int rc = check("fifo.conf", &out);
    ck_assert_msg(rc == 1, "exit %d (-1: hung); output:\n%s", rc, out);
    assert_has(out, "cannot read the config file: not a regular file (a FIFO)");
    free(out);
}
END_TEST

static void
leader_conf(const char *name, const char *kubeconfig)
{
    char text[8192];
    snprintf(text, sizeof(text),
             "instances = (\n"
             "  { module = \"leader\"; name = \"leader\"; lease_namespace = \"default\";\n"
             "    lease_name = \"x\"; identity = \"me\";\n"
             "    kubeconfig = \"%s\"; }\n"
             ");\n",
             kubeconfig);
    ck_assert_int_eq(tu_write_file(at(name), text), 0);
}

/* --check-config loads each kubeconfig a setting names: a FIFO, a file
 * that is not a kubeconfig, or one whose context is missing fails the
 * check at the setting's line. */
START_TEST(check_config_loads_each_kubeconfig)
{
    char *out = NULL, want[4300];
    ck_assert_int_eq(mkfifo(at("kc-fifo"), 0600), 0);
    leader_conf("a.conf", at("kc-fifo"));
    int rc = check("a.conf", &out);
    ck_assert_msg(rc == 1, "exit %d (-1: hung); output:\n%s", rc, out);
    snprintf(want, sizeof(want),
             "%s:4: instances.leader.kubeconfig: cannot use this kubeconfig: "
             "%s: not a regular file (a FIFO)",
             at("a.conf"), at("kc-fifo"));
    assert_has(out, want);
    free(out);

    ck_assert_int_eq(tu_write_file(at("kc-bad"), "apiVersion: v1\nkind: Config\n"
                                                 "current-context: nowhere\n"),
                     0);
    leader_conf("b.conf", at("kc-bad"));
    out = NULL;
    rc = check("b.conf", &out);
    ck_assert_msg(rc == 1, "exit %d; output:\n%s", rc, out);
    snprintf(want, sizeof(want),
             "%s:4: instances.leader.kubeconfig: cannot use this kubeconfig: %s: ", at("b.conf"),
             at("kc-bad"));
    assert_has(out, want);
    free(out);

    /* A usable one passes. */
    ck_assert_int_eq(tu_write_file(at("kc-ok"), "apiVersion: v1\nkind: Config\n"
                                                "clusters:\n- name: c\n  cluster:\n"
                                                "    server: https://127.0.0.1:6443\n"
                                                "contexts:\n- name: x\n  context:\n"
                                                "    cluster: c\n    user: u\n"
                                                "current-context: x\n"
                                                "users:\n- name: u\n  user:\n    token: t\n"),
                     0);
    leader_conf("c.conf", at("kc-ok"));
    out = NULL;
    rc = check("c.conf", &out);
    ck_assert_msg(rc == 0, "exit %d; output:\n%s", rc, out);
    free(out);
}
END_TEST

/* The daemon, with a kubeconfig that is a FIFO: a clear error instead of
 * a hang, and SIGTERM ends it. */
START_TEST(daemon_with_a_fifo_kubeconfig_says_so_and_stops)
{
    ck_assert_int_eq(mkfifo(at("kc-fifo"), 0600), 0);
    leader_conf("d.conf", at("kc-fifo"));
    char *env[] = {(char *)module_path(), NULL};
    struct tu_daemon d;
    tu_daemon_init(&d, tu_dir, "d");
    tu_daemon_spawn(&d, NULL, NULL, env);
    if (tu_daemon_wait_log(&d, "not a regular file (a FIFO)", 10000) == -1)
        tu_daemon_fail(&d, "no \"not a regular file (a FIFO)\" in the log");
    struct tu_proc *p = &d.proc;
    /* a daemon that exited must have said it: wait_log asked once more */
    ck_assert_msg(tu_file_has(d.log, "not a regular file (a FIFO)"), "log:\n%s", tu_daemon_log(&d));
    if (!tu_exited(p)) {
        ck_assert_int_eq(kill(p->pid, SIGTERM), 0);
        ck_assert_msg(tu_wait_exit(p, 10000), "no exit within 10 s of SIGTERM");
    }
    /* Exited (it gives up on the instance), or ended by the SIGTERM. */
    ck_assert_msg(WIFEXITED(p->status) ||
                      (WIFSIGNALED(p->status) && WTERMSIG(p->status) == SIGTERM),
                  "wait status %d", p->status);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("config-files");
    TCase *tc = tcase_create("files");
    tcase_add_checked_fixture(tc, tu_dir_setup, tu_dir_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, include_of_a_fifo_is_an_error_not_a_hang);
    tcase_add_test(tc, include_of_a_directory_or_proc_self_mem_names_file_and_line);
    tcase_add_test(tc, config_file_that_is_a_fifo);
    tcase_add_test(tc, check_config_loads_each_kubeconfig);
    tcase_add_test(tc, daemon_with_a_fifo_kubeconfig_says_so_and_stops);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
