/*
 * The key table of mod_hetzner_lb (modules/mod_hetzner_lb/hz_keytab.c)
 * that the balancers and the Services are found through: against a plain
 * array as the reference, every key is found after every put and del
 * (backward-shift deletion leaves no lookup stopping early), a put of a
 * key held replaces its element, the table stays at most half full and
 * shrinks back when emptied.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "hz_keytab.h"
#include "testutil.h"

enum { NKEYS = 300 };

struct elem {
    char key[24];
};

static struct elem elems[NKEYS];
static int in[NKEYS]; /* the reference: 1 when elems[i] is indexed */

/* Every key looked up against the reference (one assertion a call: each
 * of Check's is a write to its pipe). */
static void
check_all(const struct hz_keytab *t)
{
    size_t n = 0;
    int wrong = -1;
    for (int i = 0; i < NKEYS; i++) {
        if (hz_keytab_get(t, elems[i].key) != (in[i] ? &elems[i] : NULL) && wrong < 0)
            wrong = i;
        n += (size_t)in[i];
    }
    ck_assert_msg(wrong < 0, "%s is not found as it should", wrong < 0 ? "-" : elems[wrong].key);
    ck_assert_uint_eq(t->n, n);
    ck_assert(t->cap == 0 || t->n * 2 <= t->cap);
}

START_TEST(a_zeroed_table_is_empty_and_allocates_nothing)
{
    struct hz_keytab t = {0};
    size_t pos = 0;
    ck_assert_ptr_null(hz_keytab_get(&t, "ns/a"));
    ck_assert_ptr_null(hz_keytab_del(&t, "ns/a"));
    ck_assert_ptr_null(hz_keytab_next(&t, &pos));
    ck_assert_ptr_null(t.slot);
    hz_keytab_fini(&t);
}
END_TEST

START_TEST(a_put_of_a_key_held_replaces_its_element)
{
    struct hz_keytab t = {0};
    struct elem a = {"ns/a"}, a2 = {"ns/a"};
    void *old = &a2;
    ck_assert_int_eq(hz_keytab_put(&t, a.key, &a, &old), 0);
    ck_assert_ptr_null(old);
    ck_assert_int_eq(hz_keytab_put(&t, a2.key, &a2, &old), 0);
    ck_assert_ptr_eq(old, &a);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_ptr_eq(hz_keytab_get(&t, "ns/a"), &a2);
    ck_assert_ptr_eq(hz_keytab_del(&t, "ns/a"), &a2);
    ck_assert_ptr_null(hz_keytab_get(&t, "ns/a"));
    hz_keytab_fini(&t);
}
END_TEST

START_TEST(every_key_is_found_through_random_puts_and_dels)
{
    struct hz_keytab t = {0};
    unsigned seed = 12345;
    for (int i = 0; i < NKEYS; i++) {
        snprintf(elems[i].key, sizeof(elems[i].key), "ns-%d/svc-%d", i % 7, i);
        in[i] = 0;
    }
    for (int round = 0; round < 3000; round++) {
        seed = seed * 1103515245u + 12345u;
        int i = (int)((seed >> 8) % NKEYS);
        /* grow to about two thirds of the keys, then empty it again */
        int put = round < 2000 ? (seed >> 4) % 3 != 0 : (seed >> 4) % 3 == 0;
        if (put) {
            ck_assert_int_eq(hz_keytab_put(&t, elems[i].key, &elems[i], NULL), 0);
            in[i] = 1;
        } else {
            ck_assert_ptr_eq(hz_keytab_del(&t, elems[i].key), in[i] ? &elems[i] : NULL);
            in[i] = 0;
        }
        check_all(&t);
    }
    /* the walk hands each element once */
    size_t pos = 0, walked = 0;
    for (struct elem *e; (e = hz_keytab_next(&t, &pos)); walked++)
        ck_assert(in[e - elems]);
    ck_assert_uint_eq(walked, t.n);
    for (int i = 0; i < NKEYS; i++)
        if (in[i]) {
            ck_assert_ptr_eq(hz_keytab_del(&t, elems[i].key), &elems[i]);
            in[i] = 0;
        }
    check_all(&t);
    ck_assert_uint_eq(t.n, 0);
    ck_assert_uint_le(t.cap, 16);
    hz_keytab_fini(&t);
    ck_assert_ptr_null(t.slot);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb keytab");
    TCase *tc = tcase_create("keytab");
    tcase_add_test(tc, a_zeroed_table_is_empty_and_allocates_nothing);
    tcase_add_test(tc, a_put_of_a_key_held_replaces_its_element);
    tcase_add_test(tc, every_key_is_found_through_random_puts_and_dels);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
