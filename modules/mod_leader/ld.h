/*
 * ld.h: private to mod_leader. The configuration and the functions its
 * files offer each other.
 *
 *   le.h, le_machine.c, le_time.c   the election state machine (pure)
 *   le_settings.c                   settings table and the check between
 *                                   settings
 *   mod_leader.c                    descriptor, lifecycle, and the driver:
 *                                   timers, Kubernetes client, gate,
 *                                   metrics, log lines and Events
 */
#ifndef LD_H
#define LD_H

#include <stdint.h>

#include <prismlb/module_util.h>

#include "le.h"

/* Longest identity (with its NUL): a record's holder must fit. */
#define LD_IDENTITY_MAX 254

struct ld_config {
    char *lease_name;
    char *lease_namespace;
    char *identity;
    int64_t lease_duration_ms;
    int64_t renew_deadline_ms;
    int64_t retry_period_ms;
    int release_on_cancel;
    struct plb_kube_settings kube; /* kubeconfig, in_cluster, kube_context, server,
                                      tls_server_name, service_account_dir */
};

extern const struct plb_setting ld_settings[];
int ld_check(const struct plb_host *host, plb_check *chk, const void *config,
             plb_check_report *report);

#endif
