/*
 * Check suite of the metrics registry (core/metrics.c): updates of each
 * metric type, registration rules, name validation, escaping, removal,
 * number formatting and views (a family per instance of a module).
 */
#include "test_metrics.h"
#include "testutil.h"

START_TEST(test_counter)
{
    struct core_metrics *r = core_metrics_new();
    int err = 0;
    double v;
    plb_metric *c = core_metric_new(r, PLB_METRIC_COUNTER, "requests_total", "Requests.",
                                    code_method, NULL, 0, &err);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(core_metric_get(c, V("200", "GET"), &v), -ENOENT);
    ck_assert_int_eq(core_metric_add(c, V("200", "GET"), 1), 0);
    ck_assert_int_eq(core_metric_add(c, V("200", "GET"), 2.5), 0);
    ck_assert_int_eq(core_metric_add(c, V("500", "GET"), 0), 0);
    ck_assert_int_eq(core_metric_get(c, V("200", "GET"), &v), 0);
    ck_assert(v == 3.5);
    ck_assert_int_eq(core_metric_get(c, V("500", "GET"), &v), 0);
    ck_assert(v == 0);
    /* Counters only go up; set and observe are for other types. */
    ck_assert_int_eq(core_metric_add(c, V("200", "GET"), -1), -EINVAL);
    ck_assert_int_eq(core_metric_add(c, V("200", "GET"), NAN), -EINVAL);
    ck_assert_int_eq(core_metric_set(c, V("200", "GET"), 10), -EINVAL);
    ck_assert_int_eq(core_metric_observe(c, V("200", "GET"), 1), -EINVAL);
    ck_assert_int_eq(core_metric_get(c, V("200", "GET"), &v), 0);
    ck_assert(v == 3.5);
    /* Label values: present, non-NULL, UTF-8. */
    ck_assert_int_eq(core_metric_add(c, NULL, 1), -EINVAL);
    ck_assert_int_eq(core_metric_add(c, V("200", NULL), 1), -EINVAL);
    ck_assert_int_eq(core_metric_add(c, V("200", "G\xff"), 1), -EINVAL);
    ck_assert_int_eq(core_metric_add(c, V("200", "caf\xc3\xa9"), 1), 0);
    ck_assert_int_eq(core_metric_add(c, V("", ""), 1), 0); /* empty values are fine */
    ck_assert_uint_eq(core_metric_series_count(c), 4);
    char *s = render(r, 0);
    assert_line(s, "requests_total{code=\"200\",method=\"GET\"} 3.5");
    assert_line(s, "requests_total{code=\"500\",method=\"GET\"} 0");
    assert_line(s, "requests_total{code=\"200\",method=\"caf\xc3\xa9\"} 1");
    assert_line(s, "requests_total{code=\"\",method=\"\"} 1");
    core_free(s);
    core_metrics_free(r);
}
END_TEST

START_TEST(test_gauge)
{
    struct core_metrics *r = core_metrics_new();
    double v;
    plb_metric *g =
        core_metric_new(r, PLB_METRIC_GAUGE, "queue_depth", "Items waiting.", NULL, NULL, 0, NULL);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(core_metric_set(g, NULL, 10), 0);
    ck_assert_int_eq(core_metric_add(g, NULL, -12.5), 0);
    ck_assert_int_eq(core_metric_get(g, NULL, &v), 0);
    ck_assert(v == -2.5);
    ck_assert_int_eq(core_metric_observe(g, NULL, 1), -EINVAL);
    ck_assert_int_eq(core_metric_set(g, NULL, INFINITY), 0);
    char *s = render(r, 0);
    assert_line(s, "queue_depth +Inf");
    core_free(s);
    ck_assert_int_eq(core_metric_set(g, NULL, -INFINITY), 0);
    s = render(r, 0);
    assert_line(s, "queue_depth -Inf");
    core_free(s);
    ck_assert_int_eq(core_metric_set(g, NULL, NAN), 0);
    s = render(r, 0);
    assert_line(s, "queue_depth NaN");
    core_free(s);
    ck_assert_uint_eq(core_metric_series_count(g), 1);
    core_metrics_free(r);
}
END_TEST

START_TEST(test_histogram)
{
    struct core_metrics *r = core_metrics_new();
    const double b[] = {0.125, 0.5, 1};
    int err = 0;
    double v;
    plb_metric *h = core_metric_new(r, PLB_METRIC_HISTOGRAM, "req_duration_seconds", "Latency.",
                                    L("route"), b, 3, &err);
    ck_assert_ptr_nonnull(h);
    /* 0.125 sits on a bound: it counts in le="0.125". 3 is above all. */
    const double obs[] = {0.0625, 0.125, 0.75, 3, -1};
    for (size_t i = 0; i < sizeof(obs) / sizeof(obs[0]); i++)
        ck_assert_int_eq(core_metric_observe(h, V("/a"), obs[i]), 0);
    ck_assert_int_eq(core_metric_observe(h, V("/b"), 0.5), 0);
    ck_assert_int_eq(core_metric_observe(h, V("/a"), NAN), -EINVAL);
    ck_assert_int_eq(core_metric_add(h, V("/a"), 1), -EINVAL);
    ck_assert_int_eq(core_metric_set(h, V("/a"), 1), -EINVAL);
    ck_assert_int_eq(core_metric_get(h, V("/a"), &v), 0);
    ck_assert(v == 2.9375); /* the sum */
    char *s = render(r, 0);
    assert_line(s, "req_duration_seconds_bucket{route=\"/a\",le=\"0.125\"} 3");
    assert_line(s, "req_duration_seconds_bucket{route=\"/a\",le=\"0.5\"} 3");
    assert_line(s, "req_duration_seconds_bucket{route=\"/a\",le=\"1\"} 4");
    assert_line(s, "req_duration_seconds_bucket{route=\"/a\",le=\"+Inf\"} 5");
    assert_line(s, "req_duration_seconds_sum{route=\"/a\"} 2.9375");
    assert_line(s, "req_duration_seconds_count{route=\"/a\"} 5");
    assert_line(s, "req_duration_seconds_bucket{route=\"/b\",le=\"0.125\"} 0");
    assert_line(s, "req_duration_seconds_bucket{route=\"/b\",le=\"0.5\"} 1");
    assert_line(s, "req_duration_seconds_count{route=\"/b\"} 1");
    /* /a renders before /b, each series as one block. */
    assert_before(strstr(s, "_count{route=\"/a\"}"), strstr(s, "_bucket{route=\"/b\""));
    core_free(s);

    /* Default buckets; a trailing +Inf is accepted and implicit. */
    plb_metric *d = core_metric_new(r, PLB_METRIC_HISTOGRAM, "dflt_seconds", "Default buckets.",
                                    NULL, NULL, 0, &err);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(core_metric_observe(d, NULL, 0.3), 0);
    const double withinf[] = {1, 1e6, INFINITY};
    plb_metric *w =
        core_metric_new(r, PLB_METRIC_HISTOGRAM, "size_bytes", "Sizes.", NULL, withinf, 3, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(core_metric_observe(w, NULL, 5e6), 0);
    s = render(r, 0);
    assert_line(s, "dflt_seconds_bucket{le=\"0.005\"} 0");
    assert_line(s, "dflt_seconds_bucket{le=\"0.25\"} 0");
    assert_line(s, "dflt_seconds_bucket{le=\"0.5\"} 1");
    assert_line(s, "dflt_seconds_bucket{le=\"10\"} 1");
    assert_line(s, "size_bytes_bucket{le=\"1e+06\"} 0");
    assert_line(s, "size_bytes_bucket{le=\"+Inf\"} 1");
    assert_line(s, "size_bytes_sum 5000000");
    ck_assert_ptr_null(strstr(s, "le=\"+Inf\"} 1\nsize_bytes_bucket{le=\"+Inf\""));
    core_free(s);
    s = render(r, 1);
    assert_line(s, "size_bytes_bucket{le=\"1.0\"} 0");
    assert_line(s, "size_bytes_bucket{le=\"1e+06\"} 0");
    assert_line(s, "dflt_seconds_bucket{le=\"10.0\"} 1");
    core_free(s);

    /* Bad buckets. */
    const double desc[] = {1, 0.5}, dup[] = {1, 1}, nan[] = {NAN}, minf[] = {-INFINITY, 1};
    ck_assert_ptr_null(
        core_metric_new(r, PLB_METRIC_HISTOGRAM, "b1_seconds", "x", NULL, desc, 2, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(
        core_metric_new(r, PLB_METRIC_HISTOGRAM, "b2_seconds", "x", NULL, dup, 2, &err));
    ck_assert_ptr_null(
        core_metric_new(r, PLB_METRIC_HISTOGRAM, "b3_seconds", "x", NULL, nan, 1, &err));
    ck_assert_ptr_null(
        core_metric_new(r, PLB_METRIC_HISTOGRAM, "b4_seconds", "x", NULL, minf, 2, &err));
    ck_assert_ptr_null(core_metric_new(r, PLB_METRIC_GAUGE, "b5", "x", NULL, b, 3, &err));
    ck_assert_int_eq(err, -EINVAL);
    core_metrics_free(r);
}
END_TEST

START_TEST(test_reregister)
{
    struct core_metrics *r = core_metrics_new();
    int err = 0;
    const double b1[] = {1, 2}, b2[] = {1, 3};
    plb_metric *c = core_metric_new(r, PLB_METRIC_COUNTER, "conns_total", "Connections.",
                                    code_method, NULL, 0, &err);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(core_metric_add(c, V("1", "2"), 4), 0);
    /* Same everything: the same family, its series intact. */
    const char *const again[] = {"code", "method", NULL}; /* other pointers, same names */
    ck_assert_ptr_eq(
        core_metric_new(r, PLB_METRIC_COUNTER, "conns_total", "Connections.", again, NULL, 0, &err),
        c);
    double v;
    ck_assert_int_eq(core_metric_get(c, V("1", "2"), &v), 0);
    ck_assert(v == 4);
    /* Any mismatch: -EEXIST. */
    err = 0;
    ck_assert_ptr_null(core_metric_new(r, PLB_METRIC_GAUGE, "conns_total", "Connections.",
                                       code_method, NULL, 0, &err));
    ck_assert_int_eq(err, -EEXIST);
    err = 0;
    ck_assert_ptr_null(core_metric_new(r, PLB_METRIC_COUNTER, "conns_total", "Other help.",
                                       code_method, NULL, 0, &err));
    ck_assert_int_eq(err, -EEXIST);
    err = 0;
    ck_assert_ptr_null(core_metric_new(r, PLB_METRIC_COUNTER, "conns_total", "Connections.",
                                       L("code"), NULL, 0, &err));
    ck_assert_int_eq(err, -EEXIST);
    err = 0;
    ck_assert_ptr_null(core_metric_new(r, PLB_METRIC_COUNTER, "conns_total", "Connections.",
                                       L("method", "code"), NULL, 0, &err));
    ck_assert_int_eq(err, -EEXIST);
    plb_metric *h =
        core_metric_new(r, PLB_METRIC_HISTOGRAM, "lat_seconds", "L.", NULL, b1, 2, &err);
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_eq(
        core_metric_new(r, PLB_METRIC_HISTOGRAM, "lat_seconds", "L.", NULL, b1, 2, &err), h);
    err = 0;
    ck_assert_ptr_null(
        core_metric_new(r, PLB_METRIC_HISTOGRAM, "lat_seconds", "L.", NULL, b2, 2, &err));
    ck_assert_int_eq(err, -EEXIST);
    /* Names whose samples would clash with another family's. */
    const char *clash[][2] = {
        {"g", "lat_seconds_count"},
        {"g", "lat_seconds_sum"},
        {"g", "lat_seconds_bucket"},
        {"c", "conns"}, /* OpenMetrics names conns_total "conns" */
        {"g", "conns"},
        {"g", "conns_created"}, /* reserved by OpenMetrics */
        {"g", "lat_seconds_created"},
    };
    for (size_t i = 0; i < sizeof(clash) / sizeof(clash[0]); i++) {
        err = 0;
        enum plb_metric_type t = clash[i][0][0] == 'c' ? PLB_METRIC_COUNTER : PLB_METRIC_GAUGE;
        ck_assert_msg(!core_metric_new(r, t, clash[i][1], "x", NULL, NULL, 0, &err), "%s",
                      clash[i][1]);
        ck_assert_int_eq(err, -EEXIST);
    }
    ck_assert_ptr_nonnull(
        core_metric_new(r, PLB_METRIC_GAUGE, "q_count", "Q.", NULL, NULL, 0, &err));
    err = 0;
    ck_assert_ptr_null(core_metric_new(r, PLB_METRIC_HISTOGRAM, "q", "Q.", NULL, NULL, 0, &err));
    ck_assert_int_eq(err, -EEXIST);
    /* Failures changed nothing. */
    char *s = render(r, 0);
    ck_assert_ptr_null(strstr(s, "TYPE conns "));
    ck_assert_ptr_null(strstr(s, "Other help"));
    ck_assert_ptr_null(strstr(s, "TYPE q "));
    core_free(s);
    core_metrics_free(r);
}
END_TEST

START_TEST(test_invalid_names)
{
    struct core_metrics *r = core_metrics_new();
    int err;
    const char *bad_names[] = {"", "0abc", "a-b", "a b", "a.b", "é", "a\n"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        err = 0;
        ck_assert_ptr_null(
            core_metric_new(r, PLB_METRIC_GAUGE, bad_names[i], "x", NULL, NULL, 0, &err));
        ck_assert_int_eq(err, -EINVAL);
    }
    ck_assert_ptr_null(core_metric_new(r, PLB_METRIC_GAUGE, NULL, "x", NULL, NULL, 0, &err));
    ck_assert_int_eq(err, -EINVAL);
    const char *good_names[] = {"a", "_a", ":a", "a:b_c9", "ABC"};
    for (size_t i = 0; i < sizeof(good_names) / sizeof(good_names[0]); i++)
        ck_assert_ptr_nonnull(
            core_metric_new(r, PLB_METRIC_GAUGE, good_names[i], "x", NULL, NULL, 0, &err));
    const char *bad_labels[] = {"", "0a", "a:b", "a-b", "__name__", "__x", "le", "quantile", "é"};
    for (size_t i = 0; i < sizeof(bad_labels) / sizeof(bad_labels[0]); i++) {
        const char *ln[] = {"ok", bad_labels[i], NULL};
        err = 0;
        ck_assert_msg(!core_metric_new(r, PLB_METRIC_GAUGE, "labelled", "x", ln, NULL, 0, &err),
                      "label %s", bad_labels[i]);
        ck_assert_int_eq(err, -EINVAL);
        err = 0;
        ck_assert_ptr_null(
            core_metric_new(r, PLB_METRIC_HISTOGRAM, "labelled_h", "x", ln, NULL, 0, &err));
        ck_assert_int_eq(err, -EINVAL);
    }
    err = 0;
    ck_assert_ptr_null(
        core_metric_new(r, PLB_METRIC_GAUGE, "dup", "x", L("a", "b", "a"), NULL, 0, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(
        core_metric_new(r, PLB_METRIC_GAUGE, "badhelp", "\xc3", NULL, NULL, 0, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(core_metric_new(r, (enum plb_metric_type)0, "t0", "x", NULL, NULL, 0, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(core_metric_new(r, (enum plb_metric_type)4, "t4", "x", NULL, NULL, 0, &err));
    ck_assert_ptr_nonnull(
        core_metric_new(r, PLB_METRIC_GAUGE, "labelled", "x", L("_a", "b9", "_le"), NULL, 0, &err));
    ck_assert_ptr_null(core_metric_new(NULL, PLB_METRIC_GAUGE, "x", "x", NULL, NULL, 0, &err));
    /* Nothing invalid got in. */
    char *s = render(r, 0);
    ck_assert_ptr_null(strstr(s, "badhelp"));
    ck_assert_ptr_null(strstr(s, "dup"));
    ck_assert_ptr_null(strstr(s, "labelled_h"));
    core_free(s);
    core_metrics_free(r);
}
END_TEST

START_TEST(test_escaping)
{
    struct core_metrics *r = core_metrics_new();
    plb_metric *g =
        core_metric_new(r, PLB_METRIC_GAUGE, "esc", "Back\\slash \"quoted\"\nsecond line",
                        L("path"), NULL, 0, NULL);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(core_metric_set(g, V("C:\\dir \"x\"\nnext"), 1), 0);
    char *s = render(r, 0);
    ck_assert_str_eq(s, "# HELP esc Back\\\\slash \"quoted\"\\nsecond line\n"
                        "# TYPE esc gauge\n"
                        "esc{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n");
    core_free(s);
    s = render(r, 1);
    ck_assert_str_eq(s, "# HELP esc Back\\\\slash \\\"quoted\\\"\\nsecond line\n"
                        "# TYPE esc gauge\n"
                        "esc{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n"
                        "# EOF\n");
    core_free(s);
    /* The value came back unescaped from the registry. */
    double v;
    ck_assert_int_eq(core_metric_get(g, V("C:\\dir \"x\"\nnext"), &v), 0);
    core_metrics_free(r);
}
END_TEST

START_TEST(test_remove)
{
    struct core_metrics *r = core_metrics_new();
    double v;
    plb_metric *c = core_metric_new(r, PLB_METRIC_COUNTER, "rm_total", "R.", L("k"), NULL, 0, NULL);
    ck_assert_ptr_nonnull(c);
    char name[16];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof(name), "s%02d", i);
        ck_assert_int_eq(core_metric_add(c, V(name), i + 1), 0);
    }
    ck_assert_uint_eq(core_metric_series_count(c), 50);
    core_metric_remove(c, V("s10"));
    core_metric_remove(c, V("s10"));    /* already gone: nothing */
    core_metric_remove(c, V("absent")); /* never existed: nothing */
    ck_assert_uint_eq(core_metric_series_count(c), 49);
    ck_assert_int_eq(core_metric_get(c, V("s10"), &v), -ENOENT);
    ck_assert_int_eq(core_metric_get(c, V("s11"), &v), 0);
    ck_assert(v == 12);
    char *s = render(r, 0);
    ck_assert_ptr_null(strstr(s, "s10"));
    assert_line(s, "rm_total{k=\"s09\"} 10");
    assert_line(s, "rm_total{k=\"s11\"} 12");
    assert_before(strstr(s, "s09"), strstr(s, "s11"));
    core_free(s);
    /* A re-created series starts from zero. */
    ck_assert_int_eq(core_metric_add(c, V("s10"), 1), 0);
    ck_assert_int_eq(core_metric_get(c, V("s10"), &v), 0);
    ck_assert(v == 1);
    /* Remove every series; the family stays and renders HELP and TYPE. */
    core_metric_remove(c, NULL);
    ck_assert_uint_eq(core_metric_series_count(c), 0);
    ck_assert_int_eq(core_metric_get(c, V("s11"), &v), -ENOENT);
    s = render(r, 0);
    ck_assert_str_eq(s, "# HELP rm_total R.\n# TYPE rm_total counter\n");
    core_free(s);
    ck_assert_int_eq(core_metric_add(c, V("again"), 2), 0);
    ck_assert_uint_eq(core_metric_series_count(c), 1);
    /* A family without labels: NULL names its only series. */
    plb_metric *g = core_metric_new(r, PLB_METRIC_GAUGE, "nolabels", "N.", NULL, NULL, 0, NULL);
    ck_assert_int_eq(core_metric_set(g, NULL, 3), 0);
    core_metric_remove(g, NULL);
    ck_assert_int_eq(core_metric_get(g, NULL, &v), -ENOENT);
    core_metrics_free(r);
}
END_TEST

START_TEST(test_numbers)
{
    struct core_metrics *r = core_metrics_new();
    plb_metric *g = core_metric_new(r, PLB_METRIC_GAUGE, "num", "Numbers.", L("k"), NULL, 0, NULL);
    struct {
        const char *k;
        double v;
        const char *text;
    } cases[] = {
        {"a", 9007199254740992.0, "9007199254740992"}, /* 2^53: no exponent */
        {"b", 1e15, "1000000000000000"},
        {"c", 0.1, "0.1"},
        {"d", 1.0 / 3.0, "0.3333333333333333"},
        {"e", 1e300, "1e+300"},
        {"f", -0.5, "-0.5"},
        {"g", 1e-7, "1e-07"},
        {"h", 123456789.25, "123456789.25"},
        {"i", 18014398509481984.0 + 4, "18014398509481988"}, /* above 2^53, %.17g */
        {"j", -42, "-42"},
        {"k", 0.30000000000000004, "0.30000000000000004"},
    };
    char line[128];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_int_eq(core_metric_set(g, V(cases[i].k), cases[i].v), 0);
    char *s = render(r, 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(line, sizeof(line), "num{k=\"%s\"} %s", cases[i].k, cases[i].text);
        assert_line(s, line);
        /* And the text reads back as the same double. */
        ck_assert(strtod(cases[i].text, NULL) == cases[i].v);
    }
    core_free(s);
    /* Bucket bounds as Go writes them (le), and OpenMetrics' canonical form. */
    const double b[] = {-1, 0, 1e-5, 0.0001, 2.5, 100000, 1e6, 1234567};
    plb_metric *h =
        core_metric_new(r, PLB_METRIC_HISTOGRAM, "le_seconds", "Bounds.", NULL, b, 8, NULL);
    ck_assert_int_eq(core_metric_observe(h, NULL, 1), 0);
    s = render(r, 0);
    const char *le_text[] = {"-1",  "0",      "1e-05", "0.0001",
                             "2.5", "100000", "1e+06", "1.234567e+06"};
    for (size_t i = 0; i < 8; i++) {
        snprintf(line, sizeof(line), "le_seconds_bucket{le=\"%s\"} %d", le_text[i], i >= 4);
        assert_line(s, line);
    }
    assert_line(s, "le_seconds_sum 1");
    core_free(s);
    s = render(r, 1);
    const char *le_om[] = {"-1.0", "0.0",      "1e-05", "0.0001",
                           "2.5",  "100000.0", "1e+06", "1.234567e+06"};
    for (size_t i = 0; i < 8; i++) {
        snprintf(line, sizeof(line), "le_seconds_bucket{le=\"%s\"} %d", le_om[i], i >= 4);
        assert_line(s, line);
    }
    /* Negative bounds: OpenMetrics forbids _sum, and _count goes with it. */
    ck_assert_ptr_null(strstr(s, "le_seconds_sum"));
    ck_assert_ptr_null(strstr(s, "le_seconds_count"));
    core_free(s);
    core_metrics_free(r);
}
END_TEST

/* Two instances of one module register one family: a view each, distinct
 * series told apart by the fixed first label, each removing only its own. */
START_TEST(test_views)
{
    struct core_metrics *r = core_metrics_new();
    int err = 0;
    double v;
    plb_metric *a =
        core_metric_new_view(r, "module_instance", "a", PLB_METRIC_COUNTER, "conns_total",
                             "Connections.", L("upstream"), NULL, 0, &err);
    plb_metric *b =
        core_metric_new_view(r, "module_instance", "b", PLB_METRIC_COUNTER, "conns_total",
                             "Connections.", L("upstream"), NULL, 0, &err);
    ck_assert(a && b && a != b);
    /* The same instance again: the same handle. */
    ck_assert_ptr_eq(core_metric_new_view(r, "module_instance", "a", PLB_METRIC_COUNTER,
                                          "conns_total", "Connections.", L("upstream"), NULL, 0,
                                          &err),
                     a);
    ck_assert_int_eq(core_metric_add(a, V("x:1"), 2), 0);
    ck_assert_int_eq(core_metric_add(a, V("y:1"), 1), 0);
    ck_assert_int_eq(core_metric_add(b, V("x:1"), 5), 0);
    ck_assert_int_eq(core_metric_get(a, V("x:1"), &v), 0);
    ck_assert(v == 2);
    ck_assert_int_eq(core_metric_get(b, V("x:1"), &v), 0);
    ck_assert(v == 5);
    ck_assert_int_eq(core_metric_get(b, V("y:1"), &v), -ENOENT);
    ck_assert_uint_eq(core_metric_series_count(a), 2);
    ck_assert_uint_eq(core_metric_series_count(b), 1);
    /* Wrong type and missing values are refused through a view too. */
    ck_assert_int_eq(core_metric_set(a, V("x:1"), 1), -EINVAL);
    ck_assert_int_eq(core_metric_add(a, NULL, 1), -EINVAL);
    char *s = render(r, 0);
    ck_assert_int_eq((int)(strstr(s, "# TYPE conns_total counter") != NULL), 1);
    ck_assert_ptr_null(strstr(strstr(s, "# TYPE conns_total") + 1, "# TYPE conns_total"));
    assert_line(s, "conns_total{module_instance=\"a\",upstream=\"x:1\"} 2");
    assert_line(s, "conns_total{module_instance=\"a\",upstream=\"y:1\"} 1");
    assert_line(s, "conns_total{module_instance=\"b\",upstream=\"x:1\"} 5");
    core_free(s);
    /* One instance's "remove every series" leaves the other's. */
    core_metric_remove(a, NULL);
    ck_assert_uint_eq(core_metric_series_count(a), 0);
    ck_assert_uint_eq(core_metric_series_count(b), 1);
    ck_assert_int_eq(core_metric_get(b, V("x:1"), &v), 0);
    ck_assert(v == 5);
    ck_assert_int_eq(core_metric_add(a, V("x:1"), 1), 0); /* the hash table still works */
    core_metric_remove(b, V("x:1"));
    ck_assert_uint_eq(core_metric_series_count(b), 0);
    ck_assert_uint_eq(core_metric_series_count(a), 1);
    /* A family without labels of its own, and a prefix of another value. */
    plb_metric *g1 = core_metric_new_view(r, "module_instance", "ab", PLB_METRIC_GAUGE, "port",
                                          "Port.", NULL, NULL, 0, &err);
    plb_metric *g2 = core_metric_new_view(r, "module_instance", "a", PLB_METRIC_GAUGE, "port",
                                          "Port.", NULL, NULL, 0, &err);
    ck_assert(g1 && g2);
    ck_assert_int_eq(core_metric_set(g1, NULL, 8081), 0);
    ck_assert_int_eq(core_metric_set(g2, NULL, 8082), 0);
    ck_assert_uint_eq(core_metric_series_count(g2), 1);
    core_metric_remove(g2, NULL);
    ck_assert_int_eq(core_metric_get(g1, NULL, &v), 0);
    ck_assert(v == 8081);
    /* The fixed label among the module's own, too many labels, bad UTF-8. */
    ck_assert_ptr_null(core_metric_new_view(r, "module_instance", "a", PLB_METRIC_GAUGE, "g2", "",
                                            L("module_instance"), NULL, 0, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(core_metric_new_view(r, "module_instance", "a", PLB_METRIC_GAUGE, "g3", "",
                                            L("l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9",
                                              "l10", "l11", "l12", "l13", "l14", "l15", "l16"),
                                            NULL, 0, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(core_metric_new_view(r, "module_instance", "\xff", PLB_METRIC_GAUGE, "g4",
                                            "", NULL, NULL, 0, &err));
    ck_assert_int_eq(err, -EINVAL);
    core_metrics_free(r);
}
END_TEST

/* A view that cannot be allocated leaves the registry as it was: no new
 * family, no view. */
START_TEST(test_view_alloc_failure)
{
    for (unsigned long n = 1; n < 64; n++) {
        struct core_metrics *r = core_metrics_new();
        int err = 0;
        ck_assert_ptr_nonnull(r);
        char *before = render(r, 0);
        core_alloc_fail_at(n, 0);
        plb_metric *m = core_metric_new_view(r, "module_instance", "a", PLB_METRIC_COUNTER,
                                             "x_total", "X.", L("k"), NULL, 0, &err);
        core_alloc_fail_at(0, 0);
        char *after = render(r, 0);
        if (m) {
            ck_assert_ptr_nonnull(strstr(after, "# TYPE x_total counter"));
        } else {
            ck_assert_int_eq(err, -ENOMEM);
            ck_assert_str_eq(after, before);
        }
        core_free(before);
        core_free(after);
        core_metrics_free(r);
        if (m)
            return; /* every allocation of it has failed once */
    }
    ck_abort_msg("a view still fails after 64 allocations");
}
END_TEST

static Suite *
metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("registry");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_counter);
    tcase_add_test(tc, test_gauge);
    tcase_add_test(tc, test_histogram);
    tcase_add_test(tc, test_reregister);
    tcase_add_test(tc, test_invalid_names);
    tcase_add_test(tc, test_escaping);
    tcase_add_test(tc, test_remove);
    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_views);
    tcase_add_test(tc, test_view_alloc_failure);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(metrics_suite());
}
