/*
 * mod_endpoint_watch against a fake host: the built mod_endpoint_watch.so is
 * dlopened and driven through its descriptor with a host table of this
 * file's making (only <prismlb/module.h>), timers fired by hand as a fake
 * clock. Proves the provider health rules that a live daemon cannot reach
 * on demand: "Provider failures are isolated: if the Kubernetes provider
 * fails, the static provider continues operating independently. The merged
 * provider only returns an error if all sub-providers fail." — the
 * liveness check "discovery" keeps beating while one provider works and
 * stops only when every provider failed — and the metrics' counting of
 * provider failures. Allocations of the module fail on demand.
 * Usage: test_module PATH/TO/mod_endpoint_watch.so
 */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <prismlb/module.h>

#include "fakehost.h"
#include "testutil.h"

/* Why create or start failed, as the module said. */
static char why[256];

static const char *module_path;
static void *dl;
static const struct plb_module *mod;

/* ------------------------------------------------------------------ */
/* The fake host                                                        */

struct plb_ctx {
    const char *name;
};
struct plb_timer {
    plb_timer_cb cb;
    void *arg;
    int armed;
    int64_t delay, period;
};
struct plb_metric {
    char name[64];
};

#define MAXT 8
static plb_ctx ctx = {"ew"};
static plb_timer *timers[MAXT];
static int ntimers;
static struct plb_metric metrics[4];
static int nmetrics;
static int publish_fail;    /* endpoints_publish answers -ENOMEM */
static int publishes;       /* successful publishes */
static char published[256]; /* provider and endpoints of the last one */
static int failed_static = -1, failed_kube = -1;
static int beats;
static int registered_live;
static double updates[2], errs[2]; /* [0] static, [1] kubernetes */
static int kube_new_calls;
static char log_text[16384];
static int done_calls;
static long alloc_fail_at; /* fail the nth allocation from now (0: never) */
static long allocs;
static long live;

static const char *
instance_name(plb_ctx *c)
{
    return c->name;
}

static void log_fields(plb_ctx *c, enum plb_log_level lvl, const char *const *kv, const char *fmt,
                       va_list ap) PLB_PRINTF(4, 0);

/* The message, then the fields as " key=value". */
static void
log_fields(plb_ctx *c, enum plb_log_level lvl, const char *const *kv, const char *fmt, va_list ap)
{
    char line[1024];
    (void)c;
    vsnprintf(line, sizeof(line), fmt, ap);
    size_t n = strlen(log_text);
    snprintf(log_text + n, sizeof(log_text) - n, "%d %s", (int)lvl, line);
    for (size_t i = 0; kv && kv[i]; i += 2) {
        n = strlen(log_text);
        snprintf(log_text + n, sizeof(log_text) - n, " %s=%s", kv[i], kv[i + 1] ? kv[i + 1] : "");
    }
    n = strlen(log_text);
    snprintf(log_text + n, sizeof(log_text) - n, "\n");
}

static int
log_enabled(plb_ctx *c, enum plb_log_level lvl)
{
    (void)c;
    (void)lvl;
    return 1;
}

static int64_t
now_ms(plb_ctx *c)
{
    (void)c;
    return 0;
}

static void *
h_alloc(size_t n)
{
    if (alloc_fail_at && ++allocs == alloc_fail_at)
        return NULL;
    live++;
    return calloc(1, n);
}

static void *
h_realloc(void *p, size_t n)
{
    if (alloc_fail_at && ++allocs == alloc_fail_at)
        return NULL;
    if (!p)
        live++;
    return realloc(p, n);
}

static void
h_free(void *p)
{
    if (p)
        live--;
    free(p);
}

static char *
h_strdup(const char *s)
{
    char *d = h_alloc(strlen(s) + 1);
    if (d)
        strcpy(d, s);
    return d;
}

static plb_timer *
timer_new(plb_ctx *c, plb_timer_cb cb, void *arg)
{
    (void)c;
    if (ntimers == MAXT)
        return NULL;
    plb_timer *t = h_alloc(sizeof(*t));
    if (!t)
        return NULL;
    t->cb = cb;
    t->arg = arg;
    timers[ntimers++] = t;
    return t;
}

static int
timer_arm(plb_timer *t, int64_t delay, int64_t period, double jitter)
{
    (void)jitter;
    t->armed = 1;
    t->delay = delay;
    t->period = period;
    return 0;
}

static void
timer_cancel(plb_timer *t)
{
    t->armed = 0;
}

static int
timer_pending(const plb_timer *t)
{
    return t->armed;
}

static void
timer_free(plb_timer *t)
{
    if (!t)
        return;
    for (int i = 0; i < ntimers; i++) {
        if (timers[i] == t) {
            timers[i] = timers[--ntimers];
            break;
        }
    }
    h_free(t);
}

/* Fire every armed timer once (the fake clock moves one period on). */
static void
tick(void)
{
    plb_timer *snap[MAXT];
    int n = ntimers;
    memcpy(snap, timers, sizeof(snap));
    for (int i = 0; i < n; i++) {
        plb_timer *t = snap[i];
        if (!t->armed)
            continue;
        if (t->period <= 0)
            t->armed = 0;
        t->cb(t, t->arg);
    }
}

static plb_metric *
metric_new(plb_ctx *c, enum plb_metric_type type, const char *name, const char *help,
           const char *const *label_names, const double *buckets, size_t nbuckets)
{
    (void)c;
    (void)help;
    (void)buckets;
    (void)nbuckets;
    ck_assert_int_eq(type, PLB_METRIC_COUNTER);
    ck_assert_str_eq(label_names[0], "source");
    ck_assert_str_eq(label_names[1], "provider");
    ck_assert_ptr_null(label_names[2]);
    for (int i = 0; i < nmetrics; i++) {
        if (strcmp(metrics[i].name, name) == 0)
            return &metrics[i];
    }
    if (nmetrics == 4)
        return NULL;
    snprintf(metrics[nmetrics].name, sizeof(metrics[nmetrics].name), "%s", name);
    return &metrics[nmetrics++];
}

static int
metric_add(plb_metric *m, const char *const *lv, double v)
{
    ck_assert_str_eq(lv[0], "ew");
    int k = strcmp(lv[1], "static") == 0 ? 0 : 1;
    if (k == 1)
        ck_assert_str_eq(lv[1], "kubernetes");
    if (strcmp(m->name, "prismlb_discovery_updates_total") == 0)
        updates[k] += v;
    else if (strcmp(m->name, "prismlb_discovery_errors_total") == 0)
        errs[k] += v;
    else
        ck_abort_msg("unknown family %s", m->name);
    return 0;
}

static int
endpoints_publish(plb_ctx *c, const char *provider, const char *const *eps, size_t n)
{
    (void)c;
    if (publish_fail)
        return -ENOMEM;
    publishes++;
    int k = snprintf(published, sizeof(published), "%s:", provider);
    for (size_t i = 0; i < n; i++)
        k += snprintf(published + k, sizeof(published) - (size_t)k, "%s%s", i ? "," : "", eps[i]);
    return 0;
}

static void
endpoints_failed(plb_ctx *c, const char *provider, int failed)
{
    (void)c;
    if (strcmp(provider, "static") == 0)
        failed_static = failed;
    else
        failed_kube = failed;
}

static int
health_register(plb_ctx *c, const char *check, enum plb_health_kind kind)
{
    (void)c;
    ck_assert_str_eq(check, "discovery");
    ck_assert_int_eq(kind, PLB_HEALTH_LIVE);
    registered_live = 1;
    return 0;
}

static void
health_beat(plb_ctx *c, const char *check)
{
    (void)c;
    ck_assert_str_eq(check, "discovery");
    beats++;
}

static void
h_done(plb_done *d)
{
    (void)d;
    done_calls++;
}

static plb_kube *
kube_new(plb_ctx *c, const struct plb_kube_opts *o, char *err, size_t errlen)
{
    (void)c;
    (void)o;
    kube_new_calls++;
    snprintf(err, errlen, "kubeconfig: no such file");
    return NULL;
}

static void
kube_free(plb_kube *k)
{
    ck_assert_ptr_null(k);
}

static void
informer_free(plb_informer *inf)
{
    ck_assert_ptr_null(inf);
}

static struct fake_host fh;

/* The fake host: the shared one (tests/lib/fakehost.h) with this file's members. */
static const struct plb_host *
host_get(void)
{
    static int ready;
    if (!ready) {
        fake_host_init(&fh);
        fh.links.instance_name = instance_name;
        fh.log.fields = log_fields;
        fh.log.enabled = log_enabled;
        fh.loop.now_ms = now_ms;
        fh.loop.timer_new = timer_new;
        fh.loop.timer_arm = timer_arm;
        fh.loop.timer_cancel = timer_cancel;
        fh.loop.timer_pending = timer_pending;
        fh.loop.timer_free = timer_free;
        fh.metrics.new_metric = metric_new;
        fh.metrics.add = metric_add;
        fh.links.endpoints_publish = endpoints_publish;
        fh.links.endpoints_failed = endpoints_failed;
        fh.links.health_register = health_register;
        fh.links.health_beat = health_beat;
        fh.links.done = h_done;
        fh.mem.alloc = h_alloc;
        fh.mem.realloc = h_realloc;
        fh.mem.free = h_free;
        fh.mem.strdup = h_strdup;
        fh.kube.client_new = kube_new;
        fh.kube.client_free = kube_free;
        fh.kube.informer_free = informer_free;
        ready = 1;
    }
    return fake_host(&fh);
}

/* ------------------------------------------------------------------ */
/* The module's config, written through its settings table (offsets).   */

static unsigned char *cfg;
static char *endpoints[] = {"10.0.0.1:6443", "10.0.0.2:6443"};

static void *
field(const char *name)
{
    for (const struct plb_setting *s = mod->settings; s->name; s++) {
        if (strcmp(s->name, name) == 0)
            return cfg + s->offset;
    }
    ck_abort_msg("no setting %s", name);
    return NULL;
}

/* discovery: enable_discovery; kubeconfig: set one (kube_new then fails). */
static void
make_config(int discovery, const char *kubeconfig)
{
    cfg = calloc(1, mod->config_size);
    ck_assert_ptr_nonnull(cfg);
    struct plb_strv *eps = field("endpoints");
    eps->n = 2;
    eps->v = endpoints;
    *(int *)field("enable_discovery") = discovery;
    *(const char **)field("kubeconfig") = kubeconfig;
    *(const char **)field("service_account_dir") = "/nonexistent";
    *(const char **)field("namespace") = "default";
    *(const char **)field("service_name") = "kubernetes";
    *(const char **)field("port_name") = "https";
}

static void
setup(void)
{
    dl = dlopen(module_path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(dl != NULL, "dlopen %s: %s", module_path, dlerror());
    mod = dlsym(dl, PLB_MODULE_SYMBOL);
    ck_assert_ptr_nonnull(mod);
    publish_fail = publishes = beats = registered_live = kube_new_calls = done_calls = 0;
    failed_static = failed_kube = -1;
    memset(updates, 0, sizeof(updates));
    memset(errs, 0, sizeof(errs));
    log_text[0] = published[0] = '\0';
    nmetrics = ntimers = 0;
    alloc_fail_at = allocs = live = 0;
}

static void
teardown(void)
{
    free(cfg);
    cfg = NULL;
    dlclose(dl);
}

static void *
start(void)
{
    void *st = NULL;
    ck_assert_int_eq(mod->create(host_get(), &ctx, cfg, &st, why, sizeof(why)), 0);
    ck_assert_int_eq(mod->start(st, why, sizeof(why)), 0);
    return st;
}

static void
finish(void *st)
{
    mod->stop(st, 1000, (plb_done *)&ctx);
    ck_assert_int_eq(done_calls, 1);
    mod->destroy(st);
    ck_assert_int_eq(ntimers, 0);
    ck_assert_int_eq(live, 0);
}

/* ------------------------------------------------------------------ */

START_TEST(descriptor_provides_endpoints)
{
    ck_assert_str_eq(mod->name, "endpoint_watch");
    ck_assert_int_eq(mod->abi_major, PLB_ABI_MAJOR);
    ck_assert(mod->provides & PLB_ROLE_ENDPOINTS);
}
END_TEST

/* "Static provider: Sends the configured endpoints once at startup": one
 * publish, one update counted, and the pipeline is alive. */
START_TEST(static_provider_sends_once_and_beats)
{
    make_config(0, NULL);
    void *st = start();
    ck_assert_int_eq(publishes, 1);
    ck_assert_str_eq(published, "static:10.0.0.1:6443,10.0.0.2:6443");
    ck_assert(registered_live);
    for (int i = 0; i < 5; i++)
        tick();
    ck_assert_int_eq(publishes, 1);
    ck_assert_int_ge(beats, 6);
    ck_assert(updates[0] == 1 && errs[0] == 0);
    finish(st);
}
END_TEST

/* The Kubernetes provider failing (an unusable configuration) is isolated:
 * counted once, marked failed, and the static provider keeps the pipeline
 * alive. */
START_TEST(kubernetes_failure_is_isolated)
{
    make_config(1, "/nonexistent/kubeconfig");
    void *st = start();
    ck_assert_int_eq(kube_new_calls, 1);
    ck_assert_int_eq(failed_kube, 1);
    ck_assert(errs[1] == 1);
    int b = beats;
    for (int i = 0; i < 5; i++)
        tick();
    ck_assert_int_eq(beats, b + 5);
    ck_assert_int_eq(kube_new_calls, 1); /* no retry loop */
    ck_assert(errs[1] == 1);
    ck_assert_ptr_nonnull(strstr(log_text, "EndpointSlice discovery disabled: using the static "
                                           "endpoints only what=kubeconfig error=kubeconfig: "
                                           "no such file"));
    finish(st);
}
END_TEST

/* "The merged provider only returns an error if all sub-providers fail":
 * with the static publish failing too, the heartbeat stops; when the
 * static publish succeeds again (it is retried), beats resume. */
START_TEST(every_provider_failed_stops_the_heartbeat)
{
    make_config(1, "/nonexistent/kubeconfig");
    publish_fail = 1;
    void *st = start();
    ck_assert_int_eq(failed_static, 1);
    ck_assert_int_eq(failed_kube, 1);
    ck_assert(errs[0] == 1 && errs[1] == 1);
    ck_assert_ptr_nonnull(strstr(log_text, "every endpoint provider failed"));
    int b = beats;
    for (int i = 0; i < 5; i++)
        tick();
    ck_assert_int_eq(beats, b);
    ck_assert(errs[0] == 6); /* one failed retry per second */
    publish_fail = 0;
    tick();
    ck_assert_int_eq(failed_static, 0);
    ck_assert_int_gt(beats, b);
    ck_assert_int_eq(publishes, 1);
    ck_assert(updates[0] == 1);
    finish(st);
}
END_TEST

/* The same with discovery disabled: the static provider alone failing is
 * every provider failing. */
START_TEST(static_alone_failing_is_all_failed)
{
    make_config(0, NULL);
    publish_fail = 1;
    void *st = start();
    int b = beats;
    tick();
    tick();
    ck_assert_int_eq(beats, b);
    publish_fail = 0;
    tick();
    ck_assert_int_gt(beats, b);
    finish(st);
}
END_TEST

/* Failing each of the module's allocations in create and start: an error
 * code or a working instance, never a crash or a leak. */
START_TEST(allocation_failures_neither_crash_nor_leak)
{
    make_config(1, "/nonexistent/kubeconfig");
    for (long n = 1; n < 40; n++) {
        void *st = NULL;
        publishes = done_calls = 0;
        allocs = live = 0;
        alloc_fail_at = n;
        int rc = mod->create(host_get(), &ctx, cfg, &st, why, sizeof(why));
        if (rc < 0) {
            ck_assert_int_eq(live, 0);
            continue;
        }
        rc = mod->start(st, why, sizeof(why));
        tick();
        mod->stop(st, 0, (plb_done *)&ctx);
        mod->destroy(st);
        ck_assert_msg(live == 0, "failing allocation %ld: %ld blocks leaked (start %d)", n, live,
                      rc);
        ck_assert_int_eq(ntimers, 0);
    }
    alloc_fail_at = 0;
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("endpoint_watch_module");
    TCase *tc = tcase_create("module");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, descriptor_provides_endpoints);
    tcase_add_test(tc, static_provider_sends_once_and_beats);
    tcase_add_test(tc, kubernetes_failure_is_isolated);
    tcase_add_test(tc, every_provider_failed_stops_the_heartbeat);
    tcase_add_test(tc, static_alone_failing_is_all_failed);
    tcase_add_test(tc, allocation_failures_neither_crash_nor_leak);
    suite_add_tcase(s, tc);
    return s;
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/mod_endpoint_watch.so\n", argv[0]);
        return 2;
    }
    module_path = argv[1];
    return tu_run_suite(suite());
}
