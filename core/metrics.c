/*
 * metrics: the core's metrics registry: families, views and series, their
 * registration rules and updates. The layout is in metrics-internal.h; the
 * two text renderings are in metrics_expo.c, which reads it.
 */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "metrics-internal.h"
#include "strv.h"

/* Labels of a family a view writes to, its fixed one included. */
#define VIEW_MAX_LABELS 16

static const double default_buckets[] = {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10};

/* ------------------------------------------------------------------------ */
/* Validation. */

/* Well-formed UTF-8: no overlong forms, surrogates or code points past
 * U+10FFFF (what Prometheus' parsers accept in label values). */
static int
utf8_valid(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned c = *p, n, cp;
        if (c < 0x80) {
            p++;
            continue;
        }
        n = (c >= 0xc2 && c <= 0xdf)   ? 1
            : (c >= 0xe0 && c <= 0xef) ? 2
            : (c >= 0xf0 && c <= 0xf4) ? 3
                                       : 0;
        if (!n)
            return 0;
        cp = c & (0x3fu >> n);
        for (unsigned i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        p += n + 1;
    }
    return 1;
}

/* Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*. Label names: the same without ':',
 * not starting with "__", neither "le" nor "quantile". */
static int
name_valid(const char *s, int label)
{
    if (!s || !*s ||
        (label && (strncmp(s, "__", 2) == 0 || strcmp(s, "le") == 0 || strcmp(s, "quantile") == 0)))
        return 0;
    for (size_t i = 0; s[i]; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (!label && c == ':') || (i && c >= '0' && c <= '9')))
            return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Number formatting. */

/* Shortest precision (1..17 significant digits) that reads back as v. */
static int
shortest_digits(double v)
{
    char tmp[40];
    for (int p = 1; p < 17; p++) {
        snprintf(tmp, sizeof(tmp), "%.*e", p - 1, v);
        if (strtod(tmp, NULL) == v)
            return p;
    }
    return 17;
}

/* A bucket bound as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it (what
 * client_golang puts in le="..."), and for OpenMetrics with ".0" added to
 * integral values, which is the canonical form OpenMetrics parsers demand. */
static void
fmt_le(char out[LE_LEN], double v, int om)
{
    if (isinf(v)) {
        snprintf(out, LE_LEN, "%s", v > 0 ? "+Inf" : "-Inf");
        return;
    }
    int p = shortest_digits(v);
    char e[LE_LEN];
    snprintf(e, sizeof(e), "%.*e", p - 1, v);
    int exp = atoi(strchr(e, 'e') + 1);
    if (exp < -4 || exp >= 6) /* Go's rule for the shortest 'g' form */
        snprintf(out, LE_LEN, "%s", e);
    else
        snprintf(out, LE_LEN, "%.*f", p - 1 - exp > 0 ? p - 1 - exp : 0, v);
    if (om && !strpbrk(out, ".e"))
        strncat(out, ".0", LE_LEN - strlen(out) - 1);
}

/* ------------------------------------------------------------------------ */
/* Series. */

/* Hash of the label values; -1 (with *h untouched) if one is NULL. */
static int
values_hash(const plb_metric *m, const char *const *lv, uint64_t *h)
{
    uint64_t x = 1469598103934665603ull;
    if (m->label_names.n && !lv)
        return -1;
    for (size_t i = 0; i < m->label_names.n; i++) {
        if (!lv[i])
            return -1;
        for (const unsigned char *p = (const unsigned char *)lv[i];; p++) {
            x ^= *p;
            x *= 1099511628211ull;
            if (!*p)
                break;
        }
    }
    *h = x ^ (x >> 29);
    return 0;
}

static int
key_equal(const struct series *s, const plb_metric *m, const char *const *lv)
{
    const char *k = s->key, *end = s->key + s->keylen;
    for (size_t i = 0; i < m->label_names.n; i++) {
        size_t l = strlen(lv[i]);
        if ((size_t)(end - k) < l + 1 || memcmp(k, lv[i], l) != 0 || k[l] != '\0')
            return 0;
        k += l + 1;
    }
    return k == end;
}

static struct series *
series_find(const plb_metric *m, const char *const *lv, uint64_t h)
{
    if (!m->tab)
        return NULL;
    for (struct series *s = m->tab[h & m->tmask]; s; s = s->next)
        if (s->hash == h && key_equal(s, m, lv))
            return s;
    return NULL;
}

/* Key order: tuple order of the label values ('\0' sorts first). */
static int
key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

/* Index of the first series whose key is >= key. */
static size_t
sorted_lower(const plb_metric *m, const char *key, size_t keylen)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct series *s = m->sorted[mid];
        if (key_cmp(s->key, s->keylen, key, keylen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Escape a label value (backslash, double quote, line feed) into d, or
 * with d NULL only count. Returns the escaped length. */
static size_t
escape_label(char *d, const char *s)
{
    size_t n = 0;
    for (; *s; s++) {
        int esc = *s == '\\' || *s == '"' || *s == '\n';
        if (d && esc)
            d[n] = '\\';
        if (d)
            d[n + esc] = *s == '\n' ? 'n' : *s;
        n += 1 + (size_t)esc;
    }
    return n;
}

/* Make room for one more series in the table and the sorted array. */
static int
series_reserve(plb_metric *m)
{
    if (m->n == m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 8;
        struct series **v = core_realloc(m->sorted, ncap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        m->sorted = v;
        m->cap = ncap;
    }
    if (!m->tab || m->n + 1 > m->tmask + 1) {
        size_t slots = m->tab ? (m->tmask + 1) * 2 : 8;
        struct series **t = core_calloc(slots, sizeof(*t));
        if (!t)
            return -ENOMEM;
        for (size_t i = 0; i < m->n; i++) {
            struct series *s = m->sorted[i];
            s->next = t[s->hash & (slots - 1)];
            t[s->hash & (slots - 1)] = s;
        }
        core_free(m->tab);
        m->tab = t;
        m->tmask = slots - 1;
    }
    return 0;
}

/* The series of lv, created at zero when missing. 0 or -errno. */
static int
series_get(plb_metric *m, const char *const *lv, struct series **out)
{
    uint64_t h;
    if (values_hash(m, lv, &h) < 0)
        return -EINVAL;
    struct series *s = series_find(m, lv, h);
    if (s) {
        *out = s;
        return 0;
    }
    size_t keylen = 0, labelslen = 0;
    for (size_t i = 0; i < m->label_names.n; i++) {
        if (!utf8_valid(lv[i]))
            return -EINVAL;
        keylen += strlen(lv[i]) + 1;
        labelslen += (i ? 1 : 0) + strlen(m->label_names.v[i]) + 3 + escape_label(NULL, lv[i]);
    }
    int rc = series_reserve(m);
    if (rc < 0)
        return rc;
    size_t bsz = m->nbounds * sizeof(uint64_t);
    s = core_calloc(1, sizeof(*s) + bsz + keylen + labelslen + 1);
    if (!s)
        return -ENOMEM;
    s->hash = h;
    s->bucket = m->nbounds ? (uint64_t *)(s + 1) : NULL;
    s->key = (char *)(s + 1) + bsz;
    s->keylen = keylen;
    s->labels = s->key + keylen;
    s->labelslen = labelslen;
    char *k = s->key, *d = s->labels;
    for (size_t i = 0; i < m->label_names.n; i++) {
        size_t l = strlen(lv[i]);
        memcpy(k, lv[i], l + 1);
        k += l + 1;
        if (i)
            *d++ = ',';
        l = strlen(m->label_names.v[i]);
        memcpy(d, m->label_names.v[i], l);
        d += l;
        *d++ = '=';
        *d++ = '"';
        d += escape_label(d, lv[i]);
        *d++ = '"';
    }
    *d = '\0';
    size_t pos = sorted_lower(m, s->key, s->keylen);
    memmove(m->sorted + pos + 1, m->sorted + pos, (m->n - pos) * sizeof(*m->sorted));
    m->sorted[pos] = s;
    m->n++;
    s->next = m->tab[h & m->tmask];
    m->tab[h & m->tmask] = s;
    *out = s;
    return 0;
}

static void
series_clear(plb_metric *m)
{
    for (size_t i = 0; i < m->n; i++)
        core_free(m->sorted[i]);
    core_free(m->sorted);
    core_free(m->tab);
    m->sorted = NULL;
    m->tab = NULL;
    m->n = m->cap = 0;
    m->tmask = 0;
}

/* ------------------------------------------------------------------------ */
/* Registry and families. */

struct core_metrics *
core_metrics_new(void)
{
    return core_calloc(1, sizeof(struct core_metrics));
}

static void
family_free(plb_metric *m)
{
    if (!m)
        return;
    while (m->views) {
        plb_metric *v = m->views;
        m->views = v->next;
        core_free(v->fixed);
        core_free(v);
    }
    series_clear(m);
    core_strv_free(&m->label_names);
    core_free(m->name);
    core_free(m->help);
    core_free(m->bounds);
    core_free(m->le);
    core_free(m);
}

void
core_metrics_free(struct core_metrics *r)
{
    if (!r)
        return;
    while (r->hooks) {
        struct collect_hook *h = r->hooks;
        r->hooks = h->next;
        core_free(h);
    }
    for (size_t i = 0; i < r->n; i++)
        family_free(r->fam[i]);
    core_free(r->fam);
    core_free(r);
}

/* Index of the first family whose name is >= name. */
static size_t
family_lower(const struct core_metrics *r, const char *name)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(r->fam[mid]->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The sample and family names a family occupies in either format, with
 * "_created", which OpenMetrics reserves beside counters and histograms. */
struct occupied {
    const char *base;
    size_t blen;
    const char *sfx;
};

static size_t
occupied_names(enum plb_metric_type type, const char *name, struct occupied o[5])
{
    size_t len = strlen(name);
    switch (type) {
    case PLB_METRIC_COUNTER:
        if (len > 6 && strcmp(name + len - 6, "_total") == 0)
            len -= 6;
        o[0] = (struct occupied){name, len, ""};
        o[1] = (struct occupied){name, len, "_total"};
        o[2] = (struct occupied){name, len, "_created"};
        return 3;
    case PLB_METRIC_HISTOGRAM:
        o[0] = (struct occupied){name, len, ""};
        o[1] = (struct occupied){name, len, "_bucket"};
        o[2] = (struct occupied){name, len, "_sum"};
        o[3] = (struct occupied){name, len, "_count"};
        o[4] = (struct occupied){name, len, "_created"};
        return 5;
    default:
        o[0] = (struct occupied){name, len, ""};
        return 1;
    }
}

/* base[0..blen) + sfx of a and of b: the same string? */
static int
occupied_equal(const struct occupied *a, const struct occupied *b)
{
    if (a->blen > b->blen)
        return occupied_equal(b, a);
    size_t d = b->blen - a->blen;
    return memcmp(a->base, b->base, a->blen) == 0 && strncmp(a->sfx, b->base + a->blen, d) == 0 &&
           strcmp(a->sfx + d, b->sfx) == 0;
}

static int
clashes(const struct core_metrics *r, enum plb_metric_type type, const char *name)
{
    struct occupied mine[5], theirs[5];
    size_t nm = occupied_names(type, name, mine);
    for (size_t f = 0; f < r->n; f++) {
        size_t nt = occupied_names(r->fam[f]->type, r->fam[f]->name, theirs);
        for (size_t i = 0; i < nm; i++)
            for (size_t j = 0; j < nt; j++)
                if (occupied_equal(&mine[i], &theirs[j]))
                    return 1;
    }
    return 0;
}

/* Does existing family m have exactly these properties? */
static int
family_same(const plb_metric *m, enum plb_metric_type type, const char *help, const char *const *ln,
            size_t nl, const double *b, size_t nb)
{
    if (m->type != type || strcmp(m->help, help) != 0 || m->label_names.n != nl || m->nbounds != nb)
        return 0;
    for (size_t i = 0; i < nl; i++)
        if (strcmp(m->label_names.v[i], ln[i]) != 0)
            return 0;
    for (size_t i = 0; i < nb; i++)
        if (m->bounds[i] != b[i])
            return 0;
    return 1;
}

plb_metric *
core_metric_new(struct core_metrics *r, enum plb_metric_type type, const char *name,
                const char *help, const char *const *label_names, const double *buckets,
                size_t nbuckets, int *err)
{
    plb_metric *m = NULL;
    int rc = -EINVAL;
    size_t nl = 0;

    if (!help)
        help = "";
    if (!r || !name_valid(name, 0) || !utf8_valid(help) ||
        (type != PLB_METRIC_COUNTER && type != PLB_METRIC_GAUGE && type != PLB_METRIC_HISTOGRAM))
        goto fail;
    for (; label_names && label_names[nl]; nl++) {
        if (!name_valid(label_names[nl], 1))
            goto fail;
        for (size_t j = 0; j < nl; j++)
            if (strcmp(label_names[j], label_names[nl]) == 0)
                goto fail;
    }
    if (type == PLB_METRIC_HISTOGRAM) {
        if (!buckets || nbuckets == 0) {
            buckets = default_buckets;
            nbuckets = sizeof(default_buckets) / sizeof(default_buckets[0]);
        }
        if (isinf(buckets[nbuckets - 1]) && buckets[nbuckets - 1] > 0)
            nbuckets--; /* +Inf is implicit */
        for (size_t i = 0; i < nbuckets; i++)
            if (!isfinite(buckets[i]) || (i && !(buckets[i] > buckets[i - 1])))
                goto fail;
    } else if (buckets || nbuckets) {
        goto fail;
    }

    size_t pos = family_lower(r, name);
    if (pos < r->n && strcmp(r->fam[pos]->name, name) == 0) {
        if (family_same(r->fam[pos], type, help, label_names, nl, buckets, nbuckets))
            return r->fam[pos];
        rc = -EEXIST;
        goto fail;
    }
    if (clashes(r, type, name)) {
        rc = -EEXIST;
        goto fail;
    }

    rc = -ENOMEM;
    if (r->n == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 16;
        plb_metric **v = core_realloc(r->fam, ncap * sizeof(*v));
        if (!v)
            goto fail;
        r->fam = v;
        r->cap = ncap;
    }
    m = core_calloc(1, sizeof(*m));
    if (!m)
        goto fail;
    m->type = type;
    m->name = core_strdup(name);
    m->help = core_strdup(help);
    if (!m->name || !m->help)
        goto fail;
    for (size_t i = 0; i < nl; i++)
        if (core_strv_push(&m->label_names, label_names[i], strlen(label_names[i])) < 0)
            goto fail;
    if (nbuckets) {
        m->bounds = core_malloc(nbuckets * sizeof(double));
        m->le = core_calloc(nbuckets, sizeof(*m->le));
        if (!m->bounds || !m->le)
            goto fail;
        memcpy(m->bounds, buckets, nbuckets * sizeof(double));
        m->nbounds = nbuckets;
        for (size_t i = 0; i < nbuckets; i++) {
            fmt_le(m->le[i][0], buckets[i], 0);
            fmt_le(m->le[i][1], buckets[i], 1);
        }
    }
    memmove(r->fam + pos + 1, r->fam + pos, (r->n - pos) * sizeof(*r->fam));
    r->fam[pos] = m;
    r->n++;
    return m;

fail:
    family_free(m);
    if (err)
        *err = rc;
    return NULL;
}

/* Unlink family r->fam[pos] and free it. */
static void
family_drop(struct core_metrics *r, size_t pos)
{
    plb_metric *m = r->fam[pos];
    memmove(r->fam + pos, r->fam + pos + 1, (r->n - pos - 1) * sizeof(*r->fam));
    r->n--;
    family_free(m);
}

plb_metric *
core_metric_new_view(struct core_metrics *r, const char *fixed_label, const char *fixed_value,
                     enum plb_metric_type type, const char *name, const char *help,
                     const char *const *label_names, const double *buckets, size_t nbuckets,
                     int *err)
{
    const char *names[VIEW_MAX_LABELS + 1];
    plb_metric *f, *v;
    size_t nl = 0, before = r ? r->n : 0;
    int rc = -EINVAL;

    if (!fixed_label || !fixed_value || !utf8_valid(fixed_value))
        goto fail;
    names[0] = fixed_label;
    for (; label_names && label_names[nl]; nl++) {
        if (nl + 1 >= VIEW_MAX_LABELS)
            goto fail;
        names[nl + 1] = label_names[nl];
    }
    names[nl + 1] = NULL;
    f = core_metric_new(r, type, name, help, names, buckets, nbuckets, &rc);
    if (!f)
        goto fail;
    for (v = f->views; v; v = v->next)
        if (strcmp(v->fixed, fixed_value) == 0)
            return v;
    rc = -ENOMEM;
    v = core_calloc(1, sizeof(*v));
    if (v)
        v->fixed = core_strdup(fixed_value);
    if (!v || !v->fixed) {
        core_free(v);
        if (r->n > before) /* registered just now: as it was before */
            family_drop(r, family_lower(r, name));
        goto fail;
    }
    v->type = type;
    v->fam = f;
    v->next = f->views;
    f->views = v;
    return v;

fail:
    if (err)
        *err = rc;
    return NULL;
}

/* The family m writes to, with *lv rewritten for it: a view's fixed value
 * and then its caller's values, in full (VIEW_MAX_LABELS slots); NULL
 * values when the caller gave none but the family wants more. A family is
 * its own, *lv unchanged. */
static plb_metric *
family_of(plb_metric *m, const char *const **lv, const char **full)
{
    plb_metric *f = m->fam;
    if (!f)
        return m;
    full[0] = m->fixed;
    for (size_t i = 1; i < f->label_names.n; i++)
        full[i] = *lv ? (*lv)[i - 1] : NULL;
    *lv = full;
    return f;
}

/* The run [*lo, *hi) of family f's sorted series whose first label value
 * is fixed (a view's series). */
static void
view_run(const plb_metric *f, const char *fixed, size_t *lo, size_t *hi)
{
    size_t l = strlen(fixed) + 1; /* the value and its NUL: a key prefix */
    size_t i = sorted_lower(f, fixed, l);
    *lo = i;
    while (i < f->n && f->sorted[i]->keylen >= l && memcmp(f->sorted[i]->key, fixed, l) == 0)
        i++;
    *hi = i;
}

/* Take series s out of m's hash chain (not out of the sorted array). */
static void
series_unlink(plb_metric *m, const struct series *s)
{
    struct series **pp = &m->tab[s->hash & m->tmask];
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
}

/* ------------------------------------------------------------------------ */
/* Updates. */

int
core_metric_add(plb_metric *m, const char *const *label_values, double v)
{
    const char *full[VIEW_MAX_LABELS];
    struct series *s;
    if (!m || m->type == PLB_METRIC_HISTOGRAM || (m->type == PLB_METRIC_COUNTER && !(v >= 0)))
        return -EINVAL;
    m = family_of(m, &label_values, full);
    int rc = series_get(m, label_values, &s);
    if (rc < 0)
        return rc;
    s->value += v;
    return 0;
}

int
core_metric_set(plb_metric *m, const char *const *label_values, double v)
{
    const char *full[VIEW_MAX_LABELS];
    struct series *s;
    if (!m || m->type != PLB_METRIC_GAUGE)
        return -EINVAL;
    m = family_of(m, &label_values, full);
    int rc = series_get(m, label_values, &s);
    if (rc < 0)
        return rc;
    s->value = v;
    return 0;
}

int
core_metric_observe(plb_metric *m, const char *const *label_values, double v)
{
    const char *full[VIEW_MAX_LABELS];
    struct series *s;
    if (!m || m->type != PLB_METRIC_HISTOGRAM || isnan(v))
        return -EINVAL;
    m = family_of(m, &label_values, full);
    int rc = series_get(m, label_values, &s);
    if (rc < 0)
        return rc;
    /* First bound >= v; observations above every bound land in +Inf only. */
    size_t lo = 0, hi = m->nbounds;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->bounds[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < m->nbounds)
        s->bucket[lo]++;
    s->count++;
    s->value += v;
    return 0;
}

void
core_metric_remove(plb_metric *m, const char *const *label_values)
{
    const char *full[VIEW_MAX_LABELS];
    uint64_t h;
    if (!m)
        return;
    if (!label_values && m->fam) { /* every series of the view */
        plb_metric *f = m->fam;
        size_t lo, hi;
        view_run(f, m->fixed, &lo, &hi);
        for (size_t i = lo; i < hi; i++) {
            series_unlink(f, f->sorted[i]);
            core_free(f->sorted[i]);
        }
        memmove(f->sorted + lo, f->sorted + hi, (f->n - hi) * sizeof(*f->sorted));
        f->n -= hi - lo;
        return;
    }
    if (!label_values) {
        series_clear(m);
        return;
    }
    m = family_of(m, &label_values, full);
    if (values_hash(m, label_values, &h) < 0)
        return;
    struct series *s = series_find(m, label_values, h);
    if (!s)
        return;
    series_unlink(m, s);
    size_t pos = sorted_lower(m, s->key, s->keylen);
    memmove(m->sorted + pos, m->sorted + pos + 1, (m->n - pos - 1) * sizeof(*m->sorted));
    m->n--;
    core_free(s);
}

int
core_metric_get(plb_metric *m, const char *const *label_values, double *out)
{
    const char *full[VIEW_MAX_LABELS];
    uint64_t h;
    if (!m || !out)
        return -EINVAL;
    m = family_of(m, &label_values, full);
    if (values_hash(m, label_values, &h) < 0)
        return -EINVAL;
    struct series *s = series_find(m, label_values, h);
    if (!s)
        return -ENOENT;
    *out = s->value;
    return 0;
}

size_t
core_metric_series_count(const plb_metric *m)
{
    size_t lo, hi;
    if (!m)
        return 0;
    if (!m->fam)
        return m->n;
    view_run(m->fam, m->fixed, &lo, &hi);
    return hi - lo;
}
