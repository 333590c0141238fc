"""Static stack report: the worst frame chain of each op, from the compiler.

Every translation unit of a library (user kernels, the generated wrapper)
and of the host runtime is also compiled with GCC's
``-fcallgraph-info=su``, which writes a ``.ci`` file: a VCG graph with one
node per function (its static frame in bytes, and whether it also allocates
dynamically) and one edge per call. This module merges those graphs and
walks, for each op, every call chain that starts at ``<fn>_wrapper`` (the
function the launcher runs on the switched stack, the Neuron SDK's build driver, build_custom_op.py),
and reports the deepest one against the op's stack size (4196 bytes unless
the manifest says otherwise). What it cannot see is named in the report:
calls to functions with no ``.ci`` (libc, libstdc++), indirect calls,
recursion and dynamic allocation (``alloca``, variable-length arrays).

The frames are those of the host build: the device compiler's Xtensa frames
differ, so the figure is an estimate for the device and exact for the
emulator.
"""

import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

_NODE = re.compile(r'^node:\s*\{\s*title:\s*"((?:[^"\\]|\\.)*)"\s*label:\s*"((?:[^"\\]|\\.)*)"(.*)\}\s*$')
_EDGE = re.compile(r'^edge:\s*\{\s*sourcename:\s*"((?:[^"\\]|\\.)*)"\s*targetname:\s*"((?:[^"\\]|\\.)*)"')
_STACK = re.compile(r"(\d+) bytes \(([a-z,]+)\)")

INDIRECT = "__indirect_call"


class StackReportError(ValueError):
    """A ``.ci`` file that cannot be read as GCC's call-graph output."""


@dataclass
class Function:
    """One function of the merged call graph.

    ``frame``: static frame size in bytes (None when no ``.ci`` defines it);
    ``dynamic``: the frame also grows at run time (alloca, VLA);
    ``label``: the demangled name GCC printed.
    """

    name: str
    label: str = ""
    frame: Optional[int] = None
    dynamic: bool = False
    callees: Set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Chain:
    """The deepest call chain below a root.

    ``total``: bytes, the sum of the static frames along ``path`` (mangled
    names, root first); ``unknown``: functions reached anywhere below the root
    whose frame is not known; ``recursive``: the functions that call
    themselves again, directly or not (each counted once: the depth of the
    recursion is not); ``dynamic``: a function below the root allocates
    dynamically.
    """

    total: int
    path: Tuple[str, ...]
    unknown: Tuple[str, ...]
    recursive: Tuple[str, ...]
    dynamic: bool


def parse_ci(text: str, path: str = "<ci>") -> Dict[str, Function]:
    """Parse one GCC ``-fcallgraph-info=su`` file into functions by name.

    Raises StackReportError when the text has no ``graph:`` header.
    """
    if not text.lstrip().startswith("graph:"):
        raise StackReportError(f"{path}: not a GCC call-graph (.ci) file")
    funcs: Dict[str, Function] = {}
    for line in text.splitlines():
        line = line.strip()
        m = _NODE.match(line)
        if m:
            name, label, rest = m.group(1), m.group(2).replace("\\n", "\n"), m.group(3)
            f = funcs.setdefault(name, Function(name))
            f.label = label.split("\n", 1)[0]
            s = _STACK.search(label)
            if s and "ellipse" not in rest:
                f.frame = int(s.group(1))
                # GCC's qualifiers: "static"; "dynamic,bounded" (the figure
                # includes the bounded dynamic part); "dynamic" (unbounded)
                f.dynamic = s.group(2) == "dynamic"
            continue
        m = _EDGE.match(line)
        if m:
            src, dst = m.group(1), m.group(2)
            funcs.setdefault(src, Function(src)).callees.add(dst)
            funcs.setdefault(dst, Function(dst))
    return funcs


def merge(graphs: Iterable[Dict[str, Function]]) -> Dict[str, Function]:
    """Merge per-TU graphs: a function defined in several TUs (an inline or
    template instance) keeps its largest frame and all its calls."""
    out: Dict[str, Function] = {}
    for g in graphs:
        for name, f in g.items():
            m = out.setdefault(name, Function(name))
            if f.label and not m.label:
                m.label = f.label
            if f.frame is not None:
                m.frame = f.frame if m.frame is None else max(m.frame, f.frame)
            m.dynamic = m.dynamic or f.dynamic
            m.callees |= f.callees
    return out


def worst_chain(graph: Dict[str, Function], root: str) -> Chain:
    """The deepest static chain from ``root`` (see :class:`Chain`)."""
    memo: Dict[str, Tuple[int, Tuple[str, ...]]] = {}
    unknown: Set[str] = set()
    recursive: Set[str] = set()
    flags = {"dynamic": False}
    on_path: Set[str] = set()

    def visit(name: str) -> Tuple[int, Tuple[str, ...]]:
        if name in memo:
            return memo[name]
        if name in on_path:
            recursive.add(name)
            return 0, ()
        f = graph.get(name)
        if f is None or f.frame is None:
            unknown.add(name)
            return 0, (name,)
        flags["dynamic"] |= f.dynamic
        on_path.add(name)
        best: Tuple[int, Tuple[str, ...]] = (0, ())
        for callee in sorted(f.callees):
            sub = visit(callee)
            if sub[0] > best[0]:
                best = sub
        on_path.discard(name)
        memo[name] = (f.frame + best[0], (name,) + best[1])
        return memo[name]

    total, path = visit(root)
    return Chain(total, path, tuple(sorted(unknown)), tuple(sorted(recursive)),
                 flags["dynamic"])


def short_name(func: Function) -> str:
    """The function's qualified name without return type and parameters,
    from GCC's label; the symbol when the label is not a signature (GCC
    prints ``)`` for some variadic functions)."""
    label = func.label
    if "(" not in label or label.startswith(")"):
        return func.name.rsplit(":", 1)[-1]
    head = label[: label.index("(")]
    depth, cut = 0, 0
    for i, ch in enumerate(head):       # the last space outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == " " and depth == 0:
            cut = i + 1
    return head[cut:]


def wrapper_symbol(function: str) -> str:
    """Mangled name of ``void <function>_wrapper()`` (Itanium C++ ABI)."""
    name = f"{function}_wrapper"
    return f"_Z{len(name)}{name}v"


@dataclass(frozen=True)
class OpStack:
    """The report line of one op: its worst chain against its stack (bytes)."""

    op: str
    stack_size: int
    chain: Chain
    labels: Tuple[str, ...]
    names: Tuple[Tuple[str, str], ...] = ()

    @property
    def over(self) -> bool:
        return self.chain.total > self.stack_size

    def line(self, library: str) -> str:
        """``lib::op: N bytes of S (a -> b -> c)[; notes]``, with WARNING first
        when the chain exceeds the op's stack."""
        names = dict(self.names)
        notes = []
        if self.chain.recursive:
            rec = ", ".join(names.get(r, r) for r in self.chain.recursive)
            notes.append(f"recursion in {rec} (counted once; its depth is not)")
        if self.chain.dynamic:
            notes.append("dynamic allocation below the wrapper")
        unseen = [u for u in self.chain.unknown if u != INDIRECT]
        if INDIRECT in self.chain.unknown:
            notes.append("indirect calls not followed")
        if unseen:
            notes.append(f"{len(unseen)} callee(s) without frame information")
        text = (f"{library}::{self.op}: worst static stack chain {self.chain.total} bytes "
                f"of {self.stack_size} ({' -> '.join(self.labels)})")
        if notes:
            text += "; " + "; ".join(notes)
        return ("WARNING: " + text) if self.over else text


def op_report(graph: Dict[str, Function], ops: Sequence[Tuple]) -> List[OpStack]:
    """One :class:`OpStack` per ``(op, stack_size)`` or ``(op, stack_size,
    kernel function)`` in ``ops`` (the chain starts at the kernel
    function's wrapper; the line names the op)."""
    out = []
    for item in ops:
        name, stack_size = item[0], item[1]
        function = item[2] if len(item) > 2 else name
        chain = worst_chain(graph, wrapper_symbol(function))
        labels = tuple(short_name(graph[n]) if n in graph else n for n in chain.path)
        names = tuple((n, short_name(graph[n])) for n in chain.recursive if n in graph)
        out.append(OpStack(name, stack_size, chain, labels, names))
    return out
