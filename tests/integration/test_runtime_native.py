"""Native tests of the host C++ runtime (runtime_model/src, runtime_model/include).

Builds, with the host profile's compile and link flags, the runtime archive
(libneuroncustomop.a), the wrapper the code generator emits for the test
kernels of tests/native/, one single-core object and eight multicore core
objects (each with the profile's LSP translation unit), and a driver program that
plays the device model: it dlopens core objects RTLD_LOCAL, lays out HBM,
argument streams and output descriptors at the abi.h offsets, binds a core and
launches ops.  Each scenario prints one JSON line; inputs/outputs land in
files that numpy checks here.
"""
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpsimd_build.codegen import WrapperOp, emit_wrapper
from gpsimd_build.profiles import (HOST_CXXFLAGS, HOST_DIALECT, HOST_LINKFLAGS, MULTICORE_LSPS,
                                   SINGLE_LSP, lsp_source)

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "runtime_model" / "include"
SRC = ROOT / "runtime_model" / "src"
NATIVE = ROOT / "tests" / "native"

CXX = shutil.which("g++")
CFLAGS = [*HOST_CXXFLAGS, "-I", str(INCLUDE)]
#: The ops of tests/native/kernels*.cpp, in registration order.
WRAPPER_OPS = [WrapperOp("relu", ("Tensor",)), WrapperOp("scale", ("Tensor", "float")),
               WrapperOp("axpy", ("Tensor", "Tensor", "Scalar")),
               WrapperOp("affine", ("Tensor", "int", "long long")), WrapperOp("probe", ("Tensor", "int"))]

pytestmark = pytest.mark.skipif(CXX is None, reason="g++ not available")



def _run(cmd, cwd=None):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"command failed: {' '.join(map(str, cmd))}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _compile(src, obj, extra=()):
    _run([CXX, *CFLAGS, *extra, "-c", src, "-o", obj])


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    b = tmp_path_factory.mktemp("native")
    rt_objs = []
    for cpp in sorted(SRC.glob("*.cpp")):
        obj = b / (cpp.stem + ".o")
        _compile(cpp, obj)
        rt_objs.append(obj)
    archive = b / "libneuroncustomop.a"
    _run(["ar", "rcsD", archive, *rt_objs])
    user_objs = []
    (b / "wrapper.cpp").write_text(emit_wrapper(WRAPPER_OPS, HOST_DIALECT))
    for src in (NATIVE / "kernels.cpp", NATIVE / "kernels_extra.cpp", b / "wrapper.cpp"):
        obj = b / (src.stem + ".o")
        _compile(src, obj)
        user_objs.append(obj)

    def link(out, spec):
        lsp_cpp = b / (out + ".lsp.cpp")
        lsp_cpp.write_text(lsp_source(spec))
        lsp_obj = b / (out + ".lsp.o")
        _compile(lsp_cpp, lsp_obj)
        _run([CXX, *HOST_LINKFLAGS, "-o", b / out, *user_objs, lsp_obj,
              "-Wl,--whole-archive", archive, "-Wl,--no-whole-archive"])

    link("lib_single.so", SINGLE_LSP)
    for i, spec in enumerate(MULTICORE_LSPS):
        link(f"lib_cpu{i}.so", spec)
    driver = b / "driver"
    _run([CXX, "-g", "-std=c++14", "-O2", "-Wall", "-Werror", "-I", INCLUDE, NATIVE / "driver.cpp", "-o", driver,
          "-ldl"])
    return b


def scenario(build, name, tmp_path):
    proc = subprocess.run([str(build / "driver"), str(tmp_path), str(build), name], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, f"driver crashed ({proc.returncode}): {proc.stderr}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["dir"] = tmp_path
    return result


def load(result, name, dtype):
    return np.fromfile(result["dir"] / f"{name}.bin", dtype=dtype)


def assert_ok(r):
    assert (r["bind_rc"], r["status"], r["report_status"], r["kind_name"], r["message"]) == (0, 0, 0, "NONE", "")


# ---- ops that work -----------------------------------------------------------

def test_relu_return_tensor_path(build, tmp_path):
    r = scenario(build, "relu_small", tmp_path)
    assert_ok(r)
    x = load(r, "x", np.float32)
    np.testing.assert_array_equal(load(r, "out", np.float32), np.maximum(x, 0))
    assert r["scratch_peak"] >= 4000  # the result tensor lived in the scratch window
    assert r["tcm_peak"] == 0


def test_output_larger_than_free_dataram_is_chunked(build, tmp_path):
    r = scenario(build, "relu_chunked", tmp_path)  # 60000 float32 = 240000 bytes > 48 KiB
    assert_ok(r)
    x = load(r, "x", np.float32)
    out = load(r, "out", np.float32)
    assert out.tobytes() == np.maximum(x, 0).astype(np.float32).tobytes()
    assert r["dataram_peak"] == 48 * 1024  # one staging buffer of all the free dataram
    assert r["scratch_peak"] == 240000


def test_scale_float_argument_and_tcm_accessor(build, tmp_path):
    r = scenario(build, "scale", tmp_path)
    assert_ok(r)
    x = load(r, "x", np.float32)
    np.testing.assert_array_equal(load(r, "out", np.float32), x * np.float32(1.75))
    assert r["tcm_peak"] == 4096


def test_get_dst_tensor_path_ignores_return_value(build, tmp_path):
    # the kernel returns an int32 tensor of one element: had the return value
    # not been ignored, the utypes.hpp:65 dtype gate would have fired
    r = scenario(build, "axpy", tmp_path)
    assert_ok(r)
    x, y = load(r, "x", np.float32), load(r, "y", np.float32)
    np.testing.assert_array_equal(load(r, "out", np.float32), np.float32(2.5) * x + y)
    assert r["dataram_peak"] == 0  # no staged writeback happened


def test_multicore_objects_have_private_state(build, tmp_path):
    r = scenario(build, "axpy_multicore", tmp_path)
    assert_ok(r)
    assert r["statuses"] == ",".join(["0:0"] * 8)
    x, y = load(r, "x", np.float32), load(r, "y", np.float32)
    np.testing.assert_array_equal(load(r, "out", np.float32), np.float32(2.5) * x + y)


def test_int_and_long_long_arguments_and_printf(build, tmp_path):
    r = scenario(build, "affine", tmp_path)
    assert_ok(r)
    x = load(r, "x", np.int64)
    np.testing.assert_array_equal(load(r, "out", np.int64), x * np.int64(30000000000) + np.int64(-7))
    text = "affine: k=-7 m=30000000000 n=100\n"
    assert (r["printf_total"], r["printf_len"], r["printf_head"]) == (len(text), len(text), 0)
    assert (r["dir"] / "printf.bin").read_text() == text


def test_sbuf_location_4d_and_out_of_line_shapes(build, tmp_path):
    r = scenario(build, "shape_forms", tmp_path)
    assert_ok(r)
    x = load(r, "x", np.float32)
    np.testing.assert_array_equal(load(r, "out", np.float32), x * np.float32(-2.0))


def test_second_launch_starts_fresh(build, tmp_path):
    r = scenario(build, "relaunch", tmp_path)
    assert_ok(r)
    assert r["first_status"] == 0
    assert r["scratch_peak"] == r["first_scratch_peak"]
    x = load(r, "x", np.float32)
    np.testing.assert_array_equal(load(r, "out", np.float32), np.maximum(x, 0))


def test_returning_an_input_copies_it(build, tmp_path):
    r = scenario(build, "return_input", tmp_path)
    assert_ok(r)
    np.testing.assert_array_equal(load(r, "out", np.float32), load(r, "x", np.float32))


def test_tcm_pool_exhaustion_returns_nullptr(build, tmp_path):
    r = scenario(build, "tcm_exhaust", tmp_path)
    assert_ok(r)
    # sixteen 1 KiB blocks fill the 16 KiB pool; 16385 bytes never fit; after
    # freeing, the whole pool is one block again
    np.testing.assert_array_equal(load(r, "out", np.float32), [16, 1, 1])
    assert r["tcm_peak"] == 16384


def test_factories_sizes_fill_eye_full(build, tmp_path):
    r = scenario(build, "factories", tmp_path)
    assert_ok(r)
    np.testing.assert_array_equal(load(r, "out", np.float32), [6 * 2.5 + 300 + 6, 5, 2, 1])


def test_printf_ring_keeps_the_newest_128_kib(build, tmp_path):
    r = scenario(build, "printf_ring", tmp_path)
    assert_ok(r)
    full = "".join(f"line {i % 10000:04d}\n" for i in range(20000))
    cap = 128 * 1024
    assert (r["printf_total"], r["printf_len"]) == (len(full), cap)
    assert r["printf_head"] == (len(full) - cap) % cap
    assert (r["dir"] / "printf.bin").read_text() == full[-cap:]


def test_stream_accessors(build, tmp_path):
    r = scenario(build, "streams", tmp_path)
    assert_ok(r)
    np.testing.assert_array_equal(load(r, "out", np.float32), np.float32(3) * load(r, "x", np.float32))
    assert r["tcm_peak"] == 2 * 4096  # each active stream holds 4 KiB of the TCM pool


def test_clamp_compares_uint64_elements_unsigned(build, tmp_path):
    # (a kernel cannot create a uint64 tensor: the input and the output are uint64)
    (tmp_path / "u").mkdir()
    (tmp_path / "s").mkdir()
    r = scenario(build, "clamp_u64", tmp_path / "u")
    assert_ok(r)
    u = np.array([5, 2000, 2**63 + 5, 2**64 - 1], dtype=np.uint64)
    np.testing.assert_array_equal(load(r, "out", np.uint64), np.clip(u, 0, 1000))
    r = scenario(build, "clamp_into_u64", tmp_path / "s")
    assert_ok(r)
    signed = np.clip(np.array([-5, 7], dtype=np.int64), 0, 1000)     # (into a uint64 result)
    np.testing.assert_array_equal(load(r, "out", np.uint64), signed.astype(np.uint64))


def test_elementwise_operations(build, tmp_path):
    r = scenario(build, "elementwise", tmp_path)
    assert_ok(r)
    x = load(r, "x", np.float32)
    out = load(r, "out", np.float32).reshape(24, 10)
    f = np.float32
    ax1 = np.abs(x) + f(1)
    xi = (x * f(10)).astype(np.int32)
    expected = [
        np.abs(x), np.ceil(x), np.floor(x), np.sin(x), np.cos(x), np.exp(x), np.clip(x, -1, 1.5),
        x + f(0.5) * (x * f(2)), x - f(1.5), x / f(4), x * x, np.power(f(2), x),
        np.log(ax1), np.log2(ax1), np.log10(ax1),
        xi & 0xF, xi | 0x30, ~xi, xi * xi, xi ** 2, xi.astype(np.float32) / f(4), x - f(2) * np.abs(x),
        np.clip(x, np.nan, 1.5), np.clip(x, -1, np.nan),    # (NaN: torch.clamp's rule too)
    ]
    assert np.isnan(out[22:]).all()
    for row, want in enumerate(expected):
        np.testing.assert_allclose(out[row], np.asarray(want, dtype=np.float32), rtol=2e-6, atol=1e-6,
                                   err_msg=f"row {row}")


# ---- faults ----------------------------------------------------------------

FAULTS = {
    "scalar_two_elements": ("SCALAR", "utypes.hpp:172: Cannot create an at::Scalar. Argument has more than 1 "
                                      "element (argument index 2 of 3 has 2 elements)"),
    "past_arg_count": ("ARG_STREAM", "arg_parser.hpp:66: assertion 'curr_arg_ < isa_args.get_num()' failed "
                                     "(customop_next_float reads argument index 1, the stream has 1 argument(s))"),
    "bad_arg_type": ("ARG_STREAM", "arg_parser.hpp:67: assertion 'isa_args.get_types()[curr_arg_] == "
                                   "NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE_TENSOR' failed (argument index 1 of 2 has type 0)"),
    "too_many_args": ("ARG_STREAM", "arg_extractor.hpp:16: assertion 'num_args < max_args_' failed "
                                    "(the argument stream declares 33 arguments, at most 32 fit)"),
    "dtype_gate": ("DTYPE", "utypes.hpp:65: assertion 'aten_t.dtype().toScalarType() == "
                            "isa_to_torch_dtype(t_.dtype)' failed (result tensor is float32, the output descriptor "
                            "is int32)"),
    "fp32r": ("DTYPE", "Unknown ScalarType (ISA dtype 11 FP32R, argument index 0 of 2)"),
    "shape_mismatch": ("DESCRIPTOR", "argument index 0 of 2: shape [10] has 10 elements but num_elem is 9"),
    "unmapped": ("UNMAPPED", "argument index 0 of 2: device address 0xdead0000 is not mapped"),
    "accessor_oor": ("OUT_OF_RANGE", "accessor<float,1> out of range: offset 10, count 1, numel 10"),
    "accessor_oor_2d": ("OUT_OF_RANGE", "accessor<float,2> out of range: offset 7, count 1, numel 6"),
    "tcm_oor": ("OUT_OF_RANGE", "tensor_to_tcm<float> out of range: offset 8, count 4, numel 10"),
    "tcm_past_block": ("TCM", "tensor_to_tcm<float> of 12 bytes at 0x80000 runs 2 bytes past the end of its "
                              "10-byte tcm_malloc block at 0x80000"),
    "tcm_freed_block": ("TCM", "tcm_to_tensor<float> of 4 bytes at 0x80000: no live block of tcm_malloc holds "
                               "that address (freed?)"),
    "dataram_past_block": ("DATARAM", "neuron_memcpy (dataram destination) of 64 bytes at 0x84000 runs 48 bytes "
                                      "past the end of its 16-byte neuron_dataram_allocate block at 0x84000"),
    "accessor_dtype": ("DTYPE", "accessor<int32_t> on a float32 tensor"),
    "stream_oor": ("OUT_OF_RANGE", "read_stream_accessor<float> out of range: offset 10, count 1, numel 10"),
    "cxx_exception": ("CXX_EXCEPTION", "C++ exception: boom"),
    "too_many_dims": ("SHAPE", "torch::zeros: 9 dimensions, the device allows at most 8"),
    "dim_too_big": ("SHAPE", "torch::zeros: dimension 0 has size 70000, the device allows 0..65535 "
                                "for a tensor of 5 dimensions"),
    "elementwise_shape": ("SHAPE", "add: other shape [3] does not match [10] (no broadcasting on the device)"),
    "lsp_mismatch": ("LSP_MISMATCH", "object linked with lsp_fll_load_cpu3 loaded on core 5"),
    "lsp_single_on_multicore": ("LSP_MISMATCH",
                                "object linked with lsp_fll_load_cpu_single (single-core) loaded on core 2 of 8"),
    "lsp_core_count": ("LSP_MISMATCH",
                       "object linked with lsp_fll_load_cpu3 (multicore) bound with core_count 1, expected 8"),
    "segv": ("SEGV", "SIGSEGV: invalid memory access at address 0x10"),
    # third 16 MiB tensor in the 32 MiB single-core window: 2 * 16776960 bytes in use
    "scratch_full": ("SCRATCH_FULL", "scratch window full: cannot allocate 16776960 bytes in lsp_fll_load_cpu_single "
                                     "[0x84000000, 0x86000000) (33554432 bytes, 33553920 in use, largest free "
                                     "block 512)"),
}

FAULT_KIND_VALUES = {"BINDING": 1, "LSP_MISMATCH": 2, "ARG_STREAM": 3, "DESCRIPTOR": 4, "DTYPE": 5, "SCALAR": 6,
                     "SHAPE": 7, "UNMAPPED": 8, "OUT_OF_RANGE": 9, "SCRATCH_FULL": 10, "DATARAM": 11, "TCM": 12,
                     "STACK_OVERFLOW": 13, "CXX_EXCEPTION": 14, "UNDEFINED_TENSOR": 15, "BAD_ARGUMENT": 16,
                     "UNSUPPORTED": 17, "INTERNAL": 18, "SEGV": 19, "TCM_NULL": 20,
                     "MULTICORE": 21, "COHERENCE": 22, "SHAPE_FUNCTION": 23}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fault_messages(build, tmp_path, name):
    kind, message = FAULTS[name]
    r = scenario(build, name, tmp_path)
    assert r["status"] == 1 and r["report_status"] == 1
    assert (r["kind_name"], r["kind"]) == (kind, FAULT_KIND_VALUES[kind])
    assert r["message"] == message
    if kind == "LSP_MISMATCH":
        assert r["bind_rc"] == 2
    else:
        assert r["bind_rc"] == 0


def test_double_tcm_free(build, tmp_path):
    r = scenario(build, "tcm_double_free", tmp_path)
    assert (r["status"], r["kind_name"]) == (1, "TCM")
    assert re.fullmatch(r"tcm_free\(0x[0-9a-f]+\): double free \(TCM pool offset 0\)", r["message"])


def test_tcm_free_of_foreign_pointer(build, tmp_path):
    r = scenario(build, "tcm_foreign_free", tmp_path)
    assert (r["status"], r["kind_name"]) == (1, "TCM")
    assert re.fullmatch(r"tcm_free\(0x[0-9a-f]+\): pointer not from tcm_malloc", r["message"])


def test_stack_overflow_is_reported(build, tmp_path):
    r = scenario(build, "stack_overflow", tmp_path)
    assert (r["status"], r["kind_name"]) == (1, "STACK_OVERFLOW")
    assert r["message"].startswith("stack overflow: the wrapper's stack of 4196 bytes (host: 36864 bytes = "
                                   "4196 x stack_scale 8, page-rounded)")


def test_fault_kind_table_is_stable():
    text = (INCLUDE / "gpsimd_host" / "faults.h").read_text()
    table = dict((m.group(1), int(m.group(2))) for m in re.finditer(r"X\((\w+),\s*(\d+)\)", text))
    assert table == {"NONE": 0, **FAULT_KIND_VALUES}


# ---- number formats ------------------------------------------------------------

def _conversion_inputs():
    rng = np.random.default_rng(5)
    vals = [rng.standard_normal(2000).astype(np.float32) * np.float32(s) for s in (1e-6, 1e-3, 1, 30, 1e4)]
    special = np.array([0.0, -0.0, 1.0, -1.0, 65504, 65519.99, 65520, 1e6, -1e6, 5.96e-8, 2.98e-8, 2.99e-8,
                        6.1e-5, 1e-40, np.inf, -np.inf, np.nan, 240, 248, 256, 57344, 61440, 15.5, 16, 31,
                        0.0009765625, 1.0009765625, 1.00048828125, 1.00146484375, 3.4e38], dtype=np.float32)
    # exact ties of each target format
    ties = (np.arange(1, 2048, dtype=np.uint32) << 12 | 0x3F800800).view(np.float32)
    return np.concatenate(vals + [special, ties])


@pytest.mark.parametrize("fmt", ["f16", "bf16", "e3m4", "e4m3", "e5m2"])
def test_half_bfloat16_fp8_conversions_are_bit_exact(build, tmp_path, fmt):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    types = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e3m4": getattr(ml_dtypes, "float8_e3m4", None),
             "e4m3": getattr(ml_dtypes, "float8_e4m3", None), "e5m2": ml_dtypes.float8_e5m2}
    if types[fmt] is None:
        pytest.skip(f"ml_dtypes has no {fmt}")
    x = _conversion_inputs()
    x.tofile(tmp_path / "conv_in.bin")
    proc = subprocess.run([str(build / "driver"), str(tmp_path), str(build), "conversions"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    bits_dtype = np.uint16 if fmt in ("f16", "bf16") else np.uint8
    got = np.fromfile(tmp_path / f"conv_{fmt}.bin", dtype=bits_dtype)
    with np.errstate(over="ignore"):
        want = x.astype(types[fmt]).view(bits_dtype)
    nan = np.isnan(x)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.all(np.isnan(got.view(types[fmt]).astype(np.float32)[nan]))
    back = np.fromfile(tmp_path / f"back_{fmt}.bin", dtype=np.float32)
    np.testing.assert_array_equal(back[~nan], want.view(types[fmt]).astype(np.float32)[~nan])


# ---- the headers reject what the device API does not allow ------------------------

COMPILE_FAIL = {
    "write through a const tensor's accessor": (
        "at::Tensor f(const at::Tensor& x) { x.accessor<float,1>()[0] = 1; return x; }", "read-only"),
    "tcm_to_tensor on a const tensor": (
        "at::Tensor f(const at::Tensor& x) { float b[4]; x.tcm_accessor().tcm_to_tensor<float>(b, 0, 4); return x; }",
        "tcm_to_tensor"),
    "float64 dtype": ("at::Tensor f() { return torch::zeros({2}, torch::kDouble); }", "kDouble"),
    "accessor<double>": ("at::Tensor f(at::Tensor x) { x.accessor<double,1>(); return x; }", "float64"),
    "factory without dtype": ("at::Tensor f() { return torch::zeros({2}); }", "zeros"),
    "write_stream_accessor on a const tensor": (
        "at::Tensor f(const at::Tensor& x) { auto s = x.write_stream_accessor<float>(); return x; }",
        "write_stream_accessor"),
    "data_ptr is not device API": ("at::Tensor f(at::Tensor x) { x.data_ptr<float>(); return x; }", "data_ptr"),
}
#: Host PyTorch's members and factories the device's API has not: each is a
#: compile error saying so (the runtime's own sources reach what they need).
NOT_IN_DEVICE_API = "is not in the device's API"
for _call in ("x.size(0)", "x.stride(0)", "x.options()", "x.nbytes()", "x.element_size()", "x.itemsize()",
              "x.defined()", "x.ndimension()", "x.unsafeGetTensorImpl()", "torch::eye(3, torch::kFloat)"):
    COMPILE_FAIL[f"{_call} is not device API"] = (
        f"at::Tensor f(at::Tensor x) {{ (void){_call}; return x; }}", NOT_IN_DEVICE_API)
COMPILE_FAIL["neuron_hbm_deallocate is not device API"] = (
    "#include <custom_op.h>\nat::Tensor f(at::Tensor x) { neuron_hbm_deallocate(neuron_hbm_allocate(64)); return x; }",
    "neuron_hbm_deallocate")


@pytest.mark.parametrize("case", sorted(COMPILE_FAIL))
def test_headers_reject(tmp_path, case):
    body, needle = COMPILE_FAIL[case]
    src = tmp_path / "k.cpp"
    src.write_text("#include <torch/torch.h>\n#include <neuron/neuron-utils.hpp>\n" + body + "\n")
    proc = subprocess.run([CXX, *CFLAGS, "-fsyntax-only", str(src)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert needle in proc.stderr


def test_headers_accept_device_api_usage(tmp_path):
    src = tmp_path / "k.cpp"
    src.write_text("""
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>
#include <custom_op.h>
torch::Tensor f(const torch::Tensor& x, const torch::Scalar& s) {
    size_t num_elem = x.numel();
    uint16_t n16 = 3;
    torch::Tensor a = torch::zeros({num_elem}, torch::kFloat);
    torch::Tensor b = torch::ones({n16, n16}, torch::TensorOptions().dtype(torch::kBFloat16));
    torch::Tensor c = torch::full(x.sizes(), s, x.scalar_type());
    torch::Tensor d = torch::eye(3, 4, at::kInt);
    torch::Tensor e = torch::empty(std::vector<int64_t>{2, 3}, torch::dtype(torch::kHalf));
    c10::Half h = 1.5f; c10::BFloat16 bf = float(h); float back = bf; (void)back;
    auto ra = x.accessor<float, 1>(); float v = ra[0];
    auto wa = a.accessor<float, 1>(); wa[0] = v + s.toFloat() + float(s.to<int>());
    auto t = x.tcm_accessor(); float buf[4]; t.tensor_to_tcm<float>(buf, 0, 4);
    auto w = a.tcm_accessor(); w.tcm_to_tensor<float>(buf, 0, 4);
    void* p = torch::neuron::tcm_malloc(64); torch::neuron::tcm_free(p);
    a = torch::add(a, torch::mul(a, 2.0f), 0.5);
    torch::Tensor& r = torch::clamp_out(a, a, 0, 1);
    for (int64_t dim : b.sizes()) (void)dim;
    auto rs = x.read_stream_accessor<float>(); float first = rs.read(); rs.close(); (void)first;
    auto ws = a.write_stream_accessor<float>(); ws.write(1.0f);
    a.set_accessor_coherence_policy(torch::neuron::INCOHERENT_QUIET);
    (void)(a.get_accessor_coherence_policy() == torch::neuron::COHERENT);
    if (x.dtype() == torch::kFloat && x.scalar_type() == at::ScalarType::Float && x.dim() == 1) c.fill_(2);
    uint64_t hbm = neuron_hbm_allocate(64);
    void* stage; uint32_t free_bytes;
    neuron_dataram_max_free_space(&free_bytes); neuron_dataram_allocate(64, &stage);
    neuron_memcpy(stage, hbm, 64); neuron_memcpy(hbm, stage, 64); neuron_dataram_deallocate(stage);
    (void)neuron_translate(neuron_translate_ctx(), hbm);
    torch::Q7PtrType q = x.q7_data_ptr();
    const float* raw = static_cast<const float*>(neuron_translate(q.ctx, q.hbm_addr)); (void)raw;
    (void)q.is_nullptr; (void)x.strides()[0];
    (void)d; (void)e; (void)get_cpu_id(); (void)get_cpu_count();
    return r;
}
""")
    _run([CXX, *CFLAGS, "-fsyntax-only", src])


def test_stack_size_override_compiles(tmp_path):
    (tmp_path / "wrapper.cpp").write_text(emit_wrapper(WRAPPER_OPS, HOST_DIALECT))
    _run([CXX, *CFLAGS, "-DSTACK_SIZE=65536", "-c", tmp_path / "wrapper.cpp", "-o", tmp_path / "w.o"])
