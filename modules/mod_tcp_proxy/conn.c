/*
 * conn: the data path. One explicit state machine per proxied connection,
 * driven by one function, conn_drive(), from every event that concerns it.
 *
 *   NEW --start--> RESOLVING --resolved--> DIALING --connected--> OPEN
 *                      |                        |                     |
 *                      +--failed----------------+--failed, draining   +--reset, fresh
 *                                               v                     v
 *                        redial: RESOLVING on another upstream, or CLOSED
 *   OPEN: two directions pumped independently; EOF on one side becomes
 *   shutdown(SHUT_WR) on the other once its data is flushed (half-close is
 *   carried through); the connection closes when both directions ended,
 *   on an error, when its upstream's drain or readiness deadline says so,
 *   or at shutdown.
 *
 * Redialing: until the first upstream byte reaches the client (the
 * connection is "fresh"), a dial that is refused, reset or unreachable, an
 * upstream that resets the connection after the dial, and an upstream that
 * starts draining during the dial move the connection to another upstream:
 * each other pickable one at most once, then, as the last resort, the
 * unhealthy ones (health state can be two intervals stale), all within
 * health_timeout of the accept. What the client sent meanwhile is kept
 * (copy mode, at most REPLAY_MAX bytes; beyond that the connection stops
 * being fresh) and sent again to the new upstream.
 *
 * The forwarding itself is in pump.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <prismlb/module_util.h>

#include "conn_int.h"

double
tp_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void conn_drive(struct tp_conn *c, enum tp_conn_event ev);
static void tp_conn_close(struct tp_conn *c);
static void tp_conn_dial_failed(struct tp_conn *c, int err, const char *why);
static void on_cio(plb_io *io, int fd, int what, void *arg);
static void on_uio(plb_io *io, int fd, int what, void *arg);

/* ------------------------------------------------------------------------ */
/* Upstream lists                                                           */

/* Tell the pool that c opened or closed on d's upstream: at once on the main
 * loop, by a report from a worker. */
static void
conn_told(struct tp_conn *c, struct tp_upd *d, enum tp_event_kind kind)
{
    if (c->lp->w)
        tp_loop_report(c->lp, d, kind);
    else if (kind == TP_EV_OPENED)
        tp_pool_conn_opened(c->tp->pool, d->up);
    else
        tp_pool_conn_closed(c->tp->pool, d->up);
}

static void
attach(struct tp_conn *c, struct tp_upd *d)
{
    c->d = d;
    c->prev = NULL;
    c->next = d->conns;
    if (d->conns)
        d->conns->prev = c;
    d->conns = c;
    conn_told(c, d, TP_EV_OPENED);
}

static void
detach(struct tp_conn *c)
{
    struct tp_upd *d = c->d;
    if (!d)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        d->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->d = NULL;
    conn_told(c, d, TP_EV_CLOSED);
}

/* ------------------------------------------------------------------------ */
/* Closing                                                                  */

/* Connections passing through now (delta) and established so far (total):
 * the instance's on the main loop, the worker's counters on a worker. */
static void
conn_count(struct tp_loop *lp, int delta, int total)
{
    if (!lp->w) {
        lp->tp->nconns += (uint64_t)(int64_t)delta;
        tp_metrics_conn(lp->tp, delta, total);
        return;
    }
    atomic_fetch_add_explicit(&lp->active, (uint64_t)(int64_t)delta, memory_order_relaxed);
    if (total)
        atomic_fetch_add_explicit(&lp->conns_total, (uint64_t)total, memory_order_relaxed);
}

/* Close everything of c and free it. */
static void
tp_conn_close(struct tp_conn *c)
{
    struct tp *tp = c->tp;
    const struct plb_host *h = tp->host;
    int was_open = c->state == TP_CONN_OPEN;
    int draining = !c->lp->w && c->d && c->d->up->draining;

    if (was_open) {
        double secs = (tp_mono_us() - c->accepted_us) / 1e6;
        if (c->lp->w)
            tp_loop_report_value(c->lp, c->d, TP_EV_CONN_ENDED, secs);
        else
            tp_metrics_conn_ended(tp, secs);
    }
    c->state = TP_CONN_CLOSED;
    tp_sockopts_late_drop(c);
    tp_resolve_cancel(c->res);
    h->loop->io_free(c->cio);
    h->loop->io_free(c->uio);
    if (c->cfd >= 0)
        close(c->cfd);
    if (c->ufd >= 0)
        close(c->ufd);
    tp_dir_release(c->lp, &c->dir[0]);
    tp_dir_release(c->lp, &c->dir[1]);
    tp_redial_free(tp, c);
    detach(c);
    if (was_open)
        conn_count(c->lp, -1, 0);
    h->mem->free(c);
    /* The last connection of a draining upstream completes its drain. */
    if (draining)
        tp->after_event(tp);
}

/* ------------------------------------------------------------------------ */
/* Dialing                                                                  */

static void
on_resolved(void *arg, int ok, const struct sockaddr *sa, socklen_t salen)
{
    struct tp_conn *c = arg;
    c->res = NULL;
    if (ok && salen <= sizeof(c->d->sa)) {
        memcpy(&c->d->sa, sa, salen);
        c->d->salen = salen;
        c->d->have_sa = 1;
        conn_drive(c, TP_EV_RESOLVED);
    } else {
        conn_drive(c, TP_EV_RESOLVE_FAILED);
    }
}

/* Begin the dial to c->d: resolve first when needed. */
static void
dial_begin(struct tp_conn *c)
{
    struct tp_upd *d = c->d;
    c->dial_us = tp_mono_us();
    if (d->literal || d->have_sa) {
        c->state = TP_CONN_RESOLVING; /* resolved at once */
        conn_drive(c, TP_EV_RESOLVED);
        return;
    }
    c->state = TP_CONN_RESOLVING;
    c->res = tp_resolve_start(c->tp, d->host, d->port, on_resolved, c);
    if (!c->res)
        conn_drive(c, TP_EV_RESOLVE_FAILED);
}

/* Start the non-blocking connect. Returns the event to drive next, or -1
 * when waiting for the socket. */
static int
dial_connect(struct tp_conn *c)
{
    struct tp_upd *d = c->d;
    const struct sockaddr *sa = (const struct sockaddr *)&d->sa;

    c->dial_err = 0;
    c->ufd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->ufd < 0) {
        c->dial_err = (uint8_t)errno; /* a failed dial, counted as such */
        return TP_EV_DIAL_TIMEOUT;
    }
    tp_sockopts_nodelay(c->ufd); /* the keepalive options come later */
    c->state = TP_CONN_DIALING;
    /* The watch is added after connect(): an unconnected socket polls as
     * hung up, which would read as a failed dial. */
    int now = connect(c->ufd, sa, d->salen) == 0;
    if (!now && errno != EINPROGRESS) {
        c->dial_err = (uint8_t)errno;
        return TP_EV_DIAL_TIMEOUT;
    }
    /* The socket's watch doubles as the dial timer: what is left of
     * health_timeout since the accept. */
    int64_t left = c->deadline_ms - c->tp->host->loop->now_ms(c->tp->ctx);
    c->uio = tp_loop_io_new(c->lp, c->ufd, WATCH, on_uio, c);
    if (!c->uio || c->tp->host->loop->io_add(c->uio, now ? 0 : (left > 1 ? left : 1)) < 0) {
        c->dial_err = ENOMEM;
        return TP_EV_DIAL_TIMEOUT;
    }
    if (now) {
        c->ev_what = PLB_IO_WRITE;
        return TP_EV_DIAL_WRITABLE;
    }
    return -1;
}

/* Drop the current dial (socket, watch, resolution). */
static void
dial_abort(struct tp_conn *c)
{
    const struct plb_host *h = c->tp->host;
    tp_sockopts_late_drop(c);
    tp_resolve_cancel(c->res);
    c->res = NULL;
    h->loop->io_free(c->uio);
    c->uio = NULL;
    if (c->ufd >= 0)
        close(c->ufd);
    c->ufd = -1;
}

/* Move a fresh connection off its upstream (why: for the log) to another
 * one: an untried pickable upstream, else an untried unhealthy one (the
 * last resort), while health_timeout since the accept is not over. Returns
 * 1 if c moved (c may be gone already: a new dial can fail at once), 0 if
 * c stays where it is, untouched. */
static int
redial(struct tp_conn *c, const char *why)
{
    struct tp *tp = c->tp;
    const struct plb_host *h = tp->host;

    if (!c->fresh || c->lp->stopping || h->loop->now_ms(tp->ctx) >= c->deadline_ms)
        return 0;
    if (c->ntried == c->tcap) {
        uint32_t cap = c->tcap ? c->tcap * 2 : 4;
        uint32_t *nv = h->mem->realloc(c->tried, cap * sizeof(*nv));
        if (!nv)
            return 0;
        c->tried = nv;
        c->tcap = cap;
    }
    c->tried[c->ntried++] = c->d->up->id;
    int last = 0;
    struct tp_upd *nd;
    if (c->lp->w) {
        nd = tp_loop_pick(c->lp, c->tried, c->ntried, &last);
    } else {
        struct tp_up *u = tp_pool_pick_untried(tp->pool, c->tried, c->ntried);
        if (!u) {
            u = tp_pool_pick_last_resort(tp->pool, c->tried, c->ntried);
            last = 1;
        }
        nd = u ? u->data : NULL;
    }
    if (!nd)
        return 0;
    /* What the client sent is sent again; nothing went the other way. */
    char *again = NULL;
    if (c->rlen) {
        again = h->mem->alloc(c->rlen);
        if (!again)
            return 0;
        memcpy(again, c->replay, c->rlen);
    }
    PLB_INFO(tp->host, tp->ctx,
             PLB_KV("upstream", c->d->up->addr, "why", why, "next", nd->up->addr),
             "retrying on the next upstream%s", last ? " (unhealthy: the last resort)" : "");
    if (c->lp->w)
        atomic_fetch_add_explicit(&c->lp->retries, 1, memory_order_relaxed);
    else
        tp_metrics_dial_retry(tp);
    if (c->state == TP_CONN_OPEN)
        conn_count(c->lp, -1, 0);
    dial_abort(c);
    uint8_t eof = c->dir[0].eof;
    tp_dir_release(c->lp, &c->dir[0]);
    tp_dir_release(c->lp, &c->dir[1]);
    memset(c->dir, 0, sizeof(c->dir));
    c->dir[0].eof = eof;
    if (again) {
        c->dir[0].buf = again;
        c->dir[0].len = c->rlen;
    }
    c->rdy &= (uint8_t)(R_C | W_C | H_C);
    int was_draining = !c->lp->w && c->d->up->draining;
    detach(c);
    attach(c, nd);
    c->last = (uint8_t)last;
    dial_begin(c); /* c may be gone after this */
    /* It may have been the last connection of a draining upstream. */
    if (was_draining)
        tp->after_event(tp);
    return 1;
}

/* The dial to c's upstream failed (err: errno, 0 for a timeout), or the
 * upstream reset c before its first byte: counted against the upstream,
 * then c redials or closes. */
static void
tp_conn_dial_failed(struct tp_conn *c, int err, const char *why)
{
    struct tp *tp = c->tp;
    struct tp_upd *d = c->d;
    int was = d->up->healthy;
    char what[160];
    /* A reset right after a completed connect is no dial's duration. */
    double secs = c->state == TP_CONN_OPEN ? -1 : (tp_mono_us() - c->dial_us) / 1e6;

    PLB_WARN(tp->host, tp->ctx, PLB_KV("upstream", d->up->addr, "error", why), "dial failed");
    if (c->lp->w) {
        /* The main loop counts it against the upstream. */
        tp_loop_report_value(c->lp, d, c->last ? TP_EV_LAST_DIAL_FAILED : TP_EV_DIAL_FAILED, secs);
        snprintf(what, sizeof(what), "failed (%s)", why);
        if (!(err == 0 || tp_conn_retryable(err)) || !redial(c, what))
            tp_conn_close(c);
        return;
    }
    tp_pool_dial_result(tp->pool, d->up, 0);
    tp_metrics_dial(tp, d, 0, c->last, secs);
    int changed = was != (int)d->up->healthy;
    if (changed)
        PLB_WARN(tp->host, tp->ctx, PLB_KV("upstream", d->up->addr),
                 "upstream is unhealthy (client dials failed)");
    snprintf(what, sizeof(what), "failed (%s)", why);
    if (!(err == 0 || tp_conn_retryable(err)) || !redial(c, what))
        tp_conn_close(c); /* d may be gone after this (a drain completed) */
    if (changed)
        tp->after_event(tp);
}

/* Pump direction i (pump.c) and act on what it says: c closes, or its
 * upstream failed it before the first byte (a failed dial: c redials or
 * closes). 0, or -1 when c is gone (the caller touches c no more). */
static int
pump(struct tp_conn *c, int i)
{
    int rc = tp_pump(c, i);
    if (rc == 0)
        return 0;
    if (rc > 0)
        tp_conn_dial_failed(c, rc, strerror(rc));
    else
        tp_conn_close(c);
    return -1;
}

/* The dial succeeded (what: the upstream event that said so): start
 * forwarding. -1 when c must be closed, 1 when forwarding closed it. The
 * pool event comes last: it may close c (the caller touches c no more). */
static int
established(struct tp_conn *c, int what)
{
    struct tp *tp = c->tp;
    const struct plb_host *h = tp->host;
    int was = c->d->up->healthy;
    double secs = (tp_mono_us() - c->dial_us) / 1e6;

    c->state = TP_CONN_OPEN;
    conn_count(c->lp, 1, 1);
    if (c->lp->w) {
        tp_loop_report_value(c->lp, c->d, c->last ? TP_EV_LAST_DIAL_OK : TP_EV_DIAL_OK, secs);
    } else {
        tp_pool_dial_result(tp->pool, c->d->up, 1);
        tp_metrics_dial(tp, c->d, 1, c->last, secs);
    }
    /* Both sockets take data until they say EAGAIN. The client has most
     * likely spoken already (a TLS hello, a request): read it now rather
     * than an event later. */
    c->rdy = (uint8_t)(R_C | W_C | W_U | (c->rdy & H_C) | UPSTREAM(tp_reported(what)));
    /* After a redial the client's watch exists already. */
    if (h->loop->io_add(c->uio, 0) < 0 ||
        (!c->cio && (!(c->cio = tp_loop_io_new(c->lp, c->cfd, WATCH, on_cio, c)) ||
                     h->loop->io_add(c->cio, 0) < 0))) {
        PLB_ERR(tp->host, tp->ctx, NULL, "cannot watch a new connection (out of memory)");
        return -1;
    }
    tp_sockopts_late(c);
    int changed = !c->lp->w && was != (int)c->d->up->healthy;
    if (changed)
        PLB_INFO(tp->host, tp->ctx, PLB_KV("upstream", c->d->up->addr),
                 "upstream is healthy (a client dial succeeded)");
    int closed = pump(c, 0) < 0 || pump(c, 1) < 0;
    if (changed)
        tp->after_event(tp);
    return closed;
}

/* ------------------------------------------------------------------------ */
/* The driver                                                               */

static void
conn_drive(struct tp_conn *c, enum tp_conn_event ev)
{
    if (ev == TP_EV_KILL) {
        tp_conn_close(c);
        return;
    }
    switch ((enum tp_conn_state)c->state) {
    case TP_CONN_NEW:
        if (ev == TP_EV_START)
            dial_begin(c);
        return;
    case TP_CONN_RESOLVING:
        if (ev == TP_EV_UPSTREAM_DRAINING) {
            redial(c, "drains during a dial");
            return;
        }
        if (ev == TP_EV_RESOLVE_FAILED) {
            tp_conn_dial_failed(c, EHOSTUNREACH, "cannot resolve its host name");
            return;
        }
        if (ev != TP_EV_RESOLVED)
            return;
        {
            int next = dial_connect(c);
            if (next < 0)
                return;
            ev = (enum tp_conn_event)next;
        }
        /* connected or failed at once: handle as in DIALING */
        /* fall through */
    case TP_CONN_DIALING:
        switch (ev) {
        case TP_EV_UPSTREAM_DRAINING:
            redial(c, "drains during a dial");
            return;
        case TP_EV_DIAL_TIMEOUT:
            tp_conn_dial_failed(c, c->dial_err, c->dial_err ? strerror(c->dial_err) : "timeout");
            return;
        case TP_EV_DIAL_WRITABLE: {
            /* Writable alone is a completed connect; an error shows as
             * readable and writable (so does a server that spoke first):
             * only then ask the socket. */
            int what = c->ev_what;
            if (what != PLB_IO_WRITE) {
                int soerr = 0;
                socklen_t sl = sizeof(soerr);
                if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
                    soerr = errno;
                if (soerr) {
                    tp_conn_dial_failed(c, soerr, strerror(soerr));
                    return;
                }
            }
            if (established(c, what) < 0)
                tp_conn_close(c);
            return;
        }
        default:
            return;
        }
    case TP_CONN_OPEN:
        switch (ev) {
        case TP_EV_CLIENT_READY:
        case TP_EV_UPSTREAM_READY:
            if (pump(c, 0) == 0)
                pump(c, 1);
            return;
        default:
            return; /* a change of tier or a drain does not move it */
        }
    case TP_CONN_CLOSED:
        return;
    }
}

static void
on_cio(plb_io *io, int fd, int what, void *arg)
{
    struct tp_conn *c = arg;
    (void)io, (void)fd;
    c->rdy |= tp_reported(what);
    conn_drive(c, TP_EV_CLIENT_READY);
}

static void
on_uio(plb_io *io, int fd, int what, void *arg)
{
    struct tp_conn *c = arg;
    (void)io, (void)fd;
    if (c->state == TP_CONN_DIALING) {
        c->ev_what = (uint8_t)what;
        c->dial_err = 0;
        conn_drive(c, (what & PLB_IO_TIMEOUT) ? TP_EV_DIAL_TIMEOUT : TP_EV_DIAL_WRITABLE);
        return;
    }
    c->rdy |= UPSTREAM(tp_reported(what));
    conn_drive(c, TP_EV_UPSTREAM_READY);
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                             */

void
tp_on_accept(plb_listener *l, int fd, const char *peer, void *arg)
{
    struct tp_loop *lp = arg;
    struct tp *tp = lp->tp;
    struct tp_upd *d = NULL;
    int last = 0;
    (void)l;

    if (lp->stopping) {
        close(fd);
        return;
    }
    if (lp->w) {
        d = tp_loop_pick(lp, NULL, 0, &last);
    } else {
        struct tp_up *u = tp_pool_pick(tp->pool, NULL);
        if (!u) {
            /* Health state can be two intervals stale: before giving up,
             * the unhealthy upstreams are tried (redial() goes through the
             * rest). */
            u = tp_pool_pick_last_resort(tp->pool, NULL, 0);
            last = 1;
        }
        d = u ? u->data : NULL;
    }
    if (!d) {
        PLB_WARN(tp->host, tp->ctx, PLB_KV("client", peer),
                 "no upstream available: closing the client");
        close(fd);
        return;
    }
    if (last)
        PLB_INFO(tp->host, tp->ctx, PLB_KV("client", peer, "upstream", d->up->addr),
                 "no healthy upstream: trying an unhealthy one (the last resort)");
    struct tp_conn *c = tp->host->mem->alloc(sizeof(*c));
    if (!c) {
        PLB_ERR(tp->host, tp->ctx, PLB_KV("client", peer),
                "out of memory accepting: closing the client");
        close(fd);
        return;
    }
    c->tp = tp;
    c->lp = lp;
    c->cfd = fd;
    c->ufd = -1;
    c->state = TP_CONN_NEW;
    c->fresh = 1;
    c->deadline_ms = tp->host->loop->now_ms(tp->ctx) + tp->cfg->health_timeout_ms;
    c->accepted_us = tp_mono_us();
    if (lp->client_opts == TP_OPTS_UNVERIFIED) {
        lp->client_opts = tp_sockopts_present(fd) ? TP_OPTS_INHERITED : TP_OPTS_PER_SOCKET;
        if (lp->client_opts == TP_OPTS_PER_SOCKET)
            PLB_INFO(tp->host, tp->ctx, NULL,
                     "accepted sockets do not inherit the listener's options: "
                     "setting them on each");
    }
    if (lp->client_opts == TP_OPTS_PER_SOCKET)
        tp_sockopts(fd);
    attach(c, d);
    c->last = (uint8_t)last;
    conn_drive(c, TP_EV_START);
}

/* Called from the pool's draining callback, inside a pool update (no pool
 * tick runs meanwhile), so only the connection being driven can leave the
 * list: its successor stays valid. */
void
tp_conns_upstream_draining(struct tp_upd *d)
{
    struct tp_conn *c = d->conns;
    while (c) {
        struct tp_conn *next = c->next;
        if (c->state == TP_CONN_RESOLVING || c->state == TP_CONN_DIALING)
            conn_drive(c, TP_EV_UPSTREAM_DRAINING);
        c = next;
    }
}

void
tp_conns_close_upstream(struct tp_upd *d)
{
    while (d->conns)
        conn_drive(d->conns, TP_EV_KILL);
}

void
tp_conns_close_all(struct tp *tp)
{
    for (size_t i = 0; i < tp_pool_count(tp->pool); i++) {
        struct tp_up *u = tp_pool_at(tp->pool, i);
        if (u->data)
            tp_conns_close_upstream(u->data);
    }
}
