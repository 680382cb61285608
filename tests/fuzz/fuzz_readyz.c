/*
 * fuzz_readyz: an upstream's answers to the proxy's readyz probe, through
 * the core's HTTP client (core/httpc.c on libcurl, with the options the
 * probe uses: GET /readyz, "Connection: close", a buffered body of at most
 * 64 KiB, one timeout) into mod_tcp_proxy's verdict (tp_probe_ok in
 * modules/mod_tcp_proxy/select.c; read-only use).
 *
 * One loopback connection per input: a server of this file accepts the
 * probe, reads its request, writes the input as the answer and closes its
 * side; the loop runs until the probe's done callback ran (bounded by the
 * probe's timeout). The probe speaks plain HTTP here: TLS is the same
 * library's and is not what is fuzzed. Seeds are answers of the fake API
 * server's /readyz (healthy and with storage down) captured with curl.
 *
 * FUZZ_VERBOSE=1 prints each verdict.
 *
 * Oracles: done runs exactly once; the verdict is "ready" only for an
 * exchange that completed with status 200, whose answer therefore has an
 * "HTTP/1.x 200" status line (at its start, or after 1xx interim answers);
 * a body over 64 KiB is never a completed exchange. The regression inputs
 * pin a 100 Continue before the 200, a body cut short and one over 64 KiB.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "httpc.h"
#include "reactor.h"
#include "select.h"

static struct event_base *base;
static struct core_httpc *client;
static int lfd = -1, port;

static struct {
    const uint8_t *data;
    size_t size, off;
    int cfd;
    int got_request;
    struct event *ev;
    int done, ready, status;
    enum plb_http_error error;
    size_t body_len;
} X;

static void
setup(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sin);
    signal(SIGPIPE, SIG_IGN);
    base = core_event_base_new();
    client = base ? core_httpc_new(base) : NULL;
    FUZZ_ASSERT(client, "no event base or client");
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    FUZZ_ASSERT(lfd >= 0 && bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
                    listen(lfd, 16) == 0 && getsockname(lfd, (struct sockaddr *)&sin, &sl) == 0,
                "no listener");
    port = ntohs(sin.sin_port);
}

static void on_conn(evutil_socket_t fd, short what, void *arg);

/* (Re)watch the upstream's connection: reading always, writing while some
 * of the answer is left to send. */
static void
watch_conn(int writing)
{
    if (X.ev)
        event_free(X.ev);
    X.ev = event_new(base, X.cfd, EV_READ | (writing ? EV_WRITE : 0) | EV_PERSIST, on_conn, NULL);
    FUZZ_ASSERT(X.ev && event_add(X.ev, NULL) == 0, "no event");
}

/* The upstream accepts the probe's connection. */
static void
on_accept(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    (void)arg;
    int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0)
        return;
    if (X.cfd >= 0) { /* one connection per probe */
        close(c);
        return;
    }
    X.cfd = c;
    watch_conn(1);
}

/* The upstream reads the request, then writes the answer and closes its
 * side. */
static void
on_conn(evutil_socket_t fd, short what, void *arg)
{
    char buf[4096];
    (void)what;
    (void)arg;
    ssize_t r;
    while ((r = recv(fd, buf, sizeof(buf), 0)) > 0)
        X.got_request = 1;
    if (!X.got_request || X.off > X.size)
        return;
    while (X.off < X.size) {
        ssize_t w = send(fd, X.data + X.off, X.size - X.off, MSG_NOSIGNAL);
        if (w <= 0) {
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                X.off = X.size; /* the probe went away */
            break;
        }
        X.off += (size_t)w;
    }
    if (X.off == X.size) {
        shutdown(fd, SHUT_WR);
        X.off = X.size + 1; /* sent and closed */
        watch_conn(0);
    }
}

/* An "HTTP/1.x 200" status line at the start of the answer or of a line
 * (the final answer after 1xx interim ones, whose end libcurl also takes
 * from a line that only begins with CR). */
static int
has_200_status_line(const uint8_t *d, size_t n)
{
    for (size_t i = 0; i + 12 <= n; i++) {
        if ((i == 0 || d[i - 1] == '\n') && memcmp(d + i, "HTTP/1.", 7) == 0 &&
            memcmp(d + i + 8, " 200", 4) == 0)
            return 1;
    }
    return 0;
}

static void
probe_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    (void)req;
    (void)arg;
    X.done++;
    X.error = core_http_resp_error(resp);
    X.status = core_http_resp_status(resp);
    X.ready = tp_probe_ok(X.error == PLB_HTTP_OK, X.status);
    (void)core_http_resp_body(resp, &X.body_len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct event *lev;
    char url[64];
    int err = 0;

    if (!base) {
        setup();
        lev = event_new(base, lfd, EV_READ | EV_PERSIST, on_accept, NULL);
        FUZZ_ASSERT(lev && event_add(lev, NULL) == 0, "no listener event");
    }
    memset(&X, 0, sizeof(X));
    X.data = data;
    X.size = size;
    X.cfd = -1;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/readyz", port);
    static const char *const headers[] = {"Connection: close", NULL};
    struct plb_http_opts o = {
        .size = sizeof(o),
        .url = url,
        .headers = headers,
        .connect_timeout_ms = 1000,
        .timeout_ms = 1000,
        .body_mode = PLB_HTTP_BUFFER,
        .max_body = 64 * 1024,
        .done = probe_done,
    };
    plb_http_req *req = core_http_request(client, &o, &err);
    FUZZ_ASSERT(req, "the probe could not start: %d", err);
    for (int i = 0; i < 100000 && !X.done; i++)
        event_base_loop(base, EVLOOP_ONCE);
    FUZZ_ASSERT(X.done == 1, "done ran %d times", X.done);
    if (getenv("FUZZ_VERBOSE")) /* for looking at seeds */
        fprintf(stderr, "readyz: status %d, error %d, body %zu bytes: %s\n", X.status, (int)X.error,
                X.body_len, X.ready ? "ready" : "not ready");
    if (X.ready) {
        FUZZ_ASSERT(has_200_status_line(data, size),
                    "ready on an answer without an HTTP/1.x 200 status line");
        FUZZ_ASSERT(X.body_len <= 64 * 1024, "a completed probe with a %zu-byte body", X.body_len);
    }
    if (X.ev)
        event_free(X.ev);
    if (X.cfd >= 0)
        close(X.cfd);
    X.ev = NULL;
    X.cfd = -1;
    return 0;
}
