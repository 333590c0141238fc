"""``gpsimd_explore.search.explore_op`` against kernels written in Python
(a fake session: each drawn vector's inputs read back from its ``.npy``
files and given to a function that says how the kernel fails): the sweep
past the buffers reaches every dtype and tensors of different shapes, a
fault at the vector's own rank is the op's bug, a rank-0 vector is drawn
at other ranks, a reference that fails where the kernel refuses the rank
is rejected, and the time limit never ends the shrinking of a failure."""
import os
import types

import numpy as np
import pytest

pytest.importorskip("hypothesis")

from gpsimd_device.plan import ArgSpec, OpPlan, VectorPlan  # noqa: E402
from gpsimd_device.results import VectorResult  # noqa: E402
from gpsimd_explore import search  # noqa: E402

_REF = {"reference": {"file": "ref.py", "function": "f"}}


class _Session:
    """Runs ``kernel(arrays, vector)`` -> failure message ("" passes)."""

    def __init__(self, root, kernel):
        self.root, self.kernel, self.runs = root, kernel, 0

    def run_vector(self, op, vector):
        self.runs += 1
        arrays = {}
        for name, spec in vector.inputs.items():
            if spec.kind != "tensor":
                arrays[name] = spec.value
            elif spec.npy:
                arrays[name] = np.load(os.path.join(self.root, spec.npy))
            else:
                arrays[name] = np.zeros(spec.shape, dtype=spec.dtype)
        message = self.kernel(arrays, vector)
        return VectorResult(op.name, vector.name, "explored", "fail" if message else "pass",
                            message)


def _vector(name, tensors, expected=_REF, rtol=None, atol=None):
    return VectorPlan.from_json({"name": name, "inputs": {
        n: {"kind": "tensor", "dtype": d, "shape": s, "random": {}}
        for n, (d, s) in tensors.items()}, "expected": expected,
        "output": {"dtype": next(iter(tensors.values()))[0]}, "rtol": rtol, "atol": atol}, name)


def _explore(tmp_path, kernel, vectors, examples=40, seed=0, time_limit=None, **kw):
    names = list(vectors[0].inputs)
    op = OpPlan("op", args=tuple(ArgSpec(n, "Tensor") for n in names), vectors=tuple(vectors))
    session = _Session(str(tmp_path), kernel)
    status, text = search.explore_op(
        session, types.SimpleNamespace(library="lib"), op, examples=examples, seed=seed,
        max_elements=1 << 15, time_limit=time_limit, database=None,
        work=str(tmp_path / "work"), root=str(tmp_path), save_dir=str(tmp_path / "saved"),
        save_prefix="explore/", **kw)
    return status, text, session


def _fail(message):
    return "fault OUT_OF_RANGE in op op: " + message


@pytest.mark.parametrize("seed", range(3))
def test_the_sweep_reaches_every_dtype_the_vectors_give(tmp_path, seed):
    """float32 and float16 vectors, a bug in float16 past 16384 elements
    only: found whatever the seed (the sweep ran only the first dtype's)."""
    def kernel(a, vector):
        x = a["x"]
        return _fail("wrong") if x.dtype == np.float16 and x.size > 16384 else ""
    vectors = [_vector("f32", {"x": ("float32", [100])}),
               _vector("f16", {"x": ("float16", [100])})]
    status, text, _ = _explore(tmp_path, kernel, vectors, seed=seed)
    assert status == "FALSIFIED", text
    assert "dtype: float16" in text


@pytest.mark.parametrize("seed", range(3))
def test_the_sweep_grows_tensors_of_different_shapes(tmp_path, seed):
    """a[m,k] and v[k], wrong past 20000 elements of a: found whatever the
    seed, k kept equal in both."""
    seen = []

    def kernel(a, vector):
        seen.append((a["a"].shape, a["v"].shape))
        assert a["a"].shape[1] == a["v"].shape[0]
        return _fail("wrong") if a["a"].size > 20000 else ""
    vectors = [_vector("m4k8", {"a": ("float32", [4, 8]), "v": ("float32", [8])})]
    status, text, _ = _explore(tmp_path, kernel, vectors, seed=seed)
    assert status == "FALSIFIED", text


def test_the_sweep_of_tied_sizes_keeps_them_equal_within_the_cap():
    from gpsimd_explore.draw import sweep_inputs
    template = _vector("v", {"a": ("float32", [4, 8]), "v": ("float32", [8])})
    swept = sweep_inputs(template, 1 << 15, None, 0)
    shapes = [(s["a"].shape, s["v"].shape) for s in swept]
    assert ((1025, 1), (1,)) in shapes and ((1, 1025), (1025,)) in shapes
    assert ((1, 32768), (32768,)) in shapes
    assert all(a[1] == v[0] and np.prod(a) <= 1 << 15 for a, v in shapes)
    square = sweep_inputs(_vector("v", {"x": ("float32", [4, 4]), "b": ("float32", [4])}),
                          1 << 15, None, 0)
    assert [s["x"].shape for s in square] == [(33, 33), (64, 64), (65, 65), (129, 129),
                                              (181, 181)]


def _rank_fault(index, ndim):
    return f"fault SHAPE in op op: IntArrayRef index {index} out of range (size {ndim})"


def test_a_fault_at_the_vector_s_own_rank_is_the_op_s_bug(tmp_path):
    """``sizes()[dim()]`` past 1000 elements of a rank-1 vector's tensor:
    the fault names rank 1, the vector's own, so it is reported."""
    def kernel(a, vector):
        x = a["x"]
        return _rank_fault(x.ndim, x.ndim) if x.size > 1000 else ""
    status, text, _ = _explore(tmp_path, kernel, [_vector("n100", {"x": ("float32", [100])})])
    assert status == "FALSIFIED", text
    assert "IntArrayRef index 1 out of range (size 1)" in text


def test_a_fault_at_a_rank_the_vector_does_not_use_is_rejected(tmp_path):
    def kernel(a, vector):
        x = a["x"]
        return _rank_fault(1, x.ndim) if x.ndim < 2 else ""
    status, text, _ = _explore(tmp_path, kernel, [_vector("m4k8", {"x": ("float32", [4, 8])})])
    assert status == "EXPLORED", text


def test_a_rank_0_vector_is_drawn_at_other_ranks(tmp_path):
    """A kernel that writes only element 0, with a vector of shape []."""
    def kernel(a, vector):
        return _fail("elements never written by any core") if a["x"].size > 1 else ""
    status, text, _ = _explore(tmp_path, kernel, [_vector("r0", {"x": ("float32", [])})])
    assert status == "FALSIFIED", text


def test_a_rank_0_vector_s_search_draws_other_ranks_and_shrinks_to_its_own():
    from hypothesis import find, given, settings
    from gpsimd_explore.draw import inputs_strategy
    strategy = inputs_strategy(_vector("r0", {"x": ("float32", [])}), 1 << 15)
    ranks = set()

    @settings(max_examples=60, database=None, derandomize=True)
    @given(strategy)
    def draw(values):
        ranks.add(values["x"].ndim)
    draw()
    assert 0 in ranks and len(ranks) > 2
    assert find(strategy, lambda v: True, settings=settings(database=None))["x"].shape == ()


def test_a_reference_failing_at_a_rank_the_kernel_refuses_is_rejected(tmp_path):
    """``accessor<float,2>``, vectors of rank 2, a reference that raises on
    rank 1: the kernel's refusal wins; at rank 2 a raising reference is
    reported."""
    def kernel(a, vector):
        x = a["x"]
        if not vector.expected.checks_only and x.ndim == 1:
            return "reference ref.py:f raised AxisError: axis 1 is out of bounds"
        if x.ndim != 2:
            return f"fault SHAPE in op op: accessor<float,2> on a {x.ndim}-dimensional tensor"
        return ""
    status, text, _ = _explore(tmp_path, kernel, [_vector("m4k8", {"x": ("float32", [4, 8])})])
    assert status == "EXPLORED", text

    def raising(a, vector):
        return "reference ref.py:f raised ValueError: no" if a["x"].size > 100 else ""
    status, text, _ = _explore(tmp_path, raising, [_vector("m4k8", {"x": ("float32", [4, 8])})])
    assert status == "FALSIFIED" and "raised ValueError" in text, text


def test_the_time_limit_ends_the_search_never_the_shrinking(tmp_path, monkeypatch):
    """A clock that moves a second a run, a limit of 12 s: the failure
    found before the limit is shrunk and replayed past it, and reported."""
    clock = {"now": 0.0}
    monkeypatch.setattr(search, "time", types.SimpleNamespace(monotonic=lambda: clock["now"]))

    def kernel(a, vector):
        clock["now"] += 1.0
        return _fail("wrong") if a["x"].size > 3 else ""
    status, text, session = _explore(tmp_path, kernel,
                                     [_vector("n2", {"x": ("float32", [2])})],
                                     examples=100, time_limit=12)
    assert status == "FALSIFIED", text
    assert session.runs > 12


def test_the_time_limit_ends_a_search_that_finds_nothing(tmp_path, monkeypatch):
    clock = {"now": 0.0}
    monkeypatch.setattr(search, "time", types.SimpleNamespace(monotonic=lambda: clock["now"]))

    def kernel(a, vector):
        clock["now"] += 1.0
        return ""
    status, text, session = _explore(tmp_path, kernel, [_vector("n2", {"x": ("float32", [2])})],
                                     examples=100, time_limit=5)
    assert status == "EXPLORED" and text.endswith("(time limit)") and session.runs <= 7, text


_PASTE = """version: 1
libraries:
  - name: lib
    sources: [k.cpp]
    ops:
      - schema: "my_ops::f(Tensor x, Tensor y) -> Tensor"
        reference: ref.py:f
        OP_KEYS
        vectors:
          - name: v
            inputs:
              x: {dtype: float32, shape: [4], random: {distribution: normal}, location: sbuf}
              y: {dtype: float32, shape: [4], random: {distribution: normal}}
            VECTOR_KEYS
"""


@pytest.mark.parametrize("op_keys, vector_keys", [
    ("rtol: 0.5", "rtol: 0\n            atol: 0"),
    ("atol: 0.25", "output: {dtype: float16, location: sbuf}"),
    ("output: {dtype: int32}", "atol: 1e-05"),
])
def test_a_pasted_example_is_judged_as_explore_judged_it(tmp_path, op_keys, vector_keys):
    """The printed example carries what the judgement of its template used
    besides the inputs: tolerances (the vector's or the op's, where they
    are not the output dtype's defaults), the output's dtype and location,
    an input's location; pasted under the op's vectors, the plan's vector
    is judged as the explored one was."""
    from gpsimd_build.manifest import load_manifest
    from gpsimd_build.testplan import op_plan
    from gpsimd_explore.example import example_vector, vector_yaml
    (tmp_path / "k.cpp").write_text("")
    (tmp_path / "ref.py").write_text("def f(x, y):\n    return x\n")
    text = _PASTE.replace("OP_KEYS", op_keys).replace("VECTOR_KEYS", vector_keys)
    manifest = tmp_path / "ops.yaml"
    manifest.write_text(text)
    template = op_plan(load_manifest(str(manifest), root=str(tmp_path)).libraries[0].ops[0]) \
        .vectors[0]
    arrays = {"x": np.array([1.0, 2.0], np.float32), "y": np.arange(20, dtype=np.float32)}
    explored = example_vector(template, arrays, "e", str(tmp_path / "work"), str(tmp_path))
    example = vector_yaml(template, arrays, "e", str(tmp_path), "", "lib.f", order=["x", "y"])
    manifest.write_text(text + "".join(" " * 10 + line + "\n" for line in example.splitlines()))
    pasted = op_plan(load_manifest(str(manifest), root=str(tmp_path)).libraries[0].ops[0]) \
        .vectors[1]
    for field in ("rtol", "atol", "expected"):
        assert getattr(pasted, field) == getattr(explored, field), (field, example)
    assert (pasted.output.dtype, pasted.output.location) == \
        (explored.output.dtype, explored.output.location), example
    assert {k: v.location for k, v in pasted.inputs.items()} == \
        {k: v.location for k, v in explored.inputs.items()} == {"x": "sbuf", "y": "hbm"}
