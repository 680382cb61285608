/*
 * End-to-end suite of the informer against prismlb-fake-kube, one test per
 * fault: a dropped watch, 410 as an ERROR event, HTTP 410 on an expired
 * continue, 500s, added latency, a list of 10,000 objects in chunks, a
 * quiet period kept alive by bookmarks only. Each checks that afterwards
 * the informer's cache and the module's view built from its callbacks both
 * equal the fake's store, and that no spurious callback was delivered
 * (an add of a known key, an update without a change, a delete of an
 * unknown key, or an old object that is not the last one reported). A
 * trimmed informer (plb_informer_opts.keep) caches exactly the named
 * fields and reports no update that changed none of them.
 */
#include "kt.h"

#define RES "leases.coordination.k8s.io"

/* What a module would build from the callbacks. */
struct mirror {
    json_t *m; /* key -> resourceVersion */
    int adds, updates, deletes, spurious, synced;
    int trimmed; /* keep set: an update skipped moved the cached old's rv on */
    int errors, list_failed, watch_failed, watch_error, ended, expired;
    int last_http;
    char why[1100];
};

static void
spurious(struct mirror *mi, const char *what, const char *key)
{
    mi->spurious++;
    snprintf(mi->why, sizeof(mi->why), "%s %s", what, key);
}

static void
m_add(plb_informer *inf, const plb_obj *obj, void *arg)
{
    struct mirror *mi = arg;
    char key[512];
    (void)inf;
    ck_assert_int_eq(core_kube_obj_key((json_t *)obj, key, sizeof(key)), 0);
    if (json_object_get(mi->m, key))
        spurious(mi, "add of known", key);
    /* the cache already holds it, as the same (borrowed) object */
    ck_assert_ptr_eq(
        core_informer_get(inf, kt_md((json_t *)obj, "namespace"), kt_md((json_t *)obj, "name")),
        obj);
    json_object_set_new(mi->m, key, json_string(core_kube_obj_rv((json_t *)obj)));
    mi->adds++;
}

static void
m_update(plb_informer *inf, const plb_obj *old, const plb_obj *obj, void *arg)
{
    struct mirror *mi = arg;
    char key[512];
    (void)inf;
    ck_assert_int_eq(core_kube_obj_key((json_t *)obj, key, sizeof(key)), 0);
    const char *had = json_string_value(json_object_get(mi->m, key));
    const char *orv = core_kube_obj_rv((json_t *)old), *nrv = core_kube_obj_rv((json_t *)obj);
    if (!had)
        spurious(mi, "update of unknown", key);
    else if (!mi->trimmed && strcmp(had, orv) != 0)
        spurious(mi, "update with a stale old", key);
    else if (strcmp(orv, nrv) == 0)
        spurious(mi, "update without change", key);
    else if (mi->trimmed && core_kube_same_but_rv((json_t *)old, (json_t *)obj))
        spurious(mi, "update without a change of the kept fields", key);
    json_object_set_new(mi->m, key, json_string(nrv));
    mi->updates++;
}

static void
m_delete(plb_informer *inf, const plb_obj *old, void *arg)
{
    struct mirror *mi = arg;
    char key[512];
    (void)inf;
    ck_assert_int_eq(core_kube_obj_key((json_t *)old, key, sizeof(key)), 0);
    if (!json_object_get(mi->m, key))
        spurious(mi, "delete of unknown", key);
    ck_assert_ptr_null(
        core_informer_get(inf, kt_md((json_t *)old, "namespace"), kt_md((json_t *)old, "name")));
    json_object_del(mi->m, key);
    mi->deletes++;
}

static void
m_synced(plb_informer *inf, void *arg)
{
    struct mirror *mi = arg;
    ck_assert(core_informer_synced(inf));
    mi->synced++;
}

static void
m_status(plb_informer *inf, const struct plb_informer_status *st, void *arg)
{
    struct mirror *mi = arg;
    (void)inf;
    mi->errors += st->is_error;
    mi->last_http = st->http_status;
    switch (st->event) {
    case PLB_INFORMER_LIST_FAILED:
        mi->list_failed++;
        ck_assert(st->is_error);
        break;
    case PLB_INFORMER_WATCH_FAILED:
        mi->watch_failed++;
        ck_assert(st->is_error);
        break;
    case PLB_INFORMER_WATCH_ERROR:
        mi->watch_error++;
        ck_assert(st->is_error);
        break;
    case PLB_INFORMER_WATCH_ENDED:
        mi->ended++;
        ck_assert(!st->is_error);
        break;
    case PLB_INFORMER_EXPIRED:
        mi->expired++;
        ck_assert(!st->is_error);
        break;
    }
    ck_assert_int_ge(st->retry_in_ms, 0);
}

static plb_informer *
start_informer(struct kt *t, struct mirror *mi, const char *ns, uint32_t page)
{
    memset(mi, 0, sizeof(*mi));
    mi->m = json_object();
    struct plb_informer_opts o = {
        .size = sizeof(o),
        .ref = &(const struct plb_kube_ref){sizeof(struct plb_kube_ref), "coordination.k8s.io/v1",
                                            "leases", ns, NULL, NULL},
        .page_size = page,
        .on_add = m_add,
        .on_update = m_update,
        .on_delete = m_delete,
        .on_synced = m_synced,
        .on_status = m_status,
        .arg = mi,
    };
    int err = 0;
    plb_informer *inf = core_informer_new(t->k, &o, &err);
    ck_assert_msg(inf != NULL, "informer_new: %d", err);
    return inf;
}

static int
synced(void *arg)
{
    return ((struct mirror *)arg)->synced > 0;
}

/* The informer's cache as key -> rv (new). */
static void
cache_cb(const plb_obj *obj, void *arg)
{
    char key[512];
    ck_assert_int_eq(core_kube_obj_key((json_t *)obj, key, sizeof(key)), 0);
    json_object_set_new(arg, key, json_string(core_kube_obj_rv((json_t *)obj)));
}

struct conv {
    struct kt *t;
    plb_informer *inf;
    struct mirror *mi;
    json_t *store;
};

static int
converged(void *arg)
{
    struct conv *c = arg;
    json_t *cache = json_object();
    core_informer_foreach(c->inf, cache_cb, cache);
    int ok = json_equal(cache, c->store) && json_equal(c->mi->m, c->store) &&
             core_informer_count(c->inf) == json_object_size(c->store);
    json_decref(cache);
    return ok;
}

/* Wait until cache and mirror equal the fake's store; no spurious calls. */
static void
assert_converged(struct kt *t, plb_informer *inf, struct mirror *mi, const char *cluster)
{
    struct conv c = {t, inf, mi, kt_store(t, cluster, RES, "default")};
    int ok = kt_run_until(t, converged, &c, 20000);
    if (!ok) {
        json_t *cache = json_object();
        core_informer_foreach(inf, cache_cb, cache);
        char *a = json_dumps(cache, JSON_SORT_KEYS), *b = json_dumps(c.store, JSON_SORT_KEYS);
        ck_abort_msg("not converged:\ncache %.2000s\nstore %.2000s", a, b);
    }
    json_decref(c.store);
    ck_assert_msg(mi->spurious == 0, "%d spurious callbacks, last: %s", mi->spurious, mi->why);
}

/* Synchronous writes through the client under test. */
static void
put_holder(struct kt *t, const char *ns, const char *name, const char *holder)
{
    struct kres r = {0};
    char patch[256];
    snprintf(patch, sizeof(patch), "{\"spec\":{\"holderIdentity\":\"%s\"}}", holder);
    struct plb_kube_ref ref = {
        sizeof(struct plb_kube_ref), "coordination.k8s.io/v1", "leases", ns, name, NULL};
    kt_wait(t, &r, core_kube_patch(t->k, &ref, PLB_KUBE_MERGE_PATCH, patch, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    kres_clear(&r);
}

static void
del_lease(struct kt *t, const char *ns, const char *name)
{
    struct kres r = {0};
    struct plb_kube_ref ref = {
        sizeof(struct plb_kube_ref), "coordination.k8s.io/v1", "leases", ns, name, NULL};
    kt_wait(t, &r, core_kube_delete(t->k, &ref, NULL, NULL, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    kres_clear(&r);
}

/* A batch of changes while the informer may be away: 3 updates, 2 deletes,
 * 4 adds. Returns the mirror's counters before, for exact deltas. */
static void
churn(struct kt *t, const char *prefix)
{
    put_holder(t, "default", "l-1", prefix);
    put_holder(t, "default", "l-2", prefix);
    put_holder(t, "default", "l-3", prefix);
    del_lease(t, "default", "l-4");
    del_lease(t, "default", "l-5");
    kt_bulk_create(t, t->k, "default", prefix, 4, 10);
}

START_TEST(list_of_10000_in_chunks)
{
    struct kt t;
    struct mirror mi;
    kt_start(&t, NULL, NULL);
    kt_seed(&t, "default", "l", 10000, 16);
    json_decref(kt_admin(&t, "DELETE", "/requests", NULL));
    plb_informer *inf = start_informer(&t, &mi, "default", 500);
    ck_assert(kt_run_until(&t, synced, &mi, 60000));
    ck_assert_int_eq(mi.adds, 10000);
    ck_assert_int_eq(core_informer_count(inf), 10000);
    /* 20 pages: the first without continue, 19 with it, all limited. */
    ck_assert_int_eq(kt_requests(&t, "GET", "limit=500", NULL), 20);
    ck_assert_int_eq(kt_requests(&t, "GET", "limit=500", "continue="), 19);
    ck_assert_int_eq(kt_requests(&t, "GET", "sendInitialEvents", NULL), 0);
    assert_converged(&t, inf, &mi, "");
    kt_wait_watches(&t, 1);
    /* The watch runs from the list's resourceVersion, with bookmarks. */
    ck_assert_int_eq(kt_requests(&t, "GET", "watch=1", "allowWatchBookmarks=true"), 1);
    ck_assert_int_eq(mi.errors, 0);
    core_informer_free(inf);
    json_decref(mi.m);
    kt_stop(&t);
}
END_TEST

START_TEST(dropped_watch)
{
    struct kt t;
    struct mirror mi;
    kt_start(&t, NULL, NULL);
    kt_bulk_create(&t, t.k, "default", "l", 20, 16);
    plb_informer *inf = start_informer(&t, &mi, "default", 7);
    ck_assert(kt_run_until(&t, synced, &mi, 20000));
    assert_converged(&t, &*inf, &mi, "");
    int adds = mi.adds, ups = mi.updates, dels = mi.deletes;
    kt_wait_watches(&t, 1);
    json_decref(kt_admin(&t, "POST", "/watches/close?mode=drop", NULL));
    churn(&t, "dropped");
    assert_converged(&t, inf, &mi, "");
    ck_assert_int_eq(mi.adds - adds, 4);
    ck_assert_int_eq(mi.updates - ups, 3);
    ck_assert_int_eq(mi.deletes - dels, 2);
    ck_assert_int_ge(mi.ended, 1);
    ck_assert_int_eq(mi.errors, 0); /* a dropped stream is no discovery error */
    ck_assert_int_eq(mi.expired, 0);
    core_informer_free(inf);
    json_decref(mi.m);
    kt_stop(&t);
}
END_TEST

START_TEST(gone_as_error_event_relists_and_delivers_only_differences)
{
    struct kt t;
    struct mirror mi;
    kt_start(&t, NULL, NULL);
    kt_bulk_create(&t, t.k, "default", "l", 30, 16);
    plb_informer *inf = start_informer(&t, &mi, "default", 0);
    ck_assert(kt_run_until(&t, synced, &mi, 20000));
    assert_converged(&t, inf, &mi, "");
    int adds = mi.adds, ups = mi.updates, dels = mi.deletes;
    /* The next watch gets HTTP 200 then ERROR 410 Expired. Close the
     * current one cleanly first, then change things: only the re-list can
     * bring them. */
    kt_wait_watches(&t, 1);
    kt_faults(&t, "{\"watch_gone_next\": 1}");
    json_decref(kt_admin(&t, "DELETE", "/requests", NULL));
    json_decref(kt_admin(&t, "POST", "/watches/close?mode=clean", NULL));
    churn(&t, "gone");
    assert_converged(&t, inf, &mi, "");
    ck_assert_int_eq(mi.expired, 1);
    ck_assert_int_eq(mi.adds - adds, 4); /* exactly the differences */
    ck_assert_int_eq(mi.updates - ups, 3);
    ck_assert_int_eq(mi.deletes - dels, 2);
    ck_assert_int_eq(mi.errors, 0); /* a 410 is no discovery error */
    ck_assert_int_ge(kt_requests(&t, "GET", "/leases?limit=", NULL), 1);
    core_informer_free(inf);
    json_decref(mi.m);
    kt_stop(&t);
}
END_TEST

START_TEST(http_410_on_expired_continue)
{
    struct kt t;
    struct mirror mi;
    kt_start(&t, NULL, NULL);
    kt_bulk_create(&t, t.k, "default", "l", 100, 16);
    /* Slow pages, so the history can be compacted under the listing. */
    kt_faults(&t, "{\"latency_ms\": 150, \"latency_match\": \"continue=\"}");
    json_decref(kt_admin(&t, "DELETE", "/requests", NULL));
    plb_informer *inf = start_informer(&t, &mi, "default", 10);
    kt_run_ms(&t, 100);
    put_holder(&t, "default", "l-99", "moved-on"); /* the list's rv is now old */
    json_decref(kt_admin(&t, "POST", "/compact", NULL));
    kt_faults(&t, "{\"latency_ms\": 0}");
    ck_assert(kt_run_until(&t, synced, &mi, 20000));
    assert_converged(&t, inf, &mi, "");
    ck_assert_int_eq(mi.expired, 1);
    ck_assert_int_eq(mi.last_http, 410);
    ck_assert_int_eq(mi.errors, 0);
    ck_assert_int_eq(mi.adds, 100); /* each object delivered once */
    /* The fallback list is whole (no limit), like client-go's pager. */
    ck_assert_int_ge(kt_requests(&t, "GET", "/leases", NULL) -
                         kt_requests(&t, "GET", "/leases?limit", NULL) -
                         kt_requests(&t, "GET", "watch=1", NULL),
                     1);
    core_informer_free(inf);
    json_decref(mi.m);
    kt_stop(&t);
}
END_TEST

START_TEST(server_errors_500_back_off_and_count)
{
    struct kt t;
    struct mirror mi;
    kt_start(&t, NULL, NULL);
    kt_bulk_create(&t, t.k, "default", "l", 10, 16);
    /* Two failed lists: retried after ~1 s and ~2 s. */
    kt_faults(&t, "{\"fail_count\": 2, \"fail_status\": 500, \"fail_match\": \"/leases?\"}");
    long long t0 = tu_now_ms();
    plb_informer *inf = start_informer(&t, &mi, "default", 0);
    ck_assert(kt_run_until(&t, synced, &mi, 20000));
    long long took = tu_now_ms() - t0;
    ck_assert_int_eq(mi.list_failed, 2);
    ck_assert_int_eq(mi.errors, 2);
    ck_assert_int_ge(took, 3000);        /* 1 s + 2 s */
    ck_assert_int_le(took, 3750 + 1500); /* + 25 % jitter + slack */
    assert_converged(&t, inf, &mi, "");
    /* A failing re-watch counts as an error each time, then recovers. */
    kt_wait_watches(&t, 1);
    kt_faults(&t, "{\"fail_count\": 1, \"fail_status\": 500, \"fail_match\": \"watch=1\"}");
    json_decref(kt_admin(&t, "POST", "/watches/close?mode=clean", NULL));
    churn(&t, "fivehundred");
    assert_converged(&t, inf, &mi, "");
    ck_assert_int_eq(mi.watch_failed, 1);
    ck_assert_int_eq(mi.errors, 3);
    core_informer_free(inf);
    json_decref(mi.m);
    kt_stop(&t);
}
END_TEST

START_TEST(added_latency)
{
    struct kt t;
    struct mirror mi;
    kt_start(&t, NULL, NULL);
    kt_bulk_create(&t, t.k, "default", "l", 25, 16);
    kt_faults(&t, "{\"latency_ms\": 400}");
    plb_informer *inf = start_informer(&t, &mi, "default", 10);
    ck_assert(kt_run_until(&t, synced, &mi, 20000));
    churn(&t, "slow");
    assert_converged(&t, inf, &mi, "");
    ck_assert_int_eq(mi.errors, 0);
    ck_assert_int_eq(mi.expired, 0);
    core_informer_free(inf);
    json_decref(mi.m);
    kt_stop(&t);
}
END_TEST

START_TEST(quiet_period_kept_alive_by_bookmarks)
{
    struct kt t;
    struct mirror mi;
    const char *extra[] = {"--bookmark-interval-ms", "200", NULL};
    kt_start(&t, extra, NULL);
    kt_bulk_create(&t, t.k, "default", "l", 5, 16);
    plb_informer *inf = start_informer(&t, &mi, "default", 0);
    ck_assert(kt_run_until(&t, synced, &mi, 20000));
    int adds = mi.adds, ups = mi.updates;
    /* Writes elsewhere move the global resourceVersion; the informer's
     * resource stays quiet, so only bookmarks bring it forward. */
    kt_wait_watches(&t, 1);
    kt_bulk_create(&t, t.k, "kube-system", "other", 5, 16);
    kt_run_ms(&t, 1200);
    json_t *st = kt_admin(&t, "GET", "/state", NULL);
    char want[64];
    snprintf(want, sizeof(want), "resourceVersion=%s&",
             json_string_value(json_object_get(st, "resourceVersion")));
    json_decref(st);
    /* Compact the history: a watch from a pre-bookmark rv would now be
     * 410. Drop the watch: the re-watch starts from the bookmark's rv and
     * succeeds, with no re-list. */
    json_decref(kt_admin(&t, "POST", "/compact", NULL));
    json_decref(kt_admin(&t, "DELETE", "/requests", NULL));
    json_decref(kt_admin(&t, "POST", "/watches/close?mode=drop", NULL));
    kt_run_ms(&t, 2000);
    ck_assert_int_eq(kt_requests(&t, "GET", "watch=1", want), 1);
    ck_assert_int_eq(kt_requests(&t, "GET", "/leases?", "limit"), 0);
    ck_assert_int_eq(mi.expired, 0);
    ck_assert_int_eq(mi.errors, 0);
    ck_assert_int_eq(mi.adds, adds); /* nothing happened to the leases in default */
    ck_assert_int_eq(mi.updates, ups);
    assert_converged(&t, inf, &mi, "");
    /* Only namespace default is watched. */
    ck_assert_int_eq(core_informer_count(inf), 5);
    core_informer_free(inf);
    json_decref(mi.m);
    kt_stop(&t);
}
END_TEST

static void
create_slice(struct kt *t, const char *name, const char *svc)
{
    struct kres r = {0};
    char body[600];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\","
             "\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/service-name\":"
             "\"%s\"}},\"addressType\":\"IPv4\",\"endpoints\":[{\"addresses\":"
             "[\"10.0.0.1\"],\"conditions\":{\"ready\":true}}],\"ports\":[{\"name\":"
             "\"https\",\"port\":6443,\"protocol\":\"TCP\"}]}",
             name, svc);
    struct plb_kube_ref ref = {sizeof(struct plb_kube_ref),
                               "discovery.k8s.io/v1",
                               "endpointslices",
                               "default",
                               NULL,
                               NULL};
    kt_wait(t, &r, core_kube_create(t->k, &ref, body, kres_cb, &r, NULL));
    ck_assert_msg(r.status == 201, "%d %s", r.status, r.message);
    kres_clear(&r);
}

static int
count_is(void *arg)
{
    struct mirror *mi = arg;
    return (int)json_object_size(mi->m) == mi->synced; /* synced holds the wanted size */
}

START_TEST(label_and_field_selectors)
{
    /* As mod_endpoint_watch watches the API servers: EndpointSlices of the
     * kubernetes Service. An object that stops matching arrives as a
     * delete, one that starts matching as an add. */
    struct kt t;
    struct mirror mi = {0};
    kt_start(&t, NULL, NULL);
    create_slice(&t, "kubernetes", "kubernetes");
    create_slice(&t, "kubernetes-x", "kubernetes");
    create_slice(&t, "web-abc", "web");
    mi.m = json_object();
    struct plb_informer_opts o = {
        .size = sizeof(o),
        .ref = &(const struct plb_kube_ref){sizeof(struct plb_kube_ref), "discovery.k8s.io/v1",
                                            "endpointslices", "default", NULL, NULL},
        .label_selector = "kubernetes.io/service-name=kubernetes",
        .on_add = m_add,
        .on_update = m_update,
        .on_delete = m_delete,
        .on_status = m_status,
        .arg = &mi,
    };
    plb_informer *inf = core_informer_new(t.k, &o, NULL);
    ck_assert_ptr_nonnull(inf);
    mi.synced = 2;
    ck_assert(kt_run_until(&t, count_is, &mi, 20000));
    ck_assert_ptr_nonnull(core_informer_get(inf, "default", "kubernetes-x"));
    ck_assert_ptr_null(core_informer_get(inf, "default", "web-abc"));
    kt_wait_watches(&t, 1);
    /* kubernetes-x leaves the selection, web-abc enters it. */
    struct kres r = {0};
    struct plb_kube_ref x = {sizeof(struct plb_kube_ref),
                             "discovery.k8s.io/v1",
                             "endpointslices",
                             "default",
                             "kubernetes-x",
                             NULL};
    kt_wait(&t, &r,
            core_kube_patch(t.k, &x, PLB_KUBE_MERGE_PATCH,
                            "{\"metadata\":{\"labels\":{\"kubernetes.io/service-name\":"
                            "\"other\"}}}",
                            kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    kres_clear(&r);
    x.name = "web-abc";
    kt_wait(&t, &r,
            core_kube_patch(t.k, &x, PLB_KUBE_MERGE_PATCH,
                            "{\"metadata\":{\"labels\":{\"kubernetes.io/service-name\":"
                            "\"kubernetes\"}}}",
                            kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    kres_clear(&r);
    long long end = tu_now_ms() + 10000;
    while ((mi.deletes < 1 || mi.adds < 3) && tu_now_ms() < end)
        kt_run_ms(&t, 20);
    ck_assert_int_eq(mi.deletes, 1);
    ck_assert_int_eq(mi.adds, 3);
    ck_assert_ptr_null(core_informer_get(inf, "default", "kubernetes-x"));
    ck_assert_ptr_nonnull(core_informer_get(inf, "default", "web-abc"));
    ck_assert_int_eq(mi.spurious, 0);
    ck_assert_int_eq(kt_requests(&t, "GET",
                                 "labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes",
                                 "watch=1"),
                     1);
    core_informer_free(inf);
    json_decref(mi.m);

    /* A field selector on the name. */
    memset(&mi, 0, sizeof(mi));
    mi.m = json_object();
    o.label_selector = NULL;
    o.field_selector = "metadata.name=kubernetes";
    inf = core_informer_new(t.k, &o, NULL);
    mi.synced = 1;
    ck_assert(kt_run_until(&t, count_is, &mi, 20000));
    kt_run_ms(&t, 300);
    ck_assert_uint_eq(core_informer_count(inf), 1);
    ck_assert_ptr_nonnull(core_informer_get(inf, "default", "kubernetes"));
    core_informer_free(inf);
    json_decref(mi.m);
    kt_stop(&t);
}
END_TEST

/* Merge-patch Lease ns/name with patch (steals). */
static void
patch_lease(struct kt *t, const char *name, json_t *patch)
{
    struct kres r = {0};
    struct plb_kube_ref ref = {
        sizeof(struct plb_kube_ref), "coordination.k8s.io/v1", "leases", "default", name, NULL};
    char *text = json_dumps(patch, JSON_COMPACT);
    json_decref(patch);
    kt_wait(t, &r, core_kube_patch(t->k, &ref, PLB_KUBE_MERGE_PATCH, text, kres_cb, &r, NULL));
    free(text);
    ck_assert_int_eq(r.status, 200);
    kres_clear(&r);
}

/* The cache holds the fake's resourceVersion of every object. */
static int
cache_rvs_current(void *arg)
{
    struct conv *c = arg;
    json_t *cache = json_object();
    json_t *store = kt_store(c->t, "", RES, "default");
    core_informer_foreach(c->inf, cache_cb, cache);
    int ok = json_equal(cache, store);
    json_decref(cache);
    json_decref(store);
    return ok;
}

static int
updates_at_least(void *arg)
{
    struct mirror *mi = arg;
    return mi->updates >= mi->synced; /* synced holds the count waited for */
}

/* Each member of o is one of the NULL-terminated names. */
static void
assert_members(json_t *o, const char *const *names)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        size_t i = 0;
        while (names[i] && strcmp(names[i], key) != 0)
            i++;
        ck_assert_msg(names[i] != NULL, "unexpected member %s", key);
    }
}

START_TEST(trimmed_informer_keeps_the_named_fields_and_skips_updates_of_the_others)
{
    /* keep = spec.holderIdentity: the cache holds it and the identity,
     * nothing of the annotations, labels or other spec fields; an update
     * of those only reaches no callback (the cache takes its
     * resourceVersion), one of holderIdentity does, a delete does. */
    struct kt t;
    struct mirror mi = {0};
    kt_start(&t, NULL, NULL);
    kt_bulk_create(&t, t.k, "default", "k", 3, 64);
    patch_lease(&t, "k-0",
                json_pack("{s:{s:{s:s}}, s:{s:i}}", "metadata", "labels", "team", "a", "spec",
                          "leaseDurationSeconds", 15));
    static const char *const keep[] = {"/spec/holderIdentity", NULL};
    mi.m = json_object();
    mi.trimmed = 1;
    struct plb_informer_opts o = {
        .size = sizeof(o),
        .ref = &(const struct plb_kube_ref){sizeof(struct plb_kube_ref), "coordination.k8s.io/v1",
                                            "leases", "default", NULL, NULL},
        .on_add = m_add,
        .on_update = m_update,
        .on_delete = m_delete,
        .on_synced = m_synced,
        .on_status = m_status,
        .arg = &mi,
        .keep = keep,
    };
    plb_informer *inf = core_informer_new(t.k, &o, NULL);
    ck_assert_ptr_nonnull(inf);
    ck_assert(kt_run_until(&t, synced, &mi, 20000));
    ck_assert_int_eq(mi.adds, 3);
    kt_wait_watches(&t, 1);

    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    static const char *const md[] = {"name", "namespace", "uid", "resourceVersion", NULL};
    json_t *c = (json_t *)core_informer_get(inf, "default", "k-0");
    assert_members(c, top);
    assert_members(json_object_get(c, "metadata"), md);
    ck_assert_str_eq(kt_md(c, "name"), "k-0");
    ck_assert_str_eq(kt_md(c, "namespace"), "default");
    ck_assert_ptr_nonnull(kt_md(c, "uid"));
    ck_assert_str_ne(core_kube_obj_rv(c), "");
    json_t *want = json_pack("{s:s}", "holderIdentity", "nobody");
    ck_assert(json_equal(json_object_get(c, "spec"), want));
    json_decref(want);

    /* Dropped fields change: the fake's rv moves, no callback. */
    patch_lease(&t, "k-0",
                json_pack("{s:{s:{s:s}, s:{s:s}}, s:{s:i}}", "metadata", "labels", "team", "b",
                          "annotations", "pad", "changed", "spec", "leaseDurationSeconds", 30));
    patch_lease(&t, "k-1", json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "pad", "y"));
    struct conv cv = {&t, inf, &mi, NULL};
    ck_assert(kt_run_until(&t, cache_rvs_current, &cv, 20000));
    kt_run_ms(&t, 200);
    ck_assert_int_eq(mi.updates, 0);
    c = (json_t *)core_informer_get(inf, "default", "k-0");
    ck_assert_ptr_null(json_object_get(json_object_get(c, "spec"), "leaseDurationSeconds"));
    ck_assert_ptr_null(json_object_get(json_object_get(c, "metadata"), "labels"));

    /* A kept field changes: one update, old and new trimmed. */
    put_holder(&t, "default", "k-0", "someone");
    mi.synced = 1;
    ck_assert(kt_run_until(&t, updates_at_least, &mi, 20000));
    kt_run_ms(&t, 200);
    ck_assert_int_eq(mi.updates, 1);
    c = (json_t *)core_informer_get(inf, "default", "k-0");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(c, "spec"), "holderIdentity")),
        "someone");
    assert_members(json_object_get(c, "metadata"), md);

    /* A re-list after 410 reports no update whose kept fields are the
     * same, and the one whose are not. */
    patch_lease(&t, "k-1", json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "pad", "z"));
    put_holder(&t, "default", "k-2", "other");
    ck_assert(kt_run_until(&t, cache_rvs_current, &cv, 20000));
    int ups = mi.updates;
    kt_wait_watches(&t, 1);
    kt_faults(&t, "{\"watch_gone_next\": 1}");
    json_decref(kt_admin(&t, "POST", "/watches/close?mode=clean", NULL));
    patch_lease(&t, "k-1", json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "pad", "w"));
    put_holder(&t, "default", "k-0", "third");
    ck_assert(kt_run_until(&t, cache_rvs_current, &cv, 20000));
    kt_run_ms(&t, 200);
    ck_assert_int_eq(mi.expired, 1);
    ck_assert_int_eq(mi.updates - ups, 1);

    del_lease(&t, "default", "k-2");
    ck_assert(kt_run_until(&t, cache_rvs_current, &cv, 20000));
    ck_assert_int_eq(mi.deletes, 1);
    ck_assert_int_eq(mi.spurious, 0);
    core_informer_free(inf);
    json_decref(mi.m);

    /* A module built before keep passes the shorter options: whole objects
     * (the bytes after its size are not read). */
    struct {
        struct plb_informer_opts o;
        char guard[sizeof(void *)];
    } old;
    memset(&old, 0xa5, sizeof(old));
    memcpy(&old.o, &o, offsetof(struct plb_informer_opts, keep));
    old.o.size = offsetof(struct plb_informer_opts, keep);
    memset(&mi, 0, sizeof(mi));
    mi.m = json_object();
    inf = core_informer_new(t.k, &old.o, NULL);
    ck_assert_ptr_nonnull(inf);
    ck_assert(kt_run_until(&t, synced, &mi, 20000));
    c = (json_t *)core_informer_get(inf, "default", "k-0");
    ck_assert_ptr_nonnull(json_object_get(json_object_get(c, "metadata"), "labels"));
    ck_assert_ptr_nonnull(json_object_get(json_object_get(c, "spec"), "leaseDurationSeconds"));
    core_informer_free(inf);
    json_decref(mi.m);

    /* A bad path is refused. */
    static const char *const bad[] = {"spec", NULL};
    o.keep = bad;
    int err = 0;
    ck_assert_ptr_null(core_informer_new(t.k, &o, &err));
    ck_assert_int_eq(err, -EINVAL);
    kt_stop(&t);
}
END_TEST

/* Freeing the informer from inside its own callback stops everything. */
static void
free_in_add(plb_informer *inf, const plb_obj *obj, void *arg)
{
    int *n = arg;
    (void)obj;
    if (++*n == 3)
        core_informer_free(inf);
}

START_TEST(free_from_callback)
{
    struct kt t;
    int n = 0;
    kt_start(&t, NULL, NULL);
    kt_bulk_create(&t, t.k, "default", "l", 10, 16);
    struct plb_informer_opts o = {
        .size = sizeof(o),
        .ref = &(const struct plb_kube_ref){sizeof(struct plb_kube_ref), "coordination.k8s.io/v1",
                                            "leases", "default", NULL, NULL},
        .on_add = free_in_add,
        .arg = &n,
    };
    ck_assert_ptr_nonnull(core_informer_new(t.k, &o, NULL));
    kt_run_ms(&t, 1500);
    ck_assert_int_eq(n, 3);
    kt_stop(&t);
}
END_TEST

/* Freeing the whole client from inside an informer callback. */
static plb_kube *client_to_free;

static void
free_kube_in_add(plb_informer *inf, const plb_obj *obj, void *arg)
{
    int *n = arg;
    (void)inf;
    (void)obj;
    if (++*n == 2)
        core_kube_free(client_to_free);
}

START_TEST(free_client_from_informer_callback)
{
    struct kt t;
    int n = 0;
    kt_start(&t, NULL, NULL);
    kt_bulk_create(&t, t.k, "default", "l", 10, 16);
    struct plb_informer_opts o = {
        .size = sizeof(o),
        .ref = &(const struct plb_kube_ref){sizeof(struct plb_kube_ref), "coordination.k8s.io/v1",
                                            "leases", "default", NULL, NULL},
        .on_add = free_kube_in_add,
        .arg = &n,
    };
    client_to_free = t.k;
    ck_assert_ptr_nonnull(core_informer_new(t.k, &o, NULL));
    ck_assert_ptr_nonnull(core_informer_new(t.k, &o, NULL)); /* a second one, freed too */
    kt_run_ms(&t, 1500);
    ck_assert_int_eq(n, 2);
    t.k = NULL;
    kt_stop(&t);
}
END_TEST

static Suite *
informer_suite(void)
{
    Suite *s = suite_create("kube_informer");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, list_of_10000_in_chunks);
    tcase_add_test(tc, dropped_watch);
    tcase_add_test(tc, gone_as_error_event_relists_and_delivers_only_differences);
    tcase_add_test(tc, http_410_on_expired_continue);
    tcase_add_test(tc, server_errors_500_back_off_and_count);
    tcase_add_test(tc, added_latency);
    tcase_add_test(tc, quiet_period_kept_alive_by_bookmarks);
    tcase_add_test(tc, label_and_field_selectors);
    tcase_add_test(tc, free_from_callback);
    tcase_add_test(tc, free_client_from_informer_callback);
    tcase_add_test(tc, trimmed_informer_keeps_the_named_fields_and_skips_updates_of_the_others);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(informer_suite());
}
