"""Reading what a manifest points at, without running it: the header of a
``.npy`` file (stdlib only: the build side never imports numpy), the
names a reference ``.py`` file binds at top level and the imports of a
Python file (read with ``ast``, once).
Each reads within bounds (:data:`MAX_NPY_HEADER_BYTES`,
:data:`MAX_REFERENCE_BYTES`), and every exception the parsing can meet
becomes a message. The files are opened by
:class:`~gpsimd_build.manifest.reads.Recorder`, which hands these functions
their bytes.
"""

import ast
import hashlib
import struct
from typing import BinaryIO, FrozenSet, Optional, Tuple, Union

from gpsimd_device import dtypes as _dtypes

from ..diagnostics import shown
from .imports import Import, imports_of

_NPY_DTYPES = {
    "<f4": "float32", "<f2": "float16",
    "|i1": "int8", "<i2": "int16", "<i4": "int32", "<i8": "int64",
    "|u1": "uint8", "<u2": "uint16", "<u4": "uint32", "<u8": "uint64",
}

#: Bytes per element of each dtype.
_ITEMSIZE = {d.name: d.itemsize for d in _dtypes.DTYPES.values()}

#: Largest reference ``.py`` file read (bytes): ``ast`` needs about 300
#: times a file's size in memory for some texts.
MAX_REFERENCE_BYTES = 256 * 1024
#: Largest ``.npy`` header read (bytes; numpy itself reads at most 10,000).
MAX_NPY_HEADER_BYTES = 64 * 1024


def top_level_names(source: bytes) -> Union[FrozenSet[str], None, str]:
    """The names a reference file's text binds at top level (def, class,
    assignment, import), read with ``ast`` without running it; None when
    the file can bind names the reading cannot see (``from x import *``,
    ``globals()``); a message string when it cannot be parsed. Cached by
    content."""
    return _parsed(source)[0]


def imports(source: bytes) -> Optional[Tuple[Import, ...]]:
    """Every import of a Python file's text (:func:`~.imports.imports_of`),
    or None when it cannot be parsed. Cached by content, with
    :func:`top_level_names` (one parse)."""
    return _parsed(source)[1]


_PARSED: dict = {}


def _parsed(source: bytes):
    digest = hashlib.sha256(source).digest()
    if digest not in _PARSED:
        if len(_PARSED) >= 256:
            _PARSED.clear()
        _PARSED[digest] = _parse(source)
    return _PARSED[digest]


def _parse(source: bytes):
    """``(top_level_names' answer, imports' answer)`` of ``source``."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        where = f"line {err.lineno}: " if err.lineno else ""
        return f"does not parse: {where}{shown(err.msg, 200)}", None
    except (ValueError, OverflowError) as err:   # NUL bytes, undecodable text
        return f"cannot be read ({type(err).__name__})", None
    except (MemoryError, RecursionError):
        return "does not parse: nested too deeply for Python's parser", None
    try:
        found = imports_of(tree)
    except RecursionError:              # (ast.walk is iterative; kept for safety)
        found = None
    return _names_of(tree), found


def _names_of(tree):
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
        else:
            # conditional definitions (if/try at top level) or globals(): don't guess
            for n in ast.walk(node):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                  ast.Assign, ast.Import, ast.ImportFrom)) or \
                        (isinstance(n, ast.Name) and n.id == "globals"):
                    return None
    return frozenset(names)


def read_npy_header(stream: BinaryIO) -> Tuple[str, Tuple[int, ...], bytes]:
    """(descr, shape, the header's bytes) of the .npy file open as
    ``stream``; raises ValueError (why) or OSError. Reads at most
    :data:`MAX_NPY_HEADER_BYTES` of header whatever the file claims."""
    head = stream.read(12)
    if len(head) < 10 or head[:6] != b"\x93NUMPY":
        raise ValueError("no .npy magic")
    major = head[6]
    if major == 1:
        (size,) = struct.unpack("<H", head[8:10])
        start = 10
    elif major in (2, 3):
        if len(head) < 12:
            raise ValueError("truncated header")
        (size,) = struct.unpack("<I", head[8:12])
        start = 12
    else:
        raise ValueError(f"unknown .npy format version {major}")
    if size > MAX_NPY_HEADER_BYTES:
        raise ValueError(f"its header claims {size} bytes; at most {MAX_NPY_HEADER_BYTES} "
                         "are read (MAX_NPY_HEADER_BYTES)")
    stream.seek(start)
    raw = stream.read(size)
    if len(raw) != size:
        raise ValueError("truncated header")
    try:
        header = ast.literal_eval(raw.decode("utf-8" if major == 3 else "latin1"))
    except (ValueError, SyntaxError, TypeError, UnicodeDecodeError, MemoryError,
            RecursionError, OverflowError):
        raise ValueError("unreadable header") from None
    if not isinstance(header, dict) or not isinstance(header.get("shape"), tuple) \
            or not all(isinstance(d, int) and d >= 0 for d in header["shape"]):
        raise ValueError("unreadable header")
    descr = header.get("descr")
    return (descr if isinstance(descr, str) else repr(descr)), header["shape"], head[:start] + raw

