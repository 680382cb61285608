/*
 * Check suite for core/httpc.c over plain HTTP, against an in-process
 * evhttp server on a 127.0.0.1 ephemeral port (srv.c): responses and
 * headers, methods and bodies, limits, redirects, bearer token files,
 * timeouts, cancellation from every place, freeing with requests in flight,
 * and a 100,000-line stream whose peak memory is measured through the
 * allocation hook (libcurl, libevent and the server all allocate through it).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "srv.h"

static struct event_base *base;
static struct srv *srv;
static struct core_httpc *hc;
static char urls[8][256];
static int next_url;
static char *tmpdir;

static void
setup(void)
{
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
    srv = srv_new(base, NULL);
    ck_assert_ptr_nonnull(srv);
    httpc_fixture_client(base, &hc, &tmpdir);
}

static void
teardown(void)
{
    core_httpc_free(hc);
    srv_free(srv);
    httpc_fixture_free(base, tmpdir);
}

static const char *
u(const char *path)
{
    /* A few buffers in turn, so that several options can be built at once. */
    char *url = urls[next_url++ % 8];
    snprintf(url, sizeof(urls[0]), "http://127.0.0.1:%d%s", srv->port, path);
    return url;
}

static void
start(const struct plb_http_opts *o)
{
    int err = 1;
    plb_http_req *req = core_http_request(hc, o, &err);
    ck_assert_ptr_nonnull(req);
    ck_assert_int_eq(err, 0);
}

START_TEST(test_get_headers)
{
    struct result r = {.want_hdr = "x-test"};
    struct plb_http_opts o = opts_for(u("/hello"), &r);
    const char *hdrs[] = {"X-Req: from-the-client", NULL};
    o.headers = hdrs;
    start(&o);
    ck_assert_uint_eq(core_httpc_active(hc), 1);
    ck_assert_int_eq(r.done, 0); /* never from inside core_http_request */
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.err, PLB_HTTP_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "hello world");
    ck_assert_uint_eq(r.body_len, 11);
    ck_assert(r.hdr_found);
    ck_assert_str_eq(r.hdr, "b"); /* the last value, case-insensitive name */
    ck_assert(r.total_time > 0);
    ck_assert(r.connect_time > 0 && r.connect_time <= r.total_time);
    ck_assert_uint_eq(core_httpc_active(hc), 0);

    /* The request's own header reached the server and came back. */
    r.want_hdr = "X-Echo";
    r.done = 0;
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_str_eq(r.hdr, "from-the-client");
    ck_assert_int_eq(srv->hits, 2);
    result_clear(&r);
}
END_TEST

START_TEST(test_post_and_methods)
{
    struct result r = {0};
    struct plb_http_opts o = opts_for(u("/echo"), &r);
    o.method = "POST";
    o.body = "a=1&b=2";
    o.body_len = 7;
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "POST a=1&b=2");
    ck_assert_str_eq(srv->body, "a=1&b=2");

    const char *methods[] = {"PUT", "PATCH", "DELETE"};
    for (int i = 0; i < 3; i++) {
        r.done = 0;
        o.method = methods[i];
        o.body = i < 2 ? "{}" : NULL;
        o.body_len = i < 2 ? 2 : 0;
        start(&o);
        ck_assert(run_until(base, &r.done, 1, 5000));
        ck_assert_int_eq(r.status, 200);
        ck_assert_str_eq(srv->method, methods[i]);
    }
    /* A body larger than curl's Expect: 100-continue threshold goes out
     * at once (no Expect round trip), and intact. */
    static char big[200000];
    memset(big, 'z', sizeof(big));
    r.done = 0;
    o.method = "POST";
    o.body = big;
    o.body_len = sizeof(big);
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(srv->expect, "-");
    ck_assert_uint_eq(srv->body_len, sizeof(big));
    ck_assert_uint_eq(r.body_len, 5 + sizeof(srv->body) - 1);
    result_clear(&r);
}
END_TEST

START_TEST(test_404_and_redirect)
{
    struct result r = {.want_hdr = "Location"};
    struct plb_http_opts o = opts_for(u("/missing"), &r);
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.err, PLB_HTTP_OK); /* an HTTP status is not an error */
    ck_assert_int_eq(r.status, 404);

    r.done = 0;
    o.url = u("/redirect");
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.err, PLB_HTTP_OK);
    ck_assert_int_eq(r.status, 302); /* not followed */
    ck_assert_str_eq(r.hdr, "/hello");
    ck_assert_int_eq(srv->hits, 2); /* /hello was never fetched */
    result_clear(&r);
}
END_TEST

START_TEST(test_buffer_limit)
{
    struct result r = {0};
    struct plb_http_opts o = opts_for(u("/big?n=5000"), &r);
    o.max_body = 5000;
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.err, PLB_HTTP_OK);
    ck_assert_uint_eq(r.body_len, 5000);

    r.done = 0;
    o.url = u("/big?n=5001");
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.err, PLB_HTTP_E_TOO_LARGE);
    ck_assert_uint_le(r.body_len, 5000); /* never more than the limit */
    result_clear(&r);
}
END_TEST

START_TEST(test_bad_options)
{
    struct result r = {0};
    int err = 0;
    struct plb_http_opts o = opts_for(u("/hello"), &r);
    o.url = "ftp://127.0.0.1/x";
    ck_assert_ptr_null(core_http_request(hc, &o, &err));
    ck_assert_int_eq(err, -EINVAL);
    o = opts_for(u("/hello"), &r);
    o.done = NULL;
    ck_assert_ptr_null(core_http_request(hc, &o, &err));
    ck_assert_int_eq(err, -EINVAL);
    o = opts_for(u("/hello"), &r);
    o.body_mode = PLB_HTTP_LINES; /* no on_data */
    ck_assert_ptr_null(core_http_request(hc, &o, &err));
    ck_assert_int_eq(err, -EINVAL);
    o = opts_for(u("/hello"), &r);
    o.size = sizeof(o) - 1;
    ck_assert_ptr_null(core_http_request(hc, &o, &err));
    ck_assert_int_eq(err, -EINVAL);
    o = opts_for(u("/hello"), &r);
    o.connect_to = "no-port";
    ck_assert_ptr_null(core_http_request(hc, &o, &err));
    ck_assert_int_eq(err, -EINVAL);
    o = opts_for(u("/hello"), &r);
    const char *inject[] = {"X-A: b\r\nX-Evil: 1", NULL};
    o.headers = inject;
    ck_assert_ptr_null(core_http_request(hc, &o, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_uint_eq(core_httpc_active(hc), 0);
    run_for(base, 50);
    ck_assert_int_eq(r.done, 0);
}
END_TEST

START_TEST(test_connect_refused)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t slen = sizeof(sin);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &slen), 0);
    close(fd); /* bound once, now nobody listens there */
    char refused[64];
    snprintf(refused, sizeof(refused), "http://127.0.0.1:%d/", ntohs(sin.sin_port));
    struct result r = {0};
    struct plb_http_opts o = opts_for(refused, &r);
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.err, PLB_HTTP_E_CONNECT);
    ck_assert_int_eq(r.status, 0);
    ck_assert(r.text[0] != '\0');
    result_clear(&r);
}
END_TEST

START_TEST(test_bearer_token_rotation)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof(path), "%s/token", tmpdir);
    snprintf(tmp, sizeof(tmp), "%s/token.new", tmpdir);
    ck_assert_int_eq(tu_write_file(path, "token-one\n"), 0);

    struct result r = {0};
    struct plb_http_opts o = opts_for(u("/echo"), &r);
    o.bearer_token_file = path;
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(srv->auth, "Bearer token-one"); /* trailing newline stripped */

    /* Rotate the way kubelet does: a new file renamed over the old. */
    ck_assert_int_eq(tu_write_file(tmp, "token-two \r\n"), 0);
    ck_assert_int_eq(rename(tmp, path), 0);
    r.done = 0;
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(srv->auth, "Bearer token-two");

    /* A missing file fails the request locally, through done, and never
     * reaches the server; the error names the file, not a token. */
    ck_assert_int_eq(unlink(path), 0);
    r.done = 0;
    int hits = srv->hits;
    start(&o);
    ck_assert_int_eq(r.done, 0);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.err, PLB_HTTP_E_LOCAL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.text, path));
    ck_assert_int_eq(srv->hits, hits);

    /* An empty file is refused too. */
    ck_assert_int_eq(tu_write_file(path, "\n"), 0);
    r.done = 0;
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_int_eq(r.err, PLB_HTTP_E_LOCAL);
    ck_assert_int_eq(srv->hits, hits);

    /* Inline token. */
    o.bearer_token_file = NULL;
    o.bearer_token = "inline-token";
    r.done = 0;
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    ck_assert_str_eq(srv->auth, "Bearer inline-token");
    ck_assert_ptr_null(strstr(r.text, "inline-token"));
    result_clear(&r);
}
END_TEST

START_TEST(test_connect_timeout)
{
    int fillers[64], nfill = 0, port = 0;
    int lfd = srv_stuck_listener(&port, fillers, 64, &nfill);
    ck_assert_int_ge(lfd, 0);
    char stuck[64];
    snprintf(stuck, sizeof(stuck), "http://127.0.0.1:%d/", port);
    struct result r = {0};
    struct plb_http_opts o = opts_for(stuck, &r);
    o.connect_timeout_ms = 300;
    long long t0 = tu_now_ms();
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 10000));
    long long took = tu_now_ms() - t0;
    ck_assert_int_eq(r.err, PLB_HTTP_E_TIMEOUT);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_ge(took, 290);
    ck_assert_int_lt(took, 3000);
    for (int i = 0; i < nfill; i++)
        close(fillers[i]);
    close(lfd);
    result_clear(&r);
}
END_TEST

START_TEST(test_total_timeout)
{
    struct result r = {0};
    struct plb_http_opts o = opts_for(u("/hang"), &r);
    o.timeout_ms = 500;
    long long t0 = tu_now_ms();
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 10000));
    long long took = tu_now_ms() - t0;
    ck_assert_int_eq(r.err, PLB_HTTP_E_TIMEOUT);
    ck_assert_int_ge(took, 490);
    ck_assert_int_lt(took, 5000);
    ck_assert(r.total_time >= 0.49);
    ck_assert(r.connect_time > 0); /* it did connect: not a connect timeout */
    result_clear(&r);
}
END_TEST

/* ---- cancellation ---- */

static void
cancel_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    core_http_cancel(arg);
}

START_TEST(test_cancel_running_and_queued)
{
    struct result r = {0};
    struct plb_http_opts o = opts_for(u("/hang"), &r);
    int err;
    plb_http_req *running = core_http_request(hc, &o, &err);
    ck_assert_ptr_nonnull(running);
    /* Cancelled before the loop ever started it. */
    plb_http_req *queued = core_http_request(hc, &o, &err);
    ck_assert_ptr_nonnull(queued);
    ck_assert_uint_eq(core_httpc_active(hc), 2);
    core_http_cancel(queued);
    ck_assert_uint_eq(core_httpc_active(hc), 1);
    /* The other one reaches the server and hangs there; cancel it from a
     * timer callback. */
    ck_assert(run_until(base, &srv->hits, 1, 10000));
    ck_assert_uint_eq(core_httpc_active(hc), 1);
    struct timeval tv = {0, 1000};
    ck_assert_int_eq(event_base_once(base, -1, EV_TIMEOUT, cancel_cb, running, &tv), 0);
    run_for(base, 300);
    ck_assert_int_eq(srv->hits, 1); /* the queued one never went out */
    ck_assert_uint_eq(core_httpc_active(hc), 0);
    ck_assert_int_eq(r.done, 0);
}
END_TEST

START_TEST(test_cancel_in_done)
{
    struct result r = {.cancel_in_done = 1};
    struct plb_http_opts o = opts_for(u("/hello"), &r);
    start(&o);
    ck_assert(run_until(base, &r.done, 1, 5000));
    run_for(base, 50);
    ck_assert_int_eq(r.done, 1);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(core_httpc_active(hc), 0);
    result_clear(&r);
}
END_TEST

struct lines {
    struct result r;
    int n;
    int bad;
    size_t bytes;
    int cancel_at, abort_at;
    plb_http_req *req;
    struct plb_http_opts *chain; /* start this request from inside on_data */
    plb_http_req *chained;
};

static int
on_line(plb_http_req *req, const char *data, size_t len, void *arg)
{
    struct lines *l = arg;
    char want[SRV_LINE_LEN];
    srv_line(want, l->n);
    if (len != strlen(want) || memcmp(data, want, len) != 0)
        l->bad++;
    l->n++;
    l->bytes += len + 1;
    if (l->chain && l->n == 1) {
        int err;
        l->chained = core_http_request(hc, l->chain, &err);
        ck_assert_ptr_nonnull(l->chained);
    }
    if (l->cancel_at && l->n == l->cancel_at)
        core_http_cancel(req);
    return l->abort_at && l->n == l->abort_at;
}

static void
lines_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    struct lines *l = arg;
    record_done(req, resp, &l->r);
}

static struct plb_http_opts
lines_opts(struct lines *l, const char *path)
{
    struct plb_http_opts o = {.size = sizeof(o),
                              .url = u(path),
                              .done = lines_done,
                              .arg = l,
                              .body_mode = PLB_HTTP_LINES,
                              .on_data = on_line};
    return o;
}

START_TEST(test_lines_stream_bounded)
{
    enum { N = 100000 };
    struct lines l = {0};
    struct plb_http_opts o = lines_opts(&l, "/lines?n=100000");
    o.max_body = 4096;
    run_for(base, 10); /* settle lazy allocations of the loop */
    size_t before = core_alloc_live_bytes();
    core_alloc_peak_reset();
    start(&o);
    ck_assert(run_until(base, &l.r.done, 1, 60000));
    size_t peak = core_alloc_peak_bytes() - before;
    ck_assert_int_eq(l.r.err, PLB_HTTP_OK);
    ck_assert_int_eq(l.r.status, 200);
    ck_assert_int_eq(l.n, N);
    ck_assert_int_eq(l.bad, 0);
    ck_assert_uint_eq(l.bytes, (size_t)N * SRV_LINE_LEN);
    fprintf(stderr,
            "lines: %d lines, %zu bytes streamed, peak live growth %zu bytes "
            "(client, libcurl, libevent and the server together)\n",
            l.n, l.bytes, peak);
    /* 6.4 MB went through; the client, curl, and the server together never
     * held more than a few chunks of it. */
    ck_assert_uint_lt(peak, 512 * 1024);
    ck_assert_uint_lt(peak * 10, l.bytes);
    ck_assert_uint_eq(core_httpc_active(hc), 0);
    result_clear(&l.r);
}
END_TEST

START_TEST(test_lines_limits_and_abort)
{
    /* A line longer than max_body fails the request. */
    struct lines l = {0};
    struct plb_http_opts o = lines_opts(&l, "/lines?n=10");
    o.max_body = 10;
    start(&o);
    ck_assert(run_until(base, &l.r.done, 1, 5000));
    ck_assert_int_eq(l.r.err, PLB_HTTP_E_TOO_LARGE);
    ck_assert_int_eq(l.n, 0);

    /* on_data asking to stop: done reports ABORTED, no more lines. */
    result_clear(&l.r);
    memset(&l, 0, sizeof(l));
    o = lines_opts(&l, "/lines?n=5000");
    l.abort_at = 7;
    start(&o);
    ck_assert(run_until(base, &l.r.done, 1, 5000));
    ck_assert_int_eq(l.r.err, PLB_HTTP_E_ABORTED);
    ck_assert_int_eq(l.n, 7);
    result_clear(&l.r);
}
END_TEST

START_TEST(test_cancel_in_on_data)
{
    struct lines l = {0};
    struct plb_http_opts o = lines_opts(&l, "/lines?n=50000");
    /* The first line also starts another request from inside on_data. */
    struct result r2 = {0};
    struct plb_http_opts o2 = opts_for(u("/hello"), &r2);
    l.chain = &o2;
    l.cancel_at = 5;
    start(&o);
    ck_assert(run_until(base, &r2.done, 1, 10000));
    /* The server sees the connection go. */
    for (long long end = tu_now_ms() + 10000; srv->streams > 0 && tu_now_ms() < end;)
        run_for(base, 20);
    ck_assert_int_eq(srv->streams, 0);
    ck_assert_int_eq(l.n, 5); /* nothing after the cancel */
    ck_assert_int_eq(l.r.done, 0);
    ck_assert_int_eq(r2.status, 200);
    ck_assert_uint_eq(core_httpc_active(hc), 0);
    result_clear(&r2);
}
END_TEST

struct chunks {
    int calls;
    size_t bytes;
    int cancelled;
};

static int
on_chunk(plb_http_req *req, const char *data, size_t len, void *arg)
{
    struct chunks *c = arg;
    (void)data;
    ck_assert(!c->cancelled); /* never called after the cancel */
    c->calls++;
    c->bytes += len;
    if (c->bytes >= 100000) {
        core_http_cancel(req);
        c->cancelled = 1;
    }
    return 0;
}

static void
never_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    (void)req;
    (void)resp;
    (void)arg;
    ck_abort_msg("done called after cancel");
}

START_TEST(test_chunks_cancel)
{
    struct chunks c = {0};
    struct plb_http_opts o = {.size = sizeof(o),
                              .url = u("/lines?n=20000"),
                              .done = never_done,
                              .arg = &c,
                              .body_mode = PLB_HTTP_CHUNKS,
                              .on_data = on_chunk};
    start(&o);
    ck_assert(run_until(base, &c.cancelled, 1, 10000));
    run_for(base, 100);
    ck_assert_int_ge(c.bytes, 100000);
    ck_assert_int_lt(c.bytes, 20000 * SRV_LINE_LEN);
    ck_assert_uint_eq(core_httpc_active(hc), 0);
}
END_TEST

static int
count_only(plb_http_req *req, const char *data, size_t len, void *arg)
{
    struct chunks *c = arg;
    (void)req;
    (void)data;
    c->calls++;
    c->bytes += len;
    return 0;
}

START_TEST(test_free_in_flight)
{
    struct plb_http_opts o = {.size = sizeof(o), .url = u("/hang"), .done = never_done};
    int err;
    ck_assert_ptr_nonnull(core_http_request(hc, &o, &err));
    o.url = u("/lines?n=10000000");
    o.body_mode = PLB_HTTP_LINES;
    o.on_data = count_only;
    struct chunks c = {0};
    o.arg = &c;
    ck_assert_ptr_nonnull(core_http_request(hc, &o, &err));
    /* Both running, the stream part-way. */
    ck_assert(run_until(base, &c.calls, 1, 5000));
    ck_assert_uint_eq(core_httpc_active(hc), 2);
    o.url = u("/hello");
    o.body_mode = PLB_HTTP_BUFFER;
    ck_assert_ptr_nonnull(core_http_request(hc, &o, &err)); /* still queued */
    ck_assert_uint_eq(core_httpc_active(hc), 3);
    core_httpc_free(hc);
    hc = NULL;
    run_for(base, 100);
}
END_TEST

/* A burst to one host runs 8 BUFFER requests at a time; the rest wait in
 * the client, not in connections: a waiter starts when a slot is given
 * back (here by cancelling a running one), a cancelled waiter never goes
 * out, streams and other hosts are not held by the cap. */
START_TEST(test_per_host_cap)
{
    struct plb_http_opts o = {.size = sizeof(o), .url = u("/hang"), .done = never_done};
    plb_http_req *reqs[20];
    int err;
    for (int i = 0; i < 20; i++)
        ck_assert_ptr_nonnull(reqs[i] = core_http_request(hc, &o, &err));
    ck_assert(run_until(base, &srv->hits, 8, 10000));
    ck_assert_uint_eq(core_httpc_waiting(hc), 12);
    ck_assert_uint_eq(core_httpc_active(hc), 20);
    /* a stream to the same host is not held */
    struct chunks c = {0};
    struct plb_http_opts so = {.size = sizeof(so),
                               .url = u("/hang"),
                               .done = never_done,
                               .arg = &c,
                               .body_mode = PLB_HTTP_CHUNKS,
                               .on_data = count_only};
    ck_assert_ptr_nonnull(core_http_request(hc, &so, &err));
    ck_assert(run_until(base, &srv->hits, 9, 10000));
    ck_assert_uint_eq(core_httpc_waiting(hc), 12);
    /* another host (same server, by name) has its own slots */
    struct result r = {0};
    char other[256];
    snprintf(other, sizeof(other), "http://localhost:%d/hello", srv->port);
    struct plb_http_opts ho = opts_for(other, &r);
    char ct[64];
    snprintf(ct, sizeof(ct), "127.0.0.1:%d", srv->port);
    ho.connect_to = ct; /* no name lookup: "localhost" connects here */
    start(&ho);
    ck_assert(run_until(base, &r.done, 1, 10000));
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(core_httpc_waiting(hc), 12);
    /* a cancelled waiter is gone; a cancelled runner hands its slot on */
    core_http_cancel(reqs[19]);
    ck_assert_uint_eq(core_httpc_waiting(hc), 11);
    int before = srv->hits;
    core_http_cancel(reqs[0]);
    ck_assert_uint_eq(core_httpc_waiting(hc), 10);
    ck_assert(run_until(base, &srv->hits, before + 1, 10000));
    ck_assert_uint_eq(core_httpc_active(hc), 19); /* 18 /hang + the stream */
    result_clear(&r);
    /* teardown frees the client with all of them in flight */
}
END_TEST

/* Fencing: while a fence is closed its writes are refused (reads pass);
 * closing it stops every write not yet sent, for good (done says
 * PLB_HTTP_E_FENCED and the server never sees them, also after the slots
 * they waited for free up), and marks those already sent
 * (in_flight_at_close). */
struct fenced {
    int done, fenced, in_flight;
};

static void
fence_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    struct fenced *f = arg;
    (void)req;
    f->done++;
    f->fenced += core_http_resp_error(resp) == PLB_HTTP_E_FENCED;
    f->in_flight += core_http_resp_in_flight_at_close(resp);
}

START_TEST(test_fence_stops_unsent_writes)
{
    struct core_http_fence fence = {0};
    struct fenced sent = {0}, unsent = {0};
    struct result r = {0};
    int err = 0;
    /* closed: a write is refused, a read passes */
    struct plb_http_opts w = {
        .size = sizeof(w), .method = "PATCH", .url = u("/hang"), .body = "{}", .body_len = 2};
    w.done = fence_done;
    w.arg = &sent;
    ck_assert_ptr_null(core_http_request_fenced(hc, &w, &fence, &err));
    ck_assert_int_eq(err, -EPERM);
    struct plb_http_opts get = opts_for(u("/hello"), &r);
    ck_assert_ptr_nonnull(core_http_request_fenced(hc, &get, &fence, &err));
    ck_assert(run_until(base, &r.done, 1, 10000));
    ck_assert_int_eq(r.status, 200);
    result_clear(&r);
    int hits = srv->hits;

    /* open: 8 writes reach the server and hang there, the 9th waits for a
     * slot, the 10th is not even started when the fence closes */
    core_http_fence_open(&fence);
    w.timeout_ms = 300; /* the hung ones end by timeout */
    for (int i = 0; i < 8; i++)
        ck_assert_ptr_nonnull(core_http_request_fenced(hc, &w, &fence, &err));
    w.arg = &unsent;
    ck_assert_ptr_nonnull(core_http_request_fenced(hc, &w, &fence, &err));
    ck_assert(run_until(base, &srv->hits, hits + 8, 10000));
    ck_assert_uint_eq(core_httpc_waiting(hc), 1);
    ck_assert_ptr_nonnull(core_http_request_fenced(hc, &w, &fence, &err));
    ck_assert_uint_eq(core_http_fence_close(&fence, "test", "test"), 8);
    ck_assert_ptr_null(core_http_request_fenced(hc, &w, &fence, &err));
    ck_assert_int_eq(err, -EPERM);

    ck_assert(run_until(base, &sent.done, 8, 10000));
    ck_assert(run_until(base, &unsent.done, 2, 10000));
    ck_assert_int_eq(unsent.fenced, 2);
    ck_assert_int_eq(unsent.in_flight, 0);
    ck_assert_int_eq(sent.fenced, 0);
    ck_assert_int_eq(sent.in_flight, 8);
    ck_assert_int_eq(srv->hits, hits + 8);
    ck_assert_uint_eq(core_httpc_active(hc), 0);
}
END_TEST

/* 50 requests started at once share at most 8 connections, and all get
 * their answer. */
START_TEST(test_burst_shares_connections)
{
    struct result r = {0};
    struct plb_http_opts o = opts_for(u("/hello"), &r);
    for (int i = 0; i < 50; i++)
        start(&o);
    ck_assert(run_until(base, &r.done, 50, 20000));
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(srv->hits, 50);
    ck_assert_uint_le(core_httpc_connects(hc), 8);
    ck_assert_uint_ge(core_httpc_connects(hc), 1);
    ck_assert_uint_eq(core_httpc_waiting(hc), 0);
    ck_assert_uint_eq(core_httpc_active(hc), 0);
    result_clear(&r);
}
END_TEST

START_TEST(test_alloc_failures)
{
    /* Fail each allocation core_http_request makes (its own and libcurl's
     * easy set-up), one per round, until a round makes none fail: it returns
     * -ENOMEM and frees what it had, or the request works and done reports
     * once; the sanitizer and valgrind runs check that nothing leaks. (The
     * sweep stops at the loop: libcurl 7.88 itself crashes on some failed
     * allocations inside curl_multi_socket_action.) */
    char tok[4200], cert[4200];
    snprintf(tok, sizeof(tok), "%s/token", tmpdir);
    snprintf(cert, sizeof(cert), "%s/cert.pem", tmpdir);
    ck_assert_int_eq(tu_write_file(tok, "t0k\n"), 0);
    ck_assert_int_eq(tu_write_file(cert, "not used over plain http\n"), 0);
    const char *hdrs[] = {"X-Req: 1", NULL};
    int done_ok = 0, enomem = 0;
    unsigned long n;
    for (n = 1; n < 1000; n++) {
        struct result r = {0};
        struct plb_http_opts o = opts_for(u("/echo"), &r);
        o.method = "POST";
        o.body = "payload";
        o.body_len = 7;
        o.headers = hdrs;
        o.bearer_token_file = tok;
        o.cert_file = o.key_file = cert;
        o.ca_pem = "not a CA either";
        o.tls_server_name = "server.test";
        char to[64];
        snprintf(to, sizeof(to), "127.0.0.1:%d", srv->port);
        o.connect_to = to;
        unsigned long before = core_alloc_count();
        int err = 0;
        core_alloc_fail_at(n, 0);
        plb_http_req *req = core_http_request(hc, &o, &err);
        int hit = core_alloc_count() - before >= n;
        core_alloc_fail_at(0, 0);
        if (!req) {
            ck_assert(hit);
            ck_assert_int_eq(err, -ENOMEM);
            ck_assert_uint_eq(core_httpc_active(hc), 0);
            enomem++;
            continue;
        }
        ck_assert(run_until(base, &r.done, 1, 10000));
        ck_assert_int_eq(r.done, 1);
        ck_assert_int_eq(r.status, 200);
        ck_assert_str_eq(srv->auth, "Bearer t0k");
        done_ok++;
        result_clear(&r);
        if (!hit)
            break;
    }
    fprintf(stderr, "alloc failures in core_http_request: %lu rounds, %d -ENOMEM, %d fine\n", n,
            enomem, done_ok);
    ck_assert_uint_lt(n, 1000);
    ck_assert_int_gt(enomem, 20);
}
END_TEST

static Suite *
httpc_suite(void)
{
    Suite *s = suite_create("httpc");
    TCase *tc = tcase_create("http");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_get_headers);
    tcase_add_test(tc, test_post_and_methods);
    tcase_add_test(tc, test_404_and_redirect);
    tcase_add_test(tc, test_buffer_limit);
    tcase_add_test(tc, test_bad_options);
    tcase_add_test(tc, test_connect_refused);
    tcase_add_test(tc, test_bearer_token_rotation);
    tcase_add_test(tc, test_connect_timeout);
    tcase_add_test(tc, test_total_timeout);
    tcase_add_test(tc, test_cancel_running_and_queued);
    tcase_add_test(tc, test_cancel_in_done);
    tcase_add_test(tc, test_lines_stream_bounded);
    tcase_add_test(tc, test_lines_limits_and_abort);
    tcase_add_test(tc, test_cancel_in_on_data);
    tcase_add_test(tc, test_chunks_cancel);
    tcase_add_test(tc, test_free_in_flight);
    tcase_add_test(tc, test_per_host_cap);
    tcase_add_test(tc, test_fence_stops_unsent_writes);
    tcase_add_test(tc, test_burst_shares_connections);
    tcase_add_test(tc, test_alloc_failures);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    if (httpc_suite_init() < 0)
        return 1;
    return httpc_suite_run(httpc_suite());
}
