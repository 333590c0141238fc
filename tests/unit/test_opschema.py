"""Tests of the op-schema grammar (gpsimd_build.opschema)."""

import dataclasses
import os
import pickle
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpsimd_build.opschema import (
    CPP_KEYWORDS,
    MAX_NAME_LENGTH,
    SUPPORTED_TYPES,
    WRAPPER_RESERVED_NAMES,
    wrapper_clash,
    Argument,
    OpSchema,
    OpSchemaError,
    Return,
    parse_schema,
)

#: Property tests' examples: a bounded number in the default run (the whole
#: "not slow" set answers in well under a minute), more with
#: GPSIMD_FUZZ_SCALE=10 for a longer campaign.
FUZZ_SCALE = float(os.environ.get("GPSIMD_FUZZ_SCALE", "1"))


def examples(n: int) -> int:
    """``n`` property-test examples, scaled by ``GPSIMD_FUZZ_SCALE``."""
    return max(1, int(n * FUZZ_SCALE))

T = "Tensor"
SUPPORTED_LIST = "supported types are Tensor, Scalar, int, float, long long"


def args(*pairs):
    return tuple(Argument(t, n) for t, n in pairs)


def tensor_return(name=None):
    return (Return("Tensor", name),)


def error_of(text):
    with pytest.raises(OpSchemaError) as info:
        parse_schema(text)
    return info.value


# ---------------------------------------------------------------------------
# Accepted schemas
# ---------------------------------------------------------------------------

ACCEPTED = [
    (
        "my_ops::axpy(Tensor x, Tensor y, Scalar alpha) -> Tensor",
        OpSchema("my_ops", "axpy", None, args((T, "x"), (T, "y"), ("Scalar", "alpha")), tensor_return()),
    ),
    (
        "ns::scale(Tensor x, float s, int n, long long k) -> Tensor",
        OpSchema(
            "ns", "scale", None,
            args((T, "x"), ("float", "s"), ("int", "n"), ("long long", "k")),
            tensor_return(),
        ),
    ),
    # no whitespace at all where tokens do not merge
    (
        "ns::scale(Tensor x,float s,int n,long long k)->Tensor",
        OpSchema(
            "ns", "scale", None,
            args((T, "x"), ("float", "s"), ("int", "n"), ("long long", "k")),
            tensor_return(),
        ),
    ),
    # newlines, tabs, spaces everywhere, including inside "long long" and around "::" and "."
    (
        "\n\t ns \t::\n scale . v2 (\n\tTensor\tx ,\n  long \n\t long   k\n)\n->\n\tTensor \n",
        OpSchema("ns", "scale", "v2", args((T, "x"), ("long long", "k")), tensor_return()),
    ),
    # the namespace is optional (schema.namespace is None)
    ("relu(Tensor x) -> Tensor", OpSchema(None, "relu", None, args((T, "x")), tensor_return())),
    ("relu.out(Tensor x) -> Tensor", OpSchema(None, "relu", "out", args((T, "x")), tensor_return())),
    # no arguments
    ("ns::make() -> Tensor", OpSchema("ns", "make", None, (), tensor_return())),
    ("ns::make( ) -> ( Tensor )", OpSchema("ns", "make", None, (), tensor_return())),
    # named single return, with or without parentheses
    ("ns::f(Tensor x) -> (Tensor out)", OpSchema("ns", "f", None, args((T, "x")), tensor_return("out"))),
    ("ns::f(Tensor x) -> Tensor out", OpSchema("ns", "f", None, args((T, "x")), tensor_return("out"))),
    # overload names may be C++ keywords (PyTorch has eq.int, Float.Tensor ...): they never reach C++
    ("ns::eq.int(Tensor a, int b) -> Tensor", OpSchema("ns", "eq", "int", args((T, "a"), ("int", "b")), tensor_return())),
    # a name one below the cap of 32 characters
    (
        "ns::" + "a" * (MAX_NAME_LENGTH - 1) + "(Tensor x) -> Tensor",
        OpSchema("ns", "a" * 31, None, args((T, "x")), tensor_return()),
    ),
    # names that look like keywords but are not C++ keywords
    ("ns::f(Tensor self, int integer, float floaty) -> Tensor",
     OpSchema("ns", "f", None, args((T, "self"), ("int", "integer"), ("float", "floaty")), tensor_return())),
]


@pytest.mark.parametrize("text, expected", ACCEPTED)
def test_accepted_schema_structure(text, expected):
    schema = parse_schema(text)
    assert schema == expected
    assert OpSchema.parse(text) == expected
    assert parse_schema(str(schema)) == schema
    assert str(parse_schema(str(schema))) == str(schema)


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("ns::scale(Tensor x,float s,int n,long\n\tlong k)->Tensor",
         "ns::scale(Tensor x, float s, int n, long long k) -> Tensor"),
        ("relu( Tensor x )->( Tensor )", "relu(Tensor x) -> Tensor"),
        ("ns :: f . ov ( ) -> Tensor", "ns::f.ov() -> Tensor"),
        ("ns::f(Tensor x) -> (Tensor out)", "ns::f(Tensor x) -> Tensor out"),
    ],
)
def test_canonical_string(text, canonical):
    assert str(parse_schema(text)) == canonical


def test_long_long_is_one_type():
    schema = parse_schema("ns::f(long long k, long   long m) -> Tensor")
    assert [a.type for a in schema.arguments] == ["long long", "long long"]
    assert [a.name for a in schema.arguments] == ["k", "m"]
    assert "long long" in SUPPORTED_TYPES


def test_every_supported_type_is_accepted():
    for i, type_ in enumerate(SUPPORTED_TYPES):
        schema = parse_schema(f"ns::f({type_} a{i}) -> Tensor")
        assert schema.arguments == (Argument(type_, f"a{i}"),)


def test_model_is_frozen_and_hashable():
    schema = parse_schema("ns::f(Tensor x) -> Tensor")
    with pytest.raises(dataclasses.FrozenInstanceError):
        schema.name = "g"
    assert hash(schema) == hash(parse_schema("ns::f( Tensor x )->Tensor"))
    assert {schema: 1}[parse_schema("ns::f(Tensor x)->Tensor")] == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: Argument("int[]", "x"),
        lambda: Argument("Tensor", "class"),
        lambda: Argument("Tensor", "2x"),
        lambda: Return("int", None),
        lambda: Return("Tensor", "a b"),
        lambda: OpSchema("ns", "f", None, (), ()),
        lambda: OpSchema("ns", "f", None, (), (Return("Tensor", None),) * 2),
        lambda: OpSchema("ns", "f", None, [Argument("Tensor", "x")], (Return("Tensor", None),)),
        lambda: OpSchema("ns", "f", None, args((T, "x"), ("int", "x")), tensor_return()),
        lambda: OpSchema("ns", "a" * MAX_NAME_LENGTH, None, (), tensor_return()),
        lambda: OpSchema("ns", "new", None, (), tensor_return()),
        lambda: OpSchema("ns", "output", None, (), tensor_return()),
        lambda: OpSchema("n s", "f", None, (), tensor_return()),
    ],
)
def test_model_rejects_what_the_device_cannot_express(make):
    with pytest.raises(ValueError):
        make()


# ---------------------------------------------------------------------------
# Errors: exact message, column, kind
# ---------------------------------------------------------------------------

TYPE_MSG = "type '{t}' is not supported by the device ABI; " + SUPPORTED_LIST

ERRORS = [
    # -- the old driver's errors (the Neuron SDK's build driver, build_custom_op.py) ------
    # l65 "no ::" -- the namespace is optional now; a single ':' is a typo.
    ("ns:f(Tensor x) -> Tensor", "syntax", 3, "expected '::' after namespace 'ns', found ':'"),
    # l71 missing '('
    ("ns::f Tensor x) -> Tensor", "syntax", 7, "expected '(' after op name 'f', found 'Tensor'"),
    ("ns::f.ov", "syntax", 9, "expected '(' after op name 'f.ov', found end of schema"),
    # l77 missing ')'
    ("ns::f(Tensor x -> Tensor", "syntax", 16, "expected ',' or ')' after argument 'x', found '->'"),
    ("ns::f(Tensor x", "syntax", 15, "expected ',' or ')' after argument 'x', found end of schema"),
    # l86 more than two tokens per argument
    ("ns::f(Tensor x y) -> Tensor", "syntax", 16, "expected ',' or ')' after argument 'x', found 'y'"),
    ("ns::f(Tensor x, int n m) -> Tensor", "syntax", 23, "expected ',' or ')' after argument 'n', found 'm'"),
    # l93/l97 missing return
    ("ns::f(Tensor x)", "syntax", 16,
     "expected '->' and the return type after the argument list, found end of schema"),
    ("ns::f(Tensor x) Tensor", "syntax", 17,
     "expected '->' and the return type after the argument list, found 'Tensor'"),
    ("ns::f(Tensor x) ->", "syntax", 19, "expected a return type after '->', found end of schema"),
    ("ns::f(Tensor x) -> (Tensor", "syntax", 27, "expected ',' or ')' after return type 'Tensor', found end of schema"),
    # l106 more than two tokens per return
    ("ns::f(Tensor x) -> (Tensor a b)", "syntax", 30, "expected ',' or ')' after return 'a', found 'b'"),
    ("ns::f(Tensor x) -> Tensor a b", "syntax", 29, "expected end of schema after the return, found 'b'"),
    # l140 not exactly one return
    ("ns::f(Tensor x) -> (Tensor, Tensor)", "unsupported", 29,
     "the device ABI returns exactly one Tensor; found 2 returns"),
    ("ns::f(Tensor x) -> (Tensor a, Tensor b, Tensor c)", "unsupported", 31,
     "the device ABI returns exactly one Tensor; found 3 returns"),
    ("ns::f(Tensor x) -> ()", "unsupported", 20, "the device ABI returns exactly one Tensor; found no return"),
    # l144 non-Tensor return
    ("ns::f(Tensor x) -> int", "unsupported", 20,
     "the device ABI returns exactly one Tensor; found return type 'int'; return the value in a one-element Tensor"),
    ("ns::f(Tensor x) -> Tensor[]", "unsupported", 20,
     "the device ABI returns exactly one Tensor; found return type 'Tensor[]'; return a single Tensor"),
    ("ns::f(Tensor x) -> Tensor?", "unsupported", 20,
     "the device ABI returns exactly one Tensor; found return type 'Tensor?'"),
    ("ns::f(Tensor(a!) x) -> Tensor(a!)", "unsupported", 7,
     "argument 1 'x': " + TYPE_MSG.format(t="Tensor(a!)")
     + "; alias annotations are not supported: use plain 'Tensor' "
       "(a kernel writes its output in place through get_dst_tensor())"),
    ("ns::f(Tensor x) -> Tensor(a!)", "unsupported", 20,
     "the device ABI returns exactly one Tensor; found return type 'Tensor(a!)'; remove the alias annotation "
     "'(a!)' (a kernel writes its output in place through get_dst_tensor())"),
    # the 32-character cap, with the driver's message
    ("ns::" + "k" * 32 + "(Tensor x) -> Tensor", "unsupported", 5,
     "op name '" + "k" * 32 + "' is too long (32 characters); "
     "CustomOp function names must be less than 32 characters"),
    ("a_rather_long_operator_name_for_a_kernel(Tensor x) -> Tensor", "unsupported", 1,
     "op name 'a_rather_long_operator_name_for_a_kernel' is too long (40 characters); "
     "CustomOp function names must be less than 32 characters"),
    # -- unexpected tokens ---------------------------------------------------
    ("ns::f(Tensor x, ) -> Tensor", "syntax", 17, "expected a type, found ')'"),
    ("ns::f(,Tensor x) -> Tensor", "syntax", 7, "expected a type, found ','"),
    ("ns::f(Tensor) -> Tensor", "syntax", 13, "expected an argument name after type 'Tensor', found ')'"),
    ("ns::f(Tensor 2x) -> Tensor", "syntax", 14, "expected an argument name after type 'Tensor', found '2x'"),
    ("", "syntax", 1, "expected an op name, found end of schema"),
    ("   ", "syntax", 4, "expected an op name, found end of schema"),
    ("(Tensor x) -> Tensor", "syntax", 1, "expected an op name, found '('"),
    ("ns::(Tensor x) -> Tensor", "syntax", 5, "expected an op name after 'ns::', found '('"),
    ("ns::f.(Tensor x) -> Tensor", "syntax", 7, "expected an overload name after 'f.', found '('"),
    ("ns::a::f(Tensor x) -> Tensor", "syntax", 6, "expected '(' after op name 'a', found '::'"),
    ("ns::f(Tensor x) -> Tensor;", "syntax", 26, "unexpected character ';'"),
    ("ns::f(Tensor x)\n-> Tensor\n)", "syntax", 27, "expected end of schema after the return, found ')'"),
    ("ns::f(const Tensor& x) -> Tensor", "syntax", 19,
     "unexpected character '&'; a schema names types without C++ references "
     "(write 'Tensor x', not 'const at::Tensor& x')"),
    ("ns::f(Tensor\u00a0x) -> Tensor", "syntax", 13, "unexpected character '\\xa0' (U+00A0)"),
    ("ns::f(str s='abc) -> Tensor", "syntax", 13, "unterminated string literal"),
    ("ns::f(int x=) -> Tensor", "syntax", 13, "expected a default value after '=', found ')'"),
    ("ns::f(int[] x=[0,) -> Tensor", "syntax", 18, "expected a default value, found ')'"),
    ("ns::f(int[2 x) -> Tensor", "syntax", 13, "expected ']' to close '[2' in type 'int', found 'x'"),
    ("ns::f(Tensor(a x) -> Tensor", "syntax", 16, "expected ')' to close the alias annotation, found 'x'"),
    ("ns::f(Tensor() x) -> Tensor", "syntax", 14,
     "expected an alias set name (like 'a' or '*') in the alias annotation, found ')'"),
    # unknown types are syntax errors, with a guess
    ("ns::f(Foo x) -> Tensor", "syntax", 7, "unknown type 'Foo'; " + SUPPORTED_LIST),
    ("ns::f(tensor x) -> Tensor", "syntax", 7, "unknown type 'tensor'; " + SUPPORTED_LIST + "; did you mean 'Tensor'?"),
    ("ns::f(longlong k) -> Tensor", "syntax", 7,
     "unknown type 'longlong'; " + SUPPORTED_LIST + "; did you mean 'long long'?"),
    ("ns::f(x Tensor) -> Tensor", "syntax", 7,
     "unknown type 'x'; " + SUPPORTED_LIST + "; write the type before the name ('Tensor x')"),
    ("ns::f(Tensor x, y) -> Tensor", "syntax", 17,
     "argument 2 'y' has no type; write '<type> y' with one of Tensor, Scalar, int, float, long long"),
    ("ns::f(Tensor x) -> Foo", "syntax", 20, "unknown type 'Foo'; " + SUPPORTED_LIST),
    # duplicate argument names
    ("ns::f(Tensor x, int x) -> Tensor", "syntax", 21,
     "argument 2 'x': duplicate argument name (argument 1 is also named 'x')"),
    # a syntax error anywhere wins over an unsupported feature before it
    ("ns::f(int[] x, Tensor y z) -> Tensor", "syntax", 25, "expected ',' or ')' after argument 'y', found 'z'"),
    # -- reserved C++ keywords ----------------------------------------------
    ("ns::f(Tensor x, int int) -> Tensor", "unsupported", 21,
     "argument 2 'int': 'int' is a reserved C++ keyword and cannot name an argument of the kernel; rename it"),
    ("ns::f(Tensor float) -> Tensor", "unsupported", 14,
     "argument 1 'float': 'float' is a reserved C++ keyword and cannot name an argument of the kernel; rename it"),
    ("ns::f(Tensor new) -> Tensor", "unsupported", 14,
     "argument 1 'new': 'new' is a reserved C++ keyword and cannot name an argument of the kernel; rename it"),
    ("ns::class(Tensor x) -> Tensor", "unsupported", 5,
     "op name 'class' is a reserved C++ keyword; the kernel is a C++ function of that name: rename the op"),
    ("ns::output(Tensor x) -> Tensor", "unsupported", 5,
     "op name 'output' clashes with a name the generated wrapper.cpp uses; rename the op"),
    # -- valid PyTorch, not supported by the device ABI ----------------------
    ("ns::f(Tensor x, int[] dim) -> Tensor", "unsupported", 17,
     "argument 2 'dim': " + TYPE_MSG.format(t="int[]") + "; lists are not supported: pass the values in a Tensor"),
    ("ns::f(Tensor x, int[2] dim) -> Tensor", "unsupported", 17,
     "argument 2 'dim': " + TYPE_MSG.format(t="int[2]") + "; lists are not supported: pass the values in a Tensor"),
    ("ns::f(Tensor[] xs) -> Tensor", "unsupported", 7,
     "argument 1 'xs': " + TYPE_MSG.format(t="Tensor[]") + "; lists are not supported: pass the values in a Tensor"),
    ("ns::f(Tensor? x) -> Tensor", "unsupported", 7,
     "argument 1 'x': " + TYPE_MSG.format(t="Tensor?")
     + "; optional types are not supported (the device has no None): use 'Tensor' and always pass a value"),
    ("ns::f(Tensor x, float? s) -> Tensor", "unsupported", 17,
     "argument 2 's': " + TYPE_MSG.format(t="float?")
     + "; optional types are not supported (the device has no None): use 'float' and always pass a value"),
    ("ns::f(Tensor(a) x) -> Tensor", "unsupported", 7,
     "argument 1 'x': " + TYPE_MSG.format(t="Tensor(a)")
     + "; alias annotations are not supported: use plain 'Tensor' "
       "(a kernel writes its output in place through get_dst_tensor())"),
    ("ns::f(Tensor( a ->* ) x) -> Tensor", "unsupported", 7,
     "argument 1 'x': " + TYPE_MSG.format(t="Tensor(a -> *)")
     + "; alias annotations are not supported: use plain 'Tensor' "
       "(a kernel writes its output in place through get_dst_tensor())"),
    ("ns::f(Tensor x, SymInt n) -> Tensor", "unsupported", 17,
     "argument 2 'n': " + TYPE_MSG.format(t="SymInt") + "; use 'int' or 'long long' instead"),
    ("ns::f(Tensor x, bool b) -> Tensor", "unsupported", 17,
     "argument 2 'b': " + TYPE_MSG.format(t="bool") + "; use 'int' (0 or 1) instead"),
    ("ns::f(Tensor x, double d) -> Tensor", "unsupported", 17,
     "argument 2 'd': " + TYPE_MSG.format(t="double") + "; use 'float' instead"),
    ("ns::f(Tensor x, int64_t n) -> Tensor", "unsupported", 17,
     "argument 2 'n': " + TYPE_MSG.format(t="int64_t") + "; use 'long long' instead"),
    ("ns::f(Tensor x, str mode) -> Tensor", "unsupported", 17, "argument 2 'mode': " + TYPE_MSG.format(t="str")),
    ("ns::f(Tensor x, ScalarType? dtype) -> Tensor", "unsupported", 17,
     "argument 2 'dtype': " + TYPE_MSG.format(t="ScalarType?")),
    ("ns::f(Tensor x, Generator? g) -> Tensor", "unsupported", 17, "argument 2 'g': " + TYPE_MSG.format(t="Generator?")),
    ("ns::f(Tensor x, Dict(str,Tensor) d) -> Tensor", "unsupported", 17,
     "argument 2 'd': " + TYPE_MSG.format(t="Dict(str, Tensor)")),
    ("ns::f(Tensor x, *, Scalar alpha) -> Tensor", "unsupported", 17,
     "the keyword-only marker '*' is not supported by the device ABI; remove it (every argument is positional)"),
    ("ns::f(str s, ...) -> Tensor", "unsupported", 7, "argument 1 's': " + TYPE_MSG.format(t="str")),
    ("ns::f(Tensor s, ...) -> Tensor", "unsupported", 17,
     "variadic arguments '...' are not supported by the device ABI; declare each argument"),
    ("ns::f(Tensor x, Scalar alpha=1) -> Tensor", "unsupported", 29,
     "argument 2 'alpha': default values are not supported by the device ABI; "
     "remove '=1' (every argument is passed explicitly)"),
    ("ns::f(Tensor x, int d = -1) -> Tensor", "unsupported", 23,
     "argument 2 'd': default values are not supported by the device ABI; "
     "remove '= -1' (every argument is passed explicitly)"),
]


@pytest.mark.parametrize("text, kind, column, message", ERRORS)
def test_error_catalogue(text, kind, column, message):
    err = error_of(text)
    assert (err.kind, err.column, err.message) == (kind, column, message)
    assert str(err) == f"column {column}: {message}"
    assert isinstance(err, ValueError)


@pytest.mark.parametrize(
    "default",
    ["1", "-1", "0.5", "1e-05", "None", "True", "False", '"valid"', "'none'", "[0,1]", "[0, 1]", "[]",
     "contiguous_format", "Mean", "-inf", "[[1, 2], [3]]"],
)
def test_default_values_are_recognised_then_rejected(default):
    err = error_of(f"ns::f(Tensor x, int d={default}) -> Tensor")
    assert err.kind == "unsupported"
    assert err.column == len("ns::f(Tensor x, int d") + 1
    assert f"remove '={default}'" in err.message


def test_error_is_picklable_and_keeps_its_fields():
    err = error_of("ns::f(Tensor x y) -> Tensor")
    again = pickle.loads(pickle.dumps(err))
    assert (again.message, again.column, again.kind, str(again)) == (err.message, err.column, err.kind, str(err))


def test_error_kind_is_checked():
    with pytest.raises(ValueError):
        OpSchemaError("x", 1, "other")


def test_columns_count_newlines_as_one_character():
    text = "ns::f(\n\tTensor x,\n\tbool b\n) -> Tensor"
    err = error_of(text)
    assert err.column == text.index("bool") + 1


def test_non_string_is_a_type_error():
    with pytest.raises(TypeError):
        parse_schema(None)


# ---------------------------------------------------------------------------
# Real PyTorch schemas (native_functions.yaml and TorchScript builtins):
# accepted, or rejected as "unsupported" -- never as a syntax error.
# ``at`` is a fragment of the schema whose first occurrence is the error.
# ---------------------------------------------------------------------------

ACCEPT = None
PYTORCH_SCHEMAS = [
    ("relu(Tensor self) -> Tensor", ACCEPT),
    ("abs(Tensor self) -> Tensor", ACCEPT),
    ("sin(Tensor self) -> Tensor", ACCEPT),
    ("exp(Tensor self) -> Tensor", ACCEPT),
    ("sigmoid(Tensor self) -> Tensor", ACCEPT),
    ("bitwise_not(Tensor self) -> Tensor", ACCEPT),
    ("mul.Tensor(Tensor self, Tensor other) -> Tensor", ACCEPT),
    ("mul.Scalar(Tensor self, Scalar other) -> Tensor", ACCEPT),
    ("div.Tensor(Tensor self, Tensor other) -> Tensor", ACCEPT),
    ("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", ACCEPT),
    ("pow.Scalar(Scalar self, Tensor exponent) -> Tensor", ACCEPT),
    ("pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", ACCEPT),
    ("bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor", ACCEPT),
    ("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", ACCEPT),
    ("lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor", ACCEPT),
    ("matmul(Tensor self, Tensor other) -> Tensor", ACCEPT),
    ("fill.Scalar(Tensor self, Scalar value) -> Tensor", ACCEPT),
    ("atan2(Tensor self, Tensor other) -> Tensor", ACCEPT),
    ("prim::NumToTensor.Scalar(Scalar a) -> Tensor", ACCEPT),
    ("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", "*, Scalar alpha"),
    ("add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", "=1"),
    ("aten::addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", "*"),
    ("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", "Tensor(a!)"),
    ("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)", "*"),
    ("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
     "int[1]?"),
    ("sum.dim_DimnameList(Tensor self, Dimname[1] dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
     "Dimname[1]"),
    ("mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", "int[1]?"),
    ("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", "bool"),
    ("max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!) max_values) "
     "-> (Tensor(a!) values, Tensor(b!) indices)", "bool"),
    ("sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)", "=-1"),
    ("topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
     "SymInt"),
    ("clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", "Scalar?"),
    ("clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", "Tensor?"),
    ("nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor", "float?"),
    ("softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", "ScalarType?"),
    ("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", "Tensor(a)"),
    ("view(Tensor(a) self, SymInt[] size) -> Tensor(a)", "Tensor(a)"),
    ("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", "Tensor(a)"),
    ("permute(Tensor(a) self, int[] dims) -> Tensor(a)", "Tensor(a)"),
    ("flip(Tensor self, int[] dims) -> Tensor", "int[]"),
    ("unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]", "Tensor(a -> *)"),
    ("split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]", "Tensor(a -> *)"),
    ("cat(Tensor[] tensors, int dim=0) -> Tensor", "Tensor[]"),
    ("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", "Tensor?[]"),
    ("empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
     "bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor", "SymInt[]"),
    ("randn(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
     "bool? pin_memory=None) -> Tensor", "SymInt[]"),
    ("arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Layout? layout=None, "
     "Device? device=None, bool? pin_memory=None) -> Tensor", "=1"),
    ("gelu(Tensor self, *, str approximate='none') -> Tensor", "*"),
    ("conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, "
     "SymInt[2] dilation=1, SymInt groups=1) -> Tensor", "Tensor?"),
    ("conv2d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, str padding=\"valid\", "
     "SymInt[2] dilation=1, SymInt groups=1) -> Tensor", "Tensor?"),
    ("dropout(Tensor input, float p, bool train) -> Tensor", "bool"),
    ("native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)", "bool?"),
    ("bernoulli(Tensor self, *, Generator? generator=None) -> Tensor", "*"),
    ("normal.Tensor_float(Tensor mean, float std=1, *, Generator? generator=None) -> Tensor", "=1"),
    ("layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
     "float eps=1e-05, bool cudnn_enable=True) -> Tensor", "SymInt[]"),
    ("native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) "
     "-> (Tensor, Tensor, Tensor)", "SymInt[]"),
    ("native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, Tensor? running_mean, "
     "Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool train, float eps, bool[3] output_mask) "
     "-> (Tensor, Tensor, Tensor)", "Tensor?"),
    ("leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", "=0.01"),
    ("hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", "=-1"),
    ("rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False, "
     "Generator? generator=None) -> Tensor", "=0.125"),
    ("binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean) -> Tensor", "Tensor?"),
    ("nll_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, SymInt ignore_index=-100) "
     "-> Tensor", "Tensor?"),
    ("linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, "
     "ScalarType? dtype=None) -> Tensor", "=2"),
    ("var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
     "int[1]?"),
    ("upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) "
     "-> Tensor", "SymInt[]?"),
    ("scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor", "*"),
    ("to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, "
     "MemoryFormat? memory_format=None) -> Tensor(a)", "Tensor(a)"),
    ("contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> Tensor(a)", "Tensor(a)"),
    ("quantize_per_tensor(Tensor self, float scale, int zero_point, ScalarType dtype) -> Tensor", "ScalarType"),
    ("align_to(Tensor(a) self, Dimname[] names) -> Tensor(a)", "Tensor(a)"),
    ("refine_names(Tensor(a) self, Dimname?[] names) -> Tensor(a)", "Tensor(a)"),
    ("set_.source_Storage(Tensor(a!) self, Storage source) -> Tensor(a!)", "Tensor(a!)"),
    ("record_stream(Tensor(a!) self, Stream s) -> ()", "Tensor(a!)"),
    ("_foreach_add.List(Tensor[] self, Tensor[] other, *, Scalar alpha=1) -> Tensor[]", "Tensor[]"),
    ("_foreach_add_.List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()", "Tensor(a!)[]"),
    ("embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, "
     "bool sparse=False) -> Tensor", "SymInt"),
    ("fake_quantize_per_tensor_affine_cachemask(Tensor self, float scale, int zero_point, int quant_min, "
     "int quant_max) -> (Tensor output, Tensor mask)", "fake_quantize"),
    ("size.int(Tensor self, int dim) -> int", "-> int"),
    ("numel(Tensor self) -> int", "-> int"),
    ("is_nonzero(Tensor self) -> bool", "-> bool"),
    ("item(Tensor self) -> Scalar", "-> Scalar"),
    ("qscheme(Tensor self) -> QScheme", "-> QScheme"),
    ("_local_scalar_dense(Tensor self) -> Scalar", "-> Scalar"),
    ("aten::Int.Tensor(Tensor a) -> int", "-> int"),
    # TorchScript builtins: type variables, containers, varargs, wildcard aliases
    ("aten::append.t(t[](a!) self, t(c -> *) el) -> t[](a!)", "t[](a!)"),
    ("aten::format(str self, ...) -> str", "str"),
    ("aten::__getitem__.Dict_str(Dict(str, t) self, str key) -> t(*)", "Dict(str, t)"),
    ("aten::wait(Future(t) self) -> t", "Future(t)"),
    ("aten::dict() -> Dict(str, Tensor)", "Dict"),
    ("aten::len.t(t[] a) -> int", "t[]"),
    ("quantized::linear(Tensor X, __torch__.torch.classes.quantized.LinearPackedParamsBase W_prepack, "
     "float Y_scale_i, int Y_zero_point_i) -> Tensor Y", "__torch__"),
]


@pytest.mark.parametrize("text, at", PYTORCH_SCHEMAS, ids=[s.split("(")[0] for s, _ in PYTORCH_SCHEMAS])
def test_real_pytorch_schema(text, at):
    if at is ACCEPT:
        schema = parse_schema(text)
        assert parse_schema(str(schema)) == schema
        return
    err = error_of(text)
    assert err.kind == "unsupported", str(err)
    expected_column = text.index(at) + 1
    if at.startswith("-> "):
        expected_column += 3
    assert err.column == expected_column, str(err)


def test_at_least_25_real_pytorch_schemas():
    assert len(PYTORCH_SCHEMAS) >= 25
    assert sum(at is ACCEPT for _, at in PYTORCH_SCHEMAS) >= 10


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

WS = st.text(alphabet=" \t\n\r", max_size=3)
WS1 = st.text(alphabet=" \t\n\r", min_size=1, max_size=3)
IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
OP_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}", fullmatch=True).filter(
    lambda s: s not in CPP_KEYWORDS and s not in WRAPPER_RESERVED_NAMES
)
ARG_NAME = IDENT.filter(lambda s: s not in CPP_KEYWORDS)


def _is_word(token):
    return token[0].isalnum() or token[0] == "_"


@st.composite
def valid_schemas(draw):
    """(text with random whitespace, the OpSchema it must parse to)."""
    namespace = draw(st.none() | IDENT)
    name = draw(OP_NAME)
    overload = draw(st.none() | IDENT)
    names = draw(st.lists(ARG_NAME, max_size=6, unique=True))
    types = [draw(st.sampled_from(SUPPORTED_TYPES)) for _ in names]
    return_name = draw(st.none() | IDENT)
    tokens = []
    if namespace is not None:
        tokens += [namespace, "::"]
    tokens.append(name)
    if overload is not None:
        tokens += [".", overload]
    tokens.append("(")
    for i, (type_, arg) in enumerate(zip(types, names)):
        if i:
            tokens.append(",")
        tokens += type_.split(" ") + [arg]
    tokens += [")", "->"]
    ret = ["Tensor"] + ([return_name] if return_name else [])
    tokens += ["("] + ret + [")"] if draw(st.booleans()) else ret
    text = draw(WS)
    previous = None
    for token in tokens:
        if previous is not None:
            text += draw(WS1 if _is_word(previous) and _is_word(token) else WS)
        text += token
        previous = token
    text += draw(WS)
    expected = OpSchema(
        namespace, name, overload,
        tuple(Argument(t, n) for t, n in zip(types, names)),
        (Return("Tensor", return_name),),
    )
    return text, expected


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(valid_schemas())
def test_round_trip_of_random_valid_schemas(case):
    text, expected = case
    schema = parse_schema(text)
    assert schema == expected
    canonical = str(schema)
    assert parse_schema(canonical) == schema
    assert str(parse_schema(canonical)) == canonical
    # the canonical text is exactly the documented shape
    head = (f"{expected.namespace}::" if expected.namespace else "") + expected.name
    head += f".{expected.overload}" if expected.overload else ""
    body = ", ".join(f"{a.type} {a.name}" for a in expected.arguments)
    ret = "Tensor" + (f" {expected.returns[0].name}" if expected.returns[0].name else "")
    assert canonical == f"{head}({body}) -> {ret}"


def _only_schema_errors(text):
    try:
        schema = parse_schema(text)
    except OpSchemaError as err:
        assert err.kind in ("syntax", "unsupported")
        assert 1 <= err.column <= len(text) + 1
        assert str(err) == f"column {err.column}: {err.message}"
        return
    assert parse_schema(str(schema)) == schema
    assert str(parse_schema(str(schema))) == str(schema)


@settings(max_examples=examples(300))
@given(st.text())
def test_arbitrary_text_raises_only_opschema_error(text):
    _only_schema_errors(text)


SCHEMA_TOKENS = [
    "ns", "::", ":", "f", ".", "ov", "(", ")", ",", "->", "Tensor", "Scalar", "int", "float", "long", "x", "y",
    "?", "[", "]", "[]", "2", "!", "*", "=", "|", "-", "...", "a", "None", "'s'", '"t', "Dict", "Future",
    "__torch__", "t", "SymInt", "bool", "class", "output", "1e-05", "&", "2x", "\u00e9",
]


@settings(max_examples=examples(300))
@given(st.lists(st.tuples(st.sampled_from(SCHEMA_TOKENS), WS), max_size=30))
def test_token_soup_raises_only_opschema_error(pieces):
    _only_schema_errors("".join(token + space for token, space in pieces))


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(valid_schemas(), st.data())
def test_mutated_valid_schemas_raise_only_opschema_error(case, data):
    text, _ = case
    position = data.draw(st.integers(0, len(text)))
    edit = data.draw(st.sampled_from(["insert", "delete", "replace"]))
    piece = data.draw(st.sampled_from(SCHEMA_TOKENS))
    if edit == "insert":
        text = text[:position] + piece + text[position:]
    elif edit == "delete":
        text = text[:position] + text[position + 1 :]
    else:
        text = text[:position] + piece + text[position + 1 :]
    _only_schema_errors(text)


def test_deep_nesting_is_an_opschema_error():
    for text in ("ns::f(" + "Dict(" * 500 + "x) -> Tensor", "ns::f(int x=" + "[" * 2000 + ") -> Tensor"):
        err = error_of(text)
        assert err.kind == "syntax"


@pytest.mark.parametrize(
    "type_",
    ["Tensor?", "Tensor[]", "Tensor(a)", "Tensor(a!)", "Tensor(a -> *)", "int[]", "int[2]", "SymInt", "SymInt[]",
     "bool", "str", "ScalarType", "Layout", "Device", "MemoryFormat", "Generator?", "Dimname", "float?", "Scalar?",
     "int?", "long long?", "long long[]", "double", "int64_t", "SymFloat", "complex", "Storage", "Stream",
     "QScheme", "Tensor?[]", "Tensor(a!)[]", "int[1]?", "Dict(str, Tensor)", "Future(t)", "t", "(int, Tensor)"],
)
def test_pytorch_types_are_recognised_then_rejected(type_):
    err = error_of(f"ns::f(Tensor x, {type_} v) -> Tensor")
    assert err.kind == "unsupported"
    assert err.column == len("ns::f(Tensor x, ") + 1
    assert err.message.startswith(f"argument 2 'v': type '{type_}' is not supported by the device ABI; {SUPPORTED_LIST}")


def test_every_name_the_wrapper_headers_declare_is_reserved():
    """The generated wrapper.cpp includes neuron/wrapper_api.h and
    stack_switch.hpp, which a kernel need not include: an op named as one
    of their functions or macros (customop_next_tensor, a macro of no
    parameters; STACK_SIZE, a number) compiled and stopped the wrapper."""
    from gpsimd_device.headers import INCLUDE_DIR
    names = set()
    for header in ("neuron/wrapper_api.h", "stack_switch.hpp"):
        with open(os.path.join(INCLUDE_DIR, header)) as f:
            text = re.sub(r"/\*.*?\*/|//[^\n]*", "", f.read(), flags=re.S)
        names |= set(re.findall(r"^\s*#\s*(?:define|ifndef)\s+(\w+)", text, re.M))
        names |= set(re.findall(r"(\w+)\s*\([^()]*\)\s*;", text))          # functions
        names |= set(re.findall(r"\(\s*\*\s*(\w+)\s*\)", text))             # typedef'd pointers
        names |= set(re.findall(r"^\s*extern\s+\w+\s+(\w+)\s*;", text, re.M))
    assert {"customop_next_tensor", "customop_setup_tagged", "STACK_SIZE", "switchBack",
            "switched_stack", "wrapper_fn", "get_dst_tensor"} <= names
    assert names - WRAPPER_RESERVED_NAMES == set()
    for name in sorted(names):
        with pytest.raises(OpSchemaError, match="clashes with a name the generated wrapper.cpp"):
            parse_schema(f"{name}(Tensor x) -> Tensor")


@pytest.mark.parametrize("first,second", [("g", "g_wrapper"), ("g_stack_switch", "g")])
def test_a_kernel_named_as_another_kernels_wrapper_function_clashes(first, second):
    """The wrapper makes g_wrapper() and g_stack_switch() of the kernel g."""
    assert wrapper_clash(second, [first]) == first
    assert wrapper_clash("g_wrapper_wrapper", ["g"]) is None


def test_an_op_whose_wrapper_function_is_a_header_name_is_reserved():
    """The wrapper makes switch_stack_or_call_wrapper() of an op named
    switch_stack_or_call: an overload of stack_switch.hpp's function of
    that name, whose address it then takes ('overloaded function with no
    contextual type information' in wrapper.cpp; the kernel's own source
    compiled)."""
    for name in ("switch_stack_or_call", "switch_stack_or_call_wrapper"):
        with pytest.raises(OpSchemaError, match="clashes with a name the generated wrapper.cpp"):
            parse_schema(f"{name}(Tensor x) -> Tensor")
    with pytest.raises(OpSchemaError) as err:
        parse_schema("switch_stack_or_call(Tensor x) -> Tensor")
    assert err.value.message == (
        "op name 'switch_stack_or_call' clashes with a name the generated wrapper.cpp uses (the "
        "wrapper's switch_stack_or_call_wrapper() made of it); rename the op")
    for name in WRAPPER_RESERVED_NAMES:
        for suffix in ("_wrapper", "_stack_switch"):
            if name.endswith(suffix):
                with pytest.raises(OpSchemaError):
                    parse_schema(f"{name[:-len(suffix)]}(Tensor x) -> Tensor")
