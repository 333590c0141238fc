"""Migration: a manifest from a torch-neuronx ``build.py``.

``python -m gpsimd_build import path/to/build.py [-o ops.yaml]`` reads the
``custom_op.load(name=..., compute_srcs=[...], shape_srcs=[...],
build_directory=..., multicore=..., extra_cflags=[...])`` call of the file
with :mod:`ast` (the file is never run), reads the shape sources it names
(``gpsimd_build.shapesrc``: the ``NEURON_LIBRARY`` block and each
``m.def``), and prints a manifest for that library: its sources, shape
sources, ``multicore`` and ``cflags``, and one op per registration (named by
its op name; the kernel name and the schema come from the registration and
the shape function when the manifest is loaded) with vectors of the ranks
and dtypes its kernel accepts: the library is built and its ops probed
(``gpsimd_build.import_probe``; ``--no-probe``: no build, and the ops have
no vectors). A probe that cannot run is a warning on stderr, and the ops
then have no vectors.

The vectors have no expected result: they are checks-only (every emulator
check runs, nothing is compared; reported ``CHECKED (no reference)``).
Paths in the manifest are relative to the folder it is written to (``-o``),
else to the folder of ``build.py``; that folder is the probe's project root.
Errors are located lines ``FILE:LINE:COL: message`` on stderr, exit status
1. Stdlib only (the probe runs SCons as a command).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gpsimd_device.shapes import DERIVED_TYPE

from .import_probe import ProbeError, probe_library, vectors_text
from .shapesrc import scan

__all__ = ["ImportError_", "LoadCall", "find_load_call", "registered_ops", "manifest_text",
           "import_build", "main"]

#: custom_op.load's parameters in order (the public developer guide).
LOAD_PARAMS = ("name", "compute_srcs", "shape_srcs", "build_directory", "multicore",
               "extra_cflags", "verbose")
#: A shape function's parameters: ``(name, schema type)`` in order.
Params = List[Tuple[str, str]]
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


def registered_ops(call: LoadCall, shape_texts: Dict[str, str]) -> List[Tuple[str, Params]]:
    """Each op the shape sources register, with its shape function's
    parameters ``(name, schema type)``; ``shape_texts``: each shape
    source's text by its path as written.

    Raises:
        ImportError_: a shape source registers nothing, or a shape
            function's parameters cannot be read or typed.
    """
    ops: List[Tuple[str, Params]] = []
    seen = set()
    for src in call.args.get("shape_srcs", []):
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
        srcs = ", ".join(call.args.get("shape_srcs", [])) or "none"
        raise ImportError_(f"{call.where()}: its shape sources ({srcs}) register no op "
                           "(NEURON_LIBRARY(<name>, m) { m.def(...); })")
    return ops


_HEADER_PROBED = (
    "# The vectors have the ranks and dtypes the kernels did not refuse when",
    "# probed (explore's probe; a comment marks an op whose probe failed for",
    "# another reason) and sizes that expose partition bugs: 1 element, and 999",
    "# (no core count divides it). They have no expected result: they run every",
    "# emulator check and report CHECKED (no reference), never PASS. To compare",
    "# values, give an op `reference: file.py:function` (a numpy function of the",
    "# inputs, in the order of the shape function's parameters) or a vector",
    "# `expected: {values: [...]}`.",
)
_HEADER_UNPROBED = (
    "# The ops have no vectors (not probed): `gpsimd-build explore-<lib>` (`scons",
    "# explore-<lib>` in a checkout) probes them and searches them for a failing",
    "# input; add vectors under each op's `vectors:` to test them.",
)


def manifest_text(call: LoadCall, ops: List[Tuple[str, Params]], rel,
                  probed: Optional[Dict[str, dict]] = None) -> str:
    """The manifest for ``call`` and its ``ops`` (:func:`registered_ops`);
    ``rel(path)``: a path as written in build.py, relative to the
    manifest's folder; ``probed``: the probe's record per op
    (``gpsimd_build.import_probe``; None: no vectors)."""
    a = call.args
    lines = [
        f"# Imported from {os.path.basename(call.file)} (custom_op.load at line {call.line}) by",
        "# gpsimd-import.",
        *(_HEADER_PROBED if probed is not None else _HEADER_UNPROBED),
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
        lines.append(f"      - name: {op}")
        if probed is None:
            continue
        vectors, why = vectors_text(params, probed.get(op), SCALAR_VALUES)
        failure = (probed.get(op) or {}).get("last_failure")
        if why:
            lines.append(f"        # no vectors: the probe learned nothing ({why})")
        else:
            if failure:
                lines.append(f"        # the probe's last run failed ({failure}): these ranks "
                             "and dtypes are those it did not refuse")
            lines += ["        vectors:"] + vectors
    return "\n".join(lines) + "\n"


def import_build(path: str, out_dir: Optional[str] = None, probe: bool = True,
                 build_dir: str = "build", warn=None) -> str:
    """The manifest text for the ``build.py`` at ``path`` (module text);
    with ``probe``, the library is built under ``out_dir``/``build_dir``
    and its ops probed (``gpsimd_build.import_probe``); when that fails,
    ``warn(message)`` is told and the ops have no vectors.

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
    ops = registered_ops(call, texts)

    def rel_to(folder: str):
        return lambda p: os.path.relpath(os.path.join(base, p), folder).replace(os.sep, "/")
    probed = None
    if probe:
        try:
            probed = probe_library(call.args["name"],
                                   lambda folder: manifest_text(call, ops, rel_to(folder)),
                                   out_dir, build_dir)
        except ProbeError as e:
            (warn or (lambda m: None))(f"{call.where()}: the ops were not probed, so they have "
                                       f"no vectors: {e}")
        for op, rec in (probed or {}).items():
            if rec.get("last_failure") and warn:
                warn(f"{call.where()}: op {op}: the probe's last run failed "
                     f"({rec['last_failure']}); its vectors have the ranks and dtypes the "
                     "kernel did not refuse")
    return manifest_text(call, ops, rel_to(out_dir), probed)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m gpsimd_build import BUILD_PY [-o OUT]``; the exit status."""
    p = argparse.ArgumentParser(prog="python -m gpsimd_build import",
                                description="Print a manifest for the custom_op.load(...) call "
                                            "of a torch-neuronx build.py (read, never run).")
    p.add_argument("build_py")
    p.add_argument("-o", "--output", help="write the manifest here (paths relative to its "
                                          "folder) instead of printing it")
    p.add_argument("--no-probe", action="store_true",
                   help="write the ops without vectors (no build): `scons explore-<lib>` "
                        "then searches them")
    p.add_argument("--build-dir", default="build",
                   help="BUILD_DIR of the probe's build, relative to the manifest's folder "
                        "(default: build, gpsimd-build's)")
    args = p.parse_args(argv)
    out_dir = os.path.dirname(args.output) or "." if args.output else None
    try:
        text = import_build(args.build_py, out_dir, probe=not args.no_probe,
                            build_dir=args.build_dir,
                            warn=lambda m: print(f"warning: {m}", file=sys.stderr))
    except ImportError_ as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:       # (the probe's build is ended: client.process)
        print("gpsimd-import: interrupted; nothing written", file=sys.stderr)
        return 130
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
