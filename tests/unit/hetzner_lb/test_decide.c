/*
 * What a sync does with a Service once it selected its targets and built
 * what it asks for (modules/mod_hetzner_lb/hz_decide.c): nothing when its
 * labelled balancer is as asked, wait for a running reconcile or a
 * recheck, or reconcile with the plan built here; and the fingerprint of
 * what it asks for.
 */
#include <errno.h>
#include <stdio.h>

#include "common.h"
#include "hz_rec.h"
#include "testutil.h"

static const char *svc80 =
    "[{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080,"
    "\"proxyprotocol\":false,\"health_check\":{\"protocol\":\"tcp\",\"port\":30080,"
    "\"interval\":15,\"timeout\":10,\"retries\":3}}]";

/* Balancer 5 labelled uid-1 on network 7 with the IP targets of the JSON
 * array text targets and the service svc80. */
static void
actual(struct hz_actual *a, const char *targets)
{
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"id\":5,\"name\":\"web.shop\",\"labels\":{\"robotlb/service-uid\":\"uid-1\"},"
             "\"load_balancer_type\":{\"name\":\"lb11\"},\"location\":{\"name\":\"hel1\"},"
             "\"algorithm\":{\"type\":\"least_connections\"},"
             "\"private_net\":[{\"network\":7,\"ip\":\"10.0.0.5\"}],"
             "\"targets\":%s,\"services\":%s}",
             targets, svc80);
    json_t *j = parse_json(buf);
    ck_assert_int_eq(hz_actual_parse(j, a), 0);
    json_decref(j);
}

static const char *one_target = "[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.10\"}}]";

/* The decision for d against a (NULL: none), the network's id known. */
static enum hz_sync_verdict
decide(const struct hz_desired *d, const struct hz_actual *a, uint64_t fail_fp, int64_t retry_at,
       int running, struct hz_plan *p)
{
    struct hz_sync_in in = {.d = d,
                            .fp = hz_desired_fp(d),
                            .lb = a,
                            .net_known = 1,
                            .net_id = 7,
                            .fail_fp = fail_fp,
                            .retry_at = retry_at,
                            .now = 1000,
                            .running = running};
    enum hz_sync_verdict v;
    ck_assert_int_eq(hz_sync_decide(&in, &v, p), 0);
    return v;
}

/* The fixture: what the Service asks for, its labelled balancer, the plan
 * decided (each test's, cleared after it). */
static struct hz_desired d;
static struct hz_actual a;
static struct hz_plan p;

/* d asks for the first n of two nodes; a (balancer 5) targets the first. */
static void
given(size_t n)
{
    static const char *const ips[] = {"10.0.1.10", "10.0.1.11"};
    desired(&d, ips, n);
    actual(&a, one_target);
}

static void
clear_all(void)
{
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}

START_TEST(a_balancer_as_asked_is_served_without_a_request)
{
    given(1);
    ck_assert_int_eq(decide(&d, &a, 0, 0, 0, &p), HZ_SYNC_SERVED);
    ck_assert_uint_eq(p.n, 0);
    /* served also while an old failure of the same request is in force */
    ck_assert_int_eq(decide(&d, &a, hz_desired_fp(&d), 5000, 0, &p), HZ_SYNC_SERVED);
}
END_TEST

START_TEST(a_difference_is_reconciled_with_the_plan_built_once)
{
    given(2);
    ck_assert_int_eq(decide(&d, &a, 0, 0, 0, &p), HZ_SYNC_RECONCILE);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_ADD_TARGET);
    ck_assert_str_eq(p.ops[0].target_ip, "10.0.1.11");
}
END_TEST

START_TEST(without_a_balancer_or_its_networks_id_the_reconcile_builds_the_plan)
{
    given(2);
    ck_assert_int_eq(decide(&d, NULL, 0, 0, 0, &p), HZ_SYNC_RECONCILE);
    ck_assert_uint_eq(p.n, 0);
    struct hz_sync_in in = {.d = &d, .fp = hz_desired_fp(&d), .lb = &a, .now = 1000};
    enum hz_sync_verdict v;
    ck_assert_int_eq(hz_sync_decide(&in, &v, &p), 0); /* network id not known */
    ck_assert_int_eq(v, HZ_SYNC_RECONCILE);
    ck_assert_uint_eq(p.n, 0);
}
END_TEST

START_TEST(what_failed_is_held_until_its_recheck)
{
    given(2);
    uint64_t fp = hz_desired_fp(&d);
    ck_assert_int_eq(decide(&d, &a, fp, 5000, 0, &p), HZ_SYNC_HELD);
    ck_assert_uint_eq(p.n, 0);
    /* due: tried again */
    ck_assert_int_eq(decide(&d, &a, fp, 1000, 0, &p), HZ_SYNC_RECONCILE);
    hz_plan_clear(&p);
    /* another request than the one that failed: at once */
    ck_assert_int_eq(decide(&d, &a, fp ^ 1, 5000, 0, &p), HZ_SYNC_RECONCILE);
}
END_TEST

START_TEST(a_running_reconcile_leaves_the_work_to_the_sync_after_it)
{
    given(2);
    ck_assert_int_eq(decide(&d, &a, 0, 0, 1, &p), HZ_SYNC_LATER);
    ck_assert_uint_eq(p.n, 0);
}
END_TEST

START_TEST(the_fingerprint_changes_with_every_field_asked_for)
{
    const char *x[] = {"10.0.1.10", "10.0.1.11"}, *y[] = {"10.0.1.1", "010.0.1.11"};
    struct hz_desired d1, d2;
    desired(&d1, x, 2);
    desired(&d2, x, 2);
    ck_assert(hz_desired_fp(&d1) == hz_desired_fp(&d2));
    d2.interval++;
    ck_assert(hz_desired_fp(&d1) != hz_desired_fp(&d2));
    hz_desired_clear(&d2);
    /* the same bytes split otherwise between two targets differ */
    desired(&d2, y, 2);
    ck_assert(hz_desired_fp(&d1) != hz_desired_fp(&d2));
    hz_desired_clear(&d2);
    hz_desired_clear(&d1);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb decide");
    TCase *tc = tcase_create("decide");
    tcase_add_checked_fixture(tc, NULL, clear_all);
    tcase_add_test(tc, a_balancer_as_asked_is_served_without_a_request);
    tcase_add_test(tc, a_difference_is_reconciled_with_the_plan_built_once);
    tcase_add_test(tc, without_a_balancer_or_its_networks_id_the_reconcile_builds_the_plan);
    tcase_add_test(tc, what_failed_is_held_until_its_recheck);
    tcase_add_test(tc, a_running_reconcile_leaves_the_work_to_the_sync_after_it);
    tcase_add_test(tc, the_fingerprint_changes_with_every_field_asked_for);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
