/*
 * endpoint_watch discovery, sentence by sentence from the spec's
 * "Two-level endpoint discovery" and "Endpoint discovery": the daemon with
 * an endpoint_watch instance against the fake API server, observed through
 * a sink (the lifecycle test module traces every merged set it receives)
 * and the discovery counters of /metrics.
 *
 * Static endpoint of every test: 10.0.0.1:6443. EndpointSlices of service
 * "kubernetes" in "default" are written at the fake with the client
 * certificate.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "testutil.h"

static struct ewt T;
static char settings[4400];

#define NS "default"
#define SVC "kubernetes"
#define HTTPS "https=6443"
#define STATIC "10.0.0.1:6443"

static void
setup(void)
{
    ck_assert_int_eq(ewt_init(&T), 0);
    ck_assert_int_eq(ewt_fake_start(&T, NULL), 0);
    ewt_write_kubeconfig(&T, NULL);
    snprintf(settings, sizeof(settings), "endpoints = [\"%s\"]; kubeconfig = \"%s\";", STATIC,
             T.kubeconfig);
}

static void
teardown(void)
{
    ck_assert_msg(ewt_fini(&T) == 0, "the daemon did not end cleanly (see above)");
}

static void
start(const char *ew_settings)
{
    ck_assert_msg(ewt_daemon_start(&T, ew_settings ? ew_settings : settings, NULL, NULL) == 0,
                  "daemon did not start");
}

/* No merged set the sink received was empty. */
static void
assert_never_empty(void)
{
    char **v;
    int n = ewt_sets(&T, &v);
    for (int i = 0; i < n; i++)
        ck_assert_msg(v[i][0] != '\0', "the sink received an empty set (update %d)", i);
    ewt_lines_free(v, n);
}

static double
kube_metric(const char *family)
{
    return ewt_metric(&T, family, "kubernetes");
}

/* "Static (bootstrap): Control plane IPs provided via the --endpoints flag.
 * Available immediately at startup. No cluster access or CNI required." and
 * "When running outside a cluster, the provider gracefully degrades and the
 * server operates with static endpoints only." — one log line, no loop. */
START_TEST(static_available_at_startup_without_cluster_access)
{
    char *env[] = {"KUBERNETES_SERVICE_HOST=", "KUBECONFIG=", NULL};
    ck_assert_int_eq(
        ewt_daemon_start(&T, "endpoints = [\"10.0.0.2:6443\", \"10.0.0.1:6443\"];", NULL, env), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.2:6443", 3000), 0);
    tu_sleep_ms(3000);
    ck_assert_int_eq(ewt_log_count(&T, "not in a cluster"), 1);
    ck_assert_int_eq(ewt_log_count(&T, "level=error"), 0);
    ck_assert_int_eq(ewt_log_count(&T, "level=warn"), 0);
    ck_assert(ewt_metric(&T, "prismlb_discovery_updates_total", "static") == 1);
    ck_assert(ewt_metric(&T, "prismlb_discovery_errors_total", "static") == 0);
    ck_assert(kube_metric("prismlb_discovery_errors_total") == 0);
    ck_assert_int_eq(ewt_requests(&T, "GET", "endpointslices", NULL, NULL, 0), 0);
}
END_TEST

/* A service account directory without a token (KUBERNETES_SERVICE_HOST set
 * but nothing mounted) degrades the same way: one line. */
START_TEST(no_service_account_degrades_to_static_with_one_line)
{
    char s[8192];
    snprintf(s, sizeof(s), "endpoints = [\"%s\"]; service_account_dir = \"%s/nosa\";", STATIC,
             T.dir);
    char *env[] = {"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443",
                   "KUBECONFIG=", NULL};
    ck_assert_int_eq(ewt_daemon_start(&T, s, NULL, env), 0);
    ck_assert_int_eq(ewt_wait_set(&T, STATIC, 3000), 0);
    tu_sleep_ms(2000);
    ck_assert_int_eq(ewt_log_count(&T, "no service account token"), 1);
    ck_assert(kube_metric("prismlb_discovery_errors_total") == 0);
}
END_TEST

/* "$KUBECONFIG" is the client's configuration when nothing else is set. */
START_TEST(kubeconfig_from_environment)
{
    char kc[4400];
    snprintf(kc, sizeof(kc), "KUBECONFIG=%s", T.kubeconfig);
    char *env[] = {"KUBERNETES_SERVICE_HOST=", kc, NULL};
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.7", HTTPS), 0);
    ck_assert_int_eq(ewt_daemon_start(&T, "endpoints = [\"10.0.0.1:6443\"];", NULL, env), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.7:6443", 5000), 0);
}
END_TEST

/* "Lists EndpointSlice resources on startup, then establishes a Watch." */
START_TEST(lists_endpointslices_on_startup_then_watches)
{
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2,10.0.0.3", HTTPS), 0);
    start(NULL);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.2:6443,10.0.0.3:6443", 5000), 0);
    double lt[4], wt[4];
    ck_assert_int_eq(ewt_requests(&T, "GET", "endpointslices?", "limit=", lt, 4), 1);
    /* the watch follows the list (bounded wait for it to arrive) */
    long long end = tu_now_ms() + 5000;
    while (ewt_requests(&T, "GET", "endpointslices?", "watch=1", NULL, 0) < 1) {
        ck_assert_msg(tu_now_ms() < end, "no watch within 5 s of the list");
        tu_sleep_ms(20);
    }
    ck_assert_int_eq(ewt_requests(&T, "GET", "endpointslices?", "watch=1", wt, 4), 1);
    ck_assert(wt[0] >= lt[0]);
    /* The label selector of the service. */
    ck_assert_int_eq(ewt_requests(&T, "GET",
                                  "labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes", NULL,
                                  NULL, 0),
                     2);
    ck_assert(ewt_metric(&T, "prismlb_discovery_updates_total", "static") == 1);
    ck_assert(kube_metric("prismlb_discovery_updates_total") == 1);
    ck_assert(kube_metric("prismlb_discovery_errors_total") == 0);
}
END_TEST

/* "on each Watch event (add, modify, delete), the cache is updated and the
 * full endpoint list is recomputed from all cached slices." */
START_TEST(watch_add_modify_delete_recompute_the_list)
{
    start(NULL);
    ck_assert_int_eq(ewt_wait_set(&T, STATIC, 3000), 0);
    ck_assert_int_eq(ewt_wait_log(&T, "listed 0 EndpointSlice", 5000), 0);
    /* add */
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.2:6443", 2000), 0);
    /* modify: an endpoint added */
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2,10.0.0.3", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.2:6443,10.0.0.3:6443", 2000), 0);
    /* modify: an endpoint removed */
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.3", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.3:6443", 2000), 0);
    /* delete */
    ck_assert_int_eq(ewt_slice_delete(&T, NS, "kubernetes"), 0);
    ck_assert_int_eq(ewt_wait_set(&T, STATIC, 2000), 0);
    /* one update per event, after the (empty) initial list */
    ck_assert(kube_metric("prismlb_discovery_updates_total") == 5);
    ck_assert(kube_metric("prismlb_discovery_errors_total") == 0);
    assert_never_empty();
}
END_TEST

/* "This ensures that updating one slice does not lose endpoints from other
 * slices." — updating or deleting one keeps the others. */
START_TEST(updating_one_slice_does_not_lose_other_slices)
{
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes-a", "10.0.1.1,10.0.1.2", HTTPS), 0);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes-b", "10.0.2.1", HTTPS), 0);
    start(NULL);
    ck_assert_int_eq(
        ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.1:6443,10.0.1.2:6443,10.0.2.1:6443", 5000), 0);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes-a", "10.0.1.3", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.3:6443,10.0.2.1:6443", 2000), 0);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes-b", "10.0.2.1,10.0.2.2", HTTPS), 0);
    ck_assert_int_eq(
        ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.3:6443,10.0.2.1:6443,10.0.2.2:6443", 2000), 0);
    ck_assert_int_eq(ewt_slice_delete(&T, NS, "kubernetes-a"), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.2.1:6443,10.0.2.2:6443", 2000), 0);
    /* The initial list published once for both slices (coalesced). */
    ck_assert(kube_metric("prismlb_discovery_updates_total") == 4);
}
END_TEST

/* "Endpoints where Conditions.Ready is explicitly false are excluded from
 * the list." — absent conditions, and ready with serving false, count. */
START_TEST(endpoints_with_ready_explicitly_false_are_excluded)
{
    ck_assert_int_eq(
        ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2,10.0.0.3!,10.0.0.4?,10.0.0.5~", HTTPS),
        0);
    start(NULL);
    ck_assert_int_eq(
        ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.2:6443,10.0.0.4:6443,10.0.0.5:6443", 5000), 0);
    /* 10.0.0.3 turns ready; 10.0.0.2 turns not ready. */
    ck_assert_int_eq(
        ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2!,10.0.0.3,10.0.0.4?,10.0.0.5~", HTTPS),
        0);
    ck_assert_int_eq(
        ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.3:6443,10.0.0.4:6443,10.0.0.5:6443", 2000), 0);
}
END_TEST

/* "If the merged list would be empty, the update is skipped to prevent
 * routing to zero backends." — every discovered endpoint not ready: the
 * Kubernetes list is empty (published, logged), the sink keeps the static
 * endpoints and never receives an empty set. */
START_TEST(all_not_ready_never_sends_an_empty_list)
{
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2,10.0.0.3", HTTPS), 0);
    start(NULL);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.2:6443,10.0.0.3:6443", 5000), 0);
    double before = kube_metric("prismlb_discovery_updates_total");
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2!,10.0.0.3!", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, STATIC, 2000), 0);
    ck_assert_int_eq(ewt_wait_log(&T, "no ready endpoint in 1 EndpointSlice", 2000), 0);
    ck_assert(kube_metric("prismlb_discovery_updates_total") == before + 1);
    ck_assert(kube_metric("prismlb_discovery_errors_total") == 0);
    assert_never_empty();
}
END_TEST

/* "The merged provider deduplicates endpoints across all sub-providers": a
 * static endpoint the slice lists too appears once. */
START_TEST(merged_list_deduplicates_across_providers)
{
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.1,10.0.0.2", HTTPS), 0);
    start(NULL);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.2:6443", 5000), 0);
}
END_TEST

/* The port comes from the slice's port named https, never from a static
 * endpoint; a slice without that port contributes nothing. */
START_TEST(port_taken_from_the_slice_port_named_https)
{
    ck_assert_int_eq(
        ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2", "metrics=9100,https=7443"), 0);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes-x", "10.0.0.9", "metrics=9100"), 0);
    start(NULL);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.2:7443", 5000), 0);
    ck_assert_int_eq(ewt_wait_log(&T, "have no TCP port of that name", 1000), 0);
}
END_TEST

/* port_name selects another port. */
START_TEST(port_name_setting_selects_the_port)
{
    char s[8192];
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2", "api=8443,https=7443"),
                     0);
    snprintf(s, sizeof(s), "%s port_name = \"api\";", settings);
    start(s);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.2:8443", 5000), 0);
}
END_TEST

/* IPv6 addresses are written [addr]:port. */
START_TEST(ipv6_endpoints_are_bracketed)
{
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes-v6", "fd00::2,fd00::3", HTTPS), 0);
    start(NULL);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,[fd00::2]:6443,[fd00::3]:6443", 5000), 0);
}
END_TEST

/* "Watches Kubernetes EndpointSlice resources for the kubernetes service in
 * the default namespace (label selector:
 * kubernetes.io/service-name=kubernetes)": other services' slices and other
 * namespaces are not watched; namespace and service_name choose another. */
START_TEST(only_the_services_slices_count)
{
    ck_assert_int_eq(ewt_slice_put(&T, NS, "other", "other-1", "10.9.0.1", HTTPS), 0);
    ck_assert_int_eq(ewt_slice_put(&T, "kube-system", SVC, "kubernetes", "10.9.0.2", HTTPS), 0);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2", HTTPS), 0);
    start(NULL);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.2:6443", 5000), 0);
    ck_assert_int_eq(ewt_slice_put(&T, NS, "other", "other-1", "10.9.0.3", HTTPS), 0);
    /* A change of the service's own slice after it: once the set shows it,
     * the other service's change (earlier in the store) was passed over,
     * however fast the machine. */
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.4", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.0.4:6443", 10000), 0);
    char **v;
    int n = ewt_sets(&T, &v);
    for (int i = 0; i < n; i++)
        ck_assert_msg(!strstr(v[i], "10.9.0."), "set %d counts another service: %s", i, v[i]);
    ewt_lines_free(v, n);
}
END_TEST

START_TEST(namespace_and_service_name_settings)
{
    char s[8192];
    ck_assert_int_eq(
        ewt_slice_put(&T, "kube-system", "apiserver", "apiserver-1", "10.9.0.2", HTTPS), 0);
    snprintf(s, sizeof(s), "%s namespace = \"kube-system\"; service_name = \"apiserver\";",
             settings);
    start(s);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.9.0.2:6443", 5000), 0);
}
END_TEST

/* enable_discovery = false: the static provider alone, no API request. */
START_TEST(discovery_disabled_is_static_only)
{
    char s[8192];
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.0.2", HTTPS), 0);
    snprintf(s, sizeof(s), "%s enable_discovery = false;", settings);
    start(s);
    ck_assert_int_eq(ewt_wait_set(&T, STATIC, 3000), 0);
    tu_sleep_ms(500);
    ck_assert_int_eq(ewt_requests(&T, "GET", "endpointslices", NULL, NULL, 0), 0);
    ck_assert(kube_metric("prismlb_discovery_updates_total") == -1); /* no series */
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("endpoint_watch_discovery");
    TCase *tc = tcase_create("discovery");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, static_available_at_startup_without_cluster_access);
    tcase_add_test(tc, no_service_account_degrades_to_static_with_one_line);
    tcase_add_test(tc, kubeconfig_from_environment);
    tcase_add_test(tc, lists_endpointslices_on_startup_then_watches);
    tcase_add_test(tc, watch_add_modify_delete_recompute_the_list);
    tcase_add_test(tc, updating_one_slice_does_not_lose_other_slices);
    tcase_add_test(tc, endpoints_with_ready_explicitly_false_are_excluded);
    tcase_add_test(tc, all_not_ready_never_sends_an_empty_list);
    tcase_add_test(tc, merged_list_deduplicates_across_providers);
    tcase_add_test(tc, port_taken_from_the_slice_port_named_https);
    tcase_add_test(tc, port_name_setting_selects_the_port);
    tcase_add_test(tc, ipv6_endpoints_are_bracketed);
    tcase_add_test(tc, only_the_services_slices_count);
    tcase_add_test(tc, namespace_and_service_name_settings);
    tcase_add_test(tc, discovery_disabled_is_static_only);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
