/*
 * events: the Event recorder. Events about objects are written one at a
 * time, in order, and aggregated as client-go's recorder does
 * (tools/record/events_cache.go, eventLogger): the first Event with a key
 * (see core_kube_event_key) is created; later ones with the same key PATCH
 * that Event's count and lastTimestamp. If the Event is gone (404), a new
 * one is created. The cache of keys is bounded: two generations of at most
 * KUBE_EVENT_CACHE entries each, the older dropped when the newer fills.
 */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"
#include "kube.h"
#include "reactor.h"

#define KUBE_EVENT_CACHE 4096

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

/* Start the create (phase 1) or patch (phase 0) of op. 0 or -errno. */
static int
event_send(plb_kube_op *op)
{
    plb_kube *k = op->k;
    json_t *e = op->phase == 0 ? cache_find(k, op->ev_key) : NULL;
    json_t *md = json_object_get(op->ev_body, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    char *path, *body;
    const char *ctype;

    if (e) {
        char ts[32];
        json_int_t count = json_integer_value(json_object_get(e, "count")) + 1;
        core_kube_rfc3339(op->ev_ns, ts, sizeof(ts));
        json_t *patch = json_pack("{s:I, s:s}", "count", count, "lastTimestamp", ts);
        path = core_kube_path("v1", "events", json_string_value(json_object_get(e, "namespace")),
                              json_string_value(json_object_get(e, "name")), NULL);
        body = patch ? core_obj_dump(KOBJ(patch)) : NULL;
        json_decref(patch);
        ctype = "application/merge-patch+json";
        op->phase = 0;
    } else {
        path = core_kube_path("v1", "events", ns, NULL, NULL);
        body = core_obj_dump(KOBJ(op->ev_body));
        ctype = "application/json";
        op->phase = 1;
    }
    core_free(op->path);
    core_free(op->body);
    op->path = path;
    op->body = body;
    op->method = e ? "PATCH" : "POST";
    op->ctype = ctype;
    if (!path || !body)
        return -ENOMEM;
    return core_kube_op_send(op);
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
    json_decref(op->ev_body);
    op->ev_key = NULL;
    op->ev_body = NULL;
}

/* A response to the patch (phase 0) or create (phase 1) of op. */
static void
event_response(plb_kube_op *op, int status, json_t *obj, const char *reason, const char *message)
{
    plb_kube *k = op->k;
    if (op->phase == 0 && status == 404) {
        /* The Event we aggregate into is gone: create a new one. */
        json_object_del(k->ev_cur, op->ev_key);
        op->phase = 1;
        int rc = event_send(op);
        if (rc)
            core_kube_op_fail(op, rc);
        return;
    }
    if (status >= 200 && status < 300 && json_is_object(obj)) {
        json_t *md = json_object_get(obj, "metadata");
        json_t *entry =
            json_pack("{s:O?, s:O?, s:O?}", "name", json_object_get(md, "name"), "namespace",
                      json_object_get(md, "namespace"), "count", json_object_get(obj, "count"));
        if (entry)
            cache_put(k, op->ev_key, entry);
    }
    core_kube_op_finish(op, status, PLB_HTTP_OK, reason, message, obj);
}

/* Events are writes: fenced like every other (a gated instance records
 * none while its gate is closed, as only the leader's controllers record
 * them in a client-go deployment). */
static const struct core_kube_kind event_kind = {
    .name = "event",
    .write = 1,
    .response = event_response,
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
