/*
 * Check suite for core/kube/kubeconfig.c: kubeconfig resolution (contexts,
 * data and file credentials, relative paths, unsupported plugins), the
 * in-cluster configuration, base64, URL joining with path prefixes, API
 * paths and query encoding.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"
#include "testutil.h"

static const char cfg[] =
    "apiVersion: v1\n"
    "kind: Config\n"
    "current-context: main\n"
    "clusters:\n"
    "- name: c1\n"
    "  cluster:\n"
    "    server: https://10.0.0.1:6443/clusters/root:org:ws/\n"
    "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\n"
    "    tls-server-name: kubernetes.default.svc\n"
    "- name: c2\n"
    "  cluster:\n"
    "    server: https://[::1]:7445\n"
    "    certificate-authority: pki/ca.crt\n"
    "    insecure-skip-tls-verify: true\n"
    "contexts:\n"
    "- name: main\n"
    "  context: {cluster: c1, user: certs, namespace: kube-system}\n"
    "- name: other\n"
    "  context:\n"
    "    cluster: c2\n"
    "    user: tok\n"
    "- name: 1234\n"
    "  context:\n"
    "    cluster: c2\n"
    "    user: files\n"
    "- name: plugin\n"
    "  context: {cluster: c2, user: exec}\n"
    "- name: nouser\n"
    "  context: {cluster: c2, user: ghost}\n"
    "- name: halfcert\n"
    "  context: {cluster: c2, user: half}\n"
    "users:\n"
    "- name: certs\n"
    "  user:\n"
    "    client-certificate-data: Q0VSVA==\n"
    "    client-key-data: S0VZ\n"
    "    client-certificate: ignored.crt\n"
    "- name: tok\n"
    "  user:\n"
    "    token: s3cret\n"
    "    tokenFile: ignored\n"
    "- name: files\n"
    "  user:\n"
    "    client-certificate: /abs/client.crt\n"
    "    client-key: rel/client.key\n"
    "    tokenFile: tokens/t\n"
    "- name: exec\n"
    "  user:\n"
    "    exec: {command: aws}\n"
    "- name: half\n"
    "  user:\n"
    "    client-certificate: a.crt\n";

static json_t *
doc(void)
{
    char err[128];
    json_t *d = core_kube_yaml_parse(cfg, strlen(cfg), err, sizeof(err));
    ck_assert_msg(d != NULL, "%s", err);
    return d;
}

START_TEST(current_context_with_data_fields)
{
    struct core_kube_config c = {0};
    char err[256];
    json_t *d = doc();
    ck_assert_int_eq(core_kube_config_from_doc(&c, d, NULL, "/etc/kube", err, sizeof(err)), 0);
    ck_assert_str_eq(c.server, "https://10.0.0.1:6443/clusters/root:org:ws");
    ck_assert_str_eq(c.ca_pem, "-----BEGIN CERTIFICATE-----\n");
    ck_assert_ptr_null(c.ca_file);
    ck_assert_str_eq(c.cert_pem, "CERT");
    ck_assert_str_eq(c.key_pem, "KEY");
    ck_assert_ptr_null(c.cert_file); /* -data wins over the path */
    ck_assert_str_eq(c.tls_server_name, "kubernetes.default.svc");
    ck_assert_str_eq(c.ns, "kube-system");
    ck_assert_int_eq(c.insecure, 0);
    ck_assert_ptr_null(c.token);
    core_kube_config_clear(&c);
    json_decref(d);
}
END_TEST

START_TEST(named_contexts_tokens_and_relative_paths)
{
    struct core_kube_config c = {0};
    char err[256];
    json_t *d = doc();
    ck_assert_int_eq(core_kube_config_from_doc(&c, d, "other", "/etc/kube", err, sizeof(err)), 0);
    ck_assert_str_eq(c.server, "https://[::1]:7445");
    ck_assert_str_eq(c.ca_file, "/etc/kube/pki/ca.crt");
    ck_assert_str_eq(c.token, "s3cret");
    ck_assert_ptr_null(c.token_file); /* an inline token wins */
    ck_assert_int_eq(c.insecure, 1);  /* only because the file says so */
    core_kube_config_clear(&c);
    /* A context named by a number (YAML reads it as an integer). */
    ck_assert_int_eq(core_kube_config_from_doc(&c, d, "1234", "/etc/kube", err, sizeof(err)), 0);
    ck_assert_str_eq(c.cert_file, "/abs/client.crt");
    ck_assert_str_eq(c.key_file, "/etc/kube/rel/client.key");
    ck_assert_str_eq(c.token_file, "/etc/kube/tokens/t");
    core_kube_config_clear(&c);
    json_decref(d);
}
END_TEST

START_TEST(clear_errors)
{
    struct core_kube_config c = {0};
    char err[256];
    json_t *d = doc();
    ck_assert_int_eq(core_kube_config_from_doc(&c, d, "nope", NULL, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "context \"nope\" not found in kubeconfig");
    ck_assert_int_eq(core_kube_config_from_doc(&c, d, "plugin", NULL, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "exec and auth-provider"));
    ck_assert_int_eq(core_kube_config_from_doc(&c, d, "nouser", NULL, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "user \"ghost\" not found"));
    ck_assert_int_eq(core_kube_config_from_doc(&c, d, "halfcert", NULL, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "needs its key"));
    core_kube_config_clear(&c);
    json_decref(d);
    json_t *j = json_pack("{s:s}", "kind", "Config");
    ck_assert_int_eq(core_kube_config_from_doc(&c, j, NULL, NULL, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "kubeconfig has no current-context");
    json_decref(j);
    j = json_loads("{\"current-context\":\"a\",\"contexts\":[{\"name\":\"a\",\"context\":"
                   "{\"cluster\":\"x\"}}],\"clusters\":[{\"name\":\"x\",\"cluster\":"
                   "{\"server\":\"ftp://h\"}}]}",
                   0, NULL);
    ck_assert_int_eq(core_kube_config_from_doc(&c, j, NULL, NULL, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "http(s) URL"));
    json_decref(j);
    core_kube_config_clear(&c);
}
END_TEST

/* A kubeconfig with an anchor and an alias, a merge key and block scalars
 * (a folded tls-server-name, a literal token with strip chomping): the
 * context's cluster is read through the merge of the anchored one. */
START_TEST(load_file_with_anchors_and_block_scalars)
{
    char *dir = tu_mkdtemp();
    char path[512], err[256];
    struct core_kube_config c = {0};
    snprintf(path, sizeof(path), "%s/config", dir);
    ck_assert_int_eq(tu_write_file(path, "apiVersion: v1\n"
                                         "kind: Config\n"
                                         "clusters:\n"
                                         "- name: base\n"
                                         "  cluster: &c\n"
                                         "    server: https://10.0.0.1:6443\n"
                                         "    tls-server-name: >-\n"
                                         "      kubernetes.default.svc\n"
                                         "- name: prod\n"
                                         "  cluster:\n"
                                         "    <<: *c\n"
                                         "    server: https://10.0.0.2:6443\n"
                                         "contexts:\n"
                                         "- name: prod\n"
                                         "  context: {cluster: prod, user: admin}\n"
                                         "current-context: prod\n"
                                         "users:\n"
                                         "- name: admin\n"
                                         "  user:\n"
                                         "    token: |-\n"
                                         "      s3cr3t\n"),
                     0);
    ck_assert_int_eq(core_kube_config_load(&c, path, NULL, err, sizeof(err)), 0);
    ck_assert_str_eq(c.server, "https://10.0.0.2:6443");
    ck_assert_str_eq(c.tls_server_name, "kubernetes.default.svc");
    ck_assert_str_eq(c.token, "s3cr3t");
    core_kube_config_clear(&c);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(load_file_yaml_and_json)
{
    char *dir = tu_mkdtemp();
    char path[512], err[256];
    struct core_kube_config c = {0};
    snprintf(path, sizeof(path), "%s/config", dir);
    ck_assert_int_eq(tu_write_file(path, cfg), 0);
    ck_assert_int_eq(core_kube_config_load(&c, path, "other", err, sizeof(err)), 0);
    char want[600];
    snprintf(want, sizeof(want), "%s/pki/ca.crt", dir);
    ck_assert_str_eq(c.ca_file, want);
    core_kube_config_clear(&c);
    ck_assert_int_eq(tu_write_file(path, "{\"current-context\":\"a\",\"contexts\":[{\"name\":"
                                         "\"a\",\"context\":{\"cluster\":\"x\"}}],\"clusters\":"
                                         "[{\"name\":\"x\",\"cluster\":{\"server\":"
                                         "\"http://127.0.0.1:1\"}}]}"),
                     0);
    ck_assert_int_eq(core_kube_config_load(&c, path, NULL, err, sizeof(err)), 0);
    ck_assert_str_eq(c.server, "http://127.0.0.1:1");
    core_kube_config_clear(&c);
    ck_assert_int_eq(tu_write_file(path, "a: 1\n  b: 2\n"), 0);
    ck_assert_int_eq(core_kube_config_load(&c, path, NULL, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "config: line 2: mapping values"));
    snprintf(path, sizeof(path), "%s/missing", dir);
    ck_assert_int_eq(core_kube_config_load(&c, path, NULL, err, sizeof(err)), -ENOENT);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(in_cluster)
{
    struct core_kube_config c = {0};
    char err[256];
    ck_assert_int_eq(core_kube_config_in_cluster(&c, "10.96.0.1", "443", NULL, err, sizeof(err)),
                     0);
    ck_assert_str_eq(c.server, "https://10.96.0.1:443");
    ck_assert_str_eq(c.token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token");
    ck_assert_str_eq(c.ca_file, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
    ck_assert_ptr_null(c.token); /* named, so re-read on every request */
    ck_assert_int_eq(core_kube_config_in_cluster(&c, "fd00::1", "6443", "/sa", err, sizeof(err)),
                     0);
    ck_assert_str_eq(c.server, "https://[fd00::1]:6443");
    ck_assert_str_eq(c.token_file, "/sa/token");
    ck_assert_int_eq(core_kube_config_in_cluster(&c, NULL, "443", NULL, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "KUBERNETES_SERVICE_HOST"));
    core_kube_config_clear(&c);
}
END_TEST

START_TEST(base64)
{
    size_t n;
    char *s = core_kube_b64decode("aGVsbG8=", &n);
    ck_assert_str_eq(s, "hello");
    ck_assert_uint_eq(n, 5);
    core_free(s);
    s = core_kube_b64decode("aGVs\nbG8", &n); /* unpadded, wrapped */
    ck_assert_str_eq(s, "hello");
    core_free(s);
    s = core_kube_b64decode("-_8=", &n); /* URL alphabet */
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq((unsigned char)s[0], 0xfb);
    ck_assert_int_eq((unsigned char)s[1], 0xff);
    core_free(s);
    ck_assert_ptr_null(core_kube_b64decode("a", &n));
    ck_assert_ptr_null(core_kube_b64decode("ab=c", &n));
    ck_assert_ptr_null(core_kube_b64decode("a*b", &n));
    s = core_kube_b64decode("", &n);
    ck_assert_str_eq(s, "");
    core_free(s);
}
END_TEST

START_TEST(url_join_keeps_the_prefix_once)
{
    const char *cases[][3] = {
        {"https://h:6443", "/api/v1/nodes", "https://h:6443/api/v1/nodes"},
        {"https://h:6443/", "/api/v1/nodes", "https://h:6443/api/v1/nodes"},
        {"https://h/clusters/root:org:ws", "/api/v1", "https://h/clusters/root:org:ws/api/v1"},
        {"https://h/clusters/root:org:ws/", "/api/v1", "https://h/clusters/root:org:ws/api/v1"},
        {"https://h/clusters/root:org:ws//", "api/v1", "https://h/clusters/root:org:ws/api/v1"},
        {"http://127.0.0.1:1/clusters/root:test", "/apis/x/v1?watch=1",
         "http://127.0.0.1:1/clusters/root:test/apis/x/v1?watch=1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *u = core_kube_url_join(cases[i][0], cases[i][1]);
        ck_assert_str_eq(u, cases[i][2]);
        core_free(u);
    }
}
END_TEST

START_TEST(api_paths_and_queries)
{
    char *p = core_kube_path("v1", "services", "default", "web", "status");
    ck_assert_str_eq(p, "/api/v1/namespaces/default/services/web/status");
    core_free(p);
    p = core_kube_path("discovery.k8s.io/v1", "endpointslices", NULL, NULL, NULL);
    ck_assert_str_eq(p, "/apis/discovery.k8s.io/v1/endpointslices");
    core_free(p);
    p = core_kube_path("v1", "nodes", "", "a b/c", NULL);
    ck_assert_str_eq(p, "/api/v1/nodes/a%20b%2Fc");
    core_free(p);
    ck_assert_ptr_null(core_kube_path(NULL, "nodes", NULL, NULL, NULL));
    ck_assert_ptr_null(core_kube_path("v1", "", NULL, NULL, NULL));
    p = core_kube_path("coordination.k8s.io/v1", "leases", "kube-system", "prismlb", NULL);
    ck_assert_int_eq(
        core_kube_qappend(&p, "labelSelector", "kubernetes.io/service-name=kubernetes,a!=b"), 0);
    ck_assert_int_eq(core_kube_qappend(&p, "limit", "500"), 0);
    ck_assert_str_eq(p, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/prismlb"
                        "?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes%2Ca%21%3Db"
                        "&limit=500");
    core_free(p);
}
END_TEST

START_TEST(allocation_failures_are_clean)
{
    json_t *d = doc();
    int completed = 0;
    for (unsigned long nth = 1; nth < 10000 && !completed; nth++) {
        struct core_kube_config c = {0};
        char err[256] = "";
        unsigned long before = core_alloc_count();
        core_alloc_fail_at(nth, 0);
        int rc = core_kube_config_from_doc(&c, d, "1234", "/etc/kube", err, sizeof(err));
        core_alloc_fail_at(0, 0);
        if (core_alloc_count() - before < nth) {
            ck_assert_int_eq(rc, 0);
            ck_assert_str_eq(c.key_file, "/etc/kube/rel/client.key");
            completed = 1;
        } else if (rc != 0) {
            ck_assert_int_eq(rc, -ENOMEM);
            ck_assert_str_eq(err, "out of memory");
        }
        core_kube_config_clear(&c);
    }
    ck_assert(completed);
    json_decref(d);
}
END_TEST

static Suite *
kubeconfig_suite(void)
{
    Suite *s = suite_create("kube_kubeconfig");
    TCase *tc = tcase_create("kubeconfig");
    tcase_add_test(tc, current_context_with_data_fields);
    tcase_add_test(tc, named_contexts_tokens_and_relative_paths);
    tcase_add_test(tc, clear_errors);
    tcase_add_test(tc, load_file_yaml_and_json);
    tcase_add_test(tc, load_file_with_anchors_and_block_scalars);
    tcase_add_test(tc, in_cluster);
    tcase_add_test(tc, base64);
    tcase_add_test(tc, url_join_keeps_the_prefix_once);
    tcase_add_test(tc, api_paths_and_queries);
    tcase_add_test(tc, allocation_failures_are_clean);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    json_set_alloc_funcs(core_malloc, core_free); /* jansson through the hook */
    return tu_run_suite(kubeconfig_suite());
}
