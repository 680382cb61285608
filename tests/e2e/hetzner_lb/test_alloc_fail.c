/*
 * Allocation failure in a reconcile mid-plan: the daemon with mod_hetzner_lb
 * is started with PRISMLB_FAIL_ALLOC=N,on-signal on both fakes (kept across
 * the rounds), converges one LoadBalancer Service, and is sent SIGUSR2; the
 * test then creates a second Service and cordons a node, so the daemon
 * plans and sends several Hetzner requests (a balancer created with its
 * targets, the first one's target removed, both read back, both statuses),
 * and goes on changing the second one's nodePort until the Nth allocation
 * from the signal has failed — in an event's queueing, a sync, a plan, a
 * request, an answer's decoding, a status write, a log line. For each N of
 * the sweep the daemon neither crashes nor exits, both balancers come to
 * what the objects say with no change made after the failure (what failed
 * is tried again: a sync after its backoff, a failed write after
 * refused_recheck_interval, not at the hourly resync), a deletion after it
 * still removes both, and it stops on SIGTERM with exit status 0 (under the
 * sanitizers a leak makes it 23).
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

#define ARMED "prismlb: allocation failure armed"
#define INJECTED "prismlb: injected allocation failure"

/* The Ns of the sweep: every one of the first 20 (an event's queueing, the
 * sync and plan of the first Service), then sparser into the second one's
 * create, the writes' answers and the reconciles of the nodePort changes. */
static const unsigned long sweep[] = {1,  2,  3,  4,   5,   6,   7,   8,    9,    10,
                                      11, 12, 13, 14,  15,  16,  17,  18,   19,   20,
                                      30, 50, 80, 120, 200, 300, 500, 1000, 2000, 5000};

static long
total_lbs(struct env *e)
{
    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&e->hz, "GET", "/_admin/state", NULL, NULL, NULL, &r), 0);
    long n = (long)json_array_size(json_object_get(r.body, "load_balancers"));
    hzt_resp_free(&r);
    return n;
}

/* 1 when Service default/name's status carries the public IPv4 of the one
 * balancer labelled for uid. */
static int
status_is_lb_ip(struct env *e, const char *name, const char *uid)
{
    char ip[64], want[64] = "";
    json_t *a = env_lbs_of(e, uid);
    const char *v = json_string_value(json_object_get(
        json_object_get(json_object_get(json_array_get(a, 0), "public_net"), "ipv4"), "ip"));
    if (json_array_size(a) == 1 && v)
        snprintf(want, sizeof(want), "%s", v);
    json_decref(a);
    return want[0] && env_ingress(e, name, ip, sizeof(ip), NULL, 0, NULL) && !strcmp(ip, want);
}

static void
cordon(struct env *e, const char *node, int on)
{
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
    kube_req(e, "PATCH", path, "application/merge-patch+json",
             on ? "{\"spec\":{\"unschedulable\":true}}" : "{\"spec\":{\"unschedulable\":false}}",
             200, NULL);
}

/* Service default/name's one port: 80 -> node_port. */
static void
set_node_port(struct env *e, const char *name, int node_port)
{
    char path[256], body[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/services/%s", name);
    snprintf(body, sizeof(body),
             "{\"spec\":{\"ports\":[{\"port\":80,\"protocol\":\"TCP\",\"nodePort\":%d}]}}",
             node_port);
    kube_req(e, "PATCH", path, "application/merge-patch+json", body, 200, NULL);
}

/* The destination port of the one service of the one balancer labelled
 * for uid, or -1. */
static int
destination_port(struct env *e, const char *uid)
{
    json_t *a = env_lbs_of(e, uid);
    json_t *svcs = json_object_get(json_array_get(a, 0), "services");
    int port =
        json_array_size(a) == 1 && json_array_size(svcs) == 1
            ? (int)json_integer_value(json_object_get(json_array_get(svcs, 0), "destination_port"))
            : -1;
    json_decref(a);
    return port;
}

static void
delete_service(struct env *e, const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/services/%s", name);
    kube_req(e, "DELETE", path, NULL, NULL, 200, NULL);
}

START_TEST(an_allocation_failure_mid_plan_is_reconciled_again)
{
    struct env e;
    /* Resync hourly: what recovers a failed reconcile is its retry. */
    struct env_opts o = {.resync_s = 3600, .extra = "refused_recheck_interval = \"2s\";"};
    env_fakes_start(&e, 0, NULL, NULL);
    env_node(&e, "n1", "10.0.1.11");
    env_node(&e, "n2", "10.0.1.12");
    env_node(&e, "n3", "10.0.1.13");
    for (size_t i = 0; i < sizeof(sweep) / sizeof(sweep[0]); i++) {
        unsigned long n = sweep[i];
        char fail[64], name[32], a[32], b[32];
        snprintf(fail, sizeof(fail), "%lu,on-signal", n);
        ck_assert_int_eq(setenv("PRISMLB_FAIL_ALLOC", fail, 1), 0);
        snprintf(name, sizeof(name), "prismlb-%lu", n);
        snprintf(a, sizeof(a), "a%lu", n);
        snprintf(b, sizeof(b), "b%lu", n);
        env_daemon_start(&e, &o, name);
        char *uid_a = env_service(&e, a, "LoadBalancer", 30080, NULL, NULL);
        WAIT_FOR(&e,
                 env_targets_are(&e, uid_a, "10.0.1.11,10.0.1.12,10.0.1.13") &&
                     status_is_lb_ip(&e, a, uid_a),
                 20000, "the first Service converged before the arming");

        ck_assert_int_eq(kill(e.d.pid, SIGUSR2), 0);
        WAIT_FOR(&e, tu_file_has(e.log, ARMED), 5000, "the arming");
        /* A plan of several requests: a balancer created for b, a's
         * target of n3 removed. */
        long seen = env_last_request(&e);
        char *uid_b = env_service(&e, b, "LoadBalancer", 30081, NULL, NULL);
        cordon(&e, "n3", 1);
        /* Until the Nth allocation has failed: after each request the
         * daemon sent, b's nodePort changed once more, to one it never had
         * (no change undoes another while a reconcile is in flight). */
        int node_port = 30081;
        for (int k = 0; k < 40 && !tu_file_has(e.log, INJECTED); k++) {
            WAIT_FOR(&e, tu_file_has(e.log, INJECTED) || env_last_request(&e) > seen, 10000,
                     "a request or the failure");
            if (tu_file_has(e.log, INJECTED))
                break;
            seen = env_last_request(&e);
            set_node_port(&e, b, ++node_port);
        }
        ck_assert_msg(tu_file_has(e.log, INJECTED), "N=%lu: no allocation failed", n);

        /* With no change after the failure, both come to what the objects
         * say: n3 cordoned, b's last nodePort. */
        WAIT_FOR(&e,
                 env_targets_are(&e, uid_a, "10.0.1.11,10.0.1.12") &&
                     env_targets_are(&e, uid_b, "10.0.1.11,10.0.1.12") &&
                     destination_port(&e, uid_b) == node_port && status_is_lb_ip(&e, a, uid_a) &&
                     status_is_lb_ip(&e, b, uid_b),
                 60000, "both Services converged after the failure");
        /* And a change after it is followed: both balancers go with
         * their Services. */
        delete_service(&e, a);
        delete_service(&e, b);
        WAIT_FOR(&e, total_lbs(&e) == 0, 60000, "both balancers deleted");
        env_daemon_stop(&e);
        cordon(&e, "n3", 0);
        free(uid_a);
        free(uid_b);
    }
    unsetenv("PRISMLB_FAIL_ALLOC");
    env_fakes_stop(&e);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("hetzner_lb alloc-fail");
    TCase *tc = tcase_create("alloc-fail");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, an_allocation_failure_mid_plan_is_reconciled_again);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
