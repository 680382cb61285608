/*
 * Several API servers (lost quorum, stop, stop-accepting), every admin
 * fault, authentication and the request log, and bulk writes with a large
 * paged list and a watch carrying thousands of events.
 */
#include <signal.h>

#include "apihelp.h"

struct fake fk;
const char *const *extra_args;

START_TEST(several_servers_and_lost_quorum)
{
    long code;
    struct http_res r;
    json_t *o, *ev;
    struct watch_stream w;

    ck_assert_int_eq(fk.nservers, 3);
    ck_assert_int_eq(ws_open(&fk, 1, SVCS "?watch=1", &w), 0);
    json_decref(create_svc("shared", NULL)); /* through server 0 */
    ck_assert_int_eq(ws_wait_lines(&w, 1, 5000), 1);
    ev = ws_event(&w, 0);
    ck_assert_str_eq(str(ev, "object.metadata.name"), "shared");
    json_decref(ev);
    ck_assert_int_eq(fake_api(&fk, 2, "GET", SVCS "/shared", NULL, NULL, 1, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);

    json_decref(admin("POST", "/servers/1/quorum-lost", NULL));
    ck_assert_int_eq(fake_api(&fk, 1, "GET", "/readyz", NULL, NULL, 0, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 500);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&fk, 1, "GET", "/healthz", NULL, NULL, 0, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 500);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&fk, 1, "GET", "/livez", NULL, NULL, 0, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&fk, 1, "GET", SVCS, NULL, NULL, 1, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 500);
    o = res_json(&r);
    ck_assert_str_eq(str(o, "kind"), "Status");
    json_decref(o);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&fk, 0, "GET", "/readyz", NULL, NULL, 0, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);
    json_decref(admin("POST", "/servers/1/quorum-ok", NULL));
    ck_assert_int_eq(fake_api(&fk, 1, "GET", SVCS, NULL, NULL, 1, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);

    /* Stopping server 1 ends its watch and refuses connections. */
    json_decref(admin("POST", "/servers/1/stop", NULL));
    ck_assert(ws_wait_end(&w, 5000));
    ws_close(&w);
    ck_assert_int_ne(fake_api(&fk, 1, "GET", "/readyz", NULL, NULL, 0, NULL, 2000, &r), 0);
    ck_assert_int_eq(r.curl_code, CURLE_COULDNT_CONNECT);
    http_res_free(&r);
    o = req("GET", SVCS "/shared", NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    json_decref(o);
    json_decref(admin("POST", "/servers/1/start", NULL));
    ck_assert_int_eq(fake_api(&fk, 1, "GET", SVCS "/shared", NULL, NULL, 1, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);

    /* Not accepting: TCP connects (backlog) but nobody answers. */
    json_decref(admin("POST", "/servers/2/stop-accepting", NULL));
    ck_assert_int_ne(fake_api(&fk, 2, "GET", "/readyz", NULL, NULL, 0, NULL, 700, &r), 0);
    ck_assert_int_eq(r.curl_code, CURLE_OPERATION_TIMEDOUT);
    http_res_free(&r);
    json_decref(admin("POST", "/servers/2/accept", NULL));
    ck_assert_int_eq(fake_api(&fk, 2, "GET", "/readyz", NULL, NULL, 0, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);
}
END_TEST

START_TEST(injected_faults)
{
    long code;
    struct http_res r;
    json_t *o, *ev;
    struct watch_stream w;

    json_decref(create_svc("a", NULL));
    json_decref(create_svc("b", NULL));
    json_decref(create_svc("c", NULL));

    json_decref(admin("POST", "/faults",
                      "{\"fail_count\":2,\"fail_status\":503,\"fail_match\":\"/services\"}"));
    o = req("GET", "/api/v1/nodes", NULL, NULL, &code);
    ck_assert_int_eq(code, 200); /* not matching */
    json_decref(o);
    for (int i = 0; i < 2; i++) {
        o = req("GET", SVCS, NULL, NULL, &code);
        assert_status(o, code, 503, "ServiceUnavailable");
        json_decref(o);
    }
    o = req("GET", SVCS, NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    json_decref(o);

    json_decref(admin("POST", "/faults", "{\"latency_ms\":400}"));
    ck_assert_int_eq(fake_api(&fk, 0, "GET", SVCS, NULL, NULL, 1, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(r.seconds >= 0.39, "took %f s", r.seconds);
    http_res_free(&r);
    json_decref(admin("DELETE", "/faults", NULL));

    /* Close each watch after 2 events, cleanly then by dropping. */
    json_decref(admin("POST", "/faults", "{\"watch_close_events\":2}"));
    ck_assert_int_eq(ws_open(&fk, 0, SVCS "?watch=1", &w), 0);
    ck_assert(ws_wait_end(&w, 5000));
    ck_assert_int_eq(w.curl_code, CURLE_OK);
    ck_assert_int_eq(ws_wait_lines(&w, 9, 0), 2);
    ws_close(&w);
    json_decref(admin("POST", "/faults", "{\"watch_close_mode\":\"drop\"}"));
    ck_assert_int_eq(ws_open(&fk, 0, SVCS "?watch=1", &w), 0);
    ck_assert(ws_wait_end(&w, 5000));
    ck_assert_int_ne(w.curl_code, CURLE_OK); /* no terminating chunk */
    ck_assert_int_eq(ws_wait_lines(&w, 9, 0), 2);
    ws_close(&w);
    json_decref(admin("DELETE", "/faults", NULL));

    json_decref(admin("POST", "/faults", "{\"watch_close_ms\":300}"));
    {
        long long t0 = tu_now_ms();
        ck_assert_int_eq(ws_open(&fk, 0, SVCS "?watch=1&resourceVersion=0", &w), 0);
        ck_assert(ws_wait_end(&w, 5000));
        ck_assert(tu_now_ms() - t0 >= 290);
        ck_assert_int_eq(ws_wait_lines(&w, 9, 0), 3);
        ws_close(&w);
    }
    json_decref(admin("DELETE", "/faults", NULL));

    /* A watch that carried only its headers also ends cleanly, even at once. */
    json_decref(admin("POST", "/faults", "{\"watch_close_ms\":1}"));
    for (int i = 0; i < 20; i++) {
        o = req("GET", SVCS, NULL, NULL, &code);
        {
            char path[256];
            snprintf(path, sizeof(path), SVCS "?watch=1&resourceVersion=%s",
                     str(o, "metadata.resourceVersion"));
            ck_assert_int_eq(ws_open(&fk, 0, path, &w), 0);
        }
        json_decref(o);
        ck_assert(ws_wait_end(&w, 5000));
        ck_assert_int_eq(w.curl_code, CURLE_OK);
        ck_assert_int_eq(w.res.status, 200);
        ws_close(&w);
    }
    json_decref(admin("DELETE", "/faults", NULL));

    json_decref(admin("POST", "/faults", "{\"watch_gone_next\":1}"));
    ck_assert_int_eq(ws_open(&fk, 0, SVCS "?watch=1&resourceVersion=8", &w), 0);
    ck_assert(ws_wait_end(&w, 5000));
    ck_assert_int_eq(w.res.status, 200);
    ev = ws_event(&w, 0);
    ck_assert_str_eq(str(ev, "type"), "ERROR");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(ev, "object"), "code")),
                     410);
    json_decref(ev);
    ws_close(&w);

    /* Admin: close every open watch now. */
    ck_assert_int_eq(ws_open(&fk, 0, SVCS "?watch=1", &w), 0);
    ws_wait_lines(&w, 3, 5000);
    o = admin("POST", "/watches/close?mode=drop", NULL);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "closing")), 1);
    json_decref(o);
    ck_assert(ws_wait_end(&w, 5000));
    ck_assert_int_ne(w.curl_code, CURLE_OK);
    ws_close(&w);
}
END_TEST

START_TEST(authentication_and_request_log)
{
    struct http_res r;
    json_t *o, *e;
    size_t i;
    int found_alice = 0, found_cert = 0;

    ck_assert_int_eq(fake_api(&fk, 0, "GET", SVCS, NULL, NULL, 0, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 401);
    o = res_json(&r);
    ck_assert_str_eq(str(o, "reason"), "Unauthorized");
    json_decref(o);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&fk, 0, "GET", SVCS, NULL, NULL, 0, "wrong", 5000, &r), 0);
    ck_assert_int_eq(r.status, 401);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&fk, 0, "GET", SVCS "?limit=1", NULL, NULL, 0, "s3cret", 5000, &r),
                     0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&fk, 0, "GET", SVCS, NULL, NULL, 0, "look", 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&fk, 0, "POST", SVCS, JSON, "{}", 0, "look", 5000, &r), 0);
    ck_assert_int_eq(r.status, 403);
    o = res_json(&r);
    ck_assert_str_eq(str(o, "reason"), "Forbidden");
    json_decref(o);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&fk, 0, "GET", "/readyz", NULL, NULL, 0, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 200); /* health needs no credentials */
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&fk, 0, "GET", "/api/v1/nodes", NULL, NULL, 1, NULL, 5000, &r), 0);
    http_res_free(&r);

    o = admin("GET", "/requests", NULL);
    json_array_foreach(json_object_get(o, "items"), i, e)
    {
        if (!strcmp(str(e, "user"), "alice") && !strcmp(str(e, "path"), SVCS "?limit=1") &&
            json_integer_value(json_object_get(e, "status")) == 200 &&
            !strcmp(str(e, "userAgent"), "fake-kube-test/1") && !strcmp(str(e, "method"), "GET"))
            found_alice = 1;
        if (!strcmp(str(e, "user"), "prismlb-test-admin") &&
            !strcmp(str(e, "path"), "/api/v1/nodes"))
            found_cert = 1;
    }
    ck_assert(found_alice && found_cert);
    json_decref(o);
    o = admin("DELETE", "/requests", NULL);
    json_decref(o);
    o = admin("GET", "/requests", NULL);
    ck_assert_int_eq(json_array_size(json_object_get(o, "items")), 0);
    json_decref(o);
}
END_TEST

START_TEST(bulk_large_list_and_watch)
{
    long code;
    json_t *o, *l, *ev;
    struct watch_stream w;
    char path[1024];
    int items = 0, modified = 0;
    long long t0;

    o = admin("POST", "/bulk",
              "{\"op\":\"create\",\"resource\":\"endpointslices.discovery.k8s.io\",\"count\":"
              "5000,\"payloadBytes\":1024}");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "done")), 5000);
    json_decref(o);
    snprintf(path, sizeof(path), SLICES "?limit=500");
    for (;;) {
        const char *cont;
        l = req("GET", path, NULL, NULL, &code);
        ck_assert_int_eq(code, 200);
        items += (int)json_array_size(json_object_get(l, "items"));
        cont = str(l, "metadata.continue");
        if (!cont[0]) {
            snprintf(path, sizeof(path),
                     SLICES "?watch=1&allowWatchBookmarks=true&"
                            "resourceVersion=%s",
                     str(l, "metadata.resourceVersion"));
            json_decref(l);
            break;
        }
        {
            char *esc = curl_easy_escape(NULL, cont, 0);
            snprintf(path, sizeof(path), SLICES "?limit=500&continue=%s", esc);
            curl_free(esc);
        }
        json_decref(l);
    }
    ck_assert_int_eq(items, 5000);

    ck_assert_int_eq(ws_open(&fk, 0, path, &w), 0);
    ws_wait_lines(&w, 1, 300);
    t0 = tu_now_ms();
    o = admin("POST", "/bulk",
              "{\"op\":\"update\",\"resource\":\"endpointslices\",\"count\":5000,"
              "\"payloadBytes\":1024}");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "done")), 5000);
    json_decref(o);
    {
        int got = ws_wait_lines(&w, 5000, 60000);
        ck_assert_msg(got == 5000, "%d events; stream done %d curl %d, %zu bytes", got, w.done,
                      w.curl_code, w.res.len);
    }
    fprintf(stderr, "bulk: 5000 MODIFIED events of ~1.4 KiB delivered in %lld ms\n",
            tu_now_ms() - t0);
    for (int i = 0; (ev = ws_event(&w, i)); i++) {
        modified += !strcmp(str(ev, "type"), "MODIFIED");
        json_decref(ev);
    }
    ck_assert_int_eq(modified, 5000);
    ws_close(&w);

    o = admin("GET", "/store?resource=endpointslices.discovery.k8s.io", NULL);
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(o, "objects"),
                                                     "endpointslices.discovery.k8s.io")),
                     5000);
    json_decref(o);
    o = admin("POST", "/bulk",
              "{\"op\":\"delete\",\"resource\":\"endpointslices\",\"count\":5000}");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "done")), 5000);
    json_decref(o);
    l = req("GET", SLICES, NULL, NULL, &code);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 0);
    json_decref(l);
    {
        struct http_res r;
        ck_assert_int_eq(fake_admin(&fk, "POST", "/bulk",
                                    "{\"op\":\"create\",\"resource\":"
                                    "\"widgets\",\"count\":1}",
                                    &r),
                         0);
        ck_assert_int_eq(r.status, 400);
        http_res_free(&r);
    }
}
END_TEST

START_TEST(malformed_requests_get_status_errors)
{
    static const struct {
        const char *method, *path, *ctype, *body;
        long want;
    } bad[] = {
        {"GET", "/api/v1/namespaces/default/services/a/b/c/d/e/f/g/h/i/j/k/l/m", NULL, NULL, 404},
        {"GET", "/apis/nope.io/v1/things", NULL, NULL, 404},
        {"GET", "/api/v1/services/x", NULL, NULL, 404},
        {"GET", "/api/v1/namespaces/default/nodes", NULL, NULL, 404},
        {"POST", "/api/v1/namespaces/default/services/x", JSON, "{}", 405},
        {"DELETE", "/api/v1/namespaces/default/services/x/status", NULL, NULL, 405},
        {"POST", SVCS, JSON, "[1,2,3]", 400},
        {"POST", SVCS, JSON, "\"just a string\"", 400},
        {"POST", SVCS, JSON, "{\"metadata\":[]}", 400},
        /* Values the Go types cannot hold fail the decoding: 400, as kube-apiserver. */
        {"POST", SVCS, JSON, "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"ports\":\"80\"}}", 400},
        {"POST", SVCS, JSON, "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"ports\":[7]}}", 400},
        {"POST", SVCS, JSON, "{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}}", 400},
        {"POST", SVCS, JSON, "{\"apiVersion\":\"v2\",\"metadata\":{\"name\":\"a\"}}", 400},
        {"POST", SVCS, JSON, "{\"metadata\":{\"name\":\"a\xff\"}}", 400},
        {"POST", SVCS, JSON, "", 400},
        {"POST", SLICES, JSON,
         "{\"metadata\":{\"name\":\"s\"},\"addressType\":\"IPv4\","
         "\"endpoints\":[{\"addresses\":[\"999.1.1.1\"]}]}",
         422},
        {"POST", SLICES, JSON, "{\"metadata\":{\"name\":\"s\"},\"addressType\":\"IPv9\"}", 422},
        {"PATCH", SVCS "/base", "application/json-patch+json", "[{\"op\":\"add\"}]", 400},
        {"PATCH", SVCS "/base", "application/json-patch+json",
         "[{\"op\":\"add\",\"path\":\"/a/b/c/d\",\"value\":1}]", 422},
        {"PATCH", SVCS "/base", "application/json-patch+json",
         "[{\"op\":\"replace\",\"path\":\"\",\"value\":1}]", 422},
        {"PATCH", SVCS "/base", "application/json-patch+json",
         "[{\"op\":\"add\",\"path\":\"\",\"value\":[1]}]", 400},
        {"PATCH", SVCS "/base", MERGE, "[1]", 400},
        {"PATCH", SVCS "/base", MERGE, "{\"metadata\":{\"name\":\"other\"}}", 400},
        {"PATCH", SVCS "/base", SMP, "{\"spec\":{\"ports\":[{\"name\":\"no-key\"}]}}", 400},
        {"PATCH", SVCS "/base", SMP, "{\"$patch\":\"delete\"}", 400},
        {"PATCH", SVCS "/base", NULL, "{}", 415},
        {"PUT", SVCS "/base", JSON, "{\"metadata\":{}}", 400},
        {"GET", SVCS "?labelSelector=%ZZ", NULL, NULL, 400},
        {"GET", SVCS "?limit=-1", NULL, NULL, 400},
        {"GET", SVCS "?resourceVersion=abc", NULL, NULL, 400},
        {"GET", SVCS "?resourceVersion=99999999", NULL, NULL, 504},
        {"GET", SVCS "?watch=1&resourceVersion=99999999", NULL, NULL, 504},
        {"GET", SVCS "?watch=1&resourceVersion=x1", NULL, NULL, 400},
        {"GET", SVCS "?watch=1&resourceVersionMatch=Exact", NULL, NULL, 422},
        {"GET", SVCS "?resourceVersionMatch=Sometimes&resourceVersion=1", NULL, NULL, 422},
        {"DELETE", SVCS "/base", JSON, "not json", 400},
        {"PATCH", SVCS "/base", MERGE, "{\"metadata\":{\"labels\":{\"bad key\":\"v\"}}}", 422},
        {"PATCH", SVCS "/base", MERGE, "{\"metadata\":{\"labels\":{\"k\":\"-v\"}}}", 422},
        {"PATCH", SVCS "/base", MERGE, "{\"metadata\":{\"labels\":{\"k\":7}}}", 422},
        {"PATCH", SVCS "/base", MERGE, "{\"metadata\":{\"annotations\":{\"a/b/c\":\"v\"}}}", 422},
        {"PATCH", SVCS "/base", MERGE, "{\"metadata\":{\"finalizers\":[\"not valid!\"]}}", 422},
        {"PATCH", SLICES "/slice", MERGE, "{\"addressType\":\"IPv6\"}", 422},
    };
    struct http_res r;
    json_t *o;
    char deep[4200];
    size_t i;
    long code;

    json_decref(create_svc("base", NULL));
    json_decref(req("POST", SLICES, JSON,
                    "{\"metadata\":{\"name\":\"slice\",\"labels\":{"
                    "\"prismlb.io/ok\":\"\"},\"annotations\":{\"prismlb.io/any\":\"a b c\"},"
                    "\"finalizers\":[\"prismlb.io/hold\",\"foregroundDeletion\"]},"
                    "\"addressType\":\"IPv4\",\"endpoints\":[]}",
                    &code));
    ck_assert_int_eq(code, 201);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(fake_api(&fk, 0, bad[i].method, bad[i].path, bad[i].ctype, bad[i].body, 1,
                                  NULL, 5000, &r),
                         0);
        o = res_json(&r);
        ck_assert_msg(r.status == bad[i].want, "%s %s: HTTP %ld, want %ld: %s", bad[i].method,
                      bad[i].path, r.status, bad[i].want, r.body);
        ck_assert_msg(!strcmp(str(o, "kind"), "Status") && !strcmp(str(o, "status"), "Failure") &&
                          json_integer_value(json_object_get(o, "code")) == r.status,
                      "%s %s: not a Status: %s", bad[i].method, bad[i].path, r.body);
        json_decref(o);
        http_res_free(&r);
    }
    /* Deeply nested JSON. */
    for (i = 0; i < 2000; i++)
        deep[i] = '[';
    deep[i] = '\0';
    ck_assert_int_eq(fake_api(&fk, 0, "POST", SVCS, JSON, deep, 1, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 400);
    http_res_free(&r);
    /* Still serving, and base is unchanged. */
    o = req("GET", SVCS "/base", NULL, NULL, &code);
    ck_assert_int_eq(code, 200);
    ck_assert_int_eq(
        json_integer_value(json_object_get(
            json_array_get(json_object_get(json_object_get(o, "spec"), "ports"), 0), "port")),
        80);
    json_decref(o);
}
END_TEST

/* Start another fake (tracked by PID) with argv, wait for its state file. */
static void
spawn_extra(struct tu_proc *p, char **argv, const char *state)
{
    char line[64];
    ck_assert_int_eq(tu_spawn(p, argv, NULL, NULL), 0);
    ck_assert_msg(tu_wait_line(state, "ready", line, sizeof(line), 10000) == 0, "no ready");
}

static void
server_url(const char *state, char *url, size_t len)
{
    char buf[100];
    ck_assert_int_eq(tu_wait_line(state, "server 0 ", buf, sizeof(buf), 1000), 0);
    snprintf(url, len, "%s", buf);
}

START_TEST(tls_material_from_flags_and_plain_http)
{
    struct tu_proc p;
    char exe[4200], cert[4300], key[4300], ca[4300], state[4300], url[128], u[512];
    char *argv[16];
    struct http_res r;
    struct fake other;

    snprintf(exe, sizeof(exe), "%s", tu_build_path("tests/fakes/kube/prismlb-fake-kube"));
    snprintf(cert, sizeof(cert), "%s/server.crt", fk.dir);
    snprintf(key, sizeof(key), "%s/server.key", fk.dir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", fk.dir);
    snprintf(state, sizeof(state), "%s/state-flags", fk.dir);
    argv[0] = exe;
    argv[1] = "--tls-cert";
    argv[2] = cert;
    argv[3] = "--tls-key";
    argv[4] = key;
    argv[5] = "--client-ca";
    argv[6] = ca;
    argv[7] = "--state-file";
    argv[8] = state;
    argv[9] = NULL;
    spawn_extra(&p, argv, state);
    server_url(state, url, sizeof(url));
    /* Reuse fk's client material against the second server. */
    other = fk;
    snprintf(other.server[0], sizeof(other.server[0]), "%s", url);
    ck_assert_int_eq(
        fake_api(&other, 0, "GET", "/api/v1/namespaces/default", NULL, NULL, 1, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);
    ck_assert_int_eq(tu_stop(&p, SIGTERM, 10000), 0);

    /* Plain HTTP with a token. */
    snprintf(state, sizeof(state), "%s/state-plain", fk.dir);
    argv[1] = "--token";
    argv[2] = "plain-token";
    argv[3] = "--state-file";
    argv[4] = state;
    argv[5] = NULL;
    spawn_extra(&p, argv, state);
    server_url(state, url, sizeof(url));
    ck_assert(!strncmp(url, "http://127.0.0.1:", 17));
    snprintf(other.server[0], sizeof(other.server[0]), "%s", url);
    snprintf(u, sizeof(u), "%s", url);
    ck_assert_int_eq(fake_api(&other, 0, "GET", SVCS, NULL, NULL, 0, "plain-token", 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&other, 0, "GET", SVCS, NULL, NULL, 0, NULL, 5000, &r), 0);
    ck_assert_int_eq(r.status, 401);
    http_res_free(&r);
    ck_assert_int_eq(tu_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

#ifndef FK_SANITIZED /* valgrind cannot run a sanitizer-built fake */
START_TEST(valgrind_clean_shutdown)
{
    static const char *const vg_args[] = {"valgrind",
                                          "--leak-check=full",
                                          "--errors-for-leak-kinds=definite,indirect",
                                          "--error-exitcode=9",
                                          NULL,
                                          NULL};
    static const char *const extra[] = {"--servers", "2", "--bookmark-interval-ms", "100", NULL};
    const char *wrapper[8];
    char logopt[4400], logpath[4300], *log;
    struct fake v;
    struct watch_stream w1, w2;
    struct http_res r;
    char *vdir;
    int st;

    vdir = fake_private_dir();
    ck_assert_ptr_nonnull(vdir);
    snprintf(logpath, sizeof(logpath), "%s/vg.log", vdir);
    snprintf(logopt, sizeof(logopt), "--log-file=%s", logpath);
    for (int i = 0; vg_args[i]; i++)
        wrapper[i] = vg_args[i];
    wrapper[4] = logopt;
    wrapper[5] = NULL;
    ck_assert_int_eq(fake_start_wrapped(&v, wrapper, extra), 0);
    ck_assert_int_eq(fake_api(&v, 0, "POST", SVCS, JSON,
                              "{\"metadata\":{\"name\":\"a\",\"finalizers\":[\"x/y\"]},"
                              "\"spec\":{\"type\":\"LoadBalancer\",\"ports\":[{\"port\":1}]}}",
                              1, NULL, 20000, &r),
                     0);
    ck_assert_int_eq(r.status, 201);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&v, 0, "DELETE", SVCS "/a", NULL, NULL, 1, NULL, 20000, &r), 0);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&v, 0, "PATCH", SVCS "/a", SMP,
                              "{\"spec\":{\"ports\":[{\"port\":1,"
                              "\"targetPort\":2}]}}",
                              1, NULL, 20000, &r),
                     0);
    http_res_free(&r);
    ck_assert_int_eq(fake_api(&v, 0, "GET", SVCS "?limit=1&labelSelector=a%20notin%20(b)", NULL,
                              NULL, 1, NULL, 20000, &r),
                     0);
    http_res_free(&r);
    /* Open watches on both servers, a held (delayed) request, then stop. */
    ck_assert_int_eq(ws_open(&v, 0, SVCS "?watch=1&allowWatchBookmarks=1", &w1), 0);
    ck_assert_int_eq(ws_open(&v, 1,
                             SVCS "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                                  "&resourceVersionMatch=NotOlderThan",
                             &w2),
                     0);
    ws_wait_lines(&w1, 2, 20000);
    ws_wait_lines(&w2, 2, 20000);
    ck_assert_int_eq(fake_admin(&v, "POST", "/faults", "{\"latency_ms\":60000}", &r), 0);
    http_res_free(&r);
    fake_api(&v, 0, "GET", SVCS, NULL, NULL, 1, NULL, 1500, &r); /* times out, held */
    http_res_free(&r);
    ck_assert_int_eq(fake_admin(&v, "POST", "/servers/1/stop", NULL, &r), 0);
    http_res_free(&r);
    st = tu_stop(&v.proc, SIGTERM, 60000);
    v.proc.pid = 0;
    ws_close(&w1);
    ws_close(&w2);
    log = tu_read_file(logpath, NULL);
    ck_assert_msg(st == 0, "fake under valgrind exited with status %d:\n%s", st, log ? log : "");
    ck_assert_msg(log && strstr(log, "ERROR SUMMARY: 0 errors"), "%s", log ? log : "no log");
    ck_assert_msg(strstr(log, "All heap blocks were freed") || !strstr(log, "definitely lost"),
                  "%s", log);
    free(log);
    fake_stop(&v);
    tu_rmrf(vdir);
    free(vdir);
}
END_TEST
#endif

int
main(void)
{
    static const char *const none[] = {NULL};
    static const char *const three[] = {"--servers", "3", NULL};
    static const char *const tokens[] = {"--token", "s3cret=alice", "--readonly-token", "look=bob",
                                         NULL};
    const struct api_case cases[] = {
        {"servers", three, several_servers_and_lost_quorum},
        {"faults", none, injected_faults},
        {"auth", tokens, authentication_and_request_log},
        {"bulk", none, bulk_large_list_and_watch},
        {"malformed", none, malformed_requests_get_status_errors},
        {"material", none, tls_material_from_flags_and_plain_http},
#ifndef FK_SANITIZED
        {"valgrind", none, valgrind_clean_shutdown},
#endif
    };
    return run_cases(cases, sizeof(cases) / sizeof(cases[0])) ? 1 : 0;
}
