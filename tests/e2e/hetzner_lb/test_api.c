/*
 * mod_hetzner_lb's Hetzner API client (modules/mod_hetzner_lb/hz_api*.c)
 * against prismlb-fake-hcloud, on the core's real reactor and HTTP client:
 * pacing within the RateLimit budget, waiting for the reset after a 429,
 * per-balancer lanes whose action waits do not hold up other balancers,
 * `locked` retried, pagination at 50 per page, error bodies, the token
 * file re-read per request, and dry run (only GETs reach the API).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "hz_api.h"
#include "hzt.h"
#include "testutil.h"

#define SEED                                                                                       \
    "{\"tokens\":[\"tok-a\",\"tok-b\"],"                                                           \
    "\"networks\":[{\"id\":7,\"name\":\"k8s\",\"ip_range\":\"10.0.0.0/16\",\"subnets\":["          \
    "{\"type\":\"cloud\",\"ip_range\":\"10.0.0.0/24\",\"network_zone\":\"eu-central\"},"           \
    "{\"type\":\"vswitch\",\"ip_range\":\"10.0.1.0/24\",\"network_zone\":\"eu-central\","          \
    "\"vswitch_id\":4242}]}],"                                                                     \
    "\"load_balancers\":["                                                                         \
    "{\"id\":1,\"name\":\"a.shop\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\","         \
    "\"network\":7,\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.10\"}}],"                 \
    "\"services\":[{\"protocol\":\"tcp\",\"listen_port\":80,\"destination_port\":30080}],"         \
    "\"labels\":{\"robotlb/service-uid\":\"uid-a\"}},"                                             \
    "{\"id\":2,\"name\":\"b.shop\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\","         \
    "\"network\":7,\"labels\":{\"robotlb/service-uid\":\"uid-b\"}},"                               \
    "{\"id\":3,\"name\":\"web\",\"load_balancer_type\":\"lb11\",\"location\":\"hel1\","            \
    "\"network\":7,\"targets\":[{\"type\":\"ip\",\"ip\":{\"ip\":\"10.0.1.11\"}}]}]}"

struct rec {
    int done;
    int err, status, dry_run, action_failed;
    int64_t action_id;
    char code[64];
    long long t_ms; /* when the callback ran */
    size_t items;
};

static struct th th;
static struct hzt_fake fake;
static struct hz_api *api;
static char token_path[512];

static void
on_result(void *arg, const struct hz_result *r)
{
    struct rec *x = arg;
    x->done = 1;
    x->err = r->err;
    x->status = r->status;
    x->dry_run = r->dry_run;
    x->action_failed = r->action_failed;
    x->action_id = r->action_id;
    snprintf(x->code, sizeof(x->code), "%s", r->code ? r->code : "");
    x->t_ms = tu_now_ms();
}

static void
on_list(void *arg, const struct hz_result *r, json_t *items)
{
    struct rec *x = arg;
    on_result(arg, r);
    x->items = items ? json_array_size(items) : (size_t)-1;
}

/* The pages hz_api_list_pages handed over: their sizes; fail_at > 0 ends
 * the list with -EINVAL at that page. */
struct pages {
    size_t n, size[8];
    size_t fail_at;
};

static int
on_page(void *arg, json_t *items)
{
    struct pages *p = arg;
    if (p->n < 8)
        p->size[p->n] = json_array_size(items);
    p->n++;
    return p->fail_at && p->n == p->fail_at ? -EINVAL : 0;
}

/* hz_api_list_pages's arg is both: the pages first, then the result. */
struct paged {
    struct pages p;
    struct rec r;
};

static int
on_paged_page(void *arg, json_t *items)
{
    return on_page(&((struct paged *)arg)->p, items);
}

static void
on_paged(void *arg, const struct hz_result *r, json_t *items)
{
    on_list(&((struct paged *)arg)->r, r, items);
}

/* Start the fake with extra args and a client on it (token from a file). */
static void
start(const char *const *args, int dry_run)
{
    ck_assert_int_eq(hzt_start(&fake, SEED, args), 0);
    ck_assert_int_eq(th_init(&th), 0);
    snprintf(token_path, sizeof(token_path), "%s/token", fake.dir);
    ck_assert_int_eq(tu_write_file(token_path, "tok-a\n"), 0);
    hz_mem_use(fake_host(&th.host));
    struct hz_api_cfg cfg = {.host = fake_host(&th.host),
                             .ctx = th.ctx,
                             .endpoint = fake.url,
                             .token_file = token_path,
                             .dry_run = dry_run,
                             .timeout_ms = 10000};
    ck_assert_int_eq(hz_api_new(&cfg, &api), 0);
}

static void
stop(void)
{
    hz_api_free(api);
    api = NULL;
    th_fini(&th);
    ck_assert_int_eq(hzt_stop(&fake), 0);
}

/* The fake's request log (new JSON). */
static json_t *
request_log(void)
{
    struct hzt_resp r;
    ck_assert_int_eq(hzt_req(&fake, "GET", "/_admin/requests", NULL, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    json_t *b = json_incref(r.body);
    hzt_resp_free(&r);
    return b;
}

static int
count_status(json_t *log, int status)
{
    size_t i;
    json_t *e;
    int n = 0;
    json_array_foreach(json_object_get(log, "requests"), i, e) n +=
        json_integer_value(json_object_get(e, "status")) == status;
    return n;
}

static int
route_count(json_t *log, const char *key)
{
    return (int)json_integer_value(json_object_get(json_object_get(log, "counts"), key));
}

/* "pace requests before hitting 429": a bucket of 10 refilling 1/s and a
 * burst of 30 requests — all answered, none with 429, the budget used. */
START_TEST(with_a_bucket_of_10_refilling_1_per_second_a_burst_never_gets_429)
{
    const char *args[] = {"--rate-bucket", "10", "--rate-refill-per-s", "1", NULL};
    struct rec r[30];
    int all = 0;
    start(args, 0);
    memset(r, 0, sizeof(r));
    long long t0 = tu_now_ms();
    for (int i = 0; i < 30; i++)
        ck_assert_int_eq(hz_api_call(api, NULL, "GET", "/load_balancers/1", NULL, on_result, &r[i]),
                         0);
    for (long long dl = t0 + 90000; !all && tu_now_ms() < dl;) {
        th_run_for(&th, 200);
        all = 1;
        for (int i = 0; i < 30; i++)
            all &= r[i].done;
    }
    ck_assert_msg(all, "not all answered within 90 s");
    long long took = r[0].t_ms;
    for (int i = 0; i < 30; i++) {
        ck_assert_int_eq(r[i].status, 200);
        took = r[i].t_ms > took ? r[i].t_ms : took;
    }
    took -= t0;
    json_t *log = request_log();
    ck_assert_int_eq(count_status(log, 429), 0);
    ck_assert_int_eq(route_count(log, "GET /v1/load_balancers/{id}"), 30);
    struct hz_api_stats st;
    hz_api_get_stats(api, &st);
    ck_assert_int_eq(st.rate_limited, 0);
    /* 30 requests from 10 tokens at 1/s: at least ~20 s; the pacer keeps a
     * reserve of 1 and starts from a cautious refill estimate. */
    fprintf(stderr, "pacing: 30 requests in %lld ms, %lld ms paced in total\n", took,
            (long long)st.paced_ms);
    ck_assert_msg(took >= 19000, "faster than the bucket allows: %lld ms", took);
    ck_assert_msg(took <= 45000, "budget wasted: %lld ms", took);
    json_decref(log);
    stop();
}
END_TEST

/* "on 429 wait until the reset": a 429 (injected, with the bucket at 5 of
 * 10 so the reset is ~5 s away) stops every request until RateLimit-Reset;
 * then the call is sent again and succeeds. */
START_TEST(after_a_429_the_client_waits_for_the_reset)
{
    const char *args[] = {"--rate-bucket", "10", "--rate-refill-per-s", "1", NULL};
    struct hzt_resp hr;
    struct rec a = {0}, b = {0};
    start(args, 0);
    /* someone else spends half the bucket */
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(hzt_req(&fake, "GET", "/load_balancers", "tok-a", "other", NULL, &hr), 0);
        hzt_resp_free(&hr);
    }
    ck_assert_int_eq(hzt_req(&fake, "POST", "/_admin/faults", NULL, NULL,
                             "{\"fail_requests\":{\"count\":1,\"status\":429,"
                             "\"code\":\"rate_limit_exceeded\"}}",
                             &hr),
                     0);
    ck_assert_int_eq(hr.status, 200);
    hzt_resp_free(&hr);
    long long t0 = tu_now_ms();
    ck_assert_int_eq(hz_api_call(api, NULL, "GET", "/load_balancers/1", NULL, on_result, &a), 0);
    ck_assert_int_eq(hz_api_call(api, NULL, "GET", "/load_balancers/2", NULL, on_result, &b), 0);
    ck_assert(th_run_until(&th, &a.done, 30000));
    ck_assert(th_run_until(&th, &b.done, 30000));
    ck_assert_int_eq(a.status, 200);
    ck_assert_int_eq(b.status, 200);
    json_t *log = request_log();
    ck_assert_int_eq(count_status(log, 429), 1);
    /* The reset after the 429 was >= 4 s away: nothing went out before. */
    size_t i;
    json_t *e;
    long long t429 = -1, next = -1;
    json_array_foreach(json_object_get(log, "requests"), i, e)
    {
        long long t = json_integer_value(json_object_get(e, "t_ms"));
        if (json_integer_value(json_object_get(e, "status")) == 429)
            t429 = t;
        else if (t429 >= 0 && next < 0)
            next = t;
    }
    ck_assert(t429 >= 0 && next >= 0);
    fprintf(stderr, "429: next request %lld ms later; call took %lld ms\n", next - t429,
            a.t_ms - t0);
    ck_assert_msg(next - t429 >= 3500, "sent %lld ms after the 429", next - t429);
    struct hz_api_stats st;
    hz_api_get_stats(api, &st);
    ck_assert_int_eq(st.rate_limited, 1);
    json_decref(log);
    stop();
}
END_TEST

/* "actions polled until success/error without holding up other balancers
 * (one in-flight action per balancer, a queue per balancer)": actions last
 * 1.5 s; balancer 1 gets two writes, balancer 2 one. Balancer 2 finishes
 * with the first write of balancer 1, not after both; balancer 1's second
 * write waits for its first action (no 423 locked); the waits share
 * batched GET /actions polls. */
START_TEST(action_waits_of_one_balancer_do_not_block_another)
{
    const char *args[] = {"--action-duration-ms", "1500", NULL};
    struct rec a1 = {0}, a2 = {0}, b1 = {0};
    start(args, 0);
    long long t0 = tu_now_ms();
    ck_assert_int_eq(hz_api_call(api, "uid-a", "POST", "/load_balancers/1/actions/change_algorithm",
                                 json_pack("{s:s}", "type", "round_robin"), on_result, &a1),
                     0);
    ck_assert_int_eq(hz_api_call(api, "uid-a", "POST", "/load_balancers/1/actions/change_algorithm",
                                 json_pack("{s:s}", "type", "least_connections"), on_result, &a2),
                     0);
    ck_assert_int_eq(hz_api_call(api, "uid-b", "POST", "/load_balancers/2/actions/change_algorithm",
                                 json_pack("{s:s}", "type", "round_robin"), on_result, &b1),
                     0);
    ck_assert(th_run_until(&th, &a2.done, 30000));
    ck_assert(b1.done && a1.done);
    ck_assert_int_eq(a1.status, 201);
    ck_assert_int_eq(a2.status, 201);
    ck_assert_int_eq(b1.status, 201);
    ck_assert_int_eq(a1.action_failed + a2.action_failed + b1.action_failed, 0);
    ck_assert_int_gt(a1.action_id, 0);
    long long ta1 = a1.t_ms - t0, ta2 = a2.t_ms - t0, tb1 = b1.t_ms - t0;
    fprintf(stderr, "lanes: a1 %lld ms, a2 %lld ms, b1 %lld ms\n", ta1, ta2, tb1);
    ck_assert_msg(ta1 >= 1500 && tb1 >= 1500, "completed before the action ended");
    ck_assert_msg(tb1 < 3000, "balancer 2 waited for balancer 1: %lld ms", tb1);
    ck_assert_msg(ta2 >= 3000, "second write did not wait for the first action: %lld ms", ta2);
    json_t *log = request_log();
    ck_assert_int_eq(count_status(log, 423), 0);
    int polls = route_count(log, "GET /v1/actions");
    ck_assert_msg(polls >= 1 && polls <= 12, "%d polls", polls);
    json_decref(log);
    /* the second write took effect after the first */
    struct hzt_resp hr;
    ck_assert_int_eq(hzt_req(&fake, "GET", "/load_balancers/1", "tok-a", NULL, NULL, &hr), 0);
    ck_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(hr.body, "load_balancer"), "algorithm"), "type")),
        "least_connections");
    hzt_resp_free(&hr);
    stop();
}
END_TEST

/* "locked → retry later": an action someone else started holds the
 * balancer; our write gets 423 locked, waits and goes through. */
START_TEST(a_locked_balancer_is_retried_later)
{
    const char *args[] = {"--action-duration-ms", "1500", NULL};
    struct hzt_resp hr;
    struct rec r = {0};
    start(args, 0);
    ck_assert_int_eq(hzt_req(&fake, "POST", "/load_balancers/2/actions/change_algorithm", "tok-b",
                             "other", "{\"type\":\"round_robin\"}", &hr),
                     0);
    ck_assert_int_eq(hr.status, 201);
    hzt_resp_free(&hr);
    ck_assert_int_eq(hz_api_call(api, "uid-b", "POST", "/load_balancers/2/actions/change_type",
                                 json_pack("{s:s}", "load_balancer_type", "lb21"), on_result, &r),
                     0);
    ck_assert(th_run_until(&th, &r.done, 30000));
    ck_assert_int_eq(r.status, 201);
    ck_assert_int_eq(r.action_failed, 0);
    json_t *log = request_log();
    ck_assert_int_ge(count_status(log, 423), 1);
    json_decref(log);
    struct hz_api_stats st;
    hz_api_get_stats(api, &st);
    ck_assert_int_ge(st.locked, 1);
    stop();
}
END_TEST

/* "the steady-state check as ONE paginated GET
 * /load_balancers?label_selector=robotlb/service-uid": 120 labelled
 * balancers and 1 unlabelled come back as 122 - 1 items in 3 pages of 50. */
START_TEST(the_label_selector_list_pages_at_50)
{
    struct rec r = {0}, c[120];
    start(NULL, 0);
    memset(c, 0, sizeof(c));
    for (int i = 0; i < 120; i++) {
        char name[32], uid[32];
        snprintf(name, sizeof(name), "svc-%d.ns", i);
        snprintf(uid, sizeof(uid), "uid-%d", i);
        ck_assert_int_eq(
            hz_api_call(api, NULL, "POST", "/load_balancers",
                        json_pack("{s:s, s:s, s:s, s:{s:s}}", "name", name, "load_balancer_type",
                                  "lb11", "location", "hel1", "labels", HZ_LABEL_UID, uid),
                        on_result, &c[i]),
            0);
    }
    ck_assert(th_run_until(&th, &c[119].done, 60000));
    for (int i = 0; i < 120; i++) {
        ck_assert(th_run_until(&th, &c[i].done, 30000));
        ck_assert_int_eq(c[i].status, 201);
    }
    struct hzt_resp hr;
    ck_assert_int_eq(hzt_req(&fake, "POST", "/_admin/reset", NULL, NULL, NULL, &hr), 0);
    hzt_resp_free(&hr);
    ck_assert_int_eq(hz_api_list(api, "/load_balancers?label_selector=" HZ_LABEL_UID,
                                 "load_balancers", on_list, &r),
                     0);
    ck_assert(th_run_until(&th, &r.done, 30000));
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.items, 122); /* 120 + the seeded a.shop and b.shop */
    json_t *log = request_log();
    ck_assert_int_eq(route_count(log, "GET /v1/load_balancers"), 3);
    json_decref(log);

    /* page by page: each page's items handed over as it comes, none kept */
    struct paged pg = {0};
    ck_assert_int_eq(hz_api_list_pages(api, "/load_balancers?label_selector=" HZ_LABEL_UID,
                                       "load_balancers", on_paged_page, on_paged, &pg),
                     0);
    ck_assert(th_run_until(&th, &pg.r.done, 30000));
    ck_assert_int_eq(pg.r.status, 200);
    ck_assert_int_eq(pg.r.err, 0);
    ck_assert_uint_eq(pg.p.n, 3);
    ck_assert_uint_eq(pg.p.size[0], 50);
    ck_assert_uint_eq(pg.p.size[1], 50);
    ck_assert_uint_eq(pg.p.size[2], 22);
    ck_assert_uint_eq(pg.r.items, 0);

    /* a page not understood ends the list: no next page, an error */
    ck_assert_int_eq(hzt_req(&fake, "POST", "/_admin/reset", NULL, NULL, NULL, &hr), 0);
    hzt_resp_free(&hr);
    struct paged bad = {.p.fail_at = 2};
    ck_assert_int_eq(hz_api_list_pages(api, "/load_balancers?label_selector=" HZ_LABEL_UID,
                                       "load_balancers", on_paged_page, on_paged, &bad),
                     0);
    ck_assert(th_run_until(&th, &bad.r.done, 30000));
    ck_assert_int_eq(bad.r.err, -EINVAL);
    ck_assert_uint_eq(bad.r.items, (size_t)-1);
    ck_assert_uint_eq(bad.p.n, 2);
    log = request_log();
    ck_assert_int_eq(route_count(log, "GET /v1/load_balancers"), 2);
    json_decref(log);
    stop();
}
END_TEST

/* Errors are read from {"error":{"code","message"}}. */
START_TEST(error_bodies_give_code_and_message)
{
    struct rec r = {0}, n = {0};
    start(NULL, 0);
    ck_assert_int_eq(hz_api_call(api, NULL, "POST", "/load_balancers",
                                 json_pack("{s:s, s:s, s:s}", "name", "a.shop",
                                           "load_balancer_type", "lb11", "location", "hel1"),
                                 on_result, &r),
                     0);
    ck_assert_int_eq(hz_api_call(api, NULL, "GET", "/load_balancers/999", NULL, on_result, &n), 0);
    ck_assert(th_run_until(&th, &r.done, 10000));
    ck_assert(th_run_until(&th, &n.done, 10000));
    ck_assert_int_eq(r.status, 409);
    ck_assert_str_eq(r.code, "uniqueness_error");
    ck_assert_int_eq(n.status, 404);
    ck_assert_str_eq(n.code, "not_found");
    stop();
}
END_TEST

/* The token file is read on every request: a rotated token is used at
 * once, a wrong one gets 401. */
START_TEST(the_token_file_is_read_on_every_request)
{
    struct rec a = {0}, b = {0}, c = {0};
    start(NULL, 0);
    ck_assert_int_eq(hz_api_call(api, NULL, "GET", "/load_balancers/1", NULL, on_result, &a), 0);
    ck_assert(th_run_until(&th, &a.done, 10000));
    ck_assert_int_eq(a.status, 200);
    ck_assert_int_eq(tu_write_file(token_path, "wrong\n"), 0);
    ck_assert_int_eq(hz_api_call(api, NULL, "GET", "/load_balancers/1", NULL, on_result, &b), 0);
    ck_assert(th_run_until(&th, &b.done, 10000));
    ck_assert_int_eq(b.status, 401);
    ck_assert_str_eq(b.code, "unauthorized");
    ck_assert_int_eq(tu_write_file(token_path, "tok-b"), 0);
    ck_assert_int_eq(hz_api_call(api, NULL, "GET", "/load_balancers/1", NULL, on_result, &c), 0);
    ck_assert(th_run_until(&th, &c.done, 10000));
    ck_assert_int_eq(c.status, 200);
    stop();
}
END_TEST

/* "dry_run (log each Hetzner write it would make, make none)": every
 * write completes as dry run; the fake's request log holds only GETs. */
START_TEST(dry_run_makes_no_write)
{
    struct rec w[5], g = {0};
    start(NULL, 1);
    memset(w, 0, sizeof(w));
    ck_assert_int_eq(hz_api_call(api, "uid-x", "POST", "/load_balancers",
                                 json_pack("{s:s, s:s, s:s}", "name", "new.shop",
                                           "load_balancer_type", "lb11", "location", "hel1"),
                                 on_result, &w[0]),
                     0);
    ck_assert_int_eq(hz_api_call(api, "uid-a", "POST", "/load_balancers/1/actions/add_target",
                                 json_pack("{s:s, s:{s:s}}", "type", "ip", "ip", "ip", "10.0.1.12"),
                                 on_result, &w[1]),
                     0);
    ck_assert_int_eq(hz_api_call(api, "uid-a", "PUT", "/load_balancers/3",
                                 json_pack("{s:{s:s}}", "labels", HZ_LABEL_UID, "uid-a"), on_result,
                                 &w[2]),
                     0);
    ck_assert_int_eq(
        hz_api_call(api, "uid-b", "DELETE", "/load_balancers/2", NULL, on_result, &w[3]), 0);
    ck_assert_int_eq(hz_api_call(api, "uid-a", "POST", "/load_balancers/1/actions/delete_service",
                                 json_pack("{s:i}", "listen_port", 80), on_result, &w[4]),
                     0);
    ck_assert_int_eq(hz_api_call(api, NULL, "GET", "/load_balancers", NULL, on_result, &g), 0);
    ck_assert(th_run_until(&th, &g.done, 10000));
    for (int i = 0; i < 5; i++) {
        ck_assert(th_run_until(&th, &w[i].done, 10000));
        ck_assert_int_eq(w[i].dry_run, 1);
        ck_assert_int_eq(w[i].err, 0);
    }
    ck_assert_int_eq(g.status, 200);
    json_t *log = request_log();
    size_t i;
    json_t *e;
    int n = 0;
    json_array_foreach(json_object_get(log, "requests"), i, e)
    {
        ck_assert_str_eq(json_string_value(json_object_get(e, "method")), "GET");
        n++;
    }
    ck_assert_int_eq(n, 1);
    json_decref(log);
    struct hz_api_stats st;
    hz_api_get_stats(api, &st);
    ck_assert_int_eq(st.dry_run, 5);
    ck_assert_int_eq(st.writes, 0);
    stop();
}
END_TEST

/* Cancelling (gate closed, stop) runs every callback with -ECANCELED and
 * sends nothing more. */
START_TEST(cancel_all_completes_every_call_as_cancelled)
{
    const char *args[] = {"--action-duration-ms", "5000", NULL};
    struct rec a = {0}, b = {0}, c = {0};
    start(args, 0);
    ck_assert_int_eq(hz_api_call(api, "uid-a", "POST", "/load_balancers/1/actions/change_algorithm",
                                 json_pack("{s:s}", "type", "round_robin"), on_result, &a),
                     0);
    ck_assert_int_eq(hz_api_call(api, "uid-a", "POST", "/load_balancers/1/actions/change_algorithm",
                                 json_pack("{s:s}", "type", "least_connections"), on_result, &b),
                     0);
    ck_assert_int_eq(hz_api_call(api, NULL, "GET", "/load_balancers", NULL, on_result, &c), 0);
    th_run_for(&th, 1000); /* a is waiting for its action, b behind it */
    ck_assert(!a.done && !b.done);
    hz_api_cancel_all(api);
    ck_assert(a.done && b.done);
    ck_assert_int_eq(a.err, -ECANCELED);
    ck_assert_int_eq(b.err, -ECANCELED);
    th_run_for(&th, 1000);
    json_t *log = request_log();
    ck_assert_int_eq(route_count(log, "POST /v1/load_balancers/{id}/actions/change_algorithm"), 1);
    json_decref(log);
    stop();
}
END_TEST

/* The action ids the polls in the request log after seq asked for, in
 * order (GET /v1/actions?...&id=N...): at most cap into ids; their number. */
static size_t
polled_ids(json_t *log, long long after_seq, int64_t *ids, size_t cap, size_t *polls)
{
    size_t i, n = 0;
    json_t *e;
    *polls = 0;
    json_array_foreach(json_object_get(log, "requests"), i, e)
    {
        const char *path = json_string_value(json_object_get(e, "path"));
        if (json_integer_value(json_object_get(e, "seq")) <= after_seq || !path ||
            strncmp(path, "/v1/actions?", 12) != 0)
            continue;
        ++*polls;
        for (const char *q = strstr(path, "&id="); q && n < cap; q = strstr(q + 1, "&id="))
            ids[n++] = strtoll(q + 4, NULL, 10);
    }
    return n;
}

/* "actions polled until success/error": with more running actions than
 * one poll asks for (50), each round of polls asks for every one of them
 * once, so none waits behind the first fifty. The actions are held
 * running by the fake until all 120 calls wait, then released. */
START_TEST(with_120_running_actions_each_round_asks_for_every_one)
{
    enum { N = 120 };
    static struct rec r[N];
    char lane[16], name[16];
    struct hzt_resp hr;
    memset(r, 0, sizeof(r));
    start(NULL, 0);
    ck_assert_int_eq(
        hzt_req(&fake, "POST", "/_admin/faults", NULL, NULL, "{\"hold_actions\":true}", &hr), 0);
    ck_assert_int_eq(hr.status, 200);
    hzt_resp_free(&hr);
    for (int i = 0; i < N; i++) {
        snprintf(lane, sizeof(lane), "uid-%d", i);
        snprintf(name, sizeof(name), "lb-%d", i);
        ck_assert_int_eq(hz_api_call(api, lane, "POST", "/load_balancers",
                                     json_pack("{s:s, s:s, s:s}", "name", name,
                                               "load_balancer_type", "lb11", "location", "hel1"),
                                     on_result, &r[i]),
                         0);
    }
    struct hz_api_stats st;
    long long end = tu_now_ms() + 30000;
    do {
        th_run_for(&th, 20);
        hz_api_get_stats(api, &st);
    } while (st.waiting_actions < N && tu_now_ms() < end);
    ck_assert_int_eq(st.waiting_actions, N);
    json_t *log = request_log();
    long long seq = json_integer_value(json_object_get(log, "total"));
    json_decref(log);
    /* Three rounds at least, every action held running meanwhile. */
    static int64_t ids[8 * N];
    size_t n = 0, polls = 0;
    end = tu_now_ms() + 30000;
    while (n < 3 * N && tu_now_ms() < end) {
        th_run_for(&th, 100);
        log = request_log();
        n = polled_ids(log, seq, ids, sizeof(ids) / sizeof(ids[0]), &polls);
        json_decref(log);
    }
    ck_assert_msg(n >= 3 * N, "%zu ids asked for in %zu polls", n, polls);
    /* Rounds: the first 3 × 120 asks hold two whole rounds (the first may
     * have begun before the last call waited), so every one of the 120
     * actions was asked for twice at least. */
    size_t distinct = 0;
    for (size_t i = 0; i < 3 * N; i++) {
        size_t times = 0, first = 1;
        for (size_t j = 0; j < 3 * N; j++) {
            times += ids[j] == ids[i];
            if (j < i && ids[j] == ids[i])
                first = 0;
        }
        distinct += first;
        ck_assert_msg(times >= 2, "action %lld asked for %zu time(s) in %zu polls",
                      (long long)ids[i], times, polls);
    }
    ck_assert_int_eq(distinct, N);
    ck_assert_int_eq(
        hzt_req(&fake, "POST", "/_admin/faults", NULL, NULL, "{\"hold_actions\":false}", &hr), 0);
    ck_assert_int_eq(hr.status, 200);
    hzt_resp_free(&hr);
    end = tu_now_ms() + 30000;
    int done = 0;
    while (done < N && tu_now_ms() < end) {
        th_run_for(&th, 50);
        done = 0;
        for (int i = 0; i < N; i++)
            done += r[i].done;
    }
    ck_assert_int_eq(done, N);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(r[i].status, 201);
        ck_assert_int_eq(r[i].action_failed, 0);
    }
    stop();
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb api");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, with_a_bucket_of_10_refilling_1_per_second_a_burst_never_gets_429);
    tcase_add_test(tc, after_a_429_the_client_waits_for_the_reset);
    tcase_add_test(tc, action_waits_of_one_balancer_do_not_block_another);
    tcase_add_test(tc, with_120_running_actions_each_round_asks_for_every_one);
    tcase_add_test(tc, a_locked_balancer_is_retried_later);
    tcase_add_test(tc, the_label_selector_list_pages_at_50);
    tcase_add_test(tc, error_bodies_give_code_and_message);
    tcase_add_test(tc, the_token_file_is_read_on_every_request);
    tcase_add_test(tc, dry_run_makes_no_write);
    tcase_add_test(tc, cancel_all_completes_every_call_as_cancelled);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
