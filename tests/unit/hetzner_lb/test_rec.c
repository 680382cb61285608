/*
 * The reconcile's state machine (modules/mod_hetzner_lb/hz_rec_step.c,
 * diagram in hz_rec.h) without a network: which step follows which, what
 * each Hetzner answer counts as, and how a reconcile ends.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "hz_rec.h"
#include "testutil.h"

static enum hz_rec_step
next(enum hz_rec_step step, enum hz_rec_end end, int have_lb, int by_name)
{
    struct hz_rec_view v = {.step = step, .end = end, .have_lb = have_lb, .by_name = by_name};
    return hz_rec_next(&v);
}

/* An answer of status with Hetzner's error code (NULL: none). */
static struct hz_result
answer(int status, const char *code)
{
    struct hz_result r = {.status = status, .code = code};
    return r;
}

START_TEST(a_labelled_balancer_goes_straight_to_the_network)
{
    ck_assert_int_eq(next(HZ_REC_START, HZ_REC_OK, 1, 0), HZ_REC_NETWORK);
    ck_assert_int_eq(next(HZ_REC_START, HZ_REC_OK, 1, 1), HZ_REC_NETWORK);
}
END_TEST

START_TEST(an_unlabelled_service_finds_its_names_in_the_shared_list)
{
    ck_assert_int_eq(next(HZ_REC_START, HZ_REC_OK, 0, 0), HZ_REC_NAMES);
    ck_assert_int_eq(next(HZ_REC_NAMES, HZ_REC_OK, 0, 0), HZ_REC_DECIDE);
}
END_TEST

START_TEST(after_a_taken_name_its_names_are_looked_up_one_by_one)
{
    /* the create meets a name the lists did not show ... */
    struct hz_result r = answer(409, "uniqueness_error");
    ck_assert_int_eq(hz_rec_create_answer(&r, 1), HZ_ANS_NAME_TAKEN);
    ck_assert_int_eq(hz_rec_answer_end(HZ_ANS_NAME_TAKEN), HZ_REC_RECHECK);
    ck_assert_int_eq(next(HZ_REC_CREATE, HZ_REC_RECHECK, 0, 0), HZ_REC_DONE);
    /* ... and the next reconcile of that Service asks by name */
    ck_assert_int_eq(next(HZ_REC_START, HZ_REC_OK, 0, 1), HZ_REC_LOOKUP);
    ck_assert_int_eq(next(HZ_REC_LOOKUP, HZ_REC_OK, 0, 1), HZ_REC_DECIDE);
}
END_TEST

START_TEST(a_decision_goes_to_the_network_then_to_the_plan_or_the_create)
{
    ck_assert_int_eq(next(HZ_REC_DECIDE, HZ_REC_OK, 1, 0), HZ_REC_NETWORK); /* manage, adopt */
    ck_assert_int_eq(next(HZ_REC_DECIDE, HZ_REC_OK, 0, 0), HZ_REC_NETWORK); /* create */
    ck_assert_int_eq(next(HZ_REC_NETWORK, HZ_REC_OK, 1, 0), HZ_REC_PLAN);
    ck_assert_int_eq(next(HZ_REC_NETWORK, HZ_REC_OK, 0, 0), HZ_REC_CREATE);
    /* no target node, or the name is another's: nothing to decide yet */
    ck_assert_int_eq(next(HZ_REC_DECIDE, HZ_REC_WAIT, 0, 0), HZ_REC_DONE);
}
END_TEST

START_TEST(a_created_balancer_is_planned_and_the_plan_ends_it)
{
    struct hz_result r = answer(201, NULL);
    r.body = parse_json("{\"load_balancer\": {\"id\": 7, \"name\": \"web\"}}");
    ck_assert_int_eq(hz_rec_create_answer(&r, 1), HZ_ANS_DONE);
    ck_assert_int_eq(hz_rec_answer_end(HZ_ANS_DONE), HZ_REC_OK);
    ck_assert_int_eq(next(HZ_REC_CREATE, HZ_REC_OK, 1, 0), HZ_REC_PLAN);
    ck_assert_int_eq(next(HZ_REC_PLAN, HZ_REC_OK, 1, 0), HZ_REC_DONE);
    ck_assert_int_eq(next(HZ_REC_DONE, HZ_REC_OK, 1, 0), HZ_REC_DONE);
    json_decref(r.body);
    /* a 201 without the balancer is not one to go on with */
    r = answer(201, NULL);
    ck_assert_int_eq(hz_rec_create_answer(&r, 0), HZ_ANS_REFUSED);
}
END_TEST

START_TEST(a_target_refusing_the_create_makes_it_once_more_without_targets)
{
    struct hz_result r = answer(422, "invalid_input");
    ck_assert_int_eq(hz_rec_create_answer(&r, 1), HZ_ANS_WITHOUT_TARGETS);
    ck_assert_int_eq(hz_rec_answer_end(HZ_ANS_WITHOUT_TARGETS), HZ_REC_OK);
    /* no balancer yet and nothing went wrong: create again */
    ck_assert_int_eq(next(HZ_REC_CREATE, HZ_REC_OK, 0, 0), HZ_REC_CREATE);
    /* without targets the same answer is a refusal: rechecked */
    ck_assert_int_eq(hz_rec_create_answer(&r, 0), HZ_ANS_REFUSED);
    ck_assert_int_eq(hz_rec_answer_end(HZ_ANS_REFUSED), HZ_REC_RECHECK);
    ck_assert_int_eq(next(HZ_REC_CREATE, HZ_REC_RECHECK, 0, 0), HZ_REC_DONE);
}
END_TEST

START_TEST(an_answer_that_ends_it_makes_done_the_next_step_from_any_step)
{
    static const enum hz_rec_end ends[] = {HZ_REC_RECHECK, HZ_REC_WAIT, HZ_REC_CANCELLED};
    for (int s = HZ_REC_START; s <= HZ_REC_DONE; s++)
        for (size_t e = 0; e < sizeof(ends) / sizeof(ends[0]); e++)
            for (int lb = 0; lb < 2; lb++)
                ck_assert_msg(next((enum hz_rec_step)s, ends[e], lb, lb) == HZ_REC_DONE,
                              "step %s, end %d", hz_rec_step_name((enum hz_rec_step)s),
                              (int)ends[e]);
}
END_TEST

START_TEST(every_path_reaches_done_and_start_is_never_next)
{
    /* from any step, at most 8 moves reach DONE, whatever the balancer */
    for (int s = HZ_REC_START; s <= HZ_REC_DONE; s++)
        for (int lb = 0; lb < 2; lb++)
            for (int bn = 0; bn < 2; bn++) {
                enum hz_rec_step st = (enum hz_rec_step)s;
                int moves = 0;
                while (st != HZ_REC_DONE && moves < 8) {
                    st = next(st, HZ_REC_OK, lb || st == HZ_REC_CREATE, bn);
                    ck_assert_int_ne(st, HZ_REC_START);
                    moves++;
                }
                ck_assert_int_eq(st, HZ_REC_DONE);
            }
}
END_TEST

START_TEST(a_new_service_walks_names_decide_network_create_plan)
{
    static const enum hz_rec_step want[] = {HZ_REC_NAMES,  HZ_REC_DECIDE, HZ_REC_NETWORK,
                                            HZ_REC_CREATE, HZ_REC_CREATE, HZ_REC_PLAN,
                                            HZ_REC_DONE};
    enum hz_rec_step st = HZ_REC_START;
    int have_lb = 0;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        st = next(st, HZ_REC_OK, have_lb, 0);
        ck_assert_str_eq(hz_rec_step_name(st), hz_rec_step_name(want[i]));
        if (st == HZ_REC_CREATE && i == 4)
            have_lb = 1; /* the second create (without targets) made it */
    }
}
END_TEST

START_TEST(the_worst_answer_decides_how_it_ends)
{
    ck_assert_int_eq(hz_rec_worse(HZ_REC_OK, HZ_REC_RECHECK), HZ_REC_RECHECK);
    ck_assert_int_eq(hz_rec_worse(HZ_REC_RECHECK, HZ_REC_OK), HZ_REC_RECHECK);
    /* a dry run beside a refused write: looked at again at the resync */
    ck_assert_int_eq(hz_rec_worse(HZ_REC_RECHECK, HZ_REC_WAIT), HZ_REC_WAIT);
    ck_assert_int_eq(hz_rec_worse(HZ_REC_WAIT, HZ_REC_RECHECK), HZ_REC_WAIT);
    /* the gate closing overrides everything: the next leader decides */
    ck_assert_int_eq(hz_rec_worse(HZ_REC_WAIT, HZ_REC_CANCELLED), HZ_REC_CANCELLED);
    ck_assert_int_eq(hz_rec_worse(HZ_REC_CANCELLED, HZ_REC_OK), HZ_REC_CANCELLED);
}
END_TEST

START_TEST(a_plan_write_is_done_already_refused_or_failed)
{
    struct hz_result r = answer(201, NULL);
    ck_assert_int_eq(hz_rec_op_answer(HZ_OP_ADD_SERVICE, &r), HZ_ANS_DONE);
    r = answer(200, NULL);
    r.action_failed = 1; /* the action ended in error */
    ck_assert_int_eq(hz_rec_op_answer(HZ_OP_ADD_SERVICE, &r), HZ_ANS_REFUSED);
    /* already as wanted: the list it planned from was older */
    r = answer(422, "target_already_defined");
    ck_assert_int_eq(hz_rec_op_answer(HZ_OP_ADD_TARGET, &r), HZ_ANS_ALREADY);
    ck_assert_int_eq(hz_rec_op_answer(HZ_OP_ADD_SERVICE, &r), HZ_ANS_REFUSED);
    r = answer(404, "not_found");
    ck_assert_int_eq(hz_rec_op_answer(HZ_OP_REMOVE_TARGET, &r), HZ_ANS_ALREADY);
    ck_assert_int_eq(hz_rec_op_answer(HZ_OP_CHANGE_TYPE, &r), HZ_ANS_REFUSED);
    /* a target outside the vSwitch subnet: refused, the Service warned */
    r = answer(422, "invalid_input");
    ck_assert_int_eq(hz_rec_op_answer(HZ_OP_ADD_TARGET, &r), HZ_ANS_REFUSED);
    ck_assert_int_eq(hz_rec_answer_end(HZ_ANS_ALREADY), HZ_REC_OK);
    /* no answer: failed, no Event */
    r = answer(0, NULL);
    r.err = -EIO;
    ck_assert_int_eq(hz_rec_op_answer(HZ_OP_ADD_TARGET, &r), HZ_ANS_FAILED);
    ck_assert_int_eq(hz_rec_answer_end(HZ_ANS_FAILED), HZ_REC_RECHECK);
    r.err = -ECANCELED;
    ck_assert_int_eq(hz_rec_op_answer(HZ_OP_ADD_TARGET, &r), HZ_ANS_CANCELLED);
    ck_assert_int_eq(hz_rec_answer_end(HZ_ANS_CANCELLED), HZ_REC_CANCELLED);
}
END_TEST

START_TEST(a_dry_run_write_waits_for_the_resync)
{
    struct hz_result r = answer(0, NULL);
    r.dry_run = 1;
    ck_assert_int_eq(hz_rec_op_answer(HZ_OP_ADD_TARGET, &r), HZ_ANS_DRY_RUN);
    ck_assert_int_eq(hz_rec_create_answer(&r, 1), HZ_ANS_DRY_RUN);
    ck_assert_int_eq(hz_rec_answer_end(HZ_ANS_DRY_RUN), HZ_REC_WAIT);
}
END_TEST

START_TEST(a_create_refused_or_cut_off)
{
    struct hz_result r = answer(422, "invalid_input");
    ck_assert_int_eq(hz_rec_create_answer(&r, 0), HZ_ANS_REFUSED);
    r = answer(0, NULL);
    r.err = -EIO;
    ck_assert_int_eq(hz_rec_create_answer(&r, 1), HZ_ANS_FAILED);
    r.err = -ECANCELED;
    ck_assert_int_eq(hz_rec_create_answer(&r, 1), HZ_ANS_CANCELLED);
}
END_TEST

START_TEST(a_lookup_is_read_only_from_a_200)
{
    struct hz_result r = answer(200, NULL);
    ck_assert_int_eq(hz_rec_get_answer(&r), HZ_ANS_DONE);
    r = answer(404, "not_found");
    ck_assert_int_eq(hz_rec_get_answer(&r), HZ_ANS_FAILED);
    r = answer(503, NULL);
    ck_assert_int_eq(hz_rec_get_answer(&r), HZ_ANS_FAILED);
    r = answer(0, NULL);
    r.err = -ECANCELED;
    ck_assert_int_eq(hz_rec_get_answer(&r), HZ_ANS_CANCELLED);
}
END_TEST

START_TEST(every_step_has_a_name_for_the_log)
{
    ck_assert_str_eq(hz_rec_step_name(HZ_REC_START), "start");
    ck_assert_str_eq(hz_rec_step_name(HZ_REC_PLAN), "plan");
    ck_assert_str_eq(hz_rec_step_name(HZ_REC_DONE), "done");
    for (int s = HZ_REC_START; s <= HZ_REC_DONE; s++)
        ck_assert_str_ne(hz_rec_step_name((enum hz_rec_step)s), "?");
    ck_assert_str_eq(hz_rec_step_name((enum hz_rec_step)99), "?");
}
END_TEST

/* Certificate names without their IDs are looked up first; then the
 * reconcile goes on as from the start; a name not found ends it. */
START_TEST(certificate_names_are_looked_up_before_anything_else)
{
    struct hz_rec_view v = {.step = HZ_REC_START, .certs = 1};
    ck_assert_int_eq(hz_rec_next(&v), HZ_REC_CERTS);
    v.step = HZ_REC_CERTS;
    ck_assert_int_eq(hz_rec_next(&v), HZ_REC_NAMES);
    v.have_lb = 1;
    ck_assert_int_eq(hz_rec_next(&v), HZ_REC_NETWORK);
    v.end = HZ_REC_RECHECK;
    ck_assert_int_eq(hz_rec_next(&v), HZ_REC_DONE);
    ck_assert_str_eq(hz_rec_step_name(HZ_REC_CERTS), "certs");
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb reconcile steps");
    TCase *tc = tcase_create("steps");
    tcase_add_test(tc, a_labelled_balancer_goes_straight_to_the_network);
    tcase_add_test(tc, certificate_names_are_looked_up_before_anything_else);
    tcase_add_test(tc, an_unlabelled_service_finds_its_names_in_the_shared_list);
    tcase_add_test(tc, after_a_taken_name_its_names_are_looked_up_one_by_one);
    tcase_add_test(tc, a_decision_goes_to_the_network_then_to_the_plan_or_the_create);
    tcase_add_test(tc, a_created_balancer_is_planned_and_the_plan_ends_it);
    tcase_add_test(tc, a_target_refusing_the_create_makes_it_once_more_without_targets);
    tcase_add_test(tc, an_answer_that_ends_it_makes_done_the_next_step_from_any_step);
    tcase_add_test(tc, every_path_reaches_done_and_start_is_never_next);
    tcase_add_test(tc, a_new_service_walks_names_decide_network_create_plan);
    tcase_add_test(tc, the_worst_answer_decides_how_it_ends);
    tcase_add_test(tc, a_plan_write_is_done_already_refused_or_failed);
    tcase_add_test(tc, a_dry_run_write_waits_for_the_resync);
    tcase_add_test(tc, a_create_refused_or_cut_off);
    tcase_add_test(tc, a_lookup_is_read_only_from_a_200);
    tcase_add_test(tc, every_step_has_a_name_for_the_log);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
