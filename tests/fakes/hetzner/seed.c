/* Start-up seeding from a JSON file (format in README.md). */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
seed_fail(const char *path, const char *what, const char *why)
{
    fprintf(stderr, "seed %s: %s: %s\n", path, what, why);
    return -1;
}

/* Build the stored subnet from a seed subnet, checked against the network. */
static json_t *
make_subnet(const struct hz_network *n, json_t *s, char *err, size_t errlen)
{
    const char *type = json_string_value(json_object_get(s, "type"));
    const char *range = json_string_value(json_object_get(s, "ip_range"));
    const char *zone = json_string_value(json_object_get(s, "network_zone"));
    json_t *vsw = json_object_get(s, "vswitch_id");
    uint32_t net, sub;
    int np, sp;
    char gw[16];
    if (!type || (strcmp(type, "cloud") && strcmp(type, "vswitch") && strcmp(type, "server"))) {
        snprintf(err, errlen, "subnet type must be cloud, server or vswitch");
        return NULL;
    }
    if (!range || hz_cidr4_parse(range, &sub, &sp) < 0 ||
        hz_cidr4_parse(n->ip_range, &net, &np) < 0 || sp < np ||
        !hz_cidr4_contains(n->ip_range, sub)) {
        snprintf(err, errlen, "subnet ip_range must be a CIDR inside the network");
        return NULL;
    }
    if (!strcmp(type, "vswitch") && !json_is_integer(vsw)) {
        snprintf(err, errlen, "a vswitch subnet needs an integer vswitch_id");
        return NULL;
    }
    uint32_t mask = sp == 0 ? 0 : 0xffffffffu << (32 - sp);
    hz_ip4_format(!strcmp(type, "vswitch") ? (sub & mask) + 1 : net + 1, gw, sizeof(gw));
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "type", type, "ip_range", range, "network_zone",
                          zone ? zone : "eu-central", "gateway", gw);
    if (o && !strcmp(type, "vswitch") && json_object_set(o, "vswitch_id", vsw) < 0) {
        json_decref(o);
        o = NULL;
    }
    if (!o)
        snprintf(err, errlen, "out of memory");
    return o;
}

static int
seed_network(struct hz_fake *f, const char *path, json_t *j)
{
    char err[160];
    size_t i;
    json_t *s;
    const char *name = json_string_value(json_object_get(j, "name"));
    const char *range = json_string_value(json_object_get(j, "ip_range"));
    json_t *id = json_object_get(j, "id");
    json_t *labels = json_object_get(j, "labels");
    json_t *reserved = json_object_get(j, "reserved_ips");
    uint32_t a;
    int p;
    if (!name || !range || hz_cidr4_parse(range, &a, &p) < 0)
        return seed_fail(path, "network", "needs name and an IPv4 CIDR ip_range");
    for (i = 0; i < f->n_nets; i++)
        if (!strcmp(f->nets[i]->name, name) ||
            (json_is_integer(id) && f->nets[i]->id == json_integer_value(id)))
            return seed_fail(path, name, "duplicate network name or id");
    if (labels && !hz_labels_valid(labels, err, sizeof(err)))
        return seed_fail(path, name, err);
    struct hz_network *n = calloc(1, sizeof(*n));
    if (!n)
        return seed_fail(path, name, "out of memory");
    n->id = json_is_integer(id) ? (int)json_integer_value(id) : (int)f->n_nets + 1;
    n->name = strdup(name);
    n->ip_range = strdup(range);
    n->subnets = json_array();
    n->labels = labels ? json_deep_copy(labels) : json_object();
    n->reserved = json_array();
    n->created = time(NULL);
    n->protect_delete = json_is_true(json_object_get(json_object_get(j, "protection"), "delete"));
    if (!n->name || !n->ip_range || !n->subnets || !n->labels || !n->reserved) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    json_array_foreach(json_object_get(j, "subnets"), i, s)
    {
        json_t *o = make_subnet(n, s, err, sizeof(err));
        if (!o || json_array_append_new(n->subnets, o) < 0)
            goto fail;
    }
    json_array_foreach(reserved, i, s)
    {
        if (!json_is_string(s) || hz_ip4_parse(json_string_value(s), &a) < 0) {
            snprintf(err, sizeof(err), "reserved_ips must be IPv4 strings");
            goto fail;
        }
        if (json_array_append(n->reserved, s) < 0)
            goto fail;
    }
    if (hz_net_add(f, n) < 0) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    return 0;
fail:
    hz_net_free(n);
    return seed_fail(path, name, err);
}

/* A request standing for the seed, to build objects as the API does. */
static void
seed_req(struct hz_req *r, struct hz_fake *f)
{
    memset(r, 0, sizeof(*r));
    r->f = f;
    r->identity = "seed";
}

/* Report the API error r holds for a seeded object; returns -1. */
static int
seed_api_fail(const char *path, const char *what, const char *name, struct hz_req *r)
{
    json_t *e = json_object_get(r->resp, "error");
    char *d = json_dumps(json_object_get(e, "details"), JSON_COMPACT);
    fprintf(stderr, "seed %s: %s %s: %s: %s %s\n", path, what, name ? name : "?",
            json_string_value(json_object_get(e, "code")),
            json_string_value(json_object_get(e, "message")), d ? d : "");
    free(d);
    json_decref(r->resp);
    r->resp = NULL;
    return -1;
}

/* A certificate: the body of POST /certificates plus "id"; a managed one
 * is issued at once (no action). */
static int
seed_cert(struct hz_fake *f, const char *path, json_t *j)
{
    struct hz_req r;
    seed_req(&r, f);
    json_t *id = json_object_get(j, "id");
    const char *name = json_string_value(json_object_get(j, "name"));
    json_t *body = json_is_object(j) ? json_copy(j) : NULL;
    if (!body)
        return seed_fail(path, "certificates", "each must be an object");
    json_object_del(body, "id");
    if (id &&
        (!json_is_integer(id) || json_integer_value(id) < 1 || json_integer_value(id) > INT32_MAX ||
         hz_cert_find(f, (long)json_integer_value(id)))) {
        json_decref(body);
        return seed_fail(path, name ? name : "certificate", "id must be positive and unique");
    }
    struct hz_cert *c = hz_cert_build(&r, body);
    json_decref(body);
    if (!c)
        return seed_api_fail(path, "certificate", name, &r);
    c->id = id ? (int)json_integer_value(id) : 0;
    if ((c->managed && hz_cert_issue(c) < 0) || hz_cert_add(f, c) < 0) {
        hz_cert_free(c);
        return seed_fail(path, name ? name : "certificate", "cannot issue or store it");
    }
    return 0;
}

static int
seed_lb(struct hz_fake *f, const char *path, json_t *j)
{
    struct hz_req r;
    seed_req(&r, f);
    json_t *id = json_object_get(j, "id");
    const char *name = json_string_value(json_object_get(j, "name"));
    if (json_is_integer(id) &&
        (json_integer_value(id) < 1 || hz_lb_find(f, (long)json_integer_value(id))))
        return seed_fail(path, name ? name : "load balancer", "id must be positive and unique");
    struct hz_lb *lb = hz_lb_build(&r, j);
    if (!lb)
        return seed_api_fail(path, "load balancer", name, &r);
    lb->id = json_is_integer(id) ? (int)json_integer_value(id) : f->next_lb_id;
    lb->protect_delete = json_is_true(json_object_get(json_object_get(j, "protection"), "delete"));
    if (hz_lb_add(f, lb) < 0) {
        hz_lb_free(lb);
        return seed_fail(path, name, "out of memory");
    }
    return 0;
}

int
hz_seed_load(struct hz_fake *f, const char *path)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    size_t i;
    json_t *v;
    int rc = -1;
    if (!root) {
        fprintf(stderr, "seed %s:%d: %s\n", path, jerr.line, jerr.text);
        return -1;
    }
    if (!json_is_object(root)) {
        seed_fail(path, "top level", "must be an object");
        goto out;
    }
    json_array_foreach(json_object_get(root, "tokens"), i, v)
    {
        if (!json_is_string(v) || !*json_string_value(v)) {
            seed_fail(path, "tokens", "must be non-empty strings");
            goto out;
        }
        if (json_array_append(f->tokens, v) < 0)
            goto out;
    }
    v = json_object_get(root, "max_load_balancers");
    if (!v)
        v = json_object_get(json_object_get(root, "limits"), "max_load_balancers");
    if (v && f->cfg.max_lbs < 0) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            seed_fail(path, "max_load_balancers", "must be an integer >= 0");
            goto out;
        }
        f->max_lbs = (int)json_integer_value(v);
    }
    json_array_foreach(json_object_get(root, "networks"), i,
                       v) if (seed_network(f, path, v) < 0) goto out;
    json_array_foreach(json_object_get(root, "certificates"), i,
                       v) if (seed_cert(f, path, v) < 0) goto out;
    json_array_foreach(json_object_get(root, "load_balancers"), i,
                       v) if (seed_lb(f, path, v) < 0) goto out;
    rc = 0;
out:
    json_decref(root);
    return rc;
}
