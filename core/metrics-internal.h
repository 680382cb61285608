/*
 * metrics-internal: what the registry (metrics.c) and the exposition
 * (metrics_expo.c) share: the layout of the registry, its families and
 * their series. Nothing outside those two files includes it.
 *
 * Layout. The registry keeps its families in an array sorted by name. A
 * family keeps its series twice: in a chained hash table keyed by the joined
 * label values (every value followed by a NUL byte), for O(1) updates, and in
 * an array sorted by that key, for rendering in a stable order without
 * sorting. A series is one allocation: the struct, the histogram's
 * per-bucket counts, the key and its pre-escaped label text (a="x",b="y").
 *
 * Views. core_metric_new_view hands out a plb_metric that is not a family
 * but a view of one: the family's first label fixed at one value (the
 * host's module_instance), the caller giving the others. Since series sort
 * by key, a view's series are one contiguous run of the family's sorted
 * array. A family owns its views.
 *
 * The exposition only reads this layout; the registry is the only writer,
 * and metrics.c calls nothing of metrics_expo.c (the registry is the leaf).
 */
#ifndef PRISMLB_CORE_METRICS_INTERNAL_H
#define PRISMLB_CORE_METRICS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "strv.h"

/* Room for one bucket bound's text (le="..."). */
#define LE_LEN 32

struct series {
    struct series *next; /* hash chain */
    uint64_t hash;
    double value;     /* counter, gauge: the value; histogram: the sum */
    uint64_t count;   /* histogram: observations */
    uint64_t *bucket; /* histogram: non-cumulative count per finite bound */
    char *key;        /* values, each followed by '\0' */
    size_t keylen;
    char *labels; /* escaped name="value" pairs joined by ',' (NUL-terminated) */
    size_t labelslen;
};

struct plb_metric {
    enum plb_metric_type type;
    char *name;
    char *help; /* never NULL */
    struct plb_strv label_names;
    double *bounds; /* histogram: finite upper bounds, ascending */
    size_t nbounds;
    char (*le)[2][LE_LEN];  /* per bound: [0] text format, [1] OpenMetrics */
    struct series **sorted; /* by key */
    size_t n, cap;
    struct series **tab; /* hash table, tmask + 1 slots */
    size_t tmask;
    /* A view: fam is the family, fixed the value of its first label, next
     * the family's next view. A family: fam NULL, views its views. */
    plb_metric *fam, *views, *next;
    char *fixed;
};

struct collect_hook {
    void (*cb)(void *arg);
    void *arg;
    struct collect_hook *next;
};

struct core_metrics {
    plb_metric **fam; /* by name */
    size_t n, cap;
    struct collect_hook *hooks;
};

#endif
