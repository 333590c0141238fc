"""Converting a vector's numbers to a device dtype (``to_dtype``): the one
conversion of ``gpsimd_emu.vectors`` for inputs and expected outputs
alike, by the rule of docs/manifest.md "Values and dtypes": an integer
dtype holds a value exactly or the vector fails with a ``PlanError`` naming
the first bad element; a float dtype rounds to nearest (``literal`` values
must stay finite); raw bytes (numpy ``V<n>``) of the dtype's item size are
read as the dtype, bit for bit, but an array of an ml_dtypes type (``int4``,
``float8_e4m3fn``: numpy kind ``V`` too) as the numbers it holds
(``kind``). ``read_list`` reads a (nested) list of numbers as an array,
exactly for an integer dtype.
"""

from __future__ import annotations

import numbers
from typing import List, Optional, Tuple

import ml_dtypes
import numpy as np

from gpsimd_device.plan import PlanError

from . import dtypes as dt

__all__ = ["to_dtype", "kind", "read_list"]


def kind(dtype) -> str:
    """numpy's kind letter of ``dtype`` (``"b"``, ``"i"``, ``"u"``, ``"f"``,
    ``"c"``, ``"O"``...), an ml_dtypes type's as the numbers it holds:
    ``"i"``/``"u"`` for ``int4``, ``uint2``..., ``"f"`` for ``bfloat16``,
    ``float8_e4m3fn``... (numpy says ``"V"`` for them all); ``"V"`` then
    means raw bytes (``V<n>``, a structured dtype) or a type of no numbers."""
    dtype = np.dtype(dtype)
    if dtype.kind != "V" or issubclass(dtype.type, np.void):
        return dtype.kind
    for info, letter in ((ml_dtypes.iinfo, "i"), (ml_dtypes.finfo, "f")):
        try:
            limits = info(dtype)
        except (ValueError, TypeError):
            continue
        return "u" if letter == "i" and limits.min == 0 else letter
    return "V"


def _as_float(v) -> float:
    try:
        return float(v)
    except OverflowError:       # (an int past float64's range: finite, out of every range)
        return float(np.finfo(np.float64).max) * (1 if v > 0 else -1)


def exact_ints(values: list) -> Optional[np.ndarray]:
    """A (nested) list of Python ints as int64, else uint64, exactly; None
    when neither holds them all."""
    for kind in (np.int64, np.uint64):
        try:
            return np.array(values, dtype=kind)
        except OverflowError:       # (Python ints: numpy refuses, never wraps)
            continue
    return None


def _exact(v):
    """A Python int for an integral real number (numpy's scalars included,
    bools not), else ``v``."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    f = float(v)
    return int(f) if f.is_integer() and f == v else v


def read_list(values, dtype: dt.DType) -> np.ndarray:
    """A (nested) list of numbers (a plan's values, a reference's result) as
    a new array; for an integer ``dtype`` exactly: a list numpy reads as
    float64 (ints beside floats, numpy's uint64 beside Python ints, ints past
    2**63 beside negative ones) is read as int64, then uint64, its integral
    floats as the ints they equal; one with another value (a fraction, NaN,
    ±inf) stays float64, for ``to_dtype`` to report. An array is copied.

    Raises:
        ValueError, TypeError: not an array (a ragged list, say).
    """
    approx = np.array(values)
    if not dtype.is_integer or approx.dtype.kind != "f" or isinstance(values, np.ndarray):
        return approx
    ints = np.asarray(np.frompyfunc(_exact, 1, 1)(np.array(values, dtype=object)),
                      dtype=object)       # (0-D: frompyfunc gives a scalar)
    exact = exact_ints(ints.tolist()) \
        if all(isinstance(v, int) and not isinstance(v, bool) for v in ints.flat) else None
    return approx if exact is None else exact.reshape(approx.shape)


def _numbers(a: np.ndarray, what: str, origin: str) -> np.ndarray:
    """``a`` (no bools, no complex) as an array numpy computes the checks
    with: small floats (float16, the ml_dtypes ones) widened to float64 and
    ml_dtypes' integers (``int4``...) to int64, exactly; an object array of
    Python numbers as int64 or uint64 when they are ints that fit (exactly),
    else as float64 (ints past 64 bits then past every device dtype's range,
    as they were).

    Raises:
        PlanError: an object array of something else than real numbers.
    """
    if a.dtype.kind == "O":
        for v in a.flat:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
                raise PlanError(f"{what}s{origin}: {v!r} is not a number")
        ints = exact_ints([int(v) for v in a.flat]) \
            if all(isinstance(v, numbers.Integral) for v in a.flat) else None
        if ints is not None:
            return ints.reshape(a.shape)
        return np.array([_as_float(v) for v in a.flat], dtype=np.float64).reshape(a.shape)
    letter = kind(a.dtype)
    if letter == "f" and a.dtype.itemsize < 8:
        return a.astype(np.float64)
    if letter in "iu" and a.dtype.kind == "V":
        return a.astype(np.int64)
    return a


def _rounded(a: np.ndarray, target: np.dtype) -> np.ndarray:
    """``a`` (numbers) rounded to the nearest value of the float dtype
    ``target``. numpy's casts to float16 and float32 round once; ml_dtypes'
    casts to bfloat16 and the float8 types go through float32, rounding
    twice (1 + 2**-8 + 2**-30 became the bfloat16 1.0, not 1.0078125), so a
    wider value is first rounded to float32 *to odd* (toward zero, the last
    bit set when that was inexact), which the second rounding leaves right:
    float32 has more than two bits beyond any of theirs. (float32 values and
    16-bit integers are exact in float32: one rounding.)"""
    if target.itemsize >= 4 or target == np.float16 or a.dtype == np.float32 \
            or a.dtype.itemsize <= 2:
        return a.astype(target)
    x = a.astype(np.float64)
    r = x.astype(np.float32)
    r = np.where(np.abs(r.astype(np.float64)) > np.abs(x), np.nextafter(r, np.float32(0)), r)
    inexact = np.isfinite(x) & (r.astype(np.float64) != x)
    return (r.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32).astype(target)


def _integer_problems(a: np.ndarray, dtype: dt.DType, name: str, limits: str
                      ) -> List[Tuple[np.ndarray, str]]:
    """(mask, what is wrong) for each way an element of ``a`` (integers or
    floats) misses integer ``dtype``."""
    info = np.iinfo(dtype.numpy)
    if a.dtype.kind in "iu":        # (a bound past the source's own range is no test)
        src = np.iinfo(a.dtype)
        out = np.zeros(a.shape, dtype=bool)
        if info.min > src.min:
            out |= a < a.dtype.type(info.min)
        if info.max < src.max:
            out |= a > a.dtype.type(info.max)
        return [(out, f"is out of range for {limits}")]
    with np.errstate(invalid="ignore"):     # (both bounds powers of two: exact as floats)
        whole = np.isfinite(a) & (np.trunc(a) == a)
        inside = (a >= float(info.min)) & (a < float(info.max + 1))
    return [(~whole, f"is not {name}"), (whole & ~inside, f"is out of range for {limits}")]


def _raise_first(problems: List[Tuple[np.ndarray, str]], shown: np.ndarray, what: str,
                 origin: str) -> None:
    """Raise the PlanError of the first bad element, if any."""
    flat = np.reshape(np.logical_or.reduce([mask for mask, _ in problems], axis=0), -1)
    if not flat.any():
        return
    i = int(np.argmax(flat))
    problem = next(text for mask, text in problems if mask.reshape(-1)[i])
    at = f" at {[int(k) for k in np.unravel_index(i, shown.shape)]}" if shown.ndim else ""
    count = int(flat.sum())
    more = f" (and {count - 1} more)" if count > 1 else ""
    raise PlanError(f"{what} {shown.reshape(-1)[i]}{at} {problem}{origin}{more}")


def to_dtype(values, dtype: dt.DType, what: str, source: Optional[str] = None, *,
             role: str = "its dtype", literal: bool = False) -> np.ndarray:
    """``values`` as an array of ``dtype`` (module text: exact for integers,
    rounded to nearest for floats).

    Args:
        values: an array (any shape) of bools, integers, floats (numpy's or
            ml_dtypes'), complex numbers, Python numbers (object), or raw
            bytes of ``dtype``'s item size.
        dtype: the device dtype to convert to.
        what: what one element is, for messages: ``"expected value"``,
            ``"input 'x' value"``.
        source: where the values come from, for messages (``"the reference
            ref.py:f"``, ``"its .npy x.npy"``), or None.
        role: what ``dtype`` is to them, for messages: ``"its dtype"``,
            ``"the output's dtype"``.
        literal: values written by hand: for a float dtype, a finite value
            that would become infinite is an error too.

    Returns:
        An array of ``dtype.numpy`` and ``values``' shape (``values`` itself
        when it already is one).

    Raises:
        PlanError: a value the dtype cannot hold (module text), e.g.
            ``expected value 0.9 at [0] is not an int32 (the output's
            dtype), from the vector's expected values (and 2 more)``; raw
            bytes of another size; values that are not numbers.
    """
    a = np.asarray(values)
    target = dtype.numpy
    if a.dtype == target:
        return a
    origin = f", from {source}" if source else ""
    if kind(a.dtype) == "V":        # raw bytes
        if issubclass(a.dtype.type, np.void) and a.dtype.itemsize == target.itemsize \
                and a.dtype.names is None and a.dtype.subdtype is None:
            return a.view(target)
        raise PlanError(f"{what}s{origin}: cannot convert {a.dtype} to {dtype.name} (save "
                        "the array as float32 or an integer dtype)")
    if kind(a.dtype) not in "biufcO":
        raise PlanError(f"{what}s{origin}: not numbers (numpy dtype {a.dtype})")
    article = "an" if dtype.name.startswith("int") else "a"     # (int8, uint8, float16)
    name = f"{article} {dtype.name} ({role})"
    span = f"{dtype.min}..{dtype.max}" if dtype.is_integer else \
        f"largest finite {dtype.max:g}; write .inf for an infinity"
    limits = f"{dtype.name} ({role}, {span})"
    shown, out = a, None
    problems: List[Tuple[np.ndarray, str]] = []
    if a.dtype.kind == "b":
        problems.append((np.ones(a.shape, dtype=bool), f"is a bool, not {name}"))
    else:
        if a.dtype.kind == "c":
            problems.append((a.imag != 0, f"is complex, not {name}"))
            a = a.real
        a = _numbers(a, what, origin)
        if dtype.is_integer:
            problems += _integer_problems(a, dtype, name, limits)
        else:
            with np.errstate(all="ignore"):
                out = _rounded(a, target)
            if literal:
                problems.append((np.isfinite(a) & ~np.isfinite(out),
                                 f"is out of range for {limits}"))
    _raise_first(problems, shown, what, origin)
    if out is None:     # (checked: every value is exact in the integer dtype)
        out = a.astype(target)
    return out
