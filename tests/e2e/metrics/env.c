#include "env.h"

#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>

const char *
me_module_path_env(void)
{
    static const char *const dirs[] = {"modules", "tests/modules", NULL};
    return tu_module_path_env(dirs);
}

void
me_daemon_start(struct tu_daemon *d, const char *conf_text, int wait_port)
{
    char *env[] = {(char *)me_module_path_env(), NULL};
    tu_daemon_init(d, NULL, "prismlb");
    tu_daemon_spawn(d, conf_text, NULL, env);
    if (wait_port <= 0)
        return;
    int rc = tu_daemon_wait_port(d, wait_port, 10000);
    if (rc < 0) {
        tu_daemon_stop(d, SIGKILL, 2000);
        tu_daemon_fail(d, "daemon did not listen on port %d (it %s)", wait_port,
                       rc == -2 ? "exited" : "timed out after 10 s");
    }
}

void
me_daemon_stop(struct tu_daemon *d)
{
    tu_daemon_finish(d, 10000);
}

/* ------------------------------------------------------------------ */

int
me_http(const char *method, const char *url, const char *const *extra, struct me_resp *r)
{
    memset(r, 0, sizeof(*r));
    CURL *c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    struct tu_buf body = {0}, head = {0};
    struct curl_slist *hl = NULL;
    for (size_t i = 0; extra && extra[i]; i++)
        hl = curl_slist_append(hl, extra[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, tu_buf_append);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, tu_buf_append);
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
