/*
 * links: what instances give each other, one subject a file:
 *   links.c      the registry below, and forgetting an instance's share;
 *   endpoints.c  endpoint sets from sources to sinks (merge, deferred
 *                delivery to subscribers);
 *   gates.c      gates that open and close gated instances, and the fence
 *                on a gated instance's writes;
 *   health.c     named health checks that mod_metrics reads;
 *   done.c       asynchronous completions (plb_done).
 * Every function runs on the loop thread.
 */
#ifndef PRISMLB_LINKS_H
#define PRISMLB_LINKS_H

#include "core.h"

struct provider; /* endpoints.c */
struct sub;      /* endpoints.c */
struct health;   /* health.c */

/* The daemon's links (core->links). */
struct core_links {
    struct core *c;
    struct provider *providers; /* endpoint sets, newest first */
    struct sub *subs;           /* endpoint subscriptions */
    struct health *health;      /* checks, in registration order */
};

/* Unlink from the list at *headp (its items linked through next) and free
 * with free_item every item whose owner_field is owner, every item when
 * owner is NULL: how each registry forgets an instance's share. */
#define CORE_LINKS_FORGET(headp, owner_field, owner, free_item)                                    \
    do {                                                                                           \
        for (__typeof__(*(headp)) *pp_ = (headp); *pp_;) {                                         \
            __typeof__(*(headp)) item_ = *pp_;                                                     \
            if (!(owner) || item_->owner_field == (owner)) {                                       \
                *pp_ = item_->next;                                                                \
                free_item(item_);                                                                  \
            } else {                                                                               \
                pp_ = &item_->next;                                                                \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* New registry (core_links_free it) or NULL. */
struct core_links *core_links_new(struct core *c);
/* Free l and everything in it. NULL is fine. */
void core_links_free(struct core_links *l);
/* Drop the subscriptions, sets and checks of an instance (at destroy). */
void core_links_forget(plb_ctx *ctx);

/* Endpoint sets (see plb_host.endpoints_*). */
int core_endpoints_publish(plb_ctx *ctx, const char *provider, const char *const *eps, size_t n);
void core_endpoints_failed(plb_ctx *ctx, const char *provider, int failed);
int core_endpoints_subscribe(plb_ctx *ctx, const struct plb_strv *sources, plb_endpoints_cb cb,
                             void *arg);
/* 1 when every provider the instance published under has failed. */
int core_endpoints_all_failed(plb_ctx *ctx);
/* Free the subscriptions and sets of owner (NULL: of every instance). */
void core_endpoints_forget(struct core_links *l, const plb_ctx *owner);

/* Merge: sorted, de-duplicated union of the given sets into out (new
 * array of borrowed pointers, core_free it). Pure; for tests too. */
int core_endpoints_merge(const struct plb_strv *const *sets, size_t nsets, const char ***out,
                         size_t *nout);

/* Gates (see plb_host.gate_set and gate_is_open). */
int core_gate_set(plb_ctx *ctx, int open, void (*done)(void *arg), void *arg);
int core_gate_is_open(plb_ctx *ctx);
/* Start gated instance g's write loop if it does not run: open its fence,
 * then call its gate_open. For a started instance whose gate is open. */
void core_gate_activate(plb_ctx *g);
/* g is destroyed (or re-created by a reload): its fence lets go of its
 * requests and is closed again. */
void core_gate_forget(plb_ctx *g);

/* Health. */
int core_health_register(plb_ctx *ctx, const char *check, enum plb_health_kind kind);
void core_health_beat(plb_ctx *ctx, const char *check);
void core_health_set(plb_ctx *ctx, const char *check, int ok, const char *reason);
void core_health_foreach(struct core *c, plb_health_iter_cb cb, void *arg);
/* Free the checks of owner (NULL: of every instance). */
void core_health_forget(struct core_links *l, const plb_ctx *owner);

/* Asynchronous completions: new completion that calls fn(arg) once when
 * fired (NULL when out of memory); core_done_fire frees it and calls fn.
 * NULL is fine for core_done_fire. core_done_init readies one embedded in
 * its owner (an instance's stop): firing it frees nothing, so handing it
 * out cannot fail. */
plb_done *core_done_new(void (*fn)(void *arg), void *arg);
void core_done_init(plb_done *d, void (*fn)(void *arg), void *arg);
void core_done_fire(plb_done *d);

#endif
