/*
 * prismlb/module.h — the public module ABI of prismlb.
 *
 * This header is the whole contract between the prismlb daemon and a module
 * (a shared object loaded with dlopen). A module includes only this header,
 * links against nothing of the daemon, and reaches every core service through
 * the host table handed to its hooks.
 *
 * A module exports exactly one symbol, PLB_MODULE_SYMBOL ("prismlb_module"),
 * a `const struct plb_module` built with designated initializers:
 *
 *     PLB_MODULE_EXPORT = {
 *         .abi_major = PLB_ABI_MAJOR,
 *         .abi_minor = PLB_ABI_MINOR,
 *         .size = sizeof(struct plb_module),
 *         .name = "example",
 *         .settings = example_settings,
 *         .setting_size = sizeof(struct plb_setting),
 *         ...
 *     };
 *
 * Versioning. The loader accepts a module when its abi_major equals the
 * daemon's and its abi_minor is at most the daemon's; it refuses any other
 * module with a message naming both versions. A minor version only adds
 * (new host functions at the end of struct plb_host, new hooks at the end of
 * struct plb_module, new fields at the end of a sized structure, new enum
 * values); a major version changes or removes something, or changes what an
 * existing function does. Use PLB_HOST_HAS() before calling a host function
 * added after the minor version your module requires (every member present
 * in 2.0 is always there).
 *
 * The size rule. Every structure that crosses the ABI and may grow carries
 * its size, and nothing that may grow is embedded by value in another
 * structure or laid out in an array without its stride:
 *   - a structure begins with `size_t size`, set by whoever fills it in
 *     (sizeof as that side was built): the module for options it passes
 *     (plb_http_opts, plb_kube_opts, plb_kube_ref, plb_kube_event,
 *     plb_informer_opts, plb_lb_targets), the daemon for what it hands over
 *     (plb_host, plb_kube_result, plb_informer_status, plb_endpoint_set,
 *     plb_health_info). The reader uses only the fields within that size
 *     and takes the others as zero / NULL; the daemon refuses (-EINVAL) a
 *     structure smaller than its 2.0 size, so a forgotten size fails at
 *     once;
 *   - an array of structures comes with its stride: a settings table with
 *     plb_module.setting_size, the targets of plb_lb_targets with
 *     target_size (walk it with PLB_LB_TARGET());
 *   - a structure referring to another holds a pointer (plb_informer_opts
 *     points at its plb_kube_ref).
 * plb_strv is a value stored in a module's config struct: a count and an
 * array of strings, and it never changes.
 *
 * Ownership words used in every comment below:
 *   new       the caller owns the result and frees it with the named function;
 *   borrowed  the callee keeps ownership; valid only for the duration stated;
 *   steals    ownership passes to the callee.
 *
 * Threading. Hooks run on the daemon's main event loop, and so does
 * everything a module does by default. With the daemon's `threads` setting
 * above 1 there are worker loops too (worker_count): threads with their own
 * event base, for a data path that scales with the CPUs. A module uses them
 * only through the worker functions (since 2.2): it makes timers, watches
 * and listeners on a worker with worker_timer_new, worker_io_new and
 * worker_listen_fd (on a socket listen_socket bound on the main loop), posts messages between the
 * loops (post), and publishes immutable snapshots for the workers to read (snapshot_*). State
 * crosses threads only that way. Each host function below is marked: [any]     callable from any
 * thread, the workers included; [own]     callable on the loop that made its handle (a timer, watch
 * or listener made on a worker is armed, changed and freed on that worker only); and every function
 * not marked is for the main loop only. No hook and no message may block.
 *
 * Callbacks. What a callback may do with the handles it holds:
 *   timer        timer_arm, timer_cancel and timer_free of the timer itself
 *                from its own callback (the daemon never touches a timer
 *                after calling it);
 *   io watch     io_add, io_del and io_free of the watch itself, and closing
 *                its fd after io_free, from its own callback;
 *   listener     listener_pause and listener_free of the listener from its
 *                accept callback;
 *   HTTP server  http_server_free from one of its handlers (it stops
 *                accepting now and is freed when the handler returns); an
 *                exchange is answered exactly once, now or later;
 *   HTTP client  http_cancel from the request's on_data (done is not
 *                called) and from anywhere else before done; a no-op inside
 *                done, after which the handle is gone;
 *   Kubernetes   kube_cancel of any call (a no-op inside that call's own
 *                done), kube_free and informer_free from any done callback
 *                of the client's calls and from any informer callback;
 *                informer_foreach's cb must not free the informer;
 *   completions  host->done(d) exactly once per plb_done, from anywhere on
 *                the loop, also before stop or gate_close returns.
 * No host function runs a module callback before it returns (completions
 * and informer events come from the loop), except where a comment says so.
 *
 * Lifetimes and orders.
 *   - create runs for every instance in config order, then start in config
 *     order; stop in reverse order, then destroy in reverse order.
 *   - A create that fails: neither start, stop nor destroy runs for that
 *     instance (free what create made before returning); the instances
 *     created before it get destroy.
 *   - A start that fails: stop is not called for that instance, destroy is
 *     (so destroy must free whatever a partial start made); the instances
 *     started before it get stop, then every created instance destroy.
 *   - gate_open runs for a gated instance (one with `gate = "..."`) right
 *     after its start returned 0 when its gate is open already, else at
 *     the first opening after that, and then on every later opening;
 *     gate_close on every closing while the instance's write loop runs
 *     (after a gate_open). Each gate_open is followed by at most one
 *     gate_close before the next gate_open. An instance without a gate
 *     never gets gate_open or gate_close (gate_is_open says 1): it writes
 *     from start. No gate callback comes once stop was called (nor during
 *     or after destroy, nor for an instance whose start failed).
 *   - Fencing. A gated instance's writes pass only while its gate is open
 *     (from just before gate_open until the gate closes; also while it
 *     stops, if the gate stays open): every Kubernetes write of its
 *     clients (kube_create, kube_update, kube_patch, kube_delete,
 *     kube_modify, lb_status_write, kube_event: Events too, since only the
 *     leader's controllers record them in a client-go deployment) and
 *     every http_request with a method other than GET and HEAD. While its
 *     gate is closed (before the first opening, too) such a call returns
 *     NULL with *err = PLB_EFENCED and sends nothing. When the gate closes
 *     (before gate_close is called) the daemon stops each write of the
 *     instance not yet sent: it is never sent, and its done reports
 *     PLB_HTTP_E_FENCED (the queued writes of a kube_modify or of the
 *     Event queue, too). A write already sent (curl had begun it on a
 *     connection) goes on; its completion says so (plb_kube_result
 *     .in_flight_at_close, http_resp_in_flight_at_close) and the daemon
 *     logs "write in flight at gate close" with the instance, method and
 *     URL. Cancelling such a write in gate_close does not unsend it: treat
 *     its effect as unknown. Reads (GET, informers) are never fenced.
 *   - Informers: on_add for every object of the first list, then on_synced
 *     once; later on_add, on_update, on_delete as changes arrive (after a
 *     re-list, only the differences).
 *
 * Changelog (every ABI change, newest first):
 *   2026-12-02  2.7  plb_http_opts.fresh_connection: a request on a new
 *                    connection that is closed after it (2.0-2.6 options
 *                    are shorter and reuse connections as before).
 *   2026-12-01  2.6  plb_informer_opts.keep: an informer caches only the
 *                    fields it names (and always an object's identity:
 *                    metadata name, namespace, uid and resourceVersion)
 *                    and does not report an update that
 *                    changed none of them; adds and deletes are reported
 *                    as before. A module built for 2.0 to 2.5 passes the
 *                    shorter plb_informer_opts and keeps whole objects
 *                    (the daemon reads keep only within o->size).
 *                    Header-only beside 2.6: struct
 *                    plb_informer_handlers and plb_informer_watch, an
 *                    informer of one resource started from its callbacks
 *                    in one call; PLB_STATE_NEW, a create hook's
 *                    allocation of the instance's state with its host,
 *                    ctx and cfg members set.
 *   2026-12-01  2.5  snapshot_publish can fail with -ENOMEM (the record
 *                    that will retire the data is allocated before it is
 *                    published; 2.2 to 2.4 published anyway and, out of
 *                    memory, never released the data it replaced); on any
 *                    error the data stays the caller's, as with -EINVAL.
 *                    Header-only beside 2.5 (nothing a built module or
 *                    the daemon sees changes): struct plb_kube_settings,
 *                    the Kubernetes client settings as a config struct
 *                    holds them; plb_kube_settings_apply, which sets
 *                    them into a plb_kube_opts;
 *                    plb_kube_settings_tls_name_unused for a check hook
 *                    (module.h now includes <string.h>); plb_obj_put,
 *                    obj_set for building an object in a row of calls
 *                    checked once; PLB_SENTINEL_MEMBER on the host
 *                    table's variadic members in place of PLB_SENTINEL,
 *                    which clang refuses on a function pointer
 *                    (-Wignored-attributes failed -Werror builds; gcc
 *                    still checks the closing NULL); PLB_MODULE,
 *                    PLB_MODULE_CONFIG and PLB_MODULE_LIFECYCLE for the
 *                    descriptor's identity, settings with check, and the
 *                    four lifecycle hooks; settings rows
 *                    PLB_SETTING_LISTEN_PORT, PLB_SETTING_KUBECONFIG,
 *                    PLB_SETTING_KUBE_CONTEXT, PLB_SETTING_IN_CLUSTER,
 *                    PLB_SETTING_KUBE_SERVER, PLB_SETTING_TLS_SERVER_NAME
 *                    and PLB_SETTING_SERVICE_ACCOUNT_DIR (the name, type,
 *                    format and default the built-in modules give them);
 *                    struct plb_clock with plb_clock_init,
 *                    plb_clock_now_ms, plb_clock_wall_ms and
 *                    plb_clock_random, the host's clocks and a jitter
 *                    generator as `T fn(void *arg)` callbacks.
 *   2026-12-01  2.4  fencing of gated writes (see "Fencing"): the daemon
 *                    refuses a gated instance's Kubernetes and HTTP writes
 *                    while its gate is closed (PLB_EFENCED), stops those
 *                    not yet sent when it closes (PLB_HTTP_E_FENCED) and
 *                    marks those already sent (plb_kube_result
 *                    .in_flight_at_close, http_resp_in_flight_at_close);
 *                    when gate_open and gate_close run, stated in
 *                    "Lifetimes and orders".
 *   2026-12-01  2.3  metric_new_shared: a family of the whole daemon, with
 *                    no module_instance label (mod_metrics' process_* and
 *                    prismlb_build_info). Beside it, metric_new's series
 *                    now carry module_instance="<instance name>", always,
 *                    so two instances of one module no longer share one
 *                    counter; a change of meaning, counted with 2.0's (no
 *                    2.x was released before it). Always, not only when a
 *                    second instance appears: a series' labels must not
 *                    depend on what else is configured (adding an
 *                    instance would rename the first one's series, break
 *                    rate() across the change and the alerts and
 *                    recording rules that name its labels), and the first
 *                    instance registers before the second exists. Not
 *                    `instance`, which Prometheus sets on every target.
 *   2026-12-01  2.2  Worker loops: worker_count, worker_at, worker_self,
 *                    worker_index, post, worker_timer_new, worker_io_new,
 *                    listen_socket (bound and listening at once, with
 *                    SO_REUSEPORT on request), worker_listen_fd (accepts
 *                    on it from a worker), snapshot_new,
 *                    snapshot_publish, snapshot_get, snapshot_free,
 *                    metrics_on_collect; every host function is marked
 *                    [any], [own] or (unmarked) main loop only.
 *                    Header-only helpers beside 2.2 (nothing a built
 *                    module or the daemon sees changes): plb_check_report,
 *                    the type of the check hook's report function (with
 *                    PLB_PRINTF, so a module's own declarations check
 *                    formats); PLB_MODULE_ABI and PLB_MODULE_SETTINGS for
 *                    the descriptor fields every module sets alike;
 *                    plb_random_unit (xorshift64*, for jitter).
 *   2026-12-01  2.1  status: plb_module.status (an instance's state as a
 *                    JSON object, for /status and `prismlb status`) and
 *                    plb_host.status_render (every instance's, for the
 *                    probe server); plb_host.instance_setting_str (another
 *                    instance's string setting, for defaults that follow
 *                    it).
 *   2026-12-01  2.0  A major version; a module built for 1.x is refused with
 *                    both versions in the message. Every change:
 *                    - 1.1 changed what io_add does on a watch already added
 *                      (only its timeout changes, where 1.0 re-added it) with
 *                      a minor bump; a change of meaning is a major change,
 *                      and 2.0 is where it is counted;
 *                    - the size rule above: plb_module.setting_size gives
 *                      the stride of the settings table (1.x had none, so a
 *                      table built before `format` was appended would be
 *                      misread); plb_lb_targets begins with its size and
 *                      gives target_size (PLB_LB_TARGET()); plb_kube_ref
 *                      begins with its size and plb_informer_opts.ref is a
 *                      pointer to one; plb_endpoint_set and plb_health_info
 *                      begin with their size;
 *                    - logging: logf (printf-style, PLB_PRINTF), log_fields
 *                      (a formatted message plus key/value fields),
 *                      log_set_level (an instance's own threshold), and the
 *                      static inline PLB_ERR/PLB_WARN/PLB_INFO/PLB_DEBUG
 *                      and PLB_LOG with fields from PLB_KV;
 *                      log_kv's msg is literal;
 *                    - JSON builders: obj_new_object, obj_new_array,
 *                      obj_new_bool, obj_new_null, obj_new_real,
 *                      obj_append, obj_remove (beside obj_set, obj_del);
 *                    - `sentinel` attributes on obj_get, obj_set, obj_del,
 *                      log_kv (their variadic lists end with NULL);
 *                    - create and start take an err buffer: a reason the
 *                      daemon logs with the instance when they fail;
 *                    - settings across instances: PLB_SET_LISTEN_PORT and
 *                      plb_setting.listen_address declare a listening port
 *                      and its address; the daemon refuses two colliding
 *                      ones (--check-config names both with FILE:LINE);
 *                    - callback rules and lifetimes stated for every handle
 *                      (see "Callbacks" and "Lifetimes and orders");
 *                    - PLB_HOST_HAS is for members added after 2.0 only;
 *                    - metric_new: series carry module_instance (made
 *                      with 2.3, see there).
 *   2026-11-29  1.1  listener_fd: the listening socket, for options that
 *                    accepted sockets inherit; edge-triggered watches
 *                    (PLB_IO_EDGE), the peer's FIN as PLB_IO_CLOSED, and
 *                    io_activate to resume one; io_add on an added watch
 *                    changes only its timeout.
 *   2026-11-29  1.0  First ABI: descriptor, settings tables, lifecycle,
 *                    logging, timers, fd watches, TCP listeners, HTTP
 *                    servers, HTTP client, metrics, endpoint links, gates,
 *                    health checks, Kubernetes client and informers,
 *                    JSON objects, Service load-balancer target selection
 *                    and status, setting formats.
 */
#ifndef PRISMLB_MODULE_H
#define PRISMLB_MODULE_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLB_ABI_MAJOR 2
#define PLB_ABI_MINOR 7

/* The symbol every module exports. */
#define PLB_MODULE_SYMBOL "prismlb_module"
#define PLB_MODULE_EXPORT                                                                          \
    __attribute__((visibility("default"))) const struct plb_module prismlb_module

#if defined(__GNUC__)
#define PLB_PRINTF(f, a) __attribute__((format(printf, f, a)))
/* A variadic list that ends with NULL: PLB_SENTINEL on a function. */
#define PLB_SENTINEL __attribute__((sentinel))
#else
#define PLB_PRINTF(f, a)
#define PLB_SENTINEL
#endif
/* The same on a function-pointer member (the host table's obj_get, obj_set,
 * obj_del, log_kv): gcc checks calls through the pointer; clang takes the
 * attribute only on functions (-Wignored-attributes), so there it is
 * empty and calls through the pointer go unchecked. */
#if defined(__GNUC__) && !defined(__clang__)
#define PLB_SENTINEL_MEMBER __attribute__((sentinel))
#else
#define PLB_SENTINEL_MEMBER
#endif

/* ------------------------------------------------------------------------ */
/* Opaque handles. Their layout belongs to the daemon.                      */

typedef struct plb_ctx plb_ctx;                     /* one module instance */
typedef struct plb_timer plb_timer;                 /* a timer on the event loop */
typedef struct plb_io plb_io;                       /* a watch on a file descriptor */
typedef struct plb_listener plb_listener;           /* a TCP listener */
typedef struct plb_http_server plb_http_server;     /* a small HTTP server */
typedef struct plb_http_exchange plb_http_exchange; /* one request to that server */
typedef struct plb_http_req plb_http_req;           /* one HTTP client request */
typedef struct plb_http_resp plb_http_resp;         /* its response */
typedef struct plb_metric plb_metric;               /* a metric family */
typedef struct plb_check plb_check;                 /* a config validation pass */
typedef struct plb_worker plb_worker;               /* a worker loop (since 2.2) */
typedef struct plb_snapshot plb_snapshot;           /* a published snapshot slot */
typedef struct plb_done plb_done;                   /* an asynchronous completion */
typedef struct plb_obj plb_obj;                     /* a JSON value (Kubernetes objects) */
typedef struct plb_kube plb_kube;                   /* a Kubernetes API client */
typedef struct plb_kube_op plb_kube_op;             /* one Kubernetes API call */
typedef struct plb_informer plb_informer;           /* a list+watch cache of one resource */

/* ------------------------------------------------------------------------ */
/* Settings tables.                                                          */

enum plb_setting_type {
    PLB_SET_BOOL = 1,    /* int (0 or 1) */
    PLB_SET_INT,         /* int64_t, within [min, max] */
    PLB_SET_DOUBLE,      /* double, within [min, max] */
    PLB_SET_STRING,      /* char * (NUL-terminated; NULL when unset, no default) */
    PLB_SET_DURATION,    /* int64_t milliseconds; "150ms", "20s", "1m30s", "2h" or
                            an integer number of seconds; within [min, max] ms */
    PLB_SET_ENUM,        /* int: index into enum_values */
    PLB_SET_STRING_LIST, /* struct plb_strv: array of strings or one string with
                            comma-separated items */
    PLB_SET_PATH,        /* char *: a file path, relative paths resolved against
                            the directory of the config file that set it */
    PLB_SET_INSTANCES,   /* struct plb_strv of instance names, each checked to
                            exist and to provide the role in `role` */
};

/* Formats the daemon checks a STRING value, or each item of a STRING_LIST,
 * against (before the setting's own validator; NULL and "" are left to
 * PLB_SET_NONEMPTY). The same checks are offered at run time as
 * plb_host.check_format. */
enum plb_setting_format {
    PLB_FMT_NONE = 0,
    PLB_FMT_HOST,      /* an IP address or an RFC 1123 hostname */
    PLB_FMT_HOST_PORT, /* host:port, [IPv6]:port; port 1-65535 */
    PLB_FMT_TLS_NAME,  /* a name to verify a certificate against: a hostname
                          or IP, no port, scheme, path or brackets */
    PLB_FMT_HTTP_URL,  /* an http:// or https:// URL naming a host */
    PLB_FMT_DNS_LABEL, /* an RFC 1123 label: a-z, 0-9, '-', at most 63,
                          a letter or digit at both ends */
};

/* Flags of a setting. */
#define PLB_SET_REQUIRED 0x1u /* no default: must be given */
#define PLB_SET_SECRET 0x2u   /* never printed (logs, --check-config output) */
#define PLB_SET_NONEMPTY 0x4u /* strings and lists: must not be empty */
/* INT: a TCP port the instance listens on (0: the system picks one). The
 * STRING setting named by `listen_address` holds its address (none: every
 * address). The daemon refuses two such ports of any instances that would
 * collide (the same port on the same address, or either on a wildcard),
 * with FILE:LINE naming both settings, also for --check-config. */
#define PLB_SET_LISTEN_PORT 0x8u

/* Roles an instance can provide to others (struct plb_module.provides). */
#define PLB_ROLE_ENDPOINTS 0x1u /* publishes endpoint sets */
#define PLB_ROLE_GATE 0x2u      /* opens and closes gated instances */

struct plb_strv {
    size_t n;
    char **v; /* n strings, owned by the daemon */
};

/*
 * One setting. A table is an array of these ending with PLB_SETTINGS_END;
 * the daemon steps through it by plb_module.setting_size, so a module built
 * with an older or newer header (a smaller or larger struct) is read right:
 * fields the module's struct lacks are taken as zero. The daemon parses the value from the config
 * file (or the environment variable `env`, which wins over the file), checks type and bounds, runs
 * `validate`, and stores it at `offset` in the module's config struct (of plb_module.config_size
 * bytes). `def` is the default written as it would be in the config file ("20s", "127.0.0.1",
 * "true", "a,b"); NULL means no default (zero / NULL / empty list). The same table renders the
 * module's settings reference (prismlb --settings-doc MODULE).
 */
struct plb_setting {
    const char *name;
    enum plb_setting_type type;
    size_t offset;
    const char *def;
    double min, max;                /* INT, DOUBLE, DURATION (ms): bounds when
                                       either is non-zero; max <= min means
                                       no upper bound */
    const char *const *enum_values; /* ENUM: NULL-terminated list */
    uint32_t flags;                 /* PLB_SET_* flags */
    uint32_t role;                  /* INSTANCES: PLB_ROLE_* the targets provide */
    const char *env;                /* environment variable overriding it, or NULL */
    const char *doc;                /* one line */
    /* Extra check of one value, or NULL. `value` points at the parsed field.
     * Return NULL if valid, else a static or thread-local message. */
    const char *(*validate)(const void *value);
    enum plb_setting_format format; /* checked by the daemon; 0: none */
    const char *listen_address;     /* PLB_SET_LISTEN_PORT: the name of the
                                       setting with the port's address */
};

/* Helpers for settings tables. */
#define PLB_OFFSET(type, field) offsetof(type, field)
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
#define PLB_SETTINGS_END                                                                           \
    {                                                                                              \
        0                                                                                          \
    }

/* ------------------------------------------------------------------------ */
/* Logging.                                                                  */

enum plb_log_level {
    PLB_LOG_ERROR = 0,
    PLB_LOG_WARN = 1,
    PLB_LOG_INFO = 2,
    PLB_LOG_DEBUG = 3,
};

/* ------------------------------------------------------------------------ */
/* Callbacks.                                                                */

typedef void (*plb_timer_cb)(plb_timer *t, void *arg);

#define PLB_IO_READ 0x02
#define PLB_IO_WRITE 0x04
#define PLB_IO_TIMEOUT 0x01
/* Since 1.1, for io_new: edge-triggered. The watch fires when the fd becomes
 * readable or writable again, not while it stays so: read until EAGAIN (or a
 * short read of a stream socket) and write until EAGAIN before expecting
 * another call, or resume later with io_activate. Fires once when added if
 * the fd is ready then. */
#define PLB_IO_EDGE 0x08
/* Since 1.1, for io_new with PLB_IO_READ, and in what: the peer has shut
 * its writing side (on Linux EPOLLRDHUP): once every byte before the FIN is
 * read, the next read returns 0. A hint, only where the system reports it;
 * a read of 0 stays the definite EOF. */
#define PLB_IO_CLOSED 0x10
/* what: PLB_IO_* bits that fired. */
typedef void (*plb_io_cb)(plb_io *io, int fd, int what, void *arg);

/* A new connection; the module owns fd (non-blocking, close-on-exec).
 * peer is borrowed for the call ("1.2.3.4:5678" or "[::1]:5678"). */
typedef void (*plb_accept_cb)(plb_listener *l, int fd, const char *peer, void *arg);

/* An HTTP server request; answer it with host->http_reply, now or later. */
typedef void (*plb_http_handler)(plb_http_exchange *x, void *arg);

/* ------------------------------------------------------------------------ */
/* HTTP client.                                                              */

/* How the body of a response is delivered. */
enum plb_http_body_mode {
    PLB_HTTP_BUFFER = 0, /* whole body in the response, up to max_body bytes */
    PLB_HTTP_CHUNKS,     /* each piece to on_data as it arrives; none kept */
    PLB_HTTP_LINES,      /* each complete '\n'-terminated line (without the
                            '\n') to on_data; a line over max_body is an error */
};

/* Error classes of a failed request (plb_http_resp_error). */
enum plb_http_error {
    PLB_HTTP_OK = 0,
    PLB_HTTP_E_CONNECT,   /* DNS, refused, unreachable */
    PLB_HTTP_E_TIMEOUT,   /* connect or total timeout */
    PLB_HTTP_E_TLS,       /* handshake, verification, credentials */
    PLB_HTTP_E_PROTOCOL,  /* malformed response */
    PLB_HTTP_E_TOO_LARGE, /* body or line over max_body */
    PLB_HTTP_E_CANCELLED, /* plb_host.http_cancel (done is not called) */
    PLB_HTTP_E_LOCAL,     /* bad request options, out of memory, a file that
                             could not be read (token, certificate) */
    PLB_HTTP_E_ABORTED,   /* on_data asked to stop */
    PLB_HTTP_E_FENCED,    /* 2.4: a write of a gated instance stopped, not
                             sent, because its gate closed (see "Fencing") */
};

/* 2.4: what a write of a gated instance gets while its gate is closed
 * (*err of http_request and of the kube_* writes; see "Fencing"). */
#define PLB_EFENCED (-EPERM)

/* Called with each chunk or line; borrowed data. Return 0 to go on, non-zero
 * to abort the request (done then reports PLB_HTTP_E_ABORTED). */
typedef int (*plb_http_data_cb)(plb_http_req *req, const char *data, size_t len, void *arg);
/* Called once when the request ends, unless it was cancelled. resp is
 * borrowed for the duration of the call; the request handle is freed by the
 * daemon right after. */
typedef void (*plb_http_done_cb)(plb_http_req *req, const plb_http_resp *resp, void *arg);

struct plb_http_opts {
    size_t size;                /* sizeof(struct plb_http_opts) */
    const char *method;         /* "GET" when NULL */
    const char *url;            /* required: http:// or https:// */
    const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
    const void *body;           /* copied; may be NULL */
    size_t body_len;
    const char *ca_file;   /* verify the server against this bundle
                              (system store when NULL) */
    const char *ca_pem;    /* or against this PEM text (copied) */
    const char *cert_file; /* client certificate (PEM), read per request */
    const char *key_file;  /* client key (PEM), read per request */
    const char *cert_pem;  /* or inline PEM text (copied) */
    const char *key_pem;
    const char *bearer_token_file; /* "Authorization: Bearer <contents>", the
                                      file read on every request */
    const char *bearer_token;      /* or a token given inline (copied) */
    const char *tls_server_name;   /* verify the certificate against this name
                                      instead of the URL's host */
    const char *connect_to;        /* "host:port": connect there instead of the
                                      URL's host and port (SNI and verification
                                      still use the URL's host) */
    int insecure_skip_verify;      /* never a default; for explicit opt-in only */
    uint32_t connect_timeout_ms;   /* 0: 10 s */
    uint32_t timeout_ms;           /* total, 0: none (streams) */
    enum plb_http_body_mode body_mode;
    size_t max_body;          /* BUFFER: body limit; LINES: line limit;
                                 0: 16 MiB */
    plb_http_data_cb on_data; /* CHUNKS and LINES */
    plb_http_done_cb done;    /* required */
    void *arg;
    /* 2.7: 1 = open a new connection for this request (its own TCP and TLS
     * handshake, never one kept from an earlier request nor a multiplexed
     * HTTP/2 stream) and close it after the answer. For a request that
     * checks the server itself, whatever its protocol: a readiness probe
     * that must see the serving certificate as new clients see it. Costs
     * a handshake each time: leave 0 for API calls and watches. */
    int fresh_connection;
};

/* ------------------------------------------------------------------------ */
/* Metrics.                                                                  */

enum plb_metric_type {
    PLB_METRIC_COUNTER = 1,
    PLB_METRIC_GAUGE,
    PLB_METRIC_HISTOGRAM,
};

/* ------------------------------------------------------------------------ */
/* Endpoint links.                                                           */

/* An endpoint: "host:port", with IPv6 hosts in brackets. */
struct plb_endpoint_set {
    size_t size; /* sizeof(struct plb_endpoint_set) as the daemon was built */
    size_t n;
    const char *const *v; /* borrowed for the duration of the callback */
};
/* The merged, de-duplicated, sorted union of every linked source's latest
 * set. Never empty once it was non-empty. */
typedef void (*plb_endpoints_cb)(const struct plb_endpoint_set *set, void *arg);

/* ------------------------------------------------------------------------ */
/* Health checks, read by mod_metrics.                                       */

enum plb_health_kind {
    PLB_HEALTH_LIVE = 1,  /* liveness: fails when its heartbeat goes stale */
    PLB_HEALTH_READY = 2, /* readiness: fails while set not ready */
};

struct plb_health_info {
    size_t size;          /* sizeof(struct plb_health_info), the daemon's */
    const char *instance; /* borrowed */
    const char *check;    /* borrowed */
    enum plb_health_kind kind;
    int ok;               /* READY: last state */
    int64_t last_beat_ms; /* LIVE: monotonic time of the last heartbeat */
    const char *reason;   /* borrowed; why not ready, or NULL */
};
typedef void (*plb_health_iter_cb)(const struct plb_health_info *info, void *arg);

/* ------------------------------------------------------------------------ */
/* Kubernetes.                                                               */

/*
 * JSON values. Kubernetes objects cross the ABI as plb_obj handles with
 * accessors below (struct plb_host, "Kubernetes"); their layout is the
 * daemon's. A handle is reference counted: obj_ref/obj_unref. Objects an
 * informer or a completion hands over are borrowed and must not be
 * modified; obj_copy gives a private, modifiable copy.
 */
enum plb_obj_type {
    PLB_OBJ_NULL = 0,
    PLB_OBJ_OBJECT,
    PLB_OBJ_ARRAY,
    PLB_OBJ_STRING,
    PLB_OBJ_INT,
    PLB_OBJ_REAL,
    PLB_OBJ_BOOL,
};

/* Where the API server is and who we are. Every string is borrowed for the
 * call (copied). */
struct plb_kube_opts {
    size_t size;                 /* sizeof(struct plb_kube_opts) */
    const char *kubeconfig;      /* a kubeconfig file (YAML or JSON). NULL:
                                    in-cluster when KUBERNETES_SERVICE_HOST
                                    is set, else $KUBECONFIG (first file),
                                    else ~/.kube/config */
    const char *context;         /* kubeconfig context; NULL: current-context */
    int in_cluster;              /* 1: the service account, never a kubeconfig */
    const char *sa_dir;          /* service account directory (token re-read
                                    on every request, ca.crt, namespace);
                                    NULL: /var/run/secrets/kubernetes.io/
                                    serviceaccount */
    const char *server;          /* override the server URL ("https://
                                    127.0.0.1:7445"; a path prefix such as
                                    "/clusters/root:org:ws" is kept) */
    const char *tls_server_name; /* verify the server certificate as this
                                    name ("kubernetes.default.svc") */
    const char *user_agent;      /* NULL: "prismlb/<version>" */
    uint32_t timeout_ms;         /* each request except watches; 0: 30 s */
    int insecure_skip_verify;    /* explicit opt-in only; a kubeconfig's
                                    insecure-skip-tls-verify: true also sets it */
};

/* An API resource, and optionally one object of it or its subresource.
 * Strings are borrowed for the call (copied). */
struct plb_kube_ref {
    size_t size;             /* sizeof(struct plb_kube_ref) */
    const char *api_version; /* "v1", "discovery.k8s.io/v1" */
    const char *resource;    /* plural: "services", "endpointslices" */
    const char *ns;          /* namespace; NULL or "" for cluster-scoped
                                kinds, and for informers: all namespaces */
    const char *name;        /* object name; NULL for the collection */
    const char *subresource; /* "status" or NULL */
};

/* The outcome of an API call, borrowed for the duration of the done call.
 * A response with a non-2xx status is not an error of the call: look at
 * status (409 Conflict after a stale resourceVersion, 404, ...). */
struct plb_kube_result {
    size_t size;
    int status;                /* HTTP status; 0 when no response arrived */
    enum plb_http_error error; /* PLB_HTTP_OK when a response arrived;
                                  PLB_HTTP_E_ABORTED when a modify callback
                                  declined (see kube_modify) */
    const char *reason;        /* Status reason ("Conflict", "NotFound",
                                  "AlreadyExists"), or "" */
    const char *message;       /* Status message or the transport error, or "" */
    const plb_obj *obj;        /* 2xx: the object returned; else the Status;
                                  NULL when the body was not JSON.
                                  obj_ref it to keep it */
    int in_flight_at_close;    /* 2.4: the call's last request was a write
                                  already sent when the instance's gate
                                  closed (see "Fencing"); check size */
};
/* op is freed by the daemon right after the call. */
typedef void (*plb_kube_done_cb)(plb_kube_op *op, const struct plb_kube_result *r, void *arg);

/* Read-modify-write: obj is the object just read (new to the operation,
 * modifiable with obj_set; freed by the daemon). Return 0 to write it back
 * (PUT carrying its resourceVersion; a 409 Conflict reads and calls again),
 * 1 to finish without writing (done gets the object read, status 200), or
 * a negative number to give up (done gets PLB_HTTP_E_ABORTED). */
typedef int (*plb_kube_mutate_cb)(plb_obj *obj, void *arg);

enum plb_kube_patch_type {
    PLB_KUBE_MERGE_PATCH = 0, /* application/merge-patch+json (RFC 7386) */
    PLB_KUBE_STRATEGIC_PATCH, /* application/strategic-merge-patch+json */
    PLB_KUBE_JSON_PATCH,      /* application/json-patch+json (RFC 6902) */
};

/* A core/v1 Event about an object. The same component, host, object, type,
 * reason and message seen again bump count and lastTimestamp of the Event
 * created first (a PATCH), as client-go's recorder does. Unlike client-go,
 * whose cache of Events lives in memory, the first Event of its kind since
 * the daemon started is looked up on the server (a bounded list of the
 * object's Events of that reason, type and source), so the same warning
 * after a restart counts on in the Event a previous run created; a lookup
 * that fails creates the Event. */
struct plb_kube_event {
    size_t size;
    const plb_obj *involved; /* borrowed for the call: its metadata name,
                                namespace, uid and resourceVersion */
    const char *kind;        /* involvedObject kind when the object has none
                                (list and watch items carry none): "Service" */
    const char *api_version; /* likewise: "v1" */
    const char *type;        /* "Normal" (NULL) or "Warning" */
    const char *reason;      /* UpperCamelCase: "EnsuringLoadBalancer" */
    const char *message;
    const char *component; /* source.component; NULL: "prismlb" */
    const char *host;      /* source.host (the node), or NULL */
};

/* Informer notifications. Objects are borrowed for the call. */
enum plb_informer_event {
    PLB_INFORMER_LIST_FAILED = 1, /* a list or re-list failed (an error) */
    PLB_INFORMER_WATCH_FAILED,    /* the watch call failed (an error) */
    PLB_INFORMER_WATCH_ERROR,     /* an ERROR event other than 410 (an error) */
    PLB_INFORMER_WATCH_ENDED,     /* the stream ended, cleanly or dropped (not
                                     an error) */
    PLB_INFORMER_EXPIRED,         /* 410 Gone or Expired: re-listing (not an
                                     error) */
};
struct plb_informer_status {
    size_t size;
    enum plb_informer_event event;
    int is_error;        /* 1 for the events a discovery error metric counts */
    int http_status;     /* 0 when none */
    const char *message; /* borrowed */
    int64_t retry_in_ms; /* delay before the next list or watch */
};

struct plb_informer_opts {
    size_t size;                    /* sizeof(struct plb_informer_opts) */
    const struct plb_kube_ref *ref; /* api_version, resource, ns (NULL: all);
                                  borrowed for the call (copied) */
    const char *label_selector;     /* "kubernetes.io/service-name=kubernetes" */
    const char *field_selector;     /* "metadata.name=x" */
    uint32_t page_size;             /* list chunk (limit); 0: 500 */
    uint32_t watch_timeout_s;       /* timeoutSeconds of each watch; 0: random
                                       in [300, 600) */
    /* Changes after the cache was updated; old is the state before. */
    void (*on_add)(plb_informer *inf, const plb_obj *obj, void *arg);
    void (*on_update)(plb_informer *inf, const plb_obj *old, const plb_obj *obj, void *arg);
    void (*on_delete)(plb_informer *inf, const plb_obj *old, void *arg);
    /* The first complete list was delivered (once). */
    void (*on_synced)(plb_informer *inf, void *arg);
    /* Errors and reconnects, for metrics and health. May be NULL. */
    void (*on_status)(plb_informer *inf, const struct plb_informer_status *st, void *arg);
    void *arg;
    /* 2.6: the fields the cache keeps of each object, NULL-terminated
     * (borrowed for the call, copied); NULL keeps objects whole. A path
     * names members from the object's root as a JSON Pointer does
     * (RFC 6901: "/" before each name, "~1" for a "/" within a name, "~0"
     * for "~"): "/spec/ports", "/metadata/labels/kubernetes.io~1service-name".
     * A member is kept whole where its path ends; an array on the way
     * applies the rest of the path to each of its items ("/endpoints/
     * nodeName" keeps the nodeName of every endpoint, each item an object
     * of what it kept); a value on the way that is neither object nor
     * array is kept as it is. Always kept, named or not: metadata.name,
     * metadata.namespace, metadata.uid and metadata.resourceVersion (kind
     * and apiVersion only when named; list items lack them anyway). A bad path (empty, not starting
     * with "/", a "~" not followed by 0 or 1) makes informer_new fail with -EINVAL.
     *
     * What a module sees: the cache holds the kept fields only, and so
     * do the objects of on_add, on_update, on_delete, informer_get and
     * informer_foreach (a field not kept reads as absent). Objects are
     * trimmed, never filtered: every object of the resource (within the
     * selectors) is cached and reported, so a module still sees an object
     * whose kept fields say it is none of its business any more (a
     * Service that stopped being a LoadBalancer while the daemon was down
     * arrives in the first list, as on_add of its trimmed form). An update
     * (a watch event or a re-list's difference) whose kept fields equal
     * the cached ones but for metadata.resourceVersion (and kind and
     * apiVersion, which a watch event has and a list item not) updates
     * the cache and is not reported: a Node's status heartbeat reaches no
     * on_update of an informer that does not keep the heartbeat's
     * timestamps. Adds and deletes are always reported. Equal kept values
     * of different objects (the ports of most Services, the conditions of
     * most endpoints) may be one value, held once: a borrowed object is
     * never modified anyway, and obj_copy gives a private one. */
    const char *const *keep;
};

/* ------------------------------------------------------------------------ */
/* Service load balancers.                                                   */

enum plb_lb_policy {
    PLB_LB_POLICY_TRAFFIC = 0, /* by spec.externalTrafficPolicy */
    PLB_LB_POLICY_SELECTOR,    /* by a node selector */
};

struct plb_lb_target {
    const char *node; /* borrowed from the node informer's cache */
    const char *ip;   /* its InternalIP, borrowed likewise */
};

/* Set size before lb_select_targets; the daemon fills the rest. */
struct plb_lb_targets {
    size_t size; /* sizeof(struct plb_lb_targets), the module's */
    size_t n;
    void *v;            /* n targets, target_size bytes apart; owned by
                           the daemon: lb_targets_clear */
    size_t target_size; /* sizeof(struct plb_lb_target), the daemon's */
    size_t dropped;     /* selected nodes cut by max_targets */
    size_t no_address;  /* selected nodes without an InternalIP */
};
/* Target i of t (a const struct plb_lb_target *). */
#define PLB_LB_TARGET(t, i)                                                                        \
    ((const struct plb_lb_target *)(const void *)((const char *)(t)->v + (i) * (t)->target_size))

/* ------------------------------------------------------------------------ */
/* The host table: every core service a module may use.                     */

struct plb_host {
    size_t size; /* sizeof(struct plb_host) as the daemon was built */
    uint32_t abi_major, abi_minor;

    /* --- identity and logging --- */

    /* The instance's name and module name; borrowed for the instance's life. */
    const char *(*instance_name)(plb_ctx *ctx); /* [any] */
    const char *(*module_name)(plb_ctx *ctx);   /* [any] */
    /* Log a record tagged with the instance (and its module). Put the values
     * a reader filters on in fields, not in the message: log_fields and the
     * PLB_ERR/PLB_WARN/PLB_INFO/PLB_DEBUG helpers below take a
     * NULL-terminated array of key, value strings (PLB_KV) beside a
     * printf-style message. Values of keys that look secret (token,
     * password, authorization, secret, key material) are redacted. A record
     * below the daemon's log_level or the instance's own (log_set_level) is
     * dropped. [any]: logv, log_kv, log_enabled, logf, log_fields (one
     * record is written whole). */
    void (*logv)(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, va_list ap)
        PLB_PRINTF(3, 0);
    /* msg is literal (not a format); key, value string pairs follow, ending
     * with NULL. */
    void (*log_kv)(plb_ctx *ctx, enum plb_log_level lvl, const char *msg, ...) PLB_SENTINEL_MEMBER;
    int (*log_enabled)(plb_ctx *ctx, enum plb_log_level lvl);

    /* --- time and timers --- */

    /* Monotonic milliseconds, and wall-clock milliseconds since the epoch. */
    int64_t (*now_ms)(plb_ctx *ctx);  /* [any] */
    int64_t (*wall_ms)(plb_ctx *ctx); /* [any] */
    /* New timer (free with timer_free); NULL on allocation failure. */
    plb_timer *(*timer_new)(plb_ctx *ctx, plb_timer_cb cb, void *arg);
    /* Arm: first fire after delay_ms, then every period_ms if period_ms > 0.
     * jitter in [0, 1]: each delay is lengthened by up to jitter × delay at
     * random. Re-arming an armed timer replaces its schedule. 0 or -errno. */
    /* [own]: timer_arm, timer_cancel, timer_pending, timer_free. */
    int (*timer_arm)(plb_timer *t, int64_t delay_ms, int64_t period_ms, double jitter);
    void (*timer_cancel)(plb_timer *t);
    int (*timer_pending)(const plb_timer *t);
    void (*timer_free)(plb_timer *t); /* NULL is fine; cancels first */

    /* --- file descriptors --- */

    /* Watch fd for PLB_IO_READ/WRITE, optionally with PLB_IO_EDGE and
     * PLB_IO_CLOSED (1.1), persistent until io_del. The fd stays the
     * module's. New; free with io_free. */
    plb_io *(*io_new)(plb_ctx *ctx, int fd, int what, plb_io_cb cb, void *arg);
    /* Start watching; timeout_ms > 0 adds PLB_IO_TIMEOUT after that long
     * without activity. On a watch already added it replaces the timeout
     * (0: none) and nothing else (daemons before 1.1 re-add the watch).
     * 0 or -errno. */
    /* [own]: io_add, io_del, io_free. */
    int (*io_add)(plb_io *io, int64_t timeout_ms);
    void (*io_del)(plb_io *io);
    void (*io_free)(plb_io *io); /* NULL is fine */

    /* --- TCP listeners --- */

    /* Listen on addr:port (addr an IP literal; port 0 picks one). New; free
     * with listener_free. NULL on failure with *err set to -errno. */
    plb_listener *(*listen_tcp)(plb_ctx *ctx, const char *addr, int port, int backlog,
                                plb_accept_cb cb, void *arg, int *err);
    /* [own]: listener_port, listener_pause, listener_free. */
    int (*listener_port)(const plb_listener *l); /* the bound port */
    void (*listener_pause)(plb_listener *l, int paused);
    void (*listener_free)(plb_listener *l);

    /* --- HTTP servers --- */

    /* An HTTP/1.1 server on addr:port. New; free with http_server_free. */
    plb_http_server *(*http_server_new)(plb_ctx *ctx, const char *addr, int port, int *err);
    int (*http_server_port)(const plb_http_server *s);
    /* Route an exact path ("/metrics") or, ending in '/', a prefix. Every
     * method reaches the handler. 0 or -errno. */
    int (*http_route)(plb_http_server *s, const char *path, plb_http_handler h, void *arg);
    void (*http_server_free)(plb_http_server *s);
    /* Request accessors; borrowed until the reply. */
    const char *(*http_method)(plb_http_exchange *x);
    const char *(*http_path)(plb_http_exchange *x);  /* without the query */
    const char *(*http_query)(plb_http_exchange *x); /* "" when none */
    const char *(*http_header)(plb_http_exchange *x, const char *name);
    /* Reply (exactly once): status, content type (NULL for none), body
     * (copied), NULL-terminated "Name: value" extra headers. Frees x. */
    void (*http_reply)(plb_http_exchange *x, int status, const char *content_type, const void *body,
                       size_t len, const char *const *headers);

    /* --- HTTP client --- */

    /* Start a request. New handle, valid until done runs or http_cancel is
     * called; NULL with *err = -errno (bad options, no memory). */
    plb_http_req *(*http_request)(plb_ctx *ctx, const struct plb_http_opts *o, int *err);
    /* Cancel a running request; its done callback is not called. */
    void (*http_cancel)(plb_http_req *req);
    int (*http_resp_status)(const plb_http_resp *r); /* 0 if none */
    enum plb_http_error (*http_resp_error)(const plb_http_resp *r);
    const char *(*http_resp_error_text)(const plb_http_resp *r);        /* borrowed */
    const char *(*http_resp_body)(const plb_http_resp *r, size_t *len); /* borrowed */
    /* Last value of a response header (case-insensitive) or NULL; borrowed. */
    const char *(*http_resp_header)(const plb_http_resp *r, const char *name);
    /* Seconds spent in connect (TCP + TLS) and in total. */
    double (*http_resp_connect_time)(const plb_http_resp *r);
    double (*http_resp_total_time)(const plb_http_resp *r);

    /* --- metrics --- */

    /* Register (or find, when the same name, type and labels exist) a metric
     * family for this instance. Every series written through the handle
     * carries the label module_instance="<instance name>" before the
     * module's own: two instances of one module registering one family get
     * a handle each and distinct series, and metric_remove(m, NULL) removes
     * only this instance's. label_names: NULL-terminated, borrowed, at most
     * 15, not "module_instance". buckets: histogram upper bounds ascending
     * (nbuckets > 0), else NULL. The handle and family live as long as the
     * daemon; series are the caller's to remove. NULL on failure (logged). */
    plb_metric *(*metric_new)(plb_ctx *ctx, enum plb_metric_type type, const char *name,
                              const char *help, const char *const *label_names,
                              const double *buckets, size_t nbuckets);
    /* label_values: as many as label_names, borrowed. 0 or -errno. */
    int (*metric_add)(plb_metric *m, const char *const *label_values, double v);
    int (*metric_set)(plb_metric *m, const char *const *label_values, double v);
    int (*metric_observe)(plb_metric *m, const char *const *label_values, double v);
    /* Remove one series (label_values) or, with NULL, every series. */
    void (*metric_remove)(plb_metric *m, const char *const *label_values);
    /* Render every family in Prometheus text format 0.0.4. New buffer, free
     * with host->free. */
    char *(*metrics_render)(plb_ctx *ctx, size_t *len);

    /* --- endpoint links --- */

    /* Publish this instance's latest endpoint set under a provider name
     * ("static", "kubernetes"); endpoints are copied. Sinks linked to this
     * instance receive the merged union. 0 or -errno. */
    int (*endpoints_publish)(plb_ctx *ctx, const char *provider, const char *const *endpoints,
                             size_t n);
    /* Mark a provider failed or recovered; a source whose providers have all
     * failed is unhealthy (it keeps its last set). */
    void (*endpoints_failed)(plb_ctx *ctx, const char *provider, int failed);
    /* Subscribe to the merged set of the named source instances (as given in
     * a PLB_SET_INSTANCES setting). cb runs now if a set exists, and on every
     * change. 0 or -errno. */
    int (*endpoints_subscribe)(plb_ctx *ctx, const struct plb_strv *sources, plb_endpoints_cb cb,
                               void *arg);

    /* --- gates --- */

    /* For a gate instance: open or close. Closing calls gate_close on every
     * gated instance; done (may be NULL) runs once all of them completed.
     * 0 or -errno. */
    int (*gate_set)(plb_ctx *ctx, int open, void (*done)(void *arg), void *arg);
    /* For a gated instance: is its gate open now (1 when it has no gate). */
    int (*gate_is_open)(plb_ctx *ctx);

    /* --- health --- */

    /* Register a named check of this instance (liveness or readiness). */
    int (*health_register)(plb_ctx *ctx, const char *check, enum plb_health_kind kind);
    /* Liveness: record a heartbeat now. */
    void (*health_beat)(plb_ctx *ctx, const char *check);
    /* Readiness: set state and reason (copied; NULL when ready). */
    void (*health_set)(plb_ctx *ctx, const char *check, int ok, const char *reason);
    /* Visit every registered check of every instance. */
    void (*health_foreach)(plb_ctx *ctx, plb_health_iter_cb cb, void *arg);

    /* --- asynchronous completion --- */

    /* Signal that an asynchronous stop or gate_close finished. Call exactly
     * once per plb_done received. */
    void (*done)(plb_done *d);

    /* --- memory and process --- */

    /* The allocator every module should use, so tests can fail allocations. */
    /* [any]: alloc, realloc, free, strdup. */
    void *(*alloc)(size_t n); /* zeroed */
    void *(*realloc)(void *p, size_t n);
    void (*free)(void *p);
    char *(*strdup)(const char *s);

    /* NULL if value has the format, else why not (a static or thread-local
     * message, valid until the next call). */
    const char *(*check_format)(enum plb_setting_format format, const char *value);

    /* Version strings of the daemon: "0.1.0", git revision. Borrowed. */
    const char *(*version)(void);  /* [any] */
    const char *(*revision)(void); /* [any] */

    /* --- Kubernetes ---
     *
     * A client is a configuration (kubeconfig or in-cluster) bound to the
     * daemon's loop; calls are asynchronous and complete through a
     * callback; informers list and watch one resource into a cache. See
     * the types in the "Kubernetes" section above. */

    /* New client (free with kube_free). Reads the kubeconfig or service
     * account files now (call from create or start). NULL on error with a
     * message in err (errlen bytes; err may be NULL). */
    plb_kube *(*kube_new)(plb_ctx *ctx, const struct plb_kube_opts *o, char *err, size_t errlen);
    /* Cancel every call in flight (their done callbacks are not called),
     * free the client's informers and the client. NULL is fine. May be
     * called from a done callback of the client's own calls or from an
     * informer's callback. */
    void (*kube_free)(plb_kube *k);
    /* The server URL in use, and the default namespace (the context's or
     * the service account's, else "default"). Borrowed for k's life. */
    const char *(*kube_server)(const plb_kube *k);
    const char *(*kube_namespace)(const plb_kube *k);

    /* API calls. Each returns a new handle, valid until done runs or
     * kube_cancel; NULL with *err = -EINVAL (bad ref or body) or -ENOMEM.
     * done always runs from the loop, never inside the call. Bodies are
     * JSON text, copied. */
    plb_kube_op *(*kube_get)(plb_kube *k, const struct plb_kube_ref *ref, plb_kube_done_cb done,
                             void *arg, int *err);
    /* POST to ref's collection (ref->name unused). */
    plb_kube_op *(*kube_create)(plb_kube *k, const struct plb_kube_ref *ref, const char *body,
                                plb_kube_done_cb done, void *arg, int *err);
    /* PUT ref; the body's metadata.resourceVersion makes it conditional:
     * a stale one gets status 409 (the caller decides). */
    plb_kube_op *(*kube_update)(plb_kube *k, const struct plb_kube_ref *ref, const char *body,
                                plb_kube_done_cb done, void *arg, int *err);
    /* PATCH ref (ref->subresource "status" patches the status). */
    plb_kube_op *(*kube_patch)(plb_kube *k, const struct plb_kube_ref *ref,
                               enum plb_kube_patch_type type, const char *patch,
                               plb_kube_done_cb done, void *arg, int *err);
    /* DELETE ref with preconditions uid and resourceVersion (each NULL for
     * none): a mismatch gets 409. */
    plb_kube_op *(*kube_delete)(plb_kube *k, const struct plb_kube_ref *ref, const char *uid,
                                const char *resource_version, plb_kube_done_cb done, void *arg,
                                int *err);
    /* Read-modify-write ref with mutate (see plb_kube_mutate_cb), retrying
     * after 409 Conflict up to attempts times in all (0: 5). */
    plb_kube_op *(*kube_modify)(plb_kube *k, const struct plb_kube_ref *ref,
                                plb_kube_mutate_cb mutate, int attempts, plb_kube_done_cb done,
                                void *arg, int *err);
    /* Record an Event (aggregated; see struct plb_kube_event). Events are
     * written one at a time in order; done may be NULL. With done NULL the
     * returned handle is only a success token: the call completes on its
     * own and its handle may be gone by then, so never pass it to
     * kube_cancel (kube_free still cancels it). */
    plb_kube_op *(*kube_event)(plb_kube *k, const struct plb_kube_event *ev, plb_kube_done_cb done,
                               void *arg, int *err);
    /* Cancel a call; its done callback is not called. No-op from inside
     * that callback. */
    void (*kube_cancel)(plb_kube_op *op);

    /* New informer, started at once: list in chunks, then watch from the
     * list's resourceVersion with bookmarks, reconnecting with the backoff
     * of the spec; a 410 re-lists and reports only differences. Cached
     * objects are held once and lack metadata.managedFields (list items
     * also lack kind and apiVersion, as the API sends them). Free with
     * informer_free (or kube_free). NULL with *err = -EINVAL or -ENOMEM. */
    plb_informer *(*informer_new)(plb_kube *k, const struct plb_informer_opts *o, int *err);
    /* Stop and free; no callback runs afterwards. Safe from inside the
     * informer's own callbacks. NULL is fine. */
    void (*informer_free)(plb_informer *inf);
    /* 1 once the first complete list was delivered. */
    int (*informer_synced)(const plb_informer *inf);
    size_t (*informer_count)(const plb_informer *inf);
    /* The cached object ns/name (ns NULL or "" for cluster-scoped), or
     * NULL. Borrowed until control returns to the loop. */
    const plb_obj *(*informer_get)(const plb_informer *inf, const char *ns, const char *name);
    /* Visit every cached object (borrowed for the call). The cache must not
     * change meanwhile: do not free the informer from cb. */
    void (*informer_foreach)(const plb_informer *inf, void (*cb)(const plb_obj *obj, void *arg),
                             void *arg);

    /* JSON values (see enum plb_obj_type). Accessors accept NULL and then
     * return NULL, 0 or the default. */
    /* Follow object keys (NULL-terminated): borrowed child or NULL. */
    const plb_obj *(*obj_get)(const plb_obj *o, ...)PLB_SENTINEL_MEMBER;
    enum plb_obj_type (*obj_type)(const plb_obj *o);
    const char *(*obj_str)(const plb_obj *o); /* borrowed, or NULL */
    /* An integer, or a real truncated toward zero (3.5 is 3); def for a
     * real outside int64_t's range (1e300) and for anything else. */
    int64_t (*obj_int)(const plb_obj *o, int64_t def);
    int (*obj_bool)(const plb_obj *o, int def);
    size_t (*obj_len)(const plb_obj *o);                  /* array items or members */
    const plb_obj *(*obj_at)(const plb_obj *o, size_t i); /* borrowed item */
    /* Iterate an object's members: *it NULL to start; returns the key
     * (borrowed) and sets *value (borrowed), NULL at the end. */
    const char *(*obj_iter)(const plb_obj *o, void **it, const plb_obj **value);
    /* Compact JSON text, new (free with host->free). */
    char *(*obj_dump)(const plb_obj *o);
    /* New value from JSON text, or NULL. */
    plb_obj *(*obj_parse)(const char *text, size_t len);
    plb_obj *(*obj_ref)(const plb_obj *o);  /* new reference */
    void (*obj_unref)(plb_obj *o);          /* NULL is fine */
    plb_obj *(*obj_copy)(const plb_obj *o); /* new deep copy */
    /* Set value (steals, even on failure) at the key path (NULL-terminated), creating
     * intermediate objects, in o (which must be modifiable: a copy, a
     * parse, or the object of a modify callback). 0 or -EINVAL/-ENOMEM. */
    int (*obj_set)(plb_obj *o, plb_obj *value, ...) PLB_SENTINEL_MEMBER;
    /* Remove the member at the key path. 0, or -ENOENT. */
    int (*obj_del)(plb_obj *o, ...) PLB_SENTINEL_MEMBER;
    /* New string and integer values. */
    plb_obj *(*obj_new_str)(const char *s);
    plb_obj *(*obj_new_int)(int64_t v);

    /* --- Service load balancers (for any cloud's balancer module) --- */

    /* Which nodes a Service of type LoadBalancer targets. policy
     * PLB_LB_POLICY_TRAFFIC follows spec.externalTrafficPolicy: Cluster
     * (the default) takes every node but cordoned and not-ready ones;
     * Local takes the nodes kube-proxy serves from, read from the
     * Service's EndpointSlices in `slices` (a node with a ready endpoint,
     * or with a serving terminating one while it has no ready one).
     * PLB_LB_POLICY_SELECTOR takes the nodes matching node_selector
     * ("k=v,k!=v,!k,k"; NULL or "" for all). Under every policy, nodes
     * labelled node.kubernetes.io/exclude-from-external-load-balancers stay
     * out. Targets are the nodes' InternalIP (IPv4 first), sorted by node
     * name and cut to max_targets (0: no cap) with out->dropped counting the
     * rest. svc is borrowed; nodes and slices are informers (slices may be
     * NULL under Cluster and SELECTOR). Strings in *out are borrowed from
     * the informer caches, valid until control returns to the event loop;
     * free the array with lb_targets_clear. 0, -EINVAL with a message in
     * err (a bad node selector), or -ENOMEM. */
    int (*lb_select_targets)(plb_ctx *ctx, const plb_obj *svc, enum plb_lb_policy policy,
                             const char *node_selector, plb_informer *nodes, plb_informer *slices,
                             size_t max_targets, struct plb_lb_targets *out, char *err,
                             size_t errlen);
    void (*lb_targets_clear)(struct plb_lb_targets *t);
    /* Check a node selector's syntax: 0, or -EINVAL with a message. */
    int (*lb_selector_check)(const char *node_selector, char *err, size_t errlen);
    /* Write a Service's status.loadBalancer.ingress: one entry per IP
     * (borrowed strings), each with ipMode ("VIP" or "Proxy"; NULL leaves
     * it out), as a merge patch of the status subresource. n == 0 clears
     * the ingress. The write is unconditional (no resourceVersion: the
     * patch replaces the ingress whole) and always sent, also when the
     * ingress already is what it writes: compare with svc's
     * status.loadBalancer.ingress first to save the call. Same completion
     * rules as kube_patch. */
    plb_kube_op *(*lb_status_write)(plb_kube *k, const plb_obj *svc, const char *const *ips,
                                    size_t n, const char *ip_mode, plb_kube_done_cb done, void *arg,
                                    int *err);

    /* --- since 1.1 --- */

    /* The listening socket of l, borrowed: set options on it that accepted
     * sockets inherit (on Linux SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL,
     * TCP_KEEPCNT, TCP_USER_TIMEOUT and TCP_NODELAY are copied to each
     * accepted socket), saving system calls per connection. Do not close
     * it, read from it or clear O_NONBLOCK. */
    int (*listener_fd)(const plb_listener *l); /* [own] */
    /* Call io's callback with what (PLB_IO_READ and/or PLB_IO_WRITE) on the
     * next loop iteration, as if the fd had become ready: how an
     * edge-triggered watch resumes work it set aside for fairness. */
    void (*io_activate)(plb_io *io, int what); /* [own] */

    /* --- since 2.0 --- */

    /* Log a printf-style message (see logv). [any] */
    void (*logf)(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, ...) PLB_PRINTF(3, 4);
    /* Log a printf-style message with fields: kv is a NULL-terminated array
     * of key, value strings (borrowed for the call; a NULL value is written
     * empty), or NULL for none. */
    void (*log_fields)(plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv, const char *fmt,
                       va_list ap) PLB_PRINTF(4, 0);
    /* The instance's own threshold, below the daemon's: records of a level
     * above lvl are dropped; -1 drops every record. The daemon's log_level
     * still caps it. */
    void (*log_set_level)(plb_ctx *ctx, int lvl);

    /* JSON builders: new values (free with obj_unref, or hand them to
     * obj_set / obj_append, which steal them). NULL on allocation failure.
     * obj_new_bool takes any nonzero v for true; obj_new_real gives NULL
     * for a NaN or an infinity, which JSON cannot hold. [any] for a value
     * one thread owns. */
    plb_obj *(*obj_new_object)(void);
    plb_obj *(*obj_new_array)(void);
    plb_obj *(*obj_new_bool)(int v);
    plb_obj *(*obj_new_null)(void);
    plb_obj *(*obj_new_real)(double v);
    /* Append value (steals, even on failure) to the modifiable array a.
     * 0 or -EINVAL (a is no array, value NULL) / -ENOMEM. */
    int (*obj_append)(plb_obj *a, plb_obj *value);
    /* Remove item i of the modifiable array a, moving later items down.
     * 0, or -ENOENT (a is no array, or i is out of range). */
    int (*obj_remove)(plb_obj *a, size_t i);

    /* --- 2.1: status --- */
    /* {"instances": [{"name", "module", "status"}]} of every running
     * instance whose module has a status hook, in config order, as compact
     * JSON text (new, free with host->free; *len its length), for the probe
     * server's /status. NULL when out of memory. Check PLB_HOST_HAS. */
    char *(*status_render)(plb_ctx *ctx, size_t *len);
    /* The value of the string (or path) setting `setting` of the first
     * instance, in config order, of module `module` in this daemon
     * (borrowed, valid while that instance's config lives: copy it, or use
     * it from create until destroy of an instance listed after it); NULL
     * when there is none or it is unset. Check PLB_HOST_HAS. */
    const char *(*instance_setting_str)(plb_ctx *ctx, const char *module, const char *setting);

    /* --- since 2.2: worker loops --- */

    /* The daemon's worker loops: `threads` of them, or 0 with threads = 1
     * (everything on the main loop). */
    size_t (*worker_count)(plb_ctx *ctx);
    /* Worker i, borrowed for the daemon's life; NULL out of range. */
    plb_worker *(*worker_at)(plb_ctx *ctx, size_t i);
    /* [any] The worker the calling thread runs, or NULL on the main loop. */
    plb_worker *(*worker_self)(void);
    /* [any] Its index, 0 to worker_count - 1. */
    size_t (*worker_index)(const plb_worker *w);
    /* [any] Run fn(arg) on worker `to`'s loop, or on the main loop when `to`
     * is NULL. fn owns arg from then on. Messages from one thread to one
     * loop run in the order posted. 0, or -ENOMEM, or -ESHUTDOWN (the loop
     * stopped): then fn does not run and arg stays the caller's. */
    int (*post)(plb_ctx *ctx, plb_worker *to, void (*fn)(void *arg), void *arg);
    /* A TCP socket bound to addr:port (an IP literal, as listen_tcp) and
     * listening when this returns, so connections queue in the kernel's
     * backlog from then on; with reuseport != 0 it has SO_REUSEPORT, so that
     * one such socket per worker shares addr:port and the kernel spreads new
     * connections among them (bind the first with port 0 for an ephemeral
     * port, read it with *bound_port, and bind the others to that). The
     * bound port goes to *bound_port (may be NULL). A new fd (non-blocking,
     * close-on-exec; the caller's until worker_listen_fd steals it), or
     * -errno: -EINVAL (bad address or port), -EADDRINUSE, -EACCES, ... */
    int (*listen_socket)(plb_ctx *ctx, const char *addr, int port, int backlog, int reuseport,
                         int *bound_port);
    /* [own: call on worker w] Timers, watches and listeners on w's loop, as
     * timer_new, io_new and listen_tcp. worker_listen_fd accepts on fd, a
     * socket from listen_socket (steals fd: closed on failure too); NULL on
     * failure with *err (may be NULL) set to -errno. */
    plb_timer *(*worker_timer_new)(plb_worker *w, plb_timer_cb cb, void *arg);
    plb_io *(*worker_io_new)(plb_worker *w, int fd, int what, plb_io_cb cb, void *arg);
    plb_listener *(*worker_listen_fd)(plb_worker *w, int fd, plb_accept_cb cb, void *arg, int *err);
    /* An empty snapshot slot. New, free with snapshot_free; NULL when out of
     * memory. */
    plb_snapshot *(*snapshot_new)(plb_ctx *ctx);
    /* Publish data (steals on success: read-only from now on). The data
     * published before is released by its release(data) on the main loop
     * once no worker can still read it (every worker passed through its
     * loop since); release may be NULL. 0; or -EINVAL, or -ENOMEM (2.5),
     * and then nothing changed: data stays the caller's, the workers keep
     * reading what was published before. */
    int (*snapshot_publish)(plb_snapshot *s, void *data, void (*release)(void *data));
    /* [any] The latest data, borrowed: valid until the calling worker
     * returns to its loop (on the main loop: until the next publish). */
    const void *(*snapshot_get)(const plb_snapshot *s);
    /* Free the slot; its data is released like retired data. NULL is
     * fine. */
    void (*snapshot_free)(plb_snapshot *s);
    /* Run cb(arg) on the main loop before every metrics render (add != 0),
     * or stop (add == 0): where per-worker counters are summed into the
     * series, so that no shared line is written on the hot path. 0 or
     * -errno. */
    int (*metrics_on_collect)(plb_ctx *ctx, void (*cb)(void *arg), void *arg, int add);

    /* --- since 2.3: metrics of the process --- */
    /* metric_new without the module_instance label, for a family that
     * describes the whole daemon (process_*, prismlb_build_info), not an
     * instance: every instance registering it gets the same handle and
     * writes the same series. Check PLB_HOST_HAS. */
    plb_metric *(*metric_new_shared)(plb_ctx *ctx, enum plb_metric_type type, const char *name,
                                     const char *help, const char *const *label_names,
                                     const double *buckets, size_t nbuckets);

    /* --- since 2.4: fencing --- */
    /* 1 when r answers a write of a gated instance that had been sent when
     * its gate closed (see "Fencing"): it may have taken effect. Check
     * PLB_HOST_HAS. */
    int (*http_resp_in_flight_at_close)(const plb_http_resp *r);
};

/* True when the daemon's host table has the named member: only needed for
 * members added after 2.0 (every 2.0 member is always there). */
#define PLB_HOST_HAS(host, member)                                                                 \
    ((host)->size >= offsetof(struct plb_host, member) + sizeof((host)->member))

/* ------------------------------------------------------------------------ */
/* The module descriptor.                                                    */

/* How a check hook reports one problem: the setting it concerns and a
 * printf-style message (the daemon adds FILE:LINE). Declare a module's own
 * check function with it so its report calls are format-checked:
 *   int example_check(const struct plb_host *host, plb_check *chk,
 *                     const void *config, plb_check_report *report); */
typedef void plb_check_report(plb_check *chk, const char *setting, const char *fmt, ...)
    PLB_PRINTF(3, 4);

struct plb_module {
    uint32_t abi_major; /* PLB_ABI_MAJOR */
    uint32_t abi_minor; /* PLB_ABI_MINOR */
    size_t size;        /* sizeof(struct plb_module) */

    const char *name;        /* "tcp_proxy": what `module = "..."` names */
    const char *version;     /* the module's own version */
    const char *description; /* one line */

    const struct plb_setting *settings; /* terminated by PLB_SETTINGS_END */
    size_t setting_size;                /* sizeof(struct plb_setting): the
                                           table's stride (required when
                                           settings is set) */
    size_t config_size;                 /* bytes of the config struct */
    uint32_t provides;                  /* PLB_ROLE_* bits */

    /* Check settings against each other after each was parsed and bounded.
     * Report each problem through `report`, naming the setting it concerns
     * (the daemon adds FILE:LINE); return the number of problems. May be
     * NULL. Runs for --check-config too: no side effects. */
    int (*check)(const struct plb_host *host, plb_check *chk, const void *config,
                 void (*report)(plb_check *chk, const char *setting, const char *fmt, ...)
                     PLB_PRINTF(3, 4));

    /* Create an instance. config is borrowed for the instance's life (freed
     * by the daemon after destroy). Store your state in *state. 0 or -errno;
     * on failure write why into err (errlen bytes, NUL-terminated; "" when
     * the errno says it all): the daemon logs it with the instance. Nothing
     * may start running yet: no timers armed, no sockets. */
    int (*create)(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state,
                  char *err, size_t errlen);
    /* Start running: listeners, watches, timers. 0 or -errno, with why in
     * err as for create (the daemon then stops what it started and exits
     * non-zero). Instances start in config order. */
    int (*start)(void *state, char *err, size_t errlen);
    /* Stop: close listeners, let drains finish within grace_ms, then call
     * host->done(d). May complete before returning. Instances stop in
     * reverse order. NULL means nothing to wait for. */
    void (*stop)(void *state, int64_t grace_ms, plb_done *d);
    /* Free everything. After stop completed (or if start never ran). */
    void (*destroy)(void *state);

    /* For gated instances: the gate opened; start the write loop. */
    void (*gate_open)(void *state);
    /* The gate closed: stop the write loop promptly, cancel in-flight writes,
     * then host->done(d). Watches and caches keep running. */
    void (*gate_close)(void *state, plb_done *d);

    /* 2.1: the instance's state for /status and `prismlb status`: a new
     * JSON object built with the obj_new_* functions (the daemon takes it),
     * with "kind" ("proxy", "reconciler", "leader" or the module's own
     * word) and the kind's fields. NULL when out of memory. Runs on the
     * loop between start and stop; must not block. May be NULL. */
    plb_obj *(*status)(void *state);
};

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
 * sizeof(**statep), with host->alloc: the module frees it with host->free)
 * and set its members host, ctx and cfg, which the module's state struct
 * names so, to the hook's host, ctx and config:
 *   struct example *ex;
 *   if (PLB_STATE_NEW(&ex, host, ctx, config) < 0)
 *       return -ENOMEM;
 * 0, or -ENOMEM with *statep NULL. Header-only: the daemon never sees
 * the state. */
#define PLB_STATE_NEW(statep, host_, ctx_, config_)                                                \
    ((*(statep) = (host_)->alloc(sizeof(**(statep))))                                              \
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
    c->rng = ((uint64_t)host->wall_ms(ctx) * 0x9E3779B97F4A7C15ULL) ^ salt;
    if (!c->rng)
        c->rng = 1;
}

/* host->now_ms and host->wall_ms of the clock's instance. */
static inline int64_t
plb_clock_now_ms(void *clock)
{
    const struct plb_clock *c = (const struct plb_clock *)clock;
    return c->host->now_ms(c->ctx);
}
static inline int64_t
plb_clock_wall_ms(void *clock)
{
    const struct plb_clock *c = (const struct plb_clock *)clock;
    return c->host->wall_ms(c->ctx);
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
    void (*on_add)(plb_informer *inf, const plb_obj *obj, void *arg);
    void (*on_update)(plb_informer *inf, const plb_obj *old, const plb_obj *obj, void *arg);
    void (*on_delete)(plb_informer *inf, const plb_obj *old, void *arg);
    void (*on_synced)(plb_informer *inf, void *arg);
    void (*on_status)(plb_informer *inf, const struct plb_informer_status *st, void *arg);
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
    return h->informer_new(k, &o, err);
}

/* ------------------------------------------------------------------------ */
/* Building JSON objects.                                                   */

/* Set o's member key to v (steals v, also on failure; a NULL v, such as a
 * failed obj_new_*, is a failure) and set *bad on failure, else leave it:
 * a row of calls building an object, checked once at the end. */
static inline void
plb_obj_put(const struct plb_host *host, plb_obj *o, const char *key, plb_obj *v, int *bad)
{
    if (!v || host->obj_set(o, v, key, NULL) < 0)
        *bad = 1;
}

/* ------------------------------------------------------------------------ */
/* Logging helpers.                                                          */

/* A NULL-terminated key, value array for log_fields and the helpers:
 * PLB_KV("upstream", addr, "error", why). */
#define PLB_KV(...) ((const char *const[]){__VA_ARGS__, NULL})

static inline void plb_log_at(const struct plb_host *host, plb_ctx *ctx, enum plb_log_level lvl,
                              const char *const *kv, const char *fmt, va_list ap) PLB_PRINTF(5, 0);
static inline void
plb_log_at(const struct plb_host *host, plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv,
           const char *fmt, va_list ap)
{
    if (host->log_enabled(ctx, lvl))
        host->log_fields(ctx, lvl, kv, fmt, ap);
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
#endif /* PRISMLB_MODULE_H */
