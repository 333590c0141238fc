"""A loaded host shape library (``gpsimd_host/shape_abi.h``): its
registration and calls of its shape functions, through ctypes.

:class:`ShapeLibrary` loads the object (which runs its ``NEURON_LIBRARY``
blocks), checks the sizes of its ABI structs against shape_abi.h's, reads
the registry (:meth:`ShapeLibrary.registration`) and calls a shape function
on meta tensors (:meth:`ShapeLibrary.call`). Loading and calling run native
code that may crash or hang: ``gpsimd_emu.shapes`` does both in a child
process. Stdlib only.
"""

from __future__ import annotations

import ctypes
import os
from typing import Optional, Sequence

from gpsimd_device.dtypes import by_isa, by_name
from gpsimd_device.faults import fault_name
from gpsimd_device.headers import defines
from gpsimd_device.shapes import (PARAM_KINDS, Registration, RegisteredLibrary, RegisteredOp,
                                  spelling_of_pretty)

from .binding import header_struct

__all__ = ["ShapeError", "ShapeLibrary", "ARG_TENSOR", "ARG_INT", "ARG_FLOAT"]

_ABI = defines("shape_abi.h")
ARG_TENSOR, ARG_INT, ARG_FLOAT = (_ABI["SHAPE_ARG_TENSOR"], _ABI["SHAPE_ARG_INT"],
                                  _ABI["SHAPE_ARG_FLOAT"])
_MAX_DIMS = _ABI["SHAPE_MAX_DIMS"]


class ShapeError(Exception):
    """The shape library cannot be loaded or read; the message says why."""


_Arg = header_struct("shape_abi.h", "gpsimd_shape_arg")
_Result = header_struct("shape_abi.h", "gpsimd_shape_result")
_LibraryInfo = header_struct("shape_abi.h", "gpsimd_shape_library_info")
_DefInfo = header_struct("shape_abi.h", "gpsimd_shape_def_info")
_SIZES = (ctypes.sizeof(_Arg), ctypes.sizeof(_Result), ctypes.sizeof(_LibraryInfo),
          ctypes.sizeof(_DefInfo), _ABI["SHAPE_ABI_VERSION"])


def _text(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


class ShapeLibrary:
    """A shape library, loaded (its ``NEURON_LIBRARY`` blocks have run).

    Raises:
        ShapeError: it cannot be loaded, lacks the shape entry points, or
            its structs do not have this module's layout.
    """

    def __init__(self, path: str):
        try:
            self.lib = ctypes.CDLL(os.path.abspath(path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
        except OSError as e:
            raise ShapeError(f"cannot be loaded: {e}") from None
        try:
            sizes = self.lib.gpsimd_shape_abi_sizes
        except AttributeError:
            raise ShapeError("not a shape library (no gpsimd_shape_abi_sizes)") from None
        sizes.restype = ctypes.c_uint32
        sizes.argtypes = [ctypes.c_uint32]
        theirs = tuple(sizes(i) for i in range(len(_SIZES)))
        if theirs != _SIZES:
            raise ShapeError(f"its shape ABI (sizes, version {theirs}) is not this "
                             f"model's {_SIZES}: rebuild it")
        self.path = path
        u32, ptr = ctypes.c_uint32, ctypes.POINTER     # (the signatures of shape_abi.h)
        for fn, restype, argtypes in (
                ("library_count", u32, []), ("library_at", ptr(_LibraryInfo), [u32]),
                ("def_count", u32, []), ("def_at", ptr(_DefInfo), [u32]),
                ("call", ctypes.c_int, [u32, ptr(_Arg), u32, ptr(_Result)])):
            f = getattr(self.lib, "gpsimd_shape_" + fn)
            f.restype, f.argtypes = restype, argtypes

    def registration(self) -> Registration:
        """Every ``NEURON_LIBRARY`` block and ``m.def`` that ran, in order."""
        lib = self.lib
        libraries = []
        for i in range(lib.gpsimd_shape_library_count()):
            x = lib.gpsimd_shape_library_at(i).contents
            libraries.append(RegisteredLibrary(_text(x.name), _text(x.file), int(x.line)))
        ops = []
        for i in range(lib.gpsimd_shape_def_count()):
            d = lib.gpsimd_shape_def_at(i).contents
            params = tuple((PARAM_KINDS.get(int(d.kinds[k]), "OTHER"),
                            spelling_of_pretty(_text(d.spellings[k])))
                           for k in range(int(d.nparams)))
            tensor_return = PARAM_KINDS.get(int(d.return_kind)) == "TENSOR"
            ops.append(RegisteredOp(_text(d.op), _text(d.kernel), _text(d.library),
                                    _text(d.file), int(d.line), _text(d.symbol), params,
                                    spelling_of_pretty(_text(d.return_spelling)), tensor_return,
                                    bool(d.callable)))
        return Registration(tuple(libraries), tuple(ops))

    def call(self, index: int, args: Sequence[tuple]) -> dict:
        """Run the shape function of registration ``index`` on ``args``, one
        per argument: ``("tensor", dtype name, sizes)`` (no data), or
        ``("int", value)`` or ``("float", value)`` for a number. What it
        gave, as ``gpsimd_emu.shapes`` reads it: ``{"dtype": name, "shape":
        [sizes]}``, or ``{"fault": "KIND: message"}``."""
        arr = (_Arg * max(1, len(args)))()
        for k, (kind, *value) in enumerate(args):
            a = arr[k]
            if kind == "tensor":
                dtype, sizes = value
                if len(sizes) > _MAX_DIMS:
                    return {"fault": f"BAD_ARGUMENT: argument {k} has {len(sizes)} dimensions"}
                a.kind, a.dtype, a.ndim = ARG_TENSOR, by_name(dtype).isa, len(sizes)
                a.sizes[:len(sizes)] = [int(size) for size in sizes]
            elif kind == "float":
                a.kind, a.f = ARG_FLOAT, value[0]
            else:
                a.kind, a.i = ARG_INT, int(value[0])
        out = _Result()
        status = self.lib.gpsimd_shape_call(index, arr, len(args), ctypes.byref(out))
        if status != 0 or out.status != 0:
            return {"fault": f"{fault_name(out.fault_kind)}: {_text(out.message)}"}
        try:
            dtype = by_isa(out.dtype).name
        except KeyError as e:
            return {"fault": f"DTYPE: {e.args[0]}"}
        return {"dtype": dtype,
                "shape": [int(out.sizes[d]) for d in range(min(out.ndim, _MAX_DIMS))]}

