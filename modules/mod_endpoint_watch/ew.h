/*
 * ew.h: private to mod_endpoint_watch. The instance, its configuration and
 * the functions each file offers the others.
 *
 *   config.c             settings table, validators, the cross-setting check
 *   slices.c             EndpointSlices -> "host:port" list (no I/O)
 *   kube.c               the Kubernetes provider: client, informer, status
 *   state.c              the state file: the last discovered endpoints,
 *                        kept across restarts
 *   health.c             metrics and provider health
 *   mod_endpoint_watch.c descriptor, lifecycle, static provider
 *
 * No file calls back into one that calls it: mod_endpoint_watch.c calls
 * config.c, kube.c, state.c and health.c; kube.c calls slices.c, state.c
 * and health.c; the others call none.
 *
 * Two providers publish under the instance (host->links->endpoints_publish): the
 * static one ("static", the configured endpoints, once at start) and the
 * Kubernetes one ("kubernetes", the ready endpoints of the EndpointSlices of
 * one Service, recomputed from every cached slice on each change). The core
 * merges them with every other source a sink follows.
 */
#ifndef EW_H
#define EW_H

#include <stddef.h>
#include <stdint.h>

#include <prismlb/module_util.h>

#define EW_PROVIDER_STATIC "static"
#define EW_PROVIDER_KUBE "kubernetes"
#define EW_PROVIDER_STATE "state" /* the state file's, until discovery answers */

/* ------------------------------------------------------------------------ */
/* Configuration (config.c)                                                 */

struct ew_config {
    struct plb_strv endpoints;
    int enable_discovery;
    struct plb_kube_settings kube; /* kubeconfig, server, tls_server_name,
                                      service_account_dir */
    char *ns;
    char *service_name;
    char *port_name;
    char *state_file;
    int64_t state_file_max_age_ms;
};

extern const struct plb_setting ew_settings[];
int ew_config_check(const struct plb_host *host, plb_check *chk, const void *config,
                    plb_check_report *report);

/* ------------------------------------------------------------------------ */
/* EndpointSlices (slices.c)                                                */

/* What a recomputation found. */
struct ew_list {
    char **v; /* n "host:port" strings, sorted, unique (new) */
    size_t n;
    size_t slices;    /* slices seen */
    size_t not_ready; /* endpoints excluded: conditions.ready false */
    size_t no_port;   /* slices without a port named port_name */
    size_t invalid;   /* addresses that are no IP or hostname */
};

/* Recompute the list from every slice cached in inf (borrowed) using the
 * host's object accessors: for each slice, the port named port_name; for
 * each endpoint not explicitly not ready, each address as "addr:port"
 * ("[addr]:port" for IPv6). 0 or -ENOMEM; *out is filled either way (free
 * with ew_list_clear). */
int ew_slices_list(const struct plb_host *h, const plb_informer *inf, const char *port_name,
                   struct ew_list *out);
void ew_list_clear(const struct plb_host *h, struct ew_list *l);

/* ------------------------------------------------------------------------ */
/* The instance                                                             */

struct ew {
    const struct plb_host *host;
    plb_ctx *ctx;
    const struct ew_config *cfg;
    const char *name;
    plb_metric *updates, *errors;
    plb_timer *beat;      /* liveness heartbeat of the discovery pipeline */
    plb_timer *recompute; /* coalesces informer callbacks into one publish */
    plb_kube *kube;
    plb_informer *inf;
    char *selector;    /* "kubernetes.io/service-name=<service_name>" */
    char service[320]; /* "<ns>/<service_name>", logged as service= */
    char *last;        /* the kubernetes list last published, joined */
    int static_failed;
    int kube_enabled; /* the Kubernetes provider runs */
    int kube_failed;
    int stopping;
    /* state.c */
    int state_published;      /* the "state" provider holds the file's list */
    plb_timer *state_timer;   /* writes a pending list once the second is over */
    char *pending;            /* the list to write (joined), or NULL */
    char *written;            /* the list last written (joined), or NULL */
    int64_t state_written_ms; /* monotonic: the last write */
};

/* ------------------------------------------------------------------------ */
/* Metrics and provider health (health.c)                                   */

/* At start: register the metric families (each series of the instance at
 * 0) and the liveness check, beaten once. 0 or -errno. */
int ew_health_start(struct ew *ew);
/* Beat the liveness check unless every running provider has failed. */
void ew_health_beat(struct ew *ew);
/* Count one update or error of provider. */
void ew_count_update(struct ew *ew, const char *provider);
void ew_count_error(struct ew *ew, const char *provider);
/* Mark a provider failed or recovered, and re-evaluate the instance's
 * health: unhealthy only while every running provider has failed. */
void ew_provider_failed(struct ew *ew, const char *provider, int failed);

/* ------------------------------------------------------------------------ */
/* The Kubernetes provider (kube.c)                                         */

/* Start: decide the client configuration
 * (explicit kubeconfig, in-cluster, $KUBECONFIG, or none: static only with
 * one log line), create the client and the informer. 0, or -ENOMEM (other
 * failures are provider failures: counted, logged, not fatal). */
int ew_kube_start(struct ew *ew);
/* Stop: cancel the watch and every call, free client and informer. Safe
 * when never started; no callback runs afterwards. */
void ew_kube_stop(struct ew *ew);

/* ------------------------------------------------------------------------ */
/* The state file (state.c)                                                 */

#define EW_STATE_MAX_BYTES ((size_t)256 << 10)
#define EW_STATE_MAX_ENTRIES 1024

/* 1 if s is "host:port" (host an IPv4 address, [IPv6] or RFC 1123
 * hostname, port 1-65535). */
int ew_state_valid_endpoint(const char *s);
/* Parse a state file's text (len bytes, changed in place: lines are cut at
 * their '\n'). v (EW_STATE_MAX_ENTRIES slots, the caller's) gets *n
 * pointers into text; *written the time it was written (Unix seconds). 0,
 * or -EINVAL with *why a phrase (static). */
int ew_state_parse(char *text, size_t len, char **v, size_t *n, int64_t *written, const char **why);
/* At start: read state_file (if set) and publish its endpoints as provider
 * "state" when it is sound and young enough; otherwise one warning. Never
 * fails. */
void ew_state_load(struct ew *ew);
/* The Kubernetes provider published a list (joined with ',', borrowed; n
 * entries): the "state" list is dropped, and a non-empty list that
 * changed is written (at most once a second). */
void ew_state_discovered(struct ew *ew, const char *joined, size_t n);
/* At stop: write a pending list now. */
void ew_state_stop(struct ew *ew);
/* Free what the state file keeps (destroy). */
void ew_state_free(struct ew *ew);

#endif
