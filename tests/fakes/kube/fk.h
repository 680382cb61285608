/*
 * prismlb-fake-kube: internal declarations shared by the fake API server's
 * subsystems. Nothing here is a public interface; the command line and the
 * admin API (README.md) are what tests use.
 *
 * Ownership words: "new" = caller owns the returned reference and frees it;
 * "borrowed" = valid until the next store write; "steals" = the callee takes
 * the caller's reference.
 */
#ifndef FK_H
#define FK_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct event_base;
struct event;
struct evhttp;
struct evhttp_request;
struct evhttp_connection;
struct evhttp_bound_socket;
struct evkeyvalq;
struct ssl_ctx_st;

/* ---- kinds (kinds.c) -------------------------------------------------- */

enum fk_kind_flags {
    FK_NAMESPACED = 1 << 0,
    FK_HAS_STATUS = 1 << 1,     /* has a /status subresource */
    FK_CLEAR_STATUS = 1 << 2,   /* create drops the status the client sent */
    FK_DNS_LABEL_NAME = 1 << 3, /* names are DNS-1123 labels, not subdomains */
};

struct fk_kind {
    const char *group; /* "" for the core group */
    const char *version;
    const char *resource; /* plural, as in the URL */
    const char *kind;
    const char *singular;
    const char *short_names; /* comma separated, or NULL */
    const char *categories;  /* comma separated, or NULL */
    const char *schema_name; /* OpenAPI component name */
    int flags;
};

extern const struct fk_kind fk_kinds[];
extern const size_t fk_nkinds;

/* Kind serving resource in group/version, or NULL (all borrowed). */
const struct fk_kind *fk_kind_find(const char *group, const char *version, const char *resource);
/* Index of k in fk_kinds. */
size_t fk_kind_index(const struct fk_kind *k);
/* "v1" or "group/version" into buf (len >= 64). Returns buf. */
const char *fk_kind_api_version(const struct fk_kind *k, char *buf, size_t len);
/* The kind whose store holds k's objects: core/v1 events for
 * events.k8s.io/v1 Event, k itself otherwise (borrowed). */
const struct fk_kind *fk_kind_storage(const struct fk_kind *k);
/* 1 when k is a converted view of another kind's storage. */
int fk_kind_is_view(const struct fk_kind *k);
/* An object of view kind k in storage shape, and back (both new; a
 * reference to obj itself when k is not a view; NULL on ENOMEM). */
json_t *fk_view_to_storage(const struct fk_kind *k, json_t *obj);
json_t *fk_view_from_storage(const struct fk_kind *k, json_t *obj);
/* Whether the group/version pair is served at all. */
int fk_group_version_served(const char *group, const char *version);

/* ---- errors and small JSON helpers (status.c) -------------------------- */

/* A new kind: Status object with status Failure. name/kind (resource) may be
 * NULL; causes is stolen (may be NULL). */
json_t *fk_status_new(int code, const char *reason, const char *message, const char *name,
                      const struct fk_kind *k, json_t *causes);
/* Status for 422 with one cause. New. */
json_t *fk_status_invalid(const struct fk_kind *k, const char *name, const char *field,
                          const char *ctype, const char *detail);
/* String at a dotted path in obj ("metadata.name"), or NULL (borrowed). */
const char *fk_json_path_str(json_t *obj, const char *path);
/* Object at a dotted path, creating intermediate objects. Borrowed, or NULL
 * when a non-object is in the way or on allocation failure. */
json_t *fk_json_path_obj(json_t *obj, const char *path);
/* Current time as RFC 3339 (seconds, UTC) into buf (len >= 32). */
const char *fk_now_rfc3339(char *buf, size_t len);
/* Random RFC 4122 version 4 UUID into buf (len >= 37). */
const char *fk_uuid(char *buf, size_t len);
/* Base64 (standard alphabet, padded) of data. New string or NULL. */
char *fk_base64(const void *data, size_t len);
/* Decode standard base64. New buffer (NUL-terminated) or NULL. */
char *fk_unbase64(const char *s, size_t *out_len);

/* ---- compact JSON output (jsonout.c) -------------------------------------- */

/* A growable byte buffer; err is set (and further adds ignored) when an
 * allocation fails. Free p when done. */
struct fk_buf {
    char *p;
    size_t len, cap;
    int err;
};

void fk_buf_add(struct fk_buf *b, const char *s, size_t n);
/* Append v (borrowed) as compact JSON, the same text as
 * json_dumps(v, JSON_COMPACT). */
void fk_json_write(struct fk_buf *b, json_t *v);

/* ---- store, resourceVersion, history (store.c) -------------------------- */

enum fk_ev_type { FK_ADDED, FK_MODIFIED, FK_DELETED };

struct fk_alloc; /* alloc.c */

struct fk_cluster {
    char *name;             /* "" for the root (no /clusters/ prefix) */
    json_t *objs[16];       /* per kind: JSON object "ns/name" -> object (owned) */
    struct fk_alloc *alloc; /* addresses its Services hold (owned), NULL before the first */
    struct fk_cluster *next;
};

struct fk_event {
    uint64_t rv;
    struct fk_cluster *cl;
    const struct fk_kind *kind;
    int type;    /* enum fk_ev_type */
    json_t *obj; /* state after (for DELETED: last state with the deleting rv) */
    json_t *old; /* state before, NULL for ADDED */
};

typedef void (*fk_event_cb)(const struct fk_event *ev, void *arg);

struct fk_store {
    uint64_t rv;           /* last resourceVersion issued; starts at 1 */
    uint64_t compacted_rv; /* watches from below this get 410 */
    struct fk_cluster *clusters;
    struct fk_event *hist; /* ring */
    size_t hist_cap, hist_len, hist_head;
    fk_event_cb on_event;
    void *on_event_arg;
};

/* Set up an empty store keeping the last `history` events. 0 or -ENOMEM. */
int fk_store_init(struct fk_store *s, size_t history);
/* Free everything the store owns. */
void fk_store_fini(struct fk_store *s);
/* Cluster by name, created (with its default namespaces) on first use.
 * Borrowed; NULL on allocation failure. */
struct fk_cluster *fk_store_cluster(struct fk_store *s, const char *name);
/* Stored object or NULL (borrowed). ns is "" for cluster-scoped kinds. */
json_t *fk_store_get(struct fk_cluster *cl, const struct fk_kind *k, const char *ns,
                     const char *name);
/* Store obj (steals; in the storage shape of k, see fk_view_to_storage) as
 * a create, update or delete of its key, stamping a fresh resourceVersion
 * into it, recording history and notifying watchers.
 * type FK_DELETED removes the key (obj is the final state). 0 or -ENOMEM. */
int fk_store_commit(struct fk_store *s, struct fk_cluster *cl, const struct fk_kind *k, int type,
                    json_t *obj);
/* Drop all history: the oldest watchable resourceVersion becomes the
 * current one. */
void fk_store_compact(struct fk_store *s);
/* The smallest rv a watch may start from (older ones are "too old"). */
uint64_t fk_store_oldest_rv(const struct fk_store *s);
/* Objects of kind in cl as they were at resourceVersion rv (rv 0 = now),
 * as a JSON object key -> object: a new reference the caller must treat as
 * read-only (for the current state it is the live map). NULL with
 * *expired set when rv predates history; NULL on ENOMEM. */
json_t *fk_store_snapshot(struct fk_store *s, struct fk_cluster *cl, const struct fk_kind *k,
                          uint64_t rv, int *expired);
/* Visit history events with rv > after, oldest first. Stops when cb
 * returns nonzero and returns that value. */
int fk_store_replay(struct fk_store *s, uint64_t after,
                    int (*cb)(const struct fk_event *ev, void *arg), void *arg);
/* "ns/name" or "/name" key (len >= 512). */
const char *fk_store_key(const char *ns, const char *name, char *buf, size_t len);

/* ---- selectors (select.c) ---------------------------------------------- */

struct fk_selector; /* parsed label or field selector */

/* Label syntax: a value is empty or <= 63 of [A-Za-z0-9_.-] starting and
 * ending alphanumeric; a key (also an annotation key or a qualified
 * finalizer name) is [DNS-subdomain prefix "/"] name with the value rules
 * but not empty. 1 if valid. */
int fk_label_value_valid(const char *v, size_t len);
int fk_label_key_valid(const char *k, size_t len);
/* Parse a label selector. New, or NULL with a message in err (len >= 256).
 * An empty or NULL string selects everything. */
struct fk_selector *fk_label_selector_parse(const char *s, char *err, size_t errlen);
/* Parse a field selector for kind k (metadata.name, metadata.namespace and
 * the kind's own field labels). New, or NULL with err. */
struct fk_selector *fk_field_selector_parse(const char *s, const struct fk_kind *k, char *err,
                                            size_t errlen);
/* 1 if obj (borrowed) matches; a NULL selector matches everything. */
int fk_selector_match(const struct fk_selector *sel, json_t *obj);
/* 1 if the selector has no requirements. */
int fk_selector_empty(const struct fk_selector *sel);
void fk_selector_free(struct fk_selector *sel);

/* ---- patches (patch.c) -------------------------------------------------- */

/* RFC 7386 merge patch of target by patch. New result, or NULL on ENOMEM. */
json_t *fk_merge_patch(json_t *target, json_t *patch);
/* RFC 6902 JSON patch. New result, or NULL with err and *code (400 for a
 * malformed patch, 422 when it does not apply). */
json_t *fk_json_patch(json_t *target, json_t *ops, int *code, char *err, size_t errlen);
/* Strategic merge patch for kind k (merge keys of the built-in types).
 * New result, or NULL with err set. */
json_t *fk_strategic_patch(json_t *target, json_t *patch, const struct fk_kind *k, char *err,
                           size_t errlen);

/* ---- Service addresses (alloc.c) ------------------------------------------ */

#define FK_NODEPORT_MIN 30000
#define FK_NODEPORT_MAX 32767

/* Before storing an object of kind k in cl: make room for the address
 * accounting (Services only). 0 or -ENOMEM. */
int fk_alloc_prepare(struct fk_cluster *cl, const struct fk_kind *k);
/* After a store change of kind k in cl: old (the state before, NULL on
 * create) no longer holds its ClusterIP and node ports, obj (the state
 * after, NULL on delete) does. Both borrowed. */
void fk_alloc_track(struct fk_cluster *cl, const struct fk_kind *k, json_t *old, json_t *obj);
/* The lowest free ClusterIP from 10.96.0.10 on (new string) or NULL when
 * the range is exhausted or on ENOMEM. Cost independent of the number of
 * Services. */
json_t *fk_alloc_cluster_ip(struct fk_cluster *cl);
/* used[p - FK_NODEPORT_MIN] = 1 for every node port a stored Service other
 * than self (the stored state of the Service being written, borrowed, NULL
 * on create) holds; used has FK_NODEPORT_MAX - FK_NODEPORT_MIN + 1 bytes. */
void fk_alloc_node_ports(struct fk_cluster *cl, json_t *self, unsigned char *used);
/* Free cl's accounting (cluster teardown). */
void fk_alloc_free(struct fk_cluster *cl);

/* ---- defaulting and validation (defaults.c) ----------------------------- */

/* Fill server defaults into obj (borrowed, modified in place); old is the
 * stored object on update (NULL on create). Allocates node ports from the
 * other Services in cl. Returns NULL or a new 422/500 Status. */
json_t *fk_default_and_validate(struct fk_cluster *cl, const struct fk_kind *k, json_t *obj,
                                json_t *old);
/* Name validation per kind: NULL or a message (static). */
const char *fk_validate_name(const struct fk_kind *k, const char *name);

/* ---- OpenAPI schemas (schema.c) and validation rules (rules.c) --------- */

/* Load the definitions document schema/extract.mjs writes (schemas.json),
 * replacing any loaded before. 0, or -1 with a message in err. */
int fk_schema_load(const char *path, char *err, size_t errlen);
/* Free the loaded document. */
void fk_schema_unload(void);

/* What fk_schema_check found in a body. */
struct fk_schema_result {
    char decode[1024]; /* the first decoding error ("" when none): a 400 */
    json_t *causes;    /* array of 422 causes {reason, message, field} (owned) */
    json_t *unknown;   /* array of "unknown field \"path\"" strings (owned) */
    int oom;
};

/* Check obj (borrowed) of kind k against its schema: decoding errors,
 * required fields and enums into res (which the caller finishes with
 * fk_schema_result_fini). Unknown fields are listed and, unless strict,
 * removed from obj. Without a loaded document nothing is checked.
 * 0, or -1 on ENOMEM (res then holds nothing). */
int fk_schema_check(const struct fk_kind *k, json_t *obj, int strict, struct fk_schema_result *res);
void fk_schema_result_fini(struct fk_schema_result *res);
/* A 422 Invalid Status for causes (stolen; an array of at least one cause),
 * its message as kube-apiserver joins them. New, or NULL on ENOMEM. */
json_t *fk_status_invalid_causes(const struct fk_kind *k, const char *name, json_t *causes);

/* Before validating a main (not /status) write of obj (borrowed, modified):
 * a Service whose type is not LoadBalancer loses status.loadBalancer, as the
 * Service strategy drops it. 0 or -1 on ENOMEM. */
int fk_rules_prepare(const struct fk_kind *k, json_t *obj, int status_write);
/* Append to causes (borrowed array) a cause per validation rule obj breaks
 * (rules.c lists them); old is the stored object on update, NULL on create
 * (both borrowed, in the shape of k). 0 or -1 on ENOMEM. */
int fk_rules_check(const struct fk_kind *k, json_t *obj, json_t *old, json_t *causes);

/* ---- the application (server.c, main.c) ---------------------------------- */

#define FK_MAX_SERVERS 8

struct fk_app;

struct fk_server {
    struct fk_app *app;
    int index;
    int port;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    int stopped;       /* listener and connections closed */
    int not_accepting; /* listener disabled */
    int quorum_lost;   /* /readyz 500, storage requests 500 */
};

struct fk_faults {
    int fail_count; /* fail the next N API requests */
    int fail_status;
    char fail_match[256];        /* substring of path?query, "" = any */
    char fail_method[16];        /* "" = any */
    char fail_body[4096];        /* "" = a Status; else this body, as is */
    char fail_content_type[128]; /* of fail_body ("" = application/json) */
    int latency_ms;
    char latency_match[256];
    int watch_close_events; /* close each watch after N events (0 = off) */
    int watch_close_ms;     /* close each watch after T ms (0 = off) */
    int watch_close_drop;   /* 1 = drop the TCP connection, 0 = end cleanly */
    int watch_gone_next;    /* answer the next N watches with a 410 ERROR */
    char hold_match[256];   /* hold matching API requests until POST /release ("" = off) */
    char hold_method[16];   /* "" = any */
};

struct fk_held; /* a request whose reply is pending (watch, delay) */
struct delayed; /* a request held back by a fault (server.c) */
struct fk_watch;

struct fk_app {
    struct event_base *base;
    struct fk_store store;
    struct fk_server servers[FK_MAX_SERVERS];
    int nservers;
    struct ssl_ctx_st *ssl; /* NULL = plain HTTP */
    json_t *tokens;         /* array of accepted bearer tokens */
    json_t *ro_tokens;      /* tokens whose writes get 403 */
    struct evhttp *admin;
    int admin_port;
    struct fk_faults faults;
    json_t *reqlog; /* array */
    size_t reqlog_max;
    int reqlog_fd;           /* $PRISMLB_KUBE_REQUEST_LOG_DIR file, or -1 */
    int writelog_fd;         /* the same directory's write-body file, or -1 */
    json_t *parent_args;     /* the starting program's arguments, for that file (owned) */
    struct fk_held *held;    /* list */
    struct delayed *holding; /* requests held by hold_match, oldest first */
    size_t nholding;
    int bookmark_ms;
    int verbose;
};

/* Start server i on 127.0.0.1:port (0 = ephemeral). 0 or negative errno. */
int fk_server_start(struct fk_app *app, int i, int port);
/* Answer every request held by the hold_match fault, in arrival order.
 * Returns how many. */
size_t fk_release_held(struct fk_app *app);
/* Close server i: its listener and every connection (watches end). */
void fk_server_stop(struct fk_app *app, int i);
/* Enable or disable accept() on server i. */
void fk_server_accepting(struct fk_app *app, int i, int on);
/* Abort the connection of every held request (watches, delayed replies)
 * of server i, or of all servers when i < 0. */
void fk_server_close_held(struct fk_app *app, int i, int drop);

/* Per-request context handed to the API handlers. */
struct fk_rq {
    struct fk_app *app;
    struct fk_server *srv;
    struct evhttp_request *req;
    int method; /* EVHTTP_REQ_* */
    const char *method_name;
    char *path;              /* decoded path without the /clusters/x prefix (owned) */
    char *cluster;           /* owned */
    struct evkeyvalq *query; /* owned */
    char user[256];
    int readonly;
    json_t *log;  /* borrowed entry in app->reqlog, may be NULL */
    json_t *wlog; /* the write-log entry written with the answer (owned), or NULL */
};

/* Free a request context (not the evhttp request it wraps). */
void fk_rq_free(struct fk_rq *rq);
/* Query parameter or NULL (borrowed). */
const char *fk_rq_param(struct fk_rq *rq, const char *name);
/* A boolean query parameter as the apiserver parses it (Go's ParseBool:
 * 1 t T TRUE true True); 0 when absent or false. */
int fk_rq_param_bool(struct fk_rq *rq, const char *name);
/* Request body as a NUL-terminated string (new) or NULL when empty. */
char *fk_rq_body(struct fk_rq *rq, size_t *len);
/* Send a JSON reply (steals body) with status code; ends the request. */
void fk_reply_json(struct fk_rq *rq, int code, json_t *body);
/* Send a Status reply (steals st), code from st.code. */
void fk_reply_status(struct fk_rq *rq, json_t *st);
/* Answer code with body (borrowed) as is, Content-Type ctype. Frees rq. */
void fk_reply_raw(struct fk_rq *rq, int code, const char *ctype, const char *body);

/* Hold the request: the connection's close callback will call on_close(arg)
 * after the client goes away. Returns the handle or NULL on ENOMEM. */
struct fk_held *fk_hold(struct fk_rq *rq, void (*on_close)(void *arg, int dropped), void *arg);
/* Release a hold after the reply has ended (or before freeing the request). */
void fk_unhold(struct fk_app *app, struct fk_held *h);
/* Abort the TCP connection of a held request (on_close is called). */
void fk_held_drop(struct fk_app *app, struct fk_held *h);

/* ---- API handlers (route.c, api.c, delete.c, list.c, watch.c, discovery.c) -- */

/* What a resource path names. ns is "" when none; name NULL for the
 * collection (all borrowed, valid during the request). */
struct fk_target {
    struct fk_cluster *cl;
    const struct fk_kind *k;
    const char *ns;
    const char *name;
    int status; /* the /status subresource */
};

/* New Status objects for the common errors. */
json_t *fk_err_not_found(const struct fk_kind *k, const char *name);
json_t *fk_err_conflict(const struct fk_kind *k, const char *name, const char *why);
json_t *fk_err_bad_request(const char *msg);
/* Decode a body of Content-Type application/vnd.kubernetes.protobuf (the
 * magic "k8s\0" and a runtime.Unknown) into the JSON object of its kind:
 * Namespace only (proto.c). New object, or NULL with *err (new Status: 415
 * for another kind, 400 for a body that does not decode). */
json_t *fk_proto_to_json(const unsigned char *body, size_t len, json_t **err);
/* 1 when the request asks for dryRun=All. */
int fk_dry_run(struct fk_rq *rq);
/* The verbs. Each replies and frees rq. */
void fk_do_create(struct fk_rq *rq, struct fk_target *t);
void fk_do_get(struct fk_rq *rq, struct fk_target *t);
void fk_do_update(struct fk_rq *rq, struct fk_target *t);
void fk_do_patch(struct fk_rq *rq, struct fk_target *t);
void fk_do_delete(struct fk_rq *rq, struct fk_target *t);
void fk_do_delete_collection(struct fk_rq *rq, struct fk_target *t);

/* Route and serve one Kubernetes API request (auth already done). */
void fk_api_dispatch(struct fk_rq *rq);
/* GET on a collection without watch: list. */
void fk_list(struct fk_rq *rq, struct fk_cluster *cl, const struct fk_kind *k, const char *ns);
/* GET on a collection with watch=true. */
void fk_watch_start(struct fk_rq *rq, struct fk_cluster *cl, const struct fk_kind *k,
                    const char *ns, const char *name);
/* Store event hook: deliver ev to matching watches. */
void fk_watch_on_event(const struct fk_event *ev, void *arg);
/* Number of open watches. */
size_t fk_watch_count(void);
/* Close all watches now (drop = abort the connection). */
void fk_watch_close_all(struct fk_app *app, int drop);
/* Free all watch state (shutdown). */
void fk_watch_shutdown(struct fk_app *app);
/* Serve discovery and OpenAPI paths; returns 1 if the path was one of them. */
int fk_discovery_serve(struct fk_rq *rq);
/* Admin bulk write described by body (borrowed, see README): new result
 * object, or NULL with err. */
json_t *fk_admin_bulk(struct fk_app *app, json_t *body, char *err, size_t errlen);
/* Serve the admin API request. */
void fk_admin_handle(struct evhttp_request *req, void *arg);

/* ---- TLS (tls.c) -------------------------------------------------------- */

/* Generate a CA, a serving certificate and a client certificate into dir
 * (ca.crt ca.key server.crt server.key client.crt client.key). 0 or -1. */
int fk_tls_generate(const char *dir);
/* A server SSL_CTX from PEM files; client certificates signed by ca_file
 * are requested and verified when presented. New, or NULL. */
struct ssl_ctx_st *fk_tls_server_ctx(const char *cert_file, const char *key_file,
                                     const char *ca_file);
/* Install the TLS bufferevent factory on http. */
void fk_tls_attach(struct evhttp *http, struct ssl_ctx_st *ctx);
/* Identity of the verified client certificate on req's connection:
 * CN into user (len), 1 if found, 0 if none. */
int fk_tls_peer_user(struct evhttp_request *req, char *user, size_t len);

#endif
