/*
 * metrics_expo: the registry in the Prometheus text exposition format 0.0.4
 * and in OpenMetrics 1.0 text, and the collect hooks that run before each
 * rendering. It reads the registry's layout (metrics-internal.h) and calls
 * nothing of metrics.c.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "metrics-internal.h"
#include "metrics.h"

/* A sample value: integers up to 2^53 in plain digits, other finite values
 * in the shortest form that reads back exactly, +Inf/-Inf/NaN as Prometheus
 * spells them. buf holds at least 32 bytes. Returns the length. */
static size_t
fmt_value(char *buf, double v)
{
    if (isnan(v))
        return (size_t)sprintf(buf, "NaN");
    if (isinf(v))
        return (size_t)sprintf(buf, v > 0 ? "+Inf" : "-Inf");
    if (fabs(v) <= 9007199254740992.0 && v == trunc(v)) {
        /* Integral (the common case of counters): digits by hand. */
        char rev[24], *o = buf;
        size_t n = 0;
        for (uint64_t u = (uint64_t)fabs(v); n == 0 || u; u /= 10)
            rev[n++] = (char)('0' + u % 10);
        if (signbit(v))
            *o++ = '-';
        while (n)
            *o++ = rev[--n];
        *o = '\0';
        return (size_t)(o - buf);
    }
    for (int p = 15; p < 17; p++) {
        int n = snprintf(buf, 32, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            return (size_t)n;
    }
    return (size_t)snprintf(buf, 32, "%.17g", v);
}

/* A growing output buffer; after one failed allocation every put is a
 * no-op and failed stays set. */
struct buf {
    char *p;
    size_t len, cap;
    int failed;
};

static int
buf_grow(struct buf *b, size_t more)
{
    if (b->failed)
        return -1;
    if (more > SIZE_MAX / 4 - b->len) {
        b->failed = 1;
        return -1;
    }
    size_t ncap = b->cap ? b->cap : 4096;
    while (ncap < b->len + more + 1)
        ncap *= 2;
    char *p = core_realloc(b->p, ncap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = ncap;
    return 0;
}

static inline void
buf_put(struct buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap && buf_grow(b, n) < 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static inline void
buf_str(struct buf *b, const char *s)
{
    buf_put(b, s, strlen(s));
}

/* HELP text: backslash and line feed escaped, and double quotes too in
 * OpenMetrics. */
static void
buf_help(struct buf *b, const char *s, int om)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\\')
            buf_put(b, "\\\\", 2);
        else if (*p == '\n')
            buf_put(b, "\\n", 2);
        else if (om && *p == '"')
            buf_put(b, "\\\"", 2);
        else
            buf_put(b, p, 1);
    }
}

/* name{labels[,le="x"]} value\n */
static void
buf_sample(struct buf *b, const char *name, size_t nlen, const char *sfx, const struct series *s,
           const char *le, double v)
{
    buf_put(b, name, nlen);
    buf_str(b, sfx);
    if (s->labelslen || le) {
        buf_put(b, "{", 1);
        buf_put(b, s->labels, s->labelslen);
        if (le) {
            if (s->labelslen)
                buf_put(b, ",", 1);
            buf_put(b, "le=\"", 4);
            buf_str(b, le);
            buf_put(b, "\"", 1);
        }
        buf_put(b, "}", 1);
    }
    char num[40];
    num[0] = ' ';
    size_t n = 1 + fmt_value(num + 1, v);
    num[n++] = '\n';
    buf_put(b, num, n);
}

static void
render_family(struct buf *b, const plb_metric *m, int om)
{
    static const char *const types[] = {"", "counter", "gauge", "histogram"};
    size_t nlen = strlen(m->name);
    const char *sfx = "";
    if (om && m->type == PLB_METRIC_COUNTER) {
        if (nlen > 6 && strcmp(m->name + nlen - 6, "_total") == 0)
            nlen -= 6;
        sfx = "_total";
    }
    for (int type_line = m->help[0] ? 0 : 1; type_line < 2; type_line++) {
        buf_put(b, type_line ? "# TYPE " : "# HELP ", 7);
        buf_put(b, m->name, nlen);
        buf_put(b, " ", 1);
        if (type_line)
            buf_str(b, types[m->type]);
        else
            buf_help(b, m->help, om);
        buf_put(b, "\n", 1);
    }

    int negative_bounds = m->nbounds && m->bounds[0] < 0;
    for (size_t i = 0; i < m->n && !b->failed; i++) {
        const struct series *s = m->sorted[i];
        if (m->type != PLB_METRIC_HISTOGRAM) {
            buf_sample(b, m->name, nlen, sfx, s, NULL, s->value);
            continue;
        }
        uint64_t cum = 0;
        for (size_t j = 0; j < m->nbounds; j++) {
            cum += s->bucket[j];
            buf_sample(b, m->name, nlen, "_bucket", s, m->le[j][om ? 1 : 0], (double)cum);
        }
        buf_sample(b, m->name, nlen, "_bucket", s, "+Inf", (double)s->count);
        if (om && (negative_bounds || !(s->value >= 0)))
            continue;
        buf_sample(b, m->name, nlen, "_sum", s, NULL, s->value);
        buf_sample(b, m->name, nlen, "_count", s, NULL, (double)s->count);
    }
}

/* A size close to the output's, so that rendering reallocates rarely. */
static size_t
render_estimate(const struct core_metrics *r)
{
    size_t total = 64;
    for (size_t i = 0; i < r->n; i++) {
        const plb_metric *m = r->fam[i];
        size_t nlen = strlen(m->name);
        total += 2 * nlen + strlen(m->help) * 2 + 32;
        size_t lines = m->type == PLB_METRIC_HISTOGRAM ? m->nbounds + 3 : 1;
        for (size_t j = 0; j < m->n; j++)
            total += lines * (nlen + m->sorted[j]->labelslen + 48);
    }
    return total;
}

static char *
render(struct core_metrics *r, size_t *len, int om)
{
    struct buf b = {0};
    if (!r)
        return NULL;
    if (buf_grow(&b, render_estimate(r)) < 0)
        return NULL;
    for (size_t i = 0; i < r->n && !b.failed; i++)
        render_family(&b, r->fam[i], om);
    if (om)
        buf_put(&b, "# EOF\n", 6);
    if (b.failed) {
        core_free(b.p);
        return NULL;
    }
    b.p[b.len] = '\0';
    if (len)
        *len = b.len;
    return b.p;
}

/* Let the hooks bring their series up to date (per-worker sums). */
static void
collect(struct core_metrics *r)
{
    for (struct collect_hook *h = r ? r->hooks : NULL; h; h = h->next)
        h->cb(h->arg);
}

char *
core_metrics_render(struct core_metrics *r, size_t *len)
{
    collect(r);
    return render(r, len, 0);
}

char *
core_metrics_render_openmetrics(struct core_metrics *r, size_t *len)
{
    collect(r);
    return render(r, len, 1);
}

int
core_metrics_on_collect(struct core_metrics *r, void (*cb)(void *arg), void *arg, int add)
{
    if (!r || !cb)
        return -EINVAL;
    for (struct collect_hook **pp = &r->hooks; *pp; pp = &(*pp)->next) {
        if ((*pp)->cb == cb && (*pp)->arg == arg) {
            if (!add) {
                struct collect_hook *h = *pp;
                *pp = h->next;
                core_free(h);
            }
            return 0;
        }
    }
    if (!add)
        return 0;
    struct collect_hook *h = core_malloc(sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->cb = cb;
    h->arg = arg;
    h->next = r->hooks;
    r->hooks = h;
    return 0;
}
