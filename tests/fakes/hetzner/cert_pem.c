/* Certificates in PEM: parse and check an uploaded certificate and key, and
 * issue a self-signed one for a managed certificate (OpenSSL 3). Nothing
 * here touches the store or the network. */
#include "fake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define ISSUE_DAYS 90

/* ASN1_TIME as UNIX time; 0 if it cannot be read. */
static time_t
asn1_time(const ASN1_TIME *t)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return timegm(&tm);
}

/* Fill info from x: DNS names of the subjectAltName (else the subject's
 * CN), validity, SHA-256 fingerprint. 0 or -ENOMEM / -EIO. */
static int
info_from(X509 *x, struct hz_cert_info *info)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    int rc = -ENOMEM;
    memset(info, 0, sizeof(*info));
    if (!(info->domains = json_array()))
        goto out;
    for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans); i++) {
        const GENERAL_NAME *gn = sk_GENERAL_NAME_value(sans, i);
        if (gn->type != GEN_DNS)
            continue;
        const char *s = (const char *)ASN1_STRING_get0_data(gn->d.dNSName);
        int len = ASN1_STRING_length(gn->d.dNSName);
        if (json_array_append_new(info->domains, json_stringn(s, (size_t)len)) < 0)
            goto out;
    }
    if (json_array_size(info->domains) == 0) {
        char cn[256];
        int len = X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn,
                                            (int)sizeof(cn));
        if (len > 0 && json_array_append_new(info->domains, json_string(cn)) < 0)
            goto out;
    }
    info->not_before = asn1_time(X509_get0_notBefore(x));
    info->not_after = asn1_time(X509_get0_notAfter(x));
    rc = -EIO;
    if (!info->not_before || !info->not_after || X509_digest(x, EVP_sha256(), md, &mdlen) != 1)
        goto out;
    for (unsigned int i = 0; i < mdlen && 3 * i + 3 <= sizeof(info->fingerprint); i++)
        snprintf(info->fingerprint + 3 * i, 4, i + 1 < mdlen ? "%02x:" : "%02x", md[i]);
    rc = 0;
out:
    GENERAL_NAMES_free(sans);
    if (rc < 0) {
        json_decref(info->domains);
        info->domains = NULL;
    }
    return rc;
}

int
hz_pem_check(const char *cert_pem, const char *key_pem, time_t now, struct hz_cert_info *info,
             const char **field, char *msg, size_t len)
{
    BIO *cb = BIO_new_mem_buf(cert_pem, -1);
    BIO *kb = BIO_new_mem_buf(key_pem, -1);
    X509 *leaf = NULL, *more = NULL;
    EVP_PKEY *key = NULL;
    int rc = -1, n = 0;
    *field = "certificate";
    memset(info, 0, sizeof(*info));
    if (!cb || !kb) {
        snprintf(msg, len, "out of memory");
        goto out;
    }
    if (!(leaf = PEM_read_bio_X509(cb, NULL, NULL, NULL))) {
        snprintf(msg, len, "is not a PEM encoded X.509 certificate");
        goto out;
    }
    /* The rest of the chain, if any, must parse as well. */
    while ((more = PEM_read_bio_X509(cb, NULL, NULL, NULL))) {
        X509_free(more);
        if (++n > 16) {
            snprintf(msg, len, "has more than 16 certificates in its chain");
            goto out;
        }
    }
    unsigned long e = ERR_peek_last_error();
    if (e && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
        snprintf(msg, len, "has a chain certificate that is not valid PEM");
        goto out;
    }
    if (X509_cmp_time(X509_get0_notAfter(leaf), &now) <= 0) {
        snprintf(msg, len, "has expired");
        goto out;
    }
    *field = "private_key";
    if (!(key = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL))) {
        snprintf(msg, len, "is not a PEM encoded private key");
        goto out;
    }
    if (X509_check_private_key(leaf, key) != 1) {
        snprintf(msg, len, "does not match the certificate");
        goto out;
    }
    *field = "certificate";
    if (info_from(leaf, info) < 0) {
        snprintf(msg, len, "cannot be read (names, validity or digest)");
        goto out;
    }
    if (json_array_size(info->domains) == 0) {
        json_decref(info->domains);
        info->domains = NULL;
        snprintf(msg, len, "names no domain (no DNS subjectAltName, no common name)");
        goto out;
    }
    rc = 0;
out:
    ERR_clear_error();
    X509_free(leaf);
    EVP_PKEY_free(key);
    BIO_free(cb);
    BIO_free(kb);
    return rc;
}

/* subjectAltName value "DNS:a,DNS:b" for domains (new) or NULL. */
static char *
san_value(json_t *domains)
{
    size_t i, n = 1;
    json_t *d;
    json_array_foreach(domains, i, d) n += strlen(json_string_value(d)) + 5;
    char *out = malloc(n), *p = out;
    if (!out)
        return NULL;
    *p = '\0';
    json_array_foreach(domains, i, d)
    {
        int k = snprintf(p, n - (size_t)(p - out), "%sDNS:%s", i ? "," : "", json_string_value(d));
        if (k < 0 || (size_t)k >= n - (size_t)(p - out)) {
            free(out);
            return NULL;
        }
        p += k;
    }
    return out;
}

int
hz_pem_issue(json_t *domains, time_t now, char **pem, struct hz_cert_info *info)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_EXTENSION *ext = NULL;
    BIO *out = BIO_new(BIO_s_mem());
    char *san = san_value(domains);
    const char *cn = json_string_value(json_array_get(domains, 0));
    int rc = -EIO;
    *pem = NULL;
    memset(info, 0, sizeof(*info));
    if (!key || !x || !out || !san || !cn) {
        rc = -ENOMEM;
        goto out;
    }
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_NAME *name = X509_get_subject_name(x);
    if (X509_set_version(x, 2) != 1 ||
        ASN1_INTEGER_set_int64(X509_get_serialNumber(x), (int64_t)now) != 1 ||
        !X509_time_adj_ex(X509_getm_notBefore(x), 0, 0, &now) ||
        !X509_time_adj_ex(X509_getm_notAfter(x), ISSUE_DAYS, 0, &now) ||
        X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_UTF8, (const unsigned char *)cn,
                                   -1, -1, 0) != 1 ||
        X509_set_issuer_name(x, name) != 1 || X509_set_pubkey(x, key) != 1 ||
        !(ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_alt_name, san)) ||
        X509_add_ext(x, ext, -1) != 1 || X509_sign(x, key, EVP_sha256()) <= 0 ||
        PEM_write_bio_X509(out, x) != 1)
        goto out;
    char *data;
    long len = BIO_get_mem_data(out, &data);
    if (len <= 0)
        goto out;
    if (!(*pem = strndup(data, (size_t)len))) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = info_from(x, info)) < 0) {
        free(*pem);
        *pem = NULL;
    }
out:
    ERR_clear_error();
    X509_EXTENSION_free(ext);
    X509_free(x);
    EVP_PKEY_free(key);
    BIO_free(out);
    free(san);
    return rc;
}
