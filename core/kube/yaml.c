/*
 * yaml: kubeconfig files (YAML 1.1, as kubectl, kubeadm and people write
 * them) read with libyaml into jansson values.
 *
 * A pure function over a buffer: no I/O, no globals. libyaml's parser
 * events build the tree; jansson allocates through core/alloc.h (libyaml
 * allocates with libc). Anchors and aliases (an alias is a copy of its
 * anchor's value, bounded in total), merge keys ("<<"), block scalars,
 * tags !!str/!!int/!!bool/!!null and flow collections are YAML; the
 * conversion to JSON follows sigs.k8s.io/yaml, which client-go reads
 * kubeconfigs with, for the scalars kubeconfigs hold.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "alloc.h"
#include "kube-internal.h"

#define YAML_MAX_DEPTH 64
/* Values an input may produce through aliases, in total: a few nested
 * aliases must not expand into gigabytes ("billion laughs"). */
#define YAML_MAX_ALIAS_NODES 100000

struct frame {
    json_t *v;     /* the container being filled (borrowed from its parent) */
    char *key;     /* a mapping's key waiting for its value (core_malloc) */
    json_t *merge; /* "<<" values to merge at the end (array, owned) */
    char *anchor;  /* the anchor naming v, recorded once v is complete */
};

struct anchor {
    char *name;
    json_t *v; /* owned reference */
};

struct yb {
    struct frame st[YAML_MAX_DEPTH + 1];
    int depth;
    json_t *root;
    struct anchor *an;
    size_t nan, can;
    size_t alias_nodes;
    char *err;
    size_t errlen;
    int failed;
};

static void fail(struct yb *b, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
fail(struct yb *b, size_t line, const char *fmt, ...)
{
    if (b->failed)
        return;
    b->failed = 1;
    if (!b->err || !b->errlen)
        return;
    int k = snprintf(b->err, b->errlen, "line %zu: ", line + 1);
    if (k < 0 || (size_t)k >= b->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err + k, b->errlen - (size_t)k, fmt, ap);
    va_end(ap);
}

static int
is_one_of(const char *s, size_t n, const char *const *words)
{
    for (; *words; words++)
        if (strlen(*words) == n && memcmp(s, *words, n) == 0)
            return 1;
    return 0;
}

/* An integer in decimal, 0x hex or 0o octal with an optional sign; 0 and
 * *out on success, -1 when s is no such integer (or out of range). */
static int
parse_int(const char *s, size_t n, long long *out)
{
    char num[24];
    if (n == 0 || n >= sizeof(num))
        return -1;
    memcpy(num, s, n);
    num[n] = '\0';
    size_t d = (num[0] == '-' || num[0] == '+') ? 1 : 0;
    int base = 10;
    if (n > d + 2 && num[d] == '0' && (num[d + 1] == 'x' || num[d + 1] == 'o'))
        base = num[d + 1] == 'x' ? 16 : 8;
    const char *digits = base == 10 ? num + d : num + d + 2;
    if (!*digits)
        return -1;
    for (const char *c = digits; *c; c++)
        if (!(base == 16  ? isxdigit((unsigned char)*c)
              : base == 8 ? (*c >= '0' && *c <= '7')
                          : isdigit((unsigned char)*c)))
            return -1;
    errno = 0;
    long long v = strtoll(digits, NULL, base);
    if (errno)
        return -1;
    *out = num[0] == '-' ? -v : v;
    return 0;
}

/* The JSON value of a scalar event. Plain scalars resolve to booleans
 * (true/false in three spellings), null (null, ~, empty) and integers;
 * every other scalar, and every quoted or block scalar, is a string. An
 * explicit tag decides instead. NULL on ENOMEM or a bad tagged value. */
static json_t *
scalar_json(struct yb *b, const yaml_event_t *ev)
{
    static const char *const tru[] = {"true", "True", "TRUE", NULL};
    static const char *const fal[] = {"false", "False", "FALSE", NULL};
    static const char *const nul[] = {"null", "Null", "NULL", "~", "", NULL};
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    long long iv;
    json_t *j;

    if (tag && strcmp(tag, YAML_STR_TAG) == 0)
        plain = 0;
    else if (tag && strcmp(tag, "!") != 0) {
        if (strcmp(tag, YAML_INT_TAG) == 0 && parse_int(s, n, &iv) == 0)
            j = json_integer(iv);
        else if (strcmp(tag, YAML_BOOL_TAG) == 0 && (is_one_of(s, n, tru) || is_one_of(s, n, fal)))
            j = is_one_of(s, n, tru) ? json_true() : json_false();
        else if (strcmp(tag, YAML_NULL_TAG) == 0 && is_one_of(s, n, nul))
            j = json_null();
        else {
            fail(b, ev->start_mark.line, "cannot read \"%.40s\" as %s", s, tag);
            return NULL;
        }
        if (!j)
            fail(b, ev->start_mark.line, "out of memory");
        return j;
    }
    if (plain) {
        if (is_one_of(s, n, tru))
            return json_true();
        if (is_one_of(s, n, fal))
            return json_false();
        if (is_one_of(s, n, nul))
            return json_null();
        if (parse_int(s, n, &iv) == 0) {
            if (!(j = json_integer(iv)))
                fail(b, ev->start_mark.line, "out of memory");
            return j;
        }
    }
    if (!(j = json_stringn(s, n)))
        fail(b, ev->start_mark.line, "out of memory");
    return j;
}

/* Number of values in v (v itself included), stopping past limit. */
static size_t
count_nodes(const json_t *v, size_t limit)
{
    size_t n = 1, i;
    const char *k;
    json_t *x;
    if (json_is_array(v)) {
        json_array_foreach(v, i, x)
        {
            if (n > limit)
                break;
            n += count_nodes(x, limit - n);
        }
    } else if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, x)
        {
            if (n > limit)
                break;
            n += count_nodes(x, limit - n);
        }
    }
    return n;
}

static int
remember(struct yb *b, const char *name, json_t *v, size_t line)
{
    for (size_t i = 0; i < b->nan; i++) {
        if (strcmp(b->an[i].name, name) == 0) { /* redefined: the later wins */
            json_decref(b->an[i].v);
            b->an[i].v = json_incref(v);
            return 0;
        }
    }
    if (b->nan == b->can) {
        size_t nc = b->can ? b->can * 2 : 8;
        struct anchor *na = core_realloc(b->an, nc * sizeof(*na));
        if (!na)
            goto nomem;
        b->an = na;
        b->can = nc;
    }
    if (!(b->an[b->nan].name = core_strdup(name)))
        goto nomem;
    b->an[b->nan++].v = json_incref(v);
    return 0;
nomem:
    fail(b, line, "out of memory");
    return -1;
}

/* Put v (stolen) where the current container wants it. */
static int
place(struct yb *b, json_t *v, size_t line)
{
    struct frame *f;
    if (b->depth == 0) {
        b->root = v;
        return 0;
    }
    f = &b->st[b->depth - 1];
    if (json_is_array(f->v)) {
        if (json_array_append_new(f->v, v) < 0)
            goto nomem;
        return 0;
    }
    /* a mapping: v is a key or a value */
    if (!f->key) {
        const char *k = json_string_value(v);
        char num[32];
        if (json_is_integer(v)) {
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
            k = num;
        } else if (json_is_true(v) || json_is_false(v)) {
            k = json_is_true(v) ? "true" : "false";
        } else if (json_is_null(v)) {
            k = "null";
        }
        if (!k) {
            json_decref(v);
            fail(b, line, "complex keys (a mapping or sequence as a key) are not supported");
            return -1;
        }
        f->key = core_strdup(k);
        json_decref(v);
        if (!f->key)
            goto nomem_kept;
        return 0;
    }
    if (strcmp(f->key, "<<") == 0) { /* merge key: applied at the end */
        if (!json_is_object(v) && !json_is_array(v)) {
            json_decref(v);
            fail(b, line, "a merge key (<<) needs a mapping or a list of mappings");
            return -1;
        }
        if ((!f->merge && !(f->merge = json_array())) || json_array_append_new(f->merge, v) < 0)
            goto nomem_kept;
    } else if (json_object_get(f->v, f->key)) {
        fail(b, line, "duplicate key \"%.60s\"", f->key);
        json_decref(v);
        return -1;
    } else if (json_object_set_new(f->v, f->key, v) < 0) {
        goto nomem_kept;
    }
    core_free(f->key);
    f->key = NULL;
    return 0;
nomem:
    json_decref(v);
nomem_kept:
    fail(b, line, "out of memory");
    return -1;
}

/* Open a container (new json_t) for a start event. */
static int
open_container(struct yb *b, json_t *v, const yaml_char_t *anchor, size_t line)
{
    if (!v) {
        fail(b, line, "out of memory");
        return -1;
    }
    if (b->depth >= YAML_MAX_DEPTH) {
        json_decref(v);
        fail(b, line, "nesting deeper than %d levels", YAML_MAX_DEPTH);
        return -1;
    }
    json_incref(v); /* one for the frame, one for the parent */
    if (place(b, v, line) < 0) {
        json_decref(v);
        return -1;
    }
    struct frame *f = &b->st[b->depth++];
    memset(f, 0, sizeof(*f));
    f->v = v;
    if (anchor && !(f->anchor = core_strdup((const char *)anchor))) {
        fail(b, line, "out of memory");
        return -1;
    }
    return 0;
}

static int
close_container(struct yb *b, size_t line)
{
    struct frame *f = &b->st[--b->depth];
    int rc = 0;
    size_t i;
    json_t *m, *x;

    if (f->key) {
        fail(b, line, "mapping key \"%.60s\" has no value", f->key);
        rc = -1;
    }
    /* Merge keys: explicit keys win, then earlier merges over later. */
    json_array_foreach(f->merge, i, m)
    {
        if (rc < 0)
            break;
        size_t j;
        json_t *list = json_is_array(m) ? m : NULL;
        for (j = 0; rc == 0 && (list ? j < json_array_size(list) : j < 1); j++) {
            x = list ? json_array_get(list, j) : m;
            if (!json_is_object(x)) {
                fail(b, line, "a merge key (<<) needs a mapping or a list of mappings");
                rc = -1;
            } else if (json_object_update_missing(f->v, x) < 0) {
                fail(b, line, "out of memory");
                rc = -1;
            }
        }
    }
    if (rc == 0 && f->anchor)
        rc = remember(b, f->anchor, f->v, line);
    json_decref(f->merge);
    core_free(f->key);
    core_free(f->anchor);
    json_decref(f->v);
    return rc;
}

static int
on_alias(struct yb *b, const yaml_event_t *ev)
{
    const char *name = (const char *)ev->data.alias.anchor;
    size_t line = ev->start_mark.line;
    for (size_t i = b->nan; i-- > 0;) {
        if (strcmp(b->an[i].name, name) != 0)
            continue;
        size_t n = count_nodes(b->an[i].v, YAML_MAX_ALIAS_NODES);
        if (n > YAML_MAX_ALIAS_NODES - b->alias_nodes) {
            fail(b, line, "aliases expand to more than %d values", YAML_MAX_ALIAS_NODES);
            return -1;
        }
        b->alias_nodes += n;
        json_t *c = json_deep_copy(b->an[i].v);
        if (!c) {
            fail(b, line, "out of memory");
            return -1;
        }
        return place(b, c, line);
    }
    /* an anchor still open (an alias inside its own node) is not known yet */
    fail(b, line, "unknown anchor \"%.60s\" (an alias must follow its complete anchor)", name);
    return -1;
}

/* One event; 1 at the end of the stream, 0 to go on, -1 on error. */
static int
on_event(struct yb *b, const yaml_event_t *ev, int *docs)
{
    size_t line = ev->start_mark.line;
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++*docs > 1) {
            fail(b, line, "only one YAML document is allowed in a kubeconfig");
            return -1;
        }
        return 0;
    case YAML_SCALAR_EVENT: {
        json_t *v = scalar_json(b, ev);
        if (!v)
            return -1;
        if (ev->data.scalar.anchor &&
            remember(b, (const char *)ev->data.scalar.anchor, v, line) < 0) {
            json_decref(v);
            return -1;
        }
        return place(b, v, line);
    }
    case YAML_ALIAS_EVENT:
        return on_alias(b, ev);
    case YAML_SEQUENCE_START_EVENT:
        return open_container(b, json_array(), ev->data.sequence_start.anchor, line);
    case YAML_MAPPING_START_EVENT:
        return open_container(b, json_object(), ev->data.mapping_start.anchor, line);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return close_container(b, line);
    case YAML_STREAM_END_EVENT:
        return 1;
    default:
        return 0;
    }
}

json_t *
core_kube_yaml_parse(const char *text, size_t len, char *err, size_t errlen)
{
    struct yb b = {.err = err, .errlen = errlen};
    yaml_parser_t parser;
    yaml_event_t ev;
    char jerr[200] = "";
    int docs = 0, rc = 0;
    size_t f = 0;

    if (err && errlen)
        err[0] = '\0';
    if (!text)
        len = 0;
    /* JSON is YAML too; jansson reads it faster and exactly. */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        f = 3;
    while (f < len && isspace((unsigned char)text[f]))
        f++;
    if (f < len && (text[f] == '{' || text[f] == '[')) {
        json_error_t je;
        size_t k = len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
        json_t *root = json_loadb(text + k, len - k, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (root)
            return root;
        /* Perhaps a YAML flow document that is not JSON: try that, and
         * report the JSON error if it fails too. */
        snprintf(jerr, sizeof(jerr), "line %d: %s", je.line, je.text);
    }
    if (!yaml_parser_initialize(&parser)) {
        fail(&b, 0, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)(text ? text : ""), len);
    while (rc == 0) {
        if (!yaml_parser_parse(&parser, &ev)) {
            if (parser.context)
                fail(&b, parser.problem_mark.line, "%s %s at line %zu",
                     parser.problem ? parser.problem : "YAML error", parser.context,
                     parser.context_mark.line + 1);
            else
                fail(&b, parser.problem_mark.line, "%s",
                     parser.problem ? parser.problem : "YAML error");
            rc = -1;
            break;
        }
        rc = on_event(&b, &ev, &docs);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    while (b.depth > 0) {
        struct frame *fr = &b.st[--b.depth];
        json_decref(fr->merge);
        core_free(fr->key);
        core_free(fr->anchor);
        json_decref(fr->v);
    }
    for (size_t i = 0; i < b.nan; i++) {
        core_free(b.an[i].name);
        json_decref(b.an[i].v);
    }
    core_free(b.an);
    if (rc < 0 || b.failed) {
        json_decref(b.root);
        if (jerr[0] && err)
            snprintf(err, errlen, "%s", jerr);
        return NULL;
    }
    return b.root ? b.root : json_null();
}
