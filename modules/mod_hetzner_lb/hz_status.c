/*
 * hz_status: what `prismlb status` shows of a reconciler instance: kind
 * "reconciler", whether the gate is open, and per Service its balancer (id,
 * name, targets) from the last resync list and read-backs, the last error
 * (the warning in force, or a refused write waiting for its recheck) and
 * the seconds to its next check.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_kube_int.h"

/* One Service's row (new) or NULL. */
static plb_obj *
svc_status(const struct hz_kside *ks, const struct hz_svc_state *st, int64_t now,
           int64_t next_resync_ms)
{
    const struct plb_host *h = ks->host;
    plb_obj *o = h->obj->new_object(), *tg = h->obj->new_array();
    const struct hz_lb *lb = hz_lbs_get(ks->by_uid, st->uid);
    char err[600] = "";
    const char *reason;
    json_t *msg;
    int bad = !o || !tg;

    for (size_t i = 0; lb && i < lb->a.nip_targets; i++)
        if (!bad && h->obj->append(tg, h->obj->new_str(lb->a.ip_targets[i])) < 0)
            bad = 1;
    json_object_foreach(st->warned, reason, msg)
    {
        snprintf(err, sizeof(err), "%s: %s", reason, json_string_value(msg) ?: "");
        break;
    }
    if (!err[0] && st->fail_fp && st->retry_at > now)
        snprintf(err, sizeof(err), "a write was refused; checked again in %" PRId64 " s",
                 (st->retry_at - now + 999) / 1000);
    int64_t next = st->fail_fp && st->retry_at > now ? st->retry_at : next_resync_ms;
    if (!bad) {
        plb_obj_put(h, o, "service", h->obj->new_str(st->key), &bad);
        plb_obj_put(h, o, "uid", h->obj->new_str(st->uid ? st->uid : ""), &bad);
        plb_obj_put(h, o, "balancer_id", lb ? h->obj->new_int(lb->a.id) : h->obj->new_null(), &bad);
        plb_obj_put(h, o, "balancer", lb ? h->obj->new_str(lb->a.name) : h->obj->new_null(), &bad);
        plb_obj_put(h, o, "targets", tg, &bad);
        tg = NULL;
        plb_obj_put(h, o, "last_error", h->obj->new_str(err), &bad);
        plb_obj_put(h, o, "next_check_s",
                    next > 0 ? h->obj->new_int(next > now ? (next - now + 999) / 1000 : 0)
                             : h->obj->new_null(),
                    &bad);
    }
    h->obj->unref(tg);
    if (bad) {
        h->obj->unref(o);
        return NULL;
    }
    return o;
}

plb_obj *
hz_kube_status(const struct hz_kside *ks, int gate_open, int64_t next_resync_ms)
{
    const struct plb_host *h = ks->host;
    plb_obj *o = h->obj->new_object(), *svcs = h->obj->new_array();
    int64_t now = h->loop->now_ms(ks->ctx);
    int bad = !o || !svcs;

    for (const struct hz_svc_state *st = ks->states.head; st && !bad; st = st->next) {
        plb_obj *s = svc_status(ks, st, now, gate_open ? next_resync_ms : 0);
        if (!s || h->obj->append(svcs, s) < 0)
            bad = 1;
    }
    if (!bad) {
        plb_obj_put(h, o, "kind", h->obj->new_str("reconciler"), &bad);
        plb_obj_put(h, o, "gate_open", h->obj->new_bool(gate_open), &bad);
    }
    plb_obj_put(h, o, "services", svcs, &bad); /* freed if it cannot be set */
    if (bad) {
        h->obj->unref(o);
        return NULL;
    }
    return o;
}
