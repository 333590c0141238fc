/* The sandbox of a library run's vectors (sandbox.h), made once by the
 * zygote at its start (zygote.c: sb_enter), in the manner of Bazel's
 * linux-sandbox: the namespaces and mounts, then the privileges, before
 * any core object is loaded; outside stays the relay, which relays the
 * zygote's end, makes its working directory again on request and removes
 * the memory cgroup (sandbox_cgroup.c). GPSIMD_EMU_CONTAIN forces a mode
 * (tests). Each wall, its order and why: ARCHITECTURE.md "Processes and
 * containment". */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpsimd_host/zygote.h"
#include "sandbox.h"

struct sandbox SB = {.mode = "pgroup", .cg_dir = -1, .cg_parent = -1, .cg_fds = {-1, -1},
                     .cg_limit = -1};

/* Die (SIGKILL) with the process ``parent`` (contain.die_with_parent): at
 * once when it is already gone, unless this process is PID 1 of a new
 * namespace, whose parent is outside it. */
void sb_die_with_parent(int parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    pid_t ppid = getppid();
    if (ppid != parent && !(ppid == 0 && getpid() == 1))
        _exit(1);
}

static void note(const char *what, int err)
{
    size_t n = strlen(SB.missing);
    snprintf(SB.missing + n, sizeof SB.missing - n, "%s%s (%s)", n ? "; " : "", what,
             strerror(err));
}

/* ---- the working directory -------------------------------------------------- */

/* The working directory's folders: /tmp and a folder per run of a vector
 * (sb_run_dir: the runs of one vector do not see each other's files). */
static const char *const workdirs[1 + GPSIMD_ZY_MAX_RUNS] = {
    "/tmp", "/tmp/run0", "/tmp/run1", "/tmp/run2", "/tmp/run3", "/tmp/run4", "/tmp/run5"};
_Static_assert(GPSIMD_ZY_MAX_RUNS == 6, "a folder per run");
/* their change times when they were made: any file made, removed or
 * renamed in one, or any change to one, changes its ctime (which no
 * process can set) */
static struct timespec made[1 + GPSIMD_ZY_MAX_RUNS];

static int mount_workdir(void)
{
    char opts[80];
    snprintf(opts, sizeof opts, "size=%d,nr_inodes=65536,mode=0700", GPSIMD_ZY_WORKDIR_BYTES);
    if (mount("gpsimd-work", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
        return -1;
    for (int i = 1; i <= GPSIMD_ZY_MAX_RUNS; i++)
        if (mkdir(workdirs[i], 0700) != 0)
            return -1;
    return 0;
}

/* The zygote in its (new) working directory, its folders' times noted. */
static int enter_workdir(void)
{
    struct stat st;
    for (int i = 0; i <= GPSIMD_ZY_MAX_RUNS; i++) {
        if (stat(workdirs[i], &st) != 0)
            return -1;
        made[i] = st.st_ctim;
    }
    return chdir("/tmp");
}

/* The working directory of run p of a vector (in a vector's process). */
void sb_run_dir(int p)
{
    if (SB.workdir && chdir(workdirs[1 + p]) != 0) {
        /* (left where it was: the run still runs, its files not private) */
    }
}

/* SysV IPC objects a vector left in the namespace's own IPC namespace
 * (none, almost always: three calls), removed. */
static void clear_ipc(void)
{
    struct shm_info shm;
    struct seminfo sem;
    struct msginfo msg;
    union { struct shmid_ds shm; struct semid_ds sem; struct msqid_ds msg; } d;
    int top = shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&shm), id;
    for (int i = 0; top >= 0 && shm.used_ids > 0 && i <= top; i++)
        if ((id = shmctl(i, SHM_STAT_ANY, &d.shm)) >= 0)
            shmctl(id, IPC_RMID, NULL);
    top = semctl(0, 0, SEM_INFO, &sem);
    for (int i = 0; top >= 0 && sem.semusz > 0 && i <= top; i++)
        if ((id = semctl(i, 0, SEM_STAT_ANY, &d.sem)) >= 0)
            semctl(id, 0, IPC_RMID);
    top = msgctl(0, MSG_INFO, (struct msqid_ds *)(void *)&msg);
    for (int i = 0; top >= 0 && msg.msgpool > 0 && i <= top; i++)
        if ((id = msgctl(i, MSG_STAT_ANY, &d.msg)) >= 0)
            msgctl(id, IPC_RMID, NULL);
}

/* Nothing of the last vector for the next one: its SysV IPC objects
 * removed, and the working directory's tmpfs made again when anything
 * in it changed. */
void sb_fresh_workdir(void)
{
    struct stat st;
    int same = SB.workdir;
    if (SB.ipc)
        clear_ipc();
    for (int i = 0; same && i <= GPSIMD_ZY_MAX_RUNS; i++)
        same = stat(workdirs[i], &st) == 0 && st.st_ctim.tv_sec == made[i].tv_sec
            && st.st_ctim.tv_nsec == made[i].tv_nsec;
    if (!SB.workdir || same)
        return;
    char done = '0';
    if (write(SB.refresh[1], "r", 1) != 1 || read(SB.refresh[0], &done, 1) != 1 || done != '1'
            || enter_workdir() != 0)
        SB.workdir = 0;                  /* (the next vectors' runs stay where they are) */
}

/* ---- namespaces ------------------------------------------------------------ */

/* A fresh working directory in the zygote's mount namespace (the relay
 * joins it at the first request): the zygote holds no capability, so it
 * asks the relay, which keeps them outside the PID namespace, out of a
 * kernel's reach. 1 when done. */
static int refresh(pid_t pid, int *mnt)
{
    if (*mnt < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)pid);
        if ((*mnt = open(path, O_RDONLY | O_CLOEXEC)) < 0 || setns(*mnt, CLONE_NEWNS) != 0)
            return 0;
    }
    return umount2("/tmp", MNT_DETACH) == 0 && mount_workdir() == 0;
}

/* The zygote, PID 1 of the namespace: its pidfd (never another process,
 * once it is reaped), or its pid while it is not reaped. */
static int sandboxed_fd = -1;
static pid_t sandboxed;
static volatile sig_atomic_t reaped, stopped_by;

static void end_sandbox(int sig)
{
    int saved = errno;
    stopped_by = sig;                    /* (the relay dies of it, once done) */
    if (sandboxed_fd >= 0)               /* (its namespace's processes die with it) */
        syscall(SYS_pidfd_send_signal, sandboxed_fd, SIGKILL, NULL, 0);
    else if (!reaped)
        kill(sandboxed, SIGKILL);
    errno = saved;
}

/* Serve the zygote's requests for a fresh working directory (requests:
 * a byte on `req`; the answer, "1" or "0", on `ack`), wait for its end
 * and end as it ended, its cgroup removed; a stop signal, or the death of
 * the worker `parent`, ends the zygote first (ARCHITECTURE.md). */
static void relay(pid_t pid, int req, int ack, int parent)
{
    int st = 0, mnt = -1, ended = (int)syscall(SYS_pidfd_open, pid, 0);
    sandboxed = pid;
    sandboxed_fd = ended;
    struct sigaction stop = {.sa_handler = end_sandbox};    /* (an empty mask, no flags) */
    sigaction(SIGINT, &stop, NULL);
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGHUP, &stop, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (getppid() != parent)             /* (it died before the line above) */
        end_sandbox(SIGTERM);
    for (char c; ended >= 0;) {
        struct pollfd p[2] = {{ended, POLLIN, 0}, {req, POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break;
        if (p[1].revents & POLLIN && read(req, &c, 1) == 1) {
            if (write(ack, refresh(pid, &mnt) ? "1" : "0", 1) != 1)
                break;
        } else if (p[1].revents) {
            break;                       /* (the zygote's end closed: it is ending) */
        }
    }
    close(req);                          /* (a request now reads "not done") */
    close(ack);
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            _exit(1);
    reaped = 1;
    sb_cg_remove_below();
    int sig = stopped_by ? stopped_by : WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    if (sig) {
        signal(sig, SIG_DFL);
        kill(getpid(), sig);
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

/* At most GPSIMD_ZY_MAX_PIDS processes in this PID namespace (a fork bomb
 * would take the machine's PIDs): its own pid_max, which Linux keeps per
 * PID namespace since 6.14 (before, the file is the machine's: not
 * written). Through the /proc of the machine, before it is replaced. */
static void limit_pids(void)
{
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2
            || major * 1000 + minor < 6014) {
        note("a bound on the vectors' processes (it needs Linux 6.14)", ENOSYS);
        return;
    }
    char text[16];
    snprintf(text, sizeof text, "%d", GPSIMD_ZY_MAX_PIDS);
    if (sb_write_text(AT_FDCWD, "/proc/sys/kernel/pid_max", text) != 0)
        note("a bound on the vectors' processes", errno);
}

/* In the new mount namespace: the file system read-only, /sys/fs/cgroup
 * gone, a fresh /proc of this PID namespace, the private working
 * directory. */
static void make_mounts(void)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        note("a private mount namespace", errno);
        return;
    }
    /* (the cgroup's limit files are open: sb_cg_create set a limit) */
    if (SB.cg_version && umount2("/sys/fs/cgroup", MNT_DETACH) != 0) {  /* (locked in a userns) */
        note("the memory cgroup (it cannot be hidden here)", errno);
        sb_cg_close();                                   /* (the relay removes it) */
        SB.cg_inside = 0;
    }
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    if (syscall(SYS_mount_setattr, -1, "/", AT_RECURSIVE, &ro, sizeof ro) != 0)
        note("a read-only file system", errno);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "subset=pid,hidepid=invisible") != 0)
        note("a /proc of the vectors' processes only", errno);
    if (mount_workdir() != 0 || enter_workdir() != 0) {
        note("a private working directory", errno);
        if (chdir("/") != 0) {
        }
    } else {
        SB.workdir = 1;
    }
}

/* ---- privileges ------------------------------------------------------------- */

/* No socket at all (socket, socketpair: a Unix datagram pair can connect
 * to a path, vsock reaches a virtual machine's host, whatever the network
 * namespace), no io_uring, no kernel keyring (without a user namespace a
 * key outlives the build, in the user's keyring of the machine), no POSIX
 * message queue (one outlives its vector), no namespace made or joined
 * (unshare, setns, clone with a CLONE_NEW* flag: a new user namespace
 * would give back every capability in it): EACCES; clone3, whose flags
 * the filter cannot read, ENOSYS (the C library then uses clone); no
 * other ABI's calls (a 32-bit socketcall). */
static int install_filter(void)
{
#if defined(__x86_64__)
#define SB_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SB_ARCH AUDIT_ARCH_AARCH64
#endif
#ifdef SB_ARCH
    static const unsigned refused[] = {__NR_io_uring_setup, __NR_socket, __NR_socketpair,
                                       __NR_add_key, __NR_request_key, __NR_keyctl, __NR_mq_open,
                                       __NR_unshare, __NR_setns};
    const unsigned namespaces = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC
        | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
    enum { N = sizeof refused / sizeof *refused, ALLOW = 9 + N, REFUSE, NOSYS };
#define SB_TO(from, to) (unsigned char)((to) - (from) - 1)   /* (a jump's offset) */
    struct sock_filter f[12 + N] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SB_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, SB_TO(4, REFUSE), 0),  /* x32 */
    };
    for (int i = 0; i < N; i++)
        f[5 + i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, refused[i],
                                                SB_TO(5 + i, REFUSE), 0);
    f[5 + N] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3,
                                            SB_TO(5 + N, NOSYS), 0);
    f[6 + N] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0,
                                            SB_TO(6 + N, ALLOW));
    f[7 + N] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                            offsetof(struct seccomp_data, args[0]));
    f[8 + N] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, namespaces,
                                            SB_TO(8 + N, REFUSE), 0);
    f[ALLOW] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[REFUSE] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES);
    f[NOSYS] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
#undef SB_TO
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
    errno = ENOSYS;
    return -1;
#endif
}

static void lock_down(void)
{
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    /* not dumpable, nor the vectors' processes it forks: a kernel can
       neither open this process's descriptors through /proc/PID/fd (the
       cgroup's limit, the socket to the worker) nor take them with
       pidfd_getfd(2), nor ptrace another vector process */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL)
            break;
    if (install_filter() != 0)
        note("a filter of the vectors' system calls", errno);
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2] = {{0, 0, 0}, {0, 0, 0}};
    syscall(SYS_capset, &h, none);       /* (no capability, before any object loads:
                                            its static initialisers run here) */
}

/* ---- the entry -------------------------------------------------------------- */

int sb_enter(int parent, int relay_closes)
{
    sb_cg_create();
    const char *forced = getenv("GPSIMD_EMU_CONTAIN");
    int tries[2] = {CLONE_NEWPID, CLONE_NEWUSER | CLONE_NEWPID};
    const char *modes[2] = {"pidns", "userns"};
    char ids[2][64];                     /* (in a user namespace: the user's own, mapped) */
    snprintf(ids[0], sizeof ids[0], "%d %d 1", (int)getuid(), (int)getuid());
    snprintf(ids[1], sizeof ids[1], "%d %d 1", (int)getgid(), (int)getgid());
    for (int i = 0; i < 2; i++) {
        if ((forced && *forced && strcmp(forced, modes[i]) != 0) || unshare(tries[i]) != 0)
            continue;
        if (tries[i] & CLONE_NEWUSER) {
            sb_write_text(AT_FDCWD, "/proc/self/setgroups", "deny");
            sb_write_text(AT_FDCWD, "/proc/self/uid_map", ids[0]);
            sb_write_text(AT_FDCWD, "/proc/self/gid_map", ids[1]);
        }
        SB.mode = modes[i];
        break;
    }
    /* (in every mode: the relay outlives the zygote to remove the cgroup) */
    int req[2], ack[2];
    pid_t outside = getpid(), pid = -1;
    if (pipe2(req, O_CLOEXEC) != 0 || pipe2(ack, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
        int e = errno;                   /* (the program ends, and no relay removes */
        sb_cg_remove();                  /* its cgroup) */
        errno = e;
        return -1;
    }
    if (pid > 0) {
        close(relay_closes);             /* (the worker sees the zygote's end) */
        close(req[1]);
        close(ack[0]);
        relay(pid, req[0], ack[1], parent);
    }
    close(req[0]);
    close(ack[1]);
    if (SB.cg_parent >= 0)
        close(SB.cg_parent);
    SB.refresh[0] = ack[0];
    SB.refresh[1] = req[1];
    sb_die_with_parent(outside);
    /* (joined once: a vector's leader is born in it) */
    SB.cg_inside = SB.cg_version && sb_cg_join();
    if (SB.cg_version && !SB.cg_inside)
        sb_cg_remove();                  /* (the RLIMIT alone, then) */
    if (strcmp(SB.mode, "pgroup") == 0) {
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        note("a PID namespace (the vectors' processes share the machine's view: "
             "network, file system, processes)", EPERM);
    } else if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC) != 0) {
        note("network, mount and IPC namespaces", errno);
    } else {
        SB.ipc = 1;
        limit_pids();
        make_mounts();
    }
    lock_down();
    return 0;
}
