/*
 * hz_kube_int.h: what the files of the event side of mod_hetzner_lb share
 * inside it (the order of hz_kube.h's diagram, lowest first). The
 * reconcile (hz_reconcile.c) does not include it: it is started through
 * hz_rec.h and reports back through its completion callback.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_KUBE_INT_H
#define PRISMLB_MOD_HETZNER_LB_HZ_KUBE_INT_H

#include "hz_kube.h"

/* ------------------------------------------------------------------ */
/* The work queue and its timers (hz_work.c)                            */

/* After an event or a retry was lost to memory, every Service is synced
 * again this much later. */
#define HZ_LOST_RETRY_MS 1000

/* Create the queue and the two timers; drain (arg: ks) syncs what the
 * queue holds when the sync timer fires. 0 or -ENOMEM. */
HZ_HIDDEN int hz_work_start(struct hz_kside *ks, plb_timer_cb drain);
/* Have the queue drained shortly (the sync timer, unless it is armed). */
HZ_HIDDEN void hz_work_arm(struct hz_kside *ks);
/* Sync Service key ("ns/name") shortly; out of memory, every Service a
 * little later. */
HZ_HIDDEN void hz_work_add(struct hz_kside *ks, const char *key);
/* The drain callback's next queued Service key (borrowed, valid until
 * hz_work_done for it), or NULL when none is queued (or after stop). */
HZ_HIDDEN const char *hz_work_next(struct hz_kside *ks);
/* The sync of key (from hz_work_next) ended: failed (out of memory) syncs
 * it again after its backoff, else its backoff starts over; added again
 * meanwhile, it is queued again. */
HZ_HIDDEN void hz_work_done(struct hz_kside *ks, const char *key, int failed);
/* Sync Service key delay_ms from now (of two delays the earlier wins). */
HZ_HIDDEN void hz_work_add_after(struct hz_kside *ks, const char *key, int64_t delay_ms);
/* A sync of Service key ran out of memory: sync it again after its
 * backoff (5 ms, doubling), or, when even that cannot be queued, every
 * Service at the next recheck. */
HZ_HIDDEN void hz_work_retry(struct hz_kside *ks, const char *key);
/* Arm the recheck timer for the earliest Service recheck that is due, the
 * queue's earliest delayed key, or HZ_LOST_RETRY_MS with ks->lost; keys
 * whose delay ended are queued and synced shortly. */
HZ_HIDDEN void hz_work_recheck(struct hz_kside *ks);
/* Cancel the timers and shut the queue down (stop). */
HZ_HIDDEN void hz_work_stop(struct hz_kside *ks);
/* Free the timers and the queue (destroy). */
HZ_HIDDEN void hz_work_free(struct hz_kside *ks);

/* ------------------------------------------------------------------ */
/* Kubernetes writes, Events, deletes (hz_writes.c)                     */

/* Starts one Kubernetes write, with done and karg as its completion. */
typedef plb_kube_op *(*hz_kop_start_fn)(struct hz_kside *ks, void *arg, plb_kube_done_cb done,
                                        void *karg, int *err);
/* A write of Service key ended with r, or did not happen (r NULL:
 * cancelled, or it did not start). */
typedef void (*hz_kop_end_fn)(struct hz_kside *ks, const char *key,
                              const struct plb_kube_result *r);

/* Start one tracked write (what: for the log) through start(ks, arg, ...);
 * ended (NULL: none) hears of its end with key (copied), also when it
 * does not start. 0; -ENOMEM when nothing could be tracked (ended not
 * called); -errno when it did not start (ended called). */
HZ_HIDDEN int hz_kop_run(struct hz_kside *ks, const char *what, hz_kop_start_fn start, void *arg,
                         hz_kop_end_fn ended, const char *key);
/* Cancel the Kubernetes writes in flight (gate closed): each one's ended
 * hears of it. */
HZ_HIDDEN void hz_kops_cancel(struct hz_kside *ks);
/* The warning sink of ks->states (hz_warn_fn; arg: ks): a warning Event
 * about Service key svc (borrowed), logged too. */
HZ_HIDDEN void hz_warn_event(void *arg, const char *key, const plb_obj *svc, const char *reason,
                             const char *msg);
/* Drop the robotlb/finalizer of earlier releases from Service svc (key,
 * ns/name), if it has it. */
HZ_HIDDEN void hz_kube_drop_finalizer(struct hz_kside *ks, const plb_obj *svc, const char *key,
                                      const char *ns, const char *name);
/* Delete the balancer labelled with uid (from the resync list), if any.
 * 0, or -ENOMEM when the delete could not be started. */
HZ_HIDDEN int hz_delete_labelled(struct hz_kside *ks, const char *uid, const plb_obj *svc);

/* ------------------------------------------------------------------ */
/* The status write (hz_ingress.c)                                      */

/* Write st's Service's status.loadBalancer.ingress from lb (borrowed)
 * when it differs from what the Service shows, the Service as the cache
 * has it just then still ours (else nothing is written): at most one
 * write in flight per Service, none while the last one written is what it
 * should show (the cache has not caught up yet), none of the ingress the
 * API server refused. 0, or -ENOMEM when a write it needs could not be
 * allocated or started (the caller has the Service synced again). */
HZ_HIDDEN int hz_status_update(struct hz_kside *ks, struct hz_svc_state *st,
                               const struct hz_actual *lb);
/* 1 when balancer lb (borrowed) serves st's Service: it asks for no
 * network, or lb is attached to the one it asks for (whose id is known).
 * Until then the Service's status is not written: a balancer outside the
 * network reaches none of its private targets. */
HZ_HIDDEN int hz_lb_serves(const struct hz_kside *ks, const struct hz_svc_state *st,
                           const struct hz_actual *lb);

/* ------------------------------------------------------------------ */
/* The sync (hz_sync.c) and the informers (hz_watch.c)                  */

/* The sync timer's callback (arg: ks): sync the queued Services. */
HZ_HIDDEN void hz_sync_fire(plb_timer *t, void *arg);
/* Create the three informers. 0 or -EIO. */
HZ_HIDDEN int hz_watch_start(struct hz_kside *ks);

#endif
