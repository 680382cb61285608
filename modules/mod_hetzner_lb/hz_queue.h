/*
 * hz_queue.h: the per-Service work queue of mod_hetzner_lb (pure; no I/O,
 * no host calls, the time passed in), after client-go's workqueue:
 *
 *  - keys are "namespace/name"; a key is in the queue at most once, however
 *    often it is added before it is taken;
 *  - a key taken (hz_queue_get) is in flight until hz_queue_done; adding it
 *    meanwhile marks it dirty, and done puts it back once: a key is never
 *    handed out twice at a time;
 *  - hz_queue_add_after delays an add; of two delays of one key the earlier
 *    wins; hz_queue_tick moves the due ones into the queue and says when
 *    the next one is due (the caller arms one timer for it);
 *  - hz_queue_add_rate_limited delays by the key's backoff, base × 2^n
 *    after its n-th consecutive failure, capped; hz_queue_forget resets it;
 *  - hz_queue_shut_down: adds are refused and get hands out nothing more
 *    (unlike client-go, whose Get still drains the queue: a replica that
 *    lost the lease starts no new writes); the keys in flight still end
 *    with done, and hz_queue_drained says when the last has.
 * Every operation costs O(1) (a hash of the key), delayed ones O(log n).
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_QUEUE_H
#define PRISMLB_MOD_HETZNER_LB_HZ_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "hz.h"

struct hz_queue;

struct hz_queue_cfg {
    int64_t base_delay_ms; /* backoff after the first failure */
    int64_t max_delay_ms;  /* the backoff's cap */
};

/* A new, empty queue (cfg copied); NULL when out of memory. */
HZ_HIDDEN struct hz_queue *hz_queue_new(const struct hz_queue_cfg *cfg);
/* Free q and every key in it; NULL is fine. */
HZ_HIDDEN void hz_queue_free(struct hz_queue *q);

/* Queue key (copied) unless it is queued already; when in flight, queue it
 * again once it is done. 0, -ENOMEM, or -ESHUTDOWN after shut_down. */
HZ_HIDDEN int hz_queue_add(struct hz_queue *q, const char *key);
/* Queue key once delay_ms after now_ms (delay <= 0: now). A pending delay
 * of the same key that ends earlier is kept. 0, -ENOMEM or -ESHUTDOWN. */
HZ_HIDDEN int hz_queue_add_after(struct hz_queue *q, const char *key, int64_t delay_ms,
                                 int64_t now_ms);
/* Queue key after its backoff (base × 2^failures, capped) and count one
 * more failure; the delay chosen in *delay_ms when not NULL. 0, -ENOMEM
 * or -ESHUTDOWN. */
HZ_HIDDEN int hz_queue_add_rate_limited(struct hz_queue *q, const char *key, int64_t now_ms,
                                        int64_t *delay_ms);
/* Forget key's failures: its next backoff is the base again. */
HZ_HIDDEN void hz_queue_forget(struct hz_queue *q, const char *key);
/* key's consecutive failures (0 when unknown). */
HZ_HIDDEN int hz_queue_failures(const struct hz_queue *q, const char *key);

/* The oldest queued key, now in flight (borrowed, valid until done for it);
 * NULL when nothing is queued or after shut_down. */
HZ_HIDDEN const char *hz_queue_get(struct hz_queue *q);
/* key's processing ended: requeued when it was added meanwhile. */
HZ_HIDDEN void hz_queue_done(struct hz_queue *q, const char *key);

/* Move the delayed keys due at now_ms into the queue. Returns ms until
 * the next delayed key is due, or -1 when none is waiting. */
HZ_HIDDEN int64_t hz_queue_tick(struct hz_queue *q, int64_t now_ms);

/* Refuse adds from now on; get returns NULL; in-flight keys still end. */
HZ_HIDDEN void hz_queue_shut_down(struct hz_queue *q);
/* 1 after shut_down once no key is in flight. */
HZ_HIDDEN int hz_queue_drained(const struct hz_queue *q);

/* Keys queued (ready), in flight, and waiting on a delay. */
HZ_HIDDEN size_t hz_queue_len(const struct hz_queue *q);
HZ_HIDDEN size_t hz_queue_in_flight(const struct hz_queue *q);
HZ_HIDDEN size_t hz_queue_delayed(const struct hz_queue *q);

#endif
