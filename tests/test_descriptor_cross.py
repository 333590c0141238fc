"""The descriptor bytes the Python model writes are what the host C++ runtime
reads (customop-marshalling.txt §2): a probe kernel reports the dtype, rank,
sizes, element count and the first element it decoded, for tensors of every
common dtype and each shape form (inline 4-D, inline 8-D, out-of-line)."""
import json

import ml_dtypes
import numpy as np
import pytest

from conftest import ROOT, run_scons
from gpsimd_emu import abi

# c10::ScalarType numbers (PyTorch's enum, which the device port keeps).
SCALAR_TYPE = {"uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4,
               "float16": 5, "float32": 6, "bfloat16": 15}
NUMPY = {"uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
         "int64": np.int64, "float16": np.float16, "float32": np.float32,
         "bfloat16": ml_dtypes.bfloat16}

CASES = [  # (name, dtype, shape, expected shape form)
    ("f32_2x3", "float32", [2, 3], abi.ShapeForm.INLINE_4D),
    ("f16_rank6", "float16", [2, 1, 3, 1, 1, 2], abi.ShapeForm.INLINE_8D),
    ("bf16_rank8", "bfloat16", [1, 2, 1, 2, 1, 2, 1, 3], abi.ShapeForm.INLINE_8D),
    ("i8_7", "int8", [7], abi.ShapeForm.INLINE_4D),
    ("u8_5x1", "uint8", [5, 1], abi.ShapeForm.INLINE_4D),
    ("i16_3x3x3x3", "int16", [3, 3, 3, 3], abi.ShapeForm.INLINE_4D),
    ("i32_0x4", "int32", [0, 4], abi.ShapeForm.OUT_OF_LINE),
    ("i64_9", "int64", [9], abi.ShapeForm.INLINE_4D),
]


def _values(dtype, shape, seed):
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    if dtype.startswith(("float", "bfloat")):
        return [float(v) for v in np.round(rng.uniform(-4, 4, n), 2)]
    return [int(v) for v in rng.integers(-100 if dtype[0] == "i" else 0, 100, n)]


def _expected(dtype, shape, values):
    sizes = list(shape) + [0] * (8 - len(shape))
    first = 0
    if values:
        raw = np.asarray(values[:1]).astype(NUMPY[dtype]).tobytes()
        first = int.from_bytes(raw, "little", signed=dtype.startswith(("int",)))
        if dtype.startswith(("int",)):
            first = int(np.asarray(values[0]).astype(NUMPY[dtype]))
    return [SCALAR_TYPE[dtype], len(shape), int(np.prod(shape))] + sizes + [first]


def test_shape_forms_cover_all_three():
    assert {abi.choose_shape_form(shape) for _, _, shape, _ in CASES} == {
        abi.ShapeForm.INLINE_4D, abi.ShapeForm.INLINE_8D, abi.ShapeForm.OUT_OF_LINE}
    for _, _, shape, form in CASES:
        assert abi.choose_shape_form(shape) == form


def test_cpp_runtime_reads_what_python_wrote(built_project):
    proj, _ = built_project
    (proj / "probe").mkdir(exist_ok=True)
    (proj / "probe" / "describe.cpp").write_text((ROOT / "tests/probe/describe.cpp").read_text())
    vectors = []
    for i, (name, dtype, shape, _) in enumerate(CASES):
        values = _values(dtype, shape, i)
        nested = np.asarray(values, dtype=np.float64 if "float" in dtype else np.int64)
        vectors.append({
            "name": name,
            "inputs": {"x": {"dtype": dtype, "shape": shape,
                             "values": nested.reshape(shape).tolist()}},
            "output": {"dtype": "int64", "shape": [12]},
            "expected": {"values": _expected(dtype, shape, values)},
        })
    manifest = {"version": 1, "libraries": [{
        "name": "probe", "sources": ["probe/describe.cpp"],
        "ops": [{"schema": "test::describe(Tensor x) -> Tensor", "vectors": vectors}]}]}
    (proj / "probe.yaml").write_text(json.dumps(manifest, indent=1))
    proc = run_scons(proj, "MANIFEST=probe.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"probe: {len(CASES)} passed, 0 failed" in out
