/*
 * env: see env.h.
 */
#include "env.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"
#include "kubelog.h"

int
ewt_init(struct ewt *t)
{
    memset(t, 0, sizeof(*t));
    t->dir = tu_mkdtemp();
    if (!t->dir)
        return -1;
    snprintf(t->fakedir, sizeof(t->fakedir), "%s/fake", t->dir);
    snprintf(t->conf, sizeof(t->conf), "%s/prismlb.conf", t->dir);
    snprintf(t->log, sizeof(t->log), "%s/prismlb.log", t->dir);
    snprintf(t->trace, sizeof(t->trace), "%s/trace", t->dir);
    snprintf(t->kubeconfig, sizeof(t->kubeconfig), "%s/kubeconfig", t->dir);
    return mkdir(t->fakedir, 0700);
}

const char *
ewt_sanitizer_report(struct ewt *t)
{
    static const char *const needles[] = {"runtime error:", "AddressSanitizer", "LeakSanitizer",
                                          NULL};
    for (int i = 0; needles[i]; i++) {
        if (ewt_log_count(t, needles[i]) > 0)
            return needles[i];
    }
    return NULL;
}

int
ewt_fini(struct ewt *t)
{
    int rc = 0;
    if (t->daemon_up) {
        int st = ewt_daemon_stop(t, 5000, NULL);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "the daemon did not exit cleanly on SIGTERM: wait status %d\n", st);
            rc = -1;
        }
    }
    const char *san = t->dir ? ewt_sanitizer_report(t) : NULL;
    if (san) {
        char *log = ewt_log(t);
        fprintf(stderr, "sanitizer report (%s) in the daemon's log:\n%s\n", san, log);
        free(log);
        rc = -1;
    }
    if (t->fake_up)
        ewt_fake_stop(t);
    tu_rmdtemp(&t->dir);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The fake API server                                                      */

int
ewt_fake_start(struct ewt *t, const char *const *extra)
{
    char *argv[64], state[4300], exe[4096];
    int n = 0;

    snprintf(exe, sizeof(exe), "%s", tu_build_path("tests/fakes/kube/prismlb-fake-kube"));
    snprintf(state, sizeof(state), "%s/state", t->fakedir);
    unlink(state);
    memset(&t->f, 0, sizeof(t->f));
    t->f.dir = t->fakedir;
    snprintf(t->f.log, sizeof(t->f.log), "%s/fake.log", t->fakedir);
    argv[n++] = exe;
    argv[n++] = "--tls-dir";
    argv[n++] = t->fakedir;
    argv[n++] = "--state-file";
    argv[n++] = state;
    for (size_t i = 0; extra && extra[i] && n < 62; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    if (tu_spawn(&t->f.proc, argv, NULL, t->f.log) < 0)
        return -1;
    t->fake_up = 1;
    return fake_wait_ready(&t->f, state, 15000);
}

int
ewt_fake_stop(struct ewt *t)
{
    int st = tu_stop(&t->f.proc, SIGTERM, 10000);
    t->fake_up = 0;
    return st;
}

void
ewt_write_kubeconfig(struct ewt *t, const char *url)
{
    const struct tu_kubeconfig kc = {.server = url ? url : t->f.server[0], .certdir = t->fakedir};
    int rc = tu_write_kubeconfig(t->kubeconfig, &kc);
    if (rc < 0)
        fprintf(stderr, "cannot write %s: %s\n", t->kubeconfig, strerror(-rc));
}

int
ewt_admin(struct ewt *t, const char *method, const char *path, const char *body)
{
    struct http_res r;
    if (fake_admin(&t->f, method, path, body, &r) < 0)
        return -1;
    int st = (int)r.status;
    http_res_free(&r);
    return st;
}

int
ewt_requests(struct ewt *t, const char *method, const char *frag, const char *frag2, double *times,
             int max)
{
    struct http_res r;
    if (fake_admin(&t->f, "GET", "/requests", NULL, &r) < 0)
        return -1;
    json_t *d = res_json(&r);
    http_res_free(&r);
    if (!d)
        return -1;
    int n = tu_kube_requests(d, method, frag, frag2, times, max);
    json_decref(d);
    return n;
}

/* ------------------------------------------------------------------------ */
/* EndpointSlices                                                           */

int
ewt_slice_put(struct ewt *t, const char *ns, const char *service, const char *name,
              const char *spec, const char *ports)
{
    json_t *eps = json_array(), *pa = json_array();
    int v6 = 0, rc = -1;
    char *copy = strdup(spec ? spec : ""), *save = NULL;
    for (char *a = strtok_r(copy, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        size_t l = strlen(a);
        char mark = l ? a[l - 1] : 0;
        if (mark == '!' || mark == '?' || mark == '~')
            a[l - 1] = '\0';
        if (strchr(a, ':'))
            v6 = 1;
        json_t *ep = json_pack("{s:[s]}", "addresses", a);
        if (mark == '!')
            json_object_set_new(ep, "conditions", json_pack("{s:b}", "ready", 0));
        else if (mark == '~')
            json_object_set_new(ep, "conditions", json_pack("{s:b,s:b}", "ready", 1, "serving", 0));
        else if (mark != '?')
            json_object_set_new(ep, "conditions", json_pack("{s:b}", "ready", 1));
        json_array_append_new(eps, ep);
    }
    free(copy);
    copy = strdup(ports ? ports : "");
    for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(p, '=');
        if (!eq)
            continue;
        *eq = '\0';
        json_array_append_new(
            pa, json_pack("{s:s,s:i,s:s}", "name", p, "port", atoi(eq + 1), "protocol", "TCP"));
    }
    free(copy);
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:s, s:o, s:o}", "apiVersion",
                          "discovery.k8s.io/v1", "kind", "EndpointSlice", "metadata", "name", name,
                          "namespace", ns, "labels", "kubernetes.io/service-name", service,
                          "addressType", v6 ? "IPv6" : "IPv4", "endpoints", eps, "ports", pa);
    char *body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    char path[1024];
    struct http_res r;
    snprintf(path, sizeof(path), "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices/%s", ns,
             name);
    if (fake_api(&t->f, t->api, "PUT", path, "application/json", body, 1, NULL, 10000, &r) == 0) {
        if (r.status == 200 || r.status == 201) {
            rc = 0;
        } else if (r.status == 404) {
            http_res_free(&r);
            snprintf(path, sizeof(path), "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices",
                     ns);
            if (fake_api(&t->f, t->api, "POST", path, "application/json", body, 1, NULL, 10000,
                         &r) == 0 &&
                r.status == 201)
                rc = 0;
        }
        if (rc)
            fprintf(stderr, "slice %s: status %ld %s\n", name, r.status, r.body);
        http_res_free(&r);
    }
    free(body);
    return rc;
}

int
ewt_slice_delete(struct ewt *t, const char *ns, const char *name)
{
    char path[1024];
    struct http_res r;
    snprintf(path, sizeof(path), "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices/%s", ns,
             name);
    if (fake_api(&t->f, t->api, "DELETE", path, NULL, NULL, 1, NULL, 10000, &r) < 0)
        return -1;
    int ok = r.status == 200;
    http_res_free(&r);
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* The daemon                                                               */

int
ewt_free_fixed_port(void)
{
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    if (lo <= 10000)
        return -1;
    /* Below the ephemeral range: no connect() elsewhere takes it meanwhile. */
    unsigned seed = (unsigned)getpid() ^ (unsigned)tu_now_ms();
    for (int i = 0; i < 200; i++) {
        int port = 10000 + (int)(rand_r(&seed) % (unsigned)(lo - 10000));
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0)
            return -1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        close(fd);
        if (ok)
            return port;
    }
    return -1;
}

int
ewt_daemon_start(struct ewt *t, const char *ew_settings, const char *extra, char *const *env_extra)
{
    static const char *const mods[] = {"modules/mod_endpoint_watch", "modules/mod_metrics",
                                       "modules/mod_tcp_proxy", "tests/modules", NULL};
    char text[16384];
    char *env[32];
    int ne = 0;

    env[ne++] = (char *)tu_module_path_env(mods);
    for (size_t i = 0; env_extra && env_extra[i] && ne < 30; i++)
        env[ne++] = env_extra[i];
    env[ne] = NULL;
    for (int attempt = 0; attempt < 3; attempt++) {
        t->metrics_port = tu_free_port();
        snprintf(text, sizeof(text),
                 "log_level = \"debug\";\n"
                 "instances = (\n"
                 "  { module = \"endpoint_watch\"; name = \"ew\";\n"
                 "    %s\n"
                 "  },\n"
                 "  { module = \"lifecycle\"; name = \"sink\"; trace_file = \"%s\";\n"
                 "    sources = [\"ew\"]; },\n"
                 "  %s\n"
                 "  { module = \"metrics\"; name = \"metrics\"; bind_address = \"127.0.0.1\";\n"
                 "    port = %d; }\n"
                 ");\n",
                 ew_settings ? ew_settings : "", t->trace, extra ? extra : "", t->metrics_port);
        if (tu_write_file(t->conf, text) < 0)
            return -1;
        int rc = tu_prismlb_spawn(&t->daemon, t->conf, t->log, NULL, env);
        if (rc < 0) {
            fprintf(stderr, "cannot start the daemon: %s\n", strerror(-rc));
            return -1;
        }
        t->daemon_up = 1;
        if (tu_wait_port("127.0.0.1", t->metrics_port, 10000) == 0 &&
            ewt_metric(t, "prismlb_discovery_updates_total", "static") >= 0)
            return 0;
        ewt_daemon_stop(t, 2000, NULL); /* port taken meanwhile? retry */
    }
    return -1;
}

int
ewt_daemon_stop(struct ewt *t, int timeout_ms, long long *elapsed_ms)
{
    long long t0 = tu_now_ms();
    int st = tu_stop(&t->daemon, SIGTERM, timeout_ms);
    if (elapsed_ms)
        *elapsed_ms = tu_now_ms() - t0;
    t->daemon_up = 0;
    return st;
}

char *
ewt_log(struct ewt *t)
{
    char *s = tu_read_file(t->log, NULL);
    return s ? s : strdup("");
}

int
ewt_log_count(struct ewt *t, const char *needle)
{
    return tu_file_count(t->log, needle);
}

int
ewt_wait_log(struct ewt *t, const char *needle, int timeout_ms)
{
    return tu_proc_wait_log(&t->daemon, t->log, needle, timeout_ms) == 0 ? 0 : -1;
}

int
ewt_sets(struct ewt *t, char ***lines)
{
    char *s = tu_read_file(t->trace, NULL);
    int n = 0, cap = 0;
    char **v = NULL;
    *lines = NULL;
    if (!s)
        return 0;
    for (char *save = NULL, *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "endpoints", 9) != 0)
            continue;
        char *val = l + 9;
        if (*val == '=')
            val++;
        char *sp = strrchr(val, ' ');
        if (sp)
            *sp = '\0';
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(v, (size_t)cap * sizeof(*v));
            if (!nv)
                break;
            v = nv;
        }
        v[n++] = strdup(val);
    }
    free(s);
    *lines = v;
    return n;
}

void
ewt_lines_free(char **lines, int n)
{
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

/* 1 when the daemon started last has exited, without reaping it: its exit
 * status stays for ewt_daemon_stop. */
static int
daemon_dead(struct ewt *t)
{
    siginfo_t si = {0};
    if (!t->daemon_up)
        return 0;
    if (t->daemon.reaped)
        return 1;
    return waitid(P_PID, (id_t)t->daemon.pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           si.si_pid == t->daemon.pid;
}

int
ewt_wait_set(struct ewt *t, const char *want, int timeout_ms)
{
    long long end = tu_now_ms() + timeout_ms;
    for (;;) {
        /* Whether the daemon had exited is asked before the trace is read:
         * a dead daemon writes no more lines, so waiting longer is futile. */
        int dead = daemon_dead(t);
        char **v;
        int n = ewt_sets(t, &v);
        int ok = n > 0 && strcmp(v[n - 1], want) == 0;
        if (ok || dead || tu_now_ms() >= end) {
            if (!ok) {
                if (dead)
                    fprintf(stderr, "the daemon exited\n");
                fprintf(stderr, "waiting for set \"%s\"; the sink saw:\n", want);
                for (int i = 0; i < n; i++)
                    fprintf(stderr, "  %s\n", v[i]);
                char *log = ewt_log(t);
                size_t l = strlen(log);
                fprintf(stderr, "daemon log (end):\n%s\n", log + (l > 6000 ? l - 6000 : 0));
                free(log);
            }
            ewt_lines_free(v, n);
            return ok ? 0 : -1;
        }
        ewt_lines_free(v, n);
        tu_sleep_ms(5);
    }
}

/* ------------------------------------------------------------------------ */
/* Metrics                                                                  */

double
ewt_metric(struct ewt *t, const char *family, const char *provider)
{
    char url[256], want[512];
    struct tu_buf b = {0};
    double v = -1;
    CURL *c = curl_easy_init();
    if (!c)
        return -1;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", t->metrics_port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, tu_buf_append);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (curl_easy_perform(c) == CURLE_OK && b.p) {
        snprintf(want, sizeof(want), "%s{module_instance=\"ew\",source=\"ew\",provider=\"%s\"}",
                 family, provider);
        if (tu_metric_value(b.p, want, &v) < 0)
            v = -1;
    }
    curl_easy_cleanup(c);
    free(b.p);
    return v;
}
