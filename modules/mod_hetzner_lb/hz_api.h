/*
 * hz_api.h: the Hetzner Cloud API client of mod_hetzner_lb (private).
 *
 * Requests go out on host->http->request (never blocking the loop) with the
 * bearer token, JSON bodies, and these rules:
 *
 *   pacing   every answer's RateLimit-Limit/Remaining/Reset feed hz_pace;
 *            a request waits in one FIFO until the budget allows it; a 429
 *            stops everything until RateLimit-Reset, then it is sent again;
 *   lanes    calls with the same lane key (one per balancer) run one at a
 *            time: a call whose answer carries a running action completes
 *            only when the action ended, so the next call on that balancer
 *            waits for it while other lanes proceed;
 *   actions  every running action is polled with ONE batched
 *            GET /actions?id=…&id=… per round (up to 50 ids), whatever the
 *            number of balancers waiting;
 *   locked   423 locked is retried after a growing delay (the balancer is
 *            busy with an action someone else started);
 *   retries  5xx and 409 conflict are retried up to 3 times;
 *   answers  what each answer means is decided by hz_answer_classify
 *            (pure, unit tested), the client only acts on its verdict;
 *   lists    hz_api_list follows pagination at 50 per page;
 *   dry run  a write (anything but GET) is logged and not sent; its result
 *            says dry_run.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_API_H
#define PRISMLB_MOD_HETZNER_LB_HZ_API_H

#include "hz.h"

/* ------------------------------------------------------------------ */
/* Pacing (hz_pace.c, pure)                                             */

struct hz_pace {
    int known;    /* an answer with the headers was seen */
    uint64_t seq; /* dispatch number of the answer the estimate uses */
    long limit, remaining;
    int64_t t_ms;           /* monotonic time of that answer */
    int64_t reset_ms;       /* monotonic time the bucket is full */
    double rate_per_ms;     /* estimated refill */
    int64_t pause_until_ms; /* after a 429 */
    uint64_t rate_429;      /* 429 answers seen */
};

HZ_HIDDEN void hz_pace_init(struct hz_pace *p);
/* Feed one answer's headers: seq is the request's dispatch number (answers
 * older than the one in use are ignored), now_ms monotonic, wall_ms the
 * wall clock. Missing headers (limit <= 0) change nothing. */
HZ_HIDDEN void hz_pace_update(struct hz_pace *p, uint64_t seq, int64_t now_ms, int64_t wall_ms,
                              long limit, long remaining, long long reset_unix);
/* A 429: nothing goes out until reset_unix (at least 1 s). */
HZ_HIDDEN void hz_pace_on_429(struct hz_pace *p, int64_t now_ms, int64_t wall_ms,
                              long long reset_unix);
/* How long to wait before sending one more request with in_flight requests
 * unanswered: 0 now, > 0 milliseconds, -1 until an answer arrives. */
HZ_HIDDEN int64_t hz_pace_delay(const struct hz_pace *p, int64_t now_ms, int in_flight);
/* The estimated tokens left now (for metrics and tests). */
HZ_HIDDEN double hz_pace_tokens(const struct hz_pace *p, int64_t now_ms, int in_flight);

/* The most items one page of a Hetzner list holds (per_page's maximum):
 * every list goes at this size. */
#define HZ_PER_PAGE 50

/* The resync's share of the budget (hz_pace.c, pure). A resync lists
 * every labelled balancer, ceil(items / HZ_PER_PAGE) pages (at least one);
 * at one resync per interval_ms that is pages × 3600 s / interval list
 * requests an hour, which may take at most percent % of limit (Hetzner's
 * bucket refills limit tokens an hour). */
struct hz_budget {
    int64_t interval_ms; /* the interval to use: configured_ms, or longer */
    long pages;          /* list requests per resync */
    int stretched;       /* interval_ms > configured_ms */
};
#define HZ_RESYNC_MAX_MS 86400000LL /* a stretched interval is at most a day */
/* The resync interval for items balancers under RateLimit-Limit limit
 * (<= 0: unknown, no stretching) and a share of percent (1 to 100),
 * rounded up to the millisecond, at most HZ_RESYNC_MAX_MS (never shorter
 * than configured_ms). */
HZ_HIDDEN struct hz_budget hz_resync_budget(int64_t configured_ms, size_t items, long limit,
                                            int64_t percent);

/* ------------------------------------------------------------------ */
/* Answers (hz_answer.c, pure)                                          */

#define HZ_MAX_RETRIES 3       /* 5xx, 409 conflict, a read's transport error */
#define HZ_MAX_LOCKED_TRIES 60 /* 423 locked */
#define HZ_LOCKED_DELAY_MAX_MS 10000

/* One answer as the client received it (borrowed for the call). */
struct hz_answer {
    int transport_ok;               /* an HTTP answer arrived */
    const char *transport_error;    /* else why not, or NULL */
    int status;                     /* its HTTP status */
    json_t *body;                   /* its JSON, NULL when empty or not JSON */
    int body_invalid;               /* a body that is not JSON came */
    int is_write, is_list, is_poll; /* what the call is */
    int retries, locked_tries;      /* how often it was sent again so far */
};

enum hz_verdict_kind {
    HZ_V_RETRY = 1,    /* send again after delay_ms (count a retry) */
    HZ_V_LOCKED,       /* 423 locked: send again after delay_ms (count it) */
    HZ_V_RATE_LIMITED, /* 429: pause every call until RateLimit-Reset */
    HZ_V_FAILED,       /* the call ends: err, status, code, message */
    HZ_V_PAGE,         /* a list page to collect */
    HZ_V_ACTION,       /* an action is running: wait for action_id */
    HZ_V_DONE,         /* the call ends with this answer */
};

struct hz_verdict {
    enum hz_verdict_kind kind;
    int64_t delay_ms;    /* RETRY, LOCKED */
    int err;             /* FAILED: 0 for an answer with a status, else -EIO */
    const char *code;    /* error.code (or the action's), borrowed from the body */
    const char *message; /* its message (or why the call failed), borrowed */
    int64_t action_id;   /* ACTION; DONE with action_failed */
    int action_failed;   /* DONE: the answer's action ended in error */
    int locked;          /* the answer was 423 locked (retried or not) */
};

/* Classify one answer (the rules are in hz_answer.c's comment); fills
 * *out, whose strings are borrowed from in. Never fails. */
HZ_HIDDEN void hz_answer_classify(const struct hz_answer *in, struct hz_verdict *out);
/* The route of a request for metrics: "METHOD /path" without the query,
 * each all-digit path segment (an id) as {id}: "POST
 * /load_balancers/{id}/actions/add_target". Cut to fit out (len bytes). */
HZ_HIDDEN void hz_route(const char *method, const char *path, char *out, size_t len);

/* ------------------------------------------------------------------ */
/* Client (hz_api*.c; their inside: hz_api_int.h)                      */

struct hz_api;

struct hz_api_cfg {
    const struct plb_host *host; /* borrowed for the client's life */
    plb_ctx *ctx;
    const char *endpoint;   /* base URL ("https://api.hetzner.cloud/v1"), copied */
    const char *token_file; /* read on every request, copied; or */
    const char *token;      /* the token itself, copied (never logged) */
    int dry_run;
    uint32_t timeout_ms; /* per request; 0: 30 s */
    int max_in_flight;   /* 0: 8 */
    /* Metrics, borrowed (NULL: none): every answer counted by route and
     * HTTP status ("error": none came) with labels {reconciler, route,
     * code}; the last RateLimit-Remaining with {reconciler}. */
    plb_metric *m_requests, *m_remaining;
};

/* The outcome of one call, borrowed for the callback. */
struct hz_result {
    int err;             /* 0; -ECANCELED (cancelled); -EIO (transport or bad
                            answer, see message); -ENOMEM */
    int status;          /* HTTP status of the (last) answer, 0 if none */
    const char *code;    /* error.code of the answer or of the action, or NULL */
    const char *message; /* its message, or NULL */
    json_t *body;        /* the parsed answer (NULL for 204, errors, dry run) */
    int64_t action_id;   /* the action waited for, 0 if none */
    int action_failed;   /* the action ended in status error */
    int dry_run;         /* a write that was only logged */
};

typedef void (*hz_result_cb)(void *arg, const struct hz_result *r);
/* items: every item of every page (borrowed), NULL when r->err or a status. */
typedef void (*hz_list_cb)(void *arg, const struct hz_result *r, json_t *items);
/* One page's items (borrowed for the call): 0, or < 0 to end the list
 * with that error (-EINVAL: an item not understood; -ENOMEM). */
typedef int (*hz_page_cb)(void *arg, json_t *items);

/* New client; *out freed with hz_api_free. 0 or -errno. */
HZ_HIDDEN int hz_api_new(const struct hz_api_cfg *cfg, struct hz_api **out);
/* Cancel everything without calling any callback, then free. NULL is fine. */
HZ_HIDDEN void hz_api_free(struct hz_api *api);

/* Queue one request: method, path below the endpoint ("/load_balancers/7"),
 * body (stolen, may be NULL), on lane (NULL: no ordering). cb runs once, on
 * a later loop iteration, with the outcome (after the action, if the answer
 * started one). 0 or -errno (cb not called then). */
HZ_HIDDEN int hz_api_call(struct hz_api *api, const char *lane, const char *method,
                          const char *path, json_t *body, hz_result_cb cb, void *arg);
/* GET every page of path (which may carry a query) at 50 per page and hand
 * the items of `key` ("load_balancers") to cb. 0 or -errno. */
HZ_HIDDEN int hz_api_list(struct hz_api *api, const char *path, const char *key, hz_list_cb cb,
                          void *arg);
/* The same, handing each page's items to pcb as it arrives instead of
 * keeping them (a list of every balancer would hold all of their JSON at
 * once): cb then gets an empty array on success, NULL as above; a pcb
 * error ends the list (cb with r->err that error). 0 or -errno. */
HZ_HIDDEN int hz_api_list_pages(struct hz_api *api, const char *path, const char *key,
                                hz_page_cb pcb, hz_list_cb cb, void *arg);
/* Cancel every queued, running and waiting call; each cb runs with
 * -ECANCELED (calls made from those callbacks are refused). */
HZ_HIDDEN void hz_api_cancel_all(struct hz_api *api);

struct hz_api_stats {
    uint64_t sent;         /* requests sent */
    uint64_t writes;       /* of which writes */
    uint64_t rate_limited; /* 429 answers */
    uint64_t locked;       /* 423 locked answers */
    uint64_t dry_run;      /* writes only logged */
    uint64_t action_polls; /* GET /actions requests */
    int64_t paced_ms;      /* total time requests waited for the budget */
    long limit, remaining; /* last RateLimit headers, -1 when none */
    size_t queued, in_flight, waiting_actions, lanes;
};
HZ_HIDDEN void hz_api_get_stats(const struct hz_api *api, struct hz_api_stats *out);

#endif
