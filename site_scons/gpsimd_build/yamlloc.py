"""YAML -> plain Python values, with the line and column of every node.

PyYAML's composer (``SafeLoader``) builds the node tree; this module
constructs the Python values itself so that it can record, for every node,
its 1-based position and its document path (a tuple of mapping keys and
sequence indices), and so that it can report what PyYAML's constructor lets
pass silently: duplicate mapping keys.

Values follow the YAML 1.2 core schema, not PyYAML's YAML 1.1 default, so
that a manifest means what it looks like: ``1e-6`` is a float (YAML 1.1 reads
a string), ``yes``/``no``/``on``/``off`` are strings, ``010`` is ten.
Mapping keys are always the key's source text (``on: 1`` has the key
``"on"``). Explicit standard tags (``!!str 3``, ``!!float 1``) are honoured;
any other tag is an error. The result holds only ``dict``, ``list``,
``str``, ``int``, ``float``, ``bool`` and ``None``: exactly what JSON Schema
validates.

Every problem is a :class:`~gpsimd_build.diagnostics.Diagnostic`; the entry
points raise :class:`YamlError` carrying all of them, never a PyYAML or
decoding traceback.
"""

import math
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import yaml

from .diagnostics import Diagnostic, DiagnosticError, DocPath, Location

_TAG = "tag:yaml.org,2002:"

# YAML 1.2 core schema, in resolution order (int before float).
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)

_SURROGATE_RE = re.compile("[\ud800-\udfff]")

#: Most nodes one document may expand to (aliases can multiply a small file).
MAX_NODES = 1_000_000


class _CoreLoader(yaml.SafeLoader):
    """SafeLoader whose implicit tags follow the YAML 1.2 core schema."""

    yaml_implicit_resolvers: Dict[str, list] = {}


class _FastCoreLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The same resolvers on libyaml's parser (when PyYAML has it)."""

    yaml_implicit_resolvers = _CoreLoader.yaml_implicit_resolvers


_CoreLoader.add_implicit_resolver(_TAG + "null", _NULL_RE, ["~", "n", "N", ""])
_CoreLoader.add_implicit_resolver(_TAG + "bool", _BOOL_RE, list("tTfF"))
_CoreLoader.add_implicit_resolver(_TAG + "int", _INT_RE, list("-+0123456789"))
_CoreLoader.add_implicit_resolver(_TAG + "float", _FLOAT_RE, list("-+.0123456789"))


class YamlError(DiagnosticError):
    """The text is not one well-formed YAML document (syntax, tabs, duplicate
    keys, unsupported tags, several documents, none at all, undecodable or
    unreadable file). ``diagnostics`` locates each problem."""


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
    """

    def __init__(self, file: str, value: Any, spans: Dict[DocPath, NodeSpan],
                 key_spans: Dict[DocPath, NodeSpan]):
        self.file = file
        self.value = value
        self._spans = spans
        self._key_spans = key_spans

    def has_node(self, path: DocPath) -> bool:
        """Whether a node exists at ``path``."""
        return tuple(path) in self._spans

    def span(self, path: DocPath) -> NodeSpan:
        """The span of the node at ``path`` (or of its nearest ancestor)."""
        path = tuple(path)
        while path not in self._spans and path:
            path = path[:-1]
        return self._spans.get(path, NodeSpan(1, 1, 1, 1, "scalar"))

    def key_span(self, path: DocPath) -> NodeSpan:
        """The span of the mapping key whose value is at ``path``; the node's
        own span when ``path`` is not a mapping value."""
        path = tuple(path)
        if path in self._key_spans:
            return self._key_spans[path]
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
    message = f"invalid YAML: {problem}"
    if err.context and err.context_mark is not None:
        message += (f" ({err.context} at line {err.context_mark.line + 1},"
                    f" column {err.context_mark.column + 1})")
    elif err.context:
        message += f" ({err.context})"
    return message


class _TooLarge(Exception):
    pass


class _Constructor:
    """Builds Python values from a composed node tree, recording spans."""

    def __init__(self, file: str, text: str):
        self.file = file
        self.text = text
        self.spans: Dict[DocPath, NodeSpan] = {}
        self.key_spans: Dict[DocPath, NodeSpan] = {}
        self.diagnostics: List[Diagnostic] = []
        self._active: set = set()
        self._count = 0

    def _span(self, node: yaml.Node, kind: str) -> NodeSpan:
        start, end = node.start_mark, node.end_mark
        style = (getattr(node, "style", None) or None) if kind == "scalar" else None
        verbatim = None
        if kind == "scalar" and start.line == end.line:
            raw = self.text[start.index:end.index]
            if style is None and raw == node.value:
                verbatim = 0
            elif style in ("'", '"') and raw == style + node.value + style:
                verbatim = 1
        return NodeSpan(start.line + 1, start.column + 1, end.line + 1,
                        end.column + 1, kind, style, verbatim)

    def _error(self, node: yaml.Node, path: DocPath, message: str) -> None:
        self.diagnostics.append(Diagnostic(
            self.file, node.start_mark.line + 1, node.start_mark.column + 1,
            path, message))

    def construct(self, node: yaml.Node, path: DocPath) -> Any:
        """The Python value of ``node`` (at document path ``path``), recording spans."""
        self._count += 1
        if self._count > MAX_NODES:
            raise _TooLarge()
        if isinstance(node, yaml.ScalarNode):
            self.spans[path] = self._span(node, "scalar")
            return self._scalar(node, path)
        if id(node) in self._active:
            self._error(node, path, "recursive alias (a node that contains itself)")
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                self.spans[path] = self._span(node, "mapping")
                if node.tag != _TAG + "map":
                    self._error(node, path, f"unsupported YAML tag '{node.tag}'")
                return self._mapping(node, path)
            self.spans[path] = self._span(node, "sequence")
            if node.tag != _TAG + "seq":
                self._error(node, path, f"unsupported YAML tag '{node.tag}'")
            return [self.construct(item, path + (i,)) for i, item in enumerate(node.value)]
        finally:
            self._active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: DocPath) -> Dict[str, Any]:
        result: Dict[str, Any] = {}
        first_line: Dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self._error(key_node, path, "a mapping key must be a plain value, not a "
                            + ("mapping" if isinstance(key_node, yaml.MappingNode) else "list"))
                continue
            key = key_node.value
            if _SURROGATE_RE.search(key):
                self._error(key_node, path, "invalid character in a mapping key: a lone "
                            "UTF-16 surrogate escape")
                continue
            if key in first_line:
                self._error(key_node, path + (key,),
                            f"duplicate key '{key}' (first defined at line {first_line[key]})")
                continue
            first_line[key] = key_node.start_mark.line + 1
            self.key_spans[path + (key,)] = self._span(key_node, "scalar")
            result[key] = self.construct(value_node, path + (key,))
        return result

    def _scalar(self, node: yaml.ScalarNode, path: DocPath) -> Any:
        tag, value = node.tag, node.value
        if _SURROGATE_RE.search(value):
            self._error(node, path, "invalid character: a lone UTF-16 surrogate escape")
            return None
        if tag == _TAG + "str":
            return value
        if tag == _TAG + "null":
            return None
        if tag == _TAG + "bool" and _BOOL_RE.match(value):
            return value.lower() == "true"
        if tag == _TAG + "int" and _INT_RE.match(value):
            if value.startswith("0o"):
                return int(value[2:], 8)
            if value.startswith("0x"):
                return int(value[2:], 16)
            return int(value, 10)
        if tag == _TAG + "float" and (_FLOAT_RE.match(value) or _INT_RE.match(value)):
            lowered = value.lower()
            if lowered.endswith(".inf"):
                return -math.inf if lowered.startswith("-") else math.inf
            if lowered == ".nan":
                return math.nan
            if value.startswith(("0o", "0x")):
                return float(self._scalar_int(value))
            return float(value)
        if tag in (_TAG + "bool", _TAG + "int", _TAG + "float"):
            self._error(node, path, f"cannot read '{value}' as {tag.replace(_TAG, '!!')}")
            return None
        self._error(node, path, f"unsupported YAML tag '{tag.replace(_TAG, '!!')}'")
        return None

    @staticmethod
    def _scalar_int(value: str) -> int:
        return int(value[2:], 8) if value.startswith("0o") else int(value[2:], 16)


def load_yaml_text(text: str, file: str) -> LocatedDocument:
    """Parse ``text`` (one YAML document) into a :class:`LocatedDocument`.

    ``file`` is the name diagnostics give. Raises :class:`YamlError` for
    syntax errors (located at PyYAML's problem mark), tab indentation,
    duplicate keys (at the second key, naming the first's line), non-scalar
    keys, unsupported tags, recursive aliases, more than one document, an
    empty document (no node, or an empty ``---``), and documents that expand
    past :data:`MAX_NODES` nodes or nest too deeply.
    """
    node = None
    try:
        # libyaml composes ~4-5x faster; any problem is re-parsed by the
        # pure-Python loader below so that diagnostics stay identical
        fast = _FastCoreLoader(text)
        try:
            node = fast.get_single_node()
        finally:
            fast.dispose()
    except (yaml.YAMLError, RecursionError):
        node = None
    try:
        if node is None:
            loader = _CoreLoader(text)
            try:
                node = loader.get_single_node()
            finally:
                loader.dispose()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise YamlError([Diagnostic(file, line, column, (), _syntax_message(err))]) from None
    except yaml.reader.ReaderError as err:
        line, column = _line_column(text, err.position)
        char = err.character if isinstance(err.character, int) else ord(str(err.character)[:1] or "\0")
        raise YamlError([Diagnostic(
            file, line, column, (),
            f"character U+{char:04X} is not allowed in YAML ({err.reason})")]) from None
    except yaml.YAMLError as err:  # pragma: no cover - any other PyYAML error
        raise YamlError([Diagnostic(file, 1, 1, (), f"invalid YAML: {err}")]) from None
    except RecursionError:
        raise YamlError([Diagnostic(file, 1, 1, (), "YAML nesting too deep")]) from None

    if node is None or (isinstance(node, yaml.ScalarNode) and node.tag == _TAG + "null"
                        and node.value == "" and not node.style):
        raise YamlError([Diagnostic(
            file, 1, 1, (), "empty document (the file holds no YAML value)")])

    constructor = _Constructor(file, text)
    try:
        value = constructor.construct(node, ())
    except _TooLarge:
        raise YamlError([Diagnostic(file, 1, 1, (),
                                    f"document too large (more than {MAX_NODES} nodes "
                                    "after expanding aliases)")]) from None
    except RecursionError:
        raise YamlError([Diagnostic(file, 1, 1, (), "YAML nesting too deep")]) from None
    if constructor.diagnostics:
        raise YamlError(constructor.diagnostics)
    return LocatedDocument(file, value, constructor.spans, constructor.key_spans)


def load_yaml_file(path: str, display: Optional[str] = None) -> LocatedDocument:
    """Read and parse the YAML file at ``path`` (UTF-8, optional BOM).

    ``display`` is the file name diagnostics give (default: ``path``). Raises
    :class:`YamlError`: as :func:`load_yaml_text`, plus a file that cannot be
    read (missing, a directory, no permission: at ``FILE:1:1``) or is not
    valid UTF-8 (at the first bad byte).
    """
    display = path if display is None else display
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as err:
        reason = err.strerror or str(err)
        reason = reason[:1].lower() + reason[1:]
        raise YamlError([Diagnostic(display, 1, 1, (), f"cannot read the file: {reason}")]) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        start = err.start
        line = data.count(b"\n", 0, start) + 1
        line_start = data.rfind(b"\n", 0, start) + 1
        column = len(data[line_start:start].decode("utf-8", "replace")) + 1
        raise YamlError([Diagnostic(
            display, line, column, (),
            f"the file is not valid UTF-8 (byte 0x{data[start]:02x})")]) from None
    return load_yaml_text(text, display)
