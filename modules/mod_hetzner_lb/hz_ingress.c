/*
 * hz_ingress.c: the Service status mod_hetzner_lb writes:
 * status.loadBalancer.ingress with the balancer's IPv4 (and IPv6 with
 * ipv6_ingress), then its private IPs with private_ingress (a
 * private-only balancer's private IPs alone), with the ipMode the
 * annotations give (struct hz_annot.ip_mode) or default_ip_mode; or
 * instead hccm's hostname alone.
 * Written through the daemon's lb->status_write_ingress (ABI 3.2; on an
 * older daemon lb->status_write, IPs only). The write is a machine of its
 * own per Service (enum hz_status_phase, hz_state.h): one write in flight
 * at a time, a sync that meets one asks for a look after it.
 *
 * Never a status the API server would refuse: just before a write is sent
 * the latest cached Service must still be ours (type LoadBalancer, a class
 * served, the same UID, no deletion; since Kubernetes 1.29 the API server
 * refuses a non-empty ingress on any other type). A write the API server
 * refuses all the same (422) is logged and not sent again as it is (the
 * same ingress onto the Service unchanged, by its resourceVersion); any
 * other failure is written again refused_recheck_interval later.
 */
#include <errno.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_kube_int.h"

/* Append an entry {ip, ipMode ms} to arr for each network lb is in (when
 * priv). 0 or -ENOMEM. */
static int
append_private(json_t *arr, const struct hz_actual *lb, int priv, const char *ms)
{
    for (size_t i = 0; priv && i < lb->nnets; i++)
        if (lb->nets[i].ip &&
            json_array_append_new(arr,
                                  json_pack("{s:s, s:s}", "ip", lb->nets[i].ip, "ipMode", ms)) < 0)
            return -ENOMEM;
    return 0;
}

/* Status ingress of lb for st's Service (new) or NULL: the public IPv4
 * (and IPv6 with ipv6_ingress, or per Service with hccm's ipv6-disabled
 * "false"; never with "true"), then its IP in each network with
 * private_ingress (or per Service hccm's disable-private-ingress "false");
 * for a balancer whose public interface is disabled, its network IPs
 * alone. Or hccm's hostname alone. NULL with *oom set when out of
 * memory. */
static json_t *
ingress_of(const struct hz_kside *ks, const struct hz_svc_state *st, const struct hz_actual *lb,
           int *oom)
{
    const char *v4 = lb->ipv4, *v6 = lb->ipv6;
    int good = hz_state_good(st);
    /* the private IPs after the public ones; without the public interface
     * they are all there is (a Service may not ask for neither) */
    int priv =
        good && st->good.private_ingress >= 0 ? st->good.private_ingress : ks->cfg->private_ingress;
    if (!lb->public_enabled) {
        v4 = v6 = NULL;
        priv = 1;
    }
    /* the annotations' ipMode (hz_annot_parse decides it: robotlb/ip-mode,
     * hccm's uses-proxyprotocol, prismlb's proxy-protocol-ports) */
    int mode = good && st->good.ip_mode >= 0 ? st->good.ip_mode : ks->cfg->default_ip_mode;
    const char *ms = mode == HZ_IPMODE_PROXY ? "Proxy" : "VIP";
    if (good && st->good.ipv6_disabled >= 0 ? st->good.ipv6_disabled : !ks->cfg->ipv6_ingress)
        v6 = NULL;
    json_t *arr = json_array();
    *oom = 0;
    if (!arr) {
        *oom = 1;
        return NULL;
    }
    /* hccm's hostname: the one entry, no IP (a daemon before ABI 3.2
     * writes IPs only, so there the IPs stay) */
    if (good && st->good.hostname && PLB_HAS(ks->host->lb, status_write_ingress)) {
        if (json_array_append_new(arr, json_pack("{s:s}", "hostname", st->good.hostname)) < 0) {
            *oom = 1;
            json_decref(arr);
            return NULL;
        }
        return arr;
    }
    if ((v4 && json_array_append_new(arr, json_pack("{s:s, s:s}", "ip", v4, "ipMode", ms)) < 0) ||
        (v6 && json_array_append_new(arr, json_pack("{s:s, s:s}", "ip", v6, "ipMode", ms)) < 0) ||
        append_private(arr, lb, priv, ms) < 0 || json_array_size(arr) == 0) {
        *oom = v4 || v6 || (priv && lb->nnets); /* one to write, not written */
        json_decref(arr);
        return NULL;
    }
    return arr;
}

/* The current status.loadBalancer.ingress of svc (new) or NULL. */
static json_t *
current_ingress(const struct hz_kside *ks, const plb_obj *svc)
{
    const plb_obj *ing = ks->host->obj->get(svc, "status", "loadBalancer", "ingress", NULL);
    char *t = ing ? ks->host->obj->dump(ing) : NULL;
    json_t *r = t ? json_loads(t, 0, NULL) : NULL;
    if (t)
        ks->host->mem->free(t);
    return r;
}

int
hz_lb_serves(const struct hz_kside *ks, const struct hz_svc_state *st, const struct hz_actual *lb)
{
    const char *net =
        hz_state_good(st) && st->good.network ? st->good.network : ks->cfg->default_network;
    json_t *id = net ? json_object_get(ks->nets, net) : NULL;
    if (!net)
        return 1;
    return json_is_integer(id) && hz_actual_on_network(lb, json_integer_value(id));
}

/* A status write of Service key ended (r NULL: not written, cancelled or
 * never started): its machine back to IDLE, then written again at a sync
 * refused_recheck_interval from now when it failed (none may come sooner:
 * a write that keeps failing is not retried faster than a refusal), not
 * as it is when refused, or at once when AGAIN asked for a look. */
static void
status_ended(struct hz_kside *ks, const char *key, const struct plb_kube_result *r)
{
    struct hz_svc_state *st = hz_state_get(&ks->states, key, 0);
    int again;
    if (!st)
        return;
    again = st->status == HZ_STATUS_AGAIN;
    st->status = HZ_STATUS_IDLE;
    /* kept past here only as the refused write's */
    if (r && r->status == 422) {
        PLB_ERR(ks->host, ks->ctx, PLB_KV("service", key, "error", r->message ? r->message : ""),
                "the API server refused the status: not written again as it is");
        json_decref(st->status_refused);
        st->status_refused = st->status_sent;
        st->status_sent = NULL;
        hz_free(st->refused_rv);
        st->refused_rv = st->status_rv;
        st->status_rv = NULL;
    } else if (!r || r->status < 200 || r->status >= 300) {
        json_decref(st->status_sent);
        st->status_sent = NULL;
        if (!again)
            hz_work_add_after(ks, st->key, ks->cfg->refused_recheck_ms);
    }
    hz_free(st->status_rv);
    st->status_rv = NULL;
    if (again)
        hz_work_add(ks, st->key);
}

/* What start_status_write sends: want's entries (borrowed from it). */
struct status_write {
    const plb_obj *svc;
    struct plb_lb_ingress *v;
    size_t n;
};

static plb_kube_op *
start_status_write(struct hz_kside *ks, void *arg, plb_kube_done_cb done, void *karg, int *err)
{
    struct status_write *w = arg;
    const char **ips;
    plb_kube_op *op;
    if (PLB_HAS(ks->host->lb, status_write_ingress))
        return ks->host->lb->status_write_ingress(ks->kube, w->svc, w->v, w->n, sizeof(*w->v), done,
                                                  karg, err);
    /* before ABI 3.2: IPs (ingress_of wrote no hostname), one ipMode */
    if (!(ips = hz_calloc(w->n * sizeof(*ips)))) {
        *err = -ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < w->n; i++)
        ips[i] = w->v[i].ip;
    op = ks->host->lb->status_write(ks->kube, w->svc, ips, w->n, w->v[0].ip_mode, done, karg, err);
    hz_free(ips);
    return op;
}

/* Send want (borrowed), the ingress st's Service svc (borrowed) should
 * show. 0, or -ENOMEM when it could not be started for want of memory. */
static int
status_send(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc, json_t *want)
{
    struct status_write w = {.svc = svc, .n = json_array_size(want)};
    char *text = json_dumps(want, JSON_COMPACT);
    size_t i;
    json_t *e;
    int rc;
    w.v = hz_calloc(w.n * sizeof(*w.v));
    if (!w.v || !text) {
        hz_free(w.v);
        hz_free(text);
        return -ENOMEM;
    }
    json_array_foreach(want, i, e)
    {
        w.v[i].ip = json_string_value(json_object_get(e, "ip"));
        w.v[i].hostname = json_string_value(json_object_get(e, "hostname"));
        w.v[i].ip_mode = json_string_value(json_object_get(e, "ipMode"));
    }
    PLB_INFO(ks->host, ks->ctx, PLB_KV("service", st->key), "status ingress %s", text);
    hz_free(text);
    const char *rv = hz_ks_str(ks, svc, "metadata", "resourceVersion", NULL);
    char *rvc = rv ? hz_strdup(rv) : NULL;
    if (rv && !rvc) {
        hz_free(w.v);
        return -ENOMEM;
    }
    /* in flight from here: status_ended undoes this if it fails */
    json_decref(st->status_sent);
    st->status_sent = json_incref(want);
    hz_free(st->status_rv);
    st->status_rv = rvc;
    st->status = HZ_STATUS_WRITING;
    rc = hz_kop_run(ks, "status write", start_status_write, &w, status_ended, st->key);
    hz_free(w.v);
    if (rc < 0) {
        /* not started (status_ended ran) or not tracked (it did not) */
        st->status = HZ_STATUS_IDLE;
        json_decref(st->status_sent);
        st->status_sent = NULL;
        hz_free(st->status_rv);
        st->status_rv = NULL;
        /* out of memory: synced again; fenced: the gate decides */
        return rc == -ENOMEM ? rc : 0;
    }
    return 0;
}

/* 1 when want (borrowed) is what the API server refused for the Service
 * svc (borrowed) as it is now: the same ingress, the Service unchanged. */
static int
refused(const struct hz_kside *ks, const struct hz_svc_state *st, const plb_obj *svc,
        const json_t *want)
{
    const char *rv = hz_ks_str(ks, svc, "metadata", "resourceVersion", NULL);
    return st->status_refused && json_equal(want, st->status_refused) && rv && st->refused_rv &&
           strcmp(rv, st->refused_rv) == 0;
}

int
hz_status_update(struct hz_kside *ks, struct hz_svc_state *st, const struct hz_actual *lb)
{
    /* the Service as the cache has it now: one that is no longer ours
     * gets no status (its sync drops it and deletes the balancer) */
    const plb_obj *svc = hz_svc_current(ks, st->key, st->uid);
    json_t *want, *have;
    int oom, rc = 0;
    if (!svc) {
        PLB_DEBUG(ks->host, ks->ctx, PLB_KV("service", st->key),
                  "status not written: the Service is no longer ours");
        return 0;
    }
    want = ingress_of(ks, st, lb, &oom);
    have = current_ingress(ks, svc);
    if (oom) {
        rc = -ENOMEM;
    } else if (want && json_equal(want, have)) {
        /* the Service shows it: a later change of it is written again */
        if (st->status_sent)
            PLB_DEBUG(ks->host, ks->ctx, PLB_KV("service", st->key),
                      "the Service shows the status written");
        json_decref(st->status_sent);
        st->status_sent = NULL;
    } else if (want && st->status != HZ_STATUS_IDLE) {
        st->status = HZ_STATUS_AGAIN; /* one write at a time: look again after it */
    } else if (want && refused(ks, st, svc, want)) {
        PLB_DEBUG(ks->host, ks->ctx, PLB_KV("service", st->key),
                  "status not written: the API server refused it for the Service as it is");
    } else if (want && !json_equal(want, st->status_sent)) {
        rc = status_send(ks, st, svc, want);
    }
    json_decref(want);
    json_decref(have);
    return rc;
}
