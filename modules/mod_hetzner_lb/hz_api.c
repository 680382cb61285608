/*
 * hz_api.c: the Hetzner Cloud API client's calls (see hz_api.h for the
 * rules, hz_api_int.h for the states of a call and the other files): the
 * pacer's FIFO and its driver, the lanes, sending, dry run, retries on
 * their timers, the client's life and cancel, hz_api_call, the stats.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <prismlb/module_util.h>

#include "hz_api_int.h"
#include "hz_dlist.h"

/* ------------------------------------------------------------------ */
/* Queues                                                              */

static void
kick(struct hz_api *api)
{
    if (!api->host->loop->timer_pending(api->kick_timer))
        api->host->loop->timer_arm(api->kick_timer, 0, 0, 0);
}

/* An answer changed the budget estimate: decide again now, even if the
 * dispatcher is waiting out a delay computed from the older estimate. */
void
hz_api_kick_now(struct hz_api *api)
{
    api->host->loop->timer_arm(api->kick_timer, 0, 0, 0);
}

void
hz_call_enqueue(struct hz_call *c, int front)
{
    struct hz_api *api = c->api;
    c->st = CS_QUEUED;
    c->ready_ms = hz_api_now(api);
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

void
hz_call_unlink(struct hz_call *c)
{
    HZ_DLIST_UNLINK(c->api->all_head, c->api->all_tail, c, all_prev, all_next);
}

void
hz_call_free(struct hz_call *c)
{
    if (!c)
        return;
    if (c->retry_timer)
        c->api->host->loop->timer_free(c->retry_timer);
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

/* Complete c: advance its lane, run its callback, free it. */
void
hz_call_finish(struct hz_call *c, const struct hz_result *r)
{
    struct hz_api *api = c->api;
    hz_call_unlink(c);
    if (c->is_poll) { /* a poll that could not be sent */
        api->poll_in_flight = 0;
        hz_api_poll_arm(api, api->poll_ms);
    }
    if (c->lane) {
        struct hz_lane *l = c->lane;
        l->head = c->lane_next;
        if (!l->head) {
            l->tail = NULL;
            lane_free(api, l);
        } else {
            hz_call_enqueue(l->head, 0);
        }
        c->lane = NULL;
    }
    if (c->lcb)
        c->lcb(c->arg, r, r->err || r->status >= 300 ? NULL : c->items);
    else if (c->cb)
        c->cb(c->arg, r);
    hz_call_free(c);
}

void
hz_call_finish_err(struct hz_call *c, int err, int status, const char *code, const char *msg)
{
    struct hz_result r = {.err = err, .status = status, .code = code, .message = msg};
    hz_call_finish(c, &r);
}

/* ------------------------------------------------------------------ */
/* Sending                                                             */

static void
send_call(struct hz_call *c)
{
    struct hz_api *api = c->api;
    char *url = hz_asprintf("%s%s", api->endpoint, c->path);
    int err = 0;
    if (!url) {
        hz_call_finish_err(c, -ENOMEM, 0, NULL, "out of memory");
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
        .done = hz_call_on_done,
        .arg = c,
    };
    c->seq = ++api->seq;
    c->st = CS_FLIGHT;
    c->req = api->host->http->request(api->ctx, &o, &err);
    hz_free(url);
    if (!c->req) {
        PLB_ERR(api->host, api->ctx,
                PLB_KV("method", c->method, "path", c->path, "error", strerror(-err)),
                "hetzner: the request could not start");
        hz_call_finish_err(c, err ? err : -EIO, 0, NULL, "the request could not be started");
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
    hz_call_finish(c, &r);
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
        int64_t now = hz_api_now(api);
        int64_t d = hz_pace_delay(&api->pace, now, api->in_flight);
        if (d < 0)
            break; /* an answer will kick */
        if (d > 0) {
            api->host->loop->timer_arm(api->kick_timer, d, 0, 0);
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
/* Retries                                                             */

static void
retry_fire(plb_timer *t, void *arg)
{
    struct hz_call *c = arg;
    (void)t;
    hz_call_enqueue(c, 0);
}

void
hz_call_retry_later(struct hz_call *c, int64_t delay_ms)
{
    struct hz_api *api = c->api;
    if (!c->retry_timer &&
        !(c->retry_timer = api->host->loop->timer_new(api->ctx, retry_fire, c))) {
        hz_call_finish_err(c, -ENOMEM, 0, NULL, "out of memory");
        return;
    }
    c->st = CS_RETRY;
    if (api->host->loop->timer_arm(c->retry_timer, delay_ms, 0, 0.2) < 0)
        hz_call_finish_err(c, -EIO, 0, NULL, "timer failed");
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
             api->ctx ? api->host->links->instance_name(api->ctx) : "-", hostname, (long)getpid());
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
    if (!(api->kick_timer = api->host->loop->timer_new(api->ctx, dispatch, api)) ||
        !(api->poll_timer = api->host->loop->timer_new(api->ctx, hz_api_poll_fire, api)))
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
    api->host->loop->timer_cancel(api->kick_timer);
    api->host->loop->timer_cancel(api->poll_timer);
    api->poll_in_flight = 0;
    for (struct hz_call *c = list; c; c = c->all_next) {
        c->lane = NULL;
        if (c->req) {
            api->host->http->cancel(c->req);
            c->req = NULL;
            api->in_flight--;
        }
        if (c->retry_timer)
            api->host->loop->timer_cancel(c->retry_timer);
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
        hz_call_free(c);
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
    api->host->loop->timer_free(api->kick_timer);
    api->host->loop->timer_free(api->poll_timer);
    hz_free(api->endpoint);
    hz_free(api->token_file);
    if (api->token) {
        memset(api->token, 0, strlen(api->token));
        hz_free(api->token);
    }
    hz_free(api);
}

struct hz_call *
hz_call_new(struct hz_api *api, const char *method, const char *path)
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
int
hz_call_start(struct hz_api *api, struct hz_call *c, const char *lane)
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
    hz_call_enqueue(c, 0);
    return 0;
}

/* rc is hz_call_start's result for c (or the error before it): on failure c
 * was not linked, so free it. Returns rc. */
int
hz_call_started(struct hz_call *c, int rc)
{
    if (rc < 0)
        hz_call_free(c);
    return rc;
}

int
hz_api_call(struct hz_api *api, const char *lane, const char *method, const char *path,
            json_t *body, hz_result_cb cb, void *arg)
{
    struct hz_call *c = hz_call_new(api, method, path);
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
    rc = hz_call_start(api, c, lane);
fail:
    return hz_call_started(c, rc);
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
