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
#include "testutil.h"

#define P "    load-balancer.hetzner.cloud/"
/* A resync every second lists one page a second: the whole of the fake's
 * RateLimit-Limit 3600 an hour, so the share is set to 100 %. */
#define BUDGET_1S "resync_budget_percent = 100;"

#define LIST "GET /v1/load_balancers"
#define UPDATE "POST /v1/load_balancers/{id}/actions/update_service"
#define ADD "POST /v1/load_balancers/{id}/actions/add_service"
#define DELETE "POST /v1/load_balancers/{id}/actions/delete_service"

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

/* The service of the balancer j listening on port (borrowed). */
static json_t *
service_on(json_t *j, long port)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(j, "services"), i, s)
    {
        if (json_integer_value(json_object_get(s, "listen_port")) == port)
            return s;
    }
    ck_abort_msg("no service on port %ld", port);
    return NULL;
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
    char ip[64];
    env_start(&e, NULL, NULL, BUDGET_1S, 1);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(
        &e, "web",
        P "health-check-protocol: http\n" P "health-check-http-domain: shop.example.net\n" P
          "health-check-http-path: /healthz\n" P "http-status-codes: \"200,3??\"\n");
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "the balancer");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL), 30000, "the status");
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
 * http-cookie-lifetime ... a change is an update_service, no
 * delete/re-add": a TCP Service turned into an http one, then its cookie's
 * lifetime changed, each by one update_service of the same service. */
START_TEST(an_http_service_with_sticky_sessions_and_its_cookie)
{
    struct env e;
    char ip[64];
    env_start(&e, NULL, NULL, BUDGET_1S, 1);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web", NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "the balancer");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL), 30000, "the status");
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
                         "load-balancer.hetzner.cloud/http-cookie-lifetime=1h", NULL);
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

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb hccm http");
    TCase *tc = tcase_create("hccm_http");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, an_http_health_check_with_domain_path_and_status_codes);
    tcase_add_test(tc, an_http_service_with_sticky_sessions_and_its_cookie);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
