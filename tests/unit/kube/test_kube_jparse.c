/*
 * Check suite for core/kube/jparse.c: the fast JSON reader must accept and
 * build exactly what jansson's json_loadb(JSON_DECODE_ANY) does. A fixed
 * corpus of edge cases, then a differential fuzz: random documents and
 * random mutations of them, parsed by both, must agree on acceptance and
 * on the value.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"
#include "testutil.h"

/* Both parsers agree on text (len bytes). */
static void
agree(const char *text, size_t len)
{
    json_t *a = json_loadb(text, len, JSON_DECODE_ANY, NULL);
    json_t *b = core_kube_json_parse(text, len);
    if (!a || !b) {
        ck_assert_msg(!a && !b, "acceptance differs (jansson %s, ours %s) on: %.*s",
                      a ? "accepts" : "rejects", b ? "accepts" : "rejects", (int)len, text);
    } else {
        char *sa = json_dumps(a, JSON_SORT_KEYS | JSON_ENCODE_ANY);
        char *sb = json_dumps(b, JSON_SORT_KEYS | JSON_ENCODE_ANY);
        ck_assert_msg(json_equal(a, b) && json_typeof(a) == json_typeof(b),
                      "values differ on %.*s\njansson %s\nours    %s", (int)len, text, sa, sb);
        free(sa);
        free(sb);
    }
    json_decref(a);
    json_decref(b);
}

static void
agree_s(const char *text)
{
    agree(text, strlen(text));
}

START_TEST(corpus)
{
    const char *cases[] = {
        "{}",
        "[]",
        " \t\r\n{ } ",
        "null",
        "true",
        "false",
        "0",
        "-0",
        "1",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "-9223372036854775809",
        "1.5",
        "-1.5e10",
        "1e400",
        "1E-2",
        "0.0",
        "01",
        "1.",
        ".5",
        "-",
        "1e",
        "1e+",
        "+1",
        "\"\"",
        "\"abc\"",
        "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
        "\"\\u00e9\\u20ac\\ud83d\\ude00\"",
        "\"\\ud83d\"",
        "\"\\ude00\"",
        "\"\\ud83dx\"",
        "\"\\u0000\"",
        "\"\\u12\"",
        "\"\\x41\"",
        "\"tab\there\"",
        "\"\xc3\xa9\"",
        "\"\xe2\x82\xac\"",
        "\"\xf0\x9f\x98\x80\"",
        "\"\xc0\xaf\"",
        "\"\xed\xa0\x80\"",
        "\"\xf4\x90\x80\x80\"",
        "\"\xff\"",
        "\"\xc3\"",
        "\"open",
        "{\"a\":1,\"a\":2}",
        "{\"a\":1,}",
        "[1,]",
        "[1 2]",
        "{\"a\" 1}",
        "{a:1}",
        "{\"a\":}",
        "[",
        "]",
        "{",
        "nul",
        "truex",
        "[true,false,null]",
        "{\"k\\u00e9y\":\"v\"}",
        "{\"\\u0000\":1}",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"5\"}}}",
        "1 2",
        "[[[[[[[[[[]]]]]]]]]]",
        "{\"a\":[{\"b\":[{\"c\":{}}]}]}",
        "\"\\u0041\\u00\"",
        "123456789012345678901234567890.5",
        "-1.7976931348623157e308",
        "2.2250738585072014e-308",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        agree_s(cases[i]);
    /* Not NUL-terminated: only len bytes count. */
    agree("[1,2]xyz", 5);
    agree("{\"a\":1}", 3);
    ck_assert_ptr_null(core_kube_json_parse(NULL, 0));
    /* Deep nesting is refused, not a stack overflow. */
    char deep[4000];
    memset(deep, '[', sizeof(deep) - 1);
    deep[sizeof(deep) - 1] = '\0';
    ck_assert_ptr_null(core_kube_json_parse(deep, strlen(deep)));
}
END_TEST

/* A random JSON document into buf (returns the length). */
static size_t
gen(char *buf, size_t cap, int depth)
{
    static const char *atoms[] = {"0",
                                  "-12",
                                  "3.25",
                                  "1e3",
                                  "true",
                                  "false",
                                  "null",
                                  "\"x\"",
                                  "\"\\u00e9\\n\"",
                                  "\"\xc3\xa9t\xc3\xa9\"",
                                  "9007199254740993",
                                  "\"a\\\\b\"",
                                  "\"\\ud834\\udd1e\""};
    size_t n = 0;
    int kind = depth > 4 ? 2 : rand() % 3;
    if (cap < 64)
        return (size_t)snprintf(buf, cap, "0");
    if (kind == 2) {
        return (size_t)snprintf(buf, cap, "%s", atoms[rand() % 13]);
    }
    int items = rand() % 4;
    buf[n++] = kind == 0 ? '{' : '[';
    for (int i = 0; i < items && n + 80 < cap; i++) {
        if (i)
            buf[n++] = ',';
        if (kind == 0)
            n += (size_t)snprintf(buf + n, cap - n, "\"k%d\":", rand() % 5);
        n += gen(buf + n, cap - n - 2, depth + 1);
    }
    buf[n++] = kind == 0 ? '}' : ']';
    buf[n] = '\0';
    return n;
}

START_TEST(differential_fuzz)
{
    char doc[4096], mut[4096];
    const char noise[] = "{}[]\",:\\u0123456789eE+-.tfn \x01\xc3\xa9\xff";
    srand(12345);
    for (int round = 0; round < 30000; round++) {
        size_t n = gen(doc, sizeof(doc), 0);
        agree(doc, n);
        memcpy(mut, doc, n);
        size_t m = n;
        int edits = 1 + rand() % 3;
        for (int e = 0; e < edits && m > 0; e++) {
            size_t at = (size_t)rand() % m;
            switch (rand() % 3) {
            case 0:
                mut[at] = noise[rand() % (int)(sizeof(noise) - 1)];
                break;
            case 1:
                memmove(mut + at, mut + at + 1, m - at - 1);
                m--;
                break;
            default:
                if (m + 1 < sizeof(mut)) {
                    memmove(mut + at + 1, mut + at, m - at);
                    mut[at] = noise[rand() % (int)(sizeof(noise) - 1)];
                    m++;
                }
            }
        }
        agree(mut, m);
    }
}
END_TEST

START_TEST(allocation_failures_are_clean)
{
    const char *doc = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"n\\u00e9\","
                      "\"labels\":{\"a\":\"b\"}},\"spec\":{\"ports\":[1,2,3.5]}}}";
    int completed = 0;
    for (unsigned long nth = 1; nth < 1000 && !completed; nth++) {
        unsigned long before = core_alloc_count();
        core_alloc_fail_at(nth, 0);
        json_t *j = core_kube_json_parse(doc, strlen(doc));
        core_alloc_fail_at(0, 0);
        if (core_alloc_count() - before < nth) {
            ck_assert_ptr_nonnull(j);
            completed = 1;
        }
        json_decref(j);
    }
    ck_assert(completed);
}
END_TEST

static Suite *
jparse_suite(void)
{
    Suite *s = suite_create("kube_jparse");
    TCase *tc = tcase_create("jparse");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, corpus);
    tcase_add_test(tc, differential_fuzz);
    tcase_add_test(tc, allocation_failures_are_clean);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    json_set_alloc_funcs(core_malloc, core_free); /* jansson through the hook */
    return tu_run_suite(jparse_suite());
}
