/*
 * hz_lbs.c: the balancers mod_hetzner_lb keeps between answers (pure).
 *
 * Hetzner's JSON of one balancer with 50 targets holds ~90 KiB as a
 * jansson document (every target an object with its health_status per
 * service); what the module reads of it, struct hz_actual, is ~3 KiB. So a
 * balancer is parsed once when its answer arrives and only that is kept:
 * struct hz_lb, shared by reference, never changed once made.
 *
 * The index maps the robotlb/service-uid label to one balancer: an open
 * addressing table (linear probing, backward-shift deletion) keyed by the
 * balancer's own uid string, at most half full.
 */
#include <errno.h>
#include <string.h>

#include "hz.h"

struct hz_lbs {
    struct hz_lb **slot; /* cap slots, a reference each, NULL when empty */
    size_t cap;          /* a power of two */
    size_t n;
};

int
hz_lb_parse(const json_t *lb, struct hz_lb **out)
{
    struct hz_lb *b = hz_calloc(sizeof(*b));
    int rc;
    *out = NULL;
    if (!b)
        return -ENOMEM;
    if ((rc = hz_actual_parse(lb, &b->a)) < 0) {
        hz_free(b);
        return rc;
    }
    b->refs = 1;
    *out = b;
    return 0;
}

struct hz_lb *
hz_lb_ref(struct hz_lb *lb)
{
    if (lb)
        lb->refs++;
    return lb;
}

void
hz_lb_unref(struct hz_lb *lb)
{
    if (!lb || --lb->refs > 0)
        return;
    hz_actual_clear(&lb->a);
    hz_free(lb);
}

struct hz_lbs *
hz_lbs_new(void)
{
    struct hz_lbs *m = hz_calloc(sizeof(*m));
    if (m && !(m->slot = hz_calloc(16 * sizeof(*m->slot)))) {
        hz_free(m);
        return NULL;
    }
    if (m)
        m->cap = 16;
    return m;
}

void
hz_lbs_free(struct hz_lbs *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->cap; i++)
        hz_lb_unref(m->slot[i]);
    hz_free(m->slot);
    hz_free(m);
}

static size_t
home(const struct hz_lbs *m, const char *uid)
{
    return (size_t)hz_fnv1a64(uid) & (m->cap - 1);
}

/* The slot holding uid, or the empty slot where it would go. */
static size_t
find(const struct hz_lbs *m, const char *uid)
{
    size_t i = home(m, uid);
    while (m->slot[i] && strcmp(m->slot[i]->a.uid, uid) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

struct hz_lb *
hz_lbs_get(const struct hz_lbs *m, const char *uid)
{
    return m && uid ? m->slot[find(m, uid)] : NULL;
}

/* Twice the slots; 0 or -ENOMEM (m unchanged). */
static int
grow(struct hz_lbs *m)
{
    struct hz_lbs g = {.cap = m->cap * 2};
    if (!(g.slot = hz_calloc(g.cap * sizeof(*g.slot))))
        return -ENOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i])
            g.slot[find(&g, m->slot[i]->a.uid)] = m->slot[i];
    hz_free(m->slot);
    m->slot = g.slot;
    m->cap = g.cap;
    return 0;
}

int
hz_lbs_put(struct hz_lbs *m, struct hz_lb *lb)
{
    size_t i;
    if (!lb->a.uid)
        return -EINVAL;
    i = find(m, lb->a.uid);
    if (m->slot[i]) {
        hz_lb_ref(lb); /* before the unref: lb may be the one it replaces */
        hz_lb_unref(m->slot[i]);
        m->slot[i] = lb;
        return 0;
    }
    if ((m->n + 1) * 2 > m->cap) {
        if (grow(m) < 0)
            return -ENOMEM;
        i = find(m, lb->a.uid);
    }
    m->slot[i] = hz_lb_ref(lb);
    m->n++;
    return 0;
}

void
hz_lbs_del(struct hz_lbs *m, const char *uid)
{
    size_t mask, i, j;
    if (!m || !uid || !m->slot[i = find(m, uid)])
        return;
    mask = m->cap - 1;
    hz_lb_unref(m->slot[i]);
    m->slot[i] = NULL;
    m->n--;
    /* Move back each later entry of the run whose home is not between the
     * hole and it, so that no lookup stops at the hole too early. */
    for (j = (i + 1) & mask; m->slot[j]; j = (j + 1) & mask) {
        size_t k = home(m, m->slot[j]->a.uid);
        if (((j - k) & mask) >= ((j - i) & mask)) {
            m->slot[i] = m->slot[j];
            m->slot[j] = NULL;
            i = j;
        }
    }
}

size_t
hz_lbs_count(const struct hz_lbs *m)
{
    return m ? m->n : 0;
}

struct hz_lb *
hz_lbs_next(const struct hz_lbs *m, size_t *pos)
{
    while (m && *pos < m->cap) {
        struct hz_lb *lb = m->slot[(*pos)++];
        if (lb)
            return lb;
    }
    return NULL;
}
