/*
 * hz_work.c: the event side's work queue on the loop: the pure per-Service
 * queue (hz_queue.c) and its two timers. Everything that asks for a sync
 * comes through here: an informer event (hz_watch.c), a retry after an
 * allocation failure, a status write to try again (hz_ingress.c), a full
 * pass (resync, the caches' first sync, the gate's opening).
 *
 *   sync timer     SYNC_DELAY_MS after the first key queued, hands the
 *                  queued Services to the drain callback given at start
 *                  (the sync, hz_sync.c): events that come together are
 *                  synced together;
 *   recheck timer  the earliest of a Service's recheck (a refused write,
 *                  hz_state.h's retry_at), a key the queue holds back (a
 *                  backoff, a delayed add) and, after an event or a retry
 *                  was lost to memory, every Service HZ_LOST_RETRY_MS later.
 *
 * It calls nothing of the event side but the drain callback.
 */
#include <errno.h>
#include <stdio.h>

#include <prismlb/module_util.h>

#include "hz_kube_int.h"
#include "hz_queue.h"

#define SYNC_DELAY_MS 200

/* The recheck timer: queue the Services whose recheck is due, and every
 * Service after a loss. */
static void
recheck_fire(plb_timer *t, void *arg)
{
    struct hz_kside *ks = arg;
    int64_t now = ks->host->loop->now_ms(ks->ctx);
    (void)t;
    for (const struct hz_svc_state *s = ks->states.head; s; s = s->next)
        if (s->fail_fp && s->retry_at <= now)
            hz_work_add(ks, s->key);
    if (ks->lost) {
        ks->lost = 0;
        PLB_INFO(ks->host, ks->ctx, NULL,
                 "syncing every Service again after an allocation failure");
        hz_work_all(ks);
    }
    hz_work_recheck(ks);
}

int
hz_work_start(struct hz_kside *ks, plb_timer_cb drain)
{
    const struct plb_host *h = ks->host;
    struct hz_queue_cfg qc = {.base_delay_ms = 5, .max_delay_ms = 1000000};
    if (!(ks->sync_timer = h->loop->timer_new(ks->ctx, drain, ks)) ||
        !(ks->recheck_timer = h->loop->timer_new(ks->ctx, recheck_fire, ks)) ||
        (!ks->queue && !(ks->queue = hz_queue_new(&qc))))
        return -ENOMEM;
    return 0;
}

void
hz_work_arm(struct hz_kside *ks)
{
    if (ks->sync_timer && !ks->host->loop->timer_pending(ks->sync_timer))
        ks->host->loop->timer_arm(ks->sync_timer, SYNC_DELAY_MS, 0, 0);
}

void
hz_work_add(struct hz_kside *ks, const char *key)
{
    int rc;
    if (!ks->queue)
        return;
    if ((rc = hz_queue_add(ks->queue, key)) == -ESHUTDOWN)
        return; /* stopped */
    if (rc == -ENOMEM) {
        /* the event is not lost: every Service is synced again shortly */
        PLB_ERR(ks->host, ks->ctx, PLB_KV("service", key),
                "out of memory: not queued; every Service synced again in %d ms", HZ_LOST_RETRY_MS);
        ks->lost = 1;
        hz_work_recheck(ks);
        return;
    }
    hz_work_arm(ks);
}

const char *
hz_work_next(struct hz_kside *ks)
{
    return ks->queue ? hz_queue_get(ks->queue) : NULL;
}

void
hz_work_done(struct hz_kside *ks, const char *key, int failed)
{
    if (failed)
        hz_work_retry(ks, key);
    else
        hz_queue_forget(ks->queue, key);
    hz_queue_done(ks->queue, key);
}

void
hz_work_add_after(struct hz_kside *ks, const char *key, int64_t delay_ms)
{
    if (!ks->queue)
        return;
    if (hz_queue_add_after(ks->queue, key, delay_ms, ks->host->loop->now_ms(ks->ctx)) == -ENOMEM)
        ks->lost = 1; /* every Service is synced again shortly */
    hz_work_recheck(ks);
}

void
hz_work_retry(struct hz_kside *ks, const char *key)
{
    int64_t delay = 0;
    int rc = hz_queue_add_rate_limited(ks->queue, key, ks->host->loop->now_ms(ks->ctx), &delay);
    if (rc == -ESHUTDOWN)
        return; /* stopped */
    if (rc < 0) {
        PLB_ERR(ks->host, ks->ctx, PLB_KV("service", key),
                "out of memory: every Service synced again in %d ms", HZ_LOST_RETRY_MS);
        ks->lost = 1;
    } else {
        PLB_WARN(ks->host, ks->ctx, PLB_KV("service", key),
                 "the sync ran out of memory: synced again in %lld ms", (long long)delay);
    }
    hz_work_recheck(ks);
}

/* plb_informer_foreach's callback: queue Service svc. */
static void
add_svc(const plb_obj *svc, void *arg)
{
    struct hz_kside *ks = arg;
    const char *ns = hz_ks_str(ks, svc, "metadata", "namespace", NULL);
    const char *name = hz_ks_str(ks, svc, "metadata", "name", NULL);
    char key[512];
    if (!ns || !name)
        return;
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    hz_work_add(ks, key);
}

void
hz_work_all(struct hz_kside *ks)
{
    /* A status written but overwritten before the cache showed it would
     * otherwise wait for the Service's next change. */
    hz_states_forget_status(&ks->states);
    if (ks->svc_inf && ks->queue)
        ks->host->kube->informer_foreach(ks->svc_inf, add_svc, ks);
}

void
hz_work_recheck(struct hz_kside *ks)
{
    int64_t now = ks->host->loop->now_ms(ks->ctx), first = 0, next;
    if (!ks->svc_inf)
        return; /* stopped */
    first = hz_states_next_retry(&ks->states, now);
    /* the work queue's delayed keys (a sync that ran out of memory) */
    if (ks->queue && (next = hz_queue_tick(ks->queue, now)) >= 0 && (!first || now + next < first))
        first = now + next;
    if (ks->queue && hz_queue_len(ks->queue))
        hz_work_arm(ks);
    if (ks->lost && (!first || now + HZ_LOST_RETRY_MS < first))
        first = now + HZ_LOST_RETRY_MS;
    if (first && ks->recheck_timer)
        ks->host->loop->timer_arm(ks->recheck_timer, first > now ? first - now : 1, 0, 0);
}

void
hz_work_stop(struct hz_kside *ks)
{
    if (ks->sync_timer)
        ks->host->loop->timer_cancel(ks->sync_timer);
    if (ks->recheck_timer)
        ks->host->loop->timer_cancel(ks->recheck_timer);
    if (ks->queue)
        hz_queue_shut_down(ks->queue); /* the reconciles in flight end on their own */
}

void
hz_work_free(struct hz_kside *ks)
{
    ks->host->loop->timer_free(ks->sync_timer);
    ks->sync_timer = NULL;
    ks->host->loop->timer_free(ks->recheck_timer);
    ks->recheck_timer = NULL;
    hz_queue_free(ks->queue);
    ks->queue = NULL;
}
