/*
 * events: the Event recorder. Events about objects are written one at a
 * time, in order, and aggregated as client-go's recorder does
 * (tools/record/events_cache.go, eventLogger): the first Event with a key
 * (see core_kube_event_key) is created; later ones with the same key PATCH
 * that Event's count and lastTimestamp. If the Event is gone (404), a new
 * one is created. The cache of keys is bounded: two generations of at most
 * KUBE_EVENT_CACHE entries each, the older dropped when the newer fills.
 *
 * A key the cache does not hold (the first of its kind since the daemon
 * started) is looked up on the server first, so that a warning repeated
 * after a restart bumps the Event the previous run created instead of
 * adding an identical one (client-go's recorder, whose cache lives in
 * memory and whose Event names carry the clock, creates a new one then).
 * The lookup lists the namespace's Events with a field selector on the
 * object, reason, type and source (core_kube_event_selector), at most
 * KUBE_EVENT_LOOKUP_PAGES pages of KUBE_EVENT_LOOKUP_LIMIT, and compares
 * each one's whole key; of several matches the latest (lastTimestamp, then
 * count) is bumped. A lookup that fails in any way creates the Event.
 *
 *   phases:  LOOKUP --found--> PATCH --404--> CREATE
 *              |  (nothing, error)              ^
 *              +--------------------------------+
 *   a key in the cache starts at PATCH.
 */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"
#include "kube.h"
#include "reactor.h"

#define KUBE_EVENT_CACHE 4096
#define KUBE_EVENT_LOOKUP_LIMIT "100"
#define KUBE_EVENT_LOOKUP_PAGES 4

enum ev_phase { EV_PATCH = 0, EV_CREATE = 1, EV_LOOKUP = 2 };

int
core_kube_events_init(plb_kube *k)
{
    k->ev_cur = json_object();
    k->ev_old = json_object();
    return k->ev_cur && k->ev_old ? 0 : -ENOMEM;
}

void
core_kube_events_fini(plb_kube *k)
{
    json_decref(k->ev_cur);
    json_decref(k->ev_old);
    k->ev_cur = k->ev_old = NULL;
}

/* The cache entry {name, namespace, count} for key, moved to the current
 * generation. Borrowed or NULL. */
static json_t *
cache_find(plb_kube *k, const char *key)
{
    json_t *e = json_object_get(k->ev_cur, key);
    if (e)
        return e;
    e = json_object_get(k->ev_old, key);
    if (!e)
        return NULL;
    json_incref(e);
    json_object_del(k->ev_old, key);
    if (json_object_set_new(k->ev_cur, key, e) < 0)
        return NULL;
    return e;
}

static void
cache_put(plb_kube *k, const char *key, json_t *entry)
{
    if (json_object_size(k->ev_cur) >= KUBE_EVENT_CACHE) {
        json_object_clear(k->ev_old);
        json_t *t = k->ev_old;
        k->ev_old = k->ev_cur;
        k->ev_cur = t;
    }
    json_object_del(k->ev_old, key);
    json_object_set_new(k->ev_cur, key, entry); /* on ENOMEM: not aggregated, no harm */
}

/* Set op's next request and send it. Steals path and body (either may be
 * NULL after ENOMEM). 0 or -errno. */
static int
ev_request(plb_kube_op *op, enum ev_phase phase, const char *method, const char *ctype, char *path,
           char *body)
{
    core_free(op->path);
    core_free(op->body);
    op->path = path;
    op->body = body;
    op->method = method;
    op->ctype = ctype;
    op->phase = phase;
    if (!path || (!body && strcmp(method, "GET") != 0))
        return -ENOMEM;
    return core_kube_op_send(op);
}

/* PATCH count + 1 and lastTimestamp into the Event of cache entry e. */
static int
ev_patch(plb_kube_op *op, json_t *e)
{
    char ts[32];
    json_int_t count = json_integer_value(json_object_get(e, "count")) + 1;
    core_kube_rfc3339(op->ev_ns, ts, sizeof(ts));
    json_t *patch = json_pack("{s:I, s:s}", "count", count, "lastTimestamp", ts);
    char *path = core_kube_path("v1", "events", json_string_value(json_object_get(e, "namespace")),
                                json_string_value(json_object_get(e, "name")), NULL);
    char *body = patch ? core_obj_dump(KOBJ(patch)) : NULL;
    json_decref(patch);
    return ev_request(op, EV_PATCH, "PATCH", "application/merge-patch+json", path, body);
}

static int
ev_create(plb_kube_op *op)
{
    json_t *md = json_object_get(op->ev_body, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    return ev_request(op, EV_CREATE, "POST", "application/json",
                      core_kube_path("v1", "events", ns, NULL, NULL),
                      core_obj_dump(KOBJ(op->ev_body)));
}

/* List the next page of the Events that may carry op's key. */
static int
ev_lookup(plb_kube_op *op)
{
    json_t *body = op->ev_body;
    json_t *md = json_object_get(body, "metadata");
    json_t *io = json_object_get(body, "involvedObject");
    json_t *src = json_object_get(body, "source");
    struct core_kube_evsrc s = {json_string_value(json_object_get(src, "component")), NULL};
    json_t *inv = json_pack("{s:{s:s?, s:s?}}", "metadata", "name",
                            json_string_value(json_object_get(io, "name")), "uid",
                            json_string_value(json_object_get(io, "uid")));
    char *sel =
        inv ? core_kube_event_selector(&s, inv, json_string_value(json_object_get(io, "kind")),
                                       json_string_value(json_object_get(io, "apiVersion")),
                                       json_string_value(json_object_get(body, "type")),
                                       json_string_value(json_object_get(body, "reason")))
            : NULL;
    char *path =
        sel ? core_kube_path("v1", "events", json_string_value(json_object_get(md, "namespace")),
                             NULL, NULL)
            : NULL;
    json_decref(inv);
    if (path && (core_kube_qappend(&path, "fieldSelector", sel) < 0 ||
                 core_kube_qappend(&path, "limit", KUBE_EVENT_LOOKUP_LIMIT) < 0 ||
                 (op->ev_cont && core_kube_qappend(&path, "continue", op->ev_cont) < 0))) {
        core_free(path);
        path = NULL;
    }
    core_free(sel);
    return ev_request(op, EV_LOOKUP, "GET", NULL, path, NULL);
}

/* Start op: bump the cached Event of its key, or look the key up. */
static int
event_send(plb_kube_op *op)
{
    json_t *e = cache_find(op->k, op->ev_key);
    return e ? ev_patch(op, e) : ev_lookup(op);
}

/* Start the Event at the head of k->evq, if it is not running. */
static void
events_run(plb_kube *k)
{
    if (k->evq && !k->evq->req) {
        plb_kube_op *op = k->evq;
        int rc = event_send(op);
        if (rc)
            core_kube_op_fail(op, rc); /* its resume runs the queue again */
    }
}

/* Take op off k->evq, wherever it waits. */
static void
event_leave(plb_kube_op *op)
{
    plb_kube *k = op->k;
    plb_kube_op **pp = &k->evq, *prev = NULL;
    while (*pp && *pp != op) {
        prev = *pp;
        pp = &(*pp)->qnext;
    }
    if (!*pp)
        return;
    *pp = op->qnext;
    if (k->evq_tail == op)
        k->evq_tail = prev;
    op->qnext = NULL;
}

static void
event_release(plb_kube_op *op)
{
    core_free(op->ev_key);
    core_free(op->ev_cont);
    json_decref(op->ev_body);
    json_decref(op->ev_found);
}

/* The cache entry {name, namespace, count, last} of Event ev (borrowed).
 * New or NULL. */
static json_t *
entry_of(json_t *ev)
{
    json_t *md = json_object_get(ev, "metadata");
    return json_pack("{s:O?, s:O?, s:O?, s:O?}", "name", json_object_get(md, "name"), "namespace",
                     json_object_get(md, "namespace"), "count", json_object_get(ev, "count"),
                     "last", json_object_get(ev, "lastTimestamp"));
}

/* 1 when Event entry a is a better match than b (NULL): the later
 * lastTimestamp (RFC 3339 in UTC compares as text), then the higher count. */
static int
better(json_t *a, json_t *b)
{
    if (!b)
        return 1;
    const char *la = json_string_value(json_object_get(a, "last"));
    const char *lb = json_string_value(json_object_get(b, "last"));
    int c = strcmp(la ? la : "", lb ? lb : "");
    if (c)
        return c > 0;
    return json_integer_value(json_object_get(a, "count")) >
           json_integer_value(json_object_get(b, "count"));
}

/* A lookup page (list, borrowed; NULL or not a list: the lookup failed)
 * arrived: keep the best match, read the next page, or go on. 0 or -errno. */
static int
lookup_page(plb_kube_op *op, int status, json_t *list)
{
    json_t *items = json_object_get(list, "items"), *ev;
    size_t i;
    if (status != 200 || !json_is_array(items))
        return op->ev_found ? ev_patch(op, op->ev_found) : ev_create(op);
    json_array_foreach(items, i, ev)
    {
        char *key = core_kube_event_item_key(ev);
        json_t *name = json_object_get(json_object_get(ev, "metadata"), "name");
        if (key && json_is_string(name) && json_is_integer(json_object_get(ev, "count")) &&
            strcmp(key, op->ev_key) == 0) {
            json_t *e = entry_of(ev);
            if (e && better(e, op->ev_found)) {
                json_decref(op->ev_found);
                op->ev_found = e;
            } else {
                json_decref(e);
            }
        }
        core_free(key);
    }
    const char *cont =
        json_string_value(json_object_get(json_object_get(list, "metadata"), "continue"));
    core_free(op->ev_cont);
    op->ev_cont = NULL;
    if (cont && *cont && ++op->ev_pages < KUBE_EVENT_LOOKUP_PAGES) {
        if (!(op->ev_cont = core_strdup(cont)))
            return -ENOMEM;
        return ev_lookup(op);
    }
    if (!op->ev_found)
        return ev_create(op);
    /* The previous run's Event: aggregate into it from now on. */
    json_t *e = json_incref(op->ev_found);
    cache_put(op->k, op->ev_key, e);
    return ev_patch(op, e);
}

/* A response to the lookup, patch or create of op. */
static void
event_response(plb_kube_op *op, int status, json_t *obj, const char *reason, const char *message)
{
    plb_kube *k = op->k;
    int rc = 0;
    if (op->phase == EV_LOOKUP) {
        rc = lookup_page(op, status, obj);
    } else if (op->phase == EV_PATCH && status == 404) {
        /* The Event we aggregate into is gone: create a new one. */
        json_object_del(k->ev_cur, op->ev_key);
        json_object_del(k->ev_old, op->ev_key);
        rc = ev_create(op);
    } else {
        if (status >= 200 && status < 300 && json_is_object(obj)) {
            json_t *entry = entry_of(obj);
            if (entry)
                cache_put(k, op->ev_key, entry);
        }
        core_kube_op_finish(op, status, PLB_HTTP_OK, reason, message, obj);
        return;
    }
    if (rc)
        core_kube_op_fail(op, rc);
}

/* The lookup got no answer (timeout, connection refused...): create. */
static int
event_unanswered(plb_kube_op *op, enum plb_http_error error)
{
    (void)error;
    if (op->phase != EV_LOOKUP)
        return 0;
    int rc = op->ev_found ? ev_patch(op, op->ev_found) : ev_create(op);
    if (rc)
        core_kube_op_fail(op, rc);
    return 1;
}

/* Events are writes: fenced like every other (a gated instance records
 * none while its gate is closed, as only the leader's controllers record
 * them in a client-go deployment). */
static const struct core_kube_kind event_kind = {
    .name = "event",
    .write = 1,
    .response = event_response,
    .unanswered = event_unanswered,
    .leave = event_leave,
    .resume = events_run,
    .release = event_release,
};

plb_kube_op *
core_kube_event(plb_kube *k, const struct plb_kube_event *ev, plb_kube_done_cb done, void *arg,
                int *err)
{
    static int64_t last_ns;
    int dummy;
    if (!err)
        err = &dummy;
    if (!ev || ev->size < sizeof(struct plb_kube_event) || !ev->involved || !ev->reason ||
        !ev->message) {
        *err = -EINVAL;
        return NULL;
    }
    plb_kube_op *op = NULL;
    struct core_kube_evsrc src = {ev->component ? ev->component : "prismlb", ev->host};
    /* Distinct names even for Events recorded within one clock tick. */
    int64_t now = core_wall_ms() * 1000000;
    if (now <= last_ns)
        now = last_ns + 1;
    last_ns = now;

    op = core_kube_op_new(k, &event_kind, done, arg, err);
    if (!op)
        return NULL;
    op->ev_ns = now;
    op->ev_key = core_kube_event_key(&src, KJSON(ev->involved), ev->kind, ev->api_version,
                                     ev->type ? ev->type : "Normal", ev->reason, ev->message);
    op->ev_body = core_kube_event_body(&src, KJSON(ev->involved), ev->kind, ev->api_version,
                                       ev->type, ev->reason, ev->message, now);
    if (!op->ev_key || !op->ev_body) {
        *err = op->ev_key ? -EINVAL : -ENOMEM; /* no body: the object has no name */
        core_kube_op_free(op);
        return NULL;
    }
    if (k->evq_tail)
        k->evq_tail->qnext = op;
    else
        k->evq = op;
    k->evq_tail = op;
    if (k->evq == op) {
        int rc = event_send(op);
        if (rc) {
            event_leave(op);
            core_kube_op_free(op); /* never reported: the caller gets the error */
            *err = rc;
            return NULL;
        }
    }
    return op;
}
