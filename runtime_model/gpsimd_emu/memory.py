"""Emulated device memory: the image file (``ImageFile``: a memfd the worker
maps and sends to the zygote, which maps it in the vector's processes at
another address; its layout is ``gpsimd_emu.image``'s; a session's files
kept between vectors, ``ImagePool``), the input arenas
in it (``Arena``: device addresses and a 64-byte aligned bump allocator)
and each core's host buffers (``core_sizes``). Every buffer is shared
memory, so that the writes a kernel makes in the processes that run a
vector are visible to the model after they exit (or crash).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np

from . import abi
from .client.process import libc

__all__ = [
    "HBM_BASE", "SBUF_WINDOW_BASE", "SBUF_PARTITIONS", "ALIGN", "GAP_BYTES", "OUTPUT_GAP_BYTES", "GUARD_BYTES",
    "LATER_GUARD_BYTES", "BEFORE_GUARD_BYTES", "INPUT_GUARD", "ImageFile", "ImagePool", "Arena",
    "core_sizes", "core_nbytes",
    "align_up", "out_each", "printf_text",
]

#: Device address of the input HBM arena (the inputs, out-of-line dims and
#: scalar payloads): above 4 GiB, so that device addresses need 64 bits as
#: on the device (abi.h) and an address truncated to 32 bits is caught.
HBM_BASE = 0x1_0000_0000
#: Device address of the model's SBUF window (the binding's ``sbuf_window_base``:
#: ARCHITECTURE.md "The test plan"). HOST-MODEL: apart from the HBM arena and,
#: like it, past 32 bits, so a base dropped or truncated is caught.
SBUF_WINDOW_BASE = 0x2_0000_0000
#: ``num_partitions`` the model writes in an SBUF descriptor (u8 at +32).
#: HOST-MODEL: the model lays an SBUF tensor out contiguously, as one
#: partition of ``num_elem`` elements (``num_elem_per_block`` = num_elem).
SBUF_PARTITIONS = 1
#: Allocation alignment in HBM, bytes.
ALIGN = 64

# The guard zones and gaps, and what each catches: ARCHITECTURE.md "The checks".
#: Bytes of guard zone after each output copy of run 0, and of the private
#: runs after it (a page: 64 KiB a core again cost a multicore vector 0.35 ms,
#: BENCHMARKS.md).
GUARD_BYTES = 64 * 1024
LATER_GUARD_BYTES = 4 * 1024
#: Bytes of guard zone before each output copy, in every private run.
BEFORE_GUARD_BYTES = 4 * 1024
#: Bytes of each gap of the image that the vector's processes map
#: ``PROT_NONE`` (no memory: the pages are never touched).
GAP_BYTES = 64 * 1024
#: Bytes of the gap after each run's outputs (address space only).
OUTPUT_GAP_BYTES = 1 << 30
#: Bytes at least after each input that hold the run's ``tcm_poison`` (zeros
#: might be the padding a reference expects).
INPUT_GUARD = ALIGN


def align_up(n: int, align: int = ALIGN) -> int:
    """``n`` rounded up to a multiple of ``align`` (both in bytes)."""
    return (n + align - 1) // align * align


class ImageFile:
    """A zero-filled memfd of ``size`` bytes (sparse: pages cost memory only
    once touched), mapped shared. Arenas are slices of it (``Arena(...,
    image, offset)``); ``fd`` is what the zygote receives.

    Raises:
        OSError: the memfd cannot be made or mapped.
    """

    def __init__(self, size: int):
        self.size = align_up(max(size, 1), mmap.PAGESIZE)
        self.fd: Optional[int] = os.memfd_create("gpsimd-image", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, self.size)
            self.mm: Optional[mmap.mmap] = mmap.mmap(self.fd, self.size, flags=mmap.MAP_SHARED,
                                                     prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self.fd)
            raise
        self.u8 = np.frombuffer(self.mm, dtype=np.uint8)
        self.host = int(self.u8.ctypes.data)

    def write(self, offset: int, data: bytes) -> None:
        """Write ``data`` at byte ``offset`` of the file (``pwrite``: its
        pages made without a page fault or a page-table entry each in this
        process, which reads them through the map all the same).

        Raises:
            OSError: no memory for the pages.
        """
        view = memoryview(data)
        while view:
            done = os.pwrite(self.fd, view, offset)
            view, offset = view[done:], offset + done

    def reset(self, keep: Sequence[Tuple[int, int]]) -> None:
        """Make every byte of the file zero, as a new file's, but those of
        ``keep`` (``(offset, nbytes)`` spans, sorted, apart), which the
        caller then rewrites whole: the rest is punched out
        (``fallocate(PUNCH_HOLE)``: whatever a vector wrote there reads as
        zeros again, a page cut by a span's end zeroed in part).

        Raises:
            OSError: the hole could not be made (the file is then closed).
        """
        at = 0
        for offset, nbytes in list(keep) + [(self.size, 0)]:
            if offset < at:
                self.close()
                raise OSError(errno.EINVAL, "the spans to keep overlap or are not sorted")
            if offset > at and libc().fallocate(self.fd, _PUNCH_HOLE, ctypes.c_int64(at),
                                                ctypes.c_int64(offset - at)) != 0:
                err = ctypes.get_errno()
                self.close()
                raise OSError(err, f"cannot reset the device image: {os.strerror(err)}")
            at = offset + nbytes

    def close(self) -> None:
        """Unmap and close (idempotent); views taken earlier keep the pages."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.mm is not None:
            self.u8 = np.empty(0, np.uint8)
            with contextlib.suppress(BufferError):      # (a view still exports the buffer)
                self.mm.close()
            self.mm = None


#: ``fallocate``'s FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
_PUNCH_HOLE = 0x02 | 0x01


class ImagePool:
    """Image files kept between a session's vectors: ``give`` keeps a file
    whose vector is over, reset (``ImageFile.reset``) as it is given, at
    most ``most`` of them and of at most ``max_bytes`` of memory each, and
    closes the others; ``take`` gives one of ``size`` bytes, a kept one or
    a new one. A file may be given only once no process but this one can
    write it (the session's rule: ``LibrarySession._release``): reset then,
    the pages the vector's processes made, charged to the sandbox's memory
    cgroup, are freed before the next vector runs, not held against its
    memory limit. ``ImagePool()`` keeps none: every file is new.
    """

    def __init__(self, most: int = 0, max_bytes: int = 0):
        self.most, self.max_bytes = most, max_bytes
        self._kept: List[Tuple[ImageFile, tuple]] = []

    def take(self, size: int, keep: Sequence[Tuple[int, int]]) -> ImageFile:
        """A file of ``size`` bytes, zeros but the ``keep`` spans (as in
        ``ImageFile.reset``), which the caller rewrites whole: a kept one
        given with the same spans (their pages, which the caller wrote, are
        charged to it as in a new file), or a new one.

        Raises:
            OSError: no file could be made or mapped.
        """
        size, keep = align_up(max(size, 1), mmap.PAGESIZE), tuple(map(tuple, keep))
        for i, (f, spans) in enumerate(self._kept):
            if f.size == size and spans == keep:
                del self._kept[i]
                return f
        return ImageFile(size)

    def give(self, f: ImageFile, keep: Sequence[Tuple[int, int]]) -> None:
        """Keep ``f``, taken with spans ``keep``, reset, for a later
        ``take``, or close it (also when it cannot be reset)."""
        if f.fd is None or not self.most:
            f.close()
            return
        try:
            f.reset(keep)
        except OSError:         # (closed by reset)
            return
        if os.fstat(f.fd).st_blocks * 512 > self.max_bytes:
            f.close()
            return
        self._kept.append((f, tuple(map(tuple, keep))))
        while len(self._kept) > self.most:
            self._kept.pop(0)[0].close()

    def close(self) -> None:
        """Close every kept file (idempotent)."""
        while self._kept:
            self._kept.pop()[0].close()


class Arena:
    """An HBM arena: ``capacity`` bytes of a vector's ``ImageFile`` from byte
    ``offset`` (page-aligned), mapped at device addresses ``[device_base,
    device_base + capacity)``, with a bump allocator.

    Attributes:
        u8: a writable ``np.uint8`` view of the arena's pages.
        host: host address of byte 0 (int) in this process.
        file_offset: byte offset in the image file.

    Raises:
        ValueError: a device base not 64-byte aligned, or a part that is not
            a page-aligned part of the image.
    """

    def __init__(self, device_base: int, capacity: int, image: "ImageFile", offset: int):
        if device_base % ALIGN:
            raise ValueError(f"device base {device_base:#x} not {ALIGN}-byte aligned")
        mapped = align_up(max(capacity, 1), mmap.PAGESIZE)
        if offset % mmap.PAGESIZE or offset + mapped > image.size:
            raise ValueError(f"[{offset}, +{mapped}) is not a page-aligned part of the image")
        self.file_offset = offset
        self.u8 = image.u8[offset:offset + mapped]
        self.host = int(self.u8.ctypes.data)
        self.device_base = device_base
        self.capacity = capacity
        self.used = 0

    def alloc(self, nbytes: int) -> int:
        """Reserve ``nbytes`` bytes; returns the device address (``ALIGN``-byte
        aligned). A 0-byte allocation still gets a distinct address.

        Raises:
            MemoryError: the arena is full (message gives sizes in bytes).
        """
        start = align_up(self.used)
        end = start + max(nbytes, 1)
        if end > self.capacity:
            raise MemoryError(f"HBM arena at {self.device_base:#x} full: "
                              f"{nbytes} bytes asked, {self.capacity - start} left")
        self.used = end
        return self.device_base + start

    def view(self, device_addr: int, nbytes: int) -> np.ndarray:
        """A writable ``uint8`` view of ``nbytes`` bytes at ``device_addr``.

        Raises:
            ValueError: ``[device_addr, device_addr + nbytes)`` is not inside
                the arena.
        """
        off = device_addr - self.device_base
        if off < 0 or off + nbytes > self.capacity:
            raise ValueError(f"[{device_addr:#x}, +{nbytes}) outside the arena "
                             f"[{self.device_base:#x}, +{self.capacity})")
        return self.u8[off:off + nbytes]

    def write_array(self, array: np.ndarray) -> int:
        """Allocate room for ``array`` (its C-order bytes) and copy it in.
        Returns the device address."""
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        addr = self.alloc(raw.size)
        self.view(addr, raw.size)[:] = raw
        return addr


def out_each(out_nbytes: int, run: int) -> int:
    """Bytes of one output copy of ``run`` with its guard zones: the
    ``BEFORE_GUARD_BYTES`` before it, then the output and at least
    ``GUARD_BYTES`` (run 0) or ``LATER_GUARD_BYTES`` (the runs after it)
    to the end of a page; every byte after the output holds the run's
    poison and is checked (``DeviceImage.guard_of``)."""
    guard = LATER_GUARD_BYTES if run else GUARD_BYTES
    return BEFORE_GUARD_BYTES + align_up(max(out_nbytes, 1) + guard, mmap.PAGESIZE)


def core_sizes(scratch_size: int) -> Tuple[int, int, int, int]:
    """Bytes of one core's host buffers: the scratch window
    (``abi.SCRATCH_CORE_SIZE`` multicore, ``abi.SCRATCH_SINGLE_SIZE``
    single-core), the dataram, the printf ring and the report."""
    return (scratch_size, abi.DATARAM_SIZE, abi.PRINTF_CAPACITY,
            ctypes.sizeof(abi.GpsimdCoreReport))


def core_nbytes(scratch_size: int) -> int:
    """Bytes one core's four buffers take in an image (each page-aligned)."""
    return sum(align_up(n, mmap.PAGESIZE) for n in core_sizes(scratch_size))


def printf_text(ring: np.ndarray, head: int, length: int) -> str:
    """Decode a printf ring (abi.h ``gpsimd_core_report``): ``length`` bytes
    kept, the oldest at offset ``head``, wrapping at ``len(ring)`` bytes.
    Out-of-range values are clamped to the ring size."""
    cap = len(ring)
    if cap == 0:
        return ""
    length = max(0, min(int(length), cap))
    data = np.roll(ring, -(int(head) % cap))[:length].tobytes()
    return data.decode("utf-8", errors="replace")
