"""Reading a shape source's text, without compiling it: its
``NEURON_LIBRARY(<lib>, m)`` block, each ``m.def("<op>", &<fn>,
"<kernel>")`` in it, and the parameter lists of the functions they name
(docs/shape-functions.md).

The manifest loader needs these before anything is built: the kernel name
an op defaults to (the ``m.def``'s third argument) and, for an op without
``schema:``, the schema derived from its shape function (argument names
from the parameter names, types from the parameter types). What the text
says is only a reading: the compiled registration
(``python -m gpsimd_emu.shapes registration``) is the truth, and the
build's registration check compares it with the manifest, so a reading
that a macro or a typedef fooled is caught there.

:func:`scan` tokenises C++ (comments, preprocessor lines, string and
character literals), then matches the three forms. A construct it cannot
read is not an error here: it is left out, with a note saying why
(:attr:`SourceScan.notes`), which the loader quotes when it needs that
construct. Stdlib only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from gpsimd_device.shapes import kind_of_spelling

__all__ = ["Param", "FunctionDef", "OpDef", "SourceScan", "scan"]

_TYPE_WORDS = frozenset("""int long short char double float unsigned signed bool void auto
    const volatile""".split())


@dataclass(frozen=True)
class Param:
    """One parameter: its type as written (``const torch::Tensor &``), its
    kind (``gpsimd_device.shapes.PARAM_KINDS`` names) and its name ("" when
    it has none)."""

    type: str
    kind: str
    name: str


@dataclass(frozen=True)
class FunctionDef:
    """A function definition: ``name``, the ``line`` of its name, and its
    parameters, or ``problem`` (why they cannot be read)."""

    name: str
    line: int
    params: Tuple[Param, ...] = ()
    problem: Optional[str] = None


@dataclass(frozen=True)
class OpDef:
    """One ``m.def("<op>", &<function>, "<kernel>")`` at ``line``."""

    op: str
    function: str
    kernel: str
    line: int


@dataclass
class SourceScan:
    """What one shape source says: its ``NEURON_LIBRARY`` blocks (name,
    line), its ``m.def`` calls, the definitions of the functions they name
    (by name; several when overloaded), and notes on what could not be
    read (line, text)."""

    libraries: List[Tuple[str, int]] = field(default_factory=list)
    defs: List[OpDef] = field(default_factory=list)
    functions: Dict[str, List[FunctionDef]] = field(default_factory=dict)
    notes: List[Tuple[int, str]] = field(default_factory=list)


_TOKEN = re.compile(r"""
      (?P<ws>[ \t\r\f\v]+)
    | (?P<nl>\n)
    | (?P<line_comment>//[^\n]*)
    | (?P<block_comment>/\*.*?(?:\*/|\Z))
    | (?P<string>"(?:[^"\\\n]|\\.)*")
    | (?P<char>'(?:[^'\\\n]|\\.)*')
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<number>[0-9][A-Za-z0-9_.']*)
    | (?P<punct>::|->|&&|\|\||<<|>>|[^\s])
""", re.X | re.S)


def _tokens(text: str) -> List[Tuple[str, str, int]]:
    """``(kind, text, line)`` of every token; comments, whitespace and
    preprocessor lines left out; a string's text is its value."""
    out: List[Tuple[str, str, int]] = []
    line = 1
    at_line_start = True
    pos = 0
    while pos < len(text):
        if at_line_start:
            m = re.match(r"[ \t]*#", text[pos:pos + 4096])
            if m:   # a preprocessor line, with its continuations
                end = pos
                while True:
                    nl = text.find("\n", end)
                    if nl < 0:
                        end = len(text)
                        break
                    if text[nl - 1:nl] == "\\":
                        line += 1
                        end = nl + 1
                        continue
                    end = nl
                    break
                pos = end
                continue
        m = _TOKEN.match(text, pos)
        if m is None:  # pragma: no cover - every character matches punct
            break
        kind = m.lastgroup
        value = m.group()
        pos = m.end()
        if kind == "nl":
            line += 1
            at_line_start = True
            continue
        if kind in ("ws", "line_comment"):
            continue
        if kind == "block_comment":
            line += value.count("\n")
            continue
        at_line_start = False
        if kind == "string":
            value = bytes(value[1:-1], "utf-8").decode("unicode_escape", "replace") \
                if "\\" in value else value[1:-1]
        out.append((kind, value, line))
    return out


def _matching(tokens, start: int, open_: str, close: str) -> int:
    """Index of the token closing the ``open_`` at ``start`` (-1: none)."""
    depth = 0
    for i in range(start, len(tokens)):
        t = tokens[i][1] if tokens[i][0] == "punct" else None
        if t == open_:
            depth += 1
        elif t == close:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_params(tokens) -> List[list]:
    """The parameters between a function's parentheses, split at commas
    outside (), <>, [], {}."""
    parts: List[list] = [[]]
    depth = 0
    for tok in tokens:
        t = tok[1] if tok[0] == "punct" else None
        if t in ("(", "<", "[", "{"):
            depth += 1
        elif t in (")", ">", "]", "}"):
            depth -= 1
        elif t == ">>":
            depth -= 2
        if t == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


def _type_text(tokens) -> str:
    text = " ".join(t[1] for t in tokens)
    text = re.sub(r"\s*(::|<|>)\s*", r"\1", text).replace(" ,", ",")
    return text.replace(" &", "&").replace(" *", "*")


def _params(tokens) -> Tuple[Tuple[Param, ...], Optional[str]]:
    """The parameters of a parameter list, or a problem."""
    if not tokens or (len(tokens) == 1 and tokens[0][1] == "void"):
        return (), None
    out = []
    for k, part in enumerate(_split_params(tokens)):
        cut = next((i for i, t in enumerate(part) if t[0] == "punct" and t[1] == "="), len(part))
        part = part[:cut]
        if not part:
            return (), f"parameter {k + 1} is empty"
        last = part[-1]
        if last[0] == "ident" and len(part) > 1 and last[1] not in _TYPE_WORDS:
            type_tokens, name = part[:-1], last[1]
        else:
            return (), f"parameter {k + 1} ('{_type_text(part)}') has no name"
        type_text = _type_text(type_tokens)
        out.append(Param(type_text, kind_of_spelling(type_text), name))
    return tuple(out), None


def scan(text: str) -> SourceScan:
    """Read one shape source's text (see the module text)."""
    result = SourceScan()
    toks = _tokens(text)
    names_wanted = set()
    i = 0
    while i < len(toks):
        kind, value, line = toks[i]
        if kind == "ident" and value == "NEURON_LIBRARY" and i + 6 < len(toks) \
                and toks[i + 1][1] == "(":
            if toks[i + 2][0] == "ident" and toks[i + 3][1] == "," and toks[i + 4][0] == "ident" \
                    and toks[i + 5][1] == ")" and toks[i + 6][1] == "{":
                result.libraries.append((toks[i + 2][1], line))
                end = _matching(toks, i + 6, "{", "}")
                end = len(toks) if end < 0 else end
                _scan_defs(toks[i + 7:end], toks[i + 4][1], result, names_wanted)
                i = end + 1
                continue
            result.notes.append((line, "a NEURON_LIBRARY(...) this reading does not follow"))
        i += 1
    for i in range(len(toks) - 1):
        kind, value, line = toks[i]
        if kind != "ident" or value not in names_wanted or toks[i + 1][1] != "(":
            continue
        close = _matching(toks, i + 1, "(", ")")
        if close < 0:
            continue
        after = close + 1
        while after < len(toks) and toks[after][1] in ("noexcept", "throw"):
            after += 1
        if after >= len(toks) or toks[after][1] != "{":
            continue   # a call or a declaration
        params, problem = _params(toks[i + 2:close])
        result.functions.setdefault(value, []).append(FunctionDef(value, line, params, problem))
    return result


def _scan_defs(block, m: str, result: SourceScan, names_wanted: set) -> None:
    """The ``m.def(...)`` calls of a NEURON_LIBRARY block."""
    i = 0
    while i + 3 < len(block):
        if block[i][0] == "ident" and block[i][1] == m and block[i + 1][1] == "." \
                and block[i + 2][1] == "def" and block[i + 3][1] == "(":
            line = block[i][2]
            close = _matching(block, i + 3, "(", ")")
            args = _split_params(block[i + 4:close] if close > 0 else [])
            parsed = _def_args(args)
            if parsed is None:
                result.notes.append((line, "an m.def(...) whose arguments are not a string "
                                           "literal, &function and a string literal"))
            else:
                op, function, kernel = parsed
                result.defs.append(OpDef(op, function, kernel, line))
                names_wanted.add(function)
            i = close + 1 if close > 0 else i + 4
            continue
        i += 1


def _def_args(args) -> Optional[Tuple[str, str, str]]:
    """(op, function, kernel) of m.def's arguments, or None."""
    if len(args) != 3:
        return None
    strings = []
    for part in (args[0], args[2]):
        if not part or any(t[0] != "string" for t in part):
            return None
        strings.append("".join(t[1] for t in part))
    fn = [t for t in args[1] if not (t[0] == "punct" and t[1] == "&")]
    if not fn or fn[-1][0] != "ident" or any(t[0] not in ("ident",) and t[1] != "::"
                                             for t in fn):
        return None
    return strings[0], fn[-1][1], strings[1]
