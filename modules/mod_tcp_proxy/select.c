/*
 * select: the upstream policy (see select.h). No I/O, no global state.
 */
#include "select.h"

#include <errno.h>
#include <string.h>

struct tp_pool {
    struct tp_pool_env env;
    struct tp_pool_ops ops;
    void *ops_arg;
    enum tp_selection sel;
    enum tp_check_kind check;
    int64_t drain_timeout_ms;
    struct tp_up **ups;
    size_t n, cap;
    unsigned next_gid;
    uint32_t next_id;
};

/* ------------------------------------------------------------------------ */
/* Pure rules                                                               */

double
tp_ewma_update(int has_avg, double avg_ms, double sample_ms)
{
    if (sample_ms < 0)
        sample_ms = 0;
    if (!has_avg)
        return sample_ms;
    /* A sample below a quarter of the average replaces it. */
    if (sample_ms < avg_ms * TP_SAMPLE_REPLACE_FRACTION)
        return sample_ms;
    /* Capped at four times the average, but never below 2 ms. */
    double cap = avg_ms * TP_SAMPLE_CAP_FACTOR;
    if (cap < TP_SAMPLE_CAP_FLOOR_MS)
        cap = TP_SAMPLE_CAP_FLOOR_MS;
    if (sample_ms > cap)
        sample_ms = cap;
    return avg_ms + TP_EWMA_ALPHA * (sample_ms - avg_ms);
}

double
tp_tier_limit(double best_ms)
{
    double a = best_ms + TP_TIER_SLACK_MS, b = best_ms * TP_TIER_FACTOR;
    return a > b ? a : b;
}

int
tp_up_pickable(const struct tp_up *u)
{
    return u->healthy && !u->draining;
}

/* ------------------------------------------------------------------------ */
/* Pool                                                                     */

struct tp_pool *
tp_pool_new(const struct tp_pool_env *env, const struct tp_pool_ops *ops, void *ops_arg,
            enum tp_selection sel, enum tp_check_kind check, int64_t drain_timeout_ms)
{
    if (!env || !env->alloc || !env->free || !env->now_ms || !env->random || drain_timeout_ms < 0)
        return NULL;
    struct tp_pool *p = env->alloc(sizeof(*p));
    if (!p)
        return NULL;
    p->env = *env;
    if (ops)
        p->ops = *ops;
    p->ops_arg = ops_arg;
    p->sel = sel;
    p->check = check;
    p->drain_timeout_ms = drain_timeout_ms;
    return p;
}

static void
up_free(struct tp_pool *p, struct tp_up *u)
{
    p->env.free(u->addr);
    p->env.free(u);
}

void
tp_pool_free(struct tp_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        up_free(p, p->ups[i]);
    p->env.free(p->ups);
    p->env.free(p);
}

size_t
tp_pool_count(const struct tp_pool *p)
{
    return p->n;
}

struct tp_up *
tp_pool_at(const struct tp_pool *p, size_t i)
{
    return i < p->n ? p->ups[i] : NULL;
}

struct tp_up *
tp_pool_find_id(const struct tp_pool *p, uint32_t id)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->ups[i]->id == id)
            return p->ups[i];
    return NULL;
}

struct tp_up *
tp_pool_find(const struct tp_pool *p, const char *addr)
{
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->ups[i]->addr, addr) == 0)
            return p->ups[i];
    }
    return NULL;
}

static int64_t
now(struct tp_pool *p)
{
    return p->env.now_ms(p->env.arg);
}

/* A new record for addr; NULL on allocation failure. */
static struct tp_up *
up_new(struct tp_pool *p, const char *addr)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        struct tp_up **nv = p->env.alloc(cap * sizeof(*nv));
        if (!nv)
            return NULL;
        if (p->n)
            memcpy(nv, p->ups, p->n * sizeof(*nv));
        p->env.free(p->ups);
        p->ups = nv;
        p->cap = cap;
    }
    struct tp_up *u = p->env.alloc(sizeof(*u));
    if (!u)
        return NULL;
    size_t len = strlen(addr);
    u->addr = p->env.alloc(len + 1);
    if (!u->addr) {
        p->env.free(u);
        return NULL;
    }
    memcpy(u->addr, addr, len + 1);
    /* A new upstream takes picks before its first successful check, and
     * with readyz counts as not ready until its first probe passes. */
    u->healthy = 1;
    u->probe_pending = 1;
    u->tier = -1;
    u->id = ++p->next_id ? p->next_id : ++p->next_id;
    p->ups[p->n++] = u;
    return u;
}

/* Remove the record at index i (its drain completed). */
static void
up_remove(struct tp_pool *p, size_t i)
{
    struct tp_up *u = p->ups[i];
    if (p->ops.removed)
        p->ops.removed(p->ops_arg, u);
    memmove(&p->ups[i], &p->ups[i + 1], (p->n - i - 1) * sizeof(*p->ups));
    p->n--;
    up_free(p, u);
}

static int
in_list(const char *addr, const char *const *addrs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(addr, addrs[i]) == 0)
            return 1;
    }
    return 0;
}

int
tp_pool_update(struct tp_pool *p, const char *const *addrs, size_t n)
{
    int rc = 0;
    /* New and re-added first, so that a dial moved off a draining upstream
     * below can go to an upstream that arrived in the same update. */
    for (size_t i = 0; i < n; i++) {
        struct tp_up *u = tp_pool_find(p, addrs[i]);
        if (u) {
            if (u->draining) {
                u->draining = 0;
                u->drain_holds = 0;
                if (p->ops.undrained)
                    p->ops.undrained(p->ops_arg, u);
            }
            continue;
        }
        u = up_new(p, addrs[i]);
        if (!u) {
            rc = -ENOMEM;
            continue;
        }
        if (p->ops.added)
            p->ops.added(p->ops_arg, u);
    }
    /* Gone: start draining. The callbacks neither add nor remove records
     * (removal happens in tp_pool_tick only). */
    for (size_t i = 0; i < p->n; i++) {
        struct tp_up *u = p->ups[i];
        if (u->draining || in_list(u->addr, addrs, n))
            continue;
        u->draining = 1;
        u->closing = 0;
        u->drain_seq++;
        u->drain_holds = 0;
        u->drain_deadline = now(p) + p->drain_timeout_ms;
        if (p->ops.draining)
            p->ops.draining(p->ops_arg, u);
        if (p->drain_timeout_ms == 0 && u->nconns > 0 && p->ops.close_conns)
            p->ops.close_conns(p->ops_arg, u);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Health                                                                   */

/* Readiness starts over: not ready until the next probe passes. */
static void
ready_reset(struct tp_pool *p, struct tp_up *u)
{
    if (p->check != TP_CHECK_READYZ)
        return;
    u->ready = 0;
    u->probe_pending = 1;
    u->ready_fail_streak = 0;
    u->closing = 0;
}

static void
tcp_failure(struct tp_pool *p, struct tp_up *u)
{
    u->health_known = 1;
    if (u->fail_streak < 255)
        u->fail_streak++;
    if (u->fail_streak >= TP_FAIL_THRESHOLD)
        u->healthy = 0;
    ready_reset(p, u);
}

static void
tcp_success(struct tp_up *u)
{
    u->health_known = 1;
    u->fail_streak = 0;
    u->healthy = 1;
}

int
tp_pool_check_result(struct tp_pool *p, struct tp_up *u, int ok, double connect_ms)
{
    if (!ok) {
        tcp_failure(p, u);
        return 0;
    }
    tcp_success(u);
    if (p->sel == TP_SEL_LATENCY) {
        u->avg_ms = tp_ewma_update(u->has_sample, u->avg_ms, connect_ms);
        u->has_sample = 1;
        tp_pool_rebuild_tiers(p);
    }
    return p->check == TP_CHECK_READYZ;
}

void
tp_pool_dial_result(struct tp_pool *p, struct tp_up *u, int ok)
{
    if (ok)
        tcp_success(u);
    else
        tcp_failure(p, u);
}

void
tp_pool_probe_result(struct tp_pool *p, struct tp_up *u, int ok)
{
    (void)p;
    u->ready_known = 1;
    u->probe_pending = 0;
    if (ok) {
        u->ready = 1;
        u->ready_fail_streak = 0;
        return;
    }
    if (u->ready_fail_streak < 255)
        u->ready_fail_streak++;
    if (u->ready_fail_streak >= TP_FAIL_THRESHOLD)
        u->ready = 0;
}

void
tp_pool_conn_opened(struct tp_pool *p, struct tp_up *u)
{
    (void)p;
    u->nconns++;
}

void
tp_pool_conn_closed(struct tp_pool *p, struct tp_up *u)
{
    (void)p;
    if (u->nconns > 0)
        u->nconns--;
}

void
tp_pool_drain_hold(struct tp_up *u, uint32_t n)
{
    if (u->draining)
        u->drain_holds = n;
}

int
tp_pool_drain_ack(struct tp_up *u, uint32_t seq)
{
    if (!u->draining || seq != u->drain_seq || u->drain_holds == 0)
        return 0;
    return --u->drain_holds == 0;
}

int
tp_pool_any_active(const struct tp_pool *p)
{
    return tp_pool_active_count(p) > 0;
}

size_t
tp_pool_active_count(const struct tp_pool *p)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++)
        k += tp_up_pickable(p->ups[i]) ? 1 : 0;
    return k;
}

/* ------------------------------------------------------------------------ */
/* Tiers                                                                    */

/* Whether a group id was already given to a group formed in this rebuild
 * (its members carry mark). */
static int
gid_taken(const struct tp_pool *p, unsigned gid, const unsigned char *mark)
{
    for (size_t i = 0; i < p->n; i++) {
        if (mark[i] && p->ups[i]->gid == gid)
            return 1;
    }
    return 0;
}

void
tp_pool_rebuild_tiers(struct tp_pool *p)
{
    /* mark[i]: assigned in this rebuild. Few upstreams: a bounded stack
     * array covers any sane count; beyond it, the rest stays untiered. */
    unsigned char mark[256];
    size_t n = p->n < sizeof(mark) ? p->n : sizeof(mark);

    memset(mark, 0, sizeof(mark));
    for (size_t i = 0; i < p->n; i++) {
        if (!p->ups[i]->has_sample) {
            p->ups[i]->tier = -1;
            p->ups[i]->gid = 0;
        }
    }
    for (int tier = 0;; tier++) {
        /* Best of the rest: the lowest average not yet in a tier. */
        struct tp_up *seed = NULL;
        for (size_t i = 0; i < n; i++) {
            struct tp_up *u = p->ups[i];
            if (!mark[i] && u->has_sample && (!seed || u->avg_ms < seed->avg_ms))
                seed = u;
        }
        if (!seed)
            break;
        double limit = tp_tier_limit(seed->avg_ms);
        /* The group keeps its identity: the seed's group, or that of
         * another upstream joining it, else a new one. */
        unsigned gid = 0;
        if (seed->gid && !gid_taken(p, seed->gid, mark))
            gid = seed->gid;
        for (size_t i = 0; i < n && !gid; i++) {
            struct tp_up *u = p->ups[i];
            if (!mark[i] && u->has_sample && u->avg_ms <= limit && u->gid &&
                !gid_taken(p, u->gid, mark))
                gid = u->gid;
        }
        if (!gid) {
            if (++p->next_gid == 0)
                p->next_gid = 1;
            gid = p->next_gid;
        }
        for (size_t i = 0; i < n; i++) {
            struct tp_up *u = p->ups[i];
            if (mark[i] || !u->has_sample)
                continue;
            /* Within the limit, or a member of this group that has not yet
             * exceeded the limit by a further 25 %. */
            int in =
                u->avg_ms <= limit || (u->gid == gid && u->avg_ms <= limit * TP_TIER_HYSTERESIS);
            if (!in)
                continue;
            mark[i] = 1;
            u->gid = gid;
            u->tier = tier;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Picking                                                                  */

/* Candidate filter for one pick. */
struct pick_ctx {
    const struct tp_up *exclude;
    const uint32_t *tried;
    size_t ntried;
    int ready_only;
    int tier; /* -1: any; else only this tier (and upstreams without sample) */
};

static int
was_tried(const struct tp_up *u, const uint32_t *tried, size_t ntried)
{
    for (size_t i = 0; i < ntried; i++)
        if (tried[i] == u->id)
            return 1;
    return 0;
}

static int
candidate(const struct tp_up *u, const struct pick_ctx *c)
{
    if (u == c->exclude || !tp_up_pickable(u) || was_tried(u, c->tried, c->ntried))
        return 0;
    if (c->ready_only && !u->ready)
        return 0;
    if (c->tier >= 0 && u->has_sample && u->tier != c->tier)
        return 0;
    return 1;
}

/* The records a pick runs over, and its random source. */
struct view {
    struct tp_up *const *ups;
    size_t n;
    enum tp_selection sel;
    enum tp_check_kind check;
    double (*random)(void *arg);
    void *arg;
};

static struct view
pool_view(struct tp_pool *p)
{
    struct view v = {p->ups, p->n, p->sel, p->check, p->env.random, p->env.arg};
    return v;
}

/* Uniform among the records for which ok(u, arg) holds. */
static struct tp_up *
pick_among(const struct view *v, int (*ok)(const struct tp_up *, const void *), const void *arg)
{
    size_t k = 0;
    for (size_t i = 0; i < v->n; i++)
        k += ok(v->ups[i], arg) ? 1 : 0;
    if (k == 0)
        return NULL;
    double r = v->random(v->arg);
    size_t want = (size_t)(r * (double)k);
    if (want >= k)
        want = k - 1;
    for (size_t i = 0; i < v->n; i++) {
        if (!ok(v->ups[i], arg))
            continue;
        if (want == 0)
            return v->ups[i];
        want--;
    }
    return NULL;
}

static int
candidate_cb(const struct tp_up *u, const void *arg)
{
    return candidate(u, arg);
}

static struct tp_up *pick(const struct view *v, struct pick_ctx c);

struct tp_up *
tp_pool_pick(struct tp_pool *p, const struct tp_up *exclude)
{
    struct pick_ctx c = {.exclude = exclude, .ready_only = 0, .tier = -1};
    struct view v = pool_view(p);
    return pick(&v, c);
}

struct tp_up *
tp_pool_pick_untried(struct tp_pool *p, const uint32_t *tried, size_t ntried)
{
    struct pick_ctx c = {.tried = tried, .ntried = ntried, .ready_only = 0, .tier = -1};
    struct view v = pool_view(p);
    return pick(&v, c);
}

struct last_resort_ctx {
    const uint32_t *tried;
    size_t ntried;
};

static int
last_resort_cb(const struct tp_up *u, const void *arg)
{
    const struct last_resort_ctx *c = arg;
    return !u->healthy && !u->draining && !was_tried(u, c->tried, c->ntried);
}

struct tp_up *
tp_pool_pick_last_resort(struct tp_pool *p, const uint32_t *tried, size_t ntried)
{
    struct last_resort_ctx c = {tried, ntried};
    struct view v = pool_view(p);
    return pick_among(&v, last_resort_cb, &c);
}

struct tp_up *
tp_pick_in(struct tp_up *const *ups, size_t n, enum tp_selection sel, enum tp_check_kind check,
           const uint32_t *tried, size_t ntried, int last_resort, double (*random)(void *arg),
           void *arg)
{
    struct view v = {ups, n, sel, check, random, arg};
    if (last_resort) {
        struct last_resort_ctx c = {tried, ntried};
        return pick_among(&v, last_resort_cb, &c);
    }
    struct pick_ctx c = {.tried = tried, .ntried = ntried, .ready_only = 0, .tier = -1};
    return pick(&v, c);
}

static struct tp_up *
pick(const struct view *v, struct pick_ctx c)
{
    /* Readiness filters first: ready upstreams only while any is ready,
     * else every TCP-healthy one. */
    if (v->check == TP_CHECK_READYZ) {
        c.ready_only = 1;
        int any = 0;
        for (size_t i = 0; i < v->n && !any; i++)
            any = candidate(v->ups[i], &c);
        if (!any)
            c.ready_only = 0;
    }
    /* Then latency: the lowest tier that has a candidate, together with
     * candidates that have no sample yet. */
    if (v->sel == TP_SEL_LATENCY) {
        int best = -1;
        for (size_t i = 0; i < v->n; i++) {
            struct tp_up *u = v->ups[i];
            if (candidate(u, &c) && u->has_sample && u->tier >= 0 && (best < 0 || u->tier < best))
                best = u->tier;
        }
        c.tier = best; /* -1 when only unsampled candidates exist */
    }
    return pick_among(v, candidate_cb, &c);
}

/* ------------------------------------------------------------------------ */
/* Deadlines                                                                */

/* Readiness-driven closing applies to u now: it failed its probes (not
 * ready, no probe pending after a reset) while another healthy, non-draining
 * upstream is ready. */
static int
close_wanted(const struct tp_pool *p, const struct tp_up *u)
{
    if (p->check != TP_CHECK_READYZ || u->draining || u->ready || u->probe_pending)
        return 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct tp_up *v = p->ups[i];
        if (v != u && tp_up_pickable(v) && v->ready)
            return 1;
    }
    return 0;
}

static void
next_at(int64_t *next, int64_t t)
{
    if (*next < 0 || t < *next)
        *next = t;
}

int64_t
tp_pool_tick(struct tp_pool *p)
{
    int64_t t = now(p), next = -1;
    int removed = 0;

    for (size_t i = 0; i < p->n; i++) {
        struct tp_up *u = p->ups[i];
        int want = close_wanted(p, u);
        if (!want) {
            u->closing = 0;
            continue;
        }
        if (!u->closing) {
            u->closing = 1;
            u->close_deadline = t + p->drain_timeout_ms;
        }
        if (t >= u->close_deadline) {
            /* Past the grace period: connections still there close; new
             * ones do not come while the condition holds. */
            if (u->nconns > 0 && p->ops.close_conns)
                p->ops.close_conns(p->ops_arg, u);
        } else {
            next_at(&next, u->close_deadline);
        }
    }
    for (size_t i = 0; i < p->n;) {
        struct tp_up *u = p->ups[i];
        if (!u->draining) {
            i++;
            continue;
        }
        if (u->nconns > 0 && t >= u->drain_deadline && p->ops.close_conns)
            p->ops.close_conns(p->ops_arg, u);
        if (u->nconns == 0 && (u->drain_holds == 0 || t >= u->drain_deadline)) {
            up_remove(p, i);
            removed = 1;
            continue;
        }
        if (u->drain_deadline > t)
            next_at(&next, u->drain_deadline); /* also ends a hold */
        i++;
    }
    if (removed && p->sel == TP_SEL_LATENCY)
        tp_pool_rebuild_tiers(p);
    return next;
}

/* ------------------------------------------------------------------------ */
/* Probe rules                                                              */

int
tp_probe_ok(int transport_ok, int status)
{
    /* Only a completed exchange answering 200: any other status (redirects
     * are not followed), a TLS error or a timeout is a failure. */
    return transport_ok && status == 200;
}

int64_t
tp_probe_budget_ms(int64_t timeout_ms, int64_t started_ms, int64_t now_ms)
{
    int64_t left = started_ms + timeout_ms - now_ms;
    return left > 0 ? left : 0;
}
