/*
 * rfile: read a small regular file without ever blocking.
 *
 * Files named by the configuration (the config file and its @includes,
 * kubeconfigs, service-account files) are opened O_NONBLOCK and must be
 * regular files: a FIFO, a device or a directory there is an error with a
 * clear reason, never a hang or a read that cannot end.
 */
#ifndef PRISMLB_RFILE_H
#define PRISMLB_RFILE_H

#include <stddef.h>

/* Read the regular file path (at most max bytes) into *out (new,
 * NUL-terminated, core_free; length *len). 0 or -errno: -ENOENT, -EACCES,
 * ... from open; -EINVAL not a regular file; -EFBIG over max; -EIO (or the
 * read's errno) when reading fails, as /proc/self/mem does; -EAGAIN when
 * it grew while read; -ENOMEM. On error, when reason is not NULL, a short
 * phrase ("not a regular file (a FIFO)", "Permission denied", ...) is
 * written to reason (len bytes). */
int core_file_read(const char *path, size_t max, char **out, size_t *len, char *reason,
                   size_t reason_len);

#endif
