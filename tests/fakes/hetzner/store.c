/* In-memory objects: catalogue, networks, balancers, and their JSON. */
#include "fake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct hz_lb_type hz_lb_types[] = {
    {1, "lb11", "LB11", 10000, 5, 25, 10, "0.0088", "5.3900"},
    {2, "lb21", "LB21", 20000, 15, 75, 25, "0.0264", "16.4000"},
    {3, "lb31", "LB31", 40000, 30, 150, 50, "0.0530", "32.9000"},
};
const size_t hz_n_lb_types = sizeof(hz_lb_types) / sizeof(hz_lb_types[0]);

const struct hz_location hz_locations[] = {
    {1, "fsn1", "Falkenstein DC Park 1", "DE", "Falkenstein", 50.47612, 12.370071, "eu-central"},
    {2, "nbg1", "Nuremberg DC Park 1", "DE", "Nuremberg", 49.452102, 11.076665, "eu-central"},
    {3, "hel1", "Helsinki DC Park 1", "FI", "Helsinki", 60.169855, 24.938379, "eu-central"},
    {4, "ash", "Ashburn, VA", "US", "Ashburn, VA", 39.043757, -77.487442, "us-east"},
    {5, "hil", "Hillsboro, OR", "US", "Hillsboro, OR", 45.54222, -122.95194, "us-west"},
    {6, "sin", "Singapore", "SG", "Singapore", 1.283333, 103.833333, "ap-southeast"},
};
const size_t hz_n_locations = sizeof(hz_locations) / sizeof(hz_locations[0]);

const struct hz_lb_type *
hz_type_find(json_t *name_or_id)
{
    for (size_t i = 0; i < hz_n_lb_types; i++) {
        if (json_is_integer(name_or_id) && json_integer_value(name_or_id) == hz_lb_types[i].id)
            return &hz_lb_types[i];
        if (json_is_string(name_or_id)) {
            const char *s = json_string_value(name_or_id);
            if (strcmp(s, hz_lb_types[i].name) == 0 || hz_parse_id(s) == hz_lb_types[i].id)
                return &hz_lb_types[i];
        }
    }
    return NULL;
}

const struct hz_location *
hz_location_find(const char *name_or_id)
{
    for (size_t i = 0; name_or_id && i < hz_n_locations; i++)
        if (strcmp(name_or_id, hz_locations[i].name) == 0 ||
            hz_parse_id(name_or_id) == hz_locations[i].id)
            return &hz_locations[i];
    return NULL;
}

struct hz_lb *
hz_lb_find(struct hz_fake *f, long id)
{
    for (size_t i = 0; i < f->n_lbs; i++)
        if (f->lbs[i]->id == id)
            return f->lbs[i];
    return NULL;
}

struct hz_lb *
hz_lb_find_name(struct hz_fake *f, const char *name)
{
    for (size_t i = 0; i < f->n_lbs; i++)
        if (strcmp(f->lbs[i]->name, name) == 0)
            return f->lbs[i];
    return NULL;
}

struct hz_network *
hz_net_find(struct hz_fake *f, long id)
{
    for (size_t i = 0; i < f->n_nets; i++)
        if (f->nets[i]->id == id)
            return f->nets[i];
    return NULL;
}

int
hz_ptr_push(void ***arr, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        void **na = realloc(*arr, nc * sizeof(*na));
        if (!na)
            return -ENOMEM;
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = p;
    return 0;
}

int
hz_lb_add(struct hz_fake *f, struct hz_lb *lb)
{
    /* Keep the array sorted by id: seeds may come in any order. */
    if (hz_ptr_push((void ***)&f->lbs, &f->n_lbs, &f->cap_lbs, lb) < 0)
        return -ENOMEM;
    for (size_t i = f->n_lbs - 1; i > 0 && f->lbs[i - 1]->id > lb->id; i--) {
        f->lbs[i] = f->lbs[i - 1];
        f->lbs[i - 1] = lb;
    }
    if (lb->id >= f->next_lb_id)
        f->next_lb_id = lb->id + 1;
    return 0;
}

void
hz_lb_remove(struct hz_fake *f, int id)
{
    for (size_t i = 0; i < f->n_lbs; i++) {
        if (f->lbs[i]->id == id) {
            hz_lb_free(f->lbs[i]);
            memmove(&f->lbs[i], &f->lbs[i + 1], (f->n_lbs - i - 1) * sizeof(f->lbs[0]));
            f->n_lbs--;
            return;
        }
    }
}

int
hz_net_add(struct hz_fake *f, struct hz_network *n)
{
    return hz_ptr_push((void ***)&f->nets, &f->n_nets, &f->cap_nets, n);
}

struct hz_lb *
hz_lb_new(struct hz_fake *f, const char *name)
{
    struct hz_lb *lb = calloc(1, sizeof(*lb));
    if (!lb)
        return NULL;
    lb->name = strdup(name);
    lb->labels = json_object();
    lb->targets = json_array();
    lb->services = json_array();
    lb->private_net = json_array();
    if (!lb->name || !lb->labels || !lb->targets || !lb->services || !lb->private_net) {
        hz_lb_free(lb);
        return NULL;
    }
    unsigned long n = f->next_ip++;
    /* Documentation ranges: 198.51.100.0/22 and 2001:db8::/32. */
    hz_ip4_format(0xC6336400u + 1u + (uint32_t)(n % 1000u), lb->ipv4, sizeof(lb->ipv4));
    snprintf(lb->ipv6, sizeof(lb->ipv6), "2001:db8:%lx::1", (n % 0xffffu) + 1);
    lb->public_enabled = 1;
    lb->created = time(NULL);
    return lb;
}

void
hz_lb_free(struct hz_lb *lb)
{
    if (!lb)
        return;
    free(lb->name);
    json_decref(lb->labels);
    json_decref(lb->targets);
    json_decref(lb->services);
    json_decref(lb->private_net);
    free(lb->dns_ptr4);
    free(lb->dns_ptr6);
    free(lb->cache);
    free(lb);
}

void
hz_lb_touch(struct hz_lb *lb)
{
    free(lb->cache);
    lb->cache = NULL;
}

const char *
hz_lb_text(struct hz_fake *f, struct hz_lb *lb)
{
    if (!lb->cache) {
        json_t *j = hz_lb_json(f, lb);
        lb->cache = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
        json_decref(j);
    }
    return lb->cache;
}

void
hz_net_free(struct hz_network *n)
{
    if (!n)
        return;
    free(n->name);
    free(n->ip_range);
    json_decref(n->subnets);
    json_decref(n->labels);
    json_decref(n->reserved);
    free(n);
}

void
hz_store_free(struct hz_fake *f)
{
    for (size_t i = 0; i < f->n_lbs; i++)
        hz_lb_free(f->lbs[i]);
    free(f->lbs);
    f->lbs = NULL;
    f->n_lbs = f->cap_lbs = 0;
    for (size_t i = 0; i < f->n_nets; i++)
        hz_net_free(f->nets[i]);
    free(f->nets);
    f->nets = NULL;
    f->n_nets = f->cap_nets = 0;
    hz_certs_free(f);
}

json_t *
hz_type_json(const struct hz_lb_type *t)
{
    json_t *prices = json_array();
    if (!prices)
        return NULL;
    for (size_t i = 0; i < hz_n_locations; i++) {
        json_t *p = json_pack("{s:s, s:{s:s, s:s}, s:{s:s, s:s}}", "location", hz_locations[i].name,
                              "price_hourly", "net", t->price_hourly, "gross", t->price_hourly,
                              "price_monthly", "net", t->price_monthly, "gross", t->price_monthly);
        if (!p || json_array_append_new(prices, p) < 0) {
            json_decref(prices);
            return NULL;
        }
    }
    return json_pack("{s:i, s:s, s:s, s:i, s:i, s:i, s:i, s:o, s:n}", "id", t->id, "name", t->name,
                     "description", t->description, "max_connections", t->max_connections,
                     "max_services", t->max_services, "max_targets", t->max_targets,
                     "max_assigned_certificates", t->max_certificates, "prices", prices,
                     "deprecated");
}

json_t *
hz_location_json(const struct hz_location *l)
{
    return json_pack("{s:i, s:s, s:s, s:s, s:s, s:f, s:f, s:s}", "id", l->id, "name", l->name,
                     "description", l->description, "country", l->country, "city", l->city,
                     "latitude", l->latitude, "longitude", l->longitude, "network_zone",
                     l->network_zone);
}

/* Stored targets plus health_status per service (new). */
static json_t *
targets_json(const struct hz_lb *lb)
{
    json_t *out = json_array();
    size_t i, j;
    json_t *t, *s;
    if (!out)
        return NULL;
    json_array_foreach(lb->targets, i, t)
    {
        json_t *c = json_copy(t);
        json_t *hs = json_array();
        if (!c || !hs || json_object_set_new(c, "health_status", hs) < 0) {
            json_decref(hs);
            goto fail_c;
        }
        json_array_foreach(lb->services, j, s)
        {
            json_t *h = json_pack("{s:O, s:s}", "listen_port", json_object_get(s, "listen_port"),
                                  "status", "healthy");
            if (!h || json_array_append_new(hs, h) < 0)
                goto fail_c;
        }
        if (json_array_append_new(out, c) < 0)
            goto fail;
        continue;
    fail_c:
        json_decref(c);
        goto fail;
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

json_t *
hz_lb_json(struct hz_fake *f, const struct hz_lb *lb)
{
    (void)f;
    char ptr4[96];
    char ptr6[96];
    snprintf(ptr4, sizeof(ptr4), "static.%s.clients.your-server.de", lb->ipv4);
    snprintf(ptr6, sizeof(ptr6), "static.%s.clients.your-server.de", lb->ipv6);
    json_t *type = hz_type_json(lb->type);
    json_t *loc = hz_location_json(lb->location);
    json_t *targets = targets_json(lb);
    if (!type || !loc || !targets) {
        json_decref(type);
        json_decref(loc);
        json_decref(targets);
        return NULL;
    }
    /* Labels, services and private_net are shared by reference: the reply
     * is serialised before the store changes again. */
    return json_pack(
        "{s:i, s:s, s:{s:b, s:{s:s, s:s}, s:{s:s, s:s}}, s:O, s:o, s:o, s:{s:b}, s:O, s:o,"
        " s:O, s:o, s:{s:s}, s:I, s:n, s:n}",
        "id", lb->id, "name", lb->name, "public_net", "enabled", lb->public_enabled, "ipv4", "ip",
        lb->ipv4, "dns_ptr", lb->dns_ptr4 ? lb->dns_ptr4 : ptr4, "ipv6", "ip", lb->ipv6, "dns_ptr",
        lb->dns_ptr6 ? lb->dns_ptr6 : ptr6, "private_net", lb->private_net, "location", loc,
        "load_balancer_type", type, "protection", "delete", lb->protect_delete, "labels",
        lb->labels, "created", hz_time_json(lb->created), "services", lb->services, "targets",
        targets, "algorithm", "type", lb->least_connections ? "least_connections" : "round_robin",
        "included_traffic", (json_int_t)654311424000LL, "outgoing_traffic", "ingoing_traffic");
}

json_t *
hz_net_json(struct hz_fake *f, const struct hz_network *n)
{
    json_t *lbs = json_array();
    if (!lbs)
        return NULL;
    for (size_t i = 0; i < f->n_lbs; i++) {
        size_t j;
        json_t *pn;
        json_array_foreach(f->lbs[i]->private_net, j, pn)
        {
            if (json_integer_value(json_object_get(pn, "network")) == n->id &&
                json_array_append_new(lbs, json_integer(f->lbs[i]->id)) < 0) {
                json_decref(lbs);
                return NULL;
            }
        }
    }
    return json_pack("{s:i, s:s, s:o, s:s, s:O, s:[], s:[], s:o, s:{s:b}, s:O, s:b}", "id", n->id,
                     "name", n->name, "created", hz_time_json(n->created), "ip_range", n->ip_range,
                     "subnets", n->subnets, "routes", "servers", "load_balancers", lbs,
                     "protection", "delete", n->protect_delete, "labels", n->labels,
                     "expose_routes_to_vswitch", 0);
}
