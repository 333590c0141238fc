/* The control block (gpsimd_host/zygote.h, the image's first page) as a
 * vector's processes (leader.c) write it: its records' fields, the claims
 * of a run's cores and a model error (leader_control.h). */
#define _GNU_SOURCE
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpsimd_host/zygote.h"
#include "leader.h"
#include "leader_control.h"

unsigned char *cb_page;
int cb_ncores;
int cb_run = -1, cb_core = -1;

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the control block is little-endian; this file writes it natively"
#endif

_Static_assert(GPSIMD_ZY_CB_JOBS + GPSIMD_ZY_MAX_JOBS * GPSIMD_ZY_CB_JOB_SIZE <= GPSIMD_ZY_CB_SIZE,
               "the control block's page");
_Static_assert(GPSIMD_ZY_CB_SEM + sizeof(sem_t) <= GPSIMD_ZY_CB_PASS_SIZE,
               "a pass record holds its semaphore");

static void put32(size_t at, uint32_t v) { memcpy(cb_page + at, &v, 4); }
static void put64(size_t at, uint64_t v) { memcpy(cb_page + at, &v, 8); }
static uint32_t get32(size_t at) { uint32_t v; memcpy(&v, cb_page + at, 4); return v; }
static size_t pass_at(int p) { return GPSIMD_ZY_CB_PASSES + (size_t)p * GPSIMD_ZY_CB_PASS_SIZE; }
static size_t slot_at(int p, int k)
{
    return GPSIMD_ZY_CB_SLOTS + ((size_t)p * GPSIMD_ZY_MAX_CORES + k) * GPSIMD_ZY_CB_SLOT_SIZE;
}

/* Make the control page writable or read-only (every function here that
 * writes makes it writable first). The page's state is known after each
 * call (only a launch, which always follows cb_protect(0) and is followed
 * by cb_protect(1), could change it), so a call that would change nothing
 * is not made: two mprotect calls per launch, not four. */
static int cb_writable = 1;               /* as mmap() made it */

void cb_protect(int writable)
{
    if (writable == cb_writable)
        return;
    mprotect(cb_page, GPSIMD_ZY_CB_SIZE, PROT_READ | (writable ? PROT_WRITE : 0));
    cb_writable = writable;
}

void cb_set_pass(int p, uint32_t state, int64_t t)
{
    cb_protect(1);
    put32(pass_at(p), state);
    if (state == GPSIMD_ZY_PASS_RUNNING)
        put64(pass_at(p) + 24, (uint64_t)t);
    else if (state == GPSIMD_ZY_PASS_DONE || state == GPSIMD_ZY_PASS_SKIPPED)
        put64(pass_at(p) + 32, (uint64_t)t);
}

void cb_mark_faulted(int p) { cb_protect(1); put32(pass_at(p) + 4, 1); }
int cb_faulted(int p) { return get32(pass_at(p) + 4) != 0; }
uint32_t cb_pass_state(int p) { return get32(pass_at(p)); }

void cb_set_slot(int p, int k, uint32_t state, uint32_t status, int32_t bind_rc,
                 uint32_t job, int64_t t0, int64_t t1)
{
    uint32_t words[4] = {state, status, (uint32_t)bind_rc, job};
    int64_t times[2] = {t0, t1};
    cb_protect(1);
    memcpy(cb_page + slot_at(p, k), words, sizeof words);
    memcpy(cb_page + slot_at(p, k) + sizeof words, times, sizeof times);
}

void cb_set_job(int j, int pid, int p, int wait_status, uint32_t state)
{
    uint32_t words[4] = {(uint32_t)pid, (uint32_t)p, (uint32_t)wait_status, state};
    cb_protect(1);
    memcpy(cb_page + GPSIMD_ZY_CB_JOBS + (size_t)j * GPSIMD_ZY_CB_JOB_SIZE, words, sizeof words);
}

/* Record a model error (the first one wins), then end the process. */
void cb_model_error(const char *what, int err)
{
    char text[GPSIMD_ZY_CB_ERROR_CAPACITY];
    int n;
    if (err)
        n = snprintf(text, sizeof text, "device model error: OSError: [Errno %d] %s: %s",
                     err, strerror(err), what);
    else
        n = snprintf(text, sizeof text, "device model error: %s", what);
    if (n < 0)
        n = 0;
    if (n > GPSIMD_ZY_CB_ERROR_CAPACITY)
        n = GPSIMD_ZY_CB_ERROR_CAPACITY;
    if (cb_page == NULL) {
        fprintf(stderr, "gpsimd_emu: device model error in a vector's process: %s\n",
                text + strlen("device model error: "));
        _exit(GPSIMD_ZY_EXIT_MODEL_ERROR);
    }
    cb_protect(1);
    if (get32(GPSIMD_ZY_CB_ERROR_FIELDS + 8) == 0) {
        memcpy(cb_page + GPSIMD_ZY_CB_ERROR, text, (size_t)n);
        put32(GPSIMD_ZY_CB_ERROR_FIELDS, (uint32_t)cb_run);
        put32(GPSIMD_ZY_CB_ERROR_FIELDS + 4, (uint32_t)cb_core);
        put32(GPSIMD_ZY_CB_ERROR_FIELDS + 8, (uint32_t)n);
    }
    _exit(GPSIMD_ZY_EXIT_MODEL_ERROR);
}

/* ---- claiming -------------------------------------------------------------- */

/* The next core of run p nobody claimed, or -1. What the control block
 * says is checked before it indexes anything (a kernel may have written
 * over the page): a count or core out of range is a model error. */
int cb_claim(int p, int shared)
{
    sem_t *sem = (sem_t *)(cb_page + pass_at(p) + GPSIMD_ZY_CB_SEM);
    cb_protect(1);
    if (shared)
        while (sem_wait(sem) != 0)
            ;
    int k = -1;
    uint32_t claimed = get32(pass_at(p) + 8), n = get32(pass_at(p) + 12);
    if (n > (uint32_t)cb_ncores || claimed > n) {
        cb_core = -1;
        cb_model_error("the control block was overwritten (a run's claim count)", 0);
    }
    if (claimed < n) {
        put32(pass_at(p) + 8, claimed + 1);
        k = cb_page[pass_at(p) + 16 + claimed];
        if (k >= cb_ncores) {
            cb_core = -1;
            cb_model_error("the control block was overwritten (a run's core order)", 0);
        }
    }
    if (shared)
        sem_post(sem);
    return k;
}

int cb_unclaimed(int p)
{
    uint32_t claimed = get32(pass_at(p) + 8), n = get32(pass_at(p) + 12);
    return n > claimed ? (int)(n - claimed) : 0;
}

int cb_left_running(int index, int p)
{
    for (int k = 0; k < cb_ncores; k++)
        if (get32(slot_at(p, k)) == GPSIMD_ZY_SLOT_STARTED
                && get32(slot_at(p, k) + 12) == (uint32_t)index)
            return 1;
    return 0;
}

/* The leader's last record: the vector's end (its runs all recorded). */
void cb_leader_done(void)
{
    cb_protect(1);
    put32(GPSIMD_ZY_CB_LEADER_DONE, 1);
}
