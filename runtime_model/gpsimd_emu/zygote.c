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
 * It makes the sandbox (sandbox.c) while the worker reads the objects,
 * then takes them in one message: their N names, each ending in a NUL,
 * with a descriptor of each payload (a memfd, or the plain .so opened)
 * as SCM_RIGHTS. It loads the first copy of every object (their static
 * initialisers run inside it, with what they write kept up to
 * GPSIMD_ZY_OUTPUT_KEEP bytes), checks it as the device loader does, and
 * sends the ready message (struct gz_ready and the op names); then it
 * loads the other copies, while the worker makes its first vector ready.
 *
 * Then per message (a struct gz_vector with the image memfd): the memory
 * limit (cgroup and RLIMIT_DATA), the leader (leader.c), the wait (every
 * run's time limit plus GPSIMD_ZY_KILL_GRACE_MS) while it drains what
 * each core writes to stdout and stderr, the sweep of whatever the vector
 * left, and the reply (struct gz_reply, with a memfd of the kept bytes
 * when any core wrote). Every message's layout is gpsimd_host/zygote.h's.
 * At end of file: the sweep, exit 0 (the relay removes the cgroup).
 *
 * Built by the host profile (gpsimd_build.zygote_recipe) with
 * -DGZ_SOURCE_DIGEST, which the worker reads from the file and compares
 * with the digest of its own sources before it starts it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpsimd_host/abi.h"
#include "leader.h"
#include "sandbox.h"

#ifndef GZ_SOURCE_DIGEST
#define GZ_SOURCE_DIGEST none
#endif
#define GZ_TEXT(x) #x
#define GZ_STRING(x) GZ_TEXT(x)
/* (read from the file by the worker: the marker and 64 hex digits) */
__attribute__((used)) const char gz_digest[] = "GPSIMD-ZYGOTE-DIGEST:" GZ_STRING(GZ_SOURCE_DIGEST);

#define KEEP GPSIMD_ZY_OUTPUT_KEEP

/* ---- messages ---------------------------------------------------------------- */

static int write_all(int fd, const void *data, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, (const char *)data + done, n - done);
        if (w <= 0)
            return -1;
        done += (size_t)w;
    }
    return 0;
}

static int memfd_of(const char *name, const void *data, size_t n)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd >= 0 && write_all(fd, data, n) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int sock, gone;
static int devnull = -1;

static void send_fds(const char *msg, size_t n, const int *fds, int nfds)
{
    char control[CMSG_SPACE(4 * sizeof(int))] = {0};
    struct iovec io = {(void *)msg, n};
    struct msghdr h = {0};
    h.msg_iov = &io;
    h.msg_iovlen = 1;
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

static void reply_error(const char *what)
{
    memset(&reply, 0, sizeof reply);
    reply.magic = (int64_t)GPSIMD_ZY_MAGIC;
    snprintf(reply.error, sizeof reply.error, "%s", what[0] ? what : "?");
    send_fds((const char *)&reply, sizeof reply, NULL, 0);
}

/* ---- the objects ------------------------------------------------------------ */

struct object {                          /* one copy of one core object */
    void *binder;                        /* gpsimd_bind_core */
    int nops;
    char **names;                        /* get_func_name(i) */
    void **launchers;                    /* get_func_ptr(i) */
};

static struct object objects[GL_MAX_RUNS][GL_MAX_CORES];
static int ncopies, ncores;

static int copy_into(int to, int from)
{
    char buf[1 << 16];
    off_t at = 0;
    ssize_t n;
    while ((n = pread(from, buf, sizeof buf, at)) > 0 && write_all(to, buf, (size_t)n) == 0)
        at += n;
    return n == 0 ? 0 : -1;
}

/* Load copy c of object k: copy 0 from its payload's fd (or its path),
 * the others from a memfd of their own (another file: another copy of the
 * runtime's state). For copy 0, what the device loader checks goes into
 * entry (the ready message's core k); a later copy that does not load has
 * no ops (a vector that needs it fails, saying so). */
static void load(int c, int k, int fd, const char *name, struct gz_core *entry)
{
    char where[64], why[1024];
    if (c != 0) {
        const char *base = strrchr(name, '/');
        int own = memfd_create(base ? base + 1 : name, MFD_CLOEXEC);
        if (own < 0 || copy_into(own, fd) != 0) {
            if (own >= 0)
                close(own);
            return;
        }
        /* (own stays open: dlopen takes a name it has loaded already for
           that object, and a closed fd's number, hence its name, comes back) */
        fd = own;
    }
    snprintf(where, sizeof where, "/proc/self/fd/%d", fd);
    /* (what the static initialisers write goes to the load output's
       memfd, at most KEEP bytes of it) */
    struct rlimit fsize, small;
    getrlimit(RLIMIT_FSIZE, &fsize);
    small = (struct rlimit){KEEP, fsize.rlim_max};
    fflush(NULL);
    setrlimit(RLIMIT_FSIZE, &small);
    void *h = dlopen(where, RTLD_NOW | RTLD_LOCAL);
    fflush(NULL);
    setrlimit(RLIMIT_FSIZE, &fsize);
    /* (the device loader's checks: the entry points, copy 0's LSP first) */
    static const char *const syms[] = {"gpsimd_linker_spec_info", "_Z12get_func_cntv",
                                       "_Z13get_func_namei", "_Z12get_func_ptri",
                                       "gpsimd_bind_core"};
    void *got[5] = {NULL};
    const gpsimd_lsp_info *info = NULL;
    why[0] = 0;
    if (h == NULL)
        snprintf(why, sizeof why, "%s: cannot load: %s", name, dlerror());
    for (int i = c == 0 ? 0 : 1; h != NULL && i < 5 && !why[0]; i++) {
        if ((got[i] = dlsym(h, syms[i])) == NULL)
            snprintf(why, sizeof why, "%s: symbol %s not found", name, syms[i]);
        else if (i == 0 && (info = ((const gpsimd_lsp_info *(*)(void))got[0])()) == NULL)
            snprintf(why, sizeof why, "%s: gpsimd_linker_spec_info() returned null", name);
    }
    if (info != NULL) {
        entry->has_lsp = 1;
        entry->lsp_core_id = info->core_id;
        entry->scratch_origin = (int64_t)info->scratch_origin;
        entry->scratch_size = (int64_t)info->scratch_size;
        _Static_assert(sizeof info->name < sizeof entry->lsp_name, "a name and a NUL");
        memcpy(entry->lsp_name, info->name, sizeof info->name);
    }
    struct object *o = &objects[c][k];
    int (*cnt)(void) = why[0] ? NULL : (int (*)(void))got[1];
    const char *(*name_of)(int) = (const char *(*)(int))got[2];
    void *(*ptr_of)(int) = (void *(*)(int))got[3];
    if (!why[0])
        o->binder = got[4];
    int n = cnt ? cnt() : 0;
    if (cnt && n < 0)
        snprintf(why, sizeof why, "%s: get_func_cnt() returned %d", name, n);
    if (!why[0] && n > 0) {
        o->names = calloc((size_t)n, sizeof *o->names);
        o->launchers = calloc((size_t)n, sizeof *o->launchers);
        if (o->names == NULL || o->launchers == NULL)
            snprintf(why, sizeof why, "%s: no memory for %d ops", name, n);
    }
    for (int i = 0; i < n && !why[0]; i++) {
        const char *s = name_of(i);
        void *p = s ? ptr_of(i) : NULL;
        if (s == NULL)
            snprintf(why, sizeof why, "%s: get_func_name(%d) returned null", name, i);
        else if (p == NULL)
            snprintf(why, sizeof why, "%s: get_func_ptr(%d) (%s) returned null", name, i, s);
        for (int j = 0; j < i && !why[0]; j++)
            if (strcmp(o->names[j], s) == 0)
                snprintf(why, sizeof why, "%s: op '%s' registered twice", name, s);
        if (!why[0]) {
            o->names[i] = strdup(s);
            o->launchers[i] = p;
        }
    }
    o->nops = why[0] ? 0 : n;
    if (c != 0)
        return;
    snprintf(entry->error, sizeof entry->error, "%s", why);
    entry->loaded = !why[0];
    entry->nops = o->nops;
}

/* The ready message's memfd: the struct, then every core's op names */
static int ready_fd(const struct gz_ready *ready)
{
    int fd = memfd_of("gpsimd-ready", ready, sizeof *ready);
    for (int k = 0; k < ncores && fd >= 0; k++)
        for (int i = 0; i < objects[0][k].nops && fd >= 0; i++) {
            const char *op = objects[0][k].names[i];
            if (write_all(fd, op, strlen(op) + 1) != 0) {
                close(fd);
                fd = -1;
            }
        }
    return fd;
}

static void *launcher_of(const struct object *o, const char *op)
{
    for (int i = 0; i < o->nops; i++)
        if (strcmp(o->names[i], op) == 0)
            return o->launchers[i];
    return NULL;
}

/* ---- what the cores write ---------------------------------------------------- */

struct stream {                          /* a core's stdout or stderr */
    int fd, out;                         /* the pipe's read end (non-blocking), write end */
    int64_t total;
    char *head, *tail;                   /* the first bytes, a ring of the last */
};
static struct stream streams[2 * GL_MAX_CORES];
/* (apart from the counts: pages a vector that writes nothing never touches,
   so that they are not copied at its fork) */
static char kept_bytes[2 * GL_MAX_CORES][2][KEEP];

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
static void make_pipes(void)
{
    for (int i = 0; i < 2 * ncores; i++) {
        int ends[2];
        streams[i].fd = streams[i].out = -1;
        streams[i].head = kept_bytes[i][0];
        streams[i].tail = kept_bytes[i][1];
        if (pipe2(ends, O_CLOEXEC) != 0)
            continue;
        streams[i].fd = fcntl(ends[0], F_DUPFD_CLOEXEC, 3 + 2 * GL_MAX_CORES);
        streams[i].out = fcntl(ends[1], F_DUPFD_CLOEXEC, 3 + 2 * GL_MAX_CORES);
        close(ends[0]);
        close(ends[1]);
        fcntl(streams[i].fd, F_SETFL, O_NONBLOCK);
    }
}

/* ---- processes ----------------------------------------------------------------- */

/* Wait for the leader, draining the streams: 0 with its status, or -1 at
 * the deadline (left running). */
static int wait_vector(pid_t pid, double deadline, int *status, int nstreams)
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
        double left = deadline - gl_mono();
        if (left <= 0)
            break;
        struct pollfd p[1 + 2 * GL_MAX_CORES];
        int n = 0, which[2 * GL_MAX_CORES];
        if (pidfd >= 0)
            p[n++] = (struct pollfd){pidfd, POLLIN, 0};
        for (int i = 0; i < nstreams; i++)
            if (streams[i].fd >= 0) {
                which[n - (pidfd >= 0)] = i;
                p[n++] = (struct pollfd){streams[i].fd, POLLIN, 0};
            }
        int ms = pidfd >= 0 ? (int)(left * 1000) + 1 : 1;
        if (poll(p, (nfds_t)n, ms) > 0)
            for (int j = pidfd >= 0; j < n; j++)
                if (p[j].revents)
                    drain(&streams[which[j - (pidfd >= 0)]]);
    }
    if (pidfd >= 0)
        close(pidfd);
    return rc;
}

/* the children of this process (one thread: its own list) */
static int children(pid_t *out, int max)
{
    char path[64], text[8192];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    sb_read_text(AT_FDCWD, path, text, sizeof text);
    int count = 0;
    for (char *s = text; *s && count < max;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s)
            break;
        out[count++] = (pid_t)v;
        s = end;
    }
    return count;
}

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
    double deadline = gl_mono() + 5.0;
    for (;;) {
        pid_t pids[512];
        int n = children(pids, 512);
        for (int i = 0; i < n; i++) {
            killpg(pids[i], SIGKILL);
            kill(pids[i], SIGKILL);
        }
        int reaped = 0;
        while (waitpid(-1, &st, WNOHANG) > 0)
            reaped++;
        if ((n == 0 && reaped == 0) || gl_mono() > deadline)
            return;
        if (n && !reaped)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

/* VmData of /proc/self/status: what RLIMIT_DATA counts */
static int64_t data_bytes(void)
{
    char text[8192];
    sb_read_text(AT_FDCWD, "/proc/self/status", text, sizeof text);
    char *at = strstr(text, "\nVmData:");
    return at ? strtoll(at + 8, NULL, 10) * 1024 : 0;
}

/* ---- one vector ------------------------------------------------------------------ */

static int64_t data_base, baseline;

static void send_reply(int status, int timed_out, double elapsed, long long oom, long pid)
{
    memset(&reply, 0, sizeof reply);
    reply.magic = (int64_t)GPSIMD_ZY_MAGIC;
    reply.wait_status = status;
    reply.timed_out = timed_out;
    reply.elapsed_ns = (int64_t)(elapsed * 1e9);
    reply.oom_kills = oom;
    reply.pid = pid;
    int fd = -1;
    for (int i = 0; i < 2 * ncores; i++) {
        struct stream *s = &streams[i];
        if (s->total == 0)
            continue;
        size_t head = s->total < KEEP ? (size_t)s->total : KEEP;
        size_t tail = s->total > 2 * KEEP ? KEEP : (size_t)(s->total - (int64_t)head);
        reply.output[reply.noutput++] = (struct gz_output){i / 2, 1 + i % 2, s->total,
                                                           (int64_t)head, (int64_t)tail};
        if (fd < 0)
            fd = memfd_create("gpsimd-output", MFD_CLOEXEC);
        size_t at = (size_t)(s->total - (int64_t)tail) % KEEP;    /* (the ring: two slices) */
        size_t first = tail < KEEP - at ? tail : KEEP - at;
        if (fd >= 0 && (write_all(fd, s->head, head) || write_all(fd, s->tail + at, first)
                        || write_all(fd, s->tail, tail - first))) {
            close(fd);
            fd = -1;
            reply.noutput = 0;           /* (no memory for it: said as nothing kept) */
            break;
        }
    }
    send_fds((const char *)&reply, sizeof reply, &fd, fd >= 0);
    if (fd >= 0)
        close(fd);
}

static void run(struct gz_vector *m, int image_fd)
{
    static struct gl_request r;
    char why[512];
    memset(&r, 0, sizeof r);
    r.v = *m;
    r.v.op[GPSIMD_ZY_OP_NAME - 1] = 0;
    const struct gz_vector *v = &r.v;
    static int measured;
    if (!measured) {                     /* (the objects are loaded: what they hold) */
        if (SB.cg_inside && SB.cg_version)
            baseline = sb_cg_usage();
        measured = 1;
    }
    if (v->nruns < 1 || v->nruns > GL_MAX_RUNS || v->ncores < 1 || v->ncores > ncores) {
        close(image_fd);
        reply_error("a request of more runs or cores than the zygote holds");
        return;
    }
    for (int i = 0; i < v->nruns; i++) {
        int64_t p = v->runs[i].index, c = v->runs[i].copy;
        if (p < 0 || p >= GL_MAX_RUNS || c < 0 || c >= ncopies) {
            close(image_fd);
            reply_error("a request of a run the zygote holds no copy of the objects for");
            return;
        }
        for (int k = 0; k < v->ncores; k++) {
            r.launchers[p][k] = launcher_of(&objects[c][k], v->op);
            r.binders[p][k] = objects[c][k].binder;
            if (r.launchers[p][k] == NULL) {
                snprintf(why, sizeof why, "copy %lld of core object %d has no op %s "
                         "(it did not load again)", (long long)c, k, v->op);
                close(image_fd);
                reply_error(why);
                return;
            }
        }
    }
    int64_t limit = v->memory, extra = limit - v->image_total, oom0 = 0;
    if (extra < GPSIMD_ZY_MIN_DATA)
        extra = GPSIMD_ZY_MIN_DATA;
    int limited = 0;
    if (SB.cg_version) {
        int64_t cap = limit - v->prefilled;
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
    if (!limited) {                      /* RLIMIT_DATA only: shared out among the jobs */
        extra /= v->parallel > 1 ? v->parallel : 1;
        if (extra < GPSIMD_ZY_MIN_DATA)
            extra = GPSIMD_ZY_MIN_DATA;
    }
    r.image_fd = image_fd;
    r.devnull = devnull;
    r.data_limit = data_base + extra;
    r.zygote = getpid();
    r.oom_first = limited && SB.cg_inside;
    int nstreams = 2 * (int)v->ncores;
    for (int i = 0; i < 2 * ncores; i++) {
        streams[i].total = 0;
        r.out[i] = streams[i].out;
    }
    double cap = (double)v->timeout_ns * 1e-9 * (double)v->nruns
        + GPSIMD_ZY_KILL_GRACE_MS / 1000.0, start = gl_mono();
    long pid = gl_fork_leader(&r);
    close(image_fd);
    int status = 0, timed_out = 0;
    if (pid >= 0) {
        timed_out = wait_vector((pid_t)pid, start + cap, &status, nstreams) != 0;
        killpg((pid_t)pid, SIGKILL);     /* whatever stayed in its group */
        if (timed_out) {
            kill((pid_t)pid, SIGKILL);
            while (waitpid((pid_t)pid, &status, 0) < 0 && errno == EINTR)
                ;
        }
    }
    double elapsed = gl_mono() - start;
    sweep();
    for (int i = 0; i < nstreams; i++)   /* (every writer is gone: what is left) */
        drain(&streams[i]);
    sb_fresh_workdir();
    if (pid < 0) {
        snprintf(why, sizeof why, "fork of the vector's leader: %s", strerror((int)-pid));
        reply_error(why);
        return;
    }
    long long oom = limited && SB.cg_version ? (long long)(sb_cg_oom_kills() - oom0) : 0;
    send_reply(status, timed_out, elapsed, oom, pid);
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
    struct msghdr h = {0};
    h.msg_iov = &io;
    h.msg_iovlen = 1;
    h.msg_control = control;
    h.msg_controllen = sizeof control;
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
 * as many descriptors; 0 when it is whole, else -1 (said on stderr, which
 * the worker reads as the load output). */
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
    if (ncopies < 1 || ncopies > GL_MAX_RUNS || ncores < 1 || ncores > GL_MAX_CORES) {
        fprintf(stderr, "gpsimd-zygote: %d copies of %d objects (at most %d of %d)\n",
                ncopies, ncores, GL_MAX_RUNS, GL_MAX_CORES);
        return 2;
    }
    sb_die_with_parent(parent);
    gl_set_name("gpsimd-zygote");
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);       /* a crashing kernel leaves no core file */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    /* from here what this process writes (the objects' static
       initialisers, its own messages) goes to a memfd, the first KEEP
       bytes of it, which the worker prints */
    int out = memfd_create("gpsimd-load-output", MFD_CLOEXEC);
    if (out >= 0) {
        fflush(NULL);
        dup2(out, 1);
        dup2(out, 2);
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0 && null != 0) {
        dup2(null, 0);
        close(null);
    }
    /* (the sandbox has no devices; above every fd a leader moves its pipes to) */
    int w = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (w >= 0) {
        devnull = fcntl(w, F_DUPFD_CLOEXEC, 4 + 2 * GL_MAX_CORES);
        close(w);
    }
    sb_enter(parent, sock);
    static char names[GL_MAX_CORES * 4096];
    int payload[GL_MAX_CORES];
    const char *name[GL_MAX_CORES];
    if (receive_objects(names, sizeof names, payload, name) != 0)
        return 2;
    static struct gz_ready ready;
    ready.magic = (int64_t)GPSIMD_ZY_MAGIC;
    ready.cgroup = SB.cg_version != 0;
    snprintf(ready.mode, sizeof ready.mode, "%s", SB.mode);
    snprintf(ready.missing, sizeof ready.missing, "%s", SB.missing);
    for (int k = 0; k < ncores; k++)
        load(0, k, payload[k], name[k], &ready.cores[k]);
    fflush(NULL);
    int fds[2] = {ready_fd(&ready), out};
    if (fds[0] < 0)
        return 2;                        /* (no memory for the ready message) */
    send_fds("R", 1, fds, out >= 0 ? 2 : 1);
    close(fds[0]);
    /* the other copies load while the worker makes its first vector ready;
       their static initialisers write to a memfd no one reads (copy 0's
       output was sent: the worker reads it once) */
    int rest = memfd_create("gpsimd-load-rest", MFD_CLOEXEC);
    if (rest >= 0) {
        fflush(NULL);
        dup2(rest, 1);
        dup2(rest, 2);
        close(rest);
    }
    for (int c = 1; c < ncopies; c++)
        for (int k = 0; k < ncores; k++)
            load(c, k, payload[k], name[k], NULL);       /* (no entry: c > 0) */
    for (int k = 0; k < ncores; k++)
        close(payload[k]);
    fflush(NULL);
    /* what the objects' static initialisers may have changed that waiting
       for a vector's leader needs */
    signal(SIGCHLD, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    make_pipes();
    data_base = data_bytes() + GPSIMD_ZY_DATA_SLACK;
    while (!gone) {
        struct gz_vector m;
        int image_fd, nfds;
        ssize_t n = receive(&m, sizeof m, &image_fd, 1, &nfds);
        if (n <= 0)
            break;                       /* end of file: the worker is done */
        if (n != (ssize_t)sizeof m || m.magic != (int64_t)GPSIMD_ZY_MAGIC || nfds < 1) {
            if (nfds > 0)
                close(image_fd);
            reply_error("a request the zygote cannot read");
            continue;
        }
        run(&m, image_fd);
    }
    sweep();
    return 0;
}
