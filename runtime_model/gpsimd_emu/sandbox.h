/* The sandbox of a library run's vectors (sandbox.c, its memory cgroup
 * sandbox_cgroup.c, its whole writes and small files sandbox_files.c): the
 * namespaces, the memory cgroup, the privileges and the process ties, made
 * once by the program (zygote.c) and used by a vector's processes
 * (leader.c). It is the program's lowest layer: it
 * includes neither of the others' headers. */
#ifndef GPSIMD_EMU_SANDBOX_H
#define GPSIMD_EMU_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sandbox {
    const char *mode;                    /* "pidns", "userns", "pgroup" */
    char missing[1024];                  /* what is not contained, "" when all is */
    int cg_version, cg_inside, cg_dir, cg_parent, cg_fds[2];   /* limit, memsw/swap */
    int64_t cg_limit;                    /* -1: none set */
    char cg_path[1100];
    int workdir;                         /* the private working directory is /tmp */
    int ipc;                             /* the SysV IPC namespace is the zygote's own */
    int refresh[2];                      /* to the relay: its answer, the request */
};
extern struct sandbox SB;
int sb_enter(int parent, int relay_closes);   /* 0, or -1 (errno): no relay */
void sb_die_with_parent(int parent);
void sb_fresh_workdir(void);
void sb_run_dir(int p);
/* sandbox_files.c: n bytes written whole to fd (0, else -1); a small
   file under the folder dir (AT_FDCWD: a path) written whole, or read: at
   most size - 1 bytes and a NUL (its length, <= 0 when nothing was read:
   text is "") */
int sb_write_all(int fd, const void *data, size_t n);
int sb_write_text(int dir, const char *file, const char *text);
ssize_t sb_read_text(int dir, const char *file, char *text, size_t size);
/* the pids a small file lists (cgroup.procs, a task's children), at most max */
int sb_read_pids(int dir, const char *file, pid_t *pids, int max);
/* the number a one-number file holds (key NULL), or its line "key N" (0: none) */
int64_t sb_read_number(int dir, const char *file, const char *key);

/* sandbox_cgroup.c */
void sb_cg_create(void);
int sb_cg_join(void);
int sb_cg_set_limit(int64_t bytes);
int64_t sb_cg_usage(void);
int64_t sb_cg_oom_kills(void);
void sb_cg_remove(void);
void sb_cg_close(void);                  /* its descriptors closed, SB.cg_version 0 */
void sb_cg_remove_below(void);

#endif
