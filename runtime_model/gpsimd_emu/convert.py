"""Converting a vector's numbers to a device dtype (``to_dtype``): the one
conversion of ``gpsimd_emu.vectors`` for inputs and expected outputs
alike, by the rule of docs/manifest.md "Values and dtypes": an integer
dtype holds a value exactly or the vector fails with a ``PlanError`` naming
the first bad element; a float dtype rounds to nearest, once, from the
exact value (a 64-bit integer, a Python int or ``Fraction``, a longdouble
is first rounded *to odd* into float64: ``_odd``; ``literal`` values must
stay finite); raw bytes (numpy ``V<n>``) of the dtype's item size are
read as the dtype, bit for bit, but an array of an ml_dtypes type (``int4``,
``float8_e4m3fn``: numpy kind ``V`` too) as the numbers it holds
(``kind``). ``read_list`` reads a (nested) list of numbers as an array,
its integers exact.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import List, Optional, Tuple, Union

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
    a new array, its integers exact: a list numpy reads as float64 (ints
    beside floats, numpy's uint64 beside Python ints, ints past 2**63 beside
    negative ones) is, for an integer ``dtype``, read as int64, then uint64,
    its integral floats as the ints they equal (one with another value, a
    fraction, NaN, ±inf, stays float64, for ``to_dtype`` to report); for a
    float ``dtype``, kept as Python numbers when an int is past float64's
    exact ones (2**53), for ``to_dtype`` to round once. An array is copied.

    Raises:
        ValueError, TypeError: not an array (a ragged list, say).
    """
    approx = np.array(values)
    if isinstance(values, np.ndarray) or approx.dtype.kind not in "iuf":
        return approx
    objects = np.array(values, dtype=object)
    if _bools(objects).any():       # (numpy reads [True, 2] as [1, 2])
        return objects
    if approx.dtype.kind != "f":
        return approx
    if not dtype.is_integer:
        wide = any(isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))
                   and abs(int(v)) > 2 ** 53 for v in objects.flat)
        return objects if wide else approx
    ints = np.asarray(np.frompyfunc(_exact, 1, 1)(objects), dtype=object)  # (0-D: a scalar)
    exact = exact_ints(ints.tolist()) \
        if all(isinstance(v, int) and not isinstance(v, bool) for v in ints.flat) else None
    return approx if exact is None else exact.reshape(approx.shape)


def _bools(a: np.ndarray) -> np.ndarray:
    """Which elements of ``a`` are bools (a bool array's all, an object
    array's Python and numpy bools)."""
    if a.dtype.kind == "O":
        return np.asarray(np.frompyfunc(lambda v: isinstance(v, (bool, np.bool_)), 1, 1)(a),
                          dtype=bool)
    return np.full(a.shape, a.dtype.kind == "b")


def _value(v) -> Union[Fraction, float]:
    """A real number's exact value (NaN and the infinities as floats).

    Raises:
        TypeError: not a real number (bools are not one).
    """
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise TypeError(v)
    if isinstance(v, numbers.Integral):
        return Fraction(int(v))
    if isinstance(v, numbers.Rational):
        return Fraction(v.numerator, v.denominator)
    f = float(v)
    if not math.isfinite(f):
        return f
    try:            # (numpy's float scalars: exact; longdouble's too)
        return Fraction(*v.as_integer_ratio())
    except (AttributeError, TypeError, ValueError, OverflowError):
        return Fraction(f)


def _objects(a: np.ndarray, integer: bool, what: str, origin: str) -> np.ndarray:
    """An object array of Python (or numpy) real numbers as numbers: int64
    or uint64 when they are integers that fit, exactly; else float64, each
    value rounded to odd (``_odd``) so that a later rounding to a device
    float dtype is the single correct one, and for an ``integer`` dtype a
    value that is not an integer as NaN (reported as not one), an integer
    past float64 as its largest finite value (out of every range).

    Raises:
        PlanError: an element that is not a real number.
    """
    exact = []
    for v in a.flat:
        try:
            exact.append(_value(v))
        except TypeError:
            raise PlanError(f"{what}s{origin}: {v!r} is not a number") from None
    if all(isinstance(x, Fraction) and x.denominator == 1 for x in exact):
        ints = exact_ints([int(x) for x in exact])
        if ints is not None:
            return ints.reshape(a.shape)
    hi, lo = [], []
    for x in exact:
        if not isinstance(x, Fraction):
            hi.append(x)
            lo.append(0.0)
            continue
        if integer and x.denominator != 1:
            hi.append(math.nan)
            lo.append(0.0)
            continue
        try:
            f = float(x)        # (the nearest float64: correctly rounded)
        except OverflowError:
            f = float(np.finfo(np.float64).max) * (1 if x > 0 else -1)
        hi.append(f)
        lo.append(float(np.sign(x - Fraction(f))))
    return _odd(np.array(hi, dtype=np.float64), np.array(lo, dtype=np.float64)).reshape(a.shape)


def _numbers(a: np.ndarray, integer: bool, what: str, origin: str) -> np.ndarray:
    """``a`` (no bools, no complex) as an array numpy computes the checks
    with: small floats (float16, the ml_dtypes ones) widened to float64 and
    ml_dtypes' integers (``int4``...) to int64, exactly; an object array by
    ``_objects``; for a float dtype (not ``integer``), 64-bit integers and
    floats wider than float64 (longdouble) as float64 rounded to odd
    (``_odd``).

    Raises:
        PlanError: an object array of something else than real numbers.
    """
    if a.dtype.kind == "O":
        a = _objects(a, integer, what, origin)
    letter = kind(a.dtype)
    if letter == "f" and a.dtype.itemsize < 8:
        return a.astype(np.float64)
    if letter in "iu" and a.dtype.kind == "V":
        return a.astype(np.int64)
    if integer or a.dtype.itemsize < 8 or a.dtype == np.float64:
        return a
    if letter == "f":       # (longdouble: the float64 nearest and what it left out, exact)
        hi = a.astype(np.float64)
        with np.errstate(all="ignore"):
            return _odd(hi, np.where(np.isfinite(hi), (a - hi).astype(np.float64), 0.0))
    # 64-bit integers: two parts exact in float64, summed with the rounding error kept (TwoSum)
    high = (a >> 32 << 32).astype(np.float64)
    low = (a & 0xFFFFFFFF).astype(np.float64)
    s = high + low
    b = s - high
    return _odd(s, (high - (s - b)) + (low - b))


def _odd(near: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """A float64 value rounded *to odd* (toward zero, the last bit set when
    inexact) from ``near``, the nearest float64 of each exact value, and
    ``rest``, of the sign of what that rounding left out (0 when exact):
    rounding it to any narrower dtype is then the exact value's one
    correct rounding (float64 has more than two bits beyond any of
    theirs)."""
    inexact = (rest != 0) & np.isfinite(near)
    past = inexact & (near != 0) & ((rest < 0) != (near < 0))     # (|near| > |exact|)
    r = np.where(past, np.nextafter(near, 0.0), near)
    r = np.where(inexact & (near == 0), np.copysign(0.0, rest), r)
    return (r.view(np.uint64) | inexact.astype(np.uint64)).view(np.float64)


def _rounded(a: np.ndarray, target: np.dtype) -> np.ndarray:
    """``a`` (numbers; float64 values rounded to odd where inexact,
    ``_numbers``) rounded to the nearest value of the float dtype
    ``target``. numpy's casts to float16 and float32 round once; ml_dtypes'
    casts to bfloat16 and the float8 types go through float32, rounding
    twice (1 + 2**-8 + 2**-30 became the bfloat16 1.0, not 1.0078125), so a
    wider value is first rounded to float32 to odd too."""
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
    bools = _bools(a)
    if bools.any():     # (a bool array, or bools among a list's numbers)
        problems.append((bools, f"is a bool, not {name}"))
    else:
        if a.dtype.kind == "c":
            problems.append((a.imag != 0, f"is complex, not {name}"))
            a = a.real
        a = _numbers(a, dtype.is_integer, what, origin)
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
