/*
 * formats: whether a string setting's value has its plb_setting_format.
 */
#ifndef PRISMLB_FORMATS_H
#define PRISMLB_FORMATS_H

#include <stddef.h>

#include "prismlb/module.h"

/* NULL if value has the format (an empty or NULL value always has), else
 * why not: a static message or one written into buf (len bytes). */
const char *core_format_check(enum plb_setting_format format, const char *value, char *buf,
                              size_t len);
/* The same with a thread-local buffer, for the host table: the message is
 * good until the calling thread's next call. */
const char *core_format_check_tls(enum plb_setting_format format, const char *value);

#endif
