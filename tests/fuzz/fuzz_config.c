/*
 * fuzz_config: a config file's text through libconfig and the settings
 * tables the daemon validates with: the core's top level, and for each
 * element of "instances" the table of the in-tree module it names (dlopened
 * from the build, FUZZ_MODULES), with the module's own check hook. Errors
 * are FILE:LINE messages, never crashes or leaks. @include is left out (it
 * would read other files).
 */
#include <dlfcn.h>
#include <libconfig.h>
#include <string.h>

#include "alloc.h"
#include "core.h"
#include "fuzz.h"
#include "host.h"
#include "settings.h"

#ifndef FUZZ_MODULES
#define FUZZ_MODULES ""
#endif

static const struct plb_module *mods[16];
static size_t nmods;

static void
load_modules(void)
{
    static int done;
    char paths[8192];
    if (done)
        return;
    done = 1;
    snprintf(paths, sizeof(paths), "%s", FUZZ_MODULES);
    for (char *p = strtok(paths, ":"); p && nmods < 16; p = strtok(NULL, ":")) {
        void *dl = dlopen(p, RTLD_NOW | RTLD_LOCAL);
        const struct plb_module *m = dl ? dlsym(dl, PLB_MODULE_SYMBOL) : NULL;
        FUZZ_ASSERT(m, "cannot load %s: %s", p, dlerror());
        mods[nmods++] = m;
    }
}

static void
report(plb_check *chk, const char *setting, const char *fmt, ...)
{
    (void)chk;
    (void)setting;
    (void)fmt;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const top_keys[] = {"instances", NULL};
    static const char *const inst_keys[] = {"module", "name", "gate", NULL};
    struct core_errors err = {0};
    struct core_config cfg;
    config_t cf;
    char *text;

    load_modules();
    if (memmem(data, size, "@include", 8))
        return 0;
    text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    config_init(&cf);
    if (config_read_string(&cf, text) != CONFIG_TRUE)
        goto out;
    memset(&cfg, 0, sizeof(cfg));
    const config_setting_t *root = config_root_setting(&cf);
    core_settings_parse(core_settings_table, &cfg, root, "fuzz.conf", "", "/tmp", top_keys, &err);
    core_settings_free(core_settings_table, &cfg);
    const config_setting_t *list = config_setting_get_member(root, "instances");
    for (int i = 0; list && i < config_setting_length(list) && i < 32; i++) {
        const config_setting_t *g = config_setting_get_elem(list, (unsigned)i);
        const char *name = NULL;
        if (!g || config_setting_type(g) != CONFIG_TYPE_GROUP ||
            !config_setting_lookup_string(g, "module", &name))
            continue;
        for (size_t k = 0; k < nmods; k++) {
            if (strcmp(mods[k]->name, name) != 0)
                continue;
            void *mc = calloc(1, mods[k]->config_size ? mods[k]->config_size : 1);
            if (!mc)
                break;
            int n = core_settings_parse(mods[k]->settings, mc, g, "fuzz.conf", "instances.[0]",
                                        "/tmp", inst_keys, &err);
            if (n == 0 && mods[k]->check) /* chk only goes back to report */
                mods[k]->check(&core_host, (plb_check *)&err, mc, report);
            core_settings_free(mods[k]->settings, mc);
            free(mc);
        }
    }
    for (size_t i = 0; i < err.nlines; i++)
        FUZZ_ASSERT(strncmp(err.lines[i], "fuzz.conf", 9) == 0, "an error without a location: %s",
                    err.lines[i]);
out:
    core_errors_clear(&err);
    config_destroy(&cf);
    free(text);
    return 0;
}
