/*
 * hz_cert.c: the certificates of an https service named rather than
 * numbered (hccm's http-certificates takes IDs or names). A name is
 * looked up with GET /certificates?name= and its ID kept in the module's
 * index of names (struct hz_certs, an hz_keytab), so the steady state
 * sends no request for it. Pure: the reconcile makes the request (its
 * CERTS step) and hands the answer here.
 *
 * A managed certificate (certificate-type managed) is looked up the same
 * way, by the name it is made under; its ID is kept only once Hetzner has
 * issued it.
 *
 * The index is bounded both ways. A name is dropped when Hetzner answers
 * that its ID is no certificate (a service refused with not_found:
 * hz_refusal.c calls hz_cert_forget), so a certificate deleted and
 * uploaded again under the same name is looked up again on the next
 * reconcile, without a restart. And it holds at most HZ_CERT_NAMES_MAX
 * names: each resolve or keep marks the names it touches; a new name that
 * finds the index full drops every name left unmarked since the last time
 * it was full (a second chance: no Service's sync referenced it in
 * between) and clears the marks of the rest. Should every name still be
 * marked, the new one is not kept (its ID is still set where it is
 * referenced, and looked up again next time).
 */
#include <errno.h>
#include <string.h>

#include "hz.h"
#include "hz_keytab.h"

/* One name and its ID. */
struct cert_ent {
    char *name; /* owned; the key */
    int64_t id;
    int used; /* referenced since the index was last full */
};

struct hz_certs {
    struct hz_keytab t; /* name -> struct cert_ent (owned) */
};

static void
ent_free(struct cert_ent *e)
{
    if (e)
        hz_free(e->name);
    hz_free(e);
}

void
hz_cert_free(struct hz_certs *c)
{
    size_t pos = 0;
    struct cert_ent *e;
    if (!c)
        return;
    while ((e = hz_keytab_next(&c->t, &pos)))
        ent_free(e);
    hz_keytab_fini(&c->t);
    hz_free(c);
}

size_t
hz_cert_count(const struct hz_certs *c)
{
    return c ? c->t.n : 0;
}

/* Drop every unmarked name of c and unmark the others: the marked ones
 * move to a new table (the walk needs the old one unchanged). Without the
 * memory for it, c stays as it is (full). */
static void
cert_sweep(struct hz_certs *c)
{
    struct hz_keytab kept = {0};
    struct cert_ent *e;
    size_t pos = 0;
    while ((e = hz_keytab_next(&c->t, &pos)))
        if (e->used && hz_keytab_put(&kept, e->name, e, NULL) < 0) {
            hz_keytab_fini(&kept);
            return;
        }
    pos = 0;
    while ((e = hz_keytab_next(&c->t, &pos))) {
        if (e->used)
            e->used = 0;
        else
            ent_free(e);
    }
    hz_keytab_fini(&c->t);
    c->t = kept;
}

size_t
hz_cert_resolve(struct hz_certs *cache, struct hz_http *hs, size_t n)
{
    size_t unknown = 0;
    for (size_t e = 0; e < n; e++) {
        struct hz_http *h = &hs[e];
        for (size_t i = 0; h->certs && i < h->ncerts; i++) {
            struct cert_ent *c = cache ? hz_keytab_get(&cache->t, h->certs[i]) : NULL;
            if (c)
                c->used = 1;
            if (c && !h->cert_ids[i])
                h->cert_ids[i] = c->id;
            unknown += h->cert_ids[i] == 0;
        }
    }
    return unknown;
}

size_t
hz_cert_forget(struct hz_certs *cache, const struct hz_http *hs, size_t n)
{
    size_t dropped = 0;
    for (size_t e = 0; cache && e < n; e++) {
        const struct hz_http *h = &hs[e];
        for (size_t i = 0; h->certs && i < h->ncerts; i++) {
            struct cert_ent *c = hz_keytab_del(&cache->t, h->certs[i]);
            dropped += c != NULL;
            ent_free(c);
        }
    }
    return dropped;
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

/* Index name's id in *cache (made when NULL), marked; a full index is
 * swept first, and a name it has no room for is not kept. 0 or -ENOMEM. */
static int
cert_put(struct hz_certs **cache, const char *name, int64_t id)
{
    struct cert_ent *e;
    if (!*cache && !(*cache = hz_calloc(sizeof(**cache))))
        return -ENOMEM;
    if ((e = hz_keytab_get(&(*cache)->t, name))) {
        e->id = id;
        e->used = 1;
        return 0;
    }
    if ((*cache)->t.n >= HZ_CERT_NAMES_MAX) {
        cert_sweep(*cache);
        if ((*cache)->t.n >= HZ_CERT_NAMES_MAX)
            return 0;
    }
    if (!(e = hz_calloc(sizeof(*e))) || !(e->name = hz_strdup(name)))
        goto fail;
    e->id = id;
    e->used = 1;
    if (hz_keytab_put(&(*cache)->t, e->name, e, NULL) < 0)
        goto fail;
    return 0;
fail:
    ent_free(e);
    return -ENOMEM;
}

int64_t
hz_cert_keep(struct hz_certs **cache, struct hz_http *hs, size_t n, const char *name, int64_t id)
{
    if (cert_put(cache, name, id) < 0)
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
hz_cert_learn(struct hz_certs **cache, struct hz_http *hs, size_t n, const char *name,
              const json_t *body)
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
