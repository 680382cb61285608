/*
 * Benchmark of the core's informer (not part of meson test):
 *
 *  events/s   a watch replaying N events of ~1 KiB objects from the fake's
 *             history into an informer: the informer's watch fails (an
 *             injected 500) while N Leases are created; when the fault is
 *             lifted the re-watch from the old resourceVersion receives all
 *             N as fast as the fake can send them. Timed from the first
 *             ADDED callback to the last, on this one thread.
 *  list/s     the initial list of the same N objects in pages of 500.
 *  bytes/obj  live heap through the allocation hook (every jansson
 *             allocation goes through it) per cached object, and the
 *             object's own compact JSON size for comparison.
 *
 * Usage: tests/bench/kube/run.sh [BUILD_DIR] [N]
 */
#include <sys/resource.h>
#include <unistd.h>

#include "kt.h"

struct counter {
    int adds;
    long long first_ms, last_ms;
};

static void
on_add(plb_informer *inf, const plb_obj *obj, void *arg)
{
    struct counter *c = arg;
    (void)inf;
    (void)obj;
    long long now = tu_now_ms();
    if (c->adds++ == 0)
        c->first_ms = now;
    c->last_ms = now;
}

static int synced_flag;

static void
on_synced(plb_informer *inf, void *arg)
{
    (void)inf;
    (void)arg;
    synced_flag = 1;
}

static int
is_synced(void *arg)
{
    (void)arg;
    return synced_flag;
}

struct want {
    struct counter *c;
    int n;
};

static int
reached(void *arg)
{
    struct want *w = arg;
    return w->c->adds >= w->n;
}

static size_t obj_bytes;

static void
size_cb(const plb_obj *obj, void *arg)
{
    char *s = core_obj_dump(obj);
    (void)arg;
    obj_bytes += strlen(s);
    core_free(s);
}

static int n_objects = 20000;

/* CPU seconds (user + system) of process pid so far, from /proc. */
static double
proc_cpu(pid_t pid)
{
    unsigned long long ut = 0, st = 0;
    if (tu_proc_stat(pid, &ut, &st, NULL) < 0)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* One Check test (run without fork), so a failed step says which. */
START_TEST(bench)
{
    int n = n_objects;
    char hist[32];
    struct kt t;
    snprintf(hist, sizeof(hist), "%d", n * 2 + 100);
    const char *extra[] = {"--history", hist, "--request-log-max", "1000", NULL};
    kt_start(&t, extra, NULL);
    struct kres r = {0};
    struct plb_kube_ref nsref = {sizeof(struct plb_kube_ref), "v1", "namespaces", NULL, NULL, NULL};
    kt_wait(
        &t, &r,
        core_kube_create(t.k, &nsref, "{\"metadata\":{\"name\":\"bench\"}}", kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 201);
    kres_clear(&r);

    /* 1. events/s: a watch replay of n ADDED events. */
    struct counter c = {0};
    struct plb_informer_opts o = {
        .size = sizeof(o),
        .ref = &(const struct plb_kube_ref){sizeof(struct plb_kube_ref), "coordination.k8s.io/v1",
                                            "leases", "bench", NULL, NULL},
        .watch_timeout_s = 600,
        .on_add = on_add,
        .on_synced = on_synced,
        .arg = &c,
    };
    plb_informer *inf = core_informer_new(t.k, &o, NULL);
    ck_assert(kt_run_until(&t, is_synced, NULL, 10000));
    kt_run_ms(&t, 300);
    kt_faults(&t, "{\"fail_count\": 1000000, \"fail_status\": 500, \"fail_match\": \"watch=1\"}");
    json_decref(kt_admin(&t, "POST", "/watches/close?mode=drop", NULL));
    long long t0 = tu_now_ms();
    kt_bulk_create(&t, t.k, "bench", "obj", 200, 760);
    long long create_ms = tu_now_ms() - t0;
    kt_seed(&t, "bench", "bulk", n - 200, 790);
    json_decref(kt_admin(&t, "DELETE", "/faults", NULL));
    struct want w = {&c, n};
    struct rusage ru0, ru1;
    double fake0 = proc_cpu(t.f.proc.pid);
    getrusage(RUSAGE_SELF, &ru0);
    ck_assert_msg(kt_run_until(&t, reached, &w, 120000), "only %d of %d events", c.adds, n);
    getrusage(RUSAGE_SELF, &ru1);
    double fake_cpu = proc_cpu(t.f.proc.pid) - fake0;
    double secs = (double)(c.last_ms - c.first_ms) / 1000.0;
    double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec -
                          ru0.ru_stime.tv_sec) +
                 (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
                          ru0.ru_stime.tv_usec) /
                     1e6;
    core_informer_foreach(inf, size_cb, NULL);
    printf("objects                 %d (compact JSON %.0f bytes each)\n", n, (double)obj_bytes / n);
    printf("created through client  %.0f/s (200 objects, 64 in flight)\n",
           200 / (create_ms / 1000.0));
    printf("watch events into cache %.0f/s (%d events in %.3f s)\n", n / (secs > 0 ? secs : 1e-3),
           n, secs);
    printf("informer CPU per event  %.1f us (so at most %.0f events/s on this core; the rest\n"
           "                        of the wall time is the fake producing them)\n",
           cpu * 1e6 / n, n / (cpu > 0 ? cpu : 1e-6));
    printf("fake CPU per event      %.1f us (the producer's share of the same window)\n",
           fake_cpu * 1e6 / n);
    core_informer_free(inf);

    /* 2. list/s and memory per cached object. */
    kt_run_ms(&t, 200);
    size_t before = core_alloc_live_bytes();
    synced_flag = 0;
    struct counter c2 = {0};
    o.arg = &c2;
    o.page_size = 500;
    t0 = tu_now_ms();
    inf = core_informer_new(t.k, &o, NULL);
    ck_assert(kt_run_until(&t, is_synced, NULL, 120000));
    long long list_ms = tu_now_ms() - t0;
    kt_run_ms(&t, 300); /* the list's buffers are freed; the watch is open */
    size_t after = core_alloc_live_bytes();
    printf("initial list            %.0f objects/s (%lld ms, pages of 500)\n",
           n / (list_ms / 1000.0), list_ms);
    printf("memory per cached obj   %.0f bytes of heap (live bytes %zu -> %zu)\n",
           (double)(after - before) / core_informer_count(inf), before, after);
    core_informer_free(inf);
    kt_stop(&t);
}
END_TEST

int
main(int argc, char **argv)
{
    if (argc > 1)
        n_objects = atoi(argv[1]);
    if (core_alloc_install_library_hooks() < 0) {
        fprintf(stderr, "cannot install allocation hooks\n");
        return 1;
    }
    Suite *s = suite_create("bench_kube");
    TCase *tc = tcase_create("bench");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, bench);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
