/*
 * env: the shared harness of the daemon-level mod_hetzner_lb suites (see
 * env.c).
 */
#ifndef PRISMLB_E2E_HETZNER_LB_ENV_H
#define PRISMLB_E2E_HETZNER_LB_ENV_H

#include "fakeproc.h"
#include "hzt.h"

/* The Hetzner fake's seed; %s takes extra top-level members (",..."). */
#define SEED                                                                                       \
    "{\"tokens\":[\"tok-a\"],\"networks\":[{\"id\":7,\"name\":\"k8s\",\"ip_range\":"               \
    "\"10.0.0.0/16\",\"subnets\":[{\"type\":\"cloud\",\"ip_range\":\"10.0.0.0/24\"},"              \
    "{\"type\":\"vswitch\",\"ip_range\":\"10.0.1.0/24\",\"vswitch_id\":4242}]}]%s}"

/* The test's private directory (Check fixture: setup/teardown). */
extern char *dir;
void setup(void);
void teardown(void);

/* Both fakes and the daemon. */
struct env {
    struct fake kube;
    struct hzt_fake hz;
    struct tu_proc d;
    char log[600];
};

/* Print the daemon's log to stderr. */
void dump_log(struct env *e);

/* Wait up to ms for cond, failing the test if the daemon exits first. */
#define WAIT_FOR(e, cond, ms, what)                                                                \
    do {                                                                                           \
        long long dl_ = tu_now_ms() + (ms);                                                        \
        while (!(cond) && tu_now_ms() < dl_) {                                                     \
            if (tu_exited(&(e)->d))                                                                \
                dump_log(e);                                                                       \
            ck_assert_msg(!tu_exited(&(e)->d), "the daemon exited");                               \
            tu_sleep_ms(200);                                                                      \
        }                                                                                          \
        if (!(cond))                                                                               \
            dump_log(e);                                                                           \
        ck_assert_msg((cond), "timed out waiting for %s", what);                                   \
    } while (0)

/* Start both fakes (the Hetzner one with the seed's extra members
 * seed_extra and its arguments hz_args) and the daemon with extra settings
 * (text inside the instance) and resync interval in seconds. */
void env_start(struct env *e, const char *seed_extra, const char *const *hz_args, const char *extra,
               int resync_s);
/* Stop the daemon (it must exit 0) and both fakes. */
void env_stop(struct env *e);
/* method path on the fake API server; the status must be want; *out (if
 * out) gets the JSON body. */
void kube_req(struct env *e, const char *method, const char *path, const char *ctype,
              const char *body, int want, json_t **out);

#endif
