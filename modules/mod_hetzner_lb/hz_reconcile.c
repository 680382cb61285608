/*
 * hz_reconcile.c: one Service's reconcile for mod_hetzner_lb, the state
 * machine of hz_rec.h (the diagram is there): find its balancer (labelled;
 * else by name or by hcloud-cloud-controller-manager's label for its UID
 * in one shared list of unlabelled balancers), adopt or
 * create it, send the plan's writes on the Service's lane, read it back
 * once, and hand what it found to the completion callback. One driver,
 * rec_run(), moves a reconcile from step to step once every call of its
 * step answered; every Hetzner answer re-enters it; hz_rec_next() (pure)
 * says which step is next. It reads the module's context (hz_kube.h) and
 * the per-Service state (hz_state.h) and calls nothing of the event side.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_kube.h"
#include "hz_rec.h"
#include "hz_refusal.h"

/* What became of the network attach of a plan. */
enum rec_attach {
    ATTACH_NONE = 0,
    ATTACH_DONE,    /* answered (not refused): sync again, leave the old one */
    ATTACH_REFUSED, /* Hetzner refused it: its targets' refusals follow from it */
};

/* One reconcile of one Service. */
struct rec {
    struct hz_kside *ks;
    enum hz_rec_step step;
    enum hz_rec_end end; /* the worst answer so far */
    int pending;         /* calls of the step not answered yet */
    char *key, *uid;
    char *group, *lane;               /* a shared group's (owned), or NULL */
    json_t *labels_set, *labels_drop; /* ... its balancer's label changes (owned) */
    int labels_read;                  /* ... the balancer read again for them */
    struct hz_desired d;
    uint64_t fp;
    int annotated; /* it names its balancer: no earlier release's name */
    int by_name;   /* START: look its names up one by one */
    char legacy[HZ_NAME_MAX + 1];
    struct hz_lb *named, *legacy_lb; /* NAMES, LOOKUP: the balancers under its
                                        names (owned) */
    struct hz_lb *hccm_lb;           /* ... and hccm's for its UID (owned) */
    struct hz_lb *lb;                /* the balancer to change (owned): labelled,
                                        decided on or created; after the plan,
                                        as read back */
    int64_t net_id;
    int with_targets; /* CREATE: the create carries the targets */
    enum rec_attach attach;
    int name_taken;              /* the create met a taken name */
    struct hz_plan plan;         /* the sync's plan (owned; empty: none) */
    const struct hz_lb *plan_lb; /* ... built on this balancer */
    int64_t plan_net;            /* ... with this network id */
    hz_rec_done_fn done;
    struct rec *qnext; /* in ks->nameq or ks->netq */
};

/* One write of a plan in flight. */
struct rop {
    struct rec *r;
    enum hz_op_kind kind;
    char *ip;
};

/* A lookup of LOOKUP in flight: its answer's first balancer goes to slot
 * (a member of r); what names it in the log. */
struct lookup {
    struct rec *r;
    struct hz_lb **slot;
    const char *what;
};

static void rec_run(struct rec *r);

/* The reconcile ends at least as e. */
static void
rec_add(struct rec *r, enum hz_rec_end e)
{
    r->end = hz_rec_worse(r->end, e);
}

/* The Service of r as the cache has it now (borrowed), with its state in
 * *stp; NULL when it is gone, no longer ours (type, class, deletion), no
 * longer tracked or recreated. */
static const plb_obj *
rec_svc(const struct rec *r, struct hz_svc_state **stp)
{
    struct hz_svc_state *st = hz_state_get(&r->ks->states, r->key, 0);
    const plb_obj *svc;
    *stp = NULL;
    if (!st || !st->uid || strcmp(st->uid, r->uid) != 0 ||
        !(svc = hz_svc_current(r->ks, r->key, r->uid)))
        return NULL;
    *stp = st;
    return svc;
}

/* Free r and what it owns (it is in no queue any more). */
static void
rec_free(struct rec *r)
{
    hz_free_each(&r->key, &r->uid, &r->group, &r->lane, NULL);
    json_decref(r->labels_set);
    json_decref(r->labels_drop);
    hz_desired_clear(&r->d);
    hz_plan_clear(&r->plan);
    hz_lb_unref(r->named);
    hz_lb_unref(r->legacy_lb);
    hz_lb_unref(r->hccm_lb);
    hz_lb_unref(r->lb);
    hz_free(r);
}

/* DONE: hand what r found to its completion callback, then free r;
 * planned: the plan step ran (its balancer is reported). */
static void
rec_end(struct rec *r, int planned)
{
    struct hz_rec_result res = {.key = r->key,
                                .uid = r->uid,
                                .group = r->group,
                                .fp = r->fp,
                                .end = r->end,
                                .by_name = r->name_taken,
                                .attached = r->attach == ATTACH_DONE,
                                .lb = planned ? r->lb : NULL};
    res.svc = rec_svc(r, &res.st);
    r->done(r->ks, &res);
    rec_free(r);
}

/* Send one request of r's step (on the Service's lane); a request that
 * cannot start is logged and rechecks the Service. 0 or -errno. */
static int
rec_call(struct rec *r, const char *method, const char *path, json_t *body, hz_result_cb cb,
         void *arg)
{
    int rc = hz_api_call(r->ks->api, r->lane ? r->lane : r->uid, method, path, body, cb, arg);
    if (rc < 0) {
        PLB_WARN(r->ks->host, r->ks->ctx,
                 PLB_KV("service", r->key, "method", method, "path", path, "error", strerror(-rc)),
                 "the request cannot start");
        rec_add(r, HZ_REC_RECHECK);
        return rc;
    }
    r->pending++;
    return 0;
}

/* Log that what (a request of r) failed with Hetzner's answer res. */
static void
log_refusal(const struct rec *r, const char *what, const struct hz_result *res)
{
    PLB_WARN(r->ks->host, r->ks->ctx,
             PLB_KV("service", r->key, "code", res->code ? res->code : "-", "error",
                    res->message ? res->message : "-"),
             "%s failed: status %d", what, res->status);
}

/* One GET of r answered res: 1 when it answered (the caller reads the
 * body); else 0 with the answer counted: cancelled, or logged as what
 * failed and r rechecks. Either way the call is no longer pending. */
static int
rec_got(struct rec *r, const char *what, const struct hz_result *res)
{
    r->pending--;
    switch (hz_rec_get_answer(res)) {
    case HZ_ANS_DONE:
        return 1;
    case HZ_ANS_CANCELLED:
        rec_add(r, HZ_REC_CANCELLED);
        break;
    default:
        log_refusal(r, what, res);
        rec_add(r, HZ_REC_RECHECK);
        break;
    }
    return 0;
}

/* The name of r's balancer for an Event: its own once known, else the
 * name it asks for (borrowed from r). */
static const char *
lb_name(const struct rec *r)
{
    return r->lb ? r->lb->a.name : r->d.name;
}

/* The balancer of an answer (borrowed JSON) parsed into *out (new): 0, or
 * logged and r rechecks. */
static int
rec_parse(struct rec *r, const json_t *lb, struct hz_lb **out)
{
    int rc = hz_lb_parse(lb, out);
    if (rc < 0) {
        PLB_WARN(r->ks->host, r->ks->ctx, PLB_KV("service", r->key, "error", strerror(-rc)),
                 "cannot read the balancer");
        rec_add(r, HZ_REC_RECHECK);
    }
    return rc;
}

/* ------------------------------------------------------------------ */
/* NAMES: one shared list of the unlabelled balancers                  */

/* The balancer named name among the unlabelled list's items and the
 * labelled ones of the resync index into *out (a new reference; NULL when
 * none is). 0, or < 0 when the item of that name is no balancer (r
 * rechecks). */
static int
find_named(struct rec *r, json_t *items, const char *name, struct hz_lb **out)
{
    const json_t *it = hz_items_named(items, name);
    *out = it ? NULL : hz_lb_ref(hz_lbs_named(r->ks->by_uid, name));
    return it ? rec_parse(r, it, out) : 0;
}

/* The balancer among the unlabelled list's items that hccm labelled for
 * r's UID (the lowest id when several) into *out (new; NULL when none). 0,
 * or < 0 when that item is no balancer (r rechecks). */
static int
find_hccm(struct rec *r, json_t *items, struct hz_lb **out)
{
    const json_t *it = hz_items_hccm(items, r->uid);
    *out = NULL;
    return it ? rec_parse(r, it, out) : 0;
}

/* The unlabelled list answered: every waiting reconcile finds its names and
 * hccm's balancer for its UID in it (or its names among the labelled
 * balancers) and moves on. */
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
        r->pending--;
        if (res->err == -ECANCELED)
            rec_add(r, HZ_REC_CANCELLED);
        else if (!items)
            rec_add(r, HZ_REC_RECHECK);
        else if (find_hccm(r, items, &r->hccm_lb) == 0 &&
                 find_named(r, items, r->d.name, &r->named) == 0 && !r->annotated &&
                 strcmp(r->legacy, r->d.name) != 0)
            find_named(r, items, r->legacy, &r->legacy_lb);
        rec_run(r);
    }
}

/* Wait for the names of r in ONE paginated list of the unlabelled
 * balancers, shared by every Service that needs a lookup now (the labelled
 * ones are in the resync index): a few requests instead of two per
 * Service. */
static void
step_names(struct rec *r)
{
    struct hz_kside *ks = r->ks;
    int rc;
    if (!ks->unl_listing) {
        rc = hz_api_list(ks->api, "/load_balancers?label_selector=!" HZ_LABEL_UID, "load_balancers",
                         unlabelled_done, ks);
        if (rc < 0) {
            PLB_WARN(ks->host, ks->ctx, PLB_KV("service", r->key, "error", strerror(-rc)),
                     "cannot list unlabelled balancers");
            rec_add(r, HZ_REC_RECHECK);
            return;
        }
        ks->unl_listing = 1;
    }
    r->qnext = ks->nameq;
    ks->nameq = r;
    r->pending++;
}

/* ------------------------------------------------------------------ */
/* LOOKUP: its names one by one                                         */

/* The answer to one lookup's GET (arg: its struct lookup, freed here): the
 * first balancer it lists, if any, kept for DECIDE. */
static void
lookup_done(void *arg, const struct hz_result *res)
{
    struct lookup *l = arg;
    struct rec *r = l->r;
    json_t *item = json_array_get(json_object_get(res->body, "load_balancers"), 0);
    struct hz_lb *lb;
    if (rec_got(r, l->what, res) && item && rec_parse(r, item, &lb) == 0) {
        hz_lb_unref(*l->slot);
        *l->slot = lb;
    }
    hz_free(l);
    rec_run(r);
}

/* GET /load_balancers?KEY=VALUE (value percent-encoded; sorted by id, so
 * the first is the lowest), its first balancer into slot. 0 or -errno (r
 * rechecks). */
static int
rec_lookup(struct rec *r, const char *key, const char *value, struct hz_lb **slot, const char *what)
{
    struct lookup *l = hz_calloc(sizeof(*l));
    char *enc = hz_qenc(value);
    char *path = enc ? hz_asprintf("/load_balancers?%s=%s&sort=id:asc", key, enc) : NULL;
    int rc = -ENOMEM;
    hz_free(enc);
    if (l && path) {
        *l = (struct lookup){.r = r, .slot = slot, .what = what};
        if ((rc = rec_call(r, "GET", path, NULL, lookup_done, l)) == 0)
            l = NULL;
    } else {
        rec_add(r, HZ_REC_RECHECK);
    }
    hz_free(l);
    hz_free(path);
    return rc;
}

/* LOOKUP: GET hccm's balancer for its UID, its name, and the earlier
 * release's name when it has one. */
static void
step_lookup(struct rec *r)
{
    char sel[HZ_NAME_MAX + 64];
    snprintf(sel, sizeof(sel), "%s=%s,!%s", HZ_LABEL_HCCM_UID, r->uid, HZ_LABEL_UID);
    if (rec_lookup(r, "label_selector", sel, &r->hccm_lb, "looking up hccm's balancer") == 0 &&
        rec_lookup(r, "name", r->d.name, &r->named, "name lookup") == 0 && !r->annotated &&
        strcmp(r->legacy, r->d.name) != 0)
        rec_lookup(r, "name", r->legacy, &r->legacy_lb, "looking up the earlier release's name");
}

/* ------------------------------------------------------------------ */
/* DECIDE: whose balancer it is                                         */

/* DECIDE (pure hz_own_decide on what NAMES or LOOKUP found): the balancer
 * to change in r->lb, none to create one, or WAIT with the Service warned
 * (no target node; the name taken by another's balancer). */
static void
step_decide(struct rec *r)
{
    struct hz_own_in in = {0};
    struct hz_own_out out;
    struct hz_svc_state *st;
    const plb_obj *svc;

    in.uid = r->uid;
    in.name = r->d.name;
    in.annotated = r->annotated;
    in.legacy_name = r->legacy;
    in.by_name = r->named ? &r->named->a : NULL;
    in.by_legacy = r->legacy_lb ? &r->legacy_lb->a : NULL;
    in.by_hccm = r->hccm_lb ? &r->hccm_lb->a : NULL;
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
            (void)hz_warn_once(st, svc,
                               out.kind == HZ_OWN_WAIT ? "NoTargetNodes" : "BalancerNameTaken",
                               out.warning);
        rec_add(r, HZ_REC_WAIT);
        break;
    case HZ_OWN_CREATE:
        break; /* no balancer: NETWORK, then CREATE */
    case HZ_OWN_MANAGE:
    case HZ_OWN_ADOPT:
        if (out.kind == HZ_OWN_ADOPT) {
            char id[24];
            snprintf(id, sizeof(id), "%lld", (long long)out.lb->id);
            PLB_INFO(r->ks->host, r->ks->ctx,
                     PLB_KV("service", r->key, "balancer", id, "name", out.lb->name),
                     out.lb == in.by_hccm
                         ? "taking over hcloud-cloud-controller-manager's balancer (labelled "
                           "with the service's UID; its name and IPs are kept)"
                         : "adopting the unlabelled balancer (it targets the service's nodes)");
        }
        r->lb = hz_lb_ref(out.lb == in.by_name   ? r->named
                          : out.lb == in.by_hccm ? r->hccm_lb
                                                 : r->legacy_lb);
        break;
    }
}

/* ------------------------------------------------------------------ */
/* CERTS: the IDs of the certificates it names                          */

/* A warning of the certificates' step for r's Service. */
static void
cert_warn(void *arg, const char *reason, const char *msg)
{
    struct hz_svc_state *st;
    const plb_obj *svc = rec_svc(arg, &st);
    if (svc)
        (void)hz_warn_once(st, svc, reason, msg);
}

/* The certificates' step of r ended as end. */
static void
cert_found(void *arg, enum hz_rec_end end)
{
    struct rec *r = arg;
    r->pending--;
    rec_add(r, end);
    rec_run(r);
}

/* Find the IDs of the certificates r names without them (hz_cert_io.c:
 * looked up, the managed one made or its issuance retried); the sync's
 * plan, built without them, is dropped. */
static void
step_certs(struct rec *r)
{
    hz_plan_clear(&r->plan);
    if (hz_cert_find(r->ks, r->uid, r->d.https, r->d.nhttps, cert_warn, cert_found, r) < 0)
        rec_add(r, HZ_REC_RECHECK);
    else
        r->pending++;
}

/* ------------------------------------------------------------------ */
/* NETWORK: its id, one lookup per name for every reconcile waiting     */

/* The network lookup for r found net (borrowed; NULL: none): its id
 * (kept for every later reconcile), or r rechecks with the Service warned
 * that the network does not exist. */
static void
net_read(struct rec *r, const json_t *net)
{
    struct hz_svc_state *st;
    const plb_obj *svc;
    char msg[512];
    if (json_is_integer(json_object_get(net, "id"))) {
        r->net_id = json_integer_value(json_object_get(net, "id"));
        if ((r->ks->nets || (r->ks->nets = json_object())) &&
            json_object_set_new(r->ks->nets, r->d.network, json_integer(r->net_id)) < 0)
            PLB_ERR(r->ks->host, r->ks->ctx, PLB_KV("service", r->key), "out of memory");
        return;
    }
    svc = rec_svc(r, &st);
    snprintf(msg, sizeof(msg), "the Hetzner network \"%s\" does not exist", r->d.network);
    if (svc)
        (void)hz_warn_once(st, svc, "NetworkNotFound", msg);
    rec_add(r, HZ_REC_RECHECK);
}

/* The network lookup answered res for r: its id, or r rechecks. */
static void
net_one(struct rec *r, const struct hz_result *res)
{
    if (rec_got(r, "network lookup", res))
        net_read(r, json_array_get(json_object_get(res->body, "networks"), 0));
    rec_run(r);
}

/* The lookup of lead's network answered: lead and every reconcile waiting
 * for the same name move on. */
static void
net_done(void *arg, const struct hz_result *res)
{
    struct rec *lead = arg;
    struct hz_kside *ks = lead->ks;
    char *name = hz_strdup(lead->d.network);
    struct rec *mine = NULL, **pp = &ks->netq;
    /* take the waiters for this name off the list first: the steps that
     * follow may start other lookups */
    while (*pp) {
        struct rec *q = *pp;
        if (q != lead && name && strcmp(q->d.network, name) == 0) {
            *pp = q->qnext;
            q->qnext = mine;
            mine = q;
        } else if (q == lead) {
            *pp = q->qnext;
        } else {
            pp = &q->qnext;
        }
    }
    hz_free(name);
    net_one(lead, res);
    while (mine) {
        struct rec *q = mine;
        mine = q->qnext;
        net_one(q, res);
    }
}

/* Find d.network's id (once per daemon); a lookup of the name already in
 * flight is waited for, not repeated. */
static void
step_network(struct rec *r)
{
    struct hz_kside *ks = r->ks;
    json_t *id = r->d.network ? json_object_get(ks->nets, r->d.network) : NULL;
    char *enc = NULL, *path = NULL;
    int waiting = 0;
    if (!r->d.network || id) {
        r->net_id = id ? json_integer_value(id) : 0;
        return;
    }
    for (const struct rec *q = ks->netq; q && !waiting; q = q->qnext)
        waiting = strcmp(q->d.network, r->d.network) == 0;
    if (!waiting &&
        (!(enc = hz_qenc(r->d.network)) || !(path = hz_asprintf("/networks?name=%s", enc)) ||
         hz_api_call(ks->api, NULL, "GET", path, NULL, net_done, r) < 0)) {
        rec_add(r, HZ_REC_RECHECK);
        goto out;
    }
    r->qnext = ks->netq;
    ks->netq = r;
    r->pending++;
out:
    hz_free_each(&enc, &path, NULL);
}

/* ------------------------------------------------------------------ */
/* CREATE                                                               */

/* A group's create met its name taken by a balancer without its group
 * label (none is in the group list): a warning on its oldest member; the
 * balancer is left alone, and the group waits for the next resync. */
static void
group_name_taken(struct rec *r)
{
    struct hz_svc_state *st;
    const plb_obj *svc = rec_svc(r, &st);
    char msg[512];
    hz_group_name_taken(r->d.name, r->group, msg, sizeof(msg));
    if (svc)
        (void)hz_warn_once(st, svc, "BalancerNameTaken", msg);
    rec_add(r, HZ_REC_WAIT);
}

/* The create answered (arg: r): the balancer made, once more without
 * targets, or how it ends (a refusal warns the Service). */
static void
create_done(void *arg, const struct hz_result *res)
{
    struct rec *r = arg;
    json_t *lb = json_object_get(res->body, "load_balancer");
    enum hz_rec_answer a = hz_rec_create_answer(res, r->with_targets);
    struct hz_svc_state *st;
    const plb_obj *svc;
    char id[24];

    r->pending--;
    rec_add(r, hz_rec_answer_end(a));
    switch (a) {
    case HZ_ANS_CANCELLED:
        break;
    case HZ_ANS_DRY_RUN:
        PLB_INFO(r->ks->host, r->ks->ctx, PLB_KV("service", r->key, "name", r->d.name),
                 "dry run: the balancer is not created");
        break;
    case HZ_ANS_DONE:
        snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(json_object_get(lb, "id")));
        PLB_INFO(r->ks->host, r->ks->ctx,
                 PLB_KV("service", r->key, "balancer", id, "name", r->d.name),
                 "created the balancer");
        (void)rec_parse(r, lb, &r->lb);
        break;
    case HZ_ANS_WITHOUT_TARGETS:
        /* A target Hetzner refuses fails the whole create: create without
         * targets and add them one by one, so that the others stay. */
        log_refusal(r, "create with targets", res);
        r->with_targets = 0;
        break;
    default:
        log_refusal(r, "create", res);
        if (r->group && a == HZ_ANS_NAME_TAKEN) {
            group_name_taken(r);
            break;
        }
        r->name_taken = a == HZ_ANS_NAME_TAKEN;
        if (a == HZ_ANS_REFUSED && (svc = rec_svc(r, &st)))
            hz_refused_create(r->ks, st, svc, &r->d, res);
        break;
    }
    rec_run(r);
}

/* POST the balancer r asks for; first: the first try (with its targets
 * when it has a network and no private IP to attach first). */
static void
step_create(struct rec *r, int first)
{
    json_t *body;
    if (first)
        r->with_targets =
            r->net_id > 0 && !r->d.private_ip && !r->d.private_subnet && r->d.ntargets > 0;
    body = r->group ? hz_group_create_body(&r->d, r->labels_set, r->net_id, r->with_targets)
                    : hz_create_body(&r->d, r->net_id, r->with_targets);
    if (!body) {
        rec_add(r, HZ_REC_RECHECK);
        return;
    }
    PLB_INFO(
        r->ks->host, r->ks->ctx,
        PLB_KV("service", r->key, "name", r->d.name, "type", r->d.type, "location", r->d.location),
        "creating the balancer with %zu target(s)", r->with_targets ? r->d.ntargets : 0);
    rec_call(r, "POST", "/load_balancers", body, create_done, r);
}

/* ------------------------------------------------------------------ */
/* PLAN: the writes, then one read-back                                 */

/* An action on the balancer was refused: a warning Event (hz_refusal.c). */
static void
op_refused(struct rec *r, enum hz_op_kind kind, const char *ip, const struct hz_result *res)
{
    struct hz_svc_state *st;
    const plb_obj *svc = rec_svc(r, &st);
    if (kind == HZ_OP_ATTACH_NETWORK)
        r->attach = ATTACH_REFUSED;
    /* after a refused attach every target is refused for that: the
     * attach's Event says why */
    if (kind == HZ_OP_ADD_TARGET && r->attach == ATTACH_REFUSED && res->code &&
        strcmp(res->code, "load_balancer_not_attached_to_network") == 0)
        return;
    if (svc)
        hz_refused_op(r->ks, st, svc, &r->d, lb_name(r), kind, ip, res);
}

/* One write of the plan answered (arg: its struct rop, freed here). */
static void
op_done(void *arg, const struct hz_result *res)
{
    struct rop *o = arg;
    struct rec *r = o->r;
    enum hz_rec_answer a = hz_rec_op_answer(o->kind, res);
    char what[128];
    r->pending--;
    snprintf(what, sizeof(what), "%s%s%s", hz_op_name(o->kind), o->ip ? " " : "",
             o->ip ? o->ip : "");
    rec_add(r, hz_rec_answer_end(a));
    switch (a) {
    case HZ_ANS_DONE:
    case HZ_ANS_DRY_RUN:
        /* a dry run changes nothing: logged again at the next resync (WAIT),
         * not on every sync */
        PLB_DEBUG(r->ks->host, r->ks->ctx, PLB_KV("service", r->key), "%s done", what);
        break;
    case HZ_ANS_REFUSED:
    case HZ_ANS_FAILED:
        log_refusal(r, what, res);
        if (a == HZ_ANS_REFUSED) /* Hetzner's answer, not a transport error */
            op_refused(r, o->kind, o->ip, res);
        break;
    default:
        break; /* cancelled, or already as wanted */
    }
    if (o->kind == HZ_OP_ATTACH_NETWORK && r->attach != ATTACH_REFUSED &&
        r->end != HZ_REC_CANCELLED)
        r->attach = ATTACH_DONE;
    hz_free(o->ip);
    hz_free(o);
    rec_run(r);
}

/* The read-back of the balancer after the writes. */
static void
refresh_done(void *arg, const struct hz_result *res)
{
    struct rec *r = arg;
    json_t *body = json_object_get(res->body, "load_balancer");
    enum hz_rec_answer a = hz_rec_get_answer(res);
    struct hz_lb *lb;
    r->pending--;
    if (a == HZ_ANS_CANCELLED) {
        rec_add(r, HZ_REC_CANCELLED);
    } else if (a == HZ_ANS_DONE && body) {
        if (rec_parse(r, body, &lb) == 0) {
            hz_lb_unref(r->lb);
            r->lb = lb;
        }
    } else if (!res->dry_run) {
        log_refusal(r, "reading the balancer back", res);
        rec_add(r, HZ_REC_RECHECK);
    }
    rec_run(r);
}

static void step_plan(struct rec *r);

/* A group's balancer read again before its labels are written: the plan
 * is built on it, so the write keeps a label another wrote since. */
static void
labels_read_done(void *arg, const struct hz_result *res)
{
    struct rec *r = arg;
    json_t *body = json_object_get(res->body, "load_balancer");
    struct hz_lb *lb;
    if (rec_got(r, "reading the shared balancer", res) && body && rec_parse(r, body, &lb) == 0) {
        hz_lb_unref(r->lb);
        r->lb = lb;
        if (r->end == HZ_REC_OK)
            step_plan(r);
    } else if (r->end == HZ_REC_OK) {
        rec_add(r, HZ_REC_RECHECK);
    }
    rec_run(r);
}

/* 1 when r is a group's reconcile whose label write is due and whose
 * balancer was not read again for it yet: read now (0 when that cannot
 * start: r rechecks). */
static int
labels_read(struct rec *r)
{
    char path[64];
    int change = r->group && !r->labels_read
                     ? hz_group_labels_change(r->lb->a.labels, r->labels_set, r->labels_drop)
                     : 0;
    if (change <= 0) {
        if (change < 0)
            rec_add(r, HZ_REC_RECHECK);
        return change < 0;
    }
    r->labels_read = 1;
    snprintf(path, sizeof(path), "/load_balancers/%lld", (long long)r->lb->a.id);
    rec_call(r, "GET", path, NULL, labels_read_done, r);
    return 1;
}

/* Send the writes that turn r->lb into what the Service asks for (the
 * sync's plan when it was built on this balancer and network, else built
 * here), then read it back. */
static void
step_plan(struct rec *r)
{
    if (labels_read(r))
        return;
    const struct hz_actual *a = &r->lb->a;
    struct hz_plan p = r->plan;
    char path[64], id[24];
    int rc;

    snprintf(id, sizeof(id), "%lld", (long long)a->id);
    r->plan = (struct hz_plan){0};
    if (!p.n || r->plan_lb != r->lb || r->plan_net != r->net_id) {
        hz_plan_clear(&p);
        if ((rc = hz_plan_build(&r->d, a, r->net_id, &p)) < 0 ||
            (r->group && (rc = hz_plan_labels(r->labels_set, r->labels_drop, a, &p)) < 0)) {
            hz_plan_clear(&p);
            PLB_WARN(r->ks->host, r->ks->ctx,
                     PLB_KV("service", r->key, "balancer", id, "error", strerror(-rc)),
                     "no plan for the balancer");
            rec_add(r, HZ_REC_RECHECK);
            return;
        }
    }
    for (size_t i = 0; i < p.n; i++) {
        struct rop *o = hz_calloc(sizeof(*o));
        if (!o || (p.ops[i].target_ip && !(o->ip = hz_strdup(p.ops[i].target_ip)))) {
            hz_free(o);
            rec_add(r, HZ_REC_RECHECK);
            break;
        }
        o->r = r;
        o->kind = p.ops[i].kind;
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
    if (p.n && r->end == HZ_REC_OK) {
        snprintf(path, sizeof(path), "/load_balancers/%lld", (long long)a->id);
        rec_call(r, "GET", path, NULL, refresh_done, r);
    }
    hz_plan_clear(&p);
}

/* ------------------------------------------------------------------ */
/* The driver                                                           */

/* Move r on while its step has no call in flight: the next step (pure:
 * hz_rec_next) and its action, which starts calls or decides at once. At
 * DONE r is handed to its completion callback and freed. */
static void
rec_run(struct rec *r)
{
    while (r->pending == 0) {
        size_t pos = 0;
        struct hz_rec_view v = {
            .step = r->step,
            .end = r->end,
            .have_lb = r->lb != NULL,
            .by_name = r->by_name,
            .group = r->group != NULL,
            .certs = hz_cert_next_unknown(r->d.https, r->d.nhttps, &pos, NULL) != NULL};
        enum hz_rec_step prev = r->step;
        r->step = hz_rec_next(&v);
        PLB_DEBUG(r->ks->host, r->ks->ctx,
                  PLB_KV("service", r->key, "from", hz_rec_step_name(prev), "to",
                         hz_rec_step_name(r->step)),
                  "reconcile step");
        switch (r->step) {
        case HZ_REC_START:
            break; /* never a next step */
        case HZ_REC_CERTS:
            step_certs(r);
            break;
        case HZ_REC_NAMES:
            step_names(r);
            break;
        case HZ_REC_LOOKUP:
            step_lookup(r);
            break;
        case HZ_REC_DECIDE:
            step_decide(r);
            break;
        case HZ_REC_NETWORK:
            step_network(r);
            break;
        case HZ_REC_CREATE:
            step_create(r, prev != HZ_REC_CREATE);
            break;
        case HZ_REC_PLAN:
            step_plan(r);
            break;
        case HZ_REC_DONE:
            rec_end(r, prev == HZ_REC_PLAN);
            return;
        }
    }
}

int
hz_rec_start(struct hz_kside *ks, const struct hz_rec_req *req)
{
    struct rec *r = hz_calloc(sizeof(*r));
    if (!r || !(r->key = hz_strdup(req->key)) || !(r->uid = hz_strdup(req->uid)) ||
        (req->group && (!(r->group = hz_strdup(req->group)) ||
                        !(r->lane = hz_asprintf("group/%s", req->group))))) {
        if (r)
            hz_free_each(&r->key, &r->uid, &r->group, &r->lane, NULL);
        hz_free(r);
        json_decref(req->labels_set);
        json_decref(req->labels_drop);
        hz_desired_clear(req->d);
        if (req->plan)
            hz_plan_clear(req->plan);
        return -ENOMEM;
    }
    r->ks = ks;
    r->step = HZ_REC_START;
    r->d = *req->d;
    memset(req->d, 0, sizeof(*req->d));
    r->fp = req->fp;
    r->annotated = req->annotated;
    r->by_name = req->by_name;
    r->done = req->done;
    r->lb = hz_lb_ref(req->labelled);
    r->labels_set = req->labels_set;
    r->labels_drop = req->labels_drop;
    if (req->plan) {
        r->plan = *req->plan;
        *req->plan = (struct hz_plan){0};
        r->plan_lb = req->labelled;
        r->plan_net = req->plan_net;
    }
    /* Not labelled yet: the balancer under the name it asks for, and under
     * the earlier release's "<service>" (which a robotlb/balancer name
     * replaces). */
    if (!r->lb)
        hz_name_legacy(strchr(r->key, '/') + 1, r->legacy);
    rec_run(r);
    return 0;
}
