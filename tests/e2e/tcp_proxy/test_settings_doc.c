/*
 * modules/mod_tcp_proxy/README.md carries the settings reference that
 * `prismlb --settings-doc tcp_proxy` renders, between the markers
 * <!-- settings:begin --> and <!-- settings:end -->. Fails when stale.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

START_TEST(readme_settings_reference_is_current)
{
    char mp[8192];
    snprintf(mp, sizeof(mp), "PRISMLB_MODULE_PATH=%s", tu_build_path("modules/mod_tcp_proxy"));
    char *argv[] = {(char *)tu_build_path("core/prismlb"), "--settings-doc", "tcp_proxy", NULL};
    char *env[] = {mp, NULL};
    char *doc = NULL;
    ck_assert_int_eq(tu_run(argv, env, &doc, 30000), 0);
    ck_assert_ptr_nonnull(strstr(doc, "| `health_check_server_name` |"));

    char *readme = tu_read_file(tu_source_path("modules/mod_tcp_proxy/README.md"), NULL);
    ck_assert_ptr_nonnull(readme);
    const char *b = strstr(readme, "<!-- settings:begin -->\n");
    const char *e = strstr(readme, "<!-- settings:end -->");
    ck_assert_msg(b && e && e > b, "README.md lacks the settings markers");
    b += strlen("<!-- settings:begin -->\n");
    size_t n = (size_t)(e - b);
    ck_assert_msg(n == strlen(doc) && memcmp(b, doc, n) == 0,
                  "README.md settings reference is stale; regenerate it with "
                  "`prismlb --settings-doc tcp_proxy`:\n%s",
                  doc);
    free(readme);
    free(doc);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("tcp_proxy_settings_doc");
    TCase *tc = tcase_create("doc");
    tcase_add_test(tc, readme_settings_reference_is_current);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
