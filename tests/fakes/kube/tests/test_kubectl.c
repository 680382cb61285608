/*
 * kubectl 1.35 against the fake over HTTPS with a client certificate:
 * apply (with server-side field validation), get -o json with defaults,
 * get -w seeing another client's change, patch (merge and strategic),
 * create namespace (a protobuf body),
 * label, annotate, cordon, delete --wait (sendInitialEvents) and
 * finalizers.
 */
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <curl/curl.h>
#include <jansson.h>

#include "fakeproc.h"
#include "testutil.h"

static struct fake fk;
static char kubeconfig[4300], cachedir[4300], kubectl[4300];

static const char objects_yaml[] = "apiVersion: v1\n"
                                   "kind: Namespace\n"
                                   "metadata:\n"
                                   "  name: lb\n"
                                   "---\n"
                                   "apiVersion: v1\n"
                                   "kind: Node\n"
                                   "metadata:\n"
                                   "  name: node-1\n"
                                   "  labels:\n"
                                   "    kubernetes.io/hostname: node-1\n"
                                   "status:\n"
                                   "  addresses:\n"
                                   "  - type: InternalIP\n"
                                   "    address: 10.0.0.11\n"
                                   "---\n"
                                   "apiVersion: v1\n"
                                   "kind: Service\n"
                                   "metadata:\n"
                                   "  name: web\n"
                                   "  namespace: lb\n"
                                   "spec:\n"
                                   "  type: LoadBalancer\n"
                                   "  selector:\n"
                                   "    app: web\n"
                                   "  ports:\n"
                                   "  - name: http\n"
                                   "    port: 80\n"
                                   "    targetPort: 8080\n"
                                   "  - name: https\n"
                                   "    port: 443\n"
                                   "---\n"
                                   "apiVersion: discovery.k8s.io/v1\n"
                                   "kind: EndpointSlice\n"
                                   "metadata:\n"
                                   "  name: web-x7k2p\n"
                                   "  namespace: lb\n"
                                   "  labels:\n"
                                   "    kubernetes.io/service-name: web\n"
                                   "addressType: IPv4\n"
                                   "endpoints:\n"
                                   "- addresses: [\"10.244.0.5\"]\n"
                                   "  conditions: {ready: true}\n"
                                   "  nodeName: node-1\n"
                                   "ports:\n"
                                   "- name: http\n"
                                   "  port: 8080\n"
                                   "---\n"
                                   "apiVersion: coordination.k8s.io/v1\n"
                                   "kind: Lease\n"
                                   "metadata:\n"
                                   "  name: prismlb-leader\n"
                                   "  namespace: lb\n"
                                   "spec:\n"
                                   "  holderIdentity: replica-a\n"
                                   "  leaseDurationSeconds: 15\n";

/* Run kubectl with the test's kubeconfig and cache dir; returns the exit
 * code, output in *out (new, may be NULL to discard). */
static int
kc(char **out, ...)
{
    va_list ap;
    va_start(ap, out);
    int rc = tu_kubectlv(kubeconfig, cachedir, NULL, out, ap);
    va_end(ap);
    return rc;
}

/* kubectl get -o json of one object, parsed (new). */
static json_t *
kc_get(const char *kind, const char *ns, const char *name)
{
    char *out = NULL;
    int rc;
    json_t *j;
    if (ns)
        rc = kc(&out, "get", kind, name, "-n", ns, "-o", "json", NULL);
    else
        rc = kc(&out, "get", kind, name, "-o", "json", NULL);
    ck_assert_msg(rc == 0, "kubectl get %s %s: rc %d: %s", kind, name, rc, out ? out : "");
    j = json_loads(out, 0, NULL);
    ck_assert_msg(j != NULL, "kubectl get output is not JSON: %s", out);
    free(out);
    return j;
}

static void
setup(void)
{
    char yaml[4300];
    ck_assert_int_eq(fake_start(&fk, NULL), 0);
    snprintf(kubectl, sizeof(kubectl), "%s", tu_source_path(".tools/bin/kubectl"));
    snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", fk.dir);
    snprintf(cachedir, sizeof(cachedir), "%s/kube-cache", fk.dir);
    const struct tu_kubeconfig kc = {.server = fk.server[0], .certdir = fk.dir};
    ck_assert_int_eq(tu_write_kubeconfig(kubeconfig, &kc), 0);
    snprintf(yaml, sizeof(yaml), "%s/objects.yaml", fk.dir);
    ck_assert_int_eq(tu_write_file(yaml, objects_yaml), 0);
}

static void
teardown(void)
{
    ck_assert_int_eq(fake_stop(&fk), 0); /* SIGTERM exits 0 */
}

static void
apply_objects(void)
{
    char yaml[4300], *out = NULL;
    int rc;
    snprintf(yaml, sizeof(yaml), "%s/objects.yaml", fk.dir);
    rc = kc(&out, "apply", "-f", yaml, NULL);
    ck_assert_msg(rc == 0, "kubectl apply: rc %d: %s", rc, out ? out : "");
    ck_assert_msg(strstr(out, "namespace/lb created") && strstr(out, "node/node-1 created") &&
                      strstr(out, "service/web created") &&
                      strstr(out, "endpointslice.discovery.k8s.io/web-x7k2p created") &&
                      strstr(out, "lease.coordination.k8s.io/prismlb-leader created"),
                  "unexpected apply output: %s", out);
    ck_assert_msg(!strstr(out, "warning"), "apply warned: %s", out);
    free(out);
}

/* The request log has an entry whose path contains all of the needles. */
static int
logged(const char *method, const char *n1, const char *n2)
{
    struct http_res r;
    json_t *log, *e;
    size_t i;
    int found = 0;
    ck_assert_int_eq(fake_admin(&fk, "GET", "/requests", NULL, &r), 0);
    log = json_loads(r.body, 0, NULL);
    http_res_free(&r);
    ck_assert_ptr_nonnull(log);
    json_array_foreach(json_object_get(log, "items"), i, e)
    {
        const char *p = json_string_value(json_object_get(e, "path"));
        if (!strcmp(json_string_value(json_object_get(e, "method")), method) && strstr(p, n1) &&
            (!n2 || strstr(p, n2)) &&
            !strncmp(json_string_value(json_object_get(e, "userAgent")), "kubectl/v1.35", 13))
            found = 1;
    }
    json_decref(log);
    return found;
}

START_TEST(apply_and_get_with_defaults)
{
    json_t *svc, *p, *node, *slice, *lease, *ns;
    size_t i;
    char *out = NULL;

    apply_objects();
    /* Server-side field validation was requested, so kubectl trusted the
     * OpenAPI v3 document instead of validating locally. */
    ck_assert(logged("POST", "fieldValidation=Strict", "/services"));

    svc = kc_get("service", "lb", "web");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(svc, "spec"), "externalTrafficPolicy")),
        "Cluster");
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(svc, "spec"), "ports")), 2);
    json_array_foreach(json_object_get(json_object_get(svc, "spec"), "ports"), i, p)
    {
        json_int_t np = json_integer_value(json_object_get(p, "nodePort"));
        ck_assert_msg(np >= 30000 && np <= 32767, "nodePort %lld", (long long)np);
        ck_assert_str_eq(json_string_value(json_object_get(p, "protocol")), "TCP");
    }
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(json_object_get(svc, "spec"), "ports"), 1),
                         "targetPort")),
                     443);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(svc, "metadata"), "uid"));
    json_decref(svc);

    /* Another client sets the balancer's address through /status. */
    ck_assert_int_eq(
        kc(&out, "patch", "service", "web", "-n", "lb", "--subresource=status", "--type=merge",
           "-p", "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"203.0.113.10\"}]}}}", NULL),
        0);
    free(out);
    svc = kc_get("service", "lb", "web");
    ck_assert_str_eq(
        json_string_value(json_object_get(
            json_array_get(
                json_object_get(json_object_get(json_object_get(svc, "status"), "loadBalancer"),
                                "ingress"),
                0),
            "ipMode")),
        "VIP");
    json_decref(svc);

    node = kc_get("node", NULL, "node-1");
    ck_assert_str_eq(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_object_get(node, "status"), "addresses"), 0),
            "address")),
        "10.0.0.11");
    json_decref(node);
    slice = kc_get("endpointslice", "lb", "web-x7k2p");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(slice, "ports"), 0), "protocol")),
                     "TCP");
    json_decref(slice);
    lease = kc_get("lease", "lb", "prismlb-leader");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(lease, "spec"), "holderIdentity")),
        "replica-a");
    json_decref(lease);
    ns = kc_get("namespace", NULL, "lb");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(ns, "status"), "phase")),
                     "Active");
    json_decref(ns);

    /* A second apply of the same file changes nothing. */
    {
        char yaml[4300];
        snprintf(yaml, sizeof(yaml), "%s/objects.yaml", fk.dir);
        ck_assert_int_eq(kc(&out, "apply", "-f", yaml, NULL), 0);
        ck_assert_msg(strstr(out, "service/web unchanged"), "%s", out);
        free(out);
    }
}
END_TEST

START_TEST(watch_sees_other_clients_change)
{
    struct tu_proc w;
    char wlog[4300], buf[256];
    char *argv[] = {kubectl,    "--kubeconfig",
                    kubeconfig, "--cache-dir",
                    cachedir,   "get",
                    "services", "-n",
                    "lb",       "-w",
                    "-o",       "jsonpath={.metadata.name}:{.metadata.labels.color}{\"\\n\"}",
                    NULL};
    struct http_res r;

    apply_objects();
    snprintf(wlog, sizeof(wlog), "%s/watch.out", fk.dir);
    ck_assert_int_eq(tu_spawn(&w, argv, NULL, wlog), 0);
    ck_assert_msg(tu_wait_line(wlog, "web:", buf, sizeof(buf), 20000) == 0, "no initial line");
    /* Another client (libcurl here) labels the service. */
    ck_assert_int_eq(fake_api(&fk, 0, "PATCH", "/api/v1/namespaces/lb/services/web",
                              "application/merge-patch+json",
                              "{\"metadata\":{\"labels\":{\"color\":\"blue\"}}}", 1, NULL, 10000,
                              &r),
                     0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);
    ck_assert_msg(tu_wait_line(wlog, "web:blue", buf, sizeof(buf), 20000) == 0,
                  "kubectl get -w did not see the change");
    ck_assert(tu_exited(&w) == 0);
    tu_stop(&w, SIGTERM, 5000);
}
END_TEST

START_TEST(patch_label_annotate_cordon)
{
    char *out = NULL;
    json_t *svc, *ports, *node;
    int rc;

    apply_objects();
    rc = kc(&out, "patch", "service", "web", "-n", "lb", "--type=merge", "-p",
            "{\"metadata\":{\"labels\":{\"tier\":\"front\"}},\"spec\":{\"sessionAffinity\":"
            "\"ClientIP\"}}",
            NULL);
    ck_assert_msg(rc == 0, "merge patch: %s", out);
    free(out);
    /* Strategic: ports merge by "port", so 443 stays and 80 changes. */
    rc = kc(&out, "patch", "service", "web", "-n", "lb", "-p",
            "{\"spec\":{\"ports\":[{\"port\":80,\"targetPort\":9090}]}}", NULL);
    ck_assert_msg(rc == 0, "strategic patch: %s", out);
    free(out);
    svc = kc_get("service", "lb", "web");
    ports = json_object_get(json_object_get(svc, "spec"), "ports");
    ck_assert_int_eq(json_array_size(ports), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(ports, 0), "targetPort")),
                     9090);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(ports, 1), "port")), 443);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(svc, "spec"), "sessionAffinity")),
        "ClientIP");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(svc, "metadata"), "labels"), "tier")),
                     "front");
    json_decref(svc);

    ck_assert_int_eq(kc(&out, "label", "node", "node-1", "zone=fsn1", NULL), 0);
    free(out);
    ck_assert_int_eq(kc(&out, "annotate", "node", "node-1", "prismlb.io/note=kept", NULL), 0);
    free(out);
    ck_assert_int_eq(kc(&out, "cordon", "node-1", NULL), 0);
    ck_assert_msg(strstr(out, "cordoned"), "%s", out);
    free(out);
    node = kc_get("node", NULL, "node-1");
    ck_assert(json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable")));
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(node, "metadata"), "labels"), "zone")),
                     "fsn1");
    ck_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(node, "metadata"), "annotations"), "prismlb.io/note")),
        "kept");
    json_decref(node);
}
END_TEST

/* kubectl create namespace sends a protobuf body
 * (application/vnd.kubernetes.protobuf), as it does to a real API server;
 * the Namespace is created with its defaults. `create service` (also
 * protobuf, a kind the fake decodes from JSON only) is refused with 415. */
START_TEST(create_namespace_with_a_protobuf_body)
{
    char *out = NULL;
    json_t *ns;
    int rc = kc(&out, "create", "namespace", "demo", NULL);
    ck_assert_msg(rc == 0, "create namespace: %s", out);
    ck_assert_msg(strstr(out, "namespace/demo created"), "%s", out);
    free(out);
    ck_assert(logged("POST", "/api/v1/namespaces", NULL));
    ns = kc_get("namespace", NULL, "demo");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(ns, "status"), "phase")),
                     "Active");
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_object_get(json_object_get(ns, "metadata"), "labels"),
                                         "kubernetes.io/metadata.name")),
                     "demo");
    json_decref(ns);
    rc = kc(&out, "create", "namespace", "demo", NULL);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(out, "AlreadyExists"), "%s", out);
    free(out);
    rc = kc(&out, "create", "service", "clusterip", "s1", "-n", "demo", "--tcp=80:80", NULL);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(out, "accepted media types include: application/json"), "%s", out);
    free(out);
}
END_TEST

START_TEST(finalizer_and_delete_wait)
{
    char *out = NULL;
    json_t *lease;
    struct tu_proc d;
    char dlog[4300];
    char *argv[] = {kubectl,  "--kubeconfig",  kubeconfig, "--cache-dir", cachedir,
                    "delete", "service",       "web",      "-n",          "lb",
                    "--wait", "--timeout=40s", NULL};

    apply_objects();
    /* Delete without a finalizer: gone at once, --wait returns. */
    ck_assert_int_eq(kc(&out, "delete", "endpointslice", "web-x7k2p", "-n", "lb", "--wait",
                        "--timeout=20s", NULL),
                     0);
    free(out);
    ck_assert_int_ne(kc(&out, "get", "endpointslice", "web-x7k2p", "-n", "lb", NULL), 0);
    ck_assert_msg(strstr(out, "NotFound") || strstr(out, "not found"), "%s", out);
    free(out);

    /* A finalizer keeps the lease with a deletionTimestamp. */
    ck_assert_int_eq(kc(&out, "patch", "lease", "prismlb-leader", "-n", "lb", "--type=merge", "-p",
                        "{\"metadata\":{\"finalizers\":[\"prismlb.io/hold\"]}}", NULL),
                     0);
    free(out);
    ck_assert_int_eq(
        kc(&out, "delete", "lease", "prismlb-leader", "-n", "lb", "--wait=false", NULL), 0);
    free(out);
    lease = kc_get("lease", "lb", "prismlb-leader");
    ck_assert_ptr_nonnull(json_object_get(json_object_get(lease, "metadata"), "deletionTimestamp"));
    json_decref(lease);
    ck_assert_int_eq(kc(&out, "patch", "lease", "prismlb-leader", "-n", "lb", "--type=json", "-p",
                        "[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]", NULL),
                     0);
    free(out);
    ck_assert_int_ne(kc(&out, "get", "lease", "prismlb-leader", "-n", "lb", NULL), 0);
    free(out);

    /* delete --wait on an object held by a finalizer waits with a watch
     * using sendInitialEvents, and returns once the finalizer goes. */
    ck_assert_int_eq(kc(&out, "patch", "service", "web", "-n", "lb", "--type=merge", "-p",
                        "{\"metadata\":{\"finalizers\":[\"prismlb.io/hold\"]}}", NULL),
                     0);
    free(out);
    snprintf(dlog, sizeof(dlog), "%s/delete.out", fk.dir);
    ck_assert_int_eq(tu_spawn(&d, argv, NULL, dlog), 0);
    {
        long long deadline = tu_now_ms() + 20000;
        while (!logged("GET", "sendInitialEvents=true", "/services") && tu_now_ms() < deadline)
            tu_sleep_ms(100);
    }
    ck_assert_msg(logged("GET", "sendInitialEvents=true", "resourceVersionMatch=NotOlderThan"),
                  "kubectl delete --wait did not open a sendInitialEvents watch");
    ck_assert_msg(tu_exited(&d) == 0, "delete --wait returned while the finalizer is set");
    ck_assert_int_eq(kc(&out, "patch", "service", "web", "-n", "lb", "--type=merge", "-p",
                        "{\"metadata\":{\"finalizers\":null}}", NULL),
                     0);
    free(out);
    ck_assert_msg(tu_wait_exit(&d, 20000) == 1, "delete --wait did not return");
    out = tu_read_file(dlog, NULL);
    ck_assert_msg(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0, "delete --wait failed: %s",
                  out ? out : "");
    free(out);
    ck_assert_int_ne(kc(&out, "get", "service", "web", "-n", "lb", NULL), 0);
    free(out);
}
END_TEST

/* kubectl reports the fake's refusals as it reports kube-apiserver's: an
 * unknown field under its default --validate=strict, a status the rules
 * refuse; --validate=false (fieldValidation=Ignore) drops the field. */
START_TEST(kubectl_reports_refused_writes)
{
    char yaml[4300], *out = NULL;
    FILE *f;

    apply_objects();
    snprintf(yaml, sizeof(yaml), "%s/colour.yaml", fk.dir);
    f = fopen(yaml, "w");
    ck_assert_ptr_nonnull(f);
    fputs("apiVersion: v1\nkind: Service\nmetadata:\n  name: colour\n  namespace: lb\n"
          "spec:\n  colour: red\n  ports:\n  - port: 80\n",
          f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_ne(kc(&out, "apply", "-f", yaml, NULL), 0);
    ck_assert_msg(strstr(out, "strict decoding error: unknown field \"spec.colour\""), "%s", out);
    free(out);
    ck_assert_int_eq(kc(&out, "apply", "--validate=false", "-f", yaml, NULL), 0);
    free(out);
    ck_assert_int_eq(kc(&out, "get", "service", "colour", "-n", "lb", "-o", "json", NULL), 0);
    ck_assert_msg(!strstr(out, "colour\": \"red"), "%s", out);
    free(out);
    /* colour is a ClusterIP Service: no load balancer status for it. */
    ck_assert_int_ne(
        kc(&out, "patch", "service", "colour", "-n", "lb", "--subresource=status", "--type=merge",
           "-p", "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"203.0.113.9\"}]}}}", NULL),
        0);
    ck_assert_msg(strstr(out, "status.loadBalancer.ingress: Forbidden: may only be used when "
                              "`spec.type` is 'LoadBalancer'"),
                  "%s", out);
    free(out);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("fake-kube-kubectl");
    TCase *tc = tcase_create("kubectl");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, apply_and_get_with_defaults);
    tcase_add_test(tc, watch_sees_other_clients_change);
    tcase_add_test(tc, patch_label_annotate_cordon);
    tcase_add_test(tc, finalizer_and_delete_wait);
    tcase_add_test(tc, create_namespace_with_a_protobuf_body);
    tcase_add_test(tc, kubectl_reports_refused_writes);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    int rc;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = tu_run_suite(suite());
    curl_global_cleanup();
    return rc;
}
