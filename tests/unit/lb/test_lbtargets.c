/* Target-node selection for load-balancer modules, rule by rule. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "lb/lbtargets.h"
#include "testutil.h"

static json_t *
parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    ck_assert_msg(j != NULL, "bad test JSON: %s", e.text);
    return j;
}

/* A node: name, ready, cordoned, ip, extra labels JSON. */
static json_t *
node(const char *name, int ready, int cordoned, const char *ip, const char *labels)
{
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"metadata\":{\"name\":\"%s\",\"labels\":%s},"
             "\"spec\":{\"unschedulable\":%s},"
             "\"status\":{\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\"},"
             "{\"type\":\"Ready\",\"status\":\"%s\"}],"
             "\"addresses\":[{\"type\":\"Hostname\",\"address\":\"%s\"}%s%s%s]}}",
             name, labels ? labels : "{}", cordoned ? "true" : "false", ready ? "True" : "False",
             name, ip ? ",{\"type\":\"InternalIP\",\"address\":\"" : "", ip ? ip : "",
             ip ? "\"}" : "");
    return parse(buf);
}

static json_t *
service(const char *etp)
{
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"metadata\":{\"name\":\"web\",\"namespace\":\"shop\"},"
             "\"spec\":{\"type\":\"LoadBalancer\"%s%s%s}}",
             etp ? ",\"externalTrafficPolicy\":\"" : "", etp ? etp : "", etp ? "\"" : "");
    return parse(buf);
}

struct world {
    json_t *nodes[8];
    size_t nnodes;
    json_t *slices[4];
    size_t nslices;
};

static void
world_free(struct world *w)
{
    for (size_t i = 0; i < w->nnodes; i++)
        json_decref(w->nodes[i]);
    for (size_t i = 0; i < w->nslices; i++)
        json_decref(w->slices[i]);
}

/* Run a selection and return the targets as "node=ip,node=ip". */
static void
select_str(const json_t *svc, enum core_lb_policy pol, const char *selector, struct world *w,
           size_t max, char *buf, size_t len, size_t *dropped)
{
    struct core_lb_selector *sel = NULL;
    char err[256];
    if (selector)
        ck_assert_int_eq(core_lb_selector_parse(selector, &sel, err, sizeof(err)), 0);
    struct core_lb_targets t;
    ck_assert_int_eq(core_lb_select_targets(svc, pol, sel, (const json_t *const *)w->nodes,
                                            w->nnodes, (const json_t *const *)w->slices, w->nslices,
                                            max, &t),
                     0);
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < t.n; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s=%s", i ? "," : "", t.v[i].node, t.v[i].ip);
    if (dropped)
        *dropped = t.dropped;
    core_lb_targets_clear(&t);
    core_lb_selector_free(sel);
}

START_TEST(cluster_every_node_but_cordoned_and_not_ready)
{
    struct world w = {0};
    w.nodes[w.nnodes++] = node("n3", 1, 0, "10.0.1.3", NULL);
    w.nodes[w.nnodes++] = node("n1", 1, 0, "10.0.1.1", NULL);
    w.nodes[w.nnodes++] = node("n2", 1, 1, "10.0.1.2", NULL); /* cordoned */
    w.nodes[w.nnodes++] = node("n4", 0, 0, "10.0.1.4", NULL); /* not ready */
    json_t *svc = service(NULL);
    ck_assert_int_eq(core_lb_policy_of(svc, 1), CORE_LB_POLICY_CLUSTER);
    char buf[512];
    select_str(svc, CORE_LB_POLICY_CLUSTER, NULL, &w, 0, buf, sizeof(buf), NULL);
    ck_assert_str_eq(buf, "n1=10.0.1.1,n3=10.0.1.3");
    json_decref(svc);
    world_free(&w);
}
END_TEST

START_TEST(excluded_nodes_stay_out_under_every_policy)
{
    struct world w = {0};
    const char *ex = "{\"node.kubernetes.io/exclude-from-external-load-balancers\":\"\"}";
    w.nodes[w.nnodes++] = node("cp", 1, 0, "10.0.1.9", ex);
    w.nodes[w.nnodes++] = node("n1", 1, 0, "10.0.1.1", NULL);
    w.slices[w.nslices++] =
        parse("{\"metadata\":{\"namespace\":\"shop\",\"labels\":{\"kubernetes.io/service-name\":"
              "\"web\"}},\"endpoints\":[{\"addresses\":[\"1.1.1.1\"],\"nodeName\":\"cp\"},"
              "{\"addresses\":[\"1.1.1.2\"],\"nodeName\":\"n1\"}]}");
    json_t *svc = service("Local");
    char buf[512];
    select_str(svc, CORE_LB_POLICY_CLUSTER, NULL, &w, 0, buf, sizeof(buf), NULL);
    ck_assert_str_eq(buf, "n1=10.0.1.1");
    select_str(svc, CORE_LB_POLICY_LOCAL, NULL, &w, 0, buf, sizeof(buf), NULL);
    ck_assert_str_eq(buf, "n1=10.0.1.1");
    select_str(svc, CORE_LB_POLICY_SELECTOR, "", &w, 0, buf, sizeof(buf), NULL);
    ck_assert_str_eq(buf, "n1=10.0.1.1");
    json_decref(svc);
    world_free(&w);
}
END_TEST

START_TEST(local_nodes_with_ready_or_serving_terminating_endpoints)
{
    struct world w = {0};
    w.nodes[w.nnodes++] = node("a", 1, 0, "10.0.1.1", NULL);
    w.nodes[w.nnodes++] = node("b", 1, 0, "10.0.1.2", NULL);
    w.nodes[w.nnodes++] = node("c", 0, 1, "10.0.1.3", NULL); /* cordoned + not ready */
    w.nodes[w.nnodes++] = node("d", 1, 0, "10.0.1.4", NULL);
    w.nodes[w.nnodes++] = node("e", 1, 0, "10.0.1.5", NULL);
    /* a: ready; b: pod not ready; c: ready endpoint on a bad node;
     * d: terminating but serving, no ready one; e: no endpoint. Another
     * service's slice and another namespace's slice do not count. */
    w.slices[w.nslices++] =
        parse("{\"metadata\":{\"namespace\":\"shop\",\"labels\":{\"kubernetes.io/service-name\":"
              "\"web\"}},\"endpoints\":["
              "{\"addresses\":[\"1\"],\"nodeName\":\"a\",\"conditions\":{\"ready\":true}},"
              "{\"addresses\":[\"2\"],\"nodeName\":\"b\",\"conditions\":{\"ready\":false}},"
              "{\"addresses\":[\"3\"],\"nodeName\":\"c\",\"conditions\":{\"ready\":true}}]}");
    w.slices[w.nslices++] =
        parse("{\"metadata\":{\"namespace\":\"shop\",\"labels\":{\"kubernetes.io/service-name\":"
              "\"web\"}},\"endpoints\":["
              "{\"addresses\":[\"4\"],\"nodeName\":\"d\",\"conditions\":{\"ready\":false,"
              "\"serving\":true,\"terminating\":true}}]}");
    w.slices[w.nslices++] =
        parse("{\"metadata\":{\"namespace\":\"shop\",\"labels\":{\"kubernetes.io/service-name\":"
              "\"api\"}},\"endpoints\":[{\"addresses\":[\"5\"],\"nodeName\":\"e\"}]}");
    w.slices[w.nslices++] =
        parse("{\"metadata\":{\"namespace\":\"other\",\"labels\":{\"kubernetes.io/service-name\":"
              "\"web\"}},\"endpoints\":[{\"addresses\":[\"6\"],\"nodeName\":\"e\"}]}");
    json_t *svc = service("Local");
    ck_assert_int_eq(core_lb_policy_of(svc, 1), CORE_LB_POLICY_LOCAL);
    char buf[512];
    select_str(svc, CORE_LB_POLICY_LOCAL, NULL, &w, 0, buf, sizeof(buf), NULL);
    ck_assert_str_eq(buf, "a=10.0.1.1,c=10.0.1.3,d=10.0.1.4");
    json_decref(svc);
    world_free(&w);
}
END_TEST

START_TEST(terminating_not_serving_is_left_out)
{
    struct world w = {0};
    w.nodes[w.nnodes++] = node("a", 1, 0, "10.0.1.1", NULL);
    w.slices[w.nslices++] =
        parse("{\"metadata\":{\"namespace\":\"shop\",\"labels\":{\"kubernetes.io/service-name\":"
              "\"web\"}},\"endpoints\":[{\"addresses\":[\"1\"],\"nodeName\":\"a\","
              "\"conditions\":{\"ready\":false,\"serving\":false,\"terminating\":true}}]}");
    json_t *svc = service("Local");
    char buf[512];
    select_str(svc, CORE_LB_POLICY_LOCAL, NULL, &w, 0, buf, sizeof(buf), NULL);
    ck_assert_str_eq(buf, "");
    json_decref(svc);
    world_free(&w);
}
END_TEST

START_TEST(selector_syntax_and_matching)
{
    struct world w = {0};
    w.nodes[w.nnodes++] =
        node("a", 1, 0, "10.0.1.1",
             "{\"beta.kubernetes.io/arch\":\"amd64\",\"node-role.kubernetes.io/control-plane\":"
             "\"true\"}");
    w.nodes[w.nnodes++] = node("b", 0, 1, "10.0.1.2", "{\"beta.kubernetes.io/arch\":\"amd64\"}");
    w.nodes[w.nnodes++] = node("c", 1, 0, "10.0.1.3", "{\"beta.kubernetes.io/arch\":\"arm64\"}");
    w.nodes[w.nnodes++] = node("d", 1, 0, "10.0.1.4", "{\"gpu\":\"\"}");
    json_t *svc = service(NULL);
    ck_assert_int_eq(core_lb_policy_of(svc, 0), CORE_LB_POLICY_SELECTOR);
    char buf[512];
    select_str(svc, CORE_LB_POLICY_SELECTOR,
               "node-role.kubernetes.io/control-plane!=true,beta.kubernetes.io/arch=amd64", &w, 0,
               buf, sizeof(buf), NULL);
    ck_assert_str_eq(buf, "b=10.0.1.2");
    select_str(svc, CORE_LB_POLICY_SELECTOR, "gpu", &w, 0, buf, sizeof(buf), NULL);
    ck_assert_str_eq(buf, "d=10.0.1.4");
    select_str(svc, CORE_LB_POLICY_SELECTOR, "!gpu, beta.kubernetes.io/arch==arm64", &w, 0, buf,
               sizeof(buf), NULL);
    ck_assert_str_eq(buf, "c=10.0.1.3");
    select_str(svc, CORE_LB_POLICY_SELECTOR, NULL, &w, 0, buf, sizeof(buf), NULL);
    ck_assert_str_eq(buf, "a=10.0.1.1,b=10.0.1.2,c=10.0.1.3,d=10.0.1.4");
    json_decref(svc);
    world_free(&w);
}
END_TEST

/* Set-based terms, as Kubernetes label selectors have them: "in" needs the
 * label with one of the values, "notin" its absence or none of them; the
 * commas inside the parentheses do not end the term. */
START_TEST(set_based_selector_terms)
{
    struct world w = {0};
    w.nodes[w.nnodes++] = node("a", 1, 0, "10.0.1.1", "{\"arch\":\"amd64\",\"zone\":\"z1\"}");
    w.nodes[w.nnodes++] = node("b", 1, 0, "10.0.1.2", "{\"arch\":\"arm64\",\"zone\":\"z2\"}");
    w.nodes[w.nnodes++] = node("c", 1, 0, "10.0.1.3", "{\"arch\":\"riscv\"}");
    json_t *svc = service(NULL);
    char buf[512];
    select_str(svc, CORE_LB_POLICY_SELECTOR, "arch in (amd64, arm64)", &w, 0, buf, sizeof(buf),
               NULL);
    ck_assert_str_eq(buf, "a=10.0.1.1,b=10.0.1.2");
    select_str(svc, CORE_LB_POLICY_SELECTOR, "zone notin (z2),arch in(amd64,arm64,riscv)", &w, 0,
               buf, sizeof(buf), NULL);
    ck_assert_str_eq(buf, "a=10.0.1.1,c=10.0.1.3");
    select_str(svc, CORE_LB_POLICY_SELECTOR, "zone, arch notin (amd64)", &w, 0, buf, sizeof(buf),
               NULL);
    ck_assert_str_eq(buf, "b=10.0.1.2");
    json_decref(svc);
    world_free(&w);
}
END_TEST

START_TEST(bad_selectors_are_rejected_with_the_term)
{
    struct core_lb_selector *sel = NULL;
    char err[256];
    ck_assert_int_eq(core_lb_selector_parse("a=b,,c", &sel, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "empty term"));
    ck_assert_int_eq(core_lb_selector_parse("a=b=c", &sel, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "bad term \"a=b=c\""));
    ck_assert_int_eq(core_lb_selector_parse("!", &sel, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(core_lb_selector_parse("a b", &sel, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(core_lb_selector_parse("a=b,", &sel, err, sizeof(err)), -EINVAL);
    const char *bad[] = {"a in ()",    "a in (b",    "a in b",     "a notin (b,c", "a inn (b)",
                         "a in (b c)", "(a) in (b)", "a in (b) c", "a in (b),)",   "a=(b)",
                         "a>5",        "a<5",        "!a in (b)"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(core_lb_selector_parse(bad[i], &sel, err, sizeof(err)) == -EINVAL,
                      "\"%s\" accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "node selector"));
    }
    ck_assert_int_eq(core_lb_selector_parse(" k = v ", &sel, err, sizeof(err)), 0);
    ck_assert_uint_eq(sel->n, 1);
    ck_assert_str_eq(sel->terms[0].key, "k");
    ck_assert_str_eq(sel->terms[0].value, "v");
    core_lb_selector_free(sel);
}
END_TEST

START_TEST(cap_drops_extra_nodes_in_a_stable_order)
{
    struct world w = {0};
    const char *names[] = {"n5", "n2", "n4", "n1", "n3"};
    for (size_t i = 0; i < 5; i++) {
        char ip[32];
        snprintf(ip, sizeof(ip), "10.0.1.%zu", i + 1);
        w.nodes[w.nnodes++] = node(names[i], 1, 0, ip, NULL);
    }
    json_t *svc = service(NULL);
    char buf[512];
    size_t dropped;
    select_str(svc, CORE_LB_POLICY_CLUSTER, NULL, &w, 3, buf, sizeof(buf), &dropped);
    ck_assert_str_eq(buf, "n1=10.0.1.4,n2=10.0.1.2,n3=10.0.1.5");
    ck_assert_uint_eq(dropped, 2);
    json_decref(svc);
    world_free(&w);
}
END_TEST

START_TEST(targets_are_internal_ips_ipv4_first)
{
    json_t *n = parse("{\"metadata\":{\"name\":\"x\"},\"status\":{\"addresses\":["
                      "{\"type\":\"ExternalIP\",\"address\":\"1.2.3.4\"},"
                      "{\"type\":\"InternalIP\",\"address\":\"fd00::1\"},"
                      "{\"type\":\"InternalIP\",\"address\":\"10.0.0.7\"}]}}");
    ck_assert_str_eq(core_lb_node_internal_ip(n), "10.0.0.7");
    json_decref(n);
    n = parse("{\"metadata\":{\"name\":\"y\"},\"status\":{\"addresses\":["
              "{\"type\":\"ExternalIP\",\"address\":\"1.2.3.4\"}]}}");
    ck_assert_ptr_null(core_lb_node_internal_ip(n));
    json_decref(n);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("lbtargets");
    TCase *tc = tcase_create("lbtargets");
    tcase_add_test(tc, cluster_every_node_but_cordoned_and_not_ready);
    tcase_add_test(tc, excluded_nodes_stay_out_under_every_policy);
    tcase_add_test(tc, local_nodes_with_ready_or_serving_terminating_endpoints);
    tcase_add_test(tc, terminating_not_serving_is_left_out);
    tcase_add_test(tc, selector_syntax_and_matching);
    tcase_add_test(tc, bad_selectors_are_rejected_with_the_term);
    tcase_add_test(tc, set_based_selector_terms);
    tcase_add_test(tc, cap_drops_extra_nodes_in_a_stable_order);
    tcase_add_test(tc, targets_are_internal_ips_ipv4_first);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
