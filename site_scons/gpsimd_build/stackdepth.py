"""The stack depth an x86-64 instruction leaves (stdlib only): pushes and
``sub $N,%rsp`` add, pops and ``add`` take back, and the forms GCC writes
for frame pointers, stack-clash probes and ``%rsp`` kept in a callee-saved
register are followed; any other write of ``%rsp`` raises
:class:`Unknown`, so that a frame is never guessed low. The walk over a
function's control flow that uses it is ``gpsimd_build.objgraph``'s.
"""

import re
from dataclasses import dataclass, replace
from typing import Optional, Tuple

__all__ = ["Insn", "State", "Unknown", "step"]

_IMM = re.compile(r"^\$(0x[0-9a-f]+|\d+),%rsp$")
_LEA = re.compile(r"^(-?0x[0-9a-f]+)?\(%(rsp|rbp)\),%(rsp|r11)$")


def _signed(text: str) -> int:
    v = int(text, 16) if text.lstrip("-").startswith("0x") else int(text)
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass
class Insn:
    """One instruction as objdump printed it (``reloc``: its relocation)."""

    addr: int
    op: str
    args: str
    reloc: Optional[Tuple[str, str]]


class Unknown(Exception):
    """``%rsp`` set in a way the walk does not follow."""


@dataclass(frozen=True)
class State:
    """The stack depth below the caller's frame (bytes, the return address
    included), where ``mov %rsp,%rbp`` and ``%r11`` point (depths), and a
    callee-saved register ``mov %rsp,%REG`` set (name, depth) until written."""

    depth: int
    fp: Optional[int] = None
    r11: Optional[int] = None
    saved: Optional[Tuple[str, int]] = None


#: A callee-saved register that holds ``%rsp`` across pushed stack arguments,
#: and the names a write to it goes by (GCC: ``mov %rsp,%rbx`` ...
#: ``mov %rbx,%rsp``).
_SAVERS = {r: re.compile(rf"%(?:{a})$") for r, a in (
    ("rbx", "rbx|ebx|bx|bl|bh"), *((f"r{n}", f"r{n}[dwb]?") for n in range(12, 16)))}


def step(insn: Insn, st: State, probe_head: bool) -> Tuple[State, bool]:
    """The state after one instruction, and whether it allocates at run time.

    Raises:
        Unknown: ``%rsp`` set in a way not followed.
    """
    op, args, d = insn.op, insn.args, st.depth
    if op.startswith("mov") and args.startswith("%rsp,%") and args[6:] in _SAVERS:
        return State(d, st.fp, st.r11, (args[6:], d)), False
    if op.startswith("mov") and st.saved and args == f"%{st.saved[0]},%rsp":
        return State(st.saved[1], st.fp, st.r11, st.saved), False
    saved = None if st.saved is None or _SAVERS[st.saved[0]].search(args) else st.saved
    after, dynamic = _move(insn, replace(st, saved=None), probe_head)
    return (replace(after, saved=saved) if saved else after), dynamic


def _move(insn: Insn, st: State, probe_head: bool = False) -> Tuple[State, bool]:
    """:func:`step` for every instruction but a callee-saved register's."""
    op, args, d = insn.op, insn.args, st.depth
    if op == "enter" or (op.startswith(("xchg", "pop")) and "%rsp" in args) \
            or args.endswith(("%esp", ",%sp")):
        raise Unknown
    if op.startswith("push"):
        return State(d + 8, st.fp, st.r11), False
    if op.startswith("pop"):
        return State(d - 8, st.fp, st.r11), False
    if op == "leave":
        if st.fp is None:
            raise Unknown
        return State(st.fp - 8, st.fp, st.r11), False
    if op.startswith("mov") and args in ("%rsp,%rbp", "%rsp,%r11", "%rbp,%rsp"):
        if args == "%rsp,%rbp":
            return State(d, d, st.r11), False
        if args == "%rsp,%r11":
            return State(d, st.fp, d), False
        if st.fp is None:
            raise Unknown
        return State(st.fp, st.fp, st.r11), False
    if op.startswith("cmp") and args.endswith(",%rsp"):
        if args == "%r11,%rsp":             # a probe loop ends where %r11 points
            if st.r11 is None:
                raise Unknown
            return State(max(d, st.r11), st.fp, st.r11), False
        return st, True                      # page probes for a run-time area
    imm = _IMM.match(args.replace("%r11", "%rsp")) if args.endswith(("%rsp", "%r11")) else None
    if imm and op.startswith(("sub", "add")):
        n = _signed(imm.group(1)) * (1 if op.startswith("sub") else -1)
        if args.endswith("%r11"):
            if st.r11 is None:
                raise Unknown
            return State(d, st.fp, st.r11 + n), False
        # (a page probe at a loop's head is bounded by the loop's cmp)
        return (st if probe_head else State(d + n, st.fp, st.r11)), False
    lea = _LEA.match(args) if op.startswith("lea") else None
    if lea:
        n, base, dest = _signed(lea.group(1) or "0"), lea.group(2), lea.group(3)
        if base == "rsp":
            return (State(d, st.fp, d - n) if dest == "r11" else State(d - n, st.fp, st.r11)), False
        if st.fp is None or dest == "r11":
            raise Unknown
        return State(st.fp - n, st.fp, st.r11), False
    if op.startswith("sub") and re.match(r"^%r\w+,%rsp$", args):
        return st, True
    if imm and op.startswith("and") and args.endswith("%rsp"):   # realignment
        return State(d - _signed(imm.group(1)) - 1, st.fp, st.r11), False
    if args.endswith("%rsp") and not args.startswith("%rsp,"):
        raise Unknown
    return st, False
