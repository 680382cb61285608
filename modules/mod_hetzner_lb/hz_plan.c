/*
 * hz_plan.c: which balancer a Service uses (ownership, adoption, the
 * migration rules of earlier releases), and the minimal Hetzner writes that
 * turn the actual balancer into the desired one.
 *
 * Nothing here deletes: a balancer is deleted only by the reconciler, only
 * when it carries the robotlb/service-uid label of a Service that no longer
 * asks for one, and never by its name.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hz.h"

const char *
hz_op_name(enum hz_op_kind k)
{
    switch (k) {
    case HZ_OP_SET_LABELS:
        return "set_labels";
    case HZ_OP_ATTACH_NETWORK:
        return "attach_to_network";
    case HZ_OP_DETACH_NETWORK:
        return "detach_from_network";
    case HZ_OP_ENABLE_PUBLIC:
        return "enable_public_interface";
    case HZ_OP_DISABLE_PUBLIC:
        return "disable_public_interface";
    case HZ_OP_CHANGE_ALGORITHM:
        return "change_algorithm";
    case HZ_OP_REMOVE_TARGET:
        return "remove_target";
    case HZ_OP_DELETE_SERVICE:
        return "delete_service";
    case HZ_OP_CHANGE_TYPE:
        return "change_type";
    case HZ_OP_ADD_SERVICE:
        return "add_service";
    case HZ_OP_UPDATE_SERVICE:
        return "update_service";
    case HZ_OP_ADD_TARGET:
        return "add_target";
    case HZ_OP_CHANGE_DNS_PTR:
        return "change_dns_ptr";
    case HZ_OP_PROTECT:
        return "change_protection";
    }
    return "?";
}

void
hz_plan_clear(struct hz_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        hz_free(p->ops[i].path);
        hz_free(p->ops[i].target_ip);
        json_decref(p->ops[i].body);
    }
    hz_free(p->ops);
    p->ops = NULL;
    p->n = 0;
}

/* Append an op; steals body (also on failure). 0 or -ENOMEM. */
static int
push(struct hz_plan *p, size_t *cap, const struct hz_actual *a, enum hz_op_kind k, json_t *body,
     const char *ip)
{
    struct hz_op op = {.kind = k, .body = body};
    if (!body)
        return -ENOMEM;
    if (k == HZ_OP_SET_LABELS) {
        op.method = "PUT";
        op.path = hz_asprintf("/load_balancers/%" PRId64, a->id);
    } else {
        op.method = "POST";
        op.path = hz_asprintf("/load_balancers/%" PRId64 "/actions/%s", a->id, hz_op_name(k));
    }
    if (!op.path || (ip && !(op.target_ip = hz_strdup(ip))))
        goto nomem;
    if (p->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        struct hz_op *no = hz_realloc(p->ops, nc * sizeof(*no));
        if (!no)
            goto nomem;
        p->ops = no;
        *cap = nc;
    }
    p->ops[p->n++] = op;
    return 0;
nomem:
    hz_free(op.path);
    hz_free(op.target_ip);
    json_decref(body);
    return -ENOMEM;
}

static int
has_str(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return 1;
    return 0;
}

static const struct hz_act_service *
act_service(const struct hz_actual *a, int listen)
{
    for (size_t i = 0; i < a->nservices; i++)
        if (a->services[i].listen == listen)
            return &a->services[i];
    return NULL;
}

static int
want_service(const struct hz_desired *d, int listen)
{
    for (size_t i = 0; i < d->nservices; i++)
        if (d->services[i].listen == listen)
            return 1;
    return 0;
}

static int
str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* Does the actual service differ from what d wants for s? */
static int
service_differs(const struct hz_desired *d, const struct hz_svc_port *s,
                const struct hz_act_service *x)
{
    return x->dest != s->dest || x->proxy != s->proxy || x->hc_interval != d->interval ||
           x->hc_timeout != d->timeout || x->hc_retries != d->retries ||
           hz_http_differs(hz_port_http(d, s), s, &x->http);
}

int
hz_plan_build(const struct hz_desired *d, const struct hz_actual *a, int64_t network_id,
              struct hz_plan *out)
{
    struct hz_plan p = {0};
    size_t cap = 0;
    int rc;

    *out = p;
    /* Only a balancer labelled for this Service, or an unlabelled one
     * being adopted, is ever changed. */
    if (a->uid && !str_eq(a->uid, d->uid))
        return -EPERM;
    /* Adoption, or a label someone removed: add ours, keep the others
     * (PUT replaces the whole set). A shared group's balancer (no uid)
     * carries its group's labels instead (hz_plan_labels). */
    if (d->uid && !str_eq(a->uid, d->uid)) {
        json_t *labels = json_deep_copy(a->labels ? a->labels : json_object());
        if (labels && json_object_set_new(labels, HZ_LABEL_UID, json_string(d->uid)) < 0) {
            json_decref(labels);
            labels = NULL;
        }
        if ((rc = push(&p, &cap, a, HZ_OP_SET_LABELS,
                       labels ? json_pack("{s:o}", "labels", labels) : NULL, NULL)) < 0)
            goto fail;
    }
    if (network_id > 0 && !hz_actual_on_network(a, network_id)) {
        if ((rc = push(&p, &cap, a, HZ_OP_ATTACH_NETWORK, hz_attach_body(d, network_id), NULL)) < 0)
            goto fail;
    } else if (network_id > 0) {
        /* On the network it asks for: leave the ones it asked for before. */
        for (size_t i = 0; i < a->nnets; i++) {
            if (a->nets[i].network == network_id)
                continue;
            if ((rc = push(&p, &cap, a, HZ_OP_DETACH_NETWORK,
                           json_pack("{s:I}", "network", (json_int_t)a->nets[i].network), NULL)) <
                0)
                goto fail;
        }
    }
    /* After the network: Hetzner refuses a private-only balancer without one. */
    if (a->public_enabled != d->public_iface &&
        (rc = push(&p, &cap, a, d->public_iface ? HZ_OP_ENABLE_PUBLIC : HZ_OP_DISABLE_PUBLIC,
                   json_object(), NULL)) < 0)
        goto fail;
    /* hccm's reverse DNS of each public IP the Service names one for */
    for (int v6 = 0; v6 < 2; v6++) {
        const char *want = v6 ? d->rdns6 : d->rdns4, *ip = v6 ? a->ipv6 : a->ipv4;
        if (want && ip && !str_eq(want, v6 ? a->dns_ptr6 : a->dns_ptr4) &&
            (rc = push(&p, &cap, a, HZ_OP_CHANGE_DNS_PTR,
                       json_pack("{s:s, s:s}", "ip", ip, "dns_ptr", want), NULL)) < 0)
            goto fail;
    }
    if (a->algorithm != d->algorithm &&
        (rc = push(&p, &cap, a, HZ_OP_CHANGE_ALGORITHM,
                   json_pack("{s:s}", "type", hz_algorithm_api_name(d->algorithm)), NULL)) < 0)
        goto fail;
    for (size_t i = 0; i < a->nip_targets; i++) {
        const char *ip = a->ip_targets[i];
        if (has_str(d->targets, d->ntargets, ip))
            continue;
        if ((rc = push(&p, &cap, a, HZ_OP_REMOVE_TARGET,
                       json_pack("{s:s, s:{s:s}}", "type", "ip", "ip", "ip", ip), ip)) < 0)
            goto fail;
    }
    for (size_t i = 0; i < a->nservices; i++) {
        if (want_service(d, a->services[i].listen))
            continue;
        if ((rc = push(&p, &cap, a, HZ_OP_DELETE_SERVICE,
                       json_pack("{s:i}", "listen_port", a->services[i].listen), NULL)) < 0)
            goto fail;
    }
    /* After the removals, so that a smaller type can hold what is left. */
    if (!str_eq(a->type, d->type) &&
        (rc = push(&p, &cap, a, HZ_OP_CHANGE_TYPE,
                   json_pack("{s:s}", "load_balancer_type", d->type), NULL)) < 0)
        goto fail;
    /* Updates before additions: a redirect given up frees port 80 for the
     * service added on it. */
    for (int add = 0; add < 2; add++) {
        for (size_t i = 0; i < d->nservices; i++) {
            const struct hz_act_service *x = act_service(a, d->services[i].listen);
            if ((x == NULL) != add || (x && !service_differs(d, &d->services[i], x)))
                continue;
            if ((rc = push(&p, &cap, a, x ? HZ_OP_UPDATE_SERVICE : HZ_OP_ADD_SERVICE,
                           hz_service_json(d, &d->services[i]), NULL)) < 0)
                goto fail;
        }
    }
    for (size_t i = 0; i < d->ntargets; i++) {
        const char *ip = d->targets[i];
        if (has_str(a->ip_targets, a->nip_targets, ip) || has_str(d->targets, i, ip))
            continue;
        if ((rc = push(&p, &cap, a, HZ_OP_ADD_TARGET,
                       json_pack("{s:s, s:{s:s}}", "type", "ip", "ip", "ip", ip), ip)) < 0)
            goto fail;
    }
    /* prismlb's own: delete protection as the Service says, when it says */
    if (d->protect_given && !d->protect != !a->protect_delete &&
        (rc = push(&p, &cap, a, HZ_OP_PROTECT, json_pack("{s:b}", "delete", d->protect), NULL)) < 0)
        goto fail;
    *out = p;
    return 0;
fail:
    hz_plan_clear(&p);
    *out = p;
    return rc;
}

int
hz_plan_labels(const json_t *set, const json_t *drop, const struct hz_actual *a, struct hz_plan *p)
{
    size_t cap = p->n;
    json_t *want = hz_group_label_edit(a->labels, set, drop), *body;
    if (!want)
        return -ENOMEM;
    if (a->labels ? json_equal(want, a->labels) : json_object_size(want) == 0) {
        json_decref(want);
        return 0;
    }
    if (!(body = json_pack("{s:o}", "labels", want)) ||
        push(p, &cap, a, HZ_OP_SET_LABELS, body, NULL) < 0)
        return -ENOMEM; /* push stole body */
    /* first: the other writes come after the labels, as on adoption */
    struct hz_op op = p->ops[p->n - 1];
    memmove(p->ops + 1, p->ops, (p->n - 1) * sizeof(*p->ops));
    p->ops[0] = op;
    return 0;
}

/* ------------------------------------------------------------------ */

int
hz_targets_match_nodes(const struct hz_actual *a, const char *const *ips, size_t nips)
{
    int hit = 0;
    if (a->nother_targets || a->nip_targets == 0)
        return 0;
    for (size_t i = 0; i < a->nip_targets && !hit; i++)
        for (size_t j = 0; j < nips && !hit; j++)
            hit = strcmp(a->ip_targets[i], ips[j]) == 0;
    return hit;
}

/* 1 when a is a shared group's balancer: never adopted by a Service. */
static int
shared(const struct hz_actual *a)
{
    return json_object_get(a->labels, HZ_GROUP_LABEL) != NULL;
}

void
hz_own_decide(const struct hz_own_in *in, struct hz_own_out *out)
{
    const struct hz_actual *b;

    memset(out, 0, sizeof(*out));
    /* Found by its label: setting a cluster name later, or changing the
     * annotation, renames nothing. */
    if (in->labelled) {
        out->kind = HZ_OWN_MANAGE;
        out->lb = in->labelled;
        return;
    }
    /* hcloud-cloud-controller-manager served the Service: its label names
     * the Service's UID, so the balancer is the Service's whatever it
     * targets, and it is taken over as it stands (name and IPs kept). */
    if (in->by_hccm && !in->by_hccm->uid && !shared(in->by_hccm)) {
        out->kind = HZ_OWN_ADOPT;
        out->lb = in->by_hccm;
        return;
    }
    /* Every rule below looks at unlabelled balancers, which can only be
     * told apart by whether they target the Service's nodes. */
    if (in->nnode_ips == 0) {
        const struct hz_actual *c = (in->by_legacy && !in->annotated && !in->by_legacy->uid)
                                        ? in->by_legacy
                                    : (in->by_name && !in->by_name->uid) ? in->by_name
                                                                         : NULL;
        out->kind = HZ_OWN_WAIT;
        if (c)
            snprintf(out->warning, sizeof(out->warning),
                     "the service has no target nodes, so it cannot be told whether the "
                     "unlabelled balancer \"%s\" is its own; waiting until it has some",
                     c->name);
        else
            snprintf(out->warning, sizeof(out->warning),
                     "the service has no target nodes; its balancer is created once it has "
                     "some");
        return;
    }
    /* Earlier releases named the balancer "<service>" and left it
     * unlabelled: adopt it if it targets the Service's nodes, else leave it
     * alone without a word and create a new one. */
    b = in->annotated ? NULL : in->by_legacy;
    if (b && !b->uid && !shared(b) && hz_targets_match_nodes(b, in->node_ips, in->nnode_ips)) {
        out->kind = HZ_OWN_ADOPT;
        out->lb = b;
        return;
    }
    b = in->by_name;
    if (b && b->uid && strcmp(b->uid, in->uid) == 0) {
        out->kind = HZ_OWN_MANAGE; /* the label list lagged behind */
        out->lb = b;
        return;
    }
    if (b && b->uid) {
        out->kind = HZ_OWN_BLOCKED;
        snprintf(out->warning, sizeof(out->warning),
                 "the balancer name \"%s\" is taken by a balancer labelled for another "
                 "service (%s=%s); it is left alone. If that service was this one before it "
                 "was recreated and no service with UID %s is left, hand it over with "
                 "hcloud load-balancer add-label --overwrite '%s' %s=%s, or delete it",
                 b->name, HZ_LABEL_UID, b->uid, b->uid, b->name, HZ_LABEL_UID, in->uid);
        return;
    }
    if (b && shared(b)) {
        out->kind = HZ_OWN_BLOCKED;
        snprintf(out->warning, sizeof(out->warning),
                 "the balancer name \"%s\" is taken by the shared balancer of group \"%s\" "
                 "(%s); it is left alone: join the group with that annotation instead of "
                 "naming its balancer",
                 b->name, json_string_value(json_object_get(b->labels, HZ_GROUP_LABEL)),
                 HZ_OWN_SHARED);
        return;
    }
    if (b) {
        if (hz_targets_match_nodes(b, in->node_ips, in->nnode_ips)) {
            out->kind = HZ_OWN_ADOPT;
            out->lb = b;
            return;
        }
        out->kind = HZ_OWN_BLOCKED;
        snprintf(out->warning, sizeof(out->warning),
                 "the balancer name \"%s\" is taken by an unlabelled balancer that does not "
                 "target the nodes of the service; it is left alone. To hand it to this "
                 "service: hcloud load-balancer add-label '%s' %s=%s",
                 b->name, b->name, HZ_LABEL_UID, in->uid);
        return;
    }
    out->kind = HZ_OWN_CREATE;
}
