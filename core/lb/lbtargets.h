/*
 * lbtargets: which nodes a Service of type LoadBalancer should target, for
 * any cloud's load-balancer module (offered through the module ABI).
 *
 * Pure functions over Kubernetes objects held as jansson values; nothing
 * here does I/O.
 *
 *   Cluster policy (the default): every node but cordoned (spec.unschedulable)
 *     and not-ready ones.
 *   Local policy: the nodes kube-proxy serves from, read from the Service's
 *     EndpointSlices: a node with a ready endpoint, or with a terminating
 *     endpoint that still serves while the node has no ready one. Endpoint
 *     conditions decide; node state does not.
 *   Selector (dynamic selection off): the nodes matching a node selector
 *     "k=v,k!=v,k in (a,b),k notin (a,b),!k,k" (all nodes when empty).
 *   Under every policy, nodes labelled
 *     node.kubernetes.io/exclude-from-external-load-balancers stay out.
 *   Targets are the nodes' InternalIP (IPv4 preferred), sorted by node name;
 *   more than max_targets are cut in that order.
 */
#ifndef PRISMLB_LBTARGETS_H
#define PRISMLB_LBTARGETS_H

#include <jansson.h>
#include <stddef.h>

#define CORE_LB_EXCLUDE_LABEL "node.kubernetes.io/exclude-from-external-load-balancers"

/* Every field target selection reads, as informer keep paths (plb_informer_opts.keep,
 * NULL-terminated; metadata name and namespace are always kept): of the Service, of a Node, of
 * an EndpointSlice. The module ABI hands them out (plb_host_lb.keep_*), so a module that trims
 * its informers keeps what selection needs; a reader added below adds its path here. */
extern const char *const core_lb_keep_services[];
extern const char *const core_lb_keep_nodes[];
extern const char *const core_lb_keep_slices[];

enum core_lb_sel_op {
    CORE_LB_SEL_EQ,     /* k=v */
    CORE_LB_SEL_NE,     /* k!=v: absent, or another value */
    CORE_LB_SEL_EXISTS, /* k */
    CORE_LB_SEL_ABSENT, /* !k */
    CORE_LB_SEL_IN,     /* k in (v1,v2): present with one of the values */
    CORE_LB_SEL_NOTIN,  /* k notin (v1,v2): absent, or none of the values */
};

struct core_lb_sel_term {
    enum core_lb_sel_op op;
    char *key;
    char *value;   /* EQ and NE */
    char **values; /* IN and NOTIN: nvalues of them */
    size_t nvalues;
};

struct core_lb_selector {
    size_t n;
    struct core_lb_sel_term *terms;
};

/* Parse a node selector, a Kubernetes label selector: comma-separated
 * terms k=v, k==v, k!=v, k in (v1,v2), k notin (v1,v2), k and !k, all of
 * which must hold. Empty or NULL text gives an empty selector (every
 * node matches). On a syntax error returns -EINVAL with a message in err
 * naming the bad term; -ENOMEM when out of memory. *out is new (free with
 * core_lb_selector_free) on success. */
int core_lb_selector_parse(const char *text, struct core_lb_selector **out, char *err,
                           size_t errlen);
void core_lb_selector_free(struct core_lb_selector *sel);
/* 1 if a labels object (borrowed; NULL means none) matches every term. */
int core_lb_selector_match(const struct core_lb_selector *sel, const json_t *labels);

enum core_lb_policy {
    CORE_LB_POLICY_CLUSTER,
    CORE_LB_POLICY_LOCAL,
    CORE_LB_POLICY_SELECTOR,
};

struct core_lb_target {
    const char *node; /* borrowed from the node object */
    const char *ip;   /* borrowed from the node object */
};

struct core_lb_targets {
    size_t n;
    struct core_lb_target *v; /* new array (core_free) */
    size_t dropped;           /* selected nodes cut by max_targets */
    size_t no_address;        /* selected nodes without an InternalIP */
};

/* The policy of a Service: Local when spec.externalTrafficPolicy is
 * "Local", else Cluster; SELECTOR when dynamic is 0. */
enum core_lb_policy core_lb_policy_of(const json_t *svc, int dynamic);

/* Select the targets of svc among nodes. slices may be every EndpointSlice
 * known; only those of svc (label kubernetes.io/service-name and
 * namespace) count. selector is used under CORE_LB_POLICY_SELECTOR (NULL:
 * every node). max_targets 0 means no cap. All objects are borrowed and
 * must outlive *out. 0 or -ENOMEM. */
int core_lb_select_targets(const json_t *svc, enum core_lb_policy policy,
                           const struct core_lb_selector *selector, const json_t *const *nodes,
                           size_t nnodes, const json_t *const *slices, size_t nslices,
                           size_t max_targets, struct core_lb_targets *out);
void core_lb_targets_clear(struct core_lb_targets *t);

/* Node state helpers. */
int core_lb_node_ready(const json_t *node);
int core_lb_node_cordoned(const json_t *node);
const char *core_lb_node_internal_ip(const json_t *node);

#endif
