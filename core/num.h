/*
 * num: llround without libm. The daemon's only use of libm was llround,
 * and libm is 0.9 MiB of each container image; rounding half away from
 * zero is a few lines.
 */
#ifndef PRISMLB_NUM_H
#define PRISMLB_NUM_H

/* x rounded to the nearest integer, halves away from zero, as llround(3).
 * x must lie within the range of long long (as for llround). Exact: the
 * fraction x - trunc(x) is computed without rounding error. */
static inline long long
core_llround(double x)
{
    long long i = (long long)x; /* truncates toward zero */
    double f = x - (double)i;
    if (f >= 0.5)
        i++;
    else if (f <= -0.5)
        i--;
    return i;
}

#endif
