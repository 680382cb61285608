/*
 * SIGHUP with the proxy role: when only the endpoint source's settings
 * change (its endpoint list), the source restarts and the proxy does not,
 * so its established connections carry on and the new upstream is added;
 * a file with errors changes nothing and the connection is untouched.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

#define FAST "health_interval = \"1100ms\"; health_timeout = \"1s\";"

static struct proxy px;

static void
assert_echoes(int fd, const char *what)
{
    char b[6] = {0};
    ck_assert_int_eq(write_full(fd, what, 5), 0);
    ck_assert_int_eq(read_full(fd, b, 5, 3000), 5);
    ck_assert_str_eq(b, what);
}

/* Replace the first occurrence of from in the config file with to. */
static void
conf_replace(const char *from, const char *to)
{
    char *t = tu_read_file(px.conf, NULL);
    ck_assert_ptr_nonnull(t);
    char *at = strstr(t, from);
    ck_assert_ptr_nonnull(at);
    size_t n = strlen(t) - strlen(from) + strlen(to) + 1;
    char *o = malloc(n);
    ck_assert_ptr_nonnull(o);
    snprintf(o, n, "%.*s%s%s", (int)(at - t), t, to, at + strlen(from));
    ck_assert_int_eq(tu_write_file(px.conf, o), 0);
    free(o);
    free(t);
}

START_TEST(only_the_endpoint_list_changed_the_proxy_keeps_its_connections)
{
    struct srv a, b;
    char eps2[4200], line[4400];
    ck_assert_int_eq(srv_start(&a, SRV_HELLO, 'A'), 0);
    ck_assert_int_eq(srv_start(&b, SRV_HELLO, 'B'), 0);
    const char *eps[] = {srv_ep(&a)};
    ck_assert_msg(proxy_start(&px, FAST, eps, 1) == 0, "prismlb did not start: %s",
                  px.dir ? proxy_log(&px) : "(no dir)");

    int fd = tcp_connect(px.port, 3000);
    ck_assert_int_ge(fd, 0);
    char h[2];
    ck_assert_int_eq(read_full(fd, h, 2, 5000), 2);
    ck_assert_int_eq(h[0], 'A');
    assert_echoes(fd, "one!!");

    /* A file with an error: nothing changes. */
    conf_replace("bind_port", "prot = 1; bind_port");
    ck_assert_int_eq(kill(px.proc.pid, SIGHUP), 0);
    ck_assert_int_eq(proxy_wait_log(&px, "the running configuration stays", 10000), 0);
    snprintf(line, sizeof(line), "%s:5: instances.kubeprism.prot: unknown setting", px.conf);
    ck_assert_msg(tu_file_has(px.log, line), "no FILE:LINE in:\n%s", proxy_log(&px));
    assert_echoes(fd, "two!!");
    conf_replace("prot = 1; bind_port", "bind_port");

    /* The source reads another file listing A and B: it restarts, the
     * proxy does not. */
    snprintf(eps2, sizeof(eps2), "%s/endpoints2.txt", px.dir);
    char list[256];
    snprintf(list, sizeof(list), "%s\n%s\n", srv_ep(&a), srv_ep(&b));
    ck_assert_int_eq(tu_write_file(eps2, list), 0);
    conf_replace(px.eps, eps2);
    ck_assert_int_eq(kill(px.proc.pid, SIGHUP), 0);
    ck_assert_msg(proxy_wait_log(&px, "1 restarted, 0 added, 0 removed, 1 unchanged", 10000) == 0,
                  "%s", proxy_log(&px));
    snprintf(line, sizeof(line), "msg=\"upstream added\" upstream=%s", srv_ep(&b));
    ck_assert_msg(proxy_wait_log(&px, line, 10000) == 0, "%s", proxy_log(&px));
    /* the source stopped for the reload, the proxy did not */
    ck_assert(
        tu_file_has(px.log, "instance=eps module=file_endpoints msg=\"stopping for the reload\""));
    ck_assert(!tu_file_has(px.log,
                           "instance=kubeprism module=tcp_proxy msg=\"stopping for the reload\""));
    assert_echoes(fd, "three");
    close(fd);
    ck_assert_int_eq(proxy_stop(&px), 0);
    srv_stop(&a);
    srv_stop(&b);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy reload");
    TCase *tc = tcase_create("reload");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, only_the_endpoint_list_changed_the_proxy_keeps_its_connections);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run_suite(suite());
}
