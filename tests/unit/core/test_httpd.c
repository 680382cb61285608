/*
 * Check suite for core/httpd.c: methods, 404, prefix routes, accessors,
 * reply headers, HEAD, limits, asynchronous replies (also pipelined and
 * after the client has gone), freeing the server with pending exchanges
 * and from inside a handler, and a real client (libcurl).
 *
 * The server runs on this thread's event loop; clients run on threads with
 * blocking sockets bounded by SO_RCVTIMEO, and the loop runs until they are
 * done (bounded too).
 */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "httpd.h"
#include "reactor.h"
#include "loop.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Clients on threads                                                       */

#define RESP_MAX (64 * 1024)

struct client {
    const char *ip;
    int port;
    const char *req;       /* sent as is */
    size_t req_len;        /* 0: strlen(req) */
    size_t send_extra;     /* then this many 'x' bytes (bodies over the limit) */
    int hangup;            /* 1: close right after sending; 2: with RST */
    int *hangup_when;      /* hang up only once *hangup_when != 0 (at most 5 s) */
    const char *then_send; /* sent once *then_when != 0 (at most 5 s) */
    int *then_when;
    int then_sent; /* set once then_send is in the socket */
    char resp[RESP_MAX + 1];
    size_t len;
    int64_t done_ms;
    int done;
    pthread_t th;
};

static void *
client_main(void *p)
{
    struct client *c = p;
    struct sockaddr_storage ss;
    socklen_t sl;
    int fd;

    memset(&ss, 0, sizeof ss);
    if (strchr(c->ip, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)c->port);
        inet_pton(AF_INET6, c->ip, &s6->sin6_addr);
        sl = sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)c->port);
        inet_pton(AF_INET, c->ip, &s4->sin_addr);
        sl = sizeof *s4;
    }
    fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        goto out;
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&ss, sl) != 0)
        goto out_close;
    {
        size_t n = c->req_len ? c->req_len : strlen(c->req);
        if (send(fd, c->req, n, MSG_NOSIGNAL) != (ssize_t)n)
            goto out_close;
        char junk[4096];
        memset(junk, 'x', sizeof junk);
        for (size_t left = c->send_extra; left > 0;) {
            size_t k = left < sizeof junk ? left : sizeof junk;
            ssize_t w = send(fd, junk, k, MSG_NOSIGNAL);
            if (w <= 0)
                break; /* the server may refuse early */
            left -= (size_t)w;
        }
    }
    if (c->then_send) {
        for (int i = 0; i < 5000 && !__atomic_load_n(c->then_when, __ATOMIC_SEQ_CST); i++)
            usleep(1000);
        size_t n = strlen(c->then_send);
        if (send(fd, c->then_send, n, MSG_NOSIGNAL) != (ssize_t)n)
            goto out_close;
        __atomic_store_n(&c->then_sent, 1, __ATOMIC_SEQ_CST);
    }
    if (c->hangup) {
        for (int i = 0; c->hangup_when && i < 5000; i++) {
            if (__atomic_load_n(c->hangup_when, __ATOMIC_SEQ_CST))
                break;
            usleep(1000);
        }
        if (c->hangup == 2) {
            struct linger lg = {1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        goto out_close;
    }
    for (;;) {
        ssize_t r = recv(fd, c->resp + c->len, RESP_MAX - c->len, 0);
        if (r <= 0)
            break;
        c->len += (size_t)r;
        if (c->len == RESP_MAX)
            break;
    }
out_close:
    close(fd);
out:
    c->resp[c->len] = '\0';
    __atomic_store_n(&c->done_ms, core_now_ms(), __ATOMIC_SEQ_CST);
    __atomic_store_n(&c->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void
client_start(struct client *c, int port, const char *req)
{
    if (!c->ip)
        c->ip = "127.0.0.1";
    c->port = port;
    c->req = req;
    ck_assert_int_eq(pthread_create(&c->th, NULL, client_main, c), 0);
}

static struct client **waiting;
static size_t nwaiting;

static void
poll_clients(plb_timer *t, void *arg)
{
    (void)t;
    (void)arg;
    for (size_t i = 0; i < nwaiting; i++)
        if (!__atomic_load_n(&waiting[i]->done, __ATOMIC_SEQ_CST))
            return;
    event_base_loopbreak(base);
}

/* Run the loop until every client is done (at most 15 s), then join. */
static void
run_clients(struct client **cs, size_t n)
{
    plb_timer *t = core_timer_new(base, poll_clients, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(core_timer_arm(t, 2, 2, 0), 0);
    waiting = cs;
    nwaiting = n;
    struct timeval tv = {15, 0};
    ck_assert_int_eq(event_base_loopexit(base, &tv), 0);
    ck_assert_int_ge(event_base_dispatch(base), 0);
    core_timer_free(t);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(__atomic_load_n(&cs[i]->done, __ATOMIC_SEQ_CST), "client %zu stuck", i);
        ck_assert_int_eq(pthread_join(cs[i]->th, NULL), 0);
    }
}

static void
run_one(struct client *c, int port, const char *req)
{
    struct client *cs[1] = {c};
    client_start(c, port, req);
    run_clients(cs, 1);
}

/* Status of the first response in r (0 if none). */
static int
resp_status(const char *r)
{
    int st = 0;
    if (sscanf(r, "HTTP/1.%*d %d", &st) != 1)
        return 0;
    return st;
}

/* Value of a header of the first response in r (static buffer), or NULL. */
static const char *
resp_header(const char *r, const char *name)
{
    static char val[512];
    const char *end = strstr(r, "\r\n\r\n");
    size_t nl = strlen(name);
    for (const char *p = strstr(r, "\r\n"); p && (!end || p < end); p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            v += strspn(v, " ");
            size_t k = strcspn(v, "\r");
            if (k >= sizeof val)
                k = sizeof val - 1;
            memcpy(val, v, k);
            val[k] = '\0';
            return val;
        }
    }
    return NULL;
}

/* Body of the first response (everything after the blank line). */
static const char *
resp_body(const char *r)
{
    const char *end = strstr(r, "\r\n\r\n");
    return end ? end + 4 : NULL;
}

static int
count_str(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* ------------------------------------------------------------------------ */
/* Handlers                                                                 */

struct hstate {
    int calls;
    char method[16];
    char path[256];
    char query[256];
    char hdr[256];
    int hdr_null;
    plb_http_exchange *held; /* for later replies */
    int free_server;         /* free srv inside the handler, after replying */
    plb_http_server *srv;
    const char *tag;
};

/* Replies "<tag> <method> <path>?<query>" with an X-Tag header. */
static void
echo_handler(plb_http_exchange *x, void *arg)
{
    struct hstate *h = arg;
    char body[700];
    h->calls++;
    snprintf(h->method, sizeof h->method, "%s", core_http_method(x));
    snprintf(h->path, sizeof h->path, "%s", core_http_path(x));
    snprintf(h->query, sizeof h->query, "%s", core_http_query(x));
    const char *v = core_http_header(x, "x-test");
    h->hdr_null = v == NULL;
    snprintf(h->hdr, sizeof h->hdr, "%s", v ? v : "");
    int n = snprintf(body, sizeof body, "%s %s %s?%s", h->tag ? h->tag : "echo", h->method, h->path,
                     h->query);
    const char *hdrs[] = {"X-Tag: yes", NULL};
    core_http_reply(x, 200, "text/plain", body, (size_t)n, hdrs);
    if (h->free_server) {
        core_http_server_free(h->srv);
        h->srv = NULL;
    }
}

/* Keeps the exchange for a later reply. */
static void
hold_handler(plb_http_exchange *x, void *arg)
{
    struct hstate *h = arg;
    h->calls++;
    ck_assert_ptr_null(h->held);
    h->held = x;
}

static void
reply_held_cb(plb_timer *t, void *arg)
{
    struct hstate *h = arg;
    (void)t;
    ck_assert_ptr_nonnull(h->held);
    /* accessors stay valid until the reply */
    ck_assert_str_eq(core_http_path(h->held), h->path[0] ? h->path : "/slow");
    core_http_reply(h->held, 200, "text/plain", "late\n", 5, NULL);
    h->held = NULL;
}

static plb_http_server *
server_on(const char *ip)
{
    int err = 1;
    plb_http_server *s = core_http_server_new(base, ip, 0, &err);
    ck_assert_msg(s != NULL, "server on %s: %s", ip, strerror(-err));
    ck_assert_int_eq(err, 0);
    ck_assert_int_gt(core_http_server_port(s), 0);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */

START_TEST(test_methods_reach_handler)
{
    struct hstate h = {0};
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_route(s, "/m", echo_handler, &h), 0);

    const char *methods[] = {"GET", "POST", "OPTIONS", "PUT", "DELETE", "PATCH", "TRACE"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        char req[256];
        const char *body = strcmp(methods[i], "POST") == 0 ? "abc" : "";
        snprintf(req, sizeof req,
                 "%s /m HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                 methods[i], strlen(body), body);
        struct client c = {0};
        int before = h.calls;
        run_one(&c, port, req);
        ck_assert_int_eq(h.calls, before + 1);
        ck_assert_str_eq(h.method, methods[i]);
        ck_assert_int_eq(resp_status(c.resp), 200);
        char want[64];
        snprintf(want, sizeof want, "echo %s /m?", methods[i]);
        ck_assert_str_eq(resp_body(c.resp), want);
        ck_assert_str_eq(resp_header(c.resp, "Content-Type"), "text/plain");
        ck_assert_int_eq(atoi(resp_header(c.resp, "Content-Length")), (int)strlen(want));
        ck_assert_str_eq(resp_header(c.resp, "X-Tag"), "yes");
    }

    /* HEAD: same headers, Content-Length of the would-be body, no body. */
    struct client c = {0};
    run_one(&c, port, "HEAD /m HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    ck_assert_str_eq(h.method, "HEAD");
    ck_assert_int_eq(resp_status(c.resp), 200);
    ck_assert_int_eq(atoi(resp_header(c.resp, "Content-Length")), (int)strlen("echo HEAD /m?"));
    ck_assert_str_eq(resp_header(c.resp, "X-Tag"), "yes");
    ck_assert_str_eq(resp_body(c.resp), "");
    core_http_server_free(s);
}
END_TEST

START_TEST(test_unrouted_404)
{
    struct hstate h = {0};
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    struct client c1 = {0}, c2 = {0}, c3 = {0};

    /* no routes at all */
    run_one(&c1, port, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    ck_assert_int_eq(resp_status(c1.resp), 404);
    ck_assert_ptr_nonnull(strstr(resp_header(c1.resp, "Content-Type"), "text/plain"));
    ck_assert_str_eq(resp_body(c1.resp), "not found\n");

    ck_assert_int_eq(core_http_route(s, "/metrics", echo_handler, &h), 0);
    run_one(&c2, port, "GET /metrics/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    ck_assert_int_eq(resp_status(c2.resp), 404);
    run_one(&c3, port, "HEAD /nope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    ck_assert_int_eq(resp_status(c3.resp), 404);
    ck_assert_str_eq(resp_header(c3.resp, "Content-Length"), "10");
    ck_assert_str_eq(resp_body(c3.resp), "");
    ck_assert_int_eq(h.calls, 0);
    core_http_server_free(s);
}
END_TEST

START_TEST(test_prefix_routes_longest_wins)
{
    struct hstate api = {.tag = "api"}, v1 = {.tag = "v1"}, exact = {.tag = "exact"},
                  root = {.tag = "root"};
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_route(s, "/api/", echo_handler, &api), 0);
    ck_assert_int_eq(core_http_route(s, "/api/v1/exact", echo_handler, &exact), 0);
    ck_assert_int_eq(core_http_route(s, "/api/v1/", echo_handler, &v1), 0);
    ck_assert_int_eq(core_http_route(s, "/api/", echo_handler, &v1), -EEXIST);
    ck_assert_int_eq(core_http_route(s, "api", echo_handler, &v1), -EINVAL);
    ck_assert_int_eq(core_http_route(s, NULL, echo_handler, &v1), -EINVAL);
    ck_assert_int_eq(core_http_route(s, "/x", NULL, &v1), -EINVAL);
    ck_assert_int_eq(core_http_route(NULL, "/x", echo_handler, &v1), -EINVAL);

    struct {
        const char *path;
        int status;
        const char *tag;
    } cases[] = {
        {"/api/", 200, "api"},      {"/api/things", 200, "api"},     {"/api/v1/", 200, "v1"},
        {"/api/v1/y/z", 200, "v1"}, {"/api/v1/exact", 200, "exact"}, {"/api/v1/exactly", 200, "v1"},
        {"/api", 404, NULL}, /* a prefix route does not match without its '/' */
        {"/other", 404, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char req[256];
        snprintf(req, sizeof req, "GET %s?k=v HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                 cases[i].path);
        struct client c = {0};
        run_one(&c, port, req);
        ck_assert_msg(resp_status(c.resp) == cases[i].status, "%s: got %d", cases[i].path,
                      resp_status(c.resp));
        if (cases[i].tag) {
            char want[300];
            snprintf(want, sizeof want, "%s GET %s?k=v", cases[i].tag, cases[i].path);
            ck_assert_str_eq(resp_body(c.resp), want);
        }
    }

    /* "/" is a catch-all prefix, but longer routes still win. */
    ck_assert_int_eq(core_http_route(s, "/", echo_handler, &root), 0);
    struct client c1 = {0}, c2 = {0};
    run_one(&c1, port, "GET /api HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    ck_assert_str_eq(resp_body(c1.resp), "root GET /api?");
    run_one(&c2, port, "GET /api/v1/q HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    ck_assert_str_eq(resp_body(c2.resp), "v1 GET /api/v1/q?");
    core_http_server_free(s);
}
END_TEST

START_TEST(test_accessors)
{
    struct hstate h = {0};
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_route(s, "/q/", echo_handler, &h), 0);

    struct client c = {0};
    run_one(&c, port,
            "GET /q/a%20b/c?x=1&y=two%21 HTTP/1.1\r\nHost: t\r\nX-TEST:   hello world  \r\n"
            "Connection: close\r\n\r\n");
    ck_assert_int_eq(resp_status(c.resp), 200);
    ck_assert_str_eq(h.method, "GET");
    ck_assert_str_eq(h.path, "/q/a%20b/c"); /* raw, not decoded */
    ck_assert_str_eq(h.query, "x=1&y=two%21");
    ck_assert_int_eq(h.hdr_null, 0);
    ck_assert_str_eq(h.hdr, "hello world"); /* case-insensitive name, trimmed */

    struct client c2 = {0};
    run_one(&c2, port, "GET /q/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    ck_assert_str_eq(h.path, "/q/");
    ck_assert_str_eq(h.query, "");
    ck_assert_int_eq(h.hdr_null, 1);

    /* absolute-form request target */
    struct client c3 = {0};
    run_one(&c3, port, "GET http://t/q/abs?z HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    ck_assert_int_eq(resp_status(c3.resp), 200);
    ck_assert_str_eq(h.path, "/q/abs");
    ck_assert_str_eq(h.query, "z");

    ck_assert_ptr_null(core_http_method(NULL));
    ck_assert_ptr_null(core_http_path(NULL));
    ck_assert_ptr_null(core_http_query(NULL));
    ck_assert_ptr_null(core_http_header(NULL, "x"));
    core_http_server_free(s);
}
END_TEST

static void
fancy_handler(plb_http_exchange *x, void *arg)
{
    int *status = arg;
    const char *hdrs[] = {
        "X-One: 1",
        "Cache-Control:no-store",
        "Content-Length: 999",        /* ignored: the core frames the body */
        "Transfer-Encoding: chunked", /* ignored */
        "not a header line",          /* skipped */
        ": empty name",               /* skipped */
        "X-Bad\r\nInjected: yes",     /* skipped */
        NULL,
    };
    core_http_reply(x, *status, NULL, "body", 4, hdrs);
}

START_TEST(test_reply_headers_and_status)
{
    int status = 201;
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_route(s, "/f", fancy_handler, &status), 0);
    const char *req = "GET /f HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

    struct client c = {0};
    run_one(&c, port, req);
    ck_assert_int_eq(resp_status(c.resp), 201);
    ck_assert_str_eq(resp_header(c.resp, "X-One"), "1");
    ck_assert_str_eq(resp_header(c.resp, "Cache-Control"), "no-store");
    ck_assert_str_eq(resp_header(c.resp, "Content-Length"), "4");
    ck_assert_ptr_null(resp_header(c.resp, "Transfer-Encoding"));
    ck_assert_ptr_null(resp_header(c.resp, "Injected"));
    ck_assert_ptr_null(resp_header(c.resp, "Content-Type")); /* NULL: none */
    ck_assert_int_eq(count_str(c.resp, "Content-Length"), 1);
    ck_assert_str_eq(resp_body(c.resp), "body");

    /* 204: no body, no Content-Length. */
    status = 204;
    struct client c2 = {0};
    run_one(&c2, port, req);
    ck_assert_int_eq(resp_status(c2.resp), 204);
    ck_assert_ptr_null(resp_header(c2.resp, "Content-Length"));
    ck_assert_str_eq(resp_body(c2.resp), "");

    /* Out of range status: 500. */
    status = 42;
    struct client c3 = {0};
    run_one(&c3, port, req);
    ck_assert_int_eq(resp_status(c3.resp), 500);
    ck_assert_str_eq(resp_body(c3.resp), "body");

    /* Unusual but valid status with a reason phrase from libevent. */
    status = 503;
    struct client c4 = {0};
    run_one(&c4, port, req);
    ck_assert_ptr_nonnull(strstr(c4.resp, "HTTP/1.1 503 Service Unavailable\r\n"));
    core_http_server_free(s);
}
END_TEST

START_TEST(test_async_reply_after_timer)
{
    struct hstate h = {.path = "/slow"};
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_route(s, "/slow", hold_handler, &h), 0);
    plb_timer *t = core_timer_new(base, reply_held_cb, &h);
    ck_assert_ptr_nonnull(t);

    /* A handler that does not reply; a timer armed when it ran replies. */
    struct client c = {0};
    client_start(&c, port, "GET /slow HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    for (int i = 0; i < 2000 && h.calls == 0; i++)
        run_for(5);
    ck_assert_int_eq(h.calls, 1);
    int64_t start = core_now_ms();
    ck_assert_int_eq(core_timer_arm(t, 80, 0, 0), 0);
    struct client *cs[1] = {&c};
    run_clients(cs, 1);
    ck_assert_int_eq(resp_status(c.resp), 200);
    ck_assert_str_eq(resp_body(c.resp), "late\n");
    ck_assert_int_ge(c.done_ms - start, 80);
    ck_assert_ptr_null(h.held);

    /* Keep-alive and pipelining: two requests in one write, the first
     * answered later; both answers arrive, in order, on one connection. */
    h.calls = 0;
    struct client p = {0};
    client_start(&p, port,
                 "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n"
                 "GET /slow?second HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    for (int i = 0; i < 2000 && h.calls == 0; i++)
        run_for(5);
    ck_assert_int_eq(h.calls, 1);
    run_for(100); /* the second request must wait, not crash libevent */
    ck_assert_int_eq(h.calls, 1);
    core_http_reply(h.held, 200, "text/plain", "first\n", 6, NULL);
    h.held = NULL;
    for (int i = 0; i < 2000 && h.calls < 2; i++)
        run_for(5);
    ck_assert_int_eq(h.calls, 2);
    ck_assert_str_eq(core_http_query(h.held), "second");
    core_http_reply(h.held, 200, "text/plain", "second\n", 7, NULL);
    h.held = NULL;
    struct client *ps[1] = {&p};
    run_clients(ps, 1);
    ck_assert_int_eq(count_str(p.resp, "HTTP/1.1 200 OK"), 2);
    const char *first = strstr(p.resp, "first\n");
    const char *second = strstr(p.resp, "second\n");
    ck_assert_ptr_nonnull(first);
    ck_assert_ptr_nonnull(second);
    ck_assert(first < second);

    /* The next request arrives while the first is still unanswered. */
    h.calls = 0;
    int sent_first = 0;
    struct client q = {.then_send =
                           "GET /slow?late HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                       .then_when = &sent_first};
    client_start(&q, port, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
    for (int i = 0; i < 2000 && h.calls == 0; i++)
        run_for(5);
    ck_assert_int_eq(h.calls, 1);
    __atomic_store_n(&sent_first, 1, __ATOMIC_SEQ_CST);
    /* The second request is in the server's socket (loopback: once send
     * returned), then the loop has had its chance to read it. */
    for (int i = 0; i < 1000 && !__atomic_load_n(&q.then_sent, __ATOMIC_SEQ_CST); i++)
        run_for(5);
    ck_assert(__atomic_load_n(&q.then_sent, __ATOMIC_SEQ_CST));
    run_for(20);
    ck_assert_int_eq(h.calls, 1);
    core_http_reply(h.held, 200, "text/plain", "one\n", 4, NULL);
    h.held = NULL;
    for (int i = 0; i < 2000 && h.calls < 2; i++)
        run_for(5);
    ck_assert_int_eq(h.calls, 2);
    ck_assert_str_eq(core_http_query(h.held), "late");
    core_http_reply(h.held, 200, "text/plain", "two\n", 4, NULL);
    h.held = NULL;
    struct client *qs[1] = {&q};
    run_clients(qs, 1);
    ck_assert_int_eq(count_str(q.resp, "HTTP/1.1 200 OK"), 2);
    ck_assert_ptr_nonnull(strstr(q.resp, "one\n"));
    ck_assert_ptr_nonnull(strstr(q.resp, "two\n"));

    core_timer_free(t);
    core_http_server_free(s);
}
END_TEST

/* The client hangs up (FIN or RST) before the reply: the reply is safe. */
START_TEST(test_client_gone_before_async_reply)
{
    for (int mode = 1; mode <= 2; mode++) {
        struct hstate h = {.path = "/slow"};
        plb_http_server *s = server_on("127.0.0.1");
        int port = core_http_server_port(s);
        ck_assert_int_eq(core_http_route(s, "/slow", hold_handler, &h), 0);
        ck_assert_int_eq(core_http_route(s, "/echo", echo_handler, &h), 0);

        /* Hang up once the handler holds the exchange. */
        int held = 0;
        struct client c = {.hangup = mode, .hangup_when = &held};
        client_start(&c, port, "GET /slow HTTP/1.1\r\nHost: t\r\nX-Test: held\r\n\r\n");
        for (int i = 0; i < 2000 && h.calls == 0; i++)
            run_for(5);
        ck_assert_int_eq(h.calls, 1);
        __atomic_store_n(&held, 1, __ATOMIC_SEQ_CST);
        struct client *cs[1] = {&c};
        run_clients(cs, 1);
        run_for(100); /* let the loop see whatever it sees of the hangup */
        ck_assert_ptr_nonnull(h.held);
        ck_assert_str_eq(core_http_path(h.held), "/slow");
        core_http_reply(h.held, 200, "text/plain", "too late\n", 9, NULL);
        h.held = NULL;
        run_for(100); /* the write fails; libevent cleans up */

        /* The server still serves. */
        struct client c2 = {0};
        run_one(&c2, port, "GET /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        ck_assert_int_eq(resp_status(c2.resp), 200);
        core_http_server_free(s);
    }
}
END_TEST

/* Freeing a server with exchanges outstanding closes their connections and
 * frees them (ASan/valgrind: nothing leaks, nothing is touched later). */
START_TEST(test_free_server_with_pending)
{
    struct hstate h = {0};
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_route(s, "/slow", hold_handler, &h), 0);
    struct client c = {0};
    client_start(&c, port, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
    for (int i = 0; i < 2000 && h.calls == 0; i++)
        run_for(5);
    ck_assert_int_eq(h.calls, 1);
    ck_assert_ptr_nonnull(h.held);
    core_http_server_free(s);
    h.held = NULL; /* freed with the server */
    struct client *cs[1] = {&c};
    run_clients(cs, 1);
    ck_assert_uint_eq(c.len, 0); /* closed without an answer */
}
END_TEST

START_TEST(test_free_server_inside_handler)
{
    struct hstate h = {.free_server = 1};
    plb_http_server *s = server_on("127.0.0.1");
    h.srv = s;
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_route(s, "/bye", echo_handler, &h), 0);
    struct client c = {0};
    run_one(&c, port, "GET /bye HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    ck_assert_int_eq(h.calls, 1);
    ck_assert_ptr_null(h.srv);
    /* The reply was queued before the free; the connection then closed.
     * Either way nothing crashed, and the port is closed now. */
    run_for(50);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof sin), -1);
    ck_assert_int_eq(errno, ECONNREFUSED);
    close(fd);
}
END_TEST

START_TEST(test_limits)
{
    struct hstate h = {0};
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_route(s, "/", echo_handler, &h), 0);

    /* Headers over 16 KiB: rejected before any handler. */
    size_t big = CORE_HTTPD_MAX_HEADERS + 1024;
    char *req = malloc(big + 256);
    ck_assert_ptr_nonnull(req);
    int n = snprintf(req, 256, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: ");
    memset(req + n, 'a', big);
    strcpy(req + n + big, "\r\nConnection: close\r\n\r\n");
    struct client c = {0};
    run_one(&c, port, req);
    int st = resp_status(c.resp);
    ck_assert_msg(st == 400 || st == 413 || (st == 0 && c.len == 0), "status %d", st);
    ck_assert_int_eq(h.calls, 0);

    /* Just under the limit: served. */
    size_t ok = CORE_HTTPD_MAX_HEADERS - 200;
    n = snprintf(req, 256, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: ");
    memset(req + n, 'a', ok);
    strcpy(req + n + ok, "\r\nConnection: close\r\n\r\n");
    struct client c2 = {0};
    run_one(&c2, port, req);
    ck_assert_int_eq(resp_status(c2.resp), 200);
    ck_assert_int_eq(h.calls, 1);
    free(req);

    /* Body over 1 MiB: 413, handler not called. */
    char hdr[256];
    snprintf(hdr, sizeof hdr,
             "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
             CORE_HTTPD_MAX_BODY + 1);
    struct client c3 = {0}; /* refused on Content-Length alone */
    run_one(&c3, port, hdr);
    ck_assert_int_eq(resp_status(c3.resp), 413);
    ck_assert_int_eq(h.calls, 1);

    /* A 1 MiB body is fine. */
    snprintf(hdr, sizeof hdr,
             "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
             CORE_HTTPD_MAX_BODY);
    struct client c4 = {.send_extra = CORE_HTTPD_MAX_BODY};
    run_one(&c4, port, hdr);
    ck_assert_int_eq(resp_status(c4.resp), 200);
    ck_assert_int_eq(h.calls, 2);
    core_http_server_free(s);
}
END_TEST

/* Idle connections are closed after the idle timeout. */
START_TEST(test_idle_timeout)
{
    struct hstate h = {0};
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_route(s, "/", echo_handler, &h), 0);
    ck_assert_int_eq(core_http_server_set_idle_timeout(s, 0), -EINVAL);
    ck_assert_int_eq(core_http_server_set_idle_timeout(NULL, 1), -EINVAL);
    ck_assert_int_eq(core_http_server_set_idle_timeout(s, 1), 0);

    /* Connected, nothing sent; and half a request. */
    struct client a = {0}, b = {0};
    int64_t start = core_now_ms();
    client_start(&a, port, "");
    client_start(&b, port, "GET / HTTP/1.1\r\nHost: t\r\n");
    struct client *cs[2] = {&a, &b};
    run_clients(cs, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(cs[i]->len, 0); /* closed, no answer */
        ck_assert_int_ge(cs[i]->done_ms - start, 900);
        ck_assert_int_le(cs[i]->done_ms - start, 5000);
    }
    ck_assert_int_eq(h.calls, 0);
    core_http_server_free(s);
}
END_TEST

/* Out of descriptors: the server pauses accepting instead of spinning,
 * and serves again once descriptors are free. */
START_TEST(test_emfile_backoff)
{
    struct hstate h = {0};
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_route(s, "/", echo_handler, &h), 0);

    int c = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(c, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(c, (struct sockaddr *)&sin, sizeof sin), 0);

    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    lim = old;
    lim.rlim_cur = 128;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
    int fill[128], nfill = 0;
    for (int fd; (fd = dup(0)) >= 0;) {
        ck_assert_int_lt(nfill, 128);
        fill[nfill++] = fd;
    }
    double cpu0 = tu_cpu_seconds();
    run_for(600);
    double cpu = tu_cpu_seconds() - cpu0;
    ck_assert_msg(cpu < 0.05, "loop used %.3f s of CPU in 0.6 s while out of fds", cpu);
    ck_assert_int_eq(h.calls, 0);
    for (int i = 0; i < nfill; i++)
        close(fill[i]);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);

    /* A new client is served. (The waiting one is too, except under
     * valgrind, whose emulated fd limit makes it close that one itself.) */
    struct client n = {0};
    run_one(&n, port, "GET /again HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    ck_assert_int_eq(resp_status(n.resp), 200);
    ck_assert_str_eq(resp_body(n.resp), "echo GET /again?");
    close(c);
    core_http_server_free(s);
}
END_TEST

START_TEST(test_server_errors_and_ipv6)
{
    int err = 0;
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_ptr_null(core_http_server_new(base, "127.0.0.1", port, &err));
    ck_assert_int_eq(err, -EADDRINUSE);
    ck_assert_ptr_null(core_http_server_new(base, "localhost", 0, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(core_http_server_new(NULL, "127.0.0.1", 0, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(core_http_server_new(base, "127.0.0.1", -2, NULL));
    ck_assert_int_eq(core_http_server_port(NULL), -1);
    core_http_server_free(NULL);
    core_http_reply(NULL, 200, NULL, NULL, 0, NULL);
    core_http_server_free(s);

    struct hstate h = {0};
    plb_http_server *s6 = server_on("::1");
    ck_assert_int_eq(core_http_route(s6, "/v6", echo_handler, &h), 0);
    struct client c = {.ip = "::1"};
    run_one(&c, core_http_server_port(s6),
            "GET /v6 HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n");
    ck_assert_int_eq(resp_status(c.resp), 200);
    ck_assert_str_eq(resp_body(c.resp), "echo GET /v6?");
    core_http_server_free(s6);
}
END_TEST

/* A real client: libcurl, on a thread. */
struct curl_job {
    int port;
    long status;
    char body[256];
    size_t len;
    int post;
    int done;
    CURLcode rc;
    pthread_t th;
};

static size_t
curl_write(char *p, size_t sz, size_t n, void *arg)
{
    struct curl_job *j = arg;
    size_t k = sz * n;
    if (j->len + k >= sizeof j->body)
        return 0;
    memcpy(j->body + j->len, p, k);
    j->len += k;
    j->body[j->len] = '\0';
    return k;
}

static void *
curl_main(void *p)
{
    struct curl_job *j = p;
    char url[128];
    CURL *e = curl_easy_init();
    if (e) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/c/path?q=1", j->port);
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, curl_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, j);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        if (j->post)
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, "a=1");
        j->rc = curl_easy_perform(e);
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &j->status);
        curl_easy_cleanup(e);
    }
    __atomic_store_n(&j->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

START_TEST(test_real_client_curl)
{
    ck_assert_int_eq(curl_global_init(CURL_GLOBAL_DEFAULT), 0);
    struct hstate h = {0};
    plb_http_server *s = server_on("127.0.0.1");
    ck_assert_int_eq(core_http_route(s, "/c/", echo_handler, &h), 0);
    for (int post = 0; post <= 1; post++) {
        struct curl_job j = {.port = core_http_server_port(s), .post = post};
        ck_assert_int_eq(pthread_create(&j.th, NULL, curl_main, &j), 0);
        int64_t until = core_now_ms() + 15000;
        while (!__atomic_load_n(&j.done, __ATOMIC_SEQ_CST) && core_now_ms() < until)
            run_for(5);
        ck_assert_int_eq(pthread_join(j.th, NULL), 0);
        ck_assert_int_eq(j.rc, CURLE_OK);
        ck_assert_int_eq(j.status, 200);
        ck_assert_str_eq(j.body, post ? "echo POST /c/path?q=1" : "echo GET /c/path?q=1");
    }
    core_http_server_free(s);
    curl_global_cleanup();
}
END_TEST

/* The Nth allocation failing (each of the first 60) while the server
 * takes a connection and two requests on it: the server never crashes, a
 * stalled connection is closed at the request timeout, and a fresh client
 * is answered after each. Through the daemon's allocation hooks, as the
 * daemon runs: libevent's own allocations are never failed (libevent 2.1
 * crashed in this sweep at two of them; see core/alloc.c). */
START_TEST(test_allocation_failures_in_the_server_never_crash)
{
    ck_assert_int_eq(core_alloc_install_library_hooks(), 0);
    base = core_event_base_new();
    ck_assert_ptr_nonnull(base);
    struct hstate h = {0};
    plb_http_server *s = server_on("127.0.0.1");
    int port = core_http_server_port(s);
    ck_assert_int_eq(core_http_server_set_limits(s, 64, 300), 0);
    ck_assert_int_eq(core_http_route(s, "/m", echo_handler, &h), 0);
    const char *two = "GET /m HTTP/1.1\r\nHost: t\r\n\r\n"
                      "GET /m HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    for (unsigned long n = 1; n <= 60; n++) {
        struct client c = {0}, ok = {0};
        struct client *cs[1] = {&c};
        /* The loop's own timers first: only the server's allocations count. */
        plb_timer *t = core_timer_new(base, poll_clients, NULL);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(core_timer_arm(t, 2, 2, 0), 0);
        struct timeval tv = {15, 0};
        ck_assert_int_eq(event_base_loopexit(base, &tv), 0);
        waiting = cs;
        nwaiting = 1;
        client_start(&c, port, two);
        core_alloc_fail_at(n, 0);
        ck_assert_int_ge(event_base_dispatch(base), 0);
        core_alloc_fail_at(0, 0);
        core_timer_free(t);
        ck_assert_msg(__atomic_load_n(&c.done, __ATOMIC_SEQ_CST), "N=%lu: client stuck", n);
        ck_assert_int_eq(pthread_join(c.th, NULL), 0);
        run_one(&ok, port, "GET /m HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        ck_assert_msg(resp_status(ok.resp) == 200, "N=%lu: %s", n, ok.resp);
    }
    core_http_server_free(s);
    event_base_free(base);
    base = NULL;
}
END_TEST

static Suite *
httpd_suite(void)
{
    Suite *s = suite_create("httpd");
    TCase *tc = tcase_create("server");
    tcase_add_checked_fixture(tc, loop_setup, loop_teardown);
    tcase_set_timeout(tc, 40);
    tcase_add_test(tc, test_methods_reach_handler);
    tcase_add_test(tc, test_unrouted_404);
    tcase_add_test(tc, test_prefix_routes_longest_wins);
    tcase_add_test(tc, test_accessors);
    tcase_add_test(tc, test_reply_headers_and_status);
    tcase_add_test(tc, test_async_reply_after_timer);
    tcase_add_test(tc, test_client_gone_before_async_reply);
    tcase_add_test(tc, test_free_server_with_pending);
    tcase_add_test(tc, test_free_server_inside_handler);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_idle_timeout);
    tcase_add_test(tc, test_emfile_backoff);
    tcase_add_test(tc, test_server_errors_and_ipv6);
    tcase_add_test(tc, test_real_client_curl);
    suite_add_tcase(s, tc);
    /* Its own loop: the allocation hooks go in before libevent allocates. */
    TCase *af = tcase_create("alloc-fail");
    tcase_set_timeout(af, 60);
    tcase_add_test(af, test_allocation_failures_in_the_server_never_crash);
    suite_add_tcase(s, af);
    return s;
}

int
main(void)
{
    return tu_run_suite(httpd_suite());
}
