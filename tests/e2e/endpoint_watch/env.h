/*
 * env: the one harness of the endpoint_watch end-to-end suites.
 *
 * A test gets a private directory holding everything: the fake API server's
 * TLS material and state (dir/fake, kept across restarts of the fake so a
 * kubeconfig written once stays valid), a kubeconfig, the daemon's config,
 * log and the trace file of a sink. The daemon runs an endpoint_watch
 * instance "ew", the lifecycle test module "sink" following it (`sources =
 * ["ew"]`, one "endpoints=a,b,c sink" trace line per merged set it
 * receives) and mod_metrics on a free port for the discovery counters.
 * Processes are started and stopped by PID; every wait is bounded.
 */
#ifndef PRISMLB_E2E_ENDPOINT_WATCH_ENV_H
#define PRISMLB_E2E_ENDPOINT_WATCH_ENV_H

#include <stddef.h>

#include "fakeproc.h"
#include "testutil.h"

struct ewt {
    char *dir;          /* private temp dir (owned) */
    char fakedir[4000]; /* dir/fake: TLS material, state file, log */
    struct fake f;      /* f.dir points into fakedir (not owned) */
    int fake_up;
    struct tu_proc daemon;
    int daemon_up;
    char conf[4100], log[4100], trace[4100], kubeconfig[4100];
    int metrics_port;
    int api; /* the fake's server the test's own writes use */
};

/* Make the private directory. 0 or -1. */
int ewt_init(struct ewt *t);
/* Stop whatever still runs (daemon, fake) and remove the directory.
 * Returns 0 when the daemon (if it still ran) exited with status 0 on
 * SIGTERM and its log has no sanitizer report, else -1 (printed). */
int ewt_fini(struct ewt *t);
/* The log's sanitizer report ("runtime error:", "AddressSanitizer",
 * "LeakSanitizer"), or NULL. Borrowed from a static needle list. */
const char *ewt_sanitizer_report(struct ewt *t);

/* Start prismlb-fake-kube with TLS material in fakedir (generated on the
 * first start, reused afterwards) plus extra args (NULL-terminated, may be
 * NULL); wait until ready. 0 or -1. */
int ewt_fake_start(struct ewt *t, const char *const *extra);
/* SIGTERM the fake and wait; its files stay. Wait status. */
int ewt_fake_stop(struct ewt *t);
/* Write t->kubeconfig for server url (NULL: the fake's server 0) with the
 * fake's CA and client certificate (absolute paths). */
void ewt_write_kubeconfig(struct ewt *t, const char *url);

/* Start the daemon: instance "ew" (endpoint_watch) with the settings text
 * ew_settings (inside its group), the sink, mod_metrics, then `extra` (more
 * instance groups, each ending with "},"; may be NULL). env_extra: more
 * "K=V" entries (NULL-terminated, may be NULL). Waits until /metrics
 * answers. 0 or -1. */
int ewt_daemon_start(struct ewt *t, const char *ew_settings, const char *extra,
                     char *const *env_extra);
/* SIGTERM and wait up to timeout_ms; returns the wait status and sets
 * *elapsed_ms (may be NULL). */
int ewt_daemon_stop(struct ewt *t, int timeout_ms, long long *elapsed_ms);

/* The daemon's log (new string). */
char *ewt_log(struct ewt *t);
/* Occurrences of needle in the daemon's log. */
int ewt_log_count(struct ewt *t, const char *needle);
/* Wait until the log contains needle; 0 or -1 (timeout or daemon exit). */
int ewt_wait_log(struct ewt *t, const char *needle, int timeout_ms);

/* The sink's merged sets, in order: the "endpoints=..." trace lines, each
 * without prefix and instance ("a,b,c"). New array of new strings in
 * *lines; returns the count (free with ewt_lines_free). */
int ewt_sets(struct ewt *t, char ***lines);
void ewt_lines_free(char **lines, int n);
/* Wait until the sink's latest set equals want ("a,b,c", sorted as the core
 * delivers). 0 or -1: on timeout, or at once when the daemon has exited,
 * the sets seen are printed. */
int ewt_wait_set(struct ewt *t, const char *want, int timeout_ms);

/* One series of mod_metrics' /metrics: family{source="ew",provider=P}.
 * Returns the value, or -1 when absent or unreachable. */
double ewt_metric(struct ewt *t, const char *family, const char *provider);

/* EndpointSlice writes at the fake (server t->api, client certificate).
 * spec: comma-separated addresses, each optionally suffixed with '!'
 * (conditions.ready false), '?' (no conditions at all) or '~' (ready
 * true but serving false); ports: "name=port,name=port" ("https=6443").
 * Creates or replaces the slice `name` of service `service` in namespace
 * `ns`. 0 or -1. */
int ewt_slice_put(struct ewt *t, const char *ns, const char *service, const char *name,
                  const char *spec, const char *ports);
int ewt_slice_delete(struct ewt *t, const char *ns, const char *name);

/* Admin API of the fake: the status, or -1. */
int ewt_admin(struct ewt *t, const char *method, const char *path, const char *body);
/* Request log entries of the fake whose method equals method and whose
 * path contains frag (NULL: any), with their times (seconds, wall clock)
 * into times (up to max; may be NULL). Returns the count, or -1. */
int ewt_requests(struct ewt *t, const char *method, const char *frag, const char *frag2,
                 double *times, int max);

/* A free port below the system's ephemeral range (so no outgoing
 * connection takes it while a server is down and comes back on it), or
 * -1. */
int ewt_free_fixed_port(void);

#endif
