/*
 * mod_has: a module that uses a host member only where PLB_HAS finds it,
 * built against <prismlb/module.h> alone. An older 3.x daemon hands a
 * shorter table; this module must then take its fallback, not call past
 * the table's end.
 *
 * create logs, at info, one record per topic table naming the table's last
 * 3.0 member and whether the running daemon has it ("has obj.new_real:
 * yes"), and one for the root's last table ("has host.links: yes"; a table
 * the root lacks is not read). Then it
 * builds the value 0.5 for its status: with obj->new_real when the daemon
 * has it ("built 0.5 with new_real"), else as the string "0.5" with
 * obj->new_str ("built 0.5 with new_str"). Built with -DHAS_ABI_MINOR=N, its
 * descriptor says 3.N (a module of an older minor than the header's).
 */
#include <errno.h>
#include <stdio.h>

#include <prismlb/module.h>

#ifndef HAS_ABI_MINOR
#define HAS_ABI_MINOR PLB_ABI_MINOR
#endif

struct has {
    const struct plb_host *host;
    plb_obj *value; /* 0.5, built at create */
};

static void
say(const struct plb_host *host, plb_ctx *ctx, const char *what, int yes)
{
    host->log->msg(ctx, PLB_LOG_INFO, "has %s: %s", what, yes ? "yes" : "no");
}

static int
has_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
           size_t errlen)
{
    (void)config;
    say(host, ctx, "host.links", PLB_HAS(host, links));
    say(host, ctx, "log.set_level", PLB_HAS(host->log, set_level));
    say(host, ctx, "mem.strdup", PLB_HAS(host->mem, strdup));
    say(host, ctx, "loop.snapshot_free", PLB_HAS(host->loop, snapshot_free));
    say(host, ctx, "http.reply", PLB_HAS(host->http, reply));
    say(host, ctx, "kube.informer_foreach", PLB_HAS(host->kube, informer_foreach));
    say(host, ctx, "obj.new_real", PLB_HAS(host->obj, new_real));
    say(host, ctx, "metrics.on_collect", PLB_HAS(host->metrics, on_collect));
    say(host, ctx, "lb.keep_slices", PLB_HAS(host->lb, keep_slices));
    /* A table the root lacks is not read at all. */
    say(host, ctx, "links.done", PLB_HAS(host, links) && PLB_HAS(host->links, done));

    struct has *hs = host->mem->alloc(sizeof(*hs));
    if (!hs)
        return -ENOMEM;
    hs->host = host;
    if (PLB_HAS(host->obj, new_real)) {
        hs->value = host->obj->new_real(0.5);
        host->log->msg(ctx, PLB_LOG_INFO, "built 0.5 with new_real");
    } else {
        hs->value = host->obj->new_str("0.5");
        host->log->msg(ctx, PLB_LOG_INFO, "built 0.5 with new_str");
    }
    if (!hs->value) {
        snprintf(err, errlen, "out of memory");
        host->mem->free(hs);
        return -ENOMEM;
    }
    *state = hs;
    return 0;
}

static int
has_start(void *state, char *err, size_t errlen)
{
    (void)state;
    (void)err;
    (void)errlen;
    return 0;
}

static void
has_destroy(void *state)
{
    struct has *hs = state;
    hs->host->obj->unref(hs->value);
    hs->host->mem->free(hs);
}

PLB_MODULE_EXPORT = {
    .abi_major = PLB_ABI_MAJOR,
    .abi_minor = HAS_ABI_MINOR,
    .size = sizeof(struct plb_module),
    .name = "has",
    .version = "1.0",
    .description = "Test module that calls a member only where PLB_HAS finds it",
    .create = has_create,
    .start = has_start,
    .destroy = has_destroy,
};
