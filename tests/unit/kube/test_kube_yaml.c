/*
 * Check suite for core/kube/yaml.c: kubeconfig files read with libyaml.
 * Each test compares the parse with the JSON it must equal, or checks that
 * the error names the right line.
 */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"
#include "testutil.h"

/* Parse yaml and compare with the JSON text want. */
static void
same(const char *yaml, const char *want)
{
    char err[256];
    json_t *got = core_kube_yaml_parse(yaml, strlen(yaml), err, sizeof(err));
    ck_assert_msg(got != NULL, "parse failed: %s\n%s", err, yaml);
    json_error_t je;
    json_t *w = json_loads(want, JSON_DECODE_ANY, &je);
    ck_assert_msg(w != NULL, "bad expectation: %s", je.text);
    char *g = json_dumps(got, JSON_SORT_KEYS | JSON_ENCODE_ANY);
    ck_assert_msg(json_equal(got, w), "got %s\nwant %s", g, want);
    free(g);
    json_decref(got);
    json_decref(w);
}

/* Parse must fail with an error containing frag. */
static void
bad(const char *yaml, const char *frag)
{
    char err[256];
    json_t *got = core_kube_yaml_parse(yaml, strlen(yaml), err, sizeof(err));
    char *g = got ? json_dumps(got, JSON_ENCODE_ANY) : NULL;
    ck_assert_msg(got == NULL, "parsed but should fail: %s", g ? g : "");
    ck_assert_msg(strstr(err, frag) != NULL, "error \"%s\" lacks \"%s\"", err, frag);
}

/* A kubeconfig as kubectl config view --raw writes it (kind, kubeadm). */
static const char kubectl_cfg[] =
    "apiVersion: v1\n"
    "clusters:\n"
    "- cluster:\n"
    "    certificate-authority-data: TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PQ==\n"
    "    server: https://127.0.0.1:6443\n"
    "  name: kind-kind\n"
    "- cluster:\n"
    "    insecure-skip-tls-verify: true\n"
    "    server: https://10.0.0.1:6443/clusters/root:org:ws\n"
    "    tls-server-name: kubernetes.default.svc\n"
    "  name: kcp\n"
    "contexts:\n"
    "- context:\n"
    "    cluster: kind-kind\n"
    "    namespace: kube-system\n"
    "    user: kind-kind\n"
    "  name: kind-kind\n"
    "current-context: kind-kind\n"
    "kind: Config\n"
    "preferences: {}\n"
    "users:\n"
    "- name: kind-kind\n"
    "  user:\n"
    "    client-certificate-data: Q0VSVA==\n"
    "    client-key-data: S0VZ\n"
    "- name: \"tok\"\n"
    "  user:\n"
    "    token: 'abc''def'\n"
    "    tokenFile: /var/run/token # rotated\n";

START_TEST(kubectl_output)
{
    same(kubectl_cfg,
         "{\"apiVersion\":\"v1\",\"clusters\":["
         "{\"cluster\":{\"certificate-authority-data\":"
         "\"TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PQ==\","
         "\"server\":\"https://127.0.0.1:6443\"},\"name\":\"kind-kind\"},"
         "{\"cluster\":{\"insecure-skip-tls-verify\":true,"
         "\"server\":\"https://10.0.0.1:6443/clusters/root:org:ws\","
         "\"tls-server-name\":\"kubernetes.default.svc\"},\"name\":\"kcp\"}],"
         "\"contexts\":[{\"context\":{\"cluster\":\"kind-kind\",\"namespace\":\"kube-system\","
         "\"user\":\"kind-kind\"},\"name\":\"kind-kind\"}],"
         "\"current-context\":\"kind-kind\",\"kind\":\"Config\",\"preferences\":{},"
         "\"users\":[{\"name\":\"kind-kind\",\"user\":{\"client-certificate-data\":\"Q0VSVA==\","
         "\"client-key-data\":\"S0VZ\"}},"
         "{\"name\":\"tok\",\"user\":{\"token\":\"abc'def\",\"tokenFile\":\"/var/run/token\"}}]}");
}
END_TEST

START_TEST(indented_sequences_and_nesting)
{
    /* kubeadm and hand-written files indent sequences under their key. */
    same("a:\n  - x\n  - y: 1\n    z: [1, \"two\", three]\n  -\n    - deep\n  - \n",
         "{\"a\":[\"x\",{\"y\":1,\"z\":[1,\"two\",\"three\"]},[\"deep\"],null]}");
    same("- - a\n  - b\n- c\n", "[[\"a\",\"b\"],\"c\"]");
    same("k:\n  m:\n    n: v\n  o: p\nq: r\n",
         "{\"k\":{\"m\":{\"n\":\"v\"},\"o\":\"p\"},\"q\":\"r\"}");
    same("empty:\nnext: 1\n", "{\"empty\":null,\"next\":1}");
    same("---\nx: 1\n...\n", "{\"x\":1}");
    same("", "null");
    same("# only a comment\n\n", "null");
}
END_TEST

START_TEST(scalars)
{
    same("a: true\nb: False\nc: ~\nd: null\ne: -12\nf: 0x1F\ng: 1.5\nh: \"true\"\ni: v1\n"
         "j: https://h:1/p#frag\nk: a # comment\nl: '#not'\nm: \"\"\n",
         "{\"a\":true,\"b\":false,\"c\":null,\"d\":null,\"e\":-12,\"f\":31,\"g\":\"1.5\","
         "\"h\":\"true\",\"i\":\"v1\",\"j\":\"https://h:1/p#frag\",\"k\":\"a\",\"l\":\"#not\","
         "\"m\":\"\"}");
    same("s: \"tab\\there \\\"q\\\" \\u00e9 \\x41 \\U0001F600 back\\\\slash\"\n",
         "{\"s\":\"tab\\there \\\"q\\\" \\u00e9 A \\ud83d\\ude00 back\\\\slash\"}");
    same("\"quoted key\": 1\n'single': 2\nkey with spaces: 3\n",
         "{\"quoted key\":1,\"single\":2,\"key with spaces\":3}");
    same("big: 99999999999999999999\n", "{\"big\":\"99999999999999999999\"}");
    same("f: {a: 1, b: [x, y], c: \"d, e\"}\n",
         "{\"f\":{\"a\":1,\"b\":[\"x\",\"y\"],\"c\":\"d, e\"}}");
    same("crlf: yes\r\nnext: 2\r\n", "{\"crlf\":\"yes\",\"next\":2}");
}
END_TEST

START_TEST(folded_scalars)
{
    /* go-yaml folds long strings at spaces onto more-indented lines. */
    same("msg: this is a long\n  plain scalar\nnext: 1\n",
         "{\"msg\":\"this is a long plain scalar\",\"next\":1}");
    same("msg: \"a quoted # scalar\n  that continues\"\n",
         "{\"msg\":\"a quoted # scalar that continues\"}");
    same("msg: \"no\\\n  space\"\n", "{\"msg\":\"nospace\"}");
    same("- item that\n  goes on\n- b\n", "[\"item that goes on\",\"b\"]");
}
END_TEST

START_TEST(json_documents)
{
    same("{\"apiVersion\": \"v1\", \"clusters\": [{\"name\": \"a\"}]}",
         "{\"apiVersion\":\"v1\",\"clusters\":[{\"name\":\"a\"}]}");
    same("  [1, 2]\n", "[1,2]");
    /* Flow YAML that is not JSON still reads. */
    same("{a: b}", "{\"a\":\"b\"}");
    bad("{\"a\": 1,\n \"b\" 2}", "line 2");
}
END_TEST

START_TEST(errors_name_the_line)
{
    bad("a: 1\nb:\n\tc: 2\n", "line 3");
    bad("a: 1\na: 2\n", "line 2: duplicate key \"a\"");
    bad("a: *x\n", "unknown anchor \"x\"");
    bad("a: &x [*x]\n", "unknown anchor");
    bad("a: !!int one\n", "cannot read \"one\"");
    bad("a: \"open\n", "quoted scalar at line 1");
    bad("a: 'open\n", "quoted scalar at line 1");
    bad("a: b: c\n", "line 1: mapping values are not allowed");
    bad("a:\n  b: 1\n c: 2\n", "line 3");
    bad("- a\nb: 1\n", "line 2");
    bad("a: 1\n- b\n", "line 2");
    bad("a: \"x\\q\"\n", "unknown escape");
    bad("a: [1, 2\n", "line 2");
    bad("a: \"x\" y\n", "line 1");
    bad("a: 1\n---\nb: 2\n", "only one YAML document");
    bad("? [complex]\n: 1\n", "complex keys");
    bad("a: \"\\ud800\"\n", "Unicode");
    bad("a: \xff\xfe\n", "UTF-8");
    same("a: \"\\xff\"\n", "{\"a\":\"\\u00ff\"}");
}
END_TEST

/* A kubeconfig as kubeadm and hand-edited files have it: an anchor reused
 * by an alias, a merge key, and block scalars (literal and folded, with
 * chomping), which client-go reads; the file loads. */
START_TEST(anchors_aliases_and_block_scalars)
{
    same("apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- name: a\n"
         "  cluster: &common\n"
         "    server: https://10.0.0.1:6443\n"
         "    certificate-authority-data: >-\n"
         "      TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0\n"
         "      Q2c9PQ==\n"
         "- name: b\n"
         "  cluster: *common\n"
         "- name: c\n"
         "  cluster:\n"
         "    <<: *common\n"
         "    server: https://10.0.0.2:6443\n"
         "users:\n"
         "- name: me\n"
         "  user:\n"
         "    token: |\n"
         "      abc\n"
         "    client-key-data: |-\n"
         "      S0VZ\n"
         "current-context: !!str ctx\n",
         "{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"clusters\":["
         "{\"name\":\"a\",\"cluster\":{\"server\":\"https://10.0.0.1:6443\","
         "\"certificate-authority-data\":"
         "\"TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0 Q2c9PQ==\"}},"
         "{\"name\":\"b\",\"cluster\":{\"server\":\"https://10.0.0.1:6443\","
         "\"certificate-authority-data\":"
         "\"TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0 Q2c9PQ==\"}},"
         "{\"name\":\"c\",\"cluster\":{\"server\":\"https://10.0.0.2:6443\","
         "\"certificate-authority-data\":"
         "\"TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0 Q2c9PQ==\"}}],"
         "\"users\":[{\"name\":\"me\",\"user\":{\"token\":\"abc\\n\","
         "\"client-key-data\":\"S0VZ\"}}],\"current-context\":\"ctx\"}");
    same("a: &n 5\nb: *n\nc: !!bool true\nd: !!null ~\ne: !!int \"7\"\n",
         "{\"a\":5,\"b\":5,\"c\":true,\"d\":null,\"e\":7}");
}
END_TEST

/* "Billion laughs": nested aliases may not expand without bound. */
START_TEST(alias_expansion_is_bounded)
{
    bad("a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
        "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
        "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
        "aliases expand to more than");
}
END_TEST

START_TEST(deep_nesting_is_bounded)
{
    char buf[8192];
    size_t k = 0;
    for (int i = 0; i < 100; i++) {
        for (int s = 0; s < i; s++)
            buf[k++] = ' ';
        memcpy(buf + k, "k:\n", 3);
        k += 3;
    }
    buf[k] = '\0';
    bad(buf, "nesting deeper");
    char flow[600];
    memset(flow, '[', 300);
    flow[300] = '\0';
    char doc[700];
    snprintf(doc, sizeof(doc), "a: %s\n", flow);
    bad(doc, "nesting deeper");
}
END_TEST

START_TEST(binary_garbage_never_crashes)
{
    /* A cheap fuzz: every prefix of the kubectl file and random bytes. */
    char err[128];
    size_t n = strlen(kubectl_cfg);
    for (size_t i = 0; i <= n; i++) {
        json_t *j = core_kube_yaml_parse(kubectl_cfg, i, err, sizeof(err));
        ck_assert(j != NULL || err[0] != '\0');
        json_decref(j);
    }
    srand(7);
    char junk[256];
    const char alphabet[] = "ab:- \n\"'#[]{},\\&*!|>?\t1";
    for (int round = 0; round < 20000; round++) {
        size_t len = (size_t)(rand() % (int)sizeof(junk));
        for (size_t i = 0; i < len; i++)
            junk[i] = alphabet[rand() % (int)(sizeof(alphabet) - 1)];
        json_t *j = core_kube_yaml_parse(junk, len, err, sizeof(err));
        ck_assert(j != NULL || strncmp(err, "line ", 5) == 0);
        json_decref(j);
    }
}
END_TEST

START_TEST(allocation_failures_are_clean)
{
    /* Fail the Nth allocation (jansson's included) for every N until the
     * parse needs fewer: each run either fails with an error or succeeds;
     * nothing crashes, and the sanitizer build sees no leak. */
    int completed = 0;
    for (unsigned long nth = 1; nth < 100000 && !completed; nth++) {
        char err[128] = "";
        unsigned long before = core_alloc_count();
        core_alloc_fail_at(nth, 0);
        json_t *j = core_kube_yaml_parse(kubectl_cfg, strlen(kubectl_cfg), err, sizeof(err));
        core_alloc_fail_at(0, 0);
        if (core_alloc_count() - before < nth) {
            ck_assert_ptr_nonnull(j); /* the failure was never reached */
            completed = 1;
        } else {
            ck_assert(j == NULL || json_is_object(j));
            if (!j)
                ck_assert_msg(err[0] != '\0', "no error at allocation %lu", nth);
        }
        json_decref(j);
    }
    ck_assert(completed);
}
END_TEST

static Suite *
yaml_suite(void)
{
    Suite *s = suite_create("kube_yaml");
    TCase *tc = tcase_create("yaml");
    tcase_add_test(tc, kubectl_output);
    tcase_add_test(tc, indented_sequences_and_nesting);
    tcase_add_test(tc, scalars);
    tcase_add_test(tc, folded_scalars);
    tcase_add_test(tc, json_documents);
    tcase_add_test(tc, errors_name_the_line);
    tcase_add_test(tc, anchors_aliases_and_block_scalars);
    tcase_add_test(tc, alias_expansion_is_bounded);
    tcase_add_test(tc, deep_nesting_is_bounded);
    tcase_add_test(tc, binary_garbage_never_crashes);
    tcase_add_test(tc, allocation_failures_are_clean);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    json_set_alloc_funcs(core_malloc, core_free); /* jansson through the hook */
    return tu_run_suite(yaml_suite());
}
