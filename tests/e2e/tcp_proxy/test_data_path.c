/*
 * tcp_proxy end to end: the daemon with a tcp_proxy instance in front of
 * plain TCP upstreams on 127.0.0.1 (threads of this test), its upstream set
 * driven through a file_endpoints source. Data path (half-close, a large
 * transfer through splice, socket options), draining of removed endpoints,
 * the retry of a dial whose upstream starts draining, and health checks
 * that a blackholed upstream does not delay.
 */
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

/* Fast health checks so tests stay short (timeout < interval, >= 1 s). */
#define FAST "health_interval = \"1100ms\"; health_timeout = \"1s\";"

static struct proxy px;

static void
start_proxy(const char *settings, const char *const *eps, size_t n)
{
    ck_assert_msg(proxy_start(&px, settings, eps, n) == 0, "prismlb did not start: %s",
                  px.dir ? proxy_log(&px) : "(no dir)");
}

static void
stop_proxy(void)
{
    int st = proxy_stop(&px);
    ck_assert_msg(st == 0, "prismlb exit status %d", st);
}

/* Connect through the proxy and read the upstream's hello id. */
static char
hello(int *fdp)
{
    int fd = tcp_connect(px.port, 3000);
    ck_assert_int_ge(fd, 0);
    char b[2] = {0, 0};
    long n = read_full(fd, b, 2, 5000);
    ck_assert_msg(n == 2 && b[1] == '\n', "no hello through the proxy (%ld bytes)", n);
    if (fdp)
        *fdp = fd;
    else
        close(fd);
    return b[0];
}

/* The connection still carries data both ways. */
static void
assert_echoes(int fd)
{
    char b[6] = {0};
    ck_assert_int_eq(write_full(fd, "ping!", 5), 0);
    ck_assert_int_eq(read_full(fd, b, 5, 3000), 5);
    ck_assert_str_eq(b, "ping!");
}

START_TEST(half_close_is_carried_through)
{
    struct srv a;
    ck_assert_int_eq(srv_start(&a, SRV_ECHO, 'a'), 0);
    const char *eps[] = {srv_ep(&a)};
    start_proxy(FAST, eps, 1);
    /* The data path runs where `threads` says: the worker loops, or the one
     * loop. */
    const char *threads = getenv("TP_THREADS");
    char *log = proxy_log(&px);
    if (threads && atoi(threads) > 1) {
        char want[64];
        snprintf(want, sizeof(want), "on %d worker loops", atoi(threads));
        ck_assert_msg(strstr(log, want) != NULL, "%s", log);
    } else {
        ck_assert_msg(strstr(log, "worker loops") == NULL, "%s", log);
    }
    free(log);

    int fd = tcp_connect(px.port, 3000);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write_full(fd, "hello", 5), 0);
    /* Our FIN must reach the upstream (it echoes, then closes its side
     * only after seeing EOF), and its data and FIN must come back to us
     * over our half-open connection. */
    ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
    char b[16] = {0};
    ck_assert_int_eq(read_full(fd, b, sizeof(b), 5000), 5);
    ck_assert_str_eq(b, "hello");
    ck_assert_int_ge(wait_eof(fd, 5000), 0);
    close(fd);
    stop_proxy();
    srv_stop(&a);
}
END_TEST

/* xorshift stream for the transfer. */
static uint64_t
xs(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

START_TEST(large_transfer_keeps_its_integrity_through_splice)
{
    const size_t total = 64u << 20;
    struct srv a;
    ck_assert_int_eq(srv_start(&a, SRV_ECHO, 'a'), 0);
    const char *eps[] = {srv_ep(&a)};
    start_proxy(FAST, eps, 1);

    int fd = tcp_connect(px.port, 3000);
    ck_assert_int_ge(fd, 0);
    uint64_t ws = 0x1234567, rs = 0x1234567;
    size_t sent = 0, got = 0, bad = 0;
    static unsigned char out[65536], in[65536];
    size_t out_len = 0, out_off = 0;
    long long end = tu_now_ms() + 60000;
    while (got < total && tu_now_ms() < end) {
        if (out_off == out_len && sent < total) {
            out_len = sizeof(out) < total - sent ? sizeof(out) : total - sent;
            for (size_t i = 0; i < out_len; i += 8) {
                uint64_t v = xs(&ws);
                memcpy(out + i, &v, 8);
            }
            out_off = 0;
        }
        struct pollfd pf = {fd, POLLIN | (out_off < out_len ? POLLOUT : 0), 0};
        if (poll(&pf, 1, 1000) <= 0)
            continue;
        if (pf.revents & POLLOUT) {
            ssize_t k = send(fd, out + out_off, out_len - out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (k > 0) {
                out_off += (size_t)k;
                sent += (size_t)k;
            }
        }
        if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t k = recv(fd, in, sizeof(in), MSG_DONTWAIT);
            ck_assert_msg(k != 0, "EOF after %zu of %zu bytes", got, total);
            if (k > 0) {
                /* Compare against the same stream, 8 bytes at a time:
                 * reads are 8-aligned only by chance, so keep a window. */
                static unsigned char want[65536 + 8];
                static size_t want_len, want_off;
                for (ssize_t i = 0; i < k; i++) {
                    if (want_off == want_len) {
                        uint64_t v = xs(&rs);
                        memcpy(want, &v, 8);
                        want_len = 8;
                        want_off = 0;
                    }
                    if (in[i] != want[want_off++])
                        bad++;
                }
                got += (size_t)k;
            }
        }
    }
    ck_assert_uint_eq(got, total);
    ck_assert_uint_eq(bad, 0);
    ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
    ck_assert_int_ge(wait_eof(fd, 5000), 0);
    close(fd);
    stop_proxy();
    srv_stop(&a);
}
END_TEST

/* The established sockets of filt (an ss filter) whose keepalive timer is
 * armed, within timeout_ms: 1, else 0 (*out: the last listing). */
static int
keepalive_within(const char *filt, int timeout_ms, char **out)
{
    char *argv[] = {"ss", "-tnoH", "state", "established", (char *)filt, NULL};
    long long end = tu_now_ms() + timeout_ms;
    for (;;) {
        free(*out);
        *out = NULL;
        ck_assert_int_eq(tu_run(argv, NULL, out, 10000), 0);
        if (strstr(*out, "timer:(keepalive,"))
            return 1;
        if (tu_now_ms() >= end)
            return 0;
        tu_sleep_ms(100);
    }
}

/* Both sides of a proxied connection have keepalive armed at 30 s: the
 * client side at once (inherited from the listener), the upstream side
 * within two seconds of the dial (set late, so that short connections
 * do not pay for it). */
START_TEST(keepalive_is_set_on_both_sides)
{
    struct srv a;
    ck_assert_int_eq(srv_start(&a, SRV_ECHO, 'a'), 0);
    const char *eps[] = {srv_ep(&a)};
    start_proxy(FAST, eps, 1);
    int fd = tcp_connect(px.port, 3000);
    ck_assert_int_ge(fd, 0);
    assert_echoes(fd);

    char filt[128], *out = NULL;
    /* The proxy's client-side socket: source port = proxy port. */
    snprintf(filt, sizeof(filt), "( sport = :%d )", px.port);
    ck_assert_msg(keepalive_within(filt, 0, &out), "client side: %s", out);
    /* The proxy's upstream socket: destination port = upstream port (the
     * echo server's own sockets have it as source port). Two sweeps 1 s
     * apart; the bound leaves room for a slow machine. */
    snprintf(filt, sizeof(filt), "( dport = :%d )", a.port);
    ck_assert_msg(keepalive_within(filt, 10000, &out), "upstream side: %s", out);
    free(out);
    close(fd);
    stop_proxy();
    srv_stop(&a);
}
END_TEST

/* Two hello servers; returns the connection's server index. */
static int
srv_index(char id)
{
    ck_assert(id == 'A' || id == 'B');
    return id == 'A' ? 0 : 1;
}

START_TEST(a_removed_endpoint_drains_and_then_closes)
{
    struct srv s[2];
    ck_assert_int_eq(srv_start(&s[0], SRV_HELLO, 'A'), 0);
    ck_assert_int_eq(srv_start(&s[1], SRV_HELLO, 'B'), 0);
    const char *eps[] = {srv_ep(&s[0]), srv_ep(&s[1])};
    start_proxy(FAST "drain_timeout = \"2s\";", eps, 2);

    int fd;
    int gone = srv_index(hello(&fd)), stay = !gone;
    const char *keep[] = {srv_ep(&s[stay])};
    proxy_set_endpoints(&px, keep, 1);
    long long removed = tu_now_ms();
    ck_assert_int_eq(proxy_wait_log(&px, "removed: draining", 3000), 0);
    /* New connections go elsewhere at once. */
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(srv_index(hello(NULL)), stay);
    /* The existing one keeps working during the drain... */
    assert_echoes(fd);
    /* ...and is force-closed when drain_timeout expires: not before (the
     * daemon read the new list after `removed`), and by the deadline. */
    long long eof = wait_eof(fd, 15000);
    ck_assert_int_ge(eof, 0);
    long long closed_after = tu_now_ms() - removed;
    ck_assert_msg(closed_after >= 1950, "closed %lld ms after removal", closed_after);
    ck_assert_int_eq(proxy_wait_log(&px, "why=\"drain deadline\"", 3000), 0);
    ck_assert_int_eq(proxy_wait_log(&px, "drained and removed", 3000), 0);
    close(fd);
    stop_proxy();
    srv_stop(&s[0]);
    srv_stop(&s[1]);
}
END_TEST

START_TEST(re_adding_an_endpoint_aborts_its_drain)
{
    struct srv s[2];
    ck_assert_int_eq(srv_start(&s[0], SRV_HELLO, 'A'), 0);
    ck_assert_int_eq(srv_start(&s[1], SRV_HELLO, 'B'), 0);
    const char *eps[] = {srv_ep(&s[0]), srv_ep(&s[1])};
    start_proxy(FAST "drain_timeout = \"4s\";", eps, 2);

    int fd;
    int gone = srv_index(hello(&fd));
    const char *keep[] = {srv_ep(&s[!gone])};
    proxy_set_endpoints(&px, keep, 1);
    ck_assert_int_eq(proxy_wait_log(&px, "removed: draining", 3000), 0);
    proxy_set_endpoints(&px, eps, 2);
    ck_assert_int_eq(proxy_wait_log(&px, "drain called off", 3000), 0);
    /* Past the drain deadline (4 s after the removal), the connection is
     * still open. */
    ck_assert_int_eq(wait_eof(fd, 4500), -1);
    assert_echoes(fd);
    char *log = proxy_log(&px);
    ck_assert_msg(!strstr(log, "drained and removed"), "%s", log);
    free(log);
    close(fd);
    stop_proxy();
    srv_stop(&s[0]);
    srv_stop(&s[1]);
}
END_TEST

START_TEST(a_drain_timeout_of_0_closes_at_once)
{
    struct srv s[2];
    ck_assert_int_eq(srv_start(&s[0], SRV_HELLO, 'A'), 0);
    ck_assert_int_eq(srv_start(&s[1], SRV_HELLO, 'B'), 0);
    const char *eps[] = {srv_ep(&s[0]), srv_ep(&s[1])};
    start_proxy(FAST "drain_timeout = 0;", eps, 2);

    int fd;
    int gone = srv_index(hello(&fd));
    const char *keep[] = {srv_ep(&s[!gone])};
    proxy_set_endpoints(&px, keep, 1);
    /* Closed by a deadline of 0 ms, that is at the removal. */
    ck_assert_int_ge(wait_eof(fd, 15000), 0);
    ck_assert_int_eq(proxy_wait_log(&px, "for up to 0 ms", 3000), 0);
    ck_assert_int_eq(proxy_wait_log(&px, "why=\"drain deadline\"", 3000), 0);
    close(fd);
    stop_proxy();
    srv_stop(&s[0]);
    srv_stop(&s[1]);
}
END_TEST

/* Wait up to timeout_ms until a socket on this host sends a SYN to port
 * that nothing answered (state SYN-SENT): 0, or -1. */
static int
wait_syn_sent(int port, int timeout_ms)
{
    char filt[64];
    snprintf(filt, sizeof(filt), "( dport = :%d )", port);
    char *argv[] = {"ss", "-tnH", "state", "syn-sent", filt, NULL};
    long long end = tu_now_ms() + timeout_ms;
    do {
        char *out = NULL;
        int found = tu_run(argv, NULL, &out, 10000) == 0 && out && out[0];
        free(out);
        if (found)
            return 0;
        tu_sleep_ms(20);
    } while (tu_now_ms() < end);
    return -1;
}

START_TEST(a_dial_whose_upstream_starts_draining_is_retried_on_another)
{
    struct srv hole, a;
    ck_assert_int_eq(srv_start(&hole, SRV_BLACKHOLE, 'X'), 0);
    ck_assert_int_eq(srv_start(&a, SRV_HELLO, 'A'), 0);
    const char *only_hole[] = {srv_ep(&hole)};
    /* A long dial timeout (= health_timeout): the dial to the blackhole
     * hangs; the retry must not wait for it. */
    start_proxy("health_interval = \"60s\"; health_timeout = \"50s\"; drain_timeout = \"90s\";",
                only_hole, 1);

    int fd = tcp_connect(px.port, 3000);
    ck_assert_int_ge(fd, 0);
    /* The dial to the blackhole is in progress: the kernel shows the
     * proxy's SYN to it unanswered. */
    ck_assert_int_eq(wait_syn_sent(hole.port, 10000), 0);
    const char *only_a[] = {srv_ep(&a)};
    proxy_set_endpoints(&px, only_a, 1);
    char b[2] = {0};
    ck_assert_int_eq(read_full(fd, b, 2, 30000), 2);
    ck_assert_int_eq(b[0], 'A');
    /* Retried because the upstream drains, not after a dial timeout. */
    ck_assert_int_eq(proxy_wait_log(&px, "why=\"drains during a dial\"", 1000), 0);
    char *log = proxy_log(&px);
    ck_assert_msg(!strstr(log, "dial failed"), "%s", log);
    free(log);
    close(fd);
    stop_proxy();
    srv_stop(&a);
    srv_stop(&hole);
}
END_TEST

/* Occurrences of needle in the daemon's log. */
static int
log_count(const char *needle)
{
    char *log = proxy_log(&px);
    int n = 0;
    for (const char *q = log; (q = strstr(q, needle)); q++)
        n++;
    free(log);
    return n;
}

/* Clients opening connections in a loop while an upstream stops. */
struct loop_client {
    pthread_t thread;
    int port;
    volatile int *after; /* connections each must open after the stop */
    int ok, failed, before, since;
    volatile int *stop_flag;
};

static void *
loop_client_run(void *arg)
{
    struct loop_client *lc = arg;
    long long end = tu_now_ms() + 30000;
    while (tu_now_ms() < end) {
        int stopped = __atomic_load_n(lc->stop_flag, __ATOMIC_ACQUIRE);
        if (stopped && lc->since >= *lc->after)
            break;
        int fd = tcp_connect(lc->port, 3000);
        char b[2] = {0, 0};
        long n = fd >= 0 ? read_full(fd, b, 2, 5000) : -1;
        if (fd >= 0)
            close(fd);
        if (n == 2 && b[1] == '\n')
            lc->ok++;
        else
            lc->failed++;
        if (stopped)
            lc->since++;
        else
            __atomic_add_fetch(&lc->before, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

START_TEST(an_upstream_stopped_while_clients_connect_fails_no_client)
{
    enum { CLIENTS = 20 };
    struct srv s[2];
    ck_assert_int_eq(srv_start(&s[0], SRV_HELLO, 'A'), 0);
    ck_assert_int_eq(srv_start(&s[1], SRV_HELLO, 'B'), 0);
    const char *eps[] = {srv_ep(&s[0]), srv_ep(&s[1])};
    start_proxy(FAST, eps, 2);

    static struct loop_client lc[CLIENTS];
    static volatile int stop_flag, after = 20;
    stop_flag = 0;
    memset(lc, 0, sizeof(lc));
    for (int i = 0; i < CLIENTS; i++) {
        lc[i].port = px.port;
        lc[i].stop_flag = &stop_flag;
        lc[i].after = &after;
        ck_assert_int_eq(pthread_create(&lc[i].thread, NULL, loop_client_run, &lc[i]), 0);
    }
    /* Every client is looping, and A has served some of them. */
    long long end = tu_now_ms() + 10000;
    for (;;) {
        int all = 1;
        for (int i = 0; i < CLIENTS; i++)
            all &= __atomic_load_n(&lc[i].before, __ATOMIC_ACQUIRE) >= 2;
        if (all && srv_accepts(&s[0]) >= 10)
            break;
        ck_assert_msg(tu_now_ms() < end, "the clients did not get going");
        tu_sleep_ms(5);
    }
    srv_stop(&s[0]); /* its port refuses from now on; its queue is reset */
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
    int ok = 0, failed = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(lc[i].thread, NULL);
        ok += lc[i].ok;
        failed += lc[i].failed;
        ck_assert_int_ge(lc[i].since, 20);
    }
    ck_assert_msg(failed == 0, "%d of %d client connections failed", failed, ok + failed);
    /* Dials to the stopped upstream happened and were moved. */
    char *log = proxy_log(&px);
    ck_assert_msg(strstr(log, "retrying on") != NULL, "no redial: %s", log);
    free(log);
    stop_proxy();
    srv_stop(&s[1]);
}
END_TEST

/* An upstream that takes the client's bytes and resets before answering:
 * the bytes go again to another upstream, and the client sees only its
 * answer. Connections are opened until the resetting upstream had three. */
START_TEST(an_upstream_reset_before_its_first_byte_is_replayed_on_another)
{
    struct srv r, e;
    ck_assert_int_eq(srv_start(&r, SRV_RESET, 'R'), 0);
    ck_assert_int_eq(srv_start(&e, SRV_ECHO, 'E'), 0);
    const char *eps[] = {srv_ep(&r), srv_ep(&e)};
    start_proxy(FAST, eps, 2);
    const char *moved = "(Connection reset by peer)\" next=";
    for (int n = 0; n < 64 && log_count(moved) < 3; n++) {
        int fd = tcp_connect(px.port, 3000);
        ck_assert_int_ge(fd, 0);
        assert_echoes(fd);
        close(fd);
    }
    ck_assert_msg(log_count(moved) >= 3, "%s", proxy_log(&px));
    stop_proxy();
    srv_stop(&r);
    srv_stop(&e);
}
END_TEST

/* Health state can be stale: with every upstream marked unhealthy (by two
 * failed client dials each), one that answers again is still used. */
START_TEST(with_every_upstream_unhealthy_one_that_answers_serves_the_client)
{
    struct srv s[2];
    ck_assert_int_eq(srv_start(&s[0], SRV_HELLO, 'A'), 0);
    ck_assert_int_eq(srv_start(&s[1], SRV_HELLO, 'B'), 0);
    int port_b = s[1].port;
    const char *eps[] = {srv_ep(&s[0]), srv_ep(&s[1])};
    char ep_a[32], ep_b[32];
    snprintf(ep_a, sizeof(ep_a), "%s", eps[0]);
    snprintf(ep_b, sizeof(ep_b), "%s", eps[1]);
    /* One check at the start, the next 30 s later: only client dials move
     * the health state during the test. */
    start_proxy("health_interval = \"30s\"; health_timeout = \"1s\";", eps, 2);
    char line[96];
    (void)hello(NULL); /* served while both answer */
    srv_stop(&s[0]);
    srv_stop(&s[1]);
    /* Each connection dials both and fails: two make both unhealthy. */
    for (int i = 0; i < 2; i++) {
        int fd = tcp_connect(px.port, 3000);
        ck_assert_int_ge(fd, 0);
        char b[2];
        ck_assert_int_le(read_full(fd, b, 2, 5000), 0);
        close(fd);
    }
    snprintf(line, sizeof(line), "is unhealthy (client dials failed)\" upstream=%s", ep_a);
    ck_assert_int_eq(proxy_wait_log(&px, line, 3000), 0);
    snprintf(line, sizeof(line), "is unhealthy (client dials failed)\" upstream=%s", ep_b);
    ck_assert_int_eq(proxy_wait_log(&px, line, 3000), 0);
    /* B answers again; the proxy has not checked it since. */
    struct srv b2;
    ck_assert_int_eq(srv_start_port(&b2, SRV_HELLO, 'B', port_b), 0);
    ck_assert_int_eq(hello(NULL), 'B');
    char *log = proxy_log(&px);
    ck_assert_msg(strstr(log, "the last resort") != NULL, "%s", log);
    free(log);
    stop_proxy();
    srv_stop(&b2);
}
END_TEST

START_TEST(a_blackholed_upstream_does_not_delay_the_probes_of_others)
{
    /* One live upstream between two blackholed ones in the sorted endpoint
     * list: checks done one after the other would put a timeout before the
     * live one in every round, whatever the order. */
    /* Three consecutive ports below the ephemeral range: same length, so
     * their strings sort as their numbers. Retried elsewhere if taken. */
    struct srv live, lo, hi;
    int ok = 0;
    for (int attempt = 0; attempt < 20 && !ok; attempt++) {
        int base = 20000 + (int)((tu_now_ms() * 7919 + attempt * 104729) % 9000);
        if (srv_start_port(&lo, SRV_BLACKHOLE, 'X', base) < 0) {
            srv_stop(&lo);
            continue;
        }
        if (srv_start_port(&live, SRV_ECHO, 'L', base + 1) < 0) {
            srv_stop(&lo);
            srv_stop(&live);
            continue;
        }
        if (srv_start_port(&hi, SRV_BLACKHOLE, 'X', base + 2) < 0) {
            srv_stop(&lo);
            srv_stop(&live);
            srv_stop(&hi);
            continue;
        }
        ok = 1;
    }
    ck_assert_msg(ok, "no three free consecutive ports");
    char lo_ep[32], live_ep[32], hi_ep[32];
    snprintf(lo_ep, sizeof(lo_ep), "%s", srv_ep(&lo));
    snprintf(live_ep, sizeof(live_ep), "%s", srv_ep(&live));
    snprintf(hi_ep, sizeof(hi_ep), "%s", srv_ep(&hi));
    ck_assert(strcmp(lo_ep, live_ep) < 0 && strcmp(live_ep, hi_ep) < 0);
    const char *list[] = {lo_ep, live_ep, hi_ep};

    /* A check of a blackhole ends only by its 9 s timeout: checks made one
     * after the other could not reach the live upstream (sorted second)
     * before one of them. The live upstream's server stamps each accept
     * when it takes it, never earlier than the kernel's handshake. */
    start_proxy("health_interval = \"10s\"; health_timeout = \"9s\";", list, 3);
    long long t0 = px.started_ms;
    long long end = tu_now_ms() + 20000;
    while (srv_accepts(&live) < 1 && tu_now_ms() < end)
        tu_sleep_ms(20);
    ck_assert_int_ge(srv_accepts(&live), 1);
    long long first = srv_accept_at(&live, 0) - t0;
    ck_assert_msg(first < 9000, "first check of the live upstream %lld ms after start", first);
    stop_proxy();
    srv_stop(&live);
    srv_stop(&lo);
    srv_stop(&hi);
}
END_TEST

START_TEST(shutdown_force_closes_connections_promptly)
{
    struct srv a;
    ck_assert_int_eq(srv_start(&a, SRV_HELLO, 'A'), 0);
    const char *eps[] = {srv_ep(&a)};
    start_proxy(FAST, eps, 1);
    int fd;
    ck_assert_int_eq(hello(&fd), 'A');
    kill(px.proc.pid, SIGTERM);
    ck_assert_int_ge(wait_eof(fd, 15000), 0);
    ck_assert(tu_wait_exit(&px.proc, 15000));
    ck_assert_int_eq(px.proc.status, 0);
    /* Closed by the module's stop, not left to the daemon's shutdown_grace
     * (10 s) to run out. */
    char *log = proxy_log(&px);
    ck_assert_msg(strstr(log, "msg=\"stopped: "), "%s", log);
    ck_assert_msg(!strstr(log, "did not stop within"), "%s", log);
    free(log);
    /* The listener is closed. */
    ck_assert_int_lt(tcp_connect(px.port, 1000), 0);
    close(fd);
    stop_proxy();
    srv_stop(&a);
}
END_TEST

START_TEST(shutdown_while_an_upstream_drains_closes_its_connections_too)
{
    struct srv s[2];
    ck_assert_int_eq(srv_start(&s[0], SRV_HELLO, 'A'), 0);
    ck_assert_int_eq(srv_start(&s[1], SRV_HELLO, 'B'), 0);
    const char *eps[] = {srv_ep(&s[0]), srv_ep(&s[1])};
    start_proxy(FAST "drain_timeout = \"30s\";", eps, 2);
    /* Connections on both, at least one on B, which then drains. */
    int fd[16], n = 0, on_b = 0;
    while (n < 16 && (on_b == 0 || n < 4)) {
        on_b += srv_index(hello(&fd[n])) == 1;
        n++;
    }
    ck_assert_int_gt(on_b, 0);
    const char *keep[] = {srv_ep(&s[0])};
    proxy_set_endpoints(&px, keep, 1);
    ck_assert_int_eq(proxy_wait_log(&px, "removed: draining", 3000), 0);
    kill(px.proc.pid, SIGTERM);
    for (int i = 0; i < n; i++) {
        ck_assert_int_ge(wait_eof(fd[i], 5000), 0);
        close(fd[i]);
    }
    ck_assert(tu_wait_exit(&px.proc, 5000));
    ck_assert_int_eq(px.proc.status, 0);
    stop_proxy();
    srv_stop(&s[0]);
    srv_stop(&s[1]);
}
END_TEST

START_TEST(connections_before_the_first_endpoint_set_wait_for_it)
{
    struct srv a;
    ck_assert_int_eq(srv_start(&a, SRV_HELLO, 'A'), 0);
    start_proxy(FAST, NULL, 0);          /* no endpoint yet */
    int fd = tcp_connect(px.port, 3000); /* queued in the backlog */
    ck_assert_int_ge(fd, 0);
    char b[2];
    ck_assert_int_eq(read_full(fd, b, 2, 500), 0); /* neither served nor closed */
    const char *eps[] = {srv_ep(&a)};
    proxy_set_endpoints(&px, eps, 1);
    ck_assert_int_eq(read_full(fd, b, 2, 5000), 2);
    ck_assert_int_eq(b[0], 'A');
    close(fd);
    char *log = proxy_log(&px);
    ck_assert_msg(!strstr(log, "no upstream available"), "%s", log);
    free(log);
    stop_proxy();
    srv_stop(&a);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy_data_path");
    TCase *tc = tcase_create("data_path");
    tcase_add_unchecked_fixture(tc, tp_registry_init, tp_reap_all);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, half_close_is_carried_through);
    tcase_add_test(tc, connections_before_the_first_endpoint_set_wait_for_it);
    tcase_add_test(tc, large_transfer_keeps_its_integrity_through_splice);
    tcase_add_test(tc, keepalive_is_set_on_both_sides);
    tcase_add_test(tc, a_removed_endpoint_drains_and_then_closes);
    tcase_add_test(tc, re_adding_an_endpoint_aborts_its_drain);
    tcase_add_test(tc, a_drain_timeout_of_0_closes_at_once);
    tcase_add_test(tc, a_dial_whose_upstream_starts_draining_is_retried_on_another);
    tcase_add_test(tc, an_upstream_stopped_while_clients_connect_fails_no_client);
    tcase_add_test(tc, an_upstream_reset_before_its_first_byte_is_replayed_on_another);
    tcase_add_test(tc, with_every_upstream_unhealthy_one_that_answers_serves_the_client);
    tcase_add_test(tc, a_blackholed_upstream_does_not_delay_the_probes_of_others);
    tcase_add_test(tc, shutdown_force_closes_connections_promptly);
    tcase_add_test(tc, shutdown_while_an_upstream_drains_closes_its_connections_too);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run_suite(suite());
}
