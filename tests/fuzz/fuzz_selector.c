/*
 * fuzz_selector: the label selectors of mod_hetzner_lb's settings
 * (core_lb_selector_parse) and their matching against labels, and the
 * endpoint-list merge every proxy subscription runs
 * (core_endpoints_merge). Input: selector text, a NUL, then labels as
 * JSON; the endpoint lists are the input's lines.
 */
#include <jansson.h>
#include <string.h>

#include "alloc.h"
#include "fuzz.h"
#include "lb/lbtargets.h"
#include "links.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    char err[256];
    struct core_lb_selector *sel = NULL;
    int rc = core_lb_selector_parse(text, &sel, err, sizeof(err));
    size_t first = strlen(text);
    if (rc == 0) {
        json_t *labels =
            first < size ? json_loadb(text + first + 1, size - first - 1, 0, NULL) : NULL;
        (void)core_lb_selector_match(sel, labels);
        (void)core_lb_selector_match(sel, NULL);
        json_decref(labels);
        core_lb_selector_free(sel);
    } else {
        FUZZ_ASSERT(rc < 0 && err[0], "a failed parse without a message");
    }

    /* Endpoint lists: lines, split at every 4th into another set. */
    struct plb_strv sets[4];
    const struct plb_strv *ptrs[4];
    char *lines[64];
    size_t nlines = 0;
    memset(sets, 0, sizeof(sets));
    for (char *p = text; nlines < 64;) {
        char *nl = strchr(p, '\n');
        lines[nlines++] = p;
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    const char *vals[4][16];
    for (size_t i = 0; i < nlines; i++) {
        struct plb_strv *s = &sets[i % 4];
        if (s->n < 16)
            vals[i % 4][s->n++] = lines[i];
    }
    for (size_t k = 0; k < 4; k++) {
        sets[k].v = (char **)vals[k];
        ptrs[k] = &sets[k];
    }
    const char **out = NULL;
    size_t nout = 0;
    if (core_endpoints_merge(ptrs, 4, &out, &nout) == 0) {
        for (size_t i = 1; i < nout; i++)
            FUZZ_ASSERT(strcmp(out[i - 1], out[i]) < 0, "merge not sorted and unique");
        core_free(out);
    }
    free(text);
    return 0;
}
