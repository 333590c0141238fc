"""Which core wrote which output element: poison detection and the multicore
merge, as pure functions of arrays (the runs, their private output copies
and poisons: ARCHITECTURE.md "The checks"). An element counts as written by
a core when any of its bytes differs from the poison; a core's written mask
is the OR of runs 0 and 1 (``POISON_A`` and its complement ``POISON_B``:
a value equal to one poison differs from the other), and an element's value
is always run 0's (changed, or the poison because the kernel wrote exactly
that value).

Offsets in messages are flat element offsets into the output (row-major),
given as half-open ranges ``[a, b)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from .runs import POISON_A

__all__ = [
    "written_mask", "runs", "true_ranges", "format_ranges", "cores_text", "MergeResult",
    "merge_core_outputs",
]

#: How many ranges a message lists before summarising.
MAX_RANGES = 8

Range = Tuple[int, int]


def written_mask(buf: np.ndarray, poison: Union[int, np.ndarray], itemsize: int,
                 num_elem: Optional[int] = None) -> np.ndarray:
    """Per element: was any byte changed from the poison?

    Args:
        buf: the output copy as ``uint8`` (at least ``num_elem * itemsize``
            bytes; bytes past that are ignored), or several, one per row
            (2-D, each row contiguous: every core's copy of a run).
        poison: the poison byte (0..255), or ``uint8`` bytes that broadcast
            against ``buf``'s (another copy, or one per row: do they differ?).
        itemsize: bytes per element.
        num_elem: elements to examine; default ``buf.shape[-1] // itemsize``.

    Returns:
        ``bool`` array of shape ``(num_elem,)``, or ``(rows, num_elem)``.
    """
    buf = np.asarray(buf, dtype=np.uint8)
    if num_elem is None:
        num_elem = buf.shape[-1] // itemsize
    nbytes = num_elem * itemsize
    if buf.shape[-1] < nbytes:
        raise ValueError(f"{buf.shape[-1]} bytes < {num_elem} elements x {itemsize}")
    b = buf[..., :nbytes]
    other = poison[..., :nbytes] if isinstance(poison, np.ndarray) else poison
    if itemsize in (1, 2, 4, 8) and all(x.ctypes.data % itemsize == 0 for x in (b, other)
                                        if isinstance(x, np.ndarray)):
        # whole-element compare: one unsigned word per element against the
        # other's, or the poison byte repeated itemsize times (same answer,
        # ~40x faster)
        word = f"<u{itemsize}"
        return b.view(word) != (other.view(word) if isinstance(other, np.ndarray) else
                                int.from_bytes(bytes([poison]) * itemsize, "little"))
    return (b != other).reshape(*b.shape[:-1], num_elem, itemsize).any(axis=-1)


def runs(values: np.ndarray) -> List[Tuple[int, int, int]]:
    """Runs of equal values in a 1-D integer array: ``(start, end, value)``
    with ``end`` exclusive, in order."""
    values = np.asarray(values).reshape(-1)
    if values.size == 0:
        return []
    cuts = np.flatnonzero(values[1:] != values[:-1]) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [values.size]))
    return [(int(s), int(e), int(values[s])) for s, e in zip(starts, ends)]


def true_ranges(mask: np.ndarray, offset: int = 0) -> List[Range]:
    """Half-open ranges ``[a, b)`` where a 1-D bool array is True, each
    shifted by ``offset``."""
    return [(s + offset, e + offset) for s, e, v in runs(np.asarray(mask, dtype=np.int8)) if v]


def format_ranges(ranges: Sequence[Range], limit: int = MAX_RANGES) -> str:
    """``"[0, 4), [9, 10)"``; past ``limit`` ranges, the rest is summarised
    as ``"... (N more ranges; M elements in all)"``."""
    shown = ", ".join(f"[{a}, {b})" for a, b in ranges[:limit])
    if len(ranges) > limit:
        total = sum(b - a for a, b in ranges)
        shown += f", ... ({len(ranges) - limit} more ranges; {total} elements in all)"
    return shown


def cores_text(cores: Sequence[int]) -> str:
    """``"core 3"``, ``"cores 0-7"``, ``"cores 1, 4-6"`` (sorted, runs of
    consecutive cores joined)."""
    nums = sorted(set(int(c) for c in cores))
    # consecutive numbers have the same number minus position
    parts = [str(nums[a]) if b - a == 1 else f"{nums[a]}-{nums[b - 1]}"
             for a, b, _ in runs(np.subtract(nums, range(len(nums))))]
    return ("core " if len(nums) == 1 else "cores ") + ", ".join(parts)


@dataclass(frozen=True)
class MergeResult:
    """The merged output of all cores and what went wrong.

    Attributes:
        merged: ``uint8`` bytes of the merged output (``num_elem *
            itemsize``): each element from the core that wrote it (the
            lowest-numbered one when several did); poison where none did.
        writers: unsigned integer array ``(num_elem,)`` (``uint8`` for up to
            8 cores, wider for more): a bit mask of the cores (bit ``k`` =
            ``core_ids[k]``) that wrote each element.
        holes: ranges of elements no core wrote.
        overlaps: ``(range, cores)`` for runs of elements written by the
            same two or more cores.
        idle_cores: cores that wrote no element.
        problems: one message per kind of failure ("" kinds omitted); empty
            when the merge is clean.
    """

    merged: np.ndarray
    writers: np.ndarray
    holes: List[Range]
    overlaps: List[Tuple[Range, Tuple[int, ...]]]
    idle_cores: List[int]
    problems: List[str] = field(default_factory=list)

    @property
    def idle_text(self) -> str:
        """The problem line of the idle cores (``"cores 5-7 wrote nothing"``),
        "" when none is idle."""
        return f"{cores_text(self.idle_cores)} wrote nothing" if self.idle_cores else ""

    @property
    def ok(self) -> bool:
        """No holes, overlaps or idle cores."""
        return not self.problems


def merge_core_outputs(outputs: Sequence[np.ndarray], itemsize: int, num_elem: int,
                       masks: Optional[Sequence[np.ndarray]] = None,
                       core_ids: Optional[Sequence[int]] = None) -> MergeResult:
    """Merge the private output copies of the cores of one run.

    Args:
        outputs: one ``uint8`` array per core (at least ``num_elem *
            itemsize`` bytes), in core order.
        itemsize: bytes per element.
        num_elem: elements of the output.
        masks: per core, the ``bool`` written mask ``(num_elem,)`` (e.g. the
            OR over two runs); default ``written_mask`` of each output
            against run 0's poison (``runs.POISON_A``).
        core_ids: the core number of each output; default ``0..n-1``.

    Returns:
        A ``MergeResult``. With one core, a hole reads "elements never
        written: [a, b)"; with several, "elements never written by any core:
        ...", "elements written by more than one core: [a, b) by cores i, j",
        and "core k wrote nothing".
    """
    n = len(outputs)
    if core_ids is None:
        core_ids = list(range(n))
    if n == 0 or n > 62:
        raise ValueError(f"{n} cores: need 1..62")
    if masks is None:
        masks = [written_mask(o, POISON_A, itemsize, num_elem) for o in outputs]
    nbytes = num_elem * itemsize
    bufs = [np.asarray(o, dtype=np.uint8).reshape(-1)[:nbytes] for o in outputs]

    wtype = np.min_scalar_type((1 << n) - 1).type    # (one bit per core: uint8 for 8 cores)
    writers = np.zeros(num_elem, dtype=wtype)
    for k, m in enumerate(masks):
        writers |= np.asarray(m, dtype=bool).astype(wtype) << wtype(k)

    # one item per element, whatever its size (copyto with a mask is far
    # cheaper than boolean fancy indexing of (num_elem, itemsize) rows)
    items = [b.view(f"V{itemsize}") for b in bufs]
    merged = items[0].copy()
    taken = np.asarray(masks[0], dtype=bool).copy()
    for k in range(1, n):
        pick = np.asarray(masks[k], dtype=bool) & ~taken
        np.copyto(merged, items[k], where=pick)
        taken |= pick

    holes: List[Range] = []
    overlaps: List[Tuple[Range, Tuple[int, ...]]] = []
    for s, e, bits in runs(writers):
        if bits == 0:
            holes.append((s, e))
        elif bits & (bits - 1):
            overlaps.append(((s, e), tuple(core_ids[k] for k in range(n) if bits >> k & 1)))
    idle = [core_ids[k] for k in range(n) if not np.any(masks[k])]

    # (one core: no overlap, and an idle core is all holes)
    problems = [f"elements never written{' by any core' if n > 1 else ''}: "
                f"{format_ranges(holes)}"] if holes else []
    if overlaps:
        parts = [f"[{a}, {b}) by {cores_text(c)}" for (a, b), c in overlaps[:MAX_RANGES]]
        if len(overlaps) > MAX_RANGES:
            parts.append(f"... ({len(overlaps) - MAX_RANGES} more ranges)")
        problems.append("elements written by more than one core: " + ", ".join(parts))
    if idle and n > 1:
        problems.append(f"{cores_text(idle)} wrote nothing")  # == MergeResult.idle_text
    return MergeResult(merged.view(np.uint8), writers, holes, overlaps, idle, problems)
