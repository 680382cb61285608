/*
 * hz_refusal.c: what a Service is told when Hetzner refuses what it asks
 * for, or cannot give it (see README.md, "Refusals"): one warning Event per
 * refusal, whose reason says what was refused and whose message names the
 * value, where it comes from (annotation or setting) and Hetzner's error
 * code, message and invalid_input fields. Refusals retried on the recheck
 * cycle are sent each time (hz_warn_each: the core aggregates them into one
 * Event with a count); lasting conditions (a location Hetzner cannot
 * change, a balancer without targets) once while they hold.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_kube.h"
#include "hz_refusal.h"

/* The refusals a reconcile reports; cleared when one passes without. */
static const char *const refusal_reasons[] = {
    "InvalidBalancerType", "InvalidLocation",           "CreateRefused",
    "TargetRefused",       "NetworkAttachRefused",      "BalancerUpdateRefused",
    "CertificateNotFound", "CertificateIssuanceFailed",
};

void
hz_refusals_clear(struct hz_svc_state *st)
{
    for (size_t i = 0; i < sizeof(refusal_reasons) / sizeof(refusal_reasons[0]); i++)
        hz_warn_clear(st, refusal_reasons[i]);
}

/* Hetzner's answer as an Event's text: its error code and message and, for
 * invalid_input, each field it names with what is wrong with it. */
static void
refusal_text(const struct hz_result *res, char *out, size_t len)
{
    json_t *fields =
        json_object_get(json_object_get(json_object_get(res->body, "error"), "details"), "fields");
    json_t *f, *m;
    size_t i, j, n;
    if (res->code)
        n = (size_t)snprintf(out, len, "%s: %s", res->code, res->message ? res->message : "-");
    else
        n = (size_t)snprintf(out, len, "HTTP %d: %s", res->status,
                             res->message ? res->message : "no error code");
    json_array_foreach(fields, i, f)
    {
        const char *name = json_string_value(json_object_get(f, "name"));
        json_array_foreach(json_object_get(f, "messages"), j, m)
        {
            if (n < len && name && json_string_value(m))
                n += (size_t)snprintf(out + n, len - n, " [%s: %s]", name, json_string_value(m));
        }
    }
}

/* 1 when invalid_input names field (or, with alt, that one) in res. */
static int
refused_field(const struct hz_result *res, const char *field, const char *alt)
{
    json_t *fields =
        json_object_get(json_object_get(json_object_get(res->body, "error"), "details"), "fields");
    json_t *f;
    size_t i;
    json_array_foreach(fields, i, f)
    {
        const char *name = json_string_value(json_object_get(f, "name"));
        if (name && (strcmp(name, field) == 0 || (alt && strcmp(name, alt) == 0)))
            return 1;
    }
    return 0;
}

/* A warning Event about a refusal, every time (the core aggregates them
 * into one Event per reason and text). */
static void refused(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                    const char *reason, const char *fmt, ...) PLB_PRINTF(5, 6);
static void
refused(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc, const char *reason,
        const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (hz_warn_each(st, svc, reason, msg) < 0)
        PLB_ERR(ks->host, ks->ctx, PLB_KV("service", st->key), "out of memory");
}

/* Where a value of the Service comes from: the annotation that gave it
 * (ann names robotlb's for type, location or network; type and location
 * may have come from hccm's), or the setting. */
static const char *
source_of(const struct hz_svc_state *st, const char *ann, const char *setting)
{
    if (!hz_state_good(st))
        return setting;
    if (!strcmp(ann, HZ_ANN_TYPE))
        return st->good.type ? st->good.type_key : setting;
    if (!strcmp(ann, HZ_ANN_LOCATION))
        return st->good.location ? st->good.location_key : setting;
    if (!strcmp(ann, HZ_HCCM_NETWORK_ZONE))
        return st->good.network_zone ? ann : setting;
    return st->good.network ? ann : setting;
}

/* Where the Service's location or network zone comes from. */
static const char *
placement_source(const struct hz_svc_state *st, const struct hz_desired *d)
{
    return d->by_zone ? source_of(st, HZ_HCCM_NETWORK_ZONE, "default_network_zone")
                      : source_of(st, HZ_ANN_LOCATION, "default_lb_location");
}

/* A service of d refused with not_found: an ID of one of its certificates
 * is no certificate any more (deleted, perhaps uploaded again under the
 * same name). d's names are dropped from the index, so the next reconcile
 * looks them up again (a name that was not the culprit costs one GET). */
static void
forget_certs(struct hz_kside *ks, const struct hz_desired *d, const struct hz_result *res)
{
    if (res->status == 404 && res->code && strcmp(res->code, "not_found") == 0 &&
        hz_cert_forget(ks->certs, d->https, d->nhttps) > 0)
        PLB_INFO(ks->host, ks->ctx, PLB_KV("balancer", d->name),
                 "Hetzner no longer knows a certificate ID the balancer was sent: its names are "
                 "looked up again");
}

void
hz_refused_op(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
              const struct hz_desired *d, const char *lb_name, enum hz_op_kind kind, const char *ip,
              const struct hz_result *res)
{
    char why[768];
    refusal_text(res, why, sizeof(why));
    if (kind == HZ_OP_ADD_SERVICE || kind == HZ_OP_UPDATE_SERVICE)
        forget_certs(ks, d, res);
    switch (kind) {
    case HZ_OP_ADD_TARGET:
        refused(ks, st, svc, "TargetRefused",
                "Hetzner refused target %s (a node's InternalIP) of balancer \"%s\": %s; tried "
                "again every refused_recheck_interval",
                ip ? ip : "-", lb_name, why);
        break;
    case HZ_OP_CHANGE_TYPE:
        refused(ks, st, svc, "InvalidBalancerType",
                "Hetzner refused to change balancer \"%s\" to the balancer type \"%s\" (%s): %s",
                lb_name, d->type, source_of(st, HZ_ANN_TYPE, "default_balancer_type"), why);
        break;
    case HZ_OP_ATTACH_NETWORK:
        refused(ks, st, svc, "NetworkAttachRefused",
                "Hetzner refused to attach balancer \"%s\" to the network \"%s\" (%s)%s%s%s%s%s%s: "
                "%s; "
                "it reaches no target, so the Service's status is not written until it is "
                "attached",
                lb_name, d->network, source_of(st, HZ_ANN_NETWORK, "default_network"),
                d->private_ip ? " with the IP \"" : "", d->private_ip ? d->private_ip : "",
                d->private_ip ? "\" (" HZ_ANN_PRIVATE_IP ")" : "",
                d->private_subnet ? " in the subnet \"" : "",
                d->private_subnet ? d->private_subnet : "", d->private_subnet ? "\"" : "", why);
        break;
    default:
        refused(ks, st, svc, "BalancerUpdateRefused", "Hetzner refused %s on balancer \"%s\": %s",
                hz_op_name(kind), lb_name, why);
        break;
    }
}

void
hz_refused_create(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                  const struct hz_desired *d, const struct hz_result *res)
{
    char why[768];
    refusal_text(res, why, sizeof(why));
    forget_certs(ks, d, res);
    if (refused_field(res, "load_balancer_type", NULL))
        refused(ks, st, svc, "InvalidBalancerType",
                "Hetzner refused to create balancer \"%s\" of the balancer type \"%s\" (%s): %s",
                d->name, d->type, source_of(st, HZ_ANN_TYPE, "default_balancer_type"), why);
    else if (refused_field(res, "location", "network_zone"))
        refused(ks, st, svc, "InvalidLocation",
                "Hetzner refused to create balancer \"%s\" in the %s \"%s\" (%s): %s", d->name,
                d->by_zone ? "network zone" : "location", d->location, placement_source(st, d),
                why);
    else
        refused(ks, st, svc, "CreateRefused",
                "Hetzner refused to create balancer \"%s\" (type %s, location %s): %s", d->name,
                d->type, d->location, why);
}

/* Hetzner cannot move a balancer: a Service asking for another location
 * (or network zone) than its balancer's is told so (once while it holds)
 * and keeps it. */
void
hz_location_check(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc,
                  const struct hz_desired *d, const struct hz_actual *lb)
{
    const char *have = d->by_zone ? lb->network_zone : lb->location, *name = lb->name;
    const char *what = d->by_zone ? "network zone" : "location";
    const char *zone = d->by_zone ? "the network zone " : "";
    const char *reason = d->by_zone ? "NetworkZoneUnchangeable" : "LocationUnchangeable";
    char msg[768];
    /* the other one no longer holds: the Service asks by this one now */
    hz_warn_clear(st, d->by_zone ? "LocationUnchangeable" : "NetworkZoneUnchangeable");
    if (!have || strcmp(have, d->location) == 0) {
        hz_warn_clear(st, reason);
        return;
    }
    snprintf(msg, sizeof(msg),
             "the Service asks for the %s \"%s\" (%s) but its balancer \"%s\" is in %s%s, and "
             "Hetzner cannot move a balancer: it stays in %s%s (delete the balancer to have a "
             "new one, with a new IP, created in %s)",
             what, d->location, placement_source(st, d), name ? name : "-", zone, have, zone, have,
             d->location);
    hz_warn_once(st, svc, reason, msg);
}

/* A Service whose balancer has no node to target any more (under Local:
 * no node has a ready endpoint) keeps the balancer and its IP; say so. */
void
hz_targets_check(struct hz_kside *ks, struct hz_svc_state *st, const plb_obj *svc, size_t ntargets,
                 const struct hz_actual *lb)
{
    const char *policy = hz_ks_str(ks, svc, "spec", "externalTrafficPolicy", NULL);
    const char *ip = lb ? lb->ipv4 : NULL;
    char msg[768];
    if (ntargets || !lb) {
        hz_warn_clear(st, "BalancerWithoutTargets");
        return;
    }
    snprintf(msg, sizeof(msg),
             "no node serves the Service now (%s): its balancer \"%s\" loses its targets but "
             "stays, with its IP %s, until a node does",
             ks->cfg->dynamic_node_selector && !st->good.selector_hccm && policy &&
                     strcmp(policy, "Local") == 0
                 ? "externalTrafficPolicy Local and no node has a ready endpoint"
                 : "no node is eligible",
             lb->name ? lb->name : "-", ip ? ip : "-");
    hz_warn_once(st, svc, "BalancerWithoutTargets", msg);
}
