/*
 * hz_kube.c: the lifecycle of mod_hetzner_lb's event side: the Kubernetes
 * client, the work queue and its timers (hz_work.c), the informers
 * (hz_watch.c); the writes in flight cancelled when the gate closes; all
 * of it stopped and freed. What the event side does is in its files (see
 * hz_kube.h).
 */
#include <errno.h>

#include <prismlb/module_util.h>

#include "hz_index.h"
#include "hz_kube_int.h"

int
hz_kube_start(struct hz_kside *ks)
{
    const struct plb_host *h = ks->host;
    struct plb_kube_opts o = {
        .size = sizeof(o), .kubeconfig = ks->cfg->kubeconfig, .context = ks->cfg->kube_context};
    char err[512];
    int rc;
    if (!(ks->kube = h->kube->client_new(ks->ctx, &o, err, sizeof(err)))) {
        PLB_ERR(ks->host, ks->ctx, PLB_KV("error", err), "cannot create the Kubernetes client");
        return -EINVAL;
    }
    ks->states.warn = hz_warn_event;
    ks->states.warn_arg = ks;
    if ((rc = hz_work_start(ks, hz_sync_fire)) < 0)
        return rc;
    if (!ks->index && !(ks->index = hz_index_new()))
        return -ENOMEM;
    return hz_watch_start(ks);
}

void
hz_kube_cancel_writes(struct hz_kside *ks)
{
    hz_kops_cancel(ks);
}

void
hz_kube_stop(struct hz_kside *ks)
{
    hz_kops_cancel(ks);
    hz_work_stop(ks);
    ks->host->kube->informer_free(ks->svc_inf);
    ks->host->kube->informer_free(ks->node_inf);
    ks->host->kube->informer_free(ks->slice_inf);
    ks->svc_inf = ks->node_inf = ks->slice_inf = NULL;
}

void
hz_kube_free(struct hz_kside *ks)
{
    if (!ks->host)
        return;
    hz_kube_stop(ks);
    if (ks->kube)
        ks->host->kube->client_free(ks->kube);
    ks->kube = NULL;
    json_decref(ks->nets);
    ks->nets = NULL;
    hz_cert_free(ks->certs);
    ks->certs = NULL;
    json_decref(ks->fresh);
    ks->fresh = NULL;
    hz_states_clear(&ks->states);
    for (size_t i = 0; i < ks->ndeleted; i++)
        ks->host->obj->unref(ks->deleted[i]);
    hz_free(ks->deleted);
    ks->deleted = NULL;
    ks->ndeleted = 0;
    json_decref(ks->deleting);
    ks->deleting = NULL;
    hz_lbs_free(ks->by_uid);
    ks->by_uid = NULL;
    hz_lbs_free(ks->by_group);
    ks->by_group = NULL;
    json_decref(ks->groups);
    ks->groups = NULL;
    json_decref(ks->dirty);
    ks->dirty = NULL;
    hz_work_free(ks);
    hz_index_free(ks->index);
    ks->index = NULL;
}
