"""Text a kernel controls, made safe to print: what cores write to stdout
and stderr, printf text, what core objects write while loading, and fault
messages that copy a kernel's text (an exception's ``what()``).

Printed raw, such text could move the cursor, clear the screen, overwrite a
line with a carriage return and print a ``PASS`` line of its own, or hide
what follows; so every printer of the emulator, the build and the pytest
plugin passes it through :func:`visible` (or :func:`prefixed`), and the
HTML report too. Stdlib only.
"""

from __future__ import annotations

from typing import List

__all__ = ["visible", "prefixed"]


def _shown(ch: str) -> str:
    return repr(ch)[1:-1]


def visible(text: str, *, newlines: bool = True) -> str:
    """``text`` with every character ``str.isprintable`` refuses (C0 and C1
    controls such as ESC and CR, DEL, format characters such as bidi
    overrides, line separators) written as Python writes it in a string
    literal: ``\\x1b``, ``\\r``, ``\\x9b``, ``\\u202e``. Tabs are kept, and
    newlines unless ``newlines`` is False (one line of output, such as a
    ``FAIL`` line: ``\\n``). Backslashes are kept as they are, so the result
    is for reading, not for reversing; it is its own ``visible``.
    """
    if text.isprintable():
        return text
    keep = "\t\n" if newlines else "\t"
    return "".join(ch if ch.isprintable() or ch in keep else _shown(ch) for ch in text)


def prefixed(prefix: str, text: str) -> List[str]:
    """The lines of ``text`` (a final newline dropped), each ``visible`` and
    after ``prefix``, e.g. ``prefixed("[lib::op[v] core 0] ", "a\\x1b[2Jb\\n")``
    is ``["[lib::op[v] core 0] a\\x1b[2Jb"]`` (the escape as four
    characters). A carriage return does not end a line: it shows as
    ``\\r``."""
    return [prefix + visible(line) for line in text.rstrip("\n").split("\n")]
