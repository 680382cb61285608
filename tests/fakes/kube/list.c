/* Lists: consistent snapshots at a resourceVersion, label and field
 * selectors, and limit/continue paging with expiring continue tokens. */
#include "fk.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPIRED_CONTINUE                                                                           \
    "The provided continue parameter is too old to display a consistent list result. You can "     \
    "start a new list without the continue parameter, or use the continue token in this "          \
    "response to retrieve the remainder of the results. Continuing with the provided token "       \
    "results in an inconsistent list - objects that were created, modified, or deleted "           \
    "between the time the first chunk was returned and now may show up in the list."

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A new continue token for (rv, last key) or NULL. */
static char *
make_continue(uint64_t rv, const char *last)
{
    json_t *t =
        json_pack("{s:s, s:I, s:s}", "v", "meta.k8s.io/v1", "rv", (json_int_t)rv, "start", last);
    char *s = t ? json_dumps(t, JSON_COMPACT) : NULL;
    char *b = s ? fk_base64(s, strlen(s)) : NULL;
    json_decref(t);
    free(s);
    return b;
}

/* Decode a continue token: 0, or -1 when it is not one of ours. *last is
 * new. */
static int
parse_continue(const char *tok, uint64_t *rv, char **last)
{
    char *raw = fk_unbase64(tok, NULL);
    json_t *t = raw ? json_loads(raw, 0, NULL) : NULL;
    const char *start = json_string_value(json_object_get(t, "start"));
    json_t *jrv = json_object_get(t, "rv");
    int r = -1;

    if (start && json_is_integer(jrv) && json_integer_value(jrv) > 0 &&
        !strcmp(json_string_value(json_object_get(t, "v")) ?: "", "meta.k8s.io/v1")) {
        *rv = (uint64_t)json_integer_value(jrv);
        *last = strdup(start);
        r = *last ? 0 : -1;
    }
    json_decref(t);
    free(raw);
    return r;
}

static int
parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    if (!s || !*s)
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-')
        return -1;
    *out = v;
    return 0;
}

/* See fk.h. */
void
fk_list(struct fk_rq *rq, struct fk_cluster *cl, const struct fk_kind *k, const char *ns)
{
    struct fk_store *s = &rq->app->store;
    const char *rvp = fk_rq_param(rq, "resourceVersion");
    const char *match = fk_rq_param(rq, "resourceVersionMatch");
    const char *limp = fk_rq_param(rq, "limit");
    const char *cont = fk_rq_param(rq, "continue");
    struct fk_selector *ls = NULL, *fs = NULL;
    json_t *snap = NULL, *items = NULL, *list = NULL, *err = NULL, *o;
    const char **keys = NULL;
    char *last = NULL, *next_tok = NULL, msg[512], av[128], lk[128], rvs[32], prefix[300];
    uint64_t rv = 0, limit = 0;
    size_t nkeys = 0, i, remaining = 0;
    int expired = 0;
    const char *key, *last_key = NULL;

    ls = fk_label_selector_parse(fk_rq_param(rq, "labelSelector"), msg, sizeof(msg));
    if (!ls) {
        err = fk_status_new(400, "BadRequest", msg, NULL, NULL, NULL);
        goto fail;
    }
    fs = fk_field_selector_parse(fk_rq_param(rq, "fieldSelector"), k, msg, sizeof(msg));
    if (!fs) {
        err = fk_status_new(400, "BadRequest", msg, NULL, NULL, NULL);
        goto fail;
    }
    if (limp && limp[0] && parse_u64(limp, &limit) < 0) {
        err = fk_status_new(400, "BadRequest", "limit must be a non-negative integer", NULL, NULL,
                            NULL);
        goto fail;
    }
    if (match && match[0] && strcmp(match, "Exact") && strcmp(match, "NotOlderThan")) {
        snprintf(msg, sizeof(msg),
                 "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch:"
                 " Unsupported value: \"%s\": supported values: \"Exact\", \"NotOlderThan\"",
                 match);
        err = fk_status_new(422, "Invalid", msg, NULL, NULL, NULL);
        goto fail;
    }
    if (match && match[0] && !(rvp && rvp[0])) {
        err = fk_status_new(422, "Invalid",
                            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
                            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
                            "is provided",
                            NULL, NULL, NULL);
        goto fail;
    }
    if (cont && cont[0]) {
        if (rvp && rvp[0] && strcmp(rvp, "0")) {
            err = fk_status_new(400, "BadRequest",
                                "specifying resource version is not allowed when using continue",
                                NULL, NULL, NULL);
            goto fail;
        }
        if (parse_continue(cont, &rv, &last) < 0) {
            err = fk_status_new(400, "BadRequest",
                                "continue key is not valid: incorrect encoded start "
                                "resourceVersion (version meta.k8s.io/v1)",
                                NULL, NULL, NULL);
            goto fail;
        }
    } else if (rvp && rvp[0] && strcmp(rvp, "0")) {
        if (parse_u64(rvp, &rv) < 0) {
            snprintf(msg, sizeof(msg), "invalid resource version: %s", rvp);
            err = fk_status_new(400, "BadRequest", msg, NULL, NULL, NULL);
            goto fail;
        }
        if (rv > s->rv) {
            snprintf(msg, sizeof(msg), "Too large resource version: %" PRIu64 ", current: %" PRIu64,
                     rv, s->rv);
            err = fk_status_new(504, "Timeout", msg, NULL, NULL,
                                json_pack("[{s:s, s:s}]", "reason", "ResourceVersionTooLarge",
                                          "message", "Too large resource version"));
            if (err)
                json_object_set_new(json_object_get(err, "details"), "retryAfterSeconds",
                                    json_integer(1));
            goto fail;
        }
        if (!match || strcmp(match, "Exact"))
            rv = 0; /* NotOlderThan: the current state is newer, serve it */
    }
    snap = fk_store_snapshot(s, cl, k, rv, &expired);
    if (!snap) {
        if (!expired) {
            err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
        } else if (cont && cont[0]) {
            char *fresh = make_continue(s->rv, last);
            err = fk_status_new(410, "Expired", EXPIRED_CONTINUE, NULL, NULL, NULL);
            if (err && fresh)
                json_object_set_new(json_object_get(err, "metadata"), "continue",
                                    json_string(fresh));
            free(fresh);
        } else {
            snprintf(msg, sizeof(msg), "too old resource version: %" PRIu64 " (%" PRIu64 ")", rv,
                     fk_store_oldest_rv(s));
            err = fk_status_new(410, "Expired", msg, NULL, NULL, NULL);
        }
        goto fail;
    }
    if (rv == 0)
        rv = s->rv;

    keys = malloc((json_object_size(snap) + 1) * sizeof(*keys));
    items = json_array();
    if (!keys || !items)
        goto oom;
    snprintf(prefix, sizeof(prefix), "%s/", ns);
    json_object_foreach(snap, key, o)
    {
        if (ns[0] && strncmp(key, prefix, strlen(prefix)))
            continue;
        if (last && strcmp(key, last) <= 0)
            continue;
        keys[nkeys++] = key;
    }
    qsort(keys, nkeys, sizeof(*keys), cmp_str);
    for (i = 0; i < nkeys; i++) {
        json_t *item;
        json_t *view;
        int ok;
        o = json_object_get(snap, keys[i]);
        view = fk_view_from_storage(k, o);
        if (!view)
            goto oom;
        ok = fk_selector_match(ls, view) && fk_selector_match(fs, view);
        if (!ok || (limit && json_array_size(items) == limit)) {
            remaining += ok;
            json_decref(view);
            if (ok && fk_selector_empty(ls) && fk_selector_empty(fs)) {
                remaining += nkeys - i - 1; /* the rest all match */
                break;
            }
            continue;
        }
        item = json_copy(view); /* shallow: drop the type fields only */
        json_decref(view);
        if (!item)
            goto oom;
        json_object_del(item, "kind");
        json_object_del(item, "apiVersion");
        if (json_array_append_new(items, item) < 0)
            goto oom;
        last_key = keys[i];
    }
    snprintf(lk, sizeof(lk), "%sList", k->kind);
    snprintf(rvs, sizeof(rvs), "%" PRIu64, rv);
    list = json_pack("{s:s, s:s, s:{s:s}, s:O}", "kind", lk, "apiVersion",
                     fk_kind_api_version(k, av, sizeof(av)), "metadata", "resourceVersion", rvs,
                     "items", items);
    if (!list)
        goto oom;
    if (remaining) {
        json_t *meta = json_object_get(list, "metadata");
        next_tok = make_continue(rv, last_key);
        if (!next_tok || json_object_set_new(meta, "continue", json_string(next_tok)) < 0)
            goto oom;
        if (fk_selector_empty(ls) && fk_selector_empty(fs) &&
            json_object_set_new(meta, "remainingItemCount", json_integer((json_int_t)remaining)) <
                0)
            goto oom;
    }
    free(next_tok);
    free(keys);
    free(last);
    json_decref(items);
    json_decref(snap);
    fk_selector_free(ls);
    fk_selector_free(fs);
    fk_reply_json(rq, 200, list);
    return;
oom:
    err = fk_status_new(500, "InternalError", "out of memory", NULL, NULL, NULL);
fail:
    free(next_tok);
    free(keys);
    free(last);
    json_decref(list);
    json_decref(items);
    json_decref(snap);
    fk_selector_free(ls);
    fk_selector_free(fs);
    fk_reply_status(rq, err);
}
