/*
 * Check suite for core/listener.c: address helpers, TCP listeners on
 * 127.0.0.1 and ::1 with ephemeral ports, real connections, peers, pause,
 * free from the accept callback, and the EMFILE back-off.
 *
 * Clients connect with blocking connect() on loopback, which completes in
 * the kernel backlog before the loop runs; every loop run is bounded.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "listener.h"
#include "metrics.h"
#include "log.h"
#include "reactor.h"
#include "loop.h"
#include "testutil.h"

#define MAX_CONN 16

struct acc {
    int n;
    int fd[MAX_CONN];
    char peer[MAX_CONN][CORE_SOCKADDR_STRLEN];
    int stop_after;
    int free_at;  /* free the listener when n reaches this */
    int pause_at; /* pause the listener when n reaches this */
    plb_listener *l;
};

static void
acc_cb(plb_listener *l, int fd, const char *peer, void *arg)
{
    struct acc *a = arg;

    ck_assert_ptr_eq(l, a->l);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_lt(a->n, MAX_CONN);
    a->fd[a->n] = fd;
    snprintf(a->peer[a->n], sizeof a->peer[a->n], "%s", peer);
    a->n++;
    if (a->pause_at && a->n == a->pause_at)
        core_listener_pause(l, 1);
    if (a->free_at && a->n == a->free_at) {
        core_listener_free(l);
        a->l = NULL;
    }
    if (a->stop_after && a->n == a->stop_after)
        event_base_loopbreak(base);
}

static void
acc_close_all(struct acc *a)
{
    for (int i = 0; i < a->n; i++)
        close(a->fd[i]);
    a->n = 0;
}

/* A blocking client connected to ip:port; its local address in local. */
static int
client_connect(const char *ip, int port, char *local, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    ck_assert_int_eq(core_sockaddr_parse(ip, port, &ss, &sl), 0);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&ss, sl), 0);
    if (local) {
        struct sockaddr_storage me;
        socklen_t ml = sizeof me;
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&me, &ml), 0);
        core_sockaddr_format((struct sockaddr *)&me, local, len);
    }
    return fd;
}

START_TEST(test_sockaddr_parse)
{
    struct sockaddr_storage ss;
    socklen_t len;

    ck_assert_int_eq(core_sockaddr_parse("127.0.0.1", 8080, &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET);
    ck_assert_uint_eq(len, sizeof(struct sockaddr_in));
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    ck_assert_uint_eq(ntohs(sin->sin_port), 8080);
    ck_assert_uint_eq(ntohl(sin->sin_addr.s_addr), 0x7f000001u);

    ck_assert_int_eq(core_sockaddr_parse("::1", 0, &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET6);
    ck_assert_uint_eq(len, sizeof(struct sockaddr_in6));
    ck_assert(IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr));

    ck_assert_int_eq(core_sockaddr_parse("[2001:db8::7]", 65535, &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET6);
    ck_assert_uint_eq(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 65535);
    ck_assert_int_eq(core_sockaddr_parse("0.0.0.0", 1, &ss, &len), 0);
    ck_assert_int_eq(core_sockaddr_parse("::", 1, &ss, &len), 0);

    const char *bad[] = {"",     "localhost", "1.2.3",  "1.2.3.4.5",  "256.1.1.1", "[1.2.3.4]",
                         "[::1", "::1]",      "::1%lo", "1.2.3.4:80", " 1.2.3.4",  "[]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(core_sockaddr_parse(bad[i], 80, &ss, &len) == -EINVAL, "accepted '%s'",
                      bad[i]);
    ck_assert_int_eq(core_sockaddr_parse(NULL, 80, &ss, &len), -EINVAL);
    ck_assert_int_eq(core_sockaddr_parse("127.0.0.1", -1, &ss, &len), -EINVAL);
    ck_assert_int_eq(core_sockaddr_parse("127.0.0.1", 65536, &ss, &len), -EINVAL);
}
END_TEST

/* ip:port parses and formats as want. */
static void
format_is(const char *ip, int port, const char *want)
{
    struct sockaddr_storage ss;
    socklen_t len;
    char buf[CORE_SOCKADDR_STRLEN];

    ck_assert_int_eq(core_sockaddr_parse(ip, port, &ss, &len), 0);
    core_sockaddr_format((struct sockaddr *)&ss, buf, sizeof buf);
    ck_assert_str_eq(buf, want);
}

START_TEST(test_sockaddr_format)
{
    struct sockaddr_storage ss;
    socklen_t len;
    char buf[CORE_SOCKADDR_STRLEN];

    format_is("10.1.2.3", 5, "10.1.2.3:5");
    format_is("[::1]", 6443, "[::1]:6443");
    format_is("2001:DB8:0:0:0:0:0:1", 443, "[2001:db8::1]:443");
    /* The longest form fits CORE_SOCKADDR_STRLEN. */
    format_is("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", 65535,
              "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
    /* The extremes of each IPv4 field and of the port. */
    format_is("0.0.0.0", 0, "0.0.0.0:0");
    format_is("255.255.255.255", 65535, "255.255.255.255:65535");
    format_is("192.0.20.109", 10080, "192.0.20.109:10080");
    format_is("::ffff:10.0.0.1", 7445, "[::ffff:10.0.0.1]:7445");

    /* Truncation keeps a terminator, at every length. */
    ck_assert_int_eq(core_sockaddr_parse("[::1]", 6443, &ss, &len), 0);
    for (size_t n = 1; n <= sizeof "[::1]:6443"; n++) {
        char cut[sizeof "[::1]:6443"];
        memset(cut, 'x', sizeof cut);
        core_sockaddr_format((struct sockaddr *)&ss, cut, n);
        ck_assert_uint_eq(strlen(cut), n - 1);
        ck_assert_int_eq(strncmp(cut, "[::1]:6443", n - 1), 0);
    }
    char small[6];
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(core_sockaddr_parse("10.1.2.3", 5, &ss, &len), 0);
    core_sockaddr_format((struct sockaddr *)&ss, small, sizeof small);
    ck_assert_str_eq(small, "10.1.");

    struct sockaddr_un un = {.sun_family = AF_UNIX};
    core_sockaddr_format((struct sockaddr *)&un, buf, sizeof buf);
    ck_assert_str_eq(buf, "unknown");
    core_sockaddr_format(NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "unknown");
}
END_TEST

/* Listen on ip:0, connect n clients, check each accepted fd and peer. */
static void
accept_on(const char *ip)
{
    enum { N = 4 };
    struct acc a = {.stop_after = N};
    int err = 1;

    a.l = core_listen_tcp(base, ip, 0, 16, acc_cb, &a, &err);
    ck_assert_msg(a.l != NULL, "listen on %s: %s", ip, strerror(-err));
    ck_assert_int_eq(err, 0);
    int port = core_listener_port(a.l);
    ck_assert_int_gt(port, 0);
    ck_assert_int_le(port, 65535);

    int cfd[N];
    char local[N][CORE_SOCKADDR_STRLEN];
    for (int i = 0; i < N; i++)
        cfd[i] = client_connect(ip, port, local[i], sizeof local[i]);
    run_for(3000);
    ck_assert_int_eq(a.n, N);

    for (int i = 0; i < N; i++) {
        /* Accepted in order; the peer is the client's own address. */
        ck_assert_str_eq(a.peer[i], local[i]);
        int fl = fcntl(a.fd[i], F_GETFL);
        ck_assert_int_ne(fl & O_NONBLOCK, 0);
        int fdfl = fcntl(a.fd[i], F_GETFD);
        ck_assert_int_ne(fdfl & FD_CLOEXEC, 0);
        /* A real connection: bytes flow both ways. */
        char c = 'a' + (char)i, d = 0;
        ck_assert_int_eq(write(cfd[i], &c, 1), 1);
        ck_assert_int_eq(recv(a.fd[i], &d, 1, MSG_WAITALL), 1);
        ck_assert_int_eq(d, c);
        ck_assert_int_eq(write(a.fd[i], "k", 1), 1);
        ck_assert_int_eq(read(cfd[i], &d, 1), 1);
        ck_assert_int_eq(d, 'k');
        close(cfd[i]);
    }
    acc_close_all(&a);
    core_listener_free(a.l);

    /* Freed: the port is closed. */
    struct sockaddr_storage ss;
    socklen_t sl;
    ck_assert_int_eq(core_sockaddr_parse(ip, port, &ss, &sl), 0);
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&ss, sl), -1);
    ck_assert_int_eq(errno, ECONNREFUSED);
    close(fd);
}

START_TEST(test_accept_ipv4)
{
    accept_on("127.0.0.1");
}
END_TEST

START_TEST(test_accept_ipv6)
{
    accept_on("::1");
    accept_on("[::1]");
}
END_TEST

/* IPV6_V6ONLY: "::" and "0.0.0.0" on the same port coexist. */
START_TEST(test_v6only)
{
    struct acc a6 = {0}, a4 = {.stop_after = 1};
    int err = 0;
    a6.l = core_listen_tcp(base, "::", 0, 0, acc_cb, &a6, &err);
    ck_assert_msg(a6.l != NULL, "listen on [::]: %s", strerror(-err));
    int port = core_listener_port(a6.l);
    a4.l = core_listen_tcp(base, "0.0.0.0", port, 0, acc_cb, &a4, &err);
    ck_assert_msg(a4.l != NULL, "listen on 0.0.0.0:%d beside [::]: %s", port, strerror(-err));
    ck_assert_int_eq(core_listener_port(a4.l), port);

    /* An IPv4 client reaches the IPv4 listener, not the IPv6 one. */
    char local[CORE_SOCKADDR_STRLEN];
    int c = client_connect("127.0.0.1", port, local, sizeof local);
    run_for(3000);
    ck_assert_int_eq(a4.n, 1);
    ck_assert_int_eq(a6.n, 0);
    ck_assert_str_eq(a4.peer[0], local);
    close(c);
    acc_close_all(&a4);
    core_listener_free(a4.l);
    core_listener_free(a6.l);
}
END_TEST

START_TEST(test_listen_errors)
{
    struct acc a = {0}, b = {0};
    int err = 0;

    a.l = core_listen_tcp(base, "127.0.0.1", 0, 0, acc_cb, &a, &err);
    ck_assert_ptr_nonnull(a.l);
    int port = core_listener_port(a.l);
    err = 0;
    ck_assert_ptr_null(core_listen_tcp(base, "127.0.0.1", port, 0, acc_cb, &b, &err));
    ck_assert_int_eq(err, -EADDRINUSE);
    err = 0;
    ck_assert_ptr_null(core_listen_tcp(base, "localhost", 0, 0, acc_cb, &b, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(core_listen_tcp(base, "127.0.0.1", 70000, 0, acc_cb, &b, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(core_listen_tcp(base, "127.0.0.1", 0, 0, NULL, &b, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(core_listen_tcp(NULL, "127.0.0.1", 0, 0, acc_cb, &b, &err));
    ck_assert_int_eq(err, -EINVAL);
    /* 192.0.2.1 (TEST-NET-1) is not a local address. */
    err = 0;
    ck_assert_ptr_null(core_listen_tcp(base, "192.0.2.1", 0, 0, acc_cb, &b, &err));
    ck_assert_int_eq(err, -EADDRNOTAVAIL);
    /* err may be NULL. */
    ck_assert_ptr_null(core_listen_tcp(base, "nope", 0, 0, acc_cb, &b, NULL));

    ck_assert_int_eq(core_listener_port(NULL), -1);
    ck_assert_int_eq(core_listener_fd(NULL), -1);
    core_listener_pause(NULL, 1);
    core_listener_free(NULL);
    core_listener_free(a.l);
}
END_TEST

/* Options set on the listening socket reach every accepted socket: the
 * promise listener_fd makes to modules. */
START_TEST(test_listener_fd_options_are_inherited)
{
    struct acc a = {.stop_after = 1};
    int err = 0, one = 1, idle = 17, ut = 23000, v;
    socklen_t vl = sizeof v;

    a.l = core_listen_tcp(base, "127.0.0.1", 0, 16, acc_cb, &a, &err);
    ck_assert_ptr_nonnull(a.l);
    int lfd = core_listener_fd(a.l);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_ne(fcntl(lfd, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_eq(setsockopt(lfd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one), 0);
    ck_assert_int_eq(setsockopt(lfd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle), 0);
    ck_assert_int_eq(setsockopt(lfd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof ut), 0);
    ck_assert_int_eq(setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);

    int cfd = client_connect("127.0.0.1", core_listener_port(a.l), NULL, 0);
    run_for(3000);
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(getsockopt(a.fd[0], SOL_SOCKET, SO_KEEPALIVE, &v, &vl), 0);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(getsockopt(a.fd[0], IPPROTO_TCP, TCP_KEEPIDLE, &v, &vl), 0);
    ck_assert_int_eq(v, idle);
    ck_assert_int_eq(getsockopt(a.fd[0], IPPROTO_TCP, TCP_USER_TIMEOUT, &v, &vl), 0);
    ck_assert_int_eq(v, ut);
    ck_assert_int_eq(getsockopt(a.fd[0], IPPROTO_TCP, TCP_NODELAY, &v, &vl), 0);
    ck_assert_int_eq(v, 1);
    close(cfd);
    acc_close_all(&a);
    core_listener_free(a.l);
}
END_TEST

START_TEST(test_pause_resume)
{
    struct acc a = {0};
    a.l = core_listen_tcp(base, "127.0.0.1", 0, 0, acc_cb, &a, NULL);
    ck_assert_ptr_nonnull(a.l);
    int port = core_listener_port(a.l);

    core_listener_pause(a.l, 1);
    int c1 = client_connect("127.0.0.1", port, NULL, 0); /* waits in the backlog */
    run_for(150);
    ck_assert_int_eq(a.n, 0);

    a.stop_after = 1;
    core_listener_pause(a.l, 0);
    run_for(3000);
    ck_assert_int_eq(a.n, 1);

    /* Paused from inside the callback: the second connection waits. */
    a.pause_at = 2;
    a.stop_after = 0;
    int c2 = client_connect("127.0.0.1", port, NULL, 0);
    int c3 = client_connect("127.0.0.1", port, NULL, 0);
    run_for(200);
    ck_assert_int_eq(a.n, 2);
    a.pause_at = 0;
    a.stop_after = 3;
    core_listener_pause(a.l, 0);
    run_for(3000);
    ck_assert_int_eq(a.n, 3);

    close(c1);
    close(c2);
    close(c3);
    acc_close_all(&a);
    core_listener_free(a.l);
}
END_TEST

START_TEST(test_free_inside_accept)
{
    struct acc a = {.free_at = 1};
    a.l = core_listen_tcp(base, "127.0.0.1", 0, 0, acc_cb, &a, NULL);
    ck_assert_ptr_nonnull(a.l);
    int port = core_listener_port(a.l);
    int c1 = client_connect("127.0.0.1", port, NULL, 0);
    int c2 = client_connect("127.0.0.1", port, NULL, 0);
    run_for(200);
    /* Freed on the first connection: the second is never accepted. */
    ck_assert_int_eq(a.n, 1);
    ck_assert_ptr_null(a.l);
    /* The accepted connection stays open and usable. */
    ck_assert_int_eq(write(c1, "q", 1), 1);
    char d = 0;
    ck_assert_int_eq(recv(a.fd[0], &d, 1, MSG_WAITALL), 1);
    ck_assert_int_eq(d, 'q');
    close(c1);
    close(c2);
    acc_close_all(&a);
}
END_TEST

static int
count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* Out of descriptors: the listener backs off instead of spinning, logs
 * once, and accepts the waiting connections once descriptors free up. */
START_TEST(test_emfile_backoff)
{
    enum { N = 3 };
    struct acc a = {0};
    char *logbuf = NULL;
    size_t loglen = 0;
    FILE *logf = open_memstream(&logbuf, &loglen);
    ck_assert_ptr_nonnull(logf);
    core_log_setup(PLB_LOG_INFO, CORE_LOG_LOGFMT, logf);

    a.l = core_listen_tcp(base, "127.0.0.1", 0, 0, acc_cb, &a, NULL);
    ck_assert_ptr_nonnull(a.l);
    int port = core_listener_port(a.l);
    struct core_metrics *reg = core_metrics_new();
    ck_assert_ptr_nonnull(reg);
    static const char *const lnames[] = {"listener", NULL};
    plb_metric *errs = core_metric_new(reg, PLB_METRIC_COUNTER, "prismlb_accept_errors_total", "e",
                                       lnames, NULL, 0, NULL);
    ck_assert_ptr_nonnull(errs);
    core_listener_count_errors(a.l, errs);
    char lname[CORE_SOCKADDR_STRLEN];
    snprintf(lname, sizeof lname, "127.0.0.1:%d", port);
    const char *lvals[] = {lname, NULL};
    double nerr = -1;
    ck_assert_int_eq(core_metric_get(errs, lvals, &nerr), 0);
    ck_assert(nerr == 0);
    int c[N];
    for (int i = 0; i < N; i++)
        c[i] = client_connect("127.0.0.1", port, NULL, 0);

    /* Fill the descriptor table under a small limit. */
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    lim = old;
    lim.rlim_cur = 128;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
    int fill[128];
    int nfill = 0;
    for (;;) {
        int fd = dup(0);
        if (fd < 0) {
            ck_assert_int_eq(errno, EMFILE);
            break;
        }
        ck_assert_int_lt(nfill, 128);
        fill[nfill++] = fd;
    }

    double cpu0 = tu_cpu_seconds();
    run_for(600);
    double cpu = tu_cpu_seconds() - cpu0;
    ck_assert_int_eq(a.n, 0);
    /* A spinning loop would burn the whole 600 ms. */
    ck_assert_msg(cpu < 0.05, "loop used %.3f s of CPU in 0.6 s while out of fds", cpu);
    fflush(logf);
    ck_assert_int_eq(count_lines_with(logbuf, "accept failed"), 1);
    ck_assert_ptr_nonnull(strstr(logbuf, strerror(EMFILE)));
    /* Every failure counted (one per 100 ms pause: a few, not thousands). */
    ck_assert_int_eq(core_metric_get(errs, lvals, &nerr), 0);
    ck_assert_msg(nerr >= 1 && nerr <= 20, "prismlb_accept_errors_total %g", nerr);

    for (int i = 0; i < nfill; i++)
        close(fill[i]);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    /* Recovered: the waiting connections and new ones are accepted. (Under
     * valgrind, whose fd limit is emulated, the waiting ones were accepted
     * and closed by valgrind itself; the new ones must still arrive.) */
    char local[2][CORE_SOCKADDR_STRLEN];
    int late[2];
    for (int i = 0; i < 2; i++)
        late[i] = client_connect("127.0.0.1", port, local[i], sizeof local[i]);
    run_for(1000);
    fflush(logf);
    ck_assert_msg(a.n >= 2 && a.n <= N + 2, "accepted %d after fds freed; log:\n%s", a.n, logbuf);
    for (int i = 0; i < 2; i++) {
        int found = 0;
        for (int k = 0; k < a.n; k++)
            found += strcmp(a.peer[k], local[i]) == 0;
        ck_assert_msg(found == 1, "client %s accepted %d times", local[i], found);
        close(late[i]);
    }
    ck_assert_int_eq(count_lines_with(logbuf, "accepting connections again"), 1);

    core_log_setup(PLB_LOG_INFO, CORE_LOG_LOGFMT, NULL);
    fclose(logf);
    free(logbuf);
    for (int i = 0; i < N; i++)
        close(c[i]);
    acc_close_all(&a);
    core_listener_free(a.l);
    core_metrics_free(reg);
}
END_TEST

/* User pause during a back-off: the back-off's end does not resume it. */
START_TEST(test_pause_during_backoff)
{
    struct acc a = {0};
    FILE *devnull = fopen("/dev/null", "w");
    ck_assert_ptr_nonnull(devnull);
    core_log_setup(PLB_LOG_INFO, CORE_LOG_LOGFMT, devnull);
    a.l = core_listen_tcp(base, "127.0.0.1", 0, 0, acc_cb, &a, NULL);
    ck_assert_ptr_nonnull(a.l);
    int c = client_connect("127.0.0.1", core_listener_port(a.l), NULL, 0);

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
    run_for(50); /* the accept fails: back-off starts */
    core_listener_pause(a.l, 1);
    for (int i = 0; i < nfill; i++)
        close(fill[i]);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    run_for(3 * CORE_LISTENER_RETRY_MS);
    ck_assert_int_eq(a.n, 0);
    char local[CORE_SOCKADDR_STRLEN];
    int c2 = client_connect("127.0.0.1", core_listener_port(a.l), local, sizeof local);
    run_for(2 * CORE_LISTENER_RETRY_MS);
    ck_assert_int_eq(a.n, 0);
    core_listener_pause(a.l, 0);
    run_for(1000);
    /* c (unless valgrind's emulated fd limit dropped it) and c2 */
    ck_assert_int_ge(a.n, 1);
    ck_assert_str_eq(a.peer[a.n - 1], local);
    close(c2);

    core_log_setup(PLB_LOG_INFO, CORE_LOG_LOGFMT, NULL);
    fclose(devnull);
    close(c);
    acc_close_all(&a);
    core_listener_free(a.l);
}
END_TEST

static Suite *
listener_suite(void)
{
    Suite *s = suite_create("listener");
    TCase *tc = tcase_create("addresses");
    tcase_add_test(tc, test_sockaddr_parse);
    tcase_add_test(tc, test_sockaddr_format);
    suite_add_tcase(s, tc);

    tc = tcase_create("tcp");
    tcase_add_checked_fixture(tc, loop_setup, loop_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_accept_ipv4);
    tcase_add_test(tc, test_accept_ipv6);
    tcase_add_test(tc, test_v6only);
    tcase_add_test(tc, test_listen_errors);
    tcase_add_test(tc, test_listener_fd_options_are_inherited);
    tcase_add_test(tc, test_pause_resume);
    tcase_add_test(tc, test_free_inside_accept);
    tcase_add_test(tc, test_emfile_backoff);
    tcase_add_test(tc, test_pause_during_backoff);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(listener_suite());
}
