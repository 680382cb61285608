/*
 * conn_int.h: private to conn.c and pump.c. One proxied connection, its two
 * directions and what each socket is known to allow.
 */
#ifndef TP_CONN_INT_H
#define TP_CONN_INT_H

#include <stdint.h>
#include <sys/types.h>

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
#define REPLAY_MAX COPY_BUF /* client bytes kept for a redial */

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
    struct tp_loop *lp; /* the loop it runs on */
    struct tp_upd *d;   /* the upstream it is on (dialing or open) */
    struct tp_conn *prev, *next;
    struct tp_conn *lprev, *lnext; /* in lp->late[late - 1] */
    plb_io *cio, *uio;             /* the sockets' watches */
    struct tp_resolve *res;
    /* While fresh: every byte read from the client so far, and the ids of
     * the upstreams dialed before the current one (both NULL until
     * needed). */
    char *replay;
    uint32_t *tried;
    uint32_t rlen, ntried, tcap;
    int64_t deadline_ms; /* accept + health_timeout: the end of redialing */
    double accepted_us;  /* monotonic: when the client was accepted */
    double dial_us;      /* monotonic: when the current dial began */
    struct tp_dir dir[2];
    int cfd, ufd;
    uint8_t state;
    uint8_t fresh;    /* no upstream byte reached the client yet */
    uint8_t rdy;      /* R_*, W_*, H_* */
    uint8_t ev_what;  /* PLB_IO_* of the upstream event being driven */
    uint8_t dial_err; /* errno of a dial that failed at once (0: timeout) */
    uint8_t last;     /* the current dial is a last-resort pick: its outcome
                         is counted in prismlb_last_resort_dials_total, not
                         as a connection error */
    uint8_t late;     /* the generation of lp->late it is in, 0: none */
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

/* The readiness bits an event reports, as the client socket's. */
static inline uint8_t
tp_reported(int what)
{
    return (uint8_t)(((what & PLB_IO_READ) ? R_C : 0) | ((what & PLB_IO_WRITE) ? W_C : 0) |
                     ((what & PLB_IO_CLOSED) ? H_C : 0));
}

/* pump.c (conn.c calls it; it calls nothing of conn.c) */

/* Errors of a dial, or of an upstream right after it, that another
 * upstream may not have: refused, reset, unreachable, timed out. */
int tp_conn_retryable(int err);
/* tp_pump: c must be closed (by the caller). */
#define TP_PUMP_CLOSE (-1)
/* Move data in direction i (0: client to upstream) as far as the sockets
 * allow. 0: go on; TP_PUMP_CLOSE; or an errno > 0: the upstream failed c
 * before its first byte (reset, refused...), which the caller counts as a
 * failed dial (c may redial). c is not freed here either way. */
int tp_pump(struct tp_conn *c, int i);
/* TCP_NODELAY alone: an upstream socket's at its dial. */
void tp_sockopts_nodelay(int fd);
/* c is open: its upstream socket gets the keepalive options at the second
 * sweep from now (LATE_MS apart), if c is still open then: a short
 * connection never pays the system calls. */
void tp_sockopts_late(struct tp_conn *c);
/* c leaves the late list (closed, or its upstream socket goes). */
void tp_sockopts_late_drop(struct tp_conn *c);
/* Release what a direction holds (pipe, buffer). */
void tp_dir_release(struct tp_loop *lp, struct tp_dir *dr);
/* Free what a fresh connection keeps for a redial. */
void tp_redial_free(struct tp *tp, struct tp_conn *c);

#endif
