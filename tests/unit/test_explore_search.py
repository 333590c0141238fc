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
