/*
 * What one Hetzner API answer means (modules/mod_hetzner_lb/hz_answer.c):
 * the verdict is a function of the transport outcome, status and body and
 * of what the call is. Bodies are the shapes of the Hetzner Cloud API
 * ({"error":{"code","message"}}, {"action":{...}}).
 */
#include <errno.h>

#include "common.h"
#include "hz_api.h"
#include "testutil.h"

static struct hz_verdict
classify(int status, const char *body, int is_write, int retries, int locked_tries)
{
    struct hz_answer in = {.transport_ok = 1,
                           .status = status,
                           .is_write = is_write,
                           .retries = retries,
                           .locked_tries = locked_tries};
    struct hz_verdict v;
    static json_t *keep;
    json_decref(keep); /* the verdict borrows from the body of the last call */
    keep = in.body = body ? parse_json(body) : NULL;
    hz_answer_classify(&in, &v);
    return v;
}

#define ERR(code) "{\"error\":{\"code\":\"" code "\",\"message\":\"m-" code "\",\"details\":{}}}"

START_TEST(server_errors_and_conflict_are_retried_three_times_with_a_growing_delay)
{
    struct hz_verdict v;
    for (int r = 0; r < 3; r++) {
        v = classify(503, ERR("unavailable"), 1, r, 0);
        ck_assert_int_eq(v.kind, HZ_V_RETRY);
        ck_assert_int_eq(v.delay_ms, 2000LL << r);
        v = classify(409, ERR("conflict"), 0, r, 0);
        ck_assert_int_eq(v.kind, HZ_V_RETRY);
    }
    v = classify(500, ERR("server_error"), 1, 3, 0);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
    ck_assert_int_eq(v.err, 0);
    ck_assert_str_eq(v.code, "server_error");
    ck_assert_str_eq(v.message, "m-server_error");
    /* a uniqueness_error is a 409 too, but final */
    v = classify(409, ERR("uniqueness_error"), 1, 0, 0);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
    ck_assert_str_eq(v.code, "uniqueness_error");
}
END_TEST

START_TEST(locked_is_retried_after_1_2_4_8_then_10_seconds_up_to_60_times)
{
    static const int64_t want[] = {1000, 2000, 4000, 8000, 10000, 10000};
    struct hz_verdict v;
    for (int t = 0; t < 6; t++) {
        v = classify(423, ERR("locked"), 1, 0, t);
        ck_assert_int_eq(v.kind, HZ_V_LOCKED);
        ck_assert_int_eq(v.delay_ms, want[t]);
        ck_assert(v.locked);
    }
    v = classify(423, ERR("locked"), 1, 0, HZ_MAX_LOCKED_TRIES);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
    ck_assert(v.locked);
    ck_assert_str_eq(v.code, "locked");
    /* protected is a 423 that no wait changes */
    v = classify(423, ERR("protected"), 1, 0, 0);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
    ck_assert(!v.locked);
    ck_assert_str_eq(v.code, "protected");
}
END_TEST

START_TEST(a_429_rate_limits_every_call_even_a_poll)
{
    struct hz_answer in = {.transport_ok = 1, .status = 429, .is_poll = 1};
    struct hz_verdict v;
    hz_answer_classify(&in, &v);
    ck_assert_int_eq(v.kind, HZ_V_RATE_LIMITED);
    v = classify(429, ERR("rate_limit_exceeded"), 1, 3, 0);
    ck_assert_int_eq(v.kind, HZ_V_RATE_LIMITED);
}
END_TEST

START_TEST(a_transport_error_retries_a_read_but_fails_a_write_and_a_poll)
{
    struct hz_answer in = {.transport_ok = 0, .transport_error = "Timeout was reached"};
    struct hz_verdict v;
    hz_answer_classify(&in, &v);
    ck_assert_int_eq(v.kind, HZ_V_RETRY);
    ck_assert_int_eq(v.delay_ms, 2000);
    in.retries = 3;
    hz_answer_classify(&in, &v);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
    ck_assert_int_eq(v.err, -EIO);
    ck_assert_str_eq(v.message, "Timeout was reached");
    in.retries = 0;
    in.is_write = 1; /* it may have reached Hetzner */
    hz_answer_classify(&in, &v);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
    in.is_write = 0;
    in.is_poll = 1;
    hz_answer_classify(&in, &v);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
}
END_TEST

START_TEST(a_poll_hands_every_other_answer_to_the_poller)
{
    json_t *b = parse_json(ERR("server_error"));
    struct hz_answer in = {.transport_ok = 1, .status = 500, .body = b, .is_poll = 1};
    struct hz_verdict v;
    hz_answer_classify(&in, &v);
    ck_assert_int_eq(v.kind, HZ_V_DONE);
    json_decref(b);
}
END_TEST

START_TEST(a_refusal_fails_with_hetzners_code_and_message)
{
    struct hz_verdict v = classify(422, ERR("cloud_resource_ip_not_allowed"), 1, 0, 0);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
    ck_assert_int_eq(v.err, 0);
    ck_assert_str_eq(v.code, "cloud_resource_ip_not_allowed");
    ck_assert_str_eq(v.message, "m-cloud_resource_ip_not_allowed");
    v = classify(404, NULL, 0, 0, 0);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
    ck_assert_ptr_null(v.code);
}
END_TEST

START_TEST(a_malformed_success_is_an_error_never_a_success)
{
    struct hz_answer in = {.transport_ok = 1, .status = 200, .body_invalid = 1};
    struct hz_verdict v;
    hz_answer_classify(&in, &v);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
    ck_assert_int_eq(v.err, -EIO);
    ck_assert_str_eq(v.message, "the answer is not JSON");
    in.is_list = 1;
    hz_answer_classify(&in, &v);
    ck_assert_int_eq(v.kind, HZ_V_FAILED);
    /* a 204 has no body: done */
    v = classify(204, NULL, 1, 0, 0);
    ck_assert_int_eq(v.kind, HZ_V_DONE);
    ck_assert(!v.action_failed);
}
END_TEST

START_TEST(a_list_answer_is_a_page)
{
    json_t *b = parse_json("{\"load_balancers\":[],\"meta\":{\"pagination\":{\"page\":1}}}");
    struct hz_answer in = {.transport_ok = 1, .status = 200, .body = b, .is_list = 1};
    struct hz_verdict v;
    hz_answer_classify(&in, &v);
    ck_assert_int_eq(v.kind, HZ_V_PAGE);
    json_decref(b);
}
END_TEST

START_TEST(a_running_action_is_waited_for_an_ended_one_is_done)
{
    struct hz_verdict v = classify(
        201, "{\"action\":{\"id\":77,\"command\":\"add_target\",\"status\":\"running\"}}", 1, 0, 0);
    ck_assert_int_eq(v.kind, HZ_V_ACTION);
    ck_assert_int_eq(v.action_id, 77);
    v = classify(201, "{\"action\":{\"id\":78,\"status\":\"success\"}}", 1, 0, 0);
    ck_assert_int_eq(v.kind, HZ_V_DONE);
    ck_assert(!v.action_failed);
    v = classify(201,
                 "{\"action\":{\"id\":79,\"status\":\"error\",\"error\":{\"code\":"
                 "\"target_not_in_vswitch\",\"message\":\"no\"}}}",
                 1, 0, 0);
    ck_assert_int_eq(v.kind, HZ_V_DONE);
    ck_assert(v.action_failed);
    ck_assert_int_eq(v.action_id, 79);
    ck_assert_str_eq(v.code, "target_not_in_vswitch");
    /* a running action without an id cannot be waited for: done */
    v = classify(201, "{\"action\":{\"status\":\"running\"}}", 1, 0, 0);
    ck_assert_int_eq(v.kind, HZ_V_DONE);
    /* a plain object answer */
    v = classify(200, "{\"load_balancer\":{\"id\":1}}", 0, 0, 0);
    ck_assert_int_eq(v.kind, HZ_V_DONE);
    ck_assert_ptr_null(v.code);
}
END_TEST

START_TEST(a_route_names_the_method_and_path_with_ids_as_id_and_no_query)
{
    char r[160];
    hz_route("POST", "/load_balancers/77/actions/add_target", r, sizeof(r));
    ck_assert_str_eq(r, "POST /load_balancers/{id}/actions/add_target");
    hz_route("GET", "/load_balancers?label_selector=robotlb/service-uid&per_page=50&page=2", r,
             sizeof(r));
    ck_assert_str_eq(r, "GET /load_balancers");
    hz_route("GET", "/actions?per_page=50&id=1&id=2", r, sizeof(r));
    ck_assert_str_eq(r, "GET /actions");
    hz_route("DELETE", "/load_balancers/12", r, sizeof(r));
    ck_assert_str_eq(r, "DELETE /load_balancers/{id}");
    hz_route("GET", "/load_balancers/12?x=1", r, sizeof(r));
    ck_assert_str_eq(r, "GET /load_balancers/{id}");
    /* a segment that only starts with a digit is a name, not an id */
    hz_route("GET", "/networks/7x", r, sizeof(r));
    ck_assert_str_eq(r, "GET /networks/7x");
    /* cut to fit */
    char small[12];
    hz_route("POST", "/load_balancers/1/actions/x", small, sizeof(small));
    ck_assert_str_eq(small, "POST /load_");
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("hetzner_lb answer");
    TCase *tc = tcase_create("classify");
    tcase_add_test(tc, server_errors_and_conflict_are_retried_three_times_with_a_growing_delay);
    tcase_add_test(tc, locked_is_retried_after_1_2_4_8_then_10_seconds_up_to_60_times);
    tcase_add_test(tc, a_429_rate_limits_every_call_even_a_poll);
    tcase_add_test(tc, a_transport_error_retries_a_read_but_fails_a_write_and_a_poll);
    tcase_add_test(tc, a_poll_hands_every_other_answer_to_the_poller);
    tcase_add_test(tc, a_refusal_fails_with_hetzners_code_and_message);
    tcase_add_test(tc, a_malformed_success_is_an_error_never_a_success);
    tcase_add_test(tc, a_list_answer_is_a_page);
    tcase_add_test(tc, a_running_action_is_waited_for_an_ended_one_is_done);
    tcase_add_test(tc, a_route_names_the_method_and_path_with_ids_as_id_and_no_query);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
