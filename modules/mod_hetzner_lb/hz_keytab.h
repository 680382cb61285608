/*
 * hz_keytab.h: an index of elements by a string key each of them holds
 * (hz_keytab.c; pure). mod_hetzner_lb finds its balancers by their
 * robotlb/service-uid label (hz_lbs.c) and its Services by "namespace/name"
 * (hz_state.c) through it: every informer event and every sync looks one
 * up, among as many as 10,000, so a lookup is O(1), not a scan.
 *
 * Open addressing with linear probing and backward-shift deletion (no
 * tombstones), at most half full and at least an eighth full once it has
 * grown: a slot is the key (borrowed from the element, which must keep it
 * unchanged while indexed) and the element, 16 bytes. A zeroed table is
 * empty and allocates nothing until the first put. The table never owns
 * its elements. An order of elements is the caller's to keep (a list):
 * hz_keytab_next walks in slot order, which any put or del changes.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_KEYTAB_H
#define PRISMLB_MOD_HETZNER_LB_HZ_KEYTAB_H

#include "hz.h"

struct hz_keytab_slot {
    const char *key; /* borrowed from elem; NULL when the slot is empty */
    void *elem;      /* borrowed */
};

/* Zeroed is empty. */
struct hz_keytab {
    struct hz_keytab_slot *slot; /* cap slots (owned), NULL while cap is 0 */
    size_t cap;                  /* 0, or a power of two >= 16 */
    size_t n;                    /* slots in use */
};

/* The element indexed under key (borrowed), or NULL. */
HZ_HIDDEN void *hz_keytab_get(const struct hz_keytab *t, const char *key);
/* Index elem (borrowed) under key (borrowed from elem; not NULL). A key
 * indexed already is given elem instead: *replaced (when not NULL) is the
 * element it held, else NULL. 0, or -ENOMEM (t unchanged). */
HZ_HIDDEN int hz_keytab_put(struct hz_keytab *t, const char *key, void *elem, void **replaced);
/* Take key out of t: the element it held (borrowed), or NULL when absent.
 * May shrink t (a failed shrink leaves it as it was). */
HZ_HIDDEN void *hz_keytab_del(struct hz_keytab *t, const char *key);
/* Walk t: start with *pos 0; the next element (borrowed), NULL at the end.
 * t must not change during the walk. */
HZ_HIDDEN void *hz_keytab_next(const struct hz_keytab *t, size_t *pos);
/* Free t's slots (not the elements); t is zeroed (empty) after. */
HZ_HIDDEN void hz_keytab_fini(struct hz_keytab *t);

#endif
