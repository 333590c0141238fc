"""YAML -> plain Python values, with the line and column of every node,
read within fixed bounds.

PyYAML's *event* parser (libyaml's ``CParser`` when PyYAML has it, else the
pure-Python ``Parser``; neither recurses) turns the text into events; this
module composes them itself, in one loop over an explicit stack (never
PyYAML's composer: libyaml's C composer recurses and overflows the C stack
on ``'[' * 30000``). While reading, before any tree exists, it counts what
bounds the work and the memory:

* :data:`MAX_DEPTH` nested collections,
* :data:`MAX_NODES` nodes (aliases expanded: each expansion counts again),
* :data:`MAX_NUMBER_LENGTH` characters of a number (a 400-digit integer
  cannot reach a float conversion, nor Python's int-parsing limit).

It records, for every node, its position and its document path (a tuple of
mapping keys and sequence indices), and reports what PyYAML's constructor
lets pass silently: duplicate mapping keys.

Values follow the YAML 1.2 core schema, not PyYAML's YAML 1.1 default, so
that a manifest means what it looks like: ``1e-6`` is a float (YAML 1.1 reads
a string), ``yes``/``no``/``on``/``off`` are strings, ``010`` is ten.
Mapping keys are always the key's source text (``on: 1`` has the key
``"on"``). Explicit standard tags (``!!str 3``, ``!!float 1``) are honoured;
any other tag is an error. The result holds only ``dict``, ``list``,
``str``, ``int``, ``float``, ``bool`` and ``None``: exactly what JSON Schema
validates.

Two kinds of problems: a *syntax* problem (the text is not YAML, nesting or
size beyond the limits, an undefined alias, several documents) ends the
reading of the file; a *node* problem (duplicate key, unsupported tag,
recursive alias, a number too long, a lone surrogate) is recorded and
reading goes on, the offending node left out (``None``) and listed in
:attr:`LocatedDocument.bad_paths`, so the caller can check the rest of the
file. Every problem is a :class:`~gpsimd_build.diagnostics.Diagnostic`;
the entry points raise :class:`YamlError`, never a PyYAML or decoding
traceback. Syntax messages are PyYAML's pure-Python parser's words: when
libyaml finds a problem, a text of at most :data:`REPARSE_LIMIT`
characters is read again by the pure-Python parser (slower, ~0.6 MB/s);
past that, libyaml's own words are given.

The composer itself is :mod:`gpsimd_build.yamlcompose`; this module holds
the entry points, the located document, and the bounded file reading.
"""

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import yaml

from .diagnostics import Diagnostic, DiagnosticError, DocPath, Location, shown
from .fileread import FILE_TYPE_WORDS, MAX_MANIFEST_BYTES, read_regular_file  # noqa: F401
from .yamlcompose import (MAX_DEPTH, MAX_NODES, MAX_NUMBER_LENGTH,  # noqa: F401 (limits)
                          _Composer, _error_diagnostic, _Stop)

#: Most characters of a text that is read again by the pure-Python parser to
#: word a syntax error as it does (1 MiB, about 2 s); a longer one keeps
#: libyaml's words.
REPARSE_LIMIT = 1024 * 1024


class YamlError(DiagnosticError):
    """The text is not one well-formed YAML document (syntax, tabs, duplicate
    keys, unsupported tags, several documents, none at all, nesting, size or
    node count beyond the limits, undecodable or unreadable file).
    ``diagnostics`` locates each problem."""


@dataclass(frozen=True)
class NodeSpan:
    """Where a node is: 1-based start ``line``/``column`` and end position
    (just past the node), its ``kind`` (``"scalar"``, ``"mapping"``,
    ``"sequence"``), and for scalars the ``style`` (``None`` plain, ``"'"``,
    ``'"'``, ``"|"``, ``">"``). ``verbatim_offset`` is set when the scalar
    sits on one line and its value appears character for character in the
    source: the number of characters between the node's start and the
    value's first character (0 plain, 1 quoted); otherwise ``None``.
    """

    line: int
    column: int
    end_line: int
    end_column: int
    kind: str
    style: Optional[str] = None
    verbatim_offset: Optional[int] = None


class LocatedDocument:
    """A YAML document as Python values plus the position of every node.

    ``file`` is the name diagnostics use (the path as the user gave it),
    ``value`` the constructed value. Positions are looked up by document
    path; a path that names no node (e.g. a missing key) falls back to its
    nearest existing ancestor, so every lookup gives a position.
    ``problems`` are the node problems found while reading (duplicate keys,
    tags, ...), ``bad_paths`` the paths of the nodes left out because of them.
    """

    def __init__(self, file: str, value: Any, spans: Dict[DocPath, Any],
                 key_spans: Dict[DocPath, Any], text: str = "",
                 problems: Tuple[Diagnostic, ...] = (),
                 bad_paths: Tuple[DocPath, ...] = (),
                 inexact: Optional[Dict[DocPath, str]] = None):
        self.file = file
        self.value = value
        self._spans = spans
        self._key_spans = key_spans
        self._text = text
        self.problems = problems
        self.bad_paths = bad_paths
        #: the text of each float literal whose double is an integer other
        #: than the number written (read where an integer dtype needs it)
        self.inexact = inexact or {}

    def _make(self, raw: Any) -> NodeSpan:
        if isinstance(raw, NodeSpan):
            return raw
        line, column, end_line, end_column, kind, style, start, end = raw
        verbatim = None
        if kind == "scalar" and line == end_line:
            source = self._text[start:end]
            if style is None:
                verbatim = 0
            elif style == "'" and "''" not in source[1:-1]:
                verbatim = 1
            elif style == '"' and "\\" not in source[1:-1]:
                verbatim = 1
        return NodeSpan(line + 1, column + 1, end_line + 1, end_column + 1, kind, style,
                        verbatim)

    def has_node(self, path: DocPath) -> bool:
        """Whether a node exists at ``path``."""
        return tuple(path) in self._spans

    def span(self, path: DocPath) -> NodeSpan:
        """The span of the node at ``path`` (or of its nearest ancestor)."""
        path = tuple(path)
        while path not in self._spans and path:
            path = path[:-1]
        raw = self._spans.get(path)
        return NodeSpan(1, 1, 1, 1, "scalar") if raw is None else self._make(raw)

    def key_span(self, path: DocPath) -> NodeSpan:
        """The span of the mapping key whose value is at ``path``; the node's
        own span when ``path`` is not a mapping value."""
        path = tuple(path)
        if path in self._key_spans:
            return self._make(self._key_spans[path])
        return self.span(path)

    def position(self, path: DocPath, offset: int = 0) -> Tuple[int, int]:
        """(line, column) of character ``offset`` of the scalar value at
        ``path``; the node's start when the value is not verbatim on one line
        (block scalars, escapes, folded lines) or ``offset`` is outside it."""
        span = self.span(path)
        if span.verbatim_offset is not None:
            length = span.end_column - span.column - 2 * span.verbatim_offset
            if 0 <= offset <= length:
                return span.line, span.column + span.verbatim_offset + offset
        return span.line, span.column

    def location(self, path: DocPath, *, key: bool = False) -> Location:
        """The :class:`Location` of the node at ``path`` (of its key if ``key``)."""
        span = self.key_span(path) if key else self.span(path)
        return Location(self.file, span.line, span.column)

    def diagnostic(self, path: DocPath, message: str, *, key: bool = False,
                   offset: Optional[int] = None) -> Diagnostic:
        """A :class:`Diagnostic` at the node at ``path``: at its mapping key
        if ``key``, at character ``offset`` of its scalar value if given."""
        if offset is not None:
            line, column = self.position(path, offset)
        else:
            span = self.key_span(path) if key else self.span(path)
            line, column = span.line, span.column
        return Diagnostic(self.file, line, column, tuple(path), message)


_C_LOADER = getattr(yaml, "CBaseLoader", None)


def _compose(text: str, file: str, loader_class) -> "_Composer":
    """Run the composer over the events of ``loader_class``'s parser; raises
    ``_Stop``, ``yaml.YAMLError`` (syntax) or ``MemoryError``."""
    loader = loader_class(text)
    try:
        composer = _Composer(file, loader.get_event)
        composer.found, composer.value = composer.document()  # type: ignore[attr-defined]
        return composer
    finally:
        loader.dispose()


def read_yaml_text(text: str, file: str) -> LocatedDocument:
    """Parse ``text`` (one YAML document) into a :class:`LocatedDocument`,
    keeping going after node problems (see the module docstring): they are
    in ``problems`` and ``bad_paths`` of the result.

    Raises :class:`YamlError` (one diagnostic) for a syntax error (located at
    PyYAML's problem mark), tab indentation, an undefined alias or a
    duplicate anchor, more than one document, an empty document (no node, or
    an empty ``---``), nesting deeper than :data:`MAX_DEPTH`, more than
    :data:`MAX_NODES` nodes, or a character YAML does not allow.
    """
    try:
        try:
            composer = _compose(text, file, _C_LOADER or yaml.BaseLoader)
        except yaml.YAMLError:
            if _C_LOADER is None or len(text) > REPARSE_LIMIT:
                raise
            # the pure-Python parser words the problem as the tests and the
            # README show (libyaml's words differ) and may accept what
            # libyaml refuses (a lone surrogate escape: a node problem)
            composer = _compose(text, file, yaml.BaseLoader)
    except _Stop as stop:
        raise YamlError([stop.diagnostic]) from None
    except yaml.YAMLError as err:
        raise YamlError([_error_diagnostic(file, err, text)]) from None
    except (RecursionError, MemoryError) as err:  # pragma: no cover - bounded above
        raise YamlError([Diagnostic(file, 1, 1, (), "the document is too large to read "
                                    f"({type(err).__name__})")]) from None
    if not composer.found:  # type: ignore[attr-defined]
        raise YamlError([Diagnostic(
            file, 1, 1, (), "empty document (the file holds no YAML value)")])
    return LocatedDocument(file, composer.value, composer.spans,  # type: ignore[attr-defined]
                           composer.key_spans, text, tuple(composer.problems),
                           tuple(composer.bad_paths),
                           composer.inexact)  # type: ignore[attr-defined]


def load_yaml_text(text: str, file: str) -> LocatedDocument:
    """As :func:`read_yaml_text`, but a node problem (duplicate key,
    non-scalar key, unsupported tag, recursive alias, number longer than
    :data:`MAX_NUMBER_LENGTH`, lone surrogate) raises :class:`YamlError`
    too, with every such problem."""
    doc = read_yaml_text(text, file)
    if doc.problems:
        raise YamlError(doc.problems)
    return doc


def decode_yaml_bytes(data: bytes, file: str) -> str:
    """``data`` decoded as UTF-8 (an optional BOM dropped); raises
    :class:`YamlError` at the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        start = err.start
        line = data.count(b"\n", 0, start) + 1
        line_start = data.rfind(b"\n", 0, start) + 1
        column = len(data[line_start:start].decode("utf-8", "replace")) + 1
        raise YamlError([Diagnostic(
            file, line, column, (),
            f"the file is not valid UTF-8 (byte 0x{data[start]:02x})")]) from None


def load_yaml_file(path: str, display: Optional[str] = None) -> LocatedDocument:
    """Read and parse the YAML file at ``path`` (UTF-8, optional BOM), as
    :func:`load_yaml_text` does.

    ``display`` is the file name diagnostics give (default: ``path``). Raises
    :class:`YamlError`: as :func:`load_yaml_text`, plus a file that cannot be
    read (missing, a directory, a FIFO or device, no permission, larger than
    :data:`MAX_MANIFEST_BYTES`: at ``FILE:1:1``) or is not valid UTF-8 (at
    the first bad byte).
    """
    display = path if display is None else display
    try:
        data = read_regular_file(path, MAX_MANIFEST_BYTES)
    except OSError as err:
        raise YamlError([Diagnostic(display, 1, 1, (), read_failure(err))]) from None
    return load_yaml_text(decode_yaml_bytes(data, display), display)


def read_failure(err: OSError) -> str:
    """``cannot read the file: <why>`` for an error of :func:`read_regular_file`."""
    reason = err.strerror or str(err)
    reason = reason[:1].lower() + reason[1:]
    return f"cannot read the file: {shown(reason)}"
