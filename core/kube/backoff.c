/*
 * backoff: when an informer lists and watches again, as a pure state
 * machine. The rules are those of the spec (003, "Two-level endpoint
 * discovery" and "Endpoint discovery"), one per branch below:
 *
 *  - reconnects use exponential backoff: the delay starts at 1 s and doubles
 *    up to 30 s; each delay gets up to 25 % random jitter on top;
 *  - a watch that stayed open for at least 30 s and then closed without an
 *    error is re-opened immediately;
 *  - any other error after such a watch (an error ending a watch that was
 *    open >= 30 s, or hitting the re-watch right after such a watch closed
 *    cleanly), except 410 Gone, starts the backoff from 1 s again;
 *  - on 410 Gone a full re-list runs at once; after a successful re-list the
 *    next watch starts at once if the 410 ended a watch that was open for at
 *    least 30 s, or hit the re-watch right after such a watch closed without
 *    an error; otherwise it waits for the backoff. A 410 neither advances
 *    nor resets the backoff.
 *
 * Choices where the spec is silent: a watch that closes cleanly before 30 s
 * is reconnected like an error (the backoff applies; it is not counted as a
 * discovery error by the informer); a failed list (initial or re-list) is
 * retried after the backoff; a successful list that did not follow a 410
 * (the first one) is followed by a watch at once.
 */
#include "kube-internal.h"

void
kb_init(struct kb_machine *m)
{
    *m = (struct kb_machine){.next_ms = KB_INITIAL_MS};
}

void
kb_watch_started(struct kb_machine *m, int64_t now_ms)
{
    m->watch_started = now_ms;
}

/* Wait the current backoff step (with jitter) and double the next one. */
static struct kb_step
wait_backoff(struct kb_machine *m, enum kb_action a, double rnd)
{
    int64_t base = m->next_ms;
    if (rnd < 0 || rnd != rnd)
        rnd = 0;
    if (rnd >= 1)
        rnd = 0.999999;
    m->next_ms = base * 2 > KB_MAX_MS ? KB_MAX_MS : base * 2;
    return (struct kb_step){a, base + (int64_t)((double)base * KB_JITTER * rnd), base};
}

static struct kb_step
at_once(enum kb_action a)
{
    return (struct kb_step){a, 0, 0};
}

struct kb_step
kb_next(struct kb_machine *m, enum kb_input in, int64_t now_ms, double rnd)
{
    int long_watch = now_ms - m->watch_started >= KB_LONG_WATCH_MS;
    int after_long = m->rewatch_after_long;

    m->rewatch_after_long = 0;
    switch (in) {
    case KB_LIST_OK:
        if (!m->relisting)
            return at_once(KB_DO_WATCH);
        m->relisting = 0;
        if (m->gone_fast) {
            m->gone_fast = 0;
            return at_once(KB_DO_WATCH);
        }
        return wait_backoff(m, KB_DO_WATCH, rnd);
    case KB_LIST_FAILED:
        return wait_backoff(m, KB_DO_LIST, rnd);
    case KB_WATCH_CLOSED:
        if (long_watch) {
            m->rewatch_after_long = 1;
            return at_once(KB_DO_WATCH);
        }
        /* a short clean close reconnects like an error */
        __attribute__((fallthrough));
    case KB_WATCH_ERROR:
        if (long_watch || after_long)
            m->next_ms = KB_INITIAL_MS;
        return wait_backoff(m, KB_DO_WATCH, rnd);
    case KB_WATCH_GONE:
        m->gone_fast = long_watch || after_long;
        m->relisting = 1;
        return at_once(KB_DO_LIST);
    }
    return wait_backoff(m, KB_DO_LIST, rnd);
}
