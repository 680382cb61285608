/*
 * log: leveled, structured logging in logfmt or JSON, one line per record.
 *
 * Records carry a timestamp, level, the instance and module they come from
 * (both NULL for the core itself), a message and key/value fields. Values of
 * keys that name secrets are written as "[redacted]" whatever the caller
 * passes.
 */
#ifndef PRISMLB_LOG_H
#define PRISMLB_LOG_H

#include <stdarg.h>
#include <stdio.h>

#include "prismlb/module.h"

enum core_log_format {
    CORE_LOG_LOGFMT = 0,
    CORE_LOG_JSON = 1,
};

/* Set the threshold, format and output stream (borrowed; stderr when NULL). */
void core_log_setup(enum plb_log_level level, enum core_log_format fmt, FILE *out);
enum plb_log_level core_log_level(void);
int core_log_enabled(enum plb_log_level lvl);

/* Parse a level name: debug, info, warn, error (and dpanic, panic, fatal as
 * error, for compatibility with zap level names). 0 or -1. */
int core_log_level_parse(const char *s, enum plb_log_level *out);
/* Parse "logfmt" or "json". 0 or -1. */
int core_log_format_parse(const char *s, enum core_log_format *out);

/* Write a record. instance and module may be NULL. */
void core_logv(enum plb_log_level lvl, const char *instance, const char *module, const char *fmt,
               va_list ap) PLB_PRINTF(4, 0);
void core_log(enum plb_log_level lvl, const char *instance, const char *module, const char *fmt,
              ...) PLB_PRINTF(4, 5);
/* A record with a literal msg (not a format) and fields: kv is a
 * NULL-terminated array of key, value pairs (borrowed), or NULL. */
void core_log_record(enum plb_log_level lvl, const char *instance, const char *module,
                     const char *const *kv, const char *msg);
/* A record with a printf-style message and fields: kv is a NULL-terminated
 * array of key, value pairs (borrowed), or NULL. */
void core_log_fieldsv(enum plb_log_level lvl, const char *instance, const char *module,
                      const char *const *kv, const char *fmt, va_list ap) PLB_PRINTF(5, 0);

/* 1 if a field named key must never be printed. */
int core_log_key_is_secret(const char *key);

#define CORE_ERR(...) core_log(PLB_LOG_ERROR, NULL, NULL, __VA_ARGS__)
#define CORE_WARN(...) core_log(PLB_LOG_WARN, NULL, NULL, __VA_ARGS__)
#define CORE_INFO(...) core_log(PLB_LOG_INFO, NULL, NULL, __VA_ARGS__)
#define CORE_DEBUG(...)                                                                            \
    do {                                                                                           \
        if (core_log_enabled(PLB_LOG_DEBUG))                                                       \
            core_log(PLB_LOG_DEBUG, NULL, NULL, __VA_ARGS__);                                      \
    } while (0)

#endif
