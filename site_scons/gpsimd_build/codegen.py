"""Code generation of a library's ``wrapper.cpp``.

The text is that of the Neuron SDK's build driver, ``build_custom_op.py``
(ARCHITECTURE.md "The generated wrapper"): a banner, the include, per op a
forward declaration, ``<fn>_wrapper()`` and ``<fn>_stack_switch()``, then
the registration trio ``get_func_cnt`` / ``get_func_name`` / ``get_func_ptr``.
The host and device texts differ only in the two places named by
:class:`gpsimd_build.profiles.WrapperDialect`.

The output is a pure function of its inputs: the same ops and dialect give the
same bytes (no timestamps, no paths, ops in manifest order, which is the
registration order the device loader sees).
"""

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from gpsimd_device import limits as _limits

from .opschema import wrapper_clash
from .profiles import WrapperDialect

#: Schema type -> (C++ parameter type of the kernel, marshalling entry that
#: pulls the argument), as the Neuron SDK's build driver maps them
#: (docs/kernel-api.md "The kernel's signature").
ARG_TYPE_MAP = {
    "Tensor": ("const at::Tensor&", "customop_next_tensor()"),
    "Scalar": ("const at::Scalar&", "customop_next_scalar()"),
    "int": ("int", "customop_next_int()"),
    "float": ("float", "customop_next_float()"),
    "long long": ("long long", "customop_next_longlong()"),
}

#: Default launcher stack in bytes: STACK_SIZE in stack_switch.hpp:16
#: (the Neuron SDK's build driver, build_custom_op.py). When an op keeps it, the launcher omits the
#: second argument of switch_stack_or_call_wrapper, exactly like the driver.
DEFAULT_STACK_SIZE = _limits.DEFAULT_STACK_SIZE

#: An op name must be shorter than this (the Neuron SDK's build driver, build_custom_op.py).
MAX_FUNCTION_NAME_LENGTH = _limits.MAX_NAME_LENGTH

BANNER = "// WARNING: AUTO GENERATED DO NOT EDIT\n"
INCLUDE = '#include "neuron/wrapper_api.h"\n'


class CodegenError(ValueError):
    """An op that the wrapper template cannot express (ARCHITECTURE.md
    "The generated wrapper")."""


@dataclass(frozen=True)
class WrapperOp:
    """What the template needs of one op.

    ``function`` is the kernel function's C++ name: the wrapper declares
    and calls it, names ``<function>_wrapper``/``<function>_stack_switch``
    after it, and ``get_func_name`` returns it, as the device loader's
    function list holds kernel names (the Neuron SDK's build driver, build_custom_op.py; the op name
    torch calls may differ: it lives in the shape source's ``m.def``),
    ``arg_types`` the schema's argument types in order (each a key of
    :data:`ARG_TYPE_MAP`), ``return_types`` the schema's return types, and
    ``stack_size`` the launcher stack in bytes (None or 4196: the default).
    """

    function: str
    arg_types: Tuple[str, ...]
    return_types: Tuple[str, ...] = ("Tensor",)
    stack_size: Optional[int] = None


def _check(op: WrapperOp) -> None:
    # The checks of the Neuron SDK's build driver (name length, return, types);
    # the manifest reports them with a location first, these keep codegen
    # honest when called directly.
    if len(op.function) >= MAX_FUNCTION_NAME_LENGTH:
        raise CodegenError(
            f"CustomOp function name is too long: '{op.function}' has "
            f"{len(op.function)} characters. Must be less than "
            f"{MAX_FUNCTION_NAME_LENGTH} characters.")
    if len(op.return_types) != 1:
        raise CodegenError(
            f"op '{op.function}': only a single return value is supported "
            f"(found {len(op.return_types)})")
    if op.return_types[0] != "Tensor":
        raise CodegenError(
            f"op '{op.function}': only Tensor return types are supported "
            f"(found '{op.return_types[0]}')")
    for t in op.arg_types:
        if t not in ARG_TYPE_MAP:
            raise CodegenError(f"op '{op.function}': argument type '{t}' "
                               f"is not supported by the device ABI")


def emit_op(op: WrapperOp, dialect: WrapperDialect) -> str:
    """Return the block of one op: forward declaration, wrapper, launcher.

    Raises CodegenError for an op the template cannot express.
    """
    _check(op)
    params = ", ".join(ARG_TYPE_MAP[t][0] for t in op.arg_types)
    next_calls = ", ".join(ARG_TYPE_MAP[t][1] for t in op.arg_types)
    fn = op.function
    stack_arg = ""
    if op.stack_size is not None and op.stack_size != DEFAULT_STACK_SIZE:
        stack_arg = f", {op.stack_size}"
    return (
        f"at::Tensor {fn}({params});\n"
        f"void {fn}_wrapper() {{\n"
        f"    customop_setup(true);\n"
        f"    at::Tensor output = {fn}( {next_calls} );\n"
        f"    customop_return_tensor(output);\n"
        f"    customop_cleanup();\n"
        f"    if (switched_stack)\n"
        f"        {dialect.switch_back}\n"
        f"}}\n"
        f"\n"
        f"int {fn}_stack_switch() {{\n"
        f"    return switch_stack_or_call_wrapper(({dialect.fnptr_cast}){fn}_wrapper{stack_arg});\n"
        f"}}\n"
    )


def emit_registration(functions: Sequence[str]) -> str:
    """Return the registration trio for ``functions`` in order."""
    names = "".join(f'        case {i}: return "{f}";\n'
                    for i, f in enumerate(functions))
    ptrs = "".join(f"        case {i}: return {f}_stack_switch;\n"
                   for i, f in enumerate(functions))
    return (
        f"int get_func_cnt() {{ return {len(functions)}; }}\n"
        f"\n"
        f"char const* get_func_name(int idx) {{\n"
        f"    switch (idx) {{\n"
        f"{names}"
        f"        default: return \"error\";\n"
        f"    }}\n"
        f"}}\n"
        f"\n"
        f"wrapper_fn get_func_ptr(int idx) {{\n"
        f"    switch (idx) {{\n"
        f"{ptrs}"
        f"        default: return 0;\n"
        f"    }}\n"
        f"}}\n"
    )


def emit_wrapper(ops: Sequence[WrapperOp], dialect: WrapperDialect) -> str:
    """Return the whole ``wrapper.cpp`` text of a library.

    ``ops`` in registration order (index i of get_func_name/get_func_ptr).
    Raises CodegenError for an empty library, a duplicate function name, or
    an op the template cannot express.
    """
    if not ops:
        raise CodegenError("a library needs at least one op")
    seen: List[str] = []
    for op in ops:
        if op.function in seen:
            raise CodegenError(f"duplicate op name '{op.function}'")
        clash = wrapper_clash(op.function, seen)
        if clash is not None:
            raise CodegenError(f"op names '{clash}' and '{op.function}' clash: the wrapper "
                               "defines <op>_wrapper and <op>_stack_switch for each op")
        seen.append(op.function)
    parts = [BANNER, INCLUDE, "\n"]
    for op in ops:
        parts.append(emit_op(op, dialect))
        parts.append("\n")
    parts.append(emit_registration([op.function for op in ops]))
    return "".join(parts)
