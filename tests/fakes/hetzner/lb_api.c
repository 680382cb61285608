/* /load_balancers collection and item endpoints. */
#include "fake.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Balancer names: 1..128 printable characters without blanks. */
static int
name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isgraph((unsigned char)s[i]))
            return 0;
    return 1;
}

static void
reply_uniqueness(struct hz_req *r)
{
    json_t *d =
        json_pack("{s:[{s:s, s:[s]}]}", "fields", "name", "name", "messages", "already used");
    hz_reply_error(r, 409, "uniqueness_error", "SQL constraint violated: name is already used", d);
}

static int
set_labels(struct hz_req *r, struct hz_lb *lb, json_t *labels)
{
    char err[160];
    if (!hz_labels_valid(labels, err, sizeof(err))) {
        hz_reply_invalid(r, "labels", err);
        return -1;
    }
    json_t *copy = json_deep_copy(labels);
    if (!copy) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return -1;
    }
    json_decref(lb->labels);
    lb->labels = copy;
    return 0;
}

/* Location from "location" or "network_zone" of body. */
static const struct hz_location *
pick_location(struct hz_req *r, json_t *body)
{
    const char *loc = NULL, *zone = NULL;
    int p_loc, p_zone;
    json_t *jl = json_object_get(body, "location");
    char idbuf[24];
    if (json_is_integer(jl)) {
        snprintf(idbuf, sizeof(idbuf), "%lld", (long long)json_integer_value(jl));
        loc = idbuf;
        p_loc = 1;
    } else if (hz_json_str(r, body, "location", "location", &loc, &p_loc) < 0) {
        return NULL;
    }
    if (hz_json_str(r, body, "network_zone", "network_zone", &zone, &p_zone) < 0)
        return NULL;
    if (p_loc) {
        const struct hz_location *l = hz_location_find(loc);
        if (!l)
            hz_reply_invalid(r, "location", "unknown location");
        else if (p_zone && strcmp(l->network_zone, zone) != 0)
            hz_reply_invalid(r, "network_zone", "does not match the location");
        else
            return l;
        return NULL;
    }
    if (p_zone) {
        for (size_t i = 0; i < hz_n_locations; i++)
            if (strcmp(hz_locations[i].network_zone, zone) == 0)
                return &hz_locations[i];
        hz_reply_invalid(r, "network_zone", "unknown network zone");
        return NULL;
    }
    hz_reply_invalid(r, "location", "location or network_zone is required");
    return NULL;
}

static int
parse_algorithm(struct hz_req *r, json_t *algo, int *least)
{
    const char *t = json_string_value(json_object_get(algo, "type"));
    if (!t || (strcmp(t, "round_robin") && strcmp(t, "least_connections"))) {
        hz_reply_invalid(r, "algorithm.type", "must be round_robin or least_connections");
        return -1;
    }
    *least = strcmp(t, "least_connections") == 0;
    return 0;
}

struct hz_lb *
hz_lb_build(struct hz_req *r, json_t *body)
{
    const char *name;
    int present, pub;
    long long net_id;
    struct hz_lb *lb = NULL;
    json_t *v, *out;
    size_t i;
    if (!json_is_object(body)) {
        hz_reply_error(r, 400, "json_error", "request body must be a JSON object", NULL);
        return NULL;
    }
    if (hz_json_str(r, body, "name", "name", &name, &present) < 0)
        return NULL;
    if (!present || !name_valid(name)) {
        hz_reply_invalid(r, "name", "must be 1 to 128 characters without blanks");
        return NULL;
    }
    if (hz_lb_find_name(r->f, name)) {
        reply_uniqueness(r);
        return NULL;
    }
    const struct hz_lb_type *type = hz_type_find(json_object_get(body, "load_balancer_type"));
    if (!type) {
        hz_reply_invalid(r, "load_balancer_type", "unknown load balancer type");
        return NULL;
    }
    const struct hz_location *loc = pick_location(r, body);
    if (!loc)
        return NULL;
    if (!(lb = hz_lb_new(r->f, name))) {
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return NULL;
    }
    lb->type = type;
    lb->location = loc;
    if ((v = json_object_get(body, "algorithm")) && !json_is_null(v) &&
        parse_algorithm(r, v, &lb->least_connections) < 0)
        goto fail;
    if ((v = json_object_get(body, "labels")) && !json_is_null(v) && set_labels(r, lb, v) < 0)
        goto fail;
    if (hz_json_bool(r, body, "public_interface", "public_interface", &pub, &present) < 0)
        goto fail;
    if (present)
        lb->public_enabled = pub;
    if (hz_json_int(r, body, "network", "network", &net_id, &present) < 0)
        goto fail;
    if (present) {
        char ip[16];
        const char *want = NULL;
        int p_ip;
        if (hz_json_str(r, body, "network_ip", "network_ip", &want, &p_ip) < 0 ||
            hz_attach_network(r, lb, (long)net_id, want, NULL, ip, sizeof(ip)) < 0)
            goto fail;
        if (json_array_append_new(lb->private_net, json_pack("{s:I, s:s}", "network",
                                                             (json_int_t)net_id, "ip", ip)) < 0)
            goto oom;
    }
    if (!lb->public_enabled && json_array_size(lb->private_net) == 0) {
        hz_reply_error(r, 422, "load_balancer_not_attached_to_network",
                       "a load balancer without public interface needs a network", NULL);
        goto fail;
    }
    v = json_object_get(body, "targets");
    if (v && !json_is_null(v) && !json_is_array(v)) {
        hz_reply_invalid(r, "targets", "must be an array");
        goto fail;
    }
    json_array_foreach(v, i, out)
    {
        json_t *t;
        if (hz_check_target(r, lb, out, &t) < 0)
            goto fail;
        if (json_array_append_new(lb->targets, t) < 0)
            goto oom;
    }
    v = json_object_get(body, "services");
    if (v && !json_is_null(v) && !json_is_array(v)) {
        hz_reply_invalid(r, "services", "must be an array");
        goto fail;
    }
    json_array_foreach(v, i, out)
    {
        json_t *s;
        if (hz_check_service(r, lb, out, &s) < 0)
            goto fail;
        if (json_array_append_new(lb->services, s) < 0)
            goto oom;
    }
    return lb;
oom:
    hz_reply_error(r, 500, "server_error", "out of memory", NULL);
fail:
    hz_lb_free(lb);
    return NULL;
}

void
hz_lb_create(struct hz_req *r)
{
    struct hz_fake *f = r->f;
    if (f->max_lbs >= 0 && f->n_lbs >= (size_t)f->max_lbs) {
        hz_reply_error(r, 403, "resource_limit_exceeded", "project limit of load balancers reached",
                       NULL);
        return;
    }
    struct hz_lb *lb = hz_lb_build(r, r->body);
    if (!lb)
        return;
    lb->id = f->next_lb_id;
    if (hz_lb_add(f, lb) < 0) {
        hz_lb_free(lb);
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return;
    }
    r->lb_id = lb->id;
    struct hz_action *a = hz_action_start(f, "create_load_balancer", lb->id, NULL, NULL);
    json_t *lbj = hz_lb_json(f, lb);
    json_t *aj = a ? hz_action_json(a) : NULL;
    json_t *resp = json_pack("{s:o?, s:o?}", "load_balancer", lbj, "action", aj);
    if (!a || !lbj || !aj || !resp) {
        json_decref(resp);
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return;
    }
    hz_reply(r, 201, resp);
}

static struct hz_lb *
find_or_404(struct hz_req *r, long id)
{
    struct hz_lb *lb = hz_lb_find(r->f, id);
    if (!lb)
        hz_reply_error(r, 404, "not_found", "load balancer not found", NULL);
    return lb;
}

static void
reply_lb(struct hz_req *r, struct hz_lb *lb, int status)
{
    json_t *resp = json_pack("{s:o?}", "load_balancer", hz_lb_json(r->f, lb));
    if (!resp || !json_object_get(resp, "load_balancer")) {
        json_decref(resp);
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
        return;
    }
    hz_reply(r, status, resp);
}

/* Join "{<head>" + texts of lbs separated by ',' + "<tail>}" (new). */
static char *
join_texts(struct hz_fake *f, const char *head, struct hz_lb **lbs, size_t n, const char *tail)
{
    size_t len = strlen(head) + strlen(tail) + 1;
    for (size_t i = 0; i < n; i++) {
        const char *t = hz_lb_text(f, lbs[i]);
        if (!t)
            return NULL;
        len += strlen(t) + 1;
    }
    char *out = malloc(len), *p = out;
    if (!out)
        return NULL;
    p = stpcpy(p, head);
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        p = stpcpy(p, lbs[i]->cache);
    }
    stpcpy(p, tail);
    return out;
}

void
hz_lb_get(struct hz_req *r, long id)
{
    struct hz_lb *lb = find_or_404(r, id);
    if (!lb)
        return;
    char *text = join_texts(r->f, "{\"load_balancer\":", &lb, 1, "}");
    if (!text)
        hz_reply_error(r, 500, "server_error", "out of memory", NULL);
    else
        hz_reply_raw(r, 200, text);
}

void
hz_lb_update(struct hz_req *r, long id)
{
    struct hz_lb *lb = find_or_404(r, id);
    const char *name;
    int present;
    json_t *labels;
    if (!lb)
        return;
    r->lb_id = lb->id;
    if (!json_is_object(r->body)) {
        hz_reply_error(r, 400, "json_error", "request body must be a JSON object", NULL);
        return;
    }
    if (hz_json_str(r, r->body, "name", "name", &name, &present) < 0)
        return;
    if (present) {
        struct hz_lb *other = hz_lb_find_name(r->f, name);
        if (!name_valid(name)) {
            hz_reply_invalid(r, "name", "must be 1 to 128 characters without blanks");
            return;
        }
        if (other && other != lb) {
            reply_uniqueness(r);
            return;
        }
    }
    labels = json_object_get(r->body, "labels");
    if (labels && !json_is_null(labels)) {
        char err[160];
        if (!hz_labels_valid(labels, err, sizeof(err))) {
            hz_reply_invalid(r, "labels", err);
            return;
        }
    }
    if (present) {
        char *nn = strdup(name);
        if (!nn) {
            hz_reply_error(r, 500, "server_error", "out of memory", NULL);
            return;
        }
        free(lb->name);
        lb->name = nn;
        hz_lb_touch(lb);
    }
    if (labels && !json_is_null(labels) && set_labels(r, lb, labels) < 0)
        return;
    hz_lb_touch(lb);
    reply_lb(r, lb, 200);
}

void
hz_lb_delete(struct hz_req *r, long id)
{
    struct hz_lb *lb = find_or_404(r, id);
    if (!lb)
        return;
    r->lb_id = lb->id;
    if (lb->protect_delete) {
        hz_reply_error(r, 423, "protected", "load balancer is delete protected", NULL);
        return;
    }
    if (lb->running_action) {
        hz_reply_error(r, 423, "locked", "an action is running on this load balancer", NULL);
        return;
    }
    hz_lb_remove(r->f, lb->id);
    hz_reply(r, 204, NULL);
}

/* ---- listing ---- */

static int
cmp_lb(const void *a, const void *b, void *arg)
{
    const struct hz_lb *x = *(struct hz_lb *const *)a;
    const struct hz_lb *y = *(struct hz_lb *const *)b;
    return hz_sort_cmp(arg, x->id, x->name, x->created, y->id, y->name, y->created);
}

void
hz_lb_list(struct hz_req *r)
{
    struct hz_fake *f = r->f;
    struct hz_selector *sel = NULL;
    struct hz_lb **match = NULL;
    json_t *meta = NULL;
    char *mtext = NULL, *tail = NULL;
    struct hz_sort spec;
    size_t n = 0, from, to;
    char err[160];
    const char *name = hz_query(r, "name");
    const char *ls = hz_query(r, "label_selector");
    if (ls && hz_selector_parse(ls, &sel, err, sizeof(err)) < 0) {
        hz_reply_invalid(r, "label_selector", err);
        return;
    }
    if (hz_parse_sort(r, &spec) < 0)
        goto out;
    if (!(match = calloc(f->n_lbs + 1, sizeof(*match))))
        goto oom;
    for (size_t i = 0; i < f->n_lbs; i++) {
        struct hz_lb *lb = f->lbs[i];
        if (name && strcmp(lb->name, name) != 0)
            continue;
        if (sel && !hz_selector_match(sel, lb->labels))
            continue;
        match[n++] = lb;
    }
    if (spec.n)
        qsort_r(match, n, sizeof(*match), cmp_lb, &spec);
    if (hz_page(r, n, &from, &to, &meta) < 0)
        goto out;
    if (!(mtext = json_dumps(meta, JSON_COMPACT)))
        goto oom;
    size_t tl = strlen(mtext) + 16;
    if (!(tail = malloc(tl)))
        goto oom;
    snprintf(tail, tl, "],\"meta\":%s}", mtext);
    char *text = join_texts(f, "{\"load_balancers\":[", match + from, to - from, tail);
    if (!text)
        goto oom;
    hz_reply_raw(r, 200, text);
    goto out;
oom:
    hz_reply_error(r, 500, "server_error", "out of memory", NULL);
out:
    free(mtext);
    free(tail);
    json_decref(meta);
    free(match);
    hz_selector_free(sel);
}
