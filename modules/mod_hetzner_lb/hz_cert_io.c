/*
 * hz_cert_io.c: the certificates of an https service with Hetzner (the
 * pure half is hz_cert.c). For a reconcile's CERTS step: each certificate
 * name without its ID is looked up (GET /certificates?name=); an uploaded
 * one is only ever referenced; the Service's managed certificate is made
 * when Hetzner has none of its name (POST /certificates, with its domains
 * and prismlb's label robotlb/service-uid), followed through its issuance
 * action, and a failed issuance is retried (POST .../actions/retry) by the
 * reconcile after it, which comes on refused_recheck_interval. After its
 * Service's balancer is deleted, each certificate carrying that Service's
 * label that no balancer uses any more is deleted (hz_cert_sweep).
 *
 *   lookup --ready--------------------------------> kept (its ID)
 *     |----none, the managed one---> create --+--issued--> kept
 *     |----failed issuance---------> retry  --+--failed--> warned, recheck
 *     |----none, a named one--------------------------> warned, recheck
 *     `----issuance under way-------------------------> recheck
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <prismlb/module_util.h>

#include "hz_kube.h"
#include "hz_rec.h"

/* One CERTS step in flight. */
struct find {
    struct hz_kside *ks;
    char *lane, *uid;   /* uid: the lane's, for the log */
    struct hz_http *hs; /* borrowed from the reconcile (nhs of them) */
    size_t nhs;
    hz_cert_warn_fn warn;
    hz_cert_done_fn done;
    void *arg;
    int pending;
    enum hz_rec_end end;
};

/* One certificate of it: looked up, then made or retried. */
struct one {
    struct find *f;
    const struct hz_http *h; /* the entry of its first reference (in f->hs) */
    char *name;
    int64_t id; /* a failed one being retried */
};

static void
one_free(struct one *o)
{
    hz_free(o->name);
    hz_free(o);
}

/* o's call answered: when it was the step's last, the reconcile goes on. */
static void
one_end(struct one *o, enum hz_rec_end e)
{
    struct find *f = o->f;
    one_free(o);
    f->end = hz_rec_worse(f->end, e);
    if (--f->pending > 0)
        return;
    f->done(f->arg, f->end);
    hz_free_each(&f->lane, &f->uid, NULL);
    hz_free(f);
}

/* Send one call of o on the Service's lane (steals body). 0, or -errno
 * with o left to the caller. */
static int
one_call(struct one *o, const char *method, const char *path, json_t *body, hz_result_cb cb)
{
    return hz_api_call(o->f->ks->api, o->f->lane, method, path, body, cb, o);
}

/* The managed certificate was made or its issuance retried (res): its ID
 * kept once issued, else the Service warned with Hetzner's error. */
static void
one_made(void *arg, const struct hz_result *res)
{
    struct one *o = arg;
    struct find *f = o->f;
    char msg[768];
    int64_t id =
        o->id
            ? o->id
            : json_integer_value(json_object_get(json_object_get(res->body, "certificate"), "id"));
    if (res->err == -ECANCELED) {
        one_end(o, HZ_REC_CANCELLED);
        return;
    }
    if (res->dry_run) {
        one_end(o, HZ_REC_WAIT);
        return;
    }
    if (res->err == 0 && res->status >= 200 && res->status < 300 && !res->action_failed && id > 0) {
        PLB_INFO(f->ks->host, f->ks->ctx, PLB_KV("service_uid", f->uid, "certificate", o->name),
                 "the managed certificate is issued");
        {
            one_end(o, hz_cert_keep(&f->ks->certs, f->hs, f->nhs, o->name, id) < 0 ? HZ_REC_RECHECK
                                                                                   : HZ_REC_OK);
            return;
        }
    }
    snprintf(msg, sizeof(msg),
             "the managed certificate \"%s\" for %s was not issued: %s: %s; it is tried again "
             "on the next check",
             o->name, o->h->domains ? o->h->domains : "-", res->code ? res->code : "-",
             res->message ? res->message : "no message");
    f->warn(f->arg, "CertificateIssuanceFailed", msg);
    one_end(o, HZ_REC_RECHECK);
}

/* Make the Service's managed certificate (POST /certificates). */
static enum hz_rec_end
one_create(struct one *o)
{
    json_t *body = hz_cert_managed_body(o->h);
    if (!body || one_call(o, "POST", "/certificates", body, one_made) < 0)
        return HZ_REC_RECHECK;
    PLB_INFO(o->f->ks->host, o->f->ks->ctx,
             PLB_KV("service_uid", o->h->uid ? o->h->uid : o->f->uid, "certificate", o->name,
                    "domains", o->h->domains),
             "making the managed certificate");
    return HZ_REC_OK;
}

/* Retry the failed issuance of certificate o->id. */
static enum hz_rec_end
one_retry(struct one *o, const char *code, const char *message)
{
    char path[64];
    PLB_INFO(o->f->ks->host, o->f->ks->ctx,
             PLB_KV("service_uid", o->f->uid, "certificate", o->name, "code", code ? code : "-",
                    "error", message ? message : "-"),
             "retrying the managed certificate's failed issuance");
    snprintf(path, sizeof(path), "/certificates/%" PRId64 "/actions/retry", o->id);
    return one_call(o, "POST", path, NULL, one_made) < 0 ? HZ_REC_RECHECK : HZ_REC_OK;
}

/* The lookup of o->name answered (res). */
static void
one_looked(void *arg, const struct hz_result *res)
{
    struct one *o = arg;
    struct find *f = o->f;
    const char *code, *message;
    char msg[512];
    int64_t id;
    int managed = o->h->managed && o->h->ncerts && strcmp(o->h->certs[0], o->name) == 0;
    if (res->err == -ECANCELED) {
        one_end(o, HZ_REC_CANCELLED);
        return;
    }
    if (res->err || res->status != 200) {
        PLB_WARN(f->ks->host, f->ks->ctx,
                 PLB_KV("service_uid", f->uid, "certificate", o->name, "code",
                        res->code ? res->code : "-", "error", res->message ? res->message : "-"),
                 "looking up the certificate failed");
        {
            one_end(o, HZ_REC_RECHECK);
            return;
        }
    }
    switch (hz_cert_state_of(json_array_get(json_object_get(res->body, "certificates"), 0), &id,
                             &code, &message)) {
    case HZ_CERT_READY: {
        one_end(o, hz_cert_keep(&f->ks->certs, f->hs, f->nhs, o->name, id) < 0 ? HZ_REC_RECHECK
                                                                               : HZ_REC_OK);
        return;
    }
    case HZ_CERT_NONE:
        if (managed && one_create(o) == HZ_REC_OK)
            return; /* one_made ends it */
        if (!managed) {
            snprintf(msg, sizeof(msg),
                     "%s: Hetzner has no certificate named \"%s\"; the balancer is left as it is",
                     HZ_HCCM_CERTS, o->name);
            f->warn(f->arg, "CertificateNotFound", msg);
        }
        {
            one_end(o, HZ_REC_RECHECK);
            return;
        }
    case HZ_CERT_FAILED:
        o->id = id;
        if (one_retry(o, code, message) == HZ_REC_OK)
            return;
        {
            one_end(o, HZ_REC_RECHECK);
            return;
        }
    case HZ_CERT_PENDING:
        PLB_INFO(f->ks->host, f->ks->ctx, PLB_KV("service_uid", f->uid, "certificate", o->name),
                 "the certificate's issuance is under way: looked at again on the next check");
        {
            one_end(o, HZ_REC_RECHECK);
            return;
        }
    }
}

int
hz_cert_find(struct hz_kside *ks, const char *lane, struct hz_http *hs, size_t n,
             hz_cert_warn_fn warn, hz_cert_done_fn done, void *arg)
{
    struct find *f = hz_calloc(sizeof(*f));
    size_t pos = 0, at = 0;
    const char *name;
    int rc = -ENOENT;
    if (!f || !(f->lane = hz_strdup(lane)) || !(f->uid = hz_strdup(lane))) {
        rc = -ENOMEM;
        goto fail;
    }
    *f = (struct find){.ks = ks,
                       .lane = f->lane,
                       .uid = f->uid,
                       .hs = hs,
                       .nhs = n,
                       .warn = warn,
                       .done = done,
                       .arg = arg,
                       .end = HZ_REC_OK};
    /* one more than the calls while they start: none can end f meanwhile */
    f->pending = 1;
    while ((name = hz_cert_next_unknown(hs, n, &pos, &at))) {
        struct one *o = hz_calloc(sizeof(*o));
        char *enc = NULL, *path = NULL;
        int started = o && (o->name = hz_strdup(name)) && (enc = hz_qenc(name)) &&
                      (path = hz_asprintf("/certificates?name=%s", enc));
        if (started) {
            o->f = f;
            o->h = &hs[at];
            started = one_call(o, "GET", path, NULL, one_looked) == 0;
        }
        hz_free_each(&enc, &path, NULL);
        if (!started) {
            if (o)
                one_free(o);
            f->end = HZ_REC_RECHECK;
            break;
        }
        f->pending++;
    }
    if (f->pending == 1) {
        rc = f->end == HZ_REC_OK ? -ENOENT : -ENOMEM;
        goto fail;
    }
    f->pending--; /* the calls' answers come on later loop iterations */
    return 0;
fail:
    if (f)
        hz_free_each(&f->lane, &f->uid, NULL);
    hz_free(f);
    return rc;
}

/* ------------------------------------------------------------------ */
/* After the Service's balancer is gone                                 */

/* A certificate delete answered. */
static void
swept_one(void *arg, const struct hz_result *res)
{
    struct hz_kside *ks = ((void **)arg)[0];
    char *id = ((void **)arg)[1];
    if (res->err != -ECANCELED && !res->dry_run && (res->status < 200 || res->status >= 300))
        PLB_WARN(ks->host, ks->ctx,
                 PLB_KV("certificate", id, "code", res->code ? res->code : "-", "error",
                        res->message ? res->message : "-"),
                 "deleting the managed certificate failed; it is left");
    else if (res->err != -ECANCELED)
        PLB_INFO(ks->host, ks->ctx, PLB_KV("certificate", id), "deleted the managed certificate");
    hz_free(id);
    hz_free(arg);
}

/* The certificates labelled with a Service's UID (items, borrowed; arg:
 * {ks, the UID}): each that no balancer uses is deleted. */
static void
swept(void *arg, const struct hz_result *res, json_t *items)
{
    struct hz_kside *ks = ((void **)arg)[0];
    char *uid = ((void **)arg)[1];
    size_t i;
    json_t *c;
    json_array_foreach(items, i, c)
    {
        int64_t id = json_integer_value(json_object_get(c, "id"));
        const char *label =
            json_string_value(json_object_get(json_object_get(c, "labels"), HZ_LABEL_UID));
        void **del;
        char path[64];
        if (id <= 0 || !label || strcmp(label, uid) != 0 ||
            json_array_size(json_object_get(c, "used_by")) > 0)
            continue;
        snprintf(path, sizeof(path), "/certificates/%" PRId64, id);
        if ((del = hz_calloc(2 * sizeof(*del))))
            del[0] = ks;
        if (!del || !(del[1] = hz_asprintf("%" PRId64, id)) ||
            hz_api_call(ks->api, NULL, "DELETE", path, NULL, swept_one, del) < 0) {
            if (del)
                hz_free(del[1]);
            hz_free(del);
            PLB_WARN(ks->host, ks->ctx, PLB_KV("certificate", path), "cannot delete it now");
        }
    }
    if (!items && res->err != -ECANCELED)
        PLB_WARN(ks->host, ks->ctx, PLB_KV("service_uid", uid, "code", res->code ? res->code : "-"),
                 "listing the service's managed certificates failed; they are left");
    hz_free(uid);
    hz_free(arg);
}

void
hz_cert_sweep(struct hz_kside *ks, const char *uid)
{
    void **arg = hz_calloc(2 * sizeof(*arg));
    char *enc = hz_qenc(uid), *path = NULL;
    if (arg)
        arg[0] = ks;
    if (!arg || !enc || !(arg[1] = hz_strdup(uid)) ||
        !(path = hz_asprintf("/certificates?label_selector=" HZ_LABEL_UID "%%3D%s", enc)) ||
        hz_api_list(ks->api, path, "certificates", swept, arg) < 0) {
        if (arg)
            hz_free(arg[1]);
        hz_free(arg);
        PLB_WARN(ks->host, ks->ctx, PLB_KV("service_uid", uid),
                 "cannot look for the service's managed certificates; they are left");
    }
    hz_free_each(&enc, &path, NULL);
}
