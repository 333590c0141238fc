/* The emulator's native program, gpsimd-zygote (runtime_model/gpsimd_emu/
 * zygote.c, sandbox.c, leader.c): the one definition of what it and the
 * Python worker share. The worker reads this file (every "#define
 * GPSIMD_ZY_* <number>" line through gpsimd_device.headers, every structure
 * through gpsimd_emu.binding.header_struct), so a layout, a limit or a
 * state is written here and nowhere else.
 *
 * Not a kernel-facing header: kernels never include it.
 */
#ifndef GPSIMD_HOST_ZYGOTE_H
#define GPSIMD_HOST_ZYGOTE_H

#include <stdint.h>

#include "gpsimd_host/abi.h"

/* ---- limits -------------------------------------------------------------- */
#define GPSIMD_ZY_MAX_RUNS 6           /* runs of a vector (first, second, ...) */
#define GPSIMD_ZY_MAX_CORES 8
#define GPSIMD_ZY_MAX_JOBS 56          /* process records of the control block (its page) */
#define GPSIMD_ZY_OP_NAME 256          /* bytes of an op's name, NUL included */
#define GPSIMD_ZY_OUTPUT_KEEP 32768    /* bytes kept of a core's stream: head and tail each */
#define GPSIMD_ZY_MIN_DATA 67108864    /* bytes a vector's cores get at least (64 MiB) */
#define GPSIMD_ZY_DATA_SLACK 16777216  /* bytes beyond the zygote's own data (16 MiB) */
#define GPSIMD_ZY_WORKDIR_BYTES 67108864  /* the private working directory's size */
#define GPSIMD_ZY_MAX_PIDS 1024        /* processes of a library run's namespace, at most */
#define GPSIMD_ZY_KILL_GRACE_MS 2000   /* a vector's deadline: every run's limit + this */
#define GPSIMD_ZY_EXIT_MODEL_ERROR 70  /* a vector's process recorded a model error */
#define GPSIMD_ZY_CANCELLED -2         /* wait status of a run a fault made unneeded */
#define GPSIMD_ZY_LOST -3              /* wait status of a helper whose wait failed (its end
                                          not known: a kernel reaped it, or ignored SIGCHLD) */
#define GPSIMD_ZY_UNFINISHED -4        /* of a whole run's helper that exited 0, its run not done */

/* ---- one vector: the worker's message (with the image memfd) -------------- */
#define GPSIMD_ZY_MAGIC 0x314e5552595a4c47   /* "GLZYRUN1", little-endian */
/* copy: the copy of the core objects a run launches; after: -1, or the run
 * whose launch of each core this run's launch of it follows at once, in
 * the same process (a second call of the same loaded objects); base: -1,
 * or the run whose final shared output this shared run's starts from, made
 * after every run before it, launching only the cores whose report has
 * GPSIMD_REPORT_OUTPUT_UNTRACKED in a run before it (each core then runs
 * with every other core's part of the output written) */
typedef struct gz_run { int64_t index, ordered, copy, after, base; } gz_run;
typedef struct gz_vector {             /* times in nanoseconds, sizes and offsets in bytes */
    int64_t magic, memory, image_total, prefilled, size, ncores, nruns, parallel, spread_now,
        spread_after_ns, timeout_ns, binding_size, bindings_at, args_at, arg_len, page, desc_len;
    gz_run runs[GPSIMD_ZY_MAX_RUNS];
    char op[GPSIMD_ZY_OP_NAME];          /* the op's function, NUL-terminated */
} gz_vector;

/* ---- the zygote's answers ---------------------------------------------------- */
#define GPSIMD_ZY_TEXT 1024            /* bytes of a text field, its NUL included */
#define GPSIMD_ZY_MODE 16              /* "pidns", "userns", "pgroup" */
/* Ready, once the objects are loaded: one byte GPSIMD_ZY_READY with the
 * memfd of a struct gz_ready followed by each loaded core's op names,
 * every name ending in a NUL, core after core (nops of each), and the
 * memfd of what the objects' static initialisers wrote. Or, when it ends
 * before: one byte GPSIMD_ZY_NOT_READY with the memfd of what it wrote,
 * its last line why. */
#define GPSIMD_ZY_READY "R"
#define GPSIMD_ZY_NOT_READY "E"
typedef struct gz_core {
    /* loaded: the device loader's checks passed (else error says why);
       has_lsp: lsp holds gpsimd_linker_spec_info()'s answer */
    int64_t loaded, has_lsp, nops;
    gpsimd_lsp_info lsp;
    char error[GPSIMD_ZY_TEXT];
} gz_core;
typedef struct gz_ready {
    int64_t magic, cgroup;
    char mode[GPSIMD_ZY_MODE];
    char missing[GPSIMD_ZY_TEXT];        /* what is not contained, "" when all is */
    gz_core cores[GPSIMD_ZY_MAX_CORES];
} gz_ready;
/* one stream a core wrote to: fd 1 or 2, bytes written, kept from the start and the end */
typedef struct gz_output { int64_t core, fd, total, head, tail; } gz_output;
/* Per vector: a struct gz_reply, with a memfd of the kept output when
 * noutput > 0 (per output entry, its head bytes then its tail bytes);
 * error not empty: the vector did not run, or what its cores wrote could
 * not be kept, and why. */
typedef struct gz_reply {
    int64_t magic, wait_status, timed_out, oom_kills, pid, noutput;
    gz_output output[2 * GPSIMD_ZY_MAX_CORES];
    char error[GPSIMD_ZY_TEXT];
} gz_reply;

/* ---- the control block: the image's first page (little-endian) ------------
 * The worker writes the header and each run's order (gpsimd_emu.control),
 * a vector's processes the rest (leader_control.c); times are
 * CLOCK_MONOTONIC nanoseconds, states the GPSIMD_ZY_*_ numbers below. */
#define GPSIMD_ZY_CB_SIZE 4096
#define GPSIMD_ZY_CB_MAGIC "GPSIMDCB"  /* gz_control.magic (no NUL) */
#define GPSIMD_ZY_CB_VERSION 1
#define GPSIMD_ZY_CB_ERROR_CAPACITY 1024
#define GPSIMD_ZY_CB_SEM_WORDS 5       /* a run's claim semaphore: a sem_t (40 bytes) */
typedef struct {                       /* a run (a pass) */
    uint32_t state;                    /* GPSIMD_ZY_PASS_* */
    uint32_t faulted;
    uint32_t claimed;                  /* of the cores in order */
    uint32_t ncores;
    uint8_t order[GPSIMD_ZY_MAX_CORES];    /* its cores, in the order they are claimed */
    uint64_t t_start;
    uint64_t t_end;
    uint64_t sem[GPSIMD_ZY_CB_SEM_WORDS];  /* process-shared (sem_init) */
} gz_pass;
typedef struct {                       /* a core in a run: slots[run * MAX_CORES + core] */
    uint32_t state;                    /* 0: idle */
    uint32_t status;                   /* 1: the launcher did not return OK */
    int32_t bind_rc;
    uint32_t job;                      /* the process record of the process that ran it */
    uint64_t t_start;
    uint64_t t_end;
} gz_slot;
typedef struct {                       /* a process of the vector */
    int32_t pid;
    uint32_t pass;
    int32_t wait_status;
    uint32_t state;
} gz_job;
typedef struct {
    char magic[8];                     /* GPSIMD_ZY_CB_MAGIC */
    uint64_t nonce;                    /* the request's */
    uint32_t version;
    uint32_t npasses;
    uint32_t ncores;
    int32_t error_pass;                /* where the model error happened (-1: no run, core) */
    int32_t error_core;
    uint32_t error_len;                /* bytes of error; 0: none */
    uint32_t leader_done;              /* 1: the leader recorded every run */
    char error[GPSIMD_ZY_CB_ERROR_CAPACITY];   /* UTF-8 text of a model error */
    gz_pass passes[GPSIMD_ZY_MAX_RUNS];
    gz_slot slots[GPSIMD_ZY_MAX_RUNS * GPSIMD_ZY_MAX_CORES];
    gz_job jobs[GPSIMD_ZY_MAX_JOBS];
} gz_control;

#define GPSIMD_ZY_SLOT_STARTED 1
#define GPSIMD_ZY_SLOT_DONE 2
#define GPSIMD_ZY_SLOT_BIND_FAILED 3
#define GPSIMD_ZY_PASS_PENDING 0       /* (a zeroed record) */
#define GPSIMD_ZY_PASS_RUNNING 1
#define GPSIMD_ZY_PASS_DONE 2
#define GPSIMD_ZY_PASS_SKIPPED 3
#define GPSIMD_ZY_JOB_RUNNING 1
#define GPSIMD_ZY_JOB_EXITED 2

#endif
