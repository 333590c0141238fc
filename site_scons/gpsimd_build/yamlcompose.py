"""The composer behind :mod:`gpsimd_build.yamlloc`: parser events -> Python
values and node positions, in one loop over an explicit stack (no
recursion), with the reading limits checked per event (:data:`MAX_DEPTH`,
:data:`MAX_NODES`, :data:`MAX_NUMBER_LENGTH`), YAML 1.2 core-schema scalars,
anchors and aliases (an alias replays its anchored node's events, so every
expansion counts against the node limit), and the node problems it reports
without stopping (duplicate keys, tags, recursive aliases, long numbers,
lone surrogates). Its caller is :func:`gpsimd_build.yamlloc.read_yaml_text`.
"""

import math
import re
from decimal import Decimal
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import yaml
from yaml import events as _ev

from .diagnostics import Diagnostic, DocPath, shown

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

#: Deepest nesting of collections in one document (a manifest needs about 17:
#: eight-dimensional ``values`` inside a vector).
MAX_DEPTH = 64
#: Most nodes one document may hold, aliases expanded (the 1.35 MB, 5,000-op
#: benchmark manifest has 130,000; each node costs about 15 us in the later
#: stages, so this bounds a file's time to a few seconds).
MAX_NODES = 250_000
#: Longest number, in characters (an int64 is 20; a float positions its
#: exponent, so no literal needs more).
MAX_NUMBER_LENGTH = 64

# A span as stored: (start line, start column, end line, end column (0-based),
# kind, style, start index, end index). NodeSpan objects are made on demand.
_RawSpan = Tuple[int, int, int, int, str, Optional[str], int, int]

def _line_column(text: str, index: int) -> Tuple[int, int]:
    """1-based (line, column) of character ``index`` of ``text``."""
    index = max(0, min(index, len(text)))
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, column


def _syntax_message(err: yaml.MarkedYAMLError, text: str = "") -> str:
    problem = err.problem or "syntax error"
    if "cannot start any token" in problem:
        mark = err.problem_mark
        at = mark.index if mark is not None else -1
        # PyYAML names the character; libyaml does not (the text tells)
        if "'\\t'" in problem or (0 <= at < len(text) and text[at] == "\t"):
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
                 "key_ok", "first_line")

    def __init__(self, value, path, event, is_map, record, anchor):
        self.value = value
        self.path = path
        self.event = event
        self.is_map = is_map
        self.record = record
        self.anchor = anchor
        self.key = None        # the current key's text, once read
        self.key_ok = False    # the current value belongs in the mapping
        self.first_line: Optional[Dict[str, int]] = {} if is_map else None


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
        # float literals whose double is an integer other than the number
        # written (9007199254740993.0, 0.99999999999999999), by path
        self.inexact: Dict[DocPath, str] = {}
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
        parsed = self._next_parsed
        while True:
            if self._replays or self._open_anchors:
                event, replayed = self._next()
            else:  # the common case, inline
                event, replayed = parsed(), False
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
            exact = _int(value) if value.startswith(("0o", "0x")) else None
            number = float(value) if exact is None else float(exact)
            if math.isinf(number):   # not written .inf: a literal past the largest double
                if record:
                    self._problem(event, path, f"number '{shown(value, 24)}' is beyond the "
                                  "largest double (1.8e308) and would become an infinity; "
                                  "write .inf or -.inf for one")
                return None
            if number.is_integer() and (Decimal(value) if exact is None else exact) \
                    != Decimal(number):
                self.inexact[path] = value if exact is None else str(exact)
            return number
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
        return Diagnostic(file, line, column, (), _syntax_message(err, text))
    if isinstance(err, yaml.reader.ReaderError):
        position, char = err.position, err.character
        if not isinstance(char, int):  # libyaml: a byte offset and '?'; find it as PyYAML does
            found = yaml.reader.Reader.NON_PRINTABLE.search(text)
            position, char = (found.start(), ord(found.group())) if found else (0, 0)
        line, column = _line_column(text, position)
        return Diagnostic(file, line, column, (),
                          f"character U+{char:04X} is not allowed in YAML ({err.reason})")
    return Diagnostic(file, 1, 1, (), f"invalid YAML: {shown(str(err))}")  # pragma: no cover


