/* The plain-HTTP admin API: server states, fault injection, the request
 * log and a store dump. Documented in README.md. */
#include "fk.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <sys/queue.h>

#include <event2/keyvalq_struct.h>

static void
reply(struct evhttp_request *req, int code, json_t *body)
{
    struct evbuffer *b = evbuffer_new();
    char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    if (b && s && (evbuffer_add(b, s, strlen(s)) < 0 || evbuffer_add(b, "\n", 1) < 0))
        code = 500;
    evhttp_send_reply(req, code, NULL, b);
    if (b)
        evbuffer_free(b);
    free(s);
    json_decref(body);
}

static void
reply_error(struct evhttp_request *req, int code, const char *msg)
{
    reply(req, code, json_pack("{s:s}", "error", msg));
}

static json_t *
faults_json(const struct fk_faults *f)
{
    return json_pack("{s:i, s:i, s:s, s:s, s:s, s:s, s:i, s:s, s:i, s:i, s:s, s:i, s:s, s:s}",
                     "fail_count", f->fail_count, "fail_status", f->fail_status, "fail_match",
                     f->fail_match, "fail_method", f->fail_method, "fail_body", f->fail_body,
                     "fail_content_type", f->fail_content_type, "latency_ms", f->latency_ms,
                     "latency_match", f->latency_match, "watch_close_events", f->watch_close_events,
                     "watch_close_ms", f->watch_close_ms, "watch_close_mode",
                     f->watch_close_drop ? "drop" : "clean", "watch_gone_next", f->watch_gone_next,
                     "hold_match", f->hold_match, "hold_method", f->hold_method);
}

static json_t *
state_json(struct fk_app *app)
{
    json_t *servers = json_array(), *st;
    char rv[32];
    if (!servers)
        return NULL;
    for (int i = 0; i < app->nservers; i++) {
        struct fk_server *s = &app->servers[i];
        char url[64];
        snprintf(url, sizeof(url), "%s://127.0.0.1:%d", app->ssl ? "https" : "http", s->port);
        if (json_array_append_new(servers, json_pack("{s:i, s:s, s:i, s:s, s:b}", "index", i, "url",
                                                     url, "port", s->port, "state",
                                                     s->stopped         ? "stopped"
                                                     : s->not_accepting ? "not-accepting"
                                                                        : "up",
                                                     "ready", !s->quorum_lost)) < 0) {
            json_decref(servers);
            return NULL;
        }
    }
    snprintf(rv, sizeof(rv), "%" PRIu64, app->store.rv);
    st = json_pack("{s:o, s:s, s:I, s:I, s:I, s:I}", "servers", servers, "resourceVersion", rv,
                   "oldestWatchableResourceVersion", (json_int_t)fk_store_oldest_rv(&app->store),
                   "watches", (json_int_t)fk_watch_count(), "requests",
                   (json_int_t)json_array_size(app->reqlog), "held", (json_int_t)app->nholding);
    return st;
}

static int
set_str(char *dst, size_t len, json_t *v)
{
    if (!json_is_string(v))
        return -1;
    snprintf(dst, len, "%s", json_string_value(v));
    return 0;
}

static int
apply_faults(struct fk_faults *f, json_t *body, char *err, size_t errlen)
{
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        int bad = 0;
        if (!strcmp(key, "fail_count"))
            bad = !json_is_integer(v) || (f->fail_count = (int)json_integer_value(v)) < 0;
        else if (!strcmp(key, "fail_status"))
            bad = !json_is_integer(v) || (f->fail_status = (int)json_integer_value(v)) < 100 ||
                  f->fail_status > 599;
        else if (!strcmp(key, "fail_match"))
            bad = set_str(f->fail_match, sizeof(f->fail_match), v) < 0;
        else if (!strcmp(key, "fail_method"))
            bad = set_str(f->fail_method, sizeof(f->fail_method), v) < 0;
        else if (!strcmp(key, "fail_body"))
            bad = set_str(f->fail_body, sizeof(f->fail_body), v) < 0;
        else if (!strcmp(key, "fail_content_type"))
            bad = set_str(f->fail_content_type, sizeof(f->fail_content_type), v) < 0;
        else if (!strcmp(key, "latency_ms"))
            bad = !json_is_integer(v) || (f->latency_ms = (int)json_integer_value(v)) < 0;
        else if (!strcmp(key, "latency_match"))
            bad = set_str(f->latency_match, sizeof(f->latency_match), v) < 0;
        else if (!strcmp(key, "watch_close_events"))
            bad = !json_is_integer(v) || (f->watch_close_events = (int)json_integer_value(v)) < 0;
        else if (!strcmp(key, "watch_close_ms"))
            bad = !json_is_integer(v) || (f->watch_close_ms = (int)json_integer_value(v)) < 0;
        else if (!strcmp(key, "watch_close_mode")) {
            const char *m = json_string_value(v);
            bad = !m || (strcmp(m, "drop") && strcmp(m, "clean"));
            if (!bad)
                f->watch_close_drop = !strcmp(m, "drop");
        } else if (!strcmp(key, "watch_gone_next"))
            bad = !json_is_integer(v) || (f->watch_gone_next = (int)json_integer_value(v)) < 0;
        else if (!strcmp(key, "hold_match"))
            bad = set_str(f->hold_match, sizeof(f->hold_match), v) < 0;
        else if (!strcmp(key, "hold_method"))
            bad = set_str(f->hold_method, sizeof(f->hold_method), v) < 0;
        else {
            snprintf(err, errlen, "unknown fault: %s", key);
            return -1;
        }
        if (bad) {
            snprintf(err, errlen, "bad value for %s", key);
            return -1;
        }
    }
    return 0;
}

static void
reset_faults(struct fk_faults *f)
{
    memset(f, 0, sizeof(*f));
    f->fail_status = 500;
}

static json_t *
store_dump(struct fk_app *app, const char *cluster, const char *resource)
{
    struct fk_cluster *cl = fk_store_cluster(&app->store, cluster ? cluster : "");
    json_t *objs = json_object(), *out;
    char rv[32];
    if (!cl || !objs) {
        json_decref(objs);
        return NULL;
    }
    for (size_t i = 0; i < fk_nkinds; i++) {
        const struct fk_kind *k = &fk_kinds[i];
        char name[160];
        json_t *arr;
        const char *key;
        json_t *o;
        if (k->group[0])
            snprintf(name, sizeof(name), "%s.%s", k->resource, k->group);
        else
            snprintf(name, sizeof(name), "%s", k->resource);
        if ((resource && strcmp(resource, name) && strcmp(resource, k->resource)) ||
            fk_kind_is_view(k))
            continue;
        arr = json_array();
        if (!arr || json_object_set_new(objs, name, arr) < 0) {
            json_decref(objs);
            return NULL;
        }
        json_object_foreach(cl->objs[i], key, o)
        {
            if (json_array_append(arr, o) < 0) {
                json_decref(objs);
                return NULL;
            }
        }
    }
    snprintf(rv, sizeof(rv), "%" PRIu64, app->store.rv);
    out = json_pack("{s:s, s:o}", "resourceVersion", rv, "objects", objs);
    return out;
}

/* See fk.h. */
void
fk_admin_handle(struct evhttp_request *req, void *arg)
{
    struct fk_app *app = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : "/";
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    int m = evhttp_request_get_command(req);
    struct evkeyvalq q;
    int idx;
    char action[32], err[256];

    TAILQ_INIT(&q);
    if (query && evhttp_parse_query_str(query, &q) < 0) {
        reply_error(req, 400, "bad query");
        return;
    }
    if (!strcmp(path, "/state") && m == EVHTTP_REQ_GET) {
        reply(req, 200, state_json(app));
    } else if (sscanf(path, "/servers/%d/%31s", &idx, action) == 2 && m == EVHTTP_REQ_POST) {
        if (idx < 0 || idx >= app->nservers) {
            reply_error(req, 404, "no such server");
            goto out;
        }
        if (!strcmp(action, "stop")) {
            fk_server_stop(app, idx);
        } else if (!strcmp(action, "start")) {
            if (app->servers[idx].stopped &&
                fk_server_start(app, idx, app->servers[idx].port) < 0) {
                reply_error(req, 500, "cannot listen on the server's port again");
                goto out;
            }
        } else if (!strcmp(action, "quorum-lost")) {
            app->servers[idx].quorum_lost = 1;
        } else if (!strcmp(action, "quorum-ok")) {
            app->servers[idx].quorum_lost = 0;
        } else if (!strcmp(action, "stop-accepting")) {
            fk_server_accepting(app, idx, 0);
        } else if (!strcmp(action, "accept")) {
            fk_server_accepting(app, idx, 1);
        } else {
            reply_error(req, 404, "unknown server action");
            goto out;
        }
        reply(req, 200, state_json(app));
    } else if (!strcmp(path, "/faults")) {
        if (m == EVHTTP_REQ_POST) {
            struct evbuffer *in = evhttp_request_get_input_buffer(req);
            size_t n = evbuffer_get_length(in);
            char *s = malloc(n + 1);
            json_t *body;
            struct fk_faults f = app->faults;
            if (!s) {
                reply_error(req, 500, "out of memory");
                goto out;
            }
            evbuffer_copyout(in, s, n);
            s[n] = '\0';
            body = json_loads(s, 0, NULL);
            free(s);
            if (!json_is_object(body)) {
                json_decref(body);
                reply_error(req, 400, "body must be a JSON object");
                goto out;
            }
            if (apply_faults(&f, body, err, sizeof(err)) < 0) {
                json_decref(body);
                reply_error(req, 400, err);
                goto out;
            }
            json_decref(body);
            app->faults = f;
        } else if (m == EVHTTP_REQ_DELETE) {
            reset_faults(&app->faults);
        } else if (m != EVHTTP_REQ_GET) {
            reply_error(req, 405, "method not allowed");
            goto out;
        }
        reply(req, 200, faults_json(&app->faults));
    } else if (!strcmp(path, "/bulk") && m == EVHTTP_REQ_POST) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t n = evbuffer_get_length(in);
        char *s = malloc(n + 1);
        json_t *body, *res;
        if (!s) {
            reply_error(req, 500, "out of memory");
            goto out;
        }
        evbuffer_copyout(in, s, n);
        s[n] = '\0';
        body = json_loads(s, 0, NULL);
        free(s);
        if (!json_is_object(body)) {
            json_decref(body);
            reply_error(req, 400, "body must be a JSON object");
            goto out;
        }
        res = fk_admin_bulk(app, body, err, sizeof(err));
        json_decref(body);
        if (!res)
            reply_error(req, 400, err);
        else
            reply(req, 200, res);
    } else if (!strcmp(path, "/watches/close") && m == EVHTTP_REQ_POST) {
        const char *mode = evhttp_find_header(&q, "mode");
        size_t n = fk_watch_count();
        fk_watch_close_all(app, mode && !strcmp(mode, "drop"));
        reply(req, 200, json_pack("{s:I}", "closing", (json_int_t)n));
    } else if (!strcmp(path, "/release") && m == EVHTTP_REQ_POST) {
        reply(req, 200, json_pack("{s:I}", "released", (json_int_t)fk_release_held(app)));
    } else if (!strcmp(path, "/compact") && m == EVHTTP_REQ_POST) {
        fk_store_compact(&app->store);
        reply(req, 200, state_json(app));
    } else if (!strcmp(path, "/requests")) {
        if (m == EVHTTP_REQ_DELETE) {
            json_array_clear(app->reqlog);
            reply(req, 200, json_pack("{s:[]}", "items"));
        } else {
            reply(req, 200, json_pack("{s:O}", "items", app->reqlog));
        }
    } else if (!strcmp(path, "/store") && m == EVHTTP_REQ_GET) {
        json_t *d =
            store_dump(app, evhttp_find_header(&q, "cluster"), evhttp_find_header(&q, "resource"));
        if (!d)
            reply_error(req, 500, "out of memory");
        else
            reply(req, 200, d);
    } else {
        reply_error(req, 404, "unknown admin path");
    }
out:
    evhttp_clear_headers(&q);
}
