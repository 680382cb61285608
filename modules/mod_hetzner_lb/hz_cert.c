/*
 * hz_cert.c: the certificates of an https service named rather than
 * numbered (hccm's http-certificates takes IDs or names). A name is
 * looked up once, with GET /certificates?name=, and its ID kept for the
 * daemon's life in a JSON object name -> ID (as the networks' IDs are), so
 * the steady state sends no request for it. Pure: the reconcile makes the
 * request (its CERTS step) and hands the answer here.
 *
 * A certificate deleted and uploaded again under the same name gets a new
 * ID, which this daemon does not learn until it restarts: Hetzner then
 * refuses the stale ID, and the refusal is the Service's warning Event.
 */
#include <errno.h>
#include <string.h>

#include "hz.h"

size_t
hz_cert_resolve(const json_t *cache, struct hz_http *h)
{
    size_t unknown = 0;
    for (size_t i = 0; h->certs && i < h->ncerts; i++) {
        json_t *id = h->cert_ids[i] ? NULL : json_object_get(cache, h->certs[i]);
        if (json_is_integer(id))
            h->cert_ids[i] = json_integer_value(id);
        unknown += h->cert_ids[i] == 0;
    }
    return unknown;
}

const char *
hz_cert_next_unknown(const struct hz_http *h, size_t *pos)
{
    for (; h->certs && *pos < h->ncerts; (*pos)++) {
        size_t i = *pos, j;
        if (h->cert_ids[i])
            continue;
        for (j = 0; j < i && (h->cert_ids[j] || strcmp(h->certs[j], h->certs[i]) != 0); j++)
            ;
        if (j == i) { /* the first reference of this name */
            (*pos)++;
            return h->certs[i];
        }
    }
    return NULL;
}

int64_t
hz_cert_learn(json_t **cache, struct hz_http *h, const char *name, const json_t *body)
{
    const json_t *id =
        json_object_get(json_array_get(json_object_get(body, "certificates"), 0), "id");
    int64_t v = json_is_integer(id) ? json_integer_value(id) : 0;
    if (v <= 0)
        return 0;
    if (!*cache && !(*cache = json_object()))
        return -ENOMEM;
    if (json_object_set_new(*cache, name, json_integer(v)) < 0)
        return -ENOMEM;
    for (size_t i = 0; h->certs && i < h->ncerts; i++)
        if (!h->cert_ids[i] && strcmp(h->certs[i], name) == 0)
            h->cert_ids[i] = v;
    return v;
}
