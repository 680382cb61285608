/*
 * hz_api_action.c: the running actions of the Hetzner API client (see
 * hz_api_int.h). A call whose answer carries a running action waits in
 * state ACTION; every round of polls asks once for each of them, with
 * GET /actions?id=…&id=… (up to 50 ids) at the front of the queue, one
 * poll after another while the round has actions left (200 running
 * actions: four polls in a row), the next round 0.5 s after the first
 * and growing by half up to 5 s while none ends. An ended action completes
 * its call with the answer that started it, parsed again from its text;
 * one still running after 15 minutes ends its call with an error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_api_int.h"
#include "hz_dlist.h"

void
hz_api_poll_fire(plb_timer *t, void *arg)
{
    struct hz_api *api = arg;
    char path[64 + 24 * 50];
    size_t n = 0, k = 0;
    (void)t;
    if (api->poll_in_flight || api->cancelling)
        return;
    n = (size_t)snprintf(path, sizeof(path), "/actions?per_page=%d", PER_PAGE);
    /* The actions this round has not asked for yet; none left: a new round. */
    for (int fresh = 0; fresh < 2 && k == 0; fresh++) {
        if (fresh)
            api->poll_round++;
        for (struct hz_call *c = api->all_head; c && k < PER_PAGE; c = c->all_next) {
            if (c->st != CS_ACTION || c->poll_round == api->poll_round)
                continue;
            n += (size_t)snprintf(path + n, sizeof(path) - n, "&id=%" PRId64, c->action_id);
            c->poll_round = api->poll_round;
            k++;
        }
    }
    if (k == 0)
        return;
    struct hz_call *p = hz_calloc(sizeof(*p));
    if (!p || !(p->path = hz_strdup(path))) {
        hz_free(p);
        api->poll_round++; /* ask for all of them again */
        hz_api_poll_arm(api, api->poll_ms);
        return;
    }
    p->api = api;
    p->is_poll = 1;
    snprintf(p->method, sizeof(p->method), "GET");
    HZ_DLIST_APPEND(api->all_head, api->all_tail, p, all_prev, all_next);
    api->poll_in_flight = 1;
    hz_call_enqueue(p, 1); /* waiting lanes go first */
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
    int ended = 0, waiting = 0, unasked = 0;
    int64_t now = hz_api_now(api);
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
                hz_call_finish_err(c, -ENOMEM, c->answer_status, NULL, "out of memory");
                continue;
            }
            if (r.action_failed)
                PLB_WARN(api->host, api->ctx,
                         PLB_KV("method", c->method, "path", c->path, "error",
                                r.message ? r.message : s),
                         "hetzner: action %" PRId64 " failed", c->action_id);
            hz_call_finish(c, &r);
            json_decref(answer);
        }
    }
    for (struct hz_call *c = api->all_head, *nx; c; c = nx) {
        nx = c->all_next;
        if (c->st != CS_ACTION)
            continue;
        if (now - c->action_since_ms > ACTION_TIMEOUT_MS) {
            hz_call_finish_err(c, -EIO, 0, "timeout", "the action did not end within 15 minutes");
            continue;
        }
        waiting++;
        unasked += c->poll_round != api->poll_round;
    }
    if (status != 200)
        api->poll_round++; /* this poll told nothing: the round starts over */
    if (ended)
        api->round_ended = 1;
    if (unasked && status == 200) {
        hz_api_poll_arm(api, 0); /* the round goes on */
    } else if (waiting) {
        api->poll_ms = api->round_ended ? POLL_FIRST_MS : api->poll_ms * 3 / 2;
        if (api->poll_ms > POLL_MAX_MS)
            api->poll_ms = POLL_MAX_MS;
        api->round_ended = 0;
        hz_api_poll_arm(api, api->poll_ms);
    }
}

/* The batched poll ended (status 0: no answer): hand it to the poller and
 * free it. */
void
hz_api_poll_end(struct hz_call *c, int status, json_t *body)
{
    struct hz_api *api = c->api;
    poll_done(api, status, body);
    hz_call_unlink(c);
    hz_call_free(c);
}
