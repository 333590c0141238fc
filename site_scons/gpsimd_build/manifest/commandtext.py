"""Manifest strings that reach a command: a path (a source, an include
folder, a ``.npy`` or reference file, an included manifest) becomes an SCons
node and a word of a command line, a flag (``cflags``) a word too. SCons
substitutes ``$`` in both (``k/r${Z}.cpp`` is ``k/r.cpp``, ``-DVAL=$Z`` is
``-DVAL=``), ninja reads ``$`` as its escape, and every command runs through
``sh -c``: a word is passed as written (in double quotes when it holds a
space), so the shell reads its quotes, ``;``, ``|``, ``*``, and where ``sh``
is bash its braces. A path that holds such a character would not mean what
it says: the loader refuses it (docs/manifest.md "Names and strings"). A
flag is a shell word, as ``CFLAGS`` are to make: its quotes, backslashes
are the shell's (``-DNAME=\\"x\\"`` is a string macro), and what would run
another command or make other words of it (``$``, backticks, operators,
parentheses, globs, braces; a quote or backslash left open, or a quote
that ends the double quotes a command holds a flag with a space in:
``-DA" -DB "-DC`` would be three words; ``-DM=\\"a b\\"`` is one) is refused.
A run of spaces, in a path or a flag, is refused too: the ninja file's
lines are wrapped at a space, and ninja drops the blanks that start a line.
"""

import re
import shlex
from typing import Optional, Tuple

from ..diagnostics import shown

_WHY_DOLLAR = ("SCons and ninja read '$' as a variable, replaced by its value (${Z} "
               "by nothing when Z is unset)")
_WHY_SHELL = "the shell that runs the command reads it"

#: Characters read as syntax anywhere in a word: SCons's and ninja's ``$``,
#: the shell's quotes, escapes, operators, globs and (bash's) braces,
#: control characters; a flag keeps the shell's quoting (``"'\``).
_ANYWHERE = re.compile(r"[$`\"'\\;&|<>()*?\[{}\x00-\x1f\x7f]")
_ANYWHERE_FLAG = re.compile(r"[$`;&|<>()*?\[{}\x00-\x1f\x7f]")
#: Characters read as syntax at the start of a word (the shell's ``~`` and
#: ``#``); for a path also the compiler's option (``-``) and response-file
#: (``@``) prefixes.
_FIRST_FLAG = "~#"
_FIRST_PATH = "~#-@"
#: A glob's own characters, allowed in an include pattern.
_GLOB = "*?["


def command_problem(text: str, *, path: bool, glob: bool = False,
                    flag: bool = False) -> Optional[Tuple[int, str]]:
    """(offset of the first character that a command would read as syntax,
    why) in ``text``, a path (``path``: its first character too) or a name;
    None when every character means itself. ``glob``: an include pattern,
    whose ``*``, ``?`` and ``[`` are the pattern's. ``flag``: a compiler
    flag, a shell word (module text)."""
    for m in (_ANYWHERE_FLAG if flag else _ANYWHERE).finditer(text):
        char = m.group()
        if glob and char in _GLOB:
            continue
        if char == "$":
            return m.start(), _WHY_DOLLAR
        if char < " " or char == "\x7f":
            return m.start(), f"a control character ({char!r}) cannot be passed to a command"
        return m.start(), f"'{char}': {_WHY_SHELL}"
    if flag and not _one_word(text):
        at = min(text.find(c) % (len(text) + 1) for c in "\"'\\")
        return at, ("the shell would read it as other than one word: a quote or backslash left "
                    "open, or a quote that ends the double quotes a flag that holds a space is "
                    "passed in (write \\\" there)")
    if "  " in text:
        return text.index("  "), ("a run of spaces: the ninja file's lines are wrapped at a "
                                  "space, and ninja drops the blanks that start a line")
    if text and text[0] in (_FIRST_PATH if path else _FIRST_FLAG):
        char = text[0]
        why = f"the compiler reads a word that starts with '{char}' as " + (
            "an option" if char == "-" else "a response file") if char in "-@" else \
            f"{_WHY_SHELL} at the start of a word"
        return 0, f"'{char}' at the start: {why}"
    return None


def _one_word(flag: str) -> bool:
    """Does ``flag`` read as exactly one word in the shell as a command
    holds it: in double quotes when it holds a space (SCons's
    ``quote_spaces``, which the ninja file's commands share), where ``\\"``
    and ``\\\\`` are the escapes and a single quote is itself? (POSIX rules,
    ``shlex``; the characters where it and ``sh`` differ are refused
    before.)"""
    try:
        return len(shlex.split(f'"{flag}"' if " " in flag else flag)) == 1
    except ValueError:          # (an open quote, a trailing backslash)
        return False


def command_message(what: str, written: str, problem: Tuple[int, str]) -> str:
    """The located error's text for ``written`` (a ``what``)."""
    return (f"{what} '{shown(written)}' cannot reach a build command as written: {problem[1]}; "
            f"{'write it without' if what == 'compiler flag' else 'rename it to a name without'} "
            "that character (docs/manifest.md \"Names and strings\")")
