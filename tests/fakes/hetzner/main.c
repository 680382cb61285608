/* prismlb-fake-hcloud: command line, listening socket, event loop. */
#include "fake.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static void
usage(FILE *out)
{
    fprintf(out, "usage: prismlb-fake-hcloud [options]\n"
                 "  --listen HOST:PORT          address to bind (default 127.0.0.1:0)\n"
                 "  --port-file PATH            write the base URL there once listening\n"
                 "  --seed FILE.json            networks, balancers, tokens, limits\n"
                 "  --action-duration-ms N      how long every action runs (default 100)\n"
                 "  --rate-bucket N             requests per token bucket (default 3600)\n"
                 "  --rate-refill-per-s R       bucket refill per second (default 1)\n"
                 "  --max-load-balancers N      project limit on balancers (default none)\n"
                 "  --overlap-window-ms N       concurrent-writer window (default 2000)\n"
                 "  --detached                  keep running when the parent process exits\n");
}

static int
parse_num(const char *s, double min, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < min)
        return -1;
    *out = v;
    return 0;
}

static int
parse_args(int argc, char **argv, struct hz_config *c)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"port-file", required_argument, NULL, 'p'},
        {"seed", required_argument, NULL, 's'},
        {"action-duration-ms", required_argument, NULL, 'a'},
        {"rate-bucket", required_argument, NULL, 'b'},
        {"rate-refill-per-s", required_argument, NULL, 'r'},
        {"max-load-balancers", required_argument, NULL, 'm'},
        {"overlap-window-ms", required_argument, NULL, 'o'},
        {"detached", no_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    double v;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'l':
            c->listen = optarg;
            break;
        case 'p':
            c->port_file = optarg;
            break;
        case 's':
            c->seed = optarg;
            break;
        case 'D':
            c->detached = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'a':
        case 'b':
        case 'r':
        case 'm':
        case 'o':
            if (parse_num(optarg, ch == 'b' ? 1 : 0, &v) < 0 || v > 1e12) {
                fprintf(stderr, "invalid value for option: %s\n", optarg);
                return -1;
            }
            if (ch == 'a')
                c->action_ms = (int)v;
            if (ch == 'b')
                c->rate_bucket = v;
            if (ch == 'r')
                c->rate_refill = v;
            if (ch == 'm')
                c->max_lbs = (int)v;
            if (ch == 'o')
                c->overlap_ms = (int)v;
            break;
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return -1;
    }
    return 0;
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct hz_fake *f = arg;
    (void)sig, (void)what;
    event_base_loopexit(f->base, NULL);
}

/* Bind f->http to cfg.listen; writes the bound port into *port. */
static int
bind_listen(struct hz_fake *f, char *host, size_t hostlen, int *port)
{
    const char *colon = strrchr(f->cfg.listen, ':');
    double pv;
    if (!colon || (size_t)(colon - f->cfg.listen) >= hostlen || parse_num(colon + 1, 0, &pv) < 0 ||
        pv > 65535) {
        fprintf(stderr, "--listen wants HOST:PORT, got %s\n", f->cfg.listen);
        return -1;
    }
    const char *h = f->cfg.listen;
    size_t hl = (size_t)(colon - h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [::1]:0 */
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(f->http, host, (ev_uint16_t)pv);
    if (!bs) {
        fprintf(stderr, "cannot listen on %s\n", f->cfg.listen);
        return -1;
    }
    /* Accepted sockets inherit TCP_NODELAY on Linux: answers are sent in
     * one go, without waiting for the client's delayed ACK. */
    int one = 1;
    if (setsockopt(evhttp_bound_socket_get_fd(bs), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
        perror("setsockopt TCP_NODELAY");
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl) < 0) {
        perror("getsockname");
        return -1;
    }
    *port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                     : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

static int
write_port_file(const char *path, const char *url)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *fp = fopen(tmp, "w");
    if (!fp)
        return -1;
    int ok = fprintf(fp, "%s\n", url) > 0;
    if (fclose(fp) != 0 || !ok || rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    struct hz_fake f;
    struct event *sigterm = NULL, *sigint = NULL;
    int rc = 1, port;
    char host[256], url[512];
    memset(&f, 0, sizeof(f));
    f.cfg.listen = "127.0.0.1:0";
    f.cfg.action_ms = 100;
    f.cfg.rate_bucket = 3600;
    f.cfg.rate_refill = 1;
    f.cfg.max_lbs = -1;
    f.cfg.overlap_ms = 2000;
    pid_t parent = getppid();
    if (parse_args(argc, argv, &f.cfg) < 0)
        return 2;
    /* A test that dies without stopping its fake must not leave it running:
     * SIGTERM when the parent exits (checked once in case it already has). */
    if (!f.cfg.detached && (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)) {
        fprintf(stderr, "parent process gone or prctl failed; exiting\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    f.max_lbs = f.cfg.max_lbs;
    f.next_lb_id = 1;
    f.next_cert_id = 1;
    f.start_ms = hz_now_ms();
    f.tokens = json_array();
    f.overlaps = json_array();
    if (!f.tokens || !f.overlaps)
        goto out;
    if (f.cfg.seed && hz_seed_load(&f, f.cfg.seed) < 0)
        goto out;
    if (!(f.base = event_base_new()) || !(f.http = evhttp_new(f.base)))
        goto out;
    hz_http_init(&f);
    evhttp_set_max_body_size(f.http, 1 << 20);
    evhttp_set_max_headers_size(f.http, 64 << 10);
    if (bind_listen(&f, host, sizeof(host), &port) < 0)
        goto out;
    sigterm = evsignal_new(f.base, SIGTERM, on_signal, &f);
    sigint = evsignal_new(f.base, SIGINT, on_signal, &f);
    if (!sigterm || !sigint || evsignal_add(sigterm, NULL) < 0 || evsignal_add(sigint, NULL) < 0)
        goto out;
    snprintf(url, sizeof(url), strchr(host, ':') ? "http://[%s]:%d/v1" : "http://%s:%d/v1", host,
             port);
    if (f.cfg.port_file && write_port_file(f.cfg.port_file, url) < 0) {
        fprintf(stderr, "cannot write %s: %s\n", f.cfg.port_file, strerror(errno));
        goto out;
    }
    printf("listening %s\n", url);
    fflush(stdout);
    if (event_base_dispatch(f.base) < 0)
        goto out;
    rc = 0;
out:
    if (sigterm)
        event_free(sigterm);
    if (sigint)
        event_free(sigint);
    hz_http_free(&f);
    hz_actions_free(&f);
    if (f.http)
        evhttp_free(f.http);
    hz_store_free(&f);
    hz_rate_free(&f);
    hz_admin_free(&f);
    json_decref(f.tokens);
    if (f.base)
        event_base_free(f.base);
    return rc;
}
