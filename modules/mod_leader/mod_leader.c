/*
 * mod_leader: Lease-based leader election that gates write loops, as
 * client-go's leaderelection with a LeaseLock does (rules in le.h).
 *
 * The instance is a gate (PLB_ROLE_GATE): instances configured with
 * `gate = "<this instance>"` start their write loop when this replica wins
 * the Lease and stop it the moment it is lost; their watches and caches
 * keep running on every replica. After a loss the election goes on: a new
 * term starts once every gated instance completed its stop.
 *
 * This file is the driver of the pure machine (le_machine.c): one timer,
 * one Kubernetes client with at most one call in flight, the gate, the
 * metrics
 *
 *   prismlb_leader_is_leader{lease}                    1 while leading
 *   prismlb_leader_transitions_total{lease}            holder changes seen
 *   prismlb_leader_last_renew_timestamp_seconds{lease} last successful write
 *
 * a log line on every change of holder, and an Event on the Lease when this
 * replica becomes or stops being the leader (reason LeaderElection, as
 * client-go's LeaseLock records them).
 *
 * Built against <prismlb/module.h> only.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <prismlb/module_util.h>

#include "ld.h"

struct ld {
    /* First: the le_ops argument is the struct ld, which plb_clock_now_ms,
     * plb_clock_wall_ms and plb_clock_random read as its clock. */
    struct plb_clock clock;
    const struct plb_host *host; /* borrowed for the instance's life */
    plb_ctx *ctx;
    const struct ld_config *cfg; /* borrowed, the daemon's */
    char identity[LD_IDENTITY_MAX];
    char *ns;          /* the Lease's namespace (new) */
    char *lease_label; /* "namespace/name" (new) */
    struct le m;
    plb_kube *kube;
    plb_kube_op *op;  /* the call in flight, or NULL */
    int op_is_get;    /* it is a GET (else a write) */
    plb_obj *last;    /* the last Lease object received (a reference) */
    plb_timer *timer; /* the machine's wake-up */
    plb_metric *m_leader, *m_transitions, *m_renew;
    plb_done *stop_done;
};
_Static_assert(offsetof(struct ld, clock) == 0, "the clock is the le_ops argument");

/* ------------------------------------------------------------------ */
/* Lease objects <-> records                                            */

static void
copy_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

/* Is v absent (NULL or JSON null) or of type t? */
static int
absent_or(const struct plb_host *h, const plb_obj *v, enum plb_obj_type t)
{
    return !v || h->obj->type(v) == PLB_OBJ_NULL || h->obj->type(v) == t;
}

/* The record in a Lease object. 0; -EINVAL when spec is not an object or a
 * field has the wrong type (a string where the Lease API has a string, an
 * integer where it has an integer); -E2BIG when a field does not fit. */
static int
record_from_obj(const struct plb_host *h, const plb_obj *obj, struct le_record *r)
{
    const plb_obj *spec = h->obj->get(obj, "spec", NULL);
    const plb_obj *vh = h->obj->get(spec, "holderIdentity", NULL);
    const plb_obj *va = h->obj->get(spec, "acquireTime", NULL);
    const plb_obj *vr = h->obj->get(spec, "renewTime", NULL);
    const plb_obj *vs = h->obj->get(spec, "strategy", NULL);
    const plb_obj *vp = h->obj->get(spec, "preferredHolder", NULL);
    const plb_obj *vd = h->obj->get(spec, "leaseDurationSeconds", NULL);
    const plb_obj *vt = h->obj->get(spec, "leaseTransitions", NULL);
    const char *holder = h->obj->str(vh);
    const char *acq = h->obj->str(va);
    const char *ren = h->obj->str(vr);
    const char *strategy = h->obj->str(vs);
    const char *pref = h->obj->str(vp);

    memset(r, 0, sizeof(*r));
    if (!absent_or(h, spec, PLB_OBJ_OBJECT) || !absent_or(h, vh, PLB_OBJ_STRING) ||
        !absent_or(h, va, PLB_OBJ_STRING) || !absent_or(h, vr, PLB_OBJ_STRING) ||
        !absent_or(h, vs, PLB_OBJ_STRING) || !absent_or(h, vp, PLB_OBJ_STRING) ||
        !absent_or(h, vd, PLB_OBJ_INT) || !absent_or(h, vt, PLB_OBJ_INT))
        return -EINVAL;
    if ((holder && strlen(holder) >= sizeof(r->holder)) ||
        (acq && strlen(acq) >= sizeof(r->acquire_time)) ||
        (ren && strlen(ren) >= sizeof(r->renew_time)) ||
        (strategy && strlen(strategy) >= sizeof(r->strategy)) ||
        (pref && strlen(pref) >= sizeof(r->preferred)))
        return -E2BIG;
    copy_str(r->holder, sizeof(r->holder), holder);
    copy_str(r->acquire_time, sizeof(r->acquire_time), acq);
    copy_str(r->renew_time, sizeof(r->renew_time), ren);
    copy_str(r->strategy, sizeof(r->strategy), strategy);
    copy_str(r->preferred, sizeof(r->preferred), pref);
    r->duration_s = h->obj->int64(vd, 0);
    r->transitions = h->obj->int64(vt, 0);
    return 0;
}

/* Set a string member (steals nothing; 0 or -errno). */
static int
set_str(const struct plb_host *h, plb_obj *o, const char *key, const char *value)
{
    plb_obj *v = h->obj->new_str(value);
    if (!v)
        return -ENOMEM;
    return h->obj->set(o, v, key, NULL);
}

static int
set_int(const struct plb_host *h, plb_obj *o, const char *key, int64_t value)
{
    plb_obj *v = h->obj->new_int(value);
    if (!v)
        return -ENOMEM;
    return h->obj->set(o, v, key, NULL);
}

/* A new LeaseSpec object for r, as LeaderElectionRecordToLeaseSpec builds
 * it: every field written, times only when set. NULL on no memory. */
static plb_obj *
spec_from_record(const struct plb_host *h, const struct le_record *r)
{
    plb_obj *spec = h->obj->new_object();
    if (!spec)
        return NULL;
    if (set_str(h, spec, "holderIdentity", r->holder) < 0 ||
        set_int(h, spec, "leaseDurationSeconds", r->duration_s) < 0 ||
        (r->acquire_time[0] && set_str(h, spec, "acquireTime", r->acquire_time) < 0) ||
        (r->renew_time[0] && set_str(h, spec, "renewTime", r->renew_time) < 0) ||
        set_int(h, spec, "leaseTransitions", r->transitions) < 0 ||
        (r->strategy[0] && set_str(h, spec, "strategy", r->strategy) < 0) ||
        (r->preferred[0] && set_str(h, spec, "preferredHolder", r->preferred) < 0)) {
        h->obj->unref(spec);
        return NULL;
    }
    return spec;
}

/* ------------------------------------------------------------------ */
/* Kubernetes calls                                                     */

static struct plb_kube_ref
lease_ref(const struct ld *ld, int with_name)
{
    struct plb_kube_ref ref = {
        .size = sizeof(struct plb_kube_ref),
        .api_version = "coordination.k8s.io/v1",
        .resource = "leases",
        .ns = ld->ns,
        .name = with_name ? ld->cfg->lease_name : NULL,
    };
    return ref;
}

/* A call completed: keep the object, translate, hand to the machine. */
static void
on_kube_done(plb_kube_op *op, const struct plb_kube_result *res, void *arg)
{
    struct ld *ld = arg;
    const struct plb_host *h = ld->host;
    struct le_record rec;
    int ok2xx = res->status >= 200 && res->status < 300;
    int is_get = ld->op_is_get;
    (void)op;

    ld->op = NULL;
    struct le_result r = {
        .status = res->status,
        .message = res->message && *res->message ? res->message : NULL,
    };
    if (res->error != PLB_HTTP_OK)
        r.status = 0;
    if (r.status && ok2xx && h->obj->type(res->obj) != PLB_OBJ_OBJECT) {
        r.message = "the answer is not a JSON object";
    } else if (r.status && ok2xx) {
        int rc = record_from_obj(h, res->obj, &rec);
        if (rc == 0) {
            r.rec = &rec;
            r.rv = h->obj->str(h->obj->get(res->obj, "metadata", "resourceVersion", NULL));
            plb_obj *keep = h->obj->ref(res->obj);
            if (keep) {
                h->obj->unref(ld->last);
                ld->last = keep;
            } else {
                r.rec = NULL; /* cannot keep it for the next write: fail */
                r.message = "out of memory";
            }
        } else if (rc == -EINVAL) {
            r.message = "the Lease has a field of the wrong type";
        } else {
            r.message = "the Lease has a field too long to handle";
        }
    }
    if (is_get)
        le_get_done(&ld->m, &r);
    else
        le_write_done(&ld->m, &r);
}

static int
op_get(void *arg)
{
    struct ld *ld = arg;
    struct plb_kube_ref ref = lease_ref(ld, 1);
    int err = 0;
    ld->op = ld->host->kube->get(ld->kube, &ref, on_kube_done, ld, &err);
    ld->op_is_get = 1;
    return ld->op ? 0 : (err ? err : -ENOMEM);
}

/* Send obj (steals it) with spec r: a POST of a new Lease (create) or a
 * PUT of the one last read. 0 or -errno. */
static int
send_write(struct ld *ld, plb_obj *obj, const struct le_record *r, int create)
{
    const struct plb_host *h = ld->host;
    struct plb_kube_ref ref = lease_ref(ld, !create);
    int err = 0, rc = -ENOMEM;
    char *body = NULL;
    if (!obj || h->obj->set(obj, spec_from_record(h, r), "spec", NULL) < 0 ||
        !(body = h->obj->dump(obj)))
        goto out;
    if (create)
        ld->op = h->kube->create(ld->kube, &ref, body, on_kube_done, ld, &err);
    else
        ld->op = h->kube->update(ld->kube, &ref, body, on_kube_done, ld, &err);
    ld->op_is_get = 0;
    rc = ld->op ? 0 : (err ? err : -ENOMEM);
out:
    h->mem->free(body);
    h->obj->unref(obj);
    return rc;
}

/* POST a new Lease lease_namespace/lease_name with spec r. */
static int
op_create(void *arg, const struct le_record *r)
{
    struct ld *ld = arg;
    const struct plb_host *h = ld->host;
    plb_obj *obj = h->obj->new_object();
    if (obj &&
        (h->obj->set(obj, h->obj->new_str("coordination.k8s.io/v1"), "apiVersion", NULL) < 0 ||
         h->obj->set(obj, h->obj->new_str("Lease"), "kind", NULL) < 0 ||
         h->obj->set(obj, h->obj->new_str(ld->cfg->lease_name), "metadata", "name", NULL) < 0 ||
         h->obj->set(obj, h->obj->new_str(ld->ns), "metadata", "namespace", NULL) < 0)) {
        h->obj->unref(obj);
        return -ENOMEM;
    }
    return send_write(ld, obj, r, 1);
}

/* PUT the last object received with spec r and resourceVersion rv. */
static int
op_update(void *arg, const struct le_record *r, const char *rv)
{
    struct ld *ld = arg;
    const struct plb_host *h = ld->host;
    if (!ld->last)
        return -EINVAL;
    plb_obj *obj = h->obj->copy(ld->last);
    if (obj && h->obj->set(obj, h->obj->new_str(rv), "metadata", "resourceVersion", NULL) < 0) {
        h->obj->unref(obj);
        return -ENOMEM;
    }
    return send_write(ld, obj, r, 0);
}

static void
op_cancel(void *arg)
{
    struct ld *ld = arg;
    if (ld->op) {
        ld->host->kube->cancel(ld->op);
        ld->op = NULL;
    }
}

/* ------------------------------------------------------------------ */
/* Clock, random, timer, gate                                           */

static void
op_wake_at(void *arg, int64_t at)
{
    struct ld *ld = arg;
    if (!ld->timer)
        return;
    if (at < 0) {
        ld->host->loop->timer_cancel(ld->timer);
        return;
    }
    int64_t delay = at - ld->host->loop->now_ms(ld->ctx);
    int rc = ld->host->loop->timer_arm(ld->timer, delay > 0 ? delay : 0, 0, 0);
    if (rc < 0)
        PLB_ERR(ld->host, ld->ctx, NULL, "cannot arm the election timer: %s", strerror(-rc));
}

static void
on_timer(plb_timer *t, void *arg)
{
    struct ld *ld = arg;
    (void)t;
    le_tick(&ld->m);
}

static void
on_gate_closed(void *arg)
{
    struct ld *ld = arg;
    le_gate_closed(&ld->m);
}

static int
op_gate(void *arg, int open)
{
    struct ld *ld = arg;
    int rc = ld->host->links->gate_set(ld->ctx, open, open ? NULL : on_gate_closed, ld);
    if (rc < 0)
        PLB_ERR(ld->host, ld->ctx, PLB_KV("error", strerror(-rc)), "cannot %s the gate",
                open ? "open" : "close");
    return rc;
}

/* ------------------------------------------------------------------ */
/* Reports: metrics, log lines, Events                                  */

static void
record_event(struct ld *ld, const char *what)
{
    const struct plb_host *h = ld->host;
    char msg[LD_IDENTITY_MAX + 32];
    int err = 0;
    if (!ld->last || !ld->kube)
        return;
    snprintf(msg, sizeof(msg), "%s %s", ld->identity, what);
    struct plb_kube_event ev = {
        .size = sizeof(ev),
        .involved = ld->last,
        .kind = "Lease",
        .api_version = "coordination.k8s.io/v1",
        .type = "Normal",
        .reason = "LeaderElection",
        .message = msg,
    };
    if (!h->kube->event(ld->kube, &ev, NULL, NULL, &err))
        PLB_WARN(ld->host, ld->ctx, PLB_KV("event", msg, "error", strerror(-err)),
                 "cannot record the Event");
}

static void
op_leading(void *arg, int is_leader)
{
    struct ld *ld = arg;
    const char *labels[] = {ld->lease_label, NULL};
    if (ld->m_leader)
        ld->host->metrics->set(ld->m_leader, labels, is_leader ? 1 : 0);
    PLB_INFO(ld->host, ld->ctx, PLB_KV("lease", ld->lease_label), "%s leading (term %llu)",
             is_leader ? "started" : "stopped", (unsigned long long)ld->m.term);
    record_event(ld, is_leader ? "became leader" : "stopped leading");
}

static void
op_holder(void *arg, const char *old_holder, const char *new_holder)
{
    struct ld *ld = arg;
    const char *labels[] = {ld->lease_label, NULL};
    if (ld->m_transitions)
        ld->host->metrics->add(ld->m_transitions, labels, 1);
    PLB_LOG(ld->host, ld->ctx, PLB_LOG_INFO,
            PLB_KV("lease", ld->lease_label, "from", *old_holder ? old_holder : "(none)", "to",
                   *new_holder ? new_holder : "(none)", "self", ld->identity),
            "leader changed");
}

static void
op_renewed(void *arg, int64_t wall_ms)
{
    struct ld *ld = arg;
    const char *labels[] = {ld->lease_label, NULL};
    if (ld->m_renew)
        ld->host->metrics->set(ld->m_renew, labels, (double)wall_ms / 1000.0);
}

/* How each note of the machine is logged: the level, the key its detail
 * goes under (NULL: no detail), the message. */
static const struct ld_note_line {
    enum plb_log_level level;
    const char *key;
    const char *msg;
} note_lines[] = {
    [LE_NOTE_ATTEMPT_FAILED] = {PLB_LOG_WARN, "error", "attempt failed"},
    [LE_NOTE_HELD] = {PLB_LOG_DEBUG, "holder", "the Lease is held and has not yet expired"},
    [LE_NOTE_CREATED] = {PLB_LOG_INFO, NULL, "created the Lease"},
    [LE_NOTE_NS_MISSING] = {PLB_LOG_ERROR, "error",
                            "cannot create the Lease: the namespace does not exist; create it "
                            "or set lease_namespace"},
    [LE_NOTE_CONFLICT] = {PLB_LOG_INFO, NULL, "another replica wrote first (409 Conflict)"},
    [LE_NOTE_LOST_DEADLINE] = {PLB_LOG_WARN, NULL,
                               "lost the Lease: no renew succeeded within renew_deadline"},
    [LE_NOTE_LOST_HOLDER] = {PLB_LOG_WARN, "holder", "lost the Lease: it names another holder"},
    [LE_NOTE_LOST_CONFLICT] = {PLB_LOG_WARN, "error", "lost the Lease: the renew got 409 Conflict"},
    [LE_NOTE_RELEASED] = {PLB_LOG_INFO, NULL, "released the Lease"},
    [LE_NOTE_RELEASE_FAILED] = {PLB_LOG_WARN, "error", "could not release the Lease"},
    [LE_NOTE_RELEASE_SKIPPED] = {PLB_LOG_WARN, NULL,
                                 "not releasing the Lease: the gated instances did not stop "
                                 "within the shutdown grace"},
};

static void
op_note(void *arg, enum le_note what, const char *detail)
{
    struct ld *ld = arg;
    if ((size_t)what >= sizeof(note_lines) / sizeof(note_lines[0]) || !note_lines[what].msg)
        return;
    const struct ld_note_line *l = &note_lines[what];
    const char *d = detail && *detail ? detail : "";
    /* lease, then the detail (none when key is NULL: the list ends there),
     * then the namespace when it is the namespace that is missing */
    const char *const kv[] = {"lease",
                              ld->lease_label,
                              l->key,
                              d,
                              what == LE_NOTE_NS_MISSING ? "namespace" : NULL,
                              ld->ns,
                              NULL};
    PLB_LOG(ld->host, ld->ctx, l->level, kv, "%s", l->msg);
}

static void
op_stopped(void *arg)
{
    struct ld *ld = arg;
    plb_done *d = ld->stop_done;
    ld->stop_done = NULL;
    if (d)
        ld->host->links->done(d);
}

static const struct le_ops ld_ops = {
    .now_ms = plb_clock_now_ms,
    .wall_ms = plb_clock_wall_ms,
    .random = plb_clock_random, /* the acquire jitter */
    .get = op_get,
    .create = op_create,
    .update = op_update,
    .cancel = op_cancel,
    .wake_at = op_wake_at,
    .gate = op_gate,
    .leading = op_leading,
    .holder = op_holder,
    .renewed = op_renewed,
    .note = op_note,
    .stopped = op_stopped,
};

/* ------------------------------------------------------------------ */
/* Lifecycle                                                            */

static int
ld_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    const struct ld_config *cfg = config;
    struct ld *ld;
    if (PLB_STATE_NEW(&ld, host, ctx, cfg) < 0)
        return -ENOMEM;
    if (cfg->identity) {
        copy_str(ld->identity, sizeof(ld->identity), cfg->identity);
    } else {
        char hn[256] = "";
        if (gethostname(hn, sizeof(hn) - 1) < 0 || !hn[0])
            snprintf(hn, sizeof(hn), "localhost");
        snprintf(ld->identity, sizeof(ld->identity), "%.200s_%ld", hn, (long)getpid());
    }
    plb_clock_init(&ld->clock, host, ctx, (uint64_t)getpid());
    *state = ld;
    return 0;
}

/* The client as the settings say: kubeconfig, else the service account
 * when KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG, else
 * ~/.kube/config (the core resolves the last three). */
static int
start_client(struct ld *ld, char *why, size_t whylen)
{
    const struct plb_host *h = ld->host;
    const struct ld_config *c = ld->cfg;
    char err[512] = "", ua[LD_IDENTITY_MAX + 64];
    /* Which replica wrote shows in the API server's audit log. */
    snprintf(ua, sizeof(ua), "prismlb/%s (leader; %s)", h->links->version(), ld->identity);
    struct plb_kube_opts o = {
        .size = sizeof(o),
        .user_agent = ua,
        /* A request outliving renew_deadline is of no use to the election
         * (kube-controller-manager gives its lock client this timeout). */
        .timeout_ms = (uint32_t)c->renew_deadline_ms,
    };
    plb_kube_settings_apply(&c->kube, &o);
    ld->kube = h->kube->client_new(ld->ctx, &o, err, sizeof(err));
    if (!ld->kube) {
        snprintf(why, whylen, "cannot create the Kubernetes client: %s",
                 err[0] ? err : "unknown error");
        return -EINVAL;
    }
    return 0;
}

static int
ld_start(void *state, char *err, size_t errlen)
{
    struct ld *ld = state;
    const struct plb_host *h = ld->host;
    const struct ld_config *c = ld->cfg;
    static const char *const label_names[] = {"lease", NULL};
    int rc = start_client(ld, err, errlen);
    if (rc < 0)
        return rc;
    const char *ns = c->lease_namespace ? c->lease_namespace : h->kube->ns(ld->kube);
    size_t ll = strlen(ns) + strlen(c->lease_name) + 2;
    ld->ns = h->mem->strdup(ns);
    ld->lease_label = h->mem->alloc(ll);
    ld->timer = h->loop->timer_new(ld->ctx, on_timer, ld);
    if (!ld->ns || !ld->lease_label || !ld->timer)
        return -ENOMEM;
    snprintf(ld->lease_label, ll, "%s/%s", ns, c->lease_name);

    ld->m_leader = h->metrics->new_metric(
        ld->ctx, PLB_METRIC_GAUGE, "prismlb_leader_is_leader",
        "1 while this replica holds the Lease and its gate is open", label_names, NULL, 0);
    ld->m_transitions = h->metrics->new_metric(
        ld->ctx, PLB_METRIC_COUNTER, "prismlb_leader_transitions_total",
        "Changes of the Lease's holder this replica observed", label_names, NULL, 0);
    ld->m_renew = h->metrics->new_metric(
        ld->ctx, PLB_METRIC_GAUGE, "prismlb_leader_last_renew_timestamp_seconds",
        "Wall-clock time of this replica's last successful acquire or "
        "renew of the Lease",
        label_names, NULL, 0);
    if (!ld->m_leader || !ld->m_transitions || !ld->m_renew)
        return -ENOMEM;
    const char *labels[] = {ld->lease_label, NULL};
    if ((rc = h->metrics->set(ld->m_leader, labels, 0)) < 0 ||
        (rc = h->metrics->add(ld->m_transitions, labels, 0)) < 0 ||
        (rc = h->metrics->set(ld->m_renew, labels, 0)) < 0)
        return rc;

    struct le_params p = {
        .identity = ld->identity,
        .lease_duration_ms = c->lease_duration_ms,
        .renew_deadline_ms = c->renew_deadline_ms,
        .retry_period_ms = c->retry_period_ms,
        .release_on_cancel = c->release_on_cancel,
    };
    le_init(&ld->m, &p, &ld_ops, ld);
    PLB_LOG(ld->host, ld->ctx, PLB_LOG_INFO,
            PLB_KV("lease", ld->lease_label, "server", h->kube->server(ld->kube), "identity",
                   ld->identity),
            "campaigning");
    le_start(&ld->m);
    return 0;
}

static void
ld_stop(void *state, int64_t grace_ms, plb_done *d)
{
    struct ld *ld = state;
    ld->stop_done = d;
    if (ld->m.state == LE_INIT) {
        op_stopped(ld);
        return;
    }
    le_stop(&ld->m, grace_ms);
}

static void
ld_destroy(void *state)
{
    struct ld *ld = state;
    if (!ld)
        return;
    const struct plb_host *h = ld->host;
    le_abandon(&ld->m);
    h->loop->timer_free(ld->timer);
    h->kube->client_free(ld->kube); /* cancels the call in flight */
    ld->op = NULL;
    h->obj->unref(ld->last);
    h->mem->free(ld->ns);
    h->mem->free(ld->lease_label);
    h->mem->free(ld);
}

/* `prismlb status`: kind "leader", the Lease, its holder as last read or
 * written ("" when none), whether this replica leads, and its identity. */
static plb_obj *
ld_status(void *state)
{
    struct ld *ld = state;
    const struct plb_host *h = ld->host;
    plb_obj *o = h->obj->new_object();
    const char *holder = ld->m.have_observed ? ld->m.observed.holder : "";
    if (!o)
        return NULL;
    if (h->obj->set(o, h->obj->new_str("leader"), "kind", NULL) < 0 ||
        h->obj->set(o, h->obj->new_str(ld->lease_label ? ld->lease_label : ""), "lease", NULL) <
            0 ||
        h->obj->set(o, h->obj->new_str(holder), "holder", NULL) < 0 ||
        h->obj->set(o, h->obj->new_bool(le_is_leader(&ld->m)), "leading", NULL) < 0 ||
        h->obj->set(o, h->obj->new_str(ld->identity), "identity", NULL) < 0) {
        h->obj->unref(o);
        return NULL;
    }
    return o;
}

PLB_MODULE_EXPORT = {
    PLB_MODULE("leader", "0.1.0",
               "Lease-based leader election (as client-go's) gating write loops"),
    PLB_MODULE_CONFIG(ld_settings, struct ld_config, ld_check),
    .provides = PLB_ROLE_GATE,
    PLB_MODULE_LIFECYCLE(ld_create, ld_start, ld_stop, ld_destroy),
    .status = ld_status,
};
