/*
 * mod_leader chaos tests: three daemons against one fake API server, each
 * running the gated writer (see env.h), with short timings (lease 3 s,
 * renew 2 s, retry 500 ms). Usage: test_leader_chaos root|kcp CASE, CASE
 * one of crash, release, freeze, handovers; with kcp the Lease and the
 * shared object live in the fake's /clusters/root:test workspace.
 *
 *   crash      SIGKILL the leader: another writes within lease_duration +
 *              2.2 × retry_period (+ 0.5 s for a loaded machine): a
 *              candidate may see the last renew up to one jittered period
 *              (2.2 × retry) late and then waits lease_duration from that
 *              sight;
 *   release    SIGTERM the leader: it releases the Lease, and another
 *              replica takes it over at its first attempt after the
 *              release arrived (its first Lease request after it a GET,
 *              its second the acquiring write, in the request log);
 *   freeze     (lease 4 s) SIGSTOP the leader right after a renew, for
 *              renew_deadline + 0.5 s, SIGCONT: its gate closes at once; of
 *              its term at most the write it had decided on before the
 *              freeze lands (right after the resume); the next term, its
 *              own or another's, starts after that, another's not before
 *              lease_duration after the frozen one's last renew;
 *   handovers  50 forced handovers (SIGTERM of the leader, a new replica
 *              started in its place): the request log shows no two terms
 *              overlapping.
 *
 * Every case ends with the overlap check over the whole request log and
 * prints its measurements.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

#define NREPLICAS 3

/* The freeze case uses lease 4 s: the frozen leader loses at renew_deadline
 * (2 s) and is resumed at 2.5 s, 1.5 s before anyone may take over. */
static const struct le_timings le_freeze = {"4s", "2s", "500ms", 4.0, 2.0, 0.5};
static const struct le_timings *timings = &le_short;

static int kcp;
static struct le_env env;
static struct le_daemon d[NREPLICAS];
static int generation;

static void
start_replica(int slot)
{
    char id[64];
    snprintf(id, sizeof(id), "r%d-g%d", slot, ++generation);
    le_daemon_start(&env, &d[slot], id, timings);
}

static void
setup(void)
{
    le_env_start(&env, kcp);
    generation = 0;
    for (int i = 0; i < NREPLICAS; i++)
        start_replica(i);
}

static void
teardown(void)
{
    for (int i = 0; i < NREPLICAS; i++)
        le_daemon_stop(&d[i], SIGTERM, 7000);
    le_env_stop(&env);
}

static int
slot_of(const char *id)
{
    for (int i = 0; i < NREPLICAS; i++) {
        if (d[i].td.running && strcmp(d[i].identity, id) == 0)
            return i;
    }
    return -1;
}

static void
dump_logs(void)
{
    for (int i = 0; i < NREPLICAS; i++) {
        char *log = le_daemon_log(&d[i]);
        fprintf(stderr, "---- %s ----\n%s\n", d[i].identity, log);
        free(log);
    }
}

/* Wait until writes flow from one replica: two writes in a row by one
 * identity (one term under way, not the contention of a start); its slot
 * and, in *w, its later write. */
static int
steady_leader(struct le_write *w)
{
    struct le_write first;
    long long end = tu_now_ms() + 15000;
    if (le_wait_write(&env, NULL, 0, 15000, &first) < 0) {
        dump_logs();
        ck_abort_msg("nobody wrote within 15 s");
    }
    for (;;) {
        ck_assert_int_eq(le_last_writer(&env, &first), 0);
        if (le_wait_write(&env, NULL, first.t, 15000, w) < 0) {
            dump_logs();
            ck_abort_msg("writes stopped after %s's at %.3f", first.id, first.t);
        }
        if (strcmp(w->id, first.id) == 0)
            break;
        ck_assert_msg(tu_now_ms() < end, "no steady leader within 15 s");
    }
    int s = slot_of(w->id);
    ck_assert_msg(s >= 0, "the last writer %s is not running", w->id);
    return s;
}

/* One Lease request of the request log. */
struct lease_req {
    char method[8];
    int status;
    double t;
};

/* The Lease requests of identity's leader instance after `after` (wall
 * seconds), in arrival order: new array, *n entries. */
static struct lease_req *
lease_requests(const char *identity, double after, size_t *n)
{
    char tag[128];
    snprintf(tag, sizeof(tag), "(leader; %s)", identity);
    json_t *j = le_request_log(&env);
    size_t count = le_request_count(j);
    struct lease_req *v = calloc(count + 1, sizeof(*v));
    ck_assert_ptr_nonnull(v);
    *n = 0;
    for (size_t i = 0; i < count; i++) {
        struct le_request q;
        if (le_request_at(j, i, &q) < 0 || !strstr(q.ua, tag) || !strstr(q.path, "/leases") ||
            q.time <= after)
            continue;
        snprintf(v[*n].method, sizeof(v[*n].method), "%s", q.method);
        v[*n].status = q.status;
        v[*n].t = q.time;
        (*n)++;
    }
    json_decref(j);
    return v;
}

START_TEST(crash)
{
    const double bound = le_short.lease_s + 2.2 * le_short.retry_s + 0.5;
    double worst = 0, sum = 0;
    const int rounds = 3;
    for (int r = 0; r < rounds; r++) {
        struct le_write lw, nw;
        int s = steady_leader(&lw);
        double t_kill = le_wall();
        le_daemon_stop(&d[s], SIGKILL, 3000);
        if (le_wait_write(&env, lw.id, t_kill, 15000, &nw) < 0) {
            dump_logs();
            ck_abort_msg("round %d: nobody took over from %s within 15 s", r, lw.id);
        }
        double failover = nw.t - t_kill;
        printf("crash %d: %s killed, %s wrote after %.3f s\n", r, lw.id, nw.id, failover);
        ck_assert_msg(failover <= bound, "round %d: failover %.3f s over the bound %.3f s", r,
                      failover, bound);
        /* Nobody takes over before lease_duration after the killed
         * leader's last renew reached the server. */
        double last_renew = le_last_lease_write(&env, lw.id);
        ck_assert_msg(last_renew > 0, "no renew of %s in the request log", lw.id);
        ck_assert_msg(nw.t >= last_renew + le_short.lease_s,
                      "round %d: %s wrote %.3f s after %s's last renew, before the lease expired",
                      r, nw.id, nw.t - last_renew, lw.id);
        printf("crash %d: %s's last renew %.3f s before the kill; %s wrote %.3f s after it\n", r,
               lw.id, t_kill - last_renew, nw.id, nw.t - last_renew);
        worst = failover > worst ? failover : worst;
        sum += failover;
        start_replica(s);
    }
    le_assert_lease_location(&env);
    int terms = le_check_no_overlap(&env);
    printf("crash: failover mean %.3f s, worst %.3f s (bound %.3f s, lease_duration + "
           "retry_period %.3f s); %d terms, none overlapping\n",
           sum / rounds, worst, bound, le_short.lease_s + le_short.retry_s, terms);
}
END_TEST

START_TEST(release)
{
    double worst = 0, sum = 0;
    const int rounds = 3;
    for (int r = 0; r < rounds; r++) {
        struct le_write lw, nw;
        int s = steady_leader(&lw);
        double t_term = le_wall();
        int st = le_daemon_signal_wait(&d[s], SIGTERM, 7000);
        if (le_wait_write(&env, lw.id, t_term, 10000, &nw) < 0) {
            dump_logs();
            ck_abort_msg("round %d: nobody took over from %s within 10 s", r, lw.id);
        }
        char *log = le_daemon_log(&d[s]);
        ck_assert_msg(st == 0, "%s exited with status %d:\n%s", lw.id, st, log);
        ck_assert_msg(strstr(log, "msg=\"released the Lease\" lease=default/prismlb-test"),
                      "no release in:\n%s", log);
        free(log);
        /* The release is the stopped leader's last successful Lease write;
         * the next leader takes over at its next attempt after it: its
         * first Lease request after the release is a GET (200), and its
         * second the write that acquires. Machine speed changes when that
         * attempt comes (retry_period, jittered), never that it is the
         * one. */
        double t_rel = le_last_lease_write(&env, lw.id);
        ck_assert_msg(t_rel >= t_term, "round %d: no release write by %s", r, lw.id);
        size_t n;
        struct lease_req *q = lease_requests(nw.id, t_rel, &n);
        ck_assert_msg(n >= 2, "round %d: %s wrote without two Lease requests after the release", r,
                      nw.id);
        ck_assert_msg(strcmp(q[0].method, "GET") == 0 && q[0].status == 200,
                      "round %d: %s's first Lease request after the release: %s %d", r, nw.id,
                      q[0].method, q[0].status);
        ck_assert_msg(strcmp(q[1].method, "PUT") == 0 && q[1].status / 100 == 2,
                      "round %d: %s did not take over at its first attempt after the release "
                      "(%s %d)",
                      r, nw.id, q[1].method, q[1].status);
        double failover = q[1].t - t_rel;
        free(q);
        printf("release %d: %s stopped, released at +%.3f s; %s acquired %.3f s later and "
               "wrote %.3f s after the SIGTERM\n",
               r, lw.id, t_rel - t_term, nw.id, failover, nw.t - t_term);
        worst = failover > worst ? failover : worst;
        sum += failover;
        start_replica(s);
    }
    le_assert_lease_location(&env);
    int terms = le_check_no_overlap(&env);
    printf("release: release to acquire mean %.3f s, worst %.3f s (retry_period %.1f s, "
           "jittered up to 1.2 x); %d terms, none overlapping\n",
           sum / rounds, worst, le_short.retry_s, terms);
}
END_TEST

/* Lines of trace file path that start with prefix. */
static int
count_lines(const char *path, const char *prefix)
{
    char *s = tu_read_file(path, NULL);
    int n = 0;
    for (char *p = s; p && *p;) {
        if (strncmp(p, prefix, strlen(prefix)) == 0)
            n++;
        char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : NULL;
    }
    free(s);
    return n;
}

START_TEST(freeze)
{
    const int rounds = 2;
    const struct le_timings *tm = timings;
    const int freeze_ms = (int)(tm->renew_s * 1000) + 500;
    for (int r = 0; r < rounds; r++) {
        struct le_write lw;
        int s = steady_leader(&lw);
        char closed[128];
        snprintf(closed, sizeof(closed), "gate_close %s %d ", lw.id, lw.term);
        ck_assert_int_eq(count_lines(d[s].trace, closed), 0);
        /* Freeze it right after a renew reached the server. */
        double t0 = le_wall(), renewed = 0;
        long long end = tu_now_ms() + 3000;
        while ((renewed = le_last_lease_write(&env, lw.id)) <= t0 && tu_now_ms() < end)
            tu_sleep_ms(5);
        ck_assert_msg(renewed > t0, "%s did not renew within 3 s", lw.id);
        ck_assert_int_eq(kill(d[s].td.proc.pid, SIGSTOP), 0);
        double t_stop = le_wall();
        tu_sleep_ms(freeze_ms);
        double t_cont = le_wall();
        ck_assert_int_eq(kill(d[s].td.proc.pid, SIGCONT), 0);
        /* Past renew_deadline: its gate closes at once on resume. */
        end = tu_now_ms() + 3000;
        while (count_lines(d[s].trace, closed) == 0 && tu_now_ms() < end)
            tu_sleep_ms(10);
        ck_assert_msg(count_lines(d[s].trace, closed) == 1,
                      "%s did not close its gate after the freeze", lw.id);
        /* Somebody leads afterwards (the frozen one again, in a new term,
         * since its lease had not expired, or another). */
        struct le_write nw;
        ck_assert_int_eq(le_wait_write(&env, NULL, t_cont + 0.2, 10000, &nw), 0);
        size_t n;
        struct le_write *w = le_writes(&env, &n);
        double last_old = 0, first_new = 0;
        int old_after_stop = 0;
        char first_new_id[64] = "";
        for (size_t i = 0; i < n; i++) {
            int same_term = strcmp(w[i].id, lw.id) == 0 && w[i].term == lw.term;
            if (same_term && w[i].t > last_old)
                last_old = w[i].t;
            old_after_stop += same_term && w[i].t > t_stop;
            if (!same_term && w[i].t > t_stop - 0.3 && !first_new_id[0]) {
                first_new = w[i].t;
                snprintf(first_new_id, sizeof(first_new_id), "%s/%d", w[i].id, w[i].term);
            }
        }
        free(w);
        /* At most the write it had decided on before the freeze lands,
         * right after the resume; nothing of that term later. */
        ck_assert_msg(old_after_stop <= 1 && last_old < t_cont + 0.1,
                      "%s term %d wrote %d times after the freeze, last %.3f s after the resume",
                      lw.id, lw.term, old_after_stop, last_old - t_cont);
        ck_assert_msg(first_new > last_old, "%s started at %.3f before %s term %d ended at %.3f",
                      first_new_id, first_new, lw.id, lw.term, last_old);
        /* Another replica only after the frozen one's lease expired. */
        size_t idlen = strlen(lw.id);
        if (strncmp(first_new_id, lw.id, idlen) != 0 || first_new_id[idlen] != '/')
            ck_assert_msg(first_new >= renewed + tm->lease_s,
                          "%s started %.3f s after %s's last renew", first_new_id,
                          first_new - renewed, lw.id);
        printf("freeze %d: %s frozen %.3f s from %.3f s after its renew; %d write(s) of its term "
               "after the freeze, the last %.3f s after the resume; gate closed; next term %s "
               "%.3f s after the resume\n",
               r, lw.id, t_cont - t_stop, t_stop - renewed, old_after_stop,
               old_after_stop ? last_old - t_cont : 0.0, first_new_id, first_new - t_cont);
    }
    le_assert_lease_location(&env);
    int terms = le_check_no_overlap(&env);
    printf("freeze: %d terms, none overlapping\n", terms);
}
END_TEST

START_TEST(handovers)
{
    const int rounds = 50;
    double sum = 0, worst = 0;
    long long t0 = tu_now_ms();
    int changes = 0;
    for (int r = 0; r < rounds; r++) {
        struct le_write lw, nw;
        ck_assert_int_eq(le_wait_write(&env, NULL, 0, 15000, &lw), 0);
        ck_assert_int_eq(le_last_writer(&env, &lw), 0);
        int s = slot_of(lw.id);
        ck_assert_msg(s >= 0, "round %d: the last writer %s is not running", r, lw.id);
        double t = le_wall();
        int st = le_daemon_signal_wait(&d[s], SIGTERM, 7000);
        if (le_wait_write(&env, lw.id, t, 10000, &nw) < 0) {
            dump_logs();
            ck_abort_msg("round %d: nobody took over from %s", r, lw.id);
        }
        ck_assert_msg(st == 0, "round %d: %s exited with status %d", r, lw.id, st);
        double h = nw.t - t;
        sum += h;
        worst = h > worst ? h : worst;
        changes++;
        start_replica(s);
    }
    le_assert_lease_location(&env);
    int terms = le_check_no_overlap(&env);
    ck_assert_int_ge(terms, rounds + 1);
    printf("handovers: %d forced handovers in %.1f s, handover mean %.3f s, worst %.3f s; %d "
           "terms in the request log, none overlapping\n",
           changes, (double)(tu_now_ms() - t0) / 1000.0, sum / rounds, worst, terms);
}
END_TEST

int
main(int argc, char **argv)
{
    kcp = le_mode_arg(argc, argv, 3, "root|kcp crash|release|freeze|handovers");
    Suite *s = suite_create("leader-chaos");
    TCase *tc = tcase_create(argv[2]);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 170);
    if (strcmp(argv[2], "crash") == 0)
        tcase_add_test(tc, crash);
    else if (strcmp(argv[2], "release") == 0)
        tcase_add_test(tc, release);
    else if (strcmp(argv[2], "freeze") == 0) {
        timings = &le_freeze;
        tcase_add_test(tc, freeze);
    } else if (strcmp(argv[2], "handovers") == 0)
        tcase_add_test(tc, handovers);
    else
        return 2;
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
