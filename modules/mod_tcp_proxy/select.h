/*
 * select: the proxy's upstream policy, without I/O.
 *
 * A pool holds one record per upstream address and applies every rule of
 * the spec that decides where a new connection goes and when existing ones
 * must close: the health streaks (checks and client dials), readiness,
 * the latency EWMA and its tiers with hysteresis, draining of removed
 * endpoints and readiness-driven closing. Time and randomness come from
 * injected functions, so the unit tests drive it with a fake clock.
 *
 * The pool never touches a socket. It tells its owner what to do through
 * struct tp_pool_ops (an upstream appeared, starts draining, must have its
 * connections closed, is gone) and tp_pool_tick() returns when it next needs
 * to be called.
 */
#ifndef TP_SELECT_H
#define TP_SELECT_H

#include <stddef.h>
#include <stdint.h>

/* Rule constants, named after the spec's sentences. */
#define TP_FAIL_THRESHOLD 2 /* consecutive failures that exclude / unready */
#define TP_EWMA_ALPHA 0.25  /* weight of a new (capped) sample */
#define TP_SAMPLE_CAP_FACTOR 4.0
#define TP_SAMPLE_CAP_FLOOR_MS 2.0
#define TP_SAMPLE_REPLACE_FRACTION 0.25
#define TP_TIER_SLACK_MS 2.0 /* limit = max(best + 2 ms, 2 × best) */
#define TP_TIER_FACTOR 2.0
#define TP_TIER_HYSTERESIS 1.25 /* leave a tier only above 1.25 × limit */

enum tp_selection { TP_SEL_RANDOM = 0, TP_SEL_LATENCY = 1 };
enum tp_check_kind { TP_CHECK_TCP = 0, TP_CHECK_READYZ = 1 };

/* One upstream. Fields are read by the owner; only select.c writes them. */
struct tp_up {
    char *addr;                 /* "host:port"; owned by the pool */
    unsigned healthy : 1;       /* health state after the failure threshold */
    unsigned draining : 1;      /* removed from the endpoint list, draining */
    unsigned ready : 1;         /* readyz state after the failure threshold */
    unsigned ready_known : 1;   /* at least one probe finished */
    unsigned probe_pending : 1; /* not ready until the next probe (new/reset) */
    unsigned has_sample : 1;    /* avg_ms is valid */
    unsigned closing : 1;       /* readiness-driven close armed */
    unsigned health_known : 1;  /* at least one check or dial finished */
    uint8_t fail_streak;        /* consecutive TCP failures (checks + dials) */
    uint8_t ready_fail_streak;  /* consecutive failed probes */
    int tier;                   /* latency tier, -1 without a sample */
    unsigned gid;               /* identity of its tier group (0: none) */
    double avg_ms;              /* smoothed connect time */
    int64_t drain_deadline;     /* monotonic ms; valid while draining */
    int64_t close_deadline;     /* monotonic ms; valid while closing */
    uint32_t nconns;            /* connections currently on this upstream */
    uint32_t drain_seq;         /* which drain of u this is (counts from 1) */
    uint32_t drain_holds;       /* acknowledgements of that drain still
                                   awaited before u may go (tp_pool_drain_hold) */
    uint32_t id;                /* unique in the pool's life, never 0 */
    void *data;                 /* the owner's per-upstream state */
};

struct tp_pool;

/* What the pool asks of its owner. Every callback may be NULL. They run
 * synchronously from the pool function that caused them. */
struct tp_pool_ops {
    /* A new upstream record exists (health checks should start). */
    void (*added)(void *arg, struct tp_up *u);
    /* u was removed from the endpoint list and now drains. */
    void (*draining)(void *arg, struct tp_up *u);
    /* u was re-added before its drain completed; the drain is called off. */
    void (*undrained)(void *arg, struct tp_up *u);
    /* Close every connection of u now (drain deadline, drain_timeout 0, or
     * readiness-driven closing). The owner calls tp_pool_conn_closed for
     * each; the pool does not count on it happening synchronously. */
    void (*close_conns)(void *arg, struct tp_up *u);
    /* u is about to be freed (its drain completed): release u->data. */
    void (*removed)(void *arg, struct tp_up *u);
};

struct tp_pool_env {
    int64_t (*now_ms)(void *arg); /* monotonic clock */
    double (*random)(void *arg);  /* uniform in [0, 1) */
    void *(*alloc)(size_t n);     /* zeroed */
    void (*free)(void *p);
    void *arg; /* passed to now_ms and random */
};

/* New pool; NULL on allocation failure. env and ops are copied; ops_arg is
 * borrowed for the pool's life. drain_timeout_ms >= 0. */
struct tp_pool *tp_pool_new(const struct tp_pool_env *env, const struct tp_pool_ops *ops,
                            void *ops_arg, enum tp_selection sel, enum tp_check_kind check,
                            int64_t drain_timeout_ms);
/* Free the pool and every record (without calling ops). NULL is fine. */
void tp_pool_free(struct tp_pool *p);

/* Number of records and the i-th one (borrowed until the next call that
 * may add or remove records). */
size_t tp_pool_count(const struct tp_pool *p);
struct tp_up *tp_pool_at(const struct tp_pool *p, size_t i);
struct tp_up *tp_pool_find(const struct tp_pool *p, const char *addr);
/* The record with this id, or NULL (removed). Borrowed. */
struct tp_up *tp_pool_find_id(const struct tp_pool *p, uint32_t id);

/* The endpoint list changed to addrs (borrowed). New addresses get records
 * (ops->added); addresses gone start draining (ops->draining, and with
 * drain_timeout 0 ops->close_conns at once); draining ones that are back are
 * undrained. 0 or -ENOMEM (then the records already changed stay). */
int tp_pool_update(struct tp_pool *p, const char *const *addrs, size_t n);

/* Result of a health check's TCP connect (connect_ms: its duration,
 * resolution included). Returns 1 when a readyz probe must follow. */
int tp_pool_check_result(struct tp_pool *p, struct tp_up *u, int ok, double connect_ms);
/* Result of a client dial: counts in the same streak as checks. */
void tp_pool_dial_result(struct tp_pool *p, struct tp_up *u, int ok);
/* Result of a readyz probe. */
void tp_pool_probe_result(struct tp_pool *p, struct tp_up *u, int ok);

/* Connection tracking. */
void tp_pool_conn_opened(struct tp_pool *p, struct tp_up *u);
void tp_pool_conn_closed(struct tp_pool *p, struct tp_up *u);
/* The owner's counts of u's connections arrive late (from other threads):
 * u, draining, is not removed while n acknowledgements of its current
 * drain (u->drain_seq) are awaited, or until its drain deadline, whichever
 * comes first. */
void tp_pool_drain_hold(struct tp_up *u, uint32_t n);
/* One acknowledgement of drain seq of u (one of an older drain counts for
 * nothing). 1 when it was the last one awaited, else 0. The caller runs
 * tp_pool_tick after it. */
int tp_pool_drain_ack(struct tp_up *u, uint32_t seq);

/* Pick an upstream for a new connection, never `exclude` (may be NULL).
 * NULL when nothing is pickable. Borrowed. */
struct tp_up *tp_pool_pick(struct tp_pool *p, const struct tp_up *exclude);
/* The same, never an upstream whose id is among tried[0..ntried). */
struct tp_up *tp_pool_pick_untried(struct tp_pool *p, const uint32_t *tried, size_t ntried);
/* The last resort when nothing is pickable (health state can be up to two
 * intervals stale): a random unhealthy, non-draining upstream whose id is
 * not among tried. NULL when there is none. Borrowed. */
struct tp_up *tp_pool_pick_last_resort(struct tp_pool *p, const uint32_t *tried, size_t ntried);
/* The picks above over any n records (copies of the pool's, in a snapshot
 * the workers read): tp_pool_pick_untried's policy, or with last_resort
 * tp_pool_pick_last_resort's. random: uniform in [0, 1). Borrowed. */
struct tp_up *tp_pick_in(struct tp_up *const *ups, size_t n, enum tp_selection sel,
                         enum tp_check_kind check, const uint32_t *tried, size_t ntried,
                         int last_resort, double (*random)(void *arg), void *arg);
/* Pickable: healthy and not draining. */
int tp_up_pickable(const struct tp_up *u);
/* Readiness for /readyz of the daemon: an upstream healthy and not draining. */
int tp_pool_any_active(const struct tp_pool *p);
size_t tp_pool_active_count(const struct tp_pool *p);

/* Evaluate deadlines and conditions now: arm, call off or fire
 * readiness-driven closing; force-close drains past their deadline; remove
 * drained records (ops->removed). Returns the monotonic ms of the next
 * deadline, or -1 if none. Call after every event and when that time comes. */
int64_t tp_pool_tick(struct tp_pool *p);

/* Recompute the latency tiers (done by the functions above when needed;
 * exposed for tests). */
void tp_pool_rebuild_tiers(struct tp_pool *p);

/* The EWMA rule alone: the new average after sample_ms (has_avg: whether
 * avg_ms is valid). Pure. */
double tp_ewma_update(int has_avg, double avg_ms, double sample_ms);
/* The tier limit for a best average: max(best + 2 ms, 2 × best). */
double tp_tier_limit(double best_ms);

/* The probe verdict: transport_ok (the request completed: no connect, TLS
 * or timeout error) and the status. 1 only for a completed 200. */
int tp_probe_ok(int transport_ok, int status);
/* One health_timeout covers the check's connect and its probe: the time left
 * for the probe when the check started at started_ms. 0 when none is left. */
int64_t tp_probe_budget_ms(int64_t timeout_ms, int64_t started_ms, int64_t now_ms);

#endif
