/*
 * yaml: the YAML subset kubeconfig files use, read into jansson values.
 *
 * A pure function over a buffer: no I/O, no globals, every allocation
 * through core/alloc.h. The grammar (see core_kube_yaml_parse) is the one
 * kubectl (go-yaml through sigs.k8s.io/yaml), kubeadm and hand-written
 * kubeconfigs use. Anything outside it is rejected with the line number,
 * never guessed at.
 *
 * Method: the text is cut into lines (indentation, content with comments
 * removed, raw content); a recursive descent walks them by indentation. A
 * sequence item "- x" is handled by rewriting its line in place into "x" at
 * the column of x, so "- key: v" followed by "  key2: w" reads as a mapping.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"

#define YAML_MAX_DEPTH 64

struct yline {
    int no;          /* 1-based line number */
    int indent;      /* column of the content */
    const char *s;   /* content (after indentation) */
    size_t n;        /* length without comment and trailing blanks */
    size_t raw;      /* length without trailing blanks, comment kept */
};

struct yp {
    struct yline *l;
    size_t nl, i;
    int depth;
    char *err;
    size_t errlen;
    int failed;
};

static void fail(struct yp *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
fail(struct yp *p, int line, const char *fmt, ...)
{
    if (p->failed)
        return;
    p->failed = 1;
    int k = snprintf(p->err, p->errlen, "line %d: ", line);
    if (k < 0 || (size_t)k >= p->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + k, p->errlen - (size_t)k, fmt, ap);
    va_end(ap);
}

/* A growing string. */
struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

static void
sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = core_realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* Length of s[0..n) without a comment ('#' at the start or after a blank,
 * outside quotes) and trailing blanks. */
static size_t
strip_comment(const char *s, size_t n)
{
    char q = 0;
    size_t end = n;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (q == '"') {
            if (c == '\\' && i + 1 < n)
                i++;
            else if (c == '"')
                q = 0;
        } else if (q == '\'') {
            if (c == '\'')
                q = 0;
        } else if ((c == '"' || c == '\'') && (i == 0 || strchr(" \t[{,:", s[i - 1]))) {
            q = c;
        } else if (c == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
            end = i;
            break;
        }
    }
    while (end > 0 && (s[end - 1] == ' ' || s[end - 1] == '\t'))
        end--;
    return end;
}

/* Cut text into significant lines. 0 or -1 (error set). */
static int
split_lines(struct yp *p, const char *text, size_t len)
{
    size_t cap = 16;
    int no = 0, ended = 0;
    size_t pos = 0;
    p->l = core_malloc(cap * sizeof(*p->l));
    if (!p->l)
        goto oom;
    while (pos < len) {
        const char *s = text + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + (nl ? 1 : 0);
        no++;
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (memchr(s, '\0', n)) {
            fail(p, no, "NUL byte in text");
            return -1;
        }
        size_t ind = 0;
        while (ind < n && s[ind] == ' ')
            ind++;
        if (ind < n && s[ind] == '\t') {
            /* A tab where indentation goes: YAML forbids it, unless the
             * line is blank. */
            size_t k = ind;
            while (k < n && (s[k] == ' ' || s[k] == '\t'))
                k++;
            if (k < n && s[k] != '#') {
                fail(p, no, "tab character in indentation");
                return -1;
            }
            continue;
        }
        if (ind > 10000) {
            fail(p, no, "indentation too deep");
            return -1;
        }
        size_t cn = strip_comment(s + ind, n - ind);
        if (cn == 0)
            continue; /* blank or comment */
        if (ind == 0 && cn == 3 && (memcmp(s, "---", 3) == 0 || memcmp(s, "...", 3) == 0)) {
            if (s[0] == '-' && p->nl == 0 && !ended)
                continue; /* the document start */
            if (s[0] == '.' && !ended) {
                ended = 1;
                continue;
            }
            fail(p, no, "only one YAML document is supported");
            return -1;
        }
        if (ended) {
            fail(p, no, "text after the end of the document");
            return -1;
        }
        size_t raw = n - ind;
        while (raw > 0 && (s[ind + raw - 1] == ' ' || s[ind + raw - 1] == '\t'))
            raw--;
        if (p->nl == cap) {
            cap *= 2;
            struct yline *q = core_realloc(p->l, cap * sizeof(*q));
            if (!q)
                goto oom;
            p->l = q;
        }
        p->l[p->nl++] = (struct yline){no, (int)ind, s + ind, cn, raw};
    }
    return 0;
oom:
    fail(p, no, "out of memory");
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Scalars.                                                                  */

static void
put_utf8(struct sbuf *b, unsigned long cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    sb_add(b, u, n);
}

static int
hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A double-quoted scalar at s[0] == '"' into out; *end gets the index after
 * the closing quote. 0 or -1 (error set). */
static int
dq_scan(struct yp *p, int line, const char *s, size_t n, size_t *end, struct sbuf *out)
{
    size_t i = 1;
    while (i < n && s[i] != '"') {
        if (s[i] != '\\') {
            size_t k = i;
            while (k < n && s[k] != '"' && s[k] != '\\')
                k++;
            sb_add(out, s + i, k - i);
            i = k;
            continue;
        }
        if (i + 1 >= n)
            break;
        char c = s[i + 1];
        char e = 0;
        switch (c) {
        case '0': e = '\0'; break;
        case 'a': e = '\a'; break;
        case 'b': e = '\b'; break;
        case 't': case '\t': e = '\t'; break;
        case 'n': e = '\n'; break;
        case 'v': e = '\v'; break;
        case 'f': e = '\f'; break;
        case 'r': e = '\r'; break;
        case 'e': e = 0x1b; break;
        case ' ': case '"': case '/': case '\\': e = c; break;
        default: break;
        }
        if (e || c == '0') {
            sb_add(out, &e, 1);
            i += 2;
            continue;
        }
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (c == 'N' || c == '_' || c == 'L' || c == 'P') {
            put_utf8(out, c == 'N' ? 0x85 : c == '_' ? 0xA0 : c == 'L' ? 0x2028 : 0x2029);
            i += 2;
            continue;
        }
        if (!digits) {
            fail(p, line, "unknown escape \\%c in double-quoted scalar", c);
            return -1;
        }
        unsigned long cp = 0;
        for (int d = 0; d < digits; d++) {
            int v = i + 2 + (size_t)d < n ? hexval(s[i + 2 + d]) : -1;
            if (v < 0) {
                fail(p, line, "bad \\%c escape in double-quoted scalar", c);
                return -1;
            }
            cp = cp * 16 + (unsigned long)v;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            fail(p, line, "escape \\%c names no Unicode scalar value", c);
            return -1;
        }
        put_utf8(out, cp);
        i += 2 + (size_t)digits;
    }
    if (i >= n) {
        fail(p, line, "unterminated double-quoted scalar");
        return -1;
    }
    *end = i + 1;
    return 0;
}

/* A single-quoted scalar at s[0] == '\''. */
static int
sq_scan(struct yp *p, int line, const char *s, size_t n, size_t *end, struct sbuf *out)
{
    size_t i = 1;
    for (;;) {
        const char *q = i < n ? memchr(s + i, '\'', n - i) : NULL;
        if (!q) {
            fail(p, line, "unterminated single-quoted scalar");
            return -1;
        }
        size_t k = (size_t)(q - s);
        sb_add(out, s + i, k - i);
        if (k + 1 < n && s[k + 1] == '\'') {
            sb_add(out, "'", 1);
            i = k + 2;
            continue;
        }
        *end = k + 1;
        return 0;
    }
}

static json_t *
new_string(struct yp *p, int line, struct sbuf *b)
{
    if (b->oom) {
        fail(p, line, "out of memory");
        return NULL;
    }
    json_t *j = json_stringn(b->p ? b->p : "", b->len);
    if (!j)
        fail(p, line, "scalar is not valid UTF-8 (or out of memory)");
    return j;
}

/* A plain scalar's value: YAML 1.2 core schema booleans, null, integers,
 * else a string. */
static json_t *
plain_value(struct yp *p, int line, const char *s, size_t n)
{
    static const char *const tru[] = {"true", "True", "TRUE"};
    static const char *const fal[] = {"false", "False", "FALSE"};
    static const char *const nul[] = {"null", "Null", "NULL", "~"};
    json_t *j;
    for (size_t k = 0; k < 3; k++) {
        if (strlen(tru[k]) == n && memcmp(s, tru[k], n) == 0)
            return json_true();
        if (strlen(fal[k]) == n && memcmp(s, fal[k], n) == 0)
            return json_false();
    }
    for (size_t k = 0; k < 4; k++)
        if (strlen(nul[k]) == n && memcmp(s, nul[k], n) == 0)
            return json_null();
    if (n > 0 && n < 24) {
        char num[24];
        memcpy(num, s, n);
        num[n] = '\0';
        size_t d = (num[0] == '-' || num[0] == '+') ? 1 : 0;
        int base = 10;
        if (d == 0 && n > 2 && num[0] == '0' && (num[1] == 'x' || num[1] == 'o'))
            base = num[1] == 'x' ? 16 : 8;
        const char *digits = base == 10 ? num + d : num + 2;
        int ok = *digits != '\0';
        for (const char *c = digits; *c && ok; c++)
            ok = base == 16 ? isxdigit((unsigned char)*c) : base == 8 ? (*c >= '0' && *c <= '7')
                                                                       : isdigit((unsigned char)*c);
        if (ok) {
            errno = 0;
            long long v = strtoll(digits, NULL, base);
            if (errno == 0) {
                j = json_integer(num[0] == '-' ? -v : v);
                if (!j)
                    fail(p, line, "out of memory");
                return j;
            }
        }
    }
    struct sbuf b = {0};
    sb_add(&b, s, n);
    j = new_string(p, line, &b);
    core_free(b.p);
    return j;
}

static int
forbidden_start(struct yp *p, int line, char c)
{
    const char *what = NULL;
    switch (c) {
    case '&': what = "anchors are"; break;
    case '*': what = "aliases are"; break;
    case '!': what = "tags are"; break;
    case '|': case '>': what = "block scalars are"; break;
    case '%': what = "directives are"; break;
    case '@': case '`': what = "reserved indicators are"; break;
    case '?': what = "complex keys are"; break;
    default: return 0;
    }
    fail(p, line, "%s not supported in kubeconfig YAML", what);
    return 1;
}

static json_t *flow_value(struct yp *p, int line, const char *s, size_t n, size_t *pos);

static void
skip_blank(const char *s, size_t n, size_t *pos)
{
    while (*pos < n && (s[*pos] == ' ' || s[*pos] == '\t' || s[*pos] == '\n'))
        (*pos)++;
}

/* A scalar inside a flow collection: quoted, nested flow, or plain up to
 * ',', ']', '}' or ": ". */
static json_t *
flow_item(struct yp *p, int line, const char *s, size_t n, size_t *pos, int in_map)
{
    skip_blank(s, n, pos);
    if (*pos >= n) {
        fail(p, line, "unterminated flow collection");
        return NULL;
    }
    char c = s[*pos];
    if (c == '[' || c == '{')
        return flow_value(p, line, s, n, pos);
    if (forbidden_start(p, line, c))
        return NULL;
    if (c == '"' || c == '\'') {
        struct sbuf b = {0};
        size_t end = 0;
        int rc = c == '"' ? dq_scan(p, line, s + *pos, n - *pos, &end, &b)
                          : sq_scan(p, line, s + *pos, n - *pos, &end, &b);
        json_t *j = rc < 0 ? NULL : new_string(p, line, &b);
        core_free(b.p);
        *pos += end;
        return j;
    }
    size_t st = *pos;
    while (*pos < n) {
        char d = s[*pos];
        if (d == ',' || d == ']' || d == '}')
            break;
        if (in_map && d == ':' && (*pos + 1 >= n || strchr(" \t\n,]}", s[*pos + 1])))
            break;
        (*pos)++;
    }
    size_t e = *pos;
    while (e > st && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n'))
        e--;
    return plain_value(p, line, s + st, e - st);
}

/* "[...]" or "{...}" at s[*pos]. */
static json_t *
flow_value(struct yp *p, int line, const char *s, size_t n, size_t *pos)
{
    char open = s[*pos], close = open == '[' ? ']' : '}';
    json_t *out = open == '[' ? json_array() : json_object();
    if (!out) {
        fail(p, line, "out of memory");
        return NULL;
    }
    if (++p->depth > YAML_MAX_DEPTH) {
        fail(p, line, "nesting deeper than %d", YAML_MAX_DEPTH);
        goto fail;
    }
    (*pos)++;
    for (;;) {
        skip_blank(s, n, pos);
        if (*pos < n && s[*pos] == close) {
            (*pos)++;
            break;
        }
        json_t *k = flow_item(p, line, s, n, pos, open == '{');
        if (!k)
            goto fail;
        if (open == '[') {
            if (json_array_append_new(out, k) < 0) {
                fail(p, line, "out of memory");
                goto fail;
            }
        } else {
            skip_blank(s, n, pos);
            json_t *v;
            if (*pos < n && s[*pos] == ':') {
                (*pos)++;
                skip_blank(s, n, pos);
                v = (*pos < n && (s[*pos] == ',' || s[*pos] == '}'))
                        ? json_null() : flow_item(p, line, s, n, pos, 1);
            } else {
                v = json_null();
            }
            if (!v || !json_is_string(k) || json_object_get(out, json_string_value(k))) {
                if (v && json_is_string(k))
                    fail(p, line, "duplicate key \"%s\"", json_string_value(k));
                else if (v)
                    fail(p, line, "flow mapping key must be a string");
                json_decref(k);
                json_decref(v);
                goto fail;
            }
            int rc = json_object_set_new(out, json_string_value(k), v);
            json_decref(k);
            if (rc < 0) {
                fail(p, line, "out of memory");
                goto fail;
            }
        }
        skip_blank(s, n, pos);
        if (*pos < n && s[*pos] == ',') {
            (*pos)++;
            continue;
        }
        if (*pos < n && s[*pos] == close) {
            (*pos)++;
            break;
        }
        if (*pos >= n) {
            fail(p, line, "unterminated flow collection");
            goto fail;
        }
        fail(p, line, "expected ',' or '%c' in flow collection", close);
        goto fail;
    }
    p->depth--;
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* A scalar value starting with s[0..n) on line `line` (content of that line
 * only), continued on the following lines indented more than parent. */
static json_t *
scalar_value(struct yp *p, int parent, const struct yline *first, const char *s, size_t n)
{
    int line = first->no;
    char c = s[0];
    int quoted = c == '"' || c == '\'' || c == '[' || c == '{';
    struct sbuf b = {0};
    json_t *j = NULL;

    if (forbidden_start(p, line, c))
        return NULL;
    if (c == '-' && (n == 1 || s[1] == ' ')) {
        fail(p, line, "a sequence item is not allowed here");
        return NULL;
    }
    /* Quoted and flow values keep comment-like text of their own lines. */
    size_t firstlen = quoted ? (size_t)(first->s + first->raw - s) : n;
    sb_add(&b, s, firstlen);
    while (p->i < p->nl && p->l[p->i].indent > parent) {
        const struct yline *ln = &p->l[p->i++];
        if (c == '"' && b.len > 0 && b.p[b.len - 1] == '\\') {
            size_t k = b.len - 1, bs = 0;
            while (k < b.len && b.p[k] == '\\') {
                bs++;
                if (k == 0)
                    break;
                k--;
            }
            if (bs % 2 == 1) { /* escaped line break: no space */
                b.len--;
                sb_add(&b, ln->s, quoted ? ln->raw : ln->n);
                continue;
            }
        }
        sb_add(&b, " ", 1);
        sb_add(&b, ln->s, quoted ? ln->raw : ln->n);
    }
    if (b.oom) {
        fail(p, line, "out of memory");
        goto out;
    }
    if (quoted) {
        size_t end = 0;
        if (c == '[' || c == '{') {
            j = flow_value(p, line, b.p, b.len, &end);
        } else {
            struct sbuf v = {0};
            int rc = c == '"' ? dq_scan(p, line, b.p, b.len, &end, &v)
                              : sq_scan(p, line, b.p, b.len, &end, &v);
            j = rc < 0 ? NULL : new_string(p, line, &v);
            core_free(v.p);
        }
        if (j) {
            size_t rest = end;
            skip_blank(b.p, b.len, &rest);
            if (rest < b.len && b.p[rest] != '#') {
                fail(p, line, "unexpected text after a quoted scalar or flow collection");
                json_decref(j);
                j = NULL;
            }
        }
        goto out;
    }
    for (size_t k = 0; k + 1 < b.len; k++)
        if (b.p[k] == ':' && (b.p[k + 1] == ' ' || b.p[k + 1] == '\t')) {
            fail(p, line, "mapping values are not allowed in this context");
            goto out;
        }
    j = plain_value(p, line, b.p, b.len);
out:
    core_free(b.p);
    return j;
}

/* ------------------------------------------------------------------------ */
/* Block structure.                                                          */

static int
is_dash(const struct yline *ln)
{
    return ln->s[0] == '-' && (ln->n == 1 || ln->s[1] == ' ' || ln->s[1] == '\t');
}

/* If ln is "key: ..." put the key into key and the value's offset into *val
 * and return 1; 0 when the line is no mapping entry; -1 on error. */
static int
key_of(struct yp *p, const struct yline *ln, struct sbuf *key, size_t *val)
{
    const char *s = ln->s;
    size_t n = ln->n, k;
    if (s[0] == '"' || s[0] == '\'') {
        size_t end = 0;
        struct yp probe = *p; /* a quoted scalar that is not a key is no error here */
        char dummy[8];
        probe.err = dummy;
        probe.errlen = sizeof(dummy);
        probe.failed = 0;
        int rc = s[0] == '"' ? dq_scan(&probe, ln->no, s, n, &end, key)
                             : sq_scan(&probe, ln->no, s, n, &end, key);
        if (rc < 0)
            return 0;
        k = end;
        while (k < n && (s[k] == ' ' || s[k] == '\t'))
            k++;
        if (k < n && s[k] == ':' && (k + 1 == n || s[k + 1] == ' ' || s[k + 1] == '\t')) {
            *val = k + 1;
            return 1;
        }
        key->len = 0;
        return 0;
    }
    if (s[0] == '[' || s[0] == '{')
        return 0;
    if (s[0] == '?' && (n == 1 || s[1] == ' ')) {
        fail(p, ln->no, "complex keys are not supported in kubeconfig YAML");
        return -1;
    }
    for (k = 0; k < n; k++)
        if (s[k] == ':' && (k + 1 == n || s[k + 1] == ' ' || s[k + 1] == '\t'))
            break;
    if (k == n)
        return 0;
    size_t e = k;
    while (e > 0 && (s[e - 1] == ' ' || s[e - 1] == '\t'))
        e--;
    if (e == 0)
        return 0;
    if (forbidden_start(p, ln->no, s[0]))
        return -1;
    sb_add(key, s, e);
    *val = k + 1;
    return 1;
}

static json_t *parse_node(struct yp *p, int parent);

static json_t *
parse_seq(struct yp *p, int ind)
{
    json_t *a = json_array();
    if (!a) {
        fail(p, p->l[p->i].no, "out of memory");
        return NULL;
    }
    while (!p->failed && p->i < p->nl && p->l[p->i].indent == ind && is_dash(&p->l[p->i])) {
        struct yline *ln = &p->l[p->i];
        size_t k = 1;
        json_t *item;
        while (k < ln->n && (ln->s[k] == ' ' || ln->s[k] == '\t'))
            k++;
        if (k >= ln->n) {
            p->i++;
            item = (p->i < p->nl && p->l[p->i].indent > ind) ? parse_node(p, ind) : json_null();
        } else {
            ln->indent = ind + (int)k;
            ln->s += k;
            ln->n -= k;
            ln->raw -= k;
            item = parse_node(p, ind);
        }
        if (!item || json_array_append_new(a, item) < 0) {
            fail(p, ln->no, "out of memory");
            goto fail;
        }
    }
    if (!p->failed && p->i < p->nl && p->l[p->i].indent > ind)
        fail(p, p->l[p->i].no, "bad indentation after a sequence item");
    if (p->failed)
        goto fail;
    return a;
fail:
    json_decref(a);
    return NULL;
}

static json_t *
parse_map(struct yp *p, int ind)
{
    json_t *m = json_object();
    struct sbuf key = {0};
    if (!m) {
        fail(p, p->l[p->i].no, "out of memory");
        return NULL;
    }
    while (!p->failed && p->i < p->nl && p->l[p->i].indent == ind) {
        const struct yline *ln = &p->l[p->i];
        size_t val = 0;
        json_t *v;
        key.len = 0;
        if (is_dash(ln)) {
            fail(p, ln->no, "expected a mapping key, found a sequence item");
            break;
        }
        int r = key_of(p, ln, &key, &val);
        if (r < 0)
            break;
        if (r == 0) {
            fail(p, ln->no, "expected \"key: value\"");
            break;
        }
        if (key.oom) {
            fail(p, ln->no, "out of memory");
            break;
        }
        if (json_object_getn(m, key.p ? key.p : "", key.len)) {
            fail(p, ln->no, "duplicate key \"%.*s\"", (int)key.len, key.p ? key.p : "");
            break;
        }
        while (val < ln->n && (ln->s[val] == ' ' || ln->s[val] == '\t'))
            val++;
        p->i++;
        if (val < ln->n)
            v = scalar_value(p, ind, ln, ln->s + val, ln->n - val);
        else if (p->i < p->nl && p->l[p->i].indent > ind)
            v = parse_node(p, ind);
        else if (p->i < p->nl && p->l[p->i].indent == ind && is_dash(&p->l[p->i]))
            v = parse_seq(p, ind);
        else
            v = json_null();
        if (!v)
            break;
        if (json_object_setn_new(m, key.p ? key.p : "", key.len, v) < 0) {
            fail(p, ln->no, "out of memory");
            break;
        }
    }
    core_free(key.p);
    if (!p->failed && p->i < p->nl && p->l[p->i].indent > ind)
        fail(p, p->l[p->i].no, "bad indentation of a mapping entry");
    if (p->failed) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* The node starting at the current line, indented more than parent. */
static json_t *
parse_node(struct yp *p, int parent)
{
    const struct yline *ln = &p->l[p->i];
    json_t *j;
    size_t val = 0;
    struct sbuf key = {0};

    if (++p->depth > YAML_MAX_DEPTH) {
        fail(p, ln->no, "nesting deeper than %d", YAML_MAX_DEPTH);
        return NULL;
    }
    if (is_dash(ln)) {
        j = parse_seq(p, ln->indent);
    } else {
        int r = key_of(p, ln, &key, &val);
        core_free(key.p);
        if (r < 0)
            j = NULL;
        else if (r > 0)
            j = parse_map(p, ln->indent);
        else {
            p->i++;
            j = scalar_value(p, parent, ln, ln->s, ln->n);
        }
    }
    p->depth--;
    return j;
}

json_t *
core_kube_yaml_parse(const char *text, size_t len, char *err, size_t errlen)
{
    struct yp p = {.err = err, .errlen = errlen};
    json_t *root = NULL;
    char jerr[200] = "";
    size_t k = 0;

    if (err && errlen)
        err[0] = '\0';
    if (!text)
        len = 0;
    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB &&
        (unsigned char)text[2] == 0xBF)
        k = 3; /* UTF-8 byte order mark */
    /* JSON is YAML too; jansson reads it faster and exactly. */
    size_t f = k;
    while (f < len && isspace((unsigned char)text[f]))
        f++;
    if (f < len && (text[f] == '{' || text[f] == '[')) {
        json_error_t je;
        root = json_loadb(text + k, len - k, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (root)
            return root;
        /* Perhaps a YAML flow document that is not JSON: try that, and
         * report the JSON error if it fails too. */
        snprintf(jerr, sizeof(jerr), "line %d: %s", je.line, je.text);
    }
    if (split_lines(&p, text + k, len - k) < 0)
        goto out;
    if (p.i >= p.nl) {
        root = json_null();
        goto out;
    }
    root = parse_node(&p, -1);
    if (root && p.i < p.nl)
        fail(&p, p.l[p.i].no, "unexpected text (bad indentation?)");
    if (p.failed) {
        json_decref(root);
        root = NULL;
    }
out:
    if (!root && jerr[0] && err)
        snprintf(err, errlen, "%s", jerr);
    core_free(p.l);
    return root;
}
