/* The addresses the stored Services of one cluster hold: ClusterIPs in
 * 10.96.0.0/16 and node ports. fk_store_commit keeps them up to date, so
 * that allocating an address (and knowing which node ports are taken)
 * costs the same whatever the number of Services. */
#include "fk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IP_FIRST 10 /* 10.96.0.0 - 10.96.0.9 are never handed out */
#define IP_COUNT 65000
#define IP_WORDS ((IP_COUNT + 63) / 64)

struct fk_alloc {
    uint32_t ip_ref[IP_COUNT];              /* Services holding 10.96.n/256.n%256 */
    uint64_t ip_used[IP_WORDS];             /* bit n: ip_ref[n] > 0 */
    uint64_t ip_full[(IP_WORDS + 63) / 64]; /* bit w: ip_used[w] has no free bit */
    uint32_t np_ref[FK_NODEPORT_MAX - FK_NODEPORT_MIN + 1];
};

static int
is_service(const struct fk_kind *k)
{
    return !k->group[0] && !strcmp(k->resource, "services");
}

/* The index n of "10.96.a.b" (n = a*256+b) or -1 outside the range. */
static int
ip_index(const char *s)
{
    unsigned a, b;
    char tail;
    if (!s || sscanf(s, "10.96.%u.%u%c", &a, &b, &tail) != 2 || a > 255 || b > 255)
        return -1;
    unsigned n = a * 256 + b;
    return n >= IP_FIRST && n < IP_COUNT ? (int)n : -1;
}

static void
ip_mark(struct fk_alloc *a, int n, int used)
{
    uint64_t bit = 1ull << (n % 64);
    size_t w = (size_t)n / 64;
    if (used)
        a->ip_used[w] |= bit;
    else
        a->ip_used[w] &= ~bit;
    uint64_t full =
        w == IP_WORDS - 1 ? (IP_COUNT % 64 ? (1ull << (IP_COUNT % 64)) - 1 : ~0ull) : ~0ull;
    if ((a->ip_used[w] & full) == full)
        a->ip_full[w / 64] |= 1ull << (w % 64);
    else
        a->ip_full[w / 64] &= ~(1ull << (w % 64));
}

/* Count one more (d = 1) or one fewer (d = -1) holder in *ref. */
static void
bump(uint32_t *ref, int d)
{
    if (d > 0)
        (*ref)++;
    else if (*ref > 0)
        (*ref)--;
}

/* Add (d = 1) or take away (d = -1) what Service obj holds. */
static void
account(struct fk_alloc *a, json_t *obj, int d)
{
    json_t *spec = json_object_get(obj, "spec"), *p;
    size_t i;
    int n = ip_index(json_string_value(json_object_get(spec, "clusterIP")));
    if (n >= 0) {
        bump(&a->ip_ref[n], d);
        ip_mark(a, n, a->ip_ref[n] > 0);
    }
    json_array_foreach(json_object_get(spec, "ports"), i, p)
    {
        json_int_t np = json_integer_value(json_object_get(p, "nodePort"));
        if (np >= FK_NODEPORT_MIN && np <= FK_NODEPORT_MAX)
            bump(&a->np_ref[np - FK_NODEPORT_MIN], d);
    }
    json_int_t hc = json_integer_value(json_object_get(spec, "healthCheckNodePort"));
    if (hc >= FK_NODEPORT_MIN && hc <= FK_NODEPORT_MAX)
        bump(&a->np_ref[hc - FK_NODEPORT_MIN], d);
}

/* See fk.h. */
int
fk_alloc_prepare(struct fk_cluster *cl, const struct fk_kind *k)
{
    if (!is_service(k) || cl->alloc)
        return 0;
    return (cl->alloc = calloc(1, sizeof(*cl->alloc))) ? 0 : -ENOMEM;
}

/* See fk.h. */
void
fk_alloc_track(struct fk_cluster *cl, const struct fk_kind *k, json_t *old, json_t *obj)
{
    if (!is_service(k) || !cl->alloc || old == obj)
        return;
    if (old)
        account(cl->alloc, old, -1);
    if (obj)
        account(cl->alloc, obj, 1);
}

/* See fk.h. */
json_t *
fk_alloc_cluster_ip(struct fk_cluster *cl)
{
    struct fk_alloc *a = cl->alloc;
    char ip[32];
    if (!a && !(a = cl->alloc = calloc(1, sizeof(*cl->alloc))))
        return NULL;
    for (size_t s = 0; s < sizeof(a->ip_full) / sizeof(a->ip_full[0]); s++) {
        uint64_t free_words = ~a->ip_full[s];
        while (free_words) {
            size_t w = s * 64 + (size_t)__builtin_ctzll(free_words);
            free_words &= free_words - 1;
            if (w >= IP_WORDS)
                return NULL;
            uint64_t free_bits = ~a->ip_used[w];
            if (w == 0)
                free_bits &= ~((1ull << IP_FIRST) - 1);
            if (!free_bits)
                continue; /* only the never-used first addresses are free */
            size_t n = w * 64 + (size_t)__builtin_ctzll(free_bits);
            if (n >= IP_COUNT)
                return NULL;
            snprintf(ip, sizeof(ip), "10.96.%zu.%zu", n / 256, n % 256);
            return json_string(ip);
        }
    }
    return NULL;
}

/* See fk.h. */
void
fk_alloc_node_ports(struct fk_cluster *cl, json_t *self, unsigned char *used)
{
    size_t span = FK_NODEPORT_MAX - FK_NODEPORT_MIN + 1;
    if (!cl->alloc) {
        memset(used, 0, span);
        return;
    }
    for (size_t i = 0; i < span; i++)
        used[i] = cl->alloc->np_ref[i] > 0;
    if (!self)
        return;
    /* the Service's own stored ports are not taken from it */
    uint32_t own[FK_NODEPORT_MAX - FK_NODEPORT_MIN + 1];
    json_t *spec = json_object_get(self, "spec"), *p;
    size_t i;
    memset(own, 0, sizeof(own));
    json_array_foreach(json_object_get(spec, "ports"), i, p)
    {
        json_int_t np = json_integer_value(json_object_get(p, "nodePort"));
        if (np >= FK_NODEPORT_MIN && np <= FK_NODEPORT_MAX)
            own[np - FK_NODEPORT_MIN]++;
    }
    json_int_t hc = json_integer_value(json_object_get(spec, "healthCheckNodePort"));
    if (hc >= FK_NODEPORT_MIN && hc <= FK_NODEPORT_MAX)
        own[hc - FK_NODEPORT_MIN]++;
    for (i = 0; i < span; i++)
        if (own[i])
            used[i] = cl->alloc->np_ref[i] > own[i];
}

/* See fk.h. */
void
fk_alloc_free(struct fk_cluster *cl)
{
    free(cl->alloc);
    cl->alloc = NULL;
}
