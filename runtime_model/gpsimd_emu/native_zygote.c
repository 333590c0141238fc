/* The native zygote: the zygote's loop over vectors (gpsimd_emu.zygote), in
 * C, in a process that holds nothing but the core objects and this
 * library, so that forking each vector's leader copies the page tables of
 * those alone (not of a Python interpreter's 8 MiB) and no Python runs
 * between two vectors.
 *
 * The Python zygote sets everything up (the PID namespace it is PID 1 of,
 * the memory cgroup, the check of every object's first copy, which the
 * worker is told) and then, when the native leader is used, replaces
 * itself with this library run as a program: the dynamic loader, given the
 * library (`ld.so libgpsimd_leader.so gl-zygote ARGS`), maps it and jumps
 * to gl_entry. Same pid, namespace, cgroup, rlimits and parent-death
 * signal; the descriptors it was given (the worker's socket, the objects'
 * payloads) and nothing else.
 *
 * Arguments (after the library's path), in order: "gl-zygote", the
 * socket's fd, the parent's pid, the containment mode ("pidns", "userns",
 * "pgroup"), copies per object, MIN_DATA and the data slack (bytes), the
 * cgroup's version (0: none) and path ("-"), 1 when the zygote is inside
 * it, the number of objects, then per object its payload's fd (-1: none)
 * and its name (with an fd) or path (without).
 *
 * Then, per message of the worker (struct gl_zygote_run and the image
 * memfd): the memory limit (cgroup and RLIMIT_DATA, as
 * gpsimd_emu.zygote.Zygote.run sets them), the leader (gl_fork_leader),
 * the wait (every run's time limit plus 2 s), the sweep of whatever the
 * vector left, and the reply: the JSON object the Python zygote sends,
 * {"wait_status", "timed_out", "elapsed", "oom_kills", "pid", "spawn"}, or
 * {"error": text}. At end of file: the sweep, the cgroup removed (outside
 * a namespace; else the relay removes it), exit 0.
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "leader.h"

/* ---- the objects ---------------------------------------------------------- */

struct object {                          /* one copy of one core object */
    void *binder;                        /* gpsimd_bind_core */
    int nops;
    char **names;                        /* get_func_name(i) */
    void **launchers;                    /* get_func_ptr(i) */
};

static struct object objects[GL_MAX_RUNS][GL_MAX_CORES];
static int ncopies, ncores;

static struct {
    int sock, parent, version, inside, has_memsw, gone;
    const char *mode, *path;
    int64_t min_data, data_base, baseline, limit;   /* limit: -1 none set */
} Z;

static int copy_into(int to, int from_fd, const char *path)
{
    int from = from_fd >= 0 ? from_fd : open(path, O_RDONLY | O_CLOEXEC);
    if (from < 0)
        return -1;
    char buf[1 << 16];
    off_t at = 0;
    ssize_t n;
    while ((n = pread(from, buf, sizeof buf, at)) > 0) {
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(to, buf + done, (size_t)(n - done));
            if (w < 0) {
                if (from != from_fd)
                    close(from);
                return -1;
            }
            done += w;
        }
        at += n;
    }
    if (from != from_fd)
        close(from);
    return n < 0 ? -1 : 0;
}

/* Copy c of object k: copy 0 from its payload's fd (or its path), the
 * others from a memfd of their own (another file: another copy of the
 * runtime's state). A copy that does not load has no ops (copy 0 of the
 * same bytes was checked, and the worker told, by the Python zygote). */
static void load(int c, int k, int fd, const char *name)
{
    char where[64];
    const char *what = where;
    int own = -1;
    if (c == 0 && fd < 0) {
        what = name;                     /* a plain .so: its path */
    } else if (c == 0) {
        snprintf(where, sizeof where, "/proc/self/fd/%d", fd);
    } else {
        const char *base = strrchr(name, '/');
        own = memfd_create(base ? base + 1 : name, MFD_CLOEXEC);
        if (own < 0 || copy_into(own, fd, name) != 0) {
            if (own >= 0)
                close(own);
            return;
        }
        snprintf(where, sizeof where, "/proc/self/fd/%d", own);
    }
    /* (own stays open: dlopen takes a name it has loaded already for that
       object, and a closed fd's number, hence its /proc name, comes back) */
    void *h = dlopen(what, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        if (own >= 0)
            close(own);
        return;
    }
    int (*cnt)(void) = (int (*)(void))dlsym(h, "_Z12get_func_cntv");
    const char *(*name_of)(int) = (const char *(*)(int))dlsym(h, "_Z13get_func_namei");
    void *(*ptr_of)(int) = (void *(*)(int))dlsym(h, "_Z12get_func_ptri");
    struct object *o = &objects[c][k];
    o->binder = dlsym(h, "gpsimd_bind_core");
    int n = cnt && name_of && ptr_of && o->binder ? cnt() : 0;
    if (n <= 0)
        return;
    o->names = calloc((size_t)n, sizeof *o->names);
    o->launchers = calloc((size_t)n, sizeof *o->launchers);
    if (o->names == NULL || o->launchers == NULL)
        return;
    for (int i = 0; i < n; i++) {
        const char *s = name_of(i);
        o->names[i] = s ? strdup(s) : NULL;
        o->launchers[i] = ptr_of(i);
    }
    o->nops = n;
}

static void *launcher_of(const struct object *o, const char *op)
{
    for (int i = 0; i < o->nops; i++)
        if (o->names[i] && strcmp(o->names[i], op) == 0)
            return o->launchers[i];
    return NULL;
}

/* ---- small files (/proc, the cgroup's) ------------------------------------ */

/* The text of file `path` (at most size - 1 bytes, NUL-terminated) into
 * text: its length, or -1 when it cannot be read or is empty. */
static ssize_t read_small(const char *path, char *text, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, size - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = 0;
    return n;
}

/* ---- the memory cgroup (gpsimd_emu.cgroup.MemoryCgroup) ------------------- */

static int cg_write(const char *file, long long value)
{
    char path[1024], text[32];
    snprintf(path, sizeof path, "%s/%s", Z.path, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int n = snprintf(text, sizeof text, "%lld", value);
    int rc = write(fd, text, (size_t)n) == n ? 0 : -1;
    close(fd);
    return rc;
}

static int cg_set_limit(int64_t bytes)
{
    if (bytes == Z.limit)
        return 0;
    int rc;
    if (Z.version == 1) {
        if (Z.has_memsw && cg_write("memory.memsw.limit_in_bytes", -1) != 0)
            return -1;
        rc = cg_write("memory.limit_in_bytes", bytes);
        if (rc == 0 && Z.has_memsw)
            rc = cg_write("memory.memsw.limit_in_bytes", bytes);
    } else {
        rc = cg_write("memory.max", bytes);
        if (rc == 0)
            cg_write("memory.swap.max", 0);
    }
    if (rc == 0)
        Z.limit = bytes;
    return rc;
}

/* The value of line `key N` of a cgroup file, or of a one-number file
 * (key NULL); 0 when it cannot be read. */
static int64_t cg_read(const char *file, const char *key)
{
    char path[1024], text[4096];
    snprintf(path, sizeof path, "%s/%s", Z.path, file);
    if (read_small(path, text, sizeof text) < 0)
        return 0;
    if (key == NULL)
        return strtoll(text, NULL, 10);
    size_t len = strlen(key);
    for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, key, len) == 0 && line[len] == ' ')
            return strtoll(line + len + 1, NULL, 10);
    return 0;
}

static int64_t cg_usage(void)
{
    return cg_read(Z.version == 1 ? "memory.usage_in_bytes" : "memory.current", NULL);
}

static int64_t cg_oom_kills(void)
{
    return cg_read(Z.version == 1 ? "memory.oom_control" : "memory.events", "oom_kill");
}

/* Zygote._drop_cgroup(for_good=False); outside the cgroup, its removal */
static void cg_drop(void)
{
    if (Z.inside) {
        cg_set_limit((int64_t)1 << 40);
        return;
    }
    for (int i = 0; i < 50 && rmdir(Z.path) != 0 && errno == EBUSY; i++)
        usleep(10000);
    Z.version = 0;
}

/* ---- processes (gpsimd_emu.contain) --------------------------------------- */

static double mono(void) { return (double)gl_now_ns() * 1e-9; }

/* contain.wait_until: the status, or -1 at the deadline (left running). */
static int wait_until(pid_t pid, double deadline, int *status)
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
        double left = deadline - mono();
        if (left <= 0)
            break;
        if (pidfd >= 0) {
            struct pollfd p = {pidfd, POLLIN, 0};
            poll(&p, 1, (int)(left * 1000) + 1);
        } else {
            struct timespec t = {0, 500000};
            nanosleep(&t, NULL);
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    return rc;
}

static void kill_group(pid_t pid) { killpg(pid, SIGKILL); }

/* contain.children (one thread: this process's own list) */
static int children(pid_t *out, int max)
{
    char path[64], text[8192];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    if (read_small(path, text, sizeof text) < 0)
        return 0;
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

/* Zygote._sweep: contain.sweep_namespace, or contain.sweep as a subreaper */
static void sweep(void)
{
    int st;
    if (strcmp(Z.mode, "pgroup") != 0) {
        kill(-1, SIGKILL);
        while (waitpid(-1, &st, 0) > 0 || errno == EINTR)
            ;
        return;
    }
    double deadline = mono() + 5.0;
    for (;;) {
        pid_t pids[512];
        int n = children(pids, 512);
        for (int i = 0; i < n; i++) {
            kill_group(pids[i]);
            kill(pids[i], SIGKILL);
        }
        int reaped = 0;
        while (waitpid(-1, &st, WNOHANG) > 0)
            reaped++;
        if ((n == 0 && reaped == 0) || mono() > deadline)
            return;
        if (n && !reaped) {
            struct timespec t = {0, 1000000};
            nanosleep(&t, NULL);
        }
    }
}

/* VmData of /proc/self/status (contain.data_bytes) */
static int64_t data_bytes(void)
{
    char text[8192];
    if (read_small("/proc/self/status", text, sizeof text) < 0)
        return 0;
    char *at = strstr(text, "\nVmData:");
    return at ? strtoll(at + 8, NULL, 10) * 1024 : 0;
}

/* ---- replies -------------------------------------------------------------- */

static void reply(const char *text)
{
    if (send(Z.sock, text, strlen(text), MSG_NOSIGNAL) < 0)
        Z.gone = 1;                      /* the worker is gone: as at end of file */
}

static void reply_error(const char *what)
{
    char text[1024];
    size_t j = 0;
    j += (size_t)snprintf(text, sizeof text, "{\"error\": \"");
    for (const char *s = what; *s && j < sizeof text - 8; s++) {
        if (*s == '"' || *s == '\\')
            text[j++] = '\\';
        text[j++] = (unsigned char)*s < 0x20 ? ' ' : *s;
    }
    snprintf(text + j, sizeof text - j, "\"}");
    reply(text);
}

/* ---- one vector (gpsimd_emu.zygote.Zygote.run) ---------------------------- */

static void run(struct gl_zygote_run *m, int image_fd)
{
    struct gl_request *r = &m->request;
    char why[512];
    m->op[GL_OP_NAME - 1] = 0;
    if (r->nruns < 1 || r->nruns > GL_MAX_RUNS || r->ncores < 1 || r->ncores > ncores) {
        close(image_fd);
        reply_error("a request of more runs or cores than the zygote holds");
        return;
    }
    for (int i = 0; i < r->nruns; i++) {
        int64_t p = r->runs[i].index;
        if (p < 0 || p >= ncopies) {
            close(image_fd);
            reply_error("a request of a run the zygote holds no copy of the objects for");
            return;
        }
        for (int k = 0; k < r->ncores; k++) {
            r->launchers[p][k] = launcher_of(&objects[p][k], m->op);
            r->binders[p][k] = objects[p][k].binder;
            if (r->launchers[p][k] == NULL) {
                snprintf(why, sizeof why, "copy %lld of core object %d has no op %s "
                         "(it did not load again)", (long long)p, k, m->op);
                close(image_fd);
                reply_error(why);
                return;
            }
        }
    }
    int64_t limit = m->memory, extra = limit - m->image_total, oom0 = 0;
    if (extra < Z.min_data)
        extra = Z.min_data;
    int limited = 0;
    if (Z.version) {
        int64_t cap = limit - m->prefilled;
        cap = (cap < Z.min_data ? Z.min_data : cap) + Z.baseline;
        /* (below what is charged now, a limit would fail, or on cgroup v2
           reclaim and OOM-kill the zygote itself) */
        if ((Z.inside && cg_usage() >= cap) || cg_set_limit(cap) != 0) {
            cg_drop();
        } else {
            oom0 = cg_oom_kills();
            limited = 1;
        }
    }
    if (!limited) {                      /* RLIMIT_DATA only: shared out among the jobs */
        int64_t jobs = r->parallel > 1 ? r->parallel : 1;
        extra /= jobs;
        if (extra < Z.min_data)
            extra = Z.min_data;
    }
    r->image_fd = image_fd;
    r->data_limit = Z.data_base + extra;
    r->zygote = getpid();
    r->oom_first = limited && Z.inside;
    r->join_path[0] = 0;
    if (limited && !Z.inside)
        snprintf(r->join_path, sizeof r->join_path, "%s/cgroup.procs", Z.path);
    double cap = r->timeout * (double)r->nruns + 2.0, start = mono();
    fflush(NULL);
    long pid = gl_fork_leader(r);
    close(image_fd);
    if (pid < 0) {
        snprintf(why, sizeof why, "fork of the native leader: %s", strerror((int)-pid));
        reply_error(why);
        return;
    }
    int status = 0, timed_out = wait_until((pid_t)pid, start + cap, &status) != 0;
    kill_group((pid_t)pid);              /* whatever stayed in its group */
    if (timed_out) {
        kill((pid_t)pid, SIGKILL);
        while (waitpid((pid_t)pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    double elapsed = mono() - start;
    sweep();
    long long oom = limited && Z.version ? (long long)(cg_oom_kills() - oom0) : 0;
    char text[512];
    snprintf(text, sizeof text, "{\"wait_status\": %d, \"timed_out\": %s, \"elapsed\": %.9f, "
             "\"oom_kills\": %lld, \"pid\": %ld, \"spawn\": \"%s\"}", status,
             timed_out ? "true" : "false", elapsed, oom, pid, Z.mode);
    reply(text);
}

/* ---- the program ---------------------------------------------------------- */

static int zygote_main(int argc, char **argv)
{
    if (argc < 12 || strcmp(argv[1], "gl-zygote") != 0) {
        fprintf(stderr, "usage: ld.so %s gl-zygote SOCK PARENT MODE COPIES MIN_DATA "
                "DATA_SLACK CGVERSION CGPATH INSIDE N [FD NAME]...\n", argv[0]);
        return 2;
    }
    Z.sock = atoi(argv[2]);
    Z.parent = atoi(argv[3]);
    Z.mode = argv[4];
    ncopies = atoi(argv[5]);
    Z.min_data = strtoll(argv[6], NULL, 10);
    int64_t slack = strtoll(argv[7], NULL, 10);
    Z.version = atoi(argv[8]);
    Z.path = argv[9];
    Z.inside = atoi(argv[10]);
    ncores = atoi(argv[11]);
    Z.limit = -1;
    if (ncopies < 1 || ncopies > GL_MAX_RUNS || ncores < 1 || ncores > GL_MAX_CORES
            || argc != 12 + 2 * ncores) {
        fprintf(stderr, "gl-zygote: bad arguments\n");
        return 2;
    }
    gl_die_with_parent(Z.parent);
    gl_set_name("gpsimd-zygote");
    if (Z.version == 1) {
        char memsw[1024];
        snprintf(memsw, sizeof memsw, "%s/memory.memsw.limit_in_bytes", Z.path);
        Z.has_memsw = access(memsw, F_OK) == 0;
    }
    for (int c = 0; c < ncopies; c++)
        for (int k = 0; k < ncores; k++)
            load(c, k, atoi(argv[12 + 2 * k]), argv[13 + 2 * k]);
    for (int k = 0; k < ncores; k++) {
        int fd = atoi(argv[12 + 2 * k]);
        if (fd >= 0)
            close(fd);
    }
    /* what the objects' static initialisers may have changed that waiting
       for a vector's leader needs */
    signal(SIGCHLD, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    Z.data_base = data_bytes() + slack;
    if (Z.inside && Z.version)
        Z.baseline = cg_usage();
    while (!Z.gone) {
        struct gl_zygote_run m;
        char control[CMSG_SPACE(16 * sizeof(int))];
        struct iovec io = {&m, sizeof m};
        struct msghdr h = {0};
        h.msg_iov = &io;
        h.msg_iovlen = 1;
        h.msg_control = control;
        h.msg_controllen = sizeof control;
        ssize_t n = recvmsg(Z.sock, &h, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;                       /* end of file: the worker is done */
        int image_fd = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            int nfd = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int *fds = (int *)CMSG_DATA(c);
            for (int i = 0; i < nfd; i++) {
                if (image_fd < 0)
                    image_fd = fds[i];
                else
                    close(fds[i]);
            }
        }
        if (n != (ssize_t)sizeof m || m.magic != GL_RUN_MAGIC || image_fd < 0
                || (h.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
            if (image_fd >= 0)
                close(image_fd);
            reply_error("a request the native zygote cannot read");
            continue;
        }
        run(&m, image_fd);
    }
    sweep();
    if (Z.version && !Z.inside)
        cg_drop();
    return 0;
}

/* Can this library run as a program here (gl_entry below)? */
int gl_zygote_supported(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
    return 1;
#else
    return 0;
#endif
}

/* The program's entry (the dynamic loader jumps here with the stack as
 * the kernel made it: argc, argv, envp): gl_start(sp). */
__attribute__((noreturn, used)) void gl_start(long *sp)
{
    int argc = (int)sp[0];
    char **argv = (char **)(sp + 1);
    int rc = zygote_main(argc, argv);
    fflush(NULL);
    _exit(rc);
}

#if defined(__x86_64__)
__asm__(".text\n.globl gl_entry\n.type gl_entry,@function\ngl_entry:\n"
        "  xor %ebp, %ebp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call gl_start\n  hlt\n");
#elif defined(__aarch64__)
__asm__(".text\n.globl gl_entry\n.type gl_entry,%function\ngl_entry:\n"
        "  mov x29, #0\n  mov x30, #0\n  mov x0, sp\n  bl gl_start\n  brk #0\n");
#else
void gl_entry(void) { _exit(127); }
#endif
