/*
 * kube-internal: the core's Kubernetes client (internal declarations).
 *
 * Pure parts (no I/O, no loop), each in its own file and unit tested:
 *   yaml.c       kubeconfig YAML through libyaml, into jansson;
 *   kubeconfig.c kubeconfig and in-cluster configuration, URL building;
 *   backoff.c    the reconnect state machine of the spec, clock injected;
 *   cache.c      the informer cache and the diff after a re-list;
 *   evkey.c      Event aggregation keys and bodies (client-go's recorder).
 * Loop parts, callers above what they call (no file calls back up):
 *   kclient.c    the client (configuration, free) and the verbs: get,
 *                writes, read-modify-write;
 *   informer.c   list + watch informers;
 *   events.c     the Event recorder;
 *   kreq.c       operations and their HTTP requests, driven through a
 *                per-kind table (struct core_kube_kind); the leaf that
 *                kclient.c, events.c and informer.c call;
 *   obj.c        plb_obj accessors (plb_obj is a jansson value).
 *
 * Prefix: core_kube_ for functions shared between these files. Ownership
 * words as in prismlb/module.h: new, borrowed, steals.
 */
#ifndef PRISMLB_KUBE_INTERNAL_H
#define PRISMLB_KUBE_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "prismlb/module.h"

struct core_httpc;
struct event_base;

/* plb_obj is a jansson value; these convert without copying. */
#define KOBJ(j) ((plb_obj *)(j))
#define KJSON(o) ((json_t *)(o))

/* ------------------------------------------------------------------------ */
/* yaml.c                                                                    */

/* Parse text (len bytes, need not be NUL-terminated), one YAML document
 * (libyaml: anchors, aliases, merge keys, block and flow scalars and
 * collections, tags !!str/!!int/!!bool/!!null), into a new jansson value.
 * Plain scalars true/false (three spellings), null/~/empty and integers
 * (decimal, 0x, 0o) become JSON booleans, null and integers; every other
 * scalar is a string; a mapping key is the text of its scalar. Text whose
 * first significant character is '{' or '[' is read as JSON first. Nesting
 * deeper than 64, aliases expanding to more than 100,000 values in total,
 * duplicate keys, complex keys and several documents are errors. NULL with
 * "line N: what" in err (errlen >= 1). */
json_t *core_kube_yaml_parse(const char *text, size_t len, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* jparse.c                                                                  */

/* Parse len bytes of JSON text (one value; need not be NUL-terminated) into
 * a new jansson value: the value json_loadb(text, len, JSON_DECODE_ANY)
 * would return, faster. NULL on invalid JSON or ENOMEM. */
json_t *core_kube_json_parse(const char *text, size_t len);

/* ------------------------------------------------------------------------ */
/* kubeconfig.c                                                              */

/* A resolved client configuration: where the API is and how to prove who
 * we are. Every string is new (core_kube_config_clear frees them). */
struct core_kube_config {
    char *server;               /* "https://host:port[/prefix]", no trailing '/' */
    char *ca_file;              /* CA bundle path, or NULL */
    char *ca_pem;               /* or PEM text */
    char *cert_file, *key_file; /* client certificate and key paths */
    char *cert_pem, *key_pem;   /* or PEM text */
    char *token;                /* bearer token, or NULL */
    char *token_file;           /* or a file re-read on every request */
    char *tls_server_name;      /* verify the server as this name, or NULL */
    char *connect_to;           /* "host:port" to connect to instead, or NULL */
    char *ns;                   /* the context's namespace, or NULL */
    int insecure;               /* insecure-skip-tls-verify: true was written */
};

void core_kube_config_clear(struct core_kube_config *c);

/* Fill c from a parsed kubeconfig doc (borrowed): the context named ctx_name
 * or, when NULL, current-context. Relative file paths resolve against dir
 * (the kubeconfig's directory; NULL keeps them as written). *-data fields
 * are base64-decoded into PEM text. exec and auth-provider plugins and
 * basic auth are not supported: an error. 0, or -EINVAL with a message
 * naming the field in err; -ENOMEM. */
int core_kube_config_from_doc(struct core_kube_config *c, json_t *doc, const char *ctx_name,
                              const char *dir, char *err, size_t errlen);

/* Read and parse the kubeconfig at path into c (see above). Blocking file
 * read: call at create or start, not from a hot callback. 0 or -errno with
 * err set. */
int core_kube_config_load(struct core_kube_config *c, const char *path, const char *ctx_name,
                          char *err, size_t errlen);

/* In-cluster configuration: host and port from host/port (the values of
 * KUBERNETES_SERVICE_HOST and _PORT; an IPv6 host gets brackets), token
 * file and CA under sa_dir (the token file is named, not read, so it is
 * re-read on every request). 0 or -EINVAL (host or port missing), -ENOMEM. */
int core_kube_config_in_cluster(struct core_kube_config *c, const char *host, const char *port,
                                const char *sa_dir, char *err, size_t errlen);

/* Base64 (standard or URL alphabet, padding optional, whitespace skipped)
 * into a new NUL-terminated buffer; *out_len gets the length. NULL on bad
 * input or ENOMEM. */
char *core_kube_b64decode(const char *s, size_t *out_len);

/* Join server (may carry a path prefix, with or without a trailing '/') and
 * path (starting with '/'): exactly one '/' between them, nothing dropped.
 * New string or NULL. */
char *core_kube_url_join(const char *server, const char *path);

/* The API path of a resource: "/api/v1" or "/apis/<group>/<version>", then
 * "/namespaces/<ns>" when ns is non-empty, "/<resource>", "/<name>" and
 * "/<subresource>" when given. Segments are percent-encoded. New or NULL
 * (also for a NULL api_version or resource). */
char *core_kube_path(const char *api_version, const char *resource, const char *ns,
                     const char *name, const char *subresource);

/* Percent-encode s for a query value (unreserved characters kept). Appends
 * to *buf (a new string grown with core_realloc). 0 or -ENOMEM. */
int core_kube_qappend(char **buf, const char *key, const char *value);

/* ------------------------------------------------------------------------ */
/* backoff.c: the reconnect rules of the spec as a pure state machine.       */

#define KB_INITIAL_MS 1000
#define KB_MAX_MS 30000
#define KB_LONG_WATCH_MS 30000
#define KB_JITTER 0.25

/* What happened. */
enum kb_input {
    KB_LIST_OK = 1,  /* a list (initial or re-list) completed */
    KB_LIST_FAILED,  /* a list failed (not a 410 on a continue: that is
                        retried unpaged by the informer without asking) */
    KB_WATCH_CLOSED, /* the watch stream ended without an error */
    KB_WATCH_ERROR,  /* the watch call failed, an ERROR event (not 410),
                        or the stream broke */
    KB_WATCH_GONE,   /* 410: HTTP status or ERROR event Expired/Gone */
};

/* What to do next, after delay_ms (0: at once). */
enum kb_action {
    KB_DO_LIST = 1,
    KB_DO_WATCH,
};

struct kb_step {
    enum kb_action action;
    int64_t delay_ms; /* jitter included */
    int64_t base_ms;  /* the backoff step before jitter (0 when at once) */
};

struct kb_machine {
    int64_t next_ms;        /* the next backoff delay, before jitter */
    int64_t watch_started;  /* clock when the running watch was opened */
    int rewatch_after_long; /* the running watch re-opened at once after a
                               watch of >= 30 s closed without error */
    int gone_fast;          /* a 410 qualifies the watch after the re-list to
                               start at once */
    int relisting;          /* the running list follows a 410 */
};

/* A machine at rest: the first action is a list, at once. */
void kb_init(struct kb_machine *m);
/* A watch starts now (clock now_ms): record the time. */
void kb_watch_started(struct kb_machine *m, int64_t now_ms);
/* Feed an input at now_ms with rnd in [0, 1) for the jitter; returns the
 * next action and its delay. Pure apart from *m. */
struct kb_step kb_next(struct kb_machine *m, enum kb_input in, int64_t now_ms, double rnd);

/* ------------------------------------------------------------------------ */
/* cache.c: the informer cache.                                              */

/* "namespace/name" or "name" of obj (borrowed) into buf. 0, or -EINVAL when
 * metadata.name is missing or the key would not fit. */
int core_kube_obj_key(json_t *obj, char *buf, size_t len);
/* metadata.resourceVersion of obj, or "" (borrowed). */
const char *core_kube_obj_rv(json_t *obj);

/* Drop what a cached object does without: metadata.managedFields (often
 * larger than the rest and of no use to a module; client-go informers are
 * commonly given the same transform). obj is modified in place. */
void core_kube_obj_trim(json_t *obj);

/* The tree of the paths keep names (a plb_informer_opts.keep, borrowed)
 * and of the identity every trimmed object keeps, as *out (new; NULL when
 * keep is NULL: objects are kept whole). 0, -EINVAL (a bad path) or
 * -ENOMEM. */
int core_kube_keep_new(const char *const *keep, json_t **out);
/* What tree (from core_kube_keep_new, borrowed) keeps of obj (borrowed): a
 * new value holding obj's kept members; a new reference to obj itself when
 * tree is NULL. With a pool (a JSON object, compact text -> value; may be
 * NULL) a kept value other than the object's identity (its root, its
 * metadata object and the strings in it) whose text is at most 1 KiB is
 * the one the pool holds when the pool holds an equal one, else is added
 * to the pool: equal values of all the cached objects are held once (the
 * ports of most Services, the conditions of most endpoints). Cached values
 * are never modified, so sharing them is safe. NULL when out of memory. */
json_t *core_kube_keep_apply(json_t *tree, json_t *obj, json_t *pool);
/* Drop the values of pool (borrowed) that only the pool still holds, once
 * it has grown to twice its size after the last sweep (*mark) plus 1024:
 * amortized O(1) per value added. */
void core_kube_pool_sweep(json_t *pool, size_t *mark);
/* 1 when objects a and b (borrowed) are equal but for their
 * metadata.resourceVersion, kind and apiVersion (which list items lack),
 * else 0. */
int core_kube_same_but_rv(json_t *a, json_t *b);

/* A change found by core_kube_diff. old and obj are borrowed for the call. */
typedef void (*core_kube_diff_cb)(const char *key, json_t *old, json_t *obj, void *arg);

/* Replace the contents of cache (a JSON object key -> object) by fresh (the
 * same shape, borrowed) and report differences: added (old NULL), changed
 * resourceVersion (both), vanished (obj NULL). Unchanged objects keep the
 * cached reference and report nothing. Calls happen after cache was
 * updated for that key. Returns the number of changes or -ENOMEM (cache is
 * then partly updated, every reported change applied). */
int core_kube_diff(json_t *cache, json_t *fresh, core_kube_diff_cb cb, void *arg);

/* ------------------------------------------------------------------------ */
/* evkey.c: Event aggregation (client-go tools/record).                      */

struct core_kube_evsrc {
    const char *component; /* source.component */
    const char *host;      /* source.host, may be NULL */
};

/* The aggregation key of an Event about involved (borrowed; its kind and
 * apiVersion may be overridden by kind/api_version when the object lacks
 * them, as list items do): component, host, kind, namespace, name, uid,
 * apiVersion, type, reason, message joined with '\x1f'. New or NULL. */
char *core_kube_event_key(const struct core_kube_evsrc *src, json_t *involved, const char *kind,
                          const char *api_version, const char *type, const char *reason,
                          const char *message);

/* A new core/v1 Event body about involved: name "<object name>.<hex of
 * wall_ns>" (as client-go names them), namespace of the object (or
 * "default"), involvedObject reference (kind, namespace, name, uid,
 * apiVersion, resourceVersion), reason, message, type, source, count 1,
 * firstTimestamp = lastTimestamp (RFC 3339 of wall_ns), reportingComponent
 * and reportingInstance. New or NULL (ENOMEM, or involved has no name). */
json_t *core_kube_event_body(const struct core_kube_evsrc *src, json_t *involved, const char *kind,
                             const char *api_version, const char *type, const char *reason,
                             const char *message, int64_t wall_ns);

/* The field selector that narrows a namespace's Events to those about
 * involved (kind and api_version as for core_kube_event_key) of this
 * type (NULL: Normal), reason and source component, as the apiserver
 * reads them: "involvedObject.name=N,involvedObject.uid=U,
 * involvedObject.kind=K,reason=R,type=T,source=C" (terms with an empty
 * value left out; '\', ',' and '=' in a value escaped with '\'). New, or
 * NULL (ENOMEM, involved has no name, or longer than 2 KiB). */
char *core_kube_event_selector(const struct core_kube_evsrc *src, json_t *involved,
                               const char *kind, const char *api_version, const char *type,
                               const char *reason);

/* The aggregation key (see core_kube_event_key) of a core/v1 Event as the
 * API returns it (borrowed): its source, involvedObject, type, reason and
 * message. New, or NULL (ENOMEM, no involvedObject). */
char *core_kube_event_item_key(json_t *ev);

/* RFC 3339 UTC seconds ("2026-11-29T14:00:00Z") for wall_ns into buf
 * (len >= 32). Returns buf. */
const char *core_kube_rfc3339(int64_t wall_ns, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* kreq.c: operations and their requests (the leaf the loop files share).   */

struct core_http_fence;

/* What one kind of operation does at each step. kclient.c defines the
 * plain verbs and read-modify-write, events.c the Event recorder; kreq.c
 * calls these and knows nothing else about the kinds. */
struct core_kube_kind {
    const char *name; /* "get", "write", "modify", "event" */
    int write;        /* refused (-EPERM) while the client's fence is closed */
    /* A response arrived for op (no transport error): send again
     * (core_kube_op_send) or finish (core_kube_op_finish). obj is the
     * parsed body (borrowed) or NULL. NULL: finish with the response. */
    void (*response)(plb_kube_op *op, int status, json_t *obj, const char *reason,
                     const char *message);
    /* op's request ended without an answer (error, not PLB_HTTP_OK): take
     * it over (send another request, or finish op) and return 1, or return
     * 0 to finish op with the error. May be NULL (finish). */
    int (*unanswered)(plb_kube_op *op, enum plb_http_error error);
    /* op leaves (finishes or is cancelled), before its done runs: take it
     * off the kind's queues. May be NULL. */
    void (*leave)(plb_kube_op *op);
    /* After op left and was freed: start what waited for it. May be NULL. */
    void (*resume)(plb_kube *k);
    /* Free what the kind keeps in op (events.c: ev_key, ev_cont, ev_body,
     * ev_found), just before op itself is freed. May be NULL. */
    void (*release)(plb_kube_op *op);
};

struct plb_kube_op {
    plb_kube *k;
    const struct core_kube_kind *kind;
    int phase;  /* the kind's step (modify: 0 read, 1 write; event: see events.c) */
    char *path; /* the object's (or collection's) API path (owned) */
    char *body; /* request body (owned) or NULL */
    const char *method, *ctype;
    plb_kube_mutate_cb mutate;
    int attempts;      /* modify: writes left */
    plb_http_req *req; /* in flight, or NULL */
    plb_kube_done_cb done;
    void *arg;
    int in_done;
    int in_flight_at_close; /* its last request was sent when the fence closed */
    /* events.c's (released by its kind) */
    char *ev_key;                    /* aggregation key (owned) */
    json_t *ev_body;                 /* the Event to create (owned) */
    int64_t ev_ns;                   /* wall clock of the record, ns */
    char *ev_cont;                   /* the lookup's continue token (owned) */
    int ev_pages;                    /* lookup pages read */
    json_t *ev_found;                /* the lookup's best match {name,
                                        namespace, count, last} (owned) */
    struct plb_kube_op *qnext;       /* k->evq */
    struct plb_kube_op *prev, *next; /* k->ops */
};

struct plb_kube {
    struct core_httpc *httpc;
    struct event_base *base;
    plb_ctx *ctx;
    struct core_http_fence *fence; /* the instance's, or NULL (borrowed) */
    struct core_kube_config cfg;
    char *ua_header; /* "User-Agent: ..." */
    char *ns;        /* default namespace */
    uint32_t timeout_ms;
    int insecure;
    struct plb_kube_op *ops;            /* started or queued */
    struct plb_kube_op *evq, *evq_tail; /* events.c: Event writes, head running */
    json_t *ev_cur, *ev_old;            /* events.c: aggregation cache, two generations */
    struct plb_informer *informers;
    int depth;                    /* done callbacks on the stack */
    int dying;                    /* kube_free ran inside one: free when it returns */
    void (*destroy)(plb_kube *k); /* kclient.c's core_kube_free, for that */
};

/* Start an HTTP request to path (joined to the server) with the client's
 * TLS and credentials; a method other than GET goes through the client's
 * fence (-EPERM while it is closed). ctype: request body type or NULL.
 * timeout_ms 0: the client's. New request (see core_http_request) or NULL
 * with *err. */
plb_http_req *core_kube_http(plb_kube *k, const char *method, const char *path, const char *ctype,
                             const char *body, enum plb_http_body_mode mode, uint32_t timeout_ms,
                             plb_http_data_cb on_data, plb_http_done_cb done, void *arg, int *err);

/* Parse a response body: the JSON value (new) or NULL, and from a Status
 * its reason and message (borrowed from the value). */
json_t *core_kube_parse_body(const char *body, size_t len, const char **reason,
                             const char **message);

/* What an answer says: its HTTP status and, after a transport error (the
 * return value), that error's text in *message and *obj NULL; else the
 * parsed body in *obj (new, or NULL when not JSON) with a Status's reason
 * and message (borrowed from it, "" when none). */
enum plb_http_error core_kube_answer(const plb_http_resp *resp, int *status, json_t **obj,
                                     const char **reason, const char **message);

/* A new operation of kind on k, linked into k->ops, nothing sent yet.
 * NULL with *err = -EPERM (a write kind while k's fence is closed) or
 * -ENOMEM. */
plb_kube_op *core_kube_op_new(plb_kube *k, const struct core_kube_kind *kind, plb_kube_done_cb done,
                              void *arg, int *err);
/* Send op->method to op->path with op->body (op->ctype). 0 or -errno
 * (-EPERM: fenced); op is left to the caller. */
int core_kube_op_send(plb_kube_op *op);
/* Finish op with a result (calls done unless cancelled, unlinks, frees). */
void core_kube_op_finish(plb_kube_op *op, int status, enum plb_http_error error, const char *reason,
                         const char *message, json_t *obj);
/* Finish op after a local failure rc of core_kube_op_send: -EPERM reports
 * PLB_HTTP_E_FENCED, anything else PLB_HTTP_E_LOCAL. */
void core_kube_op_fail(plb_kube_op *op, int rc);
/* Unlink and free op without calling done. */
void core_kube_op_free(plb_kube_op *op);

/* events.c: the aggregation cache (core_kube_new, core_kube_free). 0 or
 * -ENOMEM. */
int core_kube_events_init(plb_kube *k);
void core_kube_events_fini(plb_kube *k);

/* informer.c: free every informer of k (kube_free). */
void core_kube_informers_free(plb_kube *k);

#endif
