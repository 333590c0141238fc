"""The call graph of compiled objects: each function's static frame and its
callees, read from the object itself (x86-64 ELF, GNU objdump).

The stack report needs, for every function, the most stack it takes at
once (its frame) and what it calls. GCC's ``-fstack-usage`` and
``-fcallgraph-info`` write those beside the object, but only where the
compile ran: a launcher (ccache, distcc, sccache, icecc) brings back the
object alone. So, in the manner of the Linux kernel's ``checkstack.pl``,
which reads frame sizes from ``objdump``, this module reads both from the
one object every path produces:

* **frames**: each function's instructions are walked along its control
  flow from the entry (8 bytes: the return address), adding pushes and
  ``sub $N,%rsp``, taking back pops and ``add``; the frame is the largest
  depth reached. The forms GCC writes for frame pointers (``mov %rsp,%rbp``,
  ``leave``, ``lea -N(%rbp),%rsp``), for ``%rsp`` kept in a callee-saved
  register across pushed arguments (``mov %rsp,%rbx`` ... ``mov %rbx,%rsp``,
  unless the register is written between), and for ``-fstack-clash-protection``'s
  probe loops (``lea -N(%rsp),%r11`` ... ``cmp %r11,%rsp``) are followed;
  a loop of page probes with no such bound, and ``sub %reg,%rsp``, allocate
  at run time (``dynamic``; GCC counts up to 16 bytes of alignment for such
  an area in the static figure, and so does this). An instruction that sets
  ``%rsp`` in any other way leaves the frame unknown, never guessed low.
  The figure equals GCC's ``-fstack-usage`` figure for the functions GCC
  writes (tests/unit/test_objgraph.py and the build test compare them).
* **calls**: ``call`` and ``jmp`` to another function (a tail call), named
  by the instruction's relocation or, within one section, by its target
  symbol; ``call *``/``jmp *`` through a register or memory is an indirect
  call (``INDIRECT``). A ``.cold`` part (GCC's split of unlikely code) is
  the function it was split from, and a ``.localalias`` the function.

Functions with internal linkage are named ``<object>:<symbol>``, so that two
translation units' ``static`` helpers stay apart; the others by symbol.
"""

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from gpsimd_emu.client.process import run_group

from .stackdepth import Insn as _Insn, State as _State, Unknown as _Unknown, step as _step

__all__ = ["TOOL_TIMEOUT", "INDIRECT", "Function", "ObjectGraphError", "read_objects",
           "parse_objdump", "merge", "demangle", "dumps", "loads"]

#: Seconds objdump, c++filt or strip may run before its step fails (group ended).
TOOL_TIMEOUT = 600.0
#: The callee named for a call through a register or memory.
INDIRECT = "__indirect_call"
#: The section of the runtime's own diagnostics, which the device does not
#: run (``GPSIMD_HOST_ONLY``, runtime_model/src/runtime.h): ``host_only``.
HOST_ONLY_SECTION = ".text.gpsimd_host_only"
#: Alignment GCC counts in the static figure of a function that allocates
#: at run time (alloca, a variable-length array).
DYNAMIC_SLACK = 16


class ObjectGraphError(RuntimeError):
    """objdump failed or printed what this module cannot read."""


@dataclass
class Function:
    """One function: ``frame`` in bytes (None: unknown), ``dynamic`` (it
    also allocates at run time), ``callees`` (names), ``host_only`` (in
    :data:`HOST_ONLY_SECTION`)."""

    name: str
    frame: Optional[int] = None
    dynamic: bool = False
    callees: Set[str] = field(default_factory=set)
    host_only: bool = False


_FILE = re.compile(r"^(.+):\s+file format (\S+)$")
_SECTION = re.compile(r"^Disassembly of section (\S+):$")
_FUNC = re.compile(r"^([0-9a-f]+) <(.+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\t([^\t]*)(?:\t\s*[0-9a-f]+: (R_\S+)\t(\S+))?")
_SYM = re.compile(r"^([0-9a-f]+) (.{7}) (\S+)\t([0-9a-f]+) (?:\.hidden |\.protected |\.internal )?(.+)$")
_TARGET = re.compile(r"^([0-9a-f]+) <(.+?)(?:\+0x([0-9a-f]+))?>$")
_ADDEND = re.compile(r"^(.+?)([+-]0x[0-9a-f]+)?$")
_PREFIXES = ("notrack", "bnd", "rex.W", "data16", "cs", "ds", "lock", "rep", "repz", "repnz")


def _base(name: str) -> str:
    """The function a ``.cold`` part belongs to, or a ``.localalias`` (GCC's
    local name for a function's calls to itself) names."""
    return re.sub(r"\.(cold(\.\d+)?|localalias)$", "", name)


class _Object:
    """One object's symbols and disassembly, as objdump printed them."""

    def __init__(self, path: str):
        self.path = path
        self.local: Set[str] = set()
        self.funcs: Dict[str, Tuple[str, int, int]] = {}    # name -> (section, start, size)
        self.code: Dict[str, List[_Insn]] = {}              # section -> instructions
        self.at: Dict[Tuple[str, int], str] = {}            # (section, start) -> function
        self.addrs: Dict[str, List[int]] = {}               # section -> instruction addresses

    def name(self, symbol: str) -> str:
        base = _base(symbol)
        local = base in self.local if base in self.funcs else symbol in self.local
        return f"{self.path}:{base}" if local else base

    def function_at(self, section: str, offset: int) -> Optional[str]:
        for fname, (sec, start, size) in self.funcs.items():
            if sec == section and start <= offset < start + max(size, 1):
                return fname
        return None


def _parse_files(text: str) -> List[_Object]:
    objs: List[_Object] = []
    obj: Optional[_Object] = None
    section, in_symbols = "", False
    for line in text.splitlines():
        m = _FILE.match(line)
        if m:
            obj = _Object(m.group(1))
            objs.append(obj)
            if m.group(2) != "elf64-x86-64":
                raise ObjectGraphError(f"{m.group(1)}: {m.group(2)}: frames are read from "
                                       f"x86-64 objects only")
            continue
        if not line:
            in_symbols = False
            continue
        if obj is None:
            continue
        if line == "SYMBOL TABLE:":
            in_symbols = True
            continue
        if in_symbols:
            s = _SYM.match(line)
            if s and s.group(2)[6] == "F":
                name = s.group(5)
                obj.funcs[name] = (s.group(3), int(s.group(1), 16), int(s.group(4), 16))
                if s.group(2)[0] == "l":
                    obj.local.add(name)
            continue
        m = _SECTION.match(line)
        if m:
            section = m.group(1)
            obj.code.setdefault(section, [])
            continue
        m = _INSN.match(line)
        if m and section:
            words = m.group(2).split("#", 1)[0].split()
            while words and words[0] in _PREFIXES:
                words = words[1:]
            if not words:
                continue
            reloc = (m.group(3), m.group(4)) if m.group(3) else None
            obj.code[section].append(_Insn(int(m.group(1), 16), words[0],
                                           " ".join(words[1:]), reloc))
    for o in objs:
        for fname, (sec, start, _) in o.funcs.items():
            o.at[(sec, start)] = fname
        o.addrs = {sec: [insn.addr for insn in code] for sec, code in o.code.items()}
    return objs


def _reloc_target(obj: _Object, reloc: Tuple[str, str]) -> Tuple[Optional[str], Optional[Tuple[str, int]]]:
    """A call's relocation -> (function name, or None; (section, offset)
    when it names a place in this object)."""
    m = _ADDEND.match(reloc[1])
    sym, addend = m.group(1), int(m.group(2), 16) if m.group(2) else 0
    if sym in obj.funcs:
        sec, start, _ = obj.funcs[sym]
        return obj.name(sym), (sec, start)
    if sym.startswith("."):                   # a section symbol: PC-relative, -4
        offset = addend + 4
        fname = obj.function_at(sym, offset)
        return (obj.name(fname) if fname else None), (sym, offset)
    return sym, None


def _jump_target(obj: _Object, section: str, insn: _Insn):
    """(callee name or INDIRECT or None, (section, offset) or None) of a
    call or jump."""
    if insn.reloc and insn.reloc[0] in ("R_X86_64_PLT32", "R_X86_64_PC32", "R_X86_64_GOTPCRELX",
                                        "R_X86_64_REX_GOTPCRELX", "R_X86_64_GOTPCREL"):
        return _reloc_target(obj, insn.reloc)
    if insn.args.startswith("*"):
        return INDIRECT, None
    m = _TARGET.match(insn.args)
    if not m:
        return None, None
    offset = int(m.group(1), 16)
    fname = obj.at.get((section, offset - int(m.group(3) or "0", 16))) or m.group(2)
    return obj.name(fname), (section, offset)


def _walk(obj: _Object, fname: str, parts: List[str]) -> Function:
    """Frame and callees of one function (with its ``.cold`` parts).

    The depth before each instruction is a fixpoint over the control flow;
    where paths join with different depths the smaller holds (the larger
    comes from falling through a call that does not return, which the
    object does not mark)."""
    me = obj.name(fname)
    fn = Function(me, host_only=obj.funcs[fname][0] == HOST_ONLY_SECTION)
    index: Dict[Tuple[str, int], Tuple[str, int]] = {}
    for part in parts:
        sec, start, size = obj.funcs[part]
        code = obj.code.get(sec, [])
        i = bisect.bisect_left(obj.addrs.get(sec, []), start)
        while i < len(code) and code[i].addr < start + size:
            index[(sec, code[i].addr)] = (sec, i)
            i += 1
    flow: Dict[Tuple[str, int], Tuple[List[Tuple[str, int]], bool]] = {}
    loop_heads = set()
    for key, (sec, i) in index.items():
        insn = obj.code[sec][i]
        nxt = [(sec, obj.code[sec][i + 1].addr)] if i + 1 < len(obj.code[sec]) else []
        op = insn.op
        if op in ("ret", "retq", "ud2", "hlt"):
            nxt = []
        elif op in ("call", "callq") or op.startswith("j"):
            callee, place = _jump_target(obj, sec, insn)
            is_call = op in ("call", "callq")
            inside = not is_call and place is not None and place in index
            if callee and not inside:
                fn.callees.add(callee)       # a call, a tail call, or itself again
            if not is_call:
                nxt = ([] if op in ("jmp", "jmpq") else nxt) + ([place] if inside else [])
                if inside and place[0] == sec and place[1] <= insn.addr:
                    loop_heads.add(place)     # a loop's head: a page probe there?
        flow[key] = ([n for n in nxt if n in index], False)
    probes = set()
    for key in loop_heads:          # sub $N,%rsp then or $0x0,...(%rsp): a page probe
        s, i = index[key]
        code = obj.code[s]
        if code[i].op.startswith("sub") and code[i].args.endswith(",%rsp") and i + 1 < len(code) \
                and code[i + 1].op.startswith("or") and code[i + 1].args.startswith("$0x0,"):
            probes.add(key)
    sec, start, _ = obj.funcs[fname]
    before: Dict[Tuple[str, int], _State] = {}
    work, budget = [((sec, start), _State(8))], 64 * (len(index) + 1)
    try:
        while work:
            key, st = work.pop()
            old = before.get(key)
            if old is not None and old.depth <= st.depth:
                continue
            budget -= 1
            if budget < 0:
                return fn
            before[key] = st
            s, i = index[key]
            after, _ = _step(obj.code[s][i], st, key in probes)
            work.extend((n, after) for n in flow[key][0])
        frame = 8
        for key, st in before.items():
            s, i = index[key]
            after, dynamic = _step(obj.code[s][i], st, key in probes)
            frame = max(frame, st.depth, after.depth)
            fn.dynamic |= dynamic
    except _Unknown:
        return fn
    fn.frame = frame + (DYNAMIC_SLACK if fn.dynamic else 0)
    return fn


def parse_objdump(text: str) -> Dict[str, Function]:
    """The functions of every object in ``objdump -t -d -r -w
    --no-show-raw-insn`` output (one or more files), by name.

    Raises:
        ObjectGraphError: an object that is not x86-64.
    """
    out: Dict[str, Function] = {}
    for obj in _parse_files(text):
        groups: Dict[str, List[str]] = {}
        for fname in sorted(obj.funcs):
            groups.setdefault(_base(fname), []).append(fname)
        for base, parts in sorted(groups.items()):
            if base not in obj.funcs:
                continue
            parts.sort(key=lambda p: p != base)
            fn = _walk(obj, base, parts)
            out[fn.name] = fn
    return out


def merge(graphs: Sequence[Dict[str, Function]]) -> Dict[str, Function]:
    """One graph from several: a function defined in several objects (an
    inline or template instance) keeps its largest frame and all its calls;
    unknown anywhere is unknown."""
    out: Dict[str, Function] = {}
    for g in graphs:
        for name, f in g.items():
            m = out.get(name)
            if m is None:
                out[name] = Function(name, f.frame, f.dynamic, set(f.callees), f.host_only)
                continue
            m.frame = None if m.frame is None or f.frame is None else max(m.frame, f.frame)
            m.dynamic |= f.dynamic
            m.callees |= f.callees
            m.host_only |= f.host_only
    return out


def read_objects(paths: Sequence[str], objdump: str = "objdump") -> Dict[str, Function]:
    """The merged graph of the objects at ``paths``: one ``objdump`` run.

    Raises:
        ObjectGraphError: objdump is missing, fails or runs longer than
        :data:`TOOL_TIMEOUT`, or an object is not x86-64.
    """
    if not paths:
        return {}
    try:
        ended = run_group([objdump, "-t", "-d", "-r", "-w", "--no-show-raw-insn", *paths],
                          TOOL_TIMEOUT, apart=True)
    except OSError as e:
        raise ObjectGraphError(f"{objdump}: {e.strerror}") from None
    if ended.status != 0:
        raise ObjectGraphError(f"{objdump} failed: {ended.err.strip()}")
    return parse_objdump(ended.out)


def demangle(names: Sequence[str], cxxfilt: str = "c++filt") -> Dict[str, str]:
    """Readable names (``c++filt``) of function names (their ``<object>:``
    part dropped); a name c++filt cannot run on (or in
    :data:`TOOL_TIMEOUT`) stays as it is."""
    symbols = [n.rsplit(":", 1)[-1] for n in names]
    try:
        ended = run_group([cxxfilt], TOOL_TIMEOUT, text_in="\n".join(symbols) + "\n", apart=True)
        lines = ended.out.splitlines() if ended.status == 0 else []
    except OSError:
        lines = []
    if len(lines) != len(symbols):
        lines = symbols
    return dict(zip(names, lines))


def dumps(graph: Dict[str, Function]) -> str:
    """A graph as JSON text (sorted: the same graph, the same bytes):
    ``{"functions": {name: {"frame": bytes or null, "dynamic": bool,
    "callees": [names], "host_only": bool}}}``."""
    return json.dumps({"functions": {n: {"frame": f.frame, "dynamic": f.dynamic,
                                         "callees": sorted(f.callees),
                                         "host_only": f.host_only}
                                     for n, f in sorted(graph.items())}},
                      sort_keys=True, indent=0) + "\n"


def loads(text: str, path: str = "<graph>") -> Dict[str, Function]:
    """The graph :func:`dumps` wrote.

    Raises:
        ObjectGraphError: text that is not such a graph, naming ``path``.
    """
    try:
        doc = json.loads(text)
        return {n: Function(n, f["frame"], bool(f["dynamic"]), set(f["callees"]),
                            bool(f["host_only"]))
                for n, f in doc["functions"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ObjectGraphError(f"{path}: not a stack graph ({e})") from None
