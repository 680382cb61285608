/*
 * common: what the mod_metrics end-to-end suites share: a daemon started
 * from an inline config on a free loopback port, and a libcurl client.
 */
#ifndef PRISMLB_E2E_METRICS_COMMON_H
#define PRISMLB_E2E_METRICS_COMMON_H

#include <stddef.h>

#include "prismlb/module.h"
#include "testutil.h"

/* The module ABI as prismlb_build_info's abi label spells it: "1.1". */
#define ME_STR_(x) #x
#define ME_STR(x) ME_STR_(x)
#define ME_ABI ME_STR(PLB_ABI_MAJOR) "." ME_STR(PLB_ABI_MINOR)

/* A daemon under test, with its private directory (config, log, traces). */
struct me_daemon {
    struct tu_proc proc;
    char *dir; /* new; removed by me_daemon_stop */
    char conf[4096];
    char log[4096];
    long long started_ms; /* tu_now_ms() right before the spawn */
    long long ready_ms;   /* tu_now_ms() once wait_port accepted */
};

/* "PRISMLB_MODULE_PATH=<build>/modules:<build>/tests/modules" (static). */
const char *me_module_path_env(void);

/* A TCP port on 127.0.0.1 that was free a moment ago (bound to 0, read,
 * closed). Aborts the test when none can be had. */
int me_free_port(void);

/* Write conf_text to a fresh directory's prismlb.conf, start build/core/prismlb
 * on it (log in DIR/prismlb.log) and, when wait_port > 0, wait up to 10 s
 * for 127.0.0.1:wait_port to accept. Aborts the test (with the log) on
 * failure. */
void me_daemon_start(struct me_daemon *d, const char *conf_text, int wait_port);

/* SIGTERM, assert a clean exit (status 0) within 10 s, remove the
 * directory. */
void me_daemon_stop(struct me_daemon *d);

/* The daemon's log so far (new, caller frees). */
char *me_daemon_log(const struct me_daemon *d);

/* One HTTP response. */
struct me_resp {
    long status;
    char *body; /* new, NUL-terminated (empty when none) */
    size_t len;
    char *headers; /* new: the raw header block */
    int body_seen; /* any body byte arrived */
};

/* Send one request with a new connection. method: "GET", "HEAD" (no body
 * expected), "OPTIONS", "POST", ... extra: NULL-terminated header lines or
 * NULL. 0, or -1 when the exchange failed (connection, timeout). */
int me_http(const char *method, const char *url, const char *const *extra, struct me_resp *r);
void me_resp_free(struct me_resp *r);

/* Value of a response header (case-insensitive name), copied into buf; NULL
 * when absent. */
const char *me_header(const struct me_resp *r, const char *name, char *buf, size_t len);

/* VmRSS of pid in KiB from /proc/PID/status, or -1. */
long me_vmrss_kib(int pid);

#endif
