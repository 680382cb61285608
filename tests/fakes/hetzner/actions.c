/* Asynchronous actions: start, complete on a libevent timer, list, get. */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *
status_name(enum hz_action_status s)
{
    return s == HZ_ACTION_RUNNING ? "running" : s == HZ_ACTION_SUCCESS ? "success" : "error";
}

static void
action_done(evutil_socket_t fd, short what, void *arg)
{
    struct hz_action *a = arg;
    (void)fd, (void)what;
    if (a->cert_id)
        hz_cert_finish(a->fake, a);
    a->status = a->error_code ? HZ_ACTION_ERROR : HZ_ACTION_SUCCESS;
    a->finished = time(NULL);
    event_free(a->timer);
    a->timer = NULL;
    struct hz_lb *lb = a->lb_id ? hz_lb_find(a->fake, a->lb_id) : NULL;
    if (lb && lb->running_action == a->id)
        lb->running_action = 0;
}

/* Start a's completion timer: it ends after the configured duration. */
static int
arm(struct hz_fake *f, struct hz_action *a)
{
    struct timeval tv = {f->cfg.action_ms / 1000, (f->cfg.action_ms % 1000) * 1000};
    return evtimer_add(a->timer, &tv);
}

size_t
hz_actions_held(const struct hz_fake *f)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_actions; i++)
        n += f->actions[i]->held;
    return n;
}

int
hz_actions_release(struct hz_fake *f)
{
    int rc = 0;
    const struct hz_faults *fl = &f->faults;
    for (size_t i = 0; i < f->n_actions; i++) {
        struct hz_action *a = f->actions[i];
        if (!a->held || fl->hold_actions || (a->cert_id && fl->hold_issuance))
            continue;
        if (arm(f, a) < 0) {
            rc = -1;
            continue;
        }
        a->held = 0;
    }
    return rc;
}

static void
action_free(struct hz_action *a)
{
    if (!a)
        return;
    if (a->timer)
        event_free(a->timer);
    free(a->error_code);
    free(a->error_message);
    free(a);
}

/* New action (running, held or armed), appended to f->actions; NULL on
 * ENOMEM. The caller sets its resource. */
static struct hz_action *
action_new(struct hz_fake *f, const char *command, const char *err_code, const char *err_message,
           int hold)
{
    struct hz_action *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    snprintf(a->command, sizeof(a->command), "%s", command);
    a->status = HZ_ACTION_RUNNING;
    a->started = time(NULL);
    a->fake = f;
    if (err_code) {
        a->error_code = strdup(err_code);
        a->error_message = strdup(err_message ? err_message : err_code);
        if (!a->error_code || !a->error_message)
            goto fail;
    }
    if (f->n_actions == f->cap_actions) {
        size_t nc = f->cap_actions ? f->cap_actions * 2 : 64;
        struct hz_action **na = realloc(f->actions, nc * sizeof(*na));
        if (!na)
            goto fail;
        f->actions = na;
        f->cap_actions = nc;
    }
    if (!(a->timer = evtimer_new(f->base, action_done, a)))
        goto fail;
    if (hold)
        a->held = 1; /* the timer is armed by hz_actions_release */
    else if (arm(f, a) < 0)
        goto fail;
    a->id = (int)f->n_actions + 1;
    f->actions[f->n_actions++] = a;
    return a;
fail:
    action_free(a);
    return NULL;
}

struct hz_action *
hz_action_start(struct hz_fake *f, const char *command, int lb_id, const char *err_code,
                const char *err_message)
{
    struct hz_action *a = action_new(f, command, err_code, err_message, f->faults.hold_actions);
    if (!a)
        return NULL;
    a->lb_id = lb_id;
    struct hz_lb *lb = lb_id ? hz_lb_find(f, lb_id) : NULL;
    if (lb)
        lb->running_action = a->id;
    return a;
}

struct hz_action *
hz_action_start_cert(struct hz_fake *f, const char *command, int cert_id)
{
    int hold = f->faults.hold_actions || f->faults.hold_issuance;
    struct hz_action *a = action_new(f, command, NULL, NULL, hold);
    if (!a)
        return NULL;
    a->cert_id = cert_id;
    struct hz_cert *c = hz_cert_find(f, cert_id);
    if (c)
        c->running_action = a->id;
    return a;
}

json_t *
hz_action_json(const struct hz_action *a)
{
    json_t *res = a->lb_id     ? json_pack("[{s:i, s:s}]", "id", a->lb_id, "type", "load_balancer")
                  : a->cert_id ? json_pack("[{s:i, s:s}]", "id", a->cert_id, "type", "certificate")
                               : json_array();
    json_t *err = a->status == HZ_ACTION_ERROR
                      ? json_pack("{s:s, s:s}", "code", a->error_code, "message", a->error_message)
                      : json_null();
    return json_pack("{s:i, s:s, s:s, s:i, s:o, s:o, s:o?, s:o?}", "id", a->id, "command",
                     a->command, "status", status_name(a->status), "progress",
                     a->status == HZ_ACTION_RUNNING ? 0 : 100, "started", hz_time_json(a->started),
                     "finished", hz_time_json(a->finished), "error", err, "resources", res);
}

struct hz_action *
hz_action_find(struct hz_fake *f, long id)
{
    if (id < 1 || (size_t)id > f->n_actions)
        return NULL;
    return f->actions[id - 1];
}

void
hz_actions_get(struct hz_req *r, long id)
{
    struct hz_action *a = hz_action_find(r->f, id);
    if (!a) {
        hz_reply_error(r, 404, "not_found", "action not found", NULL);
        return;
    }
    json_t *resp = json_pack("{s:o?}", "action", hz_action_json(a));
    if (!resp || json_is_null(json_object_get(resp, "action"))) {
        json_decref(resp);
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return;
    }
    hz_reply(r, 200, resp);
}

struct act_sort {
    int field; /* 0 id, 1 command, 2 status, 3 started, 4 finished */
    int desc;
};

static int
cmp_action(const void *x, const void *y, void *arg)
{
    const struct hz_action *a = *(struct hz_action *const *)x;
    const struct hz_action *b = *(struct hz_action *const *)y;
    const struct act_sort *s = arg;
    int c = 0;
    switch (s->field) {
    case 1:
        c = strcmp(a->command, b->command);
        break;
    case 2:
        c = strcmp(status_name(a->status), status_name(b->status));
        break;
    case 3:
        c = (a->started > b->started) - (a->started < b->started);
        break;
    case 4:
        c = (a->finished > b->finished) - (a->finished < b->finished);
        break;
    default:
        break;
    }
    if (!c)
        c = (a->id > b->id) - (a->id < b->id);
    return s->desc ? -c : c;
}

/* 1 if a passes the id/status filters in the query. */
static int
action_selected(struct hz_req *r, const struct hz_action *a, int has_id, int has_status)
{
    struct evkeyval *kv;
    int id_ok = !has_id, status_ok = !has_status;
    TAILQ_FOREACH(kv, &r->query, next)
    {
        if (!strcmp(kv->key, "id") && hz_parse_id(kv->value) == a->id)
            id_ok = 1;
        else if (!strcmp(kv->key, "status") && !strcmp(kv->value, status_name(a->status)))
            status_ok = 1;
    }
    return id_ok && status_ok;
}

/* 1 if a works on a resource of kind (res_id of it, unless 0). */
static int
action_of(const struct hz_action *a, enum hz_res kind, int res_id)
{
    int id = kind == HZ_RES_LB ? a->lb_id : kind == HZ_RES_CERT ? a->cert_id : 1;
    return id && (!res_id || id == res_id);
}

void
hz_actions_list(struct hz_req *r, enum hz_res kind, int res_id)
{
    struct hz_fake *f = r->f;
    struct act_sort spec = {0, 0};
    struct evkeyval *kv;
    int has_id = 0, has_status = 0;
    struct hz_action **sel = NULL;
    json_t *items = NULL, *meta = NULL, *resp;
    size_t n = 0, from, to;
    static const char *fields[] = {"id", "command", "status", "started", "finished"};
    if (r->query_ok) {
        TAILQ_FOREACH(kv, &r->query, next)
        {
            if (!strcmp(kv->key, "id")) {
                if (hz_parse_id(kv->value) < 0) {
                    hz_reply_invalid(r, "id", "must be a positive integer");
                    return;
                }
                has_id = 1;
            } else if (!strcmp(kv->key, "status")) {
                has_status = 1;
            } else if (!strcmp(kv->key, "sort")) {
                const char *colon = strchr(kv->value, ':');
                size_t fl = colon ? (size_t)(colon - kv->value) : strlen(kv->value);
                int found = -1;
                for (int i = 0; i < 5; i++)
                    if (strlen(fields[i]) == fl && !strncmp(fields[i], kv->value, fl))
                        found = i;
                if (found < 0 || (colon && strcmp(colon, ":asc") && strcmp(colon, ":desc"))) {
                    hz_reply_invalid(r, "sort", "unknown sort field or direction");
                    return;
                }
                spec.field = found;
                spec.desc = colon && !strcmp(colon, ":desc");
            }
        }
    }
    if (!(sel = calloc(f->n_actions + 1, sizeof(*sel))))
        goto oom;
    for (size_t i = 0; i < f->n_actions; i++) {
        struct hz_action *a = f->actions[i];
        if (!action_of(a, kind, res_id))
            continue;
        if (r->query_ok && !action_selected(r, a, has_id, has_status))
            continue;
        sel[n++] = a;
    }
    qsort_r(sel, n, sizeof(*sel), cmp_action, &spec);
    if (hz_page(r, n, &from, &to, &meta) < 0)
        goto out;
    if (!(items = json_array()))
        goto oom;
    for (size_t i = from; i < to; i++)
        if (json_array_append_new(items, hz_action_json(sel[i])) < 0)
            goto oom;
    resp = json_pack("{s:o, s:o}", "actions", items, "meta", meta);
    items = meta = NULL;
    if (!resp)
        goto oom;
    hz_reply(r, 200, resp);
    goto out;
oom:
    hz_reply_error(r, 500, "server_error", "out of memory", NULL);
out:
    json_decref(items);
    json_decref(meta);
    free(sel);
}

void
hz_actions_free(struct hz_fake *f)
{
    for (size_t i = 0; i < f->n_actions; i++)
        action_free(f->actions[i]);
    free(f->actions);
    f->actions = NULL;
    f->n_actions = f->cap_actions = 0;
}
