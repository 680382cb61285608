/*
 * metrics: the core's metrics registry (internal header).
 *
 * A registry holds metric families (counters, gauges, histograms), each with
 * a fixed list of label names and any number of series, one per distinct
 * tuple of label values. It renders itself in the Prometheus text exposition
 * format 0.0.4 and in OpenMetrics 1.0 text. Pure data structure: no I/O, no
 * logging, single-threaded like the rest of the daemon (the event loop
 * thread only).
 *
 * Hot path: updating an existing series is a hash lookup on the label values
 * and allocates nothing. Every allocation goes through core/alloc.h; every
 * failure leaves the registry as it was before the call.
 *
 * The host table (struct plb_host, "metrics") wraps these functions 1:1.
 */
#ifndef PRISMLB_CORE_METRICS_H
#define PRISMLB_CORE_METRICS_H

#include <stddef.h>

#include "prismlb/module.h"

struct core_metrics;

/* The label the host adds to every family an instance registers, valued
 * with the instance's name (not "instance": Prometheus sets that one on
 * every scraped target). */
#define CORE_METRIC_INSTANCE_LABEL "module_instance"

/* New, empty registry; free with core_metrics_free. NULL on allocation
 * failure. */
struct core_metrics *core_metrics_new(void);

/* Free the registry, every family it holds and every series of those
 * families. Every plb_metric handle of it becomes invalid. NULL is fine. */
void core_metrics_free(struct core_metrics *r);

/*
 * Register or find a family. The returned handle is borrowed: it belongs to
 * the registry and stays valid until core_metrics_free.
 *
 * name: [a-zA-Z_:][a-zA-Z0-9_:]*. help: one line or more of UTF-8 (NULL is
 * the empty help, which renders no HELP line). label_names: NULL-terminated
 * list (NULL for none), each [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__",
 * neither "le" nor "quantile" (reserved for histogram buckets and summary
 * quantiles whatever the family's type, as promtool's lint wants), no
 * duplicates. All of them borrowed, copied.
 *
 * buckets: histograms only (else NULL and 0): nbuckets finite upper bounds,
 * strictly ascending, copied; a trailing +Inf is accepted and dropped (the
 * +Inf bucket is always there). NULL/0 for a histogram selects the default
 * Prometheus buckets (.005 .01 .025 .05 .1 .25 .5 1 2.5 5 10 seconds).
 *
 * The same name with the same type, help, label names and buckets returns the
 * existing family. Otherwise a name whose exposition would clash with an
 * existing family (same name; histogram "x" and "x_sum"/"x_count"/"x_bucket";
 * counters "x" and "x_total", which OpenMetrics both names "x"; "x_created"
 * beside a counter or histogram "x", which OpenMetrics reserves) fails with
 * -EEXIST. Invalid arguments: -EINVAL. Allocation failure: -ENOMEM. On
 * failure NULL is returned, *err (may be NULL) is set and nothing changed.
 */
plb_metric *core_metric_new(struct core_metrics *r, enum plb_metric_type type, const char *name,
                            const char *help, const char *const *label_names, const double *buckets,
                            size_t nbuckets, int *err);

/*
 * A view of a family for one owner: registers (or finds) the family of
 * core_metric_new with label names fixed_label and then label_names, and
 * returns a handle whose series all have fixed_value as that first label.
 * Through the handle, label_values are the other labels' only, and
 * core_metric_remove(view, NULL) removes only the view's series. The same
 * family and fixed_value return the same handle; views are borrowed, owned
 * by the family (freed with the registry). The host registers every
 * instance's families so, with fixed_label "module_instance".
 *
 * label_names: at most 15, none equal to fixed_label (else -EINVAL, like
 * a fixed_value that is not UTF-8). Errors as core_metric_new's; on
 * failure nothing changed.
 */
plb_metric *core_metric_new_view(struct core_metrics *r, const char *fixed_label,
                                 const char *fixed_value, enum plb_metric_type type,
                                 const char *name, const char *help, const char *const *label_names,
                                 const double *buckets, size_t nbuckets, int *err);

/*
 * Update a series, creating it (at 0) on first use. label_values: as many
 * borrowed strings as the family has label names (NULL when it has none);
 * values must be valid UTF-8 and may be empty. 0, or -EINVAL (wrong metric
 * type, NULL value, invalid UTF-8, bad v), or -ENOMEM when a new series
 * could not be allocated (nothing changed).
 *
 * add: counters (v >= 0, not NaN) and gauges (any v).
 * set: gauges only.
 * observe: histograms only; v not NaN. Counts v in every bucket whose upper
 * bound is >= v, adds it to the sum and 1 to the count.
 */
int core_metric_add(plb_metric *m, const char *const *label_values, double v);
int core_metric_set(plb_metric *m, const char *const *label_values, double v);
int core_metric_observe(plb_metric *m, const char *const *label_values, double v);

/* Remove the series of label_values (borrowed), or every series of the
 * family (of the view, for a view) with NULL. The family itself stays
 * registered. Removing a series that does not exist does nothing. */
void core_metric_remove(plb_metric *m, const char *const *label_values);

/* Current value of one series into *out: counters and gauges their value,
 * histograms their sum. 0, -ENOENT when the series does not exist, -EINVAL
 * on bad arguments. */
int core_metric_get(plb_metric *m, const char *const *label_values, double *out);

/* Number of series of the family, or of the view (for tests and
 * modules). */
size_t core_metric_series_count(const plb_metric *m);

/*
 * Render the registry in the Prometheus text exposition format 0.0.4: per
 * family (in name order) "# HELP" (when help is not empty) and "# TYPE", then
 * its series ordered by label values; histograms as cumulative
 * name_bucket{...,le="..."} lines up to le="+Inf", then name_sum and
 * name_count. A family without series prints only HELP and TYPE.
 * New buffer, NUL-terminated, free with core_free; *len (may be NULL) gets
 * its length. NULL on allocation failure.
 */
char *core_metrics_render(struct core_metrics *r, size_t *len);

/* Add (add != 0) or remove a hook that runs before every render, on the
 * main loop: where a module sums per-worker counters into its series. Adding
 * the same cb and arg twice adds it once. 0, -EINVAL (NULL r or cb) or
 * -ENOMEM. */
int core_metrics_on_collect(struct core_metrics *r, void (*cb)(void *arg), void *arg, int add);

/*
 * The same in OpenMetrics 1.0 text (Content-Type
 * "application/openmetrics-text; version=1.0.0; charset=utf-8"): counter
 * families named without "_total" and their samples with it, le values in
 * canonical form ("1.0", "0.25", "1e+06"), and "# EOF" last. Histograms whose
 * buckets include negative bounds (or whose sum is negative or NaN) omit
 * _sum and _count, as OpenMetrics requires. Same ownership as
 * core_metrics_render.
 */
char *core_metrics_render_openmetrics(struct core_metrics *r, size_t *len);

#endif
