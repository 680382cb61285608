/*
 * Check suite for modules/mod_tcp_proxy/select.c: the pure upstream policy
 * driven by a fake clock and a deterministic random source.
 *
 * One test per sentence of the spec's "Latency-aware selection" and
 * "Readiness-aware selection" (the test names say which), plus the health
 * streak and draining rules of "Load balancer" and "Graceful draining".
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Fakes                                                                    */

static int64_t fake_now;
static unsigned rnd_i;
#define RND_STEPS 960 /* divisible by 1..6, 8: equal shares are exact */

static int64_t
f_now(void *arg)
{
    (void)arg;
    return fake_now;
}

/* Walks [0, 1) in equal steps, so N × RND_STEPS picks split exactly. */
static double
f_random(void *arg)
{
    (void)arg;
    double r = (double)(rnd_i % RND_STEPS) / RND_STEPS;
    rnd_i++;
    return r;
}

static void *
f_alloc(size_t n)
{
    return calloc(1, n);
}

struct rec {
    int added, draining, undrained, closed, removed;
    char last_closed[64], last_removed[64];
};
static struct rec rec;

static void
r_added(void *arg, struct tp_up *u)
{
    (void)arg;
    (void)u;
    rec.added++;
}
static void
r_draining(void *arg, struct tp_up *u)
{
    (void)arg;
    (void)u;
    rec.draining++;
}
static void
r_undrained(void *arg, struct tp_up *u)
{
    (void)arg;
    (void)u;
    rec.undrained++;
}
/* Closing is synchronous here, as in the module: every connection goes. */
static struct tp_pool *cur_pool; /* the pool under test */

static void
r_close(void *arg, struct tp_up *u)
{
    struct tp_pool *p = cur_pool;
    (void)arg;
    rec.closed++;
    snprintf(rec.last_closed, sizeof(rec.last_closed), "%s", u->addr);
    while (u->nconns)
        tp_pool_conn_closed(p, u);
}
static void
r_removed(void *arg, struct tp_up *u)
{
    (void)arg;
    rec.removed++;
    snprintf(rec.last_removed, sizeof(rec.last_removed), "%s", u->addr);
}

static const struct tp_pool_ops ops = {
    .added = r_added,
    .draining = r_draining,
    .undrained = r_undrained,
    .close_conns = r_close,
    .removed = r_removed,
};

static struct tp_pool *
pool(enum tp_selection sel, enum tp_check_kind check, int64_t drain_ms)
{
    static const struct tp_pool_env env = {
        .now_ms = f_now, .random = f_random, .alloc = f_alloc, .free = free};
    memset(&rec, 0, sizeof(rec));
    fake_now = 1000000;
    rnd_i = 0;
    struct tp_pool *p = tp_pool_new(&env, &ops, NULL, sel, check, drain_ms);
    ck_assert_ptr_nonnull(p);
    cur_pool = p;
    return p;
}

static void
set(struct tp_pool *p, const char *csv)
{
    const char *v[16];
    char buf[512];
    size_t n = 0;
    snprintf(buf, sizeof(buf), "%s", csv);
    for (char *s = strtok(buf, ","); s && n < 16; s = strtok(NULL, ","))
        v[n++] = s;
    ck_assert_int_eq(tp_pool_update(p, v, n), 0);
}

static struct tp_up *
up(struct tp_pool *p, const char *addr)
{
    struct tp_up *u = tp_pool_find(p, addr);
    ck_assert_msg(u != NULL, "no upstream %s", addr);
    return u;
}

/* Give u an average of exactly ms (its first sample). */
static void
sample(struct tp_pool *p, const char *addr, double ms)
{
    tp_pool_check_result(p, up(p, addr), 1, ms);
}

/* Pick RND_STEPS times and count the picks of each upstream into a string
 * "a=N b=M ..." in pool order (zeros included). */
static const char *
picks(struct tp_pool *p, const struct tp_up *exclude)
{
    static char out[512];
    int count[32] = {0};
    size_t n = tp_pool_count(p);
    rnd_i = 0;
    for (int i = 0; i < RND_STEPS; i++) {
        struct tp_up *u = tp_pool_pick(p, exclude);
        if (!u)
            return "none";
        for (size_t k = 0; k < n; k++) {
            if (tp_pool_at(p, k) == u)
                count[k]++;
        }
    }
    size_t o = 0;
    out[0] = '\0';
    for (size_t k = 0; k < n && o < sizeof(out); k++)
        o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s=%d", k ? " " : "",
                              tp_pool_at(p, k)->addr, count[k]);
    return out;
}

static void
fail_twice(struct tp_pool *p, const char *addr)
{
    tp_pool_check_result(p, up(p, addr), 0, 0);
    tp_pool_check_result(p, up(p, addr), 0, 0);
}

/* ------------------------------------------------------------------------ */
/* Load balancer: health streaks                                            */

START_TEST(two_consecutive_failures_exclude_an_upstream_one_success_re_includes_it)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1");
    struct tp_up *a = up(p, "a:1");
    tp_pool_check_result(p, a, 0, 0);
    ck_assert(a->healthy); /* one failure is not enough */
    tp_pool_check_result(p, a, 1, 1);
    tp_pool_check_result(p, a, 0, 0);
    ck_assert(a->healthy); /* the streak restarted */
    tp_pool_check_result(p, a, 0, 0);
    ck_assert(!a->healthy);
    ck_assert_str_eq(picks(p, NULL), "a:1=0 b:1=960");
    tp_pool_check_result(p, a, 1, 1);
    ck_assert(a->healthy);
    ck_assert_str_eq(picks(p, NULL), "a:1=480 b:1=480");
    tp_pool_free(p);
}
END_TEST

START_TEST(failed_and_successful_client_dials_count_toward_the_same_streak)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1");
    struct tp_up *a = up(p, "a:1");
    tp_pool_check_result(p, a, 0, 0);
    tp_pool_dial_result(p, a, 0); /* check + dial: two in a row */
    ck_assert(!a->healthy);
    tp_pool_dial_result(p, a, 1); /* a successful dial re-includes */
    ck_assert(a->healthy);
    tp_pool_dial_result(p, a, 0);
    tp_pool_check_result(p, a, 1, 1); /* a success between breaks the streak */
    tp_pool_dial_result(p, a, 0);
    ck_assert(a->healthy);
    ck_assert_int_eq(a->fail_streak, 1);
    tp_pool_free(p);
}
END_TEST

START_TEST(no_healthy_upstream_means_no_pick)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    ck_assert_ptr_null(tp_pool_pick(p, NULL));
    set(p, "a:1");
    fail_twice(p, "a:1");
    ck_assert_ptr_null(tp_pool_pick(p, NULL));
    ck_assert(!tp_pool_any_active(p));
    tp_pool_free(p);
}
END_TEST

/* A redial never goes back to an upstream it tried; with readyz the ready
 * filter applies to the untried ones. */
START_TEST(a_redial_picks_only_untried_upstreams)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_READYZ, 30000);
    set(p, "a:1,b:1,c:1");
    struct tp_up *a = up(p, "a:1"), *b = up(p, "b:1"), *c = up(p, "c:1");
    ck_assert(a->id && b->id && c->id && a->id != b->id && b->id != c->id && a->id != c->id);
    tp_pool_probe_result(p, a, 1);
    tp_pool_probe_result(p, b, 1);
    uint32_t tried[3] = {a->id};
    for (int i = 0; i < 20; i++)
        ck_assert_ptr_eq(tp_pool_pick_untried(p, tried, 1), b); /* the ready one left */
    tried[1] = b->id;
    for (int i = 0; i < 20; i++)
        ck_assert_ptr_eq(tp_pool_pick_untried(p, tried, 2), c); /* none ready: any healthy */
    tried[2] = c->id;
    ck_assert_ptr_null(tp_pool_pick_untried(p, tried, 3));
    tp_pool_free(p);
}
END_TEST

/* With nothing pickable, the unhealthy, non-draining upstreams are the last
 * resort, each once. */
START_TEST(the_last_resort_is_an_untried_unhealthy_upstream_that_does_not_drain)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1,c:1");
    struct tp_up *a = up(p, "a:1"), *b = up(p, "b:1");
    ck_assert_ptr_null(tp_pool_pick_last_resort(p, NULL, 0)); /* all healthy */
    fail_twice(p, "a:1");
    fail_twice(p, "b:1");
    fail_twice(p, "c:1");
    set(p, "a:1,b:1"); /* c drains */
    ck_assert_ptr_null(tp_pool_pick(p, NULL));
    int seen_a = 0, seen_b = 0;
    rnd_i = 0;
    for (int i = 0; i < RND_STEPS; i++) {
        struct tp_up *u = tp_pool_pick_last_resort(p, NULL, 0);
        ck_assert(u == a || u == b);
        seen_a += u == a;
        seen_b += u == b;
    }
    ck_assert_int_eq(seen_a, RND_STEPS / 2); /* uniform */
    ck_assert_int_eq(seen_b, RND_STEPS / 2);
    uint32_t tried[2] = {a->id, b->id};
    ck_assert_ptr_eq(tp_pool_pick_last_resort(p, tried, 1), b);
    ck_assert_ptr_null(tp_pool_pick_last_resort(p, tried, 2));
    tp_pool_free(p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Graceful draining                                                        */

START_TEST(a_removed_endpoint_gets_no_new_connections_but_keeps_its_existing_ones)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1");
    struct tp_up *a = up(p, "a:1");
    tp_pool_conn_opened(p, a);
    set(p, "b:1");
    ck_assert_int_eq(rec.draining, 1);
    ck_assert(a->draining);
    ck_assert_str_eq(picks(p, NULL), "a:1=0 b:1=960");
    ck_assert_int_eq(tp_pool_tick(p), fake_now + 30000);
    ck_assert_int_eq(rec.closed, 0);
    ck_assert_int_eq(a->nconns, 1);
    /* It finishes on its own: the drain completes and the record goes. */
    tp_pool_conn_closed(p, a);
    tp_pool_tick(p);
    ck_assert_int_eq(rec.removed, 1);
    ck_assert_ptr_null(tp_pool_find(p, "a:1"));
    ck_assert_int_eq(rec.closed, 0);
    tp_pool_free(p);
}
END_TEST

START_TEST(remaining_connections_are_force_closed_when_the_drain_timeout_expires)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1");
    struct tp_up *a = up(p, "a:1");
    tp_pool_conn_opened(p, a);
    tp_pool_conn_opened(p, a);
    set(p, "b:1");
    fake_now += 29999;
    ck_assert_int_eq(tp_pool_tick(p), fake_now + 1);
    ck_assert_int_eq(rec.closed, 0);
    fake_now += 1;
    ck_assert_int_eq(tp_pool_tick(p), -1);
    ck_assert_int_eq(rec.closed, 1);
    ck_assert_str_eq(rec.last_closed, "a:1");
    ck_assert_str_eq(rec.last_removed, "a:1");
    ck_assert_int_eq(tp_pool_count(p), 1);
    tp_pool_free(p);
}
END_TEST

/* Counts that come late (from worker threads): a drained upstream with no
 * connection known stays while acknowledgements of its drain are awaited,
 * so an open reported just before the last one still drains; an
 * acknowledgement of an earlier drain counts for nothing; the drain
 * deadline ends the wait. */
START_TEST(a_held_drain_waits_for_every_acknowledgement_or_the_deadline)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1");
    struct tp_up *a = up(p, "a:1");
    set(p, "b:1");
    uint32_t first = a->drain_seq;
    tp_pool_drain_hold(a, 2);
    ck_assert_int_eq(tp_pool_tick(p), fake_now + 30000);
    ck_assert_ptr_nonnull(tp_pool_find(p, "a:1"));
    ck_assert_int_eq(tp_pool_drain_ack(a, first), 0);
    tp_pool_tick(p);
    ck_assert_ptr_nonnull(tp_pool_find(p, "a:1"));
    /* The second worker's open of a, then its acknowledgement. */
    tp_pool_conn_opened(p, a);
    ck_assert_int_eq(tp_pool_drain_ack(a, first), 1);
    tp_pool_tick(p);
    ck_assert_int_eq(rec.removed, 0);
    tp_pool_conn_closed(p, a);
    tp_pool_tick(p);
    ck_assert_int_eq(rec.removed, 1);

    /* Drained, re-added, drained again: the first drain's word is stale. */
    set(p, "a:1,b:1");
    a = up(p, "a:1");
    set(p, "b:1");
    uint32_t one = a->drain_seq;
    tp_pool_drain_hold(a, 1);
    set(p, "a:1,b:1");
    ck_assert_int_eq(a->drain_holds, 0);
    set(p, "b:1");
    ck_assert_uint_ne(a->drain_seq, one);
    tp_pool_drain_hold(a, 1);
    ck_assert_int_eq(tp_pool_drain_ack(a, one), 0);
    tp_pool_tick(p);
    ck_assert_ptr_nonnull(tp_pool_find(p, "a:1"));
    /* No word at all: the deadline. */
    fake_now += 30000;
    ck_assert_int_eq(tp_pool_tick(p), -1);
    ck_assert_ptr_null(tp_pool_find(p, "a:1"));
    ck_assert_int_eq(rec.closed, 0);
    tp_pool_free(p);
}
END_TEST

START_TEST(re_adding_the_endpoint_before_the_timeout_aborts_the_drain)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1");
    struct tp_up *a = up(p, "a:1");
    tp_pool_conn_opened(p, a);
    set(p, "b:1");
    fake_now += 10000;
    tp_pool_tick(p);
    set(p, "a:1,b:1");
    ck_assert_int_eq(rec.undrained, 1);
    ck_assert(!a->draining);
    fake_now += 60000;
    ck_assert_int_eq(tp_pool_tick(p), -1);
    ck_assert_int_eq(rec.closed, 0);
    ck_assert_int_eq(rec.removed, 0);
    ck_assert_int_eq(a->nconns, 1);
    ck_assert_str_eq(picks(p, NULL), "a:1=480 b:1=480");
    tp_pool_free(p);
}
END_TEST

START_TEST(a_timeout_of_0_closes_connections_to_removed_endpoints_immediately)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 0);
    set(p, "a:1,b:1");
    struct tp_up *a = up(p, "a:1");
    tp_pool_conn_opened(p, a);
    set(p, "b:1");
    ck_assert_int_eq(rec.closed, 1); /* at once, before any tick */
    ck_assert_int_eq(a->nconns, 0);
    tp_pool_tick(p);
    ck_assert_int_eq(rec.removed, 1);
    tp_pool_free(p);
}
END_TEST

START_TEST(the_readiness_of_the_proxy_is_an_upstream_healthy_and_not_draining)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1");
    tp_pool_conn_opened(p, up(p, "a:1"));
    fail_twice(p, "b:1");
    ck_assert(tp_pool_any_active(p));
    set(p, "b:1"); /* a drains, b unhealthy */
    ck_assert_int_eq(tp_pool_count(p), 2);
    ck_assert(!tp_pool_any_active(p));
    tp_pool_check_result(p, up(p, "b:1"), 1, 1);
    ck_assert(tp_pool_any_active(p));
    ck_assert_int_eq(tp_pool_active_count(p), 1);
    tp_pool_free(p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Latency-aware selection, one test per sentence                          */

START_TEST(lat_every_successful_health_check_feeds_the_ewma_failed_checks_do_not)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 30000);
    set(p, "a:1");
    struct tp_up *a = up(p, "a:1");
    ck_assert(!a->has_sample);
    tp_pool_check_result(p, a, 0, 500);
    ck_assert(!a->has_sample);
    tp_pool_check_result(p, a, 1, 10);
    ck_assert(a->has_sample);
    ck_assert_double_eq_tol(a->avg_ms, 10, 1e-9);
    tp_pool_check_result(p, a, 1, 14);
    ck_assert_double_eq_tol(a->avg_ms, 10 + TP_EWMA_ALPHA * 4, 1e-9);
    double before = a->avg_ms;
    tp_pool_check_result(p, a, 0, 2);
    ck_assert_double_eq_tol(a->avg_ms, before, 1e-12);
    tp_pool_free(p);
}
END_TEST

START_TEST(lat_each_sample_is_capped_at_four_times_the_average_but_never_below_2ms)
{
    /* One retransmitted SYN (1 s) against a 10 ms average: a bounded step. */
    double avg = tp_ewma_update(1, 10, 1000);
    ck_assert_double_eq_tol(avg, 10 + TP_EWMA_ALPHA * (40 - 10), 1e-9);
    /* The floor: a 0.1 ms average still accepts samples up to 2 ms. */
    avg = tp_ewma_update(1, 0.1, 50);
    ck_assert_double_eq_tol(avg, 0.1 + TP_EWMA_ALPHA * (2.0 - 0.1), 1e-9);
    /* A lasting increase (10 ms -> 100 ms) shows within a few checks. */
    avg = 10;
    int checks = 0;
    while (avg < 50 && checks < 100) {
        avg = tp_ewma_update(1, avg, 100);
        checks++;
    }
    ck_assert_int_le(checks, 6);
    ck_assert_double_le(avg, 100);
}
END_TEST

START_TEST(lat_a_sample_below_a_quarter_of_the_average_replaces_it)
{
    /* A first check that took 40 ms against a usual 1 ms... */
    double avg = tp_ewma_update(0, 0, 40);
    ck_assert_double_eq_tol(avg, 40, 1e-9);
    /* ...is undone by the next normal one. */
    avg = tp_ewma_update(1, avg, 1);
    ck_assert_double_eq_tol(avg, 1, 1e-9);
    /* Exactly a quarter is not below it: it is averaged. */
    avg = tp_ewma_update(1, 8, 2);
    ck_assert_double_eq_tol(avg, 8 + TP_EWMA_ALPHA * (2 - 8), 1e-9);
}
END_TEST

START_TEST(lat_tiers_by_latency_alone_healthy_or_not_tier0_within_max_best_plus_2ms_2x_best)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1,c:1,d:1,e:1,f:1");
    sample(p, "a:1", 1);   /* best; limit max(3, 2) = 3 */
    sample(p, "b:1", 3);   /* at the limit: tier 0 */
    sample(p, "c:1", 3.5); /* tier 1: best 3.5, limit max(5.5, 7) = 7 */
    sample(p, "d:1", 7);   /* tier 1 */
    sample(p, "e:1", 7.5); /* tier 2 */
    sample(p, "f:1", 20);  /* tier 3 */
    fail_twice(p, "b:1");  /* healthy or not: still tier 0 */
    ck_assert_int_eq(up(p, "a:1")->tier, 0);
    ck_assert_int_eq(up(p, "b:1")->tier, 0);
    ck_assert_int_eq(up(p, "c:1")->tier, 1);
    ck_assert_int_eq(up(p, "d:1")->tier, 1);
    ck_assert_int_eq(up(p, "e:1")->tier, 2);
    ck_assert_int_eq(up(p, "f:1")->tier, 3);
    ck_assert_double_eq_tol(tp_tier_limit(10), 20, 1e-9);
    ck_assert_double_eq_tol(tp_tier_limit(0.5), 2.5, 1e-9);
    tp_pool_free(p);
}
END_TEST

/* Move u's average to ms by health-check samples, in steps that neither
 * replace (never below a quarter) nor get capped, so the average passes
 * through every value in between as a real series of checks would. */
static void
move_avg(struct tp_pool *p, const char *addr, double ms)
{
    struct tp_up *u = up(p, addr);
    for (int i = 0; i < 400 && (u->avg_ms < ms - 1e-9 || u->avg_ms > ms + 1e-9); i++) {
        double need = u->avg_ms + (ms - u->avg_ms) / TP_EWMA_ALPHA;
        double lo = u->avg_ms * TP_SAMPLE_REPLACE_FRACTION;
        double cap = u->avg_ms * TP_SAMPLE_CAP_FACTOR;
        if (cap < TP_SAMPLE_CAP_FLOOR_MS)
            cap = TP_SAMPLE_CAP_FLOOR_MS;
        tp_pool_check_result(p, u, 1, need < lo ? lo : need > cap ? cap : need);
    }
    ck_assert_double_eq_tol(u->avg_ms, ms, 1e-6);
}

START_TEST(lat_an_upstream_leaves_its_tier_only_above_the_limit_plus_a_further_25_percent)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1");
    sample(p, "a:1", 10); /* limit 20, leave above 25 */
    sample(p, "b:1", 15);
    ck_assert_int_eq(up(p, "b:1")->tier, 0);
    move_avg(p, "b:1", 22); /* over the limit, inside the 25 % */
    ck_assert_int_eq(up(p, "b:1")->tier, 0);
    move_avg(p, "b:1", 25);
    ck_assert_int_eq(up(p, "b:1")->tier, 0);
    move_avg(p, "b:1", 25.5);
    ck_assert_int_eq(up(p, "b:1")->tier, 1);
    /* Back under 25 but above the limit: joining has no hysteresis, it
     * stays out until within the limit itself. */
    move_avg(p, "b:1", 21);
    ck_assert_int_eq(up(p, "b:1")->tier, 1);
    move_avg(p, "b:1", 19.9);
    ck_assert_int_eq(up(p, "b:1")->tier, 0);
    tp_pool_free(p);
}
END_TEST

START_TEST(lat_membership_follows_the_group_not_the_tier_number)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 0);
    set(p, "a:1,b:1,c:1");
    sample(p, "a:1", 1);
    sample(p, "b:1", 10); /* tier 1: limit 20 */
    sample(p, "c:1", 18);
    move_avg(p, "c:1", 22); /* sticky in b's group (22 <= 25) */
    ck_assert_int_eq(up(p, "b:1")->tier, 1);
    ck_assert_int_eq(up(p, "c:1")->tier, 1);
    /* The tier above disappears: the group moves to tier 0 whole. */
    set(p, "b:1,c:1");
    tp_pool_tick(p);
    ck_assert_ptr_null(tp_pool_find(p, "a:1"));
    ck_assert_int_eq(up(p, "b:1")->tier, 0);
    ck_assert_int_eq(up(p, "c:1")->tier, 0);
    /* A tier appears above: the group becomes tier 1, still whole. */
    set(p, "b:1,c:1,d:1");
    sample(p, "d:1", 2);
    ck_assert_int_eq(up(p, "d:1")->tier, 0);
    ck_assert_int_eq(up(p, "b:1")->tier, 1);
    ck_assert_int_eq(up(p, "c:1")->tier, 1);
    ck_assert_uint_eq(up(p, "b:1")->gid, up(p, "c:1")->gid);
    tp_pool_free(p);
}
END_TEST

START_TEST(lat_picks_are_random_among_the_lowest_tier_with_a_pickable_one_plus_unsampled)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1,c:1,d:1");
    sample(p, "a:1", 1);
    sample(p, "b:1", 1.5);
    sample(p, "c:1", 50); /* tier 1 */
    /* d has no sample yet: it shares with tier 0. */
    ck_assert_str_eq(picks(p, NULL), "a:1=320 b:1=320 c:1=0 d:1=320");
    fail_twice(p, "a:1");
    fail_twice(p, "b:1");
    ck_assert_str_eq(picks(p, NULL), "a:1=0 b:1=0 c:1=480 d:1=480");
    tp_pool_free(p);
}
END_TEST

START_TEST(lat_with_readyz_only_ready_upstreams_count_while_any_is_ready)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_READYZ, 30000);
    set(p, "a:1,b:1,c:1");
    sample(p, "a:1", 1);
    sample(p, "b:1", 1.2);
    sample(p, "c:1", 40);
    tp_pool_probe_result(p, up(p, "a:1"), 0);
    tp_pool_probe_result(p, up(p, "b:1"), 0);
    tp_pool_probe_result(p, up(p, "c:1"), 1);
    /* The tier is the lowest one with a ready upstream. */
    ck_assert_str_eq(picks(p, NULL), "a:1=0 b:1=0 c:1=960");
    tp_pool_probe_result(p, up(p, "b:1"), 1);
    ck_assert_str_eq(picks(p, NULL), "a:1=0 b:1=960 c:1=0");
    tp_pool_free(p);
}
END_TEST

START_TEST(lat_unhealthy_and_draining_upstreams_keep_their_tier)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1,c:1,d:1");
    sample(p, "a:1", 1);   /* best */
    sample(p, "b:1", 2.8); /* tier 0 with a */
    sample(p, "c:1", 4);   /* tier 1 */
    sample(p, "d:1", 5);   /* tier 1 */
    tp_pool_conn_opened(p, up(p, "b:1"));
    /* Losing some of tier 0 does not let a lower tier in... */
    fail_twice(p, "a:1");
    ck_assert_int_eq(up(p, "a:1")->tier, 0);
    ck_assert_int_eq(up(p, "b:1")->tier, 0);
    ck_assert_int_eq(up(p, "c:1")->tier, 1);
    ck_assert_str_eq(picks(p, NULL), "a:1=0 b:1=960 c:1=0 d:1=0");
    /* ...losing all of them (b drains) hands over to the next tier. */
    set(p, "a:1,c:1,d:1");
    ck_assert(up(p, "b:1")->draining);
    ck_assert_int_eq(up(p, "b:1")->tier, 0);
    ck_assert_str_eq(picks(p, NULL), "a:1=0 b:1=0 c:1=480 d:1=480");
    tp_pool_free(p);
}
END_TEST

START_TEST(lat_a_removed_upstream_leaves_the_tiers_once_its_drain_completes)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1,c:1");
    sample(p, "a:1", 1);
    sample(p, "b:1", 2.5); /* tier 0 because of a */
    sample(p, "c:1", 5);   /* tier 1 while a is here (limit 3)... */
    ck_assert_int_eq(up(p, "c:1")->tier, 1);
    tp_pool_conn_opened(p, up(p, "a:1"));
    set(p, "b:1,c:1");
    tp_pool_tick(p);
    /* ...still while a drains (its average still shapes the tiers)... */
    ck_assert_int_eq(up(p, "c:1")->tier, 1);
    fake_now += 30000;
    tp_pool_tick(p);
    /* ...rebuilt without a: best 2.5, limit 5, c joins tier 0. */
    ck_assert_ptr_null(tp_pool_find(p, "a:1"));
    ck_assert_int_eq(up(p, "b:1")->tier, 0);
    ck_assert_int_eq(up(p, "c:1")->tier, 0);
    tp_pool_free(p);
}
END_TEST

START_TEST(lat_a_new_unreachable_upstream_keeps_an_equal_share_of_its_tier_until_excluded)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1,c:1");
    sample(p, "a:1", 1);
    sample(p, "b:1", 100); /* tier 1: not picked */
    sample(p, "c:1", 1.1);
    set(p, "a:1,b:1,c:1,n:1");
    /* Takes picks before its first successful check: a third of tier 0's,
     * not a quarter of all as random mode would give. */
    ck_assert_str_eq(picks(p, NULL), "a:1=320 b:1=0 c:1=320 n:1=320");
    tp_pool_check_result(p, up(p, "n:1"), 0, 0);
    ck_assert_str_eq(picks(p, NULL), "a:1=320 b:1=0 c:1=320 n:1=320");
    tp_pool_dial_result(p, up(p, "n:1"), 0); /* the threshold */
    ck_assert_str_eq(picks(p, NULL), "a:1=480 b:1=0 c:1=480 n:1=0");
    tp_pool_free(p);
}
END_TEST

START_TEST(lat_every_upstream_within_2ms_of_the_best_is_in_tier0_like_random)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1,c:1");
    sample(p, "a:1", 0.2);
    sample(p, "b:1", 0.9);
    sample(p, "c:1", 2.2);
    ck_assert_int_eq(up(p, "a:1")->tier, 0);
    ck_assert_int_eq(up(p, "b:1")->tier, 0);
    ck_assert_int_eq(up(p, "c:1")->tier, 0);
    ck_assert_str_eq(picks(p, NULL), "a:1=320 b:1=320 c:1=320");
    tp_pool_free(p);
}
END_TEST

START_TEST(lat_only_health_checks_feed_the_average)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 30000);
    set(p, "a:1");
    sample(p, "a:1", 5);
    for (int i = 0; i < 10; i++) {
        tp_pool_dial_result(p, up(p, "a:1"), 1);
        tp_pool_conn_opened(p, up(p, "a:1"));
    }
    ck_assert_double_eq_tol(up(p, "a:1")->avg_ms, 5, 1e-12);
    tp_pool_free(p);
}
END_TEST

START_TEST(lat_a_change_of_tier_does_not_move_existing_connections)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1");
    sample(p, "a:1", 1);
    sample(p, "b:1", 1.5);
    tp_pool_conn_opened(p, up(p, "b:1"));
    tp_pool_conn_opened(p, up(p, "b:1"));
    move_avg(p, "b:1", 30);
    ck_assert_int_eq(up(p, "b:1")->tier, 1);
    ck_assert_int_eq(tp_pool_tick(p), -1);
    ck_assert_int_eq(rec.closed, 0);
    ck_assert_int_eq(up(p, "b:1")->nconns, 2);
    tp_pool_free(p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Readiness-aware selection, one test per sentence                        */

START_TEST(rdy_every_successful_tcp_check_is_followed_by_a_readyz_probe)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_READYZ, 30000);
    set(p, "a:1");
    ck_assert_int_eq(tp_pool_check_result(p, up(p, "a:1"), 1, 1), 1);
    ck_assert_int_eq(tp_pool_check_result(p, up(p, "a:1"), 0, 0), 0);
    tp_pool_free(p);
    p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    set(p, "a:1");
    ck_assert_int_eq(tp_pool_check_result(p, up(p, "a:1"), 1, 1), 0);
    tp_pool_free(p);
}
END_TEST

START_TEST(rdy_one_health_timeout_deadline_covers_both_the_connect_and_the_request)
{
    ck_assert_int_eq(tp_probe_budget_ms(15000, 1000, 1000), 15000);
    ck_assert_int_eq(tp_probe_budget_ms(15000, 1000, 15000), 1000);
    ck_assert_int_eq(tp_probe_budget_ms(15000, 1000, 16000), 0);
    ck_assert_int_eq(tp_probe_budget_ms(15000, 1000, 99000), 0);
}
END_TEST

START_TEST(rdy_any_status_other_than_200_a_tls_error_or_a_timeout_is_a_failed_probe)
{
    ck_assert(tp_probe_ok(1, 200));
    ck_assert(!tp_probe_ok(1, 301)); /* redirects are not followed */
    ck_assert(!tp_probe_ok(1, 302));
    ck_assert(!tp_probe_ok(1, 204));
    ck_assert(!tp_probe_ok(1, 500));
    ck_assert(!tp_probe_ok(1, 401));
    ck_assert(!tp_probe_ok(0, 0));   /* TLS error, timeout */
    ck_assert(!tp_probe_ok(0, 200)); /* a 200 cut short */
}
END_TEST

START_TEST(rdy_two_consecutive_failures_mark_not_ready_and_one_success_restores)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_READYZ, 30000);
    set(p, "a:1");
    struct tp_up *a = up(p, "a:1");
    tp_pool_check_result(p, a, 1, 1);
    tp_pool_probe_result(p, a, 1);
    ck_assert(a->ready);
    tp_pool_probe_result(p, a, 0);
    ck_assert(a->ready);
    tp_pool_probe_result(p, a, 0);
    ck_assert(!a->ready);
    ck_assert(a->healthy); /* TCP health is apart */
    tp_pool_probe_result(p, a, 1);
    ck_assert(a->ready);
    tp_pool_free(p);
}
END_TEST

START_TEST(rdy_a_new_or_reconnected_upstream_is_not_ready_until_its_next_probe_passes)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_READYZ, 30000);
    set(p, "a:1,b:1");
    struct tp_up *a = up(p, "a:1"), *b = up(p, "b:1");
    tp_pool_check_result(p, a, 1, 1);
    tp_pool_probe_result(p, a, 1);
    /* New: b is not ready, so it gets nothing while a is ready. */
    ck_assert(!b->ready);
    ck_assert(b->probe_pending);
    ck_assert_str_eq(picks(p, NULL), "a:1=960 b:1=0");
    tp_pool_check_result(p, b, 1, 1);
    tp_pool_probe_result(p, b, 1);
    ck_assert_str_eq(picks(p, NULL), "a:1=480 b:1=480");
    /* b restarts: a TCP failure, then reachable again. Between the
     * successful connect and its probe, it gets no new connections. */
    tp_pool_check_result(p, b, 0, 0);
    ck_assert_int_eq(tp_pool_check_result(p, b, 1, 1), 1);
    ck_assert(!b->ready);
    ck_assert_str_eq(picks(p, NULL), "a:1=960 b:1=0");
    tp_pool_probe_result(p, b, 1);
    ck_assert_str_eq(picks(p, NULL), "a:1=480 b:1=480");
    tp_pool_free(p);
}
END_TEST

START_TEST(rdy_new_connections_go_to_ready_upstreams_only)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_READYZ, 30000);
    set(p, "a:1,b:1,c:1");
    for (const char *s = "a:1"; s; s = NULL) {
        tp_pool_check_result(p, up(p, s), 1, 1);
        tp_pool_probe_result(p, up(p, s), 1);
    }
    tp_pool_check_result(p, up(p, "b:1"), 1, 1);
    tp_pool_probe_result(p, up(p, "b:1"), 0);
    tp_pool_probe_result(p, up(p, "b:1"), 0);
    ck_assert_str_eq(picks(p, NULL), "a:1=960 b:1=0 c:1=0");
    tp_pool_free(p);
}
END_TEST

START_TEST(rdy_with_no_healthy_upstream_ready_selection_falls_back_to_every_tcp_healthy_one)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_READYZ, 30000);
    set(p, "a:1,b:1,c:1");
    tp_pool_check_result(p, up(p, "a:1"), 1, 1);
    tp_pool_probe_result(p, up(p, "a:1"), 1);
    fail_twice(p, "c:1");
    /* a is ready but then unhealthy by TCP: it does not count as ready. */
    fail_twice(p, "a:1");
    ck_assert_str_eq(picks(p, NULL), "a:1=0 b:1=960 c:1=0");
    tp_pool_check_result(p, up(p, "c:1"), 1, 1);
    ck_assert_str_eq(picks(p, NULL), "a:1=0 b:1=480 c:1=480");
    tp_pool_free(p);
}
END_TEST

START_TEST(rdy_readiness_filters_before_latency_tiers)
{
    struct tp_pool *p = pool(TP_SEL_LATENCY, TP_CHECK_READYZ, 30000);
    set(p, "near:1,far:1,farther:1");
    sample(p, "near:1", 1);
    sample(p, "far:1", 30);
    sample(p, "farther:1", 90);
    tp_pool_probe_result(p, up(p, "near:1"), 0);
    tp_pool_probe_result(p, up(p, "far:1"), 0);
    tp_pool_probe_result(p, up(p, "farther:1"), 1);
    /* A ready upstream in a farther tier wins over unready closer ones. */
    ck_assert_str_eq(picks(p, NULL), "near:1=0 far:1=0 farther:1=960");
    /* With none ready, the tiers apply to all TCP-healthy upstreams. */
    fail_twice(p, "farther:1");
    ck_assert_str_eq(picks(p, NULL), "near:1=960 far:1=0 farther:1=0");
    fail_twice(p, "near:1");
    ck_assert_str_eq(picks(p, NULL), "near:1=0 far:1=960 farther:1=0");
    tp_pool_free(p);
}
END_TEST

/* a ready, b failing its probes with connections on it. */
static struct tp_pool *
unready_b(int64_t drain_ms)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_READYZ, drain_ms);
    set(p, "a:1,b:1");
    struct tp_up *a = up(p, "a:1"), *b = up(p, "b:1");
    tp_pool_check_result(p, a, 1, 1);
    tp_pool_probe_result(p, a, 1);
    tp_pool_check_result(p, b, 1, 1);
    tp_pool_probe_result(p, b, 1);
    tp_pool_conn_opened(p, b);
    tp_pool_conn_opened(p, b);
    ck_assert_int_eq(tp_pool_tick(p), -1);
    tp_pool_probe_result(p, b, 0);
    ck_assert_int_eq(tp_pool_tick(p), -1); /* one failure: still ready */
    tp_pool_probe_result(p, b, 0);
    return p;
}

START_TEST(rdy_an_unready_upstream_loses_its_connections_after_drain_timeout_while_another_is_ready)
{
    struct tp_pool *p = unready_b(30000);
    int64_t t0 = fake_now;
    ck_assert_int_eq(tp_pool_tick(p), t0 + 30000);
    fake_now = t0 + 29999;
    tp_pool_tick(p);
    ck_assert_int_eq(rec.closed, 0);
    fake_now = t0 + 30000;
    ck_assert_int_eq(tp_pool_tick(p), -1);
    ck_assert_int_eq(rec.closed, 1);
    ck_assert_str_eq(rec.last_closed, "b:1");
    ck_assert_int_eq(up(p, "b:1")->nconns, 0);
    /* It stays known (not removed), just unready. */
    ck_assert_int_eq(rec.removed, 0);
    tp_pool_free(p);

    /* 0 closes them at once. */
    p = unready_b(0);
    tp_pool_tick(p);
    ck_assert_int_eq(rec.closed, 1);
    tp_pool_free(p);
}
END_TEST

START_TEST(rdy_the_closing_is_called_off_when_it_turns_ready_or_no_other_is_ready)
{
    struct tp_pool *p = unready_b(30000);
    tp_pool_tick(p);
    fake_now += 10000;
    tp_pool_probe_result(p, up(p, "b:1"), 1); /* turns ready again */
    ck_assert_int_eq(tp_pool_tick(p), -1);
    fake_now += 60000;
    tp_pool_tick(p);
    ck_assert_int_eq(rec.closed, 0);
    tp_pool_free(p);

    p = unready_b(30000);
    tp_pool_tick(p);
    fake_now += 10000;
    fail_twice(p, "a:1"); /* no other healthy upstream is ready any more */
    ck_assert_int_eq(tp_pool_tick(p), -1);
    fake_now += 60000;
    tp_pool_tick(p);
    ck_assert_int_eq(rec.closed, 0);
    ck_assert_int_eq(up(p, "b:1")->nconns, 2);
    tp_pool_free(p);
}
END_TEST

START_TEST(rdy_with_no_upstream_ready_or_a_first_probe_pending_connections_stay)
{
    /* No upstream ready: both fail their probes. */
    struct tp_pool *p = unready_b(1000);
    tp_pool_probe_result(p, up(p, "a:1"), 0);
    tp_pool_probe_result(p, up(p, "a:1"), 0);
    tp_pool_conn_opened(p, up(p, "a:1"));
    ck_assert_int_eq(tp_pool_tick(p), -1);
    fake_now += 60000;
    tp_pool_tick(p);
    ck_assert_int_eq(rec.closed, 0);
    tp_pool_free(p);

    /* b's first probe after a reset is pending: its connections stay. */
    p = unready_b(1000);
    tp_pool_check_result(p, up(p, "b:1"), 0, 0); /* TCP failure: reset */
    tp_pool_check_result(p, up(p, "b:1"), 1, 1); /* reachable, probe pending */
    ck_assert(up(p, "b:1")->probe_pending);
    ck_assert_int_eq(tp_pool_tick(p), -1);
    fake_now += 60000;
    tp_pool_tick(p);
    ck_assert_int_eq(rec.closed, 0);
    ck_assert_int_eq(up(p, "b:1")->nconns, 2);
    tp_pool_free(p);
}
END_TEST

START_TEST(rdy_the_readyz_endpoint_of_the_proxy_itself_is_unaffected)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_READYZ, 30000);
    set(p, "a:1");
    tp_pool_check_result(p, up(p, "a:1"), 1, 1);
    tp_pool_probe_result(p, up(p, "a:1"), 0);
    tp_pool_probe_result(p, up(p, "a:1"), 0);
    ck_assert(!up(p, "a:1")->ready);
    ck_assert(tp_pool_any_active(p)); /* healthy and not draining is enough */
    ck_assert_ptr_nonnull(tp_pool_pick(p, NULL));
    tp_pool_free(p);
}
END_TEST

START_TEST(pick_excludes_the_upstream_being_retried)
{
    struct tp_pool *p = pool(TP_SEL_RANDOM, TP_CHECK_TCP, 30000);
    set(p, "a:1,b:1");
    ck_assert_str_eq(picks(p, up(p, "a:1")), "a:1=0 b:1=960");
    set(p, "a:1");
    ck_assert_str_eq(picks(p, up(p, "a:1")), "none");
    tp_pool_free(p);
}
END_TEST

/* Allocation failures: the Nth allocation fails; nothing crashes or leaks
 * (the sanitizer build checks the leaks) and what was built stays usable. */
static int fail_at, alloc_count;

static void *
failing_alloc(size_t n)
{
    if (++alloc_count == fail_at)
        return NULL;
    return calloc(1, n);
}

START_TEST(allocation_failures_are_errors_not_crashes)
{
    for (fail_at = 1; fail_at < 40; fail_at++) {
        const struct tp_pool_env env = {
            .now_ms = f_now, .random = f_random, .alloc = failing_alloc, .free = free};
        alloc_count = 0;
        memset(&rec, 0, sizeof(rec));
        struct tp_pool *p = tp_pool_new(&env, &ops, NULL, TP_SEL_LATENCY, TP_CHECK_READYZ, 0);
        if (!p)
            continue;
        cur_pool = p;
        const char *v[] = {"a:1", "b:1", "c:1", "d:1", "e:1", "f:1", "g:1", "h:1", "i:1"};
        int rc = tp_pool_update(p, v, 9);
        ck_assert(rc == 0 || rc == -ENOMEM);
        ck_assert_int_eq((size_t)rec.added, tp_pool_count(p));
        if (rc == 0)
            ck_assert_uint_eq(tp_pool_count(p), 9);
        for (size_t i = 0; i < tp_pool_count(p); i++)
            tp_pool_check_result(p, tp_pool_at(p, i), 1, 1.0 + (double)i);
        ck_assert(tp_pool_count(p) == 0 || tp_pool_pick(p, NULL) != NULL);
        tp_pool_update(p, v, 1);
        tp_pool_tick(p);
        ck_assert_uint_le(tp_pool_count(p), 1);
        tp_pool_free(p);
    }
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy_select");
    TCase *h = tcase_create("health_and_drain");
    tcase_add_test(h, two_consecutive_failures_exclude_an_upstream_one_success_re_includes_it);
    tcase_add_test(h, failed_and_successful_client_dials_count_toward_the_same_streak);
    tcase_add_test(h, no_healthy_upstream_means_no_pick);
    tcase_add_test(h, a_redial_picks_only_untried_upstreams);
    tcase_add_test(h, the_last_resort_is_an_untried_unhealthy_upstream_that_does_not_drain);
    tcase_add_test(h, a_removed_endpoint_gets_no_new_connections_but_keeps_its_existing_ones);
    tcase_add_test(h, remaining_connections_are_force_closed_when_the_drain_timeout_expires);
    tcase_add_test(h, a_held_drain_waits_for_every_acknowledgement_or_the_deadline);
    tcase_add_test(h, re_adding_the_endpoint_before_the_timeout_aborts_the_drain);
    tcase_add_test(h, a_timeout_of_0_closes_connections_to_removed_endpoints_immediately);
    tcase_add_test(h, the_readiness_of_the_proxy_is_an_upstream_healthy_and_not_draining);
    tcase_add_test(h, pick_excludes_the_upstream_being_retried);
    tcase_add_test(h, allocation_failures_are_errors_not_crashes);
    suite_add_tcase(s, h);

    TCase *l = tcase_create("latency_aware_selection");
    tcase_add_test(l, lat_every_successful_health_check_feeds_the_ewma_failed_checks_do_not);
    tcase_add_test(l, lat_each_sample_is_capped_at_four_times_the_average_but_never_below_2ms);
    tcase_add_test(l, lat_a_sample_below_a_quarter_of_the_average_replaces_it);
    tcase_add_test(
        l, lat_tiers_by_latency_alone_healthy_or_not_tier0_within_max_best_plus_2ms_2x_best);
    tcase_add_test(l,
                   lat_an_upstream_leaves_its_tier_only_above_the_limit_plus_a_further_25_percent);
    tcase_add_test(l, lat_membership_follows_the_group_not_the_tier_number);
    tcase_add_test(l,
                   lat_picks_are_random_among_the_lowest_tier_with_a_pickable_one_plus_unsampled);
    tcase_add_test(l, lat_with_readyz_only_ready_upstreams_count_while_any_is_ready);
    tcase_add_test(l, lat_unhealthy_and_draining_upstreams_keep_their_tier);
    tcase_add_test(l, lat_a_removed_upstream_leaves_the_tiers_once_its_drain_completes);
    tcase_add_test(l,
                   lat_a_new_unreachable_upstream_keeps_an_equal_share_of_its_tier_until_excluded);
    tcase_add_test(l, lat_every_upstream_within_2ms_of_the_best_is_in_tier0_like_random);
    tcase_add_test(l, lat_only_health_checks_feed_the_average);
    tcase_add_test(l, lat_a_change_of_tier_does_not_move_existing_connections);
    suite_add_tcase(s, l);

    TCase *r = tcase_create("readiness_aware_selection");
    tcase_add_test(r, rdy_every_successful_tcp_check_is_followed_by_a_readyz_probe);
    tcase_add_test(r, rdy_one_health_timeout_deadline_covers_both_the_connect_and_the_request);
    tcase_add_test(r, rdy_any_status_other_than_200_a_tls_error_or_a_timeout_is_a_failed_probe);
    tcase_add_test(r, rdy_two_consecutive_failures_mark_not_ready_and_one_success_restores);
    tcase_add_test(r, rdy_a_new_or_reconnected_upstream_is_not_ready_until_its_next_probe_passes);
    tcase_add_test(r, rdy_new_connections_go_to_ready_upstreams_only);
    tcase_add_test(
        r, rdy_with_no_healthy_upstream_ready_selection_falls_back_to_every_tcp_healthy_one);
    tcase_add_test(r, rdy_readiness_filters_before_latency_tiers);
    tcase_add_test(
        r,
        rdy_an_unready_upstream_loses_its_connections_after_drain_timeout_while_another_is_ready);
    tcase_add_test(r, rdy_the_closing_is_called_off_when_it_turns_ready_or_no_other_is_ready);
    tcase_add_test(r, rdy_with_no_upstream_ready_or_a_first_probe_pending_connections_stay);
    tcase_add_test(r, rdy_the_readyz_endpoint_of_the_proxy_itself_is_unaffected);
    suite_add_tcase(s, r);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
