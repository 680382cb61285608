/*
 * systemd's notification protocol (core/notify.c) as the daemon speaks it:
 * the test is the service manager, listening on the datagram socket named
 * by NOTIFY_SOCKET (a path, or an abstract '@' name). READY=1 comes once
 * every instance started and the listeners accept; STOPPING=1 on SIGTERM;
 * WATCHDOG=1 keeps coming from the event loop when WATCHDOG_USEC is set.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"

struct mgr {
    char *dir;
    int fd;         /* the notification socket */
    char addr[108]; /* NOTIFY_SOCKET's value */
    char trace[4096];
    int port;           /* mod_metrics' port */
    struct tu_daemon d; /* DIR/prismlb.conf, DIR/prismlb.log */
};

/* Bind the manager's socket: a path in a private directory, or an
 * abstract name. */
static void
mgr_listen(struct mgr *m, int abstract)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    socklen_t len;
    memset(m, 0, sizeof(*m));
    m->dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(m->dir);
    if (abstract)
        snprintf(m->addr, sizeof(m->addr), "@prismlb-notify-%d-%s", (int)getpid(),
                 strrchr(m->dir, '-') + 1);
    else
        snprintf(m->addr, sizeof(m->addr), "%s/notify", m->dir);
    memcpy(sa.sun_path, m->addr, strlen(m->addr));
    if (abstract) {
        sa.sun_path[0] = '\0';
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(m->addr));
    } else {
        len = sizeof(sa);
    }
    m->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(m->fd, 0);
    ck_assert_int_eq(bind(m->fd, (struct sockaddr *)&sa, len), 0);
    tu_daemon_init(&m->d, m->dir, "prismlb");
    snprintf(m->trace, sizeof(m->trace), "%s/trace", m->dir);
}

/* Start the daemon: two lifecycle instances and mod_metrics. */
static void
mgr_start(struct mgr *m, const char *watchdog_usec)
{
    static const char *const dirs[] = {"modules", "tests/modules", NULL};
    char text[12288], env_sock[200], env_wd[64];
    m->port = tu_free_port();
    snprintf(text, sizeof(text),
             "instances = (\n"
             "  { module = \"lifecycle\"; name = \"a\"; trace_file = \"%s\"; },\n"
             "  { module = \"lifecycle\"; name = \"b\"; trace_file = \"%s\"; },\n"
             "  { module = \"metrics\"; bind_address = \"127.0.0.1\"; port = %d; }\n"
             ");\n",
             m->trace, m->trace, m->port);
    snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", m->addr);
    snprintf(env_wd, sizeof(env_wd), "WATCHDOG_USEC=%s", watchdog_usec ? watchdog_usec : "");
    char *env[] = {env_sock, (char *)tu_module_path_env(dirs), watchdog_usec ? env_wd : NULL, NULL};
    tu_daemon_spawn(&m->d, text, NULL, env);
}

/* Receive one notification within timeout_ms into buf. 0 or -1. */
static int
mgr_recv(struct mgr *m, char *buf, size_t len, int timeout_ms)
{
    struct pollfd p = {.fd = m->fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) != 1)
        return -1;
    ssize_t n = recv(m->fd, buf, len - 1, 0);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

static void
mgr_done(struct mgr *m)
{
    tu_daemon_cleanup(&m->d);
    close(m->fd);
    tu_rmrf(m->dir);
    free(m->dir);
}

static void
ready_then_stopping(int abstract)
{
    struct mgr m;
    char msg[1024];
    mgr_listen(&m, abstract);
    mgr_start(&m, NULL);
    int rc = mgr_recv(&m, msg, sizeof(msg), 20000);
    char *log = tu_read_file(m.d.log, NULL);
    ck_assert_msg(rc == 0, "no notification within 20 s; log:\n%s", log ? log : "");
    free(log);
    ck_assert_msg(strstr(msg, "READY=1") != NULL, "first notification: %s", msg);
    char mainpid[64];
    snprintf(mainpid, sizeof(mainpid), "MAINPID=%d", (int)m.d.proc.pid);
    ck_assert_msg(strstr(msg, mainpid) != NULL, "no %s in %s", mainpid, msg);
    /* Every instance started, the listener accepts: no wait needed. */
    ck_assert(tu_file_has(m.trace, "start a"));
    ck_assert(tu_file_has(m.trace, "start b"));
    ck_assert_int_eq(tu_wait_port("127.0.0.1", m.port, 0), 0);

    /* SIGHUP: RELOADING=1 with the monotonic time, then READY=1 once the
     * (unchanged) file is applied. */
    ck_assert_int_eq(kill(m.d.proc.pid, SIGHUP), 0);
    ck_assert_int_eq(mgr_recv(&m, msg, sizeof(msg), 20000), 0);
    ck_assert_msg(strstr(msg, "RELOADING=1") && strstr(msg, "MONOTONIC_USEC="), "after SIGHUP: %s",
                  msg);
    ck_assert_int_eq(mgr_recv(&m, msg, sizeof(msg), 20000), 0);
    ck_assert_msg(strstr(msg, "READY=1") != NULL, "after the reload: %s", msg);

    ck_assert_int_eq(kill(m.d.proc.pid, SIGTERM), 0);
    ck_assert_int_eq(mgr_recv(&m, msg, sizeof(msg), 20000), 0);
    ck_assert_msg(strstr(msg, "STOPPING=1") != NULL, "after SIGTERM: %s", msg);
    ck_assert_int_eq(tu_wait_exit(&m.d.proc, 20000), 1);
    ck_assert(WIFEXITED(m.d.proc.status) && WEXITSTATUS(m.d.proc.status) == 0);
    mgr_done(&m);
}

START_TEST(path_socket_gets_ready_after_the_listeners_and_stopping_on_sigterm)
{
    ready_then_stopping(0);
}
END_TEST

START_TEST(abstract_socket_gets_ready_and_stopping)
{
    ready_then_stopping(1);
}
END_TEST

START_TEST(watchdog_usec_brings_watchdog_keepalives_from_the_event_loop)
{
    struct mgr m;
    char msg[1024];
    mgr_listen(&m, 0);
    mgr_start(&m, "200000"); /* 200 ms: a keep-alive every 100 ms */
    ck_assert_int_eq(mgr_recv(&m, msg, sizeof(msg), 20000), 0);
    ck_assert_msg(strstr(msg, "READY=1") != NULL, "first notification: %s", msg);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(mgr_recv(&m, msg, sizeof(msg), 20000), 0);
        ck_assert_str_eq(msg, "WATCHDOG=1");
    }
    ck_assert_int_eq(kill(m.d.proc.pid, SIGTERM), 0);
    /* Keep-alives may precede it; STOPPING=1 arrives. */
    int stopping = 0;
    for (int i = 0; i < 100 && !stopping; i++) {
        ck_assert_int_eq(mgr_recv(&m, msg, sizeof(msg), 20000), 0);
        stopping = strstr(msg, "STOPPING=1") != NULL;
    }
    ck_assert(stopping);
    ck_assert_int_eq(tu_wait_exit(&m.d.proc, 20000), 1);
    ck_assert(WIFEXITED(m.d.proc.status) && WEXITSTATUS(m.d.proc.status) == 0);
    mgr_done(&m);
}
END_TEST

START_TEST(a_malformed_notify_socket_is_logged_and_the_daemon_runs)
{
    struct mgr m;
    mgr_listen(&m, 0);
    snprintf(m.addr, sizeof(m.addr), "relative/name");
    mgr_start(&m, NULL);
    ck_assert_int_eq(tu_wait_port("127.0.0.1", m.port, 20000), 0);
    ck_assert_int_eq(kill(m.d.proc.pid, SIGTERM), 0);
    ck_assert_int_eq(tu_wait_exit(&m.d.proc, 20000), 1);
    ck_assert(WIFEXITED(m.d.proc.status) && WEXITSTATUS(m.d.proc.status) == 0);
    ck_assert(tu_file_has(m.d.log, "systemd notification failed"));
    mgr_done(&m);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("notify");
    TCase *tc = tcase_create("notify");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, path_socket_gets_ready_after_the_listeners_and_stopping_on_sigterm);
    tcase_add_test(tc, abstract_socket_gets_ready_and_stopping);
    tcase_add_test(tc, watchdog_usec_brings_watchdog_keepalives_from_the_event_loop);
    tcase_add_test(tc, a_malformed_notify_socket_is_logged_and_the_daemon_runs);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
