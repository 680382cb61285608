/*
 * tcp_proxy end to end: a shared, SNI-routed endpoint behind the proxy
 * (the README's kubelet `tls-server-name` set-up). The upstream
 * (sni_router.py) picks its backend by the ClientHello's server name and
 * refuses any other; kubectl, given tls-server-name, reaches the backend
 * of that name through the proxy, which passes the ClientHello through
 * unchanged and adds no name where the client gave none.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "testutil.h"

static char *pki; /* CA, the shared endpoint's certificate, kubeconfig (owned) */
static char kubectl[4096];

static const char *
pki_path(const char *name)
{
    return dir_path(pki, name);
}

/* The test CA (gen_certs.sh) and a certificate of the shared endpoint for
 * both routed names, signed by it. */
static void
setup(void)
{
    pki = tu_mkdtemp();
    ck_assert_ptr_nonnull(pki);
    char script[4096], cmd[16384];
    snprintf(script, sizeof(script), "%s", tu_source_path("tests/e2e/tcp_proxy/gen_certs.sh"));
    snprintf(cmd, sizeof(cmd),
             "set -e; sh '%s' '%s' >/dev/null; cd '%s'; "
             "printf 'subjectAltName=DNS:a.cluster.test,DNS:b.cluster.test\\n' > shared.ext; "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout shared.key -out shared.csr -subj /CN=shared 2>/dev/null; "
             "openssl x509 -req -in shared.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-out shared.crt -days 2 -extfile shared.ext 2>/dev/null",
             script, pki, pki);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    char *out = NULL;
    int rc = tu_run(argv, NULL, &out, 60000);
    ck_assert_msg(rc == 0, "certificates: %s", out);
    free(out);
    snprintf(kubectl, sizeof(kubectl), "%s", tu_source_path(".tools/bin/kubectl"));
    ck_assert_msg(access(kubectl, X_OK) == 0, "no kubectl at %s: run tests/setup.sh", kubectl);
}

static void
teardown(void)
{
    tu_rmrf(pki);
    free(pki);
}

/* kubectl get --raw /version through the proxy on port with the cluster's
 * tls-server-name (NULL: none); its exit status, *out its output (new). */
static int
kubectl_version(int port, const char *server_name, char **out)
{
    char text[16384], name[160] = "";
    if (server_name)
        snprintf(name, sizeof(name), ", tls-server-name: \"%s\"", server_name);
    snprintf(text, sizeof(text),
             "apiVersion: v1\nkind: Config\n"
             "clusters: [{name: c, cluster: {server: \"https://127.0.0.1:%d\", "
             "certificate-authority: \"%s\"%s}}]\n"
             "users: [{name: u, user: {token: \"t\"}}]\n"
             "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
             "current-context: x\n",
             port, pki_path("ca.crt"), name);
    ck_assert_int_eq(tu_write_file(pki_path("kubeconfig"), text), 0);
    char *argv[] = {kubectl,
                    "--kubeconfig",
                    (char *)pki_path("kubeconfig"),
                    "--cache-dir",
                    (char *)pki_path("kcache"),
                    "--request-timeout",
                    "10s",
                    "get",
                    "--raw",
                    "/version",
                    NULL};
    return tu_run(argv, NULL, out, 30000);
}

START_TEST(a_clienthellos_server_name_reaches_an_sni_routed_upstream_unchanged)
{
    char script[4096], port_file[4200], log[4200];
    snprintf(script, sizeof(script), "%s", tu_source_path("tests/e2e/tcp_proxy/sni_router.py"));
    snprintf(port_file, sizeof(port_file), "%s/router.port", pki);
    snprintf(log, sizeof(log), "%s/router.log", pki);
    char *argv[] = {"python3",
                    script,
                    port_file,
                    (char *)pki_path("shared.crt"),
                    (char *)pki_path("shared.key"),
                    "a.cluster.test=a",
                    "b.cluster.test=b",
                    NULL};
    struct tu_proc router;
    ck_assert_int_eq(tu_spawn(&router, argv, NULL, log), 0);
    tp_track(router.pid);
    int port = 0;
    long long end = tu_now_ms() + 10000;
    for (;;) {
        char *s = tu_read_file(port_file, NULL);
        int ok = s && sscanf(s, "%d", &port) == 1 && port > 0;
        free(s);
        if (ok)
            break;
        ck_assert_msg(tu_now_ms() < end, "sni_router.py did not start");
        tu_sleep_ms(20);
    }
    char ep[32];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    const char *eps[] = {ep};
    struct proxy p;
    ck_assert_msg(proxy_start(&p, "", eps, 1) == 0, "prismlb did not start");

    /* Each name reaches its own backend through the one proxy port. */
    char *out = NULL;
    int rc = kubectl_version(p.port, "a.cluster.test", &out);
    ck_assert_msg(rc == 0, "kubectl: %s", out);
    ck_assert_msg(strstr(out, "\"backend\": \"a\"") && strstr(out, "\"sni\": \"a.cluster.test\""),
                  "%s", out);
    free(out);
    rc = kubectl_version(p.port, "b.cluster.test", &out);
    ck_assert_msg(rc == 0, "kubectl: %s", out);
    ck_assert_msg(strstr(out, "\"backend\": \"b\"") && strstr(out, "\"sni\": \"b.cluster.test\""),
                  "%s", out);
    free(out);
    /* Without tls-server-name kubectl sends no name for an IP server, and
     * the proxy adds none: the router refuses it. */
    rc = kubectl_version(p.port, NULL, &out);
    ck_assert_msg(rc != 0, "served without a server name: %s", out);
    free(out);
    char *seen = tu_read_file(log, NULL);
    ck_assert_ptr_nonnull(seen);
    ck_assert_msg(strstr(seen, "sni a.cluster.test\n") && strstr(seen, "sni b.cluster.test\n") &&
                      strstr(seen, "sni -\n"),
                  "%s", seen);
    free(seen);
    ck_assert_int_eq(proxy_stop(&p), 0);
    tu_stop(&router, SIGTERM, 5000);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("tcp_proxy_sni");
    TCase *tc = tcase_create("sni");
    tcase_add_unchecked_fixture(tc, tp_registry_init, tp_reap_all);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, a_clienthellos_server_name_reaches_an_sni_routed_upstream_unchanged);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run_suite(suite());
}
