/*
 * mod_metrics against a fake host: the built mod_metrics.so is dlopened and
 * driven through its descriptor with a host table of this file's making, as
 * STYLE.md wants modules to be testable. Proves the routing and method
 * rules, the liveness and readiness verdicts and texts, sibling handling,
 * the settings checks, stop/destroy, and that failing any allocation
 * neither crashes nor leaks.
 * Usage: test_module PATH/TO/mod_metrics.so
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
static plb_http_server *last_server; /* the last one http_server_new made */
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
    int64_t delay, period;
    int armed;
};
struct plb_http_server {
    char addr[64];
    int port;
    char route[64];
    plb_http_handler h;
    void *arg;
};
struct plb_http_exchange {
    const char *method, *path, *query;
    int status;
    char ctype[128];
    char body[8192];
    size_t len;
    char headers[512];
    int replies;
};
struct plb_metric {
    char name[64];
    enum plb_metric_type type;
    int nlabels;
    char labels[256];
    double value;
    int has_value;
};
struct plb_done {
    int fired;
};

struct check {
    char instance[32], check[32];
    enum plb_health_kind kind;
    int ok;
    int64_t beat;
    char reason[256];
};

static struct {
    int64_t now;
    long allocs;   /* live allocations */
    long alloc_no; /* allocations so far */
    long fail_at;  /* fail allocation number fail_at (1-based), 0: never */
    int timers;    /* live timers */
    int servers;   /* live servers */
    struct plb_metric metrics[16];
    int nmetrics;
    struct check checks[16];
    int nchecks;
    int fail_server; /* http_server_new fails with -EADDRINUSE */
    plb_timer *last_timer;
    plb_timer *zero_timer; /* the last timer armed with no delay, once */
    int renders;           /* metrics_render calls */
} F;

static const char *
f_instance_name(plb_ctx *ctx)
{
    return ctx->name;
}

static void
f_log_fields(plb_ctx *ctx, enum plb_log_level lvl, const char *const *kv, const char *fmt,
             va_list ap)
{
    (void)ctx;
    (void)lvl;
    (void)kv;
    (void)fmt;
    (void)ap;
}

static int
f_log_enabled(plb_ctx *ctx, enum plb_log_level lvl)
{
    (void)ctx;
    return lvl <= PLB_LOG_DEBUG;
}

static int64_t
f_now_ms(plb_ctx *ctx)
{
    (void)ctx;
    return F.now;
}

static int64_t
f_wall_ms(plb_ctx *ctx)
{
    (void)ctx;
    return 1700000000000LL + F.now;
}

static void *
f_alloc(size_t n)
{
    F.alloc_no++;
    if (F.fail_at && F.alloc_no == F.fail_at)
        return NULL;
    void *p = calloc(1, n);
    if (p)
        F.allocs++;
    return p;
}

static void *
f_realloc(void *p, size_t n)
{
    F.alloc_no++;
    if (F.fail_at && F.alloc_no == F.fail_at)
        return NULL;
    void *np = realloc(p, n);
    if (np && !p)
        F.allocs++;
    return np;
}

static void
f_free(void *p)
{
    if (p)
        F.allocs--;
    free(p);
}

static char *
f_strdup(const char *s)
{
    char *d = f_alloc(strlen(s) + 1);
    if (d)
        strcpy(d, s);
    return d;
}

static plb_timer *
f_timer_new(plb_ctx *ctx, plb_timer_cb cb, void *arg)
{
    (void)ctx;
    plb_timer *t = f_alloc(sizeof(*t));
    if (!t)
        return NULL;
    t->cb = cb;
    t->arg = arg;
    F.timers++;
    F.last_timer = t;
    return t;
}

static int
f_timer_arm(plb_timer *t, int64_t delay, int64_t period, double jitter)
{
    (void)jitter;
    if (delay == 0 && period == 0)
        F.zero_timer = t;
    t->delay = delay;
    t->period = period;
    t->armed = 1;
    return 0;
}

static void
f_timer_cancel(plb_timer *t)
{
    t->armed = 0;
}

static int
f_timer_pending(const plb_timer *t)
{
    return t->armed;
}

static void
f_timer_free(plb_timer *t)
{
    if (!t)
        return;
    F.timers--;
    f_free(t);
}

static plb_http_server *
f_http_server_new(plb_ctx *ctx, const char *addr, int port, int *err)
{
    (void)ctx;
    if (F.fail_server) {
        *err = -EADDRINUSE;
        return NULL;
    }
    plb_http_server *s = f_alloc(sizeof(*s));
    if (!s) {
        *err = -ENOMEM;
        return NULL;
    }
    snprintf(s->addr, sizeof(s->addr), "%s", addr);
    s->port = port;
    F.servers++;
    last_server = s;
    return s;
}

static int
f_http_server_port(const plb_http_server *s)
{
    return s->port;
}

static int
f_http_route(plb_http_server *s, const char *path, plb_http_handler h, void *arg)
{
    snprintf(s->route, sizeof(s->route), "%s", path);
    s->h = h;
    s->arg = arg;
    return 0;
}

static void
f_http_server_free(plb_http_server *s)
{
    if (!s)
        return;
    F.servers--;
    f_free(s);
}

static const char *
f_http_method(plb_http_exchange *x)
{
    return x->method;
}

static const char *
f_http_path(plb_http_exchange *x)
{
    return x->path;
}

static const char *
f_http_query(plb_http_exchange *x)
{
    return x->query ? x->query : "";
}

static void
f_http_reply(plb_http_exchange *x, int status, const char *ctype, const void *body, size_t len,
             const char *const *headers)
{
    x->replies++;
    x->status = status;
    snprintf(x->ctype, sizeof(x->ctype), "%s", ctype ? ctype : "");
    ck_assert_uint_lt(len, sizeof(x->body));
    if (len)
        memcpy(x->body, body, len);
    x->body[len] = '\0';
    x->len = len;
    x->headers[0] = '\0';
    for (size_t i = 0; headers && headers[i]; i++) {
        strncat(x->headers, headers[i], sizeof(x->headers) - strlen(x->headers) - 2);
        strcat(x->headers, "\n");
    }
}

static plb_metric *
f_metric_new(plb_ctx *ctx, enum plb_metric_type type, const char *name, const char *help,
             const char *const *label_names, const double *buckets, size_t nbuckets)
{
    (void)ctx;
    (void)help;
    (void)buckets;
    (void)nbuckets;
    for (int i = 0; i < F.nmetrics; i++) {
        if (strcmp(F.metrics[i].name, name) == 0)
            return F.metrics[i].type == type ? &F.metrics[i] : NULL;
    }
    ck_assert_int_lt(F.nmetrics, 16);
    plb_metric *m = &F.metrics[F.nmetrics++];
    memset(m, 0, sizeof(*m));
    snprintf(m->name, sizeof(m->name), "%s", name);
    m->type = type;
    while (label_names && label_names[m->nlabels])
        m->nlabels++;
    return m;
}

static void
record_labels(plb_metric *m, const char *const *values)
{
    m->labels[0] = '\0';
    for (int i = 0; i < m->nlabels; i++) {
        strncat(m->labels, values[i], sizeof(m->labels) - strlen(m->labels) - 2);
        strcat(m->labels, ",");
    }
}

static int
f_metric_add(plb_metric *m, const char *const *values, double v)
{
    ck_assert_int_eq(m->type, PLB_METRIC_COUNTER);
    ck_assert(v >= 0);
    record_labels(m, values);
    m->value += v;
    m->has_value = 1;
    return 0;
}

static int
f_metric_set(plb_metric *m, const char *const *values, double v)
{
    ck_assert_int_eq(m->type, PLB_METRIC_GAUGE);
    record_labels(m, values);
    m->value = v;
    m->has_value = 1;
    return 0;
}

static char *
f_metrics_render(plb_ctx *ctx, size_t *len)
{
    (void)ctx;
    F.renders++;
    char *s = f_strdup("# TYPE fake_total counter\nfake_total 1\n");
    if (s && len)
        *len = strlen(s);
    return s;
}

static struct check *
find_check(const char *instance, const char *name)
{
    for (int i = 0; i < F.nchecks; i++) {
        if (!strcmp(F.checks[i].instance, instance) && !strcmp(F.checks[i].check, name))
            return &F.checks[i];
    }
    return NULL;
}

static int
f_health_register(plb_ctx *ctx, const char *name, enum plb_health_kind kind)
{
    if (find_check(ctx->name, name))
        return -EEXIST;
    struct check *c = &F.checks[F.nchecks++];
    memset(c, 0, sizeof(*c));
    snprintf(c->instance, sizeof(c->instance), "%s", ctx->name);
    snprintf(c->check, sizeof(c->check), "%s", name);
    c->kind = kind;
    c->ok = kind == PLB_HEALTH_LIVE;
    c->beat = F.now;
    return 0;
}

static void
f_health_beat(plb_ctx *ctx, const char *name)
{
    struct check *c = find_check(ctx->name, name);
    if (c)
        c->beat = F.now;
}

static void
f_health_set(plb_ctx *ctx, const char *name, int ok, const char *reason)
{
    struct check *c = find_check(ctx->name, name);
    if (!c)
        return;
    c->ok = ok;
    snprintf(c->reason, sizeof(c->reason), "%s", reason ? reason : "");
}

static void
f_health_foreach(plb_ctx *ctx, plb_health_iter_cb cb, void *arg)
{
    (void)ctx;
    for (int i = 0; i < F.nchecks; i++) {
        struct plb_health_info info = {
            .instance = F.checks[i].instance,
            .check = F.checks[i].check,
            .kind = F.checks[i].kind,
            .ok = F.checks[i].ok,
            .last_beat_ms = F.checks[i].beat,
            .reason = F.checks[i].reason[0] ? F.checks[i].reason : NULL,
        };
        cb(&info, arg);
    }
}

static void
f_done(plb_done *d)
{
    d->fired++;
}

static const char *
f_version(void)
{
    return "9.8.7";
}

static const char *
f_revision(void)
{
    return "abc1234";
}

static struct fake_host fh;

/* The fake host: the shared one (tests/lib/fakehost.h) with this file's members. */
static const struct plb_host *
host_get(void)
{
    static int ready;
    if (!ready) {
        fake_host_init(&fh);
        fh.links.instance_name = f_instance_name;
        fh.log.fields = f_log_fields;
        fh.log.enabled = f_log_enabled;
        fh.loop.now_ms = f_now_ms;
        fh.loop.wall_ms = f_wall_ms;
        fh.loop.timer_new = f_timer_new;
        fh.loop.timer_arm = f_timer_arm;
        fh.loop.timer_cancel = f_timer_cancel;
        fh.loop.timer_pending = f_timer_pending;
        fh.loop.timer_free = f_timer_free;
        fh.http.server_new = f_http_server_new;
        fh.http.server_port = f_http_server_port;
        fh.http.route = f_http_route;
        fh.http.server_free = f_http_server_free;
        fh.http.method = f_http_method;
        fh.http.path = f_http_path;
        fh.http.query = f_http_query;
        fh.http.reply = f_http_reply;
        fh.metrics.new_metric = f_metric_new;
        fh.metrics.add = f_metric_add;
        fh.metrics.set = f_metric_set;
        fh.metrics.render = f_metrics_render;
        fh.links.health_register = f_health_register;
        fh.links.health_beat = f_health_beat;
        fh.links.health_set = f_health_set;
        fh.links.health_foreach = f_health_foreach;
        fh.links.done = f_done;
        fh.mem.alloc = f_alloc;
        fh.mem.realloc = f_realloc;
        fh.mem.free = f_free;
        fh.mem.strdup = f_strdup;
        fh.links.version = f_version;
        fh.links.revision = f_revision;
        ready = 1;
    }
    return fake_host(&fh);
}

/* ------------------------------------------------------------------ */
/* Driving the module                                                   */

/* A config built the way the daemon does: defaults from the table, then
 * overrides. Only the types mod_metrics uses. */
struct inst {
    struct plb_ctx ctx;
    char config[256];
    void *state;
    plb_http_server *srv; /* as created by start */
};

static const struct plb_setting *
setting(const char *name)
{
    for (const struct plb_setting *s = mod->settings; s->name; s++) {
        if (!strcmp(s->name, name))
            return s;
    }
    ck_abort_msg("no setting %s", name);
    return NULL;
}

static void
set_value(struct inst *in, const char *name, const char *text)
{
    const struct plb_setting *s = setting(name);
    char *p = in->config + s->offset;
    switch (s->type) {
    case PLB_SET_STRING:
        *(const char **)p = text; /* borrowed: static strings only */
        break;
    case PLB_SET_INT:
        *(int64_t *)p = strtoll(text, NULL, 10);
        break;
    case PLB_SET_DURATION: {
        char *end;
        double v = strtod(text, &end);
        *(int64_t *)p = (int64_t)(strcmp(end, "ms") == 0 ? v : v * 1000);
        break;
    }
    case PLB_SET_BOOL:
        *(int *)p = strcmp(text, "true") == 0;
        break;
    default:
        ck_abort_msg("unexpected setting type for %s", name);
    }
}

static void
inst_init(struct inst *in, const char *name)
{
    memset(in, 0, sizeof(*in));
    ck_assert_uint_le(mod->config_size, sizeof(in->config));
    in->ctx.name = name;
    for (const struct plb_setting *s = mod->settings; s->name; s++)
        set_value(in, s->name, s->def);
}

static int checks_of(struct inst *in, char *out, size_t len);

static void
inst_start(struct inst *in)
{
    ck_assert_int_eq(checks_of(in, NULL, 0), 0);
    ck_assert_int_eq(mod->create(host_get(), &in->ctx, in->config, &in->state, why, sizeof(why)),
                     0);
    ck_assert_int_eq(mod->start(in->state, why, sizeof(why)), 0);
}

static void
inst_stop(struct inst *in)
{
    struct plb_done d = {0};
    mod->stop(in->state, 1000, &d);
    ck_assert_int_eq(d.fired, 1);
    mod->destroy(in->state);
    in->state = NULL;
}

static char reports[2048];

static void report(plb_check *chk, const char *setting_name, const char *fmt, ...) PLB_PRINTF(3, 4);

static void
report(plb_check *chk, const char *setting_name, const char *fmt, ...)
{
    (void)chk;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t n = strlen(reports);
    snprintf(reports + n, sizeof(reports) - n, "%s: %s\n", setting_name, msg);
}

/* Run the check hook; the number of problems, their text in out. */
static int
checks_of(struct inst *in, char *out, size_t len)
{
    reports[0] = '\0';
    int n = mod->check(host_get(), NULL, in->config, report);
    if (out)
        snprintf(out, len, "%s", reports);
    return n;
}

static struct plb_http_exchange
request(plb_http_server *s, const char *method, const char *path, const char *query)
{
    struct plb_http_exchange x;
    memset(&x, 0, sizeof(x));
    x.method = method;
    x.path = path;
    x.query = query;
    ck_assert_ptr_nonnull(s->h);
    s->h(&x, s->arg);
    if (x.replies == 0 && F.zero_timer && F.zero_timer->armed) {
        /* Answered on the next turn of the loop. */
        F.zero_timer->armed = 0;
        F.zero_timer->cb(F.zero_timer, F.zero_timer->arg);
    }
    ck_assert_int_eq(x.replies, 1);
    return x;
}

static void
setup(void)
{
    memset(&F, 0, sizeof(F));
    F.now = 100000;
    dl = dlopen(module_path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(dl != NULL, "dlopen %s: %s", module_path, dlerror());
    mod = dlsym(dl, PLB_MODULE_SYMBOL);
    ck_assert_ptr_nonnull(mod);
}

static void
teardown(void)
{
    dlclose(dl);
}

/* ------------------------------------------------------------------ */

START_TEST(descriptor_and_settings)
{
    ck_assert_uint_eq(mod->abi_major, PLB_ABI_MAJOR);
    ck_assert_uint_le(mod->abi_minor, PLB_ABI_MINOR);
    ck_assert_str_eq(mod->name, "metrics");
    ck_assert_ptr_null(setting("bind_address")->def); /* unset: the proxy's, else 127.0.0.1 */
    ck_assert_str_eq(setting("port")->def, "7446");
    ck_assert(setting("port")->min == 1 && setting("port")->max == 65535);
    ck_assert_str_eq(setting("liveness_interval")->def, "5s");
    ck_assert_str_eq(setting("liveness_threshold")->def, "15s");
    ck_assert(setting("liveness_interval")->min == 1000);
    ck_assert(setting("liveness_threshold")->min == 1000);
    ck_assert_str_eq(setting("metrics")->def, "true");
    ck_assert_str_eq(setting("probes")->def, "true");

    const char *(*v)(const void *) = setting("bind_address")->validate;
    static const char *const good[] = {"127.0.0.1", "0.0.0.0", "::1",      "[::1]",
                                       "::",        "fe80::1", "localhost"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(v(&good[i]) == NULL, "%s refused: %s", good[i], v(&good[i]));
    /* RFC 1123 hostnames, as extractedprism takes them (resolved at start) */
    static const char *const names[] = {"example.com", "metrics", "a-b.c"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        ck_assert_msg(v(&names[i]) == NULL, "%s refused: %s", names[i], v(&names[i]));
    static const char *const bad[] = {"1.2.3.4.5", "-x.com", "a..b", "300.1.1.1",
                                      "[::1",      "x_y",    "::g"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(v(&bad[i]) && strstr(v(&bad[i]), "must be an IP address"), "%s: %s", bad[i],
                      v(&bad[i]) ? v(&bad[i]) : "(accepted)");
}
END_TEST

START_TEST(check_hook_rules)
{
    struct inst in;
    char out[2048];
    inst_init(&in, "m");
    ck_assert_int_eq(checks_of(&in, out, sizeof(out)), 0);
    set_value(&in, "liveness_threshold", "5");
    ck_assert_int_eq(checks_of(&in, out, sizeof(out)), 1);
    ck_assert_str_eq(out, "liveness_threshold: must be greater than liveness_interval (5s)\n");
    set_value(&in, "liveness_threshold", "5001ms");
    ck_assert_int_eq(checks_of(&in, out, sizeof(out)), 0);
    set_value(&in, "metrics", "false");
    set_value(&in, "probes", "false");
    ck_assert_int_eq(checks_of(&in, out, sizeof(out)), 1);
    ck_assert_ptr_nonnull(strstr(out, "probes: metrics and probes are both false"));
}
END_TEST

START_TEST(start_wires_server_timer_and_checks)
{
    struct inst in;
    inst_init(&in, "probe");
    set_value(&in, "bind_address", "127.0.0.1");
    set_value(&in, "port", "9999");
    inst_start(&in);
    plb_http_server *s = last_server;
    ck_assert_str_eq(s->addr, "127.0.0.1");
    ck_assert_int_eq(s->port, 9999);
    ck_assert_str_eq(s->route, "/");
    ck_assert_int_eq(F.nchecks, 1);
    ck_assert_str_eq(F.checks[0].check, "event-loop");
    ck_assert_int_eq(F.checks[0].kind, PLB_HEALTH_LIVE);
    ck_assert_int_eq(F.timers, 3); /* the heartbeat, the render, the resolve retry */

    /* build info, with the daemon's version, revision and ABI */
    plb_metric *bi = NULL;
    for (int i = 0; i < F.nmetrics; i++) {
        if (!strcmp(F.metrics[i].name, "prismlb_build_info"))
            bi = &F.metrics[i];
    }
    ck_assert_ptr_nonnull(bi);
    char want[64];
    snprintf(want, sizeof(want), "9.8.7,abc1234,%d.%d,", PLB_ABI_MAJOR, PLB_ABI_MINOR);
    ck_assert_str_eq(bi->labels, want);
    ck_assert(bi->value == 1);

    inst_stop(&in);
    ck_assert_int_eq(F.timers, 0);
    ck_assert_int_eq(F.servers, 0);
    ck_assert_int_eq(F.allocs, 0);
}
END_TEST

/* Fire a timer as the loop would. */
static void
fire(plb_timer *t)
{
    ck_assert(t->armed);
    t->cb(t, t->arg);
}

START_TEST(heartbeat_and_liveness)
{
    struct inst in;
    inst_init(&in, "metrics");
    set_value(&in, "liveness_interval", "1");
    set_value(&in, "liveness_threshold", "3");
    inst_start(&in);
    plb_http_server *s = last_server;
    plb_timer *beat = F.last_timer;
    ck_assert_int_eq(beat->delay, 1000);
    ck_assert_int_eq(beat->period, 1000);

    /* Another instance's liveness check. */
    struct plb_ctx other = {.name = "proxy"};
    ck_assert_int_eq(f_health_register(&other, "accept", PLB_HEALTH_LIVE), 0);

    F.now += 3000; /* exactly the threshold: still alive */
    struct plb_http_exchange x = request(s, "GET", "/healthz", NULL);
    ck_assert_int_eq(x.status, 200);
    ck_assert_str_eq(x.body, "ok\n");
    ck_assert_str_eq(x.ctype, "text/plain; charset=utf-8");
    ck_assert_ptr_nonnull(strstr(x.headers, "Cache-Control: no-store"));

    F.now += 500;
    x = request(s, "GET", "/healthz", NULL);
    ck_assert_int_eq(x.status, 503);
    ck_assert_str_eq(x.body, "[-]metrics/event-loop failed: no heartbeat for 3.5s (threshold "
                             "3.0s)\n[-]proxy/accept failed: no heartbeat for 3.5s (threshold "
                             "3.0s)\nhealthz check failed\n");

    /* The loop's timer fires: its own check is fresh, the proxy's is not. */
    fire(beat);
    x = request(s, "GET", "/healthz", NULL);
    ck_assert_int_eq(x.status, 503);
    ck_assert_str_eq(x.body, "[-]proxy/accept failed: no heartbeat for 3.5s (threshold 3.0s)\n"
                             "healthz check failed\n");
    x = request(s, "GET", "/healthz", "verbose");
    ck_assert_str_eq(x.body, "[+]metrics/event-loop ok\n"
                             "[-]proxy/accept failed: no heartbeat for 3.5s (threshold 3.0s)\n"
                             "healthz check failed\n");
    f_health_beat(&other, "accept");
    x = request(s, "GET", "/healthz", "x=1&verbose=true");
    ck_assert_int_eq(x.status, 200);
    ck_assert_str_eq(x.body, "[+]metrics/event-loop ok\n[+]proxy/accept ok\n"
                             "healthz check passed\n");
    x = request(s, "GET", "/healthz", "verbose=0");
    ck_assert_str_eq(x.body, "ok\n");

    /* stop cancels the heartbeat and frees the server at once. */
    struct plb_done d = {0};
    mod->stop(in.state, 1000, &d);
    ck_assert_int_eq(d.fired, 1);
    ck_assert(!beat->armed);
    ck_assert_int_eq(F.servers, 0);
    mod->destroy(in.state);
    ck_assert_int_eq(F.timers, 0);
    ck_assert_int_eq(F.allocs, 0);
}
END_TEST

START_TEST(readiness)
{
    struct inst in;
    inst_init(&in, "metrics");
    inst_start(&in);
    plb_http_server *s = last_server;

    struct plb_http_exchange x = request(s, "GET", "/readyz", NULL);
    ck_assert_int_eq(x.status, 200);
    ck_assert_str_eq(x.body, "ok\n");

    struct plb_ctx proxy = {.name = "kubeprism"}, watch = {.name = "apiservers"};
    ck_assert_int_eq(f_health_register(&proxy, "upstreams", PLB_HEALTH_READY), 0);
    ck_assert_int_eq(f_health_register(&watch, "watch", PLB_HEALTH_READY), 0);
    f_health_set(&proxy, "upstreams", 0, "no healthy\nupstream");
    f_health_set(&watch, "watch", 1, NULL);
    /* Liveness ignores readiness. */
    x = request(s, "GET", "/healthz", NULL);
    ck_assert_int_eq(x.status, 200);

    x = request(s, "GET", "/readyz", NULL);
    ck_assert_int_eq(x.status, 503);
    /* The reason's newline cannot break the one-line-per-check format. */
    ck_assert_str_eq(x.body, "[-]kubeprism/upstreams failed: no healthy upstream\n"
                             "readyz check failed\n");
    x = request(s, "GET", "/readyz", "verbose");
    ck_assert_str_eq(x.body, "[-]kubeprism/upstreams failed: no healthy upstream\n"
                             "[+]apiservers/watch ok\nreadyz check failed\n");
    f_health_set(&proxy, "upstreams", 0, NULL);
    x = request(s, "GET", "/readyz", NULL);
    ck_assert_str_eq(x.body, "[-]kubeprism/upstreams failed: not ready\nreadyz check failed\n");
    f_health_set(&proxy, "upstreams", 1, NULL);
    x = request(s, "GET", "/readyz", NULL);
    ck_assert_int_eq(x.status, 200);
    ck_assert_str_eq(x.body, "ok\n");
    x = request(s, "HEAD", "/readyz", NULL);
    ck_assert_int_eq(x.status, 200);
    inst_stop(&in);
    ck_assert_int_eq(F.allocs, 0);
}
END_TEST

START_TEST(methods_and_paths)
{
    struct inst in;
    inst_init(&in, "metrics");
    inst_start(&in);
    plb_http_server *s = last_server;
    static const char *const paths[] = {"/healthz", "/readyz", "/metrics"};
    for (int i = 0; i < 3; i++) {
        struct plb_http_exchange x = request(s, "GET", paths[i], NULL);
        ck_assert_int_eq(x.status, 200);
        x = request(s, "HEAD", paths[i], NULL);
        ck_assert_int_eq(x.status, 200);
        x = request(s, "OPTIONS", paths[i], NULL);
        ck_assert_int_eq(x.status, 204);
        ck_assert_int_eq((int)x.len, 0);
        ck_assert_str_eq(x.headers, "Allow: GET, HEAD, OPTIONS\n");
        static const char *const bad[] = {"POST", "PUT", "DELETE", "PATCH", "TRACE", "CONNECT"};
        for (int k = 0; k < 6; k++) {
            x = request(s, bad[k], paths[i], NULL);
            ck_assert_int_eq(x.status, 405);
            ck_assert_str_eq(x.headers, "Allow: GET, HEAD, OPTIONS\n");
        }
    }
    static const char *const unknown[] = {"/",         "",         "/metrics/",
                                          "/healthzz", "/readyz/", "/METRICS"};
    for (int i = 0; i < 6; i++) {
        struct plb_http_exchange x = request(s, "GET", unknown[i], NULL);
        ck_assert_int_eq(x.status, 404);
        x = request(s, "DELETE", unknown[i], NULL);
        ck_assert_int_eq(x.status, 404);
    }
    inst_stop(&in);
}
END_TEST

START_TEST(metrics_endpoint)
{
    struct inst in;
    inst_init(&in, "metrics");
    inst_start(&in);
    plb_http_server *s = last_server;
    struct plb_http_exchange x = request(s, "GET", "/metrics", NULL);
    ck_assert_int_eq(x.status, 200);
    ck_assert_str_eq(x.ctype, "text/plain; version=0.0.4; charset=utf-8");
    ck_assert_str_eq(x.body, "# TYPE fake_total counter\nfake_total 1\n");

    static const char *const want[] = {"process_resident_memory_bytes",
                                       "process_virtual_memory_bytes",
                                       "process_open_fds",
                                       "process_max_fds",
                                       "process_cpu_seconds_total",
                                       "process_start_time_seconds"};
    for (int i = 0; i < 6; i++) {
        plb_metric *m = NULL;
        for (int k = 0; k < F.nmetrics; k++) {
            if (!strcmp(F.metrics[k].name, want[i]))
                m = &F.metrics[k];
        }
        ck_assert_msg(m && m->has_value, "%s not set", want[i]);
        ck_assert_int_eq(m->type,
                         strstr(want[i], "_total") ? PLB_METRIC_COUNTER : PLB_METRIC_GAUGE);
        if (strcmp(want[i], "process_cpu_seconds_total") != 0)
            ck_assert_msg(m->value > 0, "%s = %g", want[i], m->value);
    }
    inst_stop(&in);
    ck_assert_int_eq(F.allocs, 0);
}
END_TEST

/* Scrapes waiting together share one render, made on the next turn of the
 * loop; a scrape after that render gets a new one. */
START_TEST(waiting_scrapes_share_one_render)
{
    struct inst in;
    inst_init(&in, "metrics");
    inst_start(&in);
    plb_http_server *s = last_server;
    F.renders = 0;
    static struct plb_http_exchange xs[50];
    memset(xs, 0, sizeof(xs));
    for (int i = 0; i < 50; i++) {
        xs[i].method = "GET";
        xs[i].path = "/metrics";
        s->h(&xs[i], s->arg);
        ck_assert_int_eq(xs[i].replies, 0); /* waits for the render */
    }
    ck_assert_ptr_nonnull(F.zero_timer);
    ck_assert(F.zero_timer->armed);
    ck_assert_int_eq(F.renders, 0);
    F.zero_timer->armed = 0;
    F.zero_timer->cb(F.zero_timer, F.zero_timer->arg);
    ck_assert_int_eq(F.renders, 1);
    for (int i = 0; i < 50; i++) {
        ck_assert_int_eq(xs[i].replies, 1);
        ck_assert_int_eq(xs[i].status, 200);
        ck_assert_str_eq(xs[i].body, "# TYPE fake_total counter\nfake_total 1\n");
    }
    /* The next scrape is rendered anew, after it arrived. */
    ck_assert_int_eq(request(s, "GET", "/metrics", NULL).status, 200);
    ck_assert_int_eq(F.renders, 2);
    inst_stop(&in);
    ck_assert_int_eq(F.allocs, 0);
}
END_TEST

/* Two instances: one serves /metrics only, the other probes only, with a
 * threshold shorter than the first one's... and a third with a slow beat
 * that the fast one must not judge. */
START_TEST(several_instances)
{
    struct inst pub, probe, slow;
    inst_init(&pub, "public");
    set_value(&pub, "probes", "false");
    set_value(&pub, "port", "9100");
    inst_start(&pub);
    plb_http_server *spub = last_server;
    inst_init(&probe, "probe");
    set_value(&probe, "metrics", "false");
    set_value(&probe, "liveness_interval", "1");
    set_value(&probe, "liveness_threshold", "2");
    inst_start(&probe);
    plb_http_server *sprobe = last_server;
    plb_timer *probe_beat = F.last_timer;
    inst_init(&slow, "slow");
    set_value(&slow, "liveness_interval", "10");
    set_value(&slow, "liveness_threshold", "30");
    inst_start(&slow);
    plb_http_server *sslow = last_server;

    ck_assert_int_eq(F.nchecks, 2); /* probe and slow beat; public serves no probes */
    ck_assert_int_eq(request(spub, "GET", "/healthz", NULL).status, 404);
    ck_assert_int_eq(request(spub, "GET", "/metrics", NULL).status, 200);
    ck_assert_int_eq(request(sprobe, "GET", "/metrics", NULL).status, 404);

    F.now += 5000;
    fire(probe_beat);
    struct plb_http_exchange x = request(sprobe, "GET", "/healthz", "verbose");
    ck_assert_int_eq(x.status, 200);
    ck_assert_str_eq(x.body, "[+]probe/event-loop ok\nhealthz check passed\n");
    x = request(sslow, "GET", "/healthz", "verbose");
    ck_assert_str_eq(x.body, "[+]slow/event-loop ok\nhealthz check passed\n");

    /* Once slow stopped, its stale check is an ordinary check again. */
    inst_stop(&slow);
    x = request(sprobe, "GET", "/healthz", NULL);
    ck_assert_int_eq(x.status, 503);
    ck_assert_ptr_nonnull(strstr(x.body, "[-]slow/event-loop failed"));
    inst_stop(&probe);
    inst_stop(&pub);
    ck_assert_int_eq(F.allocs, 0);
    ck_assert_int_eq(F.servers, 0);
}
END_TEST

START_TEST(start_failure_cleans_up)
{
    struct inst in;
    inst_init(&in, "metrics");
    F.fail_server = 1;
    ck_assert_int_eq(mod->create(host_get(), &in.ctx, in.config, &in.state, why, sizeof(why)), 0);
    ck_assert_int_eq(mod->start(in.state, why, sizeof(why)), -EADDRINUSE);
    ck_assert(!F.last_timer->armed);
    mod->destroy(in.state);
    ck_assert_int_eq(F.allocs, 0);
    ck_assert_int_eq(F.timers, 0);
}
END_TEST

/* Fail every allocation in turn, from create through a few requests: each
 * failure is an error return or a 500, never a crash or a leak. */
START_TEST(allocation_failures)
{
    int completed = 0;
    for (long n = 1; n < 200 && !completed; n++) {
        memset(&F, 0, sizeof(F));
        F.now = 100000;
        F.fail_at = n;
        struct inst in;
        inst_init(&in, "metrics");
        struct plb_ctx other = {.name = "proxy"};
        f_health_register(&other, "upstreams", PLB_HEALTH_READY);
        f_health_set(&other, "upstreams", 0,
                     "a reason long enough to need the buffer to grow "
                     "at least once, and then some more text");
        if (mod->create(host_get(), &in.ctx, in.config, &in.state, why, sizeof(why)) < 0) {
            ck_assert_int_eq(F.allocs, 0);
            continue;
        }
        if (mod->start(in.state, why, sizeof(why)) < 0) {
            mod->destroy(in.state);
            ck_assert_int_eq(F.allocs, 0);
            continue;
        }
        plb_http_server *s = last_server;
        struct plb_http_exchange a = request(s, "GET", "/metrics", NULL);
        struct plb_http_exchange b = request(s, "GET", "/readyz", "verbose");
        struct plb_http_exchange c = request(s, "GET", "/healthz", "verbose");
        ck_assert(a.status == 200 || a.status == 500);
        ck_assert(b.status == 503 || b.status == 500);
        ck_assert(c.status == 200 || c.status == 500);
        completed = a.status == 200 && b.status == 503 && c.status == 200 && F.alloc_no < n;
        inst_stop(&in);
        ck_assert_msg(F.allocs == 0, "leak after failing allocation %ld", n);
    }
    ck_assert_msg(completed, "never ran out of allocations to fail");
}
END_TEST

int
main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/mod_metrics.so\n", argv[0]);
        return 2;
    }
    module_path = argv[1];
    Suite *s = suite_create("metrics-module");
    TCase *tc = tcase_create("fake-host");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, descriptor_and_settings);
    tcase_add_test(tc, check_hook_rules);
    tcase_add_test(tc, start_wires_server_timer_and_checks);
    tcase_add_test(tc, heartbeat_and_liveness);
    tcase_add_test(tc, readiness);
    tcase_add_test(tc, methods_and_paths);
    tcase_add_test(tc, metrics_endpoint);
    tcase_add_test(tc, waiting_scrapes_share_one_render);
    tcase_add_test(tc, several_instances);
    tcase_add_test(tc, start_failure_cleans_up);
    tcase_add_test(tc, allocation_failures);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
