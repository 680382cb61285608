/*
 * hz_state.c: the per-Service state of mod_hetzner_lb and the warnings in
 * force (see hz_state.h). Pure: the Events leave through the table's sink.
 *
 * Every informer event, sync, status write and reconcile answer looks a
 * Service up by "ns/name", among up to 10,000: a scan of the list made
 * that grow with the square of the Services. The lookup is the module's
 * key table (hz_keytab.c, open addressing, the one hz_lbs.c uses), not a
 * jansson object: a json_object holds json_t values only, so a state would
 * sit behind a json_integer of its address, one allocation more per
 * Service beside jansson's own pair and key copy; a slot here is 16 bytes
 * and its key is the state's own string. The doubly linked list keeps the
 * order the callers walk (newest first) and an O(1) unlink on a drop.
 */
#include <errno.h>
#include <string.h>

#include "hz_dlist.h"
#include "hz_state.h"

/* Free s and what it owns (out of its table, or never in it). */
static void
state_free(struct hz_svc_state *s)
{
    hz_free_each(&s->key, &s->uid, &s->status_rv, &s->refused_rv, NULL);
    hz_annot_clear(&s->good);
    json_decref(s->warned);
    json_decref(s->status_sent);
    json_decref(s->status_refused);
    hz_free(s);
}

struct hz_svc_state *
hz_state_get(struct hz_states *t, const char *key, int create)
{
    struct hz_svc_state *s = hz_keytab_get(&t->idx, key);
    if (s || !create)
        return s;
    if (!(s = hz_calloc(sizeof(*s))))
        return NULL;
    if (!(s->key = hz_strdup(key)) || hz_keytab_put(&t->idx, s->key, s, NULL) < 0) {
        state_free(s);
        return NULL;
    }
    hz_annot_clear(&s->good);
    s->tab = t;
    HZ_DLIST_PUSH(t->head, s, prev, next);
    return s;
}

void
hz_state_drop(struct hz_states *t, const char *key)
{
    struct hz_svc_state *s = hz_keytab_del(&t->idx, key);
    if (!s)
        return;
    HZ_DLIST_REMOVE(t->head, s, prev, next);
    state_free(s);
}

void
hz_states_clear(struct hz_states *t)
{
    while (t->head) {
        struct hz_svc_state *s = t->head;
        t->head = s->next;
        state_free(s);
    }
    hz_keytab_fini(&t->idx);
}

int64_t
hz_states_next_retry(const struct hz_states *t, int64_t now)
{
    int64_t first = 0;
    for (const struct hz_svc_state *s = t->head; s; s = s->next)
        if (s->fail_fp && s->retry_at > now && (!first || s->retry_at < first))
            first = s->retry_at;
    return first;
}

void
hz_states_forget_status(struct hz_states *t)
{
    for (struct hz_svc_state *s = t->head; s; s = s->next) {
        /* a write in flight keeps what it sends: its end decides (a
         * refused one is kept as the refused ingress) */
        if (s->status != HZ_STATUS_IDLE)
            continue;
        json_decref(s->status_sent);
        s->status_sent = NULL;
    }
}

/* Hand one warning Event to st's table's sink, if it has one. */
static void
send(const struct hz_svc_state *st, const plb_obj *svc, const char *reason, const char *msg)
{
    if (st->tab && st->tab->warn)
        st->tab->warn(st->tab->warn_arg, st->key, svc, reason, msg);
}

int
hz_warn_once(struct hz_svc_state *st, const plb_obj *svc, const char *reason, const char *msg)
{
    const char *prev = json_string_value(json_object_get(st->warned, reason));
    if (prev && strcmp(prev, msg) == 0)
        return 0;
    if (!st->warned && !(st->warned = json_object()))
        return -ENOMEM;
    if (json_object_set_new(st->warned, reason, json_string_nocheck(msg)) < 0)
        return -ENOMEM;
    send(st, svc, reason, msg);
    return 1;
}

int
hz_warn_each(struct hz_svc_state *st, const plb_obj *svc, const char *reason, const char *msg)
{
    int rc = 0;
    if (!(st->warned || (st->warned = json_object())) ||
        json_object_set_new(st->warned, reason, json_string_nocheck(msg)) < 0)
        rc = -ENOMEM;
    send(st, svc, reason, msg);
    return rc;
}

void
hz_warn_clear(struct hz_svc_state *st, const char *reason)
{
    if (st->warned)
        json_object_del(st->warned, reason);
}
