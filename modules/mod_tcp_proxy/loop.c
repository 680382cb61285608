/*
 * loop: what the data path (conn.c) uses of the loop it runs on, the main
 * loop's or a worker's: watches on that loop, picks from the snapshot the
 * main loop published (workers.c), with the worker's own records of the
 * upstreams it dials, and the reports a worker sends the main loop about
 * them, in batches. The main loop's handler of a batch is workers.c's,
 * registered in each worker's struct tp_loop (on_report); this file calls
 * only the pure policy (select.c).
 */
#include <string.h>

#include <prismlb/module_util.h>

#include "loop.h"

/* Reports (opens, closes, dial outcomes) wait up to REPORT_MS to go out
 * together: a busy worker wakes the main loop at most 1000 / REPORT_MS
 * times a second, not once per connection, and the pool learns of a
 * connection at most that late. What must not be late is an open on an
 * upstream that starts draining (the pool would take it for idle and
 * remove it, closing the connection instead of draining it): a drain's
 * message makes the worker acknowledge it, after every report so far, at
 * the end of that pass, and the pool removes the upstream only once every
 * worker did (tp_pool_drain_hold). */
#define REPORT_MS 20

/* ------------------------------------------------------------------------ */
/* A worker's upstream records                                              */

/* A worker's record of an upstream: what conn.c works with. */
struct wrec {
    struct tp_upd d;
    struct tp_up up; /* up.addr owned */
};

struct tp_upd *
tp_loop_rec_find(struct tp_loop *lp, uint32_t id)
{
    for (size_t i = 0; i < lp->nups; i++)
        if (lp->ups[i]->up->id == id)
            return lp->ups[i];
    return NULL;
}

static void
rec_free(struct tp_loop *lp, size_t i)
{
    const struct plb_host *h = lp->tp->host;
    struct wrec *r = (struct wrec *)(void *)lp->ups[i];
    h->mem->free(r->up.addr);
    h->mem->free(r);
    lp->ups[i] = lp->ups[--lp->nups];
}

void
tp_loop_recs_free(struct tp_loop *lp)
{
    while (lp->nups)
        rec_free(lp, lp->nups - 1);
    lp->tp->host->mem->free(lp->ups);
    lp->ups = NULL;
    lp->cups = 0;
}

static struct tp_upd *
rec_new(struct tp_loop *lp, const struct snap_ent *e)
{
    const struct plb_host *h = lp->tp->host;
    if (lp->nups == lp->cups) {
        size_t cap = lp->cups ? lp->cups * 2 : 8;
        struct tp_upd **nv = h->mem->realloc(lp->ups, cap * sizeof(*nv));
        if (!nv)
            return NULL;
        lp->ups = nv;
        lp->cups = cap;
    }
    struct wrec *r = h->mem->alloc(sizeof(*r));
    if (!r)
        return NULL;
    r->up = e->up;
    r->up.addr = h->mem->strdup(e->up.addr);
    if (!r->up.addr) {
        h->mem->free(r);
        return NULL;
    }
    r->up.data = &r->d;
    r->d.tp = lp->tp;
    r->d.up = &r->up;
    r->d.check_fd = -1;
    r->d.literal = r->d.have_sa = 1;
    memcpy(&r->d.sa, &e->sa, sizeof(r->d.sa));
    r->d.salen = e->salen;
    lp->ups[lp->nups++] = &r->d;
    return &r->d;
}

/* A new snapshot: records without connections follow it (an address that
 * changed) or go (an upstream that is gone). */
static void
rec_sweep(struct tp_loop *lp, const struct tp_snap *s)
{
    for (size_t i = lp->nups; i-- > 0;) {
        struct tp_upd *d = lp->ups[i];
        if (d->conns)
            continue;
        const struct snap_ent *e = NULL;
        for (size_t k = 0; k < s->n && !e; k++)
            if (s->ups[k]->id == d->up->id)
                e = (const struct snap_ent *)(const void *)s->ups[k];
        if (!e) {
            rec_free(lp, i);
            continue;
        }
        memcpy(&d->sa, &e->sa, sizeof(d->sa));
        d->salen = e->salen;
        d->up->draining = e->up.draining;
    }
    lp->last_snap = s;
}

static double
loop_random(void *arg)
{
    struct tp_loop *lp = arg;
    return plb_random_unit(&lp->rng);
}

struct tp_upd *
tp_loop_pick(struct tp_loop *lp, const uint32_t *tried, size_t ntried, int *last)
{
    const struct tp_snap *s = lp->tp->host->loop->snapshot_get(lp->tp->snap);
    *last = 0;
    if (!s)
        return NULL;
    if (s != lp->last_snap)
        rec_sweep(lp, s);
    struct tp_up *u = tp_pick_in(s->ups, s->n, s->sel, s->check, tried, ntried, 0, loop_random, lp);
    if (!u) {
        u = tp_pick_in(s->ups, s->n, s->sel, s->check, tried, ntried, 1, loop_random, lp);
        *last = 1;
    }
    if (!u)
        return NULL;
    struct tp_upd *d = tp_loop_rec_find(lp, u->id);
    return d ? d : rec_new(lp, (const struct snap_ent *)(const void *)u);
}

plb_io *
tp_loop_io_new(struct tp_loop *lp, int fd, int what, plb_io_cb cb, void *arg)
{
    const struct plb_host *h = lp->tp->host;
    return lp->w ? h->loop->worker_io_new(lp->w, fd, what, cb, arg)
                 : h->loop->io_new(lp->tp->ctx, fd, what, cb, arg);
}

/* ------------------------------------------------------------------------ */
/* Reports: worker to main                                                  */

void
tp_loop_flush(plb_timer *t, void *arg)
{
    struct tp_loop *lp = arg;
    const struct plb_host *h = lp->tp->host;
    (void)t;
    if (!lp->nev)
        return;
    struct tp_report *r = h->mem->alloc(sizeof(*r));
    if (r) {
        r->tp = lp->tp;
        r->lp = lp;
        r->ev = lp->ev;
        r->n = lp->nev;
        if (h->loop->post(lp->tp->ctx, NULL, lp->on_report, r) == 0) {
            lp->ev = NULL;
            lp->nev = lp->cev = 0;
            return;
        }
        h->mem->free(r);
    }
    /* Out of memory: the reports wait for the next try. */
    if (h->loop->timer_arm(lp->flush, 10, 0, 0) < 0)
        PLB_ERR(lp->tp->host, lp->tp->ctx, NULL, "cannot arm the report timer");
}

void
tp_loop_report(struct tp_loop *lp, const struct tp_upd *d, enum tp_event_kind kind)
{
    tp_loop_report_value(lp, d, kind, 0);
}

/* Queue ev; the first report of a batch arms the flush for REPORT_MS,
 * now (0) for the end of this pass. */
static void
report_add(struct tp_loop *lp, struct tp_event ev, int now)
{
    const struct plb_host *h = lp->tp->host;
    if (lp->stopping)
        return;
    if (lp->nev == lp->cev) {
        size_t cap = lp->cev ? lp->cev * 2 : 64;
        struct tp_event *nv = h->mem->realloc(lp->ev, cap * sizeof(*nv));
        if (!nv) {
            PLB_ERR(lp->tp->host, lp->tp->ctx, NULL, "out of memory: a connection report is lost");
            return;
        }
        lp->ev = nv;
        lp->cev = cap;
    }
    lp->ev[lp->nev] = ev;
    if ((lp->nev++ == 0 || now) && h->loop->timer_arm(lp->flush, now ? 0 : REPORT_MS, 0, 0) < 0)
        PLB_ERR(lp->tp->host, lp->tp->ctx, NULL, "cannot arm the report timer");
}

void
tp_loop_report_value(struct tp_loop *lp, const struct tp_upd *d, enum tp_event_kind kind, double v)
{
    report_add(lp, (struct tp_event){.value = (float)v, .id = d->up->id, .kind = (uint8_t)kind}, 0);
}

void
tp_loop_report_drain_seen(struct tp_loop *lp, uint32_t id, uint32_t seq)
{
    report_add(lp, (struct tp_event){.id = id, .seq = seq, .kind = TP_EV_DRAIN_SEEN}, 1);
}
