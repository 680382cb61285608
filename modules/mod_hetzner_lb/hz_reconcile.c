/*
 * hz_reconcile.c: one Service's reconcile for mod_hetzner_lb (see
 * hz_kube.c for when it runs): select the target nodes, build what the
 * Service asks for, compare it with its labelled balancer of the resync
 * list, and only when they differ find (labelled; else by name in one
 * shared list of unlabelled balancers), adopt or create the balancer, send
 * the plan's writes on the Service's lane, read the balancer back once and
 * write the Service's status. A refused target or a failed write rechecks
 * the Service after refused_recheck_interval while what it asks for is
 * unchanged.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hz_kube_int.h"
#include "hz_queue.h"

/* One reconcile of one Service, from the lookups to the status. */
struct rec {
    struct hz_kside *ks;
    char *key, *uid;
    struct hz_desired d;
    uint64_t fp;
    int annotated;
    char legacy[HZ_NAME_MAX + 1];
    struct hz_lb *by_name, *by_legacy; /* the balancers under its names (owned) */
    struct hz_lb *lb;                  /* the freshest state of its balancer (owned) */
    int64_t net_id;
    int with_targets;
    int refs;          /* calls in flight */
    int failed;        /* a write failed: retry after refused_recheck_interval */
    int refused;       /* Hetzner refused a target: likewise */
    int waiting;       /* no decision possible (wait/blocked): retry at resync */
    int cancelled;     /* the gate closed */
    int labelled;      /* the balancer carries the Service's label now */
    int name_conflict; /* the create met a taken name */
    int attach_failed; /* Hetzner refused attaching the network */
    int attached;      /* a network was attached: check again (detach the old) */
    struct rec *qnext; /* in ks->nameq */
};

/* One write of a plan in flight. */
struct rop {
    struct rec *r;
    enum hz_op_kind kind;
    char *ip;
};

static void rec_plan(struct rec *r, struct hz_lb *lb);

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
    fp_i(&h, d->public_iface);
    for (size_t i = 0; i < d->nservices; i++) {
        fp_i(&h, d->services[i].listen);
        fp_i(&h, d->services[i].dest);
    }
    for (size_t i = 0; i < d->ntargets; i++)
        fp_s(&h, d->targets[i]);
    return h;
}

/* Arm the recheck timer for the earliest retry still ahead. */
void
hz_recheck_arm(struct hz_kside *ks)
{
    int64_t now = ks->host->now_ms(ks->ctx), first = 0, next;
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
        ks->host->timer_arm(ks->recheck_timer, first > now ? first - now : 1, 0, 0);
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
    struct hz_svc_state *st = hz_state_get(&ks->states, r->key, 0);
    char ns[256];
    const char *slash = strchr(r->key, '/');
    const plb_obj *svc;
    *stp = NULL;
    if (!st || !st->uid || strcmp(st->uid, r->uid) != 0 || !slash || !ks->svc_inf)
        return NULL;
    snprintf(ns, sizeof(ns), "%.*s", (int)(slash - r->key), r->key);
    svc = ks->host->informer_get(ks->svc_inf, ns, slash + 1);
    if (!svc || !hz_ks_str(ks, svc, "metadata", "uid", NULL) ||
        strcmp(hz_ks_str(ks, svc, "metadata", "uid", NULL), r->uid) != 0)
        return NULL;
    *stp = st;
    return svc;
}

static void
rec_free(struct rec *r)
{
    hz_free_each(&r->key, &r->uid, NULL);
    hz_desired_clear(&r->d);
    hz_lb_unref(r->by_name);
    hz_lb_unref(r->by_legacy);
    hz_lb_unref(r->lb);
    hz_free(r);
}

/* The reconcile ended: remember the balancer, write the status, decide when
 * to look again. */
static void
rec_finish(struct rec *r)
{
    struct hz_kside *ks = r->ks;
    struct hz_svc_state *st = hz_state_get(&ks->states, r->key, 0);
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
            PLB_INFO(ks->host, ks->ctx, PLB_KV("service", r->key), "checked again in %lld ms",
                     (long long)wait);
        } else {
            st->fail_fp = 0;
            st->retry_at = 0;
        }
        if (!r->cancelled && !r->refused && !r->failed && !r->waiting)
            hz_refusals_clear(st);
        if (r->name_conflict)
            st->by_name = 1;
        if (r->attached)
            st->dirty = 1; /* the next pass leaves the network it asked for before */
    }
    if (!r->cancelled && r->lb && r->labelled) {
        int again = 0;
        if (!(ks->by_uid || (ks->by_uid = hz_lbs_new())) || hz_lbs_put(ks->by_uid, r->lb) < 0 ||
            !(ks->fresh || (ks->fresh = json_object())) ||
            json_object_set_new(ks->fresh, r->uid, json_integer(ks->host->now_ms(ks->ctx))) < 0)
            again = 1; /* the balancer is not remembered: looked up again */
        if ((svc = rec_svc(r, &sst))) {
            /* a balancer outside its network reaches nothing: the status
             * stays as it is */
            if (hz_lb_serves(ks, sst, &r->lb->a) && hz_status_update(ks, sst, svc, &r->lb->a) < 0)
                again = 1;
        } else if (ks->svc_inf && hz_delete_labelled(ks, r->uid) < 0) {
            /* deleted or no longer ours while its balancer was created:
             * the deletion found nothing to delete then */
            ks->lost = 1;
        }
        if (again && !r->cancelled)
            hz_kube_retry(ks, r->key);
    }
    if (st && st->dirty && !r->cancelled) {
        st->dirty = 0;
        hz_kube_sync_key(ks, st->key);
    }
    hz_recheck_arm(ks);
    rec_free(r);
}

static int
rec_call(struct rec *r, const char *method, const char *path, json_t *body, hz_result_cb cb,
         void *arg)
{
    int rc = hz_api_call(r->ks->api, r->uid, method, path, body, cb, arg);
    if (rc < 0) {
        PLB_WARN(r->ks->host, r->ks->ctx,
                 PLB_KV("service", r->key, "method", method, "path", path, "error", strerror(-rc)),
                 "the request cannot start");
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
    PLB_WARN(r->ks->host, r->ks->ctx,
             PLB_KV("service", r->key, "code", res->code ? res->code : "-", "error",
                    res->message ? res->message : "-"),
             "%s failed: status %d", what, res->status);
}

static const char *
lb_name(const struct rec *r)
{
    return r->lb ? r->lb->a.name : r->d.name;
}

/* The balancer of an answer (borrowed JSON) parsed into *out (new): 0, or
 * logged and r failed. */
static int
rec_parse(struct rec *r, const json_t *lb, struct hz_lb **out)
{
    int rc = hz_lb_parse(lb, out);
    if (rc < 0) {
        PLB_WARN(r->ks->host, r->ks->ctx, PLB_KV("service", r->key, "error", strerror(-rc)),
                 "cannot read the balancer");
        r->failed = 1;
    }
    return rc;
}

/* An action on the balancer was refused: a warning Event (hz_refusal.c). */
static void
op_refused(struct rec *r, enum hz_op_kind kind, const char *ip, const struct hz_result *res)
{
    struct hz_svc_state *st;
    const plb_obj *svc = rec_svc(r, &st);
    if (kind == HZ_OP_ATTACH_NETWORK)
        r->attach_failed = 1;
    /* after a refused attach every target is refused for that: the
     * attach's Event says why */
    if (kind == HZ_OP_ADD_TARGET && r->attach_failed && res->code &&
        strcmp(res->code, "load_balancer_not_attached_to_network") == 0)
        return;
    if (svc)
        hz_refused_op(r->ks, st, svc, &r->d, lb_name(r), kind, ip, res);
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
        struct hz_lb *lb;
        if (rec_parse(r, json_object_get(res->body, "load_balancer"), &lb) == 0) {
            hz_lb_unref(r->lb);
            r->lb = lb;
            r->labelled = lb->a.uid && strcmp(lb->a.uid, r->uid) == 0;
        }
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
        PLB_DEBUG(r->ks->host, r->ks->ctx, PLB_KV("service", r->key), "%s done", what);
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
        if (!res->err) /* Hetzner's answer, not a transport error */
            op_refused(r, o->kind, o->ip, res);
    } else {
        log_refusal(r, what, res);
        r->failed = 1;
        if (!res->err)
            op_refused(r, o->kind, o->ip, res);
    }
    if (o->kind == HZ_OP_ATTACH_NETWORK && !r->attach_failed && !r->cancelled)
        r->attached = 1;
    hz_free(o->ip);
    hz_free(o);
    if (r->refs == 0)
        rec_finish(r);
}

/* Send the writes that turn lb (a reference, stolen) into what the
 * Service asks for, then read it back. */
static void
rec_plan(struct rec *r, struct hz_lb *lb)
{
    const struct hz_actual *a = &lb->a;
    struct hz_plan p;
    char path[64];
    int rc;

    hz_lb_unref(r->lb);
    r->lb = lb;
    rc = hz_plan_build(&r->d, a, r->net_id, &p);
    r->labelled = a->uid && strcmp(a->uid, r->uid) == 0;
    if (rc < 0) {
        char id[24];
        snprintf(id, sizeof(id), "%lld", (long long)a->id);
        PLB_WARN(r->ks->host, r->ks->ctx,
                 PLB_KV("service", r->key, "balancer", id, "error", strerror(-rc)),
                 "no plan for the balancer");
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
        char id[24];
        snprintf(id, sizeof(id), "%lld", (long long)a->id);
        PLB_INFO(r->ks->host, r->ks->ctx,
                 PLB_KV("service", r->key, "balancer", id, "name", a->name, "ip", o->ip), "%s",
                 hz_op_name(o->kind));
        if (rec_call(r, p.ops[i].method, p.ops[i].path, json_incref(p.ops[i].body), op_done, o) <
            0) {
            hz_free(o->ip);
            hz_free(o);
            break;
        }
    }
    if (p.n && !r->failed) {
        snprintf(path, sizeof(path), "/load_balancers/%lld", (long long)a->id);
        rec_call(r, "GET", path, NULL, refresh_done, r);
    }
    hz_plan_clear(&p);
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
        PLB_INFO(r->ks->host, r->ks->ctx, PLB_KV("service", r->key, "name", r->d.name),
                 "dry run: the balancer is not created");
        r->waiting = 1;
    } else if (res->status == 201 && lb) {
        char id[24];
        snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(json_object_get(lb, "id")));
        struct hz_lb *made;
        PLB_INFO(r->ks->host, r->ks->ctx,
                 PLB_KV("service", r->key, "balancer", id, "name", r->d.name),
                 "created the balancer");
        if (rec_parse(r, lb, &made) == 0) {
            rec_plan(r, made);
            return;
        }
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
        if (!r->name_conflict && !res->err) {
            struct hz_svc_state *st;
            const plb_obj *svc = rec_svc(r, &st);
            if (svc)
                hz_refused_create(r->ks, st, svc, &r->d, res);
        }
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
    PLB_INFO(
        r->ks->host, r->ks->ctx,
        PLB_KV("service", r->key, "name", r->d.name, "type", r->d.type, "location", r->d.location),
        "creating the balancer with %zu target(s)", r->with_targets ? r->d.ntargets : 0);
    rec_call(r, "POST", "/load_balancers", body, create_done, r);
}

/* The network is known (or none is asked for): create, or change lb (a
 * reference, stolen). */
static void
rec_go(struct rec *r, struct hz_lb *lb)
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
    struct hz_lb *lb;  /* the balancer to change (owned), or NULL to create */
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
    struct hz_lb *lb = q->lb;
    json_t *net = json_array_get(json_object_get(res->body, "networks"), 0);
    hz_free(q);
    r->refs--;
    if (res->err == -ECANCELED) {
        r->cancelled = 1;
    } else if (res->status == 200 && json_is_integer(json_object_get(net, "id"))) {
        r->net_id = json_integer_value(json_object_get(net, "id"));
        if ((r->ks->nets || (r->ks->nets = json_object())) &&
            json_object_set_new(r->ks->nets, r->d.network, json_integer(r->net_id)) < 0)
            PLB_ERR(r->ks->host, r->ks->ctx, PLB_KV("service", r->key), "out of memory");
        rec_go(r, lb);
        return;
    } else if (res->status == 200) {
        struct hz_svc_state *st;
        const plb_obj *svc = rec_svc(r, &st);
        char msg[512];
        snprintf(msg, sizeof(msg), "the Hetzner network \"%s\" does not exist", r->d.network);
        if (svc)
            hz_warn_once(st, svc, "NetworkNotFound", msg);
        r->failed = 1;
    } else {
        log_refusal(r, "network lookup", res);
        r->failed = 1;
    }
    hz_lb_unref(lb);
    if (r->refs == 0)
        rec_finish(r);
}

/* Find d.network's id (once per daemon), then go on with lb (stolen). A
 * lookup of the name already in flight is waited for, not repeated. */
static void
rec_network(struct rec *r, struct hz_lb *lb)
{
    json_t *id = r->d.network ? json_object_get(r->ks->nets, r->d.network) : NULL;
    struct netq *q, *w = NULL;
    char *enc = NULL, *path = NULL;
    int waiting = 0;
    if (!r->d.network || id) {
        r->net_id = id ? json_integer_value(id) : 0;
        rec_go(r, lb);
        return;
    }
    for (q = r->ks->netq; q && !waiting; q = q->next)
        waiting = strcmp(q->r->d.network, r->d.network) == 0;
    if (!(w = hz_calloc(sizeof(*w))))
        goto fail;
    w->r = r;
    w->lb = lb;
    if (!waiting) {
        if (!(enc = qenc(r->d.network)) || !(path = hz_asprintf("/networks?name=%s", enc)) ||
            hz_api_call(r->ks->api, NULL, "GET", path, NULL, net_done, w) < 0)
            goto fail;
    }
    w->next = r->ks->netq;
    r->ks->netq = w;
    r->refs++;
    hz_free_each(&enc, &path, NULL);
    return;
fail:
    hz_free(w);
    hz_free_each(&enc, &path, NULL);
    hz_lb_unref(lb);
    r->failed = 1;
    rec_finish(r);
}

/* Both name lookups answered: decide whose balancer it is. */
static void
rec_decide(struct rec *r)
{
    struct hz_own_in in = {0};
    struct hz_own_out out;
    struct hz_svc_state *st;
    const plb_obj *svc;

    in.uid = r->uid;
    in.name = r->d.name;
    in.annotated = r->annotated;
    in.legacy_name = r->legacy;
    in.by_name = r->by_name ? &r->by_name->a : NULL;
    in.by_legacy = r->by_legacy ? &r->by_legacy->a : NULL;
    in.node_ips = (const char *const *)r->d.targets;
    in.nnode_ips = r->d.ntargets;
    hz_own_decide(&in, &out);
    svc = rec_svc(r, &st);
    if (svc && out.kind != HZ_OWN_WAIT)
        hz_warn_clear(st, "NoTargetNodes");
    if (svc && out.kind != HZ_OWN_BLOCKED)
        hz_warn_clear(st, "BalancerNameTaken");
    switch (out.kind) {
    case HZ_OWN_WAIT:
    case HZ_OWN_BLOCKED:
        if (svc)
            hz_warn_once(st, svc, out.kind == HZ_OWN_WAIT ? "NoTargetNodes" : "BalancerNameTaken",
                         out.warning);
        r->waiting = 1;
        rec_finish(r);
        break;
    case HZ_OWN_CREATE:
        rec_network(r, NULL);
        break;
    case HZ_OWN_MANAGE:
    case HZ_OWN_ADOPT:
        if (out.kind == HZ_OWN_ADOPT) {
            char id[24];
            snprintf(id, sizeof(id), "%lld", (long long)out.lb->id);
            PLB_INFO(r->ks->host, r->ks->ctx,
                     PLB_KV("service", r->key, "balancer", id, "name", out.lb->name),
                     "adopting the unlabelled balancer (it targets the service's nodes)");
        }
        rec_network(r, hz_lb_ref(out.lb == in.by_name ? r->by_name : r->by_legacy));
        break;
    }
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
        log_refusal(r, l->legacy ? "looking up the earlier release's name" : "name lookup", res);
        r->failed = 1;
    } else if (item) {
        struct hz_lb **slot = l->legacy ? &r->by_legacy : &r->by_name, *lb;
        if (rec_parse(r, item, &lb) == 0) {
            hz_lb_unref(*slot);
            *slot = lb;
        }
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
 * labelled ones of the resync index into *out (a new reference; NULL when
 * none is). 0, or < 0 when the item of that name is no balancer (r failed). */
static int
find_named(struct rec *r, json_t *items, const char *name, struct hz_lb **out)
{
    size_t i;
    json_t *it;
    struct hz_lb *lb;
    *out = NULL;
    json_array_foreach(items, i, it)
    {
        const char *n = json_string_value(json_object_get(it, "name"));
        if (n && strcmp(n, name) == 0)
            return rec_parse(r, it, out);
    }
    for (i = 0; (lb = hz_lbs_next(r->ks->by_uid, &i));)
        if (strcmp(lb->a.name, name) == 0) {
            *out = hz_lb_ref(lb);
            return 0;
        }
    return 0;
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
        PLB_WARN(
            ks->host, ks->ctx,
            PLB_KV("code", res->code ? res->code : "-", "error", res->message ? res->message : "-"),
            "listing unlabelled balancers failed: status %d", res->status);
    while (q) {
        struct rec *r = q;
        q = q->qnext;
        r->refs--;
        if (res->err == -ECANCELED) {
            r->cancelled = 1;
        } else if (!items) {
            r->failed = 1;
        } else {
            if (find_named(r, items, r->d.name, &r->by_name) == 0 && !r->annotated &&
                strcmp(r->legacy, r->d.name) != 0)
                find_named(r, items, r->legacy, &r->by_legacy);
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
        rc = hz_api_list(ks->api, "/load_balancers?label_selector=!" HZ_LABEL_UID, "load_balancers",
                         unlabelled_done, ks);
        if (rc < 0) {
            PLB_WARN(ks->host, ks->ctx, PLB_KV("service", r->key, "error", strerror(-rc)),
                     "cannot list unlabelled balancers");
            r->failed = 1;
            return;
        }
        ks->unl_listing = 1;
    }
    r->qnext = ks->nameq;
    ks->nameq = r;
    r->refs++;
}

/* Start a reconcile of st's Service toward d (stolen). 0 or -ENOMEM. */
static int
rec_start(struct hz_kside *ks, struct hz_svc_state *st, struct hz_desired *d, uint64_t fp,
          struct hz_lb *labelled)
{
    struct rec *r = hz_calloc(sizeof(*r));
    if (!r || !(r->key = hz_strdup(st->key)) || !(r->uid = hz_strdup(st->uid))) {
        if (r) {
            hz_free(r->key);
            hz_free(r);
        }
        hz_desired_clear(d);
        return -ENOMEM;
    }
    r->ks = ks;
    r->d = *d;
    memset(d, 0, sizeof(*d));
    r->fp = fp;
    r->annotated = st->good.balancer != NULL;
    st->busy = 1;
    if (labelled) {
        rec_network(r, hz_lb_ref(labelled));
        return 0;
    }
    /* Not labelled yet: the balancer under the name it asks for, and under
     * the earlier release's "<service>" (which a robotlb/balancer name
     * replaces). */
    hz_name_legacy(strchr(st->key, '/') + 1, r->legacy);
    if (!st->by_name)
        rec_names(r);
    else if (rec_lookup(r, r->d.name, 0) == 0 && !r->annotated && strcmp(r->legacy, r->d.name) != 0)
        rec_lookup(r, r->legacy, 1);
    if (r->refs == 0)
        rec_finish(r);
    return 0;
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
int
hz_reconcile(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc, int annot_bad)
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
    rc = h->lb_select_targets(
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
        hz_warn_once(st, svc, "TooManyTargets", err);
    } else {
        hz_warn_clear(st, "TooManyTargets");
    }
    if (t.n && !(ips = hz_calloc(t.n * sizeof(*ips)))) {
        h->lb_targets_clear(&t);
        return -ENOMEM;
    }
    for (size_t i = 0; i < t.n; i++)
        if (PLB_LB_TARGET(&t, i)->ip)
            ips[nips++] = PLB_LB_TARGET(&t, i)->ip;
    if (read_ports(ks, svc, &ports, &nports) < 0) {
        hz_free(ips);
        h->lb_targets_clear(&t);
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
    h->lb_targets_clear(&t);
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
    if (st->fail_fp == fp && h->now_ms(ks->ctx) < st->retry_at) {
        hz_desired_clear(&d);
        return 0;
    }
    return rec_start(ks, st, &d, fp, lb);
}
