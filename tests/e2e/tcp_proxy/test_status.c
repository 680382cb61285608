/*
 * `prismlb status` against a daemon whose proxy state the test set up: one
 * healthy upstream carrying a connection, one that refuses (unhealthy),
 * then the healthy one removed from the endpoint list while its connection
 * stays (draining). The columns are checked cell by cell, and -o json.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

#define FAST                                                                                       \
    "health_interval = \"1100ms\"; health_timeout = \"1s\"; upstream_selection = \"latency\";"

static struct proxy px;
static int mport;

/* Run prismlb status with args; its stdout (new). */
static char *
status(const char *extra)
{
    char url[64], *out = NULL;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", mport);
    char *argv[] = {(char *)tu_build_path("core/prismlb"),
                    "status",
                    "--url",
                    url,
                    (char *)extra,
                    extra ? "json" : NULL,
                    NULL};
    int rc = tu_run(argv, NULL, &out, 10000);
    ck_assert_msg(rc == 0, "prismlb status: exit %d: %s", rc, out ? out : "");
    return out;
}

/* The whitespace-separated cells of the row of out whose second cell is
 * addr, joined by single spaces, into buf; 0 when there is none. */
static int
row_of(const char *out, const char *addr, char *buf, size_t len)
{
    char line[1024];
    const char *p = out;
    while (*p) {
        size_t n = strcspn(p, "\n");
        snprintf(line, sizeof(line), "%.*s", (int)n, p);
        p += n + (p[n] == '\n');
        char *save = NULL, *first = strtok_r(line, " ", &save),
             *second = strtok_r(NULL, " ", &save);
        if (!first || !second || strcmp(second, addr) != 0)
            continue;
        snprintf(buf, len, "%s %s", first, second);
        for (char *c = strtok_r(NULL, " ", &save); c; c = strtok_r(NULL, " ", &save))
            snprintf(buf + strlen(buf), len - strlen(buf), " %s", c);
        return 1;
    }
    return 0;
}

/* Wait until the row of addr, with its RTT cell replaced by "RTT" when it
 * ends in "ms", equals want. */
static void
wait_row(const char *addr, const char *want)
{
    char row[1024] = "", norm[1024];
    long long dl = tu_now_ms() + 15000;
    for (;;) {
        char *out = status(NULL);
        norm[0] = '\0';
        if (row_of(out, addr, row, sizeof(row))) {
            char *cells[16];
            int n = 0;
            for (char *s = NULL, *c = strtok_r(row, " ", &s); c && n < 16;
                 c = strtok_r(NULL, " ", &s))
                cells[n++] = c;
            for (int i = 0; i < n; i++) {
                const char *v = cells[i];
                size_t l = strlen(v);
                if (i == 5 && l > 2 && strcmp(v + l - 2, "ms") == 0)
                    v = "RTT";
                snprintf(norm + strlen(norm), sizeof(norm) - strlen(norm), "%s%s", i ? " " : "", v);
            }
        }
        if (strcmp(norm, want) == 0) {
            free(out);
            return;
        }
        if (tu_now_ms() > dl) {
            ck_abort_msg("row of %s is \"%s\", want \"%s\"; output:\n%s", addr, norm, want, out);
        }
        free(out);
        tu_sleep_ms(100);
    }
}

START_TEST(status_shows_each_upstream_as_the_proxy_sees_it)
{
    struct srv a;
    char inst[256], down[64];
    ck_assert_int_eq(srv_start(&a, SRV_ECHO, 'a'), 0);
    snprintf(down, sizeof(down), "127.0.0.1:%d", tu_free_port()); /* nothing listens */
    const char *eps[] = {srv_ep(&a), down};
    mport = tu_free_port();
    snprintf(inst, sizeof(inst), "{ module = \"metrics\"; name = \"probes\"; port = %d; }", mport);
    ck_assert_msg(proxy_start_with(&px, FAST, inst, eps, 2) == 0, "prismlb did not start: %s",
                  px.dir ? proxy_log(&px) : "(no dir)");
    int fd = tcp_connect(px.port, 3000);
    ck_assert_int_ge(fd, 0);
    char b[6] = {0};
    ck_assert_int_eq(write_full(fd, "ping!", 5), 0);
    ck_assert_int_eq(read_full(fd, b, 5, 3000), 5);

    char *out = status(NULL);
    ck_assert_msg(strncmp(out, "PROXY", 5) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "UPSTREAM"));
    ck_assert_ptr_nonnull(strstr(out, "CONNECTIONS   DRAINING\n"));
    free(out);
    /* PROXY UPSTREAM HEALTH READY TIER RTT CONNECTIONS DRAINING */
    char want[512];
    snprintf(want, sizeof(want), "kubeprism %s healthy - 0 RTT 1 no", srv_ep(&a));
    wait_row(srv_ep(&a), want);
    snprintf(want, sizeof(want), "kubeprism %s unhealthy - - - 0 no", down);
    wait_row(down, want);

    /* -o json: the same, as the daemon serves it on /status */
    out = status("-o");
    ck_assert_ptr_nonnull(strstr(out, "\"kind\": \"proxy\""));
    ck_assert_ptr_nonnull(strstr(out, "\"connections\": 1"));
    free(out);

    /* removed from the endpoint list with its connection open: draining */
    const char *only_down[] = {down};
    proxy_set_endpoints(&px, only_down, 1);
    snprintf(want, sizeof(want), "kubeprism %s healthy - 0 RTT 1 yes", srv_ep(&a));
    wait_row(srv_ep(&a), want);
    close(fd);
    ck_assert_int_eq(proxy_stop(&px), 0);
    srv_stop(&a);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy status");
    TCase *tc = tcase_create("status");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, status_shows_each_upstream_as_the_proxy_sees_it);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run_suite(suite());
}
