/*
 * End-to-end suite of the Kubernetes part of the module ABI: the daemon's
 * host table (core_host) used the way a module uses it — plb_kube,
 * plb_informer and plb_obj only through host functions — against
 * prismlb-fake-kube. Proves the table is wired and the JSON accessors
 * behave as module.h says.
 */
#include <math.h>

#include "core.h"
#include "host.h"
#include "kt.h"

static const struct plb_host *H = &core_host;

struct seen {
    int synced, adds;
    char holder[64];
};

static void
on_add(plb_informer *inf, const plb_obj *obj, void *arg)
{
    struct seen *s = arg;
    (void)inf;
    const char *h = H->obj->str(H->obj->get(obj, "spec", "holderIdentity", NULL));
    snprintf(s->holder, sizeof(s->holder), "%s", h ? h : "");
    s->adds++;
}

static void
on_synced(plb_informer *inf, void *arg)
{
    (void)inf;
    ((struct seen *)arg)->synced = 1;
}

static int
is_synced(void *arg)
{
    return ((struct seen *)arg)->synced;
}

START_TEST(host_table_end_to_end)
{
    struct kt t;
    kt_start(&t, NULL, NULL);
    ck_assert(PLB_HAS(H->obj, new_real)); /* the last 3.0 member */
    struct core core = {.base = t.base, .httpc = t.httpc};
    struct plb_ctx ctx = {.core = &core, .name = "abi-test"};
    char err[256];
    struct plb_kube_opts o = {.size = sizeof(o), .kubeconfig = t.kubeconfig};
    plb_kube *k = H->kube->client_new(&ctx, &o, err, sizeof(err));
    ck_assert_msg(k != NULL, "%s", err);
    ck_assert_str_eq(H->kube->ns(k), "default");
    ck_assert_str_eq(H->kube->server(k), t.f.server[0]);

    struct kres r = {0};
    struct plb_kube_ref ref = {
        sizeof(struct plb_kube_ref), "coordination.k8s.io/v1", "leases", "default", "abi", NULL};
    kt_wait(&t, &r,
            H->kube->create(k, &ref,
                            "{\"metadata\":{\"name\":\"abi\"},\"spec\":"
                            "{\"holderIdentity\":\"x\",\"leaseDurationSeconds\":15}}",
                            kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 201);
    kres_clear(&r);

    struct seen s = {0};
    struct plb_informer_opts io = {.size = sizeof(io),
                                   .ref = &(const struct plb_kube_ref){sizeof(struct plb_kube_ref),
                                                                       "coordination.k8s.io/v1",
                                                                       "leases", NULL, NULL, NULL},
                                   .on_add = on_add,
                                   .on_synced = on_synced,
                                   .arg = &s};
    plb_informer *inf = H->kube->informer_new(k, &io, NULL);
    ck_assert_ptr_nonnull(inf);
    ck_assert(kt_run_until(&t, is_synced, &s, 20000));
    ck_assert(H->kube->informer_synced(inf));
    ck_assert_uint_eq(H->kube->informer_count(inf), 1);
    ck_assert_str_eq(s.holder, "x");

    /* Accessors on the cached (borrowed) object. */
    const plb_obj *o1 = H->kube->informer_get(inf, "default", "abi");
    ck_assert_ptr_nonnull(o1);
    ck_assert_int_eq(H->obj->type(o1), PLB_OBJ_OBJECT);
    ck_assert_int_eq(H->obj->int64(H->obj->get(o1, "spec", "leaseDurationSeconds", NULL), -1), 15);
    ck_assert_int_eq(H->obj->int64(H->obj->get(o1, "spec", "missing", NULL), -1), -1);
    ck_assert_ptr_null(H->obj->get(o1, "spec", "holderIdentity", "deeper", NULL));
    ck_assert_int_eq(H->obj->boolean(H->obj->get(o1, "nope", NULL), 7), 7);
    ck_assert_ptr_null(H->obj->str(NULL));
    size_t members = 0;
    void *it = NULL;
    const plb_obj *v;
    int saw_spec = 0;
    for (const char *key = H->obj->iter(o1, &it, &v); key; key = H->obj->iter(o1, &it, &v)) {
        members++;
        saw_spec |= strcmp(key, "spec") == 0 && H->obj->type(v) == PLB_OBJ_OBJECT;
    }
    ck_assert_uint_eq(members, H->obj->len(o1));
    ck_assert(saw_spec);

    /* A private copy is modifiable; the cache is untouched. */
    plb_obj *c = H->obj->copy(o1);
    ck_assert_int_eq(H->obj->set(c, H->obj->new_str("y"), "spec", "holderIdentity", NULL), 0);
    ck_assert_int_eq(H->obj->set(c, H->obj->new_int(3), "status", "deep", "n", NULL), 0);
    ck_assert_int_eq(core_obj_del(c, "metadata", "managedFields", NULL), -ENOENT);
    ck_assert_int_eq(core_obj_del(c, "status", "deep", NULL), 0);
    ck_assert_str_eq(H->obj->str(H->obj->get(o1, "spec", "holderIdentity", NULL)), "x");
    char *text = H->obj->dump(c);
    ck_assert_ptr_nonnull(strstr(text, "\"holderIdentity\":\"y\""));
    ck_assert_ptr_nonnull(strstr(text, "\"status\":{}"));
    plb_obj *back = core_obj_parse(text, strlen(text));
    ck_assert_ptr_nonnull(back);
    ck_assert_int_eq(H->obj->len(H->obj->get(back, "status", NULL)), 0);
    H->mem->free(text);
    plb_obj *arr = core_obj_parse("[1,\"a\",true]", 12);
    ck_assert_int_eq(H->obj->len(arr), 3);
    ck_assert_str_eq(H->obj->str(H->obj->at(arr, 1)), "a");
    ck_assert_int_eq(H->obj->boolean(H->obj->at(arr, 2), 0), 1);
    ck_assert_ptr_null(H->obj->at(arr, 3));
    ck_assert_ptr_null(core_obj_parse("{bad", 4));
    /* obj_int truncates a real, and takes none outside int64_t's range. */
    static const char nums[] =
        "[3.0,1e3,3.5,1e300,-1e300,9.3e18,-9.2e18,\"7\",9223372036854775807]";
    plb_obj *n = core_obj_parse(nums, strlen(nums));
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(H->obj->int64(H->obj->at(n, 0), -1), 3);
    ck_assert_int_eq(H->obj->int64(H->obj->at(n, 1), -1), 1000);
    ck_assert_int_eq(H->obj->int64(H->obj->at(n, 2), -1), 3);
    ck_assert_int_eq(H->obj->int64(H->obj->at(n, 3), -1), -1);
    ck_assert_int_eq(H->obj->int64(H->obj->at(n, 4), -1), -1);
    ck_assert_int_eq(H->obj->int64(H->obj->at(n, 5), -1), -1);
    ck_assert(H->obj->int64(H->obj->at(n, 6), -1) == INT64_C(-9200000000000000000));
    ck_assert_int_eq(H->obj->int64(H->obj->at(n, 7), -1), -1);
    ck_assert(H->obj->int64(H->obj->at(n, 8), -1) == INT64_MAX);
    H->obj->unref(n);
    plb_obj *ref2 = H->obj->ref(arr);
    H->obj->unref(arr);
    ck_assert_int_eq(H->obj->len(ref2), 3); /* still alive through the second reference */
    H->obj->unref(ref2);
    H->obj->unref(back);

    /* A write through the host table goes back to the informer as an
     * update of the cache (on_update is NULL: not called, cache updated). */
    char *body = H->obj->dump(c);
    kt_wait(&t, &r, H->kube->update(k, &ref, body, kres_cb, &r, NULL));
    ck_assert_int_eq(r.status, 200);
    kres_clear(&r);
    H->mem->free(body);
    H->obj->unref(c);
    for (int i = 0; i < 200; i++) {
        const plb_obj *now = H->kube->informer_get(inf, "default", "abi");
        if (now && strcmp(H->obj->str(H->obj->get(now, "spec", "holderIdentity", NULL)), "y") == 0)
            break;
        kt_run_ms(&t, 20);
    }
    ck_assert_str_eq(H->obj->str(H->obj->get(H->kube->informer_get(inf, "default", "abi"), "spec",
                                             "holderIdentity", NULL)),
                     "y");
    /* kube_free frees the informer too. */
    H->kube->client_free(k);
    kt_stop(&t);
}
END_TEST

/* The JSON builders as module.h states them: each kind of value, append
 * and remove with their refusals, bool's nonzero, real's NaN/infinity. */
START_TEST(json_builders)
{
    plb_obj *o = H->obj->new_object(), *a = H->obj->new_array();
    ck_assert_ptr_nonnull(o);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(H->obj->append(a, H->obj->new_bool(2)), 0);
    ck_assert_int_eq(H->obj->append(a, H->obj->new_null()), 0);
    ck_assert_int_eq(H->obj->append(a, H->obj->new_real(0.5)), 0);
    ck_assert_int_eq(H->obj->append(a, H->obj->new_int(-7)), 0);
    ck_assert_int_eq(H->obj->append(a, H->obj->new_str("x")), 0);
    ck_assert_int_eq(H->obj->append(a, NULL), -EINVAL);
    ck_assert_int_eq(H->obj->append(o, H->obj->new_null()), -EINVAL); /* o is no array */
    ck_assert_ptr_null(H->obj->new_real(NAN));
    ck_assert_ptr_null(H->obj->new_real(INFINITY));
    ck_assert_ptr_null(H->obj->new_str(NULL));
    ck_assert_int_eq(core_obj_remove(a, 1), 0); /* the null */
    ck_assert_int_eq(core_obj_remove(a, 4), -ENOENT);
    ck_assert_int_eq(core_obj_remove(o, 0), -ENOENT);
    ck_assert_int_eq(H->obj->set(o, a, "spec", "items", NULL), 0); /* "spec" made on the way */
    ck_assert_int_eq(H->obj->set(o, H->obj->new_null(), "spec", "items", "x", NULL), -EINVAL);
    ck_assert_int_eq(H->obj->set(a, H->obj->new_null(), "k", NULL), -EINVAL); /* a is no object */
    char *text = H->obj->dump(o);
    ck_assert_str_eq(text, "{\"spec\":{\"items\":[true,0.5,-7,\"x\"]}}");
    H->mem->free(text);
    H->obj->unref(o);
}
END_TEST

static Suite *
abi_suite(void)
{
    Suite *s = suite_create("kube_abi");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, host_table_end_to_end);
    tcase_add_test(tc, json_builders);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(abi_suite());
}
