/*
 * httpd: small HTTP/1.1 servers on evhttp.
 *
 * Routing is ours (one evhttp generic callback, longest-match over exact and
 * prefix routes) so that every method reaches the handler and unrouted paths
 * get a plain 404.
 *
 * Exchanges answered later. evhttp keeps an unanswered request on its
 * connection. Two things can happen before the answer:
 *   - more bytes from the client. In libevent 2.1.8's source, evhttp_read_cb
 *     treats bytes arriving in that state as fatal (event_errx); 2.1.12 (as
 *     in Debian 12) does not read then, as the tests show. So as not to
 *     depend on the release, we stop reading the connection ourselves while
 *     an answer is outstanding; evhttp reads again after the reply
 *     (pipelined requests then follow in order). Either way a client that
 *     hangs up is noticed when the reply is written, and libevent cleans
 *     that connection up by itself.
 *   - the connection is freed (server freed, or a network error): evhttp
 *     calls the connection's close callback first. A request still queued on
 *     the connection is freed by libevent right after; one it detached
 *     (error while the user holds it) is left to us, and we free it there.
 *     Either way the exchange forgets the request and a later reply only
 *     frees the exchange.
 *
 * Bounded work. evhttp accepts in a loop until accept() fails and keeps
 * every connection until its 30 s timeout, and a byte every few seconds
 * resets that timeout; so a flood of connections would keep the loop busy
 * accepting and hold descriptors for ever. Hence:
 *   - at most HTTPD_ACCEPT_BATCH accepts per wakeup: the listener is
 *     disabled after that many and re-enabled from a zero timer, so every
 *     other ready event (a Lease renewal, a proxied byte) runs in between;
 *   - every connection is tracked in a struct hconn (made in evhttp's
 *     bufferevent callback, which runs for each accepted socket, and
 *     adopted right after that accept: the bufferevent's callback argument
 *     is then its evhttp_connection, whose close callback is ours);
 *   - a connection waiting for a request (just accepted, or between
 *     keep-alive requests) must deliver the whole request head within the
 *     request timeout of starting to wait, however slowly the bytes come;
 *     the idle list is in order of that start, so one timer serves all;
 *   - at most max_conns connections: one over that closes the connection
 *     that has waited for a request the longest (a newcomer is the latest,
 *     so a fresh client is served while idle ones are dropped); when every
 *     other connection has a request in a handler, the newcomer gets a
 *     canned 503 written straight to the socket and is closed.
 */
#include "httpd.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <stdio.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "listener.h"
#include "log.h"
#include "reactor.h"

/* Pause after accept() fails for lack of resources, and how often to log. */
#define HTTPD_RETRY_MS 100
#define HTTPD_LOG_EVERY_MS 60000
/* Accepts per wakeup of the listener. */
#define HTTPD_ACCEPT_BATCH 16

static const char refuse_503[] = "HTTP/1.1 503 Service Unavailable\r\n"
                                 "Content-Type: text/plain; charset=utf-8\r\n"
                                 "Content-Length: 17\r\n"
                                 "Connection: close\r\n\r\n"
                                 "too many clients\n";

/* One accepted connection (see the top). */
struct hconn {
    plb_http_server *srv;
    struct bufferevent *bev;         /* referenced until adopted */
    struct evhttp_connection *evcon; /* NULL until adopted */
    int64_t idle_since_ms;           /* waiting for a request since */
    int busy;                        /* requests in handlers, unanswered */
    TAILQ_ENTRY(hconn) link;         /* in srv's adopting, idle or busy list */
};

TAILQ_HEAD(hlist, hconn);

struct route {
    char *path;
    size_t len;
    int prefix; /* path ends in '/' */
    plb_http_handler h;
    void *arg;
};

struct plb_http_server {
    struct evhttp *http;
    struct evconnlistener *lev; /* owned by http once bound */
    struct event *retry;        /* ends an accept back-off: pending during it */
    struct route *routes;
    size_t nroutes;
    LIST_HEAD(, plb_http_exchange) pending; /* unanswered exchanges */
    plb_http_exchange *dispatching;         /* whose handler is running */
    plb_http_server *next_server;           /* servers list, for the accept error cb */
    struct event *resume;                   /* ends an accept batch: pending after it */
    struct event *adopt;                    /* adopts the batch's new connections */
    struct event *sweep;                    /* closes connections past the request timeout */
    struct hlist adopting, idle, busy_conns;
    int nadopting;
    struct core_http_stats st;
    int64_t request_timeout_ms;
    int max_conns;
    int batch; /* accepts since the listener was last enabled */
    int64_t last_log_ms;
    int port;
    int busy; /* handlers running */
    int dead; /* freed while busy */
    char name[CORE_SOCKADDR_STRLEN];
};

struct plb_http_exchange {
    plb_http_server *srv;
    struct hconn *hc;                /* NULL once its connection closed */
    struct evhttp_request *req;      /* NULL once libevent dropped it */
    struct evhttp_connection *evcon; /* NULL once closed */
    const char *method;
    const char *query;                  /* points into text */
    LIST_ENTRY(plb_http_exchange) link; /* srv->pending */
    char text[];                        /* path NUL query NUL */
};

/* Every live server; the accept error callback only gets the evconnlistener. */
static plb_http_server *servers;

/* ------------------------------------------------------------------------ */
/* Connections                                                              */

static struct hlist *
hconn_list(struct hconn *c)
{
    if (!c->evcon)
        return &c->srv->adopting;
    return c->busy ? &c->srv->busy_conns : &c->srv->idle;
}

/* Arm the sweep for the connection that has waited longest, if it is not
 * armed already (it re-arms itself when it fires). */
static void
sweep_arm(plb_http_server *srv)
{
    struct hconn *c = TAILQ_FIRST(&srv->idle);
    int64_t left;
    struct timeval tv;

    if (!c || evtimer_pending(srv->sweep, NULL))
        return;
    left = c->idle_since_ms + srv->request_timeout_ms - core_now_ms();
    if (left < 0)
        left = 0;
    tv.tv_sec = (time_t)(left / 1000);
    tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
    if (evtimer_add(srv->sweep, &tv) != 0)
        CORE_ERR("httpd %s: cannot arm the request timeout", srv->name);
}

/* c starts waiting for a request now. */
static void
hconn_idle(struct hconn *c)
{
    TAILQ_REMOVE(hconn_list(c), c, link);
    c->busy = 0;
    c->idle_since_ms = core_now_ms();
    TAILQ_INSERT_TAIL(&c->srv->idle, c, link);
    sweep_arm(c->srv);
}

/* A request of c is in a handler. */
static void
hconn_busy(struct hconn *c)
{
    TAILQ_REMOVE(hconn_list(c), c, link);
    c->busy = 1;
    TAILQ_INSERT_TAIL(&c->srv->busy_conns, c, link);
}

/* Close an adopted connection now; on_conn_close frees c. Not from inside
 * one of evhttp's callbacks for that connection. */
static void
hconn_close(struct hconn *c)
{
    evhttp_connection_free(c->evcon);
}

static struct hconn *
hconn_find(plb_http_server *srv, struct evhttp_connection *evcon)
{
    struct hconn *c;

    for (c = TAILQ_LAST(&srv->idle, hlist); c; c = TAILQ_PREV(c, hlist, link))
        if (c->evcon == evcon)
            return c;
    for (c = TAILQ_FIRST(&srv->busy_conns); c; c = TAILQ_NEXT(c, link))
        if (c->evcon == evcon)
            return c;
    return NULL;
}

static void on_conn_close(struct evhttp_connection *evcon, void *arg);

/* evhttp's bufferevent callback: runs once for each accepted socket, before
 * evhttp sets the socket and its own callbacks on the bufferevent. */
static struct bufferevent *
on_new_conn(struct event_base *base, void *arg)
{
    plb_http_server *srv = arg;
    struct bufferevent *bev;
    struct hconn *c;

    srv->st.accepted++;
    if (++srv->batch >= HTTPD_ACCEPT_BATCH && !srv->dead) {
        /* evconnlistener stops its accept loop once disabled. */
        struct timeval zero = {0, 0};
        evconnlistener_disable(srv->lev);
        if (evtimer_add(srv->resume, &zero) != 0) {
            CORE_ERR("httpd %s: cannot pause accepting", srv->name);
            evconnlistener_enable(srv->lev);
        }
    }
    bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    c = bev ? core_calloc(1, sizeof *c) : NULL;
    if (!c) /* untracked: adopted by its first request, or not at all */
        return bev;
    c->srv = srv;
    c->bev = bev;
    bufferevent_incref(bev); /* evhttp may free it before adoption */
    if (TAILQ_EMPTY(&srv->adopting))
        event_active(srv->adopt, EV_TIMEOUT, 1);
    TAILQ_INSERT_TAIL(&srv->adopting, c, link);
    srv->nadopting++;
    srv->st.conns++;
    return bev;
}

/* Refuse c cheaply: a canned 503 straight to the socket, then close. */
static void
hconn_refuse(struct hconn *c)
{
    int fd = (int)bufferevent_getfd(evhttp_connection_get_bufferevent(c->evcon));

    c->srv->st.refused++;
    if (fd >= 0 && send(fd, refuse_503, sizeof refuse_503 - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        CORE_DEBUG("httpd %s: refusing a client: %s", c->srv->name, strerror(errno));
    hconn_close(c);
}

/* Adopt the connections accepted in the last batch, then hold the cap. */
static void
adopt_cb(evutil_socket_t fd, short what, void *arg)
{
    plb_http_server *srv = arg;
    struct hconn *c;

    (void)fd;
    (void)what;
    srv->batch = 0;
    while ((c = TAILQ_FIRST(&srv->adopting)) != NULL) {
        bufferevent_event_cb ecb = NULL;
        void *evcon = NULL;

        bufferevent_getcb(c->bev, NULL, NULL, &ecb, &evcon);
        TAILQ_REMOVE(&srv->adopting, c, link);
        srv->nadopting--;
        if (!ecb || !evcon) {
            /* evhttp failed to set the connection up and freed it. */
            bufferevent_decref(c->bev);
            srv->st.conns--;
            core_free(c);
            continue;
        }
        c->evcon = evcon;
        evhttp_connection_set_closecb(c->evcon, on_conn_close, c);
        bufferevent_decref(c->bev);
        c->bev = NULL;
        c->idle_since_ms = core_now_ms();
        TAILQ_INSERT_TAIL(&srv->idle, c, link);
        sweep_arm(srv);
        if (srv->st.conns - srv->nadopting > srv->max_conns) {
            struct hconn *oldest = TAILQ_FIRST(&srv->idle);
            if (oldest != c) {
                srv->st.evicted++;
                hconn_close(oldest);
            } else {
                hconn_refuse(c);
            }
        }
    }
}

/* Close the connections that have waited too long for a request. */
static void
sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    plb_http_server *srv = arg;
    int64_t now = core_now_ms();
    struct hconn *c;

    (void)fd;
    (void)what;
    while ((c = TAILQ_FIRST(&srv->idle)) != NULL &&
           c->idle_since_ms + srv->request_timeout_ms <= now) {
        srv->st.timed_out++;
        hconn_close(c);
    }
    sweep_arm(srv);
}

/* Accept again, unless a pause still holds: an accept batch's (resume
 * pending) or an accept error's (retry pending), or the server is being
 * freed. */
static void
accept_again(plb_http_server *srv)
{
    if (!evtimer_pending(srv->resume, NULL) && !evtimer_pending(srv->retry, NULL) && !srv->dead)
        evconnlistener_enable(srv->lev);
}

/* An accept batch's pause ended. */
static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
    plb_http_server *srv = arg;

    (void)fd;
    (void)what;
    srv->batch = 0;
    accept_again(srv);
}

/* ------------------------------------------------------------------------ */
/* Replies                                                                  */

static const char *
method_name(enum evhttp_cmd_type t)
{
    switch (t) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_OPTIONS:
        return "OPTIONS";
    case EVHTTP_REQ_TRACE:
        return "TRACE";
    case EVHTTP_REQ_CONNECT:
        return "CONNECT";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    }
    return "UNKNOWN";
}

/* Add one "Name: value" line to out. 0, or -1 when malformed. */
static int
add_header_line(struct evkeyvalq *out, const char *line)
{
    char name[128];
    const char *colon = strchr(line, ':');
    const char *value;
    size_t n;

    if (!colon || colon == line)
        return -1;
    n = (size_t)(colon - line);
    if (n >= sizeof name)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c <= ' ' || c >= 127)
            return -1;
    }
    memcpy(name, line, n);
    name[n] = '\0';
    /* The core frames the body: the caller does not. */
    if (strcasecmp(name, "Content-Length") == 0 || strcasecmp(name, "Transfer-Encoding") == 0)
        return 0;
    value = colon + 1;
    value += strspn(value, " \t");
    return evhttp_add_header(out, name, value) == 0 ? 0 : -1;
}

static void
send_reply(struct evhttp_request *req, int status, const char *content_type, const void *body,
           size_t len, const char *const *headers)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    int head = evhttp_request_get_command(req) == EVHTTP_REQ_HEAD;
    int has_body;
    char clen[24];

    if (status < 100 || status > 599)
        status = 500;
    has_body = status >= 200 && status != 204 && status != 304;
    if (content_type && evhttp_add_header(out, "Content-Type", content_type) != 0)
        CORE_WARN("httpd: bad Content-Type for a %d reply; left out", status);
    for (size_t i = 0; headers && headers[i]; i++) {
        if (add_header_line(out, headers[i]) != 0)
            CORE_WARN("httpd: skipping malformed reply header line");
    }
    if (has_body) {
        snprintf(clen, sizeof clen, "%zu", len);
        if (evhttp_add_header(out, "Content-Length", clen) != 0)
            goto fail;
        if (!head && len > 0 && evbuffer_add(evhttp_request_get_output_buffer(req), body, len) != 0)
            goto fail;
    }
    evhttp_send_reply(req, status, NULL, NULL);
    return;
fail:
    CORE_ERR("httpd: out of memory building a %d reply; sending 500", status);
    evhttp_clear_headers(out);
    evbuffer_drain(evhttp_request_get_output_buffer(req),
                   evbuffer_get_length(evhttp_request_get_output_buffer(req)));
    evhttp_send_reply(req, 500, NULL, NULL);
}

static void
exchange_unlink(plb_http_exchange *x)
{
    plb_http_server *srv = x->srv;

    LIST_REMOVE(x, link);
    if (srv->dispatching == x)
        srv->dispatching = NULL;
}

void
core_http_reply(plb_http_exchange *x, int status, const char *content_type, const void *body,
                size_t len, const char *const *headers)
{
    if (!x)
        return;
    exchange_unlink(x);
    /* First: sending may free the connection, and with it x->hc. */
    if (x->hc)
        hconn_idle(x->hc);
    if (x->req)
        send_reply(x->req, status, content_type, body, len, headers);
    core_free(x);
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                 */

static const struct route *
route_find(const plb_http_server *srv, const char *path)
{
    const struct route *best = NULL;
    size_t plen = strlen(path);

    for (size_t i = 0; i < srv->nroutes; i++) {
        const struct route *r = &srv->routes[i];
        int hit = r->prefix ? plen >= r->len && memcmp(path, r->path, r->len) == 0
                            : plen == r->len && memcmp(path, r->path, r->len) == 0;
        if (hit && (!best || r->len > best->len))
            best = r;
    }
    return best;
}

static void server_destroy(plb_http_server *srv);

/* A tracked connection is going away (closed by either side, or freed with
 * the server). */
static void
on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct hconn *c = arg;
    plb_http_server *srv = c->srv;

    for (plb_http_exchange *x = LIST_FIRST(&srv->pending); x; x = LIST_NEXT(x, link)) {
        if (x->evcon != evcon)
            continue;
        /* Detached from its connection: libevent will not free it. */
        if (x->req && evhttp_request_get_connection(x->req) == NULL)
            evhttp_request_free(x->req);
        x->req = NULL;
        x->evcon = NULL;
        x->hc = NULL;
    }
    TAILQ_REMOVE(hconn_list(c), c, link);
    srv->st.conns--;
    core_free(c);
}

/* The tracking of the connection of req, adopting it now if its socket
 * could not be tracked when accepted. NULL when out of memory. */
static struct hconn *
conn_of(plb_http_server *srv, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct hconn *c;

    if (!evcon)
        return NULL;
    c = hconn_find(srv, evcon);
    if (c)
        return c;
    c = core_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->srv = srv;
    c->evcon = evcon;
    evhttp_connection_set_closecb(evcon, on_conn_close, c);
    c->idle_since_ms = core_now_ms();
    TAILQ_INSERT_TAIL(&srv->idle, c, link);
    srv->st.conns++;
    return c;
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    plb_http_server *srv = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    const struct route *r;
    plb_http_exchange *x;
    plb_http_handler h;
    struct hconn *hc;
    void *harg;
    size_t plen, qlen;

    if (!path || !*path)
        path = "/";
    if (!query)
        query = "";
    hc = conn_of(srv, req);
    if (!hc) {
        send_reply(req, 503, "text/plain; charset=utf-8", "out of memory\n", 14, NULL);
        return;
    }
    r = route_find(srv, path);
    if (!r) {
        hconn_idle(hc);
        send_reply(req, 404, "text/plain; charset=utf-8", "not found\n", 10, NULL);
        return;
    }
    plen = strlen(path);
    qlen = strlen(query);
    x = core_calloc(1, sizeof *x + plen + qlen + 2);
    if (!x) {
        send_reply(req, 503, "text/plain; charset=utf-8", "out of memory\n", 14, NULL);
        return;
    }
    x->srv = srv;
    x->hc = hc;
    x->req = req;
    x->evcon = hc->evcon;
    x->method = method_name(evhttp_request_get_command(req));
    memcpy(x->text, path, plen + 1);
    x->query = x->text + plen + 1;
    memcpy(x->text + plen + 1, query, qlen + 1);
    hconn_busy(hc);
    LIST_INSERT_HEAD(&srv->pending, x, link);

    h = r->h; /* the handler may add routes (realloc) */
    harg = r->arg;
    srv->busy++;
    srv->dispatching = x;
    h(x, harg);
    srv->busy--;
    if (srv->dead) {
        if (srv->busy == 0)
            server_destroy(srv);
        return;
    }
    if (srv->dispatching == x) {
        /* Answered later: stop reading until then (see the top). */
        srv->dispatching = NULL;
        if (x->evcon)
            bufferevent_disable(evhttp_connection_get_bufferevent(x->evcon), EV_READ);
    }
}

/* ------------------------------------------------------------------------ */
/* Accepting                                                                */

static void
accept_error_cb(struct evconnlistener *lev, void *arg)
{
    int e = EVUTIL_SOCKET_ERROR();
    struct timeval tv = {0, HTTPD_RETRY_MS * 1000};
    plb_http_server *srv = servers;
    int64_t now = core_now_ms();

    (void)arg; /* evhttp's own pointer */
    evconnlistener_disable(lev);
    while (srv && srv->lev != lev)
        srv = srv->next_server;
    if (!srv || evtimer_add(srv->retry, &tv) != 0) {
        CORE_ERR("httpd: accept failed: %s; cannot pause, retrying now", strerror(e));
        evconnlistener_enable(lev);
        return;
    }
    srv->st.accept_errors++;
    if (srv->last_log_ms == 0 || now - srv->last_log_ms >= HTTPD_LOG_EVERY_MS) {
        CORE_WARN("httpd %s: accept failed: %s; pausing %d ms between retries", srv->name,
                  strerror(e), HTTPD_RETRY_MS);
        srv->last_log_ms = now;
    }
}

/* An accept error's pause ended. */
static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    accept_again(arg);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                */

/* Free srv's timers and its adopt event (those not made yet are NULL). */
static void
server_events_free(plb_http_server *srv)
{
    core_event_clear(&srv->retry);
    core_event_clear(&srv->resume);
    core_event_clear(&srv->sweep);
    core_event_clear(&srv->adopt);
}

plb_http_server *
core_http_server_new(struct event_base *base, const char *addr, int port, int *err)
{
    plb_http_server *srv = NULL;
    int fd = -1;
    int rc;

    if (!base) {
        rc = -EINVAL;
        goto fail;
    }
    srv = core_calloc(1, sizeof *srv);
    if (!srv) {
        rc = -ENOMEM;
        goto fail;
    }
    TAILQ_INIT(&srv->adopting);
    TAILQ_INIT(&srv->idle);
    TAILQ_INIT(&srv->busy_conns);
    srv->max_conns = CORE_HTTPD_MAX_CONNS;
    srv->request_timeout_ms = CORE_HTTPD_REQUEST_TIMEOUT_MS;
    srv->retry = evtimer_new(base, retry_cb, srv);
    srv->resume = evtimer_new(base, resume_cb, srv);
    srv->sweep = evtimer_new(base, sweep_cb, srv);
    srv->adopt = event_new(base, -1, 0, adopt_cb, srv);
    srv->http = evhttp_new(base);
    if (!srv->retry || !srv->resume || !srv->sweep || !srv->adopt || !srv->http) {
        rc = -ENOMEM;
        goto fail;
    }
    evhttp_set_max_headers_size(srv->http, CORE_HTTPD_MAX_HEADERS);
    evhttp_set_max_body_size(srv->http, CORE_HTTPD_MAX_BODY);
    evhttp_set_timeout(srv->http, CORE_HTTPD_IDLE_TIMEOUT_S);
    evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                              EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                              EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                              EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_default_content_type(srv->http, NULL);
    evhttp_set_gencb(srv->http, on_request, srv);
    evhttp_set_bevcb(srv->http, on_new_conn, srv);

    fd = core_tcp_listen_socket(addr, port, 0, &srv->port, srv->name, sizeof srv->name);
    if (fd < 0) {
        rc = fd;
        goto fail;
    }
    /* backlog 0: already listening. Close-on-exec for accepted sockets. */
    srv->lev = evconnlistener_new(
        base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
    if (!srv->lev) {
        rc = -ENOMEM;
        goto fail;
    }
    fd = -1; /* the listener's now */
    evconnlistener_set_error_cb(srv->lev, accept_error_cb);
    if (!evhttp_bind_listener(srv->http, srv->lev)) {
        rc = -ENOMEM;
        goto fail;
    }
    srv->next_server = servers;
    servers = srv;
    if (err)
        *err = 0;
    return srv;
fail:
    if (srv) {
        if (srv->lev) /* never bound to http on this path */
            evconnlistener_free(srv->lev);
        if (srv->http)
            evhttp_free(srv->http);
        server_events_free(srv);
        core_free(srv);
    }
    if (fd >= 0)
        close(fd);
    if (err)
        *err = rc;
    return NULL;
}

int
core_http_server_set_idle_timeout(plb_http_server *s, int seconds)
{
    if (!s || seconds <= 0)
        return -EINVAL;
    evhttp_set_timeout(s->http, seconds);
    return 0;
}

int
core_http_server_set_limits(plb_http_server *s, int max_conns, int64_t request_timeout_ms)
{
    if (!s || max_conns < 1 || request_timeout_ms < 1)
        return -EINVAL;
    s->max_conns = max_conns;
    s->request_timeout_ms = request_timeout_ms;
    return 0;
}

void
core_http_server_stats(const plb_http_server *s, struct core_http_stats *st)
{
    if (s && st)
        *st = s->st;
}

int
core_http_server_port(const plb_http_server *s)
{
    return s ? s->port : -1;
}

int
core_http_route(plb_http_server *s, const char *path, plb_http_handler h, void *arg)
{
    struct route *grown;
    char *copy;
    size_t len;

    if (!s || !path || !h || path[0] != '/')
        return -EINVAL;
    len = strlen(path);
    for (size_t i = 0; i < s->nroutes; i++)
        if (s->routes[i].len == len && memcmp(s->routes[i].path, path, len) == 0)
            return -EEXIST;
    copy = core_strdup(path);
    if (!copy)
        return -ENOMEM;
    grown = core_realloc(s->routes, (s->nroutes + 1) * sizeof *grown);
    if (!grown) {
        core_free(copy);
        return -ENOMEM;
    }
    s->routes = grown;
    s->routes[s->nroutes] = (struct route){
        .path = copy,
        .len = len,
        .prefix = path[len - 1] == '/',
        .h = h,
        .arg = arg,
    };
    s->nroutes++;
    return 0;
}

static void
server_destroy(plb_http_server *srv)
{
    plb_http_server **pp = &servers;

    while (*pp && *pp != srv)
        pp = &(*pp)->next_server;
    if (*pp)
        *pp = srv->next_server;
    /* Closes every connection: on_conn_close forgets their requests. */
    evhttp_free(srv->http);
    plb_http_exchange *x;
    while ((x = LIST_FIRST(&srv->pending))) {
        exchange_unlink(x);
        if (x->req) /* not on a connection: cannot happen, but never leak */
            evhttp_request_free(x->req);
        core_free(x);
    }
    /* Accepted but not adopted yet: evhttp freed them, we hold the last
     * reference. */
    struct hconn *c;
    while ((c = TAILQ_FIRST(&srv->adopting))) {
        TAILQ_REMOVE(&srv->adopting, c, link);
        bufferevent_decref(c->bev);
        core_free(c);
    }
    server_events_free(srv);
    for (size_t i = 0; i < srv->nroutes; i++)
        core_free(srv->routes[i].path);
    core_free(srv->routes);
    core_free(srv);
}

void
core_http_server_free(plb_http_server *s)
{
    if (!s)
        return;
    if (s->busy) {
        /* Inside one of its handlers: finish when it returns. Stop
         * accepting now. */
        s->dead = 1;
        evconnlistener_disable(s->lev);
        return;
    }
    server_destroy(s);
}

/* ------------------------------------------------------------------------ */
/* Accessors                                                                */

const char *
core_http_method(plb_http_exchange *x)
{
    return x ? x->method : NULL;
}

const char *
core_http_path(plb_http_exchange *x)
{
    return x ? x->text : NULL;
}

const char *
core_http_query(plb_http_exchange *x)
{
    return x ? x->query : NULL;
}

const char *
core_http_header(plb_http_exchange *x, const char *name)
{
    if (!x || !x->req || !name)
        return NULL;
    return evhttp_find_header(evhttp_request_get_input_headers(x->req), name);
}
