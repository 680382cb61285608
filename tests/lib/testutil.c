#include "testutil.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *
root_path(const char *var, const char *rel, char *buf, size_t len)
{
    const char *root = getenv(var);
    if (!root)
        root = ".";
    snprintf(buf, len, "%s/%s", root, rel);
    return buf;
}

const char *
tu_build_path(const char *rel)
{
    static char buf[4096];
    return root_path("PRISMLB_BUILD_ROOT", rel, buf, sizeof(buf));
}

const char *
tu_source_path(const char *rel)
{
    static char buf[4096];
    return root_path("PRISMLB_SOURCE_ROOT", rel, buf, sizeof(buf));
}

long long
tu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
tu_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

const char *
tu_module_path_env(const char *const dirs[])
{
    static char env[16384];
    char one[4096];
    size_t n = (size_t)snprintf(env, sizeof(env), "PRISMLB_MODULE_PATH=");
    for (size_t i = 0; dirs && dirs[i] && n < sizeof(env); i++)
        n += (size_t)snprintf(env + n, sizeof(env) - n, "%s%s", i ? ":" : "",
                              root_path("PRISMLB_BUILD_ROOT", dirs[i], one, sizeof(one)));
    ck_assert_msg(n < sizeof(env), "module path too long");
    return env;
}

int
tu_check_config(const char *path, const char *module_path_env, char **out)
{
    char exe[4096];
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    char *argv[] = {exe, "--check-config", "--config", (char *)path, NULL};
    char *env[] = {(char *)module_path_env, NULL};
    return tu_run(argv, env, out, 30000);
}

int
tu_check_config_text(const char *dir, const char *name, const char *text,
                     const char *module_path_env, char **out)
{
    char path[4096];
    ck_assert_msg(snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path),
                  "path too long");
    ck_assert_msg(tu_write_file(path, text) == 0, "cannot write %s", path);
    return tu_check_config(path, module_path_env, out);
}

int
tu_check_config_fmt(const char *dir, const char *name, const char *module_path_env, char **out,
                    const char *fmt, ...)
{
    char text[16384];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    ck_assert_msg(n >= 0 && n < (int)sizeof(text), "config text too long");
    return tu_check_config_text(dir, name, text, module_path_env, out);
}

void
tu_assert_config_error(const char *out, const char *dir, const char *name, int line,
                       const char *rest)
{
    char want[8192];
    snprintf(want, sizeof(want), "%s/%s:%d: %s", dir, name, line, rest);
    if (!out || !strstr(out, want))
        ck_abort_msg("expected \"%s\" in output:\n%s", want, out ? out : "(none)");
}

void
tu_assert_config_refused(int rc, char *out, const char *dir, const char *name, int line,
                         const char *fmt, ...)
{
    char rest[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof(rest), fmt, ap);
    va_end(ap);
    if (rc != 1)
        ck_abort_msg("exit %d, not 1, for \"%s\":\n%s", rc, rest, out ? out : "(none)");
    tu_assert_config_error(out, dir, name, line, rest);
    free(out);
}

char *tu_dir;

void
tu_dir_setup(void)
{
    tu_dir = tu_mkdtemp();
    ck_assert_msg(tu_dir, "cannot make a private directory");
}

void
tu_dir_teardown(void)
{
    if (tu_dir)
        tu_rmrf(tu_dir);
    free(tu_dir);
    tu_dir = NULL;
}

int
tu_file_has(const char *path, const char *needle)
{
    char *text = tu_read_file(path, NULL);
    int found = text && strstr(text, needle);
    free(text);
    return found;
}

int
tu_file_count(const char *path, const char *needle)
{
    char *text = tu_read_file(path, NULL);
    size_t step = strlen(needle) ? strlen(needle) : 1;
    int n = 0;
    for (const char *q = text; q && (q = strstr(q, needle)); q += step)
        n++;
    free(text);
    return n;
}

char *
tu_mkdtemp_prefix(const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    char buf[4096];
    /* mkdtemp(3) replaces the six trailing X with random characters. */
    snprintf(buf, sizeof(buf), "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    if (!mkdtemp(buf))
        return NULL;
    return strdup(buf);
}

char *
tu_mkdtemp(void)
{
    return tu_mkdtemp_prefix("prismlb-test");
}

int
tu_rmrf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d)
            return -errno;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            char sub[4096];
            snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
            tu_rmrf(sub);
        }
        closedir(d);
        return rmdir(path) < 0 ? -errno : 0;
    }
    return unlink(path) < 0 ? -errno : 0;
}

void
tu_rmdtemp(char **dir)
{
    if (!*dir)
        return;
    tu_rmrf(*dir);
    free(*dir);
    *dir = NULL;
}

static void
child_exec(char *const argv[], char *const envp_extra[], int outfd)
{
    if (outfd >= 0) {
        dup2(outfd, 1);
        dup2(outfd, 2);
        close(outfd);
    }
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) {
        dup2(nul, 0);
        close(nul);
    }
    for (size_t i = 0; envp_extra && envp_extra[i]; i++)
        putenv(envp_extra[i]);
    /* Own process group so that a test can never signal its runner, and
     * killed with the test process if that dies first (a failed assertion
     * ends a Check test with _exit, before it could stop what it started). */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        _exit(127); /* the test died before prctl took effect */
    execvp(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int
tu_spawn(struct tu_proc *p, char *const argv[], char *const envp_extra[], const char *log_path)
{
    int fd = -1;
    memset(p, 0, sizeof(*p));
    if (log_path) {
        fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            return -errno;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return -e;
    }
    if (pid == 0)
        child_exec(argv, envp_extra, fd);
    if (fd >= 0)
        close(fd);
    p->pid = pid;
    return 0;
}

int
tu_exited(struct tu_proc *p)
{
    if (p->reaped)
        return 1;
    if (p->pid <= 0)
        return 1;
    pid_t r = waitpid(p->pid, &p->status, WNOHANG);
    if (r == p->pid) {
        p->reaped = 1;
        return 1;
    }
    return 0;
}

int
tu_wait_exit(struct tu_proc *p, int timeout_ms)
{
    long long deadline = tu_now_ms() + timeout_ms;
    while (!tu_exited(p)) {
        if (tu_now_ms() >= deadline)
            return 0;
        tu_sleep_ms(5);
    }
    return 1;
}

int
tu_stop(struct tu_proc *p, int sig, int timeout_ms)
{
    if (p->pid <= 0)
        return -1;
    if (tu_exited(p))
        return p->status;
    kill(p->pid, sig);
    if (!tu_wait_exit(p, timeout_ms)) {
        kill(p->pid, SIGKILL);
        tu_wait_exit(p, 5000);
    }
    return p->status;
}

int
tu_run(char *const argv[], char *const envp_extra[], char **out, int timeout_ms)
{
    char path[] = "/tmp/prismlb-run-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    struct tu_proc p;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        unlink(path);
        return -1;
    }
    if (pid == 0)
        child_exec(argv, envp_extra, fd);
    close(fd);
    memset(&p, 0, sizeof(p));
    p.pid = pid;
    int rc;
    if (!tu_wait_exit(&p, timeout_ms)) {
        tu_stop(&p, SIGKILL, 1000);
        rc = -1;
    } else if (WIFEXITED(p.status)) {
        rc = WEXITSTATUS(p.status);
    } else {
        rc = 128 + WTERMSIG(p.status);
    }
    if (out)
        *out = tu_read_file(path, NULL);
    unlink(path);
    return rc;
}

char *
tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return NULL;
    }
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

int
tu_write_file(const char *path, const char *data)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    size_t n = strlen(data);
    int rc = fwrite(data, 1, n, f) == n ? 0 : -EIO;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

int
tu_wait_line(const char *path, const char *prefix, char *buf, size_t len, int timeout_ms)
{
    long long deadline = tu_now_ms() + timeout_ms;
    size_t plen = strlen(prefix);
    for (;;) {
        char *data = tu_read_file(path, NULL);
        if (data) {
            char *line = data;
            while (line && *line) {
                char *nl = strchr(line, '\n');
                if (nl && strncmp(line, prefix, plen) == 0) {
                    size_t n = (size_t)(nl - line) - plen;
                    if (n >= len)
                        n = len - 1;
                    memcpy(buf, line + plen, n);
                    buf[n] = '\0';
                    free(data);
                    return 0;
                }
                line = nl ? nl + 1 : NULL;
            }
            free(data);
        }
        if (tu_now_ms() >= deadline)
            return -1;
        tu_sleep_ms(10);
    }
}

int
tu_wait_port(const char *host, int port, int timeout_ms)
{
    long long deadline = tu_now_ms() + timeout_ms;
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl;
        memset(&ss, 0, sizeof(ss));
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)port);
            sl = sizeof(*s4);
        } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons((uint16_t)port);
            sl = sizeof(*s6);
        } else {
            return -1;
        }
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        int ok = connect(fd, (struct sockaddr *)&ss, sl) == 0;
        close(fd);
        if (ok)
            return 0;
        if (tu_now_ms() >= deadline)
            return -1;
        tu_sleep_ms(10);
    }
}

int
tu_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1, e = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    else
        e = errno;
    if (fd >= 0)
        close(fd);
    ck_assert_msg(port > 0, "no free port on 127.0.0.1: %s", strerror(e));
    return port;
}

int
tu_write_kubeconfig(const char *path, const struct tu_kubeconfig *kc)
{
    char buf[16384], dir[4096] = "";
    size_t n = 0;
    if (!kc || !kc->server)
        return -EINVAL;
    if (kc->certdir && snprintf(dir, sizeof(dir), "%s/", kc->certdir) >= (int)sizeof(dir))
        return -ENAMETOOLONG;
    n += (size_t)snprintf(buf, sizeof(buf),
                          "apiVersion: v1\n"
                          "kind: Config\n"
                          "clusters:\n"
                          "- name: fake\n"
                          "  cluster:\n"
                          "    server: %s\n"
                          "    certificate-authority: %sca.crt\n"
                          "contexts:\n"
                          "- name: fake\n"
                          "  context: {cluster: fake, user: fake, namespace: default}\n"
                          "current-context: fake\n"
                          "users:\n"
                          "- name: fake\n"
                          "  user:",
                          kc->server, dir);
    if (n < sizeof(buf) && !kc->no_client_cert)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n,
                              "\n    client-certificate: %sclient.crt\n"
                              "    client-key: %sclient.key",
                              dir, dir);
    if (n < sizeof(buf) && kc->token_file)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\n    tokenFile: %s", kc->token_file);
    if (n < sizeof(buf) && kc->no_client_cert && !kc->token_file)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, " {}");
    if (n + 1 >= sizeof(buf))
        return -ENAMETOOLONG;
    buf[n++] = '\n';
    buf[n] = '\0';
    return tu_write_file(path, buf);
}

int
tu_metric_value(const char *text, const char *series, double *v)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ') {
            *v = strtod(p + n + 1, NULL);
            return 0;
        }
    }
    return -1;
}

char *
tu_scrape(int port)
{
    char url[64], *text = NULL;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);
    char *argv[] = {"/usr/bin/curl", "-sSf", "--max-time", "10", url, NULL};
    if (tu_run(argv, NULL, &text, 10000) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

#define KUBECTL_MAX_ARGS 32

int
tu_kubectl(const char *kubeconfig, const char *cachedir, char *const envp_extra[], char **out,
           const char *const *args)
{
    char exe[4096], *argv[KUBECTL_MAX_ARGS + 6];
    size_t n = 0;
    snprintf(exe, sizeof(exe), "%s", tu_source_path(".tools/bin/kubectl"));
    argv[n++] = exe;
    argv[n++] = "--kubeconfig";
    argv[n++] = (char *)kubeconfig;
    argv[n++] = "--cache-dir";
    argv[n++] = (char *)cachedir;
    for (size_t i = 0; args && args[i]; i++) {
        ck_assert_msg(i < KUBECTL_MAX_ARGS, "more than %d kubectl arguments", KUBECTL_MAX_ARGS);
        argv[n++] = (char *)args[i];
    }
    argv[n] = NULL;
    return tu_run(argv, envp_extra, out, 60000);
}

int
tu_kubectlv(const char *kubeconfig, const char *cachedir, char *const envp_extra[], char **out,
            va_list ap)
{
    const char *args[KUBECTL_MAX_ARGS + 1];
    size_t n = 0;
    for (const char *a; (a = va_arg(ap, const char *)) != NULL; n++) {
        ck_assert_msg(n < KUBECTL_MAX_ARGS, "more than %d kubectl arguments", KUBECTL_MAX_ARGS);
        args[n] = a;
    }
    args[n] = NULL;
    return tu_kubectl(kubeconfig, cachedir, envp_extra, out, args);
}

int
tu_run_suite(Suite *s)
{
    return tu_run_tcase(s, NULL);
}

int
tu_run_tcase(Suite *s, const char *tcase)
{
    SRunner *sr = srunner_create(s);
    srunner_run(sr, NULL, tcase, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

int
tu_proc_stat(pid_t pid, unsigned long long *utime, unsigned long long *stime,
             unsigned long long *start)
{
    char path[64], buf[1024];
    unsigned long long ut = 0, st = 0, t = 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* After the command name, which may hold spaces and parentheses:
     * state (field 3) on; utime and stime are fields 14 and 15, the start
     * time field 22. */
    const char *p = strrchr(buf, ')');
    if (!p || sscanf(p + 2,
                     "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                     "%*d %*d %llu",
                     &ut, &st, &t) != 3)
        return -1;
    if (utime)
        *utime = ut;
    if (stime)
        *stime = st;
    if (start)
        *start = t;
    return 0;
}

double
tu_cpu_seconds(void)
{
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

size_t
tu_buf_append(char *data, size_t size, size_t nmemb, void *buf)
{
    struct tu_buf *b = buf;
    size_t add = size * nmemb;
    char *np = realloc(b->p, b->n + add + 1);
    if (!np)
        return 0;
    memcpy(np + b->n, data, add);
    b->p = np;
    b->n += add;
    b->p[b->n] = '\0';
    b->seen = 1;
    return add;
}
