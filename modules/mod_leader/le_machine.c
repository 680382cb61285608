/*
 * le_machine: the leader election state machine (see le.h for the rules and
 * where they come from). Pure: every effect goes through struct le_ops, so
 * the unit tests drive it with a fake clock, a fixed random source and
 * recorded requests.
 */
#include <errno.h>
#include <string.h>

#include "le.h"

/* client-go's JitterFactor for acquire attempts. */
#define LE_JITTER_FACTOR 1.2

int
le_record_equal(const struct le_record *a, const struct le_record *b)
{
    return strcmp(a->holder, b->holder) == 0 && a->duration_s == b->duration_s &&
           strcmp(a->acquire_time, b->acquire_time) == 0 &&
           strcmp(a->renew_time, b->renew_time) == 0 && a->transitions == b->transitions &&
           strcmp(a->strategy, b->strategy) == 0 && strcmp(a->preferred, b->preferred) == 0;
}

static void
copy_str(char *dst, size_t len, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= len)
        n = len - 1;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

void
le_init(struct le *m, const struct le_params *p, const struct le_ops *ops, void *arg)
{
    memset(m, 0, sizeof(*m));
    m->p = *p;
    m->ops = ops;
    m->arg = arg;
    m->state = LE_INIT;
}

int
le_is_leader(const struct le *m)
{
    return m->state == LE_LEADER;
}

static int64_t
now(struct le *m)
{
    return m->ops->now_ms(m->arg);
}

static int
is_me(const struct le *m, const char *holder)
{
    return strcmp(holder, m->p.identity) == 0;
}

/* Ask for the next wake-up: the earliest of the request deadline, the
 * leader's deadline, the next attempt and the stop deadline that apply. */
static void
schedule(struct le *m)
{
    int64_t at = -1;
#define EARLIER(t)                                                                                 \
    do {                                                                                           \
        if (at < 0 || (t) < at)                                                                    \
            at = (t);                                                                              \
    } while (0)
    switch (m->state) {
    case LE_CANDIDATE:
    case LE_LEADER:
        if (m->req != LE_REQ_NONE)
            EARLIER(m->req_deadline);
        else
            EARLIER(m->next_attempt);
        if (m->state == LE_LEADER)
            EARLIER(m->lead_deadline);
        break;
    case LE_CLOSING:
        if (m->stopping)
            EARLIER(m->stop_deadline);
        break;
    case LE_RELEASING:
        EARLIER(m->req_deadline);
        break;
    case LE_INIT:
    case LE_STOPPED:
        break;
    }
#undef EARLIER
    m->ops->wake_at(m->arg, at);
}

static void
cancel_request(struct le *m)
{
    if (m->req != LE_REQ_NONE) {
        m->ops->cancel(m->arg);
        m->req = LE_REQ_NONE;
    }
}

/* Remember rec as the observed record; the observed time restarts only when
 * it differs from the one observed before. */
static void
observe(struct le *m, const struct le_record *rec, const char *rv)
{
    if (rv)
        copy_str(m->rv, sizeof(m->rv), rv);
    if (m->have_observed && le_record_equal(&m->observed, rec))
        return;
    char old[LE_HOLDER_MAX];
    copy_str(old, sizeof(old), m->have_observed ? m->observed.holder : "");
    int first = !m->have_observed;
    m->observed = *rec;
    m->have_observed = 1;
    m->observed_ms = now(m);
    if (first ? rec->holder[0] != '\0' : strcmp(old, rec->holder) != 0)
        m->ops->holder(m->arg, old, rec->holder);
}

static void release_or_finish(struct le *m);

/* Close the gate: ops->gate may call le_gate_closed before returning, so
 * nothing may touch m after it. */
static void
close_gate(struct le *m)
{
    m->state = LE_CLOSING;
    schedule(m);
    if (m->ops->gate(m->arg, 0) < 0)
        le_gate_closed(m);
}

/* The leader lost: stop the gated write loops now. */
static void
lose(struct le *m, enum le_note why, const char *detail)
{
    cancel_request(m);
    m->ops->note(m->arg, why, detail);
    m->ops->leading(m->arg, 0);
    close_gate(m);
}

static void start_attempt(struct le *m);

/* An attempt failed without losing anything: try again later. */
static void
attempt_failed(struct le *m)
{
    int64_t t = now(m);
    m->req = LE_REQ_NONE;
    if (m->state == LE_LEADER) {
        m->next_attempt = t + m->p.retry_period_ms;
    } else {
        double r = m->ops->random(m->arg);
        if (r < 0 || r >= 1)
            r = 0;
        m->next_attempt = t + m->p.retry_period_ms +
                          (int64_t)(r * LE_JITTER_FACTOR * (double)m->p.retry_period_ms);
        /* No later than the moment the observed lease expires. */
        if (m->have_observed && m->observed.holder[0] && !is_me(m, m->observed.holder)) {
            int64_t expiry = m->observed_ms + m->observed.duration_s * 1000;
            if (expiry > t && expiry < m->next_attempt)
                m->next_attempt = expiry;
        }
    }
    schedule(m);
}

/* A write holding the Lease succeeded. */
static void
attempt_succeeded(struct le *m, const struct le_record *written, const char *rv)
{
    int64_t t = now(m);
    int64_t sent = m->req_sent;
    m->req = LE_REQ_NONE;
    observe(m, written, rv);
    m->ops->renewed(m->arg, m->ops->wall_ms(m->arg));
    m->lead_deadline = sent + m->p.renew_deadline_ms;
    m->next_attempt = t + m->p.retry_period_ms;
    if (m->state == LE_CANDIDATE) {
        if (t >= m->lead_deadline) {
            /* Won too late to be sure of it: the next attempt renews. */
            m->ops->note(m->arg, LE_NOTE_ATTEMPT_FAILED,
                         "the write completed after renew_deadline");
            attempt_failed(m);
            return;
        }
        m->state = LE_LEADER;
        m->term++;
        m->ops->leading(m->arg, 1);
        schedule(m);
        m->ops->gate(m->arg, 1);
        return;
    }
    schedule(m);
}

static void finish_stop(struct le *m);

/* The server's message of answer r, or dflt when it has none. */
static const char *
message_or(const struct le_result *r, const char *dflt)
{
    return r->message && *r->message ? r->message : dflt;
}

#define NOT_SENT "the request could not be sent"

/* The op sending req returned rc: now awaited, or (rc < 0) failed: the
 * attempt, or while releasing the release (why says so). */
static void
send_request(struct le *m, enum le_req req, int rc, const char *why)
{
    if (rc < 0 && m->state == LE_RELEASING) {
        m->ops->note(m->arg, LE_NOTE_RELEASE_FAILED, why);
        finish_stop(m);
        return;
    }
    if (rc < 0) {
        m->ops->note(m->arg, LE_NOTE_ATTEMPT_FAILED, why);
        attempt_failed(m);
        return;
    }
    m->req = req;
    schedule(m);
}

/* A request of an attempt is sent at t. A leader's request dies with its
 * leadership; a candidate's after renew_deadline, the timeout client-go's
 * users give the lock's client. */
static void
attempt_window(struct le *m, int64_t t)
{
    m->req_sent = t;
    m->req_deadline = m->state == LE_LEADER ? m->lead_deadline : t + m->p.renew_deadline_ms;
}

/* A request of the release is sent at t: renew_deadline, within the
 * shutdown grace. */
static void
release_window(struct le *m, int64_t t)
{
    m->req_sent = t;
    m->req_deadline = t + m->p.renew_deadline_ms;
    if (m->req_deadline > m->stop_deadline)
        m->req_deadline = m->stop_deadline;
}

static void
start_attempt(struct le *m)
{
    attempt_window(m, now(m));
    m->req = LE_REQ_GET;
    send_request(m, LE_REQ_GET, m->ops->get(m->arg), NOT_SENT);
}

/* The record this replica writes now; keeps acquireTime and
 * leaseTransitions when the observed holder is already us. */
static void
build_record(struct le *m, struct le_record *r, int taking_over)
{
    char ts[LE_TIME_MAX];
    memset(r, 0, sizeof(*r));
    copy_str(r->holder, sizeof(r->holder), m->p.identity);
    r->duration_s = m->p.lease_duration_ms / 1000;
    if (le_microtime(m->ops->wall_ms(m->arg), ts, sizeof(ts)) < 0)
        ts[0] = '\0';
    copy_str(r->renew_time, sizeof(r->renew_time), ts);
    if (taking_over) {
        copy_str(r->acquire_time, sizeof(r->acquire_time), ts);
        r->transitions = m->have_observed ? m->observed.transitions + 1 : 0;
    } else {
        copy_str(r->acquire_time, sizeof(r->acquire_time), m->observed.acquire_time);
        r->transitions = m->observed.transitions;
    }
    if (m->have_observed) {
        copy_str(r->strategy, sizeof(r->strategy), m->observed.strategy);
        copy_str(r->preferred, sizeof(r->preferred), m->observed.preferred);
    }
}

static void
on_get(struct le *m, const struct le_result *r)
{
    int64_t t = now(m);
    if (r->status == 404) {
        /* No Lease: create one holding it. */
        build_record(m, &m->sent, 1);
        m->sent.transitions = 0;
        attempt_window(m, t);
        m->req = LE_REQ_CREATE;
        send_request(m, LE_REQ_CREATE, m->ops->create(m->arg, &m->sent), NOT_SENT);
        return;
    }
    if (r->status != 200 || !r->rec) {
        m->ops->note(m->arg, LE_NOTE_ATTEMPT_FAILED, message_or(r, "unreadable Lease"));
        attempt_failed(m);
        return;
    }
    observe(m, r->rec, r->rv);
    const struct le_record *o = &m->observed;
    if (m->state == LE_LEADER && !is_me(m, o->holder)) {
        lose(m, LE_NOTE_LOST_HOLDER, o->holder);
        return;
    }
    if (o->holder[0] && !is_me(m, o->holder) && m->observed_ms + o->duration_s * 1000 > t) {
        m->ops->note(m->arg, LE_NOTE_HELD, o->holder);
        m->req = LE_REQ_NONE;
        attempt_failed(m);
        return;
    }
    build_record(m, &m->sent, !is_me(m, o->holder));
    attempt_window(m, t);
    m->req = LE_REQ_UPDATE;
    send_request(m, LE_REQ_UPDATE, m->ops->update(m->arg, &m->sent, m->rv), NOT_SENT);
}

static void
on_write(struct le *m, const struct le_result *r)
{
    enum le_req req = m->req;
    if (r->status >= 200 && r->status < 300) {
        /* Held only if the server stored what we sent: its answer is a
         * Lease naming us, with our renewTime. */
        const char *bad = NULL;
        if (!r->rec)
            bad = message_or(r, "the answer is not a Lease");
        else if (!is_me(m, r->rec->holder))
            bad = "the answer names another holder";
        else if (strcmp(r->rec->renew_time, m->sent.renew_time) != 0)
            bad = "the answer's renewTime is not the one sent";
        if (bad) {
            m->ops->note(m->arg, LE_NOTE_ATTEMPT_FAILED, bad);
            attempt_failed(m);
            return;
        }
        if (req == LE_REQ_CREATE)
            m->ops->note(m->arg, LE_NOTE_CREATED, NULL);
        attempt_succeeded(m, r->rec, r->rv);
        return;
    }
    if (r->status == 409 && req == LE_REQ_UPDATE) {
        m->req = LE_REQ_NONE;
        if (m->state == LE_LEADER) {
            lose(m, LE_NOTE_LOST_CONFLICT, r->message);
            return;
        }
        m->ops->note(m->arg, LE_NOTE_CONFLICT, r->message);
        attempt_failed(m);
        return;
    }
    if (r->status == 404 && req == LE_REQ_CREATE) {
        m->ops->note(m->arg, LE_NOTE_NS_MISSING, r->message);
        attempt_failed(m);
        return;
    }
    m->ops->note(m->arg, r->status == 409 ? LE_NOTE_CONFLICT : LE_NOTE_ATTEMPT_FAILED,
                 message_or(r, "request failed"));
    attempt_failed(m);
}

void
le_start(struct le *m)
{
    if (m->state != LE_INIT)
        return;
    m->state = LE_CANDIDATE;
    start_attempt(m);
}

static void
finish_stop(struct le *m)
{
    cancel_request(m);
    m->state = LE_STOPPED;
    m->ops->wake_at(m->arg, -1);
    m->ops->stopped(m->arg);
}

/* Stopping, the gated stops done: release if we hold the Lease. */
static void
release_or_finish(struct le *m)
{
    int64_t t = now(m);
    if (!m->p.release_on_cancel || !m->have_observed || !is_me(m, m->observed.holder) ||
        !m->rv[0]) {
        finish_stop(m);
        return;
    }
    if (t >= m->stop_deadline) {
        m->ops->note(m->arg, LE_NOTE_RELEASE_FAILED, "no time left within the shutdown grace");
        finish_stop(m);
        return;
    }
    m->release_tries++;
    /* client-go's release: no holder, leaseDurationSeconds 1, acquireTime
     * and renewTime now, the observed transitions */
    build_record(m, &m->sent, 1);
    m->sent.holder[0] = '\0';
    m->sent.duration_s = 1;
    m->sent.transitions = m->observed.transitions;
    m->state = LE_RELEASING;
    release_window(m, t);
    send_request(m, LE_REQ_RELEASE, m->ops->update(m->arg, &m->sent, m->rv), NOT_SENT);
}

/* The release got 409: read the Lease again. */
static void
release_reread(struct le *m)
{
    int64_t t = now(m);
    release_window(m, t);
    send_request(m, LE_REQ_RELEASE_GET, t >= m->req_deadline ? -ETIME : m->ops->get(m->arg),
                 "conflict, and no time left to re-read");
}

static void
on_release_get(struct le *m, const struct le_result *r)
{
    m->req = LE_REQ_NONE;
    if (r->status != 200 || !r->rec) {
        m->ops->note(m->arg, LE_NOTE_RELEASE_FAILED, message_or(r, "cannot re-read the Lease"));
        finish_stop(m);
        return;
    }
    observe(m, r->rec, r->rv);
    release_or_finish(m); /* releases only while it names us */
}

static void
on_release(struct le *m, const struct le_result *r)
{
    m->req = LE_REQ_NONE;
    if (r->status == 409 && m->release_tries < 3) {
        release_reread(m);
        return;
    }
    if (r->status >= 200 && r->status < 300) {
        observe(m, r->rec ? r->rec : &m->sent, r->rv);
        m->ops->note(m->arg, LE_NOTE_RELEASED, NULL);
    } else {
        m->ops->note(m->arg, LE_NOTE_RELEASE_FAILED, message_or(r, "request failed"));
    }
    finish_stop(m);
}

/* A leader whose deadline passed before the answer was handled (a loop
 * that stalled, a process that was stopped) has lost, whatever the answer:
 * another replica may already lead. 1 if so. */
static int
lost_while_away(struct le *m)
{
    if (m->state != LE_LEADER || now(m) < m->lead_deadline)
        return 0;
    m->req = LE_REQ_NONE; /* completed: nothing to cancel */
    lose(m, LE_NOTE_LOST_DEADLINE, NULL);
    return 1;
}

void
le_get_done(struct le *m, const struct le_result *r)
{
    if (m->req == LE_REQ_RELEASE_GET && m->state == LE_RELEASING) {
        on_release_get(m, r);
        return;
    }
    if (m->req != LE_REQ_GET || (m->state != LE_CANDIDATE && m->state != LE_LEADER))
        return;
    if (lost_while_away(m))
        return;
    m->req = LE_REQ_NONE;
    on_get(m, r);
}

void
le_write_done(struct le *m, const struct le_result *r)
{
    if (m->req == LE_REQ_RELEASE && m->state == LE_RELEASING) {
        on_release(m, r);
        return;
    }
    if ((m->req != LE_REQ_CREATE && m->req != LE_REQ_UPDATE) ||
        (m->state != LE_CANDIDATE && m->state != LE_LEADER))
        return;
    if (lost_while_away(m))
        return;
    on_write(m, r);
}

void
le_gate_closed(struct le *m)
{
    if (m->state != LE_CLOSING)
        return;
    if (m->stopping) {
        release_or_finish(m);
        return;
    }
    /* A new term: campaign again, at once. */
    m->state = LE_CANDIDATE;
    start_attempt(m);
}

void
le_tick(struct le *m)
{
    int64_t t = now(m);
    switch (m->state) {
    case LE_LEADER:
        if (t >= m->lead_deadline) {
            lose(m, LE_NOTE_LOST_DEADLINE, NULL);
            return;
        }
        /* fall through */
    case LE_CANDIDATE:
        if (m->req != LE_REQ_NONE) {
            if (t < m->req_deadline)
                break;
            cancel_request(m);
            m->ops->note(m->arg, LE_NOTE_ATTEMPT_FAILED, "request timed out");
            attempt_failed(m);
            return;
        }
        if (t >= m->next_attempt) {
            start_attempt(m);
            return;
        }
        break;
    case LE_CLOSING:
        if (m->stopping && t >= m->stop_deadline) {
            m->ops->note(m->arg, LE_NOTE_RELEASE_SKIPPED, NULL);
            finish_stop(m);
            return;
        }
        break;
    case LE_RELEASING:
        if (t >= m->req_deadline) {
            cancel_request(m);
            m->ops->note(m->arg, LE_NOTE_RELEASE_FAILED, "request timed out");
            finish_stop(m);
            return;
        }
        break;
    case LE_INIT:
    case LE_STOPPED:
        return;
    }
    schedule(m);
}

void
le_stop(struct le *m, int64_t grace_ms)
{
    int64_t t = now(m);
    if (m->stopping || m->state == LE_STOPPED)
        return;
    m->stopping = 1;
    /* Leave a tenth of the grace (at most 1 s) to the daemon. */
    int64_t margin = grace_ms / 10 < 1000 ? grace_ms / 10 : 1000;
    m->stop_deadline = t + (grace_ms > 0 ? grace_ms - margin : 0);
    switch (m->state) {
    case LE_INIT:
        finish_stop(m);
        return;
    case LE_LEADER:
        cancel_request(m);
        m->ops->leading(m->arg, 0);
        close_gate(m);
        return;
    case LE_CANDIDATE:
        cancel_request(m);
        release_or_finish(m);
        return;
    case LE_CLOSING:
        schedule(m);
        return;
    case LE_RELEASING:
    case LE_STOPPED:
        return;
    }
}

void
le_abandon(struct le *m)
{
    cancel_request(m);
    m->state = LE_STOPPED;
}
