/* Request dispatch: parse, authenticate, rate limit, inject faults, route,
 * log, answer. Runs entirely on the event loop; nothing here blocks. */
#include "fake.h"

#include <event2/buffer.h>
#include <sys/queue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hz_delayed {
    struct hz_fake *f;
    struct evhttp_request *req;
    struct event *ev;
    struct hz_delayed *prev, *next;
};

const char *
hz_method_name(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    case EVHTTP_REQ_OPTIONS:
        return "OPTIONS";
    default:
        return "OTHER";
    }
}

static const char *
reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 422:
        return "Unprocessable Entity";
    case 423:
        return "Locked";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Status";
    }
}

/* Name r's route ("METHOD /v1/pattern") and check its input against it:
 * 0, or -1 after answering invalid_input (input.c). */
static int
set_route(struct hz_req *r, const char *pattern)
{
    snprintf(r->route, sizeof(r->route), "%s /v1/%s", hz_method_name(r->method), pattern);
    return hz_input_check(r);
}

static void
method_not_allowed(struct hz_req *r)
{
    hz_reply_error(r, 405, "method_not_allowed", "method not allowed on this path", NULL);
}

/* Id segment or -1 after replying invalid_input. */
static long
path_id(struct hz_req *r, const char *seg)
{
    long id = hz_parse_id(seg);
    if (id < 0)
        hz_reply_invalid(r, "id", "must be a positive integer");
    return id;
}

static void
list_types(struct hz_req *r)
{
    const char *name = hz_query(r, "name");
    json_t *items = json_array();
    for (size_t i = 0; items && i < hz_n_lb_types; i++) {
        if (name && strcmp(name, hz_lb_types[i].name) != 0)
            continue;
        if (json_array_append_new(items, hz_type_json(&hz_lb_types[i])) < 0) {
            json_decref(items);
            items = NULL;
        }
    }
    hz_reply_page(r, "load_balancer_types", items);
}

static void
list_locations(struct hz_req *r)
{
    const char *name = hz_query(r, "name");
    json_t *items = json_array();
    for (size_t i = 0; items && i < hz_n_locations; i++) {
        if (name && strcmp(name, hz_locations[i].name) != 0)
            continue;
        if (json_array_append_new(items, hz_location_json(&hz_locations[i])) < 0) {
            json_decref(items);
            items = NULL;
        }
    }
    hz_reply_page(r, "locations", items);
}

static void
list_networks(struct hz_req *r)
{
    const char *name = hz_query(r, "name");
    const char *ls = hz_query(r, "label_selector");
    struct hz_selector *sel = NULL;
    char err[160];
    if (ls && hz_selector_parse(ls, &sel, err, sizeof(err)) < 0) {
        hz_reply_invalid(r, "label_selector", err);
        return;
    }
    json_t *items = json_array();
    for (size_t i = 0; items && i < r->f->n_nets; i++) {
        struct hz_network *n = r->f->nets[i];
        if ((name && strcmp(name, n->name) != 0) || (sel && !hz_selector_match(sel, n->labels)))
            continue;
        if (json_array_append_new(items, hz_net_json(r->f, n)) < 0) {
            json_decref(items);
            items = NULL;
        }
    }
    hz_selector_free(sel);
    hz_reply_page(r, "networks", items);
}

/* GET /<kind>/{id} for the static catalogue and networks. */
static void
get_one(struct hz_req *r, const char *kind, long id)
{
    json_t *obj = NULL;
    const char *key = NULL;
    if (!strcmp(kind, "load_balancer_types")) {
        key = "load_balancer_type";
        for (size_t i = 0; i < hz_n_lb_types; i++)
            if (hz_lb_types[i].id == id)
                obj = hz_type_json(&hz_lb_types[i]);
    } else if (!strcmp(kind, "locations")) {
        key = "location";
        for (size_t i = 0; i < hz_n_locations; i++)
            if (hz_locations[i].id == id)
                obj = hz_location_json(&hz_locations[i]);
    } else {
        key = "network";
        struct hz_network *n = hz_net_find(r->f, id);
        if (n)
            obj = hz_net_json(r->f, n);
    }
    if (!obj) {
        hz_reply_error(r, 404, "not_found", "resource not found", NULL);
        return;
    }
    json_t *resp = json_pack("{s:o}", key, obj);
    if (!resp)
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
    else
        hz_reply(r, 200, resp);
}

/* Route /v1/certificates/...; seg[0] is "certificates". */
static void
route_certs(struct hz_req *r, char **seg, int n)
{
    enum evhttp_cmd_type m = r->method;
    struct hz_action *a;
    long id;
    if (n == 1) {
        if (set_route(r, "certificates") < 0)
            return;
        if (m == EVHTTP_REQ_GET)
            hz_cert_list(r);
        else if (m == EVHTTP_REQ_POST)
            hz_cert_create(r);
        else
            method_not_allowed(r);
        return;
    }
    if (!strcmp(seg[1], "actions") && n <= 3) {
        if (set_route(r, n == 2 ? "certificates/actions" : "certificates/actions/{id}") < 0)
            return;
        if (m != EVHTTP_REQ_GET)
            method_not_allowed(r);
        else if (n == 2)
            hz_actions_list(r, HZ_RES_CERT, 0);
        else if ((id = path_id(r, seg[2])) > 0) {
            if (!(a = hz_action_find(r->f, id)) || !a->cert_id)
                hz_reply_error(r, 404, "not_found", "action not found", NULL);
            else
                hz_actions_get(r, id);
        }
        return;
    }
    if (n == 2) {
        if (set_route(r, "certificates/{id}") < 0 || (id = path_id(r, seg[1])) < 0)
            return;
        if (m == EVHTTP_REQ_GET)
            hz_cert_get(r, id);
        else if (m == EVHTTP_REQ_PUT)
            hz_cert_update(r, id);
        else if (m == EVHTTP_REQ_DELETE)
            hz_cert_delete(r, id);
        else
            method_not_allowed(r);
        return;
    }
    if (strcmp(seg[2], "actions") != 0 || n > 4) {
        snprintf(r->route, sizeof(r->route), "%s /v1/(unknown)", hz_method_name(m));
        hz_reply_error(r, 404, "not_found", "no such endpoint", NULL);
        return;
    }
    if ((id = path_id(r, seg[1])) < 0)
        return;
    if (n == 3) {
        if (set_route(r, "certificates/{id}/actions") < 0)
            return;
        if (m != EVHTTP_REQ_GET)
            method_not_allowed(r);
        else if (!hz_cert_find(r->f, id))
            hz_reply_error(r, 404, "not_found", "certificate not found", NULL);
        else
            hz_actions_list(r, HZ_RES_CERT, (int)id);
        return;
    }
    if (!strcmp(seg[3], "retry")) {
        if (set_route(r, "certificates/{id}/actions/retry") < 0)
            return;
        if (m != EVHTTP_REQ_POST)
            method_not_allowed(r);
        else
            hz_cert_retry(r, id);
        return;
    }
    if (hz_parse_id(seg[3]) < 0) {
        snprintf(r->route, sizeof(r->route), "%s /v1/(unknown)", hz_method_name(m));
        hz_reply_error(r, 404, "not_found", "no such endpoint", NULL);
        return;
    }
    if (set_route(r, "certificates/{id}/actions/{action_id}") < 0)
        return;
    if (m != EVHTTP_REQ_GET)
        method_not_allowed(r);
    else if (!(a = hz_action_find(r->f, hz_parse_id(seg[3]))) || a->cert_id != id)
        hz_reply_error(r, 404, "not_found", "action not found", NULL);
    else
        hz_actions_get(r, a->id);
}

/* Route a /v1 path. seg[] are the segments after "/v1". */
static void
route_v1(struct hz_req *r, char **seg, int n)
{
    enum evhttp_cmd_type m = r->method;
    long id;
    if (n == 0)
        goto not_found;
    if (!strcmp(seg[0], "load_balancers")) {
        if (n == 1) {
            if (set_route(r, "load_balancers") < 0)
                return;
            if (m == EVHTTP_REQ_GET)
                hz_lb_list(r);
            else if (m == EVHTTP_REQ_POST)
                hz_lb_create(r);
            else
                method_not_allowed(r);
            return;
        }
        if (!strcmp(seg[1], "actions")) {
            if (set_route(r, n == 2 ? "load_balancers/actions" : "load_balancers/actions/{id}") < 0)
                return;
            if (n > 3)
                goto not_found;
            if (m != EVHTTP_REQ_GET)
                method_not_allowed(r);
            else if (n == 2)
                hz_actions_list(r, HZ_RES_LB, 0);
            else if ((id = path_id(r, seg[2])) > 0)
                hz_actions_get(r, id);
            return;
        }
        if (n == 2) {
            if (set_route(r, "load_balancers/{id}") < 0)
                return;
            if ((id = path_id(r, seg[1])) < 0)
                return;
            if (m == EVHTTP_REQ_GET)
                hz_lb_get(r, id);
            else if (m == EVHTTP_REQ_PUT)
                hz_lb_update(r, id);
            else if (m == EVHTTP_REQ_DELETE)
                hz_lb_delete(r, id);
            else
                method_not_allowed(r);
            return;
        }
        if (strcmp(seg[2], "actions") != 0 || n > 4)
            goto not_found;
        if ((id = path_id(r, seg[1])) < 0)
            return;
        if (n == 3) {
            if (set_route(r, "load_balancers/{id}/actions") < 0)
                return;
            if (m != EVHTTP_REQ_GET)
                method_not_allowed(r);
            else if (!hz_lb_find(r->f, id))
                hz_reply_error(r, 404, "not_found", "load balancer not found", NULL);
            else
                hz_actions_list(r, HZ_RES_LB, (int)id);
            return;
        }
        if (m == EVHTTP_REQ_POST && hz_lb_action_known(seg[3])) {
            char pat[80];
            snprintf(pat, sizeof(pat), "load_balancers/{id}/actions/%s", seg[3]);
            if (set_route(r, pat) < 0)
                return;
            hz_lb_action(r, id, seg[3]);
            return;
        }
        if (m == EVHTTP_REQ_GET && hz_parse_id(seg[3]) > 0) {
            if (set_route(r, "load_balancers/{id}/actions/{action_id}") < 0)
                return;
            struct hz_action *a = hz_action_find(r->f, hz_parse_id(seg[3]));
            if (!a || a->lb_id != id)
                hz_reply_error(r, 404, "not_found", "action not found", NULL);
            else
                hz_actions_get(r, a->id);
            return;
        }
        goto not_found;
    }
    if (!strcmp(seg[0], "certificates")) {
        route_certs(r, seg, n);
        return;
    }
    if (!strcmp(seg[0], "actions") && n <= 2) {
        if (set_route(r, n == 1 ? "actions" : "actions/{id}") < 0)
            return;
        if (m != EVHTTP_REQ_GET)
            method_not_allowed(r);
        else if (n == 1)
            hz_actions_list(r, HZ_RES_ANY, 0);
        else if ((id = path_id(r, seg[1])) > 0)
            hz_actions_get(r, id);
        return;
    }
    if ((!strcmp(seg[0], "load_balancer_types") || !strcmp(seg[0], "locations") ||
         !strcmp(seg[0], "networks")) &&
        n <= 2) {
        char pat[64];
        snprintf(pat, sizeof(pat), "%s%s", seg[0], n == 2 ? "/{id}" : "");
        if (set_route(r, pat) < 0)
            return;
        if (m != EVHTTP_REQ_GET)
            method_not_allowed(r);
        else if (n == 2) {
            if ((id = path_id(r, seg[1])) > 0)
                get_one(r, seg[0], id);
        } else if (!strcmp(seg[0], "load_balancer_types"))
            list_types(r);
        else if (!strcmp(seg[0], "locations"))
            list_locations(r);
        else
            list_networks(r);
        return;
    }
not_found:
    snprintf(r->route, sizeof(r->route), "%s /v1/(unknown)", hz_method_name(r->method));
    hz_reply_error(r, 404, "not_found", "no such endpoint", NULL);
}

/* 1 if the request carries an accepted bearer token (stored in r->token). */
static int
authenticate(struct hz_req *r)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0 || !h[7])
        return 0;
    r->token = h + 7;
    if (json_array_size(r->f->tokens) == 0)
        return 1;
    size_t i;
    json_t *t;
    json_array_foreach(r->f->tokens, i, t) if (!strcmp(json_string_value(t), r->token)) return 1;
    return 0;
}

static void
handle_v1(struct hz_req *r, char *rest)
{
    struct hz_fake *f = r->f;
    struct evkeyvalq *out = evhttp_request_get_output_headers(r->req);
    long limit, remaining;
    long long reset;
    int authed = authenticate(r);
    int rc = hz_rate_take(f, authed ? r->token : NULL, &limit, &remaining, &reset);
    snprintf(r->route, sizeof(r->route), "%s /v1/(unrouted)", hz_method_name(r->method));
    if (rc < 0) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return;
    }
    char lim[32], rem[32], rst[32];
    snprintf(lim, sizeof(lim), "%ld", limit);
    snprintf(rem, sizeof(rem), "%ld", remaining);
    snprintf(rst, sizeof(rst), "%lld", reset);
    if (evhttp_add_header(out, "RateLimit-Limit", lim) < 0 ||
        evhttp_add_header(out, "RateLimit-Remaining", rem) < 0 ||
        evhttp_add_header(out, "RateLimit-Reset", rst) < 0) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return;
    }
    if (!authed) {
        r->token = NULL;
        hz_reply_error(r, 401, "unauthorized", "unable to authenticate", NULL);
        return;
    }
    if (rc == 0) {
        hz_reply_error(r, 429, "rate_limit_exceeded", "limit of requests per hour reached", NULL);
        return;
    }
    if (f->faults.fail_count > 0) {
        f->faults.fail_count--;
        hz_reply_error(r, f->faults.fail_status, f->faults.fail_code, "request failed (injected)",
                       NULL);
        return;
    }
    if (!r->query_ok) {
        hz_reply_error(r, 400, "invalid_input", "malformed query string", NULL);
        return;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
    size_t len = evbuffer_get_length(in);
    if (len > 0) {
        json_error_t jerr;
        unsigned char *data = evbuffer_pullup(in, (ev_ssize_t)len);
        r->body = data ? json_loadb((const char *)data, len, 0, &jerr) : NULL;
        if (!r->body) {
            hz_reply_error(r, 400, "json_error", "request body is not valid JSON", NULL);
            return;
        }
    }
    char *seg[8];
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(rest, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
        if (n == 8) {
            hz_reply_error(r, 404, "not_found", "no such endpoint", NULL);
            return;
        }
        seg[n++] = p;
    }
    route_v1(r, seg, n);
}

static void
free_text(const void *data, size_t len, void *arg)
{
    (void)len, (void)arg;
    free((void *)data);
}

static void
send_reply(struct hz_req *r)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(r->req);
    struct evbuffer *buf = NULL;
    int ok = 1;
    if (r->status != 204) {
        char *text = r->resp_raw;
        r->resp_raw = NULL; /* owned here from now on */
        if (!text && r->resp)
            text = json_dumps(r->resp, JSON_COMPACT | JSON_REAL_PRECISION(10));
        buf = evbuffer_new();
        /* The buffer takes the text without a copy and frees it once sent. */
        if (buf && text && evbuffer_add_reference(buf, text, strlen(text), free_text, NULL) == 0)
            text = NULL;
        else
            ok = 0;
        free(text);
        ok = ok && evhttp_add_header(out, "Content-Type", "application/json") == 0;
    }
    if (ok)
        evhttp_send_reply(r->req, r->status, reason(r->status), buf);
    else
        evhttp_send_error(r->req, 500, "out of memory");
    if (buf)
        evbuffer_free(buf);
}

/* Handle one request now. */
static void
dispatch(struct hz_fake *f, struct evhttp_request *req)
{
    struct hz_req r;
    memset(&r, 0, sizeof(r));
    r.f = f;
    r.req = req;
    r.method = evhttp_request_get_command(req);
    r.status = 500;
    const char *ua = evhttp_find_header(evhttp_request_get_input_headers(req), "User-Agent");
    r.identity = ua ? ua : "-";
    const char *uri = evhttp_request_get_uri(req);
    const char *q = strchr(uri, '?');
    char *raw = strndup(uri, q ? (size_t)(q - uri) : strlen(uri));
    r.path = raw ? evhttp_uridecode(raw, 0, NULL) : NULL;
    free(raw);
    TAILQ_INIT(&r.query);
    r.query_ok = q ? evhttp_parse_query_str(q + 1, &r.query) == 0 : 1;
    if (!r.path) {
        hz_reply_error(&r, 500, "server_error", "out of memory", NULL);
    } else if (!strncmp(r.path, "/_admin/", 8)) {
        hz_admin_handle(&r);
    } else if (!strncmp(r.path, "/v1/", 4) || !strcmp(r.path, "/v1")) {
        char *rest = strdup(r.path + 3);
        if (!rest)
            hz_reply_error(&r, 500, "server_error", "out of memory", NULL);
        else
            handle_v1(&r, rest);
        free(rest);
        hz_admin_record(f, &r);
    } else {
        hz_reply_error(&r, 404, "not_found", "no such endpoint", NULL);
    }
    send_reply(&r);
    evhttp_clear_headers(&r.query);
    json_decref(r.body);
    json_decref(r.resp);
    free(r.resp_raw);
    free(r.path);
}

static void
delayed_fire(evutil_socket_t fd, short what, void *arg)
{
    struct hz_delayed *d = arg;
    (void)fd, (void)what;
    if (d->prev)
        d->prev->next = d->next;
    else
        d->f->delayed = d->next;
    if (d->next)
        d->next->prev = d->prev;
    dispatch(d->f, d->req);
    event_free(d->ev);
    free(d);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct hz_fake *f = arg;
    const char *uri = evhttp_request_get_uri(req);
    if (f->faults.latency_ms > 0 && uri && !strncmp(uri, "/v1", 3)) {
        struct hz_delayed *d = calloc(1, sizeof(*d));
        struct timeval tv = {f->faults.latency_ms / 1000, (f->faults.latency_ms % 1000) * 1000};
        if (d && (d->ev = evtimer_new(f->base, delayed_fire, d)) && evtimer_add(d->ev, &tv) == 0) {
            d->f = f;
            d->req = req;
            d->next = f->delayed;
            if (d->next)
                d->next->prev = d;
            f->delayed = d;
            return;
        }
        if (d && d->ev)
            event_free(d->ev);
        free(d);
        /* Could not delay: answer at once rather than drop the request. */
    }
    dispatch(f, req);
}

void
hz_http_init(struct hz_fake *f)
{
    evhttp_set_allowed_methods(f->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_OPTIONS);
    evhttp_set_gencb(f->http, on_request, f);
}

void
hz_http_free(struct hz_fake *f)
{
    struct hz_delayed *d = f->delayed;
    while (d) {
        struct hz_delayed *next = d->next;
        event_free(d->ev);
        free(d);
        d = next;
    }
    f->delayed = NULL;
}
