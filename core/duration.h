/*
 * duration: the text of a duration setting to milliseconds and back.
 */
#ifndef PRISMLB_DURATION_H
#define PRISMLB_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Parse a duration: "150ms", "20s", "1m30s", "1h", "0", or a bare number
 * of seconds ("1.5"), with an optional sign. *ms is set on success only. 0, or
 * -EINVAL for anything else (an unknown unit, no number, beyond ~285,000
 * years). */
int core_duration_parse(const char *s, int64_t *ms);
/* Format ms as the shortest duration text ("20s", "1m30s", "150ms") into
 * buf (len bytes, truncated if short). core_duration_parse reads it back. */
void core_duration_format(int64_t ms, char *buf, size_t len);

#endif
