/*
 * The per-Service work queue (modules/mod_hetzner_lb/hz_queue.c) on a fake
 * clock (the time is an argument): de-duplication, one reconcile in flight
 * per key, delays, exponential backoff, shutdown that lets the in-flight
 * key finish.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "hz_queue.h"
#include "testutil.h"

static struct hz_queue *
new_queue(int64_t base, int64_t max)
{
    struct hz_queue_cfg cfg = {.base_delay_ms = base, .max_delay_ms = max};
    struct hz_queue *q = hz_queue_new(&cfg);
    ck_assert_ptr_nonnull(q);
    return q;
}

/* Take the next key and check it is want (NULL: nothing). */
static void
expect_get(struct hz_queue *q, const char *want)
{
    const char *k = hz_queue_get(q);
    if (!want)
        ck_assert_msg(k == NULL, "got %s, wanted nothing", k);
    else
        ck_assert_msg(k && !strcmp(k, want), "got %s, wanted %s", k ? k : "nothing", want);
}

START_TEST(adds_of_a_queued_key_are_one)
{
    struct hz_queue *q = new_queue(5, 1000);
    ck_assert_int_eq(hz_queue_add(q, "default/a"), 0);
    ck_assert_int_eq(hz_queue_add(q, "default/b"), 0);
    ck_assert_int_eq(hz_queue_add(q, "default/a"), 0);
    ck_assert_int_eq(hz_queue_add(q, "default/a"), 0);
    ck_assert_uint_eq(hz_queue_len(q), 2);
    expect_get(q, "default/a"); /* first come, first served */
    expect_get(q, "default/b");
    expect_get(q, NULL);
    hz_queue_done(q, "default/a");
    hz_queue_done(q, "default/b");
    ck_assert_uint_eq(hz_queue_len(q), 0);
    ck_assert_uint_eq(hz_queue_in_flight(q), 0);
    /* 10,000 keys added twice each: 10,000 in the queue, in order */
    char k[32];
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 10000; i++) {
            snprintf(k, sizeof(k), "ns/s%05d", i);
            ck_assert_int_eq(hz_queue_add(q, k), 0);
        }
    ck_assert_uint_eq(hz_queue_len(q), 10000);
    for (int i = 0; i < 10000; i++) {
        snprintf(k, sizeof(k), "ns/s%05d", i);
        expect_get(q, k);
        hz_queue_done(q, k);
    }
    expect_get(q, NULL);
    hz_queue_free(q);
}
END_TEST

START_TEST(a_key_in_flight_is_not_handed_out_again)
{
    struct hz_queue *q = new_queue(5, 1000);
    ck_assert_int_eq(hz_queue_add(q, "ns/a"), 0);
    ck_assert_int_eq(hz_queue_add(q, "ns/b"), 0);
    expect_get(q, "ns/a");
    /* changed while reconciling: queued again only once it is done */
    ck_assert_int_eq(hz_queue_add(q, "ns/a"), 0);
    ck_assert_int_eq(hz_queue_add(q, "ns/a"), 0);
    ck_assert_uint_eq(hz_queue_len(q), 1);
    expect_get(q, "ns/b");
    expect_get(q, NULL);
    ck_assert_uint_eq(hz_queue_in_flight(q), 2);
    hz_queue_done(q, "ns/a");
    ck_assert_uint_eq(hz_queue_len(q), 1);
    expect_get(q, "ns/a");
    hz_queue_done(q, "ns/a");
    hz_queue_done(q, "ns/b");
    expect_get(q, NULL); /* not added meanwhile: gone */
    ck_assert_uint_eq(hz_queue_in_flight(q), 0);
    /* done for a key not in flight changes nothing */
    hz_queue_done(q, "ns/nothing");
    ck_assert_uint_eq(hz_queue_len(q), 0);
    /* a delay that ends while the key is in flight waits for done too */
    ck_assert_int_eq(hz_queue_add(q, "ns/c"), 0);
    expect_get(q, "ns/c");
    ck_assert_int_eq(hz_queue_add_after(q, "ns/c", 50, 0), 0);
    ck_assert_int_eq(hz_queue_tick(q, 50), -1);
    ck_assert_uint_eq(hz_queue_len(q), 0);
    hz_queue_done(q, "ns/c");
    expect_get(q, "ns/c");
    hz_queue_done(q, "ns/c");
    hz_queue_free(q);
}
END_TEST

START_TEST(delays_keep_the_earliest)
{
    struct hz_queue *q = new_queue(5, 1000);
    ck_assert_int_eq(hz_queue_add_after(q, "ns/a", 500, 0), 0);
    ck_assert_int_eq(hz_queue_add_after(q, "ns/a", 100, 0), 0); /* earlier wins */
    ck_assert_int_eq(hz_queue_add_after(q, "ns/b", 100, 0), 0);
    ck_assert_int_eq(hz_queue_add_after(q, "ns/b", 500, 0), 0); /* later loses */
    ck_assert_uint_eq(hz_queue_delayed(q), 2);
    ck_assert_int_eq(hz_queue_tick(q, 99), 1);
    ck_assert_uint_eq(hz_queue_len(q), 0);
    ck_assert_int_eq(hz_queue_tick(q, 100), -1);
    ck_assert_uint_eq(hz_queue_len(q), 2);
    ck_assert_uint_eq(hz_queue_delayed(q), 0);
    expect_get(q, "ns/a");
    expect_get(q, "ns/b");
    hz_queue_done(q, "ns/a");
    hz_queue_done(q, "ns/b");
    /* no delay is an add */
    ck_assert_int_eq(hz_queue_add_after(q, "ns/c", 0, 0), 0);
    ck_assert_uint_eq(hz_queue_len(q), 1);
    expect_get(q, "ns/c");
    hz_queue_done(q, "ns/c");
    /* 1,000 keys with scattered delays come out in the order of their ends */
    char k[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof(k), "ns/d%04d", i);
        ck_assert_int_eq(hz_queue_add_after(q, k, 1 + (i * 7919) % 1000, 1000), 0);
    }
    int64_t now = 1000;
    int seen = 0, last = -1;
    while (seen < 1000) {
        int64_t next = hz_queue_tick(q, now);
        const char *got;
        while ((got = hz_queue_get(q))) {
            int i = atoi(got + 4);
            int end = 1 + (i * 7919) % 1000;
            ck_assert_int_eq(end, now - 1000);
            ck_assert_int_ge(end, last);
            last = end;
            hz_queue_done(q, got);
            seen++;
        }
        if (next < 0)
            break;
        now += next;
    }
    ck_assert_int_eq(seen, 1000);
    hz_queue_free(q);
}
END_TEST

START_TEST(failures_back_off_exponentially_up_to_the_cap)
{
    struct hz_queue *q = new_queue(100, 1000);
    static const int64_t want[] = {100, 200, 400, 800, 1000, 1000};
    int64_t now = 0, d = 0;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ck_assert_int_eq(hz_queue_add_rate_limited(q, "ns/a", now, &d), 0);
        ck_assert_int_eq(d, want[i]);
        ck_assert_int_eq(hz_queue_failures(q, "ns/a"), (int)i + 1);
        ck_assert_int_eq(hz_queue_tick(q, now + d - 1), 1);
        expect_get(q, NULL); /* not before its backoff */
        ck_assert_int_eq(hz_queue_tick(q, now + d), -1);
        expect_get(q, "ns/a");
        hz_queue_done(q, "ns/a");
        now += d;
    }
    /* a success forgets: the base again */
    hz_queue_forget(q, "ns/a");
    ck_assert_int_eq(hz_queue_failures(q, "ns/a"), 0);
    ck_assert_int_eq(hz_queue_add_rate_limited(q, "ns/a", now, &d), 0);
    ck_assert_int_eq(d, 100);
    /* keys back off independently */
    ck_assert_int_eq(hz_queue_add_rate_limited(q, "ns/b", now, &d), 0);
    ck_assert_int_eq(d, 100);
    ck_assert_int_eq(hz_queue_add_rate_limited(q, "ns/b", now, &d), 0);
    ck_assert_int_eq(d, 200);
    /* the second backoff of b is later than its first: the first holds */
    ck_assert_int_eq(hz_queue_tick(q, now + 100), -1);
    ck_assert_uint_eq(hz_queue_len(q), 2);
    hz_queue_free(q);
}
END_TEST

START_TEST(shutdown_lets_the_key_in_flight_finish)
{
    struct hz_queue *q = new_queue(5, 1000);
    ck_assert_int_eq(hz_queue_add(q, "ns/a"), 0);
    ck_assert_int_eq(hz_queue_add(q, "ns/b"), 0);
    ck_assert_int_eq(hz_queue_add_after(q, "ns/c", 10, 0), 0);
    expect_get(q, "ns/a");
    ck_assert_int_eq(hz_queue_add(q, "ns/a"), 0); /* dirty */
    hz_queue_shut_down(q);
    ck_assert_int_eq(hz_queue_add(q, "ns/d"), -ESHUTDOWN);
    ck_assert_int_eq(hz_queue_add_after(q, "ns/d", 5, 0), -ESHUTDOWN);
    ck_assert_int_eq(hz_queue_add_rate_limited(q, "ns/d", 0, NULL), -ESHUTDOWN);
    expect_get(q, NULL); /* b stays unstarted */
    ck_assert_int_eq(hz_queue_drained(q), 0);
    ck_assert_int_eq(hz_queue_tick(q, 10), -1);
    expect_get(q, NULL);
    hz_queue_done(q, "ns/a"); /* not queued again */
    ck_assert_int_eq(hz_queue_drained(q), 1);
    expect_get(q, NULL);
    hz_queue_free(q); /* frees b and the rest */
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb queue");
    TCase *tc = tcase_create("queue");
    tcase_add_test(tc, adds_of_a_queued_key_are_one);
    tcase_add_test(tc, a_key_in_flight_is_not_handed_out_again);
    tcase_add_test(tc, delays_keep_the_earliest);
    tcase_add_test(tc, failures_back_off_exponentially_up_to_the_cap);
    tcase_add_test(tc, shutdown_lets_the_key_in_flight_finish);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
