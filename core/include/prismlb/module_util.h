/*
 * prismlb/module_util.h — header-only conveniences for prismlb modules.
 *
 * Nothing here crosses the ABI: every helper expands or inlines to calls of the host tables of
 * <prismlb/module.h> and to fields of its structures, so a module built with these helpers needs
 * nothing of the daemon the header does not version. This file is not versioned by the ABI: a
 * helper may change or go in any release, and a module that copies one keeps working.
 *
 * Contents: descriptor macros (PLB_MODULE ...), settings rows (PLB_SETTING_LISTEN_PORT and the
 * Kubernetes client rows), PLB_STATE_NEW, randomness and clocks (plb_random_unit, struct
 * plb_clock), Kubernetes client settings (struct plb_kube_settings), starting an informer
 * (plb_informer_watch), keep lists (plb_keep_join), building objects (plb_obj_put), logging with
 * fields (PLB_KV, PLB_LOG, PLB_ERR, PLB_WARN, PLB_INFO, PLB_DEBUG).
 */
#ifndef PRISMLB_MODULE_UTIL_H
#define PRISMLB_MODULE_UTIL_H

#include <string.h>

#include "module.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Settings rows.                                                           */

/* A row for a TCP port the instance listens on, 1 to 65535, whose address
 * is the STRING setting named address_setting (PLB_SET_LISTEN_PORT: the
 * daemon refuses ports of two instances that collide); after it come the
 * row's other fields as designated initializers, the default and the doc
 * (never one the macro sets):
 *   PLB_SETTING_LISTEN_PORT("port", PLB_OFFSET(struct example_config, port),
 *                           "bind_address", .def = "8080", .doc = "..."), */
#define PLB_SETTING_LISTEN_PORT(name_, offset_, address_setting, ...)                              \
    {                                                                                              \
        .name = (name_), .type = PLB_SET_INT, .offset = (offset_), .min = 1, .max = 65535,         \
        .flags = PLB_SET_LISTEN_PORT, .listen_address = (address_setting), __VA_ARGS__             \
    }

/* Descriptor helpers for the fields every module sets the same way:
 *   PLB_MODULE_EXPORT = {
 *       PLB_MODULE("example", "1.0", "Does one thing"),
 *       PLB_MODULE_CONFIG(example_settings, struct example_config, example_check),
 *       PLB_MODULE_LIFECYCLE(example_create, example_start, example_stop,
 *                            example_destroy),
 *       .status = example_status,
 *   };
 * PLB_MODULE_ABI: the version this module was built for and the size of
 * its descriptor. PLB_MODULE(name, version, description): PLB_MODULE_ABI
 * and the three strings (static, borrowed for the module's life).
 * PLB_MODULE_SETTINGS: the settings table (terminated by
 * PLB_SETTINGS_END), its stride, and the config struct it fills in;
 * PLB_MODULE_CONFIG: the same and the check hook (NULL for none).
 * PLB_MODULE_LIFECYCLE: the create, start, stop and destroy hooks (stop
 * may be NULL). Any other field follows as a designated initializer. */
#define PLB_MODULE_ABI                                                                             \
    .abi_major = PLB_ABI_MAJOR, .abi_minor = PLB_ABI_MINOR, .size = sizeof(struct plb_module)
#define PLB_MODULE(name_, version_, description_)                                                  \
    PLB_MODULE_ABI, .name = (name_), .version = (version_), .description = (description_)
#define PLB_MODULE_SETTINGS(table, config_type)                                                    \
    .settings = (table), .setting_size = sizeof(struct plb_setting),                               \
    .config_size = sizeof(config_type)
#define PLB_MODULE_CONFIG(table, config_type, check_)                                              \
    PLB_MODULE_SETTINGS(table, config_type), .check = (check_)
#define PLB_MODULE_LIFECYCLE(create_, start_, stop_, destroy_)                                     \
    .create = (create_), .start = (start_), .stop = (stop_), .destroy = (destroy_)

/* In a create hook: allocate the instance's state *statep (zeroed, of
 * sizeof(**statep), with host->mem->alloc: the module frees it with host->mem->free)
 * and set its members host, ctx and cfg, which the module's state struct
 * names so, to the hook's host, ctx and config:
 *   struct example *ex;
 *   if (PLB_STATE_NEW(&ex, host, ctx, config) < 0)
 *       return -ENOMEM;
 * 0, or -ENOMEM with *statep NULL. Header-only: the daemon never sees
 * the state. */
#define PLB_STATE_NEW(statep, host_, ctx_, config_)                                                \
    ((*(statep) = (host_)->mem->alloc(sizeof(**(statep))))                                         \
         ? ((*(statep))->host = (host_), (*(statep))->ctx = (ctx_), (*(statep))->cfg = (config_),  \
            0)                                                                                     \
         : -ENOMEM)

/* ------------------------------------------------------------------------ */
/* Randomness for jitter.                                                    */

/* A uniform double in [0, 1) from the xorshift64* generator whose state is
 * *state (borrowed; seed it non-zero, e.g. from the wall clock and pid; it
 * stays non-zero). Not for secrets. */
static inline double
plb_random_unit(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0; /* 2^53 */
}

/* ------------------------------------------------------------------------ */
/* Clocks for code that takes them injected.                                */

/* The host's clocks and a plb_random_unit generator behind callbacks of
 * the form `T fn(void *arg)`, for code that takes its time and randomness
 * as such callbacks (a state machine unit tests drive with a fake clock):
 * hand it plb_clock_now_ms, plb_clock_wall_ms and plb_clock_random with a
 * pointer to a struct plb_clock as their argument, or to a struct whose
 * first member is one (C lets a pointer to a struct stand for a pointer to
 * its first member). The generator is not locked: use one plb_clock from
 * one thread. Header-only: the daemon never sees this structure. */
struct plb_clock {
    const struct plb_host *host; /* borrowed for the instance's life */
    plb_ctx *ctx;
    uint64_t rng; /* plb_random_unit's state, never 0 */
};

/* Set c up for the instance ctx, seeding its generator from the wall
 * clock and salt (the process ID, or bytes of getrandom). */
static inline void
plb_clock_init(struct plb_clock *c, const struct plb_host *host, plb_ctx *ctx, uint64_t salt)
{
    c->host = host;
    c->ctx = ctx;
    c->rng = ((uint64_t)host->loop->wall_ms(ctx) * 0x9E3779B97F4A7C15ULL) ^ salt;
    if (!c->rng)
        c->rng = 1;
}

/* loop->now_ms and loop->wall_ms of the clock's instance. */
static inline int64_t
plb_clock_now_ms(void *clock)
{
    const struct plb_clock *c = (const struct plb_clock *)clock;
    return c->host->loop->now_ms(c->ctx);
}
static inline int64_t
plb_clock_wall_ms(void *clock)
{
    const struct plb_clock *c = (const struct plb_clock *)clock;
    return c->host->loop->wall_ms(c->ctx);
}
/* Uniform in [0, 1), from the clock's generator. */
static inline double
plb_clock_random(void *clock)
{
    struct plb_clock *c = (struct plb_clock *)clock;
    return plb_random_unit(&c->rng);
}

/* ------------------------------------------------------------------------ */
/* Kubernetes client settings.                                              */

/* Where a module's Kubernetes client finds the API server, as the module's
 * config struct holds it: a member of this type, with one row of the
 * module's own settings table (its own name, default and doc) for each
 * field it offers, e.g. PLB_OFFSET(struct example_config, kube.server). A
 * field without a row stays NULL / 0. Header-only: the daemon never sees
 * this structure. */
struct plb_kube_settings {
    char *kubeconfig;      /* PLB_SET_PATH */
    char *context;         /* PLB_SET_STRING: the kubeconfig context */
    int in_cluster;        /* PLB_SET_BOOL */
    char *server;          /* PLB_SET_STRING, PLB_FMT_HTTP_URL */
    char *tls_server_name; /* PLB_SET_STRING, PLB_FMT_TLS_NAME */
    char *sa_dir;          /* PLB_SET_PATH: the service account directory */
};

/* Set the fields of the client options o that s holds (kubeconfig,
 * context, in_cluster, sa_dir, server, tls_server_name); the others are
 * left as they are. The strings stay s's (borrowed by o). */
static inline void
plb_kube_settings_apply(const struct plb_kube_settings *s, struct plb_kube_opts *o)
{
    o->kubeconfig = s->kubeconfig;
    o->context = s->context;
    o->in_cluster = s->in_cluster;
    o->sa_dir = s->sa_dir;
    o->server = s->server;
    o->tls_server_name = s->tls_server_name;
}

/* Settings-table rows for the Kubernetes client settings, with the name,
 * type, format and default every module gives them, so that a config
 * reads alike across modules. offset_ is where the value goes (the field
 * of a struct plb_kube_settings member, or a field of the same type);
 * after it come the row's other fields as designated initializers, the
 * doc at least (what "unset" means is the module's), never one the macro
 * sets (gcc's -Woverride-init):
 *   PLB_SETTING_KUBECONFIG(PLB_OFFSET(struct example_config, kube.kubeconfig),
 *                          .doc = "kubeconfig file; unset: in-cluster"),
 *   PLB_SETTING_TLS_SERVER_NAME(PLB_OFFSET(struct example_config, kube.tls_server_name),
 *                               .flags = PLB_SET_NONEMPTY, .doc = "..."), */
#define PLB_SETTING_KUBECONFIG(offset_, ...)                                                       \
    {                                                                                              \
        .name = "kubeconfig", .type = PLB_SET_PATH, .offset = (offset_), __VA_ARGS__               \
    }
#define PLB_SETTING_KUBE_CONTEXT(offset_, ...)                                                     \
    {                                                                                              \
        .name = "kube_context", .type = PLB_SET_STRING, .offset = (offset_), __VA_ARGS__           \
    }
#define PLB_SETTING_IN_CLUSTER(offset_, ...)                                                       \
    {                                                                                              \
        .name = "in_cluster", .type = PLB_SET_BOOL, .offset = (offset_), .def = "false",           \
        __VA_ARGS__                                                                                \
    }
#define PLB_SETTING_KUBE_SERVER(offset_, ...)                                                      \
    {                                                                                              \
        .name = "server", .type = PLB_SET_STRING, .offset = (offset_), .format = PLB_FMT_HTTP_URL, \
        __VA_ARGS__                                                                                \
    }
#define PLB_SETTING_TLS_SERVER_NAME(offset_, ...)                                                  \
    {                                                                                              \
        .name = "tls_server_name", .type = PLB_SET_STRING, .offset = (offset_),                    \
        .format = PLB_FMT_TLS_NAME, __VA_ARGS__                                                    \
    }
#define PLB_SETTING_SERVICE_ACCOUNT_DIR(offset_, ...)                                              \
    {                                                                                              \
        .name = "service_account_dir", .type = PLB_SET_PATH, .offset = (offset_),                  \
        .def = "/var/run/secrets/kubernetes.io/serviceaccount", __VA_ARGS__                        \
    }

/* 1 when s names a TLS server name that cannot apply (its server is a
 * plain http:// URL), for a module's check hook to report; else 0. */
static inline int
plb_kube_settings_tls_name_unused(const struct plb_kube_settings *s)
{
    return s->tls_server_name && s->server && strncmp(s->server, "http://", 7) == 0;
}

/* ------------------------------------------------------------------------ */
/* Starting an informer.                                                    */

/* The callbacks of an informer (see plb_informer_opts; each may be NULL),
 * as a module keeps them in a static table. */
struct plb_informer_handlers {
    plb_informer_add_cb on_add;
    plb_informer_update_cb on_update;
    plb_informer_delete_cb on_delete;
    plb_informer_synced_cb on_synced;
    plb_informer_status_cb on_status;
};

/* informer_new of k for resource (api_version "v1", resource "services")
 * in ns (NULL: every namespace) with label_selector (NULL: none), keeping
 * the fields keep names (plb_informer_opts.keep; NULL: whole objects),
 * calling cb's callbacks with arg; the other options at their defaults.
 * Every pointer is borrowed for the call. The informer (new), or NULL
 * with *err as informer_new sets it. */
static inline plb_informer *
plb_informer_watch(const struct plb_host *h, plb_kube *k, const char *api_version,
                   const char *resource, const char *ns, const char *label_selector,
                   const char *const *keep, const struct plb_informer_handlers *cb, void *arg,
                   int *err)
{
    const struct plb_kube_ref ref = {
        .size = sizeof(ref), .api_version = api_version, .resource = resource, .ns = ns};
    const struct plb_informer_opts o = {
        .size = sizeof(o),
        .ref = &ref,
        .label_selector = label_selector,
        .on_add = cb->on_add,
        .on_update = cb->on_update,
        .on_delete = cb->on_delete,
        .on_synced = cb->on_synced,
        .on_status = cb->on_status,
        .arg = arg,
        .keep = keep,
    };
    return h->kube->informer_new(k, &o, err);
}

/* The paths of a, then those of b (each NULL-terminated, or NULL), as one NULL-terminated
 * keep list for plb_informer_opts.keep: a module's own paths and what host->lb->keep_nodes names,
 * say. New (free with host->mem->free; the strings stay a's and b's), or NULL when out of memory.
 */
static inline const char **
plb_keep_join(const struct plb_host *host, const char *const *a, const char *const *b)
{
    size_t na = 0, nb = 0;
    while (a && a[na])
        na++;
    while (b && b[nb])
        nb++;
    const char **v = (const char **)host->mem->alloc((na + nb + 1) * sizeof(*v));
    if (!v)
        return NULL;
    for (size_t i = 0; i < na; i++)
        v[i] = a[i];
    for (size_t i = 0; i < nb; i++)
        v[na + i] = b[i];
    v[na + nb] = NULL;
    return v;
}

/* ------------------------------------------------------------------------ */
/* Building JSON objects.                                                   */

/* Set o's member key to v (steals v, also on failure; a NULL v, such as a
 * failed obj_new_*, is a failure) and set *bad on failure, else leave it:
 * a row of calls building an object, checked once at the end. */
static inline void
plb_obj_put(const struct plb_host *host, plb_obj *o, const char *key, plb_obj *v, int *bad)
{
    if (!v || host->obj->set(o, v, key, NULL) < 0)
        *bad = 1;
}

/* ------------------------------------------------------------------------ */
/* Logging helpers.                                                          */

/* A NULL-terminated key, value array for log->fields and the helpers:
 * PLB_KV("upstream", addr, "error", why). */
#define PLB_KV(...) ((const char *const[]){__VA_ARGS__, NULL})

static inline void plb_log_at(const struct plb_host *host, plb_ctx *ctx, enum plb_log_level lvl,
                              const char *const *kv, const char *fmt, va_list ap) PLB_PRINTF(5, 0);
static inline void
plb_log_at(const struct plb_host *host, plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv,
           const char *fmt, va_list ap)
{
    if (host->log->enabled(ctx, lvl))
        host->log->fields(ctx, lvl, kv, fmt, ap);
}

/* Log at a level: a printf-style message, and fields kv (PLB_KV(...), or
 * NULL). Arguments are evaluated even when the level is off. */
#define PLB_DEFINE_LOG_HELPER(NAME, LVL)                                                           \
    static inline void NAME(const struct plb_host *host, plb_ctx *ctx, const char *const *kv,      \
                            const char *fmt, ...) PLB_PRINTF(4, 5);                                \
    static inline void NAME(const struct plb_host *host, plb_ctx *ctx, const char *const *kv,      \
                            const char *fmt, ...)                                                  \
    {                                                                                              \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        plb_log_at(host, ctx, LVL, kv, fmt, ap);                                                   \
        va_end(ap);                                                                                \
    }
/* The same at a level chosen at run time. */
static inline void PLB_LOG(const struct plb_host *host, plb_ctx *ctx, enum plb_log_level lvl,
                           const char *const *kv, const char *fmt, ...) PLB_PRINTF(5, 6);
static inline void
PLB_LOG(const struct plb_host *host, plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv,
        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    plb_log_at(host, ctx, lvl, kv, fmt, ap);
    va_end(ap);
}
PLB_DEFINE_LOG_HELPER(PLB_ERR, PLB_LOG_ERROR)
PLB_DEFINE_LOG_HELPER(PLB_WARN, PLB_LOG_WARN)
PLB_DEFINE_LOG_HELPER(PLB_INFO, PLB_LOG_INFO)
PLB_DEFINE_LOG_HELPER(PLB_DEBUG, PLB_LOG_DEBUG)
#undef PLB_DEFINE_LOG_HELPER

#ifdef __cplusplus
}
#endif
#endif /* PRISMLB_MODULE_UTIL_H */
