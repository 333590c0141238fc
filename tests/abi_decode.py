"""A decoder of the device ABI's descriptors and argument stream: the
tests' own reading of what ``gpsimd_emu.abi`` encodes (the runtime,
``runtime_model/src``, is the decoder the kernels use)."""
import struct
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from gpsimd_emu.abi import (ARG_STREAM_ARGS_OFFSET, DESCRIPTOR_SIZE, MAX_ARGS, Location,
                            ShapeForm)


@dataclass(frozen=True)
class Descriptor:
    """A decoded ``NEURON_ISA_TPB_CUSTOM_OP_ARG_TENSOR`` (48 bytes, abi.h).

    Attributes:
        location: ``Location.HBM`` (2) or ``Location.SBUF`` (1), byte +0.
        shape_form: a ``ShapeForm`` value, byte +1.
        dtype: ISA dtype enum value, byte +2 (see ``gpsimd_emu.dtypes``).
        dims: the dimensions (elements) for the inline forms, decoded as the
            leading non-zero slots (so ``()`` for a 0-D tensor); ``None`` for
            the out-of-line form, whose dims live in HBM (``unpack_dims``).
        shape_addr: out-of-line form: HBM device address of the int64 dims
            (0 for inline forms).
        shape_ndim: out-of-line form: number of int64 dims (0 for inline).
        addr: storage address: u64 HBM device address (HBM arm, +24), or u32
            offset in the SBUF window (SBUF arm, +24).
        num_elem: number of elements (+32 HBM arm, +28 SBUF arm).
        num_partitions: SBUF arm only (+32), else 0.
        num_elem_per_block: SBUF arm only (+36), else 0.
    """

    location: int
    shape_form: int
    dtype: int
    dims: Optional[Tuple[int, ...]]
    addr: int
    num_elem: int
    shape_addr: int = 0
    shape_ndim: int = 0
    num_partitions: int = 0
    num_elem_per_block: int = 0


def unpack_descriptor(data: bytes) -> Descriptor:
    """Decode 48 descriptor bytes (the inverse of ``pack_descriptor``).

    Inline dims are the leading non-zero slots (abi.h). Out-of-line dims are
    not read (they live in HBM): ``dims`` is None and ``shape_addr`` /
    ``shape_ndim`` say where they are.

    Raises:
        ValueError: not 48 bytes, unknown location or shape form, a non-zero
            slot after a zero slot in an inline shape.
    """
    if len(data) != DESCRIPTOR_SIZE:
        raise ValueError(f"a descriptor is {DESCRIPTOR_SIZE} bytes, got {len(data)}")
    location, form, dtype = struct.unpack_from("<BBB", data, 0)
    dims: Optional[Tuple[int, ...]]
    shape_addr = shape_ndim = 0
    if form in (ShapeForm.INLINE_4D, ShapeForm.INLINE_8D):
        slots = struct.unpack_from("<4I" if form == ShapeForm.INLINE_4D else "<8H", data, 8)
        rank = next((i for i, s in enumerate(slots) if s == 0), len(slots))
        if any(slots[rank:]):
            raise ValueError(f"inline shape slots {list(slots)}: non-zero after a zero")
        dims = tuple(slots[:rank])
    elif form == ShapeForm.OUT_OF_LINE:
        shape_addr, shape_ndim = struct.unpack_from("<QI", data, 8)
        dims = None
    else:
        raise ValueError(f"unknown shape form {form}")

    parts = 0
    per_block = 0
    if location == Location.HBM:
        addr, num_elem = struct.unpack_from("<QI", data, 24)
    elif location == Location.SBUF:
        addr, num_elem, parts, per_block = struct.unpack_from("<IIB3xI", data, 24)
    else:
        raise ValueError(f"unknown location {location}")
    return Descriptor(location, form, dtype, dims, addr, num_elem,
                      shape_addr, shape_ndim, parts, per_block)


def pack_dims(shape: Sequence[int]) -> bytes:
    """The out-of-line shape payload: each dim as little-endian int64,
    ``8 * rank`` bytes (abi.h ``out_of_line``)."""
    return struct.pack(f"<{len(shape)}q", *shape)


def unpack_dims(data: bytes, ndim: int) -> Tuple[int, ...]:
    """Decode ``ndim`` int64 dims from the first ``8 * ndim`` bytes of ``data``.

    Raises:
        ValueError: fewer than ``8 * ndim`` bytes.
    """
    if len(data) < 8 * ndim:
        raise ValueError(f"{ndim} dims need {8 * ndim} bytes, got {len(data)}")
    return struct.unpack_from(f"<{ndim}q", data, 0)


def unpack_arg_stream(data: bytes) -> Tuple[List[int], List[Descriptor]]:
    """Decode an argument stream into (types, descriptors) (abi.h layout).

    Raises:
        ValueError: shorter than the header or than its descriptors, or
            num_args > 32.
    """
    if len(data) < ARG_STREAM_ARGS_OFFSET:
        raise ValueError(f"argument stream of {len(data)} bytes < {ARG_STREAM_ARGS_OFFSET}")
    n, _ = struct.unpack_from("<II", data, 0)
    if n > MAX_ARGS:
        raise ValueError(f"num_args {n} > {MAX_ARGS}")
    end = ARG_STREAM_ARGS_OFFSET + DESCRIPTOR_SIZE * n
    if len(data) < end:
        raise ValueError(f"argument stream of {len(data)} bytes < {end} for {n} args")
    types = list(data[8:8 + n])
    descs = [unpack_descriptor(data[o:o + DESCRIPTOR_SIZE])
             for o in range(ARG_STREAM_ARGS_OFFSET, end, DESCRIPTOR_SIZE)]
    return types, descs
