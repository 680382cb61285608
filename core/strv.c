/*
 * strv: the string lists (struct plb_strv) a STRING_LIST or INSTANCES
 * setting stores: grow, split from text, free.
 */
#include "strv.h"

#include <errno.h>
#include <string.h>

#include "alloc.h"

void
core_strv_free(struct plb_strv *v)
{
    for (size_t i = 0; i < v->n; i++)
        core_free(v->v[i]);
    core_free(v->v);
    v->v = NULL;
    v->n = 0;
}

int
core_strv_push(struct plb_strv *v, const char *s, size_t len)
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

int
core_strv_split(struct plb_strv *v, const char *text)
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
        if (end > start && core_strv_push(v, start, (size_t)(end - start)) < 0)
            return -ENOMEM;
    }
    return 0;
}
