/*
 * health: the verdicts of /healthz and /readyz, from the checks every
 * instance registered with the host, and their kube-apiserver style text.
 */
#include <stdio.h>
#include <string.h>

#include "mm.h"

struct eval {
    const void *self;
    enum plb_health_kind kind;
    int64_t now_ms;
    int64_t threshold_ms;
    int verbose;
    int failed;
    struct mm_buf *out;
};

static void
check_line(struct eval *e, const struct plb_health_info *info, int ok, const char *why)
{
    if (ok && !e->verbose)
        return;
    mm_buf_printf(e->out, "[%c]", ok ? '+' : '-');
    mm_buf_put_line_safe(e->out, info->instance);
    mm_buf_printf(e->out, "/");
    mm_buf_put_line_safe(e->out, info->check);
    if (ok) {
        mm_buf_printf(e->out, " ok\n");
        return;
    }
    mm_buf_printf(e->out, " failed: ");
    mm_buf_put_line_safe(e->out, why);
    mm_buf_printf(e->out, "\n");
}

static void
visit(const struct plb_health_info *info, void *arg)
{
    struct eval *e = arg;
    if (info->kind != e->kind)
        return;
    if (info->kind == PLB_HEALTH_LIVE) {
        /* Another mod_metrics instance beats the same loop as we do; its
         * interval may be longer than our threshold, so judge only ours. */
        if (mm_is_sibling_loop_check(e->self, info))
            return;
        int64_t age = e->now_ms - info->last_beat_ms;
        if (age <= e->threshold_ms) {
            check_line(e, info, 1, NULL);
            return;
        }
        char why[128];
        snprintf(why, sizeof(why), "no heartbeat for %.1fs (threshold %.1fs)",
                 (double)age / 1000.0, (double)e->threshold_ms / 1000.0);
        e->failed = 1;
        check_line(e, info, 0, why);
        return;
    }
    if (info->ok) {
        check_line(e, info, 1, NULL);
        return;
    }
    e->failed = 1;
    check_line(e, info, 0, info->reason && *info->reason ? info->reason : "not ready");
}

int
mm_health_eval(const struct plb_host *host, plb_ctx *ctx, const void *self,
               enum plb_health_kind kind, int64_t threshold_ms, int verbose, struct mm_buf *out)
{
    struct eval e = {
        .self = self,
        .kind = kind,
        .now_ms = host->now_ms(ctx),
        .threshold_ms = threshold_ms,
        .verbose = verbose,
        .out = out,
    };
    host->health_foreach(ctx, visit, &e);
    const char *name = kind == PLB_HEALTH_LIVE ? "healthz" : "readyz";
    if (e.failed)
        mm_buf_printf(out, "%s check failed\n", name);
    else if (verbose)
        mm_buf_printf(out, "%s check passed\n", name);
    else
        mm_buf_printf(out, "ok\n");
    return !e.failed;
}

int
mm_query_verbose(const char *query)
{
    const char *p = query ? query : "";
    while (*p) {
        size_t len = strcspn(p, "&;");
        if (len >= 7 && strncmp(p, "verbose", 7) == 0) {
            const char *v = p + 7;
            size_t vl = len - 7;
            if (vl == 0)
                return 1;
            if (*v == '=') {
                v++;
                vl--;
                /* "verbose", "verbose=", "verbose=1|true|..." ask for it;
                 * "verbose=0" and "verbose=false" do not. */
                if (!((vl == 1 && *v == '0') || (vl == 5 && strncmp(v, "false", 5) == 0)))
                    return 1;
            }
        }
        p += len;
        if (*p)
            p++;
    }
    return 0;
}
