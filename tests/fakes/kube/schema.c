/* The OpenAPI schemas of the served kinds (schema/schemas.json, extracted
 * from kubernetes-models by schema/extract.mjs) and a validator for the
 * subset they use: type, nullable, required, enum, format (int32, int64,
 * date-time, quantity), properties, additionalProperties, items, oneOf and
 * $ref. It plays the two steps of kube-apiserver that read a body:
 *
 *   decoding  a value of the wrong type, an integer out of its range or a
 *             time the Go types cannot parse (metav1.Time: RFC 3339;
 *             metav1.MicroTime: exactly six fractional digits) is a 400
 *             BadRequest "... cannot be handled as a ...", as the JSON
 *             decoder fails; an unknown field is refused (fieldValidation
 *             Strict: 400 "strict decoding error"), or dropped with a
 *             Warning header (Warn, the default) or silently (Ignore);
 *   validation a missing required field or a value outside its enum is a
 *             cause of the 422 Invalid answer. */
#include "fk.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MICROTIME_DEF "IoK8sApimachineryPkgApisMetaV1MicroTime"
#define TIME_DEF "IoK8sApimachineryPkgApisMetaV1Time"
#define MAX_DEPTH 32

static json_t *schemas; /* the loaded document (owned) */

/* See fk.h. */
int
fk_schema_load(const char *path, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);

    if (!doc) {
        snprintf(err, errlen, "%s: %s (line %d)", path, jerr.text, jerr.line);
        return -1;
    }
    if (!json_is_object(json_object_get(doc, "kinds")) ||
        !json_is_object(json_object_get(doc, "definitions"))) {
        snprintf(err, errlen, "%s: no kinds or definitions", path);
        json_decref(doc);
        return -1;
    }
    for (size_t i = 0; i < fk_nkinds; i++) {
        char key[160], av[64];
        const char *def;
        snprintf(key, sizeof(key), "%s/%s", fk_kind_api_version(&fk_kinds[i], av, sizeof(av)),
                 fk_kinds[i].kind);
        def = json_string_value(json_object_get(json_object_get(doc, "kinds"), key));
        if (!def || !json_object_get(json_object_get(doc, "definitions"), def)) {
            snprintf(err, errlen, "%s: no definition for %s", path, key);
            json_decref(doc);
            return -1;
        }
    }
    json_decref(schemas);
    schemas = doc;
    return 0;
}

/* See fk.h. */
void
fk_schema_unload(void)
{
    json_decref(schemas);
    schemas = NULL;
}

/* The walk's state: where it is, what it found. */
struct walk {
    char path[1024]; /* "spec.ports[0].port" */
    size_t plen;
    char gotype[128]; /* Go struct holding the current field, for decode messages */
    char gopath[512]; /* dotted JSON names without indices */
    size_t glen;
    int strict; /* refuse unknown fields instead of dropping them */
    struct fk_schema_result *res;
};

static const char *
def_goname(const char *def)
{
    /* IoK8sApiCoreV1ServicePort -> ServicePort: after the last "V<digits>"
     * (and an optional alpha/beta tag). */
    const char *best = def;
    for (const char *p = def; *p; p++)
        if (*p == 'V' && isdigit((unsigned char)p[1])) {
            const char *q = p + 1;
            while (isdigit((unsigned char)*q))
                q++;
            if (!strncmp(q, "alpha", 5) || !strncmp(q, "beta", 4)) {
                while (islower((unsigned char)*q))
                    q++;
                while (isdigit((unsigned char)*q))
                    q++;
            }
            if (isupper((unsigned char)*q))
                best = q;
        }
    return best;
}

static void decode_error(struct walk *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Keep the first decoding error. */
static void
decode_error(struct walk *w, const char *fmt, ...)
{
    va_list ap;
    if (w->res->decode[0])
        return;
    va_start(ap, fmt);
    vsnprintf(w->res->decode, sizeof(w->res->decode), fmt, ap);
    va_end(ap);
}

static int
add_cause(struct walk *w, const char *reason, const char *detail)
{
    json_t *c = json_pack("{s:s, s:s, s:s}", "reason", reason, "message", detail, "field", w->path);
    if (!c || json_array_append_new(w->res->causes, c) < 0) {
        w->res->oom = 1;
        return -1;
    }
    return 0;
}

/* Push ".name" or "[i]" onto the paths; returns the lengths to restore. */
static void
push_field(struct walk *w, const char *name, size_t *plen, size_t *glen)
{
    *plen = w->plen;
    *glen = w->glen;
    w->plen += (size_t)snprintf(w->path + w->plen, sizeof(w->path) - w->plen, "%s%s",
                                w->plen ? "." : "", name);
    if (w->plen >= sizeof(w->path))
        w->plen = sizeof(w->path) - 1;
    w->glen += (size_t)snprintf(w->gopath + w->glen, sizeof(w->gopath) - w->glen, "%s%s",
                                w->glen ? "." : "", name);
    if (w->glen >= sizeof(w->gopath))
        w->glen = sizeof(w->gopath) - 1;
}

static void
push_index(struct walk *w, size_t i, size_t *plen)
{
    *plen = w->plen;
    w->plen += (size_t)snprintf(w->path + w->plen, sizeof(w->path) - w->plen, "[%zu]", i);
    if (w->plen >= sizeof(w->path))
        w->plen = sizeof(w->path) - 1;
}

static void
pop(struct walk *w, size_t plen, size_t glen)
{
    w->plen = plen;
    w->path[plen] = '\0';
    w->glen = glen;
    w->gopath[glen] = '\0';
}

static const char *
json_type_word(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    default:
        return "null";
    }
}

static void
type_mismatch(struct walk *w, json_t *v, const char *gotype)
{
    char where[700];
    snprintf(where, sizeof(where), "%s into Go struct field %s.%s", json_type_word(v),
             w->gotype[0] ? w->gotype : "Object", w->gopath);
    decode_error(w, "json: cannot unmarshal %s of type %s", where, gotype);
}

/* RFC 3339 as Go's time.Parse reads it: fractional seconds of any length
 * (micro = 0) or exactly six digits (micro = 1, metav1.MicroTime). */
static int
time_valid(const char *s, int micro)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    size_t i, frac = 0;

    for (i = 0; shape[i]; i++) {
        if (shape[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != shape[i])
            return 0;
    }
    if (s[i] == '.') {
        for (i++; isdigit((unsigned char)s[i]); i++)
            frac++;
        if (!frac)
            return 0;
    }
    if (micro && frac != 6)
        return 0;
    if (s[i] == 'Z')
        return s[i + 1] == '\0';
    if ((s[i] == '+' || s[i] == '-') && isdigit((unsigned char)s[i + 1]) &&
        isdigit((unsigned char)s[i + 2]) && s[i + 3] == ':' && isdigit((unsigned char)s[i + 4]) &&
        isdigit((unsigned char)s[i + 5]))
        return s[i + 6] == '\0';
    return 0;
}

/* resource.Quantity's text form: sign, digits with an optional decimal
 * point, then a binary (Ki..Ei), decimal (m, k, M..E) or exponent suffix. */
static int
quantity_valid(const char *s)
{
    size_t digits = 0;
    if (*s == '+' || *s == '-')
        s++;
    while (isdigit((unsigned char)*s))
        s++, digits++;
    if (*s == '.')
        for (s++; isdigit((unsigned char)*s); s++)
            digits++;
    if (!digits)
        return 0;
    if (!*s)
        return 1;
    if (strchr("KMGTPE", *s) && s[1] == 'i' && !s[2])
        return 1;
    if (strchr("mkMGTPE", *s) && !s[1])
        return 1;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!isdigit((unsigned char)*s))
            return 0;
        while (isdigit((unsigned char)*s))
            s++;
        return !*s;
    }
    return 0;
}

static int walk_value(struct walk *w, json_t *node, json_t *v, int depth);

/* 1 when v fits one of the oneOf branches (int-or-string, quantity). */
static int
one_of_fits(json_t *branches, json_t *v)
{
    size_t i;
    json_t *b;
    json_array_foreach(branches, i, b)
    {
        const char *type = json_string_value(json_object_get(b, "type"));
        const char *format = json_string_value(json_object_get(b, "format"));
        if (!type)
            continue;
        if (!strcmp(type, "string") && json_is_string(v) &&
            (!format || strcmp(format, "quantity") || quantity_valid(json_string_value(v))))
            return 1;
        if (!strcmp(type, "integer") && json_is_integer(v) &&
            (!format || strcmp(format, "int32") ||
             (json_integer_value(v) >= INT32_MIN && json_integer_value(v) <= INT32_MAX)))
            return 1;
        if (!strcmp(type, "number") && json_is_number(v))
            return 1;
    }
    return 0;
}

static int
walk_object(struct walk *w, json_t *node, json_t *v, int depth)
{
    json_t *props = json_object_get(node, "properties");
    json_t *addl = json_object_get(node, "additionalProperties");
    json_t *req = json_object_get(node, "required"), *x, *sub;
    const char *key;
    void *tmp;
    size_t i, plen, glen;

    json_array_foreach(req, i, x)
    {
        const char *name = json_string_value(x);
        if (name && !json_object_get(v, name)) {
            push_field(w, name, &plen, &glen);
            add_cause(w, "FieldValueRequired", "Required value");
            pop(w, plen, glen);
        }
    }
    json_object_foreach_safe(v, tmp, key, sub)
    {
        json_t *child = props ? json_object_get(props, key) : NULL;
        if (!child && json_is_object(addl))
            child = addl;
        push_field(w, key, &plen, &glen);
        if (child) {
            if (walk_value(w, child, sub, depth + 1) < 0)
                return -1;
        } else if (props) {
            char quoted[1100];
            snprintf(quoted, sizeof(quoted), "unknown field \"%s\"", w->path);
            if (json_array_append_new(w->res->unknown, json_string(quoted)) < 0) {
                w->res->oom = 1;
                return -1;
            }
            if (!w->strict)
                json_object_del(v, key);
        }
        pop(w, plen, glen);
    }
    return 0;
}

static int
walk_value(struct walk *w, json_t *node, json_t *v, int depth)
{
    json_t *defs = json_object_get(schemas, "definitions");
    const char *ref = json_string_value(json_object_get(node, "$ref"));
    const char *type, *format;
    char saved_type[sizeof(w->gotype)];
    int rc = 0, micro = 0, time = 0;

    if (depth > MAX_DEPTH)
        return 0;
    if (json_is_null(v))
        return 0; /* decodes as the zero value */
    snprintf(saved_type, sizeof(saved_type), "%s", w->gotype);
    if (ref) {
        micro = !strcmp(ref, MICROTIME_DEF);
        time = !strcmp(ref, TIME_DEF);
        node = json_object_get(defs, ref);
        if (!node)
            return 0;
        if (json_is_object(v))
            snprintf(w->gotype, sizeof(w->gotype), "%s", def_goname(ref));
    }
    if (json_object_get(node, "oneOf")) {
        if (!one_of_fits(json_object_get(node, "oneOf"), v))
            type_mismatch(w, v, ref ? def_goname(ref) : "intstr.IntOrString");
        goto out;
    }
    type = json_string_value(json_object_get(node, "type"));
    format = json_string_value(json_object_get(node, "format"));
    if (!type)
        goto out;
    if (!strcmp(type, "string")) {
        json_t *en = json_object_get(node, "enum");
        const char *s = json_string_value(v);
        if (!s) {
            type_mismatch(w, v, "string");
            goto out;
        }
        if ((micro || time || (format && !strcmp(format, "date-time"))) && !time_valid(s, micro)) {
            const char *layout =
                micro ? "2006-01-02T15:04:05.000000Z07:00" : "2006-01-02T15:04:05Z07:00";
            decode_error(w, "parsing time \"%s\" as \"%s\": cannot parse", s, layout);
            goto out;
        }
        if (json_is_array(en)) {
            char msg[600];
            size_t i, n = 0;
            json_t *e;
            int found = 0;
            json_array_foreach(en, i, e) found |= !strcmp(json_string_value(e) ?: "", s);
            if (!found) {
                n = (size_t)snprintf(msg, sizeof(msg),
                                     "Unsupported value: \"%.100s\": supported values: ", s);
                json_array_foreach(en, i, e) if (n < sizeof(msg)) n += (size_t)snprintf(
                    msg + n, sizeof(msg) - n, "%s\"%s\"", i ? ", " : "", json_string_value(e));
                rc = add_cause(w, "FieldValueNotSupported", msg);
            }
        }
    } else if (!strcmp(type, "integer")) {
        int is32 = format && !strcmp(format, "int32");
        if (!json_is_integer(v)) {
            type_mismatch(w, v, is32 ? "int32" : "int64");
        } else if (is32 &&
                   (json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX)) {
            char num[32];
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
            decode_error(w, "json: cannot unmarshal number %s into Go value of type %s", num,
                         "int32");
        }
    } else if (!strcmp(type, "number")) {
        if (!json_is_number(v))
            type_mismatch(w, v, "float64");
    } else if (!strcmp(type, "boolean")) {
        if (!json_is_boolean(v))
            type_mismatch(w, v, "bool");
    } else if (!strcmp(type, "array")) {
        json_t *items = json_object_get(node, "items"), *e;
        size_t i, plen;
        if (!json_is_array(v)) {
            type_mismatch(w, v, "[]");
            goto out;
        }
        json_array_foreach(v, i, e)
        {
            push_index(w, i, &plen);
            if (items && walk_value(w, items, e, depth + 1) < 0)
                rc = -1;
            pop(w, plen, w->glen);
            if (rc < 0)
                goto out;
        }
    } else if (!strcmp(type, "object")) {
        if (!json_is_object(v)) {
            type_mismatch(w, v, w->gotype[0] ? w->gotype : "map[string]");
            goto out;
        }
        rc = walk_object(w, node, v, depth);
    }
out:
    snprintf(w->gotype, sizeof(w->gotype), "%s", saved_type);
    return rc;
}

/* See fk.h. */
int
fk_schema_check(const struct fk_kind *k, json_t *obj, int strict, struct fk_schema_result *res)
{
    char key[160], av[64];
    const char *def;
    json_t *node;
    struct walk *w;

    memset(res, 0, sizeof(*res));
    res->causes = json_array();
    res->unknown = json_array();
    if (!res->causes || !res->unknown)
        goto oom;
    if (!schemas)
        return 0;
    snprintf(key, sizeof(key), "%s/%s", fk_kind_api_version(k, av, sizeof(av)), k->kind);
    def = json_string_value(json_object_get(json_object_get(schemas, "kinds"), key));
    node = def ? json_object_get(json_object_get(schemas, "definitions"), def) : NULL;
    if (!node)
        return 0;
    w = calloc(1, sizeof(*w));
    if (!w)
        goto oom;
    w->strict = strict;
    w->res = res;
    snprintf(w->gotype, sizeof(w->gotype), "%s", def_goname(def));
    walk_value(w, node, obj, 0);
    free(w);
    if (res->oom)
        goto oom;
    return 0;
oom:
    fk_schema_result_fini(res);
    res->oom = 1;
    return -1;
}

/* See fk.h. */
void
fk_schema_result_fini(struct fk_schema_result *res)
{
    json_decref(res->causes);
    json_decref(res->unknown);
    res->causes = res->unknown = NULL;
}

/* See fk.h. */
json_t *
fk_status_invalid_causes(const struct fk_kind *k, const char *name, json_t *causes)
{
    char msg[2048];
    size_t n, i;
    json_t *c;

    if (json_array_size(causes) == 1) {
        c = json_array_get(causes, 0);
        snprintf(msg, sizeof(msg), "%s \"%s\" is invalid: %s: %s", k->kind, name ? name : "",
                 json_string_value(json_object_get(c, "field")),
                 json_string_value(json_object_get(c, "message")));
    } else {
        n = (size_t)snprintf(msg, sizeof(msg), "%s \"%s\" is invalid: [", k->kind,
                             name ? name : "");
        json_array_foreach(causes, i, c) if (n < sizeof(msg)) n +=
            (size_t)snprintf(msg + n, sizeof(msg) - n, "%s%s: %s", i ? ", " : "",
                             json_string_value(json_object_get(c, "field")),
                             json_string_value(json_object_get(c, "message")));
        if (n < sizeof(msg))
            snprintf(msg + n, sizeof(msg) - n, "]");
    }
    return fk_status_new(422, "Invalid", msg, name, k, causes);
}
