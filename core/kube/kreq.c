/*
 * kreq: operations (plb_kube_op) and their HTTP requests. An operation is
 * linked into its client's list from core_kube_op_new until it finishes or
 * is cancelled; what happens between its requests is its kind's (struct
 * core_kube_kind in kube-internal.h). This file calls only the HTTP
 * client, the JSON parser and the kinds' tables: kclient.c, events.c and
 * informer.c call it, never the other way round.
 *
 * Fencing: a write kind is refused at creation while the client's fence is
 * closed, and each of its requests other than GET passes the fence
 * (core_http_request_fenced): a write stopped by a closing fence reports
 * PLB_HTTP_E_FENCED, one already sent reports in_flight_at_close.
 */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "httpc.h"
#include "kube-internal.h"
#include "kube.h"

plb_http_req *
core_kube_http(plb_kube *k, const char *method, const char *path, const char *ctype,
               const char *body, enum plb_http_body_mode mode, uint32_t timeout_ms,
               plb_http_data_cb on_data, plb_http_done_cb done, void *arg, int *err)
{
    char *url = core_kube_url_join(k->cfg.server, path);
    char *ct = ctype ? core_asprintf("Content-Type: %s", ctype) : NULL;
    const char *headers[4] = {"Accept: application/json", k->ua_header, ct, NULL};
    plb_http_req *req = NULL;

    if (!url || (ctype && !ct)) {
        *err = -ENOMEM;
        goto out;
    }
    /* plb_kube_opts.timeout_ms: every request but a watch. */
    if (timeout_ms == 0 && mode != PLB_HTTP_LINES)
        timeout_ms = k->timeout_ms;
    struct plb_http_opts ho = {
        .size = sizeof(ho),
        .method = method,
        .url = url,
        .headers = headers,
        .body = body,
        .body_len = body ? strlen(body) : 0,
        .ca_file = k->cfg.ca_file,
        .ca_pem = k->cfg.ca_pem,
        .cert_file = k->cfg.cert_file,
        .key_file = k->cfg.key_file,
        .cert_pem = k->cfg.cert_pem,
        .key_pem = k->cfg.key_pem,
        .bearer_token_file = k->cfg.token ? NULL : k->cfg.token_file,
        .bearer_token = k->cfg.token,
        .tls_server_name = k->cfg.tls_server_name,
        .connect_to = k->cfg.connect_to,
        .insecure_skip_verify = k->insecure,
        .timeout_ms = timeout_ms,
        .body_mode = mode,
        .max_body = 64u << 20,
        .on_data = on_data,
        .done = done,
        .arg = arg,
    };
    if (mode == PLB_HTTP_LINES)
        ho.max_body = 16u << 20; /* one watch event */
    req = core_http_request_fenced(k->httpc, &ho, k->fence, err);
out:
    core_free(url);
    core_free(ct);
    return req;
}

json_t *
core_kube_parse_body(const char *body, size_t len, const char **reason, const char **message)
{
    json_t *j = body && len ? core_kube_json_parse(body, len) : NULL;
    *reason = "";
    *message = "";
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (kind && strcmp(kind, "Status") == 0) {
        const char *r = json_string_value(json_object_get(j, "reason"));
        const char *m = json_string_value(json_object_get(j, "message"));
        *reason = r ? r : "";
        *message = m ? m : "";
    }
    return j;
}

enum plb_http_error
core_kube_answer(const plb_http_resp *resp, int *status, json_t **obj, const char **reason,
                 const char **message)
{
    size_t len = 0;
    const char *body = core_http_resp_body(resp, &len);
    enum plb_http_error e = core_http_resp_error(resp);
    *status = core_http_resp_status(resp);
    *obj = NULL;
    if (e != PLB_HTTP_OK) {
        *reason = "";
        *message = core_http_resp_error_text(resp);
        return e;
    }
    *obj = core_kube_parse_body(body, len, reason, message);
    return PLB_HTTP_OK;
}

plb_kube_op *
core_kube_op_new(plb_kube *k, const struct core_kube_kind *kind, plb_kube_done_cb done, void *arg,
                 int *err)
{
    if (kind->write && k->fence && !k->fence->open) {
        *err = -EPERM;
        return NULL;
    }
    plb_kube_op *op = core_calloc(1, sizeof(*op));
    if (!op) {
        *err = -ENOMEM;
        return NULL;
    }
    op->k = k;
    op->kind = kind;
    op->done = done;
    op->arg = arg;
    op->next = k->ops;
    if (k->ops)
        k->ops->prev = op;
    k->ops = op;
    return op;
}

void
core_kube_op_free(plb_kube_op *op)
{
    plb_kube *k = op->k;
    if (op->prev)
        op->prev->next = op->next;
    else if (k->ops == op)
        k->ops = op->next;
    if (op->next)
        op->next->prev = op->prev;
    if (op->kind->release)
        op->kind->release(op);
    core_free(op->path);
    core_free(op->body);
    core_free(op);
}

void
core_kube_op_finish(plb_kube_op *op, int status, enum plb_http_error error, const char *reason,
                    const char *message, json_t *obj)
{
    plb_kube *k = op->k;
    const struct core_kube_kind *kind = op->kind;
    struct plb_kube_result r = {
        .size = sizeof(r),
        .status = status,
        .error = error,
        .reason = reason ? reason : "",
        .message = message ? message : "",
        .obj = KOBJ(obj),
        .in_flight_at_close = op->in_flight_at_close,
    };
    if (kind->leave)
        kind->leave(op);
    op->in_done = 1;
    k->depth++;
    if (op->done)
        op->done(op, &r, op->arg);
    k->depth--;
    core_kube_op_free(op);
    if (k->dying) {
        if (k->depth == 0) {
            k->dying = 0;
            k->destroy(k);
        }
        return;
    }
    if (kind->resume)
        kind->resume(k);
}

void
core_kube_op_fail(plb_kube_op *op, int rc)
{
    if (rc == -EPERM)
        core_kube_op_finish(op, 0, PLB_HTTP_E_FENCED, "", "not sent: the instance's gate closed",
                            NULL);
    else
        core_kube_op_finish(op, 0, PLB_HTTP_E_LOCAL, "", strerror(-rc), NULL);
}

/* The done callback of every operation's request (arg: the op). */
static void
op_http_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    plb_kube_op *op = arg;
    int status;
    json_t *obj;
    const char *reason, *message;
    (void)req;

    op->req = NULL;
    op->in_flight_at_close = core_http_resp_in_flight_at_close(resp);
    enum plb_http_error e = core_kube_answer(resp, &status, &obj, &reason, &message);
    if (e != PLB_HTTP_OK) {
        if (op->kind->unanswered && op->kind->unanswered(op, e))
            return;
        core_kube_op_finish(op, status, e, reason, message, NULL);
        return;
    }
    if (op->kind->response)
        op->kind->response(op, status, obj, reason, message);
    else
        core_kube_op_finish(op, status, PLB_HTTP_OK, reason, message, obj);
    json_decref(obj);
}

int
core_kube_op_send(plb_kube_op *op)
{
    int err = 0;
    op->req = core_kube_http(op->k, op->method, op->path, op->body ? op->ctype : NULL, op->body,
                             PLB_HTTP_BUFFER, 0, NULL, op_http_done, op, &err);
    return op->req ? 0 : (err ? err : -ENOMEM);
}

void
core_kube_cancel(plb_kube_op *op)
{
    if (!op || op->in_done)
        return;
    plb_kube *k = op->k;
    const struct core_kube_kind *kind = op->kind;
    core_http_cancel(op->req);
    op->req = NULL;
    if (kind->leave)
        kind->leave(op);
    core_kube_op_free(op);
    if (kind->resume)
        kind->resume(k);
}
