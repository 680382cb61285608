/*
 * mod_lbfile: a second "cloud" for Services of type LoadBalancer, built
 * against <prismlb/module.h> alone. It proves that a load-balancer module
 * for another cloud needs nothing of mod_hetzner_lb: target selection,
 * status writes and warning Events all come through the host table.
 *
 * Its "cloud" is a file: for every Service of type LoadBalancer whose
 * spec.loadBalancerClass equals the `class` setting, one line
 *
 *     NAMESPACE/NAME ADDRESS node=IP,node=IP
 *
 * is "provisioned" into output_file (rewritten whole on every change), the
 * Service's status gets ADDRESS (192.0.2.x, from the line's position in a
 * stable order), and a Service with more nodes than max_targets gets a
 * warning Event naming the limit.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

struct lf_config {
    char *kubeconfig;
    char *output_file;
    char *lb_class;
    int64_t max_targets;
};

struct lf {
    const struct plb_host *host;
    plb_ctx *ctx;
    const struct lf_config *cfg;
    plb_kube *kube;
    plb_informer *services, *nodes, *slices;
    plb_timer *sync; /* coalesces informer events into one pass */
};

/* clang-format off */
static const struct plb_setting lf_settings[] = {
    {.name = "kubeconfig", .type = PLB_SET_PATH, .offset = offsetof(struct lf_config, kubeconfig),
     .flags = PLB_SET_REQUIRED, .doc = "Kubeconfig of the cluster"},
    {.name = "output_file", .type = PLB_SET_PATH,
     .offset = offsetof(struct lf_config, output_file), .flags = PLB_SET_REQUIRED,
     .doc = "The file balancers are provisioned into"},
    {.name = "class", .type = PLB_SET_STRING, .offset = offsetof(struct lf_config, lb_class),
     .def = "example.com/lbfile", .doc = "spec.loadBalancerClass this module serves"},
    {.name = "max_targets", .type = PLB_SET_INT,
     .offset = offsetof(struct lf_config, max_targets), .def = "3", .min = 1, .max = 1000,
     .doc = "Targets one balancer holds"},
    PLB_SETTINGS_END,
};
/* clang-format on */

struct pass {
    struct lf *lf;
    FILE *out;
    unsigned index;
};

static void
status_done(plb_kube_op *op, const struct plb_kube_result *r, void *arg)
{
    (void)op;
    (void)r;
    (void)arg;
}

static void
provision_one(const plb_obj *svc, void *arg)
{
    struct pass *p = arg;
    struct lf *lf = p->lf;
    const struct plb_host *h = lf->host;
    const char *type = h->obj->str(h->obj->get(svc, "spec", "type", NULL));
    const char *cls = h->obj->str(h->obj->get(svc, "spec", "loadBalancerClass", NULL));
    const char *ns = h->obj->str(h->obj->get(svc, "metadata", "namespace", NULL));
    const char *name = h->obj->str(h->obj->get(svc, "metadata", "name", NULL));
    if (!type || strcmp(type, "LoadBalancer") != 0 || !cls || strcmp(cls, lf->cfg->lb_class) != 0 ||
        !ns || !name)
        return;

    struct plb_lb_targets t = {.size = sizeof(t)};
    char err[256];
    int rc = h->lb->select_targets(lf->ctx, svc, PLB_LB_POLICY_TRAFFIC, NULL, lf->nodes, lf->slices,
                                   (size_t)lf->cfg->max_targets, &t, err, sizeof(err));
    if (rc < 0) {
        PLB_LOG(h, lf->ctx, PLB_LOG_ERROR, PLB_KV("service", name), "target selection failed");
        return;
    }
    char addr[32];
    snprintf(addr, sizeof(addr), "192.0.2.%u", 10 + p->index++);
    fprintf(p->out, "%s/%s %s", ns, name, addr);
    for (size_t i = 0; i < t.n; i++)
        fprintf(p->out, "%s%s=%s", i ? "," : " ", PLB_LB_TARGET(&t, i)->node,
                PLB_LB_TARGET(&t, i)->ip);
    fputc('\n', p->out);

    if (t.dropped) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%zu nodes left out: a balancer holds %lld targets", t.dropped,
                 (long long)lf->cfg->max_targets);
        struct plb_kube_event ev = {.size = sizeof(ev),
                                    .involved = svc,
                                    .kind = "Service",
                                    .api_version = "v1",
                                    .type = "Warning",
                                    .reason = "TooManyTargets",
                                    .message = msg};
        int e;
        h->kube->event(lf->kube, &ev, status_done, NULL, &e);
    }
    h->lb->targets_clear(&t);

    const char *have = h->obj->str(h->obj->get(
        h->obj->at(h->obj->get(svc, "status", "loadBalancer", "ingress", NULL), 0), "ip", NULL));
    if (!have || strcmp(have, addr) != 0) {
        const char *ips[] = {addr};
        int e;
        if (!h->lb->status_write(lf->kube, svc, ips, 1, "VIP", status_done, NULL, &e))
            PLB_LOG(h, lf->ctx, PLB_LOG_ERROR, PLB_KV("service", name), "status write failed");
    }
}

static void
on_sync(plb_timer *timer, void *arg)
{
    struct lf *lf = arg;
    (void)timer;
    if (!lf->host->kube->informer_synced(lf->services) ||
        !lf->host->kube->informer_synced(lf->nodes) || !lf->host->kube->informer_synced(lf->slices))
        return;
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", lf->cfg->output_file);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        PLB_LOG(lf->host, lf->ctx, PLB_LOG_ERROR, PLB_KV("path", tmp),
                "cannot write the output file");
        return;
    }
    struct pass p = {.lf = lf, .out = out};
    lf->host->kube->informer_foreach(lf->services, provision_one, &p);
    if (fclose(out) != 0 || rename(tmp, lf->cfg->output_file) != 0)
        PLB_LOG(lf->host, lf->ctx, PLB_LOG_ERROR, PLB_KV("path", lf->cfg->output_file),
                "cannot write the output file");
}

static void
kick(struct lf *lf)
{
    if (!lf->host->loop->timer_pending(lf->sync))
        lf->host->loop->timer_arm(lf->sync, 20, 0, 0);
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

static plb_informer *
watch(struct lf *lf, const char *api_version, const char *resource)
{
    struct plb_informer_opts o = {
        .size = sizeof(o),
        .ref = &(const struct plb_kube_ref){.size = sizeof(struct plb_kube_ref),
                                            .api_version = api_version,
                                            .resource = resource},
        .on_add = on_add,
        .on_update = on_update,
        .on_delete = on_add,
        .on_synced = on_synced,
        .arg = lf,
    };
    int err;
    return lf->host->kube->informer_new(lf->kube, &o, &err);
}

static int
lf_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    (void)err;
    (void)errlen;
    struct lf *lf = host->mem->alloc(sizeof(*lf));
    if (!lf)
        return -ENOMEM;
    lf->host = host;
    lf->ctx = ctx;
    lf->cfg = config;
    lf->sync = host->loop->timer_new(ctx, on_sync, lf);
    if (!lf->sync) {
        host->mem->free(lf);
        return -ENOMEM;
    }
    *state = lf;
    return 0;
}

static int
lf_start(void *state, char *err, size_t errlen)
{
    struct lf *lf = state;
    struct plb_kube_opts o = {.size = sizeof(o), .kubeconfig = lf->cfg->kubeconfig};
    lf->kube = lf->host->kube->client_new(lf->ctx, &o, err, errlen);
    if (!lf->kube)
        return -EINVAL; /* err says why; the daemon logs it */
    lf->services = watch(lf, "v1", "services");
    lf->nodes = watch(lf, "v1", "nodes");
    lf->slices = watch(lf, "discovery.k8s.io/v1", "endpointslices");
    return (lf->services && lf->nodes && lf->slices) ? 0 : -ENOMEM;
}

static void
lf_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct lf *lf = state;
    (void)grace_ms;
    lf->host->loop->timer_cancel(lf->sync);
    lf->host->kube->informer_free(lf->services);
    lf->host->kube->informer_free(lf->nodes);
    lf->host->kube->informer_free(lf->slices);
    lf->services = lf->nodes = lf->slices = NULL;
    lf->host->links->done(d);
}

static void
lf_destroy(void *state)
{
    struct lf *lf = state;
    lf->host->kube->informer_free(lf->services);
    lf->host->kube->informer_free(lf->nodes);
    lf->host->kube->informer_free(lf->slices);
    if (lf->kube)
        lf->host->kube->client_free(lf->kube);
    lf->host->loop->timer_free(lf->sync);
    lf->host->mem->free(lf);
}

PLB_MODULE_EXPORT = {
    .abi_major = PLB_ABI_MAJOR,
    .abi_minor = PLB_ABI_MINOR,
    .size = sizeof(struct plb_module),
    .name = "lbfile",
    .version = "1.0",
    .description = "Test cloud that provisions Service load balancers into a file",
    .settings = lf_settings,
    .setting_size = sizeof(struct plb_setting),
    .config_size = sizeof(struct lf_config),
    .create = lf_create,
    .start = lf_start,
    .stop = lf_stop,
    .destroy = lf_destroy,
};
