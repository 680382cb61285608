/* Per-token rate limit buckets. */
#include "fake.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double
now_s(void)
{
    return (double)hz_now_ms() / 1000.0;
}

/* Bring b up to date with the refill since b->last. */
static void
refill(struct hz_fake *f, struct hz_bucket *b, double now)
{
    b->level += (now - b->last) * f->cfg.rate_refill;
    if (b->level > f->cfg.rate_bucket)
        b->level = f->cfg.rate_bucket;
    b->last = now;
}

static struct hz_bucket *
bucket_get(struct hz_fake *f, const char *token)
{
    struct hz_bucket *b;
    for (b = f->buckets; b; b = b->next)
        if (strcmp(b->token, token) == 0)
            return b;
    if (!(b = calloc(1, sizeof(*b))))
        return NULL;
    if (!(b->token = strdup(token))) {
        free(b);
        return NULL;
    }
    b->level = f->cfg.rate_bucket;
    b->last = now_s();
    b->next = f->buckets;
    f->buckets = b;
    return b;
}

/* Seconds from now until b is full again. */
static long long
reset_at(struct hz_fake *f, const struct hz_bucket *b)
{
    double missing = f->cfg.rate_bucket - b->level;
    double secs = f->cfg.rate_refill > 0 ? ceil(missing / f->cfg.rate_refill) : 0;
    if (missing > 0 && f->cfg.rate_refill <= 0)
        secs = 365.0 * 86400.0;
    return (long long)time(NULL) + (long long)secs;
}

int
hz_rate_take(struct hz_fake *f, const char *token, long *limit, long *remaining, long long *reset)
{
    struct hz_bucket *b = bucket_get(f, token ? token : "");
    if (!b)
        return -1;
    refill(f, b, now_s());
    int ok = b->level >= 1.0;
    if (ok)
        b->level -= 1.0;
    *limit = (long)f->cfg.rate_bucket;
    *remaining = (long)floor(b->level);
    *reset = reset_at(f, b);
    return ok;
}

json_t *
hz_rate_json(struct hz_fake *f)
{
    json_t *arr = json_array();
    double now = now_s();
    if (!arr)
        return NULL;
    for (struct hz_bucket *b = f->buckets; b; b = b->next) {
        refill(f, b, now);
        json_t *o = json_pack("{s:s, s:I, s:I, s:I}", "token", b->token, "limit",
                              (json_int_t)f->cfg.rate_bucket, "remaining",
                              (json_int_t)floor(b->level), "reset", (json_int_t)reset_at(f, b));
        if (json_array_append_new(arr, o) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

void
hz_rate_free(struct hz_fake *f)
{
    struct hz_bucket *b = f->buckets;
    while (b) {
        struct hz_bucket *next = b->next;
        free(b->token);
        free(b);
        b = next;
    }
    f->buckets = NULL;
}
