/* The status.loadBalancer.ingress patch of lb->status_write_ingress (ABI 3.2), rule by rule. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "lb/lbhost.h"
#include "testutil.h"

/* The patch for v as text, or NULL with *err. */
static char *
patch(const struct plb_lb_ingress *v, size_t n, size_t entry_size, int *err)
{
    *err = 1;
    char *p = core_lb_ingress_patch(v, n, entry_size, err);
    ck_assert_int_eq(!p, *err != 0);
    return p;
}

static void
assert_patch(const struct plb_lb_ingress *v, size_t n, size_t entry_size, const char *want)
{
    int err;
    char *p = patch(v, n, entry_size, &err);
    ck_assert_msg(p != NULL, "refused: %d", err);
    ck_assert_str_eq(p, want);
    core_free(p);
}

START_TEST(ips_carry_their_ip_mode)
{
    struct plb_lb_ingress v[] = {{.ip = "192.0.2.1", .ip_mode = "Proxy"},
                                 {.ip = "2001:db8::1", .ip_mode = "Proxy"},
                                 {.ip = "10.0.0.5"}};
    assert_patch(v, 3, sizeof(v[0]),
                 "{\"status\":{\"loadBalancer\":{\"ingress\":["
                 "{\"ip\":\"192.0.2.1\",\"ipMode\":\"Proxy\"},"
                 "{\"ip\":\"2001:db8::1\",\"ipMode\":\"Proxy\"},{\"ip\":\"10.0.0.5\"}]}}}");
}
END_TEST

START_TEST(a_hostname_entry_has_no_ip_and_no_ip_mode)
{
    struct plb_lb_ingress v[] = {{.hostname = "lb.example.com"}};
    assert_patch(
        v, 1, sizeof(v[0]),
        "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"hostname\":\"lb.example.com\"}]}}}");
}
END_TEST

START_TEST(no_entries_clear_the_ingress)
{
    assert_patch(NULL, 0, sizeof(struct plb_lb_ingress),
                 "{\"status\":{\"loadBalancer\":{\"ingress\":[]}}}");
}
END_TEST

/* A module built against a later minor passes longer entries: their stride is honoured and the
 * fields the daemon does not know are not read. */
START_TEST(a_longer_entry_is_read_by_its_stride)
{
    struct later {
        struct plb_lb_ingress e;
        const char *unknown;
    } v[] = {{{.ip = "192.0.2.1", .ip_mode = "VIP"}, "x"}, {{.hostname = "a.example"}, "y"}};
    assert_patch(&v[0].e, 2, sizeof(v[0]),
                 "{\"status\":{\"loadBalancer\":{\"ingress\":["
                 "{\"ip\":\"192.0.2.1\",\"ipMode\":\"VIP\"},{\"hostname\":\"a.example\"}]}}}");
}
END_TEST

START_TEST(entries_the_api_server_would_refuse_are_refused)
{
    struct plb_lb_ingress both[] = {{.ip = "192.0.2.1", .hostname = "a.example"}};
    struct plb_lb_ingress none[] = {{.ip_mode = "VIP"}};
    struct plb_lb_ingress mode_on_name[] = {{.hostname = "a.example", .ip_mode = "VIP"}};
    struct plb_lb_ingress good_then_bad[] = {{.ip = "192.0.2.1"}, {.ip_mode = "Proxy"}};
    int err;
    ck_assert_ptr_null(patch(both, 1, sizeof(both[0]), &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(patch(none, 1, sizeof(none[0]), &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(patch(mode_on_name, 1, sizeof(mode_on_name[0]), &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(patch(good_then_bad, 2, sizeof(good_then_bad[0]), &err));
    ck_assert_int_eq(err, -EINVAL);
    /* an entry shorter than 3.2's, or entries without their array */
    ck_assert_ptr_null(patch(both, 1, sizeof(const char *), &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(patch(NULL, 1, sizeof(both[0]), &err));
    ck_assert_int_eq(err, -EINVAL);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("lbstatus");
    TCase *tc = tcase_create("lbstatus");
    tcase_add_test(tc, ips_carry_their_ip_mode);
    tcase_add_test(tc, a_hostname_entry_has_no_ip_and_no_ip_mode);
    tcase_add_test(tc, no_entries_clear_the_ingress);
    tcase_add_test(tc, a_longer_entry_is_read_by_its_stride);
    tcase_add_test(tc, entries_the_api_server_would_refuse_are_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
