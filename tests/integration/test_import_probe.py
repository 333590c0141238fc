"""The importer asks the kernels (gpsimd_build.import_probe and the probe
phase of gpsimd_explore): a kernel whose accessors are 2-dimensional
gets rank-2 vectors and passes as printed; AWS-like multicore relu's
remainder bug, hidden by 8 elements over 8 cores, fails as imported,
naming core 7; with ``--no-probe`` the ops have no vectors, the build
reports them as such (never a failure), and ``scons explore`` probes them.
The samples are laid out like AWS's public ones (``tests/data``)."""
import json
import os
import shutil
import subprocess
import sys

from conftest import ROOT, processes_in

_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [str(ROOT / "site_scons"), str(ROOT / "runtime_model")]))


def _sample(tmp_path, name):
    folder = tmp_path / name
    shutil.copytree(ROOT / "tests" / "data" / name, folder)
    return folder


def _import(folder, *args, stderr=""):
    """``gpsimd-import build.py`` in ``folder``: the manifest printed."""
    got = subprocess.run([sys.executable, "-m", "gpsimd_build", "import", *args, "build.py"],
                         cwd=folder, env=_ENV, capture_output=True, text=True, timeout=900)
    assert got.returncode == 0 and got.stderr == stderr, got.stdout + got.stderr
    (folder / "ops.yaml").write_text(got.stdout)
    return got.stdout


def _build(folder, *args):
    """``gpsimd-build -Q ARGS`` in ``folder`` (the package's SConstruct)."""
    return subprocess.run([sys.executable, "-m", "gpsimd_build.command", "-Q", "-j2", *args],
                          cwd=folder, env=_ENV, capture_output=True, text=True, timeout=900)


def _lines(proc, *starts):
    return [l for l in proc.stdout.splitlines() if l.startswith(starts)]


def test_a_2d_kernel_gets_rank_2_vectors_and_passes_as_printed(tmp_path):
    folder = _sample(tmp_path, "aws_relu_2d")
    text = _import(folder)
    assert ("      - name: relu_forward\n        vectors:\n"
            "          - name: one\n            inputs:\n"
            "              t_in: {dtype: float32, shape: [1, 1], random: {}}\n"
            "          - name: uneven\n            inputs:\n"
            "              t_in: {dtype: float32, shape: [27, 37], random: {}}\n") in text
    assert "t_grad: {dtype: float32, shape: [27, 37], random: {}}" in text
    record = json.loads((folder / "build/host/relu/explore.json").read_text())["ops"]
    # (learned from the kernel's own fault: sizes()[1] of a 1-dimensional tensor)
    assert record["relu_forward"]["ranks"] == {"t_in": 2}
    assert record["relu_forward"]["lessons"] == ["IntArrayRef index 1 out of range (size 1)"]
    proc = _build(folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _lines(proc, "all libraries") == [
        "all libraries: 0 passed, 0 failed, 4 CHECKED (no reference)"]


def test_the_multicore_sample_s_remainder_bug_fails_as_imported_naming_core_7(tmp_path):
    folder = _sample(tmp_path, "aws_multicore")
    # (the probe's run, 2 elements over 8 cores, already fails: said, and kept)
    failure = ("core 7: fault OUT_OF_RANGE in op relu_forward: tensor_to_tcm<float> out of "
               "range: offset 14, count 2, numel 2")
    text = _import(folder, stderr=(
        f"warning: build.py:5:1: op relu_forward: the probe's last run failed ({failure}); "
        "its vectors have the ranks and dtypes the kernel did not refuse\n"))
    assert (f"      - name: relu_forward\n        # the probe's last run failed ({failure}): "
            "these ranks and dtypes are those it did not refuse\n        vectors:\n") in text
    assert "t_in: {dtype: float32, shape: [999], random: {}}" in text
    proc = _build(folder, "-k")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert _lines(proc, "FAIL relu_mc::relu_forward[uneven]") == [
        "FAIL relu_mc::relu_forward[uneven] (ops.yaml:24:13): core 7: fault OUT_OF_RANGE in op "
        "relu_forward: tensor_to_tcm<float> out of range: offset 917, count 131, numel 999; "
        "elements never written by any core: [868, 999); core 7 wrote nothing"]


def test_ops_without_vectors_build_and_explore_probes_them(tmp_path):
    folder = _sample(tmp_path, "aws_relu_2d")
    text = _import(folder, "--no-probe")
    assert text.endswith("    ops:\n      - name: relu_forward\n      - name: relu_backward\n")
    assert not (folder / "build").exists()          # (no probe: nothing built)
    proc = _build(folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _lines(proc, "relu:", "all libraries") == [
        "relu: 0 passed, 0 failed, 2 ops without vectors",
        "relu: 0 passed, 0 failed, 2 ops without vectors",
        "all libraries: 0 passed, 0 failed, 2 ops without vectors"]
    report = (folder / "build/host/report.html").read_text()
    assert "relu_forward, relu_backward</p>" in report and "without vectors" in report
    proc = _build(folder, "explore-relu", "EXPLORE_EXAMPLES=15")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _lines(proc, "EXPLORED", "FALSIFIED", "SKIPPED", "relu:") == [
        "EXPLORED relu::relu_forward: 15 examples, every check passed",
        "EXPLORED relu::relu_backward: 15 examples, every check passed",
        "relu: 2 ops explored, 0 falsified"]
    record = json.loads((folder / "build/host/relu/explore.json").read_text())["ops"]
    assert record["relu_backward"]["ranks"] == {"t_grad": 2, "t_in": 2}
    # the report shows the exploration; the tests, not run by it, are kept
    report = (folder / "build/host/report.html").read_text()
    assert '<tr class="explore explored" data-op="relu_backward">' in report
    assert "(0 passed, 0 failed, 2 ops without vectors; not run in this build" in report
    assert "(its results are as of that run)" in report
    # another plan (the manifest changed): the last exploration is marked stale
    (folder / "ops.yaml").write_text(text.replace(
        "      - name: relu_backward\n", "      - name: relu_backward\n"
        "        explore: {max_elements: 64}\n"))
    assert _build(folder).returncode == 0
    report = (folder / "build/host/report.html").read_text()
    assert "stale: it explored another plan than this build&#x27;s" in report


def test_a_kernel_that_does_not_build_is_imported_without_vectors_and_a_warning(tmp_path):
    folder = _sample(tmp_path, "aws_relu_2d")
    (folder / "relu.cpp").write_text((folder / "relu.cpp").read_text() + "\nnot C++;\n")
    got = subprocess.run([sys.executable, "-m", "gpsimd_build", "import", "build.py"],
                         cwd=folder, env=_ENV, capture_output=True, text=True, timeout=900)
    assert got.returncode == 0, got.stderr
    assert got.stdout.endswith("    ops:\n      - name: relu_forward\n      - name: relu_backward\n")
    warning = got.stderr.splitlines()
    assert warning[0] == ("warning: build.py:5:1: the ops were not probed, so they have no "
                          "vectors: the probe's build failed:")
    assert any("relu.cpp" in line and "error" in line for line in warning[1:]), got.stderr


def test_ctrl_c_during_the_probe_ends_its_build_and_writes_nothing(tmp_path):
    import signal
    import time
    folder = _sample(tmp_path, "aws_relu_2d")
    proc = subprocess.Popen([sys.executable, "-m", "gpsimd_build", "import", "-o", "ops.yaml",
                             "build.py"], cwd=folder, env=_ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not [p for p in processes_in(folder) if p != proc.pid]:     # (its build started)
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert err == "gpsimd-import: interrupted; nothing written\n"
    assert not (folder / "ops.yaml").exists()
    deadline = time.monotonic() + 30        # (the build's group got SIGTERM, then SIGKILL)
    while processes_in(folder):
        assert time.monotonic() < deadline, processes_in(folder)
        time.sleep(0.1)
