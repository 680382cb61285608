/*
 * prismlb's own annotations (neither hccm nor robotlb has them: delete
 * protection, the PROXY protocol per port, a protocol per port), as a user
 * drives them: kubectl applies, annotates and deletes the Service, the
 * hcloud CLI (against the fake Hetzner API) reads its balancer.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "hccm_util.h"
#include "testutil.h"

#define CHANGE_PROTECTION "POST /v1/load_balancers/{id}/actions/change_protection"

/* Service uid's balancer as `hcloud load-balancer describe -o json` shows
 * it (new), or NULL while there is none. */
static json_t *
cli_describe(struct env *e, const char *uid)
{
    json_t *lb = hccm_cli_balancer_of(e, uid);
    json_t *d = lb ? env_hcloud_json(e, "load-balancer", "describe",
                                     json_string_value(json_object_get(lb, "name")), NULL)
                   : NULL;
    json_decref(lb);
    return d;
}

/* protection.delete of Service uid's balancer as `hcloud load-balancer
 * describe -o json` shows it: 1, 0, or -1 while there is no balancer. */
static int
cli_protected(struct env *e, const char *uid)
{
    json_t *d = cli_describe(e, uid);
    if (!d)
        return -1;
    int r = json_is_true(json_object_get(json_object_get(d, "protection"), "delete"));
    json_decref(d);
    return r;
}

/* Two resync lists that began after now, then nothing but reads since the
 * request mark (what: for the failure message). */
static void
steady(struct env *e, long mark, const char *what)
{
    long lists = env_count_route(e, "GET /v1/load_balancers");
    WAIT_FOR(e, env_count_route(e, "GET /v1/load_balancers") >= lists + 2, 30000,
             "two resync lists");
    hccm_only_reads_since(e, mark, what);
}

/* prismlb.io/delete-protection sets the balancer's delete protection,
 * "false" clears it, "true" sets it again, one change_protection each and
 * none while it stands; the Service deleted, the protected balancer stays
 * (no DELETE sent: the list shows it protected) with a DeleteProtected
 * warning. */
START_TEST(delete_protection_is_set_and_cleared_from_the_service)
{
    struct env e;
    env_start(&e, NULL, NULL, NULL, 1);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web", "    prismlb.io/delete-protection: \"true\"\n");
    WAIT_FOR(&e, cli_protected(&e, uid) == 1, 30000, "the balancer, protected");
    ck_assert_int_eq(env_count_route(&e, CHANGE_PROTECTION), 1);
    steady(&e, env_last_request(&e), "protection set");

    hccm_annotate(&e, "web", "prismlb.io/delete-protection=false");
    WAIT_FOR(&e, cli_protected(&e, uid) == 0, 30000, "the protection cleared");
    ck_assert_int_eq(env_count_route(&e, CHANGE_PROTECTION), 2);
    steady(&e, env_last_request(&e), "protection cleared");

    hccm_annotate(&e, "web", "prismlb.io/delete-protection=true");
    WAIT_FOR(&e, cli_protected(&e, uid) == 1, 30000, "the protection set again");
    ck_assert_int_eq(env_count_route(&e, CHANGE_PROTECTION), 3);
    steady(&e, env_last_request(&e), "protection set again");

    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    long id = (long)json_integer_value(json_object_get(lb, "id"));
    const char *name = json_string_value(json_object_get(lb, "name"));
    char *out = NULL;
    int rc = env_kubectl(&e, &out, "delete", "service", "web", "-n", "default", NULL);
    ck_assert_msg(rc == 0, "kubectl delete service: %s", out ? out : "");
    free(out);
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "DeleteProtected", name, "delete protection", NULL) > 0,
             30000, "the DeleteProtected warning");
    ck_assert_int_eq(env_lb_exists(&e, id), 1);
    ck_assert_int_eq(env_count_route(&e, "DELETE /v1/load_balancers/{id}"), 0);
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

/* An annotation that is not a Go boolean is an InvalidAnnotation warning
 * naming it, and the protection the balancer has stays as it is. */
START_TEST(a_bad_delete_protection_is_named_and_changes_nothing)
{
    struct env e;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web", "    prismlb.io/delete-protection: \"true\"\n");
    WAIT_FOR(&e, cli_protected(&e, uid) == 1, 30000, "the balancer, protected");
    hccm_annotate(&e, "web", "prismlb.io/delete-protection=yes");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation", "prismlb.io/delete-protection",
                               "\"yes\"", NULL) > 0,
             30000, "the InvalidAnnotation warning");
    ck_assert_int_eq(cli_protected(&e, uid), 1);
    ck_assert_int_eq(env_count_route(&e, CHANGE_PROTECTION), 1);
    free(uid);
    env_stop(&e);
}
END_TEST

/* kubectl apply Service default/web with ports 80, 443 and third
 * (nodePorts 30080, 30443, 30880) and the annotation lines annot; its UID
 * (new). */
static char *
apply_three_ports(struct env *e, int third, const char *annot)
{
    char path[4400], manifest[2048], *out = NULL;
    snprintf(path, sizeof(path), "%s/web3.yaml", dir);
    snprintf(manifest, sizeof(manifest),
             "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\n"
             "  annotations:\n%s"
             "spec:\n  type: LoadBalancer\n  selector:\n    app: web\n  ports:\n"
             "  - name: http\n    port: 80\n    protocol: TCP\n    nodePort: 30080\n"
             "  - name: https\n    port: 443\n    protocol: TCP\n    nodePort: 30443\n"
             "  - name: alt\n    port: %d\n    protocol: TCP\n    nodePort: 30880\n",
             annot, third);
    ck_assert_int_eq(tu_write_file(path, manifest), 0);
    int rc = env_kubectl(e, &out, "apply", "-f", path, NULL);
    ck_assert_msg(rc == 0, "kubectl apply: %s", out ? out : "");
    free(out);
    out = NULL;
    rc = env_kubectl(e, &out, "get", "service", "web", "-n", "default", "-o",
                     "jsonpath={.metadata.uid}", NULL);
    ck_assert_msg(rc == 0 && out && out[0], "kubectl get service: %s", out ? out : "");
    return out;
}

/* proxyprotocol of the balancer's service on port listen as `hcloud
 * load-balancer list -o json` shows it (lb: borrowed): 1, 0, -1 when
 * there is no such service. */
static int
cli_proxy(json_t *lb, int listen)
{
    json_t *s = hccm_service_on(lb, listen);
    return s ? json_is_true(json_object_get(s, "proxyprotocol")) : -1;
}

/* cli_proxy of Service uid's balancer as the hcloud CLI shows it now; -2
 * while there is none. */
static int
cli_proxy_now(struct env *e, const char *uid, int listen)
{
    json_t *lb = hccm_cli_balancer_of(e, uid);
    int r = lb ? cli_proxy(lb, listen) : -2;
    json_decref(lb);
    return r;
}

/* The ipMode of every ingress entry of Service web, as kubectl shows
 * them, into buf ("Proxy " for one entry in Proxy mode). */
static void
kubectl_ip_modes(struct env *e, char *buf, size_t len)
{
    char *out = NULL;
    int rc = env_kubectl(e, &out, "get", "service", "web", "-n", "default", "-o",
                         "jsonpath={range .status.loadBalancer.ingress[*]}{.ipMode} {end}", NULL);
    ck_assert_msg(rc == 0, "kubectl get service: %s", out ? out : "");
    snprintf(buf, len, "%s", out ? out : "");
    free(out);
}

/* prismlb.io/proxy-protocol-ports on two of three ports: the hcloud CLI
 * shows proxyprotocol on those two services only; the status's one
 * entry (an address has one ipMode) says Proxy. Listing the third port
 * too changes that service alone (one update_service). */
START_TEST(the_proxy_protocol_goes_to_the_listed_ports_only)
{
    struct env e;
    char modes[128];
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = apply_three_ports(&e, 8080, "    prismlb.io/proxy-protocol-ports: \"80,443\"\n");
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "the balancer");
    WAIT_FOR(&e, (kubectl_ip_modes(&e, modes, sizeof(modes)), modes[0] != '\0'), 30000,
             "the status");
    ck_assert_str_eq(modes, "Proxy ");
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_uint_eq(json_array_size(json_object_get(lb, "services")), 3);
    ck_assert_int_eq(cli_proxy(lb, 80), 1);
    ck_assert_int_eq(cli_proxy(lb, 443), 1);
    ck_assert_int_eq(cli_proxy(lb, 8080), 0);
    json_decref(lb);

    long updates = env_count_route(&e, "POST /v1/load_balancers/{id}/actions/update_service");
    hccm_annotate(&e, "web", "prismlb.io/proxy-protocol-ports=80,443,8080");
    WAIT_FOR(&e, cli_proxy_now(&e, uid, 8080) == 1, 30000, "port 8080 with the proxy protocol");
    ck_assert_int_eq(cli_proxy_now(&e, uid, 80), 1);
    ck_assert_int_eq(cli_proxy_now(&e, uid, 443), 1);
    ck_assert_int_eq(env_count_route(&e, "POST /v1/load_balancers/{id}/actions/update_service"),
                     updates + 1);
    free(uid);
    env_stop(&e);
}
END_TEST

/* The list beside hccm's uses-proxyprotocol is an InvalidAnnotation
 * naming both, and the balancer keeps what the last good set made. */
START_TEST(the_per_port_list_beside_uses_proxyprotocol_names_both)
{
    struct env e;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = apply_three_ports(&e, 8080, "    prismlb.io/proxy-protocol-ports: \"443\"\n");
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "the balancer");
    long writes = env_last_request(&e);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/uses-proxyprotocol=true");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation", "prismlb.io/proxy-protocol-ports",
                               "load-balancer.hetzner.cloud/uses-proxyprotocol", NULL) > 0,
             30000, "the InvalidAnnotation warning naming both");
    hccm_only_reads_since(&e, writes, "the list beside uses-proxyprotocol");
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_int_eq(cli_proxy(lb, 443), 1);
    ck_assert_int_eq(cli_proxy(lb, 80), 0);
    ck_assert_int_eq(cli_proxy(lb, 8080), 0);
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

#define PORT_PROTOCOLS "prismlb.io/port-protocols"
#define UPDATE_SERVICE "POST /v1/load_balancers/{id}/actions/update_service"

/* 1 when service s (as the hcloud CLI shows it; NULL: none) has protocol
 * proto, redirect_http redirect and the certificates of the JSON text
 * certs. */
static int
cli_service_is(json_t *s, const char *proto, int redirect, const char *certs)
{
    const char *p = json_string_value(json_object_get(s, "protocol"));
    json_t *http = json_object_get(s, "http"), *want = json_loads(certs, 0, NULL);
    int ok = p && strcmp(p, proto) == 0 &&
             !json_is_true(json_object_get(http, "redirect_http")) == !redirect &&
             json_equal(json_object_get(http, "certificates"), want);
    json_decref(want);
    return ok;
}

/* 1 when Service uid's balancer, as `hcloud load-balancer describe -o
 * json` shows it, serves 443 as https with certificate cert and, when
 * redirect, the redirect from 80 (and no service on 80), else 80 as a
 * plain http service; port 22 as proto22. */
static int
cli_layout_is(struct env *e, const char *uid, long cert, int redirect, const char *proto22)
{
    char certs[32];
    json_t *d = cli_describe(e, uid);
    if (!d)
        return 0;
    snprintf(certs, sizeof(certs), "[%ld]", cert);
    json_t *s80 = hccm_service_on(d, 80), *s443 = hccm_service_on(d, 443),
           *s22 = hccm_service_on(d, 22);
    int ok = cli_service_is(s443, "https", redirect, certs) &&
             json_string_value(json_object_get(s22, "protocol")) &&
             strcmp(json_string_value(json_object_get(s22, "protocol")), proto22) == 0 &&
             (redirect ? s80 == NULL : cli_service_is(s80, "http", 0, "[]")) &&
             json_array_size(json_object_get(d, "services")) == (redirect ? 2u : 3u);
    json_decref(d);
    return ok;
}

/* prismlb.io/port-protocols "80:http,443:https" with an uploaded
 * certificate and hccm's redirect on ports 80, 443 and 22: the hcloud CLI
 * shows 443 https with the certificate and redirect_http, 22 tcp and no
 * service on 80 (the redirect holds it); steady on GETs alone. The
 * redirect removed: 443 stops redirecting and 80 appears as an http
 * service, steady again; 22 listed as http later: one update_service. */
START_TEST(port_protocols_put_http_on_80_and_https_on_443_with_the_redirect)
{
    struct env e;
    env_start(&e, NULL, NULL, NULL, 1);
    env_node(&e, "n1", "10.0.1.41");
    long cert = hccm_upload_certificate(&e, "shop-tls");
    char *uid = apply_three_ports(&e, 22,
                                  "    " PORT_PROTOCOLS ": \"80:http,443:https\"\n"
                                  "    load-balancer.hetzner.cloud/http-certificates: shop-tls\n"
                                  "    load-balancer.hetzner.cloud/http-redirect-http: \"true\"\n");
    WAIT_FOR(&e, cli_layout_is(&e, uid, cert, 1, "tcp"), 30000,
             "443 https with the certificate and the redirect, 22 tcp, nothing on 80");
    steady(&e, env_last_request(&e), "the redirect from 80 in place");

    long updates = env_count_route(&e, UPDATE_SERVICE);
    long adds = env_count_route(&e, "POST /v1/load_balancers/{id}/actions/add_service");
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/http-redirect-http-");
    WAIT_FOR(&e, cli_layout_is(&e, uid, cert, 0, "tcp"), 30000,
             "80 a plain http service, 443 https without the redirect");
    ck_assert_int_eq(env_count_route(&e, UPDATE_SERVICE), updates + 1);
    ck_assert_int_eq(env_count_route(&e, "POST /v1/load_balancers/{id}/actions/add_service"),
                     adds + 1);
    steady(&e, env_last_request(&e), "80 as http without the redirect");

    hccm_annotate(&e, "web", PORT_PROTOCOLS "=80:http,443:https,22:http");
    WAIT_FOR(&e, cli_layout_is(&e, uid, cert, 0, "http"), 30000, "22 as http");
    ck_assert_int_eq(env_count_route(&e, UPDATE_SERVICE), updates + 2);
    steady(&e, env_last_request(&e), "22 as http");
    free(uid);
    env_stop(&e);
}
END_TEST

/* A list naming a port the Service lacks, and the redirect with port 80
 * as https, are each an InvalidAnnotation naming the annotations, and the
 * balancer keeps what the last good set made. */
START_TEST(a_bad_port_protocol_list_is_named_and_changes_nothing)
{
    struct env e;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = apply_three_ports(&e, 22, "    " PORT_PROTOCOLS ": \"80:http\"\n");
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "the balancer");
    long writes = env_last_request(&e);
    hccm_annotate(&e, "web", PORT_PROTOCOLS "=80:http,8443:tcp");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation", PORT_PROTOCOLS, "port 8443", NULL) >
                 0,
             30000, "the InvalidAnnotation warning naming the port");
    /* in one write: a part of them could make a good set, which would be sent */
    char *out = NULL;
    int rc = env_kubectl(&e, &out, "annotate", "--overwrite", "service", "web", "-n", "default",
                         PORT_PROTOCOLS "=80:https,443:https",
                         "load-balancer.hetzner.cloud/http-certificates=7",
                         "load-balancer.hetzner.cloud/http-redirect-http=true", NULL);
    ck_assert_msg(rc == 0, "kubectl annotate: %s", out ? out : "");
    free(out);
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation",
                               "load-balancer.hetzner.cloud/http-redirect-http and " PORT_PROTOCOLS
                               ": port 80 is https",
                               NULL) > 0,
             30000, "the InvalidAnnotation warning naming both");
    hccm_only_reads_since(&e, writes, "bad port protocols");
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_str_eq(json_string_value(json_object_get(hccm_service_on(lb, 80), "protocol")),
                     "http");
    ck_assert_str_eq(json_string_value(json_object_get(hccm_service_on(lb, 443), "protocol")),
                     "tcp");
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb prismlb's own annotations");
    TCase *tc = tcase_create("own");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, delete_protection_is_set_and_cleared_from_the_service);
    tcase_add_test(tc, a_bad_delete_protection_is_named_and_changes_nothing);
    tcase_add_test(tc, the_proxy_protocol_goes_to_the_listed_ports_only);
    tcase_add_test(tc, the_per_port_list_beside_uses_proxyprotocol_names_both);
    tcase_add_test(tc, port_protocols_put_http_on_80_and_https_on_443_with_the_redirect);
    tcase_add_test(tc, a_bad_port_protocol_list_is_named_and_changes_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
