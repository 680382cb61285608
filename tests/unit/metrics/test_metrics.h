/*
 * Helpers shared by the Check suites of the metrics registry.
 */
#ifndef PRISMLB_TEST_METRICS_H
#define PRISMLB_TEST_METRICS_H

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "metrics.h"
#include "testutil.h"

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})
#define V(...) ((const char *const[]){__VA_ARGS__})

static const char *const code_method[] __attribute__((unused)) = {"code", "method", NULL};

static inline double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Render (text format or OpenMetrics) and check the length matches. */
static inline char *
render(struct core_metrics *r, int om)
{
    size_t len = 0;
    char *s = om ? core_metrics_render_openmetrics(r, &len) : core_metrics_render(r, &len);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(strlen(s), len);
    return s;
}

/* Assert that the rendering contains line (a whole line). */
static inline void
assert_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return;
    ck_abort_msg("line not found: [%s] in:\n%s", line, text);
}

/* Assert that a and b were found and a comes first. */
static inline void
assert_before(const char *a, const char *b)
{
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert(a < b);
}

#endif
