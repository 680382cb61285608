/*
 * health: the verdicts of /healthz (/livez) and /readyz, from the checks
 * every instance registered with the host, and their kube-apiserver style
 * text: one check alone (/readyz/<instance>/<check>), ?exclude=<check>.
 */
#include <stdio.h>
#include <string.h>

#include "mm.h"

#define MAX_EXCLUDES 16

struct eval {
    const struct mm_health_filter *filter;
    enum plb_health_kind kind;
    int64_t now_ms;
    int64_t threshold_ms;
    int verbose;
    int failed;
    const char *only; /* one check, "instance/check", or NULL */
    int found;        /* only: it exists */
    char why[256];    /* only: why it failed */
    char excl[MAX_EXCLUDES][128];
    int excl_used[MAX_EXCLUDES];
    size_t nexcl;
    struct mm_buf *out;
};

/* Is info the check "instance/check" named by name? */
static int
is_named(const struct plb_health_info *info, const char *name)
{
    size_t il = strlen(info->instance);
    return strncmp(name, info->instance, il) == 0 && name[il] == '/' &&
           strcmp(name + il + 1, info->check) == 0;
}

static int
is_excluded(struct eval *e, const struct plb_health_info *info)
{
    for (size_t i = 0; i < e->nexcl; i++) {
        if (is_named(info, e->excl[i])) {
            e->excl_used[i] = 1;
            return 1;
        }
    }
    return 0;
}

static void
check_line(struct eval *e, const struct plb_health_info *info, int ok, const char *why)
{
    if (e->only) {
        if (!ok)
            snprintf(e->why, sizeof(e->why), "%s", why);
        return;
    }
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
    if (e->only) {
        if (!is_named(info, e->only))
            return;
        e->found = 1;
    } else if (is_excluded(e, info)) {
        /* kube-apiserver lists an excluded check as passing */
        if (e->verbose) {
            mm_buf_printf(e->out, "[+]");
            mm_buf_put_line_safe(e->out, info->instance);
            mm_buf_printf(e->out, "/");
            mm_buf_put_line_safe(e->out, info->check);
            mm_buf_printf(e->out, " excluded: ok\n");
        }
        return;
    }
    if (info->kind == PLB_HEALTH_LIVE) {
        /* Another mod_metrics instance beats the same loop as we do; its
         * interval may be longer than our threshold, so judge only ours. */
        if (e->filter && e->filter->ignore && e->filter->ignore(e->filter->arg, info))
            return;
        int64_t age = e->now_ms - info->last_beat_ms;
        if (age <= e->threshold_ms) {
            check_line(e, info, 1, NULL);
            return;
        }
        char why[128];
        snprintf(why, sizeof(why), "no heartbeat for %.1fs (threshold %.1fs)", (double)age / 1000.0,
                 (double)e->threshold_ms / 1000.0);
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

static int
hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode the query value v (vl bytes) into out; 0, or -1 when it
 * does not fit or has a bad escape. */
static int
query_value(const char *v, size_t vl, char *out, size_t outlen)
{
    size_t n = 0;
    for (size_t i = 0; i < vl; i++) {
        char c = v[i];
        if (c == '%') {
            if (i + 2 >= vl)
                return -1;
            int hi = hexval(v[i + 1]);
            int lo = hexval(v[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (n + 1 >= outlen)
            return -1;
        out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

/* Collect the exclude=<check> parameters of query into e. */
static void
parse_excludes(struct eval *e, const char *query)
{
    const char *p = query ? query : "";
    while (*p) {
        size_t len = strcspn(p, "&;");
        if (len > 8 && strncmp(p, "exclude=", 8) == 0 && e->nexcl < MAX_EXCLUDES &&
            query_value(p + 8, len - 8, e->excl[e->nexcl], sizeof(e->excl[0])) == 0)
            e->nexcl++;
        p += len;
        if (*p)
            p++;
    }
}

/* Visit every registered check into e (its only, verbose and excludes set
 * by the caller), through filter (borrowed), as kind stands now with
 * threshold_ms. */
static void
evaluate(struct eval *e, const struct plb_host *host, plb_ctx *ctx,
         const struct mm_health_filter *filter, enum plb_health_kind kind, int64_t threshold_ms,
         struct mm_buf *out)
{
    e->filter = filter;
    e->kind = kind;
    e->now_ms = host->loop->now_ms(ctx);
    e->threshold_ms = threshold_ms;
    e->out = out;
    host->links->health_foreach(ctx, visit, e);
}

int
mm_health_eval(const struct plb_host *host, plb_ctx *ctx, const struct mm_health_filter *filter,
               enum plb_health_kind kind, int64_t threshold_ms, const char *query,
               struct mm_buf *out)
{
    struct eval e = {.verbose = mm_query_verbose(query)};
    parse_excludes(&e, query);
    evaluate(&e, host, ctx, filter, kind, threshold_ms, out);
    const char *name = kind == PLB_HEALTH_LIVE ? "healthz" : "readyz";
    for (size_t i = 0; i < e.nexcl; i++) {
        if (!e.excl_used[i]) {
            mm_buf_printf(out, "warning: some health checks cannot be excluded: no matches for ");
            mm_buf_put_line_safe(out, e.excl[i]);
            mm_buf_printf(out, "\n");
        }
    }
    if (e.failed)
        mm_buf_printf(out, "%s check failed\n", name);
    else if (e.verbose)
        mm_buf_printf(out, "%s check passed\n", name);
    else
        mm_buf_printf(out, "ok\n");
    return !e.failed;
}

int
mm_health_eval_one(const struct plb_host *host, plb_ctx *ctx, const struct mm_health_filter *filter,
                   enum plb_health_kind kind, int64_t threshold_ms, const char *check,
                   struct mm_buf *out)
{
    struct eval e = {.only = check};
    evaluate(&e, host, ctx, filter, kind, threshold_ms, out);
    if (!e.found)
        return -1;
    if (e.failed) {
        mm_buf_printf(out, "internal server error: ");
        mm_buf_put_line_safe(out, e.why);
        mm_buf_printf(out, "\n");
        return 0;
    }
    mm_buf_printf(out, "ok\n");
    return 1;
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
