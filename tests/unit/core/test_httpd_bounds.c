/*
 * Check suite for core/httpd.c's bounds on hostile clients: the request
 * timeout (nothing sent, or a request head trickled a byte at a time), the
 * connection cap (the longest-waiting connection makes room for a fresh
 * client; a canned 503 when every other one is in a handler), and the
 * accept batch (a backlog of connections is accepted a few per wakeup, so
 * other events run in between).
 *
 * Everything runs on this thread: the clients are non-blocking sockets and
 * the loop runs in bounded steps between their moves. No outcome depends on
 * how fast the machine is: waits are "until X, at most N seconds".
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "httpd.h"
#include "reactor.h"
#include "loop.h"
#include "testutil.h"

/* A non-blocking client socket connected (or connecting) to port. */
static int
connect_to(int port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(fd, (struct sockaddr *)&sin, sizeof sin);
    ck_assert_msg(rc == 0 || errno == EINPROGRESS, "connect: %s", strerror(errno));
    return fd;
}

static void
send_all(int fd, const char *s)
{
    size_t n = strlen(s);
    ck_assert_int_eq(send(fd, s, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* 1 once the server closed fd (EOF or reset), 0 while it is open; reads
 * what arrived into buf (may be NULL) first. */
static int
closed_by_server(int fd, char *buf, size_t cap, size_t *len)
{
    for (;;) {
        char junk[4096];
        char *dst = buf ? buf + *len : junk;
        size_t room = buf ? cap - 1 - *len : sizeof junk;
        if (room == 0)
            return 0;
        ssize_t r = recv(fd, dst, room, MSG_DONTWAIT);
        if (r > 0) {
            if (buf) {
                *len += (size_t)r;
                buf[*len] = '\0';
            }
            continue;
        }
        if (r == 0)
            return 1;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : 1;
    }
}

/* Run the loop in 5 ms steps until fd is closed by the server, at most
 * limit_ms; the time it took, or -1. */
static int64_t
wait_closed(int fd, char *buf, size_t cap, size_t *len, int64_t limit_ms)
{
    int64_t start = core_now_ms();
    while (core_now_ms() - start < limit_ms) {
        if (closed_by_server(fd, buf, cap, len))
            return core_now_ms() - start;
        run_for(5);
    }
    return -1;
}

static void
ok_handler(plb_http_exchange *x, void *arg)
{
    int *calls = arg;
    (*calls)++;
    core_http_reply(x, 200, "text/plain", "ok\n", 3, NULL);
}

static plb_http_exchange *held[4];
static int nheld;

static void
hold_handler(plb_http_exchange *x, void *arg)
{
    (void)arg;
    ck_assert_int_lt(nheld, 4);
    held[nheld++] = x;
}

static plb_http_server *
server(void)
{
    int err = 1;
    plb_http_server *s = core_http_server_new(base, "127.0.0.1", 0, &err);
    ck_assert_msg(s != NULL, "server: %s", strerror(-err));
    return s;
}

static struct core_http_stats
stats(plb_http_server *s)
{
    struct core_http_stats st;
    core_http_server_stats(s, &st);
    return st;
}

/* A connection that sends nothing, and one that sends its request head a
 * byte every 200 ms (so that no read timeout ever fires), are both closed
 * once the request timeout has passed since they connected. */
START_TEST(request_timeout_closes_silent_and_trickling_clients)
{
    int calls = 0;
    plb_http_server *s = server();
    ck_assert_int_eq(core_http_route(s, "/", ok_handler, &calls), 0);
    ck_assert_int_eq(core_http_server_set_limits(s, 0, 100), -EINVAL);
    ck_assert_int_eq(core_http_server_set_limits(s, 8, 0), -EINVAL);
    ck_assert_int_eq(core_http_server_set_limits(NULL, 8, 100), -EINVAL);
    ck_assert_int_eq(core_http_server_set_limits(s, 8, 1000), 0);
    int port = core_http_server_port(s);

    const char *head = "GET /slowly HTTP/1.1\r\nHost: t\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    int64_t start = core_now_ms();
    int silent = connect_to(port);
    int trickle = connect_to(port);
    int64_t silent_closed = -1, trickle_closed = -1;
    size_t sent = 0, none = 0;
    int64_t next = start;
    while (core_now_ms() - start < 8000 && (silent_closed < 0 || trickle_closed < 0)) {
        if (silent_closed < 0 && closed_by_server(silent, NULL, 0, &none))
            silent_closed = core_now_ms() - start;
        if (trickle_closed < 0 && closed_by_server(trickle, NULL, 0, &none))
            trickle_closed = core_now_ms() - start;
        if (trickle_closed < 0 && core_now_ms() >= next && head[sent]) {
            /* The send may fail once the server has closed. */
            (void)send(trickle, head + sent, 1, MSG_NOSIGNAL);
            sent++;
            next += 200;
        }
        run_for(5);
    }
    ck_assert_msg(silent_closed >= 1000 && silent_closed < 6000,
                  "silent client closed after %lld ms", (long long)silent_closed);
    ck_assert_msg(trickle_closed >= 1000 && trickle_closed < 6000,
                  "trickling client closed after %lld ms", (long long)trickle_closed);
    ck_assert_msg(head[sent] != '\0', "the whole head went out before the close");
    ck_assert_int_eq(calls, 0);
    ck_assert_uint_eq(stats(s).timed_out, 2);
    ck_assert_int_eq(stats(s).conns, 0);
    close(silent);
    close(trickle);

    /* A prompt client on a kept-alive connection: answered, then closed
     * once it has waited that long for its next request. */
    int ka = connect_to(port);
    send_all(ka, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    char buf[1024];
    size_t len = 0;
    int64_t took = wait_closed(ka, buf, sizeof buf, &len, 5000);
    ck_assert_msg(took >= 900, "closed after %lld ms", (long long)took);
    ck_assert_ptr_nonnull(strstr(buf, "HTTP/1.1 200"));
    ck_assert_int_eq(calls, 1);
    close(ka);
    core_http_server_free(s);
}
END_TEST

/* Over the cap, the connection that has waited for a request the longest
 * is closed to make room, so a fresh client is served however many idle
 * ones came before it. */
START_TEST(cap_closes_longest_waiting_for_a_fresh_client)
{
    int calls = 0;
    plb_http_server *s = server();
    ck_assert_int_eq(core_http_route(s, "/", ok_handler, &calls), 0);
    ck_assert_int_eq(core_http_server_set_limits(s, 4, 60000), 0);
    int port = core_http_server_port(s);

    int idle[40];
    for (int i = 0; i < 40; i++)
        idle[i] = connect_to(port);
    for (int i = 0; i < 400 && stats(s).accepted < 40; i++)
        run_for(5);
    ck_assert_uint_eq(stats(s).accepted, 40);
    run_for(5);
    ck_assert_int_le(stats(s).conns, 4);
    ck_assert_uint_eq(stats(s).evicted, 36);

    int fresh = connect_to(port);
    send_all(fresh, "GET /fresh HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    char buf[1024];
    size_t len = 0;
    ck_assert_int_ge(wait_closed(fresh, buf, sizeof buf, &len, 5000), 0);
    ck_assert_ptr_nonnull(strstr(buf, "HTTP/1.1 200"));
    ck_assert_int_eq(calls, 1);

    /* The oldest were closed, the newest still open. */
    size_t none = 0;
    ck_assert_int_eq(closed_by_server(idle[0], NULL, 0, &none), 1);
    ck_assert_int_eq(closed_by_server(idle[39], NULL, 0, &none), 0);
    for (int i = 0; i < 40; i++)
        close(idle[i]);
    close(fresh);
    core_http_server_free(s);
}
END_TEST

/* Over the cap with every other connection in a handler, the newcomer gets
 * a canned 503 and is closed; those in handlers are untouched. */
START_TEST(cap_refuses_newcomer_when_all_are_busy)
{
    plb_http_server *s = server();
    ck_assert_int_eq(core_http_route(s, "/", hold_handler, NULL), 0);
    ck_assert_int_eq(core_http_server_set_limits(s, 2, 60000), 0);
    int port = core_http_server_port(s);
    nheld = 0;

    int a = connect_to(port), b = connect_to(port);
    send_all(a, "GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    send_all(b, "GET /b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    for (int i = 0; i < 1000 && nheld < 2; i++)
        run_for(5);
    ck_assert_int_eq(nheld, 2);

    int c = connect_to(port);
    send_all(c, "GET /c HTTP/1.1\r\nHost: t\r\n\r\n");
    char buf[1024];
    size_t len = 0;
    ck_assert_int_ge(wait_closed(c, buf, sizeof buf, &len, 5000), 0);
    ck_assert_ptr_nonnull(strstr(buf, "HTTP/1.1 503"));
    ck_assert_ptr_nonnull(strstr(buf, "too many clients"));
    ck_assert_uint_eq(stats(s).refused, 1);
    ck_assert_int_eq(nheld, 2);

    for (int i = 0; i < 2; i++)
        core_http_reply(held[i], 200, "text/plain", "late\n", 5, NULL);
    int fds[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        len = 0;
        ck_assert_int_ge(wait_closed(fds[i], buf, sizeof buf, &len, 5000), 0);
        ck_assert_ptr_nonnull(strstr(buf, "late"));
        close(fds[i]);
    }
    close(c);
    core_http_server_free(s);
}
END_TEST

/* A zero timer re-armed from its own callback fires once per loop
 * iteration: count the accepts between two of its runs. */
struct probe {
    struct event *ev;
    plb_http_server *s;
    uint64_t last;
    uint64_t max_delta;
    int runs;
};

static void
probe_cb(evutil_socket_t fd, short what, void *arg)
{
    struct probe *p = arg;
    struct timeval zero = {0, 0};
    uint64_t now = stats(p->s).accepted;
    (void)fd;
    (void)what;
    if (now - p->last > p->max_delta)
        p->max_delta = now - p->last;
    p->last = now;
    p->runs++;
    ck_assert_int_eq(evtimer_add(p->ev, &zero), 0);
}

/* 300 connections waiting in the backlog are accepted at most 16 per loop
 * iteration: the other events of the loop run between the batches. */
START_TEST(accepts_are_batched_per_wakeup)
{
    int calls = 0;
    plb_http_server *s = server();
    ck_assert_int_eq(core_http_route(s, "/", ok_handler, &calls), 0);
    int port = core_http_server_port(s);

    int fds[300];
    for (int i = 0; i < 300; i++)
        fds[i] = connect_to(port);
    struct probe p = {.s = s};
    p.ev = evtimer_new(base, probe_cb, &p);
    ck_assert_ptr_nonnull(p.ev);
    struct timeval zero = {0, 0};
    ck_assert_int_eq(evtimer_add(p.ev, &zero), 0);
    for (int i = 0; i < 1000 && stats(s).accepted < 300; i++)
        run_for(5);
    event_free(p.ev);
    ck_assert_uint_eq(stats(s).accepted, 300);
    ck_assert_msg(p.max_delta <= 16, "%llu accepts in one loop iteration",
                  (unsigned long long)p.max_delta);
    ck_assert_int_ge(p.runs, 300 / 16);
    /* Under the default cap of 256, the oldest 44 made room. */
    run_for(5);
    ck_assert_int_le(stats(s).conns, CORE_HTTPD_MAX_CONNS);
    ck_assert_uint_eq(stats(s).evicted, 300 - CORE_HTTPD_MAX_CONNS);
    for (int i = 0; i < 300; i++)
        close(fds[i]);
    for (int i = 0; i < 1000 && stats(s).conns > 0; i++)
        run_for(5);
    ck_assert_int_eq(stats(s).conns, 0);
    core_http_server_free(s);
}
END_TEST

static Suite *
bounds_suite(void)
{
    Suite *s = suite_create("httpd-bounds");
    TCase *tc = tcase_create("bounds");
    tcase_add_checked_fixture(tc, loop_setup, loop_teardown);
    tcase_set_timeout(tc, 40);
    tcase_add_test(tc, request_timeout_closes_silent_and_trickling_clients);
    tcase_add_test(tc, cap_closes_longest_waiting_for_a_fresh_client);
    tcase_add_test(tc, cap_refuses_newcomer_when_all_are_busy);
    tcase_add_test(tc, accepts_are_batched_per_wakeup);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(bounds_suite());
}
