/*
 * The Service status the module writes, against both fakes: never onto a
 * Service the API server would refuse it for (since Kubernetes 1.29 a
 * non-empty status.loadBalancer.ingress needs spec.type LoadBalancer), not
 * sent again as it is when the API server refused it, and not withheld by
 * one target Hetzner refuses.
 *
 * Each moment of a reconcile is held by construction: the fake Hetzner API
 * holds the create's action running (hold_actions), or the daemon is
 * stopped (SIGSTOP, by its PID) while the fakes change what it will read
 * when it runs on.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "testutil.h"

#define ADD_TARGET "POST /v1/load_balancers/{id}/actions/add_target"

/* The fake API server's request log (new: {"items": [...]}). */
static json_t *
kube_requests(struct env *e)
{
    struct http_res r = {0};
    ck_assert_int_eq(fake_admin(&e->kube, "GET", "/requests", NULL, &r), 0);
    json_t *o = json_loads(r.body, 0, NULL);
    http_res_free(&r);
    ck_assert_ptr_nonnull(o);
    return o;
}

/* The fake API server's log entries of method on a path holding needle,
 * after the first skip entries of the log, and how many of them were
 * refused (status >= 400) into *refused. */
static long
kube_count(struct env *e, const char *method, const char *needle, size_t skip, long *refused)
{
    json_t *o = kube_requests(e), *it;
    long n = 0;
    size_t i;
    *refused = 0;
    json_array_foreach(json_object_get(o, "items"), i, it)
    {
        const char *m = json_string_value(json_object_get(it, "method"));
        const char *p = json_string_value(json_object_get(it, "path"));
        if (i < skip || !m || !p || strcmp(m, method) != 0 || !strstr(p, needle))
            continue;
        n++;
        if (json_integer_value(json_object_get(it, "status")) >= 400)
            (*refused)++;
    }
    json_decref(o);
    return n;
}

/* How many entries the fake API server's request log holds. */
static size_t
kube_log_len(struct env *e)
{
    json_t *o = kube_requests(e);
    size_t n = json_array_size(json_object_get(o, "items"));
    json_decref(o);
    return n;
}

/* Make Service default/name a ClusterIP Service (its node port goes). */
static void
to_cluster_ip(struct env *e, const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/services/%s", name);
    kube_req(e, "PATCH", path, "application/merge-patch+json",
             "{\"spec\":{\"type\":\"ClusterIP\",\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}}",
             200, NULL);
}

/* 1 when the fake Hetzner API holds no balancer labelled for uid. */
static int
no_balancer(struct env *e, const char *uid)
{
    json_t *l = env_lbs_of(e, uid);
    int none = json_array_size(l) == 0;
    json_decref(l);
    return none;
}

/* No status write reached the fake API server for Service name after the
 * log's first skip entries, and none at all was refused. */
static void
assert_no_status_write(struct env *e, const char *name, size_t skip)
{
    char needle[256];
    long refused, all_refused;
    snprintf(needle, sizeof(needle), "/services/%s/status", name);
    long n = kube_count(e, "PATCH", needle, skip, &refused);
    ck_assert_msg(n == 0, "%ld status write(s) of %s after it became a ClusterIP Service", n, name);
    (void)kube_count(e, "PATCH", "/status", 0, &all_refused);
    ck_assert_msg(all_refused == 0, "%ld status write(s) refused", all_refused);
}

/* A Service that stops being a LoadBalancer during its first reconcile gets
 * no status from then on, and its balancer is deleted, wherever the change
 * falls: with the create's answer (the daemon stopped while the create's
 * action ends and the Service changes: both reach it at once), before the
 * create answers (the create's action held until the daemon has dropped
 * the Service), and right after the status write. */
START_TEST(a_service_that_stops_being_a_load_balancer_gets_no_status_written)
{
    struct env e;
    char ip[64];
    size_t mark;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.11");
    env_faults(&e, "{\"hold_actions\":true}");

    /* 1. With the create's answer. */
    char *uid = env_service(&e, "with", "LoadBalancer", 30081, NULL, NULL);
    WAIT_FOR(&e, env_held_actions(&e) >= 1, 20000, "the create's action, held running");
    long polls = env_count_route(&e, "GET /v1/actions");
    WAIT_FOR(&e, env_count_route(&e, "GET /v1/actions") > polls, 20000,
             "a poll of the running create");
    ck_assert_int_eq(kill(e.d.pid, SIGSTOP), 0);
    long long stopped = tu_now_ms();
    env_faults(&e, "{\"hold_actions\":false}");
    WAIT_FOR(&e, env_held_actions(&e) == 0, 20000, "the create's action released");
    mark = kube_log_len(&e);
    to_cluster_ip(&e, "with");
    /* the daemon polls a running action at least every 5 s: stopped past
     * that, its next poll is due the moment it runs on, beside the change */
    while (tu_now_ms() < stopped + 5500)
        tu_sleep_ms(100);
    ck_assert_int_eq(kill(e.d.pid, SIGCONT), 0);
    WAIT_FOR(&e, no_balancer(&e, uid), 30000, "the balancer of \"with\" deleted");
    assert_no_status_write(&e, "with", mark);
    free(uid);

    /* 2. Before the create answers. */
    env_faults(&e, "{\"hold_actions\":true}");
    uid = env_service(&e, "before", "LoadBalancer", 30082, NULL, NULL);
    WAIT_FOR(&e, env_held_actions(&e) >= 1, 20000, "the create's action, held running");
    mark = kube_log_len(&e);
    to_cluster_ip(&e, "before");
    WAIT_FOR(
        &e,
        tu_file_has(e.log, "no longer a LoadBalancer of ours: dropped\" service=default/before"),
        20000, "the daemon to drop \"before\"");
    env_faults(&e, "{\"hold_actions\":false}");
    WAIT_FOR(&e, no_balancer(&e, uid), 30000, "the balancer of \"before\" deleted");
    assert_no_status_write(&e, "before", mark);
    free(uid);

    /* 3. Right after the status write. */
    uid = env_service(&e, "after", "LoadBalancer", 30083, NULL, NULL);
    WAIT_FOR(&e, env_ingress(&e, "after", ip, sizeof(ip), NULL, 0, NULL), 30000,
             "the status of \"after\"");
    mark = kube_log_len(&e);
    to_cluster_ip(&e, "after");
    WAIT_FOR(&e, no_balancer(&e, uid), 30000, "the balancer of \"after\" deleted");
    assert_no_status_write(&e, "after", mark);
    free(uid);
    env_stop(&e);
}
END_TEST

/* Both fakes and the daemon with refused_recheck_interval recheck, the
 * nodes in1 (10.0.1.31), in2 (10.0.1.32) when two, and bad (10.0.1.33),
 * which the fake Hetzner API refuses as a target, and the Service name of
 * type LoadBalancer: its UID (new), once its external IP is written (into
 * ip) and the TargetRefused Event is there. */
static char *
refused_target_start(struct env *e, const char *recheck, int two, const char *name, int node_port,
                     char *ip, size_t len)
{
    char extra[128];
    snprintf(extra, sizeof(extra), "refused_recheck_interval = \"%s\";", recheck);
    env_start(e, NULL, NULL, extra, 300);
    env_faults(e, "{\"refuse_ip\":{\"ip\":\"10.0.1.33\",\"code\":\"ip_not_owned\","
                  "\"status\":422}}");
    env_node(e, "in1", "10.0.1.31");
    if (two)
        env_node(e, "in2", "10.0.1.32");
    env_node(e, "bad", "10.0.1.33");
    char *uid = env_service(e, name, "LoadBalancer", node_port, NULL, NULL);
    WAIT_FOR(e, env_ingress(e, name, ip, len, NULL, 0, NULL), 30000,
             "the external IP despite the refused target");
    WAIT_FOR(e, env_has_event(e, "TargetRefused", "10.0.1.33"), 20000, "TargetRefused");
    return uid;
}

/* "robotlb writes the address once the balancer exists with the targets
 * Hetzner accepted": one node Hetzner refuses as a target (the fake's
 * refuse_ip) does not take the Service's external IP away; the refusal is
 * a TargetRefused Event and the node is tried again every
 * refused_recheck_interval (2 s here). */
START_TEST(a_refused_target_does_not_withhold_the_external_ip)
{
    struct env e;
    char ip[64], t[256];
    long refused;
    char *uid = refused_target_start(&e, "2s", 1, "edge", 30084, ip, sizeof(ip));
    /* written once the accepted targets and the service are in place */
    ck_assert(env_targets_of(&e, uid, t, sizeof(t)));
    ck_assert_str_eq(t, "10.0.1.31,10.0.1.32");
    json_t *l = env_lbs_of(&e, uid);
    json_t *lb = json_array_get(l, 0);
    json_t *svcs = json_object_get(lb, "services");
    ck_assert_uint_eq(json_array_size(svcs), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(svcs, 0), "listen_port")),
                     80);
    const char *v4 = json_string_value(
        json_object_get(json_object_get(json_object_get(lb, "public_net"), "ipv4"), "ip"));
    ck_assert_ptr_nonnull(v4);
    ck_assert_str_eq(ip, v4);
    json_decref(l);
    /* the refused node is still tried again on the recheck cycle */
    long adds = env_count_route(&e, ADD_TARGET);
    WAIT_FOR(&e, env_count_route(&e, ADD_TARGET) >= adds + 2, 30000,
             "the refused target tried again twice");
    ck_assert_int_ge(env_refusals_spaced(&e, ADD_TARGET, 1900), 3);
    ck_assert(env_targets_are(&e, uid, "10.0.1.31,10.0.1.32"));
    /* the status is not written again on every recheck */
    ck_assert_int_eq(kube_count(&e, "PATCH", "/services/edge/status", 0, &refused), 1);
    ck_assert_int_eq(refused, 0);
    free(uid);
    env_stop(&e);
}
END_TEST

/* The same while the refused node waits for its recheck (300 s here): a
 * status someone cleared is written again at the sync that sees it, from
 * the balancer with the targets Hetzner accepted, with no Hetzner write. */
START_TEST(a_status_cleared_while_a_refused_target_waits_is_written_again_at_once)
{
    struct env e;
    char ip[64], again[64];
    char *uid = refused_target_start(&e, "300s", 0, "held", 30086, ip, sizeof(ip));
    /* cleared only once the daemon saw its write: a status cleared before
     * the cache showed it is taken for the cache not having caught up */
    WAIT_FOR(&e, tu_file_has(e.log, "shows the status written\" service=default/held"), 20000,
             "the daemon to see the status it wrote");
    long adds = env_count_route(&e, ADD_TARGET);
    kube_req(&e, "PATCH", "/api/v1/namespaces/default/services/held/status",
             "application/merge-patch+json", "{\"status\":{\"loadBalancer\":{\"ingress\":null}}}",
             200, NULL);
    WAIT_FOR(&e, env_ingress(&e, "held", again, sizeof(again), NULL, 0, NULL), 20000,
             "the status written again before the recheck");
    ck_assert_str_eq(again, ip);
    ck_assert(env_targets_are(&e, uid, "10.0.1.31"));
    /* no reconcile: the recheck and the resync are minutes away */
    ck_assert_int_eq(env_count_route(&e, ADD_TARGET), adds);
    free(uid);
    env_stop(&e);
}
END_TEST

/* A status write the API server refuses (422) is an error that is logged
 * and not sent again as it is: not at the syncs that follow (two resyncs
 * here), only once the Service changed. */
START_TEST(a_refused_status_write_is_not_sent_again_as_it_is)
{
    struct env e;
    char ip[64];
    long refused;
    struct env_opts o = {.resync_s = 1, .extra = "resync_budget_percent = 100;"};
    env_start_opts(&e, &o);
    env_kube_fail_patch(&e, "/services/web/status", 422);
    env_node(&e, "n1", "10.0.1.11");
    char *uid = env_service(&e, "web", "LoadBalancer", 30085, NULL, NULL);
    WAIT_FOR(&e, tu_file_has(e.log, "the API server refused the status"), 30000, "the refusal");
    /* the syncs after it leave that write alone */
    long lists = env_count_route(&e, "GET /v1/load_balancers");
    WAIT_FOR(&e, env_count_route(&e, "GET /v1/load_balancers") >= lists + 2, 20000, "two resyncs");
    WAIT_FOR(&e, tu_file_has(e.log, "refused it for the Service as it is\" service=default/web"),
             20000, "a sync that leaves the refused write alone");
    ck_assert_int_eq(kube_count(&e, "PATCH", "/services/web/status", 0, &refused), 1);
    ck_assert_int_eq(refused, 1);
    ck_assert(!env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL));
    /* a changed Service is written again */
    kube_req(&e, "PATCH", "/api/v1/namespaces/default/services/web", "application/merge-patch+json",
             "{\"metadata\":{\"labels\":{\"changed\":\"yes\"}}}", 200, NULL);
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL), 30000,
             "the status written to the changed Service");
    ck_assert_int_eq(kube_count(&e, "PATCH", "/services/web/status", 0, &refused), 2);
    ck_assert_int_eq(refused, 1);
    free(uid);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb status write");
    TCase *tc = tcase_create("status");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, a_service_that_stops_being_a_load_balancer_gets_no_status_written);
    tcase_add_test(tc, a_refused_target_does_not_withhold_the_external_ip);
    tcase_add_test(tc, a_status_cleared_while_a_refused_target_waits_is_written_again_at_once);
    tcase_add_test(tc, a_refused_status_write_is_not_sent_again_as_it_is);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
