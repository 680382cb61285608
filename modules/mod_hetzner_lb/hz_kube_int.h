/*
 * hz_kube_int.h: what the event side of mod_hetzner_lb shares inside
 * itself: hz_kube.c (Kubernetes writes, deletes, lifecycle), hz_watch.c
 * (informers, the work queue's timer, full passes), hz_sync.c (the
 * per-Service sync and the reconciles' completion) and hz_status.c. The
 * reconcile (hz_reconcile.c) does not include it: it is started through
 * hz_rec.h and reports back through its completion callback.
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
/* Drop the robotlb/finalizer of earlier releases from Service svc (key,
 * ns/name), if it has it (hz_kube.c). */
HZ_HIDDEN void hz_kube_drop_finalizer(struct hz_kside *ks, const plb_obj *svc, const char *key,
                                      const char *ns, const char *name);
/* Sync shortly what the work queue holds (hz_watch.c). */
HZ_HIDDEN void hz_kube_sync_arm(struct hz_kside *ks);
/* The sync timer: sync the queued Services (hz_sync.c). */
HZ_HIDDEN void hz_sync_fire(plb_timer *t, void *arg);
/* The recheck timer: queue the Services whose recheck is due (hz_sync.c). */
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

/* Arm the recheck timer (hz_sync.c) for the earliest Service retry that is due, the
 * work queue's earliest delayed key, or HZ_LOST_RETRY_MS with ks->lost; keys
 * whose delay ended are queued and synced shortly. */
HZ_HIDDEN void hz_recheck_arm(struct hz_kside *ks);

#endif
