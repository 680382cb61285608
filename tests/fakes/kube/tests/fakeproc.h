/*
 * fakeproc: start and stop prismlb-fake-kube from a Check test, and talk to
 * it over HTTPS (client certificate) and to its admin endpoint with libcurl.
 */
#ifndef FK_FAKEPROC_H
#define FK_FAKEPROC_H

#include <stddef.h>

#include "testutil.h"

struct fake {
    struct tu_proc proc;
    char *dir; /* private temp dir: TLS material, state file, log (owned) */
    char server[8][128];
    int nservers;
    char admin[128];
    char log[4200];
};

struct http_res {
    long status;
    char *body; /* new, NUL-terminated (may be empty) */
    size_t len, cap;
    double seconds;
    int curl_code;
    size_t *line_end; /* offsets of the '\n' of each complete line (new) */
    size_t nlines, lines_cap;
};

/* A fresh private directory under $TMPDIR with a prefix of its own (new):
 * runs have lost prismlb-test-* directories to cleanups by other sessions
 * sharing /tmp. */
char *fake_private_dir(void);

/* Start the fake with --tls-dir and --state-file in a fresh temp dir plus
 * extra args (NULL-terminated, may be NULL); wait (bounded) until it is
 * ready. 0 or -1. */
int fake_start(struct fake *f, const char *const *extra);
/* The same, running the fake under a wrapper command (e.g. valgrind and
 * its options, NULL-terminated), waiting up to 60 s for it to be ready. */
int fake_start_wrapped(struct fake *f, const char *const *wrapper, const char *const *extra);
/* SIGTERM, wait; returns the wait status (0 = clean exit 0). Removes the
 * temp dir. */
int fake_stop(struct fake *f);
/* Wait (at most timeout_ms) for the fake started with --state-file state to
 * write "ready" there, then read its servers' and admin URLs into f.
 * 0, or -1 (not ready in time, or no server or admin URL). */
int fake_wait_ready(struct fake *f, const char *state, int timeout_ms);

/* One HTTPS request to server `srv` (path incl. query) with the client
 * certificate (use_cert) or a bearer token (token != NULL). body may be
 * NULL. timeout_ms bounds everything. 0 when an HTTP answer came, else -1
 * (res->curl_code says why). res->body must be freed with http_res_free. */
int fake_api(struct fake *f, int srv, const char *method, const char *path, const char *ctype,
             const char *body, int use_cert, const char *token, int timeout_ms,
             struct http_res *res);
/* Plain-HTTP admin request. */
int fake_admin(struct fake *f, const char *method, const char *path, const char *body,
               struct http_res *res);
void http_res_free(struct http_res *res);

#include <jansson.h>

/* A watch (or any streaming GET) driven by libcurl's multi interface so a
 * test can make other requests while it is open. */
struct watch_stream {
    void *multi, *easy, *headers;
    struct http_res res;
    int done;      /* transfer finished */
    int curl_code; /* its result once done */
};

/* Open GET path on server srv with the client certificate. 0 or -1. */
int ws_open(struct fake *f, int srv, const char *path, struct watch_stream *w);
/* Pump until at least n complete lines arrived, the stream ended, or
 * timeout_ms passed. Returns the number of complete lines. */
int ws_wait_lines(struct watch_stream *w, int n, int timeout_ms);
/* Pump until the stream ends or timeout_ms passes. 1 if it ended. */
int ws_wait_end(struct watch_stream *w, int timeout_ms);
/* Line i (0-based) parsed as JSON (new) or NULL. */
json_t *ws_event(struct watch_stream *w, int i);
void ws_close(struct watch_stream *w);
/* Parse a response body (new) or NULL. */
json_t *res_json(const struct http_res *r);
#endif
