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

#include "hzt.h"

static char *dir;

static void
setup(void)
{
    dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
}

static void
teardown(void)
{
    tu_rmrf(dir);
    free(dir);
}

static const char *
module_path_env(void)
{
    static char env[4200];
    snprintf(env, sizeof(env), "PRISMLB_MODULE_PATH=%s", tu_build_path("modules"));
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

#define CONF_FILE_TOKEN                                                                         \
    "instances = ( { module = \"hetzner_lb\"; name = \"hz\";\n"                                \
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
    ck_assert_int_eq(check_config("instances = ( { module = \"hetzner_lb\"; } );\n", env, &out),
                     0);
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
    char *good[] = {"ROBOTLB_CLUSTER_NAME=prod-1", "ROBOTLB_DEFAULT_LB_ALGORITHM=round-robin",
                    "ROBOTLB_DYNAMIC_NODE_SELECTOR=true", "ROBOTLB_RESYNC_INTERVAL=60",
                    "ROBOTLB_LOG_LEVEL=INFO", "ROBOTLB_DEFAULT_IP_MODE=Proxy",
                    "ROBOTLB_DEFAULT_LB_TYPE=lb21", NULL};
    char *out = NULL;
    ck_assert_int_eq(check_config("instances = ( { module = \"hetzner_lb\";\n"
                                  "  hcloud_token_file = \"token\"; cluster_name = \"Bad!\";"
                                  " } );\n",
                                  good, &out),
                     0);
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

/* The running module: one paginated label-selector list per resync
 * (ROBOTLB_RESYNC_INTERVAL=1 s here), nothing but GETs in dry run, and a
 * clean stop on SIGTERM. */
START_TEST(the_daemon_lists_labelled_balancers_once_per_resync_and_dry_run_writes_nothing)
{
    struct hzt_fake fake;
    struct hzt_resp r;
    struct tu_proc d;
    char conf[4096], path[600], log[600], exe[4096];
    ck_assert_int_eq(hzt_start(&fake, "{\"tokens\":[\"tok-a\"]}", NULL), 0);
    snprintf(conf, sizeof(conf),
             "instances = ( { module = \"hetzner_lb\"; name = \"hz\";\n"
             "  hcloud_endpoint = \"%s\"; dry_run = true; } );\n",
             fake.url);
    snprintf(path, sizeof(path), "%s/prismlb.conf", dir);
    snprintf(log, sizeof(log), "%s/prismlb.log", dir);
    ck_assert_int_eq(tu_write_file(path, conf), 0);
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    char *argv[] = {exe, "--config", path, "--log-level", "debug", NULL};
    char *env[] = {(char *)module_path_env(), "ROBOTLB_HCLOUD_TOKEN=tok-a",
                   "ROBOTLB_RESYNC_INTERVAL=1", NULL};
    ck_assert_int_eq(tu_spawn(&d, argv, env, log), 0);
    long long dl = tu_now_ms() + 15000;
    long lists = 0;
    while (tu_now_ms() < dl && lists < 3) {
        tu_sleep_ms(200);
        ck_assert_msg(!tu_exited(&d), "the daemon exited");
        ck_assert_int_eq(hzt_req(&fake, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
        lists = (long)json_integer_value(
            json_object_get(json_object_get(r.body, "counts"), "GET /v1/load_balancers"));
        hzt_resp_free(&r);
    }
    ck_assert_msg(lists >= 3, "only %ld lists in 15 s", lists);
    ck_assert_int_eq(hzt_req(&fake, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(r.body, "requests"), i, e) {
        const char *p = json_string_value(json_object_get(e, "path"));
        ck_assert_str_eq(json_string_value(json_object_get(e, "method")), "GET");
        ck_assert_int_eq(json_integer_value(json_object_get(e, "status")), 200);
        ck_assert_msg(strstr(p, "label_selector=robotlb/service-uid") &&
                          strstr(p, "per_page=50"),
                      "unexpected request %s", p);
    }
    hzt_resp_free(&r);
    int st = tu_stop(&d, SIGTERM, 10000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    char *text = tu_read_file(log, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_null(strstr(text, "tok-a"));
    free(text);
    ck_assert_int_eq(hzt_stop(&fake), 0);
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
    tcase_add_test(tc, readme_settings_current);
    tcase_add_test(tc,
                   the_daemon_lists_labelled_balancers_once_per_resync_and_dry_run_writes_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
