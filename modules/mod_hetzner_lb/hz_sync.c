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
 *   - the desired balancer compared with the labelled one of the resync
 *     list: when they are the same, its status is written; when they
 *     differ, a reconcile starts (hz_reconcile.c), at most one per Service,
 *     and its completion callback, rec_done, writes the status and decides
 *     when the Service is looked at again;
 *   - a Service that stops being ours gets its labelled balancer deleted;
 *   - the robotlb/finalizer of earlier releases is removed (hz_kube.c).
 *
 * Every write happens only while the gate is open.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_kube_int.h"
#include "hz_queue.h"
#include "hz_rec.h"
#include "hz_refusal.h"

/* Fold string s (NULL as empty) into the FNV-1a hash *h. */
static void
fp_s(uint64_t *h, const char *s)
{
    for (; s && *s; s++) {
        *h ^= (unsigned char)*s;
        *h *= 0x100000001b3ULL;
    }
    *h ^= 0xff;
    *h *= 0x100000001b3ULL;
}

/* Fold number v into the hash *h. */
static void
fp_i(uint64_t *h, long long v)
{
    char b[24];
    snprintf(b, sizeof(b), "%lld", v);
    fp_s(h, b);
}

/* Fingerprint of everything the Service asks for. */
static uint64_t
desired_fp(const struct hz_desired *d)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    fp_s(&h, d->name);
    fp_s(&h, d->type);
    fp_s(&h, d->location);
    fp_i(&h, d->algorithm);
    fp_s(&h, d->network);
    fp_s(&h, d->private_ip);
    fp_i(&h, d->interval);
    fp_i(&h, d->timeout);
    fp_i(&h, d->retries);
    fp_i(&h, d->proxy);
    fp_i(&h, d->public_iface);
    for (size_t i = 0; i < d->nservices; i++) {
        fp_i(&h, d->services[i].listen);
        fp_i(&h, d->services[i].dest);
    }
    for (size_t i = 0; i < d->ntargets; i++)
        fp_s(&h, d->targets[i]);
    return h;
}

/* Read svc's ports (new array in *out). 0 or -ENOMEM. */
static int
read_ports(const struct hz_kside *ks, const plb_obj *svc, struct hz_port **out, size_t *n)
{
    const struct plb_host *h = ks->host;
    const plb_obj *ports = h->obj->get(svc, "spec", "ports", NULL);
    size_t np = h->obj->len(ports);
    *out = NULL;
    *n = 0;
    if (np == 0)
        return 0;
    if (!(*out = hz_calloc(np * sizeof(**out))))
        return -ENOMEM;
    for (size_t i = 0; i < np; i++) {
        const plb_obj *p = h->obj->at(ports, i);
        (*out)[i].protocol = h->obj->str(h->obj->get(p, "protocol", NULL));
        (*out)[i].port = (int)h->obj->int64(h->obj->get(p, "port", NULL), 0);
        (*out)[i].node_port = (int)h->obj->int64(h->obj->get(p, "nodePort", NULL), 0);
    }
    *n = np;
    return 0;
}

/* The completion callback of a reconcile (hz_rec_done_fn): remember the
 * balancer it worked on, write the status once that serves the Service,
 * decide when to look again, and sync again what changed meanwhile. */
static void
rec_done(struct hz_kside *ks, const struct hz_rec_result *res)
{
    struct hz_svc_state *st = hz_state_get(&ks->states, res->key, 0);
    int cancelled = res->end == HZ_REC_CANCELLED;

    if (st && st->uid && strcmp(st->uid, res->uid) == 0) {
        st->busy = 0;
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
        if (res->attached)
            st->dirty = 1; /* the next pass leaves the network it asked for before */
    }
    if (!cancelled && res->lb && res->lb->a.uid && strcmp(res->lb->a.uid, res->uid) == 0) {
        int again = 0;
        if (!(ks->by_uid || (ks->by_uid = hz_lbs_new())) || hz_lbs_put(ks->by_uid, res->lb) < 0 ||
            !(ks->fresh || (ks->fresh = json_object())) ||
            json_object_set_new(ks->fresh, res->uid,
                                json_integer(ks->host->loop->now_ms(ks->ctx))) < 0)
            again = 1; /* the balancer is not remembered: looked up again */
        if (res->svc) {
            /* a balancer outside its network reaches nothing: the status
             * stays as it is */
            if (hz_lb_serves(ks, res->st, &res->lb->a) &&
                hz_status_update(ks, res->st, res->svc, &res->lb->a) < 0)
                again = 1;
        } else if (ks->svc_inf && hz_delete_labelled(ks, res->uid) < 0) {
            /* deleted or no longer ours while its balancer was created:
             * the deletion found nothing to delete then */
            ks->lost = 1;
        }
        if (again)
            hz_kube_retry(ks, res->key);
    }
    if (st && st->dirty && !cancelled) {
        st->dirty = 0;
        hz_kube_sync_key(ks, st->key);
    }
    hz_recheck_arm(ks);
}

/* Select the Service's target nodes, build what it asks for, and reconcile
 * when that differs from its labelled balancer (or it has none). The steady
 * state costs no request: the resync list is compared. annot_bad: this
 * sync found st's annotations invalid (warned of; st->good is the last good
 * set), else an InvalidAnnotation in force ends when the set checks out.
 * 0 (started, nothing to do, or a problem the Service was warned of), or
 * -ENOMEM (-errno) when it could not be decided or started: the caller
 * syncs the Service again. */
static int
sync_reconcile(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc, int annot_bad)
{
    const struct plb_host *h = ks->host;
    struct plb_lb_targets t = {.size = sizeof(t)};
    struct hz_port *ports = NULL;
    struct hz_desired d;
    struct hz_svc hs;
    const char **ips = NULL;
    size_t nports = 0, nips = 0, max;
    const char *type = st->good.type ? st->good.type : ks->cfg->default_balancer_type;
    char err[1024];
    uint64_t fp;
    int rc;

    max = hz_type_max_targets(type);
    rc = h->lb->select_targets(
        ks->ctx, svc,
        ks->cfg->dynamic_node_selector ? PLB_LB_POLICY_TRAFFIC : PLB_LB_POLICY_SELECTOR,
        st->good.node_selector, ks->node_inf, ks->slice_inf, max, &t, err, sizeof(err));
    if (rc == -EINVAL) {
        /* one InvalidAnnotation in force: the sync's own, if it found one */
        if (!annot_bad)
            (void)hz_warn_once(st, svc, "InvalidAnnotation", err);
        return 0;
    }
    if (rc < 0) {
        PLB_ERR(ks->host, ks->ctx, PLB_KV("service", st->key, "error", strerror(-rc)),
                "target selection failed");
        return rc;
    }
    if (t.dropped) {
        snprintf(err, sizeof(err),
                 "%zu nodes are selected but the balancer type %s holds %zu targets: %zu "
                 "node(s) are left out; pick a bigger type through ROBOTLB_DEFAULT_LB_TYPE or "
                 "the robotlb/balancer-type annotation to use the whole cluster",
                 t.n + t.dropped, type, max, t.dropped);
        (void)hz_warn_once(st, svc, "TooManyTargets", err);
    } else {
        hz_warn_clear(st, "TooManyTargets");
    }
    if (t.n && !(ips = hz_calloc(t.n * sizeof(*ips)))) {
        h->lb->targets_clear(&t);
        return -ENOMEM;
    }
    for (size_t i = 0; i < t.n; i++)
        if (PLB_LB_TARGET(&t, i)->ip)
            ips[nips++] = PLB_LB_TARGET(&t, i)->ip;
    if (read_ports(ks, svc, &ports, &nports) < 0) {
        hz_free(ips);
        h->lb->targets_clear(&t);
        return -ENOMEM;
    }
    hs = (struct hz_svc){.uid = st->uid,
                         .name = hz_ks_str(ks, svc, "metadata", "name", NULL),
                         .ns = hz_ks_str(ks, svc, "metadata", "namespace", NULL),
                         .ports = ports,
                         .nports = nports};
    rc = hz_desired_build(ks->cfg, &st->good, &hs, ips, nips, &d, err, sizeof(err));
    hz_free(ips);
    hz_free(ports);
    h->lb->targets_clear(&t);
    if (rc == -EINVAL) {
        if (!annot_bad)
            (void)hz_warn_once(st, svc, "InvalidAnnotation", err);
        return 0;
    }
    if (rc < 0 && rc != -ENOENT)
        return rc;
    if (!annot_bad) /* the whole set checked out */
        hz_warn_clear(st, "InvalidAnnotation");
    if (rc == -ENOENT) {
        /* no balancer is created; an existing one and the status stay */
        (void)hz_warn_once(st, svc, "NoExposablePort", err);
        return 0;
    }
    hz_warn_clear(st, "NoExposablePort");
    fp = desired_fp(&d);
    if (st->busy) {
        st->dirty = 1;
        hz_desired_clear(&d);
        return 0;
    }
    struct hz_lb *lb = hz_lbs_get(ks->by_uid, st->uid);
    json_t *netid = d.network ? json_object_get(ks->nets, d.network) : NULL;
    if (lb) {
        hz_location_check(ks, st, svc, &d, &lb->a);
        hz_targets_check(ks, st, svc, d.ntargets, &lb->a);
    }
    if (lb && (!d.network || netid)) {
        /* Compare with the list: nothing to send when nothing differs, and
         * then the balancer serves the Service: its status follows it. */
        struct hz_plan p = {0};
        rc = hz_plan_build(&d, &lb->a, netid ? json_integer_value(netid) : 0, &p);
        if (rc == 0 && p.n == 0) {
            st->fail_fp = 0;
            st->retry_at = 0;
            hz_desired_clear(&d);
            return hz_lb_serves(ks, st, &lb->a) ? hz_status_update(ks, st, svc, &lb->a) : 0;
        }
        hz_plan_clear(&p);
    }
    /* What failed is not sent again before its recheck. */
    if (st->fail_fp == fp && h->loop->now_ms(ks->ctx) < st->retry_at) {
        hz_desired_clear(&d);
        return 0;
    }
    struct hz_rec_req req = {.key = st->key,
                             .uid = st->uid,
                             .d = &d,
                             .fp = fp,
                             .annotated = st->good.balancer != NULL,
                             .by_name = st->by_name,
                             .labelled = lb,
                             .done = rec_done};
    st->busy = 1;
    if ((rc = hz_rec_start(ks, &req)) < 0)
        st->busy = 0;
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
        hz_state_drop(&ks->states, key);
        return hz_delete_labelled(ks, uid);
    }
    if (!(st = hz_state_get(&ks->states, key, 1)))
        return -ENOMEM;
    if (!st->uid || strcmp(st->uid, uid) != 0) {
        /* new, or recreated under the same name: another Service to robotlb */
        hz_annot_clear(&st->good);
        st->have_good = 0;
        hz_free(st->uid);
        if (!(st->uid = hz_strdup(uid)))
            return -ENOMEM;
    }
    int rc = hz_annot_parse(annot_get, ga, &a, err, sizeof(err));
    if (rc == 0 && a.node_selector) {
        char serr[512];
        if (h->lb->selector_check(a.node_selector, serr, sizeof(serr)) < 0) {
            snprintf(err, sizeof(err), "%s: \"%s\": %s", HZ_ANN_NODE_SELECTOR, a.node_selector,
                     serr);
            hz_annot_clear(&a);
            rc = -EINVAL;
        }
    }
    if (rc == 0) {
        hz_annot_clear(&st->good);
        st->good = a;
        st->have_good = 1;
    } else if (rc == -EINVAL) {
        /* in force until a sync finds the whole set valid: the reconcile
         * then (whose checks of the set come later), else here */
        (void)hz_warn_once(st, svc, "InvalidAnnotation", err);
    } else {
        return rc; /* not read: the last good set is not what the Service says */
    }
    /* The status follows the labelled balancer once it serves the
     * Service: written by the reconcile when it finds nothing to change,
     * or after its writes; here only for a Service no reconcile looks at
     * (no good annotations yet). */
    const struct hz_lb *lb = hz_lbs_get(ks->by_uid, uid);
    if (lb && !st->have_good && hz_lb_serves(ks, st, &lb->a))
        return hz_status_update(ks, st, svc, &lb->a);
    /* Until the first resync list said which balancers are labelled, a
     * Service cannot tell its own from a name lookup's. */
    if (st->have_good && ks->by_uid)
        return sync_reconcile(ks, st, svc, rc == -EINVAL);
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
        if (hz_delete_labelled(ks, ks->deleted[i]) == -ENOMEM) {
            ks->deleted[kept++] = ks->deleted[i];
            ks->lost = 1;
            continue;
        }
        hz_free(ks->deleted[i]);
    }
    if (ks->by_uid)
        ks->ndeleted = kept;
    size_t n = 0;
    while ((k = hz_queue_get(ks->queue))) {
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
        if (rc < 0)
            hz_kube_retry(ks, k);
        else
            hz_queue_forget(ks->queue, k);
        hz_queue_done(ks->queue, k);
    }
    if (n && ks->m_syncs) {
        const char *iv[] = {ks->host->links->instance_name(ks->ctx), NULL};
        ks->host->metrics->add(ks->m_syncs, iv, (double)n);
    }
    hz_recheck_arm(ks);
}

/* Queue the Services whose recheck is due. */
void
hz_recheck_fire(plb_timer *t, void *arg)
{
    struct hz_kside *ks = arg;
    int64_t now = ks->host->loop->now_ms(ks->ctx);
    (void)t;
    for (const struct hz_svc_state *s = ks->states.head; s; s = s->next)
        if (s->fail_fp && s->retry_at <= now)
            hz_kube_sync_key(ks, s->key);
    if (ks->lost) {
        ks->lost = 0;
        PLB_INFO(ks->host, ks->ctx, NULL,
                 "syncing every Service again after an allocation failure");
        hz_kube_sync_soon(ks);
    }
    hz_recheck_arm(ks);
}

/* Arm the recheck timer for the earliest retry still ahead. */
void
hz_recheck_arm(struct hz_kside *ks)
{
    int64_t now = ks->host->loop->now_ms(ks->ctx), first = 0, next;
    if (!ks->svc_inf)
        return; /* stopped */
    first = hz_states_next_retry(&ks->states, now);
    /* the work queue's delayed keys (a sync that ran out of memory) */
    if (ks->queue && (next = hz_queue_tick(ks->queue, now)) >= 0 && (!first || now + next < first))
        first = now + next;
    if (ks->queue && hz_queue_len(ks->queue))
        hz_kube_sync_arm(ks);
    if (ks->lost && (!first || now + HZ_LOST_RETRY_MS < first))
        first = now + HZ_LOST_RETRY_MS;
    if (first && ks->recheck_timer)
        ks->host->loop->timer_arm(ks->recheck_timer, first > now ? first - now : 1, 0, 0);
}
