/* Replies, errors, time, IP helpers, pagination and JSON field access. */
#include "fake.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
hz_reply(struct hz_req *r, int status, json_t *resp)
{
    json_decref(r->resp);
    free(r->resp_raw);
    r->resp_raw = NULL;
    r->status = status;
    r->resp = resp;
}

void
hz_reply_raw(struct hz_req *r, int status, char *text)
{
    json_decref(r->resp);
    r->resp = NULL;
    free(r->resp_raw);
    r->resp_raw = text;
    r->status = status;
}

void
hz_reply_error(struct hz_req *r, int status, const char *code, const char *message, json_t *details)
{
    json_t *err = json_pack("{s:{s:s, s:s, s:o}}", "error", "code", code, "message", message,
                            "details", details ? details : json_object());
    /* On ENOMEM err is NULL: the status alone still reaches the client. */
    hz_reply(r, status, err);
}

void
hz_reply_invalid(struct hz_req *r, const char *field, const char *message)
{
    json_t *details = json_pack("{s:[{s:s, s:[s]}]}", "fields", "name", field, "messages", message);
    char msg[256];
    snprintf(msg, sizeof(msg), "invalid input in field '%s'", field);
    hz_reply_error(r, 400, "invalid_input", msg, details);
}

long long
hz_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *
hz_time_str(time_t t, char *buf, size_t len)
{
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%S+00:00", &tm) == 0)
        snprintf(buf, len, "1970-01-01T00:00:00+00:00");
    return buf;
}

json_t *
hz_time_json(time_t t)
{
    char buf[40];
    if (t == 0)
        return json_null();
    return json_string(hz_time_str(t, buf, sizeof(buf)));
}

int
hz_ip4_parse(const char *s, uint32_t *out)
{
    struct in_addr a;
    if (!s || inet_pton(AF_INET, s, &a) != 1)
        return -1;
    *out = ntohl(a.s_addr);
    return 0;
}

int
hz_cidr4_parse(const char *s, uint32_t *net, int *prefix)
{
    char buf[32];
    const char *slash = s ? strchr(s, '/') : NULL;
    if (!slash || (size_t)(slash - s) >= sizeof(buf))
        return -1;
    memcpy(buf, s, (size_t)(slash - s));
    buf[slash - s] = '\0';
    char *end;
    errno = 0;
    long p = strtol(slash + 1, &end, 10);
    if (errno || *end || end == slash + 1 || p < 0 || p > 32)
        return -1;
    if (hz_ip4_parse(buf, net) < 0)
        return -1;
    *prefix = (int)p;
    return 0;
}

int
hz_cidr4_contains(const char *cidr, uint32_t ip)
{
    uint32_t net;
    int prefix;
    if (hz_cidr4_parse(cidr, &net, &prefix) < 0)
        return 0;
    uint32_t mask = prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
    return (ip & mask) == (net & mask);
}

void
hz_ip4_format(uint32_t ip, char *buf, size_t len)
{
    snprintf(buf, len, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff, ip & 0xff);
}

int
hz_ip_valid(const char *s)
{
    unsigned char b[16];
    return s && (inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1);
}

const char *
hz_query(struct hz_req *r, const char *key)
{
    if (!r->query_ok)
        return NULL;
    return evhttp_find_header(&r->query, key);
}

long
hz_parse_id(const char *s)
{
    if (!s || !*s || s[0] < '0' || s[0] > '9')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v <= 0 || v > 0x7fffffffL)
        return -1;
    return v;
}

/* Parse a page parameter: absent -> dflt; else positive integer or -1. */
static long
page_param(struct hz_req *r, const char *key, long dflt)
{
    const char *s = hz_query(r, key);
    if (!s)
        return dflt;
    return hz_parse_id(s);
}

int
hz_page(struct hz_req *r, size_t total, size_t *from, size_t *to, json_t **meta)
{
    long page = page_param(r, "page", 1);
    long per_page = page_param(r, "per_page", 25);
    *meta = NULL;
    if (page < 1) {
        hz_reply_invalid(r, "page", "must be a positive integer");
        return -1;
    }
    if (per_page < 1) {
        hz_reply_invalid(r, "per_page", "must be a positive integer");
        return -1;
    }
    if (per_page > 50)
        per_page = 50;
    long last = total == 0 ? 1 : (long)((total + (size_t)per_page - 1) / (size_t)per_page);
    *from = (size_t)(page - 1) * (size_t)per_page;
    if (page > last || *from > total)
        *from = total;
    *to = *from + (size_t)per_page;
    if (*to > total)
        *to = total;
    json_t *prev = page > 1 ? json_integer(page - 1 < last ? page - 1 : last) : json_null();
    json_t *next = page < last ? json_integer(page + 1) : json_null();
    *meta = json_pack("{s:{s:I, s:I, s:o, s:o, s:I, s:I}}", "pagination", "page", (json_int_t)page,
                      "per_page", (json_int_t)per_page, "previous_page", prev, "next_page", next,
                      "last_page", (json_int_t)last, "total_entries", (json_int_t)total);
    if (!*meta) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return -1;
    }
    return 0;
}

void
hz_reply_page(struct hz_req *r, const char *key, json_t *items)
{
    size_t from, to;
    json_t *meta = NULL, *slice = NULL, *resp;
    if (!items) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return;
    }
    if (hz_page(r, json_array_size(items), &from, &to, &meta) < 0)
        goto out;
    if (!(slice = json_array()))
        goto oom;
    for (size_t i = from; i < to; i++)
        if (json_array_append(slice, json_array_get(items, i)) < 0)
            goto oom;
    resp = json_pack("{s:o, s:o}", key, slice, "meta", meta);
    slice = meta = NULL; /* "o" steals, even on failure */
    if (!resp)
        goto oom;
    hz_reply(r, 200, resp);
    goto out;
oom:
    hz_reply_error(r, 500, "server_error", "out of memory", NULL);
out:
    json_decref(slice);
    json_decref(meta);
    json_decref(items);
}

int
hz_json_int(struct hz_req *r, json_t *obj, const char *key, const char *field, long long *out,
            int *present)
{
    json_t *v = json_object_get(obj, key);
    *present = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v)) {
        hz_reply_invalid(r, field, "must be an integer");
        return -1;
    }
    *out = json_integer_value(v);
    *present = 1;
    return 0;
}

int
hz_json_bool(struct hz_req *r, json_t *obj, const char *key, const char *field, int *out,
             int *present)
{
    json_t *v = json_object_get(obj, key);
    *present = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v)) {
        hz_reply_invalid(r, field, "must be a boolean");
        return -1;
    }
    *out = json_is_true(v);
    *present = 1;
    return 0;
}

int
hz_json_str(struct hz_req *r, json_t *obj, const char *key, const char *field, const char **out,
            int *present)
{
    json_t *v = json_object_get(obj, key);
    *present = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        hz_reply_invalid(r, field, "must be a string");
        return -1;
    }
    *out = json_string_value(v);
    *present = 1;
    return 0;
}

int
hz_sort_cmp(const struct hz_sort *s, int id_a, const char *name_a, time_t created_a, int id_b,
            const char *name_b, time_t created_b)
{
    for (int i = 0; i < s->n; i++) {
        int c;
        if (s->keys[i].field == 1)
            c = strcmp(name_a, name_b);
        else if (s->keys[i].field == 2)
            c = (created_a > created_b) - (created_a < created_b);
        else
            c = (id_a > id_b) - (id_a < id_b);
        if (c)
            return s->keys[i].desc ? -c : c;
    }
    return (id_a > id_b) - (id_a < id_b);
}

int
hz_parse_sort(struct hz_req *r, struct hz_sort *spec)
{
    struct evkeyval *kv;
    spec->n = 0;
    if (!r->query_ok)
        return 0;
    TAILQ_FOREACH(kv, &r->query, next)
    {
        if (strcmp(kv->key, "sort") != 0)
            continue;
        char field[16] = "";
        const char *colon = strchr(kv->value, ':');
        size_t fl = colon ? (size_t)(colon - kv->value) : strlen(kv->value);
        int desc = 0;
        if (fl < sizeof(field))
            memcpy(field, kv->value, fl), field[fl] = '\0';
        if (colon && strcmp(colon + 1, "asc") != 0) {
            if (strcmp(colon + 1, "desc") != 0)
                goto bad;
            desc = 1;
        }
        int fid = !strcmp(field, "id")        ? 0
                  : !strcmp(field, "name")    ? 1
                  : !strcmp(field, "created") ? 2
                                              : -1;
        if (fid < 0 || spec->n == 4)
            goto bad;
        spec->keys[spec->n].field = fid;
        spec->keys[spec->n].desc = desc;
        spec->n++;
    }
    return 0;
bad:
    hz_reply_invalid(r, "sort", "must be id, name or created, optionally with :asc or :desc");
    return -1;
}
