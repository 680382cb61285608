/*
 * "Resync within a budget": the daemon against the fake Hetzner API holding
 * 2,000 labelled balancers (40 pages of 50). Under a RateLimit-Limit of
 * 3600 and the default share of 10 %, 360 list requests an hour may go to
 * the resync: 40 pages every 300 s would be 480, so the interval stretches
 * to 400 s, which the gauge prismlb_hetzner_resync_interval_seconds and a
 * log line show, while the fake's request log shows 40 list requests per
 * resync. No test waits for an hour: the first checks what the first
 * resync decided; the second scales the bucket (a limit of 360,000: the
 * stretched interval is 4 s against a configured 1 s) and checks from the
 * fake's request log that resyncs never come more often than that.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "env.h"
#include "testutil.h"

#define NLB 2000
#define GAUGE "prismlb_hetzner_resync_interval_seconds{module_instance=\"hz\",reconciler=\"hz\"}"
#define RESYNCS "prismlb_hetzner_lb_resyncs_total{module_instance=\"hz\",reconciler=\"hz\"}"

/* The seed's extra member: NLB balancers labelled for as many Services
 * (none of which exists: the resync lists them all the same). New. */
static char *
balancers(void)
{
    size_t cap = (size_t)NLB * 160 + 64, len = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    len += (size_t)snprintf(s + len, cap - len, ",\"load_balancers\":[");
    for (int i = 1; i <= NLB; i++)
        len += (size_t)snprintf(s + len, cap - len,
                                "%s{\"name\":\"lb-%04d\",\"load_balancer_type\":\"lb11\","
                                "\"location\":\"hel1\",\"labels\":{\"robotlb/service-uid\":"
                                "\"uid-%04d\"}}",
                                i > 1 ? "," : "", i, i);
    snprintf(s + len, cap - len, "]");
    return s;
}

/* The fakes, and the daemon with hetzner_lb and metrics on *mport. */
static void
start(struct env *e, const char *const *hz_args, int resync_s, int *mport)
{
    char conf[10000];
    char *lbs = balancers();
    env_fakes_start(e, 0, lbs, hz_args);
    free(lbs);
    *mport = tu_free_port();
    snprintf(conf, sizeof(conf),
             "instances = (\n"
             "  { module = \"hetzner_lb\"; name = \"hz\";\n"
             "    hcloud_endpoint = \"%s\"; kubeconfig = \"%s\"; default_network = \"k8s\"; },\n"
             "  { module = \"metrics\"; name = \"probes\"; port = %d; }\n);\n",
             e->hz.url, e->kc, *mport);
    env_spawn(&e->d, "prismlb", conf, resync_s, e->log);
}

/* The page parameter of a list request's path, 0 when none. */
static long
page_of(const char *path)
{
    const char *q = strchr(path, '?');
    for (const char *p = q; p; p = strchr(p + 1, '&'))
        if (strncmp(p + 1, "page=", 5) == 0)
            return strtol(p + 6, NULL, 10);
    return 0;
}

/* The fake's log of resync list requests (GET /v1/load_balancers): how
 * many, how many were a first page (one per resync), and the fake's clock
 * (ms) of each first page into t (up to nt). */
static long
lists(struct env *e, long *first_pages, long long *t, size_t nt)
{
    struct hzt_resp r;
    json_t *q;
    size_t i;
    long n = 0;
    *first_pages = 0;
    ck_assert_int_eq(hzt_req(&e->hz, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
    json_array_foreach(json_object_get(r.body, "requests"), i, q)
    {
        const char *route = json_string_value(json_object_get(q, "route"));
        const char *path = json_string_value(json_object_get(q, "path"));
        if (!route || !path || strcmp(route, "GET /v1/load_balancers") != 0)
            continue;
        ck_assert_ptr_nonnull(strstr(path, "per_page=50"));
        n++;
        if (page_of(path) == 1) {
            if ((size_t)*first_pages < nt)
                t[*first_pages] = (long long)json_integer_value(json_object_get(q, "t_ms"));
            ++*first_pages;
        }
    }
    hzt_resp_free(&r);
    return n;
}

/* RateLimit-Limit 3600, 2,000 balancers, resync_interval 300 s: the
 * interval stretches to 400 s, so list requests stay at 360 an hour. */
START_TEST(two_thousand_balancers_under_3600_stretch_the_resync_to_400_s)
{
    struct env e;
    int mport;
    char *m = NULL;
    start(&e, NULL, 300, &mport);
    long long dl = tu_now_ms() + 60000;
    for (;;) {
        ck_assert_msg(!tu_exited(&e.d), "the daemon exited");
        free(m);
        m = tu_scrape(mport);
        if (env_metric(m, RESYNCS) >= 1)
            break;
        if (tu_now_ms() > dl) {
            dump_log(&e);
            ck_abort_msg("no resync completed:\n%s", m ? m : "(no metrics)");
        }
        tu_sleep_ms(200);
    }
    double interval = env_metric(m, GAUGE);
    ck_assert_msg(interval == 400, "resync interval gauge %g:\n%s", interval, m);
    free(m);
    long first;
    long long t[4];
    long n = lists(&e, &first, t, 4);
    ck_assert_int_eq(first, 1);
    ck_assert_int_eq(n, 40);
    /* 40 pages per resync, 3600 s / 400 s = 9 resyncs an hour. */
    ck_assert_int_le(n * 3600 / (long)interval, 360);
    char *text = tu_read_file(e.log, NULL);
    ck_assert_ptr_nonnull(text);
    const char *p = strstr(text, "resync: interval stretched");
    ck_assert_msg(p, "no log line of the stretch:\n%s", text);
    ck_assert_msg(!strstr(p + 1, "resync: interval stretched"), "logged twice");
    while (p > text && p[-1] != '\n')
        p--;
    char line[1024];
    snprintf(line, sizeof(line), "%.*s", (int)strcspn(p, "\n"), p);
    ck_assert_msg(strstr(line, "resync_interval=400s") && strstr(line, "needed=40") &&
                      strstr(line, "rate_limit=3600") && strstr(line, "budget_percent=10"),
                  "%s", line);
    free(text);
    env_stop(&e);
}
END_TEST

/* The timer follows: a limit of 360,000 allows 36,000 list requests an
 * hour, 10 a second, so 40 pages stretch a configured resync_interval of
 * 1 s to 4 s. Resync k starts at the earliest 4 s × (k - 1) after the
 * first (the timer never fires early and its jitter only lengthens), so
 * the first pages logged by the time of the last one are at most
 * 2 + elapsed / 4 s (one for the first resync, one for a first request
 * delayed after its timer fired). A slower machine only makes fewer. */
START_TEST(the_stretched_interval_spaces_the_resyncs)
{
    struct env e;
    int mport;
    char *m = NULL;
    const char *const args[] = {"--rate-bucket", "360000", "--rate-refill-per-s", "100", NULL};
    start(&e, args, 1, &mport);
    long long dl = tu_now_ms() + 60000;
    for (;;) {
        ck_assert_msg(!tu_exited(&e.d), "the daemon exited");
        free(m);
        m = tu_scrape(mport);
        if (env_metric(m, RESYNCS) >= 3)
            break;
        if (tu_now_ms() > dl) {
            dump_log(&e);
            ck_abort_msg("three resyncs did not complete:\n%s", m ? m : "(no metrics)");
        }
        tu_sleep_ms(200);
    }
    ck_assert_msg(env_metric(m, GAUGE) == 4, "%s", m);
    free(m);
    long first, n;
    long long t[64];
    n = lists(&e, &first, t, 64);
    ck_assert_int_ge(first, 3);
    ck_assert_int_le(first, 64);
    ck_assert_int_ge(n, 40 * 3);
    ck_assert_int_le(n, 40 * first);
    long long elapsed = t[first - 1] - t[0];
    fprintf(stderr, "budget: %ld resyncs, %ld list requests, first pages over %lld ms\n", first, n,
            elapsed);
    ck_assert_msg(first <= 2 + elapsed / 4000, "%ld resyncs in %lld ms", first, elapsed);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb budget");
    TCase *tc = tcase_create("budget");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, two_thousand_balancers_under_3600_stretch_the_resync_to_400_s);
    tcase_add_test(tc, the_stretched_interval_spaces_the_resyncs);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
