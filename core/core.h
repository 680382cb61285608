/*
 * core: the daemon's one state object and its instances.
 *
 * struct core owns the event base, the HTTP client, the metrics registry,
 * the links between instances and the instances themselves, in config
 * order. Modules see an instance only as the opaque plb_ctx.
 */
#ifndef PRISMLB_CORE_H
#define PRISMLB_CORE_H

#include <stdint.h>

#include "httpc.h"
#include "prismlb/module.h"
#include "settings.h"

struct event_base;
struct event;
struct core;
struct core_links;

/* A loaded module file, shared by every instance of it. The daemon reads
 * the module's descriptor and settings table through copies in its own
 * layout (fields the module's header lacked are zero), so nothing else in
 * the core looks at the module's strides. */
struct core_module {
    char *path;                   /* resolved file path */
    void *dl;                     /* dlopen handle */
    const struct plb_module *mod; /* &desc */
    struct plb_module desc;       /* the module's descriptor, normalized */
    struct plb_setting *settings; /* its settings table, normalized (desc.settings) */
    unsigned refs;
    struct core_module *next;
};

enum core_inst_state {
    CORE_INST_CREATED = 0, /* create ran */
    CORE_INST_STARTED,     /* start succeeded */
    CORE_INST_STOPPING,    /* stop called, done pending */
    CORE_INST_STOPPED,     /* stop completed (or never started) */
};

/* One instance: the module-facing plb_ctx. */
/* An asynchronous completion (done.c): fn(arg) once, when fired. */
struct plb_done {
    void (*fn)(void *arg);
    void *arg;
    int embedded; /* part of its owner: firing frees nothing */
};

struct plb_ctx {
    struct core *core;
    char *name;
    const char *where; /* FILE:LINE of its config group */
    struct core_module *cm;
    void *config; /* config_size bytes, settings stored */
    void *state;  /* the module's */
    enum core_inst_state st;
    int created;
    char *gate_name;              /* the gate instance it follows, or NULL */
    struct plb_ctx *gate;         /* resolved */
    int gate_open;                /* for gate instances: current state */
    int gated_active;             /* for gated instances: write loop running */
    struct core_http_fence fence; /* gated instances: their writes (gates.c) */
    plb_done *stop_done;          /* handed to stop(), until it fires */
    plb_done stop_slot;           /* what stop_done points to: a stop needs no allocation */
    int log_max;                  /* its own log threshold (log_set_level) */
};

/* The daemon-wide configuration (top-level settings). */
struct core_config {
    char *modules_dir;
    int log_level;  /* enum plb_log_level */
    int log_format; /* enum core_log_format */
    int64_t shutdown_grace_ms;
    int64_t threads; /* 0: core_workers_default() */
};

struct core {
    struct event_base *base;
    struct core_httpc *httpc;
    struct core_metrics *metrics;
    struct core_links *links;
    struct core_workers *workers; /* NULL with threads = 1 */
    const struct plb_host *host;

    int checking;      /* --check-config: also load each kubeconfig named */
    char *config_file; /* as given */
    char *config_dir;  /* its directory, for relative paths */
    struct core_config cfg;
    struct core_module *modules; /* loaded module files */
    struct plb_ctx **inst;       /* in config order */
    size_t ninst;

    /* shutdown */
    int stopping;
    size_t stop_next;         /* index+1 of the next instance to stop */
    struct event *stop_timer; /* grace of the instance being stopped */
    struct event *sigs[3];    /* SIGTERM, SIGINT, SIGHUP: main.c's signal table */
    int exit_code;

    /* reload (SIGHUP) */
    struct core_reload *reload; /* being applied, or NULL */
    int cli_level, cli_format;  /* given on the command line, or -1 */
};

/* The daemon's top-level settings table. */
extern const struct plb_setting core_settings_table[];

/* Resolve a module reference (a name, or a path with '/' or ending in
 * ".so") to a file, dlopen it and check its descriptor. Reuses a file
 * loaded before. Errors go to err at `where`/`path`. NULL on error. */
struct core_module *core_module_load(struct core *c, const char *ref, const char *where,
                                     const char *path, struct core_errors *err);
void core_modules_unload(struct core *c);

/* Read the config file, load modules, parse every instance's settings and
 * check links. Fills c->cfg and c->inst (instances not yet created). Returns
 * the number of errors recorded in err. */
int core_config_load(struct core *c, const char *file, struct core_errors *err);
/* Free instances (their configs; NULL entries are skipped), settings and
 * modules. Instances must be destroyed. */
void core_config_free(struct core *c);
/* Free ctx (owned), an instance parsed but not created or already
 * destroyed: its config (the settings it holds too), name and gate name.
 * A config still NULL or all zeroes is fine. */
void core_ctx_free_parsed(struct plb_ctx *ctx);

/* Find an instance by name, or NULL. */
struct plb_ctx *core_instance_find(struct core *c, const char *name);

#endif
