/* hz_log.c: the module's logging, under its own ROBOTLB_LOG_LEVEL threshold
 * as well as the daemon's. */
#include <stdarg.h>

#include "hz_api.h"

void
hz_log(const struct hz_logger *lg, enum plb_log_level lvl, const char *fmt, ...)
{
    va_list ap;
    if (!lg || !lg->host || (int)lvl > lg->max || !lg->host->log_enabled(lg->ctx, lvl))
        return;
    va_start(ap, fmt);
    lg->host->logv(lg->ctx, lvl, fmt, ap);
    va_end(ap);
}
