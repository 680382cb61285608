/*
 * prismlb: the daemon's entry point. Parses the command line, loads the
 * config and its modules, runs every instance on one event loop, reloads
 * the config on SIGHUP (reload.c) and stops them in order on SIGTERM or
 * SIGINT.
 *
 * Exit status: 0 clean stop; 1 configuration or start-up error, or a
 * second signal during shutdown; 2 usage error.
 */
#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "build-config.h"
#include "core.h"
#include "host.h"
#include "httpc.h"
#include "instance.h"
#include "links.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "reactor.h"
#include "reload.h"
#include "status_cli.h"
#include "worker.h"

static void
usage(FILE *f)
{
    fprintf(
        f,
        "usage: prismlb --config FILE [options]\n"
        "       prismlb --config FILE --check-config\n"
        "       prismlb --settings-doc MODULE\n"
        "       " CORE_STATUS_SYNOPSIS "\n"
        "\n"
        "  -c, --config FILE       the libconfig file naming and wiring module instances\n"
        "  -t, --check-config      load the file and every module, validate every\n"
        "                          setting, print OK or each error as\n"
        "                          FILE:LINE: setting: message; exit 0 or 1\n"
        "  -l, --log-level LEVEL   debug, info, warn or error; dpanic, panic, fatal mean error\n"
        "  -f, --log-format FMT    logfmt or json (overrides the file)\n"
        "      --settings-doc MOD  print the settings reference of a module (name or\n"
        "                          .so path) as a Markdown table, or of the core\n"
        "                          with \"core\"\n"
        "  -V, --version           print version, revision and module ABI\n"
        "  -h, --help              this text\n"
        "\n"
        "Modules are looked up in the config's modules_dir, else $PRISMLB_MODULE_PATH,\n"
        "else %s.\n",
        PRISMLB_MODULE_DIR);
}

static void
on_stopped(struct core *c)
{
    event_base_loopexit(c->base, NULL);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct core *c = arg;
    if (c->stopping) {
        CORE_WARN("second signal %d: exiting at once", (int)sig);
        _exit(1);
    }
    CORE_INFO("signal %d: stopping instances", (int)sig);
    core_notify_stopping();
    core_instances_stop(c, on_stopped);
}

static void
on_hup(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    core_reload(arg);
}

/* The signals the daemon handles, each in c->sigs at its index. */
static const struct {
    int sig;
    event_callback_fn cb;
} signals[] = {{SIGTERM, on_signal}, {SIGINT, on_signal}, {SIGHUP, on_hup}};
#define NSIGNALS (sizeof(signals) / sizeof(signals[0]))
_Static_assert(NSIGNALS == sizeof(((struct core *)0)->sigs) / sizeof(struct event *),
               "one event a signal");

/* Watch every signal of the table on c's loop. 0 or -ENOMEM. */
static int
signals_add(struct core *c)
{
    for (size_t i = 0; i < NSIGNALS; i++) {
        c->sigs[i] = evsignal_new(c->base, signals[i].sig, signals[i].cb, c);
        if (!c->sigs[i] || evsignal_add(c->sigs[i], NULL) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int
settings_doc(const char *ref)
{
    struct core c;
    struct core_errors err = {0};
    memset(&c, 0, sizeof(c));
    c.host = &core_host;
    if (strcmp(ref, "core") == 0) {
        char *doc = core_settings_doc(core_settings_table);
        if (!doc)
            return 1;
        fputs(doc, stdout);
        core_free(doc);
        return 0;
    }
    struct core_module *cm = core_module_load(&c, ref, "--settings-doc", NULL, &err);
    if (!cm) {
        core_errors_print(&err, stderr);
        core_errors_clear(&err);
        return 1;
    }
    char *doc = core_settings_doc(cm->mod->settings);
    int rc = doc ? 0 : 1;
    if (doc)
        fputs(doc, stdout);
    core_free(doc);
    core_modules_unload(&c);
    return rc;
}

static int
run(struct core *c)
{
    int rc = 1;
    c->base = core_event_base_new();
    c->links = core_links_new(c);
    c->metrics = core_metrics_new();
    if (!c->base || !c->links || !c->metrics) {
        CORE_ERR("out of memory at start-up");
        goto out;
    }
    c->httpc = core_httpc_new(c->base);
    if (!c->httpc || signals_add(c) < 0) {
        CORE_ERR("cannot set up the event loop");
        goto out;
    }
    unsigned nthreads = c->cfg.threads > 0 ? (unsigned)c->cfg.threads : core_workers_default();
    if (nthreads > 1) {
        int err = 0;
        c->workers = core_workers_start(c->base, nthreads, &err);
        if (!c->workers) {
            CORE_ERR("cannot start %u worker loops: %s", nthreads, strerror(-err));
            goto out;
        }
    }
    if (core_instances_create(c) < 0)
        goto out;
    CORE_INFO("prismlb %s (%s) running %zu instance(s) from %s, %u thread(s)", PRISMLB_VERSION,
              PRISMLB_REVISION, c->ninst, c->config_file, nthreads);
    if (core_instances_start(c) < 0 || core_notify_ready(c->base, (unsigned)c->ninst) < 0) {
        core_instances_stop(c, on_stopped);
        event_base_dispatch(c->base);
        goto destroy;
    }
    if (event_base_dispatch(c->base) < 0) {
        CORE_ERR("event loop failed");
        goto destroy;
    }
    rc = 0;
    CORE_INFO("stopped");
destroy:
    core_reload_free(c);
    /* No worker runs from here on; an instance that did not stop within
     * its grace frees what it has on their loops in its destroy. */
    core_workers_join(c->workers);
    core_instances_destroy(c);
    core_workers_stop(c->workers);
    c->workers = NULL;
out:
    core_notify_stop();
    core_workers_stop(c->workers);
    for (size_t i = 0; i < NSIGNALS; i++)
        core_event_clear(&c->sigs[i]);
    core_httpc_free(c->httpc);
    core_links_free(c->links);
    core_metrics_free(c->metrics);
    if (c->base)
        event_base_free(c->base);
    return rc;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", no_argument, NULL, 't'},
        {"log-level", required_argument, NULL, 'l'},
        {"log-format", required_argument, NULL, 'f'},
        {"settings-doc", required_argument, NULL, 'D'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config = NULL, *level_arg = NULL, *format_arg = NULL, *doc = NULL;
    int check = 0, o;
    enum plb_log_level level = PLB_LOG_INFO;
    enum core_log_format format = CORE_LOG_LOGFMT;

    if (core_alloc_install_library_hooks() < 0) {
        fprintf(stderr, "prismlb: cannot initialise libcurl\n");
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "status") == 0) {
        int rc = core_status_cli(argc - 1, argv + 1);
        curl_global_cleanup();
        return rc;
    }
    while ((o = getopt_long(argc, argv, "c:tl:f:Vh", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            config = optarg;
            break;
        case 't':
            check = 1;
            break;
        case 'l':
            level_arg = optarg;
            if (core_log_level_parse(optarg, &level) < 0) {
                fprintf(stderr, "prismlb: --log-level: unknown level \"%s\"\n", optarg);
                return 2;
            }
            break;
        case 'f':
            format_arg = optarg;
            if (core_log_format_parse(optarg, &format) < 0) {
                fprintf(stderr, "prismlb: --log-format: must be logfmt or json\n");
                return 2;
            }
            break;
        case 'D':
            doc = optarg;
            break;
        case 'V':
            printf("prismlb %s (revision %s, module ABI %d.%d)\n", PRISMLB_VERSION,
                   PRISMLB_REVISION, PLB_ABI_MAJOR, PLB_ABI_MINOR);
            curl_global_cleanup();
            return 0;
        case 'h':
            usage(stdout);
            curl_global_cleanup();
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "prismlb: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    core_log_setup(level, format, stderr);
    if (doc) {
        int rc = settings_doc(doc);
        curl_global_cleanup();
        return rc;
    }
    if (!config) {
        fprintf(stderr, "prismlb: --config FILE is required\n");
        usage(stderr);
        return 2;
    }

    struct core c;
    struct core_errors err = {0};
    memset(&c, 0, sizeof(c));
    c.host = &core_host;
    c.cli_level = level_arg ? (int)level : -1;
    c.cli_format = format_arg ? (int)format : -1;
    c.checking = check;
    signal(SIGPIPE, SIG_IGN);

    int nerr = core_config_load(&c, config, &err);
    if (!level_arg)
        level = (enum plb_log_level)c.cfg.log_level;
    if (!format_arg)
        format = (enum core_log_format)c.cfg.log_format;
    core_log_setup(level, format, stderr);

    int rc;
    if (nerr > 0) {
        core_errors_print(&err, check ? stdout : stderr);
        if (!check)
            fprintf(stderr, "prismlb: %d configuration error(s); not starting\n", nerr);
        rc = 1;
    } else if (check) {
        printf("OK\n");
        rc = 0;
    } else {
        rc = run(&c);
    }
    core_errors_clear(&err);
    core_config_free(&c);
    curl_global_cleanup();
    /* For allocation-failure sweeps: how many allocations one run makes. */
    if (getenv("PRISMLB_ALLOC_STATS"))
        fprintf(stderr, "allocations: %lu\n", core_alloc_count());
    return rc;
}
