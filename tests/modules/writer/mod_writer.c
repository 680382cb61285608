/*
 * mod_writer: a gated test module built only against <prismlb/module.h>.
 *
 * While its gate is open it writes, every `interval`, a merge patch of one
 * annotation to one object of an API server (`url`): the value is
 * "IDENTITY/TERM/SEQ", and every request carries the User-Agent
 * "prismlb-writer/IDENTITY/TERM", so the fake API server's request log
 * shows who wrote in which term. A term starts at each gate_open. At most
 * one write is in flight; gate_close (and stop) cancel the timer and the
 * write in flight before completing, so no write of a closed term is sent
 * afterwards. trace_file gets "gate_open IDENTITY TERM MS" and
 * "gate_close IDENTITY TERM MS" lines (MS: wall-clock milliseconds).
 *
 * For the fencing tests: `via = "kube"` writes through a Kubernetes client
 * (kubeconfig, kube_patch of the Lease default/shared-writes) instead of
 * http_request; `parallel` keeps that many writes in flight; `careless`
 * leaves its writes running at gate_close and keeps trying to write while
 * the gate is closed, so the daemon's fence is what stops them. Outcomes go
 * to the trace as "refused" (the start failed with PLB_EFENCED), "fenced"
 * (done said PLB_HTTP_E_FENCED), "in_flight" (done said in_flight_at_close)
 * and "written" lines.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define WR_MAX_PARALLEL 16

#include <prismlb/module_util.h>

struct wr_config {
    char *identity;
    char *url;
    char *ca_file;
    char *cert_file;
    char *key_file;
    char *trace_file;
    int64_t interval_ms;
    char *kubeconfig;
    int via; /* 0 http, 1 kube */
    int64_t parallel;
    int careless;
};

struct wr {
    const struct plb_host *host;
    plb_ctx *ctx;
    const struct wr_config *cfg;
    plb_timer *timer;
    plb_kube *kube;                     /* via kube */
    plb_http_req *req[WR_MAX_PARALLEL]; /* the writes in flight (http) */
    plb_kube_op *op[WR_MAX_PARALLEL];   /* (kube) */
    int open;
    unsigned long term, seq;
};

static const char *const vias[] = {"http", "kube", NULL};

/* clang-format off */
static const struct plb_setting wr_settings[] = {
    {.name = "identity", .type = PLB_SET_STRING, .offset = offsetof(struct wr_config, identity),
     .flags = PLB_SET_REQUIRED | PLB_SET_NONEMPTY, .doc = "Who writes"},
    {.name = "url", .type = PLB_SET_STRING, .offset = offsetof(struct wr_config, url),
     .flags = PLB_SET_REQUIRED | PLB_SET_NONEMPTY, .doc = "The object to patch"},
    {.name = "ca_file", .type = PLB_SET_PATH, .offset = offsetof(struct wr_config, ca_file),
     .doc = "CA of the server"},
    {.name = "cert_file", .type = PLB_SET_PATH, .offset = offsetof(struct wr_config, cert_file),
     .doc = "Client certificate"},
    {.name = "key_file", .type = PLB_SET_PATH, .offset = offsetof(struct wr_config, key_file),
     .flags = PLB_SET_SECRET, .doc = "Client key"},
    {.name = "trace_file", .type = PLB_SET_PATH, .offset = offsetof(struct wr_config, trace_file),
     .doc = "File gate_open/gate_close lines are appended to"},
    {.name = "interval", .type = PLB_SET_DURATION,
     .offset = offsetof(struct wr_config, interval_ms), .def = "100ms", .min = 1,
     .doc = "Pause between writes"},
    {.name = "kubeconfig", .type = PLB_SET_PATH, .offset = offsetof(struct wr_config, kubeconfig),
     .doc = "Kubeconfig of the client (via kube)"},
    {.name = "via", .type = PLB_SET_ENUM, .offset = offsetof(struct wr_config, via),
     .def = "http", .enum_values = vias, .doc = "http_request, or kube_patch of a Lease"},
    {.name = "parallel", .type = PLB_SET_INT, .offset = offsetof(struct wr_config, parallel),
     .def = "1", .min = 1, .max = WR_MAX_PARALLEL, .doc = "Writes kept in flight"},
    {.name = "careless", .type = PLB_SET_BOOL, .offset = offsetof(struct wr_config, careless),
     .def = "false", .doc = "Leave writes to the daemon's fence at gate_close"},
    PLB_SETTINGS_END,
};
/* clang-format on */

static void
trace(struct wr *w, const char *what)
{
    if (!w->cfg->trace_file)
        return;
    FILE *f = fopen(w->cfg->trace_file, "a");
    if (!f) {
        PLB_LOG(w->host, w->ctx, PLB_LOG_ERROR, PLB_KV("path", w->cfg->trace_file),
                "cannot open trace file");
        return;
    }
    fprintf(f, "%s %s %lu %lld\n", what, w->cfg->identity, w->term,
            (long long)w->host->loop->wall_ms(w->ctx));
    fclose(f);
}

static void write_all(struct wr *w);

/* One write ended: trace how, and write again after interval. */
static void
ended(struct wr *w, int status, int fenced, int in_flight, const char *error)
{
    if (in_flight)
        trace(w, "in_flight");
    if (fenced)
        trace(w, "fenced");
    else if (status == 200)
        trace(w, "written");
    else
        PLB_LOG(w->host, w->ctx, PLB_LOG_WARN, PLB_KV("error", error), "write failed");
    if ((w->open || w->cfg->careless) &&
        w->host->loop->timer_arm(w->timer, w->cfg->interval_ms, 0, 0) < 0)
        PLB_LOG(w->host, w->ctx, PLB_LOG_ERROR, NULL, "cannot arm the write timer");
}

static void
on_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    struct wr *w = arg;
    for (int i = 0; i < WR_MAX_PARALLEL; i++) {
        if (w->req[i] == req)
            w->req[i] = NULL;
    }
    ended(w, w->host->http->resp_status(resp), w->host->http->resp_error(resp) == PLB_HTTP_E_FENCED,
          PLB_HAS(w->host->http, resp_in_flight_at_close) &&
              w->host->http->resp_in_flight_at_close(resp),
          w->host->http->resp_error_text(resp));
}

static void
on_kube_done(plb_kube_op *op, const struct plb_kube_result *r, void *arg)
{
    struct wr *w = arg;
    for (int i = 0; i < WR_MAX_PARALLEL; i++) {
        if (w->op[i] == op)
            w->op[i] = NULL;
    }
    int in_flight = r->size >= offsetof(struct plb_kube_result, in_flight_at_close) +
                                   sizeof(r->in_flight_at_close) &&
                    r->in_flight_at_close;
    ended(w, r->status, r->error == PLB_HTTP_E_FENCED, in_flight, r->message);
}

/* Start write slot i. 0, or the -errno of the start. */
static int
write_one(struct wr *w, int i)
{
    char body[512], ua[300];
    int err = 0;
    w->seq++;
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"annotations\":{\"prismlb.test/writer\":\"%s/%lu/%lu\"}}}",
             w->cfg->identity, w->term, w->seq);
    if (w->kube) {
        struct plb_kube_ref ref = {.size = sizeof(ref),
                                   .api_version = "coordination.k8s.io/v1",
                                   .resource = "leases",
                                   .ns = "default",
                                   .name = "shared-writes"};
        w->op[i] =
            w->host->kube->patch(w->kube, &ref, PLB_KUBE_MERGE_PATCH, body, on_kube_done, w, &err);
        return w->op[i] ? 0 : (err ? err : -EIO);
    }
    snprintf(ua, sizeof(ua), "User-Agent: prismlb-writer/%s/%lu", w->cfg->identity, w->term);
    const char *headers[] = {"Content-Type: application/merge-patch+json",
                             "Accept: application/json", ua, NULL};
    struct plb_http_opts o = {
        .size = sizeof(o),
        .method = "PATCH",
        .url = w->cfg->url,
        .headers = headers,
        .body = body,
        .body_len = strlen(body),
        .ca_file = w->cfg->ca_file,
        .cert_file = w->cfg->cert_file,
        .key_file = w->cfg->key_file,
        .timeout_ms = w->cfg->careless ? 0 : 2000,
        .done = on_done,
        .arg = w,
    };
    w->req[i] = w->host->http->request(w->ctx, &o, &err);
    return w->req[i] ? 0 : (err ? err : -EIO);
}

/* Fill every free write slot (while open, or always when careless). */
static void
write_all(struct wr *w)
{
    int refused = 0, failed = 0;
    if (!w->open && !w->cfg->careless)
        return;
    for (int i = 0; i < (int)w->cfg->parallel; i++) {
        if (w->req[i] || w->op[i])
            continue;
        int rc = write_one(w, i);
        if (rc == PLB_EFENCED)
            refused = 1;
        else if (rc)
            failed = 1;
    }
    if (refused)
        trace(w, "refused");
    if (failed)
        PLB_LOG(w->host, w->ctx, PLB_LOG_ERROR, NULL, "cannot start a write");
    if ((refused || failed) && w->host->loop->timer_arm(w->timer, w->cfg->interval_ms, 0, 0) < 0)
        PLB_LOG(w->host, w->ctx, PLB_LOG_ERROR, NULL, "cannot arm the write timer");
}

static void
on_timer(plb_timer *t, void *arg)
{
    (void)t;
    write_all(arg);
}

/* Stop writing now: no timer, nothing in flight. */
static void
halt(struct wr *w)
{
    w->open = 0;
    if (w->timer)
        w->host->loop->timer_cancel(w->timer);
    for (int i = 0; i < WR_MAX_PARALLEL; i++) {
        if (w->req[i])
            w->host->http->cancel(w->req[i]);
        if (w->op[i])
            w->host->kube->cancel(w->op[i]);
        w->req[i] = NULL;
        w->op[i] = NULL;
    }
}

static int
wr_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    (void)err;
    (void)errlen;
    struct wr *w = host->mem->alloc(sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->host = host;
    w->ctx = ctx;
    w->cfg = config;
    *state = w;
    return 0;
}

static int
wr_start(void *state, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    struct wr *w = state;
    w->timer = w->host->loop->timer_new(w->ctx, on_timer, w);
    if (!w->timer)
        return -ENOMEM;
    if (w->cfg->via == 1) {
        char ua[300];
        snprintf(ua, sizeof(ua), "prismlb-writer/%s/0", w->cfg->identity);
        struct plb_kube_opts o = {
            .size = sizeof(o), .kubeconfig = w->cfg->kubeconfig, .user_agent = ua};
        w->kube = w->host->kube->client_new(w->ctx, &o, err, errlen);
        if (!w->kube)
            return -EINVAL;
    }
    return 0;
}

static void
wr_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct wr *w = state;
    (void)grace_ms;
    if (w->open)
        trace(w, "gate_close");
    halt(w);
    w->host->links->done(d);
}

static void
wr_destroy(void *state)
{
    struct wr *w = state;
    if (!w)
        return;
    halt(w);
    w->host->kube->client_free(w->kube);
    w->host->loop->timer_free(w->timer);
    w->host->mem->free(w);
}

static void
wr_gate_open(void *state)
{
    struct wr *w = state;
    w->open = 1;
    w->term++;
    w->seq = 0;
    trace(w, "gate_open");
    write_all(w);
}

static void
wr_gate_close(void *state, plb_done *d)
{
    struct wr *w = state;
    if (w->open)
        trace(w, "gate_close");
    if (w->cfg->careless)
        w->open = 0; /* the fence stops what is in flight */
    else
        halt(w);
    w->host->links->done(d);
}

PLB_MODULE_EXPORT = {
    .abi_major = PLB_ABI_MAJOR,
    .abi_minor = PLB_ABI_MINOR,
    .size = sizeof(struct plb_module),
    .name = "writer",
    .version = "0.1.0",
    .description = "Test module: writes its identity to an object while its gate is open",
    .settings = wr_settings,
    .setting_size = sizeof(struct plb_setting),
    .config_size = sizeof(struct wr_config),
    .create = wr_create,
    .start = wr_start,
    .stop = wr_stop,
    .destroy = wr_destroy,
    .gate_open = wr_gate_open,
    .gate_close = wr_gate_close,
};
