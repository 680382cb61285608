/*
 * env: see env.h.
 */
#include "env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"

/* ------------------------------------------------------------------------ */
/* Upstream servers                                                         */

/* What a connection thread needs, copied: it outlives srv_stop, and the
 * struct srv may be started again meanwhile. */
struct srv_conn {
    enum srv_mode mode;
    char id;
    int stop_fd;
    int fd;
};

/* One connection: blocking echo until EOF, then FIN after the echo. */
static void *
conn_thread(void *arg)
{
    struct srv_conn *c = arg;
    char buf[65536];
    if (c->mode == SRV_HELLO) {
        char hello[2] = {c->id, '\n'};
        if (write_full(c->fd, hello, 2) < 0)
            goto out;
    }
    if (c->mode == SRV_RESET) {
        /* The client's first bytes arrived (so a proxy sent them), then
         * a reset: close with a zero linger. */
        struct pollfd pf = {c->fd, POLLIN, 0};
        if (poll(&pf, 1, 10000) > 0)
            (void)read(c->fd, buf, sizeof(buf));
        struct linger lg = {1, 0};
        (void)setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        goto out;
    }
    for (;;) {
        struct pollfd pf[2] = {{c->fd, POLLIN, 0}, {c->stop_fd, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break; /* server stopping */
        if (!pf[0].revents)
            continue;
        ssize_t n = read(c->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            shutdown(c->fd, SHUT_WR);
            /* Linger until the peer closes too (bounded). */
            struct pollfd q = {c->fd, POLLIN, 0};
            if (n == 0 && poll(&q, 1, 5000) > 0)
                (void)read(c->fd, buf, sizeof(buf));
            break;
        }
        if (write_full(c->fd, buf, (size_t)n) < 0)
            break;
    }
out:
    close(c->fd);
    free(c);
    return NULL;
}

static void *
accept_thread(void *arg)
{
    struct srv *s = arg;
    for (;;) {
        struct pollfd pf[2] = {{s->lfd, POLLIN, 0}, {s->stop_pipe[0], POLLIN, 0}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents)
            break;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&s->mu);
        if (s->accepts < SRV_MAX_ACCEPTS)
            s->accept_ms[s->accepts] = tu_now_ms();
        s->accepts++;
        pthread_mutex_unlock(&s->mu);
        struct srv_conn *c = malloc(sizeof(*c));
        pthread_t t;
        if (!c) {
            close(fd);
            continue;
        }
        c->mode = s->mode;
        c->id = s->id;
        c->stop_fd = s->stop_pipe[0];
        c->fd = fd;
        if (pthread_create(&t, NULL, conn_thread, c) != 0) {
            close(fd);
            free(c);
            continue;
        }
        pthread_detach(t);
    }
    return NULL;
}

/* Listen on 127.0.0.1:*port (0: ephemeral, the port chosen is stored). */
static int
listen_local(int backlog, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                            .sin_port = htons((uint16_t)*port)};
    socklen_t al = sizeof(a);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, backlog) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int
srv_start(struct srv *s, enum srv_mode mode, char id)
{
    return srv_start_port(s, mode, id, 0);
}

int
srv_start_port(struct srv *s, enum srv_mode mode, char id, int port)
{
    memset(s, 0, sizeof(*s));
    s->port = port;
    s->mode = mode;
    s->id = id;
    for (int i = 0; i < 4; i++)
        s->fillers[i] = -1;
    pthread_mutex_init(&s->mu, NULL);
    s->lfd = listen_local(mode == SRV_BLACKHOLE ? 0 : 128, &s->port);
    if (s->lfd < 0 || pipe2(s->stop_pipe, O_CLOEXEC) < 0)
        return -1;
    if (mode == SRV_BLACKHOLE) {
        /* Fill the accept queue (backlog 0 holds one); later SYNs are
         * dropped, so connects hang until their timeout. */
        s->fillers[0] = tcp_connect(s->port, 2000);
        if (s->fillers[0] < 0)
            return -1;
        tu_sleep_ms(50);
        return 0;
    }
    if (pthread_create(&s->thread, NULL, accept_thread, s) != 0)
        return -1;
    s->running = 1;
    return 0;
}

void
srv_stop(struct srv *s)
{
    if (s->lfd < 0)
        return;
    if (write(s->stop_pipe[1], "x", 1) < 0) {
        /* the pipe is ours and open: cannot happen */
    }
    if (s->running)
        pthread_join(s->thread, NULL);
    s->running = 0;
    close(s->lfd);
    s->lfd = -1;
    for (int i = 0; i < 4; i++) {
        if (s->fillers[i] >= 0)
            close(s->fillers[i]);
        s->fillers[i] = -1;
    }
    tu_sleep_ms(20); /* connection threads see the stop pipe and close */
    /* Their threads are detached and may still be polling the pipe: it is
     * left open (a few descriptors per server, for the test's life). */
}

int
srv_accepts(struct srv *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->accepts;
    pthread_mutex_unlock(&s->mu);
    return n;
}

long long
srv_accept_at(struct srv *s, int i)
{
    pthread_mutex_lock(&s->mu);
    long long t = i < s->accepts && i < SRV_MAX_ACCEPTS ? s->accept_ms[i] : -1;
    pthread_mutex_unlock(&s->mu);
    return t;
}

const char *
srv_ep(const struct srv *s)
{
    static char slots[8][32];
    static int next;
    char *b = slots[next++ % 8];
    snprintf(b, 32, "127.0.0.1:%d", s->port);
    return b;
}

/* ------------------------------------------------------------------------ */
/* Client sockets                                                           */

int
tcp_connect(int port, int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    struct pollfd pf = {fd, POLLOUT, 0};
    int err = 0;
    socklen_t el = sizeof(err);
    if (poll(&pf, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 ||
        err) {
        close(fd);
        return -1;
    }
    /* Back to blocking; reads are bounded with poll. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

long
read_full(int fd, void *buf, size_t n, int timeout_ms)
{
    size_t got = 0;
    long long end = tu_now_ms() + timeout_ms;
    while (got < n) {
        long long left = end - tu_now_ms();
        if (left <= 0)
            break;
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return got ? (long)got : -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (long)got;
}

long long
wait_eof(int fd, int timeout_ms)
{
    long long start = tu_now_ms(), end = start + timeout_ms;
    char buf[4096];
    for (;;) {
        long long left = end - tu_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        ssize_t k = read(fd, buf, sizeof(buf));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return tu_now_ms() - start;
    }
}

int
write_full(int fd, const void *buf, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t k = send(fd, (const char *)buf + off, n - off, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        off += (size_t)k;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The daemon                                                               */

void
proxy_set_endpoints(struct proxy *p, const char *const *eps, size_t n)
{
    char text[4096] = "", tmp[4200];
    size_t o = 0;
    for (size_t i = 0; i < n && o < sizeof(text); i++)
        o += (size_t)snprintf(text + o, sizeof(text) - o, "%s\n", eps[i]);
    /* Atomic replace: the module never reads half a file. */
    snprintf(tmp, sizeof(tmp), "%s.tmp", p->eps);
    if (tu_write_file(tmp, text) == 0)
        rename(tmp, p->eps);
}

int
proxy_start(struct proxy *p, const char *settings, const char *const *eps, size_t n)
{
    return proxy_start_with(p, settings, NULL, eps, n);
}

int
proxy_start_with(struct proxy *p, const char *settings, const char *instances,
                 const char *const *eps, size_t n)
{
    static const char *const mods[] = {"modules/mod_tcp_proxy", "tests/e2e/tcp_proxy",
                                       "modules/mod_metrics", "tests/modules", NULL};
    char text[16384];
    memset(p, 0, sizeof(*p));
    p->dir = tu_mkdtemp();
    if (!p->dir)
        return -1;
    snprintf(p->conf, sizeof(p->conf), "%s/proxy.conf", p->dir);
    snprintf(p->eps, sizeof(p->eps), "%s/endpoints.txt", p->dir);
    snprintf(p->log, sizeof(p->log), "%s/prismlb.log", p->dir);
    proxy_set_endpoints(p, eps, n);
    /* The suites run twice, with TP_THREADS=1 (the one loop) and 2 (two
     * worker loops): see meson.build. */
    const char *threads = getenv("TP_THREADS");
    char th[64] = "";
    if (threads && *threads)
        snprintf(th, sizeof(th), " threads = %d;", atoi(threads)); /* same line */
    for (int attempt = 0; attempt < 3; attempt++) {
        p->port = tu_free_port();
        snprintf(text, sizeof(text),
                 "log_level = \"debug\";%s\n"
                 "instances = (\n"
                 "  { module = \"file_endpoints\"; name = \"eps\"; file = \"%s\"; },\n"
                 "  { module = \"tcp_proxy\"; name = \"kubeprism\"; upstreams = [\"eps\"];\n"
                 "    bind_address = \"127.0.0.1\"; bind_port = %d;\n"
                 "    %s\n"
                 "  }%s%s\n"
                 ");\n",
                 th, p->eps, p->port, settings ? settings : "", instances ? ",\n  " : "",
                 instances ? instances : "");
        if (tu_write_file(p->conf, text) < 0)
            return -1;
        char *env[] = {(char *)tu_module_path_env(mods), NULL};
        if (tu_prismlb_spawn(&p->proc, p->conf, p->log, NULL, env) < 0)
            return -1;
        tp_track(p->proc.pid);
        /* Wait for the log line rather than connecting: a test connection
         * would reach an upstream and count there. */
        char want[128];
        snprintf(want, sizeof(want), "listen=127.0.0.1:%d", p->port);
        if (proxy_wait_log(p, want, 10000) == 0) {
            p->started_ms = tu_now_ms();
            /* The endpoint set arrives through the link right after the
             * start: until then connections are refused (no upstream). */
            for (size_t i = 0; i < n; i++) {
                snprintf(want, sizeof(want), "msg=\"upstream added\" upstream=%s", eps[i]);
                if (proxy_wait_log(p, want, 5000) < 0)
                    return -1;
            }
            return 0;
        }
        tu_stop(&p->proc, SIGKILL, 2000); /* port taken meanwhile? retry */
    }
    return -1;
}

int
proxy_wait_log(struct proxy *p, const char *needle, int timeout_ms)
{
    return tu_proc_wait_log(&p->proc, p->log, needle, timeout_ms) == 0 ? 0 : -1;
}

char *
proxy_log(struct proxy *p)
{
    char *s = tu_read_file(p->log, NULL);
    return s ? s : strdup("");
}

int
proxy_stop(struct proxy *p)
{
    int st = tu_stop(&p->proc, SIGTERM, 10000);
    if (p->dir) {
        if (getenv("TP_KEEP_LOGS")) {
            fprintf(stderr, "logs kept in %s\n", p->dir);
        } else {
            tu_rmrf(p->dir);
        }
        free(p->dir);
        p->dir = NULL;
    }
    return st;
}

const char *
dir_path(const char *dir, const char *name)
{
    static char slots[8][4200];
    static int next;
    char *b = slots[next++ % 8];
    snprintf(b, sizeof(slots[0]), "%s/%s", dir, name);
    return b;
}

int
http_get(int port, const char *path, int *status, char **body)
{
    char req[512], *buf = NULL;
    size_t len = 0, cap = 0;
    int fd = tcp_connect(port, 3000);
    if (fd < 0)
        return -1;
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
             path);
    if (write_full(fd, req, strlen(req)) < 0)
        goto fail;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap);
            if (!nb)
                goto fail;
            buf = nb;
        }
        long k = read_full(fd, buf + len, 4096, 5000);
        if (k < 0)
            goto fail;
        if (k == 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    if (!buf)
        return -1;
    buf[len] = '\0';
    if (sscanf(buf, "HTTP/1.%*d %d", status) != 1) {
        free(buf);
        return -1;
    }
    char *b = strstr(buf, "\r\n\r\n");
    *body = strdup(b ? b + 4 : "");
    free(buf);
    return *body ? 0 : -1;
fail:
    close(fd);
    free(buf);
    return -1;
}

int
promtool_check_metrics(int port, char **why)
{
    int status = 0, rc = -1;
    char *body = NULL, *out = NULL, *dir = tu_mkdtemp();
    char path[4200], cmd[8600];
    *why = NULL;
    if (!dir || http_get(port, "/metrics", &status, &body) < 0 || status != 200)
        goto out;
    snprintf(path, sizeof(path), "%s/metrics.txt", dir);
    if (tu_write_file(path, body) < 0)
        goto out;
    snprintf(cmd, sizeof(cmd), "/usr/bin/promtool check metrics < '%s'", path);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int exit = tu_run(argv, NULL, &out, 30000);
    if (exit == 0 && out && !out[0])
        rc = 0;
out:
    if (rc < 0 && asprintf(why, "promtool: %s\non:\n%s", out ? out : "(not run)",
                           body ? body : "(no scrape)") < 0)
        *why = NULL;
    free(out);
    free(body);
    if (dir)
        tu_rmrf(dir);
    free(dir);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Process registry                                                         */

static char registry[4200];

void
tp_registry_init(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(registry, sizeof(registry), "%s/tp-e2e-%d.pids", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    unlink(registry);
}

/* The start time of a process (clock ticks since boot), which tells it
 * apart from a later process reusing its PID. 0 when it does not exist. */
static unsigned long long
start_time(int pid)
{
    unsigned long long t = 0;
    return tu_proc_stat(pid, NULL, NULL, &t) == 0 ? t : 0;
}

void
tp_track(int pid)
{
    if (!registry[0] || pid == 0)
        return;
    unsigned long long t = start_time(pid < 0 ? -pid : pid);
    FILE *f = fopen(registry, "a");
    if (!f)
        return;
    fprintf(f, "%d %llu\n", pid, t);
    fclose(f);
}

void
tp_reap_all(void)
{
    if (!registry[0])
        return;
    FILE *f = fopen(registry, "r");
    if (f) {
        int pid;
        unsigned long long t;
        while (fscanf(f, "%d %llu", &pid, &t) == 2) {
            /* Only the very process started (same start time): one that
             * was stopped and whose PID was reused is left alone. */
            if (t == 0 || start_time(pid < 0 ? -pid : pid) != t)
                continue;
            kill(pid, SIGKILL); /* negative: its process group */
        }
        fclose(f);
    }
    unlink(registry);
}
