/*
 * hz_api.c: the Hetzner Cloud API client (see hz_api.h for the rules,
 * hz_api_int.h for the states of a call and the other files): its life
 * and cancel, hz_api_call, the stats. A call's life is in hz_api_lane.c,
 * sending and answers in hz_api_answer.c, lists in hz_api_list.c, action
 * waits in hz_api_action.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hz_api_int.h"
#include "hz_dlist.h"

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
    if (!(api->kick_timer = api->host->loop->timer_new(api->ctx, hz_api_dispatch, api)) ||
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
