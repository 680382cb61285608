/*
 * hz_sync.c: the per-Service sync of mod_hetzner_lb. The work queue holds
 * the Services an event can change (hz_watch.c says which); shortly after,
 * each queued Service is synced:
 *
 *   - which Services: type LoadBalancer with loadBalancerClass unset or
 *     "robotlb" (or the load_balancer_class setting's class);
 *   - robotlb/ annotations validated (the node selector by the daemon's
 *     lb_selector_check); a bad value is a warning Event and the last good
 *     set stays;
 *   - target nodes from the daemon's lb_select_targets, capped at the
 *     balancer type's max targets (a warning names the limit);
 *   - what to do, decided purely (hz_sync_decide, hz_decide.c): nothing
 *     when the labelled balancer of the resync list is as asked, wait for
 *     a recheck or a running reconcile, or a reconcile (hz_reconcile.c),
 *     at most one per Service, handed the plan the decision built; its
 *     completion callback, rec_done, decides when the Service is looked
 *     at again;
 *   - the status (hz_ingress.c) follows the labelled balancer once that
 *     serves the Service: attached to its network, with its services and
 *     the targets Hetzner accepted (a refused target does not withhold
 *     the Service's IP);
 *   - a Service that stops being ours gets its labelled balancer deleted;
 *   - the robotlb/finalizer of earlier releases is removed (hz_writes.c).
 *
 * The Service's sync is a machine (enum hz_svc_phase, hz_state.h).
 *
 * Every write happens only while the gate is open.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_group.h"
#include "hz_rec.h"
#include "hz_refusal.h"

/* The completion callback of a reconcile (hz_rec_done_fn): remember the
 * balancer it worked on, write the status once that serves the Service,
 * decide when to look again, and sync again what changed meanwhile. */
static void
rec_done(struct hz_kside *ks, const struct hz_rec_result *res)
{
    struct hz_svc_state *st = hz_state_get(&ks->states, res->key, 0);
    int cancelled = res->end == HZ_REC_CANCELLED, again = 0;

    if (st && st->uid && strcmp(st->uid, res->uid) == 0) {
        /* RUNNING or AGAIN: this reconcile was its one */
        again = st->phase == HZ_SVC_AGAIN && !cancelled;
        st->phase = HZ_SVC_IDLE;
        if (res->end == HZ_REC_RECHECK || res->end == HZ_REC_WAIT) {
            int64_t wait =
                res->end == HZ_REC_WAIT ? ks->cfg->resync_interval_ms : ks->cfg->refused_recheck_ms;
            st->fail_fp = res->fp;
            st->retry_at = ks->host->loop->now_ms(ks->ctx) + wait;
            PLB_INFO(ks->host, ks->ctx, PLB_KV("service", res->key), "checked again in %lld ms",
                     (long long)wait);
        } else if (res->end == HZ_REC_OK) {
            st->fail_fp = 0;
            st->retry_at = 0;
            hz_refusals_clear(st);
        } /* cancelled: the next leader (or this one, when the gate opens) decides */
        if (res->by_name)
            st->by_name = 1;
        if (res->attached && !cancelled)
            again = 1; /* the next pass leaves the network it asked for before */
    }
    if (!cancelled && res->lb && res->lb->a.uid && strcmp(res->lb->a.uid, res->uid) == 0) {
        int retry = 0;
        if (!(ks->by_uid || (ks->by_uid = hz_lbs_new())) || hz_lbs_put(ks->by_uid, res->lb) < 0 ||
            !(ks->fresh || (ks->fresh = json_object())) ||
            json_object_set_new(ks->fresh, res->uid,
                                json_integer(ks->host->loop->now_ms(ks->ctx))) < 0)
            retry = 1; /* the balancer is not remembered: looked up again */
        if (res->svc) {
            /* with the targets Hetzner accepted, also when it refused one */
            if (hz_status_follow(ks, res->st, &res->lb->a) < 0)
                retry = 1;
        } else if (ks->svc_inf && hz_delete_labelled(ks, res->uid, NULL) < 0) {
            /* deleted or no longer ours while its balancer was created:
             * the deletion found nothing to delete then */
            ks->lost = 1;
        }
        if (retry)
            hz_work_retry(ks, res->key);
    }
    if (again)
        hz_work_add(ks, res->key);
    hz_work_recheck(ks);
}

/* Reconcile st's Service svc when what it asks for (d, stolen) differs
 * from its labelled balancer, or it has none: hz_sync_decide says whether,
 * and the plan it built is the reconcile's. The steady state costs no
 * request: the resync list is compared. 0 (started, nothing to do), or
 * -ENOMEM (-errno) when it could not be decided or started: the caller
 * syncs the Service again. */
static int
sync_reconcile(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
               struct hz_desired *d)
{
    struct hz_lb *lb = hz_lbs_get(ks->by_uid, st->uid);
    json_t *netid = d->network ? json_object_get(ks->nets, d->network) : NULL;
    /* a name not known: the reconcile finds it */
    (void)hz_cert_resolve(ks->certs, d->https, d->nhttps);
    struct hz_sync_in in = {.d = d,
                            .fp = hz_desired_fp(d),
                            .lb = lb ? &lb->a : NULL,
                            .net_known = !d->network || netid,
                            .net_id = netid ? json_integer_value(netid) : 0,
                            .fail_fp = st->fail_fp,
                            .retry_at = st->retry_at,
                            .now = ks->host->loop->now_ms(ks->ctx),
                            .running = st->phase == HZ_SVC_RUNNING || st->phase == HZ_SVC_AGAIN};
    enum hz_sync_verdict v;
    struct hz_plan plan;
    int rc;

    if (lb && !in.running) {
        hz_location_check(ks, st, svc, d, &lb->a);
        hz_targets_check(ks, st, svc, d->ntargets, &lb->a);
    }
    if ((rc = hz_sync_decide(&in, &v, &plan)) < 0) {
        hz_desired_clear(d);
        return rc;
    }
    switch (v) {
    case HZ_SYNC_LATER:
        st->phase = HZ_SVC_AGAIN;
        hz_desired_clear(d);
        return 0;
    case HZ_SYNC_SERVED:
        st->fail_fp = 0;
        st->retry_at = 0;
        hz_desired_clear(d);
        return hz_status_follow(ks, st, &lb->a);
    case HZ_SYNC_HELD:
        /* the balancer as the last reconcile left it: what Hetzner took */
        hz_desired_clear(d);
        return lb ? hz_status_follow(ks, st, &lb->a) : 0;
    case HZ_SYNC_RECONCILE:
        break;
    }
    struct hz_rec_req req = {.key = st->key,
                             .uid = st->uid,
                             .d = d,
                             .fp = in.fp,
                             .annotated = st->good.balancer != NULL,
                             .by_name = st->by_name,
                             .labelled = lb,
                             .plan = &plan,
                             .plan_net = in.net_id,
                             .done = rec_done};
    st->phase = HZ_SVC_RUNNING;
    if ((rc = hz_rec_start(ks, &req)) < 0)
        st->phase = HZ_SVC_IDLE;
    return rc;
}

/* hz_annot_parse's reader: the annotation key of the Service (arg: {ks,
 * svc}; borrowed), or NULL. */
static const char *
annot_get(void *arg, const char *key)
{
    struct hz_kside *ks = ((void **)arg)[0];
    const plb_obj *svc = ((void **)arg)[1];
    return ks->host->obj->str(ks->host->obj->get(svc, "metadata", "annotations", key, NULL));
}

/* The shared group side of st's Service svc's sync, whose annotations
 * parsed as rc (0 or -EINVAL; ga: annot_get's argument): a member of a
 * valid group is synced with its group (hz_group_sync.c), and its own
 * labelled balancer of before it joined goes; a bad group name is an
 * InvalidAnnotation and changes nothing. 1 (-EINVAL as 2): not a member,
 * the Service's own sync goes on; 0 or -ENOMEM: done. */
static int
sync_group(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc, int rc, void *ga)
{
    const char *group = hz_group_of(ks, svc);
    char err[512];
    int grc;
    if (!group) {
        grc = hz_group_service(ks, svc, NULL);
        return grc < 0 ? grc : rc == -EINVAL ? 2 : 1;
    }
    if (hz_group_check(group, annot_get(ga, HZ_ANN_BALANCER) != NULL,
                       annot_get(ga, HZ_HCCM_NAME) != NULL, err, sizeof(err)) < 0) {
        (void)hz_warn_once(st, svc, "InvalidAnnotation", err);
        return 0;
    }
    if (!hz_state_good(st))
        return 0;
    if (rc == 0)
        hz_warn_clear(st, "InvalidAnnotation");
    if ((grc = hz_group_service(ks, svc, group)) < 0)
        return grc;
    return ks->by_uid ? hz_delete_labelled(ks, st->uid, svc) : 0;
}

/* Sync Service svc. 0, or -ENOMEM (-errno) when it must be synced again:
 * something it needed could not be allocated, decided or started. */
static int
sync_one(struct hz_kside *ks, const plb_obj *svc)
{
    const struct plb_host *h = ks->host;
    const char *ns = hz_ks_str(ks, svc, "metadata", "namespace", NULL);
    const char *name = hz_ks_str(ks, svc, "metadata", "name", NULL);
    const char *uid = hz_ks_str(ks, svc, "metadata", "uid", NULL);
    char key[512], err[1024];
    struct hz_svc_state *st;
    struct hz_annot a;
    void *ga[2] = {ks, (void *)svc};

    if (!ns || !name || !uid)
        return 0;
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    hz_kube_drop_finalizer(ks, svc, key, ns, name);
    if (!hz_kube_is_ours(ks, svc) || h->obj->get(svc, "metadata", "deletionTimestamp", NULL)) {
        if (hz_state_get(&ks->states, key, 0)) {
            PLB_INFO(ks->host, ks->ctx, PLB_KV("service", key),
                     "no longer a LoadBalancer of ours: dropped");
            hz_state_drop(&ks->states, key);
        }
        /* a member of a shared group leaves it: its services and label go */
        int grc = hz_group_service(ks, svc, NULL);
        int drc = hz_delete_labelled(ks, uid, svc);
        return grc < 0 ? grc : drc;
    }
    if (!(st = hz_state_get(&ks->states, key, 1)))
        return -ENOMEM;
    if (!st->uid || strcmp(st->uid, uid) != 0) {
        /* new, or recreated under the same name: another Service to
         * robotlb (a reconcile of the one before ends unheard) */
        hz_annot_clear(&st->good);
        st->phase = HZ_SVC_NEW;
        hz_free(st->uid);
        if (!(st->uid = hz_strdup(uid)))
            return -ENOMEM;
    }
    int rc = hz_annot_parse(annot_get, ga, &a, err, sizeof(err));
    if (rc == 0 && a.node_selector) {
        char serr[512];
        if (h->lb->selector_check(a.node_selector, serr, sizeof(serr)) < 0) {
            snprintf(err, sizeof(err), "%s: \"%s\": %s", a.selector_key, a.node_selector, serr);
            hz_annot_clear(&a);
            rc = -EINVAL;
        }
    }
    if (rc == 0) {
        hz_annot_clear(&st->good);
        st->good = a;
        if (st->phase == HZ_SVC_NEW)
            st->phase = HZ_SVC_IDLE;
    } else if (rc == -EINVAL) {
        /* in force until a sync finds the whole set valid: the reconcile
         * then (whose checks of the set come later), else here */
        (void)hz_warn_once(st, svc, "InvalidAnnotation", err);
    } else {
        return rc; /* not read: the last good set is not what the Service says */
    }
    if ((rc = sync_group(ks, st, svc, rc, ga)) <= 0)
        return rc;
    rc = rc == 2 ? -EINVAL : 0;
    /* The status follows the labelled balancer once it serves the
     * Service: written by the reconcile when it finds nothing to change,
     * or after its writes; here only for a Service no reconcile looks at
     * (no good annotations yet). */
    const struct hz_lb *lb = hz_lbs_get(ks->by_uid, uid);
    if (lb && !hz_state_good(st))
        return hz_status_follow(ks, st, &lb->a);
    /* Until the first resync list said which balancers are labelled, a
     * Service cannot tell its own from a name lookup's. */
    if (hz_state_good(st) && ks->by_uid) {
        struct hz_desired d;
        int built = hz_sync_build(ks, st, svc, rc == -EINVAL, &d);
        return built > 0 ? sync_reconcile(ks, st, svc, &d) : built;
    }
    if (rc == 0)
        hz_warn_clear(st, "InvalidAnnotation");
    return 0;
}

/* Sync the queued Services. */
void
hz_sync_fire(plb_timer *t, void *arg)
{
    struct hz_kside *ks = arg;
    const char *k;
    (void)t;
    /* Every cache complete: a node or slice missing from a half-listed
     * cache would remove its target. */
    if (!ks->host->links->gate_is_open(ks->ctx) || !ks->svc_inf || !ks->node_inf ||
        !ks->slice_inf || !ks->host->kube->informer_synced(ks->svc_inf) ||
        !ks->host->kube->informer_synced(ks->node_inf) ||
        !ks->host->kube->informer_synced(ks->slice_inf))
        return;
    /* Services the cache no longer has, but that we saw: deleted (once the
     * first resync told which balancers are labelled); one whose delete
     * could not be started stays for the next sync. */
    size_t kept = 0;
    for (size_t i = 0; ks->by_uid && i < ks->ndeleted; i++) {
        const char *uid = hz_ks_str(ks, ks->deleted[i], "metadata", "uid", NULL);
        if (uid && hz_delete_labelled(ks, uid, ks->deleted[i]) == -ENOMEM) {
            ks->deleted[kept++] = ks->deleted[i];
            ks->lost = 1;
            continue;
        }
        ks->host->obj->unref(ks->deleted[i]);
    }
    if (ks->by_uid)
        ks->ndeleted = kept;
    size_t n = 0;
    while ((k = hz_work_next(ks))) {
        char key[512];
        const char *slash = strchr(k, '/');
        int rc = 0;
        snprintf(key, sizeof(key), "%s", k);
        if (slash && (size_t)(slash - k) < sizeof(key)) {
            key[slash - k] = '\0';
            const plb_obj *svc =
                ks->host->kube->informer_get(ks->svc_inf, key, key + (slash - k) + 1);
            if (svc) {
                rc = sync_one(ks, svc);
                n++;
            }
        }
        hz_work_done(ks, k, rc < 0);
    }
    hz_group_round_end(ks);
    if (n && ks->m_syncs) {
        const char *iv[] = {ks->host->links->instance_name(ks->ctx), NULL};
        ks->host->metrics->add(ks->m_syncs, iv, (double)n);
    }
    hz_work_recheck(ks);
}
