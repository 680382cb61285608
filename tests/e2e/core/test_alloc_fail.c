/*
 * Allocation-failure injection: the daemon's configuration path (reading
 * the file, loading modules, parsing every setting, checking links) is run
 * with its Nth allocation failing, for N spread over the whole run and
 * every N of its last part. Each run
 * must end in a clean error (exit 1 with a message) or success — never a
 * crash, and under the sanitizers never a leak (LeakSanitizer exits 23).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

START_TEST(every_allocation_failure_in_check_config_is_clean)
{
    char *dir = tu_mkdtemp();
    char conf[4096], mp[4096], fail[64];
    snprintf(conf, sizeof(conf), "%s/sweep.conf", dir);
    snprintf(mp, sizeof(mp), "PRISMLB_MODULE_PATH=%s", tu_build_path("tests/modules"));
    ck_assert_int_eq(
        tu_write_file(conf,
                      "log_level = \"warn\";\n"
                      "instances = (\n"
                      "  { module = \"lifecycle\"; name = \"src\"; trace_file = \"t\";\n"
                      "    publish = [\"10.0.0.1:6443\", \"10.0.0.2:6443\"]; tags = \"a,b\"; },\n"
                      "  { module = \"lifecycle\"; name = \"sink\"; trace_file = \"t\";\n"
                      "    sources = [\"src\"]; gate = \"src\"; interval = \"2s\"; }\n"
                      ");\n"),
        0);
    char *argv[] = {(char *)tu_build_path("core/prismlb"), "--check-config", "--config", conf,
                    NULL};
    /* How many allocations a successful run makes. */
    char stats[] = "PRISMLB_ALLOC_STATS=1";
    char *env0[] = {mp, stats, NULL};
    char *out = NULL;
    ck_assert_int_eq(tu_run(argv, env0, &out, 30000), 0);
    const char *at = strstr(out, "allocations: ");
    ck_assert_ptr_nonnull(at);
    long total = strtol(at + strlen("allocations: "), NULL, 10);
    free(out);
    ck_assert_int_gt(total, 50);

    /* Fail them in turn: about 60 runs spread evenly over the whole run
     * (library start-up is most of it), plus every one of the last 60. */
    int failures = 0;
    long stride = total / 60 > 1 ? total / 60 : 1;
    for (long n = 1; n <= total; n += (n >= total - 60 ? 1 : stride)) {
        snprintf(fail, sizeof(fail), "PRISMLB_FAIL_ALLOC=%ld", n);
        char *env[] = {mp, fail, NULL};
        int rc = tu_run(argv, env, &out, 30000);
        ck_assert_msg(rc == 0 || rc == 1, "allocation %ld of %ld: exit %d:\n%s", n, total, rc,
                      out ? out : "");
        if (rc == 1) {
            ck_assert_msg(out && *out, "allocation %ld: exit 1 without a message", n);
            failures++;
        } else {
            ck_assert_str_eq(out, "OK\n");
        }
        free(out);
    }
    ck_assert_int_gt(failures, 10); /* the sweep really made runs fail */
    tu_rmrf(dir);
    free(dir);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("alloc-fail");
    TCase *tc = tcase_create("alloc-fail");
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, every_allocation_failure_in_check_config_is_clean);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
