"""GCC's own stack figures, the independent reference the stack report is
checked against (tests/unit/test_objgraph.py,
tests/integration/test_stackreport_build.py, bench/stack_check.py).

The build reads frames and calls from the objects (gpsimd_build.objgraph).
Here each translation unit of a built tree is compiled again, by its entry
in ``compile_commands.json``, with ``-fstack-usage -fcallgraph-info=su``
added: GCC then writes, beside an object of the same bytes
(-gno-record-gcc-switches), its ``.su`` figure per function and its call
graph (``.ci``). :func:`compare` holds the two side by side.
"""
import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from gpsimd_build import objgraph, stackreport

_NODE = re.compile(r'^node:\s*\{\s*title:\s*"((?:[^"\\]|\\.)*)"\s*label:\s*"((?:[^"\\]|\\.)*)"(.*)\}\s*$')
_EDGE = re.compile(r'^edge:\s*\{\s*sourcename:\s*"((?:[^"\\]|\\.)*)"\s*targetname:\s*"((?:[^"\\]|\\.)*)"')
_STACK = re.compile(r"(\d+) bytes \(([a-z,]+)\)")


def symbol(name: str) -> str:
    """A function's symbol, without the ``<file>:`` of internal linkage and
    the ``.localalias`` GCC names a function's calls to itself with."""
    return name.rsplit(":", 1)[-1].removesuffix(".localalias")


def parse_ci(text: str) -> Dict[str, objgraph.Function]:
    """GCC's ``-fcallgraph-info=su`` graph, by symbol: ``frame`` is GCC's
    ``-fstack-usage`` figure; ``dynamic`` its qualifier ``dynamic`` (not
    ``dynamic,bounded``, whose figure includes the bounded part)."""
    assert text.lstrip().startswith("graph:"), text[:80]
    funcs: Dict[str, objgraph.Function] = {}
    for line in text.splitlines():
        m = _NODE.match(line.strip())
        if m:
            f = funcs.setdefault(symbol(m.group(1)), objgraph.Function(symbol(m.group(1))))
            s = _STACK.search(m.group(2))
            if s and "ellipse" not in m.group(3):
                f.frame, f.dynamic = int(s.group(1)), s.group(2) == "dynamic"
            continue
        m = _EDGE.match(line.strip())
        if m:
            src, dst = symbol(m.group(1)), symbol(m.group(2))
            funcs.setdefault(src, objgraph.Function(src)).callees.add(dst)
            funcs.setdefault(dst, objgraph.Function(dst))
    return funcs


def merge_gcc(graphs) -> Dict[str, objgraph.Function]:
    """GCC's per-TU graphs as one: a function declared in one TU (no
    figure) and defined in another takes the definition's."""
    out: Dict[str, objgraph.Function] = {}
    for g in graphs:
        for name, f in g.items():
            m = out.setdefault(name, objgraph.Function(name))
            if f.frame is not None:
                m.frame = f.frame if m.frame is None else max(m.frame, f.frame)
            m.dynamic |= f.dynamic
            m.callees |= f.callees
    return out


def by_symbol(graph: Dict[str, objgraph.Function]) -> Dict[str, objgraph.Function]:
    """The object graph keyed and linked by symbol, as GCC's is."""
    return objgraph.merge([{symbol(n): objgraph.Function(symbol(n), f.frame, f.dynamic,
                                                         {symbol(c) for c in f.callees})}
                           for n, f in graph.items()])


@dataclass
class Comparison:
    """``functions``: how many GCC gave a figure for; ``libraries``,
    ``ops``: how many stack reports and lines were compared; ``low``: (object,
    symbol, ours, GCC's) where the object's figure is below GCC's or
    unknown; ``other``: where it differs at all (the dynamic ones may be
    larger); ``same_bytes``: objects whose recompile was not the same bytes;
    ``chains``: (library, op, ours, GCC's) where the worst chains differ."""

    functions: int = 0
    libraries: int = 0
    ops: int = 0
    low: List[Tuple[str, str, object, int]] = field(default_factory=list)
    other: List[Tuple[str, str, object, int]] = field(default_factory=list)
    same_bytes: List[str] = field(default_factory=list)
    chains: List[Tuple[str, str, tuple, tuple]] = field(default_factory=list)


def gcc_reference(top: str, entry: dict, out_dir: str) -> Tuple[str, str]:
    """Compile one entry of compile_commands.json again with GCC's stack
    outputs; returns (object path, .ci text)."""
    args = shlex.split(entry["command"])
    out = os.path.join(out_dir, entry["output"].replace("/", "_"))
    i = args.index("-o")
    args[i + 1] = out
    args[1:1] = ["-fstack-usage", "-fcallgraph-info=su"]
    subprocess.run(args, cwd=entry["directory"], check=True)
    with open(out[:-2] + ".ci", encoding="utf-8") as f:
        return out, f.read()


def compare(top: str, out_dir: str) -> Comparison:
    """Every TU of the built tree at ``top`` (its build/compile_commands.json,
    made by ``scons compiledb``) against GCC's figures, and every op's worst
    chain in ``build/host/*/stack-report.txt`` against GCC's graph."""
    with open(os.path.join(top, "build", "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    result = Comparison()
    ours_by_obj: Dict[str, Dict[str, objgraph.Function]] = {}
    gcc_by_obj: Dict[str, Dict[str, objgraph.Function]] = {}
    for entry in entries:
        built = os.path.join(top, entry["output"])
        if not os.path.exists(built):
            continue             # (an LSP object no library of this collection links)
        again, ci = gcc_reference(top, entry, out_dir)
        with open(built, "rb") as a, open(again, "rb") as b:
            if a.read() != b.read():
                result.same_bytes.append(entry["output"])
        ours = by_symbol(objgraph.read_objects([built]))
        gcc = parse_ci(ci)
        ours_by_obj[entry["output"]], gcc_by_obj[entry["output"]] = ours, gcc
        for name, g in sorted(gcc.items()):
            if g.frame is None:
                continue
            result.functions += 1
            mine = ours.get(name)
            frame = mine.frame if mine else None
            if frame is None or frame < g.frame:
                result.low.append((entry["output"], name, frame, g.frame))
            elif frame != g.frame:
                result.other.append((entry["output"], name, frame, g.frame))
    runtime = [o for o in ours_by_obj if "/runtime/obj/" in o]
    for report in sorted(os.listdir(os.path.join(top, "build", "host"))):
        path = os.path.join(top, "build", "host", report, "stack-report.txt")
        if not os.path.exists(path):
            continue
        own = [o for o in ours_by_obj if o.startswith(f"build/host/{report}/obj/")]
        if not own:
            continue             # a library of another manifest
        result.libraries += 1
        objs = own + runtime
        ours = objgraph.merge([ours_by_obj[o] for o in objs])
        gcc = merge_gcc([gcc_by_obj[o] for o in objs])
        for name, f in gcc.items():       # (which are the model's own: the build's mark)
            f.host_only = name in ours and ours[name].host_only
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^(?:WARNING: )?[^:]+::(\S+): worst static stack chain \d+ bytes "
                             r"of \d+ \((\S+)_wrapper ", line)
                root = stackreport.wrapper_symbol(m.group(2))
                a, b = stackreport.worst_chain(ours, root), stackreport.worst_chain(gcc, root)
                result.ops += 1
                assert root in ours and ours[root].frame is not None, (report, root)
                if (a.path, a.recursive) != (b.path, b.recursive):
                    result.chains.append((report, m.group(1), a.path, b.path))
    return result
