/*
 * hz_decide.c: what a sync does with a Service once it has selected its
 * targets and built what it asks for (pure: no host call; hz_rec.h): a
 * reconcile or not, and the plan the reconcile sends, built once.
 */
#include <errno.h>
#include <stdio.h>

#include "hz_rec.h"

/* Fold number v into the hash *h. */
static void
fp_i(uint64_t *h, long long v)
{
    char b[24];
    snprintf(b, sizeof(b), "%lld", v);
    hz_fnv1a64_field(h, b);
}

uint64_t
hz_desired_fp(const struct hz_desired *d)
{
    uint64_t h = HZ_FNV1A64_BASIS;
    hz_fnv1a64_field(&h, d->name);
    hz_fnv1a64_field(&h, d->type);
    hz_fnv1a64_field(&h, d->location);
    fp_i(&h, d->by_zone);
    fp_i(&h, d->algorithm);
    hz_fnv1a64_field(&h, d->network);
    hz_fnv1a64_field(&h, d->private_ip);
    hz_fnv1a64_field(&h, d->private_subnet);
    fp_i(&h, d->interval);
    fp_i(&h, d->timeout);
    fp_i(&h, d->retries);
    fp_i(&h, d->proxy);
    fp_i(&h, d->public_iface);
    for (size_t i = 0; i < d->nservices; i++) {
        fp_i(&h, d->services[i].listen);
        fp_i(&h, d->services[i].dest);
        fp_i(&h, d->services[i].proxy);
        fp_i(&h, d->services[i].protocol);
        fp_i(&h, (long long)d->services[i].http);
    }
    for (size_t i = 0; i < d->ntargets; i++)
        hz_fnv1a64_field(&h, d->targets[i]);
    for (size_t i = 0; i < d->nhttps; i++)
        hz_http_fp(&h, &d->https[i]);
    return h;
}

int
hz_sync_decide(const struct hz_sync_in *in, enum hz_sync_verdict *out, struct hz_plan *plan)
{
    *plan = (struct hz_plan){0};
    if (in->running) {
        *out = HZ_SYNC_LATER;
        return 0;
    }
    /* The steady state costs no request: the labelled balancer of the
     * resync list (or read back since) is compared with what is asked. */
    if (in->lb && in->net_known) {
        int rc = hz_plan_build(in->d, in->lb, in->net_id, plan);
        if (rc == -ENOMEM)
            return rc;
        if (rc == 0 && plan->n == 0) {
            *out = HZ_SYNC_SERVED;
            return 0;
        }
        /* -EPERM (labelled for another: not in this index) leaves no plan */
    }
    if (in->fail_fp == in->fp && in->now < in->retry_at) {
        hz_plan_clear(plan);
        *out = HZ_SYNC_HELD;
        return 0;
    }
    *out = HZ_SYNC_RECONCILE;
    return 0;
}
