/*
 * loop.h: private to mod_tcp_proxy's loop.c and workers.c. The upstream set
 * the main loop publishes for the workers, the reports a worker posts back,
 * and what workers.c calls of loop.c (tp.h declares what conn.c calls).
 */
#ifndef TP_LOOP_H
#define TP_LOOP_H

#include <stdint.h>
#include <sys/socket.h>

#include "tp.h"

/* ------------------------------------------------------------------------ */
/* The snapshot (published by workers.c, read by loop.c)                   */

struct tp_snap {
    const struct plb_host *host;
    size_t n;
    struct tp_up **ups; /* n records, each the first member of its entry */
    enum tp_selection sel;
    enum tp_check_kind check;
};

/* One upstream as published: a copy of the pool's record and the address
 * client dials go to. */
struct snap_ent {
    struct tp_up up; /* up.addr owned, up.data unused */
    struct sockaddr_storage sa;
    socklen_t salen;
};

/* ------------------------------------------------------------------------ */
/* Reports: worker to main                                                  */

struct tp_event {
    float value; /* a duration in seconds (see tp_loop_report_value) */
    uint32_t id;
    uint32_t seq; /* TP_EV_DRAIN_SEEN: which drain */
    uint8_t kind; /* enum tp_event_kind */
    uint8_t flip; /* set by the main loop (workers.c): the dial outcome
                     changed the upstream's health, or 0 */
};

/* A batch of a worker's reports for the main loop (new: its handler frees
 * ev and the batch). */
struct tp_report {
    struct tp *tp;
    struct tp_loop *lp;
    struct tp_event *ev;
    size_t n;
};

/* The record of upstream id on lp (worker only), or NULL. */
struct tp_upd *tp_loop_rec_find(struct tp_loop *lp, uint32_t id);
/* Free every record of lp and their array (their connections closed
 * before). */
void tp_loop_recs_free(struct tp_loop *lp);
/* lp->flush's callback (arg: lp): post the reports not yet sent to the
 * main loop's lp->on_report; out of memory, retried shortly. */
void tp_loop_flush(plb_timer *t, void *arg);

#endif
