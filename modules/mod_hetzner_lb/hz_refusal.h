/*
 * hz_refusal.h: the warning Events of what Hetzner refuses or cannot do
 * (hz_refusal.c; see README.md, "Refusals"). The reconcile reports the
 * refused answers, the sync the lasting conditions it sees in the resync
 * list; both through the warnings in force of hz_state.h.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_REFUSAL_H
#define PRISMLB_MOD_HETZNER_LB_HZ_REFUSAL_H

#include "hz_api.h"
#include "hz_state.h"

struct hz_kside;

/* A warning Event on st's Service svc (borrowed) for a refused action kind
 * (its target ip for a target) on balancer lb_name while asking for d,
 * with Hetzner's answer res: every time (the core counts repeats into one
 * Event). */
HZ_HIDDEN void hz_refused_op(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                             const struct hz_desired *d, const char *lb_name, enum hz_op_kind kind,
                             const char *ip, const struct hz_result *res);
/* ... for a refused create of d. */
HZ_HIDDEN void hz_refused_create(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                                 const struct hz_desired *d, const struct hz_result *res);
/* A reconcile passed without a refusal: forget the ones in force. */
HZ_HIDDEN void hz_refusals_clear(struct hz_svc_state *st);
/* The Service asks for another location than its balancer lb's (borrowed),
 * which Hetzner cannot change: LocationUnchangeable, once while it
 * holds. */
HZ_HIDDEN void hz_location_check(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                                 const struct hz_desired *d, const struct hz_actual *lb);
/* No node to target (ntargets 0) while balancer lb exists:
 * BalancerWithoutTargets, once while it holds. */
HZ_HIDDEN void hz_targets_check(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                                size_t ntargets, const struct hz_actual *lb);

#endif
