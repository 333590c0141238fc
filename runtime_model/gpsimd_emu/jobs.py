"""Helpers: more processes for a run of a vector's cores that takes long
(the leader's ``parallel`` > 1; stdlib only).

The leader (``gpsimd_emu.launch``) makes every run itself, one core after
another. Between two cores of a run it may fork helpers, when the run has
gone on for ``spread_after`` seconds (or at once when the worker says the
op's cores take long: ``spread_now``), while cores of it are unclaimed:
up to ``parallel - 1`` of them, each claiming cores of that run from the
control block (under its semaphore) until none is left. A helper is a fork
of the leader at that moment, so the copies of the run's objects it uses
are those of cores nobody ran yet: pristine. A run in a fixed order is
never shared. Before the next run the leader waits for the helpers; one
that died of a signal (a crash, its own ``SIGALRM`` at the run's time
limit, the memory cgroup's SIGKILL) or exited inside a launch stops the
vector after that run, like a fault.
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
        if self.parallel < 2 or run["ordered"] or self._helping:
            return
        if not (self.req.get("spread_now") or time.monotonic() - started >= self.spread_after):
            return
        p = run["index"]
        want = min(self.parallel - 1, self.ctl.unclaimed(p))
        for _ in range(want):
            index = len(self.jobs)
            if index >= control.MAX_JOBS:
                break
            leader = os.getpid()
            pid = os.fork()
            if pid == 0:
                _helper_main(self, run, index, leader, deadline)
            self.ctl.protect(True)
            self.ctl.set_job(index, pid, p, 0, control.JOB_RUNNING)
            self.jobs.append(Job(index, p, pid))
            self._helping.append(self.jobs[-1])
        self.ctl.protect(False)

    def _wait_helpers(self, run: dict) -> bool:
        """Wait for the helpers of ``run``; record how each ended. Returns
        True when one ended badly (the vector stops after this run)."""
        bad = False
        for job in self._helping:
            while True:
                try:
                    _, st = os.waitpid(job.pid, 0)
                    break
                except InterruptedError:
                    continue
                except ChildProcessError:
                    st = 0
                    break
            self.ctl.protect(True)
            self.ctl.set_job(job.index, job.pid, job.run, st, control.JOB_EXITED)
            if not (os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0) or self._left_running(job):
                bad = True
        self._helping = []
        _reap_orphans()
        return bad


def _reap_orphans() -> None:
    """Reap any other ended child (a kernel's, handed to us)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _helper_main(leader, run: dict, index: int, leader_pid: int, deadline: float) -> None:
    """A helper: claims cores of ``run`` and launches each; never returns.
    Exit 0 after the last core (faults are in the reports), 70 after a
    model error (recorded)."""
    code = EXIT_MODEL_ERROR
    try:
        contain.die_with_parent(leader_pid)
        contain.set_name("gpsimd-core")
        leader._helping = [None]         # a helper forks no helpers
        leader.run_cores(run, index, deadline)
        code = 0
    finally:
        os._exit(code)
