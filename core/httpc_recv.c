/*
 * httpc_recv.c: what comes back for a request of the HTTP client (see
 * httpc_int.h): curl's write, header and pre-request callbacks, which take
 * the status line (as RFC 9112 writes it, or HTTP/2's where ALPN chose h2),
 * the header fields and the body in the request's mode, and the response
 * accessors. Calls no other file of the client.
 */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "httpc_int.h"

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

void
httpc_buf_free(struct buf *b, int scrub)
{
    if (b->p && scrub)
        explicit_bzero(b->p, b->cap);
    core_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

void
httpc_set_text(plb_http_req *req, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(req->resp.text, sizeof(req->resp.text), fmt, ap);
    va_end(ap);
}

/* Stop the transfer from a curl callback for this reason. */
size_t
httpc_req_abort(plb_http_req *req, enum plb_http_error err, const char *text)
{
    if (!req->abort_err) {
        req->abort_err = err;
        req->abort_text = text;
    }
    return 0;
}

static size_t
lines_feed(plb_http_req *req, const char *p, size_t n)
{
    size_t total = n;
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        if (!nl) {
            int rc = buf_append(&req->line, p, n, req->max_body);
            if (rc == -E2BIG)
                return httpc_req_abort(req, PLB_HTTP_E_TOO_LARGE, "line over max_body");
            if (rc < 0)
                return httpc_req_abort(req, PLB_HTTP_E_LOCAL, "out of memory");
            break;
        }
        size_t k = (size_t)(nl - p);
        const char *d = p;
        size_t dlen = k;
        if (req->line.len > 0) {
            int rc = buf_append(&req->line, p, k, req->max_body);
            if (rc == -E2BIG)
                return httpc_req_abort(req, PLB_HTTP_E_TOO_LARGE, "line over max_body");
            if (rc < 0)
                return httpc_req_abort(req, PLB_HTTP_E_LOCAL, "out of memory");
            d = req->line.p;
            dlen = req->line.len;
        } else if (k > req->max_body) {
            return httpc_req_abort(req, PLB_HTTP_E_TOO_LARGE, "line over max_body");
        }
        int stop = req->on_data(req, d, dlen, req->arg);
        req->line.len = 0;
        if (req->line.cap > HTTPC_LINE_KEEP)
            httpc_buf_free(&req->line, 0); /* give back what one long line took */
        if (stop)
            return httpc_req_abort(req, PLB_HTTP_E_ABORTED, "aborted by on_data");
        if (req->cancelled)
            return 0;
        p = nl + 1;
        n -= k + 1;
    }
    return total;
}

size_t
httpc_on_write(char *p, size_t size, size_t nmemb, void *ud)
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
            return httpc_req_abort(req, PLB_HTTP_E_TOO_LARGE, "body over max_body");
        if (rc < 0)
            return httpc_req_abort(req, PLB_HTTP_E_LOCAL, "out of memory");
        return n;
    case PLB_HTTP_CHUNKS:
        if (req->on_data(req, p, n, req->arg))
            return httpc_req_abort(req, PLB_HTTP_E_ABORTED, "aborted by on_data");
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

size_t
httpc_on_header(char *p, size_t size, size_t nmemb, void *ud)
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
            return httpc_req_abort(req, PLB_HTTP_E_PROTOCOL, "malformed status line");
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
        return httpc_req_abort(req, PLB_HTTP_E_PROTOCOL, "response headers over 64 KiB");
    if (rc < 0)
        return httpc_req_abort(req, PLB_HTTP_E_LOCAL, "out of memory");
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
int
httpc_on_prereq(void *ud, char *primary_ip, char *local_ip, int primary_port, int local_port)
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
