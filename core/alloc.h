/*
 * alloc: the one allocation hook of the daemon.
 *
 * Every allocation of the core, of the libraries it drives (libevent,
 * libcurl, jansson, OpenSSL) and of modules (through plb_host.alloc) goes
 * through these functions, so a test can make the Nth one fail and prove
 * that nothing crashes or leaks.
 */
#ifndef PRISMLB_ALLOC_H
#define PRISMLB_ALLOC_H

#include <stddef.h>

/* malloc/calloc/realloc/free/strdup through the hook. core_malloc never
 * zeroes; core_calloc does. NULL on failure (injected or real). */
void *core_malloc(size_t n);
void *core_calloc(size_t nmemb, size_t size);
void *core_realloc(void *p, size_t n);
void core_free(void *p);
char *core_strdup(const char *s);
char *core_strndup(const char *s, size_t n);
/* printf into a new string (free with core_free); NULL on failure. */
char *core_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Make the nth allocation from now fail (1 = the next), and every one after
 * it when sticky; libevent's allocations are not counted (see alloc.c). 0
 * disables. Also set from PRISMLB_FAIL_ALLOC=N[,sticky]
 * by core_alloc_install_library_hooks. */
void core_alloc_fail_at(unsigned long nth, int sticky);
/* PRISMLB_FAIL_ALLOC=N,on-signal instead arms N when the process gets
 * SIGUSR2, so a test fails the Nth allocation after the point it chose
 * (traffic flowing, a watch open); the arming and the failure are each
 * said on stderr ("prismlb: allocation failure armed", "prismlb: injected
 * allocation failure"). Tests only: nothing else installs that handler. */
/* Allocations attempted since start (for tests that sweep N). */
unsigned long core_alloc_count(void);

/* Bytes live through the hook now, and the most live since the last
 * core_alloc_peak_reset (usable sizes, as malloc_usable_size reports them).
 * For tests that bound memory; safe from any thread. */
size_t core_alloc_live_bytes(void);
size_t core_alloc_peak_bytes(void);
void core_alloc_peak_reset(void);

/* Route libevent, jansson, libcurl and OpenSSL through the hook. Call once,
 * first thing in main, before any of them allocates. 0 or -1. */
int core_alloc_install_library_hooks(void);

#endif
