/*
 * A Lease write answered 200 with something that is not our Lease opens
 * no gate. The fake API server answers the election's create (POST) or
 * renew (PUT) with an HTML page, or with a Lease whose fields have the
 * wrong types, or one naming another holder; the daemon must count each
 * as a failed attempt: its gated writer never writes, and a leader whose
 * renews get such answers loses the Lease at renew_deadline and does not
 * lead again while they last.
 */
#include "env.h"

#define LEASES "/apis/coordination.k8s.io/v1/namespaces/default/leases"

static void
set_faults(struct le_env *e, const char *method, const char *body, const char *ctype)
{
    json_t *f = json_pack("{s:i, s:i, s:s, s:s, s:s, s:s}", "fail_count", 100000, "fail_status",
                          200, "fail_match", "/leases/prismlb-test", "fail_method", method,
                          "fail_body", body, "fail_content_type", ctype);
    ck_assert_ptr_nonnull(f);
    char *text = json_dumps(f, JSON_COMPACT);
    json_decref(f);
    struct http_res r;
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(fake_admin(&e->f, "POST", "/faults", text, &r), 0);
    ck_assert_msg(r.status == 200, "POST /faults: %ld %s", r.status, r.body);
    http_res_free(&r);
    free(text);
}

static void
clear_faults(struct le_env *e)
{
    struct http_res r;
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(fake_admin(&e->f, "DELETE", "/faults", NULL, &r), 0);
    http_res_free(&r);
}

static size_t
writer_writes(struct le_env *e)
{
    size_t n = 0, ok = 0;
    struct le_write *w = le_writes(e, &n);
    for (size_t i = 0; i < n; i++)
        ok += w[i].status / 100 == 2;
    free(w);
    return ok;
}

/* The Lease is created by a POST to the collection, so its path does not
 * name the Lease: seed it so that every write is a PUT on its path. */
static void
seed_lease(struct le_env *e, const char *holder)
{
    char body[512];
    struct http_res r;
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
             "\"metadata\":{\"name\":\"prismlb-test\"},\"spec\":{\"holderIdentity\":\"%s\","
             "\"leaseDurationSeconds\":1,\"renewTime\":\"2001-01-01T00:00:00.000000Z\"}}",
             holder);
    long st = le_api(e, "POST", LEASES, body, NULL, &r);
    ck_assert_msg(st == 201, "seeding the Lease: %ld %s", st, r.body);
    http_res_free(&r);
}

START_TEST(garbage_write_answers_open_no_gate)
{
    static const char *const bodies[][3] = {
        {"<html><body>Welcome to nginx!</body></html>\n", "text/html",
         "the answer is not a JSON object"},
        {"{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":"
         "{\"name\":\"prismlb-test\",\"namespace\":\"default\",\"resourceVersion\":\"9\"},"
         "\"spec\":{\"holderIdentity\":\"garbage\",\"renewTime\":12,"
         "\"leaseDurationSeconds\":\"3\"}}",
         "application/json", "the Lease has a field of the wrong type"},
        {"{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":"
         "{\"name\":\"prismlb-test\",\"namespace\":\"default\",\"resourceVersion\":\"9\"},"
         "\"spec\":{\"holderIdentity\":\"someone-else\",\"leaseDurationSeconds\":3}}",
         "application/json", "the answer names another holder"},
    };
    for (size_t i = 0; i < 3; i++) {
        struct le_env e;
        struct le_daemon d = {0};
        le_env_start(&e, 0);
        seed_lease(&e, "");
        set_faults(&e, "PUT", bodies[i][0], bodies[i][1]);
        char id[32];
        snprintf(id, sizeof(id), "garbage-%zu", i);
        le_daemon_start(&e, &d, id, &le_short);
        le_daemon_wait_log(&d, bodies[i][2], 10000);
        /* Several attempts later, still no writer write and no leading. */
        tu_sleep_ms(2000);
        ck_assert_uint_eq(writer_writes(&e), 0);
        ck_assert(!tu_file_has(d.td.log, "started leading"));

        /* A real answer: it leads and the writer writes. */
        clear_faults(&e);
        long long until = tu_now_ms() + 15000;
        while (writer_writes(&e) == 0 && tu_now_ms() < until)
            tu_sleep_ms(100);
        char *log = le_daemon_log(&d);
        ck_assert_msg(writer_writes(&e) > 0, "no writer write once the answers are real:\n%s", log);
        free(log);
        le_daemon_stop(&d, SIGTERM, 10000);
        le_env_stop(&e);
    }
}
END_TEST

/* A leader whose renews are answered with an HTML page loses at
 * renew_deadline, closes its gate, and does not lead again while the
 * answers stay garbage (no flapping). */
START_TEST(leader_renewed_with_garbage_loses_and_stays_out)
{
    struct le_env e;
    struct le_daemon d = {0};
    le_env_start(&e, 0);
    seed_lease(&e, "");
    le_daemon_start(&e, &d, "renewer", &le_short);
    long long until = tu_now_ms() + 15000;
    while (writer_writes(&e) == 0 && tu_now_ms() < until)
        tu_sleep_ms(100);
    ck_assert_uint_gt(writer_writes(&e), 0);

    set_faults(&e, "PUT", "<html>maintenance</html>", "text/html");
    le_daemon_wait_log(&d, "no renew succeeded within renew_deadline", 10000);
    /* The gate is closed: the writer stops; it stays stopped. Counted
     * from the close itself (its log line), not from a pause after the
     * loss: a write the writer had already sent may still land (at most
     * one), none after it. */
    le_daemon_wait_log(&d, "msg=\"gate closed\"", 10000);
    size_t after_loss = writer_writes(&e);
    tu_sleep_ms(3000);
    ck_assert_uint_le(writer_writes(&e), after_loss + 1);
    char *log = le_daemon_log(&d);
    const char *first = strstr(log, "started leading");
    ck_assert_ptr_nonnull(first);
    ck_assert_msg(strstr(first + 1, "started leading") == NULL, "led again on garbage:\n%s", log);
    free(log);
    le_daemon_stop(&d, SIGTERM, 10000);
    le_env_stop(&e);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("leader-answers");
    TCase *tc = tcase_create("answers");
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, garbage_write_answers_open_no_gate);
    tcase_add_test(tc, leader_renewed_with_garbage_loses_and_stays_out);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
