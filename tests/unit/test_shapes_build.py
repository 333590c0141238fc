"""The registration check (gpsimd_build.regcheck) and the import command
(gpsimd_build.importer) without a compiler: exact located messages."""
import math

import pytest

from gpsimd_build.importer import ImportError_, find_load_call, manifest_text, registered_ops
from gpsimd_build.regcheck import check_registration
from gpsimd_device.shapes import RegisteredLibrary, RegisteredOp, Registration


def _op(op, kernel=None, params=(("TENSOR", "torch::Tensor"),), line=10):
    return RegisteredOp(op, kernel or op, "my_ops", "k/shape.cpp", line, f"{op}_shape(at::Tensor)",
                        tuple(params), "torch::Tensor", True, True)


def _facts(*ops):
    return {"library": "lib", "where": "ops.yaml:3:5", "shape_sources": ["k/shape.cpp"],
            "ops": [{"name": o, "kernel": o, "kernel_given": False, "where": f"ops.yaml:{7 + i}:9",
                     "derived": True, "namespace": None, "args": [["x", "Tensor"]]}
                    for i, o in enumerate(ops)]}


def test_more_than_ten_registrations():
    names = [f"op{i}" for i in range(11)]
    reg = Registration((RegisteredLibrary("my_ops", "k/shape.cpp", 5),),
                       tuple(_op(n, line=6 + i) for i, n in enumerate(names)))
    assert check_registration(_facts(*names), reg) == [
        "ops.yaml:3:5: library 'lib': its shape sources register 11 ops, more than the 10 "
        "functions a library may have (k/shape.cpp:16 is the 11th)"]


def test_builtin_and_missing_library():
    reg = Registration((RegisteredLibrary("builtin", "k/shape.cpp", 5),), (_op("a"),))
    assert check_registration(_facts("a"), reg) == [
        "ops.yaml:3:5: library 'lib': NEURON_LIBRARY(builtin, m) (k/shape.cpp:5): the name "
        "'builtin' is reserved"]
    assert check_registration(_facts("a"), Registration((), (_op("a"),))) == [
        "ops.yaml:3:5: library 'lib': its shape sources (k/shape.cpp) run no "
        "NEURON_LIBRARY(<name>, m) block: include \"torchneuron/register.h\" and register the "
        "ops in one"]


def test_parameter_kinds_name_the_guide_and_the_codegen():
    facts = _facts("a")
    facts["ops"][0]["args"] = [["x", "Tensor"], ["alpha", "float"]]
    reg = Registration((RegisteredLibrary("my_ops", "k/shape.cpp", 5),),
                       (_op("a", params=(("TENSOR", "torch::Tensor"), ("INT64", "int64_t"))),))
    assert check_registration(facts, reg) == [
        "ops.yaml:7:9: library 'lib', op 'a': parameter 2 of the shape function a_shape is "
        "'int64_t', but argument 'alpha' of the op's schema is float, which a shape function "
        "writes as double (the public guide's type) or float (the shipped codegen's, which "
        "hands the kernel a 32-bit float) (k/shape.cpp:10)"]
    reg = Registration((RegisteredLibrary("my_ops", "k/shape.cpp", 5),),
                       (_op("a", params=(("TENSOR", "torch::Tensor"), ("DOUBLE", "double"))),))
    assert check_registration(facts, reg) == []


BUILD = """import os
from torch_neuronx.xla_impl import custom_op

custom_op.load(
    name='relu',
    compute_srcs=SOURCES,
    shape_srcs=['shape.cpp'],
)
"""


@pytest.mark.parametrize("text,message", [
    (BUILD, "build.py:6:18: compute_srcs is not a literal (SOURCES): write the value itself, "
            "this command does not run build.py"),
    ("import os\n", "build.py:1:1: no custom_op.load(...) call: this command reads the "
                    "torch-neuronx call that builds one library"),
    ("custom_op.load(name='a')\ncustom_op.load(name='b')\n",
     "build.py:2:1: more than one custom_op.load(...) call (build.py:1:1, build.py:2:1): "
     "import one library at a time"),
    ("custom_op.load(name=\n", None),
])
def test_import_errors_are_located(text, message):
    with pytest.raises(ImportError_) as err:
        find_load_call("build.py", text)
    if message is None:
        assert str(err.value).startswith("build.py:1:") and "not valid Python" in str(err.value)
    else:
        assert str(err.value) == message


def test_import_scalars_and_cflags():
    call = find_load_call("b/build.py", "custom_op.load('axpy', ['k.cpp'], ['s.cpp'], '.', True,"
                                        " ['-DSTACK_SIZE=8192'])\n")
    shape = ("#include \"torchneuron/register.h\"\n"
             "torch::Tensor f(const torch::Tensor& x, torch::Scalar a, int64_t n) {\n"
             "  return torch::zeros(x.sizes(), torch::kFloat);\n}\n"
             "NEURON_LIBRARY(ops, m) { m.def(\"axpy\", &f, \"axpy_kernel\"); }\n")
    ops = registered_ops(call, {"s.cpp": shape})
    assert ops == [("axpy", [("x", "Tensor"), ("a", "Scalar"), ("n", "long long")])]
    text = manifest_text(call, ops, lambda p: p)
    head = ("libraries:\n  - name: axpy\n    multicore: true\n    sources: [k.cpp]\n"
            "    shape_sources: [s.cpp]\n    cflags: [\"-DSTACK_SIZE=8192\"]\n    ops:\n"
            "      - name: axpy\n")
    assert text.split("version: 1\n")[1] == head     # (not probed: no vectors)
    # probed: the ranks and dtypes learned, one element and 999 (no core
    # count divides it); scalars 1
    probed = {"axpy": {"ranks": {"x": 3}, "dtypes": {"x": "float16"}, "problem": None}}
    assert manifest_text(call, ops, lambda p: p, probed).split("version: 1\n")[1] == head + (
        "        vectors:\n"
        "          - name: one\n            inputs:\n"
        "              x: {dtype: float16, shape: [1, 1, 1], random: {}}\n"
        "              a: 1.0\n              n: 1\n"
        "          - name: uneven\n            inputs:\n"
        "              x: {dtype: float16, shape: [3, 9, 37], random: {}}\n"
        "              a: 1.0\n              n: 1\n")
    # an op the probe learned nothing for has none, and says why
    failed = {"axpy": {"status": "SKIPPED", "text": "SKIPPED ops::axpy: no schema"}}
    assert manifest_text(call, ops, lambda p: p, failed).split("version: 1\n")[1] == head + (
        "        # no vectors: the probe learned nothing (SKIPPED ops::axpy: no schema)\n")


def test_imported_shapes_have_the_rank_and_the_count():
    from gpsimd_build.import_probe import shape_of
    for rank in range(1, 9):
        for count in (1, 999):
            shape = shape_of(rank, count)
            assert len(shape) == rank and math.prod(shape) == count


SHAPE_CPP = """#include "torchneuron/register.h"
torch::Tensor neg_shape(const torch::Tensor& t_in, double scale) {
    return torch::zeros(t_in.sizes(), torch::kFloat);
}
#define WEIRD(x) x
torch::Tensor odd_shape(WEIRD(torch::Tensor) t) { return t; }
NEURON_LIBRARY(my_ops, m) {
    m.def("tensor_negate", &neg_shape, "tensor_negate_compute");
    m.def("odd", &odd_shape, "odd");
}
"""


def _load(tmp_path, ops, shape=True):
    import os
    from gpsimd_build.manifest import load_manifest
    os.chdir(tmp_path)   # (the tests' monkeypatch.chdir restores it)
    (tmp_path / "k.cpp").write_text("")
    (tmp_path / "shape.cpp").write_text(SHAPE_CPP)
    (tmp_path / "ops.yaml").write_text(
        "version: 1\nlibraries:\n  - name: lib\n    sources: [k.cpp]\n"
        + ("    shape_sources: [shape.cpp]\n" if shape else "") + "    ops:\n" + ops)
    return load_manifest("ops.yaml", root=str(tmp_path))


VEC = ("        vectors:\n          - name: v\n            inputs:\n"
       "              t_in: {dtype: float32, shape: [4], random: {}}\n"
       "              scale: 2.0\n")


def test_schema_and_kernel_from_the_shape_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lib = _load(tmp_path, "      - name: tensor_negate\n" + VEC).libraries[0]
    op = lib.ops[0]
    assert (op.name, op.function, str(op.schema), op.schema_derived) == (
        "tensor_negate", "tensor_negate_compute",
        "my_ops::tensor_negate(Tensor t_in, float scale) -> Tensor", True)
    assert lib.shape_sources == ("shape.cpp",)
    v = op.vectors[0]
    assert (v.output_dtype, v.output_shape, v.expected) == (None, None, None)


def test_schema_errors_without_shape_sources_or_with_an_unreadable_list(tmp_path, monkeypatch):
    from gpsimd_build.manifest.model import ManifestError
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ManifestError) as err:
        _load(tmp_path, "      - name: tensor_negate\n" + VEC, shape=False)
    assert str(err.value).splitlines()[0] == (
        "ops.yaml:6:9: $.libraries[0].ops[0]: an op needs schema: (it may be left out only in "
        "a library with shape_sources, whose shape function gives it)")
    with pytest.raises(ManifestError) as err:
        _load(tmp_path, "      - name: odd\n" + VEC)
    assert str(err.value).splitlines()[0].startswith(
        "ops.yaml:7:15: $.libraries[0].ops[0].name: parameter 1 't' of 'odd_shape' "
        "(shape.cpp:6) has type 'WEIRD ( torch::Tensor )', which no schema type stands for")
    assert str(err.value).splitlines()[0].endswith("give schema:")
