/*
 * host_worker: the "worker loops" entries of the host table (module.h,
 * since 2.2), adapters from a module's plb_ctx or worker handle to
 * core/worker.c, the reactor, the listener and the metrics registry.
 */
#include <errno.h>

#include "core.h"
#include "listener.h"
#include "metrics.h"
#include "reactor.h"
#include "worker.h"

size_t
core_h_worker_count(plb_ctx *ctx)
{
    return core_workers_count(ctx->core->workers);
}

plb_worker *
core_h_worker_at(plb_ctx *ctx, size_t i)
{
    return core_worker_at(ctx->core->workers, i);
}

int
core_h_post(plb_ctx *ctx, plb_worker *to, void (*fn)(void *arg), void *arg)
{
    if (!ctx->core->workers)
        return -EINVAL; /* no workers: nothing to post between */
    return core_post(ctx->core->workers, to, fn, arg);
}

plb_timer *
core_h_worker_timer_new(plb_worker *w, plb_timer_cb cb, void *arg)
{
    return core_timer_new(core_worker_base(w), cb, arg);
}

plb_io *
core_h_worker_io_new(plb_worker *w, int fd, int what, plb_io_cb cb, void *arg)
{
    return core_io_new(core_worker_base(w), fd, what, cb, arg);
}

int
core_h_listen_socket(plb_ctx *ctx, const char *addr, int port, int backlog, int reuseport,
                     int *bound_port)
{
    (void)ctx;
    return core_tcp_listen_socket_flags(addr, port, backlog, reuseport ? CORE_LISTEN_REUSEPORT : 0,
                                        bound_port, NULL, 0);
}

plb_listener *
core_h_worker_listen_fd(plb_worker *w, int fd, plb_accept_cb cb, void *arg, int *err)
{
    return core_listener_adopt(core_worker_base(w), fd, cb, arg, err);
}

plb_snapshot *
core_h_snapshot_new(plb_ctx *ctx)
{
    return core_snapshot_new(ctx->core->workers);
}

int
core_h_metrics_on_collect(plb_ctx *ctx, void (*cb)(void *arg), void *arg, int add)
{
    return core_metrics_on_collect(ctx->core->metrics, cb, arg, add);
}
