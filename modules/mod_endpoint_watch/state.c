/*
 * state: the endpoints discovery last found, kept across restarts in
 * `state_file`.
 *
 * At start the file is read and, when it is sound and younger than
 * state_file_max_age, its endpoints are published as provider "state"
 * beside the static ones until the Kubernetes provider answers (its first
 * published list, empty or not): then the "state" list is emptied. Static
 * endpoints are another provider, so the file can only add to them. A
 * file that is missing, not a regular file, unreadable, over
 * EW_STATE_MAX_BYTES, malformed in any line, truncated (its "end" line
 * missing or counting otherwise) or too old is a warning and ignored.
 *
 * Each non-empty list the Kubernetes provider publishes that differs from
 * the file's is written, at most once a second (a change within the second
 * after a write is written when the second is over; only the latest list
 * is), and once more at stop if one is pending. A write goes to
 * "<state_file>.tmp" (removed first, then created exclusively, so a FIFO
 * or a link planted there is never opened) and is renamed over the file:
 * a reader sees the old file or the new one. There is no fsync: the file
 * is a cache, and what a crash may leave (an old file, or a torn one,
 * which the "end" line shows) costs no more than a start without it.
 *
 * The format, text, one item a line:
 *   prismlb-endpoints 1
 *   written <wall clock, Unix seconds>
 *   <host:port>            (any number, at most EW_STATE_MAX_ENTRIES)
 *   end <number of host:port lines>
 *
 * Everything runs on the main loop; the files are small regular files in a
 * local directory the operator gives, read and written in one bounded
 * call each.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <prismlb/module_util.h>

#include "ew.h"

#define MAGIC "prismlb-endpoints 1"
#define WRITE_EVERY_MS 1000

/* ------------------------------------------------------------------------ */
/* Parsing (no I/O)                                                         */

/* An RFC 1123 hostname: labels of letters, digits and '-', not starting or
 * ending with '-', 1-63 bytes each, 253 in all. */
static int
valid_hostname(const char *h, size_t n)
{
    if (n == 0 || n > 253)
        return 0;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = h[i];
        if (ch == '.') {
            if (label == 0 || h[i - 1] == '-')
                return 0;
            label = 0;
            continue;
        }
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 (ch == '-' && label > 0);
        if (!ok || ++label > 63)
            return 0;
    }
    return label > 0 && h[n - 1] != '-';
}

int
ew_state_valid_endpoint(const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1] || strlen(colon + 1) > 5)
        return 0;
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535 || colon[1] < '0' || colon[1] > '9')
        return 0;
    size_t n = (size_t)(colon - s);
    char host[256];
    unsigned char addr[16];
    if (s[0] == '[') {
        if (n < 3 || s[n - 1] != ']' || n - 2 >= sizeof(host))
            return 0;
        memcpy(host, s + 1, n - 2);
        host[n - 2] = '\0';
        return inet_pton(AF_INET6, host, addr) == 1;
    }
    if (n >= sizeof(host))
        return 0;
    memcpy(host, s, n);
    host[n] = '\0';
    return inet_pton(AF_INET, host, addr) == 1 || valid_hostname(host, n);
}

/* The next line of text at *p (NUL-terminated in place); NULL at the end. */
static char *
next_line(char **p)
{
    if (!*p || !**p)
        return NULL;
    char *line = *p, *nl = strchr(line, '\n');
    if (nl) {
        *nl = '\0';
        *p = nl + 1;
    } else {
        *p = NULL; /* a last line without '\n': the file was cut */
    }
    return line;
}

int
ew_state_parse(char *text, size_t len, char **v, size_t *n, int64_t *written, const char **why)
{
    char *p = text, *line;
    size_t cnt = 0;
    long long t = 0, end = -1;
    *n = 0;
    if (memchr(text, '\0', len)) {
        *why = "a NUL byte";
        return -EINVAL;
    }
    if (!(line = next_line(&p)) || strcmp(line, MAGIC) != 0) {
        *why = "not a prismlb endpoint state file (first line)";
        return -EINVAL;
    }
    char extra;
    if (!(line = next_line(&p)) || sscanf(line, "written %lld%c", &t, &extra) != 1 || t < 0) {
        *why = "no \"written\" line";
        return -EINVAL;
    }
    while ((line = next_line(&p))) {
        if (strncmp(line, "end ", 4) == 0) {
            if (sscanf(line, "end %lld%c", &end, &extra) != 1 || (p && *p)) {
                *why = "a bad \"end\" line, or lines after it";
                return -EINVAL;
            }
            break;
        }
        if (!ew_state_valid_endpoint(line)) {
            *why = "a line that is no host:port";
            return -EINVAL;
        }
        if (cnt == EW_STATE_MAX_ENTRIES) {
            *why = "too many endpoints";
            return -EINVAL;
        }
        v[cnt++] = line;
    }
    if (end < 0 || (size_t)end != cnt) {
        *why = end < 0 ? "truncated (no \"end\" line)" : "truncated (\"end\" counts otherwise)";
        return -EINVAL;
    }
    *n = cnt;
    *written = (int64_t)t;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reading at start                                                         */

/* Read path, a regular file of at most max bytes, into *out (new, h->mem->free,
 * NUL-terminated). 0 or -errno; why: a phrase. Opened O_NONBLOCK, so a
 * FIFO never blocks the open, and refused before any read. */
static int
read_small(const struct plb_host *h, const char *path, size_t max, char **out, size_t *len,
           const char **why)
{
    struct stat st;
    ssize_t r = 0;
    size_t got = 0;
    char *buf = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    int rc;
    *out = NULL;
    if (fd < 0) {
        rc = -errno;
        *why = strerror(errno);
        return rc;
    }
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        *why = strerror(errno);
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        *why = "not a regular file";
        goto out;
    }
    if ((size_t)st.st_size > max) {
        rc = -EFBIG;
        *why = "over the size limit";
        goto out;
    }
    if (!(buf = h->mem->alloc(max + 1))) {
        rc = -ENOMEM;
        *why = "out of memory";
        goto out;
    }
    while (got <= max &&
           ((r = read(fd, buf + got, max + 1 - got)) > 0 || (r < 0 && errno == EINTR)))
        got += r > 0 ? (size_t)r : 0;
    if (r < 0) {
        rc = -errno;
        *why = strerror(errno);
        goto out;
    }
    if (got > max) {
        rc = -EFBIG;
        *why = "over the size limit";
        goto out;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    buf = NULL;
    rc = 0;
out:
    h->mem->free(buf);
    close(fd);
    return rc;
}

void
ew_state_load(struct ew *ew)
{
    const struct plb_host *h = ew->host;
    const char *path = ew->cfg->state_file, *why = NULL;
    char *text = NULL, **v = NULL;
    size_t len = 0, n = 0;
    int64_t written = 0;

    if (!path || !*path)
        return;
    if (read_small(h, path, EW_STATE_MAX_BYTES, &text, &len, &why) < 0)
        goto ignored;
    if (!(v = h->mem->alloc(EW_STATE_MAX_ENTRIES * sizeof(*v)))) {
        why = "out of memory";
        goto ignored;
    }
    if (ew_state_parse(text, len, v, &n, &written, &why) < 0) {
    ignored:
        PLB_WARN(h, ew->ctx, PLB_KV("state_file", path, "error", why),
                 "state file ignored: the static endpoints are used");
        goto out;
    }
    int64_t age_ms = h->loop->wall_ms(ew->ctx) - written * 1000;
    if (age_ms > ew->cfg->state_file_max_age_ms) {
        PLB_WARN(h, ew->ctx, PLB_KV("state_file", path),
                 "state file ignored: written %lld s ago, older than state_file_max_age",
                 (long long)(age_ms / 1000));
        goto out;
    }
    if (n == 0)
        goto out;
    int rc = h->links->endpoints_publish(ew->ctx, EW_PROVIDER_STATE, (const char *const *)v, n);
    if (rc < 0) {
        PLB_WARN(h, ew->ctx, PLB_KV("state_file", path), "state file not used: error %d", rc);
        goto out;
    }
    ew->state_published = 1;
    PLB_INFO(h, ew->ctx, PLB_KV("state_file", path),
             "%zu endpoint(s) from the state file (written %lld s ago) beside the static ones "
             "until discovery answers",
             n, (long long)(age_ms > 0 ? age_ms / 1000 : 0));
out:
    h->mem->free(v);
    h->mem->free(text);
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                  */

/* The file's text for the comma-joined list (new, h->mem->free), or NULL. */
static char *
render(const struct plb_host *h, const char *joined, int64_t wall_s, size_t *len)
{
    size_t n = 1, cap = strlen(joined) + 96;
    for (const char *q = joined; *q; q++)
        n += *q == ',';
    char *s = h->mem->alloc(cap);
    if (!s)
        return NULL;
    int k = snprintf(s, cap, MAGIC "\nwritten %lld\n", (long long)wall_s);
    size_t o = (size_t)k;
    for (const char *q = joined; *q; q++)
        s[o++] = *q == ',' ? '\n' : *q;
    k = snprintf(s + o, cap - o, "\nend %zu\n", n);
    *len = o + (size_t)k;
    return s;
}

/* Write ew->pending to the file now. */
static void
write_now(struct ew *ew)
{
    const struct plb_host *h = ew->host;
    const char *path = ew->cfg->state_file, *why = NULL;
    char tmp[4200];
    size_t len = 0, off = 0;
    int fd = -1;

    ew->state_written_ms = h->loop->now_ms(ew->ctx);
    char *text = render(h, ew->pending, h->loop->wall_ms(ew->ctx) / 1000, &len);
    if (!text) {
        why = "out of memory";
        goto fail;
    }
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        why = "path too long";
        goto fail;
    }
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        why = "the state file is not a regular file";
        goto fail;
    }
    if (unlink(tmp) < 0 && errno != ENOENT) {
        why = strerror(errno);
        goto fail;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
        why = strerror(errno);
        goto fail;
    }
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            why = w < 0 ? strerror(errno) : "short write";
            goto fail;
        }
        off += (size_t)w;
    }
    if (close(fd) < 0) {
        fd = -1;
        why = strerror(errno);
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) < 0) {
        why = strerror(errno);
        goto fail;
    }
    h->mem->free(text);
    h->mem->free(ew->written);
    ew->written = ew->pending;
    ew->pending = NULL;
    PLB_DEBUG(h, ew->ctx, PLB_KV("state_file", path), "state file written");
    return;
fail:
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    h->mem->free(text);
    /* The list stays pending: the next change, or the stop, tries again. */
    PLB_WARN(h, ew->ctx, PLB_KV("state_file", path, "error", why ? why : "?"),
             "cannot write the state file");
}

static void
on_write_timer(plb_timer *t, void *arg)
{
    struct ew *ew = arg;
    (void)t;
    if (ew->pending)
        write_now(ew);
}

void
ew_state_discovered(struct ew *ew, const char *joined, size_t n)
{
    const struct plb_host *h = ew->host;
    if (ew->state_published) {
        ew->state_published = 0;
        int rc = h->links->endpoints_publish(ew->ctx, EW_PROVIDER_STATE, NULL, 0);
        if (rc < 0)
            PLB_WARN(h, ew->ctx, NULL, "cannot drop the state file's endpoints: error %d", rc);
        else
            PLB_INFO(h, ew->ctx, NULL,
                     "discovery answered: the state file's endpoints are no longer used");
    }
    const char *path = ew->cfg->state_file;
    if (!path || !*path || !joined || n == 0)
        return; /* an empty list is not kept: the last one that was stays */
    if ((ew->pending && strcmp(ew->pending, joined) == 0) ||
        (!ew->pending && ew->written && strcmp(ew->written, joined) == 0))
        return;
    size_t l = strlen(joined) + 1;
    char *copy = h->mem->alloc(l);
    if (!copy) {
        PLB_WARN(h, ew->ctx, PLB_KV("state_file", path), "out of memory: state file not updated");
        return;
    }
    memcpy(copy, joined, l);
    h->mem->free(ew->pending);
    ew->pending = copy;
    if (!ew->state_timer && !(ew->state_timer = h->loop->timer_new(ew->ctx, on_write_timer, ew))) {
        PLB_WARN(h, ew->ctx, PLB_KV("state_file", path), "out of memory: state file not updated");
        return;
    }
    if (h->loop->timer_pending(ew->state_timer))
        return; /* the timer writes the latest list */
    int64_t since = h->loop->now_ms(ew->ctx) - ew->state_written_ms;
    if (!ew->written || since >= WRITE_EVERY_MS) {
        write_now(ew);
        return;
    }
    if (h->loop->timer_arm(ew->state_timer, WRITE_EVERY_MS - since, 0, 0) < 0)
        PLB_WARN(h, ew->ctx, PLB_KV("state_file", path), "cannot arm the state file's timer");
}

void
ew_state_stop(struct ew *ew)
{
    const struct plb_host *h = ew->host;
    if (ew->state_timer)
        h->loop->timer_cancel(ew->state_timer);
    if (ew->pending)
        write_now(ew);
}

void
ew_state_free(struct ew *ew)
{
    const struct plb_host *h = ew->host;
    h->loop->timer_free(ew->state_timer);
    ew->state_timer = NULL;
    h->mem->free(ew->pending);
    h->mem->free(ew->written);
    ew->pending = ew->written = NULL;
}
