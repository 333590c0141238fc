"""Migration: a manifest from a torch-neuronx ``build.py``.

``python -m gpsimd_build import path/to/build.py [-o ops.yaml]`` reads the
``custom_op.load(name=..., compute_srcs=[...], shape_srcs=[...],
build_directory=..., multicore=..., extra_cflags=[...])`` call of the file
with :mod:`ast` (the file is never run), reads the shape sources it names
(``gpsimd_build.shapesrc``: the ``NEURON_LIBRARY`` block and each
``m.def``), and prints a manifest for that library: its sources, shape
sources, ``multicore`` and ``cflags``, and one op per registration (named by
its op name; the kernel name and the schema come from the registration and
the shape function when the manifest is loaded) with one vector of the
right arity and a small input shape.

The vectors have no expected result: they are checks-only (every emulator
check runs, nothing is compared; reported ``CHECKED (no reference)``).
Paths in the manifest are relative to the folder it is written to (``-o``),
else to the folder of ``build.py``. Errors are located lines
``FILE:LINE:COL: message`` on stderr, exit status 1. Stdlib only.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gpsimd_device.shapes import DERIVED_TYPE

from .shapesrc import scan

__all__ = ["ImportError_", "LoadCall", "find_load_call", "manifest_text", "main"]

#: custom_op.load's parameters in order (the public developer guide).
LOAD_PARAMS = ("name", "compute_srcs", "shape_srcs", "build_directory", "multicore",
               "extra_cflags", "verbose")
#: The input shape of an imported vector's tensors (small, any kernel).
SMALL_SHAPE = (8,)
#: An imported vector's scalar argument values, by schema type.
SCALAR_VALUES = {"Scalar": 1.0, "float": 1.0, "int": 1, "long long": 1}


class ImportError_(Exception):
    """A located problem (``FILE:LINE:COL: message``)."""


class LoadCall:
    """The literal arguments of a ``custom_op.load`` call and where it is."""

    def __init__(self, file: str, line: int, column: int, args: Dict[str, Any]):
        self.file, self.line, self.column, self.args = file, line, column, args

    def where(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def _is_load(node: ast.Call) -> bool:
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "load"
            and isinstance(f.value, (ast.Name, ast.Attribute))
            and (getattr(f.value, "id", None) or getattr(f.value, "attr", None)) == "custom_op")


def find_load_call(path: str, text: str) -> LoadCall:
    """The one ``custom_op.load(...)`` call of ``text`` (the file ``path``).

    Raises:
        ImportError_: no such call, more than one, a syntax error, or an
            argument (other than ``build_directory``/``verbose``) that is
            not a literal.
    """
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        raise ImportError_(f"{path}:{e.lineno or 1}:{e.offset or 1}: not valid Python: "
                           f"{e.msg}") from None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_load(n)]
    if not calls:
        raise ImportError_(f"{path}:1:1: no custom_op.load(...) call: this command reads the "
                           "torch-neuronx call that builds one library")
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    if len(calls) > 1:
        places = ", ".join(f"{path}:{c.lineno}:{c.col_offset + 1}" for c in calls)
        raise ImportError_(f"{path}:{calls[1].lineno}:{calls[1].col_offset + 1}: more than one "
                           f"custom_op.load(...) call ({places}): import one library at a time")
    call = calls[0]
    given: List[Tuple[str, ast.AST]] = list(zip(LOAD_PARAMS, call.args))
    given += [(k.arg or "**", k.value) for k in call.keywords]
    args: Dict[str, Any] = {}
    for key, node in given:
        at = f"{path}:{node.lineno}:{node.col_offset + 1}"
        if key not in LOAD_PARAMS:
            raise ImportError_(f"{at}: custom_op.load argument '{key}' is not one this command "
                               f"reads ({', '.join(LOAD_PARAMS)})")
        if key in ("build_directory", "verbose"):
            continue    # where torch-neuronx builds, and how loud: not the manifest's
        try:
            args[key] = ast.literal_eval(node)
        except ValueError:
            raise ImportError_(f"{at}: {key} is not a literal ({ast.get_source_segment(text, node)}"
                               "): write the value itself, this command does not run "
                               "build.py") from None
    if not isinstance(args.get("name"), str):
        raise ImportError_(f"{path}:{call.lineno}:{call.col_offset + 1}: custom_op.load needs "
                           "name='<library>' (a string)")
    for key in ("compute_srcs", "shape_srcs", "extra_cflags"):
        value = args.get(key, [])
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ImportError_(f"{path}:{call.lineno}:{call.col_offset + 1}: {key} must be a "
                               "list of strings")
    return LoadCall(path, call.lineno, call.col_offset + 1, args)


def _q(text: str) -> str:
    """A YAML flow scalar for ``text`` (JSON quoting when needed)."""
    plain = text and all(c.isalnum() or c in "._/-+=" for c in text) and text[0] not in "-+=."
    return text if plain and text not in ("true", "false", "null", "yes", "no", "on", "off") \
        else json.dumps(text)


def _flow(items: Sequence[str]) -> str:
    return "[" + ", ".join(_q(i) for i in items) + "]"


def manifest_text(call: LoadCall, shape_texts: Dict[str, str], rel) -> str:
    """The manifest for ``call``; ``shape_texts``: each shape source's text
    by its path as written; ``rel(path)``: a path as written in build.py,
    relative to the manifest's folder.

    Raises:
        ImportError_: a shape source registers nothing, or a shape
            function's parameters cannot be read or typed.
    """
    a = call.args
    ops: List[Tuple[str, List[Tuple[str, str]]]] = []
    seen = set()
    for src in a.get("shape_srcs", []):
        s = scan(shape_texts[src])
        functions = s.functions
        for d in s.defs:
            if d.op in seen:
                continue
            seen.add(d.op)
            fdefs = functions.get(d.function, [])
            at = f"{src}:{d.line}:1"
            if len(fdefs) != 1:
                raise ImportError_(f"{at}: the shape function '{d.function}' of op '{d.op}' is "
                                   f"{'not defined' if not fdefs else 'defined more than once'} "
                                   f"in {src}: its parameters cannot be read")
            f = fdefs[0]
            if f.problem:
                raise ImportError_(f"{src}:{f.line}:1: the parameter list of '{d.function}' "
                                   f"cannot be read: {f.problem}")
            params = []
            for p in f.params:
                t = DERIVED_TYPE.get(p.kind)
                if t is None:
                    raise ImportError_(f"{src}:{f.line}:1: parameter '{p.name}' of "
                                       f"'{d.function}' has type '{p.type}', which no schema "
                                       "type stands for")
                params.append((p.name, t))
            ops.append((d.op, params))
    if not ops:
        srcs = ", ".join(a.get("shape_srcs", [])) or "none"
        raise ImportError_(f"{call.where()}: its shape sources ({srcs}) register no op "
                           "(NEURON_LIBRARY(<name>, m) { m.def(...); })")
    lines = [
        f"# Imported from {os.path.basename(call.file)} (custom_op.load at line {call.line}) by",
        "# `python -m gpsimd_build import`. The vectors have no expected result: they",
        "# run every emulator check and report CHECKED (no reference), never PASS.",
        "# To compare values, give an op `reference: file.py:function` (a numpy",
        "# function of the inputs, in the order of the shape function's parameters)",
        "# or a vector `expected: {values: [...]}`.",
        "version: 1",
        "libraries:",
        f"  - name: {_q(a['name'])}",
        f"    multicore: {'true' if a.get('multicore') else 'false'}",
        f"    sources: {_flow([rel(s) for s in a.get('compute_srcs', [])])}",
        f"    shape_sources: {_flow([rel(s) for s in a.get('shape_srcs', [])])}",
    ]
    if a.get("extra_cflags"):
        lines.append(f"    cflags: {_flow(a['extra_cflags'])}")
    lines.append("    ops:")
    for op, params in ops:
        lines += [f"      - name: {op}", "        vectors:", "          - name: small",
                  "            inputs:" + ("" if params else " {}")]
        for name, t in params:
            if t == "Tensor":
                shape = ", ".join(str(d) for d in SMALL_SHAPE)
                value = f"{{dtype: float32, shape: [{shape}], random: {{}}}}"
            else:
                value = repr(SCALAR_VALUES[t])
            lines.append(f"              {name}: {value}")
    return "\n".join(lines) + "\n"


def import_build(path: str, out_dir: Optional[str] = None) -> str:
    """The manifest text for the ``build.py`` at ``path`` (module text).

    Raises:
        ImportError_: a located problem.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ImportError_(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e})") \
            from None
    call = find_load_call(path, text)
    base = os.path.dirname(path) or "."
    out_dir = out_dir if out_dir is not None else base
    texts = {}
    for src in call.args.get("shape_srcs", []):
        try:
            with open(os.path.join(base, src), encoding="utf-8", errors="replace") as f:
                texts[src] = f.read()
        except OSError as e:
            raise ImportError_(f"{call.where()}: shape source '{src}' cannot be read "
                               f"({e.strerror})") from None

    def rel(p: str) -> str:
        return os.path.relpath(os.path.join(base, p), out_dir).replace(os.sep, "/")
    return manifest_text(call, texts, rel)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m gpsimd_build import BUILD_PY [-o OUT]``; the exit status."""
    p = argparse.ArgumentParser(prog="python -m gpsimd_build import",
                                description="Print a manifest for the custom_op.load(...) call "
                                            "of a torch-neuronx build.py (read, never run).")
    p.add_argument("build_py")
    p.add_argument("-o", "--output", help="write the manifest here (paths relative to its "
                                          "folder) instead of printing it")
    args = p.parse_args(argv)
    out_dir = os.path.dirname(args.output) or "." if args.output else None
    try:
        text = import_build(args.build_py, out_dir)
    except ImportError_ as e:
        print(str(e), file=sys.stderr)
        return 1
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            print(f"{args.output}: cannot be written ({e.strerror})", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0
