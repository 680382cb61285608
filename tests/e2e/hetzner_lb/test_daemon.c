/*
 * mod_hetzner_lb in the daemon: the settings reference in README.md is the
 * one the daemon renders; --check-config refuses a token in the config
 * file and bad ROBOTLB_* values (each naming its variable); the running
 * module lists the labelled balancers once per resync_interval with ONE
 * paginated request and, in dry run, sends nothing but GETs; SIGTERM stops
 * it cleanly.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "env.h"
#include "testutil.h"

static const char *
module_path_env(void)
{
    static char env[8400];
    char mods[4200];
    snprintf(mods, sizeof(mods), "%s", tu_build_path("modules"));
    snprintf(env, sizeof(env), "PRISMLB_MODULE_PATH=%s:%s", mods, tu_build_path("tests/modules"));
    return env;
}

/* Write conf and run --check-config with extra env entries (NULL-ended);
 * returns the exit code, *out the output (new). */
static int
check_config(const char *conf, char *const *env_extra, char **out)
{
    char path[600], exe[4096];
    char *env[16];
    int n = 0;
    snprintf(path, sizeof(path), "%s/prismlb.conf", dir);
    ck_assert_int_eq(tu_write_file(path, conf), 0);
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    env[n++] = (char *)module_path_env();
    for (int i = 0; env_extra && env_extra[i] && n < 15; i++)
        env[n++] = env_extra[i];
    env[n] = NULL;
    char *argv[] = {exe, "--config", path, "--check-config", NULL};
    return tu_run(argv, env, out, 30000);
}

#define CONF_FILE_TOKEN                                                                            \
    "instances = ( { module = \"hetzner_lb\"; name = \"hz\";\n"                                    \
    "  hcloud_token_file = \"token\"; } );\n"

START_TEST(defaults_with_a_token_file_pass)
{
    char *out = NULL;
    ck_assert_int_eq(check_config(CONF_FILE_TOKEN, NULL, &out), 0);
    free(out);
}
END_TEST

/* "Set envs.ROBOTLB_HCLOUD_TOKEN": the token from the environment works;
 * written in the config file it is refused, and never printed. */
START_TEST(the_token_comes_from_a_file_or_the_environment_never_from_the_config)
{
    char *out = NULL;
    char *env[] = {"ROBOTLB_HCLOUD_TOKEN=s3cr3t-token-value", NULL};
    ck_assert_int_eq(check_config("instances = ( { module = \"hetzner_lb\"; } );\n", env, &out), 0);
    free(out);
    ck_assert_int_eq(check_config("instances = ( { module = \"hetzner_lb\";\n"
                                  "  hcloud_token = \"s3cr3t-token-value\"; } );\n",
                                  NULL, &out),
                     1);
    ck_assert_ptr_nonnull(strstr(out, "hcloud_token"));
    ck_assert_ptr_null(strstr(out, "s3cr3t-token-value"));
    free(out);
    ck_assert_int_eq(check_config("instances = ( { module = \"hetzner_lb\"; } );\n", NULL, &out),
                     1);
    ck_assert_ptr_nonnull(strstr(out, "no Hetzner API token"));
    free(out);
}
END_TEST

/* "each ROBOTLB_* variable of the spec overrides its setting": a bad value
 * in the environment is reported naming the variable. */
START_TEST(robotlb_environment_variables_override_the_settings)
{
    static const struct {
        const char *env, *needle;
    } bad[] = {
        {"ROBOTLB_CLUSTER_NAME=Prod_1", "ROBOTLB_CLUSTER_NAME"},
        {"ROBOTLB_DEFAULT_LB_RETRIES=9", "ROBOTLB_DEFAULT_LB_RETRIES"},
        {"ROBOTLB_DEFAULT_LB_TIMEOUT=0", "ROBOTLB_DEFAULT_LB_TIMEOUT"},
        {"ROBOTLB_DEFAULT_LB_INTERVAL=2", "ROBOTLB_DEFAULT_LB_INTERVAL"},
        {"ROBOTLB_DEFAULT_LB_ALGORITHM=fastest", "ROBOTLB_DEFAULT_LB_ALGORITHM"},
        {"ROBOTLB_DEFAULT_IP_MODE=vip", "ROBOTLB_DEFAULT_IP_MODE"},
        {"ROBOTLB_DYNAMIC_NODE_SELECTOR=maybe", "ROBOTLB_DYNAMIC_NODE_SELECTOR"},
        {"ROBOTLB_IPV6_INGRESS=maybe", "ROBOTLB_IPV6_INGRESS"},
        {"ROBOTLB_DEFAULT_LB_PROXY_MODE_ENABLED=2", "ROBOTLB_DEFAULT_LB_PROXY_MODE_ENABLED"},
        {"ROBOTLB_RESYNC_INTERVAL=soon", "ROBOTLB_RESYNC_INTERVAL"},
        {"ROBOTLB_LOG_LEVEL=loud", "ROBOTLB_LOG_LEVEL"},
        {"ROBOTLB_DEFAULT_LB_LOCATION=hel 1", "ROBOTLB_DEFAULT_LB_LOCATION"},
        {"ROBOTLB_DEFAULT_LB_TYPE=lb 11", "ROBOTLB_DEFAULT_LB_TYPE"},
        {"ROBOTLB_DEFAULT_NETWORK=my net", "ROBOTLB_DEFAULT_NETWORK"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *out = NULL;
        char *env[] = {(char *)bad[i].env, NULL};
        ck_assert_msg(check_config(CONF_FILE_TOKEN, env, &out) == 1, "%s passed", bad[i].env);
        ck_assert_msg(strstr(out, bad[i].needle) != NULL, "%s: %s", bad[i].env, out);
        free(out);
    }
    /* and good values of robotlb's own spelling pass, over the file */
    char *good[] = {"ROBOTLB_CLUSTER_NAME=prod-1",
                    "ROBOTLB_DEFAULT_LB_ALGORITHM=round-robin",
                    "ROBOTLB_DYNAMIC_NODE_SELECTOR=true",
                    "ROBOTLB_RESYNC_INTERVAL=60",
                    "ROBOTLB_LOG_LEVEL=INFO",
                    "ROBOTLB_DEFAULT_IP_MODE=Proxy",
                    "ROBOTLB_DEFAULT_LB_TYPE=lb21",
                    NULL};
    char *out = NULL;
    ck_assert_int_eq(check_config("instances = ( { module = \"hetzner_lb\";\n"
                                  "  hcloud_token_file = \"token\"; cluster_name = \"Bad!\";"
                                  " } );\n",
                                  good, &out),
                     0);
    free(out);
}
END_TEST

/* hccm's HCLOUD_LOAD_BALANCERS_* and HCLOUD_NETWORK are checked as the
 * ROBOTLB_* ones are: a value hccm would refuse fails --check-config
 * naming the variable; good values in hccm's spelling pass. */
START_TEST(hccm_environment_variables_are_checked_like_robotlbs)
{
    static const char *const bad[] = {
        "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6=yes",
        "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE=fastest",
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL=15",
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES=9",
        "HCLOUD_NETWORK=my net",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *out = NULL, name[64];
        char *env[] = {(char *)bad[i], NULL};
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(bad[i], "="), bad[i]);
        ck_assert_msg(check_config(CONF_FILE_TOKEN, env, &out) == 1, "%s passed", bad[i]);
        ck_assert_msg(strstr(out, name) != NULL, "%s: %s", bad[i], out);
        free(out);
    }
    char *both[] = {"HCLOUD_LOAD_BALANCERS_LOCATION=fsn1",
                    "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE=eu-central", NULL};
    char *out = NULL;
    ck_assert_int_eq(check_config(CONF_FILE_TOKEN, both, &out), 1);
    ck_assert_msg(strstr(out, "mutually exclusive") != NULL, "%s", out);
    free(out);
    char *good[] = {"HCLOUD_LOAD_BALANCERS_DISABLE_IPV6=False",
                    "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE=round_robin",
                    "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL=1m",
                    "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT=15s",
                    "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL=true",
                    "HCLOUD_NETWORK=k8s",
                    NULL};
    out = NULL;
    ck_assert_int_eq(check_config(CONF_FILE_TOKEN, good, &out), 0);
    free(out);
}
END_TEST

/* README.md's settings table is the one the daemon renders. */
START_TEST(readme_settings_current)
{
    char exe[4096];
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    char *argv[] = {exe, "--settings-doc", "hetzner_lb", NULL};
    char *env[] = {(char *)module_path_env(), NULL};
    char *doc = NULL;
    ck_assert_int_eq(tu_run(argv, env, &doc, 30000), 0);
    ck_assert_ptr_nonnull(strstr(doc, "| `resync_interval` |"));
    char *readme = tu_read_file(tu_source_path("modules/mod_hetzner_lb/README.md"), NULL);
    ck_assert_ptr_nonnull(readme);
    const char *begin_mark = "<!-- settings:begin -->\n", *end_mark = "<!-- settings:end -->";
    char *b = strstr(readme, begin_mark);
    char *e = b ? strstr(b, end_mark) : NULL;
    ck_assert_msg(b && e, "README.md lacks the settings markers");
    b += strlen(begin_mark);
    *e = '\0';
    ck_assert_msg(strcmp(b, doc) == 0,
                  "modules/mod_hetzner_lb/README.md is out of date; regenerate with "
                  "modules/mod_hetzner_lb/update-readme.sh BUILD_DIR. README has:\n%s\n"
                  "the daemon renders:\n%s",
                  b, doc);
    free(readme);
    free(doc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The daemon with both fakes                                          */

/* The daemon with both fakes, the seed without a network and no
 * default_network; resync every second (one page a second is the whole
 * budget of the fake's RateLimit-Limit 3600: resync_budget_percent 100);
 * dry_run as asked. */
static void
start(struct env *e, int dry_run, const char *gate_open_after, const char *gate_close_after)
{
    struct env_opts o = {.no_network = 1,
                         .extra = dry_run ? "dry_run = true; resync_budget_percent = 100;"
                                          : "dry_run = false; resync_budget_percent = 100;",
                         .resync_s = 1,
                         .gate_open_after = gate_open_after,
                         .gate_close_after = gate_close_after};
    env_start_opts(e, &o);
}

static long
count_lists(struct env *e)
{
    return env_count_route(e, "GET /v1/load_balancers");
}

/* The running module: one paginated label-selector list per resync
 * (ROBOTLB_RESYNC_INTERVAL=1 s here), nothing but GETs in dry run (though
 * a Service here stopped being a LoadBalancer, whose balancer would be
 * deleted), and a clean stop on SIGTERM. */
START_TEST(the_daemon_lists_labelled_balancers_once_per_resync_and_dry_run_writes_nothing)
{
    struct env e;
    struct hzt_resp r;
    char labels[256];
    start(&e, 1, NULL, NULL);
    char *uid = env_service(&e, "was-lb", "ClusterIP", 0, NULL, NULL);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", uid);
    long id = env_create_lb(&e, "was-lb.default", labels);
    ck_assert_int_eq(hzt_req(&e.hz, "POST", "/_admin/reset", NULL, NULL, NULL, &r), 0);
    hzt_resp_free(&r);
    long long dl = tu_now_ms() + 15000;
    while (tu_now_ms() < dl && count_lists(&e) < 3) {
        tu_sleep_ms(200);
        ck_assert_msg(!tu_exited(&e.d), "the daemon exited");
    }
    ck_assert_msg(count_lists(&e) >= 3, "fewer than 3 lists in 15 s");
    tu_sleep_ms(500);
    ck_assert_int_eq(hzt_req(&e.hz, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(r.body, "requests"), i, x)
    {
        const char *p = json_string_value(json_object_get(x, "path"));
        ck_assert_str_eq(json_string_value(json_object_get(x, "method")), "GET");
        ck_assert_int_eq(json_integer_value(json_object_get(x, "status")), 200);
        ck_assert_msg(strstr(p, "label_selector=robotlb/service-uid") && strstr(p, "per_page=50"),
                      "unexpected request %s", p);
    }
    hzt_resp_free(&r);
    ck_assert(env_lb_exists(&e, id));
    char *text = tu_read_file(e.log, NULL);
    ck_assert_ptr_nonnull(strstr(text, "hetzner dry run: would DELETE /load_balancers/"));
    free(text);
    free(uid);
    env_stop(&e);
}
END_TEST

static int
has_finalizer(struct env *e, const char *name)
{
    char path[256];
    json_t *o;
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/services/%s", name);
    kube_req(e, "GET", path, NULL, NULL, 200, &o);
    json_t *f = json_object_get(json_object_get(o, "metadata"), "finalizers");
    int found = 0;
    size_t i;
    json_t *v;
    json_array_foreach(f, i, v) found |= !strcmp(json_string_value(v), "robotlb/finalizer");
    json_decref(o);
    return found;
}

/* The Service side that needs no target nodes, as a user sees it:
 *  - "finds the balancer of a service by that label": the Service's status
 *    gets the labelled balancer's IPv4 with ipMode VIP (the default);
 *  - a bad robotlb/ annotation is a warning Event naming it;
 *  - "A Service that stops being one (type change, other class, deletion)
 *    gets its labelled balancer deleted";
 *  - "A balancer is never deleted by its name": an unlabelled balancer
 *    under the Service's earlier-release name, and a balancer labelled
 *    for a UID no Service has, stay;
 *  - the robotlb/finalizer of earlier releases is removed on the first
 *    start. */
START_TEST(service_status_events_deletion_and_finalizers)
{
    struct env e;
    char labels[256], ip[64], mode[16];
    size_t n;
    start(&e, 0, NULL, NULL);
    char *web = env_service(&e, "web", "LoadBalancer", 0, NULL, NULL);
    char *bad = env_service(&e, "bad", "LoadBalancer", 0,
                            ",\"annotations\":{\"robotlb/lb-retries\":\"9\"}", NULL);
    char *gone = env_service(&e, "gone", "LoadBalancer", 0, NULL, NULL);
    char *other = env_service(&e, "other", "LoadBalancer", 0, NULL,
                              ",\"loadBalancerClass\":\"example.com/other\"");
    char *old = env_service(&e, "old", "ClusterIP", 0,
                            ",\"finalizers\":[\"robotlb/finalizer\",\"example.com/keep\"]", NULL);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\",\"team\":\"a\"}", web);
    long lb_web = env_create_lb(&e, "web.default", labels);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", gone);
    long lb_gone = env_create_lb(&e, "gone.default", labels);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", other);
    long lb_other = env_create_lb(&e, "other.default", labels);
    long lb_foreign = env_create_lb(&e, "foreign", "{\"robotlb/service-uid\":\"no-such-uid\"}");
    long lb_legacy = env_create_lb(&e, "web", NULL);

    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&e.hz, "GET", "/load_balancers/1", "tok-a", NULL, NULL, &r), 0);
    hzt_resp_free(&r);
    char want_ip[64];
    {
        char path[64];
        snprintf(path, sizeof(path), "/load_balancers/%ld", lb_web);
        ck_assert_int_eq(hzt_req(&e.hz, "GET", path, "tok-a", NULL, NULL, &r), 0);
        snprintf(want_ip, sizeof(want_ip), "%s",
                 json_string_value(json_object_get(
                     json_object_get(
                         json_object_get(json_object_get(r.body, "load_balancer"), "public_net"),
                         "ipv4"),
                     "ip")));
        hzt_resp_free(&r);
    }

    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), mode, sizeof(mode), &n), 20000,
             "web's status");
    ck_assert_str_eq(ip, want_ip);
    ck_assert_str_eq(mode, "VIP");
    ck_assert_uint_eq(n, 1); /* ipv6_ingress is off */
    WAIT_FOR(&e, env_has_event(&e, "InvalidAnnotation", "robotlb/lb-retries"), 20000,
             "the warning Event");
    WAIT_FOR(&e, !env_lb_exists(&e, lb_other), 20000, "the other-class Service's balancer to go");
    WAIT_FOR(&e, !has_finalizer(&e, "old"), 20000, "the finalizer's removal");

    /* type change and deletion */
    kube_req(&e, "PATCH", "/api/v1/namespaces/default/services/web", "application/merge-patch+json",
             "{\"spec\":{\"type\":\"ClusterIP\"}}", 200, NULL);
    kube_req(&e, "DELETE", "/api/v1/namespaces/default/services/gone", NULL, NULL, 200, NULL);
    WAIT_FOR(&e, !env_lb_exists(&e, lb_web), 20000, "web's balancer to go after the type change");
    WAIT_FOR(&e, !env_lb_exists(&e, lb_gone), 20000, "gone's balancer to go after the deletion");
    /* Two more resyncs have seen the foreign and legacy balancers. */
    long lists = count_lists(&e);
    WAIT_FOR(&e, count_lists(&e) >= lists + 2, 20000, "two more resyncs");
    ck_assert(env_lb_exists(&e, lb_foreign));
    ck_assert(env_lb_exists(&e, lb_legacy));
    /* the other finalizer stays */
    json_t *o;
    kube_req(&e, "GET", "/api/v1/namespaces/default/services/old", NULL, NULL, 200, &o);
    json_t *f = json_object_get(json_object_get(o, "metadata"), "finalizers");
    ck_assert_uint_eq(json_array_size(f), 1);
    ck_assert_str_eq(json_string_value(json_array_get(f, 0)), "example.com/keep");
    json_decref(o);
    free(web);
    free(bad);
    free(gone);
    free(other);
    free(old);
    env_stop(&e);
}
END_TEST

/* "every write to Hetzner or to Kubernetes happens only while the gate is
 * open; informers run on every replica, so a new leader acts at once":
 * before the gate opens nothing reaches Hetzner and no Event is written;
 * once it opens the balancer of a Service that stopped being ours goes and
 * the warning Event appears; after it closes, nothing is written again. */
START_TEST(writes_happen_only_while_the_gate_is_open)
{
    struct env e;
    char labels[256], gate[4200];
    struct hzt_resp r;
    /* The gate is open while the file exists: shut until the test opens it. */
    snprintf(gate, sizeof(gate), "%s/gate-open", dir);
    struct env_opts o = {.no_network = 1,
                         .extra = "dry_run = false; resync_budget_percent = 100;", /* see start() */
                         .resync_s = 1,
                         .gate_file = gate};
    env_start_opts(&e, &o);
    char *was = env_service(&e, "was", "ClusterIP", 0, NULL, NULL);
    char *bad = env_service(&e, "bad", "LoadBalancer", 0,
                            ",\"annotations\":{\"robotlb/ip-mode\":\"vip\"}", NULL);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", was);
    long lb = env_create_lb(&e, "was.default", labels);
    ck_assert_int_eq(hzt_req(&e.hz, "POST", "/_admin/reset", NULL, NULL, NULL, &r), 0);
    hzt_resp_free(&r);
    /* Three resync intervals with the gate shut: not one request. */
    for (int i = 0; i < 15; i++) {
        ck_assert_msg(!tu_exited(&e.d), "the daemon exited");
        tu_sleep_ms(200);
    }
    if (env_count_requests(&e) != 0) {
        ck_assert_int_eq(hzt_req(&e.hz, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
        fprintf(stderr, "requests: %s\n", r.raw);
        hzt_resp_free(&r);
        dump_log(&e);
    }
    ck_assert_int_eq(env_count_requests(&e), 0);
    ck_assert(!env_has_event(&e, "InvalidAnnotation", "robotlb/ip-mode"));
    ck_assert(env_lb_exists(&e, lb));
    ck_assert_int_eq(tu_write_file(gate, "open\n"), 0);
    WAIT_FOR(&e, !env_lb_exists(&e, lb), 15000, "the delete once the gate opened");
    WAIT_FOR(&e, env_has_event(&e, "InvalidAnnotation", "robotlb/ip-mode"), 15000, "the Event");
    ck_assert_int_eq(unlink(gate), 0);
    WAIT_FOR(&e, tu_file_has(e.log, "gate closed"), 15000, "the gate to close");
    char *late = env_service(&e, "late", "ClusterIP", 0, NULL, NULL);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", late);
    long lb2 = env_create_lb(&e, "late.default", labels);
    ck_assert_int_eq(hzt_req(&e.hz, "POST", "/_admin/reset", NULL, NULL, NULL, &r), 0);
    hzt_resp_free(&r);
    for (int i = 0; i < 15; i++) {
        ck_assert_msg(!tu_exited(&e.d), "the daemon exited");
        tu_sleep_ms(200);
    }
    ck_assert(env_lb_exists(&e, lb2));
    ck_assert_int_eq(env_count_requests(&e), 1); /* lb_exists' own GET */
    free(was);
    free(bad);
    free(late);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb daemon");
    TCase *tc = tcase_create("daemon");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, defaults_with_a_token_file_pass);
    tcase_add_test(tc, the_token_comes_from_a_file_or_the_environment_never_from_the_config);
    tcase_add_test(tc, robotlb_environment_variables_override_the_settings);
    tcase_add_test(tc, hccm_environment_variables_are_checked_like_robotlbs);
    tcase_add_test(tc, readme_settings_current);
    tcase_add_test(tc,
                   the_daemon_lists_labelled_balancers_once_per_resync_and_dry_run_writes_nothing);
    tcase_add_test(tc, service_status_events_deletion_and_finalizers);
    tcase_add_test(tc, writes_happen_only_while_the_gate_is_open);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
