/*
 * hz_api_answer.c: an answer of the Hetzner API arriving (see
 * hz_api_int.h): its RateLimit headers feed the pacer and the gauge, the
 * request counter counts it by route and status, its body is parsed once,
 * hz_answer_classify (hz_answer.c, pure) says what it means, and one switch
 * acts on the verdict: pause and resend (429), retry on a timer (locked,
 * 5xx, conflict), fail, next page, wait for the action, or complete. And
 * the sending that answer follows: the pacer's driver, hz_api_dispatch,
 * which sends the queued calls (or, in a dry run, finishes the writes).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_api_int.h"

static long long
header_num(const struct plb_host *h, const plb_http_resp *resp, const char *name)
{
    const char *v = h->http->resp_header(resp, name);
    char *end;
    if (!v)
        return -1;
    long long n = strtoll(v, &end, 10);
    return end == v ? -1 : n;
}

/* Count one answer (status -1: none came) of c and the budget it left
 * (remaining -1: not reported). */
static void
count_answer(struct hz_call *c, int status, long long remaining)
{
    struct hz_api *api = c->api;
    char route[160], code[16];
    const char *inst = api->ctx ? api->host->links->instance_name(api->ctx) : "-";
    if (api->m_requests) {
        const char *lv[] = {inst, route, code, NULL};
        hz_route(c->method, c->path, route, sizeof(route));
        if (status < 0)
            snprintf(code, sizeof(code), "error");
        else
            snprintf(code, sizeof(code), "%d", status);
        api->host->metrics->add(api->m_requests, lv, 1);
    }
    if (api->m_remaining && remaining >= 0) {
        const char *lv[] = {inst, NULL};
        api->host->metrics->set(api->m_remaining, lv, (double)remaining);
    }
}

/* An answer arrived: feed the pacer, classify it (hz_answer_classify), act
 * on the verdict. The one exit frees the parsed body. */
void
hz_call_on_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    struct hz_call *c = arg;
    struct hz_api *api = c->api;
    const struct plb_host *h = api->host;
    int64_t now = hz_api_now(api);
    struct hz_answer in = {
        .transport_ok = h->http->resp_error(resp) == PLB_HTTP_OK,
        .status = h->http->resp_status(resp),
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
    hz_api_kick_now(api);

    long long limit = header_num(h, resp, "RateLimit-Limit");
    long long remaining = header_num(h, resp, "RateLimit-Remaining");
    long long reset = header_num(h, resp, "RateLimit-Reset");
    if (limit > 0) {
        hz_pace_update(&api->pace, c->seq, now, h->loop->wall_ms(api->ctx), (long)limit,
                       (long)remaining, reset);
        api->st.limit = (long)limit;
        api->st.remaining = (long)remaining;
    }
    count_answer(c, in.transport_ok ? in.status : -1, limit > 0 ? remaining : -1);
    if (!in.transport_ok) {
        in.status = 0;
        in.transport_error = h->http->resp_error_text(resp);
    } else if ((raw = h->http->resp_body(resp, &len)) && len) {
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
        hz_pace_on_429(&api->pace, now, h->loop->wall_ms(api->ctx), reset);
        PLB_WARN(h, api->ctx, PLB_KV("method", c->method, "path", c->path),
                 "hetzner: rate limit reached; pausing every request for %" PRId64 " ms",
                 api->pace.pause_until_ms - now);
        hz_call_enqueue(c, 1);
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
        hz_call_retry_later(c, v.delay_ms);
        break;
    case HZ_V_FAILED:
        PLB_WARN(h, api->ctx,
                 PLB_KV("method", c->method, "path", c->path, "code", v.code ? v.code : "-",
                        "error", v.message ? v.message : "-"),
                 "hetzner: the request failed: status %d", in.status);
        if (c->is_poll) {
            hz_api_poll_end(c, 0, NULL);
            break;
        }
        hz_call_finish(c, &(struct hz_result){.err = v.err,
                                              .status = in.status,
                                              .code = v.code,
                                              .message = v.message,
                                              .body = in.body});
        break;
    case HZ_V_PAGE:
        hz_call_list_page(c, in.status, in.body);
        break;
    case HZ_V_ACTION:
        /* an action comes only in a JSON body: raw is its text */
        if (!raw || !(c->answer = hz_strndup(raw, len))) {
            hz_call_finish_err(c, -ENOMEM, in.status, NULL, "out of memory");
            break;
        }
        c->answer_len = strlen(c->answer);
        c->st = CS_ACTION;
        c->action_id = v.action_id;
        c->action_since_ms = now;
        c->poll_round = api->poll_round; /* first asked for by the next round */
        c->answer_status = in.status;
        api->poll_ms = POLL_FIRST_MS;
        hz_api_poll_arm(api, POLL_FIRST_MS);
        break;
    case HZ_V_DONE:
        if (c->is_poll) {
            hz_api_poll_end(c, in.status, in.body);
            break;
        }
        hz_call_finish(c, &(struct hz_result){.status = in.status,
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

void
hz_api_dispatch(plb_timer *t, void *arg)
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
