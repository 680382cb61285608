/*
 * mod_file_endpoints: a test endpoint source for the tcp_proxy end-to-end
 * suite, built against <prismlb/module.h> only. It publishes the lines of
 * `file` (one host:port per line) as provider "static" at start and again
 * whenever the file's content changes (checked every `interval`), so a test
 * can add and remove upstreams while the daemon runs by rewriting a file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

struct fe_config {
    char *file;
    int64_t interval_ms;
};

struct fe {
    const struct plb_host *host;
    plb_ctx *ctx;
    const struct fe_config *cfg;
    plb_timer *timer;
    char last[4096];
};

/* clang-format off */
static const struct plb_setting fe_settings[] = {
    {.name = "file",
     .type = PLB_SET_PATH,
     .offset = offsetof(struct fe_config, file),
     .flags = PLB_SET_REQUIRED | PLB_SET_NONEMPTY,
     .doc = "File with one host:port per line"},
    {.name = "interval",
     .type = PLB_SET_DURATION,
     .offset = offsetof(struct fe_config, interval_ms),
     .def = "50ms",
     .min = 10,
     .doc = "How often the file is re-read"},
    PLB_SETTINGS_END,
};
/* clang-format on */

/* Re-read the file; publish when it changed. */
static void
poll_file(struct fe *fe)
{
    char text[4096];
    const char *v[64];
    size_t n = 0, len = 0;
    FILE *f = fopen(fe->cfg->file, "r");
    if (!f)
        return; /* being rewritten: next time */
    len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[len] = '\0';
    if (strcmp(text, fe->last) == 0)
        return;
    memcpy(fe->last, text, len + 1);
    for (char *save = NULL, *s = strtok_r(text, "\n", &save); s && n < 64;
         s = strtok_r(NULL, "\n", &save)) {
        if (*s)
            v[n++] = s;
    }
    int rc = fe->host->links->endpoints_publish(fe->ctx, "static", v, n);
    if (rc < 0)
        PLB_LOG(fe->host, fe->ctx, PLB_LOG_ERROR, NULL, "cannot publish endpoints");
}

static void
on_timer(plb_timer *t, void *arg)
{
    (void)t;
    poll_file(arg);
}

static int
fe_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    (void)err;
    (void)errlen;
    struct fe *fe = host->mem->alloc(sizeof(*fe));
    if (!fe)
        return -ENOMEM;
    fe->host = host;
    fe->ctx = ctx;
    fe->cfg = config;
    fe->timer = host->loop->timer_new(ctx, on_timer, fe);
    if (!fe->timer) {
        host->mem->free(fe);
        return -ENOMEM;
    }
    *state = fe;
    return 0;
}

static int
fe_start(void *state, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    struct fe *fe = state;
    poll_file(fe);
    return fe->host->loop->timer_arm(fe->timer, fe->cfg->interval_ms, fe->cfg->interval_ms, 0);
}

static void
fe_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct fe *fe = state;
    (void)grace_ms;
    fe->host->loop->timer_cancel(fe->timer);
    fe->host->links->done(d);
}

static void
fe_destroy(void *state)
{
    struct fe *fe = state;
    fe->host->loop->timer_free(fe->timer);
    fe->host->mem->free(fe);
}

PLB_MODULE_EXPORT = {
    .abi_major = PLB_ABI_MAJOR,
    .abi_minor = PLB_ABI_MINOR,
    .size = sizeof(struct plb_module),
    .name = "file_endpoints",
    .version = "1.0",
    .description = "Test endpoint source: publishes the lines of a file",
    .settings = fe_settings,
    .setting_size = sizeof(struct plb_setting),
    .config_size = sizeof(struct fe_config),
    .provides = PLB_ROLE_ENDPOINTS,
    .create = fe_create,
    .start = fe_start,
    .stop = fe_stop,
    .destroy = fe_destroy,
};
