/*
 * Allocation failure in the running proxy: the daemon is started with
 * PRISMLB_FAIL_ALLOC=N,on-signal, carries traffic, and is sent SIGUSR2 in
 * the middle of it, so that the Nth allocation from then fails — in an
 * accept, a dial, a health check, a log line, wherever it falls. For each
 * N of the sweep: the daemon neither crashes nor exits, serves again
 * (three echoes in a row through it), and stops cleanly on SIGTERM with
 * exit status 0 (under the sanitizers a leak would make it 23).
 *
 * The same in the stop: the failure armed, SIGTERM sent at once with a
 * client connection open, so that the Nth allocation of the shutdown fails
 * (a stop message to a worker, a worker's report that it stopped, a log
 * line): the daemon still stops within its shutdown grace, with status 0.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

#define FAST "health_interval = \"1100ms\"; health_timeout = \"1s\";"

/* One echo of a short line through the proxy: 1 when it came back whole. */
static int
echo_once(int port)
{
    static const char line[] = "ping through the proxy\n";
    char back[sizeof(line)] = {0};
    int fd = tcp_connect(port, 3000);
    if (fd < 0)
        return 0;
    int ok = write_full(fd, line, sizeof(line) - 1) == 0 &&
             read_full(fd, back, sizeof(line) - 1, 3000) == (long)(sizeof(line) - 1) &&
             memcmp(back, line, sizeof(line) - 1) == 0;
    close(fd);
    return ok;
}

/* Start the proxy on eps with the Nth allocation after SIGUSR2 to fail,
 * and see it echo once. */
static void
start_armable(struct proxy *px, unsigned long n, const char *const *eps, size_t neps)
{
    char fail[64];
    snprintf(fail, sizeof(fail), "%lu,on-signal", n);
    ck_assert_int_eq(setenv("PRISMLB_FAIL_ALLOC", fail, 1), 0);
    ck_assert_msg(proxy_start(px, FAST, eps, neps) == 0, "N=%lu: prismlb did not start", n);
    ck_assert_msg(echo_once(px->port), "N=%lu: no echo before the failure", n);
}

/* From now on, the Nth allocation fails. */
static void
arm(struct proxy *px)
{
    ck_assert_int_eq(kill(px->proc.pid, SIGUSR2), 0);
    ck_assert_int_eq(proxy_wait_log(px, "prismlb: allocation failure armed", 5000), 0);
}

/* The Ns of the sweep: every one of the first 40, then sparser. */
static const unsigned long sweep[] = {
    1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,  21,  22,  23,
    24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 50, 70, 100, 150, 250, 400};

START_TEST(an_allocation_failure_under_traffic_costs_at_most_a_connection)
{
    struct srv a, b;
    ck_assert_int_eq(srv_start(&a, SRV_ECHO, 'A'), 0);
    ck_assert_int_eq(srv_start(&b, SRV_ECHO, 'B'), 0);
    const char *eps[] = {srv_ep(&a), srv_ep(&b)};
    int injected = 0;
    for (size_t i = 0; i < sizeof(sweep) / sizeof(sweep[0]); i++) {
        struct proxy px;
        start_armable(&px, sweep[i], eps, 2);
        for (int k = 0; k < 2; k++)
            ck_assert_msg(echo_once(px.port), "N=%lu: no echo before the failure", sweep[i]);
        arm(&px);
        /* Traffic on while the failure falls somewhere: each connection
         * may be the one it costs. */
        for (int k = 0; k < 20; k++)
            (void)echo_once(px.port);
        /* It serves again: three echoes in a row, within 10 s. */
        int row = 0;
        long long end = tu_now_ms() + 10000;
        while (row < 3 && tu_now_ms() < end) {
            ck_assert_msg(!tu_exited(&px.proc), "N=%lu: the daemon exited:\n%s", sweep[i],
                          proxy_log(&px));
            if (echo_once(px.port))
                row++;
            else {
                row = 0;
                tu_sleep_ms(50);
            }
        }
        char *log = proxy_log(&px);
        ck_assert_msg(row == 3, "N=%lu: the proxy does not serve again:\n%s", sweep[i], log);
        injected += strstr(log, "injected allocation failure") != NULL;
        free(log);
        int st = tu_stop(&px.proc, SIGTERM, 10000);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "N=%lu: stop ended with status %#x:\n%s", sweep[i], st, proxy_log(&px));
        (void)proxy_stop(&px); /* already stopped: removes its directory */
    }
    unsetenv("PRISMLB_FAIL_ALLOC");
    /* The sweep really failed allocations inside the traffic window. */
    ck_assert_int_ge(injected, 40);
    srv_stop(&a);
    srv_stop(&b);
}
END_TEST

/* The first Ns: the stop allocates only a few times per worker. */
static const unsigned long stop_sweep[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 20, 24};

START_TEST(an_allocation_failure_in_the_stop_costs_nothing)
{
    struct srv a;
    ck_assert_int_eq(srv_start(&a, SRV_ECHO, 'A'), 0);
    const char *eps[] = {srv_ep(&a)};
    int injected = 0;
    for (size_t i = 0; i < sizeof(stop_sweep) / sizeof(stop_sweep[0]); i++) {
        struct proxy px;
        start_armable(&px, stop_sweep[i], eps, 1);
        /* A client the stop has to close. */
        int held = tcp_connect(px.port, 3000);
        ck_assert_int_ge(held, 0);
        ck_assert_int_eq(write_full(held, "x", 1), 0);
        char x;
        ck_assert_int_eq(read_full(held, &x, 1, 3000), 1);
        arm(&px);
        /* The grace is 10 s: a stop that needed it is one that hung. */
        int st = tu_stop(&px.proc, SIGTERM, 20000);
        char *log = proxy_log(&px);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "N=%lu: stop ended with status %#x:\n%s", stop_sweep[i], st, log);
        ck_assert_msg(!strstr(log, "did not stop within the shutdown grace"),
                      "N=%lu: the stop hung:\n%s", stop_sweep[i], log);
        injected += strstr(log, "injected allocation failure") != NULL;
        free(log);
        close(held);
        (void)proxy_stop(&px);
    }
    unsetenv("PRISMLB_FAIL_ALLOC");
    /* The failure fell inside the stop: on one loop it allocates once (a
     * log line); on two, each stop message and report allocates. */
    const char *threads = getenv("TP_THREADS");
    ck_assert_int_ge(injected, threads && strcmp(threads, "2") == 0 ? 4 : 1);
    srv_stop(&a);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy alloc-fail");
    TCase *tc = tcase_create("alloc-fail");
    tcase_add_unchecked_fixture(tc, tp_registry_init, tp_reap_all);
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, an_allocation_failure_under_traffic_costs_at_most_a_connection);
    tcase_add_test(tc, an_allocation_failure_in_the_stop_costs_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run_suite(suite());
}
