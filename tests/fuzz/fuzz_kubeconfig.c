/*
 * fuzz_kubeconfig: a kubeconfig's text through the YAML reader and the
 * kubeconfig resolver (current context, a named context, in the
 * in-cluster-less path): errors are messages, never crashes or leaks.
 */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "kube/kube-internal.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    json_t *doc = core_kube_yaml_parse((const char *)data, size, err, sizeof(err));
    if (!doc) {
        FUZZ_ASSERT(memchr(err, '\0', sizeof(err)) != NULL, "unterminated error");
        return 0;
    }
    static const char *const contexts[] = {NULL, "fake", "default"};
    for (size_t i = 0; i < sizeof(contexts) / sizeof(contexts[0]); i++) {
        struct core_kube_config c;
        memset(&c, 0, sizeof(c));
        err[0] = '\0';
        int rc = core_kube_config_from_doc(&c, doc, contexts[i], "/nonexistent", err, sizeof(err));
        FUZZ_ASSERT(rc <= 0, "positive return %d", rc);
        FUZZ_ASSERT(rc == 0 || err[0], "an error without a message");
        core_kube_config_clear(&c);
    }
    json_decref(doc);
    return 0;
}
