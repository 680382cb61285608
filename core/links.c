#include "links.h"

#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "reactor.h"

struct provider {
    plb_ctx *owner;
    char *name;
    struct plb_strv set;
    int failed;
    struct provider *next;
};

struct sub {
    struct core_links *l;
    plb_ctx *ctx;
    plb_ctx **sources;
    size_t nsrc;
    plb_endpoints_cb cb;
    void *arg;
    char **last; /* last delivered set (owned copies) */
    size_t nlast;
    int delivered;
    struct event *ev; /* deferred delivery */
    struct sub *next;
};

struct health {
    plb_ctx *ctx;
    char *check;
    enum plb_health_kind kind;
    int ok;
    char *reason;
    int64_t last_beat;
    struct health *next;
};

struct core_links {
    struct core *c;
    struct provider *providers;
    struct sub *subs;
    struct health *health;
};

struct plb_done {
    void (*fn)(void *arg);
    void *arg;
};

/* ------------------------------------------------------------------ */

struct core_links *
core_links_new(struct core *c)
{
    struct core_links *l = core_calloc(1, sizeof(*l));
    if (l)
        l->c = c;
    return l;
}

static void
strv_clear(struct plb_strv *v)
{
    for (size_t i = 0; i < v->n; i++)
        core_free(v->v[i]);
    core_free(v->v);
    v->v = NULL;
    v->n = 0;
}

static void
strs_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        core_free(v[i]);
    core_free(v);
}

static void
sub_free(struct sub *s)
{
    if (s->ev)
        event_free(s->ev);
    strs_free(s->last, s->nlast);
    core_free(s->sources);
    core_free(s);
}

static void
health_free(struct health *h)
{
    core_free(h->check);
    core_free(h->reason);
    core_free(h);
}

void
core_links_forget(plb_ctx *ctx)
{
    struct core_links *l = ctx->core->links;
    if (!l)
        return;
    for (struct sub **sp = &l->subs; *sp;) {
        struct sub *s = *sp;
        if (s->ctx == ctx) {
            *sp = s->next;
            sub_free(s);
        } else {
            sp = &s->next;
        }
    }
    for (struct provider **pp = &l->providers; *pp;) {
        struct provider *p = *pp;
        if (p->owner == ctx) {
            *pp = p->next;
            strv_clear(&p->set);
            core_free(p->name);
            core_free(p);
        } else {
            pp = &p->next;
        }
    }
    for (struct health **hp = &l->health; *hp;) {
        struct health *h = *hp;
        if (h->ctx == ctx) {
            *hp = h->next;
            health_free(h);
        } else {
            hp = &h->next;
        }
    }
}

void
core_links_free(struct core_links *l)
{
    if (!l)
        return;
    while (l->subs) {
        struct sub *s = l->subs;
        l->subs = s->next;
        sub_free(s);
    }
    while (l->providers) {
        struct provider *p = l->providers;
        l->providers = p->next;
        strv_clear(&p->set);
        core_free(p->name);
        core_free(p);
    }
    while (l->health) {
        struct health *h = l->health;
        l->health = h->next;
        health_free(h);
    }
    core_free(l);
}

/* ------------------------------------------------------------------ */
/* Endpoints                                                            */

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int
core_endpoints_merge(const struct plb_strv *const *sets, size_t nsets, const char ***out,
                     size_t *nout)
{
    size_t total = 0;
    for (size_t i = 0; i < nsets; i++)
        total += sets[i]->n;
    const char **all = core_malloc((total ? total : 1) * sizeof(*all));
    if (!all)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < nsets; i++) {
        for (size_t j = 0; j < sets[i]->n; j++)
            all[k++] = sets[i]->v[j];
    }
    qsort(all, k, sizeof(*all), cmp_str);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m == 0 || strcmp(all[m - 1], all[i]) != 0)
            all[m++] = all[i];
    }
    *out = all;
    *nout = m;
    return 0;
}

static int
sub_has_source(const struct sub *s, const plb_ctx *src)
{
    for (size_t i = 0; i < s->nsrc; i++) {
        if (s->sources[i] == src)
            return 1;
    }
    return 0;
}

/* Compute the merged set of a subscription and deliver it when it changed
 * and is not an emptying of a set that once had endpoints. */
static void
sub_deliver(struct sub *s)
{
    struct core_links *l = s->l;
    size_t nsets = 0;
    for (struct provider *p = l->providers; p; p = p->next)
        nsets += sub_has_source(s, p->owner);
    const struct plb_strv **sets = core_malloc((nsets ? nsets : 1) * sizeof(*sets));
    const char **merged = NULL;
    size_t n = 0;
    char **copy = NULL;
    if (!sets)
        goto oom;
    nsets = 0;
    for (struct provider *p = l->providers; p; p = p->next) {
        if (sub_has_source(s, p->owner))
            sets[nsets++] = &p->set;
    }
    if (core_endpoints_merge(sets, nsets, &merged, &n) < 0)
        goto oom;
    if (n == 0 && s->nlast > 0) {
        core_log(PLB_LOG_WARN, s->ctx->name, s->ctx->cm->mod->name,
                 "skipped an endpoint update that would leave no endpoints; keeping %zu", s->nlast);
        goto out;
    }
    if (n == s->nlast && s->delivered) {
        size_t i = 0;
        while (i < n && strcmp(merged[i], s->last[i]) == 0)
            i++;
        if (i == n)
            goto out; /* unchanged */
    }
    if (n == 0 && !s->delivered)
        goto out; /* nothing yet */
    copy = core_calloc(n ? n : 1, sizeof(*copy));
    if (!copy)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        copy[i] = core_strdup(merged[i]);
        if (!copy[i]) {
            strs_free(copy, i);
            goto oom;
        }
    }
    strs_free(s->last, s->nlast);
    s->last = copy;
    s->nlast = n;
    s->delivered = 1;
    struct plb_endpoint_set set = {.size = sizeof(set), .n = n, .v = (const char *const *)copy};
    s->cb(&set, s->arg);
    goto out;
oom:
    core_log(PLB_LOG_ERROR, s->ctx->name, s->ctx->cm->mod->name,
             "out of memory merging endpoint sets; will retry on the next update");
out:
    core_free(merged);
    core_free(sets);
}

static void
sub_event(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sub_deliver(arg);
}

static void
sub_schedule(struct sub *s)
{
    struct timeval zero = {0, 0};
    if (!evtimer_pending(s->ev, NULL))
        evtimer_add(s->ev, &zero);
}

int
core_endpoints_publish(plb_ctx *ctx, const char *provider, const char *const *eps, size_t n)
{
    struct core_links *l = ctx->core->links;
    struct provider *p;
    struct plb_strv nv = {0, NULL};

    if (!provider || (n && !eps))
        return -EINVAL;
    for (p = l->providers; p; p = p->next) {
        if (p->owner == ctx && strcmp(p->name, provider) == 0)
            break;
    }
    nv.v = core_calloc(n ? n : 1, sizeof(*nv.v));
    if (!nv.v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        nv.v[i] = core_strdup(eps[i]);
        if (!nv.v[i]) {
            strv_clear(&nv);
            return -ENOMEM;
        }
        nv.n++;
    }
    if (!p) {
        p = core_calloc(1, sizeof(*p));
        if (!p || !(p->name = core_strdup(provider))) {
            core_free(p);
            strv_clear(&nv);
            return -ENOMEM;
        }
        p->owner = ctx;
        p->next = l->providers;
        l->providers = p;
    }
    strv_clear(&p->set);
    p->set = nv;
    p->failed = 0;
    for (struct sub *s = l->subs; s; s = s->next) {
        if (sub_has_source(s, ctx))
            sub_schedule(s);
    }
    return 0;
}

void
core_endpoints_failed(plb_ctx *ctx, const char *provider, int failed)
{
    struct core_links *l = ctx->core->links;
    struct provider *p;
    for (p = l->providers; p; p = p->next) {
        if (p->owner == ctx && strcmp(p->name, provider) == 0)
            break;
    }
    if (!p) {
        /* A provider that failed before it ever published. */
        p = core_calloc(1, sizeof(*p));
        if (!p || !(p->name = core_strdup(provider))) {
            core_free(p);
            return;
        }
        p->owner = ctx;
        p->next = l->providers;
        l->providers = p;
    }
    p->failed = failed ? 1 : 0;
}

int
core_endpoints_all_failed(plb_ctx *ctx)
{
    int any = 0;
    for (struct provider *p = ctx->core->links->providers; p; p = p->next) {
        if (p->owner != ctx)
            continue;
        any = 1;
        if (!p->failed)
            return 0;
    }
    return any;
}

int
core_endpoints_subscribe(plb_ctx *ctx, const struct plb_strv *sources, plb_endpoints_cb cb,
                         void *arg)
{
    struct core *c = ctx->core;
    struct sub *s;

    if (!sources || !cb)
        return -EINVAL;
    s = core_calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->l = c->links;
    s->ctx = ctx;
    s->cb = cb;
    s->arg = arg;
    s->sources = core_calloc(sources->n ? sources->n : 1, sizeof(*s->sources));
    s->ev = evtimer_new(c->base, sub_event, s);
    if (!s->sources || !s->ev) {
        sub_free(s);
        return -ENOMEM;
    }
    for (size_t i = 0; i < sources->n; i++) {
        plb_ctx *src = core_instance_find(c, sources->v[i]);
        if (!src) {
            sub_free(s);
            return -ENOENT;
        }
        s->sources[s->nsrc++] = src;
    }
    s->next = c->links->subs;
    c->links->subs = s;
    sub_schedule(s);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Asynchronous completions                                             */

plb_done *
core_done_new(void (*fn)(void *arg), void *arg)
{
    plb_done *d = core_calloc(1, sizeof(*d));
    if (d) {
        d->fn = fn;
        d->arg = arg;
    }
    return d;
}

void
core_done_fire(plb_done *d)
{
    if (!d)
        return;
    void (*fn)(void *) = d->fn;
    void *arg = d->arg;
    core_free(d);
    if (fn)
        fn(arg);
}

/* ------------------------------------------------------------------ */
/* Gates                                                                */

struct gate_close {
    size_t pending;
    void (*done)(void *arg);
    void *arg;
};

static void
gate_one_closed(void *arg)
{
    struct gate_close *gc = arg;
    if (--gc->pending == 0) {
        void (*done)(void *) = gc->done;
        void *darg = gc->arg;
        core_free(gc);
        if (done)
            done(darg);
    }
}

int
core_gate_set(plb_ctx *ctx, int open, void (*done)(void *arg), void *arg)
{
    struct core *c = ctx->core;
    if (!(ctx->cm->mod->provides & PLB_ROLE_GATE))
        return -EPERM;
    open = open ? 1 : 0;
    ctx->gate_open = open;
    core_log(PLB_LOG_INFO, ctx->name, ctx->cm->mod->name, "gate %s", open ? "opened" : "closed");
    if (open) {
        for (size_t i = 0; i < c->ninst; i++) {
            plb_ctx *g = c->inst[i];
            if (g->gate == ctx && g->st == CORE_INST_STARTED && !g->gated_active) {
                g->gated_active = 1;
                g->cm->mod->gate_open(g->state);
            }
        }
        if (done)
            done(arg);
        return 0;
    }
    /* One extra count held while the hooks run, so that a hook completing
     * synchronously cannot finish the close early. */
    struct gate_close *gc = core_calloc(1, sizeof(*gc));
    if (!gc)
        return -ENOMEM;
    gc->pending = 1;
    gc->done = done;
    gc->arg = arg;
    for (size_t i = 0; i < c->ninst; i++) {
        plb_ctx *g = c->inst[i];
        if (g->gate != ctx || !g->gated_active)
            continue;
        plb_done *d = core_done_new(gate_one_closed, gc);
        if (!d) {
            core_log(PLB_LOG_ERROR, g->name, g->cm->mod->name,
                     "out of memory closing the gate; not waiting for this instance");
            continue;
        }
        g->gated_active = 0;
        gc->pending++;
        g->cm->mod->gate_close(g->state, d);
    }
    gate_one_closed(gc);
    return 0;
}

int
core_gate_is_open(plb_ctx *ctx)
{
    if (!ctx->gate)
        return 1;
    return ctx->gated_active;
}

/* ------------------------------------------------------------------ */
/* Health                                                               */

static struct health *
health_find(plb_ctx *ctx, const char *check)
{
    for (struct health *h = ctx->core->links->health; h; h = h->next) {
        if (h->ctx == ctx && strcmp(h->check, check) == 0)
            return h;
    }
    return NULL;
}

int
core_health_register(plb_ctx *ctx, const char *check, enum plb_health_kind kind)
{
    struct core_links *l = ctx->core->links;
    if (!check || (kind != PLB_HEALTH_LIVE && kind != PLB_HEALTH_READY))
        return -EINVAL;
    if (health_find(ctx, check))
        return -EEXIST;
    struct health *h = core_calloc(1, sizeof(*h));
    if (!h || !(h->check = core_strdup(check))) {
        core_free(h);
        return -ENOMEM;
    }
    h->ctx = ctx;
    h->kind = kind;
    h->ok = kind == PLB_HEALTH_LIVE;
    h->last_beat = core_now_ms();
    /* Keep registration order for stable output. */
    struct health **tail = &l->health;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    return 0;
}

void
core_health_beat(plb_ctx *ctx, const char *check)
{
    struct health *h = health_find(ctx, check);
    if (h)
        h->last_beat = core_now_ms();
}

void
core_health_set(plb_ctx *ctx, const char *check, int ok, const char *reason)
{
    struct health *h = health_find(ctx, check);
    if (!h)
        return;
    h->ok = ok ? 1 : 0;
    core_free(h->reason);
    h->reason = NULL;
    if (reason && !ok)
        h->reason = core_strdup(reason); /* NULL on OOM: reason shown empty */
}

void
core_health_foreach(struct core *c, plb_health_iter_cb cb, void *arg)
{
    for (struct health *h = c->links->health; h; h = h->next) {
        struct plb_health_info info = {
            .size = sizeof(struct plb_health_info),
            .instance = h->ctx->name,
            .check = h->check,
            .kind = h->kind,
            .ok = h->ok,
            .last_beat_ms = h->last_beat,
            .reason = h->reason,
        };
        cb(&info, arg);
    }
}
