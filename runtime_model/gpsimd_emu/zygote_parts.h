/* The zygote's parts, for its loop (zygote.c): the core objects
 * (zygote_objects.c) and what the cores write (zygote_output.c). The
 * program's top layer: above the leader (leader.h) and the sandbox. */
#ifndef GPSIMD_EMU_ZYGOTE_PARTS_H
#define GPSIMD_EMU_ZYGOTE_PARTS_H

#include <sys/types.h>

#include "gpsimd_host/zygote.h"
#include "leader.h"

/* zygote_objects.c */
struct object {                          /* one copy of one core object */
    void *binder;                        /* gpsimd_bind_core */
    int nops;
    struct op { char *name; void *launcher; } *ops;   /* get_func_name(i), get_func_ptr(i) */
    char error[256];                     /* why a copy past the first did not load ("") */
};
extern struct object gz_objects[GPSIMD_ZY_MAX_RUNS][GPSIMD_ZY_MAX_CORES];
void gz_load(int c, int k, int fd, const char *name, struct gz_core *entry);
void *gz_launcher_of(const struct object *o, const char *op);

/* zygote_output.c: streams 2k and 2k + 1 are core k's stdout and stderr */
void gz_make_pipes(int ncores);
void gz_streams_begin(int *out, int n);
int gz_wait_vector(pid_t pid, int64_t deadline, int *status, int nstreams);   /* (ns) */
void gz_drain(int n);
int gz_kept(struct gz_reply *reply, int n, int *fd);

#endif
