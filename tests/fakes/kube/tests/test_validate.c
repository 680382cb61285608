/*
 * The fake refuses what kube-apiserver 1.35 refuses (schema.c, rules.c,
 * api.c): one test per rule, each sending the refused write over HTTPS
 * (libcurl, and the curl CLI where the answer's headers matter) and checking
 * the answer's Status: code, reason, message, and details.causes naming the
 * field. Each also shows the same write made valid is taken, so a refusal
 * is the rule's and not a broken fake's.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apihelp.h"

struct fake fk;
const char *const *extra_args;

#define LEASES "/apis/coordination.k8s.io/v1/namespaces/default/leases"
#define CORE_EV "/api/v1/namespaces/default/events"
#define NEW_EV "/apis/events.k8s.io/v1/namespaces/default/events"
#define NODES "/api/v1/nodes"

/* A 422 Invalid whose causes[i] has this field and reason. */
static void
assert_cause(json_t *st, size_t i, const char *field, const char *reason)
{
    ck_assert_msg(!strcmp(cause_at(st, i, "field"), field) &&
                      !strcmp(cause_at(st, i, "reason"), reason),
                  "cause %zu: want %s %s in %s", i, field, reason, json_dumps(st, 0));
}

static void
expect_invalid(const char *method, const char *path, const char *ctype, const char *body,
               const char *field, const char *reason)
{
    long code;
    json_t *st = req(method, path, ctype, body, &code);
    assert_status(st, code, 422, "Invalid");
    assert_cause(st, 0, field, reason);
    json_decref(st);
}

static void
expect_code(const char *method, const char *path, const char *ctype, const char *body, long want)
{
    long code;
    json_t *o = req(method, path, ctype, body, &code);
    ck_assert_msg(code == want, "%s %s: HTTP %ld, want %ld: %s", method, path, code, want,
                  o ? json_dumps(o, 0) : "");
    json_decref(o);
}

/* The curl CLI with the client certificate: headers and body into *out
 * (new). Returns curl's exit status. */
static int
curl_cli(const char *method, const char *path, const char *ctype, const char *body, char **out)
{
    char url[600], cert[600], key[600], ca[600], hdr[200];
    char *argv[20];
    int n = 0;

    snprintf(url, sizeof(url), "%s%s", fk.server[0], path);
    snprintf(cert, sizeof(cert), "%s/client.crt", fk.dir);
    snprintf(key, sizeof(key), "%s/client.key", fk.dir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", fk.dir);
    snprintf(hdr, sizeof(hdr), "Content-Type: %s", ctype);
    argv[n++] = "curl";
    argv[n++] = "-sS";
    argv[n++] = "-i";
    argv[n++] = "--max-time";
    argv[n++] = "20";
    argv[n++] = "--cacert";
    argv[n++] = ca;
    argv[n++] = "--cert";
    argv[n++] = cert;
    argv[n++] = "--key";
    argv[n++] = key;
    argv[n++] = "-X";
    argv[n++] = (char *)method;
    argv[n++] = "-H";
    argv[n++] = hdr;
    argv[n++] = "--data-binary";
    argv[n++] = (char *)body;
    argv[n++] = url;
    argv[n] = NULL;
    return tu_run(argv, NULL, out, 30000);
}

START_TEST(service_status_ingress_only_on_type_loadbalancer)
{
    json_t *st;
    long code;

    json_decref(create_svc("plain", NULL));
    /* The write a controller makes after the Service stopped being a LoadBalancer. */
    st = req("PATCH", SVCS "/plain/status", MERGE,
             "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"192.0.2.10\"}]}}}", &code);
    assert_status(st, code, 422, "Invalid");
    assert_cause(st, 0, "status.loadBalancer.ingress", "FieldValueForbidden");
    ck_assert_str_eq(str(st, "message"),
                     "Service \"plain\" is invalid: status.loadBalancer.ingress: Forbidden: may "
                     "only be used when `spec.type` is 'LoadBalancer'");
    ck_assert_str_eq(str(st, "details.name"), "plain");
    ck_assert_str_eq(str(st, "details.kind"), "Service");
    ck_assert_ptr_null(json_object_get(json_object_get(st, "details"), "group"));
    json_decref(st);
    st = req("GET", SVCS "/plain", NULL, NULL, &code);
    ck_assert_int_eq(
        json_array_size(json_object_get(
            json_object_get(json_object_get(st, "status"), "loadBalancer"), "ingress")),
        0);
    json_decref(st);

    /* On a LoadBalancer it is taken (ipMode defaulted), and a main write
     * away from LoadBalancer clears it, as the Service strategy does. */
    json_decref(create_svc("lb", "\"type\":\"LoadBalancer\""));
    st = req("PATCH", SVCS "/lb/status", MERGE,
             "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"192.0.2.10\"}]}}}", &code);
    ck_assert_msg(code == 200, "%ld %s", code, json_dumps(st, 0));
    json_decref(st);
    st = req("PATCH", SVCS "/lb", MERGE, "{\"spec\":{\"type\":\"ClusterIP\"}}", &code);
    ck_assert_msg(code == 200, "%ld %s", code, json_dumps(st, 0));
    ck_assert_int_eq(
        json_array_size(json_object_get(
            json_object_get(json_object_get(st, "status"), "loadBalancer"), "ingress")),
        0);
    json_decref(st);
}
END_TEST

START_TEST(service_status_ingress_ipmode_ip_and_hostname)
{
    json_t *st;
    long code;

    json_decref(create_svc("lb", "\"type\":\"LoadBalancer\""));
    expect_invalid("PATCH", SVCS "/lb/status", MERGE,
                   "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"hostname\":\"lb.example.com\","
                   "\"ipMode\":\"VIP\"}]}}}",
                   "status.loadBalancer.ingress[0].ipMode", "FieldValueForbidden");
    expect_invalid("PATCH", SVCS "/lb/status", MERGE,
                   "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"192.0.2.1\","
                   "\"ipMode\":\"Direct\"}]}}}",
                   "status.loadBalancer.ingress[0].ipMode", "FieldValueNotSupported");
    /* Every broken rule is a cause of the one answer. */
    st = req("PATCH", SVCS "/lb/status", MERGE,
             "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"300.1.1.1\"},"
             "{\"hostname\":\"192.0.2.7\"}]}}}",
             &code);
    assert_status(st, code, 422, "Invalid");
    assert_cause(st, 0, "status.loadBalancer.ingress[0].ip", "FieldValueInvalid");
    assert_cause(st, 1, "status.loadBalancer.ingress[1].hostname", "FieldValueInvalid");
    ck_assert_ptr_nonnull(strstr(str(st, "message"), "Service \"lb\" is invalid: ["));
    json_decref(st);
    expect_code("PATCH", SVCS "/lb/status", MERGE,
                "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"192.0.2.1\",\"ipMode\":"
                "\"Proxy\"},{\"hostname\":\"lb.example.com\"}]}}}",
                200);
}
END_TEST

START_TEST(values_the_go_types_cannot_hold_are_400)
{
    json_t *st;
    long code;

    st = req("POST", SVCS, JSON,
             "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"ports\":[{\"port\":\"80\"}]}}", &code);
    assert_status(st, code, 400, "BadRequest");
    ck_assert_str_eq(str(st, "message"),
                     "Service in version \"v1\" cannot be handled as a Service: json: cannot "
                     "unmarshal string into Go struct field ServicePort.spec.ports.port of type "
                     "int32");
    json_decref(st);
    /* An int32 out of its range. */
    expect_code("POST", LEASES, JSON,
                "{\"metadata\":{\"name\":\"l\"},\"spec\":{\"leaseDurationSeconds\":4294967296}}",
                400);
    /* A patch result that does not decode: 422 on the field "patch". */
    json_decref(create_svc("p", NULL));
    st = req("PATCH", SVCS "/p", MERGE, "{\"spec\":{\"selector\":{\"app\":7}}}", &code);
    assert_status(st, code, 422, "Invalid");
    assert_cause(st, 0, "patch", "FieldValueInvalid");
    ck_assert_ptr_null(json_object_get(json_object_get(st, "details"), "kind"));
    json_decref(st);
}
END_TEST

START_TEST(required_fields_and_enums_are_422)
{
    expect_invalid("POST", SLICES, JSON,
                   "{\"metadata\":{\"name\":\"s\"},\"addressType\":\"IPv4\","
                   "\"endpoints\":[{\"conditions\":{\"ready\":true}}]}",
                   "endpoints[0].addresses", "FieldValueRequired");
    expect_invalid("POST", NODES, JSON,
                   "{\"metadata\":{\"name\":\"n1\"},\"status\":{\"addresses\":[{\"address\":"
                   "\"10.0.0.1\"}]}}",
                   "status.addresses[0].type", "FieldValueRequired");
    expect_invalid("POST", NODES, JSON,
                   "{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"taints\":[{\"key\":\"k\","
                   "\"effect\":\"Sometimes\"}]}}",
                   "spec.taints[0].effect", "FieldValueNotSupported");
    expect_invalid("POST", SVCS, JSON,
                   "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"ports\":[{\"port\":80,"
                   "\"protocol\":\"tcp\"}]}}",
                   "spec.ports[0].protocol", "FieldValueNotSupported");
    expect_code("POST", NODES, JSON,
                "{\"metadata\":{\"name\":\"n1\"},\"status\":{\"addresses\":[{\"type\":"
                "\"InternalIP\",\"address\":\"10.0.0.1\"}]}}",
                201);
}
END_TEST

START_TEST(unknown_fields_follow_field_validation)
{
    static const char body[] =
        "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"ports\":[{\"port\":80}],\"colour\":\"red\"}}";
    char b[256], *out = NULL;
    json_t *st;
    long code;

    snprintf(b, sizeof(b), body, "strict");
    st = req("POST", SVCS "?fieldValidation=Strict", JSON, b, &code);
    assert_status(st, code, 400, "BadRequest");
    ck_assert_str_eq(str(st, "message"), "Service in version \"v1\" cannot be handled as a "
                                         "Service: strict decoding error: unknown field "
                                         "\"spec.colour\"");
    json_decref(st);
    /* Warn, the default: taken without the field, a Warning header names it. */
    snprintf(b, sizeof(b), body, "warn");
    ck_assert_int_eq(curl_cli("POST", SVCS, JSON, b, &out), 0);
    ck_assert_msg(strstr(out, " 201") && strstr(out, "Warning: 299 - \"unknown field "
                                                     "\\\"spec.colour\\\"\""),
                  "%s", out);
    ck_assert_ptr_null(strstr(strstr(out, "\r\n\r\n"), "colour"));
    free(out);
    out = NULL;
    snprintf(b, sizeof(b), body, "ignore");
    ck_assert_int_eq(curl_cli("POST", SVCS "?fieldValidation=Ignore", JSON, b, &out), 0);
    ck_assert_msg(strstr(out, " 201") && !strstr(out, "Warning:"), "%s", out);
    free(out);
    /* A strict patch names the field without the kind. */
    st = req("PATCH", SVCS "/warn?fieldValidation=Strict", MERGE, "{\"spec\":{\"colour\":1}}",
             &code);
    assert_status(st, code, 400, "BadRequest");
    ck_assert_str_eq(str(st, "message"), "strict decoding error: unknown field \"spec.colour\"");
    json_decref(st);
}
END_TEST

START_TEST(microtime_has_six_fractional_digits)
{
    static const char lease[] = "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"holderIdentity\":"
                                "\"a\",\"leaseDurationSeconds\":15,\"renewTime\":\"%s\"}}";
    char b[400];
    json_t *st;
    long code;

    snprintf(b, sizeof(b), lease, "l1", "2026-01-01T00:00:00Z");
    st = req("POST", LEASES, JSON, b, &code);
    assert_status(st, code, 400, "BadRequest");
    ck_assert_ptr_nonnull(strstr(str(st, "message"), "2006-01-02T15:04:05.000000Z07:00"));
    json_decref(st);
    snprintf(b, sizeof(b), lease, "l1", "2026-01-01T00:00:00.123Z");
    expect_code("POST", LEASES, JSON, b, 400);
    snprintf(b, sizeof(b), lease, "l1", "2026-01-01T00:00:00.123456789Z");
    expect_code("POST", LEASES, JSON, b, 400);
    snprintf(b, sizeof(b), lease, "l1", "2026-01-01T00:00:00.123456Z");
    expect_code("POST", LEASES, JSON, b, 201);
    snprintf(b, sizeof(b), lease, "l2", "2026-01-01T02:00:00.000001+02:00");
    expect_code("POST", LEASES, JSON, b, 201);
    /* metav1.Time takes RFC 3339 with or without a fraction. */
    expect_code("POST", CORE_EV, JSON,
                "{\"metadata\":{\"name\":\"t\"},\"involvedObject\":{\"kind\":\"Service\","
                "\"name\":\"web\",\"namespace\":\"default\"},\"reason\":\"R\","
                "\"firstTimestamp\":\"2026-01-01T00:00:00.5Z\",\"lastTimestamp\":\"yesterday\"}",
                400);
}
END_TEST

START_TEST(event_rules_of_both_apis)
{
    json_t *st;
    long code;

    /* core/v1: the involved object's namespace is the Event's. */
    expect_invalid("POST", CORE_EV, JSON,
                   "{\"metadata\":{\"name\":\"e1\"},\"involvedObject\":{\"kind\":\"Service\","
                   "\"name\":\"web\",\"namespace\":\"other\"},\"reason\":\"Synced\"}",
                   "involvedObject.namespace", "FieldValueInvalid");
    /* core/v1 with an eventTime: the reporting fields are required. */
    st = req("POST", CORE_EV, JSON,
             "{\"metadata\":{\"name\":\"e2\"},\"involvedObject\":{\"kind\":\"Service\",\"name\":"
             "\"web\",\"namespace\":\"default\"},\"eventTime\":\"2026-01-01T00:00:00.000000Z\"}",
             &code);
    assert_status(st, code, 422, "Invalid");
    assert_cause(st, 0, "reportingComponent", "FieldValueRequired");
    assert_cause(st, 1, "reportingInstance", "FieldValueRequired");
    assert_cause(st, 2, "action", "FieldValueRequired");
    assert_cause(st, 3, "reason", "FieldValueRequired");
    json_decref(st);
    /* events.k8s.io/v1 creates. */
    static const char ev[] =
        "{\"metadata\":{\"name\":\"%s\"},\"eventTime\":\"2026-01-01T00:00:00.000000Z\","
        "\"reportingController\":\"%s\",\"reportingInstance\":\"r1\",\"action\":\"Sync\","
        "\"reason\":\"Synced\",\"type\":\"%s\",\"regarding\":{\"kind\":\"Service\",\"name\":"
        "\"web\",\"namespace\":\"default\"}%s}";
    char b[700];
    snprintf(b, sizeof(b), ev, "n1", "prismlb.io/lb", "Info", "");
    expect_invalid("POST", NEW_EV, JSON, b, "type", "FieldValueInvalid");
    snprintf(b, sizeof(b), ev, "n1", "not a name!", "Normal", "");
    expect_invalid("POST", NEW_EV, JSON, b, "reportingController", "FieldValueInvalid");
    snprintf(b, sizeof(b), ev, "n1", "prismlb.io/lb", "Normal", ",\"deprecatedCount\":3");
    expect_invalid("POST", NEW_EV, JSON, b, "count", "FieldValueInvalid");
    snprintf(b, sizeof(b), ev, "n1", "prismlb.io/lb", "Normal",
             ",\"series\":{\"count\":1,\"lastObservedTime\":\"2026-01-01T00:00:01.000000Z\"}");
    expect_invalid("POST", NEW_EV, JSON, b, "series.count", "FieldValueInvalid");
    snprintf(b, sizeof(b), ev, "n1", "prismlb.io/lb", "Normal", "");
    expect_code("POST", NEW_EV, JSON, b, 201);
    /* events.k8s.io/v1 updates keep what identifies the Event; a series may grow. */
    expect_invalid("PATCH", NEW_EV "/n1", MERGE, "{\"reason\":\"Other\"}", "reason",
                   "FieldValueInvalid");
    expect_code("PATCH", NEW_EV "/n1", MERGE,
                "{\"series\":{\"count\":2,\"lastObservedTime\":\"2026-01-01T00:00:02.000000Z\"}}",
                200);
}
END_TEST

START_TEST(lease_rules_and_update_resource_versions)
{
    json_t *st, *o;
    long code;
    char b[400];

    expect_invalid("POST", LEASES, JSON,
                   "{\"metadata\":{\"name\":\"l\"},\"spec\":{\"leaseDurationSeconds\":0}}",
                   "spec.leaseDurationSeconds", "FieldValueInvalid");
    expect_invalid("POST", LEASES, JSON,
                   "{\"metadata\":{\"name\":\"l\"},\"spec\":{\"leaseTransitions\":-1}}",
                   "spec.leaseTransitions", "FieldValueInvalid");
    expect_invalid("POST", LEASES, JSON,
                   "{\"metadata\":{\"name\":\"l\"},\"spec\":{\"preferredHolder\":\"b\"}}",
                   "spec.preferredHolder", "FieldValueForbidden");
    o = req("POST", LEASES, JSON,
            "{\"metadata\":{\"name\":\"l\"},\"spec\":{\"holderIdentity\":\"a\","
            "\"leaseDurationSeconds\":15}}",
            &code);
    ck_assert_int_eq(code, 201);
    json_decref(o);
    /* A Lease has no unconditional update. */
    st = req("PUT", LEASES "/l", JSON,
             "{\"metadata\":{\"name\":\"l\"},\"spec\":{\"holderIdentity\":\"b\"}}", &code);
    assert_status(st, code, 422, "Invalid");
    assert_cause(st, 0, "metadata.resourceVersion", "FieldValueInvalid");
    ck_assert_str_eq(str(st, "message"),
                     "leases.coordination.k8s.io \"l\" is invalid: metadata.resourceVersion: "
                     "Invalid value: 0: must be specified for an update");
    json_decref(st);
    /* A resourceVersion that is not a number is the storage's parse error. */
    st = req("PUT", LEASES "/l", JSON,
             "{\"metadata\":{\"name\":\"l\",\"resourceVersion\":\"abc\"},\"spec\":{}}", &code);
    ck_assert_int_eq(code, 500);
    ck_assert_str_eq(str(st, "message"), "strconv.ParseUint: parsing \"abc\": invalid syntax");
    json_decref(st);
    /* A Service's "0" is unconditional. */
    o = create_svc("s", NULL);
    json_decref(o);
    snprintf(b, sizeof(b), "%s",
             "{\"metadata\":{\"name\":\"s\",\"resourceVersion\":\"0\"},\"spec\":{\"ports\":[{"
             "\"port\":81}]}}");
    expect_code("PUT", SVCS "/s", JSON, b, 200);
}
END_TEST

START_TEST(patch_media_types_are_the_four)
{
    json_t *st;
    long code;

    json_decref(create_svc("s", NULL));
    st = req("PATCH", SVCS "/s", JSON, "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}", &code);
    assert_status(st, code, 415, "UnsupportedMediaType");
    ck_assert_str_eq(str(st, "message"),
                     "the body of the request was in an unknown format - accepted media types "
                     "include: application/json-patch+json, application/merge-patch+json, "
                     "application/strategic-merge-patch+json, application/apply-patch+yaml");
    json_decref(st);
    expect_code("PATCH", SVCS "/s", "application/merge-patch+json; charset=utf-8",
                "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}", 200);
}
END_TEST

/* What the fake stores and fills in (defaults, status, the other Event
 * API's view) is itself valid: a strict patch of each kind is taken. */
START_TEST(stored_objects_pass_a_strict_patch)
{
    static const char *const paths[] = {
        "/api/v1/namespaces/default",
        SVCS "/w",
        SVCS "/w/status",
        NODES "/n",
        NODES "/n/status",
        SLICES "/s",
        LEASES "/l",
        CORE_EV "/e",
        NEW_EV "/e",
    };
    json_t *o;
    long code;
    char path[300];

    json_decref(create_svc("w", "\"type\":\"LoadBalancer\",\"externalTrafficPolicy\":\"Local\""));
    expect_code("PATCH", SVCS "/w/status", MERGE,
                "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"192.0.2.1\",\"ports\":"
                "[{\"port\":80,\"protocol\":\"TCP\"}]}]}}}",
                200);
    expect_code("POST", NODES, JSON,
                "{\"metadata\":{\"name\":\"n\"},\"status\":{\"addresses\":[{\"type\":"
                "\"InternalIP\",\"address\":\"10.0.0.1\"}],\"conditions\":[{\"type\":\"Ready\","
                "\"status\":\"True\"}]}}",
                201);
    expect_code("POST", SLICES, JSON,
                "{\"metadata\":{\"name\":\"s\"},\"addressType\":\"IPv4\",\"endpoints\":[{"
                "\"addresses\":[\"10.0.0.1\"]}],\"ports\":[{\"port\":80}]}",
                201);
    expect_code("POST", LEASES, JSON,
                "{\"metadata\":{\"name\":\"l\"},\"spec\":{\"holderIdentity\":\"a\","
                "\"leaseDurationSeconds\":15,\"renewTime\":\"2026-01-01T00:00:00.000000Z\"}}",
                201);
    expect_code("POST", CORE_EV, JSON,
                "{\"metadata\":{\"name\":\"e\"},\"involvedObject\":{\"kind\":\"Service\","
                "\"name\":\"w\",\"namespace\":\"default\"},\"reason\":\"R\",\"message\":\"m\","
                "\"type\":\"Normal\",\"count\":1,\"firstTimestamp\":\"2026-01-01T00:00:00Z\","
                "\"source\":{\"component\":\"x\"}}",
                201);
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        snprintf(path, sizeof(path), "%s?fieldValidation=Strict", paths[i]);
        o = req("PATCH", path, MERGE, "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}", &code);
        ck_assert_msg(code == 200, "%s: HTTP %ld %s", paths[i], code, json_dumps(o, 0));
        json_decref(o);
    }
}
END_TEST

int
main(void)
{
    static const char *const none[] = {NULL};
    const struct api_case cases[] = {
        {"status-ingress", none, service_status_ingress_only_on_type_loadbalancer},
        {"status-ipmode", none, service_status_ingress_ipmode_ip_and_hostname},
        {"decode", none, values_the_go_types_cannot_hold_are_400},
        {"required-enum", none, required_fields_and_enums_are_422},
        {"unknown-fields", none, unknown_fields_follow_field_validation},
        {"microtime", none, microtime_has_six_fractional_digits},
        {"events", none, event_rules_of_both_apis},
        {"leases", none, lease_rules_and_update_resource_versions},
        {"patch-types", none, patch_media_types_are_the_four},
        {"stored-valid", none, stored_objects_pass_a_strict_patch},
    };
    return run_cases(cases, sizeof(cases) / sizeof(cases[0])) ? 1 : 0;
}
