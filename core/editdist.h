/*
 * editdist: how far apart two names are, for "did you mean" suggestions.
 */
#ifndef PRISMLB_EDITDIST_H
#define PRISMLB_EDITDIST_H

#include <stddef.h>

/* Levenshtein distance between a and b (borrowed, NUL-terminated). Strings
 * over 64 characters are not compared: the answer is then 64. */
size_t core_edit_distance(const char *a, const char *b);

#endif
