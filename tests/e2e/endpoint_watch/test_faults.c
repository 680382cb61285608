/*
 * endpoint_watch under faults, sentence by sentence from the spec's
 * reconnect rules ("Two-level endpoint discovery", "Endpoint discovery")
 * and the meaning of prismlb_discovery_errors_total ("provider failures,
 * failed Watch calls, watch error events and failed re-lists. A watch
 * stream ending is not counted, including on a dropped connection, and
 * neither is 410 Gone expiry").
 *
 * The faults come from the fake API server's admin API; times come from
 * its request log (wall clock at arrival) and from the daemon's log. The
 * rules themselves are the core informer's (core/kube/backoff.c) and have
 * fake-clock unit tests in tests/unit/kube/test_kube_backoff.c (the 30 s
 * cap and the reset after a long watch, which would take minutes here).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

static struct ewt T;
static char settings[4400];

#define NS "default"
#define SVC "kubernetes"
#define HTTPS "https=6443"
#define STATIC "10.0.0.1:6443"

static void
setup_with(const char *const *fake_args)
{
    ck_assert_int_eq(ewt_init(&T), 0);
    ck_assert_int_eq(ewt_fake_start(&T, fake_args), 0);
    ewt_write_kubeconfig(&T, NULL);
    snprintf(settings, sizeof(settings), "endpoints = [\"%s\"]; kubeconfig = \"%s\";", STATIC,
             T.kubeconfig);
}

static void
setup(void)
{
    setup_with(NULL);
}

static void
setup_bookmarks(void)
{
    const char *args[] = {"--bookmark-interval-ms", "100", NULL};
    setup_with(args);
}

static void
teardown(void)
{
    ck_assert_msg(ewt_fini(&T) == 0, "the daemon did not end cleanly (see above)");
}

static double
errors(void)
{
    return ewt_metric(&T, "prismlb_discovery_errors_total", "kubernetes");
}

static double
updates(void)
{
    return ewt_metric(&T, "prismlb_discovery_updates_total", "kubernetes");
}

static void
faults(const char *json)
{
    ck_assert_int_eq(ewt_admin(&T, "POST", "/faults", json), 200);
}

/* Wait until the fake has seen n requests of the kind; their times. */
static int
wait_requests(const char *frag2, int n, double *times, int max, int timeout_ms)
{
    long long end = tu_now_ms() + timeout_ms;
    int got;
    while ((got = ewt_requests(&T, "GET", "endpointslices?", frag2, times, max)) < n &&
           tu_now_ms() < end)
        tu_sleep_ms(20);
    return got;
}

/* Start with one slice listing 10.0.1.1 and wait for the set. */
static void
start_with_slice(void)
{
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.1.1", HTTPS), 0);
    ck_assert_int_eq(ewt_daemon_start(&T, settings, NULL, NULL), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.1:6443", 5000), 0);
    ck_assert_int_eq(wait_requests("watch=1", 1, NULL, 0, 3000), 1);
}

/* Timing slack: the fake stamps a request when it arrives, after the
 * daemon's timer fired and its request was sent, so a gap is never shorter
 * than the delay; it may be longer on a loaded machine, by up to 0.5 s here
 * (0.8 s for "at once", still below the 1 s first backoff step). */

/* "On 410 Gone (etcd compaction), performs a full re-list to rebuild the
 * endpoint cache." — changes made while the watch was down and whose
 * history is gone arrive through the re-list; 410 is not an error. "After
 * a successful re-list ... Otherwise it waits for the backoff." */
START_TEST(gone_410_relists_to_rebuild_the_cache)
{
    start_with_slice();
    faults("{\"watch_gone_next\": 1}");
    ck_assert_int_eq(ewt_admin(&T, "POST", "/watches/close?mode=clean", NULL), 200);
    /* While no watch is open: slice replaced by another. */
    ck_assert_int_eq(ewt_slice_delete(&T, NS, "kubernetes"), 0);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes-2", "10.0.2.1", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.2.1:6443", 5000), 0);
    double lists[4], watches[4];
    ck_assert_int_eq(wait_requests("limit=", 2, lists, 4, 1000), 2);
    ck_assert_int_eq(wait_requests("watch=1", 3, watches, 4, 5000), 3);
    /* The re-list came right after the 410 watch (at once)... */
    ck_assert_msg(lists[1] - watches[1] >= 0 && lists[1] - watches[1] < 0.8,
                  "re-list %.3f s after the 410", lists[1] - watches[1]);
    /* ...and the next watch waited for the backoff: 2 s (the short clean
     * close before took the 1 s step), plus up to 25 % jitter. */
    double gap = watches[2] - lists[1];
    ck_assert_msg(gap >= 1.95 && gap <= 2.5 + 0.5, "watch %.3f s after the re-list", gap);
    ck_assert(errors() == 0);
    ck_assert_int_eq(ewt_wait_log(&T, "re-listing", 100), 0);
}
END_TEST

/* "failed re-lists" are errors, and a failed re-list keeps the cache: the
 * sink keeps its set, nothing is published until a list succeeds. */
START_TEST(failed_relist_is_an_error_and_keeps_the_cache)
{
    start_with_slice();
    double u0 = updates();
    faults("{\"watch_gone_next\": 1, \"fail_count\": 1, \"fail_status\": 500, "
           "\"fail_match\": \"limit=\"}");
    ck_assert_int_eq(ewt_admin(&T, "POST", "/watches/close?mode=clean", NULL), 200);
    ck_assert_int_eq(ewt_wait_log(&T, "status 500", 5000), 0);
    ck_assert(errors() == 1);
    ck_assert(updates() == u0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.1:6443", 10), 0);
    /* The re-list is retried after the backoff; later changes arrive. */
    ck_assert_int_eq(wait_requests("limit=", 3, NULL, 0, 5000), 3);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.1.2", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.2:6443", 8000), 0);
    ck_assert(errors() == 1);
}
END_TEST

/* "Reconnects with exponential backoff on Watch errors: the delay starts at
 * 1s and doubles up to 30s, and each delay gets up to 25% random jitter on
 * top." — and failed Watch calls (non-410) are counted. */
START_TEST(watch_errors_back_off_from_1s_doubling_with_jitter_and_count)
{
    faults("{\"fail_count\": 3, \"fail_status\": 500, \"fail_match\": \"watch=1\"}");
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.1.1", HTTPS), 0);
    ck_assert_int_eq(ewt_daemon_start(&T, settings, NULL, NULL), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.1:6443", 5000), 0);
    double w[8];
    ck_assert_int_eq(wait_requests("watch=1", 4, w, 8, 15000), 4);
    double lo[] = {1.0, 2.0, 4.0}, hi[] = {1.25, 2.5, 5.0};
    for (int i = 0; i < 3; i++) {
        double gap = w[i + 1] - w[i];
        ck_assert_msg(gap >= lo[i] - 0.05 && gap <= hi[i] + 0.5,
                      "retry %d came %.3f s after the failure (want %.2f-%.2f s)", i + 1, gap,
                      lo[i], hi[i]);
    }
    ck_assert(errors() == 3);
    ck_assert_int_eq(ewt_log_count(&T, "watch status 500"), 3);
    /* The fourth watch is open: changes arrive. */
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.1.2", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.2:6443", 2000), 0);
    ck_assert(errors() == 3);
}
END_TEST

/* A failed list at startup ("provider failures") is an error, retried after
 * the backoff. */
START_TEST(failed_initial_list_counts_and_is_retried)
{
    faults("{\"fail_count\": 1, \"fail_status\": 503, \"fail_match\": \"limit=\"}");
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.1.1", HTTPS), 0);
    ck_assert_int_eq(ewt_daemon_start(&T, settings, NULL, NULL), 0);
    ck_assert_int_eq(ewt_wait_set(&T, STATIC, 3000), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.1:6443", 5000), 0);
    double l[4];
    ck_assert_int_eq(wait_requests("limit=", 2, l, 4, 100), 2);
    ck_assert_msg(l[1] - l[0] >= 0.95 && l[1] - l[0] <= 1.25 + 0.5, "list retried after %.3f s",
                  l[1] - l[0]);
    ck_assert(errors() == 1);
}
END_TEST

/* "A watch stream ending is not counted, including on a dropped
 * connection": clean ends and dropped connections re-open the watch and
 * count nothing. */
START_TEST(stream_end_and_dropped_connection_are_not_errors)
{
    start_with_slice();
    ck_assert_int_eq(ewt_admin(&T, "POST", "/watches/close?mode=clean", NULL), 200);
    ck_assert_int_eq(wait_requests("watch=1", 2, NULL, 0, 5000), 2);
    ck_assert_int_eq(ewt_admin(&T, "POST", "/watches/close?mode=drop", NULL), 200);
    ck_assert_int_eq(wait_requests("watch=1", 3, NULL, 0, 8000), 3);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.1.3", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.3:6443", 2000), 0);
    ck_assert(errors() == 0);
    /* No re-list was needed: the watches resumed from the resourceVersion. */
    ck_assert_int_eq(ewt_requests(&T, "GET", "endpointslices?", "limit=", NULL, 0), 1);
}
END_TEST

/* "A stream that stayed open for at least 30 seconds and then closed
 * without an error is re-opened immediately." and "After a successful
 * re-list it starts the next watch at once if ... [the 410] hit the
 * re-watch right after such a watch closed without an error". */
START_TEST(long_clean_watch_reopens_at_once_and_410_after_it_rewatches_at_once)
{
    faults("{\"watch_close_ms\": 30300, \"watch_close_mode\": \"clean\"}");
    start_with_slice();
    faults("{\"watch_gone_next\": 1}");
    double w[4], l[4];
    ck_assert_int_eq(wait_requests("watch=1", 3, w, 4, 40000), 3);
    ck_assert_int_eq(wait_requests("limit=", 2, l, 4, 100), 2);
    double reopen = w[1] - w[0];
    ck_assert_msg(reopen >= 30.2 && reopen < 30.3 + 0.8, "re-watch %.3f s after the watch opened",
                  reopen);
    ck_assert_msg(l[1] - w[1] >= 0 && l[1] - w[1] < 0.8, "re-list %.3f s after the 410",
                  l[1] - w[1]);
    ck_assert_msg(w[2] - l[1] >= 0 && w[2] - l[1] < 0.8, "watch %.3f s after the re-list",
                  w[2] - l[1]);
    ck_assert(errors() == 0);
}
END_TEST

/* A quiet watch kept alive by bookmarks: no reconnect, no re-list, no
 * error for seconds without changes, and the next change arrives at once. */
START_TEST(quiet_watch_kept_alive_by_bookmarks)
{
    start_with_slice();
    tu_sleep_ms(3000);
    ck_assert_int_eq(ewt_requests(&T, "GET", "endpointslices?", "watch=1", NULL, 0), 1);
    ck_assert_int_eq(
        ewt_requests(&T, "GET", "endpointslices?", "allowWatchBookmarks=true", NULL, 0), 1);
    long long t0 = tu_now_ms();
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.1.4", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.1.4:6443", 10000), 0);
    printf("quiet watch: the change arrived after %lld ms\n", tu_now_ms() - t0);
    /* through the watch that stayed open: no re-list, no second watch */
    ck_assert_int_eq(ewt_requests(&T, "GET", "endpointslices?", "limit=", NULL, 0), 1);
    ck_assert_int_eq(ewt_requests(&T, "GET", "endpointslices?", "watch=1", NULL, 0), 1);
    ck_assert(errors() == 0);
}
END_TEST

/* Cancellation during a watch: SIGTERM stops endpoint discovery and the
 * daemon exits promptly and cleanly; the fake sees the watch go. */
START_TEST(sigterm_during_a_watch_exits_promptly)
{
    start_with_slice();
    long long ms = 0;
    int st = ewt_daemon_stop(&T, 5000, &ms);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "wait status %d", st);
    ck_assert_msg(ms < 1000, "stopped after %lld ms", ms);
    char *log = ewt_log(&T);
    ck_assert_ptr_nonnull(strstr(log, "instance=ew module=endpoint_watch msg=stopped"));
    free(log);
    long long end = tu_now_ms() + 3000;
    int open = 1;
    while (open && tu_now_ms() < end) {
        struct http_res r;
        ck_assert_int_eq(fake_admin(&T.f, "GET", "/state", NULL, &r), 0);
        open = strstr(r.body, "\"watches\":0") == NULL && strstr(r.body, "\"watches\": 0") == NULL;
        http_res_free(&r);
        if (open)
            tu_sleep_ms(20);
    }
    ck_assert_msg(!open, "the fake still counts an open watch");
}
END_TEST

/* "Provider failures are isolated: if the Kubernetes provider fails, the
 * static provider continues operating independently." — an unreachable API
 * server: failures counted at the backoff's pace (no error loop), the sink
 * keeps the static set, /healthz stays ok. Then the API server appears and
 * discovery picks it up. */
START_TEST(unreachable_api_server_is_isolated_then_picked_up)
{
    char port[16];
    const char *url = T.f.server[0];
    snprintf(port, sizeof(port), "%s", strrchr(url, ':') + 1);
    ck_assert_int_eq(ewt_fake_stop(&T), 0);
    long long t0 = tu_now_ms();
    ck_assert_int_eq(ewt_daemon_start(&T, settings, NULL, NULL), 0);
    ck_assert_int_eq(ewt_wait_set(&T, STATIC, 3000), 0);
    /* Two failures (bounded wait), then at most as many as the backoff
     * (1 s, doubling) allows in the time that passed: a busy machine only
     * makes fewer. Each failure has its log line. */
    double e;
    long long end = t0 + 15000;
    while ((e = errors()) < 2) {
        ck_assert_msg(tu_now_ms() < end, "%g errors after 15 s", e);
        tu_sleep_ms(50);
    }
    double secs = (double)(tu_now_ms() - t0) / 1000.0;
    int most = 1 + (secs >= 1.0) + (secs >= 3.0) + (secs >= 7.0) + (secs >= 15.0);
    ck_assert_msg(e <= most, "%g errors in %.1f s: faster than the backoff", e, secs);
    /* one log line each: counted when the count is the same before and
     * after (the next failure is a second away at least) */
    for (end = tu_now_ms() + 5000;; tu_sleep_ms(20)) {
        e = errors();
        int lines = ewt_log_count(&T, "error=\"list endpointslices");
        if (lines == (int)e && errors() == e)
            break;
        ck_assert_msg(tu_now_ms() < end, "%d log lines for %g errors", lines, e);
    }
    /* The discovery pipeline's liveness check still beats. */
    char hz[128], *out = NULL;
    snprintf(hz, sizeof(hz), "http://127.0.0.1:%d/healthz?verbose", T.metrics_port);
    char *argv[] = {"curl", "-sf", "--max-time", "5", hz, NULL};
    ck_assert_int_eq(tu_run(argv, NULL, &out, 10000), 0);
    ck_assert_msg(strstr(out, "[+]ew/discovery ok") != NULL, "healthz: %s", out);
    free(out);
    /* The API server appears on the configured address. */
    const char *args[] = {"--port", port, NULL};
    ck_assert_int_eq(ewt_fake_start(&T, args), 0);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "10.0.3.1", HTTPS), 0);
    ck_assert_int_eq(ewt_wait_set(&T, "10.0.0.1:6443,10.0.3.1:6443", 12000), 0);
}
END_TEST

/* A kubeconfig that cannot be used is one provider failure: counted once,
 * one log line, static endpoints only, no retry loop. */
START_TEST(unusable_kubeconfig_is_one_failure)
{
    char s[8192];
    char bad[4200];
    snprintf(bad, sizeof(bad), "%s/bad-kubeconfig", T.dir);
    ck_assert_int_eq(tu_write_file(bad, "apiVersion: v1\nkind: Config\nclusters: [\n"), 0);
    snprintf(s, sizeof(s), "endpoints = [\"%s\"]; kubeconfig = \"%s\";", STATIC, bad);
    ck_assert_int_eq(ewt_daemon_start(&T, s, NULL, NULL), 0);
    ck_assert_int_eq(ewt_wait_set(&T, STATIC, 3000), 0);
    tu_sleep_ms(2500);
    ck_assert(errors() == 1);
    ck_assert_int_eq(ewt_log_count(&T, "EndpointSlice discovery disabled"), 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* "watch error events": the fake API server ends watches only with 410
 * ERROR events, so this test serves the API itself, over plain HTTP, from a
 * thread: an empty list, then every watch answered with one ERROR event
 * carrying code 500 and the end of the stream.                             */

static int api_fd = -1, api_stop[2];
static int api_watches;
static long long api_watch_ms[8]; /* when each watch arrived (tu_now_ms) */
static pthread_mutex_t api_mu = PTHREAD_MUTEX_INITIALIZER;

static void
api_answer(int fd)
{
    char req[4096];
    ssize_t n = read(fd, req, sizeof(req) - 1);
    if (n <= 0)
        return;
    req[n] = '\0';
    const char *body;
    if (strstr(req, "watch=1")) {
        pthread_mutex_lock(&api_mu);
        if (api_watches < 8)
            api_watch_ms[api_watches] = tu_now_ms();
        api_watches++;
        pthread_mutex_unlock(&api_mu);
        body = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
               "\"status\":\"Failure\",\"message\":\"etcdserver: request timed out\","
               "\"reason\":\"InternalError\",\"code\":500}}\n";
    } else {
        body = "{\"kind\":\"EndpointSliceList\",\"apiVersion\":\"discovery.k8s.io/v1\","
               "\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[]}";
    }
    char head[256];
    int h = snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     strlen(body));
    if (write(fd, head, (size_t)h) != h || write(fd, body, strlen(body)) < 0)
        return;
}

static void *
api_run(void *arg)
{
    (void)arg;
    struct pollfd p[2] = {{.fd = api_fd, .events = POLLIN}, {.fd = api_stop[0], .events = POLLIN}};
    while (poll(p, 2, 1000) >= 0 && !p[1].revents) {
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept(api_fd, NULL, NULL);
        if (fd < 0)
            continue;
        api_answer(fd);
        close(fd);
    }
    return NULL;
}

START_TEST(watch_error_events_are_counted)
{
    pthread_t th;
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t al = sizeof(a);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    api_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(api_fd, 0);
    ck_assert_int_eq(bind(api_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(api_fd, 16), 0);
    ck_assert_int_eq(getsockname(api_fd, (struct sockaddr *)&a, &al), 0);
    ck_assert_int_eq(pipe(api_stop), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, api_run, NULL), 0);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
    ewt_write_kubeconfig(&T, url);
    ck_assert_int_eq(ewt_daemon_start(&T, settings, NULL, NULL), 0);
    ck_assert_int_eq(ewt_wait_set(&T, STATIC, 3000), 0);
    /* Watches at about 0, 1-1.25 and 3-3.75 s, the next at 7 s or later.
     * Wait (bounded) for the third and its error; the gaps are at least
     * the backoff's (half of it here, for the scheduling of this thread);
     * no fourth comes within 3 s of the third (a busy machine only makes
     * it later); each one ended by an ERROR event is one error, one line. */
    ck_assert_int_eq(ewt_wait_log(&T, "ERROR event 500: etcdserver: request timed out", 5000), 0);
    long long t[3], end = tu_now_ms() + 20000;
    int w;
    for (;;) {
        pthread_mutex_lock(&api_mu);
        w = api_watches;
        memcpy(t, api_watch_ms, sizeof(t));
        pthread_mutex_unlock(&api_mu);
        if (w >= 3 && errors() >= 3)
            break;
        ck_assert_msg(tu_now_ms() < end, "%d watches, %g errors after 20 s", w, errors());
        tu_sleep_ms(20);
    }
    ck_assert_msg(t[1] - t[0] >= 500 && t[2] - t[1] >= 1000,
                  "watches %lld and %lld ms apart: faster than the backoff", t[1] - t[0],
                  t[2] - t[1]);
    while (tu_now_ms() < t[2] + 3000)
        tu_sleep_ms(50);
    pthread_mutex_lock(&api_mu);
    w = api_watches;
    pthread_mutex_unlock(&api_mu);
    double e = errors();
    ck_assert_msg(w == 3 && e == w, "%d watches ended by ERROR events, %g errors", w, e);
    ck_assert_int_eq(ewt_log_count(&T, "ERROR event 500"), w);
    ck_assert_int_eq(write(api_stop[1], "x", 1), 1);
    pthread_join(th, NULL);
    close(api_fd);
    close(api_stop[0]);
    close(api_stop[1]);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("endpoint_watch_faults");
    TCase *tc = tcase_create("faults");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, gone_410_relists_to_rebuild_the_cache);
    tcase_add_test(tc, failed_relist_is_an_error_and_keeps_the_cache);
    tcase_add_test(tc, watch_errors_back_off_from_1s_doubling_with_jitter_and_count);
    tcase_add_test(tc, failed_initial_list_counts_and_is_retried);
    tcase_add_test(tc, stream_end_and_dropped_connection_are_not_errors);
    tcase_add_test(tc, long_clean_watch_reopens_at_once_and_410_after_it_rewatches_at_once);
    tcase_add_test(tc, sigterm_during_a_watch_exits_promptly);
    tcase_add_test(tc, unreachable_api_server_is_isolated_then_picked_up);
    tcase_add_test(tc, unusable_kubeconfig_is_one_failure);
    tcase_add_test(tc, watch_error_events_are_counted);
    suite_add_tcase(s, tc);
    TCase *bm = tcase_create("bookmarks");
    tcase_add_checked_fixture(bm, setup_bookmarks, teardown);
    tcase_set_timeout(bm, 60);
    tcase_add_test(bm, quiet_watch_kept_alive_by_bookmarks);
    suite_add_tcase(s, bm);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
