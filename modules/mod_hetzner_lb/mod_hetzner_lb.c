/*
 * mod_hetzner_lb.c: the module descriptor and lifecycle of mod_hetzner_lb.
 *
 * create   reads the settings (the daemon parsed and checked them)
 * start    creates the Hetzner API client and the resync timer
 * resync   every resync_interval, while the gate is open: ONE paginated
 *          GET /load_balancers?label_selector=robotlb/service-uid, the
 *          steady-state check that serves every Service; the result is kept
 *          as an index by robotlb/service-uid. The interval stretches when
 *          the pages would take more than resync_budget_percent of the
 *          API's hourly RateLimit-Limit (hz_resync_budget)
 * gate     gate_open starts the write loop at once (an immediate resync);
 *          gate_close cancels every queued, running and waiting request
 * stop     cancels timers and requests
 *
 * kube     (hz_kube.c) informers for Services, Nodes and EndpointSlices on
 *          every replica; the Service sync and reconcile (targets, create,
 *          adopt, update, status, deletes, warnings, finalizer removal)
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_api.h"
#include "hz_kube.h"

struct hz_mod {
    const struct plb_host *host;
    plb_ctx *ctx;
    const struct hz_config *cfg; /* &eff */
    struct hz_config eff;        /* the instance's settings under hccm's environment
                                    variables (strings borrowed from the daemon's
                                    config and the environment) */
    struct hz_api *api;
    plb_timer *resync;
    int started;
    int listing;                 /* a resync list is in flight */
    int64_t list_started_ms;     /* when it was sent */
    struct hz_lbs *pending;      /* its balancers so far, page by page (owned) */
    size_t list_items, list_dup; /* its items so far; UIDs met twice */
    struct hz_kside ks;          /* the Kubernetes side; ks.by_uid is the index
                                    robotlb/service-uid -> balancer of the last
                                    resync */
    uint64_t resyncs;
    int64_t next_resync_ms;  /* monotonic time of the next resync (approx.:
                                the timer has 10% jitter) */
    struct hz_budget budget; /* the interval in use and why */
    /* metrics */
    plb_metric *m_balancers, *m_requests, *m_dry, *m_remaining, *m_resyncs, *m_interval;
    struct hz_api_stats last; /* counters already added */
};

/* Every series carries the instance's name as `reconciler` (not
 * `instance`, the label Prometheus gives every scraped target). */
static const char *const l_inst[] = {"reconciler", NULL};
static const char *const l_route[] = {"reconciler", "route", "code", NULL};

/* clang-format off */
static const struct {
    size_t off; /* of the plb_metric pointer in struct hz_mod */
    enum plb_metric_type type;
    const char *name, *help;
    const char *const *labels;
} metric_defs[] = {
    {offsetof(struct hz_mod, m_balancers), PLB_METRIC_GAUGE, "prismlb_hetzner_lb_balancers",
     "Balancers labelled robotlb/service-uid seen at the last resync", l_inst},
    {offsetof(struct hz_mod, m_resyncs), PLB_METRIC_COUNTER, "prismlb_hetzner_lb_resyncs_total",
     "Completed resync lists", l_inst},
    {offsetof(struct hz_mod, m_interval), PLB_METRIC_GAUGE,
     "prismlb_hetzner_resync_interval_seconds",
     "Seconds between resync lists: resync_interval, or longer when its pages would take more "
     "than resync_budget_percent of the hourly RateLimit-Limit", l_inst},
    {offsetof(struct hz_mod, m_requests), PLB_METRIC_COUNTER, "prismlb_hetzner_requests_total",
     "Answers of the Hetzner Cloud API by route and HTTP status (code \"error\": none came)",
     l_route},
    {offsetof(struct hz_mod, m_remaining), PLB_METRIC_GAUGE, "prismlb_hetzner_rate_limit_remaining",
     "RateLimit-Remaining of the last Hetzner answer", l_inst},
    {offsetof(struct hz_mod, m_dry), PLB_METRIC_COUNTER, "prismlb_hetzner_dry_run_writes_total",
     "Hetzner writes only logged (dry_run)", l_inst},
    {offsetof(struct hz_mod, ks.m_syncs), PLB_METRIC_COUNTER,
     "prismlb_hetzner_lb_service_syncs_total",
     "Services synced: one per Service an event, recheck or full pass queued", l_inst},
};
/* clang-format on */

static void
metrics_sync(struct hz_mod *m)
{
    struct hz_api_stats s;
    const char *iv[] = {m->host->links->instance_name(m->ctx), NULL};
    if (!m->api)
        return;
    hz_api_get_stats(m->api, &s);
    if (m->m_dry && s.dry_run > m->last.dry_run)
        m->host->metrics->add(m->m_dry, iv, (double)(s.dry_run - m->last.dry_run));
    m->last = s;
}

/* After a resync of items balancers: the interval that keeps its pages
 * within the budget. A change re-arms the timer (the next resync counts
 * from the start of this one's list) and is logged once; the gauge shows
 * the interval in use. */
static void
budget_apply(struct hz_mod *m, size_t items)
{
    const struct hz_config *cfg = m->cfg;
    const char *iv[] = {m->host->links->instance_name(m->ctx), NULL};
    struct hz_api_stats s;
    hz_api_get_stats(m->api, &s);
    struct hz_budget b =
        hz_resync_budget(cfg->resync_interval_ms, items, s.limit, cfg->resync_budget_percent);
    if (b.interval_ms != m->budget.interval_ms) {
        char ri[32], need[32], lim[32], pct[32], conf[32];
        snprintf(ri, sizeof(ri), "%llds", (long long)((b.interval_ms + 999) / 1000));
        snprintf(need, sizeof(need), "%ld", b.pages);
        snprintf(lim, sizeof(lim), "%ld", s.limit);
        snprintf(pct, sizeof(pct), "%lld", (long long)cfg->resync_budget_percent);
        snprintf(conf, sizeof(conf), "%llds", (long long)(cfg->resync_interval_ms / 1000));
        if (b.stretched)
            PLB_WARN(m->host, m->ctx,
                     PLB_KV("resync_interval", ri, "needed", need, "rate_limit", lim,
                            "budget_percent", pct, "configured", conf),
                     "resync: interval stretched: the list pages would take more than the "
                     "budget at resync_interval");
        else
            PLB_INFO(m->host, m->ctx, PLB_KV("resync_interval", ri, "needed", need),
                     "resync: interval back to resync_interval");
        int64_t now = m->host->loop->now_ms(m->ctx);
        int64_t delay = m->list_started_ms + b.interval_ms - now;
        if (delay < 0)
            delay = 0;
        if (m->host->loop->timer_arm(m->resync, delay, b.interval_ms, 0.1) < 0)
            PLB_ERR(m->host, m->ctx, NULL, "resync: cannot re-arm the timer");
        m->next_resync_ms = now + delay;
    }
    m->budget = b;
    if (m->m_interval)
        m->host->metrics->set(m->m_interval, iv, (double)b.interval_ms / 1000.0);
}

/* One page of the resync list (borrowed): its labelled balancers parsed
 * into m->pending, the page's JSON not kept; a UID met twice is counted
 * (the lowest id is the Service's). 0, -EINVAL for an item that is no
 * balancer (lacks id or name), -ENOMEM. */
static int
on_list_page(void *arg, json_t *items)
{
    struct hz_mod *m = arg;
    size_t i;
    json_t *it;
    int rc = 0;
    m->list_items += json_array_size(items);
    json_array_foreach(items, i, it)
    {
        struct hz_lb *lb, *prev;
        if (!json_is_string(json_object_get(json_object_get(it, "labels"), HZ_LABEL_UID)))
            continue;
        if ((rc = hz_lb_parse(it, &lb)) < 0)
            break;
        if ((prev = hz_lbs_get(m->pending, lb->a.uid)))
            m->list_dup++;
        if (!prev || lb->a.id < prev->a.id)
            rc = hz_lbs_put(m->pending, lb);
        hz_lb_unref(lb);
        if (rc < 0)
            break;
    }
    return rc;
}

/* The resync list answered: index the labelled balancers by their UID. */
static void
on_list(void *arg, const struct hz_result *r, json_t *items)
{
    struct hz_mod *m = arg;
    const char *iv[] = {m->host->links->instance_name(m->ctx), NULL};
    size_t dup = m->list_dup, nitems = m->list_items;
    struct hz_lbs *idx = m->pending;

    m->listing = 0;
    m->pending = NULL;
    if (r->err == -ECANCELED) {
        hz_lbs_free(idx);
        return;
    }
    if (!items) {
        /* the last index stays: a balancer left out of it (an item not
         * understood) would look absent, and its Service would get
         * another one */
        PLB_WARN(m->host, m->ctx,
                 PLB_KV("code", r->code ? r->code : "-", "error", r->message ? r->message : "-"),
                 "resync: listing balancers failed: status %d", r->status);
        hz_lbs_free(idx);
        metrics_sync(m);
        return;
    }
    /* Balancers read back after our own writes since the list was sent
     * are newer than the list: keep them. */
    if (m->ks.fresh) {
        const char *uid;
        json_t *t;
        struct hz_lb *old;
        void *tmp;
        json_object_foreach_safe(m->ks.fresh, tmp, uid, t)
        {
            if (json_integer_value(t) < m->list_started_ms) {
                json_object_del(m->ks.fresh, uid);
            } else if ((old = hz_lbs_get(m->ks.by_uid, uid)) && hz_lbs_put(idx, old) < 0) {
                PLB_ERR(m->host, m->ctx, NULL, "resync: out of memory");
                hz_lbs_free(idx);
                return;
            }
        }
    }
    hz_lbs_free(m->ks.by_uid);
    m->ks.by_uid = idx;
    m->resyncs++;
    if (dup)
        PLB_WARN(m->host, m->ctx, NULL, "resync: %zu balancer(s) carry a UID another one has", dup);
    PLB_DEBUG(m->host, m->ctx, NULL, "resync: %zu labelled balancer(s) in %zu item(s)",
              hz_lbs_count(idx), nitems);
    if (m->m_balancers)
        m->host->metrics->set(m->m_balancers, iv, (double)hz_lbs_count(idx));
    if (m->m_resyncs)
        m->host->metrics->add(m->m_resyncs, iv, 1);
    budget_apply(m, nitems);
    metrics_sync(m);
    hz_work_all(&m->ks);
}

static void
resync_fire(plb_timer *t, void *arg)
{
    struct hz_mod *m = arg;
    int rc;
    (void)t;
    m->next_resync_ms = m->host->loop->now_ms(m->ctx) + m->budget.interval_ms;
    metrics_sync(m);
    if (!m->host->links->gate_is_open(m->ctx) || m->listing)
        return;
    if (!(m->pending = hz_lbs_new())) {
        PLB_ERR(m->host, m->ctx, NULL, "resync: out of memory");
        return;
    }
    m->list_items = m->list_dup = 0;
    rc = hz_api_list_pages(m->api, "/load_balancers?label_selector=" HZ_LABEL_UID, "load_balancers",
                           on_list_page, on_list, m);
    if (rc < 0) {
        PLB_ERR(m->host, m->ctx, PLB_KV("error", strerror(-rc)), "resync: cannot list balancers");
        hz_lbs_free(m->pending);
        m->pending = NULL;
        return;
    }
    m->listing = 1;
    m->list_started_ms = m->host->loop->now_ms(m->ctx);
    hz_group_resync(&m->ks); /* the shared groups' balancers, once one is met */
}

static int
hz_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    const struct hz_config *cfg;
    struct hz_mod *m;
    int lvl;

    hz_mem_use(host);
    if (!(m = hz_calloc(sizeof(*m))))
        return -ENOMEM;
    m->host = host;
    m->ctx = ctx;
    m->eff = *(const struct hz_config *)config;
    if (hz_env_apply(&m->eff, hz_getenv, NULL, err, errlen) < 0) {
        hz_free(m);
        return -EINVAL;
    }
    m->cfg = cfg = &m->eff;
    /* robotlb's ROBOTLB_LOG_LEVEL, under the daemon's log_level. */
    lvl = cfg->log_level ? hz_log_level_parse(cfg->log_level) : PLB_LOG_DEBUG;
    host->log->set_level(ctx, lvl == -2 ? PLB_LOG_DEBUG : lvl);
    *state = m;
    return 0;
}

static int
hz_start(void *state, char *err, size_t errlen)
{
    struct hz_mod *m = state;
    const struct hz_config *cfg = m->cfg;
    struct hz_api_cfg ac = {
        .host = m->host,
        .ctx = m->ctx,
        .endpoint = cfg->hcloud_endpoint,
        .token_file = cfg->hcloud_token_file,
        .token = cfg->hcloud_token,
        .dry_run = cfg->dry_run,
    };
    int rc;

    for (size_t i = 0; i < sizeof(metric_defs) / sizeof(metric_defs[0]); i++)
        *(plb_metric **)((char *)m + metric_defs[i].off) =
            m->host->metrics->new_metric(m->ctx, metric_defs[i].type, metric_defs[i].name,
                                         metric_defs[i].help, metric_defs[i].labels, NULL, 0);
    ac.m_requests = m->m_requests;
    ac.m_remaining = m->m_remaining;
    if ((rc = hz_api_new(&ac, &m->api)) < 0)
        return rc;
    if (!(m->resync = m->host->loop->timer_new(m->ctx, resync_fire, m)))
        return -ENOMEM;
    m->budget = hz_resync_budget(cfg->resync_interval_ms, 0, 0, 0);
    if (m->m_interval) {
        const char *iv[] = {m->host->links->instance_name(m->ctx), NULL};
        m->host->metrics->set(m->m_interval, iv, (double)cfg->resync_interval_ms / 1000.0);
    }
    m->ks.host = m->host;
    m->ks.ctx = m->ctx;
    m->ks.cfg = cfg;
    m->ks.api = m->api;
    if ((rc = hz_kube_start(&m->ks)) < 0)
        return rc;
    /* The first check right away, then every resync_interval (10 % jitter
     * so that replicas restarted together do not list in step). */
    if ((rc = m->host->loop->timer_arm(m->resync, 0, cfg->resync_interval_ms, 0.1)) < 0)
        return rc;
    m->started = 1;
    PLB_INFO(m->host, m->ctx, PLB_KV("endpoint", cfg->hcloud_endpoint),
             "hetzner: resync every %lld s%s", (long long)(cfg->resync_interval_ms / 1000),
             cfg->dry_run ? ", dry run: no writes" : "");
    return 0;
}

static void
hz_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct hz_mod *m = state;
    (void)grace_ms;
    if (m->resync)
        m->host->loop->timer_cancel(m->resync);
    metrics_sync(m);
    hz_kube_stop(&m->ks);
    hz_api_cancel_all(m->api);
    m->started = 0;
    m->host->links->done(d);
}

static void
hz_destroy(void *state)
{
    struct hz_mod *m = state;
    if (!m)
        return;
    hz_kube_free(&m->ks);
    hz_api_free(m->api); /* calls no callback: a list in flight leaves pending */
    hz_lbs_free(m->pending);
    m->host->loop->timer_free(m->resync);
    hz_free(m);
}

static void
hz_gate_open(void *state)
{
    struct hz_mod *m = state;
    if (!m->started)
        return;
    PLB_INFO(m->host, m->ctx, NULL, "gate open: writing to Hetzner");
    /* Act at once: the caches are warm on every replica. */
    m->host->loop->timer_arm(m->resync, 0, m->budget.interval_ms, 0.1);
    hz_work_all(&m->ks);
}

static void
hz_gate_close(void *state, plb_done *d)
{
    struct hz_mod *m = state;
    PLB_INFO(m->host, m->ctx, NULL, "gate closed: cancelling Hetzner requests");
    hz_api_cancel_all(m->api);
    hz_kube_cancel_writes(&m->ks);
    m->listing = 0;
    m->host->links->done(d);
}

static plb_obj *
hz_status(void *state)
{
    struct hz_mod *m = state;
    return hz_kube_status(&m->ks, m->host->links->gate_is_open(m->ctx), m->next_resync_ms);
}

PLB_MODULE_EXPORT = {
    PLB_MODULE("hetzner_lb", "0.1",
               "Hetzner Cloud load balancers for Services of type LoadBalancer (robotlb)"),
    PLB_MODULE_CONFIG(hz_settings_table, struct hz_config, hz_check),
    PLB_MODULE_LIFECYCLE(hz_create, hz_start, hz_stop, hz_destroy),
    .gate_open = hz_gate_open,
    .gate_close = hz_gate_close,
    .status = hz_status,
};
