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
#include <sys/wait.h>

#include "fakeproc.h"
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

struct env2 {
    struct fake kube;
    struct hzt_fake hz;
    struct tu_proc d;
    char log[600];
};

static void
kube_req(struct env2 *e, const char *method, const char *path, const char *ctype, const char *body,
         int want, json_t **out)
{
    struct http_res r;
    ck_assert_int_eq(fake_api(&e->kube, 0, method, path, ctype, body, 1, NULL, 10000, &r), 0);
    ck_assert_msg(r.status == want, "%s %s: %ld %s", method, path, r.status, r.body);
    if (out)
        *out = res_json(&r);
    http_res_free(&r);
}

static char *
create_service(struct env2 *e, const char *name, const char *type, const char *extra_meta,
               const char *extra_spec)
{
    char body[2048];
    json_t *o;
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\"%s},\"spec\":{\"type\":\"%s\",\"selector\":{\"app\":"
             "\"%s\"},\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]%s}}",
             name, extra_meta ? extra_meta : "", type, name, extra_spec ? extra_spec : "");
    kube_req(e, "POST", "/api/v1/namespaces/default/services", "application/json", body, 201, &o);
    const char *uid = json_string_value(json_object_get(json_object_get(o, "metadata"), "uid"));
    ck_assert_ptr_nonnull(uid);
    char *r = strdup(uid);
    json_decref(o);
    return r;
}

/* Create a balancer in the fake Hetzner API; labels JSON text or NULL.
 * Returns its id. */
static long
create_lb(struct env2 *e, const char *name, const char *labels)
{
    char body[1024];
    struct hzt_resp r;
    snprintf(body, sizeof(body),
             "{\"name\":\"%s\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\"%s%s}", name,
             labels ? ",\"labels\":" : "", labels ? labels : "");
    ck_assert_int_eq(hzt_req(&e->hz, "POST", "/load_balancers", "tok-a", "seed", body, &r), 0);
    ck_assert_int_eq(r.status, 201);
    long id =
        (long)json_integer_value(json_object_get(json_object_get(r.body, "load_balancer"), "id"));
    hzt_resp_free(&r);
    return id;
}

static int
lb_exists(struct env2 *e, long id)
{
    char path[64];
    struct hzt_resp r;
    snprintf(path, sizeof(path), "/load_balancers/%ld", id);
    ck_assert_int_eq(hzt_req(&e->hz, "GET", path, "tok-a", "check", NULL, &r), 0);
    int st = (int)r.status;
    hzt_resp_free(&r);
    ck_assert(st == 200 || st == 404);
    return st == 200;
}

/* Start both fakes and the daemon; with gate_open_after (a duration,
 * NULL for none) the module is gated by the lifecycle test module, which
 * opens the gate after that long and closes it gate_close_after later. */
static void
env_start_gated(struct env2 *e, int dry_run, const char *gate_open_after,
                const char *gate_close_after)
{
    char conf[8192], path[600], kc[4300], exe[4096], kubeconfig[8192];
    memset(e, 0, sizeof(*e));
    ck_assert_int_eq(fake_start(&e->kube, NULL), 0);
    ck_assert_int_eq(hzt_start(&e->hz, "{\"tokens\":[\"tok-a\"]}", NULL), 0);
    snprintf(kc, sizeof(kc), "%s/kubeconfig", e->kube.dir);
    snprintf(kubeconfig, sizeof(kubeconfig),
             "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n"
             "    certificate-authority: ca.crt\n    server: %s\n  name: fake\n"
             "contexts:\n- context:\n    cluster: fake\n    user: me\n  name: fake\n"
             "current-context: fake\nusers:\n- name: me\n  user:\n"
             "    client-certificate: client.crt\n    client-key: client.key\n",
             e->kube.server[0]);
    ck_assert_int_eq(tu_write_file(kc, kubeconfig), 0);
    char gate[512] = "";
    if (gate_open_after)
        snprintf(gate, sizeof(gate),
                 "  { module = \"lifecycle\"; name = \"lead\"; gate_open_after = \"%s\";"
                 " gate_close_after = \"%s\"; trace_file = \"%s/trace\"; },\n",
                 gate_open_after, gate_close_after ? gate_close_after : "0", dir);
    snprintf(conf, sizeof(conf),
             "instances = (\n%s  { module = \"hetzner_lb\"; name = \"hz\";%s\n"
             "  hcloud_endpoint = \"%s\"; kubeconfig = \"%s\"; dry_run = %s; } );\n",
             gate, gate_open_after ? " gate = \"lead\";" : "", e->hz.url, kc,
             dry_run ? "true" : "false");
    snprintf(path, sizeof(path), "%s/prismlb.conf", dir);
    snprintf(e->log, sizeof(e->log), "%s/prismlb.log", dir);
    ck_assert_int_eq(tu_write_file(path, conf), 0);
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    char *argv[] = {exe, "--config", path, "--log-level", "debug", NULL};
    char *env[] = {(char *)module_path_env(), "ROBOTLB_HCLOUD_TOKEN=tok-a",
                   "ROBOTLB_RESYNC_INTERVAL=1", NULL};
    ck_assert_int_eq(tu_spawn(&e->d, argv, env, e->log), 0);
}

static void
env_start(struct env2 *e, int dry_run)
{
    env_start_gated(e, dry_run, NULL, NULL);
}

static void
env_stop(struct env2 *e)
{
    int st = tu_stop(&e->d, SIGTERM, 10000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    char *text = tu_read_file(e->log, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "tok-a") == NULL, "the token was logged");
    free(text);
    ck_assert_int_eq(hzt_stop(&e->hz), 0);
    ck_assert_int_eq(fake_stop(&e->kube), 0);
}

static long
count_lists(struct env2 *e)
{
    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&e->hz, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
    long n = (long)json_integer_value(
        json_object_get(json_object_get(r.body, "counts"), "GET /v1/load_balancers"));
    hzt_resp_free(&r);
    return n;
}

/* The running module: one paginated label-selector list per resync
 * (ROBOTLB_RESYNC_INTERVAL=1 s here), nothing but GETs in dry run (though
 * a Service here stopped being a LoadBalancer, whose balancer would be
 * deleted), and a clean stop on SIGTERM. */
START_TEST(the_daemon_lists_labelled_balancers_once_per_resync_and_dry_run_writes_nothing)
{
    struct env2 e;
    struct hzt_resp r;
    char labels[256];
    env_start(&e, 1);
    char *uid = create_service(&e, "was-lb", "ClusterIP", NULL, NULL);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", uid);
    long id = create_lb(&e, "was-lb.default", labels);
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
    ck_assert(lb_exists(&e, id));
    char *text = tu_read_file(e.log, NULL);
    ck_assert_ptr_nonnull(strstr(text, "hetzner dry run: would DELETE /load_balancers/"));
    free(text);
    free(uid);
    env_stop(&e);
}
END_TEST

static int
ingress_ip(struct env2 *e, const char *name, char *ip, size_t len, char *mode, size_t mlen,
           size_t *n)
{
    char path[256];
    json_t *o;
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/services/%s", name);
    kube_req(e, "GET", path, NULL, NULL, 200, &o);
    json_t *ing =
        json_object_get(json_object_get(json_object_get(o, "status"), "loadBalancer"), "ingress");
    const char *v = json_string_value(json_object_get(json_array_get(ing, 0), "ip"));
    const char *m = json_string_value(json_object_get(json_array_get(ing, 0), "ipMode"));
    *n = json_array_size(ing);
    snprintf(ip, len, "%s", v ? v : "");
    snprintf(mode, mlen, "%s", m ? m : "");
    json_decref(o);
    return v != NULL;
}

static int
has_event(struct env2 *e, const char *reason, const char *needle)
{
    json_t *o;
    size_t i;
    json_t *ev;
    int found = 0;
    kube_req(e, "GET", "/api/v1/namespaces/default/events", NULL, NULL, 200, &o);
    json_array_foreach(json_object_get(o, "items"), i, ev)
    {
        const char *r = json_string_value(json_object_get(ev, "reason"));
        const char *m = json_string_value(json_object_get(ev, "message"));
        const char *t = json_string_value(json_object_get(ev, "type"));
        if (r && m && t && !strcmp(r, reason) && !strcmp(t, "Warning") && strstr(m, needle))
            found = 1;
    }
    json_decref(o);
    return found;
}

static int
has_finalizer(struct env2 *e, const char *name)
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

/* The daemon's log to stderr (for failures). */
static void
dump_log(struct env2 *e)
{
    char *text = tu_read_file(e->log, NULL);
    fprintf(stderr, "---- daemon log ----\n%s\n----\n", text ? text : "(none)");
    free(text);
}

#define WAIT_FOR(cond, ms, what)                                                                   \
    do {                                                                                           \
        long long dl_ = tu_now_ms() + (ms);                                                        \
        while (!(cond) && tu_now_ms() < dl_) {                                                     \
            if (tu_exited(&e.d))                                                                   \
                dump_log(&e);                                                                      \
            ck_assert_msg(!tu_exited(&e.d), "the daemon exited");                                  \
            tu_sleep_ms(200);                                                                      \
        }                                                                                          \
        if (!(cond))                                                                               \
            dump_log(&e);                                                                          \
        ck_assert_msg((cond), "timed out waiting for %s", what);                                   \
    } while (0)

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
    struct env2 e;
    char labels[256], ip[64], mode[16];
    size_t n;
    env_start(&e, 0);
    char *web = create_service(&e, "web", "LoadBalancer", NULL, NULL);
    char *bad = create_service(&e, "bad", "LoadBalancer",
                               ",\"annotations\":{\"robotlb/lb-retries\":\"9\"}", NULL);
    char *gone = create_service(&e, "gone", "LoadBalancer", NULL, NULL);
    char *other = create_service(&e, "other", "LoadBalancer", NULL,
                                 ",\"loadBalancerClass\":\"example.com/other\"");
    char *old =
        create_service(&e, "old", "ClusterIP",
                       ",\"finalizers\":[\"robotlb/finalizer\",\"example.com/keep\"]", NULL);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\",\"team\":\"a\"}", web);
    long lb_web = create_lb(&e, "web.default", labels);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", gone);
    long lb_gone = create_lb(&e, "gone.default", labels);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", other);
    long lb_other = create_lb(&e, "other.default", labels);
    long lb_foreign = create_lb(&e, "foreign", "{\"robotlb/service-uid\":\"no-such-uid\"}");
    long lb_legacy = create_lb(&e, "web", NULL);

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

    WAIT_FOR(ingress_ip(&e, "web", ip, sizeof(ip), mode, sizeof(mode), &n), 20000, "web's status");
    ck_assert_str_eq(ip, want_ip);
    ck_assert_str_eq(mode, "VIP");
    ck_assert_uint_eq(n, 1); /* ipv6_ingress is off */
    WAIT_FOR(has_event(&e, "InvalidAnnotation", "robotlb/lb-retries"), 20000, "the warning Event");
    WAIT_FOR(!lb_exists(&e, lb_other), 20000, "the other-class Service's balancer to go");
    WAIT_FOR(!has_finalizer(&e, "old"), 20000, "the finalizer's removal");

    /* type change and deletion */
    kube_req(&e, "PATCH", "/api/v1/namespaces/default/services/web", "application/merge-patch+json",
             "{\"spec\":{\"type\":\"ClusterIP\"}}", 200, NULL);
    kube_req(&e, "DELETE", "/api/v1/namespaces/default/services/gone", NULL, NULL, 200, NULL);
    WAIT_FOR(!lb_exists(&e, lb_web), 20000, "web's balancer to go after the type change");
    WAIT_FOR(!lb_exists(&e, lb_gone), 20000, "gone's balancer to go after the deletion");
    tu_sleep_ms(1500); /* another resync or two */
    ck_assert(lb_exists(&e, lb_foreign));
    ck_assert(lb_exists(&e, lb_legacy));
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

static long
count_requests(struct env2 *e)
{
    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&e->hz, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
    long n = (long)json_array_size(json_object_get(r.body, "requests"));
    hzt_resp_free(&r);
    return n;
}

/* "every write to Hetzner or to Kubernetes happens only while the gate is
 * open; informers run on every replica, so a new leader acts at once":
 * before the gate opens nothing reaches Hetzner and no Event is written;
 * once it opens the balancer of a Service that stopped being ours goes and
 * the warning Event appears; after it closes, nothing is written again. */
START_TEST(writes_happen_only_while_the_gate_is_open)
{
    struct env2 e;
    char labels[256];
    struct hzt_resp r;
    env_start_gated(&e, 0, "4s", "4s");
    long long t0 = tu_now_ms();
    char *was = create_service(&e, "was", "ClusterIP", NULL, NULL);
    char *bad = create_service(&e, "bad", "LoadBalancer",
                               ",\"annotations\":{\"robotlb/ip-mode\":\"vip\"}", NULL);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", was);
    long lb = create_lb(&e, "was.default", labels);
    ck_assert_int_eq(hzt_req(&e.hz, "POST", "/_admin/reset", NULL, NULL, NULL, &r), 0);
    hzt_resp_free(&r);
    while (tu_now_ms() - t0 < 3000) {
        if (tu_exited(&e.d))
            dump_log(&e);
        ck_assert_msg(!tu_exited(&e.d), "the daemon exited");
        tu_sleep_ms(200);
    }
    if (count_requests(&e) != 0) {
        ck_assert_int_eq(hzt_req(&e.hz, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
        fprintf(stderr, "requests: %s\n", r.raw);
        hzt_resp_free(&r);
        dump_log(&e);
    }
    ck_assert_int_eq(count_requests(&e), 0);
    ck_assert(!has_event(&e, "InvalidAnnotation", "robotlb/ip-mode"));
    ck_assert(lb_exists(&e, lb));
    WAIT_FOR(!lb_exists(&e, lb), 15000, "the delete once the gate opened");
    WAIT_FOR(has_event(&e, "InvalidAnnotation", "robotlb/ip-mode"), 15000, "the Event");
    WAIT_FOR(tu_file_has(e.log, "gate closed"), 15000, "the gate to close");
    tu_sleep_ms(500);
    char *late = create_service(&e, "late", "ClusterIP", NULL, NULL);
    snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\"}", late);
    long lb2 = create_lb(&e, "late.default", labels);
    ck_assert_int_eq(hzt_req(&e.hz, "POST", "/_admin/reset", NULL, NULL, NULL, &r), 0);
    hzt_resp_free(&r);
    tu_sleep_ms(3000);
    ck_assert(lb_exists(&e, lb2));
    ck_assert_int_eq(count_requests(&e), 1); /* lb_exists' own GET */
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
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
