/*
 * hz_api.c: the Hetzner Cloud API client (see hz_api.h for the rules).
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
 * One driver (dispatch) moves QUEUED calls out; every transition back into
 * the queue arms it with a zero delay, so nothing runs re-entrantly inside
 * a caller of hz_api_call.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>

#include "hz_api.h"
#include "hz_dlist.h"

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
    char *answer; /* the answer that started the action, as it came: parsed
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
    int cancelling;
    struct hz_api_stats st;
    /* Request headers; the User-Agent names the replica (instance, host and
     * process), so Hetzner's logs and the fake's writer detector can tell
     * the replicas of a Deployment apart. */
    char user_agent[320];
    const char *headers[4];
};

static int64_t
now_ms(struct hz_api *api)
{
    return api->host->now_ms(api->ctx);
}

/* ------------------------------------------------------------------ */
/* Queues                                                              */

static void
kick(struct hz_api *api)
{
    if (!api->host->timer_pending(api->kick_timer))
        api->host->timer_arm(api->kick_timer, 0, 0, 0);
}

/* An answer changed the budget estimate: decide again now, even if the
 * dispatcher is waiting out a delay computed from the older estimate. */
static void
kick_now(struct hz_api *api)
{
    api->host->timer_arm(api->kick_timer, 0, 0, 0);
}

static void
enqueue(struct hz_call *c, int front)
{
    struct hz_api *api = c->api;
    c->st = CS_QUEUED;
    c->ready_ms = now_ms(api);
    c->q_next = NULL;
    if (front) {
        c->q_next = api->q_head;
        api->q_head = c;
        if (!api->q_tail)
            api->q_tail = c;
    } else {
        if (api->q_tail)
            api->q_tail->q_next = c;
        else
            api->q_head = c;
        api->q_tail = c;
    }
    kick(api);
}

static void
all_unlink(struct hz_call *c)
{
    HZ_DLIST_UNLINK(c->api->all_head, c->api->all_tail, c, all_prev, all_next);
}

static void
call_free(struct hz_call *c)
{
    if (!c)
        return;
    if (c->retry_timer)
        c->api->host->timer_free(c->retry_timer);
    hz_free_each(&c->path, &c->body, &c->list_base, &c->list_key, &c->answer, NULL);
    json_decref(c->items);
    hz_free(c);
}

static void
lane_free(struct hz_api *api, struct hz_lane *l)
{
    for (struct hz_lane **pp = &api->lanes; *pp; pp = &(*pp)->next) {
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    }
    hz_free(l->key);
    hz_free(l);
}

static void poll_arm(struct hz_api *api, int64_t ms);

/* Complete c: advance its lane, run its callback, free it. */
static void
finish(struct hz_call *c, const struct hz_result *r)
{
    struct hz_api *api = c->api;
    all_unlink(c);
    if (c->is_poll) { /* a poll that could not be sent */
        api->poll_in_flight = 0;
        poll_arm(api, api->poll_ms);
    }
    if (c->lane) {
        struct hz_lane *l = c->lane;
        l->head = c->lane_next;
        if (!l->head) {
            l->tail = NULL;
            lane_free(api, l);
        } else {
            enqueue(l->head, 0);
        }
        c->lane = NULL;
    }
    if (c->lcb)
        c->lcb(c->arg, r, r->err || r->status >= 300 ? NULL : c->items);
    else if (c->cb)
        c->cb(c->arg, r);
    call_free(c);
}

static void
finish_err(struct hz_call *c, int err, int status, const char *code, const char *msg)
{
    struct hz_result r = {.err = err, .status = status, .code = code, .message = msg};
    finish(c, &r);
}

/* ------------------------------------------------------------------ */
/* Sending                                                             */

static void on_done(plb_http_req *req, const plb_http_resp *resp, void *arg);

static void
send_call(struct hz_call *c)
{
    struct hz_api *api = c->api;
    char *url = hz_asprintf("%s%s", api->endpoint, c->path);
    int err = 0;
    if (!url) {
        finish_err(c, -ENOMEM, 0, NULL, "out of memory");
        return;
    }
    struct plb_http_opts o = {
        .size = sizeof(o),
        .method = c->method,
        .url = url,
        .headers = api->headers,
        .body = c->body,
        .body_len = c->body_len,
        .bearer_token_file = api->token_file,
        .bearer_token = api->token_file ? NULL : api->token,
        .timeout_ms = api->timeout_ms,
        .body_mode = PLB_HTTP_BUFFER,
        .max_body = 64u << 20,
        .done = on_done,
        .arg = c,
    };
    c->seq = ++api->seq;
    c->st = CS_FLIGHT;
    c->req = api->host->http_request(api->ctx, &o, &err);
    hz_free(url);
    if (!c->req) {
        PLB_ERR(api->host, api->ctx,
                PLB_KV("method", c->method, "path", c->path, "error", strerror(-err)),
                "hetzner: the request could not start");
        finish_err(c, err ? err : -EIO, 0, NULL, "the request could not be started");
        return;
    }
    api->in_flight++;
    api->st.sent++;
    if (c->write)
        api->st.writes++;
    if (c->is_poll)
        api->st.action_polls++;
    PLB_DEBUG(api->host, api->ctx, PLB_KV("method", c->method, "path", c->path),
              "hetzner: request");
}

static void
dry_run_finish(struct hz_call *c)
{
    struct hz_api *api = c->api;
    struct hz_result r = {.dry_run = 1};
    api->st.dry_run++;
    PLB_INFO(api->host, api->ctx, NULL, "hetzner dry run: would %s %s %.*s", c->method, c->path,
             (int)(c->body_len > 2000 ? 2000 : c->body_len), c->body ? c->body : "");
    finish(c, &r);
}

static void
dispatch(plb_timer *t, void *arg)
{
    struct hz_api *api = arg;
    (void)t;
    while (api->q_head) {
        struct hz_call *c = api->q_head;
        if (c->write && api->dry_run) {
            api->q_head = c->q_next;
            if (!api->q_head)
                api->q_tail = NULL;
            dry_run_finish(c);
            continue;
        }
        if (api->in_flight >= api->max_in_flight)
            break;
        int64_t now = now_ms(api);
        int64_t d = hz_pace_delay(&api->pace, now, api->in_flight);
        if (d < 0)
            break; /* an answer will kick */
        if (d > 0) {
            api->host->timer_arm(api->kick_timer, d, 0, 0);
            break;
        }
        api->q_head = c->q_next;
        if (!api->q_head)
            api->q_tail = NULL;
        c->q_next = NULL;
        api->st.paced_ms += now - c->ready_ms;
        send_call(c);
    }
}

/* ------------------------------------------------------------------ */
/* Retries and actions                                                  */

static void
retry_fire(plb_timer *t, void *arg)
{
    struct hz_call *c = arg;
    (void)t;
    enqueue(c, 0);
}

static void
retry_later(struct hz_call *c, int64_t delay_ms)
{
    struct hz_api *api = c->api;
    if (!c->retry_timer && !(c->retry_timer = api->host->timer_new(api->ctx, retry_fire, c))) {
        finish_err(c, -ENOMEM, 0, NULL, "out of memory");
        return;
    }
    c->st = CS_RETRY;
    if (api->host->timer_arm(c->retry_timer, delay_ms, 0, 0.2) < 0)
        finish_err(c, -EIO, 0, NULL, "timer failed");
}

static void
poll_arm(struct hz_api *api, int64_t ms)
{
    if (!api->host->timer_pending(api->poll_timer))
        api->host->timer_arm(api->poll_timer, ms, 0, 0);
}

static void
poll_fire(plb_timer *t, void *arg)
{
    struct hz_api *api = arg;
    char path[64 + 24 * 50];
    size_t n = 0, k = 0;
    (void)t;
    if (api->poll_in_flight || api->cancelling)
        return;
    n = (size_t)snprintf(path, sizeof(path), "/actions?per_page=%d", PER_PAGE);
    for (struct hz_call *c = api->all_head; c && k < PER_PAGE; c = c->all_next) {
        if (c->st != CS_ACTION)
            continue;
        n += (size_t)snprintf(path + n, sizeof(path) - n, "&id=%" PRId64, c->action_id);
        k++;
    }
    if (k == 0)
        return;
    struct hz_call *p = hz_calloc(sizeof(*p));
    if (!p || !(p->path = hz_strdup(path))) {
        hz_free(p);
        poll_arm(api, api->poll_ms);
        return;
    }
    p->api = api;
    p->is_poll = 1;
    snprintf(p->method, sizeof(p->method), "GET");
    HZ_DLIST_APPEND(api->all_head, api->all_tail, p, all_prev, all_next);
    api->poll_in_flight = 1;
    enqueue(p, 1); /* waiting lanes go first */
}

static struct hz_call *
find_action(struct hz_api *api, int64_t id)
{
    for (struct hz_call *c = api->all_head; c; c = c->all_next)
        if (c->st == CS_ACTION && c->action_id == id)
            return c;
    return NULL;
}

/* The batched poll answered. */
static void
poll_done(struct hz_api *api, int status, json_t *body)
{
    size_t i;
    json_t *a;
    int ended = 0, waiting = 0;
    int64_t now = now_ms(api);
    api->poll_in_flight = 0;
    if (status == 200) {
        json_array_foreach(json_object_get(body, "actions"), i, a)
        {
            json_t *idv = json_object_get(a, "id");
            const char *s = json_string_value(json_object_get(a, "status"));
            struct hz_call *c =
                json_is_integer(idv) ? find_action(api, json_integer_value(idv)) : NULL;
            if (!c || !s || strcmp(s, "running") == 0)
                continue;
            json_t *e = json_object_get(a, "error");
            json_t *answer = json_loadb(c->answer, c->answer_len, 0, NULL);
            struct hz_result r = {
                .status = c->answer_status,
                .body = answer,
                .action_id = c->action_id,
                .action_failed = strcmp(s, "success") != 0,
                .code = json_string_value(json_object_get(e, "code")),
                .message = json_string_value(json_object_get(e, "message")),
            };
            ended++;
            if (!answer) { /* it parsed when it came: out of memory */
                finish_err(c, -ENOMEM, c->answer_status, NULL, "out of memory");
                continue;
            }
            if (r.action_failed)
                PLB_WARN(api->host, api->ctx,
                         PLB_KV("method", c->method, "path", c->path, "error",
                                r.message ? r.message : s),
                         "hetzner: action %" PRId64 " failed", c->action_id);
            finish(c, &r);
            json_decref(answer);
        }
    }
    for (struct hz_call *c = api->all_head, *nx; c; c = nx) {
        nx = c->all_next;
        if (c->st != CS_ACTION)
            continue;
        if (now - c->action_since_ms > ACTION_TIMEOUT_MS) {
            finish_err(c, -EIO, 0, "timeout", "the action did not end within 15 minutes");
            continue;
        }
        waiting++;
    }
    if (waiting) {
        api->poll_ms = ended ? POLL_FIRST_MS : api->poll_ms * 3 / 2;
        if (api->poll_ms > POLL_MAX_MS)
            api->poll_ms = POLL_MAX_MS;
        poll_arm(api, api->poll_ms);
    }
}

/* ------------------------------------------------------------------ */
/* Answers                                                             */

static long long
header_num(const struct plb_host *h, const plb_http_resp *resp, const char *name)
{
    const char *v = h->http_resp_header(resp, name);
    char *end;
    if (!v)
        return -1;
    long long n = strtoll(v, &end, 10);
    return end == v ? -1 : n;
}

/* A list page arrived: collect, then fetch the next or finish. */
static void
list_page(struct hz_call *c, int status, json_t *body)
{
    json_t *items = json_object_get(body, c->list_key);
    json_t *next =
        json_object_get(json_object_get(json_object_get(body, "meta"), "pagination"), "next_page");
    if (!json_is_array(items)) {
        finish_err(c, -EIO, status, NULL, "the answer lacks the list");
        return;
    }
    if (c->pcb) {
        int rc = c->pcb(c->arg, items);
        if (rc < 0) {
            finish_err(c, rc, status, NULL,
                       rc == -ENOMEM ? "out of memory" : "the page holds an item not understood");
            return;
        }
    } else if (json_array_extend(c->items, items) < 0) {
        finish_err(c, -ENOMEM, status, NULL, "out of memory");
        return;
    }
    if (json_is_integer(next) && json_integer_value(next) > c->page && c->page < MAX_PAGES) {
        char *p = hz_asprintf("%s%cper_page=%d&page=%d", c->list_base,
                              strchr(c->list_base, '?') ? '&' : '?', PER_PAGE,
                              (int)json_integer_value(next));
        if (!p) {
            finish_err(c, -ENOMEM, status, NULL, "out of memory");
            return;
        }
        c->page = (int)json_integer_value(next);
        hz_free(c->path);
        c->path = p;
        c->retries = 0;
        enqueue(c, 1);
        return;
    }
    struct hz_result r = {.status = status, .body = body};
    finish(c, &r);
}

/* The batched poll ended (status 0: no answer): hand it to the poller and
 * free it. */
static void
poll_end(struct hz_call *c, int status, json_t *body)
{
    struct hz_api *api = c->api;
    poll_done(api, status, body);
    all_unlink(c);
    call_free(c);
}

/* Count one answer (status -1: none came) of c and the budget it left
 * (remaining -1: not reported). */
static void
count_answer(struct hz_call *c, int status, long long remaining)
{
    struct hz_api *api = c->api;
    char route[160], code[16];
    const char *inst = api->ctx ? api->host->instance_name(api->ctx) : "-";
    if (api->m_requests) {
        const char *lv[] = {inst, route, code, NULL};
        hz_route(c->method, c->path, route, sizeof(route));
        if (status < 0)
            snprintf(code, sizeof(code), "error");
        else
            snprintf(code, sizeof(code), "%d", status);
        api->host->metric_add(api->m_requests, lv, 1);
    }
    if (api->m_remaining && remaining >= 0) {
        const char *lv[] = {inst, NULL};
        api->host->metric_set(api->m_remaining, lv, (double)remaining);
    }
}

/* An answer arrived: feed the pacer, classify it (hz_answer_classify), act
 * on the verdict. The one exit frees the parsed body. */
static void
on_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    struct hz_call *c = arg;
    struct hz_api *api = c->api;
    const struct plb_host *h = api->host;
    int64_t now = now_ms(api);
    struct hz_answer in = {
        .transport_ok = h->http_resp_error(resp) == PLB_HTTP_OK,
        .status = h->http_resp_status(resp),
        .is_write = c->write,
        .is_list = c->lcb != NULL,
        .is_poll = c->is_poll,
        .retries = c->retries,
        .locked_tries = c->locked_tries,
    };
    struct hz_verdict v;
    size_t len = 0;
    const char *raw = NULL;
    (void)req;

    c->req = NULL;
    api->in_flight--;
    kick_now(api);

    long long limit = header_num(h, resp, "RateLimit-Limit");
    long long remaining = header_num(h, resp, "RateLimit-Remaining");
    long long reset = header_num(h, resp, "RateLimit-Reset");
    if (limit > 0) {
        hz_pace_update(&api->pace, c->seq, now, h->wall_ms(api->ctx), (long)limit, (long)remaining,
                       reset);
        api->st.limit = (long)limit;
        api->st.remaining = (long)remaining;
    }
    count_answer(c, in.transport_ok ? in.status : -1, limit > 0 ? remaining : -1);
    if (!in.transport_ok) {
        in.status = 0;
        in.transport_error = h->http_resp_error_text(resp);
    } else if ((raw = h->http_resp_body(resp, &len)) && len) {
        /* Every answer with a body is one JSON object. */
        in.body = json_loadb(raw, len, 0, NULL);
        in.body_invalid = !json_is_object(in.body);
    } else {
        /* Only 204 No Content (a delete) may come without one. */
        in.body_invalid = in.status != 204 && strcmp(c->method, "DELETE") != 0;
    }
    hz_answer_classify(&in, &v);
    if (v.locked)
        api->st.locked++;

    switch (v.kind) {
    case HZ_V_RATE_LIMITED:
        api->st.rate_limited++;
        hz_pace_on_429(&api->pace, now, h->wall_ms(api->ctx), reset);
        PLB_WARN(h, api->ctx, PLB_KV("method", c->method, "path", c->path),
                 "hetzner: rate limit reached; pausing every request for %" PRId64 " ms",
                 api->pace.pause_until_ms - now);
        enqueue(c, 1);
        break;
    case HZ_V_RETRY:
    case HZ_V_LOCKED:
        if (v.kind == HZ_V_LOCKED)
            c->locked_tries++;
        else
            c->retries++;
        PLB_DEBUG(
            h, api->ctx,
            PLB_KV("method", c->method, "path", c->path, "error", v.message ? v.message : "-"),
            "hetzner: %s %d; retry in %" PRId64 " ms", v.kind == HZ_V_LOCKED ? "locked" : "answer",
            in.status, v.delay_ms);
        retry_later(c, v.delay_ms);
        break;
    case HZ_V_FAILED:
        PLB_WARN(h, api->ctx,
                 PLB_KV("method", c->method, "path", c->path, "code", v.code ? v.code : "-",
                        "error", v.message ? v.message : "-"),
                 "hetzner: the request failed: status %d", in.status);
        if (c->is_poll) {
            poll_end(c, 0, NULL);
            break;
        }
        finish(c, &(struct hz_result){.err = v.err,
                                      .status = in.status,
                                      .code = v.code,
                                      .message = v.message,
                                      .body = in.body});
        break;
    case HZ_V_PAGE:
        list_page(c, in.status, in.body);
        break;
    case HZ_V_ACTION:
        /* an action comes only in a JSON body: raw is its text */
        if (!raw || !(c->answer = hz_strndup(raw, len))) {
            finish_err(c, -ENOMEM, in.status, NULL, "out of memory");
            break;
        }
        c->answer_len = strlen(c->answer);
        c->st = CS_ACTION;
        c->action_id = v.action_id;
        c->action_since_ms = now;
        c->answer_status = in.status;
        api->poll_ms = POLL_FIRST_MS;
        poll_arm(api, POLL_FIRST_MS);
        break;
    case HZ_V_DONE:
        if (c->is_poll) {
            poll_end(c, in.status, in.body);
            break;
        }
        finish(c, &(struct hz_result){.status = in.status,
                                      .body = in.body,
                                      .code = v.code,
                                      .message = v.message,
                                      .action_id = v.action_id,
                                      .action_failed = v.action_failed});
        break;
    }
    json_decref(in.body);
}

/* ------------------------------------------------------------------ */
/* Public                                                              */

int
hz_api_new(const struct hz_api_cfg *cfg, struct hz_api **out)
{
    struct hz_api *api;
    size_t l;
    *out = NULL;
    if (!cfg->host || !cfg->endpoint || (!cfg->token_file && !cfg->token))
        return -EINVAL;
    if (!(api = hz_calloc(sizeof(*api))))
        return -ENOMEM;
    api->host = cfg->host;
    api->ctx = cfg->ctx;
    api->dry_run = cfg->dry_run;
    api->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 30000;
    api->max_in_flight = cfg->max_in_flight > 0 ? cfg->max_in_flight : 8;
    api->m_requests = cfg->m_requests;
    api->m_remaining = cfg->m_remaining;
    api->poll_ms = POLL_FIRST_MS;
    api->st.limit = api->st.remaining = -1;
    hz_pace_init(&api->pace);
    char hostname[128] = "unknown";
    if (gethostname(hostname, sizeof(hostname) - 1) != 0)
        snprintf(hostname, sizeof(hostname), "unknown");
    hostname[sizeof(hostname) - 1] = '\0';
    snprintf(api->user_agent, sizeof(api->user_agent),
             "User-Agent: prismlb-mod_hetzner_lb/1.0 (%s; %s_%ld)",
             api->ctx ? api->host->instance_name(api->ctx) : "-", hostname, (long)getpid());
    api->headers[0] = "Content-Type: application/json";
    api->headers[1] = "Accept: application/json";
    api->headers[2] = api->user_agent;
    api->headers[3] = NULL;
    if (!(api->endpoint = hz_strdup(cfg->endpoint)))
        goto nomem;
    l = strlen(api->endpoint);
    while (l && api->endpoint[l - 1] == '/')
        api->endpoint[--l] = '\0';
    if (cfg->token_file && !(api->token_file = hz_strdup(cfg->token_file)))
        goto nomem;
    if (!cfg->token_file && !(api->token = hz_strdup(cfg->token)))
        goto nomem;
    if (!(api->kick_timer = api->host->timer_new(api->ctx, dispatch, api)) ||
        !(api->poll_timer = api->host->timer_new(api->ctx, poll_fire, api)))
        goto nomem;
    *out = api;
    return 0;
nomem:
    hz_api_free(api);
    return -ENOMEM;
}

/* Detach every call (cancelling requests and timers) and hand each to fn. */
static void
drain(struct hz_api *api, int notify)
{
    struct hz_call *list = api->all_head;
    api->all_head = api->all_tail = NULL;
    api->q_head = api->q_tail = NULL;
    while (api->lanes) {
        struct hz_lane *l = api->lanes;
        api->lanes = l->next;
        hz_free(l->key);
        hz_free(l);
    }
    api->host->timer_cancel(api->kick_timer);
    api->host->timer_cancel(api->poll_timer);
    api->poll_in_flight = 0;
    for (struct hz_call *c = list; c; c = c->all_next) {
        c->lane = NULL;
        if (c->req) {
            api->host->http_cancel(c->req);
            c->req = NULL;
            api->in_flight--;
        }
        if (c->retry_timer)
            api->host->timer_cancel(c->retry_timer);
    }
    api->cancelling = 1;
    while (list) {
        struct hz_call *c = list;
        list = c->all_next;
        c->all_prev = c->all_next = NULL;
        if (notify && !c->is_poll) {
            struct hz_result r = {.err = -ECANCELED, .message = "cancelled"};
            if (c->lcb)
                c->lcb(c->arg, &r, NULL);
            else if (c->cb)
                c->cb(c->arg, &r);
        }
        call_free(c);
    }
    api->cancelling = 0;
    api->in_flight = 0;
}

void
hz_api_cancel_all(struct hz_api *api)
{
    if (api)
        drain(api, 1);
}

void
hz_api_free(struct hz_api *api)
{
    if (!api)
        return;
    if (api->kick_timer && api->poll_timer)
        drain(api, 0);
    api->host->timer_free(api->kick_timer);
    api->host->timer_free(api->poll_timer);
    hz_free(api->endpoint);
    hz_free(api->token_file);
    if (api->token) {
        memset(api->token, 0, strlen(api->token));
        hz_free(api->token);
    }
    hz_free(api);
}

static struct hz_call *
call_new(struct hz_api *api, const char *method, const char *path)
{
    struct hz_call *c;
    if (api->cancelling || strlen(method) >= sizeof(c->method) || path[0] != '/')
        return NULL;
    if (!(c = hz_calloc(sizeof(*c))))
        return NULL;
    c->api = api;
    snprintf(c->method, sizeof(c->method), "%s", method);
    c->write = strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
    if (!(c->path = hz_strdup(path))) {
        hz_free(c);
        return NULL;
    }
    return c;
}

/* Link c into the client and its lane (NULL: none), then queue it. */
static int
call_start(struct hz_api *api, struct hz_call *c, const char *lane)
{
    struct hz_lane *l = NULL;
    if (lane) {
        for (l = api->lanes; l && strcmp(l->key, lane) != 0; l = l->next)
            ;
        if (!l) {
            if (!(l = hz_calloc(sizeof(*l))) || !(l->key = hz_strdup(lane))) {
                hz_free(l);
                return -ENOMEM;
            }
            l->next = api->lanes;
            api->lanes = l;
        }
    }
    HZ_DLIST_APPEND(api->all_head, api->all_tail, c, all_prev, all_next);
    if (l) {
        c->lane = l;
        if (l->tail) {
            l->tail->lane_next = c;
            l->tail = c;
            c->st = CS_LANE;
            return 0;
        }
        l->head = l->tail = c;
    }
    enqueue(c, 0);
    return 0;
}

/* rc is call_start's result for c (or the error before it): on failure c
 * was not linked, so free it. Returns rc. */
static int
call_started(struct hz_call *c, int rc)
{
    if (rc < 0)
        call_free(c);
    return rc;
}

int
hz_api_call(struct hz_api *api, const char *lane, const char *method, const char *path,
            json_t *body, hz_result_cb cb, void *arg)
{
    struct hz_call *c = call_new(api, method, path);
    int rc = -ENOMEM;
    if (!c) {
        json_decref(body);
        return api->cancelling ? -ECANCELED : -ENOMEM;
    }
    c->cb = cb;
    c->arg = arg;
    if (body) {
        c->body = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (!c->body)
            goto fail;
        c->body_len = strlen(c->body);
    }
    rc = call_start(api, c, lane);
fail:
    return call_started(c, rc);
}

int
hz_api_list_pages(struct hz_api *api, const char *path, const char *key, hz_page_cb pcb,
                  hz_list_cb cb, void *arg)
{
    char *first =
        hz_asprintf("%s%cper_page=%d&page=1", path, strchr(path, '?') ? '&' : '?', PER_PAGE);
    struct hz_call *c = first ? call_new(api, "GET", first) : NULL;
    int rc = -ENOMEM;
    hz_free(first);
    if (!c)
        return api->cancelling ? -ECANCELED : -ENOMEM;
    c->lcb = cb;
    c->pcb = pcb;
    c->arg = arg;
    c->page = 1;
    if (!(c->list_base = hz_strdup(path)) || !(c->list_key = hz_strdup(key)) ||
        !(c->items = json_array()))
        goto fail;
    rc = call_start(api, c, NULL);
fail:
    return call_started(c, rc);
}

int
hz_api_list(struct hz_api *api, const char *path, const char *key, hz_list_cb cb, void *arg)
{
    return hz_api_list_pages(api, path, key, NULL, cb, arg);
}

void
hz_api_get_stats(const struct hz_api *api, struct hz_api_stats *out)
{
    *out = api->st;
    out->queued = out->waiting_actions = out->lanes = 0;
    out->in_flight = (size_t)api->in_flight;
    for (const struct hz_call *c = api->q_head; c; c = c->q_next)
        out->queued++;
    for (const struct hz_call *c = api->all_head; c; c = c->all_next)
        out->waiting_actions += c->st == CS_ACTION;
    for (const struct hz_lane *l = api->lanes; l; l = l->next)
        out->lanes++;
}
