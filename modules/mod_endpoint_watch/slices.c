/*
 * slices: the endpoint list of a Service from its cached EndpointSlices.
 *
 * Per the spec ("Endpoint discovery"): the full list is recomputed from
 * every cached slice, so an update of one slice never loses the endpoints
 * of another; endpoints whose conditions.ready is explicitly false are
 * excluded (absent or null means ready, as in Kubernetes); the port is the
 * slice's port named port_name, never one copied from a static endpoint.
 * IPv6 addresses are written [addr]:port. No I/O: reads the informer's
 * cache through the host's object accessors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ew.h"

struct acc {
    const struct plb_host *h;
    const char *port_name;
    struct ew_list *l;
    size_t cap;
    int err;
};

static int
push(struct acc *a, const char *addr, int64_t port)
{
    char buf[300];
    int v6 = strchr(addr, ':') != NULL;
    int n = snprintf(buf, sizeof(buf), "%s%s%s:%lld", v6 ? "[" : "", addr, v6 ? "]" : "",
                     (long long)port);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return 0; /* cannot be an address: skipped as invalid by the caller */
    if (a->l->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 8;
        char **v = a->h->mem->realloc(a->l->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        a->l->v = v;
        a->cap = cap;
    }
    char *s = a->h->mem->strdup(buf);
    if (!s)
        return -ENOMEM;
    a->l->v[a->l->n++] = s;
    return 0;
}

/* The port named port_name of a slice, or -1. */
static int64_t
slice_port(const struct plb_host *h, const plb_obj *slice, const char *want)
{
    const plb_obj *ports = h->obj->get(slice, "ports", NULL);
    size_t n = h->obj->len(ports);
    for (size_t i = 0; i < n; i++) {
        const plb_obj *p = h->obj->at(ports, i);
        const char *name = h->obj->str(h->obj->get(p, "name", NULL));
        const char *proto = h->obj->str(h->obj->get(p, "protocol", NULL));
        if (strcmp(name ? name : "", want) != 0)
            continue;
        if (proto && strcmp(proto, "TCP") != 0)
            continue;
        /* an integer, as the API's int32 (a real such as 6443.0 or 1e40 is
         * not a port; Kubernetes' own decoding refuses it) */
        const plb_obj *pv = h->obj->get(p, "port", NULL);
        int64_t port = h->obj->type(pv) == PLB_OBJ_INT ? h->obj->int64(pv, -1) : -1;
        if (port >= 1 && port <= 65535)
            return port;
    }
    return -1;
}

static void
visit(const plb_obj *slice, void *arg)
{
    struct acc *a = arg;
    const struct plb_host *h = a->h;
    if (a->err)
        return;
    a->l->slices++;
    int64_t port = slice_port(h, slice, a->port_name);
    if (port < 0) {
        a->l->no_port++;
        return;
    }
    const plb_obj *eps = h->obj->get(slice, "endpoints", NULL);
    size_t n = h->obj->len(eps);
    for (size_t i = 0; i < n && !a->err; i++) {
        const plb_obj *ep = h->obj->at(eps, i);
        const plb_obj *ready = h->obj->get(ep, "conditions", "ready", NULL);
        if (h->obj->type(ready) == PLB_OBJ_BOOL && !h->obj->boolean(ready, 1)) {
            a->l->not_ready++;
            continue;
        }
        const plb_obj *addrs = h->obj->get(ep, "addresses", NULL);
        size_t m = h->obj->len(addrs);
        for (size_t j = 0; j < m; j++) {
            const char *addr = h->obj->str(h->obj->at(addrs, j));
            if (!addr || !*addr || h->links->check_format(PLB_FMT_HOST, addr)) {
                a->l->invalid++;
                continue;
            }
            if (push(a, addr, port) < 0) {
                a->err = -ENOMEM;
                return;
            }
        }
    }
}

static int
cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

int
ew_slices_list(const struct plb_host *h, const plb_informer *inf, const char *port_name,
               struct ew_list *out)
{
    struct acc a = {h, port_name ? port_name : "", out, 0, 0};
    memset(out, 0, sizeof(*out));
    h->kube->informer_foreach(inf, visit, &a);
    if (out->n > 1) {
        qsort(out->v, out->n, sizeof(*out->v), cmp_str);
        size_t m = 1;
        for (size_t i = 1; i < out->n; i++) {
            if (strcmp(out->v[m - 1], out->v[i]) == 0)
                h->mem->free(out->v[i]);
            else
                out->v[m++] = out->v[i];
        }
        out->n = m;
    }
    return a.err;
}

void
ew_list_clear(const struct plb_host *h, struct ew_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        h->mem->free(l->v[i]);
    h->mem->free(l->v);
    memset(l, 0, sizeof(*l));
}
