"""Emulated HBM and core buffers (gpsimd_emu.memory)."""
import ctypes
import os

import numpy as np
import pytest

from gpsimd_emu import abi
from gpsimd_emu.memory import (ALIGN, HBM_BASE, Arena, ImageFile, align_up, core_nbytes,
                               core_sizes, printf_text)


def test_hbm_base_needs_64_bits():
    assert HBM_BASE == 0x1_0000_0000 and HBM_BASE > 0xFFFFFFFF


def _arena(base=HBM_BASE, capacity=1024):
    image = ImageFile(2 * 4096 + capacity)
    return Arena(base, capacity, image, 4096), image


def test_bump_allocation_is_64_byte_aligned():
    a, _ = _arena()
    assert a.alloc(3) == HBM_BASE
    assert a.alloc(64) == HBM_BASE + 64
    assert a.alloc(1) == HBM_BASE + 128
    assert a.alloc(0) == HBM_BASE + 192     # distinct address even for 0 bytes
    assert a.used == 193
    with pytest.raises(MemoryError, match="full"):
        a.alloc(1024)
    assert align_up(65) == 128 and ALIGN == 64


def test_image_file_write_goes_on_after_a_short_write(monkeypatch):
    """ImageFile.write: the worker's pwrite of the poisoned copies and the
    bindings; a write the kernel cuts short goes on from where it stopped."""
    image = ImageFile(3 * 4096)
    real = os.pwrite
    calls = []

    def short(fd, data, offset):            # (at most 1000 bytes a call)
        calls.append(offset)
        return real(fd, bytes(data[:1000]), offset)
    monkeypatch.setattr(os, "pwrite", short)
    image.write(100, bytes(range(256)) * 10)
    assert calls == [100, 1100, 2100]
    assert image.u8[100:2660].tobytes() == bytes(range(256)) * 10
    assert not image.u8[:100].any() and not image.u8[2660:].any()
    image.close()


def test_an_arena_is_its_part_of_the_image_and_shared_after_fork():
    a, image = _arena(capacity=4096)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    addr = a.write_array(x)
    assert a.file_offset == 4096 and a.host == image.host + 4096
    assert (ctypes.c_float * 6).from_address(a.host)[5] == 5.0
    assert image.u8[4096:4096 + 24].tobytes() == x.tobytes()
    with pytest.raises(ValueError, match="outside"):
        a.view(HBM_BASE + 4090, 16)
    pid = os.fork()
    if pid == 0:
        a.view(addr, 4)[:] = 7
        os._exit(0)
    os.waitpid(pid, 0)
    assert image.u8[4096:4100].tolist() == [7] * 4
    with pytest.raises(ValueError, match="page-aligned"):
        Arena(HBM_BASE, 64, image, 100)


def test_core_sizes():
    assert core_sizes(abi.SCRATCH_CORE_SIZE)[:3] == (0x200000, 0x10000, 0x20000)
    assert core_nbytes(abi.SCRATCH_CORE_SIZE) == 0x200000 + 0x10000 + 0x20000 + 4096 * (
        -(-ctypes.sizeof(abi.GpsimdCoreReport) // 4096))


def test_printf_ring_wraps_from_head():
    ring = np.frombuffer(b"DEFGHIJ__ABC", dtype=np.uint8)
    assert printf_text(ring, 9, 10) == "ABCDEFGHIJ"
    assert printf_text(ring, 0, 3) == "DEF"
    assert printf_text(ring, 0, 0) == ""
    assert printf_text(ring, 9, 999) == "ABCDEFGHIJ__"   # clamped to capacity


def test_the_worker_poisons_every_private_output_copy_and_counts_it():
    """DeviceImage.poison_outputs: run 0's copies with their guard zones (a
    page before each copy, in every private run) in
    POISON_A, run 1's with a page of theirs in POISON_B (a write past the
    output is judged in every private run), every byte from the output to
    the next copy's guard zone or the gap after the last one (no unchecked
    rounding bytes), the shared runs' one copy zero-filled between guard
    zones of the run's poison;
    prefilled_bytes counts those pages besides what the worker wrote."""
    from gpsimd_emu import dtypes as dt
    from gpsimd_emu.image import DeviceImage, PAGE
    from gpsimd_emu.memory import BEFORE_GUARD_BYTES, GUARD_BYTES, LATER_GUARD_BYTES, OUTPUT_GAP_BYTES
    from gpsimd_emu.runs import POISON_A, POISON_B
    from gpsimd_emu.vectors import Input
    x = np.arange(10, dtype=np.float32)
    image = DeviceImage([Input("x", "tensor", dt.by_name("float32"), x, x)],
                        dt.by_name("float32"), (10,), 8, abi.SCRATCH_CORE_SIZE)
    try:
        assert [r.private for r in image.runs] == [True, True, False, False, True, False]
        image.poison_outputs()
        u8 = image.file.u8
        out = ALIGN                          # the output (40 bytes) rounded up
        pages = lambda n: -(-n // PAGE) * PAGE  # noqa: E731
        for run, poison, n in ((0, POISON_A, pages(40 + GUARD_BYTES)),
                               (1, POISON_B, pages(40 + LATER_GUARD_BYTES)),
                               (4, POISON_A, pages(40 + LATER_GUARD_BYTES))):
            assert image.guard_of(run) == n - 40
            for at in image._out_at[run]:      # (each copy's guard up to the next copy's)
                assert (u8[at - BEFORE_GUARD_BYTES:at + n] == poison).all()
            first, last = image._out_at[run][0], image._out_at[run][-1]
            assert u8[last + n:last + n + 1].tolist() in ([0], [])   # and no further
            assert u8[first - BEFORE_GUARD_BYTES - 1] != poison
            assert (last + n, OUTPUT_GAP_BYTES) in image.gaps
        for run in (2, 3, 5):
            at, n = image._out_at[run][0], pages(40 + LATER_GUARD_BYTES)
            assert not u8[at:at + 40].any()
            assert (u8[at - BEFORE_GUARD_BYTES:at] == POISON_B).all()
            assert (u8[at + 40:at + n] == POISON_B).all()
            assert (at + n, OUTPUT_GAP_BYTES) in image.gaps
        # (each run's inputs, with the rest of their arenas' pages poisoned;
        # the second call reads those of run 0)
        assert image.arenas[4] is image.arenas[0]
        # (the run with every core done its own, laid out as run 2's: with
        # run 2's, its output lay further from its inputs than in any run)
        assert image.arenas[5] is not image.arenas[2]
        assert [a.file_offset - image._out_at[5][0] for a in image.arenas[5]] == \
            [a.file_offset - image._out_at[2][0] for a in image.arenas[2]]
        worker_wrote = (image._bindings_at + pages(6 * 8 * ctypes.sizeof(abi.GpsimdCoreBinding))
                        + 3 * PAGE + 5 * (len(image.hbm.u8) + len(image.sbuf.u8)))
        assert image.prefilled_bytes() - worker_wrote == 8 * (
            3 * BEFORE_GUARD_BYTES + pages(out + GUARD_BYTES) + 2 * pages(out + LATER_GUARD_BYTES)
        ) + 3 * (BEFORE_GUARD_BYTES + pages(40 + LATER_GUARD_BYTES))   # (the shared runs' guards)
    finally:
        image.close()


def test_gaps_keep_the_model_s_records_apart_from_every_tensor():
    """Each run's inputs, outputs (with their guard zones), cores' memory
    and records (printf rings, reports, read maps) are separated by gaps
    (PROT_NONE in the vector's processes, listed in the gap table after
    the output descriptor): a write that runs on from a tensor, before or
    after it, faults before it reaches a record."""
    from gpsimd_emu import dtypes as dt
    from gpsimd_emu.image import DeviceImage, PAGE
    from gpsimd_emu.memory import BEFORE_GUARD_BYTES, GAP_BYTES, OUTPUT_GAP_BYTES
    from gpsimd_emu.vectors import Input
    x = np.arange(10, dtype=np.float32)
    image = DeviceImage([Input("x", "tensor", dt.by_name("float32"), x, x)],
                        dt.by_name("float32"), (10,), 8, abi.SCRATCH_CORE_SIZE)
    try:
        table = image.file.u8[image._args_at + 2 * PAGE:][:PAGE].view("<u8")
        assert table[0] == len(image.gaps) and [tuple(p) for p in table[1:1 + 2 * len(image.gaps)]
                                                .reshape(-1, 2)] == image.gaps
        # (the one after each run's outputs 1 GiB: a write far past the output
        # faults there, not in the cores' memory after it)
        outputs_end = {image._out_at[r.index][-1] + image.guard_of(r.index) + 40 for r in image.runs}
        assert all(n == (OUTPUT_GAP_BYTES if at in outputs_end else GAP_BYTES) and at % PAGE == 0
                   for at, n in image.gaps)
        assert sum(n == OUTPUT_GAP_BYTES for _, n in image.gaps) == len(image.runs)
        # every part of the file in order: (start, end, kind)
        parts = [(at, at + n, "gap") for at, n in image.gaps]
        for r in image.runs:
            for a in image.arenas[r.index]:
                parts.append((a.file_offset, a.file_offset + len(a.u8), "tensor"))
            for at in sorted(set(image._out_at[r.index])):     # (from its guard before it)
                at -= BEFORE_GUARD_BYTES
                parts.append((at, at + image._out_each[r.index], "tensor"))
            for k in range(8):
                parts.append((image._part(r.index, k, 0), image._part(r.index, k, 1)
                              + -(-abi.DATARAM_SIZE // PAGE) * PAGE, "memory"))
                parts.append((image._part(r.index, k, 2), image._part(r.index, k, 2)
                              + image._rec_each[r.index], "records"))
        parts = sorted(set(parts))
        for (_, end, kind), (start, _, after) in zip(parts, parts[1:]):
            assert end <= start
            if {kind, after} == {"records", "tensor"} or {kind, after} == {"memory", "tensor"}:
                raise AssertionError(f"{kind} next to {after} at {end}")
            if kind == "records" and after != "records":
                assert after == "gap"
    finally:
        image.close()


def test_a_report_no_runtime_writes_is_refused():
    from gpsimd_emu.records import overwritten
    r = abi.GpsimdCoreReport()
    assert overwritten(r, 4096) is None
    r.status, r.fault_kind = 1, 19
    assert overwritten(r, 4096) is None
    r.fault_kind = 1109917696
    assert overwritten(r, 4096) == "fault code 1109917696 with status 1"
    r.fault_kind, r.tcm_peak = 19, 4767060206681587712
    assert overwritten(r, 4096) == ("4767060206681587712 bytes of the TCM pool in use "
                                    "(capacity 16384)")
    r.tcm_peak, r.scratch_peak = 0, 4097
    assert overwritten(r, 4096) == "4097 bytes of the scratch window in use (capacity 4096)"


def test_the_bytes_before_each_arena_s_first_input_hold_the_run_s_poison():
    """A read before the first input (x[-1] through a raw pointer) reads
    the run's TCM poison, as one past an input does, not a zero that may
    be the padding a reference expects; a write there is named."""
    from gpsimd_emu import dtypes as dt
    from gpsimd_emu.image import DeviceImage
    from gpsimd_emu.memory import INPUT_GUARD
    from gpsimd_emu.vectors import Input
    x = np.arange(10, dtype=np.float32)
    image = DeviceImage([Input("x", "tensor", dt.by_name("float32"), x, x)],
                        dt.by_name("float32"), (10,), 1, abi.SCRATCH_SINGLE_SIZE)
    try:
        (name, sbuf, off, n, _), = image.input_spans
        assert (name, sbuf, off) == ("x", False, INPUT_GUARD)
        for r in image.runs:
            for a in image.arenas[r.index]:
                assert (a.u8[:INPUT_GUARD] == image.runs[r.index if r.after < 0 else r.after]
                        .tcm_poison).all()
        assert image.modified_inputs([0, 1]) == []
        image.arenas[1][0].u8[INPUT_GUARD - 4:INPUT_GUARD] = 0
        assert image.modified_inputs([0, 1]) == [("x", 0, 0, 4)]
    finally:
        image.close()
