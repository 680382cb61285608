/*
 * Allocation failure in a renewing leader: the daemon (mod_leader and the
 * gated writer) is started with PRISMLB_FAIL_ALLOC=N,on-signal, takes the
 * Lease, and is sent SIGUSR2 while it renews, so that the Nth allocation
 * from then fails — in a renew's request, its answer's decoding, a log
 * line, the writer's own request; renewing, it reaches every N. For each
 * N of the sweep the daemon neither crashes nor exits, writes the Lease
 * again after the failure (leading, or leading again), and stops cleanly
 * on SIGTERM with exit status 0 (under the sanitizers a leak would make it
 * 23).
 */
#include <sys/wait.h>

#include "env.h"

/* The Ns of the sweep: every one of the first 20, then sparser. */
static const unsigned long sweep[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10,  11,  12,  13, 14,
                                      15, 16, 17, 18, 19, 20, 30, 50, 80, 120, 200, 300, 500};

START_TEST(an_allocation_failure_while_renewing_loses_nothing)
{
    struct le_env e;
    le_env_start(&e, 0);
    for (size_t i = 0; i < sizeof(sweep) / sizeof(sweep[0]); i++) {
        char fail[64];
        snprintf(fail, sizeof(fail), "%lu,on-signal", sweep[i]);
        ck_assert_int_eq(setenv("PRISMLB_FAIL_ALLOC", fail, 1), 0);
        struct le_daemon d;
        memset(&d, 0, sizeof(d));
        /* Released on the stop, so the next round takes it at once. */
        le_daemon_config(&e, &d, "swept", &le_short, "release_on_cancel = true;");
        /* A fresh log each round: the needles below are this round's. */
        (void)unlink(d.td.log);
        le_daemon_spawn(&d);
        char *log = NULL;
        ck_assert_msg(tu_daemon_wait_log(&d.td, "started leading", 15000) == 0,
                      "N=%lu: never led:\n%s", sweep[i], (log = le_daemon_log(&d)));
        /* Armed while it renews (every retry_period, 500 ms). */
        ck_assert_int_eq(kill(d.td.proc.pid, SIGUSR2), 0);
        ck_assert_msg(tu_daemon_wait_log(&d.td, "prismlb: allocation failure armed", 5000) == 0,
                      "N=%lu: not armed", sweep[i]);
        /* It renews on: every N is reached, and then a Lease write that
         * arrives after it shows the daemon leading (or leading again). */
        ck_assert_msg(tu_daemon_wait_log(&d.td, "prismlb: injected allocation failure", 15000) == 0,
                      "N=%lu: no allocation failed:\n%s", sweep[i], (log = le_daemon_log(&d)));
        double failed_at = le_wall();
        long long until = tu_now_ms() + 15000;
        double last = 0;
        while ((last = le_last_lease_write(&e, "swept")) <= failed_at && tu_now_ms() < until) {
            ck_assert_msg(!tu_exited(&d.td.proc), "N=%lu: the daemon exited:\n%s", sweep[i],
                          (log = le_daemon_log(&d)));
            tu_sleep_ms(100);
        }
        ck_assert_msg(last > failed_at, "N=%lu: no Lease write after the failure:\n%s", sweep[i],
                      (log = le_daemon_log(&d)));
        int st = le_daemon_signal_wait(&d, SIGTERM, 10000);
        ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "N=%lu: stop ended with status %#x:\n%s", sweep[i], st,
                      (log = le_daemon_log(&d)));
        free(log);
    }
    unsetenv("PRISMLB_FAIL_ALLOC");
    le_env_stop(&e);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("leader alloc-fail");
    TCase *tc = tcase_create("alloc-fail");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, an_allocation_failure_while_renewing_loses_nothing);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
