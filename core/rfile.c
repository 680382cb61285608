/*
 * rfile: see rfile.h.
 */
#include "rfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"

static const char *
kind_of(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    return "not a file";
}

int
core_file_read(const char *path, size_t max, char **out, size_t *len, char *reason,
               size_t reason_len)
{
    struct stat st;
    char *buf = NULL;
    size_t n = 0, cap;
    int rc, fd;

    *out = NULL;
    *len = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) < 0) {
        rc = -errno;
        if (reason)
            snprintf(reason, reason_len, "%s", strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        if (reason)
            snprintf(reason, reason_len, "not a regular file (%s)", kind_of(st.st_mode));
        goto fail;
    }
    if ((size_t)st.st_size > max)
        goto too_big;
    /* st_size is a hint (procfs says 0): read to the end, within max. */
    cap = (size_t)st.st_size + 1 < 4096 ? 4096 : (size_t)st.st_size + 1;
    if (cap > max + 1)
        cap = max + 1;
    buf = core_malloc(cap);
    if (!buf) {
        rc = -ENOMEM;
        goto fail_msg;
    }
    for (;;) {
        ssize_t r;
        if (n == cap - 1) {
            char *p;
            size_t grown = cap * 2 > max + 1 ? max + 1 : cap * 2;
            if (grown == cap) {
                char extra;
                r = read(fd, &extra, 1);
                if (r == 0)
                    break;
                goto too_big;
            }
            p = core_realloc(buf, grown);
            if (!p) {
                rc = -ENOMEM;
                goto fail_msg;
            }
            buf = p;
            cap = grown;
        }
        r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = errno == EAGAIN ? -EIO : -errno;
            goto fail_msg;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    close(fd);
    *out = buf;
    *len = n;
    return 0;
too_big:
    rc = -EFBIG;
    if (reason)
        snprintf(reason, reason_len, "larger than %zu bytes", max);
    goto fail;
fail_msg:
    if (reason)
        snprintf(reason, reason_len, "%s", strerror(-rc));
fail:
    core_free(buf);
    if (fd >= 0)
        close(fd);
    return rc;
}
