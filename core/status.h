/*
 * status: the /status document of the running instances (status.c).
 */
#ifndef PRISMLB_STATUS_H
#define PRISMLB_STATUS_H

#include <stddef.h>

#include "core.h"

/* {"instances": [{"name", "module", "status"}]} of every started instance
 * whose module has a status hook, in config order; an instance whose hook
 * returns no object is listed with {"error": ...}. New compact JSON text
 * (core_free; *len its length), or NULL when out of memory. */
char *core_status_render(struct core *c, size_t *len);

#endif
