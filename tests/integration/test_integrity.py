"""A build is never wrong: interrupted, concurrent and stopped builds leave
nothing stale (issue 10, the build's side).

Every case compares with a clean build of the same sources: the digests of
every artifact (``scons digests``) and every library's results. The project
is the shipped ``relu`` (single-core) and ``spmd`` (multicore) libraries.
``GPSIMD_KILL_ROUNDS=N`` runs N rounds of the randomized kill test (CI: 4).
"""
import fcntl
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

from conftest import PROGRESS, ROOT, copy_built, copy_project, run_scons

RELU = "kernels/relu/relu.cpp"
GOOD_LINE = "t_out_acc[i] = t_in_acc[i] > 0.0f ? t_in_acc[i] : 0.0f;"
#: BRK: relu returns its input (5 of relu's 9 vectors fail: those with negative inputs)
BROKEN_LINE = "t_out_acc[i] = t_in_acc[i];"
SPMD = "kernels/spmd/spmd.cpp"
LIBS = ("relu", "spmd")


def small_manifest():
    doc = yaml.safe_load((ROOT / "ops.yaml").read_text())
    doc["libraries"] = [lib for lib in doc["libraries"] if lib["name"] in LIBS]
    return yaml.safe_dump(doc, sort_keys=False)


def make_project(path):
    proj = copy_project(path)
    (proj / "ops.yaml").write_text(small_manifest())
    return proj


def set_state(proj, state):
    """Source states: 'good' (shipped), 'broken' (BRK), 'comment' (good, with
    a comment in spmd.cpp: a source change that changes no object's code)."""
    relu = (proj / RELU).read_text().replace(BROKEN_LINE, GOOD_LINE)
    if state == "broken":
        relu = relu.replace(GOOD_LINE, BROKEN_LINE, 1)
    (proj / RELU).write_text(relu)
    spmd = (ROOT / SPMD).read_text()
    if state == "comment":
        spmd += "\n// a comment\n"
    (proj / SPMD).write_text(spmd)


def outcome(proj):
    """(digest lines of every artifact, {lib: (passed results, failed results)})
    after `scons digests` (which builds what is missing first)."""
    proc = run_scons(proj, "-Q", "-k", "digests")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return (proj / "build/host/digests.txt").read_text().splitlines(), results_of(proj)


def results_of(proj):
    """{lib: (passed results, failed results)}, None for a file not there."""
    results = {}
    for lib in LIBS:
        d = proj / "build/host" / lib
        results[lib] = tuple(json.loads(p.read_text()) if p.exists() else None
                             for p in (d / "test-results.json", d / "test-results.failed.json"))
    return results


def build(proj, *args):
    """`scons -k`: every library is built and tested whatever fails, so that
    two builds of the same sources can be compared library by library."""
    return run_scons(proj, "-Q", "-k", *args)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The outcome of a clean build of each source state, computed once."""
    cache = {}

    def get(state):
        if state not in cache:
            proj = make_project(tmp_path_factory.mktemp(f"clean-{state}"))
            set_state(proj, state)
            build(proj)
            cache[state] = outcome(proj)
        return cache[state]
    return get


@pytest.fixture(scope="module")
def built_once(tmp_path_factory):
    """A project built completely in the good state, once per module."""
    proj = make_project(tmp_path_factory.mktemp("built") / "p")
    proc = build(proj)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proj


@pytest.fixture
def built(built_once, tmp_path):
    """The test's own copy of the built project (it changes it)."""
    return copy_built(built_once, tmp_path / "p")


def interrupt(proj, sig, pattern=None, delay=None, command=None):
    """Start `scons -j2` (or ``command``) in its own process group and send
    ``sig`` to the whole group when its output shows ``pattern`` (or after
    ``delay`` s)."""
    log = proj / "interrupted.log"
    with open(log, "w") as out:
        child = subprocess.Popen(command or [sys.executable, "-m", "SCons", "-j2"],
                                 cwd=str(proj), stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    deadline = time.monotonic() + (delay if delay is not None else 120)
    while time.monotonic() < deadline and child.poll() is None:
        if pattern and re.search(pattern, log.read_text(), re.M):
            break
        time.sleep(0.02)
    try:
        os.killpg(child.pid, sig)
    except ProcessLookupError:
        pass
    child.wait(timeout=60)
    return log.read_text()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM],
                         ids=["KILL", "INT", "TERM"])
@pytest.mark.parametrize("start,edit", [("good", "broken"), ("broken", "good")],
                         ids=["revert-to-good", "restore-broken"])
@pytest.mark.campaign
def test_interrupted_link_then_revert_equals_a_clean_build(built, clean, sig, start, edit):
    """Issue 10 cases 1 and 2: BRK (or its revert), killed while relu links,
    then the edit undone: the next build equals a clean build of the sources
    it sees (no stale object, no empty .so taken as up to date)."""
    if start != "good":
        set_state(built, start)
        assert build(built).returncode != 0   # relu fails its vectors
    set_state(built, edit)
    log = interrupt(built, sig, r"^" + PROGRESS + r"LINK +build/host/relu/relu\.so$")
    assert "LINK     build/host/relu/relu.so" in log, log
    set_state(built, start)
    proc = build(built)
    assert (proc.returncode == 0) == (start == "good"), proc.stdout + proc.stderr
    assert outcome(built) == clean(start)
    # (a null build: passing results are kept, failing ones run again)
    relu = ("relu: 10 passed, 0 failed (not run in this build)" if start == "good"
            else "relu: 4 passed, 6 failed")
    assert relu in build(built).stdout.splitlines()


def test_the_summary_lists_what_this_build_did_not_run_as_stale(built):
    """Issue 10 case 3: relu broken and spmd changed; `scons -j1` stops at
    relu; spmd's old numbers are not shown, nor counted."""
    set_state(built, "broken")
    (built / SPMD).write_text((built / SPMD).read_text() + "\nstatic int unused_x = 0;\n")
    proc = run_scons(built, "-Q", "-j1")
    assert proc.returncode != 0
    tail = proc.stdout.splitlines()[-3:]
    assert tail == ["relu: 4 passed, 6 failed",
                    "spmd: stale",
                    "all libraries: 4 passed, 6 failed (1 library not counted)"], proc.stdout
    # a null build after a complete one prints the current summary again,
    # saying that this build did not run them
    set_state(built, "good")
    assert build(built).returncode == 0
    proc = build(built)
    assert proc.stdout.splitlines()[-3:] == [
        "relu: 10 passed, 0 failed (not run in this build)",
        "spmd: 16 passed, 0 failed (not run in this build)",
        "all libraries: 26 passed, 0 failed"], proc.stdout


def hold_lock(folder):
    fd = os.open(folder / ".gpsimd-lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.write(fd, b"process 4242 (a test, since 12:00:00)")
    return fd


@pytest.mark.campaign
def test_one_build_per_build_folder(built):
    """Issue 10 case 4: a second build of the same folder waits, naming the
    holder; BUILD_LOCK=fail stops at once; another folder does not wait."""
    fd = hold_lock(built / "build")
    try:
        proc = build(built, "BUILD_LOCK=fail")
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines()[-1] == (
            "scons: the build folder build is in use by process 4242 (a test, since 12:00:00) "
            "(BUILD_LOCK=wait waits for it)")
        other = build(built, "BUILD_DIR=other")
        assert other.returncode == 0 and "waiting" not in other.stderr
        waiter = subprocess.Popen([sys.executable, "-m", "SCons", "-Q"], cwd=str(built),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        assert waiter.poll() is None          # still waiting for the lock
    finally:
        os.close(fd)                          # the holder goes away
    out, err = waiter.communicate(timeout=300)
    assert waiter.returncode == 0, out + err
    assert ("scons: waiting for the build folder build, in use by process 4242 "
            "(a test, since 12:00:00)") in err
    assert out.splitlines()[-1] == "all libraries: 26 passed, 0 failed"


def test_a_clean_waits_for_the_build_that_holds_its_folder(built):
    """`scons -c` during a build removed the objects it was linking (the
    build then failed in the linker); it takes the folder's lock as a
    build does (BUILD_LOCK=fail: it stops at once, naming the holder)."""
    fd = hold_lock(built / "build")
    try:
        proc = run_scons(built, "-c", "BUILD_LOCK=fail")
    finally:
        os.close(fd)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "scons: the build folder build is in use by process 4242 (a test, since 12:00:00) "
        "(BUILD_LOCK=wait waits for it)")
    assert (built / "build/host/relu/relu.so").exists()
    proc = run_scons(built, "-c")
    assert proc.returncode == 0 and not (built / "build/host/relu/relu.so").exists()


#: A compiler launcher (``CXX_LAUNCHER=ccache``, first on PATH) whose
#: compile of relu.cpp, while the fifo ``hold`` exists in the project, waits
#: for a line from it before the compiler starts (the test's event: SCons
#: has signed the source, and its compile runs).
_HOLDING_LAUNCHER = """#!/bin/sh
case "$*" in *kernels/relu/relu.cpp*) if [ -p hold ]; then read x < hold; rm -f hold; fi;; esac
exec "$@"
"""


def test_a_kernel_saved_while_it_compiled_then_reverted_equals_a_clean_build(built, clean,
                                                                            tmp_path):
    """An editor saves a kernel while scons compiles it: the object holds
    the new text, SCons's record the text it signed before. Revert the
    save (undo, ``git stash``), and the next build found that object up to
    date: relu broken, its object the fixed one, ``relu: 10 passed, 0
    failed (not run in this build)``, exit status 0, on every build until
    relu.cpp changed again. The record of outputs now leaves out an output
    whose action read a file that changed while the build ran, so the next
    build makes it again."""
    launcher = tmp_path / "bin/ccache"
    launcher.parent.mkdir()
    launcher.write_text(_HOLDING_LAUNCHER)
    launcher.chmod(0o755)
    env = {"PATH": f"{launcher.parent}{os.pathsep}{os.environ['PATH']}"}
    set_state(built, "broken")
    os.mkfifo(built / "hold")
    first = subprocess.Popen([sys.executable, "-m", "SCons", "-Q", "-k", "-j2",
                              "CXX_LAUNCHER=ccache"], cwd=str(built), text=True,
                             env=dict(os.environ, **env), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    held = os.open(built / "hold", os.O_WRONLY)        # (relu.cpp signed, its compile waits)
    try:
        set_state(built, "good")                        # the editor saves the fix
    finally:
        os.write(held, b"go\n")
        os.close(held)
    out, _ = first.communicate(timeout=600)
    assert first.returncode == 0, out
    # (the fixed object is the one built before: run again, or still current)
    assert re.search(r"^relu: 10 passed, 0 failed( \(not run in this build\))?$", out, re.M), out
    set_state(built, "broken")                          # and the save is undone
    proc = run_scons(built, "-Q", "-k", "CXX_LAUNCHER=ccache", env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "relu: 4 passed, 6 failed" in proc.stdout.splitlines(), proc.stdout
    assert outcome(built) == clean("broken")


@pytest.mark.campaign
def test_two_builds_at_once_with_an_edit_between_them(built, clean):
    """Two terminals: an edit, a build, the revert, a second build at once.
    Both succeed or fail for their own sources, never spuriously; the end
    state equals a clean build."""
    set_state(built, "broken")
    first = subprocess.Popen([sys.executable, "-m", "SCons", "-Q", "-j2"], cwd=str(built),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    set_state(built, "good")
    second = subprocess.Popen([sys.executable, "-m", "SCons", "-Q", "-j2"], cwd=str(built),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out2, err2 = second.communicate(timeout=600)
    first.communicate(timeout=600)
    assert second.returncode == 0, out2 + err2
    assert "wrote no results" not in out2 + err2
    assert outcome(built) == clean("good")


@pytest.mark.campaign
def test_a_killed_holder_leaves_no_stale_lock(built):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, time\n"
         "fd = os.open('build/.gpsimd-lock', os.O_RDWR)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(600)\n"],
        cwd=str(built), stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    proc = build(built, "BUILD_LOCK=fail")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_digests_are_always_computed_and_never_from_the_cache(built, tmp_path):
    """Issue 10 case 9: `scons digests` with a CacheDir prints the digests
    every time and writes them to build/host/digests.txt."""
    cache = tmp_path / "cache"
    first = build(built, "digests", f"CACHE_DIR={cache}")
    again = build(built, "digests", f"CACHE_DIR={cache}")
    lines = lambda p: [l for l in p.stdout.splitlines() if re.match(r"^[0-9a-f]{64}  ", l)]
    assert lines(first) and lines(first) == lines(again)
    assert (built / "build/host/digests.txt").read_text().splitlines() == lines(again)


def test_no_output_holds_the_absolute_project_path(built):
    top = str(built).encode()
    hits = [str(p.relative_to(built)) for p in (built / "build").rglob("*")
            if p.is_file() and top in p.read_bytes()]
    assert hits == []


def kill_rounds(proj, rng, points, delays, command=None, rounds=4):
    """Kill rounds: each an edit (another source state), an interrupt at one
    of ``points`` (None: after a delay drawn from ``delays``), SIGKILL or
    SIGINT, then the edit kept or reverted; yields ``(point, sig, target,
    state)`` with the sources in ``state``, for the caller's recovery
    build. ``GPSIMD_KILL_ROUNDS`` rounds (default ``rounds``)."""
    state = "good"
    for _ in range(int(os.environ.get("GPSIMD_KILL_ROUNDS", str(rounds)))):
        target = rng.choice([s for s in ("good", "broken", "comment") if s != state])
        set_state(proj, target)
        point = rng.choice(points)
        sig = rng.choice([signal.SIGKILL, signal.SIGINT])
        interrupt(proj, sig, point, delay=None if point else rng.uniform(*delays),
                  command=command)
        state = rng.choice([target, state])    # keep the edit, or revert it
        set_state(proj, state)
        yield point, sig, target, state


@pytest.mark.campaign
def test_randomized_kills_then_edits_equal_clean_builds(built, clean):
    """Kill points in compile, link, pack and test, SIGKILL or SIGINT, each
    followed by an edit or a revert; every recovery build equals a clean
    build of the sources it sees."""
    rng = random.Random(int(os.environ.get("GPSIMD_KILL_SEED", "10")))
    points = [r"^" + PROGRESS + p for p in (
        r"CXX +build/host/relu/obj/", r"CXX +build/host/spmd/obj/", r"LINK +", r"PACK +",
        r"TEST +relu ", r"TEST +spmd ")] + [None]
    for point, sig, target, state in kill_rounds(built, rng, points, (0.5, 6.0)):
        build(built)
        assert outcome(built) == clean(state), (point, sig, target, state)


@pytest.mark.campaign
def test_randomized_kills_on_the_ninja_path_then_edits_equal_clean_builds(tmp_path, clean):
    """Issue 25: the interruption guarantee on the ninja path. Kill points
    in compile, link, pack and test of `ninja -f build/build.ninja`, SIGKILL
    or SIGINT to the whole group, each followed by an edit or a revert; the
    next ninja run equals a clean SCons build of the sources it sees
    (digests and results), and its summary is true."""
    ninja = os.path.join(pytest.importorskip("ninja").BIN_DIR, "ninja")
    proj = make_project(tmp_path / "p")
    proc = run_scons(proj, "-Q", "--experimental=ninja")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    command = [ninja, "-f", "build/build.ninja", "-j2"]
    rng = random.Random(int(os.environ.get("GPSIMD_KILL_SEED", "25")))
    points = [r"build/host/relu/obj/", r"build/host/spmd/obj/", r"\.so\b",
              r"packed\.so", r"test-results\.json"] + [None]
    for point, sig, target, state in kill_rounds(proj, rng, points, (0.3, 4.0), command,
                                                     rounds=3):
        run = subprocess.run(command + ["-k", "0"], cwd=str(proj), capture_output=True,
                             text=True, timeout=900)
        lines = run.stdout.splitlines()
        want = clean(state)[1]
        passed = sum((ok or failed)["passed"] for ok, failed in want.values())
        total = [l for l in lines if l.startswith("all libraries: ")]
        assert total and total[-1].startswith(f"all libraries: {passed} passed"), \
            (point, sig, target, state, run.stdout[-2000:])
        assert (run.returncode == 0) == (state != "broken"), (point, sig, state)
        digests = subprocess.run(command + ["build/host/digests.txt"], cwd=str(proj),
                                 capture_output=True, text=True, timeout=900)
        assert digests.returncode == 0, digests.stdout + digests.stderr
        got = ((proj / "build/host/digests.txt").read_text().splitlines(), results_of(proj))
        assert got == clean(state), (point, sig, target, state)
