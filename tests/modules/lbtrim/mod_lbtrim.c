/*
 * mod_lbtrim: a balancer module built out of tree against <prismlb/module.h>
 * and <prismlb/module_util.h> alone, whose informers trim what they cache
 * (plb_informer_opts.keep) and still hand host->lb->select_targets what it
 * reads: each informer keeps the module's own paths joined with the lb
 * table's keep_services, keep_nodes or keep_slices.
 *
 * For every Service of type LoadBalancer it writes one line to output_file
 * (rewritten whole after every change, lines in the order of the Service
 * cache):
 *
 *     NAMESPACE/NAME IP,IP,...        the targets select_targets chose
 *     NAMESPACE/NAME !invalid         a node selector it refused
 *
 * The selection follows mod_hetzner_lb's settings of the same names: by the
 * traffic policy, or with dynamic_node_selector = false by the Service's
 * robotlb/node-selector annotation; at most max_targets targets.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

struct lt_config {
    char *kubeconfig;
    char *output_file;
    int dynamic_node_selector;
    int64_t max_targets;
};

struct lt {
    const struct plb_host *host;
    plb_ctx *ctx;
    const struct lt_config *cfg;
    plb_kube *kube;
    plb_informer *services, *nodes, *slices;
    plb_timer *sync; /* coalesces informer events into one pass */
};

#define SELECTOR_ANNOTATION "robotlb/node-selector"

/* clang-format off */
static const struct plb_setting lt_settings[] = {
    {.name = "kubeconfig", .type = PLB_SET_PATH, .offset = offsetof(struct lt_config, kubeconfig),
     .flags = PLB_SET_REQUIRED, .doc = "Kubeconfig of the cluster"},
    {.name = "output_file", .type = PLB_SET_PATH,
     .offset = offsetof(struct lt_config, output_file), .flags = PLB_SET_REQUIRED,
     .doc = "The file the targets are written into"},
    {.name = "dynamic_node_selector", .type = PLB_SET_BOOL,
     .offset = offsetof(struct lt_config, dynamic_node_selector), .def = "true",
     .doc = "Select by the traffic policy; false: by the robotlb/node-selector annotation"},
    {.name = "max_targets", .type = PLB_SET_INT,
     .offset = offsetof(struct lt_config, max_targets), .def = "25", .min = 1, .max = 1000,
     .doc = "Targets one balancer holds"},
    PLB_SETTINGS_END,
};
/* clang-format on */

/* What this module reads beside what target selection reads. */
static const char *const own_service_paths[] = {
    "/spec/type",
    "/metadata/annotations/robotlb~1node-selector",
    NULL,
};

struct pass {
    struct lt *lt;
    FILE *out;
};

static void
write_one(const plb_obj *svc, void *arg)
{
    struct pass *p = arg;
    struct lt *lt = p->lt;
    const struct plb_host *h = lt->host;
    const char *type = h->obj->str(h->obj->get(svc, "spec", "type", NULL));
    const char *ns = h->obj->str(h->obj->get(svc, "metadata", "namespace", NULL));
    const char *name = h->obj->str(h->obj->get(svc, "metadata", "name", NULL));
    if (!type || strcmp(type, "LoadBalancer") != 0 || !ns || !name)
        return;
    const char *selector =
        h->obj->str(h->obj->get(svc, "metadata", "annotations", SELECTOR_ANNOTATION, NULL));
    struct plb_lb_targets t = {.size = sizeof(t)};
    char err[256];
    int rc = h->lb->select_targets(
        lt->ctx, svc,
        lt->cfg->dynamic_node_selector ? PLB_LB_POLICY_TRAFFIC : PLB_LB_POLICY_SELECTOR, selector,
        lt->nodes, lt->slices, (size_t)lt->cfg->max_targets, &t, err, sizeof(err));
    if (rc == -EINVAL) {
        fprintf(p->out, "%s/%s !invalid\n", ns, name);
        return;
    }
    if (rc < 0) {
        PLB_ERR(h, lt->ctx, PLB_KV("service", name, "error", strerror(-rc)),
                "target selection failed");
        return;
    }
    fprintf(p->out, "%s/%s ", ns, name);
    for (size_t i = 0; i < t.n; i++)
        fprintf(p->out, "%s%s", i ? "," : "", PLB_LB_TARGET(&t, i)->ip);
    fputc('\n', p->out);
    h->lb->targets_clear(&t);
}

static void
on_sync(plb_timer *timer, void *arg)
{
    struct lt *lt = arg;
    const struct plb_host *h = lt->host;
    (void)timer;
    if (!h->kube->informer_synced(lt->services) || !h->kube->informer_synced(lt->nodes) ||
        !h->kube->informer_synced(lt->slices))
        return;
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", lt->cfg->output_file);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        PLB_ERR(h, lt->ctx, PLB_KV("path", tmp), "cannot write the output file");
        return;
    }
    struct pass p = {.lt = lt, .out = out};
    h->kube->informer_foreach(lt->services, write_one, &p);
    if (fclose(out) != 0 || rename(tmp, lt->cfg->output_file) != 0)
        PLB_ERR(h, lt->ctx, PLB_KV("path", lt->cfg->output_file), "cannot write the output file");
}

static void
kick(struct lt *lt)
{
    if (!lt->host->loop->timer_pending(lt->sync) &&
        lt->host->loop->timer_arm(lt->sync, 20, 0, 0) < 0)
        PLB_ERR(lt->host, lt->ctx, NULL, "cannot arm the sync timer");
}

static void
on_add(plb_informer *inf, const plb_obj *obj, void *arg)
{
    (void)inf;
    (void)obj;
    kick(arg);
}

static void
on_update(plb_informer *inf, const plb_obj *old, const plb_obj *obj, void *arg)
{
    (void)inf;
    (void)old;
    (void)obj;
    kick(arg);
}

static void
on_synced(plb_informer *inf, void *arg)
{
    (void)inf;
    kick(arg);
}

static const struct plb_informer_handlers handlers = {on_add, on_update, on_add, on_synced, NULL};

/* An informer of resource keeping own's paths and lb's (either may be
 * NULL), or NULL with why in err. */
static plb_informer *
watch(struct lt *lt, const char *api_version, const char *resource, const char *const *own,
      const char *const *lb, char *err, size_t errlen)
{
    const char **keep = plb_keep_join(lt->host, own, lb);
    int rc = -ENOMEM;
    plb_informer *inf = NULL;
    if (keep)
        inf = plb_informer_watch(lt->host, lt->kube, api_version, resource, NULL, NULL, keep,
                                 &handlers, lt, &rc);
    lt->host->mem->free(keep); /* the informer copied the paths */
    if (!inf)
        snprintf(err, errlen, "cannot watch %s: %s", resource, strerror(-rc));
    return inf;
}

static int
lt_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    struct lt *lt;
    if (PLB_STATE_NEW(&lt, host, ctx, config) < 0)
        return -ENOMEM;
    if (!(lt->sync = host->loop->timer_new(ctx, on_sync, lt))) {
        snprintf(err, errlen, "no timer");
        host->mem->free(lt);
        return -ENOMEM;
    }
    *state = lt;
    return 0;
}

static int
lt_start(void *state, char *err, size_t errlen)
{
    struct lt *lt = state;
    const struct plb_host *h = lt->host;
    struct plb_kube_opts o = {.size = sizeof(o), .kubeconfig = lt->cfg->kubeconfig};
    if (!(lt->kube = h->kube->client_new(lt->ctx, &o, err, errlen)))
        return -EINVAL; /* err says why */
    if (!(lt->services =
              watch(lt, "v1", "services", own_service_paths, h->lb->keep_services, err, errlen)) ||
        !(lt->nodes = watch(lt, "v1", "nodes", NULL, h->lb->keep_nodes, err, errlen)) ||
        !(lt->slices = watch(lt, "discovery.k8s.io/v1", "endpointslices", NULL, h->lb->keep_slices,
                             err, errlen)))
        return -ENOMEM;
    return 0;
}

static void
lt_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct lt *lt = state;
    (void)grace_ms;
    lt->host->loop->timer_cancel(lt->sync);
    lt->host->links->done(d);
}

static void
lt_destroy(void *state)
{
    struct lt *lt = state;
    lt->host->kube->client_free(lt->kube); /* and its informers */
    lt->host->loop->timer_free(lt->sync);
    lt->host->mem->free(lt);
}

PLB_MODULE_EXPORT = {
    PLB_MODULE("lbtrim", "1.0", "Test balancer that selects targets with trimmed informers"),
    PLB_MODULE_SETTINGS(lt_settings, struct lt_config),
    PLB_MODULE_LIFECYCLE(lt_create, lt_start, lt_stop, lt_destroy),
};
