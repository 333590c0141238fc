"""wrapper.cpp codegen against texts written from the Neuron SDK's build driver, build_custom_op.py"""
import difflib
import pathlib

import pytest

from gpsimd_build import codegen
from gpsimd_build.codegen import CodegenError, WrapperOp, emit_wrapper
from gpsimd_build.profiles import DEVICE_DIALECT, HOST_DIALECT

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"

THREE_OPS = [
    WrapperOp("relu", ("Tensor",)),
    WrapperOp("axpy", ("Tensor", "Tensor", "Scalar")),
    WrapperOp("mix", ("Tensor", "int", "float", "long long")),
]


def _same(actual: str, expected: str):
    assert actual == expected, "".join(difflib.unified_diff(
        expected.splitlines(True), actual.splitlines(True), "expected", "actual"))


def test_device_wrapper_matches_the_spec_text():
    expected = (DATA / "wrapper_three_ops.device.cpp").read_text()
    _same(emit_wrapper(THREE_OPS, DEVICE_DIALECT), expected)


def test_host_wrapper_differs_only_in_the_two_named_places():
    device = (DATA / "wrapper_three_ops.device.cpp").read_text()
    expected = (device.replace("(uint32_t)", "(uintptr_t)")
                .replace('asm("j switchBack");', "switchBack();"))
    host = emit_wrapper(THREE_OPS, HOST_DIALECT)
    _same(host, expected)
    changed = [(a, b) for a, b in zip(device.splitlines(), host.splitlines()) if a != b]
    # three launchers and three switch-back tails, nothing else
    assert len(changed) == 6
    assert len(device.splitlines()) == len(host.splitlines())


def test_output_is_deterministic():
    assert emit_wrapper(THREE_OPS, HOST_DIALECT) == emit_wrapper(list(THREE_OPS), HOST_DIALECT)


def test_non_default_stack_size_is_passed_to_the_launcher():
    text = emit_wrapper([WrapperOp("big", ("Tensor",), stack_size=8192)], DEVICE_DIALECT)
    assert "    return switch_stack_or_call_wrapper((uint32_t)big_wrapper, 8192);\n" in text
    text = emit_wrapper([WrapperOp("dflt", ("Tensor",), stack_size=4196)], DEVICE_DIALECT)
    assert "    return switch_stack_or_call_wrapper((uint32_t)dflt_wrapper);\n" in text


@pytest.mark.parametrize("op, message", [
    (WrapperOp("a" * 32, ("Tensor",)),
     "CustomOp function name is too long: '" + "a" * 32 + "' has 32 characters. "
     "Must be less than 32 characters."),
    (WrapperOp("two", ("Tensor",), ("Tensor", "Tensor")),
     "op 'two': only a single return value is supported (found 2)"),
    (WrapperOp("sc", ("Tensor",), ("Scalar",)),
     "op 'sc': only Tensor return types are supported (found 'Scalar')"),
    (WrapperOp("b", ("bool",)),
     "op 'b': argument type 'bool' is not supported by the device ABI"),
])
def test_rejected_ops(op, message):
    with pytest.raises(CodegenError) as err:
        emit_wrapper([op], HOST_DIALECT)
    assert str(err.value) == message


def test_31_character_name_is_accepted():
    name = "b" * 31
    assert f'case 0: return "{name}";' in emit_wrapper([WrapperOp(name, ())], HOST_DIALECT)


def test_duplicate_and_empty():
    with pytest.raises(CodegenError, match="duplicate op name 'x'"):
        emit_wrapper([WrapperOp("x", ()), WrapperOp("x", ())], HOST_DIALECT)
    with pytest.raises(CodegenError, match="at least one op"):
        emit_wrapper([], HOST_DIALECT)
    # g_wrapper() is the wrapper's own function of the op g
    with pytest.raises(CodegenError, match="op names 'g' and 'g_wrapper' clash"):
        emit_wrapper([WrapperOp("g", ()), WrapperOp("g_wrapper", ())], HOST_DIALECT)


def test_type_map_is_the_spec_map():
    assert codegen.ARG_TYPE_MAP == {
        "Tensor": ("const at::Tensor&", "customop_next_tensor()"),
        "Scalar": ("const at::Scalar&", "customop_next_scalar()"),
        "int": ("int", "customop_next_int()"),
        "float": ("float", "customop_next_float()"),
        "long long": ("long long", "customop_next_longlong()"),
    }
