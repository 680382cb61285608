/*
 * notify: see notify.h. The protocol (sd_notify(3)): one datagram per
 * message to $NOTIFY_SOCKET; '@' at the start of the address stands for
 * the NUL byte of Linux's abstract socket namespace.
 */
#include "notify.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "reactor.h"

static struct event *watchdog_ev; /* owned; the event loop's thread only */

/* Fill sa from $NOTIFY_SOCKET's value. Address length, or -EINVAL. */
static int
notify_addr(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
    size_t n = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || n < 2 || n >= sizeof(sa->sun_path))
        return -EINVAL;
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, name, n);
    if (name[0] == '@')
        sa->sun_path[0] = '\0';
    /* An abstract name is exactly its bytes; a path carries its NUL. */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/'));
    return 0;
}

int
core_notify(const char *state)
{
    const char *name = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa;
    socklen_t len;
    int rc, fd;
    if (!name || !*name)
        return 0;
    if ((rc = notify_addr(name, &sa, &len)) < 0)
        return rc;
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    rc = 0;
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

static void
on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    int rc = core_notify("WATCHDOG=1");
    if (rc < 0)
        CORE_WARN("watchdog notification failed: %s", strerror(-rc));
}

/* The keep-alive period from $WATCHDOG_USEC (half of it), or 0 when the
 * watchdog is off or meant for another process. */
static uint64_t
watchdog_period_usec(void)
{
    const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    char *end;
    if (!usec || !*usec)
        return 0;
    errno = 0;
    unsigned long long v = strtoull(usec, &end, 10);
    if (errno || *end || v == 0)
        return 0;
    if (pid && *pid) {
        unsigned long long p = strtoull(pid, &end, 10);
        if (*end || p != (unsigned long long)getpid())
            return 0;
    }
    return v / 2 ? v / 2 : 1;
}

int
core_notify_ready(struct event_base *base, unsigned ninstances)
{
    char msg[128];
    uint64_t period = watchdog_period_usec();
    int rc;
    if (period && !watchdog_ev) {
        struct timeval tv = {.tv_sec = (time_t)(period / 1000000),
                             .tv_usec = (suseconds_t)(period % 1000000)};
        watchdog_ev = event_new(base, -1, EV_PERSIST, on_watchdog, NULL);
        if (!watchdog_ev || event_add(watchdog_ev, &tv) < 0) {
            CORE_ERR("cannot arm the systemd watchdog timer");
            core_notify_stop();
            return -ENOMEM;
        }
    }
    snprintf(msg, sizeof(msg), "READY=1\nMAINPID=%ld\nSTATUS=running %u instance(s)%s",
             (long)getpid(), ninstances, period ? "\nWATCHDOG=1" : "");
    rc = core_notify(msg);
    if (rc < 0)
        CORE_WARN("systemd notification failed: %s", strerror(-rc));
    return 0;
}

void
core_notify_stopping(void)
{
    int rc = core_notify("STOPPING=1\nSTATUS=stopping");
    if (rc < 0)
        CORE_WARN("systemd notification failed: %s", strerror(-rc));
}

void
core_notify_stop(void)
{
    core_event_clear(&watchdog_ev);
}
