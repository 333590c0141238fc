/* A core's launch (leader_launch.c), for leader.c only: gl_launches_begin
 * once per vector's leader, before its runs; then gl_launch per core and
 * run, in the leader or a helper it forked (each has its own copies).
 * p is a run, k a core, index the process record of the launching process. */
#ifndef GPSIMD_EMU_LEADER_LAUNCH_H
#define GPSIMD_EMU_LEADER_LAUNCH_H

#include "leader.h"

void gl_launches_begin(const struct gl_request *req, unsigned char *image);
void gl_launch(int p, int k, int index);
void gl_own_signals(void);

#endif
