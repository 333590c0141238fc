"""The probe phase of explore: learn the rank and dtype of each tensor
argument of an op from the kernel's own faults, before any search.

A kernel says what it accepts only when it is wrong: ``accessor<float,2>
on a 1-dimensional tensor`` (a SHAPE fault: rank 2 wanted),
``accessor<c10::Half> on a float32 tensor`` (a DTYPE fault: float16
wanted), ``size(1): dimension out of range for a 1-dimensional tensor``
or ``IntArrayRef index 1 out of range (size 1)`` (``sizes()[1]``: a rank
above 1 wanted). :func:`probe` runs the kernel on small tensors
(every dimension :data:`PROBE_DIM`), float32 and rank 1 first (or what
the op's vector gives), and follows each such lesson, all tensors of the
rank or dtype the fault names at once; when that makes a tensor checked
earlier ask back (the kernel's tensors want different ranks), it changes
them one at a time instead. A fault that only this mismatch caused is never
the op's bug: the search then draws from what was learned.

The rank and dtype a fault names come from the model's fault messages
(``runtime_model/src/tensor.cpp``); the C++ type names from the dtype
table's C type column, plus the other spellings an accessor may use
(:data:`CTYPE_ALIASES`, the model's ``torch/detail/scalar_type.h``; a
unit test keeps the two equal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from gpsimd_device.dtypes import DTYPES
from gpsimd_device.limits import MAX_DIMS

__all__ = ["PROBE_DIM", "MAX_PROBE_RUNS", "CTYPE_ALIASES", "Lesson", "Probed",
           "lesson_of", "probe"]

#: Every dimension's size while probing (small: only the faults matter).
PROBE_DIM = 2
#: Runs of the kernel one probe may take, at most.
MAX_PROBE_RUNS = 24
#: C++ element types an accessor may name other than the table's column.
CTYPE_ALIASES: Dict[str, str] = {"char": "int8", "long": "int64", "long long": "int64",
                                 "unsigned long": "uint64", "unsigned long long": "uint64"}
_BY_CTYPE: Dict[str, str] = {**{d.ctype: d.name for d in DTYPES.values()}, **CTYPE_ALIASES}

_SHAPE = re.compile(r"fault SHAPE in op \S+: \w+<([^,<>]+),(\d+)> on a (\d+)-dimensional tensor")
_DTYPE = re.compile(r"fault DTYPE in op \S+: \w+<([^<>]+)> on an? (\w+) tensor")
_DIM = re.compile(r"\w+\((-?\d+)\): dimension out of range for a (\d+)-dimensional tensor")
#: ``sizes()[1]`` (or ``strides()[1]``) of a 1-dimensional tensor.
_INDEX = re.compile(r"IntArrayRef index (\d+) out of range \(size (\d+)\)")


@dataclass(frozen=True)
class Lesson:
    """What one fault teaches: tensors whose ``field`` (``"rank"`` or
    ``"dtype"``) is ``have`` should have ``want`` (for ``"rank"`` with
    ``at_least``, any rank from ``want`` up); ``text`` is the fault's."""

    field: str
    want: object
    have: object
    text: str
    at_least: bool = False


def lesson_of(message: str) -> Optional[Lesson]:
    """The first lesson in a vector's failure ``message``, or None when it
    names no rank or dtype the kernel wants (module text)."""
    m = _SHAPE.search(message)
    if m:
        return Lesson("rank", int(m.group(2)), int(m.group(3)), m.group(0))
    m = _DTYPE.search(message)
    if m and m.group(1) in _BY_CTYPE and m.group(2) in DTYPES:
        return Lesson("dtype", _BY_CTYPE[m.group(1)], m.group(2), m.group(0))
    m = _DIM.search(message)
    if m:
        index, ndim = int(m.group(1)), int(m.group(2))
        want = index + 1 if index >= 0 else -index
        if ndim < want <= MAX_DIMS:
            return Lesson("rank", want, ndim, m.group(0), at_least=True)
    m = _INDEX.search(message)
    if m:
        want, ndim = int(m.group(1)) + 1, int(m.group(2))
        if ndim < want <= MAX_DIMS:
            return Lesson("rank", want, ndim, m.group(0), at_least=True)
    return None


@dataclass
class Probed:
    """The probe's outcome: each tensor's ``ranks`` and ``dtypes``, the
    ``lessons`` followed (fault texts), the ``runs`` taken, and the last
    run's failure message (``""`` when it passed its checks), which no
    lesson explains."""

    ranks: Dict[str, int]
    dtypes: Dict[str, str]
    lessons: List[str] = field(default_factory=list)
    runs: int = 0
    last_message: str = ""
    problem: Optional[str] = None   # why the probe could not settle (None: it did)

    def shapes(self, dim: int = PROBE_DIM) -> Dict[str, Tuple[int, ...]]:
        """Each tensor's shape with every dimension ``dim``."""
        return {t: (dim,) * r for t, r in self.ranks.items()}


#: ``run(shapes, dtypes)`` -> ``(passed_its_checks, failure_message)``.
Runner = Callable[[Dict[str, Tuple[int, ...]], Dict[str, str]], Tuple[bool, str]]


def probe(tensors: Sequence[str], run: Runner, ranks: Optional[Dict[str, int]] = None,
          dtypes: Optional[Dict[str, str]] = None) -> Probed:
    """Learn what ``tensors`` (argument names, in order) the kernel accepts,
    by ``run`` (module text); start from ``ranks`` (default 1) and
    ``dtypes`` (default float32)."""
    state = Probed({t: (ranks or {}).get(t, 1) for t in tensors},
                   {t: (dtypes or {}).get(t, "float32") for t in tensors})
    return _settle(state, tensors, run) if tensors else state


def _settle(state: Probed, tensors: Sequence[str], run: Runner) -> Probed:
    """Follow lessons from ``state`` until a run teaches nothing, within
    :data:`MAX_PROBE_RUNS` runs (module text)."""
    lesson = _run(state, run)
    while lesson is not None and state.runs < MAX_PROBE_RUNS:
        values = state.ranks if lesson.field == "rank" else state.dtypes
        cands = [t for t in tensors if values[t] == lesson.have]
        if not cands:       # (about a tensor the kernel makes itself: not the inputs')
            return state
        for t in cands:     # (all at once first: most kernels' tensors agree)
            values[t] = lesson.want
        after = _run(state, run)
        if _reverses(after, lesson):
            # (one tensor wants it, one checked earlier does not: one at a time)
            for t in cands:
                values[t] = lesson.have
            for t in cands:
                if state.runs >= MAX_PROBE_RUNS:
                    break
                values[t] = lesson.want
                after = _run(state, run)
                if after is None or (_key(after) != _key(lesson) and not _reverses(after, lesson)):
                    break
                values[t] = lesson.have
            else:
                state.problem = (f"the kernel's tensors want {lesson.field}s this probe could "
                                 f"not settle (last: {lesson.text}); give the op a vector")
                return state
        state.lessons.append(lesson.text)
        lesson = after
    if lesson is not None:
        state.problem = f"no settled ranks and dtypes after {state.runs} runs (last: {lesson.text})"
    return state


def _key(lesson: Lesson) -> Tuple[str, object, object]:
    return lesson.field, lesson.want, lesson.have


def _reverses(after: Optional[Lesson], lesson: Lesson) -> bool:
    """True when ``after`` asks back what ``lesson`` changed (a tensor
    checked earlier that wanted the old value)."""
    return after is not None and _key(after) == (lesson.field, lesson.have, lesson.want)


def _run(state: Probed, run: Runner) -> Optional[Lesson]:
    state.runs += 1
    ok, message = run(state.shapes(), dict(state.dtypes))
    state.last_message = "" if ok else message
    return None if ok else lesson_of(message)
