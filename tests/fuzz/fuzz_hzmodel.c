/*
 * fuzz_hzmodel: Service, Node and EndpointSlice objects, and the balancers
 * Hetzner lists, into mod_hetzner_lb's model and plan
 * (modules/mod_hetzner_lb/hz_annot.c, hz_model.c, hz_plan.c, hz_names.c,
 * hz_settings.c; linked, not edited) and the core's target selection
 * (core/lb/lbtargets.c), the path a reconcile takes without its I/O.
 *
 * Input: one JSON object {"service": Service, "nodes": NodeList or array,
 * "slices": EndpointSliceList or array, "balancers": the answer of
 * GET /load_balancers ({"load_balancers": [...]}) or an array}; the seeds
 * are objects the fake API server and the fake Hetzner API answered.
 * The Service's robotlb/ annotations are parsed; its targets selected
 * under its policy (Local, Cluster, or the node selector with dynamic
 * selection off), capped by its balancer type; its desired balancer built;
 * each listed balancer parsed, planned against it and weighed by the
 * ownership rules; the create body built.
 *
 * Oracles:
 *   - a refused annotation or desired balancer comes with a message;
 *   - targets: at most the cap, sorted by node name, each with an IP,
 *     none from a node labelled exclude-from-external-load-balancers;
 *   - a plan is refused (-EPERM) exactly when the balancer is labelled for
 *     another Service; its writes come in the documented order; it adds
 *     only targets the Service wants and the balancer lacks, removes only
 *     targets the balancer has and the Service does not want;
 *   - ownership never manages or adopts a balancer labelled for another
 *     Service, and creates only when none is labelled for this one.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "hz.h"
#include "lb/lbtargets.h"

#define MAX_OBJS 64

static const json_t *annotations;

static const char *
annot_get(void *arg, const char *key)
{
    (void)arg;
    return json_string_value(json_object_get(annotations, key));
}

/* The items of a List, or the array itself; at most MAX_OBJS objects. */
static size_t
items_of(const json_t *v, const json_t **out)
{
    const json_t *arr = json_is_array(v) ? v : json_object_get(v, "items");
    size_t n = 0, i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        if (n < MAX_OBJS)
            out[n++] = o;
    }
    return n;
}

static int
in_list(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] && s && strcmp(v[i], s) == 0)
            return 1;
    return 0;
}

static void
check_targets(const struct core_lb_targets *t, size_t max, const json_t *const *nodes,
              size_t nnodes)
{
    FUZZ_ASSERT(!max || t->n <= max, "%zu targets over the cap %zu", t->n, max);
    for (size_t i = 0; i < t->n; i++) {
        FUZZ_ASSERT(t->v[i].ip && t->v[i].node, "a target without IP or node");
        FUZZ_ASSERT(i == 0 || strcmp(t->v[i - 1].node, t->v[i].node) <= 0,
                    "targets not sorted by node name");
        /* the node object the target came from: its name is borrowed from
         * it (names may repeat in an input) */
        for (size_t k = 0; k < nnodes; k++) {
            const json_t *md = json_object_get(nodes[k], "metadata");
            const char *name = json_string_value(json_object_get(md, "name"));
            if (name && name == t->v[i].node)
                FUZZ_ASSERT(!json_object_get(json_object_get(md, "labels"), CORE_LB_EXCLUDE_LABEL),
                            "node %s is excluded but targeted", name);
        }
    }
}

/* The documented order of a plan's writes: service additions and updates
 * are one step (in port order), every other kind a step of its own. */
static int
op_rank(enum hz_op_kind k)
{
    return k == HZ_OP_UPDATE_SERVICE ? HZ_OP_ADD_SERVICE : (int)k;
}

static void
check_plan(const struct hz_desired *d, const struct hz_actual *a, int64_t net)
{
    struct hz_plan p = {0};
    int rc = hz_plan_build(d, a, net, &p);
    int other = a->uid && (!d->uid || strcmp(a->uid, d->uid) != 0);
    FUZZ_ASSERT(rc != -EPERM || other, "plan refused for a balancer that is not another's");
    FUZZ_ASSERT(rc == -EPERM || rc == -ENOMEM || !other, "plan for another Service's balancer");
    FUZZ_ASSERT(rc == 0 || rc == -EPERM || rc == -ENOMEM, "hz_plan_build: %d", rc);
    for (size_t i = 0; rc == 0 && i < p.n; i++) {
        const struct hz_op *op = &p.ops[i];
        FUZZ_ASSERT(op->method && op->path && hz_op_name(op->kind), "an op without method or path");
        FUZZ_ASSERT(i == 0 || op_rank(p.ops[i - 1].kind) <= op_rank(op->kind), "%s after %s",
                    hz_op_name(op->kind), hz_op_name(p.ops[i - 1].kind));
        if (op->kind == HZ_OP_ADD_TARGET)
            FUZZ_ASSERT(in_list(d->targets, d->ntargets, op->target_ip) &&
                            !in_list(a->ip_targets, a->nip_targets, op->target_ip),
                        "adds target %s", op->target_ip ? op->target_ip : "(null)");
        if (op->kind == HZ_OP_REMOVE_TARGET)
            FUZZ_ASSERT(in_list(a->ip_targets, a->nip_targets, op->target_ip) &&
                            !in_list(d->targets, d->ntargets, op->target_ip),
                        "removes target %s", op->target_ip ? op->target_ip : "(null)");
        char *body = op->body ? json_dumps(op->body, JSON_COMPACT) : NULL;
        free(body);
    }
    hz_plan_clear(&p);
}

static void
model(const json_t *doc)
{
    const json_t *svc = json_object_get(doc, "service");
    const json_t *nodes[MAX_OBJS], *slices[MAX_OBJS], *lbs[MAX_OBJS];
    size_t nnodes = items_of(json_object_get(doc, "nodes"), nodes);
    size_t nslices = items_of(json_object_get(doc, "slices"), slices);
    const json_t *bl = json_object_get(doc, "balancers");
    size_t nlbs = items_of(json_is_array(bl) ? bl : json_object_get(bl, "load_balancers"), lbs);
    const json_t *md = json_object_get(svc, "metadata");
    const char *uid = json_string_value(json_object_get(md, "uid"));
    char err[1024] = "";

    struct hz_config cfg = {
        .hcloud_endpoint = "https://api.hetzner.cloud/v1",
        .cluster_name = (char *)json_string_value(json_object_get(doc, "cluster_name")),
        .default_network = (char *)json_string_value(json_object_get(doc, "default_network")),
        .dynamic_node_selector = !json_is_false(json_object_get(doc, "dynamic")),
        .default_lb_retries = 3,
        .default_lb_timeout = 10,
        .default_lb_interval = 15,
        .default_lb_location = "hel1",
        .default_balancer_type = "lb11",
        .refused_recheck_ms = 30000,
        .resync_interval_ms = 300000,
    };

    /* Annotations: a refused set is reported, and the reconcile goes on
     * with none (the last good state of a Service seen first). */
    struct hz_annot a;
    annotations = json_object_get(md, "annotations");
    int rc = hz_annot_parse(annot_get, NULL, &a, err, sizeof(err));
    FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOMEM, "hz_annot_parse: %d", rc);
    FUZZ_ASSERT(rc != -EINVAL || err[0], "refused annotations without a message");
    if (rc != 0) {
        annotations = NULL;
        if (hz_annot_parse(annot_get, NULL, &a, err, sizeof(err)) != 0)
            return;
    }

    /* Targets. */
    const char *type = a.type ? a.type : cfg.default_balancer_type;
    size_t max = hz_type_max_targets(type);
    struct core_lb_selector *sel = NULL;
    struct core_lb_targets t = {0};
    enum core_lb_policy pol = core_lb_policy_of(svc, cfg.dynamic_node_selector);
    rc = core_lb_selector_parse(a.node_selector, &sel, err, sizeof(err));
    FUZZ_ASSERT(rc == 0 || rc == -ENOMEM || (rc == -EINVAL && err[0]),
                "selector refused without a message");
    if (rc == 0 &&
        core_lb_select_targets(svc, pol, sel, nodes, nnodes, slices, nslices, max, &t) == 0)
        check_targets(&t, max, nodes, nnodes);
    core_lb_selector_free(sel);

    /* The desired balancer. */
    const char *ips[MAX_OBJS];
    size_t nips = 0;
    for (size_t i = 0; i < t.n && nips < MAX_OBJS; i++)
        ips[nips++] = t.v[i].ip;
    struct hz_port ports[16];
    size_t nports = 0, i;
    json_t *p;
    json_array_foreach(json_object_get(json_object_get(svc, "spec"), "ports"), i, p)
    {
        if (nports == 16)
            break;
        json_t *np = json_object_get(p, "nodePort"), *pp = json_object_get(p, "port");
        ports[nports++] = (struct hz_port){
            .protocol = json_string_value(json_object_get(p, "protocol")),
            .port = json_is_integer(pp) ? (int)json_integer_value(pp) : 0,
            .node_port = json_is_integer(np) ? (int)json_integer_value(np) : 0,
        };
    }
    struct hz_svc hs = {
        .uid = uid,
        .name = json_string_value(json_object_get(md, "name")),
        .ns = json_string_value(json_object_get(md, "namespace")),
        .ports = ports,
        .nports = nports,
    };
    struct hz_desired d;
    err[0] = '\0';
    rc = hz_desired_build(&cfg, &a, &hs, ips, nips, &d, err, sizeof(err));
    FUZZ_ASSERT(rc == 0 || rc == -ENOMEM || ((rc == -ENOENT || rc == -EINVAL) && err[0]),
                "hz_desired_build: %d, message \"%s\"", rc, err);
    core_lb_targets_clear(&t);
    if (rc != 0) {
        hz_annot_clear(&a);
        return;
    }

    /* The balancers: plan each; ownership over them. */
    struct hz_actual act[MAX_OBJS];
    size_t nact = 0;
    const json_t *netv = json_object_get(doc, "network_id");
    int64_t net = json_is_integer(netv) ? json_integer_value(netv) : 0;
    for (size_t k = 0; k < nlbs; k++) {
        if (hz_actual_parse(lbs[k], &act[nact]) != 0)
            continue;
        check_plan(&d, &act[nact], d.network ? net : 0);
        nact++;
    }
    char legacy[HZ_NAME_MAX + 1];
    hz_name_legacy(hs.name ? hs.name : "", legacy);
    struct hz_own_in in = {
        .uid = uid ? uid : "",
        .name = d.name,
        .annotated = a.balancer != NULL,
        .legacy_name = legacy,
        .node_ips = ips,
        .nnode_ips = nips,
    };
    for (size_t k = 0; k < nact; k++) {
        if (act[k].uid && uid && strcmp(act[k].uid, uid) == 0 &&
            (!in.labelled || act[k].id < in.labelled->id))
            in.labelled = &act[k];
        if (act[k].name && strcmp(act[k].name, d.name) == 0 && !in.by_name)
            in.by_name = &act[k];
        if (act[k].name && strcmp(act[k].name, legacy) == 0 && !in.by_legacy)
            in.by_legacy = &act[k];
    }
    struct hz_own_out out;
    hz_own_decide(&in, &out);
    if (out.kind == HZ_OWN_MANAGE || out.kind == HZ_OWN_ADOPT) {
        FUZZ_ASSERT(out.lb, "manage or adopt without a balancer");
        FUZZ_ASSERT(!out.lb->uid || strcmp(out.lb->uid, in.uid) == 0,
                    "takes balancer %s labelled for %s", out.lb->name, out.lb->uid);
    }
    FUZZ_ASSERT(out.kind != HZ_OWN_CREATE || !in.labelled, "creates beside a labelled balancer");

    json_t *body = hz_create_body(&d, d.network ? net : 0, 1);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    free(text);
    json_decref(body);
    for (size_t k = 0; k < nact; k++)
        hz_actual_clear(&act[k]);
    hz_desired_clear(&d);
    hz_annot_clear(&a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, 0, NULL);
    if (json_is_object(doc))
        model(doc);
    json_decref(doc);
    return 0;
}
