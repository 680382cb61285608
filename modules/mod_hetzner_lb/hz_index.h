/*
 * hz_index.h: which Services an informer event can change (pure; no I/O,
 * no host calls), so that an event queues only those:
 *
 *  - a Service event queues that Service;
 *  - a Node event queues nothing unless the node's eligibility changed:
 *    its fingerprint (hz_kube.c folds in the Ready condition,
 *    spec.unschedulable, the labels and the InternalIPs — never a
 *    heartbeat's timestamps) differs from the last one seen, or the node
 *    appeared or went. Then every Service of ours whose targets are not
 *    the Local ones is queued, and of the Local ones those whose
 *    EndpointSlices name the node;
 *  - an EndpointSlice event queues its Service (label
 *    kubernetes.io/service-name), and only when that Service is one of ours
 *    under Local: the Cluster and node-selector ones do not look at
 *    endpoints, and the slices of other Services change nothing here.
 * The index remembers every slice's Service and nodes (so that a node
 * finds the Local Services it serves even before they became ours) and
 * every node's fingerprint.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_INDEX_H
#define PRISMLB_MOD_HETZNER_LB_HZ_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "hz.h"

struct hz_index;

/* Called with each Service key ("ns/name", borrowed for the call) an event
 * can change; a key may come more than once (the queue de-duplicates). */
typedef void (*hz_index_emit)(const char *key, void *arg);

/* A new, empty index; NULL when out of memory. */
HZ_HIDDEN struct hz_index *hz_index_new(void);
/* NULL is fine. */
HZ_HIDDEN void hz_index_free(struct hz_index *ix);

/* Service key is ours (ours = 1: type LoadBalancer of our class, not being
 * deleted) with Local targets (local = 1), or not ours / gone (ours = 0).
 * Queues key. 0 or -ENOMEM. */
HZ_HIDDEN int hz_index_service(struct hz_index *ix, const char *key, int ours, int local,
                               hz_index_emit emit, void *arg);
/* Node name with eligibility fingerprint fp, or deleted. Queues what it can
 * change (see above). 0 or -ENOMEM. */
HZ_HIDDEN int hz_index_node(struct hz_index *ix, const char *name, uint64_t fp, int deleted,
                            hz_index_emit emit, void *arg);
/* EndpointSlice slice_key ("ns/name") of Service svc_key (NULL when it has
 * no service-name label) naming nodes[0..n) (borrowed), or deleted.
 * Queues svc_key when it is ours under Local (also the Service it named
 * before, should the label have changed). 0 or -ENOMEM. */
HZ_HIDDEN int hz_index_slice(struct hz_index *ix, const char *slice_key, const char *svc_key,
                             const char *const *nodes, size_t n, int deleted, hz_index_emit emit,
                             void *arg);
/* Every Service of ours, for a full pass (resync, gate open). */
HZ_HIDDEN void hz_index_each_service(const struct hz_index *ix, hz_index_emit emit, void *arg);
/* Services of ours known to the index. */
HZ_HIDDEN size_t hz_index_services(const struct hz_index *ix);

#endif
