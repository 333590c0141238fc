"""Located error messages: ``FILE:LINE:COL: <document path>: <message>``.

Every problem the manifest front door finds (YAML syntax, JSON Schema,
semantic checks) becomes a :class:`Diagnostic` that names the file it is in,
the 1-based line and column of the offending YAML node, and the node's
document path rendered the way jsonschema renders ``ValidationError.json_path``
(``$.libraries[0].ops[1].schema``). Diagnostics are collected, sorted and
raised together in one :class:`DiagnosticError`, so a user sees every
problem of a manifest at once, in file order, and never a traceback.

The file is part of every diagnostic (not implied by the error that carries
it) so that a manifest which includes other manifests can report problems of
several files in one error.

Diagnostics are safe to print: text taken from a manifest or another file
is quoted through :func:`shown` (control, bidirectional and line-separator
characters escaped, cut to :data:`MAX_QUOTED_CHARS`), and ``str()`` of a
diagnostic escapes any such character that is left and cuts the message to
:data:`MAX_MESSAGE_CHARS`, so one diagnostic is always one line.
"""

import re
from dataclasses import dataclass
from typing import Iterable, List, Tuple, Union

#: One step of a document path: a mapping key or a sequence index.
PathElement = Union[str, int]
#: A document path: the keys and indices from the document root to a node.
DocPath = Tuple[PathElement, ...]

# jsonschema's rule for when a key may be written as ``.key`` (else ``['key']``).
_PLAIN_KEY = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]*$")

#: Longest excerpt of a file's text quoted in a diagnostic (characters,
#: after escaping); longer text is cut and ends with ``...``.
MAX_QUOTED_CHARS = 80
#: Longest message of one diagnostic (characters); the rest is cut.
MAX_MESSAGE_CHARS = 1000

# What a terminal would act on or a reader could not see: C0/C1 controls,
# DEL, soft hyphen, bidirectional and zero-width format characters, line and
# paragraph separators, the BOM, lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f"
                     "\u202a-\u202e\u2028\u2029\u2060-\u2069\ufeff\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(match: "re.Match[str]") -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_unsafe(text: str) -> str:
    """``text`` with every control, bidirectional-format, line-separator and
    lone-surrogate character written as an escape (``\\n``, ``\\x1b``,
    ``\\u202e``); other text unchanged."""
    return _UNSAFE.sub(_escape_char, text) if _UNSAFE.search(text) else text


def shown(text: object, limit: int = MAX_QUOTED_CHARS) -> str:
    """Text from a file, safe to put in a diagnostic: escaped as by
    :func:`escape_unsafe` and cut to ``limit`` characters (``...`` marks a
    cut). Non-strings are shown with ``str()``."""
    text = escape_unsafe(text if isinstance(text, str) else str(text))
    return text if len(text) <= limit else text[:limit] + "..."


def shown_repr(value: object, limit: int = MAX_QUOTED_CHARS) -> str:
    """``repr(value)`` of a value from a file (quotes and escapes as Python
    writes them), a string cut to ``limit`` characters first."""
    if isinstance(value, str) and len(value) > limit:
        return escape_unsafe(repr(value[:limit])) + "..."
    return escape_unsafe(repr(value))


def render_json_path(path: Iterable[PathElement]) -> str:
    """Render a document path as jsonschema's ``ValidationError.json_path`` does.

    ``("libraries", 0, "ops", 1, "schema")`` -> ``$.libraries[0].ops[1].schema``;
    a key that is not a plain identifier is quoted: ``$['my key']``, its
    control characters escaped and cut as by :func:`shown`.
    """
    text = "$"
    for elem in path:
        if isinstance(elem, int) and not isinstance(elem, bool):
            text += "[" + str(elem) + "]"
        elif _PLAIN_KEY.match(str(elem)) and len(str(elem)) <= MAX_QUOTED_CHARS:
            text += "." + str(elem)
        else:
            escaped = str(elem).replace("\\", "\\\\").replace("'", r"\'")
            text += "['" + shown(escaped) + "']"
    return text


@dataclass(frozen=True)
class Location:
    """A place in a file: 1-based ``line`` and ``column`` (characters) in ``file``.

    In diagnostics ``file`` is the path as the user gave it; in the manifest
    model it is the manifest's normalised POSIX path relative to the root.

    ``str(Location("ops.yaml", 12, 7)) == "ops.yaml:12:7"``.
    """

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Diagnostic:
    """One located problem.

    ``file`` is the file's path as the user gave it (relative paths stay
    relative), ``line``/``column`` are 1-based (characters, not bytes),
    ``path`` is the document path as a tuple of keys and indices (``()`` for
    the whole document) and ``message`` says what is wrong in words.
    ``str()`` gives ``FILE:LINE:COL: <json path>: <message>``.
    """

    file: str
    line: int
    column: int
    path: DocPath
    message: str

    @property
    def json_path(self) -> str:
        """The document path in jsonschema's JSONPath-like notation (``$.a[0].b``)."""
        return render_json_path(self.path)

    @property
    def location(self) -> Location:
        """Where the problem is, as a :class:`Location`."""
        return Location(self.file, self.line, self.column)

    def __str__(self) -> str:
        message = escape_unsafe(self.message)
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[:MAX_MESSAGE_CHARS] + "..."
        where = self.json_path
        if len(where) > MAX_MESSAGE_CHARS // 2:
            where = where[:MAX_MESSAGE_CHARS // 4] + "..." + where[-MAX_MESSAGE_CHARS // 4:]
        return f"{escape_unsafe(self.file)}:{self.line}:{self.column}: {where}: {message}"


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> List[Diagnostic]:
    """Drop exact duplicates and sort by (file, line, column).

    The sort is stable: diagnostics at one place keep the order in which they
    were found.
    """
    seen = set()
    unique = []
    for diag in diagnostics:
        key = (diag.file, diag.line, diag.column, diag.path, diag.message)
        if key not in seen:
            seen.add(key)
            unique.append(diag)
    return sorted(unique, key=lambda d: (d.file, d.line, d.column))


class DiagnosticError(ValueError):
    """One or more located problems; ``str()`` is one diagnostic per line.

    ``diagnostics`` holds them sorted by (file, line, column) without
    duplicates. Raised with at least one diagnostic.
    """

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        self.diagnostics: Tuple[Diagnostic, ...] = tuple(sort_diagnostics(diagnostics))
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(d) for d in self.diagnostics)
