/*
 * status: the daemon's /status document, what `prismlb status` prints:
 * every running instance whose module has a status hook, in config order,
 * as {"instances": [{"name", "module", "status": {...}}]}.
 */
#include <jansson.h>
#include <string.h>

#include "alloc.h"
#include "core.h"
#include "kube/kube-internal.h"
#include "status.h"

/* Does the module's descriptor reach its status hook? */
static int
has_status(const struct plb_module *m)
{
    return m->size >= offsetof(struct plb_module, status) + sizeof(m->status) && m->status;
}

char *
core_status_render(struct core *c, size_t *len)
{
    json_t *doc = json_object(), *arr = json_array();
    char *text = NULL;

    if (!doc || !arr || json_object_set(doc, "instances", arr) < 0)
        goto out;
    for (size_t i = 0; i < c->ninst; i++) {
        plb_ctx *x = c->inst[i];
        if (x->st != CORE_INST_STARTED || !has_status(x->cm->mod))
            continue;
        json_t *st = KJSON(x->cm->mod->status(x->state));
        if (!json_is_object(st)) {
            json_decref(st);
            st = json_pack("{s:s}", "error", "the instance reported no status");
        }
        json_t *e =
            json_pack("{s:s, s:s, s:o}", "name", x->name, "module", x->cm->mod->name, "status", st);
        if (!e || json_array_append_new(arr, e) < 0)
            goto out;
    }
    text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text && len)
        *len = strlen(text);
out:
    json_decref(arr);
    json_decref(doc);
    return text;
}
