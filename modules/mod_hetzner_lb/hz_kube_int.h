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

/* Write svc's status.loadBalancer.ingress from lb (borrowed) when it
 * differs from what the Service shows: at most one write in flight per
 * Service, and none while the last one written is what it should show
 * (the cache has not caught up yet). 0, or -ENOMEM when a write it needs
 * could not be allocated or started (the caller has the Service synced
 * again). */
HZ_HIDDEN int hz_status_update(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                               const struct hz_actual *lb);
/* 1 when balancer lb (borrowed) serves st's Service: it asks for no
 * network, or lb is attached to the one it asks for (whose id is known).
 * Until then the Service's status is not written: a balancer outside the
 * network reaches none of its private targets. */
HZ_HIDDEN int hz_lb_serves(const struct hz_kside *ks, const struct hz_svc_state *st,
                           const struct hz_actual *lb);
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
 * its labelled balancer (hz_reconcile.c); annot_bad: this sync found its
 * annotations invalid (warned of; st->good is the last good set), else an
 * InvalidAnnotation in force ends when the set checks out. 0 (started,
 * nothing to do, or a problem the Service was warned of), or -ENOMEM
 * (-errno) when it could not be decided or started: the caller syncs the
 * Service again. */
HZ_HIDDEN int hz_reconcile(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                           int annot_bad);
/* Arm the recheck timer for the earliest Service retry that is due, the
 * work queue's earliest delayed key, or HZ_LOST_RETRY_MS with ks->lost; keys
 * whose delay ended are queued and synced shortly. */
HZ_HIDDEN void hz_recheck_arm(struct hz_kside *ks);

#endif
