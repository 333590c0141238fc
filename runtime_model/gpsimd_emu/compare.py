"""Comparing an op's output with the expected array.

Floating types are compared in float64 with numpy's ``assert_allclose`` rule
``|actual - expected| <= atol + rtol * |expected|`` (ARCHITECTURE.md), NaN
equal to NaN and an infinity equal only to the same infinity; integer types
are compared exactly, with the vector's tolerances (``vectors.tolerances``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np

from .dtypes import DType

__all__ = ["Comparison", "compare", "format_value"]

#: How many mismatching elements a message lists.
MAX_LISTED = 5


@dataclass(frozen=True)
class Comparison:
    """The outcome of ``compare``.

    Attributes:
        ok: every element within tolerance.
        mismatches: number of elements out of tolerance.
        total: number of elements compared.
        max_abs_err: largest ``|actual - expected|`` over the elements
            (float64; ``inf`` when an element is NaN on one side only or an
            infinity differs; 0.0 when there are no elements).
        message: "" when ok, else the failure text (count, first few flat
            indices with actual vs expected, max abs error, tolerances).
    """

    ok: bool
    mismatches: int
    total: int
    max_abs_err: float
    message: str


def format_value(v, is_float: bool) -> str:
    """A short text for one element: floats (``is_float``) with 8 significant
    digits (``nan``/``inf`` spelled out), integers exactly."""
    if is_float:
        f = float(v)
        return repr(f) if (math.isnan(f) or math.isinf(f)) else f"{f:.8g}"
    return str(int(v))


def _int_abs_diff(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """|a - e| for integer arrays without overflow, as float64."""
    wide = np.uint64 if a.dtype.kind == "u" else np.int64
    a64, e64 = a.astype(wide), e.astype(wide)
    hi, lo = np.maximum(a64, e64), np.minimum(a64, e64)
    # hi - lo is exact modulo 2**64 and non-negative, so read it unsigned.
    return (hi.view(np.uint64) - lo.view(np.uint64)).astype(np.float64)


def compare(actual: np.ndarray, expected: np.ndarray, dtype: DType,
            rtol: float, atol: float) -> Comparison:
    """Compare two arrays of the same shape holding ``dtype`` values.

    Args:
        actual: the op's output (any shape; elements of ``dtype``).
        expected: the reference, same shape (cast to ``dtype`` by the caller).
        dtype: the output dtype; integers are compared exactly (tolerances
            ignored), floats within ``atol + rtol * |expected|``.
        rtol, atol: the vector's tolerances (``vectors.tolerances``).

    Returns:
        A ``Comparison``; a shape mismatch gives ``ok=False`` with every
        element counted as a mismatch and ``max_abs_err`` inf.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        n = max(actual.size, expected.size)
        return Comparison(False, n, n, math.inf,
                          f"output shape {list(actual.shape)} != expected shape "
                          f"{list(expected.shape)}")
    total = int(actual.size)
    if total == 0:
        return Comparison(True, 0, 0, 0.0, "")
    a_flat = actual.reshape(-1)
    e_flat = expected.reshape(-1)

    if dtype.is_float:
        a = a_flat.astype(np.float64)
        e = e_flat.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            exact = (a == e) | (np.isnan(a) & np.isnan(e))   # (an infinity: the same one)
            err = np.where(exact, 0.0, np.abs(a - e))
            good = exact | (np.isfinite(a) & np.isfinite(e) & (err <= atol + rtol * np.abs(e)))
        err[np.isnan(err)] = np.inf         # (NaN on one side only)
        tol_text = f"rtol={rtol:g}, atol={atol:g}"
    else:
        err = _int_abs_diff(a_flat, e_flat)
        good = a_flat == e_flat
        tol_text = "exact"

    max_abs_err = float(err.max())
    bad = np.flatnonzero(~good)
    n_bad = int(bad.size)
    if n_bad == 0:
        return Comparison(True, 0, total, max_abs_err, "")
    listed = ", ".join(
        f"[{i}] actual {format_value(a_flat[i], dtype.is_float)} "
        f"expected {format_value(e_flat[i], dtype.is_float)}"
        for i in bad[:MAX_LISTED])
    more = f", ... ({n_bad - MAX_LISTED} more)" if n_bad > MAX_LISTED else ""
    counted = "1 element differs" if total == 1 else f"{total} elements differ"
    msg = (f"{n_bad} of {counted} ({tol_text}): {listed}{more}; "
           f"max_abs_err {max_abs_err:.6g}")
    return Comparison(False, n_bad, total, max_abs_err, msg)
