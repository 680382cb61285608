/*
 * hccm's http services and HTTP health checks
 * (modules/mod_hetzner_lb/hz_http.c): the annotations read with hccm's
 * syntax and Hetzner's defaults, each bad value named, the service body
 * Hetzner is sent, and the plan's comparison with the service Hetzner has
 * (a match costs nothing, a change is one update_service).
 */
#include <errno.h>
#include <stdio.h>

#include "common.h"
#include "testutil.h"

#define P "load-balancer.hetzner.cloud/"

/* What Service shop/web asks for under the annotations kv (which must be
 * good): port 80 -> nodePort 30080, target 10.0.1.10, network k8s. */
static void
desired_with(struct hz_desired *d, const char *const *kv)
{
    static const struct hz_port p[] = {{"TCP", 80, 30080}};
    static const char *const ips[] = {"10.0.1.10"};
    struct hz_svc s = {.uid = "uid-1", .name = "web", .ns = "shop", .ports = p, .nports = 1};
    struct hz_config c = default_config();
    struct hz_annot a;
    char err[512];
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, ips, 1, d, err, sizeof(err)), 0);
    hz_annot_clear(&a);
}

/* The labelled balancer of Service uid-1 with the one service svc (JSON
 * text), on network 7, targeting 10.0.1.10. */
static void
balancer_with(struct hz_actual *a, const char *svc)
{
    char buf[4096];
    snprintf(buf, sizeof(buf),
             "{\"id\":5,\"name\":\"web.shop\",\"labels\":{\"robotlb/service-uid\":\"uid-1\"},"
             "\"load_balancer_type\":{\"name\":\"lb11\"},\"location\":{\"name\":\"hel1\"},"
             "\"algorithm\":{\"type\":\"least_connections\"},"
             "\"private_net\":[{\"network\":7,\"ip\":\"10.0.0.5\"}],"
             "\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.10\"}}],\"services\":[%s]}",
             svc);
    json_t *j = parse_json(buf);
    ck_assert_int_eq(hz_actual_parse(j, a), 0);
    json_decref(j);
}

/* The service of port 80 as Hetzner shows it, with protocol proto, http
 * object http and health check hc (JSON texts). */
static const char *
service(const char *proto, const char *http, const char *hc)
{
    static char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"protocol\":\"%s\",\"listen_port\":80,\"destination_port\":30080,"
             "\"proxyprotocol\":false,\"http\":%s,\"health_check\":%s}",
             proto, http, hc);
    return buf;
}

/* The plan turning the balancer with the one service svc (JSON text) into
 * d: how many writes, and the first one's kind in *first (0: none). */
static size_t
plan_for(const struct hz_desired *d, const char *svc, enum hz_op_kind *first)
{
    struct hz_actual a;
    struct hz_plan p;
    balancer_with(&a, svc);
    ck_assert_int_eq(hz_plan_build(d, &a, 7, &p), 0);
    size_t n = p.n;
    *first = n ? p.ops[0].kind : 0;
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    return n;
}

static const char *const http_check[] = {
    P "health-check-protocol",
    "HTTP",
    P "health-check-http-domain",
    "shop.example.net",
    P "health-check-http-path",
    "/healthz",
    P "http-status-codes",
    "200,3??",
    NULL,
};

/* "health-check-protocol (tcp, http), -http-domain, -http-path,
 * http-status-codes": read as hccm reads them (the protocol in any case),
 * the rest left at Hetzner's defaults. */
START_TEST(an_http_health_check_is_read_with_its_domain_path_and_status_codes)
{
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)http_check, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.http.protocol, HZ_PROTO_TCP);
    ck_assert_int_eq(a.http.hc_http, 1);
    ck_assert_int_eq(a.http.hc_tls, 0);
    ck_assert_int_eq(a.http.hc_port, 0);
    ck_assert_str_eq(a.http.hc_domain, "shop.example.net");
    ck_assert_str_eq(a.http.hc_path, "/healthz");
    ck_assert_str_eq(a.http.hc_codes, "200,3??");
    hz_annot_clear(&a);
}
END_TEST

/* Hetzner has no https health check protocol: an https one, or hccm's
 * validate-certificate, is an HTTP check over TLS; the port is the
 * annotation's, not the nodePort. */
START_TEST(an_https_health_check_is_http_over_tls_on_the_annotated_port)
{
    static const char *const kv[] = {
        P "health-check-protocol", "https", P "health-check-port", "10256", NULL,
    };
    static const char *const kv2[] = {
        P "health-check-protocol", "http", P "health-check-http-validate-certificate", "1", NULL,
    };
    struct hz_desired d;
    desired_with(&d, kv);
    json_t *body = hz_service_json(&d, &d.services[0]);
    ck_assert_ptr_nonnull(body);
    json_t *hc = json_object_get(body, "health_check");
    ck_assert_str_eq(json_string_value(json_object_get(hc, "protocol")), "http");
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "port")), 10256);
    ck_assert(json_is_true(json_object_get(json_object_get(hc, "http"), "tls")));
    json_decref(body);
    hz_desired_clear(&d);
    desired_with(&d, kv2);
    ck_assert_int_eq(d.https[0].hc_tls, 1);
    hz_desired_clear(&d);
}
END_TEST

/* Each bad value is named in the one message, with its value; nothing of
 * the set is kept. */
START_TEST(each_bad_http_or_health_check_value_is_named)
{
    static const char *const kv[] = {
        P "protocol",
        "udp",
        P "health-check-protocol",
        "https",
        P "health-check-http-validate-certificate",
        "false",
        P "health-check-port",
        "70000",
        P "health-check-http-path",
        "healthz",
        P "http-status-codes",
        "2xx",
        P "health-check-http-domain",
        "a b",
        NULL,
    };
    struct hz_annot a;
    char err[2048];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "protocol: \"udp\""));
    ck_assert_ptr_nonnull(strstr(err, P "health-check-http-validate-certificate: \"false\""));
    ck_assert_ptr_nonnull(strstr(err, P "health-check-port: \"70000\""));
    ck_assert_ptr_nonnull(strstr(err, P "health-check-http-path: \"healthz\""));
    ck_assert_ptr_nonnull(strstr(err, P "http-status-codes: \"2xx\""));
    ck_assert_ptr_nonnull(strstr(err, P "health-check-http-domain: \"a b\""));
    ck_assert_ptr_null(a.http.hc_path);
    ck_assert_ptr_null(a.http.hc_codes);
    hz_annot_clear(&a);
}
END_TEST

/* The status codes: 1 to 32 of them, each like 200 or 2??. */
START_TEST(status_codes_are_three_characters_each)
{
    static const char *const good[] = {"200", "2??,3??", "101,204,5?9", NULL};
    static const char *const badv[] = {"",     "20",       "2000",    "600", "2??,",
                                       ",200", "2?? ,3??", "200;201", NULL};
    const char *kv[] = {P "http-status-codes", NULL, NULL};
    struct hz_annot a;
    char err[512];
    for (size_t i = 0; good[i]; i++) {
        kv[1] = good[i];
        ck_assert_msg(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)) == 0, "%s: %s",
                      good[i], err);
        ck_assert_str_eq(a.http.hc_codes, good[i]);
        hz_annot_clear(&a);
    }
    for (size_t i = 0; badv[i]; i++) {
        kv[1] = badv[i];
        ck_assert_msg(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)) == -EINVAL, "%s",
                      badv[i]);
    }
}
END_TEST

/* The service body: an HTTP health check carries its request (Hetzner's
 * defaults where nothing is annotated); a TCP one has none, and a Service
 * without these annotations is sent as before (tcp, TCP check on the
 * nodePort, no http object). */
START_TEST(the_service_body_carries_the_http_health_check)
{
    static const char *const none[] = {NULL};
    static const char *const path_only[] = {P "health-check-protocol", "http", NULL};
    struct hz_desired d;
    desired_with(&d, http_check);
    json_t *body = hz_service_json(&d, &d.services[0]);
    json_t *hh = json_object_get(json_object_get(body, "health_check"), "http");
    ck_assert_str_eq(json_string_value(json_object_get(body, "protocol")), "tcp");
    ck_assert_ptr_null(json_object_get(body, "http"));
    ck_assert_str_eq(json_string_value(json_object_get(hh, "domain")), "shop.example.net");
    ck_assert_str_eq(json_string_value(json_object_get(hh, "path")), "/healthz");
    ck_assert_uint_eq(json_array_size(json_object_get(hh, "status_codes")), 2);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(hh, "status_codes"), 1)),
                     "3??");
    json_decref(body);
    hz_desired_clear(&d);

    desired_with(&d, path_only);
    body = hz_service_json(&d, &d.services[0]);
    hh = json_object_get(json_object_get(body, "health_check"), "http");
    ck_assert_str_eq(json_string_value(json_object_get(hh, "path")), "/");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(hh, "status_codes"), 0)),
                     "2??");
    json_decref(body);
    hz_desired_clear(&d);

    desired_with(&d, none);
    body = hz_service_json(&d, &d.services[0]);
    json_t *want = parse_json("{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080,"
                              "\"proxyprotocol\":false,\"health_check\":{\"protocol\":\"tcp\","
                              "\"port\":30080,\"interval\":15,\"timeout\":10,\"retries\":3}}");
    ck_assert(json_equal(body, want));
    json_decref(want);
    json_decref(body);
    hz_desired_clear(&d);
}
END_TEST

/* The steady state: a balancer whose service is what the annotations ask
 * (as Hetzner shows it, defaults filled in) needs no write; a changed
 * path is one update_service. */
START_TEST(a_matching_http_health_check_needs_no_write_and_a_change_one_update)
{
    static const char *const tcp_hc = "{\"protocol\":\"tcp\",\"port\":30080,\"interval\":15,"
                                      "\"timeout\":10,\"retries\":3,\"http\":null}";
    struct hz_desired d;
    enum hz_op_kind kind;
    desired_with(&d, http_check);
    ck_assert_uint_eq(
        plan_for(&d,
                 service("tcp", "null",
                         "{\"protocol\":\"http\",\"port\":30080,\"interval\":15,"
                         "\"timeout\":10,\"retries\":3,\"http\":{\"domain\":"
                         "\"shop.example.net\",\"path\":\"/healthz\",\"response\":\"\","
                         "\"status_codes\":[\"200\",\"3??\"],\"tls\":false}}"),
                 &kind),
        0);
    ck_assert_uint_eq(plan_for(&d,
                               service("tcp", "null",
                                       "{\"protocol\":\"http\",\"port\":30080,\"interval\":15,"
                                       "\"timeout\":10,\"retries\":3,\"http\":{\"domain\":"
                                       "\"shop.example.net\",\"path\":\"/\",\"response\":\"\","
                                       "\"status_codes\":[\"200\",\"3??\"],\"tls\":false}}"),
                               &kind),
                      1);
    ck_assert_int_eq(kind, HZ_OP_UPDATE_SERVICE);
    /* a TCP health check where an HTTP one is asked for */
    ck_assert_uint_eq(plan_for(&d, service("tcp", "null", tcp_hc), &kind), 1);
    ck_assert_int_eq(kind, HZ_OP_UPDATE_SERVICE);
    hz_desired_clear(&d);
}
END_TEST

/* "protocol: http with http-sticky-sessions, http-cookie-name,
 * http-cookie-lifetime": hccm's syntax (the protocol in any case, Go
 * booleans, Go durations in whole seconds). */
START_TEST(an_http_service_is_read_with_sticky_sessions_and_its_cookie)
{
    static const char *const kv[] = {
        P "protocol",
        "HTTP",
        P "http-sticky-sessions",
        "True",
        P "http-cookie-name",
        "SHOPID",
        P "http-cookie-lifetime",
        "1h30m",
        NULL,
    };
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.http.protocol, HZ_PROTO_HTTP);
    ck_assert_int_eq(a.http.sticky, 1);
    ck_assert_str_eq(a.http.cookie_name, "SHOPID");
    ck_assert_int_eq(a.http.cookie_lifetime, 5400);
    ck_assert_int_eq(a.http.hc_http, 0);
    hz_annot_clear(&a);
}
END_TEST

/* Hetzner refuses http settings on a tcp service, so they are named here
 * instead; a lifetime must be a Go duration of at least one second. */
START_TEST(http_settings_on_a_tcp_service_and_bad_cookie_values_are_named)
{
    static const char *const on_tcp[] = {P "http-cookie-name", "SHOPID", P "http-sticky-sessions",
                                         "false", NULL};
    static const char *const lifetimes[] = {"300", "0s", "1.5s", "soon", NULL};
    const char *kv[] = {P "protocol", "http", P "http-cookie-lifetime", NULL, NULL};
    struct hz_annot a;
    char err[1024];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)on_tcp, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "http-cookie-name: applies to http and https"));
    ck_assert_ptr_nonnull(strstr(err, P "http-sticky-sessions: applies to http and https"));
    for (size_t i = 0; lifetimes[i]; i++) {
        kv[3] = lifetimes[i];
        ck_assert_msg(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)) == -EINVAL, "%s",
                      lifetimes[i]);
        ck_assert_ptr_nonnull(strstr(err, P "http-cookie-lifetime"));
    }
}
END_TEST

/* The body of an http service: its protocol and http object, Hetzner's
 * defaults (HCLBSTICKY, 300 s, no stickiness) where nothing is given. */
START_TEST(the_service_body_of_an_http_service_carries_its_cookie)
{
    static const char *const plain[] = {P "protocol", "http", NULL};
    static const char *const sticky[] = {
        P "protocol", "http", P "http-sticky-sessions", "true", P "http-cookie-name",
        "SHOPID",     NULL};
    struct hz_desired d;
    desired_with(&d, plain);
    json_t *body = hz_service_json(&d, &d.services[0]);
    json_t *want =
        parse_json("{\"cookie_name\":\"HCLBSTICKY\",\"cookie_lifetime\":300,"
                   "\"sticky_sessions\":false,\"redirect_http\":false,\"certificates\":[]}");
    ck_assert_str_eq(json_string_value(json_object_get(body, "protocol")), "http");
    ck_assert(json_equal(json_object_get(body, "http"), want));
    json_decref(want);
    json_decref(body);
    hz_desired_clear(&d);
    desired_with(&d, sticky);
    body = hz_service_json(&d, &d.services[0]);
    want = parse_json("{\"cookie_name\":\"SHOPID\",\"cookie_lifetime\":300,"
                      "\"sticky_sessions\":true,\"redirect_http\":false,\"certificates\":[]}");
    ck_assert(json_equal(json_object_get(body, "http"), want));
    json_decref(want);
    json_decref(body);
    hz_desired_clear(&d);
}
END_TEST

/* The same listen port in another protocol, or another cookie, is one
 * update_service, never a delete and an add; an http service as Hetzner
 * shows it with the cookie asked for needs nothing. */
START_TEST(a_changed_protocol_or_cookie_is_one_update_service)
{
    static const char *const sticky[] = {P "protocol", "http", P "http-sticky-sessions", "true",
                                         NULL};
    static const char *const tcp_hc = "{\"protocol\":\"tcp\",\"port\":30080,\"interval\":15,"
                                      "\"timeout\":10,\"retries\":3,\"http\":null}";
    struct hz_desired d;
    enum hz_op_kind kind;
    desired_with(&d, sticky);
    ck_assert_uint_eq(plan_for(&d, service("tcp", "null", tcp_hc), &kind), 1);
    ck_assert_int_eq(kind, HZ_OP_UPDATE_SERVICE);
    ck_assert_uint_eq(plan_for(&d,
                               service("http",
                                       "{\"cookie_name\":\"HCLBSTICKY\",\"cookie_lifetime\":300,"
                                       "\"certificates\":[],\"redirect_http\":false,"
                                       "\"sticky_sessions\":true}",
                                       tcp_hc),
                               &kind),
                      0);
    ck_assert_uint_eq(plan_for(&d,
                               service("http",
                                       "{\"cookie_name\":\"HCLBSTICKY\",\"cookie_lifetime\":60,"
                                       "\"certificates\":[],\"redirect_http\":false,"
                                       "\"sticky_sessions\":true}",
                                       tcp_hc),
                               &kind),
                      1);
    ck_assert_int_eq(kind, HZ_OP_UPDATE_SERVICE);
    hz_desired_clear(&d);
}
END_TEST

/* "http-timeout-idle": a Go duration of whole seconds in the range Hetzner
 * takes (30s to 300s), sent as http.timeout_idle and compared; absent, it
 * is not sent and whatever Hetzner has stays (no write); a bad value, one
 * out of range or one on a tcp service is named. */
START_TEST(the_idle_timeout_is_sent_and_compared_only_when_given)
{
    static const char *const idle[] = {P "protocol", "http", P "http-timeout-idle", "2m", NULL};
    static const char *const plain[] = {P "protocol", "http", NULL};
    static const char *const on_tcp[] = {P "http-timeout-idle", "60s", NULL};
    static const char *const bad[] = {"29s", "301s", "1h", "60", "1.5s", "-30s", "soon", NULL};
    static const char *const hc = "{\"protocol\":\"tcp\",\"port\":30080,\"interval\":15,"
                                  "\"timeout\":10,\"retries\":3,\"http\":null}";
    const char *kv[] = {P "protocol", "http", P "http-timeout-idle", NULL, NULL};
    char have[256], err[1024];
    struct hz_desired d;
    struct hz_annot a;
    enum hz_op_kind kind;

    desired_with(&d, idle);
    json_t *body = hz_service_json(&d, &d.services[0]);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(body, "http"), "timeout_idle")), 120);
    json_decref(body);
    for (int secs = 60; secs <= 120; secs += 60) {
        snprintf(have, sizeof(have),
                 "{\"cookie_name\":\"HCLBSTICKY\",\"cookie_lifetime\":300,\"certificates\":[],"
                 "\"redirect_http\":false,\"sticky_sessions\":false,\"timeout_idle\":%d}",
                 secs);
        ck_assert_uint_eq(plan_for(&d, service("http", have, hc), &kind), secs == 60 ? 1 : 0);
        if (secs == 60)
            ck_assert_int_eq(kind, HZ_OP_UPDATE_SERVICE);
    }
    hz_desired_clear(&d);

    /* not given: not sent, and Hetzner's 60 (or any) needs no write */
    desired_with(&d, plain);
    body = hz_service_json(&d, &d.services[0]);
    ck_assert_ptr_null(json_object_get(json_object_get(body, "http"), "timeout_idle"));
    json_decref(body);
    ck_assert_uint_eq(plan_for(&d, service("http", have, hc), &kind), 0);
    hz_desired_clear(&d);

    /* the ends of the range */
    kv[3] = "30s";
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.http.timeout_idle, 30);
    hz_annot_clear(&a);
    kv[3] = "5m";
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.http.timeout_idle, 300);
    hz_annot_clear(&a);
    for (size_t i = 0; bad[i]; i++) {
        kv[3] = bad[i];
        ck_assert_msg(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)) == -EINVAL, "%s",
                      bad[i]);
        ck_assert_msg(strstr(err, P "http-timeout-idle: \"") != NULL, "%s: %s", bad[i], err);
    }
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)on_tcp, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "http-timeout-idle: applies to http and https"));
}
END_TEST

/* "protocol: https with certificate-type: uploaded and http-certificates
 * by ID or name, http-redirect-http": a number is an ID, anything else a
 * name (hccm's rule); https needs one; certificates and the redirect on
 * another protocol, and managed certificates, are named. */
START_TEST(https_certificates_are_ids_or_names_and_https_needs_one)
{
    static const char *const kv[] = {
        P "protocol",
        "https",
        P "certificate-type",
        "Uploaded",
        P "http-certificates",
        "17,shop tls,17",
        P "http-redirect-http",
        "true",
        NULL,
    };
    static const char *const bad_set[] = {
        P "protocol", "https", P "certificate-type", "managed", P "http-certificates", "a,,b", NULL,
    };
    static const char *const on_http[] = {
        P "protocol", "http", P "http-certificates", "17", P "http-redirect-http", "1", NULL,
    };
    static const char *const none[] = {P "protocol", "https", NULL};
    struct hz_annot a;
    char err[1024];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.http.protocol, HZ_PROTO_HTTPS);
    ck_assert_int_eq(a.http.redirect, 1);
    ck_assert_uint_eq(a.http.ncerts, 3);
    ck_assert_int_eq(a.http.cert_ids[0], 17);
    ck_assert_str_eq(a.http.certs[1], "shop tls");
    ck_assert_int_eq(a.http.cert_ids[1], 0);
    hz_annot_clear(&a);
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)bad_set, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "http-certificates: " P "certificate-type \"managed\""));
    ck_assert_ptr_nonnull(strstr(err, P "http-managed-certificate-domains: is needed"));
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)on_http, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "http-certificates: applies to https services only"));
    ck_assert_ptr_nonnull(strstr(err, P "http-redirect-http: applies to https services only"));
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)none, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "protocol: \"https\" needs a certificate"));
}
END_TEST

/* A name is looked up once (each name once, however often it is given),
 * its ID kept in the cache; with the cache, the sync knows it and sends
 * nothing; an answer without a certificate is 0 (not found). */
START_TEST(a_certificate_name_is_looked_up_once_and_kept)
{
    static const char *const kv[] = {
        P "protocol", "https", P "http-certificates", "shop,5,shop,other", NULL,
    };
    struct hz_annot a;
    struct hz_http h;
    json_t *cache = NULL;
    char err[512];
    size_t pos = 0;
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_http_copy(&a.http, &h), 0);
    ck_assert_uint_eq(hz_cert_resolve(cache, &h, 1), 3);
    ck_assert_str_eq(hz_cert_next_unknown(&h, 1, &pos, NULL), "shop");
    ck_assert_str_eq(hz_cert_next_unknown(&h, 1, &pos, NULL), "other");
    ck_assert_ptr_null(hz_cert_next_unknown(&h, 1, &pos, NULL));
    json_t *found = parse_json("{\"certificates\":[{\"id\":41,\"name\":\"shop\"}]}");
    json_t *empty = parse_json("{\"certificates\":[]}");
    ck_assert_int_eq(hz_cert_learn(&cache, &h, 1, "shop", found), 41);
    ck_assert_int_eq(hz_cert_learn(&cache, &h, 1, "other", empty), 0);
    ck_assert_int_eq(h.cert_ids[0], 41);
    ck_assert_int_eq(h.cert_ids[2], 41);
    ck_assert_int_eq(h.cert_ids[3], 0);
    hz_http_clear(&h);
    /* the next sync of the Service finds "shop" in the cache */
    ck_assert_int_eq(hz_http_copy(&a.http, &h), 0);
    ck_assert_uint_eq(hz_cert_resolve(cache, &h, 1), 1);
    ck_assert_int_eq(h.cert_ids[0], 41);
    hz_http_clear(&h);
    json_decref(found);
    json_decref(empty);
    json_decref(cache);
    hz_annot_clear(&a);
}
END_TEST

/* Over the http settings of several sources (a balancer shared by
 * Services), a name is looked up once, from the entry of its first
 * reference, and its ID set wherever it is referenced. */
START_TEST(certificates_over_several_entries_are_looked_up_once_each)
{
    static const char *const one[] = {P "protocol", "https", P "http-certificates", "shop,5", NULL};
    static const char *const two[] = {
        P "protocol", "https", P "http-certificates", "other,shop", NULL,
    };
    struct hz_annot a;
    struct hz_http hs[2];
    json_t *cache = NULL;
    char err[512];
    size_t pos = 0, at = 9;
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)one, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_http_copy(&a.http, &hs[0]), 0);
    hz_annot_clear(&a);
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)two, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_http_copy(&a.http, &hs[1]), 0);
    hz_annot_clear(&a);
    ck_assert_uint_eq(hz_cert_resolve(cache, hs, 2), 3);
    ck_assert_str_eq(hz_cert_next_unknown(hs, 2, &pos, &at), "shop");
    ck_assert_uint_eq(at, 0);
    ck_assert_str_eq(hz_cert_next_unknown(hs, 2, &pos, &at), "other");
    ck_assert_uint_eq(at, 1);
    ck_assert_ptr_null(hz_cert_next_unknown(hs, 2, &pos, &at));
    ck_assert_int_eq(hz_cert_keep(&cache, hs, 2, "shop", 41), 41);
    ck_assert_int_eq(hs[0].cert_ids[0], 41);
    ck_assert_int_eq(hs[0].cert_ids[1], 5);
    ck_assert_int_eq(hs[1].cert_ids[1], 41);
    ck_assert_int_eq(hs[1].cert_ids[0], 0);
    pos = 0;
    ck_assert_str_eq(hz_cert_next_unknown(hs, 2, &pos, &at), "other");
    ck_assert_uint_eq(at, 1);
    hz_http_clear(&hs[1]);
    /* a second Service naming "shop" finds it in the cache */
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)two, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_http_copy(&a.http, &hs[1]), 0);
    ck_assert_uint_eq(hz_cert_resolve(cache, hs, 2), 1);
    ck_assert_int_eq(hs[1].cert_ids[1], 41);
    hz_http_clear(&hs[0]);
    hz_http_clear(&hs[1]);
    hz_annot_clear(&a);
    json_decref(cache);
}
END_TEST

/* The https body names each certificate once, with the redirect; a
 * balancer with the same certificates in another order needs nothing,
 * with another one an update_service; a name without its ID is never
 * taken as matching. */
START_TEST(the_https_service_is_compared_by_its_certificates)
{
    static const char *const kv[] = {
        P "protocol", "https", P "http-certificates", "7,9,7", P "http-redirect-http", "true", NULL,
    };
    static const char *const named[] = {
        P "protocol", "https", P "http-certificates", "7,shop", P "http-redirect-http",
        "true",       NULL,
    };
    static const char *const hc = "{\"protocol\":\"tcp\",\"port\":30080,\"interval\":15,"
                                  "\"timeout\":10,\"retries\":3,\"http\":null}";
    struct hz_desired d;
    enum hz_op_kind kind;
    desired_with(&d, kv);
    json_t *body = hz_service_json(&d, &d.services[0]);
    json_t *want = parse_json("[7,9]");
    json_t *http = json_object_get(body, "http");
    ck_assert(json_equal(json_object_get(http, "certificates"), want));
    ck_assert(json_is_true(json_object_get(http, "redirect_http")));
    json_decref(want);
    json_decref(body);
    ck_assert_uint_eq(plan_for(&d,
                               service("https",
                                       "{\"cookie_name\":\"HCLBSTICKY\",\"cookie_lifetime\":300,"
                                       "\"certificates\":[9,7],\"redirect_http\":true,"
                                       "\"sticky_sessions\":false}",
                                       hc),
                               &kind),
                      0);
    ck_assert_uint_eq(plan_for(&d,
                               service("https",
                                       "{\"cookie_name\":\"HCLBSTICKY\",\"cookie_lifetime\":300,"
                                       "\"certificates\":[7],\"redirect_http\":true,"
                                       "\"sticky_sessions\":false}",
                                       hc),
                               &kind),
                      1);
    ck_assert_int_eq(kind, HZ_OP_UPDATE_SERVICE);
    hz_desired_clear(&d);
    desired_with(&d, named);
    ck_assert_uint_eq(plan_for(&d,
                               service("https",
                                       "{\"cookie_name\":\"HCLBSTICKY\",\"cookie_lifetime\":300,"
                                       "\"certificates\":[9,7],\"redirect_http\":true,"
                                       "\"sticky_sessions\":false}",
                                       hc),
                               &kind),
                      1);
    hz_desired_clear(&d);
}
END_TEST

/* "certificate-type: managed, http-managed-certificate-name,
 * http-managed-certificate-domains": the certificate is named as
 * annotated, else as hccm names it (ccm-managed-certificate-<UID>), made
 * with its domains and prismlb's label; bad domains are named. */
START_TEST(a_managed_certificate_is_named_and_made_with_its_domains)
{
    static const char *const kv[] = {
        P "protocol",
        "https",
        P "certificate-type",
        "managed",
        P "http-managed-certificate-domains",
        "shop.example.net,*.shop.example.net",
        NULL,
    };
    static const char *const named[] = {
        P "protocol",
        "https",
        P "certificate-type",
        "Managed",
        P "http-managed-certificate-name",
        "shop cert",
        P "http-managed-certificate-domains",
        "shop.example.net",
        NULL,
    };
    static const char *const bad_domains[] = {
        P "protocol",
        "https",
        P "certificate-type",
        "managed",
        P "http-managed-certificate-domains",
        "a.example.net,,b.example.net",
        NULL,
    };
    struct hz_desired d;
    struct hz_annot a;
    char err[512];
    desired_with(&d, kv);
    ck_assert_uint_eq(d.nhttps, 1);
    ck_assert_int_eq(d.https[0].managed, 1);
    ck_assert_uint_eq(d.https[0].ncerts, 1);
    ck_assert_str_eq(d.https[0].certs[0], "ccm-managed-certificate-uid-1");
    ck_assert_int_eq(d.https[0].cert_ids[0], 0);
    ck_assert_str_eq(d.https[0].uid, "uid-1");
    json_t *body = hz_cert_managed_body(&d.https[0]);
    json_t *want = parse_json("{\"name\":\"ccm-managed-certificate-uid-1\",\"type\":\"managed\","
                              "\"domain_names\":[\"shop.example.net\",\"*.shop.example.net\"],"
                              "\"labels\":{\"robotlb/service-uid\":\"uid-1\"}}");
    ck_assert(json_equal(body, want));
    json_decref(want);
    json_decref(body);
    hz_desired_clear(&d);
    desired_with(&d, named);
    ck_assert_str_eq(d.https[0].certs[0], "shop cert");
    hz_desired_clear(&d);
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)bad_domains, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "http-managed-certificate-domains: \"a.example.net,,"));
}
END_TEST

/* A certificate's state as Hetzner shows it: uploaded (no status) and an
 * issued managed one are ready, a pending one waits, a failed one carries
 * Hetzner's error; none is none. */
START_TEST(a_certificates_state_is_read_from_its_status)
{
    static const struct {
        const char *json;
        enum hz_cert_state want;
    } cases[] = {
        {"{\"id\":3,\"type\":\"uploaded\",\"status\":null}", HZ_CERT_READY},
        {"{\"id\":3,\"status\":{\"issuance\":\"completed\",\"error\":null}}", HZ_CERT_READY},
        {"{\"id\":3,\"status\":{\"issuance\":\"pending\",\"error\":null}}", HZ_CERT_PENDING},
        {"{\"id\":3,\"status\":{\"issuance\":\"failed\",\"error\":{\"code\":"
         "\"ca_dns_validation_failed\",\"message\":\"DNS\"}}}",
         HZ_CERT_FAILED},
        {"{\"name\":\"no id\"}", HZ_CERT_NONE},
    };
    const char *code, *message;
    int64_t id;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *c = parse_json(cases[i].json);
        ck_assert_int_eq(hz_cert_state_of(c, &id, &code, &message), cases[i].want);
        if (cases[i].want == HZ_CERT_FAILED) {
            ck_assert_str_eq(code, "ca_dns_validation_failed");
            ck_assert_str_eq(message, "DNS");
        }
        json_decref(c);
    }
    ck_assert_int_eq(hz_cert_state_of(NULL, &id, &code, &message), HZ_CERT_NONE);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb http");
    TCase *tc = tcase_create("http");
    tcase_add_test(tc, an_http_health_check_is_read_with_its_domain_path_and_status_codes);
    tcase_add_test(tc, an_https_health_check_is_http_over_tls_on_the_annotated_port);
    tcase_add_test(tc, each_bad_http_or_health_check_value_is_named);
    tcase_add_test(tc, status_codes_are_three_characters_each);
    tcase_add_test(tc, the_service_body_carries_the_http_health_check);
    tcase_add_test(tc, a_matching_http_health_check_needs_no_write_and_a_change_one_update);
    tcase_add_test(tc, an_http_service_is_read_with_sticky_sessions_and_its_cookie);
    tcase_add_test(tc, http_settings_on_a_tcp_service_and_bad_cookie_values_are_named);
    tcase_add_test(tc, the_service_body_of_an_http_service_carries_its_cookie);
    tcase_add_test(tc, a_changed_protocol_or_cookie_is_one_update_service);
    tcase_add_test(tc, the_idle_timeout_is_sent_and_compared_only_when_given);
    tcase_add_test(tc, https_certificates_are_ids_or_names_and_https_needs_one);
    tcase_add_test(tc, a_certificate_name_is_looked_up_once_and_kept);
    tcase_add_test(tc, certificates_over_several_entries_are_looked_up_once_each);
    tcase_add_test(tc, the_https_service_is_compared_by_its_certificates);
    tcase_add_test(tc, a_managed_certificate_is_named_and_made_with_its_domains);
    tcase_add_test(tc, a_certificates_state_is_read_from_its_status);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
