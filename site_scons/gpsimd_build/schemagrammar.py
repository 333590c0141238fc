"""The PyTorch op-schema language, syntax only: a tokenizer that gives
every token its 1-based column and a recursive-descent parser from a
schema's text to a raw tree with columns (:func:`parse_raw`), over the
whole of PyTorch's type language, so that ``gpsimd_build.opschema`` can say
*what* the device cannot run rather than report a syntax error. Errors are
:class:`OpSchemaError` (``kind`` ``"syntax"`` here; ``"unsupported"`` is
the validation's, in ``gpsimd_build.opschema``).

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

This module is SCons-free and uses only the standard library.
"""

from __future__ import annotations

import difflib
import re
from typing import List, NamedTuple, Optional, Tuple

from .schematypes import (FOREIGN_TYPES, PYTORCH_TYPES, SUPPORTED_TEXT, SUPPORTED_TYPES,
                          OpSchemaError)

__all__ = ["IDENT_RE", "RawType", "RawArg", "RawMarker", "RawReturn", "RawSchema", "parse_raw"]

_CONTAINERS = frozenset({"Dict", "Future", "RRef", "Await", "Union", "Tuple"})
_TYPE_VARIABLE = re.compile(r"t[0-9]*\Z")  # PyTorch's type variables: t, t1, t2 ...
_MAX_DEPTH = 16  # nesting of types / default lists, to bound the recursion

# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------

IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
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
        m = IDENT_RE.match(text, i)
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


class RawType(NamedTuple):
    text: str  # canonical PyTorch spelling, e.g. "int[1]?", "Tensor(a!)"
    column: int
    base: str  # "Tensor", "long long", "Dict", "(tuple)", ...
    has_params: bool
    lists: bool  # any [] / [N]
    optional: bool  # any ?
    alias: Optional[str]  # first alias annotation, e.g. "(a!)"


class RawArg(NamedTuple):
    index: int  # 1-based, counting real arguments only
    type: RawType
    name: str
    name_column: int
    default: Optional[str]  # e.g. "=1"
    default_column: int


class RawMarker(NamedTuple):
    text: str  # "*" or "..."
    column: int


class RawReturn(NamedTuple):
    type: RawType
    name: Optional[str]


class RawSchema(NamedTuple):
    namespace: Optional[str]
    name: str
    name_column: int
    overload: Optional[str]
    items: Tuple[object, ...]  # RawArg | RawMarker
    returns: Tuple[RawReturn, ...]
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

    def schema(self) -> RawSchema:
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
                arguments += isinstance(item, RawArg)
                items.append(item)
                if self.accept(","):
                    continue
                if self.at(")"):
                    break
                after = f"argument '{item.name}'" if isinstance(item, RawArg) else f"'{item.text}'"
                raise self.fail(f"',' or ')' after {after}")
        self.advance()  # ")"
        self.expect("->", "'->' and the return type after the argument list")
        returns_column = self.peek().column
        returns: List[RawReturn] = []
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
        return RawSchema(namespace, name_tok.text, name_tok.column, overload, tuple(items), tuple(returns), returns_column)

    def arg_item(self, index: int) -> object:
        for marker in ("*", "..."):
            if self.at(marker):
                return RawMarker(marker, self.advance().column)
        tok = self.peek()
        if tok.kind == IDENT and self.peek(1).kind == PUNCT and self.peek(1).text in (",", ")", "="):
            if not self.known_type(tok.text):
                raise OpSchemaError(
                    f"argument {index} '{tok.text}' has no type; write '<type> {tok.text}' "
                    f"with one of {SUPPORTED_TEXT}",
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
        return RawArg(index, type_, name_tok.text, name_tok.column, default, default_column)

    def return_(self, in_list: bool) -> RawReturn:
        type_ = self.type_("a return type" if in_list else "a return type after '->'", 0)
        name = self.advance().text if self.peek().kind == IDENT else None
        return RawReturn(type_, name)

    # -- types --------------------------------------------------------------

    @staticmethod
    def known_type(name: str) -> bool:
        return (
            name in SUPPORTED_TYPES
            or name in PYTORCH_TYPES
            or name in FOREIGN_TYPES
            or name == "__torch__"
            or bool(_TYPE_VARIABLE.match(name))
        )

    def type_(self, expected: str, depth: int) -> RawType:
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
        return RawType(text, tok.column, base, has_params, lists, optional, alias)

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
        message = f"unknown type '{name}'; supported types are {SUPPORTED_TEXT}"
        nxt = self.peek()
        if nxt.kind == IDENT and nxt.text in SUPPORTED_TYPES:
            return message + f"; write the type before the name ('{nxt.text} {name}')"
        candidates = list(SUPPORTED_TYPES) + list(PYTORCH_TYPES) + list(FOREIGN_TYPES)
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


def parse_raw(text: str) -> RawSchema:
    """The raw tree of the schema ``text`` (module text).

    Raises:
        OpSchemaError: ``kind == "syntax"``, with the column.
    """
    return _Parser(text).schema()
