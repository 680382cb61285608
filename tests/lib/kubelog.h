/*
 * kubelog: the fake API server's request log (GET /requests of its admin
 * API, tests/fakes/kube), read alike by every suite that counts what a
 * client asked of it.
 */
#ifndef PRISMLB_TESTS_KUBELOG_H
#define PRISMLB_TESTS_KUBELOG_H

#include <jansson.h>

/* The entries of log (the admin API's answer, {"items": [{"method",
 * "path", "time"}, ...]}; borrowed, NULL has none) whose method is method
 * and whose path holds frag1 and frag2 (each NULL: any): how many; the
 * times (seconds, wall clock) of the first max of them into times (may be
 * NULL). */
int tu_kube_requests(const json_t *log, const char *method, const char *frag1, const char *frag2,
                     double *times, int max);

#endif
