/*
 * hz_group.c: shared balancers, prismlb's own (pure: no host, no I/O; unit
 * tested). Services annotated prismlb.io/shared-balancer: <group> share
 * one balancer; this file decides what that balancer is:
 *
 *   members   oldest first (creationTimestamp, then UID): the oldest sets
 *             the balancer itself, each member its own ports
 *   clashes   a member asking for a listen port an older member holds
 *             adds nothing at all until the clash is gone
 *   union     the oldest's balancer, every adding member's services (each
 *             with its own member's http settings), the union of their
 *             targets
 *   labels    the group label, one member label per adding member; a
 *             member label is dropped only for a Service known to have
 *             left, never for a UID nobody knows
 *
 * Ownership is by these labels only (hz_group_sync.c finds the balancer by
 * its group label), never by name.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hz.h"

int
hz_group_check(const char *group, int has_balancer, int has_hccm_name, char *err, size_t errlen)
{
    const char *why = group && *group ? hz_validate_dns_label(group) : "must not be empty";
    if (why) {
        snprintf(err, errlen, "%s: \"%s\": %s", HZ_OWN_SHARED, group ? group : "", why);
        return -EINVAL;
    }
    if (has_balancer || has_hccm_name) {
        snprintf(err, errlen,
                 "%s and %s: a shared balancer is named by its group, never by a name "
                 "annotation; remove one of them",
                 HZ_OWN_SHARED, has_balancer ? HZ_ANN_BALANCER : HZ_HCCM_NAME);
        return -EINVAL;
    }
    return 0;
}

/* 1 when c is ASCII alphanumeric. */
static int
alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int
hz_group_member_key(const char *uid, char out[HZ_MEMBER_KEY_MAX])
{
    size_t n = uid ? strlen(uid) : 0, plen = strlen(HZ_MEMBER_PREFIX) - strlen("prismlb.io/");
    /* the name part after "prismlb.io/" is "member-<uid>": 1..63 */
    if (n == 0 || n + plen > 63 || !alnum(uid[n - 1]))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!alnum(uid[i]) && uid[i] != '-' && uid[i] != '_' && uid[i] != '.')
            return -EINVAL;
    snprintf(out, HZ_MEMBER_KEY_MAX, "%s%s", HZ_MEMBER_PREFIX, uid);
    return 0;
}

const char *
hz_group_label_uid(const char *key)
{
    size_t p = strlen(HZ_MEMBER_PREFIX);
    return key && strncmp(key, HZ_MEMBER_PREFIX, p) == 0 && key[p] ? key + p : NULL;
}

size_t
hz_group_nmembers(const json_t *labels)
{
    const char *k;
    json_t *v;
    size_t n = 0;
    json_object_foreach((json_t *)labels, k, v)
    {
        (void)v;
        n += hz_group_label_uid(k) != NULL;
    }
    return n;
}

/* qsort's order of two members: creationTimestamp (absent last), UID. */
static int
member_cmp(const void *pa, const void *pb)
{
    const struct hz_member *a = pa, *b = pb;
    int c;
    if (!a->created != !b->created)
        return a->created ? -1 : 1;
    if (a->created && (c = strcmp(a->created, b->created)) != 0)
        return c;
    return strcmp(a->uid ? a->uid : "", b->uid ? b->uid : "");
}

void
hz_group_sort(struct hz_member *m, size_t n)
{
    if (n > 1)
        qsort(m, n, sizeof(*m), member_cmp);
}

/* The listen ports service s holds on the balancer, into p: its own, and
 * 80 for the https service that redirects (Hetzner's redirect listens
 * there, and no other service may). How many. */
static size_t
held_ports(const struct hz_svc_port *s, int p[2])
{
    p[0] = s->listen;
    if (!s->redirect || s->listen == 80)
        return 1;
    p[1] = 80;
    return 2;
}

/* The adding member among m[0..n) whose services hold port, or NULL. */
static const struct hz_member *
holder(const struct hz_member *m, size_t n, int port)
{
    int p[2];
    for (size_t i = 0; i < n; i++) {
        if (!m[i].d || m[i].clash_port)
            continue;
        for (size_t j = 0; j < m[i].d->nservices; j++)
            for (size_t k = 0, np = held_ports(&m[i].d->services[j], p); k < np; k++)
                if (p[k] == port)
                    return &m[i];
    }
    return NULL;
}

void
hz_group_clashes(struct hz_member *m, size_t n)
{
    int p[2];
    for (size_t i = 0; i < n; i++) {
        m[i].clash_port = 0;
        m[i].clash_with = NULL;
        for (size_t j = 0; m[i].d && j < m[i].d->nservices && !m[i].clash_port; j++) {
            size_t np = held_ports(&m[i].d->services[j], p);
            for (size_t k = 0; k < np && !m[i].clash_port; k++) {
                const struct hz_member *h = holder(m, i, p[k]);
                if (h) {
                    m[i].clash_port = p[k];
                    m[i].clash_with = h->key;
                }
            }
        }
    }
}

const struct hz_member *
hz_group_oldest(const struct hz_member *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (m[i].d && !m[i].clash_port)
            return &m[i];
    return NULL;
}

/* 1 when strings a and b (NULL: absent) differ. */
static int
str_ne(const char *a, const char *b)
{
    return !a != !b || (a && strcmp(a, b) != 0);
}

/* Append ", what" (or "what" first) to out. */
static void
add_name(char *out, size_t len, const char *what)
{
    size_t n = strlen(out);
    if (n + 1 < len)
        snprintf(out + n, len - n, "%s%s", n ? ", " : "", what);
}

void
hz_group_differs(const struct hz_desired *o, const struct hz_desired *x, char *out, size_t len)
{
    if (len)
        out[0] = '\0';
    if (str_ne(o->type, x->type))
        add_name(out, len, "type");
    if (str_ne(o->location, x->location) || o->by_zone != x->by_zone)
        add_name(out, len, o->by_zone || x->by_zone ? "network zone" : "location");
    if (o->algorithm != x->algorithm)
        add_name(out, len, "algorithm");
    if (str_ne(o->network, x->network))
        add_name(out, len, "network");
    if (str_ne(o->private_ip, x->private_ip))
        add_name(out, len, "private IP");
    if (str_ne(o->private_subnet, x->private_subnet))
        add_name(out, len, "private subnet");
    if (o->public_iface != x->public_iface)
        add_name(out, len, "public interface");
    if (o->protect_given != x->protect_given || o->protect != x->protect)
        add_name(out, len, "delete protection");
    if (str_ne(o->rdns4, x->rdns4) || str_ne(o->rdns6, x->rdns6))
        add_name(out, len, "reverse DNS");
    if (o->interval != x->interval || o->timeout != x->timeout || o->retries != x->retries)
        add_name(out, len, "health check timing");
}

/* 1 when v[0..n) holds s. */
static int
has(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return 1;
    return 0;
}

/* Move x's services (each still pointing at its own http settings), its
 * http settings and the targets out holds none of onto out's. 0 or
 * -ENOMEM (out unchanged). */
static int
take(struct hz_desired *out, struct hz_desired *x)
{
    size_t base = out->nhttps;
    struct hz_svc_port *s = out->services;
    struct hz_http *h = out->https;
    char **t = out->targets;
    if (x->nservices &&
        !(s = hz_realloc(out->services, (out->nservices + x->nservices) * sizeof(*s))))
        return -ENOMEM;
    out->services = s;
    if (x->nhttps && !(h = hz_realloc(out->https, (out->nhttps + x->nhttps) * sizeof(*h))))
        return -ENOMEM;
    out->https = h;
    if (x->ntargets && !(t = hz_realloc(out->targets, (out->ntargets + x->ntargets) * sizeof(*t))))
        return -ENOMEM;
    out->targets = t;
    for (size_t i = 0; i < x->nservices; i++) {
        out->services[out->nservices] = x->services[i];
        out->services[out->nservices++].http += base;
    }
    memcpy(out->https + out->nhttps, x->https, x->nhttps * sizeof(*h));
    out->nhttps += x->nhttps;
    for (size_t i = 0; i < x->ntargets; i++) {
        if (has(out->targets, out->ntargets, x->targets[i]))
            hz_free(x->targets[i]);
        else
            out->targets[out->ntargets++] = x->targets[i];
        x->targets[i] = NULL;
    }
    x->ntargets = x->nservices = x->nhttps = 0;
    return 0;
}

int
hz_group_union(struct hz_member *m, size_t n, const char *name, struct hz_desired *out)
{
    const struct hz_member *first = hz_group_oldest(m, n);
    memset(out, 0, sizeof(*out));
    if (!first)
        return -ENOENT;
    *out = *first->d;
    memset(first->d, 0, sizeof(*first->d));
    hz_free(out->uid);
    out->uid = NULL;
    snprintf(out->name, sizeof(out->name), "%s", name);
    for (size_t i = 0; i < n; i++) {
        if (&m[i] == first || !m[i].d || m[i].clash_port)
            continue;
        if (take(out, m[i].d) < 0) {
            hz_desired_clear(out);
            return -ENOMEM;
        }
    }
    return 0;
}

int
hz_group_label_changes(const json_t *have, const char *group, const struct hz_member *m, size_t n,
                       hz_group_gone_fn gone, void *arg, json_t **set, json_t **drop)
{
    char key[HZ_MEMBER_KEY_MAX];
    const char *k, *uid;
    json_t *v;
    *set = json_object();
    *drop = json_array();
    if (!*set || !*drop || json_object_set_new(*set, HZ_GROUP_LABEL, json_string(group)) < 0)
        goto fail;
    json_object_foreach((json_t *)have, k, v)
    {
        (void)v;
        if ((uid = hz_group_label_uid(k)) && gone(arg, uid) &&
            json_array_append_new(*drop, json_string(k)) < 0)
            goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        if (!m[i].d || m[i].clash_port || hz_group_member_key(m[i].uid, key) < 0)
            continue;
        if (json_object_set_new(*set, key, json_string(m[i].name)) < 0)
            goto fail;
    }
    return 0;
fail:
    json_decref(*set);
    json_decref(*drop);
    *set = *drop = NULL;
    return -ENOMEM;
}

json_t *
hz_group_label_edit(const json_t *have, const json_t *set, const json_t *drop)
{
    json_t *want = have ? json_deep_copy(have) : json_object(), *v;
    size_t i;
    if (!want)
        return NULL;
    json_object_del(want, HZ_LABEL_UID); /* never on a shared balancer */
    json_array_foreach(drop, i, v)
    {
        if (json_string_value(v))
            json_object_del(want, json_string_value(v));
    }
    if (set && json_object_update(want, (json_t *)set) < 0) {
        json_decref(want);
        return NULL;
    }
    return want;
}

int
hz_group_labels_change(const json_t *have, const json_t *set, const json_t *drop)
{
    json_t *want = hz_group_label_edit(have, set, drop);
    int change;
    if (!want)
        return -ENOMEM;
    change = !have || !json_equal(want, (json_t *)have);
    json_decref(want);
    return change;
}

json_t *
hz_group_create_body(const struct hz_desired *d, const json_t *set, int64_t network_id,
                     int with_targets)
{
    struct hz_desired x = *d; /* borrowed fields: never cleared */
    json_t *body, *labels = json_deep_copy(set);
    x.uid = (char *)""; /* a label hz_create_body writes, replaced below */
    if (!labels)
        return NULL;
    if (!(body = hz_create_body(&x, network_id, with_targets))) {
        json_decref(labels);
        return NULL;
    }
    if (json_object_set_new(body, "labels", labels) < 0) { /* steals labels */
        json_decref(body);
        return NULL;
    }
    return body;
}

void
hz_group_name_taken(const char *name, const char *group, char *msg, size_t len)
{
    snprintf(msg, len,
             "the balancer name \"%s\" of shared group \"%s\" is taken by a balancer that is "
             "not the group's (it lacks the label %s=%s); it is left alone. Label it so to hand "
             "it to the group, or delete or rename it",
             name, group, HZ_GROUP_LABEL, group);
}
