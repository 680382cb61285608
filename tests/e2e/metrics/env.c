#include "common.h"

#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

const char *
me_module_path_env(void)
{
    static char env[8192];
    char mods[4096];
    snprintf(mods, sizeof(mods), "%s", tu_build_path("modules"));
    snprintf(env, sizeof(env), "PRISMLB_MODULE_PATH=%s:%s", mods, tu_build_path("tests/modules"));
    return env;
}

int
me_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

char *
me_daemon_log(const struct me_daemon *d)
{
    char *log = tu_read_file(d->log, NULL);
    return log ? log : strdup("(no log)");
}

void
me_daemon_start(struct me_daemon *d, const char *conf_text, int wait_port)
{
    memset(d, 0, sizeof(*d));
    d->dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(d->dir);
    snprintf(d->conf, sizeof(d->conf), "%s/prismlb.conf", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/prismlb.log", d->dir);
    ck_assert_int_eq(tu_write_file(d->conf, conf_text), 0);

    char exe[4096];
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    char *argv[] = {exe, "--config", d->conf, NULL};
    char *env[] = {(char *)me_module_path_env(), NULL};
    d->started_ms = tu_now_ms();
    ck_assert_int_eq(tu_spawn(&d->proc, argv, env, d->log), 0);
    if (wait_port <= 0)
        return;
    long long deadline = tu_now_ms() + 10000;
    while (tu_wait_port("127.0.0.1", wait_port, 50) < 0) {
        if (tu_exited(&d->proc) || tu_now_ms() >= deadline) {
            char *log = me_daemon_log(d);
            tu_stop(&d->proc, SIGKILL, 2000);
            ck_abort_msg("daemon did not listen on port %d (it %s); log:\n%s", wait_port,
                         tu_exited(&d->proc) ? "exited" : "timed out after 10 s", log);
        }
    }
    d->ready_ms = tu_now_ms();
}

void
me_daemon_stop(struct me_daemon *d)
{
    if (!d->dir)
        return;
    int st = tu_stop(&d->proc, SIGTERM, 10000);
    char *log = me_daemon_log(d);
    int clean = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    tu_rmrf(d->dir);
    free(d->dir);
    d->dir = NULL;
    if (!clean)
        ck_abort_msg("daemon did not exit cleanly on SIGTERM (status 0x%x); log:\n%s", st, log);
    free(log);
}

/* ------------------------------------------------------------------ */

struct grow {
    char *p;
    size_t n;
    int seen;
};

static size_t
grow_cb(char *data, size_t size, size_t nmemb, void *arg)
{
    struct grow *g = arg;
    size_t add = size * nmemb;
    char *np = realloc(g->p, g->n + add + 1);
    if (!np)
        return 0;
    memcpy(np + g->n, data, add);
    g->p = np;
    g->n += add;
    g->p[g->n] = '\0';
    g->seen = 1;
    return add;
}

int
me_http(const char *method, const char *url, const char *const *extra, struct me_resp *r)
{
    memset(r, 0, sizeof(*r));
    CURL *c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    struct grow body = {0}, head = {0};
    struct curl_slist *hl = NULL;
    for (size_t i = 0; extra && extra[i]; i++)
        hl = curl_slist_append(hl, extra[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, grow_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, grow_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &head);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "x=1");
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode cc = curl_easy_perform(c);
    if (cc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    r->body_seen = body.seen;
    r->body = body.p ? body.p : strdup("");
    r->len = body.n;
    r->headers = head.p ? head.p : strdup("");
    if (cc != CURLE_OK) {
        fprintf(stderr, "%s %s: %s\n", method, url, curl_easy_strerror(cc));
        return -1;
    }
    return 0;
}

void
me_resp_free(struct me_resp *r)
{
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof(*r));
}

const char *
me_header(const struct me_resp *r, const char *name, char *buf, size_t len)
{
    size_t nl = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t ll = end ? (size_t)(end - line) : strlen(line);
        if (ll > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            size_t vl = ll - (size_t)(v - line);
            if (vl >= len)
                vl = len - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            return buf;
        }
        line = end ? end + 2 : NULL;
    }
    return NULL;
}

long
me_vmrss_kib(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    char *s = tu_read_file(path, NULL);
    if (!s)
        return -1;
    long kib = -1;
    const char *p = strstr(s, "\nVmRSS:");
    if (p)
        kib = strtol(p + 7, NULL, 10);
    free(s);
    return kib;
}
