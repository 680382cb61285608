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

#endif
