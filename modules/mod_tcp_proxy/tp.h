/*
 * tp.h: private to mod_tcp_proxy. The instance, its configuration, the
 * per-upstream state and the functions each file offers the others.
 *
 *   config.c    settings table, validators and the cross-setting check
 *   select.c    the pure upstream policy (select.h)
 *   resolve.c   asynchronous name resolution for hostname endpoints
 *   health.c    per-upstream health checks: TCP connect timing + /readyz
 *   conn.c      the data path: one state machine per proxied connection
 *   pump.c      its forwarding, socket options and pipes (conn_int.h)
 *   loop.c      the loop it runs on: watches, picks from the workers'
 *               snapshot, reports to the main loop (loop.h)
 *   metrics.c   the metric families and their series
 *   status.c    the instance as `prismlb status` shows it
 *   workers.c   the data path on the core's worker loops (threads > 1)
 *   mod_tcp_proxy.c  descriptor, lifecycle, endpoint links, pool glue
 *
 * No file calls back into one that calls it. From the top: mod_tcp_proxy.c
 * calls the others; workers.c calls conn.c, loop.c, pump.c, metrics.c and
 * select.c; conn.c calls pump.c, loop.c, resolve.c, metrics.c and
 * select.c; health.c calls conn.c (the clock), resolve.c and select.c;
 * loop.c and metrics.c call select.c; status.c calls workers.c. What goes
 * back up is a callback registered from above: tp.after_event,
 * tp_loop.on_report, the pool's ops.
 */
#ifndef TP_H
#define TP_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include <prismlb/module_util.h>

#include "select.h"

struct tp;

/* ------------------------------------------------------------------------ */
/* Configuration (config.c)                                                 */

struct tp_config {
    char *bind_address;
    int64_t bind_port;
    struct plb_strv upstreams;
    int64_t health_interval_ms;
    int64_t health_timeout_ms;
    int64_t drain_timeout_ms;
    int upstream_selection; /* enum tp_selection */
    int health_check;       /* enum tp_check_kind */
    char *health_check_ca_file;
    char *health_check_cert_file;
    char *health_check_key_file;
    char *health_check_token_file;
    char *health_check_server_name;
};

extern const struct plb_setting tp_settings[];
int tp_config_check(const struct plb_host *host, plb_check *chk, const void *config,
                    void (*report)(plb_check *, const char *, const char *, ...));

/* TCP keepalive and user timeout on both sides of every connection. */
#define TP_KEEPALIVE_IDLE_S 30
#define TP_KEEPALIVE_INTVL_S 15 /* Go's default probe interval */
#define TP_KEEPALIVE_CNT 9      /* Go's default probe count */
#define TP_USER_TIMEOUT_MS 30000

/* ------------------------------------------------------------------------ */
/* Endpoint addresses (resolve.c)                                           */

/* "host:port" split; host without IPv6 brackets. 0 or -EINVAL. */
int tp_split_hostport(const char *ep, char *host, size_t hostlen, int *port);
/* An IP literal (with port) into sa; 0 or -EINVAL when host is a name. */
int tp_parse_ip(const char *host, int port, struct sockaddr_storage *sa, socklen_t *salen);

struct tp_resolve;
/* Done: ok, the first address (borrowed for the call). */
typedef void (*tp_resolve_cb)(void *arg, int ok, const struct sockaddr *sa, socklen_t salen);
/* Resolve host:port without blocking the loop. New handle (freed by the
 * resolver after cb runs, or by tp_resolve_cancel); NULL on failure. */
struct tp_resolve *tp_resolve_start(struct tp *tp, const char *host, int port, tp_resolve_cb cb,
                                    void *arg);
/* Cancel: cb is not called. */
void tp_resolve_cancel(struct tp_resolve *r);
/* Drop resolutions that cannot be cancelled at shutdown. */
void tp_resolve_shutdown(struct tp *tp);

/* ------------------------------------------------------------------------ */
/* Per-upstream state of the module (tp_up.data)                            */

struct tp_conn;

struct tp_upd {
    struct tp *tp;
    struct tp_up *up;
    struct tp_conn *conns; /* connections on this upstream (incl. dialing) */
    char host[256];
    int port;
    int literal;                /* host is an IP literal: sa is fixed */
    int have_sa;                /* sa holds the last resolved address */
    struct sockaddr_storage sa; /* where client dials go */
    socklen_t salen;
    /* health check */
    plb_timer *timer;
    int check_fd;
    plb_io *check_io;
    struct tp_resolve *check_res;
    plb_http_req *probe;
    int64_t check_started_ms;
    double check_started_us;
    int errors_series; /* a connection_errors series exists */
};

/* ------------------------------------------------------------------------ */
/* The instance                                                             */

struct tp_metrics {
    plb_metric *upstreams_active, *upstreams_known, *connections_active, *connections_total,
        *connection_errors, *dial_retries, *rtt, *tier, *ready, *health, *last_resort,
        *dial_duration, *conn_duration;
};

struct tp_pipe {
    int rd, wr;
    struct tp_pipe *next;
};

struct tp_event;

/* A loop running connections: the main loop (threads = 1: tp->main_loop)
 * or one of the core's workers. Everything here is that loop's own; the
 * counters are written by it and read by the main loop's metrics collect
 * hook. */
struct tp_loop {
    struct tp *tp;          /* read-only from a worker: host, cfg, name, ctx */
    plb_worker *w;          /* NULL: the main loop */
    plb_listener *listener; /* a worker's own (SO_REUSEPORT) */
    struct tp_pipe *pipes;  /* spare empty pipes */
    unsigned npipes;
    char *copy;      /* the loop thread's copy buffer (pump.c), NULL until
                        its first read */
    int no_splice;   /* splice(2) unavailable: buffered copy only */
    int client_opts; /* enum tp_client_opts */
    int stopping;
    uint64_t rng;
    int stop_posted;     /* main only: W_STOP is in its mailbox */
    _Atomic int stopped; /* set by the worker once its stop is done */
    /* worker only */
    struct tp_upd **ups; /* its upstream records (by id), made on first use */
    size_t nups, cups;
    const void *last_snap; /* the snapshot the records were swept against */
    struct tp_event *ev;   /* reports not yet posted to the main loop */
    size_t nev, cev;
    plb_timer *flush; /* posts them (see REPORT_MS in loop.c) */
    /* Open connections whose upstream socket lacks its keepalive options
     * yet, in two generations (pump.c): late[tag - 1], tag 1 or 2. */
    struct tp_conn *late[2];
    uint8_t late_tag;                /* the generation joined now (0: none yet) */
    uint8_t late_armed;              /* the sweep timer is armed */
    plb_timer *late_timer;           /* sweeps; NULL: options at once */
    void (*on_report)(void *report); /* main loop: applies a batch (workers.c) */
    _Atomic uint64_t conns_total, retries, active;
};

struct tp_snap;

struct tp {
    const struct plb_host *host;
    plb_ctx *ctx;
    const struct tp_config *cfg;
    const char *name;
    struct tp_pool *pool;
    plb_listener *listener;
    plb_timer *tick;     /* the pool's next deadline */
    plb_timer *beat;     /* liveness heartbeat */
    plb_timer *relisten; /* retries a bind_address that needs resolving */
    struct tp_resolve *bind_res;
    struct tp_resolve *resolves; /* every running resolution */
    struct tp_conn *orphans;     /* dialing without an upstream record */
    struct tp_metrics m;
    uint64_t nconns;        /* connections passing through now (main loop) */
    struct plb_clock clock; /* the pool's time and picks (main loop) */
    /* After any event that may change the pool (a check, a dial's outcome,
     * a drain completed, a worker's reports): run its deadlines, re-arm the
     * tick timer, refresh readiness, the upstream gauges and the workers'
     * snapshot. Registered by mod_tcp_proxy.c at create; conn.c, health.c
     * and workers.c call it (main loop only). */
    void (*after_event)(struct tp *tp);
    int in_event; /* inside a pool update or tick: defer ticks */
    int again;    /* a deferred tick is owed */
    int stopping;
    int paused;               /* listener paused until the first endpoint set */
    int ready_state;          /* last value given to health_set, -1 none */
    struct tp_loop main_loop; /* threads = 1 */
    /* threads > 1 (workers.c) */
    size_t nloops;         /* workers running the data path; 0: none */
    struct tp_loop *loops; /* nloops of them */
    plb_snapshot *snap;    /* the upstream set the workers pick from */
    uint32_t *drain_ids;   /* upstreams that started draining: posted to the
                              workers after the next publish */
    size_t ndrain, cdrain;
    plb_timer *stop_poll; /* retries W_STOP posts, looks for stopped workers */
    plb_done *stop_done;
    uint64_t sum_total, sum_retries; /* what the counters had at the last collect */
};

/* How accepted sockets get their options: from the listening socket (set
 * there once, checked on the first accepted socket) or one by one. */
enum tp_client_opts {
    TP_OPTS_UNVERIFIED = 0, /* set on the listener; not yet checked */
    TP_OPTS_INHERITED,      /* accepted sockets have them */
    TP_OPTS_PER_SOCKET,     /* set on each accepted socket */
};

/* ------------------------------------------------------------------------ */
/* Health checks (health.c)                                                 */

/* The monotonic clock in microseconds (conn.c). */
double tp_mono_us(void);
/* Start checking u now, then every health_interval. 0 or -errno. */
int tp_health_start(struct tp_upd *d);
/* Cancel any check in flight (timer kept). */
void tp_health_cancel(struct tp_upd *d);

/* ------------------------------------------------------------------------ */
/* Data path (conn.c)                                                       */

/* arg: the struct tp_loop accepting. */
void tp_on_accept(plb_listener *l, int fd, const char *peer, void *arg);
/* The upstream starts draining: dialing connections move to another one. */
void tp_conns_upstream_draining(struct tp_upd *d);
/* Close every connection of an upstream now. */
void tp_conns_close_upstream(struct tp_upd *d);
/* Close every connection of the main loop (shutdown). */
void tp_conns_close_all(struct tp *tp);
/* Free spare pipes. */
void tp_pipes_free(struct tp_loop *lp);
/* Socket options of both sides: keepalive, user timeout, no delay. */
void tp_sockopts(int fd);
/* The keepalive and user timeout alone (an upstream socket gets them
 * late: tp_sockopts_late in conn_int.h). */
void tp_sockopts_keepalive(int fd);
/* lp->late_timer's callback (arg: lp): the connections opened before the
 * previous sweep get their upstream socket's keepalive options. */
void tp_sockopts_sweep(plb_timer *t, void *arg);
/* 1 if fd carries every option tp_sockopts sets (read back). */
int tp_sockopts_present(int fd);
/* Read the system's keepalive defaults once (at start; procfs). */
void tp_sockopts_init(void);

/* ------------------------------------------------------------------------ */
/* Status (status.c)                                                        */

/* The instance for `prismlb status` (plb_module.status): a new object, or
 * NULL when out of memory. */
plb_obj *tp_status(void *state);

/* Worker loops (workers.c)                                                 */

/* Event kinds a worker reports to the main loop about an upstream. */
enum tp_event_kind {
    TP_EV_OPENED,
    TP_EV_CLOSED,
    TP_EV_DIAL_OK,
    TP_EV_DIAL_FAILED,
    TP_EV_LAST_DIAL_OK, /* the same, for a last-resort dial */
    TP_EV_LAST_DIAL_FAILED,
    TP_EV_CONN_ENDED, /* a served connection closed (value: its duration) */
    TP_EV_DRAIN_SEEN, /* the worker saw drain seq of the upstream start:
                         its reports of it so far came before this one */
};

/* Start the data path on every worker (threads > 1): each listens on
 * bind_address (an IP) with SO_REUSEPORT, paused while `paused`. 0 or
 * -errno (the address cannot be bound). */
int tp_workers_start(struct tp *tp, const char *ip, int paused);
/* Resume every worker's listener (the first endpoint set arrived). */
void tp_workers_resume(struct tp *tp);
/* Publish the pool as the workers' snapshot (after each pool event). */
void tp_workers_publish(struct tp *tp);
/* Log that u drains, with its connection count. */
void tp_drain_log(struct tp *tp, const struct tp_up *u);
/* The pool asks: dialing connections of u move (draining), or every
 * connection of u closes; posted to every worker. */
void tp_workers_draining(struct tp *tp, const struct tp_up *u);
void tp_workers_close_upstream(struct tp *tp, const struct tp_up *u);
/* Stop every worker's data path; done(d) once all finished. */
void tp_workers_stop(struct tp *tp, plb_done *d);
/* Connections passing through now: the main loop's and every worker's
 * (main loop only; the workers' counts are read as they are). */
uint64_t tp_conns_active(const struct tp *tp);
/* Free what the instance keeps for the workers (after the stop). */
void tp_workers_fini(struct tp *tp);

/* A worker's data path reaches the pool through these (loop.c). */
/* The record of a pick from the snapshot (made on first use); NULL when
 * nothing fits. *last: it came from the last resort. */
struct tp_upd *tp_loop_pick(struct tp_loop *lp, const uint32_t *tried, size_t ntried, int *last);
/* Report an event about upstream d to the main loop. */
void tp_loop_report(struct tp_loop *lp, const struct tp_upd *d, enum tp_event_kind kind);
/* The same with a value: a duration in seconds (dials: -1 for none; a
 * connection that ended: how long it lasted). */
void tp_loop_report_value(struct tp_loop *lp, const struct tp_upd *d, enum tp_event_kind kind,
                          double v);
/* Acknowledge drain seq of upstream id (whether lp has a record of it or
 * not) after every report so far, posted at the end of this pass. */
void tp_loop_report_drain_seen(struct tp_loop *lp, uint32_t id, uint32_t seq);
/* A watch on the loop's own base. */
plb_io *tp_loop_io_new(struct tp_loop *lp, int fd, int what, plb_io_cb cb, void *arg);

/* ------------------------------------------------------------------------ */
/* Metrics (metrics.c)                                                      */

int tp_metrics_init(struct tp *tp);
/* Refresh every upstream gauge and the instance gauges. */
void tp_metrics_refresh(struct tp *tp);
void tp_metrics_conn(struct tp *tp, int established_delta, int total_inc);
/* A dial to d ended (ok or failed) after secs seconds (< 0: not a dial's
 * duration, a reset right after it). last: d was picked as the last resort
 * (no upstream was pickable): counted in prismlb_last_resort_dials_total;
 * else a failure is a connection error of d. Nothing while stopping. */
void tp_metrics_dial(struct tp *tp, struct tp_upd *d, int ok, int last, double secs);
/* A served connection closed after secs seconds. */
void tp_metrics_conn_ended(struct tp *tp, double secs);
/* A fresh connection moved to another upstream. */
void tp_metrics_dial_retry(struct tp *tp);
/* Remove the series of one upstream (drained and removed). */
void tp_metrics_forget(struct tp *tp, struct tp_upd *d);
/* Remove every series of the instance. */
void tp_metrics_fini(struct tp *tp);

#endif
