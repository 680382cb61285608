/*
 * fuzz_jparse: core/kube/jparse.c, the reader of watch events and list
 * pages, against jansson's json_loadb(JSON_DECODE_ANY), which it promises to
 * equal: both accept or both reject, and accepted values are json_equal.
 * The documented differences: jparse nests at most 512 deep (jansson
 * 2048), and jansson's reader stops at a NUL byte as at the end of the
 * input, where jparse rejects any NUL outside a value (the first finding of
 * this target, regress/jparse/trailing-nul): there the text before the NUL
 * must parse to jansson's value.
 */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "kube/kube-internal.h"

static size_t
depth_of(const json_t *v)
{
    size_t d = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *m;
        json_object_foreach((json_t *)v, k, m)
        {
            size_t c = depth_of(m);
            d = c > d ? c : d;
        }
        return d + 1;
    }
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            size_t c = depth_of(json_array_get(v, i));
            d = c > d ? c : d;
        }
        return d + 1;
    }
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t e;
    json_t *ours = core_kube_json_parse((const char *)data, size);
    json_t *ref = json_loadb((const char *)data, size, JSON_DECODE_ANY, &e);

    const uint8_t *nul = memchr(data, '\0', size);
    if (ref && !ours && nul) {
        json_t *prefix = core_kube_json_parse((const char *)data, (size_t)(nul - data));
        /* jansson may also read past the NUL (["",19<NUL>] is ["",19] to
         * it); jparse refuses every raw NUL, so only a prefix it accepts
         * is compared. */
        FUZZ_ASSERT(!prefix || json_equal(prefix, ref),
                    "jparse and jansson differ on the text before a NUL");
        json_decref(prefix);
    } else if (ref && !ours) {
        FUZZ_ASSERT(depth_of(ref) > 512, "jparse rejected what jansson accepts");
    }
    FUZZ_ASSERT(!(ours && !ref), "jparse accepted what jansson rejects: %s", e.text);
    if (ours && ref)
        FUZZ_ASSERT(json_equal(ours, ref), "jparse and jansson built different values");
    json_decref(ours);
    json_decref(ref);
    return 0;
}
