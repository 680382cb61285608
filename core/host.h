/* host: the plb_host table the daemon hands to modules. */
#ifndef PRISMLB_HOST_H
#define PRISMLB_HOST_H

#include "core.h"

extern const struct plb_host core_host;

#endif
