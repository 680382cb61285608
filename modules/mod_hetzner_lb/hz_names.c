/*
 * hz_names.c: balancer names, as the spec's ownership paragraph says.
 *
 *   default      "<service>.<namespace>"
 *   with cluster "<cluster>.<service>.<namespace>"  (ROBOTLB_CLUSTER_NAME)
 *   annotation   robotlb/balancer as written, never prefixed
 *   legacy       "<service>" (earlier releases; only for adoption)
 *
 * Hetzner allows 128 characters. A longer name is cut and ends in "-" and
 * 16 hex digits of the 64-bit FNV-1a hash of the whole name, so two long
 * names that share their first 111 characters still differ.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hz.h"

#define HZ_HASH_HEX 16
#define HZ_CUT_KEEP (HZ_NAME_MAX - 1 - HZ_HASH_HEX) /* 111 */

#define FNV1A64_PRIME 0x100000001b3ULL

/* Fold byte c into the FNV-1a hash h. */
static uint64_t
fnv1a64_byte(uint64_t h, unsigned char c)
{
    return (h ^ c) * FNV1A64_PRIME;
}

uint64_t
hz_fnv1a64(const char *s)
{
    uint64_t h = HZ_FNV1A64_BASIS;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = fnv1a64_byte(h, *p);
    return h;
}

void
hz_fnv1a64_field(uint64_t *h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
        *h = fnv1a64_byte(*h, *p);
    *h = fnv1a64_byte(*h, 0xff);
}

void
hz_name_fit(const char *name, char out[HZ_NAME_MAX + 1])
{
    size_t l = strlen(name);
    if (l <= HZ_NAME_MAX) {
        memcpy(out, name, l + 1);
        return;
    }
    size_t keep = HZ_CUT_KEEP;
    /* Never end the kept part inside a UTF-8 sequence: back off while the
     * first dropped byte is a continuation byte. */
    while (keep > 0 && ((unsigned char)name[keep] & 0xC0) == 0x80)
        keep--;
    memcpy(out, name, keep);
    snprintf(out + keep, HZ_NAME_MAX + 1 - keep, "-%016" PRIx64, hz_fnv1a64(name));
}

/* Join up to three parts with '.' into a buffer long enough for any
 * Kubernetes name (each part is cut at 253 bytes), then fit. */
static void
join_fit(const char *a, const char *b, const char *c, char out[HZ_NAME_MAX + 1])
{
    char buf[3 * 254 + 3];
    if (a)
        snprintf(buf, sizeof(buf), "%.253s.%.253s.%.253s", a, b, c);
    else
        snprintf(buf, sizeof(buf), "%.253s.%.253s", b, c);
    hz_name_fit(buf, out);
}

void
hz_name_for_service(const char *annot_name, const char *cluster, const char *service,
                    const char *ns, char out[HZ_NAME_MAX + 1])
{
    if (annot_name && *annot_name) {
        hz_name_fit(annot_name, out);
        return;
    }
    join_fit(cluster && *cluster ? cluster : NULL, service, ns, out);
}

void
hz_name_legacy(const char *service, char out[HZ_NAME_MAX + 1])
{
    hz_name_fit(service, out);
}

void
hz_name_for_group(const char *cluster, const char *group, char out[HZ_NAME_MAX + 1])
{
    join_fit(cluster && *cluster ? cluster : NULL, group, "shared.prismlb.io", out);
}
