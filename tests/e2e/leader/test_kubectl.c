/*
 * mod_leader and Go controllers sharing a Lease, through kubectl
 * ($PRISMLB_SOURCE_ROOT/.tools/bin/kubectl, the test's kubeconfig and a
 * --cache-dir in the temp dir). Usage: test_leader_kubectl root|kcp.
 *
 *   go_fields      a Lease held by prismlb, read with `kubectl get lease -o
 *                  yaml` (and -o json for the types), has what a Go
 *                  controller writes: holderIdentity, leaseDurationSeconds,
 *                  acquireTime and renewTime as MicroTime, leaseTransitions;
 *                  and the Event "<identity> became leader";
 *   go_respected   a Lease written with kubectl as a Go controller writes it
 *                  (another holder, recent renewTime), renewed by it every
 *                  second for 5 s, is not taken; once the renewals stop,
 *                  prismlb takes it no earlier than the Lease's own
 *                  leaseDurationSeconds after the last renewal, with
 *                  leaseTransitions incremented.
 */
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "env.h"

static int kcp;
static struct le_env env;
static char kubectl[4300], cachedir[4400], home[4400];

static void
setup(void)
{
    le_env_start(&env, kcp);
    snprintf(kubectl, sizeof(kubectl), "%s", tu_source_path(".tools/bin/kubectl"));
    snprintf(cachedir, sizeof(cachedir), "%s/kube-cache", env.f.dir);
    snprintf(home, sizeof(home), "HOME=%s", env.f.dir);
}

static void
teardown(void)
{
    le_env_stop(&env);
}

/* Run kubectl; exit code, output in *out (new). */
static int
kc(char **out, ...)
{
    char *envp[] = {home, NULL};
    va_list ap;
    va_start(ap, out);
    int rc = tu_kubectlv(env.kubeconfig, cachedir, envp, out, ap);
    va_end(ap);
    return rc;
}

static json_t *
get_lease_json(void)
{
    char *out = NULL;
    int rc = kc(&out, "get", "lease", "prismlb-test", "-n", "default", "-o", "json", NULL);
    ck_assert_msg(rc == 0, "kubectl get lease: %d %s", rc, out ? out : "");
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_msg(j != NULL, "not JSON: %s", out);
    free(out);
    return j;
}

/* MicroTime as client-go marshals it: 2006-01-02T15:04:05.000000Z. */
static void
assert_microtime(const char *what, const char *s)
{
    int y, mo, d, h, mi, se, us, n = 0;
    ck_assert_msg(s != NULL, "%s is missing", what);
    ck_assert_msg(sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%6dZ%n", &y, &mo, &d, &h, &mi, &se, &us, &n) ==
                          7 &&
                      n == 27 && strlen(s) == 27,
                  "%s \"%s\" is not a MicroTime", what, s);
}

static void
microtime_now(char *buf, size_t len, double offset_s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t secs = ts.tv_sec + (time_t)offset_s;
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}

/* GET /metrics from 127.0.0.1:port (new text), bounded by 5 s. */
static char *
scrape(int port)
{
    ck_assert_int_eq(tu_wait_port("127.0.0.1", port, 10000), 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {5, 0};
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    const char *req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - n - 1)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fd);
    return buf;
}

static void
assert_metric(const char *text, const char *line)
{
    ck_assert_msg(strstr(text, line), "no \"%s\" in /metrics:\n%s", line, text);
}

START_TEST(go_fields)
{
    struct le_daemon d, d2;
    char more[256];
    int port = tu_free_port(), port2 = tu_free_port();
    memset(&d, 0, sizeof(d));
    memset(&d2, 0, sizeof(d2));
    snprintf(more, sizeof(more),
             "  { module = \"metrics\"; bind_address = \"127.0.0.1\"; port = %d; },\n", port);
    le_daemon_config_more(&env, &d, "solo", &le_short, "", more);
    le_daemon_spawn(&d);
    struct le_write w;
    ck_assert_msg(le_wait_write(&env, NULL, 0, 15000, &w) == 0, "the daemon never led");
    /* A second replica stays a candidate. */
    snprintf(more, sizeof(more),
             "  { module = \"metrics\"; bind_address = \"127.0.0.1\"; port = %d; },\n", port2);
    le_daemon_config_more(&env, &d2, "second", &le_short, "", more);
    le_daemon_spawn(&d2);
    /* Wait (bounded) until the second replica has read the Lease (its
     * transitions come from the record), then scrape the leader. */
    char *m2 = NULL;
    long long end = tu_now_ms() + 15000;
    for (;;) {
        m2 = scrape(port2);
        if (strstr(m2, "prismlb_leader_transitions_total{module_instance=\"leader\",lease="
                       "\"default/prismlb-test\"} 1"))
            break;
        ck_assert_msg(tu_now_ms() < end, "the second replica never read the Lease:\n%s", m2);
        free(m2);
        tu_sleep_ms(50);
    }
    double before = le_wall();
    char *m1 = scrape(port);
    assert_metric(
        m1,
        "prismlb_leader_is_leader{module_instance=\"leader\",lease=\"default/prismlb-test\"} 1");
    assert_metric(
        m2,
        "prismlb_leader_is_leader{module_instance=\"leader\",lease=\"default/prismlb-test\"} 0");
    assert_metric(m1, "prismlb_leader_transitions_total{module_instance=\"leader\",lease=\"default/"
                      "prismlb-test\"} 1");
    assert_metric(m2, "prismlb_leader_transitions_total{module_instance=\"leader\",lease=\"default/"
                      "prismlb-test\"} 1");
    assert_metric(m2, "prismlb_leader_last_renew_timestamp_seconds{module_instance=\"leader\","
                      "lease=\"default/prismlb-test\"} 0");
    char *p = strstr(m1, "prismlb_leader_last_renew_timestamp_seconds{module_instance=\"leader\","
                         "lease=\"default/prismlb-test\"} ");
    ck_assert_ptr_nonnull(p);
    double renewed = strtod(strchr(p, '}') + 2, NULL);
    /* Leading when scraped: its last successful renew was sent within
     * renew_deadline before the scrape. */
    ck_assert_msg(renewed >= before - le_short.renew_s - 0.001 && renewed <= le_wall(),
                  "last renew %.3f, scraped after %.3f", renewed, before);
    free(m1);
    free(m2);
    ck_assert_int_eq(le_daemon_stop(&d2, SIGTERM, 7000), 0);

    char *yaml = NULL;
    int rc = kc(&yaml, "get", "lease", "prismlb-test", "-n", "default", "-o", "yaml", NULL);
    ck_assert_msg(rc == 0, "kubectl get -o yaml: %d %s", rc, yaml ? yaml : "");
    static const char *const lines[] = {"  holderIdentity: solo\n",
                                        "  leaseDurationSeconds: 3\n",
                                        "  leaseTransitions: 0\n",
                                        "  acquireTime: \"",
                                        "  renewTime: \"",
                                        "kind: Lease\n",
                                        "apiVersion: coordination.k8s.io/v1\n"};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        ck_assert_msg(strstr(yaml, lines[i]), "no \"%s\" in:\n%s", lines[i], yaml);
    printf("kubectl get lease -o yaml:\n%s", yaml);
    free(yaml);

    json_t *j = get_lease_json();
    json_t *spec = json_object_get(j, "spec");
    ck_assert_str_eq(json_string_value(json_object_get(spec, "holderIdentity")), "solo");
    ck_assert(json_is_integer(json_object_get(spec, "leaseDurationSeconds")));
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "leaseDurationSeconds")), 3);
    ck_assert(json_is_integer(json_object_get(spec, "leaseTransitions")));
    assert_microtime("acquireTime", json_string_value(json_object_get(spec, "acquireTime")));
    assert_microtime("renewTime", json_string_value(json_object_get(spec, "renewTime")));
    char renew1[64];
    snprintf(renew1, sizeof(renew1), "%s", json_string_value(json_object_get(spec, "renewTime")));
    json_decref(j);
    /* It renews (every retry_period; bounded wait for the next). */
    long long until = tu_now_ms() + 10000;
    for (;;) {
        j = get_lease_json();
        const char *now =
            json_string_value(json_object_get(json_object_get(j, "spec"), "renewTime"));
        int changed = now && strcmp(now, renew1) != 0;
        json_decref(j);
        if (changed)
            break;
        ck_assert_msg(tu_now_ms() < until, "renewTime still %s after 10 s", renew1);
        tu_sleep_ms(50);
    }

    /* The Event, as client-go's LeaseLock records it. */
    char *out = NULL;
    rc = kc(&out, "get", "events", "-n", "default", "-o", "json", NULL);
    ck_assert_msg(rc == 0, "kubectl get events: %d %s", rc, out ? out : "");
    json_t *ev = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(ev);
    int found = 0;
    json_t *items = json_object_get(ev, "items");
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *e = json_array_get(items, i);
        const char *reason = json_string_value(json_object_get(e, "reason"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        json_t *inv = json_object_get(e, "involvedObject");
        if (reason && !strcmp(reason, "LeaderElection") && msg &&
            !strcmp(msg, "solo became leader") &&
            !strcmp(json_string_value(json_object_get(inv, "kind")), "Lease") &&
            !strcmp(json_string_value(json_object_get(inv, "name")), "prismlb-test"))
            found = 1;
    }
    ck_assert_msg(found, "no LeaderElection Event \"solo became leader\" in:\n%s", out);
    json_decref(ev);
    free(out);

    ck_assert_int_eq(le_daemon_stop(&d, SIGTERM, 7000), 0);
    /* Released as client-go releases. */
    j = get_lease_json();
    spec = json_object_get(j, "spec");
    ck_assert_str_eq(json_string_value(json_object_get(spec, "holderIdentity")), "");
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "leaseDurationSeconds")), 1);
    json_decref(j);
    le_assert_lease_location(&env);
}
END_TEST

/* Arrival (wall seconds) of kubectl's last PATCH of the Lease, or 0. */
static double
last_kubectl_patch(void)
{
    double last = 0;
    json_t *j = le_request_log(&env);
    for (size_t i = 0; i < le_request_count(j); i++) {
        struct le_request q;
        if (le_request_at(j, i, &q) == 0 && strncmp(q.ua, "kubectl", 7) == 0 &&
            strcmp(q.method, "PATCH") == 0 && strstr(q.path, "/leases/prismlb-test"))
            last = q.time > last ? q.time : last;
    }
    json_decref(j);
    return last;
}

START_TEST(go_respected)
{
    char acquired[64], renewed[64], path[4500], text[2048];
    microtime_now(acquired, sizeof(acquired), -30);
    microtime_now(renewed, sizeof(renewed), 0);
    snprintf(path, sizeof(path), "%s/go-lease.yaml", env.f.dir);
    snprintf(text, sizeof(text),
             "apiVersion: coordination.k8s.io/v1\n"
             "kind: Lease\n"
             "metadata:\n"
             "  name: prismlb-test\n"
             "  namespace: default\n"
             "spec:\n"
             "  holderIdentity: go-controller_7\n"
             "  leaseDurationSeconds: 4\n"
             "  acquireTime: \"%s\"\n"
             "  renewTime: \"%s\"\n"
             "  leaseTransitions: 2\n",
             acquired, renewed);
    ck_assert_int_eq(tu_write_file(path, text), 0);
    char *out = NULL;
    int rc = kc(&out, "create", "-f", path, NULL);
    ck_assert_msg(rc == 0, "kubectl create: %d %s", rc, out ? out : "");
    free(out);

    struct le_daemon d;
    memset(&d, 0, sizeof(d));
    le_daemon_start(&env, &d, "solo", &le_short);
    /* The Go controller renews every second, for 5 s. */
    double last_renew = 0;
    for (int i = 0; i < 5; i++) {
        tu_sleep_ms(1000);
        char patch[256];
        microtime_now(renewed, sizeof(renewed), 0);
        snprintf(patch, sizeof(patch), "{\"spec\":{\"renewTime\":\"%s\"}}", renewed);
        last_renew = le_wall();
        rc = kc(&out, "patch", "lease", "prismlb-test", "-n", "default", "--type", "merge", "-p",
                patch, NULL);
        ck_assert_msg(rc == 0, "kubectl patch: %d %s", rc, out ? out : "");
        free(out);
        struct le_write w;
        ck_assert_msg(le_last_writer(&env, &w) < 0, "prismlb wrote while the Go controller "
                                                    "held the Lease");
    }
    json_t *j = get_lease_json();
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(j, "spec"), "holderIdentity")),
        "go-controller_7");
    json_decref(j);

    /* The controller is gone: taken after its own 4 s, not prismlb's 3 s,
     * counted from when its last renewal reached the server (kubectl's own
     * start-up time, long on a busy machine, is not the controller's). */
    struct le_write w;
    ck_assert_msg(le_wait_write(&env, NULL, 0, 15000, &w) == 0, "prismlb never took over");
    double arrived = last_kubectl_patch();
    ck_assert_msg(arrived >= last_renew, "the last renewal is not in the request log");
    last_renew = arrived;
    double after = w.t - last_renew;
    printf("go_respected: took over %.3f s after the Go controller's last renewal "
           "(its leaseDurationSeconds 4)\n",
           after);
    ck_assert_msg(after >= 4.0, "taken %.3f s after the last renewal", after);
    ck_assert_msg(after <= 4.0 + 2.2 * le_short.retry_s + 1.5, "taken only after %.3f s", after);
    j = get_lease_json();
    json_t *spec = json_object_get(j, "spec");
    ck_assert_str_eq(json_string_value(json_object_get(spec, "holderIdentity")), "solo");
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "leaseTransitions")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "leaseDurationSeconds")), 3);
    ck_assert_str_ne(json_string_value(json_object_get(spec, "acquireTime")), acquired);
    assert_microtime("acquireTime", json_string_value(json_object_get(spec, "acquireTime")));
    json_decref(j);
    ck_assert_int_eq(le_daemon_stop(&d, SIGTERM, 7000), 0);
    le_assert_lease_location(&env);
}
END_TEST

int
main(int argc, char **argv)
{
    kcp = le_mode_arg(argc, argv, 2, "root|kcp");
    Suite *s = suite_create("leader-kubectl");
    TCase *tc = tcase_create("kubectl");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, go_fields);
    tcase_add_test(tc, go_respected);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
