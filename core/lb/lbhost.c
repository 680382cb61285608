#include "lb/lbhost.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "alloc.h"
#include "kube/kube.h"
#include "lb/lbtargets.h"

/* plb_obj is a jansson value (core/kube/obj.c). */
#define OBJ_JSON(o) ((const json_t *)(o))

struct collect {
    const json_t **v;
    size_t n, cap;
    int oom;
};

static void
collect_one(const plb_obj *obj, void *arg)
{
    struct collect *c = arg;
    if (c->oom)
        return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        const json_t **nv = core_realloc(c->v, cap * sizeof(*nv));
        if (!nv) {
            c->oom = 1;
            return;
        }
        c->v = nv;
        c->cap = cap;
    }
    c->v[c->n++] = OBJ_JSON(obj);
}

int
core_lb_host_selector_check(const char *node_selector, char *err, size_t errlen)
{
    struct core_lb_selector *sel = NULL;
    int rc = core_lb_selector_parse(node_selector, &sel, err, errlen);
    core_lb_selector_free(sel);
    return rc;
}

int
core_lb_host_select(plb_ctx *ctx, const plb_obj *svc, enum plb_lb_policy policy,
                    const char *node_selector, plb_informer *nodes, plb_informer *slices,
                    size_t max_targets, struct plb_lb_targets *out, char *err, size_t errlen)
{
    struct collect cn = {0}, cs = {0};
    struct core_lb_selector *sel = NULL;
    struct core_lb_targets t;
    enum core_lb_policy p;
    int rc;

    (void)ctx;
    if (!out || out->size < sizeof(*out))
        return -EINVAL; /* the module's header said how much it knows */
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    out->target_size = sizeof(struct plb_lb_target);
    if (!svc || !nodes)
        return -EINVAL;
    if (policy == PLB_LB_POLICY_SELECTOR) {
        rc = core_lb_selector_parse(node_selector, &sel, err, errlen);
        if (rc < 0)
            return rc;
        p = CORE_LB_POLICY_SELECTOR;
    } else {
        p = core_lb_policy_of(OBJ_JSON(svc), 1);
    }
    core_informer_foreach(nodes, collect_one, &cn);
    if (slices && p == CORE_LB_POLICY_LOCAL)
        core_informer_foreach(slices, collect_one, &cs);
    rc = -ENOMEM;
    if (cn.oom || cs.oom)
        goto out;
    rc = core_lb_select_targets(OBJ_JSON(svc), p, sel, cn.v, cn.n, cs.v, cs.n, max_targets, &t);
    if (rc < 0)
        goto out;
    /* Same layout, field for field; hand the array over. */
    out->n = t.n;
    out->v = t.v;
    out->dropped = t.dropped;
    out->no_address = t.no_address;
    _Static_assert(sizeof(struct plb_lb_target) == sizeof(struct core_lb_target),
                   "plb_lb_target mirrors core_lb_target");
    rc = 0;
out:
    core_free(cn.v);
    core_free(cs.v);
    core_lb_selector_free(sel);
    return rc;
}

void
core_lb_host_clear(struct plb_lb_targets *t)
{
    if (!t)
        return;
    core_free(t->v);
    t->v = NULL;
    t->n = t->dropped = t->no_address = 0;
}

char *
core_lb_ingress_patch(const struct plb_lb_ingress *v, size_t n, size_t entry_size, int *err)
{
    json_t *patch = NULL, *ingress = NULL;
    char *body = NULL;

    *err = -EINVAL;
    if (n && (!v || entry_size < sizeof(struct plb_lb_ingress)))
        return NULL; /* 3.2's entry is the smallest there is */
    for (size_t i = 0; i < n; i++) {
        const struct plb_lb_ingress *e = (const void *)((const char *)v + i * entry_size);
        if (!e->ip == !e->hostname || (e->ip_mode && !e->ip))
            return NULL;
    }
    *err = -ENOMEM;
    if (!(ingress = json_array()))
        goto out;
    for (size_t i = 0; i < n; i++) {
        const struct plb_lb_ingress *e = (const void *)((const char *)v + i * entry_size);
        json_t *o =
            e->ip ? json_pack("{s:s}", "ip", e->ip) : json_pack("{s:s}", "hostname", e->hostname);
        if (!o || (e->ip_mode && json_object_set_new(o, "ipMode", json_string(e->ip_mode)) < 0)) {
            json_decref(o);
            goto out;
        }
        if (json_array_append_new(ingress, o) < 0)
            goto out; /* o was stolen, even on failure */
    }
    /* A merge patch replaces the list whole, which is what status wants. */
    patch = json_pack("{s:{s:{s:O}}}", "status", "loadBalancer", "ingress", ingress);
    if (patch && (body = json_dumps(patch, JSON_COMPACT)))
        *err = 0;
out:
    json_decref(patch);
    json_decref(ingress);
    return body;
}

plb_kube_op *
core_lb_host_status_write_ingress(plb_kube *k, const plb_obj *svc, const struct plb_lb_ingress *v,
                                  size_t n, size_t entry_size, plb_kube_done_cb done, void *arg,
                                  int *err)
{
    const json_t *md = json_object_get(OBJ_JSON(svc), "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    char *body;
    plb_kube_op *op;

    if (!ns || !name) {
        *err = -EINVAL;
        return NULL;
    }
    if (!(body = core_lb_ingress_patch(v, n, entry_size, err)))
        return NULL;
    struct plb_kube_ref ref = {
        .size = sizeof(ref),
        .api_version = "v1",
        .resource = "services",
        .ns = ns,
        .name = name,
        .subresource = "status",
    };
    op = core_kube_patch(k, &ref, PLB_KUBE_MERGE_PATCH, body, done, arg, err);
    core_free(body);
    return op;
}

plb_kube_op *
core_lb_host_status_write(plb_kube *k, const plb_obj *svc, const char *const *ips, size_t n,
                          const char *ip_mode, plb_kube_done_cb done, void *arg, int *err)
{
    struct plb_lb_ingress *v = NULL;
    plb_kube_op *op;

    if (n && !ips) {
        *err = -EINVAL;
        return NULL;
    }
    if (n && !(v = core_calloc(n, sizeof(*v)))) {
        *err = -ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = (struct plb_lb_ingress){.ip = ips[i], .ip_mode = ip_mode};
    op = core_lb_host_status_write_ingress(k, svc, v, n, sizeof(*v), done, arg, err);
    core_free(v);
    return op;
}
