/*
 * Allocation failure in an informer mid-watch: the daemon (endpoint_watch
 * against the fake API server, the sink, mod_metrics) is started with
 * PRISMLB_FAIL_ALLOC=N,on-signal, lists and watches the EndpointSlices,
 * and is sent SIGUSR2; the test then changes the slice until the Nth
 * allocation from then has failed — in a watch event's decoding, the
 * cache, a recomputation, a log line. For each N of the sweep the daemon
 * neither crashes nor exits, its endpoint list follows a change made after
 * the failure (the informer resumed, by a re-list if it must), and it
 * stops cleanly on SIGTERM with exit status 0 and no sanitizer report.
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

#define NS "default"
#define SVC "kubernetes"
#define HTTPS "https=6443"

/* The Ns of the sweep: every one of the first 20, then sparser. */
static const unsigned long sweep[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10,  11,  12,  13, 14,
                                      15, 16, 17, 18, 19, 20, 30, 50, 80, 120, 200, 300, 500};

START_TEST(an_allocation_failure_mid_watch_loses_no_update_for_good)
{
    struct ewt t;
    char settings[4400], fail[80], spec[64], want[128];
    ck_assert_int_eq(ewt_init(&t), 0);
    ck_assert_int_eq(ewt_fake_start(&t, NULL), 0);
    ewt_write_kubeconfig(&t, NULL);
    snprintf(settings, sizeof(settings), "endpoints = [\"10.0.0.1:6443\"]; kubeconfig = \"%s\";",
             t.kubeconfig);
    for (size_t i = 0; i < sizeof(sweep) / sizeof(sweep[0]); i++) {
        unsigned long n = sweep[i];
        snprintf(spec, sizeof(spec), "10.0.0.2"); /* what the slice holds */
        ck_assert_int_eq(ewt_slice_put(&t, NS, SVC, "kubernetes", spec, HTTPS), 0);
        (void)unlink(t.log); /* this round's log and sets only */
        (void)unlink(t.trace);
        snprintf(fail, sizeof(fail), "PRISMLB_FAIL_ALLOC=%lu,on-signal", n);
        char *env[] = {fail, NULL};
        ck_assert_msg(ewt_daemon_start(&t, settings, NULL, env) == 0, "N=%lu: no start", n);
        ck_assert_int_eq(ewt_wait_set(&t, "10.0.0.1:6443,10.0.0.2:6443", 10000), 0);
        ck_assert_int_eq(kill(t.daemon.pid, SIGUSR2), 0);
        ck_assert_int_eq(ewt_wait_log(&t, "prismlb: allocation failure armed", 5000), 0);
        /* Watch events until the Nth allocation has failed. */
        for (int k = 0; k < 200 && !ewt_log_count(&t, "prismlb: injected allocation failure");
             k++) {
            ck_assert_msg(!tu_exited(&t.daemon), "N=%lu: the daemon exited:\n%s", n, ewt_log(&t));
            snprintf(spec, sizeof(spec), "10.0.1.%d", 3 + k);
            ck_assert_int_eq(ewt_slice_put(&t, NS, SVC, "kubernetes", spec, HTTPS), 0);
            tu_sleep_ms(20);
        }
        ck_assert_msg(ewt_log_count(&t, "prismlb: injected allocation failure") == 1,
                      "N=%lu: no allocation failed in 200 watch events:\n%s", n, ewt_log(&t));
        /* A crash right after the failure (the loop above ends on its log
         * line) is named as one, here or by the waits below (ewt_wait_set
         * ends when the daemon exits), not as a list that went stale. */
        ck_assert_msg(!tu_exited(&t.daemon), "N=%lu: the daemon exited (%#x):\n%s", n,
                      t.daemon.status, ewt_log(&t));
        /* With no change after it, the list still comes to what the server
         * holds: an event the failure cost is made good (a re-list), not
         * left until the next change. */
        snprintf(want, sizeof(want), "10.0.0.1:6443,%s:6443", spec);
        ck_assert_msg(ewt_wait_set(&t, want, 20000) == 0, "N=%lu: the list is stale:\n%s", n,
                      ewt_log(&t));
        /* And a change after the failure reaches it. */
        ck_assert_int_eq(ewt_slice_put(&t, NS, SVC, "kubernetes", "10.0.9.9", HTTPS), 0);
        ck_assert_msg(ewt_wait_set(&t, "10.0.0.1:6443,10.0.9.9:6443", 20000) == 0,
                      "N=%lu: the list stopped following:\n%s", n, ewt_log(&t));
        int st = ewt_daemon_stop(&t, 10000, NULL);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "N=%lu: stop ended with %#x:\n%s", n,
                      st, ewt_log(&t));
        const char *rep = ewt_sanitizer_report(&t);
        ck_assert_msg(!rep, "N=%lu: %s in the log:\n%s", n, rep ? rep : "", ewt_log(&t));
    }
    ck_assert_int_eq(ewt_fini(&t), 0);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("endpoint_watch alloc-fail");
    TCase *tc = tcase_create("alloc-fail");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, an_allocation_failure_mid_watch_loses_no_update_for_good);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
