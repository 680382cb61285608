/* End to end: the real hcloud CLI (Debian hcloud-cli) against the fake,
 * running the commands robotlb's documentation gives its users, and the
 * certificate and https service commands. */
#include <check.h>
#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "hzt.h"

#define UID_NEW "0f8a2c4e-1b3d-4f5a-9c7e-2d4b6a8c0e1f"

static const char *SEED =
    "{\"tokens\":[\"cli-token\"],"
    "\"networks\":[{\"id\":7,\"name\":\"k8s\",\"ip_range\":\"10.0.0.0/16\","
    "\"subnets\":[{\"type\":\"cloud\",\"ip_range\":\"10.0.0.0/"
    "24\",\"network_zone\":\"eu-central\"},"
    "{\"type\":\"vswitch\",\"ip_range\":\"10.0.1.0/24\",\"network_zone\":\"eu-central\","
    "\"vswitch_id\":4242}]}],"
    "\"load_balancers\":[{\"id\":3,\"name\":\"old-release\",\"load_balancer_type\":\"lb11\","
    "\"location\":\"fsn1\",\"network\":7,\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1."
    "10\"}}]}]}";

static struct hzt_fake F;
static char env_endpoint[300], env_home[600], env_config[700];
static char *cli_env[] = {env_endpoint, "HCLOUD_TOKEN=cli-token", env_home, env_config, NULL};

static void
setup(void)
{
    static const char *args[] = {"--action-duration-ms", "100", NULL};
    ck_assert_msg(hzt_start(&F, SEED, args) == 0, "fake did not start (log %s)", F.log);
    snprintf(env_endpoint, sizeof(env_endpoint), "HCLOUD_ENDPOINT=%s", F.url);
    snprintf(env_home, sizeof(env_home), "HOME=%s", F.dir);
    snprintf(env_config, sizeof(env_config), "HCLOUD_CONFIG=%s/cli.toml", F.dir);
}

static void
teardown(void)
{
    int st = hzt_stop(&F);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fake exit status %d", st);
}

/* Run hcloud with the NULL-terminated arguments in ap; *out gets the
 * combined output (new). Returns the exit code. */
static int
hcloud_v(char **out, va_list ap)
{
    char *argv[24];
    int n = 0;
    argv[n++] = "hcloud";
    argv[n++] = "--poll-interval";
    argv[n++] = "50ms";
    for (char *a; n < 23 && (a = va_arg(ap, char *));)
        argv[n++] = a;
    argv[n] = NULL;
    int rc = tu_run(argv, cli_env, out, 30000);
    ck_assert_msg(rc >= 0, "hcloud %s %s timed out or did not start", argv[3], argv[4]);
    ck_assert_ptr_nonnull(*out);
    return rc;
}

static int
hcloud(char **out, ...)
{
    va_list ap;
    va_start(ap, out);
    int rc = hcloud_v(out, ap);
    va_end(ap);
    return rc;
}

/* hcloud <NULL-terminated args> must exit 0 and print text containing want. */
static void
ok_contains(const char *want, ...)
{
    char *out = NULL;
    va_list ap;
    va_start(ap, want);
    int rc = hcloud_v(&out, ap);
    va_end(ap);
    ck_assert_msg(rc == 0 && strstr(out, want), "hcloud: rc %d, want '%s' in:\n%s", rc, want, out);
    free(out);
}

/* describe -o json of a balancer (new JSON). */
static json_t *
describe(const char *name)
{
    char *out = NULL;
    int rc = hcloud(&out, "load-balancer", "describe", name, "-o", "json", (char *)NULL);
    ck_assert_msg(rc == 0, "describe: %s", out);
    json_error_t err;
    json_t *j = json_loads(out, JSON_DECODE_ANY, &err);
    ck_assert_msg(j != NULL, "describe output is not JSON: %s", out);
    free(out);
    return j;
}

/* list -o json with a selector: names joined by ','. */
static void
list_names(const char *selector, char *buf, size_t len)
{
    char *out = NULL;
    int rc =
        hcloud(&out, "load-balancer", "list", "--selector", selector, "-o", "json", (char *)NULL);
    ck_assert_msg(rc == 0, "list --selector %s: %s", selector, out);
    /* The CLI prints an empty result as "null" (a nil Go slice). */
    json_t *arr = json_loads(out, JSON_DECODE_ANY, NULL);
    ck_assert_msg(json_is_array(arr) || json_is_null(arr), "list output is not JSON: %s", out);
    size_t i;
    json_t *lb;
    buf[0] = '\0';
    json_array_foreach(arr, i, lb)
    {
        if (i)
            strncat(buf, ",", len - strlen(buf) - 1);
        strncat(buf, json_string_value(json_object_get(lb, "name")), len - strlen(buf) - 1);
    }
    json_decref(arr);
    free(out);
}

START_TEST(test_robotlb_user_commands)
{
    char *out = NULL;
    char names[256];
    int rc;

    /* create */
    rc = hcloud(&out, "load-balancer", "create", "--name", "web", "--type", "lb11", "--location",
                "hel1", (char *)NULL);
    ck_assert_msg(rc == 0 && strstr(out, "LoadBalancer 4 created") && strstr(out, "IPv4: 198.51."),
                  "create: rc %d\n%s", rc, out);
    free(out);
    json_t *lb = describe("web");
    ck_assert_int_eq(json_integer_value(json_object_get(lb, "id")), 4);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(lb, "location"), "name")),
                     "hel1");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(lb, "load_balancer_type"), "name")),
        "lb11");
    json_decref(lb);

    /* attach-to-network */
    ok_contains("attached to network 7", "load-balancer", "attach-to-network", "web", "--network",
                "k8s", (char *)NULL);
    lb = describe("web");
    json_t *pn = json_array_get(json_object_get(lb, "private_net"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(pn, "network")), 7);
    ck_assert_str_eq(json_string_value(json_object_get(pn, "ip")), "10.0.0.3");
    json_decref(lb);

    /* add-target --ip inside the vSwitch subnet, then outside it */
    ok_contains("Target added", "load-balancer", "add-target", "web", "--ip", "10.0.1.5",
                (char *)NULL);
    rc = hcloud(&out, "load-balancer", "add-target", "web", "--ip", "10.0.0.77", (char *)NULL);
    ck_assert_msg(rc != 0 && strstr(out, "cloud_resource_ip_not_allowed"),
                  "cloud subnet IP: rc %d\n%s", rc, out);
    free(out);
    rc = hcloud(&out, "load-balancer", "add-target", "web", "--ip", "192.0.2.10", (char *)NULL);
    ck_assert_msg(rc != 0 && strstr(out, "cloud_resource_ip_not_allowed"), "outside IP: rc %d\n%s",
                  rc, out);
    free(out);
    lb = describe("web");
    json_t *targets = json_object_get(lb, "targets");
    ck_assert_uint_eq(json_array_size(targets), 1);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(json_array_get(targets, 0), "ip"), "ip")),
        "10.0.1.5");
    json_decref(lb);

    /* add-service, update-service */
    ok_contains("Service was added", "load-balancer", "add-service", "web", "--protocol", "tcp",
                "--listen-port", "80", "--destination-port", "30080", (char *)NULL);
    ok_contains("was updated", "load-balancer", "update-service", "web", "--listen-port", "80",
                "--destination-port", "30081", (char *)NULL);
    lb = describe("web");
    json_t *svc = json_array_get(json_object_get(lb, "services"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(svc, "protocol")), "tcp");
    ck_assert_int_eq(json_integer_value(json_object_get(svc, "listen_port")), 80);
    ck_assert_int_eq(json_integer_value(json_object_get(svc, "destination_port")), 30081);
    json_t *hs = json_array_get(
        json_object_get(json_array_get(json_object_get(lb, "targets"), 0), "health_status"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(hs, "listen_port")), 80);
    json_decref(lb);

    /* add-label --overwrite: first set, then replace */
    ok_contains("added", "load-balancer", "add-label", "--overwrite", "web",
                "robotlb/service-uid=old-uid", (char *)NULL);
    ok_contains("added", "load-balancer", "add-label", "--overwrite", "web",
                "robotlb/service-uid=" UID_NEW, (char *)NULL);
    lb = describe("web");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(lb, "labels"), "robotlb/service-uid")),
        UID_NEW);
    json_decref(lb);

    /* list --selector, both forms from the robotlb documentation */
    list_names("robotlb/service-uid=" UID_NEW, names, sizeof(names));
    ck_assert_str_eq(names, "web");
    list_names("robotlb/service-uid=old-uid", names, sizeof(names));
    ck_assert_str_eq(names, "");
    list_names("!robotlb/service-uid", names, sizeof(names));
    ck_assert_str_eq(names, "old-release");
    ok_contains("old-release", "load-balancer", "list", "--selector", "!robotlb/service-uid",
                (char *)NULL);

    /* change-algorithm, change-type */
    ok_contains("Algorithm for Load Balancer 4 was changed", "load-balancer", "change-algorithm",
                "web", "--algorithm-type", "least_connections", (char *)NULL);
    ok_contains("changed to type lb21", "load-balancer", "change-type", "web", "lb21",
                (char *)NULL);
    lb = describe("web");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(lb, "algorithm"), "type")),
                     "least_connections");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(lb, "load_balancer_type"), "name")),
        "lb21");
    ck_assert_int_eq(json_integer_value(
                         json_object_get(json_object_get(lb, "load_balancer_type"), "max_targets")),
                     75);
    json_decref(lb);

    /* network list */
    rc = hcloud(&out, "network", "list", "-o", "json", (char *)NULL);
    json_t *nets = json_loads(out, 0, NULL);
    ck_assert_msg(rc == 0 && json_array_size(nets) == 1, "network list: %s", out);
    json_t *net = json_array_get(nets, 0);
    ck_assert_str_eq(json_string_value(json_object_get(net, "name")), "k8s");
    ck_assert_str_eq(json_string_value(json_object_get(net, "ip_range")), "10.0.0.0/16");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(net, "subnets"), 1), "type")),
                     "vswitch");
    json_decref(nets);
    free(out);
    ok_contains("k8s", "network", "list", (char *)NULL);

    /* delete */
    ok_contains("Load Balancer web deleted", "load-balancer", "delete", "web", (char *)NULL);
    list_names("", names, sizeof(names));
    ck_assert_str_eq(names, "old-release");
    rc = hcloud(&out, "load-balancer", "describe", "web", (char *)NULL);
    ck_assert_msg(rc != 0 && strstr(out, "not found"), "describe after delete: %s", out);
    free(out);

    /* The fake logged the CLI as the client identity. */
    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&F, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
    json_t *e = json_array_get(json_object_get(r.body, "requests"), 0);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(e, "identity")), "hcloud-go/"));
    ck_assert_int_ge(
        json_integer_value(json_object_get(json_object_get(r.body, "counts"),
                                           "POST /v1/load_balancers/{id}/actions/add_target")),
        3);
    hzt_resp_free(&r);
}
END_TEST

START_TEST(test_cli_sees_api_errors)
{
    char *out = NULL;
    int rc = hcloud(&out, "load-balancer", "create", "--name", "old-release", "--type", "lb11",
                    "--location", "hel1", (char *)NULL);
    ck_assert_msg(rc != 0 && strstr(out, "uniqueness_error"), "duplicate: %s", out);
    free(out);
    rc = hcloud(&out, "load-balancer", "add-service", "old-release", "--protocol", "tcp",
                "--listen-port", "80", "--destination-port", "1", (char *)NULL);
    ck_assert_int_eq(rc, 0);
    free(out);
    rc = hcloud(&out, "load-balancer", "add-service", "old-release", "--protocol", "tcp",
                "--listen-port", "80", "--destination-port", "2", (char *)NULL);
    ck_assert_msg(rc != 0 && strstr(out, "source_port_already_used"), "dup port: %s", out);
    free(out);
    rc = hcloud(&out, "load-balancer", "enable-protection", "old-release", "delete", (char *)NULL);
    ck_assert_msg(rc == 0, "enable-protection: %s", out);
    free(out);
    rc = hcloud(&out, "load-balancer", "delete", "old-release", (char *)NULL);
    ck_assert_msg(rc != 0 && strstr(out, "protected"), "protected: %s", out);
    free(out);
    /* An injected action failure surfaces as the action's error. */
    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&F, "POST", "/_admin/faults", NULL, NULL,
                             "{\"fail_actions\":{\"count\":1,\"code\":\"robot_unavailable\","
                             "\"message\":\"robot down\"}}",
                             &r),
                     0);
    hzt_resp_free(&r);
    rc = hcloud(&out, "load-balancer", "change-algorithm", "old-release", "--algorithm-type",
                "least_connections", (char *)NULL);
    ck_assert_msg(rc != 0 && strstr(out, "robot down"), "action failure: %s", out);
    free(out);
    /* A wrong token is refused. */
    char *argv[] = {"hcloud", "load-balancer", "list", NULL};
    char *bad_env[] = {env_endpoint, "HCLOUD_TOKEN=wrong", env_home, env_config, NULL};
    rc = tu_run(argv, bad_env, &out, 30000);
    ck_assert_msg(rc != 0 && strstr(out, "unauthorized"), "bad token: %s", out);
    free(out);
}
END_TEST

/* hcloud <NULL-terminated args> must fail with text containing want. */
static void
fails_with(const char *want, ...)
{
    char *out = NULL;
    va_list ap;
    va_start(ap, want);
    int rc = hcloud_v(&out, ap);
    va_end(ap);
    ck_assert_msg(rc != 0 && strstr(out, want), "hcloud: rc %d, want failure '%s' in:\n%s", rc,
                  want, out);
    free(out);
}

/* describe -o json of a certificate (new JSON). */
static json_t *
describe_cert(const char *name)
{
    char *out = NULL;
    int rc = hcloud(&out, "certificate", "describe", name, "-o", "json", (char *)NULL);
    ck_assert_msg(rc == 0, "certificate describe: %s", out);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_msg(j != NULL, "describe output is not JSON: %s", out);
    free(out);
    return j;
}

/* Path of a generated certificate file in the fake's directory. */
static char *
cert_file(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", F.dir, name);
    return buf;
}

START_TEST(test_cli_certificates_and_https)
{
    char crt[600], key[600], other[600], old_crt[600], old_key[600];
    struct hzt_resp r;
    ck_assert_int_eq(hzt_gen_certs(F.dir), 0);
    cert_file("good.crt", crt, sizeof(crt));
    cert_file("good.key", key, sizeof(key));
    cert_file("other.key", other, sizeof(other));
    cert_file("expired.crt", old_crt, sizeof(old_crt));
    cert_file("expired.key", old_key, sizeof(old_key));

    /* certificate create: uploaded, then the refused ones */
    ok_contains("Certificate 1 created", "certificate", "create", "--name", "web", "--cert-file",
                crt, "--key-file", key, (char *)NULL);
    fails_with("invalid_input", "certificate", "create", "--name", "mismatch", "--cert-file", crt,
               "--key-file", other, (char *)NULL);
    fails_with("invalid_input", "certificate", "create", "--name", "old", "--cert-file", old_crt,
               "--key-file", old_key, (char *)NULL);
    fails_with("uniqueness_error", "certificate", "create", "--name", "web", "--cert-file", crt,
               "--key-file", key, (char *)NULL);

    /* managed: issued, then failed as the fake's DNS check says */
    ok_contains("Certificate 2 created", "certificate", "create", "--name", "site", "--type",
                "managed", "--domain", "example.org", "--domain", "www.example.org", (char *)NULL);
    ck_assert_int_eq(hzt_req(&F, "POST", "/_admin/faults", NULL, NULL,
                             "{\"fail_issuance\":{\"domains\":[\"bad.example.org\"]}}", &r),
                     0);
    ck_assert_int_eq(r.status, 200);
    hzt_resp_free(&r);
    fails_with("DNS validation failed for bad.example.org", "certificate", "create", "--name",
               "failing", "--type", "managed", "--domain", "bad.example.org", (char *)NULL);
    ok_contains("Issuance: failed", "certificate", "describe", "failing", (char *)NULL);
    ok_contains("Issuance: completed", "certificate", "describe", "site", (char *)NULL);

    /* list, describe */
    ok_contains("site", "certificate", "list", (char *)NULL);
    char *out = NULL;
    ck_assert_int_eq(hcloud(&out, "certificate", "list", "-o", "json", (char *)NULL), 0);
    json_t *all = json_loads(out, 0, NULL);
    ck_assert_msg(json_array_size(all) == 3, "certificate list: %s", out);
    json_decref(all);
    free(out);
    json_t *c = describe_cert("web");
    ck_assert_str_eq(json_string_value(json_object_get(c, "type")), "uploaded");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(c, "domain_names"), 1)),
                     "www.example.com");
    ck_assert_uint_eq(strlen(json_string_value(json_object_get(c, "fingerprint"))), 95);
    json_decref(c);

    /* add-service --protocol https with a certificate and the redirect */
    ok_contains("Service was added", "load-balancer", "add-service", "old-release", "--protocol",
                "https", "--listen-port", "443", "--destination-port", "30443",
                "--http-certificates", "1", "--http-redirect-http", (char *)NULL);
    json_t *lb = describe("old-release");
    json_t *svc = json_array_get(json_object_get(lb, "services"), 0);
    json_t *http = json_object_get(svc, "http");
    ck_assert_str_eq(json_string_value(json_object_get(svc, "protocol")), "https");
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(http, "certificates"), 0)),
                     1);
    ck_assert(json_is_true(json_object_get(http, "redirect_http")));
    json_decref(lb);
    ok_contains("old-release", "certificate", "describe", "web", (char *)NULL);
    c = describe_cert("web");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_array_get(json_object_get(c, "used_by"), 0), "id")),
        3);
    json_decref(c);
    fails_with("certificate still in use", "certificate", "delete", "web", (char *)NULL);

    /* update-service: sticky sessions, cookie, a second certificate */
    ok_contains("was updated", "load-balancer", "update-service", "old-release", "--listen-port",
                "443", "--http-sticky-sessions", "--http-cookie-name", "SESS",
                "--http-cookie-lifetime", "10m", "--http-certificates", "1,2", (char *)NULL);
    lb = describe("old-release");
    http = json_object_get(json_array_get(json_object_get(lb, "services"), 0), "http");
    ck_assert(json_is_true(json_object_get(http, "sticky_sessions")));
    ck_assert_str_eq(json_string_value(json_object_get(http, "cookie_name")), "SESS");
    ck_assert_int_eq(json_integer_value(json_object_get(http, "cookie_lifetime")), 600);
    ck_assert_uint_eq(json_array_size(json_object_get(http, "certificates")), 2);
    json_decref(lb);

    /* what the API refuses reaches the CLI user */
    fails_with("invalid_input", "load-balancer", "add-service", "old-release", "--protocol", "http",
               "--listen-port", "8080", "--http-certificates", "1", (char *)NULL);
    fails_with("not_found", "load-balancer", "add-service", "old-release", "--protocol", "https",
               "--listen-port", "8443", "--http-certificates", "99", (char *)NULL);
    fails_with("source_port_already_used", "load-balancer", "add-service", "old-release",
               "--protocol", "tcp", "--listen-port", "80", "--destination-port", "30080",
               (char *)NULL);
    fails_with("invalid_input", "load-balancer", "update-service", "old-release", "--listen-port",
               "443", "--protocol", "http", (char *)NULL);

    /* enable-protection */
    ok_contains("Resource protection enabled", "load-balancer", "enable-protection", "old-release",
                "delete", (char *)NULL);
    lb = describe("old-release");
    ck_assert(json_is_true(json_object_get(json_object_get(lb, "protection"), "delete")));
    json_decref(lb);
    fails_with("protected", "load-balancer", "delete", "old-release", (char *)NULL);

    /* once no service uses it, the certificate can be deleted */
    ok_contains("deleted", "load-balancer", "delete-service", "old-release", "--listen-port", "443",
                (char *)NULL);
    ok_contains("certificate web deleted", "certificate", "delete", "web", (char *)NULL);
    fails_with("not found", "certificate", "describe", "web", (char *)NULL);
}
END_TEST

int
main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("hetzner-cli");
    TCase *tc = tcase_create("cli");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_robotlb_user_commands);
    tcase_add_test(tc, test_cli_sees_api_errors);
    tcase_add_test(tc, test_cli_certificates_and_https);
    suite_add_tcase(s, tc);
    int rc = tu_run_suite(s);
    curl_global_cleanup();
    return rc;
}
