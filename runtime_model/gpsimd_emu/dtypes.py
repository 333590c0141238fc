"""The dtype table of the device model: the shared rows of
``gpsimd_device.dtypes`` (read from ``gpsimd_host/dtypes.h``) with the numpy
dtype the model uses for host data (``ml_dtypes`` for bfloat16 and the three
fp8 formats, which carry the same names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import ml_dtypes
import numpy as np

from gpsimd_device import dtypes as _shared

__all__ = ["DType", "DTYPES", "by_name", "by_numpy"]


@dataclass(frozen=True)
class DType(_shared.DType):
    """A shared dtype row plus ``numpy``, the numpy dtype of host data."""

    numpy: np.dtype = None  # type: ignore[assignment]


def _extend(row: _shared.DType) -> DType:
    dt = np.dtype(getattr(ml_dtypes, row.name, row.name))     # (ml_dtypes' names, else numpy's)
    if dt.itemsize != row.itemsize:
        raise ImportError(f"dtype {row.name}: numpy itemsize {dt.itemsize} != {row.itemsize} "
                          f"of dtypes.h")
    return DType(**{f: getattr(row, f) for f in row.__dataclass_fields__}, numpy=dt)


#: name -> DType, in table order.
DTYPES: Dict[str, DType] = {r.name: _extend(r) for r in _shared.DTYPES.values()}
_BY_NUMPY: Dict[np.dtype, DType] = {d.numpy: d for d in DTYPES.values()}


def by_name(name: str) -> DType:
    """The DType of a name such as ``"float32"`` (``gpsimd_device.dtypes.by_name``:
    KeyError for an unknown name, the message listing the known names)."""
    return DTYPES[_shared.by_name(name).name]


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
