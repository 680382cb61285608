/* /certificates: uploaded certificates (PEM checked with OpenSSL) and
 * managed ones, whose issuance is an action (create_certificate, then
 * issue_certificate on retry) that completes or fails as the admin faults
 * say (fail_issuance, hold_issuance). Shapes follow hcloud-go's
 * hcloud/schema/certificate.go. */
#include "fake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DOMAINS 100
#define DEFAULT_FAIL_CODE "ca_dns_validation_failed"

static void
reply_oom(struct hz_req *r)
{
    hz_reply_error(r, 500, "server_error", "out of memory", NULL);
}

struct hz_cert *
hz_cert_find(struct hz_fake *f, long id)
{
    for (size_t i = 0; i < f->n_certs; i++)
        if (f->certs[i]->id == id)
            return f->certs[i];
    return NULL;
}

static struct hz_cert *
find_name(struct hz_fake *f, const char *name)
{
    for (size_t i = 0; i < f->n_certs; i++)
        if (strcmp(f->certs[i]->name, name) == 0)
            return f->certs[i];
    return NULL;
}

static void
cert_free(struct hz_cert *c)
{
    if (!c)
        return;
    free(c->name);
    json_decref(c->labels);
    json_decref(c->domains);
    free(c->pem);
    free(c->error_code);
    free(c->error_message);
    free(c);
}

void
hz_certs_free(struct hz_fake *f)
{
    for (size_t i = 0; i < f->n_certs; i++)
        cert_free(f->certs[i]);
    free(f->certs);
    f->certs = NULL;
    f->n_certs = f->cap_certs = 0;
}

/* 1 if some service of lb lists certificate id. */
static int
lb_uses(const struct hz_lb *lb, int id)
{
    size_t i, j;
    json_t *s, *c;
    json_array_foreach(lb->services, i, s)
    {
        json_array_foreach(json_object_get(json_object_get(s, "http"), "certificates"), j, c)
        {
            if (json_integer_value(c) == id)
                return 1;
        }
    }
    return 0;
}

/* [{id, type: load_balancer}] of the balancers using certificate id (new). */
static json_t *
used_by(struct hz_fake *f, int id)
{
    json_t *out = json_array();
    for (size_t i = 0; out && i < f->n_lbs; i++) {
        if (!lb_uses(f->lbs[i], id))
            continue;
        if (json_array_append_new(
                out, json_pack("{s:i, s:s}", "id", f->lbs[i]->id, "type", "load_balancer")) < 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

static const char *
issuance_name(enum hz_issuance s)
{
    return s == HZ_ISSUE_PENDING ? "pending" : s == HZ_ISSUE_COMPLETED ? "completed" : "failed";
}

/* status of a managed certificate (new); json null for uploaded ones. */
static json_t *
status_json(const struct hz_cert *c)
{
    if (!c->managed)
        return json_null();
    json_t *err = c->issuance == HZ_ISSUE_FAILED
                      ? json_pack("{s:s, s:s}", "code", c->error_code, "message", c->error_message)
                      : json_null();
    return json_pack("{s:s, s:s, s:o?}", "issuance", issuance_name(c->issuance), "renewal",
                     c->issuance == HZ_ISSUE_COMPLETED ? "scheduled" : "unavailable", "error", err);
}

json_t *
hz_cert_json(struct hz_fake *f, const struct hz_cert *c)
{
    json_t *fp = c->pem ? json_string(c->fingerprint) : json_null();
    json_t *pem = c->pem ? json_string(c->pem) : json_null();
    return json_pack("{s:i, s:s, s:O, s:s, s:o, s:o, s:o, s:o, s:O, s:o, s:o, s:o}", "id", c->id,
                     "name", c->name, "labels", c->labels, "type",
                     c->managed ? "managed" : "uploaded", "certificate", pem, "created",
                     hz_time_json(c->created), "not_valid_before", hz_time_json(c->not_before),
                     "not_valid_after", hz_time_json(c->not_after), "domain_names", c->domains,
                     "fingerprint", fp, "status", status_json(c), "used_by", used_by(f, c->id));
}

/* Answer {"certificate": c} (plus "action" when with_action) with status. */
static void
reply_cert(struct hz_req *r, struct hz_cert *c, int status, int with_action,
           const struct hz_action *a)
{
    json_t *cj = hz_cert_json(r->f, c);
    json_t *resp = json_pack("{s:o?}", "certificate", cj);
    if (resp && with_action &&
        json_object_set_new(resp, "action", a ? hz_action_json(a) : json_null()) < 0) {
        json_decref(resp);
        resp = NULL;
    }
    if (!cj || !resp || (with_action && a && json_is_null(json_object_get(resp, "action")))) {
        json_decref(resp);
        reply_oom(r);
        return;
    }
    hz_reply(r, status, resp);
}

static void
reply_name_taken(struct hz_req *r)
{
    json_t *d =
        json_pack("{s:[{s:s, s:[s]}]}", "fields", "name", "name", "messages", "already used");
    hz_reply_error(r, 409, "uniqueness_error", "certificate name is already used", d);
}

/* Certificate names: 1..128 characters, no control characters. */
static int
name_valid(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return n > 0 && n <= 128;
}

/* A DNS name of 1..253 characters, labels of 1..63 [A-Za-z0-9-] not
 * starting or ending with '-', at least two labels; "*." may lead. */
static int
domain_valid(const char *s)
{
    size_t n = strlen(s), label = 0, labels = 1;
    if (!strncmp(s, "*.", 2))
        s += 2, n -= 2;
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '.') {
            if (!label || s[i - 1] == '-')
                return 0;
            label = 0;
            labels++;
            continue;
        }
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 (ch == '-' && label > 0);
        if (!ok || ++label > 63)
            return 0;
    }
    return label > 0 && s[n - 1] != '-' && labels >= 2;
}

/* Check domain_names of a managed request: 0, or -1 after replying. */
static int
check_domains(struct hz_req *r, json_t *domains)
{
    size_t i, n = json_array_size(domains);
    json_t *d;
    if (n == 0 || n > MAX_DOMAINS) {
        hz_reply_invalid(r, "domain_names", "a managed certificate needs 1 to 100 domain names");
        return -1;
    }
    json_array_foreach(domains, i, d)
    {
        if (!domain_valid(json_string_value(d))) {
            hz_reply_invalid(r, "domain_names", "must be valid DNS names");
            return -1;
        }
    }
    return 0;
}

/* Fill an uploaded certificate from the body's PEM: 0 or -1 after replying. */
static int
fill_uploaded(struct hz_req *r, struct hz_cert *c, json_t *body)
{
    const char *pem = json_string_value(json_object_get(body, "certificate"));
    const char *key = json_string_value(json_object_get(body, "private_key"));
    struct hz_cert_info info;
    const char *field;
    char msg[160];
    if (json_object_get(body, "domain_names")) {
        hz_reply_invalid(r, "domain_names", "only managed certificates take domain_names");
        return -1;
    }
    if (!pem || !key) {
        hz_reply_invalid(r, pem ? "private_key" : "certificate", "is required");
        return -1;
    }
    if (hz_pem_check(pem, key, time(NULL), &info, &field, msg, sizeof(msg)) < 0) {
        hz_reply_invalid(r, field, msg);
        return -1;
    }
    c->domains = info.domains;
    c->not_before = info.not_before;
    c->not_after = info.not_after;
    memcpy(c->fingerprint, info.fingerprint, sizeof(c->fingerprint));
    if (!(c->pem = strdup(pem))) {
        reply_oom(r);
        return -1;
    }
    return 0;
}

/* Fill a managed certificate: 0 or -1 after replying. */
static int
fill_managed(struct hz_req *r, struct hz_cert *c, json_t *body)
{
    json_t *domains = json_object_get(body, "domain_names");
    if (json_object_get(body, "certificate") || json_object_get(body, "private_key")) {
        hz_reply_invalid(r, json_object_get(body, "certificate") ? "certificate" : "private_key",
                         "managed certificates are issued, not uploaded");
        return -1;
    }
    if (check_domains(r, domains) < 0)
        return -1;
    if (!(c->domains = json_deep_copy(domains))) {
        reply_oom(r);
        return -1;
    }
    c->managed = 1;
    c->issuance = HZ_ISSUE_PENDING;
    return 0;
}

struct hz_cert *
hz_cert_build(struct hz_req *r, json_t *body)
{
    json_t *labels;
    const char *name, *type = "uploaded";
    int present, p_type;
    struct hz_cert *c = NULL;
    char err[160];
    if (!json_is_object(body)) {
        hz_reply_error(r, 400, "json_error", "request body must be a JSON object", NULL);
        return NULL;
    }
    if (hz_json_str(r, body, "name", "name", &name, &present) < 0 ||
        hz_json_str(r, body, "type", "type", &type, &p_type) < 0)
        return NULL;
    if (!present || !name_valid(name)) {
        hz_reply_invalid(r, "name", "must be 1 to 128 characters without control characters");
        return NULL;
    }
    if (strcmp(type, "uploaded") != 0 && strcmp(type, "managed") != 0) {
        hz_reply_invalid(r, "type", "must be uploaded or managed");
        return NULL;
    }
    labels = json_object_get(body, "labels");
    if (labels && !json_is_null(labels) && !hz_labels_valid(labels, err, sizeof(err))) {
        hz_reply_invalid(r, "labels", err);
        return NULL;
    }
    if (find_name(r->f, name)) {
        reply_name_taken(r);
        return NULL;
    }
    if (!(c = calloc(1, sizeof(*c))) || !(c->name = strdup(name)) ||
        !(c->labels = labels && !json_is_null(labels) ? json_deep_copy(labels) : json_object()))
        goto oom;
    c->created = time(NULL);
    if (strcmp(type, "managed") == 0 ? fill_managed(r, c, body) < 0 : fill_uploaded(r, c, body) < 0)
        goto fail;
    return c;
oom:
    reply_oom(r);
fail:
    cert_free(c);
    return NULL;
}

/* Take c out of the store and free it. */
static void
cert_remove(struct hz_fake *f, struct hz_cert *c)
{
    for (size_t i = 0; i < f->n_certs; i++) {
        if (f->certs[i] == c) {
            memmove(&f->certs[i], &f->certs[i + 1], (f->n_certs - i - 1) * sizeof(f->certs[0]));
            f->n_certs--;
            break;
        }
    }
    cert_free(c);
}

int
hz_cert_add(struct hz_fake *f, struct hz_cert *c)
{
    if (f->next_cert_id < 1)
        f->next_cert_id = 1;
    if (!c->id)
        c->id = f->next_cert_id;
    /* Keep the array sorted by id: seeds may give ids in any order. */
    if (hz_ptr_push((void ***)&f->certs, &f->n_certs, &f->cap_certs, c) < 0)
        return -ENOMEM;
    for (size_t i = f->n_certs - 1; i > 0 && f->certs[i - 1]->id > c->id; i--) {
        f->certs[i] = f->certs[i - 1];
        f->certs[i - 1] = c;
    }
    if (c->id >= f->next_cert_id)
        f->next_cert_id = c->id + 1;
    return 0;
}

void
hz_cert_free(struct hz_cert *c)
{
    cert_free(c);
}

void
hz_cert_create(struct hz_req *r)
{
    struct hz_cert *c = hz_cert_build(r, r->body);
    if (!c)
        return;
    if (hz_cert_add(r->f, c) < 0) {
        cert_free(c);
        reply_oom(r);
        return;
    }
    struct hz_action *a = NULL;
    if (c->managed && !(a = hz_action_start_cert(r->f, "create_certificate", c->id))) {
        cert_remove(r->f, c); /* no certificate without its issuance */
        reply_oom(r);
        return;
    }
    reply_cert(r, c, 201, 1, a);
}

static struct hz_cert *
find_or_404(struct hz_req *r, long id)
{
    struct hz_cert *c = hz_cert_find(r->f, id);
    if (!c)
        hz_reply_error(r, 404, "not_found", "certificate not found", NULL);
    return c;
}

void
hz_cert_get(struct hz_req *r, long id)
{
    struct hz_cert *c = find_or_404(r, id);
    if (c)
        reply_cert(r, c, 200, 0, NULL);
}

void
hz_cert_update(struct hz_req *r, long id)
{
    struct hz_cert *c = find_or_404(r, id);
    const char *name = NULL;
    int present;
    json_t *labels, *copy = NULL;
    char err[160], *nn = NULL;
    if (!c)
        return;
    if (!json_is_object(r->body)) {
        hz_reply_error(r, 400, "json_error", "request body must be a JSON object", NULL);
        return;
    }
    if (hz_json_str(r, r->body, "name", "name", &name, &present) < 0)
        return;
    if (present && !name_valid(name)) {
        hz_reply_invalid(r, "name", "must be 1 to 128 characters without control characters");
        return;
    }
    if (present && find_name(r->f, name) && find_name(r->f, name) != c) {
        reply_name_taken(r);
        return;
    }
    labels = json_object_get(r->body, "labels");
    if (labels && !json_is_null(labels) && !hz_labels_valid(labels, err, sizeof(err))) {
        hz_reply_invalid(r, "labels", err);
        return;
    }
    if ((present && !(nn = strdup(name))) ||
        (labels && !json_is_null(labels) && !(copy = json_deep_copy(labels)))) {
        free(nn);
        reply_oom(r);
        return;
    }
    if (nn) {
        free(c->name);
        c->name = nn;
    }
    if (copy) {
        json_decref(c->labels);
        c->labels = copy;
    }
    reply_cert(r, c, 200, 0, NULL);
}

void
hz_cert_delete(struct hz_req *r, long id)
{
    struct hz_fake *f = r->f;
    struct hz_cert *c = find_or_404(r, id);
    if (!c)
        return;
    for (size_t i = 0; i < f->n_lbs; i++) {
        if (lb_uses(f->lbs[i], c->id)) {
            hz_reply_error(r, 422, "service_error", "certificate still in use", NULL);
            return;
        }
    }
    cert_remove(f, c);
    hz_reply(r, 204, NULL);
}

void
hz_cert_retry(struct hz_req *r, long id)
{
    struct hz_cert *c = find_or_404(r, id);
    if (!c)
        return;
    if (!c->managed || c->issuance != HZ_ISSUE_FAILED) {
        hz_reply_error(r, 422, "unsupported_error",
                       "only a managed certificate whose issuance failed can be retried", NULL);
        return;
    }
    struct hz_action *a = hz_action_start_cert(r->f, "issue_certificate", c->id);
    json_t *resp = a ? json_pack("{s:o?}", "action", hz_action_json(a)) : NULL;
    if (!resp || !json_object_get(resp, "action")) {
        json_decref(resp);
        reply_oom(r);
        return;
    }
    c->issuance = HZ_ISSUE_PENDING;
    free(c->error_code);
    free(c->error_message);
    c->error_code = c->error_message = NULL;
    hz_reply(r, 201, resp);
}

/* The first domain of c listed in the fail_issuance fault, or NULL. */
static const char *
failing_domain(struct hz_fake *f, const struct hz_cert *c)
{
    size_t i, j;
    json_t *d, *bad;
    json_array_foreach(c->domains, i, d)
    {
        json_array_foreach(f->faults.fail_domains, j, bad)
        {
            if (json_equal(d, bad))
                return json_string_value(d);
        }
    }
    return NULL;
}

/* Fail issuance of c (may be NULL) and action a with code and message. */
static void
fail_issue(struct hz_cert *c, struct hz_action *a, const char *code, const char *message)
{
    free(a->error_code);
    free(a->error_message);
    a->error_code = strdup(code);
    a->error_message = strdup(message);
    if (!c)
        return;
    free(c->error_code);
    free(c->error_message);
    c->error_code = strdup(code);
    c->error_message = strdup(message);
    c->issuance = HZ_ISSUE_FAILED;
    /* Under ENOMEM the failure still shows, with the generic wording. */
    if (!c->error_code || !c->error_message) {
        free(c->error_code);
        free(c->error_message);
        c->error_code = strdup("server_error");
        c->error_message = strdup("issuance failed");
    }
}

void
hz_cert_finish(struct hz_fake *f, struct hz_action *a)
{
    struct hz_cert *c = hz_cert_find(f, a->cert_id);
    const char *bad;
    char msg[512];
    if (!c)
        return; /* deleted while its issuance ran */
    if (c->running_action == a->id)
        c->running_action = 0;
    if ((bad = failing_domain(f, c))) {
        const char *code =
            f->faults.issue_fail_code ? f->faults.issue_fail_code : DEFAULT_FAIL_CODE;
        if (f->faults.issue_fail_message)
            snprintf(msg, sizeof(msg), "%s", f->faults.issue_fail_message);
        else
            snprintf(msg, sizeof(msg),
                     "Certificate Authority: DNS validation failed for %s: it does not resolve to "
                     "a load balancer of this project",
                     bad);
        fail_issue(c, a, code, msg);
        return;
    }
    if (hz_cert_issue(c) < 0)
        fail_issue(c, a, "server_error", "the certificate could not be issued");
}

int
hz_cert_issue(struct hz_cert *c)
{
    struct hz_cert_info info;
    char *pem = NULL;
    int rc = hz_pem_issue(c->domains, time(NULL), &pem, &info);
    if (rc < 0)
        return rc;
    json_decref(info.domains);
    free(c->pem);
    c->pem = pem;
    c->not_before = info.not_before;
    c->not_after = info.not_after;
    memcpy(c->fingerprint, info.fingerprint, sizeof(c->fingerprint));
    c->issuance = HZ_ISSUE_COMPLETED;
    return 0;
}

static int
cmp_cert(const void *a, const void *b, void *arg)
{
    const struct hz_cert *x = *(struct hz_cert *const *)a;
    const struct hz_cert *y = *(struct hz_cert *const *)b;
    return hz_sort_cmp(arg, x->id, x->name, x->created, y->id, y->name, y->created);
}

void
hz_cert_list(struct hz_req *r)
{
    struct hz_fake *f = r->f;
    struct hz_selector *sel = NULL;
    struct hz_cert **match = NULL;
    struct hz_sort spec;
    json_t *items = NULL;
    size_t n = 0;
    char err[160];
    const char *name = hz_query(r, "name");
    const char *type = hz_query(r, "type");
    const char *ls = hz_query(r, "label_selector");
    if (type && strcmp(type, "uploaded") && strcmp(type, "managed")) {
        hz_reply_invalid(r, "type", "must be uploaded or managed");
        return;
    }
    if (ls && hz_selector_parse(ls, &sel, err, sizeof(err)) < 0) {
        hz_reply_invalid(r, "label_selector", err);
        return;
    }
    if (hz_parse_sort(r, &spec) < 0)
        goto out;
    if (!(match = calloc(f->n_certs + 1, sizeof(*match))) || !(items = json_array()))
        goto oom;
    for (size_t i = 0; i < f->n_certs; i++) {
        struct hz_cert *c = f->certs[i];
        if ((name && strcmp(c->name, name)) || (sel && !hz_selector_match(sel, c->labels)) ||
            (type && strcmp(type, c->managed ? "managed" : "uploaded")))
            continue;
        match[n++] = c;
    }
    qsort_r(match, n, sizeof(*match), cmp_cert, &spec);
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(items, hz_cert_json(f, match[i])) < 0)
            goto oom;
    hz_reply_page(r, "certificates", items);
    items = NULL;
    goto out;
oom:
    reply_oom(r);
out:
    json_decref(items);
    free(match);
    hz_selector_free(sel);
}
