/*
 * hz_kube.h: the event side of mod_hetzner_lb (private): its context, what
 * the module's lifecycle calls (hz_kube.c, hz_work.c, hz_status.c) and the
 * Services as the cache has them (hz_cache.c), which the reconcile reads
 * too. Its files call each other downwards only:
 *
 *   hz_kube.c (lifecycle) -> hz_watch.c (informers) -> hz_work.c (queue,
 *   timers); hz_kube.c -> hz_sync.c (the sync, the reconciles' end) ->
 *   hz_ingress.c (status write) -> hz_writes.c (Kubernetes writes,
 *   Events, deletes), hz_work.c, hz_cache.c; hz_work.c hands the queued
 *   Services to the sync through the callback it was started with.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_KUBE_H
#define PRISMLB_MOD_HETZNER_LB_HZ_KUBE_H

#include "hz_api.h"
#include "hz_state.h"

struct hz_queue;
struct hz_index;
struct hz_gidx;
struct kop;
struct rec;

struct hz_kside {
    const struct plb_host *host; /* borrowed */
    plb_ctx *ctx;
    const struct hz_config *cfg; /* borrowed */
    struct hz_api *api;          /* borrowed: the module's client */
    struct hz_lbs *by_uid;       /* the labelled balancers: the last resync's
                                    list and those read back since (owned);
                                    NULL until the first resync */
    json_t *deleting;            /* UIDs whose balancer delete is in flight */
    plb_kube *kube;
    plb_informer *svc_inf, *node_inf, *slice_inf;
    plb_timer *sync_timer;
    plb_timer *recheck_timer; /* the earliest retry of a Service */
    json_t *nets;             /* network name -> id, looked up once */
    struct hz_certs *certs;   /* certificate name -> id (hz_cert.c; owned) */
    struct rec *netq;         /* reconciles waiting for a network lookup */
    struct rec *nameq;        /* reconciles waiting for the unlabelled list */
    int unl_listing;          /* that list is in flight */
    json_t *fresh;            /* UID -> monotonic ms its by_uid entry was
                                 read back after our writes; a resync list
                                 started earlier keeps it (owned) */
    struct hz_states states;  /* the Services we track (hz_state.h); its
                                 warning sink sends through kube_event */
    struct hz_queue *queue;   /* Service keys to sync (owned) */
    struct hz_index *index;   /* which Services an event changes (owned) */
    plb_metric *m_syncs;      /* Services synced (borrowed; may be NULL) */
    struct kop *kops;         /* writes in flight */
    plb_obj **deleted;        /* deleted Services not yet handled (owned
                                 references) */
    size_t ndeleted;
    int lost; /* an event or a retry was lost to memory: every Service is
                 synced again HZ_LOST_RETRY_MS later (hz_work.c) */
    /* shared balancers (hz_group_sync.c) */
    struct hz_lbs *by_group; /* group balancers by their group label: the
                                last group list and those read back since
                                (owned); NULL until a group is met and its
                                first list answered */
    json_t *groups;          /* group -> what runs of it (owned) */
    int group_listing;       /* the group list is in flight */
    int groups_used;         /* a group was met: list them at each resync */
    int64_t group_list_ms;   /* ... when the one in flight started */
    struct hz_gidx *gidx;    /* the Services by group and UID, built by the
                                first group reconcile of a sync round and
                                dropped at its end (owned) */
    json_t *dirty;           /* group -> a Service key: the groups to
                                reconcile at the end of the round (owned) */
};

/* A string at a, b[, c] of o (borrowed from o), or NULL. */
static inline const char *
hz_ks_str(const struct hz_kside *ks, const plb_obj *o, const char *a, const char *b, const char *c)
{
    const struct plb_host *h = ks->host;
    return h->obj->str(c ? h->obj->get(o, a, b, c, NULL) : h->obj->get(o, a, b, NULL));
}

/* Create the client and the three informers (fields host, ctx, cfg and
 * api set by the caller). 0 or -errno. */
HZ_HIDDEN int hz_kube_start(struct hz_kside *ks);
/* Sync every Service shortly (after a resync, on gate open; hz_work.c). */
HZ_HIDDEN void hz_work_all(struct hz_kside *ks);
/* A resync begins: list the shared groups' balancers once a group was
 * met (hz_group_sync.c). */
HZ_HIDDEN void hz_group_resync(struct hz_kside *ks);
/* Cancel the Kubernetes writes in flight (gate closed). */
HZ_HIDDEN void hz_kube_cancel_writes(struct hz_kside *ks);
/* Stop informers and timers (stop). */
HZ_HIDDEN void hz_kube_stop(struct hz_kside *ks);
/* Free everything (destroy). */
HZ_HIDDEN void hz_kube_free(struct hz_kside *ks);
/* 1 when svc is a Service of ours: type LoadBalancer, loadBalancerClass
 * served (hz_class_served under ks->cfg->load_balancer_class). */
HZ_HIDDEN int hz_kube_is_ours(const struct hz_kside *ks, const plb_obj *svc);
/* Service key ("ns/name") as the cache has it now (borrowed), when it is
 * still the one of UID uid and ours, with no deletion under way; else
 * NULL. */
HZ_HIDDEN const plb_obj *hz_svc_current(const struct hz_kside *ks, const char *key,
                                        const char *uid);

/* The instance for `prismlb status` (hz_status.c): kind "reconciler", the
 * gate, each Service's balancer, targets, last error and next check
 * (next_resync_ms: monotonic time of the next resync, 0 unknown). New, or
 * NULL when out of memory. */
HZ_HIDDEN plb_obj *hz_kube_status(const struct hz_kside *ks, int gate_open, int64_t next_resync_ms);

#endif
