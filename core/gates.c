/*
 * gates: a gate instance (PLB_ROLE_GATE, mod_leader) opens and closes the
 * instances configured with `gate = "..."`. Opening calls gate_open on
 * every started gated instance whose write loop is not running; closing
 * calls gate_close on every one whose loop runs and completes once all of
 * them called host->done.
 *
 * The fence (plb_ctx.fence, see httpc.h) follows the gate: it opens just
 * before a gated instance's gate_open and closes, for every instance of
 * the gate, before any gate_close runs, so no write of the closed term is
 * sent afterwards (module.h, "Fencing").
 */
#include <errno.h>

#include "alloc.h"
#include "links.h"
#include "log.h"

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

void
core_gate_activate(plb_ctx *g)
{
    if (g->gated_active)
        return;
    g->gated_active = 1;
    core_http_fence_open(&g->fence);
    g->cm->mod->gate_open(g->state);
}

void
core_gate_forget(plb_ctx *g)
{
    core_http_fence_detach(&g->fence);
    g->fence.open = 0;
}

/* Close g's fence; say how many of its writes were already sent. */
static void
fence_close(plb_ctx *g)
{
    if (!g->fence.open)
        return;
    size_t sent = core_http_fence_close(&g->fence, g->name, g->cm->mod->name);
    if (sent)
        core_log(PLB_LOG_WARN, g->name, g->cm->mod->name,
                 "%zu write(s) in flight at gate close; nothing later is sent", sent);
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
            if (g->gate == ctx && g->st == CORE_INST_STARTED)
                core_gate_activate(g);
        }
        if (done)
            done(arg);
        return 0;
    }
    /* Fence every instance of the gate first (also one that stops), so a
     * hook cannot start a write another hook's instance would send. */
    for (size_t i = 0; i < c->ninst; i++) {
        if (c->inst[i]->gate == ctx)
            fence_close(c->inst[i]);
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
        g->gated_active = 0;
        if (!d) {
            /* Its write loop still ends (and the fence holds its writes);
             * only the wait for it is lost. */
            core_log(PLB_LOG_ERROR, g->name, g->cm->mod->name,
                     "out of memory closing the gate; not waiting for this instance");
            g->cm->mod->gate_close(g->state, NULL);
            continue;
        }
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
