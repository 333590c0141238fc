"""``scons explore-<lib>`` (gpsimd_explore): a search for a failing
input with no vector that shows the bug. It finds the remainder bug of a
multicore kernel whose only vector divides evenly over the cores, and the
odd-tail bug of a chunked kernel with no vector at all, prints
the smallest failing example as a vector that, pasted, fails the same way
under ``scons test-<lib>``; it leaves correct kernels alone (every value
of the dtype's range, NaN, inf and -0 included); the same seed gives the
same report; a failure is replayed first from the example database."""
import json
import re
import shutil

from conftest import ROOT, copy_built, run_scons

_LIBRARY = """
  - name: sp
    multicore: true
    sources: [sp/spmd.cpp]
    ops:
      - schema: "broken::remainder_bug(Tensor x) -> Tensor"
        reference: sp/reference.py:double
        vectors:
          - name: n64
            inputs:
              x: {dtype: float32, shape: [64], random: {seed: 3, distribution: normal}}
"""

_FALSIFIED = (
    "FALSIFIED sp::remainder_bug: FAIL sp::remainder_bug[explored_1] (explored): core 7: fault "
    "OUT_OF_RANGE in op remainder_bug: tensor_to_tcm<float> out of range: offset 7, count 1, "
    "numel 1; elements never written by any core: [0, 1)")
_EXAMPLE = ["    - name: explored_1", "      inputs:",
            "        x: {dtype: float32, shape: [1], values: [0.0]}"]


def _with_sp(built_project, tmp_path):
    proj = copy_built(built_project[0], tmp_path / "p")
    (proj / "sp").mkdir()
    for name in ("spmd.cpp", "reference.py"):
        shutil.copy(ROOT / "kernels" / "broken" / name, proj / "sp" / name)
    manifest = proj / "ops.yaml"
    manifest.write_text(manifest.read_text() + _LIBRARY)
    assert run_scons(proj, "-Q", "sp").returncode == 0     # its one vector passes
    return proj


def _paste_and_fail_the_same_way(proj, lib, example, falsified):
    """Append ``example`` (printed lines, re-indented as the op's other
    vectors) to the manifest, which ends with the op's ``vectors:``; ``scons test-<lib>`` then fails with ``falsified``'s FAIL line,
    at the vector's place in the manifest."""
    manifest = proj / "ops.yaml"
    manifest.write_text(manifest.read_text() + "".join(
        " " * 10 + line[4:] + "\n" for line in example))
    test = run_scons(proj, "-Q", f"test-{lib}")
    assert test.returncode == 2, test.stdout + test.stderr
    fail = [l for l in test.stdout.splitlines() if l.startswith("FAIL ")]
    head, tail = falsified.split(": ", 1)[1].split(" (explored)")
    assert len(fail) == 1 and re.fullmatch(
        re.escape(head) + r" \(ops\.yaml:\d+:\d+\)" + re.escape(tail), fail[0]), fail


def _lines(proc):
    return [l for l in proc.stdout.splitlines() if not l.startswith(("[", "scons: "))]


def test_explore_finds_the_remainder_bug_and_the_example_fails_as_pasted(built_project,
                                                                        tmp_path):
    proj = _with_sp(built_project, tmp_path)
    first = run_scons(proj, "-Q", "explore-sp", "EXPLORE_EXAMPLES=50")
    assert first.returncode == 2, first.stdout + first.stderr     # (scons: a step failed)
    assert _lines(first) == [_FALSIFIED, *_EXAMPLE, "", "sp: 1 op explored, 1 falsified"]
    # the report shows it: the op's row, the example's row and its picture;
    # the library's tests, not run by this build, are kept
    report = (proj / "build/host/report.html").read_text()
    section = report[report.index('id="lib-sp"'):]
    section = section[:section.index("</section>")]
    assert '(1 passed, 0 failed; not run in this build: its results are still current' in section
    assert '<tr class="explore falsified" data-op="remainder_bug">' in section
    assert ('<tr class="example fail" data-vector="sp::remainder_bug[explored_1]" '
            'id="v-sp--remainder_bug--explored_1">') in section
    assert '<tr class="picture" data-vector="sp::remainder_bug[explored_1]">' in section
    assert "(its results are as of that run)" in section        # (this plan's)
    assert 'href="#v-sp--remainder_bug--explored_1"' not in report  # (not a failed vector)
    # the same seed, an empty example database: the same report
    shutil.rmtree(proj / "build/host/sp/explore-db")
    assert _lines(run_scons(proj, "-Q", "explore-sp", "EXPLORE_EXAMPLES=50")) == _lines(first)
    # kept in the database: replayed first, and said so
    again = _lines(run_scons(proj, "-Q", "explore-sp", "EXPLORE_EXAMPLES=50"))
    assert again[0] == _FALSIFIED.replace(
        "sp::remainder_bug:", "sp::remainder_bug (replayed from the example database):", 1)
    # pasted under the op's vectors (as printed, re-indented), it fails the same way
    _paste_and_fail_the_same_way(proj, "sp", _EXAMPLE, _FALSIFIED)


def _sp_section(proj):
    report = (proj / "build/host/report.html").read_text()
    section = report[report.index('id="lib-sp"'):]
    state = re.search(r'<span class="state">([^<]*)</span>', section[:section.index("</h2>")])
    totals = re.search(r'<p class="totals">([^<]*)</p>', report).group(1)
    return (state.group(1)[1:-1] if state else section[:200]), totals


def test_a_build_that_only_explores_keeps_results_only_while_their_test_is_current(
        built_project, tmp_path):
    """The report of ``scons explore-sp`` shows sp's passing results as
    kept (current) only while SCons holds its test node up to date: after
    its kernel was rebuilt by a build that ran no test, or its reference
    was edited (neither of which the explore itself made again), they are
    stale, and the totals no longer count them."""
    proj = _with_sp(built_project, tmp_path)
    explore = ("-Q", "explore-sp", "EXPLORE_EXAMPLES=5")
    run_scons(proj, *explore)
    kept = ("1 passed, 0 failed; not run in this build: its results are still current for "
            "its sources")
    stale = "1 passed, 0 failed; stale: results of an earlier build (this build did not run its tests)"
    # (the other libraries of the collection: not in this build's graph)
    assert _sp_section(proj) == (kept, "total: 1 passed, 0 failed (8 libraries not counted)")
    reference = proj / "sp" / "reference.py"
    reference.write_text(reference.read_text() + "\n# edited\n")
    run_scons(proj, *explore)
    assert _sp_section(proj) == (stale, "total: 0 passed, 0 failed (9 libraries not counted)")
    assert run_scons(proj, "-Q", "sp").returncode == 0     # current again
    run_scons(proj, *explore)
    assert _sp_section(proj)[0] == kept
    kernel = proj / "sp" / "spmd.cpp"
    kernel.write_text(kernel.read_text().replace("return", "return /* edited */", 1) + "\n"
                      "int gpsimd_edited_marker = 1;\n")
    packed = run_scons(proj, "-Q", "build/host/sp/sp_cpu0.packed.so")   # no test run
    assert packed.returncode == 0, packed.stdout + packed.stderr
    run_scons(proj, *explore)
    assert _sp_section(proj) == (stale, "total: 0 passed, 0 failed (9 libraries not counted)")


def test_explore_rows_are_stale_once_the_objects_they_explored_are_rebuilt(built_project,
                                                                          tmp_path):
    """The report's explore rows are the last explore's: after a build of
    sp with its kernel changed (and its tests run again, with the same
    results), they are stale, naming the object that changed, not "as of
    that run" (the objects they speak of are gone); explored again,
    current; an object gone since, stale too, even after a build that
    changed no result (the report's key covers what explore rows show)."""
    proj = _with_sp(built_project, tmp_path)
    explore = ("-Q", "explore-sp", "EXPLORE_EXAMPLES=5")
    assert run_scons(proj, *explore).returncode == 2        # (falsified)

    def heading():
        report = (proj / "build/host/report.html").read_text()
        section = report[report.index('id="lib-sp"'):]
        return re.search(r'<div class="explore"><h3>explore: the last run of <code>explore-sp'
                         r'</code> \(([^<]*)\)</h3>', section).group(1)
    assert heading() == "its results are as of that run"
    results = proj / "build/host/sp/test-results.json"
    before = results.read_bytes()
    kernel = proj / "sp" / "spmd.cpp"
    kernel.write_text(kernel.read_text() + "int gpsimd_edited_marker = 1;\n")
    built = run_scons(proj, "-Q", "sp")
    assert built.returncode == 0, built.stdout + built.stderr
    assert results.read_bytes() == before          # (its tests ran again: the same results)
    assert heading() == ("stale: it explored other objects than this build&#x27;s "
                         "(build/host/sp/sp_cpu0.packed.so changed since); run it again")
    run_scons(proj, *explore)
    assert heading() == "its results are as of that run"
    # a build that changes no result renders the page again too
    assert run_scons(proj, "-Q", "relu").returncode == 0
    assert heading() == "its results are as of that run"
    (proj / "build/host/sp/sp_cpu1.packed.so").unlink()
    assert run_scons(proj, "-Q", "relu").returncode == 0
    assert heading() == ("stale: it explored other objects than this build&#x27;s "
                         "(build/host/sp/sp_cpu1.packed.so is gone since); run it again")


def test_explore_leaves_correct_kernels_alone(built_project, tmp_path):
    proj = copy_built(built_project[0], tmp_path / "p")
    proc = run_scons(proj, "-Q", "explore-elementwise", "EXPLORE_EXAMPLES=40")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = _lines(proc)
    assert lines[-1] == "elementwise: 6 ops explored, 0 falsified"
    assert len(lines) == 7 and all(
        l.startswith("EXPLORED elementwise::") and l.endswith(
            ": 40 examples, every check passed") for l in lines[:-1]), lines
    # a time limit ends the search early, and the line says so
    proc = run_scons(proj, "-Q", "explore-elementwise", "EXPLORE_TIME=0")
    assert proc.returncode == 0
    assert all(l.endswith(": 0 examples, every check passed (time limit)")
               for l in _lines(proc)[:-1]), proc.stdout


def test_a_nan_example_is_saved_as_npy_and_fails_the_same_way_pasted(built_project, tmp_path):
    """The shipped relu_forward returns 0 for NaN where its numpy reference
    returns NaN: explore names it, with the input in an .npy file beside
    the manifest (a NaN cannot be written out), and the pasted vector
    (which names the file, no shape: the file gives it) fails the same
    way under scons test-relu."""
    proj = copy_built(built_project[0], tmp_path / "p")
    proc = run_scons(proj, "-Q", "explore-relu", "EXPLORE_EXAMPLES=50")
    assert proc.returncode == 2
    lines = _lines(proc)
    i = next(k for k, l in enumerate(lines) if l.startswith("FALSIFIED relu::relu_forward"))
    assert lines[i] == ("FALSIFIED relu::relu_forward: FAIL relu::relu_forward[explored_1] "
                        "(explored): 1 of 1 element differs (rtol=1.3e-06, atol=1e-05): [0] "
                        "actual 0 expected nan; max_abs_err inf")
    example = lines[i + 1:i + 4]
    assert example[:2] == ["    - name: explored_1", "      inputs:"]
    file = re.fullmatch(r"        x: \{dtype: float32, npy: (explore/relu\.relu_forward\."
                        r"[0-9a-f]{12}\.x\.npy)\}", example[2]).group(1)
    saved = proj / file
    import numpy as np
    assert np.isnan(np.load(saved)).tolist() == [True]
    # named by its content (gpsimd_explore.search._digest): the one file of the op
    assert [p.name for p in (proj / "explore").glob("relu.relu_forward.*")] == [saved.name]
    manifest = proj / "ops.yaml"
    text = manifest.read_text()
    anchor = '      - schema: "my_ops::relu_backward'
    manifest.write_text(text.replace(anchor, "".join(
        " " * 10 + line[4:] + "\n" for line in example) + anchor, 1))
    test = run_scons(proj, "-Q", "test-relu")
    assert test.returncode == 2, test.stdout + test.stderr
    fail = [l for l in test.stdout.splitlines() if l.startswith("FAIL ")]
    assert len(fail) == 1 and re.fullmatch(
        r"FAIL relu::relu_forward\[explored_1\] \(ops\.yaml:\d+:\d+\): 1 of 1 element differs "
        r"\(rtol=1\.3e-06, atol=1e-05\): \[0\] actual 0 expected nan; max_abs_err inf", fail[0]), \
        fail


def test_an_op_with_no_vector_and_no_shape_function_is_probed_and_falsified(built_project,
                                                                           tmp_path):
    """No vector, no shape function, no reference: the op's ``explore:``
    block gives the output (``like: x``); the probe learns rank 1 float32
    (one run); the search finds the remainder bug, checks-only; the build
    reports the op as having no vectors, never as failed."""
    proj = copy_built(built_project[0], tmp_path / "p")
    (proj / "sp").mkdir()
    shutil.copy(ROOT / "kernels" / "broken" / "spmd.cpp", proj / "sp" / "spmd.cpp")
    manifest = proj / "ops.yaml"
    manifest.write_text(manifest.read_text() + """
  - name: sp
    multicore: true
    sources: [sp/spmd.cpp]
    ops:
      - schema: "broken::remainder_bug(Tensor x) -> Tensor"
        explore: {output: {like: x}, max_elements: 4096}
""")
    built = run_scons(proj, "-Q", "sp")
    assert built.returncode == 0, built.stdout + built.stderr
    assert "sp: 0 passed, 0 failed, 1 op without vectors" in built.stdout.splitlines()
    proc = run_scons(proj, "-Q", "explore-sp", "EXPLORE_EXAMPLES=30")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = _lines(proc)
    assert lines[0].startswith(
        "FALSIFIED sp::remainder_bug: FAIL sp::remainder_bug[explored_1] (explored): core 7: "
        "fault OUT_OF_RANGE in op remainder_bug"), lines
    assert lines[-1] == "sp: 1 op explored, 1 falsified"
    record = json.loads((proj / "build/host/sp/explore.json").read_text())["ops"]
    assert (record["remainder_bug"]["ranks"], record["remainder_bug"]["runs"]) == ({"x": 1}, 1)


def test_an_op_without_vectors_is_compared_with_its_reference(built_project, tmp_path):
    """An op with a reference and no vectors: explore compares each drawn
    input with the reference (the shipped relu returns 0 for NaN where its
    numpy reference returns NaN), where a checks-only search would pass."""
    proj = copy_built(built_project[0], tmp_path / "p")
    manifest = proj / "ops.yaml"
    manifest.write_text(manifest.read_text() + """
  - name: rn
    sources: [kernels/relu/relu.cpp]
    shape_sources: [kernels/relu/shape.cpp]
    ops:
      - name: relu_forward
        reference: kernels/relu/reference.py:relu_forward
      - name: relu_backward
""")
    proc = run_scons(proj, "-Q", "explore-rn", "EXPLORE_EXAMPLES=40")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = _lines(proc)
    assert lines[0].startswith("FALSIFIED rn::relu_forward: FAIL rn::relu_forward[explored_")
    assert "expected nan" in lines[0], lines
    assert "EXPLORED rn::relu_backward: 40 examples, every check passed" in lines
    assert lines[-1] == "rn: 2 ops explored, 1 falsified"


def test_explore_finds_the_odd_tail_bug_of_a_chunked_kernel_with_no_vector(built_project,
                                                                           tmp_path):
    """A kernel that doubles in chunks of 16 and copies the tail in pairs:
    only a count of 16k + odd shows its bug; another reads every chunk of
    4096 after the first one element early. With no vector written, the
    search finds it (the smallest example: one element, never written)
    and leaves the same kernel done right alone; the example, pasted as
    the op's first vector, fails the same way under scons test-<lib>."""
    proj = copy_built(built_project[0], tmp_path / "p")
    (proj / "ch").mkdir()
    for name in ("chunked.cpp", "reference.py"):
        shutil.copy(ROOT / "tests" / "data" / "chunked" / name, proj / "ch" / name)
    manifest = proj / "ops.yaml"
    manifest.write_text(manifest.read_text() + """
  - name: ch
    sources: [ch/chunked.cpp]
    ops:
      - schema: "chunked::odd_tail_ok(Tensor x) -> Tensor"
        reference: ch/reference.py:double
      - schema: "chunked::past_pool_bug(Tensor x) -> Tensor"
        reference: ch/reference.py:double
      - schema: "chunked::odd_tail_bug(Tensor x) -> Tensor"
        reference: ch/reference.py:double
""")
    built = run_scons(proj, "-Q", "ch")
    assert "ch: 0 passed, 0 failed, 3 ops without vectors" in built.stdout.splitlines(), \
        built.stdout + built.stderr
    proc = run_scons(proj, "-Q", "explore-ch", "EXPLORE_EXAMPLES=100")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = _lines(proc)
    assert lines[0] == "EXPLORED ch::odd_tail_ok: 100 examples, every check passed"
    i = lines.index(_TAIL_FALSIFIED)
    assert lines[i + 1:i + 4] == _TAIL_EXAMPLE and lines[-1] == "ch: 3 ops explored, 2 falsified"
    # the bug past the TCM pool: whatever the seed and however few the
    # examples, a tensor of more than 4096 elements whose neighbours differ
    # is tried (element 4096 is its first wrong one)
    for seed in (0, 1, 2):
        proc = run_scons(proj, "-Q", "explore-ch", "EXPLORE_EXAMPLES=12", f"EXPLORE_SEED={seed}")
        past = [l for l in _lines(proc) if l.startswith("FALSIFIED ch::past_pool_bug")]
        assert len(past) == 1 and re.search(r"\[explored_\d+(x1)*\] \(explored\): \d+ of \d+ "
                                             r"elements? differs? .*: \[4096\] actual", past[0]), \
            (seed, _lines(proc))
        shutil.rmtree(proj / "build/host/ch/explore-db")
    manifest.write_text(manifest.read_text() + "        vectors:\n")
    _paste_and_fail_the_same_way(proj, "ch", _TAIL_EXAMPLE, _TAIL_FALSIFIED)


_TAIL_FALSIFIED = (
    "FALSIFIED ch::odd_tail_bug: FAIL ch::odd_tail_bug[explored_1] (explored): uninitialised "
    "elements reached the output through the copy path (the returned tensor, copied by "
    "customop_return_tensor, was never written there; e.g. torch::empty() storage): [0, 1)")
_TAIL_EXAMPLE = ["    - name: explored_1", "      inputs:",
                 "        x: {dtype: float32, shape: [1], values: [0.0]}"]


def test_named_dimensions_find_a_bug_a_square_vector_hides(built_project, tmp_path):
    """x [m, n] + b [n], wrong only when m != n, with one square vector:
    its sizes stay tied and the search passes (as documented); with
    ``explore: shapes: {x: [m, n], b: [n]}`` it is falsified, and the
    same kernel done right stays clean."""
    proj = copy_built(built_project[0], tmp_path / "p")
    (proj / "cb").mkdir()
    for name in ("colbias.cpp", "reference.py"):
        shutil.copy(ROOT / "tests" / "data" / "colbias" / name, proj / "cb" / name)
    manifest = proj / "ops.yaml"
    base = manifest.read_text()
    op = """      - schema: "cb::KERNEL(Tensor x, Tensor b) -> Tensor"
        reference: cb/reference.py:colbias
        EXPLORE
        vectors:
          - name: sq
            inputs:
              x: {dtype: float32, shape: [4, 4], random: {distribution: normal}}
              b: {dtype: float32, shape: [4], random: {distribution: normal}}
"""
    library = "\n  - name: cb\n    sources: [cb/colbias.cpp]\n    ops:\n" + "".join(
        op.replace("KERNEL", kernel) for kernel in ("colbias_ok", "colbias_mod_bug"))
    manifest.write_text(base + library.replace("        EXPLORE\n", ""))
    proc = run_scons(proj, "-Q", "explore-cb", "EXPLORE_EXAMPLES=40")
    assert _lines(proc)[-1] == "cb: 2 ops explored, 0 falsified", proc.stdout + proc.stderr
    manifest.write_text(base + library.replace(
        "EXPLORE", "explore: {shapes: {x: [m, n], b: [n]}}"))
    proc = run_scons(proj, "-Q", "explore-cb", "EXPLORE_EXAMPLES=40")
    lines = _lines(proc)
    assert lines[0] == "EXPLORED cb::colbias_ok: 40 examples, every check passed", lines
    assert lines[1].startswith("FALSIFIED cb::colbias_mod_bug: FAIL cb::colbias_mod_bug[explored_")
    assert lines[-1] == "cb: 2 ops explored, 1 falsified"
