#include "settings.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "num.h"

/* ------------------------------------------------------------------ */
/* Error sink                                                           */

void
core_errors_add(struct core_errors *e, const char *where, const char *path, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    e->n++; /* counted even when it cannot be recorded */
    if (e->nlines == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 8;
        char **nl = core_realloc(e->lines, cap * sizeof(*nl));
        if (!nl) {
            e->oom = 1;
            return;
        }
        e->lines = nl;
        e->cap = cap;
    }
    char *line = (path && *path) ? core_asprintf("%s: %s: %s", where, path, msg)
                                 : core_asprintf("%s: %s", where, msg);
    if (!line) {
        e->oom = 1;
        return;
    }
    e->lines[e->nlines++] = line;
}

void
core_errors_print(const struct core_errors *e, FILE *out)
{
    for (size_t i = 0; i < e->nlines; i++)
        fprintf(out, "%s\n", e->lines[i]);
    if (e->oom)
        fprintf(out, "(some errors could not be recorded: out of memory)\n");
}

void
core_errors_clear(struct core_errors *e)
{
    for (size_t i = 0; i < e->nlines; i++)
        core_free(e->lines[i]);
    core_free(e->lines);
    memset(e, 0, sizeof(*e));
}

void
core_setting_where(const config_setting_t *s, const char *fallback_file, char *buf, size_t len)
{
    const char *file = s ? config_setting_source_file(s) : NULL;
    unsigned line = s ? config_setting_source_line(s) : 0;
    if (!file)
        file = fallback_file ? fallback_file : "(config)";
    /* libconfig names an @include'd file as written; show it relative to
     * the main file's directory, where it was found. */
    const char *slash = fallback_file ? strrchr(fallback_file, '/') : NULL;
    if (file[0] != '/' && slash && strcmp(file, fallback_file) != 0)
        snprintf(buf, len, "%.*s/%s:%u", (int)(slash - fallback_file), fallback_file, file, line);
    else
        snprintf(buf, len, "%s:%u", file, line);
}

/* ------------------------------------------------------------------ */
/* Durations                                                            */

int
core_duration_parse(const char *s, int64_t *ms)
{
    static const struct {
        const char *unit;
        double ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    const char *p = s;
    int neg = 0;
    double total = 0;

    while (isspace((unsigned char)*p))
        p++;
    if (*p == '-' || *p == '+') {
        neg = *p == '-';
        p++;
    }
    if (!*p)
        return -EINVAL;
    /* A bare number is seconds. */
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (end != p && *end == '\0') {
        if (errno || !isfinite(v))
            return -EINVAL;
        total = v * 1000;
        goto done;
    }
    if (strcmp(p, "0") == 0)
        goto done;
    while (*p) {
        if (!isdigit((unsigned char)*p) && *p != '.')
            return -EINVAL;
        errno = 0;
        v = strtod(p, &end);
        if (end == p || errno || !isfinite(v))
            return -EINVAL;
        p = end;
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            size_t ul = strlen(units[i].unit);
            if (strncmp(p, units[i].unit, ul) == 0 && ul > best_len) {
                best = i;
                best_len = ul;
            }
        }
        if (!best_len)
            return -EINVAL;
        /* "m" must not swallow the "m" of "ms": longest match handles it. */
        total += v * units[best].ms;
        p += best_len;
    }
done:
    if (total > 9.0e15)
        return -EINVAL;
    *ms = (int64_t)core_llround(neg ? -total : total);
    return 0;
}

void
core_duration_format(int64_t ms, char *buf, size_t len)
{
    if (ms == 0) {
        snprintf(buf, len, "0s");
        return;
    }
    const char *sign = ms < 0 ? "-" : "";
    int64_t a = ms < 0 ? -ms : ms;
    if (a % 1000) {
        if (a < 1000)
            snprintf(buf, len, "%s%lldms", sign, (long long)a);
        else
            snprintf(buf, len, "%s%.3gs", sign, (double)a / 1000.0);
        return;
    }
    int64_t s = a / 1000;
    int64_t h = s / 3600, m = (s / 60) % 60, sec = s % 60;
    size_t n = (size_t)snprintf(buf, len, "%s", sign);
    if (h && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%lldh", (long long)h);
    if (m && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%lldm", (long long)m);
    if (sec && n < len)
        snprintf(buf + n, len - n, "%llds", (long long)sec);
}

/* ------------------------------------------------------------------ */
/* Formats                                                              */

static int
ip_literal(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* RFC 1123 hostname: dot-separated labels of letters, digits and hyphens,
 * 1 to 63 characters, not starting or ending with a hyphen; 253 in all. */
static int
rfc1123_hostname(const char *s)
{
    size_t n = strlen(s), label = 0;
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i <= n; i++) {
        char ch = s[i];
        if (ch == '.' || ch == '\0') {
            if (label == 0 || s[i - 1] == '-')
                return 0;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)ch) && ch != '-')
            return 0;
        if (label == 0 && ch == '-')
            return 0;
        if (++label > 63)
            return 0;
    }
    return 1;
}

static const char *
host_port_problem(const char *s)
{
    char host[256];
    const char *port;
    size_t hl;

    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return "must be [IPv6]:port";
        hl = (size_t)(close - s - 1);
        if (hl == 0 || hl >= sizeof(host))
            return "has no valid IPv6 address in brackets";
        memcpy(host, s + 1, hl);
        host[hl] = '\0';
        unsigned char buf[sizeof(struct in6_addr)];
        if (inet_pton(AF_INET6, host, buf) != 1)
            return "has no valid IPv6 address in brackets";
        port = close + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon)
            return "must be host:port (the port is missing)";
        if (memchr(s, ':', (size_t)(colon - s)))
            return "must be host:port; write an IPv6 address in brackets: [addr]:port";
        hl = (size_t)(colon - s);
        if (hl == 0)
            return "must be host:port (the host is missing)";
        if (hl >= sizeof(host))
            return "has a host longer than 253 characters";
        memcpy(host, s, hl);
        host[hl] = '\0';
        if (!ip_literal(host) && !rfc1123_hostname(host))
            return "has a host that is neither an IP address nor an RFC 1123 hostname";
        port = colon + 1;
    }
    if (!*port)
        return "must be host:port (the port is missing)";
    long v = 0;
    for (const char *p = port; *p; p++) {
        if (!isdigit((unsigned char)*p) || v > 65535)
            return "has a port that is not a number in the range 1-65535";
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535)
        return "has a port that is not a number in the range 1-65535";
    return NULL;
}

static const char *
dns_label_problem(const char *p)
{
    size_t n = strlen(p);
    if (n > 63)
        return "must be at most 63 characters (an RFC 1123 label)";
    for (size_t i = 0; i < n; i++) {
        if (!(islower((unsigned char)p[i]) || isdigit((unsigned char)p[i]) || p[i] == '-'))
            return "must consist of lower case letters, digits and '-' (an RFC 1123 label)";
    }
    if (p[0] == '-' || p[n - 1] == '-')
        return "must start and end with a letter or digit (an RFC 1123 label)";
    return NULL;
}

const char *
core_format_check(enum plb_setting_format format, const char *value, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    if (!value || !*value)
        return NULL;
    switch (format) {
    case PLB_FMT_NONE:
        return NULL;
    case PLB_FMT_HOST:
        return (ip_literal(value) || rfc1123_hostname(value))
                   ? NULL
                   : "must be a valid IP address or RFC 1123 hostname";
    case PLB_FMT_HOST_PORT:
        return host_port_problem(value);
    case PLB_FMT_TLS_NAME:
        return (ip_literal(value) || rfc1123_hostname(value))
                   ? NULL
                   : "must be a host name (no port, scheme, path or brackets)";
    case PLB_FMT_HTTP_URL: {
        const char *host = NULL;
        if (strncmp(value, "https://", 8) == 0)
            host = value + 8;
        else if (strncmp(value, "http://", 7) == 0)
            host = value + 7;
        if (!host)
            return "must be an http:// or https:// URL (\"https://127.0.0.1:6443\")";
        if (!*host || *host == '/' || *host == ':')
            return "must name a host (\"https://127.0.0.1:6443\")";
        return NULL;
    }
    case PLB_FMT_DNS_LABEL:
        return dns_label_problem(value);
    }
    return "has an unknown format";
}

const char *
core_format_check_tls(enum plb_setting_format format, const char *value)
{
    static _Thread_local char buf[256];
    return core_format_check(format, value, buf, sizeof(buf));
}

/* ------------------------------------------------------------------ */
/* Values                                                               */

size_t
core_settings_count(const struct plb_setting *table)
{
    size_t n = 0;
    while (table && table[n].name)
        n++;
    return n;
}

size_t
core_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 64;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j];
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = prev + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb];
}

static void
strv_free(struct plb_strv *v)
{
    for (size_t i = 0; i < v->n; i++)
        core_free(v->v[i]);
    core_free(v->v);
    v->v = NULL;
    v->n = 0;
}

static int
strv_push(struct plb_strv *v, const char *s, size_t len)
{
    char **nv = core_realloc(v->v, (v->n + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    v->v = nv;
    char *d = core_strndup(s, len);
    if (!d)
        return -ENOMEM;
    v->v[v->n++] = d;
    return 0;
}

/* Split "a, b,c" into items, dropping empty ones. */
static int
strv_split(struct plb_strv *v, const char *text)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *start = p;
        while (*p && *p != ',')
            p++;
        const char *end = p;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if (end > start && strv_push(v, start, (size_t)(end - start)) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* A parsed value before it is stored. */
union value {
    int b;
    int64_t i;
    double d;
    char *s;
    int e;
    struct plb_strv l;
};

static const char *
type_name(enum plb_setting_type t)
{
    switch (t) {
    case PLB_SET_BOOL:
        return "a boolean (true or false)";
    case PLB_SET_INT:
        return "an integer";
    case PLB_SET_DOUBLE:
        return "a number";
    case PLB_SET_STRING:
        return "a string";
    case PLB_SET_DURATION:
        return "a duration (\"150ms\", \"20s\", \"1m30s\") or a number of seconds";
    case PLB_SET_ENUM:
        return "one of its listed values";
    case PLB_SET_STRING_LIST:
        return "a list of strings";
    case PLB_SET_PATH:
        return "a file path string";
    case PLB_SET_INSTANCES:
        return "a list of instance names";
    }
    return "?";
}

static const char *
libconfig_type_name(int t)
{
    switch (t) {
    case CONFIG_TYPE_GROUP:
        return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        return "an integer";
    case CONFIG_TYPE_FLOAT:
        return "a float";
    case CONFIG_TYPE_STRING:
        return "a string";
    case CONFIG_TYPE_BOOL:
        return "a boolean";
    case CONFIG_TYPE_ARRAY:
        return "an array";
    case CONFIG_TYPE_LIST:
        return "a list";
    }
    return "nothing";
}

static void
enum_list(const struct plb_setting *s, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; s->enum_values && s->enum_values[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", s->enum_values[i]);
}

/* Parse text (a default or an environment value). 0, or -EINVAL with msg
 * filled, or -ENOMEM. */
static int
parse_text(const struct plb_setting *s, const char *text, union value *v, char *msg, size_t mlen)
{
    char *end;
    switch (s->type) {
    case PLB_SET_BOOL:
        if (!strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcasecmp(text, "on") ||
            !strcmp(text, "1"))
            v->b = 1;
        else if (!strcasecmp(text, "false") || !strcasecmp(text, "no") ||
                 !strcasecmp(text, "off") || !strcmp(text, "0"))
            v->b = 0;
        else
            goto bad;
        return 0;
    case PLB_SET_INT:
        errno = 0;
        v->i = strtoll(text, &end, 10);
        if (end == text || *end || errno)
            goto bad;
        return 0;
    case PLB_SET_DOUBLE:
        errno = 0;
        v->d = strtod(text, &end);
        if (end == text || *end || errno || !isfinite(v->d))
            goto bad;
        return 0;
    case PLB_SET_DURATION:
        if (core_duration_parse(text, &v->i) < 0)
            goto bad;
        return 0;
    case PLB_SET_ENUM:
        for (int i = 0; s->enum_values && s->enum_values[i]; i++) {
            if (strcmp(text, s->enum_values[i]) == 0) {
                v->e = i;
                return 0;
            }
        }
        {
            char list[256];
            enum_list(s, list, sizeof(list));
            snprintf(msg, mlen, "must be one of %s, not \"%s\"", list, text);
        }
        return -EINVAL;
    case PLB_SET_STRING:
    case PLB_SET_PATH:
        v->s = core_strdup(text);
        return v->s ? 0 : -ENOMEM;
    case PLB_SET_STRING_LIST:
    case PLB_SET_INSTANCES:
        memset(&v->l, 0, sizeof(v->l));
        if (strv_split(&v->l, text) < 0) {
            strv_free(&v->l);
            return -ENOMEM;
        }
        return 0;
    }
bad:
    if (s->flags & PLB_SET_SECRET)
        snprintf(msg, mlen, "expected %s", type_name(s->type));
    else
        snprintf(msg, mlen, "expected %s, not \"%s\"", type_name(s->type), text);
    return -EINVAL;
}

/* Parse a config-file value. */
static int
parse_member(const struct plb_setting *s, const config_setting_t *m, union value *v, char *msg,
             size_t mlen)
{
    int t = config_setting_type(m);
    switch (s->type) {
    case PLB_SET_BOOL:
        if (t != CONFIG_TYPE_BOOL)
            goto wrong;
        v->b = config_setting_get_bool(m);
        return 0;
    case PLB_SET_INT:
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
            goto wrong;
        v->i = config_setting_get_int64(m);
        return 0;
    case PLB_SET_DOUBLE:
        if (t == CONFIG_TYPE_FLOAT)
            v->d = config_setting_get_float(m);
        else if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
            v->d = (double)config_setting_get_int64(m);
        else
            goto wrong;
        return 0;
    case PLB_SET_DURATION:
        if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
            long long sec = config_setting_get_int64(m);
            if (sec > 9000000000000LL || sec < -9000000000000LL)
                goto wrong;
            v->i = (int64_t)sec * 1000;
            return 0;
        }
        if (t == CONFIG_TYPE_FLOAT) {
            v->i = (int64_t)core_llround(config_setting_get_float(m) * 1000.0);
            return 0;
        }
        if (t != CONFIG_TYPE_STRING)
            goto wrong;
        return parse_text(s, config_setting_get_string(m), v, msg, mlen);
    case PLB_SET_ENUM:
    case PLB_SET_STRING:
    case PLB_SET_PATH:
        if (t != CONFIG_TYPE_STRING)
            goto wrong;
        return parse_text(s, config_setting_get_string(m), v, msg, mlen);
    case PLB_SET_STRING_LIST:
    case PLB_SET_INSTANCES:
        if (t == CONFIG_TYPE_STRING)
            return parse_text(s, config_setting_get_string(m), v, msg, mlen);
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
            goto wrong;
        memset(&v->l, 0, sizeof(v->l));
        for (int i = 0; i < config_setting_length(m); i++) {
            const config_setting_t *el = config_setting_get_elem(m, (unsigned)i);
            if (config_setting_type(el) != CONFIG_TYPE_STRING) {
                strv_free(&v->l);
                snprintf(msg, mlen, "item %d: expected a string, got %s", i,
                         libconfig_type_name(config_setting_type(el)));
                return -EINVAL;
            }
            const char *str = config_setting_get_string(el);
            if (strv_push(&v->l, str, strlen(str)) < 0) {
                strv_free(&v->l);
                return -ENOMEM;
            }
        }
        return 0;
    }
wrong:
    snprintf(msg, mlen, "expected %s, got %s", type_name(s->type), libconfig_type_name(t));
    return -EINVAL;
}

static void
value_free(const struct plb_setting *s, union value *v)
{
    switch (s->type) {
    case PLB_SET_STRING:
    case PLB_SET_PATH:
        core_free(v->s);
        v->s = NULL;
        break;
    case PLB_SET_STRING_LIST:
    case PLB_SET_INSTANCES:
        strv_free(&v->l);
        break;
    default:
        break;
    }
}

/* Bounds and emptiness; 0 or -EINVAL with msg. */
static int
check_value(const struct plb_setting *s, const union value *v, char *msg, size_t mlen)
{
    if (s->min != 0 || s->max != 0) {
        double x;
        char lo[64], hi[64];
        if (s->type == PLB_SET_INT || s->type == PLB_SET_DURATION)
            x = (double)v->i;
        else if (s->type == PLB_SET_DOUBLE)
            x = v->d;
        else
            goto rest;
        if (s->type == PLB_SET_DURATION) {
            core_duration_format((int64_t)s->min, lo, sizeof(lo));
            core_duration_format((int64_t)s->max, hi, sizeof(hi));
        } else {
            snprintf(lo, sizeof(lo), "%.15g", s->min);
            snprintf(hi, sizeof(hi), "%.15g", s->max);
        }
        int has_max = s->max > s->min;
        if (x < s->min || (has_max && x > s->max)) {
            char got[64];
            if (s->type == PLB_SET_DURATION)
                core_duration_format(v->i, got, sizeof(got));
            else
                snprintf(got, sizeof(got), "%.15g", x);
            if (has_max)
                snprintf(msg, mlen, "%s is out of range [%s, %s]", got, lo, hi);
            else
                snprintf(msg, mlen, "%s is below the minimum %s", got, lo);
            return -EINVAL;
        }
    }
rest:
    if (s->flags & PLB_SET_NONEMPTY) {
        int empty = 0;
        if (s->type == PLB_SET_STRING || s->type == PLB_SET_PATH)
            empty = !v->s || !*v->s;
        else if (s->type == PLB_SET_STRING_LIST || s->type == PLB_SET_INSTANCES)
            empty = v->l.n == 0;
        if (empty) {
            snprintf(msg, mlen, "must not be empty");
            return -EINVAL;
        }
    }
    return 0;
}

/* The format check of a parsed value: each item of a list, named. */
static const char *
format_problem(const struct plb_setting *s, const union value *v, char *msg, size_t mlen)
{
    char buf[256];
    if (!s->format)
        return NULL;
    if (s->type == PLB_SET_STRING || s->type == PLB_SET_PATH)
        return core_format_check(s->format, v->s, buf, sizeof(buf));
    if (s->type != PLB_SET_STRING_LIST)
        return NULL;
    for (size_t i = 0; i < v->l.n; i++) {
        const char *why = core_format_check(s->format, v->l.v[i], buf, sizeof(buf));
        if (why) {
            snprintf(msg, mlen, "entry %zu \"%.200s\" %s", i + 1, v->l.v[i], why);
            return msg;
        }
    }
    return NULL;
}

static void
store(const struct plb_setting *s, void *config, union value *v)
{
    char *p = (char *)config + s->offset;
    switch (s->type) {
    case PLB_SET_BOOL:
        *(int *)p = v->b;
        break;
    case PLB_SET_INT:
    case PLB_SET_DURATION:
        *(int64_t *)p = v->i;
        break;
    case PLB_SET_DOUBLE:
        *(double *)p = v->d;
        break;
    case PLB_SET_ENUM:
        *(int *)p = v->e;
        break;
    case PLB_SET_STRING:
    case PLB_SET_PATH:
        *(char **)p = v->s;
        v->s = NULL;
        break;
    case PLB_SET_STRING_LIST:
    case PLB_SET_INSTANCES:
        *(struct plb_strv *)p = v->l;
        memset(&v->l, 0, sizeof(v->l));
        break;
    }
}

static int
resolve_path(union value *v, const char *base_dir)
{
    if (!v->s || !*v->s || v->s[0] == '/' || !base_dir || !*base_dir)
        return 0;
    char *abs = core_asprintf("%s/%s", base_dir, v->s);
    if (!abs)
        return -ENOMEM;
    core_free(v->s);
    v->s = abs;
    return 0;
}

static int
in_list(const char *name, const char *const *list)
{
    for (size_t i = 0; list && list[i]; i++) {
        if (strcmp(name, list[i]) == 0)
            return 1;
    }
    return 0;
}

static void
join_path(char *buf, size_t len, const char *path, const char *name)
{
    if (path && *path)
        snprintf(buf, len, "%s.%s", path, name);
    else
        snprintf(buf, len, "%s", name);
}

int
core_settings_parse(const struct plb_setting *table, void *config, const config_setting_t *grp,
                    const char *file, const char *path, const char *base_dir,
                    const char *const *skip, struct core_errors *err)
{
    size_t before = err->n;
    char grp_where[512];
    core_setting_where(grp, file, grp_where, sizeof(grp_where));

    for (const struct plb_setting *s = table; s && s->name; s++) {
        char where[640], spath[512], msg[512];
        union value v;
        const char *env = s->env ? getenv(s->env) : NULL;
        const config_setting_t *m = grp ? config_setting_get_member(grp, s->name) : NULL;
        int rc;

        memset(&v, 0, sizeof(v));
        msg[0] = '\0';
        join_path(spath, sizeof(spath), path, s->name);
        if (env && *env) {
            snprintf(where, sizeof(where), "environment %s", s->env);
            rc = parse_text(s, env, &v, msg, sizeof(msg));
        } else if (m) {
            core_setting_where(m, file, where, sizeof(where));
            rc = parse_member(s, m, &v, msg, sizeof(msg));
        } else if (s->def) {
            snprintf(where, sizeof(where), "%s (default)", grp_where);
            rc = parse_text(s, s->def, &v, msg, sizeof(msg));
        } else if (s->flags & PLB_SET_REQUIRED) {
            core_errors_add(err, grp_where, spath, "required setting is missing");
            continue;
        } else {
            store(s, config, &v); /* zero value */
            continue;
        }
        if (rc == -ENOMEM) {
            core_errors_add(err, where, spath, "out of memory");
            continue;
        }
        if (rc < 0) {
            core_errors_add(err, where, spath, "%s", msg);
            continue;
        }
        if (s->type == PLB_SET_PATH && m && !(env && *env) && resolve_path(&v, base_dir) < 0) {
            core_errors_add(err, where, spath, "out of memory");
            value_free(s, &v);
            continue;
        }
        if (check_value(s, &v, msg, sizeof(msg)) < 0) {
            core_errors_add(err, where, spath, "%s", msg);
            value_free(s, &v);
            continue;
        }
        /* Each union member has the layout of the stored field, so the
         * validator sees the value exactly as it will be stored. */
        const char *why = format_problem(s, &v, msg, sizeof(msg));
        if (!why && s->validate)
            why = s->validate(&v);
        if (why) {
            core_errors_add(err, where, spath, "%s", why);
            value_free(s, &v);
            continue;
        }
        store(s, config, &v);
    }

    /* Unknown members: typos must not pass silently. */
    for (int i = 0; grp && i < config_setting_length(grp); i++) {
        const config_setting_t *m = config_setting_get_elem(grp, (unsigned)i);
        const char *name = config_setting_name(m);
        if (!name || in_list(name, skip))
            continue;
        int known = 0;
        const char *best = NULL;
        size_t best_d = 3;
        for (const struct plb_setting *s = table; s && s->name; s++) {
            if (strcmp(s->name, name) == 0) {
                known = 1;
                break;
            }
            size_t d = core_edit_distance(name, s->name);
            if (d < best_d) {
                best_d = d;
                best = s->name;
            }
        }
        for (size_t k = 0; !known && skip && skip[k]; k++) {
            size_t d = core_edit_distance(name, skip[k]);
            if (d < best_d) {
                best_d = d;
                best = skip[k];
            }
        }
        if (known)
            continue;
        char where[512], spath[512];
        core_setting_where(m, file, where, sizeof(where));
        join_path(spath, sizeof(spath), path, name);
        if (best)
            core_errors_add(err, where, spath, "unknown setting (did you mean \"%s\"?)", best);
        else
            core_errors_add(err, where, spath, "unknown setting");
    }
    return (int)(err->n - before);
}

void
core_settings_free(const struct plb_setting *table, void *config)
{
    if (!config)
        return;
    for (const struct plb_setting *s = table; s && s->name; s++) {
        char *p = (char *)config + s->offset;
        switch (s->type) {
        case PLB_SET_STRING:
        case PLB_SET_PATH:
            core_free(*(char **)p);
            *(char **)p = NULL;
            break;
        case PLB_SET_STRING_LIST:
        case PLB_SET_INSTANCES:
            strv_free((struct plb_strv *)p);
            break;
        default:
            break;
        }
    }
}

static const char *
doc_type(const struct plb_setting *s)
{
    switch (s->type) {
    case PLB_SET_BOOL:
        return "bool";
    case PLB_SET_INT:
        return "integer";
    case PLB_SET_DOUBLE:
        return "number";
    case PLB_SET_STRING:
        return "string";
    case PLB_SET_DURATION:
        return "duration";
    case PLB_SET_ENUM:
        return "enum";
    case PLB_SET_STRING_LIST:
        return "list";
    case PLB_SET_PATH:
        return "path";
    case PLB_SET_INSTANCES:
        return "instances";
    }
    return "?";
}

/* Append text to a growing buffer; 0 or -ENOMEM. */
static int
buf_append(char **out, size_t *n, size_t *cap, const char *text)
{
    size_t l = strlen(text);
    if (*n + l + 1 > *cap) {
        size_t nc = *cap ? *cap : 1024;
        while (*n + l + 1 > nc)
            nc *= 2;
        char *no = core_realloc(*out, nc);
        if (!no)
            return -ENOMEM;
        *out = no;
        *cap = nc;
    }
    memcpy(*out + *n, text, l + 1);
    *n += l;
    return 0;
}

static void
doc_line(const struct plb_setting *s, char *line, size_t len)
{
    char def[256], range[160], values[256];
    snprintf(def, sizeof(def), "%s",
             (s->flags & PLB_SET_REQUIRED) ? "(required)"
             : s->def                      ? s->def
                                           : "");
    range[0] = values[0] = '\0';
    if ((s->min != 0 || s->max != 0) && s->type != PLB_SET_ENUM) {
        char lo[64], hi[64];
        if (s->type == PLB_SET_DURATION) {
            core_duration_format((int64_t)s->min, lo, sizeof(lo));
            core_duration_format((int64_t)s->max, hi, sizeof(hi));
        } else {
            snprintf(lo, sizeof(lo), "%.15g", s->min);
            snprintf(hi, sizeof(hi), "%.15g", s->max);
        }
        if (s->max > s->min)
            snprintf(range, sizeof(range), " Range %s to %s.", lo, hi);
        else
            snprintf(range, sizeof(range), " At least %s.", lo);
    }
    if (s->type == PLB_SET_ENUM) {
        char list[200];
        enum_list(s, list, sizeof(list));
        snprintf(values, sizeof(values), " One of: %s.", list);
    }
    const char *doc = s->doc ? s->doc : "";
    size_t dl = strlen(doc);
    const char *stop = (dl && doc[dl - 1] != '.') ? "." : "";
    snprintf(line, len, "| `%s` | %s | %s%s%s | %s%s%s | %s%s%s%s%s |\n", s->name, doc_type(s),
             *def ? "`" : "", def, *def ? "`" : "", s->env ? "`" : "", s->env ? s->env : "",
             s->env ? "`" : "", doc, stop, values, range,
             (s->flags & PLB_SET_SECRET) ? " Secret: never printed." : "");
}

char *
core_settings_doc(const struct plb_setting *table)
{
    char *out = NULL;
    size_t n = 0, cap = 0;
    char line[2048];

    if (buf_append(&out, &n, &cap,
                   "| setting | type | default | environment | description |\n"
                   "|---|---|---|---|---|\n") < 0)
        goto fail;
    for (const struct plb_setting *s = table; s && s->name; s++) {
        doc_line(s, line, sizeof(line));
        if (buf_append(&out, &n, &cap, line) < 0)
            goto fail;
    }
    return out;
fail:
    core_free(out);
    return NULL;
}
