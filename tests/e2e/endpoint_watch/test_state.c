/*
 * endpoint_watch's state file, end to end.
 *
 *   - The proxy restarts with every static endpoint unreachable and the
 *     discovery client's API server down: the state file names the
 *     discovered API server that still answers, and kubectl through the
 *     proxy works before discovery is back.
 *   - A state file that is malformed, truncated, oversized or not a regular
 *     file (a FIFO, a directory) is one warning: the start succeeds and the
 *     static endpoints are used.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

static struct ewt T;

static void
setup(void)
{
    ck_assert_int_eq(ewt_init(&T), 0);
}

static void
teardown(void)
{
    ck_assert_msg(ewt_fini(&T) == 0, "the daemon did not end cleanly (see above)");
}

static int
port_of(const char *url)
{
    return atoi(strrchr(url, ':') + 1);
}

/* The daemon: ew with static endpoint `endpoint` and state_file `state`
 * (discovery from T.kubeconfig), a tcp_proxy following it on *port. */
static void
start_proxy(const char *endpoint, const char *state, int *port)
{
    char s[8192], extra[1024], want[64];
    snprintf(s, sizeof(s), "endpoints = [\"%s\"]; kubeconfig = \"%s\"; state_file = \"%s\";",
             endpoint, T.kubeconfig, state);
    for (int attempt = 0; attempt < 3; attempt++) {
        *port = tu_free_port();
        snprintf(extra, sizeof(extra),
                 "{ module = \"tcp_proxy\"; name = \"kubeprism\"; upstreams = [\"ew\"];\n"
                 "    bind_address = \"127.0.0.1\"; bind_port = %d; health_interval = \"2s\";\n"
                 "    health_timeout = \"1s\"; },\n",
                 *port);
        ck_assert_int_eq(ewt_daemon_start(&T, s, extra, NULL), 0);
        snprintf(want, sizeof(want), "listen=127.0.0.1:%d", *port);
        if (ewt_wait_log(&T, want, 5000) == 0)
            return;
        ewt_daemon_stop(&T, 2000, NULL);
    }
    ck_abort_msg("the proxy did not listen");
}

START_TEST(a_restart_with_the_static_endpoints_down_routes_to_the_state_files)
{
    const char *args[] = {"--servers", "2", NULL};
    ck_assert_int_eq(ewt_fake_start(&T, args), 0);
    int p0 = port_of(T.f.server[0]), p1 = port_of(T.f.server[1]);
    char state[4200], ep0[32], ep1[32];
    snprintf(state, sizeof(state), "%s/state", T.dir);
    ck_assert_int_eq(mkdir(state, 0700), 0);
    snprintf(state, sizeof(state), "%s/state/endpoints", T.dir);
    snprintf(ep0, sizeof(ep0), "127.0.0.1:%d", p0);
    snprintf(ep1, sizeof(ep1), "127.0.0.1:%d", p1);
    /* Discovery asks server 0 directly; the slice names server 1. */
    ewt_write_kubeconfig(&T, T.f.server[0]);
    char ports[32];
    snprintf(ports, sizeof(ports), "https=%d", p1);
    ck_assert_int_eq(ewt_slice_put(&T, "default", "kubernetes", "kubernetes", "127.0.0.1", ports),
                     0);
    int port;
    start_proxy(ep0, state, &port);
    /* Discovered, then kept in the state file. */
    char want[80]; /* sorted, as the core delivers */
    int first0 = strcmp(ep0, ep1) < 0;
    snprintf(want, sizeof(want), "%s,%s", first0 ? ep0 : ep1, first0 ? ep1 : ep0);
    ck_assert_int_eq(ewt_wait_set(&T, want, 5000), 0);
    long long end = tu_now_ms() + 5000;
    for (;;) {
        char *s = tu_read_file(state, NULL);
        int has = s && strstr(s, ep1) && strstr(s, "\nend 1\n");
        free(s);
        if (has)
            break;
        ck_assert_msg(tu_now_ms() < end, "the state file was not written");
        tu_sleep_ms(20);
    }
    ck_assert_int_eq(ewt_daemon_stop(&T, 5000, NULL), 0);

    /* Server 0, the static endpoint and discovery's API server, is down. */
    ck_assert_int_eq(ewt_admin(&T, "POST", "/servers/0/stop", NULL), 200);
    start_proxy(ep0, state, &port);
    ck_assert_int_eq(ewt_wait_set(&T, want, 5000), 0);
    ck_assert_int_eq(ewt_wait_log(&T, "from the state file", 1000), 0);

    /* kubectl through the proxy reaches server 1. */
    char url[64], kc[sizeof(T.kubeconfig)], kubectl[4096], cache[4200];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", port);
    char saved[4100];
    snprintf(saved, sizeof(saved), "%s", T.kubeconfig);
    snprintf(kc, sizeof(kc), "%.4000s/kubectl.conf", T.dir);
    snprintf(T.kubeconfig, sizeof(T.kubeconfig), "%s", kc);
    ewt_write_kubeconfig(&T, url);
    snprintf(T.kubeconfig, sizeof(T.kubeconfig), "%s", saved);
    snprintf(kubectl, sizeof(kubectl), "%s", tu_source_path(".tools/bin/kubectl"));
    ck_assert_msg(access(kubectl, X_OK) == 0, "no kubectl at %s: run tests/setup.sh", kubectl);
    snprintf(cache, sizeof(cache), "%s/kcache", T.dir);
    char *argv[] = {kubectl, "--kubeconfig",      kc,    "--cache-dir", cache,
                    "get",   "--request-timeout", "10s", "ns",          "-oname",
                    NULL};
    char *out = NULL;
    int rc = tu_run(argv, NULL, &out, 30000);
    ck_assert_msg(rc == 0 && strstr(out, "namespace/default"), "kubectl: %s", out);
    free(out);
    /* Before discovery is back: its API server is still down. */
    ck_assert_int_eq(ewt_log_count(&T, "discovery answered"), 0);
    ck_assert(ewt_metric(&T, "prismlb_discovery_errors_total", "kubernetes") >= 1);
}
END_TEST

/* Start with the state file prepared by make (at path), discovery pointed at
 * a port where nothing answers: one warning naming why, the static
 * endpoint alone. */
static void
bad_state_file(const char *why, void (*make)(const char *path))
{
    char state[4200], s[16384], url[64];
    snprintf(state, sizeof(state), "%s/endpoints", T.dir);
    make(state);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", tu_free_port());
    ewt_write_kubeconfig(&T, url);
    snprintf(s, sizeof(s),
             "endpoints = [\"127.0.0.1:1\"]; kubeconfig = \"%s\"; state_file = \"%s\";",
             T.kubeconfig, state);
    ck_assert_int_eq(ewt_daemon_start(&T, s, NULL, NULL), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "127.0.0.1:1", 5000), 0);
    ck_assert_int_eq(ewt_wait_log(&T, "state file ignored", 2000), 0);
    char *log = ewt_log(&T);
    const char *at = strstr(log, "state file ignored");
    ck_assert_msg(strstr(at, why) != NULL, "no \"%s\" in: %s", why, log);
    free(log);
    ck_assert_int_eq(ewt_daemon_stop(&T, 5000, NULL), 0);
}

static void
make_malformed(const char *path)
{
    ck_assert_int_eq(tu_write_file(path, "prismlb-endpoints 1\nwritten 1\n10.0.0.1\nend 1\n"), 0);
}

static void
make_truncated(const char *path)
{
    ck_assert_int_eq(tu_write_file(path, "prismlb-endpoints 1\nwritten 1\n10.0.0.1:6443\n"), 0);
}

static void
make_oversized(const char *path)
{
    size_t n = 300 << 10;
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, '#', n);
    s[n] = '\0';
    ck_assert_int_eq(tu_write_file(path, s), 0);
    free(s);
}

static void
make_fifo(const char *path)
{
    ck_assert_int_eq(mkfifo(path, 0600), 0);
}

static void
make_directory(const char *path)
{
    ck_assert_int_eq(mkdir(path, 0700), 0);
}

START_TEST(a_malformed_state_file_is_ignored)
{
    bad_state_file("no host:port", make_malformed);
}
END_TEST

START_TEST(a_truncated_state_file_is_ignored)
{
    bad_state_file("truncated", make_truncated);
}
END_TEST

START_TEST(an_oversized_state_file_is_ignored)
{
    bad_state_file("over the size limit", make_oversized);
}
END_TEST

START_TEST(an_unreadable_state_file_is_ignored)
{
    bad_state_file("not a regular file", make_fifo);
}
END_TEST

START_TEST(a_directory_as_state_file_is_ignored)
{
    bad_state_file("not a regular file", make_directory);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("endpoint_watch_state");
    TCase *tc = tcase_create("state");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_restart_with_the_static_endpoints_down_routes_to_the_state_files);
    tcase_add_test(tc, a_malformed_state_file_is_ignored);
    tcase_add_test(tc, a_truncated_state_file_is_ignored);
    tcase_add_test(tc, an_oversized_state_file_is_ignored);
    tcase_add_test(tc, an_unreadable_state_file_is_ignored);
    tcase_add_test(tc, a_directory_as_state_file_is_ignored);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
