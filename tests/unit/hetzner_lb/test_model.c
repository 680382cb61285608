/*
 * The desired balancer of a Service and the actual one parsed from the API
 * (modules/mod_hetzner_lb/hz_model.c), after the spec's paragraphs on
 * ports and on the example Service's options.
 */
#include <errno.h>
#include <stdio.h>

#include "common.h"
#include "hz_rec.h"
#include "testutil.h"

static const struct hz_port web_ports[] = {
    {"TCP", 80, 30080},
    {"TCP", 443, 30443},
};

static struct hz_svc
svc(const struct hz_port *p, size_t n)
{
    return (struct hz_svc){.uid = "uid-1", .name = "web", .ns = "shop", .ports = p, .nports = n};
}

static struct hz_annot
no_annot(void)
{
    struct hz_annot a;
    memset(&a, 0, sizeof(a));
    hz_annot_clear(&a);
    return a;
}

/* The settings' defaults: lb11 in hel1, least-connections, health check
 * every 15 s with 10 s timeout and 3 retries, no proxy protocol, VIP. */
START_TEST(without_annotations_the_balancer_takes_the_defaults_of_the_settings)
{
    struct hz_config c = default_config();
    struct hz_annot a = no_annot();
    struct hz_svc s = svc(web_ports, 2);
    struct hz_desired d;
    const char *ips[] = {"10.0.1.10", "10.0.1.11"};
    char err[256];
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, ips, 2, &d, err, sizeof(err)), 0);
    ck_assert_str_eq(d.name, "web.shop");
    ck_assert_str_eq(d.uid, "uid-1");
    ck_assert_str_eq(d.type, "lb11");
    ck_assert_str_eq(d.location, "hel1");
    ck_assert_int_eq(d.algorithm, HZ_ALG_LEAST_CONNECTIONS);
    ck_assert_ptr_null(d.network);
    ck_assert_int_eq(d.interval, 15);
    ck_assert_int_eq(d.timeout, 10);
    ck_assert_int_eq(d.retries, 3);
    ck_assert_int_eq(d.proxy, 0);
    ck_assert_int_eq(d.ip_mode, HZ_IPMODE_VIP);
    ck_assert_uint_eq(d.ntargets, 2);
    ck_assert_str_eq(d.targets[1], "10.0.1.11");
    hz_desired_clear(&d);
}
END_TEST

/* The annotations of the example Service win over the settings. */
START_TEST(annotations_override_the_settings)
{
    struct hz_config c = default_config();
    struct hz_annot a = no_annot();
    struct hz_svc s = svc(web_ports, 2);
    struct hz_desired d;
    char err[256];
    c.cluster_name = (char *)"prod";
    a.balancer = (char *)"custom-name";
    a.network = (char *)"my-net";
    a.private_ip = (char *)"10.10.10.10";
    a.check_interval = 5;
    a.timeout = 3;
    a.retries = 2;
    a.proxy_mode = 1;
    a.location = (char *)"fsn1";
    a.algorithm = HZ_ALG_ROUND_ROBIN;
    a.type = (char *)"lb21";
    a.ip_mode = HZ_IPMODE_PROXY;
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_str_eq(d.name, "custom-name");
    ck_assert_str_eq(d.network, "my-net");
    ck_assert_str_eq(d.private_ip, "10.10.10.10");
    ck_assert_int_eq(d.interval, 5);
    ck_assert_int_eq(d.timeout, 3);
    ck_assert_int_eq(d.retries, 2);
    ck_assert_int_eq(d.proxy, 1);
    ck_assert_int_eq(d.services[0].proxy, 1);
    ck_assert_str_eq(d.location, "fsn1");
    ck_assert_int_eq(d.algorithm, HZ_ALG_ROUND_ROBIN);
    ck_assert_str_eq(d.type, "lb21");
    ck_assert_int_eq(d.ip_mode, HZ_IPMODE_PROXY);
    hz_desired_clear(&d);
}
END_TEST

/* "Default network to use for load balancers. If not set, then only network
 * from the service annotation will be used"; "This parameter does nothing
 * in case if network is not specified." */
START_TEST(default_network_applies_and_a_private_ip_needs_a_network)
{
    struct hz_config c = default_config();
    struct hz_annot a = no_annot();
    struct hz_svc s = svc(web_ports, 1);
    struct hz_desired d;
    char err[256];
    a.private_ip = (char *)"10.0.0.9";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_ptr_null(d.network);
    ck_assert_ptr_null(d.private_ip);
    hz_desired_clear(&d);
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_str_eq(d.network, "k8s");
    ck_assert_str_eq(d.private_ip, "10.0.0.9");
    hz_desired_clear(&d);
}
END_TEST

/* "port: 80 # This will become the listening port on the LB"; a port is
 * reachable only through its nodePort: one service per port, listen =
 * port, destination = nodePort. */
START_TEST(each_port_becomes_a_service_listening_on_the_port_forwarding_to_its_node_port)
{
    struct hz_config c = default_config();
    struct hz_annot a = no_annot();
    struct hz_svc s = svc(web_ports, 2);
    struct hz_desired d;
    char err[256];
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_uint_eq(d.nservices, 2);
    ck_assert_int_eq(d.services[0].listen, 80);
    ck_assert_int_eq(d.services[0].dest, 30080);
    ck_assert_int_eq(d.services[1].listen, 443);
    ck_assert_int_eq(d.services[1].dest, 30443);
    hz_desired_clear(&d);
}
END_TEST

/* "ports without one are skipped" */
START_TEST(ports_without_a_node_port_are_skipped)
{
    const struct hz_port p[] = {{"TCP", 80, 0}, {"TCP", 8080, 31000}};
    struct hz_config c = default_config();
    struct hz_annot a = no_annot();
    struct hz_svc s = svc(p, 2);
    struct hz_desired d;
    char err[256];
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_uint_eq(d.nservices, 1);
    ck_assert_int_eq(d.services[0].listen, 8080);
    hz_desired_clear(&d);
}
END_TEST

/* "Currently only TCP protocol is supported. UDP will be ignored." */
START_TEST(udp_ports_are_ignored)
{
    const struct hz_port p[] = {{"UDP", 53, 30053}, {NULL, 80, 30080}, {"tcp", 81, 30081}};
    struct hz_config c = default_config();
    struct hz_annot a = no_annot();
    struct hz_svc s = svc(p, 3);
    struct hz_desired d;
    char err[256];
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_uint_eq(d.nservices, 2);
    ck_assert_int_eq(d.services[0].listen, 80);
    ck_assert_int_eq(d.services[1].listen, 81);
    hz_desired_clear(&d);
}
END_TEST

/* "When no port of a service can be exposed, no balancer is created for
 * it ... and a warning event on the service reports the problem." */
START_TEST(when_no_port_can_be_exposed_there_is_no_balancer_and_a_warning)
{
    const struct hz_port p[] = {{"TCP", 80, 0}, {"UDP", 53, 30053}};
    struct hz_config c = default_config();
    struct hz_annot a = no_annot();
    struct hz_svc s = svc(p, 2);
    struct hz_desired d;
    char err[512];
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "nodePort"));
    ck_assert_ptr_nonnull(strstr(err, "allocateLoadBalancerNodePorts"));
    ck_assert_uint_eq(d.nservices, 0);
    ck_assert_ptr_null(d.uid);
}
END_TEST

static const char *lb_json =
    "{\"id\":42,\"name\":\"web.shop\",\"labels\":{\"robotlb/"
    "service-uid\":\"uid-1\",\"team\":\"a\"},"
    "\"load_balancer_type\":{\"name\":\"lb11\",\"max_targets\":25},"
    "\"location\":{\"name\":\"hel1\",\"network_zone\":\"eu-central\"},"
    "\"protection\":{\"delete\":true},\"algorithm\":{\"type\":\"round_robin\"},"
    "\"public_net\":{\"ipv4\":{\"ip\":\"1.2.3.4\"},\"ipv6\":{\"ip\":\"2001:db8::1\"}},"
    "\"private_net\":[{\"network\":7,\"ip\":\"10.0.0.5\"}],"
    "\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.10\"},\"use_private_ip\":false},"
    "{\"type\":\"label_selector\",\"label_selector\":{\"selector\":\"a=b\"}}],"
    "\"services\":[{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080,"
    "\"proxyprotocol\":true,\"health_check\":{\"protocol\":\"tcp\",\"port\":30080,"
    "\"interval\":15,\"timeout\":10,\"retries\":3}}]}";

/* The balancer as GET /load_balancers returns it. */
START_TEST(the_actual_balancer_is_read_from_the_api_json)
{
    json_t *j = parse_json(lb_json);
    struct hz_actual a;
    ck_assert_int_eq(hz_actual_parse(j, &a), 0);
    ck_assert_int_eq(a.id, 42);
    ck_assert_str_eq(a.name, "web.shop");
    ck_assert_str_eq(a.uid, "uid-1");
    ck_assert_str_eq(json_string_value(json_object_get(a.labels, "team")), "a");
    ck_assert_str_eq(a.type, "lb11");
    ck_assert_str_eq(a.location, "hel1");
    ck_assert_str_eq(a.network_zone, "eu-central");
    ck_assert_int_eq(a.protect_delete, 1);
    ck_assert_int_eq(a.algorithm, HZ_ALG_ROUND_ROBIN);
    ck_assert_str_eq(a.ipv4, "1.2.3.4");
    ck_assert_str_eq(a.ipv6, "2001:db8::1");
    ck_assert_int_eq(a.public_enabled, 1);
    ck_assert_uint_eq(a.nnets, 1);
    ck_assert_int_eq(a.nets[0].network, 7);
    ck_assert_int_eq(hz_actual_on_network(&a, 7), 1);
    ck_assert_int_eq(hz_actual_on_network(&a, 8), 0);
    ck_assert_uint_eq(a.nip_targets, 1);
    ck_assert_str_eq(a.ip_targets[0], "10.0.1.10");
    ck_assert_uint_eq(a.nother_targets, 1);
    ck_assert_uint_eq(a.nservices, 1);
    ck_assert_int_eq(a.services[0].listen, 80);
    ck_assert_int_eq(a.services[0].dest, 30080);
    ck_assert_int_eq(a.services[0].proxy, 1);
    ck_assert_int_eq(a.services[0].hc_interval, 15);
    hz_actual_clear(&a);
    json_decref(j);
    j = parse_json("{\"name\":\"x\"}");
    ck_assert_int_eq(hz_actual_parse(j, &a), -EINVAL);
    json_decref(j);
}
END_TEST

/* "robotlb labels every balancer it creates with robotlb/service-uid set to
 * the UID of the service": the create body carries the label, the type,
 * location, algorithm, services with health checks and, with a network,
 * the network and the IP targets. */
START_TEST(every_balancer_created_is_labelled_with_the_service_uid)
{
    struct hz_config c = default_config();
    struct hz_annot a = no_annot();
    struct hz_svc s = svc(web_ports, 2);
    struct hz_desired d;
    const char *ips[] = {"10.0.1.10"};
    char err[256];
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, ips, 1, &d, err, sizeof(err)), 0);
    json_t *b = hz_create_body(&d, 7, 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(json_string_value(json_object_get(b, "name")), "web.shop");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(b, "labels"), HZ_LABEL_UID)),
                     "uid-1");
    ck_assert_str_eq(json_string_value(json_object_get(b, "load_balancer_type")), "lb11");
    ck_assert_str_eq(json_string_value(json_object_get(b, "location")), "hel1");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(b, "algorithm"), "type")),
                     "least_connections");
    ck_assert_int_eq(json_integer_value(json_object_get(b, "network")), 7);
    json_t *sv = json_array_get(json_object_get(b, "services"), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(sv, "listen_port")), 443);
    ck_assert_int_eq(json_integer_value(json_object_get(sv, "destination_port")), 30443);
    ck_assert(json_is_false(json_object_get(sv, "proxyprotocol")));
    json_t *hc = json_object_get(sv, "health_check");
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "port")), 30443);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "interval")), 15);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "timeout")), 10);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "retries")), 3);
    json_t *t = json_array_get(json_object_get(b, "targets"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(t, "ip"), "ip")),
                     "10.0.1.10");
    json_decref(b);
    /* a requested private IP is attached after the create */
    hz_free(d.private_ip);
    d.private_ip = hz_strdup("10.0.0.9");
    b = hz_create_body(&d, 7, 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_null(json_object_get(b, "network"));
    ck_assert_ptr_null(json_object_get(b, "targets"));
    json_decref(b);
    hz_desired_clear(&d);
}
END_TEST

/* hccm's network-zone: the create names the zone instead of a location
 * (Hetzner picks a location in it), and the decision's fingerprint tells
 * a zone from a location of the same name. */
START_TEST(a_network_zone_is_created_by_zone_not_location)
{
    struct hz_config c = default_config();
    struct hz_annot a = no_annot();
    struct hz_svc s = svc(web_ports, 2);
    struct hz_desired d, byloc;
    char err[256];
    a.network_zone = (char *)"eu-central";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_int_eq(d.by_zone, 1);
    json_t *b = hz_create_body(&d, 0, 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(json_string_value(json_object_get(b, "network_zone")), "eu-central");
    ck_assert_ptr_null(json_object_get(b, "location"));
    json_decref(b);
    a.network_zone = NULL;
    a.location = (char *)"eu-central";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &byloc, err, sizeof(err)), 0);
    ck_assert_uint_ne(hz_desired_fp(&d), hz_desired_fp(&byloc));
    hz_desired_clear(&byloc);
    hz_desired_clear(&d);
}
END_TEST

/* robotlb/lb-public-interface "false": a private-only balancer. Created
 * with the public interface disabled when the network is in the create
 * body; with a requested private IP (attached after the create) it is
 * created public and the plan disables it; without a network it is refused
 * with a message for a warning Event. */
START_TEST(a_private_only_balancer_needs_a_network_and_is_created_without_public_interface)
{
    struct hz_config c = default_config();
    struct hz_annot a = no_annot();
    struct hz_svc s = svc(web_ports, 2);
    struct hz_desired d;
    char err[256];
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_int_eq(d.public_iface, 1);
    json_t *b = hz_create_body(&d, 0, 0);
    ck_assert(json_is_true(json_object_get(b, "public_interface")));
    json_decref(b);
    hz_desired_clear(&d);

    a.public_iface = 0;
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "robotlb/lb-public-interface"));
    ck_assert_ptr_nonnull(strstr(err, "network"));

    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_desired_build(&c, &a, &s, NULL, 0, &d, err, sizeof(err)), 0);
    ck_assert_int_eq(d.public_iface, 0);
    b = hz_create_body(&d, 7, 1);
    ck_assert(json_is_false(json_object_get(b, "public_interface")));
    ck_assert_int_eq(json_integer_value(json_object_get(b, "network")), 7);
    json_decref(b);
    d.private_ip = hz_strdup("10.0.0.9");
    b = hz_create_body(&d, 7, 1);
    ck_assert(json_is_true(json_object_get(b, "public_interface")));
    json_decref(b);
    hz_desired_clear(&d);

    json_t *j = parse_json("{\"id\":1,\"name\":\"x\",\"public_net\":{\"enabled\":false}}");
    struct hz_actual act;
    ck_assert_int_eq(hz_actual_parse(j, &act), 0);
    ck_assert_int_eq(act.public_enabled, 0);
    hz_actual_clear(&act);
    json_decref(j);
}
END_TEST

/* ------------------------------------------------------------------ */
/* prismlb's own protocol per port (prismlb.io/port-protocols)          */

#define P "load-balancer.hetzner.cloud/"
#define PP "prismlb.io/port-protocols"

/* Ports 80, 443 and 22 with their nodePorts. */
static const struct hz_port three_ports[] = {
    {"TCP", 80, 30080},
    {"TCP", 443, 30443},
    {"TCP", 22, 30022},
};

/* What a Service with ports (n of them) asks for under the annotations kv
 * (which must parse): the build's return, its message in err. */
static int
build_kv(const struct hz_port *ports, size_t n, const char *const *kv, struct hz_desired *d,
         char *err, size_t errlen)
{
    struct hz_config c = default_config();
    struct hz_svc s = svc(ports, n);
    struct hz_annot a;
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, errlen), 0);
    int rc = hz_desired_build(&c, &a, &s, NULL, 0, d, err, errlen);
    hz_annot_clear(&a);
    return rc;
}

/* The service of d on port, which must be there. */
static const struct hz_svc_port *
on_port(const struct hz_desired *d, int port)
{
    for (size_t i = 0; i < d->nservices; i++)
        if (d->services[i].listen == port)
            return &d->services[i];
    ck_abort_msg("no service on port %d", port);
    return NULL;
}

/* Each malformed list is an InvalidAnnotation naming the annotation and
 * its value, and nothing of the set is kept; blanks and any case are
 * fine. */
START_TEST(each_bad_port_protocol_list_is_named_with_its_value)
{
    static const char *const bad[] = {
        "",         "80",          "80:",           "80:ftp",    "80:http,80:https",
        "80:http,", ",80:http",    "0:http",        "65536:tcp", "80;http",
        "http:80",  "80:http 443", "80:http:https", "-80:http",  "80:http,,443:tcp",
        "8o:http",
    };
    char err[512], many[1024] = "";
    struct hz_annot a;
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        const char *kv[] = {PP, bad[i], NULL};
        char want[128];
        ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), -EINVAL);
        snprintf(want, sizeof(want), PP ": \"%s\"", bad[i]);
        ck_assert_msg(strstr(err, want) != NULL, "\"%s\": %s", bad[i], err);
        ck_assert_ptr_null(a.port_protos);
    }
    /* 65 ports: more than a list may name */
    for (int i = 0; i < 65; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s%d:tcp", i ? "," : "",
                 1000 + i);
    const char *kv[] = {PP, many, NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "names more than 64 ports"));
    /* blanks around each item and the colon, any case */
    const char *good[] = {PP, " 80 : HTTP , 443:Https,22:tcp ", P "http-certificates", "7", NULL};
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)good, &a, err, sizeof(err)), 0);
    ck_assert_uint_eq(a.nport_protos, 3);
    ck_assert_int_eq(a.port_protos[0].port, 80);
    ck_assert_int_eq(a.port_protos[0].protocol, HZ_PROTO_HTTP);
    ck_assert_int_eq(a.port_protos[1].port, 443);
    ck_assert_int_eq(a.port_protos[1].protocol, HZ_PROTO_HTTPS);
    ck_assert_int_eq(a.port_protos[2].protocol, HZ_PROTO_TCP);
    ck_assert_int_eq(a.http.protocol, HZ_PROTO_TCP);
    hz_annot_clear(&a);
}
END_TEST

/* The http settings apply when any port is http or https, the
 * certificates when one is https, which then needs one; a listed port the
 * Service lacks is named. */
START_TEST(http_settings_follow_the_ports_protocols)
{
    static const char *const cookie[] = {PP, "80:http", P "http-sticky-sessions", "true", NULL};
    static const char *const no_cert[] = {PP, "443:https", NULL};
    static const char *const cert_on_http[] = {PP, "80:http", P "http-certificates", "7", NULL};
    static const char *const missing[] = {PP, "80:http,8080:tcp", NULL};
    struct hz_annot a;
    struct hz_desired d;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)cookie, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.http.sticky, 1);
    hz_annot_clear(&a);
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)no_cert, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, PP ": \"https\" needs a certificate"));
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)cert_on_http, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "http-certificates: applies to https services only (" P
                                        "protocol is tcp and " PP " names no https port)"));
    ck_assert_int_eq(build_kv(three_ports, 3, missing, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, PP ": port 8080 is not a TCP port of the Service"));
    ck_assert_uint_eq(d.nservices, 0);
}
END_TEST

/* 80:http,443:https with the redirect: 443 https redirects and carries
 * the certificate, port 80 is that redirect (no service of its own), 22
 * stays tcp; without the redirect 80 is a plain http service. */
START_TEST(the_redirect_folds_port_80_into_the_https_service_on_443)
{
    static const char *const with[] = {
        PP, "80:http,443:https", P "http-certificates", "7", P "http-redirect-http", "true", NULL,
    };
    static const char *const without[] = {
        PP, "80:http,443:https", P "http-certificates", "7", P "http-sticky-sessions", "true", NULL,
    };
    struct hz_desired d;
    char err[512];
    ck_assert_int_eq(build_kv(three_ports, 3, with, &d, err, sizeof(err)), 0);
    ck_assert_uint_eq(d.nservices, 2);
    ck_assert_int_eq(on_port(&d, 443)->protocol, HZ_PROTO_HTTPS);
    ck_assert_int_eq(on_port(&d, 443)->redirect, 1);
    ck_assert_int_eq(on_port(&d, 22)->protocol, HZ_PROTO_TCP);
    ck_assert_int_eq(on_port(&d, 22)->redirect, 0);
    json_t *b = hz_service_json(&d, on_port(&d, 443));
    json_t *want = parse_json("{\"listen_port\":443,\"destination_port\":30443,"
                              "\"proxyprotocol\":false,\"protocol\":\"https\","
                              "\"health_check\":{\"interval\":15,\"timeout\":10,\"retries\":3,"
                              "\"protocol\":\"tcp\",\"port\":30443},"
                              "\"http\":{\"cookie_name\":\"HCLBSTICKY\",\"cookie_lifetime\":300,"
                              "\"sticky_sessions\":false,\"redirect_http\":true,"
                              "\"certificates\":[7]}}");
    ck_assert_msg(json_equal(b, want), "%s", json_dumps(b, JSON_COMPACT));
    json_decref(b);
    json_decref(want);
    b = hz_service_json(&d, on_port(&d, 22));
    ck_assert_str_eq(json_string_value(json_object_get(b, "protocol")), "tcp");
    ck_assert_ptr_null(json_object_get(b, "http"));
    json_decref(b);
    hz_desired_clear(&d);

    ck_assert_int_eq(build_kv(three_ports, 3, without, &d, err, sizeof(err)), 0);
    ck_assert_uint_eq(d.nservices, 3);
    ck_assert_int_eq(on_port(&d, 80)->protocol, HZ_PROTO_HTTP);
    ck_assert_int_eq(on_port(&d, 443)->redirect, 0);
    b = hz_service_json(&d, on_port(&d, 80));
    json_t *http = json_object_get(b, "http");
    ck_assert_str_eq(json_string_value(json_object_get(b, "protocol")), "http");
    /* Hetzner takes no certificate on an http service */
    ck_assert_uint_eq(json_array_size(json_object_get(http, "certificates")), 0);
    ck_assert(json_is_false(json_object_get(http, "redirect_http")));
    ck_assert(json_is_true(json_object_get(http, "sticky_sessions")));
    json_decref(b);
    b = hz_service_json(&d, on_port(&d, 443));
    http = json_object_get(b, "http");
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(http, "certificates"), 0)),
                     7);
    ck_assert(json_is_true(json_object_get(http, "sticky_sessions")));
    json_decref(b);
    /* the fingerprint follows a port's protocol */
    uint64_t fp = hz_desired_fp(&d);
    d.services[2].protocol = HZ_PROTO_HTTP;
    ck_assert_uint_ne(hz_desired_fp(&d), fp);
    hz_desired_clear(&d);
}
END_TEST

/* What Hetzner would refuse of the redirect is an InvalidAnnotation naming
 * both annotations: no https port 443; port 80 tcp or https (listed or by
 * hccm's Service-wide protocol, which hccm sends and Hetzner refuses). */
START_TEST(a_redirect_hetzner_would_refuse_names_both_annotations)
{
    static const struct hz_port two[] = {{"TCP", 80, 30080}, {"TCP", 8443, 30443}};
    static const char *const no_443[] = {
        PP, "80:http,8443:https", P "http-certificates", "7", P "http-redirect-http", "true", NULL,
    };
    static const char *const tcp_80[] = {
        PP, "443:https", P "http-certificates", "7", P "http-redirect-http", "true", NULL,
    };
    static const char *const https_80[] = {
        PP, "80:https,443:https", P "http-certificates", "7", P "http-redirect-http", "true", NULL,
    };
    static const char *const wide[] = {
        P "protocol", "https", P "http-certificates", "7", P "http-redirect-http", "true", NULL,
    };
    static const char *const wide_listed[] = {
        P "protocol",           "https", PP,   "80:http", P "http-certificates", "7",
        P "http-redirect-http", "true",  NULL,
    };
    struct hz_desired d;
    char err[512];
    ck_assert_int_eq(build_kv(two, 2, no_443, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "http-redirect-http and " P "protocol: the redirect needs "
                                        "an https service on port 443"));
    ck_assert_int_eq(build_kv(three_ports, 3, tcp_80, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "http-redirect-http and " P "protocol: port 80 is tcp"));
    ck_assert_int_eq(build_kv(three_ports, 3, https_80, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "http-redirect-http and " PP ": port 80 is https"));
    ck_assert_int_eq(build_kv(three_ports, 2, wide, &d, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, P "http-redirect-http and " P "protocol: port 80 is https"));
    ck_assert_uint_eq(d.nservices, 0);
    /* port 80 listed http under the Service-wide https: it is the redirect */
    ck_assert_int_eq(build_kv(three_ports, 3, wide_listed, &d, err, sizeof(err)), 0);
    ck_assert_uint_eq(d.nservices, 2);
    ck_assert_int_eq(on_port(&d, 443)->redirect, 1);
    ck_assert_int_eq(on_port(&d, 22)->protocol, HZ_PROTO_HTTPS);
    hz_desired_clear(&d);
    /* without port 80 the Service-wide https redirects from 443 alone */
    ck_assert_int_eq(build_kv(three_ports + 1, 1, wide, &d, err, sizeof(err)), 0);
    ck_assert_int_eq(on_port(&d, 443)->redirect, 1);
    hz_desired_clear(&d);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb model");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, without_annotations_the_balancer_takes_the_defaults_of_the_settings);
    tcase_add_test(tc, annotations_override_the_settings);
    tcase_add_test(tc, default_network_applies_and_a_private_ip_needs_a_network);
    tcase_add_test(tc,
                   each_port_becomes_a_service_listening_on_the_port_forwarding_to_its_node_port);
    tcase_add_test(tc, ports_without_a_node_port_are_skipped);
    tcase_add_test(tc, udp_ports_are_ignored);
    tcase_add_test(tc, when_no_port_can_be_exposed_there_is_no_balancer_and_a_warning);
    tcase_add_test(tc, the_actual_balancer_is_read_from_the_api_json);
    tcase_add_test(tc, every_balancer_created_is_labelled_with_the_service_uid);
    tcase_add_test(tc, a_network_zone_is_created_by_zone_not_location);
    tcase_add_test(tc,
                   a_private_only_balancer_needs_a_network_and_is_created_without_public_interface);
    tcase_add_test(tc, each_bad_port_protocol_list_is_named_with_its_value);
    tcase_add_test(tc, http_settings_follow_the_ports_protocols);
    tcase_add_test(tc, the_redirect_folds_port_80_into_the_https_service_on_443);
    tcase_add_test(tc, a_redirect_hetzner_would_refuse_names_both_annotations);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
