/*
 * hz_answer.c: what one Hetzner API answer means for the call that got it
 * (pure: no I/O, no host). hz_api_answer.c acts on the verdict; the rules are
 * listed in hz_api.h and here, in the order they are tried:
 *
 *   transport error   a poll fails at once; a read is retried up to
 *                     HZ_MAX_RETRIES times (2 s, 4 s, 8 s); a write fails
 *                     (it may have reached Hetzner)
 *   429               rate limited (every call, polls too)
 *   poll              any other answer goes to the poller
 *   423 locked        retried after 1, 2, 4, 8, then 10 s, up to
 *                     HZ_MAX_LOCKED_TRIES times
 *   5xx, 409 conflict retried up to HZ_MAX_RETRIES times
 *   >= 300 or none    failed with Hetzner's error code and message
 *   2xx not JSON      failed (a malformed answer is never a success)
 *   2xx of a list     a page
 *   running action    wait for it
 *   else              done (with the action's error, if it ended in one)
 */
#include <errno.h>
#include <string.h>

#include "hz_api.h"

static int
code_is(const char *code, const char *want)
{
    return code && strcmp(code, want) == 0;
}

void
hz_answer_classify(const struct hz_answer *in, struct hz_verdict *out)
{
    json_t *err = json_object_get(in->body, "error");
    json_t *action, *aid;
    const char *ast;

    memset(out, 0, sizeof(*out));
    out->code = json_string_value(json_object_get(err, "code"));
    out->message = json_string_value(json_object_get(err, "message"));
    out->locked = in->status == 423 && code_is(out->code, "locked");

    if (!in->transport_ok) {
        out->code = NULL;
        out->message = in->transport_error ? in->transport_error : "transport error";
        if (!in->is_poll && !in->is_write && in->retries < HZ_MAX_RETRIES) {
            out->kind = HZ_V_RETRY;
            out->delay_ms = 1000LL << (in->retries + 1);
            return;
        }
        out->kind = HZ_V_FAILED;
        out->err = -EIO;
        return;
    }
    if (in->status == 429) {
        out->kind = HZ_V_RATE_LIMITED;
        return;
    }
    if (in->is_poll) {
        out->kind = HZ_V_DONE;
        return;
    }
    if (out->locked && in->locked_tries < HZ_MAX_LOCKED_TRIES) {
        int tries = in->locked_tries + 1;
        out->kind = HZ_V_LOCKED;
        out->delay_ms = 1000LL << (tries > 4 ? 4 : tries - 1);
        if (out->delay_ms > HZ_LOCKED_DELAY_MAX_MS)
            out->delay_ms = HZ_LOCKED_DELAY_MAX_MS;
        return;
    }
    if ((in->status >= 500 || (in->status == 409 && code_is(out->code, "conflict"))) &&
        in->retries < HZ_MAX_RETRIES) {
        out->kind = HZ_V_RETRY;
        out->delay_ms = 1000LL << (in->retries + 1);
        return;
    }
    if (in->status >= 300 || in->status == 0) {
        out->kind = HZ_V_FAILED;
        out->err = in->status ? 0 : -EIO;
        if (!in->status && !out->message)
            out->message = "no answer";
        return;
    }
    if (in->body_invalid) {
        out->kind = HZ_V_FAILED;
        out->err = -EIO;
        out->code = NULL;
        out->message = "the answer is not JSON";
        return;
    }
    if (in->is_list) {
        out->kind = HZ_V_PAGE;
        return;
    }
    action = json_object_get(in->body, "action");
    ast = json_string_value(json_object_get(action, "status"));
    aid = json_object_get(action, "id");
    out->kind = HZ_V_DONE;
    out->code = out->message = NULL;
    if (ast && json_is_integer(aid) && strcmp(ast, "running") == 0) {
        out->kind = HZ_V_ACTION;
        out->action_id = json_integer_value(aid);
        return;
    }
    if (ast && strcmp(ast, "error") == 0) {
        json_t *ae = json_object_get(action, "error");
        out->action_failed = 1;
        out->action_id = json_is_integer(aid) ? json_integer_value(aid) : 0;
        out->code = json_string_value(json_object_get(ae, "code"));
        out->message = json_string_value(json_object_get(ae, "message"));
    }
}

void
hz_route(const char *method, const char *path, char *out, size_t len)
{
    size_t n = 0;
    int w = snprintf(out, len, "%s ", method);
    if (w < 0 || (size_t)w >= len) {
        if (len)
            out[0] = '\0';
        return;
    }
    n = (size_t)w;
    for (const char *p = path; *p && *p != '?' && n + 1 < len;) {
        if (*p == '/' && p[1] >= '0' && p[1] <= '9') {
            const char *e = p + 1;
            while (*e >= '0' && *e <= '9')
                e++;
            if (*e == '/' || *e == '?' || *e == '\0') {
                w = snprintf(out + n, len - n, "/{id}");
                n = w < 0 || (size_t)w >= len - n ? len - 1 : n + (size_t)w;
                p = e;
                continue;
            }
        }
        out[n++] = *p++;
    }
    out[n] = '\0';
}
