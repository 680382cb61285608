/*
 * kclient: the Kubernetes API client. Configuration (kubeconfig or
 * in-cluster, server override), requests on the core HTTP client with the
 * client's TLS material and credentials, and the write verbs: get, create,
 * update, patch, delete with preconditions, read-modify-write. Every call
 * is asynchronous: an operation (plb_kube_op) completes through its done
 * callback, from the loop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "httpc.h"
#include "kube-internal.h"
#include "rfile.h"
#include "kube.h"
#include "log.h"

#define KUBE_DEFAULT_TIMEOUT_MS 30000
#define KUBE_MODIFY_ATTEMPTS 5

static int
seterr(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return 0;
}

/* Configuration as opts ask: explicit kubeconfig, in-cluster, $KUBECONFIG,
 * ~/.kube/config. */
static int
resolve_config(plb_kube *k, const struct plb_kube_opts *o, char *err, size_t errlen)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    char path[4096];
    int rc;

    if (o->in_cluster || (!o->kubeconfig && host && *host)) {
        rc = core_kube_config_in_cluster(&k->cfg, host, port, o->sa_dir, err, errlen);
        if (rc)
            return rc;
        /* The namespace file is optional and small. */
        const char *dir = o->sa_dir ? o->sa_dir : "/var/run/secrets/kubernetes.io/serviceaccount";
        snprintf(path, sizeof(path), "%s/namespace", dir);
        char *text = NULL;
        size_t len = 0;
        if (core_file_read(path, 4096, &text, &len, NULL, 0) == 0) {
            text[strcspn(text, "\r\n")] = '\0';
            if (text[0] && strlen(text) < 254 && !(k->cfg.ns = core_strdup(text))) {
                core_free(text);
                return -ENOMEM;
            }
            core_free(text);
        }
        return 0;
    }
    const char *file = o->kubeconfig;
    if (!file) {
        const char *env = getenv("KUBECONFIG");
        const char *home = getenv("HOME");
        if (env && *env) {
            size_t n = strcspn(env, ":");
            snprintf(path, sizeof(path), "%.*s", (int)n, env);
        } else if (home && *home) {
            snprintf(path, sizeof(path), "%s/.kube/config", home);
        } else {
            seterr(err, errlen, "no kubeconfig: not in a cluster, KUBECONFIG and HOME unset");
            return -ENOENT;
        }
        file = path;
    }
    return core_kube_config_load(&k->cfg, file, o->context, err, errlen);
}

plb_kube *
core_kube_new(struct core_httpc *httpc, struct event_base *base, plb_ctx *ctx,
              const struct plb_kube_opts *o, const char *version, char *err, size_t errlen)
{
    plb_kube *k = NULL;
    int rc;

    if (err && errlen)
        err[0] = '\0';
    if (!httpc || !base || !o ||
        o->size < offsetof(struct plb_kube_opts, insecure_skip_verify) +
                      sizeof(o->insecure_skip_verify)) {
        seterr(err, errlen, "bad arguments");
        return NULL;
    }
    k = core_calloc(1, sizeof(*k));
    if (!k)
        goto oom;
    k->httpc = httpc;
    k->base = base;
    k->ctx = ctx;
    k->timeout_ms = o->timeout_ms ? o->timeout_ms : KUBE_DEFAULT_TIMEOUT_MS;
    rc = resolve_config(k, o, err, errlen);
    if (rc)
        goto fail;
    if (o->server && *o->server) {
        if (strncmp(o->server, "https://", 8) != 0 && strncmp(o->server, "http://", 7) != 0) {
            seterr(err, errlen, "server override must be an http(s) URL");
            goto fail;
        }
        size_t n = strlen(o->server);
        while (n > 0 && o->server[n - 1] == '/')
            n--;
        core_free(k->cfg.server);
        if (!(k->cfg.server = core_strndup(o->server, n)))
            goto oom;
    }
    if (o->tls_server_name && *o->tls_server_name) {
        core_free(k->cfg.tls_server_name);
        if (!(k->cfg.tls_server_name = core_strdup(o->tls_server_name)))
            goto oom;
    }
    k->insecure = o->insecure_skip_verify || k->cfg.insecure;
    k->ua_header = core_asprintf("User-Agent: %s", o->user_agent ? o->user_agent : "prismlb");
    if (!o->user_agent && k->ua_header) {
        core_free(k->ua_header);
        k->ua_header = core_asprintf("User-Agent: prismlb/%s", version ? version : "0");
    }
    k->ns = core_strdup(k->cfg.ns ? k->cfg.ns : "default");
    k->ev_cur = json_object();
    k->ev_old = json_object();
    if (!k->ua_header || !k->ns || !k->ev_cur || !k->ev_old)
        goto oom;
    if (k->insecure)
        core_log(PLB_LOG_WARN, NULL, NULL,
                 "kubernetes client for %s skips TLS verification (explicitly configured)",
                 k->cfg.server);
    return k;
oom:
    seterr(err, errlen, "out of memory");
fail:
    core_kube_free(k);
    return NULL;
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
    core_free(op->path);
    core_free(op->body);
    core_free(op->ev_key);
    json_decref(op->ev_body);
    core_free(op);
}

void
core_kube_free(plb_kube *k)
{
    if (!k || k->dying)
        return;
    core_kube_informers_free(k);
    plb_kube_op *keep = NULL;
    while (k->ops) {
        plb_kube_op *op = k->ops;
        if (op->in_done) {
            /* Its done callback is running (and called us): it is freed
             * when that returns. */
            k->ops = op->next;
            op->prev = op->next = NULL;
            keep = op;
            continue;
        }
        if (op->req)
            core_http_cancel(op->req);
        core_kube_op_free(op);
    }
    k->ops = keep;
    k->evq = k->evq_tail = NULL;
    if (k->depth > 0) {
        k->dying = 1;
        return;
    }
    core_kube_events_fini(k);
    core_kube_config_clear(&k->cfg);
    core_free(k->ua_header);
    core_free(k->ns);
    core_free(k);
}

const char *
core_kube_server(const plb_kube *k)
{
    return k ? k->cfg.server : NULL;
}

const char *
core_kube_namespace(const plb_kube *k)
{
    return k ? k->ns : NULL;
}

size_t
core_kube_active(const plb_kube *k)
{
    size_t n = 0;
    for (const plb_kube_op *op = k ? k->ops : NULL; op; op = op->next)
        n++;
    return n;
}

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
    req = core_http_request(k->httpc, &ho, err);
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

void
core_kube_op_finish(plb_kube_op *op, int status, enum plb_http_error error, const char *reason,
                    const char *message, json_t *obj)
{
    plb_kube *k = op->k;
    int was_event = op->kind == KOP_EVENT;
    struct plb_kube_result r = {
        .size = sizeof(r),
        .status = status,
        .error = error,
        .reason = reason ? reason : "",
        .message = message ? message : "",
        .obj = KOBJ(obj),
    };
    if (was_event && k->evq == op) {
        k->evq = op->qnext;
        if (!k->evq)
            k->evq_tail = NULL;
    }
    op->in_done = 1;
    k->depth++;
    if (op->done)
        op->done(op, &r, op->arg);
    k->depth--;
    core_kube_op_free(op);
    if (k->dying) {
        if (k->depth == 0) {
            k->dying = 0;
            core_kube_free(k);
        }
        return;
    }
    if (was_event)
        core_kube_events_run(k);
}

void
core_kube_cancel(plb_kube_op *op)
{
    if (!op || op->in_done)
        return;
    plb_kube *k = op->k;
    if (op->req)
        core_http_cancel(op->req);
    op->req = NULL;
    int running_event = 0;
    if (op->kind == KOP_EVENT) {
        plb_kube_op **pp = &k->evq, *prev = NULL;
        while (*pp && *pp != op) {
            prev = *pp;
            pp = &(*pp)->qnext;
        }
        if (*pp) {
            running_event = pp == &k->evq;
            *pp = op->qnext;
            if (k->evq_tail == op)
                k->evq_tail = prev;
        }
    }
    core_kube_op_free(op);
    if (running_event)
        core_kube_events_run(k);
}

/* ------------------------------------------------------------------------ */
/* Operations.                                                               */

static plb_kube_op *
op_new(plb_kube *k, enum kop_kind kind, const struct plb_kube_ref *ref, int with_name,
       plb_kube_done_cb done, void *arg, int *err)
{
    int dummy;
    if (!err)
        err = &dummy;
    if (!k || !ref || ref->size < sizeof(*ref) || !ref->api_version || !ref->resource ||
        (with_name && (!ref->name || !*ref->name)) || (kind != KOP_EVENT && !done)) {
        *err = -EINVAL;
        return NULL;
    }
    plb_kube_op *op = core_calloc(1, sizeof(*op));
    if (!op || !(op->path = core_kube_path(ref->api_version, ref->resource, ref->ns,
                                           with_name ? ref->name : NULL,
                                           with_name ? ref->subresource : NULL))) {
        if (op)
            core_free(op);
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

/* Send op's current request. 0 or -errno (op left to the caller). */
static int
op_send(plb_kube_op *op)
{
    int err = 0;
    op->req = core_kube_http(op->k, op->method, op->path, op->body ? op->ctype : NULL, op->body,
                             PLB_HTTP_BUFFER, 0, NULL, core_kube_op_http_done, op, &err);
    return op->req ? 0 : (err ? err : -ENOMEM);
}

static plb_kube_op *
op_start(plb_kube_op *op, const char *method, const char *ctype, const char *body, int *err)
{
    int dummy;
    if (!err)
        err = &dummy;
    op->method = method;
    op->ctype = ctype;
    if (body && !(op->body = core_strdup(body))) {
        *err = -ENOMEM;
        goto fail;
    }
    *err = op_send(op);
    if (*err)
        goto fail;
    return op;
fail:
    core_kube_op_free(op);
    return NULL;
}

/* MODIFY: the object was read; call mutate and write, or finish. */
static void
modify_read(plb_kube_op *op, int status, json_t *obj, const char *reason, const char *message)
{
    if (status != 200 || !json_is_object(obj)) {
        core_kube_op_finish(op, status, PLB_HTTP_OK, reason, message, obj);
        return;
    }
    int rc = op->mutate(KOBJ(obj), op->arg);
    if (rc > 0) {
        core_kube_op_finish(op, status, PLB_HTTP_OK, "", "", obj);
        return;
    }
    if (rc < 0) {
        core_kube_op_finish(op, 0, PLB_HTTP_E_ABORTED, "", "declined by the modify callback", obj);
        return;
    }
    core_free(op->body);
    op->body = core_obj_dump(KOBJ(obj));
    if (!op->body) {
        core_kube_op_finish(op, 0, PLB_HTTP_E_LOCAL, "", "out of memory", NULL);
        return;
    }
    op->phase = 1;
    op->attempts--;
    op->method = "PUT";
    op->ctype = "application/json";
    int err = op_send(op);
    if (err)
        core_kube_op_finish(op, 0, PLB_HTTP_E_LOCAL, "", strerror(-err), NULL);
}

void
core_kube_op_http_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    plb_kube_op *op = arg;
    size_t len = 0;
    const char *body = core_http_resp_body(resp, &len);
    int status = core_http_resp_status(resp);
    enum plb_http_error e = core_http_resp_error(resp);
    const char *reason, *message;
    (void)req;

    op->req = NULL;
    if (e != PLB_HTTP_OK) {
        core_kube_op_finish(op, status, e, "", core_http_resp_error_text(resp), NULL);
        return;
    }
    json_t *obj = core_kube_parse_body(body, len, &reason, &message);
    if (op->kind == KOP_MODIFY && op->phase == 0) {
        modify_read(op, status, obj, reason, message);
    } else if (op->kind == KOP_MODIFY && status == 409 && op->attempts > 0) {
        op->phase = 0; /* somebody else wrote: read again */
        op->method = "GET";
        core_free(op->body);
        op->body = NULL;
        int err = op_send(op);
        if (err)
            core_kube_op_finish(op, 0, PLB_HTTP_E_LOCAL, "", strerror(-err), NULL);
    } else if (op->kind == KOP_EVENT) {
        core_kube_event_response(op, status, obj, reason, message);
    } else {
        core_kube_op_finish(op, status, PLB_HTTP_OK, reason, message, obj);
    }
    json_decref(obj);
}

plb_kube_op *
core_kube_get(plb_kube *k, const struct plb_kube_ref *ref, plb_kube_done_cb done, void *arg,
              int *err)
{
    plb_kube_op *op = op_new(k, KOP_GET, ref, ref && ref->name, done, arg, err);
    return op ? op_start(op, "GET", NULL, NULL, err) : NULL;
}

/* Body must be JSON text. */
static int
check_json(const char *body, int *err)
{
    json_t *j = body ? json_loads(body, JSON_DECODE_ANY, NULL) : NULL;
    int ok = j != NULL;
    json_decref(j);
    if (!ok && err)
        *err = -EINVAL;
    return ok;
}

plb_kube_op *
core_kube_create(plb_kube *k, const struct plb_kube_ref *ref, const char *body,
                 plb_kube_done_cb done, void *arg, int *err)
{
    if (!check_json(body, err))
        return NULL;
    plb_kube_op *op = op_new(k, KOP_CREATE, ref, 0, done, arg, err);
    return op ? op_start(op, "POST", "application/json", body, err) : NULL;
}

plb_kube_op *
core_kube_update(plb_kube *k, const struct plb_kube_ref *ref, const char *body,
                 plb_kube_done_cb done, void *arg, int *err)
{
    if (!check_json(body, err))
        return NULL;
    plb_kube_op *op = op_new(k, KOP_UPDATE, ref, 1, done, arg, err);
    return op ? op_start(op, "PUT", "application/json", body, err) : NULL;
}

plb_kube_op *
core_kube_patch(plb_kube *k, const struct plb_kube_ref *ref, enum plb_kube_patch_type type,
                const char *patch, plb_kube_done_cb done, void *arg, int *err)
{
    static const char *const ctypes[] = {
        [PLB_KUBE_MERGE_PATCH] = "application/merge-patch+json",
        [PLB_KUBE_STRATEGIC_PATCH] = "application/strategic-merge-patch+json",
        [PLB_KUBE_JSON_PATCH] = "application/json-patch+json",
    };
    if ((unsigned)type > PLB_KUBE_JSON_PATCH) {
        if (err)
            *err = -EINVAL;
        return NULL;
    }
    if (!check_json(patch, err))
        return NULL;
    plb_kube_op *op = op_new(k, KOP_PATCH, ref, 1, done, arg, err);
    return op ? op_start(op, "PATCH", ctypes[type], patch, err) : NULL;
}

plb_kube_op *
core_kube_delete(plb_kube *k, const struct plb_kube_ref *ref, const char *uid,
                 const char *resource_version, plb_kube_done_cb done, void *arg, int *err)
{
    plb_kube_op *op = op_new(k, KOP_DELETE, ref, 1, done, arg, err);
    if (!op)
        return NULL;
    json_t *pre = json_object();
    json_t *body = json_pack("{s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
    char *text = NULL;
    if (!pre || !body || (uid && json_object_set_new(pre, "uid", json_string(uid)) < 0) ||
        (resource_version &&
         json_object_set_new(pre, "resourceVersion", json_string(resource_version)) < 0) ||
        json_object_set(body, "preconditions", pre) < 0 || !(text = core_obj_dump(KOBJ(body)))) {
        json_decref(pre);
        json_decref(body);
        core_kube_op_free(op);
        if (err)
            *err = -ENOMEM;
        return NULL;
    }
    json_decref(pre);
    json_decref(body);
    op = op_start(op, "DELETE", "application/json", text, err);
    core_free(text);
    return op;
}

plb_kube_op *
core_kube_modify(plb_kube *k, const struct plb_kube_ref *ref, plb_kube_mutate_cb mutate,
                 int attempts, plb_kube_done_cb done, void *arg, int *err)
{
    if (!mutate) {
        if (err)
            *err = -EINVAL;
        return NULL;
    }
    plb_kube_op *op = op_new(k, KOP_MODIFY, ref, 1, done, arg, err);
    if (!op)
        return NULL;
    op->mutate = mutate;
    op->attempts = attempts > 0 ? attempts : KUBE_MODIFY_ATTEMPTS;
    return op_start(op, "GET", NULL, NULL, err);
}
