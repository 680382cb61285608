#include "log.h"

#include <jansson.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include "alloc.h"

static enum plb_log_level log_level = PLB_LOG_INFO;
static enum core_log_format log_format = CORE_LOG_LOGFMT;
static FILE *log_out;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void
core_log_setup(enum plb_log_level level, enum core_log_format fmt, FILE *out)
{
    log_level = level;
    log_format = fmt;
    log_out = out;
}

enum plb_log_level
core_log_level(void)
{
    return log_level;
}

int
core_log_enabled(enum plb_log_level lvl)
{
    return lvl <= log_level;
}

int
core_log_level_parse(const char *s, enum plb_log_level *out)
{
    static const struct {
        const char *name;
        enum plb_log_level lvl;
    } names[] = {
        {"debug", PLB_LOG_DEBUG}, {"info", PLB_LOG_INFO},    {"warn", PLB_LOG_WARN},
        {"error", PLB_LOG_ERROR}, {"dpanic", PLB_LOG_ERROR}, {"panic", PLB_LOG_ERROR},
        {"fatal", PLB_LOG_ERROR},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].lvl;
            return 0;
        }
    }
    return -1;
}

int
core_log_format_parse(const char *s, enum core_log_format *out)
{
    if (strcmp(s, "logfmt") == 0)
        *out = CORE_LOG_LOGFMT;
    else if (strcmp(s, "json") == 0)
        *out = CORE_LOG_JSON;
    else
        return -1;
    return 0;
}

int
core_log_key_is_secret(const char *key)
{
    static const char *const words[] = {"token",         "password",    "passwd", "secret",
                                        "authorization", "private_key", "key_pem"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strcasestr(key, words[i]))
            return 1;
    }
    return 0;
}

static void
format_time(char *buf, size_t len)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03ldZ", (long)(tv.tv_usec / 1000));
}

/* logfmt value: bare when it needs no quoting, else quoted with escapes. */
static void
logfmt_value(FILE *f, const char *v)
{
    if (!v)
        v = "";
    int plain = *v != '\0';
    for (const char *p = v; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f) {
            plain = 0;
            break;
        }
    }
    if (plain) {
        fputs(v, f);
        return;
    }
    fputc('"', f);
    for (const char *p = v; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c < ' ') {
            fprintf(f, "\\x%02x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

/* The next key, value pair of a record's fields (a NULL-terminated array
 * of key, value pairs, or NULL). 0 at the end. */
struct fields {
    const char *const *arr;
};

static int
next_field(struct fields *fl, const char **k, const char **v)
{
    if (!fl->arr || !fl->arr[0])
        return 0;
    *k = fl->arr[0];
    *v = fl->arr[1];
    fl->arr += 2;
    return 1;
}

static void
emit(enum plb_log_level lvl, const char *instance, const char *module, const char *msg,
     struct fields *kv)
{
    FILE *f = log_out ? log_out : stderr;
    char ts[40];
    format_time(ts, sizeof(ts));
    flockfile(f); /* one line at a time from every thread */

    if (log_format == CORE_LOG_JSON) {
        json_t *o = json_object();
        if (!o) {
            funlockfile(f);
            return;
        }
        json_object_set_new(o, "ts", json_string(ts));
        json_object_set_new(o, "level", json_string(level_names[lvl]));
        if (instance)
            json_object_set_new(o, "instance", json_string(instance));
        if (module)
            json_object_set_new(o, "module", json_string(module));
        json_object_set_new(o, "msg", json_string(msg));
        if (kv) {
            const char *k, *v;
            while (next_field(kv, &k, &v)) {
                if (core_log_key_is_secret(k))
                    v = "[redacted]";
                json_object_set_new(o, k, json_string(v ? v : ""));
            }
        }
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (s) {
            fprintf(f, "%s\n", s);
            core_free(s);
        }
        json_decref(o);
    } else {
        fprintf(f, "ts=%s level=%s", ts, level_names[lvl]);
        if (instance) {
            fputs(" instance=", f);
            logfmt_value(f, instance);
        }
        if (module) {
            fputs(" module=", f);
            logfmt_value(f, module);
        }
        fputs(" msg=", f);
        logfmt_value(f, msg);
        if (kv) {
            const char *k, *v;
            while (next_field(kv, &k, &v)) {
                fputc(' ', f);
                fputs(k, f);
                fputc('=', f);
                logfmt_value(f, core_log_key_is_secret(k) ? "[redacted]" : v);
            }
        }
        fputc('\n', f);
    }
    fflush(f);
    funlockfile(f);
}

void
core_logv(enum plb_log_level lvl, const char *instance, const char *module, const char *fmt,
          va_list ap)
{
    core_log_fieldsv(lvl, instance, module, NULL, fmt, ap); /* no fields */
}

void
core_log(enum plb_log_level lvl, const char *instance, const char *module, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    core_logv(lvl, instance, module, fmt, ap);
    va_end(ap);
}

void
core_log_record(enum plb_log_level lvl, const char *instance, const char *module,
                const char *const *kv, const char *msg)
{
    if (!core_log_enabled(lvl))
        return;
    struct fields fl = {.arr = kv};
    emit(lvl, instance, module, msg, &fl);
}

void
core_log_fieldsv(enum plb_log_level lvl, const char *instance, const char *module,
                 const char *const *kv, const char *fmt, va_list ap)
{
    if (!core_log_enabled(lvl))
        return;
    char buf[2048];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    core_log_record(lvl, instance, module, kv, buf);
}
