/*
 * mm.h: private header of mod_metrics (not installed, not part of the ABI).
 *
 * mod_metrics is split by subsystem:
 *   mod_metrics.c  descriptor, settings, lifecycle, HTTP routing
 *   health.c       /healthz and /readyz verdicts and their text
 *   procstat.c     process metrics read from procfs on each scrape
 *   buf.c          a growable text buffer on the host allocator
 *   resolve.c      a hostname bind_address, resolved off the loop
 *
 * Calls go downwards only: mod_metrics.c calls the other files, which call
 * nothing of it (what health.c needs from above, which checks are a sibling
 * instance's, it is handed as a struct mm_health_filter).
 *
 * Everything runs on the daemon's one event loop thread.
 */
#ifndef PRISMLB_MOD_METRICS_MM_H
#define PRISMLB_MOD_METRICS_MM_H

#include <stddef.h>
#include <stdint.h>

#include <prismlb/module.h>

#define MM_HIDDEN __attribute__((visibility("hidden")))

/* The check every probes-serving instance registers and beats. */
#define MM_LOOP_CHECK "event-loop"

/* Settings, as the daemon stores them (see mm_settings in mod_metrics.c). */
struct mm_config {
    char *bind_address;
    int64_t port;
    int64_t liveness_interval_ms;
    int64_t liveness_threshold_ms;
    int metrics; /* serve /metrics */
    int probes;  /* serve /healthz and /readyz */
};

/* ------------------------------------------------------------------ */
/* buf.c                                                                */

/* A growable NUL-terminated text buffer. Allocation failures are sticky:
 * after one, `oom` is set, further appends do nothing, and the caller
 * checks `oom` once at the end. Start from {0} with `host` set. */
struct mm_buf {
    const struct plb_host *host; /* borrowed */
    char *p;                     /* owned; host->mem->free via mm_buf_free */
    size_t n, cap;
    int oom;
};

MM_HIDDEN void mm_buf_printf(struct mm_buf *b, const char *fmt, ...) PLB_PRINTF(2, 3);
/* Append s, turning control characters (newlines, tabs, ...) into spaces so
 * that text from other modules stays on one line. */
MM_HIDDEN void mm_buf_put_line_safe(struct mm_buf *b, const char *s);
MM_HIDDEN void mm_buf_free(struct mm_buf *b);

/* ------------------------------------------------------------------ */
/* health.c                                                             */

/* Which checks an evaluation passes over: ignore(arg, info) returns 1 for
 * a check that is not this evaluation's to judge (mod_metrics.c hands one
 * that finds the loop heartbeats of the other running mod_metrics
 * instances). arg is borrowed; ignore may be NULL (every check counts). */
struct mm_health_filter {
    int (*ignore)(const void *arg, const struct plb_health_info *info);
    const void *arg;
};

/*
 * Evaluate every registered check of `kind` (liveness: the heartbeat of each
 * PLB_HEALTH_LIVE check must be at most threshold_ms old; readiness: each
 * PLB_HEALTH_READY check must be ok) and write the plain-text answer to out:
 *   all good, not verbose:  "ok\n"
 *   verbose:                one "[+]instance/check ok" or
 *                           "[-]instance/check failed: reason" line per
 *                           check, then "<name> check passed|failed"
 *   failing, not verbose:   only the failing lines, then "<name> check failed"
 * (name is "healthz" or "readyz", as kube-apiserver writes them). The query
 * string (borrowed, may be NULL) gives ?verbose and ?exclude=instance/check
 * (repeatable, up to 16): an excluded check does not count and reads
 * "[+]instance/check excluded: ok" when verbose; one matching nothing adds
 * "warning: some health checks cannot be excluded: no matches for X".
 * filter (borrowed) says which checks are passed over. Returns 1
 * when every check passed, 0 otherwise. out->oom reports allocation failure.
 */
MM_HIDDEN int mm_health_eval(const struct plb_host *host, plb_ctx *ctx,
                             const struct mm_health_filter *filter, enum plb_health_kind kind,
                             int64_t threshold_ms, const char *query, struct mm_buf *out);

/* One check of `kind`, named "instance/check" (kube-apiserver's
 * /readyz/<check>): 1 and "ok\n" when it passes, 0 and "internal server
 * error: reason\n" when it fails, -1 (out untouched) when there is no such
 * check. filter as for mm_health_eval. */
MM_HIDDEN int mm_health_eval_one(const struct plb_host *host, plb_ctx *ctx,
                                 const struct mm_health_filter *filter, enum plb_health_kind kind,
                                 int64_t threshold_ms, const char *check, struct mm_buf *out);

/* Does the query string ask for verbose output ("verbose", "verbose=1",
 * "verbose=true", among other parameters)? Pure. */
MM_HIDDEN int mm_query_verbose(const char *query);

/* ------------------------------------------------------------------ */
/* resolve.c                                                            */

struct mm_resolve;
/* Done: ip is the address text (borrowed for the call), or NULL and why. */
typedef void (*mm_resolve_cb)(void *arg, const char *ip, const char *why);
/* Resolve name without blocking the loop; cb runs once, from a timer.
 * New handle (freed before cb runs), or NULL when it cannot start. */
MM_HIDDEN struct mm_resolve *mm_resolve_start(const struct plb_host *host, plb_ctx *ctx,
                                              const char *name, mm_resolve_cb cb, void *arg);
/* Cancel a resolution that has not called back: cb is not called. */
MM_HIDDEN void mm_resolve_cancel(struct mm_resolve *r);

/* ------------------------------------------------------------------ */
/* procstat.c                                                           */

/* The process families without labels, as procstat.c's table lists them. */
enum mm_proc_family {
    MM_PROC_RSS,
    MM_PROC_VMS,
    MM_PROC_OPEN_FDS,
    MM_PROC_MAX_FDS,
    MM_PROC_CPU,
    MM_PROC_START_TIME,
    MM_PROC_FAMILIES /* how many */
};

/* The process and build-info metric families (borrowed from the registry;
 * they live as long as the daemon). */
struct mm_proc {
    plb_metric *family[MM_PROC_FAMILIES]; /* by enum mm_proc_family */
    plb_metric *build_info;
};

/* Register (or find, when another instance did it first) the families and
 * set prismlb_build_info. Call from start. 0 or -errno. */
MM_HIDDEN int mm_proc_register(const struct plb_host *host, plb_ctx *ctx, struct mm_proc *p);

/* Refresh every process metric from getrusage, getrlimit and small procfs
 * reads (/proc/self/statm, /proc/self/fd; /proc/self/stat and /proc/stat
 * once for the start time). Call right before rendering a scrape. A value
 * that cannot be read keeps its previous one (logged at debug level). */
MM_HIDDEN void mm_proc_update(const struct plb_host *host, plb_ctx *ctx, const struct mm_proc *p);

#endif
