/*
 * Unit tests of the fake's pure parts: merge patch, JSON patch, strategic
 * merge patch with the built-in merge keys and directives, label and field
 * selectors, and the bounded history with snapshots.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fk.h"
#include "testutil.h"

static json_t *
J(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    ck_assert_msg(j != NULL, "bad JSON in test: %s: %s", s, e.text);
    return j;
}

static void
assert_json(json_t *got, const char *want)
{
    json_t *w = J(want);
    char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_msg(json_equal(got, w), "got %s\nwant %s", g, want);
    free(g);
    json_decref(w);
}

static const struct fk_kind *
kind(const char *group, const char *resource)
{
    const struct fk_kind *k = fk_kind_find(group, "v1", resource);
    ck_assert_ptr_nonnull(k);
    return k;
}

START_TEST(merge_patch_rfc7386)
{
    json_t *t = J("{\"a\":\"b\",\"c\":{\"d\":\"e\",\"f\":\"g\"},\"l\":[1,2]}");
    json_t *p = J("{\"a\":\"z\",\"c\":{\"f\":null},\"l\":[3],\"n\":{\"x\":null,\"y\":1}}");
    json_t *r = fk_merge_patch(t, p);
    assert_json(r, "{\"a\":\"z\",\"c\":{\"d\":\"e\"},\"l\":[3],\"n\":{\"y\":1}}");
    assert_json(t, "{\"a\":\"b\",\"c\":{\"d\":\"e\",\"f\":\"g\"},\"l\":[1,2]}"); /* untouched */
    json_decref(r);
    json_decref(p);
    json_decref(t);
}
END_TEST

START_TEST(json_patch_rfc6902)
{
    json_t *t = J("{\"metadata\":{\"finalizers\":[\"a\",\"b\"],\"labels\":{\"x/y\":\"1\"}},"
                  "\"spec\":{\"n\":1}}");
    json_t *ops = J("[{\"op\":\"test\",\"path\":\"/spec/n\",\"value\":1},"
                    "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"},"
                    "{\"op\":\"add\",\"path\":\"/metadata/finalizers/-\",\"value\":\"c\"},"
                    "{\"op\":\"replace\",\"path\":\"/metadata/labels/x~1y\",\"value\":\"2\"},"
                    "{\"op\":\"copy\",\"from\":\"/spec/n\",\"path\":\"/spec/m\"},"
                    "{\"op\":\"move\",\"from\":\"/spec/n\",\"path\":\"/spec/k\"}]");
    char err[256];
    int code = 0;
    json_t *r = fk_json_patch(t, ops, &code, err, sizeof(err));
    ck_assert_msg(r != NULL, "%s", err);
    assert_json(r, "{\"metadata\":{\"finalizers\":[\"b\",\"c\"],\"labels\":{\"x/y\":\"2\"}},"
                   "\"spec\":{\"m\":1,\"k\":1}}");
    json_decref(r);
    json_decref(ops);

    ops = J("[{\"op\":\"test\",\"path\":\"/spec/n\",\"value\":2}]");
    ck_assert_ptr_null(fk_json_patch(t, ops, &code, err, sizeof(err)));
    ck_assert_int_eq(code, 422);
    json_decref(ops);
    ops = J("[{\"op\":\"remove\",\"path\":\"/nope\"}]");
    ck_assert_ptr_null(fk_json_patch(t, ops, &code, err, sizeof(err)));
    ck_assert_int_eq(code, 422);
    json_decref(ops);
    ops = J("[{\"op\":\"frobnicate\",\"path\":\"/spec\"}]");
    ck_assert_ptr_null(fk_json_patch(t, ops, &code, err, sizeof(err)));
    ck_assert_int_eq(code, 400);
    json_decref(ops);
    ops = J("{\"op\":\"add\"}");
    ck_assert_ptr_null(fk_json_patch(t, ops, &code, err, sizeof(err)));
    ck_assert_int_eq(code, 400);
    json_decref(ops);
    json_decref(t);
}
END_TEST

static json_t *
smp(const char *group, const char *res, const char *target, const char *patch)
{
    char err[256];
    json_t *t = J(target), *p = J(patch);
    json_t *r = fk_strategic_patch(t, p, kind(group, res), err, sizeof(err));
    ck_assert_msg(r != NULL, "strategic patch failed: %s", err);
    json_decref(t);
    json_decref(p);
    return r;
}

START_TEST(strategic_merge_keys)
{
    json_t *r;
    /* Service ports merge by port. */
    r = smp("", "services",
            "{\"spec\":{\"ports\":[{\"port\":80,\"name\":\"http\"},{\"port\":443,\"name\":"
            "\"https\"}]}}",
            "{\"spec\":{\"ports\":[{\"port\":443,\"targetPort\":8443},{\"port\":53,\"protocol\":"
            "\"UDP\"}]}}");
    assert_json(r, "{\"spec\":{\"ports\":[{\"port\":80,\"name\":\"http\"},{\"port\":443,\"name\":"
                   "\"https\",\"targetPort\":8443},{\"port\":53,\"protocol\":\"UDP\"}]}}");
    json_decref(r);
    /* loadBalancer.ingress is replaced whole. */
    r = smp(
        "", "services",
        "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"1.1.1.1\"},{\"ip\":\"2.2.2.2\"}]}}"
        "}",
        "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"3.3.3.3\"}]}}}");
    assert_json(r, "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"3.3.3.3\"}]}}}");
    json_decref(r);
    /* Node conditions and addresses by type. */
    r = smp("", "nodes",
            "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}],\"addresses\":"
            "[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"}]}}",
            "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},{\"type\":"
            "\"MemoryPressure\",\"status\":\"False\"}],\"addresses\":[{\"type\":\"InternalIP\","
            "\"address\":\"10.0.0.2\"}]}}");
    assert_json(r, "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},{\"type\""
                   ":\"MemoryPressure\",\"status\":\"False\"}],\"addresses\":[{\"type\":"
                   "\"InternalIP\",\"address\":\"10.0.0.2\"}]}}");
    json_decref(r);
    /* EndpointSlice endpoints are replaced whole. */
    r = smp("discovery.k8s.io", "endpointslices",
            "{\"endpoints\":[{\"addresses\":[\"10.0.0.1\"]},{\"addresses\":[\"10.0.0.2\"]}]}",
            "{\"endpoints\":[{\"addresses\":[\"10.0.0.3\"]}]}");
    assert_json(r, "{\"endpoints\":[{\"addresses\":[\"10.0.0.3\"]}]}");
    json_decref(r);
    /* Finalizers are a set; ownerReferences merge by uid. */
    r = smp("coordination.k8s.io", "leases",
            "{\"metadata\":{\"finalizers\":[\"a\",\"b\"],\"ownerReferences\":[{\"uid\":\"u1\","
            "\"name\":\"x\"}]}}",
            "{\"metadata\":{\"finalizers\":[\"b\",\"c\"],\"ownerReferences\":[{\"uid\":\"u1\","
            "\"name\":\"y\"},{\"uid\":\"u2\",\"name\":\"z\"}]}}");
    assert_json(r, "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"],\"ownerReferences\":[{"
                   "\"uid\":\"u1\",\"name\":\"y\"},{\"uid\":\"u2\",\"name\":\"z\"}]}}");
    json_decref(r);
}
END_TEST

START_TEST(strategic_merge_directives)
{
    json_t *r;
    char err[256];
    json_t *t, *p;

    /* $patch: delete of a list element by merge key. */
    r = smp("", "services", "{\"spec\":{\"ports\":[{\"port\":80},{\"port\":443}]}}",
            "{\"spec\":{\"ports\":[{\"port\":80,\"$patch\":\"delete\"}]}}");
    assert_json(r, "{\"spec\":{\"ports\":[{\"port\":443}]}}");
    json_decref(r);
    /* $patch: replace on a list and on a map. */
    r = smp("", "services", "{\"spec\":{\"ports\":[{\"port\":80},{\"port\":443}]}}",
            "{\"spec\":{\"ports\":[{\"port\":8080},{\"$patch\":\"replace\"}]}}");
    assert_json(r, "{\"spec\":{\"ports\":[{\"port\":8080}]}}");
    json_decref(r);
    r = smp("", "services", "{\"spec\":{\"selector\":{\"a\":\"1\",\"b\":\"2\"}}}",
            "{\"spec\":{\"selector\":{\"c\":\"3\",\"$patch\":\"replace\"}}}");
    assert_json(r, "{\"spec\":{\"selector\":{\"c\":\"3\"}}}");
    json_decref(r);
    /* $patch: delete on a map; null deletes a key. */
    r = smp("", "services", "{\"spec\":{\"selector\":{\"a\":\"1\"},\"type\":\"ClusterIP\"}}",
            "{\"spec\":{\"selector\":{\"$patch\":\"delete\"},\"type\":null}}");
    assert_json(r, "{\"spec\":{}}");
    json_decref(r);
    /* $deleteFromPrimitiveList and $setElementOrder. */
    r = smp("", "nodes", "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}",
            "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"b\"]}}");
    assert_json(r, "{\"metadata\":{\"finalizers\":[\"a\",\"c\"]}}");
    json_decref(r);
    r = smp("", "services", "{\"spec\":{\"ports\":[{\"port\":80},{\"port\":443}]}}",
            "{\"spec\":{\"$setElementOrder/ports\":[{\"port\":443},{\"port\":80}],\"ports\":[{"
            "\"port\":80,\"name\":\"h\"}]}}");
    assert_json(r, "{\"spec\":{\"ports\":[{\"port\":443},{\"port\":80,\"name\":\"h\"}]}}");
    json_decref(r);
    /* $retainKeys drops the keys not listed. */
    r = smp("", "services", "{\"spec\":{\"a\":1,\"b\":2,\"c\":3}}",
            "{\"spec\":{\"$retainKeys\":[\"a\",\"d\"],\"d\":4}}");
    assert_json(r, "{\"spec\":{\"a\":1,\"d\":4}}");
    json_decref(r);
    /* A merge-keyed element without its key is an error. */
    t = J("{\"spec\":{\"ports\":[{\"port\":80}]}}");
    p = J("{\"spec\":{\"ports\":[{\"name\":\"x\"}]}}");
    ck_assert_ptr_null(fk_strategic_patch(t, p, kind("", "services"), err, sizeof(err)));
    ck_assert(strstr(err, "merge key"));
    json_decref(p);
    p = J("{\"spec\":{\"$patch\":\"explode\"}}");
    ck_assert_ptr_null(fk_strategic_patch(t, p, kind("", "services"), err, sizeof(err)));
    json_decref(p);
    json_decref(t);
}
END_TEST

static int
lmatch(const char *sel, const char *labels)
{
    char err[256], obj[512];
    struct fk_selector *s = fk_label_selector_parse(sel, err, sizeof(err));
    json_t *o;
    int m;
    ck_assert_msg(s != NULL, "parse %s: %s", sel, err);
    snprintf(obj, sizeof(obj), "{\"metadata\":{\"labels\":%s}}", labels);
    o = J(obj);
    m = fk_selector_match(s, o);
    json_decref(o);
    fk_selector_free(s);
    return m;
}

static int
lbad(const char *sel)
{
    char err[256];
    struct fk_selector *s = fk_label_selector_parse(sel, err, sizeof(err));
    fk_selector_free(s);
    return s == NULL;
}

START_TEST(label_selectors)
{
    const char *l = "{\"app\":\"web\",\"tier\":\"front\",\"n\":\"5\",\"prismlb.io/pool\":\"a\"}";
    ck_assert(lmatch("", l));
    ck_assert(lmatch("app=web", l));
    ck_assert(lmatch("app==web,tier=front", l));
    ck_assert(!lmatch("app=web,tier=back", l));
    ck_assert(lmatch("app!=db", l));
    ck_assert(lmatch("missing!=x", l)); /* != matches an absent key */
    ck_assert(lmatch("tier in (front, back)", l));
    ck_assert(!lmatch("tier notin (front)", l));
    ck_assert(lmatch("other notin (front)", l));
    ck_assert(lmatch("app", l));
    ck_assert(!lmatch("!app", l));
    ck_assert(lmatch("!other", l));
    ck_assert(lmatch("n>4,n<6", l));
    ck_assert(!lmatch("n>5", l));
    ck_assert(lmatch("prismlb.io/pool=a", l));
    ck_assert(lmatch(" app = web ", l));
    ck_assert(lbad("app=web,"));
    ck_assert(lbad("tier in front"));
    ck_assert(lbad("tier in (front"));
    ck_assert(lbad("a b"));
    ck_assert(lbad("n>x"));
    ck_assert(lbad("-bad=1"));
    ck_assert(lbad("app=we b"));
}
END_TEST

START_TEST(field_selectors)
{
    char err[256];
    const struct fk_kind *ev = kind("", "events"), *nodes = kind("", "nodes");
    json_t *o = J("{\"metadata\":{\"name\":\"x,1\",\"namespace\":\"default\"},\"involvedObject\":{"
                  "\"kind\":\"Service\",\"name\":\"web\"},\"source\":{\"component\":\"prismlb\"}}");
    struct fk_selector *s;

    s = fk_field_selector_parse("involvedObject.kind=Service,involvedObject.name==web", ev, err,
                                sizeof(err));
    ck_assert_ptr_nonnull(s);
    ck_assert(fk_selector_match(s, o));
    fk_selector_free(s);
    s = fk_field_selector_parse("metadata.name=x\\,1,source=prismlb", ev, err, sizeof(err));
    ck_assert_ptr_nonnull(s);
    ck_assert(fk_selector_match(s, o));
    fk_selector_free(s);
    s = fk_field_selector_parse("metadata.namespace!=default", ev, err, sizeof(err));
    ck_assert(!fk_selector_match(s, o));
    fk_selector_free(s);
    ck_assert_ptr_null(fk_field_selector_parse("spec.nodeName=a", ev, err, sizeof(err)));
    ck_assert_str_eq(err, "field label not supported: spec.nodeName");
    ck_assert_ptr_null(fk_field_selector_parse("metadata.name", ev, err, sizeof(err)));
    json_decref(o);

    o = J("{\"metadata\":{\"name\":\"n1\"},\"spec\":{}}");
    s = fk_field_selector_parse("spec.unschedulable=false", nodes, err, sizeof(err));
    ck_assert(fk_selector_match(s, o));
    fk_selector_free(s);
    json_decref(o);
}
END_TEST

static json_t *
obj(const char *name, int gen)
{
    json_t *o =
        json_pack("{s:{s:s, s:s}, s:i}", "metadata", "name", name, "namespace", "ns", "gen", gen);
    ck_assert_ptr_nonnull(o);
    return o;
}

START_TEST(history_and_snapshots)
{
    struct fk_store s;
    struct fk_cluster *cl;
    const struct fk_kind *k = kind("coordination.k8s.io", "leases");
    json_t *snap;
    int expired;
    uint64_t rv_a, rv_b;

    ck_assert_int_eq(fk_store_init(&s, 4), 0);
    cl = fk_store_cluster(&s, "");
    ck_assert_ptr_nonnull(fk_store_get(cl, &fk_kinds[0], "", "default"));
    ck_assert_int_eq(s.rv, 5); /* four default namespaces after rv 1 */
    ck_assert_int_eq(fk_store_commit(&s, cl, k, FK_ADDED, obj("a", 1)), 0);
    rv_a = s.rv;
    ck_assert_int_eq(fk_store_commit(&s, cl, k, FK_ADDED, obj("b", 1)), 0);
    rv_b = s.rv;
    ck_assert_int_eq(fk_store_commit(&s, cl, k, FK_MODIFIED, obj("a", 2)), 0);
    ck_assert_int_eq(fk_store_commit(&s, cl, k, FK_DELETED, obj("b", 1)), 0);
    ck_assert_ptr_null(fk_store_get(cl, k, "ns", "b"));

    snap = fk_store_snapshot(&s, cl, k, rv_b, &expired);
    ck_assert_ptr_nonnull(snap);
    ck_assert_int_eq(json_object_size(snap), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(snap, "ns/a"), "gen")), 1);
    json_decref(snap);
    snap = fk_store_snapshot(&s, cl, k, rv_a, &expired);
    ck_assert_int_eq(json_object_size(snap), 1);
    json_decref(snap);
    /* History holds 4 events: rv_a-1 and older are gone. */
    ck_assert_int_eq(fk_store_oldest_rv(&s), rv_a - 1);
    ck_assert_ptr_null(fk_store_snapshot(&s, cl, k, rv_a - 2, &expired));
    ck_assert(expired);
    fk_store_compact(&s);
    ck_assert_int_eq(fk_store_oldest_rv(&s), s.rv);
    ck_assert_ptr_null(fk_store_snapshot(&s, cl, k, rv_b, &expired));
    ck_assert(expired);
    snap = fk_store_snapshot(&s, cl, k, 0, &expired);
    ck_assert_int_eq(json_object_size(snap), 1);
    json_decref(snap);
    /* Clusters are separate. */
    ck_assert_ptr_null(fk_store_get(fk_store_cluster(&s, "root:x"), k, "ns", "a"));
    fk_store_fini(&s);
}
END_TEST

/* Default, validate and store a Service "ns/name" with this spec (JSON);
 * returns the Status of a refusal (new) or NULL once stored. */
static json_t *
svc_put(struct fk_store *s, struct fk_cluster *cl, const char *name, const char *spec)
{
    const struct fk_kind *k = kind("", "services");
    json_t *old = fk_store_get(cl, k, "ns", name);
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "v1", "kind", "Service",
                          "metadata", "name", name, "namespace", "ns", "spec", J(spec));
    ck_assert_ptr_nonnull(o);
    json_t *st = fk_default_and_validate(cl, k, o, old);
    if (st) {
        json_decref(o);
        return st;
    }
    ck_assert_int_eq(fk_store_commit(s, cl, k, old ? FK_MODIFIED : FK_ADDED, o), 0);
    return NULL;
}

static const char *
svc_ip(struct fk_cluster *cl, const char *name)
{
    json_t *o = fk_store_get(cl, kind("", "services"), "ns", name);
    ck_assert_ptr_nonnull(o);
    return json_string_value(json_object_get(json_object_get(o, "spec"), "clusterIP"));
}

static void
svc_del(struct fk_store *s, struct fk_cluster *cl, const char *name)
{
    json_t *o = fk_store_get(cl, kind("", "services"), "ns", name);
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(fk_store_commit(s, cl, kind("", "services"), FK_DELETED, json_deep_copy(o)),
                     0);
}

/* ClusterIPs: the lowest free address from 10.96.0.10 on, explicit ones
 * and deleted ones accounted for, across 64-address words and the third
 * octet; node ports: another Service's port is refused, a Service keeps
 * its own on update, a deleted Service's port is free again. */
START_TEST(service_address_allocation)
{
    struct fk_store s;
    struct fk_cluster *cl;
    char name[32], want[32];
    const char *np = "{\"ports\":[{\"port\":80}]}";

    ck_assert_int_eq(fk_store_init(&s, 64), 0);
    cl = fk_store_cluster(&s, "");
    ck_assert_ptr_null(svc_put(&s, cl, "a", np));
    ck_assert_str_eq(svc_ip(cl, "a"), "10.96.0.10");
    ck_assert_ptr_null(svc_put(&s, cl, "b", np));
    ck_assert_str_eq(svc_ip(cl, "b"), "10.96.0.11");
    ck_assert_ptr_null(
        svc_put(&s, cl, "c", "{\"clusterIP\":\"10.96.0.12\",\"ports\":[{\"port\":80}]}"));
    ck_assert_ptr_null(svc_put(&s, cl, "d", np));
    ck_assert_str_eq(svc_ip(cl, "d"), "10.96.0.13");
    svc_del(&s, cl, "b");
    ck_assert_ptr_null(svc_put(&s, cl, "e", np));
    ck_assert_str_eq(svc_ip(cl, "e"), "10.96.0.11");
    /* an update keeps its address and takes no other */
    ck_assert_ptr_null(svc_put(&s, cl, "e", "{\"ports\":[{\"port\":81}]}"));
    ck_assert_str_eq(svc_ip(cl, "e"), "10.96.0.11");
    ck_assert_ptr_null(svc_put(&s, cl, "f", np));
    ck_assert_str_eq(svc_ip(cl, "f"), "10.96.0.14");
    /* 1,000 more: consecutive, through 10.96.0.255 -> 10.96.1.0 */
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "s%d", i);
        ck_assert_ptr_null(svc_put(&s, cl, name, np));
        snprintf(want, sizeof(want), "10.96.%d.%d", (15 + i) / 256, (15 + i) % 256);
        ck_assert_str_eq(svc_ip(cl, name), want);
    }
    /* a hole in the middle is found first */
    svc_del(&s, cl, "s500");
    svc_del(&s, cl, "s700");
    ck_assert_ptr_null(svc_put(&s, cl, "g", np));
    ck_assert_str_eq(svc_ip(cl, "g"), "10.96.2.3"); /* 15 + 500 = 515 */
    ck_assert_ptr_null(svc_put(&s, cl, "h", np));
    ck_assert_str_eq(svc_ip(cl, "h"), "10.96.2.203"); /* 15 + 700 = 715 */
    ck_assert_ptr_null(svc_put(&s, cl, "i", np));
    ck_assert_str_eq(svc_ip(cl, "i"), "10.96.3.247"); /* 15 + 1000 = 1015 */

    /* node ports */
    const char *p30080 = "{\"type\":\"NodePort\",\"ports\":[{\"port\":80,\"nodePort\":30080}]}";
    ck_assert_ptr_null(svc_put(&s, cl, "np1", p30080));
    json_t *st = svc_put(&s, cl, "np2", p30080);
    ck_assert_ptr_nonnull(st);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "code")), 422);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(st, "message")),
                                 "provided port is already allocated"));
    json_decref(st);
    ck_assert_ptr_null(svc_put(&s, cl, "np1", p30080)); /* its own port */
    /* an allocated port is never one already taken */
    ck_assert_ptr_null(svc_put(&s, cl, "np3", "{\"type\":\"NodePort\",\"ports\":[{\"port\":80}]}"));
    json_t *np3 = fk_store_get(cl, kind("", "services"), "ns", "np3");
    json_int_t got = json_integer_value(json_object_get(
        json_array_get(json_object_get(json_object_get(np3, "spec"), "ports"), 0), "nodePort"));
    ck_assert(got >= 30000 && got <= 32767 && got != 30080);
    svc_del(&s, cl, "np1");
    ck_assert_ptr_null(svc_put(&s, cl, "np2", p30080));
    /* a type change away from NodePort frees the port */
    ck_assert_ptr_null(
        svc_put(&s, cl, "np2", "{\"type\":\"ClusterIP\",\"ports\":[{\"port\":80}]}"));
    ck_assert_ptr_null(svc_put(&s, cl, "np4", p30080));
    fk_store_fini(&s);
}
END_TEST

START_TEST(json_writer_matches_jansson)
{
    const char *docs[] = {
        "{\"a\":\"q\\\"uo\\\\te\\n\\t\\r\\b\\f\\u0001\\u001f/\",\"b\":[1,-2,true,false,null,{}],"
        "\"c\":{\"d\":[],\"e\":\"\\u00e9\\u4e2d\\ud83d\\ude00\"},\"f\":1.5,\"g\":9007199254740993}",
        "[]",
        "{}",
        "\"x\"",
        "[0.1,1e300,-0.0]",
    };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        json_t *v = json_loads(docs[i], JSON_DECODE_ANY, NULL);
        struct fk_buf b = {0};
        char *want;
        ck_assert_ptr_nonnull(v);
        fk_json_write(&b, v);
        fk_buf_add(&b, "", 1);
        want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        ck_assert_int_eq(b.err, 0);
        ck_assert_str_eq(b.p, want);
        free(want);
        free(b.p);
        json_decref(v);
    }
    {
        json_t *v = json_stringn("a\0b", 3);
        struct fk_buf b = {0};
        fk_json_write(&b, v);
        ck_assert_int_eq(b.len, 10);
        ck_assert(!memcmp(b.p, "\"a\\u0000b\"", 10));
        free(b.p);
        json_decref(v);
    }
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("fake-kube-unit");
    TCase *tc = tcase_create("unit");

    tcase_add_test(tc, merge_patch_rfc7386);
    tcase_add_test(tc, json_patch_rfc6902);
    tcase_add_test(tc, strategic_merge_keys);
    tcase_add_test(tc, strategic_merge_directives);
    tcase_add_test(tc, label_selectors);
    tcase_add_test(tc, field_selectors);
    tcase_add_test(tc, history_and_snapshots);
    tcase_add_test(tc, service_address_allocation);
    tcase_add_test(tc, json_writer_matches_jansson);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
