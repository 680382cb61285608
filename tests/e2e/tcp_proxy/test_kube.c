/*
 * tcp_proxy end to end with three fake API servers sharing one store
 * (prismlb-fake-kube) behind the proxy, health_check = readyz, and kubectl
 * 1.35 talking to https://127.0.0.1:<proxy port>:
 *   - kubectl keeps working while one server is killed;
 *   - a server switched to /readyz 500 (lost quorum) loses its long-lived
 *     `kubectl get -w` connection within drain_timeout and the watch,
 *     started again, lands on another server and sees new objects.
 */
#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakeproc.h"
#include "env.h"
#include "testutil.h"

static struct fake fk;
static struct proxy px;
static char kubeconfig[4300], cachedir[4300], kubectl[4096];

static void
start_all(void)
{
    const char *extra[] = {"--servers", "3", NULL};
    int frc = fake_start(&fk, extra);
    tp_track(fk.proc.pid);
    ck_assert_int_eq(frc, 0);
    ck_assert_int_eq(fk.nservers, 3);
    const char *eps[3];
    static char ep[3][64];
    for (int i = 0; i < 3; i++) {
        const char *hostport = strstr(fk.server[i], "://");
        ck_assert_ptr_nonnull(hostport);
        snprintf(ep[i], sizeof(ep[i]), "%s", hostport + 3);
        eps[i] = ep[i];
    }
    char settings[16384];
    snprintf(settings, sizeof(settings),
             "health_interval = \"1100ms\"; health_timeout = \"1s\"; drain_timeout = \"2s\";"
             "health_check = \"readyz\"; health_check_ca_file = \"%s/ca.crt\";"
             "health_check_cert_file = \"%s/client.crt\"; "
             "health_check_key_file = \"%s/client.key\";",
             fk.dir, fk.dir, fk.dir);
    ck_assert_msg(proxy_start(&px, settings, eps, 3) == 0, "prismlb did not start");
    ck_assert_int_eq(proxy_wait_log(&px, "is ready", 6000), 0);

    snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", px.dir);
    snprintf(cachedir, sizeof(cachedir), "%s/kcache", px.dir);
    snprintf(kubectl, sizeof(kubectl), "%s", tu_source_path(".tools/bin/kubectl"));
    ck_assert_msg(access(kubectl, X_OK) == 0, "no kubectl at %s: run tests/setup.sh", kubectl);
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", px.port);
    const struct tu_kubeconfig kc = {.server = url, .certdir = fk.dir};
    ck_assert_int_eq(tu_write_kubeconfig(kubeconfig, &kc), 0);
}

static void
stop_all(void)
{
    ck_assert_int_eq(proxy_stop(&px), 0);
    fake_stop(&fk);
}

/* kubectl ARGS...; returns the exit status, *out its output (new). */
static int
run_kubectl(const char *a1, const char *a2, const char *a3, char **out)
{
    const char *args[] = {"--request-timeout", "10s", a1, a2, a3, NULL};
    return tu_kubectl(kubeconfig, cachedir, NULL, out, args);
}

START_TEST(kubectl_keeps_working_while_one_api_server_is_killed)
{
    start_all();
    char *out = NULL;
    ck_assert_int_eq(run_kubectl("get", "ns", "-oname", &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "namespace/default"));
    free(out);

    struct http_res r;
    ck_assert_int_eq(fake_admin(&fk, "POST", "/servers/1/stop", NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);
    /* Each kubectl run is one connection. A dial to the stopped server is
     * refused and moved to another one before any byte reached kubectl:
     * no run fails. */
    int failed = 0;
    long long end = tu_now_ms() + 6000;
    int runs = 0;
    while (tu_now_ms() < end || runs < 12) {
        int rc = run_kubectl("get", "ns", "-oname", &out);
        if (rc != 0 || !strstr(out, "namespace/kube-system"))
            failed++;
        free(out);
        runs++;
        tu_sleep_ms(100);
    }
    ck_assert_msg(failed == 0, "%d of %d kubectl runs failed", failed, runs);
    ck_assert_int_eq(proxy_wait_log(&px, "is unhealthy", 3000), 0);
    stop_all();
}
END_TEST

/* Servers that have answered a watch of namespaces, from the request log:
 * bit i set for server i; *n counts the watch requests. */
static unsigned
watch_servers(int *n)
{
    struct http_res r;
    unsigned mask = 0;
    *n = 0;
    ck_assert_int_eq(fake_admin(&fk, "GET", "/requests", NULL, &r), 0);
    json_t *j = json_loads(r.body, 0, NULL);
    http_res_free(&r);
    ck_assert_ptr_nonnull(j);
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(j, "items"), i, it)
    {
        const char *path = json_string_value(json_object_get(it, "path"));
        json_int_t srv = json_integer_value(json_object_get(it, "server"));
        if (path && strstr(path, "/api/v1/namespaces") && strstr(path, "watch=true")) {
            mask |= 1u << srv;
            (*n)++;
        }
    }
    json_decref(j);
    return mask;
}

START_TEST(a_server_losing_readiness_loses_its_watch_which_resumes_on_another)
{
    start_all();
    /* `kubectl get -w` ends when its connection ends; a client such as the
     * kubelet watches again, which the loop stands for. */
    char script[16384], wlog[4300];
    snprintf(wlog, sizeof(wlog), "%s/watch.log", px.dir);
    snprintf(script, sizeof(script),
             "for i in 1 2 3; do '%s' --kubeconfig '%s' --cache-dir '%s' get ns -w "
             "-o name; echo watch-ended; done",
             kubectl, kubeconfig, cachedir);
    struct tu_proc w;
    char *argv[] = {"sh", "-c", script, NULL};
    ck_assert_int_eq(tu_spawn(&w, argv, NULL, wlog), 0);
    tp_track(-w.pid); /* the loop and its kubectl */

    int n = 0;
    unsigned first = 0;
    long long end = tu_now_ms() + 10000;
    while ((first = watch_servers(&n)) == 0 && tu_now_ms() < end)
        tu_sleep_ms(100);
    ck_assert_msg(n == 1, "%d watches", n);
    int srv = __builtin_ctz(first);

    char path[64];
    struct http_res r;
    snprintf(path, sizeof(path), "/servers/%d/quorum-lost", srv);
    ck_assert_int_eq(fake_admin(&fk, "POST", path, NULL, &r), 0);
    http_res_free(&r);
    long long lost = tu_now_ms();
    /* Two failed probes (2 x 1.1 s), then drain_timeout (2 s): the watch
     * connection is closed, and the next watch goes to a ready server. */
    char line[64];
    ck_assert_msg(tu_wait_line(wlog, "watch-ended", line, sizeof(line), 20000) == 0,
                  "the watch on the unready server was not closed");
    long long closed = tu_now_ms() - lost;
    ck_assert_msg(closed >= 2000, "closed %lld ms after quorum was lost", closed);
    ck_assert_int_eq(proxy_wait_log(&px, "why=\"not ready while another upstream is\"", 3000), 0);
    end = tu_now_ms() + 10000;
    unsigned now;
    while (((now = watch_servers(&n)), n < 2) && tu_now_ms() < end)
        tu_sleep_ms(100);
    ck_assert_int_ge(n, 2);
    ck_assert_msg((now & ~(1u << srv)) != 0, "the watch came back to server %d", srv);

    /* The resumed watch works: a namespace created now shows up in it. */
    int other = __builtin_ctz(now & ~(1u << srv));
    ck_assert_int_eq(fake_api(&fk, other, "POST", "/api/v1/namespaces", "application/json",
                              "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\","
                              "\"metadata\":{\"name\":\"after-failover\"}}",
                              1, NULL, 10000, &r),
                     0);
    ck_assert_int_eq(r.status, 201);
    http_res_free(&r);
    ck_assert_int_eq(tu_wait_line(wlog, "namespace/after-failover", line, sizeof(line), 10000), 0);
    kill(-w.pid, SIGTERM); /* the loop and its kubectl: our own process group */
    tu_stop(&w, SIGTERM, 5000);
    stop_all();
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy_kube");
    TCase *tc = tcase_create("kube");
    tcase_add_unchecked_fixture(tc, tp_registry_init, tp_reap_all);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, kubectl_keeps_working_while_one_api_server_is_killed);
    tcase_add_test(tc, a_server_losing_readiness_loses_its_watch_which_resumes_on_another);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run_suite(suite());
}
