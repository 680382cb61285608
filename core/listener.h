/*
 * listener: TCP listeners on libevent's evconnlistener, and the socket
 * address helpers the rest of the core uses.
 *
 * These are the internal functions behind the "TCP listeners" section of
 * struct plb_host; the host table wraps them one to one. Everything runs on
 * the loop thread.
 */
#ifndef PRISMLB_LISTENER_H
#define PRISMLB_LISTENER_H

#include <stddef.h>
#include <sys/socket.h>

#include "prismlb/module.h"

struct event_base;

/* Room for any address core_sockaddr_format writes, NUL included. */
#define CORE_SOCKADDR_STRLEN 64

/* How long a listener stays paused after accept() fails for lack of
 * resources (EMFILE, ENFILE, ENOBUFS, ENOMEM) before it tries again. */
#define CORE_LISTENER_RETRY_MS 100

/* Listen on addr:port on base (borrowed; must outlive the listener). addr is
 * an IPv4 or IPv6 literal ("127.0.0.1", "::1", "[::1]", "0.0.0.0", "::");
 * IPv6 sockets are IPV6_V6ONLY. port 0 picks an ephemeral port (see
 * core_listener_port). backlog <= 0 means SOMAXCONN. Each accepted connection
 * goes to cb with a new fd (non-blocking, close-on-exec; cb owns it) and the
 * peer formatted as by core_sockaddr_format (borrowed for the call). cb may
 * pause or free the listener. When accept() runs out of descriptors or
 * memory the listener pauses for CORE_LISTENER_RETRY_MS instead of spinning,
 * logging once per episode. New; free with core_listener_free. NULL on
 * failure with *err (may be NULL) set to -errno: -EINVAL for a bad address,
 * port or callback, -EADDRINUSE, -EACCES, -ENOMEM, ... */
plb_listener *core_listen_tcp(struct event_base *base, const char *addr, int port, int backlog,
                              plb_accept_cb cb, void *arg, int *err);

/* core_listen_tcp with flags: CORE_LISTEN_REUSEPORT sets SO_REUSEPORT, so
 * that several listeners (one per worker loop) share addr:port and the
 * kernel spreads new connections among them. */
#define CORE_LISTEN_REUSEPORT 0x1
plb_listener *core_listen_tcp_flags(struct event_base *base, const char *addr, int port,
                                    int backlog, int flags, plb_accept_cb cb, void *arg, int *err);

/* A listener on fd, a socket already bound and listening (steals fd: it is
 * closed on failure too), accepting on base as core_listen_tcp's do. New;
 * free with core_listener_free. NULL on failure with *err (may be NULL) set
 * to -errno: -EINVAL (no base, no callback, fd < 0), -ENOTSOCK or -EBADF
 * (fd is no socket), -ENOMEM. */
plb_listener *core_listener_adopt(struct event_base *base, int fd, plb_accept_cb cb, void *arg,
                                  int *err);

/* The bound port (the ephemeral one when asked for 0); -1 for NULL. */
int core_listener_port(const plb_listener *l);
int core_listener_fd(const plb_listener *l); /* borrowed; -1 for NULL */

/* Stop (paused != 0) or resume accepting. Pending connections wait in the
 * kernel backlog while paused. A resume during a resource back-off takes
 * effect when the back-off ends. NULL is fine. Safe from the accept cb. */
void core_listener_pause(plb_listener *l, int paused);

/* Close the listening socket and free l; accepted connections are the
 * callback's and stay open. NULL is fine. Safe from inside l's accept cb. */
void core_listener_free(plb_listener *l);

/* Count each accept() failure of l in counter (borrowed; must outlive l; a
 * counter family with the one label "listener"), under l's bound address,
 * whose series starts at 0 now. NULL counter: stop counting. */
void core_listener_count_errors(plb_listener *l, plb_metric *counter);

/* A bound, listening, non-blocking, close-on-exec TCP socket on addr:port
 * (as for core_listen_tcp: IP literal, IPV6_V6ONLY, SO_REUSEADDR, port 0 for
 * ephemeral, backlog <= 0 for SOMAXCONN). The bound port goes to *bound_port
 * and the formatted local address to name (name_len bytes); both may be
 * NULL. New fd (caller closes), or -errno (-EINVAL for a bad address). */
int core_tcp_listen_socket(const char *addr, int port, int backlog, int *bound_port, char *name,
                           size_t name_len);
/* The same with CORE_LISTEN_* flags. */
int core_tcp_listen_socket_flags(const char *addr, int port, int backlog, int flags,
                                 int *bound_port, char *name, size_t name_len);

/* Parse an IP literal (IPv4, or IPv6 with or without brackets) and a port in
 * [0, 65535] into *ss and *len (both written, borrowed). Pure. 0 or
 * -EINVAL. */
int core_sockaddr_parse(const char *ip, int port, struct sockaddr_storage *ss, socklen_t *len);

/* Format sa as "1.2.3.4:5" or "[::1]:5" into buf (len bytes, always
 * NUL-terminated when len > 0; CORE_SOCKADDR_STRLEN is always enough).
 * Other families give "unknown". Pure. */
void core_sockaddr_format(const struct sockaddr *sa, char *buf, size_t len);

#endif
