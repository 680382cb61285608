/*
 * srv: in-process HTTP and HTTPS servers (libevent evhttp) on 127.0.0.1
 * ephemeral ports for the HTTP client suites, plus a listener that never
 * accepts and a test PKI made with the openssl command at run time.
 *
 * Routes:
 *   /hello        200 "hello world", X-Test twice (a, then b), X-Echo = the
 *                 request's X-Req header
 *   /echo         200 "<METHOD> <body>"; records method, body, Authorization
 *   /tls-info     200 "sni=<SNI> cn=<client certificate CN or ->"
 *   /redirect     302 to /hello
 *   /missing      404
 *   /big?n=N      200 with N bytes of 'x'
 *   /hang         never answers
 *   /lines?n=N    N lines "line NNNNNNN <padding>\n" (64 bytes each), chunked,
 *                 1000 lines per chunk, the next sent only when the last
 *                 has drained (so the server holds about one chunk)
 */
#ifndef PRISMLB_TEST_HTTPC_SRV_H
#define PRISMLB_TEST_HTTPC_SRV_H

#include <openssl/ssl.h>
#include <stddef.h>

struct event_base;

#define SRV_LINE_LEN 64

struct srv {
    struct event_base *base;
    struct evhttp *http;
    SSL_CTX *ssl; /* borrowed */
    int port;
    int hits;
    char method[16];
    char auth[256];
    char host[256];  /* Host header */
    char expect[64]; /* Expect header ("-" when none) */
    char body[256];  /* the first 255 bytes of it */
    size_t body_len;
    char sni[256];
    char cn[256];
    int streams; /* /lines replies in progress */
};

/* A server on 127.0.0.1:0; TLS when ssl is non-NULL (borrowed, must outlive
 * the server). New; NULL on failure. */
struct srv *srv_new(struct event_base *base, SSL_CTX *ssl);
void srv_free(struct srv *s);

/* The line /lines sends as line i (without '\n'), into buf (>= SRV_LINE_LEN). */
void srv_line(char *buf, int i);

/* A TCP listener on 127.0.0.1 whose accept queue is full, so that a new
 * connect() never completes. Returns the listening fd (port in *port) and
 * keeps the filler sockets in fillers[0..*nfill). -1 on failure. */
int srv_stuck_listener(int *port, int *fillers, int max_fill, int *nfill);

/* Test PKI in dir: ca.pem/ca.key, other-ca.pem (unrelated CA), server.pem/
 * server.key (SAN DNS:server.test only, signed by ca), client-one.pem/.key
 * and client-two.pem/.key (CN client-one / client-two, signed by ca).
 * 0 or -1. */
int srv_make_pki(const char *dir);

/* A server context with the server certificate in dir; when require_client,
 * a client certificate signed by ca.pem is required. New; NULL on failure. */
SSL_CTX *srv_ssl_ctx(const char *dir, int require_client);

#endif
