/*
 * A plb_host for driving mod_hetzner_lb's API client (hz_api.c) without the
 * daemon: the core's own reactor and HTTP client on a private event base,
 * fake_host_init's log (stderr, FAKE_HOST_LOG_LEVEL) and libc allocation. Members the client does
 * not use stay NULL, so a call to one of them crashes the test instead of passing.
 */
#ifndef HZ_E2E_HOST_H
#define HZ_E2E_HOST_H

#include "fakehost.h"

struct th {
    struct fake_host host; /* the module's table: fake_host(&t->host) */
    plb_ctx *ctx;
};

/* Set up (0) or -1. */
int th_init(struct th *t);
void th_fini(struct th *t);
/* Run the loop until *flag is non-zero or timeout_ms passed; returns 1 if
 * the flag was set. */
int th_run_until(struct th *t, const int *flag, int timeout_ms);
/* Run the loop for ms milliseconds. */
void th_run_for(struct th *t, int ms);

#endif
