/*
 * worker: see worker.h.
 *
 * Mailboxes. Each loop (every worker and the main loop) has one: a
 * mutex-protected FIFO of messages and an eventfd whose readability wakes
 * the owner's loop, which takes the whole queue at once and runs it. The
 * mutex orders the message (and its argument) between the poster and the
 * runner; the eventfd only wakes.
 *
 * Snapshots. A global epoch counts publications. A worker, after each pass
 * through its loop (event_base_loop with EVLOOP_ONCE), stores the epoch it
 * sees: it holds no snapshot at that point. Data retired at epoch e is
 * released once every worker has stored an epoch >= e. Each publication
 * kicks every worker's eventfd, so an idle worker passes through its loop
 * too, and a main-loop timer polls the retired list while it is not empty.
 */
#include "worker.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "reactor.h"

#define RECLAIM_POLL_MS 5

struct core_msg {
    core_post_cb fn;
    void *arg;
    struct core_msg *next;
    int embedded; /* part of its worker (the stop message): not freed */
};

struct mailbox {
    pthread_mutex_t mu;
    struct core_msg *head, *tail;
    int closed; /* no more posts accepted */
    int efd;
    struct event *ev;
};

struct plb_worker {
    struct core_workers *ws;
    size_t index;
    struct event_base *base;
    struct mailbox mb;
    pthread_t thread;
    int running; /* thread created */
    int stop;    /* worker thread only */
    struct core_msg stop_msg;
    /* Written by the worker only, read by the main loop: kept 64 bytes
     * away from anything else (no false sharing). */
    char pad0[64];
    _Atomic uint64_t seen;
    char pad1[64];
};

struct retired {
    void *data;
    void (*release)(void *data);
    uint64_t epoch;
    struct retired *next;
};

struct plb_snapshot {
    struct core_workers *ws;
    _Atomic(void *) cur;
    void (*release)(void *data);
    /* The record that will retire cur: allocated before cur is published,
     * so a retirement never needs memory it might not get. */
    struct retired *spare;
};

struct core_workers {
    size_t n;
    plb_worker *w; /* n of them */
    struct event_base *main_base;
    struct mailbox main_mb;
    _Atomic uint64_t epoch;
    struct retired *retired; /* main loop only */
    size_t nretired;
    struct event *reclaim;
    int joined; /* core_workers_join ran */
};

static _Thread_local plb_worker *self;

/* ------------------------------------------------------------------------ */
/* Mailboxes                                                                */

static void
mailbox_run(evutil_socket_t fd, short what, void *arg)
{
    struct mailbox *mb = arg;
    uint64_t v;
    (void)what;
    /* EAGAIN: another pass took the count; the queue says what to do. */
    if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN && errno != EINTR)
        CORE_ERR("worker mailbox: read: %s", strerror(errno));
    pthread_mutex_lock(&mb->mu);
    struct core_msg *m = mb->head;
    mb->head = mb->tail = NULL;
    pthread_mutex_unlock(&mb->mu);
    while (m) {
        struct core_msg *next = m->next;
        m->fn(m->arg);
        if (!m->embedded)
            core_free(m);
        m = next;
    }
}

static int
mailbox_init(struct mailbox *mb, struct event_base *base)
{
    memset(mb, 0, sizeof(*mb));
    mb->efd = -1;
    if (pthread_mutex_init(&mb->mu, NULL) != 0)
        return -ENOMEM;
    mb->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (mb->efd < 0)
        return -errno;
    mb->ev = event_new(base, mb->efd, EV_READ | EV_PERSIST, mailbox_run, mb);
    if (!mb->ev || event_add(mb->ev, NULL) != 0)
        return -ENOMEM;
    return 0;
}

/* Free the mailbox; messages left are dropped (their arguments with them:
 * the callers made sure there are none that own anything). */
static void
mailbox_fini(struct mailbox *mb)
{
    core_event_clear(&mb->ev);
    if (mb->efd >= 0)
        close(mb->efd);
    struct core_msg *m = mb->head;
    while (m) {
        struct core_msg *next = m->next;
        if (!m->embedded)
            core_free(m);
        m = next;
    }
    pthread_mutex_destroy(&mb->mu);
}

static void
kick(struct mailbox *mb)
{
    uint64_t one = 1;
    /* EAGAIN: the counter is full, so the loop is woken anyway. */
    if (write(mb->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        CORE_ERR("worker mailbox: write: %s", strerror(errno));
}

/* Queue m (new, or embedded) on mb. 0 or -ESHUTDOWN (m is not queued). */
static int
mailbox_put(struct mailbox *mb, struct core_msg *m)
{
    m->next = NULL;
    pthread_mutex_lock(&mb->mu);
    if (mb->closed) {
        pthread_mutex_unlock(&mb->mu);
        return -ESHUTDOWN;
    }
    int was_empty = mb->head == NULL;
    if (mb->tail)
        mb->tail->next = m;
    else
        mb->head = m;
    mb->tail = m;
    pthread_mutex_unlock(&mb->mu);
    /* A non-empty queue has been kicked already and not yet taken. */
    if (was_empty)
        kick(mb);
    return 0;
}

static int
mailbox_post(struct mailbox *mb, core_post_cb fn, void *arg)
{
    struct core_msg *m = core_malloc(sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->fn = fn;
    m->arg = arg;
    m->embedded = 0;
    int rc = mailbox_put(mb, m);
    if (rc < 0)
        core_free(m);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                  */

static void *
worker_main(void *arg)
{
    plb_worker *w = arg;
    self = w;
    while (!w->stop) {
        if (event_base_loop(w->base, EVLOOP_ONCE) < 0) {
            CORE_ERR("worker %zu: event loop failed", w->index);
            break;
        }
        /* Between passes this worker holds no snapshot. */
        atomic_store(&w->seen, atomic_load(&w->ws->epoch));
    }
    atomic_store(&w->seen, UINT64_MAX);
    return NULL;
}

static void
on_stop(void *arg)
{
    plb_worker *w = arg;
    w->stop = 1;
}

unsigned
core_workers_default(void)
{
    cpu_set_t set;
    unsigned n = 1;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = (unsigned)CPU_COUNT(&set);
    if (n < 1)
        n = 1;
    return n > CORE_WORKERS_MAX ? CORE_WORKERS_MAX : n;
}

static void reclaim(struct core_workers *ws);

static void
on_reclaim(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    reclaim(arg);
}

struct core_workers *
core_workers_start(struct event_base *main_base, unsigned n, int *err)
{
    struct core_workers *ws = NULL;
    int rc = -EINVAL;
    sigset_t all, old;
    int masked = 0;

    if (!main_base || n < 2 || n > CORE_WORKERS_MAX)
        goto fail;
    rc = -ENOMEM;
    ws = core_calloc(1, sizeof(*ws));
    if (!ws)
        goto fail;
    ws->main_base = main_base;
    ws->w = core_calloc(n, sizeof(*ws->w));
    if (!ws->w)
        goto fail;
    ws->n = n;
    for (size_t i = 0; i < n; i++)
        ws->w[i].mb.efd = -1;
    if ((rc = mailbox_init(&ws->main_mb, main_base)) < 0)
        goto fail;
    rc = -ENOMEM;
    ws->reclaim = evtimer_new(main_base, on_reclaim, ws);
    if (!ws->reclaim)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        plb_worker *w = &ws->w[i];
        w->ws = ws;
        w->index = i;
        rc = -ENOMEM;
        w->base = core_event_base_new();
        if (!w->base)
            goto fail;
        if ((rc = mailbox_init(&w->mb, w->base)) < 0)
            goto fail;
    }
    /* The threads inherit a full signal mask: signals go to the main loop. */
    sigfillset(&all);
    if (pthread_sigmask(SIG_SETMASK, &all, &old) == 0)
        masked = 1;
    for (size_t i = 0; i < n; i++) {
        int e = pthread_create(&ws->w[i].thread, NULL, worker_main, &ws->w[i]);
        if (e != 0) {
            rc = -e;
            break;
        }
        ws->w[i].running = 1;
    }
    if (masked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!ws->w[n - 1].running)
        goto fail;
    if (err)
        *err = 0;
    return ws;
fail:
    core_workers_stop(ws);
    if (err)
        *err = rc;
    return NULL;
}

void
core_workers_join(struct core_workers *ws)
{
    if (!ws || ws->joined)
        return;
    ws->joined = 1;
    for (size_t i = 0; ws->w && i < ws->n; i++) {
        plb_worker *w = &ws->w[i];
        if (!w->running)
            continue;
        /* Last in its queue: what was posted before still runs. */
        w->stop_msg.fn = on_stop;
        w->stop_msg.arg = w;
        w->stop_msg.embedded = 1;
        (void)mailbox_put(&w->mb, &w->stop_msg); /* not closed before the join */
    }
    for (size_t i = 0; ws->w && i < ws->n; i++) {
        plb_worker *w = &ws->w[i];
        if (w->running)
            pthread_join(w->thread, NULL);
        w->running = 0;
        pthread_mutex_lock(&w->mb.mu);
        w->mb.closed = 1;
        pthread_mutex_unlock(&w->mb.mu);
    }
    /* What the workers posted last runs now, on the main loop. */
    if (ws->main_mb.ev) {
        pthread_mutex_lock(&ws->main_mb.mu);
        ws->main_mb.closed = 1;
        pthread_mutex_unlock(&ws->main_mb.mu);
        mailbox_run(ws->main_mb.efd, EV_READ, &ws->main_mb);
    }
    reclaim(ws); /* every worker has seen UINT64_MAX: all are released */
    core_event_clear(&ws->reclaim);
}

void
core_workers_stop(struct core_workers *ws)
{
    if (!ws)
        return;
    core_workers_join(ws);
    for (size_t i = 0; ws->w && i < ws->n; i++) {
        plb_worker *w = &ws->w[i];
        if (w->base) {
            mailbox_fini(&w->mb);
            event_base_free(w->base);
        }
    }
    if (ws->main_mb.ev || ws->main_mb.efd >= 0)
        mailbox_fini(&ws->main_mb);
    core_free(ws->w);
    core_free(ws);
}

size_t
core_workers_count(const struct core_workers *ws)
{
    return ws ? ws->n : 0;
}

plb_worker *
core_worker_at(struct core_workers *ws, size_t i)
{
    return ws && i < ws->n ? &ws->w[i] : NULL;
}

plb_worker *
core_worker_self(void)
{
    return self;
}

size_t
core_worker_index(const plb_worker *w)
{
    return w ? w->index : 0;
}

struct event_base *
core_worker_base(plb_worker *w)
{
    return w ? w->base : NULL;
}

int
core_post(struct core_workers *ws, plb_worker *to, core_post_cb fn, void *arg)
{
    if (!ws || !fn)
        return -EINVAL;
    return mailbox_post(to ? &to->mb : &ws->main_mb, fn, arg);
}

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                */

static void
reclaim(struct core_workers *ws)
{
    uint64_t min = UINT64_MAX;
    for (size_t i = 0; ws->w && i < ws->n; i++) {
        uint64_t s = atomic_load(&ws->w[i].seen);
        if (s < min)
            min = s;
    }
    struct retired **pp = &ws->retired;
    while (*pp) {
        struct retired *r = *pp;
        if (r->epoch <= min) {
            *pp = r->next;
            ws->nretired--;
            if (r->release)
                r->release(r->data);
            core_free(r);
        } else {
            pp = &r->next;
        }
    }
    if (ws->retired && ws->reclaim) {
        /* Wake the workers still behind, then look again. */
        struct timeval tv = {0, RECLAIM_POLL_MS * 1000};
        for (size_t i = 0; i < ws->n; i++)
            if (atomic_load(&ws->w[i].seen) < ws->retired->epoch)
                kick(&ws->w[i].mb);
        if (evtimer_add(ws->reclaim, &tv) != 0)
            CORE_ERR("snapshots: cannot arm the release timer");
    }
}

/* Retire data published in s with s's spare record: released once every
 * worker moved on. */
static void
retire(plb_snapshot *s, void *data, void (*release)(void *data))
{
    struct core_workers *ws = s->ws;
    if (!data)
        return;
    if (!ws || ws->joined) {
        /* No worker runs (none, or every one joined): none holds data. */
        core_free(s->spare);
        s->spare = NULL;
        if (release)
            release(data);
        return;
    }
    struct retired *r = s->spare;
    s->spare = NULL;
    r->data = data;
    r->release = release;
    r->epoch = atomic_fetch_add(&ws->epoch, 1) + 1;
    r->next = ws->retired;
    ws->retired = r;
    ws->nretired++;
    for (size_t i = 0; i < ws->n; i++)
        kick(&ws->w[i].mb);
    if (!evtimer_pending(ws->reclaim, NULL)) {
        struct timeval tv = {0, RECLAIM_POLL_MS * 1000};
        if (evtimer_add(ws->reclaim, &tv) != 0)
            CORE_ERR("snapshots: cannot arm the release timer");
    }
}

plb_snapshot *
core_snapshot_new(struct core_workers *ws)
{
    plb_snapshot *s = core_calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->ws = ws;
    atomic_init(&s->cur, NULL);
    return s;
}

int
core_snapshot_publish(plb_snapshot *s, void *data, void (*release)(void *data))
{
    if (!s)
        return -EINVAL;
    /* The record that will retire data, before anything changes: without
     * it, nothing is published and data stays the caller's. */
    struct retired *next = NULL;
    if (s->ws && data && !(next = core_malloc(sizeof(*next))))
        return -ENOMEM;
    void *old = atomic_exchange(&s->cur, data);
    void (*old_release)(void *) = s->release;
    s->release = release;
    retire(s, old, old_release); /* takes the spare that old came with */
    s->spare = next;
    return 0;
}

const void *
core_snapshot_get(const plb_snapshot *s)
{
    return s ? atomic_load(&((plb_snapshot *)s)->cur) : NULL;
}

void
core_snapshot_free(plb_snapshot *s)
{
    if (!s)
        return;
    void *old = atomic_exchange(&s->cur, NULL);
    retire(s, old, s->release);
    core_free(s->spare); /* NULL unless cur was */
    core_free(s);
}

size_t
core_snapshots_retired(const struct core_workers *ws)
{
    return ws ? ws->nretired : 0;
}
