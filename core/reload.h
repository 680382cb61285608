/*
 * reload: SIGHUP re-reads the config file and restarts only the instances
 * whose settings changed (see reload.c).
 */
#ifndef PRISMLB_RELOAD_H
#define PRISMLB_RELOAD_H

#include "core.h"

/* Re-read c->config_file. Invalid: every error is logged (FILE:LINE:
 * setting: message) and nothing changes. Valid: the instances that changed
 * or went are stopped (each within shutdown_grace, in reverse config
 * order) and destroyed, then the changed and new ones are created and
 * started in config order; unchanged instances run on. A SIGHUP while a
 * reload is being applied runs one more reload after it. Nothing during
 * shutdown. */
void core_reload(struct core *c);
/* Free a reload still being applied (at exit). */
void core_reload_free(struct core *c);

#endif
