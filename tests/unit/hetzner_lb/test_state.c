/*
 * The per-Service state of mod_hetzner_lb (modules/mod_hetzner_lb/
 * hz_state.c) with a recording sink in place of the Kubernetes Events:
 * one table by namespace/name (found through its index, walked newest
 * first, a drop during a walk), one de-duplication of warnings (a reason's
 * text once until it clears or changes; a refusal every time), the
 * earliest recheck ahead.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "hz_state.h"
#include "testutil.h"

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
    ck_assert_ptr_null(tab.idx.slot);
    ck_assert_uint_eq(tab.idx.n, 0);
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

/* The keys of the walk from head, newest first, joined by spaces. */
static void
walk(char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (const struct hz_svc_state *s = tab.head; s; s = s->next) {
        if (s->next)
            ck_assert_ptr_eq(s->next->prev, s);
        at += (size_t)snprintf(out + at, len - at, "%s%s", at ? " " : "", s->key);
        ck_assert_uint_lt(at, len);
    }
}

START_TEST(states_are_walked_newest_first_and_a_drop_keeps_the_order)
{
    char w[256];
    for (const char *const *k = (const char *const[]){"ns/a", "ns/b", "ns/c", "ns/d", NULL}; *k;
         k++)
        ck_assert_ptr_nonnull(hz_state_get(&tab, *k, 1));
    walk(w, sizeof(w));
    ck_assert_str_eq(w, "ns/d ns/c ns/b ns/a");
    ck_assert_ptr_null(tab.head->prev);
    hz_state_drop(&tab, "ns/c"); /* the middle */
    walk(w, sizeof(w));
    ck_assert_str_eq(w, "ns/d ns/b ns/a");
    hz_state_drop(&tab, "ns/d"); /* the head */
    ck_assert_ptr_null(tab.head->prev);
    walk(w, sizeof(w));
    ck_assert_str_eq(w, "ns/b ns/a");
    hz_state_drop(&tab, "ns/a"); /* the last */
    walk(w, sizeof(w));
    ck_assert_str_eq(w, "ns/b");
    ck_assert_ptr_null(tab.head->next);
    /* a Service seen again is a new state, at the head */
    ck_assert_ptr_nonnull(hz_state_get(&tab, "ns/c", 1));
    walk(w, sizeof(w));
    ck_assert_str_eq(w, "ns/c ns/b");
    ck_assert_uint_eq(tab.idx.n, 2);
}
END_TEST

START_TEST(ten_thousand_services_are_found_dropped_and_found_again)
{
    enum { N = 10000 };
    static struct hz_svc_state *by[N];
    char key[64];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "ns-%d/svc-%d", i % 97, i);
        ck_assert_ptr_nonnull(by[i] = hz_state_get(&tab, key, 1));
        by[i]->retry_at = i; /* a mark: the address is the state's */
    }
    ck_assert_uint_eq(tab.idx.n, N);
    /* at most half full: 10,000 states in 32,768 slots of 16 bytes */
    ck_assert_uint_eq(tab.idx.cap, 32768);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "ns-%d/svc-%d", i % 97, i);
        ck_assert_ptr_eq(hz_state_get(&tab, key, 0), by[i]);
        ck_assert_ptr_eq(hz_state_get(&tab, key, 1), by[i]); /* not created twice */
        ck_assert_int_eq(by[i]->retry_at, i);
    }
    ck_assert_uint_eq(tab.idx.n, N);
    ck_assert_ptr_null(hz_state_get(&tab, "ns-0/svc-10000", 0));
    ck_assert_ptr_null(hz_state_get(&tab, "ns-1/svc-0", 0)); /* svc-0 is in ns-0 */
    /* drop the odd ones: the even ones stay where they were */
    for (int i = 1; i < N; i += 2) {
        snprintf(key, sizeof(key), "ns-%d/svc-%d", i % 97, i);
        hz_state_drop(&tab, key);
        ck_assert_ptr_null(hz_state_get(&tab, key, 0));
    }
    ck_assert_uint_eq(tab.idx.n, N / 2);
    size_t walked = 0;
    for (const struct hz_svc_state *s = tab.head; s; s = s->next, walked++)
        ck_assert_int_eq(s->retry_at % 2, 0);
    ck_assert_uint_eq(walked, N / 2);
    for (int i = 0; i < N; i += 2) {
        snprintf(key, sizeof(key), "ns-%d/svc-%d", i % 97, i);
        ck_assert_ptr_eq(hz_state_get(&tab, key, 0), by[i]);
    }
    /* drop all but one: the index shrinks back, the last is still found */
    for (int i = 2; i < N; i += 2) {
        snprintf(key, sizeof(key), "ns-%d/svc-%d", i % 97, i);
        hz_state_drop(&tab, key);
    }
    ck_assert_uint_eq(tab.idx.n, 1);
    ck_assert_uint_le(tab.idx.cap, 32);
    ck_assert_ptr_eq(hz_state_get(&tab, "ns-0/svc-0", 0), by[0]);
    ck_assert_ptr_eq(tab.head, by[0]);
    ck_assert_ptr_null(by[0]->next);
}
END_TEST

START_TEST(a_walk_may_drop_the_state_it_is_on)
{
    char key[32], w[256];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "ns/s%02d", i);
        ck_assert_ptr_nonnull(hz_state_get(&tab, key, 1));
    }
    /* drop every state whose number is not a multiple of 10, next read
     * before the drop (as a sync of each Service would) */
    for (struct hz_svc_state *s = tab.head, *n; s; s = n) {
        n = s->next;
        if (atoi(s->key + 4) % 10 != 0)
            hz_state_drop(&tab, s->key);
    }
    walk(w, sizeof(w));
    ck_assert_str_eq(w, "ns/s30 ns/s20 ns/s10 ns/s00");
    ck_assert_uint_eq(tab.idx.n, 4);
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "ns/s%02d", i);
        ck_assert(!hz_state_get(&tab, key, 0) == (i % 10 != 0));
    }
    /* a state created during a walk is at the head, behind the walk */
    int seen = 0;
    for (struct hz_svc_state *s = tab.head; s; s = s->next, seen++)
        if (seen == 0)
            ck_assert_ptr_nonnull(hz_state_get(&tab, "ns/new", 1));
    ck_assert_int_eq(seen, 4);
    ck_assert_str_eq(tab.head->key, "ns/new");
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

/* A resync during a status write leaves that write's ingress alone: were
 * it forgotten, a 422 to it would have nothing to keep as refused, and the
 * same ingress would be sent again onto the same Service. */
START_TEST(a_status_write_in_flight_keeps_what_it_sends)
{
    struct hz_svc_state *a = hz_state_get(&tab, "ns/a", 1);
    struct hz_svc_state *b = hz_state_get(&tab, "ns/b", 1);
    json_t *ingress = json_array();
    ck_assert_ptr_nonnull(ingress);
    a->status_sent = ingress;
    a->status = HZ_STATUS_WRITING;
    ck_assert_ptr_nonnull(b->status_sent = json_array());
    b->status = HZ_STATUS_AGAIN;
    hz_states_forget_status(&tab);
    ck_assert_ptr_eq(a->status_sent, ingress);
    ck_assert_ptr_nonnull(b->status_sent);
    a->status = b->status = HZ_STATUS_IDLE;
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
    tcase_add_test(tc, states_are_walked_newest_first_and_a_drop_keeps_the_order);
    tcase_add_test(tc, ten_thousand_services_are_found_dropped_and_found_again);
    tcase_add_test(tc, a_walk_may_drop_the_state_it_is_on);
    tcase_add_test(tc, a_warning_is_sent_once_while_its_text_holds);
    tcase_add_test(tc, a_refusal_is_sent_every_time_and_stays_in_force);
    tcase_add_test(tc, without_a_sink_nothing_is_sent_but_the_warning_is_in_force);
    tcase_add_test(tc, the_next_recheck_is_the_earliest_failed_service_ahead);
    tcase_add_test(tc, forgetting_the_statuses_written_forgets_each);
    tcase_add_test(tc, a_status_write_in_flight_keeps_what_it_sends);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
