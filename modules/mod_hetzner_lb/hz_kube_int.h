/*
 * hz_kube_int.h: what hz_kube.c (informers, sync, events, status) and
 * hz_reconcile.c (one Service's reconcile) share inside mod_hetzner_lb.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_KUBE_INT_H
#define PRISMLB_MOD_HETZNER_LB_HZ_KUBE_INT_H

#include "hz_kube.h"

/* After an event or a retry was lost to memory, every Service is synced
 * again this much later. */
#define HZ_LOST_RETRY_MS 1000

/* One Service we track (by namespace/name). */
struct hz_svc_state {
    char *key; /* "ns/name" */
    char *uid;
    struct hz_annot good; /* last good annotations */
    int have_good;
    char *last_bad;      /* the last annotation problem reported */
    json_t *warned;      /* reason -> message of the warnings in force */
    int busy;            /* a reconcile is in flight */
    int dirty;           /* something changed meanwhile: sync again after it */
    int by_name;         /* look its names up one by one (a create met a
                            name the lists did not show) */
    json_t *status_sent; /* the ingress last written (owned): not written
                            again until the cache shows another one */
    int status_busy;     /* a status write is in flight */
    int status_again;    /* a sync met it in flight: sync again after it */
    uint64_t fail_fp;    /* fingerprint of the desired state that failed */
    int64_t retry_at;    /* ... not tried again before this (monotonic ms) */
    struct hz_svc_state *next;
};

/* A string at a, b[, c] of o (borrowed from o), or NULL. */
HZ_HIDDEN const char *hz_ks_str(const struct hz_kside *ks, const plb_obj *o, const char *a,
                                const char *b, const char *c);
/* The state of Service key ("ns/name"); created when create is set. NULL
 * when absent (or out of memory). */
HZ_HIDDEN struct hz_svc_state *hz_state_get(struct hz_kside *ks, const char *key, int create);
/* Write svc's status.loadBalancer.ingress from lb (borrowed) when it
 * differs from what the Service shows: at most one write in flight per
 * Service, and none while the last one written is what it should show
 * (the cache has not caught up yet). 0, or -ENOMEM when a write it needs
 * could not be allocated or started (the caller has the Service synced
 * again). */
HZ_HIDDEN int hz_status_update(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                               const struct hz_actual *lb);
/* A warning Event for svc, once while the same reason and message hold. */
HZ_HIDDEN void hz_warn_once(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                            const char *reason, const char *msg);
/* A warning Event for svc every time (a refusal retried on the recheck
 * cycle): the core's Event aggregation counts the repeats into one Event;
 * the text is kept as the Service's warning in force (prismlb status). */
HZ_HIDDEN void hz_warn_each(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                            const char *reason, const char *msg);
/* 1 when balancer lb (borrowed) serves st's Service: it asks for no
 * network, or lb is attached to the one it asks for (whose id is known).
 * Until then the Service's status is not written: a balancer outside the
 * network reaches none of its private targets. */
HZ_HIDDEN int hz_lb_serves(const struct hz_kside *ks, const struct hz_svc_state *st,
                           const struct hz_actual *lb);
/* The condition behind reason is over: warn again when it returns. */
HZ_HIDDEN void hz_warn_clear(struct hz_svc_state *st, const char *reason);
/* Forget the state of Service key. */
HZ_HIDDEN void hz_state_drop(struct hz_kside *ks, const char *key);
/* Sync shortly what the work queue holds (hz_watch.c). */
HZ_HIDDEN void hz_kube_sync_arm(struct hz_kside *ks);
/* The sync timer: sync the queued Services (hz_kube.c). */
HZ_HIDDEN void hz_sync_fire(plb_timer *t, void *arg);
/* The recheck timer: queue the Services whose recheck is due (hz_kube.c). */
HZ_HIDDEN void hz_recheck_fire(plb_timer *t, void *arg);
/* Create the three informers (hz_watch.c). 0 or -EIO. */
HZ_HIDDEN int hz_watch_start(struct hz_kside *ks);
/* Delete the balancer labelled with uid (from the resync list), if any.
 * 0, or -ENOMEM when the delete could not be started. */
HZ_HIDDEN int hz_delete_labelled(struct hz_kside *ks, const char *uid);
/* A sync of Service key ("ns/name") ran out of memory: sync it again
 * after its backoff (5 ms, doubling), or, when even that cannot be
 * queued, every Service at the next recheck. */
HZ_HIDDEN void hz_kube_retry(struct hz_kside *ks, const char *key);

/* Refusals (hz_refusal.c): a warning Event on st's Service svc for a
 * refused action kind (its target ip for a target) on balancer lb_name
 * while asking for d, with Hetzner's answer res. */
HZ_HIDDEN void hz_refused_op(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                             const struct hz_desired *d, const char *lb_name, enum hz_op_kind kind,
                             const char *ip, const struct hz_result *res);
/* ... for a refused create of d. */
HZ_HIDDEN void hz_refused_create(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                                 const struct hz_desired *d, const struct hz_result *res);
/* A reconcile passed without a refusal: forget the ones in force. */
HZ_HIDDEN void hz_refusals_clear(struct hz_svc_state *st);
/* The Service asks for another location than its balancer lb's (borrowed),
 * which Hetzner cannot change: LocationUnchangeable, once while it
 * holds. */
HZ_HIDDEN void hz_location_check(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                                 const struct hz_desired *d, const struct hz_actual *lb);
/* No node to target (ntargets 0) while balancer lb exists:
 * BalancerWithoutTargets, once while it holds. */
HZ_HIDDEN void hz_targets_check(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                                size_t ntargets, const struct hz_actual *lb);

/* Reconcile st's Service svc (borrowed) when what it asks for differs from
 * its labelled balancer (hz_reconcile.c). 0 (started, nothing to do, or a
 * problem the Service was warned of), or -ENOMEM (-errno) when it could
 * not be decided or started: the caller syncs the Service again. */
HZ_HIDDEN int hz_reconcile(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc);
/* Arm the recheck timer for the earliest Service retry that is due, the
 * work queue's earliest delayed key, or HZ_LOST_RETRY_MS with ks->lost; keys
 * whose delay ended are queued and synced shortly. */
HZ_HIDDEN void hz_recheck_arm(struct hz_kside *ks);

#endif
