/* Unit tests of the settings parser, durations, docs and endpoint merging. */
#include <check.h>
#include <libconfig.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "links.h"
#include "settings.h"
#include "testutil.h"

struct cfg {
    int flag;
    int64_t count;
    double ratio;
    char *name;
    int64_t wait_ms;
    int color;
    struct plb_strv list;
    char *file;
};

static const char *const colors[] = {"red", "green", NULL};

static const char *
not_bob(const void *v)
{
    const char *const *s = v;
    return (*s && strcmp(*s, "bob") == 0) ? "bob is not allowed" : NULL;
}

/* clang-format off */
static const struct plb_setting table[] = {
    {.name = "flag", .type = PLB_SET_BOOL, .offset = offsetof(struct cfg, flag), .def = "true"},
    {.name = "count", .type = PLB_SET_INT, .offset = offsetof(struct cfg, count), .def = "3",
     .min = 1, .max = 10, .env = "TEST_SETTINGS_COUNT"},
    {.name = "ratio", .type = PLB_SET_DOUBLE, .offset = offsetof(struct cfg, ratio),
     .def = "0.25", .min = 0, .max = 1},
    {.name = "name", .type = PLB_SET_STRING, .offset = offsetof(struct cfg, name),
     .flags = PLB_SET_REQUIRED, .validate = not_bob},
    {.name = "wait", .type = PLB_SET_DURATION, .offset = offsetof(struct cfg, wait_ms),
     .def = "20s", .min = 1000},
    {.name = "color", .type = PLB_SET_ENUM, .offset = offsetof(struct cfg, color), .def = "red",
     .enum_values = colors},
    {.name = "list", .type = PLB_SET_STRING_LIST, .offset = offsetof(struct cfg, list),
     .def = "a, b,c", .flags = PLB_SET_NONEMPTY},
    {.name = "file", .type = PLB_SET_PATH, .offset = offsetof(struct cfg, file)},
    PLB_SETTINGS_END,
};
/* clang-format on */

/* Parse text as a config file and the settings of its root group. */
static int
parse(const char *text, struct cfg *out, struct core_errors *err)
{
    config_t cf;
    config_init(&cf);
    ck_assert_int_eq(config_read_string(&cf, text), CONFIG_TRUE);
    memset(out, 0, sizeof(*out));
    int n = core_settings_parse(table, out, config_root_setting(&cf), "t.conf", "inst",
                                "/etc/prismlb", NULL, err);
    config_destroy(&cf);
    return n;
}

static int
has_error(const struct core_errors *e, const char *needle)
{
    for (size_t i = 0; i < e->nlines; i++) {
        if (strstr(e->lines[i], needle))
            return 1;
    }
    return 0;
}

START_TEST(defaults_and_values)
{
    struct cfg c;
    struct core_errors e = {0};
    ck_assert_int_eq(parse("name = \"x\"; file = \"ca.pem\";", &c, &e), 0);
    ck_assert_int_eq(c.flag, 1);
    ck_assert_int_eq(c.count, 3);
    ck_assert_double_eq(c.ratio, 0.25);
    ck_assert_str_eq(c.name, "x");
    ck_assert_int_eq(c.wait_ms, 20000);
    ck_assert_int_eq(c.color, 0);
    ck_assert_uint_eq(c.list.n, 3);
    ck_assert_str_eq(c.list.v[2], "c");
    ck_assert_str_eq(c.file, "/etc/prismlb/ca.pem");
    core_settings_free(table, &c);
    core_errors_clear(&e);
}
END_TEST

START_TEST(file_values)
{
    struct cfg c;
    struct core_errors e = {0};
    ck_assert_int_eq(parse("name = \"y\"; flag = false; count = 7; ratio = 1; wait = \"1m30s\";"
                           " color = \"green\"; list = [\"p\", \"q\"]; file = \"/abs\";",
                           &c, &e),
                     0);
    ck_assert_int_eq(c.flag, 0);
    ck_assert_int_eq(c.count, 7);
    ck_assert_double_eq(c.ratio, 1.0);
    ck_assert_int_eq(c.wait_ms, 90000);
    ck_assert_int_eq(c.color, 1);
    ck_assert_uint_eq(c.list.n, 2);
    ck_assert_str_eq(c.list.v[1], "q");
    ck_assert_str_eq(c.file, "/abs");
    core_settings_free(table, &c);
    core_errors_clear(&e);
}
END_TEST

START_TEST(errors_name_file_line_and_setting)
{
    struct cfg c;
    struct core_errors e = {0};
    int n = parse("name = \"z\";\ncount = \"many\";\nratio = 2.0;\ncolour = \"red\";\n"
                  "wait = \"5 parsecs\";\ncolor = \"blue\";\nlist = [];\n",
                  &c, &e);
    ck_assert_int_eq(n, 6);
    ck_assert(has_error(&e, "t.conf:2: inst.count: expected an integer, got a string"));
    ck_assert(has_error(&e, "t.conf:3: inst.ratio: 2 is out of range [0, 1]"));
    ck_assert(has_error(&e, "t.conf:4: inst.colour: unknown setting (did you mean \"color\"?)"));
    ck_assert(has_error(&e, "t.conf:5: inst.wait: expected a duration"));
    ck_assert(has_error(&e, "t.conf:6: inst.color: must be one of red, green, not \"blue\""));
    ck_assert(has_error(&e, "t.conf:7: inst.list: must not be empty"));
    core_settings_free(table, &c);
    core_errors_clear(&e);
}
END_TEST

START_TEST(required_validator_and_minimum)
{
    struct cfg c;
    struct core_errors e = {0};
    ck_assert_int_eq(parse("wait = \"500ms\";", &c, &e), 2);
    ck_assert(has_error(&e, "inst.name: required setting is missing"));
    ck_assert(has_error(&e, "inst.wait: 500ms is below the minimum 1s"));
    core_settings_free(table, &c);
    core_errors_clear(&e);
    ck_assert_int_eq(parse("name = \"bob\";", &c, &e), 1);
    ck_assert(has_error(&e, "t.conf:1: inst.name: bob is not allowed"));
    core_settings_free(table, &c);
    core_errors_clear(&e);
}
END_TEST

START_TEST(environment_wins_over_file)
{
    struct cfg c;
    struct core_errors e = {0};
    setenv("TEST_SETTINGS_COUNT", "9", 1);
    ck_assert_int_eq(parse("name = \"n\"; count = 2;", &c, &e), 0);
    ck_assert_int_eq(c.count, 9);
    core_settings_free(table, &c);
    setenv("TEST_SETTINGS_COUNT", "11", 1);
    ck_assert_int_eq(parse("name = \"n\";", &c, &e), 1);
    ck_assert(has_error(&e, "environment TEST_SETTINGS_COUNT: inst.count: 11 is out of range"));
    unsetenv("TEST_SETTINGS_COUNT");
    core_settings_free(table, &c);
    core_errors_clear(&e);
}
END_TEST

START_TEST(durations)
{
    int64_t ms;
    ck_assert_int_eq(core_duration_parse("150ms", &ms), 0);
    ck_assert_int_eq(ms, 150);
    ck_assert_int_eq(core_duration_parse("20s", &ms), 0);
    ck_assert_int_eq(ms, 20000);
    ck_assert_int_eq(core_duration_parse("1m30s", &ms), 0);
    ck_assert_int_eq(ms, 90000);
    ck_assert_int_eq(core_duration_parse("2h", &ms), 0);
    ck_assert_int_eq(ms, 7200000);
    ck_assert_int_eq(core_duration_parse("1.5s", &ms), 0);
    ck_assert_int_eq(ms, 1500);
    ck_assert_int_eq(core_duration_parse("15", &ms), 0);
    ck_assert_int_eq(ms, 15000);
    ck_assert_int_eq(core_duration_parse("0", &ms), 0);
    ck_assert_int_eq(ms, 0);
    ck_assert_int_eq(core_duration_parse("-1s", &ms), 0);
    ck_assert_int_eq(ms, -1000);
    ck_assert_int_lt(core_duration_parse("", &ms), 0);
    ck_assert_int_lt(core_duration_parse("5x", &ms), 0);
    ck_assert_int_lt(core_duration_parse("s", &ms), 0);
    ck_assert_int_lt(core_duration_parse("1s2", &ms), 0);
    char buf[32];
    core_duration_format(90000, buf, sizeof(buf));
    ck_assert_str_eq(buf, "1m30s");
    core_duration_format(150, buf, sizeof(buf));
    ck_assert_str_eq(buf, "150ms");
    core_duration_format(0, buf, sizeof(buf));
    ck_assert_str_eq(buf, "0s");
}
END_TEST

START_TEST(settings_doc_lists_every_setting)
{
    char *doc = core_settings_doc(table);
    ck_assert_ptr_nonnull(doc);
    ck_assert_ptr_nonnull(strstr(doc, "| setting | type | default | environment | description |"));
    ck_assert_ptr_nonnull(strstr(doc, "| `count` | integer | `3` | `TEST_SETTINGS_COUNT` |"));
    ck_assert_ptr_nonnull(strstr(doc, "Range 1 to 10."));
    ck_assert_ptr_nonnull(strstr(doc, "| `name` | string | `(required)` |"));
    ck_assert_ptr_nonnull(strstr(doc, "One of: red, green."));
    core_free(doc);
}
END_TEST

START_TEST(edit_distance)
{
    ck_assert_uint_eq(core_edit_distance("bind_port", "bind_prot"), 2);
    ck_assert_uint_eq(core_edit_distance("abc", "abc"), 0);
    ck_assert_uint_eq(core_edit_distance("", "ab"), 2);
}
END_TEST

START_TEST(merge_dedups_and_sorts)
{
    char *a[] = {"10.0.0.2:6443", "10.0.0.1:6443"};
    char *b[] = {"10.0.0.1:6443", "10.0.0.3:6443"};
    struct plb_strv sa = {2, a}, sb = {2, b};
    const struct plb_strv *sets[] = {&sa, &sb};
    const char **out;
    size_t n;
    ck_assert_int_eq(core_endpoints_merge(sets, 2, &out, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(out[0], "10.0.0.1:6443");
    ck_assert_str_eq(out[1], "10.0.0.2:6443");
    ck_assert_str_eq(out[2], "10.0.0.3:6443");
    core_free(out);
}
END_TEST

START_TEST(formats_accept_and_reject)
{
    char buf[256];
    ck_assert_ptr_null(core_format_check(PLB_FMT_HOST, "10.0.0.1", buf, sizeof(buf)));
    ck_assert_ptr_null(core_format_check(PLB_FMT_HOST, "fd00::1", buf, sizeof(buf)));
    ck_assert_ptr_null(core_format_check(PLB_FMT_HOST, "api.example.com", buf, sizeof(buf)));
    ck_assert_ptr_nonnull(core_format_check(PLB_FMT_HOST, "bad_host", buf, sizeof(buf)));
    ck_assert_ptr_nonnull(core_format_check(PLB_FMT_HOST, "-a.example", buf, sizeof(buf)));
    ck_assert_ptr_null(core_format_check(PLB_FMT_HOST_PORT, "10.0.0.1:6443", buf, sizeof(buf)));
    ck_assert_ptr_null(core_format_check(PLB_FMT_HOST_PORT, "[fd00::1]:6443", buf, sizeof(buf)));
    ck_assert_str_eq(core_format_check(PLB_FMT_HOST_PORT, "10.0.0.1", buf, sizeof(buf)),
                     "must be host:port (the port is missing)");
    ck_assert_str_eq(core_format_check(PLB_FMT_HOST_PORT, "10.0.0.1:65536", buf, sizeof(buf)),
                     "has a port that is not a number in the range 1-65535");
    ck_assert_ptr_nonnull(core_format_check(PLB_FMT_HOST_PORT, "fd00::1:6443", buf, sizeof(buf)));
    ck_assert_ptr_null(
        core_format_check(PLB_FMT_TLS_NAME, "kubernetes.default.svc", buf, sizeof(buf)));
    ck_assert_ptr_nonnull(core_format_check(PLB_FMT_TLS_NAME, "https://k", buf, sizeof(buf)));
    ck_assert_ptr_null(
        core_format_check(PLB_FMT_HTTP_URL, "https://127.0.0.1:7445/clusters/x", buf, sizeof(buf)));
    ck_assert_ptr_nonnull(core_format_check(PLB_FMT_HTTP_URL, "127.0.0.1:7445", buf, sizeof(buf)));
    ck_assert_ptr_nonnull(core_format_check(PLB_FMT_HTTP_URL, "https://", buf, sizeof(buf)));
    ck_assert_ptr_null(core_format_check(PLB_FMT_DNS_LABEL, "kube-system", buf, sizeof(buf)));
    ck_assert_ptr_nonnull(core_format_check(PLB_FMT_DNS_LABEL, "Kube", buf, sizeof(buf)));
    ck_assert_ptr_nonnull(core_format_check(PLB_FMT_DNS_LABEL, "a-", buf, sizeof(buf)));
    /* Empty values are left to PLB_SET_NONEMPTY. */
    ck_assert_ptr_null(core_format_check(PLB_FMT_DNS_LABEL, "", buf, sizeof(buf)));
}
END_TEST

START_TEST(list_formats_name_the_entry)
{
    /* clang-format off */
    static const struct plb_setting t[] = {
        {.name = "eps", .type = PLB_SET_STRING_LIST, .offset = 0,
         .format = PLB_FMT_HOST_PORT},
        PLB_SETTINGS_END,
    };
    struct plb_strv v = {0, NULL};
    struct core_errors e = {0};
    config_t cf;
    config_init(&cf);
    ck_assert_int_eq(config_read_string(&cf, "eps = [\"10.0.0.1:6443\", \"10.0.0.2\"];"),
                     CONFIG_TRUE);
    ck_assert_int_eq(core_settings_parse(t, &v, config_root_setting(&cf), "t.conf", "i", "/",
                                         NULL, &e),
                     1);
    ck_assert(has_error(&e, "t.conf:1: i.eps: entry 2 \"10.0.0.2\" must be host:port"));
    core_settings_free(t, &v);
    core_errors_clear(&e);
    config_destroy(&cf);
}
END_TEST

START_TEST(allocation_failures_are_errors_not_crashes)
{
    /* Sweep every allocation of a parse: each failure must be reported
     * cleanly (ASan/valgrind catch leaks). */
    for (unsigned long nth = 1; nth < 200; nth++) {
        struct cfg c;
        struct core_errors e = {0};
        config_t cf;
        config_init(&cf);
        ck_assert_int_eq(config_read_string(&cf, "name = \"x\"; list = [\"a\",\"b\"];"
                                                 " file = \"f\"; colour = 1;"),
                         CONFIG_TRUE);
        memset(&c, 0, sizeof(c));
        core_alloc_fail_at(nth, 0);
        int n = core_settings_parse(table, &c, config_root_setting(&cf), "t.conf", "inst", "/d",
                                    NULL, &e);
        core_alloc_fail_at(0, 0);
        ck_assert_int_ge(n, 1); /* at least the unknown "colour" */
        core_settings_free(table, &c);
        core_errors_clear(&e);
        config_destroy(&cf);
    }
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("settings");
    TCase *tc = tcase_create("settings");
    tcase_add_test(tc, defaults_and_values);
    tcase_add_test(tc, file_values);
    tcase_add_test(tc, errors_name_file_line_and_setting);
    tcase_add_test(tc, required_validator_and_minimum);
    tcase_add_test(tc, environment_wins_over_file);
    tcase_add_test(tc, durations);
    tcase_add_test(tc, settings_doc_lists_every_setting);
    tcase_add_test(tc, edit_distance);
    tcase_add_test(tc, merge_dedups_and_sorts);
    tcase_add_test(tc, formats_accept_and_reject);
    tcase_add_test(tc, list_formats_name_the_entry);
    tcase_add_test(tc, allocation_failures_are_errors_not_crashes);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run_suite(suite());
}
