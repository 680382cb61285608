/*
 * hz_go.c: hcloud-cloud-controller-manager's value syntax, which is Go's:
 * booleans as strconv.ParseBool reads them and durations as
 * time.ParseDuration does (in whole seconds, what Hetzner's health checks
 * take). Read by the annotations and the environment variables alike.
 * Pure.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hz.h"

int
hz_go_bool(const char *v)
{
    static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True", NULL};
    static const char *const f[] = {"0", "f", "F", "FALSE", "false", "False", NULL};
    for (size_t i = 0; t[i]; i++) {
        if (strcmp(v, t[i]) == 0)
            return 1;
        if (strcmp(v, f[i]) == 0)
            return 0;
    }
    return -1;
}

int
hz_go_seconds(const char *v, int64_t *out)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    int64_t total = 0;
    const char *p = v;
    if (!*p)
        return -EINVAL;
    while (*p) {
        char *end;
        size_t k;
        errno = 0;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        long long n = strtoll(p, &end, 10);
        if (errno || end == p || n > 100000000)
            return -EINVAL;
        p = end;
        for (k = 0; k < sizeof(units) / sizeof(units[0]); k++) {
            size_t ul = strlen(units[k].unit);
            /* "m" must not take the "ms" of milliseconds */
            if (strncmp(p, units[k].unit, ul) == 0 && !(ul == 1 && p[0] == 'm' && p[1] == 's'))
                break;
        }
        if (k == sizeof(units) / sizeof(units[0]))
            return -EINVAL; /* no unit: Go refuses it too (but "0") */
        total += (int64_t)n * units[k].ms;
        p += strlen(units[k].unit);
        if (total > INT64_C(100000000000))
            return -EINVAL;
    }
    if (total % 1000)
        return -EINVAL;
    *out = total / 1000;
    return 0;
}
