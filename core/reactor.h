/*
 * reactor: clocks, timers and file-descriptor watches on the one libevent
 * event base of the daemon.
 *
 * These are the internal functions behind the "time and timers" and "file
 * descriptors" sections of struct plb_host; the host table wraps them one to
 * one. Everything runs on the loop thread; nothing here blocks.
 *
 * Callbacks may free their own handle: the reactor never touches a timer or
 * an io watch after calling its callback.
 */
#ifndef PRISMLB_REACTOR_H
#define PRISMLB_REACTOR_H

#include <stdint.h>

#include "prismlb/module.h"

struct event;
struct event_base;

/* Largest delay, period or io timeout accepted, in milliseconds (~35,000
 * years): keeps deadline arithmetic far from overflow. */
#define CORE_TIMER_MAX_MS ((int64_t)1 << 50)

/* Milliseconds on CLOCK_MONOTONIC (arbitrary origin). */
int64_t core_now_ms(void);
/* Milliseconds since the epoch on CLOCK_REALTIME. */
int64_t core_wall_ms(void);

/* A new event base for the daemon (free with event_base_free). It runs on
 * libevent's default (coarse) monotonic clock; timers still never fire
 * early (see reactor.c). NULL on failure. Any event base works with the
 * functions below. */
struct event_base *core_event_base_new(void);

/* Free the event *evp (owned; NULL is fine) and set *evp to NULL. */
void core_event_clear(struct event **evp);

/* New timer on base (borrowed; must outlive the timer), not armed. cb runs on
 * the loop with the timer and arg (borrowed, passed back as is). Free with
 * core_timer_free. NULL on allocation failure or a NULL base or cb. */
plb_timer *core_timer_new(struct event_base *base, plb_timer_cb cb, void *arg);

/* Arm t: first fire after delay_ms, then every period_ms when period_ms > 0.
 * jitter in [0, 1]: each delay (the first and every period) is lengthened by a
 * uniform random amount up to jitter × that delay, drawn afresh each time.
 * Without jitter, periods run from the previous scheduled fire, so the
 * schedule does not drift; with jitter, each period runs from the moment the
 * previous fire happened, so every gap between fires is at least period_ms.
 * After a stall longer than a period the missed fires are dropped, not
 * replayed. A timer never fires before its
 * deadline on core_now_ms(). Re-arming an armed timer replaces its schedule;
 * arming from inside the timer's own callback is fine. 0, or -EINVAL for a
 * NULL timer, negative or too large delay or period, or jitter outside
 * [0, 1] (NaN included); -ENOMEM if libevent could not add the event. */
int core_timer_arm(plb_timer *t, int64_t delay_ms, int64_t period_ms, double jitter);

/* Disarm t (one-shot or periodic); no callback runs until it is armed again.
 * NULL is fine. Safe from inside the callback. */
void core_timer_cancel(plb_timer *t);

/* 1 if t is armed (a periodic timer stays armed between and during its
 * fires; a one-shot timer is no longer armed once its callback runs), else 0.
 * NULL gives 0. */
int core_timer_pending(const plb_timer *t);

/* Cancel and free t. NULL is fine. Safe from inside t's own callback. */
void core_timer_free(plb_timer *t);

/* The jittered delay: delay_ms × (1 + jitter × unit_random), where
 * unit_random is in [0, 1). Pure; exposed for tests. */
double core_jitter_delay(int64_t delay_ms, double jitter, double unit_random);

/* A uniform random number in [0, 1) from the reactor's PRNG (seeded once,
 * without blocking). Not for secrets. */
double core_random_unit(void);

/* New watch of fd (borrowed: stays the caller's, never closed here) on base
 * for what = PLB_IO_READ and/or PLB_IO_WRITE, optionally with PLB_IO_EDGE
 * (edge-triggered) and PLB_IO_CLOSED (report the peer's FIN where the
 * backend can); persistent once added. cb gets the PLB_IO_* bits that fired
 * (PLB_IO_TIMEOUT alone on a timeout). Free with core_io_free. NULL for a
 * NULL base or cb, a negative fd, what without READ or WRITE or with other
 * bits, or on allocation failure. */
plb_io *core_io_new(struct event_base *base, int fd, int what, plb_io_cb cb, void *arg);

/* Start watching, or change the timeout of a watch already added (without
 * touching the kernel's interest list). timeout_ms > 0 also reports
 * PLB_IO_TIMEOUT after that long without activity (the watch stays added);
 * 0 means no timeout. 0, -EINVAL (NULL io, negative or too large timeout),
 * or -ENOMEM if libevent failed to add the event. */
int core_io_add(plb_io *io, int64_t timeout_ms);

/* Run io's callback with what (PLB_IO_READ/WRITE bits) on the next loop
 * iteration, as if the fd had become ready. NULL is fine. */
void core_io_activate(plb_io *io, int what);

/* Stop watching until core_io_add. NULL is fine. Safe from the callback. */
void core_io_del(plb_io *io);

/* Stop watching and free io; the fd is left open. NULL is fine. Safe from
 * inside io's own callback. */
void core_io_free(plb_io *io);

#endif
