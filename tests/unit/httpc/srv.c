#include "srv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/x509.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

#define LINES_PER_CHUNK 1000

/* A request the server holds open (/hang, or a /lines stream in progress).
 * When the client goes away, evhttp detaches such a request from its
 * connection and leaves it to us; the connection's close callback frees it
 * then. When the server itself is freed, evhttp frees it. */
struct pend {
    struct srv *s;
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    int stream;
    int next, n;
};

void
srv_line(char *buf, int i)
{
    /* 63 characters + '\n' = SRV_LINE_LEN bytes on the wire. */
    snprintf(buf, SRV_LINE_LEN, "line %07d %-50s", i, "padding-padding-padding");
}

static void
copy_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "-");
}

static int
query_int(struct evhttp_request *req, const char *key, int def)
{
    struct evkeyvalq q;
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    int v = def;
    if (!query || evhttp_parse_query_str(query, &q) < 0)
        return def;
    const char *s = evhttp_find_header(&q, key);
    if (s)
        v = atoi(s);
    evhttp_clear_headers(&q);
    return v;
}

static void
pend_free(struct pend *p)
{
    evhttp_connection_set_closecb(p->evcon, NULL, NULL);
    if (p->stream)
        p->s->streams--;
    free(p);
}

static void
pend_closed(struct evhttp_connection *evcon, void *arg)
{
    struct pend *p = arg;
    (void)evcon;
    if (!evhttp_request_get_connection(p->req))
        evhttp_request_free(p->req); /* detached: ours now */
    pend_free(p);
}

static struct pend *
pend_new(struct srv *s, struct evhttp_request *req, int stream)
{
    struct pend *p = calloc(1, sizeof(*p));
    if (!p)
        abort();
    p->s = s;
    p->req = req;
    p->evcon = evhttp_request_get_connection(req);
    p->stream = stream;
    s->streams += stream;
    evhttp_connection_set_closecb(p->evcon, pend_closed, p);
    return p;
}

/* Send the next chunk of lines; called again when it has drained. */
static void
stream_more(struct evhttp_connection *evcon, void *arg)
{
    struct pend *st = arg;
    char line[SRV_LINE_LEN];
    (void)evcon;
    if (st->next >= st->n) {
        struct evhttp_request *req = st->req;
        pend_free(st);
        evhttp_send_reply_end(req);
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (!b)
        abort();
    for (int k = 0; k < LINES_PER_CHUNK && st->next < st->n; k++, st->next++) {
        srv_line(line, st->next);
        evbuffer_add(b, line, strlen(line));
        evbuffer_add(b, "\n", 1);
    }
    evhttp_send_reply_chunk_with_cb(st->req, b, stream_more, st);
    evbuffer_free(b);
}

static void
tls_info(struct srv *s, struct evhttp_request *req)
{
    s->sni[0] = '\0';
    copy_str(s->cn, sizeof(s->cn), NULL);
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
    SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
    if (ssl) {
        copy_str(s->sni, sizeof(s->sni), SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name));
        X509 *peer = SSL_get0_peer_certificate(ssl);
        if (peer)
            X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, s->cn,
                                      (int)sizeof(s->cn));
    }
}

static void
handle(struct evhttp_request *req, void *arg)
{
    struct srv *s = arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    struct evbuffer *b = evbuffer_new();
    if (!b)
        abort();
    s->hits++;
    copy_str(s->auth, sizeof(s->auth), evhttp_find_header(in, "Authorization"));
    copy_str(s->host, sizeof(s->host), evhttp_find_header(in, "Host"));
    copy_str(s->expect, sizeof(s->expect), evhttp_find_header(in, "Expect"));
    if (!path)
        path = "/";

    if (strcmp(path, "/hello") == 0) {
        evhttp_add_header(out, "X-Test", "a");
        evhttp_add_header(out, "X-Test", "b");
        const char *x = evhttp_find_header(in, "X-Req");
        if (x)
            evhttp_add_header(out, "X-Echo", x);
        evhttp_add_header(out, "Content-Type", "text/plain");
        evbuffer_add_printf(b, "hello world");
        evhttp_send_reply(req, 200, "OK", b);
    } else if (strcmp(path, "/echo") == 0) {
        struct evbuffer *body = evhttp_request_get_input_buffer(req);
        size_t n = evbuffer_get_length(body);
        s->body_len = n;
        if (n >= sizeof(s->body))
            n = sizeof(s->body) - 1;
        evbuffer_copyout(body, s->body, n);
        s->body[n] = '\0';
        const char *m = "OTHER";
        switch (evhttp_request_get_command(req)) {
        case EVHTTP_REQ_GET:
            m = "GET";
            break;
        case EVHTTP_REQ_POST:
            m = "POST";
            break;
        case EVHTTP_REQ_PUT:
            m = "PUT";
            break;
        case EVHTTP_REQ_DELETE:
            m = "DELETE";
            break;
        case EVHTTP_REQ_PATCH:
            m = "PATCH";
            break;
        default:
            break;
        }
        copy_str(s->method, sizeof(s->method), m);
        evbuffer_add_printf(b, "%s %s", m, s->body);
        evhttp_send_reply(req, 200, "OK", b);
    } else if (strcmp(path, "/tls-info") == 0) {
        tls_info(s, req);
        evbuffer_add_printf(b, "sni=%s cn=%s", s->sni, s->cn);
        evhttp_send_reply(req, 200, "OK", b);
    } else if (strcmp(path, "/redirect") == 0) {
        evhttp_add_header(out, "Location", "/hello");
        evhttp_send_reply(req, 302, "Found", b);
    } else if (strcmp(path, "/big") == 0) {
        int n = query_int(req, "n", 0);
        for (int i = 0; i < n; i++)
            evbuffer_add(b, "x", 1);
        evhttp_send_reply(req, 200, "OK", b);
    } else if (strcmp(path, "/hang") == 0) {
        (void)pend_new(s, req, 0); /* never answered */
    } else if (strcmp(path, "/lines") == 0) {
        struct pend *st = pend_new(s, req, 1);
        st->n = query_int(req, "n", 0);
        evhttp_send_reply_start(req, 200, "OK");
        stream_more(st->evcon, st);
    } else {
        evhttp_send_error(req, 404, "Not Found");
    }
    evbuffer_free(b);
}

static struct bufferevent *
tls_bev(struct event_base *base, void *arg)
{
    SSL *ssl = SSL_new(arg);
    if (!ssl)
        return NULL;
    return bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                          BEV_OPT_CLOSE_ON_FREE);
}

struct srv *
srv_new(struct event_base *base, SSL_CTX *ssl)
{
    struct srv *s = calloc(1, sizeof(*s));
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    if (!s)
        return NULL;
    s->base = base;
    s->ssl = ssl;
    if (!(s->http = evhttp_new(base)))
        goto fail;
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH | EVHTTP_REQ_HEAD);
    if (ssl)
        evhttp_set_bevcb(s->http, tls_bev, ssl);
    evhttp_set_gencb(s->http, handle, s);
    struct evhttp_bound_socket *h = evhttp_bind_socket_with_handle(s->http, "127.0.0.1", 0);
    if (!h)
        goto fail;
    if (getsockname(evhttp_bound_socket_get_fd(h), (struct sockaddr *)&sin, &slen) < 0)
        goto fail;
    s->port = ntohs(sin.sin_port);
    return s;
fail:
    srv_free(s);
    return NULL;
}

void
srv_free(struct srv *s)
{
    if (!s)
        return;
    if (s->http)
        evhttp_free(s->http);
    free(s);
}

/* ------------------------------------------------------------------------ */

static int
connect_nb(int port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

int
srv_stuck_listener(int *port, int *fillers, int max_fill, int *nfill)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t slen = sizeof(sin);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    *nfill = 0;
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 0) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &slen) < 0)
        goto fail;
    *port = ntohs(sin.sin_port);
    /* Connect until one connect() hangs: the accept queue is then full and
     * the kernel drops further SYNs. */
    while (*nfill < max_fill) {
        int f = connect_nb(*port);
        if (f < 0)
            goto fail;
        fillers[(*nfill)++] = f;
        struct pollfd p = {.fd = f, .events = POLLOUT};
        if (poll(&p, 1, 200) == 0)
            return fd;
    }
fail:
    for (int i = 0; i < *nfill; i++)
        close(fillers[i]);
    *nfill = 0;
    close(fd);
    return -1;
}

/* ------------------------------------------------------------------------ */

static int
openssl_run(const char *dir, char *const argv[])
{
    char *out = NULL;
    char cwd[4096];
    if (!getcwd(cwd, sizeof(cwd)) || chdir(dir) < 0)
        return -1;
    int rc = tu_run(argv, NULL, &out, 60000);
    if (chdir(cwd) < 0)
        rc = -1;
    if (rc != 0)
        fprintf(stderr, "openssl %s failed (%d): %s\n", argv[1], rc, out ? out : "");
    free(out);
    return rc == 0 ? 0 : -1;
}

static int
make_ca(const char *dir, const char *name)
{
    char key[64], pem[64], subj[96];
    snprintf(key, sizeof(key), "%s.key", name);
    snprintf(pem, sizeof(pem), "%s.pem", name);
    snprintf(subj, sizeof(subj), "/CN=prismlb %s", name);
    char *argv[] = {
        "openssl", "req",     "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes",  "-keyout", key,     "-out",    pem,  "-days",    "2",
        "-subj",   subj,      NULL};
    return openssl_run(dir, argv);
}

static int
make_leaf(const char *dir, const char *name, const char *cn, const char *ext_text,
          const char *serial)
{
    char key[64], csr[64], pem[64], ext[64], subj[96], path[4200];
    snprintf(key, sizeof(key), "%s.key", name);
    snprintf(csr, sizeof(csr), "%s.csr", name);
    snprintf(pem, sizeof(pem), "%s.pem", name);
    snprintf(ext, sizeof(ext), "%s.ext", name);
    snprintf(subj, sizeof(subj), "/CN=%s", cn);
    snprintf(path, sizeof(path), "%s/%s", dir, ext);
    if (tu_write_file(path, ext_text) < 0)
        return -1;
    char *req[] = {
        "openssl", "req",     "-newkey", "ec",   "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes",  "-keyout", key,       "-out", csr,        "-subj",
        subj,      NULL};
    char *sign[] = {"openssl",      "x509",   "-req",   "-in",    csr,
                    "-CA",          "ca.pem", "-CAkey", "ca.key", "-set_serial",
                    (char *)serial, "-days",  "2",      "-out",   pem,
                    "-extfile",     ext,      NULL};
    if (openssl_run(dir, req) < 0 || openssl_run(dir, sign) < 0)
        return -1;
    return 0;
}

int
srv_make_pki(const char *dir)
{
    if (make_ca(dir, "ca") < 0 || make_ca(dir, "other-ca") < 0)
        return -1;
    if (make_leaf(dir, "server", "server.test",
                  "subjectAltName=DNS:server.test\nbasicConstraints=CA:FALSE\n"
                  "extendedKeyUsage=serverAuth\n",
                  "2") < 0)
        return -1;
    const char *client_ext = "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n";
    if (make_leaf(dir, "client-one", "client-one", client_ext, "3") < 0 ||
        make_leaf(dir, "client-two", "client-two", client_ext, "4") < 0)
        return -1;
    return 0;
}

SSL_CTX *
srv_ssl_ctx(const char *dir, int require_client)
{
    char cert[4200], key[4200], ca[4200];
    snprintf(cert, sizeof(cert), "%s/server.pem", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return NULL;
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
        goto fail;
    if (require_client) {
        if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
            goto fail;
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}
