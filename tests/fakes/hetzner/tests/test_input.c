/* The fake Hetzner API refuses the input the real one refuses (input.c):
 * unknown body fields, values of the wrong type, a field on an action that
 * takes none and unknown query parameters, each a 400 invalid_input whose
 * details.fields name every offender, and nothing is changed by a refused
 * request. */
#include <stdio.h>
#include <string.h>

#include "api_common.h"

/* "name=message;..." of the answer's details.fields, into buf. */
static const char *
fields_of(const struct hzt_resp *r, char *buf, size_t len)
{
    json_t *fields =
        json_object_get(json_object_get(json_object_get(r->body, "error"), "details"), "fields");
    json_t *f;
    size_t i, n = 0;

    buf[0] = '\0';
    json_array_foreach(fields, i, f)
    {
        const char *msg = json_string_value(json_array_get(json_object_get(f, "messages"), 0));
        if (n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s=%s", i ? ";" : "",
                                  json_string_value(json_object_get(f, "name")), msg ? msg : "");
    }
    return buf;
}

/* method path body must get 400 invalid_input naming exactly want. */
static void
expect_fields(const char *method, const char *path, const char *body, const char *want)
{
    struct hzt_resp r;
    char got[1024];

    req(method, path, body, &r);
    ck_assert_msg(r.status == 400, "%s %s: HTTP %ld %s", method, path, r.status, r.raw);
    ck_assert_str_eq(hzt_err(&r), "invalid_input");
    ck_assert_msg(!strcmp(fields_of(&r, got, sizeof(got)), want), "%s %s: fields [%s], want [%s]",
                  method, path, got, want);
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(json_object_get(r.body, "error"), "message")),
               "invalid input in field"));
    hzt_resp_free(&r);
}

static long
lb_count(void)
{
    struct hzt_resp r;
    long n;
    req("GET", "/load_balancers", NULL, &r);
    ck_assert_int_eq(r.status, 200);
    n = (long)json_array_size(json_object_get(r.body, "load_balancers"));
    hzt_resp_free(&r);
    return n;
}

START_TEST(unknown_body_fields_are_named_and_nothing_is_created)
{
    long before = lb_count();

    expect_fields("POST", "/load_balancers",
                  "{\"name\":\"x\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\","
                  "\"nme\":\"y\",\"services\":[{\"protocol\":\"tcp\",\"listen_port\":80,"
                  "\"destination_port\":30080,\"health_check\":{\"protocol\":\"tcp\","
                  "\"port\":30080,\"intervall\":15}}]}",
                  "nme=unknown field;services[0].health_check.intervall=unknown field");
    ck_assert_int_eq(lb_count(), before);
    expect_fields("PUT", "/load_balancers/1", "{\"name\":\"renamed\",\"protection\":{}}",
                  "protection=unknown field");
    expect_fields("POST", "/load_balancers/1/actions/add_service",
                  "{\"protocol\":\"tcp\",\"listen_port\":81,\"destination_port\":30081,"
                  "\"proxy_protocol\":true}",
                  "proxy_protocol=unknown field");
    /* remove_target has no use_private_ip (hcloud-go's request has none). */
    expect_fields("POST", "/load_balancers/1/actions/remove_target",
                  "{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.10\"},\"use_private_ip\":true}",
                  "use_private_ip=unknown field");
}
END_TEST

START_TEST(wrong_types_are_named)
{
    expect_fields("POST", "/load_balancers/1/actions/add_target",
                  "{\"type\":\"ip\",\"ip\":{\"ip\":5},\"use_private_ip\":\"yes\"}",
                  "ip.ip=must be a string;use_private_ip=must be a boolean");
    expect_fields("POST", "/load_balancers",
                  "{\"name\":\"x\",\"load_balancer_type\":true,\"location\":\"hel1\","
                  "\"labels\":{\"a\":1},\"targets\":{}}",
                  "load_balancer_type=must be an ID (integer) or a name (string);"
                  "labels=must be an object of string values;targets=must be a list");
    expect_fields("POST", "/load_balancers/1/actions/attach_to_network", "{\"network\":\"7\"}",
                  "network=must be an integer");
    expect_fields("POST", "/load_balancers/1/actions/update_service",
                  "{\"listen_port\":80,\"health_check\":{\"retries\":2.5}}",
                  "health_check.retries=must be an integer");
}
END_TEST

START_TEST(a_field_on_an_action_without_a_body_is_refused)
{
    struct hzt_resp r;
    char st[32];

    expect_fields("POST", "/load_balancers/1/actions/enable_public_interface", "{\"force\":true}",
                  "force=unknown field");
    expect_fields("POST", "/load_balancers/1/actions/disable_public_interface",
                  "{\"public_interface\":false}", "public_interface=unknown field");
    /* The empty object and no body at all are what clients send. */
    req("POST", "/load_balancers/1/actions/enable_public_interface", "{}", &r);
    ck_assert_msg(r.status == 201, "HTTP %ld %s", r.status, r.raw);
    long id = (long)json_integer_value(json_object_get(json_object_get(r.body, "action"), "id"));
    hzt_resp_free(&r);
    ck_assert_int_eq(hzt_wait_action(&F, TOK, id, st, sizeof(st), 5000), 0);
    req("POST", "/load_balancers/1/actions/enable_public_interface", NULL, &r);
    ck_assert_msg(r.status == 201, "HTTP %ld %s", r.status, r.raw);
    hzt_resp_free(&r);
}
END_TEST

START_TEST(unknown_query_parameters_are_named)
{
    expect_fields("GET", "/load_balancers?nam=lb-a", NULL, "nam=unknown query parameter");
    expect_fields("GET", "/actions?id=1&type=x&per_page=5", NULL, "type=unknown query parameter");
    expect_fields("GET", "/load_balancers/1?name=lb-a", NULL, "name=unknown query parameter");
    expect_fields("POST", "/load_balancers/1/actions/change_algorithm?dry_run=1",
                  "{\"type\":\"least_connections\"}", "dry_run=unknown query parameter");
    expect_fields("GET", "/load_balancer_types?label_selector=a", NULL,
                  "label_selector=unknown query parameter");
}
END_TEST

int
main(int argc, char **argv)
{
    const TTest *const tests[] = {
        unknown_body_fields_are_named_and_nothing_is_created,
        wrong_types_are_named,
        a_field_on_an_action_without_a_body_is_refused,
        unknown_query_parameters_are_named,
    };
    return api_run(argc, argv, "hetzner-input", tests, sizeof(tests) / sizeof(tests[0]));
}
