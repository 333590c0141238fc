/* The control block (gpsimd_host/zygote.h, the image's first page) as a
 * vector's processes (leader.c) write it: its records' fields, the claims
 * of a run's cores and a model error (leader_parts.h). */
#define _GNU_SOURCE
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "leader_parts.h"

gz_control *cb;
int cb_ncores;
int cb_run = -1, cb_core = -1;

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the control block is little-endian; this file writes it natively"
#endif

_Static_assert(sizeof(gz_control) <= GPSIMD_ZY_CB_SIZE, "the control block's page");
_Static_assert(sizeof(sem_t) <= sizeof cb->passes[0].sem, "a pass record holds its semaphore");

/* Make the control page writable or read-only (every function here that
 * writes makes it writable first). The page's state is known after each
 * call (only a launch, which always follows cb_protect(0) and is followed
 * by cb_protect(1), could change it), so a call that would change nothing
 * is not made: two mprotect calls per launch, not four. */
static int cb_writable = 1;               /* as mmap() made it */

gz_control *cb_protect(int writable)
{
    if (writable != cb_writable)
        mprotect(cb, GPSIMD_ZY_CB_SIZE, PROT_READ | (writable ? PROT_WRITE : 0));
    cb_writable = writable;
    return cb;
}

void cb_set_pass(int p, uint32_t state)
{
    gz_pass *r = &cb_protect(1)->passes[p];
    r->state = state;
    if (state == GPSIMD_ZY_PASS_RUNNING)
        r->t_start = (uint64_t)gl_now_ns();
    else if (state == GPSIMD_ZY_PASS_DONE || state == GPSIMD_ZY_PASS_SKIPPED)
        r->t_end = (uint64_t)gl_now_ns();
}

void cb_set_slot(int p, int k, uint32_t state, uint32_t status, int32_t bind_rc,
                 uint32_t job, int64_t t0, int64_t t1)
{
    cb_protect(1)->slots[p * GPSIMD_ZY_MAX_CORES + k] = (gz_slot){state, status, bind_rc, job,
                                                                   (uint64_t)t0, (uint64_t)t1};
}

void cb_set_job(int j, int pid, int p, int wait_status, uint32_t state)
{
    cb_protect(1)->jobs[j] = (gz_job){pid, (uint32_t)p, wait_status, state};
}

/* Record a model error (the first one wins), then end the process. */
void cb_model_error(const char *what, int err)
{
    char text[GPSIMD_ZY_CB_ERROR_CAPACITY];    /* (cut to fit, its NUL not recorded) */
    if (err)
        snprintf(text, sizeof text, "device model error: OSError: [Errno %d] %s: %s",
                 err, strerror(err), what);
    else
        snprintf(text, sizeof text, "device model error: %s", what);
    cb_protect(1);
    if (cb->error_len == 0) {
        cb->error_len = (uint32_t)strlen(text);
        memcpy(cb->error, text, cb->error_len);
        cb->error_pass = cb_run;
        cb->error_core = cb_core;
    }
    _exit(GPSIMD_ZY_EXIT_MODEL_ERROR);
}

/* ---- claiming -------------------------------------------------------------- */

/* The next core of run p nobody claimed, or -1. What the control block
 * says is checked before it indexes anything (a kernel may have written
 * over the page): a count or core out of range is a model error. */
int cb_claim(int p, int shared)
{
    gz_pass *r = &cb_protect(1)->passes[p];
    if (shared)
        while (sem_wait((sem_t *)r->sem) != 0)
            ;
    int k = -1;
    uint32_t claimed = r->claimed, n = r->ncores;
    cb_core = -1;                        /* (an error here is no core's) */
    if (n > (uint32_t)cb_ncores || claimed > n)
        cb_model_error("the control block was overwritten (a run's claim count)", 0);
    if (claimed < n) {
        r->claimed = claimed + 1;
        k = r->order[claimed];
        if (k >= cb_ncores)
            cb_model_error("the control block was overwritten (a run's core order)", 0);
    }
    if (shared)
        sem_post((sem_t *)r->sem);
    return k;
}

int cb_unclaimed(int p)
{
    uint32_t claimed = cb->passes[p].claimed, n = cb->passes[p].ncores;
    return n > claimed ? (int)(n - claimed) : 0;
}

int cb_left_running(int index, int p)
{
    for (int k = 0; k < cb_ncores; k++)
        if (cb->slots[p * GPSIMD_ZY_MAX_CORES + k].state == GPSIMD_ZY_SLOT_STARTED
                && cb->slots[p * GPSIMD_ZY_MAX_CORES + k].job == (uint32_t)index)
            return 1;
    return 0;
}
