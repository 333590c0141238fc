"""What runs in a vector's processes (stdlib and ctypes only; forked from
the zygote, ``gpsimd_emu.zygote``, so every core object's globals are as
``dlopen`` left them).

The vector's first process, the *leader* (in its own process group,
inside the zygote's PID namespace where one can be made), maps the device
image, then makes the runs of the cores (``gpsimd_emu.runs``) one after
another, claiming each run's cores from the control block and launching
them; each run uses its own copy of every core object (the zygote loads
one per run), so each starts from globals no launch touched, and a vector
costs one fork. Runs that take long get helpers (``gpsimd_emu.jobs``, with
``parallel`` > 1). The second
private run is made when the first says so (multicore: always;
single-core: an element still holding the poison, or the report flags
``TCM_USED``, ``EMPTY_USED``, ``OUTPUT_READ``), and a run that ended with a
fault, a crash or its time limit (each run's own ``SIGALRM``) lets no
later run start.

Everything the model reads comes back through the image (control block,
reports, outputs); the leader exits 0 after recording its own end, 70
after recording a model error.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import struct
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

from . import abi, contain, control
from .jobs import CANCELLED, EXIT_MODEL_ERROR, Helpers, Job

__all__ = ["VectorContext", "leader_main", "EXIT_MODEL_ERROR", "CANCELLED"]

_B = abi.GpsimdCoreBinding
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
#: Offsets in a binding of the host pointers the worker wrote as file
#: offsets (the regions' are added by num_regions), and of the argument ones.
_HOST_OFFSETS = tuple(getattr(_B, f).offset for f in
                      ("scratch_host", "dataram_host", "printf_host", "report_host"))
_REGIONS = _B.regions.offset
_REGION_HOST = abi.GpsimdRegion.host.offset
_REGION_SIZE = ctypes.sizeof(abi.GpsimdRegion)
_NUM_REGIONS = _B.num_regions.offset
_READ_MAP = _B.read_map_host.offset
_REPORT = _B.report_host.offset
_ARG_STREAM = _B.arg_stream_host.offset
_RETVAL = _B.retval_host.offset


class VectorContext:
    """What the zygote hands a vector's leader (in memory, through fork).

    Attributes:
        request: the worker's request (``DeviceImage.request()`` plus
            ``op``, ``timeout``, ``parallel``, ``spread_after``,
            ``spread_now``, ``data_limit``).
        image_fd: the image memfd (closed once mapped).
        launchers: ``launchers[run][core]``: the op's launcher (``int
            (*)()``) in that run's copy of the core object.
        binders: ``binders[run][core]``: that copy's ``gpsimd_bind_core``
            (called with the binding's address).
        zygote: the zygote's pid (the leader dies with it).
    """

    def __init__(self, request: dict, image_fd: int,
                 launchers: Sequence[Sequence[Callable[[], int]]],
                 binders: Sequence[Sequence[Callable[[int], int]]],
                 zygote: int):
        self.request = request
        self.image_fd = image_fd
        self.launchers = list(launchers)
        self.binders = list(binders)
        self.zygote = zygote


def leader_main(ctx: VectorContext) -> None:
    """The leader: never returns (``os._exit``)."""
    code = EXIT_MODEL_ERROR
    ctl = None
    try:
        contain.die_with_parent(ctx.zygote)
        contain.set_name("gpsimd-vector")
        # (SIGCHLD, SIGALRM: whatever a static initialiser set)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD,
                    signal.SIGALRM):
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


class _Leader(Helpers):
    """A vector's leader (module text)."""

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
        self.bindings: Dict[tuple, bytearray] = {}
        for r in self.runs:
            for k in range(self.ncores):
                at = req["bindings_at"] + (r["index"] * self.ncores + k) * size
                self.bindings[(r["index"], k)] = self._rebase(bytearray(mm[at:at + size]))
        a = req["args_at"]
        self.arg_stream = bytes(mm[a:a + req["arg_len"]])
        self.out_desc = bytes(mm[a + req["page"]:a + req["page"] + req["desc_len"]])
        self.jobs: List[Job] = []
        self._helping: list = []
        self._whole: Dict[int, Job] = {}
        self._whole_status: Dict[int, int] = {}
        self.is_helper = False
        self.stop_after: Optional[int] = None

    def _rebase(self, b: bytearray) -> bytearray:
        """The binding bytes with this process's host addresses (the file
        offsets the worker wrote plus the image's base)."""
        offsets = list(_HOST_OFFSETS)
        offsets += [_REGIONS + i * _REGION_SIZE + _REGION_HOST
                    for i in range(min(_U32.unpack_from(b, _NUM_REGIONS)[0], abi.MAX_REGIONS))]
        if _U64.unpack_from(b, _READ_MAP)[0]:
            offsets.append(_READ_MAP)
        for off in offsets:
            _U64.pack_into(b, off, _U64.unpack_from(b, off)[0] + self.base)
        return b

    def report(self, run: int, k: int) -> abi.GpsimdCoreReport:
        """Core ``k``'s report in ``run`` (in the image)."""
        return abi.GpsimdCoreReport.from_address(
            _U64.unpack_from(self.bindings[(run, k)], _REPORT)[0])

    # ---- scheduling ----------------------------------------------------

    def run(self) -> None:
        """Every run, one after another; a run that ended with a fault (or
        a crash of a helper, or inside a launch) lets no later run start."""
        second = next((r for r in self.runs if r["second"]), None)
        for r in self.runs:
            if r["index"] in self._whole:
                continue                        # a helper makes it
            if self.stop_after is not None or (
                    r is second and self.ncores == 1 and not self._need_second()):
                self.ctl.protect(True)
                self.ctl.set_pass(r["index"], control.PASS_SKIPPED, control.now_ns())
                continue
            index = len(self.jobs)
            self.jobs.append(Job(index, r["index"], os.getpid()))
            if self.make_run(r, index):
                self.stop_after = r["index"]
        self._wait_whole()

    def make_run(self, r: dict, index: int) -> bool:
        """Make run ``r`` as process record ``index`` (helped when it takes
        long). Returns True when the vector must stop after it (a fault, a
        helper's bad end, a launch that ended the process). A crash or the
        time limit ends this process, which its parent reports."""
        p = r["index"]
        start = time.monotonic()
        self.ctl.protect(True)
        self.ctl.set_pass(p, control.PASS_RUNNING, control.now_ns())
        self.ctl.set_job(index, os.getpid(), p, 0, control.JOB_RUNNING)
        self.run_cores(r, index, start + self.timeout)
        bad = self._wait_helpers(r)
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.ctl.protect(True)
        self.ctl.set_job(index, os.getpid(), p, 0, control.JOB_EXITED)
        if bad or self._left_running(Job(index, p, 0)):
            return True
        self.ctl.set_pass(p, control.PASS_DONE, control.now_ns())
        return bool(self.ctl.pass_record(p)["faulted"])

    def _left_running(self, job: Job) -> bool:
        """Did the job end (exit 0: a kernel's exit()) inside a launch?"""
        return any(s["state"] == control.SLOT_STARTED and s["job"] == job.index
                   for s in (self.ctl.slot(job.run, k) for k in range(self.ncores)))

    def _need_second(self) -> bool:
        """After the first run of a single-core vector: does the second run
        have anything to decide? (An element still holding the poison, or
        memory the kernel may have read before writing.)"""
        first = self.runs[0]["index"]
        if self.ctl.pass_record(first)["faulted"]:
            return False
        report = self.report(first, 0)
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

    def run_cores(self, run: dict, index: int, deadline: float) -> None:
        """Claim the cores of ``run`` one by one (process record ``index``) and
        launch each, with SIGALRM at ``deadline`` (time.monotonic());
        (The worker poisoned the run's output copies.) Model
        errors are recorded in the control block and raised again."""
        ctl = self.ctl
        k = -1
        try:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.kill(os.getpid(), signal.SIGALRM)
            signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-3))
            p = run["index"]
            shared = self.parallel > 1 and not run["ordered"]
            may_help = self.parallel > 1 and not self.is_helper
            started = time.monotonic()
            if may_help and self.req.get("spread_now"):
                self._maybe_help(run, started, deadline)   # cores known to take long
            arg_buf = ctypes.create_string_buffer(max(1, len(self.arg_stream)))
            ret_buf = ctypes.create_string_buffer(max(1, len(self.out_desc)))
            while True:
                ctl.protect(True)
                k = ctl.claim(p, shared)
                if k is None:
                    break
                t0 = control.now_ns()
                ctl.set_slot(p, k, control.SLOT_STARTED, job=index, t_start=t0)
                ctl.protect(False)
                binding = self.bindings[(p, k)]
                # fresh argument bytes for each launch (an earlier kernel may have
                # written over them)
                ctypes.memmove(arg_buf, self.arg_stream, len(self.arg_stream))
                ctypes.memmove(ret_buf, self.out_desc, len(self.out_desc))
                _U64.pack_into(binding, _ARG_STREAM, ctypes.addressof(arg_buf))
                _U64.pack_into(binding, _RETVAL, ctypes.addressof(ret_buf))
                view = (ctypes.c_char * len(binding)).from_buffer(binding)
                rc = self.ctx.binders[p][k](ctypes.addressof(view))
                del view
                if rc != 0:
                    ctl.protect(True)
                    ctl.set_slot(p, k, control.SLOT_BIND_FAILED, bind_rc=rc, job=index,
                                 t_start=t0, t_end=control.now_ns())
                    ctl.mark_faulted(p)
                    continue
                t1 = control.now_ns()
                status = int(self.ctx.launchers[p][k]())
                t2 = control.now_ns()
                report = self.report(p, k)
                ctl.protect(True)
                ok = status == abi.STATUS_OK and report.status == abi.STATUS_OK
                ctl.set_slot(p, k, control.SLOT_DONE, status=1 if status != abi.STATUS_OK else 0,
                             job=index, t_start=t1, t_end=t2)
                if not ok:
                    ctl.mark_faulted(p)
                if may_help:
                    self._maybe_help(run, started, deadline)
        except BaseException as e:
            try:
                ctl.protect(True)
                ctl.set_error(run["index"], k, f"device model error: {type(e).__name__}: {e}")
            except BaseException:
                pass
            raise
