/*
 * done: asynchronous completions (plb_done). A completion carries the
 * function to call when a module says an asynchronous stop or gate_close
 * finished; firing it frees it first, so fn may start the next step.
 */
#include "links.h"

#include "alloc.h"

struct plb_done {
    void (*fn)(void *arg);
    void *arg;
};

plb_done *
core_done_new(void (*fn)(void *arg), void *arg)
{
    plb_done *d = core_calloc(1, sizeof(*d));
    if (d) {
        d->fn = fn;
        d->arg = arg;
    }
    return d;
}

void
core_done_fire(plb_done *d)
{
    if (!d)
        return;
    void (*fn)(void *) = d->fn;
    void *arg = d->arg;
    core_free(d);
    if (fn)
        fn(arg);
}
