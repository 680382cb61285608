/*
 * End-to-end suite of the client's calls against prismlb-fake-kube: get,
 * create (and AlreadyExists), update with optimistic concurrency (409 on a
 * stale resourceVersion returned to the caller), merge, strategic and JSON
 * patches, the /status subresource, delete with uid and resourceVersion
 * preconditions, the read-modify-write helper retrying after a conflict,
 * Events aggregated like client-go's recorder, and cancellation.
 */
#include "kt.h"

static const struct plb_kube_ref lease_ref = {
    sizeof(struct plb_kube_ref), "coordination.k8s.io/v1", "leases", "default", "lead", NULL};

static const char lease_body[] = "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                                 "\"metadata\":{\"name\":\"lead\",\"namespace\":\"default\"},"
                                 "\"spec\":{\"holderIdentity\":\"a\",\"leaseDurationSeconds\":15}}";

static void
create_lease(struct kt *t, struct kres *r)
{
    kt_wait(t, r, core_kube_create(t->k, &lease_ref, lease_body, kres_cb, r, NULL));
    ck_assert_int_eq(r->status, 201);
}

START_TEST(create_get_and_already_exists)
{
    struct kt t;
    struct kres r = {0};
    kt_start(&t, NULL, NULL);
    create_lease(&t, &r);
    ck_assert_str_eq(kt_md(r.obj, "name"), "lead");
    ck_assert_ptr_nonnull(kt_md(r.obj, "uid"));
    ck_assert_ptr_nonnull(kt_md(r.obj, "resourceVersion"));
    kres_clear(&r);
    kt_wait(&t, &r, core_kube_create(t.k, &lease_ref, lease_body, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 409);
    ck_assert_str_eq(r.reason, "AlreadyExists");
    ck_assert_str_eq(json_string_value(json_object_get(r.obj, "kind")), "Status");
    kres_clear(&r);
    kt_wait(&t, &r, core_kube_get(t.k, &lease_ref, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(r.obj, "spec"), "holderIdentity")), "a");
    kres_clear(&r);
    struct plb_kube_ref missing = lease_ref;
    missing.name = "nope";
    kt_wait(&t, &r, core_kube_get(t.k, &missing, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 404);
    ck_assert_str_eq(r.reason, "NotFound");
    ck_assert_ptr_nonnull(strstr(r.message, "nope"));
    kres_clear(&r);
    /* A collection GET is a list. */
    struct plb_kube_ref coll = lease_ref;
    coll.name = NULL;
    kt_wait(&t, &r, core_kube_get(t.k, &coll, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(json_array_size(json_object_get(r.obj, "items")), 1);
    kres_clear(&r);
    /* Bad arguments fail at once, no call made. */
    int err = 0;
    ck_assert_ptr_null(core_kube_create(t.k, &lease_ref, "{not json", kres_cb, &r, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(core_kube_update(t.k, &coll, lease_body, kres_cb, &r, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(core_kube_get(t.k, &lease_ref, NULL, NULL, &err));
    ck_assert_uint_eq(core_kube_active(t.k), 0);
    kt_stop(&t);
}
END_TEST

START_TEST(update_with_resource_version_and_409)
{
    struct kt t;
    struct kres r = {0};
    kt_start(&t, NULL, NULL);
    create_lease(&t, &r);
    json_t *v1 = json_deep_copy(r.obj);
    kres_clear(&r);
    /* Update from the current version: fine. */
    json_t *a = json_deep_copy(v1);
    json_object_set_new(json_object_get(a, "spec"), "holderIdentity", json_string("b"));
    char *text = json_dumps(a, JSON_COMPACT);
    kt_wait(&t, &r, core_kube_update(t.k, &lease_ref, text, kres_cb, &r, NULL));
    free(text);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_ne(kt_md(r.obj, "resourceVersion"), kt_md(v1, "resourceVersion"));
    kres_clear(&r);
    /* Update from the stale version: 409 Conflict, returned as is. */
    json_object_set_new(json_object_get(a, "spec"), "holderIdentity", json_string("c"));
    text = json_dumps(a, JSON_COMPACT);
    kt_wait(&t, &r, core_kube_update(t.k, &lease_ref, text, kres_cb, &r, NULL));
    free(text);
    ck_assert_int_eq(r.status, 409);
    ck_assert_str_eq(r.reason, "Conflict");
    ck_assert_int_eq(r.error, PLB_HTTP_OK);
    kres_clear(&r);
    kt_wait(&t, &r, core_kube_get(t.k, &lease_ref, kres_cb, &r, NULL));
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(r.obj, "spec"), "holderIdentity")), "b");
    kres_clear(&r);
    json_decref(a);
    json_decref(v1);
    kt_stop(&t);
}
END_TEST

/* Read-modify-write: the first attempt is made stale by another writer. */
struct rmw {
    struct kres r; /* first: done gets the same arg as mutate */
    struct kt *t;
    int calls;
    int interfere;
};

static int
take_lease(plb_obj *obj, void *arg)
{
    struct rmw *m = arg;
    static int transitions = 7;
    m->calls++;
    if (m->interfere-- > 0) {
        /* Another client writes between our read and our write. */
        struct http_res res;
        char patch[64];
        snprintf(patch, sizeof(patch), "{\"spec\":{\"leaseTransitions\":%d}}", transitions++);
        ck_assert_int_eq(fake_api(&m->t->f, 0, "PATCH",
                                  "/apis/coordination.k8s.io/v1/namespaces/default/leases/lead",
                                  "application/merge-patch+json", patch, 1, NULL, 10000, &res),
                         0);
        ck_assert_int_eq(res.status, 200);
        http_res_free(&res);
    }
    plb_obj *me = core_obj_new_str("me");
    ck_assert_int_eq(core_obj_set(obj, me, "spec", "holderIdentity", NULL), 0);
    /* A path through a string is refused; the value is consumed anyway. */
    ck_assert_int_eq(core_obj_set(obj, core_obj_new_int(1), "spec", "holderIdentity", "x", NULL),
                     -EINVAL);
    ck_assert_int_eq(core_obj_set(obj, core_obj_new_str("yes"), "metadata", "annotations",
                                  "prismlb.io/taken", NULL),
                     0);
    return 0;
}

START_TEST(modify_retries_after_conflict)
{
    struct kt t;
    struct kres r = {0};
    kt_start(&t, NULL, NULL);
    create_lease(&t, &r);
    kres_clear(&r);
    struct rmw m = {{0}, &t, 0, 1};
    kt_wait(&t, &m.r, core_kube_modify(t.k, &lease_ref, take_lease, 3, kres_cb, &m, NULL));
    r = m.r;
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(m.calls, 2); /* read, write 409, read again, write */
    json_t *spec = json_object_get(r.obj, "spec");
    ck_assert_str_eq(json_string_value(json_object_get(spec, "holderIdentity")), "me");
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "leaseTransitions")), 7);
    kres_clear(&r);
    ck_assert_int_eq(kt_requests(&t, "PUT", "/leases/lead", NULL), 2);
    /* Out of attempts: the 409 reaches the caller. */
    m = (struct rmw){{0}, &t, 0, 5};
    kt_wait(&t, &m.r, core_kube_modify(t.k, &lease_ref, take_lease, 2, kres_cb, &m, NULL));
    r = m.r;
    ck_assert_int_eq(r.status, 409);
    ck_assert_int_eq(m.calls, 2);
    kres_clear(&r);
    /* 404 is reported, mutate not called. */
    struct plb_kube_ref missing = lease_ref;
    missing.name = "nope";
    m = (struct rmw){{0}, &t, 0, 0};
    kt_wait(&t, &m.r, core_kube_modify(t.k, &missing, take_lease, 0, kres_cb, &m, NULL));
    r = m.r;
    ck_assert_int_eq(r.status, 404);
    ck_assert_int_eq(m.calls, 0);
    kres_clear(&r);
    kt_stop(&t);
}
END_TEST

struct dec {
    struct kres r;
    int rc;
};

static int
decline(plb_obj *obj, void *arg)
{
    (void)obj;
    return ((struct dec *)arg)->rc;
}

START_TEST(modify_callback_may_skip_or_decline)
{
    struct kt t;
    struct kres r = {0};
    kt_start(&t, NULL, NULL);
    create_lease(&t, &r);
    kres_clear(&r);
    struct dec d = {{0}, 1};
    kt_wait(&t, &d.r, core_kube_modify(t.k, &lease_ref, decline, 0, kres_cb, &d, NULL));
    ck_assert_int_eq(d.r.status, 200);
    ck_assert_int_eq(d.r.error, PLB_HTTP_OK);
    ck_assert_str_eq(kt_md(d.r.obj, "name"), "lead");
    kres_clear(&d.r);
    d.rc = -1;
    kt_wait(&t, &d.r, core_kube_modify(t.k, &lease_ref, decline, 0, kres_cb, &d, NULL));
    ck_assert_int_eq(d.r.error, PLB_HTTP_E_ABORTED);
    kres_clear(&d.r);
    ck_assert_int_eq(kt_requests(&t, "PUT", NULL, NULL), 0);
    kt_stop(&t);
}
END_TEST

START_TEST(patches_and_status)
{
    struct kt t;
    struct kres r = {0};
    kt_start(&t, NULL, NULL);
    struct plb_kube_ref svc = {
        sizeof(struct plb_kube_ref), "v1", "services", "default", "web", NULL};
    kt_wait(&t, &r,
            core_kube_create(t.k, &svc,
                             "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":"
                             "{\"name\":\"web\"},\"spec\":{\"type\":\"LoadBalancer\","
                             "\"ports\":[{\"name\":\"http\",\"port\":80}]}}",
                             kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 201);
    kres_clear(&r);
    /* merge patch of the object */
    kt_wait(&t, &r,
            core_kube_patch(t.k, &svc, PLB_KUBE_MERGE_PATCH,
                            "{\"metadata\":{\"labels\":{\"a\":\"1\"}}}", kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(r.obj, "metadata"), "labels"), "a")),
                     "1");
    kres_clear(&r);
    /* strategic merge patch: ports merge by port */
    kt_wait(&t, &r,
            core_kube_patch(t.k, &svc, PLB_KUBE_STRATEGIC_PATCH,
                            "{\"spec\":{\"ports\":[{\"name\":\"https\",\"port\":443}]}}", kres_cb,
                            &r, NULL));
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(r.obj, "spec"), "ports")), 2);
    kres_clear(&r);
    /* JSON patch */
    kt_wait(&t, &r,
            core_kube_patch(t.k, &svc, PLB_KUBE_JSON_PATCH,
                            "[{\"op\":\"add\",\"path\":\"/metadata/labels/b\","
                            "\"value\":\"2\"}]",
                            kres_cb, &r, NULL));
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.message);
    kres_clear(&r);
    /* merge patch of /status: the load balancer's address */
    struct plb_kube_ref status = svc;
    status.subresource = "status";
    kt_wait(&t, &r,
            core_kube_patch(t.k, &status, PLB_KUBE_MERGE_PATCH,
                            "{\"status\":{\"loadBalancer\":{\"ingress\":"
                            "[{\"ip\":\"203.0.113.7\"}]}}}",
                            kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    kres_clear(&r);
    kt_wait(&t, &r, core_kube_get(t.k, &svc, kres_cb, &r, NULL));
    json_t *ing = json_array_get(
        json_object_get(json_object_get(json_object_get(r.obj, "status"), "loadBalancer"),
                        "ingress"),
        0);
    ck_assert_str_eq(json_string_value(json_object_get(ing, "ip")), "203.0.113.7");
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(r.obj, "spec"), "ports")),
                     2); /* a status write keeps spec */
    kres_clear(&r);
    ck_assert_int_eq(kt_requests(&t, "PATCH", "/services/web/status", NULL), 1);
    /* a patch that does not apply */
    kt_wait(&t, &r,
            core_kube_patch(t.k, &svc, PLB_KUBE_JSON_PATCH,
                            "[{\"op\":\"remove\",\"path\":\"/nope/x\"}]", kres_cb, &r, NULL));
    ck_assert_int_ge(r.status, 400);
    kres_clear(&r);
    kt_stop(&t);
}
END_TEST

START_TEST(delete_with_preconditions)
{
    struct kt t;
    struct kres r = {0};
    kt_start(&t, NULL, NULL);
    create_lease(&t, &r);
    char uid[64], rv[32];
    snprintf(uid, sizeof(uid), "%s", kt_md(r.obj, "uid"));
    snprintf(rv, sizeof(rv), "%s", kt_md(r.obj, "resourceVersion"));
    kres_clear(&r);
    kt_wait(&t, &r, core_kube_delete(t.k, &lease_ref, "not-the-uid", NULL, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 409);
    kres_clear(&r);
    kt_wait(&t, &r, core_kube_delete(t.k, &lease_ref, uid, "1", kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 409);
    kres_clear(&r);
    kt_wait(&t, &r, core_kube_delete(t.k, &lease_ref, uid, rv, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    kres_clear(&r);
    kt_wait(&t, &r, core_kube_get(t.k, &lease_ref, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 404);
    kres_clear(&r);
    kt_stop(&t);
}
END_TEST

static int
count_done(void *arg)
{
    return *(int *)arg;
}

static void
ev_done(plb_kube_op *op, const struct plb_kube_result *r, void *arg)
{
    int *n = arg;
    (void)op;
    ck_assert_msg(r->status == 201 || r->status == 200, "event write: %d %d %s", r->status,
                  r->error, r->message);
    ++*n;
}

static json_t *
events_in_store(struct kt *t)
{
    json_t *d = kt_admin(t, "GET", "/store?resource=events", NULL);
    json_t *arr = json_incref(json_object_get(json_object_get(d, "objects"), "events"));
    json_decref(d);
    ck_assert(json_is_array(arr));
    return arr;
}

/* A warning Event (component prismlb-test) about a Lease created here;
 * *lease is the caller's to release. */
static struct plb_kube_event
lease_warning(struct kt *t, json_t **lease, const char *reason, const char *message)
{
    struct kres r = {0};
    create_lease(t, &r);
    *lease = json_incref(r.obj);
    kres_clear(&r);
    return (struct plb_kube_event){
        .size = sizeof(struct plb_kube_event),
        .involved = (const plb_obj *)*lease,
        .kind = "Lease",
        .api_version = "coordination.k8s.io/v1",
        .type = "Warning",
        .reason = reason,
        .message = message,
        .component = "prismlb-test",
    };
}

START_TEST(events_aggregate_like_client_go)
{
    struct kt t;
    kt_start(&t, NULL, NULL);
    json_t *lease;
    struct plb_kube_event ev =
        lease_warning(&t, &lease, "BadAnnotation", "annotation x is not a number");
    ev.host = "node-1";
    int done = 0;
    /* Three identical Events back to back: one Event, count 3. */
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(core_kube_event(t.k, &ev, ev_done, &done, NULL));
    /* Another message: a second Event. No done callback is fine too. */
    struct plb_kube_event ev2 = ev;
    ev2.message = "annotation y is not a number";
    ck_assert_ptr_nonnull(core_kube_event(t.k, &ev2, NULL, NULL, NULL));
    ck_assert_ptr_nonnull(core_kube_event(t.k, &ev, ev_done, &done, NULL));
    kt_run_until(&t, count_done, &done, 20000);
    kt_run_ms(&t, 1000);
    ck_assert_int_eq(done, 4);
    kt_run_ms(&t, 200);
    ck_assert_uint_eq(core_kube_active(t.k), 0);
    json_t *evs = events_in_store(&t);
    ck_assert_int_eq(json_array_size(evs), 2);
    size_t i;
    json_t *e;
    int seen = 0;
    json_array_foreach(evs, i, e)
    {
        const char *msg = json_string_value(json_object_get(e, "message"));
        json_t *io = json_object_get(e, "involvedObject");
        ck_assert_str_eq(json_string_value(json_object_get(io, "name")), "lead");
        ck_assert_str_eq(json_string_value(json_object_get(io, "kind")), "Lease");
        ck_assert_str_eq(json_string_value(json_object_get(io, "uid")), kt_md(lease, "uid"));
        ck_assert_str_eq(json_string_value(json_object_get(e, "type")), "Warning");
        ck_assert_str_eq(json_string_value(json_object_get(e, "reason")), "BadAnnotation");
        ck_assert_str_eq(
            json_string_value(json_object_get(json_object_get(e, "source"), "component")),
            "prismlb-test");
        if (strcmp(msg, ev.message) == 0) {
            ck_assert_int_eq(json_integer_value(json_object_get(e, "count")), 4);
            seen |= 1;
        } else {
            ck_assert_int_eq(json_integer_value(json_object_get(e, "count")), 1);
            seen |= 2;
        }
    }
    ck_assert_int_eq(seen, 3);
    ck_assert_int_eq(kt_requests(&t, "POST", "/events", NULL), 2);
    ck_assert_int_eq(kt_requests(&t, "PATCH", "/events/lead.", NULL), 3);
    /* The aggregated Event was deleted meanwhile: a new one is created. */
    json_t *first = json_array_get(evs, 0);
    char path[512];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/events/%s", kt_md(first, "name"));
    struct http_res res;
    ck_assert_int_eq(fake_api(&t.f, 0, "DELETE", path, NULL, NULL, 1, NULL, 10000, &res), 0);
    ck_assert_int_eq(res.status, 200);
    http_res_free(&res);
    const char *gone_msg = json_string_value(json_object_get(first, "message"));
    struct plb_kube_event ev3 = ev;
    ev3.message = gone_msg;
    done = 0;
    ck_assert_ptr_nonnull(core_kube_event(t.k, &ev3, ev_done, &done, NULL));
    ck_assert(kt_run_until(&t, count_done, &done, 20000));
    json_decref(evs);
    evs = events_in_store(&t);
    ck_assert_int_eq(json_array_size(evs), 2);
    json_decref(evs);
    /* An object without a name cannot be an Event's subject. */
    json_t *anon = json_pack("{s:{}}", "metadata");
    ev.involved = (const plb_obj *)anon;
    int err = 0;
    ck_assert_ptr_null(core_kube_event(t.k, &ev, NULL, NULL, &err));
    ck_assert_int_eq(err, -EINVAL);
    json_decref(anon);
    json_decref(lease);
    kt_stop(&t);
}
END_TEST

/* Record ev with a fresh client (a restarted daemon: nothing cached) and
 * wait for its answer; the status. */
static int
record_fresh(struct kt *t, const struct plb_kube_event *ev, uint32_t timeout_ms)
{
    struct plb_kube_opts o = {
        .size = sizeof(o), .kubeconfig = t->kubeconfig, .timeout_ms = timeout_ms};
    plb_kube *k = kt_client(t, &o);
    struct kres r = {0};
    kt_wait(t, &r, core_kube_event(k, ev, kres_cb, &r, NULL));
    int st = r.status;
    kres_clear(&r);
    core_kube_free(k);
    return st;
}

/* The count of the one stored Event whose message is msg (0: none; the
 * test fails when there are several). */
static long
stored_count(struct kt *t, const char *msg)
{
    json_t *evs = events_in_store(t), *e;
    size_t i;
    long count = 0;
    int n = 0;
    json_array_foreach(evs, i, e)
    {
        const char *m = json_string_value(json_object_get(e, "message"));
        if (m && strcmp(m, msg) == 0) {
            n++;
            count = (long)json_integer_value(json_object_get(e, "count"));
        }
    }
    json_decref(evs);
    ck_assert_int_le(n, 1);
    return count;
}

/* After a restart the recorder's cache is empty: the Event the previous
 * run created is found on the server (a list with a field selector) and
 * bumped instead of another identical one created; another message is
 * another Event. The lookup follows continue for at most four pages of 100,
 * and a lookup that fails (an error status, no answer at all) still
 * records the Event. */
START_TEST(events_found_again_after_a_restart)
{
    struct kt t;
    kt_start(&t, NULL, NULL);
    json_t *lease;
    struct plb_kube_event ev = lease_warning(&t, &lease, "Refused", "type lb99 is unknown");
    for (int run = 1; run <= 3; run++) {
        ck_assert_int_eq(record_fresh(&t, &ev, 0), 200 + (run == 1));
        ck_assert_int_eq(stored_count(&t, ev.message), run);
    }
    ck_assert_int_eq(kt_requests(&t, "POST", "/events", NULL), 1);
    ck_assert_int_eq(kt_requests(&t, "GET", "/events?", "fieldSelector=involvedObject.name"), 3);
    /* Same object, reason, type and source, another message: not it. */
    struct plb_kube_event ev2 = ev;
    ev2.message = "type lb98 is unknown";
    ck_assert_int_eq(record_fresh(&t, &ev2, 0), 201);
    ck_assert_int_eq(stored_count(&t, ev2.message), 1);
    ck_assert_int_eq(stored_count(&t, ev.message), 3);

    /* 150 Events that pass the selector but not the key, listed before
     * the one sought (names sort first): it is on the second page. */
    char tmpl[1024];
    snprintf(tmpl, sizeof(tmpl),
             "{\"op\":\"create\",\"resource\":\"events\",\"namePrefix\":\"lead.0-\",\"count\":%d,"
             "\"template\":{\"involvedObject\":{\"kind\":\"Lease\",\"apiVersion\":"
             "\"coordination.k8s.io/v1\",\"name\":\"lead\",\"namespace\":\"default\","
             "\"uid\":\"%s\"},\"reason\":\"Refused\",\"type\":\"Warning\",\"message\":\"filler\","
             "\"source\":{\"component\":\"prismlb-test\"},\"count\":1}}",
             150, kt_md(lease, "uid"));
    json_decref(kt_admin(&t, "POST", "/bulk", tmpl));
    json_decref(kt_admin(&t, "DELETE", "/requests", NULL));
    ck_assert_int_eq(record_fresh(&t, &ev, 0), 200);
    ck_assert_int_eq(stored_count(&t, ev.message), 4);
    ck_assert_int_eq(kt_requests(&t, "GET", "/events?", "fieldSelector="), 2);
    ck_assert_int_eq(kt_requests(&t, "POST", "/events", NULL), 0);

    /* Beyond four pages the lookup stops: a new Event (bounded work). */
    snprintf(tmpl, sizeof(tmpl),
             "{\"op\":\"create\",\"resource\":\"events\",\"namePrefix\":\"lead.0-\",\"start\":150,"
             "\"count\":300,\"template\":{\"involvedObject\":{\"kind\":\"Lease\",\"apiVersion\":"
             "\"coordination.k8s.io/v1\",\"name\":\"lead\",\"namespace\":\"default\","
             "\"uid\":\"%s\"},\"reason\":\"Refused\",\"type\":\"Warning\",\"message\":\"filler\","
             "\"source\":{\"component\":\"prismlb-test\"},\"count\":1}}",
             kt_md(lease, "uid"));
    json_decref(kt_admin(&t, "POST", "/bulk", tmpl));
    json_decref(kt_admin(&t, "DELETE", "/requests", NULL));
    ev2.message = "type lb97 is unknown";
    ck_assert_int_eq(record_fresh(&t, &ev2, 0), 201);
    ck_assert_int_eq(kt_requests(&t, "GET", "/events?", "fieldSelector="), 4);
    ck_assert_int_eq(kt_requests(&t, "POST", "/events", NULL), 1);

    /* A lookup answered with an error: the Event is recorded (created). */
    kt_faults(&t, "{\"fail_count\":1,\"fail_status\":500,\"fail_method\":\"GET\","
                  "\"fail_match\":\"/events?fieldSelector\"}");
    ev2.message = "type lb96 is unknown";
    ck_assert_int_eq(record_fresh(&t, &ev2, 0), 201);
    ck_assert_int_eq(stored_count(&t, ev2.message), 1);
    /* A lookup never answered (held until the client's 1 s timeout). */
    kt_faults(&t, "{\"fail_count\":0,\"hold_method\":\"GET\","
                  "\"hold_match\":\"/events?fieldSelector\"}");
    ev2.message = "type lb95 is unknown";
    ck_assert_int_eq(record_fresh(&t, &ev2, 1000), 201);
    ck_assert_int_eq(stored_count(&t, ev2.message), 1);
    kt_faults(&t, "{\"hold_match\":\"\"}");
    json_decref(kt_admin(&t, "POST", "/release", NULL));
    json_decref(lease);
    kt_stop(&t);
}
END_TEST

static void
never(plb_kube_op *op, const struct plb_kube_result *r, void *arg)
{
    (void)op;
    (void)r;
    (void)arg;
    ck_abort_msg("done called after cancel");
}

START_TEST(cancel_and_free_with_calls_in_flight)
{
    struct kt t;
    kt_start(&t, NULL, NULL);
    kt_faults(&t, "{\"latency_ms\": 500}");
    plb_kube_op *a = core_kube_get(t.k, &lease_ref, never, NULL, NULL);
    plb_kube_op *b = core_kube_get(t.k, &lease_ref, never, NULL, NULL);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(core_kube_active(t.k), 2);
    core_kube_cancel(a);
    ck_assert_uint_eq(core_kube_active(t.k), 1);
    kt_run_ms(&t, 100);
    /* kube_free cancels what is left; nothing is called afterwards. */
    core_kube_free(t.k);
    t.k = NULL;
    kt_run_ms(&t, 800);
    kt_stop(&t);
}
END_TEST

struct freer {
    plb_kube *k;
    int calls;
};

static void
free_client_in_done(plb_kube_op *op, const struct plb_kube_result *r, void *arg)
{
    struct freer *f = arg;
    (void)op;
    ck_assert_int_eq(r->status, 200);
    f->calls++;
    core_kube_free(f->k); /* the other call in flight is cancelled */
    core_kube_cancel(op); /* a no-op from inside its own done */
}

static int
freer_called(void *arg)
{
    return ((struct freer *)arg)->calls > 0;
}

START_TEST(free_client_from_done_callback)
{
    struct kt t;
    kt_start(&t, NULL, NULL);
    struct plb_kube_opts o = {.size = sizeof(o), .kubeconfig = t.kubeconfig};
    struct freer f = {kt_client(&t, &o), 0};
    struct plb_kube_ref ns = {
        sizeof(struct plb_kube_ref), "v1", "namespaces", NULL, "default", NULL};
    ck_assert_ptr_nonnull(core_kube_get(f.k, &ns, free_client_in_done, &f, NULL));
    kt_faults(&t, "{\"latency_ms\": 300, \"latency_match\": \"slow\"}");
    struct plb_kube_ref slow = {
        sizeof(struct plb_kube_ref), "v1", "namespaces", NULL, "slow", NULL};
    ck_assert_ptr_nonnull(core_kube_get(f.k, &slow, never, NULL, NULL));
    ck_assert(kt_run_until(&t, freer_called, &f, 10000));
    kt_run_ms(&t, 600);
    ck_assert_int_eq(f.calls, 1);
    kt_stop(&t);
}
END_TEST

static Suite *
writes_suite(void)
{
    Suite *s = suite_create("kube_writes");
    TCase *tc = tcase_create("verbs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, create_get_and_already_exists);
    tcase_add_test(tc, update_with_resource_version_and_409);
    tcase_add_test(tc, modify_retries_after_conflict);
    tcase_add_test(tc, modify_callback_may_skip_or_decline);
    tcase_add_test(tc, patches_and_status);
    tcase_add_test(tc, delete_with_preconditions);
    tcase_add_test(tc, events_aggregate_like_client_go);
    tcase_add_test(tc, events_found_again_after_a_restart);
    tcase_add_test(tc, cancel_and_free_with_calls_in_flight);
    tcase_add_test(tc, free_client_from_done_callback);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(writes_suite());
}
