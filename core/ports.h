/*
 * ports: --check-config's pass over every instance's listening ports
 * (settings flagged PLB_SET_LISTEN_PORT).
 */
#ifndef PRISMLB_PORTS_H
#define PRISMLB_PORTS_H

#include <libconfig.h>

#include "alloc.h"
#include "core.h"

/* Report in err, at the FILE:LINE of the later setting and naming both,
 * every listening port of an instance that another instance's overlaps
 * (same port, same or wildcard address). list is the config's instances
 * list, in the order of c->inst. */
void core_ports_check(struct core *c, const config_setting_t *list, struct core_errors *err);

#endif
