/*
 * The ABI promise: a module built out of tree, with nothing but the
 * installed <prismlb/module.h> (and <prismlb/module_util.h>) and the
 * prismlb-module pkg-config file, loads into the daemon and its hooks run
 * in order, twice under two instance names; every test module and the
 * README's example build so under gcc and clang with -Werror and load; a
 * module that uses a member only where PLB_HAS finds it takes its fallback
 * on a table cut short as an older 3.x daemon's is.
 */
#include <check.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fakehost.h"
#include "prismlb/module.h"
#include "daemon.h"

/* Install the development files only (header, helpers, pkg-config file,
 * docs) into dir/root. */
static void
install_devel(const char *dir)
{
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             "meson install -C '%s' --destdir '%s/root' --tags devel --no-rebuild --quiet",
             tu_build_path(""), dir);
    char *sh[] = {"sh", "-c", cmd, NULL};
    int rc = tu_run(sh, NULL, &out, 120000);
    ck_assert_msg(rc == 0, "install failed (%d): %s", rc, out);
    free(out);
}

/* Copy the module source src to dir/NAME.c and build it as a module author
 * does, with the flags of the pkg-config file installed in dir/root alone
 * (and cflags), -Wall -Wextra -Werror: dir/NAME.so by cc and, when clang is
 * installed, dir/NAME-clang.so by clang. Returns 1 when clang built too. */
static int
build_oot(const char *dir, const char *src, const char *name, const char *cflags)
{
    int have_clang = system("command -v clang >/dev/null 2>&1") == 0;
    char cmd[16384], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             "set -e; cp '%s' '%s/%s.c'; "
             "pc=$(dirname \"$(find '%s/root' -name prismlb-module.pc | head -n1)\"); "
             "export PKG_CONFIG_PATH=$pc PKG_CONFIG_SYSROOT_DIR='%s/root'; cd '%s'; "
             "for c in cc %s; do o=%s.so; [ $c = cc ] || o=%s-$c.so; "
             "$c $(pkg-config --cflags prismlb-module) %s -std=c11 -Wall -Wextra -Werror "
             "-fPIC -shared -fvisibility=hidden -o $o %s.c; echo built=$c; done",
             src, dir, name, dir, dir, dir, have_clang ? "clang" : "", name, name, cflags, name);
    char *sh[] = {"sh", "-c", cmd, NULL};
    int rc = tu_run(sh, NULL, &out, 120000);
    ck_assert_msg(rc == 0, "%s %s does not build out of tree (%d): %s", src, cflags, rc, out);
    ck_assert_msg(strstr(out, "built=cc") != NULL, "no cc build: %s", out);
    if (have_clang)
        ck_assert_msg(strstr(out, "built=clang") != NULL, "no clang build: %s", out);
    free(out);
    return have_clang;
}

/* Run the daemon on the config text (written to dir/run.conf) with the
 * modules of dir, until its log holds needle (10 s at most), then stop it
 * with SIGTERM; it must have logged needle and exited 0. Its log, new. */
static char *
run_until(const char *dir, const char *text, const char *needle)
{
    struct tu_daemon d;
    char mp[4096];
    snprintf(mp, sizeof(mp), "PRISMLB_MODULE_PATH=%s", dir);
    char *env[] = {mp, NULL};
    tu_daemon_init(&d, dir, "run");
    tu_daemon_spawn(&d, text, NULL, env);
    if (tu_daemon_wait_log(&d, needle, 10000) != 0) {
        tu_daemon_stop(&d, SIGKILL, 5000);
        tu_daemon_fail(&d, "no \"%s\" in the log", needle);
    }
    tu_daemon_finish(&d, 10000);
    return tu_daemon_log(&d);
}

START_TEST(out_of_tree_module_loads_and_runs)
{
    char *dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    char cmd[16384], *out = NULL;

    /* 1. Install the development files only, into a private root. */
    install_devel(dir);
    char *sh[] = {"sh", "-c", cmd, NULL};
    int rc;

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
    struct tu_daemon d;
    char trace[4096], mp[4096];
    snprintf(trace, sizeof(trace), "%s/trace.log", dir);
    snprintf(mp, sizeof(mp), "PRISMLB_MODULE_PATH=%s", dir);
    char *env[] = {mp, NULL};
    tu_daemon_init(&d, dir, "oot");
    tu_daemon_spawn(&d,
                    "instances = (\n"
                    "  { module = \"lifecycle\"; name = \"alpha\"; trace_file = \"trace.log\"; },\n"
                    "  { module = \"lifecycle\"; name = \"beta\"; trace_file = \"trace.log\"; }\n"
                    ");\n",
                    NULL, env);
    char buf[64];
    if (tu_wait_line(trace, "start beta", buf, sizeof(buf), 10000) != 0)
        tu_daemon_fail(&d, "no \"start beta\" in the trace");
    tu_daemon_finish(&d, 10000);
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

    install_devel(dir);
    snprintf(cmd, sizeof(cmd),
             "set -e; test -n \"$(find '%s/root' -path '*/doc/prismlb/README.md')\"; "
             "test -n \"$(find '%s/root' -path '*/doc/prismlb/module-guide.md')\"; "
             "test -n \"$(find '%s/root' -path '*/doc/prismlb/examples/proxy.conf')\"; "
             "awk '/^```c$/ {on = 1; next} /^```$/ {if (on) exit} on' '%s' > '%s/readme.c'; "
             "grep -q PLB_MODULE_EXPORT '%s/readme.c'",
             dir, dir, dir, tu_source_path("README.md"), dir, dir);
    char *sh[] = {"sh", "-c", cmd, NULL};
    int rc = tu_run(sh, NULL, &out, 30000);
    ck_assert_msg(rc == 0, "the installed docs or the README example are missing (%d): %s", rc,
                  out);
    free(out);
    char src[4200];
    snprintf(src, sizeof(src), "%s/readme.c", dir);
    build_oot(dir, src, "mod_hello", "");

    free(run_until(dir,
                   "instances = ( { module = \"hello\"; every = \"1s\";\n"
                   "  greeting = \"hi-there\"; } );\n",
                   "module=hello msg=tick greeting=hi-there"));
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* Every module of tests/modules, copied out of the tree and built with the
 * flags of the installed pkg-config file alone, -Wall -Wextra -Werror, by
 * cc and by clang (when installed); each loads: --check-config of a config
 * naming the built file passes. */
struct oot_module {
    const char *src;      /* under tests/modules */
    const char *cflags;   /* extra: the stride layouts */
    const char *settings; /* what its instance needs */
};
static const struct oot_module oot_modules[] = {
    {"lifecycle/mod_lifecycle.c", "", "trace_file = \"trace.log\";"},
    {"stride/mod_stride.c", "", ""},
    {"stride/mod_stride.c", "-DSTRIDE_NEWER", ""},
    {"stride/mod_stride.c", "-DSTRIDE_OLDER", ""},
    {"lbfile/mod_lbfile.c", "", "kubeconfig = \"kc\"; output_file = \"out\";"},
    {"lbtrim/mod_lbtrim.c", "", "kubeconfig = \"kc\"; output_file = \"out\";"},
    {"writer/mod_writer.c", "", "identity = \"w\"; url = \"http://127.0.0.1:9/x\";"},
    {"has/mod_has.c", "", ""},
};

START_TEST(every_test_module_builds_out_of_tree_and_loads)
{
    const struct oot_module *m = &oot_modules[_i];
    char *dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    char *out = NULL;
    install_devel(dir);
    char src[4096];
    snprintf(src, sizeof(src), "%s/%s", tu_source_path("tests/modules"), m->src);
    int have_clang = build_oot(dir, src, "mod", m->cflags);
    int rc;

    for (int k = 0; k < 1 + have_clang; k++) {
        char conf[4096], text[1024];
        snprintf(conf, sizeof(conf), "%s/check.conf", dir);
        snprintf(text, sizeof(text), "instances = ( { module = \"./mod%s.so\"; %s } );\n",
                 k ? "-clang" : "", m->settings);
        ck_assert_int_eq(tu_write_file(conf, text), 0);
        char *argv[] = {(char *)tu_build_path("core/prismlb"), "--check-config", "--config", conf,
                        NULL};
        rc = tu_run(argv, NULL, &out, 30000);
        ck_assert_msg(rc == 0, "%s (%s) does not load (%d): %s", m->src, k ? "clang" : "cc", rc,
                      out);
        free(out);
    }
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* mod_has built out of tree with a descriptor that says 3.0 runs on the
 * daemon (of a newer minor: an older minor loads), finds every member and uses new_real. */
START_TEST(a_module_built_for_3_0_finds_every_member_on_the_daemon)
{
    char *dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    install_devel(dir);
    build_oot(dir, tu_source_path("tests/modules/has/mod_has.c"), "mod_has", "-DHAS_ABI_MINOR=0");

    char *l = run_until(dir, "instances = ( { module = \"has\"; } );\n", "msg=started");
    static const char *const want[] = {
        "has host.links: yes",     "has log.set_level: yes",
        "has mem.strdup: yes",     "has loop.snapshot_free: yes",
        "has http.reply: yes",     "has kube.informer_foreach: yes",
        "has obj.new_real: yes",   "has metrics.on_collect: yes",
        "has lb.keep_slices: yes", "has links.done: yes",
        "built 0.5 with new_real",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        ck_assert_msg(strstr(l, want[i]) != NULL, "no \"%s\" in: %s", want[i], l);
    free(l);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* The same module on a host whose tables are cut short, as an older 3.x
 * daemon's are: PLB_HAS finds the members from the cut on absent, and the
 * module takes its fallback instead of calling past the table's end. */
static char logged[4096];
static int new_real_calls, new_str_calls;
static plb_obj *const a_value = (plb_obj *)(void *)&new_real_calls; /* never dereferenced */

static void cap_msg(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, ...) PLB_PRINTF(3, 4);

static void
cap_msg(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, ...)
{
    (void)ctx;
    (void)lvl;
    size_t n = strlen(logged);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(logged + n, sizeof(logged) - n, fmt, ap);
    va_end(ap);
    n = strlen(logged);
    snprintf(logged + n, sizeof(logged) - n, "\n");
}

static plb_obj *
f_new_real(double v)
{
    (void)v;
    new_real_calls++;
    return a_value;
}

static plb_obj *
f_new_str(const char *s)
{
    (void)s;
    new_str_calls++;
    return a_value;
}

static void
f_unref(plb_obj *o)
{
    ck_assert_ptr_eq(o, a_value);
}

/* Create and destroy mod_has on f; what it logged is in `logged`. */
static void
run_has(struct fake_host *f)
{
    void *dl = dlopen(tu_build_path("tests/modules/mod_has.so"), RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(dl != NULL, "%s", dlerror());
    const struct plb_module *mod = dlsym(dl, PLB_MODULE_SYMBOL);
    ck_assert_ptr_nonnull(mod);
    logged[0] = '\0';
    new_real_calls = new_str_calls = 0;
    void *state = NULL;
    char err[128] = "";
    ck_assert_int_eq(mod->create(fake_host(f), NULL, NULL, &state, err, sizeof(err)), 0);
    mod->destroy(state);
    dlclose(dl);
}

static void
fake_setup(struct fake_host *f)
{
    fake_host_init(f);
    f->log.msg = cap_msg;
    f->obj.new_real = f_new_real;
    f->obj.new_str = f_new_str;
    f->obj.unref = f_unref;
}

START_TEST(a_member_the_daemon_lacks_is_found_absent)
{
    struct fake_host f;
    fake_setup(&f);
    run_has(&f);
    ck_assert_msg(strstr(logged, "has obj.new_real: yes\n") != NULL, "%s", logged);
    ck_assert_msg(strstr(logged, "built 0.5 with new_real\n") != NULL, "%s", logged);
    ck_assert_int_eq(new_real_calls, 1);

    /* An obj table that ends before new_real: set, but not the daemon's. */
    fake_setup(&f);
    fake_host_cut(&f.obj.size, offsetof(struct plb_host_obj, new_real));
    run_has(&f);
    ck_assert_msg(strstr(logged, "has obj.new_real: no\n") != NULL, "%s", logged);
    ck_assert_msg(strstr(logged, "has obj.new_null: ") == NULL, "%s", logged);
    ck_assert_msg(strstr(logged, "built 0.5 with new_str\n") != NULL, "%s", logged);
    ck_assert_int_eq(new_real_calls, 0);
    ck_assert_int_eq(new_str_calls, 1);
    ck_assert_msg(strstr(logged, "has metrics.on_collect: yes\n") != NULL, "%s", logged);

    /* A root that ends before the links table: the table is not read. */
    fake_setup(&f);
    fake_host_cut(&f.root.size, offsetof(struct plb_host, links));
    f.root.links = NULL; /* what lies past an older root: never to be read */
    run_has(&f);
    ck_assert_msg(strstr(logged, "has host.links: no\n") != NULL, "%s", logged);
    ck_assert_msg(strstr(logged, "has links.done: no\n") != NULL, "%s", logged);
    ck_assert_msg(strstr(logged, "has lb.keep_slices: yes\n") != NULL, "%s", logged);
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
    tcase_add_loop_test(tc, every_test_module_builds_out_of_tree_and_loads, 0,
                        (int)(sizeof(oot_modules) / sizeof(oot_modules[0])));
    tcase_add_test(tc, a_module_built_for_3_0_finds_every_member_on_the_daemon);
    tcase_add_test(tc, a_member_the_daemon_lacks_is_found_absent);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
