/*
 * httpc: libcurl multi on the daemon's libevent loop. See httpc.h; the
 * files of the client are listed in httpc_int.h.
 *
 * A request moves through three states:
 *   QUEUED   created by core_http_request, waiting for the kick event that
 *            adds it to the multi handle (or reports a local error), so done
 *            never runs inside core_http_request and no curl_multi call is
 *            made from inside another request's callback;
 *   RUNNING  in the multi handle; curl drives it through socket_action;
 *   IN_DONE  removed from the multi handle, its done callback running; freed
 *            when that returns.
 * A cancel inside curl_multi_socket_action (that is, from on_data) only marks
 * the request; the sweep after socket_action returns removes it.
 *
 * Per-host cap: a BUFFER request takes one of its host's HTTPC_MAX_PER_HOST
 * slots when the kick starts it; while they are all taken it waits, still
 * QUEUED, on its host's list, and the request that gives a slot back hands
 * it to the oldest waiter (moved to the start queue with the slot already
 * its own). Streams (CHUNKS, LINES) hold their connection for as long as
 * they run and take no slot. A host is scheme, host and port of the URL,
 * plus connect_to.
 */
#include "httpc.h"

#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include "alloc.h"
#include "httpc_int.h"
#include "log.h"
#include "reactor.h"

/* ------------------------------------------------------------------------ */
/* Request bookkeeping.                                                     */

static void
scrub_slist(struct curl_slist *l)
{
    for (; l; l = l->next)
        explicit_bzero(l->data, strlen(l->data));
}

/* A queue of requests linked by qnext, from *head to *tail (the start
 * queue and each host's wait list). Take req out: 1 if it was in it. */
static int
reqq_unlink(plb_http_req **head, plb_http_req **tail, plb_http_req *req)
{
    plb_http_req **pp = head, *prev = NULL;
    for (; *pp; prev = *pp, pp = &(*pp)->qnext) {
        if (*pp != req)
            continue;
        *pp = req->qnext;
        if (*tail == req)
            *tail = prev;
        req->qnext = NULL;
        return 1;
    }
    return 0;
}

/* Append req at the tail. */
static void
reqq_push(plb_http_req **head, plb_http_req **tail, plb_http_req *req)
{
    req->qnext = NULL;
    if (*tail)
        (*tail)->qnext = req;
    else
        *head = req;
    *tail = req;
}

static void
queue_unlink(struct core_httpc *c, plb_http_req *req)
{
    if (reqq_unlink(&c->qhead, &c->qtail, req))
        c->nqueued--;
}

void
httpc_queue_push(struct core_httpc *c, plb_http_req *req)
{
    reqq_push(&c->qhead, &c->qtail, req);
    c->nqueued++;
}

/* The host entry for key with one more reference (new or found); NULL on
 * ENOMEM. */
static struct hostq *
host_ref(struct core_httpc *c, const char *key)
{
    struct hostq *h;
    for (h = c->hosts; h; h = h->next)
        if (!strcmp(h->key, key))
            break;
    if (!h) {
        if (!(h = core_calloc(1, sizeof(*h))))
            return NULL;
        if (!(h->key = core_strdup(key))) {
            core_free(h);
            return NULL;
        }
        h->next = c->hosts;
        c->hosts = h;
    }
    h->refs++;
    return h;
}

static void
host_unref(struct core_httpc *c, struct hostq *h)
{
    if (--h->refs > 0)
        return;
    for (struct hostq **pp = &c->hosts; *pp; pp = &(*pp)->next) {
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    }
    core_free(h->key);
    core_free(h);
}

/* Take req off its host's wait list. */
void
httpc_host_unwait(struct core_httpc *c, plb_http_req *req)
{
    struct hostq *h = req->hq;
    if (reqq_unlink(&h->whead, &h->wtail, req)) {
        h->nwait--;
        c->nwaiting--;
        req->waiting = 0;
    }
}

/* req gives its slot back: the oldest waiter of its host gets it and goes
 * to the start queue. */
static void
host_release(struct core_httpc *c, plb_http_req *req)
{
    struct hostq *h = req->hq;
    req->slot = 0;
    h->slots--;
    plb_http_req *w = h->whead;
    if (!w)
        return;
    httpc_host_unwait(c, w);
    w->slot = 1;
    h->slots++;
    httpc_queue_push(c, w);
    event_active(c->kick, 0, 0);
}

/* Take req off its fence's list. */
void
httpc_fence_unlink(plb_http_req *req)
{
    struct core_http_fence *f = req->fence;
    if (!f)
        return;
    LIST_REMOVE(req, flink);
    req->fence = NULL;
}

/* Free what req holds itself (its easy handle, header lists and buffers)
 * and req: a request linked nowhere. NULL is fine. */
static void
req_release(plb_http_req *req)
{
    if (!req)
        return;
    if (req->easy)
        curl_easy_cleanup(req->easy);
    scrub_slist(req->headers);
    curl_slist_free_all(req->headers);
    curl_slist_free_all(req->connect_to);
    httpc_buf_free(&req->line, 0);
    httpc_buf_free(&req->resp.body, 0);
    httpc_buf_free(&req->resp.headers, 0);
    core_free(req);
}

/* Unlink req from everything, remove it from curl and free it. */
static void
req_free(plb_http_req *req)
{
    struct core_httpc *c = req->c;
    httpc_fence_unlink(req);
    if (req->state == REQ_QUEUED && req->waiting)
        httpc_host_unwait(c, req);
    else if (req->state == REQ_QUEUED)
        queue_unlink(c, req);
    LIST_REMOVE(req, link);
    c->active--;
    if (req->easy && req->state == REQ_RUNNING)
        (void)curl_multi_remove_handle(c->multi, req->easy);
    if (req->hq) {
        if (req->slot)
            host_release(c, req);
        host_unref(c, req->hq);
    }
    req_release(req);
}

static enum plb_http_error
classify(const plb_http_req *req, CURLcode res)
{
    static const CURLcode tls[] = {
        CURLE_SSL_CONNECT_ERROR,   CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
        CURLE_SSL_CIPHER,          CURLE_SSL_CACERT_BADFILE,       CURLE_SSL_ISSUER_ERROR,
        CURLE_SSL_CRL_BADFILE,     CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS,
        CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,     CURLE_SSL_ENGINE_INITFAILED,
        CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CLIENTCERT,           CURLE_USE_SSL_FAILED,
    };
    static const CURLcode local[] = {
        CURLE_OUT_OF_MEMORY,        CURLE_BAD_FUNCTION_ARGUMENT, CURLE_URL_MALFORMAT,
        CURLE_UNSUPPORTED_PROTOCOL, CURLE_NOT_BUILT_IN,          CURLE_FAILED_INIT,
        CURLE_READ_ERROR,
    };
    for (size_t i = 0; i < sizeof(tls) / sizeof(tls[0]); i++)
        if (res == tls[i])
            return PLB_HTTP_E_TLS;
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
        if (res == local[i])
            return PLB_HTTP_E_LOCAL;
    switch (res) {
    case CURLE_OK:
        return PLB_HTTP_OK;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
        return PLB_HTTP_E_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return PLB_HTTP_E_TIMEOUT;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        /* With TLS 1.3 a server that rejects the client certificate says so
         * with an alert after the handshake; OpenSSL reports it at read. */
        if (req->https && strstr(req->errbuf, "SSL routines"))
            return PLB_HTTP_E_TLS;
        return PLB_HTTP_E_PROTOCOL;
    default:
        return PLB_HTTP_E_PROTOCOL;
    }
}

/* Call done (unless cancelled) and free req. */
static void
req_finish(plb_http_req *req)
{
    req->state = REQ_IN_DONE;
    CORE_DEBUG("http request finished: status=%d error=%d %s", req->resp.status,
               (int)req->resp.error, req->resp.text);
    if (!req->cancelled)
        req->done(req, &req->resp, req->arg);
    req_free(req);
}

/* req ended in curl with res: fill the response and finish. */
static void
req_complete(plb_http_req *req, CURLcode res)
{
    struct plb_http_resp *r = &req->resp;
    long status = 0;
    double t = 0;

    req->state = REQ_IN_DONE;
    if (curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK)
        r->status = (int)status;
    if (curl_easy_getinfo(req->easy, CURLINFO_APPCONNECT_TIME, &t) == CURLE_OK && t > 0)
        r->connect_time = t;
    else if (curl_easy_getinfo(req->easy, CURLINFO_CONNECT_TIME, &t) == CURLE_OK)
        r->connect_time = t;
    if (curl_easy_getinfo(req->easy, CURLINFO_TOTAL_TIME, &t) == CURLE_OK)
        r->total_time = t;
    long nconn = 0;
    if (curl_easy_getinfo(req->easy, CURLINFO_NUM_CONNECTS, &nconn) == CURLE_OK && nconn > 0)
        req->c->connects += (size_t)nconn;

    if (res == CURLE_OK && req->mode == PLB_HTTP_LINES && req->line.len > 0 && !req->cancelled) {
        /* The last line had no '\n' but the body ended cleanly. */
        int stop = req->on_data(req, req->line.p, req->line.len, req->arg);
        req->line.len = 0;
        if (stop)
            (void)httpc_req_abort(req, PLB_HTTP_E_ABORTED, "aborted by on_data");
    }
    if (req->fenced) {
        r->error = PLB_HTTP_E_FENCED;
        httpc_set_text(req, "not sent: the instance's gate closed");
    } else if (req->abort_err && (res == CURLE_WRITE_ERROR || res == CURLE_OK)) {
        r->error = req->abort_err;
        httpc_set_text(req, "%s", req->abort_text);
    } else if (res != CURLE_OK) {
        r->error = classify(req, res);
        httpc_set_text(req, "%s", req->errbuf[0] ? req->errbuf : curl_easy_strerror(res));
    }
    req_finish(req);
}

/* ------------------------------------------------------------------------ */
/* The multi driver.                                                        */

/* Remove the running requests that were cancelled, or failed, where curl
 * forbids removal; a failed one reports through done. */
static void
sweep_cancelled(struct core_httpc *c)
{
    while (c->sweep) {
        c->sweep = 0;
        for (plb_http_req *req = LIST_FIRST(&c->reqs); req; req = LIST_NEXT(req, link)) {
            if (req->state != REQ_RUNNING || !(req->cancelled || req->failed))
                continue;
            (void)curl_multi_remove_handle(c->multi, req->easy);
            req->state = REQ_IN_DONE;
            if (req->cancelled)
                req_free(req);
            else
                req_complete(req, CURLE_WRITE_ERROR);
            c->sweep = 1; /* done may have changed the list: scan again */
            break;
        }
    }
}

/* Drain finished transfers. */
static void
check_info(struct core_httpc *c)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURL *easy = m->easy_handle;
        CURLcode res = m->data.result;
        char *priv = NULL;
        if (curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv) != CURLE_OK || !priv) {
            CORE_ERR("http: finished transfer without its request");
            (void)curl_multi_remove_handle(c->multi, easy);
            continue;
        }
        plb_http_req *req = (plb_http_req *)(void *)priv;
        (void)curl_multi_remove_handle(c->multi, easy);
        req->state = REQ_IN_DONE;
        req_complete(req, res);
    }
}

static void
drive(struct core_httpc *c, curl_socket_t fd, int action)
{
    int running = 0;
    c->in_curl++;
    CURLMcode rc = curl_multi_socket_action(c->multi, fd, action, &running);
    c->in_curl--;
    if (rc != CURLM_OK && rc != CURLM_BAD_SOCKET) {
        /* curl re-arms its timer only after a successful call: retry soon,
         * or every transfer would wait forever. */
        struct timeval tv = {0, 10000};
        CORE_ERR("http: curl_multi_socket_action: %s", curl_multi_strerror(rc));
        if (evtimer_add(c->timer, &tv) < 0)
            event_active(c->timer, EV_TIMEOUT, 1);
    }
    sweep_cancelled(c);
    check_info(c);
}

static void
on_sock_event(evutil_socket_t fd, short what, void *arg)
{
    int action =
        ((what & EV_READ) ? CURL_CSELECT_IN : 0) | ((what & EV_WRITE) ? CURL_CSELECT_OUT : 0);
    drive(arg, fd, action);
}

static void
on_timer_event(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    drive(arg, CURL_SOCKET_TIMEOUT, 0);
}

static void
sock_free(struct sockinfo *si)
{
    LIST_REMOVE(si, link);
    event_free(si->ev);
    core_free(si);
}

/* CURLMOPT_SOCKETFUNCTION: keep one persistent event per socket. */
static int
on_curl_socket(CURL *easy, curl_socket_t s, int what, void *ud, void *sockp)
{
    struct core_httpc *c = ud;
    struct sockinfo *si = sockp;
    (void)easy;

    if (what == CURL_POLL_REMOVE) {
        if (si)
            sock_free(si);
        return 0;
    }
    short kind = (short)(((what & CURL_POLL_IN) ? EV_READ : 0) |
                         ((what & CURL_POLL_OUT) ? EV_WRITE : 0) | EV_PERSIST);
    if (!si) {
        if (!(si = core_calloc(1, sizeof(*si))))
            goto fail;
        if (!(si->ev = event_new(c->base, s, kind, on_sock_event, c))) {
            core_free(si);
            goto fail;
        }
        si->fd = s;
        LIST_INSERT_HEAD(&c->socks, si, link);
        if (curl_multi_assign(c->multi, s, si) != CURLM_OK) {
            sock_free(si);
            goto fail;
        }
    } else {
        event_del(si->ev);
        if (event_assign(si->ev, c->base, s, kind, on_sock_event, c) < 0)
            goto fail;
    }
    if (event_add(si->ev, NULL) < 0)
        goto fail;
    return 0;
fail:
    /* Returning -1 would kill the whole multi handle: fail only the
     * transfer, from the sweep. */
    CORE_ERR("http: cannot watch socket %d", (int)s);
    char *priv = NULL;
    if (curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv) == CURLE_OK && priv) {
        plb_http_req *req = (plb_http_req *)(void *)priv;
        (void)httpc_req_abort(req, PLB_HTTP_E_LOCAL, "cannot watch the socket (out of memory)");
        req->failed = 1;
        c->sweep = 1;
        event_active(c->kick, 0, 0);
    }
    return 0;
}

/* CURLMOPT_TIMERFUNCTION: (re)arm or stop the one timer. */
static int
on_curl_timer(CURLM *multi, long timeout_ms, void *ud)
{
    struct core_httpc *c = ud;
    (void)multi;
    if (timeout_ms < 0) {
        evtimer_del(c->timer);
        return 0;
    }
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    /* -1 would kill the multi handle; fire now instead and curl asks again. */
    if (evtimer_add(c->timer, &tv) < 0)
        event_active(c->timer, EV_TIMEOUT, 1);
    return 0;
}

/* Start the requests queued before this run; later ones wait for the next. */
static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct core_httpc *c = arg;
    size_t budget = c->nqueued;
    (void)fd;
    (void)what;
    sweep_cancelled(c);
    while (budget-- > 0 && c->qhead) {
        plb_http_req *req = c->qhead;
        queue_unlink(c, req);
        if (req->resp.error) {
            req_finish(req);
            continue;
        }
        struct hostq *h = req->hq;
        if (h && !req->slot) {
            if (h->slots >= HTTPC_MAX_PER_HOST || h->whead) {
                /* every slot taken: wait for one, in arrival order */
                req->waiting = 1;
                reqq_push(&h->whead, &h->wtail, req);
                h->nwait++;
                c->nwaiting++;
                continue;
            }
            req->slot = 1;
            h->slots++;
        }
        CURLMcode rc = curl_multi_add_handle(c->multi, req->easy);
        if (rc != CURLM_OK) {
            req->resp.error = PLB_HTTP_E_LOCAL;
            httpc_set_text(req, "cannot start: %s", curl_multi_strerror(rc));
            req_finish(req);
            continue;
        }
        req->state = REQ_RUNNING;
    }
    if (c->qhead)
        event_active(c->kick, 0, 0);
}

/* ------------------------------------------------------------------------ */
/* Client.                                                                  */

struct core_httpc *
core_httpc_new(struct event_base *base)
{
    struct core_httpc *c = core_calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->base = base;
    if (!(c->multi = curl_multi_init()))
        goto fail;
    if (!(c->timer = evtimer_new(base, on_timer_event, c)))
        goto fail;
    if (!(c->kick = event_new(base, -1, 0, on_kick, c)))
        goto fail;
    if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, HTTPC_MAX_IDLE) != CURLM_OK)
        goto fail;
    return c;
fail:
    CORE_ERR("http: cannot create the client");
    core_httpc_free(c);
    return NULL;
}

void
core_httpc_free(struct core_httpc *c)
{
    if (!c)
        return;
    plb_http_req *req;
    while ((req = LIST_FIRST(&c->reqs))) {
        req->cancelled = 1;
        req_free(req);
    }
    /* Forget our socket events before curl closes its cached connections;
     * a late CURL_POLL_REMOVE then finds no sockinfo. */
    struct sockinfo *si;
    while ((si = LIST_FIRST(&c->socks))) {
        if (c->multi)
            (void)curl_multi_assign(c->multi, si->fd, NULL);
        sock_free(si);
    }
    if (c->multi)
        curl_multi_cleanup(c->multi);
    core_event_clear(&c->timer);
    core_event_clear(&c->kick);
    core_free(c);
}

size_t
core_httpc_active(const struct core_httpc *c)
{
    return c ? c->active : 0;
}

size_t
core_httpc_waiting(const struct core_httpc *c)
{
    return c ? c->nwaiting : 0;
}

size_t
core_httpc_connects(const struct core_httpc *c)
{
    return c ? c->connects : 0;
}

plb_http_req *
core_http_request(struct core_httpc *c, const struct plb_http_opts *o, int *err)
{
    plb_http_req *req = NULL;
    struct plb_http_opts full;
    int rc = -EINVAL, dummy;

    if (!err)
        err = &dummy;
    o = httpc_opts_full(o, &full);
    if (!c || !httpc_valid_opts(o))
        goto fail;
    if (!(req = core_calloc(1, sizeof(*req)))) {
        rc = -ENOMEM;
        goto fail;
    }
    req->c = c;
    req->state = REQ_QUEUED;
    req->https = strncasecmp(o->url, "https://", 8) == 0;
    req->mode = o->body_mode;
    req->max_body = o->max_body ? o->max_body : HTTPC_MAX_BODY_DEFAULT;
    req->on_data = o->on_data;
    req->done = o->done;
    req->arg = o->arg;
    if (!(req->easy = curl_easy_init())) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = httpc_setup_easy(req, o)) < 0)
        goto fail;
    if ((rc = httpc_setup_files(req, o)) < 0)
        goto fail;
    if (curl_easy_setopt(req->easy, CURLOPT_HTTPHEADER, req->headers) != CURLE_OK) {
        rc = -ENOMEM;
        goto fail;
    }
    if (req->mode == PLB_HTTP_BUFFER) {
        char *key = httpc_host_key(o->url, o->connect_to, &rc);
        if (!key)
            goto fail;
        req->hq = host_ref(c, key);
        core_free(key);
        if (!req->hq) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    /* Link it in and let the loop start it. */
    LIST_INSERT_HEAD(&c->reqs, req, link);
    c->active++;
    httpc_queue_push(c, req);
    event_active(c->kick, 0, 0);
    *err = 0;
    return req;
fail:
    req_release(req);
    *err = rc;
    return NULL;
}

void
core_http_cancel(plb_http_req *req)
{
    if (!req || req->cancelled)
        return;
    req->cancelled = 1;
    switch (req->state) {
    case REQ_IN_DONE:
        return; /* freed when done (or the final on_data) returns */
    case REQ_RUNNING:
        if (req->c->in_curl) {
            req->c->sweep = 1; /* curl forbids removal from its callbacks */
            return;
        }
        break;
    case REQ_QUEUED:
        break;
    }
    req_free(req);
}
