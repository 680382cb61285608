/*
 * hz_mem.c: the module's allocator. In the daemon every allocation goes
 * through the host table (so tests can fail the Nth one); the unit tests
 * of the pure files run with libc.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hz.h"

static const struct plb_host *mem_host;

void
hz_mem_use(const struct plb_host *host)
{
    mem_host = host;
}

void *
hz_calloc(size_t n)
{
    if (n == 0)
        n = 1;
    return mem_host ? mem_host->mem->alloc(n) : calloc(1, n);
}

void *
hz_realloc(void *p, size_t n)
{
    if (n == 0)
        n = 1;
    return mem_host ? mem_host->mem->realloc(p, n) : realloc(p, n);
}

void
hz_free(void *p)
{
    if (!p)
        return;
    if (mem_host)
        mem_host->mem->free(p);
    else
        free(p);
}

char *
hz_strndup(const char *s, size_t n)
{
    if (!s)
        return NULL;
    size_t l = strnlen(s, n);
    char *d = hz_calloc(l + 1);
    if (!d)
        return NULL;
    memcpy(d, s, l);
    d[l] = '\0';
    return d;
}

char *
hz_strdup(const char *s)
{
    return s ? hz_strndup(s, strlen(s)) : NULL;
}

char *
hz_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = hz_calloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

void
hz_free_each(char **p, ...)
{
    va_list ap;
    va_start(ap, p);
    for (; p; p = va_arg(ap, char **)) {
        hz_free(*p);
        *p = NULL;
    }
    va_end(ap);
}

void
hz_strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        hz_free(v[i]);
    hz_free(v);
}
