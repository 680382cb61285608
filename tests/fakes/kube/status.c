/* Status bodies and small JSON, time, UUID and base64 helpers. */
#include "fk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

/* See fk.h. */
json_t *
fk_status_new(int code, const char *reason, const char *message, const char *name,
              const struct fk_kind *k, json_t *causes)
{
    json_t *st = NULL, *details = NULL;

    st = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion", "v1",
                   "metadata", "status", "Failure", "message", message ? message : "", "reason",
                   reason ? reason : "", "code", code);
    if (!st)
        goto fail;
    if (name || k || causes) {
        details = json_object();
        if (!details)
            goto fail;
        if (name && json_object_set_new(details, "name", json_string(name)) < 0)
            goto fail;
        if (k && k->group[0] && json_object_set_new(details, "group", json_string(k->group)) < 0)
            goto fail;
        if (k && json_object_set_new(details, "kind",
                                     json_string(code == 422 ? k->kind : k->resource)) < 0)
            goto fail;
        if (causes) {
            if (json_object_set_new(details, "causes", causes) < 0) {
                causes = NULL;
                goto fail;
            }
            causes = NULL;
        }
        if (json_object_set_new(st, "details", details) < 0) {
            details = NULL;
            goto fail;
        }
        details = NULL;
    }
    return st;
fail:
    json_decref(causes);
    json_decref(details);
    json_decref(st);
    return NULL;
}

/* See fk.h. */
json_t *
fk_status_invalid(const struct fk_kind *k, const char *name, const char *field, const char *ctype,
                  const char *detail)
{
    char msg[1024];
    json_t *causes =
        json_pack("[{s:s, s:s, s:s}]", "reason", ctype, "message", detail, "field", field);
    if (!causes)
        return NULL;
    snprintf(msg, sizeof(msg), "%s \"%s\" is invalid: %s: %s", k->kind, name ? name : "", field,
             detail);
    return fk_status_new(422, "Invalid", msg, name, k, causes);
}

/* See fk.h. */
const char *
fk_json_path_str(json_t *obj, const char *path)
{
    char buf[256];
    char *save = NULL, *tok;
    json_t *cur = obj;

    snprintf(buf, sizeof(buf), "%s", path);
    for (tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
        if (!json_is_object(cur))
            return NULL;
        cur = json_object_get(cur, tok);
    }
    return json_is_string(cur) ? json_string_value(cur) : NULL;
}

/* See fk.h. */
json_t *
fk_json_path_obj(json_t *obj, const char *path)
{
    char buf[256];
    char *save = NULL, *tok;
    json_t *cur = obj;

    snprintf(buf, sizeof(buf), "%s", path);
    for (tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
        json_t *next;
        if (!json_is_object(cur))
            return NULL;
        next = json_object_get(cur, tok);
        if (!next || json_is_null(next)) {
            next = json_object();
            if (!next || json_object_set_new(cur, tok, next) < 0)
                return NULL;
        }
        cur = next;
    }
    return json_is_object(cur) ? cur : NULL;
}

/* See fk.h. */
const char *
fk_now_rfc3339(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

/* See fk.h. */
const char *
fk_uuid(char *buf, size_t len)
{
    unsigned char b[16];
    if (RAND_bytes(b, sizeof(b)) != 1) {
        /* Fall back to a counter-based value; uniqueness is what matters. */
        static unsigned long long n;
        n++;
        memset(b, 0, sizeof(b));
        memcpy(b, &n, sizeof(n));
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(buf, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return buf;
}

/* See fk.h. */
char *
fk_base64(const void *data, size_t len)
{
    size_t out_len = 4 * ((len + 2) / 3) + 1;
    char *out = malloc(out_len);
    if (!out)
        return NULL;
    EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    return out;
}

/* See fk.h. */
char *
fk_unbase64(const char *s, size_t *out_len)
{
    size_t n = strlen(s);
    size_t pad = 0;
    char *out;
    int r;

    if (n == 0 || n % 4 != 0)
        return NULL;
    out = malloc(n / 4 * 3 + 1);
    if (!out)
        return NULL;
    r = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    if (r < 0) {
        free(out);
        return NULL;
    }
    if (s[n - 1] == '=')
        pad++;
    if (s[n - 2] == '=')
        pad++;
    out[r - pad] = '\0';
    if (out_len)
        *out_len = (size_t)r - pad;
    return out;
}
