/*
 * hz_api_lane.c: the life of one call of the Hetzner API client (see
 * hz_api_int.h), the lowest layer of the client: made and linked into the
 * client and its lane, queued for the pacer's FIFO (whose driver,
 * hz_api_dispatch, sends), retried on its timer, finished (its lane moves
 * on, its callback runs) and freed. The files above it (sending and
 * answers, lists, actions, the client's life) call it; it calls none of
 * them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

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

void
hz_api_poll_arm(struct hz_api *api, int64_t ms)
{
    if (!api->host->loop->timer_pending(api->poll_timer))
        api->host->loop->timer_arm(api->poll_timer, ms, 0, 0);
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
/* Making one                                                          */

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
