/*
 * errors: the sink every config check reports into (struct core_errors),
 * one line "WHERE: PATH: MESSAGE" per problem, and the "FILE:LINE" of a
 * libconfig setting that WHERE usually is.
 */
#ifndef PRISMLB_ERRORS_H
#define PRISMLB_ERRORS_H

#include <libconfig.h>
#include <stdio.h>

#include "prismlb/module.h"

/* An error sink: every problem is recorded as one line
 * "WHERE: PATH: MESSAGE" and the count kept. A zeroed struct is empty. */
struct core_errors {
    char **lines; /* nlines recorded lines */
    size_t nlines, cap;
    size_t n; /* errors counted (>= nlines when memory ran out) */
    int oom;  /* an error could not be recorded for lack of memory */
};
/* Record one error (path NULL or "" leaves it out of the line). The count
 * grows even when memory runs out; the line is then lost and e->oom set. */
void core_errors_add(struct core_errors *e, const char *where, const char *path, const char *fmt,
                     ...) PLB_PRINTF(4, 5);
/* Every recorded line to out, then a note if some were lost. */
void core_errors_print(const struct core_errors *e, FILE *out);
/* Free every line; e is empty again. */
void core_errors_clear(struct core_errors *e);

/* "FILE:LINE" of a libconfig setting into buf (len bytes). s may be NULL
 * (then fallback_file, or "(config)", and line 0); an @include'd file is
 * named relative to fallback_file's directory, where libconfig found it. */
void core_setting_where(const config_setting_t *s, const char *fallback_file, char *buf,
                        size_t len);

#endif
