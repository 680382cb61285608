/* Certificates (uploaded and managed, issuance gated by the admin faults)
 * and http/https services with their refusals, over HTTP with libcurl.
 * The certificates are made at test time by gen_certs.sh. */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"

/* Make the test certificates in F.dir; path of one of them into buf. */
static const char *
cert_path(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", F.dir, name);
    return buf;
}

static char *
read_cert_file(const char *name)
{
    char path[600];
    char *text = tu_read_file(cert_path(name, path, sizeof(path)), NULL);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    return text;
}

/* Body of an uploaded certificate create (new). */
static char *
upload_body(const char *name, const char *crt, const char *key)
{
    char *c = read_cert_file(crt), *k = read_cert_file(key);
    json_t *b = json_pack("{s:s, s:s, s:s, s:s}", "name", name, "type", "uploaded", "certificate",
                          c, "private_key", k);
    char *text = json_dumps(b, JSON_COMPACT);
    ck_assert_ptr_nonnull(text);
    json_decref(b);
    free(c);
    free(k);
    return text;
}

/* POST an uploaded certificate that must be accepted; returns its id. */
static long
upload_ok(const char *name)
{
    struct hzt_resp r;
    char *body = upload_body(name, "good.crt", "good.key");
    req("POST", "/certificates", body, &r);
    free(body);
    ck_assert_msg(r.status == 201, "upload %s: %ld %s", name, r.status, r.raw);
    long id =
        (long)json_integer_value(json_object_get(json_object_get(r.body, "certificate"), "id"));
    hzt_resp_free(&r);
    return id;
}

/* Expect a 400 invalid_input naming field in details.fields. */
static void
expect_invalid_field(const char *method, const char *path, const char *body, const char *field)
{
    struct hzt_resp r;
    req(method, path, body, &r);
    json_t *f0 = json_array_get(
        json_object_get(json_object_get(json_object_get(r.body, "error"), "details"), "fields"), 0);
    ck_assert_msg(r.status == 400 && !strcmp(hzt_err(&r), "invalid_input") &&
                      !strcmp(json_string_value(json_object_get(f0, "name")), field),
                  "%s %s: want invalid_input on %s, got %ld %s", method, path, field, r.status,
                  r.raw);
    hzt_resp_free(&r);
}

/* Number of certificates the API lists. */
static long
cert_total(void)
{
    struct hzt_resp r;
    req("GET", "/certificates", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    long n = (long)json_integer_value(json_object_get(
        json_object_get(json_object_get(r.body, "meta"), "pagination"), "total_entries"));
    hzt_resp_free(&r);
    return n;
}

/* GET kind/{id}, which must answer 200: its member key, or key's member
 * sub when sub is not NULL (new). */
static json_t *
get_member(const char *kind, long id, const char *key, const char *sub)
{
    char path[64];
    struct hzt_resp r;
    snprintf(path, sizeof(path), "/%s/%ld", kind, id);
    req("GET", path, NULL, &r);
    ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.raw);
    json_t *v = json_object_get(r.body, key);
    json_incref(v = sub ? json_object_get(v, sub) : v);
    hzt_resp_free(&r);
    return v;
}

/* GET /certificates/{id} (new JSON of the certificate). */
static json_t *
get_cert(long id)
{
    return get_member("certificates", id, "certificate", NULL);
}

static void
admin_faults(const char *body)
{
    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&F, "POST", "/_admin/faults", NULL, NULL, body, &r), 0);
    ck_assert_msg(r.status == 200, "faults %s: %ld %s", body, r.status, r.raw);
    hzt_resp_free(&r);
}

/* openssl's SHA-256 fingerprint of good.crt, lower case ("aa:bb:..."). */
static void
openssl_fingerprint(char *buf, size_t len)
{
    char path[600], *out = NULL;
    char *argv[] = {"openssl",
                    "x509",
                    "-noout",
                    "-fingerprint",
                    "-sha256",
                    "-in",
                    (char *)cert_path("good.crt", path, sizeof(path)),
                    NULL};
    ck_assert_int_eq(tu_run(argv, NULL, &out, 30000), 0);
    const char *eq = strchr(out, '=');
    ck_assert_ptr_nonnull(eq);
    snprintf(buf, len, "%s", eq + 1);
    for (char *p = buf; *p; p++) {
        *p = (char)tolower((unsigned char)*p);
        if (*p == '\n')
            *p = '\0';
    }
    free(out);
}

START_TEST(test_uploaded_certificates)
{
    struct hzt_resp r;
    char fp[128];
    ck_assert_int_eq(hzt_gen_certs(F.dir), 0);
    char *body = upload_body("web", "good.crt", "good.key");
    req("POST", "/certificates", body, &r);
    free(body);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.raw);
    ck_assert(json_is_null(json_object_get(r.body, "action")));
    json_t *c = json_object_get(r.body, "certificate");
    ck_assert_int_eq(json_integer_value(json_object_get(c, "id")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(c, "type")), "uploaded");
    ck_assert(json_is_null(json_object_get(c, "status")));
    ck_assert_uint_eq(json_array_size(json_object_get(c, "used_by")), 0);
    json_t *dn = json_object_get(c, "domain_names");
    ck_assert_uint_eq(json_array_size(dn), 2);
    ck_assert_str_eq(json_string_value(json_array_get(dn, 0)), "example.com");
    ck_assert_str_eq(json_string_value(json_array_get(dn, 1)), "www.example.com");
    openssl_fingerprint(fp, sizeof(fp));
    ck_assert_str_eq(json_string_value(json_object_get(c, "fingerprint")), fp);
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(c, "certificate")), "BEGIN CERTIFICATE"));
    ck_assert(json_is_string(json_object_get(c, "not_valid_before")));
    ck_assert(json_is_string(json_object_get(c, "not_valid_after")));
    hzt_resp_free(&r);

    /* Refused, each with nothing stored. */
    body = upload_body("mismatch", "good.crt", "other.key");
    expect_invalid_field("POST", "/certificates", body, "private_key");
    free(body);
    body = upload_body("old", "expired.crt", "expired.key");
    expect_invalid_field("POST", "/certificates", body, "certificate");
    free(body);
    body = upload_body("swapped", "good.key", "good.crt");
    expect_invalid_field("POST", "/certificates", body, "certificate");
    free(body);
    expect_invalid_field("POST", "/certificates",
                         "{\"name\":\"junk\",\"certificate\":\"-----BEGIN CERTIFICATE-----\\nnope"
                         "\\n-----END CERTIFICATE-----\\n\",\"private_key\":\"x\"}",
                         "certificate");
    expect_invalid_field("POST", "/certificates", "{\"name\":\"nokey\",\"certificate\":\"x\"}",
                         "private_key");
    expect_invalid_field("POST", "/certificates",
                         "{\"name\":\"d\",\"certificate\":\"x\",\"private_key\":\"y\","
                         "\"domain_names\":[\"a.example.com\"]}",
                         "domain_names");
    expect_invalid_field("POST", "/certificates", "{\"name\":\"t\",\"type\":\"selfsigned\"}",
                         "type");
    expect_invalid_field("POST", "/certificates", "{\"name\":\"\",\"type\":\"managed\"}", "name");
    expect_invalid_field("POST", "/certificates", "{\"name\":\"x\",\"fingerprint\":\"aa\"}",
                         "fingerprint");
    body = upload_body("web", "good.crt", "good.key");
    expect_error("POST", "/certificates", body, 409, "uniqueness_error");
    free(body);
    ck_assert_int_eq(cert_total(), 1);

    /* Filters, rename, labels, delete. */
    ck_assert_int_eq(upload_ok("other"), 2);
    req("PUT", "/certificates/2", "{\"name\":\"api cert\",\"labels\":{\"env\":\"prod\"}}", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(r.body, "certificate"), "name")),
        "api cert");
    hzt_resp_free(&r);
    expect_error("PUT", "/certificates/2", "{\"name\":\"web\"}", 409, "uniqueness_error");
    expect_invalid_field("PUT", "/certificates/2", "{\"labels\":{\"bad key!\":\"v\"}}", "labels");
    req("GET", "/certificates?label_selector=env%3Dprod", NULL, &r);
    json_t *list = json_object_get(r.body, "certificates");
    ck_assert_uint_eq(json_array_size(list), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(list, 0), "id")), 2);
    hzt_resp_free(&r);
    req("GET", "/certificates?name=web&type=uploaded", NULL, &r);
    ck_assert_uint_eq(json_array_size(json_object_get(r.body, "certificates")), 1);
    hzt_resp_free(&r);
    req("GET", "/certificates?type=managed", NULL, &r);
    ck_assert_uint_eq(json_array_size(json_object_get(r.body, "certificates")), 0);
    hzt_resp_free(&r);
    req("GET", "/certificates?sort=name:desc", NULL, &r);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(r.body, "certificates"), 0), "name")),
                     "web");
    hzt_resp_free(&r);
    expect_invalid_field("GET", "/certificates?type=other", NULL, "type");
    expect_invalid_field("GET", "/certificates?label_selector=a%20in%20(", NULL, "label_selector");
    expect_invalid_field("GET", "/certificates?domain=x", NULL, "domain");
    req("DELETE", "/certificates/2", NULL, &r);
    ck_assert_int_eq(r.status, 204);
    hzt_resp_free(&r);
    expect_error("GET", "/certificates/2", NULL, 404, "not_found");
    expect_error("DELETE", "/certificates/2", NULL, 404, "not_found");
    expect_error("PATCH", "/certificates/1", "{}", 405, "method_not_allowed");
    /* An uploaded certificate has no issuance to retry, and no actions. */
    expect_error("POST", "/certificates/1/actions/retry", NULL, 422, "unsupported_error");
    req("GET", "/certificates/1/actions", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(r.body, "actions")), 0);
    hzt_resp_free(&r);
}
END_TEST

/* Wait for the action in a create/retry answer; returns its id. */
static long
wait_action(const struct hzt_resp *r, const char *want_command, const char *want_status)
{
    json_t *a = json_object_get(r->body, "action");
    char st[32];
    ck_assert_str_eq(json_string_value(json_object_get(a, "command")), want_command);
    long id = (long)json_integer_value(json_object_get(a, "id"));
    ck_assert_int_eq(hzt_wait_action(&F, TOK, id, st, sizeof(st), 5000), 0);
    ck_assert_str_eq(st, want_status);
    return id;
}

START_TEST(test_managed_issuance_gated)
{
    struct hzt_resp r, r2;
    char path[96];
    admin_faults("{\"hold_issuance\":true,\"fail_issuance\":{\"domains\":[\"bad.example.com\"]}}");
    req("POST", "/certificates",
        "{\"name\":\"ok\",\"type\":\"managed\",\"domain_names\":[\"example.com\",\"*.example.com\"]"
        "}",
        &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.raw);
    json_t *c = json_object_get(r.body, "certificate");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "status"), "issuance")),
                     "pending");
    ck_assert(json_is_null(json_object_get(c, "certificate")));
    ck_assert(json_is_null(json_object_get(c, "not_valid_after")));
    json_t *a = json_object_get(r.body, "action");
    ck_assert_str_eq(json_string_value(json_object_get(a, "command")), "create_certificate");
    ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "running");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(a, "resources"), 0), "type")),
                     "certificate");
    req("POST", "/certificates",
        "{\"name\":\"bad\",\"type\":\"managed\",\"domain_names\":[\"bad.example.com\"]}", &r2);
    ck_assert_int_eq(r2.status, 201);

    /* Held: both stay pending until released, however long this takes. */
    json_t *c1 = get_cert(1);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c1, "status"), "issuance")),
                     "pending");
    json_decref(c1);
    struct hzt_resp fr;
    ck_assert_int_eq(hzt_req(&F, "GET", "/_admin/faults", NULL, NULL, NULL, &fr), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(fr.body, "held_actions")), 2);
    hzt_resp_free(&fr);
    req("GET", "/certificates/actions?status=running", NULL, &fr);
    ck_assert_uint_eq(json_array_size(json_object_get(fr.body, "actions")), 2);
    hzt_resp_free(&fr);

    admin_faults("{\"hold_issuance\":false}");
    wait_action(&r, "create_certificate", "success");
    long bad_action = wait_action(&r2, "create_certificate", "error");
    hzt_resp_free(&r);
    hzt_resp_free(&r2);
    c1 = get_cert(1);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c1, "status"), "issuance")),
                     "completed");
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(c1, "certificate")), "BEGIN CERTIFICATE"));
    ck_assert(json_is_string(json_object_get(c1, "fingerprint")));
    ck_assert(json_is_string(json_object_get(c1, "not_valid_after")));
    json_decref(c1);
    json_t *c2 = get_cert(2);
    json_t *st = json_object_get(c2, "status");
    ck_assert_str_eq(json_string_value(json_object_get(st, "issuance")), "failed");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "error"), "code")),
                     "ca_dns_validation_failed");
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(json_object_get(st, "error"), "message")),
               "bad.example"));
    json_decref(c2);
    snprintf(path, sizeof(path), "/actions/%ld", bad_action);
    req("GET", path, NULL, &r);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(r.body, "action"), "error"), "code")),
                     "ca_dns_validation_failed");
    hzt_resp_free(&r);

    /* Retry: refused on the completed one; the failed one, once its DNS
     * "points", is issued by an issue_certificate action. */
    expect_error("POST", "/certificates/1/actions/retry", NULL, 422, "unsupported_error");
    admin_faults("{\"fail_issuance\":null}");
    req("POST", "/certificates/2/actions/retry", NULL, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.raw);
    long retry = wait_action(&r, "issue_certificate", "success");
    hzt_resp_free(&r);
    c2 = get_cert(2);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c2, "status"), "issuance")),
                     "completed");
    ck_assert(json_is_null(json_object_get(json_object_get(c2, "status"), "error")));
    json_decref(c2);
    req("GET", "/certificates/2/actions", NULL, &r);
    ck_assert_uint_eq(json_array_size(json_object_get(r.body, "actions")), 2);
    hzt_resp_free(&r);
    snprintf(path, sizeof(path), "/certificates/2/actions/%ld", retry);
    req("GET", path, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    hzt_resp_free(&r);
    snprintf(path, sizeof(path), "/certificates/1/actions/%ld", retry);
    expect_error("GET", path, NULL, 404, "not_found");
    snprintf(path, sizeof(path), "/certificates/actions/%ld", retry);
    req("GET", path, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    hzt_resp_free(&r);
    expect_error("GET", "/certificates/9/actions", NULL, 404, "not_found");
    expect_error("POST", "/certificates/2/actions/renew", NULL, 404, "not_found");
    expect_error("GET", "/certificates/2/actions/retry", NULL, 405, "method_not_allowed");
    struct hzt_resp sr;
    ck_assert_int_eq(hzt_req(&F, "GET", "/_admin/state", NULL, NULL, NULL, &sr), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(sr.body, "certificates")), 2);
    hzt_resp_free(&sr);
    expect_error("POST", "/certificates/9/actions/retry", NULL, 404, "not_found");
    expect_invalid_field("POST", "/certificates/2/actions/retry", "{\"force\":true}", "force");

    /* Managed refusals. */
    expect_invalid_field("POST", "/certificates", "{\"name\":\"m\",\"type\":\"managed\"}",
                         "domain_names");
    expect_invalid_field("POST", "/certificates",
                         "{\"name\":\"m\",\"type\":\"managed\",\"domain_names\":[\"no spaces.x\"]}",
                         "domain_names");
    expect_invalid_field(
        "POST", "/certificates",
        "{\"name\":\"m\",\"type\":\"managed\",\"domain_names\":[\"a.example.com\"],"
        "\"certificate\":\"x\"}",
        "certificate");
    expect_invalid_field("POST", "/certificates",
                         "{\"name\":\"m\",\"type\":\"managed\",\"domain_names\":[7]}",
                         "domain_names[0]");
    ck_assert_int_eq(cert_total(), 2);
}
END_TEST

/* The services of balancer lb (new JSON array). */
static json_t *
services_of(long lb)
{
    return get_member("load_balancers", lb, "load_balancer", "services");
}

/* POST add_service on lb expecting an error; the services stay as they were. */
static void
refused(long lb, const char *body, long status, const char *code)
{
    char path[96];
    json_t *before = services_of(lb);
    snprintf(path, sizeof(path), "/load_balancers/%ld/actions/add_service", lb);
    expect_error("POST", path, body, status, code);
    json_t *after = services_of(lb);
    ck_assert_msg(json_equal(before, after), "services changed by refused %s", body);
    json_decref(before);
    json_decref(after);
}

START_TEST(test_https_services)
{
    struct hzt_resp r;
    ck_assert_int_eq(hzt_gen_certs(F.dir), 0);
    ck_assert_int_eq(upload_ok("web"), 1);
    action_ok(
        1, "add_service",
        "{\"protocol\":\"https\",\"listen_port\":443,\"destination_port\":30443,"
        "\"proxyprotocol\":true,"
        "\"http\":{\"certificates\":[1],\"redirect_http\":true,\"sticky_sessions\":true,"
        "\"cookie_name\":\"SESS\",\"cookie_lifetime\":600,\"timeout_idle\":120},"
        "\"health_check\":{\"protocol\":\"http\",\"port\":30443,\"interval\":10,"
        "\"timeout\":5,\"retries\":2,\"http\":{\"domain\":\"example.com\",\"path\":\"/healthz\","
        "\"response\":\"ok\",\"status_codes\":[\"200\",\"3??\"],\"tls\":true}}}",
        "success");
    json_t *svcs = services_of(1);
    json_t *s = json_array_get(svcs, 0);
    json_t *h = json_object_get(s, "http");
    ck_assert_str_eq(json_string_value(json_object_get(s, "protocol")), "https");
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(h, "certificates"), 0)), 1);
    ck_assert(json_is_true(json_object_get(h, "redirect_http")));
    ck_assert(json_is_true(json_object_get(h, "sticky_sessions")));
    ck_assert_str_eq(json_string_value(json_object_get(h, "cookie_name")), "SESS");
    ck_assert_int_eq(json_integer_value(json_object_get(h, "cookie_lifetime")), 600);
    ck_assert_int_eq(json_integer_value(json_object_get(h, "timeout_idle")), 120);
    json_t *hh = json_object_get(json_object_get(s, "health_check"), "http");
    ck_assert_str_eq(json_string_value(json_object_get(hh, "domain")), "example.com");
    ck_assert_str_eq(json_string_value(json_object_get(hh, "path")), "/healthz");
    ck_assert_str_eq(json_string_value(json_object_get(hh, "response")), "ok");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(hh, "status_codes"), 1)),
                     "3??");
    ck_assert(json_is_true(json_object_get(hh, "tls")));
    json_decref(svcs);

    /* The certificate shows its user, and cannot be deleted while used. */
    json_t *c = get_cert(1);
    json_t *ub = json_array_get(json_object_get(c, "used_by"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(ub, "id")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(ub, "type")), "load_balancer");
    json_decref(c);
    expect_error("DELETE", "/certificates/1", NULL, 422, "service_error");
    ck_assert_int_eq(cert_total(), 1);

    /* Refusals, each leaving the services as they were. */
    static const struct {
        const char *body;
        long status;
        const char *code;
    } refusals[] = {
        /* https without a certificate */
        {"{\"protocol\":\"https\",\"listen_port\":8443,\"destination_port\":1}", 400,
         "invalid_input"},
        {"{\"protocol\":\"https\",\"listen_port\":8443,\"http\":{\"certificates\":[]}}", 400,
         "invalid_input"},
        /* certificates on http and tcp */
        {"{\"protocol\":\"http\",\"listen_port\":8080,\"http\":{\"certificates\":[1]}}", 400,
         "invalid_input"},
        {"{\"protocol\":\"tcp\",\"listen_port\":25,\"destination_port\":25,"
         "\"http\":{\"certificates\":[1]}}",
         400, "invalid_input"},
        /* an unknown certificate */
        {"{\"protocol\":\"https\",\"listen_port\":8443,\"http\":{\"certificates\":[42]}}", 404,
         "not_found"},
        /* redirect_http on http, and on https off 443 */
        {"{\"protocol\":\"http\",\"listen_port\":8080,\"http\":{\"redirect_http\":true}}", 400,
         "invalid_input"},
        {"{\"protocol\":\"https\",\"listen_port\":8443,"
         "\"http\":{\"certificates\":[1],\"redirect_http\":true}}",
         400, "invalid_input"},
        /* port 80 held by the redirect; 443 taken */
        {"{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080}", 422,
         "source_port_already_used"},
        {"{\"protocol\":\"https\",\"listen_port\":443,\"http\":{\"certificates\":[1]}}", 422,
         "source_port_already_used"},
        /* cookie and health check values */
        {"{\"protocol\":\"http\",\"listen_port\":8080,\"http\":{\"cookie_lifetime\":0}}", 400,
         "invalid_input"},
        {"{\"protocol\":\"http\",\"listen_port\":8080,\"http\":{\"cookie_name\":\"\"}}", 400,
         "invalid_input"},
        /* timeout_idle outside 30..300, and on tcp */
        {"{\"protocol\":\"http\",\"listen_port\":8080,\"http\":{\"timeout_idle\":29}}", 400,
         "invalid_input"},
        {"{\"protocol\":\"http\",\"listen_port\":8080,\"http\":{\"timeout_idle\":301}}", 400,
         "invalid_input"},
        {"{\"protocol\":\"tcp\",\"listen_port\":25,\"destination_port\":25,"
         "\"http\":{\"timeout_idle\":60}}",
         400, "invalid_input"},
        {"{\"protocol\":\"http\",\"listen_port\":8080,\"health_check\":{\"protocol\":\"http\","
         "\"http\":{\"path\":\"healthz\"}}}",
         400, "invalid_input"},
        {"{\"protocol\":\"http\",\"listen_port\":8080,\"health_check\":{\"protocol\":\"http\","
         "\"http\":{\"status_codes\":[\"abc\"]}}}",
         400, "invalid_input"},
    };
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
        refused(1, refusals[i].body, refusals[i].status, refusals[i].code);
    /* redirect_http needs port 80 free. */
    action_ok(2, "add_service", "{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":1}",
              "success");
    refused(2,
            "{\"protocol\":\"https\",\"listen_port\":443,"
            "\"http\":{\"certificates\":[1],\"redirect_http\":true}}",
            422, "source_port_already_used");
    /* lb11 holds at most 10 certificates. */
    for (int i = 2; i <= 11; i++) {
        char name[16];
        snprintf(name, sizeof(name), "c%d", i);
        ck_assert_int_eq(upload_ok(name), i);
    }
    refused(2,
            "{\"protocol\":\"https\",\"listen_port\":443,"
            "\"http\":{\"certificates\":[1,2,3,4,5,6,7,8,9,10,11]}}",
            403, "resource_limit_exceeded");

    /* update_service: new cookie lifetime, no redirect; certificates stay
     * required on https; a tcp service takes no http settings. */
    action_ok(1, "update_service",
              "{\"listen_port\":443,\"http\":{\"cookie_lifetime\":30,\"redirect_http\":false,"
              "\"certificates\":[2],\"timeout_idle\":300}}",
              "success");
    svcs = services_of(1);
    h = json_object_get(json_array_get(svcs, 0), "http");
    ck_assert_int_eq(json_integer_value(json_object_get(h, "cookie_lifetime")), 30);
    ck_assert_int_eq(json_integer_value(json_object_get(h, "timeout_idle")), 300);
    ck_assert(json_is_false(json_object_get(h, "redirect_http")));
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(h, "certificates"), 0)), 2);
    json_decref(svcs);
    expect_error("POST", "/load_balancers/1/actions/update_service",
                 "{\"listen_port\":443,\"http\":{\"certificates\":[]}}", 400, "invalid_input");
    expect_invalid_field("POST", "/load_balancers/1/actions/update_service",
                         "{\"listen_port\":443,\"http\":{\"timeout_idle\":3600}}",
                         "http.timeout_idle");
    expect_error("POST", "/load_balancers/2/actions/update_service",
                 "{\"listen_port\":80,\"http\":{\"sticky_sessions\":true}}", 400, "invalid_input");
    /* The CLI's update-service sends an empty http object for tcp too. */
    action_ok(2, "update_service", "{\"listen_port\":80,\"destination_port\":2,\"http\":{}}",
              "success");
    /* Port 80 is free again on 1 now that it does not redirect. */
    action_ok(1, "add_service", "{\"protocol\":\"http\",\"listen_port\":80}", "success");
    /* Services that give no timeout_idle show Hetzner's default; an update
     * leaves the one given before. */
    svcs = services_of(1);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(json_array_get(svcs, 1), "http"), "timeout_idle")),
                     60);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(json_array_get(svcs, 0), "http"), "timeout_idle")),
                     300);
    json_decref(svcs);

    /* Certificate 1 is unused now: it can go. Deleting the balancer frees 2. */
    c = get_cert(1);
    ck_assert_uint_eq(json_array_size(json_object_get(c, "used_by")), 0);
    json_decref(c);
    req("DELETE", "/certificates/1", NULL, &r);
    ck_assert_int_eq(r.status, 204);
    hzt_resp_free(&r);
    expect_error("DELETE", "/certificates/2", NULL, 422, "service_error");
    req("DELETE", "/load_balancers/1", NULL, &r);
    ck_assert_int_eq(r.status, 204);
    hzt_resp_free(&r);
    req("DELETE", "/certificates/2", NULL, &r);
    ck_assert_int_eq(r.status, 204);
    hzt_resp_free(&r);
}
END_TEST

START_TEST(test_seeded_certificates)
{
    static const char *seed =
        "{\"certificates\":[{\"id\":7,\"name\":\"site\",\"type\":\"managed\","
        "\"domain_names\":[\"example.net\"],\"labels\":{\"env\":\"prod\"}}],"
        "\"load_balancers\":[{\"id\":1,\"name\":\"web\",\"load_balancer_type\":\"lb11\","
        "\"location\":\"fsn1\",\"services\":[{\"protocol\":\"https\",\"listen_port\":443,"
        "\"destination_port\":30443,\"http\":{\"certificates\":[7],\"redirect_http\":true}}]}]}";
    static const char *args[] = {"--action-duration-ms", "30", NULL};
    char path[600], *out = NULL;
    stop_fake();
    ck_assert_msg(hzt_start(&F, seed, args) == 0, "fake did not start (log %s)", F.log);
    json_t *c = get_cert(7);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "status"), "issuance")),
                     "completed");
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(c, "certificate")), "BEGIN CERTIFICATE"));
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_array_get(json_object_get(c, "used_by"), 0), "id")),
        1);
    json_decref(c);
    ck_assert_int_eq(hzt_gen_certs(F.dir), 0);
    ck_assert_int_eq(upload_ok("next"), 8);

    /* A seed whose service names a certificate it does not have is refused. */
    snprintf(path, sizeof(path), "%s/bad-seed.json", F.dir);
    ck_assert_int_eq(tu_write_file(path, "{\"load_balancers\":[{\"name\":\"a\","
                                         "\"load_balancer_type\":\"lb11\",\"location\":\"fsn1\","
                                         "\"services\":[{\"protocol\":\"https\","
                                         "\"http\":{\"certificates\":[3]}}]}]}"),
                     0);
    ck_assert_int_eq(run_fake(&out, "--seed", path, NULL), 1);
    ck_assert_msg(strstr(out, "not_found") != NULL, "%s", out);
    free(out);
    ck_assert_int_eq(tu_write_file(path, "{\"certificates\":[{\"name\":\"m\","
                                         "\"type\":\"managed\"}]}"),
                     0);
    ck_assert_int_eq(run_fake(&out, "--seed", path, NULL), 1);
    ck_assert_msg(strstr(out, "domain_names") != NULL, "%s", out);
    free(out);
}
END_TEST

int
main(int argc, char **argv)
{
    const TTest *const tests[] = {
        test_uploaded_certificates,
        test_managed_issuance_gated,
        test_https_services,
        test_seeded_certificates,
    };
    return api_run(argc, argv, "hetzner-certs", tests, sizeof(tests) / sizeof(tests[0]));
}
