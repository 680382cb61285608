/*
 * `prismlb status` of the reconciler role, against a daemon (leader,
 * hetzner_lb gated by it, metrics) whose state the test set up in the fake
 * API server and the fake Hetzner API: a Service with its balancer and
 * targets, one without an exposable port (its warning is the last error),
 * and the Lease's holder. The columns are checked cell by cell; then the
 * module's metrics as Prometheus scrapes them.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

static int mport;

/* prismlb status's output (new; "" while the daemon does not answer). */
static char *
status(void)
{
    char url[64], *out = NULL;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", mport);
    char *argv[] = {(char *)tu_build_path("core/prismlb"), "status", "--url", url, NULL};
    int rc = tu_run(argv, NULL, &out, 10000);
    if (rc != 0) { /* not listening yet */
        free(out);
        return strdup("");
    }
    return out;
}

/* The line of out whose first two cells are a and b (new), or NULL. */
static char *
line_of(const char *out, const char *a, const char *b)
{
    char want[512];
    snprintf(want, sizeof(want), "%s ", a);
    for (const char *p = out; *p;) {
        size_t n = strcspn(p, "\n");
        char *l = strndup(p, n);
        p += n + (p[n] == '\n');
        char c1[256], c2[256];
        if (l && sscanf(l, "%255s %255s", c1, c2) == 2 && !strcmp(c1, a) && !strcmp(c2, b))
            return l;
        free(l);
    }
    return NULL;
}

START_TEST(status_shows_each_service_its_balancer_and_the_leader)
{
    struct env e;
    char conf[16384], *out;
    env_fakes_start(&e, 0, NULL, NULL);
    kube_req(&e, "POST", "/api/v1/nodes", "application/json", "{\"metadata\":{\"name\":\"n1\"}}",
             201, NULL);
    kube_req(&e, "PATCH", "/api/v1/nodes/n1/status", "application/merge-patch+json",
             "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
             "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.1.41\"}]}}",
             200, NULL);
    kube_req(&e, "POST", "/api/v1/namespaces/default/services", "application/json",
             "{\"metadata\":{\"name\":\"web\"},\"spec\":{\"type\":\"LoadBalancer\","
             "\"ports\":[{\"port\":80,\"nodePort\":30141}]}}",
             201, NULL);
    kube_req(&e, "POST", "/api/v1/namespaces/default/services", "application/json",
             "{\"metadata\":{\"name\":\"udp\"},\"spec\":{\"type\":\"LoadBalancer\","
             "\"ports\":[{\"port\":53,\"protocol\":\"UDP\",\"nodePort\":30153}]}}",
             201, NULL);

    mport = tu_free_port();
    snprintf(
        conf, sizeof(conf),
        "instances = (\n"
        "  { module = \"leader\"; name = \"leader\"; lease_name = \"hetzner-lb\";\n"
        "    lease_namespace = \"default\"; kubeconfig = \"%s\"; identity = \"replica-a\"; },\n"
        "  { module = \"hetzner_lb\"; name = \"hz\"; gate = \"leader\";\n"
        "    hcloud_endpoint = \"%s\"; kubeconfig = \"%s\"; default_network = \"k8s\"; },\n"
        "  { module = \"metrics\"; name = \"probes\"; port = %d; }\n);\n",
        e.kc, e.hz.url, e.kc, mport);
    env_spawn(&e.d, "prismlb", conf, 0, e.log);

    /* RECONCILER SERVICE BALANCER-ID BALANCER TARGETS LAST-ERROR NEXT-CHECK */
    char *web = NULL, *udp = NULL, *ld = NULL;
    long long dl = tu_now_ms() + 30000;
    for (;;) {
        ck_assert_msg(!tu_exited(&e.d), "the daemon exited");
        out = status();
        free(web);
        free(udp);
        free(ld);
        web = line_of(out, "hz", "default/web");
        udp = line_of(out, "hz", "default/udp");
        ld = line_of(out, "leader", "default/hetzner-lb");
        if (web && strstr(web, "web.default") && strstr(web, "10.0.1.41") && udp &&
            strstr(udp, "NoExposablePort:") && ld && strstr(ld, " yes"))
            break;
        if (tu_now_ms() > dl) {
            dump_log(&e);
            ck_abort_msg("status never showed the balancer, the warning and the leader:\n%s", out);
        }
        free(out);
        tu_sleep_ms(200);
    }
    ck_assert_ptr_nonnull(strstr(out, "RECONCILER   SERVICE"));
    ck_assert_ptr_nonnull(strstr(out, "LEADER   LEASE"));
    char c[7][128];
    ck_assert_int_eq(sscanf(web, "%127s %127s %127s %127s %127s %127s %127s", c[0], c[1], c[2],
                            c[3], c[4], c[5], c[6]),
                     7);
    ck_assert_str_eq(c[2], "1"); /* the fake's first balancer id */
    ck_assert_str_eq(c[3], "web.default");
    ck_assert_str_eq(c[4], "10.0.1.41");
    ck_assert_str_eq(c[5], "<none>");
    ck_assert_msg(c[6][strlen(c[6]) - 1] == 's', "next check \"%s\"", c[6]);
    ck_assert_int_eq(sscanf(udp, "%127s %127s %127s %127s %127s", c[0], c[1], c[2], c[3], c[4]), 5);
    ck_assert_str_eq(c[2], "<none>");
    ck_assert_str_eq(c[3], "<none>");
    ck_assert_str_eq(c[4], "<none>");
    ck_assert_int_eq(sscanf(ld, "%127s %127s %127s %127s", c[0], c[1], c[2], c[3]), 4);
    ck_assert_str_eq(c[2], "replica-a");
    ck_assert_str_eq(c[3], "yes");
    free(web);
    free(udp);
    free(ld);
    free(out);

    /* Its metrics: every answer by route and HTTP status, the last
     * RateLimit-Remaining, labelled reconciler (never instance, which
     * Prometheus adds to every target); promtool check metrics accepts
     * the exposition. */
    char url[64], path[700], cmd[1024], *m = NULL;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", mport);
    char *curl[] = {"/usr/bin/curl", "-sSf", url, NULL};
    ck_assert_int_eq(tu_run(curl, NULL, &m, 10000), 0);
    ck_assert_msg(strstr(m,
                         "prismlb_hetzner_requests_total{module_instance=\"hz\",reconciler=\"hz\","
                         "route=\"GET /load_balancers\",code=\"200\"}"),
                  "no count of the resync list:\n%s", m);
    ck_assert_msg(strstr(m,
                         "prismlb_hetzner_requests_total{module_instance=\"hz\",reconciler=\"hz\","
                         "route=\"POST /load_balancers\",code=\"201\"} 1"),
                  "no count of the create:\n%s", m);
    ck_assert_msg(
        strstr(m,
               "prismlb_hetzner_rate_limit_remaining{module_instance=\"hz\",reconciler=\"hz\"} "),
        "no RateLimit-Remaining gauge:\n%s", m);
    for (const char *p = m; (p = strstr(p, "prismlb_hetzner")); p++)
        ck_assert_msg(strncmp(p + strcspn(p, "{ \n"), "{instance=", 10) != 0, "%.80s", p);
    snprintf(path, sizeof(path), "%s/metrics.txt", dir);
    ck_assert_int_eq(tu_write_file(path, m), 0);
    free(m);
    snprintf(cmd, sizeof(cmd), "/usr/bin/promtool check metrics < '%s'", path);
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    ck_assert_msg(tu_run(sh, NULL, &m, 30000) == 0 && m && !m[0], "promtool: %s", m ? m : "");
    free(m);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb status");
    TCase *tc = tcase_create("status");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, status_shows_each_service_its_balancer_and_the_leader);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
