/*
 * hz_group.h: shared balancers on the event side (hz_group_sync.c): a
 * group's reconcile, the list of the groups' balancers, the members'
 * finalizer. The decisions are hz_group.c's (pure, hz.h).
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_GROUP_H
#define PRISMLB_MOD_HETZNER_LB_HZ_GROUP_H

#include "hz_kube_int.h"

/* From hz_sync.c: select st's Service's targets and build what it asks
 * for into *d (1 built; 0 nothing to build, the Service warned; -errno).
 * annot_bad: its annotations were found bad (an InvalidAnnotation in
 * force is not cleared). */
HZ_HIDDEN int hz_sync_build(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                            int annot_bad, struct hz_desired *d);
/* From hz_sync.c: write st's Service's status from lb (borrowed) once lb
 * serves it. 0 or -ENOMEM. */
HZ_HIDDEN int hz_status_follow(struct hz_kside *ks, struct hz_svc_state *st,
                               const struct hz_actual *lb);

/* From hz_writes.c: 1 when svc (borrowed) carries finalizer f. */
HZ_HIDDEN int hz_has_finalizer(const struct hz_kside *ks, const plb_obj *svc, const char *f);
/* From hz_writes.c: add (add) or remove the shared group's finalizer
 * HZ_GROUP_FINALIZER of Service ns/name (key). 0, or -ENOMEM when it
 * could not start. */
HZ_HIDDEN int hz_kube_group_finalizer(struct hz_kside *ks, const char *key, const char *ns,
                                      const char *name, int add);

/* The shared group Service svc (borrowed) names (borrowed), or NULL. */
HZ_HIDDEN const char *hz_group_of(const struct hz_kside *ks, const plb_obj *svc);
/* The group side of Service svc's sync (member: the valid
 * group it is a member of, NULL when it is none: not ours, deleted,
 * without the annotation): a member gets the finalizer first, then its
 * group is reconciled at the end of the round (hz_group_round_end); so is
 * every group whose balancer carries its member label without it being a
 * member (its services and label go); a non-member whose label no group balancer carries any more
 * loses the finalizer. 0, or -ENOMEM (synced again). */
HZ_HIDDEN int hz_group_service(struct hz_kside *ks, const plb_obj *svc, const char *member);

/* hz_group_list.c: sync every Service that names a group or holds the
 * group finalizer. */
HZ_HIDDEN void hz_group_queue(struct hz_kside *ks);
/* ... start the list of group balancers unless it is in flight (a group
 * was met from now on). 0 or -ENOMEM. */
HZ_HIDDEN int hz_group_list(struct hz_kside *ks);
/* ... remember lb (borrowed; read back after our writes) as group's
 * balancer, kept over a list that started before. 0 or -ENOMEM. */
HZ_HIDDEN int hz_group_keep(struct hz_kside *ks, const char *group, struct hz_lb *lb);

/* The Services of the cache during one sync round (the cache does not
 * change while the round runs): one walk serves every group reconciled in
 * it. */
struct hz_gidx {
    json_t *uids;         /* UID -> index into svcs */
    json_t *groups;       /* group -> array of indices into svcs */
    const plb_obj **svcs; /* borrowed for the round */
    size_t n, cap;
    int err;
};
/* The index of this round (ks->gidx, built on first use; borrowed), or
 * NULL when out of memory. */
HZ_HIDDEN struct hz_gidx *hz_gidx_get(struct hz_kside *ks);
HZ_HIDDEN void hz_gidx_free(struct hz_gidx *x); /* NULL is fine */

/* A sync round (hz_sync_fire) ended: each group one of its Services'
 * syncs marked is reconciled now, once; then the index of the round's
 * Services by group goes (the cache may change from now on). */
HZ_HIDDEN void hz_group_round_end(struct hz_kside *ks);

#endif
