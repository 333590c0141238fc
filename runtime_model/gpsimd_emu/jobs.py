"""Runs of a vector's cores in several processes at once (the leader's
``parallel`` > 1; stdlib only): jobs, children of the leader, each
claiming cores of one run from the control block (``gpsimd_emu.launch``
runs them).

* Up to ``parallel`` jobs go on at once: the first private run and the two
  fixed-order runs side by side, and a run whose job has gone on for
  ``spread_after`` seconds gets more jobs that claim its remaining cores
  (a fixed-order run never: one job runs it in order).
* The second private run of a single-core vector starts when the first has
  ended and says so.
* A job that dies of a signal (a crash, its own ``SIGALRM`` at the run's
  time limit, the memory cgroup's SIGKILL) or exits inside a launch, and a
  run in which a core faulted, end the vector after that run: the jobs of
  later runs are killed (recorded as cancelled), earlier runs go on to
  their end, so that the first run's outcome is the one reported, whatever
  the timing of processes that run side by side.
"""

from __future__ import annotations

import os
import select
import signal
import time
from typing import Optional

from . import contain, control

__all__ = ["CANCELLED", "EXIT_MODEL_ERROR", "Job", "JobScheduler"]

#: ``wait_status`` of a job the leader killed itself (not the job's fault).
CANCELLED = -2
#: Exit status of a vector's process after a model error (recorded).
EXIT_MODEL_ERROR = 70


class Job:
    """A process (or the leader itself) making part of a run: its record
    index in the control block, its run, pid and pidfd."""

    def __init__(self, index: int, run: int, pid: int, pidfd: Optional[int]):
        self.index, self.run, self.pid, self.pidfd = index, run, pid, pidfd


class JobScheduler:
    """The parallel scheduling of ``gpsimd_emu.launch._Leader`` (a mixin:
    it uses the leader's ``runs``, ``ctl``, ``parallel``, ``spread_after``,
    ``timeout``, ``jobs``, ``live``, ``run_start``, ``ended``,
    ``stop_after`` and ``_need_second``)."""

    def _run_parallel(self) -> None:
        """Runs as jobs, side by side (module text)."""
        first = self.runs[0]
        second = next((r for r in self.runs if r["second"]), None)
        waiting = second if second is not None and self.ncores == 1 else None
        queue = [r for r in self.runs if r is not waiting]
        while True:
            while queue and len(self.live) < self.parallel and self.stop_after is None:
                self._start(queue.pop(0))
            if waiting is not None and first["index"] in self.ended and self.stop_after is None:
                if self._need_second():
                    queue.insert(0, waiting)
                else:
                    self.ctl.set_pass(waiting["index"], control.PASS_SKIPPED, control.now_ns())
                waiting = None
                continue
            if not self.live:
                if queue and self.stop_after is None:
                    continue
                break
            self._wait_step()
        for r in queue + ([waiting] if waiting is not None else []):
            self.ctl.set_pass(r["index"], control.PASS_SKIPPED, control.now_ns())

    def _start(self, r: dict) -> None:
        self.run_start[r["index"]] = time.monotonic()
        self.ctl.set_pass(r["index"], control.PASS_RUNNING, control.now_ns())
        self._spawn(r)

    def _spawn(self, r: dict) -> None:
        """Fork a job for run ``r`` (it claims cores until none is left)."""
        index = len(self.jobs)
        if index >= control.MAX_JOBS:
            raise RuntimeError("too many processes for one vector")
        deadline = self.run_start[r["index"]] + self.timeout
        leader = os.getpid()
        pid = os.fork()
        if pid == 0:
            _job_main(self, r, index, leader, deadline)
        pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                pidfd = None
        self.ctl.set_job(index, pid, r["index"], 0, control.JOB_RUNNING)
        job = Job(index, r["index"], pid, pidfd)
        self.jobs.append(job)
        self.live.append(job)

    def _wait_step(self) -> None:
        """Wait for a job to end, or until a run has gone on long enough to
        be spread over more processes; handle what happened."""
        wait = None
        if len(self.live) < self.parallel and self.stop_after is None:
            spreadable = [j.run for j in self.live
                          if not self._spec(j.run)["ordered"] and self.ctl.unclaimed(j.run) > 0]
            if spreadable:
                started = min(self.run_start[r] for r in spreadable)
                wait = max(0.0, started + self.spread_after - time.monotonic())
        fds = [j.pidfd for j in self.live if j.pidfd is not None]
        if len(fds) == len(self.live):
            try:
                select.select(fds, [], [], wait)
            except InterruptedError:
                pass
        else:                               # no pidfd (old kernel): poll
            time.sleep(0.0005 if wait is None else min(wait, 0.0005))
        self._reap()
        for j in list(self.live):
            if len(self.live) >= self.parallel or self.stop_after is not None:
                break
            if (not self._spec(j.run)["ordered"] and self.ctl.unclaimed(j.run) > 0
                    and time.monotonic() - self.run_start[j.run] >= self.spread_after):
                self._spawn(self._spec(j.run))

    def _spec(self, run: int) -> dict:
        return next(r for r in self.runs if r["index"] == run)

    def _reap(self) -> None:
        """Reap ended processes (jobs, and orphans the namespace hands its
        PID 1). A job that ended badly, or a run that ended with a fault,
        stops the vector after that run: later runs are cancelled (their
        jobs killed) or never start; earlier ones go on to their end, so
        that what is reported is the first run's, whatever the timing."""
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            job = next((j for j in self.live if j.pid == pid), None)
            if job is None:
                continue
            self._forget(job)
            self.ctl.set_job(job.index, pid, job.run, st, control.JOB_EXITED)
            if not (os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0) or self._left_running(job):
                self._stop(job.run)
            elif not any(j.run == job.run for j in self.live) and self.ctl.unclaimed(job.run) == 0:
                self.ended.add(job.run)
                self.ctl.set_pass(job.run, control.PASS_DONE, control.now_ns())
                if self.ctl.pass_record(job.run)["faulted"]:
                    self._stop(job.run)

    def _stop(self, run: int) -> None:
        """No run after ``run`` goes on: cancel the jobs of later runs."""
        self.stop_after = run if self.stop_after is None else min(self.stop_after, run)
        later = [j for j in self.live if j.run > self.stop_after]
        for j in later:
            try:
                os.kill(j.pid, signal.SIGKILL)
            except OSError:
                pass
        for j in later:
            try:
                os.waitpid(j.pid, 0)
            except ChildProcessError:
                pass
            self._forget(j)
            self.ctl.set_job(j.index, j.pid, j.run, CANCELLED, control.JOB_EXITED)

    def _forget(self, job: Job) -> None:
        self.live.remove(job)
        if job.pidfd is not None:
            os.close(job.pidfd)
            job.pidfd = None


def _job_main(leader, run: dict, index: int, leader_pid: int, deadline: float) -> None:
    """A job: claims the cores of ``run`` and launches each; never returns.
    Exit 0 after the last core (faults are in the reports), 70 after a
    model error (recorded)."""
    code = EXIT_MODEL_ERROR
    try:
        contain.die_with_parent(leader_pid)
        contain.set_name("gpsimd-core")
        leader.run_cores(run, index, deadline)
        code = 0
    finally:
        os._exit(code)
