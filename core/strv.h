/*
 * strv: the string list (struct plb_strv) a STRING_LIST or INSTANCES
 * setting stores in a module's config. The list owns its strings and its
 * array, all from core_malloc.
 */
#ifndef PRISMLB_STRV_H
#define PRISMLB_STRV_H

#include <stddef.h>

#include "prismlb/module.h"

/* Free every string and the array; v is an empty list again. */
void core_strv_free(struct plb_strv *v);
/* Append a new copy of the len bytes at s. 0 or -ENOMEM (v unchanged but
 * perhaps reallocated: still valid, still freed by core_strv_free). */
int core_strv_push(struct plb_strv *v, const char *s, size_t len);
/* Append the items of "a, b,c": split at commas, blanks around each item
 * trimmed, empty items dropped. 0 or -ENOMEM (items so far stay in v). */
int core_strv_split(struct plb_strv *v, const char *text);

#endif
