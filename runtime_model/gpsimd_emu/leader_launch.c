/* A core's launch in a vector's processes (leader_parts.h, for leader.c):
 * its binding at this process's addresses, fresh argument bytes, its
 * output pipes at fds 1 and 2, the launcher, its slot's records, and then
 * the signals the leader relies on set again (a kernel runs in this
 * process). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpsimd_host/abi.h"
#include "leader_parts.h"

typedef int (*launcher_fn)(void);
typedef int (*binder_fn)(const gpsimd_core_binding *);

static const struct gl_request *R;
static const struct gz_vector *V;    /* &R->v */
static gpsimd_core_binding bindings[GPSIMD_ZY_MAX_RUNS][GPSIMD_ZY_MAX_CORES];
/* the arguments and the output descriptor as the worker wrote them, and
   the copies a launch gets */
static unsigned char *arg_stream, *out_desc, *arg_buf, *ret_buf;

static void *alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        cb_model_error("MemoryError: the leader's buffers do not fit its memory limit", 0);
    return p;
}

/* The binding bytes with this process's host addresses (the file offsets
 * the worker wrote plus the image's base). */
static void rebase(gpsimd_core_binding *b, uint64_t base)
{
    b->scratch_host += base;
    b->dataram_host += base;
    b->printf_host += base;
    b->report_host += base;
    uint32_t n = b->num_regions < GPSIMD_MAX_REGIONS ? b->num_regions : GPSIMD_MAX_REGIONS;
    for (uint32_t i = 0; i < n; i++)
        b->regions[i].host += base;
    if (b->read_map_host)
        b->read_map_host += base;
}

/* What the leader relies on, set again after each launch (a kernel runs in
 * this process): SIGCHLD at its default, so that a helper's end waits for
 * waitpid (SIG_IGN or SA_NOCLDWAIT has Linux reap it, its status lost), and
 * SIGALRM, the run's time limit, ending the process. */
void gl_own_signals(void)
{
    static const int own[] = {SIGCHLD, SIGALRM};
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < 2; i++) {
        sigaction(own[i], &(struct sigaction){.sa_handler = SIG_DFL}, NULL);
        sigaddset(&set, own[i]);
    }
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* Core k's stdout and stderr in run p: its own pipes (at fds 3 + 2k and
 * 4 + 2k, where gl_fork_leader put them), which the zygote drains, in the
 * vector's first run; /dev/null (at 3 + 2 * ncores) in the runs after it,
 * so that what a vector's cores wrote is what one run of them wrote. */
static void to_core_output(int k, int p)
{
    static int current = -1;
    int fd = p == (int)V->runs[0].index ? 3 + 2 * k : 3 + 2 * (int)V->ncores;
    if (fd == current)
        return;
    dup2(fd, 1);
    dup2(fd == 3 + 2 * k ? fd + 1 : fd, 2);
    current = fd;
}

/* The image's gaps (gpsimd_emu/image.py, the page after the output
 * descriptor: a u64 count, then (file offset, bytes) pairs) made PROT_NONE:
 * a kernel's stray write that runs on from a tensor faults there before it
 * reaches the model's records (printf rings, reports, read maps). */
static void protect_gaps(unsigned char *image)
{
    const uint64_t *table = (const uint64_t *)(image + V->args_at + 2 * V->page);
    uint64_t n = table[0], most = ((uint64_t)V->page / 8 - 1) / 2;
    if (n > most)
        cb_model_error("a gap table longer than its page", 0);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t at = table[1 + 2 * i], len = table[2 + 2 * i];
        if (at % (uint64_t)V->page || len % (uint64_t)V->page || at > (uint64_t)V->size
                || len > (uint64_t)V->size - at)
            cb_model_error("a gap that is not whole pages of the image", 0);
        if (mprotect(image + at, (size_t)len, PROT_NONE) != 0)
            cb_model_error("mprotect of a gap of the image", errno);
    }
}

/* Before the runs (the image mapped at req->image, the cores' pipes at fds
 * 3..): each run's bindings, the arguments, fds 1 and 2 at core 0's pipes. */
void gl_launches_begin(const struct gl_request *req)
{
    unsigned char *image = req->image;
    R = req;
    V = &req->v;
    for (int i = 0; i < V->nruns; i++)
        for (int k = 0, p = (int)V->runs[i].index; k < V->ncores; k++) {
            int64_t at = V->bindings_at + (p * V->ncores + k) * V->binding_size;
            memcpy(&bindings[p][k], image + at, sizeof(gpsimd_core_binding));
            rebase(&bindings[p][k], (uint64_t)(uintptr_t)image);
        }
    arg_stream = alloc((size_t)V->arg_len);
    memcpy(arg_stream, image + V->args_at, (size_t)V->arg_len);
    out_desc = alloc((size_t)V->desc_len);
    memcpy(out_desc, image + V->args_at + V->page, (size_t)V->desc_len);
    arg_buf = alloc((size_t)V->arg_len);
    ret_buf = alloc((size_t)V->desc_len);
    protect_gaps(image);
    /* the bindings, arguments and gap table, read: PROT_NONE from here on (no
       launch reads them: each has its copies), so that the control page is a
       mapping of its own, which each launch's two cb_protect calls change
       without splitting and merging the image's mapping */
    uint64_t page = (uint64_t)V->page, from = ((uint64_t)V->bindings_at + page - 1) / page * page,
             to = (uint64_t)V->args_at + 3 * page;
    if (to > (uint64_t)V->size || from > to)
        cb_model_error("the image's bindings and arguments are not within it", 0);
    if (to > from && mprotect(image + from, (size_t)(to - from), PROT_NONE) != 0)
        cb_model_error("mprotect of the image's bindings", errno);
    to_core_output(0, (int)V->runs[0].index);
}

/* Launch core k in run p (its slot recorded as started, then as done), in
 * the run's own working folder. */
void gl_launch(int p, int k, int index)
{
    static int in_dir = -1;
    if (p != in_dir) {
        sb_run_dir(p);
        in_dir = p;
    }
    cb_run = p;
    cb_core = k;
    int64_t t0 = gl_now_ns();
    cb_set_slot(p, k, GPSIMD_ZY_SLOT_STARTED, 0, 0, (uint32_t)index, t0, 0);
    cb_protect(0);
    gpsimd_core_binding *b = &bindings[p][k];
    /* fresh argument bytes for each launch (an earlier kernel may have
       written over them) */
    memcpy(arg_buf, arg_stream, (size_t)V->arg_len);
    memcpy(ret_buf, out_desc, (size_t)V->desc_len);
    b->arg_stream_host = (uint64_t)(uintptr_t)arg_buf;
    b->retval_host = (uint64_t)(uintptr_t)ret_buf;
    int rc = ((binder_fn)R->binders[p][k])(b);
    if (rc != 0) {
        cb_set_slot(p, k, GPSIMD_ZY_SLOT_BIND_FAILED, 0, rc, (uint32_t)index, t0, gl_now_ns());
        cb_protect(1)->passes[p].faulted = 1;
        return;
    }
    to_core_output(k, p);
    int64_t t1 = gl_now_ns();
    int status = ((launcher_fn)R->launchers[p][k])();
    int64_t t2 = gl_now_ns();
    gl_own_signals();
    fflush(NULL);                          /* what the core's stdio holds is the core's */
    gpsimd_core_report *report = (gpsimd_core_report *)(uintptr_t)b->report_host;
    int ok = status == GPSIMD_STATUS_OK && report->status == GPSIMD_STATUS_OK;
    cb_set_slot(p, k, GPSIMD_ZY_SLOT_DONE, status != GPSIMD_STATUS_OK, 0, (uint32_t)index, t1, t2);
    if (!ok)
        cb_protect(1)->passes[p].faulted = 1;
}

/* Core k's binding in run p as its launches get it (read before the runs:
 * what a kernel wrote over the image's copy changes nothing). */
const gpsimd_core_binding *gl_binding(int p, int k)
{
    return &bindings[p][k];
}
