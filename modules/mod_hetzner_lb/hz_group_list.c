/*
 * hz_group_list.c: what the shared groups' reconciles (hz_group_sync.c)
 * know of Hetzner and of the cache: the one list of every group balancer
 * (label_selector=prismlb.io/shared-balancer) at each resync once a group
 * was met, a balancer read back after our writes kept over an older list,
 * and the index of the cache's Services by group and UID for one sync
 * round.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_group.h"

/* The list of group balancers is keyed in ks->fresh as "group/<group>". */
#define FRESH_FMT "group/%s"

const char *
hz_group_of(const struct hz_kside *ks, const plb_obj *svc)
{
    return hz_ks_str(ks, svc, "metadata", "annotations", HZ_OWN_SHARED);
}

/* ------------------------------------------------------------------ */
/* The group list                                                       */

/* plb_informer_foreach's callback: queue Service svc when it names a
 * group or holds the group finalizer. */
static void
queue_grouped(const plb_obj *svc, void *arg)
{
    struct hz_kside *ks = arg;
    const char *ns = hz_ks_str(ks, svc, "metadata", "namespace", NULL);
    const char *name = hz_ks_str(ks, svc, "metadata", "name", NULL);
    char key[512];
    if (!ns || !name || (!hz_group_of(ks, svc) && !hz_has_finalizer(ks, svc, HZ_GROUP_FINALIZER)))
        return;
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    hz_work_add(ks, key);
}

/* Sync every Service of a group or holding its finalizer. */
void
hz_group_queue(struct hz_kside *ks)
{
    if (ks->svc_inf)
        ks->host->kube->informer_foreach(ks->svc_inf, queue_grouped, ks);
}

/* Index balancer lb (borrowed) of m under its group label (borrowed from
 * lb's labels); the lowest id wins. 0, -EINVAL without the label,
 * -ENOMEM. */
static int
put_group(struct hz_lbs *m, struct hz_lb *lb, size_t *dup)
{
    const char *g = json_string_value(json_object_get(lb->a.labels, HZ_GROUP_LABEL));
    struct hz_lb *prev;
    if (!g)
        return -EINVAL;
    if ((prev = hz_lbs_get(m, g)) && dup)
        (*dup)++;
    return prev && prev->a.id < lb->a.id ? 0 : hz_lbs_put_as(m, g, lb);
}

/* The group list answered (arg: ks): index the balancers by group, keep
 * those read back after our writes since it started, sync the groups. */
static void
group_listed(void *arg, const struct hz_result *res, json_t *items)
{
    struct hz_kside *ks = arg;
    struct hz_lbs *idx = NULL;
    struct hz_lb *lb, *old;
    size_t i, dup = 0;
    json_t *it;
    ks->group_listing = 0;
    if (res->err == -ECANCELED)
        return;
    if (!items) {
        PLB_WARN(
            ks->host, ks->ctx,
            PLB_KV("code", res->code ? res->code : "-", "error", res->message ? res->message : "-"),
            "listing shared balancers failed: status %d", res->status);
        return; /* the last index stays; the next resync lists again */
    }
    if (!(idx = hz_lbs_new()))
        goto nomem;
    json_array_foreach(items, i, it)
    {
        int rc;
        if (hz_lb_parse(it, &lb) < 0)
            goto nomem; /* -EINVAL too: an item not understood would look absent */
        rc = put_group(idx, lb, &dup);
        hz_lb_unref(lb);
        if (rc == -ENOMEM)
            goto nomem;
    }
    /* balancers read back since the list started are newer: keep them */
    for (size_t pos = 0; (old = hz_lbs_next(ks->by_group, &pos));) {
        char k[HZ_NAME_MAX + 16];
        const char *g = json_string_value(json_object_get(old->a.labels, HZ_GROUP_LABEL));
        snprintf(k, sizeof(k), FRESH_FMT, g ? g : "");
        if (g && json_integer_value(json_object_get(ks->fresh, k)) >= ks->group_list_ms &&
            json_object_get(ks->fresh, k) && hz_lbs_put_as(idx, g, old) < 0)
            goto nomem;
    }
    if (dup)
        PLB_WARN(ks->host, ks->ctx, NULL,
                 "%zu shared balancer(s) carry a group label another one has (the lowest id "
                 "is the group's)",
                 dup);
    hz_lbs_free(ks->by_group);
    ks->by_group = idx;
    hz_group_queue(ks);
    return;
nomem:
    PLB_ERR(ks->host, ks->ctx, NULL, "shared balancers: out of memory reading the list");
    hz_lbs_free(idx);
}

/* Start the list of group balancers unless it is in flight. 0 or -errno. */
int
hz_group_list(struct hz_kside *ks)
{
    int rc;
    ks->groups_used = 1;
    if (ks->group_listing)
        return 0;
    rc = hz_api_list(ks->api, "/load_balancers?label_selector=" HZ_GROUP_LABEL, "load_balancers",
                     group_listed, ks);
    if (rc < 0) {
        PLB_WARN(ks->host, ks->ctx, PLB_KV("error", strerror(-rc)), "cannot list shared balancers");
        return rc == -ENOMEM ? rc : 0;
    }
    ks->group_listing = 1;
    ks->group_list_ms = ks->host->loop->now_ms(ks->ctx);
    return 0;
}

void
hz_group_resync(struct hz_kside *ks)
{
    if (ks->groups_used && ks->host->links->gate_is_open(ks->ctx))
        (void)hz_group_list(ks);
}

/* Remember lb (read back after our writes) as group's balancer; -ENOMEM
 * when it could not be. */
int
hz_group_keep(struct hz_kside *ks, const char *group, struct hz_lb *lb)
{
    char k[HZ_NAME_MAX + 16];
    snprintf(k, sizeof(k), FRESH_FMT, group);
    if (!ks->by_group || put_group(ks->by_group, lb, NULL) < 0 ||
        (!ks->fresh && !(ks->fresh = json_object())) ||
        json_object_set_new(ks->fresh, k, json_integer(ks->host->loop->now_ms(ks->ctx))) < 0)
        return -ENOMEM;
    return 0;
}

/* The Services of the cache during one sync round (the cache does not
 * change while the round runs): one walk serves every group reconciled in
 * it, instead of one walk per member. */

/* plb_informer_foreach's callback: svc into the index (arg). */
static void
gidx_add(const plb_obj *svc, void *arg)
{
    struct hz_kside *ks = ((void **)arg)[0];
    struct hz_gidx *x = ((void **)arg)[1];
    const char *uid = hz_ks_str(ks, svc, "metadata", "uid", NULL), *g = hz_group_of(ks, svc);
    json_t *a;
    if (x->err || !uid)
        return;
    if (x->n == x->cap) {
        size_t nc = x->cap ? x->cap * 2 : 64;
        const plb_obj **ns = hz_realloc(x->svcs, nc * sizeof(*ns));
        if (!ns) {
            x->err = -ENOMEM;
            return;
        }
        x->svcs = ns;
        x->cap = nc;
    }
    x->svcs[x->n] = svc;
    if (json_object_set_new(x->uids, uid, json_integer((json_int_t)x->n)) < 0 ||
        (g && !(a = json_object_get(x->groups, g)) &&
         (json_object_set_new(x->groups, g, json_array()) < 0 ||
          !(a = json_object_get(x->groups, g)))) ||
        (g && json_array_append_new(a, json_integer((json_int_t)x->n)) < 0)) {
        x->err = -ENOMEM;
        return;
    }
    x->n++;
}

void
hz_gidx_free(struct hz_gidx *x)
{
    if (!x)
        return;
    json_decref(x->uids);
    json_decref(x->groups);
    hz_free(x->svcs);
    hz_free(x);
}

/* The index of this round (built on first use; borrowed), or NULL when
 * out of memory. */
struct hz_gidx *
hz_gidx_get(struct hz_kside *ks)
{
    struct hz_gidx *x = ks->gidx;
    void *arg[2] = {ks, NULL};
    if (x)
        return x;
    if (!(x = hz_calloc(sizeof(*x))) || !(x->uids = json_object()) ||
        !(x->groups = json_object())) {
        hz_gidx_free(x);
        return NULL;
    }
    arg[1] = x;
    if (ks->svc_inf)
        ks->host->kube->informer_foreach(ks->svc_inf, gidx_add, arg);
    if (x->err) {
        hz_gidx_free(x);
        return NULL;
    }
    return ks->gidx = x;
}
