/*
 * "Every refusal is visible on the Service": the daemon against both fakes,
 * each refusal seen as a user sees it, with kubectl (`kubectl get events -o
 * json`): a Warning Event on the Service whose reason says what was
 * refused and whose message names the value and Hetzner's error code. A
 * refusal retried on refused_recheck_interval (1 s here) is one Event
 * whose count grows (the core's Event aggregation), not one per attempt.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "env.h"
#include "testutil.h"

#define RECHECK "refused_recheck_interval = \"1s\";"
#define ANN(k, v) ",\"annotations\":{\"" k "\":\"" v "\"}"

/* Merge-patch one annotation of Service default/name. */
static void
annotate(struct env *e, const char *name, const char *key, const char *value)
{
    char path[256], body[512];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/services/%s", name);
    snprintf(body, sizeof(body), "{\"metadata\":{\"annotations\":{\"%s\":\"%s\"}}}", key, value);
    kube_req(e, "PATCH", path, "application/merge-patch+json", body, 200, NULL);
}

/* A field of the one balancer labelled for uid ("" when none). */
static void
lb_field(struct env *e, const char *uid, const char *a, const char *b, char *out, size_t len)
{
    json_t *l = env_lbs_of(e, uid);
    json_t *v = json_object_get(json_array_get(l, 0), a);
    if (b)
        v = json_object_get(v, b);
    snprintf(out, len, "%s", json_string_value(v) ? json_string_value(v) : "");
    json_decref(l);
}

/* The networks the one balancer labelled for uid is on, as "7,8". */
static void
lb_networks(struct env *e, const char *uid, char *out, size_t len)
{
    json_t *l = env_lbs_of(e, uid), *pn;
    size_t i;
    out[0] = '\0';
    json_array_foreach(json_object_get(json_array_get(l, 0), "private_net"), i, pn)
        snprintf(out + strlen(out), len - strlen(out), "%s%lld", i ? "," : "",
                 (long long)json_integer_value(json_object_get(pn, "network")));
    json_decref(l);
}

/* robotlb/balancer-type naming a type Hetzner does not know, on a new
 * Service: no balancer, and an InvalidBalancerType Event naming the value,
 * its annotation and invalid_input, counted again on every recheck. */
START_TEST(an_unknown_balancer_type_on_a_new_service_is_a_warning_event)
{
    struct env e;
    env_start(&e, NULL, NULL, RECHECK, 300);
    env_node(&e, "n1", "10.0.1.61");
    char *uid =
        env_service(&e, "t1", "LoadBalancer", 30161, ANN("robotlb/balancer-type", "lb99"), NULL);
    WAIT_FOR(&e,
             env_kubectl_event(&e, "t1", "InvalidBalancerType", "\"lb99\"", "robotlb/balancer-type",
                               "invalid_input", "load_balancer_type", NULL) >= 2,
             30000, "the InvalidBalancerType Event, counted twice");
    json_t *l = env_lbs_of(&e, uid);
    ck_assert_uint_eq(json_array_size(l), 0);
    json_decref(l);
    free(uid);
    env_stop(&e);
}
END_TEST

/* ... and on an existing Service: change_type is refused, the balancer
 * keeps its type and the Service its IP. */
START_TEST(an_unknown_balancer_type_on_an_existing_service_is_a_warning_event)
{
    struct env e;
    char ip[64], type[32];
    env_start(&e, NULL, NULL, RECHECK, 300);
    env_node(&e, "n1", "10.0.1.61");
    char *uid = env_service(&e, "t2", "LoadBalancer", 30162, NULL, NULL);
    WAIT_FOR(&e, env_ingress(&e, "t2", ip, sizeof(ip), NULL, 0, NULL), 20000, "the status");
    annotate(&e, "t2", "robotlb/balancer-type", "lb99");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "t2", "InvalidBalancerType", "\"lb99\"", "robotlb/balancer-type",
                               "change", "invalid_input", NULL) >= 1,
             30000, "the InvalidBalancerType Event of the change");
    lb_field(&e, uid, "load_balancer_type", "name", type, sizeof(type));
    ck_assert_str_eq(type, "lb11");
    ck_assert(env_ingress(&e, "t2", ip, sizeof(ip), NULL, 0, NULL));
    free(uid);
    env_stop(&e);
}
END_TEST

/* robotlb/lb-location naming an unknown location on a new Service. */
START_TEST(an_unknown_location_on_a_new_service_is_a_warning_event)
{
    struct env e;
    env_start(&e, NULL, NULL, RECHECK, 300);
    env_node(&e, "n1", "10.0.1.61");
    char *uid =
        env_service(&e, "l1", "LoadBalancer", 30163, ANN("robotlb/lb-location", "mars1"), NULL);
    WAIT_FOR(&e,
             env_kubectl_event(&e, "l1", "InvalidLocation", "\"mars1\"", "robotlb/lb-location",
                               "invalid_input", NULL) >= 1,
             30000, "the InvalidLocation Event");
    json_t *l = env_lbs_of(&e, uid);
    ck_assert_uint_eq(json_array_size(l), 0);
    json_decref(l);
    free(uid);
    env_stop(&e);
}
END_TEST

/* A changed robotlb/lb-location on an existing balancer, which Hetzner
 * cannot move: the balancer stays where it is, and the Event says so. */
START_TEST(a_changed_location_on_an_existing_balancer_is_a_warning_event)
{
    struct env e;
    char ip[64], loc[32];
    env_start(&e, NULL, NULL, RECHECK, 300);
    env_node(&e, "n1", "10.0.1.61");
    char *uid = env_service(&e, "l2", "LoadBalancer", 30164, NULL, NULL);
    WAIT_FOR(&e, env_ingress(&e, "l2", ip, sizeof(ip), NULL, 0, NULL), 20000, "the status");
    annotate(&e, "l2", "robotlb/lb-location", "fsn1");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "l2", "LocationUnchangeable", "\"fsn1\"", "robotlb/lb-location",
                               "is in hel1", "cannot move", NULL) >= 1,
             30000, "the LocationUnchangeable Event");
    lb_field(&e, uid, "location", "name", loc, sizeof(loc));
    ck_assert_str_eq(loc, "hel1");
    json_t *l = env_lbs_of(&e, uid);
    ck_assert_uint_eq(json_array_size(l), 1);
    json_decref(l);
    free(uid);
    env_stop(&e);
}
END_TEST

/* A target Hetzner refuses (a node outside the vSwitch subnet): a
 * TargetRefused Event naming the IP and the code, counted on each retry;
 * the other node stays a target. */
START_TEST(a_target_hetzner_refuses_is_a_warning_event)
{
    struct env e;
    env_start(&e, NULL, NULL, RECHECK, 300);
    env_node(&e, "in", "10.0.1.61");
    env_node(&e, "out", "10.0.2.62");
    char *uid = env_service(&e, "edge", "LoadBalancer", 30165, NULL, NULL);
    WAIT_FOR(&e,
             env_kubectl_event(&e, "edge", "TargetRefused", "10.0.2.62",
                               "cloud_resource_ip_not_allowed", NULL) >= 2,
             30000, "the TargetRefused Event, counted twice");
    ck_assert(env_targets_are(&e, uid, "10.0.1.61"));
    free(uid);
    env_stop(&e);
}
END_TEST

/* robotlb/lb-private-ip outside the network: the balancer is created but
 * Hetzner refuses the attach; a NetworkAttachRefused Event names the IP
 * and the code, the targets' refusals that follow from it add no Event of
 * their own, and the Service's status shows no IP (the balancer would
 * reach no target). */
START_TEST(a_private_ip_outside_the_network_is_a_warning_event_and_no_status)
{
    struct env e;
    char ip[64];
    env_start(&e, NULL, NULL, RECHECK, 300);
    env_node(&e, "n1", "10.0.1.61");
    char *uid = env_service(&e, "p1", "LoadBalancer", 30166,
                            ANN("robotlb/lb-private-ip", "10.9.9.9"), NULL);
    WAIT_FOR(&e,
             env_kubectl_event(&e, "p1", "NetworkAttachRefused", "\"10.9.9.9\"",
                               "robotlb/lb-private-ip", "\"k8s\"", "invalid_input", NULL) >= 2,
             30000, "the NetworkAttachRefused Event, counted twice");
    json_t *l = env_lbs_of(&e, uid);
    ck_assert_uint_eq(json_array_size(l), 1);
    json_decref(l);
    ck_assert_int_eq(env_ingress(&e, "p1", ip, sizeof(ip), NULL, 0, NULL), 0);
    ck_assert_int_eq(env_kubectl_event(&e, "p1", "TargetRefused", "10.0.1.61", NULL), 0);
    free(uid);
    env_stop(&e);
}
END_TEST

#define SLICE(ready)                                                                               \
    "{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\",\"metadata\":{"            \
    "\"name\":\"loc-1\",\"namespace\":\"default\",\"labels\":{"                                    \
    "\"kubernetes.io/service-name\":\"loc\"}},\"addressType\":\"IPv4\",\"endpoints\":["            \
    "{\"addresses\":[\"10.244.1.9\"],\"nodeName\":\"n1\",\"conditions\":{\"ready\":" ready "}}]}"

/* A Local Service whose balancer loses its last endpoint: the targets go,
 * the balancer and the Service's IP stay, and an Event says so. */
START_TEST(a_local_service_losing_its_last_endpoint_is_a_warning_event)
{
    struct env e;
    char ip[64], ip2[64];
    env_start(&e, NULL, NULL, RECHECK, 300);
    env_node(&e, "n1", "10.0.1.61");
    env_node(&e, "n2", "10.0.1.62");
    char *uid =
        env_service(&e, "loc", "LoadBalancer", 30167, NULL, ",\"externalTrafficPolicy\":\"Local\"");
    kube_req(&e, "POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
             "application/json", SLICE("true"), 201, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.61"), 20000, "the serving node as target");
    WAIT_FOR(&e, env_ingress(&e, "loc", ip, sizeof(ip), NULL, 0, NULL), 20000, "the status");
    kube_req(&e, "PUT", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/loc-1",
             "application/json", SLICE("false"), 200, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, ""), 20000, "the targets to go");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "loc", "BalancerWithoutTargets", "externalTrafficPolicy Local",
                               ip, NULL) >= 1,
             20000, "the BalancerWithoutTargets Event naming the IP");
    ck_assert(env_ingress(&e, "loc", ip2, sizeof(ip2), NULL, 0, NULL));
    ck_assert_str_eq(ip2, ip);
    free(uid);
    env_stop(&e);
}
END_TEST

/* Two networks with the same ranges (the nodes' vSwitch in both). */
#define NET(id, name)                                                                              \
    "{\"id\":" id ",\"name\":\"" name "\",\"ip_range\":\"10.0.0.0/16\",\"subnets\":["              \
    "{\"type\":\"cloud\",\"ip_range\":\"10.0.0.0/24\"},{\"type\":\"vswitch\",\"ip_range\":"        \
    "\"10.0.1.0/24\",\"vswitch_id\":4242}]}"

/* A changed robotlb/lb-network: the balancer is attached to the new
 * network, then detached from the old one; its target stays. */
START_TEST(a_changed_network_detaches_the_old_one)
{
    struct env e;
    char nets[64], ip[64];
    struct env_opts o = {.no_network = 1,
                         .seed_extra = ",\"networks\":[" NET("7", "k8s") "," NET("8", "k8s2") "]",
                         .extra = RECHECK};
    env_start_opts(&e, &o);
    env_node(&e, "n1", "10.0.1.61");
    char *uid =
        env_service(&e, "net", "LoadBalancer", 30168, ANN("robotlb/lb-network", "k8s"), NULL);
    WAIT_FOR(&e, env_ingress(&e, "net", ip, sizeof(ip), NULL, 0, NULL), 20000, "the status");
    lb_networks(&e, uid, nets, sizeof(nets));
    ck_assert_str_eq(nets, "7");
    annotate(&e, "net", "robotlb/lb-network", "k8s2");
    WAIT_FOR(&e, (lb_networks(&e, uid, nets, sizeof(nets)), strcmp(nets, "8") == 0), 20000,
             "the balancer on k8s2 only");
    ck_assert(env_targets_are(&e, uid, "10.0.1.61"));
    ck_assert_int_ge(
        env_count_route(&e, "POST /v1/load_balancers/{id}/actions/detach_from_network"), 1);
    free(uid);
    env_stop(&e);
}
END_TEST

/* A warning repeated after a daemon restart is the same Event with a
 * higher count, not a new one per run: the daemon restarted three times
 * with the same refusal leaves one InvalidBalancerType Event on the
 * Service, counted at least once per run, and one line in `kubectl
 * describe`. The recheck is an hour, so each run refuses only at its
 * start. */
START_TEST(a_warning_repeated_after_a_restart_is_the_same_event_counted_again)
{
    struct env e;
    char conf_path[600], log[600];
    long count = 0, prev = 0;
    env_start(&e, NULL, NULL, "refused_recheck_interval = \"1h\";", 300);
    env_node(&e, "n1", "10.0.1.61");
    char *uid =
        env_service(&e, "rs", "LoadBalancer", 30169, ANN("robotlb/balancer-type", "lb99"), NULL);
    snprintf(conf_path, sizeof(conf_path), "%s/prismlb.conf", dir);
    char *conf = tu_read_file(conf_path, NULL);
    ck_assert_ptr_nonnull(conf);
    for (int run = 0; run < 4; run++) {
        if (run > 0) {
            int st = tu_stop(&e.d, SIGTERM, 10000);
            ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
            ck_assert_int_eq(
                env_kubectl_events(&e, "rs", "InvalidBalancerType", &prev, "\"lb99\"", NULL), 1);
            snprintf(log, sizeof(log), "prismlb-%d", run);
            env_spawn(&e.d, log, conf, 300, e.log);
        }
        WAIT_FOR(&e,
                 env_kubectl_events(&e, "rs", "InvalidBalancerType", &count, "\"lb99\"", NULL) ==
                         1 &&
                     count > prev,
                 30000, "the one InvalidBalancerType Event, counted again");
    }
    ck_assert_int_ge(count, 4);
    char *out = NULL;
    ck_assert_int_eq(env_kubectl(&e, &out, "describe", "service", "-n", "default", "rs", NULL), 0);
    const char *p = strstr(out, "InvalidBalancerType");
    ck_assert_msg(p && !strstr(p + 1, "InvalidBalancerType"), "kubectl describe:\n%s", out);
    free(out);
    json_t *l = env_lbs_of(&e, uid);
    ck_assert_uint_eq(json_array_size(l), 0);
    json_decref(l);
    free(conf);
    free(uid);
    env_stop(&e);
}
END_TEST

/* The retries of the first service's health check of the one balancer
 * labelled for uid (-1 when none). */
static long
lb_retries(struct env *e, const char *uid)
{
    json_t *l = env_lbs_of(e, uid);
    json_t *hc = json_object_get(
        json_array_get(json_object_get(json_array_get(l, 0), "services"), 0), "health_check");
    json_t *v = json_object_get(hc, "retries");
    long n = json_is_integer(v) ? (long)json_integer_value(v) : -1;
    json_decref(l);
    return n;
}

/* One de-duplication for every warning: a bad annotation is one
 * InvalidAnnotation Event while it holds, whatever the number of syncs (a
 * resync every second syncs the Service each time); fixed, its condition
 * is over, and the same bad value again is the same Event counted again. */
START_TEST(an_invalid_annotation_is_one_event_while_it_holds_and_counted_again_when_it_returns)
{
    struct env e;
    char ip[64];
    long count = 0;
    env_start(&e, NULL, NULL, "resync_budget_percent = 100;", 1);
    env_node(&e, "n1", "10.0.1.61");
    char *uid = env_service(&e, "ia", "LoadBalancer", 30170, NULL, NULL);
    WAIT_FOR(&e, env_ingress(&e, "ia", ip, sizeof(ip), NULL, 0, NULL), 20000, "the status");
    annotate(&e, "ia", "robotlb/lb-retries", "x");
    WAIT_FOR(&e, env_kubectl_event(&e, "ia", "InvalidAnnotation", "robotlb/lb-retries", NULL) >= 1,
             20000, "the InvalidAnnotation Event");
    /* five more resync lists, each a pass over every Service */
    long lists = env_count_route(&e, "GET /v1/load_balancers");
    WAIT_FOR(&e, env_count_route(&e, "GET /v1/load_balancers") >= lists + 5, 30000, "five resyncs");
    ck_assert_int_eq(
        env_kubectl_events(&e, "ia", "InvalidAnnotation", &count, "robotlb/lb-retries", NULL), 1);
    ck_assert_int_eq(count, 1);
    /* fixed: the balancer follows the set, which ends the warning ... */
    annotate(&e, "ia", "robotlb/lb-retries", "5");
    WAIT_FOR(&e, lb_retries(&e, uid) == 5, 20000, "the fixed retries on the balancer");
    /* ... so the same bad value again is the same Event, counted again */
    annotate(&e, "ia", "robotlb/lb-retries", "x");
    WAIT_FOR(&e,
             env_kubectl_events(&e, "ia", "InvalidAnnotation", &count, "robotlb/lb-retries",
                                NULL) == 1 &&
                 count == 2,
             20000, "the InvalidAnnotation Event counted again");
    ck_assert_int_eq(lb_retries(&e, uid), 5); /* the last good set stays */
    free(uid);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb refusals");
    TCase *tc = tcase_create("refusals");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, an_unknown_balancer_type_on_a_new_service_is_a_warning_event);
    tcase_add_test(tc, an_unknown_balancer_type_on_an_existing_service_is_a_warning_event);
    tcase_add_test(tc, an_unknown_location_on_a_new_service_is_a_warning_event);
    tcase_add_test(tc, a_changed_location_on_an_existing_balancer_is_a_warning_event);
    tcase_add_test(tc, a_target_hetzner_refuses_is_a_warning_event);
    tcase_add_test(tc, a_private_ip_outside_the_network_is_a_warning_event_and_no_status);
    tcase_add_test(tc, a_local_service_losing_its_last_endpoint_is_a_warning_event);
    tcase_add_test(tc, a_changed_network_detaches_the_old_one);
    tcase_add_test(tc, a_warning_repeated_after_a_restart_is_the_same_event_counted_again);
    tcase_add_test(
        tc, an_invalid_annotation_is_one_event_while_it_holds_and_counted_again_when_it_returns);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
