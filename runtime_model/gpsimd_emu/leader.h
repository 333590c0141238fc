/* The native leader's request (gpsimd_emu.native.Request mirrors it) and
 * what leader.c and native_zygote.c, the two sources of the native leader
 * library, share. */
#ifndef GPSIMD_EMU_LEADER_H
#define GPSIMD_EMU_LEADER_H

#include <stdint.h>

#define GL_VERSION 2
#define GL_MAX_RUNS 4          /* control.MAX_PASSES */
#define GL_MAX_CORES 8         /* control.MAX_CORES */
#define EXIT_MODEL_ERROR 70    /* jobs.EXIT_MODEL_ERROR */
#define CANCELLED (-2)         /* jobs.CANCELLED */

/* ---- the request (gpsimd_emu.native.Request) --------------------------- */
struct gl_run {
    int64_t index, second, ordered, poison;   /* (the worker poisoned the copies) */
};

struct gl_request {
    int64_t version;                     /* GL_VERSION */
    int64_t image_fd, size;              /* the image memfd and its bytes */
    int64_t ncores, nruns;
    int64_t parallel, spread_now;
    double spread_after, timeout;        /* seconds */
    int64_t binding_size, bindings_at;   /* bytes; image offset */
    int64_t args_at, arg_len, page, desc_len;
    int64_t data_limit;                  /* RLIMIT_DATA bytes; 0: none */
    int64_t zygote;                      /* the parent's pid */
    int64_t scan_at, scan_nbytes, scan_itemsize;   /* itemsize 0: no scan */
    int64_t oom_first;                   /* oom_score_adj 1000 */
    struct gl_run runs[GL_MAX_RUNS];
    void *launchers[GL_MAX_RUNS][GL_MAX_CORES];   /* int (*)(void), per copy */
    void *binders[GL_MAX_RUNS][GL_MAX_CORES];     /* gpsimd_bind_core, per copy */
    char join_path[512];                 /* cgroup.procs to join, or "" */
};

/* ---- a vector for the zygote (gpsimd_emu.native.ZygoteRun) ------------- */
#define GL_RUN_MAGIC 0x314e5552595a4c47LL   /* "GLZYRUN1", little-endian */
#define GL_OP_NAME 256

/* One message of the worker to the zygote (with the image memfd): the
 * worker's part of the vector's request; the zygote fills in the rest
 * (image_fd, data_limit, zygote, oom_first, launchers, binders,
 * join_path) from memory, image_total and prefilled and its objects. */
struct gl_zygote_run {
    int64_t magic;                       /* GL_RUN_MAGIC */
    int64_t memory, image_total, prefilled;   /* bytes */
    char op[GL_OP_NAME];                 /* the op's function, NUL-terminated */
    struct gl_request request;
};

/* leader.c */
long gl_fork_leader(const struct gl_request *req);
int gl_layout(int64_t *out, int n);
void gl_die_with_parent(int parent);
void gl_set_name(const char *name);
int64_t gl_now_ns(void);

/* native_zygote.c: the entry point when the library runs as a program */
void gl_entry(void);

#endif
