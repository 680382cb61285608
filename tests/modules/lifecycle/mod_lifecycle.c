/*
 * mod_lifecycle: a test module built only against <prismlb/module.h>.
 *
 * It records every hook it runs, one line each ("create NAME", "start
 * NAME", "gate_open NAME", ...) in trace_file, so tests can assert the
 * order of the lifecycle. Its settings exercise every setting type, and its
 * options let tests make it slow to stop, stop heartbeating, stay not ready
 * for a while, fail to start, or export its port as a metric (and how long
 * its start took, as a histogram). As a gate
 * it opens and closes on timers, or while a file exists (gate_file), so a
 * test holds it shut for as long as it needs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <prismlb/module_util.h>

struct lc_config {
    char *trace_file;
    int64_t port;
    int mode;
    int64_t interval_ms;
    int64_t timeout_ms;
    int enabled;
    struct plb_strv tags;
    double ratio;
    int64_t stop_delay_ms;
    int64_t wedge_after_ms;
    int fail_start;
    struct plb_strv sources;
    char *secret_file;
    int64_t even;
    struct plb_strv publish;
    int64_t gate_open_after_ms;
    int64_t gate_close_after_ms;
    char *gate_file;
    int64_t ready_after_ms;
    int port_metric;
};

struct lc {
    const struct plb_host *host;
    plb_ctx *ctx;
    const struct lc_config *cfg;
    plb_timer *beat;    /* heartbeat */
    plb_timer *stopper; /* delayed stop completion */
    plb_timer *gate;    /* opens, then closes, the gate */
    plb_timer *ready;   /* turns the "ready" check ready */
    plb_done *stop_done;
    plb_done *gate_done; /* pending gate_close completion */
    int64_t started_ms;
    int gate_is_open;
};

static const char *const modes[] = {"fast", "slow", NULL};

static const char *
check_even(const void *value)
{
    const int64_t *v = value;
    return (*v % 2) ? "must be an even number" : NULL;
}

/* clang-format off */
static const struct plb_setting lc_settings[] = {
    {.name = "trace_file", .type = PLB_SET_PATH, .offset = offsetof(struct lc_config, trace_file),
     .flags = PLB_SET_REQUIRED | PLB_SET_NONEMPTY, .doc = "File the hooks are traced to"},
    {.name = "port", .type = PLB_SET_INT, .offset = offsetof(struct lc_config, port),
     .def = "8080", .min = 1, .max = 65535, .doc = "A port number"},
    {.name = "mode", .type = PLB_SET_ENUM, .offset = offsetof(struct lc_config, mode),
     .def = "fast", .enum_values = modes, .doc = "A choice"},
    {.name = "interval", .type = PLB_SET_DURATION,
     .offset = offsetof(struct lc_config, interval_ms), .def = "1s", .min = 1000,
     .doc = "Heartbeat interval"},
    {.name = "timeout", .type = PLB_SET_DURATION,
     .offset = offsetof(struct lc_config, timeout_ms), .def = "500ms", .min = 1,
     .doc = "Must be less than interval"},
    {.name = "enabled", .type = PLB_SET_BOOL, .offset = offsetof(struct lc_config, enabled),
     .def = "true", .env = "LIFECYCLE_ENABLED", .doc = "A switch"},
    {.name = "tags", .type = PLB_SET_STRING_LIST, .offset = offsetof(struct lc_config, tags),
     .doc = "A list"},
    {.name = "ratio", .type = PLB_SET_DOUBLE, .offset = offsetof(struct lc_config, ratio),
     .def = "0.5", .min = 0, .max = 1, .doc = "A fraction"},
    {.name = "even", .type = PLB_SET_INT, .offset = offsetof(struct lc_config, even),
     .def = "2", .validate = check_even, .doc = "An even number (checked by a validator)"},
    {.name = "publish", .type = PLB_SET_STRING_LIST,
     .offset = offsetof(struct lc_config, publish),
     .doc = "Endpoints to publish as provider \"static\" at start"},
    {.name = "gate_open_after", .type = PLB_SET_DURATION,
     .offset = offsetof(struct lc_config, gate_open_after_ms), .def = "0", .min = 0,
     .doc = "As a gate: open this long after start (0: never)"},
    {.name = "gate_close_after", .type = PLB_SET_DURATION,
     .offset = offsetof(struct lc_config, gate_close_after_ms), .def = "0", .min = 0,
     .doc = "As a gate: close this long after opening (0: never)"},
    {.name = "gate_file", .type = PLB_SET_PATH, .offset = offsetof(struct lc_config, gate_file),
     .doc = "As a gate: open while this file exists (checked every 100 ms)"},
    {.name = "stop_delay", .type = PLB_SET_DURATION,
     .offset = offsetof(struct lc_config, stop_delay_ms), .def = "0", .min = 0,
     .doc = "Complete stop this long after it was asked"},
    {.name = "wedge_after", .type = PLB_SET_DURATION,
     .offset = offsetof(struct lc_config, wedge_after_ms), .def = "0", .min = 0,
     .doc = "Stop heartbeating this long after start (0: never)"},
    {.name = "ready_after", .type = PLB_SET_DURATION,
     .offset = offsetof(struct lc_config, ready_after_ms), .def = "0", .min = 0,
     .doc = "Register a readiness check \"ready\", not ready until this long after start "
            "(0: no readiness check)"},
    {.name = "port_metric", .type = PLB_SET_BOOL,
     .offset = offsetof(struct lc_config, port_metric), .def = "false",
     .doc = "At start, set the gauge lifecycle_port (no labels of its own) to port"},
    {.name = "fail_start", .type = PLB_SET_BOOL, .offset = offsetof(struct lc_config, fail_start),
     .def = "false", .doc = "Make start fail"},
    {.name = "sources", .type = PLB_SET_INSTANCES, .offset = offsetof(struct lc_config, sources),
     .role = PLB_ROLE_ENDPOINTS, .doc = "Endpoint sources to follow"},
    {.name = "secret_file", .type = PLB_SET_PATH,
     .offset = offsetof(struct lc_config, secret_file), .flags = PLB_SET_SECRET,
     .doc = "A secret's file"},
    PLB_SETTINGS_END,
};
/* clang-format on */

static void
trace(struct lc *lc, const char *what)
{
    FILE *f = fopen(lc->cfg->trace_file, "a");
    if (!f) {
        PLB_LOG(lc->host, lc->ctx, PLB_LOG_ERROR, PLB_KV("path", lc->cfg->trace_file),
                "cannot open trace file");
        return;
    }
    fprintf(f, "%s %s\n", what, lc->host->links->instance_name(lc->ctx));
    fclose(f);
}

static int
lc_check(const struct plb_host *host, plb_check *chk, const void *config,
         void (*report)(plb_check *, const char *, const char *, ...))
{
    const struct lc_config *cfg = config;
    (void)host;
    if (cfg->timeout_ms >= cfg->interval_ms) {
        report(chk, "timeout", "must be less than interval");
        return 1;
    }
    return 0;
}

static void
on_endpoints(const struct plb_endpoint_set *set, void *arg)
{
    struct lc *lc = arg;
    char line[1024] = "endpoints";
    size_t n = strlen(line);
    for (size_t i = 0; i < set->n && n < sizeof(line); i++)
        n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s", i ? "," : "=", set->v[i]);
    trace(lc, line);
}

static void
gate_closed(void *arg)
{
    trace(arg, "gate_closed_all");
}

static void
on_beat(plb_timer *t, void *arg)
{
    struct lc *lc = arg;
    (void)t;
    int64_t up = lc->host->loop->now_ms(lc->ctx) - lc->started_ms;
    if (lc->cfg->wedge_after_ms > 0 && up >= lc->cfg->wedge_after_ms)
        return; /* wedged: no more heartbeats */
    lc->host->links->health_beat(lc->ctx, "loop");
    if (lc->cfg->gate_file && lc->cfg->gate_file[0]) {
        /* a stat of a test's own file: no open, nothing to block on */
        int want = access(lc->cfg->gate_file, F_OK) == 0;
        if (want != lc->gate_is_open) {
            lc->gate_is_open = want;
            lc->host->links->gate_set(lc->ctx, want, want ? NULL : gate_closed, lc);
        }
    }
}

static void
on_ready(plb_timer *t, void *arg)
{
    struct lc *lc = arg;
    (void)t;
    lc->host->links->health_set(lc->ctx, "ready", 1, NULL);
    trace(lc, "ready");
}

static void
on_gate_timer(plb_timer *t, void *arg)
{
    struct lc *lc = arg;
    if (!lc->gate_is_open) {
        lc->gate_is_open = 1;
        lc->host->links->gate_set(lc->ctx, 1, NULL, NULL);
        if (lc->cfg->gate_close_after_ms > 0)
            lc->host->loop->timer_arm(t, lc->cfg->gate_close_after_ms, 0, 0);
    } else {
        lc->gate_is_open = 0;
        lc->host->links->gate_set(lc->ctx, 0, gate_closed, lc);
    }
}

static void
lc_gate_open(void *state)
{
    trace(state, "gate_open");
}

static void
lc_gate_close(void *state, plb_done *d)
{
    struct lc *lc = state;
    trace(lc, "gate_close");
    lc->host->links->done(d);
}

static void
on_stop_delay(plb_timer *t, void *arg)
{
    struct lc *lc = arg;
    (void)t;
    trace(lc, "stopped");
    plb_done *d = lc->stop_done;
    lc->stop_done = NULL;
    lc->host->links->done(d);
}

static int
lc_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    struct lc *lc = host->mem->alloc(sizeof(*lc));
    if (!lc) {
        snprintf(err, errlen, "out of memory for the instance");
        return -ENOMEM;
    }
    lc->host = host;
    lc->ctx = ctx;
    lc->cfg = config;
    lc->beat = host->loop->timer_new(ctx, on_beat, lc);
    lc->stopper = host->loop->timer_new(ctx, on_stop_delay, lc);
    lc->gate = host->loop->timer_new(ctx, on_gate_timer, lc);
    lc->ready = host->loop->timer_new(ctx, on_ready, lc);
    if (!lc->beat || !lc->stopper || !lc->gate || !lc->ready) {
        host->loop->timer_free(lc->beat);
        host->loop->timer_free(lc->stopper);
        host->loop->timer_free(lc->gate);
        host->loop->timer_free(lc->ready);
        host->mem->free(lc);
        return -ENOMEM;
    }
    *state = lc;
    trace(lc, "create");
    return 0;
}

static int
lc_start(void *state, char *err, size_t errlen)
{
    struct lc *lc = state;
    trace(lc, "start");
    if (lc->cfg->fail_start) {
        snprintf(err, errlen, "fail_start is set");
        return -EINVAL;
    }
    lc->started_ms = lc->host->loop->now_ms(lc->ctx);
    int rc = lc->host->links->health_register(lc->ctx, "loop", PLB_HEALTH_LIVE);
    if (rc < 0)
        return rc;
    rc = lc->host->loop->timer_arm(lc->beat, 100, 100, 0);
    if (rc < 0)
        return rc;
    if (lc->cfg->ready_after_ms > 0) {
        rc = lc->host->links->health_register(lc->ctx, "ready", PLB_HEALTH_READY);
        if (rc < 0)
            return rc;
        lc->host->links->health_set(lc->ctx, "ready", 0, "warming up (ready_after)");
        rc = lc->host->loop->timer_arm(lc->ready, lc->cfg->ready_after_ms, 0, 0);
        if (rc < 0)
            return rc;
    }
    if (lc->cfg->publish.n) {
        rc = lc->host->links->endpoints_publish(
            lc->ctx, "static", (const char *const *)lc->cfg->publish.v, lc->cfg->publish.n);
        if (rc < 0)
            return rc;
    }
    if (lc->cfg->gate_open_after_ms > 0) {
        rc = lc->host->loop->timer_arm(lc->gate, lc->cfg->gate_open_after_ms, 0, 0);
        if (rc < 0)
            return rc;
    }
    if (lc->cfg->port_metric) {
        plb_metric *m =
            lc->host->metrics->new_metric(lc->ctx, PLB_METRIC_GAUGE, "lifecycle_port",
                                          "The port setting of the instance.", NULL, NULL, 0);
        if (!m)
            return -ENOMEM;
        rc = lc->host->metrics->set(m, NULL, (double)lc->cfg->port);
        if (rc < 0)
            return rc;
        /* A histogram: how long this start took, observed once. */
        static const double bounds[] = {0.001, 0.01, 0.1, 1};
        plb_metric *hist = lc->host->metrics->new_metric(
            lc->ctx, PLB_METRIC_HISTOGRAM, "lifecycle_start_seconds",
            "How long the instance's start hook took.", NULL, bounds, 4);
        if (!hist)
            return -ENOMEM;
        rc = lc->host->metrics->observe(
            hist, NULL, (double)(lc->host->loop->now_ms(lc->ctx) - lc->started_ms) / 1000.0);
        if (rc < 0)
            return rc;
    }
    if (lc->cfg->sources.n)
        rc = lc->host->links->endpoints_subscribe(lc->ctx, &lc->cfg->sources, on_endpoints, lc);
    return rc;
}

static void
lc_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct lc *lc = state;
    (void)grace_ms;
    trace(lc, "stop");
    lc->host->loop->timer_cancel(lc->beat);
    lc->host->loop->timer_cancel(lc->gate);
    lc->host->loop->timer_cancel(lc->ready);
    if (lc->cfg->stop_delay_ms > 0) {
        lc->stop_done = d;
        if (lc->host->loop->timer_arm(lc->stopper, lc->cfg->stop_delay_ms, 0, 0) == 0)
            return;
        lc->stop_done = NULL;
    }
    lc->host->links->done(d);
}

static void
lc_destroy(void *state)
{
    struct lc *lc = state;
    trace(lc, "destroy");
    lc->host->loop->timer_free(lc->beat);
    lc->host->loop->timer_free(lc->stopper);
    lc->host->loop->timer_free(lc->gate);
    lc->host->loop->timer_free(lc->ready);
    lc->host->mem->free(lc);
}

PLB_MODULE_EXPORT = {
#ifdef LIFECYCLE_ABI_MAJOR
    .abi_major = LIFECYCLE_ABI_MAJOR,
#else
    .abi_major = PLB_ABI_MAJOR,
#endif
#ifdef LIFECYCLE_ABI_MINOR
    .abi_minor = LIFECYCLE_ABI_MINOR,
#else
    .abi_minor = PLB_ABI_MINOR,
#endif
    .size = sizeof(struct plb_module),
    .name = "lifecycle",
    .version = "1.0",
    .description = "Test module that traces its lifecycle hooks",
    .settings = lc_settings,
    .setting_size = sizeof(struct plb_setting),
    .config_size = sizeof(struct lc_config),
    .check = lc_check,
    .create = lc_create,
    .start = lc_start,
    .stop = lc_stop,
    .destroy = lc_destroy,
    .provides = PLB_ROLE_ENDPOINTS | PLB_ROLE_GATE,
    .gate_open = lc_gate_open,
    .gate_close = lc_gate_close,
};
