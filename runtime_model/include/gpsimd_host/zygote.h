/* The emulator's native program, gpsimd-zygote (runtime_model/gpsimd_emu/
 * zygote.c, sandbox.c, leader.c): the one definition of what it and the
 * Python worker share. The worker reads this file (gpsimd_device.headers:
 * every "#define GPSIMD_ZY_* <number>" line and the X-macros), so a
 * layout, a limit or a state is written here and nowhere else.
 *
 * Not a kernel-facing header: kernels never include it.
 */
#ifndef GPSIMD_HOST_ZYGOTE_H
#define GPSIMD_HOST_ZYGOTE_H

#include <stdint.h>

/* ---- limits -------------------------------------------------------------- */
#define GPSIMD_ZY_MAX_RUNS 4           /* runs of a vector (first, second, ...) */
#define GPSIMD_ZY_MAX_CORES 8
#define GPSIMD_ZY_MAX_JOBS 64          /* process records of the control block */
#define GPSIMD_ZY_OP_NAME 256          /* bytes of an op's name, NUL included */
#define GPSIMD_ZY_OUTPUT_KEEP 32768    /* bytes kept of a core's stream: head and tail each */
#define GPSIMD_ZY_MIN_DATA 67108864    /* bytes a vector's cores get at least (64 MiB) */
#define GPSIMD_ZY_DATA_SLACK 16777216  /* bytes beyond the zygote's own data (16 MiB) */
#define GPSIMD_ZY_WORKDIR_BYTES 67108864  /* the private working directory's size */
#define GPSIMD_ZY_MAX_PIDS 1024        /* processes of a library run's namespace, at most */
#define GPSIMD_ZY_KILL_GRACE_MS 2000   /* a vector's deadline: every run's limit + this */
#define GPSIMD_ZY_EXIT_MODEL_ERROR 70  /* a vector's process recorded a model error */
#define GPSIMD_ZY_CANCELLED -2         /* wait status of a run a fault made unneeded */

/* ---- one vector: the worker's message (with the image memfd) -------------- */
#define GPSIMD_ZY_MAGIC 0x314e5552595a4c47   /* "GLZYRUN1", little-endian */
/* every field an int64_t; times in nanoseconds, sizes and offsets in bytes */
#define GPSIMD_ZY_VECTOR_FIELDS(X) X(magic) X(memory) X(image_total) X(prefilled) X(size) X(ncores) X(nruns) X(parallel) X(spread_now) X(spread_after_ns) X(timeout_ns) X(binding_size) X(bindings_at) X(args_at) X(arg_len) X(page) X(desc_len) X(scan_at) X(scan_nbytes) X(scan_itemsize)
#define GPSIMD_ZY_RUN_FIELDS(X) X(index) X(second) X(ordered) X(poison)

#define GPSIMD_ZY_I64(name) int64_t name;
struct gz_run { GPSIMD_ZY_RUN_FIELDS(GPSIMD_ZY_I64) };
struct gz_vector {
    GPSIMD_ZY_VECTOR_FIELDS(GPSIMD_ZY_I64)
    struct gz_run runs[GPSIMD_ZY_MAX_RUNS];
    char op[GPSIMD_ZY_OP_NAME];          /* the op's function, NUL-terminated */
};

/* ---- the control block: the image's first page (little-endian) ------------ */
#define GPSIMD_ZY_CB_SIZE 4096
#define GPSIMD_ZY_CB_VERSION 1
#define GPSIMD_ZY_CB_ERROR_FIELDS 28   /* error_pass i32, error_core i32, error_len u32 */
#define GPSIMD_ZY_CB_LEADER_DONE 40
#define GPSIMD_ZY_CB_ERROR 64          /* UTF-8 text of a model error */
#define GPSIMD_ZY_CB_ERROR_CAPACITY 1024
#define GPSIMD_ZY_CB_PASSES 1088       /* MAX_RUNS records */
#define GPSIMD_ZY_CB_PASS_SIZE 80
#define GPSIMD_ZY_CB_SEM 40            /* a pass's claim semaphore (sem_t) */
#define GPSIMD_ZY_CB_SLOTS 1408        /* MAX_RUNS x MAX_CORES records */
#define GPSIMD_ZY_CB_SLOT_SIZE 32
#define GPSIMD_ZY_CB_JOBS 2432         /* MAX_JOBS records */
#define GPSIMD_ZY_CB_JOB_SIZE 16

#define GPSIMD_ZY_SLOT_STARTED 1
#define GPSIMD_ZY_SLOT_DONE 2
#define GPSIMD_ZY_SLOT_BIND_FAILED 3
#define GPSIMD_ZY_PASS_RUNNING 1
#define GPSIMD_ZY_PASS_DONE 2
#define GPSIMD_ZY_PASS_SKIPPED 3
#define GPSIMD_ZY_JOB_RUNNING 1
#define GPSIMD_ZY_JOB_EXITED 2

#endif
