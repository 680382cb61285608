/*
 * httpd: small HTTP/1.1 servers on libevent's evhttp, for probes, metrics
 * and other module endpoints.
 *
 * These are the internal functions behind the "HTTP servers" section of
 * struct plb_host; the host table wraps them one to one. Everything runs on
 * the loop thread.
 *
 * Limits per server: request headers up to CORE_HTTPD_MAX_HEADERS bytes,
 * bodies up to CORE_HTTPD_MAX_BODY bytes (libevent answers 413 / 400
 * beyond), connections idle for CORE_HTTPD_IDLE_TIMEOUT_S seconds closed.
 * A connection waiting for a request (just accepted, or after a reply on a
 * kept-alive connection) has CORE_HTTPD_REQUEST_TIMEOUT_MS to send the
 * whole request head, however slowly its bytes arrive, or it is closed. At
 * most CORE_HTTPD_MAX_CONNS connections: one more closes the connection
 * that has waited for a request the longest, or, when every other one has
 * a request in a handler, is answered a canned 503 and closed. At most 16
 * connections are accepted per wakeup of the loop, so that a flood of
 * clients never holds up the loop's other events.
 *
 * Methods: every method libevent 2.1 parses (GET, POST, HEAD, PUT, DELETE,
 * OPTIONS, TRACE, CONNECT, PATCH) reaches the handler; libevent 2.1 rejects
 * other method names itself with 400 before any handler runs.
 */
#ifndef PRISMLB_HTTPD_H
#define PRISMLB_HTTPD_H

#include <stddef.h>
#include <stdint.h>

#include "prismlb/module.h"

struct event_base;

#define CORE_HTTPD_MAX_HEADERS (16 * 1024)
#define CORE_HTTPD_MAX_BODY (1024 * 1024)
#define CORE_HTTPD_IDLE_TIMEOUT_S 30
#define CORE_HTTPD_REQUEST_TIMEOUT_MS 10000
#define CORE_HTTPD_MAX_CONNS 256

/* Counters of a server since it was made (conns: open right now). */
struct core_http_stats {
    uint64_t accepted;      /* sockets accepted */
    uint64_t refused;       /* answered the canned 503 over the cap */
    uint64_t evicted;       /* closed while waiting, to make room */
    uint64_t timed_out;     /* closed past the request timeout */
    uint64_t accept_errors; /* accept() failures (each pauses accepting) */
    int conns;
};

/* A server listening on addr:port (an IP literal; IPv6 with IPV6_V6ONLY;
 * port 0 picks an ephemeral port) on base (borrowed; must outlive the
 * server). No routes yet: every request gets 404 until core_http_route.
 * New; free with core_http_server_free. NULL on failure with *err (may be
 * NULL) = -errno: -EINVAL bad address or base, -EADDRINUSE, -ENOMEM, ... */
plb_http_server *core_http_server_new(struct event_base *base, const char *addr, int port,
                                      int *err);

/* Change the idle timeout (default CORE_HTTPD_IDLE_TIMEOUT_S) for
 * connections accepted from now on: a connection that sends no complete
 * request, or whose reply cannot be written, for that long is closed.
 * 0 or -EINVAL (NULL server, seconds <= 0). */
int core_http_server_set_idle_timeout(plb_http_server *s, int seconds);

/* Set the connection cap and the request timeout (defaults
 * CORE_HTTPD_MAX_CONNS, CORE_HTTPD_REQUEST_TIMEOUT_MS) from now on. 0 or
 * -EINVAL (NULL server, max_conns < 1, request_timeout_ms < 1). */
int core_http_server_set_limits(plb_http_server *s, int max_conns, int64_t request_timeout_ms);

/* Copy s's counters into *st (both borrowed). NULL s or st: nothing. */
void core_http_server_stats(const plb_http_server *s, struct core_http_stats *st);

/* The bound port; -1 for NULL. */
int core_http_server_port(const plb_http_server *s);

/* Route path to h with arg (borrowed, passed back as is). path (copied)
 * starts with '/'; a path ending in '/' is a prefix that matches itself and
 * everything below it, any other path matches exactly (the raw request
 * path, without the query, not percent-decoded). The longest matching route
 * wins. 0, -EINVAL (NULL argument, path not starting with '/'), -EEXIST
 * (path already routed) or -ENOMEM. */
int core_http_route(plb_http_server *s, const char *path, plb_http_handler h, void *arg);

/* Stop listening, close every connection and free s. Exchanges not yet
 * replied to are freed too: the caller must not reply to them afterwards
 * (cancel whatever would). NULL is fine. Safe from inside a handler of s
 * (the free then completes when the handler returns). */
void core_http_server_free(plb_http_server *s);

/* Request accessors. Each result is borrowed until x is replied to.
 * Method: "GET", "HEAD", ... Path: the raw path without the query ("/" when
 * the request has none). Query: the raw text after '?', "" when none.
 * Header: the first value of the named request header (case-insensitive),
 * or NULL; also NULL once the client has gone away. */
const char *core_http_method(plb_http_exchange *x);
const char *core_http_path(plb_http_exchange *x);
const char *core_http_query(plb_http_exchange *x);
const char *core_http_header(plb_http_exchange *x, const char *name);

/* Answer x, exactly once, now (inside the handler) or later from any loop
 * callback; frees x. status 100..599 (others become 500). content_type (NULL
 * for no Content-Type header), body (len bytes, copied; may be NULL when len
 * is 0) and headers (NULL-terminated "Name: value" lines, copied; may be
 * NULL) are borrowed for the call. The core sets Content-Length itself
 * (caller Content-Length and Transfer-Encoding lines are ignored); a HEAD
 * request gets every header, including the Content-Length of the body it
 * would have had, and no body. Malformed header lines are skipped with a
 * warning. If the client went away meanwhile, the reply is dropped quietly
 * and x is still freed. */
void core_http_reply(plb_http_exchange *x, int status, const char *content_type, const void *body,
                     size_t len, const char *const *headers);

#endif
