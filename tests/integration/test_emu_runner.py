"""Running plans (tests/emu_run.py over LibrarySession, and the CLI)
against stand-in core objects.

The stand-in (tests/native/fake_core.cpp, compiled by tests/fake_core.py)
implements the abi.h contract without the C++ runtime, with ops that behave and ops that misbehave, so the
model's forked runs, merges and messages are tested end to end.
"""
import errno
import json
import os
import re
import subprocess
import sys
import time

import pytest

from gpsimd_device.plan import TestPlan
import emu_run as runner
from emu_run import (FAULT_KINDS, LibraryResults, VectorResult, fault_kinds, fault_name,
                     format_line, write_results)
from gpsimd_device.pack import pack_bytes
from fake_core import CXX, compile_fake_core
from gpsimd_emu import abi
from gpsimd_emu.merge import cores_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = os.path.join(ROOT, "runtime_model", "include")

needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler")

REFERENCE = """\
import numpy as np
def relu(x):
    return np.maximum(x, np.float32(0))
def scale(x, alpha):
    return x * np.float32(alpha)
def ident(x):
    return x
"""


@pytest.fixture(scope="session")
def objects(tmp_path_factory):
    """{"single": (.packed.so, .so), 0..7: .packed.so} of the stand-in."""
    if CXX is None:
        pytest.skip("no C++ compiler")
    d = tmp_path_factory.mktemp("fake_cores")
    out = {}
    so = d / "fake.so"
    compile_fake_core(so)
    packed = d / "fake.packed.so"
    packed.write_bytes(pack_bytes(so.read_bytes(), {
        "entry": "lib_func", "library": "fake", "lsp": "lsp_fll_load_cpu_single", "core": None,
        "versions": {}}))
    out["single"] = (packed, so)
    for i in range(8):
        so = d / f"fake_cpu{i}.so"
        compile_fake_core(so, i)
        packed = d / f"fake_cpu{i}.packed.so"
        packed.write_bytes(pack_bytes(so.read_bytes(), {
            "entry": "lib_func", "library": "fake", "lsp": abi.lsp_name(i), "core": i,
            "versions": {}}))
        out[i] = packed
    return out


def tensor(shape, seed=7, dtype="float32", **rnd):
    return {"kind": "tensor", "dtype": dtype, "shape": shape,
            "random": {"seed": seed, "distribution": "normal", **rnd}}


def vec(name, inputs, func="relu", dtype="float32", shape=None, **extra):
    v = {"name": name, "where": f"ops.yaml:{len(name)}:3", "inputs": inputs,
         "output": {"dtype": dtype, "shape": shape},
         "expected": {"reference": {"file": "ref.py", "function": func}},
         "rtol": 1.3e-06, "atol": 1e-05}
    v.update(extra)
    return v


def op(name, vectors, args=("x",)):
    return {"name": name, "schema": f"my_ops::{name}(...) -> Tensor",
            "args": [{"name": a, "type": "Tensor"} for a in args], "stack_size": 4196,
            "vectors": vectors}


def plan(tmp_path, objects, ops, multicore=False, cores=None):
    (tmp_path / "ref.py").write_text(REFERENCE)
    if cores is None:
        if multicore:
            cores = [{"core": i, "lsp": abi.lsp_name(i), "object": str(objects[i])} for i in range(8)]
        else:
            cores = [{"core": None, "lsp": "lsp_fll_load_cpu_single",
                      "object": str(objects["single"][0])}]
    return {"format": 1, "library": "fake", "multicore": multicore, "cores": cores, "ops": ops}


_ZYGOTE: list = []


@pytest.fixture(autouse=True)
def _zygote(zygote_program):
    _ZYGOTE[:] = [zygote_program]


def run_plan(plan, **kw):
    """Run a plan given in its JSON form, read as the emulator reads a file."""
    return runner.run_plan(TestPlan.from_json(plan), zygote=_ZYGOTE[0], **kw)


def by_name(results):
    return {r.vector: r for r in results.vectors}


@needs_cxx
def test_single_core_pass_and_scalar_argument(tmp_path, objects):
    p = plan(tmp_path, objects, [
        op("relu", [vec("n1000", {"x": tensor([1000])}), vec("n2x3", {"x": tensor([2, 3])})]),
        op("scale", [vec("alpha", {"x": tensor([64]), "alpha": {
            "kind": "scalar", "type": "float", "dtype": "float32", "value": -1.5}}, func="scale")],
           args=("x", "alpha")),
    ])
    res = run_plan(p, root=str(tmp_path), timeout=30)
    assert [(r.vector, r.status, r.message) for r in res.vectors] == [
        ("n1000", "pass", ""), ("n2x3", "pass", ""), ("alpha", "pass", "")]
    r = res.vectors[0]
    assert r.mismatches == 0 and r.max_abs_err == 0.0 and r.elements == 1000
    assert res.ok and res.summary_line() == "fake: 3 passed, 0 failed"


@needs_cxx
def test_multicore_clean_split_passes_and_known_defect_is_located(tmp_path, objects):
    p = plan(tmp_path, objects, [
        op("relu", [vec("n1001", {"x": tensor([1001])}), vec("n13", {"x": tensor([13])})]),
        op("relu_buggy", [vec("n1001", {"x": tensor([1001])}), vec("n1024", {"x": tensor([1024])})]),
    ], multicore=True)
    res = run_plan(p, root=str(tmp_path), timeout=30)
    st = [(r.op, r.vector, r.status) for r in res.vectors]
    assert st == [("relu", "n1001", "pass"), ("relu", "n13", "pass"),
                  ("relu_buggy", "n1001", "fail"), ("relu_buggy", "n1024", "pass")]
    bad = res.vectors[2]
    # partition 125, last core 126 starting at 882: [875, 882) never written,
    # and core 7 runs to 1008, 7 elements past the end.
    assert bad.message == ("core 7 wrote past the end of the output: elements [1001, 1008) "
                           "(the output has 1001 elements); "
                           "elements never written by any core: [875, 882)")
    assert bad.mismatches is None and bad.max_abs_err is None


@needs_cxx
def test_crash_fails_only_its_vector_naming_signal_and_core(tmp_path, objects):
    p = plan(tmp_path, objects, [op("crash", [vec("boom", {"x": tensor([64])})]),
                                 op("relu", [vec("after", {"x": tensor([64])})])], multicore=True)
    res = by_name(run_plan(p, root=str(tmp_path), timeout=30))
    assert res["boom"].status == "fail"
    assert res["boom"].message == "core 7 crashed with SIGSEGV"
    assert res["after"].status == "pass"


@needs_cxx
def test_timeout_kills_the_vector(tmp_path, objects):
    p = plan(tmp_path, objects, [op("hang", [vec("loop", {"x": tensor([4])})]),
                                 op("relu", [vec("after", {"x": tensor([4])})])])
    res = by_name(run_plan(p, root=str(tmp_path), timeout=1.0))
    assert res["loop"].message == "timed out after 1 s (core 0 was running)"
    assert res["after"].status == "pass"


@needs_cxx
def test_a_hung_first_call_times_out_at_the_limit_not_twice_it(tmp_path, objects):
    """Run 0 also makes the op's second call (in the same process, core by
    core): the two calls have a limit each, so a hang in the first one ends
    after the limit, where the run's one shared deadline waited for twice it."""
    p = plan(tmp_path, objects, [op("relu", [vec("before", {"x": tensor([4])})]),
                                 op("hang", [vec("loop", {"x": tensor([4])})])])
    at = {}
    res = by_name(run_plan(p, root=str(tmp_path), timeout=3.0,
                           on_result=lambda r: at.setdefault(r.vector, time.monotonic())))
    assert res["loop"].message == "timed out after 3 s (core 0 was running)"
    took = at["loop"] - at["before"]
    assert took < 5.0, took      # (twice the limit: 6 s and more; the vector may start
    #  a little before the one ahead of it reports)


@needs_cxx
def test_runtime_fault_report_is_the_message(tmp_path, objects):
    p = plan(tmp_path, objects, [op("faulty", [vec("f", {"x": tensor([13])})])])
    r = run_plan(p, root=str(tmp_path)).vectors[0]
    # the fault, then what the output shows (nothing written); no comparison
    assert r.message == ("core 0: fault OUT_OF_RANGE in op faulty: tcm_to_tensor: offset 12 + 4 > numel 13; "
                         "elements never written: [0, 13)")
    assert r.mismatches is None


@needs_cxx
def test_identical_faults_of_several_cores_are_grouped(tmp_path, objects):
    p = plan(tmp_path, objects, [op("faulty", [vec("f", {"x": tensor([16])})])], multicore=True)
    r = run_plan(p, root=str(tmp_path)).vectors[0]
    assert r.message.startswith("cores 0-7: fault OUT_OF_RANGE in op faulty: tcm_to_tensor: offset 12 + 4 > "
                                "numel 13; elements never written by any core: [0, 16); ")
    assert r.message.endswith("wrote nothing")


def test_cores_text():
    assert cores_text([3]) == "core 3"
    assert cores_text([0, 1, 2, 3, 4, 5, 6, 7]) == "cores 0-7"
    assert cores_text([6, 1, 4, 5]) == "cores 1, 4-6"


@needs_cxx
def test_printf_of_core_zero_is_kept(tmp_path, objects):
    p = plan(tmp_path, objects, [op("hello", [vec("hi", {"x": tensor([100])})])], multicore=True)
    r = run_plan(p, root=str(tmp_path)).vectors[0]
    assert r.status == "pass" and r.printf == "hello from core 0\n"


@needs_cxx
def test_value_equal_to_poison_is_not_a_hole(tmp_path, objects):
    x = {"kind": "tensor", "dtype": "int8", "shape": [6], "values": [-91, 90, 0, -91, 5, -91]}
    p = plan(tmp_path, objects, [op("copy_i8", [vec("poisonous", {"x": x}, func="ident",
                                                    dtype="int8")])])
    r = run_plan(p, root=str(tmp_path)).vectors[0]
    assert (r.status, r.message, r.mismatches) == ("pass", "", 0)


@needs_cxx
def test_write_past_end_and_modified_input(tmp_path, objects):
    p = plan(tmp_path, objects, [op("overrun", [vec("o", {"x": tensor([10])}, func="ident")]),
                                 op("touch_input", [vec("t", {"x": tensor([10])})]),
                                 op("touch_input_after", [vec("a", {"x": tensor([10])})])])
    res = by_name(run_plan(p, root=str(tmp_path)))
    assert res["o"].message.startswith(
        "core 0 wrote past the end of the output: elements [10, 13) (the output has 10 elements); "
        "10 of 10 elements differ")
    assert res["t"].message.startswith("input 'x' was modified (4 bytes changed); "
                                       "1 of 10 elements differ")
    # a right output, then the input changed: the modified input explains a
    # second call's other output, so no hint of state kept between calls
    assert res["a"].message == "input 'x' was modified (4 bytes changed)", res["a"].message


@needs_cxx
def test_an_image_the_worker_cannot_write_fails_its_vector_not_the_run(tmp_path, objects,
                                                                       monkeypatch):
    """The poisoned output copies written to the image file (pwrite) when no
    memory is left for them: that vector fails, named, and the next runs."""
    from gpsimd_emu.memory import ImageFile
    real, n = ImageFile.write, []

    def write(self, offset, data):
        n.append(offset)
        if len(n) == 3:                     # (the first vector's poisoned copies)
            raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))
        real(self, offset, data)
    monkeypatch.setattr(ImageFile, "write", write)
    p = plan(tmp_path, objects, [op("relu", [vec("a", {"x": tensor([10])}),
                                             vec("b", {"x": tensor([10])})])])
    res = run_plan(p, root=str(tmp_path), timeout=30)
    assert [(r.vector, r.status, r.message) for r in res.vectors] == [
        ("a", "fail", "cannot lay out device memory: [Errno 12] Cannot allocate memory"),
        ("b", "pass", "")]


@needs_cxx
def test_out_of_line_output_shape_reaches_the_core(tmp_path, objects):
    v = vec("empty", {"x": tensor([3])}, shape=[2, 0, 3])
    v["expected"] = {"values": []}
    p = plan(tmp_path, objects, [op("ool_shape", [v])])
    r = run_plan(p, root=str(tmp_path)).vectors[0]
    assert (r.status, r.message) == ("pass", "")


@needs_cxx
def test_unpacked_so_loads_directly(tmp_path, objects):
    cores = [{"core": None, "lsp": "lsp_fll_load_cpu_single", "object": str(objects["single"][1])}]
    p = plan(tmp_path, objects, [op("relu", [vec("plain", {"x": tensor([50])})])], cores=cores)
    assert run_plan(p, root=str(tmp_path)).vectors[0].status == "pass"


@needs_cxx
def test_object_problems_fail_every_vector_without_traceback(tmp_path, objects):
    bad = tmp_path / "bad.packed.so"
    data = bytearray(objects["single"][0].read_bytes())
    data[-1] ^= 0xFF
    bad.write_bytes(bytes(data))
    ops = [op("relu", [vec("a", {"x": tensor([4])}), vec("b", {"x": tensor([4])})])]
    cores = [{"core": None, "lsp": "lsp_fll_load_cpu_single", "object": "bad.packed.so"}]
    res = run_plan(plan(tmp_path, objects, ops, cores=cores), root=str(tmp_path))
    assert [r.status for r in res.vectors] == ["fail", "fail"]
    assert re.fullmatch(r".*bad\.packed\.so: CRC mismatch: header says 0x[0-9a-f]{8}, "
                        r"payload has 0x[0-9a-f]{8}", res.vectors[0].message)
    cores[0]["object"] = "missing.packed.so"
    res = run_plan(plan(tmp_path, objects, ops, cores=cores), root=str(tmp_path))
    assert res.vectors[0].message == "missing.packed.so: cannot read: No such file or directory"


@needs_cxx
def test_wrong_core_object_is_caught(tmp_path, objects):
    p = plan(tmp_path, objects, [op("relu", [vec("n64", {"x": tensor([64])})])], multicore=True)
    p["cores"][3]["object"] = str(objects[4])
    r = run_plan(p, root=str(tmp_path)).vectors[0]
    assert r.status == "fail"
    assert r.message == (f"{os.path.normpath(objects[4])}: pack metadata says lsp "
                         "'lsp_fll_load_cpu4' core 4, the plan says 'lsp_fll_load_cpu3' core 3")


@needs_cxx
def test_unregistered_op_and_plan_problems_are_failure_lines(tmp_path, objects):
    bad_ref = vec("badref", {"x": tensor([4])})
    bad_ref["expected"] = {"reference": {"file": "nope.py", "function": "f"}}
    bad_shape = vec("badshape", {"x": tensor([4])}, shape=[5])
    p = plan(tmp_path, objects, [op("missing_op", [vec("m", {"x": tensor([4])})]),
                                 op("relu", [bad_ref, bad_shape, vec("ok", {"x": tensor([4])})])])
    res = by_name(run_plan(p, root=str(tmp_path)))
    assert res["m"].message.endswith("op 'missing_op' is not registered (get_func_name gives "
                                     "relu, relu_buggy, scale, crash, hang, faulty, hello, "
                                     "copy_i8, overrun, touch_input, ool_shape, touch_input_after)")
    assert res["badref"].message == "reference nope.py: no such file"
    assert res["badshape"].message == ("expected output has shape [4], "
                                       "the plan's output shape is [5]")
    assert res["ok"].status == "pass"


def test_results_json_and_lines():
    res = LibraryResults("relu", [
        VectorResult("relu_forward", "small", "ops.yaml:21:11", "pass", "", 0.0, 0, 1000),
        VectorResult("relu_forward", "big", "ops.yaml:25:11", "fail", "2 of 9 elements differ",
                     float("inf"), 2, 9),
        VectorResult("relu_forward", "crash", "ops.yaml:29:11", "fail", "core 0 crashed with SIGSEGV"),
    ])
    assert res.to_json() == {
        "format": 1, "library": "relu", "passed": 1, "failed": 2,
        "vectors": [
            {"op": "relu_forward", "vector": "small", "where": "ops.yaml:21:11", "status": "pass",
             "message": "", "max_abs_err": 0.0, "mismatches": 0, "warnings": []},
            {"op": "relu_forward", "vector": "big", "where": "ops.yaml:25:11", "status": "fail",
             "message": "2 of 9 elements differ", "max_abs_err": None, "mismatches": 2, "warnings": []},
            {"op": "relu_forward", "vector": "crash", "where": "ops.yaml:29:11", "status": "fail",
             "message": "core 0 crashed with SIGSEGV", "max_abs_err": None, "mismatches": None,
             "warnings": []}]}
    assert format_line("relu", res.vectors[0]) == (
        "PASS relu::relu_forward[small] (ops.yaml:21:11): max_abs_err 0 over 1000 elements")
    assert format_line("relu", res.vectors[2]) == (
        "FAIL relu::relu_forward[crash] (ops.yaml:29:11): core 0 crashed with SIGSEGV")
    assert res.summary_line() == "relu: 1 passed, 2 failed"
    assert not res.ok
    # warnings go to the JSON and after the line, passing or failing
    res.vectors[0].warnings = ["core 0: w1", "cores 1-7: w2"]
    assert res.to_json()["vectors"][0]["warnings"] == ["core 0: w1", "cores 1-7: w2"]
    assert format_line("relu", res.vectors[0]) == (
        "PASS relu::relu_forward[small] (ops.yaml:21:11): max_abs_err 0 over 1000 elements; "
        "warning: core 0: w1; warning: cores 1-7: w2")


def test_write_results_is_valid_json(tmp_path):
    res = LibraryResults("x", [VectorResult("o", "v", "w", "pass", "", 1e-7, 0, 3)])
    out = tmp_path / "sub" / "test-results.json"
    write_results(res, str(out))
    assert json.loads(out.read_text()) == res.to_json()
    assert out.read_text().endswith("\n")


def test_fault_names_match_faults_h():
    text = open(os.path.join(INCLUDE, "gpsimd_host", "faults.h")).read()
    table = re.findall(r"X\((\w+),\s*(\d+)\)", text)
    assert table, "faults.h has no X-macro rows"
    # the built-in table agrees with every row it has; the header adds the rest
    for name, value in table:
        if int(value) < len(FAULT_KINDS):
            assert FAULT_KINDS[int(value)] == name
        assert fault_name(int(value)) == name
    assert fault_kinds() == {int(v): n for n, v in table}
    assert fault_name(999) == "UNKNOWN(999)"


@needs_cxx
def test_cli_prints_lines_writes_results_and_exit_code(tmp_path, objects):
    p = plan(tmp_path, objects, [op("relu", [vec("good", {"x": tensor([32])})]),
                                 op("faulty", [vec("bad", {"x": tensor([32])})])])
    (tmp_path / "plan.json").write_text(json.dumps(p))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "runtime_model"))
    proc = subprocess.run([sys.executable, "-m", "gpsimd_emu", "run", "plan.json", "--zygote", _ZYGOTE[0],
                           "--results", "out/results.json", "--timeout", "20"],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == [
        "PASS fake::relu[good] (ops.yaml:4:3): max_abs_err 0 over 32 elements",
        "FAIL fake::faulty[bad] (ops.yaml:3:3): core 0: fault OUT_OF_RANGE in op faulty: "
        "tcm_to_tensor: offset 12 + 4 > numel 13; elements never written: [0, 32)",
        "fake: 1 passed, 1 failed"]
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert (doc["passed"], doc["failed"], doc["library"]) == (1, 1, "fake")
    # all passing -> exit 0
    p["ops"] = p["ops"][:1]
    (tmp_path / "plan.json").write_text(json.dumps(p))
    proc = subprocess.run([sys.executable, "-m", "gpsimd_emu", "run", "plan.json", "--zygote", _ZYGOTE[0],
                           "--results", "r.json"], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.endswith("fake: 1 passed, 0 failed\n")


@needs_cxx
@pytest.mark.parametrize("given,seen", [
    ({}, {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}),
    ({"OMP_NUM_THREADS": "3"}, {"OPENBLAS_NUM_THREADS": None, "OMP_NUM_THREADS": "3",
                                "MKL_NUM_THREADS": None})])
def test_cli_references_run_with_one_blas_thread_unless_told(tmp_path, objects, given, seen):
    # the reference runs in the worker, which imported numpy: what it sees
    # is what numpy's BLAS was started with (settings.one_blas_thread)
    p = plan(tmp_path, objects, [op("relu", [vec("good", {"x": tensor([32])})])])
    (tmp_path / "ref.py").write_text(REFERENCE + (
        "import json, os\n"
        "from gpsimd_emu.settings import BLAS_THREADS_ENV\n"
        "_relu = relu\n"
        "def relu(x):\n"
        "    with open('blas.json', 'w') as f:\n"
        "        json.dump({k: os.environ.get(k) for k in BLAS_THREADS_ENV}, f)\n"
        "    return _relu(x)\n"))
    (tmp_path / "plan.json").write_text(json.dumps(p))
    env = {k: v for k, v in os.environ.items() if k not in seen}
    env.update(given, PYTHONPATH=os.path.join(ROOT, "runtime_model"))
    proc = subprocess.run([sys.executable, "-m", "gpsimd_emu", "run", "plan.json", "--zygote", _ZYGOTE[0],
                           "--results", "r.json"], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "blas.json").read_text()) == seen


def test_cli_unreadable_plan_exits_2(tmp_path):
    (tmp_path / "plan.json").write_text("{not json")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "runtime_model"))
    proc = subprocess.run([sys.executable, "-m", "gpsimd_emu", "run", "plan.json", "--zygote", _ZYGOTE[0],
                           "--results", "r.json"], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpsimd_emu: plan.json: not JSON:")
    assert "Traceback" not in proc.stderr


_CTRL_C_WHILE_IMPORTING = """
import importlib.abc, os, signal, sys
from gpsimd_emu import cli, contain

class CtrlC(importlib.abc.MetaPathFinder):      # (a Ctrl-C while the worker imports the model)
    def find_spec(self, name, path, target=None):
        if name == "gpsimd_emu.session":
            os.kill(os.getpid(), signal.SIGINT)

sys.meta_path.insert(0, CtrlC())
for sig in cli.STOP_SIGNALS:                    # (the supervisor's handlers, as supervise sets them)
    signal.signal(sig, cli._on_signal)
pid = contain.fork_child(lambda: cli._run_worker(None, None, None, -1, []))
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_a_ctrl_c_while_the_worker_starts_ends_it_quietly():
    """The worker takes its own signal handling before it imports the
    model: a Ctrl-C then ends it by the signal, not with a traceback of the
    supervisor's stop."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "runtime_model"))
    proc = subprocess.run([sys.executable, "-c", _CTRL_C_WHILE_IMPORTING], env=env,
                          capture_output=True, text=True, timeout=60)
    assert (proc.stdout, proc.stderr) == ("-2\n", "")

_CRASHED = (r"^the core objects could not be loaded: the device model process died with "
            r"SIG(SEGV|BUS) \(a static initialiser of a core object\?\)$")
_THREAD = re.escape(": it started a thread as it loaded (a static initialiser?); a core object "
                    "may run code only when a core is launched")


@needs_cxx
@pytest.mark.parametrize("define, why", [
    ("-DCRASH_AT_LOAD", _CRASHED), ("-DCRASH_AT_SECOND_LOAD", _CRASHED),
    ("-DTHREAD_AT_LOAD", _THREAD), ("-DTHREAD_AT_SECOND_LOAD", _THREAD)])
def test_a_static_initialiser_that_crashes_or_starts_a_thread_fails_every_vector(
        tmp_path, objects, define, why):
    """dlopen runs a core object's static initialisers in the zygote, once
    per copy of the object: a crash there fails each vector with a message,
    and the run ends. The copies past the first load after the zygote
    answers ready (*_SECOND_LOAD: only the second copy's initialiser
    does it): a crash there still reads as the load's, not as the first
    vector's. A thread started there would run in the zygote beside every
    vector, outside the limits and checks of a launch (it could write what
    a kernel left unwritten, or what another core wrote): that copy does
    not load, and each vector fails saying why."""
    so = tmp_path / "at_load.so"
    compile_fake_core(so, None, define)
    cores = [{"core": None, "lsp": "lsp_fll_load_cpu_single", "object": str(so)}]
    ops = [op("relu", [vec("a", {"x": tensor([4])}), vec("b", {"x": tensor([4])})])]
    res = run_plan(plan(tmp_path, objects, ops, cores=cores), root=str(tmp_path), timeout=10)
    assert [r.status for r in res.vectors] == ["fail", "fail"]
    assert re.search(why, res.vectors[0].message), res.vectors[0].message
    assert res.vectors[1].message == res.vectors[0].message


@needs_cxx
def test_what_a_static_initialiser_writes_is_printed_once_whatever_the_copies(
        tmp_path, objects, capfd):
    """Every copy of an object runs its static initialisers; what the first
    wrote is printed, once (the later copies load while the worker reads
    it: eight runs, since their order varies)."""
    so = tmp_path / "print_at_load.so"
    compile_fake_core(so, None, "-DPRINT_AT_LOAD")
    cores = [{"core": None, "lsp": "lsp_fll_load_cpu_single", "object": str(so)}]
    ops = [op("relu", [vec("a", {"x": tensor([4])})])]
    the_plan = plan(tmp_path, objects, ops, cores=cores)
    for _ in range(8):
        res = run_plan(the_plan, root=str(tmp_path), timeout=10)
        assert [r.status for r in res.vectors] == ["pass"], res.vectors[0].message
        err = capfd.readouterr().err
        assert err.count("fake core loaded") == 1, err


@needs_cxx
def test_what_a_static_initialiser_writes_is_printed_visible_each_line_prefixed(
        tmp_path, objects, capfd):
    """What core objects write while loading is the kernels' text: its
    control characters are printed as escapes, each line after the
    library's prefix, so that it cannot clear the terminal or hide what
    follows."""
    so = tmp_path / "escapes_at_load.so"
    compile_fake_core(so, None, "-DESCAPES_AT_LOAD")
    cores = [{"core": None, "lsp": "lsp_fll_load_cpu_single", "object": str(so)}]
    ops = [op("relu", [vec("a", {"x": tensor([4])})])]
    res = run_plan(plan(tmp_path, objects, ops, cores=cores), root=str(tmp_path), timeout=10)
    assert [r.status for r in res.vectors] == ["pass"], res.vectors[0].message
    err = capfd.readouterr().err
    assert "\x1b" not in err and "\r" not in err, repr(err)
    assert err.splitlines()[-3:] == [
        "gpsimd_emu: fake: what the core objects wrote while loading:",
        "[fake load] \\x1b[2J\\rloaded", "[fake load] \\x1b[8m\\x1b[30;40m"], err


@needs_cxx
def test_a_session_that_fails_while_it_reads_the_objects_leaves_no_zygote(
        tmp_path, objects, monkeypatch):
    """The zygote starts before the objects are read: whatever reading them
    raises (a Ctrl-C included), the session ends the zygote and waits for
    it before the error goes on."""
    from gpsimd_emu import contain, session

    def interrupted(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(session, "prepare_cores", interrupted)
    before = set(contain.children(os.getpid()))
    with pytest.raises(KeyboardInterrupt):
        session.LibrarySession(TestPlan.from_json(plan(tmp_path, objects, [])),
                               options=session.RunOptions(zygote=_ZYGOTE[0]))
    assert set(contain.children(os.getpid())) - before == set()


LEAVES_A_THREAD = """\
import os, threading, time
import numpy as np
def relu(x):
    if x.shape == (4,):     # a: leaves a thread that ends the process once 'go' exists
        def wait():
            while not os.path.exists("go"):
                time.sleep(0.005)
            os._exit(5)
        threading.Thread(target=wait, daemon=True).start()
    elif x.shape == (5,):   # b: makes 'go', and is harmless alone
        open("go", "w").close()
        time.sleep(0.5)
    elif x.shape == (6,):   # c: ends the process itself
        os._exit(6)
    return np.maximum(x, np.float32(0))
"""


@needs_cxx
def test_a_worker_ended_by_what_an_earlier_reference_left_fails_that_ones_vector(
        tmp_path, objects):
    """A worker that ended while it made vector b ready failed b, though it
    was a thread vector a's reference left that ended it: b's own reference
    is harmless. Made ready first in a new worker, b does not end it, so b
    keeps its verdict; a, which ends the worker whatever is made, and c,
    whose reference ends it, fail, named."""
    p = plan(tmp_path, objects, [op("relu", [vec(n, {"x": tensor([k])}) for n, k in
                                              (("a", 4), ("b", 5), ("c", 6), ("d", 7))])])
    (tmp_path / "ref.py").write_text(LEAVES_A_THREAD)
    (tmp_path / "plan.json").write_text(json.dumps(p))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "runtime_model"))
    proc = subprocess.run([sys.executable, "-m", "gpsimd_emu", "run", "plan.json", "--zygote",
                           _ZYGOTE[0], "--results", "r.json", "--failed-results", "f.json",
                           "--timeout", "20"],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "f.json").read_text())
    assert sorted((v["vector"], v["status"]) for v in doc["vectors"]) == [
        ("a", "fail"), ("b", "pass"), ("c", "fail"), ("d", "pass")], proc.stdout
    why = {v["vector"]: v["message"] for v in doc["vectors"]}
    for name, code in (("a", 5), ("c", 6)):
        assert why[name] == (
            f"this vector ended the emulator's worker (exit status {code}) while it made its "
            "inputs and expected output, twice, the second time made ready first in a new "
            "worker (a reference that calls os._exit or crashes the process?); the vectors "
            "after it ran in a new worker")
    assert "Traceback" not in proc.stdout + proc.stderr


HANGS_WHEN_MADE_AGAIN = """\
import signal, time
import numpy as np
made = []
def wrong(x):               # w: a wrong expected output (its vector fails)
    return np.maximum(x, np.float32(0)) + np.float32(1)
def relu(x):                # x: made again alone in the same worker, it blocks SIGALRM and hangs
    made.append(1)
    if len(made) > 1:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)
    return np.maximum(x, np.float32(0))
"""


@needs_cxx
def test_a_vector_made_again_alone_is_made_within_the_time_a_reference_has(tmp_path, objects):
    """Vector x's second call took w's arguments; w's first call was wrong,
    so x was made again alone after it: its reference ran with no vector
    noted as being made, and one that hangs there (SIGALRM blocked) was
    waited for until the whole run's limit, every result lost as 'the
    emulator itself did not end: a bug to report' (exit status 3)."""
    p = plan(tmp_path, objects, [op("relu", [vec("w", {"x": tensor([4], seed=1)}, func="wrong"),
                                              vec("x", {"x": tensor([4], seed=2)})])])
    (tmp_path / "ref.py").write_text(HANGS_WHEN_MADE_AGAIN)
    (tmp_path / "plan.json").write_text(json.dumps(p))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "runtime_model"))
    proc = subprocess.run([sys.executable, "-m", "gpsimd_emu", "run", "plan.json", "--zygote",
                           _ZYGOTE[0], "--results", "r.json", "--failed-results", "f.json",
                           "--timeout", "1"],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "f.json").read_text())
    why = {v["vector"]: (v["status"], v["message"]) for v in doc["vectors"]}
    assert why["w"][0] == "fail"
    assert why["x"] == ("fail", "this vector was not ready within 12 s (a reference that catches "
                        "or blocks the time limit's SIGALRM?): its worker was ended; the vectors "
                        "after it ran in a new worker")
