"""The shipped collection (ops.yaml + kernels/) as the device-fidelity issue
asks for it, the version metadata written with every library
(the Neuron SDK's build driver, build_custom_op.py) and the manifest's ``location: sbuf`` key reaching
the emulator (the device ABI (gpsimd_host/abi.h))."""
import json
import re

import yaml

from conftest import ROOT, run_scons

R8 = [2, 1, 3, 1, 2, 1, 2, 3]


def _manifest():
    return yaml.safe_load((ROOT / "ops.yaml").read_text())


def _model():
    """The loaded collection: ops with their names, kernel functions and
    schemas (derived from shape functions where the manifest gives none)."""
    from gpsimd_build.manifest import load_manifest
    return load_manifest(str(ROOT / "ops.yaml"), root=str(ROOT))


def _sources(lib):
    return "\n".join((ROOT / s).read_text() for s in lib["sources"])


def test_at_least_twenty_ops_and_ten_per_library_at_most():
    libs = _manifest()["libraries"]
    assert sum(len(lib["ops"]) for lib in libs) >= 20
    assert all(len(lib["ops"]) <= 10 for lib in libs)   # docs/kernel-api.md, Limits


def test_every_api_family_has_a_real_kernel():
    text = "\n".join(_sources(lib) for lib in _manifest()["libraries"])
    families = [
        r"torch::eye\(", r"torch::full\(", r"torch::ones\(", r"torch::zeros\(", r"torch::empty\(",
        r"\.fill_\(", r"\.numel\(\)", r"\.sizes\(\)", r"\.scalar_type\(\)",
        # element-wise, allocating and _out forms
        r"torch::sin\(", r"torch::cos\(", r"torch::tan\(", r"torch::abs\(", r"torch::ceil\(",
        r"torch::floor_out\(", r"torch::log_out\(", r"torch::log2_out\(", r"torch::log10_out\(",
        r"torch::exp_out\(", r"torch::pow\(", r"torch::pow_out\(", r"torch::clamp_out\(", r"torch::add\(",
        r"torch::add_out\(", r"torch::sub\(", r"torch::sub_out\(", r"torch::mul\(", r"torch::mul_out\(",
        r"torch::div\(", r"torch::div_out\(", r"torch::bitwise_and\(", r"torch::bitwise_or_out\(",
        r"torch::bitwise_not\(",
        # accessors and memory
        r"accessor<", r"read_stream_accessor<", r"write_stream_accessor<", r"\.close\(\)",
        r"set_accessor_coherence_policy\(torch::neuron::COHERENT\)",
        r"set_accessor_coherence_policy\(torch::neuron::INCOHERENT_VERBOSE\)",
        r"set_accessor_coherence_policy\(torch::neuron::INCOHERENT_QUIET\)",
        r"tcm_accessor\(\)", r"tensor_to_tcm<", r"tcm_to_tensor<", r"tcm_malloc\(", r"tcm_free\(",
        r"get_dst_tensor\(\)", r"get_cpu_id\(\)", r"get_cpu_count\(\)", r"printf\(",
    ]
    missing = [f for f in families if not re.search(f, text)]
    assert missing == []


def test_scalar_argument_types_and_dtypes():
    libs = _manifest()["libraries"]
    schemas = " ".join(str(op.schema) + " " for lib in _model().libraries for op in lib.ops)
    for arg in ("Tensor ", "Scalar ", "int ", "float ", "long long "):
        assert arg in schemas
    text = yaml.safe_dump(libs)
    for dtype in ("float32", "float16", "bfloat16", "int32", "int64", "uint16", "float8_e4m3"):
        assert f"dtype: {dtype}" in text
    assert any(lib.get("multicore") for lib in libs)


def test_every_op_hits_the_edge_sizes():
    kernels = {(lib.name, op.name): op.function for lib in _model().libraries for op in lib.ops}
    for lib in _manifest()["libraries"]:
        src = _sources(lib)
        for op in lib["ops"]:
            name = op.get("name") or op["schema"].split("::")[1].split("(")[0]
            kernel = kernels[(lib["name"], name)]
            counts, ranks = set(), set()
            for v in op["vectors"]:
                for inp in (v.get("inputs") or {}).values():
                    if isinstance(inp, dict) and "shape" in inp:
                        n = 1
                        for d in inp["shape"]:
                            n *= d
                        counts.add((n, inp["dtype"]))
                        ranks.add(len(inp["shape"]))
            if not counts:   # a factory op: its sizes are scalar arguments
                continue
            sizes = {n for n, _ in counts}
            assert 1 in sizes, name
            assert any(n > 2 and all(n % p for p in range(2, int(n ** 0.5) + 1)) for n in sizes), name
            itemsize = {"float32": 4, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}
            assert any(n * itemsize.get(dt, 2 if "16" in dt else 1) > 16 * 1024 for n, dt in counts), name
            # rank-agnostic ops (no rank-1 standard accessor on an input)
            body = src.split(f" {kernel}(")[1].split("\n}\n")[0]
            if "accessor<" not in body.replace("stream_accessor<", ""):
                assert 8 in ranks, name


def test_versions_json_with_every_library(built_project):
    proj, _ = built_project
    for lib in _manifest()["libraries"]:
        doc = json.loads((proj / "build/host" / lib["name"] / "versions.json").read_text())
        assert doc == {"library": lib["name"], "profile": "host", "version": "0.21.2.0",
                       "ulib_to_ucode_version": "1.21.1.0", "ulib_to_isa_version": "1.0.2520.0"}


def test_sbuf_location_reaches_the_plan_and_passes(built_project):
    proj, proc = built_project
    plan = json.loads((proj / "build/host/relu/testplan.json").read_text())
    vec = next(v for op in plan["ops"] for v in op["vectors"] if v["name"] == "sbuf_n1009")
    assert vec["inputs"]["x"]["location"] == "sbuf"
    assert vec["output"]["location"] == "sbuf"
    other = next(v for op in plan["ops"] for v in op["vectors"] if v["name"] == "n1000")
    assert "location" not in other["inputs"]["x"] and "location" not in other["output"]
    assert re.search(r"^PASS relu::relu_forward\[sbuf_n1009\] .* over 1009 elements$", proc.stdout, re.M)
    assert re.search(r"^PASS spmd::spmd_relu\[sbuf_out_n4099\] .* over 4099 elements$", proc.stdout, re.M)


def test_bad_location_is_a_located_manifest_error(tmp_path):
    from conftest import copy_project
    proj = copy_project(tmp_path / "p")
    (proj / "bad.yaml").write_text(
        "version: 1\nlibraries:\n  - name: relu\n    sources: [kernels/relu/relu.cpp]\n    ops:\n"
        "      - schema: \"my_ops::relu_forward(Tensor x) -> Tensor\"\n"
        "        reference: kernels/relu/reference.py:relu_forward\n        vectors:\n"
        "          - name: v\n            inputs:\n"
        "              x: {dtype: float32, shape: [3], location: tcm, values: [1, 2, 3]}\n")
    proc = run_scons(proj, "MANIFEST=bad.yaml")
    assert proc.returncode == 2
    assert "bad.yaml:11:" in proc.stderr and "location" in proc.stderr and "tcm" in proc.stderr


def test_three_libraries_have_shape_sources():
    """Issue 16: at least three shipped libraries take their outputs from shape
    functions, one multicore, one with an op whose kernel has another name."""
    shaped = [lib for lib in _model().libraries if lib.shape_sources]
    assert [lib.name for lib in shaped] == ["relu", "tcm_eltwise", "spmd"]
    assert [lib.multicore for lib in shaped] == [False, False, True]
    renamed = [(lib.name, op.name, op.function) for lib in shaped for op in lib.ops
               if op.name != op.function]
    assert renamed == [("tcm_eltwise", "leaky_relu", "leaky_relu_compute")]
    tcm = shaped[1]
    assert [(str(op.schema), op.schema_derived) for op in tcm.ops] == [
        ("my_ops::scale_shift(Tensor x, float scale, float shift) -> Tensor", True),
        ("my_ops::leaky_relu(Tensor x, float slope) -> Tensor", True)]


def test_big_tensors_pass_single_and_multicore(built_project):
    """A 1-D float32 tensor of 2,000,000 elements (beyond the 65535 of the
    8-D inline shape) on relu and on the multicore spmd library."""
    _, proc = built_project
    for line in ("PASS relu::relu_forward[n2000000] (ops.yaml:35:13): max_abs_err 0 over "
                 "2000000 elements",
                 "PASS spmd::spmd_relu[n2000000] (ops.yaml:146:13): max_abs_err 0 over "
                 "2000000 elements"):
        assert line in proc.stdout.splitlines(), proc.stdout[-3000:]
