/*
 * mod_leader's election state machine (modules/mod_leader/le_machine.c)
 * under a fake clock, a fixed random source and a scripted API: one test
 * per rule of client-go's leaderelection with a LeaseLock, and of the gate
 * (see modules/mod_leader/le.h). Also the settings check
 * (le_settings.c: lease_duration > renew_deadline > 1.2 × retry_period > 0)
 * and the MicroTime format.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ld.h"
#include "le.h"
#include "testutil.h"

#define ME "me_1"
#define LEASE_MS 15000
#define RENEW_MS 10000
#define RETRY_MS 2000
#define WALL0 1764428645000LL /* 2025-11-29T15:04:05Z */

/* ------------------------------------------------------------------ */
/* The fake driver                                                      */

struct fake {
    struct le m;
    int64_t now, wall;
    double rnd;
    int64_t wake; /* -1: none */
    /* requests */
    int gets, creates, updates, cancels;
    enum le_req inflight; /* what the fake believes is in flight */
    int64_t last_req_at;
    struct le_record written; /* last create/update body */
    char written_rv[LE_RV_MAX];
    /* gate */
    int opens, closes;
    int close_sync; /* complete the gate close inside the call */
    int64_t closed_at;
    /* reports */
    int leading, leading_calls;
    int holder_changes;
    char holder_old[LE_HOLDER_MAX], holder_new[LE_HOLDER_MAX];
    int renews;
    int64_t renew_wall;
    int notes[32];
    int stopped;
};

static struct fake F;

static int64_t
f_now(void *arg)
{
    return ((struct fake *)arg)->now;
}

static int64_t
f_wall(void *arg)
{
    return ((struct fake *)arg)->wall;
}

static double
f_random(void *arg)
{
    return ((struct fake *)arg)->rnd;
}

static int
f_get(void *arg)
{
    struct fake *f = arg;
    ck_assert_int_eq(f->inflight, LE_REQ_NONE);
    f->gets++;
    f->inflight = LE_REQ_GET;
    f->last_req_at = f->now;
    return 0;
}

static int
f_create(void *arg, const struct le_record *r)
{
    struct fake *f = arg;
    ck_assert_int_eq(f->inflight, LE_REQ_NONE);
    f->creates++;
    f->inflight = LE_REQ_CREATE;
    f->written = *r;
    f->written_rv[0] = '\0';
    f->last_req_at = f->now;
    return 0;
}

static int
f_update(void *arg, const struct le_record *r, const char *rv)
{
    struct fake *f = arg;
    ck_assert_int_eq(f->inflight, LE_REQ_NONE);
    f->updates++;
    f->inflight = LE_REQ_UPDATE;
    f->written = *r;
    snprintf(f->written_rv, sizeof(f->written_rv), "%s", rv);
    f->last_req_at = f->now;
    return 0;
}

static void
f_cancel(void *arg)
{
    struct fake *f = arg;
    ck_assert_int_ne(f->inflight, LE_REQ_NONE);
    f->cancels++;
    f->inflight = LE_REQ_NONE;
}

static void
f_wake_at(void *arg, int64_t at)
{
    ((struct fake *)arg)->wake = at;
}

static int
f_gate(void *arg, int open)
{
    struct fake *f = arg;
    if (open) {
        f->opens++;
        return 0;
    }
    f->closes++;
    f->closed_at = f->now;
    if (f->close_sync)
        le_gate_closed(&f->m);
    return 0;
}

static void
f_leading(void *arg, int is_leader)
{
    struct fake *f = arg;
    f->leading = is_leader;
    f->leading_calls++;
}

static void
f_holder(void *arg, const char *o, const char *n)
{
    struct fake *f = arg;
    f->holder_changes++;
    snprintf(f->holder_old, sizeof(f->holder_old), "%s", o);
    snprintf(f->holder_new, sizeof(f->holder_new), "%s", n);
}

static void
f_renewed(void *arg, int64_t wall)
{
    struct fake *f = arg;
    f->renews++;
    f->renew_wall = wall;
}

static void
f_note(void *arg, enum le_note what, const char *detail)
{
    (void)detail;
    ((struct fake *)arg)->notes[what]++;
}

static void
f_stopped(void *arg)
{
    ((struct fake *)arg)->stopped++;
}

static const struct le_ops fake_ops = {
    .now_ms = f_now,
    .wall_ms = f_wall,
    .random = f_random,
    .get = f_get,
    .create = f_create,
    .update = f_update,
    .cancel = f_cancel,
    .wake_at = f_wake_at,
    .gate = f_gate,
    .leading = f_leading,
    .holder = f_holder,
    .renewed = f_renewed,
    .note = f_note,
    .stopped = f_stopped,
};

static void
setup_params(int64_t lease, int64_t renew, int64_t retry, int release)
{
    memset(&F, 0, sizeof(F));
    F.now = 100000;
    F.wall = WALL0;
    F.wake = -1;
    F.close_sync = 1;
    struct le_params p = {
        .identity = ME,
        .lease_duration_ms = lease,
        .renew_deadline_ms = renew,
        .retry_period_ms = retry,
        .release_on_cancel = release,
    };
    le_init(&F.m, &p, &fake_ops, &F);
}

static void
setup(void)
{
    setup_params(LEASE_MS, RENEW_MS, RETRY_MS, 1);
}

/* Let ms pass, running the machine whenever its wake-up time comes. */
static void
advance(int64_t ms)
{
    ck_assert_msg(ms >= 0, "advance(%lld): the machine has no wake-up", (long long)ms);
    int64_t end = F.now + ms;
    while (F.wake >= 0 && F.wake <= end) {
        int64_t step = F.wake > F.now ? F.wake - F.now : 0;
        F.now += step;
        F.wall += step;
        int64_t before = F.wake;
        le_tick(&F.m);
        if (F.wake == before && F.wake <= F.now)
            ck_abort_msg("machine asked to wake at %lld again at %lld", (long long)before,
                         (long long)F.now);
    }
    F.wall += end - F.now;
    F.now = end;
}

static struct le_record
rec(const char *holder, int64_t dur, int64_t transitions, const char *renew)
{
    struct le_record r;
    memset(&r, 0, sizeof(r));
    snprintf(r.holder, sizeof(r.holder), "%s", holder);
    r.duration_s = dur;
    r.transitions = transitions;
    snprintf(r.acquire_time, sizeof(r.acquire_time), "2025-11-29T15:00:00.000000Z");
    snprintf(r.renew_time, sizeof(r.renew_time), "%s", renew);
    return r;
}

static void
reply_get(int status, const struct le_record *r, const char *rv)
{
    ck_assert_int_eq(F.inflight, LE_REQ_GET);
    F.inflight = LE_REQ_NONE;
    struct le_result res = {.status = status, .rec = r, .rv = rv};
    le_get_done(&F.m, &res);
}

/* Answer the write in flight; status 2xx echoes what was written. */
static void
reply_write(int status, const char *rv)
{
    ck_assert(F.inflight == LE_REQ_CREATE || F.inflight == LE_REQ_UPDATE);
    F.inflight = LE_REQ_NONE;
    struct le_record echo = F.written;
    struct le_result res = {.status = status,
                            .rec = status / 100 == 2 ? &echo : NULL,
                            .rv = rv,
                            .message = status == 409 ? "the object has been modified" : NULL};
    le_write_done(&F.m, &res);
}

/* Start and win against a missing Lease; returns with the gate open. */
static void
become_leader(void)
{
    le_start(&F.m);
    reply_get(404, NULL, NULL);
    reply_write(201, "10");
    ck_assert(le_is_leader(&F.m));
}

/* One successful renew round at the machine's next attempt. */
static void
renew_once(const char *rv_get, const char *rv_put)
{
    int gets = F.gets;
    advance(F.wake - F.now);
    ck_assert_int_eq(F.gets, gets + 1);
    struct le_record cur = F.written;
    reply_get(200, &cur, rv_get);
    ck_assert_int_eq(F.inflight, LE_REQ_UPDATE);
    reply_write(200, rv_put);
}

/* ------------------------------------------------------------------ */
/* Settings check                                                       */

static char reported[8][256];
static int nreported;

static void report_fn(plb_check *chk, const char *setting, const char *fmt, ...) PLB_PRINTF(3, 4);

static void
report_fn(plb_check *chk, const char *setting, const char *fmt, ...)
{
    (void)chk;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (nreported < 8)
        snprintf(reported[nreported++], sizeof(reported[0]), "%s: %s", setting, msg);
}

static int
run_check(int64_t lease, int64_t renew, int64_t retry)
{
    struct ld_config c = {.lease_name = "x",
                          .lease_duration_ms = lease,
                          .renew_deadline_ms = renew,
                          .retry_period_ms = retry,
                          .release_on_cancel = 1};
    nreported = 0;
    return ld_check(NULL, NULL, &c, report_fn);
}

START_TEST(check_lease_duration_greater_than_renew_deadline)
{
    ck_assert_int_eq(run_check(15000, 10000, 2000), 0);
    ck_assert_int_eq(run_check(10000, 10000, 2000), 1);
    ck_assert_str_eq(reported[0],
                     "lease_duration: must be greater than renew_deadline (10s), got 10s");
    ck_assert_int_eq(run_check(3000, 2000, 500), 0);
}
END_TEST

START_TEST(check_renew_deadline_greater_than_1_2_retry_period)
{
    /* 1.2 × 2s = 2.4s: equal is refused, as client-go refuses it. */
    ck_assert_int_eq(run_check(15000, 2400, 2000), 1);
    ck_assert_str_eq(reported[0],
                     "renew_deadline: must be greater than 1.2 × retry_period (2.4s), got 2.4s");
    ck_assert_int_eq(run_check(15000, 2401, 2000), 0);
    ck_assert_int_eq(run_check(3000, 600, 500), 1);
    ck_assert_str_eq(reported[0],
                     "renew_deadline: must be greater than 1.2 × retry_period (600ms), got 600ms");
}
END_TEST

START_TEST(check_positive_and_whole_seconds)
{
    ck_assert_int_eq(run_check(15000, 10000, 0), 1);
    ck_assert_str_eq(reported[0], "retry_period: must be greater than zero");
    ck_assert_int_eq(run_check(15500, 10000, 2000), 1);
    ck_assert_str_eq(reported[0], "lease_duration: must be a whole number of seconds (it is "
                                  "written as leaseDurationSeconds), got 15.5s");
}
END_TEST

/* ------------------------------------------------------------------ */
/* MicroTime                                                            */

START_TEST(microtime_is_rfc3339_micro_utc)
{
    char b[LE_TIME_MAX];
    ck_assert_int_eq(le_microtime(0, b, sizeof(b)), 0);
    ck_assert_str_eq(b, "1970-01-01T00:00:00.000000Z");
    ck_assert_int_eq(le_microtime(WALL0 + 123, b, sizeof(b)), 0);
    ck_assert_str_eq(b, "2025-11-29T15:04:05.123000Z");
    ck_assert_int_eq(le_microtime(-1, b, sizeof(b)), -1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Acquire                                                              */

START_TEST(acquire_attempts_at_once_on_start)
{
    le_start(&F.m);
    ck_assert_int_eq(F.gets, 1);
    ck_assert_int_eq(F.m.state, LE_CANDIDATE);
}
END_TEST

START_TEST(acquire_retries_every_retry_period_with_jitter_1_2)
{
    struct le_record other = rec("other", 15, 3, "t1");
    static const double rnds[] = {0.0, 0.5, 0.999};
    le_start(&F.m);
    for (size_t i = 0; i < 3; i++) {
        F.rnd = rnds[i];
        int64_t t = F.now;
        reply_get(200, &other, "5");
        ck_assert_int_eq(F.updates, 0);
        int64_t want = t + RETRY_MS + (int64_t)(rnds[i] * 1.2 * RETRY_MS);
        ck_assert_int_eq(F.wake, want);
        advance(want - F.now - 1);
        ck_assert_int_eq(F.gets, (int)i + 1);
        advance(1);
        ck_assert_int_eq(F.gets, (int)i + 2);
    }
}
END_TEST

START_TEST(missing_lease_is_created_holding_it)
{
    char ts[LE_TIME_MAX];
    le_start(&F.m);
    reply_get(404, NULL, NULL);
    ck_assert_int_eq(F.creates, 1);
    ck_assert_str_eq(F.written.holder, ME);
    ck_assert_int_eq(F.written.duration_s, 15);
    ck_assert_int_eq(F.written.transitions, 0);
    le_microtime(F.wall, ts, sizeof(ts));
    ck_assert_str_eq(F.written.acquire_time, ts);
    ck_assert_str_eq(F.written.renew_time, ts);
    reply_write(201, "7");
    ck_assert(le_is_leader(&F.m));
    ck_assert_int_eq(F.notes[LE_NOTE_CREATED], 1);
}
END_TEST

START_TEST(missing_namespace_is_reported)
{
    le_start(&F.m);
    reply_get(404, NULL, NULL);
    F.inflight = LE_REQ_NONE;
    struct le_result res = {.status = 404, .message = "namespaces \"nope\" not found"};
    le_write_done(&F.m, &res);
    ck_assert_int_eq(F.notes[LE_NOTE_NS_MISSING], 1);
    ck_assert(!le_is_leader(&F.m));
    ck_assert_int_eq(F.opens, 0);
    /* and it keeps trying */
    advance(RETRY_MS * 3);
    ck_assert_int_eq(F.gets, 2);
}
END_TEST

START_TEST(unexpired_holder_is_respected_until_observed_time_plus_its_duration)
{
    struct le_record other = rec("other", 15, 3, "t1");
    le_start(&F.m);
    int64_t first_seen = F.now;
    reply_get(200, &other, "5");
    /* The holder stops renewing; the same record keeps coming back. */
    while (F.now < first_seen + 15000) {
        advance(F.wake - F.now);
        if (F.now >= first_seen + 15000)
            break;
        reply_get(200, &other, "5");
        ck_assert_int_eq(F.updates, 0);
    }
    reply_get(200, &other, "5");
    ck_assert_int_eq(F.updates, 1);
    ck_assert_str_eq(F.written.holder, ME);
}
END_TEST

START_TEST(observed_time_restarts_when_the_record_changes)
{
    struct le_record a = rec("other", 15, 3, "t1"), b = rec("other", 15, 3, "t2");
    le_start(&F.m);
    int64_t t0 = F.now;
    reply_get(200, &a, "5");
    for (;;) {
        advance(F.wake - F.now);
        if (F.now >= t0 + 10000)
            break;
        reply_get(200, &a, "5");
    }
    int64_t changed_at = F.now;
    reply_get(200, &b, "6"); /* renewed by the holder */
    ck_assert_int_eq(F.m.observed_ms, changed_at);
    /* Past t0 + 15 s but not changed_at + 15 s: still respected. */
    int respected_past_first = 0;
    for (;;) {
        advance(F.wake - F.now);
        if (F.now >= changed_at + 15000)
            break;
        reply_get(200, &b, "6");
        ck_assert_int_eq(F.updates, 0);
        ck_assert_int_eq(F.m.observed_ms, changed_at);
        respected_past_first += F.now >= t0 + 15000;
    }
    ck_assert_int_gt(respected_past_first, 0);
    reply_get(200, &b, "6");
    ck_assert_int_eq(F.updates, 1);
}
END_TEST

START_TEST(takeover_uses_the_lease_own_duration)
{
    /* The Lease says 5 s although we would write 15 s. */
    struct le_record other = rec("other", 5, 0, "t1");
    le_start(&F.m);
    int64_t t0 = F.now;
    reply_get(200, &other, "5");
    while (F.updates == 0) {
        advance(F.wake - F.now);
        reply_get(200, &other, "5");
    }
    ck_assert(F.now >= t0 + 5000);
    ck_assert(F.now < t0 + 5000 + 2200 + 1);
    ck_assert_int_eq(F.written.duration_s, 15);
}
END_TEST

START_TEST(candidate_attempts_when_the_observed_lease_expires)
{
    /* Jitter would put the attempt after the expiry: it comes at the
     * expiry instead. */
    struct le_record other = rec("other", 3, 0, "t1");
    F.rnd = 0.99;
    le_start(&F.m);
    int64_t t0 = F.now;
    reply_get(200, &other, "5"); /* next: t0 + 2000 + 2376 > t0 + 3000 */
    ck_assert_int_eq(F.wake, t0 + 3000);
    advance(3000);
    ck_assert_int_eq(F.gets, 2);
    reply_get(200, &other, "5");
    ck_assert_int_eq(F.updates, 1);
}
END_TEST

START_TEST(empty_holder_is_taken_at_once)
{
    struct le_record released = rec("", 1, 4, "t1");
    le_start(&F.m);
    reply_get(200, &released, "9");
    ck_assert_int_eq(F.updates, 1);
    ck_assert_str_eq(F.written_rv, "9");
}
END_TEST

START_TEST(takeover_increments_transitions_and_sets_acquire_time)
{
    char ts[LE_TIME_MAX];
    struct le_record released = rec("", 1, 4, "t1");
    le_start(&F.m);
    advance(1234);
    reply_get(200, &released, "9");
    le_microtime(F.wall, ts, sizeof(ts));
    ck_assert_int_eq(F.written.transitions, 5);
    ck_assert_str_eq(F.written.acquire_time, ts);
    ck_assert_str_eq(F.written.renew_time, ts);
    reply_write(200, "10");
    ck_assert(le_is_leader(&F.m));
}
END_TEST

START_TEST(renew_keeps_acquire_time_and_transitions)
{
    struct le_record released = rec("", 1, 4, "t1");
    le_start(&F.m);
    reply_get(200, &released, "9");
    char acquired[LE_TIME_MAX];
    snprintf(acquired, sizeof(acquired), "%s", F.written.acquire_time);
    reply_write(200, "10");
    advance(5000);
    renew_once("10", "11");
    ck_assert_int_eq(F.written.transitions, 5);
    ck_assert_str_eq(F.written.acquire_time, acquired);
    ck_assert_str_ne(F.written.renew_time, acquired);
}
END_TEST

START_TEST(put_carries_the_resource_version_of_the_get)
{
    become_leader();
    advance(F.wake - F.now);
    struct le_record cur = F.written;
    reply_get(200, &cur, "44");
    ck_assert_int_eq(F.inflight, LE_REQ_UPDATE);
    ck_assert_str_eq(F.written_rv, "44");
}
END_TEST

START_TEST(conflict_409_loses_the_race)
{
    struct le_record released = rec("", 1, 4, "t1");
    F.rnd = 0.25;
    le_start(&F.m);
    reply_get(200, &released, "9");
    int64_t t = F.now;
    reply_write(409, NULL);
    ck_assert(!le_is_leader(&F.m));
    ck_assert_int_eq(F.opens, 0);
    ck_assert_int_eq(F.notes[LE_NOTE_CONFLICT], 1);
    ck_assert_int_eq(F.wake, t + RETRY_MS + (int64_t)(0.25 * 1.2 * RETRY_MS));
}
END_TEST

START_TEST(candidate_request_times_out_after_renew_deadline)
{
    le_start(&F.m);
    advance(RENEW_MS - 1);
    ck_assert_int_eq(F.cancels, 0);
    advance(1);
    ck_assert_int_eq(F.cancels, 1);
    ck_assert_int_eq(F.notes[LE_NOTE_ATTEMPT_FAILED], 1);
    ck_assert_int_eq(F.m.state, LE_CANDIDATE);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Renew and loss                                                       */

/* Answer the write in flight with 2xx and this record (NULL: an answer
 * that is not a Lease). */
static void
reply_write_with(int status, const struct le_record *r, const char *message)
{
    ck_assert(F.inflight == LE_REQ_CREATE || F.inflight == LE_REQ_UPDATE);
    F.inflight = LE_REQ_NONE;
    struct le_result res = {.status = status, .rec = r, .rv = "30", .message = message};
    le_write_done(&F.m, &res);
}

/* A 2xx write answer is checked before leadership is assumed: not a Lease
 * (an HTML page, fields of the wrong types), another holder, or another
 * renewTime than the one sent is a failed attempt, and the gate stays
 * shut. */
START_TEST(write_answer_is_checked_before_leading)
{
    le_start(&F.m);
    reply_get(404, NULL, NULL);
    reply_write_with(200, NULL, "the answer is not a JSON object");
    ck_assert(!le_is_leader(&F.m));
    ck_assert_int_eq(F.opens, 0);
    ck_assert_int_eq(F.notes[LE_NOTE_ATTEMPT_FAILED], 1);

    advance(F.wake - F.now);
    reply_get(404, NULL, NULL);
    struct le_record other = F.written;
    snprintf(other.holder, sizeof(other.holder), "someone-else");
    reply_write_with(201, &other, NULL);
    ck_assert(!le_is_leader(&F.m));
    ck_assert_int_eq(F.notes[LE_NOTE_ATTEMPT_FAILED], 2);

    advance(F.wake - F.now);
    reply_get(404, NULL, NULL);
    struct le_record stale = F.written;
    snprintf(stale.renew_time, sizeof(stale.renew_time), "2001-01-01T00:00:00.000000Z");
    reply_write_with(201, &stale, NULL);
    ck_assert(!le_is_leader(&F.m));
    ck_assert_int_eq(F.notes[LE_NOTE_ATTEMPT_FAILED], 3);
    ck_assert_int_eq(F.opens, 0);
    ck_assert_int_eq(F.notes[LE_NOTE_CREATED], 0);

    /* The real answer: leading. */
    advance(F.wake - F.now);
    reply_get(404, NULL, NULL);
    reply_write(201, "31");
    ck_assert(le_is_leader(&F.m));
    ck_assert_int_eq(F.opens, 1);

    /* A leader's renew answered with garbage is a failed renew: still
     * leading until renew_deadline, then lost. */
    advance(F.wake - F.now);
    struct le_record cur = F.written;
    reply_get(200, &cur, "32");
    reply_write_with(200, NULL, "the Lease has a field of the wrong type");
    ck_assert(le_is_leader(&F.m));
    ck_assert_int_eq(F.notes[LE_NOTE_ATTEMPT_FAILED], 4);
}
END_TEST

START_TEST(renew_every_retry_period)
{
    become_leader();
    for (int i = 0; i < 5; i++) {
        int64_t done_at = F.now;
        ck_assert_int_eq(F.wake, done_at + RETRY_MS);
        advance(RETRY_MS - 1);
        ck_assert_int_eq(F.inflight, LE_REQ_NONE);
        advance(1);
        ck_assert_int_eq(F.inflight, LE_REQ_GET);
        struct le_record cur = F.written;
        reply_get(200, &cur, "20");
        reply_write(200, "21");
    }
    ck_assert(le_is_leader(&F.m));
    ck_assert_int_eq(F.renews, 6);
}
END_TEST

START_TEST(renew_retries_until_renew_deadline_then_loses)
{
    become_leader();
    int64_t last_ok_sent = F.last_req_at; /* the create */
    int failures = 0;
    while (le_is_leader(&F.m)) {
        advance(F.wake - F.now);
        if (!le_is_leader(&F.m))
            break;
        ck_assert_int_eq(F.inflight, LE_REQ_GET);
        struct le_result res = {.status = 500, .message = "etcdserver: request timed out"};
        F.inflight = LE_REQ_NONE;
        le_get_done(&F.m, &res);
        failures++;
    }
    /* attempts at +2, +4, +6, +8 s; the deadline at +10 s */
    ck_assert_int_eq(failures, 4);
    ck_assert_int_eq(F.closed_at, last_ok_sent + RENEW_MS);
    ck_assert_int_eq(F.notes[LE_NOTE_LOST_DEADLINE], 1);
    ck_assert_int_eq(F.leading, 0);
}
END_TEST

START_TEST(in_flight_renew_is_cancelled_at_the_deadline)
{
    F.close_sync = 0;
    become_leader();
    int64_t sent = F.last_req_at;
    advance(F.wake - F.now); /* a GET goes out and hangs */
    ck_assert_int_eq(F.inflight, LE_REQ_GET);
    advance(sent + RENEW_MS - F.now - 1);
    ck_assert_int_eq(F.cancels, 0);
    ck_assert(le_is_leader(&F.m));
    advance(1);
    ck_assert_int_eq(F.cancels, 1);
    ck_assert_int_eq(F.closes, 1);
    ck_assert(!le_is_leader(&F.m));
    /* A late answer is ignored. */
    struct le_record cur = F.written;
    struct le_result late = {.status = 200, .rec = &cur, .rv = "99"};
    le_get_done(&F.m, &late);
    ck_assert_int_eq(F.updates, 0);
}
END_TEST

START_TEST(gate_closes_before_another_replica_could_take_over)
{
    /* A slow renew that still counts: sent at s, answered just before the
     * previous deadline; another replica observes it no earlier than s and
     * takes over no earlier than s + lease_duration. */
    become_leader();
    int64_t first_deadline = F.last_req_at + RENEW_MS;
    advance(F.wake - F.now);
    struct le_record cur = F.written;
    reply_get(200, &cur, "11");
    int64_t sent = F.last_req_at;
    advance(first_deadline - F.now - 1);
    reply_write(200, "12");
    ck_assert(le_is_leader(&F.m));
    /* Nothing succeeds from now on. */
    while (le_is_leader(&F.m)) {
        advance(F.wake - F.now);
        if (le_is_leader(&F.m) && F.inflight == LE_REQ_GET) {
            struct le_result res = {.status = 0, .message = "connection refused"};
            F.inflight = LE_REQ_NONE;
            le_get_done(&F.m, &res);
        }
    }
    ck_assert_int_eq(F.closed_at, sent + RENEW_MS);
    ck_assert(F.closed_at < sent + LEASE_MS);
}
END_TEST

START_TEST(answer_handled_after_the_deadline_loses)
{
    /* The process was stopped (SIGSTOP) with a renew in flight; on resume
     * its successful answer is handled before the timer: still lost. */
    F.close_sync = 0;
    become_leader();
    int64_t deadline = F.last_req_at + RENEW_MS;
    advance(F.wake - F.now);
    struct le_record cur = F.written;
    reply_get(200, &cur, "11");
    ck_assert_int_eq(F.inflight, LE_REQ_UPDATE);
    F.wall += deadline + 5000 - F.now; /* frozen: no tick ran */
    F.now = deadline + 5000;
    reply_write(200, "12");
    ck_assert(!le_is_leader(&F.m));
    ck_assert_int_eq(F.closes, 1);
    ck_assert_int_eq(F.cancels, 0);
    ck_assert_int_eq(F.notes[LE_NOTE_LOST_DEADLINE], 1);
}
END_TEST

START_TEST(gate_opens_when_won_and_closes_when_lost)
{
    become_leader();
    ck_assert_int_eq(F.opens, 1);
    ck_assert_int_eq(F.closes, 0);
    ck_assert_int_eq(F.leading, 1);
    advance(F.wake - F.now);
    struct le_record other = rec("thief", 15, 9, "t9");
    reply_get(200, &other, "30");
    ck_assert_int_eq(F.closes, 1);
    ck_assert_int_eq(F.leading, 0);
}
END_TEST

START_TEST(leader_reading_another_holder_loses_at_once)
{
    become_leader();
    advance(F.wake - F.now);
    int64_t t = F.now;
    struct le_record other = rec("thief", 15, 9, "t9");
    reply_get(200, &other, "30");
    ck_assert_int_eq(F.notes[LE_NOTE_LOST_HOLDER], 1);
    ck_assert_int_eq(F.closed_at, t);
    ck_assert_int_eq(F.updates, 0);
}
END_TEST

START_TEST(leader_renew_conflict_loses_at_once)
{
    become_leader();
    advance(F.wake - F.now);
    struct le_record cur = F.written;
    reply_get(200, &cur, "11");
    int64_t t = F.now;
    reply_write(409, NULL);
    ck_assert_int_eq(F.notes[LE_NOTE_LOST_CONFLICT], 1);
    ck_assert_int_eq(F.closed_at, t);
}
END_TEST

START_TEST(new_term_starts_only_after_the_gated_stop_completed)
{
    F.close_sync = 0; /* the gated instances take their time */
    become_leader();
    advance(F.wake - F.now);
    struct le_record other = rec("", 1, 2, "t9");
    reply_get(200, &other, "30"); /* released under us: lost */
    ck_assert_int_eq(F.closes, 1);
    int gets = F.gets;
    advance(60000);
    ck_assert_int_eq(F.gets, gets);
    ck_assert_int_eq(F.m.state, LE_CLOSING);
    le_gate_closed(&F.m);
    ck_assert_int_eq(F.gets, gets + 1);
}
END_TEST

START_TEST(election_reenters_after_a_loss)
{
    become_leader();
    /* Lose by deadline (API unreachable) ... */
    while (le_is_leader(&F.m)) {
        advance(F.wake - F.now);
        if (le_is_leader(&F.m) && F.inflight == LE_REQ_GET) {
            struct le_result res = {.status = 503};
            F.inflight = LE_REQ_NONE;
            le_get_done(&F.m, &res);
        }
    }
    ck_assert_int_eq(F.m.term, 1);
    /* ... the gate closed synchronously, and a new term campaigns at once:
     * the Lease still names us, so we renew it without a transition. */
    ck_assert_int_eq(F.inflight, LE_REQ_GET);
    struct le_record mine = F.written;
    reply_get(200, &mine, "40");
    ck_assert_int_eq(F.written.transitions, mine.transitions);
    reply_write(200, "41");
    ck_assert(le_is_leader(&F.m));
    ck_assert_int_eq(F.m.term, 2);
    ck_assert_int_eq(F.opens, 2);
    ck_assert_int_eq(F.closes, 1);
}
END_TEST

START_TEST(holder_changes_are_reported)
{
    struct le_record a = rec("a", 15, 0, "t1"), a2 = rec("a", 15, 0, "t2"),
                     b = rec("b", 15, 1, "t3");
    le_start(&F.m);
    reply_get(200, &a, "1");
    ck_assert_int_eq(F.holder_changes, 1);
    ck_assert_str_eq(F.holder_new, "a");
    advance(F.wake - F.now);
    reply_get(200, &a2, "2"); /* renewed: same holder */
    ck_assert_int_eq(F.holder_changes, 1);
    advance(F.wake - F.now);
    reply_get(200, &b, "3");
    ck_assert_int_eq(F.holder_changes, 2);
    ck_assert_str_eq(F.holder_old, "a");
    ck_assert_str_eq(F.holder_new, "b");
}
END_TEST

START_TEST(renewed_reports_wall_time)
{
    become_leader();
    ck_assert_int_eq(F.renews, 1);
    ck_assert_int_eq(F.renew_wall, F.wall);
    advance(500);
    renew_once("11", "12");
    ck_assert_int_eq(F.renews, 2);
    ck_assert_int_eq(F.renew_wall, F.wall);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Stop and release                                                     */

START_TEST(stop_closes_the_gate_waits_then_releases)
{
    F.close_sync = 0;
    become_leader();
    renew_once("11", "12");
    int updates = F.updates;
    le_stop(&F.m, 30000);
    ck_assert_int_eq(F.closes, 1);
    ck_assert_int_eq(F.leading, 0);
    advance(3000);
    ck_assert_int_eq(F.updates, updates); /* no release before the gated stop */
    ck_assert_int_eq(F.stopped, 0);
    le_gate_closed(&F.m);
    ck_assert_int_eq(F.updates, updates + 1);
    ck_assert_str_eq(F.written.holder, "");
    ck_assert_int_eq(F.written.duration_s, 1);
    ck_assert_int_eq(F.written.transitions, 0);
    ck_assert_str_eq(F.written_rv, "12");
    reply_write(200, "13");
    ck_assert_int_eq(F.stopped, 1);
    ck_assert_int_eq(F.notes[LE_NOTE_RELEASED], 1);
    ck_assert_int_eq(F.wake, -1);
}
END_TEST

START_TEST(release_conflict_rereads_and_releases_again)
{
    /* The renew in flight at stop landed (rv 13) though it was cancelled:
     * the release on rv 12 conflicts, the Lease still names us. */
    become_leader();
    renew_once("11", "12");
    advance(F.wake - F.now);
    struct le_record cur = F.written;
    reply_get(200, &cur, "12");
    ck_assert_int_eq(F.inflight, LE_REQ_UPDATE);
    struct le_record landed = F.written;
    le_stop(&F.m, 30000);
    ck_assert_int_eq(F.cancels, 1);
    ck_assert_int_eq(F.inflight, LE_REQ_UPDATE);
    ck_assert_str_eq(F.written_rv, "12");
    reply_write(409, NULL);
    ck_assert_int_eq(F.inflight, LE_REQ_GET);
    reply_get(200, &landed, "13");
    ck_assert_int_eq(F.inflight, LE_REQ_UPDATE);
    ck_assert_str_eq(F.written.holder, "");
    ck_assert_str_eq(F.written_rv, "13");
    reply_write(200, "14");
    ck_assert_int_eq(F.stopped, 1);
    ck_assert_int_eq(F.notes[LE_NOTE_RELEASED], 1);
}
END_TEST

START_TEST(release_conflict_with_another_holder_releases_nothing)
{
    become_leader();
    le_stop(&F.m, 30000);
    reply_write(409, NULL);
    struct le_record other = rec("other", 15, 1, "t5");
    reply_get(200, &other, "20");
    ck_assert_int_eq(F.inflight, LE_REQ_NONE);
    ck_assert_int_eq(F.updates, 1);
    ck_assert_int_eq(F.stopped, 1);
    ck_assert_int_eq(F.notes[LE_NOTE_RELEASED], 0);
}
END_TEST

START_TEST(stop_without_release_on_cancel_leaves_the_lease)
{
    setup_params(LEASE_MS, RENEW_MS, RETRY_MS, 0);
    become_leader();
    int updates = F.updates;
    le_stop(&F.m, 30000);
    ck_assert_int_eq(F.closes, 1);
    ck_assert_int_eq(F.updates, updates);
    ck_assert_int_eq(F.stopped, 1);
}
END_TEST

START_TEST(release_is_bounded_by_the_grace)
{
    become_leader();
    le_stop(&F.m, 5000);
    ck_assert_int_eq(F.inflight, LE_REQ_UPDATE);
    advance(4499);
    ck_assert_int_eq(F.stopped, 0);
    advance(1); /* 5 s grace minus a tenth */
    ck_assert_int_eq(F.cancels, 1);
    ck_assert_int_eq(F.stopped, 1);
    ck_assert_int_eq(F.notes[LE_NOTE_RELEASE_FAILED], 1);
}
END_TEST

START_TEST(stop_skips_the_release_when_gated_stops_run_late)
{
    F.close_sync = 0;
    become_leader();
    int updates = F.updates;
    le_stop(&F.m, 2000);
    advance(1800);
    ck_assert_int_eq(F.stopped, 1);
    ck_assert_int_eq(F.updates, updates);
    ck_assert_int_eq(F.notes[LE_NOTE_RELEASE_SKIPPED], 1);
    le_gate_closed(&F.m); /* late: ignored */
    ck_assert_int_eq(F.updates, updates);
}
END_TEST

START_TEST(candidate_stop_cancels_and_releases_nothing)
{
    struct le_record other = rec("other", 15, 0, "t1");
    le_start(&F.m);
    reply_get(200, &other, "3");
    advance(F.wake - F.now);
    ck_assert_int_eq(F.inflight, LE_REQ_GET);
    le_stop(&F.m, 30000);
    ck_assert_int_eq(F.cancels, 1);
    ck_assert_int_eq(F.updates, 0);
    ck_assert_int_eq(F.closes, 0);
    ck_assert_int_eq(F.stopped, 1);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("leader-machine");
    TCase *tc = tcase_create("rules");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, check_lease_duration_greater_than_renew_deadline);
    tcase_add_test(tc, check_renew_deadline_greater_than_1_2_retry_period);
    tcase_add_test(tc, check_positive_and_whole_seconds);
    tcase_add_test(tc, microtime_is_rfc3339_micro_utc);
    tcase_add_test(tc, acquire_attempts_at_once_on_start);
    tcase_add_test(tc, acquire_retries_every_retry_period_with_jitter_1_2);
    tcase_add_test(tc, missing_lease_is_created_holding_it);
    tcase_add_test(tc, missing_namespace_is_reported);
    tcase_add_test(tc, unexpired_holder_is_respected_until_observed_time_plus_its_duration);
    tcase_add_test(tc, observed_time_restarts_when_the_record_changes);
    tcase_add_test(tc, takeover_uses_the_lease_own_duration);
    tcase_add_test(tc, candidate_attempts_when_the_observed_lease_expires);
    tcase_add_test(tc, empty_holder_is_taken_at_once);
    tcase_add_test(tc, takeover_increments_transitions_and_sets_acquire_time);
    tcase_add_test(tc, renew_keeps_acquire_time_and_transitions);
    tcase_add_test(tc, put_carries_the_resource_version_of_the_get);
    tcase_add_test(tc, conflict_409_loses_the_race);
    tcase_add_test(tc, candidate_request_times_out_after_renew_deadline);
    tcase_add_test(tc, renew_every_retry_period);
    tcase_add_test(tc, write_answer_is_checked_before_leading);
    tcase_add_test(tc, renew_retries_until_renew_deadline_then_loses);
    tcase_add_test(tc, in_flight_renew_is_cancelled_at_the_deadline);
    tcase_add_test(tc, gate_closes_before_another_replica_could_take_over);
    tcase_add_test(tc, answer_handled_after_the_deadline_loses);
    tcase_add_test(tc, gate_opens_when_won_and_closes_when_lost);
    tcase_add_test(tc, leader_reading_another_holder_loses_at_once);
    tcase_add_test(tc, leader_renew_conflict_loses_at_once);
    tcase_add_test(tc, new_term_starts_only_after_the_gated_stop_completed);
    tcase_add_test(tc, election_reenters_after_a_loss);
    tcase_add_test(tc, holder_changes_are_reported);
    tcase_add_test(tc, renewed_reports_wall_time);
    tcase_add_test(tc, stop_closes_the_gate_waits_then_releases);
    tcase_add_test(tc, release_conflict_rereads_and_releases_again);
    tcase_add_test(tc, release_conflict_with_another_holder_releases_nothing);
    tcase_add_test(tc, stop_without_release_on_cancel_leaves_the_lease);
    tcase_add_test(tc, release_is_bounded_by_the_grace);
    tcase_add_test(tc, stop_skips_the_release_when_gated_stops_run_late);
    tcase_add_test(tc, candidate_stop_cancels_and_releases_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
