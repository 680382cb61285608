/*
 * httpc: the core's asynchronous HTTP client (internal).
 *
 * libcurl multi driven by the daemon's libevent base, as curl's
 * docs/examples/multi-event.c and hiperfifo.c do it: a socket callback keeps
 * one persistent event per socket, a timer callback keeps one non-repeating
 * timer, and curl_multi_info_read is drained after every
 * curl_multi_socket_action. Nothing here blocks the loop except reading the
 * small files a request names (bearer token, client certificate and key),
 * which are read in full, bounded, when the request starts.
 *
 * plb_host's HTTP client functions wrap these one to one; the semantics are
 * those of struct plb_http_opts and the "HTTP client" section of
 * prismlb/module.h. Beyond them:
 *  - done is never called from inside core_http_request: even a request that
 *    fails before it starts (an unreadable token file) reports through done
 *    from the event loop;
 *  - core_http_cancel may be called from any callback (on_data, done, or a
 *    callback of another request); done is never called after it, and a
 *    request not yet sent is never sent afterwards (also when the cancel
 *    comes from inside curl, where removal waits for the sweep: curl's
 *    pre-request callback refuses it);
 *  - redirects are not followed, proxies from the environment are ignored,
 *    and only http:// and https:// are allowed;
 *  - in LINES mode the lines handed to on_data are not NUL-terminated; a last
 *    line without '\n' is delivered when the body ends cleanly;
 *  - in BUFFER mode the body is NUL-terminated (not counted in len); after
 *    an error it holds what arrived before it, if anything;
 *  - with tls_server_name, SNI and verification use that name while the TCP
 *    connection goes to the URL's host (or connect_to); the Host header stays
 *    the URL's unless the caller sets one.
 * Everything runs on the loop thread.
 */
#ifndef PRISMLB_HTTPC_H
#define PRISMLB_HTTPC_H

#include <stddef.h>
#include <sys/queue.h>

#include "prismlb/module.h"

struct event_base;
struct core_httpc;

/* A client on base (borrowed; must outlive the client). New; free with
 * core_httpc_free. NULL when out of memory or libcurl fails. */
struct core_httpc *core_httpc_new(struct event_base *base);

/* Cancel every request still running or queued (their done callbacks are not
 * called) and free the client. NULL is a no-op. Not from inside a callback of
 * one of its requests. */
void core_httpc_free(struct core_httpc *c);

/* Start a request described by o (borrowed for the call; every string and
 * the body are copied). New handle, valid until its done callback returns or
 * core_http_cancel is called; the client frees it. NULL with *err = -EINVAL
 * for bad options (no url or done, url not http(s), on_data missing in
 * CHUNKS/LINES, bad connect_to, o->size of no version) or -ENOMEM. Files named in
 * o are read now; a file that cannot be read makes done report
 * PLB_HTTP_E_LOCAL from the loop. */
plb_http_req *core_http_request(struct core_httpc *c, const struct plb_http_opts *o, int *err);

/* Cancel req (borrowed; freed here or, when called from inside req's own
 * callbacks, as soon as they return). done is not called afterwards. NULL
 * is fine. */
void core_http_cancel(plb_http_req *req);

/* Fences. The writes (requests with a method other than GET and HEAD) of
 * one gated instance go through its fence (plb_ctx.fence, see gates.c).
 * While the fence is closed a new write is refused; closing it stops every
 * write of it that was not yet sent, and marks those already sent. "Sent"
 * means curl had a connection for it and began the request on it (the
 * CURLOPT_PREREQFUNCTION point): from then on the server may act on it.
 * A zeroed fence is closed. */
struct core_http_fence {
    int open;                         /* writes pass */
    LIST_HEAD(, plb_http_req) writes; /* running or queued, linked through the request */
};

/* core_http_request for a request of a fenced instance (fence borrowed,
 * may be NULL: no fence). A write while fence is closed: NULL with
 * *err = -EPERM, nothing sent. Otherwise as core_http_request; a write is
 * linked to the fence until it is freed. */
plb_http_req *core_http_request_fenced(struct core_httpc *c, const struct plb_http_opts *o,
                                       struct core_http_fence *fence, int *err);

/* Close fence: later writes are refused; each write not yet sent is
 * stopped, never to be sent, and its done reports PLB_HTTP_E_FENCED from
 * the loop; each write already sent goes on and its response says
 * in_flight_at_close (core_http_resp_in_flight_at_close). Returns how many
 * were already sent, each logged ("write in flight at gate close", with
 * the method and URL) as instance inst of module mod. Safe from any
 * callback. */
size_t core_http_fence_close(struct core_http_fence *f, const char *inst, const char *mod);
/* Open fence: writes pass again. */
void core_http_fence_open(struct core_http_fence *f);
/* Unlink every request from f (f is about to be freed); they go on,
 * unfenced. */
void core_http_fence_detach(struct core_http_fence *f);

/* Response accessors; r is borrowed for the done call and so are the
 * results. */
int core_http_resp_status(const plb_http_resp *r); /* 0 if none */
enum plb_http_error core_http_resp_error(const plb_http_resp *r);
const char *core_http_resp_error_text(const plb_http_resp *r);        /* "" if OK */
const char *core_http_resp_body(const plb_http_resp *r, size_t *len); /* BUFFER */
const char *core_http_resp_header(const plb_http_resp *r, const char *name);
double core_http_resp_connect_time(const plb_http_resp *r);
double core_http_resp_total_time(const plb_http_resp *r);
/* 1 when the request is a write that had been sent when its fence closed:
 * it may have taken effect although its instance is fenced now. */
int core_http_resp_in_flight_at_close(const plb_http_resp *r);

/* Requests queued or running (for tests and shutdown checks). */
size_t core_httpc_active(const struct core_httpc *c);
/* Requests waiting for a slot of their host: at most 8 BUFFER requests
 * run per host (scheme, host, port, connect_to) at a time, the others wait
 * in arrival order, and their timeouts start when they do. Streams (CHUNKS,
 * LINES) are not counted. */
size_t core_httpc_waiting(const struct core_httpc *c);
/* Connections opened so far, over every finished transfer. */
size_t core_httpc_connects(const struct core_httpc *c);

#endif
