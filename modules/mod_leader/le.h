/*
 * le.h: private to mod_leader. The election state machine (le_machine.c,
 * pure: no I/O, no allocation, clock and random injected), MicroTime text
 * (le_time.c), the settings (le_settings.c) and the module (mod_leader.c)
 * that drives the machine with the daemon's timers, Kubernetes client and
 * gate.
 *
 * The algorithm is client-go's leaderelection with a LeaseLock:
 *
 *   - An attempt (tryAcquireOrRenew) is GET the Lease; when it is missing,
 *     create it holding it; else remember the record, restarting the
 *     observed time (monotonic) whenever the record differs from the one
 *     observed before; give up the attempt while another holder's lease is
 *     valid (observed time + the Lease's own leaseDurationSeconds not yet
 *     passed); else PUT the new record with the resourceVersion of the GET.
 *     Taking over from another (or no) holder increments leaseTransitions
 *     and sets acquireTime; renewing our own keeps both.
 *   - A candidate attempts at once, then every retry_period lengthened by
 *     up to 1.2 × retry_period at random (wait.JitterUntil, factor 1.2,
 *     sliding); but no later than the moment the lease it observed held by
 *     another expires (client-go waits for its next jittered attempt, up
 *     to 2.2 × retry_period more).
 *   - A leader attempts every retry_period (sliding) and loses when
 *     renew_deadline passes without a successful renew; the request in
 *     flight then is cancelled.
 *   - A release (on stop, when release_on_cancel) writes holder "" and
 *     leaseDurationSeconds 1 on the last object read or written, so a
 *     candidate takes over at its next attempt.
 *
 * Where this machine is stricter than client-go, for the gate's sake:
 *   - renew_deadline counts from the sending of the last successful write
 *     (client-go counts from the start of the renew cycle, retry_period
 *     after the write completed): the leader closes its gate at the latest
 *     renew_deadline after another replica could first have observed its
 *     last renew, whatever the request latency, leaving the whole
 *     lease_duration - renew_deadline as margin;
 *   - a leader that reads another holder (or none) in the Lease, or whose
 *     renew PUT gets 409 Conflict, has lost at once (client-go keeps
 *     trying until renew_deadline);
 *   - after a loss the machine does not exit: it closes the gate, waits for
 *     the gated instances to complete their stop, and only then starts a
 *     new term (attempting at once, as a fresh client-go Run would).
 */
#ifndef LE_H
#define LE_H

#include <stddef.h>
#include <stdint.h>

/* Sizes of the text fields of a record. A Lease whose holderIdentity does
 * not fit is treated as unreadable (the attempt fails). */
#define LE_HOLDER_MAX 512
#define LE_TIME_MAX 40
#define LE_RV_MAX 64
#define LE_STRATEGY_MAX 128

/* The leader election record: the spec of a coordination.k8s.io/v1 Lease
 * as client-go's LeaseLock reads and writes it. Times are MicroTime text
 * ("2006-01-02T15:04:05.000000Z07:00"), "" when absent. */
struct le_record {
    char holder[LE_HOLDER_MAX];     /* holderIdentity, "" for none */
    int64_t duration_s;             /* leaseDurationSeconds, 0 when absent */
    char acquire_time[LE_TIME_MAX]; /* acquireTime */
    char renew_time[LE_TIME_MAX];   /* renewTime */
    int64_t transitions;            /* leaseTransitions */
    char strategy[LE_STRATEGY_MAX]; /* spec.strategy, carried unchanged */
    char preferred[LE_HOLDER_MAX];  /* spec.preferredHolder, carried unchanged */
};

/* 1 when a and b are the same record (client-go compares the raw record). */
int le_record_equal(const struct le_record *a, const struct le_record *b);

/* Format wall_ms (milliseconds since the epoch) as a Kubernetes MicroTime
 * in UTC: "2026-11-29T15:04:05.123000Z". buf of at least LE_TIME_MAX
 * bytes. 0, or -1 if the time cannot be represented. */
int le_microtime(int64_t wall_ms, char *buf, size_t len);

/* The outcome of a request, borrowed for the call. */
struct le_result {
    int status;                  /* HTTP status; 0 when no response came */
    const char *message;         /* the Status message or transport error, or NULL */
    const struct le_record *rec; /* 2xx on a Lease: its record, else NULL
                                    (a 2xx without a readable record fails the
                                    attempt; so does a write answer whose
                                    holder is not us or whose renewTime is
                                    not the one sent) */
    const char *rv;              /* 2xx: the object's resourceVersion */
};

/* Why the machine writes a log line (see le_ops.note). */
enum le_note {
    LE_NOTE_ATTEMPT_FAILED = 1, /* a request failed or timed out (detail) */
    LE_NOTE_HELD,               /* held by another holder (detail: holder) */
    LE_NOTE_CREATED,            /* we created the Lease */
    LE_NOTE_NS_MISSING,         /* creating failed: the namespace does not exist */
    LE_NOTE_CONFLICT,           /* 409: somebody else wrote first */
    LE_NOTE_LOST_DEADLINE,      /* leader: renew_deadline passed */
    LE_NOTE_LOST_HOLDER,        /* leader: the Lease names another holder (detail) */
    LE_NOTE_LOST_CONFLICT,      /* leader: the renew got 409 */
    LE_NOTE_RELEASED,           /* the Lease was released */
    LE_NOTE_RELEASE_FAILED,     /* releasing failed (detail) */
    LE_NOTE_RELEASE_SKIPPED,    /* stop: the gated stop did not finish in time */
};

/* What the machine asks of its driver. arg is le_ops_arg. Requests
 * complete later through le_get_done / le_write_done, never inside the
 * call; at most one request is in flight. */
struct le_ops {
    int64_t (*now_ms)(void *arg);  /* monotonic milliseconds */
    int64_t (*wall_ms)(void *arg); /* milliseconds since the epoch */
    double (*random)(void *arg);   /* uniform in [0, 1) */
    /* GET the Lease. 0 or -errno (the attempt then fails). */
    int (*get)(void *arg);
    /* POST a Lease holding r. 0 or -errno. */
    int (*create)(void *arg, const struct le_record *r);
    /* PUT the last object read or written with spec r and
     * metadata.resourceVersion rv. 0 or -errno. */
    int (*update)(void *arg, const struct le_record *r, const char *rv);
    /* Cancel the request in flight (its completion is not delivered). */
    void (*cancel)(void *arg);
    /* Call le_tick at monotonic time at_ms (replacing any earlier wish);
     * at_ms < 0: no wake-up needed. */
    void (*wake_at)(void *arg, int64_t at_ms);
    /* Open the gate (open = 1), or close it (open = 0): le_gate_closed
     * must follow once every gated instance completed its stop, possibly
     * from inside this call. 0 or -errno (a failed close counts as closed). */
    int (*gate)(void *arg, int open);
    /* This replica became (1) or stopped being (0) the leader. */
    void (*leading)(void *arg, int is_leader);
    /* The observed holder changed (old and new borrowed, "" for none). */
    void (*holder)(void *arg, const char *old_holder, const char *new_holder);
    /* A write holding the Lease succeeded, stamped wall_ms. */
    void (*renewed)(void *arg, int64_t wall_ms);
    /* A log line's worth (detail borrowed, may be NULL). */
    void (*note)(void *arg, enum le_note what, const char *detail);
    /* le_stop completed: nothing is in flight any more. */
    void (*stopped)(void *arg);
};

struct le_params {
    const char *identity;      /* borrowed for the machine's life */
    int64_t lease_duration_ms; /* written as leaseDurationSeconds (whole s) */
    int64_t renew_deadline_ms;
    int64_t retry_period_ms;
    int release_on_cancel;
};

enum le_state {
    LE_INIT = 0,  /* not started */
    LE_CANDIDATE, /* attempting to acquire */
    LE_LEADER,    /* holding the Lease, gate open */
    LE_CLOSING,   /* lost or stopping: waiting for the gated stops */
    LE_RELEASING, /* stopping: the release write is in flight */
    LE_STOPPED,   /* stopped; no request, no wake-up */
};

enum le_req {
    LE_REQ_NONE = 0,
    LE_REQ_GET,
    LE_REQ_CREATE,
    LE_REQ_UPDATE,
    LE_REQ_RELEASE,
    LE_REQ_RELEASE_GET, /* re-reading after the release got 409 */
};

/* The machine. Fields are readable by tests; change them only through the
 * functions below. */
struct le {
    struct le_params p;
    const struct le_ops *ops;
    void *arg;

    enum le_state state;
    enum le_req req;
    int64_t req_sent;      /* monotonic time the request in flight was sent */
    int64_t req_deadline;  /* it is cancelled at this time */
    struct le_record sent; /* what the write in flight writes */
    int64_t next_attempt;  /* when no request is in flight: next attempt */
    int64_t lead_deadline; /* leader: last successful write sent + renew_deadline */

    struct le_record observed; /* the last record read or written */
    int have_observed;
    int64_t observed_ms; /* monotonic time it last changed */
    char rv[LE_RV_MAX];  /* resourceVersion of the last object received */

    int stopping;
    int64_t stop_deadline;
    int release_tries;
    uint64_t term; /* leadership terms won so far */
};

/* Initialise m (caller-owned memory) with parameters and operations, both
 * borrowed for m's life. Nothing runs until le_start. */
void le_init(struct le *m, const struct le_params *p, const struct le_ops *ops, void *arg);
/* Start campaigning: the first attempt runs at once. */
void le_start(struct le *m);
/* The time asked for with wake_at came (or any time: early calls are
 * harmless). */
void le_tick(struct le *m);
/* The GET, or the create/update/release write, completed. */
void le_get_done(struct le *m, const struct le_result *r);
void le_write_done(struct le *m, const struct le_result *r);
/* Every gated instance completed its stop after a gate close. */
void le_gate_closed(struct le *m);
/* Stop campaigning: close the gate if leading, wait for the gated stops,
 * release the Lease when release_on_cancel and this replica holds it, then
 * call ops->stopped; all within grace_ms (the release is skipped or
 * abandoned when time runs out). A release that gets 409 (a renew in
 * flight when stopping may have landed) re-reads the Lease and releases
 * again while it still names this replica, up to 3 writes. */
void le_stop(struct le *m, int64_t grace_ms);
/* Forget everything in flight without calling back (destroy path). */
void le_abandon(struct le *m);

/* 1 while holding the Lease with the gate open. */
int le_is_leader(const struct le *m);

#endif
