/*
 * reload: SIGHUP re-reads the config file. A file with errors changes
 * nothing (each error is logged as FILE:LINE: setting: message). A valid
 * one is applied by restarting only the instances whose module, gate or
 * settings changed, stopping those that are gone and starting new ones;
 * every other instance runs on untouched (a proxy whose endpoint source
 * restarts keeps its connections and gets the new endpoint set through its
 * subscription). The top-level log_level and log_format apply at once
 * unless the command line set them, and shutdown_grace from then on.
 *
 * An instance that restarts keeps its plb_ctx (so the subscriptions and
 * gates of others that name it stay valid): its state is stopped (within
 * shutdown_grace) and destroyed, then created and started again with the
 * new settings.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "instance.h"
#include "links.h"
#include "log.h"
#include "notify.h"
#include "reactor.h"
#include "reload.h"
#include "settings.h"

struct core_reload {
    struct core *c;
    struct core nc; /* the new file, parsed (its instances) */
    plb_ctx **stop; /* old instances to stop, in stop order */
    size_t nstop, next;
    int *gone;       /* stop[i] is removed (else it restarts) */
    plb_ctx **final; /* the instance list once applied */
    size_t nfinal;
    int *fresh;          /* final[i] needs create + start */
    struct event *timer; /* grace of the instance stopping */
    int again;           /* SIGHUP during the reload: once more */
};

static int
str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int
strv_eq(const struct plb_strv *a, const struct plb_strv *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]) != 0)
            return 0;
    return 1;
}

/* Do two configs of one settings table hold the same values? */
static int
settings_eq(const struct plb_setting *t, const void *a, const void *b)
{
    for (const struct plb_setting *s = t; s && s->name; s++) {
        const char *pa = (const char *)a + s->offset, *pb = (const char *)b + s->offset;
        int eq = 1;
        switch (s->type) {
        case PLB_SET_BOOL:
        case PLB_SET_ENUM:
            eq = *(const int *)pa == *(const int *)pb;
            break;
        case PLB_SET_INT:
        case PLB_SET_DURATION:
            eq = *(const int64_t *)pa == *(const int64_t *)pb;
            break;
        case PLB_SET_DOUBLE:
            eq = *(const double *)pa == *(const double *)pb;
            break;
        case PLB_SET_STRING:
        case PLB_SET_PATH:
            eq = str_eq(*(char *const *)pa, *(char *const *)pb);
            break;
        case PLB_SET_STRING_LIST:
        case PLB_SET_INSTANCES:
            eq = strv_eq((const struct plb_strv *)pa, (const struct plb_strv *)pb);
            break;
        }
        if (!eq)
            return 0;
    }
    return 1;
}

static plb_ctx *
find_in(plb_ctx **v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i]->name, name) == 0)
            return v[i];
    return NULL;
}

static void
reload_free(struct core_reload *r)
{
    if (!r)
        return;
    /* nc's settings and the instances of it that were not taken over
     * (its modules are the running config's: nc.modules is NULL) */
    core_config_free(&r->nc);
    core_free(r->stop);
    core_free(r->gone);
    core_free(r->final);
    core_free(r->fresh);
    core_event_clear(&r->timer);
    core_free(r);
}

static void stop_next(struct core_reload *r);
static void swap_configs(struct core_reload *r);

/* Create and start the fresh instances, in the new order, and finish. */
static void
apply_finish(struct core_reload *r)
{
    struct core *c = r->c;
    size_t restarted = 0, added = 0;

    core_free(c->inst);
    c->inst = r->final;
    c->ninst = r->nfinal;
    r->final = NULL;
    for (size_t i = 0; i < c->ninst; i++) {
        plb_ctx *x = c->inst[i];
        x->gate = x->gate_name ? core_instance_find(c, x->gate_name) : NULL;
    }
    for (size_t i = 0; i < c->ninst; i++) {
        plb_ctx *x = c->inst[i];
        if (!r->fresh[i])
            continue;
        if (r->fresh[i] == 2)
            added++;
        else
            restarted++;
        if (core_instance_create(x, "reload: create failed; the instance is not running") < 0)
            continue;
        core_instance_start(x, "reload: start failed; the instance is not running",
                            r->fresh[i] == 2 ? "started (added by the reload)"
                                             : "restarted with its new settings");
    }
    size_t removed = 0;
    for (size_t i = 0; i < r->nstop; i++)
        removed += r->gone[i];
    CORE_INFO("reload of %s applied: %zu restarted, %zu added, %zu removed, %zu unchanged",
              c->config_file, restarted, added, removed, c->ninst - restarted - added);
    int again = r->again;
    c->reload = NULL;
    reload_free(r);
    core_notify("READY=1");
    if (again && !c->stopping)
        core_reload(c);
}

/* Every instance to stop has stopped: destroy them, free the removed. */
static void
apply_stopped(struct core_reload *r)
{
    for (size_t i = 0; i < r->nstop; i++) {
        plb_ctx *x = r->stop[i];
        core_instance_destroy(x);
        x->gated_active = 0;
        x->gate_open = 0;
        if (r->gone[i]) {
            core_log(PLB_LOG_INFO, x->name, x->cm->mod->name, "removed by the reload");
            core_ctx_free_parsed(x);
            r->stop[i] = NULL;
        }
    }
    swap_configs(r);
    apply_finish(r);
}

/* The completion of one instance's stop (arg: the instance). */
static void
one_stopped(void *arg)
{
    plb_ctx *x = arg;
    struct core_reload *r = x->core->reload;
    x->stop_done = NULL; /* fired */
    if (!r || x->st != CORE_INST_STOPPING || r->next == 0 || r->stop[r->next - 1] != x)
        return; /* the grace ran out earlier; we moved on */
    x->st = CORE_INST_STOPPED;
    evtimer_del(r->timer);
    stop_next(r);
}

static void
grace_expired(evutil_socket_t fd, short what, void *arg)
{
    struct core_reload *r = arg;
    plb_ctx *x = r->stop[r->next - 1];
    (void)fd;
    (void)what;
    core_log(PLB_LOG_WARN, x->name, x->cm->mod->name,
             "reload: did not stop within shutdown_grace (%lld ms); going on",
             (long long)r->c->cfg.shutdown_grace_ms);
    x->st = CORE_INST_STOPPED; /* one_stopped, if it fires, finds this */
    stop_next(r);
}

static void
stop_next(struct core_reload *r)
{
    while (r->next < r->nstop) {
        plb_ctx *x = r->stop[r->next++];
        if (x->st != CORE_INST_STARTED || !x->cm->mod->stop) {
            x->st = CORE_INST_STOPPED;
            continue;
        }
        core_instance_stop_hook(x, one_stopped, r->timer, "stopping for the reload");
        return; /* one_stopped or grace_expired goes on */
    }
    apply_stopped(r);
}

/* Log every error of a refused reload. */
static void
log_errors(const struct core_errors *err, const char *file)
{
    for (size_t i = 0; i < err->nlines; i++)
        CORE_ERR("reload: %s", err->lines[i]);
    CORE_ERR("reload: %s has %zu error(s); the running configuration stays", file, err->n);
}

/* Decide what restarts; fills r->stop, r->final and r->fresh. 0 or
 * -ENOMEM. */
static int
plan(struct core_reload *r)
{
    struct core *c = r->c;
    size_t nold = c->ninst, nnew = r->nc.ninst;

    r->stop = core_calloc(nold ? nold : 1, sizeof(*r->stop));
    r->gone = core_calloc(nold ? nold : 1, sizeof(*r->gone));
    r->final = core_calloc(nnew ? nnew : 1, sizeof(*r->final));
    r->fresh = core_calloc(nnew ? nnew : 1, sizeof(*r->fresh));
    if (!r->stop || !r->gone || !r->final || !r->fresh)
        return -ENOMEM;
    for (size_t i = 0; i < nnew; i++) {
        plb_ctx *n = r->nc.inst[i];
        plb_ctx *o = core_instance_find(c, n->name);
        if (!o) {
            n->core = c; /* added */
            r->final[i] = n;
            r->fresh[i] = 2;
            r->nc.inst[i] = NULL;
            continue;
        }
        r->final[i] = o;
        if (o->cm->mod == n->cm->mod && str_eq(o->gate_name, n->gate_name) &&
            settings_eq(o->cm->mod->settings, o->config, n->config))
            continue; /* unchanged: keeps running */
        r->fresh[i] = 1;
    }
    r->nfinal = nnew;
    /* Stop in reverse config order: every old instance that restarts or
     * goes. */
    for (size_t k = nold; k > 0; k--) {
        plb_ctx *o = c->inst[k - 1];
        plb_ctx *n = find_in(r->final, r->nfinal, o->name);
        size_t j;
        if (n != o) {
            r->gone[r->nstop] = 1;
            r->stop[r->nstop++] = o;
            continue;
        }
        for (j = 0; j < nnew && r->final[j] != o; j++)
            ;
        if (r->fresh[j])
            r->stop[r->nstop++] = o;
    }
    return 0;
}

/* The instances that restart take their new module, config and gate from
 * the parsed file, once their old state is destroyed (a module may read
 * its config until then). The old ones go to the parsed instance, freed
 * with the reload. */
static void
swap_configs(struct core_reload *r)
{
    for (size_t i = 0; i < r->nfinal; i++) {
        if (r->fresh[i] != 1)
            continue;
        plb_ctx *o = r->final[i];
        plb_ctx *n = NULL;
        for (size_t j = 0; j < r->nc.ninst && !n; j++)
            if (r->nc.inst[j] && strcmp(r->nc.inst[j]->name, o->name) == 0)
                n = r->nc.inst[j];
        if (!n)
            continue;
        void *cfg = o->config;
        char *gate = o->gate_name;
        struct core_module *cm = o->cm;
        o->config = n->config;
        o->gate_name = n->gate_name;
        o->cm = n->cm;
        n->config = cfg;
        n->gate_name = gate;
        n->cm = cm;
    }
}

void
core_reload(struct core *c)
{
    struct core_errors err = {0};
    struct core_reload *r;

    if (c->stopping)
        return;
    if (c->reload) {
        CORE_INFO("SIGHUP during a reload: reloading once more when it is done");
        c->reload->again = 1;
        return;
    }
    CORE_INFO("SIGHUP: reloading %s", c->config_file);
    /* systemd: reloading now, READY=1 once applied or refused */
    char note[96];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(note, sizeof(note), "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
    core_notify(note);
    r = core_calloc(1, sizeof(*r));
    if (!r) {
        CORE_ERR("reload: out of memory; the running configuration stays");
        core_notify("READY=1");
        return;
    }
    r->c = c;
    r->nc.host = c->host;
    r->nc.base = c->base;
    r->nc.modules = c->modules; /* loaded module files are shared */
    int n = core_config_load(&r->nc, c->config_file, &err);
    /* Files loaded now stay loaded with the others (one entry per
     * distinct file, so reloads do not grow the list). */
    c->modules = r->nc.modules;
    r->nc.modules = NULL;
    if (n > 0) {
        log_errors(&err, c->config_file);
        goto refuse;
    }
    if (!(r->timer = evtimer_new(c->base, grace_expired, r)) || plan(r) < 0) {
        CORE_ERR("reload: out of memory; the running configuration stays");
        goto refuse;
    }
    core_log_setup(c->cli_level >= 0 ? (enum plb_log_level)c->cli_level
                                     : (enum plb_log_level)r->nc.cfg.log_level,
                   c->cli_format >= 0 ? (enum core_log_format)c->cli_format
                                      : (enum core_log_format)r->nc.cfg.log_format,
                   stderr);
    c->cfg.log_level = r->nc.cfg.log_level;
    c->cfg.log_format = r->nc.cfg.log_format;
    c->cfg.shutdown_grace_ms = r->nc.cfg.shutdown_grace_ms;
    /* The worker loops run for the daemon's life. */
    if (r->nc.cfg.threads != c->cfg.threads)
        CORE_WARN("reload: threads = %lld takes effect at the next start (running with %lld)",
                  (long long)r->nc.cfg.threads, (long long)c->cfg.threads);
    c->reload = r;
    core_errors_clear(&err);
    stop_next(r);
    return;
refuse:
    core_errors_clear(&err);
    reload_free(r);
    core_notify("READY=1");
}

void
core_reload_free(struct core *c)
{
    if (c->reload) {
        reload_free(c->reload);
        c->reload = NULL;
    }
}
