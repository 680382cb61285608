/*
 * env: the harness of the core's daemon-level suites (test_daemon,
 * test_reload): a private directory per test with the daemon's files
 * (test.conf, test.log; tests/lib/daemon.h) and the lifecycle test
 * module's trace.log, tests/modules on the module path.
 */
#ifndef PRISMLB_E2E_CORE_ENV_H
#define PRISMLB_E2E_CORE_ENV_H

#include "daemon.h"

struct ce_env {
    struct tu_daemon d;
    char trace[4096]; /* DIR/trace.log */
};

/* The environment of the running test (set by ce_setup). */
extern struct ce_env ce;

/* The Check fixture: ce_setup makes the directory and names the files;
 * ce_teardown kills a daemon left running (by PID) and removes it all. */
void ce_setup(void);
void ce_teardown(void);

/* Write text to the config (unless NULL: it is there already) and start
 * the daemon on it, then args (NULL-terminated, may be NULL). Its process,
 * borrowed from ce. */
struct tu_proc *ce_start(const char *text, char *const args[]);

/* Wait up to timeout_ms for a trace line starting with line, or for a log
 * line holding needle; fail the test (with the trace and the log) when
 * none comes. */
void ce_wait_trace(const char *line, int timeout_ms);
void ce_wait_log(const char *needle, int timeout_ms);

/* The exit code of a reaped daemon; fails the test when a signal killed
 * it. */
int ce_exit_code(const struct tu_proc *p);

#endif
