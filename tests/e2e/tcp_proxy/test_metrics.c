/*
 * tcp_proxy end to end with mod_metrics: the spec's metric table (names
 * prefixed prismlb_, a `proxy` label) follows upstreams, connections and
 * dial errors (last-resort dials apart), upstream series go once drained
 * and removed, and the
 * proxy's readiness contribution drives the daemon's /readyz.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

#define FAST "health_interval = \"1100ms\"; health_timeout = \"1s\"; "

static struct proxy px;
static int mport;

static void
start(const char *settings, const char *const *eps, size_t n)
{
    char inst[256];
    mport = tu_free_port();
    snprintf(inst, sizeof(inst),
             "{ module = \"metrics\"; name = \"metrics\"; bind_address = \"127.0.0.1\"; "
             "port = %d; }",
             mport);
    ck_assert_msg(proxy_start_with(&px, settings, inst, eps, n) == 0, "prismlb did not start");
    ck_assert_int_eq(tu_wait_port("127.0.0.1", mport, 5000), 0);
}

/* Scrape and read one series; -1 when absent. */
static int
scrape(const char *series, double *v)
{
    int status = 0;
    char *body = NULL;
    ck_assert_int_eq(http_get(mport, "/metrics", &status, &body), 0);
    ck_assert_int_eq(status, 200);
    int rc = tu_metric_value(body, series, v);
    free(body);
    return rc;
}

/* Wait until series == want (bounded). */
static void
wait_metric(const char *series, double want, int timeout_ms)
{
    long long end = tu_now_ms() + timeout_ms;
    double v = -1;
    for (;;) {
        if (scrape(series, &v) == 0 && v == want)
            return;
        if (tu_now_ms() >= end)
            ck_abort_msg("%s is %g, not %g", series, v, want);
        tu_sleep_ms(50);
    }
}

/* Wait until the series name is absent (bounded): a removed upstream's series go
 * once its drain has ended, which with worker loops is when every worker
 * has acknowledged it, after prismlb_upstreams has already dropped. */
static void
wait_absent(const char *name, int timeout_ms)
{
    long long end = tu_now_ms() + timeout_ms;
    double v = -1;
    while (scrape(name, &v) == 0) {
        if (tu_now_ms() >= end)
            ck_abort_msg("%s is still there (%g)", name, v);
        tu_sleep_ms(50);
    }
}

static const char *
series(const char *name, const char *upstream)
{
    static char slots[4][256];
    static int next;
    char *b = slots[next++ % 4];
    if (upstream)
        snprintf(b, 256, "%s{module_instance=\"kubeprism\",proxy=\"kubeprism\",upstream=\"%s\"}",
                 name, upstream);
    else
        snprintf(b, 256, "%s{module_instance=\"kubeprism\",proxy=\"kubeprism\"}", name);
    return b;
}

/* The _count series of prismlb_dial_duration_seconds for upstream and
 * result. */
static const char *
dial_count(const char *upstream, const char *result)
{
    static char slots[2][256];
    static int next;
    char *b = slots[next++ % 2];
    snprintf(
        b, 256,
        "prismlb_dial_duration_seconds_count{module_instance=\"kubeprism\",proxy=\"kubeprism\","
        "upstream=\"%s\",result=\"%s\"}",
        upstream, result);
    return b;
}

/* A series' value, 0 when absent. */
static double
scrape0(const char *s)
{
    double v = 0;
    return scrape(s, &v) == 0 ? v : 0;
}

/* With latency selection each sampled upstream has an RTT and a tier. Which
 * tier the slower of two is in depends on the RTTs this machine measures
 * (2 ms more is another tier), so only this is certain: the faster one is
 * in tier 0, the other in 0 or 1 (two upstreams make two tiers at most).
 * A removed upstream's series go. */
START_TEST(latency_tiers_and_rtts_follow_the_upstreams)
{
    struct srv a, b;
    ck_assert_int_eq(srv_start(&a, SRV_ECHO, 'a'), 0);
    ck_assert_int_eq(srv_start(&b, SRV_ECHO, 'b'), 0);
    char ea[32], eb[32];
    snprintf(ea, sizeof(ea), "%s", srv_ep(&a));
    snprintf(eb, sizeof(eb), "%s", srv_ep(&b));
    const char *eps[] = {ea, eb};
    start(FAST "upstream_selection = \"latency\"; drain_timeout = \"1s\";", eps, 2);
    double ta = -1, tb = -1;
    long long until = tu_now_ms() + 10000;
    while ((scrape(series("prismlb_upstream_latency_tier", ea), &ta) < 0 ||
            scrape(series("prismlb_upstream_latency_tier", eb), &tb) < 0 || ta < 0 || tb < 0) &&
           tu_now_ms() < until)
        tu_sleep_ms(50);
    ck_assert_msg((ta == 0 && (tb == 0 || tb == 1)) || (tb == 0 && ta == 1), "tiers %g and %g", ta,
                  tb);
    double rtt = -1;
    ck_assert_int_eq(scrape(series("prismlb_upstream_rtt_seconds", ea), &rtt), 0);
    ck_assert_msg(rtt > 0 && rtt < 0.5, "rtt %g", rtt);
    /* Without readyz there is no ready series. */
    ck_assert_int_eq(scrape(series("prismlb_upstream_ready", ea), &rtt), -1);
    const char *only_a[] = {ea};
    proxy_set_endpoints(&px, only_a, 1);
    wait_metric(series("prismlb_upstreams", NULL), 1, 3000);
    wait_absent(series("prismlb_upstream_rtt_seconds", eb), 3000);
    wait_absent(series("prismlb_upstream_latency_tier", eb), 3000);
    ck_assert_int_eq(scrape(series("prismlb_upstream_rtt_seconds", ea), &rtt), 0);
    ck_assert_int_eq(proxy_stop(&px), 0);
    srv_stop(&a);
    srv_stop(&b);
}
END_TEST

/* Random selection, so that a dead upstream is dialled again and again. */
START_TEST(metrics_follow_upstreams_connections_and_errors)
{
    struct srv a, b;
    ck_assert_int_eq(srv_start(&a, SRV_ECHO, 'a'), 0);
    ck_assert_int_eq(srv_start(&b, SRV_ECHO, 'b'), 0);
    char ea[32], eb[32];
    snprintf(ea, sizeof(ea), "%s", srv_ep(&a));
    snprintf(eb, sizeof(eb), "%s", srv_ep(&b));
    const char *eps[] = {ea, eb};
    start(FAST "drain_timeout = \"1s\";", eps, 2);

    wait_metric(series("prismlb_upstreams", NULL), 2, 3000);
    wait_metric(series("prismlb_upstreams_active", NULL), 2, 3000);
    wait_metric(series("prismlb_health_check_status", ea), 1, 3000);
    double v = -1;
    /* Without latency selection there is no RTT series. */
    ck_assert_int_eq(scrape(series("prismlb_upstream_rtt_seconds", ea), &v), -1);

    /* A connection through the proxy. */
    double total0 = -1, total1 = -1;
    ck_assert_int_eq(scrape(series("prismlb_connections_total", NULL), &total0), 0);
    int fd = tcp_connect(px.port, 3000);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write_full(fd, "x", 1), 0);
    char c;
    ck_assert_int_eq(read_full(fd, &c, 1, 3000), 1);
    wait_metric(series("prismlb_connections_active", NULL), 1, 3000);
    ck_assert_int_eq(scrape(series("prismlb_connections_total", NULL), &total1), 0);
    ck_assert(total1 == total0 + 1);
    /* Its dial is in the histogram of the upstream it went to (from a
     * worker, with its next report). */
    long long end = tu_now_ms() + 3000;
    while (scrape0(dial_count(ea, "success")) + scrape0(dial_count(eb, "success")) < 1) {
        ck_assert_msg(tu_now_ms() < end, "no dial in prismlb_dial_duration_seconds");
        tu_sleep_ms(20);
    }
    ck_assert(scrape0(dial_count(ea, "success")) + scrape0(dial_count(eb, "success")) == 1);
    close(fd);
    wait_metric(series("prismlb_connections_active", NULL), 0, 3000);
    /* Closed: its lifetime is in the connection histogram. */
    wait_metric(series("prismlb_connection_duration_seconds_count", NULL), 1, 3000);

    /* b dies: client dials to it fail and are counted, and the clients are
     * moved to a (counted too) without noticing; b is excluded. */
    double retries0 = -1, retries = -1, errs = 0;
    ck_assert_int_eq(scrape(series("prismlb_dial_retries_total", NULL), &retries0), 0);
    ck_assert(retries0 == 0);
    srv_stop(&b);
    for (int i = 0; i < 64 && errs < 1; i++) {
        fd = tcp_connect(px.port, 3000);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write_full(fd, "x", 1), 0);
        ck_assert_int_eq(read_full(fd, &c, 1, 3000), 1);
        close(fd);
        if (scrape(series("prismlb_connection_errors_total", eb), &errs) < 0)
            errs = 0;
    }
    ck_assert(errs >= 1);
    /* Each failed dial was timed, in the same report as its error. */
    ck_assert_msg(scrape0(dial_count(eb, "failure")) >= errs, "failed dials %g, errors %g",
                  scrape0(dial_count(eb, "failure")), errs);
    char *why = NULL;
    ck_assert_msg(promtool_check_metrics(mport, &why) == 0, "%s", why);
    ck_assert_int_eq(scrape(series("prismlb_dial_retries_total", NULL), &retries), 0);
    ck_assert(retries >= 1);
    wait_metric(series("prismlb_health_check_status", eb), 0, 4000);
    wait_metric(series("prismlb_upstreams_active", NULL), 1, 1000);
    wait_metric(series("prismlb_upstreams", NULL), 2, 1000);

    /* Removed and drained: its series are deleted. */
    const char *only_a[] = {ea};
    proxy_set_endpoints(&px, only_a, 1);
    wait_metric(series("prismlb_upstreams", NULL), 1, 3000);
    wait_absent(series("prismlb_health_check_status", eb), 3000);
    wait_absent(series("prismlb_connection_errors_total", eb), 3000);
    wait_absent(dial_count(eb, "failure"), 3000);
    ck_assert_int_eq(proxy_stop(&px), 0);
    srv_stop(&a);
}
END_TEST

/* The series of prismlb_last_resort_dials_total with result r. */
static const char *
last_resort(const char *r)
{
    static char slots[2][160];
    static int next;
    char *b = slots[next++ % 2];
    snprintf(b, 160,
             "prismlb_last_resort_dials_total{module_instance=\"kubeprism\",proxy=\"kubeprism\","
             "result=\"%s\"}",
             r);
    return b;
}

/* prismlb_connection_errors_total over n upstreams plus the last-resort
 * failures (every failed dial, whichever way it was counted). */
static double
failed_dials(const char *const *eps, size_t n)
{
    double sum = 0, v;
    for (size_t i = 0; i < n; i++)
        if (scrape(series("prismlb_connection_errors_total", eps[i]), &v) == 0)
            sum += v;
    ck_assert_int_eq(scrape(last_resort("failure"), &v), 0);
    return sum + v;
}

/* A client through the proxy: the first byte it reads (a SRV_HELLO id), or
 * 0 when the proxy closes it unserved. */
static char
client_hello(void)
{
    int fd = tcp_connect(px.port, 3000);
    ck_assert_int_ge(fd, 0);
    char b[2] = {0};
    long n = read_full(fd, b, 2, 5000);
    close(fd);
    return n == 2 ? b[0] : 0;
}

/* With every upstream unhealthy the last resort dials them anyway: those
 * dials are counted in prismlb_last_resort_dials_total by result, and
 * prismlb_connection_errors_total (dials to pickable upstreams) does not
 * move. */
START_TEST(last_resort_dials_are_counted_apart_from_connection_errors)
{
    struct srv s[3];
    char eps_buf[3][32];
    const char *eps[3];
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(srv_start(&s[i], SRV_HELLO, (char)('A' + i)), 0);
        snprintf(eps_buf[i], sizeof(eps_buf[i]), "%s", srv_ep(&s[i]));
        eps[i] = eps_buf[i];
    }
    int port_b = s[1].port;
    /* One check at the start, the next 30 s later: only client dials move
     * the health state during the test. */
    start("health_interval = \"30s\"; health_timeout = \"1s\";", eps, 3);
    wait_metric(series("prismlb_upstreams_active", NULL), 3, 3000);
    wait_metric(last_resort("success"), 0, 1000);
    wait_metric(last_resort("failure"), 0, 1000);
    ck_assert(client_hello() != 0);

    /* Every upstream dies; two clients dial each twice (counted as
     * connection errors while they are pickable): all unhealthy. */
    for (int i = 0; i < 3; i++)
        srv_stop(&s[i]);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(client_hello(), 0);
    wait_metric(series("prismlb_upstreams_active", NULL), 0, 3000);
    long long end = tu_now_ms() + 3000;
    while (failed_dials(eps, 3) < 6) {
        ck_assert_msg(tu_now_ms() < end, "%g failed dials, not 6", failed_dials(eps, 3));
        tu_sleep_ms(20);
    }
    double errs0 = 0, v;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(scrape(series("prismlb_connection_errors_total", eps[i]), &v), 0);
        errs0 += v;
    }
    double fail0 = -1, ok0 = -1;
    ck_assert_int_eq(scrape(last_resort("failure"), &fail0), 0);
    ck_assert_int_eq(scrape(last_resort("success"), &ok0), 0);

    /* None answers: the last resort dials all three, and fails. */
    ck_assert_int_eq(client_hello(), 0);
    wait_metric(last_resort("failure"), fail0 + 3, 3000);
    /* B answers again, unchecked since: the last resort serves the
     * client, and B's successful dial makes it pickable for the next. */
    struct srv b2;
    ck_assert_int_eq(srv_start_port(&b2, SRV_HELLO, 'B', port_b), 0);
    ck_assert_int_eq(client_hello(), 'B');
    wait_metric(last_resort("success"), ok0 + 1, 3000);
    wait_metric(series("prismlb_upstreams_active", NULL), 1, 3000);
    ck_assert_int_eq(client_hello(), 'B');
    ck_assert_int_eq(client_hello(), 'B');

    double errs1 = 0, fail1 = -1;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(scrape(series("prismlb_connection_errors_total", eps[i]), &v), 0);
        errs1 += v;
    }
    ck_assert_msg(errs1 == errs0, "connection errors moved from %g to %g", errs0, errs1);
    printf("last resort: connection errors %g -> %g, last-resort failures %g -> %g, "
           "successes %g -> %g\n",
           errs0, errs1, fail0, scrape0(last_resort("failure")), ok0,
           scrape0(last_resort("success")));
    fflush(stdout);
    ck_assert_int_eq(scrape(last_resort("failure"), &fail1), 0);
    ck_assert_msg(fail1 >= fail0 + 3 && fail1 <= fail0 + 5, "last-resort failures %g -> %g", fail0,
                  fail1);
    wait_metric(last_resort("success"), ok0 + 1, 1000);
    char *why = NULL;
    ck_assert_msg(promtool_check_metrics(mport, &why) == 0, "%s", why);
    ck_assert_int_eq(proxy_stop(&px), 0);
    srv_stop(&b2);
}
END_TEST

START_TEST(the_daemons_readyz_follows_the_proxys_upstreams)
{
    struct srv a;
    ck_assert_int_eq(srv_start(&a, SRV_ECHO, 'a'), 0);
    int port = a.port;
    const char *eps[] = {srv_ep(&a)};
    start(FAST, eps, 1);
    int status = 0;
    char *body = NULL;
    long long end = tu_now_ms() + 3000;
    do {
        free(body);
        body = NULL;
        ck_assert_int_eq(http_get(mport, "/readyz", &status, &body), 0);
    } while (status != 200 && tu_now_ms() < end && (tu_sleep_ms(50), 1));
    ck_assert_msg(status == 200, "/readyz %d: %s", status, body);
    free(body);
    ck_assert_int_eq(http_get(mport, "/healthz", &status, &body), 0);
    ck_assert_int_eq(status, 200);
    free(body);

    /* Its only upstream dies: two failed checks, then not ready. */
    srv_stop(&a);
    end = tu_now_ms() + 5000;
    do {
        ck_assert_int_eq(http_get(mport, "/readyz", &status, &body), 0);
        if (status == 503)
            break;
        free(body);
        body = NULL;
        tu_sleep_ms(100);
    } while (tu_now_ms() < end);
    ck_assert_int_eq(status, 503);
    free(body);
    /* Liveness is unaffected. */
    ck_assert_int_eq(http_get(mport, "/healthz", &status, &body), 0);
    ck_assert_int_eq(status, 200);
    free(body);

    /* Back on the same port: one successful check makes it ready. */
    ck_assert_int_eq(srv_start_port(&a, SRV_ECHO, 'a', port), 0);
    end = tu_now_ms() + 4000;
    do {
        ck_assert_int_eq(http_get(mport, "/readyz", &status, &body), 0);
        free(body);
        if (status == 200)
            break;
        tu_sleep_ms(100);
    } while (tu_now_ms() < end);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(proxy_stop(&px), 0);
    srv_stop(&a);
}
END_TEST

START_TEST(a_hostname_endpoint_is_resolved_and_its_rtt_includes_resolution)
{
    struct srv a;
    ck_assert_int_eq(srv_start(&a, SRV_ECHO, 'a'), 0);
    char ep[64];
    snprintf(ep, sizeof(ep), "localhost:%d", a.port);
    const char *eps[] = {ep};
    start(FAST "upstream_selection = \"latency\";", eps, 1);
    wait_metric(series("prismlb_upstream_latency_tier", ep), 0, 4000);
    double rtt = -1;
    ck_assert_int_eq(scrape(series("prismlb_upstream_rtt_seconds", ep), &rtt), 0);
    ck_assert(rtt > 0);
    /* The data path dials the resolved address. */
    int fd = tcp_connect(px.port, 3000);
    ck_assert_int_ge(fd, 0);
    char b[4] = {0};
    ck_assert_int_eq(write_full(fd, "abc", 3), 0);
    ck_assert_int_eq(read_full(fd, b, 3, 3000), 3);
    ck_assert_str_eq(b, "abc");
    close(fd);
    ck_assert_int_eq(proxy_stop(&px), 0);
    srv_stop(&a);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy_metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_unchecked_fixture(tc, tp_registry_init, tp_reap_all);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, metrics_follow_upstreams_connections_and_errors);
    tcase_add_test(tc, latency_tiers_and_rtts_follow_the_upstreams);
    tcase_add_test(tc, the_daemons_readyz_follows_the_proxys_upstreams);
    tcase_add_test(tc, last_resort_dials_are_counted_apart_from_connection_errors);
#ifndef __SANITIZE_THREAD__
    /* Not under ThreadSanitizer: glibc's getaddrinfo_a runs its lookups on
     * threads libc starts itself, which ThreadSanitizer does not set up
     * (the daemon faults in its allocator). */
    tcase_add_test(tc, a_hostname_endpoint_is_resolved_and_its_rtt_includes_resolution);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run_suite(suite());
}
