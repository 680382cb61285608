/*
 * listener: TCP listeners on evconnlistener.
 *
 * The listening socket is made here (so bind errors come back as -errno and
 * IPv6 sockets get IPV6_V6ONLY), then handed to evconnlistener_new, which
 * accepts with accept4(SOCK_NONBLOCK | SOCK_CLOEXEC).
 *
 * accept() failing with EMFILE leaves the connection in the backlog and the
 * listening socket readable, so libevent would call us again at once, for
 * ever. The error callback therefore disables the listener and re-enables it
 * from a timer CORE_LISTENER_RETRY_MS later, logging once per episode and
 * counting every failure (prismlb_accept_errors_total, when the host set a
 * counter); connections already accepted are served all along.
 */
#include "listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "metrics.h"
#include "reactor.h"

struct plb_listener {
    struct evconnlistener *lev;
    struct event *retry; /* ends a resource back-off: pending during it */
    plb_accept_cb cb;
    void *arg;
    plb_metric *errors; /* borrowed counter, or NULL */
    int port;
    int user_paused; /* core_listener_pause */
    int logged;      /* this back-off episode has been logged */
    char name[CORE_SOCKADDR_STRLEN];
};

/* ------------------------------------------------------------------------ */
/* Addresses                                                                */

int
core_sockaddr_parse(const char *ip, int port, struct sockaddr_storage *ss, socklen_t *len)
{
    char buf[INET6_ADDRSTRLEN + 1];
    size_t n;

    if (!ip || !ss || !len || port < 0 || port > 65535)
        return -EINVAL;
    n = strlen(ip);
    if (n >= 2 && ip[0] == '[' && ip[n - 1] == ']') {
        if (n - 2 >= sizeof buf)
            return -EINVAL;
        memcpy(buf, ip + 1, n - 2);
        buf[n - 2] = '\0';
        ip = buf;
        memset(ss, 0, sizeof *ss);
        goto v6; /* brackets mean IPv6 only */
    }
    memset(ss, 0, sizeof *ss);
    {
        struct sockaddr_in *sin = (struct sockaddr_in *)ss;
        if (inet_pton(AF_INET, ip, &sin->sin_addr) == 1) {
            sin->sin_family = AF_INET;
            sin->sin_port = htons((uint16_t)port);
            *len = sizeof *sin;
            return 0;
        }
    }
v6 : {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET6, ip, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        *len = sizeof *sin6;
        return 0;
    }
}
    memset(ss, 0, sizeof *ss);
    return -EINVAL;
}

/* Append the decimal digits of v at p; returns the end. */
static char *
put_dec(char *p, unsigned v)
{
    char tmp[10];
    int n = 0;

    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

/* Copy the n bytes of s into buf (len > 0 bytes), truncated and always
 * NUL-terminated. */
static void
put_text(char *buf, size_t len, const char *s, size_t n)
{
    if (n >= len)
        n = len - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
}

/* Every accepted connection's peer goes through here, and inet_ntop plus
 * snprintf (stdio) cost about 1 % of the proxy's CPU per new connection
 * (perf under tests/bench/proxy's Connection: close load): so IPv4 and the
 * port are written by hand, and only an IPv6 address goes to inet_ntop. */
void
core_sockaddr_format(const struct sockaddr *sa, char *buf, size_t len)
{
    char out[CORE_SOCKADDR_STRLEN];
    char *p = out;
    unsigned port;

    if (!buf || len == 0)
        return;
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        const unsigned char *a = (const unsigned char *)&sin->sin_addr;
        for (int i = 0; i < 4; i++) {
            p = put_dec(p, a[i]);
            *p++ = i < 3 ? '.' : ':';
        }
        port = ntohs(sin->sin_port);
    } else if (sa && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        *p++ = '[';
        /* INET6_ADDRSTRLEN (46, NUL included) + "[]:65535" fits out. */
        if (!inet_ntop(AF_INET6, &sin6->sin6_addr, p, INET6_ADDRSTRLEN)) {
            put_text(buf, len, "unknown", 7);
            return;
        }
        p += strlen(p);
        *p++ = ']';
        *p++ = ':';
        port = ntohs(sin6->sin6_port);
    } else {
        put_text(buf, len, "unknown", 7);
        return;
    }
    p = put_dec(p, port);
    put_text(buf, len, out, (size_t)(p - out));
}

/* ------------------------------------------------------------------------ */
/* Accepting                                                                */

static void
accept_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int socklen, void *p)
{
    plb_listener *l = p;
    char peer[CORE_SOCKADDR_STRLEN];

    (void)lev;
    (void)socklen;
    if (l->logged) {
        CORE_INFO("listener %s: accepting connections again", l->name);
        l->logged = 0;
    }
    core_sockaddr_format(sa, peer, sizeof peer);
    /* Last: the callback may pause or free l (evconnlistener holds its own
     * reference across the call). */
    l->cb(l, fd, peer, l->arg);
}

static void
accept_error_cb(struct evconnlistener *lev, void *p)
{
    plb_listener *l = p;
    int e = EVUTIL_SOCKET_ERROR();
    struct timeval tv = {0, CORE_LISTENER_RETRY_MS * 1000};

    evconnlistener_disable(lev);
    if (l->errors) {
        const char *labels[] = {l->name, NULL};
        (void)core_metric_add(l->errors, labels, 1);
    }
    if (!l->logged) {
        CORE_WARN("listener %s: accept failed: %s; pausing %d ms between retries", l->name,
                  strerror(e), CORE_LISTENER_RETRY_MS);
        l->logged = 1;
    }
    if (evtimer_add(l->retry, &tv) != 0) {
        /* Cannot wait: spinning beats never accepting again. */
        CORE_ERR("listener %s: cannot arm accept retry timer", l->name);
        if (!l->user_paused)
            evconnlistener_enable(lev);
    }
}

static void
retry_cb(evutil_socket_t fd, short what, void *p)
{
    plb_listener *l = p;

    (void)fd;
    (void)what;
    if (!l->user_paused)
        evconnlistener_enable(l->lev);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                */

/* The port and the address text (name_len bytes) of what fd is bound to;
 * port and name may be NULL. 0 or -errno. */
static int
sock_local(int fd, int *port, char *name, size_t name_len)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;

    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -errno;
    if (port)
        *port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (name)
        core_sockaddr_format((struct sockaddr *)&ss, name, name_len);
    return 0;
}

int
core_tcp_listen_socket(const char *addr, int port, int backlog, int *bound_port, char *name,
                       size_t name_len)
{
    return core_tcp_listen_socket_flags(addr, port, backlog, 0, bound_port, name, name_len);
}

int
core_tcp_listen_socket_flags(const char *addr, int port, int backlog, int flags, int *bound_port,
                             char *name, size_t name_len)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int one = 1;
    int fd;
    int rc;

    rc = core_sockaddr_parse(addr, port, &ss, &len);
    if (rc != 0)
        return rc;
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
        goto fail;
    if ((flags & CORE_LISTEN_REUSEPORT) &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        goto fail;
    if (ss.ss_family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0)
        goto fail;
    if (bind(fd, (const struct sockaddr *)&ss, len) != 0)
        goto fail;
    if (listen(fd, backlog > 0 ? backlog : SOMAXCONN) != 0 ||
        sock_local(fd, bound_port, name, name_len) < 0)
        goto fail;
    return fd;
fail:
    rc = -errno;
    close(fd);
    return rc;
}

plb_listener *
core_listen_tcp(struct event_base *base, const char *addr, int port, int backlog, plb_accept_cb cb,
                void *arg, int *err)
{
    return core_listen_tcp_flags(base, addr, port, backlog, 0, cb, arg, err);
}

plb_listener *
core_listen_tcp_flags(struct event_base *base, const char *addr, int port, int backlog, int flags,
                      plb_accept_cb cb, void *arg, int *err)
{
    int fd = core_tcp_listen_socket_flags(addr, port, backlog, flags, NULL, NULL, 0);
    if (fd < 0) {
        if (err)
            *err = fd;
        return NULL;
    }
    return core_listener_adopt(base, fd, cb, arg, err);
}

plb_listener *
core_listener_adopt(struct event_base *base, int fd, plb_accept_cb cb, void *arg, int *err)
{
    char name[CORE_SOCKADDR_STRLEN];
    plb_listener *l = NULL;
    int port, rc;

    if (!base || !cb || fd < 0) {
        rc = -EINVAL;
        goto fail;
    }
    if ((rc = sock_local(fd, &port, name, sizeof name)) < 0)
        goto fail;
    l = core_calloc(1, sizeof *l);
    if (!l) {
        rc = -ENOMEM;
        goto fail;
    }
    l->cb = cb;
    l->arg = arg;
    l->port = port;
    memcpy(l->name, name, sizeof l->name);
    l->retry = evtimer_new(base, retry_cb, l);
    if (!l->retry) {
        rc = -ENOMEM;
        goto fail;
    }
    /* backlog 0: the socket is already listening. */
    l->lev = evconnlistener_new(base, accept_cb, l,
                                LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
                                0, fd);
    if (!l->lev) {
        rc = -ENOMEM;
        goto fail;
    }
    evconnlistener_set_error_cb(l->lev, accept_error_cb);
    if (err)
        *err = 0;
    return l;
fail:
    if (fd >= 0)
        close(fd);
    if (l) {
        core_event_clear(&l->retry);
        core_free(l);
    }
    if (err)
        *err = rc;
    return NULL;
}

int
core_listener_port(const plb_listener *l)
{
    return l ? l->port : -1;
}

int
core_listener_fd(const plb_listener *l)
{
    return l ? (int)evconnlistener_get_fd(l->lev) : -1;
}

void
core_listener_pause(plb_listener *l, int paused)
{
    if (!l)
        return;
    l->user_paused = paused != 0;
    if (l->user_paused)
        evconnlistener_disable(l->lev);
    else if (!evtimer_pending(l->retry, NULL))
        evconnlistener_enable(l->lev);
}

void
core_listener_free(plb_listener *l)
{
    if (!l)
        return;
    event_free(l->retry);
    evconnlistener_free(l->lev); /* closes the socket (LEV_OPT_CLOSE_ON_FREE) */
    core_free(l);
}

void
core_listener_count_errors(plb_listener *l, plb_metric *counter)
{
    if (!l)
        return;
    l->errors = counter;
    if (counter) {
        const char *labels[] = {l->name, NULL};
        (void)core_metric_add(counter, labels, 0);
    }
}
