/*
 * hz_go.c: hcloud-cloud-controller-manager's value syntax, which is Go's:
 * booleans as strconv.ParseBool reads them and durations as
 * time.ParseDuration does (in whole seconds, what Hetzner's health checks
 * take), and IPv4 CIDRs as net.ParseCIDR does. Read by the annotations and
 * the environment variables alike.
 * Pure.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hz.h"

int
hz_go_bool(const char *v)
{
    static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True", NULL};
    static const char *const f[] = {"0", "f", "F", "FALSE", "false", "False", NULL};
    for (size_t i = 0; t[i]; i++) {
        if (strcmp(v, t[i]) == 0)
            return 1;
        if (strcmp(v, f[i]) == 0)
            return 0;
    }
    return -1;
}

int
hz_go_seconds(const char *v, int64_t *out)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    int64_t total = 0;
    const char *p = v;
    if (!*p)
        return -EINVAL;
    while (*p) {
        char *end;
        size_t k;
        errno = 0;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        long long n = strtoll(p, &end, 10);
        if (errno || end == p || n > 100000000)
            return -EINVAL;
        p = end;
        for (k = 0; k < sizeof(units) / sizeof(units[0]); k++) {
            size_t ul = strlen(units[k].unit);
            /* "m" must not take the "ms" of milliseconds */
            if (strncmp(p, units[k].unit, ul) == 0 && !(ul == 1 && p[0] == 'm' && p[1] == 's'))
                break;
        }
        if (k == sizeof(units) / sizeof(units[0]))
            return -EINVAL; /* no unit: Go refuses it too (but "0") */
        total += (int64_t)n * units[k].ms;
        p += strlen(units[k].unit);
        if (total > INT64_C(100000000000))
            return -EINVAL;
    }
    if (total % 1000)
        return -EINVAL;
    *out = total / 1000;
    return 0;
}

/* Splits "a.b.c.d/n" into the address (host order) and the prefix: 0 or
 * -EINVAL. Go's rules: the prefix is decimal digits (leading zeros taken),
 * the octets have no leading zeros (inet_pton refuses them too). */
static int
cidr4_parse(const char *v, uint32_t *addr, int *prefix)
{
    char ip[16];
    struct in_addr ia;
    const char *slash = strchr(v, '/');
    size_t n = slash ? (size_t)(slash - v) : 0;
    const char *p = slash ? slash + 1 : NULL;
    long bits = 0;
    if (!slash || n == 0 || n >= sizeof(ip) || !*p || strlen(p) > 8)
        return -EINVAL;
    for (const char *q = p; *q; q++) {
        if (*q < '0' || *q > '9')
            return -EINVAL;
        bits = bits * 10 + (*q - '0');
    }
    memcpy(ip, v, n);
    ip[n] = '\0';
    if (inet_pton(AF_INET, ip, &ia) != 1 || bits > 32)
        return -EINVAL;
    *addr = ntohl(ia.s_addr);
    *prefix = (int)bits;
    return 0;
}

static uint32_t
mask4(int prefix)
{
    return prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
}

int
hz_go_cidr4(const char *v, char out[HZ_CIDR4_MAX])
{
    uint32_t a;
    int prefix;
    if (cidr4_parse(v, &a, &prefix) < 0)
        return -EINVAL;
    a &= mask4(prefix);
    snprintf(out, HZ_CIDR4_MAX, "%u.%u.%u.%u/%d", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff,
             a & 0xff, prefix);
    return 0;
}

int
hz_cidr4_holds(const char *cidr, const char *ip)
{
    uint32_t net;
    int prefix;
    struct in_addr ia;
    if (cidr4_parse(cidr, &net, &prefix) < 0 || inet_pton(AF_INET, ip, &ia) != 1)
        return 0;
    return ((ntohl(ia.s_addr) ^ net) & mask4(prefix)) == 0;
}
