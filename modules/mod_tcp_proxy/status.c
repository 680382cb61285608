/*
 * status: what `prismlb status` shows of a proxy instance, as a JSON object
 * built with the host's builders: kind "proxy", the listener, and per
 * upstream its address, health (null before the first check or dial),
 * readiness (readyz only, null before the first probe), latency tier and
 * smoothed RTT (null without a sample), active connections and draining.
 */
#include <stdio.h>

#include <prismlb/module_util.h>

#include "tp.h"

plb_obj *
tp_status(void *state)
{
    struct tp *tp = state;
    const struct plb_host *h = tp->host;
    plb_obj *o = h->obj->new_object(), *ups = h->obj->new_array();
    int bad = !o || !ups;
    char listen[300];

    snprintf(listen, sizeof(listen), "%s:%lld", tp->cfg->bind_address,
             (long long)tp->cfg->bind_port);
    for (size_t i = 0; !bad && tp->pool && i < tp_pool_count(tp->pool); i++) {
        const struct tp_up *u = tp_pool_at(tp->pool, i);
        plb_obj *e = h->obj->new_object();
        if (!e) {
            bad = 1;
            break;
        }
        plb_obj_put(h, e, "address", h->obj->new_str(u->addr), &bad);
        plb_obj_put(h, e, "healthy",
                    u->health_known ? h->obj->new_bool(u->healthy) : h->obj->new_null(), &bad);
        plb_obj_put(h, e, "ready",
                    tp->cfg->health_check == TP_CHECK_READYZ && u->ready_known
                        ? h->obj->new_bool(u->ready)
                        : h->obj->new_null(),
                    &bad);
        plb_obj_put(h, e, "tier",
                    tp->cfg->upstream_selection == TP_SEL_LATENCY && u->tier >= 0
                        ? h->obj->new_int(u->tier)
                        : h->obj->new_null(),
                    &bad);
        plb_obj_put(h, e, "rtt_ms",
                    u->has_sample ? h->obj->new_real(u->avg_ms) : h->obj->new_null(), &bad);
        plb_obj_put(h, e, "connections", h->obj->new_int((int64_t)u->nconns), &bad);
        plb_obj_put(h, e, "draining", h->obj->new_bool(u->draining), &bad);
        if (h->obj->append(ups, e) < 0)
            bad = 1;
    }
    if (!bad) {
        plb_obj_put(h, o, "kind", h->obj->new_str("proxy"), &bad);
        plb_obj_put(h, o, "listen", h->obj->new_str(listen), &bad);
        plb_obj_put(h, o, "connections", h->obj->new_int((int64_t)tp_conns_active(tp)), &bad);
    }
    plb_obj_put(h, o, "upstreams", ups, &bad); /* freed if it cannot be set */
    if (bad) {
        h->obj->unref(o);
        return NULL;
    }
    return o;
}
