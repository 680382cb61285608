/*
 * Another cloud could: mod_lbfile (tests/modules/lbfile), built on the
 * public header alone, provisions Service load balancers into a file using
 * the ABI's target selection, status writes and warning Events, against the
 * fake API server driven by kubectl.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fakeproc.h"
#include "daemon.h"

static struct fake f;
static char *dir;
static char kubeconfig[4096], cachedir[4096];

static const char *const nodes_yaml =
    "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n---\n"
    "apiVersion: v1\nkind: Node\nmetadata:\n  name: n2\n---\n"
    "apiVersion: v1\nkind: Node\nmetadata:\n  name: n3\n---\n"
    "apiVersion: v1\nkind: Node\nmetadata:\n  name: cp\n  labels:\n"
    "    node.kubernetes.io/exclude-from-external-load-balancers: \"\"\n---\n"
    "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\n"
    "spec:\n  type: LoadBalancer\n  loadBalancerClass: example.com/lbfile\n"
    "  ports:\n  - port: 80\n    targetPort: 8080\n";

/* kubectl with the test's kubeconfig; exit code, output copied to
 * out_buf. */
static int
kubectl(char *out_buf, size_t len, const char *const *args)
{
    char *out = NULL;
    int rc = tu_kubectl(kubeconfig, cachedir, NULL, &out, args);
    if (out_buf)
        snprintf(out_buf, len, "%s", out ? out : "");
    free(out);
    return rc;
}

static void
node_status(const char *name, const char *ip)
{
    char path[256], body[512];
    struct http_res r;
    snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", name);
    snprintf(body, sizeof(body),
             "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
             "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"%s\"}]}}",
             ip);
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(
        fake_api(&f, 0, "PATCH", path, "application/merge-patch+json", body, 1, NULL, 10000, &r),
        0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);
}

/* Wait until the output file holds exactly `want` (one line). */
static void
wait_output(const char *file, const char *want)
{
    long long deadline = tu_now_ms() + 20000;
    char *got = NULL;
    while (tu_now_ms() < deadline) {
        free(got);
        got = tu_read_file(file, NULL);
        if (got && strcmp(got, want) == 0) {
            free(got);
            return;
        }
        tu_sleep_ms(50);
    }
    ck_abort_msg("output file holds \"%s\", want \"%s\"", got ? got : "(none)", want);
}

START_TEST(another_cloud_provisions_through_the_abi)
{
    dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    ck_assert_int_eq(fake_start(&f, NULL), 0);
    snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", dir);
    snprintf(cachedir, sizeof(cachedir), "%s/cache", dir);
    const struct tu_kubeconfig kc = {.server = f.server[0], .certdir = f.dir};
    ck_assert_int_eq(tu_write_kubeconfig(kubeconfig, &kc), 0);

    char yaml[4096], out[8192];
    snprintf(yaml, sizeof(yaml), "%s/objects.yaml", dir);
    ck_assert_int_eq(tu_write_file(yaml, nodes_yaml), 0);
    const char *apply[] = {"apply", "-f", yaml, NULL};
    ck_assert_msg(kubectl(out, sizeof(out), apply) == 0, "kubectl apply: %s", out);
    node_status("n1", "10.1.0.1");
    node_status("n2", "10.1.0.2");
    node_status("n3", "10.1.0.3");
    node_status("cp", "10.1.0.9");

    static const char *const dirs[] = {"tests/modules", NULL};
    char output[4096], *env[] = {(char *)tu_module_path_env(dirs), NULL};
    struct tu_daemon d;
    snprintf(output, sizeof(output), "%s/balancers.txt", dir);
    tu_daemon_init(&d, dir, "lbfile");
    tu_daemon_spawn(&d,
                    "instances = ( { module = \"lbfile\"; kubeconfig = \"kubeconfig\";\n"
                    "  output_file = \"balancers.txt\"; max_targets = 2; } );\n",
                    NULL, env);

    /* Cluster policy, the excluded node out, capped at 2 in name order. */
    wait_output(output, "default/web 192.0.2.10 n1=10.1.0.1,n2=10.1.0.2\n");
    /* The status write reached the API server. */
    const char *get[] = {
        "get", "service", "web", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}", NULL};
    long long deadline = tu_now_ms() + 10000;
    do {
        kubectl(out, sizeof(out), get);
    } while (strcmp(out, "192.0.2.10") != 0 && tu_now_ms() < deadline && (tu_sleep_ms(100), 1));
    ck_assert_str_eq(out, "192.0.2.10");
    /* The cap is reported as a warning Event on the Service. */
    const char *events[] = {"get",
                            "events",
                            "--field-selector",
                            "reason=TooManyTargets",
                            "-o",
                            "jsonpath={.items[0].message}",
                            NULL};
    deadline = tu_now_ms() + 10000;
    do {
        kubectl(out, sizeof(out), events);
    } while (!strstr(out, "a balancer holds 2 targets") && tu_now_ms() < deadline &&
             (tu_sleep_ms(100), 1));
    ck_assert_msg(strstr(out, "1 nodes left out: a balancer holds 2 targets") != NULL, "%s", out);

    /* kubectl cordon takes a node out of the Cluster policy. */
    const char *cordon[] = {"cordon", "n1", NULL};
    ck_assert_msg(kubectl(out, sizeof(out), cordon) == 0, "kubectl cordon: %s", out);
    wait_output(output, "default/web 192.0.2.10 n2=10.1.0.2,n3=10.1.0.3\n");

    tu_daemon_finish(&d, 10000);
    ck_assert_int_eq(fake_stop(&f), 0);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("lbfile");
    TCase *tc = tcase_create("lbfile");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, another_cloud_provisions_through_the_abi);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
