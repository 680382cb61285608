/*
 * Check suite of the metrics registry's expositions (core/metrics.c): exact
 * text, promtool over the text format, the OpenMetrics parser of the Python
 * client over OpenMetrics, 10,000 series, allocation failures.
 */
#include "test_metrics.h"
#include "testutil.h"

/* A small registry, used by the exact-text test and the allocation sweep. */
static const double small_buckets[] = {0.125, 0.5, 1};

static int
small_step(struct core_metrics *r, int i)
{
    int err = 0;
    plb_metric *m;
    switch (i) {
    case 0:
        m = core_metric_new(r, PLB_METRIC_GAUGE, "empty_bytes", "A family without series.", NULL,
                            NULL, 0, &err);
        return m ? 0 : err;
    case 1:
        m = core_metric_new(r, PLB_METRIC_COUNTER, "http_requests_total", "Requests served.",
                            code_method, NULL, 0, &err);
        return m ? 0 : err;
    case 2:
        m = core_metric_new(r, PLB_METRIC_GAUGE, "queue_depth", "Items waiting.", NULL, NULL, 0,
                            &err);
        return m ? 0 : err;
    case 3:
        m = core_metric_new(r, PLB_METRIC_HISTOGRAM, "request_duration_seconds",
                            "Time to serve a request.", L("route"), small_buckets, 3, &err);
        return m ? 0 : err;
    default:
        break;
    }
    /* Updates: look the families up again (registration is idempotent). */
    plb_metric *c = core_metric_new(r, PLB_METRIC_COUNTER, "http_requests_total",
                                    "Requests served.", code_method, NULL, 0, &err);
    plb_metric *g =
        core_metric_new(r, PLB_METRIC_GAUGE, "queue_depth", "Items waiting.", NULL, NULL, 0, &err);
    plb_metric *h = core_metric_new(r, PLB_METRIC_HISTOGRAM, "request_duration_seconds",
                                    "Time to serve a request.", L("route"), small_buckets, 3, &err);
    ck_assert(c && g && h);
    switch (i) {
    case 4:
        return core_metric_add(c, V("404", "GET"), 1);
    case 5:
        return core_metric_add(c, V("200", "GET"), 3);
    case 6:
        return core_metric_add(c, V("200", "POST"), 2.5);
    case 7:
        return core_metric_set(g, NULL, 7);
    case 8:
        return core_metric_add(g, NULL, -2);
    case 9:
        return core_metric_observe(h, V("/a"), 0.0625);
    case 10:
        return core_metric_observe(h, V("/a"), 0.125);
    case 11:
        return core_metric_observe(h, V("/a"), 0.75);
    case 12:
        return core_metric_observe(h, V("/a"), 3);
    default:
        return 1; /* no more steps */
    }
}

static const char small_text[] = "# HELP empty_bytes A family without series.\n"
                                 "# TYPE empty_bytes gauge\n"
                                 "# HELP http_requests_total Requests served.\n"
                                 "# TYPE http_requests_total counter\n"
                                 "http_requests_total{code=\"200\",method=\"GET\"} 3\n"
                                 "http_requests_total{code=\"200\",method=\"POST\"} 2.5\n"
                                 "http_requests_total{code=\"404\",method=\"GET\"} 1\n"
                                 "# HELP queue_depth Items waiting.\n"
                                 "# TYPE queue_depth gauge\n"
                                 "queue_depth 5\n"
                                 "# HELP request_duration_seconds Time to serve a request.\n"
                                 "# TYPE request_duration_seconds histogram\n"
                                 "request_duration_seconds_bucket{route=\"/a\",le=\"0.125\"} 2\n"
                                 "request_duration_seconds_bucket{route=\"/a\",le=\"0.5\"} 2\n"
                                 "request_duration_seconds_bucket{route=\"/a\",le=\"1\"} 3\n"
                                 "request_duration_seconds_bucket{route=\"/a\",le=\"+Inf\"} 4\n"
                                 "request_duration_seconds_sum{route=\"/a\"} 3.9375\n"
                                 "request_duration_seconds_count{route=\"/a\"} 4\n";

static const char small_om[] = "# HELP empty_bytes A family without series.\n"
                               "# TYPE empty_bytes gauge\n"
                               "# HELP http_requests Requests served.\n"
                               "# TYPE http_requests counter\n"
                               "http_requests_total{code=\"200\",method=\"GET\"} 3\n"
                               "http_requests_total{code=\"200\",method=\"POST\"} 2.5\n"
                               "http_requests_total{code=\"404\",method=\"GET\"} 1\n"
                               "# HELP queue_depth Items waiting.\n"
                               "# TYPE queue_depth gauge\n"
                               "queue_depth 5\n"
                               "# HELP request_duration_seconds Time to serve a request.\n"
                               "# TYPE request_duration_seconds histogram\n"
                               "request_duration_seconds_bucket{route=\"/a\",le=\"0.125\"} 2\n"
                               "request_duration_seconds_bucket{route=\"/a\",le=\"0.5\"} 2\n"
                               "request_duration_seconds_bucket{route=\"/a\",le=\"1.0\"} 3\n"
                               "request_duration_seconds_bucket{route=\"/a\",le=\"+Inf\"} 4\n"
                               "request_duration_seconds_sum{route=\"/a\"} 3.9375\n"
                               "request_duration_seconds_count{route=\"/a\"} 4\n"
                               "# EOF\n";

START_TEST(test_exact_exposition)
{
    struct core_metrics *r = core_metrics_new();
    ck_assert_ptr_nonnull(r);
    for (int i = 0, rc; (rc = small_step(r, i)) != 1; i++)
        ck_assert_int_eq(rc, 0);
    char *s = render(r, 0);
    ck_assert_str_eq(s, small_text);
    core_free(s);
    s = render(r, 1);
    ck_assert_str_eq(s, small_om);
    core_free(s);
    /* An empty registry renders nothing (OpenMetrics: only # EOF). */
    struct core_metrics *e = core_metrics_new();
    s = render(e, 0);
    ck_assert_str_eq(s, "");
    core_free(s);
    s = render(e, 1);
    ck_assert_str_eq(s, "# EOF\n");
    core_free(s);
    core_metrics_free(e);
    core_metrics_free(r);
}
END_TEST

/* A registry exercising every feature, with names promtool's lint likes. */
static struct core_metrics *
full_registry(void)
{
    struct core_metrics *r = core_metrics_new();
    int err = 0;
    ck_assert_ptr_nonnull(r);
    plb_metric *conns = core_metric_new(r, PLB_METRIC_COUNTER, "prismlb_proxy_connections_total",
                                        "Connections accepted by the proxy.",
                                        L("instance_name", "upstream"), NULL, 0, &err);
    plb_metric *bytes =
        core_metric_new(r, PLB_METRIC_COUNTER, "prismlb_proxy_transferred_bytes_total",
                        "Bytes forwarded, by direction.", L("direction"), NULL, 0, &err);
    plb_metric *restarts =
        core_metric_new(r, PLB_METRIC_COUNTER, "prismlb_watch_restarts_total",
                        "Watch restarts; \\ and\nnewline in help.", NULL, NULL, 0, &err);
    plb_metric *healthy = core_metric_new(r, PLB_METRIC_GAUGE, "prismlb_upstreams_healthy",
                                          "Healthy upstreams.", L("instance_name"), NULL, 0, &err);
    plb_metric *temp =
        core_metric_new(r, PLB_METRIC_GAUGE, "prismlb_test_temperature_celsius",
                        "Special values and odd label values.", L("sensor"), NULL, 0, &err);
    plb_metric *empty = core_metric_new(r, PLB_METRIC_GAUGE, "prismlb_idle_sessions",
                                        "A family without series.", NULL, NULL, 0, &err);
    const double b[] = {0.001, 0.01, 0.1, 1, 10};
    plb_metric *lat = core_metric_new(r, PLB_METRIC_HISTOGRAM, "prismlb_connect_duration_seconds",
                                      "Time to connect upstream.", L("upstream"), b, 5, &err);
    const double sb[] = {1024, 1048576, 1e9};
    plb_metric *size = core_metric_new(r, PLB_METRIC_HISTOGRAM, "prismlb_request_size_bytes",
                                       "Request sizes.", NULL, sb, 3, &err);
    plb_metric *dflt =
        core_metric_new(r, PLB_METRIC_HISTOGRAM, "prismlb_reconcile_duration_seconds",
                        "Reconcile loop duration.", NULL, NULL, 0, &err);
    ck_assert(conns && bytes && restarts && healthy && temp && empty && lat && size && dflt);
    const char *ups[] = {"10.0.0.1:6443", "10.0.0.2:6443", "[fd00::1]:6443"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(core_metric_add(conns, V("kubeprism", ups[i]), 10 * (i + 1)), 0);
        for (int j = 0; j < 20; j++)
            ck_assert_int_eq(core_metric_observe(lat, V(ups[i]), 0.0005 * (j + 1) * (i + 1)), 0);
    }
    ck_assert_int_eq(core_metric_add(bytes, V("upstream"), 123456789012.0), 0);
    ck_assert_int_eq(core_metric_add(bytes, V("downstream"), 1e18), 0);
    ck_assert_int_eq(core_metric_add(restarts, NULL, 2), 0);
    ck_assert_int_eq(core_metric_set(healthy, V("kubeprism"), 3), 0);
    ck_assert_int_eq(core_metric_set(temp, V("nan"), NAN), 0);
    ck_assert_int_eq(core_metric_set(temp, V("hot"), INFINITY), 0);
    ck_assert_int_eq(core_metric_set(temp, V("cold"), -INFINITY), 0);
    ck_assert_int_eq(core_metric_set(temp, V("neg"), -12.75), 0);
    ck_assert_int_eq(core_metric_set(temp, V("quote\"back\\slash\nnewline"), 1), 0);
    ck_assert_int_eq(core_metric_set(temp, V("caf\xc3\xa9 \xe2\x82\xac"), 0.1), 0);
    ck_assert_int_eq(core_metric_set(temp, V(""), 0), 0);
    ck_assert_int_eq(core_metric_observe(size, NULL, 512), 0);
    ck_assert_int_eq(core_metric_observe(size, NULL, 5e9), 0);
    ck_assert_int_eq(core_metric_observe(dflt, NULL, 0.2), 0);
    return r;
}

/* Run promtool check metrics on a file; returns its exit code, *out its
 * output. */
static int
promtool_check(const char *path, char **out)
{
    char *const argv[] = {"/bin/sh", "-c",         "exec promtool check metrics < \"$1\"",
                          "sh",      (char *)path, NULL};
    return tu_run(argv, NULL, out, 60000);
}

START_TEST(test_promtool)
{
    if (access("/usr/bin/promtool", X_OK) != 0)
        ck_abort_msg(
            "promtool is missing: install Debian package prometheus (tests/setup.sh does)");
    char *dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    char path[4096], bad[4096];
    snprintf(path, sizeof(path), "%s/metrics.txt", dir);
    snprintf(bad, sizeof(bad), "%s/bad.txt", dir);
    struct core_metrics *r = full_registry();
    char *s = render(r, 0);
    ck_assert_int_eq(tu_write_file(path, s), 0);
    char *out = NULL;
    int rc = promtool_check(path, &out);
    ck_assert_msg(rc == 0 && out && out[0] == '\0', "promtool exit %d, output:\n%s\ninput:\n%s", rc,
                  out ? out : "(none)", s);
    free(out);
    out = NULL;
    /* The check has teeth: a lint problem and a parse error both fail. */
    ck_assert_int_eq(tu_write_file(bad, "# HELP x_sum A counter.\n# TYPE x_sum counter\nx_sum 1\n"),
                     0);
    rc = promtool_check(bad, &out);
    ck_assert_msg(rc != 0 && out && strstr(out, "x_sum"), "exit %d: %s", rc, out ? out : "");
    free(out);
    out = NULL;
    ck_assert_int_eq(tu_write_file(bad, "x{a=\"b} 1\n"), 0);
    rc = promtool_check(bad, &out);
    ck_assert_int_ne(rc, 0);
    free(out);
    core_free(s);
    core_metrics_free(r);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* OpenMetrics: promtool 2.42 reads only the text format (an OpenMetrics
 * counter family "x" with samples "x_total" is not what its parser takes), so
 * the strict OpenMetrics parser of the Python client checks the output when
 * Debian's python3-prometheus-client is installed. */
static const char om_check_py[] =
    "import sys\n"
    "from prometheus_client.openmetrics.parser import text_string_to_metric_families as p\n"
    "fams = list(p(open(sys.argv[1], encoding='utf-8').read()))\n"
    "v = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in fams for s in f.samples}\n"
    "print(len(fams), sum(len(f.samples) for f in fams),\n"
    "      v[('prismlb_proxy_transferred_bytes_total', (('direction', 'downstream'),))],\n"
    "      v[('prismlb_test_temperature_celsius', (('sensor', "
    "'quote\"back\\\\slash\\nnewline'),))],\n"
    "      [f.documentation for f in fams if f.name == 'prismlb_watch_restarts'][0] ==\n"
    "      'Watch restarts; \\\\ and\\nnewline in help.')\n";

START_TEST(test_openmetrics_parser)
{
    char *const probe[] = {"/usr/bin/python3", "-c", "import prometheus_client.openmetrics.parser",
                           NULL};
    if (tu_run(probe, NULL, NULL, 30000) != 0) {
        fprintf(stderr, "SKIP test_openmetrics_parser: /usr/bin/python3 with prometheus_client "
                        "(Debian python3-prometheus-client) is not installed\n");
        return;
    }
    char *dir = tu_mkdtemp();
    char path[4096];
    snprintf(path, sizeof(path), "%s/metrics.om", dir);
    struct core_metrics *r = full_registry();
    char *s = render(r, 1);
    ck_assert_int_eq(tu_write_file(path, s), 0);
    char *const argv[] = {"/usr/bin/python3", "-c", (char *)om_check_py, path, NULL};
    char *out = NULL;
    int rc = tu_run(argv, NULL, &out, 60000);
    /* 9 families; samples: 3 + 2 + 1 + 1 + 7 counter/gauge, histograms
     * 3 x (5 + 3) + (3 + 3) + (11 + 3). */
    ck_assert_msg(rc == 0 && out && strcmp(out, "9 58 1e+18 1 True\n") == 0,
                  "exit %d: %s\ninput:\n%s", rc, out ? out : "", s);
    free(out);
    /* The parser has teeth: without # EOF it refuses. */
    s[strlen(s) - strlen("# EOF\n")] = '\0';
    ck_assert_int_eq(tu_write_file(path, s), 0);
    out = NULL;
    ck_assert_int_ne(tu_run(argv, NULL, &out, 60000), 0);
    free(out);
    core_free(s);
    core_metrics_free(r);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_many_series)
{
    enum { N = 10000 };
    struct core_metrics *r = core_metrics_new();
    plb_metric *c = core_metric_new(r, PLB_METRIC_COUNTER, "prismlb_conns_total", "C.",
                                    L("upstream", "id"), NULL, 0, NULL);
    ck_assert_ptr_nonnull(c);
    char id[16], up[16];
    /* Insert in a scrambled order (7919 is prime, so i -> i*7919 % N is a
     * permutation). */
    for (long i = 0; i < N; i++) {
        long k = i * 7919 % N;
        snprintf(up, sizeof(up), "u%ld", k % 10);
        snprintf(id, sizeof(id), "%05ld", k);
        ck_assert_int_eq(core_metric_add(c, V(up, id), (double)k), 0);
    }
    ck_assert_uint_eq(core_metric_series_count(c), N);
    /* Updating existing series allocates nothing and adds no series.
     * (Label values prepared first, and no ck_assert in the loop: Check
     * writes to a pipe on every assertion.) */
    static char ups[N][8], ids[N][8];
    for (long k = 0; k < N; k++) {
        snprintf(ups[k], sizeof(ups[k]), "u%ld", k % 10);
        snprintf(ids[k], sizeof(ids[k]), "%05ld", k);
    }
    unsigned long before = core_alloc_count();
    int bad = 0;
    double t0 = now_s();
    for (long round = 0; round < 10; round++)
        for (long k = 0; k < N; k++)
            bad += core_metric_add(c, V(ups[k], ids[k]), 1) != 0;
    double upd = now_s() - t0;
    ck_assert_int_eq(bad, 0);
    ck_assert_uint_eq(core_alloc_count(), before);
    ck_assert_uint_eq(core_metric_series_count(c), N);

    t0 = now_s();
    size_t len;
    char *s = core_metrics_render(r, &len);
    double dt = now_s() - t0;
    ck_assert_ptr_nonnull(s);
    t0 = now_s();
    char *o = core_metrics_render_openmetrics(r, NULL);
    double dto = now_s() - t0;
    ck_assert_ptr_nonnull(o);
    fprintf(stderr,
            "render of %d series: %.2f ms text (%zu bytes), %.2f ms OpenMetrics; "
            "%d updates of existing series %.2f ms\n",
            N, dt * 1e3, len, dto * 1e3, 10 * N, upd * 1e3);
    ck_assert_msg(dt < 1.0, "render took %.3f s", dt);
    /* Every series once, ordered by (upstream, id), with its value. */
    const char *p = strchr(strchr(s, '\n') + 1, '\n') + 1; /* after HELP and TYPE */
    long seen = 0;
    char want[128];
    for (long u = 0; u < 10; u++)
        for (long k = u; k < N; k += 10) {
            int n =
                snprintf(want, sizeof(want),
                         "prismlb_conns_total{upstream=\"u%ld\",id=\"%05ld\"} %ld\n", u, k, k + 10);
            ck_assert_msg(strncmp(p, want, (size_t)n) == 0, "at %ld: want %s", seen, want);
            p += n;
            seen++;
        }
    ck_assert_int_eq(seen, N);
    ck_assert_str_eq(p, "");
    core_free(s);
    core_free(o);
    core_metrics_free(r);
}
END_TEST

/* Fail the nth allocation of the small scenario; after a failure the step is
 * retried without injection, and the end result must equal the reference:
 * so a failed call reported an error and changed nothing. */
static void
sweep(int sticky)
{
    unsigned long n;
    for (n = 1; n < 10000; n++) {
        int failures = 0;
        unsigned long start = core_alloc_count();
        core_alloc_fail_at(n, sticky);
        struct core_metrics *r = core_metrics_new();
        if (!r) {
            ck_assert_uint_eq(core_alloc_count() - start, n);
            core_alloc_fail_at(0, 0);
            continue;
        }
        for (int i = 0;; i++) {
            int rc = small_step(r, i);
            if (rc == 1)
                break;
            if (rc < 0) {
                ck_assert_int_eq(rc, -ENOMEM);
                failures++;
                core_alloc_fail_at(0, 0);
                ck_assert_int_eq(small_step(r, i), 0);
            }
        }
        for (int om = 0; om < 2; om++) {
            size_t len = 0;
            char *s = om ? core_metrics_render_openmetrics(r, &len) : core_metrics_render(r, &len);
            if (!s) {
                failures++;
                core_alloc_fail_at(0, 0);
                s = om ? core_metrics_render_openmetrics(r, &len) : core_metrics_render(r, &len);
                ck_assert_ptr_nonnull(s);
            }
            ck_assert_str_eq(s, om ? small_om : small_text);
            core_free(s);
        }
        core_alloc_fail_at(0, 0);
        core_metrics_free(r);
        if (failures == 0) {
            /* The injection point lies past the scenario: done. */
            ck_assert_uint_lt(core_alloc_count() - start, n);
            break;
        }
        ck_assert_int_eq(failures, 1);
    }
    fprintf(stderr, "allocation sweep (sticky=%d): %lu allocations, each failed once\n", sticky,
            n - 1);
    ck_assert_uint_gt(n, 10);
}

START_TEST(test_alloc_fail_sweep)
{
    sweep(0);
    sweep(1);
}
END_TEST

static Suite *
metrics_suite(void)
{
    Suite *s = suite_create("metrics-exposition");
    TCase *tc = tcase_create("exposition");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_exact_exposition);
    tcase_add_test(tc, test_promtool);
    tcase_add_test(tc, test_openmetrics_parser);
    tcase_add_test(tc, test_many_series);
    tcase_add_test(tc, test_alloc_fail_sweep);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(metrics_suite());
}
