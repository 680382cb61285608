/*
 * jparse: a fast, strict JSON reader that builds jansson values.
 *
 * Watch events and list pages are parsed once per object, and jansson's
 * reader (a character stream with a callback per byte) costs tens of
 * microseconds for a 1 KiB object; this single-pass reader over the buffer
 * builds the same values several times faster. It accepts exactly RFC 8259
 * JSON (one value, surrounded by whitespace only), as json_loadb does with
 * JSON_DECODE_ANY: strings must be valid UTF-8 without raw control
 * characters; \u escapes with surrogate pairs; integers that do not fit
 * json_int_t are rejected, as jansson rejects them; a duplicate key keeps
 * the last value. One difference, stricter: json_loadb stops reading at a
 * NUL byte as at the end of its input, where this reader rejects a NUL
 * anywhere (tests/fuzz/fuzz_jparse.c checks both). Pure; allocations go
 * through jansson (and so through the allocation hook when installed).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"

#define JP_MAX_DEPTH 512

struct jp {
    const unsigned char *p, *end;
    int depth;
    char *tmp; /* decode buffer for escaped strings */
    size_t tmpcap;
};

static void
ws(struct jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

/* Length of a valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0xC2 || c > 0xF4)
        return 0;
    size_t len = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if (c == 0xE0 && s[1] < 0xA0)
        return 0; /* overlong */
    if (c == 0xED && s[1] >= 0xA0)
        return 0; /* surrogate */
    if (c == 0xF0 && s[1] < 0x90)
        return 0; /* overlong */
    if (c == 0xF4 && s[1] >= 0x90)
        return 0; /* over U+10FFFF */
    return len;
}

static int
hex4(const unsigned char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static int
tmp_reserve(struct jp *j, size_t n)
{
    if (n <= j->tmpcap)
        return 0;
    size_t cap = j->tmpcap ? j->tmpcap : 256;
    while (cap < n)
        cap *= 2;
    char *t = core_realloc(j->tmp, cap);
    if (!t)
        return -1;
    j->tmp = t;
    j->tmpcap = cap;
    return 0;
}

/* What the one-letter escapes \X stand for; 0 for the others (\u is
 * decoded apart). */
static const char unescape[256] = {
    ['"'] = '"',  ['\\'] = '\\', ['/'] = '/',  ['b'] = '\b',
    ['f'] = '\f', ['n'] = '\n',  ['r'] = '\r', ['t'] = '\t',
};

/* A string at j->p == '"': its bytes (borrowed from the input or from
 * j->tmp) and length. 0 or -1. */
static int
string(struct jp *j, const char **out, size_t *outlen)
{
    const unsigned char *s = ++j->p, *e = j->end;
    /* Fast path: no escape. */
    while (s < e) {
        unsigned char c = *s;
        if (c == '"') {
            *out = (const char *)j->p;
            *outlen = (size_t)(s - j->p);
            j->p = s + 1;
            return 0;
        }
        if (c == '\\')
            break;
        if (c < 0x20)
            return -1;
        if (c < 0x80) {
            s++;
            continue;
        }
        size_t l = utf8_len(s, (size_t)(e - s));
        if (!l)
            return -1;
        s += l;
    }
    if (s >= e)
        return -1;
    /* Escapes: decode into tmp (never longer than the input). */
    if (tmp_reserve(j, (size_t)(e - j->p) + 4) < 0)
        return -1;
    size_t o = (size_t)(s - j->p);
    memcpy(j->tmp, j->p, o);
    while (s < e) {
        unsigned char c = *s;
        if (c == '"') {
            if (memchr(j->tmp, 0, o))
                return -1; /* \u0000: jansson refuses it without JSON_ALLOW_NUL */
            *out = j->tmp;
            *outlen = o;
            j->p = s + 1;
            return 0;
        }
        if (c < 0x20)
            return -1;
        if (c >= 0x80) {
            size_t l = utf8_len(s, (size_t)(e - s));
            if (!l)
                return -1;
            memcpy(j->tmp + o, s, l);
            o += l;
            s += l;
            continue;
        }
        if (c != '\\') {
            j->tmp[o++] = (char)c;
            s++;
            continue;
        }
        if (++s >= e)
            return -1;
        c = *s++;
        if (unescape[c]) {
            j->tmp[o++] = unescape[c];
            continue;
        }
        if (c != 'u')
            return -1;
        unsigned cp, lo;
        if (e - s < 4 || hex4(s, &cp) < 0)
            return -1;
        s += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (e - s < 6 || s[0] != '\\' || s[1] != 'u' || hex4(s + 2, &lo) < 0 || lo < 0xDC00 ||
                lo > 0xDFFF)
                return -1;
            s += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return -1;
        }
        if (cp < 0x80) {
            j->tmp[o++] = (char)cp;
        } else if (cp < 0x800) {
            j->tmp[o++] = (char)(0xC0 | (cp >> 6));
            j->tmp[o++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            j->tmp[o++] = (char)(0xE0 | (cp >> 12));
            j->tmp[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            j->tmp[o++] = (char)(0x80 | (cp & 0x3F));
        } else {
            j->tmp[o++] = (char)(0xF0 | (cp >> 18));
            j->tmp[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            j->tmp[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            j->tmp[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return -1;
}

static json_t *
number(struct jp *j)
{
    const unsigned char *s = j->p, *e = j->end, *st = s;
    int is_int = 1;
    if (s < e && *s == '-')
        s++;
    if (s >= e)
        return NULL;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (s < e && *s >= '0' && *s <= '9')
            s++;
    else
        return NULL;
    if (s < e && *s == '.') {
        is_int = 0;
        if (++s >= e || *s < '0' || *s > '9')
            return NULL;
        while (s < e && *s >= '0' && *s <= '9')
            s++;
    }
    if (s < e && (*s == 'e' || *s == 'E')) {
        is_int = 0;
        if (++s < e && (*s == '+' || *s == '-'))
            s++;
        if (s >= e || *s < '0' || *s > '9')
            return NULL;
        while (s < e && *s >= '0' && *s <= '9')
            s++;
    }
    j->p = s;
    if (is_int) {
        /* Digits only (and a sign): accumulate with an overflow check. */
        const unsigned char *d = st;
        int neg = *d == '-';
        unsigned long long v = 0, lim = neg ? (unsigned long long)LLONG_MAX + 1
                                            : (unsigned long long)LLONG_MAX;
        for (d += neg; d < s; d++) {
            unsigned dig = (unsigned)(*d - '0');
            if (v > (lim - dig) / 10)
                return NULL; /* as jansson: too big an integer */
            v = v * 10 + dig;
        }
        return json_integer(neg ? (json_int_t)(0 - v) : (json_int_t)v);
    }
    char buf[64];
    size_t n = (size_t)(s - st);
    char *heap = n >= sizeof(buf) ? core_malloc(n + 1) : NULL;
    char *b = heap ? heap : buf;
    if (n >= sizeof(buf) && !heap)
        return NULL;
    memcpy(b, st, n);
    b[n] = '\0';
    double d = strtod(b, NULL);
    core_free(heap);
    if (d == HUGE_VAL || d == -HUGE_VAL)
        return NULL; /* as jansson: real number overflow */
    return json_real(d);
}

static json_t *value(struct jp *j);

/* 1 and past it if the next byte is c, else 0. */
static int
eat(struct jp *j, unsigned char c)
{
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return 1;
    }
    return 0;
}

/* One "key": value of an object at j->p, set in o. 0 or -1. */
static int
member(struct jp *j, json_t *o)
{
    const char *k;
    size_t kn;
    ws(j);
    if (j->p >= j->end || *j->p != '"' || string(j, &k, &kn) < 0 || memchr(k, 0, kn))
        return -1;
    /* the key may live in tmp, which the value may reuse: copy it */
    char kbuf[128];
    char *key = kn < sizeof(kbuf) ? kbuf : core_malloc(kn + 1);
    if (!key)
        return -1;
    memcpy(key, k, kn);
    key[kn] = '\0';
    ws(j);
    json_t *v = eat(j, ':') ? value(j) : NULL;
    int rc = v ? json_object_setn_new_nocheck(o, key, kn, v) : -1;
    if (key != kbuf)
        core_free(key);
    return rc < 0 ? -1 : 0;
}

/* One element of an array at j->p, appended to a. 0 or -1. */
static int
element(struct jp *j, json_t *a)
{
    json_t *v = value(j);
    return v && json_array_append_new(a, v) == 0 ? 0 : -1;
}

/* An object or an array at j->p (its opening byte) into c (new, NULL when
 * out of memory): items read by item, separated by ',' and ended by close.
 * c, or NULL (c freed) on a syntax error or an allocation failure. */
static json_t *
container(struct jp *j, json_t *c, unsigned char close, int (*item)(struct jp *, json_t *))
{
    j->p++;
    ws(j);
    if (eat(j, close))
        return c;
    while (c && item(j, c) == 0) {
        ws(j);
        if (eat(j, ','))
            continue;
        if (eat(j, close))
            return c;
        break;
    }
    json_decref(c);
    return NULL;
}

static int
word(struct jp *j, const char *w, size_t n)
{
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
        return 0;
    j->p += n;
    return 1;
}

static json_t *
value(struct jp *j)
{
    json_t *v = NULL;
    ws(j);
    if (j->p >= j->end || ++j->depth > JP_MAX_DEPTH)
        return NULL;
    switch (*j->p) {
    case '{':
        v = container(j, json_object(), '}', member);
        break;
    case '[':
        v = container(j, json_array(), ']', element);
        break;
    case '"': {
        const char *s;
        size_t n;
        if (string(j, &s, &n) == 0)
            v = json_stringn_nocheck(s, n);
        break;
    }
    case 't':
        v = word(j, "true", 4) ? json_true() : NULL;
        break;
    case 'f':
        v = word(j, "false", 5) ? json_false() : NULL;
        break;
    case 'n':
        v = word(j, "null", 4) ? json_null() : NULL;
        break;
    default:
        v = number(j);
        break;
    }
    j->depth--;
    return v;
}

json_t *
core_kube_json_parse(const char *text, size_t len)
{
    struct jp j = {(const unsigned char *)text, (const unsigned char *)text + len, 0, NULL, 0};
    if (!text)
        return NULL;
    json_t *v = value(&j);
    ws(&j);
    if (v && j.p != j.end) {
        json_decref(v);
        v = NULL;
    }
    core_free(j.tmp);
    return v;
}
