/*
 * The ABI promise: a module built out of tree, with nothing but the
 * installed <prismlb/module.h> and the prismlb-module pkg-config file,
 * loads into the daemon and its hooks run in order, twice under two
 * instance names.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "prismlb/module.h"
#include "testutil.h"

START_TEST(out_of_tree_module_loads_and_runs)
{
    char *dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    char cmd[16384], *out = NULL;

    /* 1. Install the development files only, into a private root. */
    snprintf(cmd, sizeof(cmd),
             "meson install -C '%s' --destdir '%s/root' --tags devel --no-rebuild --quiet",
             tu_build_path(""), dir);
    char *sh[] = {"sh", "-c", cmd, NULL};
    int rc = tu_run(sh, NULL, &out, 120000);
    ck_assert_msg(rc == 0, "install failed (%d): %s", rc, out);
    free(out);

    /* 2. Build the module from a copy of its source, outside the tree,
     * with flags from pkg-config alone. */
    snprintf(cmd, sizeof(cmd),
             "set -e; cp '%s' '%s/mod_lifecycle.c'; "
             "pc=$(dirname \"$(find '%s/root' -name prismlb-module.pc | head -n1)\"); "
             "export PKG_CONFIG_PATH=$pc PKG_CONFIG_SYSROOT_DIR='%s/root'; "
             "pkg-config --exists prismlb-module; "
             "echo moduledir=$(pkg-config --variable=moduledir prismlb-module); "
             "echo abi=$(pkg-config --variable=abi_major prismlb-module)."
             "$(pkg-config --variable=abi_minor prismlb-module); "
             "cd '%s' && cc $(pkg-config --cflags prismlb-module) -std=c11 -Wall -Wextra -Werror "
             "-fPIC -shared -fvisibility=hidden -o mod_lifecycle.so mod_lifecycle.c",
             tu_source_path("tests/modules/lifecycle/mod_lifecycle.c"), dir, dir, dir, dir);
    rc = tu_run(sh, NULL, &out, 120000);
    ck_assert_msg(rc == 0, "out-of-tree build failed (%d): %s", rc, out);
    ck_assert_msg(strstr(out, "moduledir=/") != NULL, "no moduledir: %s", out);
    char abi[32];
    snprintf(abi, sizeof(abi), "abi=%d.%d", PLB_ABI_MAJOR, PLB_ABI_MINOR);
    ck_assert_msg(strstr(out, abi) != NULL, "abi variables: %s", out);
    free(out);

    /* 3. Run it twice under two names; the trace shows the hook order. */
    char conf[4096], trace[4096], logfile[4096], mp[4096];
    snprintf(conf, sizeof(conf), "%s/oot.conf", dir);
    snprintf(trace, sizeof(trace), "%s/trace.log", dir);
    snprintf(logfile, sizeof(logfile), "%s/daemon.log", dir);
    snprintf(mp, sizeof(mp), "PRISMLB_MODULE_PATH=%s", dir);
    ck_assert_int_eq(
        tu_write_file(
            conf, "instances = (\n"
                  "  { module = \"lifecycle\"; name = \"alpha\"; trace_file = \"trace.log\"; },\n"
                  "  { module = \"lifecycle\"; name = \"beta\"; trace_file = \"trace.log\"; }\n"
                  ");\n"),
        0);
    char *argv[] = {(char *)tu_build_path("core/prismlb"), "--config", conf, NULL};
    char *env[] = {mp, NULL};
    struct tu_proc p;
    ck_assert_int_eq(tu_spawn(&p, argv, env, logfile), 0);
    char buf[64];
    ck_assert_int_eq(tu_wait_line(trace, "start beta", buf, sizeof(buf), 10000), 0);
    tu_stop(&p, SIGTERM, 10000);
    ck_assert(WIFEXITED(p.status));
    ck_assert_int_eq(WEXITSTATUS(p.status), 0);
    char *t = tu_read_file(trace, NULL);
    ck_assert_str_eq(t, "create alpha\ncreate beta\nstart alpha\nstart beta\n"
                        "stop beta\nstop alpha\ndestroy beta\ndestroy alpha\n");
    free(t);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* The README's module example, as a module author copies it: compiled with
 * -Wall -Wextra -Werror against the installed header and pkg-config file
 * alone (by cc, and by clang too when it is installed), and loaded by the
 * daemon, which runs its timer. The guide and the example configurations
 * are installed too. */
START_TEST(readme_example_compiles_and_runs)
{
    char *dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    char cmd[16384], *out = NULL;

    snprintf(cmd, sizeof(cmd),
             "meson install -C '%s' --destdir '%s/root' --tags devel --no-rebuild --quiet",
             tu_build_path(""), dir);
    char *sh[] = {"sh", "-c", cmd, NULL};
    int rc = tu_run(sh, NULL, &out, 120000);
    ck_assert_msg(rc == 0, "install failed (%d): %s", rc, out);
    free(out);

    snprintf(cmd, sizeof(cmd),
             "set -e; test -n \"$(find '%s/root' -path '*/doc/prismlb/README.md')\"; "
             "test -n \"$(find '%s/root' -path '*/doc/prismlb/examples/proxy.conf')\"; "
             "awk '/^```c$/ {on = 1; next} /^```$/ {if (on) exit} on' '%s' > '%s/hello.c'; "
             "grep -q PLB_MODULE_EXPORT '%s/hello.c'; "
             "pc=$(dirname \"$(find '%s/root' -name prismlb-module.pc | head -n1)\"); "
             "export PKG_CONFIG_PATH=$pc PKG_CONFIG_SYSROOT_DIR='%s/root'; "
             "cd '%s' && cc $(pkg-config --cflags prismlb-module) -std=c11 -Wall -Wextra -Werror "
             "-fPIC -shared -fvisibility=hidden -o mod_hello.so hello.c; "
             "if command -v clang >/dev/null 2>&1; then "
             "clang $(pkg-config --cflags prismlb-module) -std=c11 -Wall -Wextra -Werror "
             "-fPIC -shared -fvisibility=hidden -o clang-hello.so hello.c; echo clang=built; fi",
             dir, dir, tu_source_path("README.md"), dir, dir, dir, dir, dir);
    rc = tu_run(sh, NULL, &out, 120000);
    ck_assert_msg(rc == 0, "the README example does not build (%d): %s", rc, out);
    /* With clang installed, it builds warning-free there too. */
    if (system("command -v clang >/dev/null 2>&1") == 0)
        ck_assert_msg(strstr(out, "clang=built") != NULL, "no clang build: %s", out);
    free(out);

    char conf[4096], logfile[4096], mp[4096];
    snprintf(conf, sizeof(conf), "%s/hello.conf", dir);
    snprintf(logfile, sizeof(logfile), "%s/daemon.log", dir);
    snprintf(mp, sizeof(mp), "PRISMLB_MODULE_PATH=%s", dir);
    ck_assert_int_eq(tu_write_file(conf, "instances = ( { module = \"hello\"; every = \"1s\";\n"
                                         "  greeting = \"hi-there\"; } );\n"),
                     0);
    char *argv[] = {(char *)tu_build_path("core/prismlb"), "--config", conf, NULL};
    char *env[] = {mp, NULL};
    struct tu_proc p;
    ck_assert_int_eq(tu_spawn(&p, argv, env, logfile), 0);
    long long end = tu_now_ms() + 10000;
    while (!tu_file_has(logfile, "module=hello msg=tick greeting=hi-there") && tu_now_ms() < end)
        tu_sleep_ms(50);
    int ticked = tu_file_has(logfile, "module=hello msg=tick greeting=hi-there");
    tu_stop(&p, SIGTERM, 10000);
    char *l = tu_read_file(logfile, NULL);
    ck_assert_msg(ticked, "no tick in the log: %s", l ? l : "");
    free(l);
    ck_assert(WIFEXITED(p.status));
    ck_assert_int_eq(WEXITSTATUS(p.status), 0);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("abi");
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, out_of_tree_module_loads_and_runs);
    tcase_add_test(tc, readme_example_compiles_and_runs);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
