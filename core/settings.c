/*
 * settings: the parser of a settings table. Each setting's value is read
 * from the environment, the config group or the default text, parsed by
 * type, checked (bounds, emptiness, format, the module's validator) and
 * stored at its offset in the config struct; unknown members are reported
 * with a suggestion. The Markdown reference is settings_doc.c.
 */
#include "settings.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "num.h"
#include "strv.h"

size_t
core_settings_count(const struct plb_setting *table)
{
    size_t n = 0;
    while (table && table[n].name)
        n++;
    return n;
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

void
core_settings_enum_list(const struct plb_setting *s, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; s->enum_values && s->enum_values[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", s->enum_values[i]);
}

void
core_settings_number_text(const struct plb_setting *s, double x, char *buf, size_t len)
{
    if (s->type == PLB_SET_DURATION)
        core_duration_format((int64_t)x, buf, len);
    else
        snprintf(buf, len, "%.15g", x);
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
            core_settings_enum_list(s, list, sizeof(list));
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
        if (core_strv_split(&v->l, text) < 0) {
            core_strv_free(&v->l);
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
                core_strv_free(&v->l);
                snprintf(msg, mlen, "item %d: expected a string, got %s", i,
                         libconfig_type_name(config_setting_type(el)));
                return -EINVAL;
            }
            const char *str = config_setting_get_string(el);
            if (core_strv_push(&v->l, str, strlen(str)) < 0) {
                core_strv_free(&v->l);
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
        core_strv_free(&v->l);
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
        core_settings_number_text(s, s->min, lo, sizeof(lo));
        core_settings_number_text(s, s->max, hi, sizeof(hi));
        int has_max = s->max > s->min;
        if (x < s->min || (has_max && x > s->max)) {
            char got[64];
            core_settings_number_text(s, x, got, sizeof(got));
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
            core_strv_free((struct plb_strv *)p);
            break;
        default:
            break;
        }
    }
}
