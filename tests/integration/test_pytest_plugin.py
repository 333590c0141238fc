"""The pytest plugin (gpsimd_pytest): a manifest's vectors as pytest items,
run against what scons built, with the SCons test node's messages.

An outside project (its own SConstruct and manifest in a tmp folder) is
built once with scons; pytest then runs in that folder in a subprocess
with ``-p gpsimd_pytest`` (installed, the ``pytest11`` entry point loads it
by the same name: tests/integration/test_install.py).
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import NEGATE_KERNEL, ROOT, action_lines, processes_in, run_scons
from gpsimd_emu.client.vectors import RUNS_PER_VECTOR, START_SLACK
from test_explore import _LIBRARY as _SP_LIBRARY

KERNEL = NEGATE_KERNEL

MANIFEST = """\
version: 1
libraries:
  - name: team
    sources: [src/negate.cpp]
    ops:
      - schema: "team::negate(Tensor x) -> Tensor"
        reference: numpy:negative
        vectors:
          - name: n11
            inputs:
              x: {dtype: float32, shape: [11], random: {distribution: normal}}
          - name: wrong
            inputs:
              x: {dtype: float32, shape: [2], values: [1, 2]}
            expected: {values: [1, 2]}
          - name: inline
            inputs:
              x: {dtype: float32, shape: [3], values: [-1, 0, 2.5]}
            expected: {values: [1, 0, -2.5]}
"""

SCONSTRUCT = """\
import gpsimd_build
env = Environment(tools=["gpsimd"], toolpath=[gpsimd_build.toolpath()])
env.GpsimdCollection("ops.yaml", build_dir="build")
"""

IDS = ["ops.yaml::team::negate[n11]", "ops.yaml::team::negate[wrong]",
       "ops.yaml::team::negate[inline]"]


def _env():
    paths = [str(ROOT / "site_scons"), str(ROOT / "runtime_model")]
    return {"PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The outside project, built and tested once by scons: (folder, the
    FAIL line scons printed)."""
    proj = tmp_path_factory.mktemp("plugin") / "team_repo"
    (proj / "src").mkdir(parents=True)
    (proj / "src/negate.cpp").write_text(KERNEL)
    (proj / "ops.yaml").write_text(MANIFEST)
    (proj / "SConstruct").write_text(SCONSTRUCT)
    proc = run_scons(proj, env=_env())
    assert proc.returncode == 2, proc.stdout + proc.stderr    # one vector fails
    (fail,) = [line for line in proc.stdout.splitlines() if line.startswith("FAIL ")]
    assert fail.startswith("FAIL team::negate[wrong] (ops.yaml:12:13): ")
    return proj, fail


@pytest.fixture(scope="module")
def serial(built, tmp_path_factory):
    """One run of every vector in one process, with JUnit XML: (the
    CompletedProcess, the XML file, the report's text)."""
    proj, _ = built
    junit = tmp_path_factory.mktemp("junit") / "j.xml"
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA", f"--junitxml={junit}")
    return proc, junit, (proj / "build/host/pytest-report.html").read_text()


def pytest_in(proj, *args, env=None):
    # (the vectors in manifest order, whatever shuffling plugin the outer
    # run has, e.g. pytest-randomly: -x and the shards' split depend on it)
    cmd = [sys.executable, "-m", "pytest", "-p", "gpsimd_pytest", "-p", "no:randomly", *args]
    full = dict(os.environ, **_env(), **(env or {}))
    return subprocess.run(cmd, cwd=str(proj), capture_output=True, text=True, env=full,
                          timeout=600)


def _outcomes(stdout):
    """{node id: PASSED/FAILED} from ``-rA`` short summary lines and ``-v`` lines."""
    return dict((m.group(2), m.group(1)) for m in
                re.finditer(r"^(PASSED|FAILED) (\S+)", stdout, re.M))


def test_each_vector_is_an_item_with_the_scons_messages_and_junit(built, serial):
    proj, fail = built
    proc, junit, page = serial
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    # the vectors run in the program the build made, as its test commands do
    assert "gpsimd: the vectors run in build/host/emu/gpsimd-zygote\n" in proc.stdout
    assert "warning" not in out
    assert _outcomes(proc.stdout) == {IDS[0]: "PASSED", IDS[1]: "FAILED", IDS[2]: "PASSED"}, out
    # the failure is the line the SCons test node printed, nothing else
    assert fail in proc.stdout
    assert "Traceback" not in out and "runtest" not in out
    # a pass prints the node's PASS line (shown by -rA)
    assert "PASS team::negate[inline] (ops.yaml:16:13): max_abs_err 0 over 3 elements" \
        in proc.stdout
    # JUnit XML by pytest's own writer: one testcase per vector, the failure's
    # message the FAIL line, the error figures as properties
    root = ET.parse(junit).getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert sorted(cases) == ["negate[inline]", "negate[n11]", "negate[wrong]"]
    assert {c.get("classname") for c in cases.values()} == {"ops.yaml.team"}
    failure = cases["negate[wrong]"].find("failure")
    assert failure is not None and failure.get("message") == fail
    props = {p.get("name"): p.get("value") for p in cases["negate[inline]"].iter("property")}
    assert props == {"where": "ops.yaml:16:13", "max_abs_err": "0.0", "mismatches": "0"}
    # the run's own report, beside the build's (which it leaves alone)
    assert 'data-vector="team::negate[wrong]"' in page and "total: 2 passed, 1 failed" in page
    # the test suite names the build the results name (for the shards' merge)
    build = json.loads((proj / "build/host/pytest-report.json").read_text())["build"]
    suite = next(root.iter("testsuite"))
    assert [(p.get("name"), p.get("value")) for p in suite.findall("properties/property")] == [
        ("gpsimd_build", build)] and len(build) == 64


def test_k_x_and_last_failed(built, tmp_path):
    proj, fail = built
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA", "-k", "inline or n11")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _outcomes(proc.stdout) == {IDS[0]: "PASSED", IDS[2]: "PASSED"}
    assert "1 deselected" in proc.stdout
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA", "-x")
    assert proc.returncode == 1
    assert _outcomes(proc.stdout) == {IDS[0]: "PASSED", IDS[1]: "FAILED"}   # stopped there
    cache = ["-o", f"cache_dir={tmp_path / 'cache'}"]
    pytest_in(proj, "--gpsimd-manifest", "ops.yaml", *cache)
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA", "--lf", *cache)
    assert _outcomes(proc.stdout) == {IDS[1]: "FAILED"}, proc.stdout
    assert "run-last-failure: rerun previous 1 failure" in proc.stdout


@pytest.mark.skipif(importlib.util.find_spec("xdist") is None,
                    reason="pytest-xdist is not installed (the test extra installs it)")
def test_xdist_runs_the_vectors_in_two_workers_and_reports_as_one(built, serial, tmp_path):
    proj, fail = built
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA", "-n", "2",
                     f"--gpsimd-report={tmp_path / 'xdist.html'}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "2 workers [3 items]" in proc.stdout, out
    assert _outcomes(proc.stdout) == {IDS[0]: "PASSED", IDS[1]: "FAILED", IDS[2]: "PASSED"}, out
    assert fail in proc.stdout
    # the workers' results make one report, in manifest order, the same
    # bytes as a run in one process
    page = (tmp_path / "xdist.html").read_text()
    assert page == serial[2]
    assert re.findall(r'<tr class="vector (\w+)" data-vector="([^"]+)"', page) == [
        ("pass", "team::negate[n11]"), ("fail", "team::negate[wrong]"),
        ("pass", "team::negate[inline]")]


def test_without_the_option_nothing_is_collected(built):
    proj, _ = built
    proc = pytest_in(proj, "--collect-only", "-q")
    assert "negate" not in proc.stdout and proc.returncode == 5, proc.stdout   # no tests
    assert "--gpsimd-manifest" in pytest_in(proj, "--help").stdout


def test_a_stale_or_missing_build_fails_saying_to_build_first(built, tmp_path):
    proj, _ = built
    other = tmp_path / "copy"
    shutil.copytree(proj, other)
    text = MANIFEST.replace("name: wrong", "name: renamed")
    (other / "ops.yaml").write_text(text)
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert proc.returncode == 1
    assert ("FAIL team::negate[n11] (ops.yaml:9:13): the test plan build/host/team/testplan.json "
            "is not the manifest's as it is now (edited since the last build?): build it first: "
            "`scons team`") in proc.stdout
    shutil.rmtree(other / "build")
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert ("FAIL team::negate[inline] (ops.yaml:16:13): no test plan "
            "build/host/team/testplan.json: build it first: `scons team`") in proc.stdout
    # nothing built there: no folder appears for the report
    assert not (other / "build").exists()
    assert "gpsimd: no report written: there is no build/host" in proc.stderr, proc.stderr
    # another build folder: the messages say how to build into it
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA", "--gpsimd-build-dir", "out")
    assert ("FAIL team::negate[inline] (ops.yaml:16:13): no test plan "
            "out/host/team/testplan.json: build it first: `scons BUILD_DIR=out team`"
            ) in proc.stdout, proc.stdout
    assert ("gpsimd: the vectors cannot run: no out/host/emu/gpsimd-zygote: build it first: "
            "`scons BUILD_DIR=out out/host/emu/gpsimd-zygote`") in proc.stdout
    # a manifest with errors: its diagnostics, no traceback
    (other / "ops.yaml").write_text(text.replace("sources:", "soruces:"))
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml")
    assert proc.returncode == 2 and "unknown key 'soruces'" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stdout


def test_any_working_directory_reads_the_project_from_the_build(built, serial, tmp_path):
    """Issue 29: the project's root and manifest come from what the build
    recorded in its folder (``project.json``), not the working directory:
    from another folder, ``--gpsimd-build-dir`` alone runs the same vectors
    with the same outcomes and messages; the report goes to the build."""
    proj, fail = built
    record = json.loads((proj / "build/project.json").read_text())
    assert record == {"format": 1, "root": "..", "manifest": "ops.yaml"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = pytest_in(elsewhere, "--gpsimd-build-dir", str(proj / "build"), "-rA",
                     "-p", "no:cacheprovider")
    # (pytest names the manifest from where it runs: ../../.../ops.yaml)
    outcomes = {i[i.index("ops.yaml::"):]: o for i, o in _outcomes(proc.stdout).items()}
    assert outcomes == {IDS[0]: "PASSED", IDS[1]: "FAILED", IDS[2]: "PASSED"}, \
        proc.stdout + proc.stderr
    rel = os.path.relpath(proj / "build/host/emu/gpsimd-zygote", elsewhere)
    assert fail in proc.stdout and f"gpsimd: the vectors run in {rel}\n" in proc.stdout
    assert (proj / "build/host/pytest-report.txt").read_text() == \
        "team: 2 passed, 1 failed\ntotal: 2 passed, 1 failed\n"
    assert not (elsewhere / "build").exists()
    proc = pytest_in(elsewhere, "--gpsimd-build-dir", "nowhere", "-p", "no:cacheprovider")
    assert proc.returncode == 4 and "--gpsimd-build-dir: nowhere: no record of a project" \
        in proc.stderr, proc.stderr


@pytest.mark.campaign
def test_two_shards_cover_every_vector_once_and_merge_to_one_run(built, tmp_path):
    """Issue 29: pytest-split's shards (``--splits 2 --group i``), each
    with its own report and JUnit file, cover every vector exactly once;
    ``python -m gpsimd_pytest.merge`` makes of them the single run's
    summary, results and report (the same bytes) and JUnit (the same test
    ids, outcomes, messages and properties)."""
    pytest.importorskip("pytest_split", reason="pytest-split is not installed "
                                               "(pip install pytest-split)")
    proj, _ = built
    single, junit = tmp_path / "single", tmp_path / "single.xml"
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", f"--gpsimd-report={single}.html",
                     f"--junitxml={junit}", "-p", "no:cacheprovider")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    one = {ext: (tmp_path / f"single{ext}").read_bytes() for ext in (".html", ".json", ".txt")}
    assert one[".txt"] == b"team: 2 passed, 1 failed\ntotal: 2 passed, 1 failed\n"
    files = []
    for group in (1, 2):
        out = tmp_path / f"shard{group}"
        proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "--splits", "2", "--group",
                         str(group), f"--gpsimd-report={out}/report.html",
                         f"--junitxml={out}/junit.xml", "-p", "no:cacheprovider")
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        files += [str(out / "report.json"), str(out / "junit.xml")]
    ran = [json.loads(open(f).read())["vectors"] for f in files[::2]]
    ids = [f"{r[1]}::{r[3]['op']}[{r[3]['vector']}]" for shard in ran for r in shard]
    assert sorted(ids) == sorted(i.split("::", 1)[1] for i in IDS) and all(ran)
    merged = tmp_path / "merged"
    done = subprocess.run([sys.executable, "-m", "gpsimd_pytest.merge", "-o", str(merged),
                           *files], capture_output=True, text=True, env=dict(os.environ, **_env()),
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == one[".txt"].decode()
    for ext, data in one.items():
        assert (tmp_path / f"merged{ext}").read_bytes() == data, ext

    def cases(path):
        root = ET.parse(path).getroot()
        suite = root if root.tag == "testsuite" else next(root.iter("testsuite"))
        counts = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")}
        return counts, [(c.get("classname"), c.get("name"),
                         [(e.tag, e.get("message")) for e in c if e.tag != "properties"],
                         [(p.get("name"), p.get("value")) for p in c.iter("property")])
                        for c in suite.iter("testcase")]
    assert cases(tmp_path / "merged.xml") == cases(junit)
    # a vector in two shards is refused
    twice = subprocess.run([sys.executable, "-m", "gpsimd_pytest.merge", "-o",
                            str(tmp_path / "bad"), files[0], files[0]], capture_output=True,
                           text=True, env=dict(os.environ, **_env()), timeout=120)
    assert twice.returncode == 2 and "each vector belongs to one shard" in twice.stderr
    # a shard missing (its failure with it) is refused, not merged into a pass
    alone = subprocess.run([sys.executable, "-m", "gpsimd_pytest.merge", "-o",
                            str(tmp_path / "alone"), files[0]], capture_output=True,
                           text=True, env=dict(os.environ, **_env()), timeout=120)
    assert (alone.returncode, alone.stdout, alone.stderr) == (
        2, "", "gpsimd_pytest.merge: shard 2 of 2 missing (--splits 2): their vectors would be "
               "counted nowhere\n")
    # every shard there, but one's vectors deselected (-k): refused, naming them
    out = tmp_path / "shard1k"
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "--splits", "2", "--group", "1",
                     "-k", "not negate", f"--gpsimd-report={out}/report.html",
                     "-p", "no:cacheprovider")
    assert proc.returncode == 5, proc.stdout + proc.stderr         # (no test ran)
    left = sorted(f"{r[1]}::{r[3]['op']}[{r[3]['vector']}]" for r in ran[0])
    done = subprocess.run([sys.executable, "-m", "gpsimd_pytest.merge", "-o",
                           str(tmp_path / "partial"), str(out / "report.json"), files[2]],
                          capture_output=True, text=True, env=dict(os.environ, **_env()),
                          timeout=120)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.startswith(
        f"gpsimd_pytest.merge: {len(left)} vector{'s' if len(left) > 1 else ''} of the manifest "
        f"ran in no file given ({', '.join(left)}): "), done.stderr


@pytest.mark.campaign
def test_shards_merge_only_when_they_tested_one_build(built, tmp_path):
    """Each shard's results name the build they tested: shards of one
    build merge (one built again into another BUILD_DIR elsewhere too, as
    the single run's bytes); a shard re-run on a build with its kernel
    changed is refused, naming both files. Merged, it made a pass no
    build made: the changed kernel fails [inline] (in the other shard),
    the first fails [wrong] (in this one)."""
    pytest.importorskip("pytest_split", reason="pytest-split is not installed "
                                               "(pip install pytest-split)")
    proj, _ = built
    other = tmp_path / "other"
    shutil.copytree(proj, other, ignore=shutil.ignore_patterns("build", ".sconsign*"))
    (other / "SConstruct").write_text(SCONSTRUCT.replace('"build"', '"out/b2"'))
    assert run_scons(other, env=_env()).returncode == 2                   # [wrong] fails

    def shard(where, group, *args):
        out = tmp_path / f"{where.name}-{group}-{len(list(tmp_path.iterdir()))}"
        proc = pytest_in(where, "--gpsimd-manifest", "ops.yaml", "--splits", "2", "--group",
                         str(group), f"--gpsimd-report={out}/report.html",
                         "-p", "no:cacheprovider", *args)
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        return str(out / "report.json")

    def merge(*files):
        return subprocess.run([sys.executable, "-m", "gpsimd_pytest.merge", "-o",
                               str(tmp_path / "merged"), *files], capture_output=True, text=True,
                              env=dict(os.environ, **_env()), timeout=120)

    single = tmp_path / "single"
    pytest_in(proj, "--gpsimd-manifest", "ops.yaml", f"--gpsimd-report={single}.html",
              "-p", "no:cacheprovider")
    first, second = shard(proj, 1), shard(proj, 2)
    elsewhere = shard(other, 2, "--gpsimd-build-dir", "out/b2")
    for files in ((first, second), (first, elsewhere)):
        done = merge(*files)
        assert (done.returncode, done.stderr) == (0, ""), files
        assert done.stdout == "team: 2 passed, 1 failed\ntotal: 2 passed, 1 failed\n"
        for ext in (".html", ".json", ".txt"):
            assert (tmp_path / f"merged{ext}").read_bytes() == \
                (tmp_path / f"single{ext}").read_bytes(), ext
        (tmp_path / "merged.txt").unlink()

    kernel = other / "src/negate.cpp"       # [n11] and [wrong] pass, [inline] fails
    kernel.write_text(KERNEL.replace("o[i] = -a[i];", "o[i] = n == 11 ? -a[i] : a[i];"))
    assert run_scons(other, env=_env()).returncode == 2
    fixed = shard(other, 1, "--gpsimd-build-dir", "out/b2")
    assert [r[3]["status"] for r in json.loads(open(fixed).read())["vectors"]] == \
        ["pass", "pass"]
    done = merge(fixed, second)
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", f"gpsimd_pytest.merge: {fixed} and {second} are results of different builds "
               "(their objects, emulator or test vectors differ): run every shard on "
               "one build\n")
    assert not (tmp_path / "merged.txt").exists()


def test_a_built_tree_with_new_times_is_tested_as_built(built, serial, tmp_path):
    """Issue 29 "a built tree travels": a copy with new times on every file
    (as a CI artifact or a restored cache arrives) is current by content:
    its vectors run with the same outcomes; an edit there is still seen."""
    proj, _ = built
    other = tmp_path / "copy"
    shutil.copytree(proj, other, copy_function=shutil.copy)       # (new times)
    later = time.time_ns() + 10 ** 9
    for path in other.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path, ns=(later, later))
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(proc.stdout) == {IDS[0]: "PASSED", IDS[1]: "FAILED", IDS[2]: "PASSED"}, \
        proc.stdout
    assert "build it first" not in proc.stdout
    src = other / "src/negate.cpp"
    src.write_text(src.read_text().replace("o[i] = -a[i];", "o[i] = +a[i];"))
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert "(src/negate.cpp changed since the last build): build it first" in proc.stdout


HEADER_KERNEL = KERNEL.replace("#include <torch/torch.h>\n",
                               '#include <torch/torch.h>\n#include "sign.h"\n').replace(
                                   "o[i] = -a[i];", "o[i] = SIGN * a[i];")


def test_the_emulator_program_runs_only_as_the_record_vouches_for_it(built, tmp_path):
    """The emulator's program is the tool's code: one changed or gone
    since the last scons is not run, and every vector fails saying how to
    build it; one the record vouches for but that is not this emulator's
    (built from other sources) fails every vector, saying so."""
    proj, _ = built
    other = tmp_path / "copy"
    shutil.copytree(proj, other)
    rel = "build/host/emu/gpsimd-zygote"
    build = f"build it first: `scons {rel}`"

    def run():
        proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
        assert _outcomes(proc.stdout) == {i: "FAILED" for i in IDS}, proc.stdout + proc.stderr
        return proc

    program = other / rel
    good = program.read_bytes()
    program.write_bytes(good + b"\0")                           # changed behind the build
    proc = run()
    why = f"{rel} may be out of date ({rel} changed since the last build): {build}"
    assert f"gpsimd: the vectors cannot run: {why}\n" in proc.stdout
    assert f"FAIL team::negate[inline] (ops.yaml:16:13): {why}" in proc.stdout

    record_path = other / "build/host/inputs.json"
    record = json.loads(record_path.read_text())
    program.write_bytes(good.replace(b"GPSIMD-ZYGOTE-DIGEST:", b"GPSIMD-ZYGOTE-DIGEST:0"))
    st = program.stat()                                          # vouched for, other sources
    record["files"][rel] = [st.st_size, st.st_mtime_ns, None]
    record_path.write_text(json.dumps(record))
    proc = run()
    assert f"gpsimd: the vectors run in {rel}\n" in proc.stdout
    assert (f"{other / rel} was built from other sources than this emulator's"
            in proc.stdout), proc.stdout

    program.unlink()
    proc = run()
    assert f"gpsimd: the vectors cannot run: no {rel}: {build}\n" in proc.stdout


@pytest.mark.campaign
def test_objects_older_than_their_sources_are_never_tested(built, tmp_path):
    """A kernel or a header edited since the last scons: every vector of the
    library fails saying which file changed, instead of running the old
    objects (a wrong PASS). A build records the sources again (a revert that
    SCons finds up to date included); after a ninja build, ninja decides."""
    proj, _ = built
    other = tmp_path / "copy"
    shutil.copytree(proj, other)
    shutil.rmtree(other / "build")
    (other / "src/negate.cpp").write_text(HEADER_KERNEL)
    (other / "src/sign.h").write_text("#define SIGN -1\n")
    assert run_scons(other, env=_env()).returncode == 2       # [wrong] fails
    ok = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(ok.stdout) == {IDS[0]: "PASSED", IDS[1]: "FAILED", IDS[2]: "PASSED"}

    stale = ("the objects of team may be out of date ({} changed since the last build): "
             "build it first: `scons team`")
    (other / "src/sign.h").write_text("#define SIGN 1\n")      # now a wrong kernel
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(proc.stdout) == dict.fromkeys(IDS, "FAILED"), proc.stdout
    assert ("FAIL team::negate[n11] (ops.yaml:9:13): " + stale.format("src/sign.h")
            in proc.stdout), proc.stdout
    assert run_scons(other, "team", env=_env()).returncode == 2
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(proc.stdout) == {IDS[0]: "FAILED", IDS[1]: "PASSED", IDS[2]: "FAILED"}

    # a revert of the kernel's text: SCons rebuilds nothing it did not
    # already have, but records the file again
    (other / "src/sign.h").write_text("#define SIGN -1\n")
    assert run_scons(other, "team", env=_env()).returncode == 2
    text = (other / "src/negate.cpp").read_text()
    (other / "src/negate.cpp").write_text(text + "\n")
    (other / "src/negate.cpp").write_text(text)
    # (rewritten with the same bytes: a new time, current by content)
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(proc.stdout) == {IDS[0]: "PASSED", IDS[1]: "FAILED", IDS[2]: "PASSED"}
    assert "changed since" not in proc.stdout, proc.stdout
    again = run_scons(other, "team", env=_env())
    assert not [k for k, _ in action_lines(again.stdout) if k in ("CXX", "LINK", "PACK")]
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(proc.stdout) == {IDS[0]: "PASSED", IDS[1]: "FAILED", IDS[2]: "PASSED"}

    # the ninja path: its summary step writes the record from ninja's logs
    if importlib.util.find_spec("ninja") is None:
        return
    import ninja
    gen = run_scons(other, "--experimental=ninja", env=_env())
    assert gen.returncode != 0 and (other / "build/build.ninja").exists()
    (other / "src/sign.h").write_text("#define SIGN 1\n")
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    # (the first file the record finds changed: the objects ninja rebuilt)
    assert _outcomes(proc.stdout) == dict.fromkeys(IDS, "FAILED"), proc.stdout
    assert "the objects of team may be out of date (" in proc.stdout, proc.stdout
    subprocess.run([os.path.join(ninja.BIN_DIR, "ninja"), "-f", "build/build.ninja", "-k", "0"],
                   cwd=other,
                   capture_output=True, env=dict(os.environ, **_env()), timeout=600)
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(proc.stdout) == {IDS[0]: "FAILED", IDS[1]: "PASSED", IDS[2]: "FAILED"}


def test_a_kernel_in_an_allowed_folder_outside_the_project_is_never_tested_stale(tmp_path):
    """A kernel and its header in an ``allow_paths`` folder outside the
    project: the record left out every absolute path (the compiler's own
    headers), so after an edit the plugin ran the old objects and passed
    (found by an attack). They are recorded relative to the project."""
    proj, vendor = tmp_path / "team_repo", tmp_path / "vendor"
    proj.mkdir()
    vendor.mkdir()
    (vendor / "negate.cpp").write_text(HEADER_KERNEL)
    (vendor / "sign.h").write_text("#define SIGN -1\n")
    (proj / "ops.yaml").write_text(MANIFEST.replace("version: 1\n", "version: 1\nallow_paths: [../vendor]\n")
                                   .replace("src/negate.cpp", "../vendor/negate.cpp"))
    (proj / "SConstruct").write_text(SCONSTRUCT)
    assert run_scons(proj, env=_env()).returncode == 2        # [wrong] fails
    ok = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(ok.stdout) == {IDS[0]: "PASSED", IDS[1]: "FAILED", IDS[2]: "PASSED"}, ok.stdout
    record = json.loads((proj / "build/host/inputs.json").read_text())
    assert {"../vendor/negate.cpp", "../vendor/sign.h"} <= set(record["libraries"]["team"]["files"])
    assert not [p for p in record["files"] if p.startswith(str(tmp_path))]
    for path, text in (("sign.h", "#define SIGN 1\n"),
                       ("negate.cpp", KERNEL.replace("o[i] = -a[i];", "o[i] = a[i];"))):
        before = (vendor / path).read_text()
        (vendor / path).write_text(text)                # now a wrong kernel
        proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA")
        assert _outcomes(proc.stdout) == dict.fromkeys(IDS, "FAILED"), proc.stdout
        assert (f"the objects of team may be out of date (../vendor/{path} changed since the "
                "last build): build it first: `scons team`" in proc.stdout), proc.stdout
        (vendor / path).write_text(before)


def test_a_manifest_flag_a_missing_object_or_an_edit_during_the_build_is_never_tested(
        built, tmp_path):
    """What the objects are made from besides files (a library's cflags),
    the objects themselves, and a kernel edited while scons ran: each makes
    the library's vectors fail saying to build first, never PASS."""
    proj, _ = built
    other = tmp_path / "copy"
    shutil.copytree(proj, other)
    manifest = other / "ops.yaml"
    manifest.write_text(MANIFEST.replace("    sources: [src/negate.cpp]\n",
                                         "    sources: [src/negate.cpp]\n    cflags: [-DX]\n"))
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(proc.stdout) == dict.fromkeys(IDS, "FAILED"), proc.stdout
    assert ("the objects of team may be out of date (its manifest entry (sources, includes, "
            "cflags or ops) changed since the last build): build it first: `scons team`"
            in proc.stdout), proc.stdout
    manifest.write_text(MANIFEST)
    assert _outcomes(pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA").stdout)[IDS[0]] \
        == "PASSED"
    (other / "build/host/team/team.packed.so").unlink()
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert ("the objects of team may be out of date (build/host/team/team.packed.so is gone "
            "since the last build): build it first: `scons team`") in proc.stdout, proc.stdout

    # an edit while the build runs (here: once its test run has started,
    # after the compile read the kernel): recorded as the build saw it
    kernel = other / "src/negate.cpp"
    kernel.write_text(KERNEL.replace("o[i] = -a[i];", "o[i] = -a[i] * 1.0f;"))
    env = dict(os.environ, **_env())
    scons = subprocess.Popen([sys.executable, "-m", "SCons", "-Q", "team"], cwd=other,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in scons.stdout:
        if "TEST" in line:
            kernel.write_text(KERNEL.replace("o[i] = -a[i];", "o[i] = a[i];"))   # now wrong
            break
    scons.stdout.read()
    assert scons.wait(timeout=600) == 2           # (its [wrong] vector fails)
    proc = pytest_in(other, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(proc.stdout) == dict.fromkeys(IDS, "FAILED"), proc.stdout
    assert "(src/negate.cpp changed since the last build)" in proc.stdout, proc.stdout


def test_a_library_with_shape_functions_runs_its_shaped_plan(built_project, tmp_path):
    """The shipped relu library has shape sources: the plugin runs the plan
    with every output from a shape function, as the build's test node
    does, and its vectors pass as they do under scons."""
    from conftest import copy_built
    proj = copy_built(built_project[0], tmp_path / "proj")     # (the run writes its report)
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA", "-k", "relu_forward")
    got = {k: v for k, v in _outcomes(proc.stdout).items() if k.startswith("ops.yaml::relu::")}
    assert got and set(got.values()) == {"PASSED"}, proc.stdout


@pytest.mark.parametrize("size", [11, 2], ids=["other_shape", "same_shape"])
def test_a_reference_that_never_returns_times_out_and_the_next_vector_runs(tmp_path, size):
    """Issue 26: the plugin runs its vectors through the emulator's client,
    in a process of their own, so a hung reference fails its vector once
    its time is up (and its processes are ended) instead of hanging pytest;
    the next vector runs in a new process, and fails by its own values
    whether or not its arguments take the hung vector's places (then the
    new process is told that the hung vector did not pass, and does not
    run its reference again for the second call)."""
    proj = tmp_path / "hang_repo"
    (proj / "src").mkdir(parents=True)
    (proj / "src/negate.cpp").write_text(KERNEL)
    (proj / "ref.py").write_text("import numpy as np\n\ndef negate(x):\n    return -x\n")
    manifest = MANIFEST.replace("numpy:negative", "ref.py:negate")
    (proj / "ops.yaml").write_text(manifest.replace("shape: [11]", f"shape: [{size}]"))
    (proj / "SConstruct").write_text(SCONSTRUCT)
    proc = run_scons(proj, env=_env())
    assert proc.returncode == 2, proc.stdout + proc.stderr    # [wrong] fails
    # (it swallows the worker's own alarm at the vector's time limit,
    # sourceonly.time_limit, so only the client's limit can end it)
    (proj / "ref.py").write_text("import numpy as np\n\ndef negate(x):\n"
                                 "    while x.size == %d:\n"
                                 "        try:\n            while True:\n                pass\n"
                                 "        except BaseException:\n            pass\n"
                                 "    return -x\n" % size)
    start = time.monotonic()
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA", "--gpsimd-timeout", "0.5")
    took = time.monotonic() - start
    assert _outcomes(proc.stdout) == {IDS[0]: "FAILED", IDS[1]: "FAILED", IDS[2]: "PASSED"}, \
        proc.stdout
    limit = 0.5 * (RUNS_PER_VECTOR + 1) + START_SLACK       # (VectorClient's limit)
    assert (f"FAIL team::negate[n11] (ops.yaml:9:13): timed out after {limit:g} s (a reference "
            "or the emulator that never returns?); its processes were ended") in proc.stdout, \
        proc.stdout
    # the next vector fails by its own wrong values: the hung vector before
    # it is not run again for its second call
    wrong = [line for line in proc.stdout.splitlines()
             if line.startswith("FAIL team::negate[wrong] (ops.yaml:12:13): ")]
    assert wrong and "2 of 2 elements differ" in wrong[0] and "timed out" not in wrong[0], \
        proc.stdout
    assert took < 60, took
    assert _services_in(proj) == []


@pytest.mark.parametrize("ending,how", [("os._exit(0)", "exit status 0"),
                                        ("os.kill(os.getpid(), signal.SIGKILL)", "signal 9")])
def test_a_reference_that_ends_the_emulator_fails_its_vector_and_the_next_runs(tmp_path, ending,
                                                                               how):
    """A reference's os._exit ends the vector service: that vector fails,
    saying what may have ended it, and the next vectors run in a new one."""
    proj = tmp_path / "exit_repo"
    (proj / "src").mkdir(parents=True)
    (proj / "src/negate.cpp").write_text(KERNEL)
    (proj / "ref.py").write_text("import numpy as np\n\ndef negate(x):\n    return -x\n")
    (proj / "ops.yaml").write_text(MANIFEST.replace("numpy:negative", "ref.py:negate"))
    (proj / "SConstruct").write_text(SCONSTRUCT)
    proc = run_scons(proj, env=_env())
    assert proc.returncode == 2, proc.stdout + proc.stderr    # [wrong] fails
    (proj / "ref.py").write_text("import os, signal\n\ndef negate(x):\n"
                                 f"    if x.size == 11:\n        {ending}\n    return -x\n")
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(proc.stdout) == {IDS[0]: "FAILED", IDS[1]: "FAILED", IDS[2]: "PASSED"}, \
        proc.stdout
    assert (f"FAIL team::negate[n11] (ops.yaml:9:13): the emulator's process ended ({how}) "
            f"without a result (a reference that calls os._exit or crashes the process?)") \
        in proc.stdout, proc.stdout
    assert _services_in(proj) == []


def test_a_vector_whose_service_what_an_earlier_reference_left_ended_runs_again(tmp_path):
    """A thread vector a's reference left running ended the vector service
    while it ran b, whose reference is harmless: b failed (the emulator's
    process ended without a result). A service that ends while it runs a
    vector after others runs it again in a new one, where it is the first."""
    proj = tmp_path / "left_repo"
    (proj / "src").mkdir(parents=True)
    (proj / "src/negate.cpp").write_text(KERNEL)
    (proj / "ref.py").write_text(
        "import os, threading, time\n\ndef negate(x):\n"
        "    if x.size == 11:\n"
        "        def wait():\n"
        "            while not os.path.exists('go'):\n"
        "                time.sleep(0.005)\n"
        "            os._exit(5)\n"
        "        threading.Thread(target=wait, daemon=True).start()\n"
        "    elif x.size == 2:\n"
        "        open('go', 'w').close()\n"
        "        time.sleep(0.5)\n"
        "    return -x\n")
    (proj / "ops.yaml").write_text(MANIFEST.replace("numpy:negative", "ref.py:negate")
                                   .replace("expected: {values: [1, 2]}", "rtol: 0.001"))
    (proj / "SConstruct").write_text(SCONSTRUCT)
    proc = run_scons(proj, env=_env())      # (the CLI's worker makes n11 again: it fails)
    assert proc.returncode == 2 and "team: 2 passed, 1 failed" in proc.stdout, proc.stdout
    (proj / "go").unlink()
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-rA")
    assert _outcomes(proc.stdout) == {IDS[0]: "PASSED", IDS[1]: "PASSED", IDS[2]: "PASSED"}, \
        proc.stdout
    assert "the emulator's process ended" not in proc.stdout, proc.stdout
    assert _services_in(proj) == []


def _services_in(folder) -> list:
    """Pids of the live vector services working in ``folder`` (other
    tests' run at the same time under xdist)."""
    found = []
    for pid in processes_in(folder):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"gpsimd_emu.vector_service" in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            pass
    return found


#: The team library with its first vector only, and explore's library with
#: the remainder bug (test_explore.py's)
EXPLORED_MANIFEST = MANIFEST[:MANIFEST.index("          - name: wrong")] + _SP_LIBRARY


def test_explore_items_pass_fail_with_the_example_and_are_bounded(tmp_path):
    """``--gpsimd-explore``: one item per op, ``scons explore``'s search
    through the emulator's client (a process of its own): a correct kernel's
    passes, the remainder bug's fails with the smallest example, as
    ``scons explore`` prints them."""
    proj = tmp_path / "explore_repo"
    (proj / "src").mkdir(parents=True)
    (proj / "sp").mkdir()
    (proj / "src/negate.cpp").write_text(KERNEL)
    for name in ("spmd.cpp", "reference.py"):
        (proj / "sp" / name).write_text((ROOT / "kernels/broken" / name).read_text())
    (proj / "ops.yaml").write_text(EXPLORED_MANIFEST)
    (proj / "SConstruct").write_text(SCONSTRUCT)
    assert run_scons(proj, env=_env()).returncode == 0       # (both vectors pass)
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "--gpsimd-explore",
                     "--gpsimd-explore-examples", "30", "-rA", "-k", "explore")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _outcomes(proc.stdout) == {"ops.yaml::team::explore(negate)": "PASSED",
                                      "ops.yaml::sp::explore(remainder_bug)": "FAILED"}
    assert "EXPLORED team::negate: 30 examples, every check passed" in proc.stdout
    assert ("FALSIFIED sp::remainder_bug: FAIL sp::remainder_bug[explored_1] (explored): core 7: "
            "fault OUT_OF_RANGE in op remainder_bug") in proc.stdout
    assert "        x: {dtype: float32, shape: [1], values: [0.0]}" in proc.stdout


def test_a_run_that_writes_no_report_leaves_none_of_the_last_run(built, tmp_path):
    """The plugin wrote its report, results and summary only at a run's
    end and never removed the last run's: a run killed after a FAIL, a
    ``-n 2`` run interrupted, or one that ran no vector (``-k nomatch``)
    left ``total: 104 passed, 0 failed`` of the run before (an attacker,
    2 of 2). They go as a run starts now."""
    proj, _ = built
    out = tmp_path / "r"
    args = ("--gpsimd-manifest", "ops.yaml", f"--gpsimd-report={out}/report.html",
            "-p", "no:cacheprovider")
    assert pytest_in(proj, *args).returncode == 1
    assert (out / "report.txt").read_text() == "team: 2 passed, 1 failed\ntotal: 2 passed, 1 failed\n"
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json", "report.txt"]
    proc = pytest_in(proj, *args, "-k", "nomatch")
    assert proc.returncode == 5, proc.stdout + proc.stderr          # (no test ran)
    assert list(out.iterdir()) == []


CRASHING_CONFTEST = """\
import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if item.name == "negate[wrong]" and os.environ.get("CRASH_IN") == "call":
        os._exit(9)             # (a worker killed while the vector runs: no call report)
    yield


def pytest_runtest_teardown(item):
    if item.name == "negate[wrong]" and os.environ.get("CRASH_IN") == "teardown":
        os._exit(9)             # (killed after the vector's report, before its session ends)
"""


@pytest.mark.skipif(importlib.util.find_spec("xdist") is None,
                    reason="pytest-xdist is not installed (the test extra installs it)")
@pytest.mark.parametrize("when", ["teardown", "call"])
def test_a_crashed_xdist_worker_s_vectors_are_in_the_report(built, tmp_path, when):
    """The results of an xdist worker reached the report only at the
    worker's end: a worker killed (an OOM kill) after relu's FAILs left
    ``total: 78 passed, 0 failed`` where pytest said 9 failed (4 of 4). A
    result now rides on its item's report; a vector whose worker died
    while it ran is counted failed, saying so."""
    proj = tmp_path / "p"
    shutil.copytree(built[0], proj)
    (proj / "conftest.py").write_text(CRASHING_CONFTEST)
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-n", "1", "-p", "no:cacheprovider",
                     f"--gpsimd-report={tmp_path / 'r.html'}", env={"CRASH_IN": when})
    assert proc.returncode == 1 and "crashed while running" in proc.stdout, \
        proc.stdout + proc.stderr
    assert (tmp_path / "r.txt").read_text() == \
        "team: 2 passed, 1 failed\ntotal: 2 passed, 1 failed\n"
    rows = {r[3]["vector"]: r[3] for r in json.loads((tmp_path / "r.json").read_text())["vectors"]}
    assert [rows[v]["status"] for v in ("n11", "wrong", "inline")] == ["pass", "fail", "pass"]
    if when == "call":
        assert re.fullmatch(r"no result \(.*crashed while running.*\)",
                            rows["wrong"]["message"]), rows["wrong"]["message"]
    else:
        assert rows["wrong"]["message"].startswith("2 of 2 elements differ"), rows["wrong"]


def test_a_vector_whose_setup_failed_is_counted_failed_in_the_report(built, tmp_path):
    """A vector whose pytest setup errors (a conftest's hook) has no result
    of its own: the report said ``total: 2 passed, 0 failed`` while pytest
    exited 1 (found in review). It is counted failed, with pytest's line."""
    proj = tmp_path / "p"
    shutil.copytree(built[0], proj)
    (proj / "conftest.py").write_text(
        "def pytest_runtest_setup(item):\n"
        "    if item.name == 'negate[inline]':\n"
        "        raise RuntimeError('the fixture broke')\n")
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-p", "no:cacheprovider",
                     f"--gpsimd-report={tmp_path / 'r.html'}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (tmp_path / "r.txt").read_text() == \
        "team: 1 passed, 2 failed\ntotal: 1 passed, 2 failed\n"
    rows = {r[3]["vector"]: r[3] for r in json.loads((tmp_path / "r.json").read_text())["vectors"]}
    assert rows["inline"]["message"] == "no result (conftest.py:3: RuntimeError)", rows["inline"]


def test_a_last_report_that_cannot_be_removed_is_one_line(built, tmp_path):
    """The removal of the last report as a run starts let any error but a
    missing file through: an INTERNALERROR traceback (found in review).
    (A folder in the results file's place: root may remove any file.)"""
    proj, _ = built
    (tmp_path / "r.json").mkdir()
    proc = pytest_in(proj, "--gpsimd-manifest", "ops.yaml", "-p", "no:cacheprovider",
                     f"--gpsimd-report={tmp_path / 'r.html'}")
    assert proc.returncode == 1 and "INTERNALERROR" not in proc.stdout + proc.stderr, \
        proc.stdout + proc.stderr
    assert f"gpsimd: cannot remove the last report {tmp_path / 'r.json'}: " in proc.stderr


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "soon"])
def test_a_time_limit_that_is_not_one_is_a_usage_error(tmp_path, value):
    """--gpsimd-timeout 0 ran every vector with the default 60 s (0 is
    false); inf, nan or -1 was taken as given, and every vector failed with
    an OverflowError or ValueError of the client's wait: the value is read
    by the emulator's own parser (``EMU_TIMEOUT``, ``--timeout``), where it
    is given."""
    proc = pytest_in(tmp_path, "-p", "no:cacheprovider", "--gpsimd-timeout", value)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert f"argument --gpsimd-timeout: {value}: must be > 0 and at most 86400 seconds" \
        in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
