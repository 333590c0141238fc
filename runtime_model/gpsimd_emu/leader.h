/* What the three sources of gpsimd-zygote share (zygote.c: the program
 * and its loop over vectors; sandbox.c: the namespaces, the cgroup, the
 * privileges; leader.c: a vector's processes). The formats it shares with
 * the Python worker are gpsimd_host/zygote.h's. */
#ifndef GPSIMD_EMU_LEADER_H
#define GPSIMD_EMU_LEADER_H

#include <stdint.h>

#include "gpsimd_host/zygote.h"

#define GL_MAX_RUNS GPSIMD_ZY_MAX_RUNS
#define GL_MAX_CORES GPSIMD_ZY_MAX_CORES

/* A vector's request: the worker's message and what the zygote adds. */
struct gl_request {
    struct gz_vector v;
    int image_fd;                        /* the image memfd */
    int zygote;                          /* the pid the leader dies with */
    int oom_first;                       /* oom_score_adj 1000 */
    int64_t data_limit;                  /* RLIMIT_DATA bytes; 0: none */
    int out[2 * GL_MAX_CORES];           /* per core: stdout's and stderr's pipe (write end) */
    void *launchers[GL_MAX_RUNS][GL_MAX_CORES];   /* int (*)(void), per copy */
    void *binders[GL_MAX_RUNS][GL_MAX_CORES];     /* gpsimd_bind_core, per copy */
    int join_cg;                         /* the cgroup version to join (SB.cg_dir), 0: none */
};

/* leader.c */
long gl_fork_leader(struct gl_request *req);
void gl_die_with_parent(int parent);
void gl_set_name(const char *name);
int64_t gl_now_ns(void);

/* sandbox.c */
struct sandbox {
    const char *mode;                    /* "pidns", "userns", "pgroup" */
    char missing[1024];                  /* what is not contained, "" when all is */
    int cg_version, cg_inside, cg_dir, cg_fds[2];   /* limit, memsw/swap */
    int64_t cg_limit;                    /* -1: none set */
    char cg_path[1100];
    int workdir;                         /* the private working directory is /tmp */
    int ipc;                             /* the SysV IPC namespace is the zygote's own */
    int refresh[2];                      /* to the relay: its answer, the request */
};
extern struct sandbox SB;
void sb_enter(int parent, int relay_closes);
int sb_cg_join(int dir, int version);
int sb_cg_set_limit(int64_t bytes);
int64_t sb_cg_read(const char *file, const char *key);
void sb_cg_remove(void);
void sb_fresh_workdir(void);
void sb_run_dir(int p);

#endif
