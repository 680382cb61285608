/*
 * hz_api_int.h: the inside of mod_hetzner_lb's Hetzner API client (private
 * to its files; the callers' contract is hz_api.h).
 *
 *   hz_api.c         the calls: queues, lanes, sending under the pacer,
 *                    retries, the client's life, hz_api_call, the stats
 *   hz_api_answer.c  an answer arriving: the pacer and the metrics fed, the
 *                    verdict of hz_answer_classify acted on
 *   hz_api_list.c    lists: the first page, each page collected or handed
 *                    on, the next one fetched
 *   hz_api_action.c  the actions: one batched poll for every call waiting
 *                    on a running action, its answer, the 15-minute limit
 *
 * A call is in one state at a time:
 *
 *   LANE     queued behind an earlier call of its lane
 *   QUEUED   in the pacer's FIFO, waiting for a slot and for the budget
 *   FLIGHT   sent; the HTTP client owns the request
 *   ACTION   answered with a running action; completed by the poller
 *   RETRY    waiting on its own timer (423 locked, 5xx, 409 conflict,
 *            transport error of a read), then QUEUED again
 *
 * One driver (hz_api_dispatch, hz_api_answer.c) moves QUEUED calls out; every transition
 * back into the queue arms it with a zero delay, so nothing runs
 * re-entrantly inside a caller of hz_api_call. Everything runs on the
 * loop thread.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_API_INT_H
#define PRISMLB_MOD_HETZNER_LB_HZ_API_INT_H

#include "hz_api.h"

#define PER_PAGE HZ_PER_PAGE
#define POLL_FIRST_MS 500
#define POLL_MAX_MS 5000
#define ACTION_TIMEOUT_MS (15 * 60 * 1000)
#define MAX_PAGES 10000

enum call_state { CS_LANE = 1, CS_QUEUED, CS_FLIGHT, CS_ACTION, CS_RETRY };

struct hz_lane {
    char *key;
    struct hz_call *head, *tail; /* head is the running call */
    struct hz_lane *next;
};

struct hz_call {
    struct hz_api *api;
    enum call_state st;
    struct hz_lane *lane;
    struct hz_call *lane_next;
    struct hz_call *q_next;              /* pacer FIFO */
    struct hz_call *all_prev, *all_next; /* every live call, oldest first */

    char method[8];
    char *path; /* below the endpoint, with the query */
    char *body; /* serialized JSON or NULL */
    size_t body_len;
    int write;

    hz_result_cb cb;
    hz_list_cb lcb;
    hz_page_cb pcb; /* each page's items, not kept (hz_api_list_pages) */
    void *arg;
    int is_poll;

    /* lists */
    char *list_base, *list_key;
    json_t *items;
    int page;

    plb_http_req *req;
    uint64_t seq;
    int64_t ready_ms; /* entered the queue */
    int retries, locked_tries;
    plb_timer *retry_timer;

    int64_t action_id, action_since_ms;
    uint64_t poll_round; /* the last round of polls that asked for it */
    char *answer;        /* the answer that started the action, as it came: parsed
                            again when the action ends (a created balancer's JSON
                            holds ~12 times its text) */
    size_t answer_len;
    int answer_status;
};

struct hz_api {
    const struct plb_host *host;
    plb_ctx *ctx;
    char *endpoint, *token_file, *token;
    int dry_run;
    uint32_t timeout_ms;
    int max_in_flight;
    plb_metric *m_requests, *m_remaining;

    struct hz_pace pace;
    uint64_t seq;
    int in_flight;
    struct hz_call *q_head, *q_tail;
    struct hz_call *all_head, *all_tail;
    struct hz_lane *lanes;
    plb_timer *kick_timer, *poll_timer;
    int poll_in_flight;
    int64_t poll_ms;
    uint64_t poll_round; /* counts the rounds: each asks once for every action */
    int round_ended;     /* an action of this round ended */
    int cancelling;
    struct hz_api_stats st;
    /* Request headers; the User-Agent names the replica (instance, host and
     * process), so Hetzner's logs and the fake's writer detector can tell
     * the replicas of a Deployment apart. */
    char user_agent[320];
    const char *headers[4];
};

static inline int64_t
hz_api_now(struct hz_api *api)
{
    return api->host->loop->now_ms(api->ctx);
}

/* ------------------------------------------------------------------ */
/* A call's life (hz_api_lane.c): calls nothing above it               */

/* A call of method on path (borrowed; below the endpoint, beginning with
 * "/") for api: new, not linked, no callback yet. NULL when api is
 * cancelling, the method is too long, the path is not absolute, or out of
 * memory. */
HZ_HIDDEN struct hz_call *hz_call_new(struct hz_api *api, const char *method, const char *path);
/* Link c (new from hz_call_new) into api and its lane (NULL: none), then
 * queue it (or keep it behind its lane's running call). 0, or -ENOMEM
 * (c not linked). */
HZ_HIDDEN int hz_call_start(struct hz_api *api, struct hz_call *c, const char *lane);
/* rc is hz_call_start's result for c (or the error before it): on failure
 * c was not linked, so it is freed. Returns rc. */
HZ_HIDDEN int hz_call_started(struct hz_call *c, int rc);
/* Put c into the pacer's FIFO (at the front when front is set: a 429, the
 * next page, a poll) and arm the driver. */
HZ_HIDDEN void hz_call_enqueue(struct hz_call *c, int front);
/* Decide again now: an answer changed the budget estimate. */
HZ_HIDDEN void hz_api_kick_now(struct hz_api *api);
/* Send c again after delay_ms (jittered) on its own timer; a timer that
 * cannot be made or armed ends c with an error. */
HZ_HIDDEN void hz_call_retry_later(struct hz_call *c, int64_t delay_ms);
/* Complete c with r (borrowed for the call): advance its lane, run its
 * callback, free it. */
HZ_HIDDEN void hz_call_finish(struct hz_call *c, const struct hz_result *r);
/* Complete c with an error: err (-errno), the status, Hetzner's code and
 * the message (borrowed, NULL is fine). */
HZ_HIDDEN void hz_call_finish_err(struct hz_call *c, int err, int status, const char *code,
                                  const char *msg);
/* Take c off the list of live calls. */
HZ_HIDDEN void hz_call_unlink(struct hz_call *c);
/* Free c and what it owns (unlinked already); NULL is fine. */
HZ_HIDDEN void hz_call_free(struct hz_call *c);
/* Arm the poll of the running actions in ms, unless it is armed. */
HZ_HIDDEN void hz_api_poll_arm(struct hz_api *api, int64_t ms);

/* ------------------------------------------------------------------ */
/* Sending and answers, lists, actions                                  */

/* The kick timer (arg is the client): send the queued calls the pacer
 * lets go now, or finish the writes of a dry run (hz_api_answer.c). */
HZ_HIDDEN void hz_api_dispatch(plb_timer *t, void *arg);
/* The HTTP client's completion of c's request (arg is c): the one way an
 * answer enters the client (hz_api_answer.c). */
HZ_HIDDEN void hz_call_on_done(plb_http_req *req, const plb_http_resp *resp, void *arg);
/* A page of c's list arrived with status and body (borrowed): collect it
 * (or hand it to the page callback), then fetch the next page or complete
 * c (hz_api_list.c). */
HZ_HIDDEN void hz_call_list_page(struct hz_call *c, int status, json_t *body);
/* The poll timer (arg is the client): one GET /actions for up to 50 of
 * the calls waiting on an action. */
HZ_HIDDEN void hz_api_poll_fire(plb_timer *t, void *arg);
/* The batched poll c ended with status and body (borrowed; status 0: no
 * answer): complete the calls whose action ended, then free c. */
HZ_HIDDEN void hz_api_poll_end(struct hz_call *c, int status, json_t *body);

#endif
