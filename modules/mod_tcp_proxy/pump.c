/*
 * pump: the forwarding of an open connection (conn.c runs the state
 * machine), the socket options of both sides and the pipe pool.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <prismlb/module_util.h>

#include "conn_int.h"

/* One per loop thread. In a module (dynamic TLS) each access is a call of
 * __tls_get_addr, so a loop keeps its address (lp->copy, taken on the
 * loop's thread) and fill() reads it from there. */
static _Thread_local char copy_buf[COPY_BUF];

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
tp_sockopts_keepalive(int fd)
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
}

void
tp_sockopts_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void
tp_sockopts(int fd)
{
    tp_sockopts_keepalive(fd);
    tp_sockopts_nodelay(fd);
}

/* Late keepalive options of upstream sockets. Keepalive (30 s idle) and
 * the user timeout (30 s) matter to a connection that lives; most client
 * connections that close do so within a second, and setting them costs
 * four system calls per connection. So an open connection joins the
 * current generation, and each sweep (LATE_MS apart, armed only while a
 * generation has members) sets the options of the other, older one and
 * starts it anew: every connection gets them between LATE_MS and twice
 * that after it opened, and one that closed before pays nothing. */
#define LATE_MS 1000

static void
late_unlink(struct tp_conn *c)
{
    struct tp_loop *lp = c->lp;
    if (c->lprev)
        c->lprev->lnext = c->lnext;
    else
        lp->late[c->late - 1] = c->lnext;
    if (c->lnext)
        c->lnext->lprev = c->lprev;
    c->lprev = c->lnext = NULL;
    c->late = 0;
}

void
tp_sockopts_late_drop(struct tp_conn *c)
{
    if (c->late)
        late_unlink(c);
}

void
tp_sockopts_late(struct tp_conn *c)
{
    struct tp_loop *lp = c->lp;
    const struct plb_host *h = lp->tp->host;
    if (c->late || c->ufd < 0)
        return;
    if (!lp->late_armed) {
        if (!lp->late_timer || h->loop->timer_arm(lp->late_timer, LATE_MS, 0, 0) < 0) {
            tp_sockopts_keepalive(c->ufd); /* no sweep: at once, then */
            return;
        }
        lp->late_armed = 1;
    }
    if (!lp->late_tag)
        lp->late_tag = 1;
    c->late = lp->late_tag;
    c->lprev = NULL;
    c->lnext = lp->late[c->late - 1];
    if (c->lnext)
        c->lnext->lprev = c;
    lp->late[c->late - 1] = c;
}

void
tp_sockopts_sweep(plb_timer *t, void *arg)
{
    struct tp_loop *lp = arg;
    const struct plb_host *h = lp->tp->host;
    uint8_t older = lp->late_tag == 1 ? 2 : 1;
    (void)t;
    lp->late_armed = 0;
    while (lp->late[older - 1]) {
        struct tp_conn *c = lp->late[older - 1];
        tp_sockopts_keepalive(c->ufd);
        late_unlink(c);
    }
    lp->late_tag = older; /* the current one becomes the older */
    if (!lp->late[0] && !lp->late[1])
        return;
    if (h->loop->timer_arm(lp->late_timer, LATE_MS, 0, 0) == 0) {
        lp->late_armed = 1;
        return;
    }
    /* Cannot wait: now, then. */
    for (int i = 0; i < 2; i++)
        while (lp->late[i]) {
            struct tp_conn *c = lp->late[i];
            tp_sockopts_keepalive(c->ufd);
            late_unlink(c);
        }
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
pipe_get(struct tp_loop *lp)
{
    struct tp *tp = lp->tp;
    struct tp_pipe *p = lp->pipes;
    int fds[2];

    if (p) {
        lp->pipes = p->next;
        lp->npipes--;
        p->next = NULL;
        return p;
    }
    p = tp->host->mem->alloc(sizeof(*p));
    if (!p)
        return NULL;
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) {
        tp->host->mem->free(p);
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
pipe_put(struct tp_loop *lp, struct tp_pipe *p, int empty)
{
    struct tp *tp = lp->tp;
    if (empty && lp->npipes < SPARE_PIPES && !lp->stopping) {
        p->next = lp->pipes;
        lp->pipes = p;
        lp->npipes++;
        return;
    }
    close(p->rd);
    close(p->wr);
    tp->host->mem->free(p);
}

void
tp_pipes_free(struct tp_loop *lp)
{
    struct tp *tp = lp->tp;
    while (lp->pipes) {
        struct tp_pipe *p = lp->pipes;
        lp->pipes = p->next;
        close(p->rd);
        close(p->wr);
        tp->host->mem->free(p);
    }
    lp->npipes = 0;
}

void
tp_dir_release(struct tp_loop *lp, struct tp_dir *dr)
{
    struct tp *tp = lp->tp;
    if (dr->pipe)
        pipe_put(lp, dr->pipe, 0);
    dr->pipe = NULL;
    tp->host->mem->free(dr->buf);
    dr->buf = NULL;
    dr->len = dr->off = 0;
}

void
tp_redial_free(struct tp *tp, struct tp_conn *c)
{
    tp->host->mem->free(c->tried);
    tp->host->mem->free(c->replay);
    c->tried = NULL;
    c->replay = NULL;
    c->rlen = c->ntried = c->tcap = 0;
}

/* Errors of a dial, or of an upstream right after it, that another
 * upstream may not have: refused, reset, unreachable, timed out. */
int
tp_conn_retryable(int err)
{
    switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
    case ETIMEDOUT:
        return 1;
    default:
        return 0;
    }
}

/* The first upstream byte is on its way to the client (or the replay
 * would grow too large): no redial from now on. */
static void
unfresh(struct tp_conn *c)
{
    c->fresh = 0;
    tp_redial_free(c->tp, c);
}

/* Keep n bytes read from the client (in the copy buffer) for a redial. */
static void
replay_keep(struct tp_conn *c, const char *data, size_t n)
{
    const struct plb_host *h = c->tp->host;
    if (n > REPLAY_MAX - c->rlen) {
        unfresh(c);
        return;
    }
    char *nb = h->mem->realloc(c->replay, c->rlen + n);
    if (!nb) {
        unfresh(c);
        return;
    }
    memcpy(nb + c->rlen, data, n);
    c->replay = nb;
    c->rlen += (uint32_t)n;
}

/* ------------------------------------------------------------------------ */
/* Forwarding                                                               */

/* recv(2) and send(2) straight to the kernel. glibc's wrappers of these
 * cancellation points, in a process with more than one thread (workers),
 * switch the thread's asynchronous cancellation on and off around each
 * call: two atomic updates, measured at about 100 ns a call against the
 * bare system call. prismlb never cancels a thread, and a keep-alive
 * request makes four of these calls. Same results and errno as recv and
 * send. */
static ssize_t
sys_recv(int fd, void *buf, size_t len)
{
    return syscall(SYS_recvfrom, fd, buf, len, 0, NULL, NULL);
}

static ssize_t
sys_send(int fd, const void *buf, size_t len)
{
    return syscall(SYS_sendto, fd, buf, len, MSG_NOSIGNAL, NULL, 0);
}

/* Send what d holds to dst. 1: all flushed; 0: would block; -1: error. */
static int
flush(struct tp_loop *lp, struct tp_dir *dr, int dst)
{
    struct tp *tp = lp->tp;
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
        pipe_put(lp, dr->pipe, 1);
        dr->pipe = NULL;
    }
    while (dr->buf && dr->off < dr->len) {
        ssize_t n = sys_send(dst, dr->buf + dr->off, dr->len - dr->off);
        if (n > 0) {
            dr->off += (uint32_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && errno == EAGAIN ? 0 : -1;
    }
    if (dr->buf) {
        tp->host->mem->free(dr->buf);
        dr->buf = NULL;
        dr->len = dr->off = 0;
    }
    return 1;
}

/* Read from src and, in copy mode, send at once. Returns bytes read, 0 on
 * EOF, -EAGAIN when nothing is there, another -errno on error. Data that
 * could not be sent stays in dr (pipe or buffer). *drained: a copy read
 * came back short, so src held no more (a splice can come back short with
 * data left, when the pipe runs out of slots: it never says drained).
 * keep: a fresh connection whose client bytes are kept for a redial (copy
 * mode then), or NULL. *bad: the socket of an error. */
static ssize_t
fill(struct tp_loop *lp, struct tp_dir *dr, int src, int dst, int *drained, struct tp_conn *keep,
     int *bad)
{
    struct tp *tp = lp->tp;
    int copy_only = keep != NULL;
    char *buf = lp->copy ? lp->copy : (lp->copy = copy_buf);
    *drained = 0;
    *bad = src;
    ssize_t n;

    if (dr->bulk && !lp->no_splice && !copy_only) {
        struct tp_pipe *p = pipe_get(lp);
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
            pipe_put(lp, p, 1);
            if (n == 0)
                return 0;
            if (e != EINVAL)
                return -e;
            lp->no_splice = 1; /* not for these fds: copy from now on */
            PLB_WARN(tp->host, tp->ctx, NULL, "splice(2) unavailable: using buffered copies");
        }
    }
    do
        n = sys_recv(src, buf, COPY_BUF);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return n == 0 ? 0 : -errno;
    *drained = n < (ssize_t)COPY_BUF;
#ifndef TP_FORCE_COPY
    if (n == (ssize_t)COPY_BUF)
        dr->bulk = 1; /* more is coming: splice from now on */
#endif
    if (keep)
        replay_keep(keep, buf, (size_t)n);
    *bad = dst;
    ssize_t sent = 0;
    while (sent < n) {
        ssize_t w = sys_send(dst, buf + sent, (size_t)(n - sent));
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
        dr->buf = tp->host->mem->alloc((size_t)(n - sent));
        if (!dr->buf)
            return -ENOMEM;
        memcpy(dr->buf, buf + sent, (size_t)(n - sent));
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

/* Move data in direction i as far as the sockets allow (see conn_int.h). */
int
tp_pump(struct tp_conn *c, int i)
{
    struct tp *tp = c->tp;
    struct tp_loop *lp = c->lp;
    struct tp_dir *dr = &c->dir[i];
    int src = i ? c->ufd : c->cfd, dst = i ? c->cfd : c->ufd;
    uint8_t r = i ? R_U : R_C, w = i ? W_C : W_U, fin = i ? H_U : H_C;
    size_t moved = 0;
    int err = 0, bad = -1;

    for (;;) {
        if (pending(dr)) {
            if (!(c->rdy & w))
                return 0; /* the destination's watch says when */
            int f = flush(lp, dr, dst);
            if (f < 0) {
                err = errno;
                bad = dst;
                goto close;
            }
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
            tp->host->loop->io_activate(i ? c->uio : c->cio, PLB_IO_READ);
            return 0;
        }
        int drained;
        ssize_t n = fill(lp, dr, src, dst, &drained, !i && c->fresh ? c : NULL, &bad);
        if (n == -EAGAIN) {
            c->rdy &= (uint8_t)~r;
            return 0;
        }
        if (n < 0) {
            err = (int)-n;
            goto close;
        }
        if (n == 0) {
            dr->eof = 1;
            continue;
        }
        if (i && c->fresh)
            unfresh(c); /* the first upstream byte reached the client */
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
    /* An upstream that resets before its first byte is a failed dial. */
    if (c->fresh && bad >= 0 && bad == c->ufd && tp_conn_retryable(err))
        return err;
    return TP_PUMP_CLOSE;
}
