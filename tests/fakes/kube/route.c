/* Routing: health, version, discovery, and the resource paths
 * /api/v1/... and /apis/G/V/... (with namespaces and /status) to the verbs. */
#include "fk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#define NOT_FOUND_MSG "the server could not find the requested resource"

static void
reply_text(struct fk_rq *rq, int code, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    evhttp_add_header(evhttp_request_get_output_headers(rq->req), "Content-Type",
                      "text/plain; charset=utf-8");
    if (b)
        evbuffer_add(b, text, strlen(text));
    if (rq->log)
        json_object_set_new(rq->log, "status", json_integer(code));
    evhttp_send_reply(rq->req, code, NULL, b);
    if (b)
        evbuffer_free(b);
    fk_rq_free(rq);
}

static int
split_path(char *path, char **segs, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(path, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (n == max)
            return -1;
        segs[n++] = s;
    }
    return n;
}

/* See fk.h. */
void
fk_api_dispatch(struct fk_rq *rq)
{
    char *copy = NULL, *segs[12];
    const char *group, *version;
    char **rest;
    int n, nrest;
    struct fk_target t = {0};

    if (!strncmp(rq->path, "/healthz", 8) || !strncmp(rq->path, "/livez", 6) ||
        !strncmp(rq->path, "/readyz", 7)) {
        reply_text(rq, 200, "ok");
        return;
    }
    if (!strcmp(rq->path, "/version")) {
        fk_reply_json(rq, 200,
                      json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "major", "1",
                                "minor", "35", "gitVersion", "v1.35.0", "gitCommit",
                                "0000000000000000000000000000000000000000", "gitTreeState", "clean",
                                "buildDate", "2025-12-17T00:00:00Z", "goVersion", "go1.25.5",
                                "compiler", "gc", "platform", "linux/amd64"));
        return;
    }
    if (fk_discovery_serve(rq))
        return;
    copy = strdup(rq->path);
    if (!copy) {
        fk_reply_status(rq, NULL);
        return;
    }
    n = split_path(copy, segs, 12);
    if (n >= 3 && !strcmp(segs[0], "api") && !strcmp(segs[1], "v1")) {
        group = "";
        version = "v1";
        rest = segs + 2;
        nrest = n - 2;
    } else if (n >= 4 && !strcmp(segs[0], "apis")) {
        group = segs[1];
        version = segs[2];
        rest = segs + 3;
        nrest = n - 3;
    } else {
        goto notfound;
    }
    if (nrest >= 3 && !strcmp(rest[0], "namespaces") &&
        (t.k = fk_kind_find(group, version, rest[2])) && (t.k->flags & FK_NAMESPACED)) {
        t.ns = rest[1];
        rest += 2;
        nrest -= 2;
    } else {
        t.ns = "";
        t.k = fk_kind_find(group, version, rest[0]);
        if (!t.k || (t.k->flags & FK_NAMESPACED && nrest > 1))
            goto notfound;
    }
    if (nrest > 3)
        goto notfound;
    t.name = nrest >= 2 ? rest[1] : NULL;
    if (nrest == 3) {
        if (strcmp(rest[2], "status") || !(t.k->flags & FK_HAS_STATUS))
            goto notfound;
        t.status = 1;
    }
    if (rq->srv->quorum_lost) {
        free(copy);
        fk_reply_status(rq, fk_status_new(500, "InternalError", "etcdserver: request timed out",
                                          NULL, NULL, NULL));
        return;
    }
    t.cl = fk_store_cluster(&rq->app->store, rq->cluster);
    if (!t.cl) {
        free(copy);
        fk_reply_status(rq, NULL);
        return;
    }
    switch (rq->method) {
    case EVHTTP_REQ_GET:
        if (fk_rq_param_bool(rq, "watch"))
            fk_watch_start(rq, t.cl, t.k, t.ns, t.name);
        else if (t.name)
            fk_do_get(rq, &t);
        else
            fk_list(rq, t.cl, t.k, t.ns);
        break;
    case EVHTTP_REQ_POST:
        if (t.name)
            goto notallowed;
        fk_do_create(rq, &t);
        break;
    case EVHTTP_REQ_PUT:
        if (!t.name)
            goto notallowed;
        fk_do_update(rq, &t);
        break;
    case EVHTTP_REQ_PATCH:
        if (!t.name)
            goto notallowed;
        fk_do_patch(rq, &t);
        break;
    case EVHTTP_REQ_DELETE:
        if (t.status)
            goto notallowed;
        if (t.name)
            fk_do_delete(rq, &t);
        else
            fk_do_delete_collection(rq, &t);
        break;
    default:
        goto notallowed;
    }
    free(copy);
    return;
notallowed:
    free(copy);
    fk_reply_status(rq, fk_status_new(405, "MethodNotAllowed",
                                      "the server does not allow this method on the requested "
                                      "resource",
                                      NULL, NULL, NULL));
    return;
notfound:
    free(copy);
    fk_reply_status(rq, fk_status_new(404, "NotFound", NOT_FOUND_MSG, NULL, NULL, NULL));
}
