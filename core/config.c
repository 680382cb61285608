/*
 * config: reads the libconfig file, loads the modules it names and parses
 * every instance's settings through the module's table. Only reads and
 * checks: nothing here runs a module hook other than `check`.
 */
#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "core.h"
#include "kube/kube-internal.h"
#include "log.h"
#include "ports.h"
#include "rfile.h"

/* Largest config file (each one, includes too). */
#define CONFIG_MAX_BYTES ((size_t)16 << 20)
/* libconfig's own include depth limit. */
#define INCLUDE_MAX_DEPTH 10

/* The index is the plb_log_level for the first four; extractedprism's (zap's)
 * dpanic, panic and fatal are accepted and mean error. */
static const char *const log_levels[] = {"error",  "warn",  "info",  "debug",
                                         "dpanic", "panic", "fatal", NULL};
static const char *const log_formats[] = {"logfmt", "json", NULL};

/* clang-format off */
const struct plb_setting core_settings_table[] = {
    {.name = "modules_dir", .type = PLB_SET_PATH,
     .offset = offsetof(struct core_config, modules_dir),
     .doc = "Directory of module files (colon-separated list allowed); default: "
            "$PRISMLB_MODULE_PATH, else the installed module directory"},
    {.name = "log_level", .type = PLB_SET_ENUM,
     .offset = offsetof(struct core_config, log_level), .def = "info",
     .enum_values = log_levels, .env = "EP_LOG_LEVEL",
     .doc = "Least severe level written (dpanic, panic and fatal, extractedprism's, mean "
            "error)"},
    {.name = "log_format", .type = PLB_SET_ENUM,
     .offset = offsetof(struct core_config, log_format), .def = "logfmt",
     .enum_values = log_formats, .doc = "Log line format"},
    {.name = "shutdown_grace", .type = PLB_SET_DURATION,
     .offset = offsetof(struct core_config, shutdown_grace_ms), .def = "10s", .min = 0,
     .max = 3600000, .doc = "Longest wait for each instance to stop on SIGTERM"},
    {.name = "threads", .type = PLB_SET_INT, .offset = offsetof(struct core_config, threads),
     .def = "0", .min = 0, .max = 64,
     .doc = "Worker loops for the data path of the modules that use them (tcp_proxy); "
            "0: one per CPU the process may run on (sched_getaffinity), at most 64; 1: "
            "everything on the one event loop"},
    PLB_SETTINGS_END,
};
/* clang-format on */

static const char *const instance_keys[] = {"module", "name", "gate", NULL};

struct plb_check {
    struct core_errors *err;
    const config_setting_t *grp;
    const char *file;
    const char *path;
    int count;
};

static void check_report(plb_check *chk, const char *setting, const char *fmt, ...)
    PLB_PRINTF(3, 4);

static void
check_report(plb_check *chk, const char *setting, const char *fmt, ...)
{
    char where[512], path[512], msg[1024];
    const config_setting_t *m = setting ? config_setting_get_member(chk->grp, setting) : NULL;
    core_setting_where(m ? m : chk->grp, chk->file, where, sizeof(where));
    if (setting)
        snprintf(path, sizeof(path), "%s.%s", chk->path, setting);
    else
        snprintf(path, sizeof(path), "%s", chk->path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    core_errors_add(chk->err, where, path, "%s", msg);
    chk->count++;
}

static int
valid_instance_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]))
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!islower(ch) && !isdigit(ch) && ch != '-' && ch != '_')
            return 0;
    }
    return 1;
}

struct plb_ctx *
core_instance_find(struct core *c, const char *name)
{
    for (size_t i = 0; i < c->ninst; i++) {
        if (strcmp(c->inst[i]->name, name) == 0)
            return c->inst[i];
    }
    return NULL;
}

static const char *
member_string(const config_setting_t *grp, const char *key, const char *file, const char *path,
              struct core_errors *err, int required)
{
    const config_setting_t *m = config_setting_get_member(grp, key);
    char where[512], p[512];
    if (!m) {
        if (required) {
            core_setting_where(grp, file, where, sizeof(where));
            snprintf(p, sizeof(p), "%s.%s", path, key);
            core_errors_add(err, where, p, "required setting is missing");
        }
        return NULL;
    }
    if (config_setting_type(m) != CONFIG_TYPE_STRING) {
        core_setting_where(m, file, where, sizeof(where));
        snprintf(p, sizeof(p), "%s.%s", path, key);
        core_errors_add(err, where, p, "expected a string");
        return NULL;
    }
    return config_setting_get_string(m);
}

/* --check-config: each setting "kubeconfig" (a path) of an instance names
 * a kubeconfig the daemon will load; load it now (with the instance's
 * "kube_context", if any) so that one it cannot use fails the check. One
 * that does not exist yet is left to run time: deployments write it after
 * checking the config (the demo does). */
static void
check_kubeconfigs(const struct plb_setting *table, const void *config, const config_setting_t *grp,
                  const char *file, const char *path, struct core_errors *err)
{
    const char *kc = NULL, *kctx = NULL;

    for (const struct plb_setting *s = table; s && s->name; s++) {
        const char *const *v = (const char *const *)((const char *)config + s->offset);
        if (s->type == PLB_SET_PATH && strcmp(s->name, "kubeconfig") == 0)
            kc = *v;
        else if (s->type == PLB_SET_STRING && strcmp(s->name, "kube_context") == 0)
            kctx = *v;
    }
    if (!kc || !*kc)
        return;
    struct core_kube_config kcfg;
    char msg[512], where[512], spath[512];
    memset(&kcfg, 0, sizeof(kcfg));
    int rc = core_kube_config_load(&kcfg, kc, kctx && *kctx ? kctx : NULL, msg, sizeof(msg));
    if (rc != 0 && rc != -ENOENT) {
        const config_setting_t *m = config_setting_get_member(grp, "kubeconfig");
        core_setting_where(m ? m : grp, file, where, sizeof(where));
        snprintf(spath, sizeof(spath), "%.480s.kubeconfig", path);
        core_errors_add(err, where, spath, "cannot use this kubeconfig: %s", msg);
    }
    core_kube_config_clear(&kcfg);
}

/* Parse one instance group into a new plb_ctx appended to c->inst. */
static void
parse_instance(struct core *c, const config_setting_t *grp, unsigned idx, struct core_errors *err)
{
    char where[512], path[512];
    const char *file = c->config_file;
    struct plb_ctx *ctx = NULL;

    core_setting_where(grp, file, where, sizeof(where));
    snprintf(path, sizeof(path), "instances.[%u]", idx);
    if (config_setting_type(grp) != CONFIG_TYPE_GROUP) {
        core_errors_add(err, where, path, "expected a group { module = \"...\"; ... }");
        return;
    }
    const char *mod_ref = member_string(grp, "module", file, path, err, 1);
    const char *name = member_string(grp, "name", file, path, err, 0);
    const char *gate = member_string(grp, "gate", file, path, err, 0);
    if (!mod_ref)
        return;

    struct core_module *cm = core_module_load(c, mod_ref, where, path, err);
    if (!cm)
        return;
    if (!name)
        name = cm->mod->name;
    snprintf(path, sizeof(path), "instances.%s", name);
    if (!valid_instance_name(name)) {
        core_errors_add(err, where, path,
                        "instance name must be 1-63 lower-case letters, digits, '-' or '_', "
                        "starting with a letter or digit");
        return;
    }
    if (core_instance_find(c, name)) {
        core_errors_add(err, where, path,
                        "duplicate instance name (give each instance of a module its own "
                        "name)");
        return;
    }

    struct plb_ctx **ni = core_realloc(c->inst, (c->ninst + 1) * sizeof(*ni));
    if (!ni)
        goto oom;
    c->inst = ni;
    ctx = core_malloc(sizeof(*ctx));
    if (!ctx)
        goto oom;
    *ctx = (struct plb_ctx){.core = c, .cm = cm, .log_max = PLB_LOG_DEBUG};
    ctx->name = core_strdup(name);
    ctx->gate_name = gate ? core_strdup(gate) : NULL;
    ctx->config = core_calloc(1, cm->mod->config_size ? cm->mod->config_size : 1);
    if (!ctx->name || (gate && !ctx->gate_name) || !ctx->config)
        goto oom;
    c->inst[c->ninst++] = ctx;

    int n = core_settings_parse(cm->mod->settings, ctx->config, grp, file, path, c->config_dir,
                                instance_keys, err);
    if (n == 0 && cm->mod->check) {
        struct plb_check chk = {.err = err, .grp = grp, .file = file, .path = path};
        cm->mod->check(c->host, &chk, ctx->config, check_report);
    }
    if (n == 0 && c->checking)
        check_kubeconfigs(cm->mod->settings, ctx->config, grp, file, path, err);
    return;
oom:
    core_errors_add(err, where, path, "out of memory");
    if (ctx)
        core_ctx_free_parsed(ctx);
}

/* Links: INSTANCES settings name existing instances with the role; a gate
 * names a gate instance. */
static void
check_links(struct core *c, const config_setting_t *list, struct core_errors *err)
{
    for (size_t i = 0; i < c->ninst; i++) {
        struct plb_ctx *ctx = c->inst[i];
        const config_setting_t *grp = config_setting_get_elem(list, (unsigned)i);
        char where[512], path[512];
        for (const struct plb_setting *s = ctx->cm->mod->settings; s && s->name; s++) {
            if (s->type != PLB_SET_INSTANCES)
                continue;
            const struct plb_strv *v =
                (const struct plb_strv *)((const char *)ctx->config + s->offset);
            const config_setting_t *m = grp ? config_setting_get_member(grp, s->name) : NULL;
            core_setting_where(m ? m : grp, c->config_file, where, sizeof(where));
            snprintf(path, sizeof(path), "instances.%s.%s", ctx->name, s->name);
            for (size_t k = 0; k < v->n; k++) {
                struct plb_ctx *t = core_instance_find(c, v->v[k]);
                if (!t)
                    core_errors_add(err, where, path, "no instance named \"%s\"", v->v[k]);
                else if (s->role && !(t->cm->mod->provides & s->role))
                    core_errors_add(err, where, path,
                                    "instance \"%s\" (module %s) cannot be linked here: it "
                                    "is not %s",
                                    v->v[k], t->cm->mod->name,
                                    (s->role & PLB_ROLE_GATE) ? "a gate" : "an endpoint source");
            }
        }
        if (ctx->gate_name) {
            const config_setting_t *m = grp ? config_setting_get_member(grp, "gate") : NULL;
            core_setting_where(m ? m : grp, c->config_file, where, sizeof(where));
            snprintf(path, sizeof(path), "instances.%s.gate", ctx->name);
            struct plb_ctx *g = core_instance_find(c, ctx->gate_name);
            if (!g)
                core_errors_add(err, where, path, "no instance named \"%s\"", ctx->gate_name);
            else if (!(g->cm->mod->provides & PLB_ROLE_GATE))
                core_errors_add(err, where, path, "instance \"%s\" (module %s) is not a gate",
                                ctx->gate_name, g->cm->mod->name);
            else if (g == ctx)
                core_errors_add(err, where, path, "an instance cannot gate itself");
            else if (!ctx->cm->mod->gate_open || !ctx->cm->mod->gate_close)
                core_errors_add(err, where, path,
                                "module %s has no write loop to gate (no gate_open and "
                                "gate_close hooks)",
                                ctx->cm->mod->name);
            else
                ctx->gate = g;
        }
    }
}

/* A setting's environment variable (plb_setting.env) overrides it in one
 * instance: with two or more instances of its module, set, it is refused,
 * named, with where the second instance is. */
static void
check_env(struct core *c, const config_setting_t *list, struct core_errors *err)
{
    for (size_t i = 0; i < c->ninst; i++) {
        const struct plb_module *mod = c->inst[i]->cm->mod;
        size_t n = 0, first = i, second = i;
        for (size_t k = 0; k < c->ninst; k++) {
            if (c->inst[k]->cm->mod != mod)
                continue;
            if (n == 0)
                first = k;
            else if (n == 1)
                second = k;
            n++;
        }
        if (first != i || n < 2)
            continue; /* once per module, with two instances or more */
        for (const struct plb_setting *s = mod->settings; s && s->name; s++) {
            const char *v = s->env ? getenv(s->env) : NULL;
            if (!v || !*v)
                continue;
            char where[512], path[512];
            core_setting_where(config_setting_get_elem(list, (unsigned)second), c->config_file,
                               where, sizeof(where));
            snprintf(path, sizeof(path), "instances.%s.%s", c->inst[second]->name, s->name);
            core_errors_add(err, where, path,
                            "environment variable %s is ambiguous: %zu instances of module %s "
                            "(\"%s\", \"%s\"%s) would each take it; unset it, or keep one "
                            "instance of the module",
                            s->env, n, mod->name, c->inst[first]->name, c->inst[second]->name,
                            n > 2 ? ", ..." : "");
        }
    }
}

/*
 * Included files, before libconfig sees them. libconfig 1.5 opens an
 * @include with fopen and hands it to its flex scanner: a FIFO blocks that
 * open for ever, and a directory or a file whose read fails
 * (/proc/self/mem) makes the scanner exit(2) with "input in flex scanner
 * failed" and no location. So every file the config would include is read
 * here first, named as libconfig names it (the include directory, "/",
 * the quoted path, for nested includes too), and must be a readable
 * regular file; otherwise the error names the including FILE:LINE. A file
 * that does not exist is left to libconfig's own error. The directive is
 * found as libconfig's scanner finds it: at the start of a line, after
 * blanks, "@include", blanks, then a string in double quotes (\\ and \"
 * escapes).
 */
static int precheck_file(const char *path, const char *dir, int depth, const char *from,
                         struct core_errors *err);

static int
precheck_text(const char *text, const char *file, const char *dir, int depth,
              struct core_errors *err)
{
    int line = 1, bad = 0;

    for (const char *p = text; *p; line++) {
        const char *eol = strchr(p, '\n');
        const char *q = p + strspn(p, " \t");
        if (strncmp(q, "@include", 8) == 0 && (q[8] == ' ' || q[8] == '\t')) {
            char name[4096], where[4200], full[8300];
            size_t n = 0;
            q += 8;
            q += strspn(q, " \t");
            if (*q == '"') {
                for (q++; *q && *q != '"' && *q != '\n' && n + 1 < sizeof(name); q++) {
                    if (*q == '\\' && (q[1] == '"' || q[1] == '\\'))
                        q++;
                    name[n++] = *q;
                }
                name[n] = '\0';
                if (*q == '"') {
                    snprintf(where, sizeof(where), "%s:%d", file, line);
                    snprintf(full, sizeof(full), "%s/%s", dir, name);
                    if (precheck_file(full, dir, depth + 1, where, err) < 0)
                        bad = -1;
                }
            }
        }
        if (!eol)
            break;
        p = eol + 1;
    }
    return bad;
}

/* Read path (from: the including FILE:LINE, or NULL for the config file
 * itself) and check what it includes. 0, or -1 with the error added. */
static int
precheck_file(const char *path, const char *dir, int depth, const char *from,
              struct core_errors *err)
{
    char reason[160];
    char *text = NULL;
    size_t len = 0;
    int rc;

    if (depth > INCLUDE_MAX_DEPTH)
        return 0; /* libconfig reports the depth */
    rc = core_file_read(path, CONFIG_MAX_BYTES, &text, &len, reason, sizeof(reason));
    if (rc == -ENOENT && from)
        return 0;
    if (rc < 0) {
        if (from)
            core_errors_add(err, from, NULL, "cannot include \"%s\": %s", path, reason);
        else
            core_errors_add(err, path, NULL, "cannot read the config file: %s", reason);
        return -1;
    }
    if (strlen(text) != len) {
        core_errors_add(err, from ? from : path, NULL, "%s%s%s: contains a NUL byte",
                        from ? "cannot include \"" : "", path, from ? "\"" : "");
        core_free(text);
        return -1;
    }
    rc = precheck_text(text, path, dir, depth, err);
    core_free(text);
    return rc;
}

static char *
dir_of(const char *file)
{
    const char *slash = strrchr(file, '/');
    if (!slash)
        return core_strdup(".");
    if (slash == file)
        return core_strdup("/");
    return core_strndup(file, (size_t)(slash - file));
}

int
core_config_load(struct core *c, const char *file, struct core_errors *err)
{
    config_t cf;
    size_t before = err->n;

    config_init(&cf);
    c->config_file = core_strdup(file);
    c->config_dir = dir_of(file);
    if (!c->config_file || !c->config_dir) {
        core_errors_add(err, file, NULL, "out of memory");
        goto out;
    }
    config_set_include_dir(&cf, c->config_dir);
    if (precheck_file(file, c->config_dir, 0, NULL, err) < 0)
        goto out;
    if (config_read_file(&cf, file) != CONFIG_TRUE) {
        if (config_error_type(&cf) == CONFIG_ERR_FILE_IO) {
            core_errors_add(err, file, NULL, "cannot read the config file: %s",
                            config_error_text(&cf));
        } else {
            char where[512];
            snprintf(where, sizeof(where), "%s:%d",
                     config_error_file(&cf) ? config_error_file(&cf) : file,
                     config_error_line(&cf));
            core_errors_add(err, where, NULL, "syntax error: %s", config_error_text(&cf));
        }
        goto out;
    }

    static const char *const top_keys[] = {"instances", NULL};
    const config_setting_t *root = config_root_setting(&cf);
    core_settings_parse(core_settings_table, &c->cfg, root, file, "", c->config_dir, top_keys, err);
    if (c->cfg.log_level > PLB_LOG_DEBUG)
        c->cfg.log_level = PLB_LOG_ERROR; /* dpanic, panic, fatal */

    const config_setting_t *list = config_setting_get_member(root, "instances");
    if (!list) {
        core_errors_add(err, file, "instances",
                        "required setting is missing: a list of module instances");
        goto out;
    }
    if (config_setting_type(list) != CONFIG_TYPE_LIST) {
        char where[512];
        core_setting_where(list, file, where, sizeof(where));
        core_errors_add(err, where, "instances", "expected a list ( { ... }, { ... } )");
        goto out;
    }
    size_t ok_before = err->n;
    for (int i = 0; i < config_setting_length(list); i++)
        parse_instance(c, config_setting_get_elem(list, (unsigned)i), (unsigned)i, err);
    /* Links only mean something once every instance parsed. */
    if (err->n == ok_before && (size_t)config_setting_length(list) == c->ninst) {
        check_links(c, list, err);
        check_env(c, list, err);
        core_ports_check(c, list, err);
    }
    if (c->ninst == 0 && err->n == before) {
        char where[512];
        core_setting_where(list, file, where, sizeof(where));
        core_errors_add(err, where, "instances", "no instances: nothing to run");
    }
out:
    config_destroy(&cf);
    return (int)(err->n - before);
}

void
core_config_free(struct core *c)
{
    for (size_t i = 0; i < c->ninst; i++)
        if (c->inst[i]) /* NULL: taken over by the running config (reload.c) */
            core_ctx_free_parsed(c->inst[i]);
    core_free(c->inst);
    c->inst = NULL;
    c->ninst = 0;
    core_settings_free(core_settings_table, &c->cfg);
    core_modules_unload(c);
    core_free(c->config_file);
    core_free(c->config_dir);
    c->config_file = c->config_dir = NULL;
}

void
core_ctx_free_parsed(struct plb_ctx *ctx)
{
    core_settings_free(ctx->cm->mod->settings, ctx->config);
    core_free(ctx->config);
    core_free(ctx->name);
    core_free(ctx->gate_name);
    core_free(ctx);
}
