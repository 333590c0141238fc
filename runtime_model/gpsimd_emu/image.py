"""The device memory of one vector (``DeviceImage``): the HBM and SBUF input
arenas, the argument stream and output descriptor, the per-core output
copies and per-core buffers, laid out as ARCHITECTURE.md "The test plan" and
customop-marshalling.txt §2 give them, and the written masks read back
after the cores ran.

Inputs live in an HBM arena at 0x1_0000_0000 (scalars as 1-element, 0-D
tensors of the plan's dtype; out-of-line dims as int64); with checks, each
core writes a private output copy poisoned with ``POISON_A`` (``POISON_B``
in a second pass), followed by a guard zone; without checks every core
writes one shared, zero-filled output, as on the device.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from . import abi
from . import dtypes as dt
from .memory import (ALIGN, GUARD_BYTES, HBM_BASE, POISON_A, POISON_B, SBUF_PARTITIONS,
                     SBUF_WINDOW_BASE, Arena, CoreMemory, align_up)
from .merge import written_mask
from .vectors import Input

__all__ = ["DeviceImage"]


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

