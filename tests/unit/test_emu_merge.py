"""Poison detection and the multicore merge as pure functions (gpsimd_emu.merge)."""
import numpy as np

from gpsimd_emu.merge import (format_ranges, merge_core_outputs, runs, true_ranges,
                              written_mask)

P = 0xA5


def core_copy(n, writes, dtype=np.float32):
    """A poisoned copy of n elements where `writes` {offset: value} were written."""
    buf = np.full(n * np.dtype(dtype).itemsize, P, dtype=np.uint8)
    view = buf.view(dtype)
    for off, val in writes.items():
        view[off] = val
    return buf


def test_written_mask_is_per_element_any_byte():
    buf = np.full(12, P, np.uint8)
    buf[5] = 0          # element 1 (bytes 4..7), one byte changed
    assert written_mask(buf, P, 4).tolist() == [False, True, False]
    assert written_mask(buf, P, 2).tolist() == [False, False, True, False, False, False]
    assert written_mask(buf, P, 4, num_elem=2).tolist() == [False, True]


def test_runs_and_ranges():
    assert runs(np.array([0, 0, 3, 3, 3, 0])) == [(0, 2, 0), (2, 5, 3), (5, 6, 0)]
    assert true_ranges(np.array([1, 1, 0, 1], bool)) == [(0, 2), (3, 4)]
    assert true_ranges(np.array([0, 1], bool), offset=100) == [(101, 102)]
    assert format_ranges([(0, 2), (5, 9)]) == "[0, 2), [5, 9)"
    text = format_ranges([(i * 3, i * 3 + 1) for i in range(10)], limit=2)
    assert text == "[0, 1), [3, 4), ... (8 more ranges; 10 elements in all)"


def test_clean_partition_merges_each_element_from_its_writer():
    n = 10
    parts = [range(0, 4), range(4, 7), range(7, 10)]
    outs = [core_copy(n, {i: 100 * k + i for i in r}) for k, r in enumerate(parts)]
    m = merge_core_outputs(outs, 4, n)
    assert m.ok and m.problems == [] and m.holes == [] and m.overlaps == []
    assert m.merged.view(np.float32).tolist() == [0, 1, 2, 3, 104, 105, 106, 207, 208, 209]
    assert m.writers.tolist() == [1] * 4 + [2] * 3 + [4] * 3


def test_known_spmd_defect_holes_and_overlap_reported_precisely():
    # numel 1001 on 8 cores: partition 125, last core gets 126 but starts at
    # 126 * 7 = 882 (the public-example bug of docs/kernel-api.md).
    n, count = 1001, 8
    outs = []
    for cpu in range(count):
        part = n // count + (n % count if cpu == count - 1 else 0)
        start = part * cpu
        outs.append(core_copy(n, {i: 1.0 for i in range(start, min(start + part, n))}))
    m = merge_core_outputs(outs, 4, n)
    assert m.holes == [(875, 882)]
    assert m.overlaps == []
    assert m.problems == ["elements never written by any core: [875, 882)"]


def test_overlap_and_idle_core_messages():
    n = 8
    outs = [core_copy(n, {i: 1 for i in range(0, 5)}),
            core_copy(n, {i: 2 for i in range(3, 8)}),
            core_copy(n, {})]
    m = merge_core_outputs(outs, 4, n, core_ids=[0, 6, 7])
    assert m.overlaps == [((3, 5), (0, 6))]
    assert m.idle_cores == [7]
    assert m.problems == ["elements written by more than one core: [3, 5) by cores 0, 6",
                          "core 7 wrote nothing"]
    # the lowest core's value wins where several wrote
    assert m.merged.view(np.float32).tolist() == [1, 1, 1, 1, 1, 2, 2, 2]


def test_single_core_poison_left_is_never_written():
    out = core_copy(6, {0: 1, 1: 1, 4: 1})
    m = merge_core_outputs([out], 4, 6)
    assert m.problems == ["elements never written: [2, 4), [5, 6)"]
    assert m.idle_cores == []


def test_value_equal_to_poison_resolved_by_complement_pass():
    # int8 output: a kernel writes -91 (== 0xA5) at offset 2.
    values = np.array([1, 2, -91, 4], dtype=np.int8)
    pass_a = np.full(4, 0xA5, np.uint8)
    pass_a[:] = values.view(np.uint8)
    pass_b = np.full(4, 0x5A, np.uint8)
    pass_b[:] = values.view(np.uint8)
    m1 = merge_core_outputs([pass_a], 1, 4)
    assert m1.problems == ["elements never written: [2, 3)"]    # fooled by one pass
    mask = written_mask(pass_a, 0xA5, 1) | written_mask(pass_b, 0x5A, 1)
    m2 = merge_core_outputs([pass_a], 1, 4, masks=[mask])
    assert m2.ok and m2.merged.view(np.int8).tolist() == [1, 2, -91, 4]
