/* Unit tests: label selector parser, matcher and label validation. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "selector.h"
#include "testutil.h"

static json_t *labels;

static void
setup(void)
{
    labels = json_pack("{s:s, s:s, s:s}", "robotlb/service-uid", "1234-abcd", "env", "prod", "tier",
                       "web");
    ck_assert_ptr_nonnull(labels);
}

static void
teardown(void)
{
    json_decref(labels);
}

/* Parse text, expect success, return match result against labels. */
static int
match(const char *text)
{
    struct hz_selector *s = NULL;
    char err[160] = "";
    int rc = hz_selector_parse(text, &s, err, sizeof(err));
    ck_assert_msg(rc == 0, "parse '%s' failed: %s", text, err);
    int m = hz_selector_match(s, labels);
    hz_selector_free(s);
    return m;
}

static int
parse_fails(const char *text)
{
    struct hz_selector *s = NULL;
    char err[160] = "";
    int rc = hz_selector_parse(text, &s, err, sizeof(err));
    ck_assert_ptr_null(s);
    if (rc == -EINVAL)
        ck_assert_msg(err[0] != '\0', "no message for '%s'", text);
    return rc == -EINVAL;
}

START_TEST(test_equality)
{
    ck_assert_int_eq(match("env=prod"), 1);
    ck_assert_int_eq(match("env==prod"), 1);
    ck_assert_int_eq(match("env=dev"), 0);
    ck_assert_int_eq(match("env==dev"), 0);
    ck_assert_int_eq(match("robotlb/service-uid=1234-abcd"), 1);
    ck_assert_int_eq(match("missing=x"), 0);
    ck_assert_int_eq(match(" env = prod "), 1);
}
END_TEST

START_TEST(test_inequality)
{
    ck_assert_int_eq(match("env!=dev"), 1);
    ck_assert_int_eq(match("env!=prod"), 0);
    /* An absent key satisfies != */
    ck_assert_int_eq(match("missing!=x"), 1);
}
END_TEST

START_TEST(test_exists_absent)
{
    ck_assert_int_eq(match("env"), 1);
    ck_assert_int_eq(match("missing"), 0);
    ck_assert_int_eq(match("!missing"), 1);
    ck_assert_int_eq(match("!env"), 0);
    ck_assert_int_eq(match("!robotlb/service-uid"), 0);
}
END_TEST

START_TEST(test_sets)
{
    ck_assert_int_eq(match("env in (prod,dev)"), 1);
    ck_assert_int_eq(match("env in (dev, test)"), 0);
    ck_assert_int_eq(match("env in (prod)"), 1);
    ck_assert_int_eq(match("missing in (a,b)"), 0);
    ck_assert_int_eq(match("env notin (dev,test)"), 1);
    ck_assert_int_eq(match("env notin (prod,test)"), 0);
    ck_assert_int_eq(match("missing notin (a)"), 1);
}
END_TEST

START_TEST(test_conjunction)
{
    ck_assert_int_eq(match("env=prod,tier=web"), 1);
    ck_assert_int_eq(match("env=prod,tier=db"), 0);
    ck_assert_int_eq(match("env in (prod,dev),tier notin (db),!missing,robotlb/service-uid"), 1);
    ck_assert_int_eq(match("env in (prod,dev),missing"), 0);
}
END_TEST

START_TEST(test_structure)
{
    struct hz_selector *s = NULL;
    char err[160];
    ck_assert_int_eq(
        hz_selector_parse("a=1,b!=2,c,!d,e in (x,y),f notin (z)", &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(s->n_reqs, 6);
    ck_assert_int_eq(s->reqs[0].op, HZ_SEL_EQ);
    ck_assert_str_eq(s->reqs[0].key, "a");
    ck_assert_str_eq(s->reqs[0].values[0], "1");
    ck_assert_int_eq(s->reqs[1].op, HZ_SEL_NE);
    ck_assert_str_eq(s->reqs[1].values[0], "2");
    ck_assert_int_eq(s->reqs[2].op, HZ_SEL_EXISTS);
    ck_assert_int_eq(s->reqs[3].op, HZ_SEL_ABSENT);
    ck_assert_str_eq(s->reqs[3].key, "d");
    ck_assert_int_eq(s->reqs[4].op, HZ_SEL_IN);
    ck_assert_uint_eq(s->reqs[4].n_values, 2);
    ck_assert_str_eq(s->reqs[4].values[1], "y");
    ck_assert_int_eq(s->reqs[5].op, HZ_SEL_NOTIN);
    ck_assert_str_eq(s->reqs[5].values[0], "z");
    hz_selector_free(s);
}
END_TEST

START_TEST(test_empty_matches_all)
{
    ck_assert_int_eq(match(""), 1);
    ck_assert_int_eq(match("   "), 1);
    struct hz_selector *s = NULL;
    char err[16];
    ck_assert_int_eq(hz_selector_parse("", &s, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_selector_match(s, NULL), 1);
    hz_selector_free(s);
}
END_TEST

START_TEST(test_syntax_errors)
{
    ck_assert(parse_fails("env in (a,b"));
    ck_assert(parse_fails("env in a,b)"));
    ck_assert(parse_fails("env=prod,"));
    ck_assert(parse_fails(",env"));
    ck_assert(parse_fails("env===prod"));
    ck_assert(parse_fails("env=a=b"));
    ck_assert(parse_fails("env in ()"));
    ck_assert(parse_fails("env in (a,,b)"));
    ck_assert(parse_fails("!"));
    ck_assert(parse_fails("!env=prod"));
}
END_TEST

START_TEST(test_invalid_keys_values)
{
    ck_assert(parse_fails("-env=prod"));
    ck_assert(parse_fails("env-=prod"));
    ck_assert(parse_fails("env=pr od"));
    ck_assert(parse_fails("env=-prod"));
    ck_assert(parse_fails("a/b/c=1"));
    ck_assert(parse_fails("/x=1"));
    ck_assert(parse_fails("bad_prefix_/x=1"));
    ck_assert(parse_fails("env in (ok,b@d)"));
    char longname[80];
    memset(longname, 'a', 64);
    longname[64] = '\0';
    ck_assert(parse_fails(longname));
}
END_TEST

START_TEST(test_label_validation)
{
    ck_assert(hz_label_key_valid("robotlb/service-uid"));
    ck_assert(hz_label_key_valid("example.com/a.b_c-d"));
    ck_assert(hz_label_key_valid("k"));
    ck_assert(!hz_label_key_valid(""));
    ck_assert(!hz_label_key_valid("k/"));
    ck_assert(!hz_label_key_valid("Ex_ample.com/x"));
    ck_assert(!hz_label_key_valid("a b"));
    ck_assert(hz_label_value_valid(""));
    ck_assert(hz_label_value_valid("0f8a2c4e-1b3d-4f5a-9c7e-2d4b6a8c0e1f"));
    ck_assert(!hz_label_value_valid("a/b"));
    ck_assert(!hz_label_value_valid("x."));
    char err[160];
    json_t *ok = json_pack("{s:s, s:s}", "a", "", "robotlb/service-uid", "x1");
    json_t *bad_val = json_pack("{s:s}", "a", "no spaces");
    json_t *bad_type = json_pack("{s:i}", "a", 1);
    json_t *bad_key = json_pack("{s:s}", "a//b", "x");
    ck_assert(hz_labels_valid(ok, err, sizeof(err)));
    ck_assert(!hz_labels_valid(bad_val, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "value"));
    ck_assert(!hz_labels_valid(bad_type, err, sizeof(err)));
    ck_assert(!hz_labels_valid(bad_key, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "key"));
    json_decref(ok);
    json_decref(bad_val);
    json_decref(bad_type);
    json_decref(bad_key);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("hetzner-selector");
    TCase *tc = tcase_create("selector");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_equality);
    tcase_add_test(tc, test_inequality);
    tcase_add_test(tc, test_exists_absent);
    tcase_add_test(tc, test_sets);
    tcase_add_test(tc, test_conjunction);
    tcase_add_test(tc, test_structure);
    tcase_add_test(tc, test_empty_matches_all);
    tcase_add_test(tc, test_syntax_errors);
    tcase_add_test(tc, test_invalid_keys_values);
    tcase_add_test(tc, test_label_validation);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
