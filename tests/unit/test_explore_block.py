"""An op's ``explore:`` block (the values ``scons explore`` draws): read
from the manifest with a located error, carried into the test plan and
back, and used by the strategy (finite values in the range only)."""
import math
import re

import numpy as np
import pytest

from gpsimd_build.manifest import ManifestError, load_manifest
from gpsimd_build.testplan import op_plan
from gpsimd_device.plan import ExploreSpec, OpPlan, PlanError, VectorPlan

_MANIFEST = """version: 1
libraries:
  - name: lib
    sources: [k.cpp]
    ops:
      - schema: "my_ops::f(Tensor x) -> Tensor"
        reference: ref.py:f
        explore: {low: LOW, high: HIGH}
        vectors:
          - name: v
            inputs:
              x: {dtype: float32, shape: [4], random: {distribution: normal}}
"""


def _load(tmp_path, low, high):
    (tmp_path / "k.cpp").write_text("")
    (tmp_path / "ref.py").write_text("def f(x):\n    return x\n")
    path = tmp_path / "ops.yaml"
    path.write_text(_MANIFEST.replace("LOW", low).replace("HIGH", high))
    return load_manifest(str(path), root=str(tmp_path))


def test_the_block_is_read_and_carried_into_the_plan(tmp_path):
    op = _load(tmp_path, "-2.5", "1e3").libraries[0].ops[0]
    assert op.explore == ExploreSpec(-2.5, 1000.0)
    plan = op_plan(op)
    assert plan.to_json()["explore"] == {"low": -2.5, "high": 1000.0}
    assert OpPlan.from_json(plan.to_json(), "op").explore.bounds == (-2.5, 1000.0)


def test_a_range_upside_down_is_a_located_error(tmp_path):
    with pytest.raises(ManifestError) as info:
        _load(tmp_path, "3", "1")
    assert str(info.value).endswith(
        "8:33: $.libraries[0].ops[0].explore.high: explore: high (1) is below low (3)")


def test_a_plan_with_a_bad_range_is_refused():
    with pytest.raises(PlanError, match=r"op.explore: expected finite low <= high"):
        OpPlan.from_json({"name": "f", "explore": {"low": 0, "high": math.inf}}, "op")


def test_the_strategy_draws_finite_values_in_the_range_only():
    from hypothesis import given, settings
    from gpsimd_device.plan import VectorPlan
    from gpsimd_explore.draw import inputs_strategy
    template = VectorPlan.from_json({"name": "v", "inputs": {
        "x": {"kind": "tensor", "dtype": "float32", "shape": [4], "values": [1, 2, 3, 4]},
        "n": {"kind": "tensor", "dtype": "int8", "shape": [4], "values": [1, 2, 3, 4]}}}, "v")
    seen = []

    @settings(max_examples=60, database=None, derandomize=True)
    @given(inputs_strategy(template, 64, ExploreSpec(-1e15, 1e15)))
    def draw(arrays):
        assert arrays["x"].dtype == np.float32 and arrays["n"].dtype == np.int8
        assert np.all(np.isfinite(arrays["x"])) and np.all(np.abs(arrays["x"]) <= 1e15)
        assert arrays["x"].shape == arrays["n"].shape     # (one shared shape)
        seen.append(arrays["x"].size)
    draw()
    assert min(seen) == 1 and max(seen) > 1


def test_an_example_s_values_are_written_out_or_saved_beside_the_manifest(tmp_path):
    """Few finite values inline; a NaN (or more than 16 values) in an
    ``.npy`` the vector names, kept exactly, written through no link
    planted in its place."""
    from gpsimd_device.plan import VectorPlan
    from gpsimd_explore.example import vector_yaml
    template = VectorPlan.from_json({"name": "v", "inputs": {
        "x": {"kind": "tensor", "dtype": "float32", "shape": [2], "values": [1, 2]},
        "a": {"kind": "scalar", "type": "Scalar", "dtype": "float32", "value": 1.5}}}, "v")
    small = {"x": np.array([0.0, -2.5], dtype=np.float32)}
    assert vector_yaml(template, small, "e", str(tmp_path), "explore/", "lib.op") == (
        "- name: e\n  inputs:\n    x: {dtype: float32, shape: [2], values: [0.0, -2.5]}\n"
        "    a: 1.5\n")
    # in the schema's order when given (the template's is the plan's)
    assert vector_yaml(template, small, "e", str(tmp_path), "", "s", order=["a", "x"]) == (
        "- name: e\n  inputs:\n    a: 1.5\n"
        "    x: {dtype: float32, shape: [2], values: [0.0, -2.5]}\n")
    # a drawn non-finite scalar in YAML's spelling (`nan` would read as a string)
    for value, text in ((math.nan, ".nan"), (math.inf, ".inf"), (-math.inf, "-.inf")):
        drawn = dict(small, a=value)
        assert vector_yaml(template, drawn, "e", str(tmp_path), "", "s").endswith(
            f"    a: {text}\n")
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "lib.op.x.npy").symlink_to(victim)
    odd = {"x": np.array([np.nan, -0.0], dtype=np.float32)}
    assert vector_yaml(template, odd, "e", str(tmp_path), "explore/", "lib.op") == (
        "- name: e\n  inputs:\n    x: {dtype: float32, npy: explore/lib.op.x.npy}\n"
        "    a: 1.5\n")
    assert victim.read_text() == "keep" and not (tmp_path / "lib.op.x.npy").is_symlink()
    saved = np.load(tmp_path / "lib.op.x.npy")
    assert saved.dtype == np.float32 and np.isnan(saved[0]) and np.signbit(saved[1])


_BLOCKS = """version: 1
defaults:
  explore: {dtype: float16, max_elements: 512}
libraries:
  - name: lib
    sources: [k.cpp]
    ops:
      - schema: "my_ops::f(Tensor g, Tensor x, Tensor w, int k, float a) -> Tensor"
        explore: BLOCK
"""


def _block(tmp_path, block):
    (tmp_path / "k.cpp").write_text("")
    (tmp_path / "ops.yaml").write_text(_BLOCKS.replace("BLOCK", block))
    return load_manifest("ops.yaml", root=str(tmp_path))


def test_the_whole_block_over_the_defaults_into_the_plan_and_back(tmp_path):
    op = _block(tmp_path, "{dtype: {w: int32}, same_shape: [[g, x]], scalars: {k: {low: -3, "
                          "high: 9}}, output: {like: x}}").libraries[0].ops[0]
    # (the op's keys over the manifest's defaults: its dtype, their cap)
    assert op.explore == ExploreSpec(None, None, {"w": "int32"}, 512, (("g", "x"),),
                                     {"k": (-3.0, 9.0)}, "x", None)
    back = OpPlan.from_json(op_plan(op).to_json(), "op").explore
    assert back == op.explore and back.dtype_of("w") == "int32" and back.dtype_of("g") is None
    assert _block(tmp_path, "{low: 0, high: 1}").libraries[0].ops[0].explore.dtype_of("g") == \
        "float16"


@pytest.mark.parametrize("block, message", [
    ("{low: 0}", "9:24: $.libraries[0].ops[0].explore.low: explore: low and high go together "
                 "(give both)"),
    ("{same_shape: [[g, q]]}", "9:31: $.libraries[0].ops[0].explore.same_shape: explore: "
                               "same_shape names 'q', which is not a tensor argument of the op "
                               "(its tensors: g, w, x)"),
    ("{scalars: {g: {low: 0, high: 1}}}", "9:28: $.libraries[0].ops[0].explore.scalars: explore: "
                                          "scalars names 'g', which is not a scalar argument of "
                                          "the op (its scalars: a, k)"),
    ("{same_shape: [[g, x], [x, w]]}", "9:31: $.libraries[0].ops[0].explore.same_shape: explore: "
                                       "same_shape names 'x' in more than one group"),
    ("{low: 0, high: .nan}", "9:33: $.libraries[0].ops[0].explore.high: explore: high must be a "
                             "finite number, got nan"),
    ("{scalars: {k: {low: -.inf, high: 1}}}", "9:28: $.libraries[0].ops[0].explore.scalars: "
                                              "explore: scalars.k.low must be a finite number, "
                                              "got -inf"),
    # (a literal past the largest double is refused as it is read: issue 17)
    ("{scalars: {k: {low: -1e400, high: 1}}}", "9:38: $.libraries[0].ops[0].explore.scalars.k"
                                              ".low: number '-1e400' is beyond the largest "
                                              "double (1.8e308) and would become an infinity; "
                                              "write .inf or -.inf for one"),
    ("{scalars: {k: {low: 2, high: 1}}}", "9:28: $.libraries[0].ops[0].explore.scalars: explore: "
                                          "scalars: k: high (1) is below low (2)"),
    ("{keep_shape: [w, k]}", "9:31: $.libraries[0].ops[0].explore.keep_shape: explore: "
                             "keep_shape names 'k', which is not a tensor argument of the op "
                             "(its tensors: g, w, x)"),
    ("{same_shape: [[g, x]], keep_shape: [x]}",
     "9:53: $.libraries[0].ops[0].explore.keep_shape: explore: keep_shape names 'x', which "
     "same_shape also names"),
])
def test_a_bad_block_is_a_located_error(tmp_path, block, message):
    with pytest.raises(ManifestError) as info:
        _block(tmp_path, block)
    assert str(info.value).splitlines() == ["ops.yaml:" + message]


def test_groups_share_a_shape_kept_shapes_stay_scalars_are_drawn_in_range():
    from hypothesis import given, settings
    from gpsimd_explore.draw import inputs_strategy
    template = VectorPlan.from_json({"name": "v", "inputs": {
        "g": {"kind": "tensor", "dtype": "float32", "shape": [2, 3], "random": {}},
        "x": {"kind": "tensor", "dtype": "float32", "shape": [2, 3], "random": {}},
        "w": {"kind": "tensor", "dtype": "int32", "shape": [5], "random": {}},
        "k": {"kind": "scalar", "type": "int", "dtype": "int32", "value": 1},
        "a": {"kind": "scalar", "type": "float", "dtype": "float32", "value": 0.5}}}, "v")
    spec = ExploreSpec(max_elements=40, same_shape=(("g", "x"),), scalars={"k": (-3.0, 9.0)},
                       keep_shape=("w",))
    seen = set()

    @settings(max_examples=200, database=None, derandomize=True)
    @given(inputs_strategy(template, 1 << 15, spec))
    def draw(values):
        assert values["g"].shape == values["x"].shape and 1 <= len(values["g"].shape) <= 8
        assert values["g"].size <= 40 and values["w"].shape == (5,)
        assert isinstance(values["k"], int) and -3 <= values["k"] <= 9
        # a scalar with no range: all of its dtype, as a Python float exact in float32
        a = values["a"]
        assert isinstance(a, float) and (math.isnan(a) or float(np.float32(a)) == a)
        seen.add(values["g"].shape)
    draw()
    assert len(seen) > 3 and {len(s) for s in seen} > {2}    # (its rank, and others)
    # every special value is drawn (find: draws until one is found)
    from hypothesis import find
    strategy = inputs_strategy(VectorPlan.from_json({"name": "v", "inputs": {
        "a": template.to_json()["inputs"]["a"]}}, "v"), 1 << 15, spec)
    for wanted in (math.isnan, lambda a: a == math.inf, lambda a: a == -math.inf,
                   lambda a: 0 < abs(a) < np.finfo(np.float32).tiny,    # (a subnormal)
                   lambda a: math.isfinite(a) and abs(a) > 1e30):
        find(strategy, lambda v: wanted(v["a"]), settings=settings(max_examples=5000,
                                                                    database=None))


def test_an_int_scalar_with_no_range_is_drawn_from_its_whole_dtype():
    from hypothesis import find, given, settings
    from gpsimd_explore.draw import inputs_strategy
    template = VectorPlan.from_json({"name": "v", "inputs": {
        "k": {"kind": "scalar", "type": "int", "dtype": "int32", "value": 7},
        "o": {"kind": "scalar", "type": "long long", "dtype": "int64", "value": 7}}}, "v")
    strategy = inputs_strategy(template, 64)

    @settings(max_examples=100, database=None, derandomize=True)
    @given(strategy)
    def draw(values):
        assert type(values["k"]) is int and type(values["o"]) is int
        assert -2 ** 31 <= values["k"] <= 2 ** 31 - 1
    draw()
    once = settings(max_examples=5000, database=None)
    assert find(strategy, lambda v: v["k"] < 0, settings=once)["k"] == -1
    assert find(strategy, lambda v: v["k"] == -2 ** 31, settings=once)
    assert find(strategy, lambda v: v["o"] > 2 ** 31, settings=once)  # (int64: past int32)


def test_the_search_draws_from_each_set_of_dtypes_the_vectors_give():
    """The first vector of each dtype signature with a reference (or
    checks only); a vector with expected values gives none."""
    from gpsimd_explore.search import _templates

    def vector(name, dtype, expected):
        return VectorPlan.from_json({"name": name, "inputs": {
            "x": {"kind": "tensor", "dtype": dtype, "shape": [4], "random": {}},
            "a": {"kind": "scalar", "type": "float", "dtype": "float32", "value": 1.0}},
            "expected": expected, "output": {"dtype": dtype}}, name)
    ref = {"reference": {"file": "ref.py", "function": "f"}}
    vectors = [vector("v1", "float32", ref), vector("v2", "float32", ref),
               vector("e", "int32", {"values": [1, 2, 3, 4]}), vector("h", "float16", ref),
               vector("c", "bfloat16", {})]
    assert [v.name for v in _templates(vectors)] == ["v1", "h", "c"]
    assert _templates(vectors[2:3]) == []


def test_tensors_of_other_shapes_draw_their_dimensions_equal_sizes_tied():
    """x[4,8] and w[8,3]: one drawn size for each of 4, 8 and 3, so the
    8s stay equal; ranks kept; each at most the cap's square root."""
    from hypothesis import given, settings
    from gpsimd_explore.draw import inputs_strategy
    template = VectorPlan.from_json({"name": "v", "inputs": {
        "x": {"kind": "tensor", "dtype": "float32", "shape": [4, 8], "random": {}},
        "w": {"kind": "tensor", "dtype": "float32", "shape": [8, 3], "random": {}}}}, "v")
    seen = set()

    @settings(max_examples=150, database=None, derandomize=True)
    @given(inputs_strategy(template, 400))
    def draw(values):
        (m, k), (k2, n) = values["x"].shape, values["w"].shape
        assert k == k2 and max(m, k, n) <= 20
        seen.add((m, k, n))
    draw()
    assert len({m for m, _, _ in seen}) > 3 and any(m != n for m, _, n in seen)
    assert any(m % 8 for m, _, _ in seen)       # (a count that does not divide by 8)


def test_spread_values_differ_from_element_to_element_within_the_range():
    from gpsimd_explore.draw import spread_values
    a = spread_values("float32", (4097,), None, 2)
    assert a.dtype == np.float32 and len(np.unique(a)) > 4000
    assert spread_values("float32", (4097,), None, 2).tobytes() == a.tobytes()    # (seeded)
    special = spread_values("float32", (64,), None, 1)      # (odd seeds: special values too)
    assert not np.all(np.isfinite(special)) or np.any(special == 0) or \
        np.any(np.abs(special) == np.finfo(np.float32).max) or \
        np.any((special != 0) & (np.abs(special) < np.finfo(np.float32).tiny))
    b = spread_values("bfloat16", (1000,), (-2.0, 3.0), 5)
    assert b.dtype == np.float32 and b.min() >= -2.0 and b.max() <= 3.0
    i = spread_values("int32", (1000,), None, 7)
    assert i.dtype == np.int32 and i.min() < -2 ** 30 and i.max() > 2 ** 30


def test_the_sweep_tries_every_count_past_the_buffers_within_the_cap():
    from gpsimd_explore.draw import sweep_inputs

    def template(shapes):
        return VectorPlan.from_json({"name": "v", "inputs": {
            name: {"kind": "tensor", "dtype": "float32", "shape": s, "random": {}}
            for name, s in shapes.items()}}, "v")
    swept = sweep_inputs(template({"x": [8], "y": [8]}), 1 << 15, None, 0)
    assert [v["x"].shape for v in swept] == [(1025,), (4095,), (4097,), (16411,), (32768,)]
    assert all(v["x"].shape == v["y"].shape and not np.array_equal(v["x"], v["y"])
               for v in swept)
    capped = sweep_inputs(template({"x": [2, 3]}), 1 << 15, ExploreSpec(max_elements=5000), 0)
    assert [v["x"].shape for v in capped] == [(1025, 1), (4095, 1), (4097, 1)]
    # tensors of different shapes: each of their sizes grown in turn (the others 1)
    apart = sweep_inputs(template({"x": [4, 8], "w": [8]}), 1 << 15, None, 0)
    assert [(v["x"].shape, v["w"].shape) for v in apart][:2] == [((1025, 1), (1,)),
                                                                 ((1, 1025), (1025,))]
    # the tensors explore: shapes: does not name share theirs, as in the search;
    # the named one's dimension is grown apart
    rest = sweep_inputs(template({"x": [4, 8], "y": [4, 8], "w": [8]}), 1 << 15,
                        ExploreSpec(shapes={"w": ("n",)}), 0)
    assert [sorted(v) for v in rest] == [["x", "y"], ["w"]] * 5
    assert rest[0]["y"].shape == (1025, 1) and rest[1]["w"].shape == (1025,)


def test_named_dimensions_are_drawn_apart_where_the_vector_ties_them(tmp_path):
    """A square vector (x [4,4], b [4]) ties m and n by default; ``shapes:
    {x: [m, n], b: [n]}`` draws them apart, b's one dimension x's second,
    a number fixed; read from the manifest and carried into the plan."""
    from hypothesis import given, settings
    from gpsimd_explore.draw import inputs_strategy
    template = VectorPlan.from_json({"name": "v", "inputs": {
        "x": {"kind": "tensor", "dtype": "float32", "shape": [4, 4], "random": {}},
        "b": {"kind": "tensor", "dtype": "float32", "shape": [4], "random": {}},
        "t": {"kind": "tensor", "dtype": "float32", "shape": [3, 4], "random": {}}}}, "v")
    op = _block(tmp_path, "{shapes: {x: [m, n], w: [n]}}").libraries[0].ops[0]
    assert op.explore.shapes == {"x": ("m", "n"), "w": ("n",)}
    assert OpPlan.from_json(op_plan(op).to_json(), "op").explore == op.explore
    spec = ExploreSpec(shapes={"x": ("m", "n"), "b": ("n",), "t": (3, "n")})
    tied, apart = [], []

    @settings(max_examples=100, database=None, derandomize=True)
    @given(inputs_strategy(template, 1 << 12, ExploreSpec()))
    def default(values):
        tied.append(values["x"].shape)

    @settings(max_examples=100, database=None, derandomize=True)
    @given(inputs_strategy(template, 1 << 12, spec))
    def named(values):
        (m, n), (n2,), (three, n3) = values["x"].shape, values["b"].shape, values["t"].shape
        assert n == n2 == n3 and three == 3 and m * n <= 1 << 12
        apart.append((m, n))
    default()
    named()
    assert all(m == n for m, n in tied)
    assert any(m != n for m, n in apart)


@pytest.mark.parametrize("block, message", [
    ("{shapes: {q: [m]}}", "9:27: $.libraries[0].ops[0].explore.shapes: explore: shapes names "
                           "'q', which is not a tensor argument of the op (its tensors: g, w, x)"),
    ("{same_shape: [[g, x]], shapes: {x: [m]}}",
     "9:49: $.libraries[0].ops[0].explore.shapes: explore: shapes names 'x', which same_shape "
     "or keep_shape also names"),
    ("{shapes: {x: [m, 0]}}", "9:35: $.libraries[0].ops[0].explore.shapes.x[1]: expected a "
                              "string, got an integer (0)"),
])
def test_a_bad_shapes_key_is_a_located_error(tmp_path, block, message):
    with pytest.raises(ManifestError) as info:
        _block(tmp_path, block)
    assert str(info.value).splitlines() == ["ops.yaml:" + message]


def test_an_example_s_files_are_named_by_its_content():
    """A later example never takes the name of one already pasted."""
    from gpsimd_explore.search import _digest
    a = {"x": np.array([np.nan], dtype=np.float32), "k": 3}
    assert _digest(a) == _digest({"k": 3, "x": np.array([np.nan], dtype=np.float32)})
    assert len({_digest(a), _digest(dict(a, k=4)), _digest(dict(a, x=np.zeros(1, np.float32))),
                _digest(dict(a, x=np.array([np.nan], dtype=np.float64))),
                _digest(dict(a, x=np.full((1, 1), np.nan, np.float32)))}) == 5
    assert re.fullmatch(r"[0-9a-f]{12}", _digest(a))
