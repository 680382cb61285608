/*
 * Shared fixture of test_api.c and test_admin.c: one fake per test, started
 * from API_SEED with 30 ms actions, stopped (and its exit status checked)
 * after the test; request helpers that assert as they go.
 */
#ifndef API_COMMON_H
#define API_COMMON_H

#include <check.h>
#include <stddef.h>

#include "hzt.h"

#define TOK "tok-a"

/* Networks 7 (cloud 10.0.0.0/24, vSwitch 10.0.1.0/24, 10.0.0.2 reserved)
 * and 8; balancers 1-5 (lb-a, lb-b labelled with robotlb/service-uid,
 * lb-c with env only, legacy-1 and legacy-2 unlabelled, 5 protected). */
extern const char *API_SEED;
/* The fake of the running test. */
extern struct hzt_fake F;

/* Restart F with extra arguments (after stop_fake). */
void start_with(const char *const *args);
/* Stop F; fails the test unless it exited 0. */
void stop_fake(void);
/* The default fixture: start F with 30 ms actions. */
void setup(void);
/* Request with token TOK that must succeed at the transport level. */
void req(const char *method, const char *path, const char *body, struct hzt_resp *r);
/* Expect an API error body with this status and code. */
void expect_error(const char *method, const char *path, const char *body, long status,
                  const char *code);
/* POST an action on lb, expect 201, wait for it to end in want_status;
 * returns the action id. */
long action_ok(long lb, const char *name, const char *body, const char *want_status);
/* Names of the balancers of a list response joined by ','. */
void names(const struct hzt_resp *r, char *buf, size_t len);
/* Run the fake with up to three arguments (NULL ends them) to completion
 * within 10 s; returns its exit code, its output in *out (new). */
int run_fake(char **out, const char *a1, const char *a2, const char *a3);
/* Run the tests as one Check suite; argv[1] "--valgrind" runs the fakes
 * under memcheck. Returns the exit code for main. */
int api_run(int argc, char **argv, const char *name, const TTest *const *tests, size_t n);

#endif
