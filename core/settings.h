/*
 * settings: typed values of a module's (or the core's) settings table.
 *
 * Values come from three places, in rising precedence: the table's default
 * text, the config file, and the setting's environment variable. Text
 * (defaults, environment) and config-file values go through the same checks,
 * so a default that would be rejected in a file is a bug caught by tests.
 *
 * The parser is settings.c, the Markdown reference settings_doc.c; the
 * pieces they are built on have a file each and come with this header:
 * errors.h (the error sink, FILE:LINE), duration.h, formats.h (format
 * validators), editdist.h ("did you mean"); strv.h (string lists) is
 * included where lists are built.
 */
#ifndef PRISMLB_SETTINGS_H
#define PRISMLB_SETTINGS_H

#include <libconfig.h>
#include <stdint.h>

#include "duration.h"
#include "editdist.h"
#include "errors.h"
#include "formats.h"
#include "prismlb/module.h"

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

/* Render the table as a Markdown reference (new string, core_free; NULL
 * when out of memory). In settings_doc.c. */
char *core_settings_doc(const struct plb_setting *table);

/* Number of entries before PLB_SETTINGS_END. */
size_t core_settings_count(const struct plb_setting *table);

/* The setting's enum values as "a, b, c" into buf (len bytes, truncated if
 * short; "" for a setting with none). */
void core_settings_enum_list(const struct plb_setting *s, char *buf, size_t len);

/* x, a value or bound of setting s, as the text messages and the reference
 * show it: a duration ("1m30s") for a DURATION setting (x in ms), else the
 * number ("%.15g"), into buf (len bytes). */
void core_settings_number_text(const struct plb_setting *s, double x, char *buf, size_t len);

#endif
