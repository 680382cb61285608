/*
 * worker: the daemon's worker loops. N threads, each with its own libevent
 * event base (its own timers and fd watches, made with the reactor and
 * listener functions on core_worker_base()), messages posted between them
 * and the main loop, and immutable snapshots the main loop publishes for
 * the workers to read without locks.
 *
 * Threads share nothing mutable: a message carries its argument to the one
 * loop that runs it (the poster gives up the argument, the callback owns it
 * from then on), and a snapshot is read-only once published. A published
 * snapshot is released on the main loop once every worker has passed through
 * its loop since (quiescent-state reclamation: a worker holds a snapshot
 * only inside a callback, so the end of each loop iteration is a point where
 * it holds none). Workers are woken at each publication so that an idle one
 * moves on too.
 *
 * Everything here is called on the main loop unless its comment says "any
 * thread" or "worker".
 */
#ifndef PRISMLB_WORKER_H
#define PRISMLB_WORKER_H

#include <stddef.h>

#include "prismlb/module.h"

struct event_base;
struct core_workers;

/* The most worker loops a daemon runs. */
#define CORE_WORKERS_MAX 64

/* A message callback: runs on the loop it was posted to, with the argument
 * given to core_post (owned by the callback from then on). */
typedef void (*core_post_cb)(void *arg);

/* The CPUs this process may run on (sched_getaffinity), at least 1 and at
 * most CORE_WORKERS_MAX: the default of the `threads` setting. */
unsigned core_workers_default(void);

/* Start n worker loops (n >= 2; 1 means none: the daemon's one loop) with
 * main_base (borrowed; the main loop) receiving their posts. New set, free
 * with core_workers_stop; NULL with *err (may be NULL) -errno: -EINVAL for n
 * outside [2, CORE_WORKERS_MAX], -ENOMEM, -EAGAIN (no thread). Signals stay
 * with the main thread. */
struct core_workers *core_workers_start(struct event_base *main_base, unsigned n, int *err);

/* Stop every worker after the messages already posted to it have run, join
 * the threads, run the messages left for the main loop and release every
 * snapshot awaiting release. The worker loops stay allocated (idle, no
 * thread runs them), so a module that did not stop within its grace can
 * still free what it made on them, and its snapshots: what they retire
 * from then on is released at once. Once is enough; NULL is fine. */
void core_workers_join(struct core_workers *ws);

/* core_workers_join, then free the worker loops and the set. The modules
 * must have freed what they made on the worker loops. NULL is fine. */
void core_workers_stop(struct core_workers *ws);

/* The number of workers; 0 for NULL. */
size_t core_workers_count(const struct core_workers *ws);
/* Worker i, borrowed for the set's life; NULL out of range. */
plb_worker *core_worker_at(struct core_workers *ws, size_t i);
/* Any thread: the worker running the calling thread, or NULL (the main
 * loop, or any other thread). */
plb_worker *core_worker_self(void);
/* Any thread: the worker's index in its set. */
size_t core_worker_index(const plb_worker *w);
/* Worker w's event base, for the reactor and listener functions called on
 * w's thread. Borrowed. */
struct event_base *core_worker_base(plb_worker *w);

/* Any thread: run fn(arg) on worker `to`'s loop, or on the main loop when
 * `to` is NULL. Messages from one thread to one loop run in the order
 * posted. 0, or -ENOMEM, or -ESHUTDOWN once the target stopped (fn does not
 * run then: arg stays the caller's). */
int core_post(struct core_workers *ws, plb_worker *to, core_post_cb fn, void *arg);

/* A snapshot slot, empty. ws may be NULL (no workers: retired data is
 * released at once). New, free with core_snapshot_free; NULL on allocation
 * failure. */
plb_snapshot *core_snapshot_new(struct core_workers *ws);
/* Publish data (given up: read-only from now on, released by release(data)
 * on the main loop once no worker can still read it; release may be NULL).
 * The previous data is retired likewise. data may be NULL (empty). */
int core_snapshot_publish(plb_snapshot *s, void *data, void (*release)(void *data));
/* Any thread: the latest published data, or NULL; valid until the calling
 * worker returns to its loop (on the main loop: until the next publish). */
const void *core_snapshot_get(const plb_snapshot *s);
/* Retire the current data and free the slot (the data is released once no
 * worker can read it). NULL is fine. */
void core_snapshot_free(plb_snapshot *s);
/* Data published and not yet released (tests). */
size_t core_snapshots_retired(const struct core_workers *ws);

/* The host table's worker entries (host_worker.c; see module.h). */
size_t core_h_worker_count(plb_ctx *ctx);
plb_worker *core_h_worker_at(plb_ctx *ctx, size_t i);
int core_h_post(plb_ctx *ctx, plb_worker *to, void (*fn)(void *arg), void *arg);
plb_timer *core_h_worker_timer_new(plb_worker *w, plb_timer_cb cb, void *arg);
plb_io *core_h_worker_io_new(plb_worker *w, int fd, int what, plb_io_cb cb, void *arg);
int core_h_listen_socket(plb_ctx *ctx, const char *addr, int port, int backlog, int reuseport,
                         int *bound_port);
plb_listener *core_h_worker_listen_fd(plb_worker *w, int fd, plb_accept_cb cb, void *arg, int *err);
plb_snapshot *core_h_snapshot_new(plb_ctx *ctx);
int core_h_metrics_on_collect(plb_ctx *ctx, void (*cb)(void *arg), void *arg, int add);

#endif
