/* gpsimd-zygote: the one executor of a library run's vectors, started by
 * the worker (gpsimd_emu.zygote_client) as
 *
 *     gpsimd-zygote SOCK PARENT COPIES N
 *
 * SOCK: its end of a SOCK_SEQPACKET socket pair; PARENT: the pid it dies
 * with; COPIES: copies of each core object (one per run of a vector, each
 * with globals no launch touched; a run that is a second call launches the
 * copy of the run it follows); N: core objects.
 *
 * This file is its loop: the sandbox, the objects and the ready message,
 * then a vector per message and its reply, until end of file. The
 * messages are gpsimd_host/zygote.h's; each step: ARCHITECTURE.md
 * "Processes and containment".
 *
 * Built (gpsimd_build.zygote_recipe) with -DGZ_SOURCE_DIGEST, which the
 * worker compares with its own sources' before it starts it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpsimd_host/abi.h"
#include "leader.h"
#include "sandbox.h"
#include "zygote_parts.h"

#ifndef GZ_SOURCE_DIGEST
#define GZ_SOURCE_DIGEST none
#endif
#define GZ_TEXT(x) #x
#define GZ_STRING(x) GZ_TEXT(x)
/* (read from the file by the worker: the marker and 64 hex digits) */
__attribute__((used)) const char gz_digest[] = "GPSIMD-ZYGOTE-DIGEST:" GZ_STRING(GZ_SOURCE_DIGEST);

/* ---- messages ---------------------------------------------------------------- */

static int sock, gone;
static int ncopies, ncores;
static int devnull = -1;

static void send_fds(const char *msg, size_t n, const int *fds, int nfds)
{
    char control[CMSG_SPACE(4 * sizeof(int))] = {0};
    struct iovec io = {(void *)msg, n};
    struct msghdr h = {.msg_iov = &io, .msg_iovlen = 1};
    if (nfds > 0) {
        h.msg_control = control;
        h.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    if (sendmsg(sock, &h, MSG_NOSIGNAL) < 0)
        gone = 1;                        /* the worker is gone: as at end of file */
}

static struct gz_reply reply;

/* The reply that says why the vector did not run (printf's format) */
__attribute__((format(printf, 1, 2))) static void reply_error(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    reply = (struct gz_reply){.magic = (int64_t)GPSIMD_ZY_MAGIC};
    vsnprintf(reply.error, sizeof reply.error, format, ap);
    va_end(ap);
    send_fds((const char *)&reply, sizeof reply, NULL, 0);
}

/* End the program before its ready message (exit status code), what it
 * said (the load output, why: every line of it printed) sent first to the
 * worker, which never reads it otherwise: GPSIMD_ZY_NOT_READY with its
 * memfd. */
__attribute__((noreturn)) static void fail_before_ready(int out, int code)
{
    fflush(NULL);
    if (out >= 0)
        send_fds(GPSIMD_ZY_NOT_READY, 1, &out, 1);
    exit(code);
}

/* The ready message's memfd: the struct, then every core's op names (-1:
 * no memory for it) */
static int ready_fd(const struct gz_ready *ready)
{
    int fd = memfd_create("gpsimd-ready", MFD_CLOEXEC);
    int ok = fd >= 0 && sb_write_all(fd, ready, sizeof *ready) == 0;
    for (int k = 0; k < ncores; k++)
        for (int i = 0; ok && i < gz_objects[0][k].nops; i++)
            ok = sb_write_all(fd, gz_objects[0][k].ops[i].name,
                              strlen(gz_objects[0][k].ops[i].name) + 1) == 0;
    int err = errno;
    if (!ok && fd >= 0)
        close(fd);
    errno = err;                         /* (why, for the caller) */
    return ok ? fd : -1;
}

/* ---- processes ----------------------------------------------------------------- */

/* Kill and reap whatever the vector left: in a namespace, every other
 * process of it; else (a subreaper) the children, and what comes back. */
static void sweep(void)
{
    int st;
    if (strcmp(SB.mode, "pgroup") != 0) {
        kill(-1, SIGKILL);
        while (waitpid(-1, &st, 0) > 0 || errno == EINTR)
            ;
        return;
    }
    int64_t deadline = gl_now_ns() + 5000000000;
    char children[64];                   /* (one thread: its own list) */
    snprintf(children, sizeof children, "/proc/self/task/%d/children", (int)getpid());
    for (;;) {
        pid_t pids[512];
        int n = sb_read_pids(AT_FDCWD, children, pids, 512);
        for (int i = 0; i < n; i++) {
            killpg(pids[i], SIGKILL);
            kill(pids[i], SIGKILL);
        }
        int reaped = 0;
        while (waitpid(-1, &st, WNOHANG) > 0)
            reaped++;
        if ((n == 0 && reaped == 0) || gl_now_ns() > deadline)
            return;
        if (n && !reaped)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

/* ---- one vector ------------------------------------------------------------------ */

static int64_t data_base, baseline;

static void run(struct gz_vector *m, int image_fd)
{
    static struct gl_request r;
    r = (struct gl_request){.v = *m, .image_fd = image_fd, .devnull = devnull};
    r.v.op[GPSIMD_ZY_OP_NAME - 1] = 0;
    const struct gz_vector *v = &r.v;
    if (v->nruns < 1 || v->nruns > GPSIMD_ZY_MAX_RUNS || v->ncores < 1 || v->ncores > ncores) {
        reply_error("a request of more runs or cores than the zygote holds");
        return;
    }
    for (int i = 0; i < v->nruns; i++) {
        int64_t p = v->runs[i].index, c = v->runs[i].copy;
        if (p < 0 || p >= GPSIMD_ZY_MAX_RUNS || c < 0 || c >= ncopies) {
            reply_error("a request of a run the zygote holds no copy of the objects for");
            return;
        }
        for (int k = 0; k < v->ncores; k++) {
            r.launchers[p][k] = gz_launcher_of(&gz_objects[c][k], v->op);
            r.binders[p][k] = gz_objects[c][k].binder;
            if (r.launchers[p][k] == NULL) {
                const char *e = gz_objects[c][k].error;
                reply_error("copy %lld of core object %d has no op %s (it did not load again%s%s)",
                            (long long)c, k, v->op, e[0] ? ": " : "", e);
                return;
            }
        }
    }
    r.image = mmap(NULL, (size_t)v->size, PROT_READ | PROT_WRITE, MAP_SHARED, image_fd, 0);
    if (r.image == MAP_FAILED) {
        reply_error("cannot map the device image of op %s (%lld bytes): %s", v->op,
                    (long long)v->size, strerror(errno));
        return;
    }
    int64_t extra = v->memory - v->image_total, oom0 = 0;
    int limited = 0;
    if (SB.cg_version) {
        int64_t cap = v->memory - v->prefilled;
        cap = (cap < GPSIMD_ZY_MIN_DATA ? GPSIMD_ZY_MIN_DATA : cap) + baseline;
        /* (below what is charged now, a limit would fail, or on cgroup v2
           reclaim and OOM-kill the zygote itself) */
        if ((SB.cg_inside && sb_cg_usage() >= cap) || sb_cg_set_limit(cap) != 0) {
            sb_cg_remove();
        } else {
            oom0 = sb_cg_oom_kills();
            limited = 1;
        }
    }
    if (!limited && v->parallel > 1)     /* RLIMIT_DATA only: shared out among the jobs */
        extra /= v->parallel;
    r.data_limit = data_base + (extra < GPSIMD_ZY_MIN_DATA ? GPSIMD_ZY_MIN_DATA : extra);
    r.oom_first = limited && SB.cg_inside;
    int nstreams = 2 * (int)v->ncores;
    gz_streams_begin(r.out, 2 * ncores);
    int64_t deadline = gl_now_ns() + v->timeout_ns * v->nruns
        + GPSIMD_ZY_KILL_GRACE_MS * (int64_t)1000000;
    long pid = gl_fork_leader(&r);
    int status = 0, timed_out = 0;
    if (pid >= 0) {
        timed_out = gz_wait_vector((pid_t)pid, deadline, &status, nstreams) != 0;
        killpg((pid_t)pid, SIGKILL);     /* whatever stayed in its group */
        if (timed_out) {
            kill((pid_t)pid, SIGKILL);
            while (waitpid((pid_t)pid, &status, 0) < 0 && errno == EINTR)
                ;
        }
    }
    sweep();
    gz_drain(nstreams);                  /* (every writer is gone: what is left) */
    sb_fresh_workdir();
    munmap(r.image, (size_t)v->size);
    if (pid < 0) {
        reply_error("fork of the vector's leader: %s", strerror((int)-pid));
        return;
    }
    reply = (struct gz_reply){.magic = (int64_t)GPSIMD_ZY_MAGIC, .wait_status = status,
                              .timed_out = timed_out, .pid = pid};
    reply.oom_kills = limited && SB.cg_version ? sb_cg_oom_kills() - oom0 : 0;
    int fd, err = gz_kept(&reply, 2 * ncores, &fd);
    if (err) {
        reply_error("cannot keep what the cores wrote in a memfd: %s", strerror(err));
        return;
    }
    send_fds((const char *)&reply, sizeof reply, &fd, fd >= 0);
    if (fd >= 0)
        close(fd);
}

/* ---- the program --------------------------------------------------------------------- */

/* One message into buf (EINTR retried): its length (<= 0: end of file or
 * an error); its descriptors, counted in *nfds, the first max of them in
 * fds and the others closed; when the message or its descriptors did not
 * fit, every one closed and *nfds -1. */
static ssize_t receive(void *buf, size_t size, int *fds, int max, int *nfds)
{
    char control[CMSG_SPACE(16 * sizeof(int))];
    struct iovec io = {buf, size};
    struct msghdr h = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = control,
                       .msg_controllen = sizeof control};
    ssize_t n;
    while ((n = recvmsg(sock, &h, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    *nfds = 0;
    for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&h) : NULL; c; c = CMSG_NXTHDR(&h, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++, (*nfds)++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                if (*nfds < max)
                    fds[*nfds] = fd;
                else
                    close(fd);
            }
    if (h.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        for (int i = 0; i < *nfds && i < max; i++)
            close(fds[i]);
        *nfds = -1;
    }
    return n;
}

/* The objects' message: ncores names (in buf, each ending in a NUL) and
 * as many descriptors; 0 when it is whole, else -1 (said on stderr: the
 * load output). */
static int receive_objects(char *buf, size_t size, int *fds, const char **names)
{
    int nfds, nnames = 0;                /* (counted past ncores: refused below) */
    ssize_t n = receive(buf, size, fds, ncores, &nfds);
    for (char *at = buf, *end; n > 0 && at < buf + n; at = end + 1, nnames++) {
        if ((end = memchr(at, 0, (size_t)(buf + n - at))) == NULL)
            break;
        if (nnames < ncores)
            names[nnames] = at;
    }
    if (n <= 0 || nfds != ncores || nnames != ncores || buf[n - 1] != 0) {
        fprintf(stderr, "gpsimd-zygote: no whole message of %d core objects\n", ncores);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s SOCK PARENT COPIES N\n", argv[0]);
        return 2;
    }
    sock = atoi(argv[1]);
    int parent = atoi(argv[2]);
    ncopies = atoi(argv[3]);
    ncores = atoi(argv[4]);
    if (ncopies < 1 || ncopies > GPSIMD_ZY_MAX_RUNS || ncores < 1 || ncores > GPSIMD_ZY_MAX_CORES) {
        fprintf(stderr, "gpsimd-zygote: %d copies of %d objects (at most %d of %d)\n",
                ncopies, ncores, GPSIMD_ZY_MAX_RUNS, GPSIMD_ZY_MAX_CORES);
        return 2;
    }
    sb_die_with_parent(parent);
    gl_set_name("gpsimd-zygote");
    setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});   /* a crashing kernel leaves no core file */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    /* from here what this process writes (the objects' static
       initialisers, its own messages) goes to a memfd, the first
       GPSIMD_ZY_OUTPUT_KEEP bytes of it, which the worker prints */
    int out = memfd_create("gpsimd-load-output", MFD_CLOEXEC);
    if (out >= 0) {
        fflush(NULL);
        dup2(out, 1);
        dup2(out, 2);
    }
    /* stdin, and the cores' output after a vector's first run: /dev/null,
       opened now (the sandbox has no devices), the latter above every fd a
       leader moves its pipes to */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0
        || (devnull = fcntl(null, F_DUPFD_CLOEXEC, 4 + 2 * GPSIMD_ZY_MAX_CORES)) < 0) {
        fprintf(stderr, "gpsimd-zygote: cannot open /dev/null: %s\n", strerror(errno));
        fail_before_ready(out, 1);
    }
    if (null != 0)
        close(null);
    if (sb_enter(parent, sock) != 0) {
        fprintf(stderr, "gpsimd-zygote: cannot start the sandbox's relay: %s\n", strerror(errno));
        fail_before_ready(out, 1);
    }
    static char names[GPSIMD_ZY_MAX_CORES * 4096];
    int payload[GPSIMD_ZY_MAX_CORES];
    const char *name[GPSIMD_ZY_MAX_CORES];
    if (receive_objects(names, sizeof names, payload, name) != 0)
        fail_before_ready(out, 2);
    static struct gz_ready ready;
    ready.magic = (int64_t)GPSIMD_ZY_MAGIC;
    ready.cgroup = SB.cg_version != 0;
    snprintf(ready.mode, sizeof ready.mode, "%s", SB.mode);
    snprintf(ready.missing, sizeof ready.missing, "%s", SB.missing);
    for (int k = 0; k < ncores; k++)
        gz_load(0, k, payload[k], name[k], &ready.cores[k]);
    fflush(NULL);
    int fds[2] = {ready_fd(&ready), out};
    if (fds[0] < 0) {
        fprintf(stderr, "gpsimd-zygote: cannot make the ready message: %s\n", strerror(errno));
        fail_before_ready(out, 2);
    }
    send_fds(GPSIMD_ZY_READY, 1, fds, out >= 0 ? 2 : 1);
    close(fds[0]);
    if (out >= 0)                        /* (the worker's now; stdout and stderr below too) */
        close(out);
    /* the other copies load while the worker makes its first vector ready;
       their static initialisers write to a memfd no one reads, or to
       /dev/null (copy 0's output was sent: the worker reads it once) */
    int rest = memfd_create("gpsimd-load-rest", MFD_CLOEXEC);
    fflush(NULL);
    dup2(rest >= 0 ? rest : devnull, 1);
    dup2(rest >= 0 ? rest : devnull, 2);
    if (rest >= 0)
        close(rest);
    for (int c = 1; c < ncopies; c++)
        for (int k = 0; k < ncores; k++)
            gz_load(c, k, payload[k], name[k], NULL);       /* (no entry: c > 0) */
    for (int k = 0; k < ncores; k++)
        close(payload[k]);
    fflush(NULL);
    sweep();                             /* (what a static initialiser started: none runs on) */
    /* what the objects' static initialisers may have changed: every signal
       at its default and none blocked (waiting for a leader needs SIGCHLD
       and SIGALRM; a handler of theirs, run by a timer of theirs, would
       run beside the vectors) */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; s++)
        signal(s, s == SIGPIPE || s == SIGXFSZ ? SIG_IGN : SIG_DFL);
    gz_make_pipes(ncores);
    data_base = sb_read_number(AT_FDCWD, "/proc/self/status", "VmData:") * 1024   /* (what */
        + GPSIMD_ZY_DATA_SLACK;          /* RLIMIT_DATA counts, in KiB) */
    if (SB.cg_inside && SB.cg_version)   /* (the objects are loaded: what they hold) */
        baseline = sb_cg_usage();
    while (!gone) {
        struct gz_vector m;
        int image_fd, nfds;
        ssize_t n = receive(&m, sizeof m, &image_fd, 1, &nfds);
        if (n <= 0)
            break;                       /* end of file: the worker is done */
        if (n != (ssize_t)sizeof m || m.magic != (int64_t)GPSIMD_ZY_MAGIC || nfds < 1)
            reply_error("a request the zygote cannot read");
        else
            run(&m, image_fd);           /* (the vector's leader has its own copy) */
        if (nfds > 0)
            close(image_fd);
    }
    sweep();
    return 0;
}
