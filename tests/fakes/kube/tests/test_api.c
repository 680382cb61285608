/*
 * The fake's API semantics, driven over HTTPS with libcurl: Status bodies,
 * resourceVersions, lists and paging, watches, bookmarks,
 * sendInitialEvents, finalizers, /status, strategic merge, kcp prefixes,
 * discovery and OpenAPI.
 */
#include "apihelp.h"

struct fake fk;
const char *const *extra_args;

START_TEST(status_bodies_and_resource_versions)
{
    long code;
    json_t *a = create_svc("alpha", NULL), *b, *st;
    unsigned long long rv1 = rv_of(a);
    char body[1024];

    ck_assert(strlen(str(a, "metadata.uid")) == 36);
    ck_assert(strlen(str(a, "metadata.creationTimestamp")) == 20);
    b = create_svc("beta", NULL);
    ck_assert(rv_of(b) > rv1);

    st = req("POST", SVCS, JSON,
             "{\"metadata\":{\"name\":\"alpha\"},\"spec\":{\"ports\":[{\"port\""
             ":1}]}}",
             &code);
    assert_status(st, code, 409, "AlreadyExists");
    ck_assert_str_eq(str(st, "details.name"), "alpha");
    ck_assert_str_eq(str(st, "details.kind"), "services");
    json_decref(st);

    st = req("GET", SVCS "/nope", NULL, NULL, &code);
    assert_status(st, code, 404, "NotFound");
    ck_assert_str_eq(str(st, "message"), "services \"nope\" not found");
    json_decref(st);
    st = req("GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/x", NULL, NULL,
             &code);
    assert_status(st, code, 404, "NotFound");
    ck_assert_str_eq(str(st, "details.group"), "discovery.k8s.io");
    json_decref(st);

    /* PUT with a stale resourceVersion. */
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"alpha\",\"resourceVersion\":\"%llu\"},\"spec\":{\"ports\":"
             "[{\"port\":81}]}}",
             rv1);
    json_decref(
        req("PATCH", SVCS "/alpha", MERGE, "{\"metadata\":{\"labels\":{\"x\":\"1\"}}}", &code));
    ck_assert_int_eq(code, 200);
    st = req("PUT", SVCS "/alpha", JSON, body, &code);
    assert_status(st, code, 409, "Conflict");
    ck_assert(strstr(str(st, "message"), "the object has been modified"));
    json_decref(st);
    /* PATCH carrying a stale resourceVersion. */
    snprintf(body, sizeof(body), "{\"metadata\":{\"resourceVersion\":\"%llu\"}}", rv1);
    st = req("PATCH", SVCS "/alpha", MERGE, body, &code);
    assert_status(st, code, 409, "Conflict");
    json_decref(st);

    st = req("POST", SVCS, JSON,
             "{\"metadata\":{\"name\":\"gamma\"},\"spec\":{\"ports\":[{\"port\""
             ":70000}]}}",
             &code);
    assert_status(st, code, 422, "Invalid");
    ck_assert_str_eq(str(st, "details.kind"), "Service");
    ck_assert_str_eq(
        str(json_array_get(json_object_get(json_object_get(st, "details"), "causes"), 0), "field"),
        "spec.ports[0].port");
    json_decref(st);
    st = req("POST", SVCS, JSON, "{\"metadata\":{\"name\":\"Bad_Name\"},\"spec\":{}}", &code);
    assert_status(st, code, 422, "Invalid");
    json_decref(st);
    st = req("POST", SVCS, "text/plain", "hello", &code);
    assert_status(st, code, 415, "UnsupportedMediaType");
    json_decref(st);
    st = req("PATCH", SVCS "/alpha", "application/apply-patch+cbor", "{}", &code);
    assert_status(st, code, 415, "UnsupportedMediaType");
    json_decref(st);
    st = req("POST", SVCS, JSON, "{not json", &code);
    assert_status(st, code, 400, "BadRequest");
    json_decref(st);
    st = req("PUT", SVCS "/alpha", JSON, "{\"metadata\":{\"name\":\"other\"}}", &code);
    assert_status(st, code, 400, "BadRequest");
    json_decref(st);
    st = req("POST", "/api/v1/namespaces/missing/services", JSON,
             "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"ports\":[{\"port\":1}]}}", &code);
    assert_status(st, code, 404, "NotFound");
    json_decref(st);
    st = req("POST", SVCS, JSON,
             "{\"metadata\":{\"name\":\"x\",\"namespace\":\"kube-system\"},\"spec\":{}}", &code);
    assert_status(st, code, 400, "BadRequest");
    json_decref(st);
    st = req("GET", "/api/v1/namespaces/default/widgets", NULL, NULL, &code);
    assert_status(st, code, 404, "NotFound");
    json_decref(st);

    /* generateName. */
    st = req("POST", SLICES, JSON,
             "{\"metadata\":{\"generateName\":\"web-\"},\"addressType\":\"IPv4\",\"endpoints\":[]}",
             &code);
    ck_assert_int_eq(code, 201);
    ck_assert_int_eq(strlen(str(st, "metadata.name")), 9);
    ck_assert(!strncmp(str(st, "metadata.name"), "web-", 4));
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(st, "metadata"), "generation")), 1);
    json_decref(st);
    /* A no-op update keeps the resourceVersion. */
    st = req("PATCH", SVCS "/beta", MERGE, "{\"metadata\":{\"labels\":{\"app\":\"beta\"}}}", &code);
    ck_assert_int_eq(code, 200);
    ck_assert_int_eq(rv_of(st), rv_of(b));
    json_decref(st);
    json_decref(a);
    json_decref(b);
}
END_TEST

START_TEST(lists_selectors_and_paging)
{
    long code;
    json_t *l, *items, *it;
    char body[1024], path[1024];
    const char *cont;
    int seen = 0;
    size_t i;
    char last[64] = "";

    l = req("GET", SLICES, NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    ck_assert(json_is_array(json_object_get(l, "items")));
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 0);
    ck_assert_str_eq(str(l, "kind"), "EndpointSliceList");
    ck_assert_str_eq(str(l, "apiVersion"), "discovery.k8s.io/v1");
    json_decref(l);
    for (int n = 0; n < 25; n++) {
        snprintf(body, sizeof(body),
                 "{\"metadata\":{\"name\":\"s-%02d\",\"labels\":{\"parity\":\"%s\",\"n\":\"%d\"}},"
                 "\"addressType\":\"IPv4\",\"endpoints\":[{\"addresses\":[\"10.0.0.%d\"]}]}",
                 n, n % 2 ? "odd" : "even", n, n + 1);
        json_decref(req("POST", SLICES, JSON, body, &code));
        ck_assert_int_eq(code, 201);
    }
    l = req("GET", SLICES "?limit=10", NULL, NULL, &code);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 10);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(l, "metadata"), "remainingItemCount")),
        15);
    for (;;) {
        items = json_object_get(l, "items");
        json_array_foreach(items, i, it)
        {
            ck_assert_ptr_null(json_object_get(it, "kind"));
            ck_assert_ptr_null(json_object_get(it, "apiVersion"));
            ck_assert_msg(strcmp(str(it, "metadata.name"), last) > 0, "order");
            snprintf(last, sizeof(last), "%s", str(it, "metadata.name"));
            seen++;
        }
        cont = str(l, "metadata.continue");
        if (!cont[0])
            break;
        {
            char *esc = curl_easy_escape(NULL, cont, 0);
            snprintf(path, sizeof(path), SLICES "?limit=10&continue=%s", esc);
            curl_free(esc);
        }
        json_decref(l);
        l = req("GET", path, NULL, NULL, &code);
        ck_assert_int_eq(code, 200);
    }
    json_decref(l);
    ck_assert_int_eq(seen, 25);

    l = req("GET", SLICES "?labelSelector=parity%3Deven", NULL, NULL, &code);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 13);
    json_decref(l);
    l = req("GET", SLICES "?labelSelector=parity%20in%20(odd),n%20notin%20(1,3)", NULL, NULL,
            &code);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 10);
    json_decref(l);
    l = req("GET", SLICES "?labelSelector=!missing,parity!%3Dodd", NULL, NULL, &code);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 13);
    json_decref(l);
    l = req("GET", SLICES "?fieldSelector=metadata.name%3Ds-03", NULL, NULL, &code);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 1);
    json_decref(l);
    l = req("GET",
            "/apis/discovery.k8s.io/v1/endpointslices?fieldSelector=metadata.namespace!%3D"
            "default",
            NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 0);
    json_decref(l);
    l = req("GET", SLICES "?fieldSelector=spec.foo%3Dbar", NULL, NULL, &code);
    assert_status(l, code, 400, "BadRequest");
    ck_assert_str_eq(str(l, "message"), "field label not supported: spec.foo");
    json_decref(l);
    l = req("GET", SLICES "?labelSelector=a%20in%20b", NULL, NULL, &code);
    assert_status(l, code, 400, "BadRequest");
    json_decref(l);
    l = req("GET", SLICES "?continue=garbage", NULL, NULL, &code);
    assert_status(l, code, 400, "BadRequest");
    json_decref(l);
}
END_TEST

START_TEST(expired_continue_and_too_old_watch)
{
    long code;
    json_t *l, *st, *ev;
    char path[1024], body[512];
    struct watch_stream w;
    unsigned long long rv0;

    for (int n = 0; n < 6; n++) {
        snprintf(body, sizeof(body),
                 "{\"metadata\":{\"name\":\"s%d\"},\"addressType\":\"IPv4\",\"endpoints\":[]}", n);
        json_decref(req("POST", SLICES, JSON, body, &code));
    }
    l = req("GET", SLICES "?limit=2", NULL, NULL, &code);
    rv0 = strtoull(str(l, "metadata.resourceVersion"), NULL, 10);
    {
        char *esc = curl_easy_escape(NULL, str(l, "metadata.continue"), 0);
        snprintf(path, sizeof(path), SLICES "?limit=2&continue=%s", esc);
        curl_free(esc);
    }
    json_decref(l);
    /* Still consistent: a write after the first page is not seen. */
    json_decref(req("POST", SLICES, JSON,
                    "{\"metadata\":{\"name\":\"s10\"},\"addressType\":\"IPv4\",\"endpoints\":[]}",
                    &code));
    l = req("GET", path, NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    ck_assert_str_eq(str(json_array_get(json_object_get(l, "items"), 0), "metadata.name"), "s2");
    json_decref(l);
    json_decref(admin("POST", "/compact", NULL));
    st = req("GET", path, NULL, NULL, &code);
    assert_status(st, code, 410, "Expired");
    ck_assert(strlen(str(st, "metadata.continue")) > 0);
    json_decref(st);

    snprintf(path, sizeof(path), SLICES "?watch=true&resourceVersion=%llu", rv0);
    ck_assert_int_eq(ws_open(&fk, 0, path, &w), 0);
    ck_assert_int_eq(ws_wait_lines(&w, 1, 5000), 1);
    ck_assert(ws_wait_end(&w, 5000));
    ck_assert_int_eq(w.res.status, 200);
    ev = ws_event(&w, 0);
    ck_assert_str_eq(str(ev, "type"), "ERROR");
    ck_assert_str_eq(str(ev, "object.reason"), "Expired");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(ev, "object"), "code")),
                     410);
    ck_assert(!strncmp(str(ev, "object.message"), "too old resource version: ", 26));
    json_decref(ev);
    ws_close(&w);
}
END_TEST

START_TEST(bounded_history_gives_410)
{
    long code;
    json_t *ev;
    char body[512];
    struct watch_stream w;

    for (int n = 0; n < 10; n++) {
        snprintf(body, sizeof(body),
                 "{\"metadata\":{\"name\":\"s%d\"},\"addressType\":\"IPv4\",\"endpoints\":[]}", n);
        json_decref(req("POST", SLICES, JSON, body, &code));
    }
    /* --history 5: only the last five events are kept. */
    ck_assert_int_eq(ws_open(&fk, 0, SLICES "?watch=1&resourceVersion=3", &w), 0);
    ck_assert(ws_wait_end(&w, 5000));
    ev = ws_event(&w, 0);
    ck_assert_str_eq(str(ev, "type"), "ERROR");
    ck_assert_str_eq(str(ev, "object.message"), "too old resource version: 3 (10)");
    json_decref(ev);
    ck_assert_ptr_null(ws_event(&w, 1));
    ws_close(&w);
    /* From a recent enough version the events are replayed. */
    ck_assert_int_eq(ws_open(&fk, 0, SLICES "?watch=1&resourceVersion=12&timeoutSeconds=1", &w), 0);
    ck_assert(ws_wait_end(&w, 5000));
    ck_assert_int_eq(w.curl_code, CURLE_OK);
    ev = ws_event(&w, 0);
    ck_assert_str_eq(str(ev, "type"), "ADDED");
    ck_assert_str_eq(str(ev, "object.metadata.resourceVersion"), "13");
    json_decref(ev);
    ws_close(&w);
}
END_TEST

START_TEST(watch_semantics)
{
    long code;
    json_t *ev, *o;
    struct watch_stream all, sel;
    unsigned long long rv_del;

    json_decref(create_svc("one", NULL));
    ck_assert_int_eq(ws_open(&fk, 0, SVCS "?watch=true&resourceVersion=0", &all), 0);
    ck_assert_int_eq(ws_open(&fk, 0, SVCS "?watch=true&labelSelector=tier%3Dfront", &sel), 0);
    ck_assert_int_eq(ws_wait_lines(&all, 1, 5000), 1);
    ev = ws_event(&all, 0);
    ck_assert_str_eq(str(ev, "type"), "ADDED"); /* synthetic */
    ck_assert_str_eq(str(ev, "object.metadata.name"), "one");
    ck_assert_str_eq(str(ev, "object.kind"), "Service");
    json_decref(ev);
    ws_wait_lines(&sel, 1, 300);
    ck_assert_int_eq(sel.res.len, 0);

    json_decref(req("PATCH", SVCS "/one", MERGE, "{\"metadata\":{\"labels\":{\"tier\":\"front\"}}}",
                    &code));
    ck_assert_int_eq(ws_wait_lines(&sel, 1, 5000), 1);
    ev = ws_event(&sel, 0);
    ck_assert_str_eq(str(ev, "type"), "ADDED"); /* started matching */
    json_decref(ev);
    o = req("PATCH", SVCS "/one", MERGE, "{\"metadata\":{\"labels\":{\"tier\":\"back\"}}}", &code);
    ck_assert_int_eq(ws_wait_lines(&sel, 2, 5000), 2);
    ev = ws_event(&sel, 1);
    ck_assert_str_eq(str(ev, "type"), "DELETED"); /* stopped matching */
    ck_assert_str_eq(str(ev, "object.metadata.labels.tier"), "front");
    ck_assert_str_eq(str(ev, "object.metadata.resourceVersion"),
                     str(o, "metadata.resourceVersion"));
    json_decref(ev);
    json_decref(o);

    json_decref(req("DELETE", SVCS "/one", NULL, NULL, &code));
    ck_assert_int_eq(code, 200);
    o = req("GET", SVCS, NULL, NULL, &code);
    rv_del = strtoull(str(o, "metadata.resourceVersion"), NULL, 10);
    json_decref(o);
    ck_assert_int_eq(ws_wait_lines(&all, 4, 5000), 4);
    ev = ws_event(&all, 3);
    ck_assert_str_eq(str(ev, "type"), "DELETED");
    ck_assert_int_eq(strtoull(str(ev, "object.metadata.resourceVersion"), NULL, 10), rv_del);
    json_decref(ev);
    ev = ws_event(&all, 1);
    ck_assert_str_eq(str(ev, "type"), "MODIFIED");
    json_decref(ev);
    ws_close(&all);
    ws_close(&sel);

    /* Watch from N: only what came after N. timeoutSeconds ends cleanly. */
    o = create_svc("two", NULL);
    {
        char path[256];
        snprintf(path, sizeof(path), SVCS "?watch=true&resourceVersion=%s&timeoutSeconds=1",
                 str(o, "metadata.resourceVersion"));
        json_decref(create_svc("three", NULL));
        ck_assert_int_eq(ws_open(&fk, 0, path, &all), 0);
    }
    ck_assert(ws_wait_end(&all, 5000));
    ck_assert_int_eq(all.curl_code, CURLE_OK);
    ck_assert_int_eq(ws_wait_lines(&all, 9, 0), 1);
    ev = ws_event(&all, 0);
    ck_assert_str_eq(str(ev, "object.metadata.name"), "three");
    json_decref(ev);
    ws_close(&all);
    json_decref(o);
}
END_TEST

START_TEST(bookmarks_and_initial_events)
{
    long code;
    json_t *ev, *meta;
    struct watch_stream w;
    const char *key;
    json_t *v;
    int bookmarks = 0;

    json_decref(create_svc("one", NULL));
    json_decref(create_svc("two", NULL));
    /* --bookmark-interval-ms 200 */
    ck_assert_int_eq(ws_open(&fk, 0,
                             SVCS "?watch=1&resourceVersion=7&allowWatchBookmarks=true&"
                                  "timeoutSeconds=1",
                             &w),
                     0);
    ck_assert(ws_wait_end(&w, 5000));
    for (int i = 0; (ev = ws_event(&w, i)); i++) {
        if (!strcmp(str(ev, "type"), "BOOKMARK")) {
            bookmarks++;
            json_object_foreach(json_object_get(ev, "object"), key, v) ck_assert_msg(
                !strcmp(key, "kind") || !strcmp(key, "apiVersion") || !strcmp(key, "metadata"),
                "bookmark has %s", key);
            ck_assert(strlen(str(ev, "object.metadata.resourceVersion")) > 0);
        }
        json_decref(ev);
    }
    ck_assert_msg(bookmarks >= 2, "only %d bookmarks", bookmarks);
    ws_close(&w);

    ck_assert_int_eq(ws_open(&fk, 0,
                             SVCS "?watch=1&sendInitialEvents=true&allowWatchBookmarks="
                                  "true&resourceVersionMatch=NotOlderThan&"
                                  "resourceVersion=",
                             &w),
                     0);
    ck_assert_int_ge(ws_wait_lines(&w, 3, 5000), 3);
    ev = ws_event(&w, 0);
    ck_assert_str_eq(str(ev, "type"), "ADDED");
    json_decref(ev);
    ev = ws_event(&w, 2);
    ck_assert_str_eq(str(ev, "type"), "BOOKMARK");
    meta = json_object_get(json_object_get(ev, "object"), "metadata");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(meta, "annotations"),
                                                       "k8s.io/initial-events-end")),
                     "true");
    json_decref(ev);
    json_decref(create_svc("three", NULL));
    {
        /* Periodic bookmarks may come in between. */
        int found = 0;
        long long deadline = tu_now_ms() + 5000;
        for (int i = 3; !found && tu_now_ms() < deadline;) {
            if (ws_wait_lines(&w, i + 1, 100) <= i)
                continue;
            ev = ws_event(&w, i++);
            if (strcmp(str(ev, "type"), "BOOKMARK")) {
                ck_assert_str_eq(str(ev, "type"), "ADDED");
                ck_assert_str_eq(str(ev, "object.metadata.name"), "three");
                found = 1;
            }
            json_decref(ev);
        }
        ck_assert(found);
    }
    ws_close(&w);

    ev = req("GET", SVCS "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true", NULL, NULL,
             &code);
    assert_status(ev, code, 422, "Invalid");
    json_decref(ev);
}
END_TEST

START_TEST(finalizers_and_status_subresource)
{
    long code;
    json_t *o, *ev;
    struct watch_stream w;

    o = req("POST", SVCS, JSON,
            "{\"metadata\":{\"name\":\"lb\",\"finalizers\":[\"prismlb.io/lb\"]},\"spec\":{\"type\":"
            "\"LoadBalancer\",\"externalTrafficPolicy\":\"Local\",\"ports\":[{\"port\":443}]},"
            "\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"1.1.1.1\"}]}}}",
            &code);
    ck_assert_int_eq(code, 201);
    /* create clears status; Local gets a health check node port */
    ck_assert_int_eq(json_array_size(json_object_get(
                         json_object_get(json_object_get(o, "status"), "loadBalancer"), "ingress")),
                     0);
    ck_assert(json_integer_value(
                  json_object_get(json_object_get(o, "spec"), "healthCheckNodePort")) >= 30000);
    json_decref(o);
    o = req("PATCH", SVCS "/lb/status", MERGE,
            "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"198.51.100.7\"}]}},\"spec\":{"
            "\"sessionAffinity\":\"ClientIP\"}}",
            &code);
    ck_assert_int_eq(code, 200);
    ck_assert_str_eq(str(o, "spec.sessionAffinity"), "None"); /* status write keeps spec */
    ck_assert_str_eq(
        str(json_array_get(
                json_object_get(json_object_get(json_object_get(o, "status"), "loadBalancer"),
                                "ingress"),
                0),
            "ipMode"),
        "VIP");
    json_decref(o);
    o = req("PATCH", SVCS "/lb", MERGE, "{\"status\":{\"loadBalancer\":null}}", &code);
    ck_assert_int_eq(code, 200); /* main write keeps status */
    ck_assert_int_eq(json_array_size(json_object_get(
                         json_object_get(json_object_get(o, "status"), "loadBalancer"), "ingress")),
                     1);
    json_decref(o);

    ck_assert_int_eq(ws_open(&fk, 0, SVCS "?watch=1&fieldSelector=metadata.name%3Dlb", &w), 0);
    ws_wait_lines(&w, 1, 5000); /* synthetic ADDED */
    o = req("DELETE", SVCS "/lb", NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    ck_assert(strlen(str(o, "metadata.deletionTimestamp")) > 0);
    json_decref(o);
    o = req("GET", SVCS "/lb", NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    json_decref(o);
    ck_assert_int_eq(ws_wait_lines(&w, 2, 5000), 2);
    ev = ws_event(&w, 1);
    ck_assert_str_eq(str(ev, "type"), "MODIFIED");
    json_decref(ev);
    o = req("PATCH", SVCS "/lb", MERGE, "{\"metadata\":{\"finalizers\":[\"a/new\"]}}", &code);
    assert_status(o, code, 422, "Invalid");
    json_decref(o);
    o = req("PATCH", SVCS "/lb", "application/json-patch+json",
            "[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"}]", &code);
    ck_assert_int_eq(code, 200);
    json_decref(o);
    ck_assert_int_eq(ws_wait_lines(&w, 3, 5000), 3);
    ev = ws_event(&w, 2);
    ck_assert_str_eq(str(ev, "type"), "DELETED");
    json_decref(ev);
    o = req("GET", SVCS "/lb", NULL, NULL, &code);
    assert_status(o, code, 404, "NotFound");
    json_decref(o);
    ws_close(&w);

    /* Delete preconditions. */
    o = create_svc("pre", NULL);
    ev = req("DELETE", SVCS "/pre", JSON, "{\"preconditions\":{\"uid\":\"not-it\"}}", &code);
    assert_status(ev, code, 409, "Conflict");
    json_decref(ev);
    ev = req("DELETE", SVCS "/pre", JSON, "{\"preconditions\":{\"resourceVersion\":\"1\"}}", &code);
    assert_status(ev, code, 409, "Conflict");
    json_decref(ev);
    {
        char body[256];
        snprintf(body, sizeof(body), "{\"preconditions\":{\"uid\":\"%s\"}}",
                 str(o, "metadata.uid"));
        ev = req("DELETE", SVCS "/pre", JSON, body, &code);
        ck_assert_int_eq(code, 200);
        ck_assert_str_eq(str(ev, "status"), "Success");
        json_decref(ev);
    }
    json_decref(o);
}
END_TEST

START_TEST(strategic_merge_on_nodes)
{
    long code;
    json_t *o, *c;

    o = req("POST", "/api/v1/nodes", JSON,
            "{\"metadata\":{\"name\":\"n1\",\"finalizers\":[\"a\"]},\"status\":{\"conditions\":["
            "{\"type\":\"Ready\",\"status\":\"False\"},{\"type\":\"DiskPressure\",\"status\":"
            "\"False\"}],\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"}]}}",
            &code);
    ck_assert_int_eq(code, 201);
    json_decref(o);
    o = req("PATCH", "/api/v1/nodes/n1/status", SMP,
            "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],\"addresses\":"
            "[{\"type\":\"ExternalIP\",\"address\":\"203.0.113.1\"}]}}",
            &code);
    ck_assert_int_eq(code, 200);
    c = json_object_get(json_object_get(o, "status"), "conditions");
    ck_assert_int_eq(json_array_size(c), 2);
    ck_assert_str_eq(str(json_array_get(c, 0), "status"), "True");
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(o, "status"), "addresses")),
                     2);
    json_decref(o);
    o = req("PATCH", "/api/v1/nodes/n1/status", SMP,
            "{\"status\":{\"conditions\":[{\"type\":\"DiskPressure\",\"$patch\":\"delete\"}]}}",
            &code);
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(o, "status"), "conditions")),
                     1);
    json_decref(o);
    o = req("PATCH", "/api/v1/nodes/n1", SMP, "{\"metadata\":{\"finalizers\":[\"b\",\"a\"]}}",
            &code);
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(o, "metadata"), "finalizers")),
                     2);
    json_decref(o);
    o = req("PATCH", "/api/v1/nodes/n1", SMP, "{\"spec\":{\"taints\":[{\"key\":\"k\"]}}", &code);
    assert_status(o, code, 400, "BadRequest"); /* malformed JSON */
    json_decref(o);
}
END_TEST

START_TEST(clusters_prefix_and_discovery)
{
    long code;
    json_t *o, *r;
    size_t i;
    int status_sub = 0;

    o = req("POST", "/clusters/root:a/api/v1/namespaces/default/services", JSON,
            "{\"metadata\":{\"name\":\"only-a\"},\"spec\":{\"ports\":[{\"port\":1}]}}", &code);
    ck_assert_int_eq(code, 201);
    json_decref(o);
    o = req("GET", "/clusters/root:a/api/v1/namespaces/default/services/only-a", NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    json_decref(o);
    o = req("GET", "/clusters/root:b" SVCS "/only-a", NULL, NULL, &code);
    ck_assert_int_eq(code, 404);
    json_decref(o);
    o = req("GET", SVCS "/only-a", NULL, NULL, &code);
    ck_assert_int_eq(code, 404);
    json_decref(o);
    o = req("GET", "/clusters/root:b/api/v1/namespaces/default", NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    json_decref(o);

    o = req("GET", "/api", NULL, NULL, &code);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "versions"), 0)), "v1");
    json_decref(o);
    o = req("GET", "/apis", NULL, NULL, &code);
    ck_assert_str_eq(str(o, "kind"), "APIGroupList");
    ck_assert_int_eq(json_array_size(json_object_get(o, "groups")), 3);
    json_decref(o);
    o = req("GET", "/api/v1", NULL, NULL, &code);
    json_array_foreach(json_object_get(o, "resources"), i, r)
    {
        if (!strcmp(str(r, "name"), "services/status"))
            status_sub = 1;
        if (!strcmp(str(r, "name"), "services")) {
            ck_assert_str_eq(str(r, "singularName"), "service");
            ck_assert_str_eq(str(r, "kind"), "Service");
            ck_assert(json_is_true(json_object_get(r, "namespaced")));
            ck_assert_int_eq(json_array_size(json_object_get(r, "verbs")), 8);
        }
    }
    ck_assert(status_sub);
    json_decref(o);
    o = req("GET", "/apis/coordination.k8s.io/v1", NULL, NULL, &code);
    ck_assert_str_eq(str(json_array_get(json_object_get(o, "resources"), 0), "kind"), "Lease");
    json_decref(o);
    o = req("GET", "/version", NULL, NULL, &code);
    ck_assert_str_eq(str(o, "major"), "1");
    json_decref(o);
    o = req("GET", "/openapi/v3", NULL, NULL, &code);
    r = json_object_get(json_object_get(json_object_get(o, "paths"), "api/v1"),
                        "serverRelativeURL");
    ck_assert(!strncmp(json_string_value(r), "/openapi/v3/api/v1?hash=", 24));
    json_decref(o);
    o = req("GET", "/openapi/v3/apis/discovery.k8s.io/v1", NULL, NULL, &code);
    r = json_object_get(json_object_get(json_object_get(json_object_get(o, "paths"),
                                                        "/apis/discovery.k8s.io/v1/namespaces/"
                                                        "{namespace}/endpointslices/{name}"),
                                        "patch"),
                        "x-kubernetes-group-version-kind");
    ck_assert_str_eq(str(r, "kind"), "EndpointSlice");
    json_decref(o);
}
END_TEST

#define CORE_EV "/api/v1/namespaces/default/events"
#define NEW_EV "/apis/events.k8s.io/v1/namespaces/default/events"

START_TEST(events_through_both_apis)
{
    long code;
    json_t *o, *ev;
    struct watch_stream w;

    o = req("POST", CORE_EV, JSON,
            "{\"metadata\":{\"name\":\"e1\"},\"involvedObject\":{\"kind\":\"Service\",\"name\":"
            "\"web\",\"namespace\":\"default\"},\"reason\":\"Synced\",\"message\":\"hello\","
            "\"type\":\"Normal\",\"count\":2,\"source\":{\"component\":\"prismlb\"}}",
            &code);
    ck_assert_int_eq(code, 201);
    json_decref(o);
    o = req("GET", NEW_EV "/e1", NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    ck_assert_str_eq(str(o, "apiVersion"), "events.k8s.io/v1");
    ck_assert_str_eq(str(o, "note"), "hello");
    ck_assert_str_eq(str(o, "regarding.name"), "web");
    ck_assert_str_eq(str(o, "deprecatedSource.component"), "prismlb");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "deprecatedCount")), 2);
    ck_assert_ptr_null(json_object_get(o, "message"));
    json_decref(o);

    ck_assert_int_eq(ws_open(&fk, 0, NEW_EV "?watch=1&fieldSelector=regarding.name%3Dweb", &w), 0);
    ck_assert_int_eq(ws_wait_lines(&w, 1, 5000), 1);
    ev = ws_event(&w, 0);
    ck_assert_str_eq(str(ev, "object.note"), "hello");
    json_decref(ev);
    json_decref(req("PATCH", CORE_EV "/e1", MERGE, "{\"message\":\"again\",\"count\":3}", &code));
    ck_assert_int_eq(code, 200);
    ck_assert_int_eq(ws_wait_lines(&w, 2, 5000), 2);
    ev = ws_event(&w, 1);
    ck_assert_str_eq(str(ev, "type"), "MODIFIED");
    ck_assert_str_eq(str(ev, "object.note"), "again");
    ck_assert_str_eq(str(ev, "object.apiVersion"), "events.k8s.io/v1");
    json_decref(ev);
    ws_close(&w);

    o = req("POST", NEW_EV, JSON,
            "{\"metadata\":{\"name\":\"e2\"},\"eventTime\":\"2026-01-01T00:00:00.000000Z\","
            "\"reportingController\":\"prismlb.io/lb\",\"reportingInstance\":\"r1\","
            "\"action\":\"Reconcile\",\"reason\":\"Created\",\"type\":\"Normal\","
            "\"note\":\"made it\",\"regarding\":{\"kind\":\"Service\",\"name\":\"web\"}}",
            &code);
    ck_assert_msg(code == 201, "%ld %s", code, json_dumps(o, 0));
    ck_assert_str_eq(str(o, "note"), "made it");
    json_decref(o);
    o = req("POST", NEW_EV, JSON, "{\"metadata\":{\"name\":\"e3\"},\"note\":\"x\"}", &code);
    assert_status(o, code, 422, "Invalid"); /* events.k8s.io requires eventTime etc. */
    json_decref(o);
    o = req("GET", CORE_EV "/e2", NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    ck_assert_str_eq(str(o, "apiVersion"), "v1");
    ck_assert_str_eq(str(o, "message"), "made it");
    ck_assert_str_eq(str(o, "reportingComponent"), "prismlb.io/lb");
    ck_assert_str_eq(str(o, "involvedObject.name"), "web");
    json_decref(o);
    o = req("GET", NEW_EV "?fieldSelector=reportingController%3Dprismlb.io%2Flb", NULL, NULL,
            &code);
    ck_assert_int_eq(json_array_size(json_object_get(o, "items")), 1);
    json_decref(o);
    o = req("GET", CORE_EV, NULL, NULL, &code);
    ck_assert_int_eq(json_array_size(json_object_get(o, "items")), 2);
    json_decref(o);
    /* events.k8s.io/v1 keeps an Event's note (ValidateEventUpdate); core/v1 does not. */
    o = req("PATCH", NEW_EV "/e1", MERGE, "{\"note\":\"changed\"}", &code);
    assert_status(o, code, 422, "Invalid");
    ck_assert_str_eq(cause_at(o, 0, "field"), "message");
    json_decref(o);
    o = req("PATCH", CORE_EV "/e1", MERGE, "{\"message\":\"changed\"}", &code);
    ck_assert_int_eq(code, 200);
    json_decref(o);
    o = req("GET", CORE_EV "/e1", NULL, NULL, &code);
    ck_assert_str_eq(str(o, "message"), "changed");
    json_decref(o);
    json_decref(req("DELETE", NEW_EV "/e2", NULL, NULL, &code));
    ck_assert_int_eq(code, 200);
    o = req("GET", CORE_EV "/e2", NULL, NULL, &code);
    assert_status(o, code, 404, "NotFound");
    json_decref(o);
}
END_TEST

int
main(void)
{
    static const char *const none[] = {NULL};
    static const char *const hist[] = {"--history", "5", NULL};
    static const char *const bm[] = {"--bookmark-interval-ms", "200", NULL};
    const struct api_case cases[] = {
        {"status", none, status_bodies_and_resource_versions},
        {"lists", none, lists_selectors_and_paging},
        {"expired", none, expired_continue_and_too_old_watch},
        {"history", hist, bounded_history_gives_410},
        {"watch", none, watch_semantics},
        {"bookmarks", bm, bookmarks_and_initial_events},
        {"finalizers", none, finalizers_and_status_subresource},
        {"smp", none, strategic_merge_on_nodes},
        {"clusters", none, clusters_prefix_and_discovery},
        {"events", none, events_through_both_apis},
    };
    return run_cases(cases, sizeof(cases) / sizeof(cases[0])) ? 1 : 0;
}
