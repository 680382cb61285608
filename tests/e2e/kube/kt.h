/*
 * kt: helpers shared by the end-to-end suites of the Kubernetes client.
 * Header-only (static functions) so each suite is one executable.
 *
 * A test starts prismlb-fake-kube (HTTPS, client certificates; see
 * tests/fakes/kube/README.md) by PID on ephemeral ports, writes a
 * kubeconfig for it, and drives the core's client on its own event base.
 * Every loop run is bounded.
 */
#ifndef PRISMLB_TEST_KT_H
#define PRISMLB_TEST_KT_H

#include <check.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "fakeproc.h"
#include "httpc.h"
#include "kube-internal.h"
#include "kube.h"
#include "kubelog.h"
#include "reactor.h"
#include "testutil.h"

struct kt {
    struct fake f;
    struct event_base *base;
    struct core_httpc *httpc;
    plb_kube *k;
    char kubeconfig[4300];
};

/* Write a kubeconfig for server url (with prefix appended) using the
 * fake's CA and, when cert, its client certificate; tokfile: a tokenFile. */
static inline void
kt_write_kubeconfig(struct kt *t, const char *path, const char *prefix, int cert,
                    const char *tokfile)
{
    char server[4400];
    snprintf(server, sizeof(server), "%s%s", t->f.server[0], prefix ? prefix : "");
    /* The certificates by their bare names: the client finds them beside
     * the kubeconfig, in the fake's directory. */
    const struct tu_kubeconfig kc = {
        .server = server, .no_client_cert = !cert, .token_file = tokfile};
    ck_assert_int_eq(tu_write_kubeconfig(path, &kc), 0);
}

/* New client from kubeconfig path (fails the test on error). */
static inline plb_kube *
kt_client(struct kt *t, const struct plb_kube_opts *o)
{
    char err[512];
    plb_kube *k = core_kube_new(t->httpc, t->base, NULL, o, "test", err, sizeof(err));
    ck_assert_msg(k != NULL, "core_kube_new: %s", err);
    return k;
}

/* Start the fake (extra args NULL-terminated, may be NULL), the loop and a
 * client with a client certificate; prefix is appended to the server URL. */
static inline void
kt_start(struct kt *t, const char *const *extra, const char *prefix)
{
    memset(t, 0, sizeof(*t));
    ck_assert_int_eq(fake_start(&t->f, extra), 0);
    t->base = core_event_base_new();
    ck_assert_ptr_nonnull(t->base);
    t->httpc = core_httpc_new(t->base);
    ck_assert_ptr_nonnull(t->httpc);
    snprintf(t->kubeconfig, sizeof(t->kubeconfig), "%s/kubeconfig", t->f.dir);
    kt_write_kubeconfig(t, t->kubeconfig, prefix, 1, NULL);
    struct plb_kube_opts o = {.size = sizeof(o), .kubeconfig = t->kubeconfig};
    t->k = kt_client(t, &o);
}

static inline void
kt_stop(struct kt *t)
{
    core_kube_free(t->k);
    core_httpc_free(t->httpc);
    event_base_free(t->base);
    ck_assert_int_eq(fake_stop(&t->f), 0);
}

/* Run the loop for ms. */
static inline void
kt_run_ms(struct kt *t, int ms)
{
    long long end = tu_now_ms() + ms;
    while (tu_now_ms() < end) {
        struct timeval tv = {0, 10000};
        event_base_loopexit(t->base, &tv);
        event_base_dispatch(t->base);
    }
}

/* Run until cond(arg) or ms pass. 1 if cond held. */
static inline int
kt_run_until(struct kt *t, int (*cond)(void *), void *arg, int ms)
{
    long long end = tu_now_ms() + ms;
    while (!cond(arg) && tu_now_ms() < end) {
        struct timeval tv = {0, 5000};
        event_base_loopexit(t->base, &tv);
        event_base_dispatch(t->base);
    }
    return cond(arg);
}

/* Admin API call; the parsed answer (new). Fails the test on error. */
static inline json_t *
kt_admin(struct kt *t, const char *method, const char *path, const char *body)
{
    struct http_res r;
    ck_assert_int_eq(fake_admin(&t->f, method, path, body, &r), 0);
    ck_assert_msg(r.status == 200, "admin %s %s: %ld %s", method, path, r.status, r.body);
    json_t *j = res_json(&r);
    http_res_free(&r);
    ck_assert_ptr_nonnull(j);
    return j;
}

static inline void
kt_faults(struct kt *t, const char *json)
{
    json_decref(kt_admin(t, "POST", "/faults", json));
}

static inline const char *
kt_md(json_t *o, const char *key)
{
    return json_string_value(json_object_get(json_object_get(o, "metadata"), key));
}

/* The fake's objects of resource ("leases.coordination.k8s.io") in cluster
 * ("" for the root) and namespace ns (NULL: all) as key ->
 * resourceVersion (new). */
static inline json_t *
kt_store(struct kt *t, const char *cluster, const char *resource, const char *ns)
{
    char path[512];
    snprintf(path, sizeof(path), "/store?cluster=%s&resource=%s", cluster, resource);
    json_t *d = kt_admin(t, "GET", path, NULL);
    json_t *arr = json_object_get(json_object_get(d, "objects"), resource);
    ck_assert_msg(json_is_array(arr), "no %s in the store dump", resource);
    json_t *m = json_object();
    size_t i;
    json_t *o;
    char key[512];
    json_array_foreach(arr, i, o)
    {
        ck_assert_int_eq(core_kube_obj_key(o, key, sizeof(key)), 0);
        if (ns && (!kt_md(o, "namespace") || strcmp(kt_md(o, "namespace"), ns) != 0))
            continue;
        json_object_set_new(m, key, json_string(core_kube_obj_rv(o)));
    }
    json_decref(d);
    return m;
}

/* Number of request-log entries whose method is method and whose path
 * contains every fragment given (NULL-terminated). */
static inline int
kt_requests(struct kt *t, const char *method, const char *frag1, const char *frag2)
{
    json_t *d = kt_admin(t, "GET", "/requests", NULL);
    int n = tu_kube_requests(d, method, frag1, frag2, NULL, 0);
    json_decref(d);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Calls.                                                                    */

struct kres {
    int done;
    int status;
    enum plb_http_error error;
    char reason[64];
    char message[512];
    json_t *obj; /* new reference, or NULL */
};

static inline void
kres_cb(plb_kube_op *op, const struct plb_kube_result *r, void *arg)
{
    struct kres *k = arg;
    (void)op;
    k->done++;
    k->status = r->status;
    k->error = r->error;
    snprintf(k->reason, sizeof(k->reason), "%s", r->reason);
    snprintf(k->message, sizeof(k->message), "%s", r->message);
    json_decref(k->obj);
    k->obj = json_incref((json_t *)r->obj);
}

static inline int
kres_is_done(void *arg)
{
    return ((struct kres *)arg)->done > 0;
}

/* Wait for a call started with kres_cb; fails the test on timeout. */
static inline void
kt_wait(struct kt *t, struct kres *r, plb_kube_op *op)
{
    ck_assert_ptr_nonnull(op);
    ck_assert_msg(kt_run_until(t, kres_is_done, r, 20000), "call timed out");
}

static inline void
kres_clear(struct kres *r)
{
    json_decref(r->obj);
    memset(r, 0, sizeof(*r));
}

/* Create n Leases "<prefix>-<i>" in ns, at most 64 in flight; each carries
 * pad bytes of annotation (objects of about pad + 300 bytes). */
struct kt_bulk {
    int started, done, failed;
};

static inline void
kt_bulk_cb(plb_kube_op *op, const struct plb_kube_result *r, void *arg)
{
    struct kt_bulk *b = arg;
    (void)op;
    b->done++;
    if (r->status != 201)
        b->failed++;
}

static inline int
kt_bulk_idle(void *arg)
{
    struct kt_bulk *b = arg;
    return b->done == b->started;
}

static inline void
kt_bulk_create(struct kt *t, plb_kube *k, const char *ns, const char *prefix, int n, size_t pad)
{
    struct kt_bulk b = {0};
    char *padding = malloc(pad + 1);
    ck_assert_ptr_nonnull(padding);
    memset(padding, 'x', pad);
    padding[pad] = '\0';
    struct plb_kube_ref ref = {
        sizeof(struct plb_kube_ref), "coordination.k8s.io/v1", "leases", ns, NULL, NULL};
    for (int i = 0; i < n; i++) {
        while (b.started - b.done >= 64) {
            struct timeval tv = {0, 2000};
            event_base_loopexit(t->base, &tv);
            event_base_dispatch(t->base);
        }
        char body[512];
        int err = 0;
        json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s}}", "apiVersion",
                              "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", "",
                              "namespace", ns, "annotations", "pad", padding, "spec",
                              "holderIdentity", "nobody");
        snprintf(body, sizeof(body), "%s-%d", prefix, i);
        json_object_set_new(json_object_get(o, "metadata"), "name", json_string(body));
        char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        plb_kube_op *op = core_kube_create(k, &ref, text, kt_bulk_cb, &b, &err);
        free(text);
        ck_assert_msg(op != NULL, "create: %d", err);
        b.started++;
    }
    ck_assert(kt_run_until(t, kt_bulk_idle, &b, 120000));
    ck_assert_int_eq(b.failed, 0);
    free(padding);
}

/* Run the loop until the fake has at least n open watches (the informer's
 * watch follows its list at once, but reaches the fake a moment later). */
static inline void
kt_wait_watches(struct kt *t, int n)
{
    long long end = tu_now_ms() + 20000;
    for (;;) {
        json_t *st = kt_admin(t, "GET", "/state", NULL);
        int w = (int)json_integer_value(json_object_get(st, "watches"));
        json_decref(st);
        if (w >= n)
            return;
        ck_assert_msg(tu_now_ms() < end, "the fake has %d watches, want %d", w, n);
        kt_run_ms(t, 20);
    }
}

/* Create n Leases "<prefix>-<i>" in ns inside the fake (admin /bulk: no
 * HTTP round trip per object), each with pad bytes of annotation. */
static inline void
kt_seed(struct kt *t, const char *ns, const char *prefix, int n, int pad)
{
    char body[512];
    snprintf(body, sizeof(body),
             "{\"op\":\"create\",\"resource\":\"leases.coordination.k8s.io\","
             "\"namespace\":\"%s\",\"namePrefix\":\"%s-\",\"count\":%d,"
             "\"payloadBytes\":%d}",
             ns, prefix, n, pad);
    json_t *r = kt_admin(t, "POST", "/bulk", body);
    ck_assert_int_eq(json_integer_value(json_object_get(r, "done")), n);
    json_decref(r);
}

#endif
