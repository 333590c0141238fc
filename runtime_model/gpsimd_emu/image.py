"""The device memory of one vector (``DeviceImage``), laid out in one memfd
(``memory.ImageFile``) for the runs of its cores (``gpsimd_emu.runs``).

The file holds, page-aligned, in this order: the control block
(``gpsimd_emu.control``), one ``gpsimd_core_binding`` per run and core,
the argument stream, output descriptor and gap table, and per run: the HBM
and SBUF input arenas (a copy per run, at the same device addresses, so
that runs that go on at the same time cannot see each other's writes to an
input), the outputs (each with a guard zone), every core's scratch window
and dataram, then every core's records (printf ring, report, read map).
A ``GAP_BYTES`` gap, which the vector's processes map ``PROT_NONE`` (the
gap table), comes before each run's arenas, outputs, cores' memory and
records and after the last run: a stray write that runs on from a tensor
faults (the runtime names the nearest tensor) before it reaches the
model's records. A binding's host pointers are *offsets into the file*:
each process that maps the image adds its own base (``leader.c``), and
once read, the bindings, arguments and gap table are ``PROT_NONE`` there
too (``leader_launch.c``). The worker only writes the inputs, the arguments
and the bindings; the vector's processes poison what they use, so that
what a vector touches is charged to its memory cgroup.
"""

from __future__ import annotations

import ctypes
import math
import mmap
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import abi
from . import control
from . import dtypes as dt
from .memory import (ALIGN, BEFORE_GUARD_BYTES, GAP_BYTES, HBM_BASE, INPUT_GUARD, OUTPUT_GAP_BYTES,
                     SBUF_PARTITIONS, SBUF_WINDOW_BASE, Arena, ImagePool, align_up, core_sizes,
                     out_each, printf_text)
from .merge import written_mask
from .runs import runs_for
from .settings import DEFAULT_STACK_SCALE
from .vectors import Input

__all__ = ["DeviceImage"]

PAGE = mmap.PAGESIZE
_BINDING = ctypes.sizeof(abi.GpsimdCoreBinding)
#: a binding as a numpy record (the same layout: ``abi.GpsimdCoreBinding``'s)
_BINDING_RECORD = np.dtype(abi.GpsimdCoreBinding)


class DeviceImage:
    """The device memory of one vector, in one memfd shared with the
    vector's processes.

    Args:
        inputs: the vector's inputs in schema order.
        out_dtype, out_shape: the output.
        num_cores: 1 (single-core) or 8.
        scratch_size: bytes of each core's scratch window.
        out_location: ``"hbm"`` (default) or ``"sbuf"``: the storage arm
            of the output descriptor (the device ABI (gpsimd_host/abi.h)).
        checks: True: the runs of ``runs_for`` with checks; False: one run
            as the device does.
        pool: the ``ImagePool`` the file is taken from and given back to
            (``close``); default: a new file, closed with the image.

    Attributes:
        runs: the ``RunSpec`` list.
        file: the ``ImageFile``.
        ctl: its ``control.ControlBlock``.
        arenas: per run, its ``(hbm, sbuf)`` input arenas (device
            ``HBM_BASE`` / ``SBUF_WINDOW_BASE``); ``hbm``, ``sbuf``: run 0's.
        arg_stream, out_desc: the argument stream and output descriptor
            bytes; ``write_args`` stores them (after a test patched them).
        out_addr, out_nbytes, num_elem, itemsize: the output.
        guard_size: bytes after each output copy that no region covers;
            ``guard_of(run)`` of them hold the run's poison
            (``copies(run, guard_of(run))`` reads them); the
            ``BEFORE_GUARD_BYTES`` before each copy of a private run hold it
            too (``befores(run)``).
        input_spans: ``(name, sbuf, offset, nbytes, guard)`` of each input:
            where it is in its arena (run 0's ``sbuf`` if ``sbuf`` else
            ``hbm``), then the bytes after it up to the next allocation (at
            least ``INPUT_GUARD``). The ``INPUT_GUARD`` bytes before the
            first input of each arena hold the run's poison too.

    What the runs left is read in place: ``copies`` (every core's output of
    a run as one strided view), ``masks``, ``read_maps``, ``report``,
    ``printf_text``.
    """

    def __init__(self, inputs: Sequence[Input], out_dtype: dt.DType,
                 out_shape: Tuple[int, ...], num_cores: int, scratch_size: int,
                 out_location: str = "hbm", checks: bool = True,
                 second_inputs: Optional[Sequence[Input]] = None,
                 pool: Optional[ImagePool] = None):
        self.checks = checks
        self.runs = runs_for(num_cores, checks)
        self.num_cores = num_cores
        self._masks: Dict[int, np.ndarray] = {}
        self._reports: Dict[Tuple[int, int], abi.GpsimdCoreReport] = {}
        self.out_dtype = out_dtype
        self.out_shape = tuple(out_shape)
        self.itemsize = out_dtype.itemsize
        self.num_elem = math.prod(self.out_shape)
        self.out_nbytes = self.num_elem * self.itemsize
        in_sbuf = [i.location == "sbuf" for i in inputs]
        capacity = ALIGN * (3 * len(inputs) + 4)
        capacity += sum(align_up(max(i.array.nbytes, 1)) for i, s in zip(inputs, in_sbuf) if not s)
        sbuf_capacity = ALIGN * (2 * len(inputs) + 1)
        sbuf_capacity += sum(align_up(max(i.array.nbytes, 1)) for i, s in zip(inputs, in_sbuf) if s)
        self.read_map_bytes = (self.num_elem + 7) // 8

        # the file's layout (every part page-aligned)
        at = control.SIZE
        self._bindings_at = at
        at += align_up(len(self.runs) * num_cores * _BINDING, PAGE)
        self._args_at = at
        at += 3 * PAGE                  # (arguments, output descriptor, gap table)
        in_at: Dict[int, int] = {}      # (a run that has arenas of its own: their offset)
        self._out_at: List[List[int]] = []
        #: per run, the bytes from one output copy's start to the next's
        self._out_each = [out_each(self.out_nbytes, r.index) for r in self.runs]
        sizes = [align_up(n, PAGE) for n in core_sizes(scratch_size)]
        dev_each, rec_each = sizes[0] + sizes[1], sizes[2] + sizes[3]
        rmap = align_up(max(self.read_map_bytes, 1), PAGE)
        #: per run and core: the file offsets of its scratch window (the
        #: dataram after it) and of its printf ring (report, read map after
        #: it); per run, the bytes from one core's records to the next's
        self._dev_at: List[List[int]] = []
        self._rec_at: List[List[int]] = []
        self._rec_each: List[int] = []
        #: ``(offset, nbytes)`` of each gap (``PROT_NONE`` in the vector's processes)
        self.gaps: List[Tuple[int, int]] = []

        def gap(at: int, nbytes: int = GAP_BYTES) -> int:
            self.gaps.append((at, nbytes))
            return at + nbytes
        #: the run whose arenas hold ``second_inputs`` (the second call's: the
        #: same sizes as ``inputs``), or None; ``second``: what the session
        #: says of them (``checks._second_call_problems``)
        self.other_run: Optional[int] = None if second_inputs is None else \
            next((r.index for r in self.runs if r.after >= 0), None)
        self.second: Optional[tuple] = None
        #: per run, whether it has arenas of its own (else the run it follows')
        # (the run with a base too: with its base's, its output lay further
        # from its inputs than in any other run, a tell for its kernels)
        self._owns = [r.after < 0 or r.index == self.other_run
                      for r in self.runs]
        for r in self.runs:
            if self._owns[r.index]:
                in_at[r.index] = at = gap(at)
                at += align_up(capacity, PAGE) + align_up(sbuf_capacity, PAGE)
            at = gap(at)
            each = self._out_each[r.index]
            out_step = each if r.private else 0          # (each copy after its guard)
            self._out_at.append([at + BEFORE_GUARD_BYTES + out_step * k for k in range(num_cores)])
            at = gap(at + each * (num_cores if r.private else 1), OUTPUT_GAP_BYTES)
            self._dev_at.append([at + dev_each * k for k in range(num_cores)])
            at = gap(at + dev_each * num_cores)
            self._rec_each.append(rec_each + (rmap if r.private else 0))
            self._rec_at.append([at + self._rec_each[-1] * k for k in range(num_cores)])
            at += self._rec_each[-1] * num_cores
        at = gap(at)
        #: a part's offset from its core's ``_dev_at`` (0, 1) or ``_rec_at`` (2-4)
        self._part_at = [0, sizes[0], 0, sizes[2], sizes[2] + sizes[3]]
        #: bytes after the output in each copy that no region covers (run 0's)
        self.guard_size = self.guard_of(0)
        self.scratch_size = scratch_size
        # Whatever file the pool gives, a new file's bytes: ``give`` zeroed all
        # (``ImageFile.reset``) but the poisoned copies, which ``poison_outputs``
        # rewrites whole; then the inputs, guards and tails (``write_array``,
        # the snapshots, the poison loop), ``write_args`` and the session's
        # ``ControlBlock.init`` write over zeros as in a new file.
        self._pool = pool if pool is not None else ImagePool()
        self._keep = [(a, n) for a, n, _ in self._poison_spans()]
        self.file = self._pool.take(at, self._keep)
        try:
            self.poison_outputs()
            self.ctl = control.ControlBlock(self.file.mm)
            # the device ABI (gpsimd_host/abi.h): SBUF storage is an offset from the
            # _sbuf_window base; the model's window starts with the SBUF inputs.
            self.arenas = []
            for r in self.runs:     # (a run without arenas has the inputs of the run it follows)
                off = in_at.get(r.index)
                self.arenas.append(self.arenas[max(r.after, r.base)] if off is None else (
                    Arena(HBM_BASE, capacity, self.file, off),
                    Arena(SBUF_WINDOW_BASE, sbuf_capacity, self.file,
                          off + align_up(capacity, PAGE))))
            self.hbm, self.sbuf = self.arenas[0]
            self.input_spans: List[Tuple[str, bool, int, int, int]] = []
            descriptors = []
            for a in self.arenas[0]:    # (the bytes before the first input, poisoned too)
                a.alloc(INPUT_GUARD)
            for inp, sbuf in zip(inputs, in_sbuf):
                arena = self.arenas[0][sbuf]
                addr = arena.write_array(inp.array)
                off, n = addr - arena.device_base, inp.array.nbytes
                arena.alloc(INPUT_GUARD)
                self.input_spans.append((inp.name, sbuf, off, n, arena.used - off - n))
                descriptors.append(self._descriptor(inp.dtype, inp.array.shape, addr, sbuf))
            self.arg_stream = abi.pack_arg_stream(descriptors)
            out_sbuf = out_location == "sbuf"       # (past its arena's capacity, MiB-aligned)
            arena = self.arenas[0][out_sbuf]
            self.out_addr = arena.device_base + align_up(arena.capacity, 1 << 20)
            self.out_desc = self._descriptor(out_dtype, self.out_shape, self.out_addr, out_sbuf)
            #: run 0's ``(hbm, sbuf)`` arenas as written: every run's copy starts so
            self._snapshots = [a.u8[:a.used].copy() for a in self.arenas[0]]
            own = [r for r in self.runs if self._owns[r.index]]
            for r in own[1:]:
                for a, snap in zip(self.arenas[r.index], self._snapshots):
                    a.u8[:len(snap)] = snap
            if self.other_run is not None:
                for (_, sbuf, off, n, _), inp in zip(self.input_spans, second_inputs):
                    if inp.array.nbytes != n:
                        raise ValueError("the second call's inputs differ in size")
                    a = self.arenas[self.other_run][sbuf]
                    a.u8[off:off + n] = np.ascontiguousarray(inp.array).reshape(-1).view(np.uint8)
            #: per arena, the bytes after its last allocation to the end of
            #: its pages: ``(sbuf, offset, nbytes)``. A read further past an
            #: input than its guard lands there (or in the next input), never
            #: on zeros that the reference's padding may expect
            self._tails: List[Tuple[bool, int, int]] = [
                (bool(sbuf), a.used, len(a.u8) - a.used) for sbuf, a in enumerate(self.arenas[0])]
            if checks:
                guards = [(sbuf, off + n, g) for _, sbuf, off, n, g in self.input_spans]
                guards += [(sbuf, 0, INPUT_GUARD) for sbuf in (False, True)]
                for r in own:
                    for sbuf, off, n in guards + self._tails:
                        self.arenas[r.index][sbuf].u8[off:off + n] = r.tcm_poison
            self.write_args()
        except BaseException:
            self.file.close()
            raise

    def _part(self, run: int, k: int, part: int) -> int:
        """File offset of a core's scratch (0), dataram, printf ring, report
        (3) or read map (4, private runs only) in a run."""
        return (self._dev_at if part < 2 else self._rec_at)[run][k] + self._part_at[part]

    def report(self, run: int, k: int) -> abi.GpsimdCoreReport:
        """Core ``k``'s report in ``run`` (a live view, made once; valid until close)."""
        view = self._reports.get((run, k))
        if view is None:
            view = self._reports[run, k] = abi.GpsimdCoreReport.from_address(
                self.file.host + self._part(run, k, 3))
        return view

    def _rows(self, at: int, stride: int, nbytes: int, rows: int) -> np.ndarray:
        """``rows`` x ``nbytes`` bytes of the file from offset ``at``, one
        row every ``stride`` bytes (a read-only view; numpy checks that it
        lies in the file)."""
        view = np.ndarray((rows, nbytes), np.uint8, buffer=self.file.u8, offset=at,
                          strides=(stride, 1))
        view.flags.writeable = False
        return view

    def copies(self, run: int, extra: int = 0) -> np.ndarray:
        """The outputs of a run as one ``(cores, out_nbytes + extra)`` uint8
        view (one row for a shared output); ``extra`` bytes of guard zone."""
        rows = self.num_cores if self.runs[run].private else 1
        return self._rows(self._out_at[run][0], self._out_each[run], self.out_nbytes + extra, rows)

    def befores(self, run: int) -> np.ndarray:
        """The ``BEFORE_GUARD_BYTES`` before each output copy of a run as
        one ``(cores, BEFORE_GUARD_BYTES)`` uint8 view (one row for a shared
        output)."""
        return self._rows(self._out_at[run][0] - BEFORE_GUARD_BYTES, self._out_each[run],
                          BEFORE_GUARD_BYTES, self.num_cores if self.runs[run].private else 1)

    def printf_text(self, run: int, k: int) -> str:
        """What core ``k`` printed in ``run`` (the kept part of its ring)."""
        r = self.report(run, k)
        if not r.printf_len:
            return ""
        at = self._part(run, k, 2)
        return printf_text(self.file.u8[at:at + abi.PRINTF_CAPACITY], r.printf_head, r.printf_len)

    def _descriptor(self, dtype: dt.DType, shape: Tuple[int, ...], addr: int,
                    sbuf: bool = False) -> bytes:
        """The 48-byte descriptor (abi.h, ``arg_tensor_t``) of a tensor at
        device address ``addr``: HBM arm (u64 address), or SBUF arm (u32 offset from
        ``SBUF_WINDOW_BASE``, one partition of ``num_elem`` elements per
        block). Out-of-line dims are written to the HBM arena as int64."""
        form = abi.choose_shape_form(shape)
        shape_addr = None
        if form == abi.ShapeForm.OUT_OF_LINE:
            shape_addr = self.hbm.write_array(np.asarray(shape, dtype="<i8"))
        arm = dict(location=abi.Location.SBUF, num_partitions=SBUF_PARTITIONS,
                   num_elem_per_block=math.prod(shape)) if sbuf else {}
        return abi.pack_descriptor(dtype.isa, shape, addr - (SBUF_WINDOW_BASE if sbuf else 0),
                                   form=form, shape_addr=shape_addr, **arm)

    # ---- before the run -------------------------------------------------

    def write_args(self) -> None:
        """Store ``arg_stream`` and ``out_desc`` and every run's bindings in
        the file (again after a test patched the bytes). A binding's host
        pointers are file offsets (``arg_stream_host`` / ``retval_host``:
        of the bytes the vector's process copies for each launch). The
        bindings are made as one array (``abi.GpsimdCoreBinding``'s layout)
        and written to the file (``pwrite``: the worker never reads them)."""
        if len(self.arg_stream) > PAGE or len(self.out_desc) > PAGE:
            raise ValueError("argument stream or output descriptor larger than a page")
        # the gap table (leader_launch.c): u64 count, then (offset, nbytes) pairs
        table = np.array([len(self.gaps)] + [v for g in self.gaps for v in g], dtype="<u8")
        args = b"".join(data.ljust(PAGE, b"\0") for data in (self.arg_stream, self.out_desc,
                                                              table.tobytes()))
        b = np.zeros((len(self.runs), self.num_cores), _BINDING_RECORD)
        b["abi_version"], b["core_count"], b["num_regions"] = abi.ABI_VERSION, self.num_cores, 3
        b["core_id"] = np.arange(self.num_cores)
        b["sbuf_window_base"], b["stack_scale"] = SBUF_WINDOW_BASE, DEFAULT_STACK_SCALE
        b["arg_stream_host"], b["retval_host"] = self._args_at, self._args_at + PAGE
        b["out_itemsize"] = self.itemsize
        out = b["regions"][:, :, 2]     # (its host is each core's copy)
        out["device_addr"], out["size"], out["flags"] = (self.out_addr, self.out_nbytes,
                                                         abi.REGION_OUTPUT)
        for r in self.runs:
            row = b[r.index]
            for i, arena in enumerate(self.arenas[r.index]):     # (hbm, sbuf)
                region = row["regions"][:, i]
                region["device_addr"], region["size"] = arena.device_base, arena.capacity
                region["host"], region["flags"] = arena.file_offset, abi.REGION_READONLY
            row["checks"], row["poison"], row["tcm_poison"] = r.checks, r.poison, r.tcm_poison
            row["regions"][:, 2]["host"] = self._out_at[r.index]
            for part, field in enumerate(("scratch_host", "dataram_host", "printf_host",
                                          "report_host")):
                row[field] = [self._part(r.index, k, part) for k in range(self.num_cores)]
            if r.private and r.checks & abi.CHECK_READS:
                row["read_map_host"] = [self._part(r.index, k, 4) for k in range(self.num_cores)]
        self.file.write(self._args_at, args)
        self.file.write(self._bindings_at, b.tobytes())

    def _fills(self) -> List[Tuple[List[int], int, int]]:
        """``(offsets, nbytes, poison)`` of the output copies of each
        private run, each with its guard zones (contiguous), and of the
        guard zones before and after a shared run's output (which stays
        zero-filled, as on the device)."""
        fills = []
        for r in self.runs:
            at = self._out_at[r.index]
            if r.private:
                fills.append(([a - BEFORE_GUARD_BYTES for a in at],
                              BEFORE_GUARD_BYTES + self.out_nbytes + self.guard_of(r.index),
                              r.poison))
            elif self.checks:
                fills += [([at[0] - BEFORE_GUARD_BYTES], BEFORE_GUARD_BYTES, r.poison),
                          ([at[0] + self.out_nbytes], self.guard_of(r.index), r.poison)]
        return fills

    def guard_of(self, run: int) -> int:
        """The bytes after a run's output copies, up to the next copy's
        guard zone or the gap after them, that hold its poison under the
        checks: at least ``GUARD_BYTES`` in run 0, ``LATER_GUARD_BYTES`` in
        the runs after it."""
        return self._out_each[run] - BEFORE_GUARD_BYTES - self.out_nbytes

    def _poison_spans(self) -> List[List[int]]:
        """``[offset, nbytes, poison]`` of ``_fills``, adjacent fills of
        one poison made one, in file order."""
        spans: List[List[int]] = []
        for offsets, n, poison in self._fills():
            for at in offsets:
                if spans and spans[-1][0] + spans[-1][1] == at and spans[-1][2] == poison:
                    spans[-1][1] += n
                else:
                    spans.append([at, n, poison])
        return spans

    def poison_outputs(self) -> None:
        """Fill every private run's output copies with that run's poison
        (as the image is made, before the vector's processes start: a
        leader that faulted them in cost each vector about 1 ms); charged
        to the worker (``prefilled_bytes``). One ``pwrite`` per span of
        ``_poison_spans``: no page fault or page-table entry each (BENCHMARKS.md)."""
        for at, n, poison in self._poison_spans():
            self.file.write(at, bytes((poison,)) * n)

    def request(self) -> dict:
        """What a vector's process needs besides the file: the runs and the
        layout of the bindings and arguments."""
        return {"runs": [r.to_json() for r in self.runs], "ncores": self.num_cores,
                "bindings_at": self._bindings_at, "binding_size": _BINDING,
                "args_at": self._args_at, "arg_len": len(self.arg_stream),
                "desc_len": len(self.out_desc), "page": PAGE,
                "size": self.file.size}

    def prefilled_bytes(self) -> int:
        """Bytes of the file the worker itself touched (inputs of every run,
        control, bindings, arguments, the poisoned output copies): charged
        to the worker, not to the vector's processes."""
        return (self._args_at + 3 * PAGE
                + sum(self._owns) * (self.hbm.used + self.sbuf.used
                                     + sum(n for _, _, n in self._tails if self.checks))
                + sum(len(offsets) * align_up(n, PAGE) for offsets, n, _ in self._fills()))

    # ---- after the run --------------------------------------------------

    def output_bytes(self, run: int, core: int) -> np.ndarray:
        """The ``out_nbytes`` bytes of a core's output in a run (a view)."""
        c = self.copies(run)
        return c[core if len(c) > 1 else 0]

    def masks(self, run: int) -> np.ndarray:
        """``(cores, num_elem)`` bool: the written masks of a private run
        (computed once)."""
        if run not in self._masks:
            self._masks[run] = written_mask(self.copies(run), self.runs[run].poison,
                                            self.itemsize, self.num_elem)
        return self._masks[run]

    def read_maps(self, run: int) -> np.ndarray:
        """``(cores, num_elem)`` bool: did the core read the element before
        writing it in a private run of a checked image (only those have the
        runtime's read maps)."""
        raw = self._rows(self._part(run, 0, 4), self._rec_each[run], self.read_map_bytes,
                         self.num_cores)
        return np.unpackbits(raw, axis=1, bitorder="little")[:, :self.num_elem].astype(bool)

    def modified_inputs(self, runs: Sequence[int]) -> List[Tuple[str, int, int, int]]:
        """Inputs whose bytes changed, or the bytes after which (up to the
        next allocation, at least ``INPUT_GUARD``) or before which (the
        first of its arena) changed from the run's poison, in any of
        ``runs`` (each run has its own copy of the inputs): ``(name, bytes
        changed, bytes written past its end, before its start)``, the most
        of any run (an arena's tail counts for its last input)."""
        out = []
        last = {span[1]: i for i, span in enumerate(self.input_spans)}
        first = {span[1]: i for i, span in reversed(list(enumerate(self.input_spans)))}
        for i, (name, sbuf, off, n, guard) in enumerate(self.input_spans):
            snap = self._snapshots[sbuf][off:off + n]
            guards = [(off + n, guard)] + ([self._tails[sbuf][1:]] if last[sbuf] == i else [])
            lead = [(0, INPUT_GUARD)] if first[sbuf] == i else []
            changed = past = before = 0
            for p in (p for p in runs if p != self.other_run):   # (another vector's inputs)
                u8, poison = self.arenas[p][sbuf].u8, self.runs[p].tcm_poison
                changed = max(changed, int(np.count_nonzero(u8[off:off + n] != snap)))
                if self.checks:
                    past, before = (max(got, sum(int(np.count_nonzero(u8[a:a + m] != poison))
                                                 for a, m in spans))
                                    for got, spans in ((past, guards), (before, lead)))
            if changed or past or before:
                out.append((name, changed, past, before))
        return out

    def close(self, reuse: bool = False) -> None:
        """Release the file and every view of it (idempotent); ``reuse``:
        give the file back to the pool (only once no other process can
        write it: ``LibrarySession._release``), else close it."""
        self._masks.clear()
        self._reports.clear()
        self.arenas = []
        self.hbm = self.sbuf = None
        self.ctl = None
        pool, self._pool = self._pool, None     # (a second close leaves a given file alone)
        if pool is not None and reuse:
            pool.give(self.file, self._keep)
        elif pool is not None:
            self.file.close()
