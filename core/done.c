/*
 * done: asynchronous completions (plb_done). A completion carries the
 * function to call when a module says an asynchronous stop or gate_close
 * finished; firing it frees it first (unless it is embedded), so fn may
 * start the next step.
 */
#include "links.h"

#include "alloc.h"

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
core_done_init(plb_done *d, void (*fn)(void *arg), void *arg)
{
    d->fn = fn;
    d->arg = arg;
    d->embedded = 1;
}

void
core_done_fire(plb_done *d)
{
    if (!d)
        return;
    void (*fn)(void *) = d->fn;
    void *arg = d->arg;
    if (d->embedded)
        d->fn = NULL; /* once */
    else
        core_free(d);
    if (fn)
        fn(arg);
}
