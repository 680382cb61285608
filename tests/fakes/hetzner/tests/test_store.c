/* Unit tests: store logic of the fake (checks, IP allocation, actions,
 * pagination, seeding, certificate PEM checks), in process without HTTP. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake.h"
#include "testutil.h"

static struct hz_fake F;
static struct hz_req R;
static char *tmpdir;

static const char *SEED =
    "{\"tokens\":[\"t1\"],\"max_load_balancers\":4,"
    "\"networks\":[{\"id\":7,\"name\":\"k8s\",\"ip_range\":\"10.0.0.0/16\","
    "\"subnets\":[{\"type\":\"cloud\",\"ip_range\":\"10.0.0.0/"
    "24\",\"network_zone\":\"eu-central\"},"
    "{\"type\":\"vswitch\",\"ip_range\":\"10.0.1.0/24\",\"network_zone\":\"eu-central\","
    "\"vswitch_id\":4242},"
    "{\"type\":\"cloud\",\"ip_range\":\"10.0.2.0/24\",\"network_zone\":\"eu-central\"}],"
    "\"reserved_ips\":[\"10.0.0.2\"]}],"
    "\"load_balancers\":[{\"id\":5,\"name\":\"old\",\"load_balancer_type\":\"lb11\","
    "\"location\":\"fsn1\",\"network\":7,\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.9\"}"
    "}]},"
    "{\"name\":\"labelled\",\"load_balancer_type\":2,\"location\":\"hel1\","
    "\"labels\":{\"robotlb/service-uid\":\"u1\"},\"protection\":{\"delete\":true}}]}";

static void
reset_req(void)
{
    json_decref(R.resp);
    memset(&R, 0, sizeof(R));
    R.f = &F;
    R.identity = "unit";
}

static const char *
err_code(void)
{
    const char *c = json_string_value(json_object_get(json_object_get(R.resp, "error"), "code"));
    return c ? c : "";
}

static void
setup(void)
{
    memset(&F, 0, sizeof(F));
    F.cfg.action_ms = 20;
    F.cfg.rate_bucket = 10;
    F.cfg.rate_refill = 1;
    F.cfg.max_lbs = -1;
    F.cfg.overlap_ms = 1000;
    F.max_lbs = -1;
    F.next_lb_id = 1;
    F.tokens = json_array();
    F.overlaps = json_array();
    F.base = event_base_new();
    ck_assert_ptr_nonnull(F.base);
    tmpdir = tu_mkdtemp();
    ck_assert_ptr_nonnull(tmpdir);
    char path[512];
    snprintf(path, sizeof(path), "%s/seed.json", tmpdir);
    ck_assert_int_eq(tu_write_file(path, SEED), 0);
    ck_assert_int_eq(hz_seed_load(&F, path), 0);
    reset_req();
}

static void
teardown(void)
{
    reset_req();
    hz_actions_free(&F);
    hz_store_free(&F);
    hz_rate_free(&F);
    hz_admin_free(&F);
    json_decref(F.tokens);
    event_base_free(F.base);
    tu_rmrf(tmpdir);
    free(tmpdir);
}

/* A fresh balancer "n" in hel1 added to the store. */
static struct hz_lb *
new_lb(const char *name, const char *type)
{
    json_t *body =
        json_pack("{s:s, s:s, s:s}", "name", name, "load_balancer_type", type, "location", "hel1");
    struct hz_lb *lb = hz_lb_build(&R, body);
    json_decref(body);
    ck_assert_msg(lb != NULL, "build failed: %s", err_code());
    lb->id = F.next_lb_id;
    ck_assert_int_eq(hz_lb_add(&F, lb), 0);
    return lb;
}

static void
attach(struct hz_lb *lb, const char *want, const char *expect_ip)
{
    char ip[16];
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, lb, 7, want, NULL, ip, sizeof(ip)), 0);
    ck_assert_str_eq(ip, expect_ip);
    json_array_append_new(lb->private_net, json_pack("{s:i, s:s}", "network", 7, "ip", ip));
}

START_TEST(test_seed_loaded)
{
    ck_assert_uint_eq(F.n_nets, 1);
    ck_assert_uint_eq(F.n_lbs, 2);
    ck_assert_int_eq(F.max_lbs, 4);
    ck_assert_uint_eq(json_array_size(F.tokens), 1);
    struct hz_lb *old = hz_lb_find(&F, 5);
    ck_assert_ptr_nonnull(old);
    ck_assert_str_eq(old->name, "old");
    ck_assert_uint_eq(json_object_size(old->labels), 0);
    /* Gateway .1 and reserved .2 are skipped. */
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(old->private_net, 0), "ip")),
                     "10.0.0.3");
    struct hz_lb *lab = hz_lb_find_name(&F, "labelled");
    ck_assert_int_eq(lab->id, 6);
    ck_assert_str_eq(lab->type->name, "lb21");
    ck_assert_int_eq(lab->protect_delete, 1);
    json_t *nj = hz_net_json(&F, F.nets[0]);
    json_t *sub = json_array_get(json_object_get(nj, "subnets"), 1);
    ck_assert_str_eq(json_string_value(json_object_get(sub, "type")), "vswitch");
    ck_assert_int_eq(json_integer_value(json_object_get(sub, "vswitch_id")), 4242);
    ck_assert_str_eq(json_string_value(json_object_get(sub, "gateway")), "10.0.1.1");
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(nj, "load_balancers"), 0)),
                     5);
    json_decref(nj);
}
END_TEST

START_TEST(test_seed_rejects_bad_files)
{
    const char *bad[] = {
        "{\"networks\":[{\"name\":\"n\",\"ip_range\":\"nonsense\"}]}",
        "{\"networks\":[{\"name\":\"n\",\"ip_range\":\"10.0.0.0/16\",\"subnets\":"
        "[{\"type\":\"vswitch\",\"ip_range\":\"10.0.1.0/24\"}]}]}",
        "{\"load_balancers\":[{\"name\":\"x\",\"load_balancer_type\":\"lb99\",\"location\":"
        "\"hel1\"}]}",
        "{\"load_balancers\":[{\"name\":\"x\",\"load_balancer_type\":\"lb11\",\"location\":"
        "\"hel1\","
        "\"labels\":{\"bad key\":\"v\"}}]}",
        "{\"tokens\":[\"\"]}",
        "[1,2]",
        "{\"broken\":",
    };
    char path[512];
    snprintf(path, sizeof(path), "%s/bad.json", tmpdir);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct hz_fake g;
        memset(&g, 0, sizeof(g));
        g.cfg.max_lbs = -1;
        g.next_lb_id = 1;
        g.tokens = json_array();
        ck_assert_int_eq(tu_write_file(path, bad[i]), 0);
        ck_assert_msg(hz_seed_load(&g, path) < 0, "seed %zu accepted", i);
        hz_store_free(&g);
        json_decref(g.tokens);
    }
}
END_TEST

START_TEST(test_attach_allocation)
{
    struct hz_lb *a = new_lb("a", "lb11");
    struct hz_lb *b = new_lb("b", "lb11");
    attach(a, NULL, "10.0.0.4");
    attach(b, "10.0.0.20", "10.0.0.20");
    char ip[16];
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, a, 7, NULL, NULL, ip, sizeof(ip)), -1);
    ck_assert_str_eq(err_code(), "load_balancer_already_attached");
    struct hz_lb *c = new_lb("c", "lb11");
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, c, 7, "10.0.0.20", NULL, ip, sizeof(ip)), -1);
    ck_assert_str_eq(err_code(), "ip_not_available");
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, c, 7, "10.0.0.2", NULL, ip, sizeof(ip)), -1);
    ck_assert_str_eq(err_code(), "ip_not_available");
    reset_req();
    /* A vSwitch subnet cannot hold a cloud resource's IP. */
    ck_assert_int_eq(hz_attach_network(&R, c, 7, "10.0.1.50", NULL, ip, sizeof(ip)), -1);
    ck_assert_str_eq(err_code(), "ip_not_available");
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, c, 7, "192.168.0.1", NULL, ip, sizeof(ip)), -1);
    ck_assert_str_eq(err_code(), "invalid_input");
    ck_assert_int_eq(R.status, 400);
    /* No cloud subnet in us-east. */
    json_t *body = json_pack("{s:s, s:s, s:s}", "name", "far", "load_balancer_type", "lb11",
                             "location", "ash");
    reset_req();
    struct hz_lb *far = hz_lb_build(&R, body);
    json_decref(body);
    ck_assert_ptr_nonnull(far);
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, far, 7, NULL, NULL, ip, sizeof(ip)), -1);
    ck_assert_str_eq(err_code(), "no_subnet_available");
    hz_lb_free(far);
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, c, 99, NULL, NULL, ip, sizeof(ip)), -1);
    ck_assert_str_eq(err_code(), "not_found");
    ck_assert_int_eq(R.status, 404);
}
END_TEST

/* ip_range picks the cloud subnet the IP comes from; a range that is no
 * cloud subnet of the network, a malformed one, or an ip outside it is
 * refused and attaches nothing. */
START_TEST(test_attach_ip_range)
{
    struct hz_lb *a = new_lb("a", "lb11");
    struct hz_lb *b = new_lb("b", "lb11");
    char ip[16];
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, a, 7, NULL, "10.0.2.0/24", ip, sizeof(ip)), 0);
    ck_assert_str_eq(ip, "10.0.2.2");
    json_array_append_new(a->private_net, json_pack("{s:i, s:s}", "network", 7, "ip", ip));
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, b, 7, NULL, "10.0.2.0/24", ip, sizeof(ip)), 0);
    ck_assert_str_eq(ip, "10.0.2.3");
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, b, 7, "10.0.2.40", "10.0.2.0/24", ip, sizeof(ip)), 0);
    ck_assert_str_eq(ip, "10.0.2.40");
    /* the first cloud subnet without ip_range */
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, b, 7, NULL, NULL, ip, sizeof(ip)), 0);
    ck_assert_str_eq(ip, "10.0.0.4");
    const char *no_subnet[] = {"10.0.1.0/24", "10.0.3.0/24", "10.0.2.0/25", "10.0.0.0/16",
                               "192.168.0.0/24"};
    for (size_t i = 0; i < sizeof(no_subnet) / sizeof(no_subnet[0]); i++) {
        reset_req();
        ck_assert_int_eq(hz_attach_network(&R, b, 7, NULL, no_subnet[i], ip, sizeof(ip)), -1);
        ck_assert_msg(strcmp(err_code(), "no_subnet_available") == 0, "%s: %s", no_subnet[i],
                      err_code());
        ck_assert_int_eq(R.status, 422);
    }
    const char *malformed[] = {"10.0.2.0", "10.0.2.0/33", "ten/24", ""};
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        reset_req();
        ck_assert_int_eq(hz_attach_network(&R, b, 7, NULL, malformed[i], ip, sizeof(ip)), -1);
        ck_assert_str_eq(err_code(), "invalid_input");
        ck_assert_int_eq(R.status, 400);
    }
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, b, 7, "10.0.0.40", "10.0.2.0/24", ip, sizeof(ip)), -1);
    ck_assert_str_eq(err_code(), "invalid_input");
    reset_req();
    ck_assert_int_eq(hz_attach_network(&R, b, 7, "10.0.2.2", "10.0.2.0/24", ip, sizeof(ip)), -1);
    ck_assert_str_eq(err_code(), "ip_not_available");
    ck_assert_uint_eq(json_array_size(b->private_net), 0);
}
END_TEST

static int
check_ip(struct hz_lb *lb, const char *ip)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"type\":\"ip\",\"ip\":{\"ip\":\"%s\"}}", ip);
    json_t *t = json_loads(body, 0, NULL), *out = NULL;
    reset_req();
    int rc = hz_check_target(&R, lb, t, &out);
    json_decref(t);
    if (rc == 0)
        json_array_append_new(lb->targets, out);
    return rc;
}

START_TEST(test_ip_targets)
{
    struct hz_lb *lb = new_lb("t", "lb11");
    ck_assert_int_eq(check_ip(lb, "10.0.1.5"), -1);
    ck_assert_str_eq(err_code(), "load_balancer_not_attached_to_network");
    ck_assert_int_eq(R.status, 422);
    attach(lb, NULL, "10.0.0.4");
    ck_assert_int_eq(check_ip(lb, "10.0.1.5"), 0);
    ck_assert_int_eq(check_ip(lb, "10.0.1.5"), -1);
    ck_assert_str_eq(err_code(), "target_already_defined");
    ck_assert_int_eq(check_ip(lb, "10.0.0.9"), -1);
    ck_assert_str_eq(err_code(), "cloud_resource_ip_not_allowed");
    ck_assert_int_eq(check_ip(lb, "172.16.0.1"), -1);
    ck_assert_str_eq(err_code(), "cloud_resource_ip_not_allowed");
    ck_assert_int_eq(check_ip(lb, "not-an-ip"), -1);
    ck_assert_str_eq(err_code(), "invalid_input");
    for (int i = 1; i < 25; i++) {
        char ip[16];
        snprintf(ip, sizeof(ip), "10.0.1.%d", 100 + i);
        ck_assert_int_eq(check_ip(lb, ip), 0);
    }
    ck_assert_uint_eq(json_array_size(lb->targets), 25);
    ck_assert_int_eq(check_ip(lb, "10.0.1.200"), -1);
    ck_assert_str_eq(err_code(), "resource_limit_exceeded");
    ck_assert_int_eq(R.status, 403);
}
END_TEST

static int
check_svc(struct hz_lb *lb, const char *body)
{
    json_t *s = json_loads(body, 0, NULL), *out = NULL;
    ck_assert_ptr_nonnull(s);
    reset_req();
    int rc = hz_check_service(&R, lb, s, &out);
    json_decref(s);
    if (rc == 0)
        json_array_append_new(lb->services, out);
    return rc;
}

START_TEST(test_services)
{
    struct hz_lb *lb = new_lb("s", "lb11");
    ck_assert_int_eq(
        check_svc(lb, "{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080}"), 0);
    json_t *s0 = json_array_get(lb->services, 0);
    json_t *hc = json_object_get(s0, "health_check");
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "port")), 30080);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "interval")), 15);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "timeout")), 10);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "retries")), 3);
    ck_assert_int_eq(
        check_svc(lb, "{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":1}"), -1);
    ck_assert_str_eq(err_code(), "source_port_already_used");
    ck_assert_int_eq(check_svc(lb, "{\"protocol\":\"http\",\"listen_port\":8080}"), 0);
    json_t *s1 = json_array_get(lb->services, 1);
    ck_assert_int_eq(json_integer_value(json_object_get(s1, "destination_port")), 80);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(s1, "http"), "cookie_name")),
                     "HCLBSTICKY");
    ck_assert(json_is_null(json_object_get(s0, "http")));
}
END_TEST

/* Put an uploaded certificate with this id into the store. */
static void
add_cert(int id)
{
    struct hz_cert *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    c->id = id;
    c->name = strdup("unit-cert");
    c->labels = json_object();
    c->domains = json_array();
    struct hz_cert **na = realloc(F.certs, (F.n_certs + 1) * sizeof(*na));
    ck_assert(c->name && c->labels && c->domains && na);
    F.certs = na;
    F.certs[F.n_certs++] = c;
    F.cap_certs = F.n_certs;
}

START_TEST(test_service_limits_and_update)
{
    struct hz_lb *lb = new_lb("s", "lb11");
    /* https needs a certificate that exists. */
    ck_assert_int_eq(check_svc(lb, "{\"protocol\":\"https\"}"), -1);
    ck_assert_str_eq(err_code(), "invalid_input");
    ck_assert_int_eq(check_svc(lb, "{\"protocol\":\"https\",\"http\":{\"certificates\":[1]}}"), -1);
    ck_assert_str_eq(err_code(), "not_found");
    add_cert(1);
    ck_assert_int_eq(check_svc(lb, "{\"protocol\":\"https\",\"http\":{\"certificates\":[1]}}"), 0);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_array_get(lb->services, 0), "listen_port")), 443);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_array_get(lb->services, 0), "destination_port")),
        80);
    ck_assert_int_eq(
        check_svc(lb, "{\"protocol\":\"udp\",\"listen_port\":53,\"destination_port\":53}"), -1);
    ck_assert_str_eq(err_code(), "invalid_input");
    ck_assert_int_eq(
        check_svc(lb, "{\"protocol\":\"tcp\",\"listen_port\":0,\"destination_port\":53}"), -1);
    ck_assert_str_eq(err_code(), "invalid_input");
    ck_assert_int_eq(check_svc(lb, "{\"protocol\":\"tcp\",\"listen_port\":1,\"destination_port\":2,"
                                   "\"health_check\":{\"protocol\":\"tcp\",\"interval\":1}}"),
                     -1);
    ck_assert_str_eq(err_code(), "invalid_input");
    for (int p = 1; p <= 4; p++) {
        char b[128];
        snprintf(b, sizeof(b), "{\"protocol\":\"tcp\",\"listen_port\":%d,\"destination_port\":%d}",
                 p, 30000 + p);
        ck_assert_int_eq(check_svc(lb, b), 0);
    }
    ck_assert_int_eq(
        check_svc(lb, "{\"protocol\":\"tcp\",\"listen_port\":9,\"destination_port\":9}"), -1);
    ck_assert_str_eq(err_code(), "resource_limit_exceeded");

    /* update_service merges over the stored service. */
    json_t *base = json_array_get(lb->services, 1); /* listen 1 */
    json_t *req = json_pack("{s:s, s:i, s:i, s:{s:i}}", "protocol", "tcp", "listen_port", 1,
                            "destination_port", 31111, "health_check", "retries", 5);
    json_t *out = NULL;
    reset_req();
    ck_assert_int_eq(hz_merge_service(&R, lb, base, req, &out), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(out, "destination_port")), 31111);
    ck_assert_int_eq(json_integer_value(json_object_get(out, "listen_port")), 1);
    json_t *hc = json_object_get(out, "health_check");
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "retries")), 5);
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "interval")), 15);
    json_decref(req);
    json_decref(out);
}
END_TEST

START_TEST(test_actions_lock_and_complete)
{
    struct hz_lb *lb = new_lb("act", "lb11");
    struct hz_action *a = hz_action_start(&F, "add_target", lb->id, NULL, NULL);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(lb->running_action, a->id);
    json_t *j = hz_action_json(a);
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "running");
    ck_assert(json_is_null(json_object_get(j, "finished")));
    ck_assert_int_eq(json_integer_value(
                         json_object_get(json_array_get(json_object_get(j, "resources"), 0), "id")),
                     lb->id);
    json_decref(j);
    struct hz_action *b = hz_action_start(&F, "change_algorithm", lb->id, "boom", "it broke");
    ck_assert_int_eq(b->id, a->id + 1);
    ck_assert_ptr_eq(hz_action_find(&F, b->id), b);
    ck_assert_ptr_null(hz_action_find(&F, b->id + 1));
    long long t0 = tu_now_ms();
    while ((a->status == HZ_ACTION_RUNNING || b->status == HZ_ACTION_RUNNING) &&
           tu_now_ms() - t0 < 2000)
        event_base_loop(F.base, EVLOOP_ONCE);
    ck_assert_int_eq(a->status, HZ_ACTION_SUCCESS);
    ck_assert_int_eq(b->status, HZ_ACTION_ERROR);
    ck_assert_int_eq(lb->running_action, 0);
    j = hz_action_json(b);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                     "boom");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "progress")), 100);
    json_decref(j);
}
END_TEST

START_TEST(test_pagination_bounds)
{
    size_t from, to;
    json_t *meta;
    struct {
        const char *q;
        size_t total, from, to;
        int page, last;
        int prev, next; /* 0 = null */
    } cases[] = {
        {"page=1&per_page=2", 5, 0, 2, 1, 3, 0, 2},
        {"page=2&per_page=2", 5, 2, 4, 2, 3, 1, 3},
        {"page=3&per_page=2", 5, 4, 5, 3, 3, 2, 0},
        {"page=9&per_page=2", 5, 5, 5, 9, 3, 3, 0},
        {"", 0, 0, 0, 1, 1, 0, 0},
        {"per_page=500", 120, 0, 50, 1, 3, 0, 2},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        reset_req();
        TAILQ_INIT(&R.query);
        ck_assert_int_eq(evhttp_parse_query_str(cases[i].q, &R.query), 0);
        R.query_ok = 1;
        ck_assert_int_eq(hz_page(&R, cases[i].total, &from, &to, &meta), 0);
        json_t *p = json_object_get(meta, "pagination");
        ck_assert_uint_eq(from, cases[i].from);
        ck_assert_uint_eq(to, cases[i].to);
        ck_assert_int_eq(json_integer_value(json_object_get(p, "page")), cases[i].page);
        ck_assert_int_eq(json_integer_value(json_object_get(p, "last_page")), cases[i].last);
        ck_assert_int_eq(json_integer_value(json_object_get(p, "total_entries")),
                         (int)cases[i].total);
        ck_assert_int_eq(json_integer_value(json_object_get(p, "previous_page")), cases[i].prev);
        ck_assert_int_eq(json_integer_value(json_object_get(p, "next_page")), cases[i].next);
        json_decref(meta);
        evhttp_clear_headers(&R.query);
    }
    reset_req();
    TAILQ_INIT(&R.query);
    ck_assert_int_eq(evhttp_parse_query_str("page=0", &R.query), 0);
    R.query_ok = 1;
    ck_assert_int_eq(hz_page(&R, 3, &from, &to, &meta), -1);
    ck_assert_str_eq(err_code(), "invalid_input");
    evhttp_clear_headers(&R.query);
}
END_TEST

START_TEST(test_rate_bucket)
{
    long limit, rem;
    long long reset;
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(hz_rate_take(&F, "tok", &limit, &rem, &reset), 1);
    ck_assert_int_eq(limit, 10);
    ck_assert_int_eq(rem, 0);
    ck_assert_int_eq(hz_rate_take(&F, "tok", &limit, &rem, &reset), 0);
    ck_assert(reset >= (long long)time(NULL) + 9);
    /* Other tokens have their own bucket. */
    ck_assert_int_eq(hz_rate_take(&F, "other", &limit, &rem, &reset), 1);
    ck_assert_int_eq(rem, 9);
    tu_sleep_ms(1100);
    ck_assert_int_eq(hz_rate_take(&F, "tok", &limit, &rem, &reset), 1);
}
END_TEST

/* File name in tmpdir read whole (new). */
static char *
tmp_file(const char *name)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    char *text = tu_read_file(path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    return text;
}

/* hz_pem_check on (crt, key): its result; field and message in fbuf. */
static int
pem_check(const char *crt, const char *key, char *fbuf, size_t len)
{
    struct hz_cert_info info;
    const char *field = "";
    char msg[160] = "";
    int rc = hz_pem_check(crt, key, time(NULL), &info, &field, msg, sizeof(msg));
    if (rc == 0)
        json_decref(info.domains);
    snprintf(fbuf, len, "%s: %s", field, msg);
    return rc;
}

START_TEST(test_pem_check_and_issue)
{
    char script[600], f[256];
    snprintf(script, sizeof(script), "%s",
             tu_source_path("tests/fakes/hetzner/tests/gen_certs.sh"));
    char *argv[] = {"sh", script, tmpdir, NULL};
    ck_assert_int_eq(tu_run(argv, NULL, NULL, 60000), 0);
    char *crt = tmp_file("good.crt"), *key = tmp_file("good.key"), *other = tmp_file("other.key");
    ck_assert_int_eq(pem_check(crt, key, f, sizeof(f)), 0);
    ck_assert_int_eq(pem_check(crt, other, f, sizeof(f)), -1);
    ck_assert_str_eq(f, "private_key: does not match the certificate");
    ck_assert_int_eq(pem_check("", key, f, sizeof(f)), -1);
    ck_assert_str_eq(f, "certificate: is not a PEM encoded X.509 certificate");
    ck_assert_int_eq(pem_check(crt, "", f, sizeof(f)), -1);
    ck_assert_str_eq(f, "private_key: is not a PEM encoded private key");
    /* A chain: more certificates after the leaf parse too, or it fails. */
    size_t n = strlen(crt);
    char *chain = malloc(2 * n + 64);
    ck_assert_ptr_nonnull(chain);
    snprintf(chain, 2 * n + 64, "%s%s", crt, crt);
    ck_assert_int_eq(pem_check(chain, key, f, sizeof(f)), 0);
    snprintf(chain, 2 * n + 64, "%s-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
             crt);
    ck_assert_int_eq(pem_check(chain, key, f, sizeof(f)), -1);
    ck_assert_str_eq(f, "certificate: has a chain certificate that is not valid PEM");
    free(chain);

    /* Issued: names, 90 days, a fingerprint of 32 bytes. */
    json_t *domains = json_pack("[s,s]", "example.net", "*.example.net");
    struct hz_cert_info info;
    char *pem = NULL;
    time_t now = time(NULL);
    ck_assert_int_eq(hz_pem_issue(domains, now, &pem, &info), 0);
    ck_assert(json_equal(info.domains, domains));
    ck_assert_int_eq((long long)(info.not_after - info.not_before), 90LL * 86400);
    ck_assert_uint_eq(strlen(info.fingerprint), 95);
    ck_assert_ptr_nonnull(strstr(pem, "-----BEGIN CERTIFICATE-----"));
    /* Its key is not given out: any other key is refused. */
    ck_assert_int_eq(pem_check(pem, key, f, sizeof(f)), -1);
    ck_assert_str_eq(f, "private_key: does not match the certificate");
    json_decref(info.domains);
    json_decref(domains);
    free(pem);
    free(crt);
    free(key);
    free(other);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("hetzner-store");
    TCase *tc = tcase_create("store");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_seed_loaded);
    tcase_add_test(tc, test_seed_rejects_bad_files);
    tcase_add_test(tc, test_attach_allocation);
    tcase_add_test(tc, test_attach_ip_range);
    tcase_add_test(tc, test_ip_targets);
    tcase_add_test(tc, test_services);
    tcase_add_test(tc, test_service_limits_and_update);
    tcase_add_test(tc, test_actions_lock_and_complete);
    tcase_add_test(tc, test_pagination_bounds);
    tcase_add_test(tc, test_rate_bucket);
    tcase_add_test(tc, test_pem_check_and_issue);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
