/* Shared fixture and helpers of the HTTP test programs (api_common.h). */
#include "api_common.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

const char *API_SEED =
    "{\"tokens\":[\"tok-a\",\"tok-b\"],"
    "\"networks\":[{\"id\":7,\"name\":\"k8s\",\"ip_range\":\"10.0.0.0/16\","
    "\"subnets\":[{\"type\":\"cloud\",\"ip_range\":\"10.0.0.0/"
    "24\",\"network_zone\":\"eu-central\"},"
    "{\"type\":\"vswitch\",\"ip_range\":\"10.0.1.0/24\",\"network_zone\":\"eu-central\","
    "\"vswitch_id\":4242}],\"reserved_ips\":[\"10.0.0.2\"]},"
    "{\"id\":8,\"name\":\"other\",\"ip_range\":\"10.9.0.0/16\",\"labels\":{\"env\":\"dev\"},"
    "\"subnets\":[{\"type\":\"cloud\",\"ip_range\":\"10.9.0.0/24\"}]}],"
    "\"load_balancers\":["
    "{\"id\":1,\"name\":\"lb-a\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\","
    "\"labels\":{\"robotlb/service-uid\":\"uid-1\",\"env\":\"prod\",\"tier\":\"web\"}},"
    "{\"id\":2,\"name\":\"lb-b\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\","
    "\"labels\":{\"robotlb/service-uid\":\"uid-2\",\"env\":\"dev\"}},"
    "{\"id\":3,\"name\":\"lb-c\",\"load_balancer_type\":\"lb11\",\"location\":\"fsn1\","
    "\"labels\":{\"env\":\"staging\"}},"
    "{\"id\":4,\"name\":\"legacy-1\",\"load_balancer_type\":\"lb11\",\"location\":\"fsn1\"},"
    "{\"id\":5,\"name\":\"legacy-2\",\"load_balancer_type\":\"lb21\",\"location\":\"nbg1\","
    "\"protection\":{\"delete\":true}}]}";

struct hzt_fake F;

void
start_with(const char *const *args)
{
    ck_assert_msg(hzt_start(&F, API_SEED, args) == 0, "fake did not start (log %s)", F.log);
}

void
stop_fake(void)
{
    int st = hzt_stop(&F);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fake exit status %d", st);
}

void
setup(void)
{
    static const char *args[] = {"--action-duration-ms", "30", NULL};
    start_with(args);
}

/* Request that must succeed at the transport level. */
void
req(const char *method, const char *path, const char *body, struct hzt_resp *r)
{
    ck_assert_int_eq(hzt_req(&F, method, path, TOK, NULL, body, r), 0);
}

/* Expect an API error with status and code. */
void
expect_error(const char *method, const char *path, const char *body, long status, const char *code)
{
    struct hzt_resp r;
    req(method, path, body, &r);
    ck_assert_msg(r.status == status && !strcmp(hzt_err(&r), code),
                  "%s %s: want %ld %s, got %ld %s", method, path, status, code, r.status,
                  r.raw ? r.raw : "");
    ck_assert_str_eq(r.content_type, "application/json");
    json_t *e = json_object_get(r.body, "error");
    ck_assert(json_is_string(json_object_get(e, "message")));
    ck_assert(json_is_object(json_object_get(e, "details")));
    hzt_resp_free(&r);
}

/* POST an action, expect 201, wait until it finished; returns action id. */
long
action_ok(long lb, const char *name, const char *body, const char *want_status)
{
    char path[128], st[32];
    struct hzt_resp r;
    snprintf(path, sizeof(path), "/load_balancers/%ld/actions/%s", lb, name);
    req("POST", path, body, &r);
    ck_assert_msg(r.status == 201, "%s: %ld %s", path, r.status, r.raw);
    json_t *a = json_object_get(r.body, "action");
    ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "running");
    long id = (long)json_integer_value(json_object_get(a, "id"));
    hzt_resp_free(&r);
    ck_assert_int_eq(hzt_wait_action(&F, TOK, id, st, sizeof(st), 5000), 0);
    ck_assert_str_eq(st, want_status);
    return id;
}

/* Names of the balancers in a list response, joined by ','. */
void
names(const struct hzt_resp *r, char *buf, size_t len)
{
    size_t i;
    json_t *lb;
    buf[0] = '\0';
    json_array_foreach(json_object_get(r->body, "load_balancers"), i, lb)
    {
        if (i)
            strncat(buf, ",", len - strlen(buf) - 1);
        strncat(buf, json_string_value(json_object_get(lb, "name")), len - strlen(buf) - 1);
    }
}

int
api_run(int argc, char **argv, const char *name, const TTest *const *tests, size_t n)
{
    /* --valgrind: run every fake under memcheck (see hzt.c); an error or a
     * leak changes its exit status, which each test's teardown checks. */
    if (argc > 1 && !strcmp(argv[1], "--valgrind")) {
        setenv("HZT_VALGRIND", "1", 1);
        setenv("CK_TIMEOUT_MULTIPLIER", "5", 1); /* read by tcase_set_timeout */
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create(name);
    TCase *tc = tcase_create("api");
    tcase_add_checked_fixture(tc, setup, stop_fake);
    tcase_set_timeout(tc, 60);
    for (size_t i = 0; i < n; i++)
        _tcase_add_test(tc, tests[i], 0, 0, 0, 1);
    suite_add_tcase(s, tc);
    int rc = tu_run_suite(s);
    curl_global_cleanup();
    return rc;
}

int
run_fake(char **out, const char *a1, const char *a2, const char *a3)
{
    char exe[4096];
    snprintf(exe, sizeof(exe), "%s", tu_build_path("tests/fakes/hetzner/prismlb-fake-hcloud"));
    char *argv[] = {exe, (char *)a1, (char *)a2, (char *)a3, NULL};
    return tu_run(argv, NULL, out, 10000);
}
