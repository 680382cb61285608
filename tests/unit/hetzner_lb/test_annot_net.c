/*
 * hcloud-cloud-controller-manager's network and status annotations
 * (modules/mod_hetzner_lb/hz_annot.c): each read, each validated; a bad
 * value is named in the one message of the set and leaves nothing parsed.
 */
#include <errno.h>
#include <stdio.h>

#include "common.h"
#include "testutil.h"

/* Parse kv; expect -EINVAL and a message holding every needle. */
static void
expect_refused(const char *const *kv, const char *n1, const char *n2)
{
    struct hz_annot a;
    char err[512];
    ck_assert_msg(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)) == -EINVAL,
                  "%s=%s accepted", kv[0], kv[1]);
    ck_assert_msg(strstr(err, n1) != NULL, "message lacks \"%s\": %s", n1, err);
    ck_assert_msg(!n2 || strstr(err, n2) != NULL, "message lacks \"%s\": %s", n2, err);
    hz_annot_clear(&a);
}

/* "hostname: Specifies the hostname of the Load Balancer. This will be used
 * as ingress address instead of the Load Balancer IP addresses": a DNS name
 * the API server takes in a status; an IP or a bad name is refused by name. */
START_TEST(hostname_is_a_dns_name_not_an_address)
{
    const char *good[] = {"lb.example.com", "a", "x-1.y-2.z", "1lb.example.com"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        const char *kv[] = {"load-balancer.hetzner.cloud/hostname", good[i], NULL};
        struct hz_annot a;
        char err[512];
        ck_assert_msg(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)) == 0, "%s: %s",
                      good[i], err);
        ck_assert_str_eq(a.hostname, good[i]);
        hz_annot_clear(&a);
        ck_assert_ptr_null(a.hostname);
    }
    const char *bad[][2] = {
        {"10.1.2.3", "IP address"},     {"2001:db8::1", "IP address"}, {"", "1 to 253"},
        {"Lb.example.com", "DNS name"}, {"lb..example", "DNS name"},   {"-lb.example", "DNS name"},
        {"lb-.example", "DNS name"},    {"lb.example.", "DNS name"},   {"lb example", "DNS name"},
        {"lb_1.example", "DNS name"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *kv[] = {"load-balancer.hetzner.cloud/hostname", bad[i][0], NULL};
        expect_refused(kv, "load-balancer.hetzner.cloud/hostname", bad[i][1]);
    }
    char longest[300];
    memset(longest, 'a', sizeof(longest));
    for (size_t i = 63; i < 253; i += 64)
        longest[i] = '.';
    longest[253] = '\0';
    const char *kv[] = {"load-balancer.hetzner.cloud/hostname", longest, NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    hz_annot_clear(&a);
    longest[253] = 'a';
    longest[254] = '\0';
    expect_refused(kv, "load-balancer.hetzner.cloud/hostname", "1 to 253");
}
END_TEST

/* "disable-public-network: Disables the public network of the Hetzner
 * Cloud Load Balancer" (a Go boolean): robotlb's lb-public-interface
 * upside down, in the same field; both alike are taken, a disagreement
 * names both. */
START_TEST(disable_public_network_is_lb_public_interface_upside_down)
{
    const char *cases[][5] = {
        {"load-balancer.hetzner.cloud/disable-public-network", "true", NULL},
        {"load-balancer.hetzner.cloud/disable-public-network", "1", "robotlb/lb-public-interface",
         "false", NULL},
        {"load-balancer.hetzner.cloud/disable-public-network", "False", NULL},
    };
    const int want[] = {0, 0, 1};
    const char *key[] = {"load-balancer.hetzner.cloud/disable-public-network",
                         "load-balancer.hetzner.cloud/disable-public-network",
                         "load-balancer.hetzner.cloud/disable-public-network"};
    for (size_t i = 0; i < 3; i++) {
        struct hz_annot a;
        char err[512];
        ck_assert_msg(hz_annot_parse(kv_get, (void *)cases[i], &a, err, sizeof(err)) == 0, "%s",
                      err);
        ck_assert_int_eq(a.public_iface, want[i]);
        ck_assert_str_eq(a.public_key, key[i]);
        hz_annot_clear(&a);
    }
    const char *r[] = {"robotlb/lb-public-interface", "false", NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)r, &a, err, sizeof(err)), 0);
    ck_assert_str_eq(a.public_key, "robotlb/lb-public-interface");
    hz_annot_clear(&a);
    const char *conflict[] = {"robotlb/lb-public-interface", "true",
                              "load-balancer.hetzner.cloud/disable-public-network", "true", NULL};
    expect_refused(conflict, "robotlb/lb-public-interface",
                   "load-balancer.hetzner.cloud/disable-public-network");
    const char *notbool[] = {"load-balancer.hetzner.cloud/disable-public-network", "yes", NULL};
    expect_refused(notbool, "load-balancer.hetzner.cloud/disable-public-network", "\"yes\"");
}
END_TEST

/* A private-only balancer needs a network; the message names the
 * annotation that asked for it, whichever family. */
START_TEST(a_private_only_balancer_without_a_network_names_its_annotation)
{
    struct hz_svc s = web_svc();
    struct hz_config c = default_config();
    const char *kv[] = {"load-balancer.hetzner.cloud/disable-public-network", "true", NULL};
    struct hz_annot a;
    struct hz_desired d;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "load-balancer.hetzner.cloud/disable-public-network"));
    ck_assert_ptr_nonnull(strstr(err, "needs a network"));
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_int_eq(d.public_iface, 0);
    hz_desired_clear(&d);
    hz_annot_clear(&a);
}
END_TEST

/* "private-ipv4: Specifies the IPv4 address to assign to the load balancer
 * in the private network": robotlb's lb-private-ip; the same address in
 * both is taken, two different ones are named together. */
START_TEST(private_ipv4_is_lb_private_ip)
{
    const char *h[] = {"load-balancer.hetzner.cloud/private-ipv4", "10.0.0.30", NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)h, &a, err, sizeof(err)), 0);
    ck_assert_str_eq(a.private_ip, "10.0.0.30");
    hz_annot_clear(&a);
    const char *alike[] = {"robotlb/lb-private-ip", "10.0.0.30",
                           "load-balancer.hetzner.cloud/private-ipv4", "10.0.0.30", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)alike, &a, err, sizeof(err)), 0);
    ck_assert_str_eq(a.private_ip, "10.0.0.30");
    hz_annot_clear(&a);
    const char *conflict[] = {"robotlb/lb-private-ip", "10.0.0.30",
                              "load-balancer.hetzner.cloud/private-ipv4", "10.0.0.31", NULL};
    expect_refused(conflict, "robotlb/lb-private-ip", "load-balancer.hetzner.cloud/private-ipv4");
    const char *v6[] = {"load-balancer.hetzner.cloud/private-ipv4", "fd00::1", NULL};
    expect_refused(v6, "load-balancer.hetzner.cloud/private-ipv4", "not an IPv4 address");
}
END_TEST

/* "disable-private-ingress: Disables the use of the private network for
 * ingress" and "use-private-ip: ... use the private IP for Load Balancer
 * server targets", Go booleans. use-private-ip "true" needs a network (as
 * hccm refuses it without one); a balancer without its public interface
 * whose private ingress is disabled would show no address: both named. */
START_TEST(private_ingress_and_use_private_ip_are_go_booleans)
{
    struct hz_svc s = web_svc();
    struct hz_config c = default_config();
    const char *kv[] = {"load-balancer.hetzner.cloud/disable-private-ingress", "false",
                        "load-balancer.hetzner.cloud/use-private-ip", "T", NULL};
    struct hz_annot a;
    struct hz_desired d;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.private_ingress, 1);
    ck_assert_int_eq(a.use_private_ip, 1);
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "load-balancer.hetzner.cloud/use-private-ip"));
    ck_assert_ptr_nonnull(strstr(err, "network"));
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    hz_desired_clear(&d);
    hz_annot_clear(&a);
    ck_assert_int_eq(a.private_ingress, -1);
    ck_assert_int_eq(a.use_private_ip, -1);

    const char *neither[] = {"load-balancer.hetzner.cloud/disable-private-ingress", "true",
                             "load-balancer.hetzner.cloud/disable-public-network", "true", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)neither, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.private_ingress, 0);
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "load-balancer.hetzner.cloud/disable-private-ingress"));
    ck_assert_ptr_nonnull(strstr(err, "load-balancer.hetzner.cloud/disable-public-network"));
    hz_annot_clear(&a);

    const char *bad1[] = {"load-balancer.hetzner.cloud/disable-private-ingress", "yes", NULL};
    expect_refused(bad1, "load-balancer.hetzner.cloud/disable-private-ingress", "\"yes\"");
    const char *bad2[] = {"load-balancer.hetzner.cloud/use-private-ip", "enabled", NULL};
    expect_refused(bad2, "load-balancer.hetzner.cloud/use-private-ip", "\"enabled\"");
}
END_TEST

/* "ipv4-rdns", "ipv6-rdns": hccm sets the reverse DNS of the balancer's
 * public IPv4 and IPv6 to them through change_dns_ptr, only when it
 * differs; a Service without them leaves it as it is. */
START_TEST(rdns_is_set_only_when_it_differs)
{
    struct hz_svc s = web_svc();
    struct hz_config c = default_config();
    const char *kv[] = {"load-balancer.hetzner.cloud/ipv4-rdns", "lb.example.com",
                        "load-balancer.hetzner.cloud/ipv6-rdns", "lb6.example.com", NULL};
    struct hz_annot an;
    struct hz_desired d;
    struct hz_plan p;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &an, err, sizeof(err)), 0);
    ck_assert_str_eq(an.rdns4, "lb.example.com");
    ck_assert_str_eq(an.rdns6, "lb6.example.com");
    ck_assert_int_eq(hz_desired_build(&c, &an, &s, NULL, 0, &d, err, sizeof(err)), 0);
    /* the balancer as Hetzner lists it: IPv4's reverse DNS already right */
    const char *lbs[] = {
        "\"ipv4\":{\"ip\":\"198.51.100.1\",\"dns_ptr\":\"lb.example.com\"},"
        "\"ipv6\":{\"ip\":\"2001:db8:1::1\",\"dns_ptr\":\"\"}",
        "\"ipv4\":{\"ip\":\"198.51.100.1\",\"dns_ptr\":\"lb.example.com\"},"
        "\"ipv6\":{\"ip\":\"2001:db8:1::1\",\"dns_ptr\":\"lb6.example.com\"}",
    };
    for (size_t i = 0; i < 2; i++) {
        char buf[1024];
        struct hz_actual a;
        snprintf(buf, sizeof(buf),
                 "{\"id\":5,\"name\":\"web.shop\",\"labels\":{\"robotlb/service-uid\":\"uid-1\"},"
                 "\"load_balancer_type\":{\"name\":\"lb11\"},\"location\":{\"name\":\"hel1\"},"
                 "\"algorithm\":{\"type\":\"least_connections\"},\"public_net\":{\"enabled\":true,"
                 "%s},\"services\":[{\"protocol\":\"tcp\",\"listen_port\":80,"
                 "\"destination_port\":30080,\"proxyprotocol\":false,\"health_check\":{"
                 "\"protocol\":\"tcp\",\"port\":30080,\"interval\":15,\"timeout\":10,"
                 "\"retries\":3}}]}",
                 lbs[i]);
        json_t *j = parse_json(buf);
        ck_assert_int_eq(hz_actual_parse(j, &a), 0);
        json_decref(j);
        ck_assert_int_eq(hz_plan_build(&d, &a, 0, &p), 0);
        if (i == 0) {
            ck_assert_uint_eq(p.n, 1);
            ck_assert_int_eq(p.ops[0].kind, HZ_OP_CHANGE_DNS_PTR);
            ck_assert_str_eq(p.ops[0].path, "/load_balancers/5/actions/change_dns_ptr");
            ck_assert_str_eq(json_string_value(json_object_get(p.ops[0].body, "ip")),
                             "2001:db8:1::1");
            ck_assert_str_eq(json_string_value(json_object_get(p.ops[0].body, "dns_ptr")),
                             "lb6.example.com");
        } else {
            ck_assert_uint_eq(p.n, 0); /* the steady state sends nothing */
        }
        hz_plan_clear(&p);
        /* without the annotations the reverse DNS is left as it is */
        struct hz_desired none;
        struct hz_annot empty;
        memset(&empty, 0, sizeof(empty));
        hz_annot_clear(&empty);
        ck_assert_int_eq(hz_desired_build(&c, &empty, &s, NULL, 0, &none, err, sizeof(err)), 0);
        ck_assert_int_eq(hz_plan_build(&none, &a, 0, &p), 0);
        ck_assert_uint_eq(p.n, 0);
        hz_plan_clear(&p);
        hz_desired_clear(&none);
        hz_actual_clear(&a);
    }
    hz_desired_clear(&d);
    hz_annot_clear(&an);
    const char *bad[] = {"load-balancer.hetzner.cloud/ipv6-rdns", "not a name", NULL};
    expect_refused(bad, "load-balancer.hetzner.cloud/ipv6-rdns", "DNS name");
}
END_TEST

/* "private-subnet-ip-range: Specifies the subnet the load balancer's
 * private IP is taken from" (an IPv4 CIDR, Go's net.ParseCIDR): only with
 * a network, where it becomes attach_to_network's ip_range and keeps the
 * create from carrying the network (the attach follows it); a private IP
 * outside it, which Hetzner refuses, is named first; a malformed one is
 * named and leaves nothing parsed. */
START_TEST(private_subnet_ip_range_goes_into_the_attach)
{
    struct hz_svc s = web_svc();
    struct hz_config c = default_config();
    const char *kv[] = {"load-balancer.hetzner.cloud/private-subnet-ip-range", "10.0.1.0/24", NULL};
    struct hz_annot a;
    struct hz_desired d;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    ck_assert_str_eq(a.private_subnet, "10.0.1.0/24");
    /* without a network it does nothing, as the private IP */
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_ptr_null(d.private_subnet);
    hz_desired_clear(&d);
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_str_eq(d.private_subnet, "10.0.1.0/24");
    json_t *create = hz_create_body(&d, 7, 1);
    ck_assert_ptr_nonnull(create);
    ck_assert_ptr_null(json_object_get(create, "network"));
    ck_assert(json_is_true(json_object_get(create, "public_interface")));
    json_decref(create);
    json_t *b = hz_attach_body(&d, 7);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(json_string_value(json_object_get(b, "ip_range")), "10.0.1.0/24");
    ck_assert_ptr_null(json_object_get(b, "ip"));
    json_decref(b);
    hz_desired_clear(&d);
    hz_annot_clear(&a);
    ck_assert_ptr_null(a.private_subnet);

    /* with a private IP inside it: both in the attach */
    const char *both[] = {"load-balancer.hetzner.cloud/private-subnet-ip-range", "10.0.1.9/24",
                          "load-balancer.hetzner.cloud/private-ipv4", "10.0.1.30", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)both, &a, err, sizeof(err)), 0);
    ck_assert_str_eq(a.private_subnet, "10.0.1.0/24");
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    b = hz_attach_body(&d, 7);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(json_string_value(json_object_get(b, "ip")), "10.0.1.30");
    ck_assert_str_eq(json_string_value(json_object_get(b, "ip_range")), "10.0.1.0/24");
    json_decref(b);
    hz_desired_clear(&d);
    hz_annot_clear(&a);

    const char *outside[] = {"load-balancer.hetzner.cloud/private-subnet-ip-range", "10.0.1.0/24",
                             "robotlb/lb-private-ip", "10.0.0.30", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)outside, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "load-balancer.hetzner.cloud/private-subnet-ip-range"));
    ck_assert_ptr_nonnull(strstr(err, "10.0.0.30"));
    hz_annot_clear(&a);

    const char *bad[] = {"10.0.1.0",  "10.0.1.0/33", "10.0.1.0/", "ten.0.1.0/24",
                         "fd00::/64", "10.0.1.0/2x", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *k[] = {"load-balancer.hetzner.cloud/private-subnet-ip-range", bad[i], NULL};
        expect_refused(k, "load-balancer.hetzner.cloud/private-subnet-ip-range", "IPv4 CIDR");
    }
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb annotations (hccm network and status)");
    TCase *tc = tcase_create("annot_net");
    tcase_add_test(tc, hostname_is_a_dns_name_not_an_address);
    tcase_add_test(tc, disable_public_network_is_lb_public_interface_upside_down);
    tcase_add_test(tc, a_private_only_balancer_without_a_network_names_its_annotation);
    tcase_add_test(tc, private_ipv4_is_lb_private_ip);
    tcase_add_test(tc, private_ingress_and_use_private_ip_are_go_booleans);
    tcase_add_test(tc, rdns_is_set_only_when_it_differs);
    tcase_add_test(tc, private_subnet_ip_range_goes_into_the_attach);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
