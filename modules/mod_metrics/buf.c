/*
 * buf: a growable text buffer on the host allocator, for response bodies.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mm.h"

/* Make room for `more` bytes plus the NUL. 0, or -1 (oom set). */
static int
reserve(struct mm_buf *b, size_t more)
{
    if (b->oom)
        return -1;
    if (b->n + more + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more + 1)
        cap *= 2;
    char *np = b->host->mem->realloc(b->p, cap);
    if (!np) {
        b->oom = 1;
        return -1;
    }
    b->p = np;
    b->cap = cap;
    return 0;
}

void
mm_buf_printf(struct mm_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) {
        b->oom = 1; /* an encoding error: treat as a failed append */
        return;
    }
    if (reserve(b, (size_t)need) < 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

void
mm_buf_put_line_safe(struct mm_buf *b, const char *s)
{
    size_t len = strlen(s);
    if (reserve(b, len) < 0)
        return;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        b->p[b->n++] = (ch < 0x20 || ch == 0x7f) ? ' ' : (char)ch;
    }
    b->p[b->n] = '\0';
}

void
mm_buf_free(struct mm_buf *b)
{
    b->host->mem->free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
