/*
 * A flood of probe-port clients must not cost the leader its Lease.
 *
 *   flood        a daemon leading with the short timings (renew every
 *                500 ms, renew_deadline 2 s) and mod_metrics on a loopback
 *                port; four threads connect, send GET /metrics and reset,
 *                3,000 times a second in all, for 10 s. Throughout, a fresh client
 *                gets /healthz within 1 s every 100 ms; the Lease is
 *                renewed (never "lost"), its holder stays, and the RSS grows
 *                by at most 5 MiB.
 *   idle         the same daemon under a 1,024-descriptor limit (set in the
 *                child before exec) while 5,000 connections that send
 *                nothing are attempted: a fresh client is answered within
 *                1 s throughout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "env.h"

#define FLOOD_MS 10000
#define FLOOD_THREADS 4
#define FLOOD_PER_S 3000 /* the rate that cost the leader its Lease */

/* A blocking client socket on 127.0.0.1:port with 1 s timeouts, or -1. */
static int
dial(int port, int timeout_ms)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* GET /healthz on a fresh connection; its time in ms, or -1 when no
 * "200" answer came within 1 s. */
static long long
healthz_ms(int port)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    long long t0 = tu_now_ms();
    char buf[512];
    size_t n = 0;
    int fd = dial(port, 1000);
    if (fd < 0)
        return -1;
    if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) - 1)) {
        close(fd);
        return -1;
    }
    while (n < sizeof(buf) - 1 && tu_now_ms() - t0 < 1000) {
        ssize_t r = recv(fd, buf + n, sizeof(buf) - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    long long took = tu_now_ms() - t0;
    return strstr(buf, "HTTP/1.1 200") && took <= 1000 ? took : -1;
}

struct flood {
    int port;
    int stop;
    long sent;
};

static void *
flood_main(void *p)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n";
    struct flood *f = p;
    long long t0 = tu_now_ms();
    long mine = 0;
    while (!__atomic_load_n(&f->stop, __ATOMIC_SEQ_CST)) {
        if (mine * 1000 > (tu_now_ms() - t0) * (FLOOD_PER_S / FLOOD_THREADS)) {
            tu_sleep_ms(1);
            continue;
        }
        mine++;
        int fd = dial(f->port, 1000);
        if (fd < 0)
            continue;
        (void)send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
        struct linger lg = {1, 0}; /* close with RST */
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        close(fd);
        __atomic_add_fetch(&f->sent, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

static long
vmrss_kib(pid_t pid)
{
    char path[64], *s, *p;
    long kib = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    s = tu_read_file(path, NULL);
    if (s && (p = strstr(s, "VmRSS:")) != NULL)
        kib = strtol(p + 6, NULL, 10);
    free(s);
    return kib;
}

static json_t *
get_lease(struct le_env *e)
{
    struct http_res r;
    long st =
        le_api(e, "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/prismlb-test",
               NULL, NULL, &r);
    ck_assert_msg(st == 200, "GET lease: %ld", st);
    json_t *j = res_json(&r);
    http_res_free(&r);
    ck_assert_ptr_nonnull(j);
    return j;
}

static const char *
holder(json_t *lease)
{
    const char *h =
        json_string_value(json_object_get(json_object_get(lease, "spec"), "holderIdentity"));
    return h ? h : "";
}

/* Start the environment and a leading daemon with mod_metrics on *port. */
static void
start_leading(struct le_env *e, struct le_daemon *d, int *port)
{
    char more[512];
    le_env_start(e, 0);
    *port = tu_free_port();
    snprintf(more, sizeof(more),
             "  { module = \"metrics\"; name = \"probes\"; bind_address = \"127.0.0.1\";\n"
             "    port = %d; },\n",
             *port);
    le_daemon_config_more(e, d, "flooded", &le_short, "", more);
}

static void
wait_leading(struct le_env *e, struct le_daemon *d, int port)
{
    long long until = tu_now_ms() + 20000;
    int leading = 0;
    while (!leading && tu_now_ms() < until) {
        struct http_res r;
        long st =
            le_api(e, "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/prismlb-test",
                   NULL, NULL, &r);
        json_t *l = st == 200 ? res_json(&r) : NULL;
        http_res_free(&r);
        leading =
            l && strcmp(holder(l), d->identity) == 0 && tu_wait_port("127.0.0.1", port, 100) == 0;
        json_decref(l);
        if (!leading)
            tu_sleep_ms(100);
    }
    char *log = le_daemon_log(d);
    ck_assert_msg(leading, "not leading within 20 s; its log:\n%s", log);
    free(log);
}

START_TEST(flood_of_reset_scrapes_keeps_the_lease)
{
    struct le_env e;
    struct le_daemon d = {0};
    int port;
    start_leading(&e, &d, &port);
    le_daemon_spawn(&d);
    wait_leading(&e, &d, port);
    json_t *before = get_lease(&e);
    json_int_t transitions =
        json_integer_value(json_object_get(json_object_get(before, "spec"), "leaseTransitions"));
    json_decref(before);
    /* Warm up: the render cache, the allocator's arenas. */
    for (int i = 0; i < 50; i++)
        ck_assert_int_ge(healthz_ms(port), 0);
    long rss0 = vmrss_kib(d.td.proc.pid);

    struct flood f = {.port = port};
    pthread_t th[FLOOD_THREADS];
    for (int i = 0; i < FLOOD_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, flood_main, &f), 0);
    long long t0 = tu_now_ms(), worst = 0;
    int probes = 0, failed = 0;
    double renewed_late = 0;
    while (tu_now_ms() - t0 < FLOOD_MS) {
        long long took = healthz_ms(port);
        probes++;
        if (took < 0)
            failed++;
        else if (took > worst)
            worst = took;
        tu_sleep_ms(100);
    }
    double flood_end = le_wall();
    __atomic_store_n(&f.stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < FLOOD_THREADS; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    long rss1 = vmrss_kib(d.td.proc.pid);
    renewed_late = le_last_lease_write(&e, d.identity);

    char *log = le_daemon_log(&d);
    printf("flood: %ld reset scrapes in %d ms; /healthz %d probes, %d failed, worst %lld ms; "
           "RSS %ld -> %ld KiB\n",
           f.sent, FLOOD_MS, probes, failed, worst, rss0, rss1);
    fflush(stdout);
    ck_assert_msg(f.sent > 1000, "the flood sent only %ld", f.sent);
    ck_assert_msg(failed == 0, "%d of %d /healthz probes unanswered within 1 s", failed, probes);
    ck_assert_msg(strstr(log, "lost Lease") == NULL, "the leader lost its Lease:\n%s", log);
    ck_assert_msg(renewed_late >= flood_end - 1.5, "last renew %.1f s before the flood ended",
                  flood_end - renewed_late);
    json_t *after = get_lease(&e);
    ck_assert_str_eq(holder(after), d.identity);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(after, "spec"), "leaseTransitions")),
        transitions);
    json_decref(after);
#ifndef __SANITIZE_ADDRESS__
    /* (ASan's quarantine holds freed memory: the plain build measures.) */
    ck_assert_msg(rss1 - rss0 <= 5 * 1024, "RSS grew by %ld KiB", rss1 - rss0);
#endif
    free(log);
    le_daemon_stop(&d, SIGTERM, 10000);
    le_env_stop(&e);
}
END_TEST

/* The daemon's descriptor limit, set between fork and exec: prlimit on the
 * running child. */
static void
limit_fds(pid_t pid, rlim_t n)
{
    struct rlimit lim = {n, n};
    ck_assert_int_eq(prlimit(pid, RLIMIT_NOFILE, &lim, NULL), 0);
}

START_TEST(idle_connections_under_1024_fds_do_not_lock_out_clients)
{
    struct le_env e;
    struct le_daemon d = {0};
    int port;
    start_leading(&e, &d, &port);
    le_daemon_spawn(&d);
    limit_fds(d.td.proc.pid, 1024);
    wait_leading(&e, &d, port);

    /* This process holds the 5,000 client ends. */
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    lim = old;
    if (lim.rlim_cur < 6000)
        lim.rlim_cur = lim.rlim_max < 6000 ? lim.rlim_max : 6000;
    ck_assert_msg(lim.rlim_cur >= 5200, "need 5,200 descriptors, may have %llu",
                  (unsigned long long)lim.rlim_cur);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);

    int *fds = calloc(5000, sizeof(int));
    ck_assert_ptr_nonnull(fds);
    int opened = 0, probes = 0, failed = 0;
    long long worst = 0;
    while (opened < 5000) {
        for (int k = 0; k < 250 && opened < 5000; k++) {
            struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
            sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            ck_assert_int_ge(fd, 0);
            int rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
            ck_assert_msg(rc == 0 || errno == EINPROGRESS, "connect: %s", strerror(errno));
            fds[opened++] = fd;
        }
        long long took = healthz_ms(port);
        probes++;
        if (took < 0)
            failed++;
        else if (took > worst)
            worst = took;
    }
    for (int i = 0; i < 5; i++) {
        long long took = healthz_ms(port);
        probes++;
        if (took < 0)
            failed++;
        else if (took > worst)
            worst = took;
    }
    printf("idle: 5000 idle connections attempted; /healthz %d probes, %d failed, worst %lld ms\n",
           probes, failed, worst);
    fflush(stdout);
    char *log = le_daemon_log(&d);
    ck_assert_msg(failed == 0, "%d of %d /healthz probes unanswered within 1 s; log:\n%s", failed,
                  probes, log);
    ck_assert_msg(strstr(log, "lost Lease") == NULL, "the leader lost its Lease:\n%s", log);
    free(log);
    for (int i = 0; i < opened; i++)
        close(fds[i]);
    free(fds);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    le_daemon_stop(&d, SIGTERM, 10000);
    le_env_stop(&e);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("leader-flood");
    TCase *tc = tcase_create("flood");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, flood_of_reset_scrapes_keeps_the_lease);
    tcase_add_test(tc, idle_connections_under_1024_fds_do_not_lock_out_clients);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
