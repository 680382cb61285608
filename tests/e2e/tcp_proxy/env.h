/*
 * env: the one harness of the tcp_proxy end-to-end suites: upstream servers on
 * 127.0.0.1 run in threads of the test (echo, hello-then-echo, blackhole),
 * and the daemon started with a generated config and stopped by PID.
 * Every wait is bounded.
 */
#ifndef PRISMLB_E2E_TCP_PROXY_ENV_H
#define PRISMLB_E2E_TCP_PROXY_ENV_H

#include <pthread.h>
#include <stddef.h>

#include "testutil.h"

enum srv_mode {
    SRV_ECHO,      /* echo everything; FIN after the echo of the client's FIN */
    SRV_HELLO,     /* write "<id>\n" on accept, then echo */
    SRV_BLACKHOLE, /* listen with backlog 0, never accept, queue kept full */
    SRV_RESET,     /* read what the client sent first, then reset (RST) */
};

#define SRV_MAX_ACCEPTS 256

struct srv {
    enum srv_mode mode;
    char id;
    int lfd;
    int port;
    int stop_pipe[2];
    pthread_t thread;
    int running;
    int fillers[4]; /* blackhole: our own connections filling the queue */
    pthread_mutex_t mu;
    int accepts;
    long long accept_ms[SRV_MAX_ACCEPTS];
};

/* Start a server on 127.0.0.1 with an ephemeral port. 0 or -1. */
int srv_start(struct srv *s, enum srv_mode mode, char id);
/* The same on a given port (0: ephemeral). */
int srv_start_port(struct srv *s, enum srv_mode mode, char id, int port);
/* Stop it: listener closed (connections refused from now on), thread
 * joined, open connections closed. */
void srv_stop(struct srv *s);
int srv_accepts(struct srv *s);
long long srv_accept_at(struct srv *s, int i);

/* "dir/name" in one of 8 static buffers used in turn (valid until the
 * eighth call after). */
const char *dir_path(const char *dir, const char *name);

struct proxy {
    struct tu_proc proc;
    char *dir;       /* private temp dir (owned) */
    char conf[4096]; /* config path */
    char eps[4096];  /* endpoint file read by file_endpoints */
    char log[4096];
    int port;
    long long started_ms; /* when the port answered */
};

/* Write the endpoint file: "host:port" lines. */
void proxy_set_endpoints(struct proxy *p, const char *const *eps, size_t n);
/* Endpoint string "127.0.0.1:PORT" of a server (static buffer per slot). */
const char *srv_ep(const struct srv *s);

/* Start prismlb with a file_endpoints source and a tcp_proxy whose extra
 * settings are `settings` (libconfig text inside the instance group) on a
 * free port; wait until it listens. eps as in proxy_set_endpoints. 0/-1. */
int proxy_start(struct proxy *p, const char *settings, const char *const *eps, size_t n);
/* The same with extra instance groups (libconfig text, "{ ... }, { ... }")
 * after the proxy. */
int proxy_start_with(struct proxy *p, const char *settings, const char *instances,
                     const char *const *eps, size_t n);
/* SIGTERM and wait; returns the wait status. Removes the temp dir. */
int proxy_stop(struct proxy *p);
/* Wait until the daemon's log contains needle. 0, or -1 on timeout or if
 * the daemon exited. */
int proxy_wait_log(struct proxy *p, const char *needle, int timeout_ms);
/* The daemon's log so far (new string). */
char *proxy_log(struct proxy *p);

/* Connect to 127.0.0.1:port (blocking, bounded). fd or -1. */
int tcp_connect(int port, int timeout_ms);
/* Read until n bytes or EOF or timeout. Returns bytes read, -1 on error. */
long read_full(int fd, void *buf, size_t n, int timeout_ms);
/* Wait for EOF (read returning 0) or a reset. Returns elapsed ms, or -1 on
 * timeout (data read meanwhile is discarded). */
long long wait_eof(int fd, int timeout_ms);
/* Send all; 0 or -1. */
int write_full(int fd, const void *buf, size_t n);

/* Processes a test starts are stopped by the test; one that fails an
 * assertion exits at once, so each start is also recorded (by PID; a
 * negative PID for a process group) in a registry that the suite's
 * unchecked teardown, in the runner process, sweeps with SIGKILL.
 * tp_registry_init: unchecked setup (runner process, before the forks). */
void tp_registry_init(void);
void tp_track(int pid);
void tp_reap_all(void);

/* GET http://127.0.0.1:port/path (Connection: close). 0 with the status
 * and the body (new), or -1. */
int http_get(int port, const char *path, int *status, char **body);
/* Scrape http://127.0.0.1:port/metrics and run `promtool check metrics`
 * (lint included) on it. 0 when promtool is content, else -1 with what it
 * said and the exposition in *why (new). */
int promtool_check_metrics(int port, char **why);

#endif
