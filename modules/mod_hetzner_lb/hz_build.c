/*
 * hz_build.c: what one Service asks for, built from the cache for its
 * sync (hz_sync.c) and for its shared group's (hz_group_sync.c): its
 * target nodes selected by the daemon, its ports read, the desired
 * balancer built from its last good annotations; and its status following
 * a balancer once that serves it (hz_ingress.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_group.h"

/* hz_group.h: the status once lb serves the Service. */
int
hz_status_follow(struct hz_kside *ks, struct hz_svc_state *st, const struct hz_actual *lb)
{
    return hz_lb_serves(ks, st, lb) ? hz_status_update(ks, st, lb) : 0;
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

/* hz_group.h: the Service's targets selected (with the warnings that
 * selection gives), what it asks for built into *d. annot_bad: this sync
 * found st's annotations invalid (warned of; st->good is the last good
 * set), else an InvalidAnnotation in force ends when the set checks out.
 * 1: built; 0: nothing to reconcile (a problem the Service was warned
 * of); -ENOMEM (-errno) when it could not be decided: synced again. */
int
hz_sync_build(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc, int annot_bad,
              struct hz_desired *d)
{
    const struct plb_host *h = ks->host;
    struct plb_lb_targets t = {.size = sizeof(t)};
    struct hz_port *ports = NULL;
    struct hz_svc hs;
    const char **ips = NULL;
    size_t nports = 0, nips = 0, max;
    const char *type = st->good.type ? st->good.type : ks->cfg->default_balancer_type;
    char err[1024];
    int rc;

    max = hz_type_max_targets(type);
    rc = h->lb->select_targets(
        ks->ctx, svc,
        ks->cfg->dynamic_node_selector && !st->good.selector_hccm ? PLB_LB_POLICY_TRAFFIC
                                                                  : PLB_LB_POLICY_SELECTOR,
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
    rc = hz_desired_build(ks->cfg, &st->good, &hs, ips, nips, d, err, sizeof(err));
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
    return 1;
}
