/*
 * hz_kube.c: the Kubernetes side of mod_hetzner_lb — informers for
 * Services, Nodes and EndpointSlices on every replica (so a new leader acts
 * at once), and the per-Service sync. Any change of a Service, Node or
 * EndpointSlice, every resync list and every due recheck syncs every
 * Service:
 *
 *   - which Services: type LoadBalancer with loadBalancerClass unset or
 *     "robotlb";
 *   - robotlb/ annotations validated (the node selector by the daemon's
 *     lb_selector_check); a bad value is a warning Event and the last good
 *     set stays;
 *   - target nodes from the daemon's lb_select_targets, capped at the
 *     balancer type's max targets (a warning names the limit);
 *   - the desired balancer compared with the labelled one of the resync
 *     list: nothing is sent when they agree; otherwise a reconcile finds
 *     (labelled; else by name in one shared list of unlabelled balancers),
 *     adopts or creates the balancer, sends the plan's writes on the
 *     Service's lane and reads the balancer back once;
 *   - a refused target (or a failed write) rechecks the Service after
 *     refused_recheck_interval while what it asks for is unchanged;
 *   - status: status.loadBalancer.ingress with the balancer's IPv4 (and IPv6
 *     with ipv6_ingress) and the ipMode of robotlb/ip-mode or default_ip_mode,
 *     through lb_status_write;
 *   - a Service that stops being one (type change, other class, deletion)
 *     gets its labelled balancer deleted — never a balancer by its name;
 *   - the robotlb/finalizer of earlier releases is removed.
 *
 * Every write (Hetzner, status, Events, finalizers) happens only while the
 * gate is open.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hz_kube.h"

#define FINALIZER "robotlb/finalizer"
#define SYNC_DELAY_MS 200

/* One Service we track (by namespace/name). */
struct hz_svc_state {
    char *key;        /* "ns/name" */
    char *uid;
    struct hz_annot good; /* last good annotations */
    int have_good;
    char *last_bad;   /* the last annotation problem reported */
    json_t *warned;   /* reason -> message of the warnings in force */
    int busy;         /* a reconcile is in flight */
    int dirty;        /* something changed meanwhile: sync again after it */
    int by_name;      /* look its names up one by one (a create met a
                         name the lists did not show) */
    uint64_t fail_fp; /* fingerprint of the desired state that failed */
    int64_t retry_at; /* ... not tried again before this (monotonic ms) */
    struct hz_svc_state *next;
};

/* A Kubernetes write in flight (cancelled when the gate closes). */
struct kop {
    struct hz_kside *ks;
    plb_kube_op *op;
    struct kop *prev, *next;
};

/* A Hetzner delete in flight. */
struct del {
    struct hz_kside *ks;
    char *uid;
    int64_t id;
};

static const char *
s_str(const struct hz_kside *ks, const plb_obj *o, const char *a, const char *b, const char *c)
{
    const struct plb_host *h = ks->host;
    return h->obj_str(c ? h->obj_get(o, a, b, c, NULL) : h->obj_get(o, a, b, NULL));
}

/* ------------------------------------------------------------------ */
/* State                                                               */

static struct hz_svc_state *
state_get(struct hz_kside *ks, const char *key, int create)
{
    struct hz_svc_state *s;
    for (s = ks->svcs; s; s = s->next)
        if (strcmp(s->key, key) == 0)
            return s;
    if (!create)
        return NULL;
    if (!(s = hz_calloc(sizeof(*s))) || !(s->key = hz_strdup(key))) {
        hz_free(s);
        return NULL;
    }
    hz_annot_clear(&s->good);
    s->next = ks->svcs;
    ks->svcs = s;
    return s;
}

static void
state_free(struct hz_svc_state *s)
{
    hz_free(s->key);
    hz_free(s->uid);
    hz_annot_clear(&s->good);
    hz_free(s->last_bad);
    json_decref(s->warned);
    hz_free(s);
}

static void
state_drop(struct hz_kside *ks, const char *key)
{
    for (struct hz_svc_state **pp = &ks->svcs; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->key, key) == 0) {
            struct hz_svc_state *s = *pp;
            *pp = s->next;
            state_free(s);
            return;
        }
    }
}

/* ------------------------------------------------------------------ */
/* Kubernetes writes                                                   */

static void
kop_unlink(struct kop *k)
{
    if (k->prev)
        k->prev->next = k->next;
    else
        k->ks->kops = k->next;
    if (k->next)
        k->next->prev = k->prev;
}

static void
kop_done(plb_kube_op *op, const struct plb_kube_result *r, void *arg)
{
    struct kop *k = arg;
    (void)op;
    if (r->status < 200 || r->status >= 300)
        hz_log(k->ks->log, PLB_LOG_WARN, "kubernetes write failed: %d %s", r->status,
               r->message ? r->message : "");
    kop_unlink(k);
    hz_free(k);
}

/* Track a started op (or report why it did not start). */
static struct kop *
kop_new(struct hz_kside *ks)
{
    struct kop *k = hz_calloc(sizeof(*k));
    if (k)
        k->ks = ks;
    return k;
}

static void
kop_started(struct hz_kside *ks, struct kop *k, plb_kube_op *op, int err, const char *what)
{
    if (!op) {
        hz_log(ks->log, PLB_LOG_ERROR, "%s: cannot start: %s", what, strerror(-err));
        hz_free(k);
        return;
    }
    k->op = op;
    k->next = ks->kops;
    if (ks->kops)
        ks->kops->prev = k;
    ks->kops = k;
}

static void
warn_event(struct hz_kside *ks, const plb_obj *svc, const char *reason, const char *msg)
{
    struct plb_kube_event ev = {.size = sizeof(ev), .involved = svc, .kind = "Service",
                                .api_version = "v1", .type = "Warning", .reason = reason,
                                .message = msg};
    struct kop *k = kop_new(ks);
    int err = 0;
    if (!k)
        return;
    hz_log(ks->log, PLB_LOG_WARN, "%s/%s: %s: %s", s_str(ks, svc, "metadata", "namespace", NULL),
           s_str(ks, svc, "metadata", "name", NULL), reason, msg);
    kop_started(ks, k, ks->host->kube_event(ks->kube, &ev, kop_done, k, &err), err, "event");
}

/* The mutate callback of the finalizer removal; arg is its struct kop
 * (kube_modify hands the same arg to mutate and done). */
static int
drop_finalizer(plb_obj *obj, void *arg)
{
    struct hz_kside *ks = ((struct kop *)arg)->ks;
    const struct plb_host *h = ks->host;
    const plb_obj *fins = h->obj_get(obj, "metadata", "finalizers", NULL);
    size_t n = h->obj_len(fins);
    char *text = NULL, *p;
    size_t cap = 16, len = 0;
    int found = 0;
    if (!(text = hz_calloc(cap)))
        return -1;
    text[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        const char *f = h->obj_str(h->obj_at(fins, i));
        if (!f)
            continue;
        if (strcmp(f, FINALIZER) == 0) {
            found = 1;
            continue;
        }
        size_t need = len + strlen(f) * 6 + 8;
        if (need > cap) {
            if (!(p = hz_realloc(text, need * 2))) {
                hz_free(text);
                return -1;
            }
            text = p;
            cap = need * 2;
        }
        plb_obj *s = h->obj_new_str(f);
        char *q = s ? h->obj_dump(s) : NULL;
        h->obj_unref(s);
        if (!q) {
            hz_free(text);
            return -1;
        }
        len += (size_t)snprintf(text + len, cap - len, "%s%s", len > 1 ? "," : "", q);
        h->free(q);
    }
    text[len++] = ']';
    text[len] = '\0';
    if (!found) {
        hz_free(text);
        return 1;
    }
    plb_obj *arr = h->obj_parse(text, len);
    hz_free(text);
    if (!arr)
        return -1;
    return h->obj_set(obj, arr, "metadata", "finalizers", NULL) < 0 ? -1 : 0;
}

static void
remove_finalizer(struct hz_kside *ks, const char *ns, const char *name)
{
    struct plb_kube_ref ref = {.api_version = "v1", .resource = "services", .ns = ns,
                               .name = name};
    struct kop *k = kop_new(ks);
    int err = 0;
    if (!k)
        return;
    hz_log(ks->log, PLB_LOG_INFO, "%s/%s: removing the %s finalizer of earlier releases", ns,
           name, FINALIZER);
    kop_started(ks, k,
                ks->host->kube_modify(ks->kube, &ref, drop_finalizer, 0, kop_done, k, &err), err,
                "finalizer removal");
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
        hz_log(ks->log, PLB_LOG_INFO, "deleted balancer %" PRId64 " of service %s%s", d->id,
               d->uid, r->dry_run ? " (dry run)" : "");
        if (!r->dry_run && ks->by_uid)
            json_object_del(ks->by_uid, d->uid);
    } else {
        hz_log(ks->log, PLB_LOG_WARN, "deleting balancer %" PRId64 " of service %s: %d %s: %s",
               d->id, d->uid, r->status, r->code ? r->code : "-", r->message ? r->message : "-");
    }
    if (ks->deleting)
        json_object_del(ks->deleting, d->uid);
    hz_free(d->uid);
    hz_free(d);
}

/* Delete the balancer labelled for uid, if the last resync saw one. */
static void
delete_labelled(struct hz_kside *ks, const char *uid)
{
    json_t *lb = ks->by_uid ? json_object_get(ks->by_uid, uid) : NULL;
    const char *label = json_string_value(
        json_object_get(json_object_get(lb, "labels"), HZ_LABEL_UID));
    struct del *d;
    char path[64];
    int rc;
    /* Only a balancer that carries this Service's label, once. */
    if (!lb || !label || strcmp(label, uid) != 0)
        return;
    if (!ks->deleting && !(ks->deleting = json_object()))
        return;
    if (json_object_get(ks->deleting, uid) ||
        json_object_set_new(ks->deleting, uid, json_true()) < 0)
        return;
    if (!(d = hz_calloc(sizeof(*d))) || !(d->uid = hz_strdup(uid))) {
        hz_free(d);
        return;
    }
    d->ks = ks;
    d->id = json_integer_value(json_object_get(lb, "id"));
    snprintf(path, sizeof(path), "/load_balancers/%" PRId64, d->id);
    hz_log(ks->log, PLB_LOG_INFO, "service %s is no longer a LoadBalancer of ours: deleting "
           "its balancer %" PRId64 " \"%s\"", uid, d->id,
           json_string_value(json_object_get(lb, "name")));
    rc = hz_api_call(ks->api, uid, "DELETE", path, NULL, del_done, d);
    if (rc < 0) {
        json_object_del(ks->deleting, uid);
        hz_free(d->uid);
        hz_free(d);
    }
}

/* ------------------------------------------------------------------ */
/* Sync                                                                */

static const char *
annot_get(void *arg, const char *key)
{
    struct hz_kside *ks = ((void **)arg)[0];
    const plb_obj *svc = ((void **)arg)[1];
    return ks->host->obj_str(ks->host->obj_get(svc, "metadata", "annotations", key, NULL));
}

static int
has_finalizer(const struct hz_kside *ks, const plb_obj *svc)
{
    const plb_obj *f = ks->host->obj_get(svc, "metadata", "finalizers", NULL);
    for (size_t i = 0; i < ks->host->obj_len(f); i++) {
        const char *s = ks->host->obj_str(ks->host->obj_at(f, i));
        if (s && strcmp(s, FINALIZER) == 0)
            return 1;
    }
    return 0;
}

int
hz_kube_is_ours(const struct plb_host *h, const plb_obj *svc)
{
    const char *type = h->obj_str(h->obj_get(svc, "spec", "type", NULL));
    const char *cls = h->obj_str(h->obj_get(svc, "spec", "loadBalancerClass", NULL));
    return type && strcmp(type, "LoadBalancer") == 0 && (!cls || strcmp(cls, "robotlb") == 0);
}

/* Status ingress of lb for st's Service (new) or NULL. */
static json_t *
ingress_of(const struct hz_kside *ks, const struct hz_svc_state *st, json_t *lb)
{
    json_t *pn = json_object_get(lb, "public_net");
    const char *v4 = json_string_value(json_object_get(json_object_get(pn, "ipv4"), "ip"));
    const char *v6 = json_string_value(json_object_get(json_object_get(pn, "ipv6"), "ip"));
    int mode = st->have_good && st->good.ip_mode >= 0 ? st->good.ip_mode : ks->cfg->default_ip_mode;
    const char *ms = mode == HZ_IPMODE_PROXY ? "Proxy" : "VIP";
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    if ((v4 && json_array_append_new(arr, json_pack("{s:s, s:s}", "ip", v4, "ipMode", ms)) < 0) ||
        (v6 && ks->cfg->ipv6_ingress &&
         json_array_append_new(arr, json_pack("{s:s, s:s}", "ip", v6, "ipMode", ms)) < 0) ||
        json_array_size(arr) == 0) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

/* The current status.loadBalancer.ingress of svc (new) or NULL. */
static json_t *
current_ingress(const struct hz_kside *ks, const plb_obj *svc)
{
    const plb_obj *ing = ks->host->obj_get(svc, "status", "loadBalancer", "ingress", NULL);
    char *t = ing ? ks->host->obj_dump(ing) : NULL;
    json_t *r = t ? json_loads(t, 0, NULL) : NULL;
    if (t)
        ks->host->free(t);
    return r;
}

/* ------------------------------------------------------------------ */
/* Warnings in force and status                                        */

/* A warning Event once per reason and text: repeated only after its
 * condition cleared (warn_clear) or its text changed. */
static void
warn_once(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc, const char *reason,
          const char *msg)
{
    const char *prev = json_string_value(json_object_get(st->warned, reason));
    if (prev && strcmp(prev, msg) == 0)
        return;
    if (!st->warned && !(st->warned = json_object()))
        return;
    if (json_object_set_new(st->warned, reason, json_string_nocheck(msg)) < 0)
        return;
    warn_event(ks, svc, reason, msg);
}

static void
warn_clear(struct hz_svc_state *st, const char *reason)
{
    if (st->warned)
        json_object_del(st->warned, reason);
}

/* Write svc's status.loadBalancer.ingress from lb when it differs. */
static void
status_update(struct hz_kside *ks, const struct hz_svc_state *st, const plb_obj *svc, json_t *lb)
{
    json_t *want = ingress_of(ks, st, lb);
    json_t *have = current_ingress(ks, svc);
    if (want && !json_equal(want, have)) {
        const char *ips[2];
        size_t n = 0, i;
        json_t *e;
        struct kop *k = kop_new(ks);
        int err = 0;
        json_array_foreach(want, i, e) {
            if (n < 2)
                ips[n++] = json_string_value(json_object_get(e, "ip"));
        }
        hz_log(ks->log, PLB_LOG_INFO, "%s: status ingress %s%s%s", st->key, ips[0],
               n > 1 ? ", " : "", n > 1 ? ips[1] : "");
        if (k)
            kop_started(ks, k,
                        ks->host->lb_status_write(
                            ks->kube, svc, ips, n,
                            json_string_value(json_object_get(json_array_get(want, 0), "ipMode")),
                            kop_done, k, &err),
                        err, "status write");
    }
    json_decref(want);
    json_decref(have);
}

/* ------------------------------------------------------------------ */
/* Reconcile: find, adopt or create the Service's balancer, then make it */
/* what the Service asks for                                           */

/* One reconcile of one Service, from the lookups to the status. */
struct rec {
    struct hz_kside *ks;
    char *key, *uid;
    struct hz_desired d;
    uint64_t fp;
    int annotated;
    char legacy[HZ_NAME_MAX + 1];
    json_t *by_name, *by_legacy; /* GET ?name= answers' first item (owned) */
    json_t *lb;                  /* the freshest JSON of its balancer (owned) */
    int64_t net_id;
    int with_targets;
    int refs;      /* calls in flight */
    int failed;    /* a write failed: retry after refused_recheck_interval */
    int refused;   /* Hetzner refused a target: likewise */
    int waiting;   /* no decision possible (wait/blocked): retry at resync */
    int cancelled; /* the gate closed */
    int labelled;  /* the balancer carries the Service's label now */
    int name_conflict; /* the create met a taken name */
    struct rec *qnext; /* in ks->nameq */
};

/* One write of a plan in flight. */
struct rop {
    struct rec *r;
    enum hz_op_kind kind;
    char *ip;
};

static void rec_plan(struct rec *r, json_t *lb);

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
    for (size_t i = 0; i < d->nservices; i++) {
        fp_i(&h, d->services[i].listen);
        fp_i(&h, d->services[i].dest);
    }
    for (size_t i = 0; i < d->ntargets; i++)
        fp_s(&h, d->targets[i]);
    return h;
}

/* Arm the recheck timer for the earliest retry still ahead. */
static void
recheck_arm(struct hz_kside *ks)
{
    int64_t now = ks->host->now_ms(ks->ctx), first = 0;
    if (!ks->svc_inf)
        return; /* stopped */
    for (const struct hz_svc_state *s = ks->svcs; s; s = s->next)
        if (s->fail_fp && s->retry_at > now && (!first || s->retry_at < first))
            first = s->retry_at;
    if (first && ks->recheck_timer)
        ks->host->timer_arm(ks->recheck_timer, first - now, 0, 0);
}

/* Percent-encode s for a query value. */
static char *
qenc(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *o = hz_calloc(strlen(s) * 3 + 1), *p = o;
    if (!o)
        return NULL;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            *p++ = (char)c;
        } else {
            *p++ = '%';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    return o;
}

static const plb_obj *
rec_svc(const struct rec *r, struct hz_svc_state **stp)
{
    struct hz_kside *ks = r->ks;
    struct hz_svc_state *st = state_get(ks, r->key, 0);
    char ns[256];
    const char *slash = strchr(r->key, '/');
    const plb_obj *svc;
    *stp = NULL;
    if (!st || !st->uid || strcmp(st->uid, r->uid) != 0 || !slash || !ks->svc_inf)
        return NULL;
    snprintf(ns, sizeof(ns), "%.*s", (int)(slash - r->key), r->key);
    svc = ks->host->informer_get(ks->svc_inf, ns, slash + 1);
    if (!svc || !s_str(ks, svc, "metadata", "uid", NULL) ||
        strcmp(s_str(ks, svc, "metadata", "uid", NULL), r->uid) != 0)
        return NULL;
    *stp = st;
    return svc;
}

static void
rec_free(struct rec *r)
{
    hz_free(r->key);
    hz_free(r->uid);
    hz_desired_clear(&r->d);
    json_decref(r->by_name);
    json_decref(r->by_legacy);
    json_decref(r->lb);
    hz_free(r);
}

/* The reconcile ended: remember the balancer, write the status, decide when
 * to look again. */
static void
rec_finish(struct rec *r)
{
    struct hz_kside *ks = r->ks;
    struct hz_svc_state *st = state_get(ks, r->key, 0);
    struct hz_svc_state *sst;
    const plb_obj *svc;

    if (st && st->uid && strcmp(st->uid, r->uid) == 0) {
        st->busy = 0;
        if (r->cancelled) {
            /* the next leader (or this one, when the gate opens) decides */
        } else if (r->refused || r->failed || r->waiting) {
            int64_t wait = r->waiting ? ks->cfg->resync_interval_ms : ks->cfg->refused_recheck_ms;
            st->fail_fp = r->fp;
            st->retry_at = ks->host->now_ms(ks->ctx) + wait;
            hz_log(ks->log, PLB_LOG_INFO, "%s: checked again in %lld ms", r->key,
                   (long long)wait);
        } else {
            st->fail_fp = 0;
            st->retry_at = 0;
        }
        if (r->name_conflict)
            st->by_name = 1;
    }
    if (!r->cancelled && r->lb && r->labelled) {
        if (!(ks->by_uid || (ks->by_uid = json_object())) ||
            json_object_set(ks->by_uid, r->uid, r->lb) < 0 ||
            !(ks->fresh || (ks->fresh = json_object())) ||
            json_object_set_new(ks->fresh, r->uid,
                                json_integer(ks->host->now_ms(ks->ctx))) < 0)
            hz_log(ks->log, PLB_LOG_ERROR, "%s: out of memory", r->key);
        if ((svc = rec_svc(r, &sst)))
            status_update(ks, sst, svc, r->lb);
        else if (ks->svc_inf)
            /* deleted or no longer ours while its balancer was created:
             * the deletion found nothing to delete then */
            delete_labelled(ks, r->uid);
    }
    if (st && st->dirty && !r->cancelled) {
        st->dirty = 0;
        hz_kube_sync_soon(ks);
    }
    recheck_arm(ks);
    rec_free(r);
}

static int
rec_call(struct rec *r, const char *method, const char *path, json_t *body, hz_result_cb cb,
         void *arg)
{
    int rc = hz_api_call(r->ks->api, r->uid, method, path, body, cb, arg);
    if (rc < 0) {
        hz_log(r->ks->log, PLB_LOG_WARN, "%s: %s %s: cannot start: %s", r->key, method, path,
               strerror(-rc));
        r->failed = 1;
        return rc;
    }
    r->refs++;
    return 0;
}

static int
ok_status(const struct hz_result *res)
{
    return res->err == 0 && res->status >= 200 && res->status < 300 && !res->action_failed;
}

static void
log_refusal(const struct rec *r, const char *what, const struct hz_result *res)
{
    hz_log(r->ks->log, PLB_LOG_WARN, "%s: %s: %d %s: %s", r->key, what, res->status,
           res->code ? res->code : "-", res->message ? res->message : "-");
}

/* The final GET of the balancer after the writes. */
static void
refresh_done(void *arg, const struct hz_result *res)
{
    struct rec *r = arg;
    r->refs--;
    if (res->err == -ECANCELED)
        r->cancelled = 1;
    else if (res->status == 200 && json_object_get(res->body, "load_balancer")) {
        json_t *lb = json_object_get(res->body, "load_balancer");
        const char *uid = json_string_value(
            json_object_get(json_object_get(lb, "labels"), HZ_LABEL_UID));
        json_decref(r->lb);
        r->lb = json_incref(lb);
        r->labelled = uid && strcmp(uid, r->uid) == 0;
    } else if (!res->dry_run) {
        log_refusal(r, "reading the balancer back", res);
        r->failed = 1;
    }
    if (r->refs == 0)
        rec_finish(r);
}

static void
op_done(void *arg, const struct hz_result *res)
{
    struct rop *o = arg;
    struct rec *r = o->r;
    char what[128];
    r->refs--;
    snprintf(what, sizeof(what), "%s%s%s", hz_op_name(o->kind), o->ip ? " " : "",
             o->ip ? o->ip : "");
    if (res->err == -ECANCELED) {
        r->cancelled = 1;
    } else if (res->dry_run || ok_status(res)) {
        hz_log(r->ks->log, PLB_LOG_DEBUG, "%s: %s done", r->key, what);
        /* a dry run changes nothing: log it again at the next resync, not
         * on every sync */
        r->waiting |= res->dry_run;
    } else if ((o->kind == HZ_OP_ADD_TARGET && res->code &&
                strcmp(res->code, "target_already_defined") == 0) ||
               (o->kind == HZ_OP_REMOVE_TARGET && res->status == 404)) {
        /* already as wanted (the list we planned from was older) */
    } else if (o->kind == HZ_OP_ADD_TARGET) {
        /* The client waits out 429 itself: any answer here is a refusal. */
        log_refusal(r, what, res);
        r->refused = 1;
    } else {
        log_refusal(r, what, res);
        r->failed = 1;
    }
    hz_free(o->ip);
    hz_free(o);
    if (r->refs == 0)
        rec_finish(r);
}

/* Send the writes that turn lb (new reference, stolen) into what the
 * Service asks for, then read it back. */
static void
rec_plan(struct rec *r, json_t *lb)
{
    struct hz_actual a;
    struct hz_plan p;
    char path[64];
    int rc;

    json_decref(r->lb);
    r->lb = lb;
    if ((rc = hz_actual_parse(lb, &a)) < 0) {
        hz_log(r->ks->log, PLB_LOG_WARN, "%s: cannot read the balancer: %s", r->key,
               strerror(-rc));
        r->failed = 1;
        rec_finish(r);
        return;
    }
    rc = hz_plan_build(&r->d, &a, r->net_id, &p);
    r->labelled = a.uid && strcmp(a.uid, r->uid) == 0;
    if (rc < 0) {
        hz_log(r->ks->log, PLB_LOG_WARN, "%s: no plan for balancer %lld: %s", r->key,
               (long long)a.id, strerror(-rc));
        hz_actual_clear(&a);
        r->failed = 1;
        rec_finish(r);
        return;
    }
    for (size_t i = 0; i < p.n; i++) {
        struct rop *o = hz_calloc(sizeof(*o));
        if (!o || (p.ops[i].target_ip && !(o->ip = hz_strdup(p.ops[i].target_ip)))) {
            hz_free(o);
            r->failed = 1;
            break;
        }
        o->r = r;
        o->kind = p.ops[i].kind;
        hz_log(r->ks->log, PLB_LOG_INFO, "%s: balancer %lld \"%s\": %s%s%s", r->key,
               (long long)a.id, a.name, hz_op_name(o->kind), o->ip ? " " : "",
               o->ip ? o->ip : "");
        if (rec_call(r, p.ops[i].method, p.ops[i].path, json_incref(p.ops[i].body), op_done,
                     o) < 0) {
            hz_free(o->ip);
            hz_free(o);
            break;
        }
    }
    if (p.n && !r->failed) {
        snprintf(path, sizeof(path), "/load_balancers/%lld", (long long)a.id);
        rec_call(r, "GET", path, NULL, refresh_done, r);
    }
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    if (r->refs == 0)
        rec_finish(r);
}

static void rec_create(struct rec *r);

static void
create_done(void *arg, const struct hz_result *res)
{
    struct rec *r = arg;
    json_t *lb = json_object_get(res->body, "load_balancer");
    r->refs--;
    if (res->err == -ECANCELED) {
        r->cancelled = 1;
    } else if (res->dry_run) {
        hz_log(r->ks->log, PLB_LOG_INFO, "%s: dry run: the balancer \"%s\" is not created",
               r->key, r->d.name);
        r->waiting = 1;
    } else if (res->status == 201 && lb) {
        hz_log(r->ks->log, PLB_LOG_INFO, "%s: created balancer %lld \"%s\"", r->key,
               (long long)json_integer_value(json_object_get(lb, "id")), r->d.name);
        rec_plan(r, json_incref(lb));
        return;
    } else if (res->status == 422 && r->with_targets) {
        /* A target Hetzner refuses fails the whole create: create without
         * targets and add them one by one, so that the others stay. */
        log_refusal(r, "create with targets", res);
        r->with_targets = 0;
        rec_create(r);
        if (r->refs)
            return;
    } else {
        log_refusal(r, "create", res);
        r->failed = 1;
        r->name_conflict = res->code && strcmp(res->code, "uniqueness_error") == 0;
    }
    if (r->refs == 0)
        rec_finish(r);
}

static void
rec_create(struct rec *r)
{
    json_t *body = hz_create_body(&r->d, r->net_id, r->with_targets);
    if (!body) {
        r->failed = 1;
        return;
    }
    hz_log(r->ks->log, PLB_LOG_INFO, "%s: creating balancer \"%s\" (%s, %s, %zu target(s))",
           r->key, r->d.name, r->d.type, r->d.location, r->with_targets ? r->d.ntargets : 0);
    rec_call(r, "POST", "/load_balancers", body, create_done, r);
}

/* The network is known (or none is asked for): create or change. */
static void
rec_go(struct rec *r, json_t *lb)
{
    if (lb) {
        rec_plan(r, lb);
        return;
    }
    r->with_targets = r->net_id > 0 && !r->d.private_ip && r->d.ntargets > 0;
    rec_create(r);
    if (r->refs == 0)
        rec_finish(r);
}

struct netq {
    struct rec *r;
    json_t *lb; /* the balancer to change, or NULL to create */
    struct netq *next; /* in ks->netq */
};

static void net_one(struct netq *q, const struct hz_result *res);

/* One lookup per network name serves every reconcile waiting for it. */
static void
net_done(void *arg, const struct hz_result *res)
{
    struct netq *lead = arg;
    struct hz_kside *ks = lead->r->ks;
    char *name = hz_strdup(lead->r->d.network);
    struct netq *mine = NULL, **pp = &ks->netq;
    /* take the waiters for this name off the list first: the callbacks
     * below may start other lookups */
    while (*pp) {
        struct netq *q = *pp;
        if (q != lead && name && strcmp(q->r->d.network, name) == 0) {
            *pp = q->next;
            q->next = mine;
            mine = q;
        } else if (q == lead) {
            *pp = q->next;
        } else {
            pp = &q->next;
        }
    }
    hz_free(name);
    net_one(lead, res);
    while (mine) {
        struct netq *q = mine;
        mine = q->next;
        net_one(q, res);
    }
}

static void
net_one(struct netq *q, const struct hz_result *res)
{
    struct rec *r = q->r;
    json_t *lb = q->lb;
    json_t *net = json_array_get(json_object_get(res->body, "networks"), 0);
    hz_free(q);
    r->refs--;
    if (res->err == -ECANCELED) {
        r->cancelled = 1;
    } else if (res->status == 200 && json_is_integer(json_object_get(net, "id"))) {
        r->net_id = json_integer_value(json_object_get(net, "id"));
        if ((r->ks->nets || (r->ks->nets = json_object())) &&
            json_object_set_new(r->ks->nets, r->d.network, json_integer(r->net_id)) < 0)
            hz_log(r->ks->log, PLB_LOG_ERROR, "out of memory");
        rec_go(r, lb);
        return;
    } else if (res->status == 200) {
        struct hz_svc_state *st;
        const plb_obj *svc = rec_svc(r, &st);
        char msg[512];
        snprintf(msg, sizeof(msg), "the Hetzner network \"%s\" does not exist", r->d.network);
        if (svc)
            warn_once(r->ks, st, svc, "NetworkNotFound", msg);
        r->failed = 1;
    } else {
        log_refusal(r, "network lookup", res);
        r->failed = 1;
    }
    json_decref(lb);
    if (r->refs == 0)
        rec_finish(r);
}

/* Find d.network's id (once per daemon), then go on with lb (stolen). */
static void
rec_network(struct rec *r, json_t *lb)
{
    json_t *id = r->d.network ? json_object_get(r->ks->nets, r->d.network) : NULL;
    struct netq *q;
    char *enc, *path;
    if (!r->d.network || id) {
        r->net_id = id ? json_integer_value(id) : 0;
        rec_go(r, lb);
        return;
    }
    for (q = r->ks->netq; q; q = q->next) {
        if (strcmp(q->r->d.network, r->d.network) == 0) {
            /* a lookup of this name is in flight: wait for its answer */
            struct netq *w = hz_calloc(sizeof(*w));
            if (!w) {
                json_decref(lb);
                r->failed = 1;
                rec_finish(r);
                return;
            }
            w->r = r;
            w->lb = lb;
            w->next = r->ks->netq;
            r->ks->netq = w;
            r->refs++;
            return;
        }
    }
    enc = qenc(r->d.network);
    path = enc ? hz_asprintf("/networks?name=%s", enc) : NULL;
    q = path ? hz_calloc(sizeof(*q)) : NULL;
    hz_free(enc);
    if (!q) {
        hz_free(path);
        json_decref(lb);
        r->failed = 1;
        rec_finish(r);
        return;
    }
    q->r = r;
    q->lb = lb;
    if (hz_api_call(r->ks->api, NULL, "GET", path, NULL, net_done, q) < 0) {
        hz_free(q);
        json_decref(lb);
        r->failed = 1;
        hz_free(path);
        rec_finish(r);
        return;
    }
    q->next = r->ks->netq;
    r->ks->netq = q;
    r->refs++;
    hz_free(path);
}

/* Both name lookups answered: decide whose balancer it is. */
static void
rec_decide(struct rec *r)
{
    struct hz_actual an, al;
    struct hz_own_in in = {0};
    struct hz_own_out out;
    struct hz_svc_state *st;
    const plb_obj *svc;
    int okn = 0, okl = 0;

    memset(&an, 0, sizeof(an));
    memset(&al, 0, sizeof(al));
    if ((r->by_name && !(okn = hz_actual_parse(r->by_name, &an) == 0)) ||
        (r->by_legacy && !(okl = hz_actual_parse(r->by_legacy, &al) == 0))) {
        hz_actual_clear(&an);
        r->failed = 1;
        rec_finish(r);
        return;
    }
    in.uid = r->uid;
    in.name = r->d.name;
    in.annotated = r->annotated;
    in.legacy_name = r->legacy;
    in.by_name = okn ? &an : NULL;
    in.by_legacy = okl ? &al : NULL;
    in.node_ips = (const char *const *)r->d.targets;
    in.nnode_ips = r->d.ntargets;
    hz_own_decide(&in, &out);
    svc = rec_svc(r, &st);
    if (svc && out.kind != HZ_OWN_WAIT)
        warn_clear(st, "NoTargetNodes");
    if (svc && out.kind != HZ_OWN_BLOCKED)
        warn_clear(st, "BalancerNameTaken");
    switch (out.kind) {
    case HZ_OWN_WAIT:
    case HZ_OWN_BLOCKED:
        if (svc)
            warn_once(r->ks, st, svc, out.kind == HZ_OWN_WAIT ? "NoTargetNodes"
                                                              : "BalancerNameTaken",
                      out.warning);
        r->waiting = 1;
        rec_finish(r);
        break;
    case HZ_OWN_CREATE:
        rec_network(r, NULL);
        break;
    case HZ_OWN_MANAGE:
    case HZ_OWN_ADOPT:
        if (out.kind == HZ_OWN_ADOPT)
            hz_log(r->ks->log, PLB_LOG_INFO,
                   "%s: adopting the unlabelled balancer %lld \"%s\" (it targets the "
                   "service's nodes)",
                   r->key, (long long)out.lb->id, out.lb->name);
        rec_network(r, json_incref(out.lb == &an ? r->by_name : r->by_legacy));
        break;
    }
    hz_actual_clear(&an);
    hz_actual_clear(&al);
}

struct lookup {
    struct rec *r;
    int legacy;
};

static void
lookup_done(void *arg, const struct hz_result *res)
{
    struct lookup *l = arg;
    struct rec *r = l->r;
    json_t *item = json_array_get(json_object_get(res->body, "load_balancers"), 0);
    r->refs--;
    if (res->err == -ECANCELED)
        r->cancelled = 1;
    else if (res->status != 200) {
        log_refusal(r, l->legacy ? "looking up the earlier release's name" : "name lookup",
                    res);
        r->failed = 1;
    } else if (item) {
        json_t **slot = l->legacy ? &r->by_legacy : &r->by_name;
        json_decref(*slot);
        *slot = json_incref(item);
    }
    hz_free(l);
    if (r->refs)
        return;
    if (r->cancelled || r->failed)
        rec_finish(r);
    else
        rec_decide(r);
}

static int
rec_lookup(struct rec *r, const char *name, int legacy)
{
    struct lookup *l = hz_calloc(sizeof(*l));
    char *enc = qenc(name);
    char *path = enc ? hz_asprintf("/load_balancers?name=%s", enc) : NULL;
    int rc = -ENOMEM;
    hz_free(enc);
    if (l && path) {
        l->r = r;
        l->legacy = legacy;
        if ((rc = rec_call(r, "GET", path, NULL, lookup_done, l)) == 0)
            l = NULL;
    }
    hz_free(l);
    hz_free(path);
    return rc;
}

/* The balancer named name among the unlabelled list's items and the
 * labelled ones of the resync index (new reference), or NULL. */
static json_t *
find_named(const struct hz_kside *ks, json_t *items, const char *name)
{
    size_t i;
    const char *k;
    json_t *lb;
    json_array_foreach(items, i, lb) {
        const char *n = json_string_value(json_object_get(lb, "name"));
        if (n && strcmp(n, name) == 0)
            return json_incref(lb);
    }
    json_object_foreach(ks->by_uid, k, lb) {
        const char *n = json_string_value(json_object_get(lb, "name"));
        if (n && strcmp(n, name) == 0)
            return json_incref(lb);
    }
    return NULL;
}

/* The unlabelled list answered: every waiting reconcile finds its names in
 * it (or among the labelled balancers) and decides. */
static void
unlabelled_done(void *arg, const struct hz_result *res, json_t *items)
{
    struct hz_kside *ks = arg;
    struct rec *q = ks->nameq;
    ks->nameq = NULL;
    ks->unl_listing = 0;
    if (!items && res->err != -ECANCELED)
        hz_log(ks->log, PLB_LOG_WARN, "listing unlabelled balancers failed: %d %s: %s",
               res->status, res->code ? res->code : "-", res->message ? res->message : "-");
    while (q) {
        struct rec *r = q;
        q = q->qnext;
        r->refs--;
        if (res->err == -ECANCELED) {
            r->cancelled = 1;
        } else if (!items) {
            r->failed = 1;
        } else {
            r->by_name = find_named(ks, items, r->d.name);
            if (!r->annotated && strcmp(r->legacy, r->d.name) != 0)
                r->by_legacy = find_named(ks, items, r->legacy);
        }
        if (r->cancelled || r->failed)
            rec_finish(r);
        else
            rec_decide(r);
    }
}

/* Wait for the names of r in ONE paginated list of the unlabelled
 * balancers, shared by every Service that needs a lookup now (the labelled
 * ones are in the resync index): a few requests instead of two per
 * Service. */
static void
rec_names(struct rec *r)
{
    struct hz_kside *ks = r->ks;
    int rc;
    if (!ks->unl_listing) {
        rc = hz_api_list(ks->api, "/load_balancers?label_selector=!" HZ_LABEL_UID,
                         "load_balancers", unlabelled_done, ks);
        if (rc < 0) {
            hz_log(ks->log, PLB_LOG_WARN, "%s: cannot list unlabelled balancers: %s", r->key,
                   strerror(-rc));
            r->failed = 1;
            return;
        }
        ks->unl_listing = 1;
    }
    r->qnext = ks->nameq;
    ks->nameq = r;
    r->refs++;
}

/* Start a reconcile of st's Service toward d (stolen). */
static void
rec_start(struct hz_kside *ks, struct hz_svc_state *st, struct hz_desired *d, uint64_t fp,
          json_t *labelled)
{
    struct rec *r = hz_calloc(sizeof(*r));
    if (!r || !(r->key = hz_strdup(st->key)) || !(r->uid = hz_strdup(st->uid))) {
        if (r) {
            hz_free(r->key);
            hz_free(r);
        }
        hz_desired_clear(d);
        return;
    }
    r->ks = ks;
    r->d = *d;
    memset(d, 0, sizeof(*d));
    r->fp = fp;
    r->annotated = st->good.balancer != NULL;
    st->busy = 1;
    if (labelled) {
        rec_network(r, json_incref(labelled));
        return;
    }
    /* Not labelled yet: the balancer under the name it asks for, and under
     * the earlier release's "<service>" (which a robotlb/balancer name
     * replaces). */
    hz_name_legacy(strchr(st->key, '/') + 1, r->legacy);
    if (!st->by_name)
        rec_names(r);
    else if (rec_lookup(r, r->d.name, 0) == 0 && !r->annotated &&
             strcmp(r->legacy, r->d.name) != 0)
        rec_lookup(r, r->legacy, 1);
    if (r->refs == 0)
        rec_finish(r);
}

/* Read svc's ports (new array in *out). 0 or -ENOMEM. */
static int
read_ports(const struct hz_kside *ks, const plb_obj *svc, struct hz_port **out, size_t *n)
{
    const struct plb_host *h = ks->host;
    const plb_obj *ports = h->obj_get(svc, "spec", "ports", NULL);
    size_t np = h->obj_len(ports);
    *out = NULL;
    *n = 0;
    if (np == 0)
        return 0;
    if (!(*out = hz_calloc(np * sizeof(**out))))
        return -ENOMEM;
    for (size_t i = 0; i < np; i++) {
        const plb_obj *p = h->obj_at(ports, i);
        (*out)[i].protocol = h->obj_str(h->obj_get(p, "protocol", NULL));
        (*out)[i].port = (int)h->obj_int(h->obj_get(p, "port", NULL), 0);
        (*out)[i].node_port = (int)h->obj_int(h->obj_get(p, "nodePort", NULL), 0);
    }
    *n = np;
    return 0;
}

/* Select the Service's target nodes, build what it asks for, and reconcile
 * when that differs from its labelled balancer (or it has none). The steady
 * state costs no request: the resync list is compared. */
static void
reconcile(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc)
{
    const struct plb_host *h = ks->host;
    struct plb_lb_targets t = {0};
    struct hz_port *ports = NULL;
    struct hz_desired d;
    struct hz_svc hs;
    const char **ips = NULL;
    size_t nports = 0, nips = 0, max;
    const char *type = st->good.type ? st->good.type : ks->cfg->default_balancer_type;
    char err[1024];
    uint64_t fp;
    int rc;

    if (!PLB_HOST_HAS(h, lb_status_write))
        return;
    max = hz_type_max_targets(type);
    rc = h->lb_select_targets(ks->ctx, svc,
                              ks->cfg->dynamic_node_selector ? PLB_LB_POLICY_TRAFFIC
                                                             : PLB_LB_POLICY_SELECTOR,
                              st->good.node_selector, ks->node_inf, ks->slice_inf, max, &t, err,
                              sizeof(err));
    if (rc == -EINVAL) {
        warn_once(ks, st, svc, "InvalidAnnotation", err);
        return;
    }
    if (rc < 0) {
        hz_log(ks->log, PLB_LOG_ERROR, "%s: target selection: %s", st->key, strerror(-rc));
        return;
    }
    if (t.dropped) {
        snprintf(err, sizeof(err),
                 "%zu nodes are selected but the balancer type %s holds %zu targets: %zu "
                 "node(s) are left out; pick a bigger type through ROBOTLB_DEFAULT_LB_TYPE or "
                 "the robotlb/balancer-type annotation to use the whole cluster",
                 t.n + t.dropped, type, max, t.dropped);
        warn_once(ks, st, svc, "TooManyTargets", err);
    } else {
        warn_clear(st, "TooManyTargets");
    }
    if (t.n && !(ips = hz_calloc(t.n * sizeof(*ips)))) {
        h->lb_targets_clear(&t);
        return;
    }
    for (size_t i = 0; i < t.n; i++)
        if (t.v[i].ip)
            ips[nips++] = t.v[i].ip;
    if (read_ports(ks, svc, &ports, &nports) < 0) {
        hz_free(ips);
        h->lb_targets_clear(&t);
        return;
    }
    hs = (struct hz_svc){.uid = st->uid,
                         .name = s_str(ks, svc, "metadata", "name", NULL),
                         .ns = s_str(ks, svc, "metadata", "namespace", NULL),
                         .ports = ports,
                         .nports = nports};
    rc = hz_desired_build(ks->cfg, &st->good, &hs, ips, nips, &d, err, sizeof(err));
    hz_free(ips);
    hz_free(ports);
    h->lb_targets_clear(&t);
    if (rc == -ENOENT) {
        /* no balancer is created; an existing one and the status stay */
        warn_once(ks, st, svc, "NoExposablePort", err);
        return;
    }
    if (rc < 0)
        return;
    warn_clear(st, "NoExposablePort");
    fp = desired_fp(&d);
    if (st->busy) {
        st->dirty = 1;
        hz_desired_clear(&d);
        return;
    }
    if (st->fail_fp == fp && h->now_ms(ks->ctx) < st->retry_at) {
        hz_desired_clear(&d);
        return;
    }
    json_t *lb = json_object_get(ks->by_uid, st->uid);
    json_t *netid = d.network ? json_object_get(ks->nets, d.network) : NULL;
    if (lb && (!d.network || netid)) {
        /* Compare with the list: nothing to send when nothing differs. */
        struct hz_actual a;
        struct hz_plan p = {0};
        if (hz_actual_parse(lb, &a) == 0) {
            rc = hz_plan_build(&d, &a, netid ? json_integer_value(netid) : 0, &p);
            hz_actual_clear(&a);
            if (rc == 0 && p.n == 0) {
                st->fail_fp = 0;
                st->retry_at = 0;
                hz_desired_clear(&d);
                return;
            }
            hz_plan_clear(&p);
        }
    }
    rec_start(ks, st, &d, fp, lb);
}

static void
sync_one(struct hz_kside *ks, const plb_obj *svc)
{
    const struct plb_host *h = ks->host;
    const char *ns = s_str(ks, svc, "metadata", "namespace", NULL);
    const char *name = s_str(ks, svc, "metadata", "name", NULL);
    const char *uid = s_str(ks, svc, "metadata", "uid", NULL);
    char key[512], err[1024];
    struct hz_svc_state *st;
    struct hz_annot a;
    void *ga[2] = {ks, (void *)svc};

    if (!ns || !name || !uid)
        return;
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    if (has_finalizer(ks, svc))
        remove_finalizer(ks, ns, name);
    if (!hz_kube_is_ours(h, svc) || h->obj_get(svc, "metadata", "deletionTimestamp", NULL)) {
        delete_labelled(ks, uid);
        state_drop(ks, key);
        return;
    }
    if (!(st = state_get(ks, key, 1)))
        return;
    if (!st->uid || strcmp(st->uid, uid) != 0) {
        /* new, or recreated under the same name: another Service to robotlb */
        hz_annot_clear(&st->good);
        st->have_good = 0;
        hz_free(st->uid);
        if (!(st->uid = hz_strdup(uid)))
            return;
    }
    int rc = hz_annot_parse(annot_get, ga, &a, err, sizeof(err));
    if (rc == 0 && a.node_selector && PLB_HOST_HAS(h, lb_selector_check)) {
        char serr[512];
        if (h->lb_selector_check(a.node_selector, serr, sizeof(serr)) < 0) {
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
        hz_free(st->last_bad);
        st->last_bad = NULL;
    } else if (rc == -EINVAL) {
        if (!st->last_bad || strcmp(st->last_bad, err) != 0) {
            warn_event(ks, svc, "InvalidAnnotation", err);
            hz_free(st->last_bad);
            st->last_bad = hz_strdup(err);
        }
    }
    json_t *lb = ks->by_uid ? json_object_get(ks->by_uid, uid) : NULL;
    if (lb)
        status_update(ks, st, svc, lb);
    /* Until the first resync list said which balancers are labelled, a
     * Service cannot tell its own from a name lookup's. */
    if (st->have_good && ks->by_uid)
        reconcile(ks, st, svc);
}

static void
sync_cb(const plb_obj *obj, void *arg)
{
    sync_one(arg, obj);
}

static void
sync_fire(plb_timer *t, void *arg)
{
    struct hz_kside *ks = arg;
    (void)t;
    /* Every cache complete: a node or slice missing from a half-listed
     * cache would remove its target. */
    if (!ks->host->gate_is_open(ks->ctx) || !ks->svc_inf || !ks->node_inf || !ks->slice_inf ||
        !ks->host->informer_synced(ks->svc_inf) || !ks->host->informer_synced(ks->node_inf) ||
        !ks->host->informer_synced(ks->slice_inf))
        return;
    /* Services the cache no longer has, but that we saw: deleted (once the
     * first resync told which balancers are labelled). */
    for (size_t i = 0; ks->by_uid && i < ks->ndeleted; i++) {
        delete_labelled(ks, ks->deleted[i]);
        hz_free(ks->deleted[i]);
    }
    if (ks->by_uid)
        ks->ndeleted = 0;
    ks->host->informer_foreach(ks->svc_inf, sync_cb, ks);
    recheck_arm(ks);
}

static void
recheck_fire(plb_timer *t, void *arg)
{
    (void)t;
    hz_kube_sync_soon(arg);
}

void
hz_kube_sync_soon(struct hz_kside *ks)
{
    if (ks->sync_timer && !ks->host->timer_pending(ks->sync_timer))
        ks->host->timer_arm(ks->sync_timer, SYNC_DELAY_MS, 0, 0);
}

/* ------------------------------------------------------------------ */
/* Informers                                                           */

static void
on_add(plb_informer *inf, const plb_obj *obj, void *arg)
{
    (void)inf;
    (void)obj;
    hz_kube_sync_soon(arg);
}

static void
on_update(plb_informer *inf, const plb_obj *old, const plb_obj *obj, void *arg)
{
    (void)inf;
    (void)old;
    (void)obj;
    hz_kube_sync_soon(arg);
}

static void
on_svc_delete(plb_informer *inf, const plb_obj *old, void *arg)
{
    struct hz_kside *ks = arg;
    const char *uid = s_str(ks, old, "metadata", "uid", NULL);
    char **nd;
    char key[512];
    (void)inf;
    snprintf(key, sizeof(key), "%s/%s", s_str(ks, old, "metadata", "namespace", NULL),
             s_str(ks, old, "metadata", "name", NULL));
    state_drop(ks, key);
    if (uid && hz_kube_is_ours(ks->host, old) &&
        (nd = hz_realloc(ks->deleted, (ks->ndeleted + 1) * sizeof(*nd)))) {
        ks->deleted = nd;
        if ((nd[ks->ndeleted] = hz_strdup(uid)))
            ks->ndeleted++;
    }
    hz_kube_sync_soon(ks);
}

static void
on_delete(plb_informer *inf, const plb_obj *old, void *arg)
{
    (void)inf;
    (void)old;
    hz_kube_sync_soon(arg);
}

static void
on_synced(plb_informer *inf, void *arg)
{
    (void)inf;
    hz_kube_sync_soon(arg);
}

static plb_informer *
informer(struct hz_kside *ks, const char *api_version, const char *resource,
         void (*del)(plb_informer *, const plb_obj *, void *))
{
    struct plb_informer_opts o = {
        .size = sizeof(o),
        .ref = {.api_version = api_version, .resource = resource},
        .on_add = on_add,
        .on_update = on_update,
        .on_delete = del,
        .on_synced = on_synced,
        .arg = ks,
    };
    int err = 0;
    plb_informer *inf = ks->host->informer_new(ks->kube, &o, &err);
    if (!inf)
        hz_log(ks->log, PLB_LOG_ERROR, "informer for %s: %s", resource, strerror(-err));
    return inf;
}

int
hz_kube_start(struct hz_kside *ks)
{
    const struct plb_host *h = ks->host;
    struct plb_kube_opts o = {.size = sizeof(o), .kubeconfig = ks->cfg->kubeconfig,
                              .context = ks->cfg->kube_context};
    char err[512];
    if (!PLB_HOST_HAS(h, obj_new_int)) {
        hz_log(ks->log, PLB_LOG_WARN, "the daemon offers no Kubernetes client: no Services");
        return 0;
    }
    if (!(ks->kube = h->kube_new(ks->ctx, &o, err, sizeof(err)))) {
        hz_log(ks->log, PLB_LOG_ERROR, "kubernetes: %s", err);
        return -EINVAL;
    }
    if (!(ks->sync_timer = h->timer_new(ks->ctx, sync_fire, ks)) ||
        !(ks->recheck_timer = h->timer_new(ks->ctx, recheck_fire, ks)))
        return -ENOMEM;
    if (!(ks->svc_inf = informer(ks, "v1", "services", on_svc_delete)) ||
        !(ks->node_inf = informer(ks, "v1", "nodes", on_delete)) ||
        !(ks->slice_inf = informer(ks, "discovery.k8s.io/v1", "endpointslices", on_delete)))
        return -EIO;
    return 0;
}

void
hz_kube_cancel_writes(struct hz_kside *ks)
{
    while (ks->kops) {
        struct kop *k = ks->kops;
        kop_unlink(k);
        ks->host->kube_cancel(k->op);
        hz_free(k);
    }
}

void
hz_kube_stop(struct hz_kside *ks)
{
    hz_kube_cancel_writes(ks);
    if (ks->sync_timer)
        ks->host->timer_cancel(ks->sync_timer);
    if (ks->recheck_timer)
        ks->host->timer_cancel(ks->recheck_timer);
    ks->host->informer_free(ks->svc_inf);
    ks->host->informer_free(ks->node_inf);
    ks->host->informer_free(ks->slice_inf);
    ks->svc_inf = ks->node_inf = ks->slice_inf = NULL;
}

void
hz_kube_free(struct hz_kside *ks)
{
    if (!ks->host)
        return;
    hz_kube_stop(ks);
    if (ks->kube)
        ks->host->kube_free(ks->kube);
    ks->kube = NULL;
    ks->host->timer_free(ks->sync_timer);
    ks->sync_timer = NULL;
    ks->host->timer_free(ks->recheck_timer);
    ks->recheck_timer = NULL;
    json_decref(ks->nets);
    ks->nets = NULL;
    json_decref(ks->fresh);
    ks->fresh = NULL;
    while (ks->svcs) {
        struct hz_svc_state *s = ks->svcs;
        ks->svcs = s->next;
        state_free(s);
    }
    for (size_t i = 0; i < ks->ndeleted; i++)
        hz_free(ks->deleted[i]);
    hz_free(ks->deleted);
    ks->deleted = NULL;
    ks->ndeleted = 0;
    json_decref(ks->deleting);
    ks->deleting = NULL;
    json_decref(ks->by_uid);
    ks->by_uid = NULL;
}
