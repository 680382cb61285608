/*
 * hz_kube.c: the Kubernetes side of mod_hetzner_lb — the client, the
 * Kubernetes writes (status, warning Events, the finalizer of earlier
 * releases; every one only while the gate is open, cancelled when it
 * closes), the Hetzner deletes of balancers whose Service is gone, and the
 * lifecycle of the informers and timers. The informers and what their
 * events queue are in hz_watch.c, the per-Service sync in hz_sync.c.
 *
 *   - status: status.loadBalancer.ingress with the balancer's IPv4 (and IPv6
 *     with ipv6_ingress) and the ipMode of robotlb/ip-mode or default_ip_mode,
 *     through lb_status_write;
 *   - a Service that stops being one (type change, other class, deletion)
 *     gets its labelled balancer deleted — never a balancer by its name;
 *   - the robotlb/finalizer of earlier releases is removed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_dlist.h"
#include "hz_index.h"
#include "hz_kube_int.h"
#include "hz_queue.h"

#define FINALIZER "robotlb/finalizer"

/* A Kubernetes write in flight (cancelled when the gate closes). */
struct kop {
    struct hz_kside *ks;
    plb_kube_op *op;
    char *status_key; /* a status write: its Service's key (owned) */
    struct kop *prev, *next;
};

/* A Hetzner delete in flight. */
struct del {
    struct hz_kside *ks;
    char *uid;
    int64_t id;
};

/* ------------------------------------------------------------------ */
/* Kubernetes writes                                                   */

/* A status write of k ended (ok = 1 when written) or was cancelled. */
static void
status_ended(struct kop *k, int ok)
{
    struct hz_svc_state *st = hz_state_get(&k->ks->states, k->status_key, 0);
    if (!st)
        return;
    st->status_busy = 0;
    if (!ok) {
        /* Written again at a sync refused_recheck_interval from now (none
         * may come sooner: a write that keeps failing is not retried faster
         * than a refusal), or at the sync status_again asks for. */
        json_decref(st->status_sent);
        st->status_sent = NULL;
        struct hz_kside *ks = k->ks;
        if (ks->queue && !st->status_again) {
            int rc = hz_queue_add_after(ks->queue, st->key, ks->cfg->refused_recheck_ms,
                                        ks->host->loop->now_ms(ks->ctx));
            if (rc == -ENOMEM)
                ks->lost = 1; /* every Service is synced again shortly */
            hz_recheck_arm(ks);
        }
    }
    if (st->status_again) {
        st->status_again = 0;
        hz_kube_sync_key(k->ks, st->key);
    }
}

static void
kop_free(struct kop *k)
{
    hz_free(k->status_key);
    hz_free(k);
}

static void
kop_done(plb_kube_op *op, const struct plb_kube_result *r, void *arg)
{
    struct kop *k = arg;
    int ok = r->status >= 200 && r->status < 300;
    (void)op;
    if (!ok)
        PLB_WARN(k->ks->host, k->ks->ctx, PLB_KV("error", r->message ? r->message : ""),
                 "kubernetes write failed: status %d", r->status);
    HZ_DLIST_REMOVE(k->ks->kops, k, prev, next);
    if (k->status_key)
        status_ended(k, ok);
    kop_free(k);
}

/* Sends one Kubernetes write with kop_done and k as its done and arg. */
typedef plb_kube_op *(*kop_start_fn)(struct hz_kside *ks, void *arg, struct kop *k, int *err);

/* Start one tracked write (what: for the log) through start(ks, arg, ...);
 * status_key (NULL: none) makes it the status write of that Service, which
 * status_ended hears of when it ends, also when it does not start. 0;
 * -ENOMEM when nothing could be tracked (status_ended not called); -errno
 * when it did not start (status_ended called). */
static int
kop_run(struct hz_kside *ks, const char *status_key, const char *what, kop_start_fn start,
        void *arg)
{
    struct kop *k = hz_calloc(sizeof(*k));
    plb_kube_op *op;
    int err = 0;
    if (!k || (status_key && !(k->status_key = hz_strdup(status_key)))) {
        hz_free(k);
        return -ENOMEM;
    }
    k->ks = ks;
    if (!(op = start(ks, arg, k, &err))) {
        PLB_ERR(ks->host, ks->ctx, PLB_KV("what", what, "error", strerror(-err)),
                "kubernetes write: cannot start");
        if (k->status_key)
            status_ended(k, 0);
        kop_free(k);
        return err < 0 ? err : -EIO;
    }
    k->op = op;
    HZ_DLIST_PUSH(ks->kops, k, prev, next);
    return 0;
}

static plb_kube_op *
start_event(struct hz_kside *ks, void *arg, struct kop *k, int *err)
{
    return ks->host->kube->event(ks->kube, arg, kop_done, k, err);
}

/* The warning sink of ks->states (hz_warn_fn): a warning Event about
 * Service key (ns/name) svc, logged too; arg is the kside. */
static void
warn_event(void *arg, const char *key, const plb_obj *svc, const char *reason, const char *msg)
{
    struct hz_kside *ks = arg;
    struct plb_kube_event ev = {.size = sizeof(ev),
                                .involved = svc,
                                .kind = "Service",
                                .api_version = "v1",
                                .type = "Warning",
                                .reason = reason,
                                .message = msg};
    PLB_WARN(ks->host, ks->ctx, PLB_KV("service", key, "reason", reason), "%s", msg);
    (void)kop_run(ks, NULL, "event", start_event, &ev);
}

/* The mutate callback of the finalizer removal; arg is its struct kop
 * (kube_modify hands the same arg to mutate and done). */
static int
drop_finalizer(plb_obj *obj, void *arg)
{
    struct hz_kside *ks = ((struct kop *)arg)->ks;
    const struct plb_host *h = ks->host;
    const plb_obj *fins = h->obj->get(obj, "metadata", "finalizers", NULL);
    size_t n = h->obj->len(fins);
    plb_obj *keep = h->obj->new_array();
    int found = 0;
    if (!keep)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *f = h->obj->str(h->obj->at(fins, i));
        if (!f)
            continue;
        if (strcmp(f, FINALIZER) == 0) {
            found = 1;
            continue;
        }
        if (h->obj->append(keep, h->obj->new_str(f)) < 0) {
            h->obj->unref(keep);
            return -1;
        }
    }
    if (!found) {
        h->obj->unref(keep);
        return 1;
    }
    return h->obj->set(obj, keep, "metadata", "finalizers", NULL) < 0 ? -1 : 0;
}

static plb_kube_op *
start_finalizer_removal(struct hz_kside *ks, void *arg, struct kop *k, int *err)
{
    return ks->host->kube->modify(ks->kube, arg, drop_finalizer, 0, kop_done, k, err);
}

/* Drop robotlb/finalizer from Service key, ns/name. */
static void
remove_finalizer(struct hz_kside *ks, const char *key, const char *ns, const char *name)
{
    struct plb_kube_ref ref = {.size = sizeof(struct plb_kube_ref),
                               .api_version = "v1",
                               .resource = "services",
                               .ns = ns,
                               .name = name};
    PLB_INFO(ks->host, ks->ctx, PLB_KV("service", key, "finalizer", FINALIZER),
             "removing the finalizer of earlier releases");
    (void)kop_run(ks, NULL, "finalizer removal", start_finalizer_removal, &ref);
}

/* 1 when svc carries the robotlb/finalizer of earlier releases. */
static int
has_finalizer(const struct hz_kside *ks, const plb_obj *svc)
{
    const plb_obj *f = ks->host->obj->get(svc, "metadata", "finalizers", NULL);
    for (size_t i = 0; i < ks->host->obj->len(f); i++) {
        const char *s = ks->host->obj->str(ks->host->obj->at(f, i));
        if (s && strcmp(s, FINALIZER) == 0)
            return 1;
    }
    return 0;
}

void
hz_kube_drop_finalizer(struct hz_kside *ks, const plb_obj *svc, const char *key, const char *ns,
                       const char *name)
{
    if (has_finalizer(ks, svc))
        remove_finalizer(ks, key, ns, name);
}

/* ------------------------------------------------------------------ */
/* Hetzner deletes                                                     */

static void
del_done(void *arg, const struct hz_result *r)
{
    struct del *d = arg;
    struct hz_kside *ks = d->ks;
    if (r->err == -ECANCELED) {
        /* gate closed: the next leader decides again */
    } else if (r->dry_run || (r->status >= 200 && r->status < 300) || r->status == 404) {
        char id[24];
        snprintf(id, sizeof(id), "%" PRId64, d->id);
        PLB_INFO(ks->host, ks->ctx, PLB_KV("balancer", id, "service_uid", d->uid),
                 "deleted the balancer%s", r->dry_run ? " (dry run)" : "");
        if (!r->dry_run)
            hz_lbs_del(ks->by_uid, d->uid);
    } else {
        char id[24];
        snprintf(id, sizeof(id), "%" PRId64, d->id);
        PLB_WARN(ks->host, ks->ctx,
                 PLB_KV("balancer", id, "service_uid", d->uid, "code", r->code ? r->code : "-",
                        "error", r->message ? r->message : "-"),
                 "deleting the balancer failed: status %d", r->status);
    }
    if (ks->deleting)
        json_object_del(ks->deleting, d->uid);
    hz_free(d->uid);
    hz_free(d);
}

/* Delete the balancer labelled for uid, if the last resync saw one. */
int
hz_delete_labelled(struct hz_kside *ks, const char *uid)
{
    const struct hz_lb *lb = hz_lbs_get(ks->by_uid, uid);
    struct del *d;
    char path[64];
    int rc;
    /* Only a balancer that carries this Service's label (the index holds
     * no other), once. */
    if (!lb)
        return 0;
    if (!ks->deleting && !(ks->deleting = json_object()))
        return -ENOMEM;
    if (json_object_get(ks->deleting, uid))
        return 0;
    if (json_object_set_new(ks->deleting, uid, json_true()) < 0)
        return -ENOMEM;
    if (!(d = hz_calloc(sizeof(*d))) || !(d->uid = hz_strdup(uid))) {
        json_object_del(ks->deleting, uid);
        hz_free(d);
        return -ENOMEM;
    }
    d->ks = ks;
    d->id = lb->a.id;
    snprintf(path, sizeof(path), "/load_balancers/%" PRId64, d->id);
    char id[24];
    snprintf(id, sizeof(id), "%" PRId64, d->id);
    PLB_INFO(ks->host, ks->ctx, PLB_KV("service_uid", uid, "balancer", id, "name", lb->a.name),
             "the Service is no longer a LoadBalancer of ours: deleting its balancer");
    rc = hz_api_call(ks->api, uid, "DELETE", path, NULL, del_done, d);
    if (rc < 0) {
        json_object_del(ks->deleting, uid);
        hz_free(d->uid);
        hz_free(d);
    }
    return rc == -ENOMEM ? -ENOMEM : 0;
}

/* ------------------------------------------------------------------ */
/* Sync                                                                */

int
hz_kube_is_ours(const struct hz_kside *ks, const plb_obj *svc)
{
    const struct plb_host *h = ks->host;
    const char *type = h->obj->str(h->obj->get(svc, "spec", "type", NULL));
    const char *cls = h->obj->str(h->obj->get(svc, "spec", "loadBalancerClass", NULL));
    return type && strcmp(type, "LoadBalancer") == 0 &&
           hz_class_served(ks->cfg->load_balancer_class, cls);
}

/* Status ingress of lb for st's Service (new) or NULL: the public IPv4
 * (and IPv6 with ipv6_ingress); for a balancer whose public interface is
 * disabled, its first private network IP. NULL with *oom set when out of
 * memory. */
static json_t *
ingress_of(const struct hz_kside *ks, const struct hz_svc_state *st, const struct hz_actual *lb,
           int *oom)
{
    const char *v4 = lb->ipv4, *v6 = lb->ipv6;
    if (!lb->public_enabled) {
        v4 = lb->nnets ? lb->nets[0].ip : NULL;
        v6 = NULL;
    }
    int mode = st->have_good && st->good.ip_mode >= 0 ? st->good.ip_mode : ks->cfg->default_ip_mode;
    const char *ms = mode == HZ_IPMODE_PROXY ? "Proxy" : "VIP";
    json_t *arr = json_array();
    *oom = 0;
    if (!arr) {
        *oom = 1;
        return NULL;
    }
    if ((v4 && json_array_append_new(arr, json_pack("{s:s, s:s}", "ip", v4, "ipMode", ms)) < 0) ||
        (v6 && ks->cfg->ipv6_ingress &&
         json_array_append_new(arr, json_pack("{s:s, s:s}", "ip", v6, "ipMode", ms)) < 0) ||
        json_array_size(arr) == 0) {
        *oom = v4 || (v6 && ks->cfg->ipv6_ingress); /* one to write, not written */
        json_decref(arr);
        return NULL;
    }
    return arr;
}

/* The current status.loadBalancer.ingress of svc (new) or NULL. */
static json_t *
current_ingress(const struct hz_kside *ks, const plb_obj *svc)
{
    const plb_obj *ing = ks->host->obj->get(svc, "status", "loadBalancer", "ingress", NULL);
    char *t = ing ? ks->host->obj->dump(ing) : NULL;
    json_t *r = t ? json_loads(t, 0, NULL) : NULL;
    if (t)
        ks->host->mem->free(t);
    return r;
}

/* ------------------------------------------------------------------ */
/* Warnings in force and status                                        */

int
hz_lb_serves(const struct hz_kside *ks, const struct hz_svc_state *st, const struct hz_actual *lb)
{
    const char *net =
        st->have_good && st->good.network ? st->good.network : ks->cfg->default_network;
    json_t *id = net ? json_object_get(ks->nets, net) : NULL;
    if (!net)
        return 1;
    return json_is_integer(id) && hz_actual_on_network(lb, json_integer_value(id));
}

/* What start_status_write sends. */
struct status_write {
    const plb_obj *svc;
    const char *ips[2];
    size_t n;
    const char *mode;
};

static plb_kube_op *
start_status_write(struct hz_kside *ks, void *arg, struct kop *k, int *err)
{
    struct status_write *w = arg;
    return ks->host->lb->status_write(ks->kube, w->svc, w->ips, w->n, w->mode, kop_done, k, err);
}

/* Write svc's status.loadBalancer.ingress from lb when it differs. */
int
hz_status_update(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                 const struct hz_actual *lb)
{
    int oom, rc = 0;
    json_t *want = ingress_of(ks, st, lb, &oom);
    json_t *have = current_ingress(ks, svc);
    if (oom) {
        rc = -ENOMEM;
    } else if (want && json_equal(want, have)) {
        /* the Service shows it: a later change of it is written again */
        json_decref(st->status_sent);
        st->status_sent = NULL;
    } else if (want && st->status_busy) {
        st->status_again = 1; /* one write at a time: look again after it */
    } else if (want && !json_equal(want, st->status_sent)) {
        struct status_write w = {
            .svc = svc,
            .mode = json_string_value(json_object_get(json_array_get(want, 0), "ipMode"))};
        size_t i;
        json_t *e;
        json_array_foreach(want, i, e)
        {
            if (w.n < 2)
                w.ips[w.n++] = json_string_value(json_object_get(e, "ip"));
        }
        PLB_INFO(ks->host, ks->ctx, PLB_KV("service", st->key), "status ingress %s%s%s", w.ips[0],
                 w.n > 1 ? ", " : "", w.n > 1 ? w.ips[1] : "");
        /* in flight from here: status_ended undoes this if it fails */
        json_decref(st->status_sent);
        st->status_sent = json_incref(want);
        st->status_busy = 1;
        if ((rc = kop_run(ks, st->key, "status write", start_status_write, &w)) < 0) {
            st->status_busy = 0;
            json_decref(st->status_sent);
            st->status_sent = NULL;
            /* out of memory: synced again; fenced: the gate decides */
            rc = rc == -ENOMEM ? rc : 0;
        }
    }
    json_decref(want);
    json_decref(have);
    return rc;
}

int
hz_kube_start(struct hz_kside *ks)
{
    const struct plb_host *h = ks->host;
    struct plb_kube_opts o = {
        .size = sizeof(o), .kubeconfig = ks->cfg->kubeconfig, .context = ks->cfg->kube_context};
    char err[512];
    if (!(ks->kube = h->kube->client_new(ks->ctx, &o, err, sizeof(err)))) {
        PLB_ERR(ks->host, ks->ctx, PLB_KV("error", err), "cannot create the Kubernetes client");
        return -EINVAL;
    }
    ks->states.warn = warn_event;
    ks->states.warn_arg = ks;
    struct hz_queue_cfg qc = {.base_delay_ms = 5, .max_delay_ms = 1000000};
    if (!(ks->sync_timer = h->loop->timer_new(ks->ctx, hz_sync_fire, ks)) ||
        !(ks->recheck_timer = h->loop->timer_new(ks->ctx, hz_recheck_fire, ks)) ||
        (!ks->queue && !(ks->queue = hz_queue_new(&qc))) ||
        (!ks->index && !(ks->index = hz_index_new())))
        return -ENOMEM;
    return hz_watch_start(ks);
}

void
hz_kube_cancel_writes(struct hz_kside *ks)
{
    while (ks->kops) {
        struct kop *k = ks->kops;
        HZ_DLIST_REMOVE(ks->kops, k, prev, next);
        ks->host->kube->cancel(k->op);
        if (k->status_key)
            status_ended(k, 0);
        kop_free(k);
    }
}

void
hz_kube_stop(struct hz_kside *ks)
{
    hz_kube_cancel_writes(ks);
    if (ks->sync_timer)
        ks->host->loop->timer_cancel(ks->sync_timer);
    if (ks->recheck_timer)
        ks->host->loop->timer_cancel(ks->recheck_timer);
    if (ks->queue)
        hz_queue_shut_down(ks->queue); /* the reconciles in flight end on their own */
    ks->host->kube->informer_free(ks->svc_inf);
    ks->host->kube->informer_free(ks->node_inf);
    ks->host->kube->informer_free(ks->slice_inf);
    ks->svc_inf = ks->node_inf = ks->slice_inf = NULL;
}

void
hz_kube_free(struct hz_kside *ks)
{
    if (!ks->host)
        return;
    hz_kube_stop(ks);
    if (ks->kube)
        ks->host->kube->client_free(ks->kube);
    ks->kube = NULL;
    ks->host->loop->timer_free(ks->sync_timer);
    ks->sync_timer = NULL;
    ks->host->loop->timer_free(ks->recheck_timer);
    ks->recheck_timer = NULL;
    json_decref(ks->nets);
    ks->nets = NULL;
    json_decref(ks->fresh);
    ks->fresh = NULL;
    hz_states_clear(&ks->states);
    for (size_t i = 0; i < ks->ndeleted; i++)
        hz_free(ks->deleted[i]);
    hz_free(ks->deleted);
    ks->deleted = NULL;
    ks->ndeleted = 0;
    json_decref(ks->deleting);
    ks->deleting = NULL;
    hz_lbs_free(ks->by_uid);
    ks->by_uid = NULL;
    hz_queue_free(ks->queue);
    ks->queue = NULL;
    hz_index_free(ks->index);
    ks->index = NULL;
}
