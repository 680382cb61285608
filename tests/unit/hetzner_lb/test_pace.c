/*
 * Pacing (modules/mod_hetzner_lb/hz_pace.c) against a simulated Hetzner
 * token bucket that answers exactly as the real API (and the fake) does:
 * RateLimit-Remaining is the whole tokens left, RateLimit-Reset the UNIX
 * second at which the bucket is full, rounded up.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "common.h"
#include "hz_api.h"
#include "testutil.h"

struct bucket {
    double size, refill_per_s, level;
    int64_t last_ms;
};

static void
refill(struct bucket *b, int64_t now)
{
    b->level += (double)(now - b->last_ms) / 1000.0 * b->refill_per_s;
    if (b->level > b->size)
        b->level = b->size;
    b->last_ms = now;
}

/* One request at now: 1 if it passed, 0 for 429; fills the headers. The
 * wall clock is WALL0 + now. */
#define WALL0 1790000000000LL
static int
take(struct bucket *b, int64_t now, long *limit, long *remaining, long long *reset)
{
    refill(b, now);
    int ok = b->level >= 1.0;
    if (ok)
        b->level -= 1.0;
    *limit = (long)b->size;
    *remaining = (long)floor(b->level);
    *reset = (WALL0 + now) / 1000 + (long long)ceil((b->size - b->level) / b->refill_per_s);
    return ok;
}

/* Send n requests as fast as the pacer allows, each answered after
 * latency_ms, at most in_flight_max at a time; returns the 429s and the
 * time it took. */
static int
run(struct bucket *b, struct hz_pace *p, int n, int latency_ms, int in_flight_max, int64_t *elapsed)
{
    int64_t now = 0, due[64];
    uint64_t seq[64], next_seq = 0;
    long lim[64], rem[64];
    long long rst[64];
    int ok[64];
    int sent = 0, done = 0, inflight = 0, r429 = 0;
    ck_assert_int_le(in_flight_max, 64);
    while (done < n) {
        /* deliver answers due now */
        for (int i = 0; i < inflight; i++) {
            if (due[i] > now)
                continue;
            if (!ok[i]) {
                r429++;
                hz_pace_on_429(p, now, WALL0 + now, rst[i]);
            }
            hz_pace_update(p, seq[i], now, WALL0 + now, lim[i], rem[i], rst[i]);
            done += ok[i];
            if (!ok[i])
                sent--; /* retried */
            due[i] = due[inflight - 1];
            seq[i] = seq[inflight - 1];
            lim[i] = lim[inflight - 1];
            rem[i] = rem[inflight - 1];
            rst[i] = rst[inflight - 1];
            ok[i] = ok[inflight - 1];
            inflight--;
            i--;
        }
        while (sent < n && inflight < in_flight_max) {
            int64_t d = hz_pace_delay(p, now, inflight);
            if (d != 0)
                break;
            int k = inflight++;
            seq[k] = ++next_seq;
            ok[k] = take(b, now, &lim[k], &rem[k], &rst[k]);
            due[k] = now + latency_ms;
            sent++;
        }
        now += 1;
        ck_assert_msg(now < 3600000, "did not finish within an hour of simulated time");
    }
    *elapsed = now;
    return r429;
}

/* The budget case: a bucket of 10 refilling 1/s, a burst of 60
 * requests: never a 429, and the budget is used (≈ 1 request/s after the
 * burst, not slower than 1 per 1.3 s). */
START_TEST(a_bucket_of_10_refilling_1_per_second_never_answers_429)
{
    for (int inflight = 1; inflight <= 8; inflight *= 2) {
        struct bucket b = {.size = 10, .refill_per_s = 1, .level = 10};
        struct hz_pace p;
        int64_t t;
        hz_pace_init(&p);
        int r = run(&b, &p, 60, 20, inflight, &t);
        ck_assert_msg(r == 0, "%d 429s with %d in flight", r, inflight);
        ck_assert_msg(t >= 45000, "too fast to be true: %lld ms", (long long)t);
        ck_assert_msg(t <= 70000, "budget wasted: %lld ms for 60 requests", (long long)t);
    }
}
END_TEST

/* Hetzner's real budget: 3600 per hour. A burst of 500 goes out at once
 * (the bucket is full), with no pacing delay at all. */
START_TEST(a_full_bucket_is_spent_at_once_down_to_the_reserve)
{
    struct bucket b = {.size = 3600, .refill_per_s = 1, .level = 3600};
    struct hz_pace p;
    int64_t t;
    hz_pace_init(&p);
    ck_assert_int_eq(run(&b, &p, 500, 10, 8, &t), 0);
    ck_assert_msg(t < 2000, "%lld ms for 500 requests from a full bucket", (long long)t);
    /* then it stops at the reserve, not at zero */
    ck_assert_int_eq(run(&b, &p, 3300, 10, 8, &t), 0);
    ck_assert_msg(b.level >= 1.0, "the bucket was emptied: %.1f", b.level);
}
END_TEST

/* "on 429 wait until the reset": after someone else emptied the bucket,
 * nothing goes out before RateLimit-Reset. */
START_TEST(after_a_429_nothing_goes_out_until_the_reset)
{
    struct hz_pace p;
    hz_pace_init(&p);
    hz_pace_update(&p, 1, 0, WALL0, 10, 9, WALL0 / 1000 + 1);
    ck_assert_int_eq(hz_pace_delay(&p, 0, 0), 0);
    /* a 429 with the bucket full again in 10 s */
    hz_pace_on_429(&p, 100, WALL0 + 100, (WALL0 + 100) / 1000 + 10);
    int64_t d = hz_pace_delay(&p, 100, 0);
    ck_assert_msg(d >= 9000 && d <= 10000, "waits %lld ms", (long long)d);
    ck_assert_int_gt(hz_pace_delay(&p, 9000, 0), 0);
    ck_assert_int_eq(hz_pace_delay(&p, 100 + d, 0), 0);
    /* a Reset in the past still pauses a second */
    hz_pace_on_429(&p, 20000, WALL0 + 20000, 0);
    ck_assert_int_eq(hz_pace_delay(&p, 20000, 0), 1000);
}
END_TEST

/* Before any answer the budget is unknown: one request at a time. */
START_TEST(before_the_first_answer_one_request_at_a_time)
{
    struct hz_pace p;
    hz_pace_init(&p);
    ck_assert_int_eq(hz_pace_delay(&p, 0, 0), 0);
    ck_assert_int_eq(hz_pace_delay(&p, 0, 1), -1);
}
END_TEST

/* An answer older than the one the estimate rests on changes nothing. */
START_TEST(an_older_answer_does_not_raise_the_estimate)
{
    struct hz_pace p;
    hz_pace_init(&p);
    hz_pace_update(&p, 5, 0, WALL0, 10, 2, WALL0 / 1000 + 9);
    hz_pace_update(&p, 4, 0, WALL0, 10, 8, WALL0 / 1000 + 2);
    ck_assert_int_eq(p.remaining, 2);
    ck_assert(hz_pace_tokens(&p, 0, 0) < 2.5);
}
END_TEST

/* A Remaining above the Limit (a hostile or broken answer) is taken as a
 * full bucket, however large: no overflow, no more tokens than the limit. */
START_TEST(a_remaining_above_the_limit_is_a_full_bucket)
{
    struct hz_pace p;
    hz_pace_init(&p);
    hz_pace_update(&p, 1, 0, WALL0, 3300, LONG_MAX, WALL0 / 1000 + 60);
    ck_assert_int_eq(p.remaining, 3300);
    ck_assert(hz_pace_tokens(&p, 0, 0) <= 3300.0);
    hz_pace_update(&p, 2, 0, WALL0, LONG_MAX, LONG_MAX, WALL0 / 1000 + 60);
    ck_assert_int_eq(p.remaining, LONG_MAX);
    ck_assert_int_eq(hz_pace_delay(&p, 0, 0), 0);
}
END_TEST

/* The budget: 2,000 balancers are 40 pages; under RateLimit-Limit 3600 a
 * 10 % share is 360 list requests an hour, so resyncs come at most every
 * 400 s (9 an hour), not every 300 s (12 an hour, 480 requests). */
START_TEST(two_thousand_balancers_under_3600_stretch_the_resync_to_400_s)
{
    struct hz_budget b = hz_resync_budget(300000, 2000, 3600, 10);
    ck_assert_int_eq(b.pages, 40);
    ck_assert_int_eq(b.interval_ms, 400000);
    ck_assert(b.stretched);
    ck_assert_int_le(b.pages * 3600000 / b.interval_ms, 360);
    /* One more balancer is one more page: 41 × 10 s. */
    b = hz_resync_budget(300000, 2001, 3600, 10);
    ck_assert_int_eq(b.pages, 41);
    ck_assert_int_eq(b.interval_ms, 410000);
    /* The share is a setting: 20 % halves it, below resync_interval. */
    b = hz_resync_budget(300000, 2000, 3600, 20);
    ck_assert_int_eq(b.interval_ms, 300000);
    ck_assert(!b.stretched);
}
END_TEST

/* Within the budget the configured interval stays, whatever the limit. */
START_TEST(a_resync_within_the_budget_keeps_resync_interval)
{
    /* 1,500 balancers: 30 pages × 12 an hour = 360, just the share. */
    struct hz_budget b = hz_resync_budget(300000, 1500, 3600, 10);
    ck_assert_int_eq(b.pages, 30);
    ck_assert_int_eq(b.interval_ms, 300000);
    ck_assert(!b.stretched);
    /* No balancer is still one request. */
    b = hz_resync_budget(300000, 0, 3600, 10);
    ck_assert_int_eq(b.pages, 1);
    ck_assert_int_eq(b.interval_ms, 300000);
    /* Before any answer (no RateLimit-Limit) nothing stretches. */
    b = hz_resync_budget(300000, 1000000, 0, 10);
    ck_assert_int_eq(b.interval_ms, 300000);
    ck_assert(!b.stretched);
    b = hz_resync_budget(300000, 1000000, -1, 10);
    ck_assert_int_eq(b.interval_ms, 300000);
}
END_TEST

/* Rounded up to the millisecond, at most a day, and no overflow from a
 * RateLimit-Limit of any size. */
START_TEST(the_stretched_interval_is_rounded_up_and_bounded)
{
    /* 1 page under a limit of 7: 3600 s × 100 / 70 = 5142857.14... ms. */
    struct hz_budget b = hz_resync_budget(1000, 1, 7, 10);
    ck_assert_int_eq(b.interval_ms, 5142858);
    ck_assert_int_le(b.pages * 3600000.0 / (double)b.interval_ms, 0.7);
    /* A limit of 1 and a million balancers: a day, not weeks. */
    b = hz_resync_budget(1000, 1000000, 1, 1);
    ck_assert_int_eq(b.interval_ms, HZ_RESYNC_MAX_MS);
    ck_assert(b.stretched);
    /* A huge limit (a hostile header) neither overflows nor stretches. */
    b = hz_resync_budget(300000, 2000, 2147483647L, 100);
    ck_assert_int_eq(b.interval_ms, 300000);
    b = hz_resync_budget(300000, (size_t)-1, 3600, 10);
    ck_assert_int_eq(b.interval_ms, HZ_RESYNC_MAX_MS);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb pacing");
    TCase *tc = tcase_create("pacing");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_bucket_of_10_refilling_1_per_second_never_answers_429);
    tcase_add_test(tc, a_full_bucket_is_spent_at_once_down_to_the_reserve);
    tcase_add_test(tc, after_a_429_nothing_goes_out_until_the_reset);
    tcase_add_test(tc, before_the_first_answer_one_request_at_a_time);
    tcase_add_test(tc, an_older_answer_does_not_raise_the_estimate);
    tcase_add_test(tc, a_remaining_above_the_limit_is_a_full_bucket);
    tcase_add_test(tc, two_thousand_balancers_under_3600_stretch_the_resync_to_400_s);
    tcase_add_test(tc, a_resync_within_the_budget_keeps_resync_interval);
    tcase_add_test(tc, the_stretched_interval_is_rounded_up_and_bounded);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
