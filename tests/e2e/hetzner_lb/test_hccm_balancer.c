/*
 * hcloud-cloud-controller-manager's rules for the balancer itself, as a
 * user drives them: kubectl applies, annotates and deletes the Service, the
 * hcloud CLI (against the fake Hetzner API) changes and reads its balancer.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "hccm_util.h"
#include "testutil.h"

/* kubectl delete Service default/name. */
static void
delete_service(struct env *e, const char *name)
{
    char *out = NULL;
    int rc = env_kubectl(e, &out, "delete", "service", name, "-n", "default", NULL);
    ck_assert_msg(rc == 0, "kubectl delete service: %s", out ? out : "");
    free(out);
}

/* `hcloud load-balancer enable-protection ID delete`. */
static void
protect(struct env *e, long id)
{
    char ids[24], *out = NULL;
    snprintf(ids, sizeof(ids), "%ld", id);
    int rc = env_hcloud(e, &out, "load-balancer", "enable-protection", ids, "delete", NULL);
    ck_assert_msg(rc == 0, "hcloud load-balancer enable-protection: %s", out ? out : "");
    free(out);
}

/* The Service web with its balancer serving it; the balancer as the hcloud
 * CLI shows it (new), its UID into *uid (new). */
static json_t *
served_web(struct env *e, char **uid)
{
    char ip[64];
    *uid = hccm_apply_service(e, "web", NULL);
    WAIT_FOR(e, env_targets_are(e, *uid, "10.0.1.41"), 30000, "the balancer");
    WAIT_FOR(e, env_ingress(e, "web", ip, sizeof(ip), NULL, 0, NULL), 30000, "the status");
    json_t *lb = hccm_cli_balancer_of(e, *uid);
    ck_assert_ptr_nonnull(lb);
    return lb;
}

/* Serve Service web, protect its balancer with the hcloud CLI, (listed:
 * wait for a resync list that began after the protection), delete the
 * Service, and wait for the DeleteProtected warning; the balancer must
 * still be there, protected, with its IPv4. How many DELETEs were sent. */
static long
protected_balancer_outlives_its_service(int listed)
{
    struct env e;
    char *uid = NULL;
    env_start(&e, NULL, NULL, NULL, listed ? 1 : 300);
    env_node(&e, "n1", "10.0.1.41");
    json_t *lb = served_web(&e, &uid);
    long id = (long)json_integer_value(json_object_get(lb, "id"));
    const char *name = json_string_value(json_object_get(lb, "name"));
    protect(&e, id);
    if (listed) {
        /* a resync list that began after the protection: two more lists */
        long lists = env_count_route(&e, "GET /v1/load_balancers");
        WAIT_FOR(&e, env_count_route(&e, "GET /v1/load_balancers") >= lists + 2, 30000,
                 "a resync list after the protection");
    }

    delete_service(&e, "web");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "DeleteProtected", name, "delete protection", NULL) > 0,
             30000, "the DeleteProtected warning");
    ck_assert_int_eq(env_lb_exists(&e, id), 1);
    json_t *after = env_hcloud_json(&e, "load-balancer", "describe", name, NULL);
    ck_assert_str_eq(hccm_ip_of(after, "ipv4"), hccm_ip_of(lb, "ipv4"));
    ck_assert(json_is_true(json_object_get(json_object_get(after, "protection"), "delete")));
    long deletes = env_count_route(&e, "DELETE /v1/load_balancers/{id}");
    json_decref(after);
    json_decref(lb);
    free(uid);
    env_stop(&e);
    return deletes;
}

/* "A balancer with delete protection is never deleted: the Service's
 * removal leaves it, with a warning Event saying why." Here the protection
 * is set just before the deletion, after every list the daemon made: the
 * DELETE is sent, Hetzner refuses it (protected), and the Event says so. */
START_TEST(a_protected_balancer_survives_its_services_deletion_with_a_warning)
{
    ck_assert_int_eq(protected_balancer_outlives_its_service(0), 1);
}
END_TEST

/* The protection known from the resync list: no DELETE is sent at all (it
 * would only be refused), and the warning says why the balancer stays. */
START_TEST(a_balancer_listed_as_protected_is_not_asked_to_be_deleted)
{
    ck_assert_int_eq(protected_balancer_outlives_its_service(1), 0);
}
END_TEST

/* hccm's network-zone: the balancer is created in the zone (the hcloud CLI
 * shows a location of eu-central, not the instance's default hel1 by
 * name); a zone changed afterwards moves nothing (Hetzner cannot): a
 * NetworkZoneUnchangeable warning naming the annotation, the same
 * balancer in the same place. */
START_TEST(network_zone_places_the_balancer_and_a_change_moves_nothing)
{
    struct env e;
    char ip[64];
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid =
        hccm_apply_service(&e, "web", "    load-balancer.hetzner.cloud/network-zone: eu-central\n");
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "the balancer");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL), 30000, "the status");
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_str_eq(hccm_str2(lb, "location", "network_zone"), "eu-central");
    long writes = env_last_request(&e);

    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/network-zone=us-east");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "NetworkZoneUnchangeable", "\"us-east\"",
                               "load-balancer.hetzner.cloud/network-zone", "eu-central", NULL) > 0,
             30000, "the NetworkZoneUnchangeable warning");
    json_t *after = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(after);
    ck_assert_int_eq(json_integer_value(json_object_get(after, "id")),
                     json_integer_value(json_object_get(lb, "id")));
    ck_assert_str_eq(hccm_str2(after, "location", "name"), hccm_str2(lb, "location", "name"));
    ck_assert_str_eq(hccm_ip_of(after, "ipv4"), hccm_ip_of(lb, "ipv4"));
    ck_assert_int_eq(env_count_route(&e, "POST /v1/load_balancers"), 1);
    hccm_only_reads_since(&e, writes, "the zone changed");
    json_decref(after);
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

/* network-zone beside a location (either family's): one InvalidAnnotation
 * naming both, and no balancer made from half the set. */
START_TEST(network_zone_and_location_together_are_refused_naming_both)
{
    struct env e;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web",
                                   "    load-balancer.hetzner.cloud/network-zone: eu-central\n"
                                   "    robotlb/lb-location: fsn1\n");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation",
                               "load-balancer.hetzner.cloud/network-zone", "robotlb/lb-location",
                               "mutually exclusive", NULL) > 0,
             30000, "the InvalidAnnotation warning naming both");
    ck_assert_int_eq(env_count_route(&e, "POST /v1/load_balancers"), 0);
    free(uid);
    env_stop(&e);
}
END_TEST

/* hccm's node-selector is a full Kubernetes label selector, in force
 * whatever dynamic_node_selector says (on here, the default): a set-based
 * one picks the targets (amd64 and arm64, no control plane; the excluded
 * node stays out). A malformed one leaves the targets as they are, with an
 * InvalidAnnotation warning naming the annotation, and nothing is
 * written to Hetzner. */
START_TEST(a_set_based_node_selector_picks_the_targets_and_a_malformed_one_changes_nothing)
{
    struct env e;
    char ip[64];
    env_start(&e, NULL, NULL, NULL, 300);
    env_selector_nodes(&e);
    char *uid =
        hccm_apply_service(&e, "web",
                           "    load-balancer.hetzner.cloud/node-selector: \"beta.kubernetes."
                           "io/arch in (amd64, arm64), node-role.kubernetes.io/"
                           "control-plane notin (true)\"\n");
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.221,10.0.1.222"), 30000,
             "the targets of the set-based selector");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL), 30000, "the status");
    long writes = env_last_request(&e);

    hccm_annotate(&e, "web",
                  "load-balancer.hetzner.cloud/node-selector=beta.kubernetes.io/arch in (amd64");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation",
                               "load-balancer.hetzner.cloud/node-selector", "in (amd64", NULL) > 0,
             30000, "the InvalidAnnotation warning");
    ck_assert(env_targets_are(&e, uid, "10.0.1.221,10.0.1.222"));
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_uint_eq(json_array_size(json_object_get(lb, "targets")), 2);
    hccm_only_reads_since(&e, writes, "the malformed selector");
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

/* hccm's environment variables, as an hccm Deployment sets them, over the
 * instance's settings: the hcloud CLI shows the balancer they describe
 * (type lb21, round_robin, in eu-central, health checks every 20 s), and
 * robotlb's own variable for the same setting wins (retries 2, not 4).
 * (Check runs each test in its own process: the variables end with it.) */
START_TEST(hccms_environment_variables_override_the_settings)
{
    struct env e;
    setenv("HCLOUD_LOAD_BALANCERS_TYPE", "lb21", 1);
    setenv("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "round_robin", 1);
    setenv("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "eu-central", 1);
    setenv("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "20s", 1);
    setenv("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "4", 1);
    setenv("ROBOTLB_DEFAULT_LB_RETRIES", "2", 1);
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web", NULL);
    WAIT_FOR(&e, env_targets_are(&e, uid, "10.0.1.41"), 30000, "the balancer");
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_str_eq(hccm_str2(lb, "load_balancer_type", "name"), "lb21");
    ck_assert_str_eq(hccm_str2(lb, "algorithm", "type"), "round_robin");
    ck_assert_str_eq(hccm_str2(lb, "location", "network_zone"), "eu-central");
    json_t *hc =
        json_object_get(json_array_get(json_object_get(lb, "services"), 0), "health_check");
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "interval")), 20);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "retries")), 2);
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb hccm balancer");
    TCase *tc = tcase_create("hccm_balancer");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, a_protected_balancer_survives_its_services_deletion_with_a_warning);
    tcase_add_test(tc, a_balancer_listed_as_protected_is_not_asked_to_be_deleted);
    tcase_add_test(tc, network_zone_places_the_balancer_and_a_change_moves_nothing);
    tcase_add_test(tc, network_zone_and_location_together_are_refused_naming_both);
    tcase_add_test(tc, hccms_environment_variables_override_the_settings);
    tcase_add_test(tc,
                   a_set_based_node_selector_picks_the_targets_and_a_malformed_one_changes_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
