/*
 * links: the registry of what instances give each other (see links.h for
 * the files of each subject): creating it, freeing it, and dropping one
 * instance's endpoint sets, subscriptions, health checks and fence.
 */
#include "links.h"

#include "alloc.h"

struct core_links *
core_links_new(struct core *c)
{
    struct core_links *l = core_calloc(1, sizeof(*l));
    if (l)
        l->c = c;
    return l;
}

void
core_links_forget(plb_ctx *ctx)
{
    struct core_links *l = ctx->core->links;
    if (!l)
        return;
    core_endpoints_forget(l, ctx);
    core_health_forget(l, ctx);
    core_gate_forget(ctx);
}

void
core_links_free(struct core_links *l)
{
    if (!l)
        return;
    core_endpoints_forget(l, NULL);
    core_health_forget(l, NULL);
    core_free(l);
}
