/*
 * Which informer events queue which Services (modules/mod_hetzner_lb/
 * hz_index.c), through the work queue on a fake clock as the module runs
 * them: heartbeats queue nothing, a node's eligibility change queues the
 * Cluster Services and the Local ones its slices serve, a slice queues its
 * own Service only when that one is ours under Local.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "hz_index.h"
#include "hz_queue.h"
#include "testutil.h"

static struct hz_queue *q;
static struct hz_index *ix;
static int emitted;

static void
to_queue(const char *key, void *arg)
{
    (void)arg;
    emitted++;
    ck_assert_int_eq(hz_queue_add(q, key), 0);
}

static void
setup(void)
{
    struct hz_queue_cfg cfg = {.base_delay_ms = 5, .max_delay_ms = 1000};
    ck_assert_ptr_nonnull(q = hz_queue_new(&cfg));
    ck_assert_ptr_nonnull(ix = hz_index_new());
    emitted = 0;
}

static void
teardown(void)
{
    hz_queue_free(q);
    hz_index_free(ix);
}

/* Take everything queued, sorted, joined by ','; "" when nothing. */
static const char *
drain(void)
{
    static char out[1024];
    char keys[64][64];
    size_t n = 0;
    const char *k;
    hz_queue_tick(q, 0);
    while ((k = hz_queue_get(q))) {
        ck_assert_uint_lt(n, 64);
        snprintf(keys[n++], sizeof(keys[0]), "%s", k);
        hz_queue_done(q, k);
    }
    qsort(keys, n, sizeof(keys[0]), (int (*)(const void *, const void *))strcmp);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? "," : "", keys[i]);
    return out;
}

static void
node(const char *name, uint64_t fp)
{
    ck_assert_int_eq(hz_index_node(ix, name, fp, 0, to_queue, NULL), 0);
}

static void
slice(const char *key, const char *svc, const char *n1, const char *n2)
{
    const char *nodes[] = {n1, n2};
    ck_assert_int_eq(hz_index_slice(ix, key, svc, nodes, n2 ? 2 : (n1 ? 1 : 0), 0, to_queue, NULL),
                     0);
}

/* Cluster Service web, Local Service api (endpoints on n1), ClusterIP
 * Service db (not ours) with a slice on every node. */
static void
cluster(void)
{
    ck_assert_int_eq(hz_index_service(ix, "ns/web", 1, 0, to_queue, NULL), 0);
    ck_assert_int_eq(hz_index_service(ix, "ns/api", 1, 1, to_queue, NULL), 0);
    ck_assert_int_eq(hz_index_service(ix, "ns/db", 0, 0, to_queue, NULL), 0);
    slice("ns/api-1", "ns/api", "n1", NULL);
    slice("ns/db-1", "ns/db", "n1", "n2");
    node("n1", 11);
    node("n2", 22);
    drain();
    ck_assert_uint_eq(hz_index_services(ix), 2);
}

START_TEST(heartbeats_queue_nothing)
{
    cluster();
    emitted = 0;
    /* 500 nodes heartbeating 10 times: fingerprints unchanged */
    for (int round = 0; round < 10; round++) {
        node("n1", 11);
        node("n2", 22);
        for (int i = 0; i < 498; i++) {
            char name[16];
            snprintf(name, sizeof(name), "m%03d", i);
            if (round == 0)
                continue;
            node(name, 7);
        }
        if (round == 1)
            ck_assert_str_eq(drain(), "ns/web"); /* the 498 new nodes, once */
    }
    emitted = 0;
    for (int i = 0; i < 498; i++) {
        char name[16];
        snprintf(name, sizeof(name), "m%03d", i);
        node(name, 7);
    }
    ck_assert_int_eq(emitted, 0);
    ck_assert_str_eq(drain(), "");
}
END_TEST

START_TEST(a_node_change_queues_cluster_services_and_the_local_ones_it_serves)
{
    cluster();
    node("n2", 23); /* n2 serves no api endpoint */
    ck_assert_str_eq(drain(), "ns/web");
    node("n1", 12);
    ck_assert_str_eq(drain(), "ns/api,ns/web");
    /* a node going away */
    ck_assert_int_eq(hz_index_node(ix, "n1", 0, 1, to_queue, NULL), 0);
    ck_assert_str_eq(drain(), "ns/api,ns/web");
    /* one never seen going away changes nothing */
    ck_assert_int_eq(hz_index_node(ix, "n9", 0, 1, to_queue, NULL), 0);
    ck_assert_str_eq(drain(), "");
    /* a new node */
    node("n3", 33);
    ck_assert_str_eq(drain(), "ns/web");
}
END_TEST

START_TEST(a_slice_queues_its_service_only_when_ours_under_local)
{
    cluster();
    emitted = 0;
    /* 2,000 changes of the ClusterIP Service's slice: nothing */
    for (int i = 0; i < 2000; i++)
        slice("ns/db-1", "ns/db", i % 2 ? "n1" : "n2", NULL);
    ck_assert_int_eq(emitted, 0);
    ck_assert_str_eq(drain(), "");
    /* the Local one's slice */
    slice("ns/api-1", "ns/api", "n1", NULL);
    ck_assert_str_eq(drain(), "ns/api");
    /* a slice of the Cluster Service: its targets are every node anyway */
    slice("ns/web-1", "ns/web", "n1", NULL);
    ck_assert_str_eq(drain(), "");
    /* api's endpoints move to n2: now n2's changes reach api, n1's do not */
    slice("ns/api-1", "ns/api", "n2", "n2");
    ck_assert_str_eq(drain(), "ns/api");
    node("n1", 13);
    ck_assert_str_eq(drain(), "ns/web");
    node("n2", 24);
    ck_assert_str_eq(drain(), "ns/api,ns/web");
    /* deleted: api has no slice on any node */
    ck_assert_int_eq(hz_index_slice(ix, "ns/api-1", NULL, NULL, 0, 1, to_queue, NULL), 0);
    ck_assert_str_eq(drain(), "ns/api");
    node("n2", 25);
    ck_assert_str_eq(drain(), "ns/web");
    /* a slice relabelled from one Local Service to another queues both */
    ck_assert_int_eq(hz_index_service(ix, "ns/api2", 1, 1, to_queue, NULL), 0);
    drain();
    slice("ns/x-1", "ns/api", "n1", NULL);
    drain();
    slice("ns/x-1", "ns/api2", "n1", NULL);
    ck_assert_str_eq(drain(), "ns/api,ns/api2");
}
END_TEST

START_TEST(a_service_that_stops_being_ours_leaves_the_index)
{
    cluster();
    ck_assert_int_eq(hz_index_service(ix, "ns/api", 0, 0, to_queue, NULL), 0);
    ck_assert_str_eq(drain(), "ns/api"); /* once more: its balancer goes */
    ck_assert_uint_eq(hz_index_services(ix), 1);
    node("n1", 14);
    ck_assert_str_eq(drain(), "ns/web");
    slice("ns/api-1", "ns/api", "n1", NULL);
    ck_assert_str_eq(drain(), "");
    /* Local again: the slice it kept is still known */
    ck_assert_int_eq(hz_index_service(ix, "ns/api", 1, 1, to_queue, NULL), 0);
    drain();
    node("n1", 15);
    ck_assert_str_eq(drain(), "ns/api,ns/web");
    /* a Service under Cluster again */
    ck_assert_int_eq(hz_index_service(ix, "ns/api", 1, 0, to_queue, NULL), 0);
    drain();
    node("n2", 26);
    ck_assert_str_eq(drain(), "ns/api,ns/web");
    /* a full pass names every Service of ours */
    hz_index_each_service(ix, to_queue, NULL);
    ck_assert_str_eq(drain(), "ns/api,ns/web");
}
END_TEST

START_TEST(events_while_a_reconcile_runs_queue_it_once_after)
{
    cluster();
    ck_assert_int_eq(hz_index_service(ix, "ns/api", 1, 1, to_queue, NULL), 0);
    const char *k = hz_queue_get(q);
    ck_assert_str_eq(k, "ns/api");
    /* in flight: a node change and two slice changes */
    node("n1", 16);
    slice("ns/api-1", "ns/api", "n1", "n2");
    slice("ns/api-1", "ns/api", "n2", NULL);
    ck_assert_uint_eq(hz_queue_len(q), 1); /* web only */
    hz_queue_done(q, "ns/api");
    ck_assert_str_eq(drain(), "ns/api,ns/web");
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb index");
    TCase *tc = tcase_create("index");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, heartbeats_queue_nothing);
    tcase_add_test(tc, a_node_change_queues_cluster_services_and_the_local_ones_it_serves);
    tcase_add_test(tc, a_slice_queues_its_service_only_when_ours_under_local);
    tcase_add_test(tc, a_service_that_stops_being_ours_leaves_the_index);
    tcase_add_test(tc, events_while_a_reconcile_runs_queue_it_once_after);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
