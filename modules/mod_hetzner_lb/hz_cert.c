/*
 * hz_cert.c: the certificates of an https service named rather than
 * numbered (hccm's http-certificates takes IDs or names). A name is
 * looked up once, with GET /certificates?name=, and its ID kept for the
 * daemon's life in a JSON object name -> ID (as the networks' IDs are), so
 * the steady state sends no request for it. Pure: the reconcile makes the
 * request (its CERTS step) and hands the answer here.
 *
 * A managed certificate (certificate-type managed) is looked up the same
 * way, by the name it is made under; its ID is kept only once Hetzner has
 * issued it.
 *
 * A certificate deleted and uploaded again under the same name gets a new
 * ID, which this daemon does not learn until it restarts: Hetzner then
 * refuses the stale ID, and the refusal is the Service's warning Event.
 */
#include <errno.h>
#include <string.h>

#include "hz.h"

size_t
hz_cert_resolve(const json_t *cache, struct hz_http *hs, size_t n)
{
    size_t unknown = 0;
    for (size_t e = 0; e < n; e++) {
        struct hz_http *h = &hs[e];
        for (size_t i = 0; h->certs && i < h->ncerts; i++) {
            json_t *id = h->cert_ids[i] ? NULL : json_object_get(cache, h->certs[i]);
            if (json_is_integer(id))
                h->cert_ids[i] = json_integer_value(id);
            unknown += h->cert_ids[i] == 0;
        }
    }
    return unknown;
}

/* The named reference k of hs (n entries), counted over the entries in
 * order: its entry into *e, its index in it into *i. 0 past the last. */
static int
ref_at(const struct hz_http *hs, size_t n, size_t k, size_t *e, size_t *i)
{
    for (*e = 0; *e < n; (*e)++) {
        size_t c = hs[*e].certs ? hs[*e].ncerts : 0;
        if (k < c) {
            *i = k;
            return 1;
        }
        k -= c;
    }
    return 0;
}

/* The name of reference k of hs when it is still without an ID, else
 * NULL (borrowed). */
static const char *
unknown_at(const struct hz_http *hs, size_t n, size_t k)
{
    size_t e, i;
    if (!ref_at(hs, n, k, &e, &i) || hs[e].cert_ids[i])
        return NULL;
    return hs[e].certs[i];
}

const char *
hz_cert_next_unknown(const struct hz_http *hs, size_t n, size_t *pos, size_t *at)
{
    size_t e, i;
    for (; ref_at(hs, n, *pos, &e, &i); (*pos)++) {
        const char *name = unknown_at(hs, n, *pos);
        int first = name != NULL;
        for (size_t k = 0; first && k < *pos; k++) {
            const char *prev = unknown_at(hs, n, k);
            first = !prev || strcmp(prev, name) != 0;
        }
        if (first) { /* the first reference of this name */
            if (at)
                *at = e;
            (*pos)++;
            return name;
        }
    }
    return NULL;
}

enum hz_cert_state
hz_cert_state_of(const json_t *cert, int64_t *id, const char **code, const char **message)
{
    const json_t *status = json_object_get(cert, "status");
    const json_t *err = json_object_get(status, "error");
    const char *issuance = json_string_value(json_object_get(status, "issuance"));
    *id = json_integer_value(json_object_get(cert, "id"));
    *code = json_string_value(json_object_get(err, "code"));
    *message = json_string_value(json_object_get(err, "message"));
    if (!json_is_object(cert) || *id <= 0)
        return HZ_CERT_NONE;
    /* an uploaded certificate has no status: it is there as it is */
    if (!json_is_object(status) || (issuance && strcmp(issuance, "completed") == 0))
        return HZ_CERT_READY;
    return issuance && strcmp(issuance, "failed") == 0 ? HZ_CERT_FAILED : HZ_CERT_PENDING;
}

int64_t
hz_cert_keep(json_t **cache, struct hz_http *hs, size_t n, const char *name, int64_t id)
{
    if (!*cache && !(*cache = json_object()))
        return -ENOMEM;
    if (json_object_set_new(*cache, name, json_integer(id)) < 0)
        return -ENOMEM;
    for (size_t e = 0; e < n; e++) {
        struct hz_http *h = &hs[e];
        for (size_t i = 0; h->certs && i < h->ncerts; i++)
            if (!h->cert_ids[i] && strcmp(h->certs[i], name) == 0)
                h->cert_ids[i] = id;
    }
    return id;
}

int64_t
hz_cert_learn(json_t **cache, struct hz_http *hs, size_t n, const char *name, const json_t *body)
{
    const char *code, *message;
    int64_t id;
    if (hz_cert_state_of(json_array_get(json_object_get(body, "certificates"), 0), &id, &code,
                         &message) != HZ_CERT_READY)
        return 0;
    return hz_cert_keep(cache, hs, n, name, id);
}

json_t *
hz_cert_managed_body(const struct hz_http *h)
{
    json_t *domains = hz_csv_json(h->domains);
    return domains
               ? json_pack("{s:s, s:s, s:o, s:{s:s}}", "name", h->certs[0], "type", "managed",
                           "domain_names", domains, "labels", HZ_LABEL_UID, h->uid ? h->uid : "")
               : NULL;
}

char *
hz_qenc(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *o = hz_calloc(strlen(s) * 3 + 1), *p = o;
    if (!o)
        return NULL;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            *p++ = (char)c;
        } else {
            *p++ = '%';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    return o;
}
