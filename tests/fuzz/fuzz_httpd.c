/*
 * fuzz_httpd: bytes from a client to the core's HTTP server (the probe and
 * metrics server): evhttp's request parsing, then the routing, accessors,
 * replies and connection bookkeeping of core/httpd.c. One connection per
 * input, on 127.0.0.1; the loop runs until the server closes it or has
 * nothing more to do. A handler reads every accessor and answers, HEAD and
 * keep-alive included.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "httpd.h"
#include "reactor.h"

static struct event_base *base;
static plb_http_server *srv;
static int port;

static void
handler(plb_http_exchange *x, void *arg)
{
    char body[512];
    (void)arg;
    const char *m = core_http_method(x), *p = core_http_path(x), *q = core_http_query(x);
    const char *h = core_http_header(x, "x-test");
    FUZZ_ASSERT(m && p && q, "an accessor returned NULL");
    int n = snprintf(body, sizeof(body), "%s %s?%s %s", m, p, q, h ? h : "-");
    const char *hdrs[] = {"X-A: b", "bad header", NULL};
    core_http_reply(x, strlen(p) % 2 ? 200 : 404, "text/plain", body, (size_t)n, hdrs);
}

static void
setup(void)
{
    int err = 0;
    signal(SIGPIPE, SIG_IGN);
    base = core_event_base_new();
    FUZZ_ASSERT(base, "no event base");
    srv = core_http_server_new(base, "127.0.0.1", 0, &err);
    FUZZ_ASSERT(srv, "no server: %d", err);
    FUZZ_ASSERT(core_http_route(srv, "/", handler, NULL) == 0, "route");
    FUZZ_ASSERT(core_http_route(srv, "/exact", handler, NULL) == 0, "route");
    port = core_http_server_port(srv);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    char junk[65536];

    if (!base)
        setup();
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        close(fd);
        return 0;
    }
    size_t off = 0;
    int closed = 0;
    for (int round = 0; round < 200 && !closed; round++) {
        if (off < size) {
            ssize_t w = send(fd, data + off, size - off, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && errno != EAGAIN)
                break;
        } else if (round > 0) {
            shutdown(fd, SHUT_WR); /* all sent: let the server see the end */
        }
        event_base_loop(base, EVLOOP_NONBLOCK);
        for (;;) {
            ssize_t r = recv(fd, junk, sizeof(junk), MSG_DONTWAIT);
            if (r > 0)
                continue;
            closed = r == 0 || (r < 0 && errno != EAGAIN);
            break;
        }
    }
    close(fd);
    /* Let the server notice and free the connection. */
    for (int i = 0; i < 4; i++)
        event_base_loop(base, EVLOOP_NONBLOCK);
    return 0;
}
