/*
 * prismlb/module.h — the public module ABI of prismlb, version 3.2.
 *
 * Versioning (Varnish's rule). A module built against 3.N loads on a daemon of 3.M when M >= N;
 * the loader refuses any other module (another major, a newer minor) naming both versions. A minor
 * only adds: members at the end of a topic table, tables at the end of the root, fields at the end
 * of a sized structure, hooks at the end of the descriptor, enum values. Before calling a member
 * newer than the minor your module requires, test PLB_HAS(host->TOPIC, member) and keep a way to
 * work without it: an older 3.x daemon has a shorter table. Every 3.0 member is on every 3.x.
 *
 * Contents: the rules (sizes, ownership, threads, callbacks, lifetimes, fencing) and changelog;
 * the types; the topic tables, each a struct plb_host_TOPIC:
 *   log    logging                       mem      the allocator
 *   loop   clocks, timers, fd watches, listeners, workers, posts, snapshots
 *   http   HTTP client and server        kube     Kubernetes clients, calls, informers
 *   obj    JSON values and builders      metrics  the metrics registry
 *   lb     Service load-balancer targets (and the object fields they read), status writes
 *   links  the instance, settings, endpoints, gates, health, completions, status
 * then the root (struct plb_host, PLB_HAS) and the descriptor (struct plb_module).
 * Header-only conveniences (descriptor and settings-row macros, PLB_STATE_NEW, PLB_KV and PLB_ERR,
 * clocks, informer and JSON helpers) are in <prismlb/module_util.h>, which the ABI does not
 * version. The reasons behind the rules: docs/module-guide.md, installed beside the README.
 *
 * Sizes. Every structure that crosses the ABI and may grow begins with `size_t size`, set by the
 * side that fills it in (its sizeof): the module for what it passes (plb_http_opts, plb_kube_opts,
 * plb_kube_ref, plb_kube_event, plb_informer_opts, plb_lb_targets), the daemon for what it hands
 * over (the root, every topic table, plb_kube_result, plb_informer_status, plb_endpoint_set,
 * plb_health_info). The reader uses the fields within that size and takes the others as zero; the
 * daemon refuses (-EINVAL) a structure smaller than its 3.0 size. Arrays come with their stride
 * (plb_module.setting_size, plb_lb_targets.target_size, lb->status_write_ingress's entry_size).
 * Nothing that grows is embedded by value.
 *
 * Ownership: new (the caller owns the result and frees it with the named function); borrowed (the
 * callee keeps it, valid for the stated time); steals (ownership passes to the callee).
 *
 * Threads. Hooks run on the main loop, and so does every member not marked. With `threads` above 1
 * there are worker loops: timers, watches and listeners on them (loop->worker_*), messages between
 * loops (loop->post), immutable snapshots for them (loop->snapshot_*); state crosses threads only
 * so. [any]: from any thread. [own]: on the loop that made the handle. Nothing may block.
 *
 * Callbacks. What a callback may do with its own handle:
 *   timer        timer_arm, timer_cancel, timer_free;
 *   io watch     io_add, io_free, and closing its fd after io_free;
 *   listener     listener_pause, listener_free (from its accept callback);
 *   HTTP server  http->server_free from a handler; each exchange is answered once, now or later;
 *   HTTP client  http->cancel from on_data (done is not called) and before done; a no-op in done;
 *   Kubernetes   kube->cancel of any call (a no-op in its own done); kube->client_free and
 *                kube->informer_free from any done or informer callback but informer_foreach's;
 *   completions  links->done(d) once per plb_done, on the main loop, even before stop returns.
 * No member runs a module callback before it returns, unless it says so.
 *
 * Lifetimes. create runs for every instance in config order, then start; stop in reverse order,
 * then destroy. A create that fails: nothing else runs for it, the instances created before get
 * destroy. A start that fails: no stop for it, destroy does run (freeing what a partial start
 * made); the instances started before get stop, then every created one destroy. gate_open runs
 * after start when the gate is open, else at the next opening, then at every opening; gate_close
 * at each closing after a gate_open. Without a gate neither runs (gate_is_open says 1); none runs
 * once stop was called. Informers: on_add for each object of the first list, on_synced once, then
 * on_add, on_update, on_delete as changes arrive (after a re-list, only the differences).
 *
 * Fencing. A gated instance writes only while its gate is open: its Kubernetes writes
 * (kube->create, update, patch, modify, event; lb->status_write) and its http->request calls other
 * than GET and HEAD return NULL with *err = PLB_EFENCED while it is closed. When it closes (before
 * gate_close) writes not yet sent are dropped, their done says PLB_HTTP_E_FENCED; one already sent
 * goes on and its completion says so (plb_kube_result.in_flight_at_close,
 * http->resp_in_flight_at_close): its effect is unknown. Reads are never fenced.
 *
 * Changelog (newest first, one line per change):
 *   3.2 2026-12-03 lb->status_write_ingress: a status of struct plb_lb_ingress entries (hostnames).
 *   3.1 2026-12-03 plb_http_opts.fresh_connection: a request on a connection of its own.
 *   3.0 2026-12-02 Topic tables under a root: host->TOPIC->member, PLB_HAS for PLB_HOST_HAS;
 *       2.x modules are refused. Every member, by table (old→new; same name unless shown):
 *       log: log_enabled→enabled, logf→msg, log_fields→fields, log_set_level→set_level; cut
 *         logv (use fields), log_kv (PLB_LOG with PLB_KV), module_name (records carry it).
 *       mem: alloc, realloc, free, strdup.
 *       loop: now_ms, wall_ms, timer_new, timer_arm, timer_cancel, timer_pending, timer_free,
 *         io_new, io_add, io_free, io_activate, listen_tcp, listener_port, listener_pause,
 *         listener_free, listener_fd, listen_socket, worker_count, worker_at, worker_index, post,
 *         worker_timer_new, worker_io_new, worker_listen_fd, snapshot_new, snapshot_publish,
 *         snapshot_get, snapshot_free; cut io_del (io_free), worker_self.
 *       http: the http_ prefix dropped from request, cancel, resp_status, resp_error,
 *         resp_error_text, resp_body, resp_header, resp_in_flight_at_close, server_new,
 *         server_port, route, server_free, method, path, query, reply; cut http_header,
 *         http_resp_connect_time, http_resp_total_time.
 *       kube: kube_new→client_new, kube_free→client_free, kube_namespace→ns; the kube_ prefix
 *         dropped from server, get, create, update, patch, modify, event, cancel; informer_new,
 *         informer_free, informer_synced, informer_count, informer_get, informer_foreach; cut
 *         kube_delete.
 *       obj: obj_int→int64, obj_bool→boolean; the obj_ prefix dropped from get, type, str, len,
 *         at, iter, dump, ref, unref, copy, set, append, new_str, new_int, new_object, new_array,
 *         new_bool, new_null, new_real; cut obj_del, obj_remove, obj_parse.
 *       metrics: metric_new→new_metric, metric_new_shared→new_shared, metric_add→add,
 *         metric_set→set, metric_observe→observe, metric_remove→remove, metrics_render→render,
 *         metrics_on_collect→on_collect.
 *       lb: lb_select_targets→select_targets, lb_targets_clear→targets_clear,
 *         lb_selector_check→selector_check, lb_status_write→status_write; new keep_services,
 *         keep_nodes, keep_slices (the fields select_targets reads, as keep paths).
 *       links: instance_name, instance_setting_str, check_format, version, revision,
 *         status_render, endpoints_publish, endpoints_failed, endpoints_subscribe, gate_set,
 *         gate_is_open, health_register, health_beat, health_set, health_foreach, done.
 *       Informer callbacks are declared once (plb_informer_add_cb ...); the header-only helpers
 *       moved to <prismlb/module_util.h>; PLB_SENTINEL and PLB_HOST_HAS are gone.
 *   2.6 2026-12-01 plb_informer_opts.keep: an informer caches the fields it names.
 *   2.5 2026-12-01 snapshot_publish can fail with -ENOMEM.
 *   2.4 2026-12-01 Fencing of a gated instance's writes.
 *   2.3 2026-12-01 metric_new_shared; metric_new's series carry module_instance.
 *   2.2 2026-12-01 Worker loops, posts, snapshots, metrics_on_collect.
 *   2.1 2026-12-01 plb_module.status, status_render, instance_setting_str.
 *   2.0 2026-12-01 Sizes and strides on growing structures; log fields and levels; JSON
 *       builders; create and start report why; listening-port settings.
 *   1.1 2026-11-29 listener_fd, PLB_IO_EDGE, PLB_IO_CLOSED, io_activate.
 *   1.0 2026-11-29 First ABI.
 */
#ifndef PRISMLB_MODULE_H
#define PRISMLB_MODULE_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLB_ABI_MAJOR 3
#define PLB_ABI_MINOR 2

#define PLB_MODULE_SYMBOL "prismlb_module"
#define PLB_MODULE_EXPORT                                                                          \
    __attribute__((visibility("default"))) const struct plb_module prismlb_module

#if defined(__GNUC__)
#define PLB_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PLB_PRINTF(f, a)
#endif
/* A variadic member whose list ends with NULL (obj->get, set): gcc checks calls through the
 * pointer; clang takes `sentinel` on functions only. */
#if defined(__GNUC__) && !defined(__clang__)
#define PLB_SENTINEL_MEMBER __attribute__((sentinel))
#else
#define PLB_SENTINEL_MEMBER
#endif

/* --- Opaque handles. Their layout belongs to the daemon. --- */
typedef struct plb_ctx plb_ctx;                     /* one module instance */
typedef struct plb_timer plb_timer;                 /* a timer on an event loop */
typedef struct plb_io plb_io;                       /* a watch on a file descriptor */
typedef struct plb_listener plb_listener;           /* a TCP listener */
typedef struct plb_http_server plb_http_server;     /* a small HTTP server */
typedef struct plb_http_exchange plb_http_exchange; /* one request to that server */
typedef struct plb_http_req plb_http_req;           /* one HTTP client request */
typedef struct plb_http_resp plb_http_resp;         /* its response */
typedef struct plb_metric plb_metric;               /* a metric family */
typedef struct plb_check plb_check;                 /* a config validation pass */
typedef struct plb_worker plb_worker;               /* a worker loop */
typedef struct plb_snapshot plb_snapshot;           /* a published snapshot slot */
typedef struct plb_done plb_done;                   /* an asynchronous completion */
typedef struct plb_obj plb_obj;                     /* a JSON value */
typedef struct plb_kube plb_kube;                   /* a Kubernetes API client */
typedef struct plb_kube_op plb_kube_op;             /* one Kubernetes API call */
typedef struct plb_informer plb_informer;           /* a list+watch cache of one resource */

/* --- Settings tables. --- */
enum plb_setting_type {
    PLB_SET_BOOL = 1,    /* int (0 or 1) */
    PLB_SET_INT,         /* int64_t, within [min, max] */
    PLB_SET_DOUBLE,      /* double, within [min, max] */
    PLB_SET_STRING,      /* char * (NUL-terminated; NULL when unset, no default) */
    PLB_SET_DURATION,    /* int64_t milliseconds; "150ms", "20s", "1m30s", "2h" or an integer
                            number of seconds; within [min, max] ms */
    PLB_SET_ENUM,        /* int: index into enum_values */
    PLB_SET_STRING_LIST, /* struct plb_strv: array of strings or one string with comma-separated
                            items */
    PLB_SET_PATH,        /* char *: a file path, relative paths resolved against the directory of
                            the config file that set it */
    PLB_SET_INSTANCES,   /* struct plb_strv of instance names, each checked to exist and to
                            provide the role in `role` */
};

/* Formats the daemon checks a STRING value, or each item of a STRING_LIST, against (before the
 * setting's own validator; NULL and "" are left to PLB_SET_NONEMPTY). The same checks are
 * offered at run time as links->check_format. */
enum plb_setting_format {
    PLB_FMT_NONE = 0,
    PLB_FMT_HOST,      /* an IP address or an RFC 1123 hostname */
    PLB_FMT_HOST_PORT, /* host:port, [IPv6]:port; port 1-65535 */
    PLB_FMT_TLS_NAME,  /* a name to verify a certificate against: a hostname or IP, no port,
                          scheme, path or brackets */
    PLB_FMT_HTTP_URL,  /* an http:// or https:// URL naming a host */
    PLB_FMT_DNS_LABEL, /* an RFC 1123 label: a-z, 0-9, '-', at most 63, a letter or digit at both
                          ends */
};

/* Flags of a setting. */
#define PLB_SET_REQUIRED 0x1u /* no default: must be given */
#define PLB_SET_SECRET 0x2u   /* never printed (logs, --check-config output) */
#define PLB_SET_NONEMPTY 0x4u /* strings and lists: must not be empty */
/* INT: a TCP port the instance listens on, its address the STRING setting `listen_address`
 * names. The daemon refuses two ports of any instances that collide, naming both (FILE:LINE). */
#define PLB_SET_LISTEN_PORT 0x8u

/* Roles an instance can provide to others (struct plb_module.provides). */
#define PLB_ROLE_ENDPOINTS 0x1u /* publishes endpoint sets */
#define PLB_ROLE_GATE 0x2u      /* opens and closes gated instances */

struct plb_strv {
    size_t n;
    char **v; /* n strings, owned by the daemon */
};

/* One setting; a table ends with PLB_SETTINGS_END and is read by plb_module.setting_size. The
 * daemon parses the value (from `env` when set, else the file), checks type, bounds and format,
 * runs validate and stores it at `offset` in the config struct. `def` is written as in the file
 * ("20s", "a,b"); NULL: zero. The table also renders prismlb --settings-doc MODULE. */
struct plb_setting {
    const char *name;
    enum plb_setting_type type;
    size_t offset;
    const char *def;
    double min, max;                /* INT, DOUBLE, DURATION (ms): bounds when either is
                                       non-zero; max <= min means no upper bound */
    const char *const *enum_values; /* ENUM: NULL-terminated list */
    uint32_t flags;                 /* PLB_SET_* flags */
    uint32_t role;                  /* INSTANCES: PLB_ROLE_* the targets provide */
    const char *env;                /* environment variable overriding it, or NULL */
    const char *doc;                /* one line */
    /* Extra check of one value, or NULL. `value` points at the parsed field. Return NULL if
     * valid, else a static or thread-local message. */
    const char *(*validate)(const void *value);
    enum plb_setting_format format; /* checked by the daemon; 0: none */
    const char *listen_address;     /* PLB_SET_LISTEN_PORT: the name of the setting with the
                                       port's address */
};

/* Helpers for settings tables (row macros: module_util.h). */
#define PLB_OFFSET(type, field) offsetof(type, field)
#define PLB_SETTINGS_END                                                                           \
    {                                                                                              \
        0                                                                                          \
    }

/* --- Logging. --- */
enum plb_log_level { PLB_LOG_ERROR = 0, PLB_LOG_WARN = 1, PLB_LOG_INFO = 2, PLB_LOG_DEBUG = 3 };

/* --- Callbacks. --- */
typedef void (*plb_timer_cb)(plb_timer *t, void *arg);

#define PLB_IO_READ 0x02
#define PLB_IO_WRITE 0x04
#define PLB_IO_TIMEOUT 0x01
/* For io_new: edge-triggered. The watch fires when the fd becomes readable or writable again,
 * not while it stays so: read and write until EAGAIN, or resume later with io_activate. Fires
 * once when added if the fd is ready. */
#define PLB_IO_EDGE 0x08
/* For io_new with PLB_IO_READ, and in what: the peer shut its writing side (EPOLLRDHUP). A hint
 * where the system reports it; a read of 0 stays the definite EOF. */
#define PLB_IO_CLOSED 0x10
/* what: PLB_IO_* bits that fired. */
typedef void (*plb_io_cb)(plb_io *io, int fd, int what, void *arg);

/* A new connection; the module owns fd (non-blocking, close-on-exec). peer is borrowed for the
 * call ("1.2.3.4:5678" or "[::1]:5678"). */
typedef void (*plb_accept_cb)(plb_listener *l, int fd, const char *peer, void *arg);

/* An HTTP server request; answer it with http->reply, now or later. */
typedef void (*plb_http_handler)(plb_http_exchange *x, void *arg);

/* --- HTTP client. --- */
/* How the body of a response is delivered. */
enum plb_http_body_mode {
    PLB_HTTP_BUFFER = 0, /* whole body in the response, up to max_body bytes */
    PLB_HTTP_CHUNKS,     /* each piece to on_data as it arrives; none kept */
    PLB_HTTP_LINES,      /* each complete '\n'-terminated line (without the '\n') to on_data; a
                            line over max_body is an error */
};

/* Error classes of a failed request (plb_http_resp_error). */
enum plb_http_error {
    PLB_HTTP_OK = 0,
    PLB_HTTP_E_CONNECT,   /* DNS, refused, unreachable */
    PLB_HTTP_E_TIMEOUT,   /* connect or total timeout */
    PLB_HTTP_E_TLS,       /* handshake, verification, credentials */
    PLB_HTTP_E_PROTOCOL,  /* malformed response */
    PLB_HTTP_E_TOO_LARGE, /* body or line over max_body */
    PLB_HTTP_E_CANCELLED, /* http->cancel (done is not called) */
    PLB_HTTP_E_LOCAL,     /* bad options, out of memory, an unreadable token or certificate */
    PLB_HTTP_E_ABORTED,   /* on_data asked to stop */
    PLB_HTTP_E_FENCED,    /* a gated write dropped unsent: its gate closed ("Fencing") */
};

/* *err of a gated instance's write while its gate is closed (see "Fencing"). */
#define PLB_EFENCED (-EPERM)

/* Called with each chunk or line; borrowed data. Return 0 to go on, non-zero to abort the
 * request (done then reports PLB_HTTP_E_ABORTED). */
typedef int (*plb_http_data_cb)(plb_http_req *req, const char *data, size_t len, void *arg);
/* Called once when the request ends, unless it was cancelled. resp is borrowed for the duration
 * of the call; the request handle is freed by the daemon right after. */
typedef void (*plb_http_done_cb)(plb_http_req *req, const plb_http_resp *resp, void *arg);

struct plb_http_opts {
    size_t size;                /* sizeof(struct plb_http_opts) */
    const char *method;         /* "GET" when NULL */
    const char *url;            /* required: http:// or https:// */
    const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
    const void *body;           /* copied; may be NULL */
    size_t body_len;
    const char *ca_file;   /* verify the server against this bundle (system store when NULL) */
    const char *ca_pem;    /* or against this PEM text (copied) */
    const char *cert_file; /* client certificate (PEM), read per request */
    const char *key_file;  /* client key (PEM), read per request */
    const char *cert_pem;  /* or inline PEM text (copied) */
    const char *key_pem;
    const char *bearer_token_file; /* a bearer token, the file read on every request */
    const char *bearer_token;      /* or a token given inline (copied) */
    const char *tls_server_name;   /* verify the certificate as this name, not the URL's host */
    const char *connect_to;        /* "host:port" to connect to (TLS keeps the URL's host) */
    int insecure_skip_verify;      /* never a default; for explicit opt-in only */
    uint32_t connect_timeout_ms;   /* 0: 10 s */
    uint32_t timeout_ms;           /* total, 0: none (streams) */
    enum plb_http_body_mode body_mode;
    size_t max_body;          /* BUFFER: body limit; LINES: line limit; 0: 16 MiB */
    plb_http_data_cb on_data; /* CHUNKS and LINES */
    plb_http_done_cb done;    /* required */
    void *arg;
    /* 3.1. 1: a new connection (TCP and TLS handshakes; no kept one, no shared HTTP/2 one),
     * closed after the answer. For checks of the server itself, e.g. a readiness probe that must
     * see the certificate new clients see; 0 for API calls and watches. A 3.0 module's shorter
     * options read as 0; a 3.0 daemon loads no 3.1 module and reads no field past its own size. */
    int fresh_connection;
};

/* --- Metrics. --- */
enum plb_metric_type { PLB_METRIC_COUNTER = 1, PLB_METRIC_GAUGE, PLB_METRIC_HISTOGRAM };

/* --- Endpoint links. --- */
/* An endpoint: "host:port", with IPv6 hosts in brackets. */
struct plb_endpoint_set {
    size_t size; /* sizeof(struct plb_endpoint_set) as the daemon was built */
    size_t n;
    const char *const *v; /* borrowed for the duration of the callback */
};
/* The merged, de-duplicated, sorted union of every linked source's latest set. Never empty once
 * it was non-empty. */
typedef void (*plb_endpoints_cb)(const struct plb_endpoint_set *set, void *arg);

/* --- Health checks, read by mod_metrics. --- */
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

/* --- Kubernetes. --- */
/* JSON values cross the ABI as reference-counted plb_obj handles (struct plb_host_obj). Objects
 * an informer or a completion hands over are borrowed and read-only; obj->copy is modifiable. */
enum plb_obj_type {
    PLB_OBJ_NULL = 0,
    PLB_OBJ_OBJECT,
    PLB_OBJ_ARRAY,
    PLB_OBJ_STRING,
    PLB_OBJ_INT,
    PLB_OBJ_REAL,
    PLB_OBJ_BOOL
};

/* Where the API server is and who we are. Every string is borrowed for the call (copied). */
struct plb_kube_opts {
    size_t size;                 /* sizeof(struct plb_kube_opts) */
    const char *kubeconfig;      /* NULL: in-cluster with KUBERNETES_SERVICE_HOST set, else
                                    $KUBECONFIG, else ~/.kube/config */
    const char *context;         /* kubeconfig context; NULL: current-context */
    int in_cluster;              /* 1: the service account, never a kubeconfig */
    const char *sa_dir;          /* NULL: /var/run/secrets/kubernetes.io/serviceaccount */
    const char *server;          /* the server URL instead; a path prefix is kept */
    const char *tls_server_name; /* verify the server certificate as this name */
    const char *user_agent;      /* NULL: "prismlb/<version>" */
    uint32_t timeout_ms;         /* each request except watches; 0: 30 s */
    int insecure_skip_verify;    /* explicit opt-in only (or the kubeconfig's) */
};

/* An API resource, and optionally one object of it or its subresource. Strings are borrowed for
 * the call (copied). */
struct plb_kube_ref {
    size_t size;             /* sizeof(struct plb_kube_ref) */
    const char *api_version; /* "v1", "discovery.k8s.io/v1" */
    const char *resource;    /* plural: "services", "endpointslices" */
    const char *ns;          /* namespace; NULL or "" for cluster-scoped kinds, and for
                                informers: all namespaces */
    const char *name;        /* object name; NULL for the collection */
    const char *subresource; /* "status" or NULL */
};

/* The outcome of an API call, borrowed for the duration of the done call. A response with a
 * non-2xx status is not an error of the call: look at status (409 Conflict after a stale
 * resourceVersion, 404, ...). */
struct plb_kube_result {
    size_t size;
    int status;                /* HTTP status; 0 when no response arrived */
    enum plb_http_error error; /* PLB_HTTP_OK when a response arrived; PLB_HTTP_E_ABORTED when a
                                  modify callback declined (see kube->modify) */
    const char *reason;        /* Status reason ("Conflict", "NotFound", "AlreadyExists"), or "" */
    const char *message;       /* Status message or the transport error, or "" */
    const plb_obj *obj;        /* 2xx: the object returned; else the Status; NULL when the body
                                  was not JSON. obj->ref it to keep it */
    int in_flight_at_close;    /* the call's last request was a write already sent when the gate
                                  closed (see "Fencing") */
};
/* op is freed by the daemon right after the call. */
typedef void (*plb_kube_done_cb)(plb_kube_op *op, const struct plb_kube_result *r, void *arg);

/* Read-modify-write: obj is the object just read (new to the operation, modifiable with
 * obj->set; freed by the daemon). Return 0 to write it back (PUT carrying its resourceVersion; a
 * 409 Conflict reads and calls again), 1 to finish without writing (done gets the object read,
 * status 200), or a negative number to give up (done gets PLB_HTTP_E_ABORTED). */
typedef int (*plb_kube_mutate_cb)(plb_obj *obj, void *arg);

enum plb_kube_patch_type {
    PLB_KUBE_MERGE_PATCH = 0, /* application/merge-patch+json (RFC 7386) */
    PLB_KUBE_STRATEGIC_PATCH, /* application/strategic-merge-patch+json */
    PLB_KUBE_JSON_PATCH,      /* application/json-patch+json (RFC 6902) */
};

/* A core/v1 Event about an object. The same component, host, object, type, reason and message
 * seen again (also by an earlier run: looked up on the server) bump count and lastTimestamp of
 * the first Event. */
struct plb_kube_event {
    size_t size;
    const plb_obj *involved; /* borrowed for the call (its metadata identity) */
    const char *kind;        /* for an object without kind (list items): "Service" */
    const char *api_version; /* likewise: "v1" */
    const char *type;        /* "Normal" (NULL) or "Warning" */
    const char *reason;      /* UpperCamelCase: "EnsuringLoadBalancer" */
    const char *message;
    const char *component; /* source.component; NULL: "prismlb" */
    const char *host;      /* source.host (the node), or NULL */
};

enum plb_informer_event {
    PLB_INFORMER_LIST_FAILED = 1, /* a list or re-list failed (an error) */
    PLB_INFORMER_WATCH_FAILED,    /* the watch call failed (an error) */
    PLB_INFORMER_WATCH_ERROR,     /* an ERROR event other than 410 (an error) */
    PLB_INFORMER_WATCH_ENDED,     /* the stream ended, cleanly or dropped (not an error) */
    PLB_INFORMER_EXPIRED,         /* 410 Gone or Expired: re-listing (not an error) */
};
struct plb_informer_status {
    size_t size;
    enum plb_informer_event event;
    int is_error;        /* 1 for the events a discovery error metric counts */
    int http_status;     /* 0 when none */
    const char *message; /* borrowed */
    int64_t retry_in_ms; /* delay before the next list or watch */
};
/* Informer callbacks (objects borrowed for the call) run after the cache's update; old: before. */
typedef void (*plb_informer_add_cb)(plb_informer *inf, const plb_obj *obj, void *arg);
typedef void (*plb_informer_update_cb)(plb_informer *inf, const plb_obj *old, const plb_obj *obj,
                                       void *arg);
typedef void (*plb_informer_delete_cb)(plb_informer *inf, const plb_obj *old, void *arg);
/* The first complete list was delivered (once). */
typedef void (*plb_informer_synced_cb)(plb_informer *inf, void *arg);
/* Errors and reconnects, for metrics and health. */
typedef void (*plb_informer_status_cb)(plb_informer *inf, const struct plb_informer_status *st,
                                       void *arg);

struct plb_informer_opts {
    size_t size;                    /* sizeof(struct plb_informer_opts) */
    const struct plb_kube_ref *ref; /* api_version, resource, ns (NULL: all); borrowed for the
                                       call (copied) */
    const char *label_selector;     /* "kubernetes.io/service-name=kubernetes" */
    const char *field_selector;     /* "metadata.name=x" */
    uint32_t page_size;             /* list chunk (limit); 0: 500 */
    uint32_t watch_timeout_s;       /* timeoutSeconds of each watch; 0: random in [300, 600) */
    plb_informer_add_cb on_add;     /* each may be NULL */
    plb_informer_update_cb on_update;
    plb_informer_delete_cb on_delete;
    plb_informer_synced_cb on_synced;
    plb_informer_status_cb on_status;
    void *arg;
    /* The fields the cache keeps of each object, NULL-terminated (borrowed for the call,
     * copied); NULL keeps objects whole. Paths are JSON Pointers from the object's root
     * ("/spec/ports", "~1" for a "/" in a name); a member is kept whole where its path ends; an
     * array on the way applies the rest of the path to each item ("/endpoints/nodeName").
     * metadata name, namespace, uid and resourceVersion are always kept. A bad path fails
     * informer_new with -EINVAL. The cache, every callback and informer_get/foreach see the kept
     * fields only (others read as absent); objects are trimmed, never filtered; an update that
     * changes no kept field but resourceVersion is cached and not reported. */
    const char *const *keep;
};

/* --- Service load balancers. --- */
enum plb_lb_policy {
    PLB_LB_POLICY_TRAFFIC = 0, /* by spec.externalTrafficPolicy */
    PLB_LB_POLICY_SELECTOR,    /* by a node selector */
};

struct plb_lb_target {
    const char *node; /* borrowed from the node informer's cache */
    const char *ip;   /* its InternalIP, borrowed likewise */
};

/* Set size before lb->select_targets; the daemon fills the rest. */
struct plb_lb_targets {
    size_t size; /* sizeof(struct plb_lb_targets), the module's */
    size_t n;
    void *v;            /* n targets, target_size bytes apart; owned by the daemon:
                           lb->targets_clear */
    size_t target_size; /* sizeof(struct plb_lb_target), the daemon's */
    size_t dropped;     /* selected nodes cut by max_targets */
    size_t no_address;  /* selected nodes without an InternalIP */
};
/* Target i of t (a const struct plb_lb_target *). */
#define PLB_LB_TARGET(t, i)                                                                        \
    ((const struct plb_lb_target *)(const void *)((const char *)(t)->v + (i) * (t)->target_size))

/* 3.2: one entry of a Service's status.loadBalancer.ingress, for lb->status_write_ingress. An
 * entry has an ip or a hostname, never both; ip_mode goes only with an ip (the API server's
 * rules). Strings borrowed for the call. */
struct plb_lb_ingress {
    const char *ip;       /* an IPv4 or IPv6 address, or NULL */
    const char *hostname; /* a DNS name, or NULL */
    const char *ip_mode;  /* "VIP", "Proxy", or NULL: none */
};

/* --- Topic tables. Each begins with its size (the daemon's sizeof); a later --- */
/* 3.x appends members at the end of its table only.                        */

/* Records are tagged with the instance and its module; a record below the daemon's log_level or
 * the instance's own (set_level) is dropped; values of secret-looking keys (token, password,
 * authorization, ...) are redacted. [any]: every member (a record is written whole). */
struct plb_host_log {
    size_t size;
    int (*enabled)(plb_ctx *ctx, enum plb_log_level lvl);
    /* A printf-style message. */
    void (*msg)(plb_ctx *ctx, enum plb_log_level lvl, const char *fmt, ...) PLB_PRINTF(3, 4);
    /* A printf-style message with fields: kv is a NULL-terminated array of key, value strings
     * (borrowed for the call; a NULL value is written empty), or NULL. The PLB_ERR family of
     * module_util.h calls it. */
    void (*fields)(plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv, const char *fmt,
                   va_list ap) PLB_PRINTF(4, 0);
    /* The instance's own threshold under the daemon's: records above lvl are dropped; -1 drops
     * every record. */
    void (*set_level)(plb_ctx *ctx, int lvl);
};

/* [any] The modules' allocator, so tests can fail allocations; alloc zeroes, free takes NULL. */
struct plb_host_mem {
    size_t size;
    void *(*alloc)(size_t n);
    void *(*realloc)(void *p, size_t n);
    void (*free)(void *p);
    char *(*strdup)(const char *s);
};

struct plb_host_loop {
    size_t size;
    /* Monotonic milliseconds, and wall-clock milliseconds since the epoch. [any] */
    int64_t (*now_ms)(plb_ctx *ctx);
    int64_t (*wall_ms)(plb_ctx *ctx);
    /* New timer on the main loop (free with timer_free); NULL when out of memory. */
    plb_timer *(*timer_new)(plb_ctx *ctx, plb_timer_cb cb, void *arg);
    /* [own] Arm: first fire after delay_ms, then every period_ms if > 0; each delay lengthened
     * by up to jitter (0 to 1) × delay at random. Re-arming replaces the schedule. 0 or -errno. */
    int (*timer_arm)(plb_timer *t, int64_t delay_ms, int64_t period_ms, double jitter);
    void (*timer_cancel)(plb_timer *t);       /* [own] */
    int (*timer_pending)(const plb_timer *t); /* [own] */
    void (*timer_free)(plb_timer *t);         /* [own] NULL is fine; cancels first */
    /* New watch of fd (PLB_IO_READ/WRITE, optionally EDGE and CLOSED) on the main loop; the fd
     * stays the module's. Free with io_free. */
    plb_io *(*io_new)(plb_ctx *ctx, int fd, int what, plb_io_cb cb, void *arg);
    /* [own] Start watching; timeout_ms > 0 adds PLB_IO_TIMEOUT after that long idle. On an added
     * watch it replaces only the timeout. 0 or -errno. */
    int (*io_add)(plb_io *io, int64_t timeout_ms);
    void (*io_free)(plb_io *io); /* [own] NULL is fine */
    /* [own] Call io's callback with what on the next loop iteration, as if the fd became ready:
     * how an edge-triggered watch resumes deferred work. */
    void (*io_activate)(plb_io *io, int what);
    /* Listen on addr:port (an IP literal; port 0 picks one) on the main loop. New
     * (listener_free); NULL with *err = -errno. */
    plb_listener *(*listen_tcp)(plb_ctx *ctx, const char *addr, int port, int backlog,
                                plb_accept_cb cb, void *arg, int *err);
    int (*listener_port)(const plb_listener *l);         /* [own] the bound port */
    void (*listener_pause)(plb_listener *l, int paused); /* [own] */
    void (*listener_free)(plb_listener *l);              /* [own] */
    /* [own] The listening socket, borrowed, for options accepted sockets inherit (keepalive,
     * TCP_USER_TIMEOUT, TCP_NODELAY). Do not close it. */
    int (*listener_fd)(const plb_listener *l);
    /* A socket bound to addr:port and listening when this returns, with SO_REUSEPORT when
     * reuseport != 0 (one per worker sharing a port); the port goes to *bound_port (may be
     * NULL). A new fd (non-blocking, close-on-exec; the caller's until worker_listen_fd steals
     * it). */
    int (*listen_socket)(plb_ctx *ctx, const char *addr, int port, int backlog, int reuseport,
                         int *bound_port);
    /* The worker loops: `threads` of them, or 0 with threads = 1. */
    size_t (*worker_count)(plb_ctx *ctx);
    plb_worker *(*worker_at)(plb_ctx *ctx, size_t i); /* borrowed; NULL out of range */
    size_t (*worker_index)(const plb_worker *w);      /* [any] */
    /* [any] Run fn(arg) on worker `to`'s loop, or on the main loop when `to` is NULL; fn owns
     * arg then. Messages from one thread to one loop run in order. 0, or -ENOMEM / -ESHUTDOWN /
     * -EINVAL (no workers): fn does not run and arg stays the caller's. */
    int (*post)(plb_ctx *ctx, plb_worker *to, void (*fn)(void *arg), void *arg);
    /* [own: call on w] Timers, watches and listeners on worker w's loop, as timer_new, io_new
     * and listen_tcp; worker_listen_fd steals fd (a socket of listen_socket; closed on failure
     * too), NULL with *err = -errno. */
    plb_timer *(*worker_timer_new)(plb_worker *w, plb_timer_cb cb, void *arg);
    plb_io *(*worker_io_new)(plb_worker *w, int fd, int what, plb_io_cb cb, void *arg);
    plb_listener *(*worker_listen_fd)(plb_worker *w, int fd, plb_accept_cb cb, void *arg, int *err);
    /* An empty snapshot slot. New (snapshot_free); NULL when out of memory. */
    plb_snapshot *(*snapshot_new)(plb_ctx *ctx);
    /* Publish data (steals on success: read-only from now on). The data before it is released by
     * release(data) (may be NULL) on the main loop once no worker can read it. 0; or -EINVAL /
     * -ENOMEM, and then data stays the caller's and nothing changed. */
    int (*snapshot_publish)(plb_snapshot *s, void *data, void (*release)(void *data));
    /* [any] The latest data, borrowed until the calling worker returns to its loop (on the main
     * loop: until the next publish). */
    const void *(*snapshot_get)(const plb_snapshot *s);
    void (*snapshot_free)(plb_snapshot *s); /* releases its data; NULL is fine */
};

struct plb_host_http {
    size_t size;
    /* Start a client request. New handle, valid until done runs or cancel; NULL with *err =
     * -errno (bad options, no memory, PLB_EFENCED). */
    plb_http_req *(*request)(plb_ctx *ctx, const struct plb_http_opts *o, int *err);
    void (*cancel)(plb_http_req *req);          /* done is not called */
    int (*resp_status)(const plb_http_resp *r); /* 0 if none */
    enum plb_http_error (*resp_error)(const plb_http_resp *r);
    const char *(*resp_error_text)(const plb_http_resp *r);        /* borrowed */
    const char *(*resp_body)(const plb_http_resp *r, size_t *len); /* borrowed */
    /* Last value of a header (case-insensitive) or NULL; borrowed. */
    const char *(*resp_header)(const plb_http_resp *r, const char *name);
    /* 1 when r answers a gated write sent before its gate closed. */
    int (*resp_in_flight_at_close)(const plb_http_resp *r);
    /* An HTTP/1.1 server on addr:port. New (server_free); NULL with *err. */
    plb_http_server *(*server_new)(plb_ctx *ctx, const char *addr, int port, int *err);
    int (*server_port)(const plb_http_server *s);
    /* Route an exact path ("/metrics") or, ending in '/', a prefix; every method reaches the
     * handler. 0 or -errno. */
    int (*route)(plb_http_server *s, const char *path, plb_http_handler h, void *arg);
    void (*server_free)(plb_http_server *s);
    /* The request, borrowed until the reply. */
    const char *(*method)(plb_http_exchange *x);
    const char *(*path)(plb_http_exchange *x);  /* without the query */
    const char *(*query)(plb_http_exchange *x); /* "" when none */
    /* Reply exactly once: status, content type (or NULL), body (copied), NULL-terminated "Name:
     * value" extra headers. Frees x. */
    void (*reply)(plb_http_exchange *x, int status, const char *content_type, const void *body,
                  size_t len, const char *const *headers);
};

/* A client: a configuration bound to the main loop; its calls complete by callback, on the loop. */
struct plb_host_kube {
    size_t size;
    /* New client (client_free). Reads the kubeconfig or service account files now. NULL with a
     * message in err (errlen bytes; may be NULL). */
    plb_kube *(*client_new)(plb_ctx *ctx, const struct plb_kube_opts *o, char *err, size_t errlen);
    /* Cancel every call (no done runs), free the informers and the client. NULL is fine. */
    void (*client_free)(plb_kube *k);
    /* The server URL, and the default namespace; borrowed for k's life. */
    const char *(*server)(const plb_kube *k);
    const char *(*ns)(const plb_kube *k);
    /* Calls: a new handle, valid until done runs or cancel; NULL with *err = -EINVAL (bad ref or
     * body), -ENOMEM or PLB_EFENCED. Bodies are JSON text, copied. create POSTs to the
     * collection; update PUTs (a stale metadata.resourceVersion gets 409); patch with
     * subresource "status" patches the status. */
    plb_kube_op *(*get)(plb_kube *k, const struct plb_kube_ref *ref, plb_kube_done_cb done,
                        void *arg, int *err);
    plb_kube_op *(*create)(plb_kube *k, const struct plb_kube_ref *ref, const char *body,
                           plb_kube_done_cb done, void *arg, int *err);
    plb_kube_op *(*update)(plb_kube *k, const struct plb_kube_ref *ref, const char *body,
                           plb_kube_done_cb done, void *arg, int *err);
    plb_kube_op *(*patch)(plb_kube *k, const struct plb_kube_ref *ref,
                          enum plb_kube_patch_type type, const char *patch, plb_kube_done_cb done,
                          void *arg, int *err);
    /* Read-modify-write with mutate (plb_kube_mutate_cb), retried after a 409 up to attempts
     * times in all (0: 5). */
    plb_kube_op *(*modify)(plb_kube *k, const struct plb_kube_ref *ref, plb_kube_mutate_cb mutate,
                           int attempts, plb_kube_done_cb done, void *arg, int *err);
    /* Record an Event, written one at a time in order; done may be NULL, and then the handle is
     * only a success token: never cancel it. */
    plb_kube_op *(*event)(plb_kube *k, const struct plb_kube_event *ev, plb_kube_done_cb done,
                          void *arg, int *err);
    void (*cancel)(plb_kube_op *op); /* done is not called */
    /* New informer, started at once: chunked list, then watch with bookmarks, backoff and
     * re-list on 410. Cached objects lack managedFields. Free with informer_free (or
     * client_free); NULL with *err = -EINVAL or -ENOMEM. */
    plb_informer *(*informer_new)(plb_kube *k, const struct plb_informer_opts *o, int *err);
    void (*informer_free)(plb_informer *inf); /* no callback afterwards; NULL is fine */
    int (*informer_synced)(const plb_informer *inf);
    size_t (*informer_count)(const plb_informer *inf);
    /* The cached ns/name (ns NULL: cluster-scoped) or NULL; borrowed until back in the loop. */
    const plb_obj *(*informer_get)(const plb_informer *inf, const char *ns, const char *name);
    /* Visit every cached object (borrowed for the call). */
    void (*informer_foreach)(const plb_informer *inf, void (*cb)(const plb_obj *obj, void *arg),
                             void *arg);
};

/* Accessors take NULL and return NULL, 0 or the default. [any] for a value one thread owns. */
struct plb_host_obj {
    size_t size;
    /* Follow object keys (NULL-terminated): borrowed child or NULL. */
    const plb_obj *(*get)(const plb_obj *o, ...)PLB_SENTINEL_MEMBER;
    enum plb_obj_type (*type)(const plb_obj *o);
    const char *(*str)(const plb_obj *o); /* borrowed, or NULL */
    /* An integer, or a real truncated toward zero; def for anything else. */
    int64_t (*int64)(const plb_obj *o, int64_t def);
    int (*boolean)(const plb_obj *o, int def);
    size_t (*len)(const plb_obj *o);                  /* array items or members */
    const plb_obj *(*at)(const plb_obj *o, size_t i); /* borrowed item */
    /* Members: *it NULL to start; the key (borrowed) and *value, NULL at the end. */
    const char *(*iter)(const plb_obj *o, void **it, const plb_obj **value);
    char *(*dump)(const plb_obj *o);    /* compact JSON text, new (mem->free) */
    plb_obj *(*ref)(const plb_obj *o);  /* new reference */
    void (*unref)(plb_obj *o);          /* NULL is fine */
    plb_obj *(*copy)(const plb_obj *o); /* new deep copy */
    /* Set value (steals, also on failure) at the key path (NULL-terminated), creating objects on
     * the way, in a modifiable o. 0 or -EINVAL/-ENOMEM. */
    int (*set)(plb_obj *o, plb_obj *value, ...) PLB_SENTINEL_MEMBER;
    /* Append value (steals, also on failure) to a modifiable array. 0, -EINVAL or -ENOMEM. */
    int (*append)(plb_obj *a, plb_obj *value);
    /* New values (obj->unref, or steal them into set / append); NULL when out of memory;
     * new_real gives NULL for a NaN or an infinity. */
    plb_obj *(*new_str)(const char *s);
    plb_obj *(*new_int)(int64_t v);
    plb_obj *(*new_object)(void);
    plb_obj *(*new_array)(void);
    plb_obj *(*new_bool)(int v);
    plb_obj *(*new_null)(void);
    plb_obj *(*new_real)(double v);
};

struct plb_host_metrics {
    size_t size;
    /* Register (or find) a family of this instance: every series carries
     * module_instance="<instance name>" first. label_names: NULL-terminated, borrowed, at most
     * 15; buckets: histogram bounds ascending (else NULL, 0). The handle lives as long as the
     * daemon. NULL on failure (logged). */
    plb_metric *(*new_metric)(plb_ctx *ctx, enum plb_metric_type type, const char *name,
                              const char *help, const char *const *label_names,
                              const double *buckets, size_t nbuckets);
    /* The same without module_instance: a family of the whole daemon (process_*), one handle and
     * series for every instance. */
    plb_metric *(*new_shared)(plb_ctx *ctx, enum plb_metric_type type, const char *name,
                              const char *help, const char *const *label_names,
                              const double *buckets, size_t nbuckets);
    /* label_values: as many as label_names, borrowed. 0 or -errno. */
    int (*add)(plb_metric *m, const char *const *label_values, double v);
    int (*set)(plb_metric *m, const char *const *label_values, double v);
    int (*observe)(plb_metric *m, const char *const *label_values, double v);
    /* Remove one series, or with NULL every series of this instance. */
    void (*remove)(plb_metric *m, const char *const *label_values);
    /* Every family in Prometheus text 0.0.4. New (mem->free). */
    char *(*render)(plb_ctx *ctx, size_t *len);
    /* Run cb(arg) on the main loop before every render (add != 0), or stop (add == 0): where
     * per-worker counters are summed. 0 or -errno. */
    int (*on_collect)(plb_ctx *ctx, void (*cb)(void *arg), void *arg, int add);
};

/* Target selection reads, and nothing else: of the Service /metadata/namespace, /metadata/name,
 * /spec/externalTrafficPolicy; of a Node /metadata/name, /metadata/labels, /spec/unschedulable,
 * /status/conditions (type, status), /status/addresses (type, address); of an EndpointSlice
 * /metadata/namespace, the kubernetes.io/service-name label, /endpoints (nodeName, conditions).
 * An informer that trims with keep must keep these: keep_services, keep_nodes and keep_slices
 * name them (append the module's own paths). */
struct plb_host_lb {
    size_t size;
    /* The nodes a Service of type LoadBalancer targets. PLB_LB_POLICY_TRAFFIC:
     * externalTrafficPolicy Cluster takes every node but cordoned and not-ready ones; Local the
     * nodes with a ready endpoint of the Service in `slices` (or a serving terminating one while
     * none is ready). PLB_LB_POLICY_SELECTOR: nodes matching node_selector ("k=v,k!=v,!k,k";
     * NULL or "": all). Nodes labelled node.kubernetes.io/exclude-from-external-load-balancers
     * stay out. Targets are InternalIPs (IPv4 first) sorted by node name, cut to max_targets (0:
     * no cap; out->dropped counts the rest). svc borrowed; slices may be NULL but for Local.
     * Strings in *out are borrowed from the caches until control returns to the loop; free with
     * targets_clear. 0, -EINVAL with a message in err (bad selector), or -ENOMEM. */
    int (*select_targets)(plb_ctx *ctx, const plb_obj *svc, enum plb_lb_policy policy,
                          const char *node_selector, plb_informer *nodes, plb_informer *slices,
                          size_t max_targets, struct plb_lb_targets *out, char *err, size_t errlen);
    void (*targets_clear)(struct plb_lb_targets *t);
    /* A node selector's syntax: 0, or -EINVAL with a message. */
    int (*selector_check)(const char *node_selector, char *err, size_t errlen);
    /* Merge-patch status.loadBalancer.ingress of svc: one entry per IP (borrowed), with ipMode
     * ("VIP", "Proxy"; NULL: none); n == 0 clears it. Unconditional and always sent. Completes
     * as kube->patch. */
    plb_kube_op *(*status_write)(plb_kube *k, const plb_obj *svc, const char *const *ips, size_t n,
                                 const char *ip_mode, plb_kube_done_cb done, void *arg, int *err);
    /* What select_targets reads, as NULL-terminated keep paths (static). */
    const char *const *keep_services;
    const char *const *keep_nodes;
    const char *const *keep_slices;
    /* 3.2: merge-patch status.loadBalancer.ingress of svc to the n entries of v, entry_size
     * bytes apart (sizeof(struct plb_lb_ingress) as the module was built); n == 0 clears it.
     * NULL with *err -EINVAL for an entry with neither or both of ip and hostname, or an
     * ip_mode without an ip. Unconditional and always sent. Completes as kube->patch. */
    plb_kube_op *(*status_write_ingress)(plb_kube *k, const plb_obj *svc,
                                         const struct plb_lb_ingress *v, size_t n,
                                         size_t entry_size, plb_kube_done_cb done, void *arg,
                                         int *err);
};

struct plb_host_links {
    size_t size;
    /* The instance's name; borrowed for its life. [any] */
    const char *(*instance_name)(plb_ctx *ctx);
    /* The string (or path) setting `setting` of the first instance of `module`, borrowed while
     * that instance's config lives; NULL if none. */
    const char *(*instance_setting_str)(plb_ctx *ctx, const char *module, const char *setting);
    /* NULL if value has the format, else why not (valid until the next call). */
    const char *(*check_format)(enum plb_setting_format format, const char *value);
    /* The daemon's version and git revision; borrowed. [any] */
    const char *(*version)(void);
    const char *(*revision)(void);
    /* {"instances": [{"name", "module", "status"}]} of every running instance with a status
     * hook, compact JSON text, new (mem->free). */
    char *(*status_render)(plb_ctx *ctx, size_t *len);
    /* Publish this instance's latest endpoint set under a provider name (copied); linked sinks
     * receive the merged union. 0 or -errno. */
    int (*endpoints_publish)(plb_ctx *ctx, const char *provider, const char *const *endpoints,
                             size_t n);
    /* A provider failed or recovered; a source whose providers all failed is unhealthy (it keeps
     * its last set). */
    void (*endpoints_failed)(plb_ctx *ctx, const char *provider, int failed);
    /* Subscribe to the merged set of the named sources (a PLB_SET_INSTANCES setting); cb runs
     * now if a set exists and on every change. */
    int (*endpoints_subscribe)(plb_ctx *ctx, const struct plb_strv *sources, plb_endpoints_cb cb,
                               void *arg);
    /* For a gate: open or close; done (may be NULL) runs once every gated instance completed its
     * gate_close. 0 or -errno. */
    int (*gate_set)(plb_ctx *ctx, int open, void (*done)(void *arg), void *arg);
    int (*gate_is_open)(plb_ctx *ctx); /* 1 without a gate */
    /* A named liveness or readiness check of this instance. */
    int (*health_register)(plb_ctx *ctx, const char *check, enum plb_health_kind kind);
    void (*health_beat)(plb_ctx *ctx, const char *check); /* liveness: now */
    /* Readiness: state and reason (copied; NULL when ready). */
    void (*health_set)(plb_ctx *ctx, const char *check, int ok, const char *reason);
    void (*health_foreach)(plb_ctx *ctx, plb_health_iter_cb cb, void *arg);
    /* An asynchronous stop or gate_close finished: once per plb_done. */
    void (*done)(plb_done *d);
};

/* --- The root: one pointer per topic table, each always set on a 3.0 daemon. --- */
struct plb_host {
    size_t size; /* sizeof(struct plb_host) as the daemon was built */
    uint32_t abi_major, abi_minor;
    const struct plb_host_log *log;
    const struct plb_host_mem *mem;
    const struct plb_host_loop *loop;
    const struct plb_host_http *http;
    const struct plb_host_kube *kube;
    const struct plb_host_obj *obj;
    const struct plb_host_metrics *metrics;
    const struct plb_host_lb *lb;
    const struct plb_host_links *links;
};

/* 1 when the table (host->kube, or host itself for a table added later) has member: test it
 * before calling a member newer than the minor your module was built for. */
#define PLB_HAS(table, member)                                                                     \
    ((table) != NULL &&                                                                            \
     (size_t)((const char *)&(table)->member - (const char *)(table)) + sizeof((table)->member) <= \
         (table)->size)

/* --- The module descriptor. --- */
/* How a check hook reports a problem: its setting, a printf-style message (FILE:LINE added). */
typedef void plb_check_report(plb_check *chk, const char *setting, const char *fmt, ...)
    PLB_PRINTF(3, 4);

struct plb_module {
    uint32_t abi_major;                 /* PLB_ABI_MAJOR: these three first, in every version */
    uint32_t abi_minor;                 /* PLB_ABI_MINOR */
    size_t size;                        /* sizeof(struct plb_module) */
    const char *name;                   /* "tcp_proxy": what `module = "..."` names */
    const char *version;                /* the module's own version */
    const char *description;            /* one line */
    const struct plb_setting *settings; /* terminated by PLB_SETTINGS_END */
    size_t setting_size;                /* sizeof(struct plb_setting): the stride */
    size_t config_size;                 /* bytes of the config struct */
    uint32_t provides;                  /* PLB_ROLE_* bits */
    /* Check settings against each other after each was parsed; report each problem naming its
     * setting; return their number. May be NULL. Runs for --check-config too: no side effects. */
    int (*check)(const struct plb_host *host, plb_check *chk, const void *config,
                 plb_check_report *report);
    /* Create an instance. config is borrowed until after destroy. Store the state in *state. 0
     * or -errno, with why in err (errlen bytes; "" when the errno says it all). Nothing runs
     * yet: no timers armed, no sockets. */
    int (*create)(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state,
                  char *err, size_t errlen);
    /* Start: listeners, watches, timers. 0 or -errno with why in err. */
    int (*start)(void *state, char *err, size_t errlen);
    /* Stop: close listeners, let drains finish within grace_ms, then links->done(d), maybe
     * before returning. NULL: nothing to wait for. */
    void (*stop)(void *state, int64_t grace_ms, plb_done *d);
    /* Free everything. After stop completed (or if start never ran). */
    void (*destroy)(void *state);
    /* Gated instances: the gate opened; start the write loop. */
    void (*gate_open)(void *state);
    /* The gate closed: stop writing, cancel writes in flight, then links->done(d). Watches and
     * caches keep running. */
    void (*gate_close)(void *state, plb_done *d);
    /* The instance's state for /status: a new JSON object (the daemon takes it) with "kind" and
     * the kind's fields; NULL when out of memory. May be NULL. */
    plb_obj *(*status)(void *state);
};

#ifdef __cplusplus
}
#endif
#endif /* PRISMLB_MODULE_H */
