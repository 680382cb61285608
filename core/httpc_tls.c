/*
 * httpc_tls.c: a request's set-up for the HTTP client (see httpc_int.h):
 * the options and their size, method and body, routing (tls_server_name,
 * connect_to), TLS trust and client credentials, bearer tokens, the files
 * read per request, and the per-host key. Calls httpc_recv.c only.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "httpc_int.h"

/* The size of the options a 3.0 module passes: every field up to arg. */
#define HTTPC_OPTS_3_0_SIZE (offsetof(struct plb_http_opts, arg) + sizeof(void *))

/* Read the regular file path (at most max bytes) into *out (new,
 * NUL-terminated, length *len). 0 or -errno; -EAGAIN if it grew while read.
 * The O_NONBLOCK open keeps a FIFO from stalling the loop. */
static int
read_small_file(const char *path, size_t max, char **out, size_t *len)
{
    struct stat st;
    char *buf = NULL, extra;
    size_t n = 0, size;
    ssize_t r;
    int rc = -EINVAL, fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        goto fail;
    if ((size = (size_t)st.st_size) > max) {
        rc = -EFBIG;
        goto fail;
    }
    if (!(buf = core_malloc(size + 1))) {
        rc = -ENOMEM;
        goto fail;
    }
    while (n < size && ((r = read(fd, buf + n, size - n)) > 0 || (r < 0 && errno == EINTR)))
        n += r > 0 ? (size_t)r : 0;
    if (n < size || (r = read(fd, &extra, 1)) != 0) {
        rc = n < size || r > 0 ? -EAGAIN : -errno;
        goto fail;
    }
    buf[n] = '\0';
    close(fd);
    *out = buf;
    *len = n;
    return 0;
fail:
    if (buf) {
        explicit_bzero(buf, size);
        core_free(buf);
    }
    close(fd);
    return rc;
}

static int
add_header(plb_http_req *req, const char *line)
{
    struct curl_slist *l = curl_slist_append(req->headers, line);
    if (!l)
        return -ENOMEM;
    req->headers = l;
    return 0;
}

static int
has_header(const struct plb_http_opts *o, const char *name)
{
    size_t n = strlen(name);
    for (const char *const *h = o->headers; h && *h; h++)
        if (strncasecmp(*h, name, n) == 0 && (*h)[n] == ':')
            return 1;
    return 0;
}

/* "host:port" with a non-empty host and a port in 1..65535. */
static int
valid_host_port(const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1])
        return 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    return *end == '\0' && port > 0 && port <= 65535;
}

/* Point SNI and verification at o->tls_server_name and/or the TCP connection
 * at o->connect_to. 0 or -errno. */
static int
setup_routing(plb_http_req *req, const struct plb_http_opts *o)
{
    CURLU *u = NULL;
    char *host = NULL, *port = NULL, *eport = NULL, *url = NULL, *line = NULL;
    CURLUcode uc = CURLUE_OK;
    int rc = -EINVAL;

    if (o->connect_to && !valid_host_port(o->connect_to))
        return -EINVAL;
    if (!o->tls_server_name) {
        if (!o->connect_to)
            return 0;
        /* Any host and port of this request goes to connect_to. */
        if (!(line = core_asprintf("::%s", o->connect_to)))
            return -ENOMEM;
    } else {
        if (!*o->tls_server_name || strpbrk(o->tls_server_name, ":/@[] \r\n"))
            return -EINVAL;
        if (!(u = curl_url()))
            return -ENOMEM;
        if ((uc = curl_url_set(u, CURLUPART_URL, o->url, 0)) != CURLUE_OK ||
            (uc = curl_url_get(u, CURLUPART_HOST, &host, 0)) != CURLUE_OK ||
            (uc = curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) != CURLUE_OK)
            goto fail;
        uc = curl_url_get(u, CURLUPART_PORT, &eport, 0); /* explicit port or none */
        if (uc != CURLUE_OK && uc != CURLUE_NO_PORT)
            goto fail;
        uc = CURLUE_OK;
        /* The Host header stays the URL's, as with any other client. */
        if (!has_header(o, "Host")) {
            char *h =
                eport ? core_asprintf("Host: %s:%s", host, eport) : core_asprintf("Host: %s", host);
            if (!h || add_header(req, h) < 0) {
                core_free(h);
                rc = -ENOMEM;
                goto fail;
            }
            core_free(h);
        }
        if ((uc = curl_url_set(u, CURLUPART_HOST, o->tls_server_name, 0)) != CURLUE_OK ||
            (uc = curl_url_get(u, CURLUPART_URL, &url, 0)) != CURLUE_OK)
            goto fail;
        line = o->connect_to ? core_asprintf("%s:%s:%s", o->tls_server_name, port, o->connect_to)
                             : core_asprintf("%s:%s:%s:%s", o->tls_server_name, port, host, port);
        if (!line) {
            rc = -ENOMEM;
            goto fail;
        }
        if (curl_easy_setopt(req->easy, CURLOPT_URL, url) != CURLE_OK) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    struct curl_slist *l = curl_slist_append(NULL, line);
    if (!l) {
        rc = -ENOMEM;
        goto fail;
    }
    req->connect_to = l;
    rc = curl_easy_setopt(req->easy, CURLOPT_CONNECT_TO, l) == CURLE_OK ? 0 : -ENOMEM;
fail:
    if (uc == CURLUE_OUT_OF_MEMORY)
        rc = -ENOMEM;
    core_free(line);
    curl_free(url);
    curl_free(eport);
    curl_free(port);
    curl_free(host);
    curl_url_cleanup(u);
    return rc;
}

static int
setup_method(plb_http_req *req, const struct plb_http_opts *o)
{
    CURL *e = req->easy;
    const char *m = o->method ? o->method : "GET";
    int ok = 1;
    if (!*m || strpbrk(m, " \t\r\n"))
        return -EINVAL;
    if (o->body || o->body_len) {
        if (!o->body)
            return -EINVAL;
        ok =
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len) == CURLE_OK &&
            curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, o->body) == CURLE_OK;
        if (ok && strcmp(m, "POST") != 0)
            ok = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m) == CURLE_OK;
    } else if (strcmp(m, "POST") == 0) {
        ok = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, "") == CURLE_OK;
    } else if (strcmp(m, "HEAD") == 0) {
        ok = curl_easy_setopt(e, CURLOPT_NOBODY, 1L) == CURLE_OK;
    } else if (strcmp(m, "GET") != 0) {
        ok = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m) == CURLE_OK;
    }
    return ok ? 0 : -ENOMEM;
}

/* Validate a token and add it as the Authorization header. 0, -EINVAL or
 * -ENOMEM; tok is left alone. */
static int
add_bearer(plb_http_req *req, char *tok, size_t len)
{
    while (len > 0 && strchr(" \t\r\n", tok[len - 1]))
        len--;
    tok[len] = '\0';
    if (len == 0 || strpbrk(tok, "\r\n") || strlen(tok) != len)
        return -EINVAL;
    char *h = core_asprintf("Authorization: Bearer %s", tok);
    if (!h)
        return -ENOMEM;
    int rc = add_header(req, h);
    explicit_bzero(h, strlen(h));
    core_free(h);
    return rc;
}

static int
set_blob(CURL *e, CURLoption opt, CURLoption type_opt, char *pem, size_t len)
{
    struct curl_blob b = {.data = pem, .len = len, .flags = CURL_BLOB_COPY};
    if (curl_easy_setopt(e, opt, &b) != CURLE_OK)
        return -ENOMEM;
    if (type_opt && curl_easy_setopt(e, type_opt, "PEM") != CURLE_OK)
        return -ENOMEM;
    return 0;
}

/* Read path and hand it to curl as the PEM blob opt (0 or -errno). */
static int
load_pem(plb_http_req *req, const char *path, CURLoption opt, CURLoption type_opt)
{
    char *data;
    size_t len;
    int rc = read_small_file(path, HTTPC_MAX_PEM_FILE, &data, &len);
    if (rc < 0)
        return rc;
    rc = set_blob(req->easy, opt, type_opt, data, len);
    explicit_bzero(data, len);
    core_free(data);
    return rc;
}

/* Read the files o names into the request. 0, -ENOMEM (the request fails
 * to start) or 1 when a file is unusable (req->resp has the local error). */
int
httpc_setup_files(plb_http_req *req, const struct plb_http_opts *o)
{
    const char *path = o->bearer_token_file;
    char *data;
    size_t len;
    int rc = 0;

    if (path && (rc = read_small_file(path, HTTPC_MAX_TOKEN_FILE, &data, &len)) == 0) {
        rc = add_bearer(req, data, len);
        explicit_bzero(data, len);
        core_free(data);
    }
    if (rc == 0 && (path = o->cert_file))
        rc = load_pem(req, path, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERTTYPE);
    if (rc == 0 && (path = o->key_file))
        rc = load_pem(req, path, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEYTYPE);
    if (rc == 0 || rc == -ENOMEM)
        return rc;
    req->resp.error = PLB_HTTP_E_LOCAL;
    if (path == o->bearer_token_file && rc == -EINVAL)
        httpc_set_text(req, "%s: empty or not a bearer token", path);
    else
        httpc_set_text(req, "%s: %s", path, strerror(-rc));
    return 1;
}

/* Whether libcurl's TLS is OpenSSL, whose connection tls_chose_h2 reads. */
static int
curl_tls_is_openssl(void)
{
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    return v && v->ssl_version && strncmp(v->ssl_version, "OpenSSL/", 8) == 0;
}

/* Everything but files. 0 or -errno. */
int
httpc_setup_easy(plb_http_req *req, const struct plb_http_opts *o)
{
    CURL *e = req->easy;
    int rc;
    long cto = o->connect_timeout_ms ? (long)o->connect_timeout_ms : HTTPC_CONNECT_MS_DEFAULT;

    if (curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)(void *)req) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_URL, o->url) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->errbuf) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PROXY, "") != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, httpc_on_write) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEDATA, req) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, httpc_on_header) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_HEADERDATA, req) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, httpc_on_prereq) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PREREQDATA, req) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, cto) != CURLE_OK ||
        /* Long watches: notice a peer that vanished without a FIN. */
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms) != CURLE_OK)
        return -ENOMEM;
    /* Neither an idle connection nor a running HTTP/2 one is taken, and
     * this one is closed after the answer, not kept for the next. */
    if (o->fresh_connection && (curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
                                curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK))
        return -ENOMEM;
    /* HTTP/2 only where tls_chose_h2 can tell it from HTTP/1. */
    if (req->https && !curl_tls_is_openssl() &&
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1) != CURLE_OK)
        return -ENOMEM;
    if ((rc = setup_method(req, o)) < 0)
        return rc;
    if ((rc = setup_routing(req, o)) < 0)
        return rc;
    if (o->ca_file || o->ca_pem) {
        /* Only the given bundle, not the system store beside it. */
        if (curl_easy_setopt(e, CURLOPT_CAPATH, NULL) != CURLE_OK)
            return -ENOMEM;
        if (o->ca_file && curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file) != CURLE_OK)
            return -ENOMEM;
        if (o->ca_pem) {
            if (curl_easy_setopt(e, CURLOPT_CAINFO, NULL) != CURLE_OK ||
                set_blob(e, CURLOPT_CAINFO_BLOB, 0, (char *)(uintptr_t)o->ca_pem,
                         strlen(o->ca_pem)) < 0)
                return -ENOMEM;
        }
    }
    if (o->insecure_skip_verify && (curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L) != CURLE_OK ||
                                    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L) != CURLE_OK))
        return -ENOMEM;
    if (o->cert_pem && set_blob(e, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERTTYPE,
                                (char *)(uintptr_t)o->cert_pem, strlen(o->cert_pem)) < 0)
        return -ENOMEM;
    if (o->key_pem && set_blob(e, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEYTYPE,
                               (char *)(uintptr_t)o->key_pem, strlen(o->key_pem)) < 0)
        return -ENOMEM;
    for (const char *const *h = o->headers; h && *h; h++) {
        if (strpbrk(*h, "\r\n") || !strchr(*h, ':'))
            return -EINVAL;
        if ((rc = add_header(req, *h)) < 0)
            return rc;
    }
    if (!has_header(o, "Expect") && (rc = add_header(req, "Expect:")) < 0)
        return rc;
    if (o->bearer_token) {
        char *tok = core_strdup(o->bearer_token);
        if (!tok)
            return -ENOMEM;
        size_t len = strlen(tok);
        rc = add_bearer(req, tok, len);
        explicit_bzero(tok, len);
        core_free(tok);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* A size some version of the options has: 3.0's, or at least ours. */
int
httpc_opts_size_ok(size_t size)
{
    return size == HTTPC_OPTS_3_0_SIZE || size >= sizeof(struct plb_http_opts);
}

/* o in a structure of the daemon's size: fields beyond o->size zero. Returns full, or NULL when
 * o is NULL or of no version's size. */
const struct plb_http_opts *
httpc_opts_full(const struct plb_http_opts *o, struct plb_http_opts *full)
{
    if (!o || !httpc_opts_size_ok(o->size))
        return NULL;
    memset(full, 0, sizeof(*full));
    memcpy(full, o, o->size < sizeof(*full) ? o->size : sizeof(*full));
    full->size = sizeof(*full);
    return full;
}

int
httpc_valid_opts(const struct plb_http_opts *o)
{
    if (!o || !o->url || !o->done)
        return 0;
    if (strncasecmp(o->url, "http://", 7) != 0 && strncasecmp(o->url, "https://", 8) != 0)
        return 0;
    switch (o->body_mode) {
    case PLB_HTTP_BUFFER:
        return 1;
    case PLB_HTTP_CHUNKS:
    case PLB_HTTP_LINES:
        return o->on_data != NULL;
    }
    return 0;
}

/* The per-host cap's key of a request: scheme, host and port of url, and
 * connect_to. New string, or NULL on ENOMEM; -EINVAL in *rc when curl
 * cannot parse the URL. */
char *
httpc_host_key(const char *url, const char *connect_to, int *rc)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *key = NULL;
    CURLUcode uc;
    *rc = -ENOMEM;
    if (!u)
        return NULL;
    if ((uc = curl_url_set(u, CURLUPART_URL, url, 0)) != CURLUE_OK ||
        (uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0)) != CURLUE_OK ||
        (uc = curl_url_get(u, CURLUPART_HOST, &host, 0)) != CURLUE_OK ||
        (uc = curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) != CURLUE_OK) {
        if (uc != CURLUE_OUT_OF_MEMORY)
            *rc = -EINVAL;
        goto out;
    }
    key = connect_to ? core_asprintf("%s://%s:%s>%s", scheme, host, port, connect_to)
                     : core_asprintf("%s://%s:%s", scheme, host, port);
    if (key)
        *rc = 0;
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return key;
}
