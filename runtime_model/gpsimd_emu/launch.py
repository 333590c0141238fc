"""What runs in a vector's processes (stdlib and ctypes only; forked from
the zygote, ``gpsimd_emu.zygote``, so every core object's globals are as
``dlopen`` left them).

The vector's first process, the *leader* (in its own process group,
inside the zygote's PID namespace where one can be made), maps the device
image, then schedules the runs of the cores (``gpsimd_emu.image.RunSpec``)
as *jobs*: processes that each claim cores of one run from the control
block and launch them one after another, each run in processes that ran
its own copy of every core object (the zygote loads one per run), so each
run starts from globals no launch touched. With ``parallel`` 1 the leader
makes every run itself, one after another: a vector costs one fork.
Otherwise jobs, children of the leader (which then runs no kernel), make
the runs:

* Up to ``parallel`` jobs go on at once: the first private run and the two
  fixed-order runs side by side, and a run whose job has gone on for
  ``spread_after`` seconds gets more jobs that claim its remaining cores
  (a fixed-order run never: one job runs it in order).
* The second private run starts when the first has ended and says so
  (multicore: always; single-core: an element still holding the poison,
  or the report flags ``TCM_USED``/``EMPTY_USED``/``OUTPUT_READ``).
* A job that dies of a signal (a crash, its own ``SIGALRM`` at the run's
  time limit, the memory cgroup's SIGKILL) or exits inside a launch, and a
  run in which a core faulted, end the vector after that run: the jobs of
  later runs are killed (recorded as cancelled), earlier runs go on to
  their end (so that the first run's outcome is the one reported, whatever
  the timing of processes that run side by side).

Everything the model reads comes back through the image (control block,
reports, outputs); the leader exits 0 after recording its own end, 70
after recording a model error.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import select
import signal
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

from . import abi, contain, control

__all__ = ["VectorContext", "leader_main", "EXIT_MODEL_ERROR", "CANCELLED"]

EXIT_MODEL_ERROR = 70
#: ``wait_status`` of a job the leader killed itself (not the job's fault).
CANCELLED = -2

_BINDING_HOST_FIELDS = ("scratch_host", "dataram_host", "printf_host", "report_host")


class VectorContext:
    """What the zygote hands a vector's leader (in memory, through fork).

    Attributes:
        request: the worker's request (``DeviceImage.request()`` plus
            ``op``, ``timeout``, ``parallel``, ``spread_after``,
            ``data_limit``).
        image_fd: the image memfd (closed once mapped).
        launchers: ``launchers[run][core]``: the op's launcher (``int
            (*)()``) in that run's copy of the core object.
        binders: ``binders[run][core]``: that copy's ``gpsimd_bind_core``
            (called with ``ctypes.byref(binding)``).
        zygote: the zygote's pid (the leader dies with it).
    """

    def __init__(self, request: dict, image_fd: int,
                 launchers: Sequence[Sequence[Callable[[], int]]],
                 binders: Sequence[Sequence[Callable[[abi.GpsimdCoreBinding], int]]],
                 zygote: int):
        self.request = request
        self.image_fd = image_fd
        self.launchers = list(launchers)
        self.binders = list(binders)
        self.zygote = zygote


class _Job:
    def __init__(self, index: int, run: int, pid: int, pidfd: Optional[int]):
        self.index, self.run, self.pid, self.pidfd = index, run, pid, pidfd


def leader_main(ctx: VectorContext) -> None:
    """The leader: never returns (``os._exit``)."""
    code = EXIT_MODEL_ERROR
    ctl = None
    try:
        contain.die_with_parent(ctx.zygote)
        contain.set_name("gpsimd-vector")
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        req = ctx.request
        mm = mmap.mmap(ctx.image_fd, req["size"], flags=mmap.MAP_SHARED,
                       prot=mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(ctx.image_fd)       # no descriptor leads back into the image
        base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        ctl = control.ControlBlock(mm, 0, base)
        os.closerange(3, 1 << 16)    # nothing of the model's is reachable through an fd
        contain.limit_data(int(req.get("data_limit", 0)))
        _Leader(ctx, mm, base, ctl).run()
        ctl.set_leader_done()
        code = 0
    except BaseException as e:  # a model bug: recorded, never a hang
        if ctl is None:
            print(f"gpsimd_emu: device model error in a vector's process: "
                  f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        else:
            try:
                ctl.protect(True)
                ctl.set_error(-1, -1, f"device model error: {type(e).__name__}: {e}")
            except BaseException:
                pass
    finally:
        os._exit(code)


class _Leader:
    def __init__(self, ctx: VectorContext, mm: mmap.mmap, base: int, ctl: control.ControlBlock):
        self.ctx, self.mm, self.base, self.ctl = ctx, mm, base, ctl
        req = ctx.request
        self.req = req
        self.runs = req["runs"]
        self.ncores = req["ncores"]
        self.parallel = max(1, int(req.get("parallel", 1)))
        self.spread_after = float(req.get("spread_after", 0.02))
        self.timeout = float(req["timeout"])
        # every binding and the argument bytes, copied out before any kernel runs
        size = req["binding_size"]
        self.bindings: Dict[tuple, abi.GpsimdCoreBinding] = {}
        for r in self.runs:
            for k in range(self.ncores):
                at = req["bindings_at"] + (r["index"] * self.ncores + k) * size
                b = abi.GpsimdCoreBinding.from_buffer_copy(mm, at)
                self._rebase(b)
                self.bindings[(r["index"], k)] = b
        a = req["args_at"]
        self.arg_stream = bytes(mm[a:a + req["arg_len"]])
        self.out_desc = bytes(mm[a + req["page"]:a + req["page"] + req["desc_len"]])
        self.jobs: List[_Job] = []
        self.live: List[_Job] = []
        self.run_start: Dict[int, float] = {}
        self.ended: set = set()
        self.stop_after: Optional[int] = None

    def _rebase(self, b: abi.GpsimdCoreBinding) -> None:
        for i in range(b.num_regions):
            b.regions[i].host += self.base
        for name in _BINDING_HOST_FIELDS:
            setattr(b, name, getattr(b, name) + self.base)
        if b.read_map_host:
            b.read_map_host += self.base

    # ---- scheduling ----------------------------------------------------

    def run(self) -> None:
        """Every run of the request, as the module text describes."""
        if self.parallel == 1:
            self._run_serial()
        else:
            self._run_parallel()

    def _run_serial(self) -> None:
        """Every run in the leader, one after another; a run that ended
        with a fault (or inside a launch) lets no later run start."""
        second = next((r for r in self.runs if r["second"]), None)
        for r in self.runs:
            if r is second and self.ncores == 1 and not self._need_second():
                self.ctl.set_pass(r["index"], control.PASS_SKIPPED, control.now_ns())
                continue
            if self.stop_after is not None:
                self.ctl.set_pass(r["index"], control.PASS_SKIPPED, control.now_ns())
                continue
            self._run_here(r)

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

    def _run_here(self, r: dict) -> None:
        """Make run ``r`` in the leader itself. A crash or the time limit
        ends the leader, which the zygote reports."""
        self.run_start[r["index"]] = time.monotonic()
        self.ctl.set_pass(r["index"], control.PASS_RUNNING, control.now_ns())
        index = len(self.jobs)
        self.jobs.append(_Job(index, r["index"], os.getpid(), None))
        self.ctl.set_job(index, os.getpid(), r["index"], 0, control.JOB_RUNNING)
        _run_cores(self, r, index, self.run_start[r["index"]] + self.timeout)
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.ctl.protect(True)
        self.ctl.set_job(index, os.getpid(), r["index"], 0, control.JOB_EXITED)
        if self._left_running(self.jobs[index]):
            self.stop_after = r["index"]
            return
        self.ended.add(r["index"])
        self.ctl.set_pass(r["index"], control.PASS_DONE, control.now_ns())
        if self.ctl.pass_record(r["index"])["faulted"]:
            self.stop_after = r["index"]

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
        job = _Job(index, r["index"], pid, pidfd)
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

    def _left_running(self, job: _Job) -> bool:
        """Did the job end (exit 0: a kernel's exit()) inside a launch?"""
        return any(s["state"] == control.SLOT_STARTED and s["job"] == job.index
                   for s in (self.ctl.slot(job.run, k) for k in range(self.ncores)))

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

    def _forget(self, job: _Job) -> None:
        self.live.remove(job)
        if job.pidfd is not None:
            os.close(job.pidfd)
            job.pidfd = None

    def _need_second(self) -> bool:
        """After the first run of a single-core vector: does the second run
        have anything to decide? (An element still holding the poison, or
        memory the kernel may have read before writing.)"""
        first = self.runs[0]["index"]
        if self.ctl.pass_record(first)["faulted"]:
            return False
        report = abi.GpsimdCoreReport.from_address(self.bindings[(first, 0)].report_host)
        if report.flags & (abi.REPORT_TCM_USED | abi.REPORT_EMPTY_USED | abi.REPORT_OUTPUT_READ):
            return True
        scan = self.req.get("scan")
        if not scan:
            return True
        at, nbytes, itemsize = scan
        pattern = bytes([self.runs[0]["poison"]]) * itemsize
        pos = self.mm.find(pattern, at, at + nbytes)
        while pos >= 0:
            if (pos - at) % itemsize == 0:
                return True
            pos = self.mm.find(pattern, pos + 1, at + nbytes)
        return False


def _job_main(leader: _Leader, run: dict, index: int, leader_pid: int, deadline: float) -> None:
    """A job: claims the cores of ``run`` and launches each; never returns.
    Exit 0 after the last core (faults are in the reports), 70 after a
    model error (recorded)."""
    code = EXIT_MODEL_ERROR
    try:
        contain.die_with_parent(leader_pid)
        contain.set_name("gpsimd-core")
        _run_cores(leader, run, index, deadline)
        code = 0
    finally:
        os._exit(code)


def _run_cores(leader: _Leader, run: dict, index: int, deadline: float) -> None:
    """Claim the cores of ``run`` one by one (process record ``index``) and
    launch each, with SIGALRM at ``deadline`` (time.monotonic()). Model
    errors are recorded in the control block and raised again."""
    ctl = leader.ctl
    k = -1
    try:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            os.kill(os.getpid(), signal.SIGALRM)
        signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-3))
        p = run["index"]
        fills = leader.req["fills"][p]
        shared = leader.parallel > 1 and not run["ordered"]
        arg_buf = ctypes.create_string_buffer(max(1, len(leader.arg_stream)))
        ret_buf = ctypes.create_string_buffer(max(1, len(leader.out_desc)))
        while True:
            ctl.protect(True)
            k = ctl.claim(p, shared)
            if k is None:
                break
            t0 = control.now_ns()
            ctl.set_slot(p, k, control.SLOT_STARTED, job=index, t_start=t0)
            ctl.protect(False)
            if fills:
                at, n = fills[k]
                ctypes.memset(leader.base + at, run["poison"], n)
            binding = leader.bindings[(p, k)]
            # fresh argument bytes for each launch (an earlier kernel may have
            # written over them)
            ctypes.memmove(arg_buf, leader.arg_stream, len(leader.arg_stream))
            ctypes.memmove(ret_buf, leader.out_desc, len(leader.out_desc))
            binding.arg_stream_host = ctypes.addressof(arg_buf)
            binding.retval_host = ctypes.addressof(ret_buf)
            rc = leader.ctx.binders[p][k](ctypes.byref(binding))
            if rc != 0:
                ctl.protect(True)
                ctl.set_slot(p, k, control.SLOT_BIND_FAILED, bind_rc=rc, job=index,
                             t_start=t0, t_end=control.now_ns())
                ctl.mark_faulted(p)
                continue
            t1 = control.now_ns()
            status = int(leader.ctx.launchers[p][k]())
            t2 = control.now_ns()
            report = abi.GpsimdCoreReport.from_address(binding.report_host)
            ctl.protect(True)
            ok = status == abi.STATUS_OK and report.status == abi.STATUS_OK
            ctl.set_slot(p, k, control.SLOT_DONE, status=1 if status != abi.STATUS_OK else 0,
                         job=index, t_start=t1, t_end=t2)
            if not ok:
                ctl.mark_faulted(p)
    except BaseException as e:
        try:
            ctl.protect(True)
            ctl.set_error(run["index"], k, f"device model error: {type(e).__name__}: {e}")
        except BaseException:
            pass
        raise
