"""The dtype table of the device model.

One row per element type a test vector may name: the manifest name, the ISA
dtype enum value the 48-byte descriptor carries at +2
(customop-marshalling.txt §2, ``enum NEURON_ISA_TPB_DTYPE``; mirrored in
``runtime_model/include/gpsimd_host/abi.h``), the numpy dtype the model uses
for host data (``ml_dtypes`` for bfloat16 and the three fp8 formats), and the
default comparison tolerances.

Default tolerances (used when a vector gives no ``rtol``/``atol``) follow
torch's per-dtype table (``torch.testing.assert_close``), which DESIGN.md
names as the model for comparisons:

* float32 rtol 1.3e-6, atol 1e-5; float16 rtol 1e-3, atol 1e-5;
  bfloat16 rtol 1.6e-2, atol 1e-5; every integer type exact (0, 0).
* fp8 (torch has no entry): ``rtol = eps`` of the format, i.e. one unit in
  the last place relative to the value (twice the rounding error of a single
  correctly rounded result, the same ratio torch uses for float16), and
  ``atol = smallest subnormal`` of the format (one ulp of the subnormal range,
  where a relative bound is meaningless). From ``ml_dtypes.finfo``:
  float8_e3m4 (eps 2**-4) rtol 0.0625, atol 0.015625;
  float8_e4m3 (eps 2**-3) rtol 0.125, atol 0.001953125;
  float8_e5m2 (eps 2**-2) rtol 0.25, atol 1.52587890625e-05.

ISA ``FP32R`` (11) has no manifest name: it is a hardware rounding mode of
fp32, not a storage type a test vector can hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

import ml_dtypes
import numpy as np

__all__ = [
    "DType",
    "DTYPES",
    "by_name",
    "by_isa",
    "by_numpy",
    "names",
    "ISA",
]


class ISA:
    """ISA dtype enum values (customop-marshalling.txt §2, abi.h
    ``enum NEURON_ISA_TPB_DTYPE``). Plain ints, as they appear at descriptor
    byte +2."""

    INVALID = 0
    UINT64 = 1
    INT8 = 2
    UINT8 = 3
    INT16 = 4
    UINT16 = 5
    BFLOAT16 = 6
    FP16 = 7
    INT32 = 8
    UINT32 = 9
    FP32 = 10
    FP32R = 11
    INT64 = 12
    FP8_EXP3 = 13
    FP8_EXP4 = 14
    FP8_EXP5 = 15


@dataclass(frozen=True)
class DType:
    """One element type.

    Attributes:
        name: the manifest name, e.g. ``"bfloat16"``.
        isa: the ISA dtype enum value written at descriptor byte +2
            (customop-marshalling.txt §2).
        numpy: the numpy dtype of host data (``ml_dtypes`` types for
            bfloat16/fp8).
        itemsize: bytes per element.
        is_float: True for the floating types (compared within rtol/atol),
            False for integers (compared exactly).
        rtol, atol: default tolerances (see the module docstring).
    """

    name: str
    isa: int
    numpy: np.dtype
    itemsize: int
    is_float: bool
    rtol: float
    atol: float

    @property
    def is_integer(self) -> bool:
        """True for the integer types (exact comparison)."""
        return not self.is_float

    def __str__(self) -> str:
        return self.name


def _float(name: str, isa: int, npt, rtol: float, atol: float) -> DType:
    dt = np.dtype(npt)
    return DType(name, isa, dt, dt.itemsize, True, rtol, atol)


def _int(name: str, isa: int, npt) -> DType:
    dt = np.dtype(npt)
    return DType(name, isa, dt, dt.itemsize, False, 0.0, 0.0)


def _fp8(name: str, isa: int, npt) -> DType:
    fi = ml_dtypes.finfo(npt)
    return _float(name, isa, npt, float(fi.eps), float(fi.smallest_subnormal))


_TABLE: Tuple[DType, ...] = (
    _float("float32", ISA.FP32, np.float32, 1.3e-6, 1e-5),
    _float("float16", ISA.FP16, np.float16, 1e-3, 1e-5),
    _float("bfloat16", ISA.BFLOAT16, ml_dtypes.bfloat16, 1.6e-2, 1e-5),
    _int("int8", ISA.INT8, np.int8),
    _int("int16", ISA.INT16, np.int16),
    _int("int32", ISA.INT32, np.int32),
    _int("int64", ISA.INT64, np.int64),
    _int("uint8", ISA.UINT8, np.uint8),
    _int("uint16", ISA.UINT16, np.uint16),
    _int("uint32", ISA.UINT32, np.uint32),
    _int("uint64", ISA.UINT64, np.uint64),
    _fp8("float8_e3m4", ISA.FP8_EXP3, ml_dtypes.float8_e3m4),
    _fp8("float8_e4m3", ISA.FP8_EXP4, ml_dtypes.float8_e4m3),
    _fp8("float8_e5m2", ISA.FP8_EXP5, ml_dtypes.float8_e5m2),
)

#: name -> DType, in table order.
DTYPES: Dict[str, DType] = {d.name: d for d in _TABLE}
_BY_ISA: Dict[int, DType] = {d.isa: d for d in _TABLE}
_BY_NUMPY: Dict[np.dtype, DType] = {d.numpy: d for d in _TABLE}


def names() -> Tuple[str, ...]:
    """The manifest dtype names, in table order (14 names)."""
    return tuple(DTYPES)


def by_name(name: str) -> DType:
    """The DType of a manifest name such as ``"float32"``.

    Raises:
        KeyError: unknown name; the message lists the known names.
    """
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise KeyError(
            f"unknown dtype {name!r}; known: {', '.join(DTYPES)}"
        ) from None


def by_isa(value: int) -> DType:
    """The DType of an ISA dtype enum value (customop-marshalling.txt §2).

    Raises:
        KeyError: the value is not one of the 14 storage types (0 INVALID and
            11 FP32R included).
    """
    try:
        return _BY_ISA[int(value)]
    except KeyError:
        raise KeyError(f"ISA dtype {value} has no storage type in the model") from None


def by_numpy(dtype) -> DType:
    """The DType of a numpy dtype (anything ``np.dtype()`` accepts).

    Raises:
        KeyError: a numpy type outside the table (e.g. float64, bool).
    """
    dt = np.dtype(dtype)
    try:
        return _BY_NUMPY[dt]
    except KeyError:
        raise KeyError(f"numpy dtype {dt} has no device dtype") from None
