/*
 * resolve: the probe server's bind_address when it is a hostname, resolved
 * without blocking the loop (getaddrinfo_a, polled from a timer: 1 ms
 * doubling to 32 ms) to its first IPv4 address, else its first address.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "mm.h"

#define POLL_FIRST_MS 1
#define POLL_MAX_MS 32

struct mm_resolve {
    const struct plb_host *host;
    struct gaicb gcb;
    struct gaicb *list[1];
    struct addrinfo hints;
    char name[256];
    plb_timer *poll;
    int64_t delay_ms;
    mm_resolve_cb cb;
    void *arg;
};

static void
res_free(struct mm_resolve *r)
{
    if (r->gcb.ar_result)
        freeaddrinfo(r->gcb.ar_result);
    r->host->loop->timer_free(r->poll);
    r->host->mem->free(r);
}

static void
on_poll(plb_timer *t, void *arg)
{
    struct mm_resolve *r = arg;
    char ip[INET6_ADDRSTRLEN] = "";
    int e = gai_error(&r->gcb);
    if (e == EAI_INPROGRESS) {
        r->delay_ms = r->delay_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : r->delay_ms * 2;
        if (r->host->loop->timer_arm(t, r->delay_ms, 0, 0) == 0)
            return;
        e = EAI_SYSTEM; /* cannot poll: report a failure */
    }
    const struct addrinfo *pick = NULL;
    for (const struct addrinfo *a = e == 0 ? r->gcb.ar_result : NULL; a; a = a->ai_next) {
        if (!pick || (a->ai_family == AF_INET && pick->ai_family != AF_INET))
            pick = a;
    }
    if (pick && pick->ai_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)pick->ai_addr)->sin_addr, ip, sizeof(ip));
    else if (pick && pick->ai_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)pick->ai_addr)->sin6_addr, ip,
                  sizeof(ip));
    mm_resolve_cb cb = r->cb;
    void *cb_arg = r->arg;
    if (e == EAI_SYSTEM && gai_error(&r->gcb) == EAI_INPROGRESS &&
        gai_cancel(&r->gcb) == EAI_NOTCANCELED) {
        /* still in glibc's hands: leaked on purpose (bounded: one) */
        r->host->loop->timer_free(r->poll);
    } else {
        res_free(r);
    }
    cb(cb_arg, ip[0] ? ip : NULL, e == 0 ? "no usable address" : gai_strerror(e));
}

struct mm_resolve *
mm_resolve_start(const struct plb_host *host, plb_ctx *ctx, const char *name, mm_resolve_cb cb,
                 void *arg)
{
    struct mm_resolve *r;
    struct sigevent sev;

    if (strlen(name) >= sizeof(r->name) || !(r = host->mem->alloc(sizeof(*r))))
        return NULL;
    memset(r, 0, sizeof(*r));
    r->host = host;
    r->cb = cb;
    r->arg = arg;
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->hints.ai_socktype = SOCK_STREAM;
    r->hints.ai_family = AF_UNSPEC;
    r->gcb.ar_name = r->name;
    r->gcb.ar_request = &r->hints;
    r->list[0] = &r->gcb;
    r->delay_ms = POLL_FIRST_MS;
    if (!(r->poll = host->loop->timer_new(ctx, on_poll, r)))
        goto fail;
    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_NONE;
    if (getaddrinfo_a(GAI_NOWAIT, r->list, 1, &sev) != 0)
        goto fail;
    if (host->loop->timer_arm(r->poll, r->delay_ms, 0, 0) < 0) {
        if (gai_cancel(&r->gcb) == EAI_NOTCANCELED) {
            host->loop->timer_free(r->poll);
            return NULL; /* still in glibc's hands: leaked on purpose */
        }
        goto fail;
    }
    return r;
fail:
    host->loop->timer_free(r->poll);
    host->mem->free(r);
    return NULL;
}

void
mm_resolve_cancel(struct mm_resolve *r)
{
    if (!r)
        return;
    if (gai_cancel(&r->gcb) == EAI_NOTCANCELED) {
        /* glibc still writes into r: stop polling and leave it (bounded:
         * one per stop during a lookup) */
        r->host->loop->timer_free(r->poll);
        return;
    }
    res_free(r);
}
