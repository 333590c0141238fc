"""What a vector is made of (``materials``: its inputs, expected output and
output's place), and the arguments of its second call (``second_call_of``,
``runs.SECOND_CALL``; ARCHITECTURE.md "The checks")."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from gpsimd_device.limits import MAX_DIMS
from gpsimd_device.plan import OpPlan, PlanError, VectorPlan

from . import dtypes as dt
from .vectors import Input, expected_output, location_of, make_inputs, output_shape, tolerances

__all__ = ["materials", "signature", "second_call_of"]


def materials(op: OpPlan, vector: VectorPlan, root: str, timeout: float,
              inputs: Optional[Sequence[Input]] = None) -> tuple:
    """``(inputs, out_dtype, expected, shape, rtol, atol, out_location)``
    of a vector (``expected`` None for a checks-only one; ``inputs``: made
    already, by ``make_inputs``; ``timeout``: the vector's time limit, which
    its reference's import and call may take at most).

    Raises:
        PlanError, MemoryError: it cannot be made.
    """
    inputs = make_inputs(op, vector, root) if inputs is None else inputs
    try:
        out_dtype = dt.by_name(vector.output.dtype)
    except KeyError as e:
        raise PlanError(f"output: {e.args[0]}") from None
    expected = None if vector.expected.checks_only else \
        expected_output(vector, inputs, out_dtype, root, timeout)
    shape = output_shape(vector, expected)
    rtol, atol = tolerances(vector, out_dtype)
    out_location = location_of(vector.output.location, "output")
    if len(shape) > MAX_DIMS:
        raise PlanError(f"output rank {len(shape)} > {MAX_DIMS}")
    return inputs, out_dtype, expected, shape, rtol, atol, out_location


def signature(inputs: Sequence[Input], out_dtype: dt.DType, shape, out_location: str) -> tuple:
    """What two vectors share when one's arguments can take the other's
    places in a device image: every argument's kind, dtype, shape and
    place, and the output's."""
    return _places(inputs), out_dtype.name, tuple(shape), out_location


def _places(inputs: Sequence[Input]) -> tuple:
    """The arguments' part of a ``signature``."""
    return tuple((i.kind, i.dtype.name, i.array.shape, i.location) for i in inputs)


def second_call_of(op: OpPlan, vector: VectorPlan, sig: tuple, last: Optional[tuple],
                   root: str, timeout: float, right: Callable[[str], bool] = lambda name: True,
                   failed: Callable[[str], bool] = lambda name: False) -> Optional[tuple]:
    """The second call's arguments, ``(signature, name, inputs, expected,
    rtol, atol)``: those of the vector before ``vector`` in the plan when
    it has the signature ``sig`` and an expected output, unless
    ``failed(its name)``, whether its first call is known not to have been
    right (the reference of one that hung is not run again); ``last``, the
    session's last vector of the op in that form, is used when it is that
    one (its verdict may not be known yet: ``LibrarySession.run_all``);
    else they are made again when its arguments take the same places, and
    used only if ``right(its name)``, whether its first call was right
    (it passed, or failed on its own second call alone), which may run
    that vector on its own first and is asked only when the whole
    signature matches: a vector whose first call is wrong judges no second
    call; else None (the second call repeats the vector's own)."""
    names = [v.name for v in op.vectors]
    if vector.name not in names or names.index(vector.name) == 0:
        return None
    prev = op.vectors[names.index(vector.name) - 1]
    if failed(prev.name):
        return None
    if last is None or last[1] != prev.name:
        try:
            inputs = make_inputs(op, prev, root)
            if prev.expected.checks_only or _places(inputs) != sig[0]:
                return None
            inputs, out_dtype, expected, shape, rtol, atol, where = materials(
                op, prev, root, timeout, inputs)
        except (PlanError, MemoryError):
            return None
        last = (signature(inputs, out_dtype, shape, where), prev.name, inputs, expected,
                rtol, atol)
        if last[0] != sig or not right(prev.name):
            return None
    return last if last[0] == sig else None
