/* The sandbox layer's whole writes and small files (sandbox.h): what the
 * sandbox (sandbox.c), its memory cgroup (sandbox_cgroup.c) and the layers
 * above it write and read of pipes, /proc and cgroup files. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox.h"

int sb_write_all(int fd, const void *data, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, (const char *)data + done, n - done);
        if (w <= 0)
            return -1;
        done += (size_t)w;
    }
    return 0;
}

int sb_write_text(int dir, const char *file, const char *text)
{
    int fd = openat(dir, file, O_WRONLY | O_CLOEXEC);
    int rc = fd < 0 ? -1 : sb_write_all(fd, text, strlen(text));
    if (fd >= 0)
        close(fd);
    return rc;
}

ssize_t sb_read_text(int dir, const char *file, char *text, size_t size)
{
    int fd = openat(dir, file, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, text, size - 1);
    if (fd >= 0)
        close(fd);
    text[n > 0 ? n : 0] = 0;
    return n;
}

int sb_read_pids(int dir, const char *file, pid_t *pids, int max)
{
    char text[8192];
    int n = 0;
    sb_read_text(dir, file, text, sizeof text);
    for (char *at = text, *end; n < max; at = end) {
        long pid = strtol(at, &end, 10);
        if (end == at)
            break;
        pids[n++] = (pid_t)pid;
    }
    return n;
}

int64_t sb_read_number(int dir, const char *file, const char *key)
{
    char text[8192];
    size_t len = key ? strlen(key) : 0;
    if (sb_read_text(dir, file, text, sizeof text) <= 0)
        return 0;
    for (char *line = text; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (!key || (strncmp(line, key, len) == 0 && (line[len] == ' ' || line[len] == '\t')))
            return strtoll(line + len, NULL, 10);
    return 0;
}
