/*
 * Label selectors and label validation as the Hetzner Cloud API applies
 * them. Pure functions: no global state, no I/O.
 *
 * Grammar (requirements joined by commas, all must hold):
 *   k=v  k==v  k!=v  k  !k  k in (a,b)  k notin (a,b)
 * Whitespace around tokens is ignored. `k!=v` and `k notin (...)` also
 * match objects without the key.
 */
#ifndef HZ_SELECTOR_H
#define HZ_SELECTOR_H

#include <stddef.h>

#include <jansson.h>

enum hz_sel_op {
    HZ_SEL_EQ,     /* k=v, k==v */
    HZ_SEL_NE,     /* k!=v */
    HZ_SEL_EXISTS, /* k */
    HZ_SEL_ABSENT, /* !k */
    HZ_SEL_IN,     /* k in (a,b) */
    HZ_SEL_NOTIN,  /* k notin (a,b) */
};

struct hz_sel_req {
    enum hz_sel_op op;
    char *key;
    char **values; /* one for EQ/NE, n for IN/NOTIN */
    size_t n_values;
};

struct hz_selector {
    struct hz_sel_req *reqs;
    size_t n_reqs;
};

/* Parse text into *out (new, free with hz_selector_free). An empty or
 * all-blank text gives a selector with no requirements (matches all).
 * Returns 0, -EINVAL with a message in err (errlen bytes) on a syntax or
 * validation error, or -ENOMEM. */
int hz_selector_parse(const char *text, struct hz_selector **out, char *err, size_t errlen);
void hz_selector_free(struct hz_selector *sel);
/* 1 if labels (a JSON object of string values, borrowed; NULL = none)
 * satisfy every requirement of sel, else 0. */
int hz_selector_match(const struct hz_selector *sel, json_t *labels);

/* Label key rule: optional DNS-subdomain prefix (<= 253) and '/', then a
 * name of 1..63 characters [A-Za-z0-9._-] starting and ending
 * alphanumeric. Returns 1 if valid. */
int hz_label_key_valid(const char *key);
/* Label value rule: empty, or 1..63 characters [A-Za-z0-9._-] starting and
 * ending alphanumeric. Returns 1 if valid. */
int hz_label_value_valid(const char *value);
/* Validate a labels object (borrowed). Returns 1 if every key and value is
 * valid and a string; else 0 with a message in err. */
int hz_labels_valid(json_t *labels, char *err, size_t errlen);

#endif
