/* The leader's parts, for leader.c only (p is a run, k a core, j or index
 * a process record; times in CLOCK_MONOTONIC nanoseconds): the control
 * block (gpsimd_host/zygote.h) as a vector's processes write it
 * (leader_control.c), read through cb: the page is writable only while no
 * kernel runs (cb_protect, which returns cb; each writer here makes it
 * writable); and a core's launch (leader_launch.c): gl_launches_begin once
 * per vector's leader, before its runs, then gl_launch per core and run,
 * in the leader or a helper it forked (each has its own copies). */
#ifndef GPSIMD_EMU_LEADER_PARTS_H
#define GPSIMD_EMU_LEADER_PARTS_H

#include "leader.h"

/* leader_control.c */
extern gz_control *cb;                   /* the image's first page */
extern int cb_ncores;                    /* the vector's cores */
extern int cb_run, cb_core;              /* where a model error happens (-1: no run, core) */
gz_control *cb_protect(int writable);
void cb_set_pass(int p, uint32_t state);    /* (its start or end: now) */
void cb_set_slot(int p, int k, uint32_t state, uint32_t status, int32_t bind_rc,
                 uint32_t job, int64_t t0, int64_t t1);
void cb_set_job(int j, int pid, int p, int wait_status, uint32_t state);
__attribute__((noreturn)) void cb_model_error(const char *what, int err);
int cb_claim(int p, int shared);
int cb_unclaimed(int p);
int cb_left_running(int index, int p);

/* leader_launch.c */
void gl_launches_begin(const struct gl_request *req);
void gl_launch(int p, int k, int index);
void gl_own_signals(void);
const gpsimd_core_binding *gl_binding(int p, int k);   /* at this process's addresses */

#endif
