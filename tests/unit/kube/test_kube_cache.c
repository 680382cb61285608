/*
 * Check suite for core/kube/cache.c: object keys and the diff a re-list
 * applies after a 410 (only differences reported; unchanged objects keep
 * their cached reference; vanished ones reported as deleted).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kube-internal.h"

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

static Suite *
cache_suite(void)
{
    Suite *s = suite_create("kube_cache");
    TCase *tc = tcase_create("cache");
    tcase_add_test(tc, keys);
    tcase_add_test(tc, diff_reports_only_differences);
    tcase_add_test(tc, diff_of_a_large_list);
    tcase_add_test(tc, trim_drops_managed_fields_only);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cache_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
