"""What the model hands to the C++ runtime, in the layouts of
``runtime_model/include/gpsimd_host/abi.h`` (read from it: the structures
by ``gpsimd_emu.binding.header_struct``, the enums by
``gpsimd_device.headers.enum_values``; the header gives every offset and value):

* the 48-byte argument descriptor ``NEURON_ISA_TPB_CUSTOM_OP_ARG_TENSOR``
  (``pack_descriptor``): location, shape form, ISA dtype, the shape union
  (its HOST-MODEL forms are abi.h's) and the storage union (the HBM or the
  SBUF arm);
* the argument stream (``pack_arg_stream``, abi.h HOST-MODEL):
  ``gpsimd_arg_stream_header`` then the descriptors;
* (re-exported from ``gpsimd_emu.binding``) the ctypes structures of
  ``gpsimd_region``, ``gpsimd_core_report``, ``gpsimd_core_binding`` and
  ``gpsimd_lsp_info``.
"""

from __future__ import annotations

import ctypes
import math
from enum import IntEnum
from typing import Optional, Sequence, Tuple

from gpsimd_device import limits as _limits
from gpsimd_device.headers import enum_values
# (the limits the model uses; what each means is said in gpsimd_device.limits)
from gpsimd_device.limits import (DATARAM_SIZE, LSP_SINGLE, MAX_ARGS, NUM_CORES,  # noqa: F401
                                  PRINTF_CAPACITY, SCRATCH_BASE, SCRATCH_CORE_SIZE,
                                  SCRATCH_SINGLE_SIZE, TCM_POOL_SIZE)
from gpsimd_device.lsp import lsp_name, scratch_origin, scratch_size  # noqa: F401

from .binding import (GpsimdCoreBinding, GpsimdCoreReport, GpsimdLspInfo,  # noqa: F401
                      GpsimdRegion, header_struct)

__all__ = [
    "ABI_VERSION", "DESCRIPTOR_SIZE", "MAX_ARGS", "ARG_STREAM_ARGS_OFFSET",
    "Location", "ShapeForm", "ArgType", "DATARAM_SIZE", "TCM_POOL_SIZE",
    "SCRATCH_BASE", "SCRATCH_CORE_SIZE", "SCRATCH_SINGLE_SIZE", "PRINTF_CAPACITY", "NUM_CORES",
    "LSP_SINGLE", "REGION_READONLY", "REGION_OUTPUT", "STATUS_OK", "REPORT_COPY_PATH",
    "REPORT_OUTPUT_SIZE", "REPORT_TCM_USED", "REPORT_EMPTY_USED", "REPORT_OUTPUT_READ",
    "REPORT_OUTPUT_UNTRACKED", "REPORT_SCRATCH_USED", "REPORT_STACK_POISONED",
    "REPORT_HEAP_POISONED", "REPORT_INPUT_RAW", "CHECK_READS", "CHECK_ALL",
    "choose_shape_form", "pack_descriptor", "pack_arg_stream",
    "GpsimdRegion", "GpsimdCoreReport", "GpsimdCoreBinding", "GpsimdLspInfo",
    "scratch_origin", "scratch_size", "lsp_name",
]

# ---- the ``#define GPSIMD_<NAME>`` lines of abi.h (gpsimd_device.limits.ABI) ----------------

_ABI = _limits.ABI
ABI_VERSION = _ABI["HOST_ABI_VERSION"]
_Descriptor = header_struct("abi.h", "NEURON_ISA_TPB_CUSTOM_OP_ARG_TENSOR")
_StreamHeader = header_struct("abi.h", "gpsimd_arg_stream_header")
DESCRIPTOR_SIZE = ctypes.sizeof(_Descriptor)            #: sizeof(arg_tensor_t), 48 bytes
ARG_STREAM_ARGS_OFFSET = _ABI["ARG_STREAM_ARGS_OFFSET"]  #: bytes
REGION_READONLY = _ABI["REGION_READONLY"]               #: gpsimd_region.flags bits
REGION_OUTPUT = _ABI["REGION_OUTPUT"]
#: gpsimd_core_report.flags bits (GPSIMD_REPORT_*, HOST-MODEL).
REPORT_COPY_PATH = _ABI["REPORT_COPY_PATH"]
REPORT_OUTPUT_SIZE = _ABI["REPORT_OUTPUT_SIZE"]
REPORT_TCM_USED = _ABI["REPORT_TCM_USED"]
REPORT_EMPTY_USED = _ABI["REPORT_EMPTY_USED"]
REPORT_OUTPUT_READ = _ABI["REPORT_OUTPUT_READ"]
REPORT_OUTPUT_UNTRACKED = _ABI["REPORT_OUTPUT_UNTRACKED"]
REPORT_SCRATCH_USED = _ABI["REPORT_SCRATCH_USED"]
REPORT_STACK_POISONED = _ABI["REPORT_STACK_POISONED"]
REPORT_HEAP_POISONED = _ABI["REPORT_HEAP_POISONED"]
REPORT_INPUT_RAW = _ABI["REPORT_INPUT_RAW"]
#: gpsimd_core_binding.checks bits (GPSIMD_CHECK_*, HOST-MODEL).
CHECK_READS = _ABI["CHECK_READS"]
CHECK_ALL = _ABI["CHECK_ALL"]

# ---- the enums of abi.h, read from it (the prefix of their members left out) -------------

_OP = "NEURON_ISA_TPB_CUSTOM_OP_"
STATUS_OK = enum_values("abi.h", "gpsimd_status", "GPSIMD_STATUS_")["OK"]
#: ``enum NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION``: descriptor byte +0.
Location = IntEnum("Location", enum_values("abi.h", _OP + "ARG_LOCATION", _OP + "ARG_LOCATION_"))
#: ``enum NEURON_ISA_TPB_CUSTOM_OP_TENSOR_SHAPE_TYPE``: byte +1, its members named
#: without ``SHAPE`` (``INLINE_8D`` is C's ``INLINE_SHAPE8D``, ``OUT_OF_LINE``
#: ``OUT_OF_LINE_SHAPE``, ``INLINE_4D`` ``INLINE_SHAPE4D``).
ShapeForm = IntEnum("ShapeForm", {name.replace("SHAPE", "").strip("_"): value for name, value
                                  in enum_values("abi.h", _OP + "TENSOR_SHAPE_TYPE", _OP).items()})
#: ``enum NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE`` (HOST-MODEL values).
ArgType = IntEnum("ArgType", enum_values("abi.h", _OP + "ARG_TYPE", _OP + "ARG_TYPE_"))

#: The inline shape forms: the array of abi.h's shape union each fills, its
#: largest rank and its largest dim (abi.h's limits).
_INLINE = {ShapeForm.INLINE_4D: ("dims4", _limits.MAX_DIMS_4D, _limits.MAX_DIM_SIZE_4D),
           ShapeForm.INLINE_8D: ("dims8", _limits.MAX_DIMS, _limits.MAX_DIM_SIZE)}


def _fits_inline(dims: Tuple[int, ...], form: int) -> bool:
    _, slots, largest = _INLINE[form]
    return len(dims) <= slots and all(0 < d <= largest for d in dims)


# ---- the 48-byte descriptor ---------------------------------------------------

def choose_shape_form(shape: Sequence[int]) -> int:
    """The shape form the model uses for ``shape`` (dims in elements).

    rank <= 4, no zero dim, every dim < 2**32 -> ``INLINE_4D``; else rank <= 8,
    no zero dim, every dim <= 65535 -> ``INLINE_8D``; else ``OUT_OF_LINE``
    (abi.h: a zero-sized dim needs the out-of-line form because an inline
    rank is the count of leading non-zero slots). A 0-D shape is INLINE_4D.

    Raises:
        ValueError: rank > 8 (docs/kernel-api.md, Limits) or a negative dim.
    """
    dims = _check_dims(shape)
    return next((f for f in _INLINE if _fits_inline(dims, f)), ShapeForm.OUT_OF_LINE)


def _check_dims(shape: Sequence[int]) -> Tuple[int, ...]:
    dims = tuple(int(d) for d in shape)
    if len(dims) > _limits.MAX_DIMS:      # (docs/kernel-api.md, Limits)
        raise ValueError(f"rank {len(dims)} > {_limits.MAX_DIMS}: shape {list(dims)}")
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimension in shape {list(dims)}")
    return dims


def _put(record: ctypes.Structure, field: str, value: int, what: str = "") -> None:
    """``record.field = value``; ValueError ``"<what> does not fit u<bits>"``
    (``what`` by default ``"<field> <value>"``) unless ``0 <= value <
    2**bits``, ``bits`` the field's width in abi.h."""
    bits = 8 * getattr(type(record), field).size
    if not 0 <= value < 1 << bits:
        raise ValueError(f"{what or f'{field} {value}'} does not fit u{bits}")
    setattr(record, field, value)


def pack_descriptor(
    dtype: int,
    shape: Sequence[int],
    addr: int,
    *,
    location: int = Location.HBM,
    form: Optional[int] = None,
    shape_addr: Optional[int] = None,
    num_partitions: int = 0,
    num_elem_per_block: int = 0,
) -> bytes:
    """Encode one 48-byte descriptor (the device ABI (gpsimd_host/abi.h)).

    Args:
        dtype: ISA dtype enum value (e.g. 10 for float32).
        shape: dims in elements (rank 0..8).
        addr: HBM device address (u64) for ``Location.HBM``; offset (u32) in
            the SBUF window for ``Location.SBUF``.
        location: ``Location.HBM`` (default) or ``Location.SBUF``.
        form: force a ``ShapeForm``; default ``choose_shape_form(shape)``.
        shape_addr: HBM device address of the dims (each a little-endian
            int64); required for the out-of-line form, ignored otherwise.
        num_partitions, num_elem_per_block: SBUF arm fields (u8, u32).

    Returns:
        48 bytes.

    Raises:
        ValueError: a field does not fit its width, a forced inline form
            cannot hold the shape (rank, dim size, zero dim), out-of-line
            without ``shape_addr``, or an unknown location/form.
    """
    dims = _check_dims(shape)
    if form is None:
        form = choose_shape_form(dims)
    num_elem = math.prod(dims)
    d = _Descriptor(location=location, framework_shape_type=form)
    _put(d, "dtype", dtype)
    if form in _INLINE:
        field, slots, largest = _INLINE[form]
        if not _fits_inline(dims, form):
            raise ValueError(f"shape {list(dims)} does not fit INLINE_{slots}D "
                             f"(rank <= {slots}, 0 < dim <= {largest})")
        getattr(d.framework_shape, field)[:len(dims)] = dims
    elif form == ShapeForm.OUT_OF_LINE:
        if shape_addr is None:
            raise ValueError("the out-of-line shape form needs shape_addr")
        _put(d.framework_shape.out_of_line, "addr", shape_addr, f"shape_addr {shape_addr:#x}")
        d.framework_shape.out_of_line.ndim = len(dims)
    else:
        raise ValueError(f"unknown shape form {form}")

    if location == Location.HBM:
        _put(d.storage.hbm, "addr", addr, f"HBM address {addr:#x}")
        _put(d.storage.hbm, "num_elem", num_elem)
    elif location == Location.SBUF:
        tpb = d.storage.tpb
        _put(tpb, "addr", addr, f"SBUF address {addr:#x}")
        _put(tpb, "num_elem", num_elem)
        _put(tpb, "num_partitions", num_partitions)
        _put(tpb, "num_elem_per_block", num_elem_per_block)
    else:
        raise ValueError(f"unknown location {location}")
    return bytes(d)


# ---- the argument stream ---------------------------------------------------------

def pack_arg_stream(descriptors: Sequence[bytes]) -> bytes:
    """The argument stream bytes (abi.h HOST-MODEL layout).

    ``gpsimd_arg_stream_header`` (``num_args``; ``types``: one ``ArgType``
    per argument, the rest 0), then the 48-byte descriptors in schema
    order: ``ARG_STREAM_ARGS_OFFSET + 48 * num_args`` bytes.

    Args:
        descriptors: 48-byte descriptors (``pack_descriptor``), schema order;
            each argument is an ``ArgType.TENSOR`` (every argument, tensor
            or scalar, is a tensor descriptor: ARCHITECTURE.md "The
            device's marshalling").

    Raises:
        ValueError: more than 32 arguments, or a descriptor not 48 bytes.
    """
    n = len(descriptors)
    if n > MAX_ARGS:
        raise ValueError(f"{n} arguments > GPSIMD_MAX_ARGS ({MAX_ARGS})")
    head = _StreamHeader(num_args=n)
    head.types[:n] = bytes([ArgType.TENSOR] * n)
    out = bytearray(head)
    assert len(out) == ARG_STREAM_ARGS_OFFSET
    for i, d in enumerate(descriptors):
        if len(d) != DESCRIPTOR_SIZE:
            raise ValueError(f"descriptor {i} is {len(d)} bytes, not {DESCRIPTOR_SIZE}")
        out += d
    return bytes(out)

