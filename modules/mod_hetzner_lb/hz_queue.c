/*
 * hz_queue.c: the per-Service work queue (see hz_queue.h).
 *
 * One item per key known to the queue, in a chained hash table: it is on
 * the ready list (queued), in flight (taken, not done), dirty (added while
 * in flight), in the delay heap (heap_at > 0), and remembers its failures.
 * An item none of these hold is freed.
 */
#include <errno.h>
#include <string.h>

#include "hz_dlist.h"
#include "hz_queue.h"

struct item {
    char *key;
    uint64_t hash;
    struct item *hnext;       /* hash chain */
    struct item *prev, *next; /* ready list */
    int queued, in_flight, dirty;
    int failures;
    size_t heap_at; /* 1 + index in the heap; 0 = not delayed */
    int64_t due_ms;
};

struct hz_queue {
    struct hz_queue_cfg cfg;
    struct item **buckets;
    size_t nbuckets, nitems;
    struct item *head, *tail; /* ready, oldest first */
    size_t nready, nflight;
    struct item **heap; /* delayed, min-heap on due_ms */
    size_t nheap, capheap;
    int shut;
};

struct hz_queue *
hz_queue_new(const struct hz_queue_cfg *cfg)
{
    struct hz_queue *q = hz_calloc(sizeof(*q));
    if (q && (q->buckets = hz_calloc(64 * sizeof(*q->buckets)))) {
        q->cfg = *cfg;
        q->nbuckets = 64;
        return q;
    }
    hz_free(q);
    return NULL;
}

/* Hand every item of the table to fn, which may free or relink it. */
static void
each_item(struct hz_queue *q, void (*fn)(struct item *it, void *arg), void *arg)
{
    for (size_t b = 0; b < q->nbuckets; b++) {
        for (struct item *it = q->buckets[b], *n; it; it = n) {
            n = it->hnext;
            fn(it, arg);
        }
    }
}

static void
item_free(struct item *it, void *arg)
{
    (void)arg;
    hz_free(it->key);
    hz_free(it);
}

void
hz_queue_free(struct hz_queue *q)
{
    if (!q)
        return;
    each_item(q, item_free, NULL);
    hz_free(q->buckets);
    hz_free(q->heap);
    hz_free(q);
}

static struct item *
find(const struct hz_queue *q, const char *key, uint64_t h)
{
    for (struct item *it = q->buckets[h % q->nbuckets]; it; it = it->hnext)
        if (it->hash == h && !strcmp(it->key, key))
            return it;
    return NULL;
}

struct rehash {
    struct item **b;
    size_t nb;
};

static void
item_rehash(struct item *it, void *arg)
{
    struct rehash *r = arg;
    it->hnext = r->b[it->hash % r->nb];
    r->b[it->hash % r->nb] = it;
}

/* Double the table when it holds more than two items per bucket; a failed
 * grow leaves the table as it was (longer chains, still correct). */
static void
grow(struct hz_queue *q)
{
    size_t nb = q->nbuckets * 2;
    struct item **b = hz_calloc(nb * sizeof(*b));
    struct rehash r = {b, nb};
    if (!b)
        return;
    each_item(q, item_rehash, &r);
    hz_free(q->buckets);
    q->buckets = b;
    q->nbuckets = nb;
}

/* The item of key, created when absent; NULL on ENOMEM. */
static struct item *
get_item(struct hz_queue *q, const char *key)
{
    uint64_t h = hz_fnv1a64(key);
    struct item *it = find(q, key, h);
    if (it)
        return it;
    if (!(it = hz_calloc(sizeof(*it))) || !(it->key = hz_strdup(key))) {
        hz_free(it);
        return NULL;
    }
    it->hash = h;
    it->hnext = q->buckets[h % q->nbuckets];
    q->buckets[h % q->nbuckets] = it;
    if (++q->nitems > q->nbuckets * 2)
        grow(q);
    return it;
}

/* Free it when nothing holds it any more. */
static void
maybe_drop(struct hz_queue *q, struct item *it)
{
    if (it->queued || it->in_flight || it->dirty || it->heap_at || it->failures)
        return;
    struct item **pp = &q->buckets[it->hash % q->nbuckets];
    while (*pp != it)
        pp = &(*pp)->hnext;
    *pp = it->hnext;
    q->nitems--;
    hz_free(it->key);
    hz_free(it);
}

static void
push_ready(struct hz_queue *q, struct item *it)
{
    it->queued = 1;
    HZ_DLIST_APPEND(q->head, q->tail, it, prev, next);
    q->nready++;
}

/* Ready now: queued, or dirty when in flight. */
static void
make_ready(struct hz_queue *q, struct item *it)
{
    if (it->in_flight)
        it->dirty = 1;
    else if (!it->queued)
        push_ready(q, it);
}

/* ---- the delay heap ---- */

static void
heap_set(struct hz_queue *q, size_t i, struct item *it)
{
    q->heap[i] = it;
    it->heap_at = i + 1;
}

static void
heap_up(struct hz_queue *q, size_t i)
{
    struct item *it = q->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (q->heap[p]->due_ms <= it->due_ms)
            break;
        heap_set(q, i, q->heap[p]);
        i = p;
    }
    heap_set(q, i, it);
}

static void
heap_down(struct hz_queue *q, size_t i)
{
    struct item *it = q->heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        int64_t best = it->due_ms;
        if (l < q->nheap && q->heap[l]->due_ms < best)
            m = l, best = q->heap[l]->due_ms;
        if (l + 1 < q->nheap && q->heap[l + 1]->due_ms < best)
            m = l + 1;
        if (m == i)
            break;
        heap_set(q, i, q->heap[m]);
        i = m;
    }
    heap_set(q, i, it);
}

static void
heap_remove(struct hz_queue *q, struct item *it)
{
    size_t i = it->heap_at - 1;
    it->heap_at = 0;
    q->nheap--;
    if (i == q->nheap)
        return;
    struct item *moved = q->heap[q->nheap];
    heap_set(q, i, moved);
    heap_down(q, i);
    heap_up(q, moved->heap_at - 1);
}

/* Delay it until due (or keep an earlier delay). 0 or -ENOMEM. */
static int
delay(struct hz_queue *q, struct item *it, int64_t due)
{
    if (it->heap_at) {
        if (due < it->due_ms) {
            it->due_ms = due;
            heap_up(q, it->heap_at - 1);
        }
        return 0;
    }
    if (q->nheap == q->capheap) {
        size_t nc = q->capheap ? q->capheap * 2 : 16;
        struct item **h = hz_realloc(q->heap, nc * sizeof(*h));
        if (!h)
            return -ENOMEM;
        q->heap = h;
        q->capheap = nc;
    }
    it->due_ms = due;
    heap_set(q, q->nheap++, it);
    heap_up(q, q->nheap - 1);
    return 0;
}

/* ---- the interface ---- */

int
hz_queue_add(struct hz_queue *q, const char *key)
{
    if (q->shut)
        return -ESHUTDOWN;
    struct item *it = get_item(q, key);
    if (!it)
        return -ENOMEM;
    make_ready(q, it);
    return 0;
}

int
hz_queue_add_after(struct hz_queue *q, const char *key, int64_t delay_ms, int64_t now_ms)
{
    if (q->shut)
        return -ESHUTDOWN;
    if (delay_ms <= 0)
        return hz_queue_add(q, key);
    struct item *it = get_item(q, key);
    if (!it)
        return -ENOMEM;
    if (delay(q, it, now_ms + delay_ms) < 0) {
        maybe_drop(q, it);
        return -ENOMEM;
    }
    return 0;
}

int
hz_queue_add_rate_limited(struct hz_queue *q, const char *key, int64_t now_ms, int64_t *delay_ms)
{
    if (q->shut)
        return -ESHUTDOWN;
    struct item *it = get_item(q, key);
    if (!it)
        return -ENOMEM;
    int64_t d = q->cfg.base_delay_ms;
    for (int i = 0; i < it->failures && d < q->cfg.max_delay_ms; i++)
        d *= 2;
    if (d > q->cfg.max_delay_ms)
        d = q->cfg.max_delay_ms;
    if (it->failures < 62)
        it->failures++;
    if (delay_ms)
        *delay_ms = d;
    if (d <= 0) {
        make_ready(q, it);
        return 0;
    }
    return delay(q, it, now_ms + d);
}

void
hz_queue_forget(struct hz_queue *q, const char *key)
{
    struct item *it = find(q, key, hz_fnv1a64(key));
    if (!it)
        return;
    it->failures = 0;
    maybe_drop(q, it);
}

int
hz_queue_failures(const struct hz_queue *q, const char *key)
{
    const struct item *it = find(q, key, hz_fnv1a64(key));
    return it ? it->failures : 0;
}

const char *
hz_queue_get(struct hz_queue *q)
{
    struct item *it = q->head;
    if (q->shut || !it)
        return NULL;
    HZ_DLIST_UNLINK(q->head, q->tail, it, prev, next);
    it->queued = 0;
    q->nready--;
    it->in_flight = 1;
    q->nflight++;
    return it->key;
}

void
hz_queue_done(struct hz_queue *q, const char *key)
{
    struct item *it = find(q, key, hz_fnv1a64(key));
    if (!it || !it->in_flight)
        return;
    it->in_flight = 0;
    q->nflight--;
    if (it->dirty) {
        it->dirty = 0;
        if (!q->shut)
            push_ready(q, it);
    }
    maybe_drop(q, it);
}

int64_t
hz_queue_tick(struct hz_queue *q, int64_t now_ms)
{
    while (q->nheap && q->heap[0]->due_ms <= now_ms) {
        struct item *it = q->heap[0];
        heap_remove(q, it);
        if (!q->shut)
            make_ready(q, it);
        maybe_drop(q, it);
    }
    return q->nheap ? q->heap[0]->due_ms - now_ms : -1;
}

void
hz_queue_shut_down(struct hz_queue *q)
{
    q->shut = 1;
}

int
hz_queue_drained(const struct hz_queue *q)
{
    return q->shut && q->nflight == 0;
}

size_t
hz_queue_len(const struct hz_queue *q)
{
    return q->nready;
}

size_t
hz_queue_in_flight(const struct hz_queue *q)
{
    return q->nflight;
}

size_t
hz_queue_delayed(const struct hz_queue *q)
{
    return q->nheap;
}
