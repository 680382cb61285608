/*
 * hz_lbs.c: the balancers mod_hetzner_lb keeps between answers (pure).
 *
 * Hetzner's JSON of one balancer with 50 targets holds ~90 KiB as a
 * jansson document (every target an object with its health_status per
 * service); what the module reads of it, struct hz_actual, is ~3 KiB. So a
 * balancer is parsed once when its answer arrives and only that is kept:
 * struct hz_lb, shared by reference, never changed once made.
 *
 * The index maps the robotlb/service-uid label to one balancer, a
 * reference each: a key table (hz_keytab.h) keyed by the balancer's own
 * uid string, or (hz_lbs_put_as) by another string the caller keeps
 * alive as long as the entry: a shared group's balancer by its group,
 * which its label holds.
 */
#include <errno.h>
#include <string.h>

#include "hz_keytab.h"

struct hz_lbs {
    struct hz_keytab t; /* uid -> struct hz_lb, a reference each */
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
    return hz_calloc(sizeof(struct hz_lbs));
}

void
hz_lbs_free(struct hz_lbs *m)
{
    struct hz_lb *lb;
    if (!m)
        return;
    for (size_t pos = 0; (lb = hz_keytab_next(&m->t, &pos));)
        hz_lb_unref(lb);
    hz_keytab_fini(&m->t);
    hz_free(m);
}

struct hz_lb *
hz_lbs_get(const struct hz_lbs *m, const char *uid)
{
    return m && uid ? hz_keytab_get(&m->t, uid) : NULL;
}

int
hz_lbs_put(struct hz_lbs *m, struct hz_lb *lb)
{
    if (!lb->a.uid)
        return -EINVAL;
    return hz_lbs_put_as(m, lb->a.uid, lb);
}

int
hz_lbs_put_as(struct hz_lbs *m, const char *key, struct hz_lb *lb)
{
    void *old;
    if (hz_keytab_put(&m->t, key, lb, &old) < 0)
        return -ENOMEM;
    hz_lb_ref(lb); /* before the unref: lb may be the one it replaces */
    hz_lb_unref(old);
    return 0;
}

void
hz_lbs_del(struct hz_lbs *m, const char *uid)
{
    if (m && uid)
        hz_lb_unref(hz_keytab_del(&m->t, uid));
}

size_t
hz_lbs_count(const struct hz_lbs *m)
{
    return m ? m->t.n : 0;
}

struct hz_lb *
hz_lbs_next(const struct hz_lbs *m, size_t *pos)
{
    return m ? hz_keytab_next(&m->t, pos) : NULL;
}

struct hz_lb *
hz_lbs_named(const struct hz_lbs *m, const char *name)
{
    struct hz_lb *lb;
    for (size_t i = 0; (lb = hz_lbs_next(m, &i));)
        if (strcmp(lb->a.name, name) == 0)
            return lb;
    return NULL;
}

const json_t *
hz_items_named(const json_t *items, const char *name)
{
    size_t i;
    json_t *it;
    json_array_foreach((json_t *)items, i, it)
    {
        const char *n = json_string_value(json_object_get(it, "name"));
        if (n && strcmp(n, name) == 0)
            return it;
    }
    return NULL;
}

const json_t *
hz_items_hccm(const json_t *items, const char *uid)
{
    size_t i;
    json_t *it;
    const json_t *best = NULL;
    json_array_foreach((json_t *)items, i, it)
    {
        const char *u =
            json_string_value(json_object_get(json_object_get(it, "labels"), HZ_LABEL_HCCM_UID));
        json_int_t id = json_integer_value(json_object_get(it, "id"));
        if (u && strcmp(u, uid) == 0 &&
            (!best || id < json_integer_value(json_object_get(best, "id"))))
            best = it;
    }
    return best;
}
