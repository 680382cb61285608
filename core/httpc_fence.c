/*
 * httpc_fence.c: the fences of gated instances' writes over the HTTP
 * client (see httpc.h for the contract, httpc_int.h for the files): a write
 * is refused while its fence is closed, stopped unsent when it closes, or
 * marked in flight when it had been sent. Calls the files below it.
 */
#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <strings.h>
#include <sys/queue.h>

#include "httpc_int.h"
#include "log.h"

static int
is_write(const char *method)
{
    return method && strcasecmp(method, "GET") != 0 && strcasecmp(method, "HEAD") != 0;
}

plb_http_req *
core_http_request_fenced(struct core_httpc *c, const struct plb_http_opts *o,
                         struct core_http_fence *fence, int *err)
{
    int dummy;
    if (!err)
        err = &dummy;
    if (!fence || !o || !httpc_opts_size_ok(o->size) || !is_write(o->method))
        return core_http_request(c, o, err);
    if (!fence->open) {
        *err = -EPERM;
        return NULL;
    }
    plb_http_req *req = core_http_request(c, o, err);
    if (!req)
        return NULL;
    req->fence = fence;
    LIST_INSERT_HEAD(&fence->writes, req, flink);
    return req;
}

/* Stop req, not yet sent, for good: done reports PLB_HTTP_E_FENCED from
 * the loop. */
static void
fence_stop(plb_http_req *req)
{
    struct core_httpc *c = req->c;
    req->fenced = 1;
    switch (req->state) {
    case REQ_QUEUED:
        if (req->waiting) {
            httpc_host_unwait(c, req);
            httpc_queue_push(c, req);
        }
        req->resp.error = PLB_HTTP_E_FENCED; /* on_kick finishes it */
        httpc_set_text(req, "not sent: the instance's gate closed");
        break;
    case REQ_RUNNING:
        req->failed = 1; /* the sweep removes it from curl */
        c->sweep = 1;
        break;
    case REQ_IN_DONE:
        return;
    }
    event_active(c->kick, 0, 0);
}

size_t
core_http_fence_close(struct core_http_fence *f, const char *inst, const char *mod)
{
    size_t sent = 0;
    f->open = 0;
    for (plb_http_req *req = LIST_FIRST(&f->writes); req; req = LIST_NEXT(req, flink)) {
        if (req->cancelled || req->fenced || req->state == REQ_IN_DONE)
            continue;
        if (req->sent) {
            char *url = NULL, *method = NULL;
            (void)curl_easy_getinfo(req->easy, CURLINFO_EFFECTIVE_URL, &url);
            (void)curl_easy_getinfo(req->easy, CURLINFO_EFFECTIVE_METHOD, &method);
            core_log(PLB_LOG_WARN, inst, mod,
                     "write in flight at gate close: %s %s (sent before the gate closed; its "
                     "completion says in_flight_at_close)",
                     method ? method : "?", url ? url : "?");
            req->resp.in_flight_at_close = 1;
            sent++;
        } else {
            fence_stop(req);
        }
    }
    return sent;
}

void
core_http_fence_open(struct core_http_fence *f)
{
    f->open = 1;
}

void
core_http_fence_detach(struct core_http_fence *f)
{
    while (!LIST_EMPTY(&f->writes))
        httpc_fence_unlink(LIST_FIRST(&f->writes));
}
