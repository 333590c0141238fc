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

This module is longer than 400 lines because the composer, the scalar rules
and the located document it fills are one contract (the positions it
records are the ones the document answers with).
"""

import math
import os
import re
import stat
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import yaml
from yaml import events as _ev

from .diagnostics import Diagnostic, DiagnosticError, DocPath, Location, shown

_TAG = "tag:yaml.org,2002:"

# YAML 1.2 core schema, in resolution order (int before float).
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
# First characters for which each implicit resolver is tried (PyYAML's rule).
_NULL_FIRST = frozenset("~nN")
_BOOL_FIRST = frozenset("tTfF")
_INT_FIRST = frozenset("-+0123456789")
_FLOAT_FIRST = frozenset("-+.0123456789")

_SURROGATE_RE = re.compile("[\ud800-\udfff]")

#: Largest manifest file, bytes (4 MiB; a 5,000-op manifest is about 1.35 MB).
#: A larger file is refused before it is read.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
#: Deepest nesting of collections in one document (a manifest needs about 17:
#: eight-dimensional ``values`` inside a vector).
MAX_DEPTH = 64
#: Most nodes one document may hold, aliases expanded (a 5,000-op manifest has
#: about 75,000; each node costs time in every later stage).
MAX_NODES = 250_000
#: Longest number, in characters (an int64 is 20; a float positions its
#: exponent, so no literal needs more).
MAX_NUMBER_LENGTH = 64
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


# A span as stored: (start line, start column, end line, end column (0-based),
# kind, style, start index, end index). NodeSpan objects are made on demand.
_RawSpan = Tuple[int, int, int, int, str, Optional[str], int, int]


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
                 bad_paths: Tuple[DocPath, ...] = ()):
        self.file = file
        self.value = value
        self._spans = spans
        self._key_spans = key_spans
        self._text = text
        self.problems = problems
        self.bad_paths = bad_paths

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


def _line_column(text: str, index: int) -> Tuple[int, int]:
    """1-based (line, column) of character ``index`` of ``text``."""
    index = max(0, min(index, len(text)))
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, column


def _syntax_message(err: yaml.MarkedYAMLError) -> str:
    problem = err.problem or "syntax error"
    if "'\\t'" in problem and "cannot start any token" in problem:
        return "tab character used for indentation (YAML indents with spaces only)"
    if isinstance(err, yaml.composer.ComposerError) and "another document" in problem:
        return "more than one YAML document in the file (expected exactly one)"
    message = f"invalid YAML: {shown(problem, 200)}"
    if err.context and err.context_mark is not None:
        message += (f" ({shown(err.context, 200)} at line {err.context_mark.line + 1},"
                    f" column {err.context_mark.column + 1})")
    elif err.context:
        message += f" ({shown(err.context, 200)})"
    return message


class _Stop(Exception):
    """Reading ends here: ``diagnostic`` says why (a syntax-level problem)."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(str(diagnostic))
        self.diagnostic = diagnostic


class _Frame:
    """An open collection: its value, document path, start event, and for a
    mapping the key being read (``key`` None while a key is expected)."""

    __slots__ = ("value", "path", "event", "is_map", "record", "anchor", "key",
                 "key_ok", "key_raw", "first_line", "dropping")

    def __init__(self, value, path, event, is_map, record, anchor):
        self.value = value
        self.path = path
        self.event = event
        self.is_map = is_map
        self.record = record
        self.anchor = anchor
        self.key = None        # the current key's text, once read
        self.key_ok = False    # the current value belongs in the mapping
        self.key_raw = None    # the current key's raw span
        self.first_line: Optional[Dict[str, int]] = {} if is_map else None
        self.dropping = False  # the current entry is read but left out


def _raw_span(event, end_event, kind: str, style) -> _RawSpan:
    start, end = event.start_mark, end_event.end_mark
    return (start.line, start.column, end.line, end.column, kind, style,
            start.index, end.index)


class _Composer:
    """Composes one document from parser events in a loop (no recursion),
    checking the limits per event. Aliases are expanded by replaying the
    events of their anchored node (each replayed node counts)."""

    def __init__(self, file: str, next_event: Callable[[], Any]):
        self.file = file
        self._next_parsed = next_event
        self.spans: Dict[DocPath, _RawSpan] = {}
        self.key_spans: Dict[DocPath, _RawSpan] = {}
        self.problems: List[Diagnostic] = []
        self.bad_paths: List[DocPath] = []
        self.nodes = 0
        # anchor -> [start, end, start_mark]: its events are log[start:end]
        # (end None while the node is open)
        self._anchors: Dict[str, list] = {}
        self._log: List[Any] = []
        self._open_anchors = 0
        self._replays: List[List[Any]] = []  # [events, position, anchor]
        self._replaying: Set[str] = set()

    # -- events ---------------------------------------------------------------

    def _next(self):
        """The next event and whether it is replayed (an alias's expansion)."""
        while self._replays:
            replay = self._replays[-1]
            if replay[0] < replay[1]:
                event = self._log[replay[0]]
                replay[0] += 1
                return event, True
            self._replays.pop()
            self._replaying.discard(replay[2])
        event = self._next_parsed()
        if self._open_anchors:
            self._log.append(event)
        return event, False

    def _problem(self, event, path: DocPath, message: str, bad: bool = True) -> None:
        mark = event.start_mark
        self.problems.append(Diagnostic(self.file, mark.line + 1, mark.column + 1,
                                        path, message))
        if bad:
            self.bad_paths.append(path)

    def _stop(self, event, path: DocPath, message: str) -> "_Stop":
        mark = event.start_mark
        return _Stop(Diagnostic(self.file, mark.line + 1, mark.column + 1, path, message))

    # -- the document -----------------------------------------------------------

    def document(self) -> Tuple[bool, Any]:
        """(found, value) of the stream's only document."""
        event, _ = self._next()          # StreamStart
        event, _ = self._next()
        if isinstance(event, _ev.StreamEndEvent):
            return False, None
        value, empty = self._node()       # after DocumentStart
        self._next()                      # DocumentEnd
        event, _ = self._next()
        if not isinstance(event, _ev.StreamEndEvent):
            raise self._stop(event, (), "more than one YAML document in the file "
                                        "(expected exactly one)")
        return not empty, value

    def _node(self) -> Tuple[Any, bool]:
        """Compose the document's root node; (value, is the empty scalar)."""
        stack: List[_Frame] = []
        while True:
            event, replayed = self._next()
            cls = event.__class__
            if stack:
                frame = stack[-1]
                if cls is _ev.MappingEndEvent or cls is _ev.SequenceEndEvent:
                    stack.pop()
                    if frame.record:
                        self.spans[frame.path] = _raw_span(
                            frame.event, event, "mapping" if frame.is_map else "sequence", None)
                    if frame.anchor is not None:
                        self._close_anchor(frame.anchor)
                    if not stack:
                        return frame.value, False
                    self._attach(stack[-1], frame.value, frame.event, None, "collection")
                    continue
                path, record = self._child_path(frame)
            else:
                path, record = (), True
            if cls is _ev.AliasEvent:
                # a replay of the anchored node follows, or None was attached
                self._alias(event, path, record, stack)
                continue
            self.nodes += 1
            if self.nodes > MAX_NODES:
                raise self._stop(event, path, f"document too large: more than {MAX_NODES} "
                                 "YAML nodes (aliases expanded; MAX_NODES)")
            anchor = None if replayed else event.anchor
            if anchor is not None:
                self._open_anchor(anchor, event)
            if cls is _ev.ScalarEvent:
                style = event.style or None
                is_key = bool(stack) and stack[-1].is_map and stack[-1].key is None
                value = event.value if is_key else self._scalar(event, style, path, record)
                if record:
                    self.spans[path] = _raw_span(event, event, "scalar", style)
                if anchor is not None:
                    self._close_anchor(anchor)
                if not stack:
                    empty = (value is None and event.value == "" and style is None
                             and (event.tag == _TAG + "null" or event.implicit[0]))
                    return value, empty
                self._attach(stack[-1], value, event, style, "scalar")
                continue
            is_map = cls is _ev.MappingStartEvent
            if not is_map and cls is not _ev.SequenceStartEvent:  # pragma: no cover
                raise self._stop(event, path, f"invalid YAML: unexpected {cls.__name__}")
            if len(stack) >= MAX_DEPTH:
                raise self._stop(event, (), f"YAML nesting deeper than {MAX_DEPTH} levels "
                                 "(MAX_DEPTH)")
            tag = event.tag
            if record and tag is not None and tag != "!" \
                    and tag != _TAG + ("map" if is_map else "seq"):
                self._problem(event, path, f"unsupported YAML tag '{shown(tag)}'", bad=False)
            stack.append(_Frame({} if is_map else [], path, event, is_map, record, anchor))

    def _child_path(self, frame: _Frame) -> Tuple[DocPath, bool]:
        """The path of the next node in ``frame`` and whether to record it."""
        if not frame.is_map:
            return frame.path + (len(frame.value),), frame.record
        if frame.key is None:                      # a key: its own span is kept apart
            return frame.path, False
        return frame.path + (frame.key,), frame.record and frame.key_ok

    def _attach(self, frame: _Frame, value: Any, event, style, kind: str) -> None:
        """Put a finished node into its parent ``frame``."""
        if not frame.is_map:
            frame.value.append(value)
            return
        if frame.key is None:                      # it was a key
            self._read_key(frame, value, event, style, kind)
            return
        if frame.key_ok:
            frame.value[frame.key] = value
        frame.key = None

    def _read_key(self, frame: _Frame, value: Any, event, style, kind: str) -> None:
        path = frame.path
        frame.key_ok = False
        if kind != "scalar":
            if frame.record:
                self._problem(event, path, "a mapping key must be a plain value, not a "
                              + ("mapping" if event.__class__ is _ev.MappingStartEvent
                                 else "list"), bad=False)
            frame.key = ""  # the value is read and left out
            return
        text = event.value
        frame.key = text
        if style == '"' and _SURROGATE_RE.search(text):
            if frame.record:
                self._problem(event, path, "invalid character in a mapping key: a lone "
                              "UTF-16 surrogate escape", bad=False)
            return
        first = frame.first_line
        if text in first:
            if frame.record:
                self._problem(event, path + (text,),
                              f"duplicate key '{shown(text)}' (first defined at line "
                              f"{first[text]})", bad=False)
            return
        first[text] = event.start_mark.line + 1
        frame.key_ok = True
        if frame.record:
            self.key_spans[path + (text,)] = _raw_span(event, event, "scalar", style)

    # -- anchors and aliases --------------------------------------------------------

    def _open_anchor(self, anchor: str, event) -> None:
        if anchor in self._anchors:
            first = self._anchors[anchor][2]
            raise _Stop(_error_diagnostic(self.file, yaml.composer.ComposerError(
                f"found duplicate anchor {anchor!r}; first occurrence", first,
                "second occurrence", event.start_mark)))
        if not self._open_anchors:       # else _next logged it already
            self._log.append(event)
        self._open_anchors += 1
        self._anchors[anchor] = [len(self._log) - 1, None, event.start_mark]

    def _close_anchor(self, anchor: str) -> None:
        entry = self._anchors[anchor]
        entry[1] = len(self._log)
        self._open_anchors -= 1

    def _alias(self, event, path: DocPath, record: bool, stack: List[_Frame]) -> None:
        anchor = event.anchor
        entry = self._anchors.get(anchor)
        if entry is None:
            raise _Stop(_error_diagnostic(self.file, yaml.composer.ComposerError(
                None, None, f"found undefined alias {anchor!r}", event.start_mark)))
        start, end, start_mark = entry
        if end is not None and anchor not in self._replaying:
            self._replays.append([start, end, anchor])
            self._replaying.add(anchor)
            return
        if record:
            self.problems.append(Diagnostic(self.file, start_mark.line + 1,
                                            start_mark.column + 1, path,
                                            "recursive alias (a node that contains itself)"))
            self.bad_paths.append(path)
        frame = stack[-1]  # an alias is never the root: its anchor would be undefined
        if frame.is_map and frame.key is None:
            frame.key, frame.key_ok = "", False   # as a key: the entry is left out
        else:
            self._attach(frame, None, event, None, "alias")

    # -- scalars ------------------------------------------------------------------

    def _scalar(self, event, style, path: DocPath, record: bool) -> Any:
        """The value of a scalar that is not a key (keys are their text)."""
        value = event.value
        tag = event.tag
        if tag is None or tag == "!":
            tag = _resolve(value) if event.implicit[0] else _TAG + "str"
        if style == '"' and _SURROGATE_RE.search(value):
            if record:
                self._problem(event, path, "invalid character: a lone UTF-16 surrogate escape")
            return None
        if tag == _TAG + "str":
            return value
        if tag == _TAG + "null":
            return None
        if tag == _TAG + "bool" and _BOOL_RE.match(value):
            return value.lower() == "true"
        if tag in (_TAG + "int", _TAG + "float") and len(value) > MAX_NUMBER_LENGTH:
            if record:
                self._problem(event, path, f"number '{shown(value, 24)}' has {len(value)} "
                              f"characters; a number has at most {MAX_NUMBER_LENGTH} "
                              "(MAX_NUMBER_LENGTH)")
            return None
        if tag == _TAG + "int" and _INT_RE.match(value):
            return _int(value)
        if tag == _TAG + "float" and (_FLOAT_RE.match(value) or _INT_RE.match(value)):
            lowered = value.lower()
            if lowered.endswith(".inf"):
                return -math.inf if lowered.startswith("-") else math.inf
            if lowered == ".nan":
                return math.nan
            if value.startswith(("0o", "0x")):
                return float(_int(value))
            return float(value)
        if record:
            if tag in (_TAG + "bool", _TAG + "int", _TAG + "float"):
                self._problem(event, path, f"cannot read '{shown(value)}' as "
                              f"{tag.replace(_TAG, '!!')}")
            else:
                self._problem(event, path,
                              f"unsupported YAML tag '{shown(tag.replace(_TAG, '!!'))}'")
        return None


def _resolve(value: str) -> str:
    """The implicit tag of a plain scalar (YAML 1.2 core schema)."""
    first = value[:1]
    if (first in _NULL_FIRST or not value) and _NULL_RE.match(value):
        return _TAG + "null"
    if first in _BOOL_FIRST and _BOOL_RE.match(value):
        return _TAG + "bool"
    if first in _INT_FIRST and _INT_RE.match(value):
        return _TAG + "int"
    if first in _FLOAT_FIRST and _FLOAT_RE.match(value):
        return _TAG + "float"
    return _TAG + "str"


def _int(value: str) -> int:
    if value.startswith("0o"):
        return int(value[2:], 8)
    if value.startswith("0x"):
        return int(value[2:], 16)
    return int(value, 10)


def _error_diagnostic(file: str, err: yaml.YAMLError, text: str = "") -> Diagnostic:
    """A PyYAML error as a located diagnostic (``text``: the text read)."""
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return Diagnostic(file, line, column, (), _syntax_message(err))
    if isinstance(err, yaml.reader.ReaderError):
        char = err.character if isinstance(err.character, int) else \
            ord(str(err.character)[:1] or "\0")
        line, column = _line_column(text, err.position)
        return Diagnostic(file, line, column, (),
                          f"character U+{char:04X} is not allowed in YAML ({err.reason})")
    return Diagnostic(file, 1, 1, (), f"invalid YAML: {shown(str(err))}")  # pragma: no cover


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
                           tuple(composer.bad_paths))


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


#: What a file that is not regular is, in words (``stat`` file types).
FILE_TYPE_WORDS = {
    stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def read_regular_file(path: str, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (symlinks followed), at most
    ``limit`` of them. Never opens a FIFO, a device or a socket (so never
    blocks); raises ``OSError`` (its ``strerror`` says why: "is a FIFO
    (named pipe), not a regular file", "is larger than N bytes", or the
    system's words)."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise _not_regular(mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped since the stat above
            raise _not_regular(st.st_mode)
        if st.st_size > limit:
            raise OSError(0, f"is larger than {limit} bytes ({st.st_size} bytes)")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise OSError(0, f"is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _not_regular(mode: int) -> OSError:
    words = FILE_TYPE_WORDS.get(stat.S_IFMT(mode), "not a regular file")
    if stat.S_ISDIR(mode):
        return IsADirectoryError(21, "is a directory")
    return OSError(0, f"is {words}, not a regular file")


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
