/*
 * le_time: Kubernetes MicroTime text, as client-go's metav1.MicroTime
 * marshals it: RFC 3339 with microseconds, always in UTC
 * ("2006-01-02T15:04:05.000000Z07:00" rendered for UTC ends in "Z").
 */
#include <stdio.h>
#include <time.h>

#include "le.h"

int
le_microtime(int64_t wall_ms, char *buf, size_t len)
{
    struct tm tm;
    time_t secs;
    int64_t ms;

    if (!buf || len < LE_TIME_MAX || wall_ms < 0)
        return -1;
    secs = (time_t)(wall_ms / 1000);
    ms = wall_ms % 1000;
    if (!gmtime_r(&secs, &tm) || tm.tm_year + 1900 > 9999)
        return -1;
    int n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms * 1000));
    return n > 0 && (size_t)n < len ? 0 : -1;
}
