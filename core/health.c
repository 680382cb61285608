/*
 * health: named liveness and readiness checks of instances, in
 * registration order, for mod_metrics' probe server (health_foreach).
 */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "links.h"
#include "reactor.h"

struct health {
    plb_ctx *ctx;
    char *check;
    enum plb_health_kind kind;
    int ok;
    char *reason;
    int64_t last_beat;
    struct health *next;
};

static void
health_free(struct health *h)
{
    core_free(h->check);
    core_free(h->reason);
    core_free(h);
}

void
core_health_forget(struct core_links *l, const plb_ctx *owner)
{
    CORE_LINKS_FORGET(&l->health, ctx, owner, health_free);
}

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
