"""The ninja fast path (``scons --experimental=ninja``, then ``ninja``):
the same graph gives the same bytes and results as the plain SCons path,
headers come from depfiles, build.ninja regenerates itself, the summary is
printed by `cat`, and an interrupted ninja build leaves nothing stale."""
import json
import os
import re
import signal
import shutil
import subprocess
import sys
import time

import pytest

from conftest import copy_built, copy_project, run_scons

NINJA = os.path.join(pytest.importorskip("ninja").BIN_DIR, "ninja")
#: ninja on the default build folder's build.ninja (each folder has its own)
NINJA_F = [NINJA, "-f", "build/build.ninja"]
RELU = "kernels/relu/relu.cpp"
GOOD = "t_out_acc[i] = t_in_acc[i] > 0.0f ? t_in_acc[i] : 0.0f;"
BROKEN = "t_out_acc[i] = t_in_acc[i];"


def ninja(proj, *args, check=True):
    proc = subprocess.run([*NINJA_F, *args], cwd=str(proj), capture_output=True, text=True,
                          timeout=900)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def digests_and_results(proj):
    """Digests of every artifact (the digests step, run by ninja) and the
    results files of every library."""
    ninja(proj, "build/host/digests.txt")
    digests = (proj / "build/host/digests.txt").read_text()
    results = {p.parent.name: p.read_text() for p in sorted((proj / "build/host").glob("*/test-results*.json"))}
    return digests, results


@pytest.fixture(scope="module")
def ninja_project(tmp_path_factory, built_project):
    proj = copy_project(tmp_path_factory.mktemp("ninja"))
    proc = run_scons(proj, "--experimental=ninja")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (proj / "build/build.ninja").exists() and not (proj / "build.ninja").exists()
    assert (proj / "build/.ninja/.ninja_log").exists() and not (proj / ".ninja").exists()
    assert "all libraries: 104 passed, 0 failed" in proc.stdout.splitlines(), proc.stdout
    # ninja ran on scons's stdout: its own lines, none erased by an escape
    # sequence (SCons's tool would write "\x1b[2K" even into this pipe)
    assert "\x1b" not in proc.stdout
    lines = proc.stdout.splitlines()
    assert lines[lines.index("Generating: build/build.ninja") + 1].startswith(
        "ninja -f build/build.ninja -j")
    assert "[1/" in proc.stdout
    # the report of this run, as it ran (the module's later tests run ninja
    # again in this project, in any order)
    shutil.copy(proj / "build/host/report.html", proj / "report.as-built.html")
    return proj


@pytest.fixture(scope="module")
def scons_project(built_project, tmp_path_factory):
    """This module's copy of the shared SCons build, its digests written
    (``scons -Q digests``)."""
    proj = copy_built(built_project[0], tmp_path_factory.mktemp("scons") / "p")
    proc = run_scons(proj, "-Q", "digests")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proj


def test_same_bytes_and_results_as_the_scons_path(ninja_project, scons_project):
    scons_proj = scons_project
    scons_digests = (scons_proj / "build/host/digests.txt").read_text()
    digests, results = digests_and_results(ninja_project)
    assert digests == scons_digests
    for lib, text in results.items():
        assert text == (scons_proj / "build/host" / lib / "test-results.json").read_text(), lib
    # the summary step writes the same report as the SCons path; that one
    # is of a null build, which ran no test: its libraries read "kept", not "current"
    from gpsimd_build import report
    assert run_scons(scons_proj, "-Q").returncode == 0
    scons_page = (scons_proj / "build/host/report.html").read_text()
    assert 'data-state="current"' not in scons_page and 'data-state="kept"' in scons_page
    as_run = scons_page.replace('data-state="kept"', 'data-state="current"').replace(
        report._STATES["kept"], report._STATES["current"])
    assert (ninja_project / "report.as-built.html").read_text() == as_run


def test_a_null_build_runs_only_the_summary_print(ninja_project):
    proc = ninja(ninja_project, "-d", "explain")
    dirty = re.findall(r"ninja explain: (\S+) is dirty", proc.stderr)
    assert set(dirty) <= {"build/host/.summary-printed"}, proc.stderr
    assert proc.stdout.splitlines()[-2:] == [
        "streams: 12 passed, 0 failed (not run in this build)",
        "all libraries: 104 passed, 0 failed"]
    assert "python" not in proc.stdout.lower()
    # no step falls back to calling SCons
    text = (ninja_project / "build/build.ninja").read_text()
    assert not re.search(r"^build [^\n]*: (TEMPLATE|SCONS)\b", text, re.M)


def test_results_rewritten_unchanged_leave_the_next_build_null(ninja_project):
    """A test run whose results are the same bytes as before (an edit that
    changes no result) reruns the summary step once; the build after is
    null again (the step's outputs are always rewritten, so ninja, which
    compares times, does not find the report older than the results)."""
    results = ninja_project / "build/host/relu/test-results.json"
    results.write_bytes(results.read_bytes())
    first = ninja(ninja_project, "-d", "explain")
    assert "build/host/test-summary.txt is dirty" in first.stderr, first.stderr
    again = ninja(ninja_project, "-d", "explain")
    dirty = re.findall(r"ninja explain: (\S+) is dirty", again.stderr)
    assert set(dirty) <= {"build/host/.summary-printed"}, again.stderr


def test_the_test_steps_share_a_server_that_ends_with_ninja(ninja_project, tmp_path):
    """The test steps of one ninja run hand their runs to one emulator
    server (gpsimd_emu.server), started by the first, gone when ninja
    ends; the results are the same bytes. With scons EMU_SERVER=0 (ninja's
    $GPSIMD_EMU_SERVER=0) none is started."""
    from test_emu_handoff import _servers
    results = sorted((ninja_project / "build/host").glob("*/test-results.json"))
    before = {p: p.read_bytes() for p in results}
    log = tmp_path / "handoff.log"
    env = dict(os.environ, GPSIMD_EMU_SERVER_LOG=str(log))
    for p in results:
        p.unlink()
    proc = subprocess.Popen(NINJA_F, cwd=str(ninja_project), env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    assert out.splitlines()[-1] == "all libraries: 104 passed, 0 failed"
    assert {p: p.read_bytes() for p in results} == before
    lines = log.read_text().splitlines()
    # (how many runs were served depends on the machine's speed)
    assert len(lines) == 8 and lines.count("here: no server yet; started one") == 1, lines
    deadline = time.monotonic() + 5
    while _servers(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _servers(proc.pid) == []
    log.unlink()
    for p in results:
        p.unlink()
    # (scons passes ninja its commands' environment, not ours: no log there)
    off = subprocess.Popen([sys.executable, "-m", "SCons", "-j2", "--experimental=ninja",
                            "EMU_SERVER=0"], cwd=str(ninja_project), text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen = set()
    while off.poll() is None:
        seen.update(_servers(None, cwd=str(ninja_project)))
        time.sleep(0.01)
    out = off.stdout.read()
    assert off.returncode == 0, out
    assert "all libraries: 104 passed, 0 failed" in out.splitlines()
    assert {p: p.read_bytes() for p in results} == before
    assert seen == set()


def _query(proj, target):
    """``ninja -t query TARGET``: (its inputs, its order-only inputs)."""
    lines = ninja(proj, "-t", "query", target).stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  input: "))
    inputs = lines[start + 1:lines.index("  outputs:")]
    return ({x.strip() for x in inputs if not x.strip().startswith("|")},
            {x.strip()[3:] for x in inputs if x.strip().startswith("|| ")})


def test_a_kernel_edit_prestarts_the_server_and_the_test_step_is_served(ninja_project,
                                                                          tmp_path):
    """The edit loop (``ninja relu`` after a kernel edit): the library's
    prestart step, which its test step needs order-only and whose inputs
    are the sources that test depends on, runs beside the compile and
    starts the ninja run's server loading the model; the one test step is
    then served, with the same results. Another library's edit leaves
    relu's prestart alone; a null build runs none."""
    prestart = "build/host/relu/.emu-prestart"
    for lib in ("relu", "spmd", "elementwise"):
        _, order_only = _query(ninja_project, f"build/host/{lib}/test-results.json")
        assert order_only == {f"build/host/{lib}/.emu-prestart"}, lib
    inputs, _ = _query(ninja_project, prestart)
    assert {RELU, "kernels/relu/shape.cpp", "kernels/relu/reference.py",
            "build/host/relu/testplan.json", "build/host/relu/wrapper.cpp",
            "runtime_model/src/tensor.cpp", "runtime_model/gpsimd_emu/leader.c",
            "runtime_model/gpsimd_emu/zygote.c", "runtime_model/gpsimd_emu/sandbox.c",
            "gpsimd-emulator-sources", "build/host/lsp/lsp_fll_load_cpu_single.cpp"} <= inputs
    # (the emulator's Python files, client included, once: a phony every test needs)
    query = ninja(ninja_project, "-t", "query", "gpsimd-emulator-sources").stdout
    emulator = {x.strip()[2:] for x in query.splitlines() if x.strip().startswith("| ")}
    assert {"runtime_model/gpsimd_emu/session.py", "runtime_model/gpsimd_device/plan.py",
            "runtime_model/gpsimd_emu/client/protocol.py"} <= emulator
    assert not any(p.startswith("runtime_model/gpsimd_") and p.endswith(".py") for p in inputs)
    assert not any(p.endswith((".o", ".so", ".a", ".json.d")) for p in inputs)
    assert not any("elementwise" in p or "spmd" in p for p in inputs)
    assert (ninja_project / prestart).read_bytes() == b""
    results = ninja_project / "build/host/relu/test-results.json"
    before = results.read_bytes()
    src = ninja_project / RELU
    good = src.read_text()
    other = ninja_project / "kernels/elementwise/elementwise.cpp"
    other_text = other.read_text()
    log = tmp_path / "handoff.log"
    env = dict(os.environ, GPSIMD_EMU_SERVER_LOG=str(log))

    def run(*args):
        proc = subprocess.run([*NINJA_F, "-d", "explain", *args], cwd=str(ninja_project), env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc
    try:
        src.write_text(good + "\nvolatile int gpsimd_test_edit = 1;\n")
        proc = run("relu")
        assert "relu: 10 passed, 0 failed" in proc.stdout
        assert f"output {prestart} older than most recent input {RELU}" in proc.stderr
        lines = log.read_text().splitlines()
        assert lines[0] == "prestart: started a server", lines
        assert len(lines) == 2 and lines[1].startswith("served pid="), lines
        log.unlink()
        other.write_text(other_text + "\n// another library's edit\n")
        steps = re.findall(r"^\[\d+/\d+\] (.*)$", run("relu").stdout, re.M)
        assert steps == ["Building build/host/relu/.verdict"] and not log.exists()
        proc = run("elementwise")
        assert "elementwise: 24 passed, 0 failed" in proc.stdout
        assert log.read_text().splitlines()[0] == "prestart: started a server"
        assert log.read_text().splitlines()[1].startswith("served pid=")
    finally:
        src.write_text(good)
        other.write_text(other_text)
    ninja(ninja_project, "relu")
    assert results.read_bytes() == before
    null = ninja(ninja_project, "-d", "explain", "relu")
    # (only the library's verdict)
    assert re.findall(r"^\[\d+/\d+\] (.*)$", null.stdout, re.M) == [
        "Building build/host/relu/.verdict"], null.stdout
    assert "is dirty" not in null.stderr, null.stderr
    ninja(ninja_project)                # (the summary, for the tests after this one)


def test_scons_options_reach_ninja_and_j_is_not_in_the_commands(ninja_project):
    """Another -j regenerates build.ninja without changing a command (the
    emulator's share of the CPUs is in ninja's environment, not in each
    command line); scons -n shows what ninja would do and builds nothing."""
    other = run_scons(ninja_project, "--experimental=ninja", "-j1")
    assert other.returncode == 0, other.stdout + other.stderr
    assert "ninja -f build/build.ninja -j1\n" in other.stdout
    assert re.findall(r"^\[\d+/\d+\] (.*)$", other.stdout, re.M) == [
        "Building build/host/.summary-printed"], other.stdout
    assert "GPSIMD_EMU_JOBS" not in (ninja_project / "build/build.ninja").read_text()
    (ninja_project / RELU).touch()
    dry = run_scons(ninja_project, "--experimental=ninja", "-n")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "ninja -f build/build.ninja -j2 -n\n" in dry.stdout
    assert "CXX build/host/relu/obj/kernels/relu/relu.o" in dry.stdout
    assert "CXX build/host/relu/obj/kernels/relu/relu.o" in ninja(ninja_project, "-n").stdout
    ninja(ninja_project)


@pytest.mark.slow
def test_kill_9_of_scons_stops_the_ninja_it_runs(tmp_path):
    """``kill -9`` of scons alone while its ninja builds: ninja gets
    SIGTERM and stops its commands; nothing of the build is left."""
    proj = copy_project(tmp_path / "proj")
    log = tmp_path / "scons.log"
    with open(log, "w") as out:
        scons = subprocess.Popen([sys.executable, "-m", "SCons", "-j2", "--experimental=ninja"],
                                 cwd=str(proj), stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and "[3/" not in log.read_text():
        assert scons.poll() is None, log.read_text()
        time.sleep(0.01)
    os.kill(scons.pid, signal.SIGKILL)
    scons.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = subprocess.run(["pgrep", "-s", str(scons.pid)], capture_output=True,
                              text=True).stdout.split()
        if not left:
            break
        time.sleep(0.05)
    assert not left, subprocess.run(["ps", "-o", "pid,args", "-s", str(scons.pid)],
                                    capture_output=True, text=True).stdout
    assert "ninja: build stopped: interrupted by user." in log.read_text()


def test_a_ninja_run_records_what_it_built_from_for_the_pytest_plugin(ninja_project):
    """The summary step writes the inputs record from ninja's logs, as
    scons does on its path: the emulator's program and each library are
    vouched for after a ninja run, a changed source (or a header, from
    ninja's deps log) is named until ninja has rebuilt from it."""
    def header():
        paths = [str(ninja_project / "site_scons"), str(ninja_project / "runtime_model")]
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "gpsimd_pytest",
                               "--gpsimd-manifest", "ops.yaml", "--collect-only"],
                              cwd=str(ninja_project), capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, PYTHONPATH=os.pathsep.join(paths)))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return [line for line in proc.stdout.splitlines() if line.startswith("gpsimd:")]
    rel = "build/host/emu/gpsimd-zygote"
    record = json.loads((ninja_project / "build/host/inputs.json").read_text())
    libraries = {p.parent.name for p in (ninja_project / "build/host").glob("*/testplan.json")}
    assert len(libraries) == 8 and set(record["libraries"]) == {":zygote", *libraries}
    assert "runtime_model/include/torch/detail/tensor.h" in record["libraries"]["relu"]["files"]
    assert header() == [f"gpsimd: the vectors run in {rel}"]
    leader = "runtime_model/gpsimd_emu/leader.c"
    text = (ninja_project / leader).read_text()
    (ninja_project / leader).touch()            # (the same bytes: still current)
    assert header() == [f"gpsimd: the vectors run in {rel}"]
    (ninja_project / leader).write_text(text + "/* edited */\n")
    assert header() == [f"gpsimd: the vectors cannot run: {rel} may be out of date "
                        "(runtime_model/gpsimd_emu/leader.c changed since the last build): "
                        f"build it first: `scons {rel}`"]
    ninja(ninja_project)
    assert header() == [f"gpsimd: the vectors run in {rel}"]
    after = json.loads((ninja_project / "build/host/inputs.json").read_text())
    assert after["files"][leader][1] == (ninja_project / leader).stat().st_mtime_ns
    (ninja_project / leader).write_text(text)    # (the module's project as it was)
    ninja(ninja_project)


def test_headers_come_from_depfiles(ninja_project):
    deps = ninja(ninja_project, "-t", "deps", "build/host/relu/obj/kernels/relu/relu.o").stdout
    assert "(VALID)" in deps and "runtime_model/include/torch/detail/tensor.h" in deps
    # the inputs record reads ninja's deps log itself, as ninja does
    from gpsimd_build import ninjarecord
    read = ninjarecord.read_deps_log(str(ninja_project / "build/.ninja/.ninja_deps"))
    assert read["build/host/relu/obj/kernels/relu/relu.o"] == \
        [line.strip() for line in deps.splitlines()[1:] if line.strip()]
    (ninja_project / "runtime_model/include/torch/detail/ops.h").touch()
    dry = ninja(ninja_project, "-n").stdout
    assert "build/host/relu/obj/kernels/relu/relu.o" in dry
    ninja(ninja_project)


def test_build_ninja_regenerates_when_the_manifest_changes(ninja_project):
    manifest = ninja_project / "ops.yaml"
    text = manifest.read_text()
    old = "shape: [77], random: {distribution: uniform, low: -1, high: 1}}"
    assert old in text
    manifest.write_text(text.replace(old, old.replace("[77]", "[78]"), 2))   # grad and x
    proc = ninja(ninja_project)
    assert "Regenerating build/build.ninja" in proc.stdout + proc.stderr
    assert "PASS relu::relu_backward[n77]" in proc.stdout
    manifest.write_text(text)
    ninja(ninja_project)


def test_scons_after_ninja_regenerated_build_ninja_does_not_wait_for_itself(ninja_project):
    """Once ninja has regenerated build.ninja (its log records it), a
    manifest edit and ``scons --experimental=ninja``: scons writes
    build.ninja and runs ninja, which finds it older than the manifest in
    its log and regenerates it with a scons of its own; that scons must
    not wait for the build folder's lock its grandparent holds (it hung
    there for ever)."""
    manifest = ninja_project / "ops.yaml"
    text = manifest.read_text()
    try:
        manifest.write_text(text + "\n# first edit\n")
        assert "Regenerating build/build.ninja" in ninja(ninja_project).stdout
        manifest.write_text(text + "\n# second edit\n")
        proc = run_scons(ninja_project, "--experimental=ninja", "-Q", timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "waiting for the build folder" not in proc.stderr
        assert "all libraries: 104 passed, 0 failed" in proc.stdout.splitlines()
    finally:
        manifest.write_text(text)
    ninja(ninja_project)


def test_a_killed_ninja_build_then_a_revert_equals_a_clean_build(ninja_project, scons_project):
    """Issue 10's guarantee on the ninja path: BRK, kill -9 of the whole group
    while relu links, revert: the next ninja build equals a clean build."""
    src = ninja_project / RELU
    good = src.read_text()
    src.write_text(good.replace(GOOD, BROKEN, 1))
    log = ninja_project / "ninja.log"
    with open(log, "w") as out:
        child = subprocess.Popen([*NINJA_F, "-j2"], cwd=str(ninja_project), stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and child.poll() is None:
        if re.search(r"relu/relu\.so", log.read_text()):
            break
        time.sleep(0.01)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    src.write_text(good)
    proc = ninja(ninja_project)
    assert "relu: 10 passed, 0 failed" in proc.stdout
    digests, _ = digests_and_results(ninja_project)
    assert digests == (scons_project / "build/host/digests.txt").read_text()


def test_a_ninja_run_stopped_while_it_regenerates_build_ninja_leaves_it(small_ninja):
    """A manifest edit, then `kill -TERM` of the ninja run while scons
    writes build.ninja again: ninja waits for that step, then removes
    what it changed, the new build.ninja, as the output of a stopped step;
    every later `ninja -f build/build.ninja` stopped at once (`loading
    'build/build.ninja': No such file or directory`) until `scons
    --experimental=ninja` was run by hand. The regeneration gives it back
    once that ninja run has ended (gpsimd_build.ninjakeep)."""
    manifest = small_ninja / "small.yaml"
    manifest.write_text(manifest.read_text() + "\n# an edit\n")
    child = subprocess.Popen([*NINJA_F, "-j2"], cwd=str(small_ninja), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    for line in child.stdout:
        seen.append(line)
        if line.startswith("Generating: build/build.ninja"):
            os.kill(child.pid, signal.SIGTERM)        # (ninja alone; it waits for scons)
    child.wait(timeout=300)
    assert "interrupted by user" in "".join(seen), "".join(seen)
    ninja_file = small_ninja / "build/build.ninja"
    deadline = time.monotonic() + 30         # (given back as that ninja ends)
    while not ninja_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ninja_file.exists()
    proc = ninja(small_ninja)
    assert proc.stdout.splitlines()[-1] == "all libraries: 26 passed, 0 failed", proc.stdout
    assert ninja_file.stat().st_mtime_ns >= manifest.stat().st_mtime_ns


def _small(proj):
    import yaml
    doc = yaml.safe_load((proj / "ops.yaml").read_text())
    doc["libraries"] = [lib for lib in doc["libraries"] if lib["name"] in ("relu", "spmd")]
    (proj / "small.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return "MANIFEST=small.yaml"


@pytest.fixture(scope="module")
def _small_as_built(tmp_path_factory):
    """The project cut to relu and spmd (:func:`_small`), built on the ninja
    path once for the module: ``(its folder, a copy of it as built)``."""
    top = tmp_path_factory.mktemp("small")
    proj = copy_project(top / "p")
    proc = run_scons(proj, "--experimental=ninja", _small(proj))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()      # (the stack reports' edges may come after it)
    end = len(lines) - 1 - lines[::-1].index("all libraries: 26 passed, 0 failed")
    assert lines[end - 2:end] == ["relu: 10 passed, 0 failed", "spmd: 16 passed, 0 failed"], \
        proc.stdout
    shutil.copytree(proj, top / "as-built", symlinks=True)
    return proj, top / "as-built"


@pytest.fixture
def small_ninja(_small_as_built):
    """The small ninja build, this test's own: restored as built (files,
    times, ninja's logs) in the folder it was built in, since build.ninja
    holds absolute paths; the module's tests run one after another."""
    proj, as_built = _small_as_built
    shutil.rmtree(proj)
    shutil.copytree(as_built, proj, symlinks=True)
    return proj


@pytest.mark.parametrize("keep_going", [False, True], ids=["stop", "k0"])
def test_the_summary_is_true_after_pass_fail_fix(small_ninja, keep_going):
    """Issue 25 case 1: a failing vector on the ninja path, with or without
    -k: the test step records the failure and exits 0, the summary step
    still runs, prints the summary, writes test-summary.txt and the report,
    and fails the build; a null build says which results it did not run."""
    proj = small_ninja
    args = ["-k", "0"] if keep_going else []
    summary = proj / "build/host/test-summary.txt"
    report = proj / "build/host/report.html"
    src = proj / RELU
    good = src.read_text()
    src.write_text(good.replace(GOOD, BROKEN, 1))
    failing = ["relu: 4 passed, 6 failed", "spmd: 16 passed, 0 failed (not run in this build)",
               "all libraries: 20 passed, 6 failed"]
    # a run that stops after the test step, before the summary step (as an
    # interrupt would): it leaves no summary or report of the old results
    ninja(proj, "build/host/relu/test-results.json")
    assert not summary.exists() and not report.exists()
    report.write_text("")               # (for the times compared below)
    for _ in range(2):          # (a failing library runs again, as on the SCons path)
        before = report.stat().st_mtime_ns
        proc = ninja(proj, *args, check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        lines = proc.stdout.splitlines()
        end = lines.index("all libraries: 20 passed, 6 failed")
        assert lines[end - 2:end + 1] == failing, proc.stdout
        assert summary.read_text().splitlines() == failing
        assert report.stat().st_mtime_ns > before
        assert 'data-library="relu" data-state="current"' in report.read_text()
        # (spmd was not run by this build: its results, still current, say so)
        assert 'data-library="spmd" data-state="kept"' in report.read_text()
        assert "not run in this build: its results are still current" in report.read_text()
        assert (proj / "build/host/relu/test-results.failed.json").exists()
        assert not (proj / "build/host/relu/test-results.json").exists()
    src.write_text(good)
    proc = ninja(proj, *args)
    assert proc.stdout.splitlines()[-3:] == [
        "relu: 10 passed, 0 failed", "spmd: 16 passed, 0 failed (not run in this build)",
        "all libraries: 26 passed, 0 failed"], proc.stdout
    proc = ninja(proj, *args)
    assert proc.stdout.splitlines()[-3:] == [
        "relu: 10 passed, 0 failed (not run in this build)",
        "spmd: 16 passed, 0 failed (not run in this build)",
        "all libraries: 26 passed, 0 failed"], proc.stdout
    # the file holds what the last summary step wrote
    assert summary.read_text().splitlines()[0] == "relu: 10 passed, 0 failed"


@pytest.mark.parametrize("keep_going", [False, True], ids=["stop", "k0"])
def test_a_failed_compile_prints_the_true_summary_as_the_scons_path_does(small_ninja, tmp_path,
                                                                        keep_going):
    """Issue 25 case 1, a step before the tests fails: the compile's rule
    runs the summary step as it fails, so the run prints the summary and
    leaves test-summary.txt true (the library it did not test again is
    stale), with the SCons path's text. Under -k a test step that ends
    after the failure writes them again, so that they hold its results
    when ninja stops."""
    proj = small_ninja
    summary = proj / "build/host/test-summary.txt"
    src = proj / RELU
    good = src.read_text()
    src.write_text(good.replace(GOOD, GOOD.replace("> 0.0f", "> 0.0f +"), 1))
    expected = ["relu: stale", "spmd: 16 passed, 0 failed (not run in this build)",
                "all libraries: 16 passed, 0 failed (1 library not counted)"]
    if keep_going:      # (spmd's test step runs again, after relu's compile failed)
        spmd = proj / "kernels/spmd/spmd.cpp"
        spmd.write_text(spmd.read_text() + "// edited\n")
    proc = ninja(proj, *(["-k", "0"] if keep_going else []), check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "error: expected primary-expression" in proc.stdout
    lines = proc.stdout.splitlines()
    at = lines.index("relu: stale")
    if keep_going:      # (spmd: stale, or passed when its test ran before relu's compile)
        assert lines[at + 1].startswith("spmd: ") and \
            lines[at + 2].startswith("all libraries: "), proc.stdout
        assert "spmd: 16 passed, 0 failed" in lines, proc.stdout
        assert summary.read_text().splitlines() == [
            "relu: stale", "spmd: 16 passed, 0 failed",
            "all libraries: 16 passed, 0 failed (1 library not counted)"]
        assert 'data-library="spmd" data-state="current"' in \
            (proj / "build/host/report.html").read_text()
    else:
        assert lines[at:at + 3] == expected, proc.stdout
        assert summary.read_text().splitlines() == expected
        assert 'data-library="relu" data-state="stale"' in \
            (proj / "build/host/report.html").read_text()
        # the SCons path's summary of the same edit
        other = copy_project(tmp_path / "s")
        assert run_scons(other, _small(other)).returncode == 0
        (other / RELU).write_text(src.read_text())
        proc = run_scons(other, _small(other))
        assert proc.returncode != 0
        assert proc.stdout.splitlines()[-3:] == expected, proc.stdout
    src.write_text(good)
    proc = ninja(proj)
    assert proc.stdout.splitlines()[-3:-1] == [
        "relu: 10 passed, 0 failed", "spmd: 16 passed, 0 failed (not run in this build)"], \
        proc.stdout


def test_one_library_s_targets_fail_when_its_vectors_fail(small_ninja):
    """``ninja relu``, ``ninja test-relu`` and ``ninja test`` do not reach
    the summary step: the library's verdict edge fails them when a vector
    failed (its failure branch prints and writes the summary), and passes
    them once the kernel is fixed."""
    proj = small_ninja
    src = proj / RELU
    good = src.read_text()
    src.write_text(good.replace(GOOD, BROKEN, 1))
    failing = ["relu: 4 passed, 6 failed", "spmd: 16 passed, 0 failed (not run in this build)",
               "all libraries: 20 passed, 6 failed"]
    for target in ("relu", "test-relu", "test"):
        proc = ninja(proj, target, check=False)
        assert proc.returncode == 1, (target, proc.stdout + proc.stderr)
        assert "gpsimd: relu: a vector failed, or its test run ended without results" \
            in proc.stderr + proc.stdout
        assert proc.stdout.splitlines()[-4:-1] == failing, (target, proc.stdout)
        assert (proj / "build/host/test-summary.txt").read_text().splitlines() == failing
    src.write_text(good)
    for target in ("relu", "test-relu", "test"):
        proc = ninja(proj, target)
        assert "FAIL " not in proc.stdout, proc.stdout


def test_a_pythonpath_that_is_already_the_build_s_reaches_ninja_s_commands(tmp_path):
    """SCons's ninja tool writes into each command only the variables whose
    value differs from the scons process's own; with PYTHONPATH already the
    build's (a checkout used without `pip install`), the commands get it
    from ninja's environment, so ninja must run with this process's. (The
    summary step runs under `python -S`: without it, it cannot import.)"""
    proj = copy_project(tmp_path / "p")
    roots = os.pathsep.join([str(proj / "runtime_model"), str(proj / "site_scons")])
    proc = run_scons(proj, "--experimental=ninja", _small(proj), env={"PYTHONPATH": roots})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all libraries: 26 passed, 0 failed" in proc.stdout.splitlines(), proc.stdout
    assert "export PYTHONPATH" not in (proj / "build/build.ninja").read_text()


def test_a_test_run_without_results_is_recorded_and_fails_the_summary(small_ninja):
    """A test step whose run ends without results (here: a folder where its
    results go cannot be removed, exit status 2) records it and exits 0;
    the summary names it and fails the build."""
    proj = small_ninja
    (proj / "build/host/relu/test-results.json").unlink()
    (proj / "build/host/relu/test-results.failed.json").mkdir()
    proc = ninja(proj, "-k", "0", check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (proj / "build/host/relu/test-results.error.txt").read_text() == "exit status 2\n"
    lines = proc.stdout.splitlines()
    end = lines.index("all libraries: 16 passed, 0 failed (1 library not counted)")
    assert lines[end - 2:end + 1] == [
        "relu: the test run failed without results (see above)",
        "spmd: 16 passed, 0 failed (not run in this build)",
        "all libraries: 16 passed, 0 failed (1 library not counted)"], proc.stdout


@pytest.mark.campaign
def test_each_build_folder_has_its_own_ninja_file_and_state(tmp_path):
    """Issue 25 case 2: the ninja path's files live in BUILD_DIR; two build
    folders are independent, and after `scons --experimental=ninja`, ninja
    from another terminal, with another -j and without a TTY, runs nothing
    but the summary's two edges."""
    proj = copy_project(tmp_path / "p")
    small = _small(proj)
    for b in ("bN1", "bN2"):
        proc = run_scons(proj, "--experimental=ninja", small, f"BUILD_DIR={b}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"ninja -f {b}/build.ninja -j2\n" in proc.stdout
    assert not (proj / "build.ninja").exists() and not (proj / ".ninja").exists()
    one = (proj / "bN1/build.ninja").read_text()
    assert "bN1/" in one and "bN2/" not in one
    assert "builddir = bN1/.ninja" in one
    for b in ("bN1", "bN2"):
        assert (proj / b / ".ninja/.ninja_log").exists()
        for args in ([], ["-j1"]):
            proc = subprocess.run([NINJA, "-f", f"{b}/build.ninja", "-d", "explain", *args],
                                  cwd=str(proj), capture_output=True, text=True, timeout=300,
                                  stdin=subprocess.DEVNULL,
                                  env={"PATH": os.environ["PATH"]})
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert re.findall(r"^\[\d+/\d+\] (.*)$", proc.stdout, re.M) == [
                f"Building {b}/host/.summary-printed"], proc.stdout + proc.stderr
            assert proc.stdout.splitlines()[-1] == "all libraries: 26 passed, 0 failed"


def test_an_edit_of_the_emulators_shape_code_shapes_the_plan_again(small_ninja):
    """As on the SCons path (test_scons_build.py): the shape registration,
    its check and the shaped plan depend on the emulator's files, so after
    an edit of ``gpsimd_emu.shapes`` that a clean build fails on, ninja
    fails too, never a PASS from the plan the old code shaped."""
    proj = small_ninja
    path = proj / "runtime_model/gpsimd_emu/shapes.py"
    text = path.read_text()
    line = "    given = vector.output\n"
    assert text.count(line) == 1
    path.write_text(text.replace(line, line + "    return 'the edited shape code'\n"))
    proc = ninja(proj, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for output in ("build/host/relu/shapes/registration.json",
                   "build/host/relu/testplan.shaped.json"):
        assert f"Building {output}" in proc.stdout, proc.stdout
    lines = proc.stdout.splitlines()
    end = lines.index("all libraries: 0 passed, 26 failed")
    assert lines[end - 2:end] == ["relu: 0 passed, 10 failed", "spmd: 0 passed, 16 failed"], \
        proc.stdout


def test_an_edit_of_the_build_steps_code_makes_their_outputs_again(small_ninja):
    """As on the SCons path (test_scons_build.py): the build's own steps
    depend on their code (one phony), so after an edit of the registration
    check that a clean build fails on, ninja runs the check again and
    fails."""
    proj = small_ninja
    path = proj / "site_scons/gpsimd_build/regcheck.py"
    text = path.read_text()
    line = "    out: List[str] = []\n"
    assert text.count(line) == 1
    path.write_text(text.replace(line, '    out: List[str] = ["the edited check"]\n'))
    proc = ninja(proj, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the edited check" in proc.stdout.splitlines(), proc.stdout
    assert "Building build/host/relu/shapes/registration-check.txt" in proc.stdout, proc.stdout


#: relu_forward's reference, made to wait, while the fifo ``hold-relu``
#: exists in the project, for a byte from it (the test's event: a test run
#: is inside the reference, its objects loaded).
_HOLD = '''def relu_forward(x):
    import os
    hold = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "hold-relu")
    if os.path.exists(hold):
        with open(hold, "rb") as f:
            os.unlink(hold)
            f.read(1)
'''


def _writer(fifo, proc, timeout=300):
    """Open ``fifo`` for writing: it returns once a reader opened it (the
    held reference of a run ``proc`` started); fails, ending ``proc``, when
    none came."""
    import threading
    got = []
    opener = threading.Thread(target=lambda: got.append(os.open(fifo, os.O_WRONLY)))
    opener.start()
    opener.join(timeout)
    if not got:
        proc.kill()
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))    # (frees the thread)
        opener.join()
        pytest.fail("no test run reached the held reference: " + proc.communicate()[0])
    return got[0]


def _held_run(proj, program=NINJA, retest=("relu",)):
    """``program -f build/build.ninja`` started in ``proj`` with relu's
    reference made to wait (``_HOLD``) and the results of ``retest`` (relu
    among them) removed, once its relu test is inside the reference:
    ``(process, the fifo's write end)`` (a byte written to it lets the
    reference return)."""
    reference = proj / "kernels/relu/reference.py"
    reference.write_text(reference.read_text().replace("def relu_forward(x):\n", _HOLD, 1))
    assert "Regenerating build/build.ninja" in ninja(proj).stdout
    for lib in retest:
        (proj / f"build/host/{lib}/test-results.json").unlink()     # (RETEST)
    fifo = proj / "hold-relu"
    os.mkfifo(fifo)
    proc = subprocess.Popen([str(program), "-f", "build/build.ninja"], cwd=str(proj),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, _writer(fifo, proc)


def _passes(proc):
    """``_held_run``'s run, once its reference returned, passes everything."""
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert out.splitlines()[-1] == "all libraries: 26 passed, 0 failed"


def test_a_ninja_run_holds_its_build_folder_against_scons_and_another_ninja(small_ninja):
    """Two terminals: ``ninja`` (its relu test running on the good
    objects), an edit that breaks relu, ``scons relu``. scons built and
    tested the broken kernel and wrote its failure; the ninja run, which
    took no lock, then wrote its pass over it: ``all libraries: 26
    passed``, exit status 0, in test-summary.txt and the report, for a
    kernel and objects that fail. A ninja run now holds the build
    folder's lock until it ends: scons waits for it (``BUILD_LOCK=fail``:
    stops, naming it), a second ninja stops at once, naming it, before it
    writes anything; then scons builds the edit and every summary says
    that relu fails."""
    proj = small_ninja
    first, held = _held_run(proj)
    waiter = None
    try:
        src = proj / RELU
        src.write_text(src.read_text().replace(GOOD, BROKEN, 1))
        holder = (rf"process {first.pid} \(ninja -f build/build\.ninja, "
                  rf"since \d\d:\d\d:\d\d\)")
        refused = run_scons(proj, "MANIFEST=small.yaml", "relu", "BUILD_LOCK=fail")
        assert refused.returncode == 2
        assert re.fullmatch(rf"scons: the build folder build is in use by {holder} "
                            r"\(BUILD_LOCK=wait waits for it\)",
                            refused.stderr.strip().splitlines()[-1]), refused.stderr
        obj = proj / "build/host/relu/obj/kernels/relu/relu.o"
        before = obj.stat().st_mtime_ns
        second = subprocess.run(NINJA_F, cwd=str(proj), capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == 1
        assert re.search(rf"^gpsimd: the build folder build is in use by {holder}: this ninja "
                         r"run stops before it writes anything; run it again once that build "
                         r"has ended$", second.stdout, re.M), second.stdout
        assert obj.stat().st_mtime_ns == before
        waiter = subprocess.Popen([sys.executable, "-m", "SCons", "-j2", "MANIFEST=small.yaml",
                                   "relu"], cwd=str(proj), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        line = waiter.stderr.readline()
        assert re.fullmatch(rf"scons: waiting for the build folder build, in use by {holder}\n",
                            line), line
    finally:
        os.write(held, b"x")
        os.close(held)
    _passes(first)
    out, err = waiter.communicate(timeout=600)
    assert waiter.returncode == 2, out + err
    assert out.splitlines()[-2:] == ["relu: 4 passed, 6 failed", "total: 4 passed, 6 failed"]
    last = ninja(proj, check=False)
    assert last.returncode == 1
    # (spmd ran again: scons rewrote its outputs)
    summary = (proj / "build/host/test-summary.txt").read_text().splitlines()
    assert summary[0] == "relu: 4 passed, 6 failed" and summary[-1] == (
        "all libraries: 20 passed, 6 failed"), summary
    assert summary[-1] in last.stdout.splitlines()


def test_a_second_ninja_that_stops_leaves_the_first_s_summary_true(small_ninja):
    """Two ninja runs at once: the first tests spmd, then holds relu's test;
    the second stops at its first step (the folder is in use). Its edge
    that begins every run used to mark the run's start for both, so the
    first's summary said that spmd, which it had just tested, was "not run
    in this build". Each run's start is now its own."""
    proj = small_ninja
    first, held = _held_run(proj, retest=("relu", "spmd"))
    try:
        spmd = proj / "build/host/spmd/test-results.json"
        deadline = time.monotonic() + 300
        while not spmd.exists():        # (its test runs beside relu's held one)
            assert time.monotonic() < deadline and first.poll() is None, "no spmd results"
            time.sleep(0.05)
        second = subprocess.run(NINJA_F, cwd=str(proj), capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == 1
        assert "gpsimd: the build folder build is in use by process" in second.stdout, \
            second.stdout
    finally:
        os.write(held, b"x")
        os.close(held)
    out, _ = first.communicate(timeout=600)
    assert first.returncode == 0, out
    assert out.splitlines()[-3:] == ["relu: 10 passed, 0 failed", "spmd: 16 passed, 0 failed",
                                     "all libraries: 26 passed, 0 failed"], out
    assert (proj / "build/host/test-summary.txt").read_text().splitlines() == \
        out.splitlines()[-3:]


def test_a_ninja_of_another_name_holds_its_build_folder(small_ninja, tmp_path):
    """The lock is held for the program that runs the steps, whatever it is
    called (a distribution's ``ninja-build``, ``samu``, a copy): a ninja
    run by another name used to take no lock, so an older run could write
    its PASS over a newer scons's FAIL. While its relu test is held in the
    reference, the lock file names it and scons stops, naming it."""
    proj = small_ninja
    other = tmp_path / "my-builder"
    shutil.copy(NINJA, other)
    first, held = _held_run(proj, other)
    try:
        holder = (rf"process {first.pid} \(my-builder -f build/build\.ninja, "
                  rf"since \d\d:\d\d:\d\d\)")
        assert re.fullmatch(holder, (proj / "build/.gpsimd-lock").read_text())
        refused = run_scons(proj, "MANIFEST=small.yaml", "relu", "BUILD_LOCK=fail")
        assert refused.returncode == 2
        assert re.fullmatch(rf"scons: the build folder build is in use by {holder} "
                            r"\(BUILD_LOCK=wait waits for it\)",
                            refused.stderr.strip().splitlines()[-1]), refused.stderr
    finally:
        os.write(held, b"x")
        os.close(held)
    _passes(first)


def test_a_ninja_run_stops_while_another_build_holds_its_folder(small_ninja):
    """With the build folder held by another build, a null ninja run (the
    summary printed) goes on; one with work stops at its first step,
    naming the holder, and leaves the results, the summary and the report
    as they were (a test step removes those as it starts). Once the folder
    is free, ninja builds, and lets it go when it ends."""
    import fcntl
    import threading
    proj = small_ninja
    lock = proj / "build/.gpsimd-lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.write(fd, b"process 4242 (a test, since 12:00:00)")
    host = proj / "build/host"
    kept = {p: p.read_bytes() for p in (host / "test-summary.txt", host / "report.html")}
    try:
        null = ninja(proj)
        assert null.stdout.splitlines()[-1] == "all libraries: 26 passed, 0 failed"
        (host / "relu/test-results.json").unlink()
        proc = ninja(proj, check=False)
    finally:
        os.close(fd)
    assert proc.returncode == 1
    assert ("gpsimd: the build folder build is in use by process 4242 (a test, since "
            "12:00:00): this ninja run stops before it writes anything; run it again once "
            "that build has ended") in proc.stdout.splitlines(), proc.stdout
    assert not (host / "relu/test-results.json").exists()
    assert {p: p.read_bytes() for p in kept} == kept
    proc = ninja(proj)
    assert proc.stdout.splitlines()[-1] == "all libraries: 26 passed, 0 failed"
    # (the process that held it for that run ends with it)
    fd = os.open(lock, os.O_RDWR)
    taken = threading.Thread(target=fcntl.flock, args=(fd, fcntl.LOCK_EX), daemon=True)
    taken.start()
    taken.join(30)
    os.close(fd)
    assert not taken.is_alive()


def test_a_ninja_run_refuses_a_build_folder_writable_by_others(small_ninja, tmp_path):
    """As a scons build does, a ninja run with work checks the build folder
    whole before its first step writes (``gpsimd_build.buildfolder``): a
    folder in it that every user may write (made under ``umask 0``, say)
    stops the run, and the compiler never writes its depfile through a
    link another user could have planted there."""
    proj = small_ninja
    relu = proj / "build/host/relu"
    depfile = next(m.group(1) for m in re.finditer(r"depfile = (\S+)", (proj / "build/build.ninja")
                                                  .read_text()) if "/relu/" in m.group(1))
    victim = tmp_path / "victim"
    victim.write_bytes(b"kept\n")
    os.symlink(victim, proj / depfile)
    relu.chmod(0o777)
    source = proj / RELU
    source.write_text(source.read_text().replace(GOOD, GOOD + " "))
    proc = ninja(proj, check=False)
    assert proc.returncode == 1, proc.stdout
    assert (f"gpsimd: a folder in the build folder, {os.path.realpath(relu)} is writable by every "
            f"user (mode 777)") in proc.stdout, proc.stdout
    assert victim.read_bytes() == b"kept\n"
    relu.chmod(0o755)
    os.unlink(proj / depfile)
    assert ninja(proj).stdout.splitlines()[-1] == "all libraries: 26 passed, 0 failed"
