/*
 * daemon: the daemon under test as a process, the one way every suite
 * starts, waits on and stops build/core/prismlb.
 *
 * A struct tu_daemon names its config file and its log (stdout and stderr,
 * appended); the log is kept after the stop, so that each failure message
 * can carry it. The daemon is started and stopped by its PID; every wait is
 * bounded and ends early when the daemon has exited.
 */
#ifndef PRISMLB_TESTS_DAEMON_H
#define PRISMLB_TESTS_DAEMON_H

#include "testutil.h"

struct tu_daemon {
    struct tu_proc proc;
    char dir[2048];       /* where conf and log are */
    char conf[4096];      /* the config file */
    char log[4096];       /* its stdout and stderr */
    int own_dir;          /* dir was made by tu_daemon_init: removed with d */
    int running;          /* spawned and not stopped yet */
    long long started_ms; /* tu_now_ms() right before the spawn */
    long long ready_ms;   /* tu_now_ms() when the last wait succeeded */
};

/* Name d's files dir/name.conf and dir/name.log (dir borrowed, must
 * exist; NULL: a fresh private directory, removed by tu_daemon_finish or
 * tu_daemon_cleanup). d is zeroed first. Fails the test on error. */
void tu_daemon_init(struct tu_daemon *d, const char *dir, const char *name);

/*
 * The one exec of the daemon: build/core/prismlb --config conf, then args
 * (NULL-terminated, may be NULL; at most 16), with env_extra ("K=V"
 * entries, may be NULL) added to the environment, stdout and stderr
 * appended to log, started as p (by PID, in its own process group). For a
 * harness that keeps its own struct tu_proc; tu_daemon_spawn is this for
 * a struct tu_daemon. 0 or -errno.
 */
int tu_prismlb_spawn(struct tu_proc *p, const char *conf, const char *log, char *const args[],
                     char *const env_extra[]);

/* Wait up to timeout_ms, while p runs, for a line of the file log (both
 * borrowed) that holds needle. 0, -1 on timeout, -2 when p exited first (a
 * line written right before the exit counts). tu_daemon_wait_log is this
 * for a struct tu_daemon. */
int tu_proc_wait_log(struct tu_proc *p, const char *log, const char *needle, int timeout_ms);

/*
 * Write conf_text to d->conf (unless NULL: the file is there already) and
 * start build/core/prismlb --config d->conf, then args (NULL-terminated,
 * may be NULL), with env_extra ("K=V" entries, may be NULL) added to the
 * environment. Fails the test when the config cannot be written or the
 * process cannot be started.
 */
void tu_daemon_spawn(struct tu_daemon *d, const char *conf_text, char *const args[],
                     char *const env_extra[]);

/* Wait up to timeout_ms, while the daemon runs, for 127.0.0.1:port to
 * accept, or for a log line that holds needle. 0, -1 on timeout, -2 when
 * the daemon exited first. */
int tu_daemon_wait_port(struct tu_daemon *d, int port, int timeout_ms);
int tu_daemon_wait_log(struct tu_daemon *d, const char *needle, int timeout_ms);

/* Send sig and wait up to timeout_ms for the exit, SIGKILL after that.
 * The wait status, or -1 when d is not running. */
int tu_daemon_stop(struct tu_daemon *d, int sig, int timeout_ms);

/* SIGTERM, then remove the private directory (tu_daemon_init with NULL);
 * fail the test (with the log) unless the daemon exited with status 0
 * within timeout_ms. A daemon that is not running is only cleaned up. */
void tu_daemon_finish(struct tu_daemon *d, int timeout_ms);

/* Kill a daemon still running (SIGKILL, by PID) and remove the private
 * directory; for a teardown after a failed test. Idempotent. */
void tu_daemon_cleanup(struct tu_daemon *d);

/* The log so far (new, caller frees; "(no log)" when there is none). */
char *tu_daemon_log(const struct tu_daemon *d);

/* Fail the test with the message and the log. */
void tu_daemon_fail(const struct tu_daemon *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

#endif
