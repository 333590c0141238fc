"""ctypes structures read from the host headers (``header_struct``), so
that each layout is written once, in C (ARCHITECTURE.md "Host C++ runtime
<-> model"); what each field holds, and its unit, is said beside it there.

The four of ``abi.h`` (the model fills a binding and reads a report):
``GpsimdRegion`` (``gpsimd_region``), ``GpsimdCoreReport``
(``gpsimd_core_report``), ``GpsimdCoreBinding`` (``gpsimd_core_binding``)
and ``GpsimdLspInfo`` (``gpsimd_lsp_info``); every size and offset is
compared with the C compiler's ``sizeof``/``offsetof`` by
tests/unit/test_emu_abi.py, which compiles abi.h. ``gpsimd_emu.shapelib``
reads ``shape_abi.h``'s.
"""

from __future__ import annotations

import ctypes
import functools
import re

from gpsimd_device.headers import HeaderError, defines, header_path, header_text

__all__ = ["header_struct", "GpsimdRegion", "GpsimdCoreReport", "GpsimdCoreBinding",
           "GpsimdLspInfo"]

#: C field types of the headers -> ctypes (``char*``: a C string; any other
#: ``T*`` a pointer; ``const`` does not matter; another name: a struct).
_SCALARS = {"uint8_t": ctypes.c_uint8, "uint16_t": ctypes.c_uint16,
            "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64, "int32_t": ctypes.c_int32,
            "int64_t": ctypes.c_int64, "double": ctypes.c_double, "char": ctypes.c_char,
            "char*": ctypes.c_char_p}
#: One field: its type (a name, or a nested ``struct { ... }``), name and
#: array length.
_FIELD = re.compile(r"\s*(struct\s*\{[^{}]*\}|[^;{}]*?)\s*\b(\w+)\s*(?:\[\s*(\w+)\s*\])?\s*;")


def _ctype(header: str, spelling: str):
    t = re.sub(r"\bconst\b|\s+", "", spelling)
    if t in _SCALARS:
        return _SCALARS[t]
    if t.endswith("*"):
        return ctypes.POINTER(_ctype(header, t[:-1]))
    return header_struct(header, t)


def _layout(header: str, name: str, kind: str, body: str) -> type:
    fields = []
    for spelling, field, length in _FIELD.findall(body):
        ctype = (_layout(header, f"{name}.{field}", "struct", spelling[spelling.index("{") + 1:-1])
                 if spelling.startswith("struct") else _ctype(header, spelling))
        if length:
            ctype = ctype * (int(length) if length.isdigit()
                             else defines(header)[length[len("GPSIMD_"):]])
        fields.append((field, ctype))
    rest = _FIELD.sub("", body).strip()
    if rest:
        raise HeaderError(f"{header_path(header)}: {name}: cannot read {rest!r}")
    base = ctypes.Union if kind == "union" else ctypes.Structure
    return type(name, (base,), {"_fields_": fields})


@functools.lru_cache(maxsize=None)
def header_struct(header: str, name: str) -> type:
    """The ``typedef struct { ... } name;`` (or ``union``) of the header
    ``gpsimd_host/<header>`` as a ``ctypes.Structure`` (``ctypes.Union``)
    of the same fields, in order: a field's type may be another such
    typedef, or a ``struct { ... }`` of its own; an array's length a number
    or a ``GPSIMD_*`` define of the header. One class per typedef.

    Raises:
        HeaderError: no such typedef, or a field this reader cannot read.
    """
    m = re.search(r"typedef\s+(struct|union)\s*\{((?:[^{}]|\{[^{}]*\})*)\}\s*"
                  + re.escape(name) + r"\s*;", header_text(header))
    if m is None:
        raise HeaderError(f"{header_path(header)}: no typedef struct or union {name}")
    return _layout(header, name, m.group(1), m.group(2))


GpsimdRegion = header_struct("abi.h", "gpsimd_region")
GpsimdCoreReport = header_struct("abi.h", "gpsimd_core_report")
GpsimdCoreBinding = header_struct("abi.h", "gpsimd_core_binding")
GpsimdLspInfo = header_struct("abi.h", "gpsimd_lsp_info")
