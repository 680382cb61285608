/*
 * fuzz_hzapi: Hetzner Cloud API answers into mod_hetzner_lb's API client
 * (modules/mod_hetzner_lb/hz_api*.c with hz_pace.c; linked, not edited):
 * its answer handling (status, error codes, RateLimit headers, actions,
 * pagination, retries, 423 locked, 429) through the host's HTTP client
 * interface, as the daemon would deliver them.
 *
 * A host table of this file stands in for the daemon: a clock that jumps to
 * the next armed timer when nothing is in flight, timers, and an HTTP client
 * that records each request and answers it with the next record of the
 * input. The client starts the calls a reconcile makes: a paginated list,
 * two writes on one balancer's lane (an action, then another queued behind
 * it) and a read on no lane.
 *
 * Input: records separated by a line "%%". A record is an answer as
 * `curl -si` prints it: "HTTP/1.1 NNN ...", header lines, an empty line,
 * the body; a record whose first line is "ERROR N" is a transport failure
 * of class N (enum plb_http_error). The seeds are answers of the fake
 * Hetzner API (tests/fakes/hetzner) captured with curl.
 *
 * Oracles:
 *   - every call's callback runs exactly once, and none after
 *     hz_api_free;
 *   - a call reported as succeeded (err 0, a 2xx status, no failed
 *     action, not a dry run) carries a JSON object as its body (a 204
 *     none): an answer that is not JSON is an error, never a success;
 *   - a list reported as succeeded hands over an array.
 * The steps are bounded (answers, timer firings), so no input hangs.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fakehost.h"
#include "fuzz.h"
#include "hz_api.h"

#define MAX_TIMERS 64
#define MAX_REQS 64
#define MAX_STEPS 400

struct plb_timer {
    plb_timer_cb cb;
    void *arg;
    int armed, used;
    int64_t due;
};

struct plb_http_req {
    plb_http_done_cb done;
    void *arg;
    int used, live;
    char method[8];
};

struct plb_http_resp {
    int status;
    enum plb_http_error error;
    char *headers; /* "Name: value\n" lines, NUL-terminated */
    const char *body;
    size_t body_len;
};

static struct {
    int64_t now;
    struct plb_timer timers[MAX_TIMERS];
    struct plb_http_req reqs[MAX_REQS];
    size_t order[MAX_REQS]; /* live requests, oldest first */
    size_t norder;
    int freed; /* hz_api_free returned */
} S;

/* ------------------------------------------------------------------ */
/* The host                                                             */

static const char *
f_instance_name(plb_ctx *ctx)
{
    (void)ctx;
    return "fuzz";
}

static int
f_log_enabled(plb_ctx *ctx, enum plb_log_level lvl)
{
    (void)ctx;
    (void)lvl;
    return 1; /* every message is formatted */
}

static void
f_log_fields(plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv, const char *fmt,
             va_list ap)
{
    char buf[4096];
    (void)ctx;
    (void)lvl;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    for (size_t i = 0; kv && kv[i]; i += 2)
        FUZZ_ASSERT(kv[i + 1], "log field %s without a value", kv[i]);
}

static int64_t
f_now(plb_ctx *ctx)
{
    (void)ctx;
    return S.now;
}

static int64_t
f_wall(plb_ctx *ctx)
{
    (void)ctx;
    return 1796000000000LL + S.now; /* near the seeds' RateLimit-Reset */
}

static plb_timer *
f_timer_new(plb_ctx *ctx, plb_timer_cb cb, void *arg)
{
    (void)ctx;
    for (size_t i = 0; i < MAX_TIMERS; i++) {
        if (!S.timers[i].used) {
            S.timers[i] = (struct plb_timer){.cb = cb, .arg = arg, .used = 1};
            return &S.timers[i];
        }
    }
    return NULL;
}

static int
f_timer_arm(plb_timer *t, int64_t delay_ms, int64_t period_ms, double jitter)
{
    (void)period_ms;
    (void)jitter;
    FUZZ_ASSERT(t->used, "arming a freed timer");
    t->armed = 1;
    t->due = S.now + (delay_ms > 0 ? delay_ms : 0);
    return 0;
}

static void
f_timer_cancel(plb_timer *t)
{
    if (t)
        t->armed = 0;
}

static int
f_timer_pending(const plb_timer *t)
{
    return t->armed;
}

static void
f_timer_free(plb_timer *t)
{
    if (t)
        *t = (struct plb_timer){0};
}

static plb_http_req *
f_http_request(plb_ctx *ctx, const struct plb_http_opts *o, int *err)
{
    (void)ctx;
    FUZZ_ASSERT(o->url && o->done && o->method, "a request without url, method or done");
    FUZZ_ASSERT(!S.freed, "a request after hz_api_free");
    for (size_t i = 0; i < MAX_REQS; i++) {
        struct plb_http_req *r = &S.reqs[i];
        if (r->used)
            continue;
        *r = (struct plb_http_req){.done = o->done, .arg = o->arg, .used = 1, .live = 1};
        snprintf(r->method, sizeof(r->method), "%s", o->method);
        S.order[S.norder++] = i;
        return r;
    }
    *err = -ENOMEM;
    return NULL;
}

static void
unlist(struct plb_http_req *r)
{
    size_t idx = (size_t)(r - S.reqs);
    for (size_t k = 0; k < S.norder; k++) {
        if (S.order[k] == idx) {
            memmove(&S.order[k], &S.order[k + 1], (S.norder - k - 1) * sizeof(S.order[0]));
            S.norder--;
            break;
        }
    }
    *r = (struct plb_http_req){0};
}

static void
f_http_cancel(plb_http_req *r)
{
    FUZZ_ASSERT(r && r->live, "cancelling a request that is not running");
    unlist(r);
}

static int
f_status(const plb_http_resp *r)
{
    return r->status;
}

static enum plb_http_error
f_error(const plb_http_resp *r)
{
    return r->error;
}

static const char *
f_error_text(const plb_http_resp *r)
{
    return r->error ? "fuzz transport error" : "";
}

static const char *
f_body(const plb_http_resp *r, size_t *len)
{
    *len = r->body_len;
    return r->body;
}

/* The last "name: value" line of r, value into a static buffer. */
static const char *
f_header(const plb_http_resp *r, const char *name)
{
    static char val[256];
    const char *found = NULL;
    size_t nl = strlen(name);
    for (const char *p = r->headers; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vl = (size_t)(p + l - v);
            if (vl && v[vl - 1] == '\r')
                vl--;
            if (vl >= sizeof(val))
                vl = sizeof(val) - 1;
            memcpy(val, v, vl);
            val[vl] = '\0';
            found = val;
        }
        p += l + (e ? 1 : 0);
    }
    return found;
}

static void *
f_alloc(size_t n)
{
    return calloc(1, n ? n : 1);
}

static struct fake_host host;

static void
host_init(void)
{
    fake_host_init(&host);
    host.links.instance_name = f_instance_name;
    host.log.enabled = f_log_enabled;
    host.log.fields = f_log_fields;
    host.loop.now_ms = f_now;
    host.loop.wall_ms = f_wall;
    host.loop.timer_new = f_timer_new;
    host.loop.timer_arm = f_timer_arm;
    host.loop.timer_cancel = f_timer_cancel;
    host.loop.timer_pending = f_timer_pending;
    host.loop.timer_free = f_timer_free;
    host.http.request = f_http_request;
    host.http.cancel = f_http_cancel;
    host.http.resp_status = f_status;
    host.http.resp_error = f_error;
    host.http.resp_error_text = f_error_text;
    host.http.resp_body = f_body;
    host.http.resp_header = f_header;
    host.mem.alloc = f_alloc;
    host.mem.realloc = realloc;
    host.mem.free = free;
}

/* ------------------------------------------------------------------ */
/* The calls and what comes back                                        */

enum { CALL_LIST, CALL_ACTION, CALL_QUEUED, CALL_READ, NCALLS };
static int calls_done[NCALLS];

static void
check_result(int which, const struct hz_result *r)
{
    FUZZ_ASSERT(!S.freed, "a callback after hz_api_free");
    FUZZ_ASSERT(++calls_done[which] == 1, "call %d completed twice", which);
    if (r->err == 0 && r->status >= 200 && r->status < 300 && !r->action_failed && !r->dry_run &&
        r->status != 204)
        FUZZ_ASSERT(json_is_object(r->body),
                    "call %d succeeded with status %d without a JSON object", which, r->status);
}

static void
on_call(void *arg, const struct hz_result *r)
{
    check_result((int)(intptr_t)arg, r);
}

static void
on_list(void *arg, const struct hz_result *r, json_t *items)
{
    check_result((int)(intptr_t)arg, r);
    if (r->err == 0 && r->status >= 200 && r->status < 300)
        FUZZ_ASSERT(json_is_array(items), "a list succeeded without its items");
}

/* Split the next record off *p (NUL-terminated text of the input) into
 * resp; headers is scratch the size of the input. 0 when there is none. */
static int
next_record(char **p, struct plb_http_resp *resp)
{
    char *rec = *p;
    if (!rec)
        return 0;
    char *sep = strstr(rec, "\n%%\n");
    if (sep) {
        *sep = '\0';
        *p = sep + 4;
    } else {
        *p = NULL;
    }
    *resp = (struct plb_http_resp){0};
    int n = 0;
    if (sscanf(rec, "ERROR %d", &n) == 1) {
        resp->error =
            n >= 1 && n <= PLB_HTTP_E_ABORTED ? (enum plb_http_error)n : PLB_HTTP_E_CONNECT;
        return 1;
    }
    if (sscanf(rec, "HTTP/%*s %d", &n) == 1)
        resp->status = n;
    /* headers: the lines after the status line up to an empty one */
    char *line = strchr(rec, '\n');
    char *body = NULL;
    resp->headers = line ? line + 1 : NULL;
    for (char *q = line ? line + 1 : NULL; q && *q;) {
        char *e = strchr(q, '\n');
        if (*q == '\n' || (q[0] == '\r' && q[1] == '\n')) {
            *q = '\0';
            body = e + 1;
            break;
        }
        q = e ? e + 1 : NULL;
    }
    resp->body = body;
    resp->body_len = body ? strlen(body) : 0;
    return 1;
}

/* Fire the earliest armed timer, moving the clock there. 0 if none. */
static int
fire_timer(void)
{
    struct plb_timer *t = NULL;
    for (size_t i = 0; i < MAX_TIMERS; i++)
        if (S.timers[i].used && S.timers[i].armed && (!t || S.timers[i].due < t->due))
            t = &S.timers[i];
    if (!t)
        return 0;
    if (t->due > S.now)
        S.now = t->due;
    t->armed = 0;
    t->cb(t, t->arg);
    return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&S, 0, sizeof(S));
    memset(calls_done, 0, sizeof(calls_done));
    if (!host.root.size)
        host_init();
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    struct hz_api_cfg cfg = {
        .host = fake_host(&host),
        .endpoint = "http://127.0.0.1:9/v1",
        .token = "fuzz-token",
        .max_in_flight = 4,
    };
    struct hz_api *api = NULL;
    FUZZ_ASSERT(hz_api_new(&cfg, &api) == 0, "hz_api_new");
    json_t *target = json_pack("{s:s, s:{s:s}}", "type", "ip", "ip", "ip", "10.0.1.11");
    json_t *service = json_pack("{s:s, s:i, s:i}", "protocol", "tcp", "listen_port", 443,
                                "destination_port", 30443);
    FUZZ_ASSERT(target && service, "json_pack");
    FUZZ_ASSERT(hz_api_list(api, "/load_balancers?label_selector=robotlb%2Fservice-uid",
                            "load_balancers", on_list, (void *)(intptr_t)CALL_LIST) == 0,
                "hz_api_list");
    FUZZ_ASSERT(hz_api_call(api, "lb/3", "POST", "/load_balancers/3/actions/add_target", target,
                            on_call, (void *)(intptr_t)CALL_ACTION) == 0,
                "hz_api_call");
    FUZZ_ASSERT(hz_api_call(api, "lb/3", "POST", "/load_balancers/3/actions/add_service", service,
                            on_call, (void *)(intptr_t)CALL_QUEUED) == 0,
                "hz_api_call");
    FUZZ_ASSERT(hz_api_call(api, NULL, "GET", "/load_balancers/3", NULL, on_call,
                            (void *)(intptr_t)CALL_READ) == 0,
                "hz_api_call");

    char *cursor = text;
    int records = 1;
    for (int step = 0; step < MAX_STEPS && records; step++) {
        if (S.norder == 0) {
            if (!fire_timer())
                break; /* nothing in flight, nothing armed: every call ended */
            continue;
        }
        struct plb_http_resp resp;
        records = next_record(&cursor, &resp);
        if (!records)
            break;
        struct plb_http_req *r = &S.reqs[S.order[0]];
        plb_http_done_cb done = r->done;
        void *arg = r->arg;
        unlist(r);
        done(r, &resp, arg);
    }
    /* The rest is cancelled: every callback runs, with -ECANCELED. */
    hz_api_cancel_all(api);
    for (int i = 0; i < NCALLS; i++)
        FUZZ_ASSERT(calls_done[i] == 1, "call %d completed %d times", i, calls_done[i]);
    hz_api_free(api);
    S.freed = 1;
    for (int step = 0; step < MAX_STEPS && fire_timer(); step++)
        ;
    free(text);
    return 0;
}
