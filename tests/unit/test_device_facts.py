"""gpsimd_device: the one table per device fact, read from the host headers,
checked against independent sources (ml_dtypes, numpy, the spec's enum), and
the typed plan/results contract between the build and the emulator."""
import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from gpsimd_device import dtypes, faults, headers, limits, lsp
from gpsimd_device.plan import PlanError, TestPlan, VectorPlan
from gpsimd_device.results import LibraryResults, VectorResult

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# the device ABI (gpsimd_host/abi.h), enum NEURON_ISA_TPB_DTYPE
SPEC_ISA = {"INVALID": 0, "UINT64": 1, "INT8": 2, "UINT8": 3, "INT16": 4, "UINT16": 5,
            "BFLOAT16": 6, "FP16": 7, "INT32": 8, "UINT32": 9, "FP32": 10, "FP32R": 11,
            "INT64": 12, "FP8_EXP3": 13, "FP8_EXP4": 14, "FP8_EXP5": 15}


def test_isa_enum_is_the_spec_enum():
    assert dtypes.ISA == SPEC_ISA


@pytest.mark.parametrize("name", sorted(dtypes.DTYPES))
def test_each_row_agrees_with_numpy_and_ml_dtypes(name):
    d = dtypes.by_name(name)
    npt = np.dtype(getattr(ml_dtypes, name, None) or name)
    assert d.itemsize == npt.itemsize
    if d.is_float:
        fi = ml_dtypes.finfo(npt)
        assert d.max == float(fi.max) and d.min == -float(fi.max)
        if d.itemsize == 1:   # fp8: eps and the smallest subnormal
            assert (d.rtol, d.atol) == (float(fi.eps), float(fi.smallest_subnormal))
    else:
        ii = np.iinfo(npt)
        assert (d.min, d.max) == (int(ii.min), int(ii.max))
        assert (d.rtol, d.atol) == (0.0, 0.0)
        assert d.kind == ("int" if ii.min < 0 else "uint")


def test_torch_tolerances_for_the_wide_floats():
    # torch.testing.assert_close defaults
    assert dtypes.TOLERANCES["float32"] == (1.3e-6, 1e-5)
    assert dtypes.TOLERANCES["float16"] == (1e-3, 1e-5)
    assert dtypes.TOLERANCES["bfloat16"] == (1.6e-2, 1e-5)


def test_storage_types_are_the_isa_enum_without_invalid_and_fp32r():
    assert sorted(d.isa for d in dtypes.DTYPES.values()) == sorted(
        v for k, v in SPEC_ISA.items() if k not in ("INVALID", "FP32R"))
    assert dtypes.by_isa(10).name == "float32"
    with pytest.raises(KeyError, match="ISA dtype 11"):
        dtypes.by_isa(11)


def test_limits_are_the_documented_numbers():
    assert (limits.NUM_CORES, limits.DEFAULT_STACK_SIZE, limits.MAX_STACK_SIZE) == (8, 4196, 409600)
    assert (limits.MAX_OPS_PER_LIBRARY, limits.MAX_NAME_LENGTH) == (10, 32)
    assert (limits.MAX_DIMS, limits.MAX_DIM_SIZE, limits.MAX_ELEMENTS) == (8, 65535, 2 ** 32 - 1)
    assert (limits.SCRATCH_BASE, limits.SCRATCH_CORE_SIZE, limits.SCRATCH_SINGLE_SIZE) == (
        0x84000000, 2 << 20, 32 << 20)
    assert (limits.DATARAM_BASE, limits.DATARAM_SIZE, limits.TCM_POOL_SIZE) == (0x80000, 64 << 10,
                                                                                16 << 10)
    assert (limits.PRINTF_CAPACITY, limits.RESERVED_LIBRARY_NAME) == (128 << 10, "builtin")


def test_tensor_shape_limits_two_forms():
    # docs/kernel-api.md, Limits (corrected): rank <= 4 with u32 dimensions
    # (INLINE_4D), or rank <= 8 with dimensions <= 65535 (INLINE_8D)
    assert (limits.MAX_DIMS_4D, limits.MAX_DIM_SIZE_4D) == (4, 2 ** 32 - 1)
    assert [limits.max_dim_size(r) for r in range(9)] == [2 ** 32 - 1] * 5 + [65535] * 4
    ok = ([], [2_000_000], [70000, 3], [65535] + [1] * 7, [2 ** 32 - 1], [1, 1, 1, 2 ** 32 - 1])
    for shape in ok:
        assert limits.shape_problem(shape) is None, shape
    assert limits.shape_problem([1] * 9) == "has 9 dimensions; a tensor has at most 8"
    assert limits.shape_problem([1, 1, 1, 1, 65536]) == (
        "has dimension 4 of 65536; a tensor of 5 to 8 dimensions has dimensions of at most "
        "65535 (at most 4 dimensions: up to 4294967295)")
    assert limits.shape_problem([2 ** 32]) == (
        "has dimension 0 of 4294967296; a dimension is at most 4294967295")
    assert limits.shape_problem([65536, 65536]) == (
        "has 4294967296 elements; a tensor has at most 4294967295 (the descriptor's 32-bit "
        "element count)")


def test_linker_specs():
    assert [s.name for s in lsp.MULTICORE_LSPS] == [f"lsp_fll_load_cpu{i}" for i in range(8)]
    assert [s.scratch_origin for s in lsp.MULTICORE_LSPS] == [0x84000000 + i * 0x200000
                                                               for i in range(8)]
    assert lsp.SINGLE_LSP == lsp.LinkerSpec("lsp_fll_load_cpu_single", None, 0x84000000, 0x2000000)
    assert lsp.linked_names("m", True)[7] == "m_cpu7" and lsp.linked_names("s", False) == ("s",)
    with pytest.raises(ValueError):
        lsp.scratch_origin(8)


def test_fault_kinds_come_from_faults_h():
    assert faults.FAULT_KINDS[0] == "NONE" and faults.FAULT_KINDS[22] == "COHERENCE"
    assert faults.fault_value("TCM_NULL") == 20
    assert faults.fault_name(1000) == "UNKNOWN(1000)"


def test_header_reader(tmp_path, monkeypatch):
    d = tmp_path / "gpsimd_host"
    d.mkdir()
    (d / "t.h").write_text('#define GPSIMD_A 0x10u\n#define GPSIMD_B 7\n#define GPSIMD_S "x y"\n'
                           "/* X(NO, 1) */\n#define GPSIMD_T(X) \\\n  X(a, 1) /* c */ \\\n  X(b, 2)\n"
                           "enum t_e { T_E_A = 3, T_E_B, /* T_E_NO = 9, */ T_E_C = 0x10u, };\n"
                           "enum t_f { T_F_A = 1 << 2 };\nenum t_g { T_G_A, OTHER_B };\n")
    monkeypatch.setattr(headers, "INCLUDE_DIR", str(tmp_path))
    for cached in (headers.header_text, headers.defines, headers.enum_values):
        cached.cache_clear()
    try:
        assert headers.defines("t.h") == {"A": 16, "B": 7, "S": "x y"}
        assert headers.xmacro_rows("t.h", "GPSIMD_T") == [("a", "1"), ("b", "2")]
        assert headers.enum_values("t.h", "t_e", "T_E_") == {"A": 3, "B": 4, "C": 16}
        assert headers.enum_values("t.h", "t_g") == {"T_G_A": 0, "OTHER_B": 1}
        with pytest.raises(headers.HeaderError, match="no enum t_h"):
            headers.enum_values("t.h", "t_h")
        with pytest.raises(headers.HeaderError, match="enum t_f: cannot read 'T_F_A = 1 << 2'"):
            headers.enum_values("t.h", "t_f", "T_F_")
        with pytest.raises(headers.HeaderError, match="enum t_g: cannot read 'OTHER_B'"):
            headers.enum_values("t.h", "t_g", "T_G_")
        with pytest.raises(headers.HeaderError, match="no X-macro GPSIMD_U"):
            headers.xmacro_rows("t.h", "GPSIMD_U")
        with pytest.raises(headers.HeaderError, match="cannot read"):
            headers.defines("missing.h")
    finally:
        for cached in (headers.header_text, headers.defines, headers.enum_values):
            cached.cache_clear()


def test_plan_round_trip_of_the_shipped_collection():
    from gpsimd_build.manifest import load_manifest
    from gpsimd_build.testplan import library_plan
    col = load_manifest(os.path.join(ROOT, "ops.yaml"), root=ROOT)
    for lib in col.libraries:
        cores = [(s.core, s.name, f"build/host/{lib.name}/{n}.packed.so")
                 for s, n in zip(lsp.linker_specs(lib.multicore),
                                 lsp.linked_names(lib.name, lib.multicore))]
        plan = library_plan(lib, cores)
        text = plan.dumps()
        again = TestPlan.from_json(json.loads(text))
        assert again.dumps() == text
        assert again.vector_count() == sum(len(op.vectors) for op in lib.ops)


def test_plan_structure_errors_name_the_place(tmp_path):
    with pytest.raises(PlanError, match="plan format 2, this model reads 1"):
        TestPlan.from_json({"format": 2})
    with pytest.raises(PlanError, match=r"ops\[0\]\.vectors\[0\]\.inputs\.x: expected a JSON object"):
        TestPlan.from_json({"format": 1, "library": "l", "cores": [],
                            "ops": [{"name": "o", "vectors": [{"name": "v", "inputs": {"x": 3}}]}]})
    with pytest.raises(PlanError, match=r"v\.rtol: expected a number"):
        VectorPlan.from_json({"name": "v", "inputs": {}, "rtol": "big"}, "v")
    bad = tmp_path / "p.json"
    bad.write_text("[")
    with pytest.raises(PlanError, match="p.json: not JSON"):
        TestPlan.load(str(bad))


def test_results_round_trip_and_atomic_write(tmp_path):
    res = LibraryResults("lib", [VectorResult("op", "v", "ops.yaml:1:2", "fail", "why", 0.5, 3,
                                              warnings=["core 0: w"])])
    path = tmp_path / "r.json"
    res.write(str(path))
    assert os.listdir(tmp_path) == ["r.json"]
    back = LibraryResults.load(str(path))
    assert back.to_json() == res.to_json() and (back.passed, back.failed) == (0, 1)


def test_the_package_imports_neither_side():
    code = ("import sys, gpsimd_device.dtypes, gpsimd_device.limits, gpsimd_device.lsp, "
            "gpsimd_device.pack, gpsimd_device.faults, gpsimd_device.plan, gpsimd_device.results, "
            "gpsimd_device.versions\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'ml_dtypes', "
            "'yaml', 'jsonschema', 'SCons', 'gpsimd_build', 'gpsimd_emu')))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "runtime_model"))
    out = subprocess.run([sys.executable, "-S", "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == "[]"
