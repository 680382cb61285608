/*
 * endpoint_watch with mod_tcp_proxy, end to end: discovery changes reach the
 * proxy's routing table.
 *
 * "API servers" are small TCP servers of this test on 127.0.0.11-14, one
 * port for all (as control-plane nodes share 6443): each writes its id
 * ("1\n") on accept, then echoes. They are listed by address in one
 * EndpointSlice with the port named https. The last test runs the proxy
 * role itself (conf/proxy.conf): the discovery client goes through the
 * proxy to the fake API servers with a service account token and the
 * certificate verified as kubernetes.default.svc.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Test API servers                                                         */

#define MAXC 128

struct apisrv {
    char ip[32];
    char id;
    int lfd;
    int stop[2];
    pthread_t th;
    pthread_mutex_t mu;
    int accepts;
};

static void *
apisrv_run(void *arg)
{
    struct apisrv *s = arg;
    struct pollfd p[MAXC + 2];
    int n = 2;
    p[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
    p[1] = (struct pollfd){.fd = s->stop[0], .events = POLLIN};
    for (;;) {
        if (poll(p, (nfds_t)n, 1000) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (p[0].revents & POLLIN) {
            int fd = accept(s->lfd, NULL, NULL);
            if (fd >= 0) {
                char hello[2] = {s->id, '\n'};
                pthread_mutex_lock(&s->mu);
                s->accepts++;
                pthread_mutex_unlock(&s->mu);
                if (n < MAXC + 2 && write(fd, hello, 2) == 2)
                    p[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
                else
                    close(fd);
            }
        }
        for (int i = 2; i < n; i++) {
            if (!p[i].revents)
                continue;
            char buf[4096];
            ssize_t r = read(p[i].fd, buf, sizeof(buf));
            if (r <= 0 || write(p[i].fd, buf, (size_t)r) != r) {
                close(p[i].fd);
                p[i--] = p[--n];
            }
        }
    }
    for (int i = 2; i < n; i++)
        close(p[i].fd);
    return NULL;
}

static int
apisrv_start(struct apisrv *s, const char *ip, int port, char id)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->ip, sizeof(s->ip), "%s", ip);
    s->id = id;
    pthread_mutex_init(&s->mu, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    if (s->lfd < 0 || setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->lfd, 64) < 0 ||
        pipe(s->stop) < 0)
        return -1;
    return pthread_create(&s->th, NULL, apisrv_run, s) == 0 ? 0 : -1;
}

static void
apisrv_stop(struct apisrv *s)
{
    if (write(s->stop[1], "x", 1) != 1)
        return;
    pthread_join(s->th, NULL);
    close(s->lfd);
    close(s->stop[0]);
    close(s->stop[1]);
}

/* Connect through the proxy and read the server's id; 0 on failure. The
 * connection stays open in *fdp when fdp is given. */
static char
hello(int port, int *fdp)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char buf[2] = {0, 0};
    if (fd < 0)
        return 0;
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || read(fd, buf, 2) != 2) {
        close(fd);
        return 0;
    }
    if (fdp)
        *fdp = fd;
    else
        close(fd);
    return buf[0];
}

/* Echo through an open connection; 1 if it still works. */
static int
echo_ok(int fd)
{
    char b[4];
    return write(fd, "abc", 3) == 3 && read(fd, b, 3) == 3 && memcmp(b, "abc", 3) == 0;
}

/* Milliseconds until read on fd sees EOF or an error, or -1 after ms. */
static long long
wait_closed(int fd, int ms)
{
    long long t0 = tu_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (tu_now_ms() - t0 < ms) {
        if (poll(&p, 1, 20) > 0) {
            char b[64];
            ssize_t r = read(fd, b, sizeof(b));
            if (r <= 0)
                return tu_now_ms() - t0;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Fixture                                                                  */

static struct ewt T;
static struct apisrv S[4];
static int P; /* the API servers' port */
static int proxy_port;
static char eps_static[256];

#define NS "default"
#define SVC "kubernetes"

static void
setup(void)
{
    const char *ips[] = {"127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14"};
    ck_assert_int_eq(ewt_init(&T), 0);
    ck_assert_int_eq(ewt_fake_start(&T, NULL), 0);
    ewt_write_kubeconfig(&T, NULL);
    for (int attempt = 0; attempt < 5; attempt++) {
        P = tu_free_port();
        int ok = 1;
        for (int i = 0; i < 4 && ok; i++)
            ok = apisrv_start(&S[i], ips[i], P, (char)('1' + i)) == 0;
        if (ok)
            break;
        ck_assert_int_lt(attempt, 4);
    }
    snprintf(eps_static, sizeof(eps_static),
             "\"127.0.0.11:%d\", \"127.0.0.12:%d\", \"127.0.0.13:%d\"", P, P, P);
}

static void
teardown(void)
{
    int rc = ewt_fini(&T);
    for (int i = 0; i < 4; i++)
        apisrv_stop(&S[i]);
    ck_assert_msg(rc == 0, "the daemon did not end cleanly (see above)");
}

/* The daemon with ew (static: servers 1-3) and a tcp_proxy on a free port. */
static void
start_proxy(const char *drain)
{
    char s[8192], extra[1024];
    snprintf(s, sizeof(s), "endpoints = [%s]; kubeconfig = \"%s\";", eps_static, T.kubeconfig);
    for (int attempt = 0; attempt < 3; attempt++) {
        proxy_port = tu_free_port();
        snprintf(extra, sizeof(extra),
                 "{ module = \"tcp_proxy\"; name = \"kubeprism\"; upstreams = [\"ew\"];\n"
                 "    bind_address = \"127.0.0.1\"; bind_port = %d; health_interval = \"2s\";\n"
                 "    health_timeout = \"1s\"; drain_timeout = \"%s\"; },\n",
                 proxy_port, drain);
        ck_assert_int_eq(ewt_daemon_start(&T, s, extra, NULL), 0);
        char want[64];
        snprintf(want, sizeof(want), "listen=127.0.0.1:%d", proxy_port);
        if (ewt_wait_log(&T, want, 5000) == 0)
            return;
        ewt_daemon_stop(&T, 2000, NULL);
    }
    ck_abort_msg("the proxy did not listen");
}

static int
accepts(int i)
{
    pthread_mutex_lock(&S[i].mu);
    int n = S[i].accepts;
    pthread_mutex_unlock(&S[i].mu);
    return n;
}

/* Slice listing the given servers (1-based ids as "123"). */
static void
slice(const char *ids)
{
    char spec[256] = "", ports[32];
    for (const char *c = ids; *c; c++) {
        char a[32];
        snprintf(a, sizeof(a), "%s127.0.0.1%c", spec[0] ? "," : "", *c);
        strncat(spec, a, sizeof(spec) - strlen(spec) - 1);
    }
    snprintf(ports, sizeof(ports), "https=%d", P);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", spec, ports), 0);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */

/* "Automatically detects control plane membership changes": a fourth API
 * server added to the EndpointSlice receives new connections within 1 s. */
START_TEST(fourth_api_server_added_gets_new_connections_within_1s)
{
    slice("123");
    start_proxy("30s");
    char want[256];
    snprintf(want, sizeof(want), "127.0.0.11:%d,127.0.0.12:%d,127.0.0.13:%d", P, P, P);
    ck_assert_int_eq(ewt_wait_set(&T, want, 5000), 0);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(strchr("123", hello(proxy_port, NULL)), "no answer through the proxy");
    long long t0 = tu_now_ms();
    slice("1234");
    char got = 0;
    while (got != '4' && tu_now_ms() - t0 < 3000) {
        got = hello(proxy_port, NULL);
        ck_assert_msg(got != 0, "a connection through the proxy failed");
        if (got != '4')
            tu_sleep_ms(10);
    }
    long long ms = tu_now_ms() - t0;
    ck_assert_msg(got == '4' && ms <= 1000, "server 4 first reached after %lld ms", ms);
    ck_assert_int_ge(accepts(3), 1);
}
END_TEST

/* "When an endpoint disappears from the upstream list ... the proxy stops
 * routing new connections to it but lets existing connections finish
 * within --drain-timeout": an API server removed from the slice drains. */
START_TEST(removed_api_server_drains_under_drain_timeout)
{
    slice("1234");
    start_proxy("2s");
    char want[256];
    snprintf(want, sizeof(want), "127.0.0.11:%d,127.0.0.12:%d,127.0.0.13:%d,127.0.0.14:%d", P, P, P,
             P);
    ck_assert_int_eq(ewt_wait_set(&T, want, 5000), 0);
    int fd = -1;
    for (int i = 0; i < 200 && fd < 0; i++) {
        int c = -1;
        char id = hello(proxy_port, &c);
        ck_assert(id != 0);
        if (id == '4')
            fd = c;
        else
            close(c);
    }
    ck_assert_msg(fd >= 0, "never reached server 4");
    slice("123");
    snprintf(want, sizeof(want), "127.0.0.11:%d,127.0.0.12:%d,127.0.0.13:%d", P, P, P);
    ck_assert_int_eq(ewt_wait_set(&T, want, 2000), 0);
    long long removed = tu_now_ms();
    if (ewt_wait_log(&T, "removed: draining 1 connection", 2000) != 0) {
        char *log = ewt_log(&T);
        ck_abort_msg("no drain of the connection to server 4 in:\n%s", log);
    }
    int before = accepts(3);
    for (int i = 0; i < 30; i++)
        ck_assert(strchr("123", hello(proxy_port, NULL)));
    ck_assert_int_eq(accepts(3), before);
    ck_assert_msg(echo_ok(fd), "the draining connection no longer works");
    long long closed = wait_closed(fd, 5000);
    ck_assert_msg(closed >= 0, "the draining connection was not closed");
    long long at = tu_now_ms() - removed;
    ck_assert_msg(at >= 1500 && at <= 3000, "closed %lld ms after the removal (drain 2 s)", at);
    close(fd);
}
END_TEST

/* Boot sequence: "extractedprism DaemonSet starts ... with static
 * endpoints", "Load balancer ... begins proxying", then "Kubernetes
 * EndpointSlice discovery activates": started with no reachable API
 * server, the daemon proxies to the static endpoints, then picks up
 * discovery when the API appears. */
START_TEST(no_api_server_at_start_proxies_static_then_discovers)
{
    /* The API server comes back on a port outside the ephemeral range: one
     * of the daemon's (or any process's) connects could take an ephemeral
     * one while it is down. */
    char port[16], url[64];
    int q = ewt_free_fixed_port();
    ck_assert_int_gt(q, 0);
    snprintf(port, sizeof(port), "%d", q);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", q);
    ck_assert_int_eq(ewt_fake_stop(&T), 0);
    ewt_write_kubeconfig(&T, url);
    start_proxy("30s");
    for (int i = 0; i < 6; i++)
        ck_assert_msg(strchr("123", hello(proxy_port, NULL)), "no answer through the proxy");
    ck_assert(ewt_metric(&T, "prismlb_discovery_errors_total", "kubernetes") >= 1);
    const char *args[] = {"--port", port, NULL};
    ck_assert_int_eq(ewt_fake_start(&T, args), 0);
    slice("1234");
    long long t0 = tu_now_ms();
    char got = 0;
    while (got != '4' && tu_now_ms() - t0 < 15000) {
        got = hello(proxy_port, NULL);
        ck_assert(got != 0);
        if (got != '4')
            tu_sleep_ms(20);
    }
    ck_assert_msg(got == '4', "server 4 never reached after the API server appeared");
}
END_TEST

/* The proxy role (conf/proxy.conf's wiring): "The Kubernetes client
 * connects through the local load balancer ... to benefit from failover
 * across all configured endpoints." In-cluster (service account token),
 * server = the proxy, certificate verified as kubernetes.default.svc; when
 * the API server the proxy used stops, discovery continues through another. */
START_TEST(discovery_through_the_local_proxy_fails_over)
{
    ck_assert_int_eq(ewt_fake_stop(&T), 0);
    const char *args[] = {"--servers", "2", "--token", "sa-token=system:serviceaccount:x", NULL};
    ck_assert_int_eq(ewt_fake_start(&T, args), 0);
    char sa[4200], path[4300], ca[4300];
    snprintf(sa, sizeof(sa), "%s/sa", T.dir);
    ck_assert_int_eq(mkdir(sa, 0700), 0);
    snprintf(path, sizeof(path), "%s/token", sa);
    ck_assert_int_eq(tu_write_file(path, "sa-token\n"), 0);
    snprintf(path, sizeof(path), "%s/ca.crt", sa);
    snprintf(ca, sizeof(ca), "%s/ca.crt", T.fakedir);
    char *pem = tu_read_file(ca, NULL);
    ck_assert_ptr_nonnull(pem);
    ck_assert_int_eq(tu_write_file(path, pem), 0);
    free(pem);
    int p0 = atoi(strrchr(T.f.server[0], ':') + 1), p1 = atoi(strrchr(T.f.server[1], ':') + 1);

    char s[8192], extra[1024], ports[32];
    char *env[] = {"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443",
                   "KUBECONFIG=", NULL};
    for (int attempt = 0;; attempt++) {
        proxy_port = tu_free_port();
        snprintf(s, sizeof(s),
                 "endpoints = [\"127.0.0.1:%d\"]; service_account_dir = \"%s\";\n"
                 "    server = \"https://127.0.0.1:%d\";",
                 p0, sa, proxy_port);
        snprintf(extra, sizeof(extra),
                 "{ module = \"tcp_proxy\"; name = \"kubeprism\"; upstreams = [\"ew\"];\n"
                 "    bind_address = \"127.0.0.1\"; bind_port = %d; health_interval = \"2s\";\n"
                 "    health_timeout = \"1s\"; drain_timeout = \"1s\"; },\n",
                 proxy_port);
        ck_assert_int_eq(ewt_daemon_start(&T, s, extra, env), 0);
        char want[64];
        snprintf(want, sizeof(want), "listen=127.0.0.1:%d", proxy_port);
        if (ewt_wait_log(&T, want, 5000) == 0)
            break;
        ewt_daemon_stop(&T, 2000, NULL);
        ck_assert_int_lt(attempt, 2);
    }
    /* The slice names the second API server. */
    snprintf(ports, sizeof(ports), "https=%d", p1);
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes", "127.0.0.1", ports), 0);
    char a0[32], a1[32], want[128];
    snprintf(a0, sizeof(a0), "127.0.0.1:%d", p0);
    snprintf(a1, sizeof(a1), "127.0.0.1:%d", p1);
    /* sorted as strings, as the core delivers */
    snprintf(want, sizeof(want), "%s,%s", strcmp(a0, a1) < 0 ? a0 : a1,
             strcmp(a0, a1) < 0 ? a1 : a0);
    ck_assert_int_eq(ewt_wait_set(&T, want, 10000), 0);
    char *log = ewt_log(&T);
    char at[128];
    snprintf(at, sizeof(at),
             "server=https://127.0.0.1:%d source=\"service account\" "
             "tls_server_name=kubernetes.default.svc",
             proxy_port);
    ck_assert_msg(strstr(log, at) != NULL, "no \"%s\" in the log", at);
    free(log);
    /* The watch arrived through the proxy with the service account token. */
    ck_assert_int_ge(ewt_requests(&T, "GET", "endpointslices?", "watch=1", NULL, 0), 1);
    {
        struct http_res r;
        ck_assert_int_eq(fake_admin(&T.f, "GET", "/requests", NULL, &r), 0);
        ck_assert_msg(strstr(r.body, "system:serviceaccount:x") != NULL, "no request as the SA");
        http_res_free(&r);
    }
    /* Server 0 (the static endpoint) stops: connections through the proxy
     * go to server 1; the watch reconnects through the proxy. */
    char stop[64];
    snprintf(stop, sizeof(stop), "/servers/%d/stop", 0);
    ck_assert_int_eq(ewt_admin(&T, "POST", stop, NULL), 200);
    T.api = 1;
    ck_assert_int_eq(ewt_slice_put(&T, NS, SVC, "kubernetes-b", "127.0.0.2", ports), 0);
    char want2[160];
    snprintf(want2, sizeof(want2), "%s,127.0.0.2:%d", want, p1);
    ck_assert_int_eq(ewt_wait_set(&T, want2, 15000), 0);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("endpoint_watch_proxy");
    TCase *tc = tcase_create("proxy");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, fourth_api_server_added_gets_new_connections_within_1s);
    tcase_add_test(tc, removed_api_server_drains_under_drain_timeout);
    tcase_add_test(tc, no_api_server_at_start_proxies_static_then_discovers);
    tcase_add_test(tc, discovery_through_the_local_proxy_fails_over);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
