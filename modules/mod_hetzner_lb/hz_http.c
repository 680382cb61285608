/*
 * hz_http.c: hcloud-cloud-controller-manager's http and https services
 * and HTTP health checks (pure). The Service's protocol, http and
 * health-check annotations become one struct hz_http, the entry of the
 * desired balancer's https that every port of the Service takes, each port
 * with its own protocol; a service of a balancer is read from Hetzner's
 * JSON into the same struct, so that the plan compares like with like, and
 * the body of add_service or update_service is built from an entry and the
 * port's protocol.
 *
 * Every field at zero (or NULL) is Hetzner's default, so an unannotated
 * Service is a TCP service with a TCP health check on its nodePort, as
 * before these annotations were read, and costs no allocation.
 *
 * Hetzner's API has no "https" health check protocol: an HTTPS health
 * check is an HTTP one with tls set, which is also what hccm's
 * health-check-http-validate-certificate sends.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hz.h"

/* Hetzner's defaults of the fields left at zero. */
#define DEF_PATH "/"
#define DEF_CODES "2??,3??"
#define DEF_COOKIE "HCLBSTICKY"
#define DEF_LIFETIME 300
/* Bounds of what is read from an annotation; http.timeout_idle in the
 * range Hetzner takes, in seconds. */
#define IDLE_MIN 30
#define IDLE_MAX 300
#define MAX_CODES 32
#define MAX_CERTS 16
#define MAX_TEXT 1024

void
hz_http_clear(struct hz_http *h)
{
    hz_free_each(&h->hc_domain, &h->hc_path, &h->hc_codes, &h->cookie_name, &h->managed_name,
                 &h->domains, &h->uid, NULL);
    if (h->certs)
        hz_strv_free(h->certs, h->ncerts);
    hz_free(h->cert_ids);
    memset(h, 0, sizeof(*h));
}

/* Room for n certificates in h (zeroed; with their references when
 * refs). 0 or -ENOMEM. */
static int
certs_alloc(struct hz_http *h, size_t n, int refs)
{
    h->ncerts = n;
    if (!n)
        return 0;
    if (!(h->cert_ids = hz_calloc(n * sizeof(*h->cert_ids))) ||
        (refs && !(h->certs = hz_calloc(n * sizeof(*h->certs)))))
        return -ENOMEM;
    return 0;
}

int
hz_http_copy(const struct hz_http *src, struct hz_http *dst)
{
    *dst = *src;
    dst->hc_domain = dst->hc_path = dst->hc_codes = dst->cookie_name = NULL;
    dst->certs = NULL;
    dst->cert_ids = NULL;
    dst->managed_name = dst->domains = dst->uid = NULL;
    if ((src->hc_domain && !(dst->hc_domain = hz_strdup(src->hc_domain))) ||
        (src->hc_path && !(dst->hc_path = hz_strdup(src->hc_path))) ||
        (src->hc_codes && !(dst->hc_codes = hz_strdup(src->hc_codes))) ||
        (src->cookie_name && !(dst->cookie_name = hz_strdup(src->cookie_name))) ||
        (src->managed_name && !(dst->managed_name = hz_strdup(src->managed_name))) ||
        (src->domains && !(dst->domains = hz_strdup(src->domains))) ||
        (src->uid && !(dst->uid = hz_strdup(src->uid))) ||
        certs_alloc(dst, src->ncerts, src->certs != NULL) < 0)
        goto nomem;
    for (size_t i = 0; i < src->ncerts; i++) {
        dst->cert_ids[i] = src->cert_ids[i];
        if (src->certs && !(dst->certs[i] = hz_strdup(src->certs[i])))
            goto nomem;
    }
    return 0;
nomem:
    hz_http_clear(dst);
    return -ENOMEM;
}

const char *
hz_proto_name(int p)
{
    return p == HZ_PROTO_HTTPS ? "https" : p == HZ_PROTO_HTTP ? "http" : "tcp";
}

/* The protocol word s (any case when lax, as hccm reads annotations;
 * exactly Hetzner's words otherwise), or -1. */
static int
proto_of(const char *s, int lax)
{
    static const char *const names[] = {"tcp", "http", "https"};
    for (int i = 0; s && i < 3; i++)
        if (lax ? strcasecmp(s, names[i]) == 0 : strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* The values meant by the fields left at zero. */
static const char *
domain_of(const struct hz_http *h)
{
    return h->hc_domain ? h->hc_domain : "";
}
static const char *
path_of(const struct hz_http *h)
{
    return h->hc_path ? h->hc_path : DEF_PATH;
}
static const char *
codes_of(const struct hz_http *h)
{
    return h->hc_codes ? h->hc_codes : DEF_CODES;
}
static const char *
cookie_of(const struct hz_http *h)
{
    return h->cookie_name ? h->cookie_name : DEF_COOKIE;
}
static int
lifetime_of(const struct hz_http *h)
{
    return h->cookie_lifetime ? h->cookie_lifetime : DEF_LIFETIME;
}

/* ------------------------------------------------------------------ */
/* The Service's annotations                                            */

/* 1 when s holds a blank or a control character (Hetzner refuses them in
 * the words read here; the message would not show them). */
static int
has_blank(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f)
            return 1;
    return 0;
}

/* One status code pattern as Hetzner takes it: a digit 1 to 5, then two
 * digits or '?' ("200", "2??"). */
static int
code_ok(const char *s, size_t n)
{
    if (n != 3 || s[0] < '1' || s[0] > '5')
        return 0;
    for (size_t i = 1; i < 3; i++)
        if (s[i] != '?' && (s[i] < '0' || s[i] > '9'))
            return 0;
    return 1;
}

/* hccm's http-status-codes: a comma-separated list, each a code. NULL when
 * good, else why not (static). */
static const char *
codes_bad(const char *v)
{
    size_t n = 0;
    if (strlen(v) > MAX_TEXT)
        return "is too long";
    for (const char *p = v;; n++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (!code_ok(p, len))
            return "is not a comma-separated list of status codes such as 200 or 2??";
        if (n + 1 > MAX_CODES)
            return "lists more than 32 status codes";
        if (!c)
            return NULL;
        p = c + 1;
    }
}

/* A word annotation (no blanks, at most MAX_TEXT bytes; empty when
 * may_be_empty) into *out (new). 0 (also when bad or absent) or -ENOMEM. */
static int
word(const char *key, const char *v, int may_be_empty, char **out, hz_bad_fn bad, void *e)
{
    char msg[160];
    if (!v)
        return 0;
    if ((!*v && !may_be_empty) || has_blank(v) || strlen(v) > MAX_TEXT) {
        snprintf(msg, sizeof(msg), "\"%.64s\" must be %sa word without blanks", v,
                 may_be_empty ? "" : "non-empty, ");
        bad(e, key, msg);
        return 0;
    }
    return (*out = hz_strdup(v)) ? 0 : -ENOMEM;
}

/* A Go boolean annotation into *out (1 or 0; left when absent or bad). */
static void
go_bool(const char *key, const char *v, int *out, hz_bad_fn bad, void *e)
{
    char msg[128];
    int b;
    if (!v)
        return;
    if ((b = hz_go_bool(v)) < 0) {
        snprintf(msg, sizeof(msg), "\"%.64s\" is neither true nor false", v);
        bad(e, key, msg);
        return;
    }
    *out = b;
}

/* The health check's protocol and port, and its HTTP request. */
static int
annot_health(const char *(*get)(void *, const char *), void *arg, struct hz_http *h, hz_bad_fn bad,
             void *e)
{
    char msg[160];
    const char *v;
    int https = 0, validate = -1, rc;
    if ((v = get(arg, HZ_HCCM_HC_PROTOCOL))) {
        int p = proto_of(v, 1);
        if (p < 0) {
            snprintf(msg, sizeof(msg), "\"%.64s\" is not a protocol (tcp, http, https)", v);
            bad(e, HZ_HCCM_HC_PROTOCOL, msg);
        }
        h->hc_http = p > 0;
        https = p == HZ_PROTO_HTTPS;
    }
    if ((v = get(arg, HZ_HCCM_HC_PORT))) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (end == v || *end || errno || v[0] < '0' || v[0] > '9' || n < 1 || n > 65535) {
            snprintf(msg, sizeof(msg), "\"%.64s\" is not a port (1 to 65535)", v);
            bad(e, HZ_HCCM_HC_PORT, msg);
        } else {
            h->hc_port = (int)n;
        }
    }
    go_bool(HZ_HCCM_HC_VALIDATE, get(arg, HZ_HCCM_HC_VALIDATE), &validate, bad, e);
    if (https && validate == 0) {
        snprintf(msg, sizeof(msg),
                 "\"false\" and %s \"https\" disagree (an https health check is an HTTP one "
                 "over TLS)",
                 HZ_HCCM_HC_PROTOCOL);
        bad(e, HZ_HCCM_HC_VALIDATE, msg);
    }
    h->hc_tls = https || validate == 1;
    if ((rc = word(HZ_HCCM_HC_DOMAIN, get(arg, HZ_HCCM_HC_DOMAIN), 1, &h->hc_domain, bad, e)) < 0)
        return rc;
    if ((v = get(arg, HZ_HCCM_HC_PATH)) && v[0] != '/') {
        snprintf(msg, sizeof(msg), "\"%.64s\" must start with /", v);
        bad(e, HZ_HCCM_HC_PATH, msg);
    } else if ((rc = word(HZ_HCCM_HC_PATH, v, 0, &h->hc_path, bad, e)) < 0) {
        return rc;
    }
    if ((v = get(arg, HZ_HCCM_HC_STATUS))) {
        const char *why = codes_bad(v);
        if (why) {
            snprintf(msg, sizeof(msg), "\"%.64s\" %s", v, why);
            bad(e, HZ_HCCM_HC_STATUS, msg);
        } else if (!(h->hc_codes = hz_strdup(v))) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* hccm's http-certificates: comma-separated IDs (digits) or names, each
 * at least one character without control characters, at most MAX_CERTS.
 * The references go to h (new), an ID's also to its cert_ids. 0 (also
 * when bad or absent) or -ENOMEM. */
static int
annot_certs(const char *v, struct hz_http *h, hz_bad_fn bad, void *e)
{
    char msg[192];
    size_t n = 1;
    if (!v)
        return 0;
    for (const char *p = v; *p; p++) {
        n += *p == ',';
        if ((unsigned char)*p < ' ' || *p == 0x7f) {
            snprintf(msg, sizeof(msg), "\"%.64s\" holds a control character", v);
            bad(e, HZ_HCCM_CERTS, msg);
            return 0;
        }
    }
    if (n > MAX_CERTS || strlen(v) > MAX_TEXT) {
        snprintf(msg, sizeof(msg), "\"%.64s\" lists more than %d certificates", v, MAX_CERTS);
        bad(e, HZ_HCCM_CERTS, msg);
        return 0;
    }
    if (certs_alloc(h, n, 1) < 0)
        return -ENOMEM;
    n = 0;
    for (const char *p = v;; p++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (!len) {
            snprintf(msg, sizeof(msg), "\"%.64s\" names an empty certificate", v);
            bad(e, HZ_HCCM_CERTS, msg);
            return 0;
        }
        if (!(h->certs[n] = hz_strndup(p, len)))
            return -ENOMEM;
        /* hccm's rule: what parses as a number is an ID, the rest names */
        if (strspn(h->certs[n], "0123456789") == len && len < 19)
            h->cert_ids[n] = strtoll(h->certs[n], NULL, 10);
        n++;
        if (!c)
            return 0;
        p = c;
    }
}

/* A managed certificate's name (at most 128 characters without control
 * characters; NULL: hccm's default, set by hz_http_name_managed) and its
 * domains (comma-separated, 1 to 100 DNS names without blanks, "*." first
 * allowed; required). 0 (also when bad) or -ENOMEM. */
static int
annot_managed(const char *(*get)(void *, const char *), void *arg, struct hz_http *h, hz_bad_fn bad,
              void *e)
{
    const char *name = get(arg, HZ_HCCM_MANAGED_NAME), *v = get(arg, HZ_HCCM_MANAGED_DOMAINS);
    char msg[192];
    size_t n = 1;
    if (name) {
        int ok = *name && strlen(name) <= 128;
        for (const char *p = name; ok && *p; p++)
            ok = (unsigned char)*p >= ' ' && *p != 0x7f;
        if (!ok) {
            snprintf(msg, sizeof(msg),
                     "\"%.64s\" is not a certificate name (1 to 128 characters, no control "
                     "characters)",
                     name);
            bad(e, HZ_HCCM_MANAGED_NAME, msg);
        } else if (!(h->managed_name = hz_strdup(name))) {
            return -ENOMEM;
        }
    }
    if (!v) {
        snprintf(msg, sizeof(msg), "is needed with %s \"managed\" (the certificate's domains)",
                 HZ_HCCM_CERT_TYPE);
        bad(e, HZ_HCCM_MANAGED_DOMAINS, msg);
        return 0;
    }
    for (const char *p = v; *p; p++)
        n += *p == ',';
    if (!*v || has_blank(v) || strlen(v) > MAX_TEXT || n > 100 || strstr(v, ",,") ||
        v[strlen(v) - 1] == ',' || v[0] == ',') {
        snprintf(msg, sizeof(msg),
                 "\"%.64s\" is not a comma-separated list of 1 to 100 domain names", v);
        bad(e, HZ_HCCM_MANAGED_DOMAINS, msg);
        return 0;
    }
    return (h->domains = hz_strdup(v)) ? 0 : -ENOMEM;
}

/* The https parts: redirect, certificate type and certificates, and what
 * Hetzner refuses of them on another protocol. 0 or -ENOMEM. */
static int
annot_https(const char *(*get)(void *, const char *), void *arg, struct hz_http *h, hz_bad_fn bad,
            void *e)
{
    char msg[192];
    const char *v;
    go_bool(HZ_HCCM_REDIRECT, get(arg, HZ_HCCM_REDIRECT), &h->redirect, bad, e);
    if ((v = get(arg, HZ_HCCM_CERT_TYPE)) && strcasecmp(v, "uploaded") != 0) {
        if (strcasecmp(v, "managed") == 0) {
            h->managed = 1;
        } else {
            snprintf(msg, sizeof(msg), "\"%.64s\" is not a certificate type (uploaded, managed)",
                     v);
            bad(e, HZ_HCCM_CERT_TYPE, msg);
        }
    }
    if (h->managed) {
        if (annot_managed(get, arg, h, bad, e) < 0)
            return -ENOMEM;
        if (get(arg, HZ_HCCM_CERTS)) {
            snprintf(msg, sizeof(msg), "%s \"managed\" makes its own certificate (give one)",
                     HZ_HCCM_CERT_TYPE);
            bad(e, HZ_HCCM_CERTS, msg);
        }
    } else if (annot_certs(get(arg, HZ_HCCM_CERTS), h, bad, e) < 0) {
        return -ENOMEM;
    }
    if (h->protocol == HZ_PROTO_HTTPS && !get(arg, HZ_HCCM_CERTS) && !h->managed) {
        snprintf(msg, sizeof(msg), "\"https\" needs a certificate (%s, or %s \"managed\")",
                 HZ_HCCM_CERTS, HZ_HCCM_CERT_TYPE);
        bad(e, HZ_HCCM_PROTOCOL, msg);
    }
    snprintf(msg, sizeof(msg), "applies to https services only (%s is %s)", HZ_HCCM_PROTOCOL,
             hz_proto_name(h->protocol));
    if (h->protocol != HZ_PROTO_HTTPS && get(arg, HZ_HCCM_CERTS))
        bad(e, HZ_HCCM_CERTS, msg);
    if (h->protocol != HZ_PROTO_HTTPS && h->managed)
        bad(e, HZ_HCCM_CERT_TYPE, msg);
    if (h->protocol != HZ_PROTO_HTTPS && h->redirect)
        bad(e, HZ_HCCM_REDIRECT, msg);
    return 0;
}

int
hz_http_annot(const char *(*get)(void *arg, const char *key), void *arg, struct hz_http *out,
              hz_bad_fn bad, void *e)
{
    static const char *const web_only[] = {HZ_HCCM_COOKIE_NAME, HZ_HCCM_COOKIE_LIFETIME,
                                           HZ_HCCM_STICKY, HZ_HCCM_TIMEOUT_IDLE};
    struct hz_http h = {0};
    char msg[160];
    const char *v;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((v = get(arg, HZ_HCCM_PROTOCOL)) && (h.protocol = proto_of(v, 1)) < 0) {
        snprintf(msg, sizeof(msg), "\"%.64s\" is not a protocol (tcp, http, https)", v);
        bad(e, HZ_HCCM_PROTOCOL, msg);
        h.protocol = HZ_PROTO_TCP;
    }
    if ((rc = annot_health(get, arg, &h, bad, e)) < 0)
        goto fail;
    if ((rc = word(HZ_HCCM_COOKIE_NAME, get(arg, HZ_HCCM_COOKIE_NAME), 0, &h.cookie_name, bad, e)) <
        0)
        goto fail;
    if ((v = get(arg, HZ_HCCM_COOKIE_LIFETIME))) {
        int64_t n;
        if (hz_go_seconds(v, &n) < 0 || n < 1 || n > INT_MAX) {
            snprintf(msg, sizeof(msg),
                     "\"%.64s\" is not a duration of whole seconds, at least 1s (\"300s\")", v);
            bad(e, HZ_HCCM_COOKIE_LIFETIME, msg);
        } else {
            h.cookie_lifetime = (int)n;
        }
    }
    if ((v = get(arg, HZ_HCCM_TIMEOUT_IDLE))) {
        int64_t n;
        if (hz_go_seconds(v, &n) < 0 || n < IDLE_MIN || n > IDLE_MAX) {
            snprintf(msg, sizeof(msg),
                     "\"%.64s\" is not a duration of whole seconds between 30s and 300s "
                     "(\"60s\"), the range Hetzner takes",
                     v);
            bad(e, HZ_HCCM_TIMEOUT_IDLE, msg);
        } else {
            h.timeout_idle = (int)n;
        }
    }
    go_bool(HZ_HCCM_STICKY, get(arg, HZ_HCCM_STICKY), &h.sticky, bad, e);
    if ((rc = annot_https(get, arg, &h, bad, e)) < 0)
        goto fail;
    /* Hetzner refuses http settings on a tcp service: say so here */
    for (size_t i = 0; h.protocol == HZ_PROTO_TCP && i < sizeof(web_only) / sizeof(*web_only);
         i++) {
        if (get(arg, web_only[i])) {
            snprintf(msg, sizeof(msg),
                     "applies to http and https services only (%s is tcp; give http or https)",
                     HZ_HCCM_PROTOCOL);
            bad(e, web_only[i], msg);
        }
    }
    *out = h;
    return 0;
fail:
    hz_http_clear(&h);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Hetzner's JSON                                                       */

/* Copy the string member key of o (absent or not a string: left NULL). 0
 * or -ENOMEM. */
static int
dup_member(const json_t *o, const char *key, char **out)
{
    const char *s = json_string_value(json_object_get(o, key));
    return !s || (*out = hz_strdup(s)) ? 0 : -ENOMEM;
}

/* The strings of the array codes joined by commas (new); NULL when it is
 * not an array of strings (or on ENOMEM: *rc -ENOMEM). */
static char *
join_codes(const json_t *codes, int *rc)
{
    size_t i, n = 0;
    json_t *c;
    char *out;
    *rc = 0;
    if (!json_is_array(codes))
        return NULL;
    json_array_foreach(codes, i, c)
    {
        if (!json_is_string(c))
            return NULL;
        n += json_string_length(c) + 1;
    }
    if (!(out = hz_calloc(n + 1))) {
        *rc = -ENOMEM;
        return NULL;
    }
    n = 0;
    json_array_foreach(codes, i, c)
    {
        size_t len = json_string_length(c);
        if (i)
            out[n++] = ',';
        memcpy(out + n, json_string_value(c), len);
        n += len;
    }
    return out;
}

int
hz_http_parse(const json_t *service, struct hz_http *out)
{
    const json_t *hc = json_object_get(service, "health_check");
    const json_t *hh = json_object_get(hc, "http");
    const json_t *http = json_object_get(service, "http");
    const char *hp = json_string_value(json_object_get(hc, "protocol"));
    struct hz_http h = {0};
    int rc = 0;

    h.protocol = proto_of(json_string_value(json_object_get(service, "protocol")), 0);
    h.hc_http = !hp || strcmp(hp, "tcp") == 0 ? 0 : strcmp(hp, "http") == 0 ? 1 : -1;
    h.hc_port = (int)json_integer_value(json_object_get(hc, "port"));
    if (json_is_object(hh)) {
        h.hc_tls = json_is_true(json_object_get(hh, "tls"));
        if (dup_member(hh, "domain", &h.hc_domain) < 0 || dup_member(hh, "path", &h.hc_path) < 0)
            goto nomem;
        h.hc_codes = join_codes(json_object_get(hh, "status_codes"), &rc);
        if (rc < 0)
            goto nomem;
    }
    if (json_is_object(http)) {
        if (dup_member(http, "cookie_name", &h.cookie_name) < 0)
            goto nomem;
        h.cookie_lifetime = (int)json_integer_value(json_object_get(http, "cookie_lifetime"));
        h.timeout_idle = (int)json_integer_value(json_object_get(http, "timeout_idle"));
        h.sticky = json_is_true(json_object_get(http, "sticky_sessions"));
        h.redirect = json_is_true(json_object_get(http, "redirect_http"));
        const json_t *certs = json_object_get(http, "certificates"), *c;
        size_t i;
        if (certs_alloc(&h, json_array_size(certs), 0) < 0)
            goto nomem;
        json_array_foreach(certs, i, c) h.cert_ids[i] = json_integer_value(c);
    }
    *out = h;
    return 0;
nomem:
    hz_http_clear(&h);
    memset(out, 0, sizeof(*out));
    return -ENOMEM;
}

/* 1 when id is among the certificates of h. */
static int
has_cert(const struct hz_http *h, int64_t id)
{
    for (size_t i = 0; i < h->ncerts; i++)
        if (h->cert_ids[i] == id)
            return 1;
    return 0;
}

/* 1 when a and b hold the same certificates (each known), in any order. */
static int
same_certs(const struct hz_http *a, const struct hz_http *b)
{
    for (size_t i = 0; i < a->ncerts; i++)
        if (a->cert_ids[i] <= 0 || !has_cert(b, a->cert_ids[i]))
            return 0;
    for (size_t i = 0; i < b->ncerts; i++)
        if (!has_cert(a, b->cert_ids[i]))
            return 0;
    return 1;
}

int
hz_http_differs(const struct hz_http *want, int protocol, int dest, const struct hz_http *have)
{
    if (have->protocol != protocol || have->hc_http != want->hc_http ||
        have->hc_port != (want->hc_port ? want->hc_port : dest))
        return 1;
    if (want->hc_http &&
        (have->hc_tls != want->hc_tls || strcmp(domain_of(have), domain_of(want)) != 0 ||
         strcmp(path_of(have), path_of(want)) != 0 || strcmp(codes_of(have), codes_of(want)) != 0))
        return 1;
    if (protocol != HZ_PROTO_TCP &&
        (have->sticky != want->sticky || have->redirect != want->redirect ||
         lifetime_of(have) != lifetime_of(want) || strcmp(cookie_of(have), cookie_of(want)) != 0 ||
         (want->timeout_idle && have->timeout_idle != want->timeout_idle)))
        return 1;
    return protocol == HZ_PROTO_HTTPS && !same_certs(want, have);
}

json_t *
hz_csv_json(const char *csv)
{
    json_t *a = json_array();
    for (const char *p = csv; a && p && *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (json_array_append_new(a, json_stringn(p, len)) < 0) {
            json_decref(a);
            return NULL;
        }
        p += len + (c != NULL);
    }
    return a;
}

int
hz_http_json(const struct hz_http *want, int protocol, int dest, json_t *service)
{
    json_t *hc = json_object_get(service, "health_check");
    if (!hc || json_object_set_new(service, "protocol", json_string(hz_proto_name(protocol))) < 0 ||
        json_object_set_new(hc, "protocol", json_string(want->hc_http ? "http" : "tcp")) < 0 ||
        json_object_set_new(hc, "port", json_integer(want->hc_port ? want->hc_port : dest)) < 0)
        return -ENOMEM;
    if (want->hc_http) {
        json_t *codes = hz_csv_json(codes_of(want));
        if (!codes || json_object_set_new(
                          hc, "http",
                          json_pack("{s:s, s:s, s:o, s:b}", "domain", domain_of(want), "path",
                                    path_of(want), "status_codes", codes, "tls", want->hc_tls)) < 0)
            return -ENOMEM;
    }
    if (protocol != HZ_PROTO_TCP) {
        json_t *certs = json_array();
        for (size_t i = 0; certs && i < want->ncerts; i++) {
            int dup = 0;
            for (size_t j = 0; j < i; j++)
                dup |= want->cert_ids[j] == want->cert_ids[i];
            if (!dup && json_array_append_new(certs, json_integer(want->cert_ids[i])) < 0) {
                json_decref(certs);
                return -ENOMEM;
            }
        }
        json_t *http =
            certs ? json_pack("{s:s, s:i, s:b, s:b, s:o}", "cookie_name", cookie_of(want),
                              "cookie_lifetime", lifetime_of(want), "sticky_sessions", want->sticky,
                              "redirect_http", want->redirect, "certificates", certs)
                  : NULL;
        /* absent: Hetzner keeps the value it has */
        if (http && want->timeout_idle &&
            json_object_set_new(http, "timeout_idle", json_integer(want->timeout_idle)) < 0) {
            json_decref(http);
            return -ENOMEM;
        }
        if (!http || json_object_set_new(service, "http", http) < 0)
            return -ENOMEM;
    }
    return 0;
}

void
hz_http_fp(uint64_t *h, const struct hz_http *want)
{
    char b[96];
    snprintf(b, sizeof(b), "%d/%d/%d/%d/%d/%d/%d/%d", want->protocol, want->hc_http, want->hc_port,
             want->hc_tls, want->cookie_lifetime, want->sticky, want->redirect, want->timeout_idle);
    hz_fnv1a64_field(h, b);
    hz_fnv1a64_field(h, want->hc_domain);
    hz_fnv1a64_field(h, want->hc_path);
    hz_fnv1a64_field(h, want->hc_codes);
    hz_fnv1a64_field(h, want->cookie_name);
    for (size_t i = 0; want->certs && i < want->ncerts; i++)
        hz_fnv1a64_field(h, want->certs[i]);
    hz_fnv1a64_field(h, want->managed ? "managed" : "uploaded");
    hz_fnv1a64_field(h, want->managed_name);
    hz_fnv1a64_field(h, want->domains);
    hz_fnv1a64_field(h, want->uid);
}

int
hz_http_name_managed(struct hz_http *h, const char *uid)
{
    if (!h->managed || h->ncerts)
        return 0;
    if (certs_alloc(h, 1, 1) < 0 ||
        !(h->certs[0] = h->managed_name ? hz_strdup(h->managed_name)
                                        : hz_asprintf("ccm-managed-certificate-%s", uid))) {
        hz_free(h->cert_ids);
        hz_free(h->certs);
        h->cert_ids = NULL;
        h->certs = NULL;
        h->ncerts = 0;
        return -ENOMEM;
    }
    return 0;
}
