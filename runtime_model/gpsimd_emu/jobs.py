"""Helpers: more processes for the runs of a vector's cores when they take
long (the leader's ``parallel`` > 1; stdlib only).

The leader (``gpsimd_emu.launch``) makes every run itself, one core after
another. Between two cores of a run (or before the first, when the worker
says the op's cores take long: ``spread_now``), once the run has gone on
for ``spread_after`` seconds, it forks helpers, up to ``parallel - 1`` in
all: first one for each later run that does not wait for this one (the
runs of a multicore vector: the second private run and the fixed-order
runs), which makes that whole run; then, for a run not in a fixed order,
helpers that claim its remaining cores from the control block (under its
semaphore). A helper is a fork of the leader at that moment, so the
copies of the objects it uses (one copy per run) are those nobody ran
yet: pristine. The leader waits for a run's core helpers before its next
run and for the whole-run helpers at the end; one that died of a signal
(a crash, its own ``SIGALRM`` at the run's time limit, the memory
cgroup's SIGKILL) or exited inside a launch stops the vector after its
run, like a fault (helpers of later runs are killed: cancelled).
"""

from __future__ import annotations

import os
import time
from . import contain, control

__all__ = ["CANCELLED", "EXIT_MODEL_ERROR", "Job", "Helpers"]

#: ``wait_status`` of a job the leader killed itself (not the job's fault).
CANCELLED = -2
#: Exit status of a vector's process after a model error (recorded).
EXIT_MODEL_ERROR = 70


class Job:
    """A process (or the leader itself) making part of a run: its record
    index in the control block, its run and pid."""

    def __init__(self, index: int, run: int, pid: int):
        self.index, self.run, self.pid = index, run, pid


class Helpers:
    """The leader's helpers (a mixin of ``gpsimd_emu.launch._Leader``: it
    uses the leader's ``ctl``, ``parallel``, ``spread_after``, ``jobs``,
    ``run_cores`` and ``_left_running``)."""

    def _maybe_help(self, run: dict, started: float, deadline: float) -> None:
        """Between two cores of ``run``: fork helpers when it is time."""
        if self.parallel < 2 or self._helping or self.is_helper:
            return
        if not (self.req.get("spread_now") or time.monotonic() - started >= self.spread_after):
            return
        free = self.parallel - 1 - self._whole_running()
        for later in self.runs:                 # whole runs that need not wait for this one
            if free <= 0:
                break
            if (later["index"] > run["index"] and self.ncores > 1
                    and later["index"] not in self._whole and not self._started(later)):
                self._fork(later, whole=True)
                free -= 1
        if not run["ordered"]:
            for _ in range(min(free, self.ctl.unclaimed(run["index"]))):
                self._fork(run, whole=False, deadline=deadline)
        self.ctl.protect(False)

    def _whole_running(self) -> int:
        """Whole-run helpers still going on (the ended ones are reaped and
        their status kept for ``_wait_whole``)."""
        n = 0
        for p, job in self._whole.items():
            if p in self._whole_status:
                continue
            try:
                pid, st = os.waitpid(job.pid, os.WNOHANG)
            except ChildProcessError:
                pid, st = job.pid, 0
            if pid:
                self._whole_status[p] = st
            else:
                n += 1
        return n

    def _started(self, run: dict) -> bool:
        return self.ctl.pass_record(run["index"])["state"] != control.PASS_PENDING

    def _fork(self, run: dict, whole: bool, deadline: float = 0.0) -> None:
        """A helper for all of ``run`` (``whole``) or for its remaining cores."""
        index = len(self.jobs)
        if index >= control.MAX_JOBS:
            return
        p = run["index"]
        self.ctl.protect(True)
        if whole:                                # claimed before the fork
            self.ctl.set_pass(p, control.PASS_RUNNING, control.now_ns())
        leader = os.getpid()
        pid = os.fork()
        if pid == 0:
            _helper_main(self, run, index, leader, deadline, whole)
        self.ctl.protect(True)
        self.ctl.set_job(index, pid, p, 0, control.JOB_RUNNING)
        self.jobs.append(Job(index, p, pid))
        if whole:
            self._whole[p] = self.jobs[-1]
        else:
            self._helping.append(self.jobs[-1])

    def _wait_whole(self) -> None:
        """Wait for the whole-run helpers (at the leader's end): a bad end
        stops the vector after its run; helpers of runs after a stop are
        killed (cancelled)."""
        for p in sorted(self._whole):
            job = self._whole[p]
            if self.stop_after is not None and p > self.stop_after:
                try:
                    os.kill(job.pid, 9)
                except OSError:
                    pass
            st = self._whole_status[p] if p in self._whole_status else _wait_pid(job.pid)
            self.ctl.protect(True)
            if self.stop_after is not None and p > self.stop_after:
                self.ctl.set_job(job.index, job.pid, p, CANCELLED, control.JOB_EXITED)
                continue
            self.ctl.set_job(job.index, job.pid, p, st, control.JOB_EXITED)
            rec = self.ctl.pass_record(p)
            if (not (os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0) or self._left_running(job)
                    or rec["faulted"]):
                self.stop_after = p if self.stop_after is None else min(self.stop_after, p)
        self._whole, self._whole_status = {}, {}
        _reap_orphans()

    def _wait_helpers(self, run: dict) -> bool:
        """Wait for the helpers of ``run``; record how each ended. Returns
        True when one ended badly (the vector stops after this run)."""
        bad = False
        for job in self._helping:
            st = _wait_pid(job.pid)
            self.ctl.protect(True)
            self.ctl.set_job(job.index, job.pid, job.run, st, control.JOB_EXITED)
            if not (os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0) or self._left_running(job):
                bad = True
        self._helping = []
        _reap_orphans()
        return bad


def _wait_pid(pid: int) -> int:
    """The wait status of child ``pid`` (0 if it is not ours)."""
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0


def _reap_orphans() -> None:
    """Reap any other ended child (a kernel's, handed to us)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _helper_main(leader, run: dict, index: int, leader_pid: int, deadline: float,
                 whole: bool) -> None:
    """A helper: makes the whole of ``run``, or claims its remaining cores,
    launching each; never returns. Exit 0 after the last core (faults are
    in the reports), 70 after a model error (recorded)."""
    code = EXIT_MODEL_ERROR
    try:
        contain.die_with_parent(leader_pid)
        contain.set_name("gpsimd-core")
        leader.is_helper = True          # a helper forks no helpers
        leader._helping, leader._whole, leader._whole_status = [], {}, {}
        if whole:
            leader.make_run(run, index)
        else:
            leader.run_cores(run, index, deadline)
        code = 0
    except BaseException as e:       # a model bug: recorded, never a hang
        try:
            leader.ctl.protect(True)
            leader.ctl.set_error(run["index"], -1, f"device model error: {type(e).__name__}: {e}")
        except BaseException:
            pass
    finally:
        os._exit(code)
