/* Label selector parser and label validation (see selector.h). */
#include "selector.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
is_name_char(int c)
{
    return isalnum(c) || c == '-' || c == '_' || c == '.';
}

/* 1..63 chars of [A-Za-z0-9._-], alphanumeric at both ends. */
static int
name_valid(const char *s, size_t n)
{
    if (n == 0 || n > 63)
        return 0;
    if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_name_char((unsigned char)s[i]))
            return 0;
    return 1;
}

static int
is_lower_alnum(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* DNS subdomain: dot-separated labels of [a-z0-9-], alnum at the ends. */
static int
prefix_valid(const char *s, size_t n)
{
    if (n == 0 || n > 253)
        return 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            size_t len = i - start;
            if (len == 0 || len > 63)
                return 0;
            if (!is_lower_alnum(s[start]) || !is_lower_alnum(s[i - 1]))
                return 0;
            for (size_t j = start; j < i; j++)
                if (!is_lower_alnum(s[j]) && s[j] != '-')
                    return 0;
            start = i + 1;
        }
    }
    return 1;
}

int
hz_label_key_valid(const char *key)
{
    if (!key)
        return 0;
    const char *slash = strchr(key, '/');
    if (!slash)
        return name_valid(key, strlen(key));
    if (strchr(slash + 1, '/'))
        return 0;
    return prefix_valid(key, (size_t)(slash - key)) && name_valid(slash + 1, strlen(slash + 1));
}

int
hz_label_value_valid(const char *value)
{
    if (!value)
        return 0;
    size_t n = strlen(value);
    return n == 0 || name_valid(value, n);
}

int
hz_labels_valid(json_t *labels, char *err, size_t errlen)
{
    if (!json_is_object(labels)) {
        snprintf(err, errlen, "labels must be an object");
        return 0;
    }
    const char *k;
    json_t *v;
    json_object_foreach(labels, k, v)
    {
        if (!hz_label_key_valid(k)) {
            snprintf(err, errlen, "invalid label key '%.80s'", k);
            return 0;
        }
        if (!json_is_string(v) || !hz_label_value_valid(json_string_value(v))) {
            snprintf(err, errlen, "invalid label value for key '%.80s'", k);
            return 0;
        }
    }
    return 1;
}

static void
req_clear(struct hz_sel_req *q)
{
    free(q->key);
    for (size_t i = 0; i < q->n_values; i++)
        free(q->values[i]);
    free(q->values);
    memset(q, 0, sizeof(*q));
}

void
hz_selector_free(struct hz_selector *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->n_reqs; i++)
        req_clear(&sel->reqs[i]);
    free(sel->reqs);
    free(sel);
}

/* Copy s[0..n) with surrounding blanks trimmed. */
static char *
dup_trim(const char *s, size_t n)
{
    while (n > 0 && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    return strndup(s, n);
}

static int
add_value(struct hz_sel_req *q, const char *s, size_t n)
{
    char **nv = realloc(q->values, (q->n_values + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    q->values = nv;
    char *v = dup_trim(s, n);
    if (!v)
        return -ENOMEM;
    q->values[q->n_values++] = v;
    return 0;
}

/* Find a word (surrounded by blanks) in s[0..n): "in" or "notin". */
static const char *
find_word(const char *s, size_t n, const char *word)
{
    size_t wl = strlen(word);
    for (size_t i = 1; i + wl < n; i++) {
        if (isspace((unsigned char)s[i - 1]) && strncmp(s + i, word, wl) == 0 &&
            (isspace((unsigned char)s[i + wl]) || s[i + wl] == '('))
            return s + i;
    }
    return NULL;
}

/* Parse one requirement s[0..n) into q. */
static int
parse_req(const char *s, size_t n, struct hz_sel_req *q, char *err, size_t errlen)
{
    int rc = -EINVAL;
    char *term = dup_trim(s, n);
    if (!term)
        return -ENOMEM;
    size_t tl = strlen(term);
    if (tl == 0) {
        snprintf(err, errlen, "empty requirement");
        goto fail;
    }
    const char *w;
    if (term[tl - 1] == ')' &&
        ((w = find_word(term, tl, "notin")) || (w = find_word(term, tl, "in")))) {
        q->op = w[0] == 'n' ? HZ_SEL_NOTIN : HZ_SEL_IN;
        q->key = dup_trim(term, (size_t)(w - term));
        if (!q->key) {
            rc = -ENOMEM;
            goto fail;
        }
        const char *p = w + (q->op == HZ_SEL_NOTIN ? 5 : 2);
        while (isspace((unsigned char)*p))
            p++;
        if (*p != '(') {
            snprintf(err, errlen, "expected '(' after set operator");
            goto fail;
        }
        p++;
        const char *end = term + tl - 1; /* the ')' */
        if (memchr(p, '(', (size_t)(end - p)) || memchr(p, ')', (size_t)(end - p))) {
            snprintf(err, errlen, "unbalanced parentheses");
            goto fail;
        }
        while (p <= end) {
            const char *c = memchr(p, ',', (size_t)(end - p));
            const char *stop = c ? c : end;
            if ((rc = add_value(q, p, (size_t)(stop - p))) < 0)
                goto fail;
            rc = -EINVAL;
            if (q->values[q->n_values - 1][0] == '\0') {
                snprintf(err, errlen, "empty value in set");
                goto fail;
            }
            p = stop + 1;
        }
    } else if (term[0] == '!' && !strchr(term, '=')) {
        q->op = HZ_SEL_ABSENT;
        q->key = dup_trim(term + 1, tl - 1);
        if (!q->key) {
            rc = -ENOMEM;
            goto fail;
        }
    } else {
        const char *eq = strchr(term, '=');
        if (!eq) {
            q->op = HZ_SEL_EXISTS;
            q->key = strdup(term);
            if (!q->key) {
                rc = -ENOMEM;
                goto fail;
            }
        } else {
            size_t klen = (size_t)(eq - term);
            const char *val = eq + 1;
            if (klen > 0 && term[klen - 1] == '!') {
                q->op = HZ_SEL_NE;
                klen--;
            } else {
                q->op = HZ_SEL_EQ;
                if (*val == '=')
                    val++;
            }
            if (strchr(val, '=') || strchr(val, '!')) {
                snprintf(err, errlen, "invalid operator in '%.80s'", term);
                goto fail;
            }
            q->key = dup_trim(term, klen);
            if (!q->key) {
                rc = -ENOMEM;
                goto fail;
            }
            if ((rc = add_value(q, val, strlen(val))) < 0)
                goto fail;
            rc = -EINVAL;
        }
    }
    if (!hz_label_key_valid(q->key)) {
        snprintf(err, errlen, "invalid label key '%.80s'", q->key);
        goto fail;
    }
    for (size_t i = 0; i < q->n_values; i++) {
        if (!hz_label_value_valid(q->values[i])) {
            snprintf(err, errlen, "invalid label value '%.80s'", q->values[i]);
            goto fail;
        }
    }
    free(term);
    return 0;
fail:
    free(term);
    req_clear(q);
    return rc;
}

int
hz_selector_parse(const char *text, struct hz_selector **out, char *err, size_t errlen)
{
    int rc = -ENOMEM;
    struct hz_selector *sel = calloc(1, sizeof(*sel));
    *out = NULL;
    if (!sel)
        return -ENOMEM;
    if (!text)
        text = "";
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '\0') {
        *out = sel;
        return 0;
    }
    const char *start = p;
    int depth = 0;
    for (;; p++) {
        if (*p == '(') {
            depth++;
        } else if (*p == ')') {
            if (--depth < 0) {
                snprintf(err, errlen, "unbalanced parentheses");
                rc = -EINVAL;
                goto fail;
            }
        } else if ((*p == ',' && depth == 0) || *p == '\0') {
            if (*p == '\0' && depth != 0) {
                snprintf(err, errlen, "unbalanced parentheses");
                rc = -EINVAL;
                goto fail;
            }
            struct hz_sel_req *nr = realloc(sel->reqs, (sel->n_reqs + 1) * sizeof(*nr));
            if (!nr) {
                rc = -ENOMEM;
                goto fail;
            }
            sel->reqs = nr;
            memset(&sel->reqs[sel->n_reqs], 0, sizeof(sel->reqs[0]));
            rc = parse_req(start, (size_t)(p - start), &sel->reqs[sel->n_reqs], err, errlen);
            if (rc < 0)
                goto fail;
            sel->n_reqs++;
            if (*p == '\0')
                break;
            start = p + 1;
        }
    }
    *out = sel;
    return 0;
fail:
    hz_selector_free(sel);
    return rc;
}

static int
in_values(const struct hz_sel_req *q, const char *v)
{
    for (size_t i = 0; i < q->n_values; i++)
        if (strcmp(q->values[i], v) == 0)
            return 1;
    return 0;
}

int
hz_selector_match(const struct hz_selector *sel, json_t *labels)
{
    for (size_t i = 0; i < sel->n_reqs; i++) {
        const struct hz_sel_req *q = &sel->reqs[i];
        json_t *jv = labels ? json_object_get(labels, q->key) : NULL;
        const char *v = json_is_string(jv) ? json_string_value(jv) : NULL;
        int ok;
        switch (q->op) {
        case HZ_SEL_EQ:
            ok = v && strcmp(v, q->values[0]) == 0;
            break;
        case HZ_SEL_NE:
            ok = !v || strcmp(v, q->values[0]) != 0;
            break;
        case HZ_SEL_EXISTS:
            ok = v != NULL;
            break;
        case HZ_SEL_ABSENT:
            ok = v == NULL;
            break;
        case HZ_SEL_IN:
            ok = v && in_values(q, v);
            break;
        case HZ_SEL_NOTIN:
            ok = !v || !in_values(q, v);
            break;
        default:
            ok = 0;
        }
        if (!ok)
            return 0;
    }
    return 1;
}
