/*
 * resolve: host:port parsing and name resolution that never blocks the
 * loop. Hostname endpoints are resolved with getaddrinfo_a(GAI_NOWAIT) and
 * polled from a timer (1 ms, doubling to 32 ms) until gai_error() stops
 * answering EAI_INPROGRESS; IP literals are parsed at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "tp.h"

#define POLL_FIRST_MS 1
#define POLL_MAX_MS 32

struct tp_resolve {
    struct tp *tp;
    struct tp_resolve *prev, *next; /* tp->resolves */
    struct gaicb gcb;
    struct gaicb *list[1];
    struct addrinfo hints;
    char host[256];
    char port[8];
    plb_timer *poll;
    int64_t delay_ms;
    tp_resolve_cb cb;
    void *arg;
    int cancelled; /* the caller is gone; free when glibc is done */
};

int
tp_split_hostport(const char *ep, char *host, size_t hostlen, int *port)
{
    const char *colon;
    const char *h = ep;
    size_t hl;

    if (!ep || !*ep)
        return -EINVAL;
    if (ep[0] == '[') {
        const char *close = strchr(ep, ']');
        if (!close || close[1] != ':')
            return -EINVAL;
        h = ep + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(ep, ':');
        if (!colon || strchr(ep, ':') != colon)
            return -EINVAL;
        hl = (size_t)(colon - ep);
    }
    if (hl == 0 || hl >= hostlen)
        return -EINVAL;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || p < 1 || p > 65535)
        return -EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

int
tp_parse_ip(const char *host, int port, struct sockaddr_storage *sa, socklen_t *salen)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)sa;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)sa;

    memset(sa, 0, sizeof(*sa));
    if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        *salen = sizeof(*sin);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        *salen = sizeof(*sin6);
        return 0;
    }
    return -EINVAL;
}

static void
unlink_res(struct tp_resolve *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else if (r->tp->resolves == r)
        r->tp->resolves = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void
res_free(struct tp_resolve *r)
{
    const struct plb_host *host = r->tp->host;
    unlink_res(r);
    if (r->gcb.ar_result)
        freeaddrinfo(r->gcb.ar_result);
    host->loop->timer_free(r->poll);
    host->mem->free(r);
}

static void
on_poll(plb_timer *t, void *arg)
{
    struct tp_resolve *r = arg;
    int e = gai_error(&r->gcb);
    if (e == EAI_INPROGRESS) {
        r->delay_ms = r->delay_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : r->delay_ms * 2;
        if (r->tp->host->loop->timer_arm(t, r->delay_ms, 0, 0) == 0)
            return;
        /* Cannot poll any more: give up on the answer. */
        r->cancelled = 1;
        PLB_ERR(r->tp->host, r->tp->ctx, PLB_KV("host", r->host),
                "resolving: cannot re-arm the poll timer");
        gai_cancel(&r->gcb);
        r->tp->host->loop->timer_free(r->poll);
        r->poll = NULL;
        unlink_res(r); /* leaked on purpose: glibc still owns it */
        return;
    }
    if (r->cancelled) {
        res_free(r);
        return;
    }
    struct addrinfo *ai = e == 0 ? r->gcb.ar_result : NULL;
    /* One address is used: the first IPv4 one when there is one. Where
     * /etc/hosts maps "localhost" to both 127.0.0.1 and ::1, address
     * selection puts ::1 first, while API servers usually listen on IPv4. */
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            ai = a;
            break;
        }
    }
    /* Unlinked first: the callback may cancel other resolutions. */
    unlink_res(r);
    if (ai)
        r->cb(r->arg, 1, ai->ai_addr, ai->ai_addrlen);
    else
        r->cb(r->arg, 0, NULL, 0);
    res_free(r);
}

struct tp_resolve *
tp_resolve_start(struct tp *tp, const char *host, int port, tp_resolve_cb cb, void *arg)
{
    struct tp_resolve *r = tp->host->mem->alloc(sizeof(*r));
    struct sigevent sev;

    if (!r)
        return NULL;
    if (strlen(host) >= sizeof(r->host))
        goto fail;
    r->tp = tp;
    r->cb = cb;
    r->arg = arg;
    snprintf(r->host, sizeof(r->host), "%s", host);
    snprintf(r->port, sizeof(r->port), "%d", port);
    r->hints.ai_socktype = SOCK_STREAM;
    r->hints.ai_family = AF_UNSPEC;
    r->hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV;
    r->gcb.ar_name = r->host;
    r->gcb.ar_service = r->port;
    r->gcb.ar_request = &r->hints;
    r->list[0] = &r->gcb;
    r->delay_ms = POLL_FIRST_MS;
    r->poll = tp->host->loop->timer_new(tp->ctx, on_poll, r);
    if (!r->poll)
        goto fail;
    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_NONE;
    if (getaddrinfo_a(GAI_NOWAIT, r->list, 1, &sev) != 0)
        goto fail;
    if (tp->host->loop->timer_arm(r->poll, r->delay_ms, 0, 0) < 0) {
        /* Running in glibc: cannot free it unless cancelled. */
        if (gai_cancel(&r->gcb) == EAI_NOTCANCELED) {
            tp->host->loop->timer_free(r->poll);
            return NULL; /* leaked on purpose */
        }
        goto fail;
    }
    r->next = tp->resolves;
    if (r->next)
        r->next->prev = r;
    tp->resolves = r;
    return r;
fail:
    tp->host->loop->timer_free(r->poll);
    tp->host->mem->free(r);
    return NULL;
}

void
tp_resolve_cancel(struct tp_resolve *r)
{
    if (!r)
        return;
    int e = gai_cancel(&r->gcb);
    if (e == EAI_NOTCANCELED) {
        /* glibc is still working on it: forget the caller, keep polling,
         * free it when it is done. */
        r->cancelled = 1;
        r->cb = NULL;
        return;
    }
    res_free(r);
}

void
tp_resolve_shutdown(struct tp *tp)
{
    while (tp->resolves) {
        struct tp_resolve *r = tp->resolves;
        if (gai_cancel(&r->gcb) == EAI_NOTCANCELED) {
            /* Still running in glibc's thread: it may write into r, so r
             * stays allocated (a bounded leak at exit) without its timer. */
            unlink_res(r);
            tp->host->loop->timer_free(r->poll);
            r->poll = NULL;
            continue;
        }
        res_free(r);
    }
}
