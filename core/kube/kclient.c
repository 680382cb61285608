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
    k->destroy = core_kube_free;
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
    if (!k->ua_header || !k->ns || core_kube_events_init(k) < 0)
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

void
core_kube_set_fence(plb_kube *k, struct core_http_fence *fence)
{
    if (k)
        k->fence = fence;
}

/* ------------------------------------------------------------------------ */
/* Operations.                                                               */

/* A new operation of kind on ref (the object's path when with_name). NULL
 * with *err (-EINVAL: a bad ref, no done; -EPERM: fenced; -ENOMEM). */
static plb_kube_op *
op_new(plb_kube *k, const struct core_kube_kind *kind, const struct plb_kube_ref *ref,
       int with_name, plb_kube_done_cb done, void *arg, int *err)
{
    int dummy;
    if (!err)
        err = &dummy;
    if (!k || !ref || ref->size < sizeof(*ref) || !ref->api_version || !ref->resource ||
        (with_name && (!ref->name || !*ref->name)) || !done) {
        *err = -EINVAL;
        return NULL;
    }
    plb_kube_op *op = core_kube_op_new(k, kind, done, arg, err);
    if (!op)
        return NULL;
    op->path = core_kube_path(ref->api_version, ref->resource, ref->ns,
                              with_name ? ref->name : NULL, with_name ? ref->subresource : NULL);
    if (!op->path) {
        core_kube_op_free(op);
        *err = -ENOMEM;
        return NULL;
    }
    return op;
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
    *err = core_kube_op_send(op);
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
    int err = core_kube_op_send(op);
    if (err)
        core_kube_op_fail(op, err);
}

/* MODIFY: a response to the read (phase 0) or the write (phase 1). */
static void
modify_response(plb_kube_op *op, int status, json_t *obj, const char *reason, const char *message)
{
    if (op->phase == 0) {
        modify_read(op, status, obj, reason, message);
    } else if (status == 409 && op->attempts > 0) {
        op->phase = 0; /* somebody else wrote: read again */
        op->method = "GET";
        core_free(op->body);
        op->body = NULL;
        int err = core_kube_op_send(op);
        if (err)
            core_kube_op_fail(op, err);
    } else {
        core_kube_op_finish(op, status, PLB_HTTP_OK, reason, message, obj);
    }
}

/* The kinds of this file: every verb finishes with its one response but
 * read-modify-write. */
static const struct core_kube_kind get_kind = {.name = "get"};
static const struct core_kube_kind write_kind = {.name = "write", .write = 1};
static const struct core_kube_kind modify_kind = {
    .name = "modify",
    .write = 1,
    .response = modify_response,
};

plb_kube_op *
core_kube_get(plb_kube *k, const struct plb_kube_ref *ref, plb_kube_done_cb done, void *arg,
              int *err)
{
    plb_kube_op *op = op_new(k, &get_kind, ref, ref && ref->name, done, arg, err);
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

/* A write of JSON text body (checked) by method with content type ctype to
 * ref's object (with_name) or collection. */
static plb_kube_op *
write_json(plb_kube *k, const struct plb_kube_ref *ref, int with_name, const char *method,
           const char *ctype, const char *body, plb_kube_done_cb done, void *arg, int *err)
{
    if (!check_json(body, err))
        return NULL;
    plb_kube_op *op = op_new(k, &write_kind, ref, with_name, done, arg, err);
    return op ? op_start(op, method, ctype, body, err) : NULL;
}

plb_kube_op *
core_kube_create(plb_kube *k, const struct plb_kube_ref *ref, const char *body,
                 plb_kube_done_cb done, void *arg, int *err)
{
    return write_json(k, ref, 0, "POST", "application/json", body, done, arg, err);
}

plb_kube_op *
core_kube_update(plb_kube *k, const struct plb_kube_ref *ref, const char *body,
                 plb_kube_done_cb done, void *arg, int *err)
{
    return write_json(k, ref, 1, "PUT", "application/json", body, done, arg, err);
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
    return write_json(k, ref, 1, "PATCH", ctypes[type], patch, done, arg, err);
}

plb_kube_op *
core_kube_delete(plb_kube *k, const struct plb_kube_ref *ref, const char *uid,
                 const char *resource_version, plb_kube_done_cb done, void *arg, int *err)
{
    plb_kube_op *op = op_new(k, &write_kind, ref, 1, done, arg, err);
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
    plb_kube_op *op = op_new(k, &modify_kind, ref, 1, done, arg, err);
    if (!op)
        return NULL;
    op->mutate = mutate;
    op->attempts = attempts > 0 ? attempts : KUBE_MODIFY_ATTEMPTS;
    return op_start(op, "GET", NULL, NULL, err);
}
