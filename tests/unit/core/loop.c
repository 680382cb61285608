#include "loop.h"

#include <check.h>
#include <signal.h>
#include <sys/time.h>

#include "reactor.h"

struct event_base *base;

void
loop_setup(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the daemon does */
    base = core_event_base_new();
    ck_assert_ptr_nonnull(base);
}

void
loop_teardown(void)
{
    event_base_free(base);
    base = NULL;
}

void
run_for(int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    ck_assert_int_eq(event_base_loopexit(base, &tv), 0);
    ck_assert_int_ge(event_base_dispatch(base), 0);
}
