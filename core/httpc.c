/*
 * httpc: libcurl multi on the daemon's libevent loop. See httpc.h.
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
#include <fcntl.h>
#include <stddef.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "reactor.h"

#define HTTPC_CONNECT_MS_DEFAULT 10000
#define HTTPC_MAX_BODY_DEFAULT ((size_t)16 << 20)
#define HTTPC_MAX_TOKEN_FILE ((size_t)64 << 10)
#define HTTPC_MAX_PEM_FILE ((size_t)1 << 20)
#define HTTPC_MAX_HEADER_BYTES ((size_t)64 << 10)
#define HTTPC_LINE_KEEP ((size_t)64 << 10) /* partial-line buffer kept between lines */
#define HTTPC_MAX_PER_HOST 8               /* BUFFER requests running per host */
/* Idle connections kept for reuse. curl's default, four per transfer in
 * the multi handle, drops to a few just as a burst's first transfers end
 * together, and the next ones would open new connections. */
#define HTTPC_MAX_IDLE 32L

enum req_state {
    REQ_QUEUED,
    REQ_RUNNING,
    REQ_IN_DONE,
};

struct buf {
    char *p;
    size_t len, cap;
};

struct plb_http_resp {
    int status;
    enum plb_http_error error;
    char text[CURL_ERROR_SIZE + 128];
    struct buf body;    /* BUFFER mode */
    struct buf headers; /* "name\0value\0" pairs of the last response */
    double connect_time, total_time;
    int in_flight_at_close; /* a write sent before its fence closed */
};

struct hostq; /* see below */

struct plb_http_req {
    struct core_httpc *c;
    LIST_ENTRY(plb_http_req) link; /* c->reqs: every request of c */
    struct plb_http_req *qnext;    /* c's start queue, or its host's wait list */
    struct hostq *hq;              /* BUFFER requests: their host (a reference) */
    int slot;                      /* holds one of hq's slots */
    int waiting;                   /* QUEUED on hq's wait list, not c's queue */
    enum req_state state;
    int cancelled;
    int failed;                     /* the socket callback could not watch its socket */
    struct core_http_fence *fence;  /* a write of a fenced instance, or NULL */
    LIST_ENTRY(plb_http_req) flink; /* fence->writes */
    int sent;                       /* a connection began the request */
    int fenced;                     /* stopped by its fence before it was sent */
    int head;                       /* header lines: 0 or 2 (after a 1xx) a status line next, 1 the
                                     * fields, 3 a 1xx's fields */
    int https;
    int h2;                        /* TLS chose HTTP/2 (ALPN) for this request's connection */
    enum plb_http_error abort_err; /* why a callback stopped the transfer */
    const char *abort_text;
    CURL *easy;
    struct curl_slist *headers; /* may hold the bearer token: scrubbed */
    struct curl_slist *connect_to;
    enum plb_http_body_mode mode;
    size_t max_body;
    plb_http_data_cb on_data;
    plb_http_done_cb done;
    void *arg;
    struct buf line; /* LINES: the partial line */
    char errbuf[CURL_ERROR_SIZE];
    struct plb_http_resp resp;
};

/* One host's BUFFER requests: how many hold a slot, and who waits for one. */
struct hostq {
    struct hostq *next;
    char *key;    /* "scheme://host:port" or "...>connect_to" */
    size_t refs;  /* requests pointing here */
    size_t slots; /* requests holding a slot */
    plb_http_req *whead, *wtail;
    size_t nwait;
};

struct sockinfo {
    LIST_ENTRY(sockinfo) link; /* c->socks */
    struct event *ev;
    curl_socket_t fd;
};

struct core_httpc {
    struct event_base *base;
    CURLM *multi;
    struct event *timer; /* the one non-repeating curl timer */
    struct event *kick;  /* starts queued requests */
    LIST_HEAD(, plb_http_req) reqs;
    struct plb_http_req *qhead, *qtail;
    size_t nqueued;
    size_t active;
    struct hostq *hosts;
    size_t nwaiting; /* requests waiting for a host slot */
    size_t connects; /* connections opened, over every transfer */
    LIST_HEAD(, sockinfo) socks;
    int in_curl; /* inside curl_multi_socket_action */
    int sweep;   /* a running request was cancelled inside it */
};

/* ------------------------------------------------------------------------ */
/* Buffers and small files.                                                 */

/* Append n bytes to b keeping a NUL after them; the content may not exceed
 * limit bytes. 0, -E2BIG or -ENOMEM. */
static int
buf_append(struct buf *b, const char *d, size_t n, size_t limit)
{
    if (n > limit || b->len > limit - n)
        return -E2BIG;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        if (cap > limit + 1)
            cap = limit + 1;
        char *p = core_realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static void
buf_free(struct buf *b, int scrub)
{
    if (b->p && scrub)
        explicit_bzero(b->p, b->cap);
    core_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* Read the regular file path (at most max bytes) into *out (new,
 * NUL-terminated, length *len). 0 or -errno; -EAGAIN if it grew while read.
 * The O_NONBLOCK open keeps a FIFO from stalling the loop. */
static int
read_small_file(const char *path, size_t max, char **out, size_t *len)
{
    struct stat st;
    char *buf = NULL, extra;
    size_t n = 0, size;
    ssize_t r;
    int rc = -EINVAL, fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        goto fail;
    if ((size = (size_t)st.st_size) > max) {
        rc = -EFBIG;
        goto fail;
    }
    if (!(buf = core_malloc(size + 1))) {
        rc = -ENOMEM;
        goto fail;
    }
    while (n < size && ((r = read(fd, buf + n, size - n)) > 0 || (r < 0 && errno == EINTR)))
        n += r > 0 ? (size_t)r : 0;
    if (n < size || (r = read(fd, &extra, 1)) != 0) {
        rc = n < size || r > 0 ? -EAGAIN : -errno;
        goto fail;
    }
    buf[n] = '\0';
    close(fd);
    *out = buf;
    *len = n;
    return 0;
fail:
    if (buf) {
        explicit_bzero(buf, size);
        core_free(buf);
    }
    close(fd);
    return rc;
}

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

static void
queue_push(struct core_httpc *c, plb_http_req *req)
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
static void
host_unwait(struct core_httpc *c, plb_http_req *req)
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
    host_unwait(c, w);
    w->slot = 1;
    h->slots++;
    queue_push(c, w);
    event_active(c->kick, 0, 0);
}

/* Take req off its fence's list. */
static void
fence_unlink(plb_http_req *req)
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
    buf_free(&req->line, 0);
    buf_free(&req->resp.body, 0);
    buf_free(&req->resp.headers, 0);
    core_free(req);
}

/* Unlink req from everything, remove it from curl and free it. */
static void
req_free(plb_http_req *req)
{
    struct core_httpc *c = req->c;
    fence_unlink(req);
    if (req->state == REQ_QUEUED && req->waiting)
        host_unwait(c, req);
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

static void set_text(plb_http_req *req, const char *fmt, ...) PLB_PRINTF(2, 3);

static void
set_text(plb_http_req *req, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(req->resp.text, sizeof(req->resp.text), fmt, ap);
    va_end(ap);
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

/* Stop the transfer from a curl callback for this reason. */
static size_t
req_abort(plb_http_req *req, enum plb_http_error err, const char *text)
{
    if (!req->abort_err) {
        req->abort_err = err;
        req->abort_text = text;
    }
    return 0;
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
            (void)req_abort(req, PLB_HTTP_E_ABORTED, "aborted by on_data");
    }
    if (req->fenced) {
        r->error = PLB_HTTP_E_FENCED;
        set_text(req, "not sent: the instance's gate closed");
    } else if (req->abort_err && (res == CURLE_WRITE_ERROR || res == CURLE_OK)) {
        r->error = req->abort_err;
        set_text(req, "%s", req->abort_text);
    } else if (res != CURLE_OK) {
        r->error = classify(req, res);
        set_text(req, "%s", req->errbuf[0] ? req->errbuf : curl_easy_strerror(res));
    }
    req_finish(req);
}

/* ------------------------------------------------------------------------ */
/* curl callbacks.                                                          */

static size_t
lines_feed(plb_http_req *req, const char *p, size_t n)
{
    size_t total = n;
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        if (!nl) {
            int rc = buf_append(&req->line, p, n, req->max_body);
            if (rc == -E2BIG)
                return req_abort(req, PLB_HTTP_E_TOO_LARGE, "line over max_body");
            if (rc < 0)
                return req_abort(req, PLB_HTTP_E_LOCAL, "out of memory");
            break;
        }
        size_t k = (size_t)(nl - p);
        const char *d = p;
        size_t dlen = k;
        if (req->line.len > 0) {
            int rc = buf_append(&req->line, p, k, req->max_body);
            if (rc == -E2BIG)
                return req_abort(req, PLB_HTTP_E_TOO_LARGE, "line over max_body");
            if (rc < 0)
                return req_abort(req, PLB_HTTP_E_LOCAL, "out of memory");
            d = req->line.p;
            dlen = req->line.len;
        } else if (k > req->max_body) {
            return req_abort(req, PLB_HTTP_E_TOO_LARGE, "line over max_body");
        }
        int stop = req->on_data(req, d, dlen, req->arg);
        req->line.len = 0;
        if (req->line.cap > HTTPC_LINE_KEEP)
            buf_free(&req->line, 0); /* give back what one long line took */
        if (stop)
            return req_abort(req, PLB_HTTP_E_ABORTED, "aborted by on_data");
        if (req->cancelled)
            return 0;
        p = nl + 1;
        n -= k + 1;
    }
    return total;
}

static size_t
on_write(char *p, size_t size, size_t nmemb, void *ud)
{
    plb_http_req *req = ud;
    size_t n = size * nmemb;
    int rc;

    if (req->cancelled)
        return 0;
    if (n == 0)
        return 0;
    switch (req->mode) {
    case PLB_HTTP_BUFFER:
        rc = buf_append(&req->resp.body, p, n, req->max_body);
        if (rc == -E2BIG)
            return req_abort(req, PLB_HTTP_E_TOO_LARGE, "body over max_body");
        if (rc < 0)
            return req_abort(req, PLB_HTTP_E_LOCAL, "out of memory");
        return n;
    case PLB_HTTP_CHUNKS:
        if (req->on_data(req, p, n, req->arg))
            return req_abort(req, PLB_HTTP_E_ABORTED, "aborted by on_data");
        return req->cancelled ? 0 : n;
    case PLB_HTTP_LINES:
        return lines_feed(req, p, n);
    }
    return 0;
}

/* The status code of an HTTP status line ("HTTP/1.1 200 OK", or "HTTP/2 404"
 * where h2 says the connection speaks HTTP/2), or -1 when the len bytes at p
 * are none. "HTTP/2 NNN" is the line libcurl writes for an HTTP/2 answer's
 * :status; on an HTTP/1 connection it is a peer's invalid version, which
 * libcurl's parser lets through. HTTP/3 is never asked for. Pure. */
static int
status_line_code(const char *p, size_t len, int h2)
{
    size_t i;
    if (len >= 9 && memcmp(p, "HTTP/1.", 7) == 0 && (p[7] == '0' || p[7] == '1'))
        i = 8;
    else if (h2 && len >= 7 && memcmp(p, "HTTP/2", 6) == 0)
        i = 6;
    else
        return -1;
    if (len < i + 4 || p[i] != ' ')
        return -1;
    int code = 0;
    for (size_t k = i + 1; k < i + 4; k++) {
        if (p[k] < '0' || p[k] > '9')
            return -1;
        code = code * 10 + (p[k] - '0');
    }
    if (code < 100 || (len > i + 4 && p[i + 4] != ' '))
        return -1;
    return code;
}

static size_t
on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    plb_http_req *req = ud;
    struct buf *h = &req->resp.headers;
    size_t n = size * nmemb, len = n;

    while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r'))
        len--;
    if (req->head == 0 || req->head == 2 || (len >= 5 && strncasecmp(p, "HTTP/", 5) == 0)) {
        /* A status line as RFC 9112 writes it (or RFC 9113's through curl),
         * also the next response's after a 1xx, a proxy's CONNECT answer or
         * a redirect. libcurl reads some lines that are none as HTTP/1.0
         * 200; a line that starts "HTTP/" in any case (libcurl takes
         * "HTTp/1.1 200" for a status line) cannot be a field ('/' is no
         * token character), so one that is no status line as RFC 9112
         * spells it, case included, is refused too. */
        int code = status_line_code(p, len, req->h2);
        if (code < 0)
            return req_abort(req, PLB_HTTP_E_PROTOCOL, "malformed status line");
        h->len = 0; /* a new response (after 1xx): forget the old headers */
        req->head = code < 200 ? 3 : 1;
        return n;
    }
    if (req->head == 3 && n > 0 && (p[0] == '\r' || p[0] == '\n')) {
        /* The 1xx ended: a status line comes next. libcurl ends a header
         * block at any line that starts with CR or LF, blank or not. */
        req->head = 2;
        return n;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon || colon == p)
        return n; /* the blank end line, folded or odd lines */
    size_t nlen = (size_t)(colon - p);
    const char *v = colon + 1, *end = p + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    int rc = buf_append(h, p, nlen, HTTPC_MAX_HEADER_BYTES);
    if (rc == 0)
        rc = buf_append(h, "", 1, HTTPC_MAX_HEADER_BYTES);
    if (rc == 0)
        rc = buf_append(h, v, (size_t)(end - v), HTTPC_MAX_HEADER_BYTES);
    if (rc == 0)
        rc = buf_append(h, "", 1, HTTPC_MAX_HEADER_BYTES);
    if (rc == -E2BIG)
        return req_abort(req, PLB_HTTP_E_PROTOCOL, "response headers over 64 KiB");
    if (rc < 0)
        return req_abort(req, PLB_HTTP_E_LOCAL, "out of memory");
    return n;
}

/* Whether the TLS connection under e agreed on HTTP/2 by ALPN: the one way
 * an answer can be HTTP/2 (no h2c upgrade or prior knowledge is asked). */
static int
tls_chose_h2(CURL *e)
{
    struct curl_tlssessioninfo *ti = NULL;
    const unsigned char *proto = NULL;
    unsigned int plen = 0;

    if (curl_easy_getinfo(e, CURLINFO_TLS_SSL_PTR, &ti) != CURLE_OK || !ti ||
        ti->backend != CURLSSLBACKEND_OPENSSL || !ti->internals)
        return 0;
    SSL_get0_alpn_selected(ti->internals, &proto, &plen);
    return plen == 2 && memcmp(proto, "h2", 2) == 0;
}

/* CURLOPT_PREREQFUNCTION: a connection is ready and curl is about to send
 * the request. One cancelled or stopped by its fence in the meantime (from
 * a callback inside this socket_action: the sweep removes it afterwards)
 * is not sent. It notes whether the connection speaks HTTP/2. */
static int
on_prereq(void *ud, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
    plb_http_req *req = ud;
    (void)primary_ip;
    (void)local_ip;
    (void)primary_port;
    (void)local_port;
    if (req->fenced || req->cancelled)
        return CURL_PREREQFUNC_ABORT;
    req->h2 = req->https && tls_chose_h2(req->easy);
    req->sent = 1;
    return CURL_PREREQFUNC_OK;
}

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
        (void)req_abort(req, PLB_HTTP_E_LOCAL, "cannot watch the socket (out of memory)");
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
            set_text(req, "cannot start: %s", curl_multi_strerror(rc));
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

/* The per-host cap's key of a request: scheme, host and port of url, and
 * connect_to. New string, or NULL on ENOMEM; -EINVAL in *rc when curl
 * cannot parse the URL. */
static char *
host_key(const char *url, const char *connect_to, int *rc)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *key = NULL;
    CURLUcode uc;
    *rc = -ENOMEM;
    if (!u)
        return NULL;
    if ((uc = curl_url_set(u, CURLUPART_URL, url, 0)) != CURLUE_OK ||
        (uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0)) != CURLUE_OK ||
        (uc = curl_url_get(u, CURLUPART_HOST, &host, 0)) != CURLUE_OK ||
        (uc = curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) != CURLUE_OK) {
        if (uc != CURLUE_OUT_OF_MEMORY)
            *rc = -EINVAL;
        goto out;
    }
    key = connect_to ? core_asprintf("%s://%s:%s>%s", scheme, host, port, connect_to)
                     : core_asprintf("%s://%s:%s", scheme, host, port);
    if (key)
        *rc = 0;
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return key;
}

/* ------------------------------------------------------------------------ */
/* Request set-up.                                                          */

static int
add_header(plb_http_req *req, const char *line)
{
    struct curl_slist *l = curl_slist_append(req->headers, line);
    if (!l)
        return -ENOMEM;
    req->headers = l;
    return 0;
}

static int
has_header(const struct plb_http_opts *o, const char *name)
{
    size_t n = strlen(name);
    for (const char *const *h = o->headers; h && *h; h++)
        if (strncasecmp(*h, name, n) == 0 && (*h)[n] == ':')
            return 1;
    return 0;
}

/* "host:port" with a non-empty host and a port in 1..65535. */
static int
valid_host_port(const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1])
        return 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    return *end == '\0' && port > 0 && port <= 65535;
}

/* Point SNI and verification at o->tls_server_name and/or the TCP connection
 * at o->connect_to. 0 or -errno. */
static int
setup_routing(plb_http_req *req, const struct plb_http_opts *o)
{
    CURLU *u = NULL;
    char *host = NULL, *port = NULL, *eport = NULL, *url = NULL, *line = NULL;
    CURLUcode uc = CURLUE_OK;
    int rc = -EINVAL;

    if (o->connect_to && !valid_host_port(o->connect_to))
        return -EINVAL;
    if (!o->tls_server_name) {
        if (!o->connect_to)
            return 0;
        /* Any host and port of this request goes to connect_to. */
        if (!(line = core_asprintf("::%s", o->connect_to)))
            return -ENOMEM;
    } else {
        if (!*o->tls_server_name || strpbrk(o->tls_server_name, ":/@[] \r\n"))
            return -EINVAL;
        if (!(u = curl_url()))
            return -ENOMEM;
        if ((uc = curl_url_set(u, CURLUPART_URL, o->url, 0)) != CURLUE_OK ||
            (uc = curl_url_get(u, CURLUPART_HOST, &host, 0)) != CURLUE_OK ||
            (uc = curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) != CURLUE_OK)
            goto fail;
        uc = curl_url_get(u, CURLUPART_PORT, &eport, 0); /* explicit port or none */
        if (uc != CURLUE_OK && uc != CURLUE_NO_PORT)
            goto fail;
        uc = CURLUE_OK;
        /* The Host header stays the URL's, as with any other client. */
        if (!has_header(o, "Host")) {
            char *h =
                eport ? core_asprintf("Host: %s:%s", host, eport) : core_asprintf("Host: %s", host);
            if (!h || add_header(req, h) < 0) {
                core_free(h);
                rc = -ENOMEM;
                goto fail;
            }
            core_free(h);
        }
        if ((uc = curl_url_set(u, CURLUPART_HOST, o->tls_server_name, 0)) != CURLUE_OK ||
            (uc = curl_url_get(u, CURLUPART_URL, &url, 0)) != CURLUE_OK)
            goto fail;
        line = o->connect_to ? core_asprintf("%s:%s:%s", o->tls_server_name, port, o->connect_to)
                             : core_asprintf("%s:%s:%s:%s", o->tls_server_name, port, host, port);
        if (!line) {
            rc = -ENOMEM;
            goto fail;
        }
        if (curl_easy_setopt(req->easy, CURLOPT_URL, url) != CURLE_OK) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    struct curl_slist *l = curl_slist_append(NULL, line);
    if (!l) {
        rc = -ENOMEM;
        goto fail;
    }
    req->connect_to = l;
    rc = curl_easy_setopt(req->easy, CURLOPT_CONNECT_TO, l) == CURLE_OK ? 0 : -ENOMEM;
fail:
    if (uc == CURLUE_OUT_OF_MEMORY)
        rc = -ENOMEM;
    core_free(line);
    curl_free(url);
    curl_free(eport);
    curl_free(port);
    curl_free(host);
    curl_url_cleanup(u);
    return rc;
}

static int
setup_method(plb_http_req *req, const struct plb_http_opts *o)
{
    CURL *e = req->easy;
    const char *m = o->method ? o->method : "GET";
    int ok = 1;
    if (!*m || strpbrk(m, " \t\r\n"))
        return -EINVAL;
    if (o->body || o->body_len) {
        if (!o->body)
            return -EINVAL;
        ok =
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len) == CURLE_OK &&
            curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, o->body) == CURLE_OK;
        if (ok && strcmp(m, "POST") != 0)
            ok = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m) == CURLE_OK;
    } else if (strcmp(m, "POST") == 0) {
        ok = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, "") == CURLE_OK;
    } else if (strcmp(m, "HEAD") == 0) {
        ok = curl_easy_setopt(e, CURLOPT_NOBODY, 1L) == CURLE_OK;
    } else if (strcmp(m, "GET") != 0) {
        ok = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m) == CURLE_OK;
    }
    return ok ? 0 : -ENOMEM;
}

/* Validate a token and add it as the Authorization header. 0, -EINVAL or
 * -ENOMEM; tok is left alone. */
static int
add_bearer(plb_http_req *req, char *tok, size_t len)
{
    while (len > 0 && strchr(" \t\r\n", tok[len - 1]))
        len--;
    tok[len] = '\0';
    if (len == 0 || strpbrk(tok, "\r\n") || strlen(tok) != len)
        return -EINVAL;
    char *h = core_asprintf("Authorization: Bearer %s", tok);
    if (!h)
        return -ENOMEM;
    int rc = add_header(req, h);
    explicit_bzero(h, strlen(h));
    core_free(h);
    return rc;
}

static int
set_blob(CURL *e, CURLoption opt, CURLoption type_opt, char *pem, size_t len)
{
    struct curl_blob b = {.data = pem, .len = len, .flags = CURL_BLOB_COPY};
    if (curl_easy_setopt(e, opt, &b) != CURLE_OK)
        return -ENOMEM;
    if (type_opt && curl_easy_setopt(e, type_opt, "PEM") != CURLE_OK)
        return -ENOMEM;
    return 0;
}

/* Read path and hand it to curl as the PEM blob opt (0 or -errno). */
static int
load_pem(plb_http_req *req, const char *path, CURLoption opt, CURLoption type_opt)
{
    char *data;
    size_t len;
    int rc = read_small_file(path, HTTPC_MAX_PEM_FILE, &data, &len);
    if (rc < 0)
        return rc;
    rc = set_blob(req->easy, opt, type_opt, data, len);
    explicit_bzero(data, len);
    core_free(data);
    return rc;
}

/* Read the files o names into the request. 0, -ENOMEM (the request fails
 * to start) or 1 when a file is unusable (req->resp has the local error). */
static int
setup_files(plb_http_req *req, const struct plb_http_opts *o)
{
    const char *path = o->bearer_token_file;
    char *data;
    size_t len;
    int rc = 0;

    if (path && (rc = read_small_file(path, HTTPC_MAX_TOKEN_FILE, &data, &len)) == 0) {
        rc = add_bearer(req, data, len);
        explicit_bzero(data, len);
        core_free(data);
    }
    if (rc == 0 && (path = o->cert_file))
        rc = load_pem(req, path, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERTTYPE);
    if (rc == 0 && (path = o->key_file))
        rc = load_pem(req, path, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEYTYPE);
    if (rc == 0 || rc == -ENOMEM)
        return rc;
    req->resp.error = PLB_HTTP_E_LOCAL;
    if (path == o->bearer_token_file && rc == -EINVAL)
        set_text(req, "%s: empty or not a bearer token", path);
    else
        set_text(req, "%s: %s", path, strerror(-rc));
    return 1;
}

/* Whether libcurl's TLS is OpenSSL, whose connection tls_chose_h2 reads. */
static int
curl_tls_is_openssl(void)
{
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    return v && v->ssl_version && strncmp(v->ssl_version, "OpenSSL/", 8) == 0;
}

/* Everything but files. 0 or -errno. */
static int
setup_easy(plb_http_req *req, const struct plb_http_opts *o)
{
    CURL *e = req->easy;
    int rc;
    long cto = o->connect_timeout_ms ? (long)o->connect_timeout_ms : HTTPC_CONNECT_MS_DEFAULT;

    if (curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)(void *)req) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_URL, o->url) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->errbuf) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PROXY, "") != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEDATA, req) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_HEADERDATA, req) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PREREQDATA, req) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, cto) != CURLE_OK ||
        /* Long watches: notice a peer that vanished without a FIN. */
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms) != CURLE_OK)
        return -ENOMEM;
    /* Neither an idle connection nor a running HTTP/2 one is taken, and
     * this one is closed after the answer, not kept for the next. */
    if (o->fresh_connection && (curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
                                curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK))
        return -ENOMEM;
    /* HTTP/2 only where tls_chose_h2 can tell it from HTTP/1. */
    if (req->https && !curl_tls_is_openssl() &&
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1) != CURLE_OK)
        return -ENOMEM;
    if ((rc = setup_method(req, o)) < 0)
        return rc;
    if ((rc = setup_routing(req, o)) < 0)
        return rc;
    if (o->ca_file || o->ca_pem) {
        /* Only the given bundle, not the system store beside it. */
        if (curl_easy_setopt(e, CURLOPT_CAPATH, NULL) != CURLE_OK)
            return -ENOMEM;
        if (o->ca_file && curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file) != CURLE_OK)
            return -ENOMEM;
        if (o->ca_pem) {
            if (curl_easy_setopt(e, CURLOPT_CAINFO, NULL) != CURLE_OK ||
                set_blob(e, CURLOPT_CAINFO_BLOB, 0, (char *)(uintptr_t)o->ca_pem,
                         strlen(o->ca_pem)) < 0)
                return -ENOMEM;
        }
    }
    if (o->insecure_skip_verify && (curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L) != CURLE_OK ||
                                    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L) != CURLE_OK))
        return -ENOMEM;
    if (o->cert_pem && set_blob(e, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERTTYPE,
                                (char *)(uintptr_t)o->cert_pem, strlen(o->cert_pem)) < 0)
        return -ENOMEM;
    if (o->key_pem && set_blob(e, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEYTYPE,
                               (char *)(uintptr_t)o->key_pem, strlen(o->key_pem)) < 0)
        return -ENOMEM;
    for (const char *const *h = o->headers; h && *h; h++) {
        if (strpbrk(*h, "\r\n") || !strchr(*h, ':'))
            return -EINVAL;
        if ((rc = add_header(req, *h)) < 0)
            return rc;
    }
    if (!has_header(o, "Expect") && (rc = add_header(req, "Expect:")) < 0)
        return rc;
    if (o->bearer_token) {
        char *tok = core_strdup(o->bearer_token);
        if (!tok)
            return -ENOMEM;
        size_t len = strlen(tok);
        rc = add_bearer(req, tok, len);
        explicit_bzero(tok, len);
        core_free(tok);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The size of the options a 3.0 module passes: every field up to arg. */
#define HTTPC_OPTS_3_0_SIZE (offsetof(struct plb_http_opts, arg) + sizeof(void *))

/* A size some version of the options has: 3.0's, or at least ours. */
static int
opts_size_ok(size_t size)
{
    return size == HTTPC_OPTS_3_0_SIZE || size >= sizeof(struct plb_http_opts);
}

/* o in a structure of the daemon's size: fields beyond o->size zero. Returns full, or NULL when
 * o is NULL or of no version's size. */
static const struct plb_http_opts *
opts_full(const struct plb_http_opts *o, struct plb_http_opts *full)
{
    if (!o || !opts_size_ok(o->size))
        return NULL;
    memset(full, 0, sizeof(*full));
    memcpy(full, o, o->size < sizeof(*full) ? o->size : sizeof(*full));
    full->size = sizeof(*full);
    return full;
}

static int
valid_opts(const struct plb_http_opts *o)
{
    if (!o || !o->url || !o->done)
        return 0;
    if (strncasecmp(o->url, "http://", 7) != 0 && strncasecmp(o->url, "https://", 8) != 0)
        return 0;
    switch (o->body_mode) {
    case PLB_HTTP_BUFFER:
        return 1;
    case PLB_HTTP_CHUNKS:
    case PLB_HTTP_LINES:
        return o->on_data != NULL;
    }
    return 0;
}

plb_http_req *
core_http_request(struct core_httpc *c, const struct plb_http_opts *o, int *err)
{
    plb_http_req *req = NULL;
    struct plb_http_opts full;
    int rc = -EINVAL, dummy;

    if (!err)
        err = &dummy;
    o = opts_full(o, &full);
    if (!c || !valid_opts(o))
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
    if ((rc = setup_easy(req, o)) < 0)
        goto fail;
    if ((rc = setup_files(req, o)) < 0)
        goto fail;
    if (curl_easy_setopt(req->easy, CURLOPT_HTTPHEADER, req->headers) != CURLE_OK) {
        rc = -ENOMEM;
        goto fail;
    }
    if (req->mode == PLB_HTTP_BUFFER) {
        char *key = host_key(o->url, o->connect_to, &rc);
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
    queue_push(c, req);
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

/* ------------------------------------------------------------------------ */
/* Fences.                                                                  */

static int
is_write(const char *method)
{
    return method && strcasecmp(method, "GET") != 0 && strcasecmp(method, "HEAD") != 0;
}

plb_http_req *
core_http_request_fenced(struct core_httpc *c, const struct plb_http_opts *o,
                         struct core_http_fence *fence, int *err)
{
    int dummy;
    if (!err)
        err = &dummy;
    if (!fence || !o || !opts_size_ok(o->size) || !is_write(o->method))
        return core_http_request(c, o, err);
    if (!fence->open) {
        *err = -EPERM;
        return NULL;
    }
    plb_http_req *req = core_http_request(c, o, err);
    if (!req)
        return NULL;
    req->fence = fence;
    LIST_INSERT_HEAD(&fence->writes, req, flink);
    return req;
}

/* Stop req, not yet sent, for good: done reports PLB_HTTP_E_FENCED from
 * the loop. */
static void
fence_stop(plb_http_req *req)
{
    struct core_httpc *c = req->c;
    req->fenced = 1;
    switch (req->state) {
    case REQ_QUEUED:
        if (req->waiting) {
            host_unwait(c, req);
            queue_push(c, req);
        }
        req->resp.error = PLB_HTTP_E_FENCED; /* on_kick finishes it */
        set_text(req, "not sent: the instance's gate closed");
        break;
    case REQ_RUNNING:
        req->failed = 1; /* the sweep removes it from curl */
        c->sweep = 1;
        break;
    case REQ_IN_DONE:
        return;
    }
    event_active(c->kick, 0, 0);
}

size_t
core_http_fence_close(struct core_http_fence *f, const char *inst, const char *mod)
{
    size_t sent = 0;
    f->open = 0;
    for (plb_http_req *req = LIST_FIRST(&f->writes); req; req = LIST_NEXT(req, flink)) {
        if (req->cancelled || req->fenced || req->state == REQ_IN_DONE)
            continue;
        if (req->sent) {
            char *url = NULL, *method = NULL;
            (void)curl_easy_getinfo(req->easy, CURLINFO_EFFECTIVE_URL, &url);
            (void)curl_easy_getinfo(req->easy, CURLINFO_EFFECTIVE_METHOD, &method);
            core_log(PLB_LOG_WARN, inst, mod,
                     "write in flight at gate close: %s %s (sent before the gate closed; its "
                     "completion says in_flight_at_close)",
                     method ? method : "?", url ? url : "?");
            req->resp.in_flight_at_close = 1;
            sent++;
        } else {
            fence_stop(req);
        }
    }
    return sent;
}

void
core_http_fence_open(struct core_http_fence *f)
{
    f->open = 1;
}

void
core_http_fence_detach(struct core_http_fence *f)
{
    while (!LIST_EMPTY(&f->writes))
        fence_unlink(LIST_FIRST(&f->writes));
}

/* ------------------------------------------------------------------------ */
/* Response accessors.                                                      */

int
core_http_resp_status(const plb_http_resp *r)
{
    return r ? r->status : 0;
}

enum plb_http_error
core_http_resp_error(const plb_http_resp *r)
{
    return r ? r->error : PLB_HTTP_E_LOCAL;
}

const char *
core_http_resp_error_text(const plb_http_resp *r)
{
    return r ? r->text : "";
}

const char *
core_http_resp_body(const plb_http_resp *r, size_t *len)
{
    if (len)
        *len = r && r->body.p ? r->body.len : 0;
    return r && r->body.p ? r->body.p : "";
}

const char *
core_http_resp_header(const plb_http_resp *r, const char *name)
{
    const char *found = NULL;
    if (!r || !name || !r->headers.p)
        return NULL;
    const char *p = r->headers.p, *end = p + r->headers.len;
    while (p < end) {
        const char *v = p + strlen(p) + 1;
        if (strcasecmp(p, name) == 0)
            found = v;
        p = v + strlen(v) + 1;
    }
    return found;
}

double
core_http_resp_connect_time(const plb_http_resp *r)
{
    return r ? r->connect_time : 0;
}

double
core_http_resp_total_time(const plb_http_resp *r)
{
    return r ? r->total_time : 0;
}

int
core_http_resp_in_flight_at_close(const plb_http_resp *r)
{
    return r ? r->in_flight_at_close : 0;
}
