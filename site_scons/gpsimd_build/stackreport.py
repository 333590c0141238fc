"""Static stack report: the worst frame chain of each op, from the objects.

Every translation unit of a library (user kernels, the generated wrapper)
and of the host runtime is read for its functions' static frames and calls
(``gpsimd_build.objgraph``: the one compile's object, under any launcher).
This module walks, for each op, every call chain that starts at
``<fn>_wrapper`` (the function the launcher runs on the switched stack, the
Neuron SDK's build driver, build_custom_op.py), and reports the deepest one
against the op's stack size (4196 bytes unless the manifest says otherwise).
What it cannot see is named in the report: calls to functions outside the
objects (libc, libstdc++), indirect calls, recursion and dynamic allocation
(``alloca``, variable-length arrays). The model's own diagnostics
(``GPSIMD_HOST_ONLY`` in the runtime: warnings, fault reports), which the
device does not run, are not charged to the device stack, and the line says
how many a chain calls.

The frames are those of the host build: the device compiler's Xtensa frames
differ, so the figure is an estimate for the device and exact for the
emulator.
"""

from dataclasses import dataclass
from typing import Dict, List, Mapping, Sequence, Set, Tuple

from .objgraph import INDIRECT, Function


@dataclass(frozen=True)
class Chain:
    """The deepest call chain below a root.

    ``total``: bytes, the sum of the static frames along ``path`` (mangled
    names, root first); ``unknown``: functions reached anywhere below the root
    whose frame is not known; ``recursive``: the functions that call
    themselves again, directly or not (each counted once: the depth of the
    recursion is not); ``dynamic``: a function below the root allocates
    dynamically; ``host_only``: the model's own diagnostics called below
    the root, whose frames are not charged to the device stack (not
    followed).
    """

    total: int
    path: Tuple[str, ...]
    unknown: Tuple[str, ...]
    recursive: Tuple[str, ...]
    dynamic: bool
    host_only: Tuple[str, ...] = ()


def worst_chain(graph: Dict[str, Function], root: str) -> Chain:
    """The deepest static chain from ``root`` (see :class:`Chain`)."""
    memo: Dict[str, Tuple[int, Tuple[str, ...]]] = {}
    unknown: Set[str] = set()
    recursive: Set[str] = set()
    host_only: Set[str] = set()
    flags = {"dynamic": False}
    on_path: Set[str] = set()

    def visit(name: str) -> Tuple[int, Tuple[str, ...]]:
        if name in memo:
            return memo[name]
        if name in on_path:
            recursive.add(name)
            return 0, ()
        f = graph.get(name)
        if f is not None and f.host_only and name != root:
            host_only.add(name)
            return 0, ()
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
                 flags["dynamic"], tuple(sorted(host_only)))


def short_name(name: str, label: str) -> str:
    """The function's qualified name without return type and parameters,
    from its demangled ``label``; the symbol (``name`` without its
    ``<object>:`` part) when the label is not a signature."""
    label = label.replace("(anonymous namespace)", "{anonymous}")
    if "(" not in label or label.startswith(")"):
        return name.rsplit(":", 1)[-1]
    head = label[: label.index("(")]
    depth, cut = 0, 0
    for i, ch in enumerate(head):       # the last space outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == " " and depth == 0:
            cut = i + 1
    return _brief(head[cut:])


#: Template arguments longer than this are shown as ``<...>``.
BRIEF_TEMPLATE = 24


def _brief(name: str) -> str:
    """``name`` with each outermost template argument list longer than
    :data:`BRIEF_TEMPLATE` characters written ``<...>`` (``std::_Rb_tree<...>::_M_erase``)."""
    out, i = [], 0
    while i < len(name):
        if name[i] != "<" or name[:i].endswith(("operator", "operator<")):
            out.append(name[i])
            i += 1
            continue
        depth, j = 0, i
        while j < len(name):
            depth += {"<": 1, ">": -1}.get(name[j], 0)
            if depth == 0:
                break
            j += 1
        inner = name[i + 1:j]
        out.append("<...>" if len(inner) > BRIEF_TEMPLATE else f"<{inner}>")
        i = j + 1
    return "".join(out)


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
        if self.chain.host_only:
            notes.append(f"{len(self.chain.host_only)} host-only diagnostic(s) of the model "
                         f"not counted")
        text = (f"{library}::{self.op}: worst static stack chain {self.chain.total} bytes "
                f"of {self.stack_size} ({' -> '.join(self.labels)})")
        if notes:
            text += "; " + "; ".join(notes)
        return ("WARNING: " + text) if self.over else text


def op_report(graph: Dict[str, Function], ops: Sequence[Tuple],
              labels: Mapping[str, str] = {}) -> List[OpStack]:
    """One :class:`OpStack` per ``(op, stack_size)`` or ``(op, stack_size,
    kernel function)`` in ``ops`` (the chain starts at the kernel
    function's wrapper; the line names the op). ``labels``: demangled names
    (``objgraph.demangle``) of the functions the lines name."""
    out = []
    for item in ops:
        name, stack_size = item[0], item[1]
        function = item[2] if len(item) > 2 else name
        chain = worst_chain(graph, wrapper_symbol(function))
        shown = tuple(short_name(n, labels.get(n, n)) for n in chain.path)
        names = tuple((n, short_name(n, labels.get(n, n))) for n in chain.recursive)
        out.append(OpStack(name, stack_size, chain, shown, names))
    return out


def named(graph: Dict[str, Function], ops: Sequence[Tuple]) -> Set[str]:
    """The functions the report lines of ``ops`` name (to demangle)."""
    out: Set[str] = set()
    for r in op_report(graph, ops):
        out.update(r.chain.path)
        out.update(r.chain.recursive)
    return out
