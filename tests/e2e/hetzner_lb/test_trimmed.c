/*
 * The module ABI's target selection with trimmed informers: beside
 * mod_hetzner_lb, the daemon runs the test module mod_lbtrim (built against
 * the public headers alone), whose informers keep only its own paths and
 * the lb table's keep_services, keep_nodes and keep_slices. On the
 * target-selection cases of the reconcile suite (Cluster with cordoned and
 * not-ready nodes, Local from the EndpointSlices, a node selector with an
 * excluded node and a bad selector, 25 targets of 27 nodes) both select the
 * same targets, after every step.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "testutil.h"

static char out_file[4200];

/* The instance of mod_lbtrim, with hetzner_lb's dynamic_node_selector. */
static void
start(struct env *e, int dynamic)
{
    static char instances[9000];
    snprintf(out_file, sizeof(out_file), "%s/lbtrim.out", dir);
    struct env_opts o = {.resync_s = 300,
                         .extra = dynamic ? NULL : "dynamic_node_selector = false;",
                         .instances = instances};
    env_fakes_start(e, 0, NULL, NULL);
    snprintf(instances, sizeof(instances),
             "  { module = \"lbtrim\"; name = \"trim\"; kubeconfig = \"%s\";"
             " output_file = \"%s\"; dynamic_node_selector = %s; },\n",
             e->kc, out_file, dynamic ? "true" : "false");
    env_daemon_start(e, &o, "prismlb");
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* mod_lbtrim's targets of default/NAME in buf, sorted as env_targets_of
 * sorts hetzner_lb's ("!invalid" for a refused selector); 0 when the
 * Service has no line yet. */
static int
trim_targets_of(const char *name, char *buf, size_t len)
{
    char *text = tu_read_file(out_file, NULL), key[128];
    char ips[64][32];
    size_t n = 0;
    buf[0] = '\0';
    if (!text)
        return 0;
    snprintf(key, sizeof(key), "default/%s ", name);
    char *line = strstr(text, key);
    if (line && (line == text || line[-1] == '\n')) {
        line += strlen(key);
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '!') {
            snprintf(buf, len, "%s", line);
        } else {
            for (char *save = NULL, *ip = strtok_r(line, ",", &save); ip && n < 64;
                 ip = strtok_r(NULL, ",", &save))
                snprintf(ips[n++], sizeof(ips[0]), "%s", ip);
            qsort(ips, n, sizeof(ips[0]), cmp_str);
            for (size_t i = 0; i < n; i++)
                snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? "," : "", ips[i]);
        }
    }
    free(text);
    return line != NULL;
}

/* Both modules target want (an IP list as env_targets_of gives it). */
static int
both_are(struct env *e, const char *uid, const char *name, const char *want)
{
    char trim[2048];
    return env_targets_are(e, uid, want) && trim_targets_of(name, trim, sizeof(trim)) &&
           strcmp(trim, want) == 0;
}

#define BOTH(e, uid, name, want, what) WAIT_FOR(e, both_are(e, uid, name, want), 20000, what)

START_TEST(cluster_leaves_out_cordoned_and_not_ready_nodes)
{
    struct env e;
    start(&e, 1);
    env_node(&e, "n1", "10.0.1.11");
    env_node(&e, "n2", "10.0.1.12");
    env_node(&e, "n3", "10.0.1.13");
    char *uid = env_service(&e, "web", "LoadBalancer", 30080, NULL, NULL);
    BOTH(&e, uid, "web", "10.0.1.11,10.0.1.12,10.0.1.13", "the three nodes");
    kube_req(&e, "PATCH", "/api/v1/nodes/n2", "application/merge-patch+json",
             "{\"spec\":{\"unschedulable\":true}}", 200, NULL);
    BOTH(&e, uid, "web", "10.0.1.11,10.0.1.13", "the cordoned node left out");
    kube_req(&e, "PATCH", "/api/v1/nodes/n3/status", "application/merge-patch+json",
             "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}", 200,
             NULL);
    BOTH(&e, uid, "web", "10.0.1.11", "the not-ready node left out");
    kube_req(&e, "PATCH", "/api/v1/nodes/n1", "application/merge-patch+json",
             "{\"metadata\":{\"labels\":{\"touched\":\"yes\"}}}", 200, NULL);
    kube_req(&e, "PATCH", "/api/v1/nodes/n2", "application/merge-patch+json",
             "{\"spec\":{\"unschedulable\":false}}", 200, NULL);
    BOTH(&e, uid, "web", "10.0.1.11,10.0.1.12", "the uncordoned node back");
    free(uid);
    env_stop(&e);
}
END_TEST

START_TEST(local_takes_the_nodes_with_ready_endpoints)
{
    struct env e;
    start(&e, 1);
    env_node(&e, "n1", "10.0.1.21");
    env_node(&e, "n2", "10.0.1.22");
    env_node(&e, "n3", "10.0.1.23");
    env_node(&e, "n4", "10.0.1.24");
    char *uid =
        env_service(&e, "loc", "LoadBalancer", 30081, NULL, ",\"externalTrafficPolicy\":\"Local\"");
    env_local_slice(&e);
    BOTH(&e, uid, "loc", "10.0.1.21,10.0.1.23", "the nodes with a ready endpoint");
    kube_req(&e, "PATCH", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/loc-abc",
             "application/json-patch+json",
             "[{\"op\":\"replace\",\"path\":\"/endpoints/2/conditions\",\"value\":"
             "{\"ready\":true}}]",
             200, NULL);
    BOTH(&e, uid, "loc", "10.0.1.21,10.0.1.23,10.0.1.24", "the node whose endpoint became ready");
    free(uid);
    env_stop(&e);
}
END_TEST

START_TEST(a_node_selector_picks_the_targets_and_a_bad_one_picks_none)
{
    struct env e;
    start(&e, 0);
    env_selector_nodes(&e);
    char *uid = env_service(&e, "sel", "LoadBalancer", 30095,
                            ",\"annotations\":{\"robotlb/node-selector\":"
                            "\"node-role.kubernetes.io/control-plane!=true,"
                            "beta.kubernetes.io/arch=amd64\"}",
                            NULL);
    char *bad = env_service(&e, "badsel", "LoadBalancer", 30096,
                            ",\"annotations\":{\"robotlb/node-selector\":\"a=b,,c\"}", NULL);
    BOTH(&e, uid, "sel", "10.0.1.221", "the one matching node");
    char trim[256];
    WAIT_FOR(&e, trim_targets_of("badsel", trim, sizeof(trim)) && strcmp(trim, "!invalid") == 0,
             20000, "the bad selector refused by the trimming module");
    WAIT_FOR(&e, env_has_event(&e, "InvalidAnnotation", "robotlb/node-selector"), 20000,
             "the bad selector refused by hetzner_lb");
    json_t *a = env_lbs_of(&e, bad);
    ck_assert_uint_eq(json_array_size(a), 0);
    json_decref(a);
    free(uid);
    free(bad);
    env_stop(&e);
}
END_TEST

START_TEST(of_27_nodes_the_first_25_by_name_are_targets)
{
    struct env e;
    char name[32], ip[32], want[2048] = "";
    start(&e, 1);
    for (int i = 0; i < 27; i++) {
        snprintf(name, sizeof(name), "n%02d", i);
        snprintf(ip, sizeof(ip), "10.0.1.%d", 100 + i);
        env_node(&e, name, ip);
    }
    char *uid = env_service(&e, "big", "LoadBalancer", 30090, NULL, NULL);
    for (int i = 0; i < 25; i++)
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s10.0.1.%d", i ? "," : "",
                 100 + i);
    BOTH(&e, uid, "big", want, "25 targets");
    free(uid);
    env_stop(&e);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("hetzner_lb trimmed");
    TCase *tc = tcase_create("trimmed");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cluster_leaves_out_cordoned_and_not_ready_nodes);
    tcase_add_test(tc, local_takes_the_nodes_with_ready_endpoints);
    tcase_add_test(tc, a_node_selector_picks_the_targets_and_a_bad_one_picks_none);
    tcase_add_test(tc, of_27_nodes_the_first_25_by_name_are_targets);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
