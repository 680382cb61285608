/*
 * duration: the text of a duration setting ("150ms", "1m30s", a bare number
 * of seconds) to milliseconds and back.
 */
#include "duration.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "num.h"

int
core_duration_parse(const char *s, int64_t *ms)
{
    static const struct {
        const char *unit;
        double ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    const char *p = s;
    int neg = 0;
    double total = 0;

    while (isspace((unsigned char)*p))
        p++;
    if (*p == '-' || *p == '+') {
        neg = *p == '-';
        p++;
    }
    if (!*p)
        return -EINVAL;
    /* A bare number is seconds. */
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (end != p && *end == '\0') {
        if (errno || !isfinite(v))
            return -EINVAL;
        total = v * 1000;
        goto done;
    }
    if (strcmp(p, "0") == 0)
        goto done;
    while (*p) {
        if (!isdigit((unsigned char)*p) && *p != '.')
            return -EINVAL;
        errno = 0;
        v = strtod(p, &end);
        if (end == p || errno || !isfinite(v))
            return -EINVAL;
        p = end;
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            size_t ul = strlen(units[i].unit);
            if (strncmp(p, units[i].unit, ul) == 0 && ul > best_len) {
                best = i;
                best_len = ul;
            }
        }
        if (!best_len)
            return -EINVAL;
        /* "m" must not swallow the "m" of "ms": longest match handles it. */
        total += v * units[best].ms;
        p += best_len;
    }
done:
    if (total > 9.0e15)
        return -EINVAL;
    *ms = (int64_t)core_llround(neg ? -total : total);
    return 0;
}

void
core_duration_format(int64_t ms, char *buf, size_t len)
{
    if (ms == 0) {
        snprintf(buf, len, "0s");
        return;
    }
    const char *sign = ms < 0 ? "-" : "";
    int64_t a = ms < 0 ? -ms : ms;
    if (a % 1000) {
        if (a < 1000)
            snprintf(buf, len, "%s%lldms", sign, (long long)a);
        else
            snprintf(buf, len, "%s%.3gs", sign, (double)a / 1000.0);
        return;
    }
    int64_t s = a / 1000;
    int64_t h = s / 3600, m = (s / 60) % 60, sec = s % 60;
    size_t n = (size_t)snprintf(buf, len, "%s", sign);
    if (h && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%lldh", (long long)h);
    if (m && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%lldm", (long long)m);
    if (sec && n < len)
        snprintf(buf + n, len - n, "%llds", (long long)sec);
}
