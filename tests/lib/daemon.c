#include "daemon.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define MAX_ARGS 16

void
tu_daemon_init(struct tu_daemon *d, const char *dir, const char *name)
{
    memset(d, 0, sizeof(*d));
    if (!dir) {
        char *tmp = tu_mkdtemp();
        ck_assert_msg(tmp, "cannot make a private directory");
        snprintf(d->dir, sizeof(d->dir), "%s", tmp);
        free(tmp);
        d->own_dir = 1;
        dir = d->dir;
    } else {
        ck_assert_msg(snprintf(d->dir, sizeof(d->dir), "%s", dir) < (int)sizeof(d->dir),
                      "path too long: %s", dir);
    }
    ck_assert_msg(
        snprintf(d->conf, sizeof(d->conf), "%s/%s.conf", dir, name) < (int)sizeof(d->conf) &&
            snprintf(d->log, sizeof(d->log), "%s/%s.log", dir, name) < (int)sizeof(d->log),
        "path too long under %s", dir);
}

int
tu_prismlb_spawn(struct tu_proc *p, const char *conf, const char *log, char *const args[],
                 char *const env_extra[])
{
    char exe[4096], *argv[MAX_ARGS + 4];
    size_t n = 0;
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    argv[n++] = exe;
    argv[n++] = "--config";
    argv[n++] = (char *)conf;
    for (size_t i = 0; args && args[i]; i++) {
        if (n >= MAX_ARGS + 3)
            return -E2BIG;
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    return tu_spawn(p, argv, env_extra, log);
}

void
tu_daemon_spawn(struct tu_daemon *d, const char *conf_text, char *const args[],
                char *const env_extra[])
{
    if (conf_text)
        ck_assert_msg(tu_write_file(d->conf, conf_text) == 0, "cannot write %s", d->conf);
    d->started_ms = tu_now_ms();
    int rc = tu_prismlb_spawn(&d->proc, d->conf, d->log, args, env_extra);
    ck_assert_msg(rc == 0, "cannot start %s: %s", tu_build_path("core/prismlb"), strerror(-rc));
    d->running = 1;
}

/* What a wait waits for: 1 when it holds. */
struct wait_for {
    int port;           /* 127.0.0.1:port accepts (when > 0) */
    const char *needle; /* the log holds it (when not NULL) */
};

static int
holds(const char *log, const struct wait_for *w)
{
    if (w->port > 0)
        return tu_wait_port("127.0.0.1", w->port, 0) == 0;
    return tu_file_has(log, w->needle);
}

/* Poll w up to timeout_ms while the daemon runs: 0, -1 on timeout, -2
 * when the daemon exited first (w is asked once more after the exit: a
 * log line written right before it counts). */
static int
wait_for(struct tu_proc *p, const char *log, const struct wait_for *w, int timeout_ms)
{
    long long deadline = tu_now_ms() + timeout_ms;
    while (!holds(log, w)) {
        if (tu_exited(p))
            return w->needle && holds(log, w) ? 0 : -2;
        if (tu_now_ms() >= deadline)
            return -1;
        tu_sleep_ms(10);
    }
    return 0;
}

/* wait_for on d, noting when it held. */
static int
daemon_wait(struct tu_daemon *d, const struct wait_for *w, int timeout_ms)
{
    int rc = wait_for(&d->proc, d->log, w, timeout_ms);
    if (rc == 0)
        d->ready_ms = tu_now_ms();
    return rc;
}

int
tu_daemon_wait_port(struct tu_daemon *d, int port, int timeout_ms)
{
    const struct wait_for w = {.port = port};
    return daemon_wait(d, &w, timeout_ms);
}

int
tu_daemon_wait_log(struct tu_daemon *d, const char *needle, int timeout_ms)
{
    const struct wait_for w = {.needle = needle};
    return daemon_wait(d, &w, timeout_ms);
}

int
tu_proc_wait_log(struct tu_proc *p, const char *log, const char *needle, int timeout_ms)
{
    const struct wait_for w = {.needle = needle};
    return wait_for(p, log, &w, timeout_ms);
}

int
tu_daemon_stop(struct tu_daemon *d, int sig, int timeout_ms)
{
    if (!d->running)
        return -1;
    d->running = 0;
    return tu_stop(&d->proc, sig, timeout_ms);
}

void
tu_daemon_finish(struct tu_daemon *d, int timeout_ms)
{
    int was_running = d->running;
    int st = tu_daemon_stop(d, SIGTERM, timeout_ms);
    char *log = tu_daemon_log(d);
    tu_daemon_cleanup(d);
    if (was_running && !(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0))
        ck_abort_msg("daemon did not exit cleanly on SIGTERM (status 0x%x); log:\n%s", st,
                     log ? log : "(out of memory)");
    free(log);
}

void
tu_daemon_cleanup(struct tu_daemon *d)
{
    tu_daemon_stop(d, SIGKILL, 5000);
    if (d->own_dir) {
        tu_rmrf(d->dir);
        d->own_dir = 0;
    }
}

char *
tu_daemon_log(const struct tu_daemon *d)
{
    char *log = tu_read_file(d->log, NULL);
    return log ? log : strdup("(no log)");
}

void
tu_daemon_fail(const struct tu_daemon *d, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char *log = tu_daemon_log(d);
    ck_abort_msg("%s; log %s:\n%s", msg, d->log, log ? log : "(out of memory)");
}
