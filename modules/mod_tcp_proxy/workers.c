/*
 * workers: the data path on the daemon's worker loops (threads > 1).
 *
 * The main loop keeps everything but the connections: the pool (select.c),
 * health checks, name resolution, metrics and the endpoint links. After
 * every pool event it publishes a snapshot of the pool, immutable, which
 * the workers pick from without locks (the core releases an old one once
 * every worker has moved on). Each worker accepts on its own SO_REUSEPORT
 * listener and runs conn.c and pump.c on its own loop, with its own pipes,
 * copy buffer and per-upstream records (made from the snapshot on first
 * use: loop.c). What the pool must know comes back as reports (loop.c
 * batches them for up to 20 ms, on_report here applies them): connections
 * opened and closed per upstream (for draining) and dial outcomes (for the
 * health streak and prismlb_connection_errors_total). Drains, readiness
 * closes, the first endpoint set and the stop go to every worker as
 * messages; a drain's is acknowledged after the worker's reports so far,
 * and the upstream stays until every worker's acknowledgement is in, so
 * late opens are counted before the pool can take it for idle. Counters
 * of connections and retries are the worker's own, summed when /metrics
 * is scraped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <prismlb/module_util.h>

#include "loop.h"

#define BACKLOG 4096
/* How often a stop looks again for a worker whose stop report was lost. */
#define STOP_POLL_MS 50

/* ------------------------------------------------------------------------ */
/* The snapshot                                                             */

static void
snap_release(void *p)
{
    struct tp_snap *s = p;
    const struct plb_host *h = s->host;
    for (size_t i = 0; i < s->n; i++) {
        h->mem->free(s->ups[i]->addr);
        h->mem->free(s->ups[i]);
    }
    h->mem->free(s->ups);
    h->mem->free(s);
}

static void post_drains(struct tp *tp);
static void drain_post(struct tp *tp, uint32_t id);

void
tp_workers_publish(struct tp *tp)
{
    const struct plb_host *h = tp->host;
    size_t n = tp_pool_count(tp->pool);
    struct tp_snap *s = h->mem->alloc(sizeof(*s));
    if (!s)
        goto oom;
    s->host = h;
    s->sel = (enum tp_selection)tp->cfg->upstream_selection;
    s->check = (enum tp_check_kind)tp->cfg->health_check;
    s->ups = h->mem->alloc((n ? n : 1) * sizeof(*s->ups));
    if (!s->ups)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        struct tp_up *u = tp_pool_at(tp->pool, i);
        struct tp_upd *d = u->data;
        /* Only what a worker can dial: a known address. */
        if (!d || !d->have_sa)
            continue;
        struct snap_ent *e = h->mem->alloc(sizeof(*e));
        if (!e)
            goto oom;
        e->up = *u;
        e->up.data = NULL;
        e->up.addr = h->mem->strdup(u->addr);
        if (!e->up.addr) {
            h->mem->free(e);
            goto oom;
        }
        memcpy(&e->sa, &d->sa, sizeof(e->sa));
        e->salen = d->salen;
        s->ups[s->n++] = &e->up;
    }
    if (h->loop->snapshot_publish(tp->snap, s, snap_release) < 0)
        goto oom;
    post_drains(tp);
    return;
oom:
    if (s && s->ups)
        snap_release(s);
    else if (s)
        h->mem->free(s);
    PLB_ERR(tp->host, tp->ctx, NULL, "out of memory: the workers keep the previous upstream set");
    post_drains(tp);
}

/* ------------------------------------------------------------------------ */
/* Reports: worker to main                                                  */

/* Here, not in mod_tcp_proxy.c, though the one loop logs it too: it is
 * the workers' acknowledgements that complete the count. */
void
tp_drain_log(struct tp *tp, const struct tp_up *u)
{
    PLB_INFO(tp->host, tp->ctx, PLB_KV("upstream", u->addr),
             "upstream removed: draining %u connection(s) for up to %lld ms", u->nconns,
             (long long)tp->cfg->drain_timeout_ms);
}

enum { FLIP_UP = 1, FLIP_DOWN = 2 }; /* tp_event.flip */

struct wmsg;
static int post_to(struct tp *tp, struct tp_loop *lp, int kind, uint32_t id, uint32_t seq);

enum wmsg_kind { W_LISTEN, W_RESUME, W_DRAINING, W_CLOSE, W_STOP };

/* Main loop: apply a worker's reports to the pool, in their order. */
static void
on_report(void *arg)
{
    struct tp_report *r = arg;
    struct tp *tp = r->tp;
    const struct plb_host *h = tp->host;

    for (size_t i = 0; i < r->n && !tp->stopping; i++) {
        struct tp_up *u = tp_pool_find_id(tp->pool, r->ev[i].id);
        switch ((enum tp_event_kind)r->ev[i].kind) {
        case TP_EV_OPENED:
            if (!u) {
                /* Picked from a snapshot older than its removal. */
                (void)post_to(tp, r->lp, W_CLOSE, r->ev[i].id, 0);
                break;
            }
            tp_pool_conn_opened(tp->pool, u);
            if (u->draining)
                (void)post_to(tp, r->lp, W_DRAINING, u->id, 0); /* its dial moves */
            break;
        case TP_EV_CLOSED:
            if (u)
                tp_pool_conn_closed(tp->pool, u);
            break;
        case TP_EV_CONN_ENDED:
            tp_metrics_conn_ended(tp, r->ev[i].value);
            break;
        case TP_EV_DRAIN_SEEN:
            if (u && tp_pool_drain_ack(u, r->ev[i].seq))
                tp_drain_log(tp, u);
            break;
        case TP_EV_DIAL_OK:
        case TP_EV_DIAL_FAILED:
        case TP_EV_LAST_DIAL_OK:
        case TP_EV_LAST_DIAL_FAILED: {
            if (!u)
                break;
            int kind = r->ev[i].kind, was = u->healthy;
            int ok = kind == TP_EV_DIAL_OK || kind == TP_EV_LAST_DIAL_OK;
            tp_pool_dial_result(tp->pool, u, ok);
            if (u->data)
                tp_metrics_dial(tp, u->data, ok,
                                kind == TP_EV_LAST_DIAL_OK || kind == TP_EV_LAST_DIAL_FAILED,
                                r->ev[i].value);
            if (was != (int)u->healthy)
                r->ev[i].flip = u->healthy ? FLIP_UP : FLIP_DOWN;
            break;
        }
        }
    }
    tp->after_event(tp);
    /* A change of health is logged once the snapshot that carries it is
     * published: a connection accepted after the line is picked by it. An
     * upstream removed meanwhile is not logged again. */
    for (size_t i = 0; i < r->n && !tp->stopping; i++) {
        struct tp_up *u = r->ev[i].flip ? tp_pool_find_id(tp->pool, r->ev[i].id) : NULL;
        if (u)
            PLB_LOG(tp->host, tp->ctx, r->ev[i].flip == FLIP_UP ? PLB_LOG_INFO : PLB_LOG_WARN,
                    PLB_KV("upstream", u->addr), "upstream is %s",
                    r->ev[i].flip == FLIP_UP ? "healthy (a client dial succeeded)"
                                             : "unhealthy (client dials failed)");
    }
    h->mem->free(r->ev);
    h->mem->free(r);
}

/* ------------------------------------------------------------------------ */
/* Messages: main to workers                                                */

struct wmsg {
    struct tp_loop *lp;
    int kind;
    uint32_t id;
    uint32_t seq; /* W_DRAINING: the drain to acknowledge, 0: none */
    int paused;
    int fd; /* W_LISTEN: the worker's listening socket (the message's) */
};

static void on_stopped(void *arg);
static void on_stop_poll(plb_timer *t, void *arg);

static void
worker_stop(struct tp_loop *lp)
{
    struct tp *tp = lp->tp;
    const struct plb_host *h = tp->host;
    lp->stopping = 1;
    h->loop->listener_free(lp->listener);
    lp->listener = NULL;
    for (size_t i = 0; i < lp->nups; i++)
        tp_conns_close_upstream(lp->ups[i]);
    tp_loop_recs_free(lp);
    tp_pipes_free(lp);
    h->loop->timer_free(lp->flush);
    lp->flush = NULL;
    h->loop->timer_free(lp->late_timer);
    lp->late_timer = NULL;
    h->mem->free(lp->ev);
    lp->ev = NULL;
    lp->nev = lp->cev = 0;
    atomic_store(&lp->stopped, 1);
    /* Only a wakeup: without it the main loop's stop poll sees the flag. */
    (void)h->loop->post(tp->ctx, NULL, on_stopped, lp);
}

static void
on_wmsg(void *arg)
{
    struct wmsg *m = arg;
    struct tp_loop *lp = m->lp;
    struct tp *tp = lp->tp;
    const struct plb_host *h = tp->host;
    struct tp_upd *d;

    if (lp->stopping && m->kind != W_STOP) {
        if (m->kind == W_LISTEN)
            close(m->fd);
        goto out;
    }
    switch ((enum wmsg_kind)m->kind) {
    case W_LISTEN: {
        int err = 0;
        lp->flush = h->loop->worker_timer_new(lp->w, tp_loop_flush, lp);
        /* Without it, upstream sockets get their options at once. */
        lp->late_timer = h->loop->worker_timer_new(lp->w, tp_sockopts_sweep, lp);
        if (!lp->flush) {
            close(m->fd);
            err = -ENOMEM;
        } else {
            lp->listener = h->loop->worker_listen_fd(lp->w, m->fd, tp_on_accept, lp, &err);
        }
        if (!lp->listener) {
            /* Its socket is closed: the kernel sends its share of new
             * connections to the other workers' sockets. */
            PLB_ERR(tp->host, tp->ctx, NULL, "worker %zu cannot accept on %s:%lld: %s",
                    h->loop->worker_index(lp->w), tp->cfg->bind_address,
                    (long long)tp->cfg->bind_port, strerror(-err));
            break;
        }
        lp->client_opts = TP_OPTS_UNVERIFIED;
        if (m->paused)
            h->loop->listener_pause(lp->listener, 1);
        break;
    }
    case W_RESUME:
        if (lp->listener)
            h->loop->listener_pause(lp->listener, 0);
        break;
    case W_DRAINING:
        if ((d = tp_loop_rec_find(lp, m->id))) {
            d->up->draining = 1;
            tp_conns_upstream_draining(d);
        }
        if (m->seq)
            tp_loop_report_drain_seen(lp, m->id, m->seq);
        break;
    case W_CLOSE:
        if ((d = tp_loop_rec_find(lp, m->id)))
            tp_conns_close_upstream(d);
        break;
    case W_STOP:
        worker_stop(lp);
        break;
    }
out:
    h->mem->free(m);
}

/* 0, or -1 when the message could not be posted (logged). */
static int
post_to(struct tp *tp, struct tp_loop *lp, int kind, uint32_t id, uint32_t seq)
{
    const struct plb_host *h = tp->host;
    struct wmsg *m = h->mem->alloc(sizeof(*m));
    if (!m || (m->lp = lp, m->kind = kind, m->id = id, m->seq = seq,
               h->loop->post(tp->ctx, lp->w, on_wmsg, m) < 0)) {
        h->mem->free(m);
        PLB_ERR(tp->host, tp->ctx, NULL, "cannot post to worker %zu (out of memory)",
                h->loop->worker_index(lp->w));
        return -1;
    }
    return 0;
}

/* The number of workers it reached. */
static uint32_t
post_all(struct tp *tp, int kind, uint32_t id, uint32_t seq)
{
    uint32_t n = 0;
    for (size_t i = 0; i < tp->nloops; i++)
        n += post_to(tp, &tp->loops[i], kind, id, seq) == 0;
    return n;
}

void
tp_workers_resume(struct tp *tp)
{
    (void)post_all(tp, W_RESUME, 0, 0);
}

/* Posted after the snapshot without u is published: a worker that moves
 * a dial off u picks from that one. */
void
tp_workers_draining(struct tp *tp, const struct tp_up *u)
{
    if (tp->ndrain == tp->cdrain) {
        size_t cap = tp->cdrain ? tp->cdrain * 2 : 8;
        uint32_t *nv = tp->host->mem->realloc(tp->drain_ids, cap * sizeof(*nv));
        if (!nv) {
            /* At once, then (without the snapshot: a dial may move to u
             * once more, and drain again). */
            drain_post(tp, u->id);
            return;
        }
        tp->drain_ids = nv;
        tp->cdrain = cap;
    }
    tp->drain_ids[tp->ndrain++] = u->id;
}

/* Tell every worker that upstream id drains; when the pool holds it for
 * their acknowledgements (ops_draining), it waits for those of the workers
 * reached. */
static void
drain_post(struct tp *tp, uint32_t id)
{
    struct tp_up *u = tp_pool_find_id(tp->pool, id);
    if (!u || !u->drain_holds) {
        (void)post_all(tp, W_DRAINING, id, 0);
        return;
    }
    uint32_t n = post_all(tp, W_DRAINING, id, u->drain_seq);
    tp_pool_drain_hold(u, n);
    if (!n)
        tp_drain_log(tp, u);
}

static void
post_drains(struct tp *tp)
{
    for (size_t i = 0; i < tp->ndrain; i++)
        drain_post(tp, tp->drain_ids[i]);
    tp->ndrain = 0;
}

void
tp_workers_close_upstream(struct tp *tp, const struct tp_up *u)
{
    (void)post_all(tp, W_CLOSE, u->id, 0);
}

/* ------------------------------------------------------------------------ */
/* Metrics: the workers' counters, summed when scraped                      */

uint64_t
tp_conns_active(const struct tp *tp)
{
    uint64_t active = tp->nconns;
    for (size_t i = 0; i < tp->nloops; i++)
        active += atomic_load_explicit(&tp->loops[i].active, memory_order_relaxed);
    return active;
}

static void
on_collect(void *arg)
{
    struct tp *tp = arg;
    const struct plb_host *h = tp->host;
    const char *lv[] = {tp->name};
    uint64_t total = 0, retries = 0, active = tp_conns_active(tp);
    for (size_t i = 0; i < tp->nloops; i++) {
        total += atomic_load_explicit(&tp->loops[i].conns_total, memory_order_relaxed);
        retries += atomic_load_explicit(&tp->loops[i].retries, memory_order_relaxed);
    }
    if (total > tp->sum_total)
        (void)h->metrics->add(tp->m.connections_total, lv, (double)(total - tp->sum_total));
    if (retries > tp->sum_retries)
        (void)h->metrics->add(tp->m.dial_retries, lv, (double)(retries - tp->sum_retries));
    tp->sum_total = total;
    tp->sum_retries = retries;
    /* Each worker's own count can go below zero (a connection opened on
     * one is never closed on another, but they are read one by one). */
    (void)h->metrics->set(tp->m.connections_active, lv, (double)(int64_t)active);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                */

int
tp_workers_start(struct tp *tp, const char *ip, int paused)
{
    const struct plb_host *h = tp->host;
    int rc = 0;
    /* Every worker's socket is bound and listening before the start
     * returns: from then on connections queue in the kernel, whenever each
     * worker gets to accepting them, and a port in use fails the start. */
    int *fds = h->mem->alloc(tp->nloops * sizeof(*fds));
    if (!fds)
        return -ENOMEM;
    for (size_t i = 0; i < tp->nloops; i++)
        fds[i] = -1;
    for (size_t i = 0; i < tp->nloops; i++) {
        fds[i] = h->loop->listen_socket(tp->ctx, ip, (int)tp->cfg->bind_port, BACKLOG, 1, NULL);
        if (fds[i] < 0) {
            rc = fds[i];
            PLB_ERR(tp->host, tp->ctx, NULL, "cannot listen on %s:%lld: %s", ip,
                    (long long)tp->cfg->bind_port, strerror(-rc));
            goto out;
        }
        tp_sockopts(fds[i]);
    }
    if (!tp->snap && !(tp->snap = h->loop->snapshot_new(tp->ctx))) {
        rc = -ENOMEM;
        goto out;
    }
    if (!tp->stop_poll && !(tp->stop_poll = h->loop->timer_new(tp->ctx, on_stop_poll, tp))) {
        rc = -ENOMEM;
        goto out;
    }
    if (!tp->loops) {
        tp->loops = h->mem->alloc(tp->nloops * sizeof(*tp->loops));
        if (!tp->loops) {
            rc = -ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < tp->nloops; i++) {
            struct tp_loop *lp = &tp->loops[i];
            lp->tp = tp;
            lp->w = h->loop->worker_at(tp->ctx, i);
            if (getrandom(&lp->rng, sizeof(lp->rng), GRND_NONBLOCK) != (ssize_t)sizeof(lp->rng) ||
                !lp->rng)
                lp->rng = 0x9e3779b97f4a7c15ull + i;
            lp->on_report = on_report;
            atomic_init(&lp->conns_total, 0);
            atomic_init(&lp->retries, 0);
            atomic_init(&lp->active, 0);
        }
    }
    if ((rc = h->metrics->on_collect(tp->ctx, on_collect, tp, 1)) < 0)
        goto out;
    tp_workers_publish(tp);
    for (size_t i = 0; i < tp->nloops; i++) {
        struct wmsg *m = h->mem->alloc(sizeof(*m));
        if (!m) {
            rc = -ENOMEM;
            goto out;
        }
        m->lp = &tp->loops[i];
        m->kind = W_LISTEN;
        m->paused = paused;
        m->fd = fds[i];
        if ((rc = h->loop->post(tp->ctx, m->lp->w, on_wmsg, m)) < 0) {
            h->mem->free(m);
            goto out;
        }
        fds[i] = -1; /* the worker's now */
    }
    char listen[96];
    snprintf(listen, sizeof(listen), "%s:%lld", ip, (long long)tp->cfg->bind_port);
    PLB_INFO(tp->host, tp->ctx, PLB_KV("listen", listen), "listening on %zu worker loops",
             tp->nloops);
    rc = 0;
out:
    for (size_t i = 0; i < tp->nloops; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    h->mem->free(fds);
    return rc;
}

/* Main loop, while stopping: post W_STOP where it could not be posted yet,
 * and finish the stop once every worker has done its own. Runs on each
 * worker's wakeup and on the poll timer, which covers a lost post (out of
 * memory) either way. */
static void
stop_progress(struct tp *tp)
{
    const struct plb_host *h = tp->host;
    size_t stopped = 0;
    if (!tp->stop_done)
        return; /* finished earlier */
    for (size_t i = 0; i < tp->nloops; i++) {
        struct tp_loop *lp = &tp->loops[i];
        if (!lp->stop_posted) {
            struct wmsg *m = h->mem->alloc(sizeof(*m));
            if (m && (m->lp = lp, m->kind = W_STOP, h->loop->post(tp->ctx, lp->w, on_wmsg, m) == 0))
                lp->stop_posted = 1;
            else
                h->mem->free(m);
        }
        stopped += atomic_load(&lp->stopped) != 0;
    }
    if (stopped < tp->nloops) {
        if (h->loop->timer_arm(tp->stop_poll, STOP_POLL_MS, 0, 0) < 0)
            PLB_ERR(tp->host, tp->ctx, NULL, "cannot arm the stop timer");
        return;
    }
    h->loop->timer_cancel(tp->stop_poll);
    on_collect(tp);
    PLB_INFO(tp->host, tp->ctx, NULL, "stopped: every worker closed its connections");
    h->metrics->on_collect(tp->ctx, on_collect, tp, 0);
    /* No worker reads it any more; released before the workers stop. */
    h->loop->snapshot_free(tp->snap);
    tp->snap = NULL;
    plb_done *d = tp->stop_done;
    tp->stop_done = NULL;
    h->links->done(d);
}

/* Main loop: a worker finished its stop. */
static void
on_stopped(void *arg)
{
    struct tp_loop *lp = arg;
    stop_progress(lp->tp);
}

static void
on_stop_poll(plb_timer *t, void *arg)
{
    (void)t;
    stop_progress(arg);
}

void
tp_workers_stop(struct tp *tp, plb_done *d)
{
    if (!tp->loops) {
        tp->host->loop->snapshot_free(tp->snap);
        tp->snap = NULL;
        tp->host->links->done(d);
        return;
    }
    tp->stop_done = d;
    stop_progress(tp);
}

void
tp_workers_fini(struct tp *tp)
{
    const struct plb_host *h = tp->host;
    if (tp->snap) {
        h->metrics->on_collect(tp->ctx, on_collect, tp, 0);
        h->loop->snapshot_free(tp->snap);
        tp->snap = NULL;
    }
    h->loop->timer_free(tp->stop_poll);
    tp->stop_poll = NULL;
    h->mem->free(tp->loops);
    tp->loops = NULL;
    h->mem->free(tp->drain_ids);
    tp->drain_ids = NULL;
    tp->ndrain = tp->cdrain = 0;
}
