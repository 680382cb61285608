/*
 * env: the mod_leader end-to-end harness (env.c), shared by its suites.
 *
 * An environment is one prismlb-fake-kube (HTTPS, client certificates) and
 * a kubeconfig for it, at the root or, with kcp, inside the workspace
 * /clusters/root:test (the server URL carries the prefix). Daemons run
 * mod_leader (Lease default/prismlb-test) and the gated test module
 * mod_writer, which patches the Lease default/shared-writes with its
 * identity every 100 ms while its gate is open; each write's User-Agent is
 * "prismlb-writer/IDENTITY/TERM", so the fake's request log tells who
 * wrote in which term. Every process is started and stopped by PID; every
 * wait is bounded.
 */
#ifndef PRISMLB_E2E_LEADER_ENV_H
#define PRISMLB_E2E_LEADER_ENV_H

#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakeproc.h"
#include "daemon.h"
#include "testutil.h"

#define LE_KCP_PREFIX "/clusters/root:test"
#define LE_MAX_DAEMONS 8

struct le_env {
    struct fake f;
    int kcp;
    char prefix[64];
    char base[256]; /* server URL with the prefix */
    char kubeconfig[4300];
};

struct le_timings {
    const char *lease, *renew, *retry;
    double lease_s, renew_s, retry_s;
};

/* The short timings of the chaos tests. */
extern const struct le_timings le_short;

/* A daemon of the environment: its config, log and trace beside the
 * fake's files, named after its identity. */
struct le_daemon {
    struct tu_daemon td; /* DIR/IDENTITY.conf and DIR/IDENTITY.log */
    char identity[64];
    char trace[4400];
};

/* One write of the request log. */
struct le_write {
    double t;
    char id[64];
    int term;
    int status;
};

/* Wall-clock seconds (the fake's request log times). */
double le_wall(void);

/* "PRISMLB_MODULE_PATH=" mod_leader's and mod_writer's build directories
 * (static). */
const char *le_module_path_env(void);

/* An API request on the environment's server (prefix added). */
long le_api(struct le_env *e, const char *method, const char *path, const char *body,
            const char *ctype, struct http_res *res);

/* The kubeconfig of the environment (its server URL, the fake's
 * certificates) at path. */
void le_write_kubeconfig(struct le_env *e, const char *path);

/* Start the fake, write the kubeconfig, create the shared object. */
void le_env_start(struct le_env *e, int kcp);

/* Stop the fake; it must exit 0. */
void le_env_stop(struct le_env *e);

/* The election's Lease is where the environment says: in the workspace
 * with kcp (and then not at the root), else at the root. */
void le_assert_lease_location(struct le_env *e);

/* Write the config of daemon d (extra: more leader settings, may be "";
 * more: more instances, each ending in ",", or NULL). */
void le_daemon_config_more(struct le_env *e, struct le_daemon *d, const char *identity,
                           const struct le_timings *tm, const char *extra, const char *more);

/* le_daemon_config_more without more instances. */
void le_daemon_config(struct le_env *e, struct le_daemon *d, const char *identity,
                      const struct le_timings *tm, const char *extra);

/* Start daemon d on its config (tests/lib/daemon.h). */
void le_daemon_spawn(struct le_daemon *d);

/* le_daemon_config with no extra settings, then le_daemon_spawn. */
void le_daemon_start(struct le_env *e, struct le_daemon *d, const char *identity,
                     const struct le_timings *tm);

/* Stop with sig, wait (bounded); returns the wait status (0 when d is not
 * running). */
int le_daemon_stop(struct le_daemon *d, int sig, int timeout_ms);

/* Send sig once and wait (bounded) for the exit; a daemon that does not
 * exit in time is killed. Returns the wait status, or -1 after a kill. */
int le_daemon_signal_wait(struct le_daemon *d, int sig, int timeout_ms);

/* The daemon's log so far (new). */
char *le_daemon_log(const struct le_daemon *d);

/* Wait up to timeout_ms for a log line holding needle; fails the test
 * (with the log) when none comes or the daemon exits first. */
void le_daemon_wait_log(struct le_daemon *d, const char *needle, int timeout_ms);

/* The fake's request log (GET /requests: {"items": [...]}), parsed (new);
 * fails the test when it cannot be had. */
json_t *le_request_log(struct le_env *e);

/* One item of the request log; the strings borrowed from the log. */
struct le_request {
    const char *ua, *method, *path;
    double time; /* arrival, wall seconds */
    int status;
};

/* The number of items of the request log j. */
size_t le_request_count(json_t *j);

/* Item i of the request log j into *out: 0, or -1 when it lacks its
 * user agent, method or path (then it is not a request to look at). */
int le_request_at(json_t *j, size_t i, struct le_request *out);

/* The writes of the request log, in log order (new array, *n entries). */
struct le_write *le_writes(struct le_env *e, size_t *n);

/* Arrival time (wall seconds) of the last successful write of the
 * election's Lease by identity's leader instance (its User-Agent names
 * it), or 0. */
double le_last_lease_write(struct le_env *e, const char *identity);

/* Wait (bounded) for the first write after `after` (wall seconds) by an
 * identity other than `not_id` (NULL: anyone). 0 and *out, or -1. */
int le_wait_write(struct le_env *e, const char *not_id, double after, int timeout_ms,
                  struct le_write *out);

/* The identity that wrote last (the leader once writes flow). */
int le_last_writer(struct le_env *e, struct le_write *out);

/* No two identities' terms overlap: each (identity, term) of the log is an
 * interval [first write, last write]; sorted by start, each must begin
 * after the previous ones ended. Returns the number of terms, and fails the
 * test on an overlap, naming both. */
int le_check_no_overlap(struct le_env *e);

/* A suite's mode from main's first argument: 1 for "kcp", 0 for "root".
 * With fewer than min_argc arguments or another mode it prints "usage:
 * PROGRAM usage" and exits 2. stdout is line-buffered from then on. */
int le_mode_arg(int argc, char **argv, int min_argc, const char *usage);

#endif
