/*
 * instance: the lifecycle of every module instance — create in config
 * order, start in config order, stop in reverse order with a bounded grace
 * each, destroy.
 */
#ifndef PRISMLB_INSTANCE_H
#define PRISMLB_INSTANCE_H

#include "core.h"

/* Create every instance. On failure destroys the ones created and returns
 * -1 (errors logged). */
int core_instances_create(struct core *c);
/* Start every instance; on failure stops and returns -1. Instances gated by
 * an already open gate get gate_open right after start. */
int core_instances_start(struct core *c);
/* Begin the ordered stop; when the last instance finished, on_done(c) runs
 * (from the event loop). Calling it again while stopping does nothing. */
void core_instances_stop(struct core *c, void (*on_done)(struct core *c));
/* Destroy every created instance (after stop) and drop its links. */
void core_instances_destroy(struct core *c);
/* Destroy one instance's module state if it was created (after stop or a
 * failed create), forget a stop completion that never fired and drop its
 * links; ctx itself and its parsed config stay. Safe to call twice. */
void core_instance_destroy(plb_ctx *ctx);
/* Run ctx's create hook: CORE_INST_CREATED, or (the module's reason logged
 * as `failed`, a literal message) CORE_INST_STOPPED and its rc. */
int core_instance_create(plb_ctx *ctx, const char *failed);
/* Run ctx's start hook (none is a success): CORE_INST_STARTED, `started`
 * logged, and gate_open when its gate is already open; or `failed` logged,
 * CORE_INST_STOPPED and its rc (the caller stops or destroys it). */
int core_instance_start(plb_ctx *ctx, const char *failed, const char *started);
/* Call the stop hook of ctx (started, with one) with its embedded
 * completion, which calls fn(ctx) once the module says it stopped; ctx is
 * STOPPING, its write loop ended, and timer is armed for the shutdown
 * grace. Logs what. */
void core_instance_stop_hook(plb_ctx *ctx, void (*fn)(void *arg), struct event *timer,
                             const char *what);
/* Log that create or start of ctx failed with rc: what (literal), the
 * module's reason why (NUL-terminated here; "" when it gave none) and the
 * errno text as fields. */
void core_instance_log_failure(plb_ctx *ctx, const char *what, int rc, char why[512]);

#endif
