/*
 * Check suite for core/kube/cache.c: object keys and the diff a re-list
 * applies after a 410 (only differences reported; unchanged objects keep
 * their cached reference; vanished ones reported as deleted), and the
 * fields a trimmed informer keeps (plb_informer_opts.keep).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube-internal.h"
#include "testutil.h"

static json_t *
obj(const char *ns, const char *name, const char *rv)
{
    json_t *o = json_pack("{s:{s:s, s:s}}", "metadata", "name", name, "resourceVersion", rv);
    if (ns)
        json_object_set_new(json_object_get(o, "metadata"), "namespace", json_string(ns));
    return o;
}

struct rec {
    int added, updated, deleted;
    char log[1024];
    json_t *cache; /* to check the cache is updated before the call */
};

static void
record(const char *key, json_t *old, json_t *o, void *arg)
{
    struct rec *r = arg;
    char line[128];
    if (!old) {
        r->added++;
        ck_assert_ptr_eq(json_object_get(r->cache, key), o);
        snprintf(line, sizeof(line), "+%s@%s ", key, core_kube_obj_rv(o));
    } else if (!o) {
        r->deleted++;
        ck_assert_ptr_null(json_object_get(r->cache, key));
        snprintf(line, sizeof(line), "-%s@%s ", key, core_kube_obj_rv(old));
    } else {
        r->updated++;
        ck_assert_ptr_eq(json_object_get(r->cache, key), o);
        snprintf(line, sizeof(line), "~%s@%s>%s ", key, core_kube_obj_rv(old), core_kube_obj_rv(o));
    }
    strncat(r->log, line, sizeof(r->log) - strlen(r->log) - 1);
}

START_TEST(keys)
{
    char buf[64];
    json_t *o = obj("default", "web", "1");
    ck_assert_int_eq(core_kube_obj_key(o, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "default/web");
    ck_assert_str_eq(core_kube_obj_rv(o), "1");
    json_decref(o);
    o = obj(NULL, "node-1", "2");
    ck_assert_int_eq(core_kube_obj_key(o, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "node-1");
    ck_assert_int_eq(core_kube_obj_key(o, buf, 4), -22);
    json_decref(o);
    o = json_pack("{s:{}}", "metadata");
    ck_assert_int_eq(core_kube_obj_key(o, buf, sizeof(buf)), -22);
    ck_assert_str_eq(core_kube_obj_rv(o), "");
    json_decref(o);
}
END_TEST

START_TEST(diff_reports_only_differences)
{
    struct rec r = {0};
    json_t *cache = json_object(), *fresh = json_object();
    r.cache = cache;
    json_object_set_new(cache, "a/same", obj("a", "same", "5"));
    json_object_set_new(cache, "a/changed", obj("a", "changed", "6"));
    json_object_set_new(cache, "a/gone", obj("a", "gone", "7"));
    json_t *kept = json_object_get(cache, "a/same");
    json_object_set_new(fresh, "a/same", obj("a", "same", "5"));
    json_object_set_new(fresh, "a/changed", obj("a", "changed", "9"));
    json_object_set_new(fresh, "a/new", obj("a", "new", "8"));

    ck_assert_int_eq(core_kube_diff(cache, fresh, record, &r), 3);
    ck_assert_int_eq(r.added, 1);
    ck_assert_int_eq(r.updated, 1);
    ck_assert_int_eq(r.deleted, 1);
    ck_assert_ptr_nonnull(strstr(r.log, "-a/gone@7 "));
    ck_assert_ptr_nonnull(strstr(r.log, "~a/changed@6>9 "));
    ck_assert_ptr_nonnull(strstr(r.log, "+a/new@8 "));
    ck_assert_ptr_null(strstr(r.log, "same"));
    /* The unchanged object is the very same reference: held once. */
    ck_assert_ptr_eq(json_object_get(cache, "a/same"), kept);
    ck_assert_int_eq(json_object_size(cache), 3);
    /* The new and changed ones are shared with fresh, not copied. */
    ck_assert_ptr_eq(json_object_get(cache, "a/new"), json_object_get(fresh, "a/new"));
    json_decref(fresh);
    ck_assert_int_eq(json_object_get(cache, "a/new")->refcount, 1);

    /* The same list again: nothing. An empty list: everything deleted. */
    memset(r.log, 0, sizeof(r.log));
    fresh = json_deep_copy(cache);
    ck_assert_int_eq(core_kube_diff(cache, fresh, record, &r), 0);
    json_decref(fresh);
    fresh = json_object();
    ck_assert_int_eq(core_kube_diff(cache, fresh, record, &r), 3);
    ck_assert_int_eq(r.deleted, 4);
    ck_assert_int_eq(json_object_size(cache), 0);
    json_decref(fresh);
    json_decref(cache);
}
END_TEST

START_TEST(diff_of_a_large_list)
{
    struct rec r = {0};
    json_t *cache = json_object(), *fresh = json_object();
    char key[32], rv[16];
    r.cache = cache;
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof(key), "n%d", i);
        snprintf(rv, sizeof(rv), "%d", i + 10);
        json_object_set_new(cache, key, obj(NULL, key, rv));
        if (i % 10 == 0)
            continue; /* 1000 vanish */
        if (i % 10 == 1)
            snprintf(rv, sizeof(rv), "%d", i + 100000); /* 1000 change */
        json_object_set_new(fresh, key, obj(NULL, key, rv));
    }
    ck_assert_int_eq(core_kube_diff(cache, fresh, record, &r), 2000);
    ck_assert_int_eq(r.deleted, 1000);
    ck_assert_int_eq(r.updated, 1000);
    ck_assert_int_eq(r.added, 0);
    ck_assert_int_eq(json_object_size(cache), 9000);
    json_decref(fresh);
    json_decref(cache);
}
END_TEST

START_TEST(trim_drops_managed_fields_only)
{
    json_t *o =
        json_loads("{\"metadata\":{\"name\":\"a\",\"managedFields\":[{\"manager\":"
                   "\"kubectl\"}],\"labels\":{\"x\":\"y\"}},\"spec\":{\"managedFields\":1}}",
                   0, NULL);
    ck_assert_ptr_nonnull(o);
    core_kube_obj_trim(o);
    json_t *want = json_loads("{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"y\"}},"
                              "\"spec\":{\"managedFields\":1}}",
                              0, NULL);
    ck_assert(json_equal(o, want));
    core_kube_obj_trim(o); /* idempotent; no metadata is fine too */
    json_t *bare = json_pack("{s:i}", "x", 1);
    core_kube_obj_trim(bare);
    ck_assert_int_eq(json_object_size(bare), 1);
    json_decref(bare);
    json_decref(want);
    json_decref(o);
}
END_TEST

/* JSON text with ' for " (the tests' objects are easier to read so). */
static json_t *
j(const char *text)
{
    char buf[2048];
    size_t n = strlen(text);
    ck_assert_uint_lt(n, sizeof(buf));
    for (size_t i = 0; i <= n; i++)
        buf[i] = text[i] == '\'' ? '"' : text[i];
    json_error_t e;
    json_t *o = json_loads(buf, 0, &e);
    ck_assert_msg(o != NULL, "%s: %s", buf, e.text);
    return o;
}

static void
assert_json_eq(json_t *got, json_t *want)
{
    char *a = json_dumps(got, JSON_SORT_KEYS), *b = json_dumps(want, JSON_SORT_KEYS);
    ck_assert_msg(json_equal(got, want), "got  %s\nwant %s", a, b);
    free(a);
    free(b);
}

START_TEST(keep_keeps_exactly_the_named_fields_and_the_identity)
{
    /* A Node as the API sends it: the kept form has its labels, the type
     * and status of each condition (not the heartbeat), the addresses,
     * and the identity; nothing else. */
    json_t *node = j("{'apiVersion':'v1','kind':'Node','metadata':{'name':'n1','uid':'u1',"
                     "'resourceVersion':'7','labels':{'a':'1','kubernetes.io/os':'linux'},"
                     "'annotations':{'node.alpha.kubernetes.io/ttl':'0'},'creationTimestamp':'t'},"
                     "'spec':{'podCIDR':'10.244.0.0/24','unschedulable':true},"
                     "'status':{'conditions':[{'type':'Ready','status':'True',"
                     "'lastHeartbeatTime':'h1','reason':'KubeletReady'},"
                     "{'type':'DiskPressure','status':'False','lastHeartbeatTime':'h1'}],"
                     "'addresses':[{'type':'InternalIP','address':'10.0.0.1'}],"
                     "'images':[{'names':['a'],'sizeBytes':1}],'capacity':{'cpu':'2'}}}");
    const char *const keep[] = {"/metadata/labels",           "/spec/unschedulable",
                                "/status/conditions/type",    "/status/conditions/status",
                                "/status/addresses",          "/spec/absent/deeper",
                                "/metadata/labels/redundant", NULL};
    json_t *tree = NULL;
    ck_assert_int_eq(core_kube_keep_new(keep, &tree), 0);
    ck_assert_ptr_nonnull(tree);
    json_t *got = core_kube_keep_apply(tree, node, NULL);
    json_t *want = j("{'metadata':{'name':'n1','uid':'u1',"
                     "'resourceVersion':'7','labels':{'a':'1','kubernetes.io/os':'linux'}},"
                     "'spec':{'unschedulable':true},"
                     "'status':{'conditions':[{'type':'Ready','status':'True'},"
                     "{'type':'DiskPressure','status':'False'}],"
                     "'addresses':[{'type':'InternalIP','address':'10.0.0.1'}]}}");
    assert_json_eq(got, want);
    /* the kept values are shared, not copied */
    ck_assert_ptr_eq(json_object_get(json_object_get(got, "metadata"), "labels"),
                     json_object_get(json_object_get(node, "metadata"), "labels"));
    json_decref(got);
    json_decref(want);
    json_decref(tree);

    /* No keep: the object itself, whole. */
    ck_assert_int_eq(core_kube_keep_new(NULL, &tree), 0);
    ck_assert_ptr_null(tree);
    got = core_kube_keep_apply(NULL, node, NULL);
    ck_assert_ptr_eq(got, node);
    json_decref(got);
    json_decref(node);
}
END_TEST

START_TEST(keep_paths_escape_slashes_and_arrays_apply_to_each_item)
{
    json_t *slice = j("{'metadata':{'name':'s','namespace':'d','resourceVersion':'3',"
                      "'labels':{'kubernetes.io/service-name':'web','other':'x'}},"
                      "'endpoints':[{'addresses':['10.0.0.1'],'nodeName':'n1',"
                      "'conditions':{'ready':true},'targetRef':{'kind':'Pod'}},"
                      "{'addresses':['10.0.0.2'],'conditions':{'ready':false}}, 'odd'],"
                      "'ports':[{'port':80}],'a~b':1,'c':{'d':'scalar'}}");
    const char *const keep[] = {"/metadata/labels/kubernetes.io~1service-name",
                                "/endpoints/nodeName",
                                "/endpoints/conditions/ready",
                                "/a~0b",
                                "/c/d/e",
                                NULL};
    json_t *tree = NULL;
    ck_assert_int_eq(core_kube_keep_new(keep, &tree), 0);
    json_t *got = core_kube_keep_apply(tree, slice, NULL);
    /* an array item that is no object ('odd') is kept as it is, as is a
     * scalar where the path goes deeper ('c/d') */
    json_t *want = j("{'metadata':{'name':'s','namespace':'d','resourceVersion':'3',"
                     "'labels':{'kubernetes.io/service-name':'web'}},"
                     "'endpoints':[{'nodeName':'n1','conditions':{'ready':true}},"
                     "{'conditions':{'ready':false}},'odd'],'a~b':1,'c':{'d':'scalar'}}");
    assert_json_eq(got, want);
    json_decref(got);
    json_decref(want);
    json_decref(tree);
    json_decref(slice);

    /* A wider path wins over a narrower one, in either order. */
    const char *const wide[] = {"/spec/ports/port", "/spec", "/status/x", NULL};
    ck_assert_int_eq(core_kube_keep_new(wide, &tree), 0);
    json_t *svc = j("{'metadata':{'name':'x'},'spec':{'ports':[{'port':1,'name':'a'}],'type':'T'},"
                    "'status':{'x':1,'y':2}}");
    got = core_kube_keep_apply(tree, svc, NULL);
    want = j("{'metadata':{'name':'x'},'spec':{'ports':[{'port':1,'name':'a'}],'type':'T'},"
             "'status':{'x':1}}");
    assert_json_eq(got, want);
    json_decref(got);
    json_decref(want);
    json_decref(tree);
    json_decref(svc);
}
END_TEST

START_TEST(keep_pool_holds_equal_kept_values_once)
{
    /* Two slices of one Service on the same nodes: their kept endpoints,
     * labels and each endpoint's conditions are the same values; their
     * roots, metadata and identity strings are their own. */
    const char *const keep[] = {"/metadata/labels", "/endpoints/nodeName", "/endpoints/conditions",
                                NULL};
    json_t *tree = NULL, *pool = json_object();
    ck_assert_int_eq(core_kube_keep_new(keep, &tree), 0);
    json_t *a = j("{'metadata':{'name':'a','namespace':'d','uid':'u1','resourceVersion':'1',"
                  "'labels':{'kubernetes.io/service-name':'web'}},"
                  "'endpoints':[{'addresses':['10.0.0.1'],'nodeName':'n1','conditions':"
                  "{'ready':true}},{'addresses':['10.0.0.2'],'nodeName':'n2','conditions':"
                  "{'ready':true}}]}");
    json_t *b = j("{'metadata':{'name':'b','namespace':'d','uid':'u2','resourceVersion':'2',"
                  "'labels':{'kubernetes.io/service-name':'web'}},"
                  "'endpoints':[{'addresses':['10.0.1.1'],'nodeName':'n1','conditions':"
                  "{'ready':true}},{'addresses':['10.0.1.2'],'nodeName':'n2','conditions':"
                  "{'ready':true}}]}");
    json_t *ka = core_kube_keep_apply(tree, a, pool), *kb = core_kube_keep_apply(tree, b, pool);
    json_t *ka_no_pool = core_kube_keep_apply(tree, a, NULL);
    assert_json_eq(ka, ka_no_pool); /* sharing changes no value */
    ck_assert_ptr_eq(json_object_get(ka, "endpoints"), json_object_get(kb, "endpoints"));
    json_t *ma = json_object_get(ka, "metadata"), *mb = json_object_get(kb, "metadata");
    ck_assert_ptr_ne(ma, mb);
    ck_assert_ptr_eq(json_object_get(ma, "labels"), json_object_get(mb, "labels"));
    ck_assert_ptr_ne(json_object_get(ma, "namespace"), json_object_get(mb, "namespace"));
    /* within one object, equal values are one too */
    json_t *eps = json_object_get(ka, "endpoints");
    ck_assert_ptr_eq(json_object_get(json_array_get(eps, 0), "conditions"),
                     json_object_get(json_array_get(eps, 1), "conditions"));
    size_t held = json_object_size(pool);
    ck_assert_uint_gt(held, 0);

    /* A sweep drops only what no kept object holds, once the pool grew. */
    size_t mark = 0;
    core_kube_pool_sweep(pool, &mark); /* below 1024 entries: nothing done */
    ck_assert_uint_eq(json_object_size(pool), held);
    ck_assert_uint_eq(mark, 0);
    for (int i = 0; i < 1100; i++) {
        char name[32];
        snprintf(name, sizeof(name), "n%d", i);
        json_t *o = json_pack("{s:{s:s}, s:[{s:s}]}", "metadata", "name", name, "endpoints",
                              "nodeName", name);
        json_decref(core_kube_keep_apply(tree, o, pool)); /* kept by nobody */
        json_decref(o);
    }
    ck_assert_uint_gt(json_object_size(pool), 1024);
    core_kube_pool_sweep(pool, &mark);
    ck_assert_uint_eq(json_object_size(pool), held); /* ka's and kb's values stay */
    ck_assert_uint_eq(mark, held);
    ck_assert_ptr_eq(json_object_get(ka, "endpoints"), json_object_get(kb, "endpoints"));
    json_decref(ka);
    json_decref(kb);
    json_decref(ka_no_pool); /* a's values, which the pool took */
    json_decref(a);
    json_decref(b);
    mark = 0;
    for (int i = 0; i < 1100; i++) {
        char name[32];
        snprintf(name, sizeof(name), "m%d", i);
        json_t *o = json_pack("{s:{s:s}, s:[{s:s}]}", "metadata", "name", name, "endpoints",
                              "nodeName", name);
        json_decref(core_kube_keep_apply(tree, o, pool));
        json_decref(o);
    }
    core_kube_pool_sweep(pool, &mark);
    ck_assert_uint_eq(json_object_size(pool), 0); /* every holder gone */
    ck_assert_uint_eq(mark, 0);
    json_decref(tree);
    json_decref(pool);
}
END_TEST

START_TEST(keep_refuses_bad_paths)
{
    const char *const bad[][2] = {
        {"", NULL}, {"spec", NULL}, {"/a~2", NULL}, {"/a~", NULL}, {"/ok", NULL}};
    for (size_t i = 0; i < 4; i++) {
        json_t *tree = (json_t *)1;
        ck_assert_int_eq(core_kube_keep_new(bad[i], &tree), -EINVAL);
        ck_assert_ptr_null(tree);
    }
    json_t *tree = NULL;
    ck_assert_int_eq(core_kube_keep_new(bad[4], &tree), 0);
    json_decref(tree);
}
END_TEST

START_TEST(same_but_resource_version)
{
    json_t *a = j("{'metadata':{'name':'n','resourceVersion':'1','labels':{'x':'1'}},"
                  "'status':{'s':1}}");
    json_t *b = j("{'metadata':{'name':'n','resourceVersion':'2','labels':{'x':'1'}},"
                  "'status':{'s':1}}");
    json_t *c = j("{'metadata':{'name':'n','resourceVersion':'2','labels':{'x':'2'}},"
                  "'status':{'s':1}}");
    json_t *d = j("{'metadata':{'name':'n','resourceVersion':'2','labels':{'x':'1'}},"
                  "'status':{'s':2}}");
    json_t *e = j("{'metadata':{'name':'n','labels':{'x':'1'}},'status':{'s':1}}");
    json_t *f = j("{'metadata':{'name':'n','resourceVersion':'1','labels':{'x':'1'}}}");
    json_t *g = j("{'metadata':{'name':'n','resourceVersion':'1','labels':{'x':'1'}},"
                  "'status':{'s':1,'resourceVersion':'9'}}");
    ck_assert_int_eq(core_kube_same_but_rv(a, b), 1);
    ck_assert_int_eq(core_kube_same_but_rv(b, a), 1);
    ck_assert_int_eq(core_kube_same_but_rv(a, e), 1); /* rv absent on one side */
    ck_assert_int_eq(core_kube_same_but_rv(e, a), 1);
    ck_assert_int_eq(core_kube_same_but_rv(a, c), 0); /* a kept label changed */
    ck_assert_int_eq(core_kube_same_but_rv(a, d), 0); /* elsewhere */
    ck_assert_int_eq(core_kube_same_but_rv(a, f), 0); /* a member gone */
    ck_assert_int_eq(core_kube_same_but_rv(f, a), 0);
    ck_assert_int_eq(core_kube_same_but_rv(a, g), 0); /* only metadata's rv is skipped */
    /* a watch event's object has kind and apiVersion, a list item not */
    json_t *h = j("{'kind':'Node','apiVersion':'v1','metadata':{'name':'n','resourceVersion':'5',"
                  "'labels':{'x':'1'}},'status':{'s':1}}");
    ck_assert_int_eq(core_kube_same_but_rv(a, h), 1);
    ck_assert_int_eq(core_kube_same_but_rv(h, a), 1);
    ck_assert_int_eq(core_kube_same_but_rv(h, c), 0);
    json_decref(h);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
    json_decref(e);
    json_decref(f);
    json_decref(g);
}
END_TEST

static Suite *
cache_suite(void)
{
    Suite *s = suite_create("kube_cache");
    TCase *tc = tcase_create("cache");
    tcase_add_test(tc, keys);
    tcase_add_test(tc, diff_reports_only_differences);
    tcase_add_test(tc, diff_of_a_large_list);
    tcase_add_test(tc, trim_drops_managed_fields_only);
    tcase_add_test(tc, keep_keeps_exactly_the_named_fields_and_the_identity);
    tcase_add_test(tc, keep_paths_escape_slashes_and_arrays_apply_to_each_item);
    tcase_add_test(tc, keep_pool_holds_equal_kept_values_once);
    tcase_add_test(tc, keep_refuses_bad_paths);
    tcase_add_test(tc, same_but_resource_version);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(cache_suite());
}
