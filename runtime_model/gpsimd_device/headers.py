"""The host headers as a source of facts for Python.

The device facts are written once, in C headers under
``runtime_model/include/gpsimd_host/`` (so that the C++ runtime and the
kernels compile against them); Python reads the same text:

* ``defines(name)``: every ``#define GPSIMD_<NAME> <value>`` of a header, the
  value an ``int`` (decimal or hex, ``u``/``ull`` suffixes allowed) or a
  ``str`` (a string literal);
* ``xmacro_rows(name, macro)``: the argument lists of the ``X(...)`` rows of
  an X-macro ``#define <macro>(X) ...``, each a tuple of stripped strings;
* ``enum_values(name, enum, prefix)``: the members of ``enum <enum> { ... }``
  and their values.

Raises ``HeaderError`` (an ``ImportError``, so a broken installation fails at
import with the header's path) when a header cannot be read or lacks what is
asked for.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Dict, List, Tuple, Union

__all__ = ["INCLUDE_DIR", "HeaderError", "header_path", "header_text", "defines", "xmacro_rows",
           "enum_values"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def _include_dir() -> str:
    # Installed as a package, the headers are package data beside this file;
    # in a checkout they are runtime_model/include, next to the package.
    for candidate in (os.path.join(_HERE, "include"), os.path.join(os.path.dirname(_HERE), "include")):
        if os.path.isdir(os.path.join(candidate, "gpsimd_host")):
            return candidate
    return os.path.join(os.path.dirname(_HERE), "include")


#: The folder of the host device headers (``-I`` of every host compile).
INCLUDE_DIR = _include_dir()


class HeaderError(ImportError):
    """A fact header cannot be read or lacks an expected entry."""


def header_path(name: str) -> str:
    """Path of ``gpsimd_host/<name>`` under :data:`INCLUDE_DIR`."""
    return os.path.join(INCLUDE_DIR, "gpsimd_host", name)


@functools.lru_cache(maxsize=None)
def header_text(name: str) -> str:
    """The text of ``gpsimd_host/<name>``, comments out and line
    continuations joined (cached). Raises HeaderError when it cannot be read."""
    path = header_path(name)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise HeaderError(f"{path}: cannot read the device facts header: {e.strerror or e}") from None
    # comments out, line continuations joined
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return text.replace("\\\n", " ")


_DEFINE = re.compile(r'^[ \t]*#define[ \t]+GPSIMD_(\w+)[ \t]+'
                     r'(0[xX][0-9A-Fa-f]+|-?\d+|"[^"\n]*")(?:[uU](?:[lL]{1,2})?)?[ \t]*$', re.M)


@functools.lru_cache(maxsize=None)
def defines(name: str) -> Dict[str, Union[int, str]]:
    """``{NAME: value}`` of every ``#define GPSIMD_NAME value`` in the header
    ``gpsimd_host/<name>`` whose value is a number or a string literal."""
    out: Dict[str, Union[int, str]] = {}
    for key, value in _DEFINE.findall(header_text(name)):
        out[key] = value[1:-1] if value.startswith('"') else int(value, 0)
    return out


def xmacro_rows(name: str, macro: str) -> List[Tuple[str, ...]]:
    """The ``X(a, b, ...)`` rows of ``#define <macro>(X) ...`` in the header
    ``gpsimd_host/<name>``, in order, each a tuple of stripped arguments.

    Raises:
        HeaderError: the macro is not defined there or has no row.
    """
    text = header_text(name)
    m = re.search(r"#define[ \t]+" + re.escape(macro) + r"\(X\)([^\n]*)", text)
    if not m:
        raise HeaderError(f"{header_path(name)}: no X-macro {macro}(X)")
    rows = [tuple(a.strip() for a in row.split(",")) for row in re.findall(r"\bX\(([^()]*)\)", m.group(1))]
    if not rows:
        raise HeaderError(f"{header_path(name)}: {macro}(X) has no rows")
    return rows


@functools.lru_cache(maxsize=None)
def enum_values(name: str, enum: str, prefix: str = "") -> Dict[str, int]:
    """``{member: value}`` of ``enum <enum> { ... };`` in the header
    ``gpsimd_host/<name>``, in order, each member's name without ``prefix``
    (which every member must start with); a member without ``= <number>``
    is the one before it plus one, as in C (the first: 0).

    Raises:
        HeaderError: no such enum, or a member this reader cannot read (a
            macro, an expression, a name without ``prefix``).
    """
    m = re.search(r"\benum\s+" + re.escape(enum) + r"\s*\{([^{}]*)\}", header_text(name))
    if not m:
        raise HeaderError(f"{header_path(name)}: no enum {enum}")
    member = re.compile(re.escape(prefix) + r"(\w+)\s*(?:=\s*(0[xX][0-9A-Fa-f]+|-?\d+)[uU]?)?")
    out: Dict[str, int] = {}
    value = -1
    for item in filter(None, (s.strip() for s in m.group(1).split(","))):
        found = member.fullmatch(item)
        if not found:
            raise HeaderError(f"{header_path(name)}: enum {enum}: cannot read {item!r}")
        value = int(found.group(2), 0) if found.group(2) else value + 1
        out[found.group(1)] = value
    return out
