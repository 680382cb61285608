/*
 * prismlb's own annotations (neither hccm nor robotlb has them), as a user
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

/* protection.delete of Service uid's balancer as `hcloud load-balancer
 * describe -o json` shows it: 1, 0, or -1 while there is no balancer. */
static int
cli_protected(struct env *e, const char *uid)
{
    json_t *lb = hccm_cli_balancer_of(e, uid);
    if (!lb)
        return -1;
    json_t *d = env_hcloud_json(e, "load-balancer", "describe",
                                json_string_value(json_object_get(lb, "name")), NULL);
    int r = json_is_true(json_object_get(json_object_get(d, "protection"), "delete"));
    json_decref(d);
    json_decref(lb);
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

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb prismlb's own annotations");
    TCase *tc = tcase_create("own");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, delete_protection_is_set_and_cleared_from_the_service);
    tcase_add_test(tc, a_bad_delete_protection_is_named_and_changes_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
