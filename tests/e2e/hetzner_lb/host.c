/* The test host (see host.h). Built from the core's reactor and HTTP client;
 * does not include the daemon's core.h, so plb_ctx is this file's own. */
#include "host.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpc.h"
#include "reactor.h"

struct plb_ctx {
    struct event_base *base;
    struct core_httpc *httpc;
};

static const char *
t_name(plb_ctx *ctx)
{
    (void)ctx;
    return "hz-test";
}

static int64_t
t_now(plb_ctx *ctx)
{
    (void)ctx;
    return core_now_ms();
}

static int64_t
t_wall(plb_ctx *ctx)
{
    (void)ctx;
    return core_wall_ms();
}

static plb_timer *
t_timer_new(plb_ctx *ctx, plb_timer_cb cb, void *arg)
{
    return core_timer_new(ctx->base, cb, arg);
}

static plb_http_req *
t_http_request(plb_ctx *ctx, const struct plb_http_opts *o, int *err)
{
    return core_http_request(ctx->httpc, o, err);
}

int
th_init(struct th *t)
{
    memset(t, 0, sizeof(*t));
    if (!(t->ctx = calloc(1, sizeof(*t->ctx))))
        return -1;
    if (!(t->ctx->base = core_event_base_new()))
        return -1;
    if (!(t->ctx->httpc = core_httpc_new(t->ctx->base)))
        return -1;
    fake_host_init(&t->host);
    t->host.links.instance_name = t_name;
    t->host.loop.now_ms = t_now;
    t->host.loop.wall_ms = t_wall;
    t->host.loop.timer_new = t_timer_new;
    t->host.loop.timer_arm = core_timer_arm;
    t->host.loop.timer_cancel = core_timer_cancel;
    t->host.loop.timer_pending = core_timer_pending;
    t->host.loop.timer_free = core_timer_free;
    t->host.http.request = t_http_request;
    t->host.http.cancel = core_http_cancel;
    t->host.http.resp_status = core_http_resp_status;
    t->host.http.resp_error = core_http_resp_error;
    t->host.http.resp_error_text = core_http_resp_error_text;
    t->host.http.resp_body = core_http_resp_body;
    t->host.http.resp_header = core_http_resp_header;
    return 0;
}

void
th_fini(struct th *t)
{
    if (!t->ctx)
        return;
    core_httpc_free(t->ctx->httpc);
    if (t->ctx->base)
        event_base_free(t->ctx->base);
    free(t->ctx);
    t->ctx = NULL;
}

static void
stop_loop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    *(int *)arg = 1;
}

int
th_run_until(struct th *t, const int *flag, int timeout_ms)
{
    int expired = 0;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    struct event *ev = evtimer_new(t->ctx->base, stop_loop, &expired);
    if (!ev)
        return 0;
    evtimer_add(ev, &tv);
    while (!*flag && !expired)
        event_base_loop(t->ctx->base, EVLOOP_ONCE);
    event_free(ev);
    return *flag != 0;
}

void
th_run_for(struct th *t, int ms)
{
    int never = 0;
    th_run_until(t, &never, ms);
}
