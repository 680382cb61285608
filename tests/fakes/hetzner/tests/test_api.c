/* HTTP tests of the fake Hetzner API: every error code, pagination, label
 * selectors, rate limit headers, 429 and refill, locks, actions. */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "api_common.h"

static void
list_selector(const char *selector, const char *expect)
{
    char path[512], got[512];
    struct hzt_resp r;
    CURL *c = curl_easy_init();
    char *enc = curl_easy_escape(c, selector, 0);
    snprintf(path, sizeof(path), "/load_balancers?label_selector=%s", enc);
    curl_free(enc);
    curl_easy_cleanup(c);
    req("GET", path, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    names(&r, got, sizeof(got));
    ck_assert_msg(!strcmp(got, expect), "selector '%s': want [%s] got [%s]", selector, expect, got);
    hzt_resp_free(&r);
}

START_TEST(test_selectors_each_form)
{
    list_selector("robotlb/service-uid=uid-1", "lb-a");
    list_selector("robotlb/service-uid==uid-2", "lb-b");
    list_selector("env!=prod", "lb-b,lb-c,legacy-1,legacy-2");
    list_selector("robotlb/service-uid", "lb-a,lb-b");
    list_selector("!robotlb/service-uid", "lb-c,legacy-1,legacy-2");
    list_selector("env in (prod,staging)", "lb-a,lb-c");
    list_selector("env notin (prod,staging)", "lb-b,legacy-1,legacy-2");
    list_selector("env in (prod,dev),!tier", "lb-b");
    list_selector("env=prod,tier=web,robotlb/service-uid", "lb-a");
    expect_error("GET", "/load_balancers?label_selector=env%20in%20(a", NULL, 400, "invalid_input");
    expect_error("GET", "/load_balancers?label_selector=bad%20key=1", NULL, 400, "invalid_input");
    /* Networks take selectors too. */
    struct hzt_resp r;
    req("GET", "/networks?label_selector=env%3Ddev", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    json_t *nets = json_object_get(r.body, "networks");
    ck_assert_uint_eq(json_array_size(nets), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(nets, 0), "name")), "other");
    hzt_resp_free(&r);
}
END_TEST

static void
page(int n, const char *expect, json_t *prev, json_t *next)
{
    char path[128], got[256];
    struct hzt_resp r;
    snprintf(path, sizeof(path), "/load_balancers?per_page=2&page=%d&sort=id:asc", n);
    req("GET", path, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    names(&r, got, sizeof(got));
    ck_assert_msg(!strcmp(got, expect), "page %d: want [%s] got [%s]", n, expect, got);
    json_t *p = json_object_get(json_object_get(r.body, "meta"), "pagination");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "page")), n);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "per_page")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "last_page")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "total_entries")), 5);
    ck_assert(json_equal(json_object_get(p, "previous_page"), prev));
    ck_assert(json_equal(json_object_get(p, "next_page"), next));
    hzt_resp_free(&r);
    json_decref(prev);
    json_decref(next);
}

START_TEST(test_pagination_three_pages)
{
    page(1, "lb-a,lb-b", json_null(), json_integer(2));
    page(2, "lb-c,legacy-1", json_integer(1), json_integer(3));
    page(3, "legacy-2", json_integer(2), json_null());
    /* Sorting applies before paging. */
    struct hzt_resp r;
    char got[256];
    req("GET", "/load_balancers?per_page=2&page=1&sort=name:desc", NULL, &r);
    names(&r, got, sizeof(got));
    ck_assert_str_eq(got, "legacy-2,legacy-1");
    hzt_resp_free(&r);
    req("GET", "/load_balancers?name=lb-c", NULL, &r);
    names(&r, got, sizeof(got));
    ck_assert_str_eq(got, "lb-c");
    hzt_resp_free(&r);
    expect_error("GET", "/load_balancers?page=0", NULL, 400, "invalid_input");
    expect_error("GET", "/load_balancers?per_page=x", NULL, 400, "invalid_input");
    expect_error("GET", "/load_balancers?sort=size", NULL, 400, "invalid_input");
}
END_TEST

START_TEST(test_auth_and_rate_headers)
{
    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&F, "GET", "/load_balancers", NULL, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 401);
    ck_assert_str_eq(hzt_err(&r), "unauthorized");
    ck_assert_int_eq(r.rl_limit, 3600);
    hzt_resp_free(&r);
    ck_assert_int_eq(hzt_req(&F, "GET", "/load_balancers", "wrong", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 401);
    hzt_resp_free(&r);
    /* Defaults: 3600 per token, one back per second, so after the first
     * request the bucket is full again within a second. */
    long long t0 = (long long)time(NULL);
    req("GET", "/locations", NULL, &r);
    long long t1 = (long long)time(NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.rl_limit, 3600);
    ck_assert_int_eq(r.rl_remaining, 3599);
    ck_assert(r.rl_reset >= t0 && r.rl_reset <= t1 + 1);
    hzt_resp_free(&r);
    /* Errors carry the headers too; each token has its own bucket. */
    ck_assert_int_eq(hzt_req(&F, "GET", "/load_balancers/999", "tok-b", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 404);
    ck_assert_int_eq(r.rl_limit, 3600);
    ck_assert_int_eq(r.rl_remaining, 3599);
    hzt_resp_free(&r);

    /* With a slow refill (one per 100 s) every request shows: Remaining
     * goes down by one and Reset moves 100 s further out. */
    static const char *args[] = {"--rate-refill-per-s", "0.01", NULL};
    stop_fake();
    start_with(args);
    long prev = 3600;
    for (int i = 0; i < 4; i++) {
        t0 = (long long)time(NULL);
        req("GET", i % 2 ? "/locations" : "/load_balancers/999", NULL, &r);
        t1 = (long long)time(NULL);
        ck_assert(r.status == 200 || r.status == 404);
        ck_assert_int_eq(r.rl_limit, 3600);
        ck_assert_int_eq(r.rl_remaining, prev - 1);
        prev = r.rl_remaining;
        long long full = (3600 - r.rl_remaining) * 100;
        ck_assert_msg(r.rl_reset >= t0 + full - 10 && r.rl_reset <= t1 + full + 1,
                      "reset %lld, now %lld, expected about +%lld", r.rl_reset, t0, full);
        hzt_resp_free(&r);
    }
}
END_TEST

START_TEST(test_429_and_refill)
{
    /* Bucket of 3, one token back every 4 s. */
    static const char *args[] = {"--rate-bucket", "3", "--rate-refill-per-s", "0.25", NULL};
    struct hzt_resp r;
    stop_fake();
    start_with(args);
    for (int i = 0; i < 3; i++) {
        req("GET", "/load_balancers", NULL, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_int_eq(r.rl_limit, 3);
        ck_assert_int_eq(r.rl_remaining, 2 - i);
        hzt_resp_free(&r);
    }
    long long t0 = (long long)time(NULL);
    req("GET", "/load_balancers", NULL, &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_str_eq(hzt_err(&r), "rate_limit_exceeded");
    ck_assert_int_eq(r.rl_limit, 3);
    ck_assert_int_eq(r.rl_remaining, 0);
    /* More than two tokens missing at 4 s each: full in 9 to 12 s. */
    ck_assert_msg(r.rl_reset >= t0 + 8 && r.rl_reset <= (long long)time(NULL) + 13,
                  "reset %lld now %lld", r.rl_reset, t0);
    hzt_resp_free(&r);
    /* Refused requests take nothing: the bucket refills and one request
     * passes again within the 4 s a token takes. */
    long long start = tu_now_ms();
    for (;;) {
        req("GET", "/load_balancers", NULL, &r);
        long st = r.status;
        hzt_resp_free(&r);
        if (st == 200)
            break;
        ck_assert_int_eq(st, 429);
        ck_assert_msg(tu_now_ms() - start < 15000, "no recovery after 15 s");
        tu_sleep_ms(200);
    }
    /* Limited per token: another token is unaffected. */
    ck_assert_int_eq(hzt_req(&F, "GET", "/locations", "tok-b", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.rl_remaining, 2);
    hzt_resp_free(&r);
}
END_TEST

START_TEST(test_locked_during_action)
{
    static const char *args[] = {"--action-duration-ms", "4000", NULL};
    struct hzt_resp r;
    stop_fake();
    start_with(args);
    req("POST", "/load_balancers/1/actions/change_algorithm", "{\"type\":\"least_connections\"}",
        &r);
    ck_assert_int_eq(r.status, 201);
    long id = (long)json_integer_value(json_object_get(json_object_get(r.body, "action"), "id"));
    hzt_resp_free(&r);
    expect_error("POST", "/load_balancers/1/actions/change_algorithm", "{\"type\":\"round_robin\"}",
                 423, "locked");
    expect_error("DELETE", "/load_balancers/1", NULL, 423, "locked");
    /* Other balancers are not locked; reads still work. */
    req("POST", "/load_balancers/2/actions/change_algorithm", "{\"type\":\"round_robin\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hzt_resp_free(&r);
    req("GET", "/load_balancers/1", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    hzt_resp_free(&r);
    char st[32];
    ck_assert_int_eq(hzt_wait_action(&F, TOK, id, st, sizeof(st), 5000), 0);
    ck_assert_str_eq(st, "success");
    req("POST", "/load_balancers/1/actions/change_algorithm", "{\"type\":\"round_robin\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hzt_resp_free(&r);
}
END_TEST

START_TEST(test_create_and_resource_errors)
{
    struct hzt_resp r;
    req("POST", "/load_balancers",
        "{\"name\":\"web\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\","
        "\"labels\":{\"robotlb/service-uid\":\"u-9\"},\"network\":7,"
        "\"algorithm\":{\"type\":\"least_connections\"},"
        "\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.5\"}}],"
        "\"services\":[{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080}]}",
        &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.raw);
    json_t *lb = json_object_get(r.body, "load_balancer");
    json_t *act = json_object_get(r.body, "action");
    long id = (long)json_integer_value(json_object_get(lb, "id"));
    ck_assert_int_eq(id, 6);
    ck_assert_str_eq(json_string_value(json_object_get(act, "command")), "create_load_balancer");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(lb, "algorithm"), "type")),
                     "least_connections");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(lb, "private_net"), 0), "ip")),
                     "10.0.0.3");
    ck_assert(json_is_string(
        json_object_get(json_object_get(json_object_get(lb, "public_net"), "ipv4"), "ip")));
    ck_assert_int_eq(json_integer_value(
                         json_object_get(json_object_get(lb, "load_balancer_type"), "max_targets")),
                     25);
    hzt_resp_free(&r);
    char st[32];
    ck_assert_int_eq(hzt_wait_action(&F, TOK, 1, st, sizeof(st), 5000), 0);

    /* 400 invalid_input with details.fields. */
    req("POST", "/load_balancers", "{\"load_balancer_type\":\"lb11\",\"location\":\"hel1\"}", &r);
    ck_assert_int_eq(r.status, 400);
    ck_assert_str_eq(hzt_err(&r), "invalid_input");
    json_t *field = json_array_get(
        json_object_get(json_object_get(json_object_get(r.body, "error"), "details"), "fields"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(field, "name")), "name");
    hzt_resp_free(&r);
    expect_error("POST", "/load_balancers",
                 "{\"name\":\"x\",\"load_balancer_type\":\"lb99\",\"location\":\"hel1\"}", 400,
                 "invalid_input");
    expect_error("POST", "/load_balancers", "{\"name\":\"x\",\"load_balancer_type\":\"lb11\"}", 400,
                 "invalid_input");
    expect_error("POST", "/load_balancers",
                 "{\"name\":\"x\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\",\"labels\":"
                 "{\"a\":\"b c\"}}",
                 400, "invalid_input");
    expect_error("POST", "/load_balancers", "{not json", 400, "json_error");
    /* 409 uniqueness_error on create and rename. */
    expect_error("POST", "/load_balancers",
                 "{\"name\":\"web\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\"}", 409,
                 "uniqueness_error");
    expect_error("PUT", "/load_balancers/6", "{\"name\":\"lb-a\"}", 409, "uniqueness_error");
    expect_error("PUT", "/load_balancers/6", "{\"labels\":{\"-bad\":\"x\"}}", 400, "invalid_input");
    /* 404 */
    expect_error("GET", "/load_balancers/999", NULL, 404, "not_found");
    expect_error("POST", "/load_balancers/999/actions/add_target", "{}", 404, "not_found");
    expect_error("GET", "/no_such_thing", NULL, 404, "not_found");
    expect_error("GET", "/load_balancers/abc", NULL, 400, "invalid_input");
    /* 423 protected */
    expect_error("DELETE", "/load_balancers/5", NULL, 423, "protected");
    /* Targets and services of the action endpoints. */
    expect_error("POST", "/load_balancers/6/actions/add_target",
                 "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.5\"}}", 422, "target_already_defined");
    expect_error("POST", "/load_balancers/6/actions/add_target",
                 "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.0.50\"}}", 422,
                 "cloud_resource_ip_not_allowed");
    expect_error("POST", "/load_balancers/6/actions/add_target",
                 "{\"type\":\"ip\",\"ip\":{\"ip\":\"192.0.2.7\"}}", 422,
                 "cloud_resource_ip_not_allowed");
    expect_error("POST", "/load_balancers/1/actions/add_target",
                 "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.5\"}}", 422,
                 "load_balancer_not_attached_to_network");
    expect_error("POST", "/load_balancers/1/actions/detach_from_network", "{\"network\":7}", 422,
                 "load_balancer_not_attached_to_network");
    expect_error("POST", "/load_balancers/6/actions/add_service",
                 "{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30081}", 422,
                 "source_port_already_used");
    expect_error("POST", "/load_balancers/6/actions/attach_to_network", "{\"network\":7}", 422,
                 "load_balancer_already_attached");
    expect_error("POST", "/load_balancers/1/actions/attach_to_network",
                 "{\"network\":7,\"ip\":\"10.0.0.3\"}", 422, "ip_not_available");
    expect_error("POST", "/load_balancers/1/actions/attach_to_network",
                 "{\"network\":7,\"ip\":\"10.0.0.2\"}", 422, "ip_not_available");
    expect_error("POST", "/load_balancers/6/actions/add_target",
                 "{\"type\":\"server\",\"server\":{\"id\":1}}", 404, "not_found");
    expect_error("POST", "/load_balancers/6/actions/add_target", "{\"type\":\"pod\"}", 400,
                 "invalid_input");
    expect_error("POST", "/load_balancers/6/actions/no_such_action", "{}", 404, "not_found");
    expect_error("POST", "/load_balancers/6/actions/change_type",
                 "{\"load_balancer_type\":\"lb77\"}", 400, "invalid_input");

    /* resource_limit_exceeded: services over the type's max_services. */
    for (int p = 81; p <= 84; p++) {
        char body[128];
        snprintf(body, sizeof(body),
                 "{\"protocol\":\"tcp\",\"listen_port\":%d,\"destination_port\":%d}", p, 30000 + p);
        action_ok(6, "add_service", body, "success");
    }
    expect_error("POST", "/load_balancers/6/actions/add_service",
                 "{\"protocol\":\"tcp\",\"listen_port\":99,\"destination_port\":30099}", 403,
                 "resource_limit_exceeded");
    /* ... and targets over max_targets (lb11: 25, one is there). */
    for (int i = 1; i < 25; i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.%d\"}}", 100 + i);
        action_ok(6, "add_target", body, "success");
    }
    expect_error("POST", "/load_balancers/6/actions/add_target",
                 "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.250\"}}", 403,
                 "resource_limit_exceeded");
    /* change_type to a smaller type is refused while it would not fit. */
    action_ok(6, "change_type", "{\"load_balancer_type\":\"lb21\"}", "success");
    action_ok(6, "add_target", "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.250\"}}", "success");
    expect_error("POST", "/load_balancers/6/actions/change_type",
                 "{\"load_balancer_type\":\"lb11\"}", 422, "invalid_load_balancer_type");
}
END_TEST

START_TEST(test_project_limit)
{
    static const char *args[] = {"--max-load-balancers", "6", "--action-duration-ms", "10", NULL};
    struct hzt_resp r;
    stop_fake();
    start_with(args);
    req("POST", "/load_balancers",
        "{\"name\":\"sixth\",\"load_balancer_type\":1,\"network_zone\":\"eu-central\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hzt_resp_free(&r);
    expect_error("POST", "/load_balancers",
                 "{\"name\":\"seventh\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\"}",
                 403, "resource_limit_exceeded");
    req("DELETE", "/load_balancers/4", NULL, &r);
    ck_assert_int_eq(r.status, 204);
    hzt_resp_free(&r);
    req("POST", "/load_balancers",
        "{\"name\":\"seventh\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hzt_resp_free(&r);
}
END_TEST

START_TEST(test_actions_endpoints_and_failure_injection)
{
    struct hzt_resp r;
    action_ok(1, "attach_to_network", "{\"network\":7,\"ip\":\"10.0.0.10\"}", "success");
    long a =
        action_ok(1, "add_target", "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.7\"}}", "success");
    /* Next action fails with an injected code and changes nothing. */
    req("POST", "/_admin/faults",
        "{\"fail_actions\":{\"count\":1,\"code\":\"target_unreachable\",\"message\":\"nope\"}}",
        &r);
    ck_assert_int_eq(r.status, 200);
    hzt_resp_free(&r);
    long b = action_ok(1, "add_target", "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.8\"}}", "error");
    char path[128];
    snprintf(path, sizeof(path), "/actions?id=%ld&id=%ld", a, b);
    req("GET", path, NULL, &r);
    json_t *acts = json_object_get(r.body, "actions");
    ck_assert_uint_eq(json_array_size(acts), 2);
    json_t *fa = json_array_get(acts, 1);
    ck_assert_str_eq(json_string_value(json_object_get(fa, "status")), "error");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(fa, "error"), "code")),
                     "target_unreachable");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(fa, "error"), "message")),
                     "nope");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(acts, 0), "status")),
                     "success");
    hzt_resp_free(&r);
    req("GET", "/load_balancers/1", NULL, &r);
    ck_assert_uint_eq(
        json_array_size(json_object_get(json_object_get(r.body, "load_balancer"), "targets")), 1);
    hzt_resp_free(&r);
    snprintf(path, sizeof(path), "/load_balancers/actions/%ld", b);
    req("GET", path, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(r.body, "action"), "command")),
        "add_target");
    hzt_resp_free(&r);
    req("GET", "/load_balancers/1/actions", NULL, &r);
    ck_assert_uint_eq(json_array_size(json_object_get(r.body, "actions")), 3);
    hzt_resp_free(&r);
    expect_error("GET", "/actions/9999", NULL, 404, "not_found");
    /* The failure was for one action only. */
    action_ok(1, "add_target", "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.8\"}}", "success");
    /* remove_target, update and delete service. */
    action_ok(1, "remove_target", "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.8\"}}", "success");
    expect_error("POST", "/load_balancers/1/actions/remove_target",
                 "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.8\"}}", 404, "not_found");
    action_ok(1, "add_service",
              "{\"protocol\":\"tcp\",\"listen_port\":443,\"destination_port\":30443}", "success");
    action_ok(1, "update_service",
              "{\"listen_port\":443,\"destination_port\":30444,\"proxyprotocol\":true}", "success");
    req("GET", "/load_balancers/1", NULL, &r);
    json_t *svc =
        json_array_get(json_object_get(json_object_get(r.body, "load_balancer"), "services"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(svc, "destination_port")), 30444);
    ck_assert(json_is_true(json_object_get(svc, "proxyprotocol")));
    json_t *tgt =
        json_array_get(json_object_get(json_object_get(r.body, "load_balancer"), "targets"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(tgt, "health_status"), 0), "listen_port")),
                     443);
    hzt_resp_free(&r);
    action_ok(1, "delete_service", "{\"listen_port\":443}", "success");
    expect_error("POST", "/load_balancers/1/actions/update_service", "{\"listen_port\":443}", 404,
                 "not_found");
    action_ok(1, "change_protection", "{\"delete\":true}", "success");
    expect_error("DELETE", "/load_balancers/1", NULL, 423, "protected");
    action_ok(1, "change_protection", "{\"delete\":false}", "success");
    action_ok(1, "disable_public_interface", NULL, "success");
    expect_error("POST", "/load_balancers/1/actions/detach_from_network", "{\"network\":7}", 422,
                 "load_balancer_not_attached_to_network");
    action_ok(1, "enable_public_interface", NULL, "success");
    action_ok(1, "detach_from_network", "{\"network\":7}", "success");
    expect_error("POST", "/load_balancers/1/actions/disable_public_interface", NULL, 422,
                 "load_balancer_not_attached_to_network");
    req("GET", "/load_balancers/1", NULL, &r);
    const char *ip4 = json_string_value(json_object_get(
        json_object_get(json_object_get(json_object_get(r.body, "load_balancer"), "public_net"),
                        "ipv4"),
        "ip"));
    char body[256];
    snprintf(body, sizeof(body), "{\"ip\":\"%s\",\"dns_ptr\":\"lb.example.com\"}", ip4);
    hzt_resp_free(&r);
    action_ok(1, "change_dns_ptr", body, "success");
    req("GET", "/load_balancers/1", NULL, &r);
    ck_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(r.body, "load_balancer"), "public_net"),
                            "ipv4"),
            "dns_ptr")),
        "lb.example.com");
    hzt_resp_free(&r);
    req("DELETE", "/load_balancers/1", NULL, &r);
    ck_assert_int_eq(r.status, 204);
    ck_assert_ptr_null(r.body);
    hzt_resp_free(&r);
}
END_TEST

START_TEST(test_catalogue_and_malformed)
{
    struct hzt_resp r;
    req("GET", "/locations", NULL, &r);
    ck_assert_uint_eq(json_array_size(json_object_get(r.body, "locations")), 6);
    hzt_resp_free(&r);
    req("GET", "/locations?name=hel1", NULL, &r);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(r.body, "locations"), 0), "network_zone")),
                     "eu-central");
    hzt_resp_free(&r);
    req("GET", "/networks?name=k8s", NULL, &r);
    json_t *n = json_array_get(json_object_get(r.body, "networks"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(n, "id")), 7);
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_array_get(json_object_get(n, "subnets"), 1), "type")),
                     "vswitch");
    hzt_resp_free(&r);
    req("GET", "/networks/7", NULL, &r);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(r.body, "network"), "ip_range")),
        "10.0.0.0/16");
    hzt_resp_free(&r);
    expect_error("GET", "/networks/99", NULL, 404, "not_found");
    expect_error("PATCH", "/load_balancers/1", "{}", 405, "method_not_allowed");
    expect_error("POST", "/load_balancers/1/actions/add_target", "[1,2]", 400, "json_error");
    expect_error("POST", "/load_balancers/1/actions/add_target", "\"x\"", 400, "json_error");
    expect_error("POST", "/load_balancers/1/actions/add_service", "{\"protocol\":7}", 400,
                 "invalid_input");
    expect_error("POST", "/load_balancers/1/actions/change_algorithm", "{\"type\":\"random\"}", 400,
                 "invalid_input");
    expect_error("GET", "/load_balancers/1/actions/5/x/y/z/w/v", NULL, 404, "not_found");
    expect_error("GET", "/load_balancers?label_selector=%ZZ", NULL, 400, "invalid_input");
    /* SIGINT ends it cleanly too. */
    int st = tu_stop(&F.proc, SIGINT, 10000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGINT exit status %d", st);
}
END_TEST

START_TEST(test_malformed_bodies_get_api_errors)
{
    static const char *actions[] = {
        "add_target",
        "remove_target",
        "add_service",
        "update_service",
        "delete_service",
        "attach_to_network",
        "detach_from_network",
        "change_algorithm",
        "change_type",
        "enable_public_interface",
        "disable_public_interface",
        "change_protection",
        "change_dns_ptr",
    };
    static const char *bodies[] = {
        "{}",
        "null",
        "[]",
        "7",
        "{\"type\":1}",
        "{\"type\":\"ip\",\"ip\":\"x\"}",
        "{\"type\":\"ip\",\"ip\":{\"ip\":5}}",
        "{\"type\":\"label_selector\"}",
        "{\"type\":\"label_selector\",\"label_selector\":{\"selector\":\"a in (\"}}",
        "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.3\"},\"use_private_ip\":\"yes\"}",
        "{\"protocol\":\"http\",\"listen_port\":81,\"http\":{\"cookie_name\":5}}",
        "{\"protocol\":\"http\",\"listen_port\":82,\"http\":[1]}",
        "{\"protocol\":\"tcp\",\"listen_port\":83,\"destination_port\":1,"
        "\"health_check\":{\"protocol\":\"http\",\"http\":{\"status_codes\":\"2??\"}}}",
        "{\"protocol\":\"tcp\",\"listen_port\":\"80\",\"destination_port\":1}",
        "{\"protocol\":\"tcp\",\"listen_port\":70000,\"destination_port\":1}",
        "{\"listen_port\":\"80\"}",
        "{\"network\":\"7\"}",
        "{\"network\":-1}",
        "{\"network\":7,\"ip\":5}",
        "{\"network\":7,\"ip\":\"10.0.0.300\"}",
        "{\"load_balancer_type\":{}}",
        "{\"load_balancer_type\":null}",
        "{\"delete\":\"yes\"}",
        "{\"ip\":null}",
        "{\"ip\":\"1.2.3.4\",\"dns_ptr\":7}",
        "{\"type\":null}",
        "{\"type\":\"server\",\"server\":{\"id\":\"1\"}}",
    };
    struct hzt_resp r;
    for (size_t a = 0; a < sizeof(actions) / sizeof(actions[0]); a++) {
        char path[128];
        snprintf(path, sizeof(path), "/load_balancers/3/actions/%s", actions[a]);
        for (size_t b = 0; b < sizeof(bodies) / sizeof(bodies[0]); b++) {
            req("POST", path, bodies[b], &r);
            /* Either a proper API error, or an accepted action that must
             * then finish before the next request. */
            ck_assert_msg((r.status >= 400 && r.status < 500 && *hzt_err(&r)) || r.status == 201,
                          "%s %s -> %ld %s", path, bodies[b], r.status, r.raw);
            if (r.status == 201) {
                char st[32];
                long id = (long)json_integer_value(
                    json_object_get(json_object_get(r.body, "action"), "id"));
                ck_assert_int_eq(hzt_wait_action(&F, TOK, id, st, sizeof(st), 5000), 0);
            }
            hzt_resp_free(&r);
        }
    }
    static const char *creates[] = {
        "{\"name\":5}",
        "{\"name\":\"x\",\"load_balancer_type\":\"lb11\",\"location\":7}",
        "{\"name\":\"x\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\",\"targets\":{}}",
        "{\"name\":\"x\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\",\"services\":[1]}",
        "{\"name\":\"x\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\",\"algorithm\":5}",
        "{\"name\":\"x\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\",\"network\":99}",
        "{\"name\":\"x\",\"load_balancer_type\":\"lb11\",\"network_zone\":\"moon\"}",
        "{\"name\":\"x\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\",\"public_"
        "interface\":false}",
        "{\"name\":\"x y\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\"}",
    };
    for (size_t b = 0; b < sizeof(creates) / sizeof(creates[0]); b++) {
        req("POST", "/load_balancers", creates[b], &r);
        ck_assert_msg(r.status >= 400 && r.status < 500 && *hzt_err(&r), "create %s -> %ld %s",
                      creates[b], r.status, r.raw);
        hzt_resp_free(&r);
    }
    /* Still serving, and the balancer still renders as valid JSON. */
    req("GET", "/load_balancers/3", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(r.body);
    hzt_resp_free(&r);
}
END_TEST

int
main(int argc, char **argv)
{
    const TTest *const tests[] = {
        test_selectors_each_form,     test_pagination_three_pages,
        test_auth_and_rate_headers,   test_429_and_refill,
        test_locked_during_action,    test_create_and_resource_errors,
        test_project_limit,           test_actions_endpoints_and_failure_injection,
        test_catalogue_and_malformed, test_malformed_bodies_get_api_errors,
    };
    return api_run(argc, argv, "hetzner-api", tests, sizeof(tests) / sizeof(tests[0]));
}
