/*
 * hz_rec.h: one Service's reconcile with Hetzner, an explicit state
 * machine. hz_reconcile.c runs it (one driver, rec_run, that every answer
 * re-enters); which step follows which answer is decided here, purely
 * (hz_rec_step.c, unit tested).
 *
 *   START --labelled balancer------------------------------> NETWORK
 *     |---not labelled----> NAMES  (one shared list) --+
 *     `---after a taken---> LOOKUP (GET by name)     --+--> DECIDE --> NETWORK
 *         name
 *   START --a certificate name without its ID--> CERTS --> (as from START)
 *   START --a shared group's, none in its list---------------> NETWORK
 *         (found by its group label only, never by name: created);
 *         its PLAN reads the balancer again first when its labels change,
 *         so that the label write keeps what another wrote since
 *   NETWORK --a balancer to change--> PLAN --every answer in--> DONE
 *           `--none-----------------> CREATE --created--> PLAN
 *                                       `--a target refused the create:
 *                                          CREATE again, without targets
 *
 * A step moves on once every call it made has answered. An answer that
 * ends the reconcile (refused, failed, cancelled, nothing to decide yet)
 * makes the next step DONE, from any step; DONE hands what the reconcile
 * found to its completion callback, the only way back to the event side.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_REC_H
#define PRISMLB_MOD_HETZNER_LB_HZ_REC_H

#include "hz_api.h"

struct hz_kside;
struct hz_svc_state;

/* The steps. */
enum hz_rec_step {
    HZ_REC_START = 0, /* not begun */
    HZ_REC_CERTS,     /* waiting for the lookups of its certificates' names */
    HZ_REC_NAMES,     /* waiting for the shared list of unlabelled balancers */
    HZ_REC_LOOKUP,    /* waiting for the GETs of its names (after a taken name) */
    HZ_REC_DECIDE,    /* its names looked up: manage, adopt, create, or wait */
    HZ_REC_NETWORK,   /* the id of its network: known, or one lookup per name */
    HZ_REC_CREATE,    /* the create in flight */
    HZ_REC_PLAN,      /* the plan's writes and the read-back in flight */
    HZ_REC_DONE,      /* ended: the completion callback ran */
};

/* How a reconcile ends, in order: each is worse than the ones before it,
 * and a reconcile ends as the worst of its answers. */
enum hz_rec_end {
    HZ_REC_OK = 0,    /* converged: the refusals in force are over */
    HZ_REC_RECHECK,   /* refused or failed: again after refused_recheck_interval */
    HZ_REC_WAIT,      /* nothing to decide yet (no target node, a taken name),
                         or a dry run: again at the resync */
    HZ_REC_CANCELLED, /* the gate closed: the next leader decides */
};

/* What one Hetzner answer means to the reconcile. */
enum hz_rec_answer {
    HZ_ANS_DONE,            /* as asked */
    HZ_ANS_DRY_RUN,         /* a write only logged (dry_run) */
    HZ_ANS_ALREADY,         /* already as wanted: the list it planned from was older */
    HZ_ANS_REFUSED,         /* Hetzner refused it: the Service is warned */
    HZ_ANS_FAILED,          /* no answer, or not one to act on: logged */
    HZ_ANS_CANCELLED,       /* the gate closed */
    HZ_ANS_NAME_TAKEN,      /* the create met a taken name (uniqueness_error) */
    HZ_ANS_WITHOUT_TARGETS, /* a target failed the create: create without targets */
};

/* What the step after one whose answers are all in depends on. */
struct hz_rec_view {
    enum hz_rec_step step; /* that step */
    enum hz_rec_end end;   /* the worst outcome so far */
    int have_lb;           /* a balancer to change is known */
    int by_name;           /* look its names up one by one (START) */
    int certs;             /* certificates named whose IDs are not known */
    int group;             /* a shared group's balancer: never looked up by
                              name (START to NETWORK) */
};

/* The step after v->step: DONE once the end is not OK (and after PLAN);
 * START to CERTS while certificate names need their IDs; START (or CERTS)
 * to NETWORK with a balancer or for a group, else LOOKUP by name or NAMES; NAMES
 * and LOOKUP to DECIDE; DECIDE to NETWORK; NETWORK and CREATE to PLAN with
 * a balancer, else to CREATE (a create answered WITHOUT_TARGETS made
 * none). */
HZ_HIDDEN enum hz_rec_step hz_rec_next(const struct hz_rec_view *v);
/* The worse of a and b. */
HZ_HIDDEN enum hz_rec_end hz_rec_worse(enum hz_rec_end a, enum hz_rec_end b);
/* What answer a adds to the end: DONE, ALREADY, WITHOUT_TARGETS nothing
 * (OK); DRY_RUN WAIT; REFUSED, FAILED, NAME_TAKEN RECHECK; CANCELLED. */
HZ_HIDDEN enum hz_rec_end hz_rec_answer_end(enum hz_rec_answer a);
/* The answer res (borrowed) to one write of kind of a plan: a 2xx (its
 * action succeeded); an add_target of a target already defined or a
 * remove_target answered 404 are ALREADY; an answer of Hetzner's other
 * than that is REFUSED (the API client waits out a 429 itself); a
 * transport error FAILED. */
HZ_HIDDEN enum hz_rec_answer hz_rec_op_answer(enum hz_op_kind kind, const struct hz_result *res);
/* The answer res to a create made with_targets or not: DONE is a 201
 * with the balancer; a 422 with targets WITHOUT_TARGETS; a
 * uniqueness_error NAME_TAKEN; another of Hetzner's REFUSED; a transport
 * error FAILED. */
HZ_HIDDEN enum hz_rec_answer hz_rec_create_answer(const struct hz_result *res, int with_targets);
/* The answer res to a GET: DONE for a 200 (the caller reads the body),
 * CANCELLED, else FAILED. */
HZ_HIDDEN enum hz_rec_answer hz_rec_get_answer(const struct hz_result *res);
/* The name of step s for the log ("plan"). */
HZ_HIDDEN const char *hz_rec_step_name(enum hz_rec_step s);

/* ------------------------------------------------------------------ */
/* Whether to run one (hz_decide.c, pure)                               */

/* The fingerprint of everything d asks for (FNV-1a over its fields). */
HZ_HIDDEN uint64_t hz_desired_fp(const struct hz_desired *d);

/* What a sync does with a Service whose targets it selected and whose
 * desired balancer it built. */
enum hz_sync_verdict {
    HZ_SYNC_SERVED,    /* its labelled balancer is as asked: nothing to send */
    HZ_SYNC_HELD,      /* what failed is not sent again before its recheck */
    HZ_SYNC_LATER,     /* a reconcile of it runs: the sync after it looks */
    HZ_SYNC_RECONCILE, /* reconcile, with the plan when one was built */
};

/* What the decision is over (borrowed). */
struct hz_sync_in {
    const struct hz_desired *d; /* what it asks for */
    uint64_t fp;                /* ... its fingerprint */
    const struct hz_actual *lb; /* its labelled balancer, or NULL */
    int net_known;              /* d asks for no network, or its id is known */
    int64_t net_id;             /* ... that id (0: none) */
    uint64_t fail_fp;           /* what failed last (0: nothing) */
    int64_t retry_at, now;      /* ... tried again from retry_at on */
    int running;                /* a reconcile of it runs */
};

/* Decide: LATER while one runs; SERVED when the labelled balancer (with
 * the network's id known) needs no write; HELD when what it asks for is
 * what failed and its recheck is not due; else RECONCILE, with the writes
 * on the labelled balancer in *plan (new; empty when none was built),
 * which the reconcile sends instead of building them again. *plan is
 * empty for every other verdict. 0, or -ENOMEM. */
HZ_HIDDEN int hz_sync_decide(const struct hz_sync_in *in, enum hz_sync_verdict *out,
                             struct hz_plan *plan);

/* ------------------------------------------------------------------ */
/* Running one (hz_reconcile.c)                                         */

/* What a reconcile found, handed to its completion callback (everything
 * borrowed for the call). */
struct hz_rec_result {
    const char *key, *uid; /* the Service's "ns/name" and UID (a group's:
                              its oldest member's) */
    const char *group;     /* the shared group reconciled, or NULL */
    uint64_t fp;           /* the fingerprint of what it asked for */
    enum hz_rec_end end;
    int by_name;             /* the create met a taken name the lists did not
                                show: look its names up one by one from now */
    int attached;            /* a network was attached: sync again (the next
                                pass leaves the network asked for before) */
    struct hz_lb *lb;        /* the balancer the plan worked on, as read back
                                after the writes when that answered; NULL when
                                no plan ran */
    const plb_obj *svc;      /* the Service as the cache has it now; NULL when
                                it is gone, no longer ours (type, class,
                                deletion) or recreated */
    struct hz_svc_state *st; /* its state, with svc */
};

/* Called once when a reconcile ended (possibly before hz_rec_start
 * returned): the event side remembers the balancer, writes the status and
 * decides when to look again. */
typedef void (*hz_rec_done_fn)(struct hz_kside *ks, const struct hz_rec_result *res);

/* What to reconcile. */
struct hz_rec_req {
    const char *key, *uid; /* the Service (borrowed; copied); for a group
                              its oldest member, whose state and Events
                              hear of the refusals */
    const char *group;     /* a shared group's reconcile (borrowed;
                              copied): its balancer has no robotlb/
                              service-uid; its calls run on the group's
                              lane; or NULL */
    json_t *labels_set;    /* ... the labels its balancer is to carry and
                              the member label keys to go from it
                              (hz_group_label_changes; stolen, also on
                              error; NULL without a group) */
    json_t *labels_drop;
    struct hz_desired *d;   /* what it asks for (stolen: cleared, also on error) */
    uint64_t fp;            /* ... its fingerprint */
    int annotated;          /* it names its balancer (robotlb/balancer): no
                               earlier release's name to look for */
    int by_name;            /* look its names up one by one */
    struct hz_lb *labelled; /* its labelled balancer of the resync list
                               (borrowed), or NULL: find it by name */
    struct hz_plan *plan;   /* the writes on labelled (stolen: emptied, also
                               on error; NULL or empty: built when needed) */
    int64_t plan_net;       /* ... built with this network id */
    hz_rec_done_fn done;
};

/* ------------------------------------------------------------------ */
/* Certificates with Hetzner (hz_cert_io.c)                             */

/* A warning Event for the Service (reason, text; borrowed). */
typedef void (*hz_cert_warn_fn)(void *arg, const char *reason, const char *msg);
/* The lookups ended as end (OK: every certificate of hs has its ID). */
typedef void (*hz_cert_done_fn)(void *arg, enum hz_rec_end end);
/* Find the ID of each certificate of the n entries hs (a desired
 * balancer's https; borrowed until done) named without one, on lane (a
 * Service's UID): looked up by name, once per name; a managed one made,
 * labelled robotlb/service-uid with its entry's uid, when Hetzner has none
 * of its name, and its failed issuance retried; each ID found is set in
 * every entry and kept in ks->certs. done runs once, on a later loop
 * iteration; warn before it for what the Service is told. 0: started;
 * -ENOENT (no name without an ID) or -ENOMEM: nothing started, done is
 * not called. */
HZ_HIDDEN int hz_cert_find(struct hz_kside *ks, const char *lane, struct hz_http *hs, size_t n,
                           hz_cert_warn_fn warn, hz_cert_done_fn done, void *arg);
/* Service uid's balancer was deleted: delete each certificate labelled
 * robotlb/service-uid=uid that no balancer uses (a managed one prismlb
 * made); the others, and uploaded ones, are never touched. */
HZ_HIDDEN void hz_cert_sweep(struct hz_kside *ks, const char *uid);

/* Start one reconcile (the Service has none in flight; the caller keeps
 * it so). 0: started, done runs once when it ends; -ENOMEM: nothing
 * started, done is not called. */
HZ_HIDDEN int hz_rec_start(struct hz_kside *ks, const struct hz_rec_req *req);

#endif
