/*
 * End-to-end suite of the client's configuration against prismlb-fake-kube
 * over HTTPS: a kubeconfig with a client certificate; a token file rotated
 * between requests (re-read on every request); in-cluster configuration
 * with a server override and TLS server name (the proxy role reaching the
 * API through 127.0.0.1 while verifying kubernetes.default.svc); TLS
 * verification on by default; a /clusters/root:test path prefix selecting
 * a separate store for calls and informers.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "kt.h"

static const struct plb_kube_ref ns_ref = {
    sizeof(struct plb_kube_ref), "v1", "namespaces", NULL, "default", NULL};

START_TEST(client_certificate_identity)
{
    struct kt t;
    struct kres r = {0};
    kt_start(&t, NULL, NULL);
    ck_assert_str_eq(core_kube_namespace(t.k), "default");
    kt_wait(&t, &r, core_kube_get(t.k, &ns_ref, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    kres_clear(&r);
    /* The fake saw our User-Agent and a certificate user. */
    json_t *d = kt_admin(&t, "GET", "/requests", NULL);
    json_t *last = json_array_get(json_object_get(d, "items"),
                                  json_array_size(json_object_get(d, "items")) - 1);
    ck_assert_str_eq(json_string_value(json_object_get(last, "userAgent")), "prismlb/test");
    ck_assert_str_ne(json_string_value(json_object_get(last, "user")), "");
    json_decref(d);
    kt_stop(&t);
}
END_TEST

static const char *
last_user(struct kt *t)
{
    static char user[128];
    json_t *d = kt_admin(t, "GET", "/requests", NULL);
    json_t *items = json_object_get(d, "items");
    json_t *last = json_array_get(items, json_array_size(items) - 1);
    snprintf(user, sizeof(user), "%s", json_string_value(json_object_get(last, "user")));
    json_decref(d);
    return user;
}

START_TEST(token_file_rotated_between_requests)
{
    struct kt t;
    struct kres r = {0};
    const char *extra[] = {"--token", "tok-alpha=alice", "--token", "tok-beta=bob", NULL};
    kt_start(&t, extra, NULL);
    char tok[4300], cfg[4300];
    snprintf(tok, sizeof(tok), "%s/token", t.f.dir);
    snprintf(cfg, sizeof(cfg), "%s/kubeconfig-token", t.f.dir);
    ck_assert_int_eq(tu_write_file(tok, "tok-alpha\n"), 0);
    kt_write_kubeconfig(&t, cfg, NULL, 0, "token"); /* relative to the kubeconfig */
    struct plb_kube_opts o = {.size = sizeof(o), .kubeconfig = cfg};
    plb_kube *k = kt_client(&t, &o);
    kt_wait(&t, &r, core_kube_get(k, &ns_ref, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(last_user(&t), "alice");
    kres_clear(&r);
    /* Rotate: the next request carries the new token, no restart. */
    ck_assert_int_eq(tu_write_file(tok, "tok-beta"), 0);
    kt_wait(&t, &r, core_kube_get(k, &ns_ref, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(last_user(&t), "bob");
    kres_clear(&r);
    /* A revoked token: 401 with a Status. */
    ck_assert_int_eq(tu_write_file(tok, "tok-gamma"), 0);
    kt_wait(&t, &r, core_kube_get(k, &ns_ref, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 401);
    ck_assert_str_eq(r.reason, "Unauthorized");
    kres_clear(&r);
    core_kube_free(k);
    kt_stop(&t);
}
END_TEST

/* A CA and a serving certificate for kubernetes.default.svc only (not
 * 127.0.0.1, not localhost), made with the openssl command line. */
static void
make_service_cert(const char *dir)
{
    char cmd[3][2048];
    snprintf(cmd[0], sizeof(cmd[0]),
             "cd '%s' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
             "-nodes -keyout sca.key -out sca.crt -subj /CN=svc-test-ca -days 2",
             dir);
    snprintf(cmd[1], sizeof(cmd[1]),
             "cd '%s' && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout svc.key -out svc.csr -subj /CN=kube-apiserver",
             dir);
    snprintf(cmd[2], sizeof(cmd[2]),
             "cd '%s' && printf 'subjectAltName=DNS:kubernetes.default.svc\\n' > ext && "
             "openssl x509 -req -in svc.csr -CA sca.crt -CAkey sca.key -CAcreateserial "
             "-out svc.crt -days 2 -extfile ext",
             dir);
    for (int i = 0; i < 3; i++) {
        char *argv[] = {"sh", "-c", cmd[i], NULL};
        char *out = NULL;
        int rc = tu_run(argv, NULL, &out, 30000);
        ck_assert_msg(rc == 0, "%s: %s", cmd[i], out ? out : "");
        free(out);
    }
}

static void
write_sa(const char *dir, const char *ca_file)
{
    char p[4400];
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(p, sizeof(p), "%s/token", dir);
    ck_assert_int_eq(tu_write_file(p, "sa-token"), 0);
    char *ca = tu_read_file(ca_file, NULL);
    ck_assert_ptr_nonnull(ca);
    snprintf(p, sizeof(p), "%s/ca.crt", dir);
    ck_assert_int_eq(tu_write_file(p, ca), 0);
    free(ca);
    snprintf(p, sizeof(p), "%s/namespace", dir);
    ck_assert_int_eq(tu_write_file(p, "kube-system\n"), 0);
}

START_TEST(in_cluster_through_a_local_proxy_with_server_name)
{
    struct kt t;
    struct kres r = {0};
    char err[512];
    char *pki = tu_mkdtemp();
    ck_assert_ptr_nonnull(pki);
    make_service_cert(pki);
    char crt[4300], key[4300], sca[4300];
    snprintf(crt, sizeof(crt), "%s/svc.crt", pki);
    snprintf(key, sizeof(key), "%s/svc.key", pki);
    snprintf(sca, sizeof(sca), "%s/sca.crt", pki);
    const char *extra[] = {"--token",    "sa-token=system:serviceaccount:kube-system:prismlb",
                           "--tls-cert", crt,
                           "--tls-key",  key,
                           NULL};
    kt_start(&t, extra, NULL);
    char sa[4300];
    snprintf(sa, sizeof(sa), "%s/sa", t.f.dir);
    write_sa(sa, sca);
    int port = atoi(strrchr(t.f.server[0], ':') + 1);
    char local[64];
    /* The in-cluster address would be the ClusterIP; the proxy role goes
     * through 127.0.0.1 (not in the certificate) and verifies the service
     * name instead. */
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    snprintf(local, sizeof(local), "https://127.0.0.1:%d/", port);
    struct plb_kube_opts o = {.size = sizeof(o),
                              .sa_dir = sa,
                              .server = local,
                              .tls_server_name = "kubernetes.default.svc"};
    plb_kube *k = core_kube_new(t.httpc, t.base, NULL, &o, "test", err, sizeof(err));
    ck_assert_msg(k != NULL, "%s", err);
    ck_assert_str_eq(core_kube_namespace(k), "kube-system");
    snprintf(local, sizeof(local), "https://127.0.0.1:%d", port);
    ck_assert_str_eq(core_kube_server(k), local);
    kt_wait(&t, &r, core_kube_get(k, &ns_ref, kres_cb, &r, NULL));
    ck_assert_msg(r.status == 200, "%d %d %s", r.status, r.error, r.message);
    ck_assert_str_eq(last_user(&t), "system:serviceaccount:kube-system:prismlb");
    kres_clear(&r);
    core_kube_free(k);
    /* Without the server name the certificate does not match 127.0.0.1:
     * verification is on by default, so this fails. */
    o.tls_server_name = NULL;
    k = core_kube_new(t.httpc, t.base, NULL, &o, "test", err, sizeof(err));
    ck_assert_ptr_nonnull(k);
    kt_wait(&t, &r, core_kube_get(k, &ns_ref, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(r.error, PLB_HTTP_E_TLS);
    kres_clear(&r);
    core_kube_free(k);
    /* Not in a cluster and no kubeconfig: a clear error. */
    unsetenv("KUBERNETES_SERVICE_HOST");
    o = (struct plb_kube_opts){.size = sizeof(o), .in_cluster = 1};
    ck_assert_ptr_null(core_kube_new(t.httpc, t.base, NULL, &o, "test", err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "KUBERNETES_SERVICE_HOST"));
    unsetenv("KUBERNETES_SERVICE_PORT");
    kt_stop(&t);
    tu_rmrf(pki);
    free(pki);
}
END_TEST

START_TEST(unknown_ca_is_refused)
{
    struct kt t;
    struct kres r = {0};
    kt_start(&t, NULL, NULL);
    char cfg[4300], ca[4300];
    /* A kubeconfig whose "CA" is the client certificate: the serving
     * certificate does not chain to it. */
    snprintf(ca, sizeof(ca), "%s/other-ca.crt", t.f.dir);
    snprintf(cfg, sizeof(cfg), "%s/other-kubeconfig", t.f.dir);
    char src[4400];
    snprintf(src, sizeof(src), "%s/client.crt", t.f.dir);
    char *pem = tu_read_file(src, NULL);
    ck_assert_int_eq(tu_write_file(ca, pem), 0);
    free(pem);
    char *text = tu_read_file(t.kubeconfig, NULL);
    char *at = strstr(text, "certificate-authority: ca.crt");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "certificate-authority: o.crt ", 29);
    ck_assert_int_eq(tu_write_file(cfg, text), 0);
    free(text);
    snprintf(src, sizeof(src), "%s/o.crt", t.f.dir);
    ck_assert_int_eq(rename(ca, src), 0);
    struct plb_kube_opts o = {.size = sizeof(o), .kubeconfig = cfg};
    plb_kube *k = kt_client(&t, &o);
    kt_wait(&t, &r, core_kube_get(k, &ns_ref, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(r.error, PLB_HTTP_E_TLS);
    kres_clear(&r);
    core_kube_free(k);
    kt_stop(&t);
}
END_TEST

static int
is_synced(void *arg)
{
    return core_informer_synced(arg);
}

START_TEST(clusters_path_prefix)
{
    struct kt t;
    struct kres r = {0};
    kt_start(&t, NULL, "/clusters/root:test/");
    char want[300];
    snprintf(want, sizeof(want), "%s/clusters/root:test", t.f.server[0]);
    ck_assert_str_eq(core_kube_server(t.k), want);
    struct plb_kube_ref ref = {
        sizeof(struct plb_kube_ref), "coordination.k8s.io/v1", "leases", "default", NULL, NULL};
    kt_wait(&t, &r,
            core_kube_create(t.k, &ref, "{\"metadata\":{\"name\":\"in-ws\"},\"spec\":{}}", kres_cb,
                             &r, NULL));
    ck_assert_msg(r.status == 201, "%d %s", r.status, r.message);
    kres_clear(&r);
    struct plb_informer_opts o = {.size = sizeof(o), .ref = &ref};
    plb_informer *inf = core_informer_new(t.k, &o, NULL);
    ck_assert_ptr_nonnull(inf);
    ck_assert(kt_run_until(&t, is_synced, inf, 20000));
    ck_assert_uint_eq(core_informer_count(inf), 1);
    ck_assert_ptr_nonnull(core_informer_get(inf, "default", "in-ws"));
    /* The workspace's store has it, the root's does not. */
    json_t *ws = kt_store(&t, "root:test", "leases.coordination.k8s.io", NULL);
    json_t *root = kt_store(&t, "", "leases.coordination.k8s.io", NULL);
    ck_assert_ptr_nonnull(json_object_get(ws, "default/in-ws"));
    ck_assert_int_eq(json_object_size(root), 0);
    json_decref(ws);
    json_decref(root);
    kt_run_ms(&t, 500); /* the watch follows the list at once; let it arrive */
    /* Every path carried the prefix exactly once. */
    ck_assert_int_eq(kt_requests(&t, "GET",
                                 "/clusters/root:test/apis/coordination.k8s.io/v1/"
                                 "namespaces/default/leases?",
                                 NULL),
                     2); /* list and watch */
    ck_assert_int_eq(kt_requests(&t, "GET", "/clusters/root:test/clusters", NULL), 0);
    ck_assert_int_eq(kt_requests(&t, "GET", "//", NULL), 0);
    core_informer_free(inf);
    kt_stop(&t);
}
END_TEST

static Suite *
config_suite(void)
{
    Suite *s = suite_create("kube_config");
    TCase *tc = tcase_create("config");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, client_certificate_identity);
    tcase_add_test(tc, token_file_rotated_between_requests);
    tcase_add_test(tc, in_cluster_through_a_local_proxy_with_server_name);
    tcase_add_test(tc, unknown_ca_is_refused);
    tcase_add_test(tc, clusters_path_prefix);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(config_suite());
}
