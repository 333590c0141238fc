"""Run a test plan on the device model and report per vector.

For each vector of each op (ARCHITECTURE.md "The test plan"):

1. make the inputs and the expected output (``gpsimd_emu.vectors``), in the
   parent; any plan problem is that vector's failure line;
2. lay out device memory (``DeviceImage``): inputs in an HBM arena at
   0x1_0000_0000 (scalars as 1-element, 0-D tensors of the plan's dtype;
   out-of-line dims as int64), the argument stream and the output
   descriptor (customop-marshalling.txt §2, abi.h), one poisoned private
   output copy per core at the same device address, and per-core scratch,
   dataram, printf and report buffers;
3. fork a child that loads each core object (RTLD_LOCAL, from a memfd),
   registers its ops, checks its linker spec, binds the core
   (``gpsimd_bind_core``) and calls the op's launcher, core after core,
   reporting progress over a pipe; a crash (signal) or a run past the time
   limit fails only that vector, naming the signal and the running core;
4. check what the cores did (faults, capacity peaks, writes past the end,
   modified inputs, holes / overlaps / idle cores; ``gpsimd_emu.merge``) and
   compare the merged output with the expected one (``gpsimd_emu.compare``).

Results go to a JSON file and one printed line per vector
(ARCHITECTURE.md "Emulator results").
"""

from __future__ import annotations

import ctypes
import errno
import json
import math
import os
import re
import select
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import abi
from . import dtypes as dt
from .compare import Comparison, compare
from .loader import LoadError, PackedObject, load_object, payload_fd, read_object
from .memory import (ALIGN, GUARD_BYTES, HBM_BASE, POISON_A, POISON_B,
                     SBUF_PARTITIONS, SBUF_WINDOW_BASE, Arena, CoreMemory, align_up)
from .merge import (cores_text, format_ranges, guard_writes, merge_core_outputs,
                    written_mask)
from .vectors import (Input, PlanError, expected_output, location_of, make_inputs,
                      output_shape, tolerances)

__all__ = [
    "DEFAULT_TIMEOUT", "DEFAULT_STACK_SCALE", "RESULTS_FORMAT",
    "VectorResult", "LibraryResults", "CoreSpec", "DeviceImage",
    "load_plan", "prepare_cores", "run_vector", "run_plan", "format_line",
    "write_results", "fault_name", "fault_kinds",
]

#: Seconds a vector may run (all its cores together) before it is killed.
DEFAULT_TIMEOUT = 60.0
#: Host stack bytes per device stack byte (abi.h ``stack_scale``): host
#: code (x86-64/aarch64, libstdc++) needs several times the Xtensa stack.
DEFAULT_STACK_SCALE = 16
RESULTS_FORMAT = 1

# gpsimd_host/faults.h, GPSIMD_FAULT_KINDS (values are stable, appended
# only). fault_name() prefers the header next to this package when present,
# so kinds appended there are named without a change here.
FAULT_KINDS = (
    "NONE", "BINDING", "LSP_MISMATCH", "ARG_STREAM", "DESCRIPTOR", "DTYPE",
    "SCALAR", "SHAPE", "UNMAPPED", "OUT_OF_RANGE", "SCRATCH_FULL", "DATARAM",
    "TCM", "STACK_OVERFLOW", "CXX_EXCEPTION", "UNDEFINED_TENSOR",
    "BAD_ARGUMENT", "UNSUPPORTED", "INTERNAL", "SEGV", "TCM_NULL", "MULTICORE",
    "COHERENCE",
)
FAULTS_H = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "include", "gpsimd_host", "faults.h")
_fault_table: Optional[Dict[int, str]] = None


def fault_kinds(header: str = FAULTS_H) -> Dict[int, str]:
    """{value: name} of the fault kinds: ``FAULT_KINDS``, overlaid with the
    ``X(NAME, value)`` rows of ``header`` (faults.h) when it can be read."""
    table = dict(enumerate(FAULT_KINDS))
    try:
        with open(header, "r", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return table
    for name, value in re.findall(r"\bX\((\w+),\s*(\d+)\)", text):
        table[int(value)] = name
    return table


def fault_name(kind: int) -> str:
    """The name of a ``gpsimd_core_report.fault_kind`` (faults.h), or
    ``"UNKNOWN(<n>)"``."""
    global _fault_table
    if _fault_table is None:
        _fault_table = fault_kinds()
    return _fault_table.get(int(kind), f"UNKNOWN({kind})")


# ---- results -------------------------------------------------------------------

@dataclass
class VectorResult:
    """The outcome of one vector.

    Attributes:
        op, vector, where: names and the manifest location (``ops.yaml:L:C``).
        status: ``"pass"`` or ``"fail"``.
        message: "" on pass, else why it failed (several reasons joined
            with ``"; "``).
        max_abs_err: largest absolute error of the comparison (float), or
            None when no comparison happened or it was not finite.
        mismatches: elements out of tolerance, or None when no comparison
            happened.
        elements: elements compared (for the PASS line).
        printf: what core 0 printed (not part of the results JSON).
        warnings: what the checks found that does not fail the vector
            (printf buffer wrapped, stream coherence under
            INCOHERENT_VERBOSE), each ``"core K: text"``; in the results
            JSON and appended to the printed line.
    """

    op: str
    vector: str
    where: str
    status: str
    message: str = ""
    max_abs_err: Optional[float] = None
    mismatches: Optional[int] = None
    elements: int = 0
    printf: str = ""
    warnings: List[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when the status is ``"pass"``."""
        return self.status == "pass"

    def to_json(self) -> Dict[str, Any]:
        """The results-JSON entry (ARCHITECTURE.md "Emulator results")."""
        err = self.max_abs_err
        if err is not None and not math.isfinite(err):
            err = None
        return {"op": self.op, "vector": self.vector, "where": self.where,
                "status": self.status, "message": self.message,
                "max_abs_err": err, "mismatches": self.mismatches,
                "warnings": list(self.warnings)}


@dataclass
class LibraryResults:
    """Every vector result of one library's plan."""

    library: str
    vectors: List[VectorResult] = field(default_factory=list)

    @property
    def passed(self) -> int:
        """Number of vectors that passed."""
        return sum(1 for v in self.vectors if v.passed)

    @property
    def failed(self) -> int:
        """Number of vectors that failed."""
        return len(self.vectors) - self.passed

    @property
    def ok(self) -> bool:
        """True when every vector passed (the CLI's exit status 0)."""
        return self.failed == 0

    def to_json(self) -> Dict[str, Any]:
        """The results document (ARCHITECTURE.md "Emulator results")."""
        return {"format": RESULTS_FORMAT, "library": self.library,
                "passed": self.passed, "failed": self.failed,
                "vectors": [v.to_json() for v in self.vectors]}

    def summary_line(self) -> str:
        """``"<lib>: N passed, M failed"``."""
        return f"{self.library}: {self.passed} passed, {self.failed} failed"


def format_line(library: str, r: VectorResult) -> str:
    """The printed line of one vector: ``PASS lib::op[vector] (where):
    max_abs_err E over N elements`` or ``FAIL lib::op[vector] (where):
    message``, followed by ``; warning: W`` for each warning."""
    head = f"{library}::{r.op}[{r.vector}] ({r.where})"
    tail = "".join(f"; warning: {w}" for w in r.warnings)
    if r.passed:
        err = 0.0 if r.max_abs_err is None else r.max_abs_err
        return f"PASS {head}: max_abs_err {err:.3g} over {r.elements} elements{tail}"
    return f"FAIL {head}: {r.message}{tail}"


def write_results(results: LibraryResults, path: str) -> None:
    """Write the results JSON (2-space indent, trailing newline) to ``path``
    (atomically: a temporary file renamed over it).

    Raises:
        OSError: the file cannot be written.
    """
    tmp = f"{path}.tmp{os.getpid()}"
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(results.to_json(), f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


# ---- the plan and its core objects ------------------------------------------

def load_plan(path: str) -> Dict[str, Any]:
    """Read a plan file.

    Raises:
        PlanError: unreadable, not JSON, not an object, or an unknown
            ``format``.
    """
    try:
        with open(path, "r", encoding="utf-8") as f:
            plan = json.load(f)
    except OSError as e:
        raise PlanError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise PlanError(f"{path}: not JSON: {e}") from None
    if not isinstance(plan, dict):
        raise PlanError(f"{path}: not a JSON object")
    if plan.get("format") != 1:
        raise PlanError(f"{path}: plan format {plan.get('format')!r}, this model reads 1")
    return plan


@dataclass
class CoreSpec:
    """One core object of the plan, read and verified in the parent.

    Attributes:
        core: 0..7, or None for single-core.
        lsp: the linker-spec name the plan expects.
        path: the object file (as given, for messages).
        obj: the verified object (None when ``error``).
        fd: the memfd holding a packed payload (None for a plain ``.so``).
        error: why the object cannot be used, or None.
    """

    core: Optional[int]
    lsp: str
    path: str
    obj: Optional[PackedObject] = None
    fd: Optional[int] = None
    error: Optional[str] = None

    def close(self) -> None:
        """Close the memfd (idempotent)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def prepare_cores(plan: Dict[str, Any], root: str = ".") -> Tuple[List[CoreSpec], Optional[str]]:
    """Read and verify every core object of a plan; put each packed payload
    in a memfd (kept open until ``CoreSpec.close``).

    Returns:
        ``(cores, error)``: ``error`` is the first problem that makes every
        vector fail (wrong core list, unreadable or corrupt object), else
        None.
    """
    multicore = bool(plan.get("multicore"))
    entries = plan.get("cores") or []
    want = list(range(abi.NUM_CORES)) if multicore else [None]
    got = [e.get("core") for e in entries if isinstance(e, dict)]
    if got != want:
        return [], (f"plan lists cores {got}, a {'multicore' if multicore else 'single-core'} "
                    f"library needs {want}")
    cores: List[CoreSpec] = []
    error = None
    for e in entries:
        spec = CoreSpec(e.get("core"), e.get("lsp") or "", e.get("object") or "")
        if spec.lsp != abi.lsp_name(spec.core):
            spec.error = (f"plan gives core {spec.core} the linker spec {spec.lsp!r}, "
                          f"expected {abi.lsp_name(spec.core)!r}")
        else:
            full = os.path.normpath(os.path.join(root, spec.path))
            try:
                spec.obj = read_object(full, spec.path)
                if spec.obj.packed:
                    spec.fd = payload_fd(spec.obj)
            except LoadError as err:
                spec.error = str(err)
        if spec.error and error is None:
            error = spec.error
        cores.append(spec)
    return cores, error


# ---- device memory of one vector -------------------------------------------------

class DeviceImage:
    """The device memory of one vector, shared with the forked child.

    Args:
        inputs: the vector's inputs in schema order.
        out_dtype, out_shape: the output.
        num_cores: 1 (single-core) or 8.
        scratch_size: bytes of each core's scratch window.
        out_location: ``"hbm"`` (default) or ``"sbuf"``: the storage arm
            of the output descriptor (customop-marshalling.txt §2, §6.1).
        checks: True (default): one private, poisoned output copy per core
            and pass, and the runtime's checks on (``abi.CHECK_ALL``).
            False: the device's behaviour: every core writes one shared,
            zero-filled output, no poison, no second pass, runtime checks
            off (``--no-checks``).

    Attributes:
        hbm: the HBM input arena (device ``HBM_BASE``); read-only region.
        sbuf: the SBUF window (device ``SBUF_WINDOW_BASE``) holding the
            inputs placed in SBUF; read-only region. An SBUF output's copies
            sit in the same window, 1 MiB-aligned after it.
        arg_stream: the argument stream bytes (abi.h layout).
        out_addr: device address of the output; ``out_desc`` its descriptor.
        out_nbytes, num_elem, itemsize: output size in bytes / elements.
        outputs: ``outputs[pass][core]``: the private output copies (an
            ``Arena`` at ``out_addr`` whose bytes past ``out_nbytes`` are the
            guard zone); pass 0 poisoned with ``POISON_A``, pass 1 filled
            with ``POISON_B`` only when needed. Without checks, pass 0 is
            one zero-filled arena shared by every core.
        cores: one ``CoreMemory`` per core.
        input_spans: ``(name, arena, offset, nbytes)`` of each input (arena
            ``hbm`` or ``sbuf``).
    """

    def __init__(self, inputs: Sequence[Input], out_dtype: dt.DType,
                 out_shape: Tuple[int, ...], num_cores: int, scratch_size: int,
                 out_location: str = "hbm", checks: bool = True):
        self.checks = checks
        self._masks: Dict[int, List[np.ndarray]] = {}
        self.out_dtype = out_dtype
        self.out_shape = tuple(out_shape)
        self.out_location = out_location
        self.itemsize = out_dtype.itemsize
        self.num_elem = int(np.prod(self.out_shape, dtype=np.int64)) if self.out_shape else 1
        self.out_nbytes = self.num_elem * self.itemsize
        in_sbuf = [i.location == "sbuf" for i in inputs]
        capacity = ALIGN * (2 * len(inputs) + 4)
        capacity += sum(align_up(max(i.array.nbytes, 1)) for i, s in zip(inputs, in_sbuf) if not s)
        sbuf_capacity = ALIGN * (len(inputs) + 1)
        sbuf_capacity += sum(align_up(max(i.array.nbytes, 1)) for i, s in zip(inputs, in_sbuf) if s)
        self.hbm = Arena(HBM_BASE, capacity)
        # customop-marshalling.txt §6.1: SBUF storage is an offset from the
        # _sbuf_window base; the model's window starts with the SBUF inputs.
        self.sbuf = Arena(SBUF_WINDOW_BASE, sbuf_capacity)
        self.input_spans: List[Tuple[str, Arena, int, int]] = []
        descriptors = []
        for inp, sbuf in zip(inputs, in_sbuf):
            arena = self.sbuf if sbuf else self.hbm
            addr = arena.write_array(inp.array)
            self.input_spans.append((inp.name, arena, addr - arena.device_base, inp.array.nbytes))
            descriptors.append(self._descriptor(inp.dtype, inp.array.shape, addr, sbuf))
        self.arg_stream = abi.pack_arg_stream(descriptors)
        if out_location == "sbuf":
            self.out_addr = SBUF_WINDOW_BASE + align_up(sbuf_capacity, 1 << 20)
        else:
            self.out_addr = HBM_BASE + align_up(capacity, 1 << 20)
        self.out_desc = self._descriptor(out_dtype, self.out_shape, self.out_addr,
                                         out_location == "sbuf")
        self.input_snapshot = self.hbm.u8[:self.hbm.used].copy()
        self.sbuf_snapshot = self.sbuf.u8[:self.sbuf.used].copy()
        out_capacity = align_up(max(self.out_nbytes, 1))
        if checks:
            self.outputs: List[List[Arena]] = [
                [Arena(self.out_addr, out_capacity, GUARD_BYTES, populate=(p == 0))
                 for _ in range(num_cores)] for p in range(2)]
            for a in self.outputs[0]:
                a.fill(POISON_A)
        else:   # the device: one output, written by every core
            shared = Arena(self.out_addr, out_capacity)
            self.outputs = [[shared] * num_cores, []]
        self.cores = [CoreMemory(scratch_size) for _ in range(num_cores)]
        self.num_cores = num_cores

    def _descriptor(self, dtype: dt.DType, shape: Tuple[int, ...], addr: int,
                    sbuf: bool = False) -> bytes:
        """The 48-byte descriptor (§2) of a tensor at device address ``addr``:
        HBM arm (u64 address), or SBUF arm (u32 offset from
        ``SBUF_WINDOW_BASE``, one partition of ``num_elem`` elements per
        block). Out-of-line dims are written to the HBM arena as int64."""
        form = abi.choose_shape_form(shape)
        shape_addr = None
        if form == abi.ShapeForm.OUT_OF_LINE:
            shape_addr = self.hbm.write_array(np.asarray(shape, dtype="<i8"))
        if not sbuf:
            return abi.pack_descriptor(dtype.isa, shape, addr, form=form, shape_addr=shape_addr)
        n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
        return abi.pack_descriptor(dtype.isa, shape, addr - SBUF_WINDOW_BASE,
                                   location=abi.Location.SBUF, form=form,
                                   shape_addr=shape_addr, num_partitions=SBUF_PARTITIONS,
                                   num_elem_per_block=n)

    def output_bytes(self, pass_index: int, core: int) -> np.ndarray:
        """The ``out_nbytes`` bytes of a core's output copy (a view)."""
        return self.outputs[pass_index][core].u8[:self.out_nbytes]

    def guard_bytes(self, pass_index: int, core: int) -> np.ndarray:
        """The guard zone after a core's output copy (a view)."""
        a = self.outputs[pass_index][core]
        return a.u8[self.out_nbytes:a.capacity + GUARD_BYTES]

    def masks(self, pass_index: int) -> List[np.ndarray]:
        """Per core, the written mask of one pass (computed once per pass,
        after that pass ran)."""
        if pass_index not in self._masks:
            poison = POISON_A if pass_index == 0 else POISON_B
            self._masks[pass_index] = [
                written_mask(self.output_bytes(pass_index, k), poison, self.itemsize,
                             self.num_elem) for k in range(self.num_cores)]
        return self._masks[pass_index]

    def needs_second_pass(self) -> bool:
        """After pass 0: does any element look unwritten by every core, or
        does a core look idle? Only then can a value equal to the poison
        have fooled the check."""
        if not self.checks:
            return False
        masks = self.masks(0)
        union = np.zeros(self.num_elem, dtype=bool)
        for m in masks:
            union |= m
        idle = self.num_cores > 1 and any(not m.any() for m in masks)
        return bool(not union.all() or idle)

    def prepare_second_pass(self) -> None:
        """Fill the pass-1 copies with ``POISON_B`` and restore the inputs."""
        for a in self.outputs[1]:
            a.fill(POISON_B)
        self._masks.pop(1, None)
        self.hbm.u8[:len(self.input_snapshot)] = self.input_snapshot
        self.sbuf.u8[:len(self.sbuf_snapshot)] = self.sbuf_snapshot

    def binding(self, pass_index: int, k: int, core_id: int, stack_scale: int,
                arg_stream_host: int, retval_host: int) -> abi.GpsimdCoreBinding:
        """The ``gpsimd_core_binding`` of core ``k`` for one pass: regions
        [HBM inputs arena (read-only), SBUF inputs arena (read-only), this
        core's output copy (``out_nbytes`` bytes)], its
        scratch/dataram/printf/report buffers, and the SBUF window base
        ``SBUF_WINDOW_BASE`` that the runtime adds to SBUF offsets
        (customop-marshalling.txt §6.1)."""
        cm = self.cores[k]
        b = abi.GpsimdCoreBinding()
        b.abi_version = abi.ABI_VERSION
        b.core_id = core_id
        b.core_count = self.num_cores
        b.num_regions = 3
        b.regions[0] = self.hbm.region(abi.REGION_READONLY)
        b.regions[1] = self.sbuf.region(abi.REGION_READONLY)
        b.regions[2] = self.outputs[pass_index][k].region(0, self.out_nbytes)
        b.scratch_host = cm.scratch.host
        b.dataram_host = cm.dataram.host
        b.sbuf_window_base = SBUF_WINDOW_BASE
        b.arg_stream_host = arg_stream_host
        b.retval_host = retval_host
        b.printf_host = cm.printf.host
        b.report_host = cm.report_buf.host
        b.stack_scale = stack_scale
        # abi.h GPSIMD_CHECK_*: empty() storage gets this pass's poison byte
        b.checks = abi.CHECK_ALL if self.checks else 0
        b.poison = POISON_A if pass_index == 0 else POISON_B
        return b

    def modified_inputs(self) -> List[Tuple[str, int]]:
        """Inputs whose bytes changed during the run: ``(name, bytes changed)``."""
        out = []
        for name, arena, off, n in self.input_spans:
            snap = self.sbuf_snapshot if arena is self.sbuf else self.input_snapshot
            now = arena.u8[off:off + n]
            changed = int(np.count_nonzero(now != snap[off:off + n]))
            if changed:
                out.append((name, changed))
        return out

    def close(self) -> None:
        """Unmap everything."""
        self.hbm.close()
        self.sbuf.close()
        for row in self.outputs:
            for a in set(row):
                a.close()
        for cm in self.cores:
            cm.close()


# ---- the child that runs the cores -------------------------------------------------

def _child_main(wfd: int, image: DeviceImage, cores: Sequence[CoreSpec],
                op_name: str, stack_scale: int) -> None:
    """Runs in the forked child: every core of pass 0 (and pass 1 when
    needed); one JSON line per event on ``wfd``. Never returns."""
    def emit(event: Dict[str, Any]) -> None:
        data = (json.dumps(event) + "\n").encode()
        while data:
            data = data[os.write(wfd, data):]

    current = -1
    try:
        try:  # a crashing kernel is an expected outcome: no core file,
            import faulthandler  # no Python traceback of the model
            import resource
            faulthandler.disable()
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, ValueError, OSError):
            pass
        loaded = []
        keep = []
        for pass_index in (0, 1):
            if pass_index == 1:
                if not image.needs_second_pass():
                    break
                image.prepare_second_pass()
            faulted = False
            for k, spec in enumerate(cores):
                current = k
                emit({"event": "start", "core": k, "pass": pass_index})
                if pass_index == 0:
                    obj = load_object(spec.obj, spec.fd)
                    obj.check_lsp(spec.lsp, spec.core)
                    obj.register_ops()
                    loaded.append(obj)
                obj = loaded[k]
                launcher = obj.ops.get(op_name)
                if launcher is None:
                    raise LoadError(f"{spec.path}: op {op_name!r} is not registered "
                                    f"(get_func_name gives {', '.join(obj.ops) or 'nothing'})")
                cm = image.cores[k]
                cm.reset_report()
                arg_buf = ctypes.create_string_buffer(image.arg_stream, len(image.arg_stream))
                ret_buf = ctypes.create_string_buffer(image.out_desc, len(image.out_desc))
                keep.append((arg_buf, ret_buf))
                binding = image.binding(pass_index, k, 0 if spec.core is None else spec.core,
                                        stack_scale, ctypes.addressof(arg_buf),
                                        ctypes.addressof(ret_buf))
                keep.append(binding)
                rc = obj.bind_core(binding)
                if rc != 0:
                    emit({"event": "done", "core": k, "pass": pass_index, "bind": rc})
                    faulted = True
                    continue
                status = int(launcher())
                emit({"event": "done", "core": k, "pass": pass_index, "bind": 0,
                      "status": status})
                if status != abi.STATUS_OK or cm.report.status != abi.STATUS_OK:
                    faulted = True
            current = -1
            if faulted:
                break
        emit({"event": "end"})
    except LoadError as e:
        _safe_emit(emit, {"event": "error", "core": current, "message": str(e)})
    except BaseException as e:  # a model bug: report it, never hang the parent
        _safe_emit(emit, {"event": "error", "core": current,
                          "message": f"device model error: {type(e).__name__}: {e}"})
    finally:
        os._exit(0)


def _safe_emit(emit, event) -> None:
    try:
        emit(event)
    except BaseException:
        pass


@dataclass
class _ChildOutcome:
    events: List[Dict[str, Any]]
    timed_out: bool
    wait_status: Optional[int]
    elapsed: float


def _run_child(image: DeviceImage, cores: Sequence[CoreSpec], op_name: str,
               stack_scale: int, timeout: float) -> _ChildOutcome:
    rfd, wfd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        _child_main(wfd, image, cores, op_name, stack_scale)
    os.close(wfd)
    events: List[Dict[str, Any]] = []
    pending = b""
    timed_out = False
    deadline = start + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            try:
                ready, _, _ = select.select([rfd], [], [], remaining)
            except InterruptedError:
                continue
            if not ready:
                continue
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
        status = None
        if not timed_out:
            # EOF: the child is exiting; give it until the deadline. Wait on
            # a pidfd (readable when the child has exited) where the kernel
            # has one (Linux >= 5.3), else poll.
            pidfd = None
            if hasattr(os, "pidfd_open"):
                try:
                    pidfd = os.pidfd_open(pid)
                except OSError:
                    pidfd = None
            try:
                while True:
                    got, st = os.waitpid(pid, os.WNOHANG)
                    if got:
                        status = st
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        timed_out = True
                        break
                    if pidfd is not None:
                        try:
                            select.select([pidfd], [], [], remaining)
                        except InterruptedError:
                            pass
                    else:
                        time.sleep(0.002)
            finally:
                if pidfd is not None:
                    os.close(pidfd)
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError as e:
                if e.errno != errno.ESRCH:
                    raise
            _, status = os.waitpid(pid, 0)
    except BaseException:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise
    finally:
        os.close(rfd)
    return _ChildOutcome(events, timed_out, status, time.monotonic() - start)


# ---- judging one vector -------------------------------------------------------------

def _running_core(events: Sequence[Dict[str, Any]]) -> Optional[Tuple[int, int]]:
    """(core index, pass) started but not finished, if any."""
    done = {(e["core"], e["pass"]) for e in events if e.get("event") == "done"}
    for e in reversed(events):
        if e.get("event") == "start" and (e["core"], e["pass"]) not in done:
            return e["core"], e["pass"]
    return None


def _core_name(cores: Sequence[CoreSpec], k: int) -> str:
    c = cores[k].core
    return f"core {0 if c is None else c}"


_ARG_INDEX = re.compile(r"argument index (\d+)")


def name_arguments(message: str, op: Optional[Dict[str, Any]]) -> str:
    """``message`` with every ``argument index N`` of the runtime (which knows
    positions only, customop-marshalling.txt §2.1) followed by the schema
    argument it is: ``argument index 1 (alpha: Scalar)``. Indices past the
    op's arguments (the ``curr_arg_ < num`` guard) are left as they are."""
    args = (op or {}).get("args") or []

    def label(m: "re.Match[str]") -> str:
        i = int(m.group(1))
        if i < len(args):
            return f"{m.group(0)} ({args[i].get('name')}: {args[i].get('type')})"
        return m.group(0)
    return _ARG_INDEX.sub(label, message)


def _report_text(image: DeviceImage, k: int, op: Optional[Dict[str, Any]] = None) -> str:
    """``fault KIND in op NAME: message`` of core ``k``'s report (faults.h
    kind names; the op is named when the fault happened in a launch), or ""
    when the core reported nothing."""
    r = image.cores[k].report
    msg = r.message.decode("utf-8", errors="replace").strip()
    if r.status == abi.STATUS_OK and not msg:
        return ""
    where = f" in op {op.get('name')}" if op else ""
    return f"fault {fault_name(r.fault_kind)}{where}" + (
        f": {name_arguments(msg, op)}" if msg else "")


def _printf_tail(image: DeviceImage, k: int, limit: int = 300) -> str:
    text = image.cores[k].printf_text()
    if not text:
        return ""
    text = text[-limit:].replace("\n", "\\n")
    return f"; printf ends with: {text!r}"


def _judge_run(image: DeviceImage, cores: Sequence[CoreSpec], outcome: _ChildOutcome,
               timeout: float, op: Optional[Dict[str, Any]] = None) -> Tuple[List[str], bool]:
    """Failures from the way the child ended and from the core reports.

    Returns ``(problems, fatal)``: ``fatal`` when the outputs cannot be
    judged at all (timeout, crash, model error); faults reported by the
    runtime are not fatal (the outputs still tell which elements were
    written), but the output is then not compared.
    """
    events = outcome.events
    running = _running_core(events)
    again = lambda p: " (second run)" if p else ""
    if outcome.timed_out:
        where = (f" ({_core_name(cores, running[0])} was running{again(running[1])})"
                 if running else "")
        return [f"timed out after {timeout:g} s{where}"], True
    st = outcome.wait_status
    if st is not None and os.WIFSIGNALED(st):
        sig = os.WTERMSIG(st)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if running:
            k = running[0]
            detail = _report_text(image, k, op)
            msg = f"{_core_name(cores, k)} crashed with {name}{again(running[1])}"
            if detail:
                msg += f" ({detail})"
            return [msg + _printf_tail(image, k)], True
        return [f"the device model process died with {name}"], True
    errors = [e for e in events if e.get("event") == "error"]
    if errors:
        return [errors[0].get("message", "device model error")], True
    if st is not None and os.WIFEXITED(st) and os.WEXITSTATUS(st) != 0:
        who = _core_name(cores, running[0]) if running else "the device model"
        return [f"{who} exited the process with status {os.WEXITSTATUS(st)}"], True
    if running:
        return [f"{_core_name(cores, running[0])} ended the process "
                f"(exit status {os.WEXITSTATUS(st) if st is not None else '?'})"
                + _printf_tail(image, running[0])], True
    if not any(e.get("event") == "end" for e in events):
        return ["the device model process ended early"], True

    # Faults, grouped: identical texts of several cores are listed once.
    faults: Dict[str, List[int]] = {}
    for e in events:
        if e.get("event") != "done":
            continue
        k = e["core"]
        if e.get("bind", 0) != 0:
            detail = _report_text(image, k)
            text = f"gpsimd_bind_core returned {e['bind']}" + (f" ({detail})" if detail else "")
        elif e.get("status", 0) != abi.STATUS_OK or image.cores[k].report.status != abi.STATUS_OK:
            text = _report_text(image, k, op) or f"launcher returned {e.get('status')}"
        else:
            continue
        core_no = cores[k].core if cores[k].core is not None else 0
        faults.setdefault(text, [])
        if core_no not in faults[text]:
            faults[text].append(core_no)
    problems = [f"{cores_text(nums)}: {text}" for text, nums in faults.items()]

    for k in range(image.num_cores):
        r = image.cores[k].report
        name = _core_name(cores, k)
        for what, used, cap in (("TCM pool", r.tcm_peak, abi.TCM_POOL_SIZE),
                                ("dataram", r.dataram_peak, abi.DATARAM_SIZE),
                                ("scratch window", r.scratch_peak, image.cores[k].scratch.size)):
            if used > cap:
                problems.append(f"{name} used {used} bytes of the {what} (capacity {cap})")
    return problems, False


def _warnings(image: DeviceImage, cores: Sequence[CoreSpec]) -> List[str]:
    """What the cores' reports show that does not fail a vector, grouped
    like faults (``"cores 0-7: text"``):

    * each warning the runtime raised (abi.h ``gpsimd_core_report.warnings``,
      e.g. stream coherence under INCOHERENT_VERBOSE), and how many more
      did not fit the 1024-byte buffer;
    * a printf ring that wrapped: more than ``abi.PRINTF_CAPACITY`` (128 KiB)
      printed, the oldest bytes dropped (device-api.md "Limits").
    """
    grouped: Dict[str, List[int]] = {}
    for k in range(image.num_cores):
        r = image.cores[k].report
        texts = [t for t in r.warnings.decode("utf-8", errors="replace").split("\n") if t]
        if r.warning_count > len(texts):
            texts.append(f"{r.warning_count - len(texts)} more warning(s) not kept")
        if r.printf_total > abi.PRINTF_CAPACITY:
            texts.append(f"printf output wrapped: {r.printf_total} bytes printed, the "
                         f"{abi.PRINTF_CAPACITY}-byte buffer kept the last {abi.PRINTF_CAPACITY} "
                         f"(the oldest {r.printf_total - abi.PRINTF_CAPACITY} dropped; "
                         f"device-api.md \"Limits\")")
        core_no = cores[k].core if cores[k].core is not None else 0
        for t in texts:
            nums = grouped.setdefault(t, [])
            if core_no not in nums:
                nums.append(core_no)
    return [f"{cores_text(nums)}: {t}" for t, nums in grouped.items()]


def _judge_output(image: DeviceImage, cores: Sequence[CoreSpec], expected: np.ndarray,
                  rtol: float, atol: float, passes: int) -> Tuple[List[str], Optional[Comparison]]:
    """Problems the output shows, and the comparison with ``expected`` (None
    when elements were never written). With checks: writes past the end
    (guard zones), modified inputs, holes / overlaps / idle cores from the
    written masks of both passes; without checks, only the comparison of
    the one shared output."""
    problems: List[str] = []
    if not image.checks:
        actual = image.output_bytes(0, 0).view(image.out_dtype.numpy).reshape(image.out_shape)
        return problems, compare(actual, expected, image.out_dtype, rtol, atol)
    core_ids = [0 if c.core is None else c.core for c in cores]
    for k in range(image.num_cores):
        beyond = guard_writes(image.guard_bytes(0, k), POISON_A, image.itemsize, image.num_elem)
        if beyond:
            problems.append(f"{_core_name(cores, k)} wrote past the end of the output: "
                            f"elements {format_ranges(beyond)} (the output has "
                            f"{image.num_elem} elements)")
    for name, n in image.modified_inputs():
        problems.append(f"input {name!r} was modified ({n} bytes changed)")

    masks = image.masks(0)
    if passes > 1:
        masks = [a | b for a, b in zip(masks, image.masks(1))]
    outputs = [image.output_bytes(0, k) for k in range(image.num_cores)]
    merged = merge_core_outputs(outputs, image.itemsize, image.num_elem,
                                masks=masks, core_ids=core_ids)
    holes = bool(merged.holes)
    merge_problems = list(merged.problems)
    if (image.num_cores == 1 and holes
            and image.cores[0].report.flags & abi.REPORT_COPY_PATH):
        # the copy path wrote every element (§6.4): the holes are elements of
        # the returned tensor the kernel never wrote (empty() is poisoned
        # with the pass's poison byte, abi.h GPSIMD_CHECK_POISON_EMPTY)
        merge_problems = [
            "uninitialised elements reached the output through the copy path (the returned "
            "tensor, copied by customop_return_tensor, was never written there; e.g. "
            f"torch::empty() storage): {format_ranges(merged.holes)}"]
    if image.num_cores > 1 and image.num_elem < image.num_cores:
        # fewer elements than cores: a fair split leaves some cores idle
        merge_problems = [p for p in merge_problems if not p.endswith("wrote nothing")]
    problems += merge_problems
    if holes:
        return problems, None
    actual = merged.merged.view(image.out_dtype.numpy).reshape(image.out_shape)
    return problems, compare(actual, expected, image.out_dtype, rtol, atol)


def run_vector(library: str, op: Dict[str, Any], vector: Dict[str, Any],
               cores: Sequence[CoreSpec], core_error: Optional[str] = None, *,
               root: str = ".", timeout: float = DEFAULT_TIMEOUT,
               stack_scale: int = DEFAULT_STACK_SCALE,
               patch_image: Optional[Callable[["DeviceImage"], None]] = None,
               checks: bool = True) -> VectorResult:
    """Run one vector on every core and judge it.

    Args:
        library: the library name.
        op: the plan's op entry (``name``, ``args``, ``vectors``, ...).
        vector: the plan's vector entry.
        cores: from ``prepare_cores`` (one, or eight in core order).
        core_error: a problem with the core objects: the vector fails with it.
        root: directory plan paths are relative to.
        timeout: seconds for all cores of the vector together.
        stack_scale: host stack bytes per device stack byte.
        patch_image: fault injection for tests: called with the laid-out
            ``DeviceImage`` before the cores run; it may rewrite
            ``arg_stream`` / ``out_desc`` (bytes) to provoke the runtime's
            guards with descriptors a correct host never writes.
        checks: False runs as the device does (``DeviceImage``): no poison,
            no second pass, no write-set / uninitialised-output checks, the
            runtime's extra checks off; crashes, timeouts and the runtime's
            own faults are still reported.

    Returns:
        A ``VectorResult``; never raises for problems of the plan, the
        objects or the kernel.
    """
    result = VectorResult(op.get("name", "?"), vector.get("name", "?"),
                          vector.get("where", "?"), "fail")
    try:
        inputs = make_inputs(op, vector, root)
        out_spec = vector.get("output") or {}
        try:
            out_dtype = dt.by_name(out_spec.get("dtype"))
        except KeyError as e:
            raise PlanError(f"output: {e.args[0]}") from None
        expected = expected_output(vector, inputs, out_dtype, root)
        shape = output_shape(vector, expected)
        rtol, atol = tolerances(vector, out_dtype)
        out_location = location_of(out_spec, "output")
        if len(shape) > 8:
            raise PlanError(f"output rank {len(shape)} > 8")
    except PlanError as e:
        result.message = str(e)
        return result
    except MemoryError as e:
        result.message = f"the vector's inputs or expected output do not fit in memory ({e})"
        return result
    if core_error:
        result.message = core_error
        return result
    if not cores:
        result.message = "the plan lists no core objects"
        return result

    multicore = cores[0].core is not None
    scratch = abi.SCRATCH_CORE_SIZE if multicore else abi.SCRATCH_SINGLE_SIZE
    try:
        image = DeviceImage(inputs, out_dtype, shape, len(cores), scratch, out_location,
                            checks=checks)
    except (ValueError, MemoryError, OSError) as e:
        result.message = f"cannot lay out device memory: {e}"
        return result
    try:
        if patch_image is not None:
            patch_image(image)
        try:
            outcome = _run_child(image, cores, result.op, stack_scale, timeout)
        except OSError as e:    # fork/pipe failed: a host problem, not the kernel's
            result.message = f"cannot start the device model process: {e}"
            return result
        problems, fatal = _judge_run(image, cores, outcome, timeout, op)
        result.printf = image.cores[0].printf_text()
        if checks:
            result.warnings = _warnings(image, cores)
        comparison = None
        if not fatal:
            passes = 1 + any(e.get("event") == "start" and e.get("pass") == 1
                             for e in outcome.events)
            more, comparison = _judge_output(image, cores, expected, rtol, atol, passes)
            if problems:        # a core faulted: say what was written, compare nothing
                comparison = None
            problems += more
        if comparison is not None:
            result.max_abs_err = comparison.max_abs_err
            result.mismatches = comparison.mismatches
            result.elements = comparison.total
            if not comparison.ok:
                problems.append(comparison.message)
        if problems:
            hint = _expected_shape_hint(vector, shape, problems)
            result.message = "; ".join(problems + ([hint] if hint else []))
        else:
            result.status = "pass"
        return result
    finally:
        image.close()


def _expected_shape_hint(vector: Dict[str, Any], shape: Sequence[int],
                         problems: Sequence[str]) -> Optional[str]:
    """When the output descriptor's size was taken from the expected result
    (no ``output.shape`` in the vector) and the kernel's result does not fit
    it, say where that size came from: the reference or the inline values
    may be what is wrong, not the kernel."""
    if (vector.get("output") or {}).get("shape") is not None:
        return None
    if not any("the output descriptor has" in p for p in problems):
        return None
    exp = vector.get("expected") or {}
    if "reference" in exp:
        ref = exp["reference"]
        source = f"the reference {ref.get('file') or ref.get('module')}:{ref.get('function')}"
    elif "values" in exp:
        source = "the vector's expected values"
    else:
        source = f"the expected .npy {exp.get('npy')}"
    return (f"the output descriptor's shape {list(shape)} comes from {source} "
            f"(give output.shape to fix it, or check the reference)")


def run_plan(plan: Dict[str, Any], *, root: str = ".", timeout: float = DEFAULT_TIMEOUT,
             stack_scale: int = DEFAULT_STACK_SCALE,
             on_result: Optional[Callable[[VectorResult], None]] = None,
             checks: bool = True) -> LibraryResults:
    """Run every vector of every op of a plan.

    Args:
        plan: the plan document (``load_plan``).
        root: directory the plan's relative paths are resolved against
            (where SCons runs: the project top).
        timeout: seconds per vector.
        stack_scale: host stack bytes per device stack byte.
        on_result: called with each ``VectorResult`` as soon as it is known
            (the CLI prints its line).
        checks: False for ``--no-checks`` (see ``run_vector``).

    Returns:
        The ``LibraryResults``.
    """
    library = plan.get("library") or "?"
    results = LibraryResults(library)
    cores, core_error = prepare_cores(plan, root)
    try:
        for op in plan.get("ops") or []:
            for vector in op.get("vectors") or []:
                r = run_vector(library, op, vector, cores, core_error,
                               root=root, timeout=timeout, stack_scale=stack_scale,
                               checks=checks)
                results.vectors.append(r)
                if on_result is not None:
                    on_result(r)
    finally:
        for c in cores:
            c.close()
    return results
