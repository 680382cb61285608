/*
 * Shared helpers of the HTTP client suites: a recording done callback and a
 * bounded loop runner. Header-only (static functions) so each suite is one
 * executable.
 */
#ifndef PRISMLB_TEST_HTTPC_COMMON_H
#define PRISMLB_TEST_HTTPC_COMMON_H

#include <check.h>
#include <curl/curl.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "httpc.h"
#include "testutil.h"

/* What a done callback saw (the response itself is borrowed). */
struct result {
    int done;
    int status;
    enum plb_http_error err;
    char text[512];
    char *body;
    size_t body_len;
    const char *want_hdr; /* a header to record */
    char hdr[256];
    int hdr_found;
    double connect_time, total_time;
    int cancel_in_done; /* call core_http_cancel on the request from done */
};

static inline void
result_clear(struct result *r)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
}

static void
record_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    struct result *r = arg;
    size_t len = 0;
    const char *body = core_http_resp_body(resp, &len);
    r->done++;
    r->status = core_http_resp_status(resp);
    r->err = core_http_resp_error(resp);
    snprintf(r->text, sizeof(r->text), "%s", core_http_resp_error_text(resp));
    free(r->body);
    r->body = malloc(len + 1);
    ck_assert_ptr_nonnull(r->body);
    memcpy(r->body, body, len);
    r->body[len] = '\0';
    r->body_len = len;
    if (r->want_hdr) {
        const char *h = core_http_resp_header(resp, r->want_hdr);
        r->hdr_found = h != NULL;
        snprintf(r->hdr, sizeof(r->hdr), "%s", h ? h : "");
    }
    r->connect_time = core_http_resp_connect_time(resp);
    r->total_time = core_http_resp_total_time(resp);
    if (r->cancel_in_done)
        core_http_cancel(req); /* must be a harmless no-op */
}

/* Run base until *flag >= want or ms pass. Returns 1 if reached. */
static inline int
run_until(struct event_base *base, const int *flag, int want, int ms)
{
    long long end = tu_now_ms() + ms;
    while (*flag < want && tu_now_ms() < end) {
        struct timeval tv = {0, 10000};
        int tries = 0; /* an injected allocation failure may hit it once */
        while (event_base_loopexit(base, &tv) != 0)
            ck_assert_int_lt(++tries, 3);
        ck_assert_int_ge(event_base_dispatch(base), 0);
    }
    return *flag >= want;
}

static inline void
run_for(struct event_base *base, int ms)
{
    int never = 0;
    (void)run_until(base, &never, 1, ms);
}

static inline struct plb_http_opts
opts_for(const char *url, struct result *r)
{
    struct plb_http_opts o = {.size = sizeof(o), .url = url, .done = record_done, .arg = r};
    return o;
}

/* The end of a fixture's setup, once its servers are on base: the client
 * on base (new) into *hc and a private directory (new) into *tmpdir;
 * fails the test when either cannot be had. */
static inline void
httpc_fixture_client(struct event_base *base, struct core_httpc **hc, char **tmpdir)
{
    *hc = core_httpc_new(base);
    ck_assert_ptr_nonnull(*hc);
    *tmpdir = tu_mkdtemp();
    ck_assert_ptr_nonnull(*tmpdir);
}

/* The end of a fixture's teardown, once the client and the servers are
 * freed: base freed, tmpdir removed and freed (both stolen). */
static inline void
httpc_fixture_free(struct event_base *base, char *tmpdir)
{
    event_base_free(base);
    tu_rmrf(tmpdir);
    free(tmpdir);
}

/* In a suite's main, before the runner forks: the core's allocation hooks
 * in the libraries, and SIGPIPE ignored, as the daemon has both (the
 * in-process TLS server writes through OpenSSL's socket BIO, which raises
 * SIGPIPE on a peer that hung up). 0 or -1. */
static inline int
httpc_suite_init(void)
{
    if (core_alloc_install_library_hooks() < 0)
        return -1;
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* Run s (tu_run_suite: EXIT_SUCCESS or EXIT_FAILURE), then free libcurl's
 * global state. */
static inline int
httpc_suite_run(Suite *s)
{
    int rc = tu_run_suite(s);
    curl_global_cleanup();
    return rc;
}

#endif
