/*
 * endpoints: endpoint sets from sources to sinks. A source instance
 * publishes sets under provider names ("static", "kubernetes"); a sink
 * subscribes to the merged, sorted, de-duplicated union of its sources'
 * sets, delivered from the loop (a zero timer per subscription) whenever
 * it changes, never as an emptying of a set that once had endpoints.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "links.h"
#include "log.h"
#include "reactor.h"
#include "strv.h"

/* Seconds before a delivery that ran out of memory is tried again. */
#define SUB_RETRY_S 1

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
    struct plb_strv last; /* last delivered set (owned copies) */
    int delivered;
    struct event *ev; /* deferred delivery */
    struct sub *next;
};

/* out (empty) becomes a copy of the n strings of v. 0 or -ENOMEM (out
 * empty again). */
static int
strv_copy(struct plb_strv *out, const char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (core_strv_push(out, v[i], strlen(v[i])) < 0) {
            core_strv_free(out);
            return -ENOMEM;
        }
    }
    return 0;
}

static void
sub_free(struct sub *s)
{
    core_event_clear(&s->ev);
    core_strv_free(&s->last);
    core_free(s->sources);
    core_free(s);
}

static void
provider_free(struct provider *p)
{
    core_strv_free(&p->set);
    core_free(p->name);
    core_free(p);
}

void
core_endpoints_forget(struct core_links *l, const plb_ctx *owner)
{
    CORE_LINKS_FORGET(&l->subs, ctx, owner, sub_free);
    CORE_LINKS_FORGET(&l->providers, owner, owner, provider_free);
}

/* ctx's provider named name (borrowed), a new empty one when there is
 * none yet. NULL when out of memory. */
static struct provider *
provider_get(plb_ctx *ctx, const char *name)
{
    struct core_links *l = ctx->core->links;
    struct provider *p;
    for (p = l->providers; p; p = p->next) {
        if (p->owner == ctx && strcmp(p->name, name) == 0)
            return p;
    }
    p = core_calloc(1, sizeof(*p));
    if (!p || !(p->name = core_strdup(name))) {
        core_free(p);
        return NULL;
    }
    p->owner = ctx;
    p->next = l->providers;
    l->providers = p;
    return p;
}

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
    struct plb_strv copy = {0, NULL};
    struct timeval retry = {SUB_RETRY_S, 0};
    if (!sets)
        goto oom;
    nsets = 0;
    for (struct provider *p = l->providers; p; p = p->next) {
        if (sub_has_source(s, p->owner))
            sets[nsets++] = &p->set;
    }
    if (core_endpoints_merge(sets, nsets, &merged, &n) < 0)
        goto oom;
    if (n == 0 && s->last.n > 0) {
        core_log(PLB_LOG_WARN, s->ctx->name, s->ctx->cm->mod->name,
                 "skipped an endpoint update that would leave no endpoints; keeping %zu",
                 s->last.n);
        goto out;
    }
    if (n == s->last.n && s->delivered) {
        size_t i = 0;
        while (i < n && strcmp(merged[i], s->last.v[i]) == 0)
            i++;
        if (i == n)
            goto out; /* unchanged */
    }
    if (n == 0 && !s->delivered)
        goto out; /* nothing yet */
    if (strv_copy(&copy, merged, n) < 0)
        goto oom;
    core_strv_free(&s->last);
    s->last = copy;
    s->delivered = 1;
    struct plb_endpoint_set set = {
        .size = sizeof(set), .n = n, .v = (const char *const *)s->last.v};
    s->cb(&set, s->arg);
    goto out;
oom:
    /* Not left until the next update, which may never come: again soon. */
    if (evtimer_add(s->ev, &retry) == 0)
        core_log(PLB_LOG_ERROR, s->ctx->name, s->ctx->cm->mod->name,
                 "out of memory merging endpoint sets; retrying in %d s", SUB_RETRY_S);
    else
        core_log(PLB_LOG_ERROR, s->ctx->name, s->ctx->cm->mod->name,
                 "out of memory merging endpoint sets; retrying on the next update");
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

/* Deliver from the loop, now (also when a retry was waiting). */
static void
sub_schedule(struct sub *s)
{
    struct timeval zero = {0, 0};
    if (evtimer_add(s->ev, &zero) < 0)
        core_log(PLB_LOG_ERROR, s->ctx->name, s->ctx->cm->mod->name,
                 "cannot schedule an endpoint update");
}

int
core_endpoints_publish(plb_ctx *ctx, const char *provider, const char *const *eps, size_t n)
{
    struct core_links *l = ctx->core->links;
    struct provider *p;
    struct plb_strv nv = {0, NULL};

    if (!provider || (n && !eps))
        return -EINVAL;
    if (strv_copy(&nv, eps, n) < 0)
        return -ENOMEM;
    if (!(p = provider_get(ctx, provider))) {
        core_strv_free(&nv);
        return -ENOMEM;
    }
    core_strv_free(&p->set);
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
    /* A provider may fail before it ever published. */
    struct provider *p = provider ? provider_get(ctx, provider) : NULL;
    if (p)
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
