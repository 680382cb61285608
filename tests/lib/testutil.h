/*
 * testutil: process and file helpers shared by the Check suites.
 *
 * Every process a test starts is tracked by PID and stopped by PID; every
 * wait is bounded by a timeout in milliseconds.
 */
#ifndef PRISMLB_TESTUTIL_H
#define PRISMLB_TESTUTIL_H

#include <check.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

struct tu_proc {
    pid_t pid;
    int status; /* wait status once reaped */
    int reaped;
};

/* Path of a built file: $PRISMLB_BUILD_ROOT/rel. Returns a static buffer. */
const char *tu_build_path(const char *rel);
/* Path of a source file: $PRISMLB_SOURCE_ROOT/rel. Returns a static buffer. */
const char *tu_source_path(const char *rel);

/* "PRISMLB_MODULE_PATH=" and the build directories dirs (relative to the
 * build root, NULL-terminated) joined by ':'. A static buffer, overwritten
 * by the next call (not tu_build_path's: both may be used at once). */
const char *tu_module_path_env(const char *const dirs[]);

/* A fresh private directory under $TMPDIR (or /tmp) named
 * "prismlb-test-" and six random characters (new, caller frees the string;
 * tu_rmrf removes it). NULL on failure. */
char *tu_mkdtemp(void);
/* The same with a name prefix of the caller's (a fake's own prefix keeps
 * its directory apart from the tests'). */
char *tu_mkdtemp_prefix(const char *prefix);
int tu_rmrf(const char *path);
/* Remove *dir (from tu_mkdtemp) and all under it, free the string and set
 * *dir to NULL; nothing when *dir is NULL. */
void tu_rmdtemp(char **dir);

/* Start argv[0] (PATH is searched) with extra "K=V" environment entries
 * (envp_extra may be NULL), stdout and stderr appended to log_path (or
 * inherited when NULL). Returns 0 or -errno. */
int tu_spawn(struct tu_proc *p, char *const argv[], char *const envp_extra[], const char *log_path);
/* Send sig to p->pid and wait up to timeout_ms for it to exit; SIGKILL after
 * that. Returns the wait status, or -1 if it had already been reaped. */
int tu_stop(struct tu_proc *p, int sig, int timeout_ms);
/* Non-blocking: 1 if the process has exited (status stored), 0 if running. */
int tu_exited(struct tu_proc *p);
/* Wait up to timeout_ms for exit. Returns 1 if exited, 0 on timeout. */
int tu_wait_exit(struct tu_proc *p, int timeout_ms);

/* Run argv to completion within timeout_ms, capturing stdout and stderr
 * together into *out (new, NUL-terminated; may be NULL to discard).
 * Returns the exit code (0-255), 128+signal if killed, or -1 on timeout or
 * spawn failure. */
int tu_run(char *const argv[], char *const envp_extra[], char **out, int timeout_ms);

/* `prismlb --check-config --config path` from the build tree, with the
 * environment entry module_path_env ("PRISMLB_MODULE_PATH=...", or NULL):
 * its exit status, *out its output (new). */
int tu_check_config(const char *path, const char *module_path_env, char **out);

/* Write text to dir/name and run tu_check_config on it: its exit status,
 * *out its output (new). Fails the test when the file cannot be written. */
int tu_check_config_text(const char *dir, const char *name, const char *text,
                         const char *module_path_env, char **out);

/* The same with the text made from fmt and its arguments (printf). */
int tu_check_config_fmt(const char *dir, const char *name, const char *module_path_env, char **out,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Fail the test unless out holds "dir/name:line: rest" (the FILE:LINE
 * form of --check-config's errors). */
void tu_assert_config_error(const char *out, const char *dir, const char *name, int line,
                            const char *rest);

/* Fail the test unless rc is 1 (--check-config refused the file) and out
 * holds "dir/name:line: " and the text of fmt; then free out (steals
 * it). */
void tu_assert_config_refused(int rc, char *out, const char *dir, const char *name, int line,
                              const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* A Check fixture (tcase_add_checked_fixture(tc, tu_dir_setup,
 * tu_dir_teardown)): tu_dir is a fresh private directory (tu_mkdtemp)
 * during each test, removed after it. */
extern char *tu_dir;
void tu_dir_setup(void);
void tu_dir_teardown(void);

/* 1 when the file at path holds needle (a daemon's log line, say). */
int tu_file_has(const char *path, const char *needle);
/* How many times needle occurs in the file at path, the occurrences not
 * overlapping (0 when it cannot be read). */
int tu_file_count(const char *path, const char *needle);

/* Read a whole file (new, NUL-terminated). NULL on error. */
char *tu_read_file(const char *path, size_t *len);
int tu_write_file(const char *path, const char *data);

/* Poll path until it contains a line starting with prefix, within
 * timeout_ms; copy the rest of that line (after the prefix) into buf.
 * Returns 0 or -1 on timeout. */
int tu_wait_line(const char *path, const char *prefix, char *buf, size_t len, int timeout_ms);

/* A TCP port of 127.0.0.1 that was free a moment ago: bound to port 0,
 * read back and closed. Fails the test when none can be had. */
int tu_free_port(void);

/* A kubeconfig for the fake API server (tests/fakes/kube): one cluster,
 * user and context, all named "fake", the context's namespace "default". */
struct tu_kubeconfig {
    const char *server;     /* URL, a path prefix included (borrowed) */
    const char *certdir;    /* where ca.crt, client.crt and client.key are;
                             * NULL: the bare names, which clients resolve
                             * beside the kubeconfig */
    int no_client_cert;     /* no client-certificate and client-key */
    const char *token_file; /* the user's tokenFile, or NULL for none */
};

/* Write kc (borrowed) to path. 0 or -errno. */
int tu_write_kubeconfig(const char *path, const struct tu_kubeconfig *kc);

/* Run kubectl (.tools/bin/kubectl, from tests/setup.sh) with --kubeconfig
 * kubeconfig and --cache-dir cachedir, then args (NULL-terminated, at
 * most 32), envp_extra (may be NULL) added to its environment, within
 * 60 s: its exit code as tu_run's, *out its output (new; out may be NULL
 * to discard it). tu_kubectlv takes the args as a va_list of strings
 * ending in NULL. */
int tu_kubectl(const char *kubeconfig, const char *cachedir, char *const envp_extra[], char **out,
               const char *const *args);
int tu_kubectlv(const char *kubeconfig, const char *cachedir, char *const envp_extra[], char **out,
                va_list ap);

/* Wait until a TCP connect to host:port succeeds. 0 or -1 on timeout. */
int tu_wait_port(const char *host, int port, int timeout_ms);

/* The value of the sample whose name and labels are series
 * ("name{a=\"b\"}", exactly as the exposition writes them) in the
 * Prometheus text (borrowed; NULL has none) into *v. 0, or -1 when there
 * is no such sample. */
int tu_metric_value(const char *text, const char *series, double *v);

/* GET http://127.0.0.1:port/metrics with curl within 10 s: the text (new),
 * or NULL while nothing answers there with a 2xx. */
char *tu_scrape(int port);

/* A suite's main: run every test of s (its runner freed here), and
 * EXIT_SUCCESS when none failed, else EXIT_FAILURE. */
int tu_run_suite(Suite *s);
/* The same for the one test case named tcase of s (NULL: all of them), so
 * that one executable serves as several meson tests. */
int tu_run_tcase(Suite *s, const char *tcase);

/* From /proc/PID/stat: the process's user and system CPU time and its
 * start time since boot, in clock ticks (any pointer may be NULL). 0, or
 * -1 when there is no such process. */
int tu_proc_stat(pid_t pid, unsigned long long *utime, unsigned long long *stime,
                 unsigned long long *start);

/* CPU seconds (user and system) this process has used so far. */
double tu_cpu_seconds(void);

/* A growing NUL-terminated buffer, and an appender with the signature of
 * a libcurl write or header callback (CURLOPT_WRITEFUNCTION): start from
 * {0}, pass it as the data; p is new (caller frees), seen says a byte
 * came. Returns nmemb * size, or 0 when memory ran out. */
struct tu_buf {
    char *p;
    size_t n;
    int seen;
};
size_t tu_buf_append(char *data, size_t size, size_t nmemb, void *buf);

/* Milliseconds on CLOCK_MONOTONIC. */
long long tu_now_ms(void);
void tu_sleep_ms(int ms);

#endif
