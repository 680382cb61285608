/*
 * env: the mod_metrics end-to-end harness: the daemon (tests/lib/daemon.h)
 * started from an inline config with the module path of mod_metrics and
 * the test modules, and a libcurl client.
 */
#ifndef PRISMLB_E2E_METRICS_ENV_H
#define PRISMLB_E2E_METRICS_ENV_H

#include <stddef.h>

#include "prismlb/module.h"
#include "daemon.h"

/* The module ABI as prismlb_build_info's abi label spells it: "1.1". */
#define ME_STR_(x) #x
#define ME_STR(x) ME_STR_(x)
#define ME_ABI ME_STR(PLB_ABI_MAJOR) "." ME_STR(PLB_ABI_MINOR)

/* "PRISMLB_MODULE_PATH=<build>/modules:<build>/tests/modules" (static). */
const char *me_module_path_env(void);

/* tu_daemon_init in a fresh private directory (conf_text in prismlb.conf,
 * the log in prismlb.log), start the daemon with me_module_path_env and,
 * when wait_port > 0, wait up to 10 s for 127.0.0.1:wait_port to accept
 * (d->ready_ms). Fails the test (with the log) when it does not. */
void me_daemon_start(struct tu_daemon *d, const char *conf_text, int wait_port);

/* tu_daemon_finish within 10 s: SIGTERM, a clean exit (status 0) asserted,
 * the directory removed. */
void me_daemon_stop(struct tu_daemon *d);

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
