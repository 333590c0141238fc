"""The native leader: ``leader.c`` (beside this module), the loop of a
vector's processes (``gpsimd_emu.launch``, ``gpsimd_emu.jobs``) in C, and
its ctypes binding (stdlib only: the zygote loads it).

Why: a forked Python leader costs about 3 ms per vector before any
kernel runs (its interpreter's set-up and bookkeeping, and the pages of
the zygote its objects' reference counts make copy-on-write); the C
leader does the same work in the forked zygote without running Python.
The Python leader stays the reference: the zygote uses it when no native
library is given or it cannot be loaded, and tests compare the records
the two write, field by field.

The build compiles the library once per build (``gpsimd_device.leader``:
the flags) and a test run names it (``python -m gpsimd_emu run --leader
PATH``).

Layout: ``Request`` mirrors ``struct gl_request``; ``NativeLeader``
checks, on load, every offset ``gl_layout()`` reports against this
module's structure and ``gpsimd_emu.control``'s layout, and refuses a
library that disagrees (``NativeError``).
"""

from __future__ import annotations

import ctypes
import os
from typing import List, Optional, Sequence

from . import abi, control
from .jobs import CANCELLED, EXIT_MODEL_ERROR
from .loader import elf_problem

__all__ = ["VERSION", "NativeError", "NativeLeader", "Request", "Run", "ZygoteRun",
           "RUN_MAGIC", "OP_NAME", "ZYGOTE_ENV", "expected_layout", "function_table",
           "request_struct", "run_message", "read_run", "dynamic_loader", "become_zygote"]

VERSION = 2
MAX_RUNS = control.MAX_PASSES
MAX_CORES = control.MAX_CORES

_I64 = ctypes.c_int64
#: ``0``: the zygote does not become the native zygote (it forks each
#: vector's native leader itself, from Python).
ZYGOTE_ENV = "GPSIMD_EMU_NATIVE_ZYGOTE"


class NativeError(Exception):
    """The native leader library cannot be used (it does not load, or its
    layout is not this module's); the message says why."""


class Run(ctypes.Structure):
    """``struct gl_run``: one run of a vector (``RunSpec.to_json``)."""

    _fields_ = [("index", _I64), ("second", _I64), ("ordered", _I64), ("poison", _I64)]


#: ``launchers`` / ``binders`` of a request: an address per copy and core.
FunctionTable = (ctypes.c_void_p * MAX_CORES) * MAX_RUNS


def function_table(rows: Sequence[Sequence[int]]) -> "ctypes.Array":
    """``rows[copy][core]`` (function addresses) as a request's table; the
    zygote makes each op's once and every vector's request copies it."""
    if isinstance(rows, FunctionTable):
        return rows
    table = FunctionTable()
    for p, row in enumerate(rows[:MAX_RUNS]):
        for k, addr in enumerate(row[:MAX_CORES]):
            table[p][k] = addr
    return table


class Request(ctypes.Structure):
    """``struct gl_request``: what the leader needs (the worker's request,
    ``DeviceImage.request()`` plus the zygote's fields), the launcher and
    ``gpsimd_bind_core`` address of every copy of every core."""

    _fields_ = [
        ("version", _I64), ("image_fd", _I64), ("size", _I64), ("ncores", _I64),
        ("nruns", _I64), ("parallel", _I64), ("spread_now", _I64),
        ("spread_after", ctypes.c_double), ("timeout", ctypes.c_double),
        ("binding_size", _I64), ("bindings_at", _I64), ("args_at", _I64), ("arg_len", _I64),
        ("page", _I64), ("desc_len", _I64), ("data_limit", _I64), ("zygote", _I64),
        ("scan_at", _I64), ("scan_nbytes", _I64), ("scan_itemsize", _I64), ("oom_first", _I64),
        ("runs", Run * MAX_RUNS),
        ("launchers", FunctionTable),
        ("binders", FunctionTable),
        ("join_path", ctypes.c_char * 512),
    ]


#: ``GL_RUN_MAGIC`` ("GLZYRUN1") and ``GL_OP_NAME`` of leader.h.
RUN_MAGIC = int.from_bytes(b"GLZYRUN1", "little")
OP_NAME = 256


class ZygoteRun(ctypes.Structure):
    """``struct gl_zygote_run``: one vector sent to a zygote that runs the
    native leader (with the image memfd): the worker's part of its
    request; the zygote fills in its own (``run_message``)."""

    _fields_ = [("magic", _I64), ("memory", _I64), ("image_total", _I64),
                ("prefilled", _I64), ("op", ctypes.c_char * OP_NAME), ("request", Request)]


def expected_layout() -> List[int]:
    """What ``gl_layout()`` must report (its order), from this module and
    ``gpsimd_emu.control``."""
    c = control
    return [
        VERSION, ctypes.sizeof(Request), Request.spread_after.offset, Request.runs.offset,
        ctypes.sizeof(Run), Request.launchers.offset, Request.binders.offset,
        Request.join_path.offset, ctypes.sizeof(abi.GpsimdCoreBinding),
        c.SIZE, c._ERROR_FIELDS, c._LEADER_DONE, c._ERROR, c.ERROR_CAPACITY, c._PASSES,
        c._PASS_SIZE, c._SEM_OFFSET, c._SLOTS, c._SLOT.size, c._JOBS, c._JOB.size, c.MAX_JOBS,
        MAX_RUNS, MAX_CORES, EXIT_MODEL_ERROR, CANCELLED, 32,
        RUN_MAGIC, OP_NAME, ctypes.sizeof(ZygoteRun), ZygoteRun.op.offset,
        ZygoteRun.request.offset,
    ]


class NativeLeader:
    """The loaded library.

    Raises (constructor):
        NativeError: it does not load, or ``gl_layout()`` differs from
            ``expected_layout()`` (naming the first entry that does).
    """

    def __init__(self, path: str):
        self.path = path
        try:
            with open(path, "rb") as f:
                problem = elf_problem(f.read())
        except OSError as e:
            raise NativeError(f"{path}: cannot read the native leader: {e.strerror or e}") from None
        if problem:   # (dlopen would map it, and the first page past the end fault)
            raise NativeError(f"{path}: not a usable native leader: {problem}")
        try:
            lib = ctypes.CDLL(os.path.abspath(path))
            self._fork = lib.gl_fork_leader
            layout = lib.gl_layout
        except (OSError, AttributeError) as e:
            raise NativeError(f"{path}: cannot load the native leader: {e}") from None
        self._fork.restype = ctypes.c_long
        self._fork.argtypes = [ctypes.POINTER(Request)]
        layout.restype = ctypes.c_int
        layout.argtypes = [ctypes.POINTER(_I64), ctypes.c_int]
        want = expected_layout()
        got = (_I64 * 64)()
        n = layout(got, 64)
        if n != len(want) or list(got[:n]) != want:
            bad = next((i for i in range(max(n, len(want)))
                        if i >= n or i >= len(want) or got[i] != want[i]), 0)
            raise NativeError(f"{path}: the native leader was built for another layout "
                              f"(entry {bad} of gl_layout differs); rebuild it")
        self._lib = lib

    def fork(self, r: "Request", image_fd: int, launchers: Sequence[Sequence[int]],
             binders: Sequence[Sequence[int]], zygote: int, oom_first: bool = False,
             join_path: Optional[str] = None) -> int:
        """Fork the vector's leader; returns its pid (the child never
        returns). ``r``: the worker's part of the request
        (:func:`request_struct`, or a ``ZygoteRun``'s) with ``data_limit``
        set; this fills in the zygote's part: ``image_fd``, ``zygote``
        (its pid), ``oom_first``, ``launchers[run][core]`` /
        ``binders[run][core]`` (function addresses in each copy, or their
        ``function_table``) and ``join_path`` (the cgroup's
        ``cgroup.procs``, or None).

        Raises:
            OSError: fork failed.
        """
        r.image_fd, r.zygote, r.oom_first = image_fd, zygote, 1 if oom_first else 0
        r.launchers = function_table(launchers)
        r.binders = function_table(binders)
        r.join_path = os.fsencode(join_path)[:511] if join_path else b""
        pid = self._fork(ctypes.byref(r))
        if pid < 0:
            raise OSError(-pid, os.strerror(-pid), "fork of the native leader")
        return pid

    @property
    def runs_as_zygote(self) -> bool:
        """Can the library run as the native zygote here (its program
        entry exists for this machine)?"""
        fn = getattr(self._lib, "gl_zygote_supported", None)
        if fn is None:
            return False
        fn.restype = ctypes.c_int
        return bool(fn())


def request_struct(req: dict) -> Request:
    """The worker's part of a vector's request (``DeviceImage.request()``
    and the session's fields: ``timeout``, ``parallel``, ``spread_*``) in
    a ``Request``; the zygote's fields are 0.

    Raises:
        ValueError: more than 4 runs or 8 cores.
    """
    r = Request(version=VERSION, image_fd=-1, size=int(req["size"]),
                ncores=int(req["ncores"]), nruns=len(req["runs"]),
                parallel=max(1, int(req.get("parallel", 1))),
                spread_now=1 if req.get("spread_now") else 0,
                spread_after=float(req.get("spread_after", 0.02)),
                timeout=float(req["timeout"]), binding_size=int(req["binding_size"]),
                bindings_at=int(req["bindings_at"]), args_at=int(req["args_at"]),
                arg_len=int(req["arg_len"]), page=int(req["page"]),
                desc_len=int(req["desc_len"]))
    if not 1 <= r.nruns <= MAX_RUNS or not 1 <= r.ncores <= MAX_CORES:
        raise ValueError(f"{r.nruns} runs of {r.ncores} cores do not fit the native leader")
    scan = req.get("scan")
    if scan:
        r.scan_at, r.scan_nbytes, r.scan_itemsize = (int(v) for v in scan)
    for i, run in enumerate(req["runs"]):
        dst = r.runs[i]
        dst.index, dst.second = run["index"], 1 if run["second"] else 0
        dst.ordered, dst.poison = 1 if run["ordered"] else 0, run["poison"]
    return r


def run_message(req: dict) -> bytes:
    """A vector for a zygote with the native leader (``ZygoteRun``): the
    worker's request dict (``request_struct`` and ``op``, ``memory``,
    ``image_total``, ``prefilled``) as the bytes of one message.

    Raises:
        ValueError: it does not fit (runs, cores, an op name of 256 bytes).
    """
    op = os.fsencode(req["op"])
    if len(op) >= OP_NAME:
        raise ValueError(f"op name of {len(op)} bytes (at most {OP_NAME - 1})")
    return bytes(ZygoteRun(magic=RUN_MAGIC, memory=int(req["memory"]),
                           image_total=int(req["image_total"]),
                           prefilled=int(req["prefilled"]), op=op,
                           request=request_struct(req)))


def read_run(data: bytes) -> "Optional[ZygoteRun]":
    """The ``ZygoteRun`` a message holds, or None when it is not one."""
    if len(data) != ctypes.sizeof(ZygoteRun):
        return None
    m = ZygoteRun.from_buffer_copy(data)
    return m if m.magic == RUN_MAGIC else None


def dynamic_loader(executable: str) -> Optional[str]:
    """The program interpreter (``PT_INTERP``: the dynamic loader) of the
    ELF file ``executable``, or None (not ELF, static, unreadable). The
    native zygote is the leader library run by it
    (``ld.so libgpsimd_leader.so gl-zygote ...``)."""
    import struct
    try:
        with open(executable, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None             # (64-bit little-endian only)
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(phnum):
                kind, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", table,
                                                                    i * phentsize)
                if kind == 3:           # PT_INTERP
                    f.seek(offset)
                    path = f.read(filesz).rstrip(b"\0")
                    return os.fsdecode(path) if path else None
    except (OSError, struct.error):
        return None
    return None


def become_zygote(leader: NativeLeader, sock: int, parent: int, mode: str, copies: int,
                  data: Sequence[int], cgroup: "Optional[Sequence]", inside: bool,
                  objects: Sequence) -> None:
    """Replace the calling process (the Python zygote, set up, its first
    copies checked) with the native zygote (``native_zygote.c``: the
    library ``leader`` run by the dynamic loader), which loads ``copies``
    copies of every object again and serves the socket ``sock``
    (``ZygoteRun`` messages) as ``gpsimd_emu.zygote`` does. ``parent``:
    the pid it dies with; ``mode``: the containment mode; ``data``:
    (MIN_DATA, the data slack) in bytes; ``cgroup``: (version, path) or
    None; ``inside``: the zygote is in that cgroup; ``objects``: per core
    object (its payload's fd, its name), or (None, its path) for a plain
    ``.so``. Returns only when it cannot (no entry for this machine, no
    dynamic loader, the exec failed), with nothing changed."""
    import sys
    loader = dynamic_loader(sys.executable)
    if loader is None or not leader.runs_as_zygote:
        return
    args = [loader, leader.path, "gl-zygote", str(sock), str(parent), mode, str(copies),
            str(data[0]), str(data[1]), str(cgroup[0] if cgroup else 0),
            cgroup[1] if cgroup else "-", "1" if inside else "0", str(len(objects))]
    keep = [sock]
    for fd, name in objects:
        args += ["-1" if fd is None else str(fd), name]
        if fd is not None:
            keep.append(fd)
    try:
        for fd in keep:
            os.set_inheritable(fd, True)
        os.execv(loader, args)
    except OSError:
        for fd in keep:
            os.set_inheritable(fd, False)
