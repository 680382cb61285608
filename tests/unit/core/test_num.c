/* core_llround (core/num.h) against libm's llround: halves away from zero,
 * the largest double below 0.5, negative values, large integers. */
#include <check.h>
#include <float.h>
#include <math.h>

#include "num.h"
#include "testutil.h"

START_TEST(core_llround_matches_llround)
{
    const double xs[] = {0.0,
                         -0.0,
                         0.4,
                         0.5,
                         -0.5,
                         1.5,
                         2.5,
                         -2.5,
                         0.49999999999999994,
                         -0.49999999999999994,
                         1e15 + 0.5,
                         -1e15 - 0.5,
                         4503599627370495.5,
                         9007199254740993.0,
                         123.456,
                         -123.456,
                         29999.9995,
                         1e18,
                         -1e18};
    for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++)
        ck_assert_msg(core_llround(xs[i]) == llround(xs[i]), "x=%.17g: %lld, llround %lld", xs[i],
                      core_llround(xs[i]), llround(xs[i]));
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("num");
    TCase *tc = tcase_create("num");
    tcase_add_test(tc, core_llround_matches_llround);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
