/*
 * Check suite for core/kube/evkey.c: Event aggregation keys (what makes
 * two Events "the same" for client-go's recorder) and Event bodies.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"
#include "testutil.h"

static json_t *
svc(const char *name, const char *uid)
{
    return json_pack("{s:{s:s, s:s, s:s, s:s}}", "metadata", "name", name, "namespace", "default",
                     "uid", uid, "resourceVersion", "42");
}

START_TEST(same_reason_message_object_same_key)
{
    struct core_kube_evsrc src = {"prismlb-hetzner", "node-1"};
    json_t *a = svc("web", "u1"), *a2 = svc("web", "u1"), *b = svc("web", "u2"),
           *c = svc("api", "u1");
    char *k1 = core_kube_event_key(&src, a, "Service", "v1", "Warning", "BadAnnotation", "m");
    char *k2 = core_kube_event_key(&src, a2, "Service", "v1", "Warning", "BadAnnotation", "m");
    ck_assert_str_eq(k1, k2);
    /* Any difference in the object, reason, message, type or source: new key. */
    char *d[] = {
        core_kube_event_key(&src, b, "Service", "v1", "Warning", "BadAnnotation", "m"),
        core_kube_event_key(&src, c, "Service", "v1", "Warning", "BadAnnotation", "m"),
        core_kube_event_key(&src, a, "Service", "v1", "Warning", "BadAnnotation", "m2"),
        core_kube_event_key(&src, a, "Service", "v1", "Warning", "Other", "m"),
        core_kube_event_key(&src, a, "Service", "v1", "Normal", "BadAnnotation", "m"),
        core_kube_event_key(&(struct core_kube_evsrc){"x", "node-1"}, a, "Service", "v1", "Warning",
                            "BadAnnotation", "m"),
        core_kube_event_key(&src, a, "Node", "v1", "Warning", "BadAnnotation", "m"),
    };
    for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
        ck_assert_str_ne(k1, d[i]);
        core_free(d[i]);
    }
    /* Field boundaries cannot be confused: "ab"+"c" differs from "a"+"bc". */
    char *x = core_kube_event_key(&src, a, "Service", "v1", "Warning", "ab", "c");
    char *y = core_kube_event_key(&src, a, "Service", "v1", "Warning", "a", "bc");
    ck_assert_str_ne(x, y);
    core_free(x);
    core_free(y);
    /* The object's own kind wins over the hint. */
    json_object_set_new(a2, "kind", json_string("Service"));
    char *k3 = core_kube_event_key(&src, a2, "Ignored", "v1", "Warning", "BadAnnotation", "m");
    ck_assert_str_eq(k1, k3);
    core_free(k1);
    core_free(k2);
    core_free(k3);
    json_decref(a);
    json_decref(a2);
    json_decref(b);
    json_decref(c);
}
END_TEST

START_TEST(event_body)
{
    struct core_kube_evsrc src = {"prismlb", NULL};
    json_t *o = svc("web", "u1");
    int64_t ns = 1764424800LL * 1000000000LL + 123; /* 2025-11-29T14:00:00Z */
    json_t *ev = core_kube_event_body(&src, o, "Service", "v1", NULL, "Synced", "ok", ns);
    ck_assert_ptr_nonnull(ev);
    char *s = json_dumps(ev, JSON_SORT_KEYS);
    json_t *want =
        json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s,"
                  " s:{s:s}, s:i, s:s, s:s, s:s, s:s}",
                  "apiVersion", "v1", "kind", "Event", "metadata", "name", "web.187c7f01dce3c07b",
                  "namespace", "default", "involvedObject", "kind", "Service", "apiVersion", "v1",
                  "name", "web", "namespace", "default", "uid", "u1", "resourceVersion", "42",
                  "reason", "Synced", "message", "ok", "type", "Normal", "source", "component",
                  "prismlb", "count", 1, "firstTimestamp", "2025-11-29T14:00:00Z", "lastTimestamp",
                  "2025-11-29T14:00:00Z", "reportingComponent", "prismlb", "reportingInstance", "");
    ck_assert_msg(json_equal(ev, want), "%s", s);
    free(s);
    json_decref(want);
    json_decref(ev);
    /* A cluster-scoped object's Events go to "default". */
    json_t *node = json_pack("{s:{s:s}}", "metadata", "name", "n1");
    ev = core_kube_event_body(&src, node, "Node", "v1", "Warning", "R", "m", ns);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(ev, "metadata"), "namespace")),
        "default");
    ck_assert_ptr_null(json_object_get(json_object_get(ev, "involvedObject"), "namespace"));
    json_decref(ev);
    json_decref(node);
    json_t *noname = json_pack("{s:{}}", "metadata");
    ck_assert_ptr_null(core_kube_event_body(&src, noname, "X", "v1", "Normal", "R", "m", ns));
    json_decref(noname);
    json_decref(o);
}
END_TEST

/* An Event the API returns has the key of the record that created it, so
 * a restarted recorder finds it; any other Event has another key. */
START_TEST(an_event_read_back_has_the_key_it_was_recorded_with)
{
    struct core_kube_evsrc src = {"prismlb", NULL};
    json_t *o = svc("web", "u1");
    int64_t ns = 1764424800LL * 1000000000LL;
    char *key = core_kube_event_key(&src, o, "Service", "v1", "Warning", "Refused", "no lb99");
    json_t *ev =
        core_kube_event_body(&src, o, "Service", "v1", "Warning", "Refused", "no lb99", ns);
    /* as the server lists it: no kind or apiVersion, a uid, a count */
    json_object_del(ev, "kind");
    json_object_del(ev, "apiVersion");
    json_object_set_new(json_object_get(ev, "metadata"), "uid", json_string("e-1"));
    char *back = core_kube_event_item_key(ev);
    ck_assert_str_eq(back, key);
    core_free(back);
    const char *fields[][2] = {{"message", "no lb98"}, {"reason", "Other"}, {"type", "Normal"}};
    for (size_t i = 0; i < 3; i++) {
        json_t *other = json_deep_copy(ev);
        json_object_set_new(other, fields[i][0], json_string(fields[i][1]));
        back = core_kube_event_item_key(other);
        ck_assert_str_ne(back, key);
        core_free(back);
        json_decref(other);
    }
    json_t *other = json_deep_copy(ev);
    json_object_set_new(json_object_get(other, "involvedObject"), "uid", json_string("u2"));
    back = core_kube_event_item_key(other);
    ck_assert_str_ne(back, key);
    core_free(back);
    json_object_set_new(json_object_get(other, "source"), "host", json_string("node-2"));
    json_object_set_new(json_object_get(other, "involvedObject"), "uid", json_string("u1"));
    back = core_kube_event_item_key(other);
    ck_assert_str_ne(back, key);
    core_free(back);
    json_decref(other);
    /* No involvedObject: no key. */
    json_object_del(ev, "involvedObject");
    ck_assert_ptr_null(core_kube_event_item_key(ev));
    core_free(key);
    json_decref(ev);
    json_decref(o);
}
END_TEST

/* The lookup's field selector names the object, reason, type and source
 * in the apiserver's grammar, escaping what the grammar reserves. */
START_TEST(the_lookup_selector_names_object_reason_type_and_source)
{
    struct core_kube_evsrc src = {"prismlb", "ignored-host"};
    json_t *o = svc("web", "u1");
    char *sel = core_kube_event_selector(&src, o, "Service", "v1", "Warning", "Refused");
    ck_assert_str_eq(sel, "involvedObject.name=web,involvedObject.uid=u1,"
                          "involvedObject.kind=Service,reason=Refused,type=Warning,source=prismlb");
    core_free(sel);
    sel = core_kube_event_selector(&src, o, "Service", "v1", NULL, "a,b=c\\d");
    ck_assert_str_eq(sel, "involvedObject.name=web,involvedObject.uid=u1,"
                          "involvedObject.kind=Service,reason=a\\,b\\=c\\\\d,type=Normal,"
                          "source=prismlb");
    core_free(sel);
    /* No uid: that term is left out. */
    json_t *n = json_pack("{s:{s:s}}", "metadata", "name", "n1");
    sel = core_kube_event_selector(&(struct core_kube_evsrc){"c", NULL}, n, "Node", "v1", "Warning",
                                   "R");
    ck_assert_str_eq(sel, "involvedObject.name=n1,involvedObject.kind=Node,reason=R,"
                          "type=Warning,source=c");
    core_free(sel);
    /* No name, or a selector over 2 KiB: none. */
    json_t *noname = json_pack("{s:{}}", "metadata");
    ck_assert_ptr_null(core_kube_event_selector(&src, noname, "X", "v1", "Normal", "R"));
    char big[3000];
    memset(big, 'r', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ck_assert_ptr_null(core_kube_event_selector(&src, o, "Service", "v1", "Normal", big));
    json_decref(noname);
    json_decref(n);
    json_decref(o);
}
END_TEST

static Suite *
events_suite(void)
{
    Suite *s = suite_create("kube_events");
    TCase *tc = tcase_create("events");
    tcase_add_test(tc, same_reason_message_object_same_key);
    tcase_add_test(tc, event_body);
    tcase_add_test(tc, an_event_read_back_has_the_key_it_was_recorded_with);
    tcase_add_test(tc, the_lookup_selector_names_object_reason_type_and_source);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(events_suite());
}
