/* Label and field selectors: parsing with the apiserver's grammar and
 * matching against stored objects. */
#include "fk.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum op { OP_EQ, OP_NE, OP_IN, OP_NOTIN, OP_EXISTS, OP_NOTEXISTS, OP_GT, OP_LT };

struct req {
    char *key;
    int op;
    char **vals;
    size_t nvals;
};

struct fk_selector {
    int field; /* 1 = field selector */
    const struct fk_kind *kind;
    struct req *r;
    size_t n;
};

/* See fk.h. */
void
fk_selector_free(struct fk_selector *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->n; i++) {
        free(sel->r[i].key);
        for (size_t j = 0; j < sel->r[i].nvals; j++)
            free(sel->r[i].vals[j]);
        free(sel->r[i].vals);
    }
    free(sel->r);
    free(sel);
}

/* See fk.h. */
int
fk_selector_empty(const struct fk_selector *sel)
{
    return !sel || sel->n == 0;
}

static struct req *
add_req(struct fk_selector *sel)
{
    struct req *r = realloc(sel->r, (sel->n + 1) * sizeof(*r));
    if (!r)
        return NULL;
    sel->r = r;
    memset(&r[sel->n], 0, sizeof(*r));
    return &r[sel->n++];
}

static int
add_val(struct req *r, const char *v, size_t len)
{
    char **vals = realloc(r->vals, (r->nvals + 1) * sizeof(*vals));
    if (!vals)
        return -1;
    r->vals = vals;
    vals[r->nvals] = strndup(v, len);
    if (!vals[r->nvals])
        return -1;
    r->nvals++;
    return 0;
}

static int
name_char(int c)
{
    return isalnum(c) || c == '-' || c == '_' || c == '.';
}

/* See fk.h. */
int
fk_label_value_valid(const char *v, size_t len)
{
    if (len == 0)
        return 1;
    if (len > 63 || !isalnum((unsigned char)v[0]) || !isalnum((unsigned char)v[len - 1]))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!name_char((unsigned char)v[i]))
            return 0;
    return 1;
}

/* See fk.h. */
int
fk_label_key_valid(const char *k, size_t len)
{
    const char *slash = memchr(k, '/', len);
    if (slash) {
        size_t plen = (size_t)(slash - k);
        if (plen == 0 || plen > 253)
            return 0;
        for (size_t i = 0; i < plen; i++)
            if (!(islower((unsigned char)k[i]) || isdigit((unsigned char)k[i]) || k[i] == '-' ||
                  k[i] == '.'))
                return 0;
        len -= plen + 1;
        k = slash + 1;
    }
    return len > 0 && fk_label_value_valid(k, len);
}

static const char *
skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static int
parse_label_req(struct fk_selector *sel, const char **pp, char *err, size_t errlen)
{
    const char *p = skip_ws(*pp), *ks, *vs;
    struct req *r = add_req(sel);
    int neg = 0;

    if (!r)
        goto nomem;
    if (*p == '!') {
        neg = 1;
        p = skip_ws(p + 1);
    }
    ks = p;
    while (*p && !strchr(" \t=!,()<>", *p))
        p++;
    if (!fk_label_key_valid(ks, (size_t)(p - ks))) {
        snprintf(err, errlen, "unable to parse requirement: invalid label key \"%.*s\"",
                 (int)(p - ks), ks);
        return -1;
    }
    r->key = strndup(ks, (size_t)(p - ks));
    if (!r->key)
        goto nomem;
    p = skip_ws(p);
    if (neg) {
        r->op = OP_NOTEXISTS;
        goto done;
    }
    if (*p == '\0' || *p == ',') {
        r->op = OP_EXISTS;
        goto done;
    }
    if (!strncmp(p, "notin", 5) && (p[5] == '(' || p[5] == ' ')) {
        r->op = OP_NOTIN;
        p += 5;
    } else if (!strncmp(p, "in", 2) && (p[2] == '(' || p[2] == ' ')) {
        r->op = OP_IN;
        p += 2;
    } else if (!strncmp(p, "==", 2)) {
        r->op = OP_EQ;
        p += 2;
    } else if (!strncmp(p, "!=", 2)) {
        r->op = OP_NE;
        p += 2;
    } else if (*p == '=') {
        r->op = OP_EQ;
        p++;
    } else if (*p == '>' || *p == '<') {
        r->op = *p == '>' ? OP_GT : OP_LT;
        p++;
    } else {
        snprintf(err, errlen,
                 "unable to parse requirement: found '%c', expected: in, notin, =, "
                 "==, !=, gt, lt",
                 *p ? *p : ' ');
        return -1;
    }
    p = skip_ws(p);
    if (r->op == OP_IN || r->op == OP_NOTIN) {
        if (*p != '(') {
            snprintf(err, errlen, "unable to parse requirement: found '%c', expected: '('",
                     *p ? *p : ' ');
            return -1;
        }
        p++;
        for (;;) {
            p = skip_ws(p);
            vs = p;
            while (*p && !strchr(" \t,()", *p))
                p++;
            if (!fk_label_value_valid(vs, (size_t)(p - vs))) {
                snprintf(err, errlen, "unable to parse requirement: invalid label value: \"%.*s\"",
                         (int)(p - vs), vs);
                return -1;
            }
            if (add_val(r, vs, (size_t)(p - vs)) < 0)
                goto nomem;
            p = skip_ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == ')') {
                p++;
                break;
            }
            snprintf(err, errlen, "unable to parse requirement: found '%c', expected: ',', ')'",
                     *p ? *p : ' ');
            return -1;
        }
    } else {
        vs = p;
        while (*p && !strchr(" \t,()", *p))
            p++;
        if (!fk_label_value_valid(vs, (size_t)(p - vs))) {
            snprintf(err, errlen, "unable to parse requirement: invalid label value: \"%.*s\"",
                     (int)(p - vs), vs);
            return -1;
        }
        if ((r->op == OP_GT || r->op == OP_LT)) {
            char *end;
            char tmp[64];
            snprintf(tmp, sizeof(tmp), "%.*s", (int)(p - vs), vs);
            if (!tmp[0] || (strtoll(tmp, &end, 10), *end)) {
                snprintf(err, errlen,
                         "unable to parse requirement: for 'Gt', 'Lt' operators, the value must "
                         "be an integer");
                return -1;
            }
        }
        if (add_val(r, vs, (size_t)(p - vs)) < 0)
            goto nomem;
    }
done:
    p = skip_ws(p);
    if (*p && *p != ',') {
        snprintf(err, errlen, "unable to parse requirement: unexpected '%c'", *p);
        return -1;
    }
    *pp = p;
    return 0;
nomem:
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* See fk.h. */
struct fk_selector *
fk_label_selector_parse(const char *s, char *err, size_t errlen)
{
    struct fk_selector *sel = calloc(1, sizeof(*sel));
    const char *p = s ? s : "";

    if (!sel) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p = skip_ws(p);
    while (*p) {
        if (parse_label_req(sel, &p, err, errlen) < 0)
            goto fail;
        if (*p == ',') {
            p++;
            if (!*skip_ws(p)) {
                snprintf(err, errlen,
                         "unable to parse requirement: found '', expected: identifier");
                goto fail;
            }
        }
    }
    return sel;
fail:
    fk_selector_free(sel);
    return NULL;
}

/* Field labels each kind supports beyond metadata.name/namespace. */
static int
field_supported(const struct fk_kind *k, const char *f)
{
    static const char *const event_core[] = {"involvedObject.kind",
                                             "involvedObject.namespace",
                                             "involvedObject.name",
                                             "involvedObject.uid",
                                             "involvedObject.apiVersion",
                                             "involvedObject.resourceVersion",
                                             "involvedObject.fieldPath",
                                             "reason",
                                             "reportingComponent",
                                             "source",
                                             "type",
                                             NULL};
    static const char *const event_new[] = {"regarding.kind",
                                            "regarding.namespace",
                                            "regarding.name",
                                            "regarding.uid",
                                            "regarding.apiVersion",
                                            "regarding.resourceVersion",
                                            "regarding.fieldPath",
                                            "reason",
                                            "reportingController",
                                            "type",
                                            NULL};
    const char *const *list = NULL;

    if (!strcmp(f, "metadata.name") || !strcmp(f, "metadata.namespace"))
        return 1;
    if (!strcmp(k->kind, "Event"))
        list = k->group[0] ? event_new : event_core;
    else if (!strcmp(k->resource, "nodes"))
        return !strcmp(f, "spec.unschedulable");
    else if (!strcmp(k->resource, "namespaces"))
        return !strcmp(f, "status.phase");
    for (size_t i = 0; list && list[i]; i++)
        if (!strcmp(list[i], f))
            return 1;
    return 0;
}

/* Unescape a field selector value (\\, \, and \=). */
static char *
field_value(const char *s, size_t len)
{
    char *out = malloc(len + 1);
    size_t o = 0;
    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\' && i + 1 < len)
            i++;
        out[o++] = s[i];
    }
    out[o] = '\0';
    return out;
}

/* See fk.h. */
struct fk_selector *
fk_field_selector_parse(const char *s, const struct fk_kind *k, char *err, size_t errlen)
{
    struct fk_selector *sel = calloc(1, sizeof(*sel));
    const char *p = s ? s : "";

    if (!sel) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sel->field = 1;
    sel->kind = k;
    while (*p) {
        const char *start = p, *op;
        struct req *r;
        size_t oplen = 1;
        /* A term ends at an unescaped comma. */
        while (*p && *p != ',') {
            if (*p == '\\' && p[1])
                p++;
            p++;
        }
        op = start;
        while (op < p && *op != '=' && *op != '!')
            op++;
        if (op == p || op == start) {
            snprintf(err, errlen, "invalid selector: '%s'; can't understand '%.*s'", s,
                     (int)(p - start), start);
            goto fail;
        }
        r = add_req(sel);
        if (!r)
            goto nomem;
        if (op[0] == '!' && op + 1 < p && op[1] == '=') {
            r->op = OP_NE;
            oplen = 2;
        } else if (op[0] == '=' && op + 1 < p && op[1] == '=') {
            r->op = OP_EQ;
            oplen = 2;
        } else if (op[0] == '=') {
            r->op = OP_EQ;
        } else {
            snprintf(err, errlen, "invalid selector: '%s'", s);
            goto fail;
        }
        r->key = strndup(start, (size_t)(op - start));
        if (!r->key)
            goto nomem;
        if (!field_supported(k, r->key)) {
            snprintf(err, errlen, "field label not supported: %s", r->key);
            goto fail;
        }
        {
            char *v = field_value(op + oplen, (size_t)(p - op - oplen));
            if (!v || add_val(r, v, strlen(v)) < 0) {
                free(v);
                goto nomem;
            }
            free(v);
        }
        if (*p == ',')
            p++;
    }
    return sel;
nomem:
    snprintf(err, errlen, "out of memory");
fail:
    fk_selector_free(sel);
    return NULL;
}

/* The string value of a field label on obj into buf. */
static const char *
field_of(json_t *obj, const char *f, char *buf, size_t len)
{
    const char *s;
    if (!strcmp(f, "spec.unschedulable")) {
        json_t *u = json_object_get(json_object_get(obj, "spec"), "unschedulable");
        snprintf(buf, len, "%s", json_is_true(u) ? "true" : "false");
        return buf;
    }
    if (!strcmp(f, "source"))
        f = "source.component";
    s = fk_json_path_str(obj, f);
    snprintf(buf, len, "%s", s ? s : "");
    return buf;
}

static int
in_set(const struct req *r, const char *v)
{
    for (size_t i = 0; i < r->nvals; i++)
        if (!strcmp(r->vals[i], v))
            return 1;
    return 0;
}

/* See fk.h. */
int
fk_selector_match(const struct fk_selector *sel, json_t *obj)
{
    json_t *labels;

    if (!sel)
        return 1;
    labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    for (size_t i = 0; i < sel->n; i++) {
        const struct req *r = &sel->r[i];
        const char *v;
        char buf[512];
        if (sel->field) {
            v = field_of(obj, r->key, buf, sizeof(buf));
            if ((r->op == OP_EQ) != (strcmp(v, r->vals[0]) == 0))
                return 0;
            continue;
        }
        v = json_string_value(json_object_get(labels, r->key));
        switch (r->op) {
        case OP_EQ:
        case OP_IN:
            if (!v || !in_set(r, v))
                return 0;
            break;
        case OP_NE:
        case OP_NOTIN:
            if (v && in_set(r, v))
                return 0;
            break;
        case OP_EXISTS:
            if (!v)
                return 0;
            break;
        case OP_NOTEXISTS:
            if (v)
                return 0;
            break;
        case OP_GT:
        case OP_LT: {
            char *end;
            long long have, want = strtoll(r->vals[0], NULL, 10);
            if (!v)
                return 0;
            have = strtoll(v, &end, 10);
            if (!*v || *end)
                return 0;
            if (r->op == OP_GT ? !(have > want) : !(have < want))
                return 0;
            break;
        }
        }
    }
    return 1;
}
