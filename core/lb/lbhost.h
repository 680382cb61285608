/*
 * lbhost: the module ABI's Service load-balancer functions (target
 * selection over informer caches, status writes), on top of lbtargets.
 */
#ifndef PRISMLB_LBHOST_H
#define PRISMLB_LBHOST_H

#include "prismlb/module.h"

int core_lb_host_select(plb_ctx *ctx, const plb_obj *svc, enum plb_lb_policy policy,
                        const char *node_selector, plb_informer *nodes, plb_informer *slices,
                        size_t max_targets, struct plb_lb_targets *out, char *err, size_t errlen);
void core_lb_host_clear(struct plb_lb_targets *t);
int core_lb_host_selector_check(const char *node_selector, char *err, size_t errlen);
plb_kube_op *core_lb_host_status_write(plb_kube *k, const plb_obj *svc, const char *const *ips,
                                       size_t n, const char *ip_mode, plb_kube_done_cb done,
                                       void *arg, int *err);
plb_kube_op *core_lb_host_status_write_ingress(plb_kube *k, const plb_obj *svc,
                                               const struct plb_lb_ingress *v, size_t n,
                                               size_t entry_size, plb_kube_done_cb done, void *arg,
                                               int *err);
/* The merge patch of status.loadBalancer.ingress to the n entries of v, entry_size bytes apart
 * (pure): new text (core_free), or NULL with *err -EINVAL (an entry with neither or both of ip
 * and hostname, an ip_mode without an ip, entry_size below 3.2's) or -ENOMEM. */
char *core_lb_ingress_patch(const struct plb_lb_ingress *v, size_t n, size_t entry_size, int *err);

#endif
