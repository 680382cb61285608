/*
 * errors: the sink every config check reports into, and the FILE:LINE of a
 * libconfig setting that its lines begin with.
 */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

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
