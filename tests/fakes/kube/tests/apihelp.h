/*
 * Helpers shared by the API and fault tests: one fake per test case (its
 * flags in extra_args), requests with the client certificate, admin calls,
 * Status assertions. Each test file defines fk and extra_args.
 */
#ifndef FK_APIHELP_H
#define FK_APIHELP_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "fakeproc.h"
#include "testutil.h"

#define JSON "application/json"
#define MERGE "application/merge-patch+json"
#define SMP "application/strategic-merge-patch+json"
#define SVCS "/api/v1/namespaces/default/services"
#define SLICES "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"

extern struct fake fk;
extern const char *const *extra_args;

static inline void
setup(void)
{
    ck_assert_int_eq(fake_start(&fk, extra_args), 0);
}

static inline void
teardown(void)
{
    ck_assert_int_eq(fake_stop(&fk), 0);
}

/* One request on server 0 with the client certificate; returns the parsed
 * body (new, NULL if not JSON) and the status in *code. */
static inline json_t *
req(const char *method, const char *path, const char *ctype, const char *body, long *code)
{
    struct http_res r;
    json_t *j;
    ck_assert_msg(fake_api(&fk, 0, method, path, ctype, body, 1, NULL, 10000, &r) == 0,
                  "%s %s: no answer (curl %d)", method, path, r.curl_code);
    *code = r.status;
    j = res_json(&r);
    http_res_free(&r);
    return j;
}

static inline json_t *
admin(const char *method, const char *path, const char *body)
{
    struct http_res r;
    json_t *j;
    ck_assert_int_eq(fake_admin(&fk, method, path, body, &r), 0);
    ck_assert_msg(r.status == 200, "admin %s %s: %ld %s", method, path, r.status, r.body);
    j = res_json(&r);
    http_res_free(&r);
    return j;
}

static inline const char *
str(json_t *o, const char *path)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *t = strtok_r(buf, ".", &save); t; t = strtok_r(NULL, ".", &save))
        o = json_object_get(o, t);
    return json_is_string(o) ? json_string_value(o) : "";
}

/* Key ("field", "reason", "message") of a Status' details.causes[i], or "". */
static inline const char *
cause_at(json_t *st, size_t i, const char *key)
{
    json_t *c = json_array_get(json_object_get(json_object_get(st, "details"), "causes"), i);
    return json_is_string(json_object_get(c, key)) ? json_string_value(json_object_get(c, key))
                                                   : "";
}

static inline void
assert_status(json_t *st, long code, long want, const char *reason)
{
    ck_assert_msg(code == want, "HTTP %ld, want %ld: %s", code, want,
                  st ? json_dumps(st, 0) : "(no body)");
    ck_assert_str_eq(str(st, "kind"), "Status");
    ck_assert_str_eq(str(st, "apiVersion"), "v1");
    ck_assert_str_eq(str(st, "status"), "Failure");
    ck_assert_str_eq(str(st, "reason"), reason);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "code")), want);
    ck_assert(strlen(str(st, "message")) > 0);
}

static inline json_t *
create_svc(const char *name, const char *extra_spec)
{
    char body[2048];
    long code;
    json_t *o;
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"%s\","
             "\"labels\":{\"app\":\"%s\"}},\"spec\":{\"ports\":[{\"port\":80}]%s%s}}",
             name, name, extra_spec ? "," : "", extra_spec ? extra_spec : "");
    o = req("POST", SVCS, JSON, body, &code);
    ck_assert_msg(code == 201, "create %s: %ld %s", name, code, json_dumps(o, 0));
    return o;
}

static inline unsigned long long
rv_of(json_t *o)
{
    const char *s = str(o, "metadata.resourceVersion");
    ck_assert(s[0] && s[0] != '0');
    return strtoull(s, NULL, 10);
}

/* Run each (name, flags, test) case with its own fake. Returns failures. */
struct api_case {
    const char *name;
    const char *const *args;
    const TTest *test;
};

static inline int
run_cases(const struct api_case *cases, size_t n)
{
    int failed = 0;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    for (size_t i = 0; i < n; i++) {
        Suite *s = suite_create(cases[i].name);
        TCase *c = tcase_create(cases[i].name);
        extra_args = cases[i].args;
        tcase_add_checked_fixture(c, setup, teardown);
        tcase_set_timeout(c, 60);
        tcase_add_test(c, cases[i].test);
        suite_add_tcase(s, c);
        failed += tu_run_suite(s) != EXIT_SUCCESS;
    }
    curl_global_cleanup();
    return failed;
}

#endif
