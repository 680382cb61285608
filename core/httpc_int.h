/*
 * httpc_int.h: private to the HTTP client (httpc*.c). The request and
 * client records and what each file offers the others, from the bottom up:
 *
 *   httpc_recv.c   the answer: the curl callbacks that take the status
 *                  line, headers and body, and the response accessors
 *   httpc_tls.c    request set-up: options and their size, method, routing,
 *                  TLS trust and credentials, files, the per-host key
 *   httpc.c        requests and the multi driver on the loop; the client
 *   httpc_fence.c  fences of gated instances' writes
 *
 * Each file calls only the ones above it in this list.
 */
#ifndef PRISMLB_HTTPC_INT_H
#define PRISMLB_HTTPC_INT_H

#include <curl/curl.h>
#include <stddef.h>
#include <sys/queue.h>

#include "httpc.h"

#define HTTPC_CONNECT_MS_DEFAULT 10000
#define HTTPC_MAX_BODY_DEFAULT ((size_t)16 << 20)
#define HTTPC_MAX_TOKEN_FILE ((size_t)64 << 10)
#define HTTPC_MAX_PEM_FILE ((size_t)1 << 20)
#define HTTPC_MAX_HEADER_BYTES ((size_t)64 << 10)
#define HTTPC_LINE_KEEP ((size_t)64 << 10) /* partial-line buffer kept between lines */
#define HTTPC_MAX_PER_HOST 8               /* BUFFER requests running per host */
/* Idle connections kept for reuse. curl's default, four per transfer in
 * the multi handle, drops to a few just as a burst's first transfers end
 * together, and the next ones would open new connections. */
#define HTTPC_MAX_IDLE 32L

enum req_state {
    REQ_QUEUED,
    REQ_RUNNING,
    REQ_IN_DONE,
};

struct buf {
    char *p;
    size_t len, cap;
};

struct plb_http_resp {
    int status;
    enum plb_http_error error;
    char text[CURL_ERROR_SIZE + 128];
    struct buf body;    /* BUFFER mode */
    struct buf headers; /* "name\0value\0" pairs of the last response */
    double connect_time, total_time;
    int in_flight_at_close; /* a write sent before its fence closed */
};

struct hostq; /* see below */

struct plb_http_req {
    struct core_httpc *c;
    LIST_ENTRY(plb_http_req) link; /* c->reqs: every request of c */
    struct plb_http_req *qnext;    /* c's start queue, or its host's wait list */
    struct hostq *hq;              /* BUFFER requests: their host (a reference) */
    int slot;                      /* holds one of hq's slots */
    int waiting;                   /* QUEUED on hq's wait list, not c's queue */
    enum req_state state;
    int cancelled;
    int failed;                     /* the socket callback could not watch its socket */
    struct core_http_fence *fence;  /* a write of a fenced instance, or NULL */
    LIST_ENTRY(plb_http_req) flink; /* fence->writes */
    int sent;                       /* a connection began the request */
    int fenced;                     /* stopped by its fence before it was sent */
    int head;                       /* header lines: 0 or 2 (after a 1xx) a status line next, 1 the
                                     * fields, 3 a 1xx's fields */
    int https;
    int h2;                        /* TLS chose HTTP/2 (ALPN) for this request's connection */
    enum plb_http_error abort_err; /* why a callback stopped the transfer */
    const char *abort_text;
    CURL *easy;
    struct curl_slist *headers; /* may hold the bearer token: scrubbed */
    struct curl_slist *connect_to;
    enum plb_http_body_mode mode;
    size_t max_body;
    plb_http_data_cb on_data;
    plb_http_done_cb done;
    void *arg;
    struct buf line; /* LINES: the partial line */
    char errbuf[CURL_ERROR_SIZE];
    struct plb_http_resp resp;
};

/* One host's BUFFER requests: how many hold a slot, and who waits for one. */
struct hostq {
    struct hostq *next;
    char *key;    /* "scheme://host:port" or "...>connect_to" */
    size_t refs;  /* requests pointing here */
    size_t slots; /* requests holding a slot */
    plb_http_req *whead, *wtail;
    size_t nwait;
};

struct sockinfo {
    LIST_ENTRY(sockinfo) link; /* c->socks */
    struct event *ev;
    curl_socket_t fd;
};

struct core_httpc {
    struct event_base *base;
    CURLM *multi;
    struct event *timer; /* the one non-repeating curl timer */
    struct event *kick;  /* starts queued requests */
    LIST_HEAD(, plb_http_req) reqs;
    struct plb_http_req *qhead, *qtail;
    size_t nqueued;
    size_t active;
    struct hostq *hosts;
    size_t nwaiting; /* requests waiting for a host slot */
    size_t connects; /* connections opened, over every transfer */
    LIST_HEAD(, sockinfo) socks;
    int in_curl; /* inside curl_multi_socket_action */
    int sweep;   /* a running request was cancelled inside it */
};

/* --- httpc_recv.c --- */
/* Free b's storage (zeroed first when scrub) and empty it. */
void httpc_buf_free(struct buf *b, int scrub);
/* The response's error text, printf-style. */
void httpc_set_text(plb_http_req *req, const char *fmt, ...) PLB_PRINTF(2, 3);
/* Note why a curl callback stops the transfer (the first reason stays);
 * returns 0, what the callback returns to curl to stop it. */
size_t httpc_req_abort(plb_http_req *req, enum plb_http_error err, const char *text);
/* curl's CURLOPT_WRITEFUNCTION, HEADERFUNCTION and PREREQFUNCTION; ud is
 * the request (borrowed). */
size_t httpc_on_write(char *p, size_t size, size_t nmemb, void *ud);
size_t httpc_on_header(char *p, size_t size, size_t nmemb, void *ud);
int httpc_on_prereq(void *ud, char *primary_ip, char *local_ip, int primary_port, int local_port);

/* --- httpc_tls.c --- */
/* o copied into full, the daemon's size: a field counts only when it lies
 * wholly within o->size, the others are zero. full, or NULL when o is NULL
 * or smaller than 3.0's options. */
const struct plb_http_opts *httpc_opts_full(const struct plb_http_opts *o,
                                            struct plb_http_opts *full);
/* 1 when size is that of some version of the options (3.0's or more). */
int httpc_opts_size_ok(size_t size);
/* 1 when the options (of full size) make a request: url, done, mode. */
int httpc_valid_opts(const struct plb_http_opts *o);
/* Everything of o but the files into req's easy handle (the callbacks of
 * httpc_recv.c included). 0 or -errno. */
int httpc_setup_easy(plb_http_req *req, const struct plb_http_opts *o);
/* Read the files o names into req. 0, -ENOMEM, or 1 when a file is
 * unusable (req->resp has the local error). */
int httpc_setup_files(plb_http_req *req, const struct plb_http_opts *o);
/* The per-host cap's key of a request (new, core_free), or NULL with *rc
 * -EINVAL or -ENOMEM. */
char *httpc_host_key(const char *url, const char *connect_to, int *rc);

/* --- httpc.c --- */
/* Append req to c's start queue. */
void httpc_queue_push(struct core_httpc *c, plb_http_req *req);
/* Take req off its host's wait list. */
void httpc_host_unwait(struct core_httpc *c, plb_http_req *req);
/* Take req off its fence's list (none: nothing). */
void httpc_fence_unlink(plb_http_req *req);

#endif
