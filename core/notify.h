/*
 * notify: systemd's service notification protocol without libsystemd.
 *
 * A datagram of "KEY=VALUE\n" lines sent to the AF_UNIX socket named by
 * $NOTIFY_SOCKET: a path, or an abstract name written with a leading '@'.
 * Without $NOTIFY_SOCKET every call does nothing and returns 0, so the
 * daemon behaves the same outside systemd. The send is non-blocking and
 * never waits on the event loop.
 */
#ifndef PRISMLB_NOTIFY_H
#define PRISMLB_NOTIFY_H

struct event_base;

/* Send state (borrowed, e.g. "STOPPING=1") to $NOTIFY_SOCKET. 0, or a
 * negative errno (-EINVAL for a malformed address, or the send's error). */
int core_notify(const char *state);

/* Every instance has started: send READY=1 (with MAINPID and a STATUS line)
 * and, when $WATCHDOG_USEC is set (and $WATCHDOG_PID, if set, is this
 * process), arm a timer on base (borrowed; it must outlive
 * core_notify_stop) that sends WATCHDOG=1 every half of that interval from
 * the event loop, so a stuck loop stops the keep-alives. 0 or a negative
 * errno; a failed send is logged, not fatal. */
int core_notify_ready(struct event_base *base, unsigned ninstances);

/* Shutdown has begun: send STOPPING=1. The watchdog keeps beating while
 * the instances stop. */
void core_notify_stopping(void);

/* Free the watchdog timer, if any. Safe to call more than once. */
void core_notify_stop(void);

#endif
