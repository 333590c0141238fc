"""End to end: `scons` builds the shipped collection and runs every vector."""
import json
import re

import pytest
import yaml

from conftest import copy_built, run_scons


def test_full_build_passes_every_vector(built_project):
    proj, proc = built_project
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = yaml.safe_load((proj / "ops.yaml").read_text())
    expected_vectors = sum(len(op["vectors"]) for lib in manifest["libraries"]
                           for op in lib["ops"])
    assert f"all libraries: {expected_vectors} passed, 0 failed" in proc.stdout
    for lib in manifest["libraries"]:
        res = json.loads((proj / "build/host" / lib["name"] / "test-results.json").read_text())
        assert res["failed"] == 0
        assert res["passed"] == sum(len(op["vectors"]) for op in lib["ops"])
        assert {v["status"] for v in res["vectors"]} == {"pass"}
    # one result line per vector
    assert len(re.findall(r"^PASS ", proc.stdout, re.M)) == expected_vectors


def test_multicore_library_has_eight_core_objects(built_project):
    proj, _ = built_project
    lib = proj / "build/host/spmd"
    for i in range(8):
        for suffix in (".so", ".packed.so", ".stripped.so"):
            assert (lib / f"spmd_cpu{i}{suffix}").is_file()
    assert not (lib / "spmd.so").exists()
    single = proj / "build/host/relu"
    assert sorted(p.name for p in single.glob("*.so")) == [
        "relu.packed.so", "relu.so", "relu.stripped.so"]


def test_packed_objects_carry_their_core(built_project):
    proj, _ = built_project
    from gpsimd_device import pack
    blob = (proj / "build/host/spmd/spmd_cpu5.packed.so").read_bytes()
    magic, version, meta_size, payload_size, crc, _ = pack.HEADER.unpack_from(blob)
    assert magic == b"GPSIMDPK" and version == 1
    meta = json.loads(blob[32:32 + meta_size])
    assert meta == {"core": 5, "entry": "lib_func", "library": "spmd",
                    "lsp": "lsp_fll_load_cpu5",
                    "versions": {"ulib_to_isa_version": "1.0.2520.0",
                                 "ulib_to_ucode_version": "1.21.1.0",
                                 "version": "0.21.2.0"}}
    stripped = (proj / "build/host/spmd/spmd_cpu5.stripped.so").read_bytes()
    assert blob.endswith(stripped) and payload_size == len(stripped)


def test_generated_wrapper_is_the_host_text(built_project):
    proj, _ = built_project
    text = (proj / "build/host/relu/wrapper.cpp").read_text()
    assert text.startswith('// WARNING: AUTO GENERATED DO NOT EDIT\n#include "neuron/wrapper_api.h"\n')
    assert "at::Tensor relu_backward(const at::Tensor&, const at::Tensor&);\n" in text
    assert "int get_func_cnt() { return 2; }\n" in text
    assert "switch_stack_or_call_wrapper((uintptr_t)relu_forward_wrapper);" in text


def test_null_build_does_nothing(built_project, tmp_path):
    proj = copy_built(built_project[0], tmp_path / "p")
    proc = run_scons(proj, "-Q", "--debug=explain")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Rebuilding" not in proc.stdout and "Building" not in proc.stdout
    assert "TEST" not in proc.stdout and "CXX" not in proc.stdout


def test_the_report_shows_every_vector_and_a_null_build_leaves_it_alone(built_project,
                                                                      tmp_path):
    proj = copy_built(built_project[0], tmp_path / "p")
    proc = run_scons(proj, "-Q")
    assert proc.returncode == 0
    page, key = proj / "build/host/report.html", proj / "build/host/.report-key"
    text = page.read_text()
    names = [lib["name"] for lib in yaml.safe_load((proj / "ops.yaml").read_text())["libraries"]]
    results = {name: json.loads((proj / "build/host" / name / "test-results.json").read_text())
               for name in names}
    rows = re.findall(r'<tr class="vector (\w+)" data-vector="(\w+)::(\w+)\[(\w+)\]"', text)
    assert sorted(rows) == sorted((v["status"], lib, v["op"], v["vector"])
                                  for lib, doc in results.items() for v in doc["vectors"])
    assert proc.stdout.splitlines()[-1] in text        # the summary's totals
    # spmd is multicore: each of its vectors has a strip of its cores' ranges
    strips = re.findall(r'<tr class="picture" data-vector="spmd::[^"]+">(.*?)</tr>', text, re.S)
    assert len(strips) == len(results["spmd"]["vectors"])
    assert all('data-kind="written"' in s for s in strips)
    assert max(s.count('data-kind="written"') for s in strips) == 8
    assert 'data-vector="relu::' in text and '<tr class="picture" data-vector="relu::' not in text
    stamps = page.stat().st_mtime_ns, key.stat().st_mtime_ns
    again = run_scons(proj, "-Q")
    assert again.returncode == 0 and again.stdout.splitlines()[-1] in text
    assert (page.stat().st_mtime_ns, key.stat().st_mtime_ns) == stamps


WRONG_REF_MANIFEST = """\
version: 1
libraries:
  - name: wrongref
    sources: [kernels/relu/relu.cpp]
    ops:
      - schema: "my_ops::relu_forward(Tensor x) -> Tensor"
        reference: wrong_reference.py:relu_forward
        vectors:
          - name: n100
            inputs:
              x: {dtype: float32, shape: [100], random: {distribution: normal}}
      - schema: "my_ops::relu_backward(Tensor grad, Tensor x) -> Tensor"
        reference: kernels/relu/reference.py:relu_backward
        vectors:
          - name: n9
            inputs:
              grad: {dtype: float32, shape: [9], random: {distribution: normal}}
              x: {dtype: float32, shape: [9], random: {distribution: normal}}
"""


def test_wrong_reference_fails_the_build_and_names_the_vector(built_project, tmp_path):
    proj = copy_built(built_project[0], tmp_path / "p")   # (its own copy: it builds in it)
    (proj / "wrong_reference.py").write_text(
        "import numpy as np\n\n\ndef relu_forward(x):\n"
        "    return np.maximum(x, np.float32(0)) + np.float32(1)\n")
    (proj / "wrongref.yaml").write_text(WRONG_REF_MANIFEST)
    proc = run_scons(proj, "MANIFEST=wrongref.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(r"^FAIL wrongref::relu_forward\[n100\] \(wrongref.yaml:9:13\): ", out, re.M), out
    assert re.search(r"^PASS wrongref::relu_backward\[n9\]", out, re.M), out
    assert "wrongref: 1 passed, 1 failed" in out
    # a failed run leaves its results beside the target, never as the target
    assert not (proj / "build/host/wrongref/test-results.json").exists()
    res = json.loads((proj / "build/host/wrongref/test-results.failed.json").read_text())
    bad = [v for v in res["vectors"] if v["status"] != "pass"]
    assert [(v["op"], v["vector"]) for v in bad] == [("relu_forward", "n100")]
    assert "Traceback" not in out
    assert "all libraries: 1 passed, 1 failed" in out     # the totals, even so
    # the reference is fixed: the tests run again (nothing stale is trusted)
    (proj / "wrong_reference.py").write_text(
        "import numpy as np\n\n\ndef relu_forward(x):\n    return np.maximum(x, np.float32(0))\n")
    proc = run_scons(proj, "MANIFEST=wrongref.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wrongref: 2 passed, 0 failed" in proc.stdout
    # and back to the wrong one: it fails again, although those inputs once passed... and failed
    (proj / "wrong_reference.py").write_text(
        "import numpy as np\n\n\ndef relu_forward(x):\n"
        "    return np.maximum(x, np.float32(0)) + np.float32(1)\n")
    assert run_scons(proj, "MANIFEST=wrongref.yaml").returncode != 0


def test_a_build_of_one_library_leaves_no_summary_that_speaks_for_it_wrongly(built_project,
                                                                             tmp_path):
    """``scons relu`` stopped by relu's broken compile printed ``relu:
    stale`` but left the last full build's test-summary.txt, ``relu: 10
    passed, 0 failed`` ... ``all libraries: 104 passed, 0 failed``, for a
    kernel that does not compile. A build of some libraries whose tests
    did not all stay up to date now leaves no summary; one whose
    libraries were all up to date leaves the full build's, which is still
    true."""
    proj = copy_built(built_project[0], tmp_path / "p")
    summary = proj / "build/host/test-summary.txt"
    full = summary.read_text()
    assert full.splitlines()[0] == "relu: 10 passed, 0 failed", full
    assert run_scons(proj, "relu").returncode == 0          # (up to date: true still)
    assert summary.read_text() == full
    src = proj / "kernels/relu/relu.cpp"
    good = "t_out_acc[i] = t_in_acc[i] > 0.0f ? t_in_acc[i] : 0.0f;"
    src.write_text(src.read_text().replace(good, "t_out_acc[i] = ;", 1))
    proc = run_scons(proj, "relu")
    assert proc.returncode == 2
    assert proc.stdout.splitlines()[-2:] == ["relu: stale",
                                             "total: 0 passed, 0 failed (1 library not counted)"]
    assert not summary.exists()
    src.write_text(src.read_text().replace("t_out_acc[i] = ;", good, 1))
    proc = run_scons(proj)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = summary.read_text().splitlines()
    assert lines[0].startswith("relu: 10 passed, 0 failed"), lines     # (the same object)
    assert lines[-1] == full.splitlines()[-1] == "all libraries: 104 passed, 0 failed"


def test_a_pack_built_alone_leaves_no_summary_that_passes_it(built_project, tmp_path):
    """``scons build/host/relu/relu.packed.so`` after relu broke: exit 0,
    and the last full build's test-summary.txt (``all libraries: 104
    passed``) and report stayed for packs that now fail. The pack step
    removes both first, as a test run does."""
    proj = copy_built(built_project[0], tmp_path / "p")
    summary, report = proj / "build/host/test-summary.txt", proj / "build/host/report.html"
    assert summary.exists() and report.exists()
    src = proj / "kernels/relu/relu.cpp"
    good = "t_out_acc[i] = t_in_acc[i] > 0.0f ? t_in_acc[i] : 0.0f;"
    src.write_text(src.read_text().replace(good, "t_out_acc[i] = t_in_acc[i];", 1))
    cache = f"CACHE_DIR={tmp_path / 'cache'}"
    proc = run_scons(proj, "-Q", cache, "build/host/relu/relu.packed.so")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not summary.exists() and not report.exists()
    assert "scons: relu: rebuilt and not tested; the test summary and report are removed " \
           "(scons relu tests it)\n" in proc.stderr, proc.stderr
    # the same packs taken from the cache (found in review: the pack step
    # never ran, and its removal with it)
    src.write_text(src.read_text().replace("t_out_acc[i] = t_in_acc[i];", good, 1))
    proc = run_scons(proj, "-Q", cache)
    assert proc.returncode == 0 and summary.exists(), proc.stdout + proc.stderr
    src.write_text(src.read_text().replace(good, "t_out_acc[i] = t_in_acc[i];", 1))
    proc = run_scons(proj, "-Q", cache, "build/host/relu/relu.packed.so")
    assert proc.returncode == 0 and "Retrieved `build/host/relu/relu.packed.so' from cache" \
        in proc.stdout, proc.stdout + proc.stderr
    assert not summary.exists() and not report.exists()
    # a pack that fails to build (relu no longer compiles): the last
    # passing summary went only when the pack was made (found in review)
    proc = run_scons(proj, "-Q", cache)
    assert proc.returncode == 2 and summary.exists(), proc.stdout + proc.stderr
    src.write_text(src.read_text().replace("t_out_acc[i] = t_in_acc[i];", "t_out_acc[i] = ;", 1))
    proc = run_scons(proj, "-Q", cache, "build/host/relu/relu.packed.so")
    assert proc.returncode == 2 and not summary.exists(), proc.stdout + proc.stderr


IGNORE_ERRORS_REFUSED = (
    "scons: -i (--ignore-errors) is refused for a build that runs tests: SCons would exit 0 "
    "with failed vectors; use -k (--keep-going), which builds and tests everything it can and "
    "still fails\n")


def test_ignore_errors_is_refused_where_it_would_pass_a_failed_vector(built_project, tmp_path):
    """``scons -i`` takes a failed test for a built one and exits 0: with a
    failing vector it printed ``wrongref: no results`` and ``all libraries:
    1 passed, 0 failed`` and exited 0. Refused, on both paths, wherever
    tests or explores would run; a build of objects alone still takes it."""
    proj = copy_built(built_project[0], tmp_path / "p")
    (proj / "wrong_reference.py").write_text(
        "import numpy as np\n\n\ndef relu_forward(x):\n"
        "    return np.maximum(x, np.float32(0)) + np.float32(1)\n")
    (proj / "wrongref.yaml").write_text(WRONG_REF_MANIFEST)
    # (a folder builds every target below it: `scons -i .` ran the tests
    # and exited 0, no summary printed)
    for targets in ((), ("wrongref",), ("test-wrongref",), ("explore-wrongref",),
                    ("--experimental=ninja",), (".",), ("build",), ("build/host/wrongref",),
                    (str(proj / "build/host"),), (str(proj),)):
        proc = run_scons(proj, "-Q", "-i", "MANIFEST=wrongref.yaml", *targets)
        assert (proc.returncode, proc.stderr) == (2, IGNORE_ERRORS_REFUSED), targets
        assert "FAIL" not in proc.stdout and "passed" not in proc.stdout, targets
    objects = run_scons(proj, "-Q", "-i", "MANIFEST=wrongref.yaml",
                        "build/host/wrongref/wrongref.packed.so")
    assert objects.returncode == 0, objects.stdout + objects.stderr
    assert not (proj / "build/host/wrongref/test-results.failed.json").exists()
    proc = run_scons(proj, "-Q", "-k", "MANIFEST=wrongref.yaml")
    assert proc.returncode == 2 and "all libraries: 1 passed, 1 failed\n" in proc.stdout


@pytest.mark.parametrize("ending,why", [
    ("os._exit(0)", r"ended the emulator's worker \(exit status 0\) while it made its inputs"),
    ("os.kill(os.getpid(), signal.SIGSEGV)",
     r"ended the emulator's worker \(signal 11\) while it made its inputs"),
    ("signal.setitimer(signal.ITIMER_REAL, 0)\n    while True:\n        pass",
     r"was not ready within 12 s \(a reference that catches or blocks the time limit's SIGALRM"),
    ("signal.signal(signal.SIGALRM, lambda *a: None)\n    while True:\n        pass",
     r"was not ready within 12 s \(a reference that catches or blocks the time limit's SIGALRM"),
], ids=["exit", "crash", "alarm_cancelled", "alarm_caught"])
def test_a_reference_that_ends_the_emulator_fails_its_vector_alone(built_project, tmp_path,
                                                                   ending, why):
    """The worker that runs a reference ends (os._exit, a crash), or the
    reference defeats its time limit's SIGALRM and never returns: that
    vector fails, named, and the vectors before and after it keep their
    verdicts (the whole run's results were lost; the hang held the run
    until the whole run's limit)."""
    proj = copy_built(built_project[0], tmp_path / "p")   # (its own copy: it builds in it)
    (proj / "exit_reference.py").write_text(
        f"import os\nimport signal\n\n\ndef relu_forward(x):\n    {ending}\n")
    (proj / "exitref.yaml").write_text(
        WRONG_REF_MANIFEST.replace("wrongref", "exitref")
        .replace("wrong_reference.py", "exit_reference.py")
        .replace("        vectors:\n          - name: n100\n",
                 "        vectors:\n          - name: first\n            inputs:\n"
                 "              x: {dtype: float32, shape: [3], values: [1, -2, 3]}\n"
                 "            expected: {values: [1, 0, 3]}\n          - name: n100\n", 1))
    proc = run_scons(proj, "MANIFEST=exitref.yaml", "EMU_TIMEOUT=1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert re.search(r"^FAIL exitref::relu_forward\[n100\] \(exitref.yaml:\d+:\d+\): this "
                     rf"vector {why}.*; the vectors after it ran in a new worker$",
                     proc.stdout, re.M), proc.stdout
    results = json.loads((proj / "build/host/exitref/test-results.failed.json").read_text())
    assert [(v["op"], v["vector"], v["status"]) for v in results["vectors"]] == [
        ("relu_forward", "first", "pass"), ("relu_forward", "n100", "fail"),
        ("relu_backward", "n9", "pass")]
    assert "exitref: 2 passed, 1 failed" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_malformed_manifest_gives_a_located_error(built_project, tmp_path):
    proj = copy_built(built_project[0], tmp_path / "p")   # (its own copy: it builds in it)
    (proj / "bad.yaml").write_text(
        "version: 1\nlibraries:\n  - name: bad\n    sources: 5\n    ops: []\n")
    proc = run_scons(proj, "MANIFEST=bad.yaml")
    assert proc.returncode == 2
    assert re.search(r"^bad.yaml:4:14: \$\.libraries\[0\]\.sources: ", proc.stderr, re.M), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (proj / "build/host/bad").exists()


def test_malformed_schema_string_gives_the_column(built_project, tmp_path):
    proj = copy_built(built_project[0], tmp_path / "p")   # (its own copy: it builds in it)
    (proj / "badschema.yaml").write_text(
        "version: 1\nlibraries:\n  - name: badschema\n    sources: [kernels/relu/relu.cpp]\n"
        "    ops:\n      - schema: \"my_ops::relu_forward(Tensor x y) -> Tensor\"\n"
        "        vectors:\n          - name: v\n            inputs:\n"
        "              x: {dtype: float32, shape: [3], values: [1, 2, 3]}\n"
        "            expected: {values: [1, 2, 3]}\n")
    proc = run_scons(proj, "MANIFEST=badschema.yaml")
    assert proc.returncode == 2
    # the string opens at column 18 (after the quote); the stray "y" is its 31st character
    assert re.search(r"^badschema.yaml:6:48: \$\.libraries\[0\]\.ops\[0\]\.schema: ", proc.stderr, re.M), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_build_dir_with_a_space(built_project, tmp_path):
    proj = copy_built(built_project[0], tmp_path / "p")   # (its own copy: it builds in it)
    proc = run_scons(proj, "BUILD_DIR=out dir", "test-relu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^relu: \d+ passed, 0 failed$", proc.stdout, re.M)
    assert (proj / "out dir/host/relu/test-results.json").is_file()


def test_a_kernel_the_sources_do_not_define_is_a_link_error(built_project, tmp_path):
    proj = copy_built(built_project[0], tmp_path / "p")   # (its own copy: it builds in it)
    # (the manifest names a reference; it was another test's file in the shared project)
    (proj / "wrong_reference.py").write_text(
        "import numpy as np\n\n\ndef relu_forward(x):\n    return np.maximum(x, 0)\n")
    (proj / "nokernel.yaml").write_text(
        WRONG_REF_MANIFEST.replace("wrongref", "nokernel")
        .replace("my_ops::relu_forward(Tensor x) -> Tensor", "my_ops::twice(Tensor x, float s) -> Tensor")
        .replace("x: {dtype: float32, shape: [100], random: {distribution: normal}}",
                 "x: {dtype: float32, shape: [100], random: {distribution: normal}}\n              s: 2.0"))
    proc = run_scons(proj, "MANIFEST=nokernel.yaml")
    assert proc.returncode != 0
    # (bfd quotes `twice(...)', gold 'twice(...)')
    assert re.search(r"undefined reference to [`']twice\(at::Tensor const&, float\)'",
                     proc.stdout + proc.stderr), proc.stdout + proc.stderr
    assert "scons: *** [build/host/nokernel/nokernel.so] Error 1" in proc.stderr
    assert not (proj / "build/host/nokernel/nokernel.so").exists()


def test_a_wrong_shaped_reference_is_named_as_the_suspect(built_project, tmp_path):
    proj = copy_built(built_project[0], tmp_path / "p")   # (its own copy: it builds in it)
    (proj / "shape_reference.py").write_text(
        "import numpy as np\n\n\ndef relu_forward(x):\n    return np.zeros(7, dtype=np.float32)\n")
    (proj / "shaperef.yaml").write_text(WRONG_REF_MANIFEST.replace("wrongref", "shaperef")
                                        .replace("wrong_reference.py", "shape_reference.py"))
    proc = run_scons(proj, "MANIFEST=shaperef.yaml")
    assert proc.returncode != 0
    assert ("FAIL shaperef::relu_forward[n100] (shaperef.yaml:9:13): core 0: fault SHAPE in op "
            "relu_forward: UTensor::copy: the result tensor has 100 elements, the output "
            "descriptor has 7; elements never written: [0, 7); the output descriptor's shape [7] "
            "comes from the reference shape_reference.py:relu_forward (give output.shape to fix "
            "it, or check the reference)") in proc.stdout.splitlines()


def test_help_lists_the_targets_and_the_libraries(built_project):
    proj, _ = built_project
    proc = run_scons(proj, "-h")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    targets = out.index("Targets:")
    assert [l.split()[0] for l in out[targets + 1:targets + 11]] == [
        "all", "<lib>", "test-<lib>", "test", "explore-<lib>", "explore", "stack-report",
        "schemas", "digests", "compiledb"]
    libraries = out.index("Libraries (8):")
    assert " ".join(out[libraries + 1:libraries + 3]).split() == [
        "relu", "tcm_eltwise", "spmd", "scalar_args", "half_precision", "elementwise",
        "factories", "streams"]
    # the xtensa profile's help, without its toolchain on this machine
    proc = run_scons(proj, "-h", "TOOLCHAIN=xtensa")
    assert proc.returncode == 0 and "test-<lib>" not in proc.stdout, proc.stdout + proc.stderr
    assert "explore-<lib>" not in proc.stdout
    assert re.search(r"^  <lib> +one library: its objects$", proc.stdout, re.M), proc.stdout


def test_compiledb_goes_to_the_build_folder(built_project, tmp_path):
    proj, _ = built_project
    proc = run_scons(proj, "-Q", "compiledb", "BUILD_DIR=" + str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (proj / "compile_commands.json").exists()
    entries = json.loads((tmp_path / "b" / "compile_commands.json").read_text())
    # one entry per translation unit: 8 libraries' sources and wrappers, the
    # runtime's sources and the 9 linker-spec objects
    files = sorted(e["file"] for e in entries)
    assert "kernels/relu/relu.cpp" in files and len(files) == len(set(e["output"] for e in entries))
    relu = next(e for e in entries if e["file"] == "kernels/relu/relu.cpp")
    assert relu["directory"] == str(proj)
    assert "-Werror" in relu["command"] and " -c kernels/relu/relu.cpp" in relu["command"]


def test_a_clean_build_counts_every_action_from_the_first_line(built_project):
    _, proc = built_project
    lines = [(int(d), int(t)) for d, t in re.findall(r"^\[(\d+)/(\d+)\] ", proc.stdout, re.M)]
    n = len(lines)
    assert n > 60 and sorted(d for d, _ in lines) == list(range(1, n + 1))
    assert {t for _, t in lines} == {n}


def test_an_edit_of_any_emulator_file_runs_the_tests_again(built_project, tmp_path):
    """Every Python file of the emulator and of the device facts, the
    client's subpackage included, is a dependency of every test (through
    one alias), and of the steps that run that code before the test (a
    library's shape registration, its check and its shaped plan): an edit
    of one runs them again, a second build none. The client and the device
    facts are code the build's own steps run too (the pack, the stack
    reports): an edit of one makes those again as well. The counter's
    total is right from the first line: it sees the aliases' files."""
    proj = copy_built(built_project[0], tmp_path / "p")
    tests = ["SHAPES   build/host/relu/shapes/registration.json",
             "CHECK    build/host/relu/shapes/registration-check.txt",
             "SHAPES   build/host/relu/testplan.shaped.json",
             "TEST     relu (10 vectors)"]
    steps = ["PACK     build/host/relu/relu.packed.so",
             "STACK    build/host/runtime/stack-graph.json",
             "STACK    build/host/relu/stack-report.txt"]
    for edited, actions in (("runtime_model/gpsimd_emu/judge.py", tests),
                            ("runtime_model/gpsimd_emu/client/protocol.py", tests + steps),
                            ("runtime_model/gpsimd_device/plan.py", tests + steps)):
        path = proj / edited
        path.write_text(path.read_text() + "\n# edited\n")
        proc = run_scons(proj, "relu")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
        assert sorted(line.split("] ", 1)[1] for line in lines) == sorted(actions), edited
        assert {line.split("/", 1)[1].split("]")[0] for line in lines} == {str(len(actions))}, \
            proc.stdout
        again = run_scons(proj, "relu")
        assert "TEST relu" not in again.stdout and "relu: 10 passed, 0 failed (not run in " \
            "this build)" in again.stdout, again.stdout


def test_an_edit_of_the_emulators_shape_code_shapes_the_plan_again(built_project, tmp_path):
    """The shaped plan (each vector's output from its shape function) is
    made by the emulator's code (``gpsimd_emu.shapes``): after an edit of
    that code which a clean build fails on, the next build fails too; it
    never runs the tests again on the plan the old code shaped."""
    proj = copy_built(built_project[0], tmp_path / "p")
    path = proj / "runtime_model/gpsimd_emu/shapes.py"
    text = path.read_text()
    line = "    given = vector.output\n"
    assert text.count(line) == 1
    path.write_text(text.replace(line, line + "    return 'the edited shape code'\n"))
    proc = run_scons(proj, "relu")
    assert proc.returncode != 0, proc.stdout
    fails = [x for x in proc.stdout.splitlines() if x.startswith("FAIL ")]
    assert len(fails) == 10 and all(x.endswith(": the edited shape code") for x in fails), \
        proc.stdout
    assert "relu: 0 passed, 10 failed" in proc.stdout.splitlines()


def test_an_edit_of_the_build_steps_code_makes_their_outputs_again(built_project, tmp_path):
    """The build's own steps (``python -m gpsimd_build.steps``: the pack,
    the stack reports, the registration check) depend on their code, as a
    compile depends on its compiler: after an edit of the registration
    check that a clean build fails on (an upgrade of the tool, say), the
    next build runs the check again and fails; it never keeps the check
    the old code passed."""
    proj = copy_built(built_project[0], tmp_path / "p")
    path = proj / "site_scons/gpsimd_build/regcheck.py"
    text = path.read_text()
    line = "    out: List[str] = []\n"
    assert text.count(line) == 1
    path.write_text(text.replace(line, '    out: List[str] = ["the edited check"]\n'))
    proc = run_scons(proj, "relu")
    assert proc.returncode != 0, proc.stdout
    assert "the edited check" in proc.stderr.splitlines(), proc.stderr
    assert "CHECK    build/host/relu/shapes/registration-check.txt" in proc.stdout, proc.stdout
    path.write_text(text)
    proc = run_scons(proj, "relu")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_bad_emulator_option_stops_scons_naming_it_before_anything_runs(built_project,
                                                                           tmp_path):
    """EMU_TIMEOUT, EMU_MEMORY and EMU_PARALLEL are read by the parsers
    the emulator's own options use (gpsimd_emu.client.values): a bad value
    was refused only when a test step ran, naming the emulator's flag."""
    proj = copy_built(built_project[0], tmp_path / "p")   # (its own copy: it builds in it)
    before = sorted(str(p.relative_to(proj)) for p in proj.rglob("*"))
    for arg, why in [("EMU_TIMEOUT=-1", "-1: must be > 0 and at most 86400 seconds"),
                     ("EMU_TIMEOUT=inf", "inf: must be > 0 and at most 86400 seconds"),
                     ("EMU_MEMORY=1Q", "'1Q' is not a size (e.g. 4G, 512M, 1073741824)"),
                     ("EMU_PARALLEL=-2", "-2: must be a whole number >= 0 and at most 65536")]:
        proc = run_scons(proj, arg, "RETEST=1")
        assert proc.returncode == 2, (arg, proc.stdout, proc.stderr)
        assert f"scons: *** {arg}: {why}\n" in proc.stderr, proc.stderr
        assert "PASS" not in proc.stdout and "Traceback" not in proc.stderr
    assert sorted(str(p.relative_to(proj)) for p in proj.rglob("*")) == before
