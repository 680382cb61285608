/*
 * settings: typed values of a module's (or the core's) settings table.
 *
 * Values come from three places, in rising precedence: the table's default
 * text, the config file, and the setting's environment variable. Text
 * (defaults, environment) and config-file values go through the same checks,
 * so a default that would be rejected in a file is a bug caught by tests.
 */
#ifndef PRISMLB_SETTINGS_H
#define PRISMLB_SETTINGS_H

#include <libconfig.h>
#include <stdint.h>

#include "prismlb/module.h"

/* An error sink: every problem is recorded as one line
 * "WHERE: PATH: MESSAGE" and the count kept. */
struct core_errors {
    char **lines; /* nlines recorded lines */
    size_t nlines, cap;
    size_t n; /* errors counted (>= nlines when memory ran out) */
    int oom;  /* an error could not be recorded for lack of memory */
};
void core_errors_add(struct core_errors *e, const char *where, const char *path, const char *fmt,
                     ...) PLB_PRINTF(4, 5);
void core_errors_print(const struct core_errors *e, FILE *out);
void core_errors_clear(struct core_errors *e);

/* "FILE:LINE" of a libconfig setting into buf. */
void core_setting_where(const config_setting_t *s, const char *fallback_file, char *buf,
                        size_t len);

/* Parse a duration: "150ms", "20s", "1m30s", "1h", "0", or a bare integer
 * of seconds. 0 or -EINVAL. */
int core_duration_parse(const char *s, int64_t *ms);
/* Format ms as the shortest duration text ("20s", "1m30s", "150ms"). */
void core_duration_format(int64_t ms, char *buf, size_t len);

/* Fill config (of the table's struct) from group `grp` (may be NULL: every
 * setting from default/environment). `path` prefixes error paths
 * ("instances.kubeprism"); `base_dir` resolves relative PATH values;
 * `skip` lists member names handled by the caller (NULL-terminated).
 * Unknown members are errors, with a suggestion when one is close. Returns
 * the number of errors added. INSTANCES values are checked later by the
 * caller (core_settings_instances). */
int core_settings_parse(const struct plb_setting *table, void *config, const config_setting_t *grp,
                        const char *file, const char *path, const char *base_dir,
                        const char *const *skip, struct core_errors *err);

/* Free every string and list the parse stored in config (not config). */
void core_settings_free(const struct plb_setting *table, void *config);

/* Render the table as a Markdown reference (new string, core_free). */
char *core_settings_doc(const struct plb_setting *table);

/* Number of entries before PLB_SETTINGS_END. */
size_t core_settings_count(const struct plb_setting *table);

/* NULL if value has the format, else why not: a static message or one
 * written into buf (len bytes). */
const char *core_format_check(enum plb_setting_format format, const char *value, char *buf,
                              size_t len);
/* The same with a thread-local buffer, for the host table. */
const char *core_format_check_tls(enum plb_setting_format format, const char *value);

/* Levenshtein distance, for "did you mean" suggestions. */
size_t core_edit_distance(const char *a, const char *b);

#endif
