/*
 * procstat: the process metrics of the Prometheus client libraries
 * (process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds, process_max_fds, process_cpu_seconds_total,
 * process_start_time_seconds) and prismlb_build_info, kept in the daemon's
 * registry so that one render carries them with every other family.
 *
 * Values are read only when a scrape asks: getrusage and getrlimit, plus
 * small procfs files that the kernel fills from memory (they do not stall
 * like disk reads do). The start time is read once.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <prismlb/module_util.h>

#include "mm.h"

/* The registry's families are daemon-wide and so is this process: every
 * instance updates the same series. The CPU counter can only be added to,
 * so the value already published is remembered here, once per process. */
static double cpu_published;
static double start_time_s; /* 0 until read */

/* Read a small procfs file into buf (NUL-terminated). Bytes read or -errno. */
static ssize_t
read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    while (n + 1 < len) {
        ssize_t r = read(fd, buf + n, len - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return (ssize_t)n;
}

/* Resident and virtual size from /proc/self/statm (in pages). 0 or -errno. */
static int
read_memory(double *rss, double *vms)
{
    char buf[256];
    ssize_t n = read_small("/proc/self/statm", buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    unsigned long long size, resident;
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return -EINVAL;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return -EINVAL;
    *vms = (double)size * (double)page;
    *rss = (double)resident * (double)page;
    return 0;
}

/* Entries of /proc/self/fd, without the one this listing itself opened. */
static int
count_fds(double *out)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -errno;
    int own = dirfd(d);
    long n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (atoi(de->d_name) == own)
            continue;
        n++;
    }
    closedir(d);
    *out = (double)n;
    return 0;
}

/* Start of this process, seconds since the epoch: its start in clock ticks
 * after boot (/proc/self/stat field 22) against the time since boot
 * (/proc/uptime) and the wall clock now. 0 or -errno. */
static int
read_start_time(const struct plb_host *host, plb_ctx *ctx, double *out)
{
    char stat[1024], up[128];
    ssize_t n = read_small("/proc/self/stat", stat, sizeof(stat));
    if (n < 0)
        return (int)n;
    /* The command name (field 2) may hold spaces and parentheses: fields
     * are counted after its last ')'. */
    char *p = strrchr(stat, ')');
    if (!p)
        return -EINVAL;
    p++;
    unsigned long long ticks = 0;
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (!*p)
            return -EINVAL;
        if (field == 22) {
            char *end;
            errno = 0;
            ticks = strtoull(p, &end, 10);
            if (end == p || errno)
                return -EINVAL;
            break;
        }
        p += strcspn(p, " ");
    }
    n = read_small("/proc/uptime", up, sizeof(up));
    if (n < 0)
        return (int)n;
    double uptime;
    if (sscanf(up, "%lf", &uptime) != 1)
        return -EINVAL;
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        return -EINVAL;
    double now = (double)host->loop->wall_ms(ctx) / 1000.0;
    *out = now - uptime + (double)ticks / (double)hz;
    return 0;
}

/* The families without labels, by enum mm_proc_family. */
static const struct proc_family {
    enum plb_metric_type type;
    const char *name, *help;
} proc_families[MM_PROC_FAMILIES] = {
    [MM_PROC_RSS] = {PLB_METRIC_GAUGE, "process_resident_memory_bytes",
                     "Resident memory size in bytes."},
    [MM_PROC_VMS] = {PLB_METRIC_GAUGE, "process_virtual_memory_bytes",
                     "Virtual memory size in bytes."},
    [MM_PROC_OPEN_FDS] = {PLB_METRIC_GAUGE, "process_open_fds", "Number of open file descriptors."},
    [MM_PROC_MAX_FDS] = {PLB_METRIC_GAUGE, "process_max_fds",
                         "Maximum number of open file descriptors."},
    [MM_PROC_CPU] = {PLB_METRIC_COUNTER, "process_cpu_seconds_total",
                     "Total user and system CPU time spent in seconds."},
    [MM_PROC_START_TIME] = {PLB_METRIC_GAUGE, "process_start_time_seconds",
                            "Start time of the process since unix epoch in seconds."},
};

static void
debug_failure(const struct plb_host *host, plb_ctx *ctx, const char *what, int err)
{
    if (host->log->enabled(ctx, PLB_LOG_DEBUG))
        PLB_LOG(host, ctx, PLB_LOG_DEBUG, PLB_KV("metric", what, "error", strerror(-err)),
                "cannot read a process metric");
}

/* Set family f's gauge, logging (at debug level) when the registry refuses. */
static void
set_gauge(const struct plb_host *host, plb_ctx *ctx, const struct mm_proc *p, enum mm_proc_family f,
          double v)
{
    int rc = host->metrics->set(p->family[f], NULL, v);
    if (rc < 0)
        debug_failure(host, ctx, proc_families[f].name, rc);
}

int
mm_proc_register(const struct plb_host *host, plb_ctx *ctx, struct mm_proc *p)
{
    static const char *const build_labels[] = {"version", "revision", "abi", NULL};
    /* The process's families are the daemon's, not this instance's. */
    plb_metric *(*reg)(plb_ctx *, enum plb_metric_type, const char *, const char *,
                       const char *const *, const double *, size_t) =
        PLB_HAS(host->metrics, new_shared) && host->metrics->new_shared ? host->metrics->new_shared
                                                                        : host->metrics->new_metric;
    for (size_t i = 0; i < MM_PROC_FAMILIES; i++) {
        const struct proc_family *f = &proc_families[i];
        if (!(p->family[i] = reg(ctx, f->type, f->name, f->help, NULL, NULL, 0)))
            return -ENOMEM; /* the host logged which one and why */
    }
    p->build_info =
        reg(ctx, PLB_METRIC_GAUGE, "prismlb_build_info",
            "A metric with a constant '1' value labeled by the version, git revision and module "
            "ABI of prismlb.",
            build_labels, NULL, 0);
    if (!p->build_info)
        return -ENOMEM;

    char abi[32];
    snprintf(abi, sizeof(abi), "%u.%u", (unsigned)host->abi_major, (unsigned)host->abi_minor);
    const char *values[] = {host->links->version(), host->links->revision(), abi};
    int rc = host->metrics->set(p->build_info, values, 1);
    if (rc < 0)
        return rc;
    /* Create every series now, so that the first scrape already lists them
     * even if a read fails then. */
    rc = host->metrics->add(p->family[MM_PROC_CPU], NULL, 0);
    if (rc < 0)
        return rc;
    mm_proc_update(host, ctx, p);
    return 0;
}

void
mm_proc_update(const struct plb_host *host, plb_ctx *ctx, const struct mm_proc *p)
{
    double rss = 0, vms = 0, fds = 0;
    int rc = read_memory(&rss, &vms);
    if (rc == 0) {
        set_gauge(host, ctx, p, MM_PROC_RSS, rss);
        set_gauge(host, ctx, p, MM_PROC_VMS, vms);
    } else {
        debug_failure(host, ctx, "memory", rc);
    }

    rc = count_fds(&fds);
    if (rc == 0)
        set_gauge(host, ctx, p, MM_PROC_OPEN_FDS, fds);
    else
        debug_failure(host, ctx, proc_families[MM_PROC_OPEN_FDS].name, rc);

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        set_gauge(host, ctx, p, MM_PROC_MAX_FDS, (double)rl.rlim_cur);
    else
        debug_failure(host, ctx, proc_families[MM_PROC_MAX_FDS].name, -errno);

    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
        if (cpu > cpu_published) {
            rc = host->metrics->add(p->family[MM_PROC_CPU], NULL, cpu - cpu_published);
            if (rc == 0)
                cpu_published = cpu;
            else
                debug_failure(host, ctx, proc_families[MM_PROC_CPU].name, rc);
        }
    } else {
        debug_failure(host, ctx, proc_families[MM_PROC_CPU].name, -errno);
    }

    if (start_time_s == 0) {
        double st = 0;
        rc = read_start_time(host, ctx, &st);
        if (rc == 0)
            start_time_s = st;
        else
            debug_failure(host, ctx, proc_families[MM_PROC_START_TIME].name, rc);
    }
    if (start_time_s != 0)
        set_gauge(host, ctx, p, MM_PROC_START_TIME, start_time_s);
}
