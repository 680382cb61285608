/*
 * hccm_util: the user's side of the hcloud-cloud-controller-manager suites
 * (see hccm_util.h).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hccm_util.h"
#include "hzt.h"
#include "testutil.h"

char *
hccm_apply_service(struct env *e, const char *name, const char *annot)
{
    return hccm_apply_service_port(e, name, annot, 80, 30080);
}

char *
hccm_apply_service_port(struct env *e, const char *name, const char *annot, int port, int node_port)
{
    char path[4400], manifest[4096], *out = NULL;
    snprintf(path, sizeof(path), "%s/%s.yaml", dir, name);
    snprintf(manifest, sizeof(manifest),
             "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\n%s%s"
             "spec:\n  type: LoadBalancer\n  selector:\n    app: %s\n  ports:\n"
             "  - port: %d\n    protocol: TCP\n    nodePort: %d\n",
             name, annot ? "  annotations:\n" : "", annot ? annot : "", name, port, node_port);
    ck_assert_int_eq(tu_write_file(path, manifest), 0);
    int rc = env_kubectl(e, &out, "apply", "-f", path, NULL);
    ck_assert_msg(rc == 0, "kubectl apply: %s", out ? out : "");
    free(out);
    out = NULL;
    rc = env_kubectl(e, &out, "get", "service", name, "-n", "default", "-o",
                     "jsonpath={.metadata.uid}", NULL);
    ck_assert_msg(rc == 0 && out && out[0], "kubectl get service: %s", out ? out : "");
    return out;
}

void
hccm_annotate(struct env *e, const char *name, const char *kv)
{
    char *out = NULL;
    int rc =
        env_kubectl(e, &out, "annotate", "--overwrite", "service", name, "-n", "default", kv, NULL);
    ck_assert_msg(rc == 0, "kubectl annotate %s: %s", kv, out ? out : "");
    free(out);
}

void
hccm_balancer(struct env *e, const char *uid, char *name, size_t len)
{
    char label[256], *out = NULL;
    size_t k = 0;
    name[k++] = 'a';
    for (const char *p = uid; *p && k + 1 < len; p++)
        if (*p != '-')
            name[k++] = *p;
    name[k] = '\0';
    snprintf(label, sizeof(label), "hcloud-ccm/service-uid=%s", uid);
    const char *steps[][12] = {
        {"load-balancer", "create", "--name", name, "--type", "lb11", "--location", "fsn1",
         "--label", label, NULL},
        {"load-balancer", "attach-to-network", "--network", "k8s", name, NULL},
        {"load-balancer", "add-target", "--ip", "10.0.1.41", name, NULL},
        {"load-balancer", "add-service", "--protocol", "tcp", "--listen-port", "80",
         "--destination-port", "30080", name, NULL},
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        const char *const *s = steps[i];
        int rc =
            env_hcloud(e, &out, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], NULL);
        ck_assert_msg(rc == 0, "hcloud %s %s: %s", s[0], s[1], out ? out : "");
        free(out);
        out = NULL;
    }
}

json_t *
hccm_cli_balancer_of(struct env *e, const char *uid)
{
    char sel[256];
    snprintf(sel, sizeof(sel), "robotlb/service-uid=%s", uid);
    json_t *a = env_hcloud_json(e, "load-balancer", "list", "--selector", sel, NULL);
    json_t *lb = json_array_size(a) == 1 ? json_incref(json_array_get(a, 0)) : NULL;
    json_decref(a);
    return lb;
}

void
hccm_only_reads_since(struct env *e, long since, const char *what)
{
    json_t *log = env_requests_since(e, since);
    size_t i;
    json_t *r;
    json_array_foreach(log, i, r)
    {
        const char *m = json_string_value(json_object_get(r, "method"));
        ck_assert_msg(m && strcmp(m, "GET") == 0, "%s %s after %s", m,
                      json_string_value(json_object_get(r, "path")), what);
    }
    json_decref(log);
}

const char *
hccm_str2(json_t *o, const char *a, const char *b)
{
    return json_string_value(json_object_get(json_object_get(o, a), b));
}

const char *
hccm_ip_of(json_t *lb, const char *family)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(lb, "public_net"), family), "ip"));
}

const char *
hccm_label_of(json_t *lb, const char *key)
{
    return hccm_str2(lb, "labels", key);
}

long
hccm_upload_certificate(struct env *e, const char *name)
{
    char crt[4400], key[4400];
    ck_assert_int_eq(hzt_gen_certs(dir), 0);
    snprintf(crt, sizeof(crt), "%s/good.crt", dir);
    snprintf(key, sizeof(key), "%s/good.key", dir);
    char *out = NULL;
    int rc = env_hcloud(e, &out, "certificate", "create", "--name", name, "--cert-file", crt,
                        "--key-file", key, NULL);
    ck_assert_msg(rc == 0, "hcloud certificate create: %s", out ? out : "");
    free(out);
    json_t *c = env_hcloud_json(e, "certificate", "describe", name, NULL);
    ck_assert_ptr_nonnull(c);
    long id = (long)json_integer_value(json_object_get(c, "id"));
    json_decref(c);
    ck_assert_int_gt(id, 0);
    return id;
}

json_t *
hccm_service_on(json_t *lb, long listen)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(lb, "services"), i, s)
    {
        if (json_integer_value(json_object_get(s, "listen_port")) == listen)
            return s;
    }
    return NULL;
}
