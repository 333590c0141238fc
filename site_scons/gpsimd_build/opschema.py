"""The op-schema grammar: parse PyTorch-style op schemas for the device ABI.

An op of a GPSIMD custom-op library is declared by a PyTorch schema string::

    my_ops::axpy(Tensor x, Tensor y, Scalar alpha) -> Tensor
    ns::scale(Tensor x, float s, int n, long long k) -> Tensor

The shipped driver split such strings on ``', '`` and ``' '``
(the Neuron SDK's build driver, build_custom_op.py), so it broke on any other
spacing and could not read ``long long`` although its code generator
supports it (ARCHITECTURE.md "The generated wrapper").  This module is
a real parser instead: a tokenizer that gives every token its 1-based column,
then a recursive-descent parser over the grammar below, then a validation
pass that keeps only what the device ABI can express (docs/kernel-api.md
"The kernel's signature").

The grammar accepts the whole PyTorch schema type language, so that a valid
PyTorch schema that the device cannot run gets a message saying *what* is
not supported and what to use instead, rather than a syntax error.

Grammar (EBNF; tokens may be separated by any ASCII whitespace, including
newlines and tabs, or by none where two tokens would not merge)::

    schema        = [ namespace "::" ] op_name [ "." overload ]
                    "(" [ arg_item { "," arg_item } ] ")"
                    "->" returns EOF ;
    namespace     = IDENT ;
    op_name       = IDENT ;
    overload      = IDENT ;
    arg_item      = "*"                          (* keyword-only marker *)
                  | "..."                        (* varargs *)
                  | type IDENT [ "=" default ] ;
    returns       = "(" [ return { "," return } ] ")"
                  | return ;
    return        = type [ IDENT ] ;
    type          = base_type { alias | "[" [ NUMBER ] "]" | "?" } ;
    base_type     = "long" "long"
                  | CONTAINER "(" [ type { "," type } ] ")"
                  | "(" [ type { "," type } ] ")"        (* tuple type *)
                  | "__torch__" { "." IDENT }            (* custom class *)
                  | IDENT ;
    alias         = "(" alias_set [ "!" ] [ "->" alias_set ] ")" ;
    alias_set     = alias_name { "|" alias_name } ;
    alias_name    = IDENT | "*" ;
    default       = [ "-" ] ( NUMBER | IDENT ) | STRING
                  | "[" [ default { "," default } ] "]" ;

    IDENT     = ( letter | "_" ) { letter | digit | "_" } ;   (* ASCII *)
    NUMBER    = digit { digit } [ "." digit { digit } ]
                [ ( "e" | "E" ) [ "+" | "-" ] digit { digit } ] ;
    STRING    = '"' { char } '"' | "'" { char } "'" ;        (* \\ escapes *)
    CONTAINER = "Dict" | "Future" | "RRef" | "Await" | "Union" | "Tuple" ;

In a ``return`` the only ``(`` after the type opens an alias annotation
(``Tensor(a)``); directly after ``->`` a ``(`` opens the return list, so
``-> (Tensor)`` is one return and ``-> ()`` is none.

What the device ABI accepts (the validation pass):

* the namespace is OPTIONAL: ``schema.namespace`` is ``None`` when absent.
  The old driver required ``::`` and then discarded the namespace; the
  code generator never uses it.  Whether a manifest must give one is decided
  by the manifest loader, not here.
* argument types are exactly ``SUPPORTED_TYPES``: ``Tensor``,
  ``Scalar``, ``int``, ``float``, ``long long``; no optionals, lists,
  alias annotations, default values, ``*`` or ``...``;
* exactly one return, a plain ``Tensor`` (the driver's "only a single
  return value", "only Tensor return types"); it may be named (``-> Tensor out``);
* argument names are unique and are not C++ keywords; the op name is not a
  C++ keyword, does not clash with a name the generated wrapper.cpp uses,
  and is shorter than ``MAX_NAME_LENGTH`` (32) characters.

Errors are ``OpSchemaError`` with a 1-based column into the original string
(a newline counts as one character) and a kind: ``"syntax"`` when the text is
not a well-formed schema (bad token order, unknown type, duplicate argument
names), ``"unsupported"`` when it is a well-formed PyTorch schema using
something the device ABI cannot express.  A syntax error anywhere is reported
before any unsupported feature.

The canonical text of an accepted schema (``str(schema)``) is
``ns::name.overload(Tensor x, long long k) -> Tensor``: ``ns::`` and
``.overload`` only if present, ``", "`` between arguments, ``" -> "``, and a
single return without parentheses.  ``parse(str(s)) == s`` for every parsed
``s`` (checked on every parse, the way torchgen's model.py keeps its grammar
honest).

This module is SCons-free and uses only the standard library.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Tuple

from gpsimd_device import limits as _limits

__all__ = [
    "SUPPORTED_TYPES",
    "MAX_NAME_LENGTH",
    "CPP_KEYWORDS",
    "WRAPPER_RESERVED_NAMES",
    "SYNTAX",
    "UNSUPPORTED",
    "Argument",
    "Return",
    "OpSchema",
    "OpSchemaError",
    "parse_schema",
]

#: The argument types of the device ABI, in the order of the Neuron SDK's
#: build driver's map (Tensor -> const at::Tensor&, Scalar -> const
#: at::Scalar&, int, float, long long; docs/kernel-api.md "The kernel's signature").
SUPPORTED_TYPES: Tuple[str, ...] = ("Tensor", "Scalar", "int", "float", "long long")

#: Op names must be SHORTER than this (the Neuron SDK's build driver, build_custom_op.py: the driver
#: raises "CustomOp function name is too long ... Must be less than 32
#: characters." when ``len(funcname) >= 32``; docs/kernel-api.md, Limits).
MAX_NAME_LENGTH = _limits.MAX_NAME_LENGTH

#: ``OpSchemaError.kind`` of a text that is not a well-formed schema.
SYNTAX = "syntax"
#: ``OpSchemaError.kind`` of a well-formed PyTorch schema the device ABI
#: cannot express.
UNSUPPORTED = "unsupported"

#: C++ keywords and alternative tokens (C++20): none may name an argument or
#: an op, because the kernel is declared as a C++ function
#: ``at::Tensor <op>(<type> <arg>, ...)`` (the Neuron SDK's build driver, build_custom_op.py).
CPP_KEYWORDS = frozenset(
    """
    alignas alignof and and_eq asm auto bitand bitor bool break case catch
    char char8_t char16_t char32_t class compl concept const consteval
    constexpr constinit const_cast continue co_await co_return co_yield
    decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long mutable namespace
    new noexcept not not_eq nullptr operator or or_eq private protected
    public register reinterpret_cast requires return short signed sizeof
    static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using
    virtual void volatile wchar_t while xor xor_eq
    """.split()
)

#: Names an op may not have because the generated wrapper.cpp already uses
#: them at global scope (ARCHITECTURE.md "The generated wrapper": the local ``output``
#: that receives the kernel's result, the registration trio, the stack-switch
#: pieces, the namespaces of the kernel headers).
WRAPPER_RESERVED_NAMES = frozenset(
    """
    output get_func_cnt get_func_name get_func_ptr register_funcs
    switched_stack switchBack switch_stack_or_call_wrapper wrapper_fn
    get_dst_tensor get_cpu_id get_cpu_count at c10 torch std main
    """.split()
)

_SUPPORTED_TEXT = ", ".join(SUPPORTED_TYPES)

# Types of PyTorch's schema language that the device ABI does not have,
# with what to use instead (None: there is no device equivalent).
_PYTORCH_TYPES = {
    "bool": "use 'int' (0 or 1) instead",
    "SymInt": "use 'int' or 'long long' instead",
    "SymFloat": "use 'float' instead",
    "SymBool": "use 'int' (0 or 1) instead",
    "number": "use 'Scalar' instead",
    "complex": None,
    "str": None,
    "ScalarType": None,
    "Layout": None,
    "Device": None,
    "DeviceIndex": "use 'int' instead",
    "MemoryFormat": None,
    "Generator": None,
    "Dimname": None,
    "Storage": None,
    "Stream": None,
    "QScheme": None,
    "ConstQuantizerPtr": None,
    "Any": None,
    "AnyClassType": None,
    "AnyEnumType": None,
    "NoneType": None,
    "Capsule": None,
    "Dict": None,
    "Future": None,
    "RRef": None,
    "Await": None,
    "Union": None,
    "Tuple": None,
}

# C/C++/numpy spellings people write in a schema (the public docs describe
# double/int64_t at the Python level; docs/kernel-api.md "The kernel's signature").
_FOREIGN_TYPES = {
    "double": "float",
    "int64_t": "long long",
    "int32_t": "int",
    "long": "long long",
    "float32": "float",
    "float64": "float",
    "int32": "int",
    "int64": "long long",
}

_CONTAINERS = frozenset({"Dict", "Future", "RRef", "Await", "Union", "Tuple"})
_TYPE_VARIABLE = re.compile(r"t[0-9]*\Z")  # PyTorch's type variables: t, t1, t2 ...
_MAX_DEPTH = 16  # nesting of types / default lists, to bound the recursion


class OpSchemaError(ValueError):
    """A schema the device build cannot use.

    Attributes:
        message: what is wrong, without the position.
        column: 1-based character index into the original schema text (a
            newline counts as one character); ``len(text) + 1`` means "at
            the end of the schema".
        kind: ``"syntax"`` (not a well-formed schema) or ``"unsupported"``
            (well-formed PyTorch, but the device ABI cannot express it).

    ``str(err)`` is ``"column N: message"``.
    """

    def __init__(self, message: str, column: int, kind: str = SYNTAX) -> None:
        if kind not in (SYNTAX, UNSUPPORTED):
            raise ValueError(f"OpSchemaError kind must be {SYNTAX!r} or {UNSUPPORTED!r}, not {kind!r}")
        super().__init__(message, column, kind)
        self.message = message
        self.column = column
        self.kind = kind

    def __str__(self) -> str:
        return f"column {self.column}: {self.message}"


# ---------------------------------------------------------------------------
# The typed model (what the rest of the build sees)
# ---------------------------------------------------------------------------


def _check_identifier(what: str, name: object) -> None:
    if not isinstance(name, str) or not _IDENT_RE.fullmatch(name):
        raise ValueError(f"{what} must be an identifier, not {name!r}")


@dataclass(frozen=True)
class Argument:
    """One argument of an accepted schema: ``Argument("long long", "k")``.

    ``type`` is one of ``SUPPORTED_TYPES``; ``name`` an identifier that is not
    a C++ keyword.  Constructing one that breaks these rules raises
    ``ValueError``.
    """

    type: str
    name: str

    def __post_init__(self) -> None:
        if self.type not in SUPPORTED_TYPES:
            raise ValueError(f"argument type must be one of {_SUPPORTED_TEXT}, not {self.type!r}")
        _check_identifier("argument name", self.name)
        if self.name in CPP_KEYWORDS:
            raise ValueError(f"argument name {self.name!r} is a reserved C++ keyword")

    def __str__(self) -> str:
        return f"{self.type} {self.name}"


@dataclass(frozen=True)
class Return:
    """The return of an accepted schema: always ``type == "Tensor"``.

    ``name`` is ``None`` unless the schema names it (``-> Tensor out``).
    Constructing one that breaks these rules raises ``ValueError``.
    """

    type: str
    name: Optional[str]

    def __post_init__(self) -> None:
        if self.type != "Tensor":
            raise ValueError(f"the device ABI returns a Tensor, not {self.type!r}")
        if self.name is not None:
            _check_identifier("return name", self.name)

    def __str__(self) -> str:
        return self.type if self.name is None else f"{self.type} {self.name}"


@dataclass(frozen=True)
class OpSchema:
    """An op schema the device ABI can express.

    ``namespace`` is ``None`` when the schema has no ``ns::`` (the grammar
    makes it optional; see the module docstring), ``overload`` is ``None``
    without ``.overload``.  ``arguments`` and ``returns`` are tuples; there is
    exactly one return.  ``str(schema)`` is the canonical text, and
    ``OpSchema.parse(str(schema)) == schema``.

    Constructing one directly that breaks the device rules (no or several
    returns, duplicate argument names, a bad op name) raises ``ValueError``.
    """

    namespace: Optional[str]
    name: str
    overload: Optional[str]
    arguments: Tuple[Argument, ...]
    returns: Tuple[Return, ...]

    def __post_init__(self) -> None:
        if self.namespace is not None:
            _check_identifier("namespace", self.namespace)
        _check_identifier("op name", self.name)
        if self.name in CPP_KEYWORDS or self.name in WRAPPER_RESERVED_NAMES:
            raise ValueError(f"op name {self.name!r} is reserved")
        if len(self.name) >= MAX_NAME_LENGTH:
            raise ValueError(f"op name {self.name!r} must be less than {MAX_NAME_LENGTH} characters")
        if self.overload is not None:
            _check_identifier("overload name", self.overload)
        if not isinstance(self.arguments, tuple) or not all(isinstance(a, Argument) for a in self.arguments):
            raise ValueError("arguments must be a tuple of Argument")
        if not isinstance(self.returns, tuple) or not all(isinstance(r, Return) for r in self.returns):
            raise ValueError("returns must be a tuple of Return")
        if len(self.returns) != 1:
            raise ValueError(f"the device ABI returns exactly one Tensor, not {len(self.returns)} returns")
        names = [a.name for a in self.arguments]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate argument names in {names}")

    @classmethod
    def parse(cls, text: str) -> "OpSchema":
        """Parse ``text`` (see the grammar in the module docstring).

        Raises:
            OpSchemaError: with ``kind == "syntax"`` if ``text`` is not a
                well-formed schema, ``kind == "unsupported"`` if it is valid
                PyTorch that the device ABI cannot express (a type outside
                ``SUPPORTED_TYPES``, a default value, ``*``, not exactly one
                ``Tensor`` return, an op name of ``MAX_NAME_LENGTH`` or more
                characters: the Neuron SDK's build driver, build_custom_op.py).
            TypeError: if ``text`` is not a ``str``.
        """
        schema = _parse(text)
        # torchgen's habit: the canonical text must parse back to the same
        # schema; a failure here is a bug in this module, not in the input.
        again = _parse(str(schema))
        assert again == schema and str(again) == str(schema), (text, str(schema))
        return schema

    def __str__(self) -> str:
        head = self.name if self.namespace is None else f"{self.namespace}::{self.name}"
        if self.overload is not None:
            head += f".{self.overload}"
        args = ", ".join(str(a) for a in self.arguments)
        if len(self.returns) == 1:
            rets = str(self.returns[0])
        else:
            rets = "(" + ", ".join(str(r) for r in self.returns) + ")"
        return f"{head}({args}) -> {rets}"


def parse_schema(text: str) -> OpSchema:
    """Parse an op schema string; the same as ``OpSchema.parse(text)``.

    Raises:
        OpSchemaError: ``kind`` ``"syntax"`` or ``"unsupported"``; see
            ``OpSchema.parse``.
        TypeError: if ``text`` is not a ``str``.
    """
    return OpSchema.parse(text)


# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER_RE = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_WORD_TAIL_RE = re.compile(r"[A-Za-z0-9_]+")
_WHITESPACE = " \t\n\r\f\v"
_PUNCTUATION = ("...", "::", "->", "(", ")", ",", ".", "?", "[", "]", "!", "*", "=", "|", "-", ":")

IDENT, NUMBER, STRING, PUNCT, BAD, EOF = "ident", "number", "string", "punct", "bad", "eof"


class _Token(NamedTuple):
    kind: str
    text: str
    column: int  # 1-based
    end: int  # 0-based index just past the token

    def shown(self) -> str:
        return "end of schema" if self.kind == EOF else f"'{self.text}'"


def _tokenize(text: str) -> List[_Token]:
    tokens: List[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _WHITESPACE:
            i += 1
            continue
        m = _IDENT_RE.match(text, i)
        if m:
            tokens.append(_Token(IDENT, m.group(), i + 1, m.end()))
            i = m.end()
            continue
        m = _NUMBER_RE.match(text, i)
        if m:
            end, kind = m.end(), NUMBER
            tail = _WORD_TAIL_RE.match(text, end)
            if tail:  # "2x": one bad token, not "2" then "x"
                end, kind = tail.end(), BAD
            tokens.append(_Token(kind, text[i:end], i + 1, end))
            i = end
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise OpSchemaError("unterminated string literal", i + 1)
            tokens.append(_Token(STRING, text[i : j + 1], i + 1, j + 1))
            i = j + 1
            continue
        for p in _PUNCTUATION:
            if text.startswith(p, i):
                tokens.append(_Token(PUNCT, p, i + 1, i + len(p)))
                i += len(p)
                break
        else:
            raise OpSchemaError(_unexpected_character(c), i + 1)
    tokens.append(_Token(EOF, "", n + 1, n))
    return tokens


def _unexpected_character(c: str) -> str:
    if c.isascii() and c.isprintable():
        message = f"unexpected character {c!r}"
    else:
        message = f"unexpected character {c!r} (U+{ord(c):04X})"
    if c == "&":
        message += "; a schema names types without C++ references (write 'Tensor x', not 'const at::Tensor& x')"
    return message


# ---------------------------------------------------------------------------
# Parser (syntax only): text -> raw tree with columns
# ---------------------------------------------------------------------------


class _RawType(NamedTuple):
    text: str  # canonical PyTorch spelling, e.g. "int[1]?", "Tensor(a!)"
    column: int
    base: str  # "Tensor", "long long", "Dict", "(tuple)", ...
    has_params: bool
    lists: bool  # any [] / [N]
    optional: bool  # any ?
    alias: Optional[str]  # first alias annotation, e.g. "(a!)"


class _RawArg(NamedTuple):
    index: int  # 1-based, counting real arguments only
    type: _RawType
    name: str
    name_column: int
    default: Optional[str]  # e.g. "=1"
    default_column: int


class _RawMarker(NamedTuple):
    text: str  # "*" or "..."
    column: int


class _RawReturn(NamedTuple):
    type: _RawType
    name: Optional[str]


class _RawSchema(NamedTuple):
    namespace: Optional[str]
    name: str
    name_column: int
    overload: Optional[str]
    items: Tuple[object, ...]  # _RawArg | _RawMarker
    returns: Tuple[_RawReturn, ...]
    returns_column: int


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    # -- token helpers ------------------------------------------------------

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        tok = self.peek()
        if tok.kind != EOF:
            self.pos += 1
        return tok

    def at(self, punct: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind == PUNCT and tok.text == punct

    def accept(self, punct: str) -> Optional[_Token]:
        return self.advance() if self.at(punct) else None

    def fail(self, expected: str, tok: Optional[_Token] = None) -> OpSchemaError:
        tok = tok or self.peek()
        return OpSchemaError(f"expected {expected}, found {tok.shown()}", tok.column)

    def expect(self, punct: str, expected: str) -> _Token:
        if not self.at(punct):
            raise self.fail(expected)
        return self.advance()

    def ident(self, expected: str) -> _Token:
        if self.peek().kind != IDENT:
            raise self.fail(expected)
        return self.advance()

    # -- schema -------------------------------------------------------------

    def schema(self) -> _RawSchema:
        namespace = None
        if self.peek().kind == IDENT and self.at("::", 1):
            namespace = self.advance().text
            self.advance()
        elif self.peek().kind == IDENT and self.at(":", 1):
            raise self.fail(f"'::' after namespace '{self.peek().text}'", self.peek(1))
        name_tok = self.ident("an op name" if namespace is None else f"an op name after '{namespace}::'")
        overload = None
        head = name_tok.text
        if self.accept("."):
            overload = self.ident(f"an overload name after '{name_tok.text}.'").text
            head += f".{overload}"
        self.expect("(", f"'(' after op name '{head}'")
        items: List[object] = []
        arguments = 0  # counted as they come: a sum over items would be quadratic
        if not self.at(")"):
            while True:
                item = self.arg_item(arguments + 1)
                arguments += isinstance(item, _RawArg)
                items.append(item)
                if self.accept(","):
                    continue
                if self.at(")"):
                    break
                after = f"argument '{item.name}'" if isinstance(item, _RawArg) else f"'{item.text}'"
                raise self.fail(f"',' or ')' after {after}")
        self.advance()  # ")"
        self.expect("->", "'->' and the return type after the argument list")
        returns_column = self.peek().column
        returns: List[_RawReturn] = []
        if self.accept("("):
            if not self.at(")"):
                while True:
                    ret = self.return_(in_list=True)
                    returns.append(ret)
                    if self.accept(","):
                        continue
                    if self.at(")"):
                        break
                    after = f"return '{ret.name}'" if ret.name else f"return type '{ret.type.text}'"
                    raise self.fail(f"',' or ')' after {after}")
            self.advance()  # ")"
        else:
            returns.append(self.return_(in_list=False))
        if self.peek().kind != EOF:
            raise self.fail("end of schema after the return")
        return _RawSchema(namespace, name_tok.text, name_tok.column, overload, tuple(items), tuple(returns), returns_column)

    def arg_item(self, index: int) -> object:
        for marker in ("*", "..."):
            if self.at(marker):
                return _RawMarker(marker, self.advance().column)
        tok = self.peek()
        if tok.kind == IDENT and self.peek(1).kind == PUNCT and self.peek(1).text in (",", ")", "="):
            if not self.known_type(tok.text):
                raise OpSchemaError(
                    f"argument {index} '{tok.text}' has no type; write '<type> {tok.text}' "
                    f"with one of {_SUPPORTED_TEXT}",
                    tok.column,
                )
        type_ = self.type_("a type", 0)
        name_tok = self.ident(f"an argument name after type '{type_.text}'")
        default, default_column = None, 0
        eq = self.accept("=")
        if eq:
            default_column = eq.column
            start = eq.column - 1
            self.default(0)
            end = self.tokens[self.pos - 1].end
            default = " ".join(self.text[start:end].split())
        return _RawArg(index, type_, name_tok.text, name_tok.column, default, default_column)

    def return_(self, in_list: bool) -> _RawReturn:
        type_ = self.type_("a return type" if in_list else "a return type after '->'", 0)
        name = self.advance().text if self.peek().kind == IDENT else None
        return _RawReturn(type_, name)

    # -- types --------------------------------------------------------------

    @staticmethod
    def known_type(name: str) -> bool:
        return (
            name in SUPPORTED_TYPES
            or name in _PYTORCH_TYPES
            or name in _FOREIGN_TYPES
            or name == "__torch__"
            or bool(_TYPE_VARIABLE.match(name))
        )

    def type_(self, expected: str, depth: int) -> _RawType:
        tok = self.peek()
        if depth > _MAX_DEPTH:
            raise OpSchemaError(f"types nested more than {_MAX_DEPTH} deep", tok.column)
        has_params = False
        if self.at("("):  # tuple type: (int, Tensor)
            base = "(tuple)"
            text = "(" + ", ".join(self.type_list(depth, "a tuple type")) + ")"
            has_params = True
        elif tok.kind == IDENT:
            self.advance()
            base = text = tok.text
            if tok.text == "long" and self.peek().kind == IDENT and self.peek().text == "long":
                self.advance()
                base = text = "long long"
            elif tok.text in _CONTAINERS and self.at("("):
                text += "(" + ", ".join(self.type_list(depth, f"type '{tok.text}'")) + ")"
                has_params = True
            elif tok.text == "__torch__":
                while self.accept("."):
                    text += "." + self.ident(f"a class name after '{text}.'").text
            elif not self.known_type(tok.text):
                raise OpSchemaError(self.unknown_type_message(tok.text), tok.column)
        else:
            raise self.fail(expected)
        lists = optional = False
        alias: Optional[str] = None
        while True:
            if self.at("("):
                annotation = self.alias()
                alias = alias or annotation
                text += annotation
            elif self.accept("["):
                size = self.advance().text if self.peek().kind == NUMBER else ""
                self.expect("]", f"']' to close '[{size}' in type '{text}'" if size else f"a list size or ']' after '{text}['")
                text += f"[{size}]"
                lists = True
            elif self.accept("?"):
                text += "?"
                optional = True
            else:
                break
        return _RawType(text, tok.column, base, has_params, lists, optional, alias)

    def type_list(self, depth: int, what: str) -> List[str]:
        self.advance()  # "("
        types: List[str] = []
        if not self.at(")"):
            while True:
                types.append(self.type_("a type", depth + 1).text)
                if self.accept(","):
                    continue
                if self.at(")"):
                    break
                raise self.fail(f"',' or ')' in the parameters of {what}")
        self.advance()  # ")"
        return types

    def unknown_type_message(self, name: str) -> str:
        message = f"unknown type '{name}'; supported types are {_SUPPORTED_TEXT}"
        nxt = self.peek()
        if nxt.kind == IDENT and nxt.text in SUPPORTED_TYPES:
            return message + f"; write the type before the name ('{nxt.text} {name}')"
        candidates = list(SUPPORTED_TYPES) + list(_PYTORCH_TYPES) + list(_FOREIGN_TYPES)
        by_lower = {c.lower().replace(" ", ""): c for c in SUPPORTED_TYPES}
        guess = by_lower.get(name.lower())
        if guess is None:
            close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
            guess = close[0] if close else None
        if guess is not None:
            message += f"; did you mean '{guess}'?"
        return message

    def alias(self) -> str:
        self.advance()  # "("
        before = self.alias_set()
        text = "(" + before
        if self.accept("!"):
            text += "!"
        if self.accept("->"):
            text += " -> " + self.alias_set()
        self.expect(")", "')' to close the alias annotation")
        return text + ")"

    def alias_set(self) -> str:
        names = [self.alias_name()]
        while self.accept("|"):
            names.append(self.alias_name())
        return "|".join(names)

    def alias_name(self) -> str:
        if self.peek().kind == IDENT or self.at("*"):
            return self.advance().text
        raise self.fail("an alias set name (like 'a' or '*') in the alias annotation")

    # -- default values -----------------------------------------------------

    def default(self, depth: int) -> None:
        tok = self.peek()
        if depth > _MAX_DEPTH:
            raise OpSchemaError(f"default value lists nested more than {_MAX_DEPTH} deep", tok.column)
        if self.accept("["):
            if not self.at("]"):
                while True:
                    self.default(depth + 1)
                    if self.accept(","):
                        continue
                    if self.at("]"):
                        break
                    raise self.fail("',' or ']' in the default value list")
            self.advance()  # "]"
        elif self.accept("-"):
            if self.peek().kind not in (NUMBER, IDENT):
                raise self.fail("a number after '-' in the default value")
            self.advance()
        elif tok.kind in (NUMBER, IDENT, STRING):
            self.advance()
        else:
            raise self.fail("a default value after '='" if depth == 0 else "a default value")


# ---------------------------------------------------------------------------
# Validation: raw tree -> OpSchema, or the reason the device cannot run it
# ---------------------------------------------------------------------------


def _parse(text: str) -> OpSchema:
    if not isinstance(text, str):
        raise TypeError(f"an op schema is a str, not {type(text).__name__}")
    raw = _Parser(text).schema()
    args = [i for i in raw.items if isinstance(i, _RawArg)]

    # Well-formedness first: any "syntax" error wins over "unsupported".
    first_index = {}
    for arg in args:
        if arg.name in first_index:
            raise OpSchemaError(
                f"argument {arg.index} '{arg.name}': duplicate argument name "
                f"(argument {first_index[arg.name]} is also named '{arg.name}')",
                arg.name_column,
            )
        first_index[arg.name] = arg.index

    # What the device ABI cannot express, in source order.
    _check_op_name(raw.name, raw.name_column)
    for item in raw.items:
        if isinstance(item, _RawMarker):
            if item.text == "*":
                raise OpSchemaError(
                    "the keyword-only marker '*' is not supported by the device ABI; "
                    "remove it (every argument is positional)",
                    item.column,
                    UNSUPPORTED,
                )
            raise OpSchemaError(
                "variadic arguments '...' are not supported by the device ABI; declare each argument",
                item.column,
                UNSUPPORTED,
            )
        _check_argument(item)
    _check_returns(raw)

    return OpSchema(
        namespace=raw.namespace,
        name=raw.name,
        overload=raw.overload,
        arguments=tuple(Argument(a.type.text, a.name) for a in args),
        returns=tuple(Return(r.type.text, r.name) for r in raw.returns),
    )


def _check_op_name(name: str, column: int) -> None:
    if name in CPP_KEYWORDS:
        raise OpSchemaError(
            f"op name '{name}' is a reserved C++ keyword; the kernel is a C++ function of that name: rename the op",
            column,
            UNSUPPORTED,
        )
    if name in WRAPPER_RESERVED_NAMES:
        raise OpSchemaError(
            f"op name '{name}' clashes with a name the generated wrapper.cpp uses; rename the op",
            column,
            UNSUPPORTED,
        )
    if len(name) >= MAX_NAME_LENGTH:
        raise OpSchemaError(
            f"op name '{name}' is too long ({len(name)} characters); "
            f"CustomOp function names must be less than {MAX_NAME_LENGTH} characters",
            column,
            UNSUPPORTED,
        )


def _type_hint(t: _RawType) -> Optional[str]:
    """What to use instead of an unsupported type (None: nothing to suggest)."""
    if t.lists:
        return "lists are not supported: pass the values in a Tensor"
    if t.base not in SUPPORTED_TYPES:
        if t.base in _FOREIGN_TYPES:
            return f"use '{_FOREIGN_TYPES[t.base]}' instead"
        return _PYTORCH_TYPES.get(t.base)
    if t.optional:
        return f"optional types are not supported (the device has no None): use '{t.base}' and always pass a value"
    if t.alias is not None:
        return (
            f"alias annotations are not supported: use plain '{t.base}' "
            "(a kernel writes its output in place through get_dst_tensor())"
        )
    return None


def _check_argument(arg: _RawArg) -> None:
    where = f"argument {arg.index} '{arg.name}'"
    if arg.type.text not in SUPPORTED_TYPES:
        message = (
            f"{where}: type '{arg.type.text}' is not supported by the device ABI; "
            f"supported types are {_SUPPORTED_TEXT}"
        )
        hint = _type_hint(arg.type)
        raise OpSchemaError(message + (f"; {hint}" if hint else ""), arg.type.column, UNSUPPORTED)
    if arg.name in CPP_KEYWORDS:
        raise OpSchemaError(
            f"{where}: '{arg.name}' is a reserved C++ keyword and cannot name an argument of the kernel; rename it",
            arg.name_column,
            UNSUPPORTED,
        )
    if arg.default is not None:
        raise OpSchemaError(
            f"{where}: default values are not supported by the device ABI; "
            f"remove '{arg.default}' (every argument is passed explicitly)",
            arg.default_column,
            UNSUPPORTED,
        )


def _check_returns(raw: _RawSchema) -> None:
    if not raw.returns:
        raise OpSchemaError(
            "the device ABI returns exactly one Tensor; found no return", raw.returns_column, UNSUPPORTED
        )
    if len(raw.returns) > 1:
        raise OpSchemaError(
            f"the device ABI returns exactly one Tensor; found {len(raw.returns)} returns",
            raw.returns[1].type.column,
            UNSUPPORTED,
        )
    t = raw.returns[0].type
    if t.text != "Tensor":
        message = f"the device ABI returns exactly one Tensor; found return type '{t.text}'"
        if t.base == "Tensor" and t.alias is not None and not t.lists and not t.optional:
            message += (
                f"; remove the alias annotation '{t.alias}' "
                "(a kernel writes its output in place through get_dst_tensor())"
            )
        elif t.base == "Tensor" and t.lists:
            message += "; return a single Tensor"
        elif t.base in ("Scalar", "int", "float", "long long", "bool", "SymInt", "SymFloat", "double", "int64_t"):
            message += "; return the value in a one-element Tensor"
        raise OpSchemaError(message, t.column, UNSUPPORTED)
