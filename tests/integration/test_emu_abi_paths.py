"""The marshalling ABI through the whole emulator pipeline: the Python device
model lays out memory and descriptors, the scons-built core objects run the
real host runtime (ARCHITECTURE.md "The device's marshalling" and "The
generated wrapper").

* one op per argument type and per ABI path (return-copy vs get_dst_tensor,
  HBM vs SBUF output, an output larger than the free dataram so the
  writeback is chunked), compared with numpy;
* every guard and failure provoked on purpose (some with descriptor bytes a
  correct host never writes, through ``run_vector(patch_image=...)``), each
  message asserted exactly as the FAIL line shows it, naming the op and the
  argument.
"""
import json
import struct

import numpy as np
import pytest

from conftest import ROOT, copy_built, run_scons
from gpsimd_device.plan import VectorPlan
from emu_run import format_line, load_plan, prepare_cores, run_vector

F32 = np.float32


@pytest.fixture(scope="module")
def libs(built_project, tmp_path_factory):
    """{"abi_paths": (plan, cores), "abi_multi": (plan, cores)}, built by scons
    in this module's copy of the shared build."""
    proj = copy_built(built_project[0], tmp_path_factory.mktemp("abi_paths") / "p")
    (proj / "probe").mkdir(exist_ok=True)
    (proj / "probe" / "abi_paths.cpp").write_text((ROOT / "tests/probe/abi_paths.cpp").read_text())
    one = {"name": "one", "inputs": {"x": {"dtype": "float32", "shape": [1], "values": [1.5]}},
           "expected": {"values": [3.0]}}
    ops = [
        {"schema": "t::ret_copy(Tensor x, float s) -> Tensor",
         "vectors": [{**one, "inputs": {**one["inputs"], "s": 2.0}}]},
        {"schema": "t::dst_inplace(Tensor x, Scalar a) -> Tensor",
         "vectors": [{**one, "inputs": {**one["inputs"], "a": 1.5}}]},
        {"schema": "t::all_types(Tensor x, int k, long long m, float f, Scalar s) -> Tensor",
         "vectors": [{**one, "inputs": {**one["inputs"], "k": 1, "m": 0, "f": 2.0, "s": -1}}]},
        {"schema": "t::read_extra(Tensor x) -> Tensor", "vectors": []},
        {"schema": "t::deep(Tensor x) -> Tensor", "vectors": []},
        {"schema": "t::hog(Tensor x, int mib) -> Tensor",
         "vectors": [{**one, "inputs": {**one["inputs"], "mib": 1}}]},
    ]
    for op in ops:  # a manifest op needs a vector; keep only the working ones
        if not op["vectors"]:
            op["vectors"] = [dict(one)]
    manifest = {"version": 1, "libraries": [
        {"name": "abi_paths", "sources": ["probe/abi_paths.cpp"], "ops": ops},
        {"name": "abi_multi", "multicore": True, "sources": ["probe/abi_paths.cpp"],
         "ops": [ops[-1]]}]}
    (proj / "abi.yaml").write_text(json.dumps(manifest, indent=1))
    proc = run_scons(proj, "-k", "MANIFEST=abi.yaml")
    out = proc.stdout + proc.stderr
    # read_extra and deep fail their placeholder vector by design
    assert "FAIL abi_paths::read_extra[one]" in out and "FAIL abi_paths::deep[one]" in out, out
    assert "abi_paths: 4 passed, 2 failed" in out, out
    got = {}
    for name in ("abi_paths", "abi_multi"):
        plan = load_plan(str(proj / f"build/host/{name}/testplan.json"))
        cores, error = prepare_cores(plan, str(proj))
        assert error is None
        got[name] = (plan, cores)
    yield proj, got
    for _, cores in got.values():
        for c in cores:
            c.close()


def _run(libs, op_name, inputs, expected, out=None, patch=None, lib="abi_paths"):
    proj, got = libs
    plan, cores = got[lib]
    op = next(o for o in plan.ops if o.name == op_name)
    vec = VectorPlan.from_json({"name": "v", "where": "test", "inputs": inputs,
                                "output": {"dtype": "float32", "shape": None, **(out or {})},
                                "expected": {"values": np.asarray(expected).tolist()},
                                "rtol": 0, "atol": 0}, "vector")
    r = run_vector(lib, op, vec, cores, root=str(proj), patch_image=patch,
                   zygote=str(proj / "build/host/emu/gpsimd-zygote"))
    return r, format_line(lib, r)


def _x(n, seed=1, location="hbm"):
    arr = np.random.default_rng(seed).uniform(-4, 4, n).astype(F32)
    return arr, {"kind": "tensor", "dtype": "float32", "shape": [n], "values": arr.tolist(),
                 "location": location}


def _scalar(type_, value, dtype):
    return {"kind": "scalar", "type": type_, "dtype": dtype, "value": value}


# ---- the paths -----------------------------------------------------------------------

@pytest.mark.parametrize("out_loc", ["hbm", "sbuf"])
@pytest.mark.parametrize("in_loc", ["hbm", "sbuf"])
def test_return_copy_path(libs, in_loc, out_loc):
    arr, x = _x(1000, location=in_loc)
    r, line = _run(libs, "ret_copy", {"x": x, "s": _scalar("float", 2.5, "float32")},
                   arr * F32(2.5), out={"location": out_loc})
    assert (r.status, r.mismatches, r.elements) == ("pass", 0, 1000), line


@pytest.mark.parametrize("out_loc", ["hbm", "sbuf"])
def test_writeback_larger_than_dataram_is_chunked(libs, out_loc):
    # 60013 float32 = 240052 bytes, five times the 48 KiB of free dataram
    arr, x = _x(60013, seed=3)
    r, line = _run(libs, "ret_copy", {"x": x, "s": _scalar("float", -0.75, "float32")},
                   arr * F32(-0.75), out={"location": out_loc})
    assert (r.status, r.mismatches, r.elements) == ("pass", 0, 60013), line


@pytest.mark.parametrize("out_loc", ["hbm", "sbuf"])
def test_get_dst_tensor_path_ignores_the_returned_value(libs, out_loc):
    arr, x = _x(4099, seed=4, location="sbuf")
    r, line = _run(libs, "dst_inplace", {"x": x, "a": _scalar("Scalar", 0.5, "float32")},
                   arr + F32(0.5), out={"location": out_loc})
    assert (r.status, r.mismatches, r.elements) == ("pass", 0, 4099), line


def test_every_argument_type(libs):
    arr, x = _x(13, seed=5)
    inputs = {"x": x, "k": _scalar("int", -7, "int32"), "m": _scalar("long long", 3000000000, "int64"),
              "f": _scalar("float", 0.5, "float32"), "s": _scalar("Scalar", 2, "int64")}
    want = (arr * F32(0.5)).astype(np.float64) + (-7 + 3000000000 + 2)
    r, line = _run(libs, "all_types", inputs, want.astype(F32))
    assert (r.status, r.mismatches) == ("pass", 0), line


# ---- the guards and failures ---------------------------------------------------------

def _all_types_inputs():
    _, x = _x(10, seed=6)
    return {"x": x, "k": _scalar("int", 1, "int32"), "m": _scalar("long long", 2, "int64"),
            "f": _scalar("float", 1.0, "float32"), "s": _scalar("Scalar", 1.0, "float32")}


def _patch_stream(edit):
    def patch(image):
        b = bytearray(image.arg_stream)
        edit(b)
        image.arg_stream = bytes(b)
    return patch


def _desc(i, offset):
    return 40 + 48 * i + offset


HEAD = "FAIL abi_paths::all_types[v] (test): core 0: "
GUARDS = {
    "type_not_tensor": (
        lambda b: b.__setitem__(8 + 2, 0),
        "fault ARG_STREAM in op all_types: arg_parser.hpp:67: assertion 'isa_args.get_types()[curr_arg_] == "
        "NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE_TENSOR' failed (argument index 2 (m: long long) of 5 has type 0)"),
    "num_args_over_max": (
        lambda b: struct.pack_into("<I", b, 0, 33),
        "fault ARG_STREAM in op all_types: arg_extractor.hpp:16: assertion 'num_args < max_args_' failed "
        "(the argument stream declares 33 arguments, at most 32 fit)"),
    "scalar_two_elements": (
        lambda b: struct.pack_into("<I", b, _desc(4, 32), 2),
        "fault SCALAR in op all_types: utypes.hpp:172: Cannot create an at::Scalar. Argument has more than "
        "1 element (argument index 4 (s: Scalar) of 5 has 2 elements)"),
    "unknown_scalar_type": (
        lambda b: b.__setitem__(_desc(0, 2), 11),
        "fault DTYPE in op all_types: Unknown ScalarType (ISA dtype 11 FP32R, argument index 0 (x: Tensor) of 5)"),
    "num_elem_mismatch": (
        lambda b: struct.pack_into("<I", b, _desc(0, 32), 9),
        "fault DESCRIPTOR in op all_types: argument index 0 (x: Tensor) of 5: shape [10] has 10 elements but "
        "num_elem is 9"),
    "bad_location": (
        lambda b: b.__setitem__(_desc(0, 0), 0),
        "fault DESCRIPTOR in op all_types: argument index 0 (x: Tensor) of 5: location 0 is neither SBUF (1) "
        "nor HBM (2)"),
    "bad_shape_type": (
        lambda b: b.__setitem__(_desc(0, 1), 3),
        "fault DESCRIPTOR in op all_types: argument index 0 (x: Tensor) of 5: framework_shape_type 3 is not "
        "INLINE_SHAPE8D (0), OUT_OF_LINE_SHAPE (1) or INLINE_SHAPE4D (2)"),
    "unmapped_scalar": (
        lambda b: struct.pack_into("<Q", b, _desc(1, 24), 0xDEAD0000),
        "fault UNMAPPED in op all_types: argument index 1 (k: int) of 5: device address 0xdead0000 is not "
        "mapped"),
}


@pytest.mark.parametrize("name", sorted(GUARDS))
def test_guard_messages(libs, name):
    edit, message = GUARDS[name]
    r, line = _run(libs, "all_types", _all_types_inputs(), np.zeros(10), patch=_patch_stream(edit))
    assert line == HEAD + message + "; elements never written: [0, 10)"


def test_reading_past_the_last_argument(libs):
    arr, x = _x(10)
    r, line = _run(libs, "read_extra", {"x": x}, arr)
    assert line == ("FAIL abi_paths::read_extra[v] (test): core 0: fault ARG_STREAM in op read_extra: "
                    "arg_parser.hpp:66: assertion 'curr_arg_ < isa_args.get_num()' failed (customop_next_tensor "
                    "reads argument index 1, the stream has 1 argument(s)); elements never written: [0, 10)")


def test_dtype_gate_on_the_writeback(libs):
    arr, x = _x(10)
    r, line = _run(libs, "ret_copy", {"x": x, "s": _scalar("float", 1.0, "float32")}, np.zeros(10),
                   out={"dtype": "int32"})
    assert line == ("FAIL abi_paths::ret_copy[v] (test): core 0: fault DTYPE in op ret_copy: utypes.hpp:65: "
                    "assertion 'aten_t.dtype().toScalarType() == isa_to_torch_dtype(t_.dtype)' failed (result "
                    "tensor is float32, the output descriptor is int32); elements never written: [0, 10)")


def test_bad_output_descriptor(libs):
    arr, x = _x(10)

    def patch(image):
        b = bytearray(image.out_desc)
        b[2] = 0
        image.out_desc = bytes(b)
    r, line = _run(libs, "ret_copy", {"x": x, "s": _scalar("float", 1.0, "float32")}, arr, patch=patch)
    assert line == ("FAIL abi_paths::ret_copy[v] (test): core 0: fault DTYPE in op ret_copy: Unknown ScalarType "
                    "(ISA dtype 0 INVALID, the output descriptor); elements never written: [0, 10)")


def test_stack_overflow_names_the_op_and_the_stack_size(libs):
    arr, x = _x(4)
    r, line = _run(libs, "deep", {"x": x}, np.full(4, 3.0))
    # 4196 device bytes x the model's stack_scale 16 = 67136, page-rounded
    assert line == ("FAIL abi_paths::deep[v] (test): core 0: fault STACK_OVERFLOW in op deep: stack overflow: "
                    "the wrapper's stack of 4196 bytes (host: 69632 bytes = 4196 x stack_scale 16, "
                    "page-rounded) is exhausted; raise STACK_SIZE (-DSTACK_SIZE=N); "
                    "elements never written: [0, 4)")


def test_scratch_window_single_core_32_mib(libs):
    arr, x = _x(8)
    r, _ = _run(libs, "hog", {"x": x, "mib": _scalar("int", 31, "int32")}, arr * F32(2))
    assert (r.status, r.mismatches) == ("pass", 0)
    r, line = _run(libs, "hog", {"x": x, "mib": _scalar("int", 33, "int32")}, arr * F32(2))
    assert line.startswith("FAIL abi_paths::hog[v] (test): core 0: fault SCRATCH_FULL in op hog: scratch window "
                           "full: cannot allocate 1048576 bytes in lsp_fll_load_cpu_single [0x84000000, "
                           "0x86000000) (33554432 bytes, 33554432 in use"), line


def test_scratch_window_multicore_2_mib_per_core(libs):
    arr, x = _x(8)
    r, line = _run(libs, "hog", {"x": x, "mib": _scalar("int", 3, "int32")}, arr * F32(2), lib="abi_multi")
    for i in range(8):
        lo = 0x84000000 + i * 0x200000
        assert (f"core {i}: fault SCRATCH_FULL in op hog: scratch window full: cannot allocate 1048576 bytes "
                f"in lsp_fll_load_cpu{i} [{lo:#x}, {lo + 0x200000:#x}) (2097152 bytes, 2097152 in use") in line
