"""The compiler's depfiles (make-style rules, as ``g++ -MD -MF FILE``
writes them): which files a compile read.

A depfile holds one rule ``target: prerequisite ...`` (``-MP`` adds an
empty rule per header), continued over lines by a backslash at the end of
a line. GCC escapes a space or a tab in a name with a backslash (doubling
the backslashes before it), a ``#`` as ``\\#`` and a ``$`` as ``$$``
(GCC's ``mkdeps.cc``; ninja's ``depfile_parser`` reads the same).
Stdlib only: the build's steps and the SCons tool both read it.
"""

from typing import List, Optional

__all__ = ["MAX_DEPFILE_BYTES", "prerequisites", "read_prerequisites"]

#: Largest depfile read (bytes; a compile of the runtime's headers writes about 5 KiB).
MAX_DEPFILE_BYTES = 16 << 20


def _words(line: str) -> List[str]:
    """The words of one logical line, escapes undone."""
    words: List[str] = []
    word: List[str] = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            j = i
            while j < n and line[j] == "\\":
                j += 1
            run = j - i
            nxt = line[j] if j < n else ""
            if nxt in (" ", "\t"):
                word.append("\\" * (run // 2))
                if run % 2:             # an escaped blank: part of the name
                    word.append(nxt)
                    i = j + 1
                    continue
                i = j                   # the blank ends the word
                continue
            if nxt == "#" and run % 2:
                word.append("\\" * (run // 2) + "#")
                i = j + 1
                continue
            word.append("\\" * run)
            i = j
            continue
        if c == "$" and i + 1 < n and line[i + 1] == "$":
            word.append("$")
            i += 2
            continue
        if c in (" ", "\t"):
            if word:
                words.append("".join(word))
                word = []
            i += 1
            continue
        word.append(c)
        i += 1
    if word:
        words.append("".join(word))
    return words


def prerequisites(text: str) -> List[str]:
    """Every prerequisite of every rule of the depfile ``text``, in the
    order written, each once (paths as the compiler wrote them: relative
    to the folder it ran in, or absolute). A line without a rule (no
    ``target:``) is ignored."""
    out: List[str] = []
    seen = set()
    joined = text.replace("\\\r\n", " ").replace("\\\n", " ")
    for line in joined.splitlines():
        # (a line without escapes splits as it stands: most of them)
        words = _words(line) if "\\" in line or "$" in line else line.split()
        for k, w in enumerate(words):
            if w.endswith(":"):
                rest = words[k + 1:]
                break
        else:
            continue
        for w in rest:
            if w not in seen:
                seen.add(w)
                out.append(w)
    return out


def read_prerequisites(path: str) -> Optional[List[str]]:
    """:func:`prerequisites` of the depfile at ``path``; None when there
    is none (or it cannot be read, or is larger than
    :data:`MAX_DEPFILE_BYTES`: as if there were none)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_DEPFILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_DEPFILE_BYTES:
        return None
    return prerequisites(data.decode("utf-8", "surrogateescape"))
