#include "instance.h"

#include <event2/event.h>
#include <string.h>

#include "alloc.h"
#include "links.h"
#include "log.h"
#include "reactor.h"

#define INST_ERR(ctx, ...) core_log(PLB_LOG_ERROR, (ctx)->name, (ctx)->cm->mod->name, __VA_ARGS__)
#define INST_INFO(ctx, ...) core_log(PLB_LOG_INFO, (ctx)->name, (ctx)->cm->mod->name, __VA_ARGS__)
#define INST_WARN(ctx, ...) core_log(PLB_LOG_WARN, (ctx)->name, (ctx)->cm->mod->name, __VA_ARGS__)

static void (*stop_done_cb)(struct core *c);

void
core_instance_log_failure(plb_ctx *ctx, const char *what, int rc, char why[512])
{
    const char *err = rc < 0 ? strerror(-rc) : "failed";
    why[511] = '\0'; /* whatever the module wrote */
    const char *with_reason[] = {"reason", why, "error", err, NULL};
    const char *without[] = {"error", err, NULL};
    core_log_record(PLB_LOG_ERROR, ctx->name, ctx->cm->mod->name, why[0] ? with_reason : without,
                    what);
}

void
core_instance_destroy(plb_ctx *ctx)
{
    if (ctx->created) {
        ctx->cm->mod->destroy(ctx->state);
        ctx->state = NULL;
        ctx->created = 0;
    }
    ctx->stop_done = NULL; /* embedded: a stop that never completed frees nothing */
    core_links_forget(ctx);
}

int
core_instance_create(plb_ctx *ctx, const char *failed)
{
    char why[512] = "";
    int rc = ctx->cm->mod->create(ctx->core->host, ctx, ctx->config, &ctx->state, why, sizeof(why));
    if (rc < 0) {
        core_instance_log_failure(ctx, failed, rc, why);
        ctx->st = CORE_INST_STOPPED;
        return rc;
    }
    ctx->created = 1;
    ctx->st = CORE_INST_CREATED;
    return 0;
}

int
core_instance_start(plb_ctx *ctx, const char *failed, const char *started)
{
    char why[512] = "";
    int rc = ctx->cm->mod->start ? ctx->cm->mod->start(ctx->state, why, sizeof(why)) : 0;
    if (rc < 0) {
        core_instance_log_failure(ctx, failed, rc, why);
        ctx->st = CORE_INST_STOPPED;
        return rc;
    }
    ctx->st = CORE_INST_STARTED;
    INST_INFO(ctx, "%s", started);
    if (ctx->gate && ctx->gate->gate_open)
        core_gate_activate(ctx);
    return 0;
}

int
core_instances_create(struct core *c)
{
    for (size_t i = 0; i < c->ninst; i++) {
        if (core_instance_create(c->inst[i], "create failed") < 0) {
            core_instances_destroy(c);
            return -1;
        }
    }
    return 0;
}

static void stop_next(struct core *c);

void
core_instance_stop_hook(plb_ctx *ctx, void (*fn)(void *arg), struct event *timer, const char *what)
{
    int64_t g = ctx->core->cfg.shutdown_grace_ms;
    struct timeval tv = {(time_t)(g / 1000), (suseconds_t)((g % 1000) * 1000)};
    core_done_init(&ctx->stop_slot, fn, ctx);
    ctx->stop_done = &ctx->stop_slot;
    ctx->st = CORE_INST_STOPPING;
    /* Its stop ends its write loop too: a gate closing later must not
     * call gate_close on a stopped instance. */
    ctx->gated_active = 0;
    evtimer_add(timer, &tv);
    INST_INFO(ctx, "%s", what);
    ctx->cm->mod->stop(ctx->state, g, ctx->stop_done);
}

static void
inst_stopped(void *arg)
{
    plb_ctx *ctx = arg;
    struct core *c = ctx->core;
    ctx->stop_done = NULL; /* fired */
    if (ctx->st != CORE_INST_STOPPING)
        return; /* the grace ran out earlier; we moved on */
    ctx->st = CORE_INST_STOPPED;
    evtimer_del(c->stop_timer);
    INST_INFO(ctx, "stopped");
    stop_next(c);
}

static void
stop_grace_expired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct core *c = arg;
    plb_ctx *ctx = c->inst[c->stop_next];
    INST_WARN(ctx, "did not stop within the shutdown grace of %lld ms; going on",
              (long long)c->cfg.shutdown_grace_ms);
    ctx->st = CORE_INST_STOPPED;
    stop_next(c);
}

/* Stop instance c->stop_next - 1 downwards; each either completes at once
 * or within the grace timer. */
static void
stop_next(struct core *c)
{
    while (c->stop_next > 0) {
        plb_ctx *ctx = c->inst[--c->stop_next];
        if (ctx->st != CORE_INST_STARTED || !ctx->cm->mod->stop) {
            ctx->st = CORE_INST_STOPPED;
            continue;
        }
        /* inst_stopped goes on, later or already inside stop(). */
        core_instance_stop_hook(ctx, inst_stopped, c->stop_timer, "stopping");
        return;
    }
    if (stop_done_cb) {
        void (*cb)(struct core *) = stop_done_cb;
        stop_done_cb = NULL;
        cb(c);
    }
}

void
core_instances_stop(struct core *c, void (*on_done)(struct core *c))
{
    if (c->stopping)
        return;
    c->stopping = 1;
    stop_done_cb = on_done;
    if (!c->stop_timer)
        c->stop_timer = evtimer_new(c->base, stop_grace_expired, c);
    if (!c->stop_timer) {
        CORE_ERR("out of memory arming the shutdown timer; stopping without grace");
        for (size_t i = c->ninst; i > 0; i--)
            c->inst[i - 1]->st = CORE_INST_STOPPED;
        c->stop_next = 0;
    } else {
        c->stop_next = c->ninst;
    }
    stop_next(c);
}

int
core_instances_start(struct core *c)
{
    for (size_t i = 0; i < c->ninst; i++)
        if (core_instance_start(c->inst[i], "start failed", "started") < 0)
            return -1; /* the caller stops what started */
    return 0;
}

void
core_instances_destroy(struct core *c)
{
    for (size_t i = c->ninst; i > 0; i--)
        core_instance_destroy(c->inst[i - 1]);
    core_event_clear(&c->stop_timer);
}
