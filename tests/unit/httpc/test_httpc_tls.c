/*
 * Check suite for core/httpc.c over TLS, against in-process evhttp servers
 * with OpenSSL bufferevents on 127.0.0.1 ephemeral ports (srv.c) and a test
 * PKI made at run time with the openssl command: a test CA (and failure
 * against another), inline CA PEM, tls_server_name and connect_to, explicit
 * insecure mode, and client-certificate authentication (required by the
 * server; refused without; certificate files re-read on every request).
 * HTTP/2 against h2srv.py (hyper-h2): an answer over a connection whose
 * ALPN chose h2 is taken, an "HTTP/2 200" status line from a peer that
 * chose http/1.1 is refused; fresh_connection opens a connection per
 * request over HTTP/2 too.
 */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "common.h"
#include "srv.h"

static char *pki; /* made once in main, before the runner forks */

static struct event_base *base;
static SSL_CTX *ctx_plain, *ctx_mtls;
static struct srv *tls, *mtls;
static struct core_httpc *hc;
static char *tmpdir;
static char urls[8][256];
static int next_url;

static void
setup(void)
{
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
    ctx_plain = srv_ssl_ctx(pki, 0);
    ctx_mtls = srv_ssl_ctx(pki, 1);
    ck_assert_ptr_nonnull(ctx_plain);
    ck_assert_ptr_nonnull(ctx_mtls);
    tls = srv_new(base, ctx_plain);
    mtls = srv_new(base, ctx_mtls);
    ck_assert_ptr_nonnull(tls);
    ck_assert_ptr_nonnull(mtls);
    httpc_fixture_client(base, &hc, &tmpdir);
}

static void
teardown(void)
{
    core_httpc_free(hc);
    srv_free(tls);
    srv_free(mtls);
    SSL_CTX_free(ctx_plain);
    SSL_CTX_free(ctx_mtls);
    httpc_fixture_free(base, tmpdir);
}

/* A URL on server s with the given host part. */
static const char *
url_on(const struct srv *s, const char *host, const char *path)
{
    char *u = urls[next_url++ % 8];
    snprintf(u, sizeof(urls[0]), "https://%s:%d%s", host, s->port, path);
    return u;
}

static const char *
pki_path(const char *name)
{
    static char paths[8][4200];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof(paths[0]), "%s/%s", pki, name);
    return p;
}

/* Run one request to completion; the result is in *r. */
static void
run_one(const struct plb_http_opts *o, struct result *r)
{
    int err = 1;
    r->done = 0;
    ck_assert_ptr_nonnull(core_http_request(hc, o, &err));
    ck_assert_int_eq(err, 0);
    ck_assert(run_until(base, &r->done, 1, 10000));
}

START_TEST(test_tls_ca_file)
{
    struct result r = {0};
    struct plb_http_opts o = opts_for(url_on(tls, "server.test", "/tls-info"), &r);
    char to[64];
    snprintf(to, sizeof(to), "127.0.0.1:%d", tls->port);
    o.connect_to = to; /* no DNS needed for server.test */
    o.ca_file = pki_path("ca.pem");
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "sni=server.test cn=-");
    ck_assert(r.connect_time > 0);

    /* The same CA given inline as PEM text. */
    char *pem = tu_read_file(pki_path("ca.pem"), NULL);
    ck_assert_ptr_nonnull(pem);
    o.ca_file = NULL;
    o.ca_pem = pem;
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_int_eq(r.status, 200);
    free(pem);
    result_clear(&r);
}
END_TEST

START_TEST(test_tls_wrong_ca)
{
    struct result r = {0};
    char to[64];
    snprintf(to, sizeof(to), "127.0.0.1:%d", tls->port);
    struct plb_http_opts o = opts_for(url_on(tls, "server.test", "/tls-info"), &r);
    o.connect_to = to;
    o.ca_file = pki_path("other-ca.pem");
    run_one(&o, &r);
    ck_assert_int_eq(r.err, PLB_HTTP_E_TLS);
    ck_assert_int_eq(r.status, 0);
    ck_assert(r.text[0] != '\0');

    char *pem = tu_read_file(pki_path("other-ca.pem"), NULL);
    ck_assert_ptr_nonnull(pem);
    o.ca_file = NULL;
    o.ca_pem = pem;
    run_one(&o, &r);
    ck_assert_int_eq(r.err, PLB_HTTP_E_TLS);
    free(pem);

    /* No CA given: the system store does not know the test CA either. */
    o.ca_pem = NULL;
    run_one(&o, &r);
    ck_assert_int_eq(r.err, PLB_HTTP_E_TLS);
    ck_assert_int_eq(tls->hits, 0);

    /* Only an explicit opt-in skips verification. */
    o.ca_file = pki_path("other-ca.pem");
    o.insecure_skip_verify = 1;
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(tls->hits, 1);
    result_clear(&r);
}
END_TEST

START_TEST(test_tls_server_name)
{
    /* The certificate names only server.test; the URL has the address. */
    struct result r = {0};
    struct plb_http_opts o = opts_for(url_on(tls, "127.0.0.1", "/tls-info"), &r);
    o.ca_file = pki_path("ca.pem");
    run_one(&o, &r);
    ck_assert_int_eq(r.err, PLB_HTTP_E_TLS);

    o.tls_server_name = "server.test";
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "sni=server.test cn=-"); /* SNI is the server name */
    char host[64];
    snprintf(host, sizeof(host), "127.0.0.1:%d", tls->port);
    ck_assert_str_eq(tls->host, host); /* Host stays the URL's */

    /* A wrong server name fails verification. */
    o.tls_server_name = "other.test";
    run_one(&o, &r);
    ck_assert_int_eq(r.err, PLB_HTTP_E_TLS);

    /* With connect_to as well: the URL's host is not even used. */
    char to[64];
    snprintf(to, sizeof(to), "127.0.0.1:%d", tls->port);
    o.url = url_on(tls, "unresolvable.invalid", "/tls-info");
    o.tls_server_name = "server.test";
    o.connect_to = to;
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_str_eq(r.body, "sni=server.test cn=-");
    result_clear(&r);
}
END_TEST

static struct plb_http_opts
mtls_opts(struct result *r)
{
    struct plb_http_opts o = opts_for(url_on(mtls, "127.0.0.1", "/tls-info"), r);
    o.tls_server_name = "server.test";
    o.ca_file = pki_path("ca.pem");
    return o;
}

START_TEST(test_client_cert_required)
{
    struct result r = {0};
    struct plb_http_opts o = mtls_opts(&r);
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_E_TLS, "error %d: %s", r.err, r.text);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(mtls->hits, 0);

    o.cert_file = pki_path("client-one.pem");
    o.key_file = pki_path("client-one.key");
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "sni=server.test cn=client-one");

    /* Inline PEM works the same. */
    char *cert = tu_read_file(pki_path("client-two.pem"), NULL);
    char *key = tu_read_file(pki_path("client-two.key"), NULL);
    ck_assert_ptr_nonnull(cert);
    ck_assert_ptr_nonnull(key);
    o.cert_file = o.key_file = NULL;
    o.cert_pem = cert;
    o.key_pem = key;
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_str_eq(r.body, "sni=server.test cn=client-two");
    free(cert);
    free(key);

    /* A certificate from another CA is refused. */
    o.cert_pem = o.key_pem = NULL;
    o.cert_file = pki_path("other-ca.pem");
    o.key_file = pki_path("other-ca.key");
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_E_TLS, "error %d: %s", r.err, r.text);
    result_clear(&r);
}
END_TEST

static void
copy_file(const char *from, const char *to)
{
    char tmp[4300];
    char *data = tu_read_file(from, NULL);
    ck_assert_ptr_nonnull(data);
    snprintf(tmp, sizeof(tmp), "%s.tmp", to);
    ck_assert_int_eq(tu_write_file(tmp, data), 0);
    ck_assert_int_eq(rename(tmp, to), 0);
    free(data);
}

START_TEST(test_client_cert_rotation)
{
    char cert[4200], key[4200];
    snprintf(cert, sizeof(cert), "%s/tls.crt", tmpdir);
    snprintf(key, sizeof(key), "%s/tls.key", tmpdir);
    copy_file(pki_path("client-one.pem"), cert);
    copy_file(pki_path("client-one.key"), key);

    struct result r = {0};
    struct plb_http_opts o = mtls_opts(&r);
    o.cert_file = cert;
    o.key_file = key;
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_str_eq(r.body, "sni=server.test cn=client-one");

    /* Rotated on disk: the next request presents the new certificate
     * (a fresh connection; the old one does not match any more). */
    copy_file(pki_path("client-two.pem"), cert);
    copy_file(pki_path("client-two.key"), key);
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_str_eq(r.body, "sni=server.test cn=client-two");

    /* Unchanged files: still client-two (and connection reuse is fine). */
    run_one(&o, &r);
    ck_assert_str_eq(r.body, "sni=server.test cn=client-two");

    /* A missing key file is a local error, reported through done. */
    ck_assert_int_eq(unlink(key), 0);
    int hits = mtls->hits;
    run_one(&o, &r);
    ck_assert_int_eq(r.err, PLB_HTTP_E_LOCAL);
    ck_assert_ptr_nonnull(strstr(r.text, key));
    ck_assert_int_eq(mtls->hits, hits);
    result_clear(&r);
}
END_TEST

START_TEST(test_tls_bearer_and_cancel)
{
    /* Bearer token over TLS, then a cancel during a TLS request. */
    char tok[4200];
    snprintf(tok, sizeof(tok), "%s/token", tmpdir);
    ck_assert_int_eq(tu_write_file(tok, "secret-token\n"), 0);
    struct result r = {0};
    struct plb_http_opts o = opts_for(url_on(tls, "127.0.0.1", "/echo"), &r);
    o.tls_server_name = "server.test";
    o.ca_file = pki_path("ca.pem");
    o.bearer_token_file = tok;
    run_one(&o, &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_str_eq(tls->auth, "Bearer secret-token");

    o.url = url_on(tls, "127.0.0.1", "/hang");
    int err;
    r.done = 0;
    plb_http_req *req = core_http_request(hc, &o, &err);
    ck_assert_ptr_nonnull(req);
    ck_assert(run_until(base, &tls->hits, 2, 10000)); /* reached the server, hangs */
    ck_assert_uint_eq(core_httpc_active(hc), 1);
    core_http_cancel(req);
    ck_assert_uint_eq(core_httpc_active(hc), 0);
    run_for(base, 100);
    ck_assert_int_eq(r.done, 0);
    result_clear(&r);
}
END_TEST

/* h2srv.py in mode (see there) with the test PKI's server certificate:
 * its port, the process in *p (stopped by the caller). */
static int
h2srv_start(struct tu_proc *p, const char *mode)
{
    char script[4096], log[4200], line[32];
    snprintf(script, sizeof(script), "%s", tu_source_path("tests/unit/httpc/h2srv.py"));
    snprintf(log, sizeof(log), "%s/h2srv-%s.log", tmpdir, mode);
    char *argv[] = {"/usr/bin/python3",
                    script,
                    (char *)mode,
                    (char *)pki_path("server.pem"),
                    (char *)pki_path("server.key"),
                    NULL};
    ck_assert_int_eq(tu_spawn(p, argv, NULL, log), 0);
    ck_assert_msg(tu_wait_line(log, "port ", line, sizeof(line), 10000) == 0,
                  "h2srv.py did not start");
    return atoi(line);
}

/* GET path from h2srv.py on port, verified against the test CA: into *r. */
static void
h2srv_get(int port, const char *path, struct result *r)
{
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d%s", port, path);
    struct plb_http_opts o = opts_for(url, r);
    o.tls_server_name = "server.test";
    o.ca_file = pki_path("ca.pem");
    run_one(&o, r);
}

START_TEST(test_tls_http2_by_alpn)
{
    struct tu_proc proc;
    int port = h2srv_start(&proc, "h2");
    struct result r = {.want_hdr = "content-type"};
    h2srv_get(port, "/over-h2", &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "h2 GET /over-h2"); /* only the HTTP/2 server says so */
    ck_assert(r.hdr_found);
    ck_assert_str_eq(r.hdr, "text/plain");

    /* A second request on the same multiplexed connection. */
    h2srv_get(port, "/again", &r);
    ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    ck_assert_str_eq(r.body, "h2 GET /again");
    result_clear(&r);
    ck_assert_int_eq(tu_stop(&proc, SIGTERM, 5000) >= 0, 1);
}
END_TEST

/* Lines of h2srv.py's log (mode h2) that begin with prefix. */
static int
h2srv_count(const char *prefix)
{
    char log[4200];
    snprintf(log, sizeof(log), "%s/h2srv-h2.log", tmpdir);
    char *s = tu_read_file(log, NULL);
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *q = s; q && *q; q = strchr(q, '\n') ? strchr(q, '\n') + 1 : "")
        n += strncmp(q, prefix, len) == 0;
    free(s);
    return n;
}

/* fresh_connection: each request its own TCP and TLS connection, also
 * where HTTP/2 would multiplex it onto the last one; a 3.0 module's shorter
 * options still reuse. */
START_TEST(test_tls_fresh_connection_over_http2)
{
    struct tu_proc proc;
    int port = h2srv_start(&proc, "h2");
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/readyz", port);
    struct result r = {0};
    size_t before = core_httpc_connects(hc);
    for (int i = 0; i < 3; i++) {
        struct plb_http_opts o = opts_for(url, &r);
        o.tls_server_name = "server.test";
        o.ca_file = pki_path("ca.pem");
        o.fresh_connection = 1;
        run_one(&o, &r);
        ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
        ck_assert_str_eq(r.body, "h2 GET /readyz");
    }
    ck_assert_uint_eq(core_httpc_connects(hc) - before, 3);
    /* The server saw three connections, one request on each. */
    long long end = tu_now_ms() + 5000;
    while (h2srv_count("req ") < 3 && tu_now_ms() < end)
        tu_sleep_ms(10);
    ck_assert_int_eq(h2srv_count("conn "), 3);
    ck_assert_int_eq(h2srv_count("req 1 "), 1);
    ck_assert_int_eq(h2srv_count("req 2 "), 1);
    ck_assert_int_eq(h2srv_count("req 3 "), 1);

    /* Options of the 3.0 size: no fresh_connection, the connections are
     * kept: the second request goes on the first one's. */
    before = core_httpc_connects(hc);
    for (int i = 0; i < 2; i++) {
        struct plb_http_opts o = opts_for(url, &r);
        o.size = offsetof(struct plb_http_opts, fresh_connection);
        o.tls_server_name = "server.test";
        o.ca_file = pki_path("ca.pem");
        o.fresh_connection = 1; /* beyond size: not read */
        run_one(&o, &r);
        ck_assert_msg(r.err == PLB_HTTP_OK, "error %d: %s", r.err, r.text);
    }
    ck_assert_uint_eq(core_httpc_connects(hc) - before, 1);
    /* A size of no version (one byte short of 3.0's, or into the 3.1
     * field) is refused. */
    struct plb_http_opts o = opts_for(url, &r);
    size_t bad[] = {offsetof(struct plb_http_opts, fresh_connection) - 1,
                    offsetof(struct plb_http_opts, fresh_connection) + 1};
    for (size_t i = 0; i < 2; i++) {
        o.size = bad[i];
        int err = 0;
        ck_assert_ptr_null(core_http_request(hc, &o, &err));
        ck_assert_int_eq(err, -EINVAL);
    }
    result_clear(&r);
    ck_assert_int_eq(tu_stop(&proc, SIGTERM, 5000) >= 0, 1);
}
END_TEST

START_TEST(test_tls_http2_status_line_over_http1)
{
    struct tu_proc proc;
    int port = h2srv_start(&proc, "h1-h2-line");
    struct result r = {0};
    h2srv_get(port, "/readyz", &r);
    ck_assert_msg(r.err == PLB_HTTP_E_PROTOCOL, "error %d (%s), status %d", r.err, r.text,
                  r.status);
    ck_assert_ptr_nonnull(strstr(r.text, "malformed status line"));
    result_clear(&r);
    ck_assert_int_eq(tu_stop(&proc, SIGTERM, 5000) >= 0, 1);
}
END_TEST

static Suite *
tls_suite(void)
{
    Suite *s = suite_create("httpc_tls");
    TCase *tc = tcase_create("tls");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tls_ca_file);
    tcase_add_test(tc, test_tls_wrong_ca);
    tcase_add_test(tc, test_tls_server_name);
    tcase_add_test(tc, test_client_cert_required);
    tcase_add_test(tc, test_client_cert_rotation);
    tcase_add_test(tc, test_tls_bearer_and_cancel);
    tcase_add_test(tc, test_tls_http2_by_alpn);
    tcase_add_test(tc, test_tls_http2_status_line_over_http1);
    tcase_add_test(tc, test_tls_fresh_connection_over_http2);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    if (httpc_suite_init() < 0)
        return 1;
    pki = tu_mkdtemp();
    if (!pki || srv_make_pki(pki) < 0) {
        fprintf(stderr, "cannot make the test PKI\n");
        return 1;
    }
    int rc = httpc_suite_run(tls_suite());
    tu_rmrf(pki);
    free(pki);
    return rc;
}
