"""What a vector's outputs show (``judge_output``), with the checks on: the
model's rows of ARCHITECTURE.md "The checks", each with the message that
table shows; then the comparison of the merged output with the expected
one (none when one of them makes the values meaningless). With checks on,
the vector's write-set layout is returned as ranges, never per element
(``layout``: ARCHITECTURE.md "Emulator results").
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from gpsimd_device.faults import fault_name

from . import abi
from .compare import Comparison, compare
from .cores import CoreSpec
from .image import DeviceImage
from .judge import RunOutcome, core_name, core_no
from .memory import BEFORE_GUARD_BYTES
from .merge import cores_text, format_ranges, merge_core_outputs, true_ranges, written_mask
from .merge import written_mask as _elements_differ  # (of two copies: per element, differ?)

__all__ = ["judge_output", "LAYOUT_MAX_RANGES"]

#: Ranges kept per list of the layout (the rest counted in ``truncated``).
LAYOUT_MAX_RANGES = 256

RACE = "a cross-core race on the device: cores do not wait for each other"
#: What an element depends on when a core read it through a standard or
#: stream accessor or a raw pointer before writing it (multicore: the runs
#: against a shared zero-filled output tell it from never-written memory).
OUTPUT_SOURCE = ("output elements read before they were written (through a standard or "
                 "stream accessor or a raw pointer: an output element holds no defined value "
                 "until it is written)")


#: The never-written memory a core can read, by report flag (abi.h): how a
#: message names it, and what holds its poison (ARCHITECTURE.md "The checks").
_SOURCES = ((abi.REPORT_INPUT_RAW, "memory around an input",
             "the bytes around each input that a raw pointer reads outside it"),
            (abi.REPORT_TCM_USED, "TCM", "tcm_malloc memory"),
            (abi.REPORT_EMPTY_USED, "torch::empty() storage", "torch::empty() storage"),
            (abi.REPORT_SCRATCH_USED, "HBM scratch", "neuron_hbm_allocate blocks"),
            (abi.REPORT_STACK_POISONED, "stack", "local variables"),
            (abi.REPORT_HEAP_POISONED, "heap", "malloc / new blocks"))


def _listed(words: Sequence[str], last: str) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"


def _memory_source(image: DeviceImage, k: int, exact: bool) -> str:
    """What never-written memory core ``k`` used (report flags of run 0);
    ``exact``: the output cannot be the source (nothing of it was read
    before it was written, through the runtime or otherwise)."""
    flags = image.report(0, k).flags
    used = [(name, what) for bit, name, what in _SOURCES if flags & bit]
    if not exact:
        whats = [what for _, what in used] + [
            "output elements the kernel read before writing them through a standard or stream "
            "accessor or a raw pointer"]
        return (f"never-written memory (their values change with the poison of "
                f"{_listed(whats, 'and')})")
    if not used:
        return ("never-written memory (their values change with the poison of memory the "
                "kernel read before writing it)")
    return (f"never-written {_listed([n for n, _ in used], 'or')} (their values change with "
            f"the poison of {_listed([w for _, w in used], 'and')}: read before the kernel "
            f"wrote it)")


def judge_output(image: DeviceImage, cores: Sequence[CoreSpec], outcome: RunOutcome,
                 expected: Optional[np.ndarray], rtol: float, atol: float
                 ) -> Tuple[List[str], Optional[Comparison], Optional[dict], List[str], List[str]]:
    """Problems the outputs of the first call show, the comparison with
    ``expected`` (None when the values mean nothing: elements never
    written, a race, values from never-written memory; or when ``expected``
    is None, a checks-only vector), the layout (None without checks),
    warnings (cores that wrote nothing while the others wrote every
    element), and the problems of the second call (apart: the first call
    can be right when the second is not)."""
    problems: List[str] = []
    if not image.checks:
        return problems, _compare(image, image.output_bytes(0, 0), expected, rtol, atol), None, \
            [], []
    n, size, ncores = image.num_elem, image.itemsize, image.num_cores
    core_ids = [core_no(cores, k) for k in range(len(cores))]
    layout = _Layout(image, core_ids)

    # every run that went to its end, and run 0 (a later run a fault stopped
    # is not judged): a write that happens in one run only (a branch on
    # never-written memory) is found too; a shared output's, by run (``shared``)
    judged = [p for p, r in enumerate(image.runs) if p == 0 or outcome.ran(p)]
    beyond = np.zeros((ncores, max(map(image.guard_of, judged)) // size), dtype=bool)
    before = np.zeros((ncores, BEFORE_GUARD_BYTES // size), dtype=bool)
    shared: List[str] = []
    for p in judged:
        guards = image.copies(p, image.guard_of(p))[:, image.out_nbytes:]
        past = written_mask(guards, image.runs[p].poison, size)     # (every core's at once)
        lead = written_mask(image.befores(p), image.runs[p].poison, size)
        if image.runs[p].private:
            beyond[:, :past.shape[1]] |= past
            before |= lead
            continue
        count = f" (the output has {n} element{'s' if n != 1 else ''})"
        for what, mask, offset, tail in (("past the end of", past[0], n, count),
                                         ("before the start of", lead[0], -lead.shape[1], "")):
            if mask.any():
                shared.append((f"{what} the output only in a run against one shared output"
                               f"{image.runs[p].label}: elements "
                               f"{format_ranges(true_ranges(mask, offset=offset))}{tail}"))
    for k in np.flatnonzero(beyond.any(axis=1)):
        ranges = true_ranges(beyond[k], offset=n)
        layout.core(k)["past_end"] = layout.ranges(ranges)
        problems.append(f"{core_name(cores, k)} wrote past the end of the output: "
                        f"elements {format_ranges(ranges)} (the output has {n} element"
                        f"{'s' if n != 1 else ''})")
    for k in np.flatnonzero(before.any(axis=1)):
        ranges = format_ranges(true_ranges(before[k], offset=-before.shape[1]))
        problems.append(f"{core_name(cores, k)} wrote before the start of the output: "
                        f"elements {ranges}")
    problems += [f"a core wrote {text}" for text in (shared if not problems else [])]
    modified = False
    for name, changed, past, before in image.modified_inputs(judged):
        modified = True
        if changed:
            problems.append(f"input {name!r} was modified ({changed} bytes changed)")
        if past:
            problems.append(f"input {name!r} was written past its end ({past} bytes changed "
                            f"after it)")
        if before:
            problems.append(f"input {name!r} was written before its start ({before} bytes "
                            f"changed before it)")

    masks = image.masks(0) | image.masks(1) if outcome.ran(1) else image.masks(0)
    merged = merge_core_outputs(image.copies(0), size, n, masks=masks, core_ids=core_ids)
    holes = bool(merged.holes)
    merge_problems = list(merged.problems)
    if ncores == 1 and holes and image.report(0, 0).flags & abi.REPORT_COPY_PATH:
        # the copy path wrote every element (ARCHITECTURE.md "The device's marshalling"):
        # the holes are elements of the returned tensor the kernel never wrote
        # (empty() is poisoned with the run's poison byte, abi.h GPSIMD_CHECK_POISON_EMPTY)
        merge_problems = [
            "uninitialised elements reached the output through the copy path (the returned "
            "tensor, copied by customop_return_tensor, was never written there; e.g. "
            f"torch::empty() storage): {format_ranges(merged.holes)}"]
    warnings: List[str] = []
    if ncores > 1 and merged.idle_cores and (not holes or n < ncores):
        # the other cores wrote every element: not a wrong result (a split
        # of fewer units than cores, rows say, leaves cores idle); a
        # warning, and none when the output has fewer elements than cores.
        # With holes (and enough elements for every core) it stays a
        # problem: it explains them.
        merge_problems.remove(merged.idle_text)
        if n >= ncores:
            warnings.append(f"{merged.idle_text} (the other cores wrote every element)")
    problems += merge_problems
    layout.merge(masks, merged)

    reads, readers = _read_problems(image, cores, outcome, merged.writers, layout)
    problems += reads
    # per element, do the two fixed-order runs (2 and 3, multicore) differ?
    # (None unless both went to their end)
    orders = _elements_differ(image.output_bytes(2, 0), image.output_bytes(3, 0), size, n) \
        if ncores > 1 and outcome.ran(2) and outcome.ran(3) else None
    uninit = _uninit_problems(image, outcome, masks, orders, layout) if not holes else []
    problems += uninit
    race = _order_problems(image, orders, merged.writers, readers, layout)
    race += _all_written_problems(image, outcome, masks, orders, merged.writers, layout) \
        if not (holes or race) else []
    problems += race
    # (a modified input, reported, explains a second call's other output)
    later = _second_call_problems(image, cores, outcome, masks, merged.writers) \
        if not (holes or uninit or modified) else []
    if holes or reads or uninit or race or expected is None:
        return problems, None, layout.doc, warnings, later
    comparison = _compare(image, merged.merged, expected, rtol, atol)
    if comparison.ok and ncores > 1 and outcome.ran(2):
        # the run most like the device (every core, one zero-filled output):
        # a kernel that reads its own never-written output through a pointer
        # and tests it for zero is right against the poisons, not there
        device = _compare(image, image.output_bytes(2, 0), expected, rtol, atol)
        if not device.ok:
            problems.append(f"the output is wrong in the run most like the device"
                            f"{image.runs[2].label}, which starts from a zero-filled output: "
                            f"{device.message}")
    return problems, comparison, layout.doc, warnings, later


def _compare(image: DeviceImage, raw: np.ndarray, expected: Optional[np.ndarray], rtol: float,
             atol: float) -> Optional[Comparison]:
    """``compare`` of an output's ``raw`` bytes with ``expected`` (None: None)."""
    if expected is None:
        return None
    actual = raw.view(image.out_dtype.numpy).reshape(image.out_shape)
    return compare(actual, expected, image.out_dtype, rtol, atol)


def _read_problems(image: DeviceImage, cores: Sequence[CoreSpec], outcome: RunOutcome,
                   writers: np.ndarray, layout: "_Layout") -> Tuple[List[str], int]:
    """Reads of elements a core had not written itself (exact: read while
    holding the poison in both private runs). Returns the problems and a
    bit mask of the cores in cross-core reads (readers and writers)."""
    out = []
    involved = 0
    readers = [k for k in range(image.num_cores)
               if image.report(0, k).flags & abi.REPORT_OUTPUT_READ]
    if not readers:
        return out, involved
    maps = image.read_maps(0) & image.read_maps(1) if outcome.ran(1) else image.read_maps(0)
    for k in readers:
        read = maps[k]
        if not read.any():
            continue
        layout.core(k)["read_before_write"] = layout.ranges(true_ranges(read))
        others = writers & ~np.asarray(1 << k, dtype=writers.dtype)
        cross = read & (others != 0)
        alone = read & (others == 0)
        if cross.any():
            bits = int(np.bitwise_or.reduce(others[cross]))
            involved |= bits | (1 << k)
            who = [layout.core_ids[j] for j in range(image.num_cores) if bits >> j & 1]
            verb = "writes" if len(who) == 1 else "write"
            out.append(f"{core_name(cores, k)} read output elements "
                       f"{format_ranges(true_ranges(cross))} before writing them; "
                       f"{cores_text(who)} {verb} them ({RACE})")
        if alone.any():
            out.append(f"{core_name(cores, k)} read output elements "
                       f"{format_ranges(true_ranges(alone))} before writing them (an output "
                       f"element holds no defined value until it is written)")
    return out, involved


def _uninit_problems(image: DeviceImage, outcome: RunOutcome, masks: Sequence[np.ndarray],
                     orders: Optional[np.ndarray], layout: "_Layout") -> List[str]:
    """Elements a core wrote in either private run (``masks``) whose values
    differ between the two, grouped by their source (ARCHITECTURE.md "The
    checks"; elements runs 2 and 3 disagree on, ``orders``, are the order
    check's)."""
    if not outcome.ran(1):
        return []
    n, size = image.num_elem, image.itemsize
    differs = masks & _elements_differ(image.copies(0), image.copies(1), size, n)
    grouped: Dict[str, Tuple[List[int], np.ndarray]] = {}

    def add(k: int, source: str, elements: np.ndarray) -> None:
        nums, acc = grouped.setdefault(source, ([], np.zeros(n, dtype=bool)))
        nums.append(layout.core_ids[k])
        acc |= elements

    for k, differ in enumerate(differs):
        if not differ.any():
            continue
        layout.core(k)["uninit"] = layout.ranges(true_ranges(differ))
        flags = image.report(0, k).flags
        exact = not flags & (abi.REPORT_OUTPUT_READ | abi.REPORT_OUTPUT_UNTRACKED)
        if not exact and orders is not None:
            from_output = differ & ~orders & _elements_differ(
                image.output_bytes(2, 0), image.output_bytes(1, k), size, n)
            differ = differ & ~orders & ~from_output
            exact = True
            if from_output.any() and flags & abi.REPORT_OUTPUT_UNTRACKED:
                add(k, OUTPUT_SOURCE, from_output)      # (tracked reads: _read_problems')
        if differ.any():
            add(k, _memory_source(image, k, exact), differ)
    return [f"{cores_text(nums)}: output elements {format_ranges(true_ranges(acc))} depend on "
            f"{source}" for source, (nums, acc) in grouped.items()]


def _second_call_problems(image: DeviceImage, cores: Sequence[CoreSpec],
                          outcome: RunOutcome, masks: Sequence[np.ndarray],
                          writers: np.ndarray) -> List[str]:
    """The second call's problems (``runs.SECOND_CALL``, ARCHITECTURE.md
    "The checks"): ``_second_call_races``, then ``_second_call_values``,
    unless the call had another vector's arguments but ``image.second`` is
    None (that vector did not pass: its own run says so)."""
    s = next((r.index for r in image.runs if r.after == 0), None)
    if s is None or not outcome.ran(s):
        return []
    races = _second_call_races(image, cores, outcome, s, writers)
    if image.other_run is not None and image.second is None:
        return races
    return races + _second_call_values(image, cores, s, masks)


def _second_call_races(image: DeviceImage, cores: Sequence[CoreSpec], outcome: RunOutcome,
                       s: int, writers: np.ndarray) -> List[str]:
    """Of a multicore second call (run ``s``, one poison), what the first
    call's runs did not find: reads of output elements other cores write
    (``writers``) made before the core wrote them, and elements several
    cores wrote. (A core's own such reads are not named: with one poison,
    a value it wrote can equal it.)"""
    if image.num_cores < 2:
        return []
    out = []
    names = [core_no(cores, k) for k in range(image.num_cores)]
    maps = image.read_maps(s)
    first = image.read_maps(0) & image.read_maps(1) if outcome.ran(1) else image.read_maps(0)
    for k in range(image.num_cores):
        if not image.report(s, k).flags & abi.REPORT_OUTPUT_READ:
            continue
        others = writers & ~np.asarray(1 << k, dtype=writers.dtype)
        cross = maps[k] & ~first[k] & (others != 0)
        if cross.any():
            bits = int(np.bitwise_or.reduce(others[cross]))
            who = [names[j] for j in range(image.num_cores) if bits >> j & 1]
            out.append(f"{core_name(cores, k)} read output elements "
                       f"{format_ranges(true_ranges(cross))} before writing them on a second "
                       f"call of the op; {cores_text(who)} "
                       f"{'writes' if len(who) == 1 else 'write'} them ({RACE})")
    several = (image.masks(s).sum(axis=0) > 1) & ~(writers & (writers - 1) != 0)
    if several.any():
        who = [names[k] for k in np.flatnonzero(image.masks(s)[:, several].any(axis=1))]
        out.append(f"elements written by more than one core on a second call of the op: "
                   f"{format_ranges(true_ranges(several))} by {cores_text(who)}")
    return out


def _second_call_values(image: DeviceImage, cores: Sequence[CoreSpec], s: int,
                        masks: Sequence[np.ndarray]) -> List[str]:
    """With another vector's arguments (``image.second``), the output
    (each element from the core that wrote it in the first runs, ``masks``)
    against that vector's expected one; else elements that differ from run
    0's."""
    n, size = image.num_elem, image.itemsize
    if image.second is not None:
        name, expected, rtol, atol = image.second
        result = _compare(image, merge_core_outputs(image.copies(s), size, n, masks=masks).merged,
                          expected, rtol, atol)
        if result.ok:
            return []
        return [f"a second call of the op, with the arguments of vector {name!r} after a call "
                f"with this vector's, is wrong ({STATE}): {result.message}"]
    differ = _elements_differ(image.copies(0), image.copies(s), size, n)    # (per core)
    nums = [core_no(cores, k) for k in np.flatnonzero(differ.any(axis=1))]
    if not nums:
        return []
    ranges = format_ranges(true_ranges(differ.any(axis=0)))
    return [f"{cores_text(nums)}: output elements {ranges} differ on a second call of the op "
            f"({STATE})"]


#: Why a second call goes wrong.
STATE = ("state the kernel keeps between calls in static or global variables: on the device "
         "the library stays loaded, and each call starts from what the calls before it left")


def _order_problems(image: DeviceImage, diff: Optional[np.ndarray], writers: np.ndarray,
                    readers: int, layout: "_Layout") -> List[str]:
    """Elements that differ between the two fixed-order runs (``diff``);
    the cores involved: their writers, and the cores of cross-core reads."""
    if diff is None or not diff.any():
        return []
    ranges = true_ranges(diff)
    layout.doc["order_dependent"] = layout.ranges(ranges)
    bits = int(np.bitwise_or.reduce(writers[diff])) | readers
    involved = [layout.core_ids[j] for j in range(image.num_cores) if bits >> j & 1]
    who = f"{cores_text(involved)} involved; " if involved else ""
    return [f"the result depends on the order the cores run in: output elements "
            f"{format_ranges(ranges)} differ between running them in the orders 0..7 and 7..0 "
            f"against one shared output ({who}on the device they run at the same time)"]


def _all_written_problems(image: DeviceImage, outcome: RunOutcome, masks: np.ndarray,
                          orders: Optional[np.ndarray], writers: np.ndarray,
                          layout: "_Layout") -> List[str]:
    """Elements the run with every other core's part written
    (``runs.ALL_WRITTEN``, ARCHITECTURE.md "The checks") left otherwise than
    run 2; but not the order check's (``orders``), nor those that change
    with the poison in runs 0 and 1 (``_uninit_problems``')."""
    x = next((r.index for r in image.runs if r.base >= 0), None)
    if x is None or not outcome.ran(x):
        return []
    launched = [k for k in range(image.num_cores) if any(
        image.report(q, k).flags & abi.REPORT_OUTPUT_UNTRACKED for q in range(x))]
    n, size = image.num_elem, image.itemsize
    diff = _elements_differ(image.output_bytes(x, 0), image.output_bytes(image.runs[x].base, 0),
                            size, n) if launched else None
    if diff is None or not diff.any():
        return []
    diff &= ~(masks & _elements_differ(image.copies(0), image.copies(1), size, n)).any(axis=0)
    if orders is not None:
        diff &= ~orders
    if not diff.any():
        return []
    ranges = true_ranges(diff)
    layout.doc["order_dependent"] = layout.ranges(ranges)
    bits = int(np.bitwise_or.reduce(writers[diff]))
    involved = [layout.core_ids[k] for k in launched if bits >> k & 1] or \
        [layout.core_ids[k] for k in launched]
    return [f"the result depends on which other cores are done when a core runs: output "
            f"elements {format_ranges(ranges)} differ between running {cores_text(involved)} "
            f"with every other core's part of one shared output written and in the order 0..7 "
            f"(on the device the cores run at the same time: any of them may be done first)"]


_OFFSET_COUNT = re.compile(r"offset (\d+), count (\d+)")


class _Layout:
    """The ``layout`` document (ranges only) being built."""

    def __init__(self, image: DeviceImage, core_ids: Sequence[int]):
        self.core_ids = list(core_ids)
        self.doc: dict = {"elements": image.num_elem, "itemsize": image.itemsize,
                          "cores": [{"core": c, "written": [], "read_before_write": [],
                                     "past_end": [], "uninit": [], "fault": None}
                                    for c in core_ids],
                          "holes": [], "overlaps": [], "order_dependent": [],
                          "truncated": False}
        for k in range(image.num_cores):
            r = image.report(0, k)
            if r.status != abi.STATUS_OK:
                m = _OFFSET_COUNT.search(r.message.decode("utf-8", errors="replace"))
                rng = [int(m.group(1)), int(m.group(1)) + int(m.group(2))] if m else None
                self.doc["cores"][k]["fault"] = {"kind": fault_name(r.fault_kind), "range": rng}

    def core(self, k: int) -> dict:
        return self.doc["cores"][k]

    def ranges(self, ranges: Sequence[Tuple[int, int]]) -> List[List[int]]:
        if len(ranges) > LAYOUT_MAX_RANGES:
            self.doc["truncated"] = True
        return [[int(a), int(b)] for a, b in ranges[:LAYOUT_MAX_RANGES]]

    def merge(self, masks: Sequence[np.ndarray], merged) -> None:
        for k, m in enumerate(masks):
            self.core(k)["written"] = self.ranges(true_ranges(m))
        self.doc["holes"] = self.ranges(merged.holes)
        kept = self.ranges([r for r, _ in merged.overlaps])
        self.doc["overlaps"] = [{"range": r, "cores": list(c)}
                                for r, (_, c) in zip(kept, merged.overlaps)]

