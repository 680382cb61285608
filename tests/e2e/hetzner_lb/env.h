/*
 * env: the one harness of the daemon-level mod_hetzner_lb suites
 * (test_daemon, test_reconcile, test_replicas, test_status; see env.c).
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
/* The same without any network. */
#define SEED_NO_NETWORK "{\"tokens\":[\"tok-a\"]%s}"

/* The test's private directory (Check fixture: setup/teardown). */
extern char *dir;
void setup(void);
void teardown(void);

/* Both fakes and the daemon. */
struct env {
    struct fake kube;
    struct hzt_fake hz;
    struct tu_proc d;
    char kc[4300]; /* the kubeconfig of the fake API server (client cert) */
    char log[600];
};

/* How env_start_opts starts everything; zero is the usual set-up. */
struct env_opts {
    int no_network;             /* seed no network, set no default_network */
    const char *seed_extra;     /* extra top-level members of the seed */
    const char *const *hz_args; /* the Hetzner fake's arguments */
    const char *extra;          /* settings inside the hetzner_lb instance */
    int resync_s;               /* ROBOTLB_RESYNC_INTERVAL; 0: 300 */
    /* Gate the instance by the lifecycle test module, which opens the gate
     * after gate_open_after (a duration) and closes it gate_close_after
     * later ("0": never). NULL: no gate. */
    const char *gate_open_after, *gate_close_after;
    /* Gate it instead by a file: open while gate_file exists (a path). */
    const char *gate_file;
    /* More instances beside it, as config text ("{ module = ...; },"). */
    const char *instances;
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

/* Start both fakes: the Hetzner one seeded with SEED (SEED_NO_NETWORK
 * with no_network) around seed_extra and started with hz_args; e->kc gets
 * the fake API server's kubeconfig. */
void env_fakes_start(struct env *e, int no_network, const char *seed_extra,
                     const char *const *hz_args);
/* The value of the sample whose name and labels are series
 * ("name{a=\"b\"}") in the exposition text (NULL is fine), or -1 when
 * there is none. */
double env_metric(const char *text, const char *series);
/* Write conf to dir/NAME.conf and start the daemon on it as p, logging to
 * dir/NAME.log (copied to log, which holds 600 bytes), at debug level, with
 * the module path, the token and ROBOTLB_RESYNC_INTERVAL=resync_s. */
void env_spawn(struct tu_proc *p, const char *name, const char *conf, int resync_s, char *log);
/* Both fakes and the daemon with one hetzner_lb instance "hz", as o says. */
void env_start_opts(struct env *e, const struct env_opts *o);
/* The same with the network "k8s" as default_network, the seed's extra
 * members seed_extra, the fake's arguments hz_args, extra settings (text
 * inside the instance) and resync interval in seconds. */
void env_start(struct env *e, const char *seed_extra, const char *const *hz_args, const char *extra,
               int resync_s);
/* Stop the daemon (it must exit 0, its log must not hold the token) and
 * both fakes. */
void env_stop(struct env *e);
/* The daemon alone, as env_start_opts starts it, on the fakes e already
 * runs (o->seed_extra and o->hz_args are not read), logging to dir/NAME.log. */
void env_daemon_start(struct env *e, const struct env_opts *o, const char *name);
/* Stop the daemon only, as env_stop does (exit 0, no token in its log). */
void env_daemon_stop(struct env *e);
/* Stop both fakes only (a test that ran its own daemons). */
void env_fakes_stop(struct env *e);

/* method path on the fake API server; the status must be want; *out (if
 * out) gets the JSON body. */
void kube_req(struct env *e, const char *method, const char *path, const char *ctype,
              const char *body, int want, json_t **out);
/* The nodes of the node-selector cases: amd (10.0.1.221, arch amd64), arm
 * (.222, arm64), cp (.223, amd64, control-plane) and excl (.224, amd64,
 * excluded from external balancers). */
void env_selector_nodes(struct env *e);
/* The EndpointSlice loc-abc of Service default/loc: ready endpoints on n1
 * and n3, one neither ready nor serving on n4 (its third). */
void env_local_slice(struct env *e);
/* A Service of type in namespace default, selector app=name, port 80 ->
 * nodePort node_port (0: none given); extra_meta/extra_spec are JSON
 * members to add. Returns its UID (new). */
char *env_service(struct env *e, const char *name, const char *type, int node_port,
                  const char *extra_meta, const char *extra_spec);
/* The first ingress IP of Service default/name into ip ("" when none), its
 * ipMode into mode (if mode), the number of ingress entries into *n (if n).
 * 1 when there is an IP. */
int env_ingress(struct env *e, const char *name, char *ip, size_t len, char *mode, size_t mlen,
                size_t *n);
/* 1 when namespace default has a Warning Event of reason whose message
 * holds needle. */
int env_has_event(struct env *e, const char *reason, const char *needle);
/* Create a balancer in the fake Hetzner API (lb11, hel1); labels JSON text
 * or NULL. Returns its id. */
long env_create_lb(struct env *e, const char *name, const char *labels);
/* 1 when balancer id exists, 0 when it does not. */
int env_lb_exists(struct env *e, long id);
/* The fake Hetzner API's request count of route ("GET /v1/load_balancers"). */
long env_count_route(struct env *e, const char *route);
/* The requests the fake Hetzner API logged since its last reset. */
long env_count_requests(struct env *e);
/* The fake Hetzner API's log entries after sequence number since (0: all
 * it holds), oldest first: {seq, t_ms, method, path, route, status,
 * identity} (new array). */
json_t *env_requests_since(struct env *e, long since);
/* How many requests of route the fake Hetzner API refused (status >= 400)
 * in its log, asserting that each came at least min_gap_ms after the one
 * before by the fake's clock (a refusal retried on a cycle, not in a hot
 * loop). */
long env_refusals_spaced(struct env *e, const char *route, long long min_gap_ms);
/* The sequence number of the fake Hetzner API's newest log entry. */
long env_last_request(struct env *e);

/* A ready Node with InternalIP ip. */
void env_node(struct env *e, const char *name, const char *ip);
/* The balancers labelled for uid (new array). */
json_t *env_lbs_of(struct env *e, const char *uid);
/* The IP targets of the one balancer labelled for uid, sorted and joined
 * by commas, into buf; 0 when there is no such balancer (buf ""). */
int env_targets_of(struct env *e, const char *uid, char *buf, size_t len);
/* The IP targets of balancer lb (an object of the fake Hetzner API's
 * answer, borrowed), sorted and joined by commas, into buf. */
void env_lb_targets(json_t *lb, char *buf, size_t len);
/* 1 when env_targets_of gives want. */
int env_targets_are(struct env *e, const char *uid, const char *want);

/* Make the fake API server answer the next PATCH of a path holding match
 * with status (once). */
void env_kube_fail_patch(struct env *e, const char *match, int status);
/* Set the fake Hetzner API's faults (JSON body of POST /_admin/faults). */
void env_faults(struct env *e, const char *body);
/* Actions the fake holds running ({"hold_actions":true}). */
long env_held_actions(struct env *e);

/* Start replica r (identity "r<r>") as d: mod_leader on the lease
 * default/hetzner-lb (3 s) gating mod_hetzner_lb on the fakes e runs,
 * with default_network "k8s", logging to dir/replica<r>.log (log). */
void env_replica_start(struct env *e, struct tu_proc *d, int r, char *log);
/* The replica holding the lease default/hetzner-lb (0 or 1). */
int env_lease_holder(struct env *e);
/* Assert that the fake Hetzner API saw no two writers of one balancer in
 * overlapping windows. */
void env_no_overlapping_writers(struct env *e);

/* Run kubectl (.tools/bin/kubectl, the fake API server's kubeconfig, a
 * --cache-dir in the test's directory) with the NULL-ended arguments; its
 * exit code, combined output in *out (new). */
int env_kubectl(struct env *e, char **out, ...) __attribute__((sentinel));
/* Run the hcloud CLI (HCLOUD_ENDPOINT at the fake, token tok-a, HOME and
 * HCLOUD_CONFIG in the test's directory) with the NULL-ended arguments
 * (at most 20); its exit code, combined output in *out (new). */
int env_hcloud(struct env *e, char **out, ...) __attribute__((sentinel));
/* The same with -o json added: the JSON it printed (new; an empty array
 * for hcloud's null), failing the test unless it exits 0 with JSON. */
json_t *env_hcloud_json(struct env *e, ...) __attribute__((sentinel));
/* The Warning Event of reason about Service default/name whose message
 * holds every one of the NULL-ended needles, as `kubectl get events -o
 * json` shows it: its count (0: none such). */
long env_kubectl_event(struct env *e, const char *name, const char *reason, ...)
    __attribute__((sentinel));
/* The same: how many such Events there are, the count of the last into
 * *count. */
long env_kubectl_events(struct env *e, const char *name, const char *reason, long *count, ...)
    __attribute__((sentinel));

#endif
