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
    size_t len;
    double seconds;
    int curl_code;
};

/* Start the fake with --tls-dir and --state-file in a fresh temp dir plus
 * extra args (NULL-terminated, may be NULL); wait (bounded) until it is
 * ready. 0 or -1. */
int fake_start(struct fake *f, const char *const *extra);
/* SIGTERM, wait; returns the wait status (0 = clean exit 0). Removes the
 * temp dir. */
int fake_stop(struct fake *f);

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

#endif
