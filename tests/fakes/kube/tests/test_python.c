/*
 * The Debian python3-kubernetes client (run with /usr/bin/python3, which
 * has it) lists and watches EndpointSlices on the fake through a forced 410
 * and dropped connections; the script holds the assertions and this test
 * runs it against a fresh fake, once at the root and once under a
 * /clusters/<name> prefix; and it meets the fake's refusals of invalid
 * writes (python_refusals.py).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "fakeproc.h"
#include "testutil.h"

static void
run_script(const char *prefix)
{
    struct fake f;
    char script[4300], url[512], *out = NULL;
    const char *const extra[] = {"--bookmark-interval-ms", "300", NULL};
    char *argv[8];
    int rc;

    ck_assert_int_eq(fake_start(&f, extra), 0);
    snprintf(script, sizeof(script), "%s",
             tu_source_path("tests/fakes/kube/tests/python_client.py"));
    snprintf(url, sizeof(url), "%s%s", f.server[0], prefix);
    argv[0] = "/usr/bin/python3";
    argv[1] = script;
    argv[2] = url;
    argv[3] = f.admin;
    argv[4] = f.dir;
    argv[5] = NULL;
    rc = tu_run(argv, NULL, &out, 90000);
    ck_assert_msg(rc == 0, "python client script failed (rc %d):\n%s", rc, out ? out : "");
    ck_assert_msg(strstr(out, "ok: 410 seen 1"), "unexpected output: %s", out);
    free(out);
    ck_assert_int_eq(fake_stop(&f), 0);
}

START_TEST(python_list_watch_410_and_drop)
{
    run_script("");
}
END_TEST

START_TEST(python_under_cluster_prefix)
{
    run_script("/clusters/root:org:ws");
}
END_TEST

/* The refused writes of python_refusals.py, each an ApiException whose
 * Status names the field. */
START_TEST(python_meets_the_refusals)
{
    struct fake f;
    char script[4300], *out = NULL;
    char *argv[5];
    int rc;

    ck_assert_int_eq(fake_start(&f, NULL), 0);
    snprintf(script, sizeof(script), "%s",
             tu_source_path("tests/fakes/kube/tests/python_refusals.py"));
    argv[0] = "/usr/bin/python3";
    argv[1] = script;
    argv[2] = f.server[0];
    argv[3] = f.dir;
    argv[4] = NULL;
    rc = tu_run(argv, NULL, &out, 90000);
    ck_assert_msg(rc == 0 && strstr(out, "ok: 6 refusals"), "python refusals (rc %d):\n%s", rc,
                  out ? out : "");
    free(out);
    ck_assert_int_eq(fake_stop(&f), 0);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("fake-kube-python");
    TCase *tc = tcase_create("python");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, python_list_watch_410_and_drop);
    tcase_add_test(tc, python_under_cluster_prefix);
    tcase_add_test(tc, python_meets_the_refusals);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
