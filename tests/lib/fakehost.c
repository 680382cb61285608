/* The shared fake host (see fakehost.h). */
#include "fakehost.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int
f_log_level(void)
{
    const char *v = getenv("FAKE_HOST_LOG_LEVEL");
    return v && *v ? atoi(v) : PLB_LOG_WARN;
}

static int
f_log_enabled(plb_ctx *ctx, enum plb_log_level lvl)
{
    (void)ctx;
    return (int)lvl <= f_log_level();
}

static void f_log_fields(plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv,
                         const char *fmt, va_list ap) PLB_PRINTF(4, 0);

static void
f_log_fields(plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv, const char *fmt,
             va_list ap)
{
    if (!f_log_enabled(ctx, lvl))
        return;
    fprintf(stderr, "[fake host %d] ", (int)lvl);
    vfprintf(stderr, fmt, ap);
    for (size_t i = 0; kv && kv[i]; i += 2)
        fprintf(stderr, " %s=%s", kv[i], kv[i + 1] ? kv[i + 1] : "");
    fputc('\n', stderr);
}

static void f_log_msg(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, ...) PLB_PRINTF(3, 4);

static void
f_log_msg(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    f_log_fields(ctx, lvl, NULL, fmt, ap);
    va_end(ap);
}

static void
f_log_set_level(plb_ctx *ctx, int lvl)
{
    (void)ctx;
    (void)lvl;
}

static void *
f_alloc(size_t n)
{
    return calloc(1, n ? n : 1);
}

static int64_t
clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t
f_now_ms(plb_ctx *ctx)
{
    (void)ctx;
    return clock_ms(CLOCK_MONOTONIC);
}

static int64_t
f_wall_ms(plb_ctx *ctx)
{
    (void)ctx;
    return clock_ms(CLOCK_REALTIME);
}

void
fake_host_init(struct fake_host *f)
{
    memset(f, 0, sizeof(*f));
    f->root.size = sizeof(f->root);
    f->root.abi_major = PLB_ABI_MAJOR;
    f->root.abi_minor = PLB_ABI_MINOR;
    f->log.size = sizeof(f->log);
    f->mem.size = sizeof(f->mem);
    f->loop.size = sizeof(f->loop);
    f->http.size = sizeof(f->http);
    f->kube.size = sizeof(f->kube);
    f->obj.size = sizeof(f->obj);
    f->metrics.size = sizeof(f->metrics);
    f->lb.size = sizeof(f->lb);
    f->links.size = sizeof(f->links);
    f->root.log = &f->log;
    f->root.mem = &f->mem;
    f->root.loop = &f->loop;
    f->root.http = &f->http;
    f->root.kube = &f->kube;
    f->root.obj = &f->obj;
    f->root.metrics = &f->metrics;
    f->root.lb = &f->lb;
    f->root.links = &f->links;

    f->log.enabled = f_log_enabled;
    f->log.msg = f_log_msg;
    f->log.fields = f_log_fields;
    f->log.set_level = f_log_set_level;
    f->mem.alloc = f_alloc;
    f->mem.realloc = realloc;
    f->mem.free = free;
    f->mem.strdup = strdup;
    f->loop.now_ms = f_now_ms;
    f->loop.wall_ms = f_wall_ms;
}
