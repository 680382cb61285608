/*
 * The plan (desired vs actual → the minimal Hetzner writes) and the
 * ownership and adoption rules (modules/mod_hetzner_lb/hz_plan.c), one test
 * per sentence of the spec's ownership and migration paragraphs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "testutil.h"

/* A balancer as the API returns it. targets: JSON array text. */
static void
actual(struct hz_actual *a, int id, const char *name, const char *uid, const char *targets,
       const char *services, const char *extra)
{
    char buf[4096];
    char labels[256];
    if (uid)
        snprintf(labels, sizeof(labels), "{\"robotlb/service-uid\":\"%s\",\"team\":\"a\"}", uid);
    else
        snprintf(labels, sizeof(labels), "{\"team\":\"a\"}");
    snprintf(buf, sizeof(buf),
             "{\"id\":%d,\"name\":\"%s\",\"labels\":%s,"
             "\"load_balancer_type\":{\"name\":\"lb11\"},\"location\":{\"name\":\"hel1\"},"
             "\"algorithm\":{\"type\":\"least_connections\"},"
             "\"private_net\":[{\"network\":7,\"ip\":\"10.0.0.5\"}],"
             "\"targets\":%s,\"services\":%s%s}",
             id, name, labels, targets ? targets : "[]", services ? services : "[]",
             extra ? extra : "");
    json_t *j = parse_json(buf);
    ck_assert_int_eq(hz_actual_parse(j, a), 0);
    json_decref(j);
}

static const char *svc80 =
    "[{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080,"
    "\"proxyprotocol\":false,\"health_check\":{\"protocol\":\"tcp\",\"port\":30080,"
    "\"interval\":15,\"timeout\":10,\"retries\":3}}]";

static const char *
ipt(const char *a, const char *b)
{
    static char buf[512];
    if (b)
        snprintf(
            buf, sizeof(buf),
            "[{\"type\":\"ip\",\"ip\":{\"ip\":\"%s\"}},{\"type\":\"ip\",\"ip\":{\"ip\":\"%s\"}}]",
            a, b);
    else
        snprintf(buf, sizeof(buf), "[{\"type\":\"ip\",\"ip\":{\"ip\":\"%s\"}}]", a);
    return buf;
}

static size_t
index_of(const struct hz_plan *p, enum hz_op_kind k)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->ops[i].kind == k)
            return i;
    ck_abort_msg("no %s in the plan", hz_op_name(k));
    return 0;
}

START_TEST(a_balancer_that_matches_needs_no_request)
{
    const char *ips[] = {"10.0.1.10", "10.0.1.11"};
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    desired(&d, ips, 2);
    actual(&a, 5, "web.shop", "uid-1", ipt("10.0.1.11", "10.0.1.10"), svc80, NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 0);
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* Targets are added and removed by IP, one write each. */
START_TEST(targets_are_added_and_removed_by_ip)
{
    const char *ips[] = {"10.0.1.10", "10.0.1.12"};
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    desired(&d, ips, 2);
    actual(&a, 5, "web.shop", "uid-1", ipt("10.0.1.10", "10.0.1.11"), svc80, NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 2);
    size_t r = index_of(&p, HZ_OP_REMOVE_TARGET), ad = index_of(&p, HZ_OP_ADD_TARGET);
    ck_assert_str_eq(p.ops[r].target_ip, "10.0.1.11");
    ck_assert_str_eq(p.ops[r].path, "/load_balancers/5/actions/remove_target");
    ck_assert_str_eq(p.ops[ad].target_ip, "10.0.1.12");
    ck_assert_str_eq(p.ops[ad].method, "POST");
    ck_assert_str_eq(p.ops[ad].path, "/load_balancers/5/actions/add_target");
    json_t *ipo = json_object_get(p.ops[ad].body, "ip");
    ck_assert_str_eq(json_string_value(json_object_get(p.ops[ad].body, "type")), "ip");
    ck_assert_str_eq(json_string_value(json_object_get(ipo, "ip")), "10.0.1.12");
    ck_assert_uint_lt(r, ad); /* free a slot before taking one */
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* One service per port: missing ones added, stale ones deleted, changed
 * ones (nodePort, proxy protocol, health check) updated in place. */
START_TEST(services_are_added_updated_and_deleted_by_listen_port)
{
    static const struct hz_port ports[] = {{"TCP", 80, 30081}, {"TCP", 443, 30443}};
    struct hz_svc s = {.uid = "uid-1", .name = "web", .ns = "shop", .ports = ports, .nports = 2};
    struct hz_config c = default_config();
    struct hz_annot an;
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    char err[128];
    memset(&an, 0, sizeof(an));
    hz_annot_clear(&an);
    ck_assert_int_eq(hz_desired_build(&c, &an, &s, NULL, 0, &d, err, sizeof(err)), 0);
    actual(&a, 5, "web.shop", "uid-1", NULL,
           "[{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080,"
           "\"proxyprotocol\":false,\"health_check\":{\"protocol\":\"tcp\",\"port\":30080,"
           "\"interval\":15,\"timeout\":10,\"retries\":3}},"
           "{\"protocol\":\"tcp\",\"listen_port\":8080,\"destination_port\":30090,"
           "\"proxyprotocol\":false,\"health_check\":{\"protocol\":\"tcp\",\"port\":30090,"
           "\"interval\":15,\"timeout\":10,\"retries\":3}}]",
           NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 0, &p), 0);
    ck_assert_uint_eq(p.n, 3);
    size_t del = index_of(&p, HZ_OP_DELETE_SERVICE);
    ck_assert_int_eq(json_integer_value(json_object_get(p.ops[del].body, "listen_port")), 8080);
    size_t up = index_of(&p, HZ_OP_UPDATE_SERVICE);
    ck_assert_int_eq(json_integer_value(json_object_get(p.ops[up].body, "listen_port")), 80);
    ck_assert_int_eq(json_integer_value(json_object_get(p.ops[up].body, "destination_port")),
                     30081);
    size_t add = index_of(&p, HZ_OP_ADD_SERVICE);
    ck_assert_int_eq(json_integer_value(json_object_get(p.ops[add].body, "listen_port")), 443);
    ck_assert_uint_lt(del, add); /* a type's service slots: delete first */
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* Health check settings changed (e.g. robotlb/lb-check-interval): the
 * service is updated. */
START_TEST(a_changed_health_check_updates_the_service)
{
    const char *ips[] = {"10.0.1.10"};
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    desired(&d, ips, 1);
    d.interval = 5;
    actual(&a, 5, "web.shop", "uid-1", ipt("10.0.1.10", NULL), svc80, NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_UPDATE_SERVICE);
    json_t *hc = json_object_get(p.ops[0].body, "health_check");
    ck_assert_int_eq(json_integer_value(json_object_get(hc, "interval")), 5);
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* Algorithm and type are changed in place, the type after the removals. */
START_TEST(algorithm_and_type_are_changed_in_place)
{
    const char *ips[] = {"10.0.1.10"};
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    desired(&d, ips, 1);
    d.algorithm = HZ_ALG_ROUND_ROBIN;
    hz_free(d.type);
    d.type = hz_strdup("lb21");
    actual(&a, 5, "web.shop", "uid-1", ipt("10.0.1.10", "10.0.1.99"), svc80, NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 3);
    size_t alg = index_of(&p, HZ_OP_CHANGE_ALGORITHM);
    ck_assert_str_eq(json_string_value(json_object_get(p.ops[alg].body, "type")), "round_robin");
    size_t ty = index_of(&p, HZ_OP_CHANGE_TYPE);
    ck_assert_str_eq(json_string_value(json_object_get(p.ops[ty].body, "load_balancer_type")),
                     "lb21");
    ck_assert_uint_lt(index_of(&p, HZ_OP_REMOVE_TARGET), ty);
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* "Hetzner cloud network" and "Requests specific IP address for the load
 * balancer in the private network": attached first, with the IP. */
START_TEST(the_balancer_is_attached_to_its_network_with_the_requested_private_ip)
{
    const char *ips[] = {"10.0.1.10"};
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    desired(&d, ips, 1);
    d.private_ip = hz_strdup("10.0.0.9");
    actual(&a, 5, "web.shop", "uid-1", NULL, svc80, NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 8, &p), 0);
    ck_assert_uint_eq(p.n, 2);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_ATTACH_NETWORK);
    ck_assert_int_eq(json_integer_value(json_object_get(p.ops[0].body, "network")), 8);
    ck_assert_str_eq(json_string_value(json_object_get(p.ops[0].body, "ip")), "10.0.0.9");
    ck_assert_int_eq(p.ops[1].kind, HZ_OP_ADD_TARGET);
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* A changed robotlb/lb-network: the new network is attached first and the
 * old one detached only once the balancer is on the new one, so that it is
 * never on no network. */
START_TEST(a_changed_network_is_attached_then_the_old_one_detached)
{
    const char *ips[] = {"10.0.1.10"};
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    desired(&d, ips, 1);
    actual(&a, 5, "web.shop", "uid-1", ipt("10.0.1.10", NULL), svc80, NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 8, &p), 0);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_ATTACH_NETWORK);
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    /* the next pass: on 7 and 8 */
    actual(&a, 5, "web.shop", "uid-1", ipt("10.0.1.10", NULL), svc80,
           ",\"private_net\":[{\"network\":7,\"ip\":\"10.0.0.5\"},"
           "{\"network\":8,\"ip\":\"10.8.0.5\"}]");
    ck_assert_int_eq(hz_plan_build(&d, &a, 8, &p), 0);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_DETACH_NETWORK);
    ck_assert_str_eq(p.ops[0].path, "/load_balancers/5/actions/detach_from_network");
    ck_assert_int_eq(json_integer_value(json_object_get(p.ops[0].body, "network")), 7);
    hz_plan_clear(&p);
    /* no network asked for: none is detached */
    ck_assert_int_eq(hz_plan_build(&d, &a, 0, &p), 0);
    ck_assert_uint_eq(p.n, 0);
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* "robotlb adds its label, keeps the name": adoption is one PUT that keeps
 * the other labels (PUT replaces the whole set) and renames nothing. */
START_TEST(adoption_adds_the_label_keeps_the_name_and_the_other_labels)
{
    const char *ips[] = {"10.0.1.10"};
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    desired(&d, ips, 1);
    actual(&a, 3, "web", NULL, ipt("10.0.1.10", NULL), svc80, NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_SET_LABELS);
    ck_assert_str_eq(p.ops[0].method, "PUT");
    ck_assert_str_eq(p.ops[0].path, "/load_balancers/3");
    json_t *l = json_object_get(p.ops[0].body, "labels");
    ck_assert_str_eq(json_string_value(json_object_get(l, HZ_LABEL_UID)), "uid-1");
    ck_assert_str_eq(json_string_value(json_object_get(l, "team")), "a");
    ck_assert_ptr_null(json_object_get(p.ops[0].body, "name"));
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* "A balancer is never deleted by its name": no plan deletes a balancer,
 * whatever it has to change. */
START_TEST(a_plan_never_deletes_a_balancer)
{
    const char *ips[] = {"10.0.1.12"};
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    desired(&d, ips, 1);
    actual(&a, 9, "web.shop", NULL, ipt("10.0.1.10", "10.0.1.11"), NULL, NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    ck_assert_uint_ge(p.n, 4);
    for (size_t i = 0; i < p.n; i++)
        ck_assert_str_ne(p.ops[i].method, "DELETE");
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* "... changes or deletes only a balancer labelled for that service" */
START_TEST(a_balancer_labelled_for_another_service_is_never_changed)
{
    const char *ips[] = {"10.0.1.12"};
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    desired(&d, ips, 1);
    actual(&a, 9, "web.shop", "other-uid", ipt("10.0.1.10", NULL), NULL, NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), -EPERM);
    ck_assert_uint_eq(p.n, 0);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Ownership                                                          */

static const char *const nodes[] = {"10.0.1.10", "10.0.1.11"};

static struct hz_own_in
own_in(void)
{
    return (struct hz_own_in){.uid = "uid-new",
                              .name = "web.shop",
                              .legacy_name = "web",
                              .node_ips = nodes,
                              .nnode_ips = 2};
}

/* "finds the balancer of a service by that label" and "Balancers that
 * already carry the robotlb/service-uid label are found by it, so setting
 * a cluster name later does not rename them." */
START_TEST(the_balancer_is_found_by_its_label_so_a_cluster_name_set_later_renames_nothing)
{
    struct hz_actual lab, other;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&lab, 4, "web.shop", "uid-new", NULL, NULL, NULL);
    actual(&other, 5, "prod.web.shop", NULL, ipt("10.0.1.10", NULL), NULL, NULL);
    in.name = "prod.web.shop";
    in.labelled = &lab;
    in.by_name = &other;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_MANAGE);
    ck_assert_ptr_eq(out.lb, &lab);
    ck_assert_str_eq(out.warning, "");
    hz_actual_clear(&lab);
    hz_actual_clear(&other);
}
END_TEST

/* "When the name is taken by a balancer labelled for another service ...
 * robotlb leaves that balancer alone and reports it in a warning event";
 * "When that balancer has the name the service asks for, the warning names
 * the old UID." */
START_TEST(a_name_taken_by_a_balancer_labelled_for_another_service_gives_a_warning_naming_its_uid)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&b, 4, "web.shop", "uid-old", ipt("10.0.1.10", NULL), NULL, NULL);
    in.by_name = &b;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_BLOCKED);
    ck_assert_ptr_null(out.lb);
    ck_assert_ptr_nonnull(strstr(out.warning, "uid-old"));
    ck_assert_ptr_nonnull(strstr(out.warning, "web.shop"));
    ck_assert_ptr_nonnull(strstr(out.warning, "add-label --overwrite"));
    hz_actual_clear(&b);
}
END_TEST

/* "... or by an unlabelled balancer that does not target the nodes of the
 * service, robotlb leaves that balancer alone and reports it" */
START_TEST(a_name_taken_by_an_unlabelled_balancer_not_targeting_the_nodes_gives_a_warning)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&b, 4, "web.shop", NULL, ipt("10.0.9.9", NULL), NULL, NULL);
    in.by_name = &b;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_BLOCKED);
    ck_assert_ptr_nonnull(strstr(out.warning, "unlabelled"));
    ck_assert_ptr_nonnull(strstr(out.warning, "robotlb/service-uid=uid-new"));
    hz_actual_clear(&b);
}
END_TEST

/* "Two services therefore cannot share a balancer through the same
 * robotlb/balancer annotation: the second one gets the warning." */
START_TEST(two_services_cannot_share_a_balancer_through_the_same_annotation)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    /* the first service created (or adopted) it and labelled it */
    actual(&b, 4, "shared", "uid-first", ipt("10.0.1.10", NULL), NULL, NULL);
    in.name = "shared";
    in.annotated = 1;
    in.by_name = &b;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_BLOCKED);
    ck_assert_ptr_nonnull(strstr(out.warning, "uid-first"));
    hz_actual_clear(&b);
}
END_TEST

/* "When it has the name of an earlier release, robotlb creates a new
 * balancer with a new IP instead, without a warning" */
START_TEST(
    an_old_balancer_under_the_earlier_release_name_labelled_with_the_old_uid_gives_a_new_balancer_without_warning)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&b, 4, "web", "uid-old", ipt("10.0.1.10", NULL), NULL, NULL);
    in.by_legacy = &b;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_CREATE);
    ck_assert_str_eq(out.warning, "");
    hz_actual_clear(&b);
}
END_TEST

/* "An unlabelled balancer whose targets are all IPs, at least one of them a
 * node of the service, is adopted: robotlb adds its label, keeps the name"
 * — under the earlier release's name first. */
START_TEST(an_unlabelled_balancer_whose_targets_are_all_ips_one_a_node_of_the_service_is_adopted)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&b, 4, "web", NULL, ipt("10.0.9.9", "10.0.1.11"), NULL, NULL);
    in.by_legacy = &b;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_ADOPT);
    ck_assert_ptr_eq(out.lb, &b);
    hz_actual_clear(&b);
}
END_TEST

/* A balancer hcloud-cloud-controller-manager made for Service hccm_uid
 * (labelled hcloud-ccm/service-uid), with IP targets targets (JSON array
 * text) and, if uid, robotlb's label too. */
static void
hccm_actual(struct hz_actual *a, int id, const char *hccm_uid, const char *uid, const char *targets)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"id\":%d,\"name\":\"a%s\",\"labels\":{\"hcloud-ccm/service-uid\":\"%s\"%s%s%s},"
             "\"load_balancer_type\":{\"name\":\"lb11\"},\"location\":{\"name\":\"fsn1\"},"
             "\"targets\":%s,\"services\":[]}",
             id, hccm_uid, hccm_uid, uid ? ",\"robotlb/service-uid\":\"" : "", uid ? uid : "",
             uid ? "\"" : "", targets ? targets : "[]");
    json_t *j = parse_json(buf);
    ck_assert_int_eq(hz_actual_parse(j, a), 0);
    json_decref(j);
}

/* "A Service that hccm served has a balancer labelled
 * hcloud-ccm/service-uid=<UID>. When prismlb finds no balancer of its own
 * for the Service, it adopts that one (adds its own label, keeps name and
 * IPs)": the label names the Service, so what it targets does not matter,
 * nor whether the Service has target nodes yet. */
START_TEST(hccms_balancer_for_the_services_uid_is_adopted_whatever_it_targets)
{
    struct hz_actual h, named;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    hccm_actual(&h, 6, "uid-new", NULL, ipt("10.0.9.9", NULL));
    actual(&named, 4, "web.shop", NULL, ipt("10.0.1.10", NULL), NULL, NULL);
    in.by_hccm = &h;
    in.by_name = &named; /* an unlabelled one under its name loses to hccm's */
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_ADOPT);
    ck_assert_ptr_eq(out.lb, &h);
    ck_assert_str_eq(out.warning, "");
    in.nnode_ips = 0;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_ADOPT);
    ck_assert_ptr_eq(out.lb, &h);
    hz_actual_clear(&h);
    hz_actual_clear(&named);
}
END_TEST

/* "when prismlb finds no balancer of its own for the Service": its own
 * labelled balancer wins, and hccm's balancer is left as it is; a
 * balancer of hccm's that another Service of prismlb's holds is never
 * taken. */
START_TEST(hccms_balancer_is_not_taken_when_the_service_has_its_own_or_another_holds_it)
{
    struct hz_actual h, lab;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    hccm_actual(&h, 6, "uid-new", NULL, NULL);
    actual(&lab, 4, "web.shop", "uid-new", NULL, NULL, NULL);
    in.by_hccm = &h;
    in.labelled = &lab;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_MANAGE);
    ck_assert_ptr_eq(out.lb, &lab);
    hz_actual_clear(&h);
    hccm_actual(&h, 6, "uid-new", "uid-other", NULL);
    in.labelled = NULL;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_CREATE);
    ck_assert_ptr_null(out.lb);
    hz_actual_clear(&h);
    hz_actual_clear(&lab);
}
END_TEST

/* "... and it applies to any balancer created later under that name that
 * matches" — the default name, and the annotated name. */
START_TEST(adoption_applies_to_a_matching_balancer_under_the_default_or_annotated_name)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&b, 4, "web.shop", NULL, ipt("10.0.1.10", NULL), NULL, NULL);
    in.by_name = &b;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_ADOPT);
    in.annotated = 1;
    in.name = "web.shop";
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_ADOPT);
    hz_actual_clear(&b);
}
END_TEST

/* A balancer with a server or label-selector target is not all IPs. */
START_TEST(an_unlabelled_balancer_with_a_non_ip_target_is_not_adopted)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&b, 4, "web", NULL,
           "[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.10\"}},"
           "{\"type\":\"label_selector\",\"label_selector\":{\"selector\":\"a\"}}]",
           NULL, NULL);
    in.by_legacy = &b;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_CREATE);
    ck_assert_int_eq(hz_targets_match_nodes(&b, nodes, 2), 0);
    hz_actual_clear(&b);
}
END_TEST

/* "A balancer without targets ... does not look like the service's. Under
 * the old name it is replaced by a new balancer with a new IP and stays in
 * the project, unlabelled and billed; under an annotated name the service
 * gets a warning event." */
START_TEST(
    a_balancer_without_targets_is_replaced_under_the_old_name_and_warned_under_an_annotated_name)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&b, 4, "web", NULL, NULL, NULL, NULL);
    in.by_legacy = &b;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_CREATE);
    ck_assert_str_eq(out.warning, "");
    in.by_legacy = NULL;
    in.annotated = 1;
    in.name = "web";
    in.by_name = &b;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_BLOCKED);
    ck_assert_str_ne(out.warning, "");
    hz_actual_clear(&b);
}
END_TEST

/* "Otherwise the balancer is left alone: under the old name robotlb
 * creates a new balancer with a new IP under <service>.<namespace>, under
 * an annotated name the service gets a warning event instead." — with an
 * annotation, the old name is not looked at. */
START_TEST(with_an_annotation_the_earlier_release_name_is_not_adopted)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&b, 4, "web", NULL, ipt("10.0.1.10", NULL), NULL, NULL);
    in.by_legacy = &b;
    in.annotated = 1;
    in.name = "custom";
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_CREATE);
    hz_actual_clear(&b);
}
END_TEST

/* "While a service has no target nodes ... robotlb cannot tell whether an
 * unlabelled balancer is its own, so it waits and reports that in a
 * warning event." */
START_TEST(without_target_nodes_the_service_waits_with_a_warning)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&b, 4, "web", NULL, ipt("10.0.1.10", NULL), NULL, NULL);
    in.by_legacy = &b;
    in.nnode_ips = 0;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_WAIT);
    ck_assert_ptr_nonnull(strstr(out.warning, "\"web\""));
    /* a reconcile that stops early adopts nothing, and creates nothing */
    in.by_legacy = NULL;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_WAIT);
    ck_assert_str_ne(out.warning, "");
    hz_actual_clear(&b);
}
END_TEST

/* "Services with the same name in different namespaces used to share one
 * balancer: one of them keeps it, the others get a new balancer and a new
 * IP." */
START_TEST(services_of_one_name_in_two_namespaces_one_keeps_the_old_balancer)
{
    struct hz_actual b;
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    actual(&b, 4, "web", NULL, ipt("10.0.1.10", NULL), NULL, NULL);
    in.by_legacy = &b;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_ADOPT);
    hz_actual_clear(&b);
    /* after the first labelled it, the second sees it labelled for another */
    actual(&b, 4, "web", "uid-new", ipt("10.0.1.10", NULL), NULL, NULL);
    in.uid = "uid-other-namespace";
    in.name = "web.other";
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_CREATE);
    ck_assert_str_eq(out.warning, "");
    hz_actual_clear(&b);
}
END_TEST

/* No balancer under any name: create under the service's name. */
START_TEST(without_any_balancer_one_is_created_under_the_service_name)
{
    struct hz_own_in in = own_in();
    struct hz_own_out out;
    hz_own_decide(&in, &out);
    ck_assert_int_eq(out.kind, HZ_OWN_CREATE);
    ck_assert_ptr_null(out.lb);
}
END_TEST

/* robotlb/lb-public-interface: "false" disables the public interface of a
 * balancer after it is on the network (Hetzner refuses a private-only
 * balancer without one); "true" (or removing the annotation) enables it
 * again; a balancer already as asked needs no request. */
START_TEST(the_public_interface_follows_lb_public_interface)
{
    static const struct hz_port pt[] = {{"TCP", 80, 30080}};
    struct hz_svc s = {.uid = "uid-1", .name = "web", .ns = "shop", .ports = pt, .nports = 1};
    struct hz_config c = default_config();
    struct hz_annot an;
    struct hz_desired d;
    struct hz_actual a;
    struct hz_plan p;
    char err[256];
    memset(&an, 0, sizeof(an));
    hz_annot_clear(&an);
    an.public_iface = 0;
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_desired_build(&c, &an, &s, NULL, 0, &d, err, sizeof(err)), 0);
    /* on network 7 already: one write */
    actual(&a, 5, "web.shop", "uid-1", NULL, svc80, NULL);
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_DISABLE_PUBLIC);
    ck_assert_str_eq(p.ops[0].path, "/load_balancers/5/actions/disable_public_interface");
    hz_plan_clear(&p);
    /* not on network 8 yet: attach first, then disable */
    ck_assert_int_eq(hz_plan_build(&d, &a, 8, &p), 0);
    ck_assert_uint_eq(p.n, 2);
    ck_assert_uint_lt(index_of(&p, HZ_OP_ATTACH_NETWORK), index_of(&p, HZ_OP_DISABLE_PUBLIC));
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    /* already private-only: nothing */
    actual(&a, 5, "web.shop", "uid-1", NULL, svc80,
           ",\"public_net\":{\"enabled\":false,\"ipv4\":{\"ip\":\"1.2.3.4\"}}");
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 0);
    hz_plan_clear(&p);
    /* asked public again: enabled */
    d.public_iface = 1;
    ck_assert_int_eq(hz_plan_build(&d, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_ENABLE_PUBLIC);
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&d);
}
END_TEST

/* load_balancer_class: unset serves Services without a class and those of
 * class robotlb (robotlb's rule: `.spec.loadBalancerClass // "robotlb"`);
 * set, only that class, so that a Service without a class is left to
 * hcloud-cloud-controller-manager. */
START_TEST(load_balancer_class_picks_the_services_served)
{
    ck_assert_int_eq(hz_class_served(NULL, NULL), 1);
    ck_assert_int_eq(hz_class_served(NULL, "robotlb"), 1);
    ck_assert_int_eq(hz_class_served(NULL, "example.com/other"), 0);
    ck_assert_int_eq(hz_class_served("example.com/hetzner", "example.com/hetzner"), 1);
    ck_assert_int_eq(hz_class_served("example.com/hetzner", NULL), 0);
    ck_assert_int_eq(hz_class_served("example.com/hetzner", "robotlb"), 0);
    ck_assert_int_eq(hz_class_served("robotlb", "robotlb"), 1);
    ck_assert_int_eq(hz_class_served("robotlb", NULL), 0);
}
END_TEST

/* What Service shop/web with ports 80, 443 and 22, target 10.0.1.10, on
 * network k8s asks for under prismlb.io/port-protocols "80:http,443:https"
 * (22 as ports), certificate 7 and, when redirect, hccm's redirect. */
static void
desired_web3(struct hz_desired *d, const char *ports, int redirect)
{
    static const struct hz_port pt[] = {
        {"TCP", 80, 30080}, {"TCP", 443, 30443}, {"TCP", 22, 30022}};
    static const char *const ips[] = {"10.0.1.10"};
    const char *kv[] = {"prismlb.io/port-protocols",
                        ports,
                        "load-balancer.hetzner.cloud/http-certificates",
                        "7",
                        redirect ? "load-balancer.hetzner.cloud/http-redirect-http" : NULL,
                        "true",
                        NULL};
    struct hz_svc s = {.uid = "uid-1", .name = "web", .ns = "shop", .ports = pt, .nports = 3};
    struct hz_config c = default_config();
    struct hz_annot an;
    char err[512];
    c.default_network = (char *)"k8s";
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &an, err, sizeof(err)), 0);
    ck_assert_int_eq(hz_desired_build(&c, &an, &s, ips, 1, d, err, sizeof(err)), 0);
    hz_annot_clear(&an);
}

/* Balancer 5 as Hetzner shows it after serving d: its services as the
 * module sends them. */
static void
actual_of(struct hz_actual *a, const struct hz_desired *d)
{
    json_t *svcs = json_array();
    for (size_t i = 0; i < d->nservices; i++)
        ck_assert_int_eq(json_array_append_new(svcs, hz_service_json(d, &d->services[i])), 0);
    char *text = json_dumps(svcs, JSON_COMPACT);
    actual(a, 5, "web.shop", "uid-1", ipt("10.0.1.10", NULL), text, NULL);
    free(text);
    json_decref(svcs);
}

/* With its ports' protocols the balancer is steady; a port's protocol
 * changed is one update_service; the redirect given up updates 443 before
 * port 80 is added (Hetzner's redirect holds 80 until then); the redirect
 * taken up deletes 80's service before 443 redirects. */
START_TEST(port_protocols_change_by_updates_and_the_redirect_frees_port_80_first)
{
    struct hz_desired with, without, ssh_http;
    struct hz_actual a;
    struct hz_plan p;
    desired_web3(&with, "80:http,443:https", 1);
    desired_web3(&without, "80:http,443:https", 0);
    desired_web3(&ssh_http, "80:http,443:https,22:http", 1);
    actual_of(&a, &with);
    ck_assert_int_eq(hz_plan_build(&with, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 0);
    ck_assert_int_eq(hz_plan_build(&ssh_http, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_UPDATE_SERVICE);
    ck_assert_int_eq(json_integer_value(json_object_get(p.ops[0].body, "listen_port")), 22);
    ck_assert_str_eq(json_string_value(json_object_get(p.ops[0].body, "protocol")), "http");
    hz_plan_clear(&p);
    ck_assert_int_eq(hz_plan_build(&without, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 2);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_UPDATE_SERVICE);
    ck_assert_int_eq(json_integer_value(json_object_get(p.ops[0].body, "listen_port")), 443);
    ck_assert(
        json_is_false(json_object_get(json_object_get(p.ops[0].body, "http"), "redirect_http")));
    ck_assert_int_eq(p.ops[1].kind, HZ_OP_ADD_SERVICE);
    ck_assert_int_eq(json_integer_value(json_object_get(p.ops[1].body, "listen_port")), 80);
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    actual_of(&a, &without);
    ck_assert_int_eq(hz_plan_build(&without, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 0);
    ck_assert_int_eq(hz_plan_build(&with, &a, 7, &p), 0);
    ck_assert_uint_eq(p.n, 2);
    ck_assert_int_eq(p.ops[0].kind, HZ_OP_DELETE_SERVICE);
    ck_assert_int_eq(json_integer_value(json_object_get(p.ops[0].body, "listen_port")), 80);
    ck_assert_int_eq(p.ops[1].kind, HZ_OP_UPDATE_SERVICE);
    ck_assert(
        json_is_true(json_object_get(json_object_get(p.ops[1].body, "http"), "redirect_http")));
    hz_plan_clear(&p);
    hz_actual_clear(&a);
    hz_desired_clear(&with);
    hz_desired_clear(&without);
    hz_desired_clear(&ssh_http);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, a_balancer_that_matches_needs_no_request);
    tcase_add_test(tc, targets_are_added_and_removed_by_ip);
    tcase_add_test(tc, services_are_added_updated_and_deleted_by_listen_port);
    tcase_add_test(tc, a_changed_health_check_updates_the_service);
    tcase_add_test(tc, algorithm_and_type_are_changed_in_place);
    tcase_add_test(tc, the_balancer_is_attached_to_its_network_with_the_requested_private_ip);
    tcase_add_test(tc, a_changed_network_is_attached_then_the_old_one_detached);
    tcase_add_test(tc, adoption_adds_the_label_keeps_the_name_and_the_other_labels);
    tcase_add_test(tc, a_plan_never_deletes_a_balancer);
    tcase_add_test(tc, a_balancer_labelled_for_another_service_is_never_changed);
    suite_add_tcase(s, tc);
    tc = tcase_create("ownership");
    tcase_add_test(tc,
                   the_balancer_is_found_by_its_label_so_a_cluster_name_set_later_renames_nothing);
    tcase_add_test(
        tc, a_name_taken_by_a_balancer_labelled_for_another_service_gives_a_warning_naming_its_uid);
    tcase_add_test(tc,
                   a_name_taken_by_an_unlabelled_balancer_not_targeting_the_nodes_gives_a_warning);
    tcase_add_test(tc, two_services_cannot_share_a_balancer_through_the_same_annotation);
    tcase_add_test(
        tc,
        an_old_balancer_under_the_earlier_release_name_labelled_with_the_old_uid_gives_a_new_balancer_without_warning);
    tcase_add_test(
        tc, an_unlabelled_balancer_whose_targets_are_all_ips_one_a_node_of_the_service_is_adopted);
    tcase_add_test(tc, adoption_applies_to_a_matching_balancer_under_the_default_or_annotated_name);
    tcase_add_test(tc, an_unlabelled_balancer_with_a_non_ip_target_is_not_adopted);
    tcase_add_test(
        tc,
        a_balancer_without_targets_is_replaced_under_the_old_name_and_warned_under_an_annotated_name);
    tcase_add_test(tc, with_an_annotation_the_earlier_release_name_is_not_adopted);
    tcase_add_test(tc, without_target_nodes_the_service_waits_with_a_warning);
    tcase_add_test(tc, services_of_one_name_in_two_namespaces_one_keeps_the_old_balancer);
    tcase_add_test(tc, without_any_balancer_one_is_created_under_the_service_name);
    tcase_add_test(tc, hccms_balancer_for_the_services_uid_is_adopted_whatever_it_targets);
    tcase_add_test(tc,
                   hccms_balancer_is_not_taken_when_the_service_has_its_own_or_another_holds_it);
    tcase_add_test(tc, the_public_interface_follows_lb_public_interface);
    tcase_add_test(tc, load_balancer_class_picks_the_services_served);
    tcase_add_test(tc, port_protocols_change_by_updates_and_the_redirect_frees_port_80_first);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
