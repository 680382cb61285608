/*
 * settings_doc: a settings table rendered as the Markdown reference table
 * the READMEs carry (tests/lint/settings-doc.sh compares the two).
 */
#include "settings.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

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
        core_settings_number_text(s, s->min, lo, sizeof(lo));
        core_settings_number_text(s, s->max, hi, sizeof(hi));
        if (s->max > s->min)
            snprintf(range, sizeof(range), " Range %s to %s.", lo, hi);
        else
            snprintf(range, sizeof(range), " At least %s.", lo);
    }
    if (s->type == PLB_SET_ENUM) {
        char list[200];
        core_settings_enum_list(s, list, sizeof(list));
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
