/*
 * conn: the data path. One explicit state machine per proxied connection,
 * driven by one function, conn_drive(), from every event that concerns it.
 *
 *   NEW --start--> RESOLVING --resolved--> DIALING --connected--> OPEN
 *                      |                     |  \--draining--> (one retry) DIALING
 *                      +--failed-------------+--failed/timeout--> CLOSED
 *   OPEN: two directions pumped independently; EOF on one side becomes
 *   shutdown(SHUT_WR) on the other once its data is flushed (half-close is
 *   carried through); the connection closes when both directions ended,
 *   on an error, when its upstream's drain or readiness deadline says so,
 *   or at shutdown.
 *
 * Forwarding per direction is adaptive: small reads go through one shared
 * copy buffer (recv + send: the cheapest path for request/response
 * traffic); once a read fills that buffer the direction switches to
 * splice(2) through a pipe, zero-copy, until reads get small again. Pipes
 * come from a per-instance pool and are held only while data sits in them;
 * a partial send of copied data keeps its remainder in a buffer allocated
 * for that direction until it is flushed. So an idle connection owns two
 * sockets, two watches and this struct, and nothing else.
 *
 * Each socket has one edge-triggered watch for reading and writing, added
 * once and never changed: readiness is remembered per socket (set by an
 * event, cleared by EAGAIN or, for copies, a short read), so a connection
 * costs two epoll_ctl calls to add and two to remove, whatever its traffic.
 * A short copy read that follows a reported FIN is the EOF: no read of 0
 * is needed to learn it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tp.h"

#ifndef COPY_BUF
#define COPY_BUF 16384 /* shared copy buffer; a full read means bulk */
#endif
/* One splice moves at most a default pipe's 64 KiB: measured faster than
 * 256 KiB or 1 MiB pipes on loopback (the pages stay cache-hot). */
#ifndef SPLICE_LEN
#define SPLICE_LEN 65536 /* bytes asked of one splice into a pipe */
#endif
#ifndef PIPE_SIZE
#define PIPE_SIZE 0 /* pipe capacity to request; 0: the default */
#endif
#define SMALL_READ 4096        /* a splice this small returns to copy mode */
#define PUMP_BUDGET (4u << 20) /* bytes per direction per event: fairness */
#define SPARE_PIPES 64

enum tp_conn_state {
    TP_CONN_NEW = 0,
    TP_CONN_RESOLVING,
    TP_CONN_DIALING,
    TP_CONN_OPEN,
    TP_CONN_CLOSED,
};

enum tp_conn_event {
    TP_EV_START,
    TP_EV_RESOLVED,
    TP_EV_RESOLVE_FAILED,
    TP_EV_DIAL_WRITABLE,
    TP_EV_DIAL_TIMEOUT,
    TP_EV_CLIENT_READY,   /* the client socket's watch fired */
    TP_EV_UPSTREAM_READY, /* the upstream socket's watch fired (open) */
    TP_EV_UPSTREAM_DRAINING,
    TP_EV_KILL,
};

/* One direction: client->upstream (0) or upstream->client (1). */
struct tp_dir {
    struct tp_pipe *pipe; /* holds len bytes (splice mode), else NULL */
    char *buf;            /* holds len - off bytes (copy remainder), else NULL */
    uint32_t len, off;
    uint8_t eof;  /* the source reached EOF */
    uint8_t shut; /* shutdown(SHUT_WR) done on the destination */
    uint8_t bulk; /* next read uses splice */
};

struct tp_conn {
    struct tp *tp;
    struct tp_upd *d; /* the upstream it is on (dialing or open) */
    struct tp_conn *prev, *next;
    plb_io *cio, *uio; /* the sockets' watches */
    struct tp_resolve *res;
    struct tp_dir dir[2];
    int cfd, ufd;
    uint8_t state;
    uint8_t retried;
    uint8_t rdy;     /* R_*, W_*, H_* */
    uint8_t ev_what; /* PLB_IO_* of the upstream event being driven */
};

/* What each socket is known to allow; an upstream bit is its client bit
 * shifted left by one. */
#define R_C 0x01 /* the client socket may have data to read */
#define R_U 0x02
#define W_C 0x04 /* the client socket may take data */
#define W_U 0x08
#define H_C 0x10 /* the client's FIN was reported */
#define H_U 0x20
#define UPSTREAM(bits) ((uint8_t)((bits) << 1))

#define WATCH (PLB_IO_READ | PLB_IO_WRITE | PLB_IO_EDGE | PLB_IO_CLOSED)

static char copy_buf[COPY_BUF]; /* the loop is single-threaded */

static void conn_drive(struct tp_conn *c, enum tp_conn_event ev);

/* ------------------------------------------------------------------------ */
/* Socket options and pipes                                                 */

/* Whether TCP_KEEPCNT must be set on each socket: not when the system's
 * default probe count already is TP_KEEPALIVE_CNT (saves a system call per
 * socket on every connection). */
static int set_keepcnt = 1;

void
tp_sockopts_init(void)
{
    char buf[32];
    int fd = open("/proc/sys/net/ipv4/tcp_keepalive_probes", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n > 0) {
        buf[n] = '\0';
        set_keepcnt = atoi(buf) != TP_KEEPALIVE_CNT;
    }
}

void
tp_sockopts(int fd)
{
    int one = 1, idle = TP_KEEPALIVE_IDLE_S, intvl = TP_KEEPALIVE_INTVL_S, cnt = TP_KEEPALIVE_CNT;
    unsigned int ut = TP_USER_TIMEOUT_MS;
    /* Best effort: a socket without them still works. */
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    if (set_keepcnt)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int
tp_sockopts_present(int fd)
{
    int ka = 0, idle = 0, intvl = 0, cnt = 0, nodelay = 0;
    unsigned int ut = 0;
    socklen_t l = sizeof(int), lu = sizeof(ut);

    if (getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &ka, &l) < 0 ||
        getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, &l) < 0 ||
        getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, &l) < 0 ||
        getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, &l) < 0 ||
        getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, &lu) < 0 ||
        getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &l) < 0)
        return 0;
    return ka && idle == TP_KEEPALIVE_IDLE_S && intvl == TP_KEEPALIVE_INTVL_S &&
           cnt == TP_KEEPALIVE_CNT && ut == TP_USER_TIMEOUT_MS && nodelay;
}

static struct tp_pipe *
pipe_get(struct tp *tp)
{
    struct tp_pipe *p = tp->pipes;
    int fds[2];

    if (p) {
        tp->pipes = p->next;
        tp->npipes--;
        p->next = NULL;
        return p;
    }
    p = tp->host->alloc(sizeof(*p));
    if (!p)
        return NULL;
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) {
        tp->host->free(p);
        return NULL;
    }
    if (PIPE_SIZE > 0)
        (void)fcntl(fds[1], F_SETPIPE_SZ, PIPE_SIZE); /* best effort */
    p->rd = fds[0];
    p->wr = fds[1];
    return p;
}

/* Give back an empty pipe (a pipe with data in it is closed instead). */
static void
pipe_put(struct tp *tp, struct tp_pipe *p, int empty)
{
    if (empty && tp->npipes < SPARE_PIPES && !tp->stopping) {
        p->next = tp->pipes;
        tp->pipes = p;
        tp->npipes++;
        return;
    }
    close(p->rd);
    close(p->wr);
    tp->host->free(p);
}

void
tp_pipes_free(struct tp *tp)
{
    while (tp->pipes) {
        struct tp_pipe *p = tp->pipes;
        tp->pipes = p->next;
        close(p->rd);
        close(p->wr);
        tp->host->free(p);
    }
    tp->npipes = 0;
}

static void on_cio(plb_io *io, int fd, int what, void *arg);
static void on_uio(plb_io *io, int fd, int what, void *arg);

/* ------------------------------------------------------------------------ */
/* Upstream lists                                                           */

static void
attach(struct tp_conn *c, struct tp_upd *d)
{
    c->d = d;
    c->prev = NULL;
    c->next = d->conns;
    if (d->conns)
        d->conns->prev = c;
    d->conns = c;
    tp_pool_conn_opened(c->tp->pool, d->up);
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
    tp_pool_conn_closed(c->tp->pool, d->up);
}

/* ------------------------------------------------------------------------ */
/* Closing                                                                  */

static void
dir_release(struct tp *tp, struct tp_dir *dr)
{
    if (dr->pipe)
        pipe_put(tp, dr->pipe, 0);
    dr->pipe = NULL;
    tp->host->free(dr->buf);
    dr->buf = NULL;
    dr->len = dr->off = 0;
}

/* Close everything of c and free it. */
static void
conn_close(struct tp_conn *c)
{
    struct tp *tp = c->tp;
    const struct plb_host *h = tp->host;
    int was_open = c->state == TP_CONN_OPEN;
    int draining = c->d && c->d->up->draining;

    c->state = TP_CONN_CLOSED;
    tp_resolve_cancel(c->res);
    h->io_free(c->cio);
    h->io_free(c->uio);
    if (c->cfd >= 0)
        close(c->cfd);
    if (c->ufd >= 0)
        close(c->ufd);
    dir_release(tp, &c->dir[0]);
    dir_release(tp, &c->dir[1]);
    detach(c);
    if (was_open) {
        tp->nconns--;
        tp_metrics_conn(tp, -1, 0);
    }
    h->free(c);
    /* The last connection of a draining upstream completes its drain. */
    if (draining)
        tp_after_event(tp);
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

    c->ufd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->ufd < 0)
        return TP_EV_DIAL_TIMEOUT; /* a failed dial, counted as such */
    tp_sockopts(c->ufd);
    c->state = TP_CONN_DIALING;
    /* The watch is added after connect(): an unconnected socket polls as
     * hung up, which would read as a failed dial. */
    int now = connect(c->ufd, sa, d->salen) == 0;
    if (!now && errno != EINPROGRESS)
        return TP_EV_DIAL_TIMEOUT;
    /* The socket's watch doubles as the dial timer: dial timeout is
     * health_timeout. */
    c->uio = c->tp->host->io_new(c->tp->ctx, c->ufd, WATCH, on_uio, c);
    if (!c->uio || c->tp->host->io_add(c->uio, now ? 0 : c->tp->cfg->health_timeout_ms) < 0)
        return TP_EV_DIAL_TIMEOUT;
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
    tp_resolve_cancel(c->res);
    c->res = NULL;
    h->io_free(c->uio);
    c->uio = NULL;
    if (c->ufd >= 0)
        close(c->ufd);
    c->ufd = -1;
}

/* The upstream started draining while c dials it: one retry on another
 * pickable upstream, if there is one. Returns 1 if c moved. */
static int
dial_retry(struct tp_conn *c)
{
    struct tp *tp = c->tp;
    if (c->retried)
        return 0;
    struct tp_up *u = tp_pool_pick(tp->pool, c->d->up);
    if (!u || !u->data)
        return 0;
    c->retried = 1;
    TP_LOG(tp, PLB_LOG_INFO, "upstream %s drains during a dial: retrying on %s", c->d->up->addr,
           u->addr);
    dial_abort(c);
    detach(c);
    attach(c, u->data);
    dial_begin(c);
    return 1;
}

static void
dial_failed(struct tp_conn *c, const char *why)
{
    struct tp *tp = c->tp;
    struct tp_upd *d = c->d;
    int was = d->up->healthy;

    TP_LOG(tp, PLB_LOG_WARN, "dial to upstream %s failed: %s", d->up->addr, why);
    tp_pool_dial_result(tp->pool, d->up, 0);
    tp_metrics_conn_error(tp, d);
    int changed = was != (int)d->up->healthy;
    conn_close(c); /* d may be gone after this (a drain completed) */
    if (changed)
        tp_after_event(tp);
}

/* The dial succeeded (what: the upstream event that said so): start
 * forwarding. -1 when c must be closed, 1 when forwarding closed it. The
 * pool event comes last: it may close c (the caller touches c no more). */
static int pump(struct tp_conn *c, int i);

/* The readiness bits an event reports, as the client socket's. */
static uint8_t
reported(int what)
{
    return (uint8_t)(((what & PLB_IO_READ) ? R_C : 0) | ((what & PLB_IO_WRITE) ? W_C : 0) |
                     ((what & PLB_IO_CLOSED) ? H_C : 0));
}

static int
established(struct tp_conn *c, int what)
{
    struct tp *tp = c->tp;
    const struct plb_host *h = tp->host;
    int was = c->d->up->healthy;

    c->state = TP_CONN_OPEN;
    tp->nconns++;
    tp_pool_dial_result(tp->pool, c->d->up, 1);
    tp_metrics_conn(tp, 1, 1);
    /* Both sockets take data until they say EAGAIN. The client has most
     * likely spoken already (a TLS hello, a request): read it now rather
     * than an event later. */
    c->rdy = R_C | W_C | W_U | UPSTREAM(reported(what));
    if (h->io_add(c->uio, 0) < 0 || !(c->cio = h->io_new(tp->ctx, c->cfd, WATCH, on_cio, c)) ||
        h->io_add(c->cio, 0) < 0) {
        TP_LOG(tp, PLB_LOG_ERROR, "cannot watch a new connection (out of memory)");
        return -1;
    }
    int changed = was != (int)c->d->up->healthy;
    int closed = pump(c, 0) < 0 || pump(c, 1) < 0;
    if (changed)
        tp_after_event(tp);
    return closed;
}

/* ------------------------------------------------------------------------ */
/* Forwarding                                                               */

/* Send what d holds to dst. 1: all flushed; 0: would block; -1: error. */
static int
flush(struct tp *tp, struct tp_dir *dr, int dst)
{
    while (dr->pipe && dr->len) {
        ssize_t n =
            splice(dr->pipe->rd, NULL, dst, NULL, dr->len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0) {
            dr->len -= (uint32_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && errno == EAGAIN ? 0 : -1;
    }
    if (dr->pipe) {
        pipe_put(tp, dr->pipe, 1);
        dr->pipe = NULL;
    }
    while (dr->buf && dr->off < dr->len) {
        ssize_t n = send(dst, dr->buf + dr->off, dr->len - dr->off, MSG_NOSIGNAL);
        if (n > 0) {
            dr->off += (uint32_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && errno == EAGAIN ? 0 : -1;
    }
    if (dr->buf) {
        tp->host->free(dr->buf);
        dr->buf = NULL;
        dr->len = dr->off = 0;
    }
    return 1;
}

/* Read from src and, in copy mode, send at once. Returns bytes read, 0 on
 * EOF, -EAGAIN when nothing is there, another -errno on error. Data that
 * could not be sent stays in dr (pipe or buffer). *drained: a copy read
 * came back short, so src held no more (a splice can come back short with
 * data left, when the pipe runs out of slots: it never says drained). */
static ssize_t
fill(struct tp *tp, struct tp_dir *dr, int src, int dst, int *drained)
{
    *drained = 0;
    ssize_t n;

    if (dr->bulk && !tp->no_splice) {
        struct tp_pipe *p = pipe_get(tp);
        if (p) {
            do
                n = splice(src, NULL, p->wr, NULL, SPLICE_LEN, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            while (n < 0 && errno == EINTR);
            if (n > 0) {
                dr->pipe = p;
                dr->len = (uint32_t)n;
                if (n < SMALL_READ)
                    dr->bulk = 0;
                return n;
            }
            int e = errno;
            pipe_put(tp, p, 1);
            if (n == 0)
                return 0;
            if (e != EINVAL)
                return -e;
            tp->no_splice = 1; /* not for these fds: copy from now on */
            TP_LOG(tp, PLB_LOG_WARN, "splice(2) unavailable: using buffered copies");
        }
    }
    do
        n = recv(src, copy_buf, sizeof(copy_buf), 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return n == 0 ? 0 : -errno;
    *drained = n < (ssize_t)sizeof(copy_buf);
#ifndef TP_FORCE_COPY
    if (n == (ssize_t)sizeof(copy_buf))
        dr->bulk = 1; /* more is coming: splice from now on */
#endif
    ssize_t sent = 0;
    while (sent < n) {
        ssize_t w = send(dst, copy_buf + sent, (size_t)(n - sent), MSG_NOSIGNAL);
        if (w > 0) {
            sent += w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN)
            return -errno;
        break;
    }
    if (sent < n) {
        /* Bounded: at most one copy buffer per direction, and reading stops
         * until it is flushed. */
        dr->buf = tp->host->alloc((size_t)(n - sent));
        if (!dr->buf)
            return -ENOMEM;
        memcpy(dr->buf, copy_buf + sent, (size_t)(n - sent));
        dr->len = (uint32_t)(n - sent);
        dr->off = 0;
    }
    return n;
}

static int
pending(const struct tp_dir *dr)
{
    return (dr->pipe && dr->len) || (dr->buf && dr->off < dr->len);
}

/* Move data in direction i as far as the sockets allow. 0, or -1 when c
 * was closed. */
static int
pump(struct tp_conn *c, int i)
{
    struct tp *tp = c->tp;
    struct tp_dir *dr = &c->dir[i];
    int src = i ? c->ufd : c->cfd, dst = i ? c->cfd : c->ufd;
    uint8_t r = i ? R_U : R_C, w = i ? W_C : W_U, fin = i ? H_U : H_C;
    size_t moved = 0;

    for (;;) {
        if (pending(dr)) {
            if (!(c->rdy & w))
                return 0; /* the destination's watch says when */
            int f = flush(tp, dr, dst);
            if (f < 0)
                goto close;
            if (f == 0) {
                c->rdy &= (uint8_t)~w;
                return 0;
            }
        }
        if (dr->eof) {
            /* Both directions ended: close() sends the last FIN, no
             * shutdown needed (nothing is left unread on either socket). */
            if (c->dir[!i].shut)
                goto close;
            if (!dr->shut) {
                shutdown(dst, SHUT_WR);
                dr->shut = 1;
            }
            return 0;
        }
        if (!(c->rdy & r))
            return 0;
        if (moved >= PUMP_BUDGET) {
            /* Fairness: the rest after the other connections' turn. */
            tp->host->io_activate(i ? c->uio : c->cio, PLB_IO_READ);
            return 0;
        }
        int drained;
        ssize_t n = fill(tp, dr, src, dst, &drained);
        if (n == -EAGAIN) {
            c->rdy &= (uint8_t)~r;
            return 0;
        }
        if (n < 0)
            goto close;
        if (n == 0) {
            dr->eof = 1;
            continue;
        }
        moved += (size_t)n;
        if (pending(dr) && !dr->pipe)
            c->rdy &= (uint8_t)~w; /* copy mode: the send was partial */
        if (drained) {
            /* Everything before a reported FIN has been read: EOF. */
            if (c->rdy & fin)
                dr->eof = 1;
            else
                c->rdy &= (uint8_t)~r;
        }
    }
close:
    conn_close(c);
    return -1;
}

/* ------------------------------------------------------------------------ */
/* The driver                                                               */

static void
conn_drive(struct tp_conn *c, enum tp_conn_event ev)
{
    if (ev == TP_EV_KILL) {
        conn_close(c);
        return;
    }
    switch ((enum tp_conn_state)c->state) {
    case TP_CONN_NEW:
        if (ev == TP_EV_START)
            dial_begin(c);
        return;
    case TP_CONN_RESOLVING:
        if (ev == TP_EV_UPSTREAM_DRAINING) {
            dial_retry(c);
            return;
        }
        if (ev == TP_EV_RESOLVE_FAILED) {
            dial_failed(c, "cannot resolve its host name");
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
            dial_retry(c);
            return;
        case TP_EV_DIAL_TIMEOUT:
            dial_failed(c, c->ufd < 0 ? strerror(errno) : "timeout or refused");
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
                    dial_failed(c, strerror(soerr));
                    return;
                }
            }
            if (established(c, what) < 0)
                conn_close(c);
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
    c->rdy |= reported(what);
    conn_drive(c, TP_EV_CLIENT_READY);
}

static void
on_uio(plb_io *io, int fd, int what, void *arg)
{
    struct tp_conn *c = arg;
    (void)io, (void)fd;
    if (c->state == TP_CONN_DIALING) {
        c->ev_what = (uint8_t)what;
        conn_drive(c, (what & PLB_IO_TIMEOUT) ? TP_EV_DIAL_TIMEOUT : TP_EV_DIAL_WRITABLE);
        return;
    }
    c->rdy |= UPSTREAM(reported(what));
    conn_drive(c, TP_EV_UPSTREAM_READY);
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                             */

void
tp_on_accept(plb_listener *l, int fd, const char *peer, void *arg)
{
    struct tp *tp = arg;
    (void)l;

    if (tp->stopping) {
        close(fd);
        return;
    }
    struct tp_up *u = tp_pool_pick(tp->pool, NULL);
    if (!u || !u->data) {
        TP_LOG(tp, PLB_LOG_WARN, "no upstream available for %s: closing it", peer);
        close(fd);
        return;
    }
    struct tp_conn *c = tp->host->alloc(sizeof(*c));
    if (!c) {
        TP_LOG(tp, PLB_LOG_ERROR, "out of memory accepting %s: closing it", peer);
        close(fd);
        return;
    }
    c->tp = tp;
    c->cfd = fd;
    c->ufd = -1;
    c->state = TP_CONN_NEW;
    if (tp->client_opts == TP_OPTS_UNVERIFIED) {
        tp->client_opts = tp_sockopts_present(fd) ? TP_OPTS_INHERITED : TP_OPTS_PER_SOCKET;
        if (tp->client_opts == TP_OPTS_PER_SOCKET)
            TP_LOG(tp, PLB_LOG_INFO, "accepted sockets do not inherit the listener's options: "
                                     "setting them on each");
    }
    if (tp->client_opts == TP_OPTS_PER_SOCKET)
        tp_sockopts(fd);
    attach(c, u->data);
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
