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
from typing import Type

from gpsimd_device.headers import HeaderError, _text, defines, header_path

__all__ = ["header_struct", "GpsimdRegion", "GpsimdCoreReport", "GpsimdCoreBinding",
           "GpsimdLspInfo"]

#: C field types of the headers -> ctypes (``char*``: a C string; any other
#: ``T*`` a pointer; ``const`` does not matter; another name: a struct).
_SCALARS = {"uint8_t": ctypes.c_uint8, "uint16_t": ctypes.c_uint16,
            "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64, "int32_t": ctypes.c_int32,
            "int64_t": ctypes.c_int64, "double": ctypes.c_double, "char": ctypes.c_char,
            "char*": ctypes.c_char_p}
_FIELD = re.compile(r"^(.*?)\b(\w+)\s*(?:\[\s*(\w+)\s*\])?$")


def _ctype(header: str, spelling: str):
    t = re.sub(r"\bconst\b|\s+", "", spelling)
    if t in _SCALARS:
        return _SCALARS[t]
    if t.endswith("*"):
        return ctypes.POINTER(_ctype(header, t[:-1]))
    return header_struct(header, t)


@functools.lru_cache(maxsize=None)
def header_struct(header: str, name: str) -> Type[ctypes.Structure]:
    """The ``typedef struct { ... } name;`` of the header ``gpsimd_host/<header>``
    as a ``ctypes.Structure`` of the same fields, in order (no nested struct
    or union; a field may be another such struct, an array's length a number
    or a ``GPSIMD_*`` define of the header). One class per struct.

    Raises:
        HeaderError: no such struct, or a field this reader cannot read.
    """
    m = re.search(r"typedef\s+struct\s*\{([^{}]*)\}\s*" + re.escape(name) + r"\s*;",
                  _text(header))
    if m is None:
        raise HeaderError(f"{header_path(header)}: no typedef struct {name}")
    fields = []
    for decl in filter(None, (d.strip() for d in m.group(1).split(";"))):
        f = _FIELD.match(decl)
        if f is None:
            raise HeaderError(f"{header_path(header)}: {name}: cannot read {decl!r}")
        ctype, length = _ctype(header, f.group(1)), f.group(3)
        if length:
            ctype = ctype * (int(length) if length.isdigit()
                             else defines(header)[length[len("GPSIMD_"):]])
        fields.append((f.group(2), ctype))
    return type(name, (ctypes.Structure,), {"_fields_": fields})


GpsimdRegion = header_struct("abi.h", "gpsimd_region")
GpsimdCoreReport = header_struct("abi.h", "gpsimd_core_report")
GpsimdCoreBinding = header_struct("abi.h", "gpsimd_core_binding")
GpsimdLspInfo = header_struct("abi.h", "gpsimd_lsp_info")
