/*
 * Fake Hetzner Cloud API: shared declarations.
 *
 * The fake is one process, one libevent loop, one in-memory store. Every
 * file here covers one subsystem:
 *
 *   main.c        command line, event loop, signals, listening socket
 *   http.c        request dispatch: auth, rate limit, faults, routing, log
 *   util.c        JSON replies, errors, time, IP helpers, pagination
 *   selector.c    label selector parser and label validation (pure)
 *   store.c       objects (types, locations, networks, balancers), rendering
 *   lb_checks.c   validation of targets, services, network attachment
 *   seed.c        start-up seeding from a JSON file
 *   lb_api.c      /load_balancers collection and item endpoints
 *   lb_actions.c  /load_balancers/{id}/actions/<x> endpoints
 *   actions.c     asynchronous actions, locks, /actions endpoints
 *   cert_pem.c    certificate PEM parsing, checking and issuing (OpenSSL)
 *   cert_api.c    /certificates endpoints, managed issuance
 *   ratelimit.c   per-token buckets
 *   admin.c       /_admin: request log, writer detector, faults, state
 *
 * Ownership words follow jansson: "new" (caller frees / decrefs),
 * "borrowed", "steals".
 */
#ifndef HZ_FAKE_H
#define HZ_FAKE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "selector.h"

/* ---- configuration (main.c) ---------------------------------------- */

struct hz_config {
    const char *listen;    /* "127.0.0.1:0" */
    const char *port_file; /* may be NULL */
    const char *seed;      /* may be NULL */
    int action_ms;         /* duration of every action */
    double rate_bucket;    /* bucket size per token */
    double rate_refill;    /* tokens per second */
    int max_lbs;           /* project limit on balancers; <0 = unlimited */
    int overlap_ms;        /* concurrent-writer window */
    int detached;          /* keep running when the parent process exits */
};

/* ---- static catalogue (store.c) ------------------------------------ */

struct hz_lb_type {
    int id;
    const char *name;
    const char *description;
    int max_connections;
    int max_services;
    int max_targets;
    int max_certificates;
    const char *price_hourly;
    const char *price_monthly;
};

struct hz_location {
    int id;
    const char *name;
    const char *description;
    const char *country;
    const char *city;
    double latitude;
    double longitude;
    const char *network_zone;
};

/* ---- objects (store.c) --------------------------------------------- */

struct hz_network {
    int id;
    char *name;
    char *ip_range;   /* "10.0.0.0/8" */
    json_t *subnets;  /* array of {type, ip_range, network_zone, gateway, vswitch_id?} */
    json_t *labels;   /* object */
    json_t *reserved; /* array of IP strings taken by other resources */
    int protect_delete;
    time_t created;
};

struct hz_lb {
    int id;
    char *name;
    const struct hz_lb_type *type;
    const struct hz_location *location;
    json_t *labels;        /* object, replaced whole on PUT */
    json_t *targets;       /* array of stored targets (no health_status) */
    json_t *services;      /* array of services in schema shape */
    json_t *private_net;   /* array of {network, ip} */
    int least_connections; /* algorithm: 1 least_connections, 0 round_robin */
    int public_enabled;
    int protect_delete;
    char ipv4[16];
    char ipv6[48];
    char *dns_ptr4; /* NULL = default */
    char *dns_ptr6;
    time_t created;
    int running_action; /* id of the action holding the lock, 0 = none */
    char *cache;        /* rendered JSON, NULL when stale (hz_lb_touch) */
};

/* ---- certificates (cert_api.c, cert_pem.c) -------------------------- */

enum hz_issuance { HZ_ISSUE_NONE, HZ_ISSUE_PENDING, HZ_ISSUE_COMPLETED, HZ_ISSUE_FAILED };

/* What a certificate's PEM says about it (cert_pem.c). */
struct hz_cert_info {
    json_t *domains; /* array of DNS names (new, caller decrefs) */
    time_t not_before;
    time_t not_after;
    char fingerprint[100]; /* SHA-256 of the DER, "aa:bb:..." */
};

struct hz_cert {
    int id;
    char *name;
    int managed;     /* type managed (1) or uploaded (0) */
    json_t *labels;  /* object, replaced whole on PUT */
    json_t *domains; /* array of domain names */
    char *pem;       /* certificate chain; NULL while a managed one is not issued */
    char fingerprint[100];
    time_t created;
    time_t not_before; /* 0 while not issued */
    time_t not_after;
    enum hz_issuance issuance; /* HZ_ISSUE_NONE for uploaded certificates */
    char *error_code;          /* set while issuance is failed */
    char *error_message;
    int running_action; /* id of the issuance action running, 0 = none */
};

/* ---- actions (actions.c) ------------------------------------------- */

/* The kind of resource an action works on, and the filter of the lists. */
enum hz_res { HZ_RES_ANY, HZ_RES_LB, HZ_RES_CERT };

enum hz_action_status { HZ_ACTION_RUNNING, HZ_ACTION_SUCCESS, HZ_ACTION_ERROR };

struct hz_action {
    int id;
    char command[40];
    enum hz_action_status status;
    int lb_id;   /* resource: a balancer, 0 = none */
    int cert_id; /* or a certificate, 0 = none */
    time_t started;
    time_t finished;
    char *error_code; /* set once failed */
    char *error_message;
    struct event *timer;  /* pending completion, NULL when done */
    int held;             /* started under hold_actions: timer not armed yet */
    struct hz_fake *fake; /* back pointer for the timer */
};

/* ---- rate limit (ratelimit.c) -------------------------------------- */

struct hz_bucket {
    char *token;
    double level;
    double last; /* seconds, monotonic */
    struct hz_bucket *next;
};

/* ---- admin state (admin.c) ----------------------------------------- */

struct hz_log_entry {
    unsigned long seq;
    long long t_ms; /* since start */
    char method[8];
    char *path;  /* path with query */
    char *route; /* "GET /v1/load_balancers/{id}" */
    int status;
    char *identity; /* User-Agent */
};

struct hz_count {
    char *key;
    unsigned long n;
    struct hz_count *next;
};

struct hz_writer { /* last writer of one balancer */
    int lb_id;
    char *identity;
    long long t_ms;
    char *route;
    struct hz_writer *next;
};

struct hz_faults {
    int fail_count; /* next N /v1 requests fail */
    int fail_status;
    char *fail_code;
    int latency_ms;
    char *refuse_ip; /* NULL = none */
    char *refuse_code;
    int refuse_status;
    int action_fail_count; /* next N actions end in error */
    char *action_fail_code;
    char *action_fail_message;
    int hold_actions;     /* actions started now stay running until released */
    int hold_issuance;    /* certificate issuance actions stay running */
    json_t *fail_domains; /* array: issuance for these domains fails */
    char *issue_fail_code;
    char *issue_fail_message;
};

struct hz_delayed; /* http.c */

/* ---- the process ---------------------------------------------------- */

struct hz_fake {
    struct hz_config cfg;
    struct event_base *base;
    struct evhttp *http;
    long long start_ms;

    json_t *tokens; /* array of accepted tokens; empty = any */
    int max_lbs;

    struct hz_network **nets;
    size_t n_nets, cap_nets;
    struct hz_lb **lbs;
    size_t n_lbs, cap_lbs;
    int next_lb_id;
    unsigned long next_ip;

    struct hz_cert **certs; /* sorted by id */
    size_t n_certs, cap_certs;
    int next_cert_id;

    struct hz_action **actions; /* actions[i]->id == i + 1 */
    size_t n_actions, cap_actions;

    struct hz_bucket *buckets;

    struct hz_log_entry *log; /* ring */
    size_t log_cap, log_len, log_head;
    unsigned long log_seq;
    struct hz_count *counts;    /* per route */
    struct hz_count *id_counts; /* per identity */
    struct hz_writer *writers;
    json_t *overlaps; /* array of detector reports */
    struct hz_faults faults;

    struct hz_delayed *delayed;
};

/* The request being answered. Handlers fill status/body with hz_reply*. */
struct hz_req {
    struct hz_fake *f;
    struct evhttp_request *req;
    enum evhttp_cmd_type method;
    char *path; /* decoded path without query (new) */
    struct evkeyvalq query;
    int query_ok;
    json_t *body;         /* parsed request body or NULL */
    const char *identity; /* borrowed User-Agent or "-" */
    const char *token;    /* borrowed token string after "Bearer " */
    char route[96];       /* "METHOD /v1/pattern" for counts */
    int lb_id;            /* balancer written by this request, 0 = none */
    int status;
    json_t *resp;   /* response body, NULL = empty */
    char *resp_raw; /* pre-serialised body; wins over resp */
};

/* ---- input.c -------------------------------------------------------- */

/* Check r's query parameters and body against what its route (r->route,
 * set) accepts: 0, or -1 after answering 400 invalid_input with
 * details.fields naming each unknown parameter, unknown field and value of
 * the wrong type (or 500 on ENOMEM). Routes it does not list pass. */
int hz_input_check(struct hz_req *r);

/* ---- util.c --------------------------------------------------------- */

/* Store status and body (steals resp, may be NULL) as the answer to r. */
void hz_reply(struct hz_req *r, int status, json_t *resp);
/* Store status and a serialised JSON body (steals text) as the answer. */
void hz_reply_raw(struct hz_req *r, int status, char *text);
/* Answer r with an API error; details is stolen (NULL -> {}). */
void hz_reply_error(struct hz_req *r, int status, const char *code, const char *message,
                    json_t *details);
/* 400 invalid_input naming one field in details.fields. */
void hz_reply_invalid(struct hz_req *r, const char *field, const char *message);
/* Milliseconds on CLOCK_MONOTONIC. */
long long hz_now_ms(void);
/* RFC 3339 UTC time into buf (at least 32 bytes); returns buf. */
const char *hz_time_str(time_t t, char *buf, size_t len);
/* New JSON string with the time t in RFC 3339, or json null when t == 0. */
json_t *hz_time_json(time_t t);
/* Parse dotted IPv4 into host order; 0 on success, -1 if not an IPv4. */
int hz_ip4_parse(const char *s, uint32_t *out);
/* Parse "a.b.c.d/n"; 0 or -1. */
int hz_cidr4_parse(const char *s, uint32_t *net, int *prefix);
/* 1 if ip lies in the CIDR string cidr. */
int hz_cidr4_contains(const char *cidr, uint32_t ip);
/* Format host-order IPv4 into buf (16 bytes). */
void hz_ip4_format(uint32_t ip, char *buf, size_t len);
/* 1 if s parses as an IPv4 or IPv6 address. */
int hz_ip_valid(const char *s);
/* Query parameter value (borrowed) or NULL. */
const char *hz_query(struct hz_req *r, const char *key);
/* Parse a positive decimal id; -1 if not one. */
long hz_parse_id(const char *s);
/* Page bounds for total entries per the request's page/per_page: items
 * [*from, *to) and *meta (new, {"pagination":{...}}). Returns 0, or -1
 * after replying invalid_input. */
int hz_page(struct hz_req *r, size_t total, size_t *from, size_t *to, json_t **meta);
/* Sort order of a list: up to four keys, field 0 id, 1 name, 2 created. */
struct hz_sort {
    struct {
        int field;
        int desc;
    } keys[4];
    int n;
};
/* Parse every "sort" query parameter of r into spec. 0 or -1 after
 * replying invalid_input. */
int hz_parse_sort(struct hz_req *r, struct hz_sort *spec);
/* Compare two objects by spec, then by id (qsort order). */
int hz_sort_cmp(const struct hz_sort *s, int id_a, const char *name_a, time_t created_a, int id_b,
                const char *name_b, time_t created_b);
/* Paginate items (steals) under key into a list response per the request's
 * page/per_page. Replies on r (error or 200). */
void hz_reply_page(struct hz_req *r, const char *key, json_t *items);
/* Get an optional integer member; 0 ok (or absent: *present = 0), -1 wrong
 * type (after replying invalid_input). */
int hz_json_int(struct hz_req *r, json_t *obj, const char *key, const char *field, long long *out,
                int *present);
/* Same for booleans and strings (the string is borrowed from obj). */
int hz_json_bool(struct hz_req *r, json_t *obj, const char *key, const char *field, int *out,
                 int *present);
int hz_json_str(struct hz_req *r, json_t *obj, const char *key, const char *field, const char **out,
                int *present);

/* ---- store.c -------------------------------------------------------- */

/* The static catalogue: balancer types and locations. */
extern const struct hz_lb_type hz_lb_types[];
extern const size_t hz_n_lb_types;
extern const struct hz_location hz_locations[];
extern const size_t hz_n_locations;

/* Type by name (JSON string), id (JSON integer) or id as a string; NULL if
 * unknown. name_or_id is borrowed and may be NULL. */
const struct hz_lb_type *hz_type_find(json_t *name_or_id);
/* Location by name or decimal id; NULL if unknown. */
const struct hz_location *hz_location_find(const char *name_or_id);
/* Lookups in the store; results are borrowed, NULL when absent. */
struct hz_lb *hz_lb_find(struct hz_fake *f, long id);
struct hz_lb *hz_lb_find_name(struct hz_fake *f, const char *name);
struct hz_network *hz_net_find(struct hz_fake *f, long id);
/* Append p to the growable pointer array *arr (*n used, *cap allocated);
 * 0 or -ENOMEM. */
int hz_ptr_push(void ***arr, size_t *n, size_t *cap, void *p);
/* Add lb (steals) to the store; 0 or -ENOMEM (lb not stolen then). */
int hz_lb_add(struct hz_fake *f, struct hz_lb *lb);
/* Remove and free the balancer with this id. */
void hz_lb_remove(struct hz_fake *f, int id);
/* New zeroed balancer with empty arrays and an allocated public IP. */
struct hz_lb *hz_lb_new(struct hz_fake *f, const char *name);
/* Free a balancer not (or no longer) in the store; NULL is fine. */
void hz_lb_free(struct hz_lb *lb);
/* Add n (steals on success) to the store; 0 or -ENOMEM. */
int hz_net_add(struct hz_fake *f, struct hz_network *n);
/* Free a network not in the store; NULL is fine. */
void hz_net_free(struct hz_network *n);
/* Free every balancer and network (shutdown). */
void hz_store_free(struct hz_fake *f);
/* Renderers, all return new objects or NULL on ENOMEM. */
json_t *hz_lb_json(struct hz_fake *f, const struct hz_lb *lb);
/* Compact JSON text of lb (borrowed, valid until the next change), cached
 * until hz_lb_touch; NULL on ENOMEM. */
const char *hz_lb_text(struct hz_fake *f, struct hz_lb *lb);
/* Drop the cached rendering: call after every change to lb. */
void hz_lb_touch(struct hz_lb *lb);
/* Network, type and location in schema shape (new) or NULL on ENOMEM. */
json_t *hz_net_json(struct hz_fake *f, const struct hz_network *n);
json_t *hz_type_json(const struct hz_lb_type *t);
json_t *hz_location_json(const struct hz_location *l);

/* Validation shared by create, seed and actions (lb_checks.c).
 * Each returns 0, or replies on r and returns -1. r may not be NULL.
 * hz_check_target/hz_check_service: *out is the new stored object. */
int hz_check_target(struct hz_req *r, struct hz_lb *lb, json_t *req_target, json_t **out);
int hz_check_service(struct hz_req *r, struct hz_lb *lb, json_t *req_service, json_t **out);
/* update_service: merge req over the existing service base (borrowed). */
int hz_merge_service(struct hz_req *r, struct hz_lb *lb, json_t *base, json_t *req, json_t **out);
/* Choose the private IP for attaching lb to net_id (ip: requested or NULL;
 * ip_range: the cloud subnet to take it from, or NULL: the first with a free
 * IP) into out_ip; the caller appends {network, ip} to lb->private_net. */
int hz_attach_network(struct hz_req *r, struct hz_lb *lb, long net_id, const char *ip,
                      const char *ip_range, char *out_ip, size_t len);

/* ---- seed.c --------------------------------------------------------- */

/* Load a seed file into f; 0 or -1 with a message on stderr. */
int hz_seed_load(struct hz_fake *f, const char *path);

/* ---- lb_api.c / lb_actions.c --------------------------------------- */

/* Endpoint handlers: each answers r (hz_reply*) and sets r->lb_id to the
 * balancer it writes, for the writer detector. r->body is borrowed. */
void hz_lb_list(struct hz_req *r);
void hz_lb_create(struct hz_req *r);
void hz_lb_get(struct hz_req *r, long id);
void hz_lb_update(struct hz_req *r, long id);
void hz_lb_delete(struct hz_req *r, long id);
/* Build a balancer from a create-shaped body; used by POST and the seed.
 * Returns new lb or NULL after replying on r. */
struct hz_lb *hz_lb_build(struct hz_req *r, json_t *body);
/* POST /load_balancers/{id}/actions/<name>. */
void hz_lb_action(struct hz_req *r, long id, const char *name);
/* 1 if name is a known balancer action. */
int hz_lb_action_known(const char *name);

/* ---- actions.c ------------------------------------------------------ */

/* Start an action on balancer lb_id (0 = none); it completes after the
 * configured duration, with error code/message when given (copied). It takes
 * the balancer's lock. Returns the action (borrowed) or NULL on ENOMEM. */
struct hz_action *hz_action_start(struct hz_fake *f, const char *command, int lb_id,
                                  const char *err_code, const char *err_message);
/* Start an issuance action on certificate cert_id: held while hold_actions
 * or hold_issuance is set; its outcome is decided when it completes
 * (hz_cert_finish). Returns the action (borrowed) or NULL on ENOMEM. */
struct hz_action *hz_action_start_cert(struct hz_fake *f, const char *command, int cert_id);
/* Action in schema shape (new) or NULL on ENOMEM. */
json_t *hz_action_json(const struct hz_action *a);
/* Action by id (borrowed) or NULL. */
struct hz_action *hz_action_find(struct hz_fake *f, long id);
/* GET /actions/{id}: answers r. */
void hz_actions_get(struct hz_req *r, long id);
/* GET /actions, /load_balancers[/{id}]/actions, /certificates[/{id}]/actions:
 * kind selects the resource kind (HZ_RES_ANY: all), res_id one resource of
 * that kind (0 = all). */
void hz_actions_list(struct hz_req *r, enum hz_res kind, int res_id);
/* Number of actions held running by the hold_actions fault. */
size_t hz_actions_held(const struct hz_fake *f);
/* Release every held action whose hold is no longer set (hold_actions for
 * all, hold_issuance too for certificate actions): each now runs its
 * configured duration, then ends as it would have. Returns 0 or -1 when a
 * timer cannot be armed (that action stays held). */
int hz_actions_release(struct hz_fake *f);
/* Cancel pending timers and free every action (shutdown). */
void hz_actions_free(struct hz_fake *f);

/* ---- cert_pem.c ----------------------------------------------------- */

/* Parse and check an uploaded certificate (PEM chain, leaf first) and its
 * private key (PEM): both parse, the key belongs to the leaf, the leaf has
 * not expired at now. 0 with *info filled (info->domains new), or -1 with
 * *field naming the bad field and msg the reason. */
int hz_pem_check(const char *cert_pem, const char *key_pem, time_t now, struct hz_cert_info *info,
                 const char **field, char *msg, size_t len);
/* Issue a self-signed certificate for domains (borrowed array of strings),
 * valid from now for 90 days: 0 with *pem (new) and *info (info->domains
 * new), or -ENOMEM / -EIO. */
int hz_pem_issue(json_t *domains, time_t now, char **pem, struct hz_cert_info *info);

/* ---- cert_api.c ----------------------------------------------------- */

/* Certificate by id (borrowed) or NULL. */
struct hz_cert *hz_cert_find(struct hz_fake *f, long id);
/* Certificate in schema shape, used_by included (new) or NULL on ENOMEM. */
json_t *hz_cert_json(struct hz_fake *f, const struct hz_cert *c);
/* Build a certificate from a POST /certificates body (borrowed); used by
 * POST and the seed. A managed one is pending. New certificate, or NULL
 * after replying on r. */
struct hz_cert *hz_cert_build(struct hz_req *r, json_t *body);
/* Add c (steals on success) to the store, giving it the next id unless it
 * has one; 0 or -ENOMEM. */
int hz_cert_add(struct hz_fake *f, struct hz_cert *c);
/* Free a certificate not in the store; NULL is fine. */
void hz_cert_free(struct hz_cert *c);
/* Issue managed certificate c now (self-signed, hz_pem_issue): completed.
 * 0 or -ENOMEM / -EIO (c unchanged). */
int hz_cert_issue(struct hz_cert *c);
/* Endpoint handlers of /certificates; each answers r. */
void hz_cert_list(struct hz_req *r);
void hz_cert_create(struct hz_req *r);
void hz_cert_get(struct hz_req *r, long id);
void hz_cert_update(struct hz_req *r, long id);
void hz_cert_delete(struct hz_req *r, long id);
void hz_cert_retry(struct hz_req *r, long id);
/* Decide the outcome of issuance action a when it completes: issue the
 * certificate, or fail it (a->error_code set) when a domain is listed in
 * the fail_issuance fault or the certificate cannot be made. */
void hz_cert_finish(struct hz_fake *f, struct hz_action *a);
/* Free every certificate (shutdown). */
void hz_certs_free(struct hz_fake *f);

/* ---- ratelimit.c ---------------------------------------------------- */

/* Take one request from token's bucket. Fills limit/remaining/reset for the
 * headers. Returns 1 if allowed, 0 if the bucket is empty, -1 on ENOMEM. */
int hz_rate_take(struct hz_fake *f, const char *token, long *limit, long *remaining,
                 long long *reset);
/* [{token, limit, remaining, reset}] for the state dump (new). */
json_t *hz_rate_json(struct hz_fake *f);
/* Free every bucket (shutdown). */
void hz_rate_free(struct hz_fake *f);

/* ---- admin.c -------------------------------------------------------- */

/* Answer a /_admin/... request (r->path starts with "/_admin/"). */
void hz_admin_handle(struct hz_req *r);
/* Record a finished /v1 request in the log, the counts and the detector. */
void hz_admin_record(struct hz_fake *f, const struct hz_req *r);
/* Free the log, counts, detector state and faults (shutdown). */
void hz_admin_free(struct hz_fake *f);

/* ---- http.c --------------------------------------------------------- */

/* "GET", "POST", ... for m (static string). */
const char *hz_method_name(enum evhttp_cmd_type m);
/* Install the request handler on f->http. */
void hz_http_init(struct hz_fake *f);
/* Drop delayed requests (shutdown). */
void hz_http_free(struct hz_fake *f);

#endif
