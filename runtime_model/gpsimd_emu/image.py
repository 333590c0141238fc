"""The device memory of one vector (``DeviceImage``) and the runs of its
cores (``RunSpec``), laid out in one memfd (``memory.ImageFile``).

A vector's cores run several times (ARCHITECTURE.md "The checks"):

* run 0: each core against a private copy of the output poisoned with
  ``POISON_A`` (``torch::empty()`` storage with the same byte, the
  dataram/TCM window with ``TCM_POISON_A``);
* run 1 (``second``): the same with ``POISON_B``, ``TCM_POISON_B``; the
  vector's process
  decides after run 0 whether it is needed (multicore always; single-core
  when run 0 left an element holding the poison or the kernel used TCM,
  dataram staging, ``torch::empty()`` or read never-written output);
* runs 2 and 3 (multicore): every core against one shared, zero-filled
  output, in the orders 0..7 and 7..0 (memory poisoned as in run 1);
* without checks: one run, every core against one shared zero-filled
  output, as on the device.

The file holds, page-aligned, in this order: the control block
(``gpsimd_emu.control``), one ``gpsimd_core_binding`` per run and core,
the argument stream and output descriptor, and per run: the HBM and SBUF
input arenas (a copy per run, at the same device addresses, so that runs
that go on at the same time cannot see each other's writes to an input),
the outputs (each with a guard zone), and per core the scratch window,
dataram, printf ring, report and read map. A binding's host pointers are
*offsets into the file*: each process that maps the image adds its own base
(``gpsimd_emu.launch``).
"""

from __future__ import annotations

import ctypes
import mmap
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import abi
from . import control
from . import dtypes as dt
from .memory import (ALIGN, GUARD_BYTES, HBM_BASE, POISON_A, POISON_B, SBUF_PARTITIONS,
                     SBUF_WINDOW_BASE, TCM_POISON_A, TCM_POISON_B, Arena, CoreMemory, ImageFile,
                     align_up)
from .merge import written_mask
from .vectors import Input

__all__ = ["RunSpec", "runs_for", "ImageSize", "DeviceImage"]

PAGE = mmap.PAGESIZE
_BINDING = ctypes.sizeof(abi.GpsimdCoreBinding)


@dataclass(frozen=True)
class RunSpec:
    """One run of a vector's cores.

    Attributes:
        index: 0..3 (its slot in the control block).
        private: each core writes its own poisoned copy of the output
            (``out_poison``); else all write one shared zero-filled output.
        poison: the binding's ``poison`` byte (``empty()`` storage, the
            private copies).
        tcm_poison: the binding's ``tcm_poison`` (the dataram window).
        order: the cores (indices into the plan's core list) in the order
            they are claimed; one process at a time runs an ordered run
            (``ordered``), others may be shared by several processes.
        ordered: the order matters (the fixed-order runs).
        second: the second private run (run only when the first says so).
        checks: the binding's ``GPSIMD_CHECK_*`` bits.
        label: how messages name the run (``" (second run)"``, ...).
    """

    index: int
    private: bool
    poison: int
    tcm_poison: int
    order: Tuple[int, ...]
    ordered: bool = False
    second: bool = False
    checks: int = 0
    label: str = ""

    def to_json(self) -> dict:
        return {"index": self.index, "private": self.private, "poison": self.poison,
                "order": list(self.order), "ordered": self.ordered, "second": self.second}


def runs_for(num_cores: int, checks: bool) -> List[RunSpec]:
    """The runs of a vector (module text)."""
    cores = tuple(range(num_cores))
    if not checks:
        return [RunSpec(0, False, 0, 0, cores)]
    runs = [RunSpec(0, True, POISON_A, TCM_POISON_A, cores, checks=abi.CHECK_ALL),
            RunSpec(1, True, POISON_B, TCM_POISON_B, cores, second=True, checks=abi.CHECK_ALL,
                    label=" (second run)")]
    if num_cores > 1:
        # memory poisoned as in run 1: an element that matches run 1 in
        # both orders depends on never-written memory, not on the output
        shared = abi.CHECK_ALL & ~abi.CHECK_READS
        runs += [RunSpec(2, False, POISON_B, TCM_POISON_B, cores, ordered=True, checks=shared,
                         label=" (cores in the order 0..7, one shared output)"),
                 RunSpec(3, False, POISON_B, TCM_POISON_B, cores[::-1], ordered=True,
                         checks=shared, label=" (cores in the order 7..0, one shared output)")]
    return runs


@dataclass
class ImageSize:
    """Bytes of a vector's device image, by part (``DeviceImage.plan``)."""

    inputs: int
    outputs: int
    output_copies: int
    core_memory: int
    other: int

    @property
    def total(self) -> int:
        return self.inputs + self.outputs + self.core_memory + self.other

    def describe(self) -> str:
        """``"inputs 1 GiB, 18 output copies of 4 MiB, ..."`` for messages."""
        from .settings import format_size
        per = self.outputs // max(1, self.output_copies)
        return (f"inputs {format_size(self.inputs)}, {self.output_copies} output copies of "
                f"{format_size(per)}, per-core memories {format_size(self.core_memory)}")


class DeviceImage:
    """The device memory of one vector, in one memfd shared with the
    vector's processes.

    Args:
        inputs: the vector's inputs in schema order.
        out_dtype, out_shape: the output.
        num_cores: 1 (single-core) or 8.
        scratch_size: bytes of each core's scratch window.
        out_location: ``"hbm"`` (default) or ``"sbuf"``: the storage arm
            of the output descriptor (customop-marshalling.txt §2, §6.1).
        checks: True: the runs of ``runs_for`` with checks; False: one run
            as the device does.
        stack_scale: the bindings' ``stack_scale``.

    Attributes:
        runs: the ``RunSpec`` list.
        file: the ``ImageFile``.
        ctl: its ``control.ControlBlock``.
        arenas: per run, its ``(hbm, sbuf)`` input arenas (device
            ``HBM_BASE`` / ``SBUF_WINDOW_BASE``); ``hbm``, ``sbuf``: run 0's.
        arg_stream, out_desc: the argument stream and output descriptor
            bytes; ``write_args`` stores them (after a test patched them).
        out_addr, out_nbytes, num_elem, itemsize: the output.
        outputs: ``outputs[run][core]``: the output ``Arena`` a core writes
            in that run (the same arena for every core of a shared run);
            bytes past ``out_nbytes`` are the guard zone.
        mem: ``mem[run][core]``: the ``CoreMemory`` of a core in a run.
        cores: ``mem[0]`` (the first run's reports and printf).
        input_spans: ``(name, arena, offset, nbytes)`` of each input.
    """

    @staticmethod
    def plan(input_nbytes: Sequence[int], out_nbytes: int, num_cores: int,
             scratch_size: int, checks: bool) -> ImageSize:
        """The bytes an image of these sizes takes, before any is made. The
        scratch windows are not counted: they are the device's, sparse in
        the file, and count (in the vector's cgroup) as the cores touch
        them."""
        runs = runs_for(num_cores, checks)
        copies = sum(num_cores if r.private else 1 for r in runs)
        out_each = align_up(align_up(max(out_nbytes, 1)) + GUARD_BYTES, PAGE)
        read_map = align_up(max((out_nbytes + 7) // 8, 1), PAGE)
        per_core = CoreMemory.nbytes(scratch_size) - align_up(scratch_size, PAGE)
        core_memory = sum(num_cores * (per_core + (read_map if r.private else 0)) for r in runs)
        inputs = len(runs) * sum(align_up(max(n, 1), ALIGN) + ALIGN for n in input_nbytes)
        other = (control.SIZE + align_up(len(runs) * num_cores * _BINDING, PAGE) + 2 * PAGE
                 + len(runs) * (2 * PAGE + align_up(ALIGN * (3 * len(input_nbytes) + 5), PAGE)))
        return ImageSize(inputs, copies * out_each, copies, core_memory, other)

    def __init__(self, inputs: Sequence[Input], out_dtype: dt.DType,
                 out_shape: Tuple[int, ...], num_cores: int, scratch_size: int,
                 out_location: str = "hbm", checks: bool = True,
                 stack_scale: int = 16):
        self.checks = checks
        self.runs = runs_for(num_cores, checks)
        self.num_cores = num_cores
        self.stack_scale = stack_scale
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
        out_capacity = align_up(max(self.out_nbytes, 1))
        self.read_map_bytes = (self.num_elem + 7) // 8

        # the file's layout (every part page-aligned)
        at = control.SIZE
        self._bindings_at = at
        at += align_up(len(self.runs) * num_cores * _BINDING, PAGE)
        self._args_at = at
        at += 2 * PAGE
        in_at: List[Tuple[int, int]] = []
        out_at: List[List[int]] = []
        mem_at: List[List[Tuple[int, Optional[int]]]] = []
        out_each = align_up(out_capacity + GUARD_BYTES, PAGE)
        per_core = CoreMemory.nbytes(scratch_size)
        rmap = align_up(max(self.read_map_bytes, 1), PAGE)
        for r in self.runs:
            in_at.append((at, at + align_up(capacity, PAGE)))
            at += align_up(capacity, PAGE) + align_up(sbuf_capacity, PAGE)
            out_at.append([at + out_each * (k if r.private else 0) for k in range(num_cores)])
            at += out_each * (num_cores if r.private else 1)
            row = []
            for _ in range(num_cores):
                row.append((at, at + per_core if r.private else None))
                at += per_core + (rmap if r.private else 0)
            mem_at.append(row)
        self.file = ImageFile(at)
        try:
            self.ctl = control.ControlBlock(self.file.mm, 0, self.file.host)
            # customop-marshalling.txt §6.1: SBUF storage is an offset from the
            # _sbuf_window base; the model's window starts with the SBUF inputs.
            self.arenas = [(Arena(HBM_BASE, capacity, backing=(self.file, h)),
                            Arena(SBUF_WINDOW_BASE, sbuf_capacity, backing=(self.file, sb)))
                           for h, sb in in_at]
            self.hbm, self.sbuf = self.arenas[0]
            self.input_spans: List[Tuple[str, Arena, int, int]] = []
            descriptors = []
            for inp, sbuf in zip(inputs, in_sbuf):
                arena = self.sbuf if sbuf else self.hbm
                addr = arena.write_array(inp.array)
                self.input_spans.append((inp.name, arena, addr - arena.device_base,
                                         inp.array.nbytes))
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
            for hbm, sbuf in self.arenas[1:]:
                hbm.u8[:self.hbm.used] = self.input_snapshot
                sbuf.u8[:self.sbuf.used] = self.sbuf_snapshot
            self.outputs: List[List[Arena]] = []
            for r, offs in zip(self.runs, out_at):
                if r.private:
                    self.outputs.append([Arena(self.out_addr, out_capacity, GUARD_BYTES,
                                               backing=(self.file, o)) for o in offs])
                else:
                    shared = Arena(self.out_addr, out_capacity, GUARD_BYTES,
                                   backing=(self.file, offs[0]))
                    self.outputs.append([shared] * num_cores)
            self.mem = [[CoreMemory(scratch_size, backing=(self.file, m)) for m, _ in row]
                        for row in mem_at]
            self._read_map_at = [[rm for _, rm in row] for row in mem_at]
            self.cores = self.mem[0]
            self.write_args()
        except BaseException:
            self.file.close()
            raise

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

    # ---- before the run -------------------------------------------------

    def write_args(self) -> None:
        """Store ``arg_stream`` and ``out_desc`` and every run's bindings in
        the file (again after a test patched the bytes)."""
        if len(self.arg_stream) > PAGE or len(self.out_desc) > PAGE:
            raise ValueError("argument stream or output descriptor larger than a page")
        u8 = self.file.u8
        a = self._args_at
        u8[a:a + PAGE] = 0
        u8[a:a + len(self.arg_stream)] = np.frombuffer(self.arg_stream, np.uint8)
        u8[a + PAGE:a + 2 * PAGE] = 0
        u8[a + PAGE:a + PAGE + len(self.out_desc)] = np.frombuffer(self.out_desc, np.uint8)
        for r in self.runs:
            for k in range(self.num_cores):
                b = self._binding(r, k)
                at = self._bindings_at + (r.index * self.num_cores + k) * _BINDING
                ctypes.memmove(self.file.host + at, ctypes.addressof(b), _BINDING)

    def _binding(self, run: RunSpec, k: int) -> abi.GpsimdCoreBinding:
        """Core ``k``'s binding in ``run``, with file offsets for host
        pointers (``arg_stream_host`` / ``retval_host`` are the offsets of
        the bytes the vector's process copies for each launch)."""
        cm = self.mem[run.index][k]
        b = abi.GpsimdCoreBinding()
        b.abi_version = abi.ABI_VERSION
        b.core_id = k                   # the plan lists cores 0..7 in order (prepare_cores)
        b.core_count = self.num_cores
        b.num_regions = 3
        out = self.outputs[run.index][k]
        hbm, sbuf = self.arenas[run.index]
        for i, (arena, flags, size) in enumerate((
                (hbm, abi.REGION_READONLY, hbm.capacity),
                (sbuf, abi.REGION_READONLY, sbuf.capacity),
                (out, abi.REGION_OUTPUT, self.out_nbytes))):
            b.regions[i] = abi.GpsimdRegion(arena.device_base, size, arena.file_offset, flags, 0)
        b.scratch_host = cm.scratch.file_offset
        b.dataram_host = cm.dataram.file_offset
        b.sbuf_window_base = SBUF_WINDOW_BASE
        b.arg_stream_host = self._args_at
        b.retval_host = self._args_at + PAGE
        b.printf_host = cm.printf.file_offset
        b.report_host = cm.report_buf.file_offset
        b.stack_scale = self.stack_scale
        b.checks = run.checks
        b.poison = run.poison
        b.tcm_poison = run.tcm_poison
        rm = self._read_map_at[run.index][k]
        if run.private and rm is not None and run.checks & abi.CHECK_READS:
            b.read_map_host = rm
        b.out_itemsize = self.itemsize
        return b

    def request(self) -> dict:
        """What a vector's process needs besides the file: the runs, the
        layout of the bindings and arguments, and the fills of each run's
        private copies (``[offset, nbytes]`` each, with the guard zone)."""
        fills = []
        for r in self.runs:
            if r.private:
                fills.append([[a.file_offset, len(a.u8)] for a in self.outputs[r.index]])
            else:
                fills.append([])
        scan = None
        if self.checks and self.num_cores == 1 and self.itemsize in (1, 2, 4, 8):
            scan = [self.outputs[0][0].file_offset, self.out_nbytes, self.itemsize]
        return {"runs": [r.to_json() for r in self.runs], "ncores": self.num_cores,
                "bindings_at": self._bindings_at, "binding_size": _BINDING,
                "args_at": self._args_at, "arg_len": len(self.arg_stream),
                "desc_len": len(self.out_desc), "page": PAGE, "fills": fills,
                "scan": scan, "size": self.file.size}

    def prefilled_bytes(self) -> int:
        """Bytes of the file the worker itself touched (inputs of every run,
        control, bindings, arguments): charged to the worker, not to the
        vector's processes."""
        return (self._bindings_at + align_up(len(self.runs) * self.num_cores * _BINDING, PAGE)
                + 2 * PAGE + len(self.runs) * (self.hbm.used + self.sbuf.used))

    # ---- after the run --------------------------------------------------

    def output_bytes(self, run: int, core: int) -> np.ndarray:
        """The ``out_nbytes`` bytes of a core's output in a run (a view)."""
        return self.outputs[run][core].u8[:self.out_nbytes]

    def guard_bytes(self, run: int, core: int) -> np.ndarray:
        """The guard zone after a core's output in a run (a view)."""
        a = self.outputs[run][core]
        return a.u8[self.out_nbytes:a.capacity + GUARD_BYTES]

    def masks(self, run: int) -> List[np.ndarray]:
        """Per core, the written mask of a private run (computed once)."""
        if run not in self._masks:
            poison = POISON_A if run == 0 else POISON_B
            self._masks[run] = [
                written_mask(self.output_bytes(run, k), poison, self.itemsize, self.num_elem)
                for k in range(self.num_cores)]
        return self._masks[run]

    def read_map(self, run: int, core: int) -> np.ndarray:
        """Per element, did the core read it before writing it in a
        private run (the runtime's read map; all False when not tracked)."""
        at = self._read_map_at[run][core]
        if at is None:
            return np.zeros(self.num_elem, dtype=bool)
        raw = self.file.u8[at:at + self.read_map_bytes]
        return np.unpackbits(raw, bitorder="little")[:self.num_elem].astype(bool)

    def modified_inputs(self) -> List[Tuple[str, int]]:
        """Inputs whose bytes changed during the first run: ``(name, bytes
        changed)``."""
        out = []
        for name, arena, off, n in self.input_spans:
            snap = self.sbuf_snapshot if arena is self.sbuf else self.input_snapshot
            now = arena.u8[off:off + n]
            changed = int(np.count_nonzero(now != snap[off:off + n]))
            if changed:
                out.append((name, changed))
        return out

    def close(self) -> None:
        """Release the file (idempotent)."""
        self._masks.clear()
        self.file.close()
