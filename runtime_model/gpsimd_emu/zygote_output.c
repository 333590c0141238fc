/* What a vector's cores write to stdout and stderr (zygote_parts.h): a
 * pipe per core and stream, made once and kept for every vector, drained
 * while the leader runs and after it, the first and the last
 * GPSIMD_ZY_OUTPUT_KEEP bytes of each kept and the rest counted (a kernel
 * that writes gigabytes is not slowed, and nothing grows with it). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox.h"
#include "zygote_parts.h"

#define KEEP GPSIMD_ZY_OUTPUT_KEEP

struct stream {                          /* a core's stdout or stderr */
    int fd, out;                         /* the pipe's read end (non-blocking), write end */
    int size;                            /* the pipe's size as made (bytes) */
    int64_t total;
    char *head, *tail;                   /* the first bytes, a ring of the last */
};
static struct stream streams[2 * GPSIMD_ZY_MAX_CORES];
/* (apart from the counts: pages a vector that writes nothing never touches,
   so that they are not copied at its fork) */
static char kept_bytes[2 * GPSIMD_ZY_MAX_CORES][2][KEEP];

static void keep(struct stream *s, const char *data, size_t n)
{
    size_t h = s->total < KEEP ? KEEP - (size_t)s->total : 0;
    if (h > n)
        h = n;
    memcpy(s->head + s->total, data, h);
    for (size_t i = h; i < n; i++)       /* (the ring's position is the total) */
        s->tail[(size_t)(s->total + (int64_t)i) % KEEP] = data[i];
    s->total += (int64_t)n;
}

/* What the pipe holds now. (The zygote keeps the write ends for the
 * next vectors: the pipes are made once, and never end.) */
static void drain(struct stream *s)
{
    static char buf[1 << 16];
    for (ssize_t n; s->fd >= 0;)
        if ((n = read(s->fd, buf, sizeof buf)) > 0)
            keep(s, buf, (size_t)n);
        else if (n == 0 || errno != EINTR)
            return;
}

/* A pipe per core and stream, made once (above the fds the leader moves
 * them to: 3 .. 3 + 2 * cores). */
void gz_make_pipes(int ncores)
{
    for (int i = 0; i < 2 * ncores; i++) {
        int ends[2];
        streams[i].fd = streams[i].out = -1;
        streams[i].head = kept_bytes[i][0];
        streams[i].tail = kept_bytes[i][1];
        if (pipe2(ends, O_CLOEXEC) != 0)
            continue;
        streams[i].fd = fcntl(ends[0], F_DUPFD_CLOEXEC, 3 + 2 * GPSIMD_ZY_MAX_CORES);
        streams[i].out = fcntl(ends[1], F_DUPFD_CLOEXEC, 3 + 2 * GPSIMD_ZY_MAX_CORES);
        close(ends[0]);
        close(ends[1]);
        fcntl(streams[i].fd, F_SETFL, O_NONBLOCK);
        streams[i].size = fcntl(streams[i].out, F_GETPIPE_SZ);
    }
}

/* Wait for the leader, draining the streams: 0 with its status, or -1 at
 * the deadline (left running). */
int gz_wait_vector(pid_t pid, int64_t deadline, int *status, int nstreams)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int rc = -1;
    for (;;) {
        pid_t got = waitpid(pid, status, WNOHANG);
        if (got == pid) {
            rc = 0;
            break;
        }
        if (got < 0 && errno != EINTR)
            break;
        int64_t left = deadline - gl_now_ns();
        if (left <= 0)
            break;
        struct pollfd p[1 + 2 * GPSIMD_ZY_MAX_CORES] = {{pidfd, POLLIN, 0}};   /* (-1: ignored) */
        for (int i = 0; i < nstreams; i++)
            p[1 + i] = (struct pollfd){streams[i].fd, POLLIN, 0};
        if (poll(p, (nfds_t)(1 + nstreams), pidfd >= 0 ? (int)(left / 1000000) + 1 : 1) > 0)
            for (int i = 0; i < nstreams; i++)
                if (p[1 + i].revents)
                    drain(&streams[i]);
    }
    if (pidfd >= 0)
        close(pidfd);
    return rc;
}

/* Before a vector: the first n streams' counts reset, their write ends in out. */
void gz_streams_begin(int *out, int n)
{
    for (int i = 0; i < n; i++) {
        streams[i].total = 0;
        out[i] = streams[i].out;
        /* (a kernel's fcntl on its stdout changed the write end the zygote
           keeps, O_NONBLOCK, the pipe's size: each vector gets it as made;
           read first, as a resize allocates) */
        if (out[i] >= 0 && fcntl(out[i], F_GETFL) & ~O_ACCMODE)
            fcntl(out[i], F_SETFL, 0);
        if (out[i] >= 0 && fcntl(out[i], F_GETPIPE_SZ) != streams[i].size)
            fcntl(out[i], F_SETPIPE_SZ, streams[i].size);
    }
}

/* After a vector, every writer gone: what the first n pipes still hold. */
void gz_drain(int n)
{
    for (int i = 0; i < n; i++)
        drain(&streams[i]);
}

/* The reply's output entries (per stream written to: its core, fd, total
 * and the bytes kept of it) for the first n streams, and in *fd a memfd of
 * the kept bytes (per entry, its head then its tail; -1 when nothing was
 * written): 0, or the errno of a memfd that could not be made or written
 * (no entry, no memfd then: an entry never comes without its bytes). */
int gz_kept(struct gz_reply *reply, int n, int *fd)
{
    *fd = -1;
    errno = 0;
    for (int i = 0; i < n; i++) {
        struct stream *s = &streams[i];
        if (s->total == 0)
            continue;
        size_t head = s->total < KEEP ? (size_t)s->total : KEEP;
        size_t tail = s->total > 2 * KEEP ? KEEP : (size_t)(s->total - (int64_t)head);
        size_t at = (size_t)(s->total - (int64_t)tail) % KEEP;    /* (the ring: two slices) */
        size_t first = tail < KEEP - at ? tail : KEEP - at;
        if ((*fd < 0 && (*fd = memfd_create("gpsimd-output", MFD_CLOEXEC)) < 0)
                || sb_write_all(*fd, s->head, head) || sb_write_all(*fd, s->tail + at, first)
                || sb_write_all(*fd, s->tail, tail - first)) {
            int err = errno ? errno : EIO;
            if (*fd >= 0)
                close(*fd);
            *fd = -1;
            reply->noutput = 0;
            return err;
        }
        reply->output[reply->noutput++] = (struct gz_output){i / 2, 1 + i % 2, s->total,
                                                             (int64_t)head, (int64_t)tail};
    }
    return 0;
}
