/*
 * hz_rec_step.c: the decisions of one Service's reconcile that need no
 * world (see hz_rec.h): which step follows which, how each Hetzner answer
 * counts, and how a reconcile ends. No I/O, no host.
 */
#include <errno.h>
#include <string.h>

#include "hz_rec.h"

enum hz_rec_step
hz_rec_next(const struct hz_rec_view *v)
{
    if (v->step == HZ_REC_DONE || v->end != HZ_REC_OK)
        return HZ_REC_DONE;
    switch (v->step) {
    case HZ_REC_START:
        if (v->certs)
            return HZ_REC_CERTS;
        /* fall through */
    case HZ_REC_CERTS:
        if (v->have_lb || v->group)
            return HZ_REC_NETWORK;
        return v->by_name ? HZ_REC_LOOKUP : HZ_REC_NAMES;
    case HZ_REC_NAMES:
    case HZ_REC_LOOKUP:
        return HZ_REC_DECIDE;
    case HZ_REC_DECIDE:
        return HZ_REC_NETWORK;
    case HZ_REC_NETWORK:
    case HZ_REC_CREATE:
        return v->have_lb ? HZ_REC_PLAN : HZ_REC_CREATE;
    case HZ_REC_PLAN:
    case HZ_REC_DONE:
        break;
    }
    return HZ_REC_DONE;
}

enum hz_rec_end
hz_rec_worse(enum hz_rec_end a, enum hz_rec_end b)
{
    return a > b ? a : b;
}

enum hz_rec_end
hz_rec_answer_end(enum hz_rec_answer a)
{
    switch (a) {
    case HZ_ANS_DONE:
    case HZ_ANS_ALREADY:
    case HZ_ANS_WITHOUT_TARGETS:
        return HZ_REC_OK;
    case HZ_ANS_DRY_RUN:
        return HZ_REC_WAIT;
    case HZ_ANS_REFUSED:
    case HZ_ANS_FAILED:
    case HZ_ANS_NAME_TAKEN:
        return HZ_REC_RECHECK;
    case HZ_ANS_CANCELLED:
        return HZ_REC_CANCELLED;
    }
    return HZ_REC_RECHECK;
}

static int
has_code(const struct hz_result *res, const char *code)
{
    return res->code && strcmp(res->code, code) == 0;
}

enum hz_rec_answer
hz_rec_op_answer(enum hz_op_kind kind, const struct hz_result *res)
{
    if (res->err == -ECANCELED)
        return HZ_ANS_CANCELLED;
    if (res->dry_run)
        return HZ_ANS_DRY_RUN;
    if (res->err == 0 && res->status >= 200 && res->status < 300 && !res->action_failed)
        return HZ_ANS_DONE;
    if ((kind == HZ_OP_ADD_TARGET && has_code(res, "target_already_defined")) ||
        (kind == HZ_OP_REMOVE_TARGET && res->status == 404))
        return HZ_ANS_ALREADY;
    return res->err ? HZ_ANS_FAILED : HZ_ANS_REFUSED;
}

enum hz_rec_answer
hz_rec_create_answer(const struct hz_result *res, int with_targets)
{
    if (res->err == -ECANCELED)
        return HZ_ANS_CANCELLED;
    if (res->dry_run)
        return HZ_ANS_DRY_RUN;
    if (res->status == 201 && json_object_get(res->body, "load_balancer"))
        return HZ_ANS_DONE;
    if (res->status == 422 && with_targets)
        return HZ_ANS_WITHOUT_TARGETS;
    if (has_code(res, "uniqueness_error"))
        return HZ_ANS_NAME_TAKEN;
    return res->err ? HZ_ANS_FAILED : HZ_ANS_REFUSED;
}

enum hz_rec_answer
hz_rec_get_answer(const struct hz_result *res)
{
    if (res->err == -ECANCELED)
        return HZ_ANS_CANCELLED;
    return res->status == 200 ? HZ_ANS_DONE : HZ_ANS_FAILED;
}

const char *
hz_rec_step_name(enum hz_rec_step s)
{
    static const char *const names[] = {
        [HZ_REC_START] = "start",   [HZ_REC_CERTS] = "certs",   [HZ_REC_NAMES] = "names",
        [HZ_REC_LOOKUP] = "lookup", [HZ_REC_DECIDE] = "decide", [HZ_REC_NETWORK] = "network",
        [HZ_REC_CREATE] = "create", [HZ_REC_PLAN] = "plan",     [HZ_REC_DONE] = "done",
    };
    return (size_t)s < sizeof(names) / sizeof(names[0]) && names[s] ? names[s] : "?";
}
