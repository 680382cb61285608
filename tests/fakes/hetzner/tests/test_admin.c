/* HTTP tests of the fake's test interface: fault injection, request log,
 * concurrent-writer detector, reset, state, and the command line. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "api_common.h"

START_TEST(test_injected_5xx_conflict_latency_refuse)
{
    struct hzt_resp r;
    static const struct {
        int status;
        const char *code;
    } cases[] = {
        {500, "server_error"},
        {503, "unavailable"},
        {504, "timeout"},
        {409, "conflict"},
    };
    for (size_t i = 0; i < 4; i++) {
        char body[160];
        snprintf(body, sizeof(body),
                 "{\"fail_requests\":{\"count\":2,\"status\":%d,\"code\":\"%s\"}}", cases[i].status,
                 cases[i].code);
        req("POST", "/_admin/faults", body, &r);
        ck_assert_int_eq(r.status, 200);
        hzt_resp_free(&r);
        expect_error("GET", "/load_balancers", NULL, cases[i].status, cases[i].code);
        expect_error("GET", "/locations", NULL, cases[i].status, cases[i].code);
        req("GET", "/load_balancers", NULL, &r);
        ck_assert_int_eq(r.status, 200);
        hzt_resp_free(&r);
    }
    /* Default codes follow the status. */
    req("POST", "/_admin/faults", "{\"fail_requests\":{\"count\":1,\"status\":503}}", &r);
    hzt_resp_free(&r);
    expect_error("GET", "/load_balancers", NULL, 503, "unavailable");
    /* Latency. */
    req("POST", "/_admin/faults", "{\"latency_ms\":300}", &r);
    hzt_resp_free(&r);
    long long t0 = tu_now_ms();
    req("GET", "/load_balancer_types?name=lb21", NULL, &r);
    ck_assert(tu_now_ms() - t0 >= 280);
    ck_assert_int_eq(r.status, 200);
    json_t *types = json_object_get(r.body, "load_balancer_types");
    ck_assert_uint_eq(json_array_size(types), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(types, 0), "max_targets")),
                     75);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(types, 0), "max_services")),
                     15);
    hzt_resp_free(&r);
    /* Refuse one IP as a target. */
    req("POST", "/_admin/faults",
        "{\"latency_ms\":0,\"refuse_ip\":{\"ip\":\"10.0.1.66\",\"code\":\"ip_not_owned\"}}", &r);
    hzt_resp_free(&r);
    action_ok(2, "attach_to_network", "{\"network\":7}", "success");
    expect_error("POST", "/load_balancers/2/actions/add_target",
                 "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.66\"}}", 422, "ip_not_owned");
    action_ok(2, "add_target", "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.67\"}}", "success");
    req("DELETE", "/_admin/faults", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    hzt_resp_free(&r);
    action_ok(2, "add_target", "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.66\"}}", "success");
    expect_error("POST", "/_admin/faults", "{\"refuse_ip\":\"not an ip\"}", 400, "invalid_input");
}
END_TEST

START_TEST(test_admin_log_counts_writers)
{
    /* A wide window so that a slow machine cannot separate the writes. */
    static const char *args[] = {"--overlap-window-ms", "60000", NULL};
    stop_fake();
    start_with(args);
    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&F, "GET", "/load_balancers/2", TOK, "robotlb/a", NULL, &r), 0);
    hzt_resp_free(&r);
    ck_assert_int_eq(
        hzt_req(&F, "PUT", "/load_balancers/2", TOK, "robotlb/a", "{\"labels\":{\"x\":\"1\"}}", &r),
        0);
    ck_assert_int_eq(r.status, 200);
    hzt_resp_free(&r);
    ck_assert_int_eq(hzt_req(&F, "PUT", "/load_balancers/2", "tok-b", "robotlb/b",
                             "{\"labels\":{\"x\":\"2\"}}", &r),
                     0);
    hzt_resp_free(&r);
    /* Same identity twice, or different balancers, is not an overlap. */
    ck_assert_int_eq(
        hzt_req(&F, "PUT", "/load_balancers/3", TOK, "robotlb/a", "{\"labels\":{}}", &r), 0);
    hzt_resp_free(&r);
    ck_assert_int_eq(
        hzt_req(&F, "PUT", "/load_balancers/3", TOK, "robotlb/a", "{\"labels\":{}}", &r), 0);
    hzt_resp_free(&r);
    req("GET", "/_admin/writers", NULL, &r);
    json_t *ov = json_object_get(r.body, "overlaps");
    ck_assert_uint_eq(json_array_size(ov), 1);
    json_t *o = json_array_get(ov, 0);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "load_balancer")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "first"), "identity")),
                     "robotlb/a");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "second"), "identity")),
                     "robotlb/b");
    hzt_resp_free(&r);
    req("GET", "/_admin/requests", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    json_t *reqs = json_object_get(r.body, "requests");
    ck_assert_uint_eq(json_array_size(reqs), 5);
    json_t *e0 = json_array_get(reqs, 0);
    ck_assert_str_eq(json_string_value(json_object_get(e0, "method")), "GET");
    ck_assert_str_eq(json_string_value(json_object_get(e0, "path")), "/v1/load_balancers/2");
    ck_assert_int_eq(json_integer_value(json_object_get(e0, "status")), 200);
    ck_assert_str_eq(json_string_value(json_object_get(e0, "identity")), "robotlb/a");
    json_t *counts = json_object_get(r.body, "counts");
    ck_assert_int_eq(json_integer_value(json_object_get(counts, "PUT /v1/load_balancers/{id}")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(counts, "GET /v1/load_balancers/{id}")), 1);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(r.body, "by_identity"), "robotlb/b")),
        1);
    hzt_resp_free(&r);
    req("GET", "/_admin/state", NULL, &r);
    ck_assert_uint_eq(json_array_size(json_object_get(r.body, "load_balancers")), 5);
    ck_assert_uint_eq(json_array_size(json_object_get(r.body, "networks")), 2);
    hzt_resp_free(&r);
    req("POST", "/_admin/reset", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    hzt_resp_free(&r);
    req("GET", "/_admin/requests", NULL, &r);
    ck_assert_uint_eq(json_array_size(json_object_get(r.body, "requests")), 0);
    ck_assert_uint_eq(json_object_size(json_object_get(r.body, "counts")), 0);
    hzt_resp_free(&r);
    req("GET", "/_admin/writers", NULL, &r);
    ck_assert_uint_eq(json_array_size(json_object_get(r.body, "overlaps")), 0);
    hzt_resp_free(&r);
    expect_error("GET", "/_admin/nothing", NULL, 404, "not_found");
}
END_TEST

/* held_actions of GET /_admin/faults. */
static long
held(void)
{
    struct hzt_resp r;
    req("GET", "/_admin/faults", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    long n = (long)json_integer_value(json_object_get(r.body, "held_actions"));
    hzt_resp_free(&r);
    return n;
}

/* "hold_actions" keeps every new action running (and its balancer locked)
 * until released; released, each ends as it would have. The fake runs
 * 0 ms actions here, so an action not held has ended before the next
 * request is read. */
START_TEST(test_hold_actions_until_released)
{
    static const char *args[] = {"--action-duration-ms", "0", NULL};
    stop_fake();
    start_with(args);
    struct hzt_resp r;
    char st[32];
    /* not held: ends at once */
    action_ok(2, "attach_to_network", "{\"network\":7}", "success");
    req("POST", "/_admin/faults", "{\"hold_actions\":true}", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(json_is_true(json_object_get(r.body, "hold_actions")));
    hzt_resp_free(&r);
    req("POST", "/load_balancers/2/actions/add_target",
        "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.40\"}}", &r);
    ck_assert_int_eq(r.status, 201);
    long id = (long)json_integer_value(json_object_get(json_object_get(r.body, "action"), "id"));
    hzt_resp_free(&r);
    req("POST", "/load_balancers",
        "{\"name\":\"held\",\"load_balancer_type\":\"lb11\",\"location\":\"fsn1\"}", &r);
    ck_assert_int_eq(r.status, 201);
    long lb =
        (long)json_integer_value(json_object_get(json_object_get(r.body, "load_balancer"), "id"));
    long cid = (long)json_integer_value(json_object_get(json_object_get(r.body, "action"), "id"));
    hzt_resp_free(&r);
    ck_assert_int_eq(held(), 2);
    /* still running, the balancers still locked, after other requests */
    for (int i = 0; i < 3; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/actions/%ld", i % 2 ? cid : id);
        req("GET", path, NULL, &r);
        ck_assert_str_eq(
            json_string_value(json_object_get(json_object_get(r.body, "action"), "status")),
            "running");
        hzt_resp_free(&r);
    }
    expect_error("POST", "/load_balancers/2/actions/add_target",
                 "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.41\"}}", 423, "locked");
    char lpath[64];
    snprintf(lpath, sizeof(lpath), "/load_balancers/%ld", lb);
    expect_error("DELETE", lpath, NULL, 423, "locked");
    req("GET", "/_admin/state", NULL, &r);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(r.body, "faults"), "held_actions")), 2);
    hzt_resp_free(&r);
    /* a bad value changes nothing */
    expect_error("POST", "/_admin/faults", "{\"hold_actions\":1}", 400, "invalid_input");
    ck_assert_int_eq(held(), 2);
    /* released: both end, and the lock goes with them */
    req("POST", "/_admin/faults", "{\"hold_actions\":false}", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(json_is_false(json_object_get(r.body, "hold_actions")));
    hzt_resp_free(&r);
    ck_assert_int_eq(hzt_wait_action(&F, TOK, id, st, sizeof(st), 5000), 0);
    ck_assert_str_eq(st, "success");
    ck_assert_int_eq(hzt_wait_action(&F, TOK, cid, st, sizeof(st), 5000), 0);
    ck_assert_str_eq(st, "success");
    ck_assert_int_eq(held(), 0);
    action_ok(2, "add_target", "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.41\"}}", "success");
    /* DELETE /_admin/faults releases too */
    req("POST", "/_admin/faults", "{\"hold_actions\":true}", &r);
    hzt_resp_free(&r);
    req("POST", "/load_balancers/2/actions/add_target",
        "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.42\"}}", &r);
    ck_assert_int_eq(r.status, 201);
    id = (long)json_integer_value(json_object_get(json_object_get(r.body, "action"), "id"));
    hzt_resp_free(&r);
    ck_assert_int_eq(held(), 1);
    req("DELETE", "/_admin/faults", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    hzt_resp_free(&r);
    ck_assert_int_eq(hzt_wait_action(&F, TOK, id, st, sizeof(st), 5000), 0);
    ck_assert_str_eq(st, "success");
    /* held at shutdown: freed cleanly (stop_fake checks exit 0, LSan) */
    req("POST", "/_admin/faults", "{\"hold_actions\":true}", &r);
    hzt_resp_free(&r);
    req("POST", "/load_balancers/2/actions/add_target",
        "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.43\"}}", &r);
    ck_assert_int_eq(r.status, 201);
    hzt_resp_free(&r);
    ck_assert_int_eq(held(), 1);
}
END_TEST

START_TEST(test_command_line_errors)
{
    char *out = NULL;
    char path[512];
    snprintf(path, sizeof(path), "%s/bad-seed.json", F.dir);
    ck_assert_int_eq(tu_write_file(path, "{\"load_balancers\":[{\"name\":\"a\"}]}"), 0);
    ck_assert_int_eq(run_fake(&out, "--seed", path, NULL), 1);
    ck_assert_msg(strstr(out, "invalid_input") != NULL, "%s", out);
    free(out);
    ck_assert_int_eq(run_fake(&out, "--bogus", NULL, NULL), 2);
    ck_assert_ptr_nonnull(strstr(out, "usage"));
    free(out);
    ck_assert_int_eq(run_fake(&out, "--rate-bucket", "0", NULL), 2);
    free(out);
    ck_assert_int_eq(run_fake(&out, "--listen", "nonsense", NULL), 1);
    free(out);
    ck_assert_int_eq(run_fake(&out, "--help", NULL, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "--overlap-window-ms"));
    free(out);
}
END_TEST

/* 1 while pid runs: /proc entry present and not a zombie. */
static int
running(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    char *st = tu_read_file(path, NULL);
    if (!st)
        return 0;
    const char *rp = strrchr(st, ')');
    int alive = rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
    free(st);
    return alive;
}

START_TEST(test_exits_with_parent_unless_detached)
{
    char script[4096], path[600];
    const char *exe = tu_build_path("tests/fakes/hetzner/prismlb-fake-hcloud");
    /* A shell starts two fakes, waits until both listen, and exits. */
    snprintf(script, sizeof(script),
             "cd '%s' || exit 1;"
             " '%s' --listen 127.0.0.1:0 --port-file tied >/dev/null 2>&1 & echo $! > tied.pid;"
             " '%s' --detached --listen 127.0.0.1:0 --port-file free >/dev/null 2>&1 &"
             " echo $! > free.pid;"
             " n=0; while [ ! -s tied ] || [ ! -s free ]; do"
             " n=$((n + 1)); [ $n -gt 400 ] && exit 1; sleep 0.05; done",
             F.dir, exe, exe);
    char *argv[] = {"sh", "-c", script, NULL};
    char *out = NULL;
    int rc = tu_run(argv, NULL, &out, 30000);
    free(out);
    snprintf(path, sizeof(path), "%s/tied.pid", F.dir);
    char *t = tu_read_file(path, NULL);
    snprintf(path, sizeof(path), "%s/free.pid", F.dir);
    char *d = tu_read_file(path, NULL);
    pid_t tied = t ? (pid_t)atoi(t) : 0, detached = d ? (pid_t)atoi(d) : 0;
    free(t);
    free(d);
    if (rc != 0 && detached > 0)
        kill(detached, SIGTERM); /* the shell failed: stop what it started */
    ck_assert_int_eq(rc, 0);
    ck_assert(tied > 0 && detached > 0);
    long long deadline = tu_now_ms() + 10000;
    while (running(tied) && tu_now_ms() < deadline)
        tu_sleep_ms(20);
    int tied_gone = !running(tied);
    int detached_alive = running(detached);
    /* Stop the detached one by PID whatever the outcome. */
    if (detached_alive)
        kill(detached, SIGTERM);
    if (!tied_gone)
        kill(tied, SIGTERM);
    ck_assert_msg(tied_gone, "fake kept running after its parent exited");
    ck_assert_msg(detached_alive, "--detached fake exited with its parent");
    deadline = tu_now_ms() + 10000;
    while (running(detached) && tu_now_ms() < deadline)
        tu_sleep_ms(20);
    ck_assert(!running(detached));
}
END_TEST

int
main(int argc, char **argv)
{
    const TTest *const tests[] = {
        test_injected_5xx_conflict_latency_refuse, test_admin_log_counts_writers,
        test_hold_actions_until_released,          test_command_line_errors,
        test_exits_with_parent_unless_detached,
    };
    return api_run(argc, argv, "hetzner-admin", tests, sizeof(tests) / sizeof(tests[0]));
}
