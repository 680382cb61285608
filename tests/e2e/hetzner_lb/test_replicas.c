/*
 * mod_hetzner_lb end to end as a user drives it: kubectl
 * ($PRISMLB_SOURCE_ROOT/.tools/bin/kubectl, the test's kubeconfig, a
 * --cache-dir in the temp dir) applies Nodes whose InternalIPs are inside
 * the vSwitch subnet and a Service of type LoadBalancer; the real hcloud
 * CLI (HCLOUD_ENDPOINT at the fake, HOME and HCLOUD_CONFIG in the temp dir)
 * finds the balancer by `load-balancer list --selector
 * robotlb/service-uid=<uid>`, and after `kubectl cordon` the node's target
 * is gone from `load-balancer describe -o json`.
 *
 * Two replicas, each mod_leader + mod_hetzner_lb gated by it: the leader
 * is killed mid-reconcile (the fake holds every action running until the
 * kill, so no Service can finish before it), every Service still
 * converges, and the fake's
 * concurrent-writer detector (which tells replicas apart by User-Agent,
 * which names the replica) reports no overlapping writes.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "env.h"
#include "testutil.h"

/* The test's env, for the hcloud CLI (env_hcloud). */
static struct env *cli_env;

/* The JSON value in text starting at its first c ('[' or '{'), or NULL. */
static json_t *
json_in(const char *text, char c)
{
    const char *p = text ? strchr(text, c) : NULL;
    return p ? json_loads(p, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
}

/* `hcloud load-balancer list --selector robotlb/service-uid=<uid> -o json`:
 * 1 when it lists exactly one balancer, its name in name and its targets in
 * targets. */
static int
cli_list(const char *uid, char *name, size_t nlen, char *targets, size_t tlen)
{
    char sel[256], *out = NULL;
    snprintf(sel, sizeof(sel), "robotlb/service-uid=%s", uid);
    int rc =
        env_hcloud(cli_env, &out, "load-balancer", "list", "--selector", sel, "-o", "json", NULL);
    ck_assert_msg(rc == 0, "hcloud load-balancer list: %d %s", rc, out ? out : "");
    json_t *a = json_in(out, '[');
    /* hcloud prints null for an empty list */
    if (!a && out && strstr(out, "null"))
        a = json_array();
    ck_assert_msg(a != NULL, "hcloud list printed no JSON: %s", out);
    int ok = json_array_size(a) == 1;
    if (ok) {
        json_t *lb = json_array_get(a, 0);
        const char *nm = json_string_value(json_object_get(lb, "name"));
        snprintf(name, nlen, "%s", nm ? nm : "");
        env_lb_targets(lb, targets, tlen);
    }
    json_decref(a);
    free(out);
    return ok;
}

/* `hcloud load-balancer describe <name> -o json`: its targets. */
static void
cli_describe_targets(const char *name, char *targets, size_t tlen)
{
    char *out = NULL;
    int rc = env_hcloud(cli_env, &out, "load-balancer", "describe", name, "-o", "json", NULL);
    ck_assert_msg(rc == 0, "hcloud load-balancer describe: %d %s", rc, out ? out : "");
    json_t *lb = json_in(out, '{');
    ck_assert_msg(lb != NULL, "hcloud describe printed no JSON: %s", out);
    env_lb_targets(lb, targets, tlen);
    json_decref(lb);
    free(out);
}

static int
cli_list_is(const char *uid, const char *want_name, const char *want_targets)
{
    char name[256], t[2048];
    return cli_list(uid, name, sizeof(name), t, sizeof(t)) && !strcmp(name, want_name) &&
           !strcmp(t, want_targets);
}

static int
cli_describe_is(const char *name, const char *want)
{
    char t[2048];
    cli_describe_targets(name, t, sizeof(t));
    return !strcmp(t, want);
}

#define NODE_YAML(n)                                                                               \
    "apiVersion: v1\nkind: Node\nmetadata:\n  name: " n "\n  labels:\n"                            \
    "    kubernetes.io/hostname: " n "\nspec: {}\n"

/* "kubectl applies Nodes (with InternalIPs inside the vSwitch subnet) and a
 * Service type LoadBalancer -> a balancer labelled with the Service's UID
 * exists; hcloud load-balancer list --selector robotlb/service-uid=<uid>
 * finds it"; cordoning a node with kubectl takes its target away. */
START_TEST(kubectl_apply_then_hcloud_list_by_the_service_uid_finds_the_balancer)
{
    struct env e;
    char path[700], *out = NULL;
    const char *names[] = {"n1", "n2", "n3"}, *ips[] = {"10.0.1.21", "10.0.1.22", "10.0.1.23"};
    env_start(&e, NULL, NULL, NULL, 300);
    cli_env = &e;

    snprintf(path, sizeof(path), "%s/cluster.yaml", dir);
    ck_assert_int_eq(
        tu_write_file(path,
                      NODE_YAML("n1") "---\n" NODE_YAML("n2") "---\n" NODE_YAML(
                          "n3") "---\n"
                                "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n"
                                "  namespace: default\nspec:\n  type: LoadBalancer\n  selector:\n"
                                "    app: web\n  ports:\n  - port: 80\n    protocol: TCP\n"
                                "    nodePort: 30080\n"),
        0);
    int rc = env_kubectl(&e, &out, "apply", "-f", path, NULL);
    ck_assert_msg(rc == 0, "kubectl apply: %d %s", rc, out ? out : "");
    free(out);
    out = NULL;
    /* status (Ready, InternalIP) through the status subresource, as the
     * kubelet writes it */
    for (int i = 0; i < 3; i++) {
        char body[1024], sp[256];
        snprintf(body, sizeof(body),
                 "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
                 "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"%s\"},"
                 "{\"type\":\"Hostname\",\"address\":\"%s\"}]}}",
                 ips[i], names[i]);
        snprintf(sp, sizeof(sp), "/api/v1/nodes/%s/status", names[i]);
        kube_req(&e, "PATCH", sp, "application/merge-patch+json", body, 200, NULL);
    }
    rc = env_kubectl(&e, &out, "get", "service", "web", "-n", "default", "-o",
                     "jsonpath={.metadata.uid}", NULL);
    ck_assert_msg(rc == 0 && out && out[0], "kubectl get service: %d %s", rc, out ? out : "");
    char uid[128];
    snprintf(uid, sizeof(uid), "%s", out);
    free(out);
    out = NULL;

    long long t0 = tu_now_ms();
    WAIT_FOR(&e, cli_list_is(uid, "web.default", "10.0.1.21,10.0.1.22,10.0.1.23"), 30000,
             "hcloud list --selector robotlb/service-uid=<uid> to show web.default with 3 "
             "targets");
    fprintf(stderr, "balancer listed by hcloud %.1f s after the apply\n",
            (tu_now_ms() - t0) / 1000.0);
    ck_assert(cli_describe_is("web.default", "10.0.1.21,10.0.1.22,10.0.1.23"));

    /* another UID finds nothing */
    char nm[64], t[256];
    ck_assert_int_eq(cli_list("00000000-0000-0000-0000-000000000000", nm, sizeof(nm), t, sizeof(t)),
                     0);

    rc = env_kubectl(&e, &out, "cordon", "n2", NULL);
    ck_assert_msg(rc == 0, "kubectl cordon: %d %s", rc, out ? out : "");
    free(out);
    out = NULL;
    t0 = tu_now_ms();
    WAIT_FOR(&e, cli_describe_is("web.default", "10.0.1.21,10.0.1.23"), 30000,
             "the cordoned node's target to go (hcloud describe)");
    fprintf(stderr, "cordoned node's target gone %.1f s after kubectl cordon\n",
            (tu_now_ms() - t0) / 1000.0);
    ck_assert(cli_list_is(uid, "web.default", "10.0.1.21,10.0.1.23"));
    env_stop(&e);
}
END_TEST

/* Balancers labelled robotlb/service-uid with exactly `targets` targets. */
static int
converged_balancers(struct hzt_fake *hz, size_t targets)
{
    struct hzt_resp r;
    int n = 0;
    if (hzt_req(hz, "GET", "/load_balancers?label_selector=robotlb/service-uid&per_page=50",
                "tok-a", NULL, NULL, &r) != 0)
        return -1;
    json_t *lbs = json_object_get(r.body, "load_balancers");
    size_t i;
    json_t *lb;
    json_array_foreach(lbs, i, lb)
    {
        if (json_array_size(json_object_get(lb, "targets")) == targets)
            n++;
    }
    hzt_resp_free(&r);
    return n;
}

/* Services of the default namespace whose status shows an ingress IP. */
static int
services_with_ingress(struct env *e)
{
    json_t *list = NULL, *svc;
    size_t i;
    int n = 0;
    kube_req(e, "GET", "/api/v1/namespaces/default/services", NULL, NULL, 200, &list);
    json_array_foreach(json_object_get(list, "items"), i, svc)
    {
        json_t *ing = json_object_get(
            json_object_get(json_object_get(svc, "status"), "loadBalancer"), "ingress");
        n += json_array_size(ing) > 0;
    }
    json_decref(list);
    return n;
}

/* "Two replicas with mod_leader: the leader is killed mid-reconcile; every
 * Service converges; the fake's concurrent-writer detector reports no
 * overlap." */
START_TEST(leader_killed_mid_reconcile_every_service_converges_without_overlap)
{
    struct env e; /* e.d unused: two daemons below */
    struct tu_proc d[2];
    char logs[2][600];
    env_fakes_start(&e, 0, NULL, NULL);

    /* three nodes inside the vSwitch subnet, ten Services */
    for (int i = 0; i < 3; i++) {
        char body[1024], sp[256];
        snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"n%d\"}}", i);
        kube_req(&e, "POST", "/api/v1/nodes", "application/json", body, 201, NULL);
        snprintf(body, sizeof(body),
                 "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
                 "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.1.%d\"}]}}",
                 31 + i);
        snprintf(sp, sizeof(sp), "/api/v1/nodes/n%d/status", i);
        kube_req(&e, "PATCH", sp, "application/merge-patch+json", body, 200, NULL);
    }
    for (int i = 0; i < 10; i++) {
        char body[1024];
        snprintf(body, sizeof(body),
                 "{\"metadata\":{\"name\":\"svc-%d\"},\"spec\":{\"type\":\"LoadBalancer\","
                 "\"ports\":[{\"port\":80,\"nodePort\":%d}]}}",
                 i, 30100 + i);
        kube_req(&e, "POST", "/api/v1/namespaces/default/services", "application/json", body, 201,
                 NULL);
    }

    /* Every action the leader starts stays running (its balancer locked)
     * until the test releases it: the leader cannot finish a single
     * Service before it is killed, whatever the machine's speed. */
    env_faults(&e, "{\"hold_actions\":true}");

    /* two replicas */
    for (int r = 0; r < 2; r++)
        env_replica_start(&e, &d[r], r, logs[r]);

    /* Mid-reconcile: balancers exist and their actions are held running,
     * so no Service has its status yet. Kill the holder. */
    long long deadline = tu_now_ms() + 30000;
    int n;
    long nheld = 0;
    while (((n = converged_balancers(&e.hz, 3)) < 1 || (nheld = env_held_actions(&e)) < 1) &&
           tu_now_ms() < deadline)
        tu_sleep_ms(20);
    ck_assert_msg(n >= 1, "no balancer appeared");
    ck_assert_msg(nheld >= 1, "no action of the leader is running");
    ck_assert_msg(services_with_ingress(&e) == 0,
                  "a Service got its status while every action was held: not mid-reconcile");
    int leader = env_lease_holder(&e), other = 1 - leader;
    long long t_kill = tu_now_ms();
    fprintf(stderr, "killing leader r%d with %d of 10 balancers created, %ld actions held\n",
            leader, n, nheld);
    tu_stop(&d[leader], SIGKILL, 5000);
    /* the held actions end now; the old leader is gone */
    env_faults(&e, "{\"hold_actions\":false}");

    /* Every Service converges under the other replica, including one
     * created after the kill, which only the new leader can provision. */
    kube_req(&e, "POST", "/api/v1/namespaces/default/services", "application/json",
             "{\"metadata\":{\"name\":\"svc-late\"},\"spec\":{\"type\":\"LoadBalancer\","
             "\"ports\":[{\"port\":80,\"nodePort\":30199}]}}",
             201, NULL);
    deadline = tu_now_ms() + 60000;
    while ((n = converged_balancers(&e.hz, 3)) < 11 && tu_now_ms() < deadline) {
        ck_assert_msg(!tu_exited(&d[other]), "the surviving replica exited");
        tu_sleep_ms(100);
    }
    ck_assert_msg(n == 11, "only %d of 11 balancers converged", n);
    int ni;
    while ((ni = services_with_ingress(&e)) < 11 && tu_now_ms() < deadline) {
        ck_assert_msg(!tu_exited(&d[other]), "the surviving replica exited");
        tu_sleep_ms(100);
    }
    ck_assert_msg(ni == 11, "only %d of 11 Services show their balancer's IP", ni);
    fprintf(stderr, "all 11 converged %.1f s after the kill (lease_duration 3 s)\n",
            (tu_now_ms() - t_kill) / 1000.0);

    /* No two replicas wrote the same balancer in overlapping windows. */
    env_no_overlapping_writers(&e);

    int st = tu_stop(&d[other], SIGTERM, 10000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "survivor exit status %d", st);
    env_fakes_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb replicas");
    TCase *tc = tcase_create("user");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, kubectl_apply_then_hcloud_list_by_the_service_uid_finds_the_balancer);
    tcase_add_test(tc, leader_killed_mid_reconcile_every_service_converges_without_overlap);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
