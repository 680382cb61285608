/*
 * hcloud-cloud-controller-manager's http and https services and HTTP
 * health checks, as a user drives them: kubectl applies the Service with
 * hccm's annotations, the hcloud CLI (against the fake Hetzner API) shows
 * the balancer's service as hccm would have configured it. Each case also
 * counts the fake's requests: once converged, a resync costs the list and
 * nothing else, and a changed annotation is one update_service (never a
 * delete and a new service).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "hccm_util.h"
#include "hzt.h"
#include "testutil.h"

#define P "    load-balancer.hetzner.cloud/"
/* A resync every second lists one page a second: the whole of the fake's
 * RateLimit-Limit 3600 an hour, so the share is set to 100 %. */
#define BUDGET_1S "resync_budget_percent = 100;"

#define LIST "GET /v1/load_balancers"
#define UPDATE "POST /v1/load_balancers/{id}/actions/update_service"
#define ADD "POST /v1/load_balancers/{id}/actions/add_service"
#define DELETE "POST /v1/load_balancers/{id}/actions/delete_service"
#define CERT_LOOKUP "GET /v1/certificates"
#define CERT_CREATE "POST /v1/certificates"
#define CERT_RETRY "POST /v1/certificates/{id}/actions/retry"

/* The balancer of Service default/name, as `hcloud load-balancer describe
 * NAME.default -o json` shows it (new). */
static json_t *
describe(struct env *e, const char *name)
{
    char lb[128];
    snprintf(lb, sizeof(lb), "%s.default", name);
    json_t *j = env_hcloud_json(e, "load-balancer", "describe", lb, NULL);
    ck_assert_ptr_nonnull(j);
    return j;
}

/* The service of the balancer j listening on port (borrowed); the test
 * fails when there is none. */
static json_t *
service_on(json_t *j, long port)
{
    json_t *s = hccm_service_on(j, port);
    if (!s)
        ck_abort_msg("no service on port %ld", port);
    return s;
}

/* Wait for the balancer of Service uid to target n1 and for Service web
 * to show its IP: it is served. */
static void
served(struct env *e, const char *uid)
{
    char ip[64];
    WAIT_FOR(e, env_targets_are(e, uid, "10.0.1.41"), 30000, "the balancer");
    WAIT_FOR(e, env_ingress(e, "web", ip, sizeof(ip), NULL, 0, NULL), 30000, "the status");
}

/* 1 once two resync lists came after *since with no other request among
 * or after them; else 0, with *since moved past any other request (a
 * leftover of converging, such as the last action poll). */
static int
two_quiet_lists(struct env *e, long *since)
{
    json_t *log = env_requests_since(e, *since);
    size_t i, lists = 0;
    json_t *r;
    json_array_foreach(log, i, r)
    {
        const char *m = json_string_value(json_object_get(r, "method"));
        const char *p = json_string_value(json_object_get(r, "path"));
        if (m && p && strcmp(m, "GET") == 0 && strncmp(p, "/v1/load_balancers", 18) == 0 &&
            (!p[18] || p[18] == '?')) {
            lists++;
            continue;
        }
        *since += (long)i + 1;
        json_decref(log);
        return 0;
    }
    json_decref(log);
    return lists >= 2;
}

/* The steady state costs the resync's list and nothing per Service: two
 * lists in a row with nothing else (a Service that wrote or read on every
 * resync would never get there). */
static void
steady(struct env *e)
{
    long since = env_last_request(e);
    WAIT_FOR(e, two_quiet_lists(e, &since), 30000, "two resync lists with nothing between");
}

/* "health-check-protocol, -port, -http-domain, -http-path,
 * http-status-codes": an HTTP health check with its domain, path and
 * status codes, on the nodePort; steady with the resync's list alone; a
 * changed path is one update_service; a path without its slash is an
 * InvalidAnnotation naming it, and nothing is written. */
START_TEST(an_http_health_check_with_domain_path_and_status_codes)
{
    struct env e;
    env_start(&e, NULL, NULL, BUDGET_1S, 1);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(
        &e, "web",
        P "health-check-protocol: http\n" P "health-check-http-domain: shop.example.net\n" P
          "health-check-http-path: /healthz\n" P "http-status-codes: \"200,3??\"\n");
    served(&e, uid);
    json_t *lb = describe(&e, "web");
    json_t *svc = service_on(lb, 80);
    json_t *hc = json_object_get(svc, "health_check");
    json_t *hh = json_object_get(hc, "http");
    ck_assert_str_eq(json_string_value(json_object_get(svc, "protocol")), "tcp");
    ck_assert_str_eq(json_string_value(json_object_get(hc, "protocol")), "http");
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "port")), 30080);
    ck_assert_str_eq(json_string_value(json_object_get(hh, "domain")), "shop.example.net");
    ck_assert_str_eq(json_string_value(json_object_get(hh, "path")), "/healthz");
    ck_assert_uint_eq(json_array_size(json_object_get(hh, "status_codes")), 2);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(hh, "status_codes"), 0)),
                     "200");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(hh, "status_codes"), 1)),
                     "3??");
    ck_assert(json_is_false(json_object_get(hh, "tls")));
    json_decref(lb);

    steady(&e);

    long updates = env_count_route(&e, UPDATE), adds = env_count_route(&e, ADD),
         deletes = env_count_route(&e, DELETE);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/health-check-http-path=/ready");
    WAIT_FOR(&e, env_count_route(&e, UPDATE) > updates, 30000, "the update_service");
    lb = describe(&e, "web");
    hh = json_object_get(json_object_get(service_on(lb, 80), "health_check"), "http");
    ck_assert_str_eq(json_string_value(json_object_get(hh, "path")), "/ready");
    ck_assert_str_eq(json_string_value(json_object_get(hh, "domain")), "shop.example.net");
    ck_assert_int_eq(env_count_route(&e, ADD), adds);
    ck_assert_int_eq(env_count_route(&e, DELETE), deletes);
    ck_assert_int_eq(env_count_route(&e, UPDATE), updates + 1);
    json_decref(lb);

    long writes = env_last_request(&e);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/health-check-http-path=ready");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation",
                               "load-balancer.hetzner.cloud/health-check-http-path", "\"ready\"",
                               NULL) > 0,
             30000, "the InvalidAnnotation warning");
    hccm_only_reads_since(&e, writes, "the bad path");
    steady(&e);
    free(uid);
    env_stop(&e);
}
END_TEST

/* "protocol: http with http-sticky-sessions, http-cookie-name,
 * http-cookie-lifetime, http-timeout-idle ... a change is an
 * update_service, no delete/re-add": a TCP Service turned into an http one
 * (its idle timeout shown by `hcloud load-balancer describe`), then its
 * cookie's lifetime changed, each by one update_service of the same
 * service. */
START_TEST(an_http_service_with_sticky_sessions_and_its_cookie)
{
    struct env e;
    env_start(&e, NULL, NULL, BUDGET_1S, 1);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web", NULL);
    served(&e, uid);
    json_t *lb = describe(&e, "web");
    ck_assert_str_eq(json_string_value(json_object_get(service_on(lb, 80), "protocol")), "tcp");
    json_decref(lb);
    steady(&e);

    long updates = env_count_route(&e, UPDATE), adds = env_count_route(&e, ADD),
         deletes = env_count_route(&e, DELETE);
    char *out = NULL;
    int rc = env_kubectl(&e, &out, "annotate", "--overwrite", "service", "web", "-n", "default",
                         "load-balancer.hetzner.cloud/protocol=http",
                         "load-balancer.hetzner.cloud/http-sticky-sessions=true",
                         "load-balancer.hetzner.cloud/http-cookie-name=SHOPID",
                         "load-balancer.hetzner.cloud/http-cookie-lifetime=1h",
                         "load-balancer.hetzner.cloud/http-timeout-idle=2m", NULL);
    ck_assert_msg(rc == 0, "kubectl annotate: %s", out ? out : "");
    free(out);
    WAIT_FOR(&e, env_count_route(&e, UPDATE) > updates, 30000, "the update_service");
    lb = describe(&e, "web");
    json_t *svc = service_on(lb, 80);
    json_t *http = json_object_get(svc, "http");
    ck_assert_str_eq(json_string_value(json_object_get(svc, "protocol")), "http");
    ck_assert_int_eq(json_integer_value(json_object_get(svc, "destination_port")), 30080);
    ck_assert(json_is_true(json_object_get(http, "sticky_sessions")));
    ck_assert_str_eq(json_string_value(json_object_get(http, "cookie_name")), "SHOPID");
    ck_assert_int_eq(json_integer_value(json_object_get(http, "cookie_lifetime")), 3600);
    ck_assert_int_eq(json_integer_value(json_object_get(http, "timeout_idle")), 120);
    /* the health check stays TCP on the nodePort: no health-check-protocol */
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(svc, "health_check"), "protocol")),
        "tcp");
    json_decref(lb);
    steady(&e);
    ck_assert_int_eq(env_count_route(&e, UPDATE), updates + 1);

    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/http-cookie-lifetime=10m");
    WAIT_FOR(&e, env_count_route(&e, UPDATE) > updates + 1, 30000, "the second update_service");
    lb = describe(&e, "web");
    http = json_object_get(service_on(lb, 80), "http");
    ck_assert_int_eq(json_integer_value(json_object_get(http, "cookie_lifetime")), 600);
    ck_assert_str_eq(json_string_value(json_object_get(http, "cookie_name")), "SHOPID");
    ck_assert_int_eq(json_integer_value(json_object_get(http, "timeout_idle")), 120);
    json_decref(lb);
    steady(&e);
    ck_assert_int_eq(env_count_route(&e, UPDATE), updates + 2);
    ck_assert_int_eq(env_count_route(&e, ADD), adds);
    ck_assert_int_eq(env_count_route(&e, DELETE), deletes);

    /* a cookie setting on a tcp service: named, nothing written */
    long writes = env_last_request(&e);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/protocol=tcp");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation",
                               "load-balancer.hetzner.cloud/http-cookie-name", "tcp", NULL) > 0,
             30000, "the InvalidAnnotation warning");
    hccm_only_reads_since(&e, writes, "http settings on a tcp service");
    free(uid);
    env_stop(&e);
}
END_TEST

/* "protocol: https with certificate-type: uploaded and http-certificates
 * by ID or name (names resolved with one GET /certificates?name= and
 * cached, so steady state makes no new request), http-redirect-http":
 * https on 443 with the certificate uploaded with the hcloud CLI, named,
 * and port 80 redirected. An unknown name is a CertificateNotFound warning
 * and the balancer keeps what it had (nothing written). */
START_TEST(https_with_an_uploaded_certificate_by_name_and_a_redirect_from_80)
{
    struct env e;
    env_start(&e, NULL, NULL, BUDGET_1S, 1);
    env_node(&e, "n1", "10.0.1.41");
    long cert = hccm_upload_certificate(&e, "shop-tls");
    /* the CLI's own lookups are not the daemon's */
    long lookups = env_count_route(&e, CERT_LOOKUP);
    char *uid = hccm_apply_service_port(&e, "web",
                                        P "protocol: https\n" P "certificate-type: uploaded\n" P
                                          "http-certificates: shop-tls\n" P
                                          "http-redirect-http: \"true\"\n",
                                        443, 30443);
    served(&e, uid);
    json_t *lb = describe(&e, "web");
    json_t *svc = service_on(lb, 443);
    json_t *http = json_object_get(svc, "http");
    ck_assert_str_eq(json_string_value(json_object_get(svc, "protocol")), "https");
    ck_assert_int_eq(json_integer_value(json_object_get(svc, "destination_port")), 30443);
    ck_assert(json_is_true(json_object_get(http, "redirect_http")));
    ck_assert_uint_eq(json_array_size(json_object_get(http, "certificates")), 1);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(http, "certificates"), 0)),
                     cert);
    ck_assert_uint_eq(json_array_size(json_object_get(lb, "services")), 1);
    json_decref(lb);
    ck_assert_int_eq(env_count_route(&e, CERT_LOOKUP), lookups + 1);
    steady(&e);
    ck_assert_int_eq(env_count_route(&e, CERT_LOOKUP), lookups + 1);
    /* the certificate knows its balancer */
    json_t *c = env_hcloud_json(&e, "certificate", "describe", "shop-tls", NULL);
    ck_assert_uint_eq(json_array_size(json_object_get(c, "used_by")), 1);
    json_decref(c);
    lookups = env_count_route(&e, CERT_LOOKUP);

    /* by its ID, the same certificate: nothing to write, nothing looked up */
    long since = env_last_request(&e);
    char kv[128];
    snprintf(kv, sizeof(kv), "load-balancer.hetzner.cloud/http-certificates=%ld", cert);
    hccm_annotate(&e, "web", kv);
    steady(&e);
    hccm_only_reads_since(&e, since, "the same certificate by its ID");
    ck_assert_int_eq(env_count_route(&e, CERT_LOOKUP), lookups);

    /* a name Hetzner does not have: warned, the balancer left as it is */
    since = env_last_request(&e);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/http-certificates=no-such-cert");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "CertificateNotFound", "no-such-cert",
                               "load-balancer.hetzner.cloud/http-certificates", NULL) > 0,
             30000, "the CertificateNotFound warning");
    hccm_only_reads_since(&e, since, "an unknown certificate name");
    lb = describe(&e, "web");
    http = json_object_get(service_on(lb, 443), "http");
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(http, "certificates"), 0)),
                     cert);
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

/* `hcloud certificate describe NAME -o json` (new), NULL when there is
 * no such certificate. */
static json_t *
certificate(struct env *e, const char *name)
{
    char *out = NULL;
    int rc = env_hcloud(e, &out, "certificate", "describe", name, "-o", "json", NULL);
    json_t *j = rc == 0 && out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    return j;
}

/* The first certificate of Service web's https service on port 443, as
 * the CLI shows it. */
static long
https_certificate(struct env *e)
{
    json_t *lb = describe(e, "web");
    json_t *http = json_object_get(service_on(lb, 443), "http");
    long id = (long)json_integer_value(json_array_get(json_object_get(http, "certificates"), 0));
    json_decref(lb);
    return id;
}

/* 1 while Hetzner has a certificate called name. */
static int
certificate_exists(struct env *e, const char *name)
{
    json_t *c = certificate(e, name);
    json_decref(c);
    return c != NULL;
}

/* A certificate deleted and uploaded again under the same name has a new
 * ID. Hetzner refuses deleting a certificate in use, so the Service first
 * switches to another name; shop-tls, deleted and uploaded again (a new
 * key), is then named again: the daemon still knows its old ID, Hetzner
 * refuses that one (not_found), the name is looked up again and the https
 * service ends with the new ID, without a restart. */
START_TEST(a_certificate_uploaded_again_under_its_name_is_found_again)
{
    struct env e;
    env_start(&e, NULL, NULL, BUDGET_1S "refused_recheck_interval = \"1s\";", 1);
    env_node(&e, "n1", "10.0.1.41");
    long old = hccm_upload_certificate(&e, "shop-tls");
    long other = hccm_upload_certificate(&e, "other-tls");
    char *uid = hccm_apply_service_port(&e, "web",
                                        P "protocol: https\n" P "certificate-type: uploaded\n" P
                                          "http-certificates: shop-tls\n",
                                        443, 30443);
    served(&e, uid);
    WAIT_FOR(&e, https_certificate(&e) == old, 30000, "shop-tls on the https service");
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/http-certificates=other-tls");
    WAIT_FOR(&e, https_certificate(&e) == other, 30000, "other-tls on the https service");

    char *out = NULL;
    ck_assert_int_eq(env_hcloud(&e, &out, "certificate", "delete", "shop-tls", NULL), 0);
    free(out);
    long again = hccm_upload_certificate(&e, "shop-tls");
    ck_assert_int_ne(again, old);
    long refused = env_count_route(&e, UPDATE);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/http-certificates=shop-tls");
    WAIT_FOR(&e, https_certificate(&e) == again, 30000, "the new shop-tls on the https service");
    /* the old ID was sent once and refused, then the new one */
    ck_assert_int_ge(env_count_route(&e, UPDATE), refused + 2);
    ck_assert_int_gt(env_kubectl_event(&e, "web", "BalancerUpdateRefused", "not_found", NULL), 0);
    json_t *c = certificate(&e, "shop-tls");
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(json_array_size(json_object_get(c, "used_by")), 1);
    json_decref(c);
    free(uid);
    env_stop(&e);
}
END_TEST

/* "Managed certificates: certificate-type: managed,
 * http-managed-certificate-name, http-managed-certificate-domains: created
 * through the API with its domains and labelled as ours, followed through
 * its issuance action ... deleted only when it carries our label and no
 * balancer of ours still uses it; uploaded certificates are never changed
 * or deleted": the managed certificate is made under hccm's default name,
 * issued and put on the https service; the steady state looks nothing up;
 * when the Service goes, the balancer and then the managed certificate go,
 * and an uploaded certificate of the project stays. */
START_TEST(a_managed_certificate_is_made_issued_used_and_deleted_with_its_service)
{
    struct env e;
    char name[128];
    env_start(&e, NULL, NULL, BUDGET_1S, 1);
    env_node(&e, "n1", "10.0.1.41");
    long uploaded = hccm_upload_certificate(&e, "other-tls");
    char *uid = hccm_apply_service_port(&e, "web",
                                        P "protocol: https\n" P "certificate-type: managed\n" P
                                          "http-managed-certificate-domains: shop.example.com\n",
                                        443, 30443);
    snprintf(name, sizeof(name), "ccm-managed-certificate-%s", uid);
    served(&e, uid);
    json_t *c = certificate(&e, name);
    ck_assert_ptr_nonnull(c);
    long id = (long)json_integer_value(json_object_get(c, "id"));
    ck_assert_str_eq(json_string_value(json_object_get(c, "type")), "managed");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "status"), "issuance")),
                     "completed");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(c, "domain_names"), 0)),
                     "shop.example.com");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(c, "labels"), "robotlb/service-uid")),
        uid);
    json_decref(c);
    ck_assert_int_eq(https_certificate(&e), id);
    ck_assert_int_eq(env_count_route(&e, CERT_CREATE), 2); /* the CLI's upload and ours */
    long lookups = env_count_route(&e, CERT_LOOKUP);
    steady(&e);
    ck_assert_int_eq(env_count_route(&e, CERT_LOOKUP), lookups);

    char *out = NULL;
    ck_assert_int_eq(env_kubectl(&e, &out, "delete", "service", "web", "-n", "default", NULL), 0);
    free(out);
    WAIT_FOR(&e, !certificate_exists(&e, name), 30000, "the managed certificate deleted");
    json_t *lbs = env_lbs_of(&e, uid);
    ck_assert_uint_eq(json_array_size(lbs), 0);
    json_decref(lbs);
    c = certificate(&e, "other-tls");
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "id")), uploaded);
    json_decref(c);
    free(uid);
    env_stop(&e);
}
END_TEST

/* "a failed issuance is a warning Event naming Hetzner's error, retried
 * (POST /certificates/{id}/actions/retry) on the refused-recheck cycle":
 * the fake fails the issuance for the domain (fail_issuance); the Service
 * gets CertificateIssuanceFailed with Hetzner's code; once the fault is
 * cleared, the next recheck retries it, it is issued, and the https
 * service takes it — one certificate made, never a second. */
START_TEST(a_failed_issuance_is_warned_about_then_retried_and_issued)
{
    struct env e;
    char ip[64], name[128];
    env_start(&e, NULL, NULL, BUDGET_1S "refused_recheck_interval = \"1s\";", 1);
    env_node(&e, "n1", "10.0.1.41");
    env_faults(&e, "{\"fail_issuance\":{\"domains\":[\"bad.example.com\"]}}");
    char *uid = hccm_apply_service_port(&e, "web",
                                        P "protocol: https\n" P "certificate-type: managed\n" P
                                          "http-managed-certificate-name: shop-managed\n" P
                                          "http-managed-certificate-domains: bad.example.com\n",
                                        443, 30443);
    snprintf(name, sizeof(name), "shop-managed");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "CertificateIssuanceFailed", "shop-managed",
                               "ca_dns_validation_failed", NULL) > 0,
             30000, "the CertificateIssuanceFailed warning naming Hetzner's error");
    json_t *c = certificate(&e, name);
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "status"), "issuance")),
                     "failed");
    json_decref(c);
    /* no balancer serves the Service without its certificate */
    ck_assert(!env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL));
    WAIT_FOR(&e, env_count_route(&e, CERT_RETRY) >= 1, 30000, "a retry on the recheck cycle");

    env_faults(&e, "{\"fail_issuance\":null}");
    served(&e, uid);
    c = certificate(&e, name);
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "status"), "issuance")),
                     "completed");
    long id = (long)json_integer_value(json_object_get(c, "id"));
    json_decref(c);
    ck_assert_int_eq(https_certificate(&e), id);
    ck_assert_int_eq(env_count_route(&e, CERT_CREATE), 1);
    free(uid);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb hccm http");
    TCase *tc = tcase_create("hccm_http");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, an_http_health_check_with_domain_path_and_status_codes);
    tcase_add_test(tc, an_http_service_with_sticky_sessions_and_its_cookie);
    tcase_add_test(tc, https_with_an_uploaded_certificate_by_name_and_a_redirect_from_80);
    tcase_add_test(tc, a_managed_certificate_is_made_issued_used_and_deleted_with_its_service);
    tcase_add_test(tc, a_certificate_uploaded_again_under_its_name_is_found_again);
    tcase_add_test(tc, a_failed_issuance_is_warned_about_then_retried_and_issued);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
