/* TLS: a throw-away CA with a serving and a client certificate, the server
 * SSL_CTX, and client-certificate identity for requests. */
#include "fk.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static int
add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *ext;
    int r;

    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return -1;
    r = X509_add_ext(cert, ext, -1) == 1 ? 0 : -1;
    X509_EXTENSION_free(ext);
    return r;
}

/* A new certificate for key, signed by issuer/issuer_key (self-signed when
 * issuer is NULL). kind: 0 CA, 1 server, 2 client. */
static X509 *
make_cert(EVP_PKEY *key, const char *cn, const char *org, X509 *issuer, EVP_PKEY *issuer_key,
          int kind)
{
    X509 *cert = X509_new();
    X509_NAME *name;
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    ASN1_INTEGER *sn = NULL;

    if (!cert)
        return NULL;
    if (RAND_bytes(serial, sizeof(serial)) != 1)
        goto fail;
    serial[0] &= 0x7f; /* positive */
    bn = BN_bin2bn(serial, sizeof(serial), NULL);
    sn = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
    if (!sn || X509_set_serialNumber(cert, sn) != 1)
        goto fail;
    if (X509_set_version(cert, 2) != 1 || !X509_gmtime_adj(X509_getm_notBefore(cert), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(cert), 365L * 24 * 3600) ||
        X509_set_pubkey(cert, key) != 1)
        goto fail;
    name = X509_get_subject_name(cert);
    if (org && X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)org, -1,
                                          -1, 0) != 1)
        goto fail;
    if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
                                   0) != 1)
        goto fail;
    if (X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name) != 1)
        goto fail;
    if (!issuer) {
        issuer = cert;
        issuer_key = key;
    }
    if (add_ext(cert, issuer, NID_subject_key_identifier, "hash") < 0 ||
        add_ext(cert, issuer, NID_authority_key_identifier, "keyid:always") < 0)
        goto fail;
    if (kind == 0) {
        if (add_ext(cert, issuer, NID_basic_constraints, "critical,CA:TRUE") < 0 ||
            add_ext(cert, issuer, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature") <
                0)
            goto fail;
    } else {
        if (add_ext(cert, issuer, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
            add_ext(cert, issuer, NID_key_usage, "critical,digitalSignature,keyEncipherment") < 0 ||
            add_ext(cert, issuer, NID_ext_key_usage, kind == 1 ? "serverAuth" : "clientAuth") < 0)
            goto fail;
        if (kind == 1 &&
            add_ext(cert, issuer, NID_subject_alt_name,
                    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                    "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,"
                    "IP:127.0.0.1,IP:::1") < 0)
            goto fail;
    }
    if (X509_sign(cert, issuer_key, EVP_sha256()) == 0)
        goto fail;
    ASN1_INTEGER_free(sn);
    BN_free(bn);
    return cert;
fail:
    ASN1_INTEGER_free(sn);
    BN_free(bn);
    X509_free(cert);
    return NULL;
}

static int
write_pem(const char *dir, const char *file, X509 *cert, EVP_PKEY *key)
{
    char path[4096];
    FILE *f;
    int ok;

    snprintf(path, sizeof(path), "%s/%s", dir, file);
    f = fopen(path, "w");
    if (!f)
        return -1;
    if (key)
        chmod(path, 0600);
    ok = cert ? PEM_write_X509(f, cert) : PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
    if (fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

/* See fk.h. */
int
fk_tls_generate(const char *dir)
{
    EVP_PKEY *ca_key = NULL, *srv_key = NULL, *cli_key = NULL;
    X509 *ca = NULL, *srv = NULL, *cli = NULL;
    int r = -1;

    ca_key = EVP_EC_gen("P-256");
    srv_key = EVP_EC_gen("P-256");
    cli_key = EVP_EC_gen("P-256");
    if (!ca_key || !srv_key || !cli_key)
        goto out;
    ca = make_cert(ca_key, "prismlb-fake-kube-ca", NULL, NULL, NULL, 0);
    if (!ca)
        goto out;
    srv = make_cert(srv_key, "kube-apiserver", NULL, ca, ca_key, 1);
    cli = make_cert(cli_key, "prismlb-test-admin", "system:masters", ca, ca_key, 2);
    if (!srv || !cli)
        goto out;
    if (write_pem(dir, "ca.crt", ca, NULL) < 0 || write_pem(dir, "ca.key", NULL, ca_key) < 0 ||
        write_pem(dir, "server.crt", srv, NULL) < 0 ||
        write_pem(dir, "server.key", NULL, srv_key) < 0 ||
        write_pem(dir, "client.crt", cli, NULL) < 0 ||
        write_pem(dir, "client.key", NULL, cli_key) < 0)
        goto out;
    r = 0;
out:
    X509_free(ca);
    X509_free(srv);
    X509_free(cli);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(srv_key);
    EVP_PKEY_free(cli_key);
    return r;
}

/* See fk.h. */
SSL_CTX *
fk_tls_server_ctx(const char *cert_file, const char *key_file, const char *ca_file)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return NULL;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1)
        goto fail;
    if (ca_file) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca_file);
        if (!names || SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            goto fail;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
        /* Request a certificate and verify it when given; a client without
         * one may still authenticate with a bearer token. */
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    return ctx;
fail:
    ERR_print_errors_fp(stderr);
    SSL_CTX_free(ctx);
    return NULL;
}

static struct bufferevent *
tls_bevcb(struct event_base *base, void *arg)
{
    SSL *ssl = SSL_new(arg);
    struct bufferevent *bev;
    if (!ssl)
        return NULL;
    bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                         BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL; /* the bufferevent frees ssl on failure */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

/* See fk.h. */
void
fk_tls_attach(struct evhttp *http, SSL_CTX *ctx)
{
    evhttp_set_bevcb(http, tls_bevcb, ctx);
}

/* See fk.h. */
int
fk_tls_peer_user(struct evhttp_request *req, char *user, size_t len)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
    X509 *peer;

    if (!ssl)
        return 0;
    peer = SSL_get0_peer_certificate(ssl);
    if (!peer || SSL_get_verify_result(ssl) != X509_V_OK)
        return 0;
    if (X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, user, (int)len) < 0)
        return 0;
    return 1;
}
