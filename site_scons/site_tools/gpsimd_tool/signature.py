"""Command signatures without SCons's substitution engine.

SCons decides that a target must be rebuilt when the signature of its
command changes; for a command line that signature is the command
substituted for signing (``CommandAction.get_presig``: every ``$VAR``
expanded, ``$( ... $)`` left out). The substitution builds a dictionary of
node proxies and walks every list element through its engine; at 1,000 ops
a null build spent a third of its time there, once per action
(BENCHMARKS.md).

:class:`SignedCommand` is SCons's own lazy ``$VAR`` command action with a
cheaper signature of the same information: the command's text with every
construction variable expanded (recursively, strings, lists and numbers;
``$$`` is ``$``; ``$( ... $)`` left out, as SCons does), the
target/source expressions (``$TARGET``, ``${TARGETS[1]}``,
``${SOURCE.base}`` ...) kept as written, and the paths of every target
and every source of the action appended. Any change of a flag, a program,
a variable the command names, or of the nodes it runs on changes it.
Whatever this expansion does not model exactly (a Python expression in
``${...}``, a callable or any other object as a value, an unbalanced
``$(``, a multi-line command, more than :data:`MAX_DEPTH` nested
variables) falls back to SCons's own signature for that action, so the
result is never less strict than SCons's.

Execution and the printed command are SCons's own (this class changes
``get_presig`` only).
"""

import re
from collections import UserList
from typing import Any, List

import SCons.Action
import SCons.Node

__all__ = ["MAX_DEPTH", "SignedCommand", "signature_text"]

#: Deepest chain of variables expanded before falling back to SCons.
MAX_DEPTH = 32

_TOKEN = re.compile(r"\$(\$|\(|\)|\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Variables whose value is the action's nodes (their paths are appended).
_NODE_VARS = frozenset({"TARGET", "TARGETS", "SOURCE", "SOURCES", "CHANGED_SOURCES",
                        "CHANGED_TARGETS", "UNCHANGED_SOURCES", "UNCHANGED_TARGETS"})
_PREFIX = b"gpsimd-signature-1\0"


class _Fallback(Exception):
    """The text uses something this expansion does not model."""


def _expand(text: str, env: Any, depth: int) -> str:
    if depth > MAX_DEPTH:
        raise _Fallback
    if "$" not in text:
        return text
    if "$" in _TOKEN.sub("", text):
        raise _Fallback                     # a lone '$': SCons has its own reading
    out: List[str] = []
    pos = 0
    excluded = 0
    for m in _TOKEN.finditer(text):
        if not excluded:
            out.append(text[pos:m.start()])
        pos = m.end()
        token = m.group(1)
        if token == "(":
            excluded += 1
            continue
        if token == ")":
            if not excluded:
                raise _Fallback
            excluded -= 1
            continue
        if excluded:
            continue
        if token == "$":
            out.append("$")
            continue
        name = token[1:-1].strip() if token[0] == "{" else token
        head = _IDENT.match(name)
        if head is not None and head.group(0) in _NODE_VARS:
            out.append("${" + name + "}")   # the nodes' paths are appended
            continue
        if head is None or head.end() != len(name):
            raise _Fallback                 # a Python expression: SCons evaluates it
        out.append(_value(env.get(name), env, depth + 1))
    if excluded:
        raise _Fallback
    out.append(text[pos:])
    return "".join(out)


def _value(value: Any, env: Any, depth: int) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return _expand(value, env, depth)
    if isinstance(value, (list, tuple, UserList)):
        # (an element with a space is one word of the command, which holds
        # it in double quotes: ["-DA=1 -DB"] is not ["-DA=1", "-DB"])
        return " ".join(f'"{v}"' if isinstance(v, str) and " " in v and "$" not in v
                        else _value(v, env, depth) for v in value)
    if isinstance(value, (bool, int, float)):
        return str(value)
    if isinstance(value, SCons.Node.Node):
        return str(value)
    raise _Fallback                         # a callable, a Literal, anything else


def signature_text(command: str, env: Any):
    """``command`` expanded for signing as described in the module
    docstring, or None when SCons's own signature must be used."""
    try:
        return _expand(command, env, 0)
    except _Fallback:
        return None


class SignedCommand(SCons.Action.LazyAction):
    """``Action("$VAR", cmdstr)`` with the signature of the module
    docstring. ``var``: the construction variable holding the command
    (without ``$``); ``cmdstr``: what is printed (None: nothing)."""

    def __init__(self, var: str, *cmdstr: Any):
        kw = {"varlist": ()}
        if cmdstr:
            kw["cmdstr"] = cmdstr[0]
        super().__init__(var, kw)

    def get_presig(self, target, source, env, executor=None):
        command = env.get(self.var)
        text = signature_text(command, env) if isinstance(command, str) \
            and "\n" not in command else None
        if text is None:
            return super().get_presig(target, source, env, executor)
        if executor is not None and target is None:
            target, source = executor.get_all_targets(), executor.get_all_sources()
        paths = ["T"] + [str(t) for t in target or ()] + ["S"] + [str(s) for s in source or ()]
        return _PREFIX + text.encode("utf-8", "surrogateescape") + b"\0" + \
            "\0".join(paths).encode("utf-8", "surrogateescape")
