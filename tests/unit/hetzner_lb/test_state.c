/*
 * The per-Service state of mod_hetzner_lb (modules/mod_hetzner_lb/
 * hz_state.c) with a recording sink in place of the Kubernetes Events:
 * one table by namespace/name, one de-duplication of warnings (a reason's
 * text once until it clears or changes; a refusal every time), the
 * earliest recheck ahead.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "hz_state.h"

static struct hz_states tab;
static int sent;
static char last[256];

static void
sink(void *arg, const char *key, const plb_obj *svc, const char *reason, const char *msg)
{
    ck_assert_ptr_eq(arg, &tab);
    ck_assert_ptr_null(svc);
    sent++;
    snprintf(last, sizeof(last), "%s %s: %s", key, reason, msg);
}

static void
setup(void)
{
    memset(&tab, 0, sizeof(tab));
    tab.warn = sink;
    tab.warn_arg = &tab;
    sent = 0;
    last[0] = '\0';
}

static void
teardown(void)
{
    hz_states_clear(&tab);
    ck_assert_ptr_null(tab.head);
}

START_TEST(a_service_has_one_state_by_namespace_and_name)
{
    ck_assert_ptr_null(hz_state_get(&tab, "ns/a", 0));
    struct hz_svc_state *a = hz_state_get(&tab, "ns/a", 1);
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(a->key, "ns/a");
    ck_assert_ptr_eq(a->tab, &tab);
    ck_assert_ptr_eq(hz_state_get(&tab, "ns/a", 1), a);
    ck_assert_ptr_eq(hz_state_get(&tab, "ns/a", 0), a);
    struct hz_svc_state *b = hz_state_get(&tab, "other/a", 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_ne(a, b);
    hz_state_drop(&tab, "ns/a");
    ck_assert_ptr_null(hz_state_get(&tab, "ns/a", 0));
    ck_assert_ptr_eq(hz_state_get(&tab, "other/a", 0), b);
    hz_state_drop(&tab, "ns/absent"); /* absent is fine */
}
END_TEST

START_TEST(a_warning_is_sent_once_while_its_text_holds)
{
    struct hz_svc_state *st = hz_state_get(&tab, "ns/web", 1);
    ck_assert_int_eq(hz_warn_once(st, NULL, "InvalidAnnotation", "robotlb/lb-retries: \"x\""), 1);
    ck_assert_str_eq(last, "ns/web InvalidAnnotation: robotlb/lb-retries: \"x\"");
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(hz_warn_once(st, NULL, "InvalidAnnotation", "robotlb/lb-retries: \"x\""),
                         0);
    ck_assert_int_eq(sent, 1);
    /* another reason is its own warning */
    ck_assert_int_eq(hz_warn_once(st, NULL, "TooManyTargets", "5 nodes"), 1);
    ck_assert_int_eq(sent, 2);
    /* another text of the same reason replaces it: sent */
    ck_assert_int_eq(hz_warn_once(st, NULL, "InvalidAnnotation", "robotlb/lb-retries: \"y\""), 1);
    ck_assert_int_eq(sent, 3);
    /* cleared: the same text again is a new Event */
    hz_warn_clear(st, "InvalidAnnotation");
    ck_assert_ptr_null(json_object_get(st->warned, "InvalidAnnotation"));
    ck_assert_int_eq(hz_warn_once(st, NULL, "InvalidAnnotation", "robotlb/lb-retries: \"y\""), 1);
    ck_assert_int_eq(sent, 4);
    /* the warnings in force, as prismlb status reads them */
    ck_assert_str_eq(json_string_value(json_object_get(st->warned, "TooManyTargets")), "5 nodes");
    /* a state's warnings are its own */
    struct hz_svc_state *other = hz_state_get(&tab, "ns/api", 1);
    ck_assert_int_eq(hz_warn_once(other, NULL, "TooManyTargets", "5 nodes"), 1);
    ck_assert_int_eq(sent, 5);
}
END_TEST

START_TEST(a_refusal_is_sent_every_time_and_stays_in_force)
{
    struct hz_svc_state *st = hz_state_get(&tab, "ns/web", 1);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(hz_warn_each(st, NULL, "TargetRefused", "10.0.0.5"), 0);
    ck_assert_int_eq(sent, 3); /* the core's Event aggregation counts them */
    ck_assert_str_eq(json_string_value(json_object_get(st->warned, "TargetRefused")), "10.0.0.5");
    /* a once-warning of the same text is in force already */
    ck_assert_int_eq(hz_warn_once(st, NULL, "TargetRefused", "10.0.0.5"), 0);
    ck_assert_int_eq(sent, 3);
}
END_TEST

START_TEST(without_a_sink_nothing_is_sent_but_the_warning_is_in_force)
{
    tab.warn = NULL;
    struct hz_svc_state *st = hz_state_get(&tab, "ns/web", 1);
    ck_assert_int_eq(hz_warn_once(st, NULL, "NoTargetNodes", "none"), 1);
    ck_assert_int_eq(sent, 0);
    ck_assert_int_eq(hz_warn_once(st, NULL, "NoTargetNodes", "none"), 0);
}
END_TEST

START_TEST(the_next_recheck_is_the_earliest_failed_service_ahead)
{
    struct hz_svc_state *a = hz_state_get(&tab, "ns/a", 1);
    struct hz_svc_state *b = hz_state_get(&tab, "ns/b", 1);
    struct hz_svc_state *c = hz_state_get(&tab, "ns/c", 1);
    ck_assert_int_eq(hz_states_next_retry(&tab, 1000), 0); /* none failed */
    a->fail_fp = 1, a->retry_at = 5000;
    b->fail_fp = 2, b->retry_at = 3000;
    c->fail_fp = 0, c->retry_at = 2000; /* not failed: no recheck */
    ck_assert_int_eq(hz_states_next_retry(&tab, 1000), 3000);
    ck_assert_int_eq(hz_states_next_retry(&tab, 3000), 5000); /* b is due, not ahead */
    ck_assert_int_eq(hz_states_next_retry(&tab, 5000), 0);
}
END_TEST

START_TEST(forgetting_the_statuses_written_forgets_each)
{
    struct hz_svc_state *a = hz_state_get(&tab, "ns/a", 1);
    struct hz_svc_state *b = hz_state_get(&tab, "ns/b", 1);
    ck_assert_ptr_nonnull(a->status_sent = json_array());
    ck_assert_ptr_nonnull(b->status_sent = json_array());
    hz_states_forget_status(&tab);
    ck_assert_ptr_null(a->status_sent);
    ck_assert_ptr_null(b->status_sent);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb state");
    TCase *tc = tcase_create("state");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_service_has_one_state_by_namespace_and_name);
    tcase_add_test(tc, a_warning_is_sent_once_while_its_text_holds);
    tcase_add_test(tc, a_refusal_is_sent_every_time_and_stays_in_force);
    tcase_add_test(tc, without_a_sink_nothing_is_sent_but_the_warning_is_in_force);
    tcase_add_test(tc, the_next_recheck_is_the_earliest_failed_service_ahead);
    tcase_add_test(tc, forgetting_the_statuses_written_forgets_each);
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
