#include "lbtargets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

const char *const core_lb_keep_services[] = {"/spec/externalTrafficPolicy", NULL};
const char *const core_lb_keep_nodes[] = {
    "/metadata/labels",
    "/spec/unschedulable",
    "/status/conditions/type",
    "/status/conditions/status",
    "/status/addresses/type",
    "/status/addresses/address",
    NULL,
};
const char *const core_lb_keep_slices[] = {
    "/metadata/labels/kubernetes.io~1service-name",
    "/endpoints/nodeName",
    "/endpoints/conditions",
    NULL,
};

/* ------------------------------------------------------------------ */
/* Node selectors                                                       */

void
core_lb_selector_free(struct core_lb_selector *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->n; i++) {
        core_free(sel->terms[i].key);
        core_free(sel->terms[i].value);
        for (size_t j = 0; j < sel->terms[i].nvalues; j++)
            core_free(sel->terms[i].values[j]);
        core_free(sel->terms[i].values);
    }
    core_free(sel->terms);
    core_free(sel);
}

/* Trim spaces of [*s, *e). */
static void
trim(const char **s, const char **e)
{
    while (*s < *e && (**s == ' ' || **s == '\t'))
        (*s)++;
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
        (*e)--;
}

/* n bytes at s, from min to max of them, none a blank, '=', '!', ',', a
 * parenthesis (what separates the terms of a selector and their parts) or
 * '<', '>' (Kubernetes' numeric comparisons, not supported). */
static int
valid_token(const char *s, size_t n, size_t min, size_t max)
{
    if (n < min || n > max)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || c == '=' || c == '!' || c == ',' || c == '\t' || c == '(' || c == ')' ||
            c == '<' || c == '>')
            return 0;
    }
    return 1;
}

/* A label key: an optional DNS prefix and '/', then a name of
 * alphanumerics, '-', '_', '.'. Checked loosely: no spaces, '=' or '!'. */
static int
valid_key(const char *s, size_t n)
{
    return valid_token(s, n, 1, 316);
}

/* A label value: at most 63 characters, possibly none; checked as loosely. */
static int
valid_value(const char *s, size_t n)
{
    return valid_token(s, n, 0, 63);
}

static int
add_term(struct core_lb_selector *sel, enum core_lb_sel_op op, const char *k, size_t kn,
         const char *v, size_t vn)
{
    struct core_lb_sel_term *nt = core_realloc(sel->terms, (sel->n + 1) * sizeof(*nt));
    if (!nt)
        return -ENOMEM;
    sel->terms = nt;
    struct core_lb_sel_term *t = &sel->terms[sel->n];
    memset(t, 0, sizeof(*t));
    t->op = op;
    t->key = core_strndup(k, kn);
    if (!t->key)
        return -ENOMEM;
    if (v) {
        t->value = core_strndup(v, vn);
        if (!t->value) {
            core_free(t->key);
            return -ENOMEM;
        }
    }
    sel->n++;
    return 0;
}

/* The end of the term at p: the next ',' outside parentheses, or the
 * text's end. */
static const char *
term_end(const char *p)
{
    int depth = 0;
    for (; *p; p++) {
        if (*p == '(')
            depth++;
        else if (*p == ')' && depth > 0)
            depth--;
        else if (*p == ',' && depth == 0)
            break;
    }
    return p;
}

/* The set-based term "key in (v1, v2)" or "key notin (v1, v2)" at [s, e)
 * (trimmed), added to sel. 0, -EINVAL when it is not one, -ENOMEM. */
static int
add_set_term(struct core_lb_selector *sel, const char *s, const char *e)
{
    const char *ke = s, *w, *p;
    enum core_lb_sel_op op;
    while (ke < e && *ke != ' ' && *ke != '\t' && *ke != '(')
        ke++;
    for (w = ke; w < e && (*w == ' ' || *w == '\t');)
        w++;
    for (p = w; p < e && *p >= 'a' && *p <= 'z';)
        p++;
    if (p - w == 2 && memcmp(w, "in", 2) == 0)
        op = CORE_LB_SEL_IN;
    else if (p - w == 5 && memcmp(w, "notin", 5) == 0)
        op = CORE_LB_SEL_NOTIN;
    else
        return -EINVAL;
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    if (!valid_key(s, (size_t)(ke - s)) || p >= e || *p != '(' || e[-1] != ')')
        return -EINVAL;
    const char *vs = p + 1, *ve = e - 1;
    trim(&vs, &ve);
    if (vs == ve)
        return -EINVAL; /* an empty set */
    int rc = add_term(sel, op, s, (size_t)(ke - s), NULL, 0);
    if (rc < 0)
        return rc;
    struct core_lb_sel_term *t = &sel->terms[sel->n - 1];
    for (const char *v = vs; v <= ve;) {
        const char *end = memchr(v, ',', (size_t)(ve - v));
        const char *a = v, *b = end ? end : ve;
        trim(&a, &b);
        if (!valid_value(a, (size_t)(b - a)))
            return -EINVAL;
        char **nv = core_realloc(t->values, (t->nvalues + 1) * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        t->values = nv;
        if (!(nv[t->nvalues] = core_strndup(a, (size_t)(b - a))))
            return -ENOMEM;
        t->nvalues++;
        if (!end)
            break;
        v = end + 1;
    }
    return 0;
}

int
core_lb_selector_parse(const char *text, struct core_lb_selector **out, char *err, size_t errlen)
{
    struct core_lb_selector *sel = core_calloc(1, sizeof(*sel));
    int rc = 0;
    if (!sel)
        return -ENOMEM;
    if (!text)
        text = "";
    const char *p = text;
    while (*p) {
        const char *end = term_end(p);
        const char *s = p, *e = end;
        trim(&s, &e);
        size_t n = (size_t)(e - s);
        if (n == 0) {
            if (*end == ',' || p != text) {
                snprintf(err, errlen, "empty term in node selector \"%s\"", text);
                rc = -EINVAL;
                goto fail;
            }
        } else {
            const char *ne = NULL;
            for (size_t i = 0; i + 1 < n && !ne; i++) {
                if (s[i] == '!' && s[i + 1] == '=')
                    ne = s + i;
            }
            const char *eq = memchr(s, '=', n);
            if (!ne && !eq && memchr(s, '(', n)) {
                if ((rc = add_set_term(sel, s, e)) == -EINVAL)
                    goto bad;
            } else if (ne) {
                const char *ks = s, *ke = ne, *vs = ne + 2, *ve = e;
                trim(&ks, &ke);
                trim(&vs, &ve);
                if (!valid_key(ks, (size_t)(ke - ks)) || !valid_value(vs, (size_t)(ve - vs)))
                    goto bad;
                rc = add_term(sel, CORE_LB_SEL_NE, ks, (size_t)(ke - ks), vs, (size_t)(ve - vs));
            } else if (eq) {
                const char *ks = s, *ke = eq, *vs = eq + 1, *ve = e;
                if (vs < ve && *vs == '=')
                    vs++; /* k==v */
                trim(&ks, &ke);
                trim(&vs, &ve);
                if (!valid_key(ks, (size_t)(ke - ks)) || !valid_value(vs, (size_t)(ve - vs)))
                    goto bad;
                rc = add_term(sel, CORE_LB_SEL_EQ, ks, (size_t)(ke - ks), vs, (size_t)(ve - vs));
            } else if (*s == '!') {
                const char *ks = s + 1, *ke = e;
                trim(&ks, &ke);
                if (!valid_key(ks, (size_t)(ke - ks)))
                    goto bad;
                rc = add_term(sel, CORE_LB_SEL_ABSENT, ks, (size_t)(ke - ks), NULL, 0);
            } else {
                if (!valid_key(s, n))
                    goto bad;
                rc = add_term(sel, CORE_LB_SEL_EXISTS, s, n, NULL, 0);
            }
            if (rc < 0)
                goto fail;
        }
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p) {
            snprintf(err, errlen, "empty term in node selector \"%s\"", text);
            rc = -EINVAL;
            goto fail;
        }
        continue;
    bad:
        snprintf(err, errlen,
                 "bad term \"%.*s\" in node selector (use key=value, key!=value, key in (v1,v2), "
                 "key notin (v1,v2), !key or key)",
                 (int)n, s);
        rc = -EINVAL;
        goto fail;
    }
    *out = sel;
    return 0;
fail:
    core_lb_selector_free(sel);
    return rc;
}

int
core_lb_selector_match(const struct core_lb_selector *sel, const json_t *labels)
{
    for (size_t i = 0; sel && i < sel->n; i++) {
        const struct core_lb_sel_term *t = &sel->terms[i];
        const json_t *v = labels ? json_object_get(labels, t->key) : NULL;
        const char *sv = json_is_string(v) ? json_string_value(v) : NULL;
        switch (t->op) {
        case CORE_LB_SEL_EQ:
            if (!sv || strcmp(sv, t->value) != 0)
                return 0;
            break;
        case CORE_LB_SEL_NE:
            if (sv && strcmp(sv, t->value) == 0)
                return 0;
            break;
        case CORE_LB_SEL_EXISTS:
            if (!v)
                return 0;
            break;
        case CORE_LB_SEL_ABSENT:
            if (v)
                return 0;
            break;
        case CORE_LB_SEL_IN:
        case CORE_LB_SEL_NOTIN: {
            int found = 0;
            for (size_t j = 0; sv && j < t->nvalues && !found; j++)
                found = strcmp(sv, t->values[j]) == 0;
            if (found != (t->op == CORE_LB_SEL_IN))
                return 0;
            break;
        }
        }
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* Node state                                                           */

static const char *
str_at(const json_t *o, const char *k1, const char *k2)
{
    const json_t *v = json_object_get(o, k1);
    if (k2)
        v = json_object_get(v, k2);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int
core_lb_node_ready(const json_t *node)
{
    const json_t *conds = json_object_get(json_object_get(node, "status"), "conditions");
    size_t i;
    const json_t *c;
    json_array_foreach(conds, i, c)
    {
        const char *type = str_at(c, "type", NULL);
        if (type && strcmp(type, "Ready") == 0) {
            const char *st = str_at(c, "status", NULL);
            return st && strcmp(st, "True") == 0;
        }
    }
    return 0;
}

int
core_lb_node_cordoned(const json_t *node)
{
    return json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable"));
}

const char *
core_lb_node_internal_ip(const json_t *node)
{
    const json_t *addrs = json_object_get(json_object_get(node, "status"), "addresses");
    const char *first = NULL;
    size_t i;
    const json_t *a;
    json_array_foreach(addrs, i, a)
    {
        const char *type = str_at(a, "type", NULL);
        const char *ip = str_at(a, "address", NULL);
        if (!type || !ip || strcmp(type, "InternalIP") != 0)
            continue;
        if (!strchr(ip, ':'))
            return ip; /* IPv4 first: vSwitch networks are IPv4 */
        if (!first)
            first = ip;
    }
    return first;
}

static int
node_excluded(const json_t *node)
{
    const json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    return json_object_get(labels, CORE_LB_EXCLUDE_LABEL) != NULL;
}

/* ------------------------------------------------------------------ */
/* Selection                                                            */

enum core_lb_policy
core_lb_policy_of(const json_t *svc, int dynamic)
{
    if (!dynamic)
        return CORE_LB_POLICY_SELECTOR;
    const char *etp = str_at(json_object_get(svc, "spec"), "externalTrafficPolicy", NULL);
    return (etp && strcmp(etp, "Local") == 0) ? CORE_LB_POLICY_LOCAL : CORE_LB_POLICY_CLUSTER;
}

/* Per node name, what its endpoints of the service say. */
struct node_ep {
    const char *node;
    int ready;        /* has a ready endpoint */
    int serving_term; /* has a terminating endpoint still serving */
};

static int
cond_true(const json_t *conds, const char *key, int dflt)
{
    const json_t *v = json_object_get(conds, key);
    if (!v || json_is_null(v))
        return dflt;
    return json_is_true(v);
}

static int
slice_of(const json_t *slice, const char *ns, const char *name)
{
    const json_t *md = json_object_get(slice, "metadata");
    const char *sns = str_at(md, "namespace", NULL);
    const json_t *labels = json_object_get(md, "labels");
    const json_t *sn = json_object_get(labels, "kubernetes.io/service-name");
    return sns && ns && strcmp(sns, ns) == 0 && json_is_string(sn) &&
           strcmp(json_string_value(sn), name) == 0;
}

/* Collect endpoint facts per node of svc's slices; returns count or -ENOMEM. */
static long
collect_endpoints(const json_t *svc, const json_t *const *slices, size_t nslices,
                  struct node_ep **out)
{
    const json_t *md = json_object_get(svc, "metadata");
    const char *ns = str_at(md, "namespace", NULL), *name = str_at(md, "name", NULL);
    struct node_ep *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t s = 0; s < nslices; s++) {
        if (!name || !slice_of(slices[s], ns, name))
            continue;
        size_t i;
        const json_t *ep;
        json_array_foreach(json_object_get(slices[s], "endpoints"), i, ep)
        {
            const char *node = str_at(ep, "nodeName", NULL);
            if (!node)
                continue;
            const json_t *conds = json_object_get(ep, "conditions");
            /* Per the EndpointSlice API, unset ready/serving mean true and
             * unset terminating means false. */
            int ready = cond_true(conds, "ready", 1);
            int terminating = cond_true(conds, "terminating", 0);
            int serving = cond_true(conds, "serving", ready);
            size_t k = 0;
            while (k < n && strcmp(v[k].node, node) != 0)
                k++;
            if (k == n) {
                if (n == cap) {
                    size_t nc = cap ? cap * 2 : 8;
                    struct node_ep *nv = core_realloc(v, nc * sizeof(*nv));
                    if (!nv) {
                        core_free(v);
                        return -ENOMEM;
                    }
                    v = nv;
                    cap = nc;
                }
                v[n].node = node;
                v[n].ready = 0;
                v[n].serving_term = 0;
                n++;
            }
            if (ready && !terminating)
                v[k].ready = 1;
            else if (terminating && serving)
                v[k].serving_term = 1;
        }
    }
    *out = v;
    return (long)n;
}

static int
cmp_target(const void *a, const void *b)
{
    const struct core_lb_target *x = a, *y = b;
    return strcmp(x->node, y->node);
}

void
core_lb_targets_clear(struct core_lb_targets *t)
{
    core_free(t->v);
    memset(t, 0, sizeof(*t));
}

int
core_lb_select_targets(const json_t *svc, enum core_lb_policy policy,
                       const struct core_lb_selector *selector, const json_t *const *nodes,
                       size_t nnodes, const json_t *const *slices, size_t nslices,
                       size_t max_targets, struct core_lb_targets *out)
{
    struct node_ep *eps = NULL;
    long neps = 0;
    memset(out, 0, sizeof(*out));
    if (policy == CORE_LB_POLICY_LOCAL) {
        neps = collect_endpoints(svc, slices, nslices, &eps);
        if (neps < 0)
            return -ENOMEM;
    }
    out->v = core_calloc(nnodes ? nnodes : 1, sizeof(*out->v));
    if (!out->v) {
        core_free(eps);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nnodes; i++) {
        const json_t *node = nodes[i];
        const json_t *md = json_object_get(node, "metadata");
        const char *name = str_at(md, "name", NULL);
        if (!name || node_excluded(node))
            continue;
        int take = 0;
        switch (policy) {
        case CORE_LB_POLICY_CLUSTER:
            take = core_lb_node_ready(node) && !core_lb_node_cordoned(node);
            break;
        case CORE_LB_POLICY_LOCAL:
            for (long k = 0; k < neps; k++) {
                if (strcmp(eps[k].node, name) == 0) {
                    take = eps[k].ready || eps[k].serving_term;
                    break;
                }
            }
            break;
        case CORE_LB_POLICY_SELECTOR:
            take = core_lb_selector_match(selector, json_object_get(md, "labels"));
            break;
        }
        if (!take)
            continue;
        const char *ip = core_lb_node_internal_ip(node);
        if (!ip) {
            out->no_address++;
            continue;
        }
        out->v[out->n].node = name;
        out->v[out->n].ip = ip;
        out->n++;
    }
    core_free(eps);
    qsort(out->v, out->n, sizeof(*out->v), cmp_target);
    if (max_targets && out->n > max_targets) {
        out->dropped = out->n - max_targets;
        out->n = max_targets;
    }
    return 0;
}
