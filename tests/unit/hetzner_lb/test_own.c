/*
 * prismlb's own annotations (modules/mod_hetzner_lb: hz_annot.c, hz_model.c,
 * hz_plan.c), which neither hccm nor robotlb has: delete protection set
 * and cleared from the Service.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "testutil.h"

/* What Service shop/web (uid-1) asks for with the annotations kv (a
 * NULL-terminated key, value list), targets 10.0.1.10, network k8s. */
static void
desired_with(struct hz_desired *d, const char *const *kv)
{
    static const char *const ips[] = {"10.0.1.10"};
    struct hz_svc s = web_svc();
    struct hz_config c = default_config();
    struct hz_annot a;
    char err[256];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, ips, 1, d, err, sizeof(err)), 0);
    hz_annot_clear(&a);
}

/* Balancer 5 of uid-1 matching desired_with in all but protection.delete
 * (protect). */
static void
actual_protected(struct hz_actual *a, int protect)
{
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"id\":5,\"name\":\"web.shop\",\"labels\":{\"robotlb/service-uid\":\"uid-1\"},"
             "\"load_balancer_type\":{\"name\":\"lb11\"},\"location\":{\"name\":\"hel1\"},"
             "\"algorithm\":{\"type\":\"least_connections\"},"
             "\"private_net\":[{\"network\":7,\"ip\":\"10.0.0.5\"}],"
             "\"protection\":{\"delete\":%s},"
             "\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.10\"}}],"
             "\"services\":[{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080,"
             "\"proxyprotocol\":false,\"health_check\":{\"protocol\":\"tcp\",\"port\":30080,"
             "\"interval\":15,\"timeout\":10,\"retries\":3}}]}",
             protect ? "true" : "false");
    json_t *j = parse_json(buf);
    ck_assert_int_eq(hz_actual_parse(j, a), 0);
    json_decref(j);
}

/* The plan of kv against a balancer protected or not: how many writes,
 * and the body of the change_protection among them ("" when none). */
static size_t
plan_of(const char *const *kv, int protect, char *body, size_t len)
{
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    size_t n;
    desired_with(&d, kv);
    actual_protected(&a, protect);
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    body[0] = '\0';
    for (size_t i = 0; i < p.n; i++) {
        if (p.ops[i].kind != HZ_OP_PROTECT)
            continue;
        char *t = json_dumps(p.ops[i].body, JSON_COMPACT);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(p.ops[i].method, "POST");
        ck_assert_str_eq(p.ops[i].path, "/load_balancers/5/actions/change_protection");
        snprintf(body, len, "%s", t);
        free(t);
    }
    n = p.n;
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
    return n;
}

static const char *const protect_true[] = {"prismlb.io/delete-protection", "true", NULL};
static const char *const protect_false[] = {"prismlb.io/delete-protection", "false", NULL};
static const char *const protect_absent[] = {NULL};

/* A Go boolean, as hccm's: "1", "t", "TRUE" are true, "0", "F" false; any
 * other value is named; absent leaves the balancer's protection alone. */
START_TEST(delete_protection_is_a_go_boolean)
{
    static const char *const yes[] = {"true", "1", "t", "TRUE", "True"};
    static const char *const no[] = {"false", "0", "f", "FALSE"};
    struct hz_annot a;
    char err[512];
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        const char *kv[] = {"prismlb.io/delete-protection", yes[i], NULL};
        ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
        ck_assert_int_eq(a.delete_protection, 1);
        hz_annot_clear(&a);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        const char *kv[] = {"prismlb.io/delete-protection", no[i], NULL};
        ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
        ck_assert_int_eq(a.delete_protection, 0);
        hz_annot_clear(&a);
    }
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)protect_absent, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.delete_protection, -1);
    hz_annot_clear(&a);
    const char *bad[] = {"prismlb.io/delete-protection", "yes", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)bad, &a, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "prismlb.io/delete-protection: \"yes\" is neither true nor false");
    ck_assert_int_eq(a.delete_protection, -1);
}
END_TEST

/* Set when the list shows it off, cleared when it shows it on: one
 * change_protection, and nothing else. */
START_TEST(delete_protection_is_set_and_cleared_when_it_differs)
{
    char body[256];
    ck_assert_uint_eq(plan_of(protect_true, 0, body, sizeof(body)), 1);
    ck_assert_str_eq(body, "{\"delete\":true}");
    ck_assert_uint_eq(plan_of(protect_false, 1, body, sizeof(body)), 1);
    ck_assert_str_eq(body, "{\"delete\":false}");
}
END_TEST

/* Steady state: no request; absent: the balancer's protection, whatever
 * it is, is left as it is. */
START_TEST(delete_protection_as_it_stands_or_absent_needs_no_request)
{
    char body[256];
    ck_assert_uint_eq(plan_of(protect_true, 1, body, sizeof(body)), 0);
    ck_assert_uint_eq(plan_of(protect_false, 0, body, sizeof(body)), 0);
    ck_assert_uint_eq(plan_of(protect_absent, 1, body, sizeof(body)), 0);
    ck_assert_uint_eq(plan_of(protect_absent, 0, body, sizeof(body)), 0);
}
END_TEST

static Suite *
own_suite(void)
{
    Suite *s = suite_create("hetzner_lb-own");
    TCase *tc = tcase_create("delete_protection");
    tcase_add_test(tc, delete_protection_is_a_go_boolean);
    tcase_add_test(tc, delete_protection_is_set_and_cleared_when_it_differs);
    tcase_add_test(tc, delete_protection_as_it_stands_or_absent_needs_no_request);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(own_suite());
}
