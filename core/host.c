/*
 * host: the table of core services handed to every module. Each entry is a
 * thin adapter from the module's plb_ctx to the core subsystem.
 */
#include "host.h"

#include <stdarg.h>
#include <string.h>

#include "alloc.h"
#include "build-config.h"
#include "httpc.h"
#include "httpd.h"
#include "lb/lbhost.h"
#include "kube/kube.h"
#include "links.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "reactor.h"
#include "settings.h"
#include "status.h"
#include "worker.h"

static const char *
h_instance_name(plb_ctx *ctx)
{
    return ctx->name;
}

static const char *
h_module_name(plb_ctx *ctx)
{
    return ctx->cm->mod->name;
}

static void h_logv(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, va_list ap)
    PLB_PRINTF(3, 0);

/* The instance's own threshold (log_set_level) under the daemon's. */
static int
h_log_enabled(plb_ctx *ctx, enum plb_log_level lvl)
{
    return (int)lvl <= ctx->log_max && core_log_enabled(lvl);
}

static void
h_logv(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, va_list ap)
{
    if (h_log_enabled(ctx, lvl))
        core_logv(lvl, ctx->name, ctx->cm->mod->name, fmt, ap);
}

static void h_logf(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, ...) PLB_PRINTF(3, 4);

static void
h_logf(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    h_logv(ctx, lvl, fmt, ap);
    va_end(ap);
}

static void h_log_fields(plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv,
                         const char *fmt, va_list ap) PLB_PRINTF(4, 0);

static void
h_log_fields(plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv, const char *fmt,
             va_list ap)
{
    if (h_log_enabled(ctx, lvl))
        core_log_fieldsv(lvl, ctx->name, ctx->cm->mod->name, kv, fmt, ap);
}

static void
h_log_kv(plb_ctx *ctx, enum plb_log_level lvl, const char *msg, ...)
{
    if (!h_log_enabled(ctx, lvl))
        return;
    va_list ap;
    va_start(ap, msg);
    core_log_kvv(lvl, ctx->name, ctx->cm->mod->name, msg, ap);
    va_end(ap);
}

static void
h_log_set_level(plb_ctx *ctx, int lvl)
{
    ctx->log_max = lvl < -1 ? -1 : lvl;
}

static int64_t
h_now_ms(plb_ctx *ctx)
{
    (void)ctx;
    return core_now_ms();
}

static int64_t
h_wall_ms(plb_ctx *ctx)
{
    (void)ctx;
    return core_wall_ms();
}

static plb_timer *
h_timer_new(plb_ctx *ctx, plb_timer_cb cb, void *arg)
{
    return core_timer_new(ctx->core->base, cb, arg);
}

static plb_io *
h_io_new(plb_ctx *ctx, int fd, int what, plb_io_cb cb, void *arg)
{
    return core_io_new(ctx->core->base, fd, what, cb, arg);
}

static plb_listener *
h_listen_tcp(plb_ctx *ctx, const char *addr, int port, int backlog, plb_accept_cb cb, void *arg,
             int *err)
{
    static const char *const labels[] = {"listener", NULL};
    plb_listener *l = core_listen_tcp(ctx->core->base, addr, port, backlog, cb, arg, err);
    plb_metric *m =
        l && ctx->core->metrics
            ? core_metric_new_view(ctx->core->metrics, CORE_METRIC_INSTANCE_LABEL, ctx->name,
                                   PLB_METRIC_COUNTER, "prismlb_accept_errors_total",
                                   "Times accept() failed on a listening socket (out of "
                                   "descriptors: each failure pauses accepting for 100 ms).",
                                   labels, NULL, 0, NULL)
            : NULL;
    if (m)
        core_listener_count_errors(l, m);
    return l;
}

static plb_http_server *
h_http_server_new(plb_ctx *ctx, const char *addr, int port, int *err)
{
    return core_http_server_new(ctx->core->base, addr, port, err);
}

static plb_http_req *
h_http_request(plb_ctx *ctx, const struct plb_http_opts *o, int *err)
{
    return core_http_request_fenced(ctx->core->httpc, o, ctx->gate ? &ctx->fence : NULL, err);
}

/* The family of an instance: every series with module_instance first. */
static plb_metric *
h_metric_new(plb_ctx *ctx, enum plb_metric_type type, const char *name, const char *help,
             const char *const *label_names, const double *buckets, size_t nbuckets)
{
    int err = 0;
    plb_metric *m = core_metric_new_view(ctx->core->metrics, CORE_METRIC_INSTANCE_LABEL, ctx->name,
                                         type, name, help, label_names, buckets, nbuckets, &err);
    if (!m)
        core_log(PLB_LOG_ERROR, ctx->name, ctx->cm->mod->name,
                 "cannot register metric %s: error %d", name, err);
    return m;
}

/* A family of the whole daemon, shared by every instance. */
static plb_metric *
h_metric_new_shared(plb_ctx *ctx, enum plb_metric_type type, const char *name, const char *help,
                    const char *const *label_names, const double *buckets, size_t nbuckets)
{
    int err = 0;
    plb_metric *m =
        core_metric_new(ctx->core->metrics, type, name, help, label_names, buckets, nbuckets, &err);
    if (!m)
        core_log(PLB_LOG_ERROR, ctx->name, ctx->cm->mod->name,
                 "cannot register metric %s: error %d", name, err);
    return m;
}

static char *
h_metrics_render(plb_ctx *ctx, size_t *len)
{
    return core_metrics_render(ctx->core->metrics, len);
}

static void
h_health_foreach(plb_ctx *ctx, plb_health_iter_cb cb, void *arg)
{
    core_health_foreach(ctx->core, cb, arg);
}

static void *
h_alloc(size_t n)
{
    return core_calloc(1, n);
}

static const char *
h_version(void)
{
    return PRISMLB_VERSION;
}

static const char *
h_revision(void)
{
    return PRISMLB_REVISION;
}

static plb_kube *
h_kube_new(plb_ctx *ctx, const struct plb_kube_opts *o, char *err, size_t errlen)
{
    plb_kube *k =
        core_kube_new(ctx->core->httpc, ctx->core->base, ctx, o, PRISMLB_VERSION, err, errlen);
    core_kube_set_fence(k, ctx->gate ? &ctx->fence : NULL);
    return k;
}

static char *
h_status_render(plb_ctx *ctx, size_t *len)
{
    return core_status_render(ctx->core, len);
}

static const char *
h_instance_setting_str(plb_ctx *ctx, const char *module, const char *setting)
{
    struct core *c = ctx->core;
    for (size_t i = 0; module && setting && i < c->ninst; i++) {
        const plb_ctx *x = c->inst[i];
        if (strcmp(x->cm->mod->name, module) != 0)
            continue;
        for (const struct plb_setting *s = x->cm->mod->settings; s && s->name;
             s = (const struct plb_setting *)((const char *)s + x->cm->mod->setting_size)) {
            if (strcmp(s->name, setting) == 0 &&
                (s->type == PLB_SET_STRING || s->type == PLB_SET_PATH))
                return *(char *const *)((const char *)x->config + s->offset);
        }
        return NULL;
    }
    return NULL;
}

const struct plb_host core_host = {
    .size = sizeof(struct plb_host),
    .abi_major = PLB_ABI_MAJOR,
    .abi_minor = PLB_ABI_MINOR,

    .instance_name = h_instance_name,
    .module_name = h_module_name,
    .logv = h_logv,
    .log_kv = h_log_kv,
    .log_enabled = h_log_enabled,

    .now_ms = h_now_ms,
    .wall_ms = h_wall_ms,
    .timer_new = h_timer_new,
    .timer_arm = core_timer_arm,
    .timer_cancel = core_timer_cancel,
    .timer_pending = core_timer_pending,
    .timer_free = core_timer_free,

    .io_new = h_io_new,
    .io_add = core_io_add,
    .io_del = core_io_del,
    .io_free = core_io_free,

    .listen_tcp = h_listen_tcp,
    .listener_port = core_listener_port,
    .listener_pause = core_listener_pause,
    .listener_free = core_listener_free,

    .http_server_new = h_http_server_new,
    .http_server_port = core_http_server_port,
    .http_route = core_http_route,
    .http_server_free = core_http_server_free,
    .http_method = core_http_method,
    .http_path = core_http_path,
    .http_query = core_http_query,
    .http_header = core_http_header,
    .http_reply = core_http_reply,

    .http_request = h_http_request,
    .http_cancel = core_http_cancel,
    .http_resp_status = core_http_resp_status,
    .http_resp_error = core_http_resp_error,
    .http_resp_error_text = core_http_resp_error_text,
    .http_resp_body = core_http_resp_body,
    .http_resp_header = core_http_resp_header,
    .http_resp_connect_time = core_http_resp_connect_time,
    .http_resp_total_time = core_http_resp_total_time,

    .metric_new = h_metric_new,
    .metric_add = core_metric_add,
    .metric_set = core_metric_set,
    .metric_observe = core_metric_observe,
    .metric_remove = core_metric_remove,
    .metrics_render = h_metrics_render,

    .endpoints_publish = core_endpoints_publish,
    .endpoints_failed = core_endpoints_failed,
    .endpoints_subscribe = core_endpoints_subscribe,

    .gate_set = core_gate_set,
    .gate_is_open = core_gate_is_open,

    .health_register = core_health_register,
    .health_beat = core_health_beat,
    .health_set = core_health_set,
    .health_foreach = h_health_foreach,

    .done = core_done_fire,

    .alloc = h_alloc,
    .realloc = core_realloc,
    .free = core_free,
    .strdup = core_strdup,

    .check_format = core_format_check_tls,

    .version = h_version,
    .revision = h_revision,

    .kube_new = h_kube_new,
    .kube_free = core_kube_free,
    .kube_server = core_kube_server,
    .kube_namespace = core_kube_namespace,
    .kube_get = core_kube_get,
    .kube_create = core_kube_create,
    .kube_update = core_kube_update,
    .kube_patch = core_kube_patch,
    .kube_delete = core_kube_delete,
    .kube_modify = core_kube_modify,
    .kube_event = core_kube_event,
    .kube_cancel = core_kube_cancel,
    .informer_new = core_informer_new,
    .informer_free = core_informer_free,
    .informer_synced = core_informer_synced,
    .informer_count = core_informer_count,
    .informer_get = core_informer_get,
    .informer_foreach = core_informer_foreach,
    .obj_get = core_obj_get,
    .obj_type = core_obj_type,
    .obj_str = core_obj_str,
    .obj_int = core_obj_int,
    .obj_bool = core_obj_bool,
    .obj_len = core_obj_len,
    .obj_at = core_obj_at,
    .obj_iter = core_obj_iter,
    .obj_dump = core_obj_dump,
    .obj_parse = core_obj_parse,
    .obj_ref = core_obj_ref,
    .obj_unref = core_obj_unref,
    .obj_copy = core_obj_copy,
    .obj_set = core_obj_set,
    .obj_del = core_obj_del,
    .obj_new_str = core_obj_new_str,
    .obj_new_int = core_obj_new_int,

    .lb_select_targets = core_lb_host_select,
    .lb_targets_clear = core_lb_host_clear,
    .lb_selector_check = core_lb_host_selector_check,
    .lb_status_write = core_lb_host_status_write,

    .listener_fd = core_listener_fd,
    .io_activate = core_io_activate,

    .logf = h_logf,
    .log_fields = h_log_fields,
    .log_set_level = h_log_set_level,
    .obj_new_object = core_obj_new_object,
    .obj_new_array = core_obj_new_array,
    .obj_new_bool = core_obj_new_bool,
    .obj_new_null = core_obj_new_null,
    .obj_new_real = core_obj_new_real,
    .obj_append = core_obj_append,
    .obj_remove = core_obj_remove,
    .status_render = h_status_render,
    .instance_setting_str = h_instance_setting_str,

    .worker_count = core_h_worker_count,
    .worker_at = core_h_worker_at,
    .worker_self = core_worker_self,
    .worker_index = core_worker_index,
    .post = core_h_post,
    .worker_timer_new = core_h_worker_timer_new,
    .worker_io_new = core_h_worker_io_new,
    .listen_socket = core_h_listen_socket,
    .worker_listen_fd = core_h_worker_listen_fd,
    .snapshot_new = core_h_snapshot_new,
    .snapshot_publish = core_snapshot_publish,
    .snapshot_get = core_snapshot_get,
    .snapshot_free = core_snapshot_free,
    .metrics_on_collect = core_h_metrics_on_collect,

    .metric_new_shared = h_metric_new_shared,
    .http_resp_in_flight_at_close = core_http_resp_in_flight_at_close,
};
