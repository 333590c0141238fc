"""Op schemas for the device ABI: parse a PyTorch-style schema
(``gpsimd_build.schemagrammar``, syntax only), then keep what the device
can run (the validation pass, here), as :class:`OpSchema`.

An op of a GPSIMD custom-op library is declared by a PyTorch schema string::

    my_ops::axpy(Tensor x, Tensor y, Scalar alpha) -> Tensor
    ns::scale(Tensor x, float s, int n, long long k) -> Tensor

The shipped driver split such strings on ``', '`` and ``' '``
(the Neuron SDK's build driver, build_custom_op.py), so it broke on any other
spacing and could not read ``long long`` although its code generator
supports it (ARCHITECTURE.md "The generated wrapper").  This module is
a real parser instead: a tokenizer that gives every token its 1-based column,
then a recursive-descent parser over the grammar (``gpsimd_build.schemagrammar``),
then a validation pass that keeps only what the device ABI can express (docs/kernel-api.md
"The kernel's signature").

The grammar accepts the whole PyTorch schema type language, so that a valid
PyTorch schema that the device cannot run gets a message saying *what* is
not supported and what to use instead, rather than a syntax error.

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

from dataclasses import dataclass
from typing import Iterable, Optional, Tuple

from gpsimd_device import limits as _limits

from .schemagrammar import IDENT_RE, RawArg, RawMarker, RawSchema, RawType, parse_raw
from .schematypes import (FOREIGN_TYPES, PYTORCH_TYPES, SUPPORTED_TEXT, SUPPORTED_TYPES,
                          SYNTAX, UNSUPPORTED, OpSchemaError)

__all__ = [
    "SUPPORTED_TYPES",
    "MAX_NAME_LENGTH",
    "CPP_KEYWORDS",
    "WRAPPER_RESERVED_NAMES",
    "WRAPPER_SUFFIXES",
    "wrapper_clash",
    "reserved_clash",
    "reserved_text",
    "SYNTAX",
    "UNSUPPORTED",
    "Argument",
    "Return",
    "OpSchema",
    "OpSchemaError",
    "parse_schema",
]


#: Op names must be SHORTER than this (the Neuron SDK's build driver, build_custom_op.py: the driver
#: raises "CustomOp function name is too long ... Must be less than 32
#: characters." when ``len(funcname) >= 32``; docs/kernel-api.md, Limits).
MAX_NAME_LENGTH = _limits.MAX_NAME_LENGTH


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
#: pieces, the namespaces of the kernel headers), and every name that
#: ``neuron/wrapper_api.h`` and ``stack_switch.hpp`` declare or define as a
#: macro (the wrapper includes them, a kernel need not: ``customop_next_tensor``
#: is a macro of no parameters there, ``STACK_SIZE`` a number);
#: tests/unit/test_opschema.py reads both headers against this set.
WRAPPER_RESERVED_NAMES = frozenset(
    """
    output get_func_cnt get_func_name get_func_ptr register_funcs
    switched_stack switchBack switch_stack_or_call_wrapper wrapper_fn
    get_dst_tensor get_cpu_id get_cpu_count at c10 torch std main
    customop_setup customop_next_tensor customop_next_scalar customop_next_int
    customop_next_longlong customop_next_float customop_return_tensor customop_cleanup
    customop_setup_tagged customop_next_tensor_tagged customop_next_scalar_tagged
    customop_next_int_tagged customop_next_longlong_tagged customop_next_float_tagged
    STACK_SIZE GPSIMD_STACK_SWITCH_HPP GPSIMD_NEURON_WRAPPER_API_H GPSIMD_NO_ARG_POSITION_TAGS
    """.split()
)

#: The suffixes of the two functions the generated wrapper.cpp makes of each
#: kernel ``K``: ``void K_wrapper()`` and ``int K_stack_switch()``. No other
#: kernel of the library may have one of those names (an overload makes
#: ``(uintptr_t)K_wrapper`` ambiguous; with no arguments the two conflict).
WRAPPER_SUFFIXES = ("_wrapper", "_stack_switch")


def reserved_clash(kernel: str) -> Optional[str]:
    """The name of ``WRAPPER_RESERVED_NAMES`` that ``kernel`` or a function
    the generated wrapper.cpp makes of it (``WRAPPER_SUFFIXES``) would be,
    else None: ``switch_stack_or_call`` makes ``switch_stack_or_call_wrapper()``,
    an overload of stack_switch.hpp's, whose address the wrapper cannot take."""
    for made in (kernel, *(kernel + suffix for suffix in WRAPPER_SUFFIXES)):
        if made in WRAPPER_RESERVED_NAMES:
            return made
    return None


def reserved_text(kernel: str) -> str:
    """What ``reserved_clash`` found, for a message: "" when ``kernel``
    itself is the name, else `` (its K_wrapper())``."""
    made = reserved_clash(kernel)
    return "" if made in (None, kernel) else f" (the wrapper's {made}() made of it)"


def wrapper_clash(kernel: str, others: Iterable[str]) -> Optional[str]:
    """The kernel of ``others`` whose generated function ``kernel`` would be
    (or that would be one of ``kernel``'s), else None."""
    for other in others:
        for suffix in WRAPPER_SUFFIXES:
            if kernel == other + suffix or other == kernel + suffix:
                return other
    return None



# ---------------------------------------------------------------------------
# The typed model (what the rest of the build sees)
# ---------------------------------------------------------------------------


def _check_identifier(what: str, name: object) -> None:
    if not isinstance(name, str) or not IDENT_RE.fullmatch(name):
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
            raise ValueError(f"argument type must be one of {SUPPORTED_TEXT}, not {self.type!r}")
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
    makes it optional: ``gpsimd_build.schemagrammar``), ``overload`` is ``None``
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
        if self.name in CPP_KEYWORDS or reserved_clash(self.name) is not None:
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
        """Parse ``text`` (the grammar: ``gpsimd_build.schemagrammar``).

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
# Validation: raw tree -> OpSchema, or the reason the device cannot run it
# ---------------------------------------------------------------------------


def _parse(text: str) -> OpSchema:
    if not isinstance(text, str):
        raise TypeError(f"an op schema is a str, not {type(text).__name__}")
    raw = parse_raw(text)
    args = [i for i in raw.items if isinstance(i, RawArg)]

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
        if isinstance(item, RawMarker):
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
    if reserved_clash(name) is not None:
        raise OpSchemaError(
            f"op name '{name}' clashes with a name the generated wrapper.cpp uses"
            f"{reserved_text(name)}; rename the op",
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


def _type_hint(t: RawType) -> Optional[str]:
    """What to use instead of an unsupported type (None: nothing to suggest)."""
    if t.lists:
        return "lists are not supported: pass the values in a Tensor"
    if t.base not in SUPPORTED_TYPES:
        if t.base in FOREIGN_TYPES:
            return f"use '{FOREIGN_TYPES[t.base]}' instead"
        return PYTORCH_TYPES.get(t.base)
    if t.optional:
        return f"optional types are not supported (the device has no None): use '{t.base}' and always pass a value"
    if t.alias is not None:
        return (
            f"alias annotations are not supported: use plain '{t.base}' "
            "(a kernel writes its output in place through get_dst_tensor())"
        )
    return None


def _check_argument(arg: RawArg) -> None:
    where = f"argument {arg.index} '{arg.name}'"
    if arg.type.text not in SUPPORTED_TYPES:
        message = (
            f"{where}: type '{arg.type.text}' is not supported by the device ABI; "
            f"supported types are {SUPPORTED_TEXT}"
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


def _check_returns(raw: RawSchema) -> None:
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
