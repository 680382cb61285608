/*
 * mod_hetzner_lb's reconcile end to end, as a user sees it: the daemon with
 * the module against the fake Kubernetes API server and the fake Hetzner
 * API. Nodes carry InternalIPs inside the vSwitch subnet of the seeded
 * network "k8s"; Services of type LoadBalancer get balancers labelled with
 * their UID, with the right targets and services, and their status carries
 * the balancer's IP. Each test is named after the sentence of robotlb's
 * documentation it checks.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "env.h"
#include "testutil.h"

/* A resync every second lists one page a second: the whole of the fake's
 * RateLimit-Limit 3600 an hour, so the share is set to 100 %. */
#define BUDGET_1S "resync_budget_percent = 100;"

static long
total_lbs(struct env *e)
{
    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&e->hz, "GET", "/_admin/state", NULL, NULL, NULL, &r), 0);
    long n = (long)json_array_size(json_object_get(r.body, "load_balancers"));
    hzt_resp_free(&r);
    return n;
}

/* ------------------------------------------------------------------ */
/* "creates Hetzner load balancers that point to nodes based on node-ip" */

/* "The operator listens to the Kubernetes API for services of type
 * LoadBalancer and creates Hetzner load balancers that point to nodes based
 * on node-ip"; "robotlb labels every balancer it creates with
 * robotlb/service-uid"; "Cluster ... Cordoned and not-ready nodes are left
 * out"; "A balancer is updated when ... a node is ... cordoned"; a deleted
 * Service's balancer goes. */
START_TEST(creates_load_balancers_that_point_to_nodes_based_on_node_ip)
{
    struct env e;
    char ip[64];
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.11");
    env_node(&e, "n2", "10.0.1.12");
    env_node(&e, "n3", "10.0.1.13");
    char *uid = env_service(&e, "web", "LoadBalancer", 30080, NULL, NULL);

    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.11,10.0.1.12,10.0.1.13"), 20000,
             "a balancer labelled with the UID targeting the three nodes");
    json_t *a = env_lbs_of(&e, uid);
    json_t *lb = json_array_get(a, 0);
    ck_assert_str_eq(json_string_value(json_object_get(lb, "name")), "web.default");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(lb, "load_balancer_type"), "name")),
        "lb11");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(lb, "location"), "name")),
                     "hel1");
    json_t *svcs = json_object_get(lb, "services");
    ck_assert_uint_eq(json_array_size(svcs), 1);
    json_t *s0 = json_array_get(svcs, 0);
    ck_assert_int_eq(json_integer_value(json_object_get(s0, "listen_port")), 80);
    ck_assert_int_eq(json_integer_value(json_object_get(s0, "destination_port")), 30080);
    json_t *hc = json_object_get(s0, "health_check");
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "interval")), 15);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "timeout")), 10);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "retries")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(lb, "private_net"), 0), "network")),
                     7);
    char want[64];
    snprintf(want, sizeof(want), "%s",
             json_string_value(json_object_get(
                 json_object_get(json_object_get(lb, "public_net"), "ipv4"), "ip")));
    json_decref(a);
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL) && strcmp(ip, want) == 0,
             20000, "the Service's status to carry the balancer's IP");

    /* kubectl cordon n2 */
    kube_req(&e, "PATCH", "/api/v1/nodes/n2", "application/merge-patch+json",
             "{\"spec\":{\"unschedulable\":true}}", 200, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.11,10.0.1.13"), 20000,
             "the cordoned node's target to go");
    /* a not-ready node goes too */
    kube_req(&e, "PATCH", "/api/v1/nodes/n3/status", "application/merge-patch+json",
             "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}", 200,
             NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.11"), 20000, "the not-ready node's target to go");
    /* Converged: a change that makes no difference (a label that no
     * selector reads) sends nothing. The Node watch delivers in order: the
     * label comes before n2's uncordon, so once n2's target is back, every
     * write since `before` is that one add_target (reads of the last
     * reconcile's actions may still trail). */
    long before = env_last_request(&e);
    kube_req(&e, "PATCH", "/api/v1/nodes/n1", "application/merge-patch+json",
             "{\"metadata\":{\"labels\":{\"touched\":\"yes\"}}}", 200, NULL);
    kube_req(&e, "PATCH", "/api/v1/nodes/n2", "application/merge-patch+json",
             "{\"spec\":{\"unschedulable\":false}}", 200, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.11,10.0.1.12"), 20000,
             "the uncordoned node's target to come back");
    json_t *since = env_requests_since(&e, before);
    int writes = 0;
    size_t i;
    json_t *q;
    json_array_foreach(since, i, q)
    {
        if (strcmp(json_string_value(json_object_get(q, "method")), "GET") == 0)
            continue;
        writes++;
        ck_assert_msg(strcmp(json_string_value(json_object_get(q, "route")),
                             "POST /v1/load_balancers/{id}/actions/add_target") == 0,
                      "a write after the label change: %s %s",
                      json_string_value(json_object_get(q, "method")),
                      json_string_value(json_object_get(q, "path")));
    }
    ck_assert_int_eq(writes, 1);
    json_decref(since);

    kube_req(&e, "DELETE", "/api/v1/namespaces/default/services/web", NULL, NULL, 200, NULL);
    WAIT_FOR(&e, total_lbs(&e) == 0, 20000, "the balancer to be deleted with its Service");
    free(uid);
    env_stop(&e);
}
END_TEST

/* "Local: only the nodes kube-proxy serves the traffic from, read from the
 * service's EndpointSlice resources": endpoints on 2 of 4 nodes, 2 targets;
 * a third node's endpoint becoming ready adds it. With no
 * dynamic_node_selector in the config: selection by the traffic policy is
 * the default. */
START_TEST(local_targets_only_the_nodes_kube_proxy_serves_the_traffic_from)
{
    struct env e;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.21");
    env_node(&e, "n2", "10.0.1.22");
    env_node(&e, "n3", "10.0.1.23");
    env_node(&e, "n4", "10.0.1.24");
    char *uid =
        env_service(&e, "loc", "LoadBalancer", 30081, NULL, ",\"externalTrafficPolicy\":\"Local\"");
    env_local_slice(&e);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.21,10.0.1.23"), 20000,
             "2 targets: the nodes with a ready endpoint");
    kube_req(&e, "PATCH", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/loc-abc",
             "application/json-patch+json",
             "[{\"op\":\"replace\",\"path\":\"/endpoints/2/conditions\",\"value\":"
             "{\"ready\":true}}]",
             200, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.21,10.0.1.23,10.0.1.24"), 20000,
             "the node whose endpoint became ready to be added");
    free(uid);
    env_stop(&e);
}
END_TEST

/* "When Hetzner refuses a target for a reason other than the rate limit,
 * the service is checked again within 30 seconds instead, so a node it
 * refuses for good, such as one outside the vSwitch subnet, keeps its
 * service on that 30-second cycle" (refused_recheck_interval 2 s here). */
START_TEST(a_node_outside_the_vswitch_subnet_keeps_its_service_on_the_recheck_cycle)
{
    struct env e;
    env_start(&e, NULL, NULL, "refused_recheck_interval = \"2s\";", 300);
    env_node(&e, "in1", "10.0.1.31");
    env_node(&e, "in2", "10.0.1.32");
    env_node(&e, "out", "10.0.2.33");
    char *uid = env_service(&e, "edge", "LoadBalancer", 30082, NULL, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.31,10.0.1.32"), 20000,
             "the two nodes inside the subnet as targets");
    const char *route = "POST /v1/load_balancers/{id}/actions/add_target";
    /* Two adds that pass, then the refused one, tried again once per 2 s
     * cycle: consecutive refusals at least an interval apart by the fake's
     * clock, not a hot loop. */
    WAIT_FOR(&e, env_count_route(&e, route) >= 5, 30000, "the refused target to be tried again");
    ck_assert_int_ge(env_refusals_spaced(&e, route, 1900), 3);
    ck_assert(env_targets_are(&e, uid, "10.0.1.31,10.0.1.32"));
    ck_assert_int_eq(total_lbs(&e), 1);
    free(uid);
    env_stop(&e);
}
END_TEST

/* "An unlabelled balancer whose targets are all IPs, at least one of them a
 * node of the service, is adopted: robotlb adds its label, keeps the name"
 * — here one an earlier release created under the Service's old name. */
START_TEST(an_unlabelled_balancer_under_the_old_name_is_adopted)
{
    struct env e;
    env_start(&e,
              ",\"load_balancers\":[{\"id\":3,\"name\":\"shop\",\"load_balancer_type\":\"lb11\","
              "\"location\":\"fsn1\",\"network\":7,\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":"
              "\"10.0.1.41\"}}],\"services\":[{\"protocol\":\"tcp\",\"listen_port\":80,"
              "\"destination_port\":30083}]}]",
              NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    env_node(&e, "n2", "10.0.1.42");
    char *uid = env_service(&e, "shop", "LoadBalancer", 30083, NULL, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41,10.0.1.42"), 20000,
             "the old balancer labelled and targeting both nodes");
    json_t *a = env_lbs_of(&e, uid);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(a, 0), "id")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(a, 0), "name")), "shop");
    json_decref(a);
    ck_assert_int_eq(total_lbs(&e), 1);
    ck_assert_int_eq(env_count_route(&e, "POST /v1/load_balancers"), 0);
    free(uid);
    env_stop(&e);
}
END_TEST

/* "hand the balancer over with hcloud load-balancer add-label --overwrite
 * '<balancer>' robotlb/service-uid=<new UID>": the handed-over balancer
 * (here without targets, services or network) is managed, and the
 * Service's status shows its IP only once it serves the Service — not
 * while the writes that make it do (held running by the fake) are still
 * under way. */
START_TEST(a_handed_over_balancer_gets_the_status_once_it_serves_the_service)
{
    struct env e;
    char labels[256], ip[64], t[256];
    env_start(&e, NULL, NULL, BUDGET_1S, 1);
    env_node(&e, "n1", "10.0.1.71");
    /* no port to expose yet (allocateLoadBalancerNodePorts false, no
     * nodePort): it gets no balancer of its own */
    char *uid = env_service(&e, "hand", "LoadBalancer", 0, NULL,
                            ",\"allocateLoadBalancerNodePorts\":false");
    WAIT_FOR(&e, env_has_event(&e, "NoExposablePort", "nodePort"), 20000, "NoExposablePort");
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", uid);
    env_create_lb(&e, "handed", labels);
    /* two resync lists after it: the module knows it is labelled */
    long lists = env_count_route(&e, "GET /v1/load_balancers");
    WAIT_FOR(&e, env_count_route(&e, "GET /v1/load_balancers") >= lists + 2, 20000,
             "two resync lists");
    env_faults(&e, "{\"hold_actions\":true}");
    kube_req(&e, "PATCH", "/api/v1/namespaces/default/services/hand",
             "application/merge-patch+json",
             "{\"spec\":{\"ports\":[{\"port\":80,\"protocol\":\"TCP\",\"nodePort\":30171}]}}", 200,
             NULL);
    WAIT_FOR(&e, env_held_actions(&e) >= 1, 20000, "the first write of the plan, held running");
    ck_assert_msg(!env_ingress(&e, "hand", ip, sizeof(ip), NULL, 0, NULL),
                  "the status shows %s while the balancer does not serve the Service yet", ip);
    env_faults(&e, "{\"hold_actions\":false}");
    WAIT_FOR(&e, env_ingress(&e, "hand", ip, sizeof(ip), NULL, 0, NULL), 30000, "the status");
    /* by then the balancer serves it */
    ck_assert(env_targets_of(&e, uid, t, sizeof(t)));
    ck_assert_str_eq(t, "10.0.1.71");
    json_t *l = env_lbs_of(&e, uid);
    json_t *svcs = json_object_get(json_array_get(l, 0), "services");
    ck_assert_uint_eq(json_array_size(svcs), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(svcs, 0), "listen_port")),
                     80);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(l, 0), "name")), "handed");
    json_decref(l);
    free(uid);
    env_stop(&e);
}
END_TEST

/* "When the name is taken by a balancer labelled for another service ...
 * robotlb leaves that balancer alone and reports it in a warning event on
 * the service ... the warning names the old UID." */
START_TEST(a_taken_name_gives_a_warning_event_naming_the_old_uid)
{
    struct env e;
    env_start(&e,
              ",\"load_balancers\":[{\"id\":5,\"name\":\"api.default\",\"load_balancer_type\":"
              "\"lb11\",\"location\":\"hel1\",\"labels\":{\"robotlb/service-uid\":"
              "\"0b5e7c1e-old-uid\"}}]",
              NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.51");
    char *uid = env_service(&e, "api", "LoadBalancer", 30084, NULL, NULL);
    WAIT_FOR(&e, env_has_event(&e, "BalancerNameTaken", "0b5e7c1e-old-uid"), 20000,
             "the warning Event naming the old UID");
    tu_sleep_ms(1000);
    ck_assert_int_eq(total_lbs(&e), 1);
    json_t *a = env_lbs_of(&e, uid);
    ck_assert_uint_eq(json_array_size(a), 0);
    json_decref(a);
    ck_assert_int_eq(env_count_route(&e, "POST /v1/load_balancers"), 0);
    free(uid);
    env_stop(&e);
}
END_TEST

/* "A balancer type caps how many targets it holds: lb11, the default type,
 * holds 25. When more nodes are selected than the type holds, the extra
 * ones are dropped in a stable order and a warning names the limit." */
START_TEST(lb11_holds_25_targets_the_extra_nodes_are_dropped_with_a_warning_naming_the_limit)
{
    struct env e;
    char name[32], ip[32];
    env_start(&e, NULL, NULL, NULL, 300);
    for (int i = 0; i < 27; i++) {
        snprintf(name, sizeof(name), "n%02d", i);
        snprintf(ip, sizeof(ip), "10.0.1.%d", 100 + i);
        env_node(&e, name, ip);
    }
    char *uid = env_service(&e, "big", "LoadBalancer", 30090, NULL, NULL);
    char want[2048] = "";
    /* sorted by node name: n00..n24 are kept, n25 and n26 dropped */
    for (int i = 0; i < 25; i++)
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s10.0.1.%d", i ? "," : "",
                 100 + i);
    WAIT_FOR(&e, env_targets_are(&e, uid, want), 20000, "25 targets");
    WAIT_FOR(&e, env_has_event(&e, "TooManyTargets", "holds 25"), 20000,
             "the warning naming the limit");
    free(uid);
    env_stop(&e);
}
END_TEST

/* "When no port of a service can be exposed, no balancer is created for
 * it ... and a warning event on the service reports the problem." */
START_TEST(a_service_without_an_exposable_port_gets_no_balancer_and_a_warning_event)
{
    struct env e;
    char body[1024];
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.71");
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"noport\","
             "\"namespace\":\"default\"},\"spec\":{\"type\":\"LoadBalancer\","
             "\"allocateLoadBalancerNodePorts\":false,\"ports\":[{\"port\":80,"
             "\"protocol\":\"TCP\"}]}}");
    kube_req(&e, "POST", "/api/v1/namespaces/default/services", "application/json", body, 201,
             NULL);
    WAIT_FOR(&e, env_has_event(&e, "NoExposablePort", "nodePort"), 20000, "the warning Event");
    ck_assert_int_eq(total_lbs(&e), 0);
    ck_assert_int_eq(env_count_route(&e, "POST /v1/load_balancers"), 0);
    env_stop(&e);
}
END_TEST

/* "While a service has no target nodes, for example a Local service without
 * ready pods, robotlb cannot tell whether an unlabelled balancer is its
 * own, so it waits and reports that in a warning event." */
START_TEST(a_service_without_target_nodes_waits_with_a_warning_event)
{
    struct env e;
    env_start(&e,
              ",\"load_balancers\":[{\"id\":4,\"name\":\"idle\",\"load_balancer_type\":\"lb11\","
              "\"location\":\"hel1\",\"network\":7,\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":"
              "\"10.0.1.81\"}}]}]",
              NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.81");
    char *uid = env_service(&e, "idle", "LoadBalancer", 30091, NULL,
                            ",\"externalTrafficPolicy\":\"Local\"");
    WAIT_FOR(&e, env_has_event(&e, "NoTargetNodes", "\"idle\""), 20000, "the warning Event");
    ck_assert_int_eq(total_lbs(&e), 1);
    json_t *a = env_lbs_of(&e, uid);
    ck_assert_uint_eq(json_array_size(a), 0);
    json_decref(a);
    free(uid);
    env_stop(&e);
}
END_TEST

/* "robotlb/lb-private-ip: Requests specific IP address for the load
 * balancer in the private network": attach_to_network with that IP, then
 * the targets. */
START_TEST(lb_private_ip_requests_the_balancers_address_in_the_network)
{
    struct env e;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.91");
    char *uid = env_service(&e, "priv", "LoadBalancer", 30092,
                            ",\"annotations\":{\"robotlb/lb-private-ip\":\"10.0.0.10\"}", NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.91"), 20000, "the target");
    json_t *a = env_lbs_of(&e, uid);
    json_t *net = json_array_get(json_object_get(json_array_get(a, 0), "private_net"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(net, "network")), 7);
    ck_assert_str_eq(json_string_value(json_object_get(net, "ip")), "10.0.0.10");
    json_decref(a);
    free(uid);
    env_stop(&e);
}
END_TEST

/* "Every port of the service needs an allocated nodePort ... ports without
 * one are skipped": with allocateLoadBalancerNodePorts: false the API
 * server allocates none, but keeps the one a port sets itself; that port is
 * exposed, the other skipped. */
START_TEST(with_allocate_node_ports_false_the_port_that_sets_a_node_port_is_exposed)
{
    struct env e;
    char ip[64];
    json_t *o;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.94");
    kube_req(&e, "POST", "/api/v1/namespaces/default/services", "application/json",
             "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"mixed\","
             "\"namespace\":\"default\"},\"spec\":{\"type\":\"LoadBalancer\","
             "\"allocateLoadBalancerNodePorts\":false,\"selector\":{\"app\":\"mixed\"},"
             "\"ports\":[{\"name\":\"http\",\"port\":80,\"nodePort\":30111},"
             "{\"name\":\"https\",\"port\":443}]}}",
             201, &o);
    json_t *ports = json_object_get(json_object_get(o, "spec"), "ports");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(ports, 0), "nodePort")),
                     30111);
    ck_assert_ptr_null(json_object_get(json_array_get(ports, 1), "nodePort"));
    char *uid = strdup(json_string_value(json_object_get(json_object_get(o, "metadata"), "uid")));
    json_decref(o);
    ck_assert_ptr_nonnull(uid);
    WAIT_FOR(&e, env_ingress(&e, "mixed", ip, sizeof(ip), NULL, 0, NULL), 20000, "the status");
    json_t *a = env_lbs_of(&e, uid);
    json_t *svcs = json_object_get(json_array_get(a, 0), "services");
    ck_assert_uint_eq(json_array_size(svcs), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(svcs, 0), "listen_port")),
                     80);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_array_get(svcs, 0), "destination_port")), 30111);
    json_decref(a);
    free(uid);
    env_stop(&e);
}
END_TEST

/* robotlb/lb-public-interface: "false": a private-only balancer, its
 * public interface disabled and the Service's external IP its private one
 * (in the create body; and with lb-private-ip, disabled after the
 * attach). */
START_TEST(lb_public_interface_false_makes_a_private_only_balancer)
{
    struct env e;
    char ip[64];
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.95");
    char *u1 = env_service(&e, "inner", "LoadBalancer", 30095,
                           ",\"annotations\":{\"robotlb/lb-public-interface\":\"false\"}", NULL);
    char *u2 = env_service(&e, "inner2", "LoadBalancer", 30096,
                           ",\"annotations\":{\"robotlb/lb-public-interface\":\"false\","
                           "\"robotlb/lb-private-ip\":\"10.0.0.20\"}",
                           NULL);
    WAIT_FOR(&e,
             env_ingress(&e, "inner", ip, sizeof(ip), NULL, 0, NULL) &&
                 strncmp(ip, "10.0.0.", 7) == 0,
             20000, "the private IP in the status");
    WAIT_FOR(&e,
             env_ingress(&e, "inner2", ip, sizeof(ip), NULL, 0, NULL) &&
                 strcmp(ip, "10.0.0.20") == 0,
             20000, "the requested private IP in the status");
    for (int k = 0; k < 2; k++) {
        json_t *a = env_lbs_of(&e, k ? u2 : u1);
        json_t *lb = json_array_get(a, 0);
        ck_assert(json_is_false(json_object_get(json_object_get(lb, "public_net"), "enabled")));
        json_decref(a);
    }
    free(u1);
    free(u2);
    env_stop(&e);
}
END_TEST

/* load_balancer_class set: only Services of that class get a balancer;
 * one without a class and one of class robotlb are left to another
 * controller. */
START_TEST(load_balancer_class_serves_only_that_class)
{
    struct env e;
    char ip[64];
    env_start(&e, NULL, NULL, "load_balancer_class = \"example.com/hetzner\";", 300);
    env_node(&e, "n1", "10.0.1.97");
    char *none = env_service(&e, "plain", "LoadBalancer", 30097, NULL, NULL);
    char *rlb =
        env_service(&e, "rlb", "LoadBalancer", 30098, NULL, ",\"loadBalancerClass\":\"robotlb\"");
    char *ours = env_service(&e, "ours", "LoadBalancer", 30099, NULL,
                             ",\"loadBalancerClass\":\"example.com/hetzner\"");
    WAIT_FOR(&e, env_ingress(&e, "ours", ip, sizeof(ip), NULL, 0, NULL), 20000,
             "the served Service's status");
    json_t *a = env_lbs_of(&e, none), *b = env_lbs_of(&e, rlb);
    ck_assert_uint_eq(json_array_size(a), 0);
    ck_assert_uint_eq(json_array_size(b), 0);
    ck_assert_int_eq(total_lbs(&e), 1);
    ck_assert_int_eq(env_ingress(&e, "plain", ip, sizeof(ip), NULL, 0, NULL), 0);
    json_decref(a);
    json_decref(b);
    free(none);
    free(rlb);
    free(ours);
    env_stop(&e);
}
END_TEST

/* "Apart from that robotlb checks each balancer every
 * ROBOTLB_RESYNC_INTERVAL seconds ... which bounds how long a change made
 * to the balancer in Hetzner survives" (1 s here): a target removed and a
 * service changed by hand are put back. */
START_TEST(every_resync_interval_undoes_a_change_made_to_the_balancer_in_hetzner)
{
    struct env e;
    struct hzt_resp r;
    char path[128];
    env_start(&e, NULL, NULL, BUDGET_1S, 1);
    env_node(&e, "n1", "10.0.1.201");
    env_node(&e, "n2", "10.0.1.202");
    char *uid = env_service(&e, "keep", "LoadBalancer", 30093, NULL, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.201,10.0.1.202"), 20000, "both targets");
    json_t *a = env_lbs_of(&e, uid);
    long id = (long)json_integer_value(json_object_get(json_array_get(a, 0), "id"));
    json_decref(a);
    snprintf(path, sizeof(path), "/load_balancers/%ld/actions/remove_target", id);
    long adds0 = env_count_route(&e, "POST /v1/load_balancers/{id}/actions/add_target");
    /* (423 while the daemon's last action still runs) */
    long st = 0;
    for (int i = 0; i < 50 && st != 201; i++) {
        ck_assert_int_eq(hzt_req(&e.hz, "POST", path, "tok-a", "user",
                                 "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.202\"}}", &r),
                         0);
        st = r.status;
        hzt_resp_free(&r);
        if (st == 423)
            tu_sleep_ms(100);
    }
    ck_assert_int_eq(st, 201);
    WAIT_FOR(&e,
             env_count_route(&e, "POST /v1/load_balancers/{id}/actions/add_target") > adds0 &&
                 env_targets_are(&e, uid, "10.0.1.201,10.0.1.202"),
             20000, "the next resync to put the target back");
    free(uid);
    env_stop(&e);
}
END_TEST

/* "a deleted endpoint slice of such a service rechecks every balancer":
 * the Local Service's last slice goes, and so do its targets. */
START_TEST(a_deleted_endpoint_slice_rechecks_the_balancers)
{
    struct env e;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.211");
    env_node(&e, "n2", "10.0.1.212");
    char *uid =
        env_service(&e, "eps", "LoadBalancer", 30094, NULL, ",\"externalTrafficPolicy\":\"Local\"");
    kube_req(&e, "POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
             "application/json",
             "{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\",\"metadata\":{"
             "\"name\":\"eps-1\",\"namespace\":\"default\",\"labels\":{"
             "\"kubernetes.io/service-name\":\"eps\"}},\"addressType\":\"IPv4\",\"endpoints\":["
             "{\"addresses\":[\"10.244.1.9\"],\"nodeName\":\"n2\",\"conditions\":{\"ready\":true}}"
             "]}",
             201, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.212"), 20000, "the serving node as target");
    kube_req(&e, "DELETE", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/eps-1",
             NULL, NULL, 200, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, ""), 20000, "the targets to go with the slice");
    free(uid);
    env_stop(&e);
}
END_TEST

/* "Setting ROBOTLB_DYNAMIC_NODE_SELECTOR to false replaces both with the
 * node selector from the robotlb/node-selector annotation" (key=value,
 * key!=value); "Nodes labelled
 * node.kubernetes.io/exclude-from-external-load-balancers ... stay out of
 * every balancer"; a bad selector is a warning Event. */
START_TEST(without_the_dynamic_node_selector_the_node_selector_annotation_picks_the_targets)
{
    struct env e;
    env_start(&e, NULL, NULL, "dynamic_node_selector = false;", 300);
    env_selector_nodes(&e);
    char *uid = env_service(&e, "sel", "LoadBalancer", 30095,
                            ",\"annotations\":{\"robotlb/node-selector\":"
                            "\"node-role.kubernetes.io/control-plane!=true,"
                            "beta.kubernetes.io/arch=amd64\"}",
                            NULL);
    char *bad = env_service(&e, "badsel", "LoadBalancer", 30096,
                            ",\"annotations\":{\"robotlb/node-selector\":\"a=b,,c\"}", NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.221"), 20000, "the one matching node");
    WAIT_FOR(&e, env_has_event(&e, "InvalidAnnotation", "robotlb/node-selector"), 20000,
             "the warning Event for the bad selector");
    json_t *a = env_lbs_of(&e, bad);
    ck_assert_uint_eq(json_array_size(a), 0);
    json_decref(a);
    free(uid);
    free(bad);
    env_stop(&e);
}
END_TEST

/* "Dry run: a setting that logs each Hetzner write it would make and makes
 * none, so a robotlb user can preview the takeover of their project": the
 * create is logged, nothing but GETs reach Hetzner. */
START_TEST(dry_run_logs_the_create_it_would_make_and_makes_none)
{
    struct env e;
    struct hzt_resp r;
    size_t i;
    json_t *x;
    env_start(&e, NULL, NULL, "dry_run = true;", 300);
    env_node(&e, "n1", "10.0.1.231");
    char *uid = env_service(&e, "dry", "LoadBalancer", 30097, NULL, NULL);
    WAIT_FOR(&e, tu_file_has(e.log, "hetzner dry run: would POST /load_balancers"), 20000,
             "the logged create");
    tu_sleep_ms(1000);
    ck_assert_int_eq(total_lbs(&e), 0);
    ck_assert_int_eq(hzt_req(&e.hz, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
    json_array_foreach(json_object_get(r.body, "requests"), i, x)
    {
        ck_assert_str_eq(json_string_value(json_object_get(x, "method")), "GET");
    }
    hzt_resp_free(&r);
    free(uid);
    env_stop(&e);
}
END_TEST

/* Balancers labelled robotlb/service-uid holding ntargets targets, from the
 * fake's state (not rate limited), and the 429 answers it gave. */
static void
converged(struct env *e, size_t ntargets, long *lbs, long *n429, long *total)
{
    struct hzt_resp r;
    size_t i;
    json_t *lb, *x;
    *lbs = 0;
    ck_assert_int_eq(hzt_req(&e->hz, "GET", "/_admin/state", NULL, NULL, NULL, &r), 0);
    json_array_foreach(json_object_get(r.body, "load_balancers"), i, lb)
    {
        if (json_object_get(json_object_get(lb, "labels"), "robotlb/service-uid") &&
            json_array_size(json_object_get(lb, "targets")) == ntargets &&
            json_array_size(json_object_get(lb, "services")) == 1)
            (*lbs)++;
    }
    hzt_resp_free(&r);
    ck_assert_int_eq(hzt_req(&e->hz, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
    *n429 = 0;
    *total = (long)json_integer_value(json_object_get(r.body, "total"));
    json_array_foreach(json_object_get(r.body, "requests"), i, x)
    {
        if (json_integer_value(json_object_get(x, "status")) == 429)
            (*n429)++;
    }
    hzt_resp_free(&r);
}

/* Services whose status carries one ingress IP. */
static size_t
services_with_ip(struct env *e)
{
    json_t *o, *svc;
    size_t i, n = 0;
    kube_req(e, "GET", "/api/v1/namespaces/default/services", NULL, NULL, 200, &o);
    json_array_foreach(json_object_get(o, "items"), i, svc)
    {
        if (json_array_size(json_object_get(
                json_object_get(json_object_get(svc, "status"), "loadBalancer"), "ingress")) == 1)
            n++;
    }
    json_decref(o);
    return n;
}

/* "API budget": "With the fake's bucket at 10 requests refilling 1/s, 50
 * Services converge without a single 429." */
START_TEST(fifty_services_converge_within_a_bucket_of_10_refilling_1_per_s_without_a_429)
{
    struct env e;
    const char *args[] = {"--rate-bucket", "10", "--rate-refill-per-s", "1", NULL};
    long lbs = 0, n429 = 0, total = 0;
    char name[32];
    env_start(&e, NULL, args, NULL, 300);
    env_node(&e, "n1", "10.0.1.61");
    env_node(&e, "n2", "10.0.1.62");
    env_node(&e, "n3", "10.0.1.63");
    long long t0 = tu_now_ms();
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof(name), "s%02d", i);
        free(env_service(&e, name, "LoadBalancer", 30100 + i, NULL, NULL));
    }
    WAIT_FOR(&e, (converged(&e, 3, &lbs, &n429, &total), lbs == 50 || n429 > 0), 500000,
             "50 balancers with 3 targets each");
    long long dt = tu_now_ms() - t0;
    ck_assert_int_eq(n429, 0);
    ck_assert_int_eq(lbs, 50);
    /* and every Service's status carries its balancer's IP */
    WAIT_FOR(&e, services_with_ip(&e) == 50, 20000, "every Service's status");
    converged(&e, 3, &lbs, &n429, &total);
    fprintf(stderr, "50 Services converged in %.1f s with %ld Hetzner requests, %ld 429\n",
            dt / 1000.0, total, n429);
    ck_assert_int_eq(n429, 0);
    env_stop(&e);
}
END_TEST

/* A status write the API server refuses is written again at
 * refused_recheck_interval, with no resync due for an hour and nothing
 * else changing (it was left until the next change or resync). */
START_TEST(a_refused_status_write_is_written_again_at_the_recheck)
{
    struct env e;
    struct http_res r = {0};
    char ip[64];
    struct env_opts o = {.resync_s = 3600, .extra = "refused_recheck_interval = \"2s\";"};
    env_start_opts(&e, &o);
    env_kube_fail_patch(&e, "/services/web/status", 500);
    env_node(&e, "n1", "10.0.1.11");
    char *uid = env_service(&e, "web", "LoadBalancer", 30080, NULL, NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.11"), 20000, "the balancer");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL), 20000,
             "the status written after the refused write");
    ck_assert_int_eq(fake_admin(&e.kube, "GET", "/faults", NULL, &r), 0);
    ck_assert_msg(strstr(r.body, "\"fail_count\":0") || strstr(r.body, "\"fail_count\": 0"),
                  "the refusal was not used: %s", r.body);
    http_res_free(&r);
    free(uid);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb reconcile");
    TCase *tc = tcase_create("reconcile");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, creates_load_balancers_that_point_to_nodes_based_on_node_ip);
    tcase_add_test(tc, local_targets_only_the_nodes_kube_proxy_serves_the_traffic_from);
    tcase_add_test(tc, a_node_outside_the_vswitch_subnet_keeps_its_service_on_the_recheck_cycle);
    tcase_add_test(tc, an_unlabelled_balancer_under_the_old_name_is_adopted);
    tcase_add_test(tc, a_handed_over_balancer_gets_the_status_once_it_serves_the_service);
    tcase_add_test(tc, a_refused_status_write_is_written_again_at_the_recheck);
    tcase_add_test(tc, a_taken_name_gives_a_warning_event_naming_the_old_uid);
    tcase_add_test(
        tc, lb11_holds_25_targets_the_extra_nodes_are_dropped_with_a_warning_naming_the_limit);
    tcase_add_test(tc, a_service_without_an_exposable_port_gets_no_balancer_and_a_warning_event);
    tcase_add_test(tc, a_service_without_target_nodes_waits_with_a_warning_event);
    tcase_add_test(tc, lb_private_ip_requests_the_balancers_address_in_the_network);
    tcase_add_test(tc, lb_public_interface_false_makes_a_private_only_balancer);
    tcase_add_test(tc, with_allocate_node_ports_false_the_port_that_sets_a_node_port_is_exposed);
    tcase_add_test(tc, load_balancer_class_serves_only_that_class);
    tcase_add_test(tc, every_resync_interval_undoes_a_change_made_to_the_balancer_in_hetzner);
    tcase_add_test(tc, a_deleted_endpoint_slice_rechecks_the_balancers);
    tcase_add_test(tc, dry_run_logs_the_create_it_would_make_and_makes_none);
    tcase_add_test(
        tc, without_the_dynamic_node_selector_the_node_selector_annotation_picks_the_targets);
    suite_add_tcase(s, tc);
    TCase *budget = tcase_create("budget");
    tcase_add_checked_fixture(budget, setup, teardown);
    tcase_set_timeout(budget, 560);
    tcase_add_test(budget,
                   fifty_services_converge_within_a_bucket_of_10_refilling_1_per_s_without_a_429);
    suite_add_tcase(s, budget);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
