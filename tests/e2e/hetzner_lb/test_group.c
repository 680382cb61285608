/*
 * Shared balancers (prismlb.io/shared-balancer, prismlb's own) as a user
 * drives them: kubectl applies, patches and deletes the Services, the
 * hcloud CLI (against the fake Hetzner API) shows the one balancer of the
 * group.
 */
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "env.h"
#include "hccm_util.h"
#include "testutil.h"

#define GROUP_ANNOT "    prismlb.io/shared-balancer: web\n"
#define GROUP_NAME "web.shared.prismlb.io"
#define CREATE_ROUTE "POST /v1/load_balancers"
#define DELETE_ROUTE "DELETE /v1/load_balancers/{id}"

/* kubectl apply member name of group web with port -> node_port; its UID
 * (new). */
static char *
member(struct env *e, const char *name, int port, int node_port)
{
    return hccm_apply_service_port(e, name, GROUP_ANNOT, port, node_port);
}

/* The balancers `hcloud load-balancer list -o json` shows (new array). */
static json_t *
cli_all(struct env *e)
{
    return env_hcloud_json(e, "load-balancer", "list", NULL);
}

/* How many balancers there are. */
static size_t
cli_count(struct env *e)
{
    json_t *all = cli_all(e);
    size_t n = json_array_size(all);
    json_decref(all);
    return n;
}

/* The group's balancer as `hcloud load-balancer describe -o json` shows
 * it (new), or NULL while there is none of its name. */
static json_t *
cli_group(struct env *e)
{
    json_t *all = cli_all(e), *it, *d = NULL;
    size_t i;
    json_array_foreach(all, i, it)
    {
        if (strcmp(json_string_value(json_object_get(it, "name")), GROUP_NAME) == 0) {
            d = env_hcloud_json(e, "load-balancer", "describe", GROUP_NAME, NULL);
            break;
        }
    }
    json_decref(all);
    return d;
}

/* The listen ports of lb's services, ascending, "80,443" (into buf). */
static const char *
ports_of(json_t *lb, char *buf, size_t len)
{
    int p[64];
    size_t n = 0, i, k = 0;
    json_t *s;
    json_array_foreach(json_object_get(lb, "services"), i, s)
    {
        if (n < 64)
            p[n++] = (int)json_integer_value(json_object_get(s, "listen_port"));
    }
    for (i = 1; i < n; i++)
        for (size_t j = i; j > 0 && p[j - 1] > p[j]; j--) {
            int t = p[j];
            p[j] = p[j - 1];
            p[j - 1] = t;
        }
    buf[0] = '\0';
    for (i = 0; i < n && k + 8 < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d", i ? "," : "", p[i]);
    return buf;
}

/* 1 when the group's balancer exists with exactly the listen ports want. */
static int
group_ports_are(struct env *e, const char *want)
{
    char buf[256];
    json_t *lb = cli_group(e);
    int ok = lb && strcmp(ports_of(lb, buf, sizeof(buf)), want) == 0;
    json_decref(lb);
    return ok;
}

/* The destination port of the service of lb listening on listen, or -1. */
static int
dest_of(json_t *lb, int listen)
{
    json_t *s = hccm_service_on(lb, listen);
    return s ? (int)json_integer_value(json_object_get(s, "destination_port")) : -1;
}

/* 1 when lb carries the member label of uid. */
static int
has_member(json_t *lb, const char *uid)
{
    char key[128];
    snprintf(key, sizeof(key), "prismlb.io/member-%s", uid);
    return hccm_label_of(lb, key) != NULL;
}

/* 1 when Service default/name no longer exists (its finalizer let go). */
static int
svc_gone(struct env *e, const char *name)
{
    char *out = NULL;
    int rc = env_kubectl(e, &out, "get", "service", name, "-n", "default", NULL);
    int gone = rc != 0 && out && strstr(out, "NotFound");
    free(out);
    return gone;
}

/* kubectl delete service default/name, not waiting for its finalizers. */
static void
delete_svc(struct env *e, const char *name)
{
    char *out = NULL;
    int rc = env_kubectl(e, &out, "delete", "service", name, "-n", "default", "--wait=false", NULL);
    ck_assert_msg(rc == 0, "kubectl delete service %s: %s", name, out ? out : "");
    free(out);
}

/* Service default/name's field at jsonpath path (new). */
static char *
svc_field(struct env *e, const char *name, const char *path)
{
    char jp[256], *out = NULL;
    snprintf(jp, sizeof(jp), "jsonpath=%s", path);
    int rc = env_kubectl(e, &out, "get", "service", name, "-n", "default", "-o", jp, NULL);
    ck_assert_msg(rc == 0, "kubectl get service %s: %s", name, out ? out : "");
    return out;
}

/* Wait until the wall clock (which the fake API server stamps
 * creationTimestamp with, in whole seconds) is past Service name's
 * creationTimestamp: a Service created after that is strictly younger. */
static void
past_creation_of(struct env *e, const char *name)
{
    char *ts = svc_field(e, name, "{.metadata.creationTimestamp}");
    char now[32];
    long long dl = tu_now_ms() + 5000;
    for (;;) {
        time_t t = time(NULL);
        strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
        if (strcmp(now, ts) > 0 || tu_now_ms() > dl)
            break;
        tu_sleep_ms(50);
    }
    ck_assert_msg(strcmp(now, ts) > 0, "the clock did not pass %s", ts);
    free(ts);
}

/* The IP Service name's status shows ("" while none), into ip. */
static const char *
ingress_of(struct env *e, const char *name, char *ip, size_t len)
{
    (void)env_ingress(e, name, ip, len, NULL, 0, NULL);
    return ip;
}

/* Three Services of one group share one balancer named for the group,
 * labelled for the group and the two members that add ports; the third,
 * younger, asks for port 80 that the oldest holds: a SharedPortInUse
 * warning naming the port and the holder, none of its ports, no status.
 * Deleted one by one: the services shrink, each Service goes once its
 * services and label are gone (the finalizer), and the balancer goes with
 * the last member. */
START_TEST(three_services_share_one_balancer_a_clash_changes_nothing_and_it_goes_with_the_last)
{
    struct env e;
    char ipa[64], ipb[64], ipc[64];
    env_start(&e, NULL, NULL, NULL, 2);
    env_node(&e, "n1", "10.0.1.41");
    char *a = member(&e, "a", 80, 30080);
    WAIT_FOR(&e, group_ports_are(&e, "80"), 30000, "the group's balancer with port 80");
    past_creation_of(&e, "a");
    char *b = member(&e, "b", 443, 30443);
    WAIT_FOR(&e, group_ports_are(&e, "80,443"), 30000, "ports 80 and 443 on one balancer");
    char *c = member(&e, "c", 80, 30081);
    WAIT_FOR(&e, env_kubectl_event(&e, "c", "SharedPortInUse", "port 80", "default/a", NULL) > 0,
             30000, "the SharedPortInUse warning on c");
    WAIT_FOR(&e, env_ingress(&e, "a", ipa, sizeof(ipa), NULL, 0, NULL), 30000, "a's status");
    WAIT_FOR(&e, env_ingress(&e, "b", ipb, sizeof(ipb), NULL, 0, NULL), 30000, "b's status");
    ck_assert_str_eq(ipa, ipb);

    json_t *lb = cli_group(&e);
    ck_assert_ptr_nonnull(lb);
    long id = (long)json_integer_value(json_object_get(lb, "id"));
    ck_assert_int_eq(dest_of(lb, 80), 30080); /* a's, not c's 30081 */
    ck_assert_int_eq(dest_of(lb, 443), 30443);
    ck_assert_str_eq(hccm_label_of(lb, "prismlb.io/shared-balancer"), "web");
    ck_assert_ptr_null(hccm_label_of(lb, "robotlb/service-uid"));
    ck_assert(has_member(lb, a) && has_member(lb, b) && !has_member(lb, c));
    json_decref(lb);
    ck_assert_str_eq(ingress_of(&e, "c", ipc, sizeof(ipc)), "");
    ck_assert_uint_eq(cli_count(&e), 1);
    ck_assert_int_eq(env_count_route(&e, CREATE_ROUTE), 1);

    delete_svc(&e, "b");
    WAIT_FOR(&e, group_ports_are(&e, "80"), 30000, "443 gone with b");
    WAIT_FOR(&e, svc_gone(&e, "b"), 30000, "b deleted once its finalizer went");
    lb = cli_group(&e);
    ck_assert(lb && !has_member(lb, b) && has_member(lb, a));
    json_decref(lb);

    delete_svc(&e, "c");
    WAIT_FOR(&e, svc_gone(&e, "c"), 30000, "c deleted");
    ck_assert(group_ports_are(&e, "80"));
    ck_assert_int_eq(env_count_route(&e, DELETE_ROUTE), 0);

    delete_svc(&e, "a");
    WAIT_FOR(&e, env_lb_exists(&e, id) == 0, 30000, "the balancer gone with the last member");
    WAIT_FOR(&e, svc_gone(&e, "a"), 30000, "a deleted");
    ck_assert_uint_eq(cli_count(&e), 0);
    free(a);
    free(b);
    free(c);
    env_stop(&e);
}
END_TEST

/* A member changed away from LoadBalancer (to NodePort) leaves the group:
 * its service and label go, the other member's service, status and the
 * balancer stay, and it keeps no finalizer of the group. */
START_TEST(a_member_changed_away_from_loadbalancer_leaves_the_others_untouched)
{
    struct env e;
    char ip[64], ip2[64];
    env_start(&e, NULL, NULL, NULL, 2);
    env_node(&e, "n1", "10.0.1.41");
    char *a = member(&e, "a", 80, 30080);
    char *b = member(&e, "b", 443, 30443);
    WAIT_FOR(&e, group_ports_are(&e, "80,443"), 30000, "ports 80 and 443 on one balancer");
    WAIT_FOR(&e, env_ingress(&e, "a", ip, sizeof(ip), NULL, 0, NULL), 30000, "a's status");
    json_t *lb = cli_group(&e);
    long id = (long)json_integer_value(json_object_get(lb, "id"));
    json_decref(lb);

    char *out = NULL;
    int rc = env_kubectl(&e, &out, "patch", "service", "b", "-n", "default", "--type", "merge",
                         "-p", "{\"spec\":{\"type\":\"NodePort\"}}", NULL);
    ck_assert_msg(rc == 0, "kubectl patch: %s", out ? out : "");
    free(out);
    WAIT_FOR(&e, group_ports_are(&e, "80"), 30000, "b's port gone");
    lb = cli_group(&e);
    ck_assert_int_eq((long)json_integer_value(json_object_get(lb, "id")), id);
    ck_assert(has_member(lb, a) && !has_member(lb, b));
    ck_assert_int_eq(dest_of(lb, 80), 30080);
    json_decref(lb);
    char *fin = NULL;
    for (long long dl = tu_now_ms() + 30000; tu_now_ms() < dl; tu_sleep_ms(200)) {
        free(fin);
        fin = svc_field(&e, "b", "{.metadata.finalizers}");
        if (!strstr(fin, "prismlb.io/shared-balancer"))
            break;
    }
    ck_assert_msg(!strstr(fin, "prismlb.io/shared-balancer"), "b keeps the finalizer: %s", fin);
    free(fin);
    ck_assert_str_eq(ingress_of(&e, "a", ip2, sizeof(ip2)), ip);
    ck_assert_int_eq(env_count_route(&e, DELETE_ROUTE), 0);
    free(a);
    free(b);
    env_stop(&e);
}
END_TEST

/* 1 when the group's balancer shows the listen ports want and every one
 * of the NULL-ended Services shows an IP in its status. */
static int
converged(struct env *e, const char *want, ...)
{
    va_list ap;
    char ip[64];
    int ok = group_ports_are(e, want);
    va_start(ap, want);
    for (const char *n; ok && (n = va_arg(ap, const char *));)
        ok = env_ingress(e, n, ip, sizeof(ip), NULL, 0, NULL);
    va_end(ap);
    return ok;
}

/* The protocol of the group balancer's service on listen ("" when none;
 * static). */
static const char *
protocol_of(struct env *e, int listen)
{
    static char buf[16];
    json_t *lb = cli_group(e), *s = hccm_service_on(lb, listen);
    const char *p = s ? json_string_value(json_object_get(s, "protocol")) : NULL;
    snprintf(buf, sizeof(buf), "%s", p ? p : "");
    json_decref(lb);
    return buf;
}

/* The group's balancer's id (0: none). */
static long
group_id(struct env *e)
{
    json_t *lb = cli_group(e);
    long id = lb ? (long)json_integer_value(json_object_get(lb, "id")) : 0;
    json_decref(lb);
    return id;
}

/* A daemon restarted mid-life finds the group's balancer by its label:
 * no second balancer is created, none is deleted, and a member added
 * after the restart joins the same one. */
START_TEST(a_restarted_daemon_keeps_the_groups_balancer)
{
    struct env e;
    struct env_opts o = {.resync_s = 2};
    env_start_opts(&e, &o);
    env_node(&e, "n1", "10.0.1.41");
    char *a = member(&e, "a", 80, 30080);
    char *b = member(&e, "b", 443, 30443);
    WAIT_FOR(&e, converged(&e, "80,443", "a", "b", NULL), 30000, "the group, served");
    long id = group_id(&e);
    ck_assert_int_eq(env_count_route(&e, CREATE_ROUTE), 1);

    env_daemon_stop(&e);
    env_daemon_start(&e, &o, "restarted");
    long lists = env_count_route(&e, "GET /v1/load_balancers");
    WAIT_FOR(&e, env_count_route(&e, "GET /v1/load_balancers") >= lists + 4, 30000,
             "two resyncs of the restarted daemon");
    /* c's own per-service settings: http on its port only */
    char *c = hccm_apply_service_port(
        &e, "c", GROUP_ANNOT "    load-balancer.hetzner.cloud/protocol: http\n", 8080, 30880);
    WAIT_FOR(&e, converged(&e, "80,443,8080", "a", "b", "c", NULL), 30000,
             "c on the same balancer");
    ck_assert_str_eq(protocol_of(&e, 8080), "http");
    ck_assert_str_eq(protocol_of(&e, 80), "tcp");
    ck_assert_int_eq(group_id(&e), id);
    ck_assert_uint_eq(cli_count(&e), 1);
    ck_assert_int_eq(env_count_route(&e, CREATE_ROUTE), 1);
    ck_assert_int_eq(env_count_route(&e, DELETE_ROUTE), 0);
    json_t *lb = cli_group(&e);
    ck_assert(has_member(lb, a) && has_member(lb, b) && has_member(lb, c));
    json_decref(lb);
    free(a);
    free(b);
    free(c);
    env_stop(&e);
}
END_TEST

/* A member label of a live Service this daemon does not serve (another
 * loadBalancerClass), added with `hcloud load-balancer add-label`, keeps
 * the balancer when every member of ours is deleted: their labels go, the
 * balancer stays, no DELETE is sent. */
START_TEST(a_member_label_of_a_live_service_keeps_the_balancer_when_the_others_go)
{
    struct env e;
    char path[4400], *out = NULL;
    env_start(&e, NULL, NULL, NULL, 2);
    env_node(&e, "n1", "10.0.1.41");
    char *a = member(&e, "a", 80, 30080);
    char *b = member(&e, "b", 443, 30443);
    WAIT_FOR(&e, converged(&e, "80,443", "a", "b", NULL), 30000, "the group, served");
    long id = group_id(&e);
    snprintf(path, sizeof(path), "%s/x.yaml", dir);
    ck_assert_int_eq(tu_write_file(path, "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n"
                                         "  namespace: default\n  annotations:\n" GROUP_ANNOT
                                         "spec:\n  type: LoadBalancer\n"
                                         "  loadBalancerClass: example.com/other\n"
                                         "  ports:\n  - port: 9000\n    nodePort: 30900\n"),
                     0);
    int rc = env_kubectl(&e, &out, "apply", "-f", path, NULL);
    ck_assert_msg(rc == 0, "kubectl apply: %s", out ? out : "");
    free(out);
    char *x = svc_field(&e, "x", "{.metadata.uid}");
    char label[160];
    snprintf(label, sizeof(label), "prismlb.io/member-%s=x", x);
    out = NULL;
    rc = env_hcloud(&e, &out, "load-balancer", "add-label", GROUP_NAME, label, NULL);
    ck_assert_msg(rc == 0, "hcloud add-label: %s", out ? out : "");
    free(out);

    delete_svc(&e, "a");
    delete_svc(&e, "b");
    WAIT_FOR(&e, svc_gone(&e, "a") && svc_gone(&e, "b"), 30000,
             "a and b deleted once their labels went");
    json_t *lb = cli_group(&e);
    ck_assert_ptr_nonnull(lb);
    ck_assert_int_eq((long)json_integer_value(json_object_get(lb, "id")), id);
    ck_assert(!has_member(lb, a) && !has_member(lb, b) && has_member(lb, x));
    json_decref(lb);
    /* the next resyncs change nothing */
    long lists = env_count_route(&e, "GET /v1/load_balancers");
    WAIT_FOR(&e, env_count_route(&e, "GET /v1/load_balancers") >= lists + 4, 30000,
             "two more resyncs");
    ck_assert_int_eq(env_lb_exists(&e, id), 1);
    ck_assert_int_eq(env_count_route(&e, DELETE_ROUTE), 0);
    free(a);
    free(b);
    free(x);
    env_stop(&e);
}
END_TEST

/* Two replicas (mod_leader): the leader is killed in the middle of the
 * group's reconcile (the fake holds its actions running, so it cannot end
 * before the kill), and under the new leader the one balancer has every
 * member's services: none is lost, no second balancer is made, and no two
 * replicas wrote it at once. */
START_TEST(a_leader_handover_mid_reconcile_loses_no_members_services)
{
    struct env e;
    struct tu_proc d[2];
    char logs[2][600];
    env_fakes_start(&e, 0, NULL, NULL);
    env_node(&e, "n1", "10.0.1.41");
    for (int r = 0; r < 2; r++)
        env_replica_start(&e, &d[r], r, logs[r]);
    e.d = d[0]; /* WAIT_FOR watches one daemon; both are checked below */
    char *a = member(&e, "a", 80, 30080);
    char *b = member(&e, "b", 443, 30443);
    WAIT_FOR(&e, converged(&e, "80,443", "a", "b", NULL), 30000, "a and b served");
    long id = group_id(&e);

    /* Every action from now on stays running: c's services cannot be
     * added before the leader is killed, whatever the machine's speed. */
    env_faults(&e, "{\"hold_actions\":true}");
    char *c = member(&e, "c", 8080, 30880);
    long long dl = tu_now_ms() + 30000;
    while (env_held_actions(&e) < 1 && tu_now_ms() < dl)
        tu_sleep_ms(20);
    ck_assert_msg(env_held_actions(&e) >= 1, "no action of the group's reconcile is running");
    int leader = env_lease_holder(&e), other = 1 - leader;
    tu_stop(&d[leader], SIGKILL, 5000);
    env_faults(&e, "{\"hold_actions\":false}");

    e.d = d[other];
    WAIT_FOR(&e, converged(&e, "80,443,8080", "a", "b", "c", NULL), 60000,
             "every member's services under the new leader");
    ck_assert_int_eq(group_id(&e), id);
    ck_assert_uint_eq(cli_count(&e), 1);
    json_t *lb = cli_group(&e);
    ck_assert_int_eq(dest_of(lb, 80), 30080);
    ck_assert_int_eq(dest_of(lb, 443), 30443);
    ck_assert_int_eq(dest_of(lb, 8080), 30880);
    ck_assert(has_member(lb, a) && has_member(lb, b) && has_member(lb, c));
    json_decref(lb);
    env_no_overlapping_writers(&e);
    int st = tu_stop(&d[other], SIGTERM, 10000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "survivor exit status %d", st);
    free(a);
    free(b);
    free(c);
    env_fakes_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb shared balancers");
    TCase *tc = tcase_create("group");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(
        tc, three_services_share_one_balancer_a_clash_changes_nothing_and_it_goes_with_the_last);
    tcase_add_test(tc, a_member_changed_away_from_loadbalancer_leaves_the_others_untouched);
    tcase_add_test(tc, a_restarted_daemon_keeps_the_groups_balancer);
    tcase_add_test(tc, a_member_label_of_a_live_service_keeps_the_balancer_when_the_others_go);
    tcase_add_test(tc, a_leader_handover_mid_reconcile_loses_no_members_services);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
