/*
 * Check suite for core/kube/backoff.c: the reconnect rules of the spec,
 * checked sentence by sentence with a fake clock (plain integers) and a
 * fixed "random" number.
 */
#include <check.h>
#include <stdlib.h>

#include "kube-internal.h"
#include "testutil.h"

/* A fake clock and a watch driver around the machine. */
struct sim {
    struct kb_machine m;
    int64_t now;
};

static void
sim_init(struct sim *s)
{
    kb_init(&s->m);
    s->now = 1000000;
}

/* A watch opens now, stays open for ms, then ends with input in. */
static struct kb_step
watch_for(struct sim *s, int64_t ms, enum kb_input in)
{
    kb_watch_started(&s->m, s->now);
    s->now += ms;
    return kb_next(&s->m, in, s->now, 0.0);
}

static void
is(struct kb_step st, enum kb_action a, int64_t delay)
{
    ck_assert_int_eq(st.action, a);
    ck_assert_int_eq(st.delay_ms, delay);
}

START_TEST(delay_starts_at_1s_and_doubles_up_to_30s)
{
    /* "the delay starts at 1s and doubles up to 30s" */
    struct sim s;
    sim_init(&s);
    is(kb_next(&s.m, KB_LIST_OK, s.now, 0), KB_DO_WATCH, 0);
    const int64_t want[] = {1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct kb_step st = watch_for(&s, 5, KB_WATCH_ERROR);
        is(st, KB_DO_WATCH, want[i]);
        s.now += st.delay_ms;
    }
    /* Failed lists back off on the same schedule. */
    sim_init(&s);
    is(kb_next(&s.m, KB_LIST_FAILED, s.now, 0), KB_DO_LIST, 1000);
    is(kb_next(&s.m, KB_LIST_FAILED, s.now, 0), KB_DO_LIST, 2000);
    is(kb_next(&s.m, KB_LIST_OK, s.now, 0), KB_DO_WATCH, 0);
}
END_TEST

START_TEST(each_delay_gets_up_to_25_percent_jitter_on_top)
{
    /* "each delay gets up to 25% random jitter on top" */
    struct sim s;
    sim_init(&s);
    kb_watch_started(&s.m, s.now);
    struct kb_step st = kb_next(&s.m, KB_WATCH_ERROR, s.now, 0.5);
    is(st, KB_DO_WATCH, 1125);
    ck_assert_int_eq(st.base_ms, 1000);
    st = kb_next(&s.m, KB_WATCH_ERROR, s.now, 0.999999);
    ck_assert_int_ge(st.delay_ms, 2000);
    ck_assert_int_le(st.delay_ms, 2500);
    ck_assert_int_eq(st.base_ms, 2000);
    /* Out-of-range randoms are clamped: never below the step, never over 25 %. */
    st = kb_next(&s.m, KB_WATCH_ERROR, s.now, -3.0);
    is(st, KB_DO_WATCH, 4000);
    st = kb_next(&s.m, KB_WATCH_ERROR, s.now, 7.0);
    ck_assert_int_le(st.delay_ms, 10000);
    ck_assert_int_ge(st.delay_ms, 9999);
    /* At the cap the jitter still goes on top: up to 37.5 s. */
    for (int i = 0; i < 5; i++)
        st = kb_next(&s.m, KB_WATCH_ERROR, s.now, 0.999999);
    ck_assert_int_eq(st.base_ms, 30000);
    ck_assert_int_ge(st.delay_ms, 37499);
    ck_assert_int_le(st.delay_ms, 37500);
}
END_TEST

START_TEST(long_clean_watch_reopens_at_once)
{
    /* "A watch that stayed open for at least 30s and then closed without an
     * error is re-opened immediately." */
    struct sim s;
    sim_init(&s);
    kb_next(&s.m, KB_LIST_OK, s.now, 0);
    watch_for(&s, 5, KB_WATCH_ERROR); /* backoff now at 2 s */
    watch_for(&s, 5, KB_WATCH_ERROR); /* 4 s */
    is(watch_for(&s, 30000, KB_WATCH_CLOSED), KB_DO_WATCH, 0);
    is(watch_for(&s, 600000, KB_WATCH_CLOSED), KB_DO_WATCH, 0);
    /* 29.999 s is not long enough: the backoff applies (not reset). */
    sim_init(&s);
    watch_for(&s, 5, KB_WATCH_ERROR);
    is(watch_for(&s, 29999, KB_WATCH_CLOSED), KB_DO_WATCH, 2000);
}
END_TEST

START_TEST(other_error_after_such_a_watch_restarts_backoff_from_1s)
{
    /* "Any other error after such a watch, except 410 Gone, starts the
     * backoff from 1s again." */
    struct sim s;
    sim_init(&s);
    for (int i = 0; i < 6; i++)
        watch_for(&s, 5, KB_WATCH_ERROR); /* at the 30 s cap */
    is(watch_for(&s, 5, KB_WATCH_ERROR), KB_DO_WATCH, 30000);
    /* An error ending a watch open >= 30 s. */
    is(watch_for(&s, 45000, KB_WATCH_ERROR), KB_DO_WATCH, 1000);
    is(watch_for(&s, 5, KB_WATCH_ERROR), KB_DO_WATCH, 2000);
    /* An error hitting the re-watch right after a long clean close. */
    for (int i = 0; i < 6; i++)
        watch_for(&s, 5, KB_WATCH_ERROR);
    is(watch_for(&s, 31000, KB_WATCH_CLOSED), KB_DO_WATCH, 0);
    is(watch_for(&s, 10, KB_WATCH_ERROR), KB_DO_WATCH, 1000);
    /* ... but only the re-watch right after: the one after that doubles. */
    is(watch_for(&s, 10, KB_WATCH_ERROR), KB_DO_WATCH, 2000);
    /* A 410 after such a watch does not reset the backoff: the watch after
     * the re-list starts at once, and the next error continues at 4 s. */
    is(watch_for(&s, 40000, KB_WATCH_GONE), KB_DO_LIST, 0);
    is(kb_next(&s.m, KB_LIST_OK, s.now, 0), KB_DO_WATCH, 0);
    is(watch_for(&s, 10, KB_WATCH_ERROR), KB_DO_WATCH, 4000);
}
END_TEST

START_TEST(gone_relists_at_once)
{
    /* "On 410 Gone (etcd compaction), performs a full re-list." */
    struct sim s;
    sim_init(&s);
    watch_for(&s, 5, KB_WATCH_ERROR);
    is(watch_for(&s, 5, KB_WATCH_GONE), KB_DO_LIST, 0);
    /* A failed re-list is retried after the backoff (which goes on). */
    is(kb_next(&s.m, KB_LIST_FAILED, s.now, 0), KB_DO_LIST, 2000);
    is(kb_next(&s.m, KB_LIST_FAILED, s.now, 0), KB_DO_LIST, 4000);
}
END_TEST

START_TEST(after_relist_watch_at_once_if_410_ended_a_long_watch)
{
    /* "After a successful re-list, the next watch starts at once if the 410
     * ended a watch that was open for at least 30s" */
    struct sim s;
    sim_init(&s);
    watch_for(&s, 5, KB_WATCH_ERROR);
    is(watch_for(&s, 30000, KB_WATCH_GONE), KB_DO_LIST, 0);
    is(kb_next(&s.m, KB_LIST_OK, s.now, 0), KB_DO_WATCH, 0);
    /* still so when the re-list needed retries */
    is(watch_for(&s, 35000, KB_WATCH_GONE), KB_DO_LIST, 0);
    is(kb_next(&s.m, KB_LIST_FAILED, s.now, 0), KB_DO_LIST, 2000);
    is(kb_next(&s.m, KB_LIST_OK, s.now, 0), KB_DO_WATCH, 0);
}
END_TEST

START_TEST(after_relist_watch_at_once_if_410_hit_rewatch_after_long_clean)
{
    /* "... or hit the re-watch right after such a watch closed without an
     * error." */
    struct sim s;
    sim_init(&s);
    watch_for(&s, 5, KB_WATCH_ERROR);
    is(watch_for(&s, 30000, KB_WATCH_CLOSED), KB_DO_WATCH, 0);
    is(watch_for(&s, 1, KB_WATCH_GONE), KB_DO_LIST, 0);
    is(kb_next(&s.m, KB_LIST_OK, s.now, 0), KB_DO_WATCH, 0);
}
END_TEST

START_TEST(after_relist_otherwise_waits_for_backoff)
{
    /* "Otherwise it waits for the backoff." */
    struct sim s;
    sim_init(&s);
    kb_next(&s.m, KB_LIST_OK, s.now, 0);
    is(watch_for(&s, 100, KB_WATCH_GONE), KB_DO_LIST, 0);
    is(kb_next(&s.m, KB_LIST_OK, s.now, 0), KB_DO_WATCH, 1000);
    watch_for(&s, 5, KB_WATCH_ERROR); /* 2 s */
    is(watch_for(&s, 5, KB_WATCH_GONE), KB_DO_LIST, 0);
    is(kb_next(&s.m, KB_LIST_OK, s.now, 0.5), KB_DO_WATCH, 4500); /* 4 s + 25 % × 0.5 */
    /* The 410 on the second re-watch after a long clean close does not
     * qualify: it is not "right after" any more. */
    sim_init(&s);
    watch_for(&s, 30000, KB_WATCH_CLOSED);
    watch_for(&s, 5, KB_WATCH_CLOSED); /* short clean close: backoff (reset, 1 s) */
    is(watch_for(&s, 5, KB_WATCH_GONE), KB_DO_LIST, 0);
    is(kb_next(&s.m, KB_LIST_OK, s.now, 0), KB_DO_WATCH, 2000);
}
END_TEST

static Suite *
backoff_suite(void)
{
    Suite *s = suite_create("kube_backoff");
    TCase *tc = tcase_create("spec");
    tcase_add_test(tc, delay_starts_at_1s_and_doubles_up_to_30s);
    tcase_add_test(tc, each_delay_gets_up_to_25_percent_jitter_on_top);
    tcase_add_test(tc, long_clean_watch_reopens_at_once);
    tcase_add_test(tc, other_error_after_such_a_watch_restarts_backoff_from_1s);
    tcase_add_test(tc, gone_relists_at_once);
    tcase_add_test(tc, after_relist_watch_at_once_if_410_ended_a_long_watch);
    tcase_add_test(tc, after_relist_watch_at_once_if_410_hit_rewatch_after_long_clean);
    tcase_add_test(tc, after_relist_otherwise_waits_for_backoff);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(backoff_suite());
}
