/* A vector's processes (leader.c), as the program's loop (zygote.c) calls
 * them: the request it fills and the leader's helpers. Below it stands the
 * sandbox (sandbox.h), which includes neither. The formats the program
 * shares with the Python worker are gpsimd_host/zygote.h's. */
#ifndef GPSIMD_EMU_LEADER_H
#define GPSIMD_EMU_LEADER_H

#include <stdint.h>
#include <time.h>

#include "gpsimd_host/zygote.h"
#include "sandbox.h"

/* A vector's request: the worker's message and what the zygote adds. */
struct gl_request {
    struct gz_vector v;
    void *image;                         /* the image, mapped by the zygote (no control block
                                            to record an error in before it is) */
    int image_fd;                        /* its memfd (the leader closes it) */
    int oom_first;                       /* oom_score_adj 1000 */
    int64_t data_limit;                  /* RLIMIT_DATA bytes; 0: none */
    int out[2 * GPSIMD_ZY_MAX_CORES];    /* per core: stdout's and stderr's pipe (write end) */
    int devnull;                         /* /dev/null for writing: the cores' output after
                                            the first run */
    void *launchers[GPSIMD_ZY_MAX_RUNS][GPSIMD_ZY_MAX_CORES];  /* int (*)(void), per copy */
    void *binders[GPSIMD_ZY_MAX_RUNS][GPSIMD_ZY_MAX_CORES];    /* gpsimd_bind_core, per copy */
};

/* leader.c */
long gl_fork_leader(struct gl_request *req);
void gl_set_name(const char *name);

/* CLOCK_MONOTONIC, in nanoseconds (inline: every layer above the sandbox
   times with it, and leader.c's parts call nothing of leader.c) */
static inline int64_t gl_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

#endif
