"""Which failing examples of explore are the op's bug and which are the
kernel refusing a rank its vectors do not use (rejected, never reported).

A kernel says which rank it wants only by faulting (``gpsimd_explore.probe``:
``accessor<float,2> on a 1-dimensional tensor``, ``size(1): dimension out
of range``, ``IntArrayRef index 1 out of range (size 1)``). Such a fault
is a refusal only when the rank it names is one the example drew *other*
than its vector's: a tensor drawn at the rank its vector gives is a rank
the op is tested at, so a fault there (``sizes()[dim()]`` on a large
tensor, or when a dimension is 1) is the op's bug. A DTYPE fault is never
a refusal: every drawn tensor has its vector's dtype.

A reference may fail first, on the rank the kernel would refuse (``rowsum``'s
``x.sum(axis=1)`` on a rank-1 tensor): when the example drew another rank
and the failure is the reference's, the kernel is run checks-only on the
same inputs, and the example is rejected when the kernel refuses that
rank; at the vector's own ranks a reference's failure is reported.
"""

from __future__ import annotations

import dataclasses
from typing import Dict

import numpy as np

from gpsimd_device.plan import ExpectedSpec, OutputSpec, VectorPlan

from .draw import _shape_of
from .probe import lesson_of

__all__ = ["refused", "other_ranks"]


def other_ranks(template: VectorPlan, arrays: Dict[str, object]) -> set:
    """The ranks of the example's tensors drawn at another rank than the
    template's (its vector's) own."""
    out = set()
    for name, arr in arrays.items():
        spec = template.inputs.get(name)
        if isinstance(arr, np.ndarray) and spec is not None and \
                arr.ndim != len(_shape_of(spec)):
            out.add(arr.ndim)
    return out


def _refusal(message: str, ranks: set) -> bool:
    lesson = lesson_of(message)
    return lesson is not None and lesson.field == "rank" and lesson.have in ranks


def refused(session, op, template: VectorPlan, vector: VectorPlan,
            arrays: Dict[str, object], message: str) -> bool:
    """True when the failure ``message`` of ``vector`` (``template`` with
    ``arrays``) is the kernel refusing a rank the example drew other than
    its vector's (module text); ``session`` runs the kernel again,
    checks-only, when the reference failed at such a rank."""
    ranks = other_ranks(template, arrays)
    if not ranks:
        return False
    if _refusal(message, ranks):
        return True
    ref = vector.expected.reference
    if ref is None or f"reference {ref.label}:{ref.function} " not in message:
        return False        # (not the reference's failure: the kernel's own)
    # (the reference failed first: would the kernel have refused that rank?)
    output = vector.output
    if output.shape is None:    # (the reference gave it: a guess, only its faults matter)
        first = next((a for a in arrays.values() if isinstance(a, np.ndarray)), None)
        output = OutputSpec(output.dtype, tuple(first.shape) if first is not None else (),
                            output.location)
    again = session.run_vector(op, dataclasses.replace(
        vector, expected=ExpectedSpec(), output=output))
    return not (again.passed or again.checked) and _refusal(again.message, ranks)
