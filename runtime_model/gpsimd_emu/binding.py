"""ctypes structures read from the host headers (``header_struct``), so
that each layout is written once, in C (ARCHITECTURE.md "Host C++ runtime
<-> model"); what each field holds, and its unit, is said beside it there.

Every Python reader of a structure of ``abi.h``, ``zygote.h`` or
``shape_abi.h`` goes through it (the four of ``abi.h`` the model fills and
reads, a binding and a report, are below); tests/c_layout.py compares every
size and offset with the C compiler's ``sizeof``/``offsetof``.
"""

from __future__ import annotations

import ctypes
import functools
import math
import re

from gpsimd_device.headers import HeaderError, defines, header_path, header_text

__all__ = ["header_struct", "GpsimdRegion", "GpsimdCoreReport", "GpsimdCoreBinding",
           "GpsimdLspInfo"]

#: C field types of the headers -> ctypes (``char*``: a C string; any other
#: ``T*`` a pointer; ``const`` does not matter; another name: a structure).
_SCALARS = {"uint8_t": ctypes.c_uint8, "uint16_t": ctypes.c_uint16,
            "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64, "int32_t": ctypes.c_int32,
            "int64_t": ctypes.c_int64, "double": ctypes.c_double, "char": ctypes.c_char,
            "char*": ctypes.c_char_p}
#: One declaration: its type (a name, or a nested ``struct { ... }``), then
#: its declarators, separated by commas: each a name and an array length (a
#: product of numbers and ``GPSIMD_*`` defines of the header).
_DECLARATOR = r"([A-Za-z_]\w*)\s*(?:\[([^];]*)\])?"
_DECL = re.compile(r"\s*(struct\s*\{[^{}]*\}|[^;{}]*?)\s*\b(" + _DECLARATOR
                   + r"(?:\s*,\s*" + _DECLARATOR + r")*)\s*;")
#: The body of a ``struct``/``union``: fields, at most one level of braces.
_BODY = r"\{((?:[^{}]|\{[^{}]*\})*)\}"


def _ctype(header: str, spelling: str):
    t = re.sub(r"\bconst\b|\s+", "", spelling)
    if t in _SCALARS:
        return _SCALARS[t]
    if t.endswith("*"):
        return ctypes.POINTER(_ctype(header, t[:-1]))
    return header_struct(header, t)


def _length(header: str, expr: str) -> int:
    terms = [t.strip() for t in expr.split("*")]
    return math.prod(int(t) if t.isdigit() else defines(header)[t[len("GPSIMD_"):]] for t in terms)


def _layout(header: str, name: str, kind: str, body: str) -> type:
    fields = []
    for spelling, declarators, *_ in _DECL.findall(body):
        ctype = (_layout(header, f"{name}.{declarators}", "struct",
                         spelling[spelling.index("{") + 1:-1])
                 if "{" in spelling else _ctype(header, spelling))
        for field, length in re.findall(_DECLARATOR, declarators):
            fields.append((field, ctype * _length(header, length) if length else ctype))
    rest = _DECL.sub("", body).strip()
    if rest:
        raise HeaderError(f"{header_path(header)}: {name}: cannot read {rest!r}")
    base = ctypes.Union if kind == "union" else ctypes.Structure
    return type(name, (base,), {"_fields_": fields})


def _definition(header: str, name: str):
    """``(header, kind, body)`` of the structure ``name`` in ``header`` or
    in a header it includes (first found), or None."""
    text = header_text(header)
    m = re.search(rf"typedef\s+(struct|union)\s*\w*\s*{_BODY}\s*{re.escape(name)}\s*;", text)
    if m is not None:
        return header, m.group(1), m.group(2)
    found = (_definition(h, name) for h in re.findall(r'#include\s+"gpsimd_host/([\w.]+)"', text))
    return next(filter(None, found), None)


@functools.lru_cache(maxsize=None)
def header_struct(header: str, name: str) -> type:
    """The ``typedef struct [tag] { ... } name;`` (or ``union``) of the
    header ``gpsimd_host/<header>``, or of a header it includes, as a
    ``ctypes.Structure`` (``ctypes.Union``) of the same fields, in order:
    a field's type may be another such typedef, or a ``struct { ... }`` of
    its own; several fields may share a declaration (``int64_t a, b;``);
    an array's length is a number, a ``GPSIMD_*`` define of the header or
    a product of them. One class per typedef.

    Raises:
        HeaderError: no such structure, or a field this reader cannot read.
    """
    found = _definition(header, name)
    if found is None:
        raise HeaderError(f"{header_path(header)}: no struct or union {name}")
    where, kind, body = found
    if where != header:         # (one class: the one of the header that defines it)
        return header_struct(where, name)
    return _layout(header, name, kind, body)


GpsimdRegion = header_struct("abi.h", "gpsimd_region")
GpsimdCoreReport = header_struct("abi.h", "gpsimd_core_report")
GpsimdCoreBinding = header_struct("abi.h", "gpsimd_core_binding")
GpsimdLspInfo = header_struct("abi.h", "gpsimd_lsp_info")
