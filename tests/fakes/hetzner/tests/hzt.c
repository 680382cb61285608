/* Helpers for the fake Hetzner API tests (see hzt.h). */
#include "hzt.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Like tu_spawn, but the child also gets SIGTERM when the test process
 * dies (PR_SET_PDEATHSIG): a test that fails or times out in Check's fork
 * mode skips its teardown, and the fake must not outlive it. */
static int
spawn_tied(struct tu_proc *p, char *const argv[], const char *log_path)
{
    memset(p, 0, sizeof(*p));
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
            _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        setpgid(0, 0);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd);
    p->pid = pid;
    return 0;
}

int
hzt_start(struct hzt_fake *f, const char *seed_json, const char *const *args)
{
    char portfile[512], seed[512];
    char *argv[32];
    int n = 0;
    memset(f, 0, sizeof(*f));
    /* A prefix of its own: a run once lost a prismlb-test-* directory
     * between creation and start-up to a cleanup of the tests'. */
    if (!(f->dir = tu_mkdtemp_prefix("hzfake")))
        return -1;
    snprintf(portfile, sizeof(portfile), "%s/port", f->dir);
    snprintf(seed, sizeof(seed), "%s/seed.json", f->dir);
    snprintf(f->log, sizeof(f->log), "%s/fake.log", f->dir);
    /* HZT_VALGRIND=1 runs the fake under memcheck; any error or leak makes
     * it exit 99, which the tests' exit-status checks report. */
    if (getenv("HZT_VALGRIND") && *getenv("HZT_VALGRIND")) {
        argv[n++] = "valgrind";
        argv[n++] = "-q";
        argv[n++] = "--leak-check=full";
        argv[n++] = "--errors-for-leak-kinds=definite,indirect,possible";
        argv[n++] = "--error-exitcode=99";
    }
    int exe_at = n;
    argv[n++] = (char *)tu_build_path("tests/fakes/hetzner/prismlb-fake-hcloud");
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--port-file";
    argv[n++] = portfile;
    if (seed_json) {
        if (tu_write_file(seed, seed_json) < 0)
            goto fail;
        argv[n++] = "--seed";
        argv[n++] = seed;
    }
    for (size_t i = 0; args && args[i] && n < 30; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    char exe[4096];
    snprintf(exe, sizeof(exe), "%s", argv[exe_at]);
    argv[exe_at] = exe;
    if (spawn_tied(&f->proc, argv, f->log) < 0)
        goto fail;
    /* Wait for the "listening" line, giving up early if the fake exits. */
    long long deadline = tu_now_ms() + 90000;
    while (tu_wait_line(f->log, "listening ", f->url, sizeof(f->url), 100) < 0) {
        if (tu_exited(&f->proc) || tu_now_ms() > deadline)
            goto fail;
    }
    char *pf = tu_read_file(portfile, NULL);
    int same = pf && strncmp(pf, f->url, strlen(f->url)) == 0;
    free(pf);
    if (!same)
        goto fail;
    snprintf(f->base, sizeof(f->base), "%.*s", (int)(strlen(f->url) - 3), f->url);
    return 0;
fail:
    /* Show why, then leave nothing behind: stop by PID, remove the dir. */
    if (f->dir) {
        char *log = tu_read_file(f->log, NULL);
        fprintf(stderr, "fake did not start; its output:\n%s\n", log ? log : "(none)");
        free(log);
    }
    hzt_stop(f);
    f->proc.pid = 0;
    return -1;
}

int
hzt_stop(struct hzt_fake *f)
{
    int st = -1;
    if (f->proc.pid > 0)
        st = tu_stop(&f->proc, SIGTERM, 5000);
    tu_rmdtemp(&f->dir);
    return st;
}

static size_t
on_header(char *data, size_t sz, size_t nm, void *arg)
{
    struct hzt_resp *r = arg;
    size_t len = sz * nm;
    char line[512];
    if (len >= sizeof(line))
        return len;
    memcpy(line, data, len);
    line[len] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    if (!strncasecmp(line, "RateLimit-Limit:", 16))
        r->rl_limit = atol(line + 16);
    else if (!strncasecmp(line, "RateLimit-Remaining:", 20))
        r->rl_remaining = atol(line + 20);
    else if (!strncasecmp(line, "RateLimit-Reset:", 16))
        r->rl_reset = atoll(line + 16);
    else if (!strncasecmp(line, "Content-Type:", 13))
        snprintf(r->content_type, sizeof(r->content_type), "%.100s", line + 14);
    return len;
}

int
hzt_req(struct hzt_fake *f, const char *method, const char *path, const char *token, const char *ua,
        const char *body, struct hzt_resp *r)
{
    char url[1024], auth[512];
    struct tu_buf b = {0};
    struct curl_slist *h = NULL;
    int rc = -1;
    memset(r, 0, sizeof(*r));
    r->rl_limit = r->rl_remaining = -1;
    r->rl_reset = -1;
    CURL *c = curl_easy_init();
    if (!c)
        return -1;
    snprintf(url, sizeof(url), "%s%s", strncmp(path, "/_admin", 7) ? f->url : f->base, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, tu_buf_append);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_USERAGENT, ua ? ua : "hzt-test/1");
    if (token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
    }
    if (body) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (curl_easy_perform(c) == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        r->raw = b.p ? b.p : strdup("");
        b.p = NULL;
        r->body = r->raw && *r->raw ? json_loads(r->raw, 0, NULL) : NULL;
        rc = 0;
    }
    free(b.p);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return rc;
}

void
hzt_resp_free(struct hzt_resp *r)
{
    json_decref(r->body);
    free(r->raw);
    memset(r, 0, sizeof(*r));
}

const char *
hzt_err(const struct hzt_resp *r)
{
    const char *c = json_string_value(json_object_get(json_object_get(r->body, "error"), "code"));
    return c ? c : "";
}

int
hzt_wait_action(struct hzt_fake *f, const char *token, long id, char *buf, size_t len,
                int timeout_ms)
{
    long long deadline = tu_now_ms() + timeout_ms;
    char path[64];
    snprintf(path, sizeof(path), "/actions/%ld", id);
    for (;;) {
        struct hzt_resp r;
        if (hzt_req(f, "GET", path, token, NULL, NULL, &r) < 0)
            return -1;
        const char *st =
            json_string_value(json_object_get(json_object_get(r.body, "action"), "status"));
        int done = st && strcmp(st, "running") != 0;
        if (done)
            snprintf(buf, len, "%s", st);
        hzt_resp_free(&r);
        if (done)
            return 0;
        if (tu_now_ms() > deadline)
            return -1;
        tu_sleep_ms(10);
    }
}

int
hzt_gen_certs(const char *dir)
{
    char script[1024];
    snprintf(script, sizeof(script), "%s",
             tu_source_path("tests/fakes/hetzner/tests/gen_certs.sh"));
    char *argv[] = {"sh", script, (char *)dir, NULL};
    char *out = NULL;
    int rc = tu_run(argv, NULL, &out, 60000);
    if (rc != 0)
        fprintf(stderr, "gen_certs.sh: %d\n%s\n", rc, out ? out : "");
    free(out);
    return rc == 0 ? 0 : -1;
}
