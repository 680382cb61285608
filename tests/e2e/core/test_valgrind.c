/*
 * valgrind --leak-check=full finds nothing in the daemon started with
 * conf/demo.conf, scraped, and stopped by SIGTERM. The run happens in a
 * network namespace of its own so the demo's fixed ports are free.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

START_TEST(demo_conf_is_valgrind_clean)
{
    char daemon[4096], conf[4096], script[4096];
    snprintf(daemon, sizeof(daemon), "%s", tu_build_path("core/prismlb"));
    snprintf(conf, sizeof(conf), "%s", tu_source_path("conf/demo.conf"));
    snprintf(script, sizeof(script), "%s", tu_source_path("tests/e2e/core/valgrind-demo.sh"));
    char *argv[] = {"unshare", "-n", "sh", script, daemon, conf, NULL};
    char *out = NULL;
    int rc = tu_run(argv, NULL, &out, 240000);
    ck_assert_msg(rc == 0, "unshare failed (%d): %s", rc, out ? out : "");
    ck_assert_msg(strstr(out, "exit=0\n") != NULL, "valgrind or the daemon failed:\n%s", out);
    ck_assert_msg(strstr(out, "prismlb metric lines: 0") == NULL, "no metrics served:\n%s", out);
    free(out);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("valgrind");
    TCase *tc = tcase_create("valgrind");
    tcase_set_timeout(tc, 250);
    tcase_add_test(tc, demo_conf_is_valgrind_clean);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
