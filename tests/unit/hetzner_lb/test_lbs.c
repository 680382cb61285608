/*
 * The balancers mod_hetzner_lb keeps (modules/mod_hetzner_lb/hz_lbs.c):
 * what is kept of a balancer's JSON and what it costs, shared references,
 * and the index by robotlb/service-uid.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "fakehost.h"
#include "testutil.h"

/* Live bytes of everything allocated through the counting functions. */
static long live;

static void *
count_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p)
        live += (long)malloc_usable_size(p);
    return p;
}

static void *
count_calloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (p)
        live += (long)malloc_usable_size(p);
    return p;
}

static void *
count_realloc(void *p, size_t n)
{
    long old = p ? (long)malloc_usable_size(p) : 0;
    void *q = realloc(p, n ? n : 1);
    if (q)
        live += (long)malloc_usable_size(q) - old;
    return q;
}

static void
count_free(void *p)
{
    if (p)
        live -= (long)malloc_usable_size(p);
    free(p);
}

/* A host whose allocator counts (the shared fake host's mem, replaced). */
static struct fake_host count_host;

/* A balancer as Hetzner answers it: ntargets IP targets, each with its
 * health_status per service (new text). */
static char *
lb_text(int id, const char *uid, int ntargets)
{
    size_t cap = 4096 + (size_t)ntargets * 160, n;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    n = (size_t)snprintf(
        s, cap,
        "{\"id\":%d,\"name\":\"svc-%d.default\",\"public_net\":{\"enabled\":true,"
        "\"ipv4\":{\"ip\":\"198.51.100.%d\",\"dns_ptr\":\"static.198.51.100.%d.example\"},"
        "\"ipv6\":{\"ip\":\"2001:db8::%x\",\"dns_ptr\":\"static.2001:db8::%x.example\"}},"
        "\"private_net\":[{\"network\":7,\"ip\":\"10.0.0.%d\"}],"
        "\"location\":{\"id\":3,\"name\":\"hel1\",\"description\":\"Helsinki DC Park 1\","
        "\"country\":\"FI\",\"city\":\"Helsinki\",\"latitude\":60.17,\"longitude\":24.94,"
        "\"network_zone\":\"eu-central\"},"
        "\"load_balancer_type\":{\"id\":2,\"name\":\"lb21\",\"description\":\"LB21\","
        "\"max_connections\":40000,\"max_services\":15,\"max_targets\":75,"
        "\"max_assigned_certificates\":25,\"deprecated\":null,\"prices\":[]},"
        "\"protection\":{\"delete\":false},\"labels\":{\"robotlb/service-uid\":\"%s\"},"
        "\"created\":\"2026-01-01T00:00:00+00:00\",\"algorithm\":{\"type\":\"round_robin\"},"
        "\"services\":[{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080,"
        "\"proxyprotocol\":false,\"health_check\":{\"protocol\":\"tcp\",\"port\":30080,"
        "\"interval\":15,\"timeout\":10,\"retries\":3}}],"
        "\"included_traffic\":654311424000,\"outgoing_traffic\":null,"
        "\"ingoing_traffic\":null,\"targets\":[",
        id, id, id % 250, id % 250, id, id, id % 250, uid);
    for (int i = 0; i < ntargets; i++)
        n += (size_t)snprintf(s + n, cap - n,
                              "%s{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.8.%d\"},"
                              "\"health_status\":[{\"listen_port\":80,\"status\":\"healthy\"}]}",
                              i ? "," : "", 10 + i);
    snprintf(s + n, cap - n, "]}");
    return s;
}

static struct hz_lb *
parse_lb(int id, const char *uid, int ntargets)
{
    char *text = lb_text(id, uid, ntargets);
    json_t *j = parse_json(text);
    struct hz_lb *lb;
    free(text);
    ck_assert_int_eq(hz_lb_parse(j, &lb), 0);
    json_decref(j);
    return lb;
}

/* A balancer with 50 targets costs ~90 KiB as Hetzner's JSON; what the
 * module keeps of it is every field the reconcile reads, in a few KiB. */
START_TEST(a_balancer_is_kept_as_the_fields_the_reconcile_reads_in_a_few_kib)
{
    char *text = lb_text(42, "uid-42", 50);
    long start, json_bytes, kept;
    struct hz_lb *lb;
    json_t *j;

    json_set_alloc_funcs(count_malloc, count_free);
    fake_host_init(&count_host);
    count_host.mem.alloc = count_calloc;
    count_host.mem.realloc = count_realloc;
    count_host.mem.free = count_free;
    hz_mem_use(fake_host(&count_host));
    start = live;
    j = parse_json(text);
    json_bytes = live - start;
    ck_assert_int_eq(hz_lb_parse(j, &lb), 0);
    kept = live - start - json_bytes;
    json_decref(j);
    free(text);

    ck_assert_int_eq(lb->a.id, 42);
    ck_assert_str_eq(lb->a.name, "svc-42.default");
    ck_assert_str_eq(lb->a.uid, "uid-42");
    ck_assert_str_eq(lb->a.type, "lb21");
    ck_assert_str_eq(lb->a.location, "hel1");
    ck_assert_int_eq(lb->a.algorithm, HZ_ALG_ROUND_ROBIN);
    ck_assert_str_eq(lb->a.ipv4, "198.51.100.42");
    ck_assert_int_eq(lb->a.public_enabled, 1);
    ck_assert_int_eq(hz_actual_on_network(&lb->a, 7), 1);
    ck_assert_str_eq(lb->a.nets[0].ip, "10.0.0.42");
    ck_assert_uint_eq(lb->a.nip_targets, 50);
    ck_assert_str_eq(lb->a.ip_targets[0], "10.0.8.10");
    ck_assert_str_eq(lb->a.ip_targets[49], "10.0.8.59");
    ck_assert_uint_eq(lb->a.nservices, 1);
    ck_assert_int_eq(lb->a.services[0].dest, 30080);
    ck_assert_msg(json_bytes > 50 * 1024, "the JSON held %ld bytes", json_bytes);
    ck_assert_msg(kept < 6 * 1024, "the kept balancer holds %ld bytes", kept);
    hz_lb_unref(lb);
    ck_assert_int_eq(live, start);
    hz_mem_use(NULL);
    json_set_alloc_funcs(malloc, free);
}
END_TEST

/* An answer that is no balancer is an error, and nothing is kept. */
START_TEST(a_balancer_without_id_or_name_is_refused)
{
    struct hz_lb *lb = (struct hz_lb *)1;
    json_t *j = parse_json("{\"name\":\"x\",\"labels\":{\"robotlb/service-uid\":\"u\"}}");
    ck_assert_int_eq(hz_lb_parse(j, &lb), -EINVAL);
    ck_assert_ptr_null(lb);
    json_decref(j);
    j = parse_json("{\"id\":1}");
    ck_assert_int_eq(hz_lb_parse(j, &lb), -EINVAL);
    json_decref(j);
}
END_TEST

/* A balancer stays while anyone holds it: a reconcile in flight keeps the
 * one it started from after the index replaced or dropped it. */
START_TEST(a_balancer_replaced_in_the_index_lives_while_it_is_held)
{
    struct hz_lbs *m = hz_lbs_new();
    struct hz_lb *old = parse_lb(1, "uid-a", 3), *fresh = parse_lb(1, "uid-a", 4);
    ck_assert_int_eq(hz_lbs_put(m, old), 0);
    ck_assert_uint_eq(old->refs, 2);
    ck_assert_int_eq(hz_lbs_put(m, old), 0); /* itself again: nothing changes */
    ck_assert_uint_eq(old->refs, 2);
    ck_assert_int_eq(hz_lbs_put(m, fresh), 0);
    ck_assert_uint_eq(old->refs, 1);
    ck_assert_ptr_eq(hz_lbs_get(m, "uid-a"), fresh);
    ck_assert_uint_eq(hz_lbs_count(m), 1);
    ck_assert_uint_eq(old->a.nip_targets, 3);
    hz_lb_unref(old);
    hz_lb_unref(fresh);
    ck_assert_uint_eq(hz_lbs_get(m, "uid-a")->a.nip_targets, 4);
    hz_lbs_del(m, "uid-a");
    ck_assert_ptr_null(hz_lbs_get(m, "uid-a"));
    ck_assert_uint_eq(hz_lbs_count(m), 0);
    hz_lbs_free(m);
}
END_TEST

/* Only a balancer that carries the label is indexed. */
START_TEST(a_balancer_without_the_label_is_not_indexed)
{
    struct hz_lbs *m = hz_lbs_new();
    json_t *j = parse_json("{\"id\":5,\"name\":\"plain\",\"labels\":{\"team\":\"a\"}}");
    struct hz_lb *lb;
    ck_assert_int_eq(hz_lb_parse(j, &lb), 0);
    ck_assert_int_eq(hz_lbs_put(m, lb), -EINVAL);
    ck_assert_uint_eq(hz_lbs_count(m), 0);
    ck_assert_ptr_null(hz_lbs_get(m, "plain"));
    ck_assert_ptr_null(hz_lbs_get(NULL, "x"));
    ck_assert_ptr_null(hz_lbs_get(m, NULL));
    hz_lbs_del(NULL, "x");
    hz_lb_unref(lb);
    json_decref(j);
    hz_lbs_free(m);
}
END_TEST

/* 10,000 balancers: each found under its label, every one walked once,
 * and after every other one is dropped the rest are still found. */
START_TEST(the_index_finds_each_balancer_by_its_label)
{
    struct hz_lbs *m = hz_lbs_new();
    enum { N = 10000 };
    char uid[32];
    static char seen[N];
    struct hz_lb *lb;
    size_t pos = 0, walked = 0;
    for (int i = 0; i < N; i++) {
        snprintf(uid, sizeof(uid), "uid-%d", i);
        lb = parse_lb(i, uid, 0);
        ck_assert_int_eq(hz_lbs_put(m, lb), 0);
        hz_lb_unref(lb);
    }
    ck_assert_uint_eq(hz_lbs_count(m), N);
    for (int i = 0; i < N; i++) {
        snprintf(uid, sizeof(uid), "uid-%d", i);
        lb = hz_lbs_get(m, uid);
        ck_assert_ptr_nonnull(lb);
        ck_assert_int_eq(lb->a.id, i);
    }
    while ((lb = hz_lbs_next(m, &pos))) {
        ck_assert_int_eq(seen[lb->a.id], 0);
        seen[lb->a.id] = 1;
        walked++;
    }
    ck_assert_uint_eq(walked, N);
    for (int i = 0; i < N; i += 2) {
        snprintf(uid, sizeof(uid), "uid-%d", i);
        hz_lbs_del(m, uid);
    }
    ck_assert_uint_eq(hz_lbs_count(m), N / 2);
    for (int i = 0; i < N; i++) {
        snprintf(uid, sizeof(uid), "uid-%d", i);
        lb = hz_lbs_get(m, uid);
        if (i % 2)
            ck_assert_msg(lb && lb->a.id == i, "uid-%d lost", i);
        else
            ck_assert_msg(lb == NULL, "uid-%d still there", i);
    }
    hz_lbs_free(m);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb balancers kept");
    TCase *tc = tcase_create("lbs");
    tcase_add_test(tc, a_balancer_is_kept_as_the_fields_the_reconcile_reads_in_a_few_kib);
    tcase_add_test(tc, a_balancer_without_id_or_name_is_refused);
    tcase_add_test(tc, a_balancer_replaced_in_the_index_lives_while_it_is_held);
    tcase_add_test(tc, a_balancer_without_the_label_is_not_indexed);
    tcase_add_test(tc, the_index_finds_each_balancer_by_its_label);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
