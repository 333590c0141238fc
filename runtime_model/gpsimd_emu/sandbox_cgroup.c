/* The sandbox's memory cgroup (sandbox.h; made by sb_enter, sandbox.c):
 * gpsimd-emu-<pid> under the process's own memory cgroup, cgroup v1 or
 * v2, its files kept open, its limit set per vector by the zygote and
 * read back (usage, OOM kills), removed by the relay at the end. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox.h"

/* The cgroup's files, per version (v1, v2): the limit, the limit of
 * memory and swap (v1) or of swap (v2), the usage, the OOM events */
enum { CG_LIMIT, CG_SWAP, CG_USAGE, CG_EVENTS };
static const char *const cg_files[2][4] = {
    {"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.usage_in_bytes",
     "memory.oom_control"},
    {"memory.max", "memory.swap.max", "memory.current", "memory.events"}};

/* Remove gpsimd-emu-<pid> cgroups under base whose process is gone (a run
 * that was SIGKILLed could not remove its own). */
static void remove_stale(const char *base)
{
    DIR *d = opendir(base);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "gpsimd-emu-", 11) != 0)
            continue;
        char proc[64], path[1400];
        snprintf(proc, sizeof proc, "/proc/%ld", strtol(e->d_name + 11, NULL, 10));
        if (access(proc, F_OK) == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", base, e->d_name);
        rmdir(path);
    }
    closedir(d);
}

/* gpsimd-emu-<pid> under this process's memory cgroup (v1 "memory", or
 * v2 with the controller delegated); SB.cg_version 0 when none can be. */
void sb_cg_create(void)
{
    char text[4096], bases[2][400] = {"", ""};
    if (sb_read_text(AT_FDCWD, "/proc/self/cgroup", text, sizeof text) <= 0)
        return;
    char *save, *c1, *c2;                            /* lines "id:controllers:path" */
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if ((c1 = strchr(line, ':')) == NULL || (c2 = strchr(c1 + 1, ':')) == NULL)
            continue;
        if (c2 - c1 == 1 && c1 - line == 1 && line[0] == '0')
            snprintf(bases[1], sizeof bases[1], "/sys/fs/cgroup%s", c2 + 1);
        else if (memmem(c1, (size_t)(c2 - c1), "memory", 6))
            snprintf(bases[0], sizeof bases[0], "/sys/fs/cgroup/memory%s", c2 + 1);
    }
    for (int version = 1; version <= 2 && !SB.cg_version; version++) {
        const char *base = bases[version - 1];
        if (!base[0])
            continue;
        if (version == 2) {
            char ctl[1100], list[512];
            snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", base);
            if (sb_read_text(AT_FDCWD, ctl, list, sizeof list) <= 0
                    || strstr(list, "memory") == NULL)
                continue;
        }
        remove_stale(base);
        snprintf(SB.cg_path, sizeof SB.cg_path, "%s/gpsimd-emu-%d", base, (int)getpid());
        if (mkdir(SB.cg_path, 0755) != 0 && errno != EEXIST)
            continue;
        if ((SB.cg_dir = open(SB.cg_path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
            rmdir(SB.cg_path);
            continue;
        }
        SB.cg_version = version;
        if (sb_cg_set_limit((int64_t)1 << 40) != 0)
            sb_cg_remove();
        if (SB.cg_version)               /* (for the relay: sb_cg_remove_below) */
            SB.cg_parent = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
}

/* Join the run's cgroup: the calling process, single-threaded. On v1 the
 * calling thread writes "0" to "tasks", which moves it without the
 * kernel's global lock of thread groups (0.3 ms here, where a write to
 * "cgroup.procs" waits 5-20 ms for that lock); 1 when inside. */
int sb_cg_join(void)
{
    return sb_write_text(SB.cg_dir, SB.cg_version == 1 ? "tasks" : "cgroup.procs", "0") == 0;
}

static int write_number(int fd, int64_t value)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%lld", (long long)value);
    return fd >= 0 && pwrite(fd, text, (size_t)n, 0) == n ? 0 : -1;
}

int sb_cg_set_limit(int64_t bytes)
{
    /* the files a limit is written to, opened once (at sb_cg_create's
       first limit: the mount is detached from the namespace later) */
    if (SB.cg_fds[CG_LIMIT] < 0)
        for (int i = CG_LIMIT; i <= CG_SWAP; i++)
            SB.cg_fds[i] = openat(SB.cg_dir, cg_files[SB.cg_version - 1][i], O_WRONLY | O_CLOEXEC);
    if (bytes == SB.cg_limit)
        return 0;
    /* v1: memory and swap (memsw), never below the limit, as the limit when
       its file is there; v2: no swap, as far as its file can be written */
    int swap = SB.cg_fds[CG_SWAP], v1 = SB.cg_version == 1;
    if (v1 && swap >= 0 && write_number(swap, -1) != 0)
        return -1;
    int rc = write_number(SB.cg_fds[CG_LIMIT], bytes);
    if (rc == 0 && write_number(swap, v1 ? bytes : 0) != 0 && v1 && swap >= 0)
        rc = -1;
    if (rc == 0)
        SB.cg_limit = bytes;
    return rc;
}

static int64_t cg_read(int file, const char *key)
{
    return sb_read_number(SB.cg_dir, cg_files[SB.cg_version - 1][file], key);
}

int64_t sb_cg_usage(void) { return cg_read(CG_USAGE, NULL); }
int64_t sb_cg_oom_kills(void) { return cg_read(CG_EVENTS, "oom_kill"); }

/* Remove the cgroup (path, below the folder dir), trying again for half a
 * second while it is busy, when kill_them with every process still in it
 * SIGKILLed between tries: the vectors' processes that outlived the zygote
 * (without a PID namespace an orphan that left its process group lives
 * on; none can leave the cgroup). A pid is read and killed within
 * microseconds: no time for its number to come round. */
static void cg_rmdir(int dir, const char *path, int kill_them)
{
    pid_t pids[4096];                    /* (as many as 8 KiB of text can list) */
    for (int i = 0; i < 50 && unlinkat(dir, path, AT_REMOVEDIR) != 0 && errno == EBUSY; i++) {
        int n = kill_them ? sb_read_pids(SB.cg_dir, "cgroup.procs", pids, 4096) : 0;
        for (int j = 0; j < n; j++)
            if (pids[j] > 1)
                kill(pids[j], SIGKILL);
        usleep(10000);
    }
}

/* Stop limiting through the cgroup (it cannot hold the limit asked). */
void sb_cg_remove(void)
{
    if (SB.cg_inside) {
        sb_cg_set_limit((int64_t)1 << 40);
        return;
    }
    sb_cg_close();
    cg_rmdir(AT_FDCWD, SB.cg_path, 0);
}

/* Its folder and limit files closed, in a process that gives it up. */
void sb_cg_close(void)
{
    close(SB.cg_fds[CG_LIMIT]);          /* (close(-1): EBADF, nothing closed) */
    close(SB.cg_fds[CG_SWAP]);
    close(SB.cg_dir);
    SB.cg_fds[CG_LIMIT] = SB.cg_fds[CG_SWAP] = SB.cg_dir = -1;
    SB.cg_version = 0;
}

/* The relay's removal, once the zygote is reaped: through the fd of the
 * cgroup's parent folder (the path may be hidden here), else of the
 * cgroup's own "..", else by its path. */
void sb_cg_remove_below(void)
{
    if (!SB.cg_version)
        return;
    int dir = SB.cg_parent >= 0 ? SB.cg_parent : openat(SB.cg_dir, "..", O_PATH | O_DIRECTORY);
    cg_rmdir(dir >= 0 ? dir : AT_FDCWD, dir >= 0 ? strrchr(SB.cg_path, '/') + 1 : SB.cg_path, 1);
}
