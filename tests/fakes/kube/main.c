/* prismlb-fake-kube: an in-memory Kubernetes API server for tests.
 * Command line in README.md. */
#include "fk.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <openssl/ssl.h>

struct opts {
    int servers;
    int port;
    int admin_port;
    const char *tls_dir;
    const char *cert, *key, *ca;
    const char *state_file;
    size_t history;
    int bookmark_ms;
    size_t reqlog_max;
    int verbose;
    int detached;
    const char *schemas;
};

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: prismlb-fake-kube [options]\n"
            "  --servers N              API servers sharing one store (default 1, max %d)\n"
            "  --port P                 port of server 0 (default 0: ephemeral; others ephemeral)\n"
            "  --admin-port P           admin port (default 0: ephemeral)\n"
            "  --tls-dir DIR            serve HTTPS; generate ca/server/client PEMs into DIR\n"
            "                           unless DIR/server.crt exists\n"
            "  --tls-cert F --tls-key F serving certificate and key (PEM)\n"
            "  --client-ca F            CA that signs accepted client certificates\n"
            "  --token TOKEN[=USER]     accepted bearer token (repeatable)\n"
            "  --readonly-token TOKEN[=USER]  token whose writes get 403 (repeatable)\n"
            "  --state-file PATH        also write the server/admin lines to PATH\n"
            "  --history N              watch history length (default 10000)\n"
            "  --bookmark-interval-ms N BOOKMARK period for watches asking (default 60000)\n"
            "  --request-log-max N      request log entries kept (default 100000)\n"
            "  --verbose                log every request to stderr\n"
            "  --schemas PATH           OpenAPI definitions to validate writes with\n"
            "                           (default: the source tree's schema/schemas.json)\n"
            "  --detached               keep running when the parent process exits\n"
            "                           (by default the fake exits with its parent, so a\n"
            "                           test killed on timeout leaves no fake behind)\n",
            FK_MAX_SERVERS);
}

static int
add_token(json_t *arr, const char *spec, int readonly)
{
    const char *eq = strchr(spec, '=');
    char user[128];
    json_t *t;
    if (eq)
        snprintf(user, sizeof(user), "%s", eq + 1);
    else
        snprintf(user, sizeof(user), "token-%zu", json_array_size(arr) + 1);
    t = json_pack("{s:s%, s:s, s:b}", "token", spec, eq ? (size_t)(eq - spec) : strlen(spec),
                  "user", user, "readonly", readonly);
    return t ? json_array_append_new(arr, t) : -1;
}

static struct event_base *g_base;

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    (void)arg;
    event_base_loopbreak(g_base);
}

static int
write_state(const char *path, const char *text)
{
    char tmp[4096];
    FILE *f;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f)
        return -1;
    if (fputs(text, f) < 0 || fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

/* With $PRISMLB_KUBE_REQUEST_LOG_DIR set, every logged API request is also
 * appended as one JSON line to DIR/EXE.PPID.jsonl, EXE being the program
 * that started this fake (a test binary), so a test run leaves, per test
 * program, the requests its clients made (tests/packaging's RBAC check reads
 * them); with suffix "writes", the body of every write (api.c's write log,
 * which tests/conformance checks against the schemas). Returns the open descriptor, -1 when unset,
 * or -2 on error. */
static int
open_request_log(const char *suffix)
{
    const char *dir = getenv("PRISMLB_KUBE_REQUEST_LOG_DIR");
    char exe[PATH_MAX], link[64], path[PATH_MAX + 64];
    if (!dir || !*dir)
        return -1;
    pid_t ppid = getppid();
    snprintf(link, sizeof(link), "/proc/%d/exe", (int)ppid);
    ssize_t n = readlink(link, exe, sizeof(exe) - 1);
    if (n < 0)
        n = (ssize_t)snprintf(exe, sizeof(exe), "unknown");
    exe[n] = '\0';
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "fake-kube: cannot create %s: %s\n", dir, strerror(errno));
        return -2;
    }
    snprintf(path, sizeof(path), "%s/%s.%d.%s", dir, base, (int)ppid, suffix);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "fake-kube: cannot open %s: %s\n", path, strerror(errno));
        return -2;
    }
    return fd;
}

/* The arguments of the program that started this fake (after its name),
 * from /proc: new array, or NULL. The write log names the test with them. */
static json_t *
parent_args(void)
{
    char path[64], buf[4096];
    json_t *a = json_array();
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)getppid());
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (!a || fd < 0) {
        if (fd >= 0)
            close(fd);
        json_decref(a);
        return NULL;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    for (char *p = buf + strlen(buf) + 1; p < buf + n; p += strlen(p) + 1)
        if (json_array_append_new(a, json_string(p)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"servers", required_argument, NULL, 's'},
        {"port", required_argument, NULL, 'p'},
        {"admin-port", required_argument, NULL, 'a'},
        {"tls-dir", required_argument, NULL, 'd'},
        {"tls-cert", required_argument, NULL, 'c'},
        {"tls-key", required_argument, NULL, 'k'},
        {"client-ca", required_argument, NULL, 'C'},
        {"token", required_argument, NULL, 't'},
        {"readonly-token", required_argument, NULL, 'r'},
        {"state-file", required_argument, NULL, 'f'},
        {"history", required_argument, NULL, 'H'},
        {"bookmark-interval-ms", required_argument, NULL, 'b'},
        {"request-log-max", required_argument, NULL, 'l'},
        {"verbose", no_argument, NULL, 'v'},
        {"detached", no_argument, NULL, 'D'},
        {"schemas", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {.servers = 1, .history = 10000, .bookmark_ms = 60000, .reqlog_max = 100000};
    struct fk_app app;
    struct event *sigterm = NULL, *sigint = NULL;
    struct evhttp_bound_socket *admin_bound;
    char cert[4096], key[4096], ca[4096], out[4096];
    size_t off = 0;
    int c, rc = 1;

    memset(&app, 0, sizeof(app));
    app.reqlog_fd = -1;
    app.writelog_fd = -1;
    app.tokens = json_array();
    if (!app.tokens)
        return 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            o.servers = atoi(optarg);
            break;
        case 'p':
            o.port = atoi(optarg);
            break;
        case 'a':
            o.admin_port = atoi(optarg);
            break;
        case 'd':
            o.tls_dir = optarg;
            break;
        case 'c':
            o.cert = optarg;
            break;
        case 'k':
            o.key = optarg;
            break;
        case 'C':
            o.ca = optarg;
            break;
        case 't':
        case 'r':
            if (add_token(app.tokens, optarg, c == 'r') < 0)
                goto out;
            break;
        case 'f':
            o.state_file = optarg;
            break;
        case 'H':
            o.history = (size_t)strtoul(optarg, NULL, 10);
            break;
        case 'b':
            o.bookmark_ms = atoi(optarg);
            break;
        case 'l':
            o.reqlog_max = (size_t)strtoul(optarg, NULL, 10);
            break;
        case 'v':
            o.verbose = 1;
            break;
        case 'D':
            o.detached = 1;
            break;
        case 'S':
            o.schemas = optarg;
            break;
        case 'h':
            usage(stdout);
            json_decref(app.tokens);
            return 0;
        default:
            usage(stderr);
            json_decref(app.tokens);
            return 2;
        }
    }
    if (optind != argc || o.servers < 1 || o.servers > FK_MAX_SERVERS || o.history < 1 ||
        (!o.cert != !o.key)) {
        usage(stderr);
        json_decref(app.tokens);
        return 2;
    }
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    signal(SIGPIPE, SIG_IGN);
    if (!o.detached) {
        pid_t parent = getppid();
        /* SIGTERM when the parent dies: the normal clean shutdown path. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent) {
            fprintf(stderr, "fake-kube: parent already gone\n");
            json_decref(app.tokens);
            return 1;
        }
    }

    {
        char err[512];
        if (fk_schema_load(o.schemas ? o.schemas : FK_SCHEMAS_PATH, err, sizeof(err)) < 0) {
            fprintf(stderr, "fake-kube: schemas: %s\n", err);
            goto out;
        }
    }
    if (o.tls_dir) {
        struct stat st;
        snprintf(cert, sizeof(cert), "%s/server.crt", o.tls_dir);
        snprintf(key, sizeof(key), "%s/server.key", o.tls_dir);
        snprintf(ca, sizeof(ca), "%s/ca.crt", o.tls_dir);
        if (stat(cert, &st) < 0 && fk_tls_generate(o.tls_dir) < 0) {
            fprintf(stderr, "fake-kube: cannot write TLS material into %s\n", o.tls_dir);
            goto out;
        }
        o.cert = o.cert ? o.cert : cert;
        o.key = o.key ? o.key : key;
        o.ca = o.ca ? o.ca : ca;
    }
    if (o.cert) {
        app.ssl = fk_tls_server_ctx(o.cert, o.key, o.ca);
        if (!app.ssl) {
            fprintf(stderr, "fake-kube: bad TLS material\n");
            goto out;
        }
    }
    app.base = g_base = event_base_new();
    app.reqlog = json_array();
    if (!app.base || !app.reqlog)
        goto out;
    if ((app.reqlog_fd = open_request_log("jsonl")) == -2 ||
        (app.writelog_fd = open_request_log("writes")) == -2)
        goto out;
    if (app.writelog_fd >= 0)
        app.parent_args = parent_args();
    app.reqlog_max = o.reqlog_max ? o.reqlog_max : 1;
    app.bookmark_ms = o.bookmark_ms;
    app.verbose = o.verbose;
    app.faults.fail_status = 500;
    if (fk_store_init(&app.store, o.history) < 0)
        goto out;
    app.store.on_event = fk_watch_on_event;
    app.store.on_event_arg = &app;

    app.nservers = o.servers;
    for (int i = 0; i < o.servers; i++) {
        int r = fk_server_start(&app, i, i == 0 ? o.port : 0);
        if (r < 0) {
            fprintf(stderr, "fake-kube: server %d: cannot listen: %s\n", i, strerror(-r));
            goto out;
        }
    }
    app.admin = evhttp_new(app.base);
    if (!app.admin)
        goto out;
    evhttp_set_allowed_methods(app.admin, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE);
    evhttp_set_gencb(app.admin, fk_admin_handle, &app);
    admin_bound = evhttp_bind_socket_with_handle(app.admin, "127.0.0.1", (ev_uint16_t)o.admin_port);
    if (!admin_bound) {
        fprintf(stderr, "fake-kube: admin: cannot listen\n");
        goto out;
    }
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getsockname(evhttp_bound_socket_get_fd(admin_bound), (struct sockaddr *)&ss, &sl) < 0)
            goto out;
        app.admin_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
    sigterm = evsignal_new(app.base, SIGTERM, on_signal, NULL);
    sigint = evsignal_new(app.base, SIGINT, on_signal, NULL);
    if (!sigterm || !sigint || evsignal_add(sigterm, NULL) < 0 || evsignal_add(sigint, NULL) < 0)
        goto out;

    for (int i = 0; i < o.servers; i++)
        off += (size_t)snprintf(out + off, sizeof(out) - off, "server %d %s://127.0.0.1:%d\n", i,
                                app.ssl ? "https" : "http", app.servers[i].port);
    off += (size_t)snprintf(out + off, sizeof(out) - off, "admin http://127.0.0.1:%d\n",
                            app.admin_port);
    if (o.tls_dir)
        off += (size_t)snprintf(out + off, sizeof(out) - off, "tls-dir %s\n", o.tls_dir);
    snprintf(out + off, sizeof(out) - off, "ready\n");
    if (o.state_file && write_state(o.state_file, out) < 0) {
        fprintf(stderr, "fake-kube: cannot write %s: %s\n", o.state_file, strerror(errno));
        goto out;
    }
    fputs(out, stdout);
    fflush(stdout);

    event_base_dispatch(app.base);
    rc = 0;
out:
    fk_watch_shutdown(&app);
    for (int i = 0; i < app.nservers; i++)
        fk_server_stop(&app, i);
    if (app.admin)
        evhttp_free(app.admin);
    if (sigterm)
        event_free(sigterm);
    if (sigint)
        event_free(sigint);
    /* Freed connections may still hold references through deferred
     * callbacks and finalizers (TLS bufferevents do); let them run. */
    if (app.base)
        for (int i = 0; i < 4; i++)
            event_base_loop(app.base, EVLOOP_NONBLOCK);
    fk_store_fini(&app.store);
    json_decref(app.reqlog);
    if (app.reqlog_fd >= 0)
        close(app.reqlog_fd);
    if (app.writelog_fd >= 0)
        close(app.writelog_fd);
    json_decref(app.parent_args);
    fk_schema_unload();
    json_decref(app.tokens);
    if (app.ssl)
        SSL_CTX_free(app.ssl);
    if (app.base)
        event_base_free(app.base);
    return rc;
}
