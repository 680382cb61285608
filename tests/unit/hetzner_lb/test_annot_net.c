/*
 * hcloud-cloud-controller-manager's network and status annotations
 * (modules/mod_hetzner_lb/hz_annot.c): each read, each validated; a bad
 * value is named in the one message of the set and leaves nothing parsed.
 */
#include <errno.h>
#include <stdio.h>

#include "common.h"
#include "testutil.h"

/* Parse kv; expect -EINVAL and a message holding every needle. */
static void
expect_refused(const char *const *kv, const char *n1, const char *n2)
{
    struct hz_annot a;
    char err[512];
    ck_assert_msg(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)) == -EINVAL,
                  "%s=%s accepted", kv[0], kv[1]);
    ck_assert_msg(strstr(err, n1) != NULL, "message lacks \"%s\": %s", n1, err);
    ck_assert_msg(!n2 || strstr(err, n2) != NULL, "message lacks \"%s\": %s", n2, err);
    hz_annot_clear(&a);
}

/* "hostname: Specifies the hostname of the Load Balancer. This will be used
 * as ingress address instead of the Load Balancer IP addresses": a DNS name
 * the API server takes in a status; an IP or a bad name is refused by name. */
START_TEST(hostname_is_a_dns_name_not_an_address)
{
    const char *good[] = {"lb.example.com", "a", "x-1.y-2.z", "1lb.example.com"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        const char *kv[] = {"load-balancer.hetzner.cloud/hostname", good[i], NULL};
        struct hz_annot a;
        char err[512];
        ck_assert_msg(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)) == 0, "%s: %s",
                      good[i], err);
        ck_assert_str_eq(a.hostname, good[i]);
        hz_annot_clear(&a);
        ck_assert_ptr_null(a.hostname);
    }
    const char *bad[][2] = {
        {"10.1.2.3", "IP address"},     {"2001:db8::1", "IP address"}, {"", "1 to 253"},
        {"Lb.example.com", "DNS name"}, {"lb..example", "DNS name"},   {"-lb.example", "DNS name"},
        {"lb-.example", "DNS name"},    {"lb.example.", "DNS name"},   {"lb example", "DNS name"},
        {"lb_1.example", "DNS name"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *kv[] = {"load-balancer.hetzner.cloud/hostname", bad[i][0], NULL};
        expect_refused(kv, "load-balancer.hetzner.cloud/hostname", bad[i][1]);
    }
    char longest[300];
    memset(longest, 'a', sizeof(longest));
    for (size_t i = 63; i < 253; i += 64)
        longest[i] = '.';
    longest[253] = '\0';
    const char *kv[] = {"load-balancer.hetzner.cloud/hostname", longest, NULL};
    struct hz_annot a;
    char err[512];
    ck_assert_int_eq(hz_annot_parse(kv_get, (void *)kv, &a, err, sizeof(err)), 0);
    hz_annot_clear(&a);
    longest[253] = 'a';
    longest[254] = '\0';
    expect_refused(kv, "load-balancer.hetzner.cloud/hostname", "1 to 253");
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("hetzner_lb annotations (hccm network and status)");
    TCase *tc = tcase_create("annot_net");
    tcase_add_test(tc, hostname_is_a_dns_name_not_an_address);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
