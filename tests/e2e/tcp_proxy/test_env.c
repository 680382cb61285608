/*
 * The proxy role from extractedprism's EP_* environment variables: a
 * config naming the three instances and nothing else, every setting from
 * the variables of extractedprism's flag table (endpoints, listener,
 * health checks with readyz and a client certificate, health server,
 * liveness, log level); kubectl works through the proxy and the health
 * server answers on EP_HEALTH_PORT. With two tcp_proxy instances,
 * EP_BIND_PORT is ambiguous: the start fails naming it.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "fakeproc.h"
#include "env.h"
#include "testutil.h"

static struct fake fk;
static char dir[4200], conf[4300], log_path[4300], module_path[16800], th[64];

/* The proxy role's three instances, with no setting an EP_* variable
 * gives; extra: more instance groups (or ""). */
static void
write_conf(const char *extra)
{
    char text[4096];
    snprintf(text, sizeof(text),
             "%s\n"
             "instances = (\n"
             "  { module = \"endpoint_watch\"; name = \"apiservers\"; },\n"
             "  { module = \"tcp_proxy\"; name = \"kubeprism\"; upstreams = [\"apiservers\"]; },\n"
             "%s"
             "  { module = \"metrics\"; name = \"metrics\"; }\n"
             ");\n",
             th, extra);
    ck_assert_int_eq(tu_write_file(conf, text), 0);
}

static void
setup(void)
{
    const char *extra[] = {"--servers", "3", NULL};
    int frc = fake_start(&fk, extra);
    tp_track(fk.proc.pid);
    ck_assert_int_eq(frc, 0);
    char *d = tu_mkdtemp();
    ck_assert_ptr_nonnull(d);
    snprintf(dir, sizeof(dir), "%s", d);
    free(d);
    snprintf(conf, sizeof(conf), "%s/proxy.conf", dir);
    snprintf(log_path, sizeof(log_path), "%s/prismlb.log", dir);
    static const char *const mods[] = {"modules/mod_tcp_proxy", "modules/mod_endpoint_watch",
                                       "modules/mod_metrics", NULL};
    snprintf(module_path, sizeof(module_path), "%s", tu_module_path_env(mods));
    /* The suites run with TP_THREADS=1 and 2 (meson.build). */
    const char *threads = getenv("TP_THREADS");
    th[0] = '\0';
    if (threads && *threads)
        snprintf(th, sizeof(th), "threads = %d;", atoi(threads));
}

static void
teardown(void)
{
    fake_stop(&fk);
    tu_rmrf(dir);
}

START_TEST(the_proxy_role_runs_from_extractedprisms_variables_alone)
{
    write_conf("");
    int port = tu_free_port(), hport = tu_free_port();
    char endpoints[512] = "", v[24][4300];
    for (int i = 0; i < fk.nservers; i++) {
        const char *hostport = strstr(fk.server[i], "://");
        ck_assert_ptr_nonnull(hostport);
        if (i)
            strncat(endpoints, ",", sizeof(endpoints) - strlen(endpoints) - 1);
        strncat(endpoints, hostport + 3, sizeof(endpoints) - strlen(endpoints) - 1);
    }
    int n = 0;
    snprintf(v[n++], sizeof(v[0]), "%.4290s", module_path);
    snprintf(v[n++], sizeof(v[0]), "EP_ENDPOINTS=%s", endpoints);
    snprintf(v[n++], sizeof(v[0]), "EP_ENABLE_DISCOVERY=false");
    snprintf(v[n++], sizeof(v[0]), "EP_BIND_ADDRESS=127.0.0.1");
    snprintf(v[n++], sizeof(v[0]), "EP_BIND_PORT=%d", port);
    snprintf(v[n++], sizeof(v[0]), "EP_HEALTH_BIND_ADDRESS=127.0.0.1");
    snprintf(v[n++], sizeof(v[0]), "EP_HEALTH_PORT=%d", hport);
    snprintf(v[n++], sizeof(v[0]), "EP_HEALTH_INTERVAL=2s");
    snprintf(v[n++], sizeof(v[0]), "EP_HEALTH_TIMEOUT=1s");
    snprintf(v[n++], sizeof(v[0]), "EP_DRAIN_TIMEOUT=5s");
    snprintf(v[n++], sizeof(v[0]), "EP_UPSTREAM_SELECTION=latency");
    snprintf(v[n++], sizeof(v[0]), "EP_HEALTH_CHECK=readyz");
    snprintf(v[n++], sizeof(v[0]), "EP_HEALTH_CHECK_CA_FILE=%s/ca.crt", fk.dir);
    snprintf(v[n++], sizeof(v[0]), "EP_HEALTH_CHECK_CERT_FILE=%s/client.crt", fk.dir);
    snprintf(v[n++], sizeof(v[0]), "EP_HEALTH_CHECK_KEY_FILE=%s/client.key", fk.dir);
    snprintf(v[n++], sizeof(v[0]), "EP_HEALTH_CHECK_SERVER_NAME=kubernetes.default.svc");
    snprintf(v[n++], sizeof(v[0]), "EP_LIVENESS_INTERVAL=1s");
    snprintf(v[n++], sizeof(v[0]), "EP_LIVENESS_THRESHOLD=3s");
    snprintf(v[n++], sizeof(v[0]), "EP_LOG_LEVEL=debug");
    char *env[32];
    for (int i = 0; i < n; i++)
        env[i] = v[i];
    env[n] = NULL;

    struct tu_proc d;
    ck_assert_int_eq(tu_prismlb_spawn(&d, conf, log_path, NULL, env), 0);
    tp_track(d.pid);
    /* Listening on EP_BIND_PORT; readyz with the client certificate: each
     * upstream turns ready; debug lines (EP_LOG_LEVEL). */
    char want[64];
    snprintf(want, sizeof(want), "listen=127.0.0.1:%d", port);
    long long end = tu_now_ms() + 10000;
    for (;;) {
        char *s = tu_read_file(log_path, NULL);
        int ready = 0;
        for (const char *q = s; q && (q = strstr(q, "msg=\"upstream is ready\"")); q++)
            ready++;
        int debug = s && strstr(s, "level=debug");
        int listening = s && strstr(s, want);
        free(s);
        if (ready == fk.nservers && debug && listening)
            break;
        ck_assert_msg(tu_now_ms() < end, "%d of %d upstreams ready (debug lines: %d)", ready,
                      fk.nservers, debug != 0);
        tu_sleep_ms(50);
    }
    /* The health server on EP_HEALTH_PORT. */
    int status = 0;
    char *body = NULL;
    ck_assert_int_eq(http_get(hport, "/readyz", &status, &body), 0);
    ck_assert_msg(status == 200, "/readyz %d: %s", status, body);
    free(body);

    /* kubectl through the proxy. */
    char kubeconfig[4400], cache[4400], url[64];
    snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", dir);
    snprintf(cache, sizeof(cache), "%s/kcache", dir);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", port);
    const struct tu_kubeconfig kc = {.server = url, .certdir = fk.dir};
    ck_assert_int_eq(tu_write_kubeconfig(kubeconfig, &kc), 0);
    const char *kargs[] = {"get", "ns", "-oname", NULL};
    char *out = NULL;
    int rc = tu_kubectl(kubeconfig, cache, NULL, &out, kargs);
    ck_assert_msg(rc == 0 && out && strstr(out, "namespace/default"), "kubectl: %s", out);
    free(out);
    ck_assert_int_eq(tu_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(an_ambiguous_variable_fails_the_start_naming_it)
{
    write_conf("  { module = \"tcp_proxy\"; name = \"second\"; upstreams = [\"apiservers\"];\n"
               "    bind_port = 17445; },\n");
    char port[32];
    snprintf(port, sizeof(port), "EP_BIND_PORT=%d", tu_free_port());
    char *env[] = {module_path, "EP_ENDPOINTS=127.0.0.1:6443", port, NULL};
    char exe[4096];
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    /* The check and the start refuse it alike. */
    char *check[] = {exe, "--config", conf, "--check-config", NULL};
    char *out = NULL;
    int rc = tu_run(check, env, &out, 30000);
    ck_assert_msg(rc != 0 && out && strstr(out, "EP_BIND_PORT is ambiguous") &&
                      strstr(out, "\"kubeprism\", \"second\"") && strstr(out, "proxy.conf:"),
                  "exit %d: %s", rc, out);
    free(out);
    char *start[] = {exe, "--config", conf, NULL};
    rc = tu_run(start, env, &out, 30000);
    ck_assert_msg(rc != 0 && out && strstr(out, "EP_BIND_PORT is ambiguous"), "exit %d: %s", rc,
                  out);
    free(out);
    /* Without the variable both instances start from their settings. */
    char *none[] = {module_path, "EP_ENDPOINTS=127.0.0.1:6443", NULL};
    rc = tu_run(check, none, &out, 30000);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy_env");
    TCase *tc = tcase_create("env");
    tcase_add_unchecked_fixture(tc, tp_registry_init, tp_reap_all);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, the_proxy_role_runs_from_extractedprisms_variables_alone);
    tcase_add_test(tc, an_ambiguous_variable_fails_the_start_naming_it);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run_suite(suite());
}
