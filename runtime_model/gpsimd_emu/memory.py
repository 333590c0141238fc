"""Emulated device memory: HBM arenas and the per-core host buffers.

Every buffer is shared memory, so that the writes a kernel makes in the
processes that run a vector are visible to the model after they exit (or
crash). A vector's buffers are carved out of one ``ImageFile`` (a memfd
the worker maps and sends to the zygote, which maps it in the vector's
processes at another address: the bindings carry offsets into the file,
``gpsimd_emu.image``); a buffer made on its own is an anonymous shared
mmap (tests, tools).

* HBM: ``Arena`` objects with a device base address and a 64-byte aligned
  bump allocator. Inputs (and the out-of-line dims and scalar payloads) live
  in one arena at ``HBM_BASE`` = 0x1_0000_0000, so device addresses need 64
  bits as on the device (the device ABI (gpsimd_host/abi.h) QUIRK).
* The output of a vector gets one private ``Arena`` per core (and per pass),
  all at the *same* device address but with different host backing: each
  core of a multicore run writes its own copy, poisoned beforehand, so the
  model can tell which core wrote which element (ARCHITECTURE.md).
  Each copy carries a guard zone past the end of the output that is *not*
  part of the region given to the runtime; a write landing there is an
  out-of-range write.
* Per core (``CoreMemory``): the scratch window (2 MiB multicore, 32 MiB
  single; docs/kernel-api.md, Limits), the 64 KiB dataram, the 128 KiB printf
  ring and the ``gpsimd_core_report``, all host-backed and passed in the
  binding (abi.h).
"""

from __future__ import annotations

import ctypes
import mmap
import os
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import abi

__all__ = [
    "HBM_BASE", "SBUF_WINDOW_BASE", "SBUF_PARTITIONS", "ALIGN",
    "POISON_A", "POISON_B", "TCM_POISON_A", "TCM_POISON_B", "GUARD_BYTES",
    "ImageFile", "SharedBuffer", "Arena", "CoreMemory", "align_up", "printf_text",
]

#: Device address of the input HBM arena: above 4 GiB so that an address
#: truncated to 32 bits is caught.
HBM_BASE = 0x1_0000_0000
#: Device address of the model's SBUF window (the ``_sbuf_window`` base of
#: the device ABI (gpsimd_host/abi.h), passed as ``sbuf_window_base`` in the
#: binding). A tensor placed in SBUF has a u32 *offset* from this base in
#: the descriptor's SBUF arm (§2); the runtime adds the base. HOST-MODEL: the
#: spec gives no value; 0x2_0000_0000 keeps SBUF apart from the HBM arena
#: and, like it, needs 64 bits, so a base dropped or truncated is caught.
SBUF_WINDOW_BASE = 0x2_0000_0000
#: ``num_partitions`` the model writes in an SBUF descriptor (u8 at +32).
#: HOST-MODEL: the model lays an SBUF tensor out contiguously, as one
#: partition of ``num_elem`` elements (``num_elem_per_block`` = num_elem).
SBUF_PARTITIONS = 1
#: Allocation alignment in HBM, bytes.
ALIGN = 64
# The poison bytes live with the runs that use them (stdlib-only module).
from .runs import POISON_A, POISON_B, TCM_POISON_A, TCM_POISON_B  # noqa: E402

#: Bytes of guard zone after each output copy (outside the region).
GUARD_BYTES = 64 * 1024


def align_up(n: int, align: int = ALIGN) -> int:
    """``n`` rounded up to a multiple of ``align`` (both in bytes)."""
    return (n + align - 1) // align * align


class ImageFile:
    """A zero-filled memfd of ``size`` bytes (sparse: pages cost memory only
    once touched), mapped shared. Buffers are slices of it (``backing=
    (image, offset)``); ``fd`` is what the zygote receives.

    Raises:
        OSError: the memfd cannot be made or mapped.
    """

    def __init__(self, size: int, name: str = "gpsimd-image"):
        self.size = align_up(max(size, 1), mmap.PAGESIZE)
        self.fd: Optional[int] = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, self.size)
            self.mm: Optional[mmap.mmap] = mmap.mmap(self.fd, self.size, flags=mmap.MAP_SHARED,
                                                     prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self.fd)
            raise
        self.u8 = np.frombuffer(self.mm, dtype=np.uint8)
        self.host = int(self.u8.ctypes.data)

    def close(self) -> None:
        """Unmap and close (idempotent); views taken earlier keep the pages."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.mm is not None:
            self.u8 = np.empty(0, np.uint8)
            try:
                self.mm.close()
            except BufferError:      # a view still exports the buffer
                pass
            self.mm = None


class SharedBuffer:
    """A zero-filled, shared buffer of ``size`` bytes: a slice of an
    ``ImageFile`` (``backing=(image, offset)``, offset page-aligned), or its
    own anonymous mmap (rounded up to the page size, at least one page).

    ``populate`` True pre-faults an own mapping's pages (``MAP_POPULATE``,
    where the platform has it).

    Attributes:
        size: usable bytes (the requested size).
        u8: a writable ``np.uint8`` view of the whole buffer.
        host: host address of byte 0 (int) in this process.
        file_offset: byte offset in the image file (None for an own mapping).
    """

    def __init__(self, size: int, populate: bool = False,
                 backing: Optional[Tuple["ImageFile", int]] = None):
        if size < 0:
            raise ValueError(f"negative buffer size {size}")
        self.size = size
        mapped = align_up(max(size, 1), mmap.PAGESIZE)
        self._mm: Optional[mmap.mmap] = None
        self.file_offset: Optional[int] = None
        if backing is not None:
            image, offset = backing
            if offset % mmap.PAGESIZE or offset + mapped > image.size:
                raise ValueError(f"[{offset}, +{mapped}) is not a page-aligned part of the image")
            self.file_offset = offset
            self.u8 = image.u8[offset:offset + mapped]
        else:
            flags = mmap.MAP_SHARED | mmap.MAP_ANONYMOUS
            if populate:
                flags |= getattr(mmap, "MAP_POPULATE", 0)
            self._mm = mmap.mmap(-1, mapped, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            self.u8 = np.frombuffer(self._mm, dtype=np.uint8)
        self.host = int(self.u8.ctypes.data)

    def fill(self, byte: int, start: int = 0, nbytes: Optional[int] = None) -> None:
        """Set ``nbytes`` bytes (default: to the end of the mapping) from
        offset ``start`` to ``byte`` (0..255)."""
        end = len(self.u8) if nbytes is None else start + nbytes
        self.u8[start:end] = byte

    def close(self) -> None:
        """Unmap an own mapping (idempotent; a slice of an image is released
        with the image). Views taken earlier keep the pages alive."""
        self.u8 = np.empty(0, np.uint8)
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:      # a view still exports the buffer
                pass
            self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Arena(SharedBuffer):
    """An HBM arena: ``capacity`` bytes of shared host memory mapped at device
    addresses ``[device_base, device_base + capacity)``, with a bump allocator.

    ``extra`` bytes of host memory follow the arena (the guard zone of an
    output copy); they have no device address and are not in ``region()``.
    """

    def __init__(self, device_base: int, capacity: int, extra: int = 0, populate: bool = False,
                 backing: Optional[Tuple["ImageFile", int]] = None):
        if device_base % ALIGN:
            raise ValueError(f"device base {device_base:#x} not {ALIGN}-byte aligned")
        super().__init__(capacity + extra, populate, backing)
        self.device_base = device_base
        self.capacity = capacity
        self.used = 0

    def alloc(self, nbytes: int, align: int = ALIGN) -> int:
        """Reserve ``nbytes`` bytes; returns the device address (aligned to
        ``align``, default 64). A 0-byte allocation still gets a distinct
        address.

        Raises:
            MemoryError: the arena is full (message gives sizes in bytes).
        """
        start = align_up(self.used, align)
        end = start + max(nbytes, 1)
        if end > self.capacity:
            raise MemoryError(f"HBM arena at {self.device_base:#x} full: "
                              f"{nbytes} bytes asked, {self.capacity - start} left")
        self.used = end
        return self.device_base + start

    def offset(self, device_addr: int, nbytes: int = 0) -> int:
        """Byte offset in the arena of ``device_addr``.

        Raises:
            ValueError: ``[device_addr, device_addr + nbytes)`` is not inside
                the arena.
        """
        off = device_addr - self.device_base
        if off < 0 or off + nbytes > self.capacity:
            raise ValueError(f"[{device_addr:#x}, +{nbytes}) outside the arena "
                             f"[{self.device_base:#x}, +{self.capacity})")
        return off

    def host_addr(self, device_addr: int) -> int:
        """Host address (int) backing ``device_addr``."""
        return self.host + self.offset(device_addr)

    def view(self, device_addr: int, nbytes: int) -> np.ndarray:
        """A writable ``uint8`` view of ``nbytes`` bytes at ``device_addr``."""
        off = self.offset(device_addr, nbytes)
        return self.u8[off:off + nbytes]

    def write(self, device_addr: int, data: Union[bytes, np.ndarray]) -> None:
        """Copy bytes (or an array's C-order bytes) to ``device_addr``."""
        raw = np.frombuffer(_as_bytes(data), dtype=np.uint8)
        self.view(device_addr, raw.size)[:] = raw

    def write_array(self, array: np.ndarray) -> int:
        """Allocate room for ``array`` (its C-order bytes) and copy it in.
        Returns the device address."""
        raw = _as_bytes(array)
        addr = self.alloc(len(raw))
        self.write(addr, raw)
        return addr

    def read_array(self, device_addr: int, dtype, shape: Sequence[int]) -> np.ndarray:
        """A copy of the array of ``dtype``/``shape`` stored at ``device_addr``."""
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
        raw = self.view(device_addr, n * dt.itemsize)
        return raw.view(dt).reshape(tuple(shape)).copy()

    def region(self, flags: int = 0, nbytes: Optional[int] = None) -> abi.GpsimdRegion:
        """The ``gpsimd_region`` of this arena: device base, size in bytes
        (``nbytes``, default the whole capacity), host address, flags."""
        size = self.capacity if nbytes is None else nbytes
        return abi.GpsimdRegion(self.device_base, size, self.host, flags, 0)


def _as_bytes(data: Union[bytes, bytearray, memoryview, np.ndarray]) -> bytes:
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).tobytes()
    return bytes(data)


class CoreMemory:
    """The host buffers of one core: scratch window, dataram, printf ring and
    report, each a ``SharedBuffer`` (so a crashed core's printf and report can
    still be read by the parent).

    Args:
        scratch_size: bytes of the scratch window (``abi.SCRATCH_CORE_SIZE``
            multicore, ``abi.SCRATCH_SINGLE_SIZE`` single-core).
        backing: ``(image, offset)``: the four buffers are consecutive
            page-aligned slices of the image from ``offset`` (``nbytes``
            bytes in all); None: each its own mapping.
    """

    def __init__(self, scratch_size: int, backing: Optional[Tuple["ImageFile", int]] = None):
        sizes = self.sizes(scratch_size)
        offsets = [None] * 4
        if backing is not None:
            image, at = backing
            for i, n in enumerate(sizes):
                offsets[i] = (image, at)
                at += align_up(n, mmap.PAGESIZE)
        self.scratch, self.dataram, self.printf, self.report_buf = (
            SharedBuffer(n, backing=b) for n, b in zip(sizes, offsets))

    @staticmethod
    def sizes(scratch_size: int) -> Tuple[int, int, int, int]:
        """Bytes of the scratch window, dataram, printf ring and report."""
        return (scratch_size, abi.DATARAM_SIZE, abi.PRINTF_CAPACITY,
                ctypes.sizeof(abi.GpsimdCoreReport))

    @staticmethod
    def nbytes(scratch_size: int) -> int:
        """Bytes the four buffers take in an image (each page-aligned)."""
        return sum(align_up(n, mmap.PAGESIZE) for n in CoreMemory.sizes(scratch_size))

    @property
    def report(self) -> abi.GpsimdCoreReport:
        """The ``gpsimd_core_report`` living in ``report_buf`` (a live view)."""
        return abi.GpsimdCoreReport.from_address(self.report_buf.host)

    def reset_report(self) -> None:
        """Zero the report (before a launch)."""
        self.report_buf.fill(0)

    def printf_text(self) -> str:
        """What the core printed (the kept part of the ring), decoded as UTF-8
        with replacement characters."""
        r = self.report
        return printf_text(self.printf.u8, r.printf_head, r.printf_len)

    def close(self) -> None:
        """Unmap every buffer."""
        for b in (self.scratch, self.dataram, self.printf, self.report_buf):
            b.close()


def printf_text(ring: np.ndarray, head: int, length: int) -> str:
    """Decode a printf ring (abi.h ``gpsimd_core_report``): ``length`` bytes
    kept, the oldest at offset ``head``, wrapping at ``len(ring)`` bytes.
    Out-of-range values are clamped to the ring size."""
    cap = len(ring)
    if cap == 0:
        return ""
    length = max(0, min(int(length), cap))
    head = int(head) % cap
    if head + length <= cap:
        data = ring[head:head + length].tobytes()
    else:
        data = ring[head:].tobytes() + ring[:head + length - cap].tobytes()
    return data.decode("utf-8", errors="replace")
