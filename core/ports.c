/*
 * ports: the check across instances that no two listen on one TCP port of
 * overlapping addresses. A module marks an INT setting PLB_SET_LISTEN_PORT
 * and names the STRING setting with its address in `listen_address`; the
 * daemon compares every pair, so `--check-config` reports what bind(2)
 * would fail with at start (EADDRINUSE), at FILE:LINE, naming both.
 */
#include "ports.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct port_use {
    const struct plb_ctx *ctx;
    const struct plb_setting *s;
    const char *addr; /* normalized: NULL for every IPv4 address */
    int v6;           /* an IPv6 address ("::": every address of both) */
    int64_t port;
    char where[512];
};

/* "localhost" listens on 127.0.0.1 (as mod_metrics and mod_tcp_proxy
 * read it); "", "0.0.0.0" and no address at all on every IPv4 address. */
static void
normalize(struct port_use *u, const char *addr)
{
    if (addr && strcmp(addr, "localhost") == 0)
        addr = "127.0.0.1";
    if (!addr || !*addr || strcmp(addr, "0.0.0.0") == 0)
        addr = NULL;
    u->addr = addr;
    u->v6 = addr && strchr(addr, ':') != NULL;
}

static int
is_any6(const struct port_use *u)
{
    return u->v6 && (strcmp(u->addr, "::") == 0 || strcmp(u->addr, "[::]") == 0);
}

/* 1 if binding both would collide. "::" takes both families (Linux binds
 * it dual-stack by default). */
static int
overlap(const struct port_use *a, const struct port_use *b)
{
    if (a->port != b->port)
        return 0;
    if (is_any6(a) || is_any6(b))
        return 1;
    if (a->v6 != b->v6)
        return 0;
    if (!a->addr || !b->addr)
        return !a->v6; /* the IPv4 wildcard */
    return strcmp(a->addr, b->addr) == 0;
}

static const char *
address_of(const struct plb_ctx *ctx, const struct plb_setting *port)
{
    if (!port->listen_address)
        return NULL;
    for (const struct plb_setting *s = ctx->cm->mod->settings; s && s->name; s++) {
        if (strcmp(s->name, port->listen_address) == 0 && s->type == PLB_SET_STRING)
            return *(char *const *)(const void *)((const char *)ctx->config + s->offset);
    }
    return NULL;
}

void
core_ports_check(struct core *c, const config_setting_t *list, struct core_errors *err)
{
    size_t n = 0, cap = 0;
    struct port_use *v = NULL;

    for (size_t i = 0; i < c->ninst; i++) {
        const struct plb_ctx *ctx = c->inst[i];
        const config_setting_t *grp = config_setting_get_elem(list, (unsigned)i);
        for (const struct plb_setting *s = ctx->cm->mod->settings; s && s->name; s++) {
            if (!(s->flags & PLB_SET_LISTEN_PORT) || s->type != PLB_SET_INT)
                continue;
            int64_t port = *(const int64_t *)(const void *)((const char *)ctx->config + s->offset);
            if (port <= 0)
                continue; /* 0: the system picks a free one */
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 8;
                struct port_use *nv = core_realloc(v, nc * sizeof(*nv));
                if (!nv) {
                    core_errors_add(err, c->config_file, "instances", "out of memory");
                    goto out;
                }
                v = nv;
                cap = nc;
            }
            struct port_use *u = &v[n++];
            u->ctx = ctx;
            u->s = s;
            u->port = port;
            normalize(u, address_of(ctx, s));
            const config_setting_t *m = grp ? config_setting_get_member(grp, s->name) : NULL;
            core_setting_where(m ? m : grp, c->config_file, u->where, sizeof(u->where));
        }
    }
    for (size_t j = 1; j < n; j++) {
        for (size_t i = 0; i < j; i++) {
            if (!overlap(&v[i], &v[j]))
                continue;
            char path[512];
            snprintf(path, sizeof(path), "instances.%s.%s", v[j].ctx->name, v[j].s->name);
            core_errors_add(err, v[j].where, path,
                            "port %lld%s%s is also instances.%s.%s (%s): two listeners "
                            "cannot share it",
                            (long long)v[j].port, v[j].addr ? " on " : "",
                            v[j].addr ? v[j].addr : "", v[i].ctx->name, v[i].s->name, v[i].where);
            break;
        }
    }
out:
    core_free(v);
}
