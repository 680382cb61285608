/*
 * hz_keytab.c: the index of elements by a string key (see hz_keytab.h).
 *
 * Why a table of our own and not a jansson object: a json_object holds
 * json_t values only, so an element would be smuggled in as a
 * json_integer (one more allocation per entry on top of jansson's own
 * pair and key copy); here an entry is one 16-byte slot and the key is the
 * element's own string. Measured with 10,000 "ns/name" keys (jansson
 * 2.14, glibc): 1.55 MB as a json_object of integers, 0.52 MB here
 * (32,768 slots); 10,000 lookups take about 1 ms. The slot count is a power of two; the home slot
 * is hz_fnv1a64(key) masked.
 */
#include <errno.h>
#include <string.h>

#include "hz_keytab.h"

#define MIN_CAP 16

static size_t
home(size_t cap, const char *key)
{
    return (size_t)hz_fnv1a64(key) & (cap - 1);
}

/* The slot holding key, or the empty slot where it would go (cap > 0). */
static size_t
find(const struct hz_keytab_slot *slot, size_t cap, const char *key)
{
    size_t i = home(cap, key);
    while (slot[i].key && strcmp(slot[i].key, key) != 0)
        i = (i + 1) & (cap - 1);
    return i;
}

/* Move every entry to cap new slots. 0, or -ENOMEM (t unchanged). */
static int
resize(struct hz_keytab *t, size_t cap)
{
    struct hz_keytab_slot *s = hz_calloc(cap * sizeof(*s));
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slot[i].key)
            s[find(s, cap, t->slot[i].key)] = t->slot[i];
    hz_free(t->slot);
    t->slot = s;
    t->cap = cap;
    return 0;
}

void *
hz_keytab_get(const struct hz_keytab *t, const char *key)
{
    return t->cap && key ? t->slot[find(t->slot, t->cap, key)].elem : NULL;
}

int
hz_keytab_put(struct hz_keytab *t, const char *key, void *elem, void **replaced)
{
    size_t i;
    if (replaced)
        *replaced = NULL;
    if (t->cap && t->slot[i = find(t->slot, t->cap, key)].key) {
        if (replaced)
            *replaced = t->slot[i].elem;
        t->slot[i].key = key;
        t->slot[i].elem = elem;
        return 0;
    }
    if ((t->n + 1) * 2 > t->cap && resize(t, t->cap ? t->cap * 2 : MIN_CAP) < 0)
        return -ENOMEM;
    i = find(t->slot, t->cap, key);
    t->slot[i].key = key;
    t->slot[i].elem = elem;
    t->n++;
    return 0;
}

void *
hz_keytab_del(struct hz_keytab *t, const char *key)
{
    size_t mask, i, j;
    void *elem;
    if (!t->cap || !key || !t->slot[i = find(t->slot, t->cap, key)].key)
        return NULL;
    mask = t->cap - 1;
    elem = t->slot[i].elem;
    t->slot[i].key = NULL;
    t->slot[i].elem = NULL;
    t->n--;
    /* Move back each later entry of the run whose home is not between the
     * hole and it, so that no lookup stops at the hole too early. */
    for (j = (i + 1) & mask; t->slot[j].key; j = (j + 1) & mask) {
        size_t k = home(t->cap, t->slot[j].key);
        if (((j - k) & mask) >= ((j - i) & mask)) {
            t->slot[i] = t->slot[j];
            t->slot[j].key = NULL;
            t->slot[j].elem = NULL;
            i = j;
        }
    }
    if (t->cap > MIN_CAP && t->n * 8 < t->cap)
        (void)resize(t, t->cap / 2); /* fails: stays larger, still correct */
    return elem;
}

void *
hz_keytab_next(const struct hz_keytab *t, size_t *pos)
{
    while (*pos < t->cap) {
        const struct hz_keytab_slot *s = &t->slot[(*pos)++];
        if (s->key)
            return s->elem;
    }
    return NULL;
}

void
hz_keytab_fini(struct hz_keytab *t)
{
    hz_free(t->slot);
    memset(t, 0, sizeof(*t));
}
