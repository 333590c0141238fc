"""A reference that reaches a project module in a way the build's import
scanner cannot see (a computed name) FAILs its vectors, naming the module
and the fix, from the first build: the build could never run its test
again on an edit of that module, so a PASS would go stale
(``gpsimd_emu.sourceonly``, docs/manifest.md)."""
from conftest import copy_project, run_scons

REFERENCE = (
    "import importlib\n"
    "import numpy as np\n\n"
    "NAME = 'helpa'\n\n\n"
    "def relu_forward(x):\n"
    "    return np.maximum(x, np.float32(0))\n\n\n"
    "def relu_backward(grad, x):\n"
    "    factor = importlib.import_module(NAME).FACTOR\n"
    "    return np.where(x > 0, grad * factor, np.float32(0)).astype(np.float32)\n")


def test_a_computed_import_fails_the_vectors_of_its_reference(tmp_path):
    proj = copy_project(tmp_path / "proj")
    (proj / "kernels/relu/reference.py").write_text(REFERENCE)
    (proj / "kernels/relu/helpa.py").write_text("FACTOR = 1\n")
    proc = run_scons(proj, "-Q", "relu")
    lines = [l for l in proc.stdout.splitlines() if l.startswith(("PASS relu::", "FAIL relu::"))]
    failed = [l for l in lines if l.startswith("FAIL")]
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert failed and all(l.startswith("FAIL relu::relu_backward[") for l in failed), lines
    assert all(l.endswith(
        ": reference kernels/relu/reference.py:relu_backward imported kernels/relu/helpa.py, "
        "which the build cannot see as a dependency (a computed import): an edit to it would "
        "not run this test again; import it with a plain import statement (docs/manifest.md)")
        for l in failed), failed
    assert any(l.startswith("PASS relu::relu_forward[") for l in lines), lines
    assert f"relu: {len(lines) - len(failed)} passed, {len(failed)} failed" in proc.stdout


def test_a_module_reference_from_pythonpath_runs_under_scons(tmp_path):
    """docs/manifest.md: a ``module:function`` reference may come from
    PYTHONPATH. The test command's environment had only the build's own
    folders there, so scons failed it (``No module named``) where pytest
    and ninja passed it."""
    import yaml
    proj = copy_project(tmp_path / "proj")
    lib = tmp_path / "outside" / "mylib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(
        "import numpy as np\n\n\ndef relu(x):\n    return np.maximum(x, np.float32(0))\n")
    doc = yaml.safe_load((proj / "ops.yaml").read_text())
    relu = next(lib for lib in doc["libraries"] if lib["name"] == "relu")
    op = next(op for op in relu["ops"] if "relu_forward" in op.get("schema", op.get("name", "")))
    op["reference"] = "mylib:relu"
    doc["libraries"] = [relu]
    (proj / "one.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = run_scons(proj, "-Q", "MANIFEST=one.yaml",
                     env={"PYTHONPATH": str(tmp_path / "outside")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "relu: 10 passed, 0 failed" in proc.stdout, proc.stdout
