/*
 * fuzz_lease: Lease objects and answers into the leader's state machine
 * (modules/mod_leader/le_machine.c), the input read as a script of steps:
 * time passing, a GET answered (status, and a Lease JSON object decoded
 * with jansson into a record: holder, renewTime, duration, transitions,
 * some of them garbage or another holder's), a write answered (echoing
 * what was sent, or another holder, or another renewTime, or no Lease),
 * stop. Invariants, checked after every step:
 *   - the gate is open only while leading, and leading starts only on a
 *     write answer naming us with the renewTime sent;
 *   - a leader's gate closes by its renew_deadline: never open past the
 *     sending of the last successful write + renew_deadline.
 */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "le.h"

#define ME "fuzz-me"

static struct {
    struct le m;
    int64_t now, wall, wake;
    int inflight; /* enum le_req */
    struct le_record sent;
    int gate_open;
    int64_t last_ok_sent; /* monotonic send time of the last accepted write */
    int64_t write_sent;
    int lead_started_ok; /* leading began on an accepted answer */
    int pending_ok;      /* the write answer being delivered is ours */
} S;

static int64_t
f_now(void *a)
{
    (void)a;
    return S.now;
}
static int64_t
f_wall(void *a)
{
    (void)a;
    return S.wall;
}
static double
f_random(void *a)
{
    (void)a;
    return 0.5;
}
static int
f_get(void *a)
{
    (void)a;
    S.inflight = LE_REQ_GET;
    return 0;
}
static int
f_create(void *a, const struct le_record *r)
{
    (void)a;
    S.inflight = LE_REQ_CREATE;
    S.sent = *r;
    S.write_sent = S.now;
    return 0;
}
static int
f_update(void *a, const struct le_record *r, const char *rv)
{
    (void)a;
    (void)rv;
    S.inflight = LE_REQ_UPDATE;
    S.sent = *r;
    S.write_sent = S.now;
    return 0;
}
static void
f_cancel(void *a)
{
    (void)a;
    S.inflight = LE_REQ_NONE;
}
static void
f_wake_at(void *a, int64_t at)
{
    (void)a;
    S.wake = at;
}
static int
f_gate(void *a, int open)
{
    (void)a;
    S.gate_open = open;
    if (open)
        FUZZ_ASSERT(S.pending_ok, "the gate opened on an answer that is not our Lease");
    else
        le_gate_closed(&S.m);
    return 0;
}
static void
f_leading(void *a, int is)
{
    (void)a;
    if (is)
        S.lead_started_ok = S.pending_ok;
}
static void
f_holder(void *a, const char *o, const char *n)
{
    (void)a;
    (void)o;
    (void)n;
}
static void
f_renewed(void *a, int64_t w)
{
    (void)a;
    (void)w;
}
static void
f_note(void *a, enum le_note w, const char *d)
{
    (void)a;
    (void)w;
    (void)d;
}
static void
f_stopped(void *a)
{
    (void)a;
}

static const struct le_ops ops = {
    .now_ms = f_now,
    .wall_ms = f_wall,
    .random = f_random,
    .get = f_get,
    .create = f_create,
    .update = f_update,
    .cancel = f_cancel,
    .wake_at = f_wake_at,
    .gate = f_gate,
    .leading = f_leading,
    .holder = f_holder,
    .renewed = f_renewed,
    .note = f_note,
    .stopped = f_stopped,
};

/* A record from a JSON Lease (as mod_leader reads one); 0, or -1 when not
 * a Lease the module would accept. */
static int
record_of(json_t *obj, struct le_record *r)
{
    json_t *spec = json_object_get(obj, "spec");
    memset(r, 0, sizeof(*r));
    if (!json_is_object(spec))
        return -1;
    json_t *h = json_object_get(spec, "holderIdentity"), *rt = json_object_get(spec, "renewTime");
    json_t *d = json_object_get(spec, "leaseDurationSeconds");
    json_t *t = json_object_get(spec, "leaseTransitions");
    if ((h && !json_is_string(h)) || (rt && !json_is_string(rt)) || (d && !json_is_integer(d)) ||
        (t && !json_is_integer(t)))
        return -1;
    if ((h && strlen(json_string_value(h)) >= LE_HOLDER_MAX) ||
        (rt && strlen(json_string_value(rt)) >= LE_TIME_MAX))
        return -1;
    snprintf(r->holder, sizeof(r->holder), "%s", h ? json_string_value(h) : "");
    snprintf(r->renew_time, sizeof(r->renew_time), "%s", rt ? json_string_value(rt) : "");
    r->duration_s = d ? json_integer_value(d) : 0;
    r->transitions = t ? json_integer_value(t) : 0;
    return 0;
}

static void
check(void)
{
    if (S.gate_open) {
        FUZZ_ASSERT(le_is_leader(&S.m), "gate open while not leading");
        FUZZ_ASSERT(S.lead_started_ok, "leading began on a bad answer");
        FUZZ_ASSERT(S.now <= S.last_ok_sent + 2000, "gate open %lld ms past renew_deadline",
                    (long long)(S.now - S.last_ok_sent - 2000));
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct le_params p = {
        .identity = ME,
        .lease_duration_ms = 3000,
        .renew_deadline_ms = 2000,
        .retry_period_ms = 500,
        .release_on_cancel = 1,
    };
    memset(&S, 0, sizeof(S));
    S.now = 1000000;
    S.wall = 1764580000000;
    S.wake = -1;
    le_init(&S.m, &p, &ops, NULL);
    le_start(&S.m);
    check();

    size_t i = 0;
    while (i < size) {
        uint8_t op = data[i++];
        switch (op % 5) {
        case 0: { /* time passes, ticking at each wake-up */
            int64_t end = S.now + (int64_t)(op / 5) * 40;
            while (S.wake >= 0 && S.wake <= end) {
                int64_t step = S.wake > S.now ? S.wake - S.now : 0;
                S.now += step;
                S.wall += step;
                int64_t before = S.wake;
                le_tick(&S.m);
                check();
                if (S.wake == before && S.wake <= S.now)
                    break;
            }
            S.wall += end > S.now ? end - S.now : 0;
            S.now = end > S.now ? end : S.now;
            le_tick(&S.m);
            break;
        }
        case 1: /* the GET answered: 404, or a Lease from the next bytes */
        case 2:
            if (S.inflight == LE_REQ_GET) {
                size_t n = i < size ? data[i++] : 0;
                if (n > size - i)
                    n = size - i;
                json_t *obj = json_loadb((const char *)data + i, n, 0, NULL);
                i += n;
                struct le_record r;
                S.inflight = LE_REQ_NONE;
                struct le_result res = {.status = 404};
                if (op % 5 == 2 && obj && record_of(obj, &r) == 0) {
                    res.status = 200;
                    res.rec = &r;
                    res.rv = "7";
                } else if (op % 5 == 2) {
                    res.status = 200; /* garbage: no record */
                }
                le_get_done(&S.m, &res);
                json_decref(obj);
            }
            break;
        case 3: /* a write answered */
            if (S.inflight == LE_REQ_CREATE || S.inflight == LE_REQ_UPDATE) {
                uint8_t how = i < size ? data[i++] : 0;
                struct le_record r = S.sent;
                struct le_result res = {.status = 200, .rv = "8"};
                switch (how % 5) {
                case 0:
                    res.rec = &r;
                    break; /* our Lease back */
                case 1:
                    snprintf(r.holder, sizeof(r.holder), "other");
                    res.rec = &r;
                    break;
                case 2:
                    snprintf(r.renew_time, sizeof(r.renew_time), "2001-01-01T00:00:00.000000Z");
                    res.rec = &r;
                    break;
                case 3:
                    res.rec = NULL;
                    res.message = "not a Lease";
                    break;
                case 4:
                    res.status = how & 8 ? 409 : 500;
                    break;
                }
                int ok = res.status == 200 && how % 5 == 0;
                int64_t sent = S.write_sent;
                S.inflight = LE_REQ_NONE;
                S.pending_ok = ok;
                le_write_done(&S.m, &res);
                S.pending_ok = 0;
                if (ok && le_is_leader(&S.m))
                    S.last_ok_sent = sent;
            }
            break;
        case 4:
            if (op & 0x80) {
                le_stop(&S.m, 1000);
                check();
                le_abandon(&S.m);
                return 0;
            }
            break;
        }
        check();
    }
    le_abandon(&S.m);
    return 0;
}
