/*
 * hz_group_sync.c: shared balancers on the event side (hz_group.h). A
 * group (prismlb.io/shared-balancer: <group>) is reconciled as one unit:
 * the sync of any of its members, or of a Service whose member label its
 * balancer carries, marks the group, and each marked group is reconciled
 * once at the end of the sync round, at most one reconcile of a group at
 * a time (ks->groups), on the group's own lane.
 *
 *   find      the group's balancer by its group label only, from the list
 *             of every group balancer (hz_group_list.c); never by name,
 *             never from memory alone
 *   members   ours, annotated with the group, not being deleted, holding
 *             the finalizer (added first, so that a deletion waits for
 *             the member's services and label to go)
 *   desired   hz_group.c: oldest first, clashes, union, labels
 *   end       the members' statuses follow the balancer read back; the
 *             Services that left lose the finalizer once no group balancer
 *             carries their label
 *   last one  no member left: the labels of those that left go first, then
 *             the balancer is read again and deleted only when it shows no
 *             member label and no delete protection
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_group.h"
#include "hz_rec.h"
#include "hz_refusal.h"

/* The values of ks->groups: what runs of a group. */
#define G_RUNNING 1 /* a reconcile or the last member's removal */
#define G_AGAIN 2   /* ... and a sync wanted it meanwhile */

/* One member candidate as the cache has it. */
struct cand {
    const plb_obj *svc; /* borrowed for the sync */
    struct hz_svc_state *st;
};

/* A group's members as one sync collects them. */
struct coll {
    struct hz_kside *ks;
    const char *group;
    struct hz_member *m;
    struct cand *c;
    size_t n, cap;
    json_t *labelled; /* UIDs of its balancer's member labels -> 0 unknown
                         or another daemon's, 1 a Service of ours that is
                         no member, 2 a member */
    int unsynced;     /* a member's annotations are not read yet */
    int err;
};

/* The last member's removal in flight. */
struct gdrop {
    struct hz_kside *ks;
    char *group, *lane;
    plb_obj *svc; /* a Service that left, for an Event (owned reference) */
    char *key;    /* ... its key */
    json_t *drop; /* the member label keys of those that left (owned) */
    int64_t id;
};

/* What runs of group (G_ flags). */
static int
g_flags(const struct hz_kside *ks, const char *group)
{
    return (int)json_integer_value(json_object_get(ks->groups, group));
}

/* Set group's flags (0: forget it). 0 or -ENOMEM. */
static int
g_set(struct hz_kside *ks, const char *group, int flags)
{
    if (!flags) {
        json_object_del(ks->groups, group);
        return 0;
    }
    if (!ks->groups && !(ks->groups = json_object()))
        return -ENOMEM;
    return json_object_set_new(ks->groups, group, json_integer(flags)) < 0 ? -ENOMEM : 0;
}

/* A group's reconcile or removal ended: the next one may run, and its
 * Services (members, and those holding the finalizer) are synced again:
 * their statuses follow, finalizers go. */
static void
g_ended(struct hz_kside *ks, const char *group)
{
    (void)g_set(ks, group, 0);
    hz_group_queue(ks);
    hz_work_recheck(ks);
}

/* ------------------------------------------------------------------ */
/* Members                                                              */

/* plb_informer_foreach's callback: Service svc into the collection when
 * it is a member of c->group; a UID of the balancer's member labels is
 * marked as existing (1) or a member (2). */
static void
collect(const plb_obj *svc, void *arg)
{
    struct coll *c = arg;
    struct hz_kside *ks = c->ks;
    const char *uid = hz_ks_str(ks, svc, "metadata", "uid", NULL);
    const char *ns = hz_ks_str(ks, svc, "metadata", "namespace", NULL);
    const char *name = hz_ks_str(ks, svc, "metadata", "name", NULL);
    const char *g = hz_group_of(ks, svc);
    struct hz_svc_state *st;
    char key[512];
    int member;

    if (c->err || !uid || !ns || !name)
        return;
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    st = hz_state_get(&ks->states, key, 0);
    member = g && strcmp(g, c->group) == 0 && hz_kube_is_ours(ks, svc) &&
             !ks->host->obj->get(svc, "metadata", "deletionTimestamp", NULL) &&
             hz_has_finalizer(ks, svc, HZ_GROUP_FINALIZER);
    /* A label of a Service served by another daemon (another
     * loadBalancerClass, no finalizer of ours) is not ours to remove. */
    if (json_object_get(c->labelled, uid) &&
        (member || hz_has_finalizer(ks, svc, HZ_GROUP_FINALIZER) ||
         hz_class_served(ks->cfg->load_balancer_class,
                         hz_ks_str(ks, svc, "spec", "loadBalancerClass", NULL))) &&
        json_object_set_new(c->labelled, uid, json_integer(member ? 2 : 1)) < 0)
        c->err = -ENOMEM;
    if (member && (!st || !st->uid || strcmp(st->uid, uid) != 0)) {
        /* not synced since the start: its annotations are not read yet,
         * so the group waits for its sync (which reconciles the group) */
        c->unsynced = 1;
        hz_work_add(ks, key);
        return;
    }
    /* a member whose annotations never checked out adds nothing (and
     * keeps its label) */
    if (!member || !hz_state_good(st) || c->err)
        return;
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 8;
        struct hz_member *nm = hz_realloc(c->m, nc * sizeof(*nm));
        struct cand *ncand = nm ? hz_realloc(c->c, nc * sizeof(*ncand)) : NULL;
        if (nm)
            c->m = nm;
        if (!ncand) {
            c->err = -ENOMEM;
            return;
        }
        c->c = ncand;
        c->cap = nc;
    }
    c->m[c->n] = (struct hz_member){
        .key = st->key,
        .uid = st->uid,
        .name = name,
        .created = hz_ks_str(ks, svc, "metadata", "creationTimestamp", NULL),
    };
    c->c[c->n] = (struct cand){.svc = svc, .st = st};
    c->n++;
}

/* hz_group_gone_fn over c->labelled: the Service exists and is no
 * member. */
static int
gone(void *arg, const char *uid)
{
    const struct coll *c = arg;
    return json_integer_value(json_object_get(c->labelled, uid)) == 1;
}

/* The candidate of member m (sorted away from c->c's order). */
static const struct cand *
cand_of(const struct coll *c, const struct hz_member *m)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->c[i].st->key == m->key)
            return &c->c[i];
    return NULL;
}

/* Free what c holds; the members' desired balancers ds (n of them). */
static void
coll_free(struct coll *c, struct hz_desired *ds)
{
    for (size_t i = 0; ds && i < c->n; i++)
        hz_desired_clear(&ds[i]);
    hz_free(ds);
    hz_free(c->m);
    hz_free(c->c);
    json_decref(c->labelled);
}

static int group_sync(struct hz_kside *ks, const char *group);

/* Reconcile group at the end of this sync round, once however many of its
 * Services were synced in it (key: one of them, synced again when the
 * group cannot be decided). 0 or -ENOMEM. */
static int
dirty(struct hz_kside *ks, const char *group, const char *key)
{
    if (!ks->dirty && !(ks->dirty = json_object()))
        return -ENOMEM;
    return json_object_set_new(ks->dirty, group, json_string(key)) < 0 ? -ENOMEM : 0;
}

void
hz_group_round_end(struct hz_kside *ks)
{
    json_t *d = ks->dirty, *key;
    const char *g;
    ks->dirty = NULL;
    /* every member's annotations of the round are read now: each group
     * is decided once, on the same cache */
    json_object_foreach(d, g, key)
    {
        if (group_sync(ks, g) < 0)
            hz_work_retry(ks, json_string_value(key));
    }
    json_decref(d);
    hz_gidx_free(ks->gidx);
    ks->gidx = NULL;
}

/* Collect group's members (oldest first) and the UIDs of lb's member
 * labels into *c: the Services annotated with the group and those whose
 * UID a member label names, from the round's index. 0 or -ENOMEM. */
static int
members(struct hz_kside *ks, const char *group, const struct hz_lb *lb, struct coll *c)
{
    struct hz_gidx *x = hz_gidx_get(ks);
    const char *k;
    json_t *v;
    size_t i;
    *c = (struct coll){.ks = ks, .group = group};
    if (!x || !(c->labelled = json_object()))
        return -ENOMEM;
    json_object_foreach(lb ? lb->a.labels : NULL, k, v)
    {
        const char *uid = hz_group_label_uid(k);
        (void)v;
        if (uid && json_object_set_new(c->labelled, uid, json_integer(0)) < 0)
            return -ENOMEM;
    }
    json_array_foreach(json_object_get(x->groups, group), i, v)
        collect(x->svcs[json_integer_value(v)], c);
    json_object_foreach(c->labelled, k, v)
    {
        json_t *at = json_object_get(x->uids, k);
        const plb_obj *svc = at ? x->svcs[json_integer_value(at)] : NULL;
        const char *g = svc ? hz_group_of(ks, svc) : NULL;
        if (svc && (!g || strcmp(g, group) != 0)) /* the group's were collected */
            collect(svc, c);
    }
    if (c->err)
        return c->err;
    hz_group_sort(c->m, c->n);
    return 0;
}

/* Warn each member of c (sorted, clashes decided) whose port clashes or
 * whose balancer-level settings differ from the oldest's; clear those
 * warnings of the others. */
static void
member_warnings(struct coll *c, const struct hz_member *oldest)
{
    char msg[1024], diff[512];
    for (size_t i = 0; i < c->n; i++) {
        const struct hz_member *m = &c->m[i];
        const struct cand *x = cand_of(c, m);
        if (!x)
            continue;
        if (m->clash_port) {
            snprintf(msg, sizeof(msg),
                     "port %d is already served by Service %s of shared group \"%s\": this "
                     "Service adds none of its ports and gets no status until the clash is gone",
                     m->clash_port, m->clash_with, c->group);
            (void)hz_warn_once(x->st, x->svc, "SharedPortInUse", msg);
        } else {
            hz_warn_clear(x->st, "SharedPortInUse");
        }
        diff[0] = '\0';
        if (m->d && !m->clash_port && oldest && m != oldest)
            hz_group_differs(oldest->d, m->d, diff, sizeof(diff));
        if (diff[0]) {
            snprintf(msg, sizeof(msg),
                     "the balancer of shared group \"%s\" takes its own settings from its "
                     "oldest member %s; this Service's differ and are not applied: %s",
                     c->group, oldest->key, diff);
            (void)hz_warn_once(x->st, x->svc, "SharedSettingsIgnored", msg);
        } else {
            hz_warn_clear(x->st, "SharedSettingsIgnored");
        }
    }
}

/* ------------------------------------------------------------------ */
/* The last member's removal                                            */

static void
gdrop_free(struct gdrop *x)
{
    x->ks->host->obj->unref(x->svc);
    json_decref(x->drop);
    hz_free_each(&x->group, &x->lane, &x->key, NULL);
    hz_free(x);
}

/* The removal ended (x freed). */
static void
gdrop_end(struct gdrop *x)
{
    struct hz_kside *ks = x->ks;
    char *group = x->group;
    x->group = NULL;
    gdrop_free(x);
    g_ended(ks, group);
    hz_free(group);
}

/* Log that step what of x's removal failed with res. */
static void
gdrop_failed(const struct gdrop *x, const char *what, const struct hz_result *res)
{
    if (res->err == -ECANCELED)
        return;
    PLB_WARN(x->ks->host, x->ks->ctx,
             PLB_KV("group", x->group, "code", res->code ? res->code : "-", "error",
                    res->message ? res->message : "-"),
             "shared balancer: %s failed: status %d", what, res->status);
}

/* The DELETE answered. */
static void
gdrop_deleted(void *arg, const struct hz_result *res)
{
    struct gdrop *x = arg;
    char id[24];
    snprintf(id, sizeof(id), "%" PRId64, x->id);
    if (res->dry_run || (res->status >= 200 && res->status < 300) || res->status == 404) {
        PLB_INFO(x->ks->host, x->ks->ctx, PLB_KV("group", x->group, "balancer", id),
                 "deleted the shared balancer with its last member%s",
                 res->dry_run ? " (dry run)" : "");
        if (!res->dry_run)
            hz_lbs_del(x->ks->by_group, x->group);
    } else {
        gdrop_failed(x, "deleting the balancer", res);
    }
    gdrop_end(x);
}

/* The balancer read again after its last member's label went: deleted
 * only when it shows no member label (one put there by another, say by
 * hand, keeps it) and no delete protection (a DeleteProtected warning). */
static void
gdrop_read(void *arg, const struct hz_result *res)
{
    struct gdrop *x = arg;
    struct hz_kside *ks = x->ks;
    json_t *body = json_object_get(res->body, "load_balancer");
    struct hz_lb *lb = NULL;
    char path[64], msg[768], id[24];
    snprintf(id, sizeof(id), "%" PRId64, x->id);
    if (res->status == 404) {
        hz_lbs_del(ks->by_group, x->group);
        gdrop_end(x);
        return;
    }
    if (res->status != 200 || !body || hz_lb_parse(body, &lb) < 0) {
        gdrop_failed(x, "reading the balancer back", res);
        gdrop_end(x);
        return;
    }
    if (hz_group_keep(ks, x->group, lb) < 0)
        ks->lost = 1;
    if (hz_group_nmembers(lb->a.labels) > 0) {
        PLB_INFO(ks->host, ks->ctx, PLB_KV("group", x->group, "balancer", id),
                 "the shared balancer has no member left here but carries %zu member label(s) "
                 "of Services this daemon does not serve: it is kept",
                 hz_group_nmembers(lb->a.labels));
    } else if (lb->a.protect_delete) {
        snprintf(msg, sizeof(msg),
                 "balancer %s (id %" PRId64 ") of shared group \"%s\" has delete protection: it "
                 "is not deleted with its last member and keeps its IPs; lift the protection "
                 "and delete it by hand if it should go",
                 lb->a.name, lb->a.id, x->group);
        if (x->svc)
            hz_warn_event(ks, x->key, x->svc, "DeleteProtected", msg);
        else
            PLB_WARN(ks->host, ks->ctx, PLB_KV("group", x->group), "%s", msg);
    } else {
        snprintf(path, sizeof(path), "/load_balancers/%" PRId64, x->id);
        PLB_INFO(ks->host, ks->ctx, PLB_KV("group", x->group, "balancer", id, "name", lb->a.name),
                 "the shared group has no member left: deleting its balancer");
        if (hz_api_call(ks->api, x->lane, "DELETE", path, NULL, gdrop_deleted, x) == 0) {
            hz_lb_unref(lb);
            return;
        }
    }
    hz_lb_unref(lb);
    gdrop_end(x);
}

/* Read x's balancer again (after its labels went). */
static void
gdrop_get(struct gdrop *x)
{
    char path[64];
    snprintf(path, sizeof(path), "/load_balancers/%" PRId64, x->id);
    if (hz_api_call(x->ks->api, x->lane, "GET", path, NULL, gdrop_read, x) < 0)
        gdrop_end(x);
}

/* The labels of the Services that left were written. */
static void
gdrop_labelled(void *arg, const struct hz_result *res)
{
    struct gdrop *x = arg;
    if (res->dry_run || (res->status >= 200 && res->status < 300)) {
        gdrop_get(x);
        return;
    }
    gdrop_failed(x, "removing the member labels", res);
    gdrop_end(x);
}

/* The balancer read first: the labels of those that left go (applied to
 * the labels as read now, so that one another wrote since stays), then it
 * is read again; with nothing to remove, this read decides. */
static void
gdrop_first(void *arg, const struct hz_result *res)
{
    struct gdrop *x = arg;
    json_t *body = json_object_get(res->body, "load_balancer");
    json_t *labels = json_object_get(body, "labels"), *want, *put;
    char path[64];
    if (res->status != 200 || !body) {
        gdrop_read(arg, res);
        return;
    }
    if (!(want = hz_group_label_edit(labels, NULL, x->drop))) {
        gdrop_end(x);
        return;
    }
    if (json_is_object(labels) && json_equal(want, labels)) {
        json_decref(want);
        gdrop_read(arg, res);
        return;
    }
    snprintf(path, sizeof(path), "/load_balancers/%" PRId64, x->id);
    if (!(put = json_pack("{s:o}", "labels", want)) ||
        hz_api_call(x->ks->api, x->lane, "PUT", path, put, gdrop_labelled, x) < 0)
        gdrop_end(x);
}

/* No member of group is left but its balancer lb (borrowed) is: read it,
 * remove the member labels drop (stolen) names, read it again, delete it
 * when it shows none. left (borrowed; may be NULL), left_key: a Service
 * that left, for the DeleteProtected Event. 0 or -ENOMEM. */
static int
gdrop_start(struct hz_kside *ks, const char *group, const struct hz_lb *lb, json_t *drop,
            const plb_obj *left, const char *left_key)
{
    struct gdrop *x = hz_calloc(sizeof(*x));
    char path[64];
    if (!x || !(x->group = hz_strdup(group)) || !(x->lane = hz_asprintf("group/%s", group)) ||
        (left && (!(x->key = hz_strdup(left_key)) || !(x->svc = ks->host->obj->ref(left))))) {
        if (x) {
            x->ks = ks;
            gdrop_free(x);
        }
        json_decref(drop);
        return -ENOMEM;
    }
    x->ks = ks;
    x->id = lb->a.id;
    x->drop = drop;
    if (g_set(ks, group, G_RUNNING) < 0) {
        gdrop_free(x);
        return -ENOMEM;
    }
    snprintf(path, sizeof(path), "/load_balancers/%" PRId64, x->id);
    if (hz_api_call(ks->api, x->lane, "GET", path, NULL, gdrop_first, x) < 0)
        gdrop_end(x);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The group's reconcile                                                */

/* A group's reconcile ended (hz_rec_done_fn): its oldest member's state
 * says when it is tried again after a failure, the balancer read back is
 * kept, and every Service of a group is synced again (statuses,
 * finalizers). */
static void
group_done(struct hz_kside *ks, const struct hz_rec_result *res)
{
    struct hz_svc_state *st = hz_state_get(&ks->states, res->key, 0);
    int cancelled = res->end == HZ_REC_CANCELLED;
    if (st && st->uid && strcmp(st->uid, res->uid) == 0) {
        if (res->end == HZ_REC_RECHECK || res->end == HZ_REC_WAIT) {
            st->fail_fp = res->fp;
            st->retry_at = ks->host->loop->now_ms(ks->ctx) + (res->end == HZ_REC_WAIT
                                                                  ? ks->cfg->resync_interval_ms
                                                                  : ks->cfg->refused_recheck_ms);
        } else if (res->end == HZ_REC_OK) {
            st->fail_fp = 0;
            st->retry_at = 0;
            hz_refusals_clear(st);
        }
    }
    if (!cancelled && res->lb && hz_group_keep(ks, res->group, res->lb) < 0)
        ks->lost = 1; /* looked up again at the next list */
    g_ended(ks, res->group);
}

/* The fingerprint of d and the label changes set and drop. */
static uint64_t
group_fp(const struct hz_desired *d, const json_t *set, const json_t *drop)
{
    uint64_t h = hz_desired_fp(d);
    for (int i = 0; i < 2; i++) {
        char *s = json_dumps(i ? drop : set, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
        hz_fnv1a64_field(&h, s ? s : "");
        hz_free(s);
    }
    return h;
}

/* Each adding member's status follows lb (borrowed). 0 or -ENOMEM. */
static int
statuses(struct hz_kside *ks, const struct coll *c, const struct hz_actual *lb)
{
    char key[HZ_MEMBER_KEY_MAX];
    int rc = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct hz_member *m = &c->m[i];
        const struct cand *x = cand_of(c, m);
        /* a member whose label the balancer does not carry yet is not served */
        if (!x || m->clash_port || hz_group_member_key(m->uid, key) < 0 ||
            !json_object_get(lb->labels, key))
            continue;
        if (hz_status_follow(ks, x->st, lb) < 0)
            rc = -ENOMEM;
    }
    return rc;
}

/* Reconcile group: its members' union against its balancer, or its
 * balancer's removal once no member adds anything. 0 or -ENOMEM. */
static int
group_sync(struct hz_kside *ks, const char *group)
{
    struct hz_lb *lb = hz_lbs_get(ks->by_group, group);
    struct hz_desired *ds = NULL, d = {0};
    const struct hz_member *oldest;
    const struct cand *ox = NULL;
    struct coll c;
    json_t *set = NULL, *drop = NULL, *want = NULL, *netid;
    enum hz_sync_verdict v;
    struct hz_plan plan = {0};
    char name[HZ_NAME_MAX + 1];
    int rc, flags = g_flags(ks, group);

    if (flags & G_RUNNING)
        return g_set(ks, group, flags | G_AGAIN);
    if ((rc = members(ks, group, lb, &c)) < 0 || (c.n && !(ds = hz_calloc(c.n * sizeof(*ds))))) {
        rc = rc < 0 ? rc : -ENOMEM;
        goto out;
    }
    if (c.unsynced)
        goto out; /* that member's sync reconciles the group */
    for (size_t i = 0; i < c.n; i++) {
        const struct cand *x = cand_of(&c, &c.m[i]);
        if ((rc = hz_sync_build(ks, x->st, x->svc, 1, &ds[i])) < 0)
            goto out;
        c.m[i].d = rc > 0 ? &ds[i] : NULL;
    }
    rc = 0;
    hz_group_clashes(c.m, c.n);
    oldest = hz_group_oldest(c.m, c.n);
    member_warnings(&c, oldest);
    if ((rc = hz_group_label_changes(lb ? lb->a.labels : NULL, group, c.m, c.n, gone, &c, &set,
                                     &drop)) < 0 ||
        !(want = hz_group_label_edit(lb ? lb->a.labels : NULL, set, drop))) {
        rc = -ENOMEM;
        goto out;
    }
    if (!oldest) {
        /* no member adds anything: the balancer goes with the last one */
        const plb_obj *left = NULL;
        const char *left_key = NULL;
        if (!lb)
            goto out;
        for (size_t i = 0; i < c.n && !left; i++) {
            left = cand_of(&c, &c.m[i])->svc;
            left_key = c.m[i].key;
        }
        if (c.n) /* members without a port: the balancer and its services stay */
            goto out;
        rc = gdrop_start(ks, group, lb, drop, left, left_key);
        drop = NULL;
        goto out;
    }
    ox = cand_of(&c, oldest);
    hz_name_for_group(ks->cfg->cluster_name, group, name);
    if ((rc = hz_group_union(c.m, c.n, name, &d)) < 0)
        goto out;
    netid = d.network ? json_object_get(ks->nets, d.network) : NULL;
    (void)hz_cert_resolve(ks->certs, d.https, d.nhttps);
    struct hz_sync_in in = {.d = &d,
                            .fp = group_fp(&d, set, drop),
                            .lb = lb ? &lb->a : NULL,
                            .net_known = !d.network || netid,
                            .net_id = netid ? json_integer_value(netid) : 0,
                            .fail_fp = ox->st->fail_fp,
                            .retry_at = ox->st->retry_at,
                            .now = ks->host->loop->now_ms(ks->ctx)};
    if (lb) {
        hz_location_check(ks, ox->st, ox->svc, &d, &lb->a);
        hz_targets_check(ks, ox->st, ox->svc, d.ntargets, &lb->a);
    }
    if ((rc = hz_sync_decide(&in, &v, &plan)) < 0)
        goto out;
    hz_plan_clear(&plan); /* built again with the labels by the reconcile */
    if (v == HZ_SYNC_SERVED && json_equal(want, lb->a.labels)) {
        ox->st->fail_fp = 0;
        ox->st->retry_at = 0;
        rc = statuses(ks, &c, &lb->a);
        goto out;
    }
    if (v == HZ_SYNC_HELD || (v == HZ_SYNC_SERVED && in.fail_fp == in.fp && in.now < in.retry_at)) {
        rc = lb ? statuses(ks, &c, &lb->a) : 0;
        goto out;
    }
    struct hz_rec_req req = {.key = oldest->key,
                             .uid = oldest->uid,
                             .group = group,
                             .labels_set = set,
                             .labels_drop = drop,
                             .d = &d,
                             .fp = in.fp,
                             .labelled = lb,
                             .done = group_done};
    set = drop = NULL;
    if ((rc = g_set(ks, group, G_RUNNING)) < 0) {
        json_decref(req.labels_set);
        json_decref(req.labels_drop);
        goto out;
    }
    if ((rc = hz_rec_start(ks, &req)) < 0)
        (void)g_set(ks, group, 0);
out:
    hz_desired_clear(&d);
    json_decref(want);
    json_decref(set);
    json_decref(drop);
    coll_free(&c, ds);
    return rc;
}

/* ------------------------------------------------------------------ */
/* A Service's side                                                     */

/* ------------------------------------------------------------------ */
/* A Service's side                                                     */

int
hz_group_service(struct hz_kside *ks, const plb_obj *svc, const char *member)
{
    const char *uid = hz_ks_str(ks, svc, "metadata", "uid", NULL);
    const char *ns = hz_ks_str(ks, svc, "metadata", "namespace", NULL);
    const char *name = hz_ks_str(ks, svc, "metadata", "name", NULL);
    int fin = hz_has_finalizer(ks, svc, HZ_GROUP_FINALIZER), rc = 0;
    char key[512], mkey[HZ_MEMBER_KEY_MAX];
    json_t *carrying, *g;
    struct hz_lb *lb;
    size_t i;

    if (!uid || !ns || !name || (!member && !fin && !ks->groups_used))
        return 0;
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    /* Nothing decides before the group balancers were listed: synced
     * again when the list answers. */
    if (!ks->by_group)
        return hz_group_list(ks);
    /* The finalizer first, so that a deletion waits for its services and
     * label to go: its update syncs the Service again. */
    if (member && !fin)
        return hz_kube_group_finalizer(ks, key, ns, name, 1);
    /* The groups whose balancer carries its label: reconciled (its
     * services and label go) unless it is a member of that one. Their
     * names first: a reconcile may end at once and change the index. */
    if (!(carrying = json_array()))
        return -ENOMEM;
    for (size_t pos = 0;
         hz_group_member_key(uid, mkey) == 0 && (lb = hz_lbs_next(ks->by_group, &pos));)
        if (json_object_get(lb->a.labels, mkey) &&
            json_array_append_new(carrying, json_string(json_string_value(json_object_get(
                                                lb->a.labels, HZ_GROUP_LABEL)))) < 0) {
            json_decref(carrying);
            return -ENOMEM;
        }
    json_array_foreach(carrying, i, g)
    {
        const char *gs = json_string_value(g);
        if (gs && (!member || strcmp(gs, member) != 0) && dirty(ks, gs, key) < 0)
            rc = -ENOMEM;
    }
    if (member) {
        if (dirty(ks, member, key) < 0)
            rc = -ENOMEM;
    } else if (fin && json_array_size(carrying) == 0) {
        /* no group balancer carries its label (the one it left read back
         * without it, or deleted): the deletion may go on */
        if (hz_kube_group_finalizer(ks, key, ns, name, 0) < 0)
            rc = -ENOMEM;
    }
    json_decref(carrying);
    return rc;
}
