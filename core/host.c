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
#include "lb/lbtargets.h"
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

/* The instance's own threshold (log_set_level) under the daemon's. */
static int
h_log_enabled(plb_ctx *ctx, enum plb_log_level lvl)
{
    return (int)lvl <= ctx->log_max && core_log_enabled(lvl);
}

static void h_log_msg(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, ...) PLB_PRINTF(3, 4);

static void
h_log_msg(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, ...)
{
    if (!h_log_enabled(ctx, lvl))
        return;
    va_list ap;
    va_start(ap, fmt);
    core_logv(lvl, ctx->name, ctx->cm->mod->name, fmt, ap);
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

static const struct plb_host_log host_log = {
    .size = sizeof(struct plb_host_log),
    .enabled = h_log_enabled,
    .msg = h_log_msg,
    .fields = h_log_fields,
    .set_level = h_log_set_level,
};

static const struct plb_host_mem host_mem = {
    .size = sizeof(struct plb_host_mem),
    .alloc = h_alloc,
    .realloc = core_realloc,
    .free = core_free,
    .strdup = core_strdup,
};

static const struct plb_host_loop host_loop = {
    .size = sizeof(struct plb_host_loop),
    .now_ms = h_now_ms,
    .wall_ms = h_wall_ms,
    .timer_new = h_timer_new,
    .timer_arm = core_timer_arm,
    .timer_cancel = core_timer_cancel,
    .timer_pending = core_timer_pending,
    .timer_free = core_timer_free,
    .io_new = h_io_new,
    .io_add = core_io_add,
    .io_free = core_io_free,
    .io_activate = core_io_activate,
    .listen_tcp = h_listen_tcp,
    .listener_port = core_listener_port,
    .listener_pause = core_listener_pause,
    .listener_free = core_listener_free,
    .listener_fd = core_listener_fd,
    .listen_socket = core_h_listen_socket,
    .worker_count = core_h_worker_count,
    .worker_at = core_h_worker_at,
    .worker_index = core_worker_index,
    .post = core_h_post,
    .worker_timer_new = core_h_worker_timer_new,
    .worker_io_new = core_h_worker_io_new,
    .worker_listen_fd = core_h_worker_listen_fd,
    .snapshot_new = core_h_snapshot_new,
    .snapshot_publish = core_snapshot_publish,
    .snapshot_get = core_snapshot_get,
    .snapshot_free = core_snapshot_free,
};

static const struct plb_host_http host_http = {
    .size = sizeof(struct plb_host_http),
    .request = h_http_request,
    .cancel = core_http_cancel,
    .resp_status = core_http_resp_status,
    .resp_error = core_http_resp_error,
    .resp_error_text = core_http_resp_error_text,
    .resp_body = core_http_resp_body,
    .resp_header = core_http_resp_header,
    .resp_in_flight_at_close = core_http_resp_in_flight_at_close,
    .server_new = h_http_server_new,
    .server_port = core_http_server_port,
    .route = core_http_route,
    .server_free = core_http_server_free,
    .method = core_http_method,
    .path = core_http_path,
    .query = core_http_query,
    .reply = core_http_reply,
};

static const struct plb_host_kube host_kube = {
    .size = sizeof(struct plb_host_kube),
    .client_new = h_kube_new,
    .client_free = core_kube_free,
    .server = core_kube_server,
    .ns = core_kube_namespace,
    .get = core_kube_get,
    .create = core_kube_create,
    .update = core_kube_update,
    .patch = core_kube_patch,
    .modify = core_kube_modify,
    .event = core_kube_event,
    .cancel = core_kube_cancel,
    .informer_new = core_informer_new,
    .informer_free = core_informer_free,
    .informer_synced = core_informer_synced,
    .informer_count = core_informer_count,
    .informer_get = core_informer_get,
    .informer_foreach = core_informer_foreach,
};

static const struct plb_host_obj host_obj = {
    .size = sizeof(struct plb_host_obj),
    .get = core_obj_get,
    .type = core_obj_type,
    .str = core_obj_str,
    .int64 = core_obj_int,
    .boolean = core_obj_bool,
    .len = core_obj_len,
    .at = core_obj_at,
    .iter = core_obj_iter,
    .dump = core_obj_dump,
    .ref = core_obj_ref,
    .unref = core_obj_unref,
    .copy = core_obj_copy,
    .set = core_obj_set,
    .append = core_obj_append,
    .new_str = core_obj_new_str,
    .new_int = core_obj_new_int,
    .new_object = core_obj_new_object,
    .new_array = core_obj_new_array,
    .new_bool = core_obj_new_bool,
    .new_null = core_obj_new_null,
    .new_real = core_obj_new_real,
};

static const struct plb_host_metrics host_metrics = {
    .size = sizeof(struct plb_host_metrics),
    .new_metric = h_metric_new,
    .new_shared = h_metric_new_shared,
    .add = core_metric_add,
    .set = core_metric_set,
    .observe = core_metric_observe,
    .remove = core_metric_remove,
    .render = h_metrics_render,
    .on_collect = core_h_metrics_on_collect,
};

static const struct plb_host_lb host_lb = {
    .size = sizeof(struct plb_host_lb),
    .select_targets = core_lb_host_select,
    .targets_clear = core_lb_host_clear,
    .selector_check = core_lb_host_selector_check,
    .status_write = core_lb_host_status_write,
    .keep_services = core_lb_keep_services,
    .keep_nodes = core_lb_keep_nodes,
    .keep_slices = core_lb_keep_slices,
    .status_write_ingress = core_lb_host_status_write_ingress,
};

static const struct plb_host_links host_links = {
    .size = sizeof(struct plb_host_links),
    .instance_name = h_instance_name,
    .instance_setting_str = h_instance_setting_str,
    .check_format = core_format_check_tls,
    .version = h_version,
    .revision = h_revision,
    .status_render = h_status_render,
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
};

const struct plb_host core_host = {
    .size = sizeof(struct plb_host),
    .abi_major = PLB_ABI_MAJOR,
    .abi_minor = PLB_ABI_MINOR,
    .log = &host_log,
    .mem = &host_mem,
    .loop = &host_loop,
    .http = &host_http,
    .kube = &host_kube,
    .obj = &host_obj,
    .metrics = &host_metrics,
    .lb = &host_lb,
    .links = &host_links,
};
