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
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module.h>

struct wr_config {
    char *identity;
    char *url;
    char *ca_file;
    char *cert_file;
    char *key_file;
    char *trace_file;
    int64_t interval_ms;
};

struct wr {
    const struct plb_host *host;
    plb_ctx *ctx;
    const struct wr_config *cfg;
    plb_timer *timer;
    plb_http_req *req; /* the write in flight */
    int open;
    unsigned long term, seq;
};

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
        w->host->log_kv(w->ctx, PLB_LOG_ERROR, "cannot open trace file", "path", w->cfg->trace_file,
                        NULL);
        return;
    }
    fprintf(f, "%s %s %lu %lld\n", what, w->cfg->identity, w->term,
            (long long)w->host->wall_ms(w->ctx));
    fclose(f);
}

static void write_one(struct wr *w);

static void
on_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    struct wr *w = arg;
    (void)req;
    w->req = NULL;
    int status = w->host->http_resp_status(resp);
    if (status != 200)
        w->host->log_kv(w->ctx, PLB_LOG_WARN, "write failed", "error",
                        w->host->http_resp_error_text(resp), NULL);
    if (w->open && w->host->timer_arm(w->timer, w->cfg->interval_ms, 0, 0) < 0)
        w->host->log_kv(w->ctx, PLB_LOG_ERROR, "cannot arm the write timer", NULL);
}

static void
write_one(struct wr *w)
{
    char body[512], ua[300];
    int err = 0;
    if (!w->open || w->req)
        return;
    w->seq++;
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"annotations\":{\"prismlb.test/writer\":\"%s/%lu/%lu\"}}}",
             w->cfg->identity, w->term, w->seq);
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
        .timeout_ms = 2000,
        .done = on_done,
        .arg = w,
    };
    w->req = w->host->http_request(w->ctx, &o, &err);
    if (!w->req) {
        w->host->log_kv(w->ctx, PLB_LOG_ERROR, "cannot start a write", NULL);
        if (w->host->timer_arm(w->timer, w->cfg->interval_ms, 0, 0) < 0)
            w->host->log_kv(w->ctx, PLB_LOG_ERROR, "cannot arm the write timer", NULL);
    }
}

static void
on_timer(plb_timer *t, void *arg)
{
    (void)t;
    write_one(arg);
}

/* Stop writing now: no timer, nothing in flight. */
static void
halt(struct wr *w)
{
    w->open = 0;
    if (w->timer)
        w->host->timer_cancel(w->timer);
    if (w->req) {
        w->host->http_cancel(w->req);
        w->req = NULL;
    }
}

static int
wr_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    (void)err;
    (void)errlen;
    struct wr *w = host->alloc(sizeof(*w));
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
    w->timer = w->host->timer_new(w->ctx, on_timer, w);
    return w->timer ? 0 : -ENOMEM;
}

static void
wr_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct wr *w = state;
    (void)grace_ms;
    if (w->open)
        trace(w, "gate_close");
    halt(w);
    w->host->done(d);
}

static void
wr_destroy(void *state)
{
    struct wr *w = state;
    if (!w)
        return;
    halt(w);
    w->host->timer_free(w->timer);
    w->host->free(w);
}

static void
wr_gate_open(void *state)
{
    struct wr *w = state;
    w->open = 1;
    w->term++;
    w->seq = 0;
    trace(w, "gate_open");
    write_one(w);
}

static void
wr_gate_close(void *state, plb_done *d)
{
    struct wr *w = state;
    if (w->open)
        trace(w, "gate_close");
    halt(w);
    w->host->done(d);
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
