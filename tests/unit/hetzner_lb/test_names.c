/*
 * Balancer names (modules/mod_hetzner_lb/hz_names.c), one test per sentence
 * of the spec's ownership paragraph that is about names.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "hz.h"
#include "testutil.h"

/* "Without the robotlb/balancer annotation the balancer is named
 * <service>.<namespace>, ..." */
START_TEST(without_the_annotation_the_balancer_is_named_service_dot_namespace)
{
    char n[HZ_NAME_MAX + 1];
    hz_name_for_service(NULL, NULL, "web", "shop", n);
    ck_assert_str_eq(n, "web.shop");
    hz_name_for_service("", "", "web", "shop", n);
    ck_assert_str_eq(n, "web.shop");
}
END_TEST

/* "... or <cluster>.<service>.<namespace> when ROBOTLB_CLUSTER_NAME is set,
 * so that clusters sharing a Hetzner project do not pick the same name." */
START_TEST(with_a_cluster_name_the_balancer_is_named_cluster_dot_service_dot_namespace)
{
    char a[HZ_NAME_MAX + 1], b[HZ_NAME_MAX + 1];
    hz_name_for_service(NULL, "prod", "web", "shop", a);
    ck_assert_str_eq(a, "prod.web.shop");
    hz_name_for_service(NULL, "staging", "web", "shop", b);
    ck_assert_str_ne(a, b);
}
END_TEST

/* "The cluster name is not added to a name from the annotation." */
START_TEST(the_cluster_name_is_not_added_to_a_name_from_the_annotation)
{
    char n[HZ_NAME_MAX + 1];
    hz_name_for_service("custom-name", "prod", "web", "shop", n);
    ck_assert_str_eq(n, "custom-name");
}
END_TEST

/* "Earlier releases created balancers without a label and named them after
 * the service without its namespace." */
START_TEST(earlier_releases_named_the_balancer_after_the_service_without_its_namespace)
{
    char n[HZ_NAME_MAX + 1];
    hz_name_legacy("web", n);
    ck_assert_str_eq(n, "web");
}
END_TEST

/* The hash is FNV-1a 64 (published test vectors). */
START_TEST(the_name_hash_is_fnv1a_64)
{
    ck_assert_uint_eq(hz_fnv1a64(""), 0xcbf29ce484222325ULL);
    ck_assert_uint_eq(hz_fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
    ck_assert_uint_eq(hz_fnv1a64("foobar"), 0x85944171f73967e8ULL);
}
END_TEST

static void
fill(char *buf, char c, size_t n)
{
    memset(buf, c, n);
    buf[n] = '\0';
}

/* "A name longer than the 128 characters Hetzner allows is cut and ends in
 * - and a 16-digit hex hash of the whole name." */
START_TEST(
    a_name_longer_than_128_characters_is_cut_and_ends_in_dash_and_16_hex_digits_of_the_whole_name)
{
    char svc[64], ns[64], cl[64], whole[200], n[HZ_NAME_MAX + 1], want[17];
    fill(svc, 's', 63);
    fill(ns, 'n', 63);
    fill(cl, 'c', 63);
    snprintf(whole, sizeof(whole), "%s.%s.%s", cl, svc, ns);
    hz_name_for_service(NULL, cl, svc, ns, n);
    ck_assert_uint_eq(strlen(n), 128);
    ck_assert_int_eq(memcmp(n, whole, 111), 0);
    ck_assert_int_eq(n[111], '-');
    snprintf(want, sizeof(want), "%016llx", (unsigned long long)hz_fnv1a64(whole));
    ck_assert_str_eq(n + 112, want);
    for (int i = 112; i < 128; i++)
        ck_assert_msg(strchr("0123456789abcdef", n[i]) != NULL, "not hex: %c", n[i]);
}
END_TEST

START_TEST(a_name_of_exactly_128_characters_is_kept)
{
    char name[129], n[HZ_NAME_MAX + 1];
    fill(name, 'x', 128);
    hz_name_fit(name, n);
    ck_assert_str_eq(n, name);
    char longer[130];
    fill(longer, 'x', 129);
    hz_name_fit(longer, n);
    ck_assert_uint_eq(strlen(n), 128);
    ck_assert_int_eq(n[111], '-');
}
END_TEST

/* The hash is of the whole name: two long names that share the kept part
 * still get different names. */
START_TEST(long_names_that_share_their_first_111_characters_still_differ)
{
    char a[201], b[201], na[HZ_NAME_MAX + 1], nb[HZ_NAME_MAX + 1];
    fill(a, 'q', 200);
    fill(b, 'q', 200);
    b[199] = 'r';
    hz_name_fit(a, na);
    hz_name_fit(b, nb);
    ck_assert_int_eq(memcmp(na, nb, 111), 0);
    ck_assert_str_ne(na, nb);
}
END_TEST

/* An annotated name over 128 characters is cut the same way, without the
 * cluster prefix. */
START_TEST(a_long_annotation_name_is_cut_the_same_way_without_cluster_prefix)
{
    char a[151], n[HZ_NAME_MAX + 1], want[17];
    fill(a, 'a', 150);
    hz_name_for_service(a, "prod", "web", "shop", n);
    ck_assert_uint_eq(strlen(n), 128);
    ck_assert_int_eq(strncmp(n, "prod", 4) != 0, 1);
    snprintf(want, sizeof(want), "%016llx", (unsigned long long)hz_fnv1a64(a));
    ck_assert_str_eq(n + 112, want);
}
END_TEST

/* The cut never splits a UTF-8 sequence. */
START_TEST(the_cut_does_not_split_a_utf8_sequence)
{
    char a[300], n[HZ_NAME_MAX + 1];
    fill(a, 'x', 110);
    strcat(a, "\xc3\xa9\xc3\xa9\xc3\xa9"); /* "ééé" from byte 110 */
    strcat(a, "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy");
    hz_name_fit(a, n);
    /* byte 111 would be inside the first é: the kept part stops at 110 */
    ck_assert_int_eq(n[110], '-');
    ck_assert_uint_eq(strlen(n), 127);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb names");
    TCase *tc = tcase_create("names");
    tcase_add_test(tc, without_the_annotation_the_balancer_is_named_service_dot_namespace);
    tcase_add_test(tc, with_a_cluster_name_the_balancer_is_named_cluster_dot_service_dot_namespace);
    tcase_add_test(tc, the_cluster_name_is_not_added_to_a_name_from_the_annotation);
    tcase_add_test(tc, earlier_releases_named_the_balancer_after_the_service_without_its_namespace);
    tcase_add_test(tc, the_name_hash_is_fnv1a_64);
    tcase_add_test(
        tc,
        a_name_longer_than_128_characters_is_cut_and_ends_in_dash_and_16_hex_digits_of_the_whole_name);
    tcase_add_test(tc, a_name_of_exactly_128_characters_is_kept);
    tcase_add_test(tc, long_names_that_share_their_first_111_characters_still_differ);
    tcase_add_test(tc, a_long_annotation_name_is_cut_the_same_way_without_cluster_prefix);
    tcase_add_test(tc, the_cut_does_not_split_a_utf8_sequence);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
