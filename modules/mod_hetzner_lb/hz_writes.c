/*
 * hz_writes.c: the writes of the event side other than the reconcile's
 * and the status (hz_ingress.c), every one only while the gate is open:
 *
 *   - the Kubernetes writes in flight (one list, cancelled when the gate
 *     closes), which the status write starts through hz_kop_run too;
 *   - warning Events (the sink of the warnings in force, hz_state.h);
 *   - the robotlb/finalizer of earlier releases, removed; the shared
 *     group's finalizer of a member, added and removed;
 *   - the Hetzner delete of the balancer labelled for a Service that
 *     stopped being one (type change, other class, deletion) — never a
 *     balancer by its name, never one with delete protection (a
 *     DeleteProtected warning Event instead, once while it holds).
 *
 * It calls nothing of the event side: a write's end reaches its starter
 * through the callback it gave.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_dlist.h"
#include "hz_group.h"
#include "hz_rec.h"

#define FINALIZER "robotlb/finalizer"

/* A Kubernetes write in flight (cancelled when the gate closes). */
struct kop {
    struct hz_kside *ks;
    plb_kube_op *op;
    char *key;           /* the Service the ended callback hears of (owned) */
    hz_kop_end_fn ended; /* NULL: nobody waits for the end */
    struct kop *prev, *next;
};

/* A Hetzner delete in flight. */
struct del {
    struct hz_kside *ks;
    char *uid;
    char *name;   /* the balancer's (owned) */
    plb_obj *svc; /* the Service, for a warning Event (owned reference; may be NULL) */
    int64_t id;
    int certs; /* a service of it used certificates: sweep them after */
};

/* The values of ks->deleting: a delete in flight, or a protected balancer
 * already warned of (kept so that the warning is not repeated on every
 * sync while the protection holds). */
#define DEL_IN_FLIGHT json_true()
#define DEL_PROTECTED json_false()

/* ------------------------------------------------------------------ */
/* Kubernetes writes                                                   */

static void
kop_free(struct kop *k)
{
    hz_free(k->key);
    hz_free(k);
}

static void
kop_done(plb_kube_op *op, const struct plb_kube_result *r, void *arg)
{
    struct kop *k = arg;
    (void)op;
    if (r->status < 200 || r->status >= 300)
        PLB_WARN(k->ks->host, k->ks->ctx, PLB_KV("error", r->message ? r->message : ""),
                 "kubernetes write failed: status %d", r->status);
    HZ_DLIST_REMOVE(k->ks->kops, k, prev, next);
    if (k->ended)
        k->ended(k->ks, k->key, r);
    kop_free(k);
}

int
hz_kop_run(struct hz_kside *ks, const char *what, hz_kop_start_fn start, void *arg,
           hz_kop_end_fn ended, const char *key)
{
    struct kop *k = hz_calloc(sizeof(*k));
    plb_kube_op *op;
    int err = 0;
    if (!k || (ended && !(k->key = hz_strdup(key)))) {
        hz_free(k);
        return -ENOMEM;
    }
    k->ks = ks;
    k->ended = ended;
    if (!(op = start(ks, arg, kop_done, k, &err))) {
        PLB_ERR(ks->host, ks->ctx, PLB_KV("what", what, "error", strerror(-err)),
                "kubernetes write: cannot start");
        if (k->ended)
            k->ended(ks, k->key, NULL);
        kop_free(k);
        return err < 0 ? err : -EIO;
    }
    k->op = op;
    HZ_DLIST_PUSH(ks->kops, k, prev, next);
    return 0;
}

void
hz_kops_cancel(struct hz_kside *ks)
{
    while (ks->kops) {
        struct kop *k = ks->kops;
        HZ_DLIST_REMOVE(ks->kops, k, prev, next);
        ks->host->kube->cancel(k->op);
        if (k->ended)
            k->ended(ks, k->key, NULL);
        kop_free(k);
    }
}

static plb_kube_op *
start_event(struct hz_kside *ks, void *arg, plb_kube_done_cb done, void *karg, int *err)
{
    return ks->host->kube->event(ks->kube, arg, done, karg, err);
}

void
hz_warn_event(void *arg, const char *key, const plb_obj *svc, const char *reason, const char *msg)
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
    (void)hz_kop_run(ks, "event", start_event, &ev, NULL, NULL);
}

/* The finalizers of obj with finalizer f added (add) or removed, for a
 * mutate callback of ks: 0 changed, 1 as wanted already (nothing
 * written), -1 out of memory. */
static int
fin_edit(struct hz_kside *ks, plb_obj *obj, const char *f, int add)
{
    const struct plb_host *h = ks->host;
    const plb_obj *fins = h->obj->get(obj, "metadata", "finalizers", NULL);
    size_t n = h->obj->len(fins);
    plb_obj *keep = h->obj->new_array();
    int found = 0;
    if (!keep)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *s = h->obj->str(h->obj->at(fins, i));
        if (!s)
            continue;
        if (strcmp(s, f) == 0) {
            found = 1;
            if (!add)
                continue;
        }
        if (h->obj->append(keep, h->obj->new_str(s)) < 0)
            goto fail;
    }
    if (found == add) {
        h->obj->unref(keep);
        return 1;
    }
    if (add && h->obj->append(keep, h->obj->new_str(f)) < 0)
        goto fail;
    return h->obj->set(obj, keep, "metadata", "finalizers", NULL) < 0 ? -1 : 0;
fail:
    h->obj->unref(keep);
    return -1;
}

/* The mutate callbacks of the finalizer writes; arg is their struct kop
 * (kube_modify hands the same arg to mutate and done). */
static int
drop_finalizer(plb_obj *obj, void *arg)
{
    return fin_edit(((struct kop *)arg)->ks, obj, FINALIZER, 0);
}

static int
add_group_finalizer(plb_obj *obj, void *arg)
{
    return fin_edit(((struct kop *)arg)->ks, obj, HZ_GROUP_FINALIZER, 1);
}

static int
drop_group_finalizer(plb_obj *obj, void *arg)
{
    return fin_edit(((struct kop *)arg)->ks, obj, HZ_GROUP_FINALIZER, 0);
}

static plb_kube_op *
start_group_fin_add(struct hz_kside *ks, void *arg, plb_kube_done_cb done, void *karg, int *err)
{
    return ks->host->kube->modify(ks->kube, arg, add_group_finalizer, 0, done, karg, err);
}

static plb_kube_op *
start_group_fin_drop(struct hz_kside *ks, void *arg, plb_kube_done_cb done, void *karg, int *err)
{
    return ks->host->kube->modify(ks->kube, arg, drop_group_finalizer, 0, done, karg, err);
}

int
hz_kube_group_finalizer(struct hz_kside *ks, const char *key, const char *ns, const char *name,
                        int add)
{
    struct plb_kube_ref ref = {.size = sizeof(struct plb_kube_ref),
                               .api_version = "v1",
                               .resource = "services",
                               .ns = ns,
                               .name = name};
    PLB_INFO(ks->host, ks->ctx, PLB_KV("service", key, "finalizer", HZ_GROUP_FINALIZER),
             add ? "adding the shared group's finalizer"
                 : "removing the shared group's finalizer: its services and label are gone");
    int rc = hz_kop_run(ks, add ? "finalizer" : "finalizer removal",
                        add ? start_group_fin_add : start_group_fin_drop, &ref, NULL, NULL);
    return rc == -ENOMEM ? rc : 0;
}

static plb_kube_op *
start_finalizer_removal(struct hz_kside *ks, void *arg, plb_kube_done_cb done, void *karg, int *err)
{
    return ks->host->kube->modify(ks->kube, arg, drop_finalizer, 0, done, karg, err);
}

int
hz_has_finalizer(const struct hz_kside *ks, const plb_obj *svc, const char *f)
{
    const plb_obj *v = ks->host->obj->get(svc, "metadata", "finalizers", NULL);
    for (size_t i = 0; i < ks->host->obj->len(v); i++) {
        const char *s = ks->host->obj->str(ks->host->obj->at(v, i));
        if (s && strcmp(s, f) == 0)
            return 1;
    }
    return 0;
}

void
hz_kube_drop_finalizer(struct hz_kside *ks, const plb_obj *svc, const char *key, const char *ns,
                       const char *name)
{
    struct plb_kube_ref ref = {.size = sizeof(struct plb_kube_ref),
                               .api_version = "v1",
                               .resource = "services",
                               .ns = ns,
                               .name = name};
    if (!hz_has_finalizer(ks, svc, FINALIZER))
        return;
    PLB_INFO(ks->host, ks->ctx, PLB_KV("service", key, "finalizer", FINALIZER),
             "removing the finalizer of earlier releases");
    (void)hz_kop_run(ks, "finalizer removal", start_finalizer_removal, &ref, NULL, NULL);
}

/* ------------------------------------------------------------------ */
/* Hetzner deletes                                                     */

/* The warning that balancer name (id) of Service uid stays because of its
 * delete protection: an Event on svc (borrowed; NULL: logged only). */
static void
warn_protected(struct hz_kside *ks, const char *uid, const plb_obj *svc, const char *name,
               int64_t id)
{
    const char *ns = svc ? hz_ks_str(ks, svc, "metadata", "namespace", NULL) : NULL;
    const char *sname = svc ? hz_ks_str(ks, svc, "metadata", "name", NULL) : NULL;
    char key[512], msg[768];
    snprintf(key, sizeof(key), "%s/%s", ns ? ns : "-", sname ? sname : uid);
    snprintf(msg, sizeof(msg),
             "balancer %s (id %" PRId64 ") has delete protection: it is not deleted and keeps "
             "its IPs; the Service no longer needs it, so lift the protection and delete it by "
             "hand if it should go",
             name ? name : "-", id);
    if (svc && ns && sname) {
        hz_warn_event(ks, key, svc, "DeleteProtected", msg);
        return;
    }
    PLB_WARN(ks->host, ks->ctx, PLB_KV("service_uid", uid, "reason", "DeleteProtected"), "%s", msg);
}

static void
del_free(struct del *d)
{
    d->ks->host->obj->unref(d->svc);
    hz_free(d->name);
    hz_free(d->uid);
    hz_free(d);
}

static void
del_done(void *arg, const struct hz_result *r)
{
    struct del *d = arg;
    struct hz_kside *ks = d->ks;
    char id[24];
    snprintf(id, sizeof(id), "%" PRId64, d->id);
    if (r->err == -ECANCELED) {
        /* gate closed: the next leader decides again */
    } else if (r->status >= 400 && r->code && strcmp(r->code, "protected") == 0) {
        /* protected after the list it was known from: forgotten until the
         * next resync list shows it (protected: not asked again) */
        warn_protected(ks, d->uid, d->svc, d->name, d->id);
        hz_lbs_del(ks->by_uid, d->uid);
        if (ks->deleting && json_object_set_new(ks->deleting, d->uid, DEL_PROTECTED) == 0) {
            del_free(d);
            return;
        }
    } else if (r->dry_run || (r->status >= 200 && r->status < 300) || r->status == 404) {
        PLB_INFO(ks->host, ks->ctx, PLB_KV("balancer", id, "service_uid", d->uid),
                 "deleted the balancer%s", r->dry_run ? " (dry run)" : "");
        if (!r->dry_run && d->certs)
            hz_cert_sweep(ks, d->uid);
        if (!r->dry_run)
            hz_lbs_del(ks->by_uid, d->uid);
    } else {
        PLB_WARN(ks->host, ks->ctx,
                 PLB_KV("balancer", id, "service_uid", d->uid, "code", r->code ? r->code : "-",
                        "error", r->message ? r->message : "-"),
                 "deleting the balancer failed: status %d", r->status);
    }
    if (ks->deleting)
        json_object_del(ks->deleting, d->uid);
    del_free(d);
}

int
hz_delete_labelled(struct hz_kside *ks, const char *uid, const plb_obj *svc)
{
    const struct hz_lb *lb = hz_lbs_get(ks->by_uid, uid);
    struct del *d;
    json_t *was;
    char path[64], id[24];
    int rc;
    /* Only a balancer that carries this Service's label (the index holds
     * no other), once. */
    if (!lb)
        return 0;
    if (!ks->deleting && !(ks->deleting = json_object()))
        return -ENOMEM;
    was = json_object_get(ks->deleting, uid);
    if (json_is_true(was) || (was && lb->a.protect_delete))
        return 0; /* in flight, or protected and warned of */
    if (lb->a.protect_delete) {
        /* Hetzner would refuse the delete: say why the balancer stays */
        if (json_object_set_new(ks->deleting, uid, DEL_PROTECTED) < 0)
            return -ENOMEM;
        warn_protected(ks, uid, svc, lb->a.name, lb->a.id);
        return 0;
    }
    /* not protected (any more, as the last list showed): deleted */
    if (json_object_set_new(ks->deleting, uid, DEL_IN_FLIGHT) < 0)
        return -ENOMEM;
    if (!(d = hz_calloc(sizeof(*d))) || !(d->uid = hz_strdup(uid)) ||
        !(d->name = hz_strdup(lb->a.name)) || (svc && !(d->svc = ks->host->obj->ref(svc)))) {
        json_object_del(ks->deleting, uid);
        if (d) {
            d->ks = ks;
            del_free(d);
        }
        return -ENOMEM;
    }
    d->ks = ks;
    d->id = lb->a.id;
    for (size_t i = 0; i < lb->a.nservices; i++)
        d->certs |= lb->a.services[i].http.ncerts > 0;
    snprintf(path, sizeof(path), "/load_balancers/%" PRId64, d->id);
    snprintf(id, sizeof(id), "%" PRId64, d->id);
    PLB_INFO(ks->host, ks->ctx, PLB_KV("service_uid", uid, "balancer", id, "name", lb->a.name),
             "the Service is no longer a LoadBalancer of ours: deleting its balancer");
    rc = hz_api_call(ks->api, uid, "DELETE", path, NULL, del_done, d);
    if (rc < 0) {
        json_object_del(ks->deleting, uid);
        del_free(d);
    }
    return rc == -ENOMEM ? -ENOMEM : 0;
}
