/*
 * hcloud-cloud-controller-manager's network and status rules, as a user
 * drives them: kubectl applies and annotates the Service and reads its
 * status, the hcloud CLI (against the fake Hetzner API) reads the balancer.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "hccm_util.h"
#include "testutil.h"

/* `kubectl get service NAME -o jsonpath=PATH` of namespace default (new),
 * or NULL when kubectl fails. */
static char *
jsonpath(struct env *e, const char *name, const char *path)
{
    char *out = NULL, arg[256];
    snprintf(arg, sizeof(arg), "jsonpath=%s", path);
    if (env_kubectl(e, &out, "get", "service", name, "-n", "default", "-o", arg, NULL) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* 1 when the jsonpath of Service name reads want. */
static int
jsonpath_is(struct env *e, const char *name, const char *path, const char *want)
{
    char *v = jsonpath(e, name, path);
    int ok = v && strcmp(v, want) == 0;
    free(v);
    return ok;
}

/* "hostname: Specifies the hostname of the Load Balancer. This will be used
 * as ingress address instead of the Load Balancer IP addresses": the status
 * is the hostname alone (no IP, no ipMode); removing the annotation brings
 * the IP back; a hostname the API server would refuse is an
 * InvalidAnnotation naming it, and the status stays. */
START_TEST(hostname_replaces_the_ips_in_the_status)
{
    struct env e;
    char ip[64];
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid = hccm_apply_service(&e, "web",
                                   "    load-balancer.hetzner.cloud/hostname: lb.example.com\n"
                                   "    load-balancer.hetzner.cloud/ipv6-disabled: \"false\"\n");
    WAIT_FOR(&e,
             jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[0].hostname}", "lb.example.com"),
             30000, "the hostname in the status");
    ck_assert(jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[*].ip}", ""));
    ck_assert(jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[*].ipMode}", ""));
    size_t n = 0;
    ck_assert(!env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, &n));
    ck_assert_uint_eq(n, 1); /* the hostname alone, no IPv4 or IPv6 beside it */
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb); /* the balancer is made all the same */

    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/hostname=10.1.2.3");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation",
                               "load-balancer.hetzner.cloud/hostname", "\"10.1.2.3\"", "IP address",
                               NULL) > 0,
             30000, "the InvalidAnnotation warning");
    ck_assert(
        jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[0].hostname}", "lb.example.com"));

    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/hostname-");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL) && ip[0], 30000,
             "the IPs back in the status");
    ck_assert_str_eq(ip, hccm_ip_of(lb, "ipv4"));
    ck_assert(jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[*].hostname}", ""));
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

/* The balancer's public_net.enabled and its first private_net IP, as
 * `hcloud load-balancer describe NAME -o json` shows them (its list leaves
 * private_net out). */
static void
cli_public_private(struct env *e, const char *name, int *enabled, char *ip, size_t len)
{
    json_t *lb = env_hcloud_json(e, "load-balancer", "describe", name, NULL);
    ck_assert_ptr_nonnull(lb);
    *enabled = !json_is_false(json_object_get(json_object_get(lb, "public_net"), "enabled"));
    const char *p = json_string_value(
        json_object_get(json_array_get(json_object_get(lb, "private_net"), 0), "ip"));
    snprintf(ip, len, "%s", p ? p : "");
    json_decref(lb);
}

/* "disable-public-network: Disables the public network of the Hetzner Cloud
 * Load Balancer ... all traffic is routed over the private network", with
 * "private-ipv4" its address in the network (default_network k8s here):
 * the hcloud CLI shows the public interface off and that private IP, and
 * the status holds the private IP, as hccm's does without a public
 * network. Beside robotlb's lb-public-interface saying otherwise: an
 * InvalidAnnotation naming both, nothing written. "false" turns the public
 * interface back on and the status to the public IPv4. */
START_TEST(disable_public_network_and_private_ipv4_make_a_private_balancer)
{
    struct env e;
    char ip[64], pip[64];
    int enabled;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid =
        hccm_apply_service(&e, "web",
                           "    load-balancer.hetzner.cloud/disable-public-network: \"true\"\n"
                           "    load-balancer.hetzner.cloud/private-ipv4: 10.0.0.30\n");
    WAIT_FOR(&e,
             env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL) && strcmp(ip, "10.0.0.30") == 0,
             30000, "the private IP in the status");
    cli_public_private(&e, "web.default", &enabled, pip, sizeof(pip));
    ck_assert_int_eq(enabled, 0);
    ck_assert_str_eq(pip, "10.0.0.30");

    long writes = env_last_request(&e);
    hccm_annotate(&e, "web", "robotlb/lb-public-interface=true");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation", "robotlb/lb-public-interface",
                               "load-balancer.hetzner.cloud/disable-public-network", NULL) > 0,
             30000, "the InvalidAnnotation naming both");
    hccm_only_reads_since(&e, writes, "the conflict");

    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/disable-public-network=false");
    WAIT_FOR(&e,
             env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL) && strncmp(ip, "10.0.", 5) != 0,
             30000, "the public IPv4 in the status");
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_str_eq(ip, hccm_ip_of(lb, "ipv4"));
    ck_assert(json_is_true(json_object_get(json_object_get(lb, "public_net"), "enabled")));
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

/* "disable-private-ingress" "false" (hccm's default): the status holds
 * the balancer's IP in its network after the public one; "true" (prismlb's
 * default, robotlb's) leaves it out. "use-private-ip" "true" changes
 * nothing the hcloud CLI shows: the targets are the nodes' InternalIPs
 * already. */
START_TEST(disable_private_ingress_false_adds_the_private_ip_to_the_status)
{
    struct env e;
    char ip[64], out1[64];
    size_t n = 0;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *uid =
        hccm_apply_service(&e, "web",
                           "    load-balancer.hetzner.cloud/disable-private-ingress: \"false\"\n"
                           "    load-balancer.hetzner.cloud/use-private-ip: \"true\"\n");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, &n) && n == 2, 30000,
             "the public and the private IP in the status");
    json_t *lb = hccm_cli_balancer_of(&e, uid);
    ck_assert_ptr_nonnull(lb);
    ck_assert_str_eq(ip, hccm_ip_of(lb, "ipv4"));
    char *priv = jsonpath(&e, "web", "{.status.loadBalancer.ingress[1].ip}");
    int enabled;
    cli_public_private(&e, "web.default", &enabled, out1, sizeof(out1));
    ck_assert_ptr_nonnull(priv);
    ck_assert_str_eq(priv, out1);
    ck_assert(strncmp(priv, "10.0.0.", 7) == 0);
    free(priv);
    ck_assert(env_targets_are(&e, uid, "10.0.1.41"));

    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/disable-private-ingress=true");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, &n) && n == 1, 30000,
             "the public IP alone in the status");
    ck_assert_str_eq(ip, hccm_ip_of(lb, "ipv4"));
    json_decref(lb);
    free(uid);
    env_stop(&e);
}
END_TEST

/* HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK and
 * _DISABLE_PRIVATE_INGRESS, as an hccm Deployment sets them: a Service
 * that says nothing gets a balancer without its public interface, shown
 * at its private IP; one with disable-public-network "false" gets its
 * public IP. (Check runs each test in its own process.) */
START_TEST(hccms_public_and_private_variables_set_the_defaults)
{
    struct env e;
    char ip[64];
    setenv("HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK", "true", 1);
    setenv("HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS", "true", 1);
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    char *u1 = hccm_apply_service(&e, "inner", NULL);
    char *u2 = env_service(
        &e, "outer", "LoadBalancer", 30081,
        ",\"annotations\":{\"load-balancer.hetzner.cloud/disable-public-network\":\"false\"}",
        NULL);
    WAIT_FOR(&e,
             env_ingress(&e, "inner", ip, sizeof(ip), NULL, 0, NULL) &&
                 strncmp(ip, "10.0.0.", 7) == 0,
             30000, "the private IP in the status");
    WAIT_FOR(
        &e, env_ingress(&e, "outer", ip, sizeof(ip), NULL, 0, NULL) && strncmp(ip, "10.0.", 5) != 0,
        30000, "the public IP in the other status");
    int enabled;
    char pip[64];
    cli_public_private(&e, "inner.default", &enabled, pip, sizeof(pip));
    ck_assert_int_eq(enabled, 0);
    cli_public_private(&e, "outer.default", &enabled, pip, sizeof(pip));
    ck_assert_int_eq(enabled, 1);
    free(u1);
    free(u2);
    env_stop(&e);
}
END_TEST

/* The network k8s with a second cloud subnet, 10.0.2.0/24, beside the
 * first (10.0.0.0/24) and the nodes' vSwitch subnet (10.0.1.0/24). */
#define TWO_CLOUD_SUBNETS                                                                          \
    ",\"networks\":[{\"id\":7,\"name\":\"k8s\",\"ip_range\":\"10.0.0.0/16\",\"subnets\":["         \
    "{\"type\":\"cloud\",\"ip_range\":\"10.0.0.0/24\"},{\"type\":\"vswitch\",\"ip_range\":"        \
    "\"10.0.1.0/24\",\"vswitch_id\":4242},{\"type\":\"cloud\",\"ip_range\":\"10.0.2.0/24\"}]}]"

/* "private-subnet-ip-range": the balancer's private IP comes from that
 * subnet of its network (attach_to_network's ip_range), as the hcloud CLI
 * and the status (with disable-private-ingress "false") show. A malformed
 * range is an InvalidAnnotation naming it, nothing written and the status
 * kept; a range that is no cloud subnet of the network (here the nodes'
 * vSwitch subnet) is refused by Hetzner: a NetworkAttachRefused warning
 * naming it and no status, until the annotation names one. */
START_TEST(private_subnet_ip_range_picks_the_subnet_of_the_private_ip)
{
    struct env e;
    char ip[64], pip[64];
    size_t n = 0;
    int enabled;
    struct env_opts o = {
        .no_network = 1, .seed_extra = TWO_CLOUD_SUBNETS, .extra = "default_network = \"k8s\";"};
    env_start_opts(&e, &o);
    env_node(&e, "n1", "10.0.1.41");
    char *uid =
        hccm_apply_service(&e, "web",
                           "    load-balancer.hetzner.cloud/private-subnet-ip-range: 10.0.2.0/24\n"
                           "    load-balancer.hetzner.cloud/disable-private-ingress: \"false\"\n");
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, &n) && n == 2, 30000,
             "the public and the private IP in the status");
    cli_public_private(&e, "web.default", &enabled, pip, sizeof(pip));
    ck_assert_msg(strncmp(pip, "10.0.2.", 7) == 0, "private IP %s", pip);
    char *priv = jsonpath(&e, "web", "{.status.loadBalancer.ingress[1].ip}");
    ck_assert_ptr_nonnull(priv);
    ck_assert_str_eq(priv, pip);
    free(priv);
    ck_assert(env_targets_are(&e, uid, "10.0.1.41"));

    long writes = env_last_request(&e);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/private-subnet-ip-range=10.0.2.0/33");
    WAIT_FOR(&e,
             env_kubectl_event(&e, "web", "InvalidAnnotation",
                               "load-balancer.hetzner.cloud/private-subnet-ip-range",
                               "\"10.0.2.0/33\"", "IPv4 CIDR", NULL) > 0,
             30000, "the InvalidAnnotation naming the range");
    hccm_only_reads_since(&e, writes, "a malformed range");
    ck_assert(jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[1].ip}", pip));

    char *u2 = hccm_apply_service_port(&e, "other",
                                       "    load-balancer.hetzner.cloud/private-subnet-ip-range: "
                                       "10.0.1.0/24\n",
                                       81, 30081);
    WAIT_FOR(&e,
             env_kubectl_event(&e, "other", "NetworkAttachRefused", "\"k8s\"",
                               "in the subnet \"10.0.1.0/24\"", NULL) > 0,
             30000, "the NetworkAttachRefused warning naming the subnet");
    ck_assert(jsonpath_is(&e, "other", "{.status.loadBalancer.ingress[*].ip}", ""));
    hccm_annotate(&e, "other", "load-balancer.hetzner.cloud/private-subnet-ip-range=10.0.0.0/24");
    WAIT_FOR(&e, env_ingress(&e, "other", ip, sizeof(ip), NULL, 0, NULL), 30000,
             "the status once attached");
    cli_public_private(&e, "other.default", &enabled, pip, sizeof(pip));
    ck_assert_msg(strncmp(pip, "10.0.0.", 7) == 0, "private IP %s", pip);
    free(u2);
    free(uid);
    env_stop(&e);
}
END_TEST

/* How many change_dns_ptr the fake Hetzner API logged after since. */
static size_t
dns_ptr_changes_since(struct env *e, long since)
{
    json_t *log = env_requests_since(e, since);
    size_t i, n = 0;
    json_t *r;
    json_array_foreach(log, i, r)
    {
        const char *path = json_string_value(json_object_get(r, "path"));
        n += path && strstr(path, "/actions/change_dns_ptr") != NULL;
    }
    json_decref(log);
    return n;
}

/* The reverse DNS of the balancer's public IP of family ("ipv4", "ipv6"),
 * as `hcloud load-balancer describe` shows it, into out. */
static void
cli_rdns(struct env *e, const char *name, const char *family, char *out, size_t len)
{
    json_t *lb = env_hcloud_json(e, "load-balancer", "describe", name, NULL);
    ck_assert_ptr_nonnull(lb);
    const char *v = json_string_value(
        json_object_get(json_object_get(json_object_get(lb, "public_net"), family), "dns_ptr"));
    snprintf(out, len, "%s", v ? v : "");
    json_decref(lb);
}

/* "ipv4-rdns", "ipv6-rdns": the balancer's public IPv4 and IPv6 get that
 * reverse DNS (hccm's change_dns_ptr), which the hcloud CLI shows; one
 * request each, none when the balancer already has it (a sync the status
 * shows sends only reads), one when the annotation changes. */
START_TEST(rdns_annotations_set_the_reverse_dns_of_the_public_ips)
{
    struct env e;
    char rdns[256];
    long start;
    env_start(&e, NULL, NULL, NULL, 300);
    env_node(&e, "n1", "10.0.1.41");
    start = env_last_request(&e);
    char *uid = hccm_apply_service(&e, "web",
                                   "    load-balancer.hetzner.cloud/ipv4-rdns: lb.example.com\n"
                                   "    load-balancer.hetzner.cloud/ipv6-rdns: lb6.example.com\n");
    WAIT_FOR(&e, dns_ptr_changes_since(&e, start) == 2, 30000, "two change_dns_ptr");
    cli_rdns(&e, "web.default", "ipv4", rdns, sizeof(rdns));
    ck_assert_str_eq(rdns, "lb.example.com");
    cli_rdns(&e, "web.default", "ipv6", rdns, sizeof(rdns));
    ck_assert_str_eq(rdns, "lb6.example.com");
    char ip[64];
    WAIT_FOR(&e, env_ingress(&e, "web", ip, sizeof(ip), NULL, 0, NULL), 30000, "the status");

    long writes = env_last_request(&e);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/hostname=web.example.com");
    WAIT_FOR(
        &e, jsonpath_is(&e, "web", "{.status.loadBalancer.ingress[0].hostname}", "web.example.com"),
        30000, "a sync (the hostname in the status)");
    hccm_only_reads_since(&e, writes, "a sync with the reverse DNS in place");
    /* hccm no longer copies the balancer's addresses onto the Service, and
     * neither does prismlb: after two syncs there is no ipv4 or ipv6 */
    ck_assert(
        jsonpath_is(&e, "web", "{.metadata.annotations.load-balancer\\.hetzner\\.cloud/ipv4}", ""));
    ck_assert(
        jsonpath_is(&e, "web", "{.metadata.annotations.load-balancer\\.hetzner\\.cloud/ipv6}", ""));
    ck_assert(jsonpath_is(&e, "web",
                          "{.metadata.annotations.load-balancer\\.hetzner\\.cloud/ipv4-rdns}",
                          "lb.example.com"));

    writes = env_last_request(&e);
    hccm_annotate(&e, "web", "load-balancer.hetzner.cloud/ipv4-rdns=www.example.com");
    WAIT_FOR(&e, dns_ptr_changes_since(&e, writes) == 1, 30000, "one change_dns_ptr");
    cli_rdns(&e, "web.default", "ipv4", rdns, sizeof(rdns));
    ck_assert_str_eq(rdns, "www.example.com");
    cli_rdns(&e, "web.default", "ipv6", rdns, sizeof(rdns));
    ck_assert_str_eq(rdns, "lb6.example.com");
    ck_assert_uint_eq(dns_ptr_changes_since(&e, writes), 1);
    free(uid);
    env_stop(&e);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb hccm_network");
    TCase *tc = tcase_create("hccm_network");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, hostname_replaces_the_ips_in_the_status);
    tcase_add_test(tc, disable_public_network_and_private_ipv4_make_a_private_balancer);
    tcase_add_test(tc, disable_private_ingress_false_adds_the_private_ip_to_the_status);
    tcase_add_test(tc, hccms_public_and_private_variables_set_the_defaults);
    tcase_add_test(tc, rdns_annotations_set_the_reverse_dns_of_the_public_ips);
    tcase_add_test(tc, private_subnet_ip_range_picks_the_subnet_of_the_private_ip);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
