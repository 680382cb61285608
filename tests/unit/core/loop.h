/*
 * loop: the event loop fixture of the core's unit suites (reactor,
 * listener, httpd, httpd_bounds): a fresh event base per test, SIGPIPE
 * ignored as the daemon ignores it, and a bounded run of the loop.
 */
#ifndef PRISMLB_UNIT_CORE_LOOP_H
#define PRISMLB_UNIT_CORE_LOOP_H

#include <stdint.h>

#include <event2/event.h>

/* The running test's event base (set by loop_setup, borrowed). */
extern struct event_base *base;

/* The Check fixture: loop_setup makes the base, loop_teardown frees it. */
void loop_setup(void);
void loop_teardown(void);

/* Run the loop for at most ms (callbacks may break it earlier). */
void run_for(int64_t ms);

#endif
