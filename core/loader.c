/*
 * loader: finds module files, dlopens them and checks their descriptor
 * against the daemon's ABI before anything of the module runs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "build-config.h"
#include "core.h"

/* A reference names a file when it contains '/' or ends in ".so". */
static int
ref_is_path(const char *ref)
{
    size_t n = strlen(ref);
    return strchr(ref, '/') || (n > 3 && strcmp(ref + n - 3, ".so") == 0);
}

static int
is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Search one directory: DIR/mod_NAME.so, then DIR/mod_NAME/mod_NAME.so
 * (the build tree's layout). New string or NULL. */
static char *
search_dir(const char *dir, const char *name)
{
    char *p = core_asprintf("%s/mod_%s.so", dir, name);
    if (p && is_file(p))
        return p;
    core_free(p);
    p = core_asprintf("%s/mod_%s/mod_%s.so", dir, name, name);
    if (p && is_file(p))
        return p;
    core_free(p);
    return NULL;
}

/* The module directories, in order: the modules_dir setting, else
 * $PRISMLB_MODULE_PATH (colon-separated), else the compiled-in directory.
 * Returns the resolved path (new) or NULL; *tried describes the search. */
static char *
resolve(struct core *c, const char *ref, char *tried, size_t tlen)
{
    if (ref_is_path(ref)) {
        char *p = (ref[0] == '/' || !c->config_dir) ? core_strdup(ref)
                                                    : core_asprintf("%s/%s", c->config_dir, ref);
        if (p)
            snprintf(tried, tlen, "%s", p);
        return p;
    }
    const char *dirs = c->cfg.modules_dir;
    if (!dirs || !*dirs)
        dirs = getenv("PRISMLB_MODULE_PATH");
    if (!dirs || !*dirs)
        dirs = PRISMLB_MODULE_DIR;
    snprintf(tried, tlen, "mod_%s.so in %s", ref, dirs);
    char *copy = core_strdup(dirs);
    if (!copy)
        return NULL;
    char *save = NULL, *found = NULL;
    for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save))
        found = search_dir(d, ref);
    core_free(copy);
    return found;
}

/* Copy n bytes of src to a zeroed dst of dsize bytes: the fields of a struct
 * the other side's header lacks read as zero, those it has beyond ours are
 * ignored. */
static void
copy_sized(void *dst, size_t dsize, const void *src, size_t n)
{
    memset(dst, 0, dsize);
    memcpy(dst, src, n < dsize ? n : dsize);
}

/* Fill cm->desc and cm->settings from the module's descriptor, whose size
 * and setting stride may differ from ours (an older or newer header).
 * 0 or -ENOMEM. */
static int
normalize(struct core_module *cm, const struct plb_module *mod)
{
    copy_sized(&cm->desc, sizeof(cm->desc), mod, mod->size);
    if (!mod->settings)
        return 0;
    size_t stride = mod->setting_size, n = 0;
    const char *base = (const char *)mod->settings;
    /* The table ends with an entry whose name is NULL (name comes first in
     * every version of struct plb_setting). */
    while (((const struct plb_setting *)(const void *)(base + n * stride))->name)
        n++;
    cm->settings = core_calloc(n + 1, sizeof(*cm->settings));
    if (!cm->settings)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        copy_sized(&cm->settings[i], sizeof(cm->settings[i]), base + i * stride, stride);
    cm->desc.settings = cm->settings;
    cm->desc.setting_size = sizeof(struct plb_setting);
    return 0;
}

struct core_module *
core_module_load(struct core *c, const char *ref, const char *where, const char *path,
                 struct core_errors *err)
{
    char tried[1024];
    char *file = resolve(c, ref, tried, sizeof(tried));
    struct core_module *cm = NULL;
    void *dl = NULL;

    if (!file) {
        core_errors_add(err, where, path, "module \"%s\" not found (looked for %s)", ref, tried);
        return NULL;
    }
    char *real = realpath(file, NULL);
    if (!real) {
        core_errors_add(err, where, path, "cannot load module %s: %s", file, strerror(errno));
        core_free(file);
        return NULL;
    }
    for (cm = c->modules; cm; cm = cm->next) {
        if (strcmp(cm->path, real) == 0) {
            cm->refs++;
            free(real);
            core_free(file);
            return cm;
        }
    }

    dl = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        core_errors_add(err, where, path, "cannot load module %s: %s", file,
                        why ? why : "unknown error");
        goto fail;
    }
    dlerror();
    const struct plb_module *mod = dlsym(dl, PLB_MODULE_SYMBOL);
    if (!mod) {
        core_errors_add(err, where, path,
                        "%s is not a prismlb module (it exports no \"%s\" symbol)", file,
                        PLB_MODULE_SYMBOL);
        goto fail;
    }
    if (mod->abi_major != PLB_ABI_MAJOR) {
        core_errors_add(err, where, path,
                        "%s was built for module ABI %u.%u, this prismlb has ABI %u.%u "
                        "(the major version must match)",
                        file, mod->abi_major, mod->abi_minor, PLB_ABI_MAJOR, PLB_ABI_MINOR);
        goto fail;
    }
    if (mod->abi_minor > PLB_ABI_MINOR) {
        core_errors_add(err, where, path,
                        "%s needs module ABI %u.%u, newer than this prismlb's %u.%u", file,
                        mod->abi_major, mod->abi_minor, PLB_ABI_MAJOR, PLB_ABI_MINOR);
        goto fail;
    }
    if (mod->size < offsetof(struct plb_module, gate_close) + sizeof(mod->gate_close) ||
        !mod->name || !mod->create || !mod->destroy) {
        core_errors_add(err, where, path,
                        "%s has a malformed module descriptor (size %zu, name, create and "
                        "destroy are required)",
                        file, mod->size);
        goto fail;
    }
    if (mod->settings &&
        mod->setting_size < offsetof(struct plb_setting, type) + sizeof(mod->settings->type)) {
        core_errors_add(err, where, path,
                        "%s has a settings table without a valid setting_size (%zu): set "
                        ".setting_size = sizeof(struct plb_setting)",
                        file, mod->setting_size);
        goto fail;
    }
    if (!ref_is_path(ref) && strcmp(mod->name, ref) != 0) {
        core_errors_add(err, where, path, "%s declares module \"%s\", not \"%s\"", file, mod->name,
                        ref);
        goto fail;
    }
    cm = core_calloc(1, sizeof(*cm));
    if (!cm) {
        core_errors_add(err, where, path, "out of memory");
        goto fail;
    }
    cm->path = core_strdup(real);
    if (!cm->path || normalize(cm, mod) < 0) {
        core_errors_add(err, where, path, "out of memory");
        goto fail;
    }
    cm->dl = dl;
    cm->mod = &cm->desc;
    cm->refs = 1;
    cm->next = c->modules;
    c->modules = cm;
    free(real);
    core_free(file);
    return cm;

fail:
    if (cm) {
        core_free(cm->path);
        core_free(cm->settings);
    }
    core_free(cm);
    if (dl)
        dlclose(dl);
    free(real);
    core_free(file);
    return NULL;
}

void
core_modules_unload(struct core *c)
{
    struct core_module *cm = c->modules;
    while (cm) {
        struct core_module *next = cm->next;
        /* Valgrind and ASan report leaks in unloaded code without symbols;
         * keep modules mapped when asked to. */
        if (!getenv("PRISMLB_NO_DLCLOSE"))
            dlclose(cm->dl);
        core_free(cm->path);
        core_free(cm->settings);
        core_free(cm);
        cm = next;
    }
    c->modules = NULL;
}
