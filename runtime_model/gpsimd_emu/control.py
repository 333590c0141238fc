"""The control block: how a vector's processes tell the model what happened
(stdlib and ctypes at import: the worker's ``validate`` imports numpy).

It is the first page of the vector's device image (a memfd the worker
creates, ``gpsimd_emu.image``), so no file descriptor carries results: a
kernel writing to every descriptor it can find reaches nothing the model
reads. The leader makes the page read-only around each launch
(``mprotect``), and the worker checks what it reads (``validate``): a magic
and the request's nonce, every state, index and count in range; anything
else fails that vector as a corrupt record, naming the field.

Layout: ``gz_control`` of ``gpsimd_host/zygote.h`` (read here through
``binding.header_struct``, written by ``leader.c``), little-endian. A
pass's cores are claimed in its ``order`` under a process-shared POSIX
semaphore (``sem_init``), so that several processes may share a pass.
"""

from __future__ import annotations

import ctypes
from typing import List

from gpsimd_device.headers import defines

from .binding import header_struct
from .contain import libc as _c

__all__ = [
    "SIZE", "MAX_PASSES", "MAX_CORES", "MAX_JOBS", "MAGIC", "Block", "ControlBlock",
    "RecordError", "SLOT_STARTED", "SLOT_DONE", "SLOT_BIND_FAILED",
    "PASS_PENDING", "PASS_RUNNING", "PASS_DONE", "PASS_SKIPPED",
    "JOB_RUNNING", "JOB_EXITED", "EXIT_MODEL_ERROR", "CANCELLED", "LOST", "UNFINISHED",
    "ZY", "kept_text",
]

#: Every ``GPSIMD_ZY_*`` number of ``gpsimd_host/zygote.h`` (the one
#: definition of the zygote's formats), without the prefix.
ZY = {k[3:]: v for k, v in defines("zygote.h").items() if k.startswith("ZY_")}



def kept_text(head: bytes, tail: bytes, total: int) -> str:
    """A process's kept output (at most ``ZY["OUTPUT_KEEP"]`` bytes from
    the start, ``head``, and as many from the end, ``tail``, of ``total``)
    as text, the dropped middle counted."""
    dropped = total - len(head) - len(tail)
    middle = f"\n[... {dropped} bytes dropped ...]\n".encode() if dropped > 0 else b""
    return (bytes(head) + middle + bytes(tail)).decode("utf-8", "replace")


SIZE = ZY["CB_SIZE"]
MAX_PASSES = ZY["MAX_RUNS"]
MAX_CORES = ZY["MAX_CORES"]
MAX_JOBS = ZY["MAX_JOBS"]
MAGIC = ZY["CB_MAGIC"].encode()
VERSION = ZY["CB_VERSION"]
ERROR_CAPACITY = ZY["CB_ERROR_CAPACITY"]
EXIT_MODEL_ERROR = ZY["EXIT_MODEL_ERROR"]
CANCELLED = ZY["CANCELLED"]
LOST = ZY["LOST"]
UNFINISHED = ZY["UNFINISHED"]

PASS_PENDING, PASS_RUNNING, PASS_DONE, PASS_SKIPPED = (
    ZY["PASS_PENDING"], ZY["PASS_RUNNING"], ZY["PASS_DONE"], ZY["PASS_SKIPPED"])
SLOT_STARTED, SLOT_DONE, SLOT_BIND_FAILED = (
    ZY["SLOT_STARTED"], ZY["SLOT_DONE"], ZY["SLOT_BIND_FAILED"])
JOB_RUNNING, JOB_EXITED = ZY["JOB_RUNNING"], ZY["JOB_EXITED"]

#: ``gz_control``: the whole page's records (``ctypes.Structure``).
Block = header_struct("zygote.h", "gz_control")
assert ctypes.sizeof(Block) <= SIZE


def _numpy():
    """numpy, imported when the worker first validates a record (not when
    this module is), and ``Block`` as its record type (``_numpy.block``)."""
    import numpy
    if not hasattr(_numpy, "block"):
        _numpy.block = numpy.dtype(Block)
    return numpy


def _record(c: ctypes.Structure) -> dict:
    """A record's fields by name (a pass's semaphore left out)."""
    return {name: getattr(c, name) for name, _ in c._fields_ if name != "sem"}


class RecordError(ValueError):
    """The control block does not hold a valid record of the run (a kernel
    wrote over it, or the vector's process died before writing it)."""


class ControlBlock:
    """The control block at the start of a writable buffer: an mmap of the
    image (its semaphores then shared with the vector's processes), or any
    bytearray in tests."""

    def __init__(self, buf):
        self.buf = memoryview(buf)[:SIZE]

    def _block(self) -> ctypes.Structure:
        return Block.from_buffer(self.buf)

    # ---- writing (the worker, before the run; the vector's processes write
    # the rest: leader.c)

    def init(self, nonce: int, npasses: int, ncores: int,
             orders: List[List[int]]) -> None:
        """A fresh record: header, ``orders[p]`` the cores of pass p in
        the order they are to be claimed (all passes pending), and the claim
        semaphore of every pass ``sem_init``-ed (process-shared)."""
        self.buf[:] = bytes(SIZE)
        b = self._block()
        b.magic, b.nonce, b.version, b.npasses, b.ncores = MAGIC, nonce, VERSION, npasses, ncores
        b.error_pass = b.error_core = -1
        for p, order in enumerate(orders):
            b.passes[p].ncores = len(order)
            b.passes[p].order[:len(order)] = order
            if _c().sem_init(ctypes.byref(b.passes[p].sem), 1, 1) != 0:
                raise OSError(ctypes.get_errno(), "sem_init")

    # ---- reading -------------------------------------------------------

    def validate(self, nonce: int, npasses: int, ncores: int) -> dict:
        """The whole record, checked: ``{"error": (pass, core, text) or None,
        "leader_done", "passes": [...], "slots": [[...] per pass],
        "jobs": [...]}``.

        Raises:
            RecordError: naming the first field that is not what a run of
                the model can write.
        """
        b = self._block()
        if b.magic != MAGIC:
            raise RecordError("its magic was overwritten")
        if b.nonce != nonce or b.version != VERSION:
            raise RecordError("it belongs to another run (nonce or version differs)")
        if b.npasses != npasses or b.ncores != ncores:
            raise RecordError(f"it describes {b.npasses} runs of {b.ncores} cores, "
                              f"not {npasses} of {ncores}")
        if b.error_len > ERROR_CAPACITY or not -1 <= b.error_pass < npasses \
                or not -1 <= b.error_core < ncores:
            raise RecordError("its error entry is out of range")
        if b.leader_done not in (0, 1):
            raise RecordError(f"leader state {b.leader_done}")
        error = None
        if b.error_len:
            error = (b.error_pass, b.error_core, b.error[:b.error_len].decode("utf-8", "replace"))
        passes = []
        for p in range(npasses):
            r = _record(b.passes[p])
            r["order"] = list(r["order"][:r["ncores"]])
            if r["state"] > PASS_SKIPPED or r["faulted"] > 1 or r["ncores"] > ncores \
                    or r["claimed"] > r["ncores"] or any(k >= ncores for k in r["order"]):
                raise RecordError(f"run {p}: its pass record is out of range")
            passes.append(r)
        # (the slots and jobs read and checked at once; the first slot out of
        # range, in run and core order, named)
        np = _numpy()
        record = np.frombuffer(self.buf, dtype=_numpy.block, count=1)[0]
        s = record["slots"][:npasses * MAX_CORES].reshape(npasses, MAX_CORES)[:, :ncores]
        wrong = (s["state"] > SLOT_BIND_FAILED) | (s["status"] > 1) | (s["job"] >= MAX_JOBS)
        bad = wrong | ((s["state"] == SLOT_DONE) & (s["t_end"] < s["t_start"]))
        if bad.any():
            p, k = divmod(int(np.argmax(bad.reshape(-1))), ncores)
            if wrong[p, k]:
                raise RecordError(f"run {p}, core {k}: state {s['state'][p, k]}, status "
                                  f"{s['status'][p, k]}, job {s['job'][p, k]}")
            raise RecordError(f"run {p}, core {k}: ends before it starts")
        names = s.dtype.names
        slots = [[dict(zip(names, t)) for t in row] for row in s.tolist()]
        jobs = []
        for j in np.flatnonzero(record["jobs"]["state"]).tolist():
            r = _record(b.jobs[j])
            if r["state"] > JOB_EXITED or r["pass"] >= npasses:
                raise RecordError(f"process record {j}: state {r['state']}, run {r['pass']}")
            jobs.append(dict(r, index=j))
        return {"error": error, "leader_done": bool(b.leader_done), "passes": passes,
                "slots": slots, "jobs": jobs}
