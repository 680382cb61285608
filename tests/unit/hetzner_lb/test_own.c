/*
 * prismlb's own annotations (modules/mod_hetzner_lb: hz_annot.c, hz_model.c,
 * hz_plan.c), which neither hccm nor robotlb has: delete protection set
 * and cleared from the Service; the PROXY protocol on the listed ports.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "testutil.h"

/* What Service shop/web (uid-1) asks for with the annotations kv (a
 * NULL-terminated key, value list), targets 10.0.1.10, network k8s. */
static void
desired_with(struct hz_desired *d, const char *const *kv)
{
    static const char *const ips[] = {"10.0.1.10"};
    struct hz_svc s = web_svc();
    struct hz_config c = default_config();
    struct hz_annot a;
    char err[256];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, ips, 1, d, err, sizeof(err)), 0);
    hz_annot_clear(&a);
}

/* Balancer 5 of uid-1 matching desired_with in all but protection.delete
 * (protect). */
static void
actual_protected(struct hz_actual *a, int protect)
{
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"id\":5,\"name\":\"web.shop\",\"labels\":{\"robotlb/service-uid\":\"uid-1\"},"
             "\"load_balancer_type\":{\"name\":\"lb11\"},\"location\":{\"name\":\"hel1\"},"
             "\"algorithm\":{\"type\":\"least_connections\"},"
             "\"private_net\":[{\"network\":7,\"ip\":\"10.0.0.5\"}],"
             "\"protection\":{\"delete\":%s},"
             "\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.10\"}}],"
             "\"services\":[{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080,"
             "\"proxyprotocol\":false,\"health_check\":{\"protocol\":\"tcp\",\"port\":30080,"
             "\"interval\":15,\"timeout\":10,\"retries\":3}}]}",
             protect ? "true" : "false");
    json_t *j = parse_json(buf);
    ck_assert_int_eq(hz_actual_parse(j, a), 0);
    json_decref(j);
}

/* The plan of kv against a balancer protected or not: how many writes,
 * and the body of the change_protection among them ("" when none). */
static size_t
plan_of(const char *const *kv, int protect, char *body, size_t len)
{
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    size_t n;
    desired_with(&d, kv);
    actual_protected(&a, protect);
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    body[0] = '\0';
    for (size_t i = 0; i < p.n; i++) {
        if (p.ops[i].kind != HZ_OP_PROTECT)
            continue;
        char *t = json_dumps(p.ops[i].body, JSON_COMPACT);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(p.ops[i].method, "POST");
        ck_assert_str_eq(p.ops[i].path, "/load_balancers/5/actions/change_protection");
        snprintf(body, len, "%s", t);
        free(t);
    }
    n = p.n;
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
    return n;
}

static const char *const protect_true[] = {"prismlb.io/delete-protection", "true", NULL};
static const char *const protect_false[] = {"prismlb.io/delete-protection", "false", NULL};
static const char *const protect_absent[] = {NULL};

/* A Go boolean, as hccm's: "1", "t", "TRUE" are true, "0", "F" false; any
 * other value is named; absent leaves the balancer's protection alone. */
START_TEST(delete_protection_is_a_go_boolean)
{
    static const char *const yes[] = {"true", "1", "t", "TRUE", "True"};
    static const char *const no[] = {"false", "0", "f", "FALSE"};
    struct hz_annot a;
    char err[512];
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        const char *kv[] = {"prismlb.io/delete-protection", yes[i], NULL};
        ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
        ck_assert_int_eq(a.delete_protection, 1);
        hz_annot_clear(&a);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        const char *kv[] = {"prismlb.io/delete-protection", no[i], NULL};
        ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
        ck_assert_int_eq(a.delete_protection, 0);
        hz_annot_clear(&a);
    }
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)protect_absent, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.delete_protection, -1);
    hz_annot_clear(&a);
    const char *bad[] = {"prismlb.io/delete-protection", "yes", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)bad, &a, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "prismlb.io/delete-protection: \"yes\" is neither true nor false");
    ck_assert_int_eq(a.delete_protection, -1);
}
END_TEST

/* Set when the list shows it off, cleared when it shows it on: one
 * change_protection, and nothing else. */
START_TEST(delete_protection_is_set_and_cleared_when_it_differs)
{
    char body[256];
    ck_assert_uint_eq(plan_of(protect_true, 0, body, sizeof(body)), 1);
    ck_assert_str_eq(body, "{\"delete\":true}");
    ck_assert_uint_eq(plan_of(protect_false, 1, body, sizeof(body)), 1);
    ck_assert_str_eq(body, "{\"delete\":false}");
}
END_TEST

/* Steady state: no request; absent: the balancer's protection, whatever
 * it is, is left as it is. */
START_TEST(delete_protection_as_it_stands_or_absent_needs_no_request)
{
    char body[256];
    ck_assert_uint_eq(plan_of(protect_true, 1, body, sizeof(body)), 0);
    ck_assert_uint_eq(plan_of(protect_false, 0, body, sizeof(body)), 0);
    ck_assert_uint_eq(plan_of(protect_absent, 1, body, sizeof(body)), 0);
    ck_assert_uint_eq(plan_of(protect_absent, 0, body, sizeof(body)), 0);
}
END_TEST

/* The annotations kv refused: the message holds want. */
static void
expect_refused(const char *const *kv, const char *want)
{
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, want) != NULL, "\"%s\" lacks \"%s\"", err, want);
    ck_assert_ptr_null(a.proxy_ports);
}

/* A comma-separated list of ports 1-65535, blanks around each allowed, no
 * port twice; anything else is named. */
START_TEST(proxy_protocol_ports_is_a_list_of_ports)
{
    static const char *const kv[] = {"prismlb.io/proxy-protocol-ports", " 80, 443 ,8080", NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_uint_eq(a.nproxy_ports, 3);
    ck_assert_int_eq(a.proxy_ports[0], 80);
    ck_assert_int_eq(a.proxy_ports[1], 443);
    ck_assert_int_eq(a.proxy_ports[2], 8080);
    hz_annot_clear(&a);
    ck_assert_ptr_null(a.proxy_ports);
    static const char *const bad[] = {"",  "80,",   ",80",    "80,,443", "http",
                                      "0", "65536", "80;443", "-80",     "80 443"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *b[] = {"prismlb.io/proxy-protocol-ports", bad[i], NULL};
        expect_refused(b, "not a comma-separated list of ports");
    }
    const char *twice[] = {"prismlb.io/proxy-protocol-ports", "80,443,80", NULL};
    expect_refused(twice, "names port 80 twice");
}
END_TEST

/* Beside hccm's uses-proxyprotocol or robotlb's lb-proxy-mode (whatever
 * their value) the list is an InvalidAnnotation naming both. */
START_TEST(proxy_protocol_ports_beside_a_per_service_switch_names_both)
{
    const char *hccm[] = {"prismlb.io/proxy-protocol-ports", "80",
                          "load-balancer.hetzner.cloud/uses-proxyprotocol", "false", NULL};
    expect_refused(hccm, "prismlb.io/proxy-protocol-ports: \"80\" and "
                         "load-balancer.hetzner.cloud/uses-proxyprotocol are both given");
    const char *robotlb[] = {"prismlb.io/proxy-protocol-ports", "80", "robotlb/lb-proxy-mode",
                             "true", NULL};
    expect_refused(robotlb, "\"80\" and robotlb/lb-proxy-mode are both given");
}
END_TEST

/* Service shop/web (uid-1) with ports 80, 443 and 8080 (nodePorts
 * 30080, 30443, 30880), as the annotations kv ask: build's return, the
 * desired balancer into *d, the message into err. */
static int
three_ports(const char *const *kv, struct hz_desired *d, char *err, size_t len)
{
    static const struct hz_port p[] = {
        {"TCP", 80, 30080}, {"TCP", 443, 30443}, {"TCP", 8080, 30880}};
    static const char *const ips[] = {"10.0.1.10"};
    struct hz_svc s = {.uid = "uid-1", .name = "web", .ns = "shop", .ports = p, .nports = 3};
    struct hz_config c = default_config();
    struct hz_annot a;
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, len), 0);
    int rc = hz_desired_build(&c, &a, &s, ips, 1, d, err, len);
    hz_annot_clear(&a);
    return rc;
}

/* The listed ports' services send the PROXY header, the others do not;
 * the status's ipMode is Proxy, unless robotlb/ip-mode says otherwise. */
START_TEST(the_listed_ports_alone_get_the_proxy_protocol)
{
    static const char *const kv[] = {"prismlb.io/proxy-protocol-ports", "443,80", NULL};
    static const char *const vip[] = {"prismlb.io/proxy-protocol-ports", "443,80",
                                      "robotlb/ip-mode", "VIP", NULL};
    struct hz_desired d;
    char err[512];
    ck_assert_int_eq(three_ports(kv, &d, err, sizeof(err)), 0);
    ck_assert_uint_eq(d.nservices, 3);
    ck_assert_int_eq(d.services[0].listen, 80);
    ck_assert_int_eq(d.services[0].proxy, 1);
    ck_assert_int_eq(d.services[1].listen, 443);
    ck_assert_int_eq(d.services[1].proxy, 1);
    ck_assert_int_eq(d.services[2].listen, 8080);
    ck_assert_int_eq(d.services[2].proxy, 0);
    ck_assert_int_eq(d.ip_mode, HZ_IPMODE_PROXY);
    json_t *j = hz_service_json(&d, &d.services[2]);
    ck_assert(json_is_false(json_object_get(j, "proxyprotocol")));
    json_decref(j);
    j = hz_service_json(&d, &d.services[1]);
    ck_assert(json_is_true(json_object_get(j, "proxyprotocol")));
    json_decref(j);
    hz_desired_clear(&d);
    ck_assert_int_eq(three_ports(vip, &d, err, sizeof(err)), 0);
    ck_assert_int_eq(d.ip_mode, HZ_IPMODE_VIP);
    ck_assert_int_eq(d.services[0].proxy, 1);
    hz_desired_clear(&d);
}
END_TEST

/* A listed port no service of the balancer listens on (a typo, a UDP
 * port) is named, and nothing is built. */
START_TEST(a_listed_port_the_service_lacks_is_named)
{
    static const char *const kv[] = {"prismlb.io/proxy-protocol-ports", "80,8443", NULL};
    struct hz_desired d;
    char err[512];
    ck_assert_int_eq(three_ports(kv, &d, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "prismlb.io/proxy-protocol-ports: port 8443 is not a TCP port of the "
                          "Service with a nodePort, so no service of the balancer listens on it");
    ck_assert_uint_eq(d.nservices, 0);
}
END_TEST

static Suite *
own_suite(void)
{
    Suite *s = suite_create("hetzner_lb-own");
    TCase *tc = tcase_create("delete_protection");
    tcase_add_test(tc, delete_protection_is_a_go_boolean);
    tcase_add_test(tc, delete_protection_is_set_and_cleared_when_it_differs);
    tcase_add_test(tc, delete_protection_as_it_stands_or_absent_needs_no_request);
    suite_add_tcase(s, tc);
    tc = tcase_create("proxy_protocol_ports");
    tcase_add_test(tc, proxy_protocol_ports_is_a_list_of_ports);
    tcase_add_test(tc, proxy_protocol_ports_beside_a_per_service_switch_names_both);
    tcase_add_test(tc, the_listed_ports_alone_get_the_proxy_protocol);
    tcase_add_test(tc, a_listed_port_the_service_lacks_is_named);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(own_suite());
}
