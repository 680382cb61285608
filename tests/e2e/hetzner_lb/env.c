/*
 * env: what every mod_hetzner_lb end-to-end suite that runs the daemon
 * shares: both fakes started (the Hetzner one seeded with the network "k8s"
 * and its vSwitch subnet, or with no network), the fake API server's
 * kubeconfig, the daemon with one hetzner_lb instance (optionally gated by
 * the lifecycle test module) or with a configuration of the test's own,
 * its log, and requests to both fakes.
 */
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "daemon.h"
#include "env.h"

char *dir;

void
setup(void)
{
    tu_dir_setup();
    dir = tu_dir;
}

void
teardown(void)
{
    tu_dir_teardown();
    dir = NULL;
}

void
dump_log(struct env *e)
{
    char *text = tu_read_file(e->log, NULL);
    fprintf(stderr, "---- daemon log ----\n%s\n----\n", text ? text : "(none)");
    free(text);
}

void
env_fakes_start(struct env *e, int no_network, const char *seed_extra, const char *const *hz_args)
{
    char *seed;
    const char *x = seed_extra ? seed_extra : "";
    memset(e, 0, sizeof(*e));
    ck_assert_int_eq(fake_start(&e->kube, NULL), 0);
    int n = no_network ? snprintf(NULL, 0, SEED_NO_NETWORK, x) : snprintf(NULL, 0, SEED, x);
    ck_assert_int_gt(n, 0);
    seed = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(seed);
    if (no_network)
        snprintf(seed, (size_t)n + 1, SEED_NO_NETWORK, x);
    else
        snprintf(seed, (size_t)n + 1, SEED, x);
    ck_assert_int_eq(hzt_start(&e->hz, seed, hz_args), 0);
    free(seed);
    snprintf(e->kc, sizeof(e->kc), "%s/kubeconfig", e->kube.dir);
    /* The certificates by their bare names: beside the kubeconfig. */
    const struct tu_kubeconfig kc = {.server = e->kube.server[0]};
    ck_assert_int_eq(tu_write_kubeconfig(e->kc, &kc), 0);
}

double
env_metric(const char *text, const char *series)
{
    double v;
    return tu_metric_value(text, series, &v) == 0 ? v : -1;
}

void
env_spawn(struct tu_proc *p, const char *name, const char *conf, int resync_s, char *log)
{
    static const char *const mods[] = {"modules", "tests/modules", NULL};
    char path[600], renv[64];
    snprintf(path, sizeof(path), "%s/%s.conf", dir, name);
    snprintf(log, 600, "%s/%s.log", dir, name);
    ck_assert_int_eq(tu_write_file(path, conf), 0);
    snprintf(renv, sizeof(renv), "ROBOTLB_RESYNC_INTERVAL=%d", resync_s > 0 ? resync_s : 300);
    char *args[] = {"--log-level", "debug", NULL};
    char *env[] = {(char *)tu_module_path_env(mods), "ROBOTLB_HCLOUD_TOKEN=tok-a", renv, NULL};
    int rc = tu_prismlb_spawn(p, path, log, args, env);
    ck_assert_msg(rc == 0, "cannot start the daemon: %s", strerror(-rc));
}

void
env_start_opts(struct env *e, const struct env_opts *o)
{
    env_fakes_start(e, o->no_network, o->seed_extra, o->hz_args);
    env_daemon_start(e, o, "prismlb");
}

void
env_daemon_start(struct env *e, const struct env_opts *o, const char *name)
{
    char conf[8192], gate[1024] = "";
    if (o->gate_open_after)
        snprintf(gate, sizeof(gate),
                 "  { module = \"lifecycle\"; name = \"lead\"; gate_open_after = \"%s\";"
                 " gate_close_after = \"%s\"; trace_file = \"%s/trace\"; },\n",
                 o->gate_open_after, o->gate_close_after ? o->gate_close_after : "0", dir);
    else if (o->gate_file)
        snprintf(gate, sizeof(gate),
                 "  { module = \"lifecycle\"; name = \"lead\"; gate_file = \"%s\";"
                 " trace_file = \"%s/trace\"; },\n",
                 o->gate_file, dir);
    snprintf(conf, sizeof(conf),
             "instances = (\n%s%s  { module = \"hetzner_lb\"; name = \"hz\";%s\n"
             "  hcloud_endpoint = \"%s\"; kubeconfig = \"%s\";\n"
             "  %s\n  %s } );\n",
             gate, o->instances ? o->instances : "", gate[0] ? " gate = \"lead\";" : "", e->hz.url,
             e->kc, o->no_network ? "" : "default_network = \"k8s\";", o->extra ? o->extra : "");
    env_spawn(&e->d, name, conf, o->resync_s, e->log);
}

void
env_start(struct env *e, const char *seed_extra, const char *const *hz_args, const char *extra,
          int resync_s)
{
    struct env_opts o = {
        .seed_extra = seed_extra, .hz_args = hz_args, .extra = extra, .resync_s = resync_s};
    env_start_opts(e, &o);
}

void
env_fakes_stop(struct env *e)
{
    ck_assert_int_eq(hzt_stop(&e->hz), 0);
    ck_assert_int_eq(fake_stop(&e->kube), 0);
}

void
env_stop(struct env *e)
{
    env_daemon_stop(e);
    env_fakes_stop(e);
}

void
env_daemon_stop(struct env *e)
{
    int st = tu_stop(&e->d, SIGTERM, 10000);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        dump_log(e);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    char *text = tu_read_file(e->log, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "tok-a") == NULL, "the token was logged");
    free(text);
}

void
kube_req(struct env *e, const char *method, const char *path, const char *ctype, const char *body,
         int want, json_t **out)
{
    struct http_res r;
    ck_assert_int_eq(fake_api(&e->kube, 0, method, path, ctype, body, 1, NULL, 10000, &r), 0);
    ck_assert_msg(r.status == want, "%s %s: %ld %s", method, path, r.status, r.body);
    if (out)
        *out = res_json(&r);
    http_res_free(&r);
}

char *
env_service(struct env *e, const char *name, const char *type, int node_port,
            const char *extra_meta, const char *extra_spec)
{
    char body[2048], np[32] = "";
    json_t *o;
    if (node_port)
        snprintf(np, sizeof(np), ",\"nodePort\":%d", node_port);
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\"%s},\"spec\":{\"type\":\"%s\",\"selector\":"
             "{\"app\":\"%s\"},\"ports\":[{\"port\":80,\"protocol\":\"TCP\"%s}]%s}}",
             name, extra_meta ? extra_meta : "", type, name, np, extra_spec ? extra_spec : "");
    kube_req(e, "POST", "/api/v1/namespaces/default/services", "application/json", body, 201, &o);
    const char *uid = json_string_value(json_object_get(json_object_get(o, "metadata"), "uid"));
    ck_assert_ptr_nonnull(uid);
    char *r = strdup(uid);
    ck_assert_ptr_nonnull(r);
    json_decref(o);
    return r;
}

int
env_ingress(struct env *e, const char *name, char *ip, size_t len, char *mode, size_t mlen,
            size_t *n)
{
    char path[256];
    json_t *o;
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/services/%s", name);
    kube_req(e, "GET", path, NULL, NULL, 200, &o);
    json_t *ing =
        json_object_get(json_object_get(json_object_get(o, "status"), "loadBalancer"), "ingress");
    const char *v = json_string_value(json_object_get(json_array_get(ing, 0), "ip"));
    const char *m = json_string_value(json_object_get(json_array_get(ing, 0), "ipMode"));
    if (n)
        *n = json_array_size(ing);
    snprintf(ip, len, "%s", v ? v : "");
    if (mode)
        snprintf(mode, mlen, "%s", m ? m : "");
    json_decref(o);
    return v != NULL;
}

int
env_has_event(struct env *e, const char *reason, const char *needle)
{
    json_t *o, *ev;
    size_t i;
    int found = 0;
    kube_req(e, "GET", "/api/v1/namespaces/default/events", NULL, NULL, 200, &o);
    json_array_foreach(json_object_get(o, "items"), i, ev)
    {
        const char *r = json_string_value(json_object_get(ev, "reason"));
        const char *m = json_string_value(json_object_get(ev, "message"));
        const char *t = json_string_value(json_object_get(ev, "type"));
        if (r && m && t && !strcmp(r, reason) && !strcmp(t, "Warning") && strstr(m, needle))
            found = 1;
    }
    json_decref(o);
    return found;
}

long
env_create_lb(struct env *e, const char *name, const char *labels)
{
    char body[1024];
    struct hzt_resp r;
    snprintf(body, sizeof(body),
             "{\"name\":\"%s\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\"%s%s}", name,
             labels ? ",\"labels\":" : "", labels ? labels : "");
    ck_assert_int_eq(hzt_req(&e->hz, "POST", "/load_balancers", "tok-a", "seed", body, &r), 0);
    ck_assert_int_eq(r.status, 201);
    long id =
        (long)json_integer_value(json_object_get(json_object_get(r.body, "load_balancer"), "id"));
    hzt_resp_free(&r);
    return id;
}

int
env_lb_exists(struct env *e, long id)
{
    char path[64];
    struct hzt_resp r;
    snprintf(path, sizeof(path), "/load_balancers/%ld", id);
    ck_assert_int_eq(hzt_req(&e->hz, "GET", path, "tok-a", "check", NULL, &r), 0);
    int st = (int)r.status;
    hzt_resp_free(&r);
    ck_assert(st == 200 || st == 404);
    return st == 200;
}

/* The fake Hetzner API's request log after sequence number since (0:
 * all it holds): its answer's body (new). */
static json_t *
admin_requests(struct env *e, long since)
{
    char path[64];
    struct hzt_resp r;
    snprintf(path, sizeof(path), "/_admin/requests?since=%ld", since);
    ck_assert_int_eq(hzt_req(&e->hz, "GET", path, NULL, NULL, NULL, &r), 0);
    ck_assert_msg(r.status == 200 && r.body, "GET %s: %ld", path, r.status);
    json_t *body = json_incref(r.body);
    hzt_resp_free(&r);
    return body;
}

/* The integer member key of the request log's answer, or of its member
 * within when within is not NULL ({"counts": {ROUTE: N}}). */
static long
admin_requests_number(struct env *e, const char *within, const char *key)
{
    json_t *body = admin_requests(e, 0);
    json_t *o = within ? json_object_get(body, within) : body;
    long n = (long)json_integer_value(json_object_get(o, key));
    json_decref(body);
    return n;
}

long
env_count_route(struct env *e, const char *route)
{
    return admin_requests_number(e, "counts", route);
}

long
env_count_requests(struct env *e)
{
    json_t *body = admin_requests(e, 0);
    long n = (long)json_array_size(json_object_get(body, "requests"));
    json_decref(body);
    return n;
}

json_t *
env_requests_since(struct env *e, long since)
{
    json_t *body = admin_requests(e, since);
    json_t *list = json_incref(json_object_get(body, "requests"));
    json_decref(body);
    ck_assert(json_is_array(list));
    return list;
}

void
env_kube_fail_patch(struct env *e, const char *match, int status)
{
    struct http_res r = {0};
    char body[512];
    snprintf(body, sizeof(body),
             "{\"fail_count\":1,\"fail_status\":%d,\"fail_match\":\"%s\","
             "\"fail_method\":\"PATCH\"}",
             status, match);
    ck_assert_int_eq(fake_admin(&e->kube, "POST", "/faults", body, &r), 0);
    ck_assert_msg(r.status == 200, "POST /faults: %ld %s", r.status, r.body);
    http_res_free(&r);
}

long
env_refusals_spaced(struct env *e, const char *route, long long min_gap_ms)
{
    json_t *all = env_requests_since(e, 0), *q;
    long long last = -1;
    long n = 0;
    size_t i;
    json_array_foreach(all, i, q)
    {
        const char *r = json_string_value(json_object_get(q, "route"));
        if (!r || strcmp(r, route) != 0 || json_integer_value(json_object_get(q, "status")) < 400)
            continue;
        long long t = (long long)json_integer_value(json_object_get(q, "t_ms"));
        ck_assert_msg(last < 0 || t - last >= min_gap_ms, "%s refused %lld ms after the last",
                      route, t - last);
        last = t;
        n++;
    }
    json_decref(all);
    return n;
}

long
env_last_request(struct env *e)
{
    return admin_requests_number(e, NULL, "total");
}

int
env_kubectl(struct env *e, char **out, ...)
{
    char cache[4400], home[4400];
    va_list ap;
    snprintf(cache, sizeof(cache), "%s/kube-cache", dir);
    snprintf(home, sizeof(home), "HOME=%s", dir);
    char *envp[] = {home, NULL};
    va_start(ap, out);
    int rc = tu_kubectlv(e->kc, cache, envp, out, ap);
    va_end(ap);
    return rc;
}

/* The Warning Events of reason about Service default/name whose message
 * holds every needle of ap, as `kubectl get events -o json` shows them:
 * how many, and the count of the last into *count. */
static long
kubectl_events(struct env *e, const char *name, const char *reason, long *count, va_list ap)
{
    char *out = NULL;
    long n = 0;
    size_t i;
    json_t *ev;
    *count = 0;
    ck_assert_int_eq(env_kubectl(e, &out, "get", "events", "-n", "default", "-o", "json", NULL), 0);
    json_t *list = json_loads(out, 0, NULL);
    ck_assert_msg(list != NULL, "kubectl get events: %s", out);
    json_array_foreach(json_object_get(list, "items"), i, ev)
    {
        json_t *inv = json_object_get(ev, "involvedObject");
        const char *r = json_string_value(json_object_get(ev, "reason"));
        const char *m = json_string_value(json_object_get(ev, "message"));
        const char *t = json_string_value(json_object_get(ev, "type"));
        const char *k = json_string_value(json_object_get(inv, "kind"));
        const char *on = json_string_value(json_object_get(inv, "name"));
        int all = r && m && t && k && on && !strcmp(r, reason) && !strcmp(t, "Warning") &&
                  !strcmp(k, "Service") && !strcmp(on, name);
        va_list aq;
        const char *needle;
        va_copy(aq, ap);
        while (all && (needle = va_arg(aq, const char *)))
            all = strstr(m, needle) != NULL;
        va_end(aq);
        if (all) {
            n++;
            *count = (long)json_integer_value(json_object_get(ev, "count"));
        }
    }
    json_decref(list);
    free(out);
    return n;
}

long
env_kubectl_event(struct env *e, const char *name, const char *reason, ...)
{
    long count;
    va_list ap;
    va_start(ap, reason);
    kubectl_events(e, name, reason, &count, ap);
    va_end(ap);
    return count;
}

long
env_kubectl_events(struct env *e, const char *name, const char *reason, long *count, ...)
{
    long n;
    va_list ap;
    va_start(ap, count);
    n = kubectl_events(e, name, reason, count, ap);
    va_end(ap);
    return n;
}

/* A ready Node with InternalIP ip. */
void
env_node(struct env *e, const char *name, const char *ip)
{
    char body[1024], path[256];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\"},"
             "\"spec\":{},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
             "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"%s\"},"
             "{\"type\":\"Hostname\",\"address\":\"%s\"}]}}",
             name, ip, name);
    kube_req(e, "POST", "/api/v1/nodes", "application/json", body, 201, NULL);
    snprintf(body, sizeof(body),
             "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
             "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"%s\"},"
             "{\"type\":\"Hostname\",\"address\":\"%s\"}]}}",
             ip, name);
    snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", name);
    kube_req(e, "PATCH", path, "application/merge-patch+json", body, 200, NULL);
}

/* The balancers labelled for uid (new array). */
json_t *
env_lbs_of(struct env *e, const char *uid)
{
    char path[512];
    struct hzt_resp r;
    snprintf(path, sizeof(path), "/load_balancers?label_selector=robotlb/service-uid%%3D%s", uid);
    ck_assert_int_eq(hzt_req(&e->hz, "GET", path, "tok-a", "test", NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    json_t *a = json_incref(json_object_get(r.body, "load_balancers"));
    hzt_resp_free(&r);
    return a;
}

void
env_lb_targets(json_t *lb, char *buf, size_t len)
{
    char ips[64][32];
    size_t n = 0, i;
    json_t *t;
    buf[0] = '\0';
    json_array_foreach(json_object_get(lb, "targets"), i, t)
    {
        const char *ip = json_string_value(json_object_get(json_object_get(t, "ip"), "ip"));
        if (ip && n < 64)
            snprintf(ips[n++], sizeof(ips[0]), "%s", ip);
    }
    qsort(ips, n, sizeof(ips[0]), (int (*)(const void *, const void *))strcmp);
    for (i = 0; i < n; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? "," : "", ips[i]);
}

/* The IP targets of the one balancer labelled for uid, sorted and joined
 * by commas, into buf; 0 when there is no such balancer (buf ""). */
int
env_targets_of(struct env *e, const char *uid, char *buf, size_t len)
{
    json_t *a = env_lbs_of(e, uid);
    buf[0] = '\0';
    if (json_array_size(a) != 1) {
        json_decref(a);
        return 0;
    }
    env_lb_targets(json_array_get(a, 0), buf, len);
    json_decref(a);
    return 1;
}

/* See env.h. */
void
env_selector_nodes(struct env *e)
{
    env_node(e, "amd", "10.0.1.221");
    env_node(e, "arm", "10.0.1.222");
    env_node(e, "cp", "10.0.1.223");
    env_node(e, "excl", "10.0.1.224");
    kube_req(e, "PATCH", "/api/v1/nodes/amd", "application/merge-patch+json",
             "{\"metadata\":{\"labels\":{\"beta.kubernetes.io/arch\":\"amd64\"}}}", 200, NULL);
    kube_req(e, "PATCH", "/api/v1/nodes/arm", "application/merge-patch+json",
             "{\"metadata\":{\"labels\":{\"beta.kubernetes.io/arch\":\"arm64\"}}}", 200, NULL);
    kube_req(e, "PATCH", "/api/v1/nodes/cp", "application/merge-patch+json",
             "{\"metadata\":{\"labels\":{\"beta.kubernetes.io/arch\":\"amd64\","
             "\"node-role.kubernetes.io/control-plane\":\"true\"}}}",
             200, NULL);
    kube_req(e, "PATCH", "/api/v1/nodes/excl", "application/merge-patch+json",
             "{\"metadata\":{\"labels\":{\"beta.kubernetes.io/arch\":\"amd64\","
             "\"node.kubernetes.io/exclude-from-external-load-balancers\":\"\"}}}",
             200, NULL);
}

/* See env.h. */
void
env_local_slice(struct env *e)
{
    const char *slice =
        "{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\",\"metadata\":{"
        "\"name\":\"loc-abc\",\"namespace\":\"default\",\"labels\":{"
        "\"kubernetes.io/service-name\":\"loc\"}},\"addressType\":\"IPv4\",\"ports\":[{"
        "\"port\":8080,\"protocol\":\"TCP\"}],\"endpoints\":["
        "{\"addresses\":[\"10.244.1.5\"],\"nodeName\":\"n1\",\"conditions\":{\"ready\":true}},"
        "{\"addresses\":[\"10.244.3.5\"],\"nodeName\":\"n3\",\"conditions\":{\"ready\":true}},"
        "{\"addresses\":[\"10.244.4.5\"],\"nodeName\":\"n4\",\"conditions\":{\"ready\":false,"
        "\"serving\":false}}]}";
    kube_req(e, "POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
             "application/json", slice, 201, NULL);
}

int
env_targets_are(struct env *e, const char *uid, const char *want)
{
    char buf[2048];
    return env_targets_of(e, uid, buf, sizeof(buf)) && strcmp(buf, want) == 0;
}

void
env_faults(struct env *e, const char *body)
{
    struct hzt_resp f;
    ck_assert_int_eq(hzt_req(&e->hz, "POST", "/_admin/faults", NULL, NULL, body, &f), 0);
    ck_assert_msg(f.status == 200, "faults %s: %ld %s", body, f.status, f.raw ? f.raw : "");
    hzt_resp_free(&f);
}

long
env_held_actions(struct env *e)
{
    struct hzt_resp f;
    ck_assert_int_eq(hzt_req(&e->hz, "GET", "/_admin/faults", NULL, NULL, NULL, &f), 0);
    long n = (long)json_integer_value(json_object_get(f.body, "held_actions"));
    hzt_resp_free(&f);
    return n;
}

/* Run hcloud with the n arguments args (then -o json when json): as
 * env_hcloud. */
static int
hcloud_run(struct env *e, const char *const *args, int n, int json, char **out)
{
    char endpoint[300], home[4400], config[4400], *argv[28];
    int k = 0;
    snprintf(endpoint, sizeof(endpoint), "HCLOUD_ENDPOINT=%s", e->hz.url);
    snprintf(home, sizeof(home), "HOME=%s", dir);
    snprintf(config, sizeof(config), "HCLOUD_CONFIG=%s/cli.toml", dir);
    argv[k++] = "hcloud";
    argv[k++] = "--poll-interval";
    argv[k++] = "50ms";
    for (int i = 0; i < n; i++)
        argv[k++] = (char *)args[i];
    if (json) {
        argv[k++] = "-o";
        argv[k++] = "json";
    }
    argv[k] = NULL;
    char *envp[] = {endpoint, "HCLOUD_TOKEN=tok-a", home, config, NULL};
    return tu_run(argv, envp, out, 30000);
}

/* The NULL-ended arguments of ap into args (at most 20); their number. */
static int
args_of(const char **args, va_list ap)
{
    int n = 0;
    const char *a;
    while ((a = va_arg(ap, const char *))) {
        ck_assert_int_lt(n, 20);
        args[n++] = a;
    }
    return n;
}

int
env_hcloud(struct env *e, char **out, ...)
{
    const char *args[20];
    va_list ap;
    va_start(ap, out);
    int n = args_of(args, ap);
    va_end(ap);
    return hcloud_run(e, args, n, 0, out);
}

json_t *
env_hcloud_json(struct env *e, ...)
{
    const char *args[20];
    char *out = NULL;
    va_list ap;
    va_start(ap, e);
    int n = args_of(args, ap);
    va_end(ap);
    int rc = hcloud_run(e, args, n, 1, &out);
    ck_assert_msg(rc == 0, "hcloud %s %s: %d %s", n ? args[0] : "", n > 1 ? args[1] : "", rc,
                  out ? out : "");
    /* the JSON from its first bracket; hcloud prints null for an empty list */
    const char *p = out ? strpbrk(out, "[{") : NULL;
    json_t *j = p ? json_loads(p, JSON_DISABLE_EOF_CHECK, NULL)
                  : (out && strstr(out, "null") ? json_array() : NULL);
    ck_assert_msg(j != NULL, "hcloud printed no JSON: %s", out ? out : "");
    free(out);
    return j;
}

void
env_replica_start(struct env *e, struct tu_proc *d, int r, char *log)
{
    char conf[16384], name[16];
    snprintf(conf, sizeof(conf),
             "instances = (\n"
             "  { module = \"leader\"; name = \"leader\"; lease_name = \"hetzner-lb\";\n"
             "    lease_namespace = \"default\"; kubeconfig = \"%s\"; identity = \"r%d\";\n"
             "    lease_duration = \"3s\"; renew_deadline = \"2s\";"
             " retry_period = \"500ms\"; },\n"
             "  { module = \"hetzner_lb\"; name = \"hz\"; gate = \"leader\";\n"
             "    hcloud_endpoint = \"%s\"; kubeconfig = \"%s\";\n"
             "    dynamic_node_selector = true; default_network = \"k8s\"; }\n);\n",
             e->kc, r, e->hz.url, e->kc);
    snprintf(name, sizeof(name), "replica%d", r);
    env_spawn(d, name, conf, 300, log);
}

int
env_lease_holder(struct env *e)
{
    json_t *lease = NULL;
    kube_req(e, "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/hetzner-lb", NULL,
             NULL, 200, &lease);
    const char *holder =
        json_string_value(json_object_get(json_object_get(lease, "spec"), "holderIdentity"));
    ck_assert_msg(holder && (!strcmp(holder, "r0") || !strcmp(holder, "r1")), "holder %s",
                  holder ? holder : "(none)");
    int r = holder[1] - '0';
    json_decref(lease);
    return r;
}

void
env_no_overlapping_writers(struct env *e)
{
    struct hzt_resp w;
    ck_assert_int_eq(hzt_req(&e->hz, "GET", "/_admin/writers", NULL, NULL, NULL, &w), 0);
    json_t *overlaps = json_object_get(w.body, "overlaps");
    ck_assert_msg(json_is_array(overlaps) && json_array_size(overlaps) == 0,
                  "concurrent writers: %s", w.raw ? w.raw : "(none)");
    hzt_resp_free(&w);
}
