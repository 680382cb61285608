/*
 * Scraping the daemon's /metrics with real clients:
 *   promtool    `promtool check metrics` accepts the exposition, lint included;
 *   promtool-proxy  the same for a daemon running the proxy role (mod_tcp_proxy
 *               balancing two upstreams published by a source instance);
 *   prometheus  a real Prometheus on loopback scrapes the daemon every second
 *               and its HTTP API reports up == 1 and prismlb metrics' values;
 *   two-instances  two instances of one module registering one family give
 *               two series (module_instance), scraped with curl and accepted
 *               by promtool; the process families stay one series;
 *   rss         10,000 keep-alive scrapes leave the daemon's RSS flat (5 %).
 * Usage: test_scrape [promtool|promtool-proxy|two-instances|prometheus|rss]
 * (default: all).
 */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "env.h"

#define PROMTOOL "/usr/bin/promtool"
#define CURL_PROGRAM "/usr/bin/curl"
#define PROMETHEUS "/usr/bin/prometheus"

/* A daemon with the demo-like wiring: a test instance and mod_metrics. */
static void
start_daemon(struct tu_daemon *d, int port)
{
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "instances = (\n"
             "  { module = \"lifecycle\"; name = \"worker\"; trace_file = \"trace.log\";\n"
             "    ready_after = \"100ms\"; },\n"
             "  { module = \"metrics\"; port = %d; }\n"
             ");\n",
             port);
    me_daemon_start(d, conf, port);
}

/* ------------------------------------------------------------------ */

/* Scrape url and run `promtool check metrics` on it; aborts with promtool's
 * complaints. Returns the number of families. */
static int
promtool_check(const char *url, const char *dir, const char *name)
{
    struct me_resp r;
    ck_assert_int_eq(me_http("GET", url, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    char path[4096], cmd[8192];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    ck_assert_int_eq(tu_write_file(path, r.body), 0);
    snprintf(cmd, sizeof(cmd), "%s check metrics < '%s'", PROMTOOL, path);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    char *out = NULL;
    int rc = tu_run(argv, NULL, &out, 30000);
    ck_assert_msg(rc == 0 && out && out[0] == '\0',
                  "promtool check metrics: exit %d, output:\n%s\non:\n%s", rc, out ? out : "",
                  r.body);
    int families = 0;
    for (const char *p = r.body; (p = strstr(p, "# TYPE ")) != NULL; p++)
        families++;
    printf("promtool check metrics: OK on %zu bytes, %d families (%s)\n", r.len, families, name);
    free(out);
    me_resp_free(&r);
    return families;
}

START_TEST(promtool_accepts_metrics)
{
    int port = tu_free_port();
    struct tu_daemon d;
    start_daemon(&d, port);
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);

    /* Twice: a second scrape has moved the counters. */
    ck_assert_int_ge(promtool_check(url, d.dir, "scrape0.txt"), 7);
    ck_assert_int_ge(promtool_check(url, d.dir, "scrape1.txt"), 7);
    me_daemon_stop(&d);
}
END_TEST

/* The proxy role: a source instance publishes two upstreams (this daemon's
 * own metrics port, which accepts, and port 1, which refuses), mod_tcp_proxy
 * balances them, mod_metrics serves its metrics and readiness. */
START_TEST(promtool_accepts_proxy_role_metrics)
{
    int port = tu_free_port(), proxy_port = tu_free_port();
    char conf[2048];
    snprintf(conf, sizeof(conf),
             "instances = (\n"
             "  { module = \"lifecycle\"; name = \"apiservers\"; trace_file = \"trace.log\";\n"
             "    publish = [ \"127.0.0.1:%d\", \"127.0.0.1:1\" ]; },\n"
             "  { module = \"tcp_proxy\"; name = \"kubeprism\"; upstreams = [ \"apiservers\" ];\n"
             "    bind_address = \"127.0.0.1\"; bind_port = %d;\n"
             "    health_interval = \"2s\"; health_timeout = \"1s\"; },\n"
             "  { module = \"metrics\"; port = %d; }\n"
             ");\n",
             port, proxy_port, port);
    struct tu_daemon d;
    me_daemon_start(&d, conf, port);
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);

    /* Wait (bounded) until the proxy has judged its upstreams. */
    struct me_resp r;
    long long deadline = tu_now_ms() + 15000;
    for (;;) {
        ck_assert_int_eq(me_http("GET", url, NULL, &r), 0);
        if (strstr(r.body, "proxy=\"kubeprism\",upstream=\"127.0.0.1:1\"") &&
            strstr(r.body, "upstream=\"127.0.0.1:1\"} 0\n")) {
            break;
        }
        me_resp_free(&r);
        ck_assert_msg(tu_now_ms() < deadline, "no proxy metrics within 15 s");
        tu_sleep_ms(200);
    }
    me_resp_free(&r);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/readyz", port);
    ck_assert_int_eq(me_http("GET", url, NULL, &r), 0);
    ck_assert_msg(r.status == 200, "/readyz %ld with one healthy upstream:\n%s", r.status, r.body);
    me_resp_free(&r);

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);
    ck_assert_int_ge(promtool_check(url, d.dir, "proxy-role.txt"), 10);
    me_daemon_stop(&d);
}
END_TEST

/* Lines of text that begin with prefix. */
static int
count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t l = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, prefix, l) == 0)
            n++;
    return n;
}

/* Two instances of the test module set the same family (lifecycle_port, no
 * labels of their own) to their own port; two mod_metrics instances serve
 * the registry. The curl program scrapes each, promtool accepts the text,
 * and it holds one family with a series per instance, told apart by the
 * module_instance label the daemon adds, while process_* and
 * prismlb_build_info (the daemon's) stay one series without it. */
START_TEST(two_instances_of_one_module_give_two_series)
{
    int port = tu_free_port(), port2 = tu_free_port();
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "instances = (\n"
             "  { module = \"lifecycle\"; name = \"alpha\"; trace_file = \"trace.log\";\n"
             "    port = 8081; port_metric = true; },\n"
             "  { module = \"lifecycle\"; name = \"beta\"; trace_file = \"trace.log\";\n"
             "    port = 8082; port_metric = true; },\n"
             "  { module = \"metrics\"; name = \"probes\"; port = %d; },\n"
             "  { module = \"metrics\"; name = \"probes2\"; port = %d; }\n"
             ");\n",
             port, port2);
    struct tu_daemon d;
    me_daemon_start(&d, conf, port);
    int ports[] = {port, port2};
    for (int i = 0; i < 2; i++) {
        char url[256], path[4096], cmd[8192];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", ports[i]);
        snprintf(path, sizeof(path), "%s/two-instances-%d.txt", d.dir, i);
        char *curl_argv[] = {CURL_PROGRAM, "-fsS", "--max-time", "10", "-o", path, url, NULL};
        char *out = NULL;
        int rc = tu_run(curl_argv, NULL, &out, 30000);
        ck_assert_msg(rc == 0, "curl %s: exit %d: %s", url, rc, out ? out : "");
        free(out);
        out = NULL;
        snprintf(cmd, sizeof(cmd), "%s check metrics < '%s'", PROMTOOL, path);
        char *sh_argv[] = {"/bin/sh", "-c", cmd, NULL};
        rc = tu_run(sh_argv, NULL, &out, 30000);
        char *body = tu_read_file(path, NULL);
        ck_assert_ptr_nonnull(body);
        ck_assert_msg(rc == 0 && out && out[0] == '\0',
                      "promtool check metrics: exit %d, output:\n%s\non:\n%s", rc, out ? out : "",
                      body);
        free(out);
        ck_assert_int_eq(count_lines(body, "# TYPE lifecycle_port gauge\n"), 1);
        ck_assert_int_eq(count_lines(body, "lifecycle_port{"), 2);
        ck_assert_msg(count_lines(body, "lifecycle_port{module_instance=\"alpha\"} 8081\n") == 1 &&
                          count_lines(body, "lifecycle_port{module_instance=\"beta\"} 8082\n") == 1,
                      "no series per instance in:\n%s", body);
        ck_assert_int_eq(count_lines(body, "# TYPE lifecycle_start_seconds histogram\n"), 1);
        ck_assert_msg(
            count_lines(body, "lifecycle_start_seconds_count{module_instance=\"alpha\"} 1\n") ==
                    1 &&
                count_lines(body, "lifecycle_start_seconds_count{module_instance=\"beta\"} 1\n") ==
                    1,
            "no observation per instance in:\n%s", body);
        ck_assert_int_eq(count_lines(body, "process_resident_memory_bytes "), 1);
        ck_assert_int_eq(count_lines(body, "process_cpu_seconds_total "), 1);
        ck_assert_int_eq(count_lines(body, "prismlb_build_info{version=\""), 1);
        printf("curl + promtool check metrics: OK (port %d): lifecycle_port has a series for "
               "alpha and for beta, process families one each\n",
               ports[i]);
        free(body);
    }
    me_daemon_stop(&d);
}
END_TEST

/* ------------------------------------------------------------------ */

/* GET a Prometheus API URL and parse its JSON; NULL when not (yet) there. */
static json_t *
prom_get(int port, const char *path_and_query)
{
    char url[2048];
    struct me_resp r;
    json_t *j = NULL;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path_and_query);
    if (me_http("GET", url, NULL, &r) == 0 && r.status == 200)
        j = json_loads(r.body, 0, NULL);
    me_resp_free(&r);
    return j;
}

/* The value (as a string) of the first sample of an instant query, with
 * its labels in *metric (borrowed from *doc, which the caller frees). */
static const char *
query_value(int port, const char *expr, json_t **doc, json_t **metric)
{
    char *esc = curl_easy_escape(NULL, expr, 0);
    ck_assert_ptr_nonnull(esc);
    char path[1024];
    snprintf(path, sizeof(path), "/api/v1/query?query=%s", esc);
    curl_free(esc);
    *doc = prom_get(port, path);
    if (!*doc)
        return NULL;
    json_t *res = json_object_get(json_object_get(*doc, "data"), "result");
    if (!json_is_array(res) || json_array_size(res) == 0)
        return NULL;
    json_t *first = json_array_get(res, 0);
    if (metric)
        *metric = json_object_get(first, "metric");
    return json_string_value(json_array_get(json_object_get(first, "value"), 1));
}

START_TEST(prometheus_scrapes_daemon)
{
    int port = tu_free_port(), pport = tu_free_port();
    struct tu_daemon d;
    start_daemon(&d, port);

    char cfg[4096], yml[8192], tsdb[4096], log[4096], listen[64];
    snprintf(cfg, sizeof(cfg), "%s/prometheus.yml", d.dir);
    snprintf(tsdb, sizeof(tsdb), "%s/tsdb", d.dir);
    snprintf(log, sizeof(log), "%s/prometheus.log", d.dir);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", pport);
    snprintf(yml, sizeof(yml),
             "global:\n"
             "  scrape_interval: 1s\n"
             "  evaluation_interval: 1s\n"
             "scrape_configs:\n"
             "  - job_name: prismlb\n"
             "    scrape_interval: 1s\n"
             "    scrape_timeout: 1s\n"
             "    static_configs:\n"
             "      - targets: ['127.0.0.1:%d']\n",
             port);
    ck_assert_int_eq(tu_write_file(cfg, yml), 0);

    char cfg_arg[4200], tsdb_arg[4200], listen_arg[128];
    snprintf(cfg_arg, sizeof(cfg_arg), "--config.file=%s", cfg);
    snprintf(tsdb_arg, sizeof(tsdb_arg), "--storage.tsdb.path=%s", tsdb);
    snprintf(listen_arg, sizeof(listen_arg), "--web.listen-address=%s", listen);
    char *argv[] = {PROMETHEUS, cfg_arg, tsdb_arg, listen_arg, "--log.level=warn", NULL};
    struct tu_proc prom;
    long long t0 = tu_now_ms();
    ck_assert_int_eq(tu_spawn(&prom, argv, NULL, log), 0);

    int up = 0, have_build = 0, have_rss = 0;
    char build_version[128] = "", abi[32] = "";
    double rss = 0;
    while (tu_now_ms() < t0 + 30000 && !(up && have_build && have_rss)) {
        json_t *doc = NULL, *metric = NULL;
        const char *v;
        if (!up) {
            v = query_value(pport, "up{job=\"prismlb\"}", &doc, NULL);
            up = v && strcmp(v, "1") == 0;
            json_decref(doc);
        }
        if (up && !have_build) {
            v = query_value(pport, "prismlb_build_info{job=\"prismlb\"}", &doc, &metric);
            if (v && strcmp(v, "1") == 0) {
                have_build = 1;
                snprintf(build_version, sizeof(build_version), "%s",
                         json_string_value(json_object_get(metric, "version")));
                snprintf(abi, sizeof(abi), "%s", json_string_value(json_object_get(metric, "abi")));
            }
            json_decref(doc);
        }
        if (up && !have_rss) {
            v = query_value(pport, "process_resident_memory_bytes{job=\"prismlb\"}", &doc, NULL);
            if (v) {
                rss = strtod(v, NULL);
                have_rss = rss > 0;
            }
            json_decref(doc);
        }
        if (!(up && have_build && have_rss))
            tu_sleep_ms(250);
    }
    long long took = tu_now_ms() - t0;

    /* The target's own view: healthy, no scrape error. */
    json_t *targets = up ? prom_get(pport, "/api/v1/targets") : NULL;
    json_t *active =
        targets ? json_object_get(json_object_get(targets, "data"), "activeTargets") : NULL;
    json_t *t = active ? json_array_get(active, 0) : NULL;
    const char *health = t ? json_string_value(json_object_get(t, "health")) : NULL;
    const char *last_error = t ? json_string_value(json_object_get(t, "lastError")) : NULL;
    char health_copy[32] = "", error_copy[512] = "";
    snprintf(health_copy, sizeof(health_copy), "%s", health ? health : "");
    snprintf(error_copy, sizeof(error_copy), "%s", last_error ? last_error : "(none)");
    json_decref(targets);

    int st = tu_stop(&prom, SIGTERM, 10000);
    char *plog = tu_read_file(log, NULL);
    ck_assert_msg(up, "Prometheus never saw up == 1 within 30 s; its log:\n%s", plog);
    ck_assert_msg(have_build && have_rss, "no prismlb metric value within 30 s; its log:\n%s",
                  plog);
    ck_assert_str_eq(abi, ME_ABI);
    ck_assert_msg(build_version[0] != '\0', "prismlb_build_info has no version label");
    ck_assert_str_eq(health_copy, "up");
    ck_assert_str_eq(error_copy, "");
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "prometheus exit status 0x%x", st);
    printf("prometheus: up == 1, prismlb_build_info{version=\"%s\",abi=\"%s\"} == 1, "
           "process_resident_memory_bytes == %.0f, after %lld ms\n",
           build_version, abi, rss, took);
    free(plog);
    me_daemon_stop(&d);
}
END_TEST

/* ------------------------------------------------------------------ */

static size_t
discard_cb(char *data, size_t size, size_t nmemb, void *arg)
{
    (void)data;
    size_t *total = arg;
    *total += size * nmemb;
    return size * nmemb;
}

/* n scrapes with one easy handle (keep-alive); asserts each is a 200.
 * Returns how many new connections they opened. */
static long
scrape_many(CURL *c, int n)
{
    long opened = 0;
    for (int i = 0; i < n; i++) {
        CURLcode cc = curl_easy_perform(c);
        ck_assert_msg(cc == CURLE_OK, "scrape %d: %s", i, curl_easy_strerror(cc));
        long status = 0, conns = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        ck_assert_msg(status == 200, "scrape %d: status %ld", i, status);
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &conns);
        opened += conns;
    }
    return opened;
}

START_TEST(rss_flat_over_10000_scrapes)
{
    /* Under AddressSanitizer freed memory sits in a quarantine that grows
     * RSS by design; turn the quarantine off so the figure means the same
     * in both builds (harmless without ASan). */
    const char *asan = getenv("ASAN_OPTIONS");
    static char asan_env[1024];
    snprintf(asan_env, sizeof(asan_env), "ASAN_OPTIONS=%s%squarantine_size_mb=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    putenv(asan_env);

    int port = tu_free_port();
    struct tu_daemon d;
    start_daemon(&d, port);
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);

    CURL *c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    size_t bytes = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &bytes);

    ck_assert_int_eq(scrape_many(c, 1000), 1); /* warm-up, on one connection */
    long before = me_vmrss_kib(d.proc.pid);
    long long t = tu_now_ms();
    long conns = scrape_many(c, 10000);
    long long took = tu_now_ms() - t;
    long after = me_vmrss_kib(d.proc.pid);
    curl_easy_cleanup(c);

    ck_assert_int_gt(before, 0);
    ck_assert_int_gt(after, 0);
    double change = 100.0 * (double)(after - before) / (double)before;
    printf("rss: %ld KiB after 1,000 warm-up scrapes, %ld KiB after 10,000 more (%+.2f %%); "
           "%lld ms, %.0f scrapes/s, %zu bytes in all\n",
           before, after, change, took, took ? 10000.0 * 1000.0 / (double)took : 0.0, bytes);
    ck_assert_msg(change <= 5.0 && change >= -5.0, "RSS moved %+.2f %% (%ld -> %ld KiB)", change,
                  before, after);
    /* Every scrape reused the warm-up's connection. */
    ck_assert_int_eq(conns, 0);
    me_daemon_stop(&d);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("metrics-scrape");
    TCase *tc = tcase_create("promtool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, promtool_accepts_metrics);
    suite_add_tcase(s, tc);
    tc = tcase_create("promtool-proxy");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, promtool_accepts_proxy_role_metrics);
    suite_add_tcase(s, tc);
    tc = tcase_create("two-instances");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, two_instances_of_one_module_give_two_series);
    suite_add_tcase(s, tc);
    tc = tcase_create("prometheus");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, prometheus_scrapes_daemon);
    suite_add_tcase(s, tc);
    tc = tcase_create("rss");
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, rss_flat_over_10000_scrapes);
    suite_add_tcase(s, tc);
    return s;
}

int
main(int argc, char **argv)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = tu_run_tcase(suite(), argc > 1 ? argv[1] : NULL);
    curl_global_cleanup();
    return rc;
}
