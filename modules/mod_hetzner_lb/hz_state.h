/*
 * hz_state.h: what mod_hetzner_lb keeps of each Service between its syncs
 * and reconciles (hz_state.c; pure: no host call, unit tested).
 *
 *   table     the Services we track, by "namespace/name": a key table
 *             (hz_keytab.h, O(1) lookups, 16 bytes a slot, at most half
 *             full) beside a list that keeps their order, newest first
 *   good      the last good robotlb/ annotations
 *   warnings  the warnings in force, reason -> message: the one
 *             de-duplication of every warning Event (hz_warn_once sends a
 *             reason's text once until it is cleared or changes;
 *             hz_warn_each sends every time and leaves the aggregation to
 *             the core); `prismlb status` shows the first as last_error
 *   phase     the Service's sync: annotations known, a reconcile running
 *   status    the status write: in flight or not, the ingress last written
 *             and the one last refused
 *   recheck   the fingerprint of what failed and when it is tried again
 *
 * The event side (hz_sync.c, hz_ingress.c, hz_work.c, hz_status.c) and the
 * reconcile (hz_reconcile.c, hz_refusal.c) both use this file; it includes
 * neither. A warning Event leaves through the table's sink, which the event
 * side sets (it owns the Kubernetes writes).
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_STATE_H
#define PRISMLB_MOD_HETZNER_LB_HZ_STATE_H

#include "hz_keytab.h"

/* Send one warning Event (reason, msg) about Service key, svc (borrowed
 * for the call), and log it. */
typedef void (*hz_warn_fn)(void *arg, const char *key, const plb_obj *svc, const char *reason,
                           const char *msg);

/* The table of Services. Zeroed is empty; warn NULL sends no Event.
 * Walk it from head along next (newest first): a walk that reads next
 * before it drops the current state is safe; a state created during a walk
 * is at the head, behind the walk. */
struct hz_states {
    struct hz_svc_state *head; /* owned */
    struct hz_keytab idx;      /* key -> the state in the list (borrowed) */
    hz_warn_fn warn;
    void *warn_arg;
};

/* A Service's sync, one machine per Service (hz_sync.c moves it):
 *
 *          good annotations                 a reconcile starts
 *   NEW ---------------------------> IDLE -----------------------> RUNNING
 *    ^                                ^  <----------------------- |     |
 *    |                                |        it ends            |     | a sync
 *    | another UID under its key      |  it ends: synced again    |     | meanwhile
 *    +---- (from any phase)           +-------------------------- AGAIN <-+
 *
 * NEW: no good robotlb/ annotations yet (no reconcile; the ip mode and
 * network are the settings'). At most one reconcile per Service runs; a
 * sync that finds one RUNNING leaves the work to the sync after it. A
 * reconcile of the UID before is not the new one's: its end changes
 * nothing here. */
enum hz_svc_phase {
    HZ_SVC_NEW = 0,
    HZ_SVC_IDLE,
    HZ_SVC_RUNNING,
    HZ_SVC_AGAIN,
};

/* A Service's status write, one machine per Service (hz_ingress.c):
 *
 *          a write starts              a sync wants one meanwhile
 *   IDLE -----------------> WRITING -----------------------------> AGAIN
 *    ^  <------------------ |                                       |
 *    |       it ends                                                |
 *    +------------------ it ends: synced again ---------------------+
 *
 * One write in flight per Service. */
enum hz_status_phase {
    HZ_STATUS_IDLE = 0,
    HZ_STATUS_WRITING,
    HZ_STATUS_AGAIN,
};

/* One Service we track (by namespace/name). */
struct hz_svc_state {
    struct hz_states *tab; /* the table it is in (borrowed) */
    char *key;             /* "ns/name" */
    char *uid;
    enum hz_svc_phase phase;
    struct hz_annot good; /* last good annotations (phase past NEW) */
    json_t *warned;       /* reason -> message of the warnings in force */
    int by_name;          /* look its names up one by one (a create met a
                             name the lists did not show) */
    enum hz_status_phase status;
    json_t *status_sent;    /* the ingress last written (owned): not written
                               again until the cache shows another one */
    char *status_rv;        /* the resourceVersion of the Service the write
                               in flight was made for (owned) */
    json_t *status_refused; /* the ingress the API server refused (422;
                               owned): not sent again as it is, to the ... */
    char *refused_rv;       /* ... Service of this resourceVersion (owned) */
    uint64_t fail_fp;       /* fingerprint of the desired state that failed */
    int64_t retry_at;       /* ... not tried again before this (monotonic ms) */
    struct hz_svc_state *prev, *next;
};

/* 1 when st has good annotations (st->good holds them). */
static inline int
hz_state_good(const struct hz_svc_state *st)
{
    return st->phase != HZ_SVC_NEW;
}

/* The state of Service key ("ns/name") in t (borrowed from t), in O(1);
 * created, empty, at the head when create is set. NULL when absent (or
 * out of memory). A state stays at its address until it is dropped. */
HZ_HIDDEN struct hz_svc_state *hz_state_get(struct hz_states *t, const char *key, int create);
/* Forget the state of Service key (freed; absent is fine); the others
 * keep their order. */
HZ_HIDDEN void hz_state_drop(struct hz_states *t, const char *key);
/* Free every state of t and its index; t is empty after (its sink
 * stays). */
HZ_HIDDEN void hz_states_clear(struct hz_states *t);
/* The earliest retry_at after now of the Services whose last reconcile
 * failed (fail_fp set), or 0 when none is ahead. */
HZ_HIDDEN int64_t hz_states_next_retry(const struct hz_states *t, int64_t now);
/* Forget every status written (each is written again if the Service does
 * not show it: a write overwritten before the cache showed it), but the
 * one of a write in flight (status not IDLE), which its end needs: a 422
 * keeps it as the ingress not to send again as it is. */
HZ_HIDDEN void hz_states_forget_status(struct hz_states *t);

/* A warning Event for st's Service svc (borrowed) once while the same
 * reason and text hold: sent again only after hz_warn_clear of reason or
 * with another text. 1 sent, 0 already in force, -ENOMEM not recorded
 * (nothing sent). */
HZ_HIDDEN int hz_warn_once(struct hz_svc_state *st, const plb_obj *svc, const char *reason,
                           const char *msg);
/* A warning Event for svc every time (a refusal retried on the recheck
 * cycle: the core's Event aggregation counts the repeats into one Event);
 * the text is kept as the warning in force. 0, or -ENOMEM when sent but
 * not recorded. */
HZ_HIDDEN int hz_warn_each(struct hz_svc_state *st, const plb_obj *svc, const char *reason,
                           const char *msg);
/* The condition behind reason is over: warn again when it returns. */
HZ_HIDDEN void hz_warn_clear(struct hz_svc_state *st, const char *reason);

#endif
