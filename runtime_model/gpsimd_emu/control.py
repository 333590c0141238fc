"""The control block: how a vector's processes tell the model what happened
(stdlib and ctypes only).

It is the first page of the vector's device image (a memfd the worker
creates, ``gpsimd_emu.image``), so no file descriptor carries results: a
kernel writing to every descriptor it can find reaches nothing the model
reads. The leader makes the page read-only around each launch
(``mprotect``), and the worker checks what it reads (``validate``): a magic
and the request's nonce, every state, index and count in range; anything
else fails that vector as a corrupt record, naming the field.

Layout: the ``GPSIMD_ZY_CB_*`` offsets of ``gpsimd_host/zygote.h`` (read
here, written by ``leader.c``); the fields, little-endian::

    header   magic b"GPSIMDCB", nonce u64, version u32, npasses u32,
             ncores u32, error_pass i32, error_core i32, error_len u32,
             leader_done u32, spread u32
    error    UTF-8 text (a model error in a vector process)
    passes   per run: state u32, faulted u32, claimed u32, ncores u32,
             order u8[8], t_start u64, t_end u64, then its sem_t
    slots    per run and core: state u32, status u32, bind_rc i32, job u32,
             t_start u64, t_end u64 (CLOCK_MONOTONIC ns)
    jobs     per process: pid i32, pass u32, wait_status i32, state u32

A pass's cores are claimed in its ``order`` under a process-shared POSIX
semaphore (``sem_init``), so that several processes may share a pass.
"""

from __future__ import annotations

import ctypes
import struct
from typing import List, Tuple

from gpsimd_device.headers import defines

from .contain import libc as _c

__all__ = [
    "SIZE", "MAX_PASSES", "MAX_CORES", "MAX_JOBS", "MAGIC", "ControlBlock", "RecordError",
    "SLOT_IDLE", "SLOT_STARTED", "SLOT_DONE", "SLOT_BIND_FAILED",
    "PASS_PENDING", "PASS_RUNNING", "PASS_DONE", "PASS_SKIPPED",
    "JOB_RUNNING", "JOB_EXITED", "EXIT_MODEL_ERROR", "CANCELLED", "ZY",
]

#: Every ``GPSIMD_ZY_*`` number of ``gpsimd_host/zygote.h`` (the one
#: definition of the zygote's formats), without the prefix.
ZY = {k[3:]: v for k, v in defines("zygote.h").items() if k.startswith("ZY_")}

SIZE = ZY["CB_SIZE"]
MAX_PASSES = ZY["MAX_RUNS"]
MAX_CORES = ZY["MAX_CORES"]
MAX_JOBS = ZY["MAX_JOBS"]
MAGIC = b"GPSIMDCB"
VERSION = ZY["CB_VERSION"]
ERROR_CAPACITY = ZY["CB_ERROR_CAPACITY"]
EXIT_MODEL_ERROR = ZY["EXIT_MODEL_ERROR"]
CANCELLED = ZY["CANCELLED"]

SLOT_IDLE, SLOT_STARTED, SLOT_DONE, SLOT_BIND_FAILED = (
    0, ZY["SLOT_STARTED"], ZY["SLOT_DONE"], ZY["SLOT_BIND_FAILED"])
PASS_PENDING, PASS_RUNNING, PASS_DONE, PASS_SKIPPED = (
    0, ZY["PASS_RUNNING"], ZY["PASS_DONE"], ZY["PASS_SKIPPED"])
JOB_RUNNING, JOB_EXITED = ZY["JOB_RUNNING"], ZY["JOB_EXITED"]

_HEADER = struct.Struct("<8sQIIIiiIII")
_ERROR_FIELDS = ZY["CB_ERROR_FIELDS"]      # error_pass, error_core, error_len
_LEADER_DONE = ZY["CB_LEADER_DONE"]
_ERROR = ZY["CB_ERROR"]
_PASSES = ZY["CB_PASSES"]
_PASS = struct.Struct("<IIII8sQQ")         # then the sem_t
_PASS_FIELDS = ("state", "faulted", "claimed", "ncores", "order", "t_start", "t_end")
_PASS_SIZE = ZY["CB_PASS_SIZE"]
_SEM_OFFSET = ZY["CB_SEM"]
_SLOTS = ZY["CB_SLOTS"]
_SLOT = struct.Struct("<IIiIQQ")
_SLOT_FIELDS = ("state", "status", "bind_rc", "job", "t_start", "t_end")
_JOBS = ZY["CB_JOBS"]
_JOB = struct.Struct("<iIiI")
_JOB_FIELDS = ("pid", "pass", "wait_status", "state")
assert _SLOT.size == ZY["CB_SLOT_SIZE"] and _JOB.size == ZY["CB_JOB_SIZE"]
assert _HEADER.size <= _ERROR and _PASS.size <= _SEM_OFFSET
assert _PASSES == _ERROR + ERROR_CAPACITY and _SLOTS == _PASSES + MAX_PASSES * _PASS_SIZE
assert _JOBS == _SLOTS + MAX_PASSES * MAX_CORES * _SLOT.size
assert _JOBS + MAX_JOBS * _JOB.size <= SIZE


class RecordError(ValueError):
    """The control block does not hold a valid record of the run (a kernel
    wrote over it, or the vector's process died before writing it)."""


class ControlBlock:
    """The control block at ``offset`` of a writable buffer (an mmap of the
    image, or any bytearray in tests).

    ``base`` is the buffer's host address, needed for the semaphores (0
    when the buffer is not a real mapping: no semaphores).
    """

    def __init__(self, buf, offset: int = 0, base: int = 0):
        self.buf = memoryview(buf)[offset:offset + SIZE]
        self.base = base + offset if base else 0

    # ---- writing (the worker, before the run; the vector's processes write
    # the rest: leader.c)

    def init(self, nonce: int, npasses: int, ncores: int,
             orders: List[List[int]]) -> None:
        """A fresh record: header, ``orders[p]`` the cores of pass p in
        the order they are to be claimed (all passes pending)."""
        self.buf[:] = bytes(SIZE)
        _HEADER.pack_into(self.buf, 0, MAGIC, nonce, VERSION, npasses, ncores, -1, -1, 0, 0, 0)
        for p, order in enumerate(orders):
            _PASS.pack_into(self.buf, _PASSES + p * _PASS_SIZE, PASS_PENDING, 0, 0, len(order),
                            bytes(order).ljust(8, b"\0"), 0, 0)

    def init_semaphores(self) -> None:
        """``sem_init`` the claim semaphore of every pass (process-shared)."""
        for p in range(self.npasses):
            if _c().sem_init(ctypes.c_void_p(self._sem(p)), 1, 1) != 0:
                raise OSError(ctypes.get_errno(), "sem_init")

    def _sem(self, p: int) -> int:
        if not self.base:
            raise RuntimeError("the control block is not in a shared mapping")
        return self.base + _PASSES + p * _PASS_SIZE + _SEM_OFFSET

    # ---- reading -------------------------------------------------------

    def _header(self):
        return _HEADER.unpack_from(self.buf, 0)

    @property
    def npasses(self) -> int:
        return self._header()[3]

    def _record(self, layout: struct.Struct, at: int, names: Tuple[str, ...]) -> dict:
        return dict(zip(names, layout.unpack_from(self.buf, at)))

    def validate(self, nonce: int, npasses: int, ncores: int) -> dict:
        """The whole record, checked: ``{"error": (pass, core, text) or None,
        "leader_done", "passes": [...], "slots": [[...] per pass],
        "jobs": [...]}``.

        Raises:
            RecordError: naming the first field that is not what a run of
                the model can write.
        """
        magic, got_nonce, version, np_, nc, e_pass, e_core, e_len, done, _ = self._header()
        if magic != MAGIC:
            raise RecordError("its magic was overwritten")
        if got_nonce != nonce or version != VERSION:
            raise RecordError("it belongs to another run (nonce or version differs)")
        if np_ != npasses or nc != ncores:
            raise RecordError(f"it describes {np_} runs of {nc} cores, not {npasses} of {ncores}")
        if e_len > ERROR_CAPACITY or not -1 <= e_pass < npasses or not -1 <= e_core < ncores:
            raise RecordError("its error entry is out of range")
        if done not in (0, 1):
            raise RecordError(f"leader state {done}")
        error = None
        if e_len:
            error = (e_pass, e_core,
                     bytes(self.buf[_ERROR:_ERROR + e_len]).decode("utf-8", errors="replace"))
        passes = []
        for p in range(npasses):
            r = self._record(_PASS, _PASSES + p * _PASS_SIZE, _PASS_FIELDS)
            r["order"] = list(r["order"][:min(r["ncores"], 8)])
            if r["state"] > PASS_SKIPPED or r["faulted"] > 1 or r["ncores"] > ncores \
                    or r["claimed"] > r["ncores"] or any(k >= ncores for k in r["order"]):
                raise RecordError(f"run {p}: its pass record is out of range")
            passes.append(r)
        slots = [[] for _ in range(npasses)]
        for p in range(npasses):
            for k in range(ncores):
                s = self._record(_SLOT, _SLOTS + (p * MAX_CORES + k) * _SLOT.size, _SLOT_FIELDS)
                if s["state"] > SLOT_BIND_FAILED or s["status"] > 1 or s["job"] >= MAX_JOBS:
                    raise RecordError(f"run {p}, core {k}: state {s['state']}, status "
                                      f"{s['status']}, job {s['job']}")
                if s["state"] == SLOT_DONE and s["t_end"] < s["t_start"]:
                    raise RecordError(f"run {p}, core {k}: ends before it starts")
                slots[p].append(s)
        jobs = []
        for j in range(MAX_JOBS):
            r = self._record(_JOB, _JOBS + j * _JOB.size, _JOB_FIELDS)
            if r["state"] == 0:
                continue
            if r["state"] > JOB_EXITED or r["pass"] >= npasses:
                raise RecordError(f"process record {j}: state {r['state']}, run {r['pass']}")
            jobs.append(dict(r, index=j))
        return {"error": error, "leader_done": bool(done), "passes": passes, "slots": slots,
                "jobs": jobs}
