/* Watch streams: chunked HTTP 200, one compact JSON event per line flushed
 * per event; replay from history, synthetic ADDED, sendInitialEvents,
 * bookmarks, timeouts, selector transitions, and injected closes. */
#include "fk.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

struct fk_watch {
    struct fk_app *app;
    struct fk_rq *rq;
    struct fk_held *held;
    struct fk_cluster *cl;
    const struct fk_kind *k;
    char *ns;   /* "" = all */
    char *name; /* NULL = all */
    struct fk_selector *ls, *fs;
    uint64_t rv;
    int bookmarks;
    int events;
    int close_after;
    int close_drop;
    int closing;
    int unflushed;     /* a chunk is queued whose drain callback has not run */
    int close_pending; /* close once it has */
    int sent_any;      /* some chunk went out (its drain callback is ours) */
    int settle_turn;   /* headers only: drained, waiting one loop turn */
    struct event *bookmark_ev, *timeout_ev, *close_ev;
    struct fk_watch *prev, *next;
};

static struct fk_watch *watches;
static size_t nwatches;

/* See fk.h. */
size_t
fk_watch_count(void)
{
    return nwatches;
}

static void
watch_free(struct fk_watch *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else if (watches == w)
        watches = w->next;
    if (w->next)
        w->next->prev = w->prev;
    nwatches--;
    if (w->bookmark_ev)
        event_free(w->bookmark_ev);
    if (w->timeout_ev)
        event_free(w->timeout_ev);
    if (w->close_ev)
        event_free(w->close_ev);
    fk_selector_free(w->ls);
    fk_selector_free(w->fs);
    free(w->ns);
    free(w->name);
    fk_rq_free(w->rq);
    free(w);
}

/* Write one event line; cb (may be NULL) runs once the connection's
 * output has drained. 0 or -1. A NULL req frees the reused buffer. */
static int
send_event_cb(struct evhttp_request *req, const char *type, json_t *obj,
              void (*cb)(struct evhttp_connection *, void *), void *arg)
{
    /* One buffer reused for every event: the loop is single-threaded. */
    static struct fk_buf out;
    struct evbuffer *b;
    int r = -1;

    if (!req) {
        free(out.p);
        memset(&out, 0, sizeof(out));
        return 0;
    }
    b = evbuffer_new();

    out.len = 0;
    out.err = 0;
    fk_buf_add(&out, "{\"type\":\"", 9);
    fk_buf_add(&out, type, strlen(type));
    fk_buf_add(&out, "\",\"object\":", 11);
    fk_json_write(&out, obj);
    fk_buf_add(&out, "}\n", 2);
    if (b && !out.err && evbuffer_add(b, out.p, out.len) == 0) {
        evhttp_send_reply_chunk_with_cb(req, b, cb, arg);
        r = 0;
    }
    if (out.cap > (1u << 20)) { /* do not keep a huge one around */
        free(out.p);
        memset(&out, 0, sizeof(out));
    }
    if (b)
        evbuffer_free(b);
    return r;
}

static void schedule_close(struct fk_watch *w, int drop);

/* Drain callback of a watch's chunks. libevent runs it deferred, so ending
 * the reply before it ran would let the stale callback finish the request
 * early and stop writing (the terminating chunk would never leave). */
static void
chunk_flushed(struct evhttp_connection *evcon, void *arg)
{
    struct fk_watch *w = arg;
    (void)evcon;
    w->unflushed = 0;
    if (w->close_pending) {
        struct timeval now = {0, 0};
        w->close_pending = 0;
        evtimer_add(w->close_ev, &now);
    }
}

/* Write one event on a watch. */
static int
send_event(struct fk_watch *w, const char *type, json_t *obj)
{
    int r = send_event_cb(w->rq->req, type, obj, chunk_flushed, w);
    if (r == 0) {
        w->unflushed = 1;
        w->sent_any = 1;
    }
    return r;
}

/* End the stream cleanly (terminating chunk) and free the watch. */
static void
watch_end(struct fk_watch *w)
{
    struct evhttp_request *req = w->rq->req;
    fk_unhold(w->app, w->held);
    w->held = NULL;
    evhttp_send_reply_end(req);
    watch_free(w);
}

static void
watch_closed(void *arg, int dropped)
{
    struct fk_watch *w = arg;
    w->held = NULL;
    if (!dropped)
        evhttp_send_reply_end(w->rq->req); /* detached by libevent: this frees it */
    watch_free(w);
}

/* Only the headers went out. libevent runs the connection's drain callback
 * deferred, at the start of the loop turn after the headers leave the output
 * buffer, and that callback finishes whatever the request has set by then:
 * ending the reply before it runs lets it finish the request with the
 * terminating chunk still queued, and the chunk is never written. So the
 * close waits, by the loop's order and not by a clock, until the buffer is
 * empty and one more turn has passed (a zero timer added now runs after the
 * next turn's deferred callbacks). 1 when the reply may end; else 0, with
 * close_ev re-armed. */
static int
headers_settled(struct fk_watch *w)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(w->rq->req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    struct timeval next_turn = {0, 0}, poll = {0, 1000};

    if (!bev)
        return 1;
    if (evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
        w->settle_turn = 0;
        evtimer_add(w->close_ev, &poll);
        return 0;
    }
    if (!w->settle_turn) {
        w->settle_turn = 1;
        evtimer_add(w->close_ev, &next_turn);
        return 0;
    }
    return 1;
}

static void
close_cb(evutil_socket_t fd, short what, void *arg)
{
    struct fk_watch *w = arg;
    (void)fd;
    (void)what;
    if (w->unflushed) {
        w->close_pending = 1; /* chunk_flushed re-arms this timer */
        return;
    }
    if (!w->sent_any && !headers_settled(w))
        return; /* headers_settled re-armed this timer */
    if (w->close_drop && w->held)
        fk_held_drop(w->app, w->held); /* watch_closed frees w */
    else
        watch_end(w);
}

/* Schedule closing w from the loop (never from inside a delivery). */
static void
schedule_close(struct fk_watch *w, int drop)
{
    struct timeval now = {0, 0};
    if (w->closing)
        return;
    w->closing = 1;
    w->close_drop = drop;
    evtimer_add(w->close_ev, &now);
}

static void
timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    struct fk_watch *w = arg;
    (void)fd;
    (void)what;
    schedule_close(w, 0);
}

static json_t *
bookmark_obj(struct fk_watch *w, int initial_end)
{
    char av[128], rv[32];
    json_t *o;
    snprintf(rv, sizeof(rv), "%" PRIu64, w->app->store.rv);
    o = json_pack("{s:s, s:s, s:{s:s, s:n}}", "kind", w->k->kind, "apiVersion",
                  fk_kind_api_version(w->k, av, sizeof(av)), "metadata", "resourceVersion", rv,
                  "creationTimestamp");
    if (o && initial_end) {
        char lk[128], *raw, *b64;
        json_t *blueprint;
        snprintf(lk, sizeof(lk), "%sList", w->k->kind);
        blueprint =
            json_pack("{s:s, s:s, s:{}, s:[]}", "kind", lk, "apiVersion", av, "metadata", "items");
        raw = blueprint ? json_dumps(blueprint, JSON_COMPACT) : NULL;
        b64 = raw ? fk_base64(raw, strlen(raw)) : NULL;
        if (!b64 ||
            json_object_set_new(json_object_get(o, "metadata"), "annotations",
                                json_pack("{s:s, s:s}", "k8s.io/initial-events-end", "true",
                                          "k8s.io/initial-events-list-blueprint", b64)) < 0) {
            json_decref(o);
            o = NULL;
        }
        free(b64);
        free(raw);
        json_decref(blueprint);
    }
    return o;
}

static void
bookmark_cb(evutil_socket_t fd, short what, void *arg)
{
    struct fk_watch *w = arg;
    json_t *o;
    (void)fd;
    (void)what;
    if (w->closing)
        return;
    o = bookmark_obj(w, 0);
    if (o)
        send_event(w, "BOOKMARK", o);
    json_decref(o);
}

static int
matches(struct fk_watch *w, json_t *obj)
{
    if (!obj)
        return 0;
    if (w->ns[0] && strcmp(fk_json_path_str(obj, "metadata.namespace") ?: "", w->ns))
        return 0;
    if (w->name && strcmp(fk_json_path_str(obj, "metadata.name") ?: "", w->name))
        return 0;
    return fk_selector_match(w->ls, obj) && fk_selector_match(w->fs, obj);
}

/* Deliver one store event to w. */
static void
deliver(struct fk_watch *w, const struct fk_event *ev)
{
    const char *type = NULL;
    json_t *obj, *tmp = NULL, *vobj, *vold = NULL;
    int was, is;

    if (w->closing || ev->cl != w->cl || ev->kind != fk_kind_storage(w->k) || ev->rv <= w->rv)
        return;
    w->rv = ev->rv;
    /* Watches of a view (events.k8s.io) see converted objects. */
    vobj = fk_view_from_storage(w->k, ev->obj);
    vold = ev->old ? fk_view_from_storage(w->k, ev->old) : NULL;
    if (!vobj || (ev->old && !vold)) {
        json_decref(vobj);
        json_decref(vold);
        schedule_close(w, 1);
        return;
    }
    obj = vobj;
    was = vold && matches(w, vold);
    is = matches(w, vobj);
    if (ev->type == FK_DELETED) {
        if (is)
            type = "DELETED";
    } else if (is) {
        type = was ? "MODIFIED" : "ADDED";
    } else if (was) {
        /* Stopped matching: the previous state with this event's version. */
        char rv[32];
        tmp = json_deep_copy(vold);
        snprintf(rv, sizeof(rv), "%" PRIu64, ev->rv);
        if (!tmp || json_object_set_new(json_object_get(tmp, "metadata"), "resourceVersion",
                                        json_string(rv)) < 0) {
            json_decref(tmp);
            json_decref(vobj);
            json_decref(vold);
            schedule_close(w, 1); /* cannot keep the stream truthful */
            return;
        }
        obj = tmp;
        type = "DELETED";
    }
    if (type) {
        send_event(w, type, obj);
        w->events++;
        if (w->close_after && w->events >= w->close_after)
            schedule_close(w, w->close_drop);
    }
    json_decref(tmp);
    json_decref(vobj);
    json_decref(vold);
}

/* See fk.h. */
void
fk_watch_on_event(const struct fk_event *ev, void *arg)
{
    struct fk_watch *w, *next;
    (void)arg;
    for (w = watches; w; w = next) {
        next = w->next;
        deliver(w, ev);
    }
}

static int
replay_cb(const struct fk_event *ev, void *arg)
{
    deliver(arg, ev);
    return 0;
}

static int
cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Synthetic ADDED for every current object that matches. 0 or -1. */
static int
send_initial(struct fk_watch *w)
{
    json_t *map = w->cl->objs[fk_kind_index(fk_kind_storage(w->k))], *o;
    const char **keys = malloc((json_object_size(map) + 1) * sizeof(*keys));
    const char *key;
    size_t n = 0;

    if (!keys)
        return -1;
    json_object_foreach(map, key, o) keys[n++] = key;
    qsort(keys, n, sizeof(*keys), cmp_key);
    for (size_t i = 0; i < n; i++) {
        json_t *view;
        if (w->closing)
            break;
        o = json_object_get(map, keys[i]);
        view = fk_view_from_storage(w->k, o);
        if (!view) {
            free(keys);
            return -1;
        }
        if (!matches(w, view)) {
            json_decref(view);
            continue;
        }
        send_event(w, "ADDED", view);
        json_decref(view);
        w->events++;
        if (w->close_after && w->events >= w->close_after)
            schedule_close(w, w->close_drop);
    }
    free(keys);
    return 0;
}

/* Answer a watch with HTTP 200 and a single ERROR event. */
static void
reply_error_event(struct fk_rq *rq, json_t *st)
{
    struct evhttp_request *req = rq->req;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    if (rq->log)
        json_object_set_new(rq->log, "status", json_integer(200));
    evhttp_send_reply_start(req, 200, "OK");
    if (st)
        send_event_cb(req, "ERROR", st, NULL, NULL);
    evhttp_send_reply_end(req);
    json_decref(st);
    fk_rq_free(rq);
}

/* See fk.h. */
void
fk_watch_start(struct fk_rq *rq, struct fk_cluster *cl, const struct fk_kind *k, const char *ns,
               const char *name)
{
    struct fk_app *app = rq->app;
    struct fk_store *s = &app->store;
    const char *rvp = fk_rq_param(rq, "resourceVersion");
    const char *match = fk_rq_param(rq, "resourceVersionMatch");
    const char *sie = fk_rq_param(rq, "sendInitialEvents");
    const char *tos = fk_rq_param(rq, "timeoutSeconds");
    int initial_events = fk_rq_param_bool(rq, "sendInitialEvents");
    struct fk_watch *w = NULL;
    json_t *err = NULL;
    char msg[512];
    uint64_t from = 0;
    int synthetic = 0;

    w = calloc(1, sizeof(*w));
    if (!w)
        goto oom;
    w->app = app;
    w->cl = cl;
    w->k = k;
    w->ns = strdup(ns);
    w->name = name ? strdup(name) : NULL;
    if (!w->ns || (name && !w->name))
        goto oom;
    w->ls = fk_label_selector_parse(fk_rq_param(rq, "labelSelector"), msg, sizeof(msg));
    if (!w->ls) {
        err = fk_status_new(400, "BadRequest", msg, NULL, NULL, NULL);
        goto fail;
    }
    w->fs = fk_field_selector_parse(fk_rq_param(rq, "fieldSelector"), k, msg, sizeof(msg));
    if (!w->fs) {
        err = fk_status_new(400, "BadRequest", msg, NULL, NULL, NULL);
        goto fail;
    }
    w->bookmarks = fk_rq_param_bool(rq, "allowWatchBookmarks");
    if (sie) {
        if (!match || strcmp(match, "NotOlderThan")) {
            err = fk_status_new(422, "Invalid",
                                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
                                "Forbidden: sendInitialEvents requires setting "
                                "resourceVersionMatch to NotOlderThan",
                                NULL, NULL, NULL);
            goto fail;
        }
        if (!w->bookmarks) {
            err = fk_status_new(422, "Invalid",
                                "ListOptions.meta.k8s.io \"\" is invalid: allowWatchBookmarks: "
                                "Forbidden: sendInitialEvents requires setting "
                                "allowWatchBookmarks to true",
                                NULL, NULL, NULL);
            goto fail;
        }
    } else if (match && match[0]) {
        err = fk_status_new(422, "Invalid",
                            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
                            "Forbidden: resourceVersionMatch is forbidden for watch unless "
                            "sendInitialEvents is provided",
                            NULL, NULL, NULL);
        goto fail;
    }
    if (rvp && rvp[0] && strcmp(rvp, "0")) {
        char *end;
        from = strtoull(rvp, &end, 10);
        if (*end || rvp[0] == '-') {
            snprintf(msg, sizeof(msg), "invalid resource version: %s", rvp);
            err = fk_status_new(400, "BadRequest", msg, NULL, NULL, NULL);
            goto fail;
        }
    } else if (!initial_events) {
        synthetic = 1; /* "" and "0": the current state as ADDED, then changes */
    }
    if (from > s->rv) {
        /* The watch cache would wait ~3 s for this version, then give up. */
        snprintf(msg, sizeof(msg), "Too large resource version: %" PRIu64 ", current: %" PRIu64,
                 from, s->rv);
        err = fk_status_new(504, "Timeout", msg, NULL, NULL,
                            json_pack("[{s:s, s:s}]", "reason", "ResourceVersionTooLarge",
                                      "message", "Too large resource version"));
        if (err)
            json_object_set_new(json_object_get(err, "details"), "retryAfterSeconds",
                                json_integer(1));
        goto fail;
    }
    if (app->faults.watch_gone_next > 0) {
        app->faults.watch_gone_next--;
        snprintf(msg, sizeof(msg), "too old resource version: %" PRIu64 " (%" PRIu64 ")", from,
                 s->rv);
        free(w->ns);
        free(w->name);
        fk_selector_free(w->ls);
        fk_selector_free(w->fs);
        free(w);
        reply_error_event(rq, fk_status_new(410, "Expired", msg, NULL, NULL, NULL));
        return;
    }
    if (from && !initial_events && from < fk_store_oldest_rv(s)) {
        snprintf(msg, sizeof(msg), "too old resource version: %" PRIu64 " (%" PRIu64 ")", from,
                 fk_store_oldest_rv(s));
        free(w->ns);
        free(w->name);
        fk_selector_free(w->ls);
        fk_selector_free(w->fs);
        free(w);
        reply_error_event(rq, fk_status_new(410, "Expired", msg, NULL, NULL, NULL));
        return;
    }
    w->bookmark_ev = event_new(app->base, -1, EV_PERSIST, bookmark_cb, w);
    w->timeout_ev = evtimer_new(app->base, timeout_cb, w);
    w->close_ev = evtimer_new(app->base, close_cb, w);
    if (!w->bookmark_ev || !w->timeout_ev || !w->close_ev)
        goto oom;
    w->held = fk_hold(rq, watch_closed, w);
    if (!w->held)
        goto oom;
    w->rq = rq;
    w->next = watches;
    if (watches)
        watches->prev = w;
    watches = w;
    nwatches++;

    evhttp_add_header(evhttp_request_get_output_headers(rq->req), "Content-Type",
                      "application/json");
    if (rq->log)
        json_object_set_new(rq->log, "status", json_integer(200));
    evhttp_send_reply_start(rq->req, 200, "OK");

    w->close_after = app->faults.watch_close_events;
    w->close_drop = app->faults.watch_close_drop;
    if (synthetic || initial_events) {
        if (send_initial(w) < 0) {
            schedule_close(w, 1);
            return;
        }
        w->rv = s->rv;
        if (initial_events) {
            json_t *bm = bookmark_obj(w, 1);
            if (!bm) {
                schedule_close(w, 1);
                return;
            }
            send_event(w, "BOOKMARK", bm);
            json_decref(bm);
        }
    } else {
        w->rv = from;
        fk_store_replay(s, from, replay_cb, w);
        if (w->rv < from)
            w->rv = from;
    }
    if (w->bookmarks && app->bookmark_ms > 0) {
        struct timeval tv = {app->bookmark_ms / 1000, (app->bookmark_ms % 1000) * 1000};
        evtimer_add(w->bookmark_ev, &tv);
    }
    if (tos && atoi(tos) > 0) {
        struct timeval tv = {atoi(tos), 0};
        evtimer_add(w->timeout_ev, &tv);
    }
    if (app->faults.watch_close_ms > 0) {
        struct timeval tv = {app->faults.watch_close_ms / 1000,
                             (app->faults.watch_close_ms % 1000) * 1000};
        evtimer_add(w->close_ev, &tv); /* close_cb honours close_drop */
    }
    return;
oom:
    err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
fail:
    if (w) {
        if (w->bookmark_ev)
            event_free(w->bookmark_ev);
        if (w->timeout_ev)
            event_free(w->timeout_ev);
        if (w->close_ev)
            event_free(w->close_ev);
        fk_selector_free(w->ls);
        fk_selector_free(w->fs);
        free(w->ns);
        free(w->name);
        free(w);
    }
    fk_reply_status(rq, err);
}

/* See fk.h. */
void
fk_watch_close_all(struct fk_app *app, int drop)
{
    struct fk_watch *w;
    (void)app;
    for (w = watches; w; w = w->next) {
        w->closing = 0;
        schedule_close(w, drop);
    }
}

/* See fk.h. */
void
fk_watch_shutdown(struct fk_app *app)
{
    (void)app;
    while (watches)
        watch_end(watches);
    send_event_cb(NULL, NULL, NULL, NULL, NULL); /* frees the event buffer */
}
