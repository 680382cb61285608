/* POST /load_balancers/{id}/actions/<name>.
 *
 * Every handler validates the whole request first and changes the balancer
 * only when `apply` is set; an injected action failure runs the validation
 * and leaves the balancer as it was. */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

typedef int (*action_fn)(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply);

static int
oom(struct hz_req *r)
{
    hz_reply_error(r, 500, "server_error", "out of memory", NULL);
    return -1;
}

static int
add_target(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    json_t *t;
    if (hz_check_target(r, lb, body, &t) < 0)
        return -1;
    if (!apply) {
        json_decref(t);
        return 0;
    }
    return json_array_append_new(lb->targets, t) < 0 ? oom(r) : 0;
}

static int
remove_target(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    const char *type = json_string_value(json_object_get(body, "type"));
    const char *key, *sub, *want = NULL;
    json_int_t want_id = 0;
    size_t i;
    json_t *t;
    if (!type) {
        hz_reply_invalid(r, "type", "is required");
        return -1;
    }
    if (!strcmp(type, "ip")) {
        key = "ip", sub = "ip";
        want = json_string_value(json_object_get(json_object_get(body, "ip"), "ip"));
    } else if (!strcmp(type, "label_selector")) {
        key = "label_selector", sub = "selector";
        want = json_string_value(json_object_get(json_object_get(body, key), sub));
    } else if (!strcmp(type, "server")) {
        key = "server", sub = "id";
        json_t *id = json_object_get(json_object_get(body, key), sub);
        if (json_is_integer(id))
            want_id = json_integer_value(id), want = "";
    } else {
        hz_reply_invalid(r, "type", "must be one of ip, server, label_selector");
        return -1;
    }
    if (!want) {
        hz_reply_invalid(r, key, "is required");
        return -1;
    }
    json_array_foreach(lb->targets, i, t)
    {
        json_t *v = json_object_get(json_object_get(t, key), sub);
        if (!v)
            continue;
        if ((json_is_string(v) && !strcmp(json_string_value(v), want)) ||
            (json_is_integer(v) && json_integer_value(v) == want_id)) {
            if (apply)
                json_array_remove(lb->targets, i);
            return 0;
        }
    }
    hz_reply_error(r, 404, "not_found", "target not found", NULL);
    return -1;
}

static int
add_service(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    json_t *s;
    if (hz_check_service(r, lb, body, &s) < 0)
        return -1;
    if (!apply) {
        json_decref(s);
        return 0;
    }
    return json_array_append_new(lb->services, s) < 0 ? oom(r) : 0;
}

/* Index of the service with listen_port from body, or -1 after replying. */
static long
find_service(struct hz_req *r, struct hz_lb *lb, json_t *body)
{
    long long port;
    int present;
    size_t i;
    json_t *s;
    if (hz_json_int(r, body, "listen_port", "listen_port", &port, &present) < 0)
        return -1;
    if (!present) {
        hz_reply_invalid(r, "listen_port", "is required");
        return -1;
    }
    json_array_foreach(lb->services, i, s) if (json_integer_value(json_object_get(
                                                   s, "listen_port")) == port) return (long)i;
    hz_reply_error(r, 404, "not_found", "service not found", NULL);
    return -1;
}

static int
update_service(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    long idx = find_service(r, lb, body);
    json_t *s;
    if (idx < 0)
        return -1;
    json_t *base = json_array_get(lb->services, (size_t)idx);
    json_t *req = json_deep_copy(body);
    if (!req)
        return oom(r);
    /* The key cannot change: keep listen_port as stored. */
    if (!json_object_get(req, "protocol") &&
        json_object_set(req, "protocol", json_object_get(base, "protocol")) < 0) {
        json_decref(req);
        return oom(r);
    }
    int rc = hz_merge_service(r, lb, base, req, &s);
    json_decref(req);
    if (rc < 0)
        return -1;
    if (!apply) {
        json_decref(s);
        return 0;
    }
    return json_array_set_new(lb->services, (size_t)idx, s) < 0 ? oom(r) : 0;
}

static int
delete_service(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    long idx = find_service(r, lb, body);
    if (idx < 0)
        return -1;
    if (apply)
        json_array_remove(lb->services, (size_t)idx);
    return 0;
}

static int
attach_to_network(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    long long net;
    int present, p_ip, p_range;
    const char *ip = NULL, *ip_range = NULL;
    char out[16];
    if (hz_json_int(r, body, "network", "network", &net, &present) < 0 ||
        hz_json_str(r, body, "ip", "ip", &ip, &p_ip) < 0 ||
        hz_json_str(r, body, "ip_range", "ip_range", &ip_range, &p_range) < 0)
        return -1;
    if (!present) {
        hz_reply_invalid(r, "network", "is required");
        return -1;
    }
    if (hz_attach_network(r, lb, (long)net, ip, ip_range, out, sizeof(out)) < 0)
        return -1;
    if (!apply)
        return 0;
    json_t *pn = json_pack("{s:I, s:s}", "network", (json_int_t)net, "ip", out);
    return json_array_append_new(lb->private_net, pn) < 0 ? oom(r) : 0;
}

static int
detach_from_network(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    long long net;
    int present;
    size_t i;
    json_t *pn;
    if (hz_json_int(r, body, "network", "network", &net, &present) < 0)
        return -1;
    if (!present) {
        hz_reply_invalid(r, "network", "is required");
        return -1;
    }
    json_array_foreach(lb->private_net, i, pn)
    {
        if (json_integer_value(json_object_get(pn, "network")) == net) {
            if (!lb->public_enabled && json_array_size(lb->private_net) == 1) {
                hz_reply_error(r, 422, "load_balancer_not_attached_to_network",
                               "a load balancer without public interface needs a network", NULL);
                return -1;
            }
            if (apply)
                json_array_remove(lb->private_net, i);
            return 0;
        }
    }
    hz_reply_error(r, 422, "load_balancer_not_attached_to_network",
                   "load balancer is not attached to this network", NULL);
    return -1;
}

static int
change_algorithm(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    const char *t = json_string_value(json_object_get(body, "type"));
    if (!t || (strcmp(t, "round_robin") && strcmp(t, "least_connections"))) {
        hz_reply_invalid(r, "type", "must be round_robin or least_connections");
        return -1;
    }
    if (apply)
        lb->least_connections = strcmp(t, "least_connections") == 0;
    return 0;
}

static int
change_type(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    const struct hz_lb_type *t = hz_type_find(json_object_get(body, "load_balancer_type"));
    if (!t) {
        hz_reply_invalid(r, "load_balancer_type", "unknown load balancer type");
        return -1;
    }
    if (json_array_size(lb->targets) > (size_t)t->max_targets ||
        json_array_size(lb->services) > (size_t)t->max_services) {
        hz_reply_error(r, 422, "invalid_load_balancer_type",
                       "the load balancer has more targets or services than the type allows", NULL);
        return -1;
    }
    if (apply)
        lb->type = t;
    return 0;
}

static int
enable_public(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    (void)r, (void)body;
    if (apply)
        lb->public_enabled = 1;
    return 0;
}

static int
disable_public(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    (void)body;
    if (json_array_size(lb->private_net) == 0) {
        hz_reply_error(r, 422, "load_balancer_not_attached_to_network",
                       "a load balancer without public interface needs a network", NULL);
        return -1;
    }
    if (apply)
        lb->public_enabled = 0;
    return 0;
}

static int
change_protection(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    int del, present;
    if (hz_json_bool(r, body, "delete", "delete", &del, &present) < 0)
        return -1;
    if (apply && present)
        lb->protect_delete = del;
    return 0;
}

static int
change_dns_ptr(struct hz_req *r, struct hz_lb *lb, json_t *body, int apply)
{
    const char *ip = json_string_value(json_object_get(body, "ip"));
    json_t *ptr = json_object_get(body, "dns_ptr");
    char **slot;
    if (!ip || (strcmp(ip, lb->ipv4) && strcmp(ip, lb->ipv6))) {
        hz_reply_invalid(r, "ip", "must be an IP of the load balancer");
        return -1;
    }
    if (ptr && !json_is_null(ptr) && (!json_is_string(ptr) || !*json_string_value(ptr))) {
        hz_reply_invalid(r, "dns_ptr", "must be a non-empty string or null");
        return -1;
    }
    if (!apply)
        return 0;
    slot = strcmp(ip, lb->ipv4) == 0 ? &lb->dns_ptr4 : &lb->dns_ptr6;
    char *nv = NULL;
    if (json_is_string(ptr) && !(nv = strdup(json_string_value(ptr))))
        return oom(r);
    free(*slot);
    *slot = nv;
    return 0;
}

static const struct {
    const char *name;
    const char *command;
    action_fn fn;
} actions[] = {
    {"add_target", "add_target", add_target},
    {"remove_target", "remove_target", remove_target},
    {"add_service", "add_service", add_service},
    {"update_service", "update_service", update_service},
    {"delete_service", "delete_service", delete_service},
    {"attach_to_network", "attach_to_network", attach_to_network},
    {"detach_from_network", "detach_from_network", detach_from_network},
    {"change_algorithm", "change_algorithm", change_algorithm},
    {"change_type", "change_load_balancer_type", change_type},
    {"enable_public_interface", "enable_public_interface", enable_public},
    {"disable_public_interface", "disable_public_interface", disable_public},
    {"change_protection", "change_protection", change_protection},
    {"change_dns_ptr", "change_dns_ptr", change_dns_ptr},
};

int
hz_lb_action_known(const char *name)
{
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
        if (strcmp(actions[i].name, name) == 0)
            return 1;
    return 0;
}

void
hz_lb_action(struct hz_req *r, long id, const char *name)
{
    struct hz_fake *f = r->f;
    struct hz_faults *fl = &f->faults;
    size_t i;
    for (i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
        if (strcmp(actions[i].name, name) == 0)
            break;
    if (i == sizeof(actions) / sizeof(actions[0])) {
        hz_reply_error(r, 404, "not_found", "unknown action", NULL);
        return;
    }
    struct hz_lb *lb = hz_lb_find(f, id);
    if (!lb) {
        hz_reply_error(r, 404, "not_found", "load balancer not found", NULL);
        return;
    }
    r->lb_id = lb->id;
    json_t *body = r->body;
    json_t *empty = NULL;
    if (!body) {
        if (!(empty = json_object())) {
            oom(r);
            return;
        }
        body = empty;
    }
    if (!json_is_object(body)) {
        hz_reply_error(r, 400, "json_error", "request body must be a JSON object", NULL);
        goto out;
    }
    if (lb->running_action) {
        hz_reply_error(r, 423, "locked", "another action is running on this load balancer", NULL);
        goto out;
    }
    int fail = fl->action_fail_count > 0;
    if (actions[i].fn(r, lb, body, !fail) < 0)
        goto out;
    hz_lb_touch(lb);
    const char *code = NULL, *msg = NULL;
    if (fail) {
        fl->action_fail_count--;
        code = fl->action_fail_code ? fl->action_fail_code : "action_failed";
        msg = fl->action_fail_message ? fl->action_fail_message : "action failed (injected)";
    }
    struct hz_action *a = hz_action_start(f, actions[i].command, lb->id, code, msg);
    json_t *resp = a ? json_pack("{s:o?}", "action", hz_action_json(a)) : NULL;
    if (!resp || !json_object_get(resp, "action")) {
        json_decref(resp);
        oom(r);
        goto out;
    }
    hz_reply(r, 201, resp);
out:
    json_decref(empty);
}
