/* A compact JSON writer for jansson values, several times faster than
 * json_dumps on the large objects watches carry: strings are copied in runs
 * and only the characters JSON requires are escaped (jansson has already
 * validated their UTF-8). Output matches json_dumps(v, JSON_COMPACT). */
#include "fk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
grow(struct fk_buf *b, size_t need)
{
    size_t cap = b->cap ? b->cap : 4096;
    char *p;
    if (b->len + need <= b->cap)
        return 0;
    while (cap < b->len + need)
        cap *= 2;
    p = realloc(b->p, cap);
    if (!p) {
        b->err = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* See fk.h. */
void
fk_buf_add(struct fk_buf *b, const char *s, size_t n)
{
    if (b->err || grow(b, n) < 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void
write_string(struct fk_buf *b, const char *s, size_t n)
{
    size_t start = 0;
    fk_buf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *e = NULL;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        fk_buf_add(b, s + start, i - start);
        switch (c) {
        case '"':
            e = "\\\"";
            break;
        case '\\':
            e = "\\\\";
            break;
        case '\b':
            e = "\\b";
            break;
        case '\f':
            e = "\\f";
            break;
        case '\n':
            e = "\\n";
            break;
        case '\r':
            e = "\\r";
            break;
        case '\t':
            e = "\\t";
            break;
        default:
            snprintf(esc, sizeof(esc), "\\u%04X", c);
            e = esc;
        }
        fk_buf_add(b, e, strlen(e));
        start = i + 1;
    }
    fk_buf_add(b, s + start, n - start);
    fk_buf_add(b, "\"", 1);
}

/* See fk.h. */
void
fk_json_write(struct fk_buf *b, json_t *v)
{
    char num[64];
    const char *key;
    json_t *val;
    size_t i;
    int first = 1;

    switch (json_typeof(v)) {
    case JSON_OBJECT:
        fk_buf_add(b, "{", 1);
        json_object_foreach(v, key, val)
        {
            if (!first)
                fk_buf_add(b, ",", 1);
            first = 0;
            write_string(b, key, strlen(key));
            fk_buf_add(b, ":", 1);
            fk_json_write(b, val);
        }
        fk_buf_add(b, "}", 1);
        break;
    case JSON_ARRAY:
        fk_buf_add(b, "[", 1);
        json_array_foreach(v, i, val)
        {
            if (i)
                fk_buf_add(b, ",", 1);
            fk_json_write(b, val);
        }
        fk_buf_add(b, "]", 1);
        break;
    case JSON_STRING:
        write_string(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        fk_buf_add(b, num, strlen(num));
        break;
    case JSON_REAL: {
        char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        if (!s) {
            b->err = 1;
            return;
        }
        fk_buf_add(b, s, strlen(s));
        free(s);
        break;
    }
    case JSON_TRUE:
        fk_buf_add(b, "true", 4);
        break;
    case JSON_FALSE:
        fk_buf_add(b, "false", 5);
        break;
    default:
        fk_buf_add(b, "null", 4);
        break;
    }
}
