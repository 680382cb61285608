/*
 * reactor: clocks, timers with jitter, and fd watches on libevent.
 *
 * Timers keep their own deadline in microseconds on CLOCK_MONOTONIC and
 * re-arm themselves as one-shot libevent timers before each callback, so
 * every period gets fresh jitter and a callback may cancel, re-arm or free
 * its own timer. An event base on the coarse monotonic clock (libevent's
 * default) can wake a few milliseconds early; such a wake-up is re-armed for
 * the rest of the delay instead of firing, so a timer never fires before
 * its deadline as core_now_ms() sees it.
 */
#include "reactor.h"

#include <errno.h>
#include <event2/event.h>
#include <math.h>
#include <stddef.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "num.h"
#include "log.h"

/* Both handles begin with their event (see handle_new). */
struct plb_timer {
    struct event *ev;
    plb_timer_cb cb;
    void *arg;
    int64_t deadline_us; /* monotonic time of the next fire */
    int64_t period_ms;   /* 0: one-shot */
    double jitter;
    int armed;
};

struct plb_io {
    struct event *ev;
    plb_io_cb cb;
    void *arg;
    int fd;
};
_Static_assert(offsetof(struct plb_timer, ev) == 0 && offsetof(struct plb_io, ev) == 0,
               "handle_new makes the first member");

/* ------------------------------------------------------------------------ */
/* Clocks                                                                   */

static int64_t
clock_us(clockid_t id)
{
    struct timespec ts;

    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t
core_now_ms(void)
{
    return clock_us(CLOCK_MONOTONIC) / 1000;
}

int64_t
core_wall_ms(void)
{
    return clock_us(CLOCK_REALTIME) / 1000;
}

struct event_base *
core_event_base_new(void)
{
    /* No EVENT_BASE_FLAG_PRECISE_TIMER: with it libevent re-arms a timerfd
     * on every epoll_wait, which costs the proxy's data path about 7 % of
     * its request rate (measured with tests/bench/proxy). Millisecond epoll
     * timeouts are precise enough, and timer_fire re-arms a timer that
     * woke early, so no timer fires before its deadline either way. */
    return event_base_new();
}

/* A new zeroed timer or io handle of size bytes, its event (the first
 * member) made on base for fd and what with fire called back with the
 * handle. NULL on allocation failure. */
static void *
handle_new(size_t size, struct event_base *base, evutil_socket_t fd, short what,
           event_callback_fn fire)
{
    struct event **h = core_calloc(1, size);
    if (!h)
        return NULL;
    *h = event_new(base, fd, what, fire, h);
    if (!*h) {
        core_free(h);
        return NULL;
    }
    return h;
}

void
core_event_clear(struct event **evp)
{
    if (*evp) {
        event_free(*evp);
        *evp = NULL;
    }
}

/* ------------------------------------------------------------------------ */
/* Random numbers for jitter: xorshift64*, seeded once without blocking.    */

static _Thread_local uint64_t rng_state; /* per thread: workers have timers */

static uint64_t
rng_next(void)
{
    if (rng_state == 0) {
        uint64_t seed = 0;
        if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
            seed = (uint64_t)clock_us(CLOCK_REALTIME) ^ ((uint64_t)getpid() << 32) ^
                   (uint64_t)clock_us(CLOCK_MONOTONIC);
        /* splitmix64 finaliser spreads a weak seed; 0 is the unseeded mark */
        seed += 0x9e3779b97f4a7c15ull;
        seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ull;
        seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebull;
        seed ^= seed >> 31;
        rng_state = seed ? seed : 0x2545f4914f6cdd1dull;
    }
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

double
core_random_unit(void)
{
    return (double)(rng_next() >> 11) * 0x1.0p-53;
}

double
core_jitter_delay(int64_t delay_ms, double jitter, double unit_random)
{
    return (double)delay_ms * (1.0 + jitter * unit_random);
}

/* One delay in microseconds, with fresh jitter. */
static int64_t
jittered_us(int64_t delay_ms, double jitter)
{
    if (jitter <= 0.0 || delay_ms == 0)
        return delay_ms * 1000;
    return core_llround(core_jitter_delay(delay_ms, jitter, core_random_unit()) * 1000.0);
}

/* ------------------------------------------------------------------------ */
/* Timers                                                                   */

/* Add t's libevent timer for the time left until its deadline. 0 or -ENOMEM. */
static int
timer_schedule(plb_timer *t)
{
    int64_t left = t->deadline_us - clock_us(CLOCK_MONOTONIC);
    struct timeval tv;

    if (left < 0)
        left = 0;
    tv.tv_sec = (time_t)(left / 1000000);
    tv.tv_usec = (suseconds_t)(left % 1000000);
    if (evtimer_add(t->ev, &tv) != 0)
        return -ENOMEM;
    return 0;
}

static void
timer_fire(evutil_socket_t fd, short what, void *p)
{
    plb_timer *t = p;
    int64_t now = clock_us(CLOCK_MONOTONIC);

    (void)fd;
    (void)what;
    if (!t->armed)
        return;
    /* Early wake-up of a coarse clock: wait for the rest. */
    if (now < t->deadline_us && timer_schedule(t) == 0)
        return;
    if (t->period_ms > 0) {
        /* Unjittered: from the previous deadline, so the schedule does not
         * drift. Jittered: from now, so every gap between fires is a whole
         * jittered period. */
        int64_t from = t->jitter > 0.0 ? now : t->deadline_us;
        int64_t next = from + jittered_us(t->period_ms, t->jitter);
        if (next < now) /* stalled past a whole period: drop missed fires */
            next = now + jittered_us(t->period_ms, t->jitter);
        t->deadline_us = next;
        if (timer_schedule(t) != 0) {
            CORE_ERR("timer: cannot re-arm periodic timer (out of memory); it stops");
            t->armed = 0;
        }
    } else {
        t->armed = 0;
    }
    /* Last: the callback may cancel, re-arm or free t. */
    t->cb(t, t->arg);
}

plb_timer *
core_timer_new(struct event_base *base, plb_timer_cb cb, void *arg)
{
    plb_timer *t;

    if (!base || !cb)
        return NULL;
    t = handle_new(sizeof *t, base, -1, 0, timer_fire);
    if (!t)
        return NULL;
    t->cb = cb;
    t->arg = arg;
    return t;
}

int
core_timer_arm(plb_timer *t, int64_t delay_ms, int64_t period_ms, double jitter)
{
    int rc;

    if (!t || delay_ms < 0 || delay_ms > CORE_TIMER_MAX_MS || period_ms < 0 ||
        period_ms > CORE_TIMER_MAX_MS || !(jitter >= 0.0 && jitter <= 1.0))
        return -EINVAL;
    t->period_ms = period_ms;
    t->jitter = jitter;
    t->deadline_us = clock_us(CLOCK_MONOTONIC) + jittered_us(delay_ms, jitter);
    t->armed = 1;
    rc = timer_schedule(t);
    if (rc != 0) {
        event_del(t->ev);
        t->armed = 0;
    }
    return rc;
}

void
core_timer_cancel(plb_timer *t)
{
    if (!t)
        return;
    event_del(t->ev);
    t->armed = 0;
}

int
core_timer_pending(const plb_timer *t)
{
    return t && t->armed;
}

void
core_timer_free(plb_timer *t)
{
    if (!t)
        return;
    /* event_free deletes the event first; libevent allows it from inside
     * the event's own callback, and timer_fire does not touch t after the
     * user callback. */
    event_free(t->ev);
    core_free(t);
}

/* ------------------------------------------------------------------------ */
/* File descriptor watches                                                  */

/* The PLB_IO_* bits and libevent's, in one place for both directions. */
static const struct {
    int plb;
    short ev;
} io_bits[] = {
    {PLB_IO_READ, EV_READ},       {PLB_IO_WRITE, EV_WRITE}, {PLB_IO_CLOSED, EV_CLOSED},
    {PLB_IO_TIMEOUT, EV_TIMEOUT}, {PLB_IO_EDGE, EV_ET},
};

/* bits translated through io_bits: libevent's to PLB_IO_* when to_plb,
 * else PLB_IO_* to libevent's. */
static int
io_bits_map(int bits, int to_plb)
{
    int out = 0;
    for (size_t i = 0; i < sizeof(io_bits) / sizeof(io_bits[0]); i++)
        if (bits & (to_plb ? io_bits[i].ev : io_bits[i].plb))
            out |= to_plb ? io_bits[i].plb : io_bits[i].ev;
    return out;
}

static void
io_fire(evutil_socket_t fd, short what, void *p)
{
    plb_io *io = p;
    /* epoll reports EV_ET with each event of an edge-triggered watch: a
     * mode, not something that happened. */
    int w = io_bits_map(what & ~EV_ET, 1);

    (void)fd;
    /* Last: the callback may free io. */
    io->cb(io, io->fd, w, io->arg);
}

plb_io *
core_io_new(struct event_base *base, int fd, int what, plb_io_cb cb, void *arg)
{
    plb_io *io;
    short ev;

    if (!base || !cb || fd < 0 ||
        (what & ~(PLB_IO_READ | PLB_IO_WRITE | PLB_IO_EDGE | PLB_IO_CLOSED)) != 0 ||
        (what & (PLB_IO_READ | PLB_IO_WRITE)) == 0)
        return NULL;
    ev = (short)(io_bits_map(what, 0) | EV_PERSIST);
    /* PLB_IO_CLOSED is a hint: left out where the backend cannot report it
     * (EOF still shows as a read of 0). */
    if (!(event_base_get_features(base) & EV_FEATURE_EARLY_CLOSE))
        ev &= (short)~EV_CLOSED;
    io = handle_new(sizeof *io, base, fd, ev, io_fire);
    if (!io)
        return NULL;
    io->cb = cb;
    io->arg = arg;
    io->fd = fd;
    return io;
}

int
core_io_add(plb_io *io, int64_t timeout_ms)
{
    struct timeval tv;

    if (!io || timeout_ms < 0 || timeout_ms > CORE_TIMER_MAX_MS)
        return -EINVAL;
    if (timeout_ms == 0) {
        /* event_add without a timeout keeps an earlier one: remove it. An
         * added watch stays in the kernel's list either way. */
        if (event_pending(io->ev, EV_READ | EV_WRITE, NULL))
            return event_remove_timer(io->ev) == 0 ? 0 : -ENOMEM;
        return event_add(io->ev, NULL) == 0 ? 0 : -ENOMEM;
    }
    /* On an added watch this only reschedules the timeout. */
    tv.tv_sec = (time_t)(timeout_ms / 1000);
    tv.tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
    return event_add(io->ev, &tv) == 0 ? 0 : -ENOMEM;
}

void
core_io_activate(plb_io *io, int what)
{
    short ev = 0;

    if (!io)
        return;
    if (what & PLB_IO_READ)
        ev |= EV_READ;
    if (what & PLB_IO_WRITE)
        ev |= EV_WRITE;
    if (ev)
        event_active(io->ev, ev, 0);
}

void
core_io_del(plb_io *io)
{
    if (io)
        event_del(io->ev);
}

void
core_io_free(plb_io *io)
{
    if (!io)
        return;
    event_free(io->ev); /* allowed from inside io_fire, see there */
    core_free(io);
}
