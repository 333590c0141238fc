"""A vector's memory budget: what it declares before anything is made, and
the messages of a vector that does not fit (``RunOptions.memory``, the
``--memory`` option, ``EMU_MEMORY`` of the build), and the device image's
size before it is made (:func:`image_size`, :class:`ImageSize`). Where the limit holds, before and while the
cores run: ARCHITECTURE.md "Processes and containment" (Memory).
"""

from __future__ import annotations

import ctypes
import math
import mmap
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from gpsimd_device.plan import TensorSpec, VectorPlan

from . import abi, control
from .memory import ALIGN, INPUT_GUARD, align_up, core_nbytes, out_each
from .runs import runs_for
from .settings import format_size

__all__ = ["declared_input_bytes", "inputs_too_big", "RANDOM_WORK_BYTES",
           "too_big", "exceeded", "ImageSize", "image_size"]

HINT = "(--memory, EMU_MEMORY)"
#: Bytes an element of a ``random`` input takes while it is made, on top of
#: its own: the draw in 64-bit numbers and the checks of its conversion to
#: the dtype (measured as the peak resident memory: 17.4-18.9, the most, for an int8
#: input from a normal draw; 8.4 for float32).
RANDOM_WORK_BYTES = 20
#: Why a vector's inputs need more than they declare.
MAKING = "while they are made: a random input is drawn as 64-bit numbers first"


def declared_input_bytes(vector: VectorPlan, root: str = ".") -> int:
    """Bytes of the vector's tensor inputs as the plan declares them (shape
    x dtype size; a ``.npy`` file's header), 0 for what it does not say.
    Never raises: a bad declaration is judged when the input is made."""
    import os
    from . import dtypes as dt
    total = 0
    for spec in vector.inputs.values():
        if not isinstance(spec, TensorSpec):
            continue
        try:
            itemsize = dt.by_name(spec.dtype).itemsize
            if spec.npy is not None:
                with open(os.path.join(root, spec.npy), "rb") as f:
                    major, _ = np.lib.format.read_magic(f)
                    read = (np.lib.format.read_array_header_1_0 if major == 1
                            else np.lib.format.read_array_header_2_0)
                    shape, _, _ = read(f)
            else:
                shape = spec.shape
            if shape is not None:
                total += math.prod(max(0, int(d)) for d in shape) * itemsize
        except Exception:
            continue
    return total


def _random_work(vector: VectorPlan) -> int:
    """The largest ``random`` input's working bytes while it is drawn (one
    input is made at a time)."""
    work = 0
    for spec in vector.inputs.values():
        if isinstance(spec, TensorSpec) and spec.random is not None and spec.shape is not None:
            try:
                work = max(work, math.prod(max(0, int(d)) for d in spec.shape) * RANDOM_WORK_BYTES)
            except (TypeError, ValueError):
                continue
    return work


def inputs_too_big(vector: VectorPlan, root: str, limit: int) -> Optional[str]:
    """Why the vector's inputs cannot be made within ``limit`` bytes, or
    None: the worker holds :func:`declared_input_bytes` and the largest
    ``random`` input's :data:`RANDOM_WORK_BYTES` an element."""
    declared, work = declared_input_bytes(vector, root), _random_work(vector)
    if declared + work <= limit:
        return None
    return too_big("inputs", declared + work, limit, MAKING if work else None)


def too_big(what: str, need: int, limit: int, detail: Optional[str] = None) -> str:
    """``"the vector's inputs need 6 GiB, more than the 4 GiB memory limit
    (--memory, EMU_MEMORY)"``."""
    more = f" ({detail})" if detail else ""
    return (f"the vector's {what} need{'s' if what.endswith('image') else ''} "
            f"{format_size(need)}{more}, more than the {format_size(limit)} memory limit {HINT}")


def exceeded(core: str, limit: int) -> str:
    """``"core 0 exceeded the 4 GiB memory limit"``."""
    return f"{core} exceeded the {format_size(limit)} memory limit"


@dataclass
class ImageSize:
    """Bytes of a vector's device image, by part (:func:`image_size`)."""

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
        per = self.outputs // max(1, self.output_copies)
        return (f"inputs {format_size(self.inputs)}, {self.output_copies} output copies of "
                f"{format_size(per)}, per-core memories {format_size(self.core_memory)}")


def image_size(input_nbytes: Sequence[int], out_nbytes: int, num_cores: int,
               scratch_size: int, checks: bool, second_inputs: bool = False) -> ImageSize:
    """The bytes a ``DeviceImage`` of these sizes takes, before any is made
    (its layout: ``gpsimd_emu.image``). The scratch windows are not
    counted: they are the device's, sparse in the file, and count (in the
    vector's cgroup) as the cores touch them."""
    page = mmap.PAGESIZE
    runs = runs_for(num_cores, checks)
    copies = sum(num_cores if r.private else 1 for r in runs)
    out_all = sum((num_cores if r.private else 1) * out_each(out_nbytes, r.index) for r in runs)
    read_map = align_up(max((out_nbytes + 7) // 8, 1), page)
    per_core = core_nbytes(scratch_size) - align_up(scratch_size, page)
    core_memory = sum(num_cores * (per_core + (read_map if r.private else 0)) for r in runs)
    # (a second call reads its first run's inputs, or its own: another vector's)
    own = sum(r.after < 0 or second_inputs for r in runs)
    inputs = own * (sum(align_up(max(n, 1), ALIGN) + 2 * ALIGN for n in input_nbytes)
                    + 2 * INPUT_GUARD)
    bindings = len(runs) * num_cores * ctypes.sizeof(abi.GpsimdCoreBinding)
    other = (control.SIZE + align_up(bindings, page) + 3 * page
             + own * (2 * page + align_up(ALIGN * (3 * len(input_nbytes) + 5), page)))
    return ImageSize(inputs, out_all, copies, core_memory, other)
