"""The dtype table, read from ``gpsimd_host/dtypes.h`` (the X-macro
``GPSIMD_DTYPES``) and the ISA dtype enum of ``gpsimd_host/abi.h``
(``GPSIMD_ISA_DTYPES``, the device ABI (gpsimd_host/abi.h)).

One :class:`DType` per element type a tensor may hold; see the header for
what each column means and where its values come from (torch's
``assert_close`` tolerances; fp8 tolerances from the format's epsilon and
smallest subnormal). Stdlib only: the device model adds numpy types
(``gpsimd_emu.dtypes``), the build side uses these rows as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from .headers import HeaderError, header_path, xmacro_rows

__all__ = ["DType", "DTYPES", "ISA", "ISA_NAMES", "by_name", "by_isa", "names",
           "INTEGER_RANGES", "FLOAT_MAX", "TOLERANCES"]


@dataclass(frozen=True)
class DType:
    """One element type (a row of ``GPSIMD_DTYPES``).

    Attributes:
        name: manifest / numpy / ml_dtypes name, e.g. ``"bfloat16"``.
        isa: ISA dtype enum value, descriptor byte +2 (the device ABI (gpsimd_host/abi.h)).
        isa_name: its enum name, e.g. ``"BFLOAT16"``.
        scalar_type: the ``c10::ScalarType`` member, e.g. ``"BFloat16"``.
        ctype: the C++ element type, e.g. ``"c10::BFloat16"`` (how an
            accessor's type is spelled in the model's fault messages).
        itemsize: bytes per element.
        kind: ``"float"``, ``"int"`` (signed) or ``"uint"``.
        min, max: the value range: integers exactly; floats the largest
            finite magnitude (``-max .. max``).
        rtol, atol: default comparison tolerances.
    """

    name: str
    isa: int
    isa_name: str
    scalar_type: str
    ctype: str
    itemsize: int
    kind: str
    min: float
    max: float
    rtol: float
    atol: float

    @property
    def is_float(self) -> bool:
        """True for the floating types (compared within rtol/atol)."""
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        """True for the integer types (compared exactly)."""
        return self.kind != "float"

    def __str__(self) -> str:
        return self.name


#: ISA dtype enum: name -> value (all 16, INVALID and FP32R included).
ISA: Dict[str, int] = {name: int(value) for name, value in xmacro_rows("abi.h", "GPSIMD_ISA_DTYPES")}
#: ISA dtype enum: value -> name.
ISA_NAMES: Dict[int, str] = {v: k for k, v in ISA.items()}


def _row(cells: Tuple[str, ...]) -> DType:
    try:
        name, isa, st, _c10, ctype, size, kind, fmax, rtol, atol = cells
        itemsize = int(size)
        kind = {"FLOAT": "float", "INT": "int", "UINT": "uint"}[kind]
        if kind == "float":
            low, high = -float(fmax), float(fmax)
        elif kind == "int":
            low, high = -2 ** (8 * itemsize - 1), 2 ** (8 * itemsize - 1) - 1
        else:
            low, high = 0, 2 ** (8 * itemsize) - 1
        return DType(name, ISA[isa], isa, st, ctype, itemsize, kind, low, high, float(rtol),
                     float(atol))
    except (ValueError, KeyError) as e:
        raise HeaderError(f"{header_path('dtypes.h')}: bad GPSIMD_DTYPES row {cells}: {e}") from None


_TABLE: Tuple[DType, ...] = tuple(_row(r) for r in xmacro_rows("dtypes.h", "GPSIMD_DTYPES"))

#: name -> DType, in table order.
DTYPES: Dict[str, DType] = {d.name: d for d in _TABLE}
_BY_ISA: Dict[int, DType] = {d.isa: d for d in _TABLE}
#: Integer dtypes: name -> (min, max), inclusive.
INTEGER_RANGES: Dict[str, Tuple[int, int]] = {d.name: (int(d.min), int(d.max))
                                              for d in _TABLE if d.is_integer}
#: Floating dtypes: name -> largest finite value.
FLOAT_MAX: Dict[str, float] = {d.name: d.max for d in _TABLE if d.is_float}
#: name -> (rtol, atol), the default tolerances.
TOLERANCES: Dict[str, Tuple[float, float]] = {d.name: (d.rtol, d.atol) for d in _TABLE}


def names() -> Tuple[str, ...]:
    """The dtype names, in table order."""
    return tuple(DTYPES)


def by_name(name: str) -> DType:
    """The DType of a name such as ``"float32"``.

    Raises:
        KeyError: unknown name; the message lists the known names.
    """
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise KeyError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None


def by_isa(value: int) -> DType:
    """The DType of an ISA dtype enum value.

    Raises:
        KeyError: not one of the storage types (0 INVALID and 11 FP32R included).
    """
    try:
        return _BY_ISA[int(value)]
    except KeyError:
        raise KeyError(f"ISA dtype {value} has no storage type in the model") from None
