/* /_admin: request log, per-endpoint counts, concurrent-writer detector,
 * fault injection, counter reset and state dump. No authentication. */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_CAP 20000

static void
entry_clear(struct hz_log_entry *e)
{
    free(e->path);
    free(e->route);
    free(e->identity);
    memset(e, 0, sizeof(*e));
}

static void
count_bump(struct hz_count **head, const char *key)
{
    struct hz_count *c;
    for (c = *head; c; c = c->next) {
        if (!strcmp(c->key, key)) {
            c->n++;
            return;
        }
    }
    if (!(c = calloc(1, sizeof(*c))) || !(c->key = strdup(key))) {
        free(c);
        fprintf(stderr, "request counts: out of memory, '%s' not counted\n", key);
        return;
    }
    c->n = 1;
    c->next = *head;
    *head = c;
}

static void
counts_free(struct hz_count **head)
{
    struct hz_count *c = *head;
    while (c) {
        struct hz_count *next = c->next;
        free(c->key);
        free(c);
        c = next;
    }
    *head = NULL;
}

static void
writers_free(struct hz_fake *f)
{
    struct hz_writer *w = f->writers;
    while (w) {
        struct hz_writer *next = w->next;
        free(w->identity);
        free(w->route);
        free(w);
        w = next;
    }
    f->writers = NULL;
}

static void
log_clear(struct hz_fake *f)
{
    for (size_t i = 0; i < f->log_cap; i++)
        entry_clear(&f->log[i]);
    f->log_len = f->log_head = 0;
}

/* Concurrent-writer detector: a write to a balancer by one identity within
 * overlap_ms of a write by another identity is reported. */
static void
detect(struct hz_fake *f, const struct hz_req *r, long long now)
{
    struct hz_writer *w;
    for (w = f->writers; w; w = w->next)
        if (w->lb_id == r->lb_id)
            break;
    if (w && strcmp(w->identity, r->identity) != 0 && now - w->t_ms <= f->cfg.overlap_ms) {
        json_t *o = json_pack("{s:i, s:I, s:{s:s, s:I, s:s}, s:{s:s, s:I, s:s, s:i}}",
                              "load_balancer", r->lb_id, "gap_ms", (json_int_t)(now - w->t_ms),
                              "first", "identity", w->identity, "t_ms", (json_int_t)w->t_ms,
                              "route", w->route, "second", "identity", r->identity, "t_ms",
                              (json_int_t)now, "route", r->route, "status", r->status);
        /* The report is best effort: under ENOMEM the overlap is lost,
         * and the detector goes on with the next write. */
        if (!o || json_array_append_new(f->overlaps, o) < 0)
            fprintf(stderr, "writer detector: out of memory, overlap dropped\n");
    }
    if (!w) {
        if (!(w = calloc(1, sizeof(*w))))
            return;
        w->lb_id = r->lb_id;
        w->next = f->writers;
        f->writers = w;
    }
    char *id = strdup(r->identity);
    char *route = strdup(r->route);
    if (!id || !route) {
        free(id);
        free(route);
        return;
    }
    free(w->identity);
    free(w->route);
    w->identity = id;
    w->route = route;
    w->t_ms = now;
}

void
hz_admin_record(struct hz_fake *f, const struct hz_req *r)
{
    long long now = hz_now_ms() - f->start_ms;
    if (!f->log && !(f->log = calloc(LOG_CAP, sizeof(*f->log))))
        return;
    f->log_cap = LOG_CAP;
    size_t slot = (f->log_head + f->log_len) % f->log_cap;
    if (f->log_len == f->log_cap)
        f->log_head = (f->log_head + 1) % f->log_cap;
    else
        f->log_len++;
    struct hz_log_entry *e = &f->log[slot];
    entry_clear(e);
    e->seq = ++f->log_seq;
    e->t_ms = now;
    e->status = r->status;
    snprintf(e->method, sizeof(e->method), "%s", hz_method_name(r->method));
    e->path = strdup(evhttp_request_get_uri(r->req));
    e->route = strdup(r->route);
    e->identity = strdup(r->identity);
    /* A field lost to ENOMEM is shown as null in /_admin/requests. */
    if (!e->path || !e->route || !e->identity)
        fprintf(stderr, "request log: out of memory, entry %lu incomplete\n", e->seq);
    count_bump(&f->counts, r->route);
    count_bump(&f->id_counts, r->identity);
    if (r->lb_id > 0 && r->method != EVHTTP_REQ_GET)
        detect(f, r, now);
}

static json_t *
counts_json(struct hz_count *head)
{
    json_t *o = json_object();
    for (struct hz_count *c = head; o && c; c = c->next) {
        if (json_object_set_new(o, c->key, json_integer((json_int_t)c->n)) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static void
reply_requests(struct hz_req *r)
{
    struct hz_fake *f = r->f;
    const char *since_s = hz_query(r, "since");
    long since = since_s ? hz_parse_id(since_s) : 0;
    json_t *list = json_array();
    for (size_t i = 0; list && i < f->log_len; i++) {
        struct hz_log_entry *e = &f->log[(f->log_head + i) % f->log_cap];
        if ((long)e->seq <= since)
            continue;
        json_t *o = json_pack("{s:I, s:I, s:s, s:s?, s:s?, s:i, s:s?}", "seq", (json_int_t)e->seq,
                              "t_ms", (json_int_t)e->t_ms, "method", e->method, "path", e->path,
                              "route", e->route, "status", e->status, "identity", e->identity);
        if (json_array_append_new(list, o) < 0) {
            json_decref(list);
            list = NULL;
        }
    }
    json_t *resp =
        json_pack("{s:I, s:o?, s:o?, s:o?}", "total", (json_int_t)f->log_seq, "requests", list,
                  "counts", counts_json(f->counts), "by_identity", counts_json(f->id_counts));
    if (!resp)
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
    else
        hz_reply(r, 200, resp);
}

static json_t *
faults_json(struct hz_fake *f)
{
    const struct hz_faults *fl = &f->faults;
    json_t *fi = fl->fail_domains
                     ? json_pack("{s:O, s:s?, s:s?}", "domains", fl->fail_domains, "code",
                                 fl->issue_fail_code, "message", fl->issue_fail_message)
                     : json_null();
    return json_pack(
        "{s:{s:i, s:i, s:s?}, s:i, s:{s:s?, s:s?, s:i}, s:{s:i, s:s?, s:s?}, s:b, s:I, s:b, s:o?}",
        "fail_requests", "count", fl->fail_count, "status", fl->fail_status, "code", fl->fail_code,
        "latency_ms", fl->latency_ms, "refuse_ip", "ip", fl->refuse_ip, "code", fl->refuse_code,
        "status", fl->refuse_status, "fail_actions", "count", fl->action_fail_count, "code",
        fl->action_fail_code, "message", fl->action_fail_message, "hold_actions", fl->hold_actions,
        "held_actions", (json_int_t)hz_actions_held(f), "hold_issuance", fl->hold_issuance,
        "fail_issuance", fi);
}

static void
faults_clear(struct hz_faults *fl)
{
    free(fl->fail_code);
    free(fl->refuse_ip);
    free(fl->refuse_code);
    free(fl->action_fail_code);
    free(fl->action_fail_message);
    json_decref(fl->fail_domains);
    free(fl->issue_fail_code);
    free(fl->issue_fail_message);
    memset(fl, 0, sizeof(*fl));
}

/* Replace *slot with a copy of s (NULL clears). 0 or -1 on ENOMEM. */
static int
set_str(char **slot, const char *s)
{
    char *c = NULL;
    if (s && !(c = strdup(s)))
        return -1;
    free(*slot);
    *slot = c;
    return 0;
}

static const char *
default_code(int status)
{
    return status == 503 ? "unavailable" : status == 504 ? "timeout" : "server_error";
}

/* Apply the boolean hold key of body b to *flag, releasing what no hold
 * keeps any more when it turns false. 0 or -1 after replying. */
static int
set_hold(struct hz_req *r, json_t *b, const char *key, int *flag)
{
    json_t *v = json_object_get(b, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v)) {
        hz_reply_invalid(r, key, "must be true or false");
        return -1;
    }
    *flag = json_is_true(v);
    if (!*flag && hz_actions_release(r->f) < 0) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return -1;
    }
    return 0;
}

/* Apply "fail_issuance": {"domains": [...], "code", "message"} or null
 * (clears). 0 or -1 after replying. */
static int
fail_issuance_apply(struct hz_req *r, json_t *v)
{
    struct hz_faults *fl = &r->f->faults;
    json_t *domains = json_object_get(v, "domains"), *d, *copy = NULL;
    const char *code = json_string_value(json_object_get(v, "code"));
    const char *msg = json_string_value(json_object_get(v, "message"));
    size_t i;
    int ok = json_is_null(v) || (json_is_object(v) && json_is_array(domains));
    json_array_foreach(domains, i, d) ok = ok && json_is_string(d);
    if (!ok) {
        hz_reply_invalid(r, "fail_issuance", "must be {domains: [strings], code, message} or null");
        return -1;
    }
    if ((!json_is_null(v) && !(copy = json_deep_copy(domains))) ||
        set_str(&fl->issue_fail_code, json_is_null(v) ? NULL : code) < 0 ||
        set_str(&fl->issue_fail_message, json_is_null(v) ? NULL : msg) < 0) {
        json_decref(copy);
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return -1;
    }
    json_decref(fl->fail_domains);
    fl->fail_domains = copy;
    return 0;
}

/* Apply a POST /_admin/faults body. 0 or -1 after replying. */
static int
faults_apply(struct hz_req *r, json_t *b)
{
    struct hz_faults *fl = &r->f->faults;
    json_t *v;
    if (!json_is_object(b)) {
        hz_reply_error(r, 400, "json_error", "body must be a JSON object", NULL);
        return -1;
    }
    if ((v = json_object_get(b, "fail_requests"))) {
        json_int_t count = json_integer_value(json_object_get(v, "count"));
        json_int_t status = json_integer_value(json_object_get(v, "status"));
        const char *code = json_string_value(json_object_get(v, "code"));
        if (!json_is_object(v) || count < 0 || (status && (status < 400 || status > 599))) {
            hz_reply_invalid(r, "fail_requests", "needs count >= 0 and a 4xx/5xx status");
            return -1;
        }
        if (!status)
            status = 503;
        if (set_str(&fl->fail_code, code ? code : default_code((int)status)) < 0)
            goto oom;
        fl->fail_count = (int)count;
        fl->fail_status = (int)status;
    }
    if ((v = json_object_get(b, "latency_ms"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            hz_reply_invalid(r, "latency_ms", "must be an integer >= 0");
            return -1;
        }
        fl->latency_ms = (int)json_integer_value(v);
    }
    if ((v = json_object_get(b, "refuse_ip"))) {
        const char *ip =
            json_is_string(v) ? json_string_value(v) : json_string_value(json_object_get(v, "ip"));
        const char *code = json_string_value(json_object_get(v, "code"));
        json_int_t status = json_integer_value(json_object_get(v, "status"));
        if (!json_is_null(v) && (!ip || !hz_ip_valid(ip))) {
            hz_reply_invalid(r, "refuse_ip", "must be an IP, {ip, code, status} or null");
            return -1;
        }
        if (set_str(&fl->refuse_ip, ip) < 0 ||
            set_str(&fl->refuse_code, ip ? (code ? code : "ip_not_owned") : NULL) < 0)
            goto oom;
        fl->refuse_status = ip ? (status ? (int)status : 422) : 0;
    }
    if ((v = json_object_get(b, "fail_actions"))) {
        json_int_t count = json_is_object(v) ? json_integer_value(json_object_get(v, "count")) : 0;
        const char *code = json_string_value(json_object_get(v, "code"));
        const char *msg = json_string_value(json_object_get(v, "message"));
        if (!json_is_object(v) || count < 0) {
            hz_reply_invalid(r, "fail_actions", "needs {count, code, message}");
            return -1;
        }
        if (set_str(&fl->action_fail_code, code ? code : "action_failed") < 0 ||
            set_str(&fl->action_fail_message, msg ? msg : "action failed (injected)") < 0)
            goto oom;
        fl->action_fail_count = (int)count;
    }
    if ((v = json_object_get(b, "fail_issuance")) && fail_issuance_apply(r, v) < 0)
        return -1;
    if (set_hold(r, b, "hold_issuance", &fl->hold_issuance) < 0 ||
        set_hold(r, b, "hold_actions", &fl->hold_actions) < 0)
        return -1;
    return 0;
oom:
    hz_reply_error(r, 500, "server_error", "out of memory", NULL);
    return -1;
}

static json_t *
state_json(struct hz_fake *f)
{
    json_t *lbs = json_array(), *nets = json_array(), *acts = json_array();
    json_t *certs = json_array();
    if (!lbs || !nets || !acts || !certs)
        goto fail;
    for (size_t i = 0; i < f->n_certs; i++)
        if (json_array_append_new(certs, hz_cert_json(f, f->certs[i])) < 0)
            goto fail;
    for (size_t i = 0; i < f->n_lbs; i++) {
        json_t *o = hz_lb_json(f, f->lbs[i]);
        json_t *ra =
            f->lbs[i]->running_action ? json_integer(f->lbs[i]->running_action) : json_null();
        if (!o || json_object_set_new(o, "running_action", ra) < 0 ||
            json_array_append_new(lbs, o) < 0) {
            json_decref(o);
            goto fail;
        }
    }
    for (size_t i = 0; i < f->n_nets; i++)
        if (json_array_append_new(nets, hz_net_json(f, f->nets[i])) < 0)
            goto fail;
    for (size_t i = 0; i < f->n_actions; i++)
        if (json_array_append_new(acts, hz_action_json(f->actions[i])) < 0)
            goto fail;
    /* "o" steals all four; a NULL from the other renderers fails the pack. */
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:i}", "load_balancers", lbs, "networks", nets,
                     "certificates", certs, "actions", acts, "rate_limits", hz_rate_json(f),
                     "faults", faults_json(f), "max_load_balancers", f->max_lbs);
fail:
    json_decref(certs);
    json_decref(lbs);
    json_decref(nets);
    json_decref(acts);
    return NULL;
}

void
hz_admin_handle(struct hz_req *r)
{
    struct hz_fake *f = r->f;
    const char *what = r->path + strlen("/_admin/");
    enum evhttp_cmd_type m = r->method;
    json_t *resp = NULL;
    struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
    size_t len = evbuffer_get_length(in);
    if (len > 0) {
        json_error_t jerr;
        unsigned char *data = evbuffer_pullup(in, (ev_ssize_t)len);
        if (!data || !(r->body = json_loadb((const char *)data, len, 0, &jerr))) {
            hz_reply_error(r, 400, "json_error", "request body is not valid JSON", NULL);
            return;
        }
    }
    if (!strcmp(what, "requests") && m == EVHTTP_REQ_GET) {
        reply_requests(r);
        return;
    } else if (!strcmp(what, "writers") && m == EVHTTP_REQ_GET) {
        resp = json_pack("{s:i, s:O}", "window_ms", f->cfg.overlap_ms, "overlaps", f->overlaps);
    } else if (!strcmp(what, "faults") && m == EVHTTP_REQ_GET) {
        resp = faults_json(f);
    } else if (!strcmp(what, "faults") && m == EVHTTP_REQ_POST) {
        if (faults_apply(r, r->body) < 0)
            return;
        resp = faults_json(f);
    } else if (!strcmp(what, "faults") && m == EVHTTP_REQ_DELETE) {
        faults_clear(&f->faults);
        if (hz_actions_release(f) < 0) {
            hz_reply_error(r, 500, "server_error", "cannot release the held actions", NULL);
            return;
        }
        resp = faults_json(f);
    } else if (!strcmp(what, "reset") && m == EVHTTP_REQ_POST) {
        log_clear(f);
        counts_free(&f->counts);
        counts_free(&f->id_counts);
        writers_free(f);
        json_array_clear(f->overlaps);
        resp = json_pack("{s:b}", "reset", 1);
    } else if (!strcmp(what, "state") && m == EVHTTP_REQ_GET) {
        resp = state_json(f);
    } else {
        hz_reply_error(r, 404, "not_found", "no such admin endpoint", NULL);
        return;
    }
    if (!resp)
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
    else
        hz_reply(r, 200, resp);
}

void
hz_admin_free(struct hz_fake *f)
{
    log_clear(f);
    free(f->log);
    f->log = NULL;
    f->log_cap = 0;
    counts_free(&f->counts);
    counts_free(&f->id_counts);
    writers_free(f);
    json_decref(f->overlaps);
    f->overlaps = NULL;
    faults_clear(&f->faults);
}
