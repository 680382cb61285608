/*
 * tcp_proxy end to end, health_check = readyz: the daemon probes HTTPS
 * upstreams (readyz_server.py, certificates from gen_certs.sh) with a
 * client certificate or a bearer token file re-read on every probe; a
 * missing credential fails the probe, not the start; every probe is a new
 * TLS connection, over HTTP/1.1 and HTTP/2 (h2srv.py), so a serving
 * certificate rotated to another CA's turns the upstream not ready; an
 * upstream turning
 * unready loses its connections after drain_timeout while another is ready,
 * and keeps them when none is.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

#define FAST "health_interval = \"1100ms\"; health_timeout = \"1s\"; "

static char *pki; /* certificates, tokens, unready marks (owned) */

struct rz {
    struct tu_proc proc;
    char id;
    int port;
    char ep[32];
};

static void
setup(void)
{
    pki = tu_mkdtemp();
    ck_assert_ptr_nonnull(pki);
    char script[4096];
    snprintf(script, sizeof(script), "%s", tu_source_path("tests/e2e/tcp_proxy/gen_certs.sh"));
    char *argv[] = {"sh", script, pki, NULL};
    char *out = NULL;
    int rc = tu_run(argv, NULL, &out, 60000);
    ck_assert_msg(rc == 0, "gen_certs.sh: %s", out);
    free(out);
}

static void
teardown(void)
{
    tu_rmrf(pki);
    free(pki);
}

static const char *
pki_path(const char *name)
{
    return dir_path(pki, name);
}

/* Start an HTTPS readyz server; extra: NULL-terminated options or NULL. */
static void
rz_start(struct rz *r, char id, const char *const *extra)
{
    char script[4096], port_file[4200], log[4200], ids[2] = {id, 0}, line[64];
    char *argv[16];
    int n = 0;
    memset(r, 0, sizeof(*r));
    r->id = id;
    snprintf(script, sizeof(script), "%s", tu_source_path("tests/e2e/tcp_proxy/readyz_server.py"));
    snprintf(port_file, sizeof(port_file), "%s/%c.port", pki, id);
    snprintf(log, sizeof(log), "%s/%c.log", pki, id);
    argv[n++] = "python3";
    argv[n++] = script;
    argv[n++] = port_file;
    argv[n++] = pki;
    argv[n++] = ids;
    for (size_t i = 0; extra && extra[i] && n < 15; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    ck_assert_int_eq(tu_spawn(&r->proc, argv, NULL, log), 0);
    tp_track(r->proc.pid);
    /* The port file holds one line "PORT": wait for it. */
    long long end = tu_now_ms() + 10000;
    for (;;) {
        char *s = tu_read_file(port_file, NULL);
        if (s && sscanf(s, "%d", &r->port) == 1 && r->port > 0) {
            free(s);
            break;
        }
        free(s);
        ck_assert_msg(tu_now_ms() < end, "readyz server %c did not start", id);
        tu_sleep_ms(20);
    }
    snprintf(r->ep, sizeof(r->ep), "127.0.0.1:%d", r->port);
    (void)line;
}

static void
rz_stop(struct rz *r)
{
    tu_stop(&r->proc, SIGTERM, 5000);
}

static void
rz_unready(const struct rz *r, int unready)
{
    char mark[16];
    snprintf(mark, sizeof(mark), "%c.unready", r->id);
    if (unready)
        ck_assert_int_eq(tu_write_file(pki_path(mark), "x"), 0);
    else
        unlink(pki_path(mark));
}

/* Occurrences of needle in the daemon's log. */
static int
log_count(struct proxy *p, const char *needle)
{
    return tu_file_count(p->log, needle);
}

/* Wait until needle occurs at least `count` times. */
static int
wait_count(struct proxy *p, const char *needle, int count, int timeout_ms)
{
    long long end = tu_now_ms() + timeout_ms;
    while (log_count(p, needle) < count) {
        if (tu_now_ms() >= end)
            return -1;
        tu_sleep_ms(20);
    }
    return 0;
}

static void
readyz_settings(char *buf, size_t len, const char *extra)
{
    snprintf(buf, len, FAST "health_check = \"readyz\"; health_check_ca_file = \"%s\"; %s",
             pki_path("ca.crt"), extra ? extra : "");
}

static void
assert_proxy_started(struct proxy *p, const char *settings, const char *const *eps, size_t n)
{
    ck_assert_msg(proxy_start(p, settings, eps, n) == 0, "prismlb did not start: %s",
                  p->dir ? proxy_log(p) : "");
}

START_TEST(readyz_probes_present_the_client_certificate)
{
    struct rz a;
    const char *req[] = {"--require-cert", NULL};
    rz_start(&a, 'A', req);
    const char *eps[] = {a.ep};
    char settings[16384], ready[128], extra[12000];
    snprintf(ready, sizeof(ready), "msg=\"upstream is ready\" upstream=%s", a.ep);

    /* Without a client certificate the handshake fails: never ready. */
    struct proxy p;
    readyz_settings(settings, sizeof(settings), NULL);
    assert_proxy_started(&p, settings, eps, 1);
    /* Two probes failed: two chances to turn ready, none taken. */
    ck_assert_msg(wait_count(&p, "readyz probe failed", 2, 10000) == 0, "%s", proxy_log(&p));
    ck_assert_int_eq(log_count(&p, ready), 0);
    ck_assert_int_eq(proxy_stop(&p), 0);

    /* With the certificate it becomes ready. */
    snprintf(extra, sizeof(extra),
             "health_check_cert_file = \"%s\"; health_check_key_file = \"%s\";",
             pki_path("client.crt"), pki_path("client.key"));
    readyz_settings(settings, sizeof(settings), extra);
    assert_proxy_started(&p, settings, eps, 1);
    ck_assert_msg(proxy_wait_log(&p, ready, 5000) == 0, "%s", proxy_log(&p));
    ck_assert_int_eq(proxy_stop(&p), 0);
    rz_stop(&a);
}
END_TEST

START_TEST(readyz_probes_reread_a_rotated_token_file)
{
    struct rz a;
    ck_assert_int_eq(tu_write_file(pki_path("accepted"), "t1\n"), 0);
    ck_assert_int_eq(tu_write_file(pki_path("token"), "t1\n"), 0);
    const char *tok[] = {"--token-file", pki_path("accepted"), NULL};
    rz_start(&a, 'A', tok);
    const char *eps[] = {a.ep};
    char settings[16384], extra[8192], ready[128], unready[128];
    snprintf(ready, sizeof(ready), "msg=\"upstream is ready\" upstream=%s", a.ep);
    snprintf(unready, sizeof(unready), "msg=\"upstream is not ready\" upstream=%s", a.ep);
    snprintf(extra, sizeof(extra), "health_check_token_file = \"%s\";", pki_path("token"));
    readyz_settings(settings, sizeof(settings), extra);

    struct proxy p;
    assert_proxy_started(&p, settings, eps, 1);
    ck_assert_msg(wait_count(&p, ready, 1, 5000) == 0, "%s", proxy_log(&p));
    /* The server rotates to t2: probes with t1 fail, two make it unready. */
    ck_assert_int_eq(tu_write_file(pki_path("accepted"), "t2\n"), 0);
    ck_assert_msg(wait_count(&p, unready, 1, 6000) == 0, "%s", proxy_log(&p));
    /* The token file is rotated: the next probe reads t2 and passes. */
    ck_assert_int_eq(tu_write_file(pki_path("token"), "t2\n"), 0);
    ck_assert_msg(wait_count(&p, ready, 2, 4000) == 0, "%s", proxy_log(&p));
    ck_assert_int_eq(proxy_stop(&p), 0);
    rz_stop(&a);
}
END_TEST

START_TEST(a_missing_credential_fails_the_probe_not_the_start)
{
    struct rz a;
    ck_assert_int_eq(tu_write_file(pki_path("accepted"), "late\n"), 0);
    const char *tok[] = {"--token-file", pki_path("accepted"), NULL};
    rz_start(&a, 'A', tok);
    const char *eps[] = {a.ep};
    char settings[16384], extra[8192], ready[128];
    snprintf(ready, sizeof(ready), "msg=\"upstream is ready\" upstream=%s", a.ep);
    unlink(pki_path("token"));
    snprintf(extra, sizeof(extra), "health_check_token_file = \"%s\";", pki_path("token"));
    readyz_settings(settings, sizeof(settings), extra);

    struct proxy p;
    assert_proxy_started(&p, settings, eps, 1);
    ck_assert_msg(wait_count(&p, "readyz probe failed", 2, 10000) == 0, "%s", proxy_log(&p));
    ck_assert_int_eq(log_count(&p, ready), 0);
    ck_assert_int_eq(tu_write_file(pki_path("token"), "late\n"), 0);
    ck_assert_msg(wait_count(&p, ready, 1, 4000) == 0, "%s", proxy_log(&p));
    ck_assert_int_eq(proxy_stop(&p), 0);
    rz_stop(&a);
}
END_TEST

/* Lines of a readyz server's log containing needle. */
static int
rz_count(const struct rz *r, const char *needle)
{
    char log[4200];
    snprintf(log, sizeof(log), "%s/%c.log", pki, r->id);
    char *s = tu_read_file(log, NULL);
    int n = 0;
    for (const char *q = s; q && (q = strstr(q, needle)); q++)
        n++;
    free(s);
    return n;
}

/* A second PKI in pki/other: the same names, another CA. Writes
 * "CERT KEY" of its serving certificate into marker (len bytes). */
static void
other_pki(char *marker, size_t len)
{
    char other[4300], script[4096];
    snprintf(other, sizeof(other), "%s/other", pki);
    ck_assert_int_eq(mkdir(other, 0700), 0);
    snprintf(script, sizeof(script), "%s", tu_source_path("tests/e2e/tcp_proxy/gen_certs.sh"));
    char *argv[] = {"sh", script, other, NULL};
    char *out = NULL;
    ck_assert_msg(tu_run(argv, NULL, &out, 60000) == 0, "gen_certs.sh: %s", out);
    free(out);
    snprintf(marker, len, "%s/server.crt %s/server.key\n", other, other);
}

/* Not ready at the second failed probe, that is within two intervals (one
 * probe an interval): no probe had failed before the rotation. */
static void
assert_unready_at_the_second_failed_probe(struct proxy *p, const char *unready)
{
    ck_assert_msg(proxy_wait_log(p, unready, 15000) == 0, "%s", proxy_log(p));
    char *log = proxy_log(p);
    const char *at = strstr(log, unready);
    ck_assert_ptr_nonnull(at);
    int failed = 0;
    for (const char *q = log; (q = strstr(q, "readyz probe failed")) && q < at; q++)
        failed++;
    ck_assert_msg(failed == 2, "not ready after %d failed probes: %s", failed, log);
    free(log);
}

/* Every probe makes a new TLS connection: a serving certificate rotated to
 * one another CA signed fails the next probes, where a kept-alive
 * connection would go on passing them. */
START_TEST(a_serving_certificate_from_another_ca_turns_the_upstream_not_ready)
{
    char marker[8700];
    other_pki(marker, sizeof(marker));

    struct rz a;
    rz_start(&a, 'A', NULL);
    const char *eps[] = {a.ep};
    char settings[16384], ready[128], unready[128];
    snprintf(ready, sizeof(ready), "msg=\"upstream is ready\" upstream=%s", a.ep);
    snprintf(unready, sizeof(unready), "msg=\"upstream is not ready\" upstream=%s", a.ep);
    readyz_settings(settings, sizeof(settings), NULL);
    struct proxy p;
    assert_proxy_started(&p, settings, eps, 1);
    ck_assert_msg(wait_count(&p, ready, 1, 6000) == 0, "%s", proxy_log(&p));
    /* A second passing probe: with kept-alive probes, there is a
     * connection from before the rotation to go on with. */
    long long end = tu_now_ms() + 4000;
    while (rz_count(&a, "readyz 200") < 2) {
        ck_assert_msg(tu_now_ms() < end, "no second probe");
        tu_sleep_ms(20);
    }
    ck_assert_int_eq(tu_write_file(pki_path("A.cert"), marker), 0);
    ck_assert_int_eq(log_count(&p, "readyz probe failed"), 0);
    assert_unready_at_the_second_failed_probe(&p, unready);
    ck_assert_int_eq(proxy_stop(&p), 0);
    rz_stop(&a);
}
END_TEST

/* The connection numbers of the first n "req N GET /readyz" lines of
 * h2srv.py's log, into conns; how many there are. */
static int
h2_probe_conns(const char *log, int *conns, int n)
{
    char *s = tu_read_file(log, NULL);
    int got = 0;
    for (const char *q = s; q && *q && got < n;) {
        int c;
        char path[32];
        if (sscanf(q, "req %d GET %31s", &c, path) == 2 && strcmp(path, "/readyz") == 0)
            conns[got++] = c;
        const char *nl = strchr(q, '\n');
        q = nl ? nl + 1 : "";
    }
    free(s);
    return got;
}

/* The same over HTTP/2, which every kube-apiserver offers by ALPN and
 * where "Connection: close" means nothing (h2srv.py, hyper-h2): three
 * probes are three TLS connections, counted by the server, and a rotation
 * to another CA's certificate turns the upstream not ready within two
 * probe intervals. */
START_TEST(readyz_probes_over_http2_use_a_new_connection_each)
{
    char marker[8700], script[4096], log[4200], rotate[4200], line[32];
    other_pki(marker, sizeof(marker));
    snprintf(script, sizeof(script), "%s", tu_source_path("tests/unit/httpc/h2srv.py"));
    snprintf(log, sizeof(log), "%s/h2.log", pki);
    snprintf(rotate, sizeof(rotate), "%s/h2.cert", pki);
    /* The system's python3, which python3-h2 is installed for. */
    char *argv[] = {"/usr/bin/python3",
                    script,
                    "h2",
                    (char *)pki_path("server.crt"),
                    (char *)pki_path("server.key"),
                    rotate,
                    NULL};
    struct tu_proc srv;
    ck_assert_int_eq(tu_spawn(&srv, argv, NULL, log), 0);
    tp_track(srv.pid);
    ck_assert_msg(tu_wait_line(log, "port ", line, sizeof(line), 10000) == 0,
                  "h2srv.py did not start");
    char ep[32], settings[16384], ready[128], unready[128];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", atoi(line));
    const char *eps[] = {ep};
    snprintf(ready, sizeof(ready), "msg=\"upstream is ready\" upstream=%s", ep);
    snprintf(unready, sizeof(unready), "msg=\"upstream is not ready\" upstream=%s", ep);
    readyz_settings(settings, sizeof(settings), NULL);
    struct proxy p;
    assert_proxy_started(&p, settings, eps, 1);
    ck_assert_msg(wait_count(&p, ready, 1, 6000) == 0, "%s", proxy_log(&p));

    /* Three probes, each on a connection of its own. */
    int conns[3];
    long long end = tu_now_ms() + 8000;
    while (h2_probe_conns(log, conns, 3) < 3) {
        ck_assert_msg(tu_now_ms() < end, "fewer than three probes");
        tu_sleep_ms(20);
    }
    ck_assert_msg(conns[0] != conns[1] && conns[1] != conns[2] && conns[0] != conns[2],
                  "probes on connections %d, %d, %d", conns[0], conns[1], conns[2]);
    ck_assert_int_eq(log_count(&p, "readyz probe failed"), 0);

    ck_assert_int_eq(tu_write_file(rotate, marker), 0);
    long long rotated = tu_now_ms();
    assert_unready_at_the_second_failed_probe(&p, unready);
    printf("http2: probes on connections %d, %d, %d; not ready %lld ms after the rotation "
           "(health_interval 1100 ms)\n",
           conns[0], conns[1], conns[2], tu_now_ms() - rotated);
    fflush(stdout);
    ck_assert_int_eq(proxy_stop(&p), 0);
    tu_stop(&srv, SIGTERM, 5000);
}
END_TEST

struct client {
    struct tu_proc proc;
    char log[4200];
};

/* Hold one HTTPS connection through the proxy; returns its upstream id. */
static char
client_start(struct client *c, struct proxy *p, int n, int hold_s)
{
    char script[4096], port[16], hold[16], line[64];
    snprintf(script, sizeof(script), "%s", tu_source_path("tests/e2e/tcp_proxy/readyz_client.py"));
    snprintf(port, sizeof(port), "%d", p->port);
    snprintf(hold, sizeof(hold), "%d", hold_s);
    snprintf(c->log, sizeof(c->log), "%s/client%d.log", pki, n);
    char *argv[] = {"python3", script, port, (char *)pki_path("ca.crt"), hold, NULL};
    ck_assert_int_eq(tu_spawn(&c->proc, argv, NULL, c->log), 0);
    tp_track(c->proc.pid);
    ck_assert_msg(tu_wait_line(c->log, "id ", line, sizeof(line), 10000) == 0,
                  "client got no id through the proxy");
    return line[0];
}

START_TEST(an_unready_upstream_loses_its_connections_after_drain_timeout_while_another_is_ready)
{
    struct rz s[2];
    rz_start(&s[0], 'A', NULL);
    rz_start(&s[1], 'B', NULL);
    const char *eps[] = {s[0].ep, s[1].ep};
    char settings[16384];
    readyz_settings(settings, sizeof(settings), "drain_timeout = \"2s\";");
    struct proxy p;
    assert_proxy_started(&p, settings, eps, 2);
    ck_assert_msg(wait_count(&p, " is ready", 2, 6000) == 0, "%s", proxy_log(&p));

    struct client c;
    char id = client_start(&c, &p, 0, 20);
    ck_assert(id == 'A' || id == 'B');
    struct rz *bad = id == 'A' ? &s[0] : &s[1];
    char unready[128], buf[64];
    snprintf(unready, sizeof(unready), "msg=\"upstream is not ready\" upstream=%s", bad->ep);
    rz_unready(bad, 1);
    ck_assert_msg(proxy_wait_log(&p, unready, 6000) == 0, "%s", proxy_log(&p));
    long long marked = tu_now_ms();
    /* New connections go to the ready upstream only. */
    for (int i = 1; i <= 3; i++) {
        struct client o;
        ck_assert_int_ne(client_start(&o, &p, i, 1), id);
        tu_stop(&o.proc, SIGTERM, 3000);
    }
    /* The held connection is closed after drain_timeout, not before. */
    ck_assert_int_eq(tu_wait_line(c.log, "closed ", buf, sizeof(buf), 10000), 0);
    long long after = atoll(buf) - marked;
    ck_assert_msg(after >= 1500 && after <= 4000, "closed %lld ms after the upstream was unready",
                  after);
    tu_stop(&c.proc, SIGTERM, 3000);
    ck_assert_int_eq(proxy_stop(&p), 0);
    rz_stop(&s[0]);
    rz_stop(&s[1]);
}
END_TEST

START_TEST(with_no_upstream_ready_existing_connections_stay)
{
    struct rz a;
    rz_start(&a, 'A', NULL);
    const char *eps[] = {a.ep};
    char settings[16384], unready[128], buf[64];
    readyz_settings(settings, sizeof(settings), "drain_timeout = \"1s\";");
    struct proxy p;
    assert_proxy_started(&p, settings, eps, 1);
    ck_assert_msg(wait_count(&p, " is ready", 1, 6000) == 0, "%s", proxy_log(&p));
    struct client c;
    ck_assert_int_eq(client_start(&c, &p, 0, 5), 'A');
    rz_unready(&a, 1);
    snprintf(unready, sizeof(unready), "msg=\"upstream is not ready\" upstream=%s", a.ep);
    ck_assert_int_eq(proxy_wait_log(&p, unready, 6000), 0);
    /* Held 5 s in all: well past drain_timeout, still open. */
    ck_assert_int_eq(tu_wait_line(c.log, "still open", buf, sizeof(buf), 8000), 0);
    /* And new connections fall back to the TCP-healthy upstream. */
    struct client o;
    ck_assert_int_eq(client_start(&o, &p, 1, 1), 'A');
    tu_stop(&o.proc, SIGTERM, 3000);
    tu_stop(&c.proc, SIGTERM, 3000);
    ck_assert_int_eq(proxy_stop(&p), 0);
    rz_stop(&a);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy_readyz");
    TCase *tc = tcase_create("readyz");
    tcase_add_unchecked_fixture(tc, tp_registry_init, tp_reap_all);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, readyz_probes_present_the_client_certificate);
    tcase_add_test(tc, readyz_probes_reread_a_rotated_token_file);
    tcase_add_test(tc, a_missing_credential_fails_the_probe_not_the_start);
    tcase_add_test(tc, a_serving_certificate_from_another_ca_turns_the_upstream_not_ready);
    tcase_add_test(tc, readyz_probes_over_http2_use_a_new_connection_each);
    tcase_add_test(
        tc, an_unready_upstream_loses_its_connections_after_drain_timeout_while_another_is_ready);
    tcase_add_test(tc, with_no_upstream_ready_existing_connections_stay);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run_suite(suite());
}
