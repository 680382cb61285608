/*
 * hz_pace.c: pacing of Hetzner API requests from the RateLimit-* headers,
 * so that the module does not run into 429 (pure; no I/O).
 *
 * Hetzner keeps a token bucket per API token: RateLimit-Limit is its size,
 * RateLimit-Remaining the whole tokens left, RateLimit-Reset the UNIX time
 * at which the bucket is full again. Every answer updates the estimate:
 *
 *   tokens(now) = min(limit, remaining + rate × (now − t_answer)) − in_flight
 *
 * and a request goes out only while tokens(now) ≥ 1 + reserve. The refill
 * rate is read from the headers once the bucket is at least half empty
 * ((limit − remaining) / (reset − now + 1 s), which never overestimates
 * since Reset is rounded up to whole seconds), and assumed to be
 * limit/3600 s (Hetzner's documented refill) before that. So a full bucket
 * is spent at once down to the reserve, and then the requests are spread
 * at the refill rate up to the reset instead of hitting 429. After a 429
 * (someone else spent the budget) nothing goes out until the reset.
 *
 * The resync's budget (hz_resync_budget) is the steady-state side of the
 * same bucket: the resync lists every labelled balancer in pages of 50,
 * and its interval stretches so that those pages take at most the
 * configured share of the limit per hour, however many balancers there
 * are; the rest of the budget stays for the writes that follow changes.
 */
#include <stdint.h>
#include <string.h>

#include "hz_api.h"

#define SAFETY 0.95
/* A RateLimit-Reset later than 9999-12-31 (Unix seconds) is no reset time:
 * ignored, as a missing one (and its milliseconds fit an int64_t). */
#define HZ_RESET_MAX 253402300799LL

void
hz_pace_init(struct hz_pace *p)
{
    memset(p, 0, sizeof(*p));
}

static int64_t
reserve_of(int64_t limit)
{
    int64_t r = limit / 50;
    return r < 1 ? 1 : r;
}

void
hz_pace_update(struct hz_pace *p, uint64_t seq, int64_t now_ms, int64_t wall_ms, long limit,
               long remaining, long long reset_unix)
{
    if (limit <= 0 || remaining < 0 || reset_unix <= 0 || reset_unix > HZ_RESET_MAX)
        return;
    if (p->known && seq < p->seq)
        return; /* an older answer than the one the estimate rests on */
    if (remaining > limit)
        remaining = limit; /* not believed beyond a full bucket */
    if (!p->known || p->limit != limit)
        p->rate_per_ms = (double)limit / 3600000.0;
    p->known = 1;
    p->seq = seq;
    p->limit = limit;
    p->remaining = remaining;
    p->t_ms = now_ms;
    int64_t until_full = reset_unix * 1000 - wall_ms;
    p->reset_ms = now_ms + (until_full > 0 ? until_full : 0);
    if (remaining <= limit - remaining && until_full > 0) { /* half empty or worse */
        double r = (double)(limit - remaining) / (double)(until_full + 1000) * SAFETY;
        if (r > 0)
            p->rate_per_ms = r;
    }
}

void
hz_pace_on_429(struct hz_pace *p, int64_t now_ms, int64_t wall_ms, long long reset_unix)
{
    int64_t until = reset_unix > 0 && reset_unix <= HZ_RESET_MAX ? reset_unix * 1000 - wall_ms : 0;
    if (until < 1000)
        until = 1000;
    p->pause_until_ms = now_ms + until;
    /* The bucket is empty and full again at the reset: that is the rate. */
    if (p->limit > 0 && reset_unix > 0)
        p->rate_per_ms = (double)p->limit / (double)(until + 1000) * SAFETY;
    p->remaining = 0;
    p->t_ms = now_ms;
    p->rate_429++;
}

double
hz_pace_tokens(const struct hz_pace *p, int64_t now_ms, int in_flight)
{
    double t = (double)p->remaining + p->rate_per_ms * (double)(now_ms - p->t_ms);
    if (t > (double)p->limit)
        t = (double)p->limit;
    return t - in_flight;
}

int64_t
hz_pace_delay(const struct hz_pace *p, int64_t now_ms, int in_flight)
{
    if (p->pause_until_ms > now_ms)
        return p->pause_until_ms - now_ms;
    if (!p->known)
        return in_flight ? -1 : 0; /* learn the budget from one answer first */
    double need = 1.0 + (double)reserve_of(p->limit);
    double have = hz_pace_tokens(p, now_ms, in_flight);
    if (have >= need)
        return 0;
    if (in_flight && p->rate_per_ms <= 0)
        return -1;
    if (p->rate_per_ms <= 0) {
        int64_t d = p->reset_ms - now_ms;
        return d > 0 ? d : 1000;
    }
    double ms = (need - have) / p->rate_per_ms;
    if (ms < 1)
        ms = 1;
    if (ms > 3600000)
        ms = 3600000;
    return (int64_t)ms + 1;
}

struct hz_budget
hz_resync_budget(int64_t configured_ms, size_t items, long limit, int64_t percent)
{
    struct hz_budget b = {configured_ms, 1, 0};
    if (items > 0)
        b.pages = (long)(items / HZ_PER_PAGE + (items % HZ_PER_PAGE != 0));
    if (limit <= 0 || percent <= 0 || percent > 100 || limit > INT64_MAX / 100)
        return b;
    /* pages × 3600 s × 100 / (limit × percent), rounded up, at most a day */
    int64_t den = (int64_t)limit * percent;
    int64_t need = HZ_RESYNC_MAX_MS;
    if (b.pages <= INT64_MAX / 360000000) {
        int64_t num = (int64_t)b.pages * 360000000;
        need = num / den + (num % den != 0);
    }
    if (need > HZ_RESYNC_MAX_MS)
        need = HZ_RESYNC_MAX_MS;
    if (need > configured_ms) {
        b.interval_ms = need;
        b.stretched = 1;
    }
    return b;
}
