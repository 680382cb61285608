/*
 * Shared balancers, the pure part (hz_group.c, and what hz_names.c,
 * hz_plan.c say of them): the annotation's checks, members oldest first,
 * port clashes, the union, the labels, the name, the label write and
 * that a Service never adopts a group's balancer.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"

#define UA "6f1c2b8e-0001-4000-8000-00000000000a"
#define UB "6f1c2b8e-0002-4000-8000-00000000000b"
#define UC "6f1c2b8e-0003-4000-8000-00000000000c"

/* A desired balancer of type, the nports listen ports (destination port
 * + 30000) and the targets (ntargets IPs), new. */
static void
mk(struct hz_desired *d, const char *type, const int *ports, size_t nports,
   const char *const *targets, size_t ntargets)
{
    memset(d, 0, sizeof(*d));
    d->type = hz_strdup(type);
    d->location = hz_strdup("hel1");
    d->uid = hz_strdup("x");
    d->interval = 15;
    d->timeout = 10;
    d->retries = 3;
    d->public_iface = 1;
    d->https = hz_calloc(sizeof(*d->https)); /* one source: all defaults (tcp) */
    d->nhttps = 1;
    d->services = hz_calloc((nports ? nports : 1) * sizeof(*d->services));
    for (size_t i = 0; i < nports; i++)
        d->services[i] = (struct hz_svc_port){.listen = ports[i], .dest = ports[i] + 30000};
    d->nservices = nports;
    d->targets = hz_calloc((ntargets ? ntargets : 1) * sizeof(char *));
    for (size_t i = 0; i < ntargets; i++)
        d->targets[i] = hz_strdup(targets[i]);
    d->ntargets = ntargets;
}

START_TEST(the_group_must_be_a_dns_label_and_never_beside_a_name_annotation)
{
    char err[512];
    ck_assert_int_eq(hz_group_check("web", 0, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_group_check("Web", 0, 0, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "prismlb.io/shared-balancer: \"Web\""));
    ck_assert_int_eq(hz_group_check("", 0, 0, err, sizeof(err)), -EINVAL);
    char long_name[70];
    memset(long_name, 'a', 64);
    long_name[64] = '\0';
    ck_assert_int_eq(hz_group_check(long_name, 0, 0, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "63"));
    ck_assert_int_eq(hz_group_check("web", 1, 0, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "prismlb.io/shared-balancer and robotlb/balancer"));
    ck_assert_int_eq(hz_group_check("web", 0, 1, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(
        strstr(err, "prismlb.io/shared-balancer and load-balancer.hetzner.cloud/name"));
}
END_TEST

START_TEST(member_labels_are_valid_hetzner_label_keys)
{
    char key[HZ_MEMBER_KEY_MAX];
    ck_assert_int_eq(hz_group_member_key(UA, key), 0);
    ck_assert_str_eq(key, "prismlb.io/member-" UA);
    /* the name part "member-<uid>" is at most 63 characters */
    ck_assert_int_lt(strlen(key) - strlen("prismlb.io/"), 64);
    ck_assert_int_eq(hz_group_member_key("a b", key), -EINVAL);
    ck_assert_int_eq(hz_group_member_key("abc-", key), -EINVAL);
    ck_assert_int_eq(hz_group_member_key("", key), -EINVAL);
    char long_uid[64];
    memset(long_uid, 'a', 57);
    long_uid[57] = '\0';
    ck_assert_int_eq(hz_group_member_key(long_uid, key), -EINVAL);
    long_uid[56] = '\0';
    ck_assert_int_eq(hz_group_member_key(long_uid, key), 0);
    ck_assert_str_eq(hz_group_label_uid("prismlb.io/member-" UA), UA);
    ck_assert_ptr_null(hz_group_label_uid("prismlb.io/shared-balancer"));
    ck_assert_ptr_null(hz_group_label_uid("prismlb.io/member-"));
    json_t *l = json_pack("{s:s, s:s, s:s}", "prismlb.io/member-" UA, "a", "prismlb.io/member-" UB,
                          "b", "prismlb.io/shared-balancer", "web");
    ck_assert_uint_eq(hz_group_nmembers(l), 2);
    ck_assert_uint_eq(hz_group_nmembers(NULL), 0);
    json_decref(l);
}
END_TEST

START_TEST(members_are_ordered_by_creation_then_uid)
{
    struct hz_member m[4] = {
        {.key = "ns/late", .uid = UA, .created = "2026-12-03T12:00:05Z"},
        {.key = "ns/none", .uid = UA, .created = NULL},
        {.key = "ns/tie-c", .uid = UC, .created = "2026-12-03T12:00:01Z"},
        {.key = "ns/tie-b", .uid = UB, .created = "2026-12-03T12:00:01Z"},
    };
    hz_group_sort(m, 4);
    ck_assert_str_eq(m[0].key, "ns/tie-b");
    ck_assert_str_eq(m[1].key, "ns/tie-c");
    ck_assert_str_eq(m[2].key, "ns/late");
    ck_assert_str_eq(m[3].key, "ns/none");
}
END_TEST

START_TEST(a_port_an_older_member_holds_clashes_and_the_clashing_one_adds_nothing)
{
    struct hz_desired da, db, dc, dd;
    const int pa[] = {80}, pb[] = {443}, pc[] = {8080, 80}, pd[] = {8080};
    mk(&da, "lb11", pa, 1, NULL, 0);
    mk(&db, "lb11", pb, 1, NULL, 0);
    mk(&dc, "lb11", pc, 2, NULL, 0);
    mk(&dd, "lb11", pd, 1, NULL, 0);
    struct hz_member m[5] = {
        {.key = "ns/a", .uid = UA, .d = &da},
        {.key = "ns/none", .uid = UB, .d = NULL}, /* no exposable port */
        {.key = "ns/b", .uid = UB, .d = &db},
        {.key = "ns/c", .uid = UC, .d = &dc},
        /* c clashes, so its 8080 is not held: d's 8080 is free */
        {.key = "ns/d", .uid = UC, .d = &dd},
    };
    hz_group_clashes(m, 5);
    ck_assert_int_eq(m[0].clash_port, 0);
    ck_assert_int_eq(m[1].clash_port, 0);
    ck_assert_int_eq(m[2].clash_port, 0);
    ck_assert_int_eq(m[3].clash_port, 80);
    ck_assert_str_eq(m[3].clash_with, "ns/a");
    ck_assert_int_eq(m[4].clash_port, 0);
    ck_assert_ptr_eq(hz_group_oldest(m, 5), &m[0]);
    ck_assert_ptr_null(hz_group_oldest(&m[1], 1));
    hz_desired_clear(&da);
    hz_desired_clear(&db);
    hz_desired_clear(&dc);
    hz_desired_clear(&dd);
}
END_TEST

/* hccm's redirect puts Hetzner's listener on port 80 beside the https
 * service on 443: a younger member asking for 80 clashes with the one that
 * redirects, and a younger one that redirects clashes with an older 80. */
START_TEST(the_redirect_of_an_https_service_holds_port_80)
{
    struct hz_desired da, db, dc;
    const int pa[] = {443}, pb[] = {80}, pc[] = {8443};
    mk(&da, "lb11", pa, 1, NULL, 0);
    mk(&db, "lb11", pb, 1, NULL, 0);
    mk(&dc, "lb11", pc, 1, NULL, 0);
    da.services[0].protocol = HZ_PROTO_HTTPS;
    da.services[0].redirect = 1;
    struct hz_member m[2] = {
        {.key = "ns/a", .uid = UA, .d = &da},
        {.key = "ns/b", .uid = UB, .d = &db},
    };
    hz_group_clashes(m, 2);
    ck_assert_int_eq(m[0].clash_port, 0);
    ck_assert_int_eq(m[1].clash_port, 80);
    ck_assert_str_eq(m[1].clash_with, "ns/a");
    /* the other way round: the older holds 80, the younger redirects */
    struct hz_member r[2] = {
        {.key = "ns/b", .uid = UB, .d = &db},
        {.key = "ns/a", .uid = UA, .d = &da},
    };
    hz_group_clashes(r, 2);
    ck_assert_int_eq(r[0].clash_port, 0);
    ck_assert_int_eq(r[1].clash_port, 80);
    ck_assert_str_eq(r[1].clash_with, "ns/b");
    /* a service that does not redirect holds its own port only */
    struct hz_member f[2] = {
        {.key = "ns/c", .uid = UC, .d = &dc},
        {.key = "ns/b", .uid = UB, .d = &db},
    };
    hz_group_clashes(f, 2);
    ck_assert_int_eq(f[1].clash_port, 0);
    hz_desired_clear(&da);
    hz_desired_clear(&db);
    hz_desired_clear(&dc);
}
END_TEST

START_TEST(the_union_is_the_oldests_balancer_with_every_adding_members_ports_and_targets)
{
    struct hz_desired da, db, dc, u;
    const int pa[] = {80}, pb[] = {443, 8443}, pc[] = {80};
    const char *ta[] = {"10.0.1.1", "10.0.1.2"}, *tb[] = {"10.0.1.2", "10.0.1.3"},
               *tc[] = {"10.0.1.9"};
    mk(&da, "lb21", pa, 1, ta, 2);
    mk(&db, "lb11", pb, 2, tb, 2);
    mk(&dc, "lb11", pc, 1, tc, 1);
    struct hz_member m[3] = {
        {.key = "ns/a", .uid = UA, .d = &da},
        {.key = "ns/b", .uid = UB, .d = &db},
        {.key = "ns/c", .uid = UC, .d = &dc},
    };
    hz_group_clashes(m, 3);
    ck_assert_int_eq(hz_group_union(m, 3, "web.shared.prismlb.io", &u), 0);
    ck_assert_str_eq(u.name, "web.shared.prismlb.io");
    ck_assert_ptr_null(u.uid);
    ck_assert_str_eq(u.type, "lb21"); /* the oldest's */
    ck_assert_uint_eq(u.nservices, 3);
    ck_assert_int_eq(u.services[0].listen, 80);
    ck_assert_int_eq(u.services[0].dest, 30080); /* a's, not c's */
    ck_assert_int_eq(u.services[1].listen, 443);
    ck_assert_int_eq(u.services[2].listen, 8443);
    /* each service keeps its own member's http settings */
    ck_assert_uint_eq(u.nhttps, 2);
    ck_assert_uint_eq(u.services[0].http, 0);
    ck_assert_uint_eq(u.services[1].http, 1);
    ck_assert_uint_eq(u.services[2].http, 1);
    /* c clashes: its target is not added */
    ck_assert_uint_eq(u.ntargets, 3);
    ck_assert_str_eq(u.targets[0], "10.0.1.1");
    ck_assert_str_eq(u.targets[1], "10.0.1.2");
    ck_assert_str_eq(u.targets[2], "10.0.1.3");
    /* stolen: the members' are empty */
    ck_assert_uint_eq(da.nservices + db.nservices + db.ntargets, 0);
    hz_desired_clear(&u);
    hz_desired_clear(&da);
    hz_desired_clear(&db);
    hz_desired_clear(&dc);
    struct hz_member none[1] = {{.key = "ns/a", .uid = UA, .d = NULL}};
    ck_assert_int_eq(hz_group_union(none, 1, "x", &u), -ENOENT);
}
END_TEST

START_TEST(balancer_level_settings_that_differ_from_the_oldests_are_named)
{
    struct hz_desired o, x;
    char out[512];
    mk(&o, "lb11", NULL, 0, NULL, 0);
    mk(&x, "lb11", NULL, 0, NULL, 0);
    hz_group_differs(&o, &x, out, sizeof(out));
    ck_assert_str_eq(out, "");
    hz_free(x.type);
    x.type = hz_strdup("lb21");
    x.algorithm = HZ_ALG_ROUND_ROBIN;
    x.network = hz_strdup("k8s");
    x.protect_given = 1;
    x.protect = 1;
    x.rdns4 = hz_strdup("lb.example.com");
    x.interval = 30;
    hz_group_differs(&o, &x, out, sizeof(out));
    ck_assert_str_eq(out, "type, algorithm, network, delete protection, reverse DNS, health "
                          "check timing");
    hz_desired_clear(&o);
    hz_desired_clear(&x);
}
END_TEST

/* hz_group_gone_fn: UB left; UA, UC and the unknown one did not. */
static int
gone_b(void *arg, const char *uid)
{
    (void)arg;
    return strcmp(uid, UB) == 0;
}

START_TEST(labels_are_the_group_the_adding_members_and_the_others_kept)
{
    struct hz_desired da, dc;
    const int pa[] = {80}, pc[] = {80};
    mk(&da, "lb11", pa, 1, NULL, 0);
    mk(&dc, "lb11", pc, 1, NULL, 0);
    struct hz_member m[2] = {
        {.key = "ns/a", .uid = UA, .name = "a", .d = &da},
        {.key = "ns/c", .uid = UC, .name = "c", .d = &dc},
    };
    hz_group_clashes(m, 2);
    json_t *have = json_pack("{s:s, s:s, s:s, s:s}", "team", "blue", "robotlb/service-uid", "x",
                             "prismlb.io/member-" UB, "b", "prismlb.io/member-unknown-1", "z");
    json_t *set, *drop;
    ck_assert_int_eq(hz_group_label_changes(have, "web", m, 2, gone_b, NULL, &set, &drop), 0);
    json_t *want = hz_group_label_edit(have, set, drop);
    json_t *exp =
        json_pack("{s:s, s:s, s:s, s:s}", "team", "blue", "prismlb.io/shared-balancer", "web",
                  "prismlb.io/member-" UA, "a", "prismlb.io/member-unknown-1", "z");
    ck_assert_msg(json_equal(want, exp), "labels: %s", json_dumps(want, JSON_SORT_KEYS));
    json_decref(want);
    /* applied to labels read later: one written since stays */
    json_object_set_new(have, "prismlb.io/member-later", json_string("l"));
    want = hz_group_label_edit(have, set, drop);
    ck_assert_str_eq(json_string_value(json_object_get(want, "prismlb.io/member-later")), "l");
    ck_assert_ptr_null(json_object_get(want, "prismlb.io/member-" UB));
    json_decref(want);
    json_decref(set);
    json_decref(drop);
    ck_assert_int_eq(hz_group_label_changes(NULL, "web", m, 1, gone_b, NULL, &set, &drop), 0);
    ck_assert_uint_eq(json_object_size(set), 2);
    ck_assert_uint_eq(json_array_size(drop), 0);
    json_decref(set);
    json_decref(drop);
    json_decref(exp);
    json_decref(have);
    hz_desired_clear(&da);
    hz_desired_clear(&dc);
}
END_TEST

/* The dots of s. */
static int
dots(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '.';
    return n;
}

START_TEST(the_group_name_is_never_a_services_default_name)
{
    char g[HZ_NAME_MAX + 1], svc[HZ_NAME_MAX + 1];
    hz_name_for_group(NULL, "web", g);
    ck_assert_str_eq(g, "web.shared.prismlb.io");
    hz_name_for_service(NULL, NULL, "shared", "web", svc);
    ck_assert_int_eq(dots(svc), 1);
    ck_assert_int_eq(dots(g), 3);
    hz_name_for_group("prod", "web", g);
    ck_assert_str_eq(g, "prod.web.shared.prismlb.io");
    hz_name_for_service(NULL, "prod", "web", "shared", svc);
    ck_assert_str_ne(g, svc);
    ck_assert_int_eq(dots(svc), 2);
    ck_assert_int_eq(dots(g), 4);
}
END_TEST

START_TEST(a_group_plan_writes_its_labels_first_and_never_a_uid_label)
{
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    const int ports[] = {80};
    const char *t[] = {"10.0.1.1"};
    mk(&d, "lb11", ports, 1, t, 1);
    hz_free(d.uid);
    d.uid = NULL;
    json_t *j = json_pack("{s:i, s:s, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:[], s:[]}", "id", 7,
                          "name", "web.shared.prismlb.io", "labels", "prismlb.io/shared-balancer",
                          "web", "load_balancer_type", "name", "lb11", "location", "name", "hel1",
                          "algorithm", "type", "least_connections", "services", "targets");
    ck_assert_int_eq(hz_actual_parse(j, &a), 0);
    ck_assert_int_eq(hz_plan_build(&d, &a, 0, &p), 0);
    for (size_t i = 0; i < p.n; i++)
        ck_assert_int_ne(p.ops[i].kind, HZ_OP_SET_LABELS);
    size_t n = p.n;
    ck_assert_uint_gt(n, 0);
    json_t *want =
        json_pack("{s:s, s:s}", "prismlb.io/shared-balancer", "web", "prismlb.io/member-" UA, "a");
    json_t *set = json_pack("{s:s}", "prismlb.io/member-" UA, "a");
    ck_assert_int_eq(hz_plan_labels(set, NULL, &a, &p), 0);
    ck_assert_uint_eq(p.n, n + 1);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_SET_LABELS);
    ck_assert_str_eq(p.ops[0].method, "PUT");
    ck_assert(json_equal(json_object_get(p.ops[0].body, "labels"), want));
    hz_plan_clear(&p);
    /* labels as wanted: nothing */
    ck_assert_int_eq(hz_plan_labels(a.labels, NULL, &a, &p), 0);
    ck_assert_uint_eq(p.n, 0);
    json_decref(want);
    json_decref(set);
    json_decref(j);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

START_TEST(a_service_never_adopts_a_groups_balancer_under_its_name)
{
    struct hz_actual a;
    json_t *j = json_pack("{s:i, s:s, s:{s:s}, s:[{s:s, s:{s:s}}]}", "id", 7, "name", "web",
                          "labels", "prismlb.io/shared-balancer", "web", "targets", "type", "ip",
                          "ip", "ip", "10.0.1.1");
    ck_assert_int_eq(hz_actual_parse(j, &a), 0);
    const char *ips[] = {"10.0.1.1"};
    struct hz_own_in in = {.uid = UA,
                           .name = "web",
                           .annotated = 1,
                           .legacy_name = "web",
                           .by_name = &a,
                           .node_ips = ips,
                           .nnode_ips = 1};
    struct hz_own_out out;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_BLOCKED);
    ck_assert_ptr_nonnull(strstr(out.warning, "shared balancer of group \"web\""));
    in.annotated = 0;
    in.by_name = NULL;
    in.by_legacy = &a;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_CREATE);
    json_decref(j);
    hz_actual_clear(&a);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb shared balancers");
    TCase *tc = tcase_create("group");
    tcase_add_test(tc, the_group_must_be_a_dns_label_and_never_beside_a_name_annotation);
    tcase_add_test(tc, member_labels_are_valid_hetzner_label_keys);
    tcase_add_test(tc, members_are_ordered_by_creation_then_uid);
    tcase_add_test(tc, a_port_an_older_member_holds_clashes_and_the_clashing_one_adds_nothing);
    tcase_add_test(tc, the_redirect_of_an_https_service_holds_port_80);
    tcase_add_test(tc,
                   the_union_is_the_oldests_balancer_with_every_adding_members_ports_and_targets);
    tcase_add_test(tc, balancer_level_settings_that_differ_from_the_oldests_are_named);
    tcase_add_test(tc, labels_are_the_group_the_adding_members_and_the_others_kept);
    tcase_add_test(tc, the_group_name_is_never_a_services_default_name);
    tcase_add_test(tc, a_group_plan_writes_its_labels_first_and_never_a_uid_label);
    tcase_add_test(tc, a_service_never_adopts_a_groups_balancer_under_its_name);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
