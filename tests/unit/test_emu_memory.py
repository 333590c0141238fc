"""Emulated HBM and core buffers (gpsimd_emu.memory)."""
import ctypes
import os

import numpy as np
import pytest

from gpsimd_emu import abi
from gpsimd_emu.memory import (ALIGN, HBM_BASE, Arena, CoreMemory, SharedBuffer,
                               align_up, printf_text)


def test_hbm_base_needs_64_bits():
    assert HBM_BASE == 0x1_0000_0000 and HBM_BASE > 0xFFFFFFFF


def test_bump_allocation_is_64_byte_aligned():
    a = Arena(HBM_BASE, 1024)
    assert a.alloc(3) == HBM_BASE
    assert a.alloc(64) == HBM_BASE + 64
    assert a.alloc(1) == HBM_BASE + 128
    assert a.alloc(0) == HBM_BASE + 192     # distinct address even for 0 bytes
    assert a.used == 193
    with pytest.raises(MemoryError, match="full"):
        a.alloc(1024)
    assert align_up(65) == 128 and ALIGN == 64


def test_write_read_and_host_address():
    a = Arena(HBM_BASE, 4096)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    addr = a.write_array(x)
    assert np.array_equal(a.read_array(addr, np.float32, (2, 3)), x)
    host = a.host_addr(addr)
    assert (ctypes.c_float * 6).from_address(host)[5] == 5.0
    assert a.read_array(addr, np.float32, ()).shape == ()
    with pytest.raises(ValueError, match="outside"):
        a.view(HBM_BASE + 4090, 16)


def test_region_describes_arena():
    a = Arena(HBM_BASE + 0x100000, 256, extra=4096)
    r = a.region(abi.REGION_READONLY, nbytes=24)
    assert (r.device_addr, r.size, r.host, r.flags) == (HBM_BASE + 0x100000, 24, a.host, 1)
    assert len(a.u8) >= 256 + 4096


def test_shared_mapping_is_visible_after_fork():
    buf = SharedBuffer(4096)
    buf.fill(0xA5)
    pid = os.fork()
    if pid == 0:
        buf.u8[10:20] = 7
        os._exit(0)
    os.waitpid(pid, 0)
    assert list(buf.u8[8:22]) == [0xA5, 0xA5] + [7] * 10 + [0xA5, 0xA5]


def test_two_output_copies_share_device_address_not_host():
    a, b = Arena(HBM_BASE, 64), Arena(HBM_BASE, 64)
    a.fill(1)
    b.fill(2)
    assert a.region().device_addr == b.region().device_addr
    assert a.host != b.host and a.u8[0] == 1 and b.u8[0] == 2


def test_core_memory_sizes_and_report_view():
    cm = CoreMemory(abi.SCRATCH_CORE_SIZE)
    assert cm.scratch.size == 0x200000 and cm.dataram.size == 0x10000
    assert cm.printf.size == 0x20000
    r = cm.report
    r.status, r.printf_len, r.printf_head = 1, 5, 0
    cm.printf.u8[:5] = np.frombuffer(b"hello", np.uint8)
    assert cm.printf_text() == "hello"
    cm.reset_report()
    assert cm.report.status == 0 and cm.report.printf_len == 0
    cm.close()


def test_printf_ring_wraps_from_head():
    ring = np.frombuffer(b"DEFGHIJ__ABC", dtype=np.uint8)
    assert printf_text(ring, 9, 10) == "ABCDEFGHIJ"
    assert printf_text(ring, 0, 3) == "DEF"
    assert printf_text(ring, 0, 0) == ""
    assert printf_text(ring, 9, 999) == "ABCDEFGHIJ__"   # clamped to capacity


def test_the_worker_poisons_every_private_output_copy_and_counts_it():
    """DeviceImage.poison_outputs: run 0's copies with their guard zone in
    POISON_A, run 1's in POISON_B, the shared runs' one copy untouched;
    prefilled_bytes counts those pages besides what the worker wrote."""
    from gpsimd_emu import dtypes as dt
    from gpsimd_emu.image import DeviceImage, PAGE
    from gpsimd_emu.memory import GUARD_BYTES, POISON_A, POISON_B
    from gpsimd_emu.vectors import Input
    x = np.arange(10, dtype=np.float32)
    image = DeviceImage([Input("x", "tensor", dt.by_name("float32"), x, x)],
                        dt.by_name("float32"), (10,), 8, abi.SCRATCH_CORE_SIZE)
    try:
        assert [r.private for r in image.runs] == [True, True, False, False]
        image.poison_outputs()
        u8 = image.file.u8
        out = ALIGN                          # the output (40 bytes) rounded up
        for run, poison, n in ((0, POISON_A, out + GUARD_BYTES), (1, POISON_B, out)):
            for at in image._out_at[run]:
                assert (u8[at:at + n] == poison).all()
                assert u8[at + n:at + n + 1].tolist() in ([0], [])   # and no further
        for run in (2, 3):
            at = image._out_at[run][0]
            assert not u8[at:at + out].any()
        pages = lambda n: -(-n // PAGE) * PAGE  # noqa: E731
        worker_wrote = (image._bindings_at + pages(4 * 8 * ctypes.sizeof(abi.GpsimdCoreBinding))
                        + 2 * PAGE + 4 * (image.hbm.used + image.sbuf.used))
        assert image.prefilled_bytes() - worker_wrote == 8 * (pages(out + GUARD_BYTES) + pages(out))
    finally:
        image.close()
