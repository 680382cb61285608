#include "alloc.h"

#include <curl/curl.h>
#include <event2/event.h>
#include <jansson.h>
#include <malloc.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned long alloc_count;
static unsigned long fail_at;
static int fail_sticky;
static unsigned long fail_on_signal; /* PRISMLB_FAIL_ALLOC=N,on-signal */
static int fail_announce;            /* say so on stderr when it fails */
/* Live and peak bytes; libcurl's resolver threads allocate too, hence atomics. */
static long live_bytes;
static long peak_bytes;

static void
live_add(long delta)
{
    long now = __atomic_add_fetch(&live_bytes, delta, __ATOMIC_RELAXED);
    long peak = __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&peak_bytes, &peak, now, 1, __ATOMIC_RELAXED,
                                                      __ATOMIC_RELAXED))
        ;
}

size_t
core_alloc_live_bytes(void)
{
    long v = __atomic_load_n(&live_bytes, __ATOMIC_RELAXED);
    return v > 0 ? (size_t)v : 0;
}

size_t
core_alloc_peak_bytes(void)
{
    long v = __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED);
    return v > 0 ? (size_t)v : 0;
}

void
core_alloc_peak_reset(void)
{
    __atomic_store_n(&peak_bytes, __atomic_load_n(&live_bytes, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

static int
should_fail(void)
{
    /* Worker threads and libcurl's resolver threads allocate too: counted
     * atomically, and exactly one allocation takes an injected failure. */
    __atomic_add_fetch(&alloc_count, 1, __ATOMIC_RELAXED);
    unsigned long n = __atomic_load_n(&fail_at, __ATOMIC_RELAXED);
    while (n != 0) {
        int sticky = __atomic_load_n(&fail_sticky, __ATOMIC_RELAXED);
        unsigned long next = n == 1 && sticky ? 1 : n - 1;
        if (__atomic_compare_exchange_n(&fail_at, &n, next, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            if (n != 1)
                return 0;
            if (fail_announce) { /* set before any thread, read-only since */
                /* write(2): no allocation, no lock; a test counts these */
                static const char msg[] = "prismlb: injected allocation failure\n";
                ssize_t w = write(2, msg, sizeof(msg) - 1);
                (void)w;
            }
            return 1;
        }
    }
    return 0;
}

void
core_alloc_fail_at(unsigned long nth, int sticky)
{
    __atomic_store_n(&fail_sticky, sticky, __ATOMIC_RELAXED);
    __atomic_store_n(&fail_at, nth, __ATOMIC_RELAXED);
}

/* SIGUSR2 under PRISMLB_FAIL_ALLOC=N,on-signal: the Nth allocation from
 * now fails. Async-signal-safe: an atomic store and a write(2). */
static void
on_arm_signal(int sig)
{
    static const char msg[] = "prismlb: allocation failure armed\n";
    (void)sig;
    __atomic_store_n(&fail_at, fail_on_signal, __ATOMIC_RELAXED); /* never sticky */
    ssize_t w = write(2, msg, sizeof(msg) - 1);
    (void)w;
}

unsigned long
core_alloc_count(void)
{
    return __atomic_load_n(&alloc_count, __ATOMIC_RELAXED);
}

void *
core_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    void *p = malloc(n ? n : 1);
    if (p)
        live_add((long)malloc_usable_size(p));
    return p;
}

void *
core_calloc(size_t nmemb, size_t size)
{
    if (should_fail())
        return NULL;
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (p)
        live_add((long)malloc_usable_size(p));
    return p;
}

void *
core_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    long old = p ? (long)malloc_usable_size(p) : 0;
    void *q = realloc(p, n ? n : 1);
    if (q)
        live_add((long)malloc_usable_size(q) - old);
    return q;
}

void
core_free(void *p)
{
    if (p)
        live_add(-(long)malloc_usable_size(p));
    free(p);
}

char *
core_strdup(const char *s)
{
    return core_strndup(s, strlen(s));
}

char *
core_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = core_malloc(len + 1);
    if (!d)
        return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *
core_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = core_malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Adapters with the signatures each library wants. */

/* libevent's: counted in the live bytes, never failed by the injector.
 * libevent 2.1 (2.1.12, Debian 12's) crashes on some allocation failures
 * of its HTTP server: evhttp_request_new frees a request whose header list
 * it could not allocate with evhttp_clear_headers(NULL), and
 * evhttp_connection_base_bufferevent_new frees a half-made connection by
 * cancelling a deferred callback it has not set up yet (both found by
 * core_httpd's alloc-fail case). The injector tests prismlb's handling of
 * failures, not libevent's. */
static void *
ev_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p)
        live_add((long)malloc_usable_size(p));
    return p;
}

static void *
ev_realloc(void *p, size_t n)
{
    long old = p ? (long)malloc_usable_size(p) : 0;
    void *q = realloc(p, n ? n : 1);
    if (q)
        live_add((long)malloc_usable_size(q) - old);
    return q;
}

static void *
ssl_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return core_malloc(n);
}

static void *
ssl_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return core_realloc(p, n);
}

static void
ssl_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    core_free(p);
}

static void *
curl_calloc_cb(size_t nmemb, size_t size)
{
    return core_calloc(nmemb, size);
}

int
core_alloc_install_library_hooks(void)
{
    const char *env = getenv("PRISMLB_FAIL_ALLOC");
    if (env && *env) {
        char *end;
        unsigned long n = strtoul(env, &end, 10);
        if (end && strcmp(end, ",on-signal") == 0) {
            fail_on_signal = n;
            fail_announce = 1;
            struct sigaction sa;
            memset(&sa, 0, sizeof(sa));
            sa.sa_handler = on_arm_signal;
            sa.sa_flags = SA_RESTART;
            sigemptyset(&sa.sa_mask);
            if (sigaction(SIGUSR2, &sa, NULL) < 0)
                return -1;
        } else {
            core_alloc_fail_at(n, end && strcmp(end, ",sticky") == 0);
        }
    }
    /* OpenSSL refuses once it has allocated; tolerate that (its own
     * allocations then bypass the hook, which only loses injection). */
    (void)CRYPTO_set_mem_functions(ssl_malloc, ssl_realloc, ssl_free);
    event_set_mem_functions(ev_malloc, ev_realloc, core_free);
    json_set_alloc_funcs(core_malloc, core_free);
    if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, core_malloc, core_free, core_realloc, core_strdup,
                             curl_calloc_cb) != CURLE_OK)
        return -1;
    return 0;
}
