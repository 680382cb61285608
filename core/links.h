/*
 * links: what instances give each other — endpoint sets from sources to
 * sinks, gates that open and close gated instances, and health checks that
 * mod_metrics reads.
 */
#ifndef PRISMLB_LINKS_H
#define PRISMLB_LINKS_H

#include "core.h"

struct core_links *core_links_new(struct core *c);
void core_links_free(struct core_links *l);

/* Endpoint sets (see plb_host.endpoints_*). */
int core_endpoints_publish(plb_ctx *ctx, const char *provider, const char *const *eps, size_t n);
void core_endpoints_failed(plb_ctx *ctx, const char *provider, int failed);
int core_endpoints_subscribe(plb_ctx *ctx, const struct plb_strv *sources, plb_endpoints_cb cb,
                             void *arg);
/* 1 when every provider the instance published under has failed. */
int core_endpoints_all_failed(plb_ctx *ctx);
/* Drop the subscriptions and sets of an instance (at destroy). */
void core_links_forget(plb_ctx *ctx);

/* Merge: sorted, de-duplicated union of the given sets into out (new
 * array of borrowed pointers, core_free it). Pure; for tests too. */
int core_endpoints_merge(const struct plb_strv *const *sets, size_t nsets, const char ***out,
                         size_t *nout);

/* Gates. */
int core_gate_set(plb_ctx *ctx, int open, void (*done)(void *arg), void *arg);
int core_gate_is_open(plb_ctx *ctx);

/* Health. */
int core_health_register(plb_ctx *ctx, const char *check, enum plb_health_kind kind);
void core_health_beat(plb_ctx *ctx, const char *check);
void core_health_set(plb_ctx *ctx, const char *check, int ok, const char *reason);
void core_health_foreach(struct core *c, plb_health_iter_cb cb, void *arg);

/* Asynchronous completions. */
plb_done *core_done_new(void (*fn)(void *arg), void *arg);
void core_done_fire(plb_done *d);

#endif
