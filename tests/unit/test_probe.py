"""The probe phase (gpsimd_explore.probe): what a kernel's faults teach, and
that following them settles on what a kernel accepts. The kernels here
are models of the runtime's accessor checks, with its exact messages
(runtime_model/src/tensor.cpp); the real kernel is run in
tests/integration/test_import_probe.py."""

import re

import pytest

from conftest import ROOT
from gpsimd_device.dtypes import DTYPES
from gpsimd_explore import probe as P


def _kernel(wants, order=None, ctypes=None):
    """A kernel whose tensors want ``wants[t] = (rank, dtype)``, checked in
    ``order`` (the accessors' order), as the model faults."""
    ctype = {d.name: d.ctype for d in DTYPES.values()}
    calls = []

    def run(shapes, dtypes):
        calls.append((dict(shapes), dict(dtypes)))
        for t in order or list(wants):
            rank, dtype = wants[t]
            if dtypes[t] != dtype:
                return False, (f"core 0: fault DTYPE in op k: accessor<{ctype[dtype]}> on a "
                               f"{dtypes[t]} tensor; elements never written: [0, 4)")
            if len(shapes[t]) != rank:
                return False, (f"core 0: fault SHAPE in op k: accessor<{ctype[dtype]},{rank}> "
                               f"on a {len(shapes[t])}-dimensional tensor")
        return True, ""
    return run, calls


def test_one_tensor_of_rank_2_is_learned_in_two_runs():
    run, calls = _kernel({"x": (2, "float32")})
    got = P.probe(["x"], run)
    assert (got.ranks, got.dtypes, got.runs, got.problem) == ({"x": 2}, {"x": "float32"}, 2, None)
    assert got.lessons == ["fault SHAPE in op k: accessor<float,2> on a 1-dimensional tensor"]
    assert calls[-1] == ({"x": (2, 2)}, {"x": "float32"})


def test_rank_and_dtype_of_every_tensor_together():
    run, _ = _kernel({"g": (3, "float16"), "x": (3, "float16")})
    got = P.probe(["g", "x"], run)
    assert (got.ranks, got.dtypes, got.problem) == ({"g": 3, "x": 3},
                                                    {"g": "float16", "x": "float16"}, None)
    assert got.runs == 3


@pytest.mark.parametrize("order", [["a", "b"], ["b", "a"]])
def test_tensors_that_want_different_ranks(order):
    run, _ = _kernel({"a": (2, "float32"), "b": (1, "float32")}, order)
    got = P.probe(["a", "b"], run)
    assert (got.ranks, got.problem) == ({"a": 2, "b": 1}, None)
    assert got.runs <= P.MAX_PROBE_RUNS


def test_tensors_that_want_different_dtypes_and_ranks():
    run, _ = _kernel({"a": (2, "int32"), "b": (1, "float32"), "c": (2, "int32")})
    got = P.probe(["a", "b", "c"], run)
    assert (got.ranks, got.dtypes, got.problem) == (
        {"a": 2, "b": 1, "c": 2}, {"a": "int32", "b": "float32", "c": "int32"}, None)


def test_a_failure_that_teaches_nothing_ends_the_probe_and_is_kept():
    def run(shapes, dtypes):
        return False, "core 7: fault OUT_OF_RANGE in op k: offset 917, count 131, numel 999"
    got = P.probe(["x"], run)
    assert (got.ranks, got.runs, got.lessons, got.problem) == ({"x": 1}, 1, [], None)
    assert got.last_message.startswith("core 7: fault OUT_OF_RANGE")


def test_a_probe_that_cannot_settle_says_so_within_its_bound():
    # (a kernel that wants the rank its tensor does not have, whatever it is)
    def run(shapes, dtypes):
        n = len(shapes["x"])
        return False, f"core 0: fault SHAPE in op k: accessor<float,{n % 8 + 1}> on a " \
                      f"{n}-dimensional tensor"
    got = P.probe(["x"], run)
    assert got.problem is not None and got.runs <= P.MAX_PROBE_RUNS


def test_lessons_of_the_model_s_messages():
    assert P.lesson_of("core 0: fault SHAPE in op relu_forward: accessor<float,2> on a "
                       "1-dimensional tensor; elements never written: [0, 8)") == P.Lesson(
        "rank", 2, 1, "fault SHAPE in op relu_forward: accessor<float,2> on a 1-dimensional tensor")
    assert P.lesson_of("core 3: fault DTYPE in op f: accessor<c10::BFloat16> on a float32 "
                       "tensor").field == "dtype"
    assert P.lesson_of("core 3: fault DTYPE in op f: tcm_accessor<long long> on a float32 "
                       "tensor").want == "int64"
    dim = P.lesson_of("core 0: fault BAD_ARGUMENT in op f: size(1): dimension out of range "
                      "for a 1-dimensional tensor")
    assert (dim.field, dim.want, dim.have, dim.at_least) == ("rank", 2, 1, True)
    # t.sizes()[1] of a 1-dimensional tensor (the model's fault_array_index)
    index = P.lesson_of("cores 0-7: fault OUT_OF_RANGE in op rowscale: IntArrayRef index 1 "
                        "out of range (size 1)")
    assert (index.field, index.want, index.have, index.at_least) == ("rank", 2, 1, True)
    assert P.lesson_of("core 0: fault OUT_OF_RANGE in op f: IntArrayRef index 9 out of range "
                       "(size 2)") is None      # (past the device's 8 dimensions: no lesson)
    assert P.lesson_of("core 0: fault OUT_OF_RANGE in op f: offset 9") is None


def test_every_accessor_type_name_of_the_model_maps_to_its_dtype():
    # the C++ spellings torch/detail/scalar_type.h gives accessor types,
    # against the dtype table's scalar types
    text = (ROOT / "runtime_model/include/torch/detail/scalar_type.h").read_text()
    rows = re.findall(r'GPSIMD_CTYPE_\(([^,]+), (\w+), (?:sizeof\(\w+\) == 8 \? )?"([^"]+)"', text)
    assert len(rows) >= 17
    by_scalar = {d.scalar_type: d.name for d in DTYPES.values()}
    for _ctype, scalar, spelled in rows:
        message = f"core 0: fault DTYPE in op f: accessor<{spelled}> on a float16 tensor"
        lesson = P.lesson_of(message)
        assert lesson is not None and lesson.want == by_scalar[scalar], spelled
    # "an" before a dtype that starts with a vowel sound (runtime.h article())
    lesson = P.lesson_of("core 0: fault DTYPE in op f: accessor<float> on an int32 tensor")
    assert lesson is not None and lesson.want == "float32"
    assert 'return dtype[0] == \'i\' ? "an" : "a";' in (
        ROOT / "runtime_model/src/runtime.h").read_text()


def test_the_lessons_read_the_model_s_own_fault_formats():
    """The rank lessons parse what the model's C++ prints: its format
    strings, filled in as printf would, give the lessons above."""
    source = (ROOT / "runtime_model/src/tensor.cpp").read_text()
    index = re.search(r'"(IntArrayRef index %zu out of range \(size %zu\))"', source).group(1)
    lesson = P.lesson_of(index.replace("%zu", "2", 1).replace("%zu", "1", 1))
    assert (lesson.want, lesson.have) == (3, 1)
    # (Tensor::size(d), whose fault the "dimension out of range" lesson reads,
    # is not in the device's API: a kernel naming it does not compile)
    assert "dimension out of range" not in source
