/*
 * Fencing: the daemon, not the module, keeps a closed term's writes from
 * reaching the server. A daemon runs mod_leader and a careless mod_writer
 * (it leaves its writes running at gate_close and keeps trying to write
 * while the gate is closed) with 9 writes in flight, through http_request
 * (argument "http") or a Kubernetes client's kube_patch ("kube"). The fake
 * API server holds every writer PATCH unanswered (its hold_match fault),
 * and the writer's URL names the server as localhost, a host of its own in
 * the daemon's HTTP client: 8 writes are held at the server, the 9th waits
 * for one of the host's 8 slots, unsent. Then the Lease is taken by
 * another holder; the leader closes the gate. Expected: the 9th is stopped
 * (its done says PLB_HTTP_E_FENCED), the 8 held ones complete after the
 * release saying in_flight_at_close, the daemon logs "write in flight at
 * gate close", every write the writer starts after the close is refused
 * (PLB_EFENCED), and the fake's request log shows exactly the 8 writes,
 * all received before the close: none later.
 */
#include "env.h"

#define LEASES "/apis/coordination.k8s.io/v1/namespaces/default/leases"
#define HELD 8 /* the HTTP client's BUFFER requests per host */

static const char *mode = "http";

static void
admin_post(struct le_env *e, const char *path, const char *body)
{
    struct http_res r;
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(fake_admin(&e->f, "POST", path, body, &r), 0);
    ck_assert_msg(r.status == 200, "POST %s: %ld %s", path, r.status, r.body);
    http_res_free(&r);
}

static long long
held_now(struct le_env *e)
{
    struct http_res r;
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(fake_admin(&e->f, "GET", "/state", NULL, &r), 0);
    json_t *j = res_json(&r);
    http_res_free(&r);
    ck_assert_ptr_nonnull(j);
    long long n = json_integer_value(json_object_get(j, "held"));
    json_decref(j);
    return n;
}

/* Lines of the trace starting with "what ", and the time (ms) of the
 * last. */
static int
trace_count(const struct le_daemon *d, const char *what, long long *last_ms)
{
    char *t = tu_read_file(d->trace, NULL);
    int n = 0;
    size_t wl = strlen(what);
    for (char *line = t; line && *line;) {
        char *nl = strchr(line, '\n');
        if (strncmp(line, what, wl) == 0 && line[wl] == ' ') {
            n++;
            const char *ms = strrchr(line, ' ');
            if (last_ms && ms)
                *last_ms = atoll(ms + 1);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(t);
    return n;
}

static void
wait_trace(const struct le_daemon *d, const char *what, int n, int timeout_ms)
{
    long long until = tu_now_ms() + timeout_ms;
    while (trace_count(d, what, NULL) < n && tu_now_ms() < until)
        tu_sleep_ms(50);
    if (trace_count(d, what, NULL) < n) {
        char *log = le_daemon_log(d);
        char *t = tu_read_file(d->trace, NULL);
        ck_abort_msg("fewer than %d \"%s\" lines in the trace:\n%s\nlog:\n%s", n, what, t ? t : "",
                     log);
    }
}

START_TEST(a_closed_gate_lets_no_later_write_through)
{
    struct le_env e;
    struct le_daemon d = {0};
    char local[512], kubeconfig[4400], writer[32768];
    le_env_start(&e, 0);

    /* The writer's own view of the server: localhost, not 127.0.0.1. */
    const char *port = strrchr(e.f.server[0], ':');
    ck_assert_ptr_nonnull(port);
    snprintf(local, sizeof(local), "https://localhost%s", port);
    snprintf(kubeconfig, sizeof(kubeconfig), "%s/writer-kubeconfig", e.f.dir);
    const struct tu_kubeconfig kc = {.server = local, .certdir = e.f.dir};
    ck_assert_int_eq(tu_write_kubeconfig(kubeconfig, &kc), 0);
    admin_post(&e, "/faults",
               "{\"hold_match\":\"/leases/shared-writes\",\"hold_method\":\"PATCH\"}");

    tu_daemon_init(&d.td, e.f.dir, "leading");
    snprintf(d.identity, sizeof(d.identity), "leading");
    snprintf(d.trace, sizeof(d.trace), "%s/fenced.trace", e.f.dir);
    snprintf(writer, sizeof(writer),
             "log_level = \"info\";\n"
             "shutdown_grace = \"5s\";\n"
             "instances = (\n"
             "  { module = \"leader\"; name = \"leader\";\n"
             "    lease_namespace = \"default\"; lease_name = \"prismlb-test\";\n"
             "    identity = \"leading\"; kubeconfig = \"%s\";\n"
             "    lease_duration = \"%s\"; renew_deadline = \"%s\"; retry_period = \"%s\"; },\n"
             "  { module = \"writer\"; name = \"careless\"; gate = \"leader\";\n"
             "    identity = \"fenced\"; interval = \"50ms\"; trace_file = \"%s\";\n"
             "    via = \"%s\"; parallel = %d; careless = true; kubeconfig = \"%s\";\n"
             "    url = \"%s" LEASES "/shared-writes\";\n"
             "    ca_file = \"%s/ca.crt\"; cert_file = \"%s/client.crt\";\n"
             "    key_file = \"%s/client.key\"; }\n"
             ");\n",
             e.kubeconfig, le_short.lease, le_short.renew, le_short.retry, d.trace, mode, HELD + 1,
             kubeconfig, local, e.f.dir, e.f.dir, e.f.dir);
    ck_assert_int_eq(tu_write_file(d.td.conf, writer), 0);
    le_daemon_spawn(&d);

    /* 8 writes held at the server, the 9th waiting for a slot. */
    long long until = tu_now_ms() + 20000;
    while (held_now(&e) < HELD && tu_now_ms() < until)
        tu_sleep_ms(50);
    char *log = le_daemon_log(&d);
    ck_assert_msg(held_now(&e) == HELD, "held %lld, not %d:\n%s", held_now(&e), HELD, log);
    free(log);
    wait_trace(&d, "gate_open", 1, 5000);

    /* Another holder takes the Lease (read-modify-write, again after a
     * 409 from a renew in between): the leader closes the gate. */
    struct http_res r;
    long st = 0;
    for (int attempt = 0; attempt < 20 && st != 200; attempt++) {
        st = le_api(&e, "GET", LEASES "/prismlb-test", NULL, NULL, &r);
        ck_assert_msg(st == 200, "GET the Lease: %ld", st);
        json_t *lease = res_json(&r);
        http_res_free(&r);
        ck_assert_ptr_nonnull(lease);
        json_t *spec = json_object_get(lease, "spec");
        json_object_set_new(spec, "holderIdentity", json_string("somebody-else"));
        json_object_set_new(spec, "leaseDurationSeconds", json_integer(3600));
        char *text = json_dumps(lease, JSON_COMPACT);
        json_decref(lease);
        st = le_api(&e, "PUT", LEASES "/prismlb-test", text, NULL, &r);
        free(text);
        ck_assert_msg(st == 200 || st == 409, "taking the Lease: %ld %s", st, r.body);
        http_res_free(&r);
    }
    ck_assert_int_eq(st, 200);

    wait_trace(&d, "gate_close", 1, 15000);
    long long closed_ms = 0;
    trace_count(&d, "gate_close", &closed_ms);
    /* The unsent one was stopped; a write started after the close was
     * refused by the daemon. */
    wait_trace(&d, "fenced", 1, 5000);
    wait_trace(&d, "refused", 1, 5000);
    ck_assert_int_eq(trace_count(&d, "fenced", NULL), 1);
    ck_assert_msg(tu_file_has(d.td.log, "write in flight at gate close"), "no in-flight log line");

    /* The held writes complete, each saying it was in flight at the
     * close; the writer keeps trying, and every try is refused. */
    admin_post(&e, "/release", NULL);
    wait_trace(&d, "in_flight", HELD, 10000);
    int refused = trace_count(&d, "refused", NULL);
    wait_trace(&d, "refused", refused + 5, 10000);
    ck_assert_int_eq(trace_count(&d, "in_flight", NULL), HELD);
    ck_assert_int_eq(held_now(&e), 0);

    /* The server saw the 8 writes, all before the close, and none after. */
    size_t n = 0;
    struct le_write *w = le_writes(&e, &n);
    ck_assert_msg(n == HELD, "the server got %zu writer writes, not %d", n, HELD);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(w[i].t * 1000.0 <= (double)closed_ms,
                      "a write arrived %.3f s after the gate closed",
                      w[i].t - (double)closed_ms / 1000.0);
    free(w);
    printf("fence %s: %d writes in flight at the close completed saying so, 1 unsent stopped, "
           "%d later writes refused, none reached the server\n",
           mode, HELD, trace_count(&d, "refused", NULL));
    ck_assert_int_eq(le_daemon_stop(&d, SIGTERM, 10000), 0);
    le_env_stop(&e);
}
END_TEST

int
main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "http") != 0 && strcmp(argv[1], "kube") != 0)) {
        fprintf(stderr, "usage: %s http|kube\n", argv[0]);
        return 2;
    }
    mode = argv[1];
    Suite *s = suite_create("leader-fence");
    TCase *tc = tcase_create("fence");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, a_closed_gate_lets_no_later_write_through);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
