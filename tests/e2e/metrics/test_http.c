/*
 * mod_metrics over HTTP, against the real daemon: each endpoint, each
 * method rule, liveness of the loop and of a wedged instance, readiness,
 * ?verbose, kube-apiserver's /livez, /readyz/<check> and ?exclude=, and
 * several instances in one daemon.
 */
#include <check.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env.h"
#include "testutil.h"

static char url_buf[512];

static const char *
url(int port, const char *path)
{
    snprintf(url_buf, sizeof(url_buf), "http://127.0.0.1:%d%s", port, path);
    return url_buf;
}

/* GET url and assert the status; returns the response (caller frees). */
static struct me_resp
get_status(int port, const char *path, long want)
{
    struct me_resp r;
    ck_assert_msg(me_http("GET", url(port, path), NULL, &r) == 0, "GET %s failed", path);
    ck_assert_msg(r.status == want, "GET %s: status %ld, want %ld; body:\n%s", path, r.status, want,
                  r.body);
    return r;
}

static void
assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        ck_abort_msg("expected \"%s\" in:\n%s", needle, hay);
}

/* ------------------------------------------------------------------ */

START_TEST(endpoints_answer_get)
{
    int port = tu_free_port();
    char conf[512];
    snprintf(conf, sizeof(conf), "instances = ( { module = \"metrics\"; port = %d; } );\n", port);
    struct tu_daemon d;
    me_daemon_start(&d, conf, port);
    char buf[256];

    struct me_resp r = get_status(port, "/healthz", 200);
    ck_assert_str_eq(r.body, "ok\n");
    ck_assert_str_eq(me_header(&r, "Content-Type", buf, sizeof(buf)), "text/plain; charset=utf-8");
    me_resp_free(&r);

    r = get_status(port, "/readyz", 200);
    ck_assert_str_eq(r.body, "ok\n");
    me_resp_free(&r);

    r = get_status(port, "/healthz?verbose", 200);
    ck_assert_str_eq(r.body, "[+]metrics/event-loop ok\nhealthz check passed\n");
    me_resp_free(&r);

    r = get_status(port, "/readyz?verbose=1", 200);
    ck_assert_str_eq(r.body, "readyz check passed\n"); /* nothing registered a readiness check */
    me_resp_free(&r);

    r = get_status(port, "/healthz?verbose=false", 200);
    ck_assert_str_eq(r.body, "ok\n");
    me_resp_free(&r);

    r = get_status(port, "/metrics", 200);
    ck_assert_str_eq(me_header(&r, "Content-Type", buf, sizeof(buf)),
                     "text/plain; version=0.0.4; charset=utf-8");
    assert_contains(r.body, "# TYPE process_resident_memory_bytes gauge\n");
    assert_contains(r.body, "# TYPE process_cpu_seconds_total counter\n");
    assert_contains(r.body, "\nprocess_open_fds ");
    assert_contains(r.body, "\nprocess_max_fds ");
    assert_contains(r.body, "\nprocess_virtual_memory_bytes ");
    assert_contains(r.body, "\nprocess_start_time_seconds ");
    assert_contains(r.body, "prismlb_build_info{version=\"");
    assert_contains(r.body, "abi=\"" ME_ABI "\"} 1\n");
    /* The values are real: RSS of a running daemon is far above zero, the
     * start time is within the last hour. */
    const char *p = strstr(r.body, "\nprocess_resident_memory_bytes ");
    ck_assert_ptr_nonnull(p);
    ck_assert_double_gt(strtod(p + strlen("\nprocess_resident_memory_bytes "), NULL), 1e5);
    p = strstr(r.body, "\nprocess_start_time_seconds ");
    double st = strtod(p + strlen("\nprocess_start_time_seconds "), NULL);
    ck_assert_double_gt(st, (double)time(NULL) - 3600);
    ck_assert_double_le(st, (double)time(NULL) + 1);
    p = strstr(r.body, "\nprocess_open_fds ");
    ck_assert_double_ge(strtod(p + strlen("\nprocess_open_fds "), NULL), 4); /* 0-2, listener */
    me_resp_free(&r);

    me_daemon_stop(&d);
}
END_TEST

START_TEST(method_rules)
{
    int port = tu_free_port();
    char conf[512];
    snprintf(conf, sizeof(conf), "instances = ( { module = \"metrics\"; port = %d; } );\n", port);
    struct tu_daemon d;
    me_daemon_start(&d, conf, port);
    static const char *const paths[] = {"/healthz", "/readyz", "/metrics"};
    char buf[256];

    for (size_t i = 0; i < 3; i++) {
        struct me_resp r;
        /* HEAD: the GET status and headers, no body. */
        ck_assert_int_eq(me_http("HEAD", url(port, paths[i]), NULL, &r), 0);
        ck_assert_msg(r.status == 200, "HEAD %s: %ld", paths[i], r.status);
        ck_assert_int_eq(r.body_seen, 0);
        ck_assert_ptr_nonnull(me_header(&r, "Content-Type", buf, sizeof(buf)));
        me_resp_free(&r);

        /* OPTIONS: 204 with Allow, no body. */
        ck_assert_int_eq(me_http("OPTIONS", url(port, paths[i]), NULL, &r), 0);
        ck_assert_msg(r.status == 204, "OPTIONS %s: %ld", paths[i], r.status);
        ck_assert_str_eq(me_header(&r, "Allow", buf, sizeof(buf)), "GET, HEAD, OPTIONS");
        ck_assert_int_eq((int)r.len, 0);
        me_resp_free(&r);

        /* Anything else: 405 with Allow. */
        static const char *const bad[] = {"POST", "PUT", "DELETE", "PATCH"};
        for (size_t k = 0; k < 4; k++) {
            ck_assert_int_eq(me_http(bad[k], url(port, paths[i]), NULL, &r), 0);
            ck_assert_msg(r.status == 405, "%s %s: %ld", bad[k], paths[i], r.status);
            ck_assert_str_eq(me_header(&r, "Allow", buf, sizeof(buf)), "GET, HEAD, OPTIONS");
            me_resp_free(&r);
        }
    }

    /* Unknown paths, whatever the method. */
    static const char *const unknown[] = {"/",       "/metricsx", "/metrics/", "/healthzx",
                                          "/livezx", "/readyz/",  "/nope"};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        struct me_resp r = get_status(port, unknown[i], 404);
        me_resp_free(&r);
        ck_assert_int_eq(me_http("POST", url(port, unknown[i]), NULL, &r), 0);
        ck_assert_int_eq(r.status, 404);
        me_resp_free(&r);
    }
    me_daemon_stop(&d);
}
END_TEST

/* The loop's own heartbeat keeps /healthz up past liveness_threshold. */
START_TEST(loop_heartbeat_keeps_healthz_ok)
{
    int port = tu_free_port();
    char conf[512];
    snprintf(conf, sizeof(conf),
             "instances = ( { module = \"metrics\"; port = %d;\n"
             "  liveness_interval = \"1s\"; liveness_threshold = \"2s\"; } );\n",
             port);
    struct tu_daemon d;
    me_daemon_start(&d, conf, port);
    /* Answered 200 throughout, until an answer came 4.5 s (twice the
     * threshold and more) after ready: the loop ends on the answers' time,
     * not on a count a busy machine would not reach. */
    long long until = d.ready_ms + 4500, last = 0;
    int n = 0;
    while (last < until) {
        struct me_resp r = get_status(port, "/healthz", 200);
        me_resp_free(&r);
        last = tu_now_ms();
        n++;
        if (last < until)
            tu_sleep_ms(250);
    }
    ck_assert_int_ge(n, 2);
    me_daemon_stop(&d);
}
END_TEST

/* A wedged instance (mod_lifecycle stops beating its "loop" check after
 * wedge_after) turns /healthz 503 within liveness_threshold of its last
 * heartbeat, and the answer names the instance and the check. */
START_TEST(wedged_instance_fails_healthz)
{
    const int wedge_ms = 1000, threshold_ms = 2000;
    int port = tu_free_port();
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "instances = (\n"
             "  { module = \"lifecycle\"; name = \"wedgy\"; trace_file = \"trace.log\";\n"
             "    wedge_after = %d; },\n"
             "  { module = \"metrics\"; port = %d;\n"
             "    liveness_interval = \"1s\"; liveness_threshold = %d; }\n"
             ");\n",
             wedge_ms / 1000, port, threshold_ms / 1000);
    struct tu_daemon d;
    me_daemon_start(&d, conf, port);

    struct me_resp r = get_status(port, "/healthz", 200);
    ck_assert_str_eq(r.body, "ok\n");
    me_resp_free(&r);
    r = get_status(port, "/healthz?verbose", 200);
    ck_assert_str_eq(r.body, "[+]wedgy/loop ok\n[+]metrics/event-loop ok\nhealthz check passed\n");
    me_resp_free(&r);

    long long t503 = -1;
    while (tu_now_ms() < d.ready_ms + 15000) {
        ck_assert_int_eq(me_http("GET", url(port, "/healthz"), NULL, &r), 0);
        if (r.status == 503) {
            t503 = tu_now_ms();
            break;
        }
        ck_assert_int_eq(r.status, 200);
        me_resp_free(&r);
        tu_sleep_ms(50);
    }
    ck_assert_msg(t503 > 0, "/healthz never turned 503");
    /* lifecycle started before the metrics port listened, so it wedged at
     * most wedge_ms after ready_ms; its last beat was at most ~100 ms before. */
    long long latest = d.ready_ms + wedge_ms + threshold_ms + 700;
    long long earliest = d.started_ms + wedge_ms + threshold_ms - 600;
    ck_assert_msg(t503 <= latest, "503 came %lld ms after the port opened; want <= %d",
                  t503 - d.ready_ms, wedge_ms + threshold_ms + 700);
    ck_assert_msg(t503 >= earliest, "503 came %lld ms after the spawn: before the threshold",
                  t503 - d.started_ms);
    assert_contains(r.body, "[-]wedgy/loop failed: no heartbeat for ");
    assert_contains(r.body, "(threshold 2.0s)\nhealthz check failed\n");
    ck_assert_ptr_null(strstr(r.body, "event-loop")); /* short: failing checks only */
    me_resp_free(&r);

    r = get_status(port, "/healthz?verbose", 503);
    assert_contains(r.body, "[-]wedgy/loop failed: no heartbeat for ");
    assert_contains(r.body, "[+]metrics/event-loop ok\nhealthz check failed\n");
    me_resp_free(&r);
    ck_assert_int_eq(me_http("HEAD", url(port, "/healthz"), NULL, &r), 0);
    ck_assert_int_eq(r.status, 503);
    me_resp_free(&r);

    /* Readiness is another question: nothing registered any. */
    r = get_status(port, "/readyz", 200);
    me_resp_free(&r);
    me_daemon_stop(&d);
}
END_TEST

/* /readyz is 503 while a readiness check is not ok, naming it, and 200
 * once every check is ok. */
START_TEST(readiness_follows_checks)
{
    int port = tu_free_port();
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "instances = (\n"
             "  { module = \"lifecycle\"; name = \"warm\"; trace_file = \"warm.log\";\n"
             "    ready_after = \"1500ms\"; },\n"
             "  { module = \"lifecycle\"; name = \"cold\"; trace_file = \"cold.log\";\n"
             "    ready_after = \"3s\"; },\n"
             "  { module = \"metrics\"; port = %d; }\n"
             ");\n",
             port);
    struct tu_daemon d;
    me_daemon_start(&d, conf, port);

    struct me_resp r = get_status(port, "/readyz", 503);
    ck_assert_str_eq(r.body, "[-]warm/ready failed: warming up (ready_after)\n"
                             "[-]cold/ready failed: warming up (ready_after)\n"
                             "readyz check failed\n");
    me_resp_free(&r);
    /* Liveness does not care. */
    r = get_status(port, "/healthz", 200);
    me_resp_free(&r);

    /* warm turns ready first: still 503, naming only cold. */
    long long deadline = d.ready_ms + 10000;
    for (;;) {
        ck_assert_int_eq(me_http("GET", url(port, "/readyz?verbose"), NULL, &r), 0);
        if (strstr(r.body, "[+]warm/ready ok"))
            break;
        ck_assert_int_eq(r.status, 503);
        me_resp_free(&r);
        ck_assert_msg(tu_now_ms() < deadline, "warm never turned ready");
        tu_sleep_ms(50);
    }
    if (r.status == 503) {
        ck_assert_str_eq(r.body, "[+]warm/ready ok\n"
                                 "[-]cold/ready failed: warming up (ready_after)\n"
                                 "readyz check failed\n");
        me_resp_free(&r);
        r = get_status(port, "/readyz", 503);
        ck_assert_str_eq(r.body, "[-]cold/ready failed: warming up (ready_after)\n"
                                 "readyz check failed\n");
    }
    me_resp_free(&r);

    for (;;) {
        ck_assert_int_eq(me_http("GET", url(port, "/readyz"), NULL, &r), 0);
        if (r.status == 200)
            break;
        ck_assert_int_eq(r.status, 503);
        me_resp_free(&r);
        ck_assert_msg(tu_now_ms() < deadline, "cold never turned ready");
        tu_sleep_ms(50);
    }
    ck_assert_str_eq(r.body, "ok\n");
    me_resp_free(&r);
    r = get_status(port, "/readyz?verbose", 200);
    ck_assert_str_eq(r.body, "[+]warm/ready ok\n[+]cold/ready ok\nreadyz check passed\n");
    me_resp_free(&r);
    me_daemon_stop(&d);
}
END_TEST

/* As kube-apiserver serves them: /livez is /healthz; /readyz/<check> (here
 * instance/check) answers for that check alone, 500 with the reason when it
 * fails, 404 for a check that does not exist; ?exclude=<check> leaves a
 * check out (listed as excluded with ?verbose) and warns about one that
 * matches nothing. */
START_TEST(livez_single_checks_and_exclude)
{
    int port = tu_free_port();
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "instances = (\n"
             "  { module = \"lifecycle\"; name = \"warm\"; trace_file = \"warm.log\";\n"
             "    ready_after = \"100ms\"; },\n"
             "  { module = \"lifecycle\"; name = \"cold\"; trace_file = \"cold.log\";\n"
             "    ready_after = \"1h\"; },\n"
             "  { module = \"metrics\"; name = \"probes\"; port = %d; }\n"
             ");\n",
             port);
    struct tu_daemon d;
    me_daemon_start(&d, conf, port);

    struct me_resp r = get_status(port, "/livez", 200);
    ck_assert_str_eq(r.body, "ok\n");
    me_resp_free(&r);
    r = get_status(port, "/livez/probes/event-loop", 200);
    ck_assert_str_eq(r.body, "ok\n");
    me_resp_free(&r);
    r = get_status(port, "/healthz/warm/loop", 200);
    me_resp_free(&r);
    r = get_status(port, "/readyz/cold/ready", 500);
    ck_assert_str_eq(r.body, "internal server error: warming up (ready_after)\n");
    me_resp_free(&r);
    r = get_status(port, "/readyz/cold/nosuch", 404);
    me_resp_free(&r);
    r = get_status(port, "/livez/cold/ready", 404); /* a readiness check, not a liveness one */
    me_resp_free(&r);
    long long deadline = d.ready_ms + 10000;
    for (;;) {
        ck_assert_int_eq(me_http("GET", url(port, "/readyz/warm/ready"), NULL, &r), 0);
        if (r.status == 200)
            break;
        ck_assert_int_eq(r.status, 500);
        me_resp_free(&r);
        ck_assert_msg(tu_now_ms() < deadline, "warm never turned ready");
        tu_sleep_ms(50);
    }
    ck_assert_str_eq(r.body, "ok\n");
    me_resp_free(&r);

    r = get_status(port, "/readyz", 503);
    me_resp_free(&r);
    r = get_status(port, "/readyz?exclude=cold/ready", 200);
    ck_assert_str_eq(r.body, "ok\n");
    me_resp_free(&r);
    r = get_status(port, "/readyz?verbose&exclude=cold%2Fready", 200);
    ck_assert_str_eq(r.body, "[+]warm/ready ok\n[+]cold/ready excluded: ok\nreadyz check passed\n");
    me_resp_free(&r);
    r = get_status(port, "/readyz?exclude=cold/ready&exclude=warm/ready&exclude=etcd", 200);
    ck_assert_str_eq(r.body, "warning: some health checks cannot be excluded: no matches for "
                             "etcd\nok\n");
    me_resp_free(&r);
    r = get_status(port, "/livez?exclude=warm/loop&verbose", 200);
    assert_contains(r.body, "[+]warm/loop excluded: ok\n");
    assert_contains(r.body, "[+]cold/loop ok\n");
    me_resp_free(&r);
    me_daemon_stop(&d);
}
END_TEST

/* extractedprism's --health-bind-address defaults to --bind-address: with
 * no bind_address the probe server listens where the config's proxy does
 * (::1 here), and not on 127.0.0.1. */
START_TEST(probe_server_defaults_to_the_proxy_bind_address)
{
    int mport = tu_free_port(), pport = tu_free_port();
    char conf[1024], url6[128];
    snprintf(conf, sizeof(conf),
             "instances = (\n"
             "  { module = \"endpoint_watch\"; name = \"eps\"; endpoints = [\"127.0.0.1:1\"];\n"
             "    enable_discovery = false; },\n"
             "  { module = \"tcp_proxy\"; name = \"kubeprism\"; upstreams = [\"eps\"];\n"
             "    bind_address = \"::1\"; bind_port = %d; },\n"
             "  { module = \"metrics\"; name = \"probes\"; port = %d; }\n"
             ");\n",
             pport, mport);
    struct tu_daemon d;
    me_daemon_start(&d, conf, 0);
    snprintf(url6, sizeof(url6), "http://[::1]:%d/healthz", mport);
    struct me_resp r;
    long long dl = tu_now_ms() + 10000;
    memset(&r, 0, sizeof(r));
    while (me_http("GET", url6, NULL, &r) != 0 || r.status != 200) {
        me_resp_free(&r);
        memset(&r, 0, sizeof(r));
        ck_assert_msg(tu_now_ms() < dl, "no probe server on [::1]:%d", mport);
        tu_sleep_ms(50);
    }
    ck_assert_str_eq(r.body, "ok\n");
    me_resp_free(&r);
    memset(&r, 0, sizeof(r));
    int rc4 = me_http("GET", url(mport, "/healthz"), NULL, &r);
    me_resp_free(&r);
    ck_assert_msg(rc4 != 0, "the probe server answers on 127.0.0.1 too");
    char *log = tu_daemon_log(&d);
    assert_contains(log, "instance=probes module=metrics msg=listening address=::1");
    free(log);
    me_daemon_stop(&d);
}
END_TEST

/* A public /metrics port and a loopback probe port in one daemon; each
 * serves only what it was asked to. The probe instance, with a threshold
 * shorter than the other's heartbeat interval, judges only its own loop
 * heartbeat. "localhost", a hostname, is resolved (to 127.0.0.1). */
START_TEST(several_instances)
{
    int pub = tu_free_port(), probe = tu_free_port(), both = tu_free_port();
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "instances = (\n"
             "  { module = \"metrics\"; name = \"public\"; bind_address = \"0.0.0.0\";\n"
             "    port = %d; probes = false; },\n"
             "  { module = \"metrics\"; name = \"probes\"; bind_address = \"localhost\";\n"
             "    port = %d; metrics = false;\n"
             "    liveness_interval = \"1s\"; liveness_threshold = \"2s\"; },\n"
             "  { module = \"metrics\"; name = \"both\"; port = %d;\n"
             "    liveness_interval = \"10s\"; liveness_threshold = \"30s\"; }\n"
             ");\n",
             pub, probe, both);
    struct tu_daemon d;
    me_daemon_start(&d, conf, pub);
    ck_assert_int_eq(tu_wait_port("127.0.0.1", probe, 5000), 0);
    ck_assert_int_eq(tu_wait_port("127.0.0.1", both, 5000), 0);
    char *dlog = tu_daemon_log(&d);
    assert_contains(dlog, "msg=listening address=127.0.0.1");
    assert_contains(dlog, "host=localhost");
    free(dlog);

    struct me_resp r = get_status(pub, "/metrics", 200);
    assert_contains(r.body, "prismlb_build_info{");
    /* One family each, though three instances registered them. */
    const char *first = strstr(r.body, "# TYPE process_open_fds gauge");
    ck_assert_ptr_nonnull(first);
    ck_assert_ptr_null(strstr(first + 1, "# TYPE process_open_fds gauge"));
    me_resp_free(&r);
    r = get_status(pub, "/healthz", 404);
    me_resp_free(&r);
    r = get_status(pub, "/readyz", 404);
    me_resp_free(&r);

    r = get_status(probe, "/metrics", 404);
    me_resp_free(&r);
    r = get_status(probe, "/healthz?verbose", 200);
    ck_assert_str_eq(r.body, "[+]probes/event-loop ok\nhealthz check passed\n");
    me_resp_free(&r);

    /* "both" beats every 10 s; "probes" has a 2 s threshold and must not
     * count that against the loop. */
    tu_sleep_ms(3000);
    r = get_status(probe, "/healthz?verbose", 200);
    ck_assert_str_eq(r.body, "[+]probes/event-loop ok\nhealthz check passed\n");
    me_resp_free(&r);
    r = get_status(both, "/healthz?verbose", 200);
    ck_assert_str_eq(r.body, "[+]both/event-loop ok\nhealthz check passed\n");
    me_resp_free(&r);
    r = get_status(both, "/metrics", 200);
    me_resp_free(&r);

    char *log = tu_daemon_log(&d);
    assert_contains(log, "address=127.0.0.1");
    free(log);
    me_daemon_stop(&d);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("metrics-http");
    TCase *tc = tcase_create("http");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, endpoints_answer_get);
    tcase_add_test(tc, method_rules);
    tcase_add_test(tc, loop_heartbeat_keeps_healthz_ok);
    tcase_add_test(tc, wedged_instance_fails_healthz);
    tcase_add_test(tc, readiness_follows_checks);
    tcase_add_test(tc, several_instances);
    tcase_add_test(tc, livez_single_checks_and_exclude);
    tcase_add_test(tc, probe_server_defaults_to_the_proxy_bind_address);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = tu_run_suite(suite());
    curl_global_cleanup();
    return rc;
}
