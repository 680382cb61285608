/*
 * Check suite for core/worker.c: worker loops with their own bases,
 * messages between them and the main loop, and snapshots released only
 * once every worker has moved on. Every wait is bounded; what a test waits
 * for is signalled by the code under test, never guessed from time.
 */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "reactor.h"
#include "worker.h"
#include "testutil.h"

static struct event_base *base;
static struct core_workers *ws;
static pthread_t main_thread;

static void
setup(void)
{
    main_thread = pthread_self();
    base = core_event_base_new();
    ck_assert_ptr_nonnull(base);
    int err = 1;
    ws = core_workers_start(base, 2, &err);
    ck_assert_ptr_nonnull(ws);
    ck_assert_int_eq(err, 0);
}

static void
teardown(void)
{
    core_workers_stop(ws);
    ws = NULL;
    event_base_free(base);
}

/* Run the main loop until *counter reaches n (set by messages), at most 5 s. */
static void
run_until_count(atomic_int *counter, int n)
{
    long long end = core_now_ms() + 5000;
    while (atomic_load(counter) < n) {
        ck_assert_msg(core_now_ms() < end, "timed out");
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (atomic_load(counter) < n)
            sched_yield();
    }
}

/* Run the main loop until *flag is set (by a message), at most 5 s. */
static void
run_until(atomic_int *flag)
{
    run_until_count(flag, 1);
}

START_TEST(start_rejects_fewer_than_two_or_more_than_the_maximum)
{
    int err = 0;
    ck_assert_ptr_null(core_workers_start(base, 1, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(core_workers_start(base, CORE_WORKERS_MAX + 1, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(core_workers_start(NULL, 2, &err));
    ck_assert_int_eq(err, -EINVAL);
}
END_TEST

START_TEST(the_default_is_the_cpus_the_process_may_run_on)
{
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    unsigned want = (unsigned)CPU_COUNT(&set);
    if (want > CORE_WORKERS_MAX)
        want = CORE_WORKERS_MAX;
    ck_assert_uint_eq(core_workers_default(), want);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Messages                                                                 */

struct echo {
    int index;   /* the worker that ran it */
    int on_main; /* the reply ran on the main thread */
    int other;   /* the request ran on another thread */
    atomic_int done;
};

static void
echo_back(void *arg)
{
    struct echo *e = arg;
    e->on_main = pthread_equal(pthread_self(), main_thread) && core_worker_self() == NULL;
    atomic_store(&e->done, 1);
}

static void
echo_run(void *arg)
{
    struct echo *e = arg;
    plb_worker *me = core_worker_self();
    e->index = me ? (int)core_worker_index(me) : -1;
    e->other = !pthread_equal(pthread_self(), main_thread);
    ck_assert_int_eq(core_post(ws, NULL, echo_back, e), 0);
}

START_TEST(a_message_runs_on_its_worker_and_the_reply_on_the_main_loop)
{
    ck_assert_uint_eq(core_workers_count(ws), 2);
    ck_assert_ptr_null(core_worker_self());
    for (size_t i = 0; i < 2; i++) {
        struct echo e = {.index = -2};
        plb_worker *w = core_worker_at(ws, i);
        ck_assert_ptr_nonnull(w);
        ck_assert_uint_eq(core_worker_index(w), i);
        ck_assert_int_eq(core_post(ws, w, echo_run, &e), 0);
        run_until(&e.done);
        ck_assert_int_eq(e.index, (int)i);
        ck_assert(e.other);
        ck_assert(e.on_main);
    }
    ck_assert_ptr_null(core_worker_at(ws, 2));
}
END_TEST

#define SEQ_N 2000

struct seq {
    int next; /* worker side */
    int bad;
    atomic_int done;
};

static void
seq_done(void *arg)
{
    atomic_store(&((struct seq *)arg)->done, 1);
}

/* A message that sets the flag it carries. */
static void
set_flag(void *arg)
{
    atomic_store((atomic_int *)arg, 1);
}

struct seq_msg {
    struct seq *s;
    int n;
};

static void
seq_run(void *arg)
{
    struct seq_msg *m = arg;
    struct seq *s = m->s;
    if (m->n != s->next)
        s->bad++;
    s->next = m->n + 1;
    if (m->n == SEQ_N - 1)
        ck_assert_int_eq(core_post(ws, NULL, seq_done, s), 0);
    free(m);
}

START_TEST(messages_from_one_thread_run_in_the_order_posted)
{
    static struct seq s;
    memset(&s, 0, sizeof(s));
    plb_worker *w = core_worker_at(ws, 1);
    for (int i = 0; i < SEQ_N; i++) {
        struct seq_msg *m = malloc(sizeof(*m));
        ck_assert_ptr_nonnull(m);
        m->s = &s;
        m->n = i;
        ck_assert_int_eq(core_post(ws, w, seq_run, m), 0);
    }
    run_until(&s.done);
    ck_assert_int_eq(s.bad, 0);
    ck_assert_int_eq(s.next, SEQ_N);
}
END_TEST

static atomic_int counted;

static void
count_one(void *arg)
{
    (void)arg;
    atomic_fetch_add(&counted, 1);
}

START_TEST(stopping_runs_what_was_posted_before)
{
    atomic_store(&counted, 0);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(core_post(ws, core_worker_at(ws, i % 2), count_one, NULL), 0);
    core_workers_stop(ws);
    ws = NULL;
    ck_assert_int_eq(atomic_load(&counted), 100);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Timers and watches on a worker's own base                                */

struct tick {
    plb_timer *t;
    int fires;
    int thread_ok;
    atomic_int done;
};

static void
tick_fired(plb_timer *t, void *arg)
{
    struct tick *k = arg;
    k->thread_ok = core_worker_self() == core_worker_at(ws, 0);
    if (++k->fires == 3) {
        core_timer_free(t);
        ck_assert_int_eq(core_post(ws, NULL, set_flag, &k->done), 0);
    }
}

static void
tick_start(void *arg)
{
    struct tick *k = arg;
    k->t = core_timer_new(core_worker_base(core_worker_self()), tick_fired, k);
    ck_assert_ptr_nonnull(k->t);
    ck_assert_int_eq(core_timer_arm(k->t, 1, 2, 0), 0);
}

START_TEST(a_timer_made_on_a_worker_fires_on_that_worker)
{
    struct tick k = {0};
    ck_assert_int_eq(core_post(ws, core_worker_at(ws, 0), tick_start, &k), 0);
    run_until(&k.done);
    ck_assert_int_eq(k.fires, 3);
    ck_assert(k.thread_ok);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                */

#define MAGIC 0x5a5a5a5au

struct snap {
    unsigned magic;
    int value;
    atomic_int *released;
};

static void
snap_release(void *p)
{
    struct snap *s = p;
    ck_assert(pthread_equal(pthread_self(), main_thread));
    s->magic = 0;
    if (s->released)
        atomic_fetch_add(s->released, 1);
    free(s);
}

static struct snap *
snap_new(int value, atomic_int *released)
{
    struct snap *s = malloc(sizeof(*s));
    ck_assert_ptr_nonnull(s);
    s->magic = MAGIC;
    s->value = value;
    s->released = released;
    return s;
}

/* A worker's event that its owner never freed (a module whose stop did
 * not finish within its grace): made on the worker, left pending. */
struct leftover {
    struct event *ev;
    atomic_int made;
};

static void
never_fires(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    ck_abort_msg("a joined worker ran its loop");
}

static void
make_leftover(void *arg)
{
    struct leftover *l = arg;
    struct timeval tv = {3600, 0};
    l->ev = evtimer_new(core_worker_base(core_worker_self()), never_fires, l);
    ck_assert_ptr_nonnull(l->ev);
    ck_assert_int_eq(evtimer_add(l->ev, &tv), 0);
    ck_assert_int_eq(core_post(ws, NULL, set_flag, &l->made), 0);
}

START_TEST(after_the_join_the_main_loop_frees_what_was_left_on_a_worker)
{
    struct leftover l = {0};
    atomic_int released = 0;
    plb_snapshot *slot = core_snapshot_new(ws);
    ck_assert_ptr_nonnull(slot);
    ck_assert_int_eq(core_snapshot_publish(slot, snap_new(1, &released), snap_release), 0);
    ck_assert_int_eq(core_post(ws, core_worker_at(ws, 1), make_leftover, &l), 0);
    run_until(&l.made);
    core_workers_join(ws);
    core_workers_join(ws); /* once is enough; again is harmless */
    /* No thread runs the worker's loop, whose base is still there: the
     * event is freed from the main thread (ASan and TSan check it). */
    ck_assert_int_eq(core_post(ws, core_worker_at(ws, 1), make_leftover, &l), -ESHUTDOWN);
    event_free(l.ev);
    /* A snapshot its owner frees after the join: released at once. */
    ck_assert_int_eq(core_snapshot_publish(slot, snap_new(2, &released), snap_release), 0);
    ck_assert_int_eq(atomic_load(&released), 1);
    core_snapshot_free(slot);
    ck_assert_int_eq(atomic_load(&released), 2);
    ck_assert_uint_eq(core_snapshots_retired(ws), 0);
}
END_TEST

/* A worker inside one callback, holding a snapshot it read. */
struct holder {
    plb_snapshot *slot;
    atomic_int holding, let_go, value, done;
};

static void
hold(void *arg)
{
    struct holder *h = arg;
    const struct snap *s = core_snapshot_get(h->slot);
    atomic_store(&h->holding, 1);
    while (!atomic_load(&h->let_go))
        sched_yield();
    /* Still valid: this pass has not ended. */
    atomic_store(&h->value, s && s->magic == MAGIC ? s->value : -1);
    ck_assert_int_eq(core_post(ws, NULL, set_flag, &h->done), 0);
}

START_TEST(a_snapshot_is_released_only_after_every_worker_moved_on)
{
    static atomic_int released;
    atomic_store(&released, 0);
    plb_snapshot *slot = core_snapshot_new(ws);
    ck_assert_ptr_nonnull(slot);
    ck_assert_ptr_null(core_snapshot_get(slot));
    ck_assert_int_eq(core_snapshot_publish(slot, snap_new(1, &released), snap_release), 0);

    static struct holder h;
    memset(&h, 0, sizeof(h));
    h.slot = slot;
    ck_assert_int_eq(core_post(ws, core_worker_at(ws, 1), hold, &h), 0);
    while (!atomic_load(&h.holding))
        sched_yield();
    /* Worker 1 holds snapshot 1 inside its callback: publishing 2 retires
     * 1, and however long the main loop runs, 1 stays. */
    ck_assert_int_eq(core_snapshot_publish(slot, snap_new(2, &released), snap_release), 0);
    ck_assert_int_eq(((const struct snap *)core_snapshot_get(slot))->value, 2);
    long long until = core_now_ms() + 100;
    while (core_now_ms() < until)
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert_int_eq(atomic_load(&released), 0);
    ck_assert_uint_eq(core_snapshots_retired(ws), 1);
    atomic_store(&h.let_go, 1);
    run_until(&h.done);
    ck_assert_int_eq(atomic_load(&h.value), 1);
    /* Its pass ended: 1 goes (the idle worker 0 was woken to move on). */
    run_until(&released);
    ck_assert_uint_eq(core_snapshots_retired(ws), 0);
    core_snapshot_free(slot);
    /* 2 is released when the set stops at the latest. */
    core_workers_stop(ws);
    ws = NULL;
    ck_assert_int_eq(atomic_load(&released), 2);
}
END_TEST

/* Workers read the slot on a fast timer while the main loop publishes: each
 * read sees intact data (a released one is poisoned and freed: ASan and
 * the magic check would see it). */
struct reader {
    plb_snapshot *slot;
    plb_timer *t;
    atomic_int stop, reads, bad, done;
};

static void
read_tick(plb_timer *t, void *arg)
{
    struct reader *r = arg;
    const struct snap *s = core_snapshot_get(r->slot);
    if (s && s->magic != MAGIC)
        atomic_fetch_add(&r->bad, 1);
    atomic_fetch_add(&r->reads, 1);
    if (atomic_load(&r->stop)) {
        core_timer_free(t);
        ck_assert_int_eq(core_post(ws, NULL, set_flag, &r->done), 0);
    }
}

static void
read_start(void *arg)
{
    struct reader *r = arg;
    r->t = core_timer_new(core_worker_base(core_worker_self()), read_tick, r);
    ck_assert_ptr_nonnull(r->t);
    ck_assert_int_eq(core_timer_arm(r->t, 0, 1, 0), 0);
}

START_TEST(workers_reading_while_the_main_loop_publishes_see_intact_data)
{
    static atomic_int released;
    atomic_store(&released, 0);
    plb_snapshot *slot = core_snapshot_new(ws);
    ck_assert_ptr_nonnull(slot);
    static struct reader r[2];
    memset(r, 0, sizeof(r));
    for (int i = 0; i < 2; i++) {
        r[i].slot = slot;
        ck_assert_int_eq(core_post(ws, core_worker_at(ws, (size_t)i), read_start, &r[i]), 0);
    }
    for (int n = 0; n < 300; n++) {
        ck_assert_int_eq(core_snapshot_publish(slot, snap_new(n, &released), snap_release), 0);
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    }
    for (int i = 0; i < 2; i++) {
        atomic_store(&r[i].stop, 1);
        run_until(&r[i].done);
        ck_assert_int_eq(atomic_load(&r[i].bad), 0);
        ck_assert_int_gt(atomic_load(&r[i].reads), 0);
    }
    long long end = core_now_ms() + 5000;
    while (atomic_load(&released) < 299) {
        ck_assert_msg(core_now_ms() < end, "%d of 299 released", atomic_load(&released));
        event_base_loop(base, EVLOOP_ONCE);
    }
    core_snapshot_free(slot);
}
END_TEST

START_TEST(without_workers_a_retired_snapshot_is_released_at_once)
{
    static atomic_int released;
    atomic_store(&released, 0);
    plb_snapshot *slot = core_snapshot_new(NULL);
    ck_assert_ptr_nonnull(slot);
    ck_assert_int_eq(core_snapshot_publish(slot, snap_new(1, &released), snap_release), 0);
    ck_assert_int_eq(atomic_load(&released), 0);
    ck_assert_int_eq(core_snapshot_publish(slot, snap_new(2, &released), snap_release), 0);
    ck_assert_int_eq(atomic_load(&released), 1);
    core_snapshot_free(slot);
    ck_assert_int_eq(atomic_load(&released), 2);
}
END_TEST

/* Out of memory, publishing changes nothing: the data stays the caller's,
 * the workers keep the old, and nothing is lost (the sanitizers' leak
 * check runs at exit). */
START_TEST(a_publish_without_memory_leaves_the_old_snapshot_and_the_data_to_the_caller)
{
    static atomic_int released;
    atomic_store(&released, 0);
    plb_snapshot *slot = core_snapshot_new(ws);
    ck_assert_ptr_nonnull(slot);
    ck_assert_int_eq(core_snapshot_publish(slot, snap_new(1, &released), snap_release), 0);
    struct snap *two = snap_new(2, &released);
    core_alloc_fail_at(1, 0);
    ck_assert_int_eq(core_snapshot_publish(slot, two, snap_release), -ENOMEM);
    core_alloc_fail_at(0, 0);
    ck_assert_int_eq(((const struct snap *)core_snapshot_get(slot))->value, 1);
    ck_assert_uint_eq(core_snapshots_retired(ws), 0);
    snap_release(two); /* still ours */
    ck_assert_int_eq(atomic_load(&released), 1);
    /* The next publish goes through and retires 1 as usual. */
    ck_assert_int_eq(core_snapshot_publish(slot, snap_new(3, &released), snap_release), 0);
    run_until_count(&released, 2);
    core_snapshot_free(slot);
    core_workers_stop(ws);
    ws = NULL;
    ck_assert_int_eq(atomic_load(&released), 3);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("core_worker");
    TCase *tc = tcase_create("worker");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, start_rejects_fewer_than_two_or_more_than_the_maximum);
    tcase_add_test(tc, the_default_is_the_cpus_the_process_may_run_on);
    tcase_add_test(tc, a_message_runs_on_its_worker_and_the_reply_on_the_main_loop);
    tcase_add_test(tc, messages_from_one_thread_run_in_the_order_posted);
    tcase_add_test(tc, stopping_runs_what_was_posted_before);
    tcase_add_test(tc, a_timer_made_on_a_worker_fires_on_that_worker);
    tcase_add_test(tc, after_the_join_the_main_loop_frees_what_was_left_on_a_worker);
    tcase_add_test(tc, a_snapshot_is_released_only_after_every_worker_moved_on);
    tcase_add_test(tc, a_publish_without_memory_leaves_the_old_snapshot_and_the_data_to_the_caller);
    tcase_add_test(tc, workers_reading_while_the_main_loop_publishes_see_intact_data);
    tcase_add_test(tc, without_workers_a_retired_snapshot_is_released_at_once);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
