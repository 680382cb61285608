/*
 * fakehost: one struct plb_host for the suites that drive a module (or a
 * module's code) without the daemon, through the public header only.
 *
 * A struct fake_host holds the root and one writable table per topic.
 * fake_host_init sets every size, the root's pointers and version, and the
 * members every suite shares alike: mem (libc, alloc zeroing), the clocks
 * (loop->now_ms and wall_ms from CLOCK_MONOTONIC and CLOCK_REALTIME) and
 * log (records at or above FAKE_HOST_LOG_LEVEL, default WARN, written to
 * stderr). A suite then sets the members its module uses, replacing these
 * where it watches them; every other member stays NULL, so a module that
 * calls one crashes the test instead of passing it.
 *
 * Cutting a table short (fake_host_cut) makes it look like an older 3.x
 * daemon's: PLB_HAS finds no member from the named one on.
 */
#ifndef PRISMLB_TESTS_FAKEHOST_H
#define PRISMLB_TESTS_FAKEHOST_H

#include <stddef.h>

#include <prismlb/module.h>

struct fake_host {
    struct plb_host root;
    struct plb_host_log log;
    struct plb_host_mem mem;
    struct plb_host_loop loop;
    struct plb_host_http http;
    struct plb_host_kube kube;
    struct plb_host_obj obj;
    struct plb_host_metrics metrics;
    struct plb_host_lb lb;
    struct plb_host_links links;
};

/* Set f up as described above (f is zeroed first). */
void fake_host_init(struct fake_host *f);

/* The table a module gets: &f->root (borrowed for f's life). */
static inline const struct plb_host *
fake_host(const struct fake_host *f)
{
    return &f->root;
}

/* Cut the table at *size_field (a topic table's size member, or the root's)
 * to end before the member at offset `at` of that table:
 *   fake_host_cut(&f.kube.size, offsetof(struct plb_host_kube, informer_foreach));
 * The members from there on stay set but PLB_HAS no longer finds them. */
static inline void
fake_host_cut(size_t *size_field, size_t at)
{
    *size_field = at;
}

#endif
