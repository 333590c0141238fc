"""Shape functions through the build (issue 16), on a small project laid
out like AWS's public relu sample (``tests/data/aws_like``: a kernel file,
``shape.cpp`` with ``NEURON_LIBRARY``, ``build.py`` calling
``custom_op.load``): the import command, the registration check, the
kernel name in the wrapper, derived schemas, outputs from the shape
functions, checks-only vectors."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, copy_project, run_scons

SAMPLE = ROOT / "tests" / "data" / "aws_like"

SHAPED = """\
version: 1
libraries:
  - name: relu
    sources: [sample/relu.cpp]
    shape_sources: [sample/shape.cpp]
    ops:
      - name: relu_forward
        reference: sample/reference.py:relu_forward
        vectors:
          - name: n1000
            inputs:
              t_in: {dtype: float32, shape: [1000], random: {distribution: normal}}
      - name: relu_backward
        reference: sample/reference.py:relu_backward
        vectors:
          - name: n17
            inputs:
              t_grad: {dtype: float32, shape: [17], random: {}}
              t_in: {dtype: float32, shape: [17], random: {}}
      - name: tensor_negate
        vectors:
          - name: checks_only
            inputs:
              t_in: {dtype: float32, shape: [12], random: {}}
          - name: nested_values
            inputs:
              t_in: {dtype: float32, shape: [12], random: {}}
            expected: {values: [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]}
          - name: ref_2d
            inputs:
              t_in: {dtype: float32, shape: [12], random: {}}
            expected: {reference: sample/reference.py:negate_2d}
          - name: ref_f64
            inputs:
              t_in: {dtype: float32, shape: [12], random: {}}
            expected: {reference: sample/reference.py:negate_f64}
          - name: out_given
            inputs:
              t_in: {dtype: float32, shape: [12], random: {}}
            output: {shape: [3, 4]}
          - name: rank2
            inputs:
              t_in: {dtype: float32, shape: [3, 4], random: {}}
            expected: {reference: sample/reference.py:tensor_negate}
  - name: peek
    sources: [sample/relu.cpp]
    shape_sources: [sample/peek_shape.cpp]
    ops:
      - name: relu_forward
        reference: sample/reference.py:relu_forward
        vectors:
          - name: n4
            inputs:
              t_in: {dtype: float32, shape: [4], random: {}}
"""

PEEK_SHAPE = """\
#include <torch/torch.h>
#include "torchneuron/register.h"

// A shape function may not read its inputs' data (they have none when it runs).
torch::Tensor peek_shape(torch::Tensor t_in) {
    auto acc = t_in.accessor<float, 1>();
    return torch::zeros({(int64_t)acc[0]}, torch::kFloat);
}

NEURON_LIBRARY(peek_ops, m) {
    m.def("relu_forward", &peek_shape, "relu_forward");
}
"""

BAD_SHAPE = """\
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor relu_fwd_shape(torch::Tensor t_in, double alpha) {
    return torch::zeros(t_in.sizes(), torch::kFloat);
}

torch::Tensor relu_bwd_shape(torch::Tensor t_grad, int64_t t_in) {
    return torch::zeros(t_grad.sizes(), torch::kFloat);
}

torch::Tensor extra_shape(torch::Tensor t_in) {
    return torch::zeros(t_in.sizes(), torch::kFloat);
}

NEURON_LIBRARY(my_ops, m) {
    m.def("relu_forward", &relu_fwd_shape, "relu_forward");
    m.def("relu_backward", &relu_bwd_shape, "relu_backward");
    m.def("extra", &extra_shape, "extra");
    m.def("tensor_negate", &extra_shape, "negate_kernel");
}
"""

BAD = """\
version: 1
libraries:
  - name: relu
    sources: [sample/relu.cpp]
    shape_sources: [bad/shape.cpp]
    ops:
      - schema: "my_ops::relu_forward(Tensor t_in) -> Tensor"
        vectors:
          - name: n4
            inputs:
              t_in: {dtype: float32, shape: [4], random: {}}
      - schema: "other::relu_backward(Tensor t_grad, Tensor t_in) -> Tensor"
        vectors:
          - name: n4
            inputs:
              t_grad: {dtype: float32, shape: [4], random: {}}
              t_in: {dtype: float32, shape: [4], random: {}}
      - name: tensor_negate
        kernel: tensor_negate_compute
        vectors:
          - name: n4
            inputs:
              t_in: {dtype: float32, shape: [4], random: {}}
"""

REFERENCES = """

def negate_2d(x):
    return (-x).reshape(3, 4).astype(np.float32)


def negate_f64(x):
    return -x.astype(np.float64)
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The project with the sample, and one build of SHAPED."""
    proj = copy_project(tmp_path_factory.mktemp("shapes"))
    shutil.copytree(SAMPLE, proj / "sample")
    with open(proj / "sample" / "reference.py", "a") as f:
        f.write(REFERENCES)
    (proj / "sample" / "peek_shape.cpp").write_text(PEEK_SHAPE)
    (proj / "shaped.yaml").write_text(SHAPED)
    (proj / "bad").mkdir()
    (proj / "bad" / "shape.cpp").write_text(BAD_SHAPE)
    (proj / "bad.yaml").write_text(BAD)
    return proj, run_scons(proj, "-k", "MANIFEST=shaped.yaml")


def _lines(proc, *starts):
    return [l for l in (proc.stdout + proc.stderr).splitlines() if l.startswith(starts)]


def _in_library_order(lines, libraries):
    """``lines`` (a build's PASS/FAIL lines) with each library's together,
    in the order of ``libraries``: under -j2 two libraries' test runs end in
    either order; each keeps its lines in its own order."""
    return sorted(lines, key=lambda l: libraries.index(re.search(r"(\w+)::", l).group(1)))


def test_outputs_come_from_the_shape_functions(project):
    proj, proc = project
    same = ("(the runtime allocates the output from the shape function: fix the one that is "
            "wrong)")
    fn = "the shape function negate_shape (m.def at sample/shape.cpp:24)"
    assert _in_library_order(_lines(proc, "PASS", "FAIL", "CHECKED"), ["relu", "peek"]) == [
        "PASS relu::relu_forward[n1000] (shaped.yaml:10:13): max_abs_err 0 over 1000 elements",
        "PASS relu::relu_backward[n17] (shaped.yaml:16:13): max_abs_err 0 over 17 elements",
        "CHECKED (no reference) relu::tensor_negate[checks_only] (shaped.yaml:22:13): every "
        "check passed, nothing compared",
        "FAIL relu::tensor_negate[nested_values] (shaped.yaml:25:13): the expected result (the "
        f"vector's expected values) has shape [3, 4], but {fn} gives [12] {same}",
        "FAIL relu::tensor_negate[ref_2d] (shaped.yaml:29:13): the expected result (the "
        f"reference sample/reference.py:negate_2d) has shape [3, 4], but {fn} gives [12] {same}",
        "FAIL relu::tensor_negate[ref_f64] (shaped.yaml:33:13): the expected result (the "
        f"reference sample/reference.py:negate_f64) has dtype float64, but {fn} gives float32 "
        f"{same}",
        "FAIL relu::tensor_negate[out_given] (shaped.yaml:37:13): the vector's output gives "
        f"shape [3, 4], but {fn} gives [12] (the runtime allocates the output from the shape "
        "function)",
        # the kernel returns a 1-D tensor for a 2-D output: copied by element count, a warning
        "PASS relu::tensor_negate[rank2] (shaped.yaml:41:13): max_abs_err 0 over 12 elements; "
        "warning: core 0: the kernel returned a tensor of shape [12] for an output descriptor "
        "of shape [3, 4] (same 12 elements: the runtime copies by element count)",
        "FAIL peek::relu_forward[n4] (shaped.yaml:52:13): the shape function peek_shape (m.def "
        "at sample/peek_shape.cpp:11) faulted: SHAPE_FUNCTION: accessor<float,1>() in a shape "
        "function: a shape function runs on the host while the model compiles, on tensors "
        "that have sizes and a dtype but no data; it may use sizes(), numel(), dim(), "
        "scalar_type() and the factories (docs/shape-functions.md)",
    ]
    assert _lines(proc, "all libraries") == [
        "all libraries: 3 passed, 5 failed, 1 CHECKED (no reference)"]
    plan = (proj / "build/host/relu/testplan.shaped.json").read_text()
    assert '"source":"the shape function relu_fwd_shape (m.def at sample/shape.cpp:22)"' in plan


def test_the_wrapper_is_emitted_for_the_kernel_name(project):
    proj, _ = project
    text = (proj / "build/host/relu/wrapper.cpp").read_text()
    assert "at::Tensor tensor_negate_compute(const at::Tensor&);" in text
    assert "void tensor_negate_compute_wrapper() {" in text
    assert "int tensor_negate_compute_stack_switch() {" in text
    assert 'case 2: return "tensor_negate_compute";' in text
    assert "tensor_negate(" not in text and '"tensor_negate"' not in text
    report = (proj / "build/host/relu/stack-report.txt").read_text().splitlines()
    assert report[2].startswith("relu::tensor_negate: worst static stack chain ")
    assert " of 4196 (tensor_negate_compute_wrapper -> " in report[2]


def test_the_registration_check_passes_and_says_what_it_read(project):
    proj, _ = project
    assert (proj / "build/host/relu/shapes/registration-check.txt").read_text() == (
        "relu: registration matches the manifest\n"
        "  relu_forward -> kernel relu_forward (shape function relu_fwd_shape, "
        "sample/shape.cpp:22)\n"
        "  relu_backward -> kernel relu_backward (shape function relu_bwd_shape, "
        "sample/shape.cpp:23)\n"
        "  tensor_negate -> kernel tensor_negate_compute (shape function negate_shape, "
        "sample/shape.cpp:24)\n")
    # the shape library is its own node; no core object holds a shape function
    assert (proj / "build/host/relu/shapes/relu_shapes.so").is_file()
    core = (proj / "build/host/relu/relu.so").read_bytes()
    assert b"relu_fwd_shape" not in core and b"NEURON_LIBRARY" not in core


def test_scons_schemas_prints_the_derived_schemas(project):
    proj, _ = project
    proc = run_scons(proj, "MANIFEST=shaped.yaml", "schemas", "-Q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [l for l in proc.stdout.splitlines() if "::" in l] == [
        "my_ops::relu_forward(Tensor t_in) -> Tensor   # derived from its shape function",
        "my_ops::relu_backward(Tensor t_grad, Tensor t_in) -> Tensor   # derived from its "
        "shape function",
        "my_ops::tensor_negate(Tensor t_in) -> Tensor   # derived from its shape function; "
        "kernel tensor_negate_compute",
        "peek_ops::relu_forward(Tensor t_in) -> Tensor   # derived from its shape function",
    ]


def test_registration_mismatches_are_located_errors(project):
    proj, _ = project
    # (a build folder of its own: the module's build stays as it was built)
    proc = run_scons(proj, "MANIFEST=bad.yaml", "BUILD_DIR=build-bad",
                     "build-bad/host/relu/shapes/registration-check.txt")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    at = "(bad/shape.cpp:"
    assert _lines(proc, "bad.yaml") == [
        "bad.yaml:7:9: library 'relu', op 'relu_forward': the shape function relu_fwd_shape "
        "takes 2 parameter(s) (torch::Tensor, double), but the op's schema has 1 argument(s) "
        f"(Tensor t_in) {at}17): a shape function has the kernel's parameters",
        "bad.yaml:12:9: library 'relu', op 'relu_backward': the schema's namespace 'other' is "
        f"not the library's NEURON_LIBRARY name 'my_ops' {at}16): torch calls the op as "
        "torch.ops.<that name>.<op>",
        "bad.yaml:12:9: library 'relu', op 'relu_backward': parameter 2 of the shape function "
        "relu_bwd_shape is 'int64_t', but argument 't_in' of the op's schema is Tensor, which "
        f"a shape function writes as torch::Tensor (by value, const&, &) {at}18)",
        "bad.yaml:18:9: library 'relu', op 'tensor_negate': kernel: 'tensor_negate_compute' "
        "disagrees with the registration m.def(\"tensor_negate\", &extra_shape, "
        f"\"negate_kernel\") {at}20): the kernel name is the m.def's third argument; change "
        "one of them",
        "bad.yaml:3:5: library 'relu': m.def(\"extra\", &extra_shape, \"extra\") "
        f"{at}19) registers op 'extra', which the manifest does not list (its ops: "
        "relu_forward, relu_backward, tensor_negate): add it or remove the m.def",
    ]
    assert not (proj / "build-bad/host/relu/shapes/registration-check.txt").exists()


def test_import_prints_a_manifest_that_builds_and_runs(tmp_path):
    proj = copy_project(tmp_path / "proj")
    shutil.copytree(SAMPLE, proj / "mig")
    (proj / "mig" / "reference.py").unlink()
    build = proj / "mig" / "build.py"
    # never run: running it would leave RAN behind (and import torch_neuronx)
    build.write_text("open('RAN', 'w').close()\n" + build.read_text())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(["site_scons", "runtime_model"]))
    got = subprocess.run([sys.executable, "-m", "gpsimd_build", "import", "mig/build.py"],
                         cwd=proj, env=env, capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert got.stdout == (
        "# Imported from build.py (custom_op.load at line 6) by\n"
        "# gpsimd-import.\n"
        "# The vectors have the ranks and dtypes the kernels did not refuse when\n"
        "# probed (explore's probe; a comment marks an op whose probe failed for\n"
        "# another reason) and sizes that expose partition bugs: 1 element, and 999\n"
        "# (no core count divides it). They have no expected result: they run every\n"
        "# emulator check and report CHECKED (no reference), never PASS. To compare\n"
        "# values, give an op `reference: file.py:function` (a numpy function of the\n"
        "# inputs, in the order of the shape function's parameters) or a vector\n"
        "# `expected: {values: [...]}`.\n"
        "version: 1\nlibraries:\n  - name: relu\n    multicore: false\n"
        "    sources: [relu.cpp]\n    shape_sources: [shape.cpp]\n    ops:\n"
        + "".join(f"      - name: {op}\n        vectors:\n" + "".join(
            f"          - name: {name}\n            inputs:\n" + "".join(
                f"              {arg}: {{dtype: float32, shape: [{n}], random: {{}}}}\n"
                for arg in args) for name, n in (("one", 1), ("uneven", 999)))
            for op, args in (("relu_forward", ["t_in"]), ("relu_backward", ["t_grad", "t_in"]),
                             ("tensor_negate", ["t_in"]))))
    assert not (proj / "RAN").exists() and not (proj / "mig" / "RAN").exists()
    # (the probe built the library in the manifest's folder, under build/)
    assert (proj / "mig/build/host/relu/explore.json").is_file()
    (proj / "mig" / "ops.yaml").write_text(got.stdout)
    proc = run_scons(proj, "MANIFEST=mig/ops.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _lines(proc, "PASS", "FAIL", "CHECKED") == [
        f"CHECKED (no reference) relu::{op}[{name}] (mig/ops.yaml:{line}:13): every check "
        "passed, nothing compared"
        for op, name, line in (("relu_forward", "one", 20), ("relu_forward", "uneven", 23),
                               ("relu_backward", "one", 28), ("relu_backward", "uneven", 32),
                               ("tensor_negate", "one", 38), ("tensor_negate", "uneven", 41))]
    assert _lines(proc, "all libraries") == [
        "all libraries: 0 passed, 0 failed, 6 CHECKED (no reference)"]
    assert (proj / "build/host/test-summary.txt").read_text().splitlines()[-1] == \
        "all libraries: 0 passed, 0 failed, 6 CHECKED (no reference)"


CHECKED_PASSING = SHAPED[:SHAPED.index("          - name: nested_values")]


def test_the_ninja_path_gives_the_same_results_summary_and_schemas(tmp_path):
    """Shape functions, a CHECKED (no reference) vector and `schemas` through
    ninja: the same results files, the same summary line (printed by `cat`)
    and the same canonical schemas as the plain SCons path."""
    ninja_bin = os.path.join(pytest.importorskip("ninja").BIN_DIR, "ninja")
    projs = {}
    for path in ("scons", "ninja"):
        proj = copy_project(tmp_path / path)
        shutil.copytree(SAMPLE, proj / "sample")
        with open(proj / "sample" / "reference.py", "a") as f:
            f.write(REFERENCES)
        (proj / "checked.yaml").write_text(CHECKED_PASSING)
        projs[path] = proj
    summary = "all libraries: 2 passed, 0 failed, 1 CHECKED (no reference)"
    plain = run_scons(projs["scons"], "MANIFEST=checked.yaml")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert _lines(plain, "all libraries") == [summary]
    gen = run_scons(projs["ninja"], "MANIFEST=checked.yaml", "--experimental=ninja")
    assert gen.returncode == 0, gen.stdout + gen.stderr
    assert _lines(gen, "all libraries") == [summary]
    null = subprocess.run([ninja_bin, "-f", "build/build.ninja"], cwd=projs["ninja"], capture_output=True, text=True,
                          timeout=600)
    assert null.returncode == 0 and null.stdout.splitlines()[-1] == summary, null.stdout
    for name in ("relu/test-results.json", "relu/testplan.shaped.json", "test-summary.txt"):
        assert (projs["ninja"] / "build/host" / name).read_text() == \
            (projs["scons"] / "build/host" / name).read_text(), name
    want = run_scons(projs["scons"], "-Q", "MANIFEST=checked.yaml", "schemas")
    got = subprocess.run([ninja_bin, "-f", "build/build.ninja", "schemas"], cwd=projs["ninja"], capture_output=True,
                         text=True, timeout=600)
    assert want.returncode == 0 and got.returncode == 0, got.stdout + got.stderr
    schemas = [l for l in want.stdout.splitlines() if l.startswith("my_ops::")]
    derived = "   # derived from its shape function"
    assert schemas == [
        "my_ops::relu_forward(Tensor t_in) -> Tensor" + derived,
        "my_ops::relu_backward(Tensor t_grad, Tensor t_in) -> Tensor" + derived,
        "my_ops::tensor_negate(Tensor t_in) -> Tensor" + derived
        + "; kernel tensor_negate_compute"], want.stdout
    assert [l for l in got.stdout.splitlines() if l.startswith("my_ops::")] == schemas, got.stdout
