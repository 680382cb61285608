/* API listeners: one evhttp per "API server", authentication, the request
 * log, injected failures and latency, held (long-lived) requests. */
#include "fk.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <sys/queue.h>

#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

struct fk_held {
    struct fk_app *app;
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    int server;
    int dropping;
    void (*on_close)(void *arg, int dropped);
    void *arg;
    struct fk_held *prev, *next;
};

/* ---- requests ---------------------------------------------------------------- */

/* See fk.h. */
void
fk_rq_free(struct fk_rq *rq)
{
    if (!rq)
        return;
    free(rq->path);
    free(rq->cluster);
    if (rq->query) {
        evhttp_clear_headers(rq->query);
        free(rq->query);
    }
    json_decref(rq->log);
    json_decref(rq->wlog);
    free(rq);
}

/* See fk.h. */
const char *
fk_rq_param(struct fk_rq *rq, const char *name)
{
    return rq->query ? evhttp_find_header(rq->query, name) : NULL;
}

/* See fk.h. */
int
fk_rq_param_bool(struct fk_rq *rq, const char *name)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True", NULL};
    const char *v = fk_rq_param(rq, name);
    for (size_t i = 0; v && yes[i]; i++)
        if (!strcmp(v, yes[i]))
            return 1;
    return 0;
}

/* See fk.h. */
char *
fk_rq_body(struct fk_rq *rq, size_t *len)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(rq->req);
    size_t n = evbuffer_get_length(in);
    char *s;
    if (n == 0)
        return NULL;
    s = malloc(n + 1);
    if (!s)
        return NULL;
    if (evbuffer_copyout(in, s, n) != (ev_ssize_t)n) {
        free(s);
        return NULL;
    }
    s[n] = '\0';
    if (len)
        *len = n;
    return s;
}

static void
log_status(struct fk_rq *rq, int code)
{
    if (rq->log)
        json_object_set_new(rq->log, "status", json_integer(code));
    if (rq->wlog) {
        /* The write's line, now that its answer is known. */
        char *line = json_object_set_new(rq->wlog, "status", json_integer(code)) < 0
                         ? NULL
                         : json_dumps(rq->wlog, JSON_COMPACT);
        size_t n = line ? strlen(line) : 0;
        if (line) {
            line[n] = '\n'; /* one write per line: O_APPEND keeps lines whole */
            if (write(rq->app->writelog_fd, line, n + 1) < 0)
                fprintf(stderr, "fake-kube: write log: %s\n", strerror(errno));
        } else {
            fprintf(stderr, "fake-kube: write log: out of memory\n");
        }
        free(line);
        json_decref(rq->wlog);
        rq->wlog = NULL;
    }
}

/* See fk.h. */
void
fk_reply_json(struct fk_rq *rq, int code, json_t *body)
{
    struct evbuffer *out = evbuffer_new();
    struct evkeyvalq *h = evhttp_request_get_output_headers(rq->req);
    struct fk_buf s = {0};

    if (body) {
        fk_json_write(&s, body);
        fk_buf_add(&s, "\n", 1);
    }

    log_status(rq, code);
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_add_header(h, "Cache-Control", "no-cache, private");
    if (code == 429)
        evhttp_add_header(h, "Retry-After", "1");
    if (out && s.p && !s.err)
        evbuffer_add(out, s.p, s.len);
    evhttp_send_reply(rq->req, code, NULL, out);
    if (out)
        evbuffer_free(out);
    free(s.p);
    json_decref(body);
    fk_rq_free(rq);
}

/* See fk.h. */
void
fk_reply_raw(struct fk_rq *rq, int code, const char *ctype, const char *body)
{
    struct evbuffer *out = evbuffer_new();
    struct evkeyvalq *h = evhttp_request_get_output_headers(rq->req);

    log_status(rq, code);
    evhttp_add_header(h, "Content-Type", ctype);
    if (out)
        evbuffer_add(out, body, strlen(body));
    evhttp_send_reply(rq->req, code, NULL, out);
    if (out)
        evbuffer_free(out);
    fk_rq_free(rq);
}

/* See fk.h. */
void
fk_reply_status(struct fk_rq *rq, json_t *st)
{
    int code = (int)json_integer_value(json_object_get(st, "code"));
    /* A refused write's log line carries the refusal (best effort). */
    if (rq->wlog && st && code >= 400)
        json_object_set(rq->wlog, "answer", st);
    if (!st) {
        /* The Status itself could not be built: answer bare 500. */
        log_status(rq, 500);
        evhttp_send_reply(rq->req, 500, "Internal Server Error", NULL);
        fk_rq_free(rq);
        return;
    }
    fk_reply_json(rq, code ? code : 500, st);
}

/* ---- held requests -------------------------------------------------------------- */

static void
held_unlink(struct fk_app *app, struct fk_held *h)
{
    if (h->prev)
        h->prev->next = h->next;
    else
        app->held = h->next;
    if (h->next)
        h->next->prev = h->prev;
    h->prev = h->next = NULL;
}

static void
held_closecb(struct evhttp_connection *evcon, void *arg)
{
    struct fk_held *h = arg;
    (void)evcon;
    held_unlink(h->app, h);
    h->on_close(h->arg, h->dropping);
    free(h);
}

/* See fk.h. */
struct fk_held *
fk_hold(struct fk_rq *rq, void (*on_close)(void *arg, int dropped), void *arg)
{
    struct fk_held *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->app = rq->app;
    h->req = rq->req;
    h->evcon = evhttp_request_get_connection(rq->req);
    h->server = rq->srv->index;
    h->on_close = on_close;
    h->arg = arg;
    h->next = rq->app->held;
    if (h->next)
        h->next->prev = h;
    rq->app->held = h;
    evhttp_connection_set_closecb(h->evcon, held_closecb, h);
    return h;
}

/* See fk.h. */
void
fk_unhold(struct fk_app *app, struct fk_held *h)
{
    if (!h)
        return;
    evhttp_connection_set_closecb(h->evcon, NULL, NULL);
    held_unlink(app, h);
    free(h);
}

/* See fk.h. */
void
fk_held_drop(struct fk_app *app, struct fk_held *h)
{
    (void)app;
    h->dropping = 1;
    /* Frees the connection and its request; held_closecb runs first. */
    evhttp_connection_free(h->evcon);
}

/* See fk.h. */
void
fk_server_close_held(struct fk_app *app, int i, int drop)
{
    struct fk_held *h = app->held, *next;
    for (; h; h = next) {
        next = h->next;
        if (i >= 0 && h->server != i)
            continue;
        if (drop)
            fk_held_drop(app, h); /* unlinks only h */
    }
}

/* ---- faults ---------------------------------------------------------------------- */

static const char *
reason_for(int code)
{
    switch (code) {
    case 400:
        return "BadRequest";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "NotFound";
    case 409:
        return "Conflict";
    case 410:
        return "Expired";
    case 422:
        return "Invalid";
    case 429:
        return "TooManyRequests";
    case 503:
        return "ServiceUnavailable";
    case 504:
        return "Timeout";
    default:
        return "InternalError";
    }
}

static int
fault_matches(const char *match, const char *method_filter, struct fk_rq *rq)
{
    const char *uri = evhttp_request_get_uri(rq->req);
    if (method_filter && method_filter[0] && strcasecmp(method_filter, rq->method_name))
        return 0;
    return !match[0] || strstr(uri, match) != NULL;
}

static int
is_health(const char *path)
{
    return !strncmp(path, "/healthz", 8) || !strncmp(path, "/livez", 6) ||
           !strncmp(path, "/readyz", 7);
}

struct delayed {
    struct fk_rq *rq;
    struct event *ev; /* latency: the timer; NULL for a hold */
    struct fk_held *held;
    struct delayed *next; /* app->holding */
};

/* Take d off app->holding, if it is there. */
static void
holding_unlink(struct fk_app *app, struct delayed *d)
{
    for (struct delayed **pp = &app->holding; *pp; pp = &(*pp)->next) {
        if (*pp == d) {
            *pp = d->next;
            app->nholding--;
            return;
        }
    }
}

static void serve(struct fk_rq *rq);

static void
delayed_fire(evutil_socket_t fd, short what, void *arg)
{
    struct delayed *d = arg;
    struct fk_rq *rq = d->rq;
    (void)fd;
    (void)what;
    fk_unhold(rq->app, d->held);
    event_free(d->ev);
    free(d);
    serve(rq);
}

static void
delayed_closed(void *arg, int dropped)
{
    struct delayed *d = arg;
    holding_unlink(d->rq->app, d);
    if (!dropped)
        evhttp_request_free(d->rq->req); /* detached by libevent, ours to free */
    if (d->ev)
        event_free(d->ev);
    fk_rq_free(d->rq);
    free(d);
}

/* See fk.h. */
size_t
fk_release_held(struct fk_app *app)
{
    size_t n = 0;
    while (app->holding) {
        struct delayed *d = app->holding;
        struct fk_rq *rq = d->rq;
        app->holding = d->next;
        app->nholding--;
        fk_unhold(app, d->held);
        free(d);
        serve(rq);
        n++;
    }
    return n;
}

/* Hold rq (already logged) until fk_release_held. 0 or -1 (ENOMEM). */
static int
hold_request(struct fk_rq *rq)
{
    struct fk_app *app = rq->app;
    struct delayed *d = calloc(1, sizeof(*d)), **tail = &app->holding;
    if (!d)
        return -1;
    d->rq = rq;
    d->held = fk_hold(rq, delayed_closed, d);
    if (!d->held) {
        free(d);
        return -1;
    }
    while (*tail)
        tail = &(*tail)->next;
    *tail = d;
    app->nholding++;
    return 0;
}

/* ---- request entry ------------------------------------------------------------------ */

static const char *
method_name(int m)
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
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    case EVHTTP_REQ_OPTIONS:
        return "OPTIONS";
    default:
        return "OTHER";
    }
}

/* Who is asking: 0 ok (rq->user set), 401 no or bad credentials. */
static int
authenticate(struct fk_rq *rq)
{
    struct fk_app *app = rq->app;
    const char *auth =
        evhttp_find_header(evhttp_request_get_input_headers(rq->req), "Authorization");
    size_t i;
    json_t *t;

    if (auth && !strncasecmp(auth, "Bearer ", 7)) {
        const char *tok = auth + 7;
        json_array_foreach(app->tokens, i, t)
        {
            if (!strcmp(json_string_value(json_object_get(t, "token")), tok)) {
                snprintf(rq->user, sizeof(rq->user), "%s",
                         json_string_value(json_object_get(t, "user")));
                rq->readonly = json_is_true(json_object_get(t, "readonly"));
                return 0;
            }
        }
        return 401;
    }
    if (app->ssl && fk_tls_peer_user(rq->req, rq->user, sizeof(rq->user)))
        return 0;
    if (!app->ssl && json_array_size(app->tokens) == 0) {
        snprintf(rq->user, sizeof(rq->user), "system:anonymous");
        return 0;
    }
    return 401;
}

/* After latency: authorization, quorum, injected failures, then the API. */
static void
serve(struct fk_rq *rq)
{
    struct fk_app *app = rq->app;
    struct fk_faults *f = &app->faults;

    if (!is_health(rq->path) && strcmp(rq->path, "/version")) {
        int code = authenticate(rq);
        if (code) {
            fk_reply_status(rq,
                            fk_status_new(401, "Unauthorized", "Unauthorized", NULL, NULL, NULL));
            return;
        }
    }
    if (rq->log)
        json_object_set_new(rq->log, "user", json_string(rq->user));
    if (rq->readonly && rq->method != EVHTTP_REQ_GET && rq->method != EVHTTP_REQ_HEAD) {
        char msg[512];
        snprintf(msg, sizeof(msg), "User \"%s\" cannot %s at path \"%s\"", rq->user,
                 rq->method_name, rq->path);
        fk_reply_status(rq, fk_status_new(403, "Forbidden", msg, NULL, NULL, NULL));
        return;
    }
    if (!is_health(rq->path) && f->fail_count > 0 &&
        fault_matches(f->fail_match, f->fail_method, rq)) {
        char msg[128];
        f->fail_count--;
        if (f->fail_body[0]) {
            fk_reply_raw(rq, f->fail_status,
                         f->fail_content_type[0] ? f->fail_content_type : "application/json",
                         f->fail_body);
            return;
        }
        snprintf(msg, sizeof(msg), "injected failure (%d)", f->fail_status);
        fk_reply_status(
            rq, fk_status_new(f->fail_status, reason_for(f->fail_status), msg, NULL, NULL, NULL));
        return;
    }
    fk_api_dispatch(rq);
}

static void
api_cb(struct evhttp_request *req, void *arg)
{
    struct fk_server *srv = arg;
    struct fk_app *app = srv->app;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *raw_path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *raw_query = uri ? evhttp_uri_get_query(uri) : NULL;
    const char *ua = evhttp_find_header(evhttp_request_get_input_headers(req), "User-Agent");
    struct fk_rq *rq = calloc(1, sizeof(*rq));
    char *decoded = NULL;
    struct timeval tv;

    if (!rq)
        goto oom;
    rq->app = app;
    rq->srv = srv;
    rq->req = req;
    rq->method = evhttp_request_get_command(req);
    rq->method_name = method_name(rq->method);
    rq->query = calloc(1, sizeof(*rq->query));
    if (!rq->query)
        goto oom;
    TAILQ_INIT(rq->query);
    if (raw_query && evhttp_parse_query_str(raw_query, rq->query) < 0) {
        rq->path = strdup("/");
        rq->cluster = strdup("");
        if (!rq->path || !rq->cluster)
            goto oom;
        fk_reply_status(
            rq, fk_status_new(400, "BadRequest", "malformed query string", NULL, NULL, NULL));
        return;
    }
    decoded = evhttp_uridecode(raw_path ? raw_path : "/", 0, NULL);
    if (!decoded)
        goto oom;
    /* A /clusters/<name> prefix selects a separate store. */
    if (!strncmp(decoded, "/clusters/", 10)) {
        char *name = decoded + 10, *slash = strchr(name, '/');
        rq->cluster = slash ? strndup(name, (size_t)(slash - name)) : strdup(name);
        rq->path = strdup(slash ? slash : "/");
    } else {
        rq->cluster = strdup("");
        rq->path = strdup(decoded);
    }
    free(decoded);
    decoded = NULL;
    if (!rq->cluster || !rq->path)
        goto oom;

    gettimeofday(&tv, NULL);
    rq->log = json_pack("{s:f, s:i, s:s, s:s, s:s, s:s, s:s, s:i}", "time",
                        tv.tv_sec + tv.tv_usec / 1e6, "server", srv->index, "method",
                        rq->method_name, "path", evhttp_request_get_uri(req), "cluster",
                        rq->cluster, "userAgent", ua ? ua : "", "user", "", "status", 0);
    if (rq->log && !is_health(rq->path)) {
        if (json_array_size(app->reqlog) >= app->reqlog_max)
            json_array_remove(app->reqlog, 0);
        json_array_append(app->reqlog, rq->log);
        if (app->reqlog_fd >= 0) {
            char *line = json_dumps(rq->log, JSON_COMPACT);
            size_t n = line ? strlen(line) : 0;
            /* One write per line: O_APPEND keeps concurrent fakes' lines whole. */
            if (line) {
                line[n] = '\n';
                if (write(app->reqlog_fd, line, n + 1) < 0)
                    fprintf(stderr, "fake-kube: request log: %s\n", strerror(errno));
                line[n] = '\0';
            }
            free(line);
        }
    }
    if (app->verbose)
        fprintf(stderr, "fake-kube[%d]: %s %s\n", srv->index, rq->method_name,
                evhttp_request_get_uri(req));

    if (srv->quorum_lost) {
        if (is_health(rq->path) && strncmp(rq->path, "/livez", 6)) {
            log_status(rq, 500);
            struct evbuffer *b = evbuffer_new();
            if (b)
                evbuffer_add_printf(b, "[-]etcd failed: reason withheld\n%s check failed\n",
                                    rq->path + 1);
            evhttp_send_reply(req, 500, "Internal Server Error", b);
            if (b)
                evbuffer_free(b);
            fk_rq_free(rq);
            return;
        }
    }
    if (app->faults.hold_match[0] && !is_health(rq->path) &&
        fault_matches(app->faults.hold_match, app->faults.hold_method, rq)) {
        if (hold_request(rq) < 0)
            goto oom;
        return;
    }
    if (app->faults.latency_ms > 0 && !is_health(rq->path) &&
        fault_matches(app->faults.latency_match, NULL, rq)) {
        struct delayed *d = calloc(1, sizeof(*d));
        struct timeval delay = {app->faults.latency_ms / 1000,
                                (app->faults.latency_ms % 1000) * 1000};
        if (!d)
            goto oom;
        d->rq = rq;
        d->ev = evtimer_new(app->base, delayed_fire, d);
        if (!d->ev) {
            free(d);
            goto oom;
        }
        d->held = fk_hold(rq, delayed_closed, d);
        if (!d->held) {
            event_free(d->ev);
            free(d);
            goto oom;
        }
        evtimer_add(d->ev, &delay);
        return;
    }
    serve(rq);
    return;
oom:
    free(decoded);
    fk_rq_free(rq);
    evhttp_send_reply(req, 500, "Internal Server Error", NULL);
}

/* ---- listeners ------------------------------------------------------------------------ */

/* See fk.h. */
int
fk_server_start(struct fk_app *app, int i, int port)
{
    struct fk_server *srv = &app->servers[i];
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);

    srv->app = app;
    srv->index = i;
    srv->http = evhttp_new(app->base);
    if (!srv->http)
        return -ENOMEM;
    /* Watches are long-lived; idle connections are the client's business. */
    evhttp_set_timeout(srv->http, 24 * 3600);
    evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                              EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH |
                                              EVHTTP_REQ_HEAD | EVHTTP_REQ_OPTIONS);
    evhttp_set_gencb(srv->http, api_cb, srv);
    if (app->ssl)
        fk_tls_attach(srv->http, app->ssl);
    srv->bound = evhttp_bind_socket_with_handle(srv->http, "127.0.0.1", (ev_uint16_t)port);
    if (!srv->bound) {
        evhttp_free(srv->http);
        srv->http = NULL;
        return -EADDRINUSE;
    }
    if (getsockname(evhttp_bound_socket_get_fd(srv->bound), (struct sockaddr *)&sin, &slen) < 0) {
        evhttp_free(srv->http);
        srv->http = NULL;
        return -errno;
    }
    /* Accepted sockets inherit TCP_NODELAY on Linux: each watch event and
     * small answer goes out at once instead of waiting for a delayed ACK. */
    int one = 1;
    (void)setsockopt(evhttp_bound_socket_get_fd(srv->bound), IPPROTO_TCP, TCP_NODELAY, &one,
                     sizeof(one));
    srv->port = ntohs(sin.sin_port);
    srv->stopped = 0;
    srv->not_accepting = 0;
    return 0;
}

/* See fk.h. */
void
fk_server_stop(struct fk_app *app, int i)
{
    struct fk_server *srv = &app->servers[i];
    struct fk_held *h;
    if (!srv->http)
        return;
    /* evhttp_free closes every connection; mark our held requests so their
     * close handlers leave the requests to libevent. */
    for (h = app->held; h; h = h->next)
        if (h->server == i)
            h->dropping = 1;
    evhttp_free(srv->http);
    srv->http = NULL;
    srv->bound = NULL;
    srv->stopped = 1;
}

/* See fk.h. */
void
fk_server_accepting(struct fk_app *app, int i, int on)
{
    struct fk_server *srv = &app->servers[i];
    struct evconnlistener *l;
    if (!srv->bound)
        return;
    l = evhttp_bound_socket_get_listener(srv->bound);
    if (on)
        evconnlistener_enable(l);
    else
        evconnlistener_disable(l);
    srv->not_accepting = !on;
}
